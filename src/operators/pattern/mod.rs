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

mod nfa;
mod partitions;
mod refs;
mod running;
mod saved;

use crate::error::sqlstate;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ahash::AHashMap;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions, UInt32Array,
};
use datafusion::arrow::compute::kernels::nullif::nullif;
use datafusion::arrow::compute::{cast, interleave, prep_null_mask_filter, take};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

pub use nfa::{Inst, Pattern, Position, Program};
use partitions::Partitions;
pub use refs::{Ref, RefKind};
use running::Running;

use super::event_order::EventOrder;
use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::{duration_nanos, Watermark};

/// Where the next match may start after one is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AfterMatch {
    /// After the match's last row (the default).
    PastLastRow,
    /// At the row after the match's first row.
    ToNextRow,
    /// At the first row mapped to the variable (or to a variable of the subset: indexes
    /// past the variables name [`PatternSpec::subsets`]).
    ToFirst(u16),
    /// At the last row mapped to the variable (or subset).
    ToLast(u16),
}

/// What a match returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowsPerMatch {
    /// One summary row per match (the default).
    One,
    /// Every row of every match (`ALL ROWS PER MATCH`).
    All(EmptyMatches),
}

/// What `ALL ROWS PER MATCH` does with empty matches and with rows in no match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmptyMatches {
    /// `SHOW EMPTY MATCHES` (the default): an empty match returns one row, the row it was
    /// found at, with its measures over no rows.
    Show,
    /// `OMIT EMPTY MATCHES`: an empty match returns nothing (it still takes a match number).
    Omit,
    /// `WITH UNMATCHED ROWS`: empty matches are shown, and every row that is in no match
    /// (and is not where an empty match was found) is returned once with NULL measures.
    WithUnmatched,
}

/// One column of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputColumn {
    /// The value of `Measures::exprs[i]` (NULL in an unmatched row).
    Measure(usize),
    /// The input column of the returned row (`ALL ROWS PER MATCH`).
    Input(usize),
    /// `timed_out`: true for a partial match that WITHIN ended (`EMIT TIMEOUT`).
    TimedOut,
}

/// The most match threads one partition may hold. Patterns such as `(a | b)*` without WITHIN
/// can fork without bound; past this the query fails with 53200 rather than exhausting memory.
pub const MAX_THREADS_PER_PARTITION: usize = crate::limits::MAX_PATTERN_THREADS;

/// The most rows one partition may hold: rows buffered for matches in progress, and rows
/// mapped by its open attempts (counted per attempt: `(a+)` without WITHIN starts an attempt
/// at every row, each mapping every later row). Past this the query fails with 53200.
pub const MAX_ROWS_PER_PARTITION: usize = crate::limits::MAX_PATTERN_ROWS;

/// A comparison between a column of the current row and a reference, such as
/// `b.pid = a.pid`, evaluated directly on the values (NULL on either side: false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Comparison {
    /// The input column.
    pub column: usize,
    /// `column <op> reference`.
    pub op: CompareOp,
    /// Index into the condition's references.
    pub reference: usize,
}

/// The operator of a [`Comparison`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CompareOp {
    fn holds(self, a: &ScalarValue, b: &ScalarValue) -> bool {
        use std::cmp::Ordering::*;
        if a.is_null() || b.is_null() {
            return false;
        }
        match (self, a.partial_cmp(b)) {
            (_, None) => false,
            (CompareOp::Eq, Some(o)) => o == Equal,
            (CompareOp::NotEq, Some(o)) => o != Equal,
            (CompareOp::Lt, Some(o)) => o == Less,
            (CompareOp::LtEq, Some(o)) => o != Greater,
            (CompareOp::Gt, Some(o)) => o == Greater,
            (CompareOp::GtEq, Some(o)) => o != Less,
        }
    }
}

/// A `DEFINE` condition that reads earlier rows of the match: direct comparisons, then
/// (if any conjunct is not one) a predicate over a batch of reference values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CrossCondition {
    /// Conjuncts of the form `column <op> reference` on equal types.
    pub comparisons: Vec<Comparison>,
    /// The other conjuncts, evaluated over `schema`: the input columns, then one column per
    /// reference.
    pub predicate: Option<Arc<dyn PhysicalExpr>>,
    /// The references, in the order of their columns.
    pub refs: Vec<Ref>,
    /// Input fields followed by the reference fields.
    pub schema: SchemaRef,
}

