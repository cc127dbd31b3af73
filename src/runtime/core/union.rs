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
use crate::runtime::core::hub::{Hub, StreamHub};
use crate::runtime::core::output::{QueryFailure, QueryOutput};
use crate::time::Watermark;

/// The input side of a union's hub: the merge and the names of the streams it reads.
pub struct UnionInput {
    /// Rows waiting for the union's watermark.
    pub merge: UnionMerge,
    /// The stream of each branch.
    pub streams: Vec<String>,
    /// Set once the union's queries failed: rows are no longer kept.
    stopped: bool,
    /// Per branch: bytes of state its tap's operators hold (a window join's aggregates).
    tap_bytes: Vec<usize>,
}

/// One branch of a union, at the stream it reads.
pub struct Tap {
    /// The query reading the union.
    pub query: String,
    /// Which branch this is.
    pub branch: usize,
    ops: Vec<Box<dyn Operator>>,
    /// Whether an operator of the branch keeps state.
    stateful: bool,
    target: Arc<StreamHub>,
}

/// A hub for the union `plan` (described as the stream `def`), with no query yet.
pub fn union_hub(
    plan: &UnionPlan,
    def: Arc<StreamDef>,
    retain_rows: usize,
    max_state_bytes: usize,
) -> Result<Arc<StreamHub>> {
    let merge = UnionMerge::try_new(plan.branches.len(), plan.schema.clone(), plan.time_column)?;
    let hub = StreamHub::new(def, retain_rows, max_state_bytes, None, 1);
    hub.lock().union = Some(UnionInput {
        merge,
        streams: plan.branches.iter().map(|b| b.stream.clone()).collect(),
        stopped: false,
        tap_bytes: vec![0; plan.branches.len()],
    });
    Ok(hub)
}

impl Tap {
    /// Branch `branch` of `plan`, read by `query`, feeding `target`.
    pub fn try_new(
        query: &str,
        plan: &UnionPlan,
        branch: usize,
        target: Arc<StreamHub>,
    ) -> Result<Tap> {
        let specs = &plan.branches[branch].specs;
        let ops = specs.iter().map(|s| s.build()).collect::<Result<_>>()?;
        Ok(Tap {
            query: query.to_string(),
            branch,
            ops,
            stateful: specs.iter().any(|s| !s.is_stateless()),
            target,
        })
    }

    /// Runs a batch of the stream's rows through the branch and hands what passes to the
    /// union.
    fn feed(&mut self, batch: &RecordBatch) {
        let out = self.run(Some(batch.clone()), None);
        self.hand_over(out);
    }

    /// The stream's watermark moved to `wm`: what it completes in the branch (a window's
    /// results) goes to the union first, then the watermark.
    pub fn advance(&mut self, wm: Watermark) {
        let out = self.run(None, Some(wm));
        self.hand_over(out);
        self.target.lock().union_advance(self.branch, wm);
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
    fn hand_over(&self, out: Result<(Vec<RecordBatch>, usize)>) {
        let mut hub = self.target.lock();
        match out {
            Ok((batches, bytes)) => {
                if let Some(union) = &mut hub.union {
                    union.tap_bytes[self.branch] = bytes;
                }
                for b in batches {
                    hub.union_push(self.branch, b);
                }
            }
            Err(e) => hub.fail_union(&e),
        }
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
    /// Hands a batch of this stream's rows to the unions that read it.
    pub(super) fn feed_taps(&mut self, batch: &RecordBatch) {
        for tap in &mut self.taps {
            tap.feed(batch);
        }
    }

    /// Tells the unions that read this stream where its watermark is.
    pub(super) fn advance_taps(&mut self, wm: Watermark) {
        for tap in &mut self.taps {
            tap.advance(wm);
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

    /// Fails every query of this union's hub with `error`, and stops keeping its rows.
    pub(super) fn fail_union(&mut self, error: &Error) {
        if let Some(union) = &mut self.union {
            union.stopped = true;
            union.merge.clear_waiting();
        }
        let failure = QueryFailure::from_error(error);
        for q in self.queries.values() {
            QueryOutput::lock(&q.output).fail(failure.clone());
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
        if union.merge.state_bytes() == 0 {
            return None;
        }
        let (slowest, wm) = union.merge.slowest();
        Some(format!(
            "; {} bytes of it are rows of the UNION ALL waiting for stream \"{}\", whose \
             watermark is at {wm}: give it an IDLE TIMEOUT so that it advances when the stream \
             is quiet",
            union.merge.state_bytes(),
            union.streams[slowest]
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
