//! The pgwire handlers of one connection: simple and extended queries, COPY FROM STDIN, and
//! live subscriptions streamed row by row (each flushed at once, so psql prints it at once).
//! Describe answers NoData for statements without rows (pgJDBC relies on it), FETCH and
//! DECLAREd cursors describe as their cursor's rows, and Execute with a row limit suspends
//! live portals ([`super::portal`]).

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::sql::sqlparser::ast as sq;
use futures::sink::{Sink, SinkExt};
use futures::stream;
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal, PortalExecutionState};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{CopyResponse, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::NoopQueryParser;
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, ConnectionManager, NoopHandler,
    PgWireConnectionState, PgWireServerHandlers, Type, DEFAULT_NAME, METADATA_DATABASE,
    METADATA_USER,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyOutResponse};
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{
    Close, CloseComplete, Describe, Execute, PortalSuspended, TARGET_TYPE_BYTE_PORTAL,
    TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use tokio::sync::Mutex;

use super::cursor::Cursors;
use super::encode::{copy_lines, data_rows, field_infos, pg_type};
use super::portal::LivePortals;
use super::prepared::{self, PreparedStatements};
use crate::error::Error;
use crate::plan::catalog::{normalize, normalize_object};
use crate::runtime::engine::{CopyIn, StatementResult, Subscription};
use crate::runtime::pg_functions::SessionInfo;
use crate::runtime::SubscriptionEvent;
use crate::sql::{self, Statement};
use crate::Engine;

/// How often a quiet subscription writes a harmless message to find out whether its client
/// is still there.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Converts an engine error to a Postgres error with SQLSTATE and, where it applies to a
/// place in `query` (a syntax error, an unknown name), the 1-based character position.
pub fn pg_error(e: &Error, query: &str) -> PgWireError {
    let mut info = ErrorInfo::new("ERROR".into(), e.sqlstate().into(), e.to_string());
    match e.location_in(query) {
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

fn tag(text: &str) -> Tag {
    match text.rsplit_once(' ') {
        Some((cmd, n)) if n.chars().all(|c| c.is_ascii_digit()) => match n.parse() {
            Ok(rows) => Tag::new(cmd).with_rows(rows),
            Err(_) => Tag::new(text),
        },
        _ => Tag::new(text),
    }
}

struct PendingCopy {
    copy: Box<CopyIn>,
    error: Option<Error>,
    query: String,
}

/// Handlers for one client connection. Clones share the connection's COPY state.
#[derive(Clone)]
pub struct Connection {
    engine: Engine,
    manager: Arc<ConnectionManager>,
    copy: Arc<Mutex<Option<PendingCopy>>>,
    cursors: Arc<Mutex<Cursors>>,
    live: Arc<Mutex<LivePortals>>,
    prepared: Arc<Mutex<PreparedStatements>>,
}

/// The session a client's statements run for: its user, database and process id.
fn session_info<C: ClientInfo>(client: &C) -> SessionInfo {
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
        }
    }

    /// The server's connections, for registering this one's cancel key.
    pub(super) fn manager(&self) -> &Arc<ConnectionManager> {
        &self.manager
    }

    /// Runs one statement: cursor statements here, in the session; everything else in the
    /// engine.
    async fn run<C>(
        &self,
        client: &mut C,
        stmt: Statement,
        params: &[Option<String>],
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
        let session = session_info(client);
        match stmt {
            Statement::DeclareCursor { name, target } => {
                let result = self
                    .engine
                    .execute_statement_for(*target, params, &session)
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
                    cursors.wait(&name, wait).await.map_err(fail)?;
                    if !cursors.ready(&name).map_err(fail)? {
                        client.send(heartbeat()).await?;
                    }
                }
                let (schema, batches) = cursors.take(&name, count).map_err(fail)?;
                let mut resp = rows_response(&schema, &batches, format, query)?;
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
                        .engine
                        .execute_statement_for(stmt, &args, &session)
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
                    let result = self
                        .engine
                        .execute_statement_for(Statement::Sql(Box::new(other)), params, &session)
                        .await
                        .map_err(fail)?;
                    self.respond(client, result, query, format, extended).await
                }
            },
            other => {
                let result = self
                    .engine
                    .execute_statement_for(other, params, &session)
                    .await
                    .map_err(fail)?;
                self.respond(client, result, query, format, extended).await
            }
        }
    }

    /// What a statement takes and returns: its parameter types (the client's where it gave
    /// them) and its result columns, `None` when it returns no rows.
    async fn describe(
        &self,
        query: &str,
        declared: &[Option<Type>],
        format: &(dyn Fn(usize) -> FieldFormat + Sync),
    ) -> PgWireResult<(Vec<Type>, Option<Vec<FieldInfo>>)> {
        let fail = |e: Error| pg_error(&e, query);
        let stmt = sql::parse_one(query).map_err(fail)?;
        // `EXECUTE name (constants)` takes no parameters and returns what `name` returns.
        let prepared = match &stmt {
            Statement::Fetch { name, .. } => {
                let cursors = self.cursors.lock().await;
                let schema = cursors.schema(&normalize(name)).map_err(fail)?;
                return Ok((vec![], Some(field_infos(&schema, format))));
            }
            Statement::Sql(s) => match s.as_ref() {
                sq::Statement::Execute {
                    name: Some(name), ..
                } => {
                    let prepared = self.prepared.lock().await;
                    Some(prepared.get(&normalize_object(name)).map_err(fail)?)
                }
                _ => None,
            },
            _ => None,
        }
        .map(|prepared| prepared.to_string());
        let mut desc = self
            .engine
            .describe(prepared.as_deref().unwrap_or(query))
            .await
            .map_err(fail)?;
        if prepared.is_some() {
            desc.params.clear();
        }
        let params = desc
            .params
            .iter()
            .enumerate()
            .map(|(i, t)| {
                declared
                    .get(i)
                    .cloned()
                    .flatten()
                    .filter(|t| *t != Type::UNKNOWN)
                    .unwrap_or_else(|| pg_type(t))
            })
            .collect();
        Ok((params, desc.schema.map(|s| field_infos(&s, format))))
    }

    /// Sends `max_rows` rows of the live portal `name` once that many exist (all waiting rows,
    /// at least one, when 0), then PortalSuspended; fewer, then CommandComplete, when its
    /// subscription ended. As in PostgreSQL, a row limit is a promise of that many rows:
    /// asyncpg takes fewer for the end of the portal.
    async fn execute_live<C>(
        &self,
        client: &mut C,
        name: &str,
        max_rows: usize,
        format: &Format,
        query: &str,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let fail = |e: Error| pg_error(&e, query);
        let mut live = self.live.lock().await;
        loop {
            live.rows.ready(name).map_err(fail)?;
            let waiting = live.rows.pending_rows(name);
            if !live.rows.is_live(name) || waiting >= max_rows.max(1) {
                break;
            }
            live.rows.wait(name, HEARTBEAT).await.map_err(fail)?;
            if live.rows.pending_rows(name) == waiting {
                client.send(heartbeat()).await?;
            }
        }
        let count = (max_rows > 0).then_some(max_rows as u64);
        let (schema, batches) = live.rows.take(name, count).map_err(fail)?;
        let fields = Arc::new(field_infos(&schema, |i| format.format_for(i)));
        let mut sent = 0;
        for batch in &batches {
            for row in data_rows(batch, &fields).map_err(fail)? {
                client.feed(PgWireBackendMessage::DataRow(row)).await?;
                sent += 1;
            }
        }
        if live.rows.exhausted(name) {
            live.close(name);
            let done = Tag::new("SUBSCRIBE").with_rows(sent);
            client
                .send(PgWireBackendMessage::CommandComplete(done.into()))
                .await?;
        } else {
            client
                .send(PgWireBackendMessage::PortalSuspended(PortalSuspended::new()))
                .await?;
        }
        Ok(())
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
                let info = ErrorInfo::new("NOTICE".into(), "01000".into(), notice);
                client
                    .send(PgWireBackendMessage::NoticeResponse(info.into()))
                    .await?;
                Ok(Response::Execution(tag(&t)))
            }
            StatementResult::Rows { schema, batches } => Ok(Response::Query(rows_response(
                &schema, &batches, format, query,
            )?)),
            StatementResult::CopyIn(copy) => {
                let columns = copy.columns;
                *self.copy.lock().await = Some(PendingCopy {
                    copy,
                    error: None,
                    query: query.to_string(),
                });
                Ok(Response::CopyIn(CopyResponse::new(
                    0,
                    columns,
                    stream::empty(),
                )))
            }
            StatementResult::Subscribe(sub) => {
                stream_subscription(client, sub, format, !extended, query).await
            }
        }
    }
}

