//! A query over a `UNION ALL` of streams (or a join of two) runs in a hub of its own, fed by
//! several stream hubs. Each stream of the union carries a [`Tap`]: the branch's operators,
//! run under the stream's lock on every batch and watermark, and a handle to the union's
//! hub, to which it hands the branch's rows and the stream's watermark. A union's branch only
//! filters and projects; a window join's branch may aggregate a window, whose results it
//! hands over when the stream's watermark closes the window (the tap's operators are then
//! state, checkpointed with the stream and counted toward the query's state bound). The
//! union's hub merges them
//! ([`UnionMerge`]: rows wait until every input's watermark has passed them, then leave in
//! event-time order) and runs the query's operators over the merged rows as over a stream.
//!
//! Locks: a stream's hub, then the union's hub (never the other way round); a checkpoint
//! holds every stream feeding a union at once, so that the union's state and its streams'
//! log positions are one cut.

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::operators::snapshot::StateImage;
use crate::operators::union::UnionMerge;
use crate::operators::Operator;
use crate::plan::union::UnionPlan;
use crate::plan::StreamDef;
use crate::runtime::core::graph::{Cost, SideJob};
use crate::runtime::core::hub::{Hub, StreamHub};
use crate::runtime::core::output::{QueryFailure, QueryOutput};
use crate::time::{EventTime, Watermark};

/// The input side of a union's hub: the merge and where each branch's rows come from.
pub struct UnionInput {
    /// Rows waiting for the union's watermark.
    pub merge: UnionMerge,
    /// Where each branch's rows come from.
    pub branches: Vec<BranchInput>,
    /// Every declared stream feeding the union, those feeding its branches' merges included.
    pub streams: Vec<String>,
    /// Set once the union's queries failed: rows are no longer kept.
    stopped: bool,
    /// Per branch: bytes of state its tap's operators hold (a window join's aggregates),
    /// with those of the merge it reads.
    tap_bytes: Vec<usize>,
    /// Per branch: rows the merge it reads (if any) dropped as late, as of its last rows.
    tap_late: Vec<u64>,
}

/// Where a union's branch reads its rows.
pub enum BranchInput {
    /// A declared stream, through a tap on the stream's hub.
    Stream(String),
    /// A merge of several streams (a join's, another union's) in a hub of its own, through a
    /// tap on that hub; the hub is this branch's alone.
    Merge {
        /// The merge's hub.
        hub: Arc<StreamHub>,
        /// The declared streams that feed it.
        streams: Vec<String>,
    },
}

/// One branch of a union, at the stream (or the merge) it reads.
pub struct Tap {
    /// The query reading the union.
    pub query: String,
    /// Which union of the query it feeds: empty for the query's own, `[b]` for the merge that
    /// branch `b` of it reads, `[b, c]` for the merge branch `c` of that one reads, ...
    pub nest: Vec<usize>,
    /// Which branch this is.
    pub branch: usize,
    ops: Vec<Box<dyn Operator>>,
    /// Whether an operator of the branch keeps state.
    stateful: bool,
    /// How far behind its input's watermark the branch's rows may be (nanoseconds).
    delay: i64,
    target: Arc<StreamHub>,
    /// Set once the union it feeds stopped keeping rows.
    target_stopped: bool,
    /// What feeding it has cost lately (how it is spread over the stream's threads).
    cost: Cost,
}

/// A union's hub, built for a query: the hub, and the taps to put on the streams it reads
/// (those of the merges its branches read included), each with its stream's name.
pub struct BuiltUnion {
    /// The union's hub, to which the query attaches.
    pub hub: Arc<StreamHub>,
    /// The taps still to be put on declared streams.
    pub taps: Vec<(String, Tap)>,
}

/// A hub for the union `plan` (described as the stream `def`), with no query yet, and the
/// taps that feed it, read by query `query`. A branch that reads a merge of its own gets a
/// hub for it, with its tap already on it; the taps on declared streams are returned, for the
/// caller to put in place.
pub fn union_hub(
    query: &str,
    plan: &UnionPlan,
    def: Arc<StreamDef>,
    retain_rows: usize,
    max_state_bytes: usize,
) -> Result<BuiltUnion> {
    build(query, &[], plan, def, retain_rows, max_state_bytes)
}

