//! A bounded buffer of the most recent rows, for ad hoc `SELECT` over streams and results.

use std::collections::VecDeque;

use datafusion::arrow::record_batch::RecordBatch;

/// Keeps at most `capacity` of the newest rows, as whole or sliced batches.
#[derive(Debug)]
pub struct Retained {
    batches: VecDeque<RecordBatch>,
    rows: usize,
    capacity: usize,
}

impl Retained {
    /// An empty buffer holding up to `capacity` rows.
    pub fn new(capacity: usize) -> Self {
        Retained {
            batches: VecDeque::new(),
            rows: 0,
            capacity,
        }
    }

    /// Appends a batch, dropping the oldest rows beyond capacity.
    pub fn push(&mut self, batch: &RecordBatch) {
        if self.capacity == 0 || batch.num_rows() == 0 {
            return;
        }
        let batch = if batch.num_rows() > self.capacity {
            batch.slice(batch.num_rows() - self.capacity, self.capacity)
        } else {
            batch.clone()
        };
        self.rows += batch.num_rows();
        self.batches.push_back(batch);
        while self.rows > self.capacity {
            let Some(front) = self.batches.pop_front() else {
                break;
            };
            let excess = self.rows - self.capacity;
            if front.num_rows() > excess {
                let kept = front.slice(excess, front.num_rows() - excess);
                self.rows -= excess;
                self.batches.push_front(kept);
            } else {
                self.rows -= front.num_rows();
            }
        }
    }

    /// The retained rows, oldest first.
    pub fn batches(&self) -> Vec<RecordBatch> {
        self.batches.iter().cloned().collect()
    }

    /// Number of retained rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Forgets every row.
    pub fn clear(&mut self) {
        self.batches.clear();
        self.rows = 0;
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
}
