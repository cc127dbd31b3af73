//! The engine: executes statements against the catalog and hands each stream's rows to its
//! [`StreamHub`]. The catalog is read-mostly behind one `RwLock`; every stream is a hub with
//! its own lock holding its watermark, its queries' operators and their outputs, so a busy
//! stream never stalls another. Locks are always taken in the order catalog, hub, output.
//! Ad hoc SQL lives in `adhoc`, SHOW and EXPLAIN answers in `show`, COPY FROM STDIN in
//! `copy`. The engine needs no network and no async runtime except for ad hoc `SELECT`,
//! which DataFusion runs.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::{self as sq, Spanned};

use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};
use crate::plan::TableDef;
use crate::plan::{plan_continuous, Catalog};
use crate::runtime::connectors::sinks::SinkRuntime;
use crate::runtime::connectors::sources::SourceRuntime;
use crate::runtime::core::hub::StreamHub;
use crate::runtime::core::ingest::IngestBudget;
use crate::runtime::core::output::{
    QueryOutput, SubscriptionEvent, SubscriptionEvents, DEFAULT_SUBSCRIBER_BUFFER_BYTES,
};
use crate::runtime::durability::recovery::Durability;
use crate::runtime::durability::wal::{FsyncPolicy, Record};
use crate::runtime::pg::functions::SessionInfo;
use crate::runtime::statements::adhoc;
pub use crate::runtime::statements::copy::CopyIn;
use crate::runtime::statements::show;
use crate::runtime::statements::subscribe::Shape;
use crate::runtime::statements::table;
use crate::sources::insert;
use crate::sources::param::Param;
use crate::sql::{self, ExplainTarget, Statement, Subscribe};
use crate::time::Watermark;

/// Default bound on the state (operators and retained results) of one continuous query:
/// 1 GiB.
pub const DEFAULT_MAX_QUERY_STATE_BYTES: usize = 1 << 30;

/// How an engine is set up.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Where the catalog is kept; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// Recent rows kept per stream and per query for ad hoc SELECT.
    pub retain_rows: usize,
    /// Threads a stream's queries are spread over (those that share no operator, by their
    /// measured cost), a keyed operator (session window, pattern) is spread over by the hash
    /// of its key when only stateless operators follow it, and a COPY's text or csv data is
    /// decoded on. 1 does all of it on the calling thread.
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
    /// Result bytes queued for one subscriber that has not read them; past this it is cut
    /// off with 53400.
    pub subscriber_buffer_bytes: usize,
    /// Default of each session's `saql.max_result_rows`: most rows an ad hoc SELECT may
    /// return (54000 past it); 0, the default, is no bound: results are streamed.
    pub max_result_rows: u64,
    /// Default of each session's `saql.max_result_bytes`: most bytes (Arrow memory) an ad
    /// hoc SELECT may return (54000 past it); 0, the default, is no bound.
    pub max_result_bytes: u64,
    /// Longest line a COPY accepts (54000 past it).
    pub max_copy_line_bytes: usize,
    /// Most data one COPY may send, held until CopyDone so that it is applied atomically
    /// (54000 past it).
    pub max_copy_bytes: usize,
    /// Most bytes of state (groups, buffered rows, learned sets, retained results) one
    /// continuous query may hold; past it the query fails with 53200 and the others run on.
    /// Retained results take at most a quarter of it (the oldest are dropped).
    pub max_query_state_bytes: usize,
    /// Bytes of batches that may wait to enter their streams or be processed at once, over
    /// all writers; past it writers wait (backpressure).
    pub max_ingest_bytes: usize,
    /// History kept by streams that do not say (`WITH (history = ...)`), with a data
    /// directory; None keeps none.
    pub history: Option<crate::plan::retention::Retention>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            data_dir: None,
            retain_rows: 10_000,
            workers: 1,
            fsync: FsyncPolicy::Always,
            checkpoint_interval: Some(Duration::from_secs(60)),
            keep_checkpoints: 2,
            salvage_log: false,
            subscriber_buffer_bytes: DEFAULT_SUBSCRIBER_BUFFER_BYTES,
            max_result_rows: 0,
            max_result_bytes: 0,
            max_copy_line_bytes: 16 << 20,
            max_copy_bytes: 1 << 30,
            max_query_state_bytes: DEFAULT_MAX_QUERY_STATE_BYTES,
            max_ingest_bytes: 256 << 20,
            history: None,
        }
    }
}

