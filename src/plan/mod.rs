//! Planning: the catalog of streams and queries, and the translation of a continuous query's
//! SQL into a chain of incremental operators. DataFusion's SQL planner resolves names and
//! types into a logical plan; we map each of its nodes onto the spec of an operator of ours
//! ([`OperatorSpec`]), from which the runtime builds the operators.
//!
//! `query.rs` walks the logical plan; `from.rs` resolves `FROM` (streams, window table
//! functions, `MATCH_RECOGNIZE` through `pattern/`); `aggregate.rs`, `history.rs` and
//! `topn.rs` plan windowed aggregation, window functions and window Top-N; `clauses.rs` the
//! clauses after the body; `expr.rs` compiles expressions (and evaluates INSERT's constants
//! for `sources`). The operators take their own configuration types: the plan converts the
//! AST's into them, so nothing below this layer reads the AST.

mod aggregate;
pub mod carry;
pub mod catalog;
pub mod chained;
mod clauses;
mod context;
mod evidence;
pub mod explain;
mod expr;
mod from;
mod grouping;
mod history;
mod interval_join;
mod lookup;
mod pattern;
#[cfg(test)]
mod position_tests;
pub mod query;
pub mod result_time;
pub mod retention;
pub mod rollup;
pub mod spec;
pub mod table_def;
mod temporal;
mod topn;
pub mod union;
mod window_join;

pub use catalog::{Catalog, EventTimeDef, StreamDef};
pub use expr::ConstantEvaluator;
pub use query::{plan_continuous, plan_query, QueryPlan, WindowSpec};
pub use spec::OperatorSpec;
pub use table_def::TableDef;
