//! `COPY ... FROM STDIN`: a statement starts a [`CopyIn`] that decodes the data as it arrives
//! (text, CSV or PostgreSQL's binary format, with the stream's columns or a list of them), and
//! [`Engine::finish_copy`] inserts its rows once all of them decoded: a COPY is all or nothing.
//! `COPY (query) TO STDOUT` runs the query as an ad hoc `SELECT` (a stream copied by name
//! gives its recent rows, a continuous query its retained results) within the same result
//! limits, and the server sends the rows as COPY data.

use crate::error::sqlstate;

use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};
use crate::runtime::engine::{Engine, StatementResult};
use crate::runtime::pg::functions::SessionInfo;
use crate::runtime::statements::adhoc;
use crate::sources::csv::{CopyDecoder, CopyFormat, CopyOptions};
use crate::sql::{CopyFrom, CopyTo};

/// A COPY FROM STDIN in progress: [`CopyIn::feed`] it the data as it arrives, then hand it
/// to [`Engine::finish_copy`].
pub struct CopyIn {
    /// Target stream or table.
    pub(in crate::runtime) stream: String,
    /// Number of columns per input line.
    pub(in crate::runtime) columns: usize,
    /// Whether the data is in PostgreSQL's binary format (`FORMAT binary`).
    pub(in crate::runtime) binary: bool,
    /// Decodes the incoming data.
    pub(in crate::runtime) decoder: CopyDecoder,
}

impl CopyIn {
    /// Number of columns per input line (what the client is told to send).
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Whether the data is in PostgreSQL's binary format (`FORMAT binary`).
    pub fn binary(&self) -> bool {
        self.binary
    }

    /// Decodes the next chunk of COPY data; an error names the failing line, and nothing of
    /// the COPY is applied after one.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        self.decoder.feed(chunk)
    }
}

impl Engine {
    pub(in crate::runtime) fn start_copy(&self, c: &CopyFrom) -> Result<StatementResult> {
        let name = normalize_object(&c.stream);
        let (schema, kind) = match self.read().catalog.table(&name) {
            Some(t) => (t.store.schema().clone(), "table"),
            None => (self.stream_schema(&name)?, "stream"),
        };
        let columns: Vec<usize> = if c.columns.is_empty() {
            (0..schema.fields().len()).collect()
        } else {
            c.columns
                .iter()
                .map(|col| {
                    let n = normalize(col);
                    schema.index_of(&n).map_err(|_| {
                        Error::plan(
                            sqlstate::UNDEFINED_COLUMN,
                            format!("column \"{n}\" of {kind} \"{name}\" does not exist"),
                        )
                    })
                })
                .collect::<Result<_>>()?
        };
        let mut options = if c.csv {
            CopyOptions::csv()
        } else {
            CopyOptions::text()
        };
        if c.binary {
            if c.header || c.delimiter.is_some() || c.quote.is_some() || c.null.is_some() {
                return Err(Error::invalid_input(
                    sqlstate::SYNTAX_ERROR,
                    "cannot specify HEADER, DELIMITER, NULL or QUOTE in BINARY mode",
                ));
            }
            options.format = CopyFormat::Binary;
        }
        options.header = c.header;
        if let Some(d) = c.delimiter {
            options.delimiter = ascii_option(d, "DELIMITER")?;
        }
        if let Some(q) = c.quote {
            options.quote = ascii_option(q, "QUOTE")?;
        }
        if let Some(n) = &c.null {
            options.null = n.clone();
        }
        let n = columns.len();
        Ok(StatementResult::CopyIn(Box::new(CopyIn {
            stream: name,
            columns: n,
            binary: c.binary,
            decoder: CopyDecoder::new(schema, columns, options)?
                .with_limits(self.config.max_copy_line_bytes, self.config.max_copy_bytes)
                .with_threads(self.config.workers),
        })))
    }

    /// `COPY (query) TO STDOUT`: the query's rows, to be sent in `c.format`.
    pub(in crate::runtime) async fn copy_to(
        &self,
        c: CopyTo,
        session: &SessionInfo,
    ) -> Result<StatementResult> {
        let mut stmt = datafusion::sql::sqlparser::ast::Statement::Query(c.query);
        let ctx = {
            let shared = self.read();
            adhoc::inline_views(&mut stmt, &shared.catalog);
            adhoc::context(&shared, session)?
        };
        let rows = adhoc::select(ctx, stmt, &[], session).await?;
        Ok(StatementResult::Streaming {
            rows,
            copy: Some(c.format),
        })
    }

    /// Completes a COPY: decodes what is left, then inserts its rows, the batches decoded
    /// while the data arrived, as one unit: logged in one frame and applied once that is
    /// durable. Nothing is inserted unless every line decoded and the frame reached the disk.
    pub fn finish_copy(&self, copy: CopyIn) -> Result<u64> {
        let batches = copy.decoder.finish_batches()?;
        let table = self.read().catalog.table(&copy.stream).cloned();
        if let Some(table) = table {
            return self.copy_into_table(&table, &batches);
        }
        let hub = self.hub(&copy.stream)?;
        let entry = crate::runtime::core::door::Entry {
            batches,
            source: None,
            lag: None,
        };
        Ok(self.enter(&copy.stream, &hub, entry)?.rows)
    }
}

fn ascii_option(c: char, what: &str) -> Result<u8> {
    if c.is_ascii() {
        Ok(c as u8)
    } else {
        Err(Error::invalid_input(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("COPY {what} must be a single one-byte character"),
        ))
    }
}
