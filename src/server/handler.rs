//! The pgwire handlers of one connection: simple queries, the statements every protocol runs
//! through the session (cursors, PREPARE/EXECUTE, savepoints), COPY FROM STDIN, and live
//! subscriptions streamed row by row (each flushed at once, so psql prints it at once). The
//! extended protocol is in [`super::extended`].

use crate::error::sqlstate;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::sql::sqlparser::ast as sq;
use futures::sink::{Sink, SinkExt};
use futures::stream::{self, StreamExt};
use futures::FutureExt;
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{CopyResponse, FieldFormat, Response, Tag};
use std::panic::AssertUnwindSafe;

use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, ConnectionManager, NoopHandler,
    PgWireServerHandlers, METADATA_DATABASE, METADATA_USER,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::data::RowDescription;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use tokio::sync::Mutex;

use super::auth::{self, Startup, Users};
use super::cursor::Cursors;
use super::encode::{copy_lines, csv_line, data_rows, field_infos};
use super::portal::LivePortals;
use super::prepared::{self, PreparedStatements};
use super::rows::{self, streamed_response};
use super::session::Session;
use crate::error::Error;
use crate::plan::catalog::{normalize, normalize_object};
use crate::runtime::engine::{CopyIn, StatementResult, Subscription};
use crate::runtime::pg::functions::SessionInfo;
use crate::runtime::RowStream;
use crate::runtime::SubscriptionEvent;
use crate::sources::param::Param;
use crate::sql::{self, CopyOut, Statement};
use crate::Engine;

/// How often a quiet subscription writes a harmless message to find out whether its client
/// is still there.
pub(super) const HEARTBEAT: Duration = Duration::from_secs(1);

/// Converts an engine error to a Postgres error with SQLSTATE and, where it applies to a
/// place in `query` (a syntax error, an unknown name), the 1-based character position.
pub fn pg_error(e: &Error, query: &str) -> PgWireError {
    let mut info = ErrorInfo::new("ERROR".into(), e.sqlstate().into(), e.to_string());
    match e.location() {
        Some(loc) => {
            info.position = Some(char_position(query, loc.line, loc.column).to_string());
        }
        // A syntax error without a token location is at the end of the input.
        None if matches!(e, Error::Parse { .. }) && !query.is_empty() => {
            info.position = Some(query.trim_end().chars().count().max(1).to_string());
        }
        None => {}
    }
    PgWireError::UserError(Box::new(info))
}

fn char_position(query: &str, line: u64, column: u64) -> usize {
    let mut pos = 0;
    for (i, l) in query.split('\n').enumerate() {
        if i as u64 + 1 == line {
            return pos + column as usize;
        }
        pos += l.chars().count() + 1;
    }
    pos.max(1)
}

/// What a caught panic says, for the XX000 that ends its statement.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".into());
    tracing::error!("a statement panicked: {what}");
    format!("the statement failed inside saql ({what}); please report it")
}

fn tag(text: &str) -> Tag {
    match text.rsplit_once(' ') {
        Some((cmd, n)) if n.chars().all(|c| c.is_ascii_digit()) => match n.parse() {
            Ok(rows) => Tag::new(cmd).with_rows(rows),
            Err(_) => Tag::new(text),
        },
        _ => Tag::new(text),
    }
}

pub(super) struct PendingCopy {
    copy: Box<CopyIn>,
    error: Option<Error>,
    query: String,
    /// The session is busy from the COPY statement to CopyDone or CopyFail (it is not idle
    /// between two CopyData messages, for the idle timeout and for shutdown).
    _active: super::session::Active,
}

/// Handlers for one client connection. Clones share the connection's COPY state.
#[derive(Clone)]
pub struct Connection {
    pub(super) engine: Engine,
    pub(super) manager: Arc<ConnectionManager>,
    pub(super) copy: Arc<Mutex<Option<PendingCopy>>>,
    pub(super) cursors: Arc<Mutex<Cursors>>,
    pub(super) live: Arc<Mutex<LivePortals>>,
    pub(super) prepared: Arc<Mutex<PreparedStatements>>,
    pub(super) session: Arc<Session>,
    pub(super) users: Option<Arc<Users>>,
    pub(super) require_tls: bool,
    /// The server's connection slots (None: not counted).
    pub(super) slots: Option<Arc<super::slots::Slots>>,
    /// The TLS certificate chain, for SCRAM channel binding.
    pub(super) cert_pem: Option<Arc<Vec<u8>>>,
}

