//! The loops that run sources (reading a file or a topic into a stream through the core's
//! door, `source_loop`) and sinks (delivering a query's results, advancing their delivered
//! seq, `sink_loop`), each written once for every connector of its kind.

pub(crate) mod sink_loop;
// Sinks deliver only with the server feature (their loop needs its clients).
#[cfg_attr(
    not(feature = "server"),
    allow(dead_code, reason = "sinks deliver only with the server feature")
)]
pub(crate) mod sinks;
pub(crate) mod source_loop;
pub(crate) mod sources;
