//! Backfill of a query over a `UNION ALL` or a join of streams (`CREATE CONTINUOUS QUERY q
//! WITH (start = ...) AS SELECT ... FROM (... UNION ALL ...)`, `... FROM a JOIN b ON ...`):
//! the query runs over the retained history of every stream it reads, then goes on with live
//! rows, with no gap and no row twice at the hand-over, as a backfill of one stream's query
//! does ([`super::backfill`]).
//!
//! The backfill builds the union as live ingest would (its hub, the merges its branches
//! read, the taps that feed them, the query attached to its hub, its results going to the
//! query's real output), but with the taps on private hubs of its own, one per stream: each
//! feeds its stream's history rows (those from the start on, in arrival order) through them,
//! with a watermark derived from the rows as live ingest derives it. The streams are read
//! batch by batch, the one whose watermark is furthest behind first, so that the union's
//! merges hold little. Most of the history is read with no lock held; then, with every
//! stream of the union held at once, the rows that arrived meanwhile are read too, each
//! private hub is brought to its stream's watermark, and the taps move onto the streams'
//! hubs, where live rows continue through the very same operators.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::record_batch::RecordBatch;

use super::backfill::{from_start, BackfillProgress};
use crate::error::{sqlstate, Error, Result};
use crate::plan::spec::OperatorSpec;
use crate::plan::union::UnionPlan;
use crate::plan::QueryPlan;
use crate::runtime::core::hub::StreamHub;
use crate::runtime::core::ingest::IngestBudget;
use crate::runtime::core::output::QueryOutput;
use crate::runtime::core::union::union_hub;
use crate::runtime::durability::history::{read_segment, HistoryScan};
use crate::runtime::engine::{off_async, BackfillSlot, Engine, Shared};
use crate::sql::{timestamp_literal, BackfillStart, CreateQuery, Statement};
use crate::time::Watermark;

/// One stream of a union being backfilled.
struct Input {
    /// The stream's name.
    name: String,
    /// The backfill's own hub for it: its watermark, and the taps it feeds meanwhile.
    shell: Arc<StreamHub>,
    /// The stream's event-time column.
    time_column: usize,
    /// History rows read so far (the next one to read has this number).
    read: u64,
    /// Rows read from the history, not run yet.
    queued: VecDeque<RecordBatch>,
    /// The oldest event time read.
    oldest: Option<i64>,
}

/// A union's (or join's) query being backfilled.
pub(in crate::runtime) struct UnionBackfill {
    inputs: Vec<Input>,
    /// The union's hub, with the query attached: it becomes the query's hub at the hand-over.
    hub: Arc<StreamHub>,
    /// Rows with an earlier event time are left out (nanoseconds).
    start: i64,
    /// Rows run through the query.
    fed: u64,
    started: Instant,
    progress: Arc<BackfillProgress>,
    /// Live ingest in flight, which a backfill gives way to between batches.
    ingest: Option<Arc<IngestBudget>>,
}

/// The scans of the history of each stream of a union, in the order of its inputs, each
/// with the stream's watermark when it was taken.
pub(in crate::runtime) type Scans = Vec<(HistoryScan, Watermark)>;

/// Why a union's query cannot start in the past, if it cannot: a temporal join anywhere in
/// it (its past versions are not kept).
fn refusal(plan: &QueryPlan) -> Option<String> {
    fn temporal(specs: &[OperatorSpec]) -> Option<&str> {
        specs.iter().find_map(|s| match s {
            OperatorSpec::LookupJoin(l) if l.temporal.is_some() => Some(l.table_name.as_str()),
            OperatorSpec::Sharded(sh) => temporal(std::slice::from_ref(&*sh.inner)),
            _ => None,
        })
    }
    fn in_union(u: &UnionPlan) -> Option<&str> {
        u.branches
            .iter()
            .find_map(|b| temporal(&b.specs).or_else(|| b.merge.as_deref().and_then(in_union)))
    }
    let table = temporal(&plan.specs).or_else(|| plan.union.as_deref().and_then(in_union))?;
    Some(format!(
        "a query with a temporal join (FOR SYSTEM_TIME AS OF) cannot start in the past: the \
         past versions of \"{table}\" are not kept; create it without WITH (start = ...)"
    ))
}

