//! The merge at the head of a `UNION ALL` of streams: rows of several inputs, each with its
//! own watermark, become one stream on one clock. The union's watermark is the smallest of
//! its inputs' watermarks; a row waits here until that watermark passes it, and rows leave
//! in event-time order (ties: the earlier branch first, then arrival order within a branch).
//!
//! Rows therefore leave in an order that does not depend on how the inputs' batches
//! interleaved: replaying each input's log reproduces the union's output row for row, as a
//! recovery must. A row behind its own input's watermark when it arrives is late (counted
//! and dropped), which also depends on that input alone. The rows waiting are the union's
//! state: bounded by the caller (they count toward the query's state), and in the snapshot.

use std::sync::Arc;

use datafusion::arrow::array::{AsArray, UInt32Array};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use datafusion::arrow::datatypes::{SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;

use super::snapshot::{decode, encode, StateImage};
use crate::error::{Error, Result};
use crate::time::{EventTime, Watermark};

/// Rows of each input waiting for the union's watermark, and each input's watermark.
pub struct UnionMerge {
    schema: SchemaRef,
    /// The event-time column (same position in every input).
    time_column: usize,
    /// Per input: its watermark as last reported.
    watermarks: Vec<Watermark>,
    /// Per input: its rows not yet released, in arrival order.
    waiting: Vec<Vec<RecordBatch>>,
    /// The watermark up to which rows have been released.
    released: Watermark,
    late: u64,
}

impl UnionMerge {
    /// A merge of `inputs` inputs whose rows have `schema`, with event time in column
    /// `time_column` (a nanosecond timestamp).
    pub fn try_new(inputs: usize, schema: SchemaRef, time_column: usize) -> Result<Self> {
        if inputs == 0 || time_column >= schema.fields().len() {
            return Err(Error::Internal(
                "a union needs inputs and a time column".into(),
            ));
        }
        Ok(UnionMerge {
            schema,
            time_column,
            watermarks: vec![Watermark::START; inputs],
            waiting: vec![Vec::new(); inputs],
            released: Watermark::START,
            late: 0,
        })
    }

    /// The union's watermark: the smallest of its inputs'.
    pub fn watermark(&self) -> Watermark {
        self.watermarks
            .iter()
            .copied()
            .min()
            .unwrap_or(Watermark::START)
    }

    /// The input whose watermark holds the union back, and that watermark.
    pub fn slowest(&self) -> (usize, Watermark) {
        let mut at = 0;
        for (i, wm) in self.watermarks.iter().enumerate() {
            if *wm < self.watermarks[at] {
                at = i;
            }
        }
        (at, self.watermarks[at])
    }

    /// Takes rows of input `input`; those behind its watermark are late and dropped.
    pub fn push(&mut self, input: usize, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if batch.schema().fields() != self.schema.fields() {
            return Err(Error::Internal("union input of another schema".into()));
        }
        let wm = self.watermarks[input];
        let times = batch
            .column(self.time_column)
            .as_primitive::<TimestampNanosecondType>();
        let keep: datafusion::arrow::array::BooleanArray = times
            .iter()
            .map(|t| Some(t.is_some_and(|t| !wm.is_late(EventTime(t)))))
            .collect();
        let kept = keep.true_count();
        self.late += (batch.num_rows() - kept) as u64;
        let batch = if kept == batch.num_rows() {
            batch
        } else {
            filter_record_batch(&batch, &keep)?
        };
        if batch.num_rows() > 0 {
            self.waiting[input].push(batch);
        }
        Ok(())
    }

    /// Input `input`'s watermark moved to `to`. If the union's watermark moves, returns the
    /// rows it releases (event-time order) and the new watermark.
    pub fn advance(
        &mut self,
        input: usize,
        to: Watermark,
    ) -> Result<Option<(Vec<RecordBatch>, Watermark)>> {
        if to <= self.watermarks[input] {
            return Ok(None);
        }
        self.watermarks[input] = to;
        let wm = self.watermark();
        if wm <= self.released {
            return Ok(None);
        }
        self.released = wm;
        Ok(Some((self.release(wm)?, wm)))
    }

    /// Removes and returns, in order, the waiting rows the watermark `wm` passed.
    fn release(&mut self, wm: Watermark) -> Result<Vec<RecordBatch>> {
        let column = self.time_column;
        let times = |b: &RecordBatch| -> Vec<i64> {
            let t = b.column(column).as_primitive::<TimestampNanosecondType>();
            t.values().to_vec()
        };
        let mut out: Vec<RecordBatch> = Vec::new();
        for waiting in &mut self.waiting {
            // Whole batches the watermark passed leave as they are (no copy); the first
            // batch with a row still due later is split, and it and the rest wait.
            let whole = waiting
                .iter()
                .position(|b| times(b).iter().any(|&t| !wm.is_late(EventTime(t))))
                .unwrap_or(waiting.len());
            out.extend(waiting.drain(..whole));
            if waiting.is_empty() {
                continue;
            }
            let all = concat_batches(&self.schema, waiting.iter())?;
            waiting.clear();
            let due: datafusion::arrow::array::BooleanArray = times(&all)
                .iter()
                .map(|&t| Some(wm.is_late(EventTime(t))))
                .collect();
            let rest = datafusion::arrow::compute::not(&due)?;
            let kept = filter_record_batch(&all, &rest)?;
            if kept.num_rows() > 0 {
                waiting.push(kept);
            }
            let due = filter_record_batch(&all, &due)?;
            if due.num_rows() > 0 {
                out.push(due);
            }
        }
        if out.is_empty() {
            return Ok(out);
        }
        // Inputs in order, each in arrival order: a stable sort by time keeps the ties so.
        // Rows already in time order (one input's ordered rows, or inputs that do not
        // overlap) leave as they are.
        let t: Vec<i64> = out.iter().flat_map(times).collect();
        if t.windows(2).all(|w| w[0] <= w[1]) {
            return Ok(out);
        }
        let all = concat_batches(&self.schema, out.iter())?;
        let mut order: Vec<u32> = (0..all.num_rows() as u32).collect();
        order.sort_by_key(|&i| t[i as usize]);
        let sorted = take_record_batch(&all, &UInt32Array::from(order))?;
        Ok(vec![sorted])
    }

    /// Rows dropped because they were behind their input's watermark.
    pub fn late_rows(&self) -> u64 {
        self.late
    }

    /// Rows waiting for the union's watermark.
    pub fn waiting_rows(&self) -> usize {
        self.waiting.iter().flatten().map(|b| b.num_rows()).sum()
    }

    /// Bytes held by the waiting rows.
    pub fn state_bytes(&self) -> usize {
        self.waiting
            .iter()
            .flatten()
            .map(|b| b.get_array_memory_size())
            .sum()
    }

    /// The state: the watermarks, the late count and the waiting rows of each input.
    pub fn snapshot(&self) -> StateImage {
        // Header: late, released, then per input its watermark and its count of batches.
        let mut header = vec![self.late as i64, self.released.0 .0];
        let mut batches = Vec::new();
        for (wm, waiting) in self.watermarks.iter().zip(&self.waiting) {
            header.push(wm.0 .0);
            header.push(waiting.len() as i64);
            batches.extend(waiting.iter().cloned());
        }
        let schema = self.schema.clone();
        StateImage::later(move || encode(&header, &schema, &batches))
    }

    /// Restores what [`UnionMerge::snapshot`] took, for the same inputs.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let (header, batches) = decode(bytes)?;
        let inputs = self.watermarks.len();
        let bad = || Error::Internal("corrupt union snapshot".into());
        if header.len() != 2 + 2 * inputs {
            return Err(bad());
        }
        let mut batches = batches.into_iter();
        self.late = header[0] as u64;
        self.released = Watermark(EventTime(header[1]));
        for i in 0..inputs {
            self.watermarks[i] = Watermark(EventTime(header[2 + 2 * i]));
            let n = usize::try_from(header[3 + 2 * i]).map_err(|_| bad())?;
            self.waiting[i] = (0..n)
                .map(|_| batches.next().ok_or_else(bad))
                .collect::<Result<_>>()?;
            if self.waiting[i]
                .iter()
                .any(|b| b.schema().fields() != self.schema.fields())
            {
                return Err(bad());
            }
        }
        Ok(())
    }

    /// The schema of the rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// A copy of this merge's configuration, empty.
    pub fn fresh(&self) -> UnionMerge {
        UnionMerge {
            schema: Arc::clone(&self.schema),
            time_column: self.time_column,
            watermarks: vec![Watermark::START; self.watermarks.len()],
            waiting: vec![Vec::new(); self.watermarks.len()],
            released: Watermark::START,
            late: 0,
        }
    }

    /// Forgets the waiting rows (the union's queries stopped).
    pub fn clear_waiting(&mut self) {
        for w in &mut self.waiting {
            w.clear();
        }
    }
}

