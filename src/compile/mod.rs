//! Compiling saql queries for other engines, for when one machine is not enough: the same
//! detection queries run on a distributed engine people already operate. Apache Flink
//! ([`flink`]) is the one target: it has event-time windows, `MATCH_RECOGNIZE` and
//! exactly-once checkpoints.

pub mod flink;