impl UnionBackfill {
    /// Prepares the backfill of `def` (planned as `plan`, which reads a union) on the
    /// streams of `shared`, and takes what their histories hold now (each under its hub's
    /// lock: only taking the list).
    pub(in crate::runtime) fn begin(
        shared: &Shared,
        name: &str,
        def: &CreateQuery,
        plan: QueryPlan,
        retain_rows: usize,
        max_state_bytes: usize,
    ) -> Result<(UnionBackfill, Scans)> {
        let union = plan
            .union
            .clone()
            .ok_or_else(|| Error::Internal("a union backfill of no union".into()))?;
        if let Some(why) = refusal(&plan) {
            return Err(Error::NotSupported(why));
        }
        let Some(start) = def.start else {
            return Err(Error::Internal("a backfill without a start".into()));
        };
        let names = union.streams();
        let mut inputs = Vec::new();
        let mut scans = Vec::new();
        let mut newest: Option<i64> = None;
        for s in &names {
            let hub = shared
                .hubs
                .get(s)
                .ok_or_else(|| Error::undefined("stream", s))?;
            let hub = hub.lock();
            let stream = &hub.stream.def;
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
            let time = stream.event_time.as_ref().ok_or_else(|| {
                Error::Internal(format!("stream \"{}\" of a union without event time", s))
            })?;
            if let Some(t) = hub.stream.max_event_time {
                newest = Some(newest.map_or(t.nanos(), |n| n.max(t.nanos())));
            }
            inputs.push(Input {
                name: s.clone(),
                shell: StreamHub::new(stream.clone(), 0, max_state_bytes, None, 1),
                time_column: time.column,
                read: 0,
                queued: VecDeque::new(),
                oldest: None,
            });
            scans.push((history.scan(), hub.stream.watermark));
        }
        let start = match start {
            BackfillStart::At(nanos) => nanos,
            BackfillStart::Back(span) => newest
                .unwrap_or(0)
                .saturating_sub(crate::time::duration_nanos(span)),
        };
        let built = union_hub(
            name,
            &union,
            plan.stream.clone(),
            retain_rows,
            max_state_bytes,
        )?;
        for (stream, tap) in built.taps {
            let input = inputs
                .iter()
                .find(|i| i.name == stream)
                .ok_or_else(|| Error::Internal(format!("a tap on \"{stream}\", not read")))?;
            input.shell.lock().taps.push(tap);
        }
        let output = {
            let mut hub = built.hub.lock();
            let output = hub.new_output(name, &plan);
            hub.attach_with(name, def.clone(), plan, output.clone(), None)?;
            output
        };
        let progress = Arc::new(BackfillProgress::new(
            names.join(", "),
            crate::sql::query_sql(&def.query, &def.clauses),
            output,
        ));
        Ok((
            UnionBackfill {
                inputs,
                hub: built.hub,
                start,
                fed: 0,
                started: Instant::now(),
                progress,
                ingest: None,
            },
            scans,
        ))
    }

    /// The start as an event time (nanoseconds), as the logged statement says it.
    pub(in crate::runtime) fn start(&self) -> i64 {
        self.start
    }

    /// What `SHOW QUERIES` shows of it, and how to stop it.
    pub(in crate::runtime) fn progress(&self) -> &Arc<BackfillProgress> {
        &self.progress
    }

    /// Gives way to the writers of `ingest` between batches.
    pub(in crate::runtime) fn give_way_to(&mut self, ingest: Arc<IngestBudget>) {
        self.ingest = Some(ingest);
    }

    /// Rows of `scans` not read yet (segments wholly before the start are not read).
    pub(in crate::runtime) fn behind(&self, scans: &Scans) -> u64 {
        self.inputs
            .iter()
            .zip(scans)
            .map(|(input, (scan, _))| {
                let segments: u64 = scan
                    .segments
                    .iter()
                    .filter(|s| s.newest >= self.start)
                    .map(|s| (s.first_row + s.rows).saturating_sub(input.read.max(s.first_row)))
                    .sum();
                let rows: u64 = scan.batches.iter().map(|b| b.num_rows() as u64).sum();
                segments
                    + (scan.batches_first_row + rows)
                        .saturating_sub(input.read.max(scan.batches_first_row))
            })
            .sum()
    }

