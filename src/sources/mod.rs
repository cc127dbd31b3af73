//! Where rows come from: text values and COPY data decoded into Arrow batches, and the
//! built-in demo generator of host events.

pub mod copy_binary;
pub mod csv;
pub mod demo;
pub mod insert;
pub mod value;
