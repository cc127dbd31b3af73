//! `MATCH_RECOGNIZE`: finds sequences of rows that match a row pattern within each partition,
//! in event-time order, and emits one row per match.
//!
//! Rows wait until the watermark passes them, so that they are matched in event-time order
//! even when they arrive out of order (ties keep arrival order). Each partition then runs the
//! compiled pattern as a Pike VM: every row may start a match attempt, every attempt is a set
//! of threads in preference order (SQL:2016's preferment: greedy quantifiers take one more
//! row first, reluctant ones one fewer, alternatives left to right), and a thread that
//! reaches the end of the pattern is the attempt's match as soon as no thread it is preferred
//! to is still alive. Attempts finish in start order; after a match, `AFTER MATCH SKIP`
//! decides where the next may start. `WITHIN` ends every thread whose first row is more than
//! the interval older than the row it would take (or than the watermark), which bounds the
//! state; at the end of input every open thread ends.
//!
//! A `DEFINE` condition is split into conjuncts over the current row alone, evaluated once per
//! batch, and conjuncts that read earlier rows of the match (`b.pid = a.pid`,
//! `SUM(b.amount) > ...`, `PREV(x)`), evaluated per row for all the threads waiting for that
//! variable at once, over a batch of their [`Ref`] values.
//!
//! The configuration planning builds is `spec.rs` ([`PatternSpec`]); the matcher's step over
//! one row is `step.rs`, conditions over earlier rows `cross.rs`, deciding and emitting
//! matches `resolve.rs`, running aggregates `running.rs`, the partitions and their expiry
//! index `partitions.rs`, snapshots `saved.rs`.

mod cross;
mod nfa;
mod partitions;
mod refs;
mod resolve;
mod running;
mod saved;
mod spec;
mod step;

use crate::error::sqlstate;
use std::collections::VecDeque;
use std::sync::Arc;

use ahash::AHashMap;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions,
};
use datafusion::arrow::compute::kernels::nullif::nullif;
use datafusion::arrow::compute::{cast, interleave, prep_null_mask_filter};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

pub use nfa::{Inst, Pattern, Position, Program};
use partitions::Partitions;
pub use refs::{Ref, RefKind};
use running::Running;
pub use spec::{
    AfterMatch, CompareOp, Comparison, CrossCondition, EmptyMatches, Measures, OutputColumn,
    PatternSpec, RowsPerMatch, Variable, MAX_ROWS_PER_PARTITION, MAX_THREADS_PER_PARTITION,
};

use super::event_order::EventOrder;
use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::{duration_nanos, Watermark};

/// One row mapped to a variable, linked to the rows mapped before it; threads forked from one
/// another share their common past.
struct Binding {
    seq: u64,
    var: u16,
    /// Mapped inside `{- -}`: left out of the rows `ALL ROWS PER MATCH` returns.
    excluded: bool,
    prev: Option<Arc<Binding>>,
}

/// The flag bit of an excluded binding's variable in a snapshot.
const EXCLUDED_BIT: u16 = 0x8000;

/// A match attempt's thread, parked at a `Var` instruction (waiting for a row) or at `Match`.
#[derive(Clone)]
struct Thread {
    /// Sequence number of the attempt's first row.
    start: u64,
    start_ts: i64,
    pc: u32,
    last: Option<Arc<Binding>>,
    /// Rows mapped so far (the length of `last`).
    mapped: u32,
    /// `EMIT TIMEOUT`: WITHIN ended the attempt and this is its partial match, returned in
    /// start order once the attempts before it are decided (a match before it may skip past
    /// it); it takes no rows.
    timed_out: bool,
}

impl Thread {
    /// The rows mapped so far, oldest first.
    fn bindings(&self) -> Vec<&Arc<Binding>> {
        let mut out: Vec<&Arc<Binding>> =
            std::iter::successors(self.last.as_ref(), |b| b.prev.as_ref()).collect();
        out.reverse();
        out
    }
}

/// A row kept because a thread maps it (or PREV may read it).
#[derive(Clone)]
struct StoredRow {
    seq: u64,
    batch: Arc<RecordBatch>,
    row: u32,
}

