//! What survives a crash: the ingest log, checkpoints of operator state, and recovery that
//! replays the log after the newest checkpoint.

pub(crate) mod checkpoint;
pub mod history;
pub(crate) mod recovery;
pub mod wal;
