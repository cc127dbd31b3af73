//! The engine: executes statements against the catalog and hands each stream's rows to its
//! [`StreamHub`]. The catalog is read-mostly behind one `RwLock`; every stream is a hub with
//! its own lock holding its watermark, its queries' operators and their outputs, so a busy
//! stream never stalls another. Locks are always taken in the order catalog, hub, output.
//! Ad hoc SQL lives in `adhoc`, SHOW and EXPLAIN answers in `show`. The engine needs no
//! network and no async runtime except for ad hoc `SELECT`, which DataFusion runs.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast as sq;
use tokio::sync::mpsc;

use super::adhoc;
use super::checkpoint::Written;
use super::hub::{Hub, StreamHub};
use super::output::{QueryOutput, SubscriptionEvent};
use super::recovery::{self, Durability};
use super::show;
use super::wal::{FsyncPolicy, Record, DEFAULT_GROUP_COMMIT};
use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};
use crate::plan::{plan_continuous, Catalog, OperatorSpec, QueryPlan, StreamDef};
use crate::sources::csv::{CopyDecoder, CopyOptions};
use crate::sources::insert;
use crate::sql::{self, CopyFrom, CreateQuery, ExplainTarget, Statement};
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
    /// When accepted rows reach the disk (with a data directory).
    pub fsync: FsyncPolicy,
    /// How often a checkpoint is taken (with a data directory); `None`: only by the
    /// `CHECKPOINT` statement.
    pub checkpoint_interval: Option<Duration>,
    /// Checkpoints kept; the log is kept from the oldest of them on.
    pub keep_checkpoints: usize,
    /// Open a log with a corrupt frame by cutting it there, instead of refusing to start.
    pub salvage_log: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            data_dir: None,
            retain_rows: 10_000,
            workers: 1,
            fsync: FsyncPolicy::Interval(DEFAULT_GROUP_COMMIT),
            checkpoint_interval: Some(Duration::from_secs(60)),
            keep_checkpoints: 2,
            salvage_log: false,
        }
    }
}

/// A live feed of a query's results. Dropping it unsubscribes.
pub struct Subscription {
    /// The query's name.
    pub query: String,
    /// Schema of its rows (with a leading `seq` column if asked for).
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

/// What every session shares: the catalog and the hubs of its streams.
pub(super) struct Shared {
    /// Streams and queries as declared.
    pub catalog: Catalog,
    /// Each stream's hub, by name.
    pub hubs: HashMap<String, Arc<StreamHub>>,
    /// Each query's stream, by query name.
    pub query_streams: BTreeMap<String, String>,
}

/// The streaming engine. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<RwLock<Shared>>,
    config: Arc<EngineConfig>,
    durability: Option<Arc<Durability>>,
}

/// Where earlier versions kept the catalog; read once into the log if there is no log yet.
const CATALOG_FILE: &str = "catalog.sql";

impl Engine {
    /// Opens an engine. With a data directory: locks it, restores the newest checkpoint,
    /// replays the ingest log after it, and takes checkpoints in the background.
    pub fn open(config: EngineConfig) -> Result<Engine> {
        let durability = match &config.data_dir {
            Some(dir) => Some(Arc::new(Durability::open(
                dir,
                config.fsync,
                config.keep_checkpoints,
                config.salvage_log,
            )?)),
            None => None,
        };
        let engine = Engine {
            shared: Arc::new(RwLock::new(Shared {
                catalog: Catalog::default(),
                hubs: HashMap::new(),
                query_streams: BTreeMap::new(),
            })),
            config: Arc::new(config),
            durability,
        };
        if let Some(d) = &engine.durability {
            engine.recover(d)?;
            if let Some(every) = engine.config.checkpoint_interval {
                engine.checkpoint_every(every)?;
            }
        }
        Ok(engine)
    }

