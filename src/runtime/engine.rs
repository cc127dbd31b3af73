//! The engine: executes statements against the catalog, feeds each stream's batches through
//! the queries that read it, advances watermarks and hands results to subscribers. It needs
//! no network and no async runtime except for ad hoc `SELECT`, which DataFusion runs.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::sqlparser::ast::{self as sq, Expr, Value, VisitMut, VisitorMut};
use tokio::sync::mpsc;

use super::graph::{OperatorGraph, Outputs};
use super::pg_catalog::{self, Relation};
use super::pipeline::{QueryRuntime, SubscriptionEvent};
use super::stream::StreamRuntime;
use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};
use crate::plan::{plan_continuous, Catalog, OperatorSpec, QueryPlan, StreamDef};
use crate::sources::csv::{CopyDecoder, CopyOptions};
use crate::sources::insert;
use crate::sql::{self, CopyFrom, CreateQuery, CreateStream, ExplainTarget, Statement};
use crate::time::Watermark;

/// How an engine is set up.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Where the catalog is kept; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// Recent rows kept per stream and per query for ad hoc SELECT.
    pub retain_rows: usize,
    /// Threads a keyed operator (session window, pattern) is spread over,
    /// by the hash of its key, when only stateless operators follow it. 1 runs every query
    /// on the calling thread, in the order a single operator would emit its rows.
    pub workers: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            data_dir: None,
            retain_rows: 10_000,
            workers: 1,
        }
    }
}

/// A live feed of a query's results. Dropping it unsubscribes.
pub struct Subscription {
    /// The query's name.
    pub query: String,
    /// Schema of its rows.
    pub schema: SchemaRef,
    /// Whether the client asked for COPY framing (`COPY (SUBSCRIBE q) TO STDOUT`).
    pub copy: bool,
    /// Result batches as the query emits them.
    pub events: mpsc::Receiver<SubscriptionEvent>,
}

impl Subscription {
    /// The next result batch if one is waiting, without blocking. Returns `None` when
    /// nothing is waiting or the query failed (see [`Subscription::events`]).
    pub fn try_next(&mut self) -> Option<RecordBatch> {
        match self.events.try_recv() {
            Ok(SubscriptionEvent::Rows(b)) => Some(b),
            _ => None,
        }
    }
}

/// A COPY FROM STDIN in progress: feed it the data, then hand it to [`Engine::finish_copy`].
pub struct CopyIn {
    /// Target stream.
    pub stream: String,
    /// Number of columns per input line.
    pub columns: usize,
    /// Decodes the incoming data.
    pub decoder: CopyDecoder,
}

/// What a statement produced.
pub enum StatementResult {
    /// A command finished; the tag is what Postgres would say (`CREATE STREAM`, `INSERT 0 3`).
    Command(String),
    /// A result set.
    Rows {
        /// Its schema.
        schema: SchemaRef,
        /// Its rows.
        batches: Vec<RecordBatch>,
    },
    /// A live subscription.
    Subscribe(Subscription),
    /// The client must now send COPY data.
    CopyIn(Box<CopyIn>),
}

/// What a statement will take and return, for the extended query protocol.
#[derive(Debug, Clone)]
pub struct Description {
    /// Types of `$1`, `$2`, ... in order.
    pub params: Vec<DataType>,
    /// Result columns, if the statement returns rows.
    pub schema: Option<SchemaRef>,
}

struct State {
    catalog: Catalog,
    streams: HashMap<String, StreamRuntime>,
    queries: BTreeMap<String, QueryRuntime>,
    /// Each stream's queries' operators, shared where they coincide.
    graphs: HashMap<String, OperatorGraph>,
}

/// The streaming engine. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct Engine {
    state: Arc<Mutex<State>>,
    config: Arc<EngineConfig>,
}

const CATALOG_FILE: &str = "catalog.sql";