/// The session a client's statements run for: its user, database, process id, whether its
/// role is admin, and the bounds it set on its results.
pub(super) fn session_info<C: ClientInfo>(
    client: &C,
    users: Option<&Users>,
    limits: &Session,
) -> SessionInfo {
    let bounds = limits.result_bounds();
    let metadata: &HashMap<String, String> = client.metadata();
    let user = metadata
        .get(METADATA_USER)
        .cloned()
        .unwrap_or_else(|| "saql".into());
    SessionInfo {
        database: metadata
            .get(METADATA_DATABASE)
            .cloned()
            .unwrap_or_else(|| user.clone()),
        user,
        pid: client.pid_and_secret_key().0,
        admin: auth::role_of(users, client) == auth::Role::Admin,
        max_result_rows: bounds.rows,
        max_result_bytes: bounds.bytes,
    }
}

impl Connection {
    /// Handlers for a new connection to `engine`.
    pub fn new(engine: Engine, manager: Arc<ConnectionManager>) -> Self {
        Connection {
            engine,
            manager,
            copy: Arc::new(Mutex::new(None)),
            cursors: Arc::new(Mutex::new(Cursors::default())),
            live: Arc::new(Mutex::new(LivePortals::default())),
            prepared: Arc::new(Mutex::new(PreparedStatements::default())),
            session: Session::new(None),
            users: None,
            require_tls: false,
            slots: None,
            cert_pem: None,
        }
    }

    /// These handlers offering SCRAM channel binding to TLS clients, with the server's
    /// certificate chain (PEM).
    pub fn with_channel_binding(mut self, cert_pem: Option<Arc<Vec<u8>>>) -> Self {
        self.cert_pem = cert_pem;
        self
    }

    /// These handlers counting their connection in `slots` once it logs in.
    pub fn with_slots(mut self, slots: Arc<super::slots::Slots>) -> Self {
        self.slots = Some(slots);
        self
    }

    /// These handlers authenticating clients against `users` (None: everyone is admin),
    /// refusing clients without TLS when `require_tls`.
    pub fn with_auth(mut self, users: Option<Arc<Users>>, require_tls: bool) -> Self {
        self.users = users;
        self.require_tls = require_tls;
        self
    }

    /// These handlers with the session state the server's limits watch.
    pub fn with_session(mut self, session: Arc<Session>) -> Self {
        self.session = session;
        self
    }

    /// The server's connections, for registering this one's cancel key.
    pub(super) fn manager(&self) -> &Arc<ConnectionManager> {
        &self.manager
    }

