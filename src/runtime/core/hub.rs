//! A stream hub: one stream's watermark and counters, the operator graph of the queries that
//! read it, and those queries. Each hub has its own lock, so a busy stream never stalls
//! another; rows reach a hub's queries in the order the hub accepted them.

use crate::error::sqlstate;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::plan::{QueryPlan, StreamDef};
use crate::runtime::core::door::PendingChanges;
use crate::runtime::core::graph::OperatorGraph;
use crate::runtime::core::output::{OutputHandle, QueryFailure, QueryOutput};
use crate::runtime::core::retained::Retained;
use crate::runtime::core::shedding::Shedder;
use crate::runtime::core::stream::StreamRuntime;
use crate::runtime::core::union::{advance_jobs, feed_jobs, Tap, UnionInput};
use crate::runtime::durability::history::History;
use crate::sources::spec::SourceProgress;
use crate::sql::CreateQuery;
use crate::time::Watermark;

/// The share of a query's state bound its retained results (and a stream its recent rows)
/// may take: a quarter, so that retained rows alone never fail a query.
const RETAINED_SHARE: usize = 4;

/// A buffer for the newest `rows` rows within its share of `max_state_bytes`.
fn retained(rows: usize, max_state_bytes: usize) -> Retained {
    Retained::with_max_bytes(rows, max_state_bytes / RETAINED_SHARE)
}

/// A stream with its queries, behind the stream's own lock.
pub struct StreamHub {
    inner: Mutex<Hub>,
}

impl StreamHub {
    /// An empty hub for a newly declared stream, whose queries may each hold
    /// `max_state_bytes` of state (operators and retained results). The stream and each
    /// query keep their newest `retain_rows` rows, in at most a quarter of that bound.
    /// With `history`, the stream's rows are kept as history too.
    pub fn new(
        def: Arc<StreamDef>,
        retain_rows: usize,
        max_state_bytes: usize,
        history: Option<History>,
        workers: usize,
    ) -> Arc<StreamHub> {
        let shedder = def.shedding.map(|policy| Shedder::new(policy, 0x5a91));
        let mut graph = OperatorGraph::default();
        graph.set_workers(workers);
        Arc::new(StreamHub {
            inner: Mutex::new(Hub {
                max_state_bytes,
                retain_rows,
                shedder,
                stream: StreamRuntime::new(def, retained(retain_rows, max_state_bytes)),
                graph,
                queries: BTreeMap::new(),
                sources: BTreeMap::new(),
                dropped: false,
                pending: PendingChanges::default(),
                history,
                taps: Vec::new(),
                union: None,
            }),
        })
    }

    /// Locks the hub. A panic while it was held leaves state we cannot repair; keep serving
    /// with what is there.
    pub fn lock(&self) -> MutexGuard<'_, Hub> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the hub for a writer, and says how long the writer waited for it (its lag: see
    /// [`crate::runtime::core::shedding`]); a wait is counted in the stream's backpressure counters.
    pub fn lock_for_ingest(&self) -> (MutexGuard<'_, Hub>, Duration) {
        match self.inner.try_lock() {
            Ok(hub) => (hub, Duration::ZERO),
            Err(TryLockError::Poisoned(p)) => (p.into_inner(), Duration::ZERO),
            Err(TryLockError::WouldBlock) => {
                let start = Instant::now();
                let mut hub = self.lock();
                let waited = start.elapsed();
                hub.stream.ingest_waits += 1;
                hub.stream.ingest_wait += waited;
                (hub, waited)
            }
        }
    }
}

/// The state of one stream and its queries.
pub struct Hub {
    /// Watermark, counters, recent rows.
    pub stream: StreamRuntime,
    /// The queries' operators, shared where they coincide.
    pub graph: OperatorGraph,
    /// The queries reading this stream, by name.
    pub queries: BTreeMap<String, QueryRuntime>,
    /// The progress of each source writing into this stream, as of the rows applied here.
    pub sources: BTreeMap<String, SourceProgress>,
    /// Set when the stream is dropped: later writers get an error.
    pub dropped: bool,
    /// Changes logged but not yet durable, applied in log order once they are.
    pub pending: PendingChanges,
    /// The stream's retained history, if it keeps one.
    pub history: Option<History>,
    /// The branches of the unions that read this stream.
    pub taps: Vec<Tap>,
    /// In the hub of a union (not of a declared stream): its inputs.
    pub union: Option<UnionInput>,
    /// Most bytes of state (operators and retained results) one query may hold (53200
    /// past it).
    max_state_bytes: usize,
    /// Newest result rows each query keeps.
    retain_rows: usize,
    /// The stream's load shedding, if it has any.
    shedder: Option<Shedder>,
}

