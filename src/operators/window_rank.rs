//! Window Top-N: `ROW_NUMBER() OVER (PARTITION BY window_start, window_end [, keys] ORDER BY
//! ...)` over a windowed aggregate's results, usually followed by `WHERE rn <= n` (as in
//! Flink). A window's results all arrive before the watermark that closed it reaches this
//! operator, so they wait here until `on_watermark`, are numbered per partition in the order
//! asked (ties in arrival order, which is the window's group order), and come out with the
//! number as a last column. `RANK()` and `DENSE_RANK()` number the same way, except that rows
//! tying in the ORDER BY share a number. With a known `n`, rows numbered past it are not emitted.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array, UInt64Array};
use datafusion::arrow::compute::{cast, concat_batches, take_record_batch, SortOptions};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_plan::PhysicalExpr;

use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::Watermark;

/// How rows are numbered within a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Numbering {
    /// `ROW_NUMBER()`: 1, 2, 3, ... (ties in arrival order).
    #[default]
    RowNumber,
    /// `RANK()`: rows that tie in the ORDER BY share a number; the next row's number is its
    /// position (1, 1, 3).
    Rank,
    /// `DENSE_RANK()`: rows that tie share a number; the next number follows (1, 1, 2).
    DenseRank,
}

impl Numbering {
    /// The numbering a window function of this name computes, if it is one.
    pub fn of_function(name: &str) -> Option<Numbering> {
        match name.to_ascii_lowercase().as_str() {
            "row_number" => Some(Numbering::RowNumber),
            "rank" => Some(Numbering::Rank),
            "dense_rank" => Some(Numbering::DenseRank),
            _ => None,
        }
    }

    /// The number of a row: `seen` is its 1-based position in its partition, `previous` the
    /// number of the row before it in the partition (if any) and `tie` whether that row has
    /// the same ORDER BY values.
    fn number(self, seen: u64, previous: Option<u64>, tie: bool) -> u64 {
        match (self, previous) {
            (_, None) => 1,
            (Numbering::RowNumber, Some(_)) => seen,
            (Numbering::Rank, Some(p)) => {
                if tie {
                    p
                } else {
                    seen
                }
            }
            (Numbering::DenseRank, Some(p)) => {
                if tie {
                    p
                } else {
                    p + 1
                }
            }
        }
    }
}

/// Numbers each window's rows per partition.
pub struct WindowRank {
    partition: Vec<Arc<dyn PhysicalExpr>>,
    order: Vec<(Arc<dyn PhysicalExpr>, SortOptions)>,
    /// The input column (window_end or window_start) that says when a row's window closed.
    time_column: usize,
    /// Emit only rows numbered up to this.
    limit: Option<u64>,
    numbering: Numbering,
    /// Rows waiting for the watermark.
    pending: Vec<RecordBatch>,
    input: SchemaRef,
    schema: SchemaRef,
}

impl WindowRank {
    /// Numbers rows of `input` per value of `partition`, in `order`; emits `schema` (the input
    /// columns, then the number).
    pub fn try_new(
        partition: Vec<Arc<dyn PhysicalExpr>>,
        order: Vec<(Arc<dyn PhysicalExpr>, SortOptions)>,
        time_column: usize,
        limit: Option<u64>,
        input: SchemaRef,
        schema: SchemaRef,
    ) -> Result<Self> {
        if schema.fields().len() != input.fields().len() + 1 || time_column >= input.fields().len()
        {
            return Err(Error::Internal("window Top-N schema mismatch".into()));
        }
        Ok(WindowRank {
            partition,
            order,
            time_column,
            limit,
            numbering: Numbering::RowNumber,
            pending: Vec::new(),
            input,
            schema,
        })
    }

    /// Numbers rows as `numbering` says (ROW_NUMBER by default).
    pub fn with_numbering(mut self, numbering: Numbering) -> Self {
        self.numbering = numbering;
        self
    }

    /// The rows of `batch` in output order with their numbers.
    fn rank(&self, batch: &RecordBatch) -> Result<Option<RecordBatch>> {
        let n = batch.num_rows();
        let eval = |e: &Arc<dyn PhysicalExpr>| e.evaluate(batch).and_then(|v| v.into_array(n));
        let parts = self
            .partition
            .iter()
            .map(eval)
            .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
        let part_rows = RowConverter::new(
            parts
                .iter()
                .map(|a| SortField::new(a.data_type().clone()))
                .collect(),
        )?
        .convert_columns(&parts)?;
        let keys = self
            .order
            .iter()
            .map(|(e, _)| eval(e))
            .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
        let order_rows = RowConverter::new(
            keys.iter()
                .zip(&self.order)
                .map(|(a, (_, o))| SortField::new_with_options(a.data_type().clone(), *o))
                .collect(),
        )?
        .convert_columns(&keys)?;
        // Partitions in order of their first row; within one, by the ORDER BY, then arrival.
        let mut first_seen: std::collections::HashMap<&[u8], usize> = Default::default();
        let partition_of: Vec<usize> = (0..n)
            .map(|i| {
                let next = first_seen.len();
                *first_seen.entry(part_rows.row(i).data()).or_insert(next)
            })
            .collect();
        let mut rows: Vec<usize> = (0..n).collect();
        rows.sort_by(|&a, &b| {
            (partition_of[a], order_rows.row(a), a).cmp(&(partition_of[b], order_rows.row(b), b))
        });
        let (mut picked, mut numbers) = (Vec::new(), Vec::new());
        let (mut number, mut seen) = (0u64, 0u64);
        for (k, &i) in rows.iter().enumerate() {
            let same = k > 0 && partition_of[rows[k - 1]] == partition_of[i];
            let tie = same && order_rows.row(rows[k - 1]) == order_rows.row(i);
            seen = if same { seen + 1 } else { 1 };
            number = self.numbering.number(seen, same.then_some(number), tie);
            if self.limit.is_none_or(|l| number <= l) {
                picked.push(i as u32);
                numbers.push(number);
            }
        }
        if picked.is_empty() {
            return Ok(None);
        }
        let out = take_record_batch(batch, &UInt32Array::from(picked))?;
        let numbers: ArrayRef = Arc::new(UInt64Array::from(numbers));
        let ty = self
            .schema
            .field(self.schema.fields().len() - 1)
            .data_type();
        let mut columns = out.columns().to_vec();
        columns.push(cast(&numbers, ty)?);
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }
}