/// A live feed of a query's results. Dropping it unsubscribes.
pub struct Subscription {
    /// The query's name.
    pub query: String,
    /// Schema of its rows (with a leading `seq` column if asked for).
    pub schema: SchemaRef,
    /// The COPY framing the client asked for (`COPY (SUBSCRIBE q) TO STDOUT`), if any.
    pub copy: Option<crate::sql::CopyOut>,
    /// Result batches as the query emits them.
    pub events: SubscriptionEvents,
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

/// What a statement produced.
pub enum StatementResult {
    /// A command finished; the tag is what Postgres would say (`CREATE STREAM`, `INSERT 0 3`).
    Command(String),
    /// A command finished with something the user should know (the server sends it as a
    /// NOTICE before the tag): an INSERT some of whose rows were late.
    CommandWithNotice {
        /// What Postgres would say.
        tag: String,
        /// The notice, lowercase, no trailing period.
        notice: String,
    },
    /// A result set, whole.
    Rows {
        /// Its schema.
        schema: SchemaRef,
        /// Its rows.
        batches: Vec<RecordBatch>,
    },
    /// A result set as it is produced (an ad hoc SELECT), or with `copy` the rows of
    /// `COPY (SELECT ...) TO STDOUT`. [`StatementResult::collect`] reads it whole.
    Streaming {
        /// The rows.
        rows: crate::runtime::core::rows::RowStream,
        /// The COPY framing the client asked for, if any.
        copy: Option<crate::sql::CopyOut>,
    },
    /// A live subscription.
    Subscribe(Subscription),
    /// The client must now send COPY data.
    CopyIn(Box<CopyIn>),
    /// Rows to send as COPY data (`COPY (query) TO STDOUT`).
    CopyOut {
        /// Their framing.
        format: crate::sql::CopyOut,
        /// Their schema.
        schema: SchemaRef,
        /// The rows.
        batches: Vec<RecordBatch>,
    },
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
    /// The hub of each query over a `UNION ALL`, by query name (fed by its streams' hubs).
    pub unions: BTreeMap<String, Arc<StreamHub>>,
    /// Each source's run-time state, by source name.
    pub sources: BTreeMap<String, Arc<SourceRuntime>>,
    /// Each sink's run-time state, by sink name.
    pub sinks: BTreeMap<String, Arc<SinkRuntime>>,
    /// Backfills of queries being created, by query name: read ahead with no lock held,
    /// finished by their CREATE, which leaves what to tell the client.
    pub backfills: HashMap<String, BackfillSlot>,
    /// Backfills running, by query name: how far each is (`SHOW QUERIES` shows them). Their
    /// names are taken until they end.
    pub backfilling: BTreeMap<String, Arc<crate::runtime::statements::backfill::BackfillProgress>>,
    /// Set while recovery applies a checkpoint's catalog: a query created with a start is
    /// attached without backfilling (its state comes from the checkpoint).
    pub restoring: bool,
}

/// A backfill in the making or done.
pub(super) enum BackfillSlot {
    /// Most of the history read (behind a mutex only so that `Shared` stays `Sync`).
    Prepared(Box<std::sync::Mutex<crate::runtime::statements::backfill::Backfill>>),
    /// The same for a query over a union or a join.
    PreparedUnion(Box<std::sync::Mutex<crate::runtime::statements::backfill_union::UnionBackfill>>),
    /// Finished: the notice for the client.
    Done(String),
}

impl Shared {
    /// The hub a query runs in: its stream's, or its union's.
    pub(super) fn hub_of_query(&self, query: &str) -> Option<&Arc<StreamHub>> {
        self.unions
            .get(query)
            .or_else(|| self.hubs.get(self.query_streams.get(query)?))
    }
}

/// An engine that background threads may use while it lives.
#[derive(Clone)]
pub(super) struct WeakEngine {
    shared: Weak<RwLock<Shared>>,
    config: Arc<EngineConfig>,
    durability: Option<Weak<Durability>>,
    ingest: Arc<IngestBudget>,
}

impl WeakEngine {
    /// The engine, unless it is gone.
    pub(super) fn upgrade(&self) -> Option<Engine> {
        let durability = match &self.durability {
            Some(d) => Some(d.upgrade()?),
            None => None,
        };
        Some(Engine {
            shared: self.shared.upgrade()?,
            config: self.config.clone(),
            durability,
            ingest: self.ingest.clone(),
        })
    }
}

/// The streaming engine. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct Engine {
    pub(super) shared: Arc<RwLock<Shared>>,
    pub(super) config: Arc<EngineConfig>,
    pub(super) durability: Option<Arc<Durability>>,
    /// Bytes of batches waiting to enter their stream or being processed.
    pub(super) ingest: Arc<IngestBudget>,
}

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
                unions: BTreeMap::new(),
                sources: BTreeMap::new(),
                sinks: BTreeMap::new(),
                backfills: HashMap::new(),
                backfilling: BTreeMap::new(),
                restoring: false,
            })),
            ingest: Arc::new(IngestBudget::new(config.max_ingest_bytes)),
            config: Arc::new(config),
            durability,
        };
        if let Some(d) = &engine.durability {
            engine.recover(d)?;
            if let Some(every) = engine.config.checkpoint_interval {
                engine.checkpoint_every(every)?;
            }
        }
        engine.start_sources()?;
        engine.start_sinks()?;
        Ok(engine)
    }

    /// A handle that does not keep the engine alive (for its background threads).
    pub(super) fn downgrade(&self) -> WeakEngine {
        WeakEngine {
            shared: Arc::downgrade(&self.shared),
            config: self.config.clone(),
            durability: self.durability.as_ref().map(Arc::downgrade),
            ingest: self.ingest.clone(),
        }
    }

    /// Appends a record to the log, if there is one; returns its sequence number.
    pub(super) fn log(&self, record: &Record) -> Result<Option<u64>> {
        match &self.durability {
            Some(d) => Ok(Some(d.log.append_on(record, self.config.workers)?)),
            None => Ok(None),
        }
    }

    /// Waits until a logged record is durable.
    pub(super) fn durable(&self, seq: Option<u64>) -> Result<()> {
        match (&self.durability, seq) {
            (Some(d), Some(seq)) => d.log.wait_durable(seq),
            _ => Ok(()),
        }
    }

    /// Makes the ingest log's next fsync fail, as a failing disk would (for tests).
    #[doc(hidden)]
    pub fn inject_log_sync_failure(&self) {
        if let Some(d) = &self.durability {
            d.log.inject_sync_failure();
        }
    }

    /// The log sequence number up to which records are durable (all, without a log).
    pub(super) fn durable_through(&self) -> u64 {
        self.durability
            .as_ref()
            .map_or(u64::MAX, |d| d.log.durable_seq())
    }

    // A panic while a lock was held cannot leave the catalog half-updated in a way we could
    // repair; keep serving with what is there.
    pub(super) fn read(&self) -> RwLockReadGuard<'_, Shared> {
        self.shared.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Shared> {
        self.shared.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The hub of a stream.
    pub(super) fn hub(&self, stream: &str) -> Result<Arc<StreamHub>> {
        self.read()
            .hubs
            .get(stream)
            .cloned()
            .ok_or_else(|| Error::undefined("stream", stream))
    }

    /// `SUBSCRIBE`: the query's rows from now on (or from a sequence number, or its retained
    /// rows first), as the subscription's view and options shape them.
    fn subscribe(&self, sub: Subscribe) -> Result<StatementResult> {
        let name = normalize(&sub.query);
        let (hub, _) = self.query_hub(&name)?;
        // The view is planned without holding the stream's lock.
        let results = self.query_results_schema(&hub, &name)?;
        let shape = Shape::of(&sub, &name, &results)?;
        let hub = hub.lock();
        let q = hub
            .queries
            .get(&name)
            .ok_or_else(|| Error::undefined("query", &name))?;
        let mut output = QueryOutput::lock(&q.output);
        let from = match sub.from {
            None if sub.snapshot => Some(output.retained_after()),
            from => from,
        };
        let progress = sub.progress.then_some(hub.stream.watermark);
        let events =
            output.subscribe(from, sub.seq, self.config.subscriber_buffer_bytes, progress)?;
        Ok(StatementResult::Subscribe(Subscription {
            query: name,
            schema: shape.schema().clone(),
            copy: sub.copy,
            events: events.shaped(shape),
        }))
    }

    /// The columns of the query `name`'s results.
    fn query_results_schema(&self, hub: &StreamHub, name: &str) -> Result<SchemaRef> {
        let hub = hub.lock();
        let q = hub
            .queries
            .get(name)
            .ok_or_else(|| Error::undefined("query", name))?;
        let schema = QueryOutput::lock(&q.output).subscriber_schema(false);
        Ok(schema)
    }

    /// The hub of a query's stream, and the stream's name.
    pub(super) fn query_hub(&self, query: &str) -> Result<(Arc<StreamHub>, String)> {
        let shared = self.read();
        let stream = shared
            .query_streams
            .get(query)
            .ok_or_else(|| Error::undefined("query", query))?;
        let hub = shared
            .hub_of_query(query)
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

    /// Executes statements whose `$n` placeholders take the values in `params` (text, read
    /// as the type its place needs, or typed values: see [`Param`]).
    ///
    /// ```
    /// # use saql::{Engine, EngineConfig, Param, StatementResult};
    /// # use futures::executor::block_on;
    /// # use datafusion::arrow::array::Int64Array;
    /// let engine = Engine::open(EngineConfig::default())?;
    /// engine.execute_blocking("CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, n BIGINT)")?;
    /// let insert = "INSERT INTO s VALUES ($1, $2, $3)";
    /// let params = ["2024-01-01 00:00:00".into(), Param::Null, 42i64.into()];
    /// block_on(engine.execute_with_params(insert, &params))?;
    /// let select = "SELECT count(*) FROM s WHERE n > $1";
    /// let result = block_on(engine.execute_with_params(select, &[41.5.into()]))?;
    /// let StatementResult::Rows { batches, .. } = &result[0] else { unreachable!() };
    /// let count = batches[0].column(0).as_any().downcast_ref::<Int64Array>();
    /// assert_eq!(count.map(|c| c.value(0)), Some(1));
    /// # Ok::<(), saql::Error>(())
    /// ```
    pub async fn execute_with_params(
        &self,
        sql: &str,
        params: &[Param],
    ) -> Result<Vec<StatementResult>> {
        let mut out = Vec::new();
        for stmt in sql::parse(sql)? {
            out.push(self.execute_statement(stmt, params).await?);
        }
        Ok(out)
    }

    /// Executes one parsed statement; a SELECT's rows are read whole (see
    /// [`Engine::execute_statement_for`] for them as they are produced).
    pub async fn execute_statement(
        &self,
        stmt: Statement,
        params: &[Param],
    ) -> Result<StatementResult> {
        self.execute_statement_for(stmt, params, &SessionInfo::default())
            .await?
            .collect()
            .await
    }

    /// Executes one parsed statement for a client session: `current_user`,
    /// `current_database()` and `pg_backend_pid()` answer for `session`, and its
    /// `saql.max_result_*` bound a SELECT's result. A SELECT's rows come as
    /// [`StatementResult::Streaming`], produced as they are read.
    pub async fn execute_statement_for(
        &self,
        stmt: Statement,
        params: &[Param],
        session: &SessionInfo,
    ) -> Result<StatementResult> {
        let session =
            &session.with_defaults(self.config.max_result_rows, self.config.max_result_bytes);
        match stmt {
            Statement::Sql(s) => self.execute_sql(*s, params, session).await,
            Statement::ShowSinks => Ok(show::show_sinks(&self.stats().sinks, session.admin)),
            Statement::CopyTo(c) => self.copy_to(c, session).await,
            Statement::CreateQuery(cq) if cq.start.is_some() => self.create_backfilled(cq).await,
            Statement::AlterQuery(cq) if cq.start.is_some() => self.alter_backfilled(cq).await,
            other => self.execute_own(other),
        }
    }

    fn execute_own(&self, stmt: Statement) -> Result<StatementResult> {
        let tag = match stmt {
            Statement::CreateStream(_)
            | Statement::CreateQuery(_)
            | Statement::DropStream { .. }
            | Statement::DropQuery { .. }
            | Statement::CreateSource(_)
            | Statement::DropSource { .. }
            | Statement::CreateSink(_)
            | Statement::DropSink { .. }
            | Statement::CreateTable(_)
            | Statement::DropTable { .. }
            | Statement::CreateView(_)
            | Statement::DropView { .. }
            | Statement::AlterStream { .. }
            | Statement::AlterQuery(_) => {
                // Durable before it is applied: see `ddl`.
                self.ddl(&mut self.write(), stmt.clone(), true)?;
                match stmt {
                    Statement::CreateTable(_) => "CREATE TABLE",
                    Statement::DropTable { .. } => "DROP TABLE",
                    Statement::CreateView(_) => "CREATE VIEW",
                    Statement::DropView { .. } => "DROP VIEW",
                    Statement::CreateStream(_) => "CREATE STREAM",
                    Statement::CreateQuery(_) => "CREATE CONTINUOUS QUERY",
                    Statement::DropStream { .. } => "DROP STREAM",
                    Statement::AlterStream { .. } => "ALTER STREAM",
                    Statement::AlterQuery(_) => "ALTER CONTINUOUS QUERY",
                    Statement::CreateSource(_) => {
                        self.start_sources()?;
                        "CREATE SOURCE"
                    }
                    Statement::DropSource { .. } => "DROP SOURCE",
                    Statement::CreateSink(_) => {
                        self.start_sinks()?;
                        "CREATE SINK"
                    }
                    Statement::DropSink { .. } => "DROP SINK",
                    _ => "DROP QUERY",
                }
            }
            Statement::Checkpoint => {
                self.checkpoint()?;
                "CHECKPOINT"
            }
            Statement::ShowStreams => return Ok(show::show_streams(&self.stats().streams)),
            Statement::ShowTables => return Ok(table::show_tables(&self.read())),
            Statement::ShowQueries => return Ok(show::show_queries(&self.stats().queries)),
            Statement::ShowSources => return Ok(show::show_sources(&self.stats().sources)),
            Statement::ShowSinks => return Ok(show::show_sinks(&self.stats().sinks, true)),
            Statement::Subscribe(sub) => return self.subscribe(sub),
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
            Statement::Sql(_) | Statement::CopyTo(_) => {
                unreachable!("plain SQL and COPY TO are executed by execute_statement_for")
            }
        };
        Ok(StatementResult::Command(tag.into()))
    }

    /// Appends rows to a stream and runs every query that reads it, on the calling thread,
    /// holding only the stream's own lock. The batch must have the stream's schema. Returns
    /// the number of rows accepted.
    /// With a data directory the rows are logged first and the call returns once they are
    /// durable (per [`EngineConfig::fsync`]).
    pub fn insert_batch(&self, stream: &str, batch: RecordBatch) -> Result<u64> {
        Ok(self.insert_counting_late(stream, batch)?.rows)
    }

    /// [`Engine::insert_batch`], also saying how many of the rows were behind the stream's
    /// watermark when they arrived, and what the watermark was.
    fn insert_counting_late(&self, stream: &str, batch: RecordBatch) -> Result<Inserted> {
        self.insert_lagged(stream, batch, None)
    }

    /// [`Engine::insert_batch`] as if the batch had waited `lag` to enter the stream (for
    /// tests of load shedding, which reacts to that wait), or for as long as it does wait.
    #[doc(hidden)]
    pub fn insert_lagged(
        &self,
        stream: &str,
        batch: RecordBatch,
        lag: Option<Duration>,
    ) -> Result<Inserted> {
        let hub = self.hub(stream)?;
        let entry = crate::runtime::core::door::Entry {
            batches: vec![batch],
            source: None,
            lag,
        };
        self.enter(stream, &hub, entry)
    }

    /// Periodic housekeeping: advances the watermark of idle streams and forgets subscribers
    /// whose clients went away. The server calls it a few times a second.
    pub fn tick(&self) {
        self.tick_at(Instant::now());
    }

    /// [`Engine::tick`] at a given processing time (for tests).
    pub fn tick_at(&self, now: Instant) {
        let durable = self.durable_through();
        for hub in self.hubs() {
            let mut hub = hub.lock();
            // Changes that became durable with no writer left to apply them.
            hub.apply_durable(durable);
            if let Some(wm) = hub.stream.idle_watermark(now) {
                self.advance_logged(&mut hub, wm);
            }
            for q in hub.queries.values() {
                QueryOutput::lock(&q.output).subscribers();
            }
        }
        let unions: Vec<_> = self.read().unions.values().cloned().collect();
        for hub in unions {
            for q in hub.lock().queries.values() {
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

    /// The schema of a stream or table's rows (what INSERT and COPY write).
    pub(super) fn relation_schema(&self, name: &str) -> Result<SchemaRef> {
        if let Some(t) = self.read().catalog.table(name) {
            return Ok(t.store.schema().clone());
        }
        self.stream_schema(name)
    }

    /// The table an INSERT writes into, if it writes into a table.
    fn table_of_insert(&self, ins: &sq::Insert) -> Option<Arc<TableDef>> {
        let target = insert::insert_target(ins).ok()?;
        self.read().catalog.table(&target).cloned()
    }

    /// A table by name, 42P01 naming it (or saying streams are append-only) otherwise.
    fn table_named(&self, name: &sq::ObjectName) -> Result<Arc<TableDef>> {
        let key = normalize_object(name);
        let shared = self.read();
        if let Some(t) = shared.catalog.table(&key) {
            return Ok(t.clone());
        }
        if shared.catalog.stream(&key).is_some() {
            return Err(Error::NotSupported(format!(
                "\"{key}\" is a stream, and streams are append-only: INSERT or COPY rows \
                 into them; UPDATE, DELETE and TRUNCATE change tables (CREATE TABLE)"
            )));
        }
        Err(Error::undefined("table", &key).at_span(name.span()))
    }

    /// Describes a statement without running it.
    pub async fn describe(&self, sql: &str) -> Result<Description> {
        let stmt = sql::parse_one(sql)?;
        let mut params = Vec::new();
        let schema = match &stmt {
            Statement::Sql(s) => match s.as_ref() {
                sq::Statement::Insert(ins) => {
                    let target = insert::insert_target(ins)?;
                    let schema = self.relation_schema(&target)?;
                    params = insert::insert_param_types(ins, &schema)?;
                    None
                }
                sq::Statement::Query(_) => {
                    let mut s = s.as_ref().clone();
                    let ctx = {
                        let shared = self.read();
                        adhoc::inline_views(&mut s, &shared.catalog);
                        adhoc::context(&shared, &SessionInfo::default())?
                    };
                    let (schema, types) = adhoc::describe_select(ctx, &s).await?;
                    params = types;
                    Some(schema)
                }
                sq::Statement::ShowVariable { variable } => Some(show::show_schema(variable)),
                _ => None,
            },
            Statement::Explain { .. } => Some(Arc::new(Schema::new(vec![Field::new(
                "QUERY PLAN",
                DataType::Utf8,
                true,
            )]))),
            Statement::ShowStreams => Some(show::show_streams(&[]).schema()),
            Statement::ShowTables => Some(table::show_tables(&self.read()).schema()),
            Statement::ShowQueries => Some(show::show_queries(&[]).schema()),
            Statement::ShowSources => Some(show::show_sources(&[]).schema()),
            Statement::ShowSinks => Some(show::show_sinks(&[], true).schema()),
            Statement::Subscribe(sub) => {
                let name = normalize(&sub.query);
                let (hub, _) = self.query_hub(&name)?;
                let results = self.query_results_schema(&hub, &name)?;
                Some(Shape::of(sub, &name, &results)?.schema().clone())
            }
            _ => None,
        };
        Ok(Description { params, schema })
    }

    async fn execute_sql(
        &self,
        stmt: sq::Statement,
        params: &[Param],
        session: &SessionInfo,
    ) -> Result<StatementResult> {
        match stmt {
            sq::Statement::Insert(ins) if self.table_of_insert(&ins).is_some() => {
                let def = self.table_of_insert(&ins).expect("matched");
                let engine = self.clone();
                let params = params.to_vec();
                off_async(move || engine.insert_into_table(&def, &ins, &params)).await
            }
            sq::Statement::Delete(del) => {
                let def = self.table_named(delete_target(&del)?)?;
                self.delete_from_table(def, &del, params, session).await
            }
            sq::Statement::Update(upd) => {
                let def = match &upd.table.relation {
                    sq::TableFactor::Table { name, .. } => self.table_named(name)?,
                    other => {
                        return Err(Error::NotSupported(format!(
                            "UPDATE {other} is not supported"
                        )))
                    }
                };
                self.update_table(def, &upd, params, session).await
            }
            sq::Statement::Truncate(tr) => {
                let [target] = tr.table_names.as_slice() else {
                    return Err(Error::NotSupported(
                        "TRUNCATE empties one table at a time".into(),
                    ));
                };
                let def = self.table_named(&target.name)?;
                let engine = self.clone();
                off_async(move || engine.truncate_table(&def)).await
            }
            sq::Statement::Insert(ins) => {
                let target = insert::insert_target(&ins)?;
                let schema = self
                    .stream_schema(&target)
                    .map_err(|e| e.at_span(ins.table.span()))?;
                let batch = insert::insert_batch(&ins, &schema, params)?;
                let engine = self.clone();
                let stream = target.clone();
                let done = off_async(move || engine.insert_counting_late(&stream, batch)).await?;
                let tag = format!("INSERT 0 {}", done.rows);
                if done.late == 0 {
                    return Ok(StatementResult::Command(tag));
                }
                let notice = format!(
                    "{} of {} rows are behind the watermark of stream \"{target}\" ({}): \
                     windows that already closed will not count them (SHOW STREAMS counts \
                     late rows)",
                    done.late, done.rows, done.watermark
                );
                Ok(StatementResult::CommandWithNotice { tag, notice })
            }
            sq::Statement::Query(ref q) if modifies_in_with(q) => Err(Error::NotSupported(
                "data-modifying statements in WITH are not supported: streams are append-only; \
                 run the INSERT on its own"
                    .into(),
            )),
            // EXPLAIN ANALYZE runs the SELECT ad hoc (the parser lets nothing else through).
            sq::Statement::Query(_) | sq::Statement::Explain { analyze: true, .. } => {
                let mut stmt = stmt;
                let ctx = {
                    let shared = self.read();
                    adhoc::inline_views(&mut stmt, &shared.catalog);
                    adhoc::context(&shared, session)?
                };
                let rows = adhoc::select(ctx, stmt, params, session).await?;
                Ok(StatementResult::Streaming { rows, copy: None })
            }
            sq::Statement::Set(set) => set_role(&set, session),
            sq::Statement::ShowVariable { variable } => show::show_variable(&variable, session),
            sq::Statement::StartTransaction { .. } => Ok(StatementResult::Command("BEGIN".into())),
            sq::Statement::Commit { .. } => Ok(StatementResult::Command("COMMIT".into())),
            sq::Statement::Rollback { .. } => Ok(StatementResult::Command("ROLLBACK".into())),
            sq::Statement::Discard { .. } => Ok(StatementResult::Command("DISCARD ALL".into())),
            other => Err(unsupported(&other)),
        }
    }
}

/// What an insert did.
#[doc(hidden)]
pub struct Inserted {
    /// Rows accepted (after load shedding).
    pub rows: u64,
    /// Of those, rows behind the watermark.
    pub late: u64,
    /// The watermark they arrived at.
    pub watermark: Watermark,
}

/// Runs `work` (operators over a batch) off the async runtime's workers when there is one,
/// so that a heavy statement never blocks other sessions' I/O.
pub(super) async fn off_async<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    #[cfg(feature = "server")]
    if tokio::runtime::Handle::try_current().is_ok() {
        return match crate::spawn::blocking(work).await {
            Ok(result) => result,
            Err(e) => Err(Error::Internal(format!("statement failed: {e}"))),
        };
    }
    work()
}

/// 0A000 for a statement saql does not run, naming what it is and what to use instead.
fn unsupported(stmt: &sq::Statement) -> Error {
    let what = first_words(&stmt.to_string());
    let hint = match stmt {
        sq::Statement::Merge { .. } => {
            "streams are append-only: INSERT or COPY rows into them; tables take INSERT ... \
             ON CONFLICT"
        }
        _ => "see the README for the statements saql runs",
    };
    Error::NotSupported(format!("statement not supported: {what}; {hint}"))
}

/// The one table a DELETE names.
fn delete_target(del: &sq::Delete) -> Result<&sq::ObjectName> {
    let tables = match &del.from {
        sq::FromTable::WithFromKeyword(t) | sq::FromTable::WithoutKeyword(t) => t,
    };
    match tables.as_slice() {
        [t] if t.joins.is_empty() => match &t.relation {
            sq::TableFactor::Table { name, .. } => Ok(name),
            other => Err(Error::NotSupported(format!(
                "DELETE FROM {other} is not supported"
            ))),
        },
        _ => Err(Error::NotSupported(
            "DELETE deletes from one table at a time".into(),
        )),
    }
}

/// Whether a query's WITH holds an INSERT, UPDATE or DELETE (a writable CTE).
fn modifies_in_with(q: &sq::Query) -> bool {
    q.with.as_ref().is_some_and(|with| {
        with.cte_tables.iter().any(|cte| {
            matches!(
                cte.query.body.as_ref(),
                sq::SetExpr::Insert(_)
                    | sq::SetExpr::Update(_)
                    | sq::SetExpr::Delete(_)
                    | sq::SetExpr::Merge(_)
            ) || modifies_in_with(&cte.query)
        })
    })
}

/// `SET`: accepted and without effect, except that a session cannot change its role. Its
/// role is the one its user logged in with (the users file), so `SET ROLE` and `SET SESSION
/// AUTHORIZATION` naming another user are refused with 42501 rather than answered SET while
/// changing nothing; naming the session's own user, NONE or DEFAULT is a no-op.
fn set_role(set: &sq::Set, session: &SessionInfo) -> Result<StatementResult> {
    let named = match set {
        sq::Set::SetRole { role_name, .. } => role_name.as_ref().map(normalize),
        sq::Set::SetSessionAuthorization(p) => match &p.kind {
            sq::SetSessionAuthorizationParamKind::User(u) => Some(normalize(u)),
            sq::SetSessionAuthorizationParamKind::Default => None,
        },
        _ => None,
    };
    match named {
        Some(role) if role != session.user && role != "none" && role != "default" => {
            Err(Error::plan(
                crate::error::sqlstate::INSUFFICIENT_PRIVILEGE,
                format!(
                    "permission denied to set role \"{role}\": a session keeps the role of \
                     the user it logged in as; connect as that user instead"
                ),
            ))
        }
        _ => Ok(StatementResult::Command("SET".into())),
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