fn heartbeat() -> PgWireBackendMessage {
    PgWireBackendMessage::ParameterStatus(ParameterStatus::new(
        "saql_heartbeat".into(),
        crate::time::EventTime::now().to_string(),
    ))
}

fn rows_response(
    schema: &datafusion::arrow::datatypes::SchemaRef,
    batches: &[datafusion::arrow::record_batch::RecordBatch],
    format: &(dyn Fn(usize) -> FieldFormat + Sync),
    query: &str,
) -> PgWireResult<QueryResponse> {
    let fields = Arc::new(field_infos(schema, format));
    let mut rows = Vec::new();
    for b in batches {
        rows.extend(data_rows(b, &fields).map_err(|e| pg_error(&e, query))?);
    }
    Ok(QueryResponse::new(
        fields,
        stream::iter(rows.into_iter().map(Ok)),
    ))
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
    let columns = sub.schema.fields().len();
    let fields = Arc::new(field_infos(&sub.schema, |i| {
        if sub.copy {
            FieldFormat::Text
        } else {
            format(i)
        }
    }));
    if sub.copy {
        client
            .send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
                0,
                columns as i16,
                vec![0; columns],
            )))
            .await?;
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
                return Err(pg_error(&Error::Execution(reason), query));
            }
            Ok(Some(SubscriptionEvent::Rows(batch))) => {
                if sub.copy {
                    for line in copy_lines(&batch).map_err(|e| pg_error(&e, query))? {
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
    if sub.copy {
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

/// Decodes one bound parameter into the text form the engine parses.
fn param_text(bytes: &[u8], binary: bool, ty: &Type) -> Result<String, Error> {
    let bad = || {
        Error::invalid_input(
            "22P03",
            format!("incorrect binary data format in parameter of type {ty}"),
        )
    };
    if !binary {
        return String::from_utf8(bytes.to_vec()).map_err(|_| bad());
    }
    let int = |n: usize| -> Result<i64, Error> {
        let raw: [u8; 8] = {
            let mut buf = [0u8; 8];
            if bytes.len() != n {
                return Err(bad());
            }
            let sign = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
            buf[..8 - n].fill(sign);
            buf[8 - n..].copy_from_slice(bytes);
            buf
        };
        Ok(i64::from_be_bytes(raw))
    };
    Ok(match *ty {
        Type::BOOL => (bytes.first().ok_or_else(bad)? != &0).to_string(),
        Type::INT2 => int(2)?.to_string(),
        Type::INT4 => int(4)?.to_string(),
        Type::INT8 => int(8)?.to_string(),
        Type::FLOAT4 => f32::from_bits(int(4)? as u32).to_string(),
        Type::FLOAT8 => f64::from_bits(int(8)? as u64).to_string(),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            // Microseconds since 2000-01-01 00:00:00 UTC.
            let micros = int(8)?;
            let epoch_2000 = 946_684_800_000_000i64;
            let nanos = micros
                .checked_add(epoch_2000)
                .and_then(|m| m.checked_mul(1000))
                .ok_or_else(bad)?;
            let dt = chrono::DateTime::from_timestamp_nanos(nanos);
            format!("{}Z", dt.naive_utc().format("%Y-%m-%d %H:%M:%S%.f"))
        }
        _ => String::from_utf8(bytes.to_vec()).map_err(|_| bad())?,
    })
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = String;
    type QueryParser = NoopQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::new(NoopQueryParser)
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let query = &portal.statement.statement;
        let types = if portal.parameters.is_empty() {
            vec![]
        } else {
            let desc = self
                .engine
                .describe(query)
                .await
                .map_err(|e| pg_error(&e, query))?;
            (0..portal.parameters.len())
                .map(|i| {
                    portal
                        .statement
                        .parameter_types
                        .get(i)
                        .cloned()
                        .flatten()
                        .filter(|t| *t != Type::UNKNOWN)
                        .unwrap_or_else(|| desc.params.get(i).map(pg_type).unwrap_or(Type::TEXT))
                })
                .collect()
        };
        let mut params = Vec::with_capacity(portal.parameters.len());
        for (i, p) in portal.parameters.iter().enumerate() {
            params.push(match p {
                None => None,
                Some(bytes) => Some(
                    param_text(bytes, portal.parameter_format.is_binary(i), &types[i])
                        .map_err(|e| pg_error(&e, query))?,
                ),
            });
        }
        let mut stmts = sql::parse(query).map_err(|e| pg_error(&e, query))?;
        if stmts.len() != 1 {
            let e =
                Error::NotSupported("the extended protocol takes one statement at a time".into());
            return Err(pg_error(&e, query));
        }
        let format = portal.result_column_format.clone();
        self.run(
            client,
            stmts.remove(0),
            &params,
            query,
            &|i| format.format_for(i),
            true,
        )
        .await
    }

    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let (params, fields) = match message.target_type {
            TARGET_TYPE_BYTE_STATEMENT => match client.portal_store().get_statement(name) {
                Some(Entry::Value(stmt)) => {
                    let (params, fields) = self
                        .describe(&stmt.statement, &stmt.parameter_types, &|_| {
                            FieldFormat::Text
                        })
                        .await?;
                    (Some(params), fields)
                }
                _ => return self._on_describe(client, message).await,
            },
            TARGET_TYPE_BYTE_PORTAL => match client.portal_store().get_portal(name) {
                Some(Entry::Value(portal)) => {
                    let format = &portal.result_column_format;
                    let declared = &portal.statement.parameter_types;
                    let query = &portal.statement.statement;
                    let (_, fields) = self
                        .describe(query, declared, &|i| format.format_for(i))
                        .await?;
                    (None, fields)
                }
                Some(Entry::Empty) => return self._on_describe(client, message).await,
                // A cursor DECLAREd in SQL is a portal too (psycopg 3 describes its named
                // cursors so).
                None => match self.cursors.lock().await.schema(name) {
                    Ok(schema) => (None, Some(field_infos(&schema, |_| FieldFormat::Text))),
                    Err(_) => return Err(PgWireError::PortalNotFound(name.to_string())),
                },
            },
            _ => return self._on_describe(client, message).await,
        };
        if let Some(params) = params {
            let oids = params.iter().map(|t| t.oid()).collect();
            client
                .send(PgWireBackendMessage::ParameterDescription(
                    ParameterDescription::new(oids),
                ))
                .await?;
        }
        let answer = match fields {
            Some(fields) => PgWireBackendMessage::RowDescription(RowDescription::new(
                fields.iter().map(Into::into).collect(),
            )),
            None => PgWireBackendMessage::NoData(NoData::new()),
        };
        client.send(answer).await?;
        Ok(())
    }

    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME).to_string();
        let max_rows = message.max_rows.max(0) as usize;
        let Some(Entry::Value(portal)) = client.portal_store().get_portal(&name) else {
            return self._on_execute(client, message).await;
        };
        let query = portal.statement.statement.clone();
        let bind = portal.state();
        // A live portal whose subscription ended is finished, as pgwire's own are.
        let finished = matches!(*bind.lock().await, PortalExecutionState::Finished);
        if finished || !self.live.lock().await.is_open(&name, &bind) {
            // Only a live subscription read with a row limit is ours; pgwire suspends
            // finite results itself.
            let live = max_rows > 0
                && matches!(
                    sql::parse_one(&query),
                    Ok(Statement::Subscribe { copy: false, .. })
                );
            if finished || !live {
                return self._on_execute(client, message).await;
            }
            let stmt = sql::parse_one(&query).map_err(|e| pg_error(&e, &query))?;
            let result = self
                .engine
                .execute_statement_for(stmt, &[], &session_info(client))
                .await
                .map_err(|e| pg_error(&e, &query))?;
            self.live
                .lock()
                .await
                .open(&name, bind.clone(), result)
                .map_err(|e| pg_error(&e, &query))?;
        }
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let format = portal.result_column_format.clone();
        let cancel = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let result = match cancel {
            Some(cancel) => tokio::select! {
                r = self.execute_live(client, &name, max_rows, &format, &query) => r,
                _ = cancel => Err(PgWireError::QueryCanceled),
            },
            None => {
                self.execute_live(client, &name, max_rows, &format, &query)
                    .await
            }
        };
        let mut live = self.live.lock().await;
        if result.is_err() {
            live.close(&name);
        } else if !live.is_open(&name, &bind) {
            *bind.lock().await = PortalExecutionState::Finished;
        }
        drop(live);
        client.set_state(PgWireConnectionState::ReadyForQuery);
        result
    }

    async fn on_close<C>(&self, client: &mut C, message: Close) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        match message.target_type {
            TARGET_TYPE_BYTE_STATEMENT => client.portal_store().rm_statement(name),
            TARGET_TYPE_BYTE_PORTAL => {
                client.portal_store().rm_portal(name);
                self.live.lock().await.close(name);
            }
            _ => {}
        }
        client
            .send(PgWireBackendMessage::CloseComplete(CloseComplete::new()))
            .await?;
        Ok(())
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
        let mut pending = self.copy.lock().await;
        if let Some(p) = pending.as_mut() {
            if p.error.is_none() {
                if let Err(e) = p.copy.decoder.feed(&copy_data.data) {
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
        let rows = tokio::task::spawn_blocking(move || engine.finish_copy(*copy))
            .await
            .map_err(|e| pg_error(&Error::Internal(e.to_string()), &p.query))?
            .map_err(|e| pg_error(&e, &p.query))?;
        let tag = Tag::new("COPY").with_rows(rows as usize);
        client
            .send(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
        Ok(())
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
        Arc::new(self.clone())
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
