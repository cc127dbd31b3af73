//! The matcher's state in a checkpoint: under the stream's lock the partitions are only
//! shared (copy-on-write, see `partitions.rs`); later they are flattened, the stored rows
//! gathered into one batch (Arrow IPC) and the bookkeeping of every partition (threads, their
//! bindings, the rows waiting to be known unmatched) encoded as JSON beside it.

use std::sync::Arc;

use ahash::AHashMap;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::interleave_record_batch;
use serde::{Deserialize, Serialize};

use super::partitions::Key;
use super::{Binding, Partition, PatternMatcher, StoredRow, Thread, EXCLUDED_BIT};
use crate::error::{Error, Result};
use crate::operators::snapshot;

/// Serialised state, beside the pending and stored rows in IPC.
#[derive(Serialize, Deserialize)]
struct Saved {
    watermark: i64,
    late_rows: u64,
    next_seq: u64,
    partitions: Vec<SavedPartition>,
}

#[derive(Serialize, Deserialize)]
struct SavedPartition {
    key: Vec<u8>,
    next_start: u64,
    matches: u64,
    /// (sequence number, row in the stored batch).
    rows: Vec<(u64, u32)>,
    recent: Vec<(u64, u32)>,
    threads: Vec<SavedThread>,
    #[serde(default)]
    started: bool,
    #[serde(default)]
    undecided: Vec<(u64, u32)>,
    #[serde(default)]
    covered: u64,
}

#[derive(Serialize, Deserialize)]
struct SavedThread {
    start: u64,
    start_ts: i64,
    pc: u32,
    /// (sequence number, variable with [`EXCLUDED_BIT`] set if excluded).
    bindings: Vec<(u64, u16)>,
    #[serde(default)]
    timed_out: bool,
}

/// The partitions as taken at a checkpoint barrier: every list of every partition end to end,
/// with where each partition's part ends.
#[derive(Default)]
struct FlatPartitions {
    keys: Vec<u8>,
    /// (sequence number, batch, row in that batch).
    rows: Vec<(u64, usize, u32)>,
    recent: Vec<(u64, usize, u32)>,
    undecided: Vec<(u64, usize, u32)>,
    /// (start, start time, pc, end of its bindings).
    threads: Vec<(u64, i64, u32, usize, bool)>,
    bindings: Vec<(u64, u16)>,
    ends: Vec<PartitionEnds>,
}

struct PartitionEnds {
    key: usize,
    rows: usize,
    recent: usize,
    undecided: usize,
    threads: usize,
    next_start: u64,
    matches: u64,
    started: bool,
    covered: u64,
}

impl FlatPartitions {
    /// The partitions as saved: stored rows are numbered in the order of `rows`, `recent`
    /// then `undecided` (the order in which they are gathered into the stored batch).
    fn unflatten(&self) -> Vec<SavedPartition> {
        let mut out = Vec::with_capacity(self.ends.len());
        let (mut key, mut rows, mut recent, mut threads, mut binding) = (0, 0, 0, 0, 0);
        let mut undecided = 0;
        let recent_base = self.rows.len();
        let undecided_base = recent_base + self.recent.len();
        for e in &self.ends {
            out.push(SavedPartition {
                key: self.keys[key..e.key].to_vec(),
                next_start: e.next_start,
                matches: e.matches,
                rows: (rows..e.rows).map(|i| (self.rows[i].0, i as u32)).collect(),
                recent: (recent..e.recent)
                    .map(|i| (self.recent[i].0, (recent_base + i) as u32))
                    .collect(),
                undecided: (undecided..e.undecided)
                    .map(|i| (self.undecided[i].0, (undecided_base + i) as u32))
                    .collect(),
                started: e.started,
                covered: e.covered,
                threads: self.threads[threads..e.threads]
                    .iter()
                    .map(|&(start, start_ts, pc, end, timed_out)| {
                        let bindings = self.bindings[binding..end].to_vec();
                        binding = end;
                        SavedThread {
                            start,
                            start_ts,
                            pc,
                            bindings,
                            timed_out,
                        }
                    })
                    .collect(),
            });
            (key, rows, recent, threads) = (e.key, e.rows, e.recent, e.threads);
            undecided = e.undecided;
        }
        out
    }
}