impl Engine {
    /// Opens an engine, restoring streams and queries from the data directory if there is one.
    pub fn open(config: EngineConfig) -> Result<Engine> {
        let engine = Engine {
            state: Arc::new(Mutex::new(State {
                catalog: Catalog::default(),
                streams: HashMap::new(),
                queries: BTreeMap::new(),
                graphs: HashMap::new(),
            })),
            config: Arc::new(config),
        };
        if let Some(dir) = &engine.config.data_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
            let path = dir.join(CATALOG_FILE);
            if path.exists() {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
                let mut state = engine.lock();
                for stmt in sql::parse(&text)? {
                    match stmt {
                        Statement::CreateStream(cs) => engine.create_stream(&mut state, &cs)?,
                        Statement::CreateQuery(cq) => engine.create_query(&mut state, &cq)?,
                        other => {
                            return Err(Error::Internal(format!(
                                "unexpected statement in {}: {other}",
                                path.display()
                            )))
                        }
                    }
                }
            }
        }
        Ok(engine)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave state half-updated in a way we could
        // repair; keep serving with what is there.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn persist(&self, state: &State) -> Result<()> {
        let Some(dir) = &self.config.data_dir else {
            return Ok(());
        };
        let path = dir.join(CATALOG_FILE);
        let tmp = dir.join(format!("{CATALOG_FILE}.tmp"));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(state.catalog.to_sql().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| Error::io(format!("writing {}", path.display()), e))
    }

    /// Executes one or more statements; stops at the first error.
    pub async fn execute(&self, sql: &str) -> Result<Vec<StatementResult>> {
        self.execute_with_params(sql, &[]).await
    }

    /// [`Engine::execute`] without an async runtime, for embedding.
    pub fn execute_blocking(&self, sql: &str) -> Result<Vec<StatementResult>> {
        futures::executor::block_on(self.execute(sql))
    }

    /// Executes statements whose `$n` placeholders take the text values in `params`.
    pub async fn execute_with_params(
        &self,
        sql: &str,
        params: &[Option<String>],
    ) -> Result<Vec<StatementResult>> {
        let mut out = Vec::new();
        for stmt in sql::parse(sql)? {
            out.push(self.execute_statement(stmt, params).await?);
        }
        Ok(out)
    }

    /// Executes one parsed statement.
    pub async fn execute_statement(
        &self,
        stmt: Statement,
        params: &[Option<String>],
    ) -> Result<StatementResult> {
        match stmt {
            Statement::Sql(s) => self.execute_sql(*s, params).await,
            other => self.execute_own(other),
        }
    }

    fn execute_own(&self, stmt: Statement) -> Result<StatementResult> {
        let mut state = self.lock();
        let tag = match stmt {
            Statement::CreateStream(cs) => {
                let name = normalize(&cs.name);
                if cs.if_not_exists && state.catalog.stream(&name).is_some() {
                    return Ok(StatementResult::Command("CREATE STREAM".into()));
                }
                self.create_stream(&mut state, &cs)?;
                self.persist(&state)?;
                "CREATE STREAM"
            }
            Statement::CreateQuery(cq) => {
                let name = normalize(&cq.name);
                if cq.if_not_exists && state.queries.contains_key(&name) {
                    return Ok(StatementResult::Command("CREATE CONTINUOUS QUERY".into()));
                }
                self.create_query(&mut state, &cq)?;
                self.persist(&state)?;
                "CREATE CONTINUOUS QUERY"
            }
            Statement::DropStream { name, if_exists } => {
                let name = normalize(&name);
                if state.catalog.stream(&name).is_none() {
                    if if_exists {
                        return Ok(StatementResult::Command("DROP STREAM".into()));
                    }
                    return Err(Error::undefined("stream", &name));
                }
                let users: Vec<&String> = state
                    .queries
                    .values()
                    .filter(|q| q.plan.stream.name == name)
                    .map(|q| &q.name)
                    .collect();
                if !users.is_empty() {
                    let list: Vec<String> = users.iter().map(|u| format!("\"{u}\"")).collect();
                    return Err(Error::Catalog {
                        sqlstate: "2BP01",
                        message: format!(
                            "cannot drop stream \"{name}\" because queries {} read it; drop them first",
                            list.join(", ")
                        ),
                    });
                }
                state.catalog.remove_stream(&name);
                state.streams.remove(&name);
                state.graphs.remove(&name);
                self.persist(&state)?;
                "DROP STREAM"
            }
            Statement::DropQuery { name, if_exists } => {
                let name = normalize(&name);
                let Some(q) = state.queries.remove(&name) else {
                    if if_exists {
                        return Ok(StatementResult::Command("DROP QUERY".into()));
                    }
                    return Err(Error::undefined("query", &name));
                };
                if let Some(g) = state.graphs.get_mut(&q.plan.stream.name) {
                    g.detach(&name, &q.path);
                }
                state.catalog.remove_query(&name);
                self.persist(&state)?;
                "DROP QUERY"
            }
            Statement::ShowStreams => return Ok(show_streams(&state)),
            Statement::ShowQueries => return Ok(show_queries(&mut state)),
            Statement::Subscribe { query, copy } => {
                let name = normalize(&query);
                let q = state
                    .queries
                    .get_mut(&name)
                    .ok_or_else(|| Error::undefined("query", &name))?;
                return Ok(StatementResult::Subscribe(Subscription {
                    query: name,
                    schema: q.schema(),
                    copy,
                    events: q.subscribe(),
                }));
            }
            Statement::CopyFrom(c) => return self.start_copy(&state, &c),
            Statement::Explain { json, target } => {
                let (query, clauses) = match target {
                    ExplainTarget::Create(cq) => (cq.query, cq.clauses),
                    ExplainTarget::Query(q, c) => (q, c),
                    ExplainTarget::Named(n) => {
                        let name = normalize(&n);
                        let cq = state
                            .catalog
                            .query(&name)
                            .ok_or_else(|| Error::undefined("query", &name))?;
                        (cq.query.clone(), cq.clauses.clone())
                    }
                };
                let plan = plan_continuous(&query, &clauses, &state.catalog)?;
                return Ok(explain_result(&plan, json));
            }
            Statement::DeclareCursor { .. }
            | Statement::Fetch { .. }
            | Statement::CloseCursor { .. } => {
                return Err(Error::NotSupported(
                    "cursors belong to a client session; use a Subscription in the library".into(),
                ))
            }
            Statement::Sql(_) => unreachable!("plain SQL is executed by execute_sql"),
        };
        Ok(StatementResult::Command(tag.into()))
    }

    fn create_stream(&self, state: &mut State, cs: &CreateStream) -> Result<()> {
        let def = StreamDef::try_new(cs)?;
        let def = state.catalog.add_stream(def)?;
        state.streams.insert(
            def.name.clone(),
            StreamRuntime::new(def, self.config.retain_rows),
        );
        Ok(())
    }

    fn create_query(&self, state: &mut State, cq: &CreateQuery) -> Result<()> {
        let name = normalize(&cq.name);
        if state.catalog.name_taken(&name) {
            return Err(Error::duplicate("relation", &name));
        }
        let mut plan = plan_continuous(&cq.query, &cq.clauses, &state.catalog)?;
        if self.config.workers > 1 {
            shard(&mut plan, self.config.workers)?;
        }
        let watermark = state
            .streams
            .get(&plan.stream.name)
            .map(|s| s.watermark)
            .unwrap_or(Watermark::START);
        let path = state
            .graphs
            .entry(plan.stream.name.clone())
            .or_default()
            .attach(&name, plan.specs.clone(), watermark)?;
        state.catalog.add_query(name.clone(), cq.clone())?;
        let mut rt = QueryRuntime::new(name.clone(), cq.clone(), plan, self.config.retain_rows);
        rt.path = path;
        state.queries.insert(name, rt);
        Ok(())
    }

    fn start_copy(&self, state: &State, c: &CopyFrom) -> Result<StatementResult> {
        let name = normalize_object(&c.stream);
        let def = state.catalog.require_stream(&name)?;
        let columns: Vec<usize> = if c.columns.is_empty() {
            (0..def.schema.fields().len()).collect()
        } else {
            c.columns
                .iter()
                .map(|col| {
                    let n = normalize(col);
                    def.schema.index_of(&n).map_err(|_| {
                        Error::plan(
                            "42703",
                            format!("column \"{n}\" of stream \"{name}\" does not exist"),
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
            decoder: CopyDecoder::new(def.schema.clone(), columns, options)?,
        })))
    }

    /// Completes a COPY: decodes what is left and inserts all its rows atomically.
    pub fn finish_copy(&self, copy: CopyIn) -> Result<u64> {
        let batch = copy.decoder.finish()?;
        self.insert_batch(&copy.stream, batch)
    }

    /// Appends rows to a stream and runs every query that reads it. The batch must have the
    /// stream's schema. Returns the number of rows accepted.
    pub fn insert_batch(&self, stream: &str, batch: RecordBatch) -> Result<u64> {
        let mut state = self.lock();
        let state = &mut *state;
        let rt = state
            .streams
            .get_mut(stream)
            .ok_or_else(|| Error::undefined("stream", stream))?;
        if batch.schema().fields() != rt.def.schema.fields() {
            return Err(Error::plan(
                "42804",
                format!("batch schema does not match stream \"{stream}\""),
            ));
        }
        let n = batch.num_rows() as u64;
        if n == 0 {
            return Ok(0);
        }
        let advanced = rt.observe(&batch, Instant::now());
        for q in state.queries.values_mut() {
            if q.plan.stream.name == stream && q.failed.is_none() {
                q.rows_in += n;
            }
        }
        if let Some(g) = state.graphs.get_mut(stream) {
            dispatch(&mut state.queries, g.process(&batch));
        }
        if let Some(wm) = advanced {
            advance_queries(state, stream, wm);
        }
        Ok(n)
    }

    /// Periodic housekeeping: advances the watermark of idle streams and forgets subscribers
    /// whose clients went away. The server calls it a few times a second.
    pub fn tick(&self) {
        self.tick_at(Instant::now());
    }

    /// [`Engine::tick`] at a given processing time (for tests).
    pub fn tick_at(&self, now: Instant) {
        let mut state = self.lock();
        let state = &mut *state;
        let advanced: Vec<(String, Watermark)> = state
            .streams
            .iter_mut()
            .filter_map(|(name, s)| s.idle_advance(now).map(|wm| (name.clone(), wm)))
            .collect();
        for (name, wm) in advanced {
            advance_queries(state, &name, wm);
        }
        for q in state.queries.values_mut() {
            q.subscribers();
        }
    }

    /// Declares the end of all input: every watermark moves to the end, so every window closes.
    pub fn finish(&self) {
        let mut state = self.lock();
        let state = &mut *state;
        let advanced: Vec<(String, Watermark)> = state
            .streams
            .iter_mut()
            .filter_map(|(name, s)| s.advance(Watermark::END).map(|wm| (name.clone(), wm)))
            .collect();
        for (name, wm) in advanced {
            advance_queries(state, &name, wm);
        }
    }

    /// The schema of a stream.
    pub fn stream_schema(&self, stream: &str) -> Result<SchemaRef> {
        Ok(self.lock().catalog.require_stream(stream)?.schema.clone())
    }

    /// Describes a statement without running it.
    pub async fn describe(&self, sql: &str) -> Result<Description> {
        let stmt = sql::parse_one(sql)?;
        let mut params = Vec::new();
        let schema = match &stmt {
            Statement::Sql(s) => match s.as_ref() {
                sq::Statement::Insert(ins) => {
                    let target = insert::insert_target(ins)?;
                    let schema = self.stream_schema(&target)?;
                    let cols = insert::insert_columns(ins, &schema)?;
                    for row in insert::insert_rows(ins)? {
                        for (e, &c) in row.iter().zip(&cols) {
                            if let Some(n) = placeholder_index(e) {
                                if params.len() < n {
                                    params.resize(n, DataType::Utf8);
                                }
                                params[n - 1] = schema.field(c).data_type().clone();
                            }
                        }
                    }
                    None
                }
                sq::Statement::Query(_) => {
                    params.resize(count_placeholders(s), DataType::Utf8);
                    let (ctx, _) = self.select_context()?;
                    let df_stmt = datafusion::sql::parser::Statement::Statement(s.clone());
                    let plan = ctx.state().statement_to_plan(df_stmt).await?;
                    Some(Arc::new(plan.schema().as_arrow().clone()))
                }
                sq::Statement::ShowVariable { variable } => Some(show_schema(variable)),
                _ => None,
            },
            Statement::Explain { .. } => Some(Arc::new(Schema::new(vec![Field::new(
                "QUERY PLAN",
                DataType::Utf8,
                true,
            )]))),
            Statement::ShowStreams => Some(show_streams(&self.lock()).schema()),
            Statement::ShowQueries => Some(show_queries(&mut self.lock()).schema()),
            Statement::Subscribe { query, .. } => {
                let name = normalize(query);
                let state = self.lock();
                let q = state
                    .queries
                    .get(&name)
                    .ok_or_else(|| Error::undefined("query", &name))?;
                Some(q.schema())
            }
            _ => None,
        };
        Ok(Description { params, schema })
    }

    fn select_context(&self) -> Result<(SessionContext, ())> {
        let config = SessionConfig::new()
            .with_target_partitions(1)
            .with_information_schema(true);
        let ctx = SessionContext::new_with_config(config);
        let state = self.lock();
        for (name, s) in &state.streams {
            let table = MemTable::try_new(s.def.schema.clone(), vec![s.recent.batches()])?;
            ctx.register_table(name.as_str(), Arc::new(table))?;
        }
        for (name, q) in &state.queries {
            let table = MemTable::try_new(q.schema(), vec![q.retained.batches()])?;
            ctx.register_table(name.as_str(), Arc::new(table))?;
        }
        let streams = state.streams.keys().map(|n| Relation::Stream(n));
        let queries = state.queries.keys().map(|n| Relation::Query(n));
        pg_catalog::register(&ctx, streams.chain(queries))?;
        Ok((ctx, ()))
    }

    async fn execute_sql(
        &self,
        stmt: sq::Statement,
        params: &[Option<String>],
    ) -> Result<StatementResult> {
        match stmt {
            sq::Statement::Insert(ins) => {
                let target = insert::insert_target(&ins)?;
                let schema = self.stream_schema(&target)?;
                let batch = insert::insert_batch(&ins, &schema, params)?;
                let n = self.insert_batch(&target, batch)?;
                Ok(StatementResult::Command(format!("INSERT 0 {n}")))
            }
            sq::Statement::Query(_) => {
                let mut stmt = stmt;
                if !params.is_empty() {
                    bind_placeholders(&mut stmt, params);
                }
                pg_catalog::unqualify_functions(&mut stmt);
                let catalog_query = pg_catalog::reads_catalog(&stmt);
                let (ctx, _) = self.select_context()?;
                let df_stmt = datafusion::sql::parser::Statement::Statement(Box::new(stmt));
                let plan = match ctx.state().statement_to_plan(df_stmt).await {
                    Ok(plan) => plan,
                    Err(_) if catalog_query => {
                        return Err(Error::NotSupported(
                            "saql's pg_catalog answers psql's \\d, \\dt and \\dm only; \
                             SHOW STREAMS and SHOW QUERIES describe streams and queries"
                                .into(),
                        ))
                    }
                    Err(e) => return Err(e.into()),
                };
                let df = ctx.execute_logical_plan(plan).await?;
                let schema = Arc::new(df.schema().as_arrow().clone());
                let batches = df.collect().await?;
                Ok(StatementResult::Rows { schema, batches })
            }
            sq::Statement::Set(_) => Ok(StatementResult::Command("SET".into())),
            sq::Statement::ShowVariable { variable } => {
                let value = show_value(&variable);
                let schema = show_schema(&variable);
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![Arc::new(StringArray::from(vec![value]))],
                )?;
                Ok(StatementResult::Rows {
                    schema,
                    batches: vec![batch],
                })
            }
            sq::Statement::StartTransaction { .. } => Ok(StatementResult::Command("BEGIN".into())),
            sq::Statement::Commit { .. } => Ok(StatementResult::Command("COMMIT".into())),
            sq::Statement::Rollback { .. } => Ok(StatementResult::Command("ROLLBACK".into())),
            sq::Statement::Discard { .. } => Ok(StatementResult::Command("DISCARD ALL".into())),
            other => Err(Error::NotSupported(format!(
                "statement not supported: {}",
                first_words(&other.to_string())
            ))),
        }
    }
}

