//! Sending a result as it is produced: an ad hoc SELECT's [`RowStream`] becomes DataRows (or
//! COPY lines) a batch at a time, so the server holds one batch, never the whole result. The
//! stream ends with the session's statement timeout (57014) or a CancelRequest (57014); an
//! error after some rows reaches the client as an ErrorResponse after those rows, as in
//! PostgreSQL. A client that goes away fails the next write, which drops the stream and with
//! it the query.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::sink::{Sink, SinkExt};
use futures::stream::{self, StreamExt};
use pgwire::api::results::{FieldFormat, QueryResponse, Response, Tag};
use pgwire::api::{ClientInfo, ConnectionHandle};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone};
use pgwire::messages::PgWireBackendMessage;

use super::encode::{copy_lines, data_rows, field_infos};
use super::handler::{begin_copy_out, pg_error};
use super::session::Active;
use crate::error::Error;
use crate::runtime::RowStream;
use crate::sql::CopyOut;

/// `rows`, ended with 57014 (naming the session's `timeout`) once `left` has passed.
pub(super) fn with_deadline(rows: RowStream, left: Duration, timeout: Duration) -> RowStream {
    let deadline = tokio::time::Instant::now() + left;
    let schema = rows.schema().clone();
    let batches = stream::unfold(Some(rows), move |rows| async move {
        let mut rows = rows?;
        match tokio::time::timeout_at(deadline, rows.next()).await {
            Ok(Some(batch)) => Some((batch, Some(rows))),
            Ok(None) => None,
            Err(_) => Some((Err(Error::StatementTimeout(timeout)), None)),
        }
    });
    RowStream::new(schema, batches)
}

/// `rows`, ended with 57014 when the client's CancelRequest arrives while they are read.
/// The cancel key is claimed when the first row is asked for: pgwire sends the rows of a
/// simple query after the handler returned, outside its own cancel handling.
pub(super) fn cancelable(rows: RowStream, handle: Arc<ConnectionHandle>) -> RowStream {
    let schema = rows.schema().clone();
    // The cancel key's receiver: None until claimed; Some(None) once another statement
    // claimed the key.
    let state = (Some(rows), None::<Option<oneshot::Receiver<()>>>);
    let batches = stream::unfold(state, move |(rows, cancel)| {
        let handle = handle.clone();
        async move {
            let mut rows = rows?;
            let mut cancel = match cancel {
                Some(rx) => rx,
                None => Some(handle.start_query().await),
            };
            loop {
                let canceled = async {
                    match cancel.as_mut() {
                        Some(rx) => rx.await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    batch = rows.next() => return batch.map(|b| (b, (Some(rows), Some(cancel)))),
                    canceled = canceled => {
                        if canceled {
                            return Some((Err(Error::Canceled), (None, Some(None))));
                        }
                        // Another statement claimed the key: nothing can cancel this one.
                        cancel = None;
                    }
                }
            }
        }
    });
    RowStream::new(schema, batches)
}

/// A result set whose DataRows are encoded from `rows` a batch at a time while pgwire sends
/// them; an error from `rows` is sent after the rows before it. The session stays busy
/// (`active`) until the last row is sent.
pub(super) fn streamed_response(
    rows: RowStream,
    format: &(dyn Fn(usize) -> FieldFormat + Sync),
    query: &str,
    active: Option<Active>,
) -> QueryResponse {
    let fields = Arc::new(field_infos(rows.schema(), format));
    let (encode, query) = (fields.clone(), query.to_string());
    let data = rows.flat_map(move |batch| {
        let _busy = &active;
        let rows = batch.and_then(|b| data_rows(&b, &encode));
        stream::iter(match rows {
            Ok(rows) => rows.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(pg_error(&e, &query))],
        })
    });
    QueryResponse::new(fields, data)
}

/// Sends rows as COPY data as they are produced (CopyOutResponse, a CSV header if asked for,
/// one CopyData per line, each batch flushed, CopyDone) and returns the `COPY n` tag.
pub(super) async fn send_copy_out<C>(
    client: &mut C,
    copy: CopyOut,
    mut rows: RowStream,
    query: &str,
) -> PgWireResult<Response>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let schema = rows.schema().clone();
    begin_copy_out(client, copy, &schema).await?;
    let mut sent = 0;
    while let Some(batch) = rows.next().await {
        let batch = batch.map_err(|e| pg_error(&e, query))?;
        for line in copy_lines(&batch, copy).map_err(|e| pg_error(&e, query))? {
            client
                .feed(PgWireBackendMessage::CopyData(CopyData::new(Bytes::from(
                    line,
                ))))
                .await?;
        }
        client.flush().await?;
        sent += batch.num_rows();
    }
    client
        .send(PgWireBackendMessage::CopyDone(CopyDone::new()))
        .await?;
    Ok(Response::Execution(Tag::new("COPY").with_rows(sent)))
}