    /// Runs the rows of `scans` not read yet through the union, batch by batch, the stream
    /// furthest behind first; fails with 57014 once the backfill is canceled, and with the
    /// query's failure if it failed (its state bound, 53200).
    pub(in crate::runtime) fn feed(&mut self, scans: &Scans) -> Result<()> {
        let done = self.progress.read.load(Ordering::Relaxed);
        self.progress
            .total
            .store(done + self.behind(scans), Ordering::Relaxed);
        loop {
            self.progress.check()?;
            // The stream whose watermark is furthest behind and that has rows left.
            let mut next: Option<(usize, Watermark)> = None;
            for (i, (scan, live)) in scans.iter().enumerate() {
                if self.inputs[i].queued.is_empty() {
                    let start = self.start;
                    let input = &mut self.inputs[i];
                    input.queued = next_chunk(scan, &mut input.read, start)?.into();
                }
                if self.inputs[i].queued.is_empty() {
                    // All of this stream's history read so far: it is where the stream was
                    // when the scan was taken (a later row behind that would be late live
                    // too), so the union need not wait for it below that.
                    let mut shell = self.inputs[i].shell.lock();
                    if *live > shell.stream.watermark {
                        shell.advance(*live);
                    }
                    continue;
                }
                let wm = self.inputs[i].shell.lock().stream.watermark;
                if next.is_none_or(|(_, w)| wm < w) {
                    next = Some((i, wm));
                }
            }
            let Some((i, _)) = next else {
                break;
            };
            let batch = self.inputs[i].queued.pop_front().expect("a queued batch");
            self.progress
                .read
                .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
            self.run(i, &batch);
            self.check_failed()?;
            self.give_way();
        }
        Ok(())
    }

    /// Runs one batch of input `i`'s history: the rows from the start on.
    fn run(&mut self, i: usize, batch: &RecordBatch) {
        let input = &mut self.inputs[i];
        let Some(batch) = from_start(batch, input.time_column, self.start, &mut input.oldest)
        else {
            return;
        };
        self.fed += batch.num_rows() as u64;
        let mut shell = input.shell.lock();
        let _ = shell.insert(&batch, Instant::now());
        let progress = &self.progress;
        progress.fed.store(self.fed, Ordering::Relaxed);
        if let Some(t) = shell.stream.max_event_time {
            let reached = progress.reached.load(Ordering::Relaxed);
            progress
                .reached
                .store(reached.max(t.nanos()), Ordering::Relaxed);
        }
        drop(shell);
        let wm = self.hub.lock().stream.watermark;
        progress.watermark.store(wm.0.nanos(), Ordering::Relaxed);
    }

    /// The query's failure, if it failed while backfilling (it holds too much).
    fn check_failed(&self) -> Result<()> {
        match QueryOutput::lock(&self.progress.output).failure() {
            Some(f) => Err(Error::QueryFailed(f.clone())),
            None => Ok(()),
        }
    }

