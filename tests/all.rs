//! Every integration test in one binary (one link instead of one per file; the support
//! modules compiled once): each file of tests/ is a module here, run as
//! `cargo test --test all <file>::` (e.g. `cargo test --test all history::`). The SQL
//! logic tests are their own binary, tests/slt.rs (`cargo test --test slt`).

// Shared by several test files.
#[path = "support/adhoc.rs"]
mod adhoc;
#[path = "support/binary.rs"]
mod binary;
#[path = "kafka/broker.rs"]
mod broker;
mod common;
mod eval_common;
#[path = "eval_common/nab_score.rs"]
mod nab_score;
mod pg_errors;

// The tests, one module per file.
mod adversary;
mod alter_query;
mod auth;
mod change_recompute;
mod cli;
mod console;
mod crash;
mod demo_attacks;
mod eval_nab;
mod eval_otrf;
mod explain;
mod flink;
mod frame_recompute;
mod history;
mod kafka;
mod lifecycle;
mod metrics;
mod model_recompute;
mod no_panic;
mod pattern_recompute;
mod pg_tools;
mod readme;
mod recovery;
mod server;
mod sharded_recompute;
mod shared_predicates;
mod sinks;
mod sources;
mod sql_mutations;
mod streaming;
mod synthetic_detect;
mod union_recompute;
mod value_text;
mod window_recompute;
