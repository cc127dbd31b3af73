//! Backfill: `CREATE CONTINUOUS QUERY q WITH (start = TIMESTAMP '...' | INTERVAL '...') AS
//! ...` first runs the query over its stream's history from `start` (rows in arrival order,
//! those with an earlier event time left out), then continues with live rows, with no gap and
//! no row twice at the hand-over.
//!
//! The query runs on operators of its own (in a private graph, with a private watermark
//! derived from the rows as live ingest derives it) whose results go to the query's real
//! output, so its sequence numbers and subscribers see backfilled results like live ones.
//! Most of the history is read with no lock held, so the stream's writers and other queries
//! go on; then, under the stream's lock, the rows that arrived meanwhile are read too, the
//! operators are brought to the stream's watermark, and their state moves into the stream's
//! graph (snapshot and restore, as a checkpoint would), where live rows continue.
//!
//! A backfill runs off the async runtime's workers and takes no lock while it reads, so the
//! stream's writers and other sessions go on; between batches it gives way to writers with
//! rows in flight (a couple of milliseconds at most), and it keeps reading the rows that
//! arrived meanwhile (still with no lock held) until few are left, so that the moment it
//! holds the stream stays short. [`BackfillProgress`] says how
//! far it is (`SHOW QUERIES` shows it), and stops it when its statement is canceled.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{Array, AsArray, TimestampNanosecondArray};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::compute::kernels::cmp::gt_eq;
use datafusion::arrow::datatypes::TimestampNanosecondType;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{sqlstate, Error, Result};
use crate::plan::catalog::normalize;
use crate::plan::QueryPlan;
use crate::runtime::core::graph::OperatorGraph;
use crate::runtime::core::hub::{Hub, StreamHub};
use crate::runtime::core::ingest::IngestBudget;
use crate::runtime::core::output::OutputHandle;
use crate::runtime::core::retained::Retained;
use crate::runtime::core::stream::StreamRuntime;
use crate::runtime::durability::history::History;
use crate::runtime::durability::history::{read_segment, HistoryScan};
use crate::runtime::engine::{off_async, BackfillSlot, Engine, Shared, StatementResult};
use crate::sql::Statement;
use crate::sql::{timestamp_literal, BackfillStart, CreateQuery};
use crate::time::{EventTime, Watermark};

/// What a backfill shows while it runs, updated batch by batch; also how its statement
/// stops it.
pub(in crate::runtime) struct BackfillProgress {
    /// The stream it reads.
    pub stream: String,
    /// The query's definition, as `SHOW QUERIES` shows it.
    pub definition: String,
    /// Where its results go.
    pub output: OutputHandle,
    /// History rows read.
    pub(super) read: AtomicU64,
    /// History rows to read, as of the newest look at the history (live rows add to it).
    pub(super) total: AtomicU64,
    /// Rows run through the query (those from the start on).
    pub(super) fed: AtomicU64,
    /// The newest event time run through the query (`i64::MIN`: none yet).
    pub(super) reached: AtomicI64,
    /// The backfill's own watermark.
    pub(super) watermark: AtomicI64,
    cancelled: AtomicBool,
}

impl BackfillProgress {
    pub(super) fn new(
        stream: String,
        definition: String,
        output: OutputHandle,
    ) -> BackfillProgress {
        BackfillProgress {
            stream,
            definition,
            output,
            read: AtomicU64::new(0),
            total: AtomicU64::new(0),
            fed: AtomicU64::new(0),
            reached: AtomicI64::new(i64::MIN),
            watermark: AtomicI64::new(Watermark::START.0.nanos()),
            cancelled: AtomicBool::new(false),
        }
    }

    /// How far it is: `45% (12345 of 27000 history rows), event time reached 2026-01-01
    /// 00:10:00` (`SHOW QUERIES` puts `backfilling: ` before it, or for an ALTER `running;
    /// rebuilding: `).
    pub fn status(&self) -> String {
        let read = self.read.load(Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed).max(read);
        let percent = (read * 100).checked_div(total).unwrap_or(0);
        let reached = match self.reached.load(Ordering::Relaxed) {
            i64::MIN => "none yet".to_string(),
            t => EventTime(t).to_string(),
        };
        format!("{percent}% ({read} of {total} history rows), event time reached {reached}")
    }

