//! Backfill: `CREATE CONTINUOUS QUERY q WITH (start = TIMESTAMP '...' | INTERVAL '...') AS
//! ...` first runs the query over its stream's history from `start` (rows in arrival order,
//! those with an earlier event time left out), then continues with live rows, with no gap and
//! no row twice at the hand-over.
//!
//! The query runs on operators of its own (in a private graph, with a private watermark
//! derived from the rows as live ingest derives it) whose results go to the query's real
//! output, so its sequence numbers and subscribers see backfilled results like live ones.
//! Most of the history is read with no lock held, so the stream's writers and other queries
//! go on; then, under the stream's lock, the rows that arrived meanwhile are read too, the
//! operators are brought to the stream's watermark, and their state moves into the stream's
//! graph (snapshot and restore, as a checkpoint would), where live rows continue.

use std::time::Instant;

use datafusion::arrow::array::{Array, AsArray, TimestampNanosecondArray};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::compute::kernels::cmp::gt_eq;
use datafusion::arrow::datatypes::TimestampNanosecondType;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{sqlstate, Error, Result};
use crate::plan::QueryPlan;
use crate::runtime::core::graph::OperatorGraph;
use crate::runtime::core::hub::Hub;
use crate::runtime::core::output::OutputHandle;
use crate::runtime::core::retained::Retained;
use crate::runtime::core::stream::StreamRuntime;
use crate::runtime::durability::history::{read_segment, HistoryScan};
use crate::sql::{timestamp_literal, BackfillStart, CreateQuery};
use crate::time::Watermark;

/// A query being backfilled.
pub(in crate::runtime) struct Backfill {
    graph: OperatorGraph,
    path: Vec<usize>,
    /// The stream as the backfill has seen it: its watermark.
    stream: StreamRuntime,
    output: OutputHandle,
    /// Rows with an earlier event time are left out (nanoseconds).
    start: i64,
    /// History rows read so far (the next one to read has this number).
    read: u64,
    /// Rows run through the query.
    fed: u64,
    /// The oldest event time in the history read.
    oldest: Option<i64>,
    time_column: usize,
    started: Instant,
}

impl Backfill {
    /// Prepares the backfill of `def` (planned as `plan`) on the stream of `hub`, and reads
    /// what the stream's history holds now (under the hub's lock: only taking the list).
    pub(in crate::runtime) fn begin(
        hub: &Hub,
        name: &str,
        def: &CreateQuery,
        plan: &QueryPlan,
    ) -> Result<(Backfill, HistoryScan)> {
        let stream = &hub.stream.def;
        let Some(start) = def.start else {
            return Err(Error::Internal("a backfill without a start".into()));
        };
        let Some(history) = &hub.history else {
            return Err(Error::plan(
                sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "stream \"{}\" keeps no history to backfill from; set one with CREATE \
                     STREAM ... WITH (history = '7 days') or serve --history",
                    stream.name
                ),
            ));
        };
        let Some(time) = &stream.event_time else {
            return Err(Error::plan(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!(
                    "a backfill starts at an event time, and stream \"{}\" has none (no \
                     WATERMARK FOR column)",
                    stream.name
                ),
            ));
        };
        let start = match start {
            BackfillStart::At(nanos) => nanos,
            BackfillStart::Back(span) => {
                let newest = hub.stream.max_event_time.map_or(0, |t| t.nanos());
                newest.saturating_sub(crate::time::duration_nanos(span))
            }
        };
        let output = hub.new_output(name, plan);
        let mut graph = OperatorGraph::default();
        let path = graph.attach(
            name,
            plan.specs.clone(),
            Watermark::START,
            output.clone(),
            false,
        )?;
        let backfill = Backfill {
            graph,
            path,
            stream: StreamRuntime::new(stream.clone(), Retained::with_max_bytes(0, 0)),
            output,
            start,
            read: 0,
            fed: 0,
            oldest: None,
            time_column: time.column,
            started: Instant::now(),
        };
        Ok((backfill, history.scan()))
    }

    /// Runs the rows of `scan` not read yet through the query.
    pub(in crate::runtime) fn feed(&mut self, scan: &HistoryScan) -> Result<()> {
        for segment in &scan.segments {
            if segment.first_row + segment.rows <= self.read {
                continue;
            }
            let batches = read_segment(segment)?;
            self.feed_from(segment.first_row, &batches);
        }
        self.feed_from(scan.batches_first_row, &scan.batches);
        Ok(())
    }

    /// Runs `batches`, whose first row is numbered `first`, from row `self.read` on.
    fn feed_from(&mut self, first: u64, batches: &[RecordBatch]) {
        let mut number = first;
        for batch in batches {
            let n = batch.num_rows() as u64;
            if number + n > self.read {
                let skip = self.read.saturating_sub(number) as usize;
                self.run(&batch.slice(skip, batch.num_rows() - skip));
                self.read = number + n;
            }
            number += n;
        }
    }

    /// Runs one batch of history: the rows from the start on, and the watermark they imply.
    fn run(&mut self, batch: &RecordBatch) {
        let times = batch
            .column(self.time_column)
            .as_primitive::<TimestampNanosecondType>();
        let min = datafusion::arrow::compute::min(times);
        if let Some(min) = min {
            self.oldest = Some(self.oldest.map_or(min, |o| o.min(min)));
        }
        // Most batches lie wholly after the start: they go on as they are.
        let whole = min.is_some_and(|m| m >= self.start) && times.null_count() == 0;
        let batch = if whole {
            batch.clone()
        } else {
            let start = TimestampNanosecondArray::new_scalar(self.start);
            let Ok(keep) = gt_eq(times, &start) else {
                return;
            };
            // A row without an event time compares NULL, and the filter leaves it out.
            let Ok(batch) = filter_record_batch(batch, &keep) else {
                return;
            };
            batch
        };
        if batch.num_rows() == 0 {
            return;
        }
        self.fed += batch.num_rows() as u64;
        let advanced = self.stream.observe(&batch, Instant::now());
        self.graph.process(&batch);
        if let Some(wm) = advanced {
            self.graph.advance(wm);
        }
    }

    /// Under the hub's lock: reads the rows that arrived since [`Backfill::begin`], brings the
    /// operators to the stream's watermark and hands them to the stream's graph. Returns what
    /// to tell the client.
    pub(in crate::runtime) fn finish(
        mut self,
        hub: &mut Hub,
        name: &str,
        def: CreateQuery,
        plan: QueryPlan,
    ) -> Result<String> {
        if let Some(history) = &hub.history {
            self.feed(&history.scan())?;
        }
        if hub.stream.watermark > self.stream.watermark {
            self.graph.advance(hub.stream.watermark);
        }
        let states = self
            .path
            .iter()
            .map(|&node| self.graph.snapshot_node(node)?.encode())
            .collect::<Result<Vec<_>>>()?;
        let stream = hub.stream.def.name.clone();
        hub.attach_with(name, def, plan, self.output, Some(states))?;
        let mut notice = format!(
            "backfilled {} rows of stream \"{stream}\" from {} in {:.3} s",
            self.fed,
            timestamp_literal(self.start),
            self.started.elapsed().as_secs_f64()
        );
        match self.oldest {
            Some(oldest) if oldest > self.start => notice.push_str(&format!(
                "; its history begins at {}, later than the start",
                timestamp_literal(oldest)
            )),
            None => notice.push_str("; its history holds no rows yet"),
            _ => {}
        }
        Ok(notice)
    }
}