    /// Runs one statement: cursor statements here, in the session; everything else in the
    /// engine.
    pub(super) async fn run<C>(
        &self,
        client: &mut C,
        stmt: Statement,
        params: &[Param],
        query: &str,
        format: &(dyn Fn(usize) -> FieldFormat + Sync),
        extended: bool,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let fail = |e: Error| pg_error(&e, query);
        auth::authorize(auth::role_of(self.users.as_deref(), client), &stmt)?;
        let session = session_info(client, self.users.as_deref(), &self.session);
        let _active = self.session.active();
        match stmt {
            Statement::DeclareCursor { name, target } => {
                // A cursor's FETCHes are timed one by one, not from DECLARE.
                let result = self
                    .execute_timed(*target, params, &session, false)
                    .await
                    .map_err(fail)?;
                self.cursors
                    .lock()
                    .await
                    .declare(normalize(&name), result)
                    .map_err(fail)?;
                Ok(Response::Execution(Tag::new("DECLARE CURSOR")))
            }
            Statement::Fetch {
                name,
                count,
                timeout,
            } => {
                let name = normalize(&name);
                let mut cursors = self.cursors.lock().await;
                let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
                while count != Some(0) && !cursors.ready(&name).map_err(fail)? {
                    let now = tokio::time::Instant::now();
                    if deadline.is_some_and(|d| now >= d) {
                        break;
                    }
                    let wait = deadline.map_or(HEARTBEAT, |d| HEARTBEAT.min(d - now));
                    tokio::select! {
                        waited = cursors.wait(&name, wait) => waited.map_err(fail)?,
                        e = self.session.closed() => return Err(fail(e)),
                    }
                    if !cursors.ready(&name).map_err(fail)? {
                        client.send(heartbeat()).await?;
                    }
                }
                let taken = cursors.take(&name, count).await.map_err(fail)?;
                // Rows the query produced before an error are sent before it.
                let rows = stream::iter(taken.batches.into_iter().map(Ok::<_, Error>))
                    .chain(stream::iter(taken.error.map(Err)));
                let rows = RowStream::new(taken.schema, rows);
                let mut resp = streamed_response(rows, format, query, None);
                resp.set_command_tag("FETCH");
                Ok(Response::Query(resp))
            }
            Statement::CloseCursor { name } => {
                let name = name.as_ref().map(normalize);
                self.cursors
                    .lock()
                    .await
                    .close(name.as_deref())
                    .map_err(fail)?;
                Ok(Response::Execution(Tag::new(if name.is_some() {
                    "CLOSE CURSOR"
                } else {
                    "CLOSE CURSOR ALL"
                })))
            }
            Statement::Sql(s) => match *s {
                sq::Statement::Prepare {
                    name, statement, ..
                } => {
                    self.prepared
                        .lock()
                        .await
                        .prepare(normalize(&name), Statement::Sql(statement))
                        .map_err(fail)?;
                    Ok(Response::Execution(Tag::new("PREPARE")))
                }
                sq::Statement::Execute {
                    name: Some(name),
                    parameters,
                    ..
                } => {
                    let stmt = self
                        .prepared
                        .lock()
                        .await
                        .get(&normalize_object(&name))
                        .map_err(fail)?;
                    let args = prepared::arguments(&parameters).map_err(fail)?;
                    let result = self
                        .execute_timed(stmt, &args, &session, true)
                        .await
                        .map_err(fail)?;
                    self.respond(client, result, query, format, extended).await
                }
                sq::Statement::Deallocate { name, .. } => {
                    let mut prepared = self.prepared.lock().await;
                    if prepared::is_all(&name) {
                        prepared.clear();
                        Ok(Response::Execution(Tag::new("DEALLOCATE ALL")))
                    } else {
                        prepared.deallocate(&normalize(&name)).map_err(fail)?;
                        Ok(Response::Execution(Tag::new("DEALLOCATE")))
                    }
                }
                // saql has no transactions to undo (BEGIN and COMMIT only bound cursors):
                // savepoints are accepted, as drivers set them around their probes.
                sq::Statement::Savepoint { .. } => Ok(Response::Execution(Tag::new("SAVEPOINT"))),
                sq::Statement::ReleaseSavepoint { .. } => {
                    Ok(Response::Execution(Tag::new("RELEASE")))
                }
                sq::Statement::Rollback {
                    savepoint: Some(_), ..
                } => Ok(Response::Execution(Tag::new("ROLLBACK"))),
                sq::Statement::Discard { .. } => {
                    self.prepared.lock().await.clear();
                    let _ = self.cursors.lock().await.close(None);
                    self.live.lock().await.clear();
                    Ok(Response::Execution(Tag::new("DISCARD ALL")))
                }
                other => {
                    let other = Statement::Sql(Box::new(other));
                    if self.session.apply_set(&other).map_err(fail)? {
                        return Ok(Response::Execution(Tag::new("SET")));
                    }
                    let result = self
                        .execute_timed(other, params, &session, true)
                        .await
                        .map_err(fail)?;
                    self.respond(client, result, query, format, extended).await
                }
            },
            other => {
                if self.session.apply_set(&other).map_err(fail)? {
                    return Ok(Response::Execution(Tag::new("SET")));
                }
                let result = self
                    .execute_timed(other, params, &session, true)
                    .await
                    .map_err(fail)?;
                self.respond(client, result, query, format, extended).await
            }
        }
    }

    /// Executes a statement in the engine, within the session's statement timeout; with
    /// `whole`, the timeout also ends the reading of a SELECT's rows (not for a cursor's,
    /// which its FETCHes read).
    pub(super) async fn execute_timed(
        &self,
        stmt: Statement,
        params: &[Param],
        session: &SessionInfo,
        whole: bool,
    ) -> Result<StatementResult, Error> {
        let timeout = self.session.timeout_for(&stmt);
        let started = tokio::time::Instant::now();
        // A panic ends this statement with XX000; the connection and every other session go
        // on (the engine's locks do not poison).
        let run = AssertUnwindSafe(self.engine.execute_statement_for(stmt, params, session))
            .catch_unwind()
            .map(|r| r.unwrap_or_else(|panic| Err(Error::Internal(panic_message(&*panic)))));
        let result = match timeout {
            Some(t) => tokio::time::timeout(t, run)
                .await
                .unwrap_or(Err(Error::StatementTimeout(t)))?,
            None => run.await?,
        };
        Ok(match (result, timeout) {
            (StatementResult::Streaming { rows, copy }, Some(t)) if whole => {
                let left = t.saturating_sub(started.elapsed());
                StatementResult::Streaming {
                    rows: rows::with_deadline(rows, left, t),
                    copy,
                }
            }
            (result, _) => result,
        })
    }

