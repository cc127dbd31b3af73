//! Where rows come from: text values and COPY data decoded into Arrow batches, the
//! built-in demo generator of host events, and the sources saql reads by itself (files,
//! Kafka) with their record decoders.

mod columns;
pub mod copy_binary;
pub mod csv;
pub mod demo;
pub mod file;
pub mod insert;
pub mod json;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod param;
pub mod records;
pub mod spec;
pub mod value;