    /// Restores the newest checkpoint and replays the log after it.
    fn recover(&self, d: &Durability) -> Result<()> {
        let started = Instant::now();
        let mut shared = self.write();
        let manifest = d.checkpoints.latest()?;
        if let Some(m) = &manifest {
            for stmt in sql::parse(&m.catalog_sql)? {
                self.ddl(&mut shared, stmt, false)?;
            }
            recovery::restore(&shared, &d.checkpoints, m)?;
        } else if d.log.last_seq() == 0 {
            self.import_catalog_file(&mut shared)?;
        }
        let catalog_seq = manifest.as_ref().map_or(0, |m| m.catalog_seq);
        let after = manifest.as_ref().map_or(0, |m| m.covered());
        let mut frames = 0u64;
        d.log.replay(after, |seq, record| {
            let position = |stream: &str| manifest.as_ref().map_or(0, |m| m.position(stream));
            match record {
                Record::Catalog { sql } if seq > catalog_seq => {
                    for stmt in sql::parse(&sql)? {
                        self.ddl(&mut shared, stmt, false)?;
                    }
                }
                Record::Rows { stream, batch } if seq > position(&stream) => {
                    if let Some(hub) = shared.hubs.get(&stream) {
                        hub.lock().insert(&batch, Instant::now())?;
                    }
                }
                Record::Watermark { stream, watermark } if seq > position(&stream) => {
                    if let Some(hub) = shared.hubs.get(&stream) {
                        hub.lock().advance(watermark);
                    }
                }
                _ => return Ok(()),
            }
            frames += 1;
            Ok(())
        })?;
        tracing::info!(
            "recovered {} streams and {} queries: checkpoint {}, {frames} log frames replayed in {:?}",
            shared.hubs.len(),
            shared.query_streams.len(),
            manifest.as_ref().map_or("none".to_string(), |m| m.epoch.to_string()),
            started.elapsed()
        );
        Ok(())
    }

