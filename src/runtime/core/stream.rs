//! Runtime state of one stream: its watermark and how it advances, counters, recent rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::TimestampNanosecondType;
use datafusion::arrow::record_batch::RecordBatch;

use crate::plan::StreamDef;
use crate::runtime::core::retained::Retained;
use crate::time::{EventTime, Watermark};

/// A stream's event-time progress and counters.
pub struct StreamRuntime {
    /// The stream's definition.
    pub def: Arc<StreamDef>,
    /// Current watermark.
    pub watermark: Watermark,
    /// Largest event time seen.
    pub max_event_time: Option<EventTime>,
    /// When the last rows arrived (processing time).
    pub last_arrival: Instant,
    /// Rows accepted.
    pub rows_in: u64,
    /// Rows that arrived behind the watermark.
    pub late_rows: u64,
    /// Rows dropped by load shedding before they were logged or processed.
    pub shed_rows: u64,
    /// Batches that had to wait for the stream (another writer held it): backpressure.
    pub ingest_waits: u64,
    /// Their total wait.
    pub ingest_wait: Duration,
    /// Recent rows for ad hoc SELECT.
    pub recent: Retained,
}

impl StreamRuntime {
    /// Fresh state for a stream, keeping its newest rows in `recent`.
    pub fn new(def: Arc<StreamDef>, recent: Retained) -> Self {
        StreamRuntime {
            def,
            watermark: Watermark::START,
            max_event_time: None,
            last_arrival: Instant::now(),
            rows_in: 0,
            late_rows: 0,
            shed_rows: 0,
            ingest_waits: 0,
            ingest_wait: Duration::ZERO,
            recent,
        }
    }

    /// Records a batch's arrival: counts rows (and those behind the watermark) and returns the
    /// watermark the batch implies, if it advances.
    pub fn observe(&mut self, batch: &RecordBatch, now: Instant) -> Option<Watermark> {
        self.rows_in += batch.num_rows() as u64;
        self.last_arrival = now;
        self.recent.push(batch);
        let et = self.def.event_time.as_ref()?;
        let times = batch
            .column(et.column)
            .as_primitive::<TimestampNanosecondType>();
        let mut max = self.max_event_time.map(|t| t.nanos()).unwrap_or(i64::MIN);
        let wm = self.watermark;
        for t in times.iter().flatten() {
            if wm.is_late(EventTime(t)) {
                self.late_rows += 1;
            }
            max = max.max(t);
        }
        if max == i64::MIN {
            return None;
        }
        self.max_event_time = Some(EventTime(max));
        self.advance(Watermark(EventTime(max).minus(et.delay)))
    }

    /// After the idle timeout without input, the watermark follows processing time from the
    /// largest event time seen: `max_event_time + (now - last_arrival)`. Returns that
    /// watermark if it is later than the current one (without moving to it).
    pub fn idle_watermark(&self, now: Instant) -> Option<Watermark> {
        let timeout = self.def.idle_timeout?;
        let max = self.max_event_time?;
        let idle = now.saturating_duration_since(self.last_arrival);
        if idle < timeout {
            return None;
        }
        Some(Watermark(max.plus(idle))).filter(|&wm| wm > self.watermark)
    }

    /// Moves the watermark forward to `to` if that is later; returns it if it moved.
    pub fn advance(&mut self, to: Watermark) -> Option<Watermark> {
        if to > self.watermark {
            self.watermark = to;
            Some(to)
        } else {
            None
        }
    }
}