    /// Rows run through the query so far.
    pub fn fed(&self) -> u64 {
        self.fed.load(Ordering::Relaxed)
    }

    /// The backfill's watermark.
    pub fn watermark(&self) -> Watermark {
        Watermark(EventTime(self.watermark.load(Ordering::Relaxed)))
    }

    /// Stops the backfill at its next batch (its statement was canceled or timed out).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub(super) fn check(&self) -> Result<()> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(Error::Canceled);
        }
        Ok(())
    }
}

/// A query being backfilled.
pub(in crate::runtime) struct Backfill {
    graph: OperatorGraph,
    path: Vec<usize>,
    /// The stream as the backfill has seen it: its watermark.
    stream: StreamRuntime,
    output: OutputHandle,
    /// Rows with an earlier event time are left out (nanoseconds).
    start: i64,
    /// History rows read so far (the next one to read has this number).
    read: u64,
    /// Rows run through the query.
    fed: u64,
    /// The oldest event time in the history read.
    oldest: Option<i64>,
    time_column: usize,
    started: Instant,
    progress: Arc<BackfillProgress>,
    /// Live ingest in flight, which a backfill gives way to between batches.
    ingest: Option<Arc<IngestBudget>>,
}

/// Longest a backfill waits between two batches for live writers to finish theirs.
const GIVE_WAY: Duration = Duration::from_millis(2);

impl Backfill {
    /// [`Backfill::begin`] under `hub`'s lock, its results going to `output` made there, and
    /// its progress shown in SHOW QUERIES (the name is taken until it ends).
    pub(in crate::runtime) fn begin_shown(
        shared: &mut Shared,
        hub: &StreamHub,
        (name, def, plan): (&str, &CreateQuery, &QueryPlan),
        output: impl FnOnce(&Hub) -> OutputHandle,
    ) -> Result<(Backfill, HistoryScan)> {
        let (run, scan) = {
            let hub = hub.lock();
            let output = output(&hub);
            Backfill::begin(&hub, name, def, plan, output)?
        };
        shared
            .backfilling
            .insert(name.to_string(), run.progress().clone());
        Ok((run, scan))
    }

