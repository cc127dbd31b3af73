//! Cursors of one session: `DECLARE c CURSOR FOR SUBSCRIBE q` (or `FOR SELECT ...`), then
//! `FETCH n FROM c`, as psql does under `\set FETCH_COUNT n`. A FETCH on a subscription waits
//! until at least one row exists, then returns what is there, up to `n`. A cursor over a
//! SELECT reads its rows as they are produced: a FETCH runs the query only as far as its
//! rows need.

use crate::error::sqlstate;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use futures::StreamExt;

use crate::error::{Error, Result};
use crate::runtime::engine::{StatementResult, Subscription};
use crate::runtime::{RowStream, SubscriptionEvent};

/// An open cursor.
pub struct Cursor {
    schema: SchemaRef,
    pending: VecDeque<RecordBatch>,
    live: Option<Subscription>,
    /// The rest of a SELECT's rows, until they are all read.
    finite: Option<RowStream>,
}

/// What a FETCH took: rows, and the error that ended the cursor's query after them.
pub struct Taken {
    /// The schema of the rows.
    pub schema: SchemaRef,
    /// The rows.
    pub batches: Vec<RecordBatch>,
    /// The error the query ended with, after these rows.
    pub error: Option<Error>,
}

/// The cursors of a session by name.
#[derive(Default)]
pub struct Cursors {
    open: HashMap<String, Cursor>,
}

fn no_cursor(name: &str) -> Error {
    Error::Catalog {
        sqlstate: sqlstate::INVALID_CURSOR_NAME,
        message: format!("cursor \"{name}\" does not exist"),
        location: None,
    }
}

impl Cursors {
    /// Opens a cursor over what a statement produced (rows or a subscription).
    pub fn declare(&mut self, name: String, result: StatementResult) -> Result<()> {
        if self.open.contains_key(&name) {
            return Err(Error::Catalog {
                sqlstate: sqlstate::DUPLICATE_CURSOR,
                message: format!("cursor \"{name}\" already exists"),
                location: None,
            });
        }
        let cursor = match result {
            StatementResult::Rows { schema, batches } => Cursor {
                schema,
                pending: batches.into(),
                live: None,
                finite: None,
            },
            StatementResult::Streaming { rows, copy: None } => Cursor {
                schema: rows.schema().clone(),
                pending: VecDeque::new(),
                live: None,
                finite: Some(rows),
            },
            StatementResult::Subscribe(sub) => Cursor {
                schema: sub.schema.clone(),
                pending: VecDeque::new(),
                live: Some(sub),
                finite: None,
            },
            _ => {
                return Err(Error::NotSupported(
                    "a cursor reads a SELECT or a SUBSCRIBE".into(),
                ))
            }
        };
        self.open.insert(name, cursor);
        Ok(())
    }

    /// Closes one cursor, or all.
    pub fn close(&mut self, name: Option<&str>) -> Result<()> {
        match name {
            None => self.open.clear(),
            Some(n) => {
                self.open.remove(n).ok_or_else(|| no_cursor(n))?;
            }
        }
        Ok(())
    }

    /// Whether a FETCH can answer now: rows are waiting, or the cursor is not live, or its
    /// subscription ended. Collects what the subscription has delivered so far.
    pub fn ready(&mut self, name: &str) -> Result<bool> {
        let cursor = self.open.get_mut(name).ok_or_else(|| no_cursor(name))?;
        let Some(sub) = cursor.live.as_mut() else {
            return Ok(true);
        };
        loop {
            match sub.events.try_recv() {
                Ok(ev) => push_event(&mut cursor.pending, ev)?,
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    cursor.live = None;
                    return Ok(true);
                }
            }
        }
        Ok(!cursor.pending.is_empty())
    }

    /// Waits up to `max` for the subscription behind a cursor to deliver something.
    pub async fn wait(&mut self, name: &str, max: Duration) -> Result<()> {
        let cursor = self.open.get_mut(name).ok_or_else(|| no_cursor(name))?;
        if let Some(sub) = cursor.live.as_mut() {
            match tokio::time::timeout(max, sub.events.recv()).await {
                Ok(Some(ev)) => push_event(&mut cursor.pending, ev)?,
                Ok(None) => cursor.live = None,
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// The schema of a cursor's rows.
    pub fn schema(&self, name: &str) -> Result<SchemaRef> {
        let cursor = self.open.get(name).ok_or_else(|| no_cursor(name))?;
        Ok(cursor.schema.clone())
    }

    /// Rows collected and not yet taken.
    pub fn pending_rows(&self, name: &str) -> usize {
        self.open
            .get(name)
            .map_or(0, |c| c.pending.iter().map(RecordBatch::num_rows).sum())
    }

    /// Whether a cursor still reads a live subscription.
    pub fn is_live(&self, name: &str) -> bool {
        self.open.get(name).is_some_and(|c| c.live.is_some())
    }

    /// Whether a cursor has nothing more to give: no rows waiting, no live subscription and
    /// no SELECT still running.
    pub fn exhausted(&self, name: &str) -> bool {
        self.open
            .get(name)
            .is_none_or(|c| c.live.is_none() && c.finite.is_none() && c.pending.is_empty())
    }

    /// The next rows of a cursor, at most `max`: waiting rows first, else the next batch its
    /// SELECT produces. None when nothing is waiting and its SELECT ended (a subscription's
    /// rows are only those waiting). An error ends the SELECT.
    pub async fn next_batch(&mut self, name: &str, max: usize) -> Result<Option<RecordBatch>> {
        let cursor = self.open.get_mut(name).ok_or_else(|| no_cursor(name))?;
        let batch = match cursor.pending.pop_front() {
            Some(batch) => batch,
            None => {
                let Some(rows) = cursor.finite.as_mut() else {
                    return Ok(None);
                };
                match rows.next().await {
                    Some(Ok(batch)) => batch,
                    Some(Err(e)) => {
                        cursor.finite = None;
                        return Err(e);
                    }
                    None => {
                        cursor.finite = None;
                        return Ok(None);
                    }
                }
            }
        };
        if batch.num_rows() > max {
            let rest = batch.slice(max, batch.num_rows() - max);
            cursor.pending.push_front(rest);
            return Ok(Some(batch.slice(0, max)));
        }
        Ok(Some(batch))
    }

    /// Takes up to `count` rows (all when `None`): those waiting, then those its SELECT
    /// produces next.
    pub async fn take(&mut self, name: &str, count: Option<u64>) -> Result<Taken> {
        let schema = self.schema(name)?;
        let limit = count.map(|c| c as usize).unwrap_or(usize::MAX);
        let mut batches = Vec::new();
        let mut taken = 0usize;
        while taken < limit {
            match self.next_batch(name, limit - taken).await {
                Ok(Some(batch)) => {
                    taken += batch.num_rows();
                    batches.push(batch);
                }
                Ok(None) => break,
                Err(e) => {
                    return Ok(Taken {
                        schema,
                        batches,
                        error: Some(e),
                    })
                }
            }
        }
        Ok(Taken {
            schema,
            batches,
            error: None,
        })
    }
}

fn push_event(pending: &mut VecDeque<RecordBatch>, ev: SubscriptionEvent) -> Result<()> {
    match ev {
        SubscriptionEvent::Rows(b) => {
            pending.push_back(b);
            Ok(())
        }
        SubscriptionEvent::Failed(reason) => Err(Error::QueryFailed(reason)),
    }
}
