//! The interval join of two streams: `FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts + lower
//! AND l.ts + upper` (inner; LEFT, RIGHT or FULL with NULLs for a row that matched nothing,
//! once no row of the other side can match it any more), and the anti join for absence (`NOT EXISTS (SELECT ... FROM r WHERE ... AND r.ts BETWEEN ...)`:
//! a left row with no match, once the watermark closes its interval).
//!
//! Its input is the merge of both streams ([`crate::operators::union`]): rows of either side
//! in one schema (`__time`, `__side`, the left's columns, the right's), in event-time order.
//! Each row is matched against the other side's rows kept so far (a pair is found when the
//! later of its two rows arrives, so each pair once), then kept while a later row of the
//! other side could still match it: a left row until `time + upper` has passed, a right row
//! until `time - lower` has. A row's end (its NULL row, or its absence) is emitted before any
//! row later than that end and once the watermark passes it, so the output does not depend
//! on how the input was batched. State is bounded by the watermark.
//!
//! A window join is this join over windows' rows or results, each timed at its window's last
//! instant, with `lower = upper = 0` and the window's bounds in the key: a window's rows of
//! both sides meet, and end, when the watermark passes the window's end.

use std::collections::{HashMap, VecDeque};

use ahash::AHashMap;
use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, AsArray};
use datafusion::arrow::compute::interleave;
use datafusion::arrow::datatypes::{Int8Type, SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::physical_plan::PhysicalExpr;

use super::snapshot::{decode, encode, StateImage};
use super::Operator;
use crate::error::{Error, Result};
use crate::time::Watermark;

/// What an interval join emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntervalKind {
    /// Each matching pair.
    Inner,
    /// Each matching pair, and each left row that matched nothing, with NULLs.
    Left,
    /// Each matching pair, and each right row that matched nothing, with NULLs.
    Right,
    /// Each matching pair, and each row of either side that matched nothing, with NULLs.
    Full,
    /// Each left row that matched nothing (`NOT EXISTS`).
    Anti,
}

/// Where each side's columns are in the merged input, and how to read a side's key.
#[derive(Debug, Clone)]
pub struct JoinSide {
    /// The side's own columns (all nullable), as they sit in the input from `start` on.
    pub schema: SchemaRef,
    /// Its first column in the input.
    pub start: usize,
    /// The key, over the side's own columns.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
}

/// A row (the batch it came in, shared by its rows, and its index there).
type RowRef = (Arc<RecordBatch>, usize);

/// A kept row: its time, key (None: a NULL in it, matching nothing), where it is, and
/// whether it matched.
struct Kept {
    time: i64,
    key: Option<OwnedRow>,
    row: RowRef,
    matched: bool,
    /// The bytes it is counted as holding (its batch's share).
    bytes: usize,
}

/// One side's kept rows in arrival (event-time) order, numbered from `first` on, with an
/// index from each key to the numbers of its rows (ascending), so a row meets only the
/// other side's rows of its key.
#[derive(Default)]
struct Kepts {
    rows: VecDeque<Kept>,
    /// The number of `rows[0]`.
    first: u64,
    by_key: AHashMap<OwnedRow, VecDeque<u64>>,
    /// The estimated bytes of the rows kept.
    bytes: usize,
}

impl Kepts {
    fn push(&mut self, kept: Kept) {
        let number = self.first + self.rows.len() as u64;
        if let Some(key) = &kept.key {
            match self.by_key.get_mut(key) {
                Some(numbers) => numbers.push_back(number),
                None => {
                    self.by_key.insert(key.clone(), VecDeque::from([number]));
                }
            }
        }
        self.bytes += kept.bytes;
        self.rows.push_back(kept);
    }

    fn pop_front(&mut self) -> Option<Kept> {
        let kept = self.rows.pop_front()?;
        if let Some(key) = &kept.key {
            if let Some(numbers) = self.by_key.get_mut(key) {
                numbers.pop_front();
                if numbers.is_empty() {
                    self.by_key.remove(key);
                }
            }
        }
        self.first += 1;
        self.bytes = self.bytes.saturating_sub(kept.bytes);
        Some(kept)
    }
}

/// A left row and the right row it matched; None on one side for the other's unmatched end.
type Found = (Option<RowRef>, Option<RowRef>);