/// Spreads the plan's keyed operators over `workers` replicas each, where only stateless
/// operators follow (an OUTLIER, INVARIANT or history over the results needs them whole, in
/// order). The replicas are built from the operator's spec.
fn shard(plan: &mut QueryPlan, workers: usize) -> Result<()> {
    for i in 0..plan.specs.len() {
        if !plan.specs[i + 1..].iter().all(OperatorSpec::is_stateless) {
            continue;
        }
        if plan.specs[i].build()?.shard_keys().is_none() {
            continue;
        }
        let spec = plan.specs[i].clone();
        plan.specs[i] = spec.sharded(workers);
    }
    Ok(())
}

fn advance_queries(state: &mut State, stream: &str, wm: Watermark) {
    if let Some(g) = state.graphs.get_mut(stream) {
        dispatch(&mut state.queries, g.advance(wm));
    }
}

/// Hands each query its results, or its failure.
fn dispatch(queries: &mut BTreeMap<String, QueryRuntime>, outputs: Outputs) {
    for (name, reason) in outputs.failed {
        if let Some(q) = queries.get_mut(&name) {
            q.deliver(Err(reason));
        }
    }
    for (name, batches) in outputs.rows {
        if let Some(q) = queries.get_mut(&name) {
            q.deliver(Ok(batches));
        }
    }
}