    /// Prepares the backfill of `def` (planned as `plan`) on the stream of `hub`, its results
    /// going to `output`, and reads what the stream's history holds now (under the hub's
    /// lock: only taking the list).
    pub(in crate::runtime) fn begin(
        hub: &Hub,
        name: &str,
        def: &CreateQuery,
        plan: &QueryPlan,
        output: OutputHandle,
    ) -> Result<(Backfill, HistoryScan)> {
        let stream = &hub.stream.def;
        let Some(start) = def.start else {
            return Err(Error::Internal("a backfill without a start".into()));
        };
        let Some(history) = &hub.history else {
            return Err(Error::plan(
                sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "stream \"{}\" keeps no history to backfill from; set one with CREATE \
                     STREAM ... WITH (history = '7 days') or serve --history",
                    stream.name
                ),
            ));
        };
        let Some(time) = &stream.event_time else {
            return Err(Error::plan(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!(
                    "a backfill starts at an event time, and stream \"{}\" has none (no \
                     WATERMARK FOR column)",
                    stream.name
                ),
            ));
        };
        let start = match start {
            BackfillStart::At(nanos) => nanos,
            BackfillStart::Back(span) => {
                let newest = hub.stream.max_event_time.map_or(0, |t| t.nanos());
                newest.saturating_sub(crate::time::duration_nanos(span))
            }
        };
        let progress = Arc::new(BackfillProgress::new(
            stream.name.clone(),
            crate::sql::query_sql(&def.query, &def.clauses),
            output.clone(),
        ));
        let mut graph = OperatorGraph::default();
        let path = graph.attach(
            name,
            plan.specs.clone(),
            Watermark::START,
            output.clone(),
            false,
        )?;
        let backfill = Backfill {
            graph,
            path,
            stream: StreamRuntime::new(stream.clone(), Retained::with_max_bytes(0, 0)),
            output,
            start,
            read: 0,
            fed: 0,
            oldest: None,
            time_column: time.column,
            started: Instant::now(),
            progress,
            ingest: None,
        };
        Ok((backfill, history.scan()))
    }

    /// The start as an event time (nanoseconds): a `WITH (start = INTERVAL ...)` resolved
    /// against the newest event when the backfill began, so that the logged statement says
    /// the same start to a replay.
    pub(in crate::runtime) fn start(&self) -> i64 {
        self.start
    }

    /// Gives way to the writers of `ingest` between batches: while batches are in flight,
    /// the backfill waits (up to 2 ms a batch) before its next one.
    pub(in crate::runtime) fn give_way_to(&mut self, ingest: Arc<IngestBudget>) {
        self.ingest = Some(ingest);
    }

    /// Between batches: the processor goes to live writers first.
    fn give_way(&self) {
        std::thread::yield_now();
        let Some(ingest) = &self.ingest else {
            return;
        };
        let until = Instant::now() + GIVE_WAY;
        while ingest.used() > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// What `SHOW QUERIES` shows of it, and how to stop it.
    pub(in crate::runtime) fn progress(&self) -> &Arc<BackfillProgress> {
        &self.progress
    }

    /// Rows of `scan` not read yet (segments that end before the start are not read).
    pub(in crate::runtime) fn behind(&self, scan: &HistoryScan) -> u64 {
        let segments: u64 = scan
            .segments
            .iter()
            .filter(|s| s.newest >= self.start)
            .map(|s| (s.first_row + s.rows).saturating_sub(self.read.max(s.first_row)))
            .sum();
        let rows: u64 = scan.batches.iter().map(|b| b.num_rows() as u64).sum();
        let batches =
            (scan.batches_first_row + rows).saturating_sub(self.read.max(scan.batches_first_row));
        segments + batches
    }

    /// Runs the rows of `scan` not read yet through the query, batch by batch, yielding the
    /// processor between batches; fails with 57014 once the backfill is canceled.
    pub(in crate::runtime) fn feed(&mut self, scan: &HistoryScan) -> Result<()> {
        let done = self.progress.read.load(Ordering::Relaxed);
        self.progress
            .total
            .store(done + self.behind(scan), Ordering::Relaxed);
        for segment in &scan.segments {
            if segment.first_row + segment.rows <= self.read {
                continue;
            }
            if segment.newest < self.start {
                // Every row of it lies before the start: none would be run.
                self.read = segment.first_row + segment.rows;
                continue;
            }
            self.progress.check()?;
            let batches = read_segment(segment)?;
            self.feed_from(segment.first_row, &batches)?;
        }
        self.feed_from(scan.batches_first_row, &scan.batches)
    }

    /// Runs `batches`, whose first row is numbered `first`, from row `self.read` on.
    fn feed_from(&mut self, first: u64, batches: &[RecordBatch]) -> Result<()> {
        let mut number = first;
        for batch in batches {
            let n = batch.num_rows() as u64;
            if number + n > self.read {
                self.progress.check()?;
                let skip = self.read.saturating_sub(number) as usize;
                let rows = batch.num_rows() - skip;
                self.run(&batch.slice(skip, rows));
                self.read = number + n;
                self.progress.read.fetch_add(rows as u64, Ordering::Relaxed);
                self.give_way();
            }
            number += n;
        }
        Ok(())
    }

    /// Runs one batch of history: the rows from the start on, and the watermark they imply.
    fn run(&mut self, batch: &RecordBatch) {
        let Some(batch) = from_start(batch, self.time_column, self.start, &mut self.oldest) else {
            return;
        };
        self.fed += batch.num_rows() as u64;
        let advanced = self.stream.observe(&batch, Instant::now());
        self.graph.process(&batch);
        if let Some(wm) = advanced {
            self.graph.advance(wm);
        }
        let progress = &self.progress;
        progress.fed.store(self.fed, Ordering::Relaxed);
        if let Some(t) = self.stream.max_event_time {
            progress.reached.store(t.nanos(), Ordering::Relaxed);
        }
        let wm = self.stream.watermark.0.nanos();
        progress.watermark.store(wm, Ordering::Relaxed);
    }

    /// Under the hub's lock: reads the rows that arrived since [`Backfill::begin`], brings the
    /// operators to the stream's watermark and returns their state (source first) and what
    /// to tell the client.
    pub(in crate::runtime) fn hand_over(&mut self, hub: &Hub) -> Result<(Vec<Vec<u8>>, String)> {
        // Writers wait for the stream's lock, held now: nothing to give way to.
        self.ingest = None;
        if let Some(history) = &hub.history {
            self.feed(&history.scan())?;
        }
        if hub.stream.watermark > self.stream.watermark {
            self.graph.advance(hub.stream.watermark);
        }
        let states = self
            .path
            .iter()
            .map(|&node| self.graph.snapshot_node(node)?.encode())
            .collect::<Result<Vec<_>>>()?;
        let mut notice = format!(
            "backfilled {} rows of stream \"{}\" from {} in {:.3} s",
            self.fed,
            hub.stream.def.name,
            timestamp_literal(self.start),
            self.started.elapsed().as_secs_f64()
        );
        match self.oldest {
            Some(oldest) if oldest > self.start => notice.push_str(&format!(
                "; its history begins at {}, later than the start",
                timestamp_literal(oldest)
            )),
            None => notice.push_str("; its history holds no rows yet"),
            _ => {}
        }
        Ok((states, notice))
    }

    /// Under the hub's lock: [`Backfill::hand_over`], then the query joins the stream's
    /// graph with that state, its results going where the backfill's went. Returns what to
    /// tell the client.
    pub(in crate::runtime) fn finish(
        mut self,
        hub: &mut Hub,
        name: &str,
        def: CreateQuery,
        plan: QueryPlan,
    ) -> Result<String> {
        let (states, notice) = self.hand_over(hub)?;
        hub.attach_with(name, def, plan, self.output, Some(states))?;
        if let Some(q) = hub.queries.get_mut(name) {
            q.rows_in = self.fed;
        }
        Ok(notice)
    }
}

