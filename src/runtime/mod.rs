//! Running queries: each stream is a [`hub::StreamHub`] with its own lock, holding its
//! watermark, the operator graph of the queries that read it and their outputs; the
//! [`engine::Engine`] ties the hubs to the catalog and executes statements.

mod adhoc;
mod adhoc_windows;
mod checkpoint;
mod copy;
mod ddl;
mod door;
pub mod engine;
mod function_hint;
mod graph;
mod hub;
mod ingest;
mod metrics;
mod output;
mod param_types;
mod pg_array_literal;
mod pg_catalog;
pub mod pg_functions;
mod pg_rewrite;
mod predicates;
mod recovery;
mod retained;
mod shedding;
#[cfg(test)]
mod shedding_tests;
mod show;
mod sink_loop;
// Sinks deliver only with the server feature (their loop needs its clients).
#[cfg_attr(not(feature = "server"), allow(dead_code))]
mod sinks;
mod sources;
mod stream;
mod subscribe_view;
pub mod wal;

pub use engine::DEFAULT_MAX_QUERY_STATE_BYTES;
pub use output::{
    QueryFailure, SubscriptionEvent, SubscriptionEvents, DEFAULT_SUBSCRIBER_BUFFER_BYTES,
    SEQ_COLUMN,
};
pub use sinks::{SinkProgress, SinkStatus};
