//! The engine core: stream hubs, the operator graph of each stream, query outputs, shared
//! predicates, load shedding, and the one door through which rows enter a stream.

pub(crate) mod door;
pub(crate) mod graph;
pub(crate) mod hub;
pub(crate) mod ingest;
pub(crate) mod output;
pub(crate) mod predicates;
pub(crate) mod retained;
pub mod rows;
pub(crate) mod shedding;
#[cfg(test)]
mod shedding_tests;
pub(crate) mod stream;
pub(crate) mod union;