fn ascii_option(c: char, what: &str) -> Result<u8> {
    if c.is_ascii() {
        Ok(c as u8)
    } else {
        Err(Error::invalid_input(
            "22023",
            format!("COPY {what} must be a single one-byte character"),
        ))
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn placeholder_index(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Placeholder(p) => p.trim_start_matches('$').parse().ok().filter(|&n| n > 0),
            _ => None,
        },
        _ => None,
    }
}

struct Placeholders<'a> {
    params: &'a [Option<String>],
    max: usize,
}

impl VisitorMut for Placeholders<'_> {
    type Break = ();
    fn post_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
        if let Some(n) = placeholder_index(expr) {
            self.max = self.max.max(n);
            if let Some(value) = self.params.get(n - 1) {
                *expr = Expr::value(match value {
                    Some(v) => Value::SingleQuotedString(v.clone()),
                    None => Value::Null,
                });
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

fn count_placeholders(stmt: &sq::Statement) -> usize {
    let mut stmt = stmt.clone();
    let mut v = Placeholders {
        params: &[],
        max: 0,
    };
    let _ = stmt.visit(&mut v);
    v.max
}

fn bind_placeholders(stmt: &mut sq::Statement, params: &[Option<String>]) {
    let mut v = Placeholders { params, max: 0 };
    let _ = stmt.visit(&mut v);
}

fn show_schema(variable: &[sq::Ident]) -> SchemaRef {
    let name = variable
        .iter()
        .map(|i| i.value.to_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, false)]))
}