    async fn respond<C>(
        &self,
        client: &mut C,
        result: StatementResult,
        query: &str,
        format: &(dyn Fn(usize) -> FieldFormat + Sync),
        extended: bool,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match result {
            StatementResult::Command(t) => Ok(match t.as_str() {
                "BEGIN" => Response::TransactionStart(tag(&t)),
                "COMMIT" | "ROLLBACK" => {
                    // Cursors and portals live until the end of the transaction, as in
                    // PostgreSQL.
                    let _ = self.cursors.lock().await.close(None);
                    self.live.lock().await.clear();
                    Response::TransactionEnd(tag(&t))
                }
                _ => Response::Execution(tag(&t)),
            }),
            StatementResult::CommandWithNotice { tag: t, notice } => {
                let info = ErrorInfo::new("NOTICE".into(), sqlstate::WARNING.into(), notice);
                client
                    .send(PgWireBackendMessage::NoticeResponse(info.into()))
                    .await?;
                Ok(Response::Execution(tag(&t)))
            }
            StatementResult::Rows { schema, batches } => {
                let rows = RowStream::from_batches(schema, batches);
                Ok(Response::Query(streamed_response(
                    rows, format, query, None,
                )))
            }
            StatementResult::Streaming {
                rows,
                copy: Some(copy),
            } => rows::send_copy_out(client, copy, rows, query).await,
            StatementResult::Streaming { rows, copy: None } => {
                // pgwire sends these rows after this returns: they watch for a
                // CancelRequest themselves and keep the session busy until the last.
                let handle = client.session_extensions().get::<Arc<ConnectionHandle>>();
                let rows = match handle {
                    Some(handle) => rows::cancelable(rows, handle.as_ref().clone()),
                    None => rows,
                };
                let active = Some(self.session.active());
                Ok(Response::Query(streamed_response(
                    rows, format, query, active,
                )))
            }
            StatementResult::CopyIn(copy) => {
                let columns = copy.columns();
                let format = i8::from(copy.binary());
                *self.copy.lock().await = Some(PendingCopy {
                    copy,
                    error: None,
                    query: query.to_string(),
                    _active: self.session.active(),
                });
                Ok(Response::CopyIn(CopyResponse::new(
                    format,
                    columns,
                    stream::empty(),
                )))
            }
            StatementResult::Subscribe(sub) => {
                let closed = self.session.closed();
                tokio::select! {
                    done = stream_subscription(client, sub, format, !extended, query) => done,
                    e = closed => Err(pg_error(&e, query)),
                }
            }
            StatementResult::CopyOut {
                format: copy,
                schema,
                batches,
            } => {
                let rows = RowStream::from_batches(schema, batches);
                rows::send_copy_out(client, copy, rows, query).await
            }
        }
    }
}

pub(super) fn heartbeat() -> PgWireBackendMessage {
    PgWireBackendMessage::ParameterStatus(ParameterStatus::new(
        "saql_heartbeat".into(),
        crate::time::EventTime::now().to_string(),
    ))
}

/// Starts COPY data: CopyOutResponse (text columns), then the CSV header if asked for, both
/// flushed so that a client sees the COPY begin at once.
pub(super) async fn begin_copy_out<C>(
    client: &mut C,
    copy: CopyOut,
    schema: &datafusion::arrow::datatypes::SchemaRef,
) -> PgWireResult<()>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let columns = schema.fields().len();
    client
        .send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
            0,
            columns as i16,
            vec![0; columns],
        )))
        .await?;
    if copy == (CopyOut::Csv { header: true }) {
        let names = schema.fields().iter().map(|f| Some(f.name().as_str()));
        client
            .send(PgWireBackendMessage::CopyData(CopyData::new(Bytes::from(
                csv_line(names),
            ))))
            .await?;
    }
    Ok(())
}

