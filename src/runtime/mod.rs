//! Running queries: per-stream state (watermark, counters, recent rows), per-query pipelines
//! with their subscribers and retained results, and the [`engine::Engine`] that ties them to
//! the catalog and executes statements.

pub mod engine;
mod graph;
mod pg_catalog;
mod pipeline;
mod predicates;
mod retained;
mod stream;

pub use pipeline::SubscriptionEvent;