fn show_value(variable: &[sq::Ident]) -> String {
    let name = variable
        .iter()
        .map(|i| i.value.to_lowercase())
        .collect::<Vec<_>>()
        .join(" ");
    match name.as_str() {
        "server_version" => "15.0".into(),
        "server_encoding" | "client_encoding" => "UTF8".into(),
        "datestyle" => "ISO, MDY".into(),
        "timezone" | "time zone" => "UTC".into(),
        "standard_conforming_strings" => "on".into(),
        "transaction isolation level" | "transaction_isolation" => "read committed".into(),
        "integer_datetimes" => "on".into(),
        _ => String::new(),
    }
}

fn text_column(values: Vec<String>) -> ArrayRef {
    Arc::new(StringArray::from(values))
}

fn int_column(values: Vec<u64>) -> ArrayRef {
    Arc::new(Int64Array::from(
        values.into_iter().map(|v| v as i64).collect::<Vec<_>>(),
    ))
}

fn rows_result(fields: Vec<(&str, DataType)>, columns: Vec<ArrayRef>) -> StatementResult {
    let schema = Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|(n, t)| Field::new(n, t, true))
            .collect::<Vec<_>>(),
    ));
    match RecordBatch::try_new(schema.clone(), columns) {
        Ok(b) => StatementResult::Rows {
            schema,
            batches: vec![b],
        },
        Err(_) => StatementResult::Rows {
            schema,
            batches: vec![],
        },
    }
}