/// The event times of `batch`'s column `column`, as the union reads them (for tests).
#[cfg(test)]
fn times_of(batch: &RecordBatch, column: usize) -> Vec<i64> {
    let t = batch
        .column(column)
        .as_primitive::<TimestampNanosecondType>();
    (0..t.len()).map(|i| t.value(i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, TimestampNanosecondArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("v", DataType::Int64, false),
        ]))
    }

    fn rows(r: &[(i64, i64)]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    r.iter().map(|x| x.0),
                )),
                Arc::new(Int64Array::from_iter_values(r.iter().map(|x| x.1))),
            ],
        )
        .unwrap()
    }

    fn wm(t: i64) -> Watermark {
        Watermark(EventTime(t))
    }

    fn values(out: &[RecordBatch]) -> Vec<(i64, i64)> {
        out.iter()
            .flat_map(|b| {
                let v = b
                    .column(1)
                    .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
                times_of(b, 0).into_iter().zip(v.values().iter().copied())
            })
            .collect()
    }

    #[test]
    fn rows_wait_for_the_slowest_input_and_leave_in_time_order() {
        let mut m = UnionMerge::try_new(2, schema(), 0).unwrap();
        m.push(0, rows(&[(5, 1), (1, 2)])).unwrap();
        assert!(
            m.advance(0, wm(10)).unwrap().is_none(),
            "input 1 is at START"
        );
        m.push(1, rows(&[(3, 3), (5, 4), (12, 5)])).unwrap();
        let (out, at) = m.advance(1, wm(6)).unwrap().unwrap();
        assert_eq!(at, wm(6));
        assert_eq!(values(&out), vec![(1, 2), (3, 3), (5, 1), (5, 4)]);
        assert_eq!(m.waiting_rows(), 1);
        // Behind input 0's own watermark: late, whatever the union's watermark is.
        m.push(0, rows(&[(7, 6), (11, 7)])).unwrap();
        assert_eq!(m.late_rows(), 1);
        let (out, _) = m.advance(1, wm(20)).unwrap().unwrap();
        assert_eq!(values(&out), vec![]);
        let (out, _) = m.advance(0, wm(30)).unwrap().unwrap();
        assert_eq!(values(&out), vec![(11, 7), (12, 5)]);
    }

    #[test]
    fn a_snapshot_restores_the_waiting_rows_and_watermarks() {
        let mut m = UnionMerge::try_new(2, schema(), 0).unwrap();
        m.push(0, rows(&[(5, 1)])).unwrap();
        m.advance(0, wm(7)).unwrap();
        m.push(0, rows(&[(2, 9)])).unwrap();
        let bytes = m.snapshot().encode().unwrap();
        let mut r = m.fresh();
        r.restore(&bytes).unwrap();
        assert_eq!(r.late_rows(), 1);
        assert_eq!(r.waiting_rows(), 1);
        let (out, _) = r.advance(1, wm(100)).unwrap().unwrap();
        assert_eq!(values(&out), vec![(5, 1)]);
        assert!(r.fresh().restore(&bytes[..bytes.len() - 3]).is_err());
    }
}
