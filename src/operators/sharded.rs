//! Key-partitioned parallelism: runs `n` replicas of a keyed operator (a window aggregate, a
//! session window, a pattern matcher, ...) on `n` threads, each owning the keys whose hash
//! falls to it. Every batch is split by the hash of the key columns; each replica sees all the
//! rows of its keys, in order, so its results are exactly those of one operator restricted to
//! them. Watermarks go to every replica; their results are merged in the operator's emit order
//! (window_end) where it has one, else concatenated (replica 0's first). Only the order of the
//! rows of one window changes.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, concat_batches, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::common::hash_utils::{create_hashes, RandomState};
use datafusion::physical_plan::PhysicalExpr;

use super::snapshot::StateImage;
use super::Operator;
use crate::error::{Error, Result};
use crate::time::Watermark;

/// Batches smaller than this are split but processed on the calling thread: a thread's
/// start-up would cost more than the work.
const PARALLEL_ROWS: usize = 2048;

/// Replicas of one operator, each owning a share of the keys.
pub struct Sharded {
    replicas: Vec<Box<dyn Operator>>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    hashes: Vec<u64>,
}

impl Sharded {
    /// Shards over `replicas` (operators freshly built from one spec) by the values of
    /// `keys`, evaluated on the input rows.
    pub fn try_new(
        replicas: Vec<Box<dyn Operator>>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Self> {
        if replicas.len() < 2 || keys.is_empty() {
            return Err(Error::Internal(
                "sharding needs two replicas and a key".into(),
            ));
        }
        Ok(Sharded {
            replicas,
            keys,
            hashes: Vec::new(),
        })
    }

    /// Each replica's rows of `batch`.
    fn split(&mut self, batch: &RecordBatch) -> Result<Vec<Option<RecordBatch>>> {
        let n = batch.num_rows();
        let keys = self
            .keys
            .iter()
            .map(|k| Ok(k.evaluate(batch)?.into_array(n)?))
            .collect::<Result<Vec<_>>>()?;
        self.hashes.clear();
        self.hashes.resize(n, 0);
        create_hashes(&keys, &RandomState::with_seed(0), &mut self.hashes)?;
        let shards = self.replicas.len();
        let mut rows: Vec<Vec<u32>> = vec![Vec::with_capacity(n / shards + 1); shards];
        for (i, h) in self.hashes.iter().enumerate() {
            // The high bits: the low ones also pick hash-table buckets inside the replicas.
            rows[((h >> 32) as usize) % shards].push(i as u32);
        }
        rows.into_iter()
            .map(|r| {
                Ok(match r.len() {
                    0 => None,
                    len if len == n => Some(batch.clone()),
                    _ => Some(take_record_batch(batch, &UInt32Array::from(r))?),
                })
            })
            .collect()
    }
}

/// The rows of `batches` as one batch, stably sorted by `column`.
fn in_order(batches: &[RecordBatch], column: usize) -> Result<RecordBatch> {
    let all = concat_batches(&batches[0].schema(), batches)?;
    let keys = cast(all.column(column), &DataType::Int64)?;
    let keys = keys.as_primitive::<Int64Type>();
    let mut order: Vec<u32> = (0..all.num_rows() as u32).collect();
    order.sort_by_key(|&i| keys.is_valid(i as usize).then(|| keys.value(i as usize)));
    Ok(take_record_batch(&all, &UInt32Array::from(order))?)
}

/// Runs `work` on each replica with its input (one thread each when `parallel`, the first
/// on the calling thread), and returns their output batches, replica by replica. Inside a
/// parallel section (the stream's queries already spread over the cores) every replica runs
/// on the calling thread: more threads would only take turns.
fn run_each<T: Send>(
    replicas: &mut [Box<dyn Operator>],
    inputs: Vec<T>,
    parallel: bool,
    work: impl Fn(&mut Box<dyn Operator>, T) -> Result<Vec<RecordBatch>> + Sync,
) -> Result<Vec<RecordBatch>> {
    let work = &work;
    let results: Vec<Result<Vec<RecordBatch>>> = if parallel && !crate::spawn::in_parallel_section()
    {
        std::thread::scope(|s| {
            let mut pairs = replicas.iter_mut().zip(inputs);
            let first = pairs.next();
            // Deep (but allowed) expressions recurse while they are evaluated.
            let handles: Vec<_> = pairs
                .map(|(op, input)| {
                    crate::spawn::scoped(s, "saql-shard", move || {
                        crate::spawn::parallel_section(|| work(op, input))
                    })
                })
                .collect();
            let mut results = Vec::with_capacity(handles.len() + 1);
            if let Some((op, input)) = first {
                results.push(crate::spawn::parallel_section(|| work(op, input)));
            }
            results.extend(handles.into_iter().map(|h| {
                match h {
                    Ok(h) => h
                        .join()
                        .unwrap_or_else(|_| Err(Error::Internal("a worker panicked".into()))),
                    Err(e) => Err(Error::Internal(format!("starting a worker thread: {e}"))),
                }
            }));
            results
        })
    } else {
        replicas
            .iter_mut()
            .zip(inputs)
            .map(|(op, input)| work(op, input))
            .collect()
    };
    let mut out = Vec::new();
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

impl Operator for Sharded {
    fn name(&self) -> &'static str {
        self.replicas[0].name()
    }

    fn schema(&self) -> SchemaRef {
        self.replicas[0].schema()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let parts = self.split(&batch)?;
        let parallel = batch.num_rows() >= PARALLEL_ROWS;
        run_each(&mut self.replicas, parts, parallel, |op, part| match part {
            Some(b) => op.process_batch(b),
            None => Ok(vec![]),
        })
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        // Operators that hold rows for the watermark (patterns, history) do their work here.
        let ticks = vec![(); self.replicas.len()];
        let out = run_each(&mut self.replicas, ticks, true, |op, ()| {
            op.on_watermark(watermark)
        })?;
        // Each replica emits in window order; keep that order across them.
        match self.replicas[0].emit_order() {
            Some(column) if out.len() > 1 => Ok(vec![in_order(&out, column)?]),
            _ => Ok(out),
        }
    }

    fn snapshot(&mut self) -> Result<StateImage> {
        let images = self
            .replicas
            .iter_mut()
            .map(|op| op.snapshot())
            .collect::<Result<Vec<_>>>()?;
        Ok(StateImage::later(move || {
            let mut out = Vec::new();
            for image in images {
                let s = image.encode()?;
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(&s);
            }
            Ok(out)
        }))
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let bad = || Error::Internal("corrupt sharded snapshot".into());
        let mut pos = 0;
        for op in &mut self.replicas {
            let len = snapshot
                .get(pos..pos + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(bad)? as usize;
            pos += 8;
            op.restore(snapshot.get(pos..pos + len).ok_or_else(bad)?)?;
            pos += len;
        }
        if pos != snapshot.len() {
            return Err(bad());
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.replicas.iter().map(|o| o.late_rows()).sum()
    }

    fn state_bytes(&self) -> usize {
        self.replicas.iter().map(|o| o.state_bytes()).sum()
    }
}