impl StatementResult {
    fn schema(&self) -> SchemaRef {
        match self {
            StatementResult::Rows { schema, .. } => schema.clone(),
            _ => Arc::new(Schema::empty()),
        }
    }
}

/// EXPLAIN's result: one text column `QUERY PLAN`, a row per line (or one row of JSON), as
/// PostgreSQL returns it.
fn explain_result(plan: &crate::plan::QueryPlan, json: bool) -> StatementResult {
    let lines: Vec<String> = if json {
        vec![serde_json::to_string_pretty(&plan.explain_json()).unwrap_or_default()]
    } else {
        plan.explain_text().lines().map(str::to_string).collect()
    };
    rows_result(
        vec![("QUERY PLAN", DataType::Utf8)],
        vec![text_column(lines)],
    )
}

fn show_streams(state: &State) -> StatementResult {
    let mut names = Vec::new();
    let mut columns = Vec::new();
    let mut watermarks = Vec::new();
    let mut rows_in = Vec::new();
    let mut late = Vec::new();
    let mut ddl = Vec::new();
    for s in state.catalog.streams() {
        let rt = state.streams.get(&s.name);
        names.push(s.name.clone());
        columns.push(
            s.ddl
                .columns
                .iter()
                .map(|c| format!("{} {}", normalize(&c.name), c.data_type))
                .collect::<Vec<_>>()
                .join(", "),
        );
        watermarks.push(rt.map(|r| r.watermark.to_string()).unwrap_or_default());
        rows_in.push(rt.map(|r| r.rows_in).unwrap_or(0));
        late.push(rt.map(|r| r.late_rows).unwrap_or(0));
        ddl.push(s.ddl.to_string());
    }
    rows_result(
        vec![
            ("name", DataType::Utf8),
            ("columns", DataType::Utf8),
            ("watermark", DataType::Utf8),
            ("rows_in", DataType::Int64),
            ("late_rows", DataType::Int64),
            ("definition", DataType::Utf8),
        ],
        vec![
            text_column(names),
            text_column(columns),
            text_column(watermarks),
            int_column(rows_in),
            int_column(late),
            text_column(ddl),
        ],
    )
}