fn build(
    query: &str,
    nest: &[usize],
    plan: &UnionPlan,
    def: Arc<StreamDef>,
    retain_rows: usize,
    max_state_bytes: usize,
) -> Result<BuiltUnion> {
    let merge = UnionMerge::try_new(plan.branches.len(), plan.schema.clone(), plan.time_column)?;
    let hub = StreamHub::new(def, retain_rows, max_state_bytes, None, 1);
    let mut taps = Vec::new();
    let mut branches = Vec::new();
    for (i, b) in plan.branches.iter().enumerate() {
        let tap = Tap::try_new(query, nest, plan, i, hub.clone())?;
        match &b.merge {
            None => {
                taps.push((b.stream.clone(), tap));
                branches.push(BranchInput::Stream(b.stream.clone()));
            }
            Some(m) => {
                let mut inner_nest = nest.to_vec();
                inner_nest.push(i);
                let inner_def = Arc::new(StreamDef::derived(
                    &b.stream,
                    m.schema.clone(),
                    Some(m.time_column),
                ));
                let inner = build(query, &inner_nest, m, inner_def, 0, max_state_bytes)?;
                // Nothing feeds the inner hub yet: its tap goes on now.
                inner.hub.lock().taps.push(tap);
                taps.extend(inner.taps);
                branches.push(BranchInput::Merge {
                    hub: inner.hub,
                    streams: m.streams(),
                });
            }
        }
    }
    hub.lock().union = Some(UnionInput {
        merge,
        branches,
        streams: plan.streams(),
        stopped: false,
        tap_bytes: vec![0; plan.branches.len()],
        tap_late: vec![0; plan.branches.len()],
    });
    Ok(BuiltUnion { hub, taps })
}

impl UnionInput {
    /// The hubs of the merges its branches read, each with its place (`nest`, as a tap's),
    /// given this union's own place `at`: its branches' merges, then theirs.
    pub fn merges(&self, at: &[usize]) -> Vec<(Vec<usize>, Arc<StreamHub>)> {
        let mut out = Vec::new();
        for (i, b) in self.branches.iter().enumerate() {
            if let BranchInput::Merge { hub, .. } = b {
                let mut nest = at.to_vec();
                nest.push(i);
                out.push((nest, hub.clone()));
            }
        }
        out
    }
}

/// The hubs of every merge under the union in `hub` (the merges its branches read, theirs,
/// ...), each with its place; locks each hub in turn, never two at once.
pub fn nested_merges(hub: &StreamHub) -> Vec<(Vec<usize>, Arc<StreamHub>)> {
    let mut out = Vec::new();
    let mut todo: Vec<(Vec<usize>, Arc<StreamHub>)> = match &hub.lock().union {
        Some(u) => u.merges(&[]),
        None => Vec::new(),
    };
    while let Some((nest, inner)) = todo.pop() {
        if let Some(u) = &inner.lock().union {
            todo.extend(u.merges(&nest));
        }
        out.push((nest, inner));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What a merge a branch reads holds and dropped, for the union's state and counters.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct InputState {
    bytes: usize,
    late: u64,
}

/// `wm` moved back by `delay` nanoseconds (the end of the input stays the end).
fn delayed(wm: Watermark, delay: i64) -> Watermark {
    if delay == 0 || wm == Watermark::END || wm == Watermark::START {
        return wm;
    }
    // Saturates at i64::MIN, which is Watermark::START.
    Watermark(EventTime(wm.0 .0.saturating_sub(delay)))
}

/// Feeding `batch` to each of `taps`, as jobs that may run on the stream's threads
/// alongside its queries: one job per union fed (its taps in order), since they would only
/// wait for each other's hold of the union's lock.
pub(super) fn feed_jobs<'a>(
    taps: &'a mut [Tap],
    batch: &'a RecordBatch,
    own: InputState,
) -> Vec<SideJob<'a>> {
    let rows = batch.num_rows() as f64;
    tap_jobs(
        taps,
        move |cost| cost.per_row * rows,
        move |cost, spent| Cost::update(&mut cost.per_row, spent / rows.max(1.0)),
        move |tap| tap.feed(batch, own),
    )
}

/// Moving each of `taps` to `wm`, as jobs (see [`feed_jobs`]).
pub(super) fn advance_jobs(taps: &mut [Tap], wm: Watermark, own: InputState) -> Vec<SideJob<'_>> {
    tap_jobs(
        taps,
        |cost| cost.per_advance,
        |cost, spent| Cost::update(&mut cost.per_advance, spent),
        move |tap| tap.advance_holding(wm, own),
    )
}