/// One pattern variable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Variable {
    /// Its name, for EXPLAIN and errors.
    pub name: String,
    /// Conjuncts over the current row only (None: true).
    pub local: Option<Arc<dyn PhysicalExpr>>,
    /// Conjuncts that read earlier rows (None: true).
    pub cross: Option<CrossCondition>,
}

/// The output row of a match: references computed from its rows, then expressions over them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Measures {
    /// The references, in the order of the columns of `schema`.
    pub refs: Vec<Ref>,
    /// One field per reference.
    pub schema: SchemaRef,
    /// Expressions over `schema`.
    pub exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The output columns, in order.
    pub columns: Vec<OutputColumn>,
}

/// Everything the planner decides about a `MATCH_RECOGNIZE`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PatternSpec {
    /// The variables, numbered as in `pattern`.
    pub variables: Vec<Variable>,
    /// The row pattern.
    pub pattern: Pattern,
    /// Input columns whose values split the rows into independent partitions.
    pub partition_by: Vec<usize>,
    /// The input's event-time column.
    pub time_column: usize,
    /// Longest time from a match's first row to its last.
    pub within: Option<Duration>,
    /// `WITHIN ... EMIT TIMEOUT`: an attempt that WITHIN ends after it mapped a row returns
    /// its partial match (its most preferred thread's rows), marked in a `timed_out` column.
    pub emit_timeout: bool,
    /// `AFTER MATCH SKIP ...`.
    pub after_match: AfterMatch,
    /// `ONE ROW PER MATCH` or `ALL ROWS PER MATCH ...`.
    pub rows_per_match: RowsPerMatch,
    /// `SUBSET u = (a, b)`: each union variable's name and variables. A reference's
    /// variable `variables.len() + i` is subset `i`.
    pub subsets: Vec<(String, Vec<u16>)>,
    /// What a match emits.
    pub measures: Measures,
    /// Schema of the input rows.
    pub input_schema: SchemaRef,
    /// Schema of the output rows.
    pub schema: SchemaRef,
}

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

impl Matcher {
    fn uses_match_number(&self) -> bool {
        self.spec
            .measures
            .refs
            .iter()
            .any(|r| r.kind == RefKind::MatchNumber)
    }

    /// Ends the partition's threads that watermark `wm` leaves no row to take (every one
    /// waiting for a row at the end of the input), and emits what that decides.
    fn expire(
        &self,
        part: &mut Partition,
        wm: i64,
        scratch: &mut Scratch,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        if part.threads.is_empty() {
            return Ok(());
        }
        let prog = &self.program;
        let at_end = wm == i64::MAX;
        let before = part.threads.len();
        let within = self.within;
        // A thread waiting at `$` has mapped its last row: WITHIN is met, and the next
        // row of its partition ends it.
        self.drop_threads(
            part,
            |t| match prog.inst(t.pc) {
                Inst::Match | Inst::End => true,
                _ => !at_end && within.is_none_or(|w| t.start_ts.saturating_add(w) >= wm),
            },
            found,
        )?;
        if at_end {
            self.finish(part, scratch);
        }
        // Also when no thread ended: one may have become a timed-out partial match.
        if part.threads.len() != before || at_end || self.spec.emit_timeout {
            self.resolve(part, found)?;
        }
        Ok(())
    }