/// A continuous query at run time.
pub struct QueryRuntime {
    /// Its definition.
    pub def: CreateQuery,
    /// Its plan; its operators run in the hub's graph.
    pub plan: QueryPlan,
    /// Its operators' node ids in the graph, source first.
    pub path: Vec<usize>,
    /// Rows offered to the query.
    pub rows_in: u64,
    /// Rows of its stream shed while it ran: it never saw them.
    pub shed_rows: u64,
    /// Bytes of state its operators held after the last batch or watermark (when it
    /// failed: when it stopped).
    pub state_bytes: usize,
    /// Where its results go.
    pub output: OutputHandle,
}

impl Hub {
    /// Fails with 42P01 once the stream is dropped.
    pub fn check_live(&self) -> Result<()> {
        if self.dropped {
            return Err(Error::undefined("stream", &self.stream.def.name));
        }
        Ok(())
    }

    /// Fails unless the stream is live and `batch` has its schema.
    pub fn check_batch(&self, batch: &RecordBatch) -> Result<()> {
        self.check_live()?;
        if batch.schema().fields() != self.stream.def.schema.fields() {
            return Err(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                format!(
                    "batch schema does not match stream \"{}\"",
                    self.stream.def.name
                ),
            ));
        }
        Ok(())
    }

    /// Runs a batch of the stream's rows through every query and advances the watermark it
    /// implies. The batch must have the stream's schema.
    pub fn insert(&mut self, batch: &RecordBatch, now: Instant) -> Result<u64> {
        self.check_batch(batch)?;
        let n = batch.num_rows() as u64;
        if n == 0 {
            return Ok(0);
        }
        let advanced = self.stream.observe(batch, now);
        if let Some(history) = &mut self.history {
            history.append(batch);
        }
        for q in self.queries.values_mut() {
            if QueryOutput::lock(&q.output).failed().is_none() {
                q.rows_in += n;
            }
        }
        // The unions this stream feeds run on the same threads as its queries.
        let own = self.input_state();
        let jobs = feed_jobs(&mut self.taps, batch, own);
        self.graph.process_with(batch, jobs);
        self.stop_if_unread();
        if let Some(wm) = advanced {
            self.advanced(wm);
        }
        self.check_state_bytes();
        Ok(n)
    }

    /// Measures every running query's state and fails (53200) each one holding more than
    /// the bound; the others run on.
    pub(super) fn check_state_bytes(&mut self) {
        let (waiting, hint) = (self.union_bytes(), self.union_hint());
        let mut stop_union = false;
        for (name, q) in &mut self.queries {
            let retained = {
                let output = QueryOutput::lock(&q.output);
                if output.failed().is_some() {
                    continue;
                }
                output.retained_bytes()
            };
            let operators = self.graph.state_bytes(&q.path) + waiting;
            q.state_bytes = operators + retained;
            if q.state_bytes > self.max_state_bytes {
                tracing::warn!(
                    "query \"{name}\" holds {} bytes of state, over {}",
                    q.state_bytes,
                    self.max_state_bytes
                );
                let error = Error::ResourceLimit {
                    sqlstate: sqlstate::OUT_OF_MEMORY,
                    message: format!(
                        "query \"{name}\" holds {} bytes of state ({operators} in operators, \
                         {retained} in retained results), over the bound of {} bytes per query \
                         (--max-query-state-bytes): fewer groups, shorter windows or a WITHIN \
                         would keep it smaller, or raise the bound{}",
                        q.state_bytes,
                        self.max_state_bytes,
                        hint.as_deref().unwrap_or("")
                    ),
                };
                let failure = QueryFailure::from_error(&error);
                self.graph.fail_path(&q.path, error);
                if waiting > 0 {
                    // The rows waiting in the union count for its query: it stops with them.
                    QueryOutput::lock(&q.output).fail(failure);
                    stop_union = true;
                }
            }
        }
        if stop_union {
            self.stop_union();
        }
    }

    /// Drops rows of `batch`, which waited `lag` to enter, as the stream's shedding policy
    /// says (none without one), and counts them for the stream and its running queries.
    pub fn shed(&mut self, batch: RecordBatch, lag: Duration) -> Result<RecordBatch> {
        let Some(shedder) = &mut self.shedder else {
            return Ok(batch);
        };
        let time_column = self.stream.def.event_time.as_ref().map(|e| e.column);
        let n = batch.num_rows();
        let kept = shedder.shed(batch, lag, time_column, self.stream.watermark)?;
        let shed = (n - kept.num_rows()) as u64;
        if shed > 0 {
            self.stream.shed_rows += shed;
            for q in self.queries.values_mut() {
                if QueryOutput::lock(&q.output).failed().is_none() {
                    q.shed_rows += shed;
                }
            }
        }
        Ok(kept)
    }

    /// The fraction of rows (or new windows) the stream drops now; 0 without shedding.
    pub fn drop_fraction(&self) -> f64 {
        self.shedder.as_ref().map_or(0.0, |s| s.drop_fraction())
    }

    /// Moves the watermark to `to` if that is later, emitting what it completes; returns it
    /// if it moved.
    pub fn advance(&mut self, to: Watermark) -> Option<Watermark> {
        let moved = self.stream.advance(to)?;
        self.advanced(moved);
        self.check_state_bytes();
        Some(moved)
    }

    /// The stream's watermark moved to `wm`: its queries and the unions it feeds (on the
    /// same threads) complete what it closes, then subscribers hear of it.
    fn advanced(&mut self, wm: Watermark) {
        let own = self.input_state();
        let jobs = advance_jobs(&mut self.taps, wm, own);
        self.graph.advance_with(wm, jobs);
        self.progressed(wm);
        self.stop_if_unread();
    }

    /// Tells the queries' subscribers that asked for progress where the watermark is now.
    fn progressed(&self, wm: Watermark) {
        for q in self.queries.values() {
            QueryOutput::lock(&q.output).progress(wm);
        }
    }

    /// Adds a planned query; its operators join the graph at the current watermark. On an
    /// error the graph is left as it was.
    pub fn attach(&mut self, name: &str, def: CreateQuery, plan: QueryPlan) -> Result<()> {
        let output = self.new_output(name, &plan);
        self.attach_with(name, def, plan, output, None)
    }

    /// Where a new query's results go, with its share of retained rows.
    pub fn new_output(&self, name: &str, plan: &QueryPlan) -> OutputHandle {
        let retained = retained(self.retain_rows, self.max_state_bytes);
        QueryOutput::handle(name, plan.schema.clone(), retained)
    }

    /// Adds a planned query whose results go to `output`. A backfilled query (`WITH (start =
    /// ...)`) shares no operator, and with `states` (its operators' snapshots, source first)
    /// they start from them. On an error the graph is left as it was.
    pub fn attach_with(
        &mut self,
        name: &str,
        def: CreateQuery,
        plan: QueryPlan,
        output: OutputHandle,
        states: Option<Vec<Vec<u8>>>,
    ) -> Result<()> {
        let share = def.start.is_none();
        let path = self.graph.attach(
            name,
            plan.specs.clone(),
            self.stream.watermark,
            output.clone(),
            share,
        )?;
        for (&node, state) in path.iter().zip(states.iter().flatten()) {
            if let Err(e) = self.graph.restore_node(node, state) {
                self.graph.detach(name, &path);
                return Err(e);
            }
        }
        self.queries.insert(
            name.to_string(),
            QueryRuntime {
                def,
                plan,
                path,
                rows_in: 0,
                shed_rows: 0,
                state_bytes: 0,
                output,
            },
        );
        Ok(())
    }

    /// Removes a query and the operators no other query uses.
    pub fn detach(&mut self, name: &str) {
        if let Some(q) = self.queries.remove(name) {
            self.graph.detach(name, &q.path);
        }
    }
}
