//! The one door rows enter a stream by, for INSERT, COPY and sources alike. A statement's rows
//! (every batch of a COPY) are logged as one frame, so that a crash or a full disk keeps all
//! of them or none; they reach the stream's queries only once that frame is durable, so that
//! a row whose writer is told it failed was never seen by a query. Changes of one stream are
//! applied in log order: each waits in its hub's [`PendingChanges`] from logging until it is
//! durable, and whoever finds frames durable applies every one that is, for all writers
//! (writers of one stream still share fsyncs, as the log's group commit intends).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::operators::lookup::TableChange;
use crate::runtime::core::hub::{Hub, StreamHub};
use crate::runtime::durability::wal::Record;
use crate::runtime::engine::{Engine, Inserted};
use crate::sources::spec::SourceProgress;
use crate::time::Watermark;

/// A change to a stream that is logged but not yet durable.
pub(in crate::runtime) enum Change {
    /// A statement's or a source read's rows (none when only a source's position moved).
    Rows {
        batches: Vec<RecordBatch>,
        /// The source that read them, and its position after them.
        source: Option<(String, SourceProgress)>,
    },
    /// The watermark moved by processing time.
    Watermark(Watermark),
    /// A reference table that a query of the stream joins `FOR SYSTEM_TIME AS OF` changed:
    /// its versions change at this point of the stream's log.
    Table {
        table: String,
        change: Arc<TableChange>,
    },
}

/// A hub's changes waiting for their frames to be durable, by log sequence number, and what
/// applying each did until its writer picks it up.
#[derive(Default)]
pub struct PendingChanges {
    waiting: VecDeque<(u64, Change)>,
    applied: BTreeMap<u64, Inserted>,
}

impl PendingChanges {
    /// The log sequence number of the oldest change not yet applied.
    pub fn first_seq(&self) -> Option<u64> {
        self.waiting.front().map(|(seq, _)| *seq)
    }

    /// Whether no change waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub(in crate::runtime) fn push(&mut self, seq: u64, change: Change) {
        self.waiting.push_back((seq, change));
    }
}

impl Hub {
    /// Applies, in log order, every waiting change whose frame is at or below `durable`.
    pub(in crate::runtime) fn apply_durable(&mut self, durable: u64) {
        while let Some(&(seq, _)) = self.pending.waiting.front() {
            if seq > durable {
                break;
            }
            let (_, change) = self.pending.waiting.pop_front().expect("a front entry");
            if let Some(done) = self.apply_change(change) {
                self.pending.applied.insert(seq, done);
            }
        }
    }

    /// Applies one change now; says what rows did.
    pub(in crate::runtime) fn apply_change(&mut self, change: Change) -> Option<Inserted> {
        match change {
            Change::Rows { batches, source } => {
                let (late_before, watermark) = (self.stream.late_rows, self.stream.watermark);
                let mut rows = 0;
                for batch in &batches {
                    // Checked against the stream's schema before it was logged.
                    rows += self.insert(batch, Instant::now()).unwrap_or(0);
                }
                if let Some((name, progress)) = source {
                    self.sources.insert(name, progress);
                }
                Some(Inserted {
                    rows,
                    late: self.stream.late_rows - late_before,
                    watermark,
                })
            }
            Change::Watermark(wm) => {
                self.advance(wm);
                None
            }
            Change::Table { table, change } => {
                self.graph.table_change(&table, &change);
                self.check_state_bytes();
                None
            }
        }
    }

    /// After the log failed: the changes not durable are dropped (their writers get the
    /// log's error), the durable ones applied.
    pub(in crate::runtime) fn discard_undurable(&mut self, durable: u64) {
        self.apply_durable(durable);
        self.pending.waiting.clear();
    }
}

/// Rows for one stream from one statement or one source read.
pub(in crate::runtime) struct Entry {
    /// Its batches, each with the stream's schema.
    pub batches: Vec<RecordBatch>,
    /// The source that read them, with its position after them.
    pub source: Option<(String, SourceProgress)>,
    /// How long they waited to enter (for load shedding); None: measure the wait for the
    /// stream's lock.
    pub lag: Option<Duration>,
}

impl Engine {
    /// Enters `entry` into the stream of `hub` (named `stream`): checks, sheds, logs it as
    /// one frame, waits until that is durable and applies it in log order. Returns what the
    /// rows did; nothing is applied when it fails.
    pub(in crate::runtime) fn enter(
        &self,
        stream: &str,
        hub: &Arc<StreamHub>,
        entry: Entry,
    ) -> Result<Inserted> {
        let bytes = entry
            .batches
            .iter()
            .map(|b| b.get_array_memory_size())
            .sum();
        let _in_flight = self.ingest.acquire(bytes);
        let seq = {
            let (mut hub, waited) = hub.lock_for_ingest();
            let lag = entry.lag.unwrap_or(waited);
            let mut batches = Vec::with_capacity(entry.batches.len());
            for batch in entry.batches {
                hub.check_batch(&batch)?;
                let batch = hub.shed(batch, lag)?;
                if batch.num_rows() > 0 {
                    batches.push(batch);
                }
            }
            let record = match &entry.source {
                Some((name, progress)) => Record::SourceRows {
                    stream: stream.to_string(),
                    source: name.clone(),
                    progress: serde_json::to_string(progress).map_err(|e| {
                        crate::error::Error::Internal(format!("encoding a source position: {e}"))
                    })?,
                    batch: match batches.as_slice() {
                        [] => RecordBatch::new_empty(hub.stream.def.schema.clone()),
                        [one] => one.clone(),
                        many => datafusion::arrow::compute::concat_batches(
                            &hub.stream.def.schema,
                            many,
                        )?,
                    },
                },
                None if batches.is_empty() => {
                    return Ok(Inserted {
                        rows: 0,
                        late: 0,
                        watermark: hub.stream.watermark,
                    })
                }
                None => Record::Rows {
                    stream: stream.to_string(),
                    batches: batches.clone(),
                },
            };
            let change = Change::Rows {
                batches,
                source: entry.source,
            };
            match self.log(&record)? {
                Some(seq) => {
                    hub.pending.push(seq, change);
                    seq
                }
                // Without a data directory there is nothing to wait for.
                None => return Ok(hub.apply_change(change).expect("rows say what they did")),
            }
        };
        let durable = self.durable(Some(seq));
        let mut hub = hub.lock();
        let through = self.durable_through();
        match durable {
            Ok(()) => {
                hub.apply_durable(through);
                Ok(hub
                    .pending
                    .applied
                    .remove(&seq)
                    .expect("a durable change is applied"))
            }
            Err(e) => {
                hub.discard_undurable(through);
                hub.pending.applied.remove(&seq);
                Err(e)
            }
        }
    }

    /// Moves a hub's watermark, logged so that replay moves it at the same point; behind
    /// rows still waiting to be durable, it waits with them.
    pub(in crate::runtime) fn advance_logged(&self, hub: &mut Hub, to: Watermark) {
        if to <= hub.stream.watermark {
            return;
        }
        let record = Record::Watermark {
            stream: hub.stream.def.name.clone(),
            watermark: to,
        };
        match self.log(&record) {
            Ok(Some(seq)) if !hub.pending.is_empty() => {
                hub.pending.push(seq, Change::Watermark(to))
            }
            Ok(_) => {
                hub.advance(to);
            }
            // Not moving it is safe: windows close on the next rows or tick.
            Err(e) => tracing::warn!("watermark of \"{}\" not moved: {e}", hub.stream.def.name),
        }
    }
}