/// The operator's state at a checkpoint barrier.
pub(super) fn snapshot(op: &mut PatternMatcher) -> Result<snapshot::StateImage> {
    // Under the stream's lock the partitions are only shared (a pointer each; the stream
    // copies one before changing it); they are flattened and encoded later.
    let partitions = op.partitions.share();
    let pending = op.order.pending()?;
    let (watermark, late_rows) = (op.order.watermark(), op.order.late_rows());
    let next_seq = op.next_seq;
    let schema = op.m.spec.input_schema.clone();
    Ok(snapshot::StateImage::later(move || {
        let (batches, flat) = flatten(&partitions);
        let refs: Vec<&RecordBatch> = batches.iter().map(|b| b.as_ref()).collect();
        let picks: Vec<(usize, usize)> = (flat.rows.iter())
            .chain(&flat.recent)
            .chain(&flat.undecided)
            .map(|&(_, b, row)| (b, row as usize))
            .collect();
        let stored = if picks.is_empty() {
            RecordBatch::new_empty(schema.clone())
        } else {
            interleave_record_batch(&refs, &picks)?
        };
        let saved = Saved {
            watermark,
            late_rows,
            next_seq,
            partitions: flat.unflatten(),
        };
        let saved = serde_json::to_vec(&saved).map_err(|e| Error::Internal(e.to_string()))?;
        let mut out = snapshot::encode(&[saved.len() as i64], &schema, &[pending, stored])?;
        out.extend_from_slice(&saved);
        Ok(out)
    }))
}

/// Every list of every partition end to end, and the batches their stored rows are in.
fn flatten(partitions: &[(Key, Arc<Partition>)]) -> (Vec<Arc<RecordBatch>>, FlatPartitions) {
    let mut batches: Vec<Arc<RecordBatch>> = Vec::new();
    let mut index: AHashMap<*const RecordBatch, usize> = AHashMap::new();
    let mut flat = FlatPartitions::default();
    let mut pick = |s: &StoredRow| {
        let b = *index.entry(Arc::as_ptr(&s.batch)).or_insert_with(|| {
            batches.push(s.batch.clone());
            batches.len() - 1
        });
        (s.seq, b, s.row)
    };
    for (key, p) in partitions {
        flat.keys.extend_from_slice(key);
        flat.rows.extend(p.rows.iter().map(&mut pick));
        flat.recent.extend(p.recent.iter().map(&mut pick));
        flat.undecided.extend(p.undecided.iter().map(&mut pick));
        for t in &p.threads {
            let from = flat.bindings.len();
            let mut at = t.last.as_deref();
            while let Some(b) = at {
                let flag = if b.excluded { EXCLUDED_BIT } else { 0 };
                flat.bindings.push((b.seq, b.var | flag));
                at = b.prev.as_deref();
            }
            flat.bindings[from..].reverse();
            flat.threads
                .push((t.start, t.start_ts, t.pc, flat.bindings.len(), t.timed_out));
        }
        flat.ends.push(PartitionEnds {
            key: flat.keys.len(),
            rows: flat.rows.len(),
            recent: flat.recent.len(),
            undecided: flat.undecided.len(),
            threads: flat.threads.len(),
            next_start: p.next_start,
            matches: p.matches,
            started: p.started,
            covered: p.covered,
        });
    }
    (batches, flat)
}

/// Restores the state [`snapshot`] encoded.
pub(super) fn restore(op: &mut PatternMatcher, bytes: &[u8]) -> Result<()> {
    let bad = || Error::Internal("corrupt pattern snapshot".into());
    let (header, batches) = snapshot::decode(bytes)?;
    let len = *header.first().ok_or_else(bad)? as usize;
    let json = bytes.get(bytes.len().checked_sub(len).ok_or_else(bad)?..);
    let saved: Saved = serde_json::from_slice(json.ok_or_else(bad)?).map_err(|_| bad())?;
    let [pending, stored] = <[RecordBatch; 2]>::try_from(batches).map_err(|_| bad())?;
    let stored = Arc::new(stored);
    let row = |(seq, i): (u64, u32)| StoredRow {
        seq,
        batch: stored.clone(),
        row: i,
    };
    let mut partitions = Vec::with_capacity(saved.partitions.len());
    for p in saved.partitions {
        let threads = p
            .threads
            .into_iter()
            .map(|t| {
                let mut last = None;
                let mapped = t.bindings.len() as u32;
                for (seq, var) in t.bindings {
                    last = Some(Arc::new(Binding {
                        seq,
                        var: var & !EXCLUDED_BIT,
                        excluded: var & EXCLUDED_BIT != 0,
                        prev: last,
                    }));
                }
                if t.pc as usize >= op.m.program.len() {
                    return Err(bad());
                }
                Ok(Thread {
                    start: t.start,
                    start_ts: t.start_ts,
                    pc: t.pc,
                    mapped,
                    last,
                    timed_out: t.timed_out,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        partitions.push((
            p.key,
            Partition {
                threads,
                rows: p.rows.into_iter().map(row).collect(),
                recent: p.recent.into_iter().map(row).collect(),
                next_start: p.next_start,
                matches: p.matches,
                started: p.started,
                undecided: p.undecided.into_iter().map(row).collect(),
                covered: p.covered,
                ..Partition::default()
            },
        ));
    }
    op.partitions.replace(&op.m, partitions);
    op.order
        .restore(saved.watermark, saved.late_rows, vec![pending]);
    op.next_seq = saved.next_seq;
    op.found.clear();
    Ok(())
}