impl Operator for WindowRank {
    fn name(&self) -> &'static str {
        "WindowTopN"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        if batch.num_rows() > 0 {
            self.pending.push(batch);
        }
        Ok(vec![])
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        if self.pending.is_empty() {
            return Ok(vec![]);
        }
        let all = concat_batches(&self.input, &self.pending)?;
        self.pending.clear();
        let times = cast(all.column(self.time_column), &DataType::Int64)?;
        let times = times.as_primitive::<Int64Type>();
        let wm = watermark.0.nanos();
        let (done, wait): (Vec<u32>, Vec<u32>) = (0..all.num_rows() as u32)
            .partition(|&i| times.is_null(i as usize) || times.value(i as usize) <= wm);
        if !wait.is_empty() {
            self.pending
                .push(take_record_batch(&all, &UInt32Array::from(wait))?);
        }
        // Windows come out in the order they closed: by time, then as they arrived.
        let mut done = done;
        done.sort_by_key(|&i| (times.value(i as usize), i));
        let mut out = Vec::new();
        let mut start = 0;
        while start < done.len() {
            let t = times.value(done[start] as usize);
            let end = start
                + done[start..]
                    .iter()
                    .take_while(|&&i| times.value(i as usize) == t)
                    .count();
            let window = take_record_batch(&all, &UInt32Array::from(done[start..end].to_vec()))?;
            out.extend(self.rank(&window)?);
            start = end;
        }
        Ok(out)
    }

    /// The rows still waiting (none between a watermark and the next batch, in practice).
    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        let pending = concat_batches(&self.input, &self.pending)?;
        let schema = self.input.clone();
        Ok(snapshot::StateImage::later(move || {
            snapshot::encode(&[], &schema, &[pending])
        }))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let (_, batches) = snapshot::decode(bytes)?;
        self.pending = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::time::EventTime;

    fn input() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, true),
            Field::new(
                "window_end",
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                false,
            ),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    fn op(limit: Option<u64>, nulls_first: bool) -> WindowRank {
        let input = input();
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("rn", DataType::UInt64, false));
        let order = SortOptions {
            descending: true,
            nulls_first,
        };
        WindowRank::try_new(
            vec![col("window_end", &input).unwrap()],
            vec![(col("n", &input).unwrap(), order)],
            1,
            limit,
            input,
            Arc::new(Schema::new(fields)),
        )
        .unwrap()
    }

    fn batch(rows: &[(&str, i64, Option<i64>)]) -> RecordBatch {
        RecordBatch::try_new(
            input(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    rows.iter().map(|r| r.1),
                )),
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    }

    fn shown(out: &[RecordBatch]) -> Vec<String> {
        let mut lines = Vec::new();
        for b in out {
            let hosts = b.column(0).as_string::<i32>();
            let ends = cast(b.column(1), &DataType::Int64).unwrap();
            let ends = ends.as_primitive::<Int64Type>();
            let rn = b
                .column(3)
                .as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
            for r in 0..b.num_rows() {
                lines.push(format!(
                    "{}@{}#{}",
                    hosts.value(r),
                    ends.value(r),
                    rn.value(r)
                ));
            }
        }
        lines
    }

    #[test]
    fn numbers_each_window_by_the_order_with_ties_in_arrival_order() {
        let mut r = op(Some(2), false);
        // Window 10 arrives in two batches; window 20 after it; ties keep arrival order.
        r.process_batch(batch(&[("a", 10, Some(1)), ("b", 10, Some(5))]))
            .unwrap();
        r.process_batch(batch(&[
            ("c", 10, Some(5)),
            ("d", 20, None),
            ("e", 20, Some(2)),
        ]))
        .unwrap();
        assert!(r.on_watermark(Watermark(EventTime(5))).unwrap().is_empty());
        let out = r.on_watermark(Watermark(EventTime(10))).unwrap();
        assert_eq!(shown(&out), vec!["b@10#1", "c@10#2"]);
        // Restored mid-way, window 20 is still there; NULL sorts last.
        let bytes = r.snapshot().unwrap().encode().unwrap();
        let mut again = op(Some(2), false);
        again.restore(&bytes).unwrap();
        let out = again.on_watermark(Watermark(EventTime(20))).unwrap();
        assert_eq!(shown(&out), vec!["e@20#1", "d@20#2"]);
        // Without a limit every row is numbered; NULLS FIRST puts d first.
        let mut all = op(None, true);
        all.process_batch(batch(&[
            ("d", 20, None),
            ("e", 20, Some(2)),
            ("f", 20, Some(9)),
        ]))
        .unwrap();
        let out = all.on_watermark(Watermark(EventTime(20))).unwrap();
        assert_eq!(shown(&out), vec!["d@20#1", "f@20#2", "e@20#3"]);
    }
}