/// See the module docs.
pub struct IntervalJoin {
    kind: IntervalKind,
    input: SchemaRef,
    schema: SchemaRef,
    sides: [JoinSide; 2],
    /// `right.time - left.time` must lie in `lower..=upper`.
    lower: i64,
    upper: i64,
    converter: RowConverter,
    kept: [Kepts; 2],
    /// Pairs (left, right) found, and rows ended unmatched, not yet emitted.
    out: Vec<Found>,
    /// A row of NULLs in the input's columns, for the missing side of an unmatched end.
    null_row: Arc<RecordBatch>,
}

const TIME: usize = 0;
const SIDE: usize = 1;

/// The bytes one row of `batch` is counted as holding (its batch's share).
fn bytes_per_row(batch: &RecordBatch) -> usize {
    batch.get_array_memory_size() / batch.num_rows().max(1)
}

impl IntervalJoin {
    /// A join of the merged `input` into rows of `schema` (the left's columns, then the
    /// right's; the left's only for an anti join).
    pub fn try_new(
        kind: IntervalKind,
        input: SchemaRef,
        sides: [JoinSide; 2],
        lower: i64,
        upper: i64,
        schema: SchemaRef,
    ) -> Result<Self> {
        if lower > upper || sides[0].keys.len() != sides[1].keys.len() {
            return Err(Error::Internal("an interval join without a bound".into()));
        }
        let fields = sides[0]
            .keys
            .iter()
            .map(|k| Ok(SortField::new(k.data_type(&sides[0].schema)?)))
            .collect::<Result<Vec<_>>>()?;
        let null_row = Arc::new(RecordBatch::try_new(
            input.clone(),
            input
                .fields()
                .iter()
                .map(|f| new_null_array(f.data_type(), 1))
                .collect(),
        )?);
        Ok(IntervalJoin {
            kind,
            input,
            schema,
            sides,
            lower,
            upper,
            converter: RowConverter::new(fields)?,
            kept: [Kepts::default(), Kepts::default()],
            out: Vec::new(),
            null_row,
        })
    }

    /// The side's own columns of `batch`.
    fn side_columns(&self, side: usize, batch: &RecordBatch) -> Result<RecordBatch> {
        let s = &self.sides[side];
        let n = s.schema.fields().len();
        Ok(RecordBatch::try_new(
            s.schema.clone(),
            batch.columns()[s.start..s.start + n].to_vec(),
        )?)
    }

    /// Each row's key for its side (None where it holds a NULL).
    fn keys(&self, batch: &RecordBatch, sides: &[i8]) -> Result<Vec<Option<OwnedRow>>> {
        let mut out: Vec<Option<OwnedRow>> = vec![None; batch.num_rows()];
        for side in 0..2 {
            if !sides.iter().any(|&s| s as usize == side) {
                continue;
            }
            let own = self.side_columns(side, batch)?;
            let cols: Vec<ArrayRef> = self.sides[side]
                .keys
                .iter()
                .map(|k| k.evaluate(&own)?.into_array(own.num_rows()))
                .collect::<std::result::Result<_, _>>()?;
            let rows = self.converter.convert_columns(&cols)?;
            for (i, slot) in out.iter_mut().enumerate() {
                if sides[i] as usize == side && cols.iter().all(|c| c.is_valid(i)) {
                    *slot = Some(rows.row(i).owned());
                }
            }
        }
        Ok(out)
    }

    /// Whether a row of `side` that matched nothing is emitted when it ends.
    fn ends_unmatched(&self, side: usize) -> bool {
        matches!(
            (self.kind, side),
            (IntervalKind::Left | IntervalKind::Anti, 0)
                | (IntervalKind::Right, 1)
                | (IntervalKind::Full, _)
        )
    }

    /// Ends the kept rows no row at or after `time` can match: a row that matched nothing
    /// is emitted if its side's rows are (LEFT, RIGHT, FULL: with NULLs; anti: alone).
    /// Rows end in the order of their ends (a left row's `time + upper`, a right row's
    /// `time - lower`; left first on a tie), so that which watermarks came between does not
    /// change the order of the output.
    fn expire(&mut self, time: i64) {
        loop {
            let end = |side: usize, k: &Kept| match side {
                0 => k.time.saturating_add(self.upper),
                _ => k.time.saturating_sub(self.lower),
            };
            let ends: [Option<i64>; 2] = [0, 1].map(|s| {
                self.kept[s]
                    .rows
                    .front()
                    .map(|k| end(s, k))
                    .filter(|&e| e < time)
            });
            let side = match (ends[0], ends[1]) {
                (Some(l), Some(r)) => usize::from(r < l),
                (Some(_), None) => 0,
                (None, Some(_)) => 1,
                (None, None) => break,
            };
            let Some(k) = self.kept[side].pop_front() else {
                break;
            };
            if !k.matched && self.ends_unmatched(side) {
                let row = Some(k.row);
                self.out.push(match side {
                    0 => (row, None),
                    _ => (None, row),
                });
            }
        }
    }

