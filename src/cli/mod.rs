//! The subcommands of the `saql` binary, one module each.

pub mod cases;
pub mod check;
pub mod csv_text;
pub mod flink;
pub mod input;
pub mod prefetch;
pub mod query_files;
pub mod replay;
pub mod run;
pub mod serve;
pub mod source;
pub mod test;
pub mod user;