/// The rows of a history batch at or after `start` (none when no row is), with `oldest`
/// lowered to the batch's oldest event time. Most batches lie wholly after the start and go on
/// as they are; a row without an event time compares NULL, and the filter leaves it out.
pub(super) fn from_start(
    batch: &RecordBatch,
    time_column: usize,
    start: i64,
    oldest: &mut Option<i64>,
) -> Option<RecordBatch> {
    let times = batch
        .column(time_column)
        .as_primitive::<TimestampNanosecondType>();
    let min = datafusion::arrow::compute::min(times);
    if let Some(min) = min {
        *oldest = Some(oldest.map_or(min, |o| o.min(min)));
    }
    let batch = if min.is_some_and(|m| m >= start) && times.null_count() == 0 {
        batch.clone()
    } else {
        let keep = gt_eq(times, &TimestampNanosecondArray::new_scalar(start)).ok()?;
        filter_record_batch(batch, &keep).ok()?
    };
    (batch.num_rows() > 0).then_some(batch)
}

/// A backfill reads the rows that arrived while it ran, with no lock held, until at most
/// this many are left for the moment it holds the stream.
pub(super) const CATCH_UP_ROWS: u64 = 8192;

/// Stops a backfill when its statement's future is dropped (canceled, timed out, client
/// gone) before it ends.
pub(super) struct CancelOnDrop(pub(super) Arc<BackfillProgress>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl Engine {
    /// `CREATE CONTINUOUS QUERY ... WITH (start = ...)`: reads the history with no lock
    /// held, off the async runtime's workers (its progress in `SHOW QUERIES`), then creates
    /// the query, which reads the rest and hands over to live rows; the client is told what
    /// was backfilled. Dropping the returned future (a canceled statement, a timeout, a
    /// client gone) stops the backfill, and nothing is created.
    pub(in crate::runtime) async fn create_backfilled(
        &self,
        cq: CreateQuery,
    ) -> Result<StatementResult> {
        let name = normalize(&cq.name);
        let tag = "CREATE CONTINUOUS QUERY".to_string();
        let prepared = {
            let mut shared = self.write();
            if cq.if_not_exists
                && (shared.query_streams.contains_key(&name)
                    || shared.backfilling.contains_key(&name))
            {
                return Ok(StatementResult::Command(tag));
            }
            if shared.catalog.name_taken(&name) || shared.backfilling.contains_key(&name) {
                return Err(Error::duplicate("relation", &name));
            }
            let plan = self.plan_query(&shared, &cq)?;
            if plan.union.is_some() {
                // A union's or a join's query: each of its streams' history.
                Err(self.begin_union_backfill(&mut shared, &name, &cq, plan)?)
            } else {
                Ok(self.begin_stream_backfill(&mut shared, &name, &cq, plan)?)
            }
        };
        let (run, scan, hub) = match prepared {
            Ok(prepared) => prepared,
            Err((run, scans)) => {
                let notice = self.union_backfill_then(name, cq, run, scans).await?;
                return Ok(StatementResult::CommandWithNotice { tag, notice });
            }
        };
        let notice = self
            .backfill_then(name, Statement::CreateQuery(cq), run, scan, hub)
            .await?;
        Ok(StatementResult::CommandWithNotice { tag, notice })
    }

    /// Begins the backfill of a query over one stream, shown in `SHOW QUERIES`.
    fn begin_stream_backfill(
        &self,
        shared: &mut Shared,
        name: &str,
        cq: &CreateQuery,
        plan: QueryPlan,
    ) -> Result<(Backfill, HistoryScan, Arc<StreamHub>)> {
        let hub = shared
            .hubs
            .get(&plan.stream.name)
            .cloned()
            .ok_or_else(|| Error::undefined("stream", &plan.stream.name))?;
        let (run, scan) = Backfill::begin_shown(shared, &hub, (name, cq, &plan), |hub| {
            hub.new_output(name, &plan)
        })?;
        Ok((run, scan, hub))
    }

    /// Runs a backfill registered as `name` in `backfilling` off the async runtime's workers,
    /// giving way to writers: the history read so far, then what arrived meanwhile until
    /// little is left (no lock held); then `statement` (a CREATE or ALTER of the query, its
    /// start made a timestamp, so that a replay of the log backfills the same rows), which
    /// takes the backfill, reads the last rows under the stream's lock and hands over to live
    /// rows. Returns what to tell the client. Dropping the future stops the backfill, and
    /// the statement does not run.
    pub(in crate::runtime) async fn backfill_then(
        &self,
        name: String,
        mut statement: Statement,
        mut run: Backfill,
        scan: HistoryScan,
        hub: Arc<StreamHub>,
    ) -> Result<String> {
        if let Statement::CreateQuery(cq) | Statement::AlterQuery(cq) = &mut statement {
            cq.start = Some(BackfillStart::At(run.start()));
        }
        run.give_way_to(self.ingest.clone());
        let _stop = CancelOnDrop(run.progress().clone());
        let engine = self.clone();
        off_async(move || {
            let done = engine.backfill_in_place(&name, statement, run, scan, &hub);
            engine.write().backfilling.remove(&name);
            done
        })
        .await
    }

    /// The body of [`Engine::backfill_then`], on a thread of its own.
    fn backfill_in_place(
        &self,
        name: &str,
        statement: Statement,
        mut run: Backfill,
        scan: HistoryScan,
        hub: &StreamHub,
    ) -> Result<String> {
        run.feed(&scan)?;
        loop {
            let Some(scan) = hub.lock().history.as_ref().map(History::scan) else {
                break;
            };
            if run.behind(&scan) <= CATCH_UP_ROWS {
                break;
            }
            run.feed(&scan)?;
        }
        let mut shared = self.write();
        shared.backfills.insert(
            name.to_string(),
            BackfillSlot::Prepared(Box::new(run.into())),
        );
        let done = self.ddl(&mut shared, statement, true);
        let slot = shared.backfills.remove(name);
        done?;
        match slot {
            Some(BackfillSlot::Done(notice)) => Ok(notice),
            _ => Err(Error::Internal("a backfill left no notice".into())),
        }
    }
}