    /// Matches `row` (of side `side`, at `time`, with `key`) against the other side's kept
    /// rows of the same key.
    fn probe(&mut self, side: usize, time: i64, key: &Option<OwnedRow>, row: &RowRef) -> bool {
        let Some(key) = key else {
            return false;
        };
        // The other side's times that match: right - left in lower..=upper.
        let (from, to) = match side {
            0 => (
                time.saturating_add(self.lower),
                time.saturating_add(self.upper),
            ),
            _ => (
                time.saturating_sub(self.upper),
                time.saturating_sub(self.lower),
            ),
        };
        let other = &mut self.kept[1 - side];
        let Some(numbers) = other.by_key.get(key) else {
            return false;
        };
        let first = other.first;
        let start = numbers.partition_point(|&n| other.rows[(n - first) as usize].time < from);
        let mut matched = false;
        for &n in numbers.range(start..) {
            let k = &mut other.rows[(n - first) as usize];
            if k.time > to {
                break;
            }
            matched = true;
            k.matched = true;
            if self.kind != IntervalKind::Anti {
                let (this, that) = (Some(row.clone()), Some(k.row.clone()));
                self.out.push(match side {
                    0 => (this, that),
                    _ => (that, this),
                });
            }
        }
        matched
    }

    /// Gathers `rows` (None: a row of NULLs) into one batch of the input's columns.
    fn gather<'a>(&self, rows: impl Iterator<Item = Option<&'a RowRef>>) -> Result<RecordBatch> {
        let mut sources: Vec<&RecordBatch> = vec![&self.null_row];
        let mut seen: HashMap<*const RecordBatch, usize> = HashMap::new();
        let picks: Vec<(usize, usize)> = rows
            .map(|r| match r {
                None => (0, 0),
                Some((batch, row)) => {
                    let at = *seen.entry(Arc::as_ptr(batch)).or_insert_with(|| {
                        sources.push(batch);
                        sources.len() - 1
                    });
                    (at, *row)
                }
            })
            .collect();
        let columns = (0..self.input.fields().len())
            .map(|c| {
                let arrays: Vec<&dyn Array> =
                    sources.iter().map(|b| b.column(c).as_ref()).collect();
                interleave(&arrays, &picks)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(self.input.clone(), columns)?)
    }

    /// The rows found so far, as output rows.
    fn flush(&mut self) -> Result<Vec<RecordBatch>> {
        if self.out.is_empty() {
            return Ok(vec![]);
        }
        let found = std::mem::take(&mut self.out);
        let left = self.side_columns(0, &self.gather(found.iter().map(|f| f.0.as_ref()))?)?;
        let mut columns = left.columns().to_vec();
        if self.kind != IntervalKind::Anti {
            let right = self.side_columns(1, &self.gather(found.iter().map(|f| f.1.as_ref()))?)?;
            columns.extend(right.columns().iter().cloned());
        }
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }

    /// Keeps the rows of `batch` (times and keys given) as they arrive.
    fn take_rows(&mut self, batch: &RecordBatch, restoring: Option<&[bool]>) -> Result<()> {
        let times = batch.column(TIME).as_primitive::<TimestampNanosecondType>();
        let sides: Vec<i8> = batch
            .column(SIDE)
            .as_primitive::<Int8Type>()
            .iter()
            .map(|s| s.unwrap_or(0))
            .collect();
        let keys = self.keys(batch, &sides)?;
        let shared = Arc::new(batch.clone());
        let bytes = bytes_per_row(batch);
        for (i, key) in keys.into_iter().enumerate() {
            if times.is_null(i) {
                continue;
            }
            let time = times.value(i);
            let side = sides[i] as usize;
            let row = (shared.clone(), i);
            let matched = match restoring {
                Some(flags) => flags[i],
                None => {
                    self.expire(time);
                    self.probe(side, time, &key, &row)
                }
            };
            self.kept[side].push(Kept {
                time,
                key,
                row,
                matched,
                bytes,
            });
        }
        Ok(())
    }
}

