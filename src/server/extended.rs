//! The extended query protocol of a connection: Parse/Bind/Describe/Execute/Close. Describe
//! answers NoData for statements without rows (pgJDBC relies on it), FETCH and DECLAREd cursors
//! describe as their cursor's rows, and Execute reads an ad hoc SELECT as it runs, and a
//! subscription with a row limit, as portals of our own ([`super::portal`]): up to the limit,
//! then PortalSuspended. Other results are suspended by pgwire itself.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::sql::sqlparser::ast as sq;
use futures::sink::{Sink, SinkExt};
use pgwire::api::portal::{Format, Portal, PortalExecutionState};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::results::{FieldFormat, FieldInfo, Response, Tag};
use pgwire::api::stmt::NoopQueryParser;
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, PgWireConnectionState, Type, DEFAULT_NAME,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{
    Close, CloseComplete, Describe, Execute, PortalSuspended, TARGET_TYPE_BYTE_PORTAL,
    TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::PgWireBackendMessage;

use super::auth;
use super::bind;
use super::encode::{data_rows, field_infos, pg_type};
use super::handler::{heartbeat, pg_error, session_info, Connection, HEARTBEAT};
use crate::error::Error;
use crate::plan::catalog::{normalize, normalize_object};
use crate::runtime::engine::StatementResult;
use crate::sources::param::Param;
use crate::sql::{self, Statement};

/// Most rows one Execute returns before the portal is suspended (pgwire reserves room for
/// the limit in the results it reads itself).
const MAX_ROWS_PER_EXECUTE: i32 = 1 << 21;

impl Connection {
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
            .map(|(i, t)| bind::declared_type(declared, i).unwrap_or_else(|| pg_type(t)))
            .collect();
        Ok((params, desc.schema.map(|s| field_infos(&s, format))))
    }

    /// The portal's parameters as the engine takes them ([`bind`]). A binary parameter whose
    /// type the client left open takes the type the statement gives it, so the statement is
    /// described only then.
    async fn bound_params(&self, portal: &Portal<String>) -> Result<Vec<Param>, Error> {
        let declared = &portal.statement.parameter_types;
        let mut inferred = None;
        let mut params = Vec::with_capacity(portal.parameters.len());
        for i in 0..portal.parameters.len() {
            let mut ty = bind::declared_type(declared, i);
            if ty.is_none() && portal.parameter_format.is_binary(i) {
                if inferred.is_none() {
                    inferred = Some(self.engine.describe(&portal.statement.statement).await?);
                }
                ty = inferred.as_ref().and_then(|d| d.params.get(i)).map(pg_type);
            }
            params.push(bind::bound_param(portal, i, ty.as_ref())?);
        }
        Ok(params)
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
        let taken = live.rows.take(name, count).await.map_err(fail)?;
        let fields = Arc::new(field_infos(&taken.schema, |i| format.format_for(i)));
        let mut sent = 0;
        for batch in &taken.batches {
            for row in data_rows(batch, &fields).map_err(fail)? {
                client.feed(PgWireBackendMessage::DataRow(row)).await?;
                sent += 1;
            }
        }
        if let Some(e) = taken.error {
            return Err(fail(e));
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
}

impl Connection {
    /// Sends up to `max_rows` rows (all when 0) of the SELECT behind the portal `name` as
    /// its query produces them, a batch at a time, then PortalSuspended, or CommandComplete
    /// once its rows are all sent. An error of the query is returned after the rows before
    /// it were sent.
    async fn execute_select<C>(
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
        let schema = live.rows.schema(name).map_err(fail)?;
        let fields = Arc::new(field_infos(&schema, |i| format.format_for(i)));
        let mut sent = 0;
        while max_rows == 0 || sent < max_rows {
            let want = if max_rows == 0 {
                usize::MAX
            } else {
                max_rows - sent
            };
            let Some(batch) = live.rows.next_batch(name, want).await.map_err(fail)? else {
                break;
            };
            for row in data_rows(&batch, &fields).map_err(fail)? {
                client.feed(PgWireBackendMessage::DataRow(row)).await?;
            }
            client.flush().await?;
            sent += batch.num_rows();
        }
        if live.rows.exhausted(name) {
            live.close(name);
            let done = Tag::new("SELECT").with_rows(sent);
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

    /// Runs the (authorized) statement of a portal that saql reads itself (see
    /// [`Connection::execute_select`]), as [`Connection::run`] runs statements: timed, a
    /// panic caught.
    async fn open_portal<C>(
        &self,
        client: &C,
        portal: &Portal<String>,
        stmt: Statement,
    ) -> Result<StatementResult, Error>
    where
        C: ClientInfo,
    {
        let params = self.bound_params(portal).await?;
        let session = session_info(client, self.users.as_deref(), &self.session);
        self.execute_timed(stmt, &params, &session, false).await
    }
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
        let params = self
            .bound_params(portal)
            .await
            .map_err(|e| pg_error(&e, query))?;
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

    async fn on_execute<C>(&self, client: &mut C, mut message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // pgwire reserves room for `max_rows` rows before fetching them: a huge limit aborted
        // the server on allocation (found by the wire fuzz target). Fewer rows per Execute
        // are still correct: the portal is suspended and the client executes it again.
        message.max_rows = message.max_rows.min(MAX_ROWS_PER_EXECUTE);
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME).to_string();
        let max_rows = message.max_rows.max(0) as usize;
        let Some(Entry::Value(portal)) = client.portal_store().get_portal(&name) else {
            return self._on_execute(client, message).await;
        };
        let query = portal.statement.statement.clone();
        let bind = portal.state();
        // A live portal whose subscription ended is finished, as pgwire's own are.
        let finished = matches!(*bind.lock().await, PortalExecutionState::Finished);
        let parsed = sql::parse_one(&query);
        if finished || !self.live.lock().await.is_open(&name, &bind) {
            // Ours: a live subscription read with a row limit, and every ad hoc SELECT
            // (pgwire would read its whole result before sending a row). pgwire suspends
            // the other results itself.
            let ours = match &parsed {
                Ok(Statement::Subscribe(sql::Subscribe { copy: None, .. })) => max_rows > 0,
                Ok(Statement::Sql(s)) => matches!(s.as_ref(), sq::Statement::Query(_)),
                _ => false,
            };
            let stmt = match parsed.as_ref() {
                Ok(stmt) if ours && !finished => stmt.clone(),
                _ => return self._on_execute(client, message).await,
            };
            auth::authorize(auth::role_of(self.users.as_deref(), client), &stmt)?;
            let result = self
                .open_portal(client, &portal, stmt)
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
        let _active = self.session.active();
        let select = self.live.lock().await.reads_select(&name);
        let execute = async {
            if !select {
                return self
                    .execute_live(client, &name, max_rows, &format, &query)
                    .await;
            }
            // Each Execute of a SELECT is timed on its own, as in PostgreSQL.
            let send = self.execute_select(client, &name, max_rows, &format, &query);
            let timeout = parsed
                .as_ref()
                .ok()
                .and_then(|s| self.session.timeout_for(s));
            match timeout {
                Some(t) => tokio::time::timeout(t, send)
                    .await
                    .unwrap_or_else(|_| Err(pg_error(&Error::StatementTimeout(t), &query))),
                None => send.await,
            }
        };
        let result = match cancel {
            Some(cancel) => tokio::select! {
                r = execute => r,
                _ = cancel => Err(PgWireError::QueryCanceled),
            },
            None => execute.await,
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