fn show_queries(state: &mut State) -> StatementResult {
    let mut names = Vec::new();
    let mut streams = Vec::new();
    let mut status = Vec::new();
    let mut rows_in = Vec::new();
    let mut rows_out = Vec::new();
    let mut late = Vec::new();
    let mut watermarks = Vec::new();
    let mut subscribers = Vec::new();
    let mut defs = Vec::new();
    for q in state.queries.values_mut() {
        names.push(q.name.clone());
        streams.push(q.plan.stream.name.clone());
        status.push(match &q.failed {
            None => "running".to_string(),
            Some(e) => format!("failed: {e}"),
        });
        rows_in.push(q.rows_in);
        rows_out.push(q.rows_out);
        late.push(
            state
                .graphs
                .get(&q.plan.stream.name)
                .map_or(0, |g| g.late_rows(&q.path)),
        );
        watermarks.push(
            state
                .streams
                .get(&q.plan.stream.name)
                .map(|s| s.watermark.to_string())
                .unwrap_or_default(),
        );
        subscribers.push(q.subscribers() as u64);
        defs.push(sql::query_sql(&q.def.query, &q.def.clauses));
    }
    rows_result(
        vec![
            ("name", DataType::Utf8),
            ("stream", DataType::Utf8),
            ("status", DataType::Utf8),
            ("rows_in", DataType::Int64),
            ("rows_out", DataType::Int64),
            ("late_rows", DataType::Int64),
            ("watermark", DataType::Utf8),
            ("subscribers", DataType::Int64),
            ("definition", DataType::Utf8),
        ],
        vec![
            text_column(names),
            text_column(streams),
            text_column(status),
            int_column(rows_in),
            int_column(rows_out),
            int_column(late),
            text_column(watermarks),
            int_column(subscribers),
            text_column(defs),
        ],
    )
}