#[derive(Default, Clone)]
struct Partition {
    /// In start order, then preference order within an attempt.
    threads: Vec<Thread>,
    /// Rows mapped by live threads, by sequence number.
    rows: VecDeque<StoredRow>,
    /// The last rows of the partition, for PREV.
    recent: VecDeque<StoredRow>,
    /// No attempt may start before this sequence number (AFTER MATCH SKIP).
    next_start: u64,
    /// Matches emitted so far.
    matches: u64,
    /// Whether a row of the partition has been matched (`^` holds before the first).
    started: bool,
    /// `WITH UNMATCHED ROWS`: rows not yet known to be in a match or in none, in order.
    undecided: VecDeque<StoredRow>,
    /// `WITH UNMATCHED ROWS`: rows before this sequence number are in an emitted match.
    covered: u64,
    /// The bytes counted for the partition in [`Partitions`]' total.
    bytes: usize,
    /// Where the partition's entry in the expiry index of [`Partitions`] is, if it has one.
    due: Option<i64>,
}

impl Partition {
    fn row(&self, seq: u64) -> Result<&StoredRow> {
        let i = self
            .rows
            .binary_search_by_key(&seq, |r| r.seq)
            .map_err(|_| Error::Internal(format!("pattern row {seq} is not stored")))?;
        Ok(&self.rows[i])
    }
}

/// The row being matched.
struct Current<'a> {
    batch: &'a Arc<RecordBatch>,
    row: usize,
    seq: u64,
    ts: i64,
}

/// A row of output before the measures are evaluated: the reference values, and the input
/// row it returns (`ALL ROWS PER MATCH`) or takes the partition columns from.
struct Found {
    refs: Vec<ScalarValue>,
    row: Option<StoredRow>,
    /// False for an unmatched row: its measures are NULL.
    matched: bool,
    /// A partial match that WITHIN ended.
    timed_out: bool,
}

/// The immutable part of the operator.
struct Matcher {
    spec: PatternSpec,
    program: Program,
    within: Option<i64>,
    prev_depth: usize,
    /// The instructions an attempt starts at at the partition's first row (`^` holds).
    start_first: Vec<u32>,
    /// Whether the pattern uses `^` (partitions must remember that they started).
    anchored: bool,
    /// Whether a row where an attempt starts must be stored (an empty match returns it).
    keep_start_rows: bool,
    /// Whether no condition reads the rows a thread mapped (only the current row and PREV):
    /// then two threads of one attempt at the same instruction have the same future, and
    /// only the preferred one need live, as in a Pike VM.
    dedupe: bool,
    /// The instructions an attempt starts at (the closure of instruction 0).
    start: Vec<u32>,
}

/// Buffers reused from row to row.
#[derive(Default)]
struct Scratch {
    /// Closure flags, one per instruction.
    seen: Vec<bool>,
    /// Closure output.
    pcs: Vec<u32>,
    /// Per thread: may it take the current row.
    verdict: Vec<bool>,
    /// Per variable: threads whose cross condition must be evaluated.
    ask: Vec<Vec<usize>>,
    /// Per instruction: the attempt that last parked a thread there (dedupe).
    parked: Vec<u64>,
}

/// Runs a `MATCH_RECOGNIZE`.
pub struct PatternMatcher {
    m: Matcher,
    converter: RowConverter,
    partitions: Partitions,
    /// Rows waiting for the watermark.
    order: EventOrder,
    next_seq: u64,
    /// Rows of matches found and not yet emitted.
    found: Vec<Found>,
    scratch: Scratch,
}