/// `work` on each of `taps`, one job per union fed, predicted from and learning into each
/// tap's cost.
fn tap_jobs<'a>(
    taps: &'a mut [Tap],
    predict: impl Fn(&Cost) -> f64,
    learn: impl Fn(&mut Cost, f64) + Copy + Send + 'a,
    work: impl Fn(&mut Tap) + Copy + Send + 'a,
) -> Vec<SideJob<'a>> {
    by_union(taps)
        .into_iter()
        .map(|group| SideJob {
            predicted: group.iter().map(|t| predict(&t.cost)).sum(),
            run: Box::new(move || {
                for tap in group {
                    let started = std::time::Instant::now();
                    work(tap);
                    learn(&mut tap.cost, started.elapsed().as_nanos() as f64);
                }
            }),
        })
        .collect()
}

/// `taps` grouped by the union (or merge) hub they feed, each group in the taps' order.
fn by_union(taps: &mut [Tap]) -> Vec<Vec<&mut Tap>> {
    let mut groups: Vec<(*const StreamHub, Vec<&mut Tap>)> = Vec::new();
    for tap in taps {
        let target = Arc::as_ptr(&tap.target);
        match groups.iter_mut().find(|(t, _)| *t == target) {
            Some((_, group)) => group.push(tap),
            None => groups.push((target, vec![tap])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

impl Tap {
    /// Branch `branch` of `plan` (the union at `nest` of those `query` reads), feeding
    /// `target`.
    pub fn try_new(
        query: &str,
        nest: &[usize],
        plan: &UnionPlan,
        branch: usize,
        target: Arc<StreamHub>,
    ) -> Result<Tap> {
        let b = &plan.branches[branch];
        let ops = b.specs.iter().map(|s| s.build()).collect::<Result<_>>()?;
        Ok(Tap {
            query: query.to_string(),
            nest: nest.to_vec(),
            branch,
            ops,
            stateful: b.specs.iter().any(|s| !s.is_stateless()),
            delay: b.delay,
            target,
            target_stopped: false,
            cost: Cost::default(),
        })
    }

    /// Runs a batch of the input's rows through the branch and hands what passes to the
    /// union; `input_bytes` is what the input holds for it (a merge's waiting rows).
    fn feed(&mut self, batch: &RecordBatch, input: InputState) {
        let out = self.run(Some(batch.clone()), None);
        self.hand_over(out, input);
    }

    /// The input's watermark moved to `wm`: what it completes in the branch (a window's
    /// results) goes to the union first, then the watermark (moved back by the branch's
    /// delay).
    pub fn advance(&mut self, wm: Watermark) {
        self.advance_holding(wm, InputState::default());
    }

    fn advance_holding(&mut self, wm: Watermark, input: InputState) {
        let out = self.run(None, Some(wm));
        self.hand_over(out, input);
        let mut target = self.target.lock();
        target.union_advance(self.branch, delayed(wm, self.delay));
        self.target_stopped = target.union.as_ref().is_some_and(|u| u.stopped);
    }

    /// The branch's operators over `batch`, then `wm`, each operator's output going on to
    /// the next.
    fn run(
        &mut self,
        batch: Option<RecordBatch>,
        wm: Option<Watermark>,
    ) -> Result<(Vec<RecordBatch>, usize)> {
        let mut batches: Vec<RecordBatch> = batch.into_iter().collect();
        let mut bytes = 0;
        for op in &mut self.ops {
            let mut next = Vec::new();
            for b in batches {
                next.extend(op.process_batch(b)?);
            }
            if let Some(wm) = wm {
                next.extend(op.on_watermark(wm)?);
            }
            bytes += op.state_bytes();
            batches = next;
        }
        Ok((batches, bytes))
    }

    /// Hands the branch's rows (or its failure) to the union.
    fn hand_over(&mut self, out: Result<(Vec<RecordBatch>, usize)>, input: InputState) {
        let mut hub = self.target.lock();
        match out {
            Ok((batches, bytes)) => {
                if let Some(union) = &mut hub.union {
                    union.tap_bytes[self.branch] = bytes + input.bytes;
                    union.tap_late[self.branch] = input.late;
                }
                for b in batches {
                    hub.union_push(self.branch, b);
                }
            }
            Err(e) => hub.fail_union(&e),
        }
        self.target_stopped = hub.union.as_ref().is_some_and(|u| u.stopped);
    }

    /// Whether the branch keeps state (a window join's aggregate): then it is checkpointed.
    pub fn is_stateful(&self) -> bool {
        self.stateful
    }

    /// The state of each of the branch's operators, for a checkpoint.
    pub fn snapshot(&mut self) -> Result<Vec<StateImage>> {
        self.ops.iter_mut().map(|op| op.snapshot()).collect()
    }

    /// Restores the branch's operators from [`Tap::snapshot`]'s images.
    pub fn restore(&mut self, states: &[Vec<u8>]) -> Result<()> {
        if states.len() != self.ops.len() {
            return Err(Error::Internal(format!(
                "branch {} of \"{}\" has {} operators, its checkpoint {}",
                self.branch,
                self.query,
                self.ops.len(),
                states.len()
            )));
        }
        for (op, state) in self.ops.iter_mut().zip(states) {
            op.restore(state)?;
        }
        Ok(())
    }
}

impl Hub {
    /// What this hub holds and dropped for the union a tap on it feeds: nothing for a
    /// stream's; a merge's waiting rows and late rows (and those of the merges it reads).
    pub(super) fn input_state(&self) -> InputState {
        InputState {
            bytes: self.union_bytes(),
            late: self.union_late_rows(),
        }
    }

    /// Rows this union (and the merges its branches read) dropped as late: behind their own
    /// input's watermark, or without a time. 0 for a stream's hub.
    pub fn union_late_rows(&self) -> u64 {
        self.union
            .as_ref()
            .map_or(0, |u| u.merge.late_rows() + u.tap_late.iter().sum::<u64>())
    }

    /// A merge that a union's branch reads stops keeping rows once that union stopped.
    pub(super) fn stop_if_unread(&mut self) {
        if self.union.is_some()
            && !self.taps.is_empty()
            && self.taps.iter().all(|t| t.target_stopped)
        {
            self.stop_union();
        }
    }

    /// Takes rows of branch `branch` into this union's merge.
    fn union_push(&mut self, branch: usize, batch: RecordBatch) {
        let Some(union) = &mut self.union else {
            return;
        };
        if union.stopped {
            return;
        }
        // Branches name their columns as they like: the union's names (and nullability).
        let pushed = RecordBatch::try_new(union.merge.schema().clone(), batch.columns().to_vec())
            .map_err(Error::from)
            .and_then(|b| union.merge.push(branch, b));
        match pushed {
            Ok(()) => self.check_state_bytes(),
            Err(e) => self.fail_union(&e),
        }
    }

    /// Branch `branch`'s stream is at `wm`: what the union's watermark releases runs through
    /// this hub's queries.
    fn union_advance(&mut self, branch: usize, wm: Watermark) {
        let Some(union) = &mut self.union else {
            return;
        };
        match union.merge.advance(branch, wm) {
            Ok(None) => {}
            Ok(Some((rows, wm))) => {
                for b in rows {
                    // The union's rows have the union's schema.
                    let _ = self.insert(&b, std::time::Instant::now());
                }
                self.advance(wm);
            }
            Err(e) => self.fail_union(&e),
        }
    }

    /// Fails every query of this union's hub with `error` (and, for a merge a union's branch
    /// reads, that union's), and stops keeping its rows.
    pub(super) fn fail_union(&mut self, error: &Error) {
        if let Some(union) = &mut self.union {
            union.stopped = true;
            union.merge.clear_waiting();
        }
        let failure = QueryFailure::from_error(error);
        for q in self.queries.values() {
            QueryOutput::lock(&q.output).fail(failure.clone());
        }
        if self.union.is_some() {
            for tap in &mut self.taps {
                tap.target.lock().fail_union(error);
                tap.target_stopped = true;
            }
        }
    }

    /// Bytes of rows this union's merge holds, with its taps' state (0 for a stream's hub).
    pub(super) fn union_bytes(&self) -> usize {
        self.union.as_ref().map_or(0, |u| {
            u.merge.state_bytes() + u.tap_bytes.iter().sum::<usize>()
        })
    }

    /// What to tell a user whose union query holds too much: which stream holds it back.
    pub(super) fn union_hint(&self) -> Option<String> {
        let union = self.union.as_ref()?;
        let waiting = self.union_bytes();
        if waiting == 0 {
            return None;
        }
        let (slowest, wm) = union.merge.slowest();
        let (what, whom) = match &union.branches[slowest] {
            BranchInput::Stream(s) => (format!("stream \"{s}\""), "it"),
            BranchInput::Merge { streams, .. } => (
                format!(
                    "branch {} (streams {})",
                    slowest + 1,
                    streams
                        .iter()
                        .map(|s| format!("\"{s}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "the quiet one",
            ),
        };
        Some(format!(
            "; {waiting} bytes of it are rows of the UNION ALL waiting for {what}, whose \
             watermark is at {wm}: give {whom} an IDLE TIMEOUT so that it advances when the \
             stream is quiet",
        ))
    }

    /// Stops this union once its queries failed for holding too much.
    pub(super) fn stop_union(&mut self) {
        if let Some(union) = &mut self.union {
            union.stopped = true;
            union.merge.clear_waiting();
        }
    }
}
