//! `COPY (query) TO STDOUT` and `COPY stream [(cols)] TO STDOUT`: an ad hoc query's rows, or a
//! stream's or query's retained rows, sent as COPY data (psql's `\copy (SELECT ...) TO 'file'`
//! and `\copy stream TO 'file'` send these).

use std::fmt;

use datafusion::sql::sqlparser::ast as sq;

use super::ast::CopyOut;

/// `COPY (query) TO STDOUT [WITH (FORMAT text | csv, HEADER)]`; a stream or query copied by
/// name is `SELECT cols FROM name`.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyTo {
    /// The rows to send.
    pub query: Box<sq::Query>,
    /// Their framing.
    pub format: CopyOut,
}

impl fmt::Display for CopyTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "COPY ({}) TO STDOUT", self.query)?;
        match self.format {
            CopyOut::Text => Ok(()),
            CopyOut::Csv { header } => write!(
                f,
                " WITH (FORMAT csv{})",
                if header { ", HEADER" } else { "" }
            ),
        }
    }
}
