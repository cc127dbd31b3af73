//! The SQLSTATE and message of an error a tokio-postgres client got, for the tests that talk
//! to the real server.

// Each test crate that includes this module uses only part of it.
#![allow(
    dead_code,
    reason = "each crate that includes this module uses part of it"
)]

/// The error's SQLSTATE, or a description when the server sent none.
pub fn code(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.code().code().to_string())
        .unwrap_or_else(|| format!("not a db error: {e}"))
}

/// The server's message, or nothing when the error did not come from the server.
pub fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default()
}