impl PatternMatcher {
    /// Compiles the pattern.
    pub fn try_new(spec: PatternSpec) -> Result<Self> {
        let program = Program::compile(&spec.pattern)?;
        let fields = spec
            .partition_by
            .iter()
            .map(|&c| SortField::new(spec.input_schema.field(c).data_type().clone()))
            .collect();
        let converter = RowConverter::new(fields)?;
        let prev_depth = spec
            .variables
            .iter()
            .filter_map(|v| v.cross.as_ref())
            .flat_map(|c| c.refs.iter())
            .filter_map(|r| match r.kind {
                RefKind::Prev(n) => Some(n as usize),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let within = spec.within.map(duration_nanos);
        let order = EventOrder::new(spec.time_column, spec.input_schema.clone());
        let program_len = program.len();
        let variables = spec.variables.len();
        let mut start = Vec::new();
        let mut seen = vec![false; program_len];
        program.closure(0, Position::Inside, &mut seen, &mut start);
        let mut start_first = Vec::new();
        program.closure(0, Position::First, &mut seen, &mut start_first);
        let anchored = spec.pattern.any(&|p| matches!(p, Pattern::Start));
        let keep_start_rows = spec.rows_per_match != RowsPerMatch::All(EmptyMatches::Omit)
            && spec.pattern.matches_empty();
        let dedupe = spec
            .variables
            .iter()
            .filter_map(|v| v.cross.as_ref())
            .flat_map(|c| c.refs.iter())
            .all(|r| matches!(r.kind, RefKind::Prev(_)));
        Ok(PatternMatcher {
            m: Matcher {
                spec,
                program,
                within,
                prev_depth,
                dedupe,
                start,
                start_first,
                anchored,
                keep_start_rows,
            },
            scratch: Scratch {
                seen: vec![false; program_len],
                ask: vec![Vec::new(); variables],
                ..Scratch::default()
            },
            converter,
            partitions: Partitions::default(),
            order,
            next_seq: 0,
            found: Vec::new(),
        })
    }

    /// Matches rows already in event-time order.
    fn run(&mut self, batch: RecordBatch) -> Result<()> {
        let n = batch.num_rows();
        let times = self.order.times(&batch)?;
        let mut masks = Vec::with_capacity(self.m.spec.variables.len());
        for v in &self.m.spec.variables {
            masks.push(match &v.local {
                None => None,
                Some(e) => {
                    let a = e.evaluate(&batch)?.into_array(n)?;
                    let b = a.as_boolean_opt().ok_or_else(|| {
                        Error::plan(
                            sqlstate::DATATYPE_MISMATCH,
                            format!("DEFINE {} must be a boolean condition", v.name),
                        )
                    })?;
                    Some(if b.null_count() > 0 {
                        prep_null_mask_filter(b)
                    } else {
                        b.clone()
                    })
                }
            });
        }
        let keys: Vec<ArrayRef> = self
            .m
            .spec
            .partition_by
            .iter()
            .map(|&c| batch.column(c).clone())
            .collect();
        // Without PARTITION BY, every row is in the one partition with the empty key.
        let rows = if keys.is_empty() {
            None
        } else {
            Some(self.converter.convert_columns(&keys)?)
        };
        let batch = Arc::new(batch);
        for (i, ts) in times.into_iter().enumerate() {
            let key: &[u8] = match &rows {
                Some(rows) => rows.row(i).data(),
                None => &[],
            };
            let current = Current {
                batch: &batch,
                row: i,
                seq: self.next_seq,
                ts: ts.unwrap_or(i64::MIN),
            };
            self.next_seq += 1;
            let (m, scratch, found) = (&self.m, &mut self.scratch, &mut self.found);
            self.partitions.touch(m, key, |part| {
                m.step(part, &current, &masks, scratch, found)?;
                m.resolve(part, found)
            })?;
        }
        Ok(())
    }

    /// Ends threads that the watermark (or the end of input) leaves no row to take: only in
    /// the partitions the expiry index names (all of them at the end of the input).
    /// The matches this completes come out in partition-key order, so that every run emits
    /// them in the same order (a restarted engine must number its results as the one before
    /// the crash did); only the partitions that complete a match are sorted.
    fn expire(&mut self, wm: i64) -> Result<()> {
        let first = self.found.len();
        let at_end = wm == i64::MAX;
        let keys = if at_end {
            self.partitions.all()
        } else {
            self.partitions.due_before(wm)
        };
        let mut completed: Vec<(partitions::Key, std::ops::Range<usize>)> = Vec::new();
        for key in keys {
            let start = self.found.len();
            let (m, scratch, found) = (&self.m, &mut self.scratch, &mut self.found);
            self.partitions
                .touch(m, &key, |part| m.expire(part, wm, scratch, found))?;
            if self.found.len() > start {
                completed.push((key, start..self.found.len()));
            }
        }
        if completed.len() > 1 {
            completed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let mut done: Vec<Option<Found>> = self.found.drain(first..).map(Some).collect();
            for (_, range) in completed {
                for i in range {
                    self.found.extend(done[i - first].take());
                }
            }
        }
        Ok(())
    }

    /// The output rows of the matches found so far.
    fn emit(&mut self) -> Result<Vec<RecordBatch>> {
        if self.found.is_empty() {
            return Ok(vec![]);
        }
        let found = std::mem::take(&mut self.found);
        let n = found.len();
        let measures = &self.m.spec.measures;
        let mut columns = Vec::with_capacity(measures.refs.len());
        for j in 0..measures.refs.len() {
            columns.push(ScalarValue::iter_to_array(
                found.iter().map(|f| f.refs[j].clone()),
            )?);
        }
        let refs = RecordBatch::try_new_with_options(
            measures.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        let values = measures
            .exprs
            .iter()
            .map(|e| Ok(e.evaluate(&refs)?.into_array(n)?))
            .collect::<Result<Vec<_>>>()?;
        // Unmatched rows have NULL measures.
        let unmatched = found
            .iter()
            .any(|f| !f.matched)
            .then(|| BooleanArray::from_iter(found.iter().map(|f| Some(!f.matched))));
        // The returned input rows (ALL ROWS PER MATCH), gathered from their batches.
        let mut sources: Vec<&RecordBatch> = Vec::new();
        let mut index: AHashMap<*const RecordBatch, usize> = AHashMap::new();
        let mut picks = Vec::new();
        if measures
            .columns
            .iter()
            .any(|c| matches!(c, OutputColumn::Input(_)))
        {
            for f in &found {
                let s = f.row.as_ref().ok_or_else(|| {
                    Error::Internal("an ALL ROWS PER MATCH row without its input row".into())
                })?;
                let b = *index.entry(Arc::as_ptr(&s.batch)).or_insert_with(|| {
                    sources.push(s.batch.as_ref());
                    sources.len() - 1
                });
                picks.push((b, s.row as usize));
            }
        }
        let mut out = Vec::with_capacity(measures.columns.len());
        for (c, f) in measures.columns.iter().zip(self.m.spec.schema.fields()) {
            let a = match *c {
                OutputColumn::Measure(i) => match &unmatched {
                    Some(mask) => nullif(&values[i], mask)?,
                    None => values[i].clone(),
                },
                OutputColumn::Input(col) => {
                    let arrays: Vec<&dyn Array> =
                        sources.iter().map(|b| b.column(col).as_ref()).collect();
                    interleave(&arrays, &picks)?
                }
                OutputColumn::TimedOut => Arc::new(BooleanArray::from_iter(
                    found.iter().map(|f| Some(f.timed_out)),
                )),
            };
            out.push(if a.data_type() == f.data_type() {
                a
            } else {
                cast(&a, f.data_type())?
            });
        }
        Ok(vec![RecordBatch::try_new(self.m.spec.schema.clone(), out)?])
    }
}

/// SQLSTATE of a failed `AFTER MATCH SKIP TO`: a data exception (SQL:2016 makes it a
/// run-time exception; saql reports the class code).
pub const SKIP_ERROR: &str = sqlstate::DATA_EXCEPTION;

/// The error when a partition holds too many rows.
fn rows_limit() -> Error {
    Error::limit(
        sqlstate::OUT_OF_MEMORY,
        format!(
            "MATCH_RECOGNIZE holds more than {MAX_ROWS_PER_PARTITION} rows for open match \
             attempts in one partition; bound the pattern with WITHIN or make its conditions \
             stricter"
        ),
    )
}

impl Operator for PatternMatcher {
    fn name(&self) -> &'static str {
        "PatternMatcher"
    }

    fn schema(&self) -> SchemaRef {
        self.m.spec.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        self.order.push(batch)?;
        Ok(vec![])
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        let wm = watermark.0.nanos();
        if wm < self.order.watermark() {
            return Ok(vec![]);
        }
        for ready in self.order.release(watermark)? {
            self.run(ready)?;
        }
        if self.m.within.is_some() || wm == i64::MAX {
            self.expire(wm)?;
        }
        self.emit()
    }

    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        saved::snapshot(self)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        saved::restore(self, bytes)
    }

    fn late_rows(&self) -> u64 {
        self.order.late_rows()
    }

    fn state_bytes(&self) -> usize {
        self.partitions.bytes()
            + self.found.len() * std::mem::size_of::<Found>()
            + self.order.pending_bytes()
    }

    fn shard_keys(&self) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
        if self.m.spec.partition_by.is_empty() {
            return None;
        }
        let input = &self.m.spec.input_schema;
        Some(
            self.m
                .spec
                .partition_by
                .iter()
                .map(|&c| Arc::new(Column::new(input.field(c).name(), c)) as Arc<dyn PhysicalExpr>)
                .collect(),
        )
    }
}
