//! Planning: the catalog of streams and queries, and the translation of a continuous query's
//! SQL into a chain of incremental operators. DataFusion's SQL planner resolves names and
//! types into a logical plan; we map each of its nodes onto the spec of an operator of ours
//! ([`OperatorSpec`]), from which the runtime builds the operators.

mod aggregate;
pub mod catalog;
mod clauses;
mod context;
mod evidence;
pub mod explain;
pub(crate) mod expr;
mod from;
mod grouping;
mod history;
mod pattern;

pub(crate) use context::PlanContext;
#[cfg(test)]
mod position_tests;
pub mod query;
pub mod rollup;
pub mod spec;
mod topn;

pub use catalog::{Catalog, EventTimeDef, StreamDef};
pub use query::{plan_continuous, plan_query, QueryPlan, WindowSpec};
pub use spec::OperatorSpec;