impl Operator for IntervalJoin {
    fn name(&self) -> &'static str {
        "IntervalJoin"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        self.take_rows(&batch, None)?;
        self.flush()
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        self.expire(watermark.0 .0);
        self.flush()
    }

    fn snapshot(&mut self) -> Result<StateImage> {
        let kept = || self.kept.iter().flat_map(|k| k.rows.iter());
        let header: Vec<i64> = kept().map(|k| k.matched as i64).collect();
        let batch = self.gather(kept().map(|k| Some(&k.row)))?;
        let schema = self.input.clone();
        Ok(StateImage::later(move || {
            encode(&header, &schema, &[batch])
        }))
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let (flags, batches) = decode(snapshot)?;
        self.kept = [Kepts::default(), Kepts::default()];
        self.out.clear();
        let flags: Vec<bool> = flags.iter().map(|&f| f != 0).collect();
        let mut at = 0;
        for b in batches {
            if b.schema().fields() != self.input.fields() || at + b.num_rows() > flags.len() {
                return Err(Error::Internal("corrupt interval join snapshot".into()));
            }
            self.take_rows(&b, Some(&flags[at..at + b.num_rows()]))?;
            at += b.num_rows();
        }
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        self.kept.iter().map(|k| k.bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, Int8Array, TimestampNanosecondArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use datafusion::physical_expr::expressions::Column;

    fn ts() -> DataType {
        DataType::Timestamp(TimeUnit::Nanosecond, None)
    }

    /// `__time`, `__side`, left (t, k), right (t, k).
    fn input() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("__time", ts(), true),
            Field::new("__side", DataType::Int8, true),
            Field::new("left.t", ts(), true),
            Field::new("left.k", DataType::Int64, true),
            Field::new("right.t", ts(), true),
            Field::new("right.k", DataType::Int64, true),
        ]))
    }

    fn join(kind: IntervalKind) -> IntervalJoin {
        let side = |start| JoinSide {
            schema: Arc::new(Schema::new(vec![
                Field::new("t", ts(), true),
                Field::new("k", DataType::Int64, true),
            ])),
            start,
            keys: vec![Arc::new(Column::new("k", 1)) as Arc<dyn PhysicalExpr>],
        };
        let out = match kind {
            IntervalKind::Anti => vec![
                Field::new("t", ts(), true),
                Field::new("k", DataType::Int64, true),
            ],
            _ => input().fields()[2..]
                .iter()
                .map(|f| f.as_ref().clone())
                .collect(),
        };
        // right.t - left.t in -1..=2
        IntervalJoin::try_new(
            kind,
            input(),
            [side(2), side(4)],
            -1,
            2,
            Arc::new(Schema::new(out)),
        )
        .unwrap()
    }

    /// Rows (side, time, key), in time order as the merge gives them.
    fn rows(r: &[(i8, i64, i64)]) -> RecordBatch {
        let pick = |s: i8, v: Option<i64>| {
            r.iter()
                .map(move |x| (x.0 == s).then_some(v.unwrap_or(x.1)))
        };
        let t: Vec<Option<i64>> = r.iter().map(|x| Some(x.1)).collect();
        RecordBatch::try_new(
            input(),
            vec![
                Arc::new(TimestampNanosecondArray::from(t)),
                Arc::new(Int8Array::from_iter_values(r.iter().map(|x| x.0))),
                Arc::new(TimestampNanosecondArray::from(
                    pick(0, None).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    r.iter()
                        .map(|x| (x.0 == 0).then_some(x.2))
                        .collect::<Vec<_>>(),
                )),
                Arc::new(TimestampNanosecondArray::from(
                    pick(1, None).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    r.iter()
                        .map(|x| (x.0 == 1).then_some(x.2))
                        .collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    }

    /// Output rows as (left time, right time or -1).
    fn pairs(out: &[RecordBatch]) -> Vec<(i64, i64)> {
        out.iter()
            .flat_map(|b| {
                let l = b
                    .column(0)
                    .as_primitive::<TimestampNanosecondType>()
                    .clone();
                let r = (b.num_columns() > 2).then(|| {
                    b.column(2)
                        .as_primitive::<TimestampNanosecondType>()
                        .clone()
                });
                (0..b.num_rows())
                    .map(|i| {
                        (
                            l.value(i),
                            r.as_ref()
                                .map_or(-1, |r| if r.is_null(i) { -1 } else { r.value(i) }),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn pairs_within_the_interval_match_once_and_left_rows_end_with_the_watermark() {
        let mut j = join(IntervalKind::Left);
        // left 10 (k 1) matches right 9 and 12 of k 1; right 13 is past 10 + 2.
        let out = j
            .process_batch(rows(&[
                (1, 9, 1),
                (0, 10, 1),
                (1, 11, 2),
                (1, 12, 1),
                (0, 12, 2),
                (1, 13, 1),
            ]))
            .unwrap();
        assert_eq!(pairs(&out), vec![(10, 9), (10, 12), (12, 11)]);
        // left 20 matches nothing: its NULL row comes once the watermark passes 22.
        assert!(j.process_batch(rows(&[(0, 20, 1)])).unwrap().is_empty());
        assert!(pairs(
            &j.on_watermark(Watermark(crate::time::EventTime(22)))
                .unwrap()
        )
        .is_empty());
        let snap = j.snapshot().unwrap().encode().unwrap();
        let mut restored = join(IntervalKind::Left);
        restored.restore(&snap).unwrap();
        assert_eq!(restored.state_bytes() > 0, j.state_bytes() > 0);
        let end = restored
            .on_watermark(Watermark(crate::time::EventTime(23)))
            .unwrap();
        assert_eq!(pairs(&end), vec![(20, -1)]);
        assert_eq!(
            restored.kept[0].rows.len() + restored.kept[1].rows.len(),
            0,
            "state bounded by the watermark"
        );
    }

    /// Output rows as (left time or -1, right time or -1), for RIGHT and FULL joins.
    fn either(out: &[RecordBatch]) -> Vec<(i64, i64)> {
        out.iter()
            .flat_map(|b| {
                let l = b
                    .column(0)
                    .as_primitive::<TimestampNanosecondType>()
                    .clone();
                let r = b
                    .column(2)
                    .as_primitive::<TimestampNanosecondType>()
                    .clone();
                let t = |a: &datafusion::arrow::array::TimestampNanosecondArray, i| {
                    if a.is_null(i) {
                        -1
                    } else {
                        a.value(i)
                    }
                };
                (0..b.num_rows())
                    .map(|i| (t(&l, i), t(&r, i)))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn right_and_full_joins_end_unmatched_rows_of_their_sides_with_nulls() {
        // right 5 matches nothing (left 10 is past 5 + 1); right 11 matches left 10; right
        // 30 ends at the watermark; left 20 matches nothing.
        let input = rows(&[(1, 5, 1), (0, 10, 1), (1, 11, 1), (0, 20, 1), (1, 30, 1)]);
        let mut right = join(IntervalKind::Right);
        let mut out = right.process_batch(input.clone()).unwrap();
        out.extend(
            right
                .on_watermark(Watermark(crate::time::EventTime(100)))
                .unwrap(),
        );
        assert_eq!(either(&out), vec![(-1, 5), (10, 11), (-1, 30)]);
        let mut full = join(IntervalKind::Full);
        let mut out = full.process_batch(input.slice(0, 4)).unwrap();
        // A snapshot keeps whether each kept row matched.
        let snap = full.snapshot().unwrap().encode().unwrap();
        let mut restored = join(IntervalKind::Full);
        restored.restore(&snap).unwrap();
        out.extend(restored.process_batch(input.slice(4, 1)).unwrap());
        out.extend(
            restored
                .on_watermark(Watermark(crate::time::EventTime(100)))
                .unwrap(),
        );
        assert_eq!(either(&out), vec![(-1, 5), (10, 11), (20, -1), (-1, 30)]);
    }

    #[test]
    fn the_anti_join_emits_left_rows_that_matched_nothing() {
        let mut j = join(IntervalKind::Anti);
        let mut out = j
            .process_batch(rows(&[(0, 10, 1), (0, 10, 2), (1, 11, 1)]))
            .unwrap();
        out.extend(
            j.on_watermark(Watermark(crate::time::EventTime(100)))
                .unwrap(),
        );
        assert_eq!(pairs(&out), vec![(10, -1)]);
        assert_eq!(
            out[0]
                .column(1)
                .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                .value(0),
            2
        );
    }
}
