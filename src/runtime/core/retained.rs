//! A bounded buffer of the most recent rows, for ad hoc `SELECT` over streams and results and
//! for `SUBSCRIBE ... WITH (SNAPSHOT)`: at most so many rows and so many bytes (as Arrow
//! memory), the oldest dropped first. Its bytes count in a query's `state_bytes`.

use std::collections::VecDeque;

use datafusion::arrow::array::UInt32Array;
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::record_batch::RecordBatch;

/// Keeps at most `capacity` of the newest rows and about `max_bytes` of their memory, as
/// whole or sliced batches.
#[derive(Debug)]
pub struct Retained {
    /// The batches with their Arrow memory, measured once as they come in.
    batches: VecDeque<(RecordBatch, usize)>,
    rows: usize,
    capacity: usize,
    /// Arrow memory of the batches held (a slice counts the buffers it keeps alive).
    bytes: usize,
    max_bytes: usize,
}

impl Retained {
    /// An empty buffer holding up to `capacity` rows, of any size (tests).
    #[cfg(test)]
    pub fn new(capacity: usize) -> Self {
        Retained::with_max_bytes(capacity, usize::MAX)
    }

    /// An empty buffer holding up to `capacity` rows in at most `max_bytes` of memory.
    pub fn with_max_bytes(capacity: usize, max_bytes: usize) -> Self {
        Retained {
            batches: VecDeque::new(),
            rows: 0,
            capacity,
            bytes: 0,
            max_bytes,
        }
    }

    /// Appends a batch, dropping the oldest rows beyond capacity and the oldest batches
    /// beyond the byte bound. A batch too big for the bound on its own is cut to its newest
    /// rows that fit, copied so that it no longer holds the rest.
    pub fn push(&mut self, batch: &RecordBatch) {
        if self.capacity == 0 || batch.num_rows() == 0 {
            return;
        }
        let mut batch = if batch.num_rows() > self.capacity {
            batch.slice(batch.num_rows() - self.capacity, self.capacity)
        } else {
            batch.clone()
        };
        let mut size = batch.get_array_memory_size();
        if size > self.max_bytes {
            // Older rows cannot fit beside it.
            self.clear();
            match self.newest_that_fit(&batch) {
                Some(fitted) => batch = fitted,
                None => return,
            }
            size = batch.get_array_memory_size();
        }
        self.rows += batch.num_rows();
        self.bytes += size;
        self.batches.push_back((batch, size));
        while self.rows > self.capacity || self.bytes > self.max_bytes {
            let Some((front, front_size)) = self.batches.pop_front() else {
                break;
            };
            self.rows -= front.num_rows();
            self.bytes -= front_size;
            // Its newest rows stay if only the row bound wanted them gone.
            let room = self
                .capacity
                .saturating_sub(self.rows)
                .min(front.num_rows());
            if room > 0 && room < front.num_rows() && self.bytes <= self.max_bytes {
                let kept = front.slice(front.num_rows() - room, room);
                let size = kept.get_array_memory_size();
                if self.bytes + size <= self.max_bytes {
                    self.rows += room;
                    self.bytes += size;
                    self.batches.push_front((kept, size));
                }
            }
        }
    }

    /// The newest rows of `batch` that fit in the byte bound, copied out of its buffers
    /// (a slice would keep them all alive); None if not even one row fits.
    fn newest_that_fit(&self, batch: &RecordBatch) -> Option<RecordBatch> {
        let mut size = batch.get_array_memory_size();
        let mut fit = batch.num_rows();
        loop {
            // Each round shrinks the estimate by the share the copy is still over.
            fit = (fit as u128 * self.max_bytes as u128 / size.max(1) as u128) as usize;
            fit = fit.min(batch.num_rows().saturating_sub(1));
            if fit == 0 {
                return None;
            }
            let first = (batch.num_rows() - fit) as u32;
            let rows = UInt32Array::from_iter_values(first..batch.num_rows() as u32);
            let copied = take_record_batch(batch, &rows).ok()?;
            size = copied.get_array_memory_size();
            if size <= self.max_bytes {
                return Some(copied);
            }
        }
    }

    /// The retained rows, oldest first.
    pub fn batches(&self) -> Vec<RecordBatch> {
        self.batches.iter().map(|(b, _)| b.clone()).collect()
    }

    /// Number of retained rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Memory the retained rows hold, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets every row.
    pub fn clear(&mut self) {
        self.batches.clear();
        self.rows = 0;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use std::sync::Arc;

    fn batch(values: std::ops::Range<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(values))]).unwrap()
    }

    #[test]
    fn keeps_the_newest_rows() {
        let mut r = Retained::new(5);
        r.push(&batch(0..3));
        r.push(&batch(3..7));
        assert_eq!(r.rows(), 5);
        let all: Vec<i64> = r
            .batches()
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(all, vec![2, 3, 4, 5, 6]);
        r.push(&batch(10..20));
        assert_eq!(r.rows(), 5);
        assert_eq!(
            r.batches()[0]
                .column(0)
                .as_primitive::<Int64Type>()
                .value(0),
            15
        );
    }

    fn values(r: &Retained) -> Vec<i64> {
        r.batches()
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn bytes_are_counted_and_bounded_oldest_first() {
        let one = batch(0..100).get_array_memory_size();
        let mut r = Retained::with_max_bytes(1_000_000, 3 * one);
        r.push(&batch(0..100));
        assert_eq!(r.bytes(), one);
        r.push(&batch(100..200));
        r.push(&batch(200..300));
        assert_eq!((r.rows(), r.bytes()), (300, 3 * one));
        // A fourth batch pushes out the first: rows and bytes stay within the bounds.
        r.push(&batch(300..400));
        assert_eq!((r.rows(), r.bytes()), (300, 3 * one));
        assert_eq!(values(&r), (100..400).collect::<Vec<_>>());
        // One batch bigger than the bound keeps only its newest rows, in fresh memory.
        let big = batch(0..10_000);
        assert!(big.get_array_memory_size() > 3 * one);
        r.push(&big);
        assert!(r.bytes() <= 3 * one, "{} bytes over {}", r.bytes(), 3 * one);
        assert!(r.rows() > 0);
        let kept = values(&r);
        assert_eq!(
            kept,
            (10_000 - kept.len() as i64..10_000).collect::<Vec<_>>()
        );
        // Emptied, it holds nothing.
        r.clear();
        assert_eq!((r.rows(), r.bytes()), (0, 0));
    }
}
