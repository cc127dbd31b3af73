//! A window table function without aggregation: `SELECT ts, host, window_start, window_end
//! FROM TUMBLE(...)` with no GROUP BY. Each row comes out at once, with the bounds of each
//! window that holds it (a HOP or CUMULATE row once per window, earliest start and end first).
//! Nothing waits for the watermark and nothing is late: a row behind the watermark still gets
//! its windows. A row whose event time is NULL is in no window and is dropped.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, PrimitiveArray, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::{SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;

use super::window_aggregate::{WindowAssigner, WindowedInput};
use super::Operator;
use crate::error::Result;

/// Appends `window_start` and `window_end` to each row, once per window holding it.
pub struct WindowAssign {
    assigner: WindowAssigner,
    input: WindowedInput,
}

impl WindowAssign {
    /// Rows of the stream in, rows of `input.schema` (the stream's columns, then the window
    /// bounds) out.
    pub fn new(assigner: WindowAssigner, input: WindowedInput) -> Self {
        WindowAssign { assigner, input }
    }
}

impl Operator for WindowAssign {
    fn name(&self) -> &'static str {
        "WindowAssign"
    }

    fn schema(&self) -> SchemaRef {
        self.input.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let times = self.input.times(&batch);
        let (mut rows, mut starts, mut ends) = (Vec::new(), Vec::new(), Vec::new());
        for (i, t) in times.iter().enumerate() {
            let Some(t) = t else { continue };
            self.assigner.check(t, t)?;
            for (start, end) in self.assigner.windows(t).into_iter().rev() {
                rows.push(i as u32);
                starts.push(start);
                ends.push(end);
            }
        }
        if rows.is_empty() {
            return Ok(vec![]);
        }
        let picked = take_record_batch(&batch, &UInt32Array::from(rows))?;
        let bound = |v: Vec<i64>| -> ArrayRef {
            Arc::new(
                PrimitiveArray::<TimestampNanosecondType>::from(v)
                    .with_data_type(self.input.bound_type()),
            )
        };
        let mut columns = picked.columns().to_vec();
        columns.push(bound(starts));
        columns.push(bound(ends));
        Ok(vec![RecordBatch::try_new(
            self.input.schema.clone(),
            columns,
        )?])
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{AsArray, Int64Array, TimestampNanosecondArray};
    use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};

    use super::*;

    fn input() -> WindowedInput {
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
        WindowedInput {
            schema: Arc::new(Schema::new(vec![
                Field::new("ts", ts.clone(), true),
                Field::new("v", DataType::Int64, false),
                Field::new("window_start", ts.clone(), false),
                Field::new("window_end", ts, false),
            ])),
            time_column: 0,
        }
    }

    /// (v, window_start, window_end) of each output row.
    fn run(assigner: WindowAssigner, times: &[Option<i64>]) -> Vec<(i64, i64, i64)> {
        let stream = Arc::new(Schema::new(input().schema.fields()[..2].to_vec()));
        let batch = RecordBatch::try_new(
            stream,
            vec![
                Arc::new(TimestampNanosecondArray::from(times.to_vec())),
                Arc::new(Int64Array::from_iter_values(0..times.len() as i64)),
            ],
        )
        .unwrap();
        let out = WindowAssign::new(assigner, input())
            .process_batch(batch)
            .unwrap();
        let mut rows = Vec::new();
        for b in out {
            let col = |i: usize| b.column(i).as_primitive::<Int64Type>().clone();
            let v = col(1);
            let cast = |i: usize| {
                datafusion::arrow::compute::cast(b.column(i), &DataType::Int64)
                    .unwrap()
                    .as_primitive::<Int64Type>()
                    .clone()
            };
            let (s, e) = (cast(2), cast(3));
            for r in 0..b.num_rows() {
                rows.push((v.value(r), s.value(r), e.value(r)));
            }
        }
        rows
    }

    #[test]
    fn each_row_comes_once_per_window_with_its_bounds() {
        let tumble = run(
            WindowAssigner::tumble(10),
            &[Some(3), Some(10), None, Some(-1)],
        );
        assert_eq!(tumble, vec![(0, 0, 10), (1, 10, 20), (3, -10, 0)]);
        let hop = run(WindowAssigner::hop(5, 10), &[Some(7)]);
        assert_eq!(hop, vec![(0, 0, 10), (0, 5, 15)]);
        let cumulate = run(WindowAssigner::cumulate(5, 15), &[Some(7), Some(14)]);
        assert_eq!(cumulate, vec![(0, 0, 10), (0, 0, 15), (1, 0, 15)]);
        assert!(run(WindowAssigner::tumble(10), &[None]).is_empty());
    }
}