    /// Reads a catalog kept by an earlier version as `catalog.sql` into the log.
    fn import_catalog_file(&self, shared: &mut Shared) -> Result<()> {
        let Some(dir) = &self.config.data_dir else {
            return Ok(());
        };
        let path = dir.join(CATALOG_FILE);
        if !path.exists() {
            return Ok(());
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        for stmt in sql::parse(&text)? {
            self.ddl(shared, stmt, true)?;
        }
        std::fs::remove_file(&path)
            .map_err(|e| Error::io(format!("removing {}", path.display()), e))
    }

    /// Starts the thread that takes a checkpoint every `every`; it ends with the engine.
    fn checkpoint_every(&self, every: Duration) -> Result<()> {
        let shared = Arc::downgrade(&self.shared);
        let durability = self.durability.as_ref().map(Arc::downgrade);
        let config = self.config.clone();
        let upgrade = move |shared: &Weak<RwLock<Shared>>, d: &Option<Weak<Durability>>| {
            Some(Engine {
                shared: shared.upgrade()?,
                config: config.clone(),
                durability: Some(d.as_ref()?.upgrade()?),
            })
        };
        std::thread::Builder::new()
            .name("saql-checkpoint".into())
            .spawn(move || {
                let mut waited = Duration::ZERO;
                let step = Duration::from_millis(100).min(every);
                loop {
                    std::thread::sleep(step);
                    waited += step;
                    let Some(engine) = upgrade(&shared, &durability) else {
                        return;
                    };
                    if waited < every {
                        continue;
                    }
                    waited = Duration::ZERO;
                    if let Err(e) = engine.checkpoint() {
                        tracing::warn!("checkpoint failed: {e}");
                    }
                }
            })
            .map_err(|e| Error::io("starting the checkpoint thread", e))?;
        Ok(())
    }

    /// Takes a checkpoint now: every hub's state is snapshotted under its own lock (ingest
    /// into a stream pauses only while its operators copy their state), then written in the
    /// calling thread, and the log behind the oldest kept checkpoint is removed.
    pub fn checkpoint(&self) -> Result<Written> {
        let Some(d) = &self.durability else {
            return Err(Error::NotSupported(
                "CHECKPOINT needs a data directory (--data-dir)".into(),
            ));
        };
        let _one = d.checkpointing.lock().unwrap_or_else(|p| p.into_inner());
        let epoch = d.checkpoints.next_epoch()?;
        let snapshot = {
            let shared = self.read();
            recovery::snapshot(&shared, &d.log, epoch, self.config.workers)?
        };
        d.log.sync()?;
        let (written, oldest) = d.checkpoints.write(&snapshot)?;
        d.log.truncate_through(oldest.covered())?;
        Ok(written)
    }

    /// Appends a record to the log, if there is one; returns its sequence number.
    fn log(&self, record: &Record) -> Result<Option<u64>> {
        match &self.durability {
            Some(d) => Ok(Some(d.log.append(record)?)),
            None => Ok(None),
        }
    }

    /// Waits until a logged record is durable.
    fn durable(&self, seq: Option<u64>) -> Result<()> {
        match (&self.durability, seq) {
            (Some(d), Some(seq)) => d.log.wait_durable(seq),
            _ => Ok(()),
        }
    }

    // A panic while a lock was held cannot leave the catalog half-updated in a way we could
    // repair; keep serving with what is there.
    fn read(&self) -> RwLockReadGuard<'_, Shared> {
        self.shared.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Shared> {
        self.shared.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The hub of a stream.
    fn hub(&self, stream: &str) -> Result<Arc<StreamHub>> {
        self.read()
            .hubs
            .get(stream)
            .cloned()
            .ok_or_else(|| Error::undefined("stream", stream))
    }

    /// The hub of a query's stream, and the stream's name.
    fn query_hub(&self, query: &str) -> Result<(Arc<StreamHub>, String)> {
        let shared = self.read();
        let stream = shared
            .query_streams
            .get(query)
            .ok_or_else(|| Error::undefined("query", query))?;
        let hub = shared
            .hubs
            .get(stream)
            .cloned()
            .ok_or_else(|| Error::undefined("stream", stream))?;
        Ok((hub, stream.clone()))
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
        let tag = match stmt {
            Statement::CreateStream(_)
            | Statement::CreateQuery(_)
            | Statement::DropStream { .. }
            | Statement::DropQuery { .. } => {
                let seq = {
                    let mut shared = self.write();
                    self.ddl(&mut shared, stmt.clone(), true)?
                };
                self.durable(seq)?;
                match stmt {
                    Statement::CreateStream(_) => "CREATE STREAM",
                    Statement::CreateQuery(_) => "CREATE CONTINUOUS QUERY",
                    Statement::DropStream { .. } => "DROP STREAM",
                    _ => "DROP QUERY",
                }
            }
            Statement::Checkpoint => {
                self.checkpoint()?;
                "CHECKPOINT"
            }
            Statement::ShowStreams => return Ok(show::show_streams(&self.read())),
            Statement::ShowQueries => return Ok(show::show_queries(&self.read())),
            Statement::Subscribe {
                query,
                copy,
                from,
                seq,
            } => {
                let name = normalize(&query);
                let (hub, _) = self.query_hub(&name)?;
                let hub = hub.lock();
                let q = hub
                    .queries
                    .get(&name)
                    .ok_or_else(|| Error::undefined("query", &name))?;
                let mut output = QueryOutput::lock(&q.output);
                let events = output.subscribe(from, seq)?;
                return Ok(StatementResult::Subscribe(Subscription {
                    query: name,
                    schema: output.subscriber_schema(seq),
                    copy,
                    events,
                }));
            }
            Statement::CopyFrom(c) => return self.start_copy(&c),
            Statement::Explain { json, target } => {
                let shared = self.read();
                let (query, clauses) = match target {
                    ExplainTarget::Create(cq) => (cq.query, cq.clauses),
                    ExplainTarget::Query(q, c) => (q, c),
                    ExplainTarget::Named(n) => {
                        let name = normalize(&n);
                        let cq = shared
                            .catalog
                            .query(&name)
                            .ok_or_else(|| Error::undefined("query", &name))?;
                        (cq.query.clone(), cq.clauses.clone())
                    }
                };
                let plan = plan_continuous(&query, &clauses, &shared.catalog)?;
                return Ok(show::explain_result(&plan, json));
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

    /// Applies a catalog change: checks it, appends it to the log (`log`, unless it is being
    /// replayed from there), then changes memory. Returns the log sequence number.
    fn ddl(&self, shared: &mut Shared, stmt: Statement, log: bool) -> Result<Option<u64>> {
        let logged = |engine: &Engine, sql: String| -> Result<Option<u64>> {
            if log {
                engine.log(&Record::Catalog { sql })
            } else {
                Ok(None)
            }
        };
        match stmt {
            Statement::CreateStream(cs) => {
                let name = normalize(&cs.name);
                if shared.catalog.stream(&name).is_some() && cs.if_not_exists {
                    return Ok(None);
                }
                let def = StreamDef::try_new(&cs)?;
                if shared.catalog.name_taken(&name) {
                    return Err(Error::duplicate("relation", &name));
                }
                let seq = logged(self, Statement::CreateStream(cs).to_string())?;
                let def = shared.catalog.add_stream(def)?;
                let hub = StreamHub::new(def.clone(), self.config.retain_rows);
                shared.hubs.insert(def.name.clone(), hub);
                Ok(seq)
            }
            Statement::CreateQuery(cq) => {
                let name = normalize(&cq.name);
                if cq.if_not_exists && shared.query_streams.contains_key(&name) {
                    return Ok(None);
                }
                if shared.catalog.name_taken(&name) {
                    return Err(Error::duplicate("relation", &name));
                }
                let plan = self.plan_query(shared, &cq)?;
                let stream = plan.stream.name.clone();
                let hub = shared
                    .hubs
                    .get(&stream)
                    .cloned()
                    .ok_or_else(|| Error::undefined("stream", &stream))?;
                // Attach first (it can be undone), log, then make it visible.
                let mut hub = hub.lock();
                hub.attach(&name, cq.clone(), plan, self.config.retain_rows)?;
                let seq = match logged(self, Statement::CreateQuery(cq.clone()).to_string()) {
                    Ok(seq) => seq,
                    Err(e) => {
                        hub.detach(&name);
                        return Err(e);
                    }
                };
                drop(hub);
                shared.catalog.add_query(name.clone(), cq)?;
                shared.query_streams.insert(name, stream);
                Ok(seq)
            }
            Statement::DropStream { name, if_exists } => {
                let name = normalize(&name);
                if shared.catalog.stream(&name).is_none() {
                    if if_exists {
                        return Ok(None);
                    }
                    return Err(Error::undefined("stream", &name));
                }
                check_unused(shared, &name)?;
                let seq = logged(self, format!("DROP STREAM {}", quoted(&name)))?;
                shared.catalog.remove_stream(&name);
                if let Some(hub) = shared.hubs.remove(&name) {
                    hub.lock().dropped = true;
                }
                Ok(seq)
            }
            Statement::DropQuery { name, if_exists } => {
                let name = normalize(&name);
                let Some(stream) = shared.query_streams.get(&name).cloned() else {
                    if if_exists {
                        return Ok(None);
                    }
                    return Err(Error::undefined("query", &name));
                };
                let seq = logged(self, format!("DROP QUERY {}", quoted(&name)))?;
                shared.query_streams.remove(&name);
                if let Some(hub) = shared.hubs.get(&stream) {
                    hub.lock().detach(&name);
                }
                shared.catalog.remove_query(&name);
                Ok(seq)
            }
            other => Err(Error::Internal(format!("not a catalog change: {other}"))),
        }
    }

    fn plan_query(&self, shared: &Shared, cq: &CreateQuery) -> Result<QueryPlan> {
        let mut plan = plan_continuous(&cq.query, &cq.clauses, &shared.catalog)?;
        if self.config.workers > 1 {
            shard(&mut plan, self.config.workers)?;
        }
        Ok(plan)
    }

    fn start_copy(&self, c: &CopyFrom) -> Result<StatementResult> {
        let name = normalize_object(&c.stream);
        let def = self.read().catalog.require_stream(&name)?.clone();
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

    /// Appends rows to a stream and runs every query that reads it, on the calling thread,
    /// holding only the stream's own lock. The batch must have the stream's schema. Returns
    /// the number of rows accepted.
    /// With a data directory the rows are logged first and the call returns once they are
    /// durable (per [`EngineConfig::fsync`]).
    pub fn insert_batch(&self, stream: &str, batch: RecordBatch) -> Result<u64> {
        let hub = self.hub(stream)?;
        let (n, seq) = {
            let mut hub = hub.lock();
            hub.check_batch(&batch)?;
            if batch.num_rows() == 0 {
                return Ok(0);
            }
            let seq = self.log(&Record::Rows {
                stream: stream.to_string(),
                batch: batch.clone(),
            })?;
            (hub.insert(&batch, Instant::now())?, seq)
        };
        self.durable(seq)?;
        Ok(n)
    }

    /// Moves a hub's watermark (logged, so that replay moves it at the same point).
    fn advance_logged(&self, hub: &mut Hub, to: Watermark) {
        if to <= hub.stream.watermark {
            return;
        }
        let record = Record::Watermark {
            stream: hub.stream.def.name.clone(),
            watermark: to,
        };
        if let Err(e) = self.log(&record) {
            // Not moving it is safe: windows close on the next rows or tick.
            tracing::warn!("watermark of \"{}\" not moved: {e}", hub.stream.def.name);
            return;
        }
        hub.advance(to);
    }

    /// Periodic housekeeping: advances the watermark of idle streams and forgets subscribers
    /// whose clients went away. The server calls it a few times a second.
    pub fn tick(&self) {
        self.tick_at(Instant::now());
    }

    /// [`Engine::tick`] at a given processing time (for tests).
    pub fn tick_at(&self, now: Instant) {
        for hub in self.hubs() {
            let mut hub = hub.lock();
            if let Some(wm) = hub.stream.idle_watermark(now) {
                self.advance_logged(&mut hub, wm);
            }
            for q in hub.queries.values() {
                QueryOutput::lock(&q.output).subscribers();
            }
        }
    }

    /// Declares the end of all input: every watermark moves to the end, so every window closes.
    pub fn finish(&self) {
        for hub in self.hubs() {
            self.advance_logged(&mut hub.lock(), Watermark::END);
        }
    }

    fn hubs(&self) -> Vec<Arc<StreamHub>> {
        self.read().hubs.values().cloned().collect()
    }

    /// The schema of a stream.
    pub fn stream_schema(&self, stream: &str) -> Result<SchemaRef> {
        Ok(self.read().catalog.require_stream(stream)?.schema.clone())
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
                            if let Some(n) = adhoc::placeholder_index(e) {
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
                    params.resize(adhoc::count_placeholders(s), DataType::Utf8);
                    let ctx = adhoc::context(&self.read())?;
                    Some(adhoc::select_schema(ctx, s).await?)
                }
                sq::Statement::ShowVariable { variable } => Some(show::show_schema(variable)),
                _ => None,
            },
            Statement::Explain { .. } => Some(Arc::new(Schema::new(vec![Field::new(
                "QUERY PLAN",
                DataType::Utf8,
                true,
            )]))),
            Statement::ShowStreams => Some(show::show_streams(&self.read()).schema()),
            Statement::ShowQueries => Some(show::show_queries(&self.read()).schema()),
            Statement::Subscribe { query, seq, .. } => {
                let name = normalize(query);
                let (hub, _) = self.query_hub(&name)?;
                let hub = hub.lock();
                let q = hub
                    .queries
                    .get(&name)
                    .ok_or_else(|| Error::undefined("query", &name))?;
                let schema = QueryOutput::lock(&q.output).subscriber_schema(*seq);
                Some(schema)
            }
            _ => None,
        };
        Ok(Description { params, schema })
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
                let engine = self.clone();
                let n = off_async(move || engine.insert_batch(&target, batch)).await?;
                Ok(StatementResult::Command(format!("INSERT 0 {n}")))
            }
            sq::Statement::Query(_) => {
                let ctx = adhoc::context(&self.read())?;
                adhoc::select(ctx, stmt, params).await
            }
            sq::Statement::Set(_) => Ok(StatementResult::Command("SET".into())),
            sq::Statement::ShowVariable { variable } => show::show_variable(&variable),
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

/// Runs `work` (operators over a batch) off the async runtime's workers when there is one,
/// so that a heavy statement never blocks other sessions' I/O.
async fn off_async<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    #[cfg(feature = "server")]
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        return match handle.spawn_blocking(work).await {
            Ok(result) => result,
            Err(e) => Err(Error::Internal(format!("statement failed: {e}"))),
        };
    }
    work()
}

/// Fails unless no query reads `name`.
fn check_unused(shared: &Shared, name: &str) -> Result<()> {
    let users: Vec<String> = shared
        .query_streams
        .iter()
        .filter(|(_, s)| s.as_str() == name)
        .map(|(q, _)| format!("\"{q}\""))
        .collect();
    if !users.is_empty() {
        return Err(Error::Catalog {
            sqlstate: "2BP01",
            message: format!(
                "cannot drop stream \"{name}\" because queries {} read it; drop them first",
                users.join(", ")
            ),
        });
    }
    Ok(())
}

/// A name as a quoted SQL identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
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
