//! Holding rows until the watermark passes them, then handing them on in event-time order
//! (ties in arrival order), so that operators whose results depend on row order (history over
//! a stream's rows, pattern matching) see out-of-order input as if it had arrived sorted. Rows
//! that arrive behind the watermark are too late to take their place: they are counted and
//! dropped.

use datafusion::arrow::array::{AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, concat_batches, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};

use crate::error::Result;
use crate::time::Watermark;

/// Rows waiting for the watermark.
pub struct EventOrder {
    time_column: usize,
    schema: SchemaRef,
    pending: Vec<RecordBatch>,
    /// Arrow memory of `pending`.
    pending_bytes: usize,
    watermark: i64,
    late_rows: u64,
}

impl EventOrder {
    /// A buffer for rows of `schema` ordered by the (timestamp) column `time_column`.
    pub fn new(time_column: usize, schema: SchemaRef) -> Self {
        EventOrder {
            time_column,
            schema,
            pending: Vec::new(),
            pending_bytes: 0,
            watermark: i64::MIN,
            late_rows: 0,
        }
    }

    /// Each row's event time in nanoseconds (None if NULL).
    pub fn times(&self, batch: &RecordBatch) -> Result<Vec<Option<i64>>> {
        let t = cast(batch.column(self.time_column), &DataType::Int64)?;
        Ok(t.as_primitive::<Int64Type>().iter().collect())
    }

    /// Keeps the rows of `batch` that are not behind the watermark.
    pub fn push(&mut self, batch: RecordBatch) -> Result<()> {
        let times = self.times(&batch)?;
        let keep: Vec<u32> = (0..batch.num_rows() as u32)
            .filter(|&i| times[i as usize].is_some_and(|t| t >= self.watermark))
            .collect();
        self.late_rows += (batch.num_rows() - keep.len()) as u64;
        let kept = if keep.len() == batch.num_rows() {
            batch
        } else if !keep.is_empty() {
            take_record_batch(&batch, &UInt32Array::from(keep))?
        } else {
            return Ok(());
        };
        self.pending_bytes += kept.get_array_memory_size();
        self.pending.push(kept);
        Ok(())
    }

    /// Advances to `watermark` and returns the rows strictly before it (all of them at the
    /// end of input), sorted by event time, ties in arrival order.
    pub fn release(&mut self, watermark: Watermark) -> Result<Option<RecordBatch>> {
        let wm = watermark.0.nanos();
        self.watermark = self.watermark.max(wm);
        if self.pending.is_empty() {
            return Ok(None);
        }
        let all = concat_batches(&self.schema, &self.pending)?;
        self.pending.clear();
        self.pending_bytes = 0;
        let times = self.times(&all)?;
        let is_ready = |t: Option<i64>| t.is_some_and(|t| t < wm || wm == i64::MAX);
        let mut ready: Vec<u32> = (0..all.num_rows() as u32)
            .filter(|&i| is_ready(times[i as usize]))
            .collect();
        ready.sort_by_key(|&i| times[i as usize]);
        let waiting: Vec<u32> = (0..all.num_rows() as u32)
            .filter(|&i| !is_ready(times[i as usize]))
            .collect();
        if !waiting.is_empty() {
            let waiting = take_record_batch(&all, &UInt32Array::from(waiting))?;
            self.pending_bytes = waiting.get_array_memory_size();
            self.pending.push(waiting);
        }
        if ready.is_empty() {
            return Ok(None);
        }
        Ok(Some(take_record_batch(&all, &UInt32Array::from(ready))?))
    }

    /// Rows dropped for arriving behind the watermark.
    pub fn late_rows(&self) -> u64 {
        self.late_rows
    }

    /// Bytes of the rows waiting for the watermark (Arrow memory).
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// The latest watermark, in nanoseconds.
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// The waiting rows as one batch, for a snapshot.
    pub fn pending(&self) -> Result<RecordBatch> {
        Ok(concat_batches(&self.schema, &self.pending)?)
    }

    /// Replaces the state with a snapshot's.
    pub fn restore(&mut self, watermark: i64, late_rows: u64, pending: Vec<RecordBatch>) {
        self.watermark = watermark;
        self.late_rows = late_rows;
        self.pending = pending.into_iter().filter(|b| b.num_rows() > 0).collect();
        self.pending_bytes = self.pending.iter().map(|b| b.get_array_memory_size()).sum();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, TimestampNanosecondArray};
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};

    use super::*;
    use crate::time::EventTime;

    #[test]
    fn releases_in_time_order_and_drops_late_rows() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("v", DataType::Int64, false),
        ]));
        let batch = |ts: Vec<i64>, v: Vec<i64>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(TimestampNanosecondArray::from(ts)),
                    Arc::new(Int64Array::from(v)),
                ],
            )
            .unwrap()
        };
        let mut order = EventOrder::new(0, schema.clone());
        order
            .push(batch(vec![5, 3, 9, 3], vec![1, 2, 3, 4]))
            .unwrap();
        let out = order.release(Watermark(EventTime(6))).unwrap().unwrap();
        let v = out.column(1).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(v, vec![2, 4, 1], "3, 3 (in arrival order), then 5; 9 waits");
        order.push(batch(vec![4, 7], vec![5, 6])).unwrap();
        assert_eq!(order.late_rows(), 1, "4 is behind the watermark 6");
        assert!(order.pending_bytes() > 0, "7 and 9 wait");
        let out = order.release(Watermark::END).unwrap().unwrap();
        let v = out.column(1).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(v, vec![6, 3]);
        assert_eq!(order.pending_bytes(), 0);
    }
}
