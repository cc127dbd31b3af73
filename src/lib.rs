//! saql: a streaming SQL engine for real-time anomaly detection over system monitoring data.
//!
//! Statements flow through the same pipeline whether they arrive over the Postgres wire
//! protocol or through this library: [`sql`] parses extended SQL into an AST, [`plan`] resolves
//! it against the catalog into a graph of incremental [`operators`], and [`runtime`] feeds each
//! stream's Arrow batches through the queries that read it, advancing watermarks and handing
//! result batches to subscribers. [`sources`] decodes INSERT and COPY input and generates demo
//! events; [`server`] (feature `server`) serves it all over pgwire.

pub mod error;
pub mod operators;
pub mod plan;
pub mod runtime;
#[cfg(feature = "server")]
pub mod server;
pub mod sources;
pub mod sql;
pub mod time;

pub use error::{Error, Result};
pub use runtime::engine::{Engine, EngineConfig, StatementResult, Subscription};
