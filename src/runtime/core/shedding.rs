//! Load shedding (Tatbul et al., "Load Shedding in a Data Stream Manager"): when a stream
//! falls behind, drop rows before they are logged or processed, counted, instead of letting
//! writers wait without end.
//!
//! **Lag** is the time a batch waited to enter its stream: from the writer's (INSERT, COPY,
//! source) arrival at the stream to the moment it holds the stream's lock. Ingest is
//! synchronous (the writer runs every query of the stream on its own thread, under that lock),
//! so this wait is exactly the backlog of the writers ahead of it: the engine's queue for a
//! stream is the writers blocked on its lock, each holding its own batch.
//!
//! Without shedding writers just wait (backpressure). With `WITH (shedding = ..., max_lag =
//! '2s')`, every batch that waited longer than `max_lag` raises the drop fraction `p` to at
//! least `1 - max_lag / lag` (the share of work that must go for the wait to fall back to
//! `max_lag`), and higher while the lag persists; batches that waited less than half of it
//! halve `p`. Then
//! - `random` drops each row with probability `p` (Tatbul's random drop);
//! - `window` decides, when a tumbling window of `shed_window` gets its first row, whether to
//!   drop all of it, with probability `p` (Tatbul's window-aware drop): every window that is
//!   kept has all its rows, so the results of windows of that size (or of sizes dividing it,
//!   aligned at the epoch) that are emitted are exact; only whole windows are missing.

use std::collections::BTreeMap;
use std::time::Duration;

use datafusion::arrow::array::{AsArray, BooleanArray};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::TimestampNanosecondType;
use datafusion::arrow::record_batch::RecordBatch;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::Result;
use crate::plan::catalog::{ShedMode, ShedPolicy};
use crate::time::Watermark;

/// The most rows (or new windows) dropped: some always get through, so results never stop.
const MAX_DROP: f64 = 0.95;

/// Below this the drop fraction is taken as zero.
const MIN_DROP: f64 = 0.01;

/// Most open windows whose verdict is remembered (`window` mode). Past it rows of windows
/// not yet decided are kept, and a window first seen then may later be dropped in part.
const MAX_VERDICTS: usize = 1_000_000;

/// A stream's shedding state.
pub struct Shedder {
    policy: ShedPolicy,
    /// The fraction of rows (`random`) or of new windows (`window`) dropped now.
    drop_fraction: f64,
    rng: StdRng,
    /// `window`: the verdict on each open window that has had rows (true: dropped), by start.
    verdicts: BTreeMap<i64, bool>,
}

impl Shedder {
    /// No shedding yet under `policy`; `seed` makes its random choices repeatable.
    pub fn new(policy: ShedPolicy, seed: u64) -> Self {
        Shedder {
            policy,
            drop_fraction: 0.0,
            rng: StdRng::seed_from_u64(seed),
            verdicts: BTreeMap::new(),
        }
    }

    /// The fraction currently dropped.
    pub fn drop_fraction(&self) -> f64 {
        self.drop_fraction
    }

    /// Adapts the drop fraction to a batch that waited `lag` to enter the stream.
    fn adapt(&mut self, lag: Duration) {
        let max = self.policy.max_lag.as_secs_f64();
        let lag = lag.as_secs_f64();
        if lag > max {
            let needed = (1.0 - max / lag).min(MAX_DROP);
            let pushed = self.drop_fraction + (MAX_DROP - self.drop_fraction) * 0.25;
            self.drop_fraction = needed.max(pushed).min(MAX_DROP);
        } else if lag < max / 2.0 {
            self.drop_fraction /= 2.0;
            if self.drop_fraction < MIN_DROP {
                self.drop_fraction = 0.0;
            }
        }
    }

    /// The rows of `batch` that are kept after it waited `lag`; `time_column` is the stream's
    /// event-time column and `watermark` its watermark (for `window`).
    pub fn shed(
        &mut self,
        batch: RecordBatch,
        lag: Duration,
        time_column: Option<usize>,
        watermark: Watermark,
    ) -> Result<RecordBatch> {
        self.adapt(lag);
        let keep: BooleanArray = match (self.policy.mode, time_column) {
            (ShedMode::Window(size), Some(column)) => {
                self.forget(watermark, size);
                let times = batch
                    .column(column)
                    .as_primitive::<TimestampNanosecondType>();
                times
                    .iter()
                    .map(|t| Some(t.is_none_or(|t| self.keeps_window(t, size, watermark))))
                    .collect()
            }
            _ if self.drop_fraction == 0.0 => return Ok(batch),
            _ => (0..batch.num_rows())
                .map(|_| Some(self.rng.gen::<f64>() >= self.drop_fraction))
                .collect(),
        };
        if keep.true_count() == batch.num_rows() {
            return Ok(batch);
        }
        Ok(filter_record_batch(&batch, &keep)?)
    }

    /// Whether the row at `t` is kept: its window's verdict, decided at its first row.
    fn keeps_window(&mut self, t: i64, size: i64, watermark: Watermark) -> bool {
        // A window that starts before the range of timestamps is kept: its operator refuses it.
        let Some(start) = t.div_euclid(size).checked_mul(size) else {
            return true;
        };
        if let Some(dropped) = self.verdicts.get(&start) {
            return !dropped;
        }
        // A closed window's rows are late: the stream counts them.
        if start.saturating_add(size) <= watermark.0.nanos() || self.verdicts.len() >= MAX_VERDICTS
        {
            return true;
        }
        let dropped = self.drop_fraction > 0.0 && self.rng.gen::<f64>() < self.drop_fraction;
        self.verdicts.insert(start, dropped);
        !dropped
    }

    /// Forgets the verdicts on windows the watermark has closed.
    fn forget(&mut self, watermark: Watermark, size: i64) {
        let wm = watermark.0.nanos();
        while let Some(entry) = self.verdicts.first_entry() {
            if entry.key().saturating_add(size) > wm {
                break;
            }
            entry.remove();
        }
    }
}
