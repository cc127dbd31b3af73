//! The statement layer: one module per statement family, each an `impl Engine` block over
//! the engine core.

pub(crate) mod adhoc;
pub(crate) mod adhoc_windows;
pub(crate) mod alter;
pub(crate) mod backfill;
pub(crate) mod backfill_union;
pub(crate) mod copy;
pub(crate) mod ddl;
pub(crate) mod hunt;
pub(crate) mod metrics;
pub(crate) mod show;
pub mod stats;
pub(crate) mod subscribe;
pub(crate) mod table;
