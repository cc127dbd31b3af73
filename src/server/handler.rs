//! The pgwire handlers of one connection: simple and extended queries, COPY FROM STDIN, and
//! live subscriptions streamed row by row (each flushed at once, so psql prints it at once).

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::sink::{Sink, SinkExt};
use futures::stream;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::Portal;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeStatementResponse, FieldFormat, FieldInfo,
    QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{NoopQueryParser, StoredStatement};
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionManager, NoopHandler, PgWireServerHandlers, Type,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyOutResponse};
use pgwire::messages::data::RowDescription;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use tokio::sync::Mutex;

use super::auth::{self, Startup, Users};
use super::cursor::Cursors;
use super::encode::{copy_lines, data_rows, field_infos, pg_type};
use super::session::Session;
use crate::error::Error;
use crate::plan::catalog::normalize;
use crate::runtime::engine::{CopyIn, StatementResult, Subscription};
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
    session: Arc<Session>,
    users: Option<Arc<Users>>,
    require_tls: bool,
}

impl Connection {
    /// Handlers for a new connection to `engine`.
    pub fn new(engine: Engine, manager: Arc<ConnectionManager>) -> Self {
        Connection {
            engine,
            manager,
            copy: Arc::new(Mutex::new(None)),
            cursors: Arc::new(Mutex::new(Cursors::default())),
            session: Session::new(None),
            users: None,
            require_tls: false,
        }
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
        auth::authorize(auth::role_of(self.users.as_deref(), client), &stmt)?;
        let _active = self.session.active();
        match stmt {
            Statement::DeclareCursor { name, target } => {
                let result = self.execute_timed(*target, params).await.map_err(fail)?;
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
            other => {
                if self.session.apply_set(&other).map_err(fail)? {
                    return Ok(Response::Execution(Tag::new("SET")));
                }
                let result = self.execute_timed(other, params).await.map_err(fail)?;
                self.respond(client, result, query, format, extended).await
            }
        }
    }

    /// Executes a statement in the engine, within the session's statement timeout.
    async fn execute_timed(
        &self,
        stmt: Statement,
        params: &[Option<String>],
    ) -> Result<StatementResult, Error> {
        let timeout = self.session.timeout_for(&stmt);
        let run = self.engine.execute_statement(stmt, params);
        match timeout {
            Some(t) => tokio::time::timeout(t, run)
                .await
                .unwrap_or(Err(Error::StatementTimeout(t))),
            None => run.await,
        }
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
                    // Cursors live until the end of the transaction, as in PostgreSQL.
                    let _ = self.cursors.lock().await.close(None);
                    Response::TransactionEnd(tag(&t))
                }
                _ => Response::Execution(tag(&t)),
            }),
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
    // Rows are encoded batch by batch as they are written, so a large result is never held
    // twice (as Arrow and as wire rows).
    let (encode, query) = (fields.clone(), query.to_string());
    let rows = futures::StreamExt::flat_map(stream::iter(batches.to_vec()), move |b| {
        let rows = data_rows(&b, &encode).map_err(|e| pg_error(&e, &query));
        stream::iter(match rows {
            Ok(rows) => rows.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        })
    });
    Ok(QueryResponse::new(fields, rows))
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
                return Err(pg_error(&Error::QueryFailed(reason), query));
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

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let query = &target.statement;
        let desc = self
            .engine
            .describe(query)
            .await
            .map_err(|e| pg_error(&e, query))?;
        let params = desc
            .params
            .iter()
            .enumerate()
            .map(|(i, t)| {
                target
                    .parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .filter(|t| *t != Type::UNKNOWN)
                    .unwrap_or_else(|| pg_type(t))
            })
            .collect();
        let fields: Vec<FieldInfo> = desc
            .schema
            .map(|s| field_infos(&s, |_| FieldFormat::Text))
            .unwrap_or_default();
        Ok(DescribeStatementResponse::new(params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let query = &portal.statement.statement;
        let desc = self
            .engine
            .describe(query)
            .await
            .map_err(|e| pg_error(&e, query))?;
        let format = &portal.result_column_format;
        let fields = desc
            .schema
            .map(|s| field_infos(&s, |i| format.format_for(i)))
            .unwrap_or_default();
        Ok(DescribePortalResponse::new(fields))
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

impl NoopStartupHandler for Connection {
    fn connection_manager(&self) -> Option<Arc<ConnectionManager>> {
        Some(self.manager.clone())
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
