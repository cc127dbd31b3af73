//! The subcommands of the `saql` binary, one module each.

pub mod check;
pub mod run;
pub mod serve;
pub mod source;
pub mod test;
