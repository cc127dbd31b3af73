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
    /// end of input), sorted by event time, ties in arrival order: as slices of the batches
    /// they arrived in when those came in time order (the usual case: nothing is copied), else
    /// as one sorted copy.
    pub fn release(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        let wm = watermark.0.nanos();
        self.watermark = self.watermark.max(wm);
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        // Only rows with a time wait (`push` drops the others).
        let is_ready = |t: i64| t < wm || wm == i64::MAX;
        let times = self
            .pending
            .iter()
            .map(|b| {
                Ok(self
                    .times(b)?
                    .into_iter()
                    .map(|t| t.unwrap_or(i64::MAX))
                    .collect::<Vec<i64>>())
            })
            .collect::<Result<Vec<_>>>()?;
        let mut last = i64::MIN;
        let in_order = times.iter().flatten().all(|&t| {
            let ok = last <= t;
            last = t;
            ok
        });
        if in_order {
            // Ready pieces, each with its first and last time.
            let mut ready: Vec<(RecordBatch, i64, i64)> = Vec::new();
            let mut waiting = Vec::new();
            for (batch, times) in self.pending.drain(..).zip(&times) {
                let k = times.partition_point(|&t| is_ready(t));
                if k > 0 {
                    ready.push((batch.slice(0, k), times[0], times[k - 1]));
                }
                if k < batch.num_rows() {
                    waiting.push(batch.slice(k, batch.num_rows() - k));
                }
            }
            // A slice keeps its whole batch's buffers: count what is held.
            self.pending_bytes = waiting.iter().map(|b| b.get_array_memory_size()).sum();
            self.pending = waiting;
            return self.peers_together(ready);
        }
        let all = concat_batches(&self.schema, &self.pending)?;
        self.pending.clear();
        self.pending_bytes = 0;
        let times: Vec<i64> = times.concat();
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
            return Ok(Vec::new());
        }
        Ok(vec![take_record_batch(&all, &UInt32Array::from(ready))?])
    }

    /// Time-ordered pieces as batches that never part rows of one time (peers), which the
    /// operators take as one group: pieces that meet at one time are joined into one batch.
    fn peers_together(&self, pieces: Vec<(RecordBatch, i64, i64)>) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let mut run: Vec<RecordBatch> = Vec::new();
        let mut run_last = None;
        for (piece, first, last) in pieces {
            if run_last != Some(first) && !run.is_empty() {
                out.push(self.joined(std::mem::take(&mut run))?);
            }
            run.push(piece);
            run_last = Some(last);
        }
        if !run.is_empty() {
            out.push(self.joined(run)?);
        }
        Ok(out)
    }

    fn joined(&self, mut batches: Vec<RecordBatch>) -> Result<RecordBatch> {
        if batches.len() == 1 {
            return Ok(batches.pop().expect("one batch"));
        }
        Ok(concat_batches(&self.schema, &batches)?)
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
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit, TimestampNanosecondType};

    use super::*;
    use crate::time::EventTime;

    #[test]
    fn releases_in_time_order_and_drops_late_rows() {
        let mut order = EventOrder::new(0, schema());
        order
            .push(batch(vec![5, 3, 9, 3], vec![1, 2, 3, 4]))
            .unwrap();
        let v = values(order.release(Watermark(EventTime(6))).unwrap());
        assert_eq!(v, vec![2, 4, 1], "3, 3 (in arrival order), then 5; 9 waits");
        order.push(batch(vec![4, 7], vec![5, 6])).unwrap();
        assert_eq!(order.late_rows(), 1, "4 is behind the watermark 6");
        assert!(order.pending_bytes() > 0, "7 and 9 wait");
        let v = values(order.release(Watermark::END).unwrap());
        assert_eq!(v, vec![6, 3]);
        assert_eq!(order.pending_bytes(), 0);
    }

    #[test]
    fn in_order_rows_pass_as_slices_and_peers_stay_together() {
        let mut order = EventOrder::new(0, schema());
        let first = batch(vec![1, 2], vec![1, 2]);
        order.push(first.clone()).unwrap();
        order.push(batch(vec![5, 6, 9], vec![3, 4, 5])).unwrap();
        let out = order.release(Watermark(EventTime(7))).unwrap();
        assert_eq!(out.len(), 2, "two pieces that do not meet at one time");
        assert_eq!(
            out[0].column(1).to_data().buffers()[0].as_ptr(),
            first.column(1).to_data().buffers()[0].as_ptr(),
            "a batch wholly ready passes as it came"
        );
        assert_eq!(values(out), vec![1, 2, 3, 4]);
        order.push(batch(vec![9, 12], vec![6, 7])).unwrap();
        let out = order.release(Watermark(EventTime(10))).unwrap();
        assert_eq!(
            out.len(),
            1,
            "the two rows at 9 arrived in two batches but are peers"
        );
        assert_eq!(values(out), vec![5, 6]);
        assert!(order.pending_bytes() > 0, "12 waits");
    }

    proptest::proptest! {
        /// Whatever the arrival order and batches, the released rows are the kept rows in
        /// time order, ties in arrival order, released once the watermark passes them.
        #[test]
        fn releases_what_a_stable_sort_gives(
            batches in proptest::collection::vec(proptest::collection::vec(0i64..20, 0..6), 1..8),
            marks in proptest::collection::vec(0i64..25, 1..8),
        ) {
            let mut order = EventOrder::new(0, schema());
            let (mut kept, mut released) = (Vec::new(), Vec::new());
            let mut id = 0;
            let mut wm = i64::MIN;
            for (i, times) in batches.iter().enumerate() {
                let ids: Vec<i64> = times.iter().map(|_| { id += 1; id }).collect();
                kept.extend(times.iter().zip(&ids).filter(|(t, _)| **t >= wm).map(|(t, v)| (*t, *v)));
                order.push(batch(times.clone(), ids)).unwrap();
                if let Some(&m) = marks.get(i) {
                    wm = wm.max(m);
                    released.extend(pairs(order.release(Watermark(EventTime(m))).unwrap()));
                }
            }
            released.extend(pairs(order.release(Watermark::END).unwrap()));
            kept.sort_by_key(|(t, _)| *t);
            proptest::prop_assert_eq!(released, kept);
        }
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("v", DataType::Int64, false),
        ]))
    }

    fn batch(ts: Vec<i64>, v: Vec<i64>) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(TimestampNanosecondArray::from(ts)),
                Arc::new(Int64Array::from(v)),
            ],
        )
        .unwrap()
    }

    /// (time, value) of each row of `batches`, in order.
    fn pairs(batches: Vec<RecordBatch>) -> Vec<(i64, i64)> {
        batches
            .iter()
            .flat_map(|b| {
                let t = b
                    .column(0)
                    .as_primitive::<TimestampNanosecondType>()
                    .values()
                    .to_vec();
                t.into_iter()
                    .zip(b.column(1).as_primitive::<Int64Type>().values().to_vec())
            })
            .collect()
    }

    /// The second column of `batches`, in order.
    fn values(batches: Vec<RecordBatch>) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }
}
