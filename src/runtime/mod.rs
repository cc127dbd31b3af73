//! Running queries. The [`engine::Engine`] ties the hubs to the catalog and executes
//! statements; the rest is in five folders, each depending only on those listed before it:
//!
//! - `core`: the engine core. Each stream is a [`core::hub::StreamHub`] with its own lock,
//!   holding its watermark, the operator graph of the queries that read it and their
//!   outputs; rows enter it through one door (`core::door`) for INSERT, COPY, sources and
//!   recovery alike.
//! - `durability`: the ingest log, checkpoints and recovery.
//! - `pg`: what makes saql look like PostgreSQL to clients: pg_catalog, rewrites of the SQL
//!   that drivers send, PostgreSQL's functions and settings.
//! - `connectors`: the loops that run sources and sinks.
//! - `statements`: one module per statement family (DDL, COPY, SUBSCRIBE, SHOW, ad hoc
//!   SELECT), each an `impl Engine` block over the core.

pub(crate) mod connectors;
pub(crate) mod core;
pub(crate) mod durability;
pub mod engine;
pub mod pg;
pub(crate) mod statements;

pub use connectors::sinks::{SinkProgress, SinkStatus};
pub use core::output::{
    QueryFailure, SubscriptionEvent, SubscriptionEvents, DEFAULT_SUBSCRIBER_BUFFER_BYTES,
    SEQ_COLUMN,
};
pub use core::rows::RowStream;
pub use durability::wal::FsyncPolicy;
pub use engine::DEFAULT_MAX_QUERY_STATE_BYTES;
pub use statements::stats::{
    EngineStats, HistoryStats, QueryStats, QueryStatus, SinkStats, SourceStats, StreamStats,
};
