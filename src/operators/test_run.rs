//! A test harness for operators: a query planned over `s (ts, k, v)` whose operators are fed
//! batches and watermarks by hand, its results kept as text rows.

use std::sync::Arc;

use datafusion::arrow::array::Int64Array;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;

use super::Operator;
use crate::time::{EventTime, Watermark};

/// A second in nanoseconds.
pub const SEC: i64 = 1_000_000_000;

/// A planned query over `s (ts, k, v)` fed by hand: batches of `(seconds, k, v)` rows,
/// each followed by a watermark (seconds).
pub struct Run {
    /// The query's operators, source first.
    pub ops: Vec<Box<dyn Operator>>,
    /// Result rows, as text.
    pub out: Vec<String>,
}

impl Run {
    /// Plans `sql` (a query, or a CREATE CONTINUOUS QUERY with clauses) over `s`.
    pub fn new(sql: &str) -> Run {
        let catalog = crate::Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
        )
        .unwrap();
        let plan = crate::plan(sql, &catalog).unwrap();
        Run {
            ops: plan.build_operators().unwrap(),
            out: Vec::new(),
        }
    }

    /// Runs `batches` through the operators from the `from`-th on, keeping the results.
    pub fn push(&mut self, from: usize, mut batches: Vec<RecordBatch>) {
        for op in self.ops.iter_mut().skip(from) {
            let mut next = Vec::new();
            for b in batches {
                next.extend(op.process_batch(b).unwrap());
            }
            batches = next;
        }
        let options = datafusion::arrow::util::display::FormatOptions::default().with_null("NULL");
        for b in batches {
            let cols: Vec<_> = b
                .columns()
                .iter()
                .map(|c| {
                    datafusion::arrow::util::display::ArrayFormatter::try_new(c, &options).unwrap()
                })
                .collect();
            for r in 0..b.num_rows() {
                let row: Vec<String> = cols.iter().map(|c| c.value(r).to_string()).collect();
                self.out.push(row.join(" "));
            }
        }
    }

    /// A batch of rows `(nanoseconds, k, v)` of `s`.
    pub fn batch(rows: &[(i64, i64, Option<i64>)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "ts",
                DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Nanosecond, None),
                false,
            ),
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(
                    datafusion::arrow::array::TimestampNanosecondArray::from_iter_values(
                        rows.iter().map(|r| r.0),
                    ),
                ),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    }

    /// Runs `batch` through every operator; the first error.
    pub fn try_process(&mut self, batch: RecordBatch) -> crate::Result<()> {
        let mut batches = vec![batch];
        for op in self.ops.iter_mut() {
            let mut next = Vec::new();
            for b in batches {
                next.extend(op.process_batch(b)?);
            }
            batches = next;
        }
        Ok(())
    }

    /// Feeds rows `(seconds, k, v)`, then advances every operator to `watermark` seconds.
    pub fn feed(&mut self, rows: &[(i64, i64, Option<i64>)], watermark: i64) {
        let nanos: Vec<_> = rows.iter().map(|&(t, k, v)| (t * SEC, k, v)).collect();
        let batch = Run::batch(&nanos);
        self.push(0, vec![batch]);
        let wm = Watermark(EventTime(watermark.saturating_mul(SEC)));
        for i in 0..self.ops.len() {
            let emitted = self.ops[i].on_watermark(wm).unwrap();
            self.push(i + 1, emitted);
        }
    }

    /// The bytes of state the operators hold.
    pub fn bytes(&self) -> usize {
        self.ops.iter().map(|o| o.state_bytes()).sum()
    }
}