/// Streams a subscription until its query goes away, the client cancels (the future is
/// dropped), or the client disconnects (a write fails).
async fn stream_subscription<C>(
    client: &mut C,
    mut sub: Subscription,
    format: &(dyn Fn(usize) -> FieldFormat + Sync),
    per_batch_results: bool,
    query: &str,
) -> PgWireResult<Response>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let fields = Arc::new(field_infos(&sub.schema, |i| {
        if sub.copy.is_some() {
            FieldFormat::Text
        } else {
            format(i)
        }
    }));
    if let Some(copy) = sub.copy {
        begin_copy_out(client, copy, &sub.schema).await?;
    }
    let mut sent = 0usize;
    loop {
        match tokio::time::timeout(HEARTBEAT, sub.events.recv()).await {
            Err(_) => {
                let beat = ParameterStatus::new(
                    "saql_heartbeat".into(),
                    crate::time::EventTime::now().to_string(),
                );
                client
                    .send(PgWireBackendMessage::ParameterStatus(beat))
                    .await?;
            }
            Ok(None) => break,
            Ok(Some(SubscriptionEvent::Failed(reason))) => {
                return Err(pg_error(&Error::QueryFailed(reason), query));
            }
            Ok(Some(SubscriptionEvent::Rows(batch))) => {
                if let Some(copy) = sub.copy {
                    for line in copy_lines(&batch, copy).map_err(|e| pg_error(&e, query))? {
                        client
                            .feed(PgWireBackendMessage::CopyData(CopyData::new(Bytes::from(
                                line,
                            ))))
                            .await?;
                    }
                } else {
                    // In the simple protocol each batch is a complete result set, so that
                    // clients which print a result only when it completes (psql) print the
                    // rows at once; the extended protocol keeps one result per Execute.
                    if per_batch_results {
                        let desc = RowDescription::new(fields.iter().map(Into::into).collect());
                        client
                            .feed(PgWireBackendMessage::RowDescription(desc))
                            .await?;
                    }
                    for row in data_rows(&batch, &fields).map_err(|e| pg_error(&e, query))? {
                        client.feed(PgWireBackendMessage::DataRow(row)).await?;
                    }
                    if per_batch_results {
                        let done = Tag::new("SELECT").with_rows(batch.num_rows());
                        client
                            .feed(PgWireBackendMessage::CommandComplete(done.into()))
                            .await?;
                        // psql prints a result once it has seen the start of the next one;
                        // an empty result (which it prints as nothing) lets it print now.
                        client
                            .feed(PgWireBackendMessage::EmptyQueryResponse(
                                pgwire::messages::response::EmptyQueryResponse::new(),
                            ))
                            .await?;
                    }
                }
                client.flush().await?;
                sent += batch.num_rows();
            }
        }
    }
    if sub.copy.is_some() {
        client
            .send(PgWireBackendMessage::CopyDone(CopyDone::new()))
            .await?;
        Ok(Response::Execution(Tag::new("COPY").with_rows(sent)))
    } else {
        Ok(Response::Execution(Tag::new("SUBSCRIBE").with_rows(sent)))
    }
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let stmts = sql::parse(query).map_err(|e| pg_error(&e, query))?;
        if stmts.len() > 1
            && stmts
                .iter()
                .any(|s| matches!(s, Statement::Subscribe { .. }))
        {
            let e = Error::NotSupported("SUBSCRIBE must be sent on its own".into());
            return Err(pg_error(&e, query));
        }
        let mut out = Vec::new();
        for stmt in stmts {
            match self
                .run(client, stmt, &[], query, &|_| FieldFormat::Text, false)
                .await
            {
                Ok(r) => out.push(r),
                Err(PgWireError::UserError(info)) => {
                    out.push(Response::Error(info));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl CopyHandler for Connection {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let _active = self.session.active();
        let mut pending = self.copy.lock().await;
        if let Some(p) = pending.as_mut() {
            if p.error.is_none() {
                if let Err(e) = p.copy.feed(&copy_data.data) {
                    p.error = Some(e);
                }
            }
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(p) = self.copy.lock().await.take() else {
            let e = Error::Internal("COPY data without a COPY statement".into());
            return Err(pg_error(&e, ""));
        };
        if let Some(e) = p.error {
            return Err(pg_error(&e, &p.query));
        }
        let engine = self.engine.clone();
        let copy = p.copy;
        let rows = crate::spawn::blocking(move || engine.finish_copy(*copy))
            .await
            .map_err(|e| pg_error(&Error::Internal(e.to_string()), &p.query))?
            .map_err(|e| pg_error(&e, &p.query))?;
        let tag = Tag::new("COPY").with_rows(rows as usize);
        client
            .send(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // The rows received so far are dropped: nothing of the COPY is applied.
        self.copy.lock().await.take();
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "ERROR".into(),
            sqlstate::QUERY_CANCELED.into(),
            format!("COPY from stdin failed: {}", fail.message),
        )))
    }
}

impl PgWireServerHandlers for Connection {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::new(self.clone())
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::new(self.clone())
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        Arc::new(Startup::new(
            self,
            self.users.clone(),
            self.manager.clone(),
            self.require_tls,
            self.session.clone(),
        ))
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        Arc::new(self.clone())
    }

    fn error_handler(&self) -> Arc<impl pgwire::api::ErrorHandler> {
        Arc::new(NoopHandler)
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::new(DefaultCancelHandler::new(self.manager.clone()))
    }
}