    /// Offers one row to a partition's threads, and lets it start an attempt.
    fn step(
        &self,
        part: &mut Partition,
        cur: &Current,
        masks: &[Option<BooleanArray>],
        scratch: &mut Scratch,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let prog = &self.program;
        if let Some(w) = self.within {
            self.drop_threads(
                part,
                |t| prog.inst(t.pc) == Inst::Match || cur.ts.saturating_sub(t.start_ts) <= w,
                found,
            )?;
        }
        if matches!(
            self.spec.rows_per_match,
            RowsPerMatch::All(EmptyMatches::WithUnmatched)
        ) {
            if part.undecided.len() >= MAX_ROWS_PER_PARTITION {
                return Err(rows_limit());
            }
            part.undecided.push_back(StoredRow {
                seq: cur.seq,
                batch: cur.batch.clone(),
                row: cur.row as u32,
            });
        }
        let start = if part.started {
            &self.start
        } else {
            &self.start_first
        };
        part.started = true;
        // Most rows neither extend a match nor can start one: skip them quickly. An attempt
        // that can match empty always starts.
        let may_start = |pc: &u32| match prog.inst(*pc) {
            Inst::Var(v, _) => masks[v as usize].as_ref().is_none_or(|m| m.value(cur.row)),
            Inst::Match => true,
            _ => false,
        };
        let can_start = cur.seq >= part.next_start && start.iter().any(may_start);
        if part.threads.is_empty() && !can_start {
            self.remember(part, cur);
            return Ok(());
        }
        if can_start {
            for &pc in start {
                part.threads.push(Thread {
                    start: cur.seq,
                    start_ts: cur.ts,
                    pc,
                    last: None,
                    mapped: 0,
                    timed_out: false,
                });
            }
        }

        // Which waiting threads may map this row to their variable.
        let Scratch {
            seen,
            pcs,
            verdict,
            ask,
            parked,
        } = scratch;
        verdict.clear();
        verdict.resize(part.threads.len(), false);
        ask.iter_mut().for_each(Vec::clear);
        for (i, t) in part.threads.iter().enumerate() {
            let Inst::Var(v, _) = prog.inst(t.pc) else {
                continue;
            };
            if t.timed_out {
                continue;
            }
            let v = v as usize;
            if masks[v].as_ref().is_some_and(|m| !m.value(cur.row)) {
                continue;
            }
            if self.spec.variables[v].cross.is_some() {
                ask[v].push(i);
            } else {
                verdict[i] = true;
            }
        }
        for (v, threads) in ask.iter().enumerate() {
            if threads.is_empty() {
                continue;
            }
            let cond = self.spec.variables[v]
                .cross
                .as_ref()
                .expect("only variables with a cross condition are asked");
            let answers = self.cross(cond, v as u16, part, threads, cur)?;
            for (&i, ok) in threads.iter().zip(answers) {
                verdict[i] = ok;
            }
        }

        // Advance, in preference order; once an attempt has a match, its less preferred
        // threads can never win and end.
        let old = std::mem::take(&mut part.threads);
        let mut matched: Option<u64> = None;
        let mut bound = false;
        // For dedupe: the attempt (start + 1) that last parked a thread at each instruction.
        parked.clear();
        parked.resize(if self.dedupe { prog.len() } else { 0 }, 0);
        for (i, t) in old.into_iter().enumerate() {
            if t.timed_out {
                part.threads.push(t);
                continue;
            }
            if matched == Some(t.start) {
                continue;
            }
            match prog.inst(t.pc) {
                Inst::Match => {
                    matched = Some(t.start);
                    part.threads.push(t);
                }
                Inst::Var(v, excluded) if verdict[i] => {
                    bound = true;
                    let b = Arc::new(Binding {
                        seq: cur.seq,
                        var: v,
                        excluded,
                        prev: t.last.clone(),
                    });
                    pcs.clear();
                    prog.closure(t.pc + 1, Position::Inside, seen, pcs);
                    for &pc in pcs.iter() {
                        if self.dedupe {
                            if parked[pc as usize] == t.start + 1 {
                                continue;
                            }
                            parked[pc as usize] = t.start + 1;
                        }
                        part.threads.push(Thread {
                            pc,
                            last: Some(b.clone()),
                            mapped: t.mapped.saturating_add(1),
                            ..t
                        });
                        if prog.inst(pc) == Inst::Match {
                            matched = Some(t.start);
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        if part.threads.len() > MAX_THREADS_PER_PARTITION {
            return Err(Error::limit(
                sqlstate::OUT_OF_MEMORY,
                format!(
                    "MATCH_RECOGNIZE holds more than {MAX_THREADS_PER_PARTITION} open match \
                     attempts in one partition; bound the pattern with WITHIN or make its \
                     conditions stricter"
                ),
            ));
        }
        let mapped: usize = part.threads.iter().map(|t| t.mapped as usize).sum();
        if mapped.max(part.rows.len()) > MAX_ROWS_PER_PARTITION {
            return Err(rows_limit());
        }
        if bound || (can_start && self.keep_start_rows) {
            part.rows.push_back(StoredRow {
                seq: cur.seq,
                batch: cur.batch.clone(),
                row: cur.row as u32,
            });
        }
        self.remember(part, cur);
        Ok(())
    }

    /// At the end of the input: threads waiting at `$` go on, and those that reach the end
    /// of the pattern match; every other thread that waits for a row ends. Preference
    /// order is kept: once an attempt has a match, its less preferred threads end.
    fn finish(&self, part: &mut Partition, scratch: &mut Scratch) {
        let prog = &self.program;
        let old = std::mem::take(&mut part.threads);
        let mut matched: Option<u64> = None;
        for t in old {
            if t.timed_out {
                part.threads.push(t);
                continue;
            }
            if matched == Some(t.start) {
                continue;
            }
            match prog.inst(t.pc) {
                Inst::Match => {
                    matched = Some(t.start);
                    part.threads.push(t);
                }
                Inst::End => {
                    scratch.pcs.clear();
                    prog.closure(t.pc, Position::End, &mut scratch.seen, &mut scratch.pcs);
                    if let Some(&pc) = scratch.pcs.iter().find(|&&pc| prog.inst(pc) == Inst::Match)
                    {
                        matched = Some(t.start);
                        part.threads.push(Thread { pc, ..t });
                    }
                }
                _ => {}
            }
        }
    }

    /// Keeps the row for PREV, if any condition reads earlier rows of the partition.
    fn remember(&self, part: &mut Partition, cur: &Current) {
        if self.prev_depth > 0 {
            part.recent.push_back(StoredRow {
                seq: cur.seq,
                batch: cur.batch.clone(),
                row: cur.row as u32,
            });
            if part.recent.len() > self.prev_depth {
                part.recent.pop_front();
            }
        }
    }

    /// Evaluates a cross condition for the threads `which` of `part` at the current row.
    fn cross(
        &self,
        cond: &CrossCondition,
        var: u16,
        part: &Partition,
        which: &[usize],
        cur: &Current,
    ) -> Result<Vec<bool>> {
        let width = cur.batch.num_columns();
        let mut answers = vec![true; which.len()];
        if !cond.comparisons.is_empty() {
            let current: Vec<ScalarValue> = cond
                .comparisons
                .iter()
                .map(|c| ScalarValue::try_from_array(cur.batch.column(c.column), cur.row))
                .collect::<std::result::Result<_, _>>()?;
            for (answer, &i) in answers.iter_mut().zip(which) {
                let last = part.threads[i].last.as_ref();
                for (c, value) in cond.comparisons.iter().zip(&current) {
                    let ty = cond.schema.field(width + c.reference).data_type();
                    let r =
                        self.value(&cond.refs[c.reference], ty, part, last, Some((cur, var)))?;
                    if !c.op.holds(value, &r) {
                        *answer = false;
                        break;
                    }
                }
            }
        }
        let Some(predicate) = &cond.predicate else {
            return Ok(answers);
        };
        let still: Vec<usize> = (0..which.len()).filter(|&j| answers[j]).collect();
        if still.is_empty() {
            return Ok(answers);
        }
        let k = still.len();
        let repeat = UInt32Array::from(vec![cur.row as u32; k]);
        let mut columns = cur
            .batch
            .columns()
            .iter()
            .map(|c| Ok(take(c, &repeat, None)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        for (j, r) in cond.refs.iter().enumerate() {
            let ty = cond.schema.field(width + j).data_type();
            let values = still
                .iter()
                .map(|&s| {
                    let last = part.threads[which[s]].last.as_ref();
                    self.value(r, ty, part, last, Some((cur, var)))
                })
                .collect::<Result<Vec<_>>>()?;
            columns.push(ScalarValue::iter_to_array(values)?);
        }
        let batch = RecordBatch::try_new(cond.schema.clone(), columns)?;
        let result = predicate.evaluate(&batch)?.into_array(k)?;
        let result = result.as_boolean_opt().ok_or_else(|| {
            Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                "DEFINE must be a boolean condition",
            )
        })?;
        for (j, &s) in still.iter().enumerate() {
            answers[s] = result.is_valid(j) && result.value(j);
        }
        Ok(answers)
    }

    /// A reference's value for a thread whose rows are `bindings`; `current` is the row being
    /// decided and the variable it would be mapped to (None for a complete match).
    fn value(
        &self,
        r: &Ref,
        ty: &DataType,
        part: &Partition,
        last: Option<&Arc<Binding>>,
        current: Option<(&Current, u16)>,
    ) -> Result<ScalarValue> {
        let column_value = |batch: &RecordBatch, row: usize| -> Result<ScalarValue> {
            match r.column {
                Some(c) => Ok(ScalarValue::try_from_array(batch.column(c), row)?),
                None => Ok(ScalarValue::Null),
            }
        };
        let stored = |seq: u64| -> Result<ScalarValue> {
            let s = part.row(seq)?;
            column_value(&s.batch, s.row as usize)
        };
        let wanted = |v: u16| r.var.is_none_or(|rv| self.member(rv, v));
        // The current row counts as the newest row of its variable (DEFINE's running view).
        let current = current.filter(|(_, v)| wanted(*v));
        // The mapped rows, newest first.
        let chain = || std::iter::successors(last, |b| b.prev.as_ref()).filter(|b| wanted(b.var));
        let navigates = r.offset > 0 || r.shift != 0;
        let values = match r.kind {
            // FIRST(x, n) / LAST(x, n), maybe moved by PREV/NEXT: index the rows so far.
            RefKind::First | RefKind::Last if navigates => {
                let mut rows: Vec<(Option<u64>, bool)> =
                    std::iter::successors(last, |b| b.prev.as_ref())
                        .map(|b| (Some(b.seq), wanted(b.var)))
                        .collect();
                rows.reverse();
                if current.is_some() {
                    rows.push((None, true));
                }
                let of_var: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].1).collect();
                let off = r.offset as usize;
                let pick = match r.kind {
                    RefKind::First => of_var.get(off).copied(),
                    _ => (of_var.len().checked_sub(off + 1)).map(|i| of_var[i]),
                };
                let target = pick
                    .and_then(|i| i.checked_add_signed(r.shift as isize))
                    .filter(|&i| i < rows.len());
                match (target.map(|i| rows[i].0), current) {
                    (Some(Some(seq)), _) => vec![stored(seq)?],
                    (Some(None), Some((cur, _))) => vec![column_value(cur.batch, cur.row)?],
                    _ => vec![],
                }
            }
            RefKind::MatchNumber => vec![ScalarValue::Int64(Some(part.matches as i64 + 1))],
            RefKind::Classifier => {
                let var = match current {
                    Some((_, v)) => Some(v),
                    None => chain().next().map(|b| b.var),
                };
                return Ok(ScalarValue::Utf8(
                    var.map(|v| self.spec.variables[v as usize].name.clone()),
                ));
            }
            RefKind::Prev(n) => {
                let n = n as usize;
                match part.recent.len().checked_sub(n) {
                    Some(i) if n > 0 => {
                        let s = &part.recent[i];
                        vec![column_value(&s.batch, s.row as usize)?]
                    }
                    _ => vec![],
                }
            }
            // Only the newest row is needed: no walk past it.
            RefKind::Last => match (current, chain().next()) {
                (Some((cur, _)), _) => vec![column_value(cur.batch, cur.row)?],
                (None, Some(b)) => vec![stored(b.seq)?],
                (None, None) => vec![],
            },
            RefKind::First => match chain().last() {
                Some(b) => vec![stored(b.seq)?],
                None => match current {
                    Some((cur, _)) => vec![column_value(cur.batch, cur.row)?],
                    None => vec![],
                },
            },
            _ => {
                // Aggregates do not depend on order.
                let mut values = chain().map(|b| stored(b.seq)).collect::<Result<Vec<_>>>()?;
                if let Some((cur, _)) = current {
                    values.push(column_value(cur.batch, cur.row)?);
                }
                values
            }
        };
        r.compute(&values, ty)
    }

    /// Emits the partition's matches that are final, in start order, applying AFTER MATCH
    /// SKIP after each; then forgets rows no thread maps any more.
    fn resolve(&self, part: &mut Partition, found: &mut Vec<Found>) -> Result<()> {
        let unmatched_rows = matches!(
            self.spec.rows_per_match,
            RowsPerMatch::All(EmptyMatches::WithUnmatched)
        );
        while part
            .threads
            .first()
            .is_some_and(|t| t.timed_out || self.program.inst(t.pc) == Inst::Match)
        {
            let t = part.threads.remove(0);
            if unmatched_rows {
                self.decide(part, t.start, found)?;
            }
            let bindings = t.bindings();
            if t.timed_out {
                self.emit_timeout(part, &t, &bindings, found)?;
                continue;
            }
            self.emit_match(part, &t, &bindings, found)?;
            part.matches += 1;
            let last = bindings.last().map_or(t.start, |b| b.seq);
            part.covered = part.covered.max(last + 1);
            let of = |set: u16, first: bool| {
                let mut rows = bindings
                    .iter()
                    .filter(|b| self.member(set, b.var))
                    .map(|b| b.seq);
                if first {
                    rows.next()
                } else {
                    rows.next_back()
                }
            };
            let next = match self.spec.after_match {
                _ if bindings.is_empty() => t.start + 1,
                AfterMatch::PastLastRow => last + 1,
                AfterMatch::ToNextRow => t.start + 1,
                AfterMatch::ToFirst(v) | AfterMatch::ToLast(v) => {
                    let first = matches!(self.spec.after_match, AfterMatch::ToFirst(_));
                    let how = if first { "FIRST" } else { "LAST" };
                    let name = self.var_name(v);
                    let Some(target) = of(v, first) else {
                        return Err(Error::invalid_input(
                            SKIP_ERROR,
                            format!(
                                "AFTER MATCH SKIP TO {how} {name} failed: \"{name}\" maps no row \
                                 of match {}; make it mandatory in PATTERN or skip PAST LAST ROW",
                                part.matches
                            ),
                        ));
                    };
                    if target == t.start {
                        return Err(Error::invalid_input(
                            SKIP_ERROR,
                            format!(
                                "AFTER MATCH SKIP TO {how} {name} failed: it would resume at the \
                                 first row of match {}, which would find it again; skip TO NEXT \
                                 ROW or to a later variable",
                                part.matches
                            ),
                        ));
                    }
                    target
                }
            };
            part.next_start = part.next_start.max(next);
            let next_start = part.next_start;
            part.threads.retain(|t| t.start >= next_start);
        }
        if unmatched_rows {
            let until = part.threads.first().map_or(u64::MAX, |t| t.start);
            self.decide(part, until, found)?;
        }
        match part.threads.first() {
            Some(t) => {
                let oldest = t.start;
                while part.rows.front().is_some_and(|r| r.seq < oldest) {
                    part.rows.pop_front();
                }
            }
            None => part.rows.clear(),
        }
        Ok(())
    }

    /// `WITH UNMATCHED ROWS`: the rows before `until` are decided (no open attempt can map
    /// them any more); those in no match are returned with NULL measures.
    fn decide(&self, part: &mut Partition, until: u64, found: &mut Vec<Found>) -> Result<()> {
        while part.undecided.front().is_some_and(|r| r.seq < until) {
            let Some(row) = part.undecided.pop_front() else {
                break;
            };
            if row.seq >= part.covered {
                let refs = (self.spec.measures.schema.fields().iter())
                    .map(|f| ScalarValue::try_from(f.data_type()))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                found.push(Found {
                    refs,
                    row: Some(row),
                    matched: false,
                    timed_out: false,
                });
            }
        }
        Ok(())
    }

    /// The output rows of one match: one summary row, or each of its rows (without the
    /// excluded ones) with RUNNING measures over the rows up to it and FINAL measures over
    /// all its rows; an empty match returns the row it was found at (unless omitted).
    fn emit_match(
        &self,
        part: &Partition,
        t: &Thread,
        bindings: &[&Arc<Binding>],
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let measures = &self.spec.measures;
        let refs_at = |last: Option<&Arc<Binding>>| -> Result<Vec<ScalarValue>> {
            (measures.refs.iter().enumerate())
                .map(|(j, r)| {
                    let ty = measures.schema.field(j).data_type();
                    let at = if r.is_final { t.last.as_ref() } else { last };
                    self.value(r, ty, part, at, None)
                })
                .collect()
        };
        match self.spec.rows_per_match {
            // The row gives the partition columns: the last row, or where an empty match was.
            RowsPerMatch::One => found.push(Found {
                refs: refs_at(t.last.as_ref())?,
                row: Some(
                    part.row(bindings.last().map_or(t.start, |b| b.seq))?
                        .clone(),
                ),
                matched: true,
                timed_out: false,
            }),
            RowsPerMatch::All(mode) if bindings.is_empty() => {
                if mode != EmptyMatches::Omit {
                    found.push(Found {
                        refs: refs_at(None)?,
                        row: Some(part.row(t.start)?.clone()),
                        matched: true,
                        timed_out: false,
                    });
                }
            }
            RowsPerMatch::All(_) => {
                // RUNNING references are kept up to date row by row (one pass over the
                // match, not one per returned row); FINAL ones are computed once.
                let mut running: Vec<Option<Running>> =
                    measures.refs.iter().map(Running::new).collect();
                let finals = (measures.refs.iter().enumerate())
                    .map(|(j, r)| {
                        let ty = measures.schema.field(j).data_type();
                        r.is_final
                            .then(|| self.value(r, ty, part, t.last.as_ref(), None))
                            .transpose()
                    })
                    .collect::<Result<Vec<_>>>()?;
                for &b in bindings {
                    let row = part.row(b.seq)?;
                    for (j, (r, acc)) in measures.refs.iter().zip(&mut running).enumerate() {
                        if let Some(acc) = acc {
                            if r.var.is_none_or(|set| self.member(set, b.var)) {
                                let v = match r.column {
                                    Some(c) => ScalarValue::try_from_array(
                                        row.batch.column(c),
                                        row.row as usize,
                                    )?,
                                    None => ScalarValue::Null,
                                };
                                acc.push(r, measures.schema.field(j).data_type(), v, b.var)?;
                            }
                        }
                    }
                    if b.excluded {
                        continue;
                    }
                    let mut refs = Vec::with_capacity(measures.refs.len());
                    for (j, r) in measures.refs.iter().enumerate() {
                        let ty = measures.schema.field(j).data_type();
                        refs.push(match (&finals[j], &running[j]) {
                            (Some(v), _) => v.clone(),
                            (None, Some(acc)) => acc.value(r, ty, self, part)?,
                            (None, None) => self.value(r, ty, part, Some(b), None)?,
                        });
                    }
                    found.push(Found {
                        refs,
                        row: Some(row.clone()),
                        matched: true,
                        timed_out: false,
                    });
                }
            }
        }
        Ok(())
    }

    /// Ends the threads that `keep` refuses (WITHIN has passed, or the input ended). With
    /// `EMIT TIMEOUT`, an attempt that loses all its threads this way after mapping a row
    /// leaves its most preferred thread behind, marked timed out: [`Matcher::resolve`]
    /// returns it in start order (unless a match before it skips past it).
    fn drop_threads(
        &self,
        part: &mut Partition,
        keep: impl Fn(&Thread) -> bool,
        _found: &mut Vec<Found>,
    ) -> Result<()> {
        if self.spec.emit_timeout {
            let mut i = 0;
            while i < part.threads.len() {
                let start = part.threads[i].start;
                let end = i + part.threads[i..]
                    .iter()
                    .take_while(|t| t.start == start)
                    .count();
                let attempt = &part.threads[i..end];
                if !attempt[0].timed_out
                    && attempt[0].mapped > 0
                    && attempt.iter().all(|t| !keep(t))
                {
                    part.threads[i].timed_out = true;
                }
                i = end;
            }
        }
        part.threads.retain(|t| t.timed_out || keep(t));
        Ok(())
    }

    /// The rows of a timed-out partial match: as a match's, with `timed_out` set and no
    /// match number.
    fn emit_timeout(
        &self,
        part: &Partition,
        t: &Thread,
        bindings: &[&Arc<Binding>],
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let first = found.len();
        self.emit_match(part, t, bindings, found)?;
        let numbers: Vec<usize> = (self.spec.measures.refs.iter().enumerate())
            .filter(|(_, r)| r.kind == RefKind::MatchNumber)
            .map(|(j, _)| j)
            .collect();
        for f in &mut found[first..] {
            f.timed_out = true;
            for &j in &numbers {
                f.refs[j] = ScalarValue::Int64(None);
            }
        }
        Ok(())
    }

    /// Whether variable `v` is `set` or in subset `set`.
    fn member(&self, set: u16, v: u16) -> bool {
        let n = self.spec.variables.len();
        match (set as usize).checked_sub(n) {
            None => set == v,
            Some(i) => self.spec.subsets.get(i).is_some_and(|s| s.1.contains(&v)),
        }
    }

    /// The name of a variable or subset.
    fn var_name(&self, set: u16) -> &str {
        let n = self.spec.variables.len();
        match (set as usize).checked_sub(n) {
            None => &self.spec.variables[set as usize].name,
            Some(i) => self.spec.subsets.get(i).map_or("?", |s| s.0.as_str()),
        }
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
        if let Some(ready) = self.order.release(watermark)? {
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