    /// Between batches: the processor goes to live writers first.
    fn give_way(&self) {
        std::thread::yield_now();
        let Some(ingest) = &self.ingest else {
            return;
        };
        let until = Instant::now() + std::time::Duration::from_millis(2);
        while ingest.used() > 0 && Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// With every stream of the union held (catalog, then streams in name order): reads the
    /// rows that arrived since the scans, brings each stream's taps to its watermark, then
    /// moves them onto the streams' hubs, where live rows continue, and logs the statement
    /// (`log`) once that can no longer fail. Returns the union's hub (the query is attached to
    /// it) and what to tell the client.
    pub(in crate::runtime) fn finish(
        mut self,
        shared: &Shared,
        log: impl FnOnce() -> Result<Option<u64>>,
    ) -> Result<(Arc<StreamHub>, Option<u64>, String)> {
        self.ingest = None;
        let mut names: Vec<String> = self.inputs.iter().map(|i| i.name.clone()).collect();
        names.sort();
        let hubs = names
            .iter()
            .map(|n| {
                shared
                    .hubs
                    .get(n)
                    .cloned()
                    .ok_or_else(|| Error::undefined("stream", n))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut held: Vec<_> = hubs.iter().map(|h| h.lock()).collect();
        let held_of = |name: &str| names.iter().position(|n| n == name).expect("held");
        let scans: Scans = self
            .inputs
            .iter()
            .map(|i| {
                let hub = &held[held_of(&i.name)];
                let scan = hub
                    .history
                    .as_ref()
                    .map(|h| h.scan())
                    .unwrap_or(HistoryScan {
                        segments: Vec::new(),
                        batches: Vec::new(),
                        batches_first_row: 0,
                    });
                (scan, hub.stream.watermark)
            })
            .collect();
        // Every row read, each stream brought to its watermark.
        self.feed(&scans)?;
        self.check_failed()?;
        let seq = log()?;
        for input in &self.inputs {
            let taps = std::mem::take(&mut input.shell.lock().taps);
            held[held_of(&input.name)].taps.extend(taps);
        }
        drop(held);
        let oldest = self.inputs.iter().filter_map(|i| i.oldest).min();
        let mut notice = format!(
            "backfilled {} rows of streams {} from {} in {:.3} s",
            self.fed,
            self.inputs
                .iter()
                .map(|i| format!("\"{}\"", i.name))
                .collect::<Vec<_>>()
                .join(", "),
            timestamp_literal(self.start),
            self.started.elapsed().as_secs_f64()
        );
        match oldest {
            Some(oldest) if oldest > self.start => notice.push_str(&format!(
                "; their history begins at {}, later than the start",
                timestamp_literal(oldest)
            )),
            None => notice.push_str("; their history holds no rows yet"),
            _ => {}
        }
        if let Some(q) = self.hub.lock().queries.values_mut().next() {
            q.rows_in = self.fed;
        }
        Ok((self.hub, seq, notice))
    }
}

/// The next rows of `scan` after row `read` (a written segment's, or the rows in memory),
/// moving `read` past them; segments wholly before `start` are skipped.
fn next_chunk(scan: &HistoryScan, read: &mut u64, start: i64) -> Result<Vec<RecordBatch>> {
    for segment in &scan.segments {
        let end = segment.first_row + segment.rows;
        if end <= *read {
            continue;
        }
        if segment.newest < start {
            *read = end;
            continue;
        }
        let batches = read_segment(segment)?;
        return Ok(after(segment.first_row, &batches, read));
    }
    Ok(after(scan.batches_first_row, &scan.batches, read))
}

/// The rows of `batches` (the first numbered `first`) from row `read` on, moving `read` past
/// them.
fn after(first: u64, batches: &[RecordBatch], read: &mut u64) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut number = first;
    for batch in batches {
        let n = batch.num_rows() as u64;
        if number + n > *read {
            let skip = read.saturating_sub(number) as usize;
            out.push(batch.slice(skip, batch.num_rows() - skip));
            *read = number + n;
        }
        number += n;
    }
    out
}

impl Engine {
    /// Begins the backfill of `cq` (planned as `plan`, over a union or a join), shown in
    /// `SHOW QUERIES` (its name is taken until it ends).
    pub(in crate::runtime) fn begin_union_backfill(
        &self,
        shared: &mut Shared,
        name: &str,
        cq: &CreateQuery,
        plan: QueryPlan,
    ) -> Result<(UnionBackfill, Scans)> {
        let (run, scans) = UnionBackfill::begin(
            shared,
            name,
            cq,
            plan,
            self.config.retain_rows,
            self.config.max_query_state_bytes,
        )?;
        shared
            .backfilling
            .insert(name.to_string(), run.progress().clone());
        Ok((run, scans))
    }

    /// Runs a union's backfill begun by [`Engine::begin_union_backfill`] off the async
    /// runtime's workers, then creates the query (`cq`, logged with its start as a timestamp,
    /// so that a replay of the log backfills the same rows). Returns what to tell the client;
    /// dropping the future stops the backfill, and nothing is created.
    pub(in crate::runtime) async fn union_backfill_then(
        &self,
        name: String,
        mut cq: CreateQuery,
        mut run: UnionBackfill,
        scans: Scans,
    ) -> Result<String> {
        cq.start = Some(BackfillStart::At(run.start()));
        run.give_way_to(self.ingest.clone());
        let _stop = super::backfill::CancelOnDrop(run.progress().clone());
        let engine = self.clone();
        off_async(move || {
            let done = engine.union_backfill_in_place(&name, cq, run, scans);
            engine.write().backfilling.remove(&name);
            done
        })
        .await
    }

    /// Reads the histories with no lock held, then what arrived meanwhile until little is
    /// left, then creates the query (the CREATE, logged with its start as a timestamp),
    /// which finishes the backfill under the streams' locks.
    fn union_backfill_in_place(
        &self,
        name: &str,
        statement: CreateQuery,
        mut run: UnionBackfill,
        scans: Scans,
    ) -> Result<String> {
        run.feed(&scans)?;
        loop {
            let scans: Option<Scans> = {
                let shared = self.read();
                run.inputs
                    .iter()
                    .map(|i| {
                        let hub = shared.hubs.get(&i.name)?.lock();
                        Some((hub.history.as_ref()?.scan(), hub.stream.watermark))
                    })
                    .collect()
            };
            let Some(scans) = scans else {
                break;
            };
            if run.behind(&scans) <= super::backfill::CATCH_UP_ROWS {
                break;
            }
            run.feed(&scans)?;
        }
        let mut shared = self.write();
        shared.backfills.insert(
            name.to_string(),
            BackfillSlot::PreparedUnion(Box::new(run.into())),
        );
        let done = self.ddl(&mut shared, Statement::CreateQuery(statement), true);
        let slot = shared.backfills.remove(name);
        done?;
        match slot {
            Some(BackfillSlot::Done(notice)) => Ok(notice),
            _ => Err(Error::Internal("a backfill left no notice".into())),
        }
    }
}
