//! Where a continuous query's results go: its subscribers and its retained rows. Every result
//! row gets the query's next sequence number (1, 2, ...), so a subscriber that lost its
//! connection, or outlived a server restart, resumes after the last number it saw with no gap
//! and no duplicate (`SUBSCRIBE q FROM n`). The operator graph holds an [`OutputHandle`] in the
//! node that produces the query's rows and delivers to it directly.

use crate::error::sqlstate;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use datafusion::arrow::array::{ArrayRef, Int64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use crate::error::{Error, Result};
use crate::runtime::core::retained::Retained;
use crate::runtime::statements::subscribe::Shape;
use crate::time::Watermark;

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum SubscriptionEvent {
    /// New result rows.
    Rows(RecordBatch),
    /// The query failed and will produce nothing more (or this subscriber was cut off).
    Failed(QueryFailure),
}

/// Why a query (or one subscription to it) stopped: an SQLSTATE and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct QueryFailure {
    /// SQLSTATE: 53200 a state bound, 53400 a subscriber too far behind, XX000 otherwise.
    pub sqlstate: &'static str,
    /// What happened.
    pub message: String,
}

impl QueryFailure {
    /// The failure an error raised while running a query stands for.
    pub fn from_error(e: &Error) -> Self {
        let sqlstate = match e.sqlstate() {
            s if s.starts_with("53") || s.starts_with("54") || s.starts_with("22") => s,
            _ => sqlstate::INTERNAL_ERROR,
        };
        QueryFailure {
            sqlstate,
            message: e.to_string(),
        }
    }
}

/// How many batches a subscriber may fall behind before it is disconnected (its bytes are
/// bounded too, see [`QueryOutput::subscribe`]).
pub const SUBSCRIBER_BACKLOG: usize = 4096;

/// Default bound on the result bytes queued for one subscriber.
pub const DEFAULT_SUBSCRIBER_BUFFER_BYTES: usize = 64 << 20;

/// What a query sends a subscriber: what it receives, or a move of the stream's watermark
/// (sent only to subscribers that asked for progress).
#[derive(Debug)]
enum Event {
    Received(SubscriptionEvent),
    Progress(Watermark),
}

/// The receiving end of a subscription: result batches in order, with the bytes still
/// queued counted so that the sender can cut off a subscriber that stopped reading. A
/// [`Shape`] (set with [`SubscriptionEvents::shaped`]) makes the rows this subscriber sees.
pub struct SubscriptionEvents {
    rx: mpsc::Receiver<Event>,
    queued: Arc<AtomicUsize>,
    shape: Option<Shape>,
}

impl std::fmt::Debug for SubscriptionEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionEvents")
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}

impl SubscriptionEvents {
    /// These events as `shape` makes them: a view's rows, progress rows.
    pub fn shaped(mut self, shape: Shape) -> Self {
        self.shape = Some(shape);
        self
    }

    /// The next event; `None` when the query is gone or this subscriber was dropped.
    pub async fn recv(&mut self) -> Option<SubscriptionEvent> {
        loop {
            let ev = self.rx.recv().await?;
            if let Some(ev) = self.received(ev) {
                return Some(ev);
            }
        }
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Result<SubscriptionEvent, TryRecvError> {
        loop {
            let ev = self.rx.try_recv()?;
            if let Some(ev) = self.received(ev) {
                return Ok(ev);
            }
        }
    }

    /// What the subscriber sees of `ev`: nothing when a view keeps none of its rows.
    fn received(&mut self, ev: Event) -> Option<SubscriptionEvent> {
        let shaped = match ev {
            Event::Received(SubscriptionEvent::Rows(b)) => {
                let n = b.get_array_memory_size();
                let _ = self
                    .queued
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                        Some(q.saturating_sub(n))
                    });
                match &mut self.shape {
                    Some(shape) => shape.rows(b).transpose()?,
                    None => Ok(b),
                }
            }
            Event::Received(failed) => return Some(failed),
            Event::Progress(wm) => self.shape.as_ref()?.progress_row(wm),
        };
        Some(match shaped {
            Ok(rows) => SubscriptionEvent::Rows(rows),
            Err(e) => SubscriptionEvent::Failed(QueryFailure::from_error(&e)),
        })
    }
}

/// The name of the sequence-number column a subscriber can ask for (`WITH SEQ`).
pub const SEQ_COLUMN: &str = "seq";

/// A query's output, shared between the graph node producing it and the engine.
pub type OutputHandle = Arc<Mutex<QueryOutput>>;

struct Subscriber {
    tx: mpsc::Sender<Event>,
    /// Bytes of result batches sent and not yet received.
    queued: Arc<AtomicUsize>,
    /// The most bytes that may be queued before the subscriber is cut off.
    max_bytes: usize,
    /// Prepend the `seq` column.
    with_seq: bool,
    /// Send the stream's watermark each time it moves.
    progress: bool,
}

/// A query's results: counters, retained rows, subscribers.
pub struct QueryOutput {
    name: String,
    schema: SchemaRef,
    /// Result rows produced so far; the last row's sequence number.
    rows_out: u64,
    failed: Option<QueryFailure>,
    retained: Retained,
    subscribers: Vec<Subscriber>,
    /// Subscribers cut off for falling behind.
    subscribers_dropped: u64,
}

impl QueryOutput {
    /// A handle for a query with no results yet, keeping its newest results in `retained`.
    pub fn handle(name: &str, schema: SchemaRef, retained: Retained) -> OutputHandle {
        Arc::new(Mutex::new(QueryOutput {
            name: name.to_string(),
            schema,
            rows_out: 0,
            failed: None,
            retained,
            subscribers: Vec::new(),
            subscribers_dropped: 0,
        }))
    }

    /// Locks a handle; a panic elsewhere while it was held leaves counters that are still
    /// usable.
    pub fn lock(handle: &OutputHandle) -> MutexGuard<'_, QueryOutput> {
        handle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Result rows produced so far, which is also the sequence number of the last one.
    pub fn rows_out(&self) -> u64 {
        self.rows_out
    }

    /// Why the query stopped, if it failed.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_ref().map(|f| f.message.as_str())
    }

    /// Why the query failed, if it did.
    pub fn failure(&self) -> Option<&QueryFailure> {
        self.failed.as_ref()
    }

    /// The retained result rows, oldest first.
    pub fn retained(&self) -> Vec<RecordBatch> {
        self.retained.batches()
    }

    /// Memory the retained result rows hold, in bytes.
    pub fn retained_bytes(&self) -> usize {
        self.retained.bytes()
    }

    /// The sequence number after which the retained rows start: a subscriber from it gets
    /// all of them (`SUBSCRIBE q WITH (SNAPSHOT)`).
    pub fn retained_after(&self) -> u64 {
        self.rows_out - self.retained.rows() as u64
    }

    /// The schema a subscriber sees: the query's, after a `seq` column if it asked for one.
    pub fn subscriber_schema(&self, with_seq: bool) -> SchemaRef {
        if !with_seq {
            return self.schema.clone();
        }
        let mut fields = vec![Field::new(SEQ_COLUMN, DataType::Int64, false)];
        fields.extend(self.schema.fields().iter().map(|f| f.as_ref().clone()));
        Arc::new(Schema::new(fields))
    }

    /// Adds a subscriber. With `from`, it first receives the retained rows numbered after
    /// `from` (an error if some of those are no longer retained), then live rows. A
    /// subscriber whose unread results pass `max_bytes` is cut off with 53400. With
    /// `progress` (the stream's watermark now), it is also sent the watermark, now and each
    /// time it moves.
    pub fn subscribe(
        &mut self,
        from: Option<u64>,
        with_seq: bool,
        max_bytes: usize,
        progress: Option<Watermark>,
    ) -> Result<SubscriptionEvents> {
        // One slot more than the backlog, for the event that cuts a subscriber off.
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BACKLOG + 1);
        let queued = Arc::new(AtomicUsize::new(0));
        if let Some(from) = from {
            let first_retained = self.rows_out - self.retained.rows() as u64 + 1;
            if from + 1 < first_retained {
                return Err(Error::invalid_input(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!(
                        "query \"{}\" keeps results from seq {first_retained} on (--retain-rows); \
                         rows {} to {} are gone: resume from {} or later",
                        self.name,
                        from + 1,
                        first_retained - 1,
                        first_retained - 1
                    ),
                ));
            }
            let mut seq = first_retained;
            for b in self.retained.batches() {
                let n = b.num_rows() as u64;
                if seq + n > from + 1 {
                    let skip = (from + 1).saturating_sub(seq) as usize;
                    let part = b.slice(skip, b.num_rows() - skip);
                    let first = seq + skip as u64;
                    let rows = numbered(&part, first, with_seq)?;
                    let size = queued.fetch_add(rows.get_array_memory_size(), Ordering::AcqRel);
                    if size > max_bytes
                        || tx
                            .try_send(Event::Received(SubscriptionEvent::Rows(rows)))
                            .is_err()
                    {
                        return Err(Error::limit(
                            sqlstate::CONFIGURATION_LIMIT_EXCEEDED,
                            format!(
                                "resuming \"{}\" from seq {from} would queue more than \
                             {SUBSCRIBER_BACKLOG} batches or {max_bytes} bytes \
                             (--subscriber-buffer-bytes)",
                                self.name
                            ),
                        ));
                    }
                }
                seq += n;
            }
        }
        if let Some(reason) = &self.failed {
            let _ = tx.try_send(Event::Received(SubscriptionEvent::Failed(reason.clone())));
        }
        if let Some(wm) = progress.filter(|wm| *wm != Watermark::START) {
            let _ = tx.try_send(Event::Progress(wm));
        }
        self.subscribers.push(Subscriber {
            tx,
            queued: queued.clone(),
            max_bytes,
            with_seq,
            progress: progress.is_some(),
        });
        Ok(SubscriptionEvents {
            rx,
            queued,
            shape: None,
        })
    }

    /// Tells the subscribers that asked for progress that the stream's watermark moved to
    /// `wm` (after the results it completed). A subscriber whose queue is half full misses
    /// it (the room is kept for rows); the next one says more.
    pub fn progress(&mut self, wm: Watermark) {
        for s in self.subscribers.iter().filter(|s| s.progress) {
            if s.tx.capacity() > SUBSCRIBER_BACKLOG / 2 {
                let _ = s.tx.try_send(Event::Progress(wm));
            }
        }
    }

    /// The retained rows numbered after `from`, with their `seq` column, and how many rows
    /// after `from` are no longer retained (the gap a reader resuming there would have).
    /// Unlike [`QueryOutput::subscribe`] with `from`, the rows are not queued: a sink reads
    /// them at its own pace.
    #[cfg_attr(
        not(feature = "server"),
        allow(dead_code, reason = "sinks deliver only with the server feature")
    )]
    pub fn retained_after_seq(&self, from: u64) -> Result<(u64, Vec<RecordBatch>)> {
        let first = self.retained_after() + 1;
        let gap = first.saturating_sub(from + 1);
        let mut seq = first;
        let mut out = Vec::new();
        for b in self.retained.batches() {
            let n = b.num_rows() as u64;
            if seq + n > from + 1 {
                let skip = (from + 1).saturating_sub(seq) as usize;
                out.push(numbered(
                    &b.slice(skip, b.num_rows() - skip),
                    seq + skip as u64,
                    true,
                )?);
            }
            seq += n;
        }
        Ok((gap, out))
    }

    /// Live subscribers, after dropping those whose client went away.
    pub fn subscribers(&mut self) -> usize {
        self.subscribers.retain(|s| !s.tx.is_closed());
        self.subscribers.len()
    }

    /// Result bytes waiting for the slowest live subscriber (0 without subscribers).
    pub fn queued_bytes(&self) -> usize {
        self.subscribers
            .iter()
            .map(|s| s.queued.load(std::sync::atomic::Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// Numbers new result rows and hands them to the subscribers and the retained rows.
    pub fn deliver(&mut self, batches: &[RecordBatch]) {
        if self.failed.is_some() {
            return;
        }
        for b in batches {
            if b.num_rows() == 0 {
                continue;
            }
            let first = self.rows_out + 1;
            self.rows_out += b.num_rows() as u64;
            self.retained.push(b);
            let name = &self.name;
            let dropped = &mut self.subscribers_dropped;
            self.subscribers.retain(|s| {
                let rows = match numbered(b, first, s.with_seq) {
                    Ok(rows) => rows,
                    Err(e) => {
                        tracing::warn!("numbering results of \"{name}\": {e}");
                        return false;
                    }
                };
                // A subscriber that fell too far behind is cut off rather than letting
                // memory grow without bound; its client gets 53400 after what it was sent.
                // (One batch larger than the bound still goes to a subscriber that is
                // keeping up.)
                let size = rows.get_array_memory_size();
                let before = s.queued.fetch_add(size, Ordering::AcqRel);
                let queued = before + size;
                if (before == 0 || queued <= s.max_bytes)
                    && s.tx
                        .try_send(Event::Received(SubscriptionEvent::Rows(rows)))
                        .is_ok()
                {
                    return true;
                }
                tracing::warn!("a subscriber of \"{name}\" fell behind by {queued} bytes: cut off");
                let _ =
                    s.tx.try_send(Event::Received(SubscriptionEvent::Failed(QueryFailure {
                        sqlstate: sqlstate::CONFIGURATION_LIMIT_EXCEEDED,
                        message: format!(
                            "subscription to \"{name}\" cut off: the client fell behind by more \
                         than {} bytes or {SUBSCRIBER_BACKLOG} batches of results \
                         (--subscriber-buffer-bytes); read faster or resume with \
                         SUBSCRIBE {name} FROM <last seq>",
                            s.max_bytes
                        ),
                    })));
                *dropped += 1;
                false
            });
        }
    }

    /// Marks the query failed and tells its subscribers.
    pub fn fail(&mut self, reason: QueryFailure) {
        if self.failed.is_some() {
            return;
        }
        tracing::warn!("query \"{}\" failed: {reason}", self.name);
        for s in self.subscribers.drain(..) {
            let _ =
                s.tx.try_send(Event::Received(SubscriptionEvent::Failed(QueryFailure {
                    sqlstate: reason.sqlstate,
                    message: format!("query \"{}\" failed: {}", self.name, reason.message),
                })));
        }
        self.failed = Some(reason);
    }

    /// Subscribers cut off so far because they fell too far behind.
    pub fn subscribers_dropped(&self) -> u64 {
        self.subscribers_dropped
    }

    /// The state a checkpoint keeps: the row count and the retained rows.
    pub fn snapshot(&self) -> (u64, Vec<RecordBatch>) {
        (self.rows_out, self.retained.batches())
    }

    /// Restores what [`QueryOutput::snapshot`] returned.
    pub fn restore(&mut self, rows_out: u64, retained: &[RecordBatch]) {
        self.rows_out = rows_out;
        self.retained.clear();
        for b in retained {
            self.retained.push(b);
        }
    }
}

/// `batch` with a leading `seq` column numbered from `first`, if asked for.
fn numbered(batch: &RecordBatch, first: u64, with_seq: bool) -> Result<RecordBatch> {
    if !with_seq {
        return Ok(batch.clone());
    }
    let seq: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..batch.num_rows() as i64).map(|i| first as i64 + i),
    ));
    let mut fields = vec![Field::new(SEQ_COLUMN, DataType::Int64, false)];
    fields.extend(batch.schema().fields().iter().map(|f| f.as_ref().clone()));
    let mut columns = vec![seq];
    columns.extend(batch.columns().iter().cloned());
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    fn batch(values: std::ops::Range<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(values))]).unwrap()
    }

    fn seqs(rx: &mut SubscriptionEvents) -> Vec<i64> {
        let mut out = Vec::new();
        while let Ok(SubscriptionEvent::Rows(b)) = rx.try_recv() {
            out.extend(b.column(0).as_primitive::<Int64Type>().values().iter());
        }
        out
    }

    #[test]
    fn resuming_subscribers_get_each_row_once_after_their_last_seq() {
        let h = QueryOutput::handle("q", batch(0..1).schema(), Retained::new(5));
        let mut out = QueryOutput::lock(&h);
        out.deliver(&[batch(0..3), batch(3..7)]);
        assert_eq!(out.rows_out(), 7);
        // Rows 3..=7 are retained (5 rows).
        let mut rx = out.subscribe(Some(4), true, usize::MAX, None).unwrap();
        out.deliver(&[batch(7..9)]);
        assert_eq!(seqs(&mut rx), vec![5, 6, 7, 8, 9]);
        let mut rx = out.subscribe(Some(9), true, usize::MAX, None).unwrap();
        assert!(seqs(&mut rx).is_empty());
        let err = out.subscribe(Some(2), true, usize::MAX, None).unwrap_err();
        assert!(err.to_string().contains("from seq 5"), "{err}");
        // Resuming from the last row that fell out of retention is still exact.
        let mut rx = out.subscribe(Some(4), true, usize::MAX, None).unwrap();
        assert_eq!(seqs(&mut rx), vec![5, 6, 7, 8, 9]);
    }

    #[test]
    fn a_subscriber_past_its_byte_bound_is_cut_off_with_53400() {
        let h = QueryOutput::handle("q", batch(0..1).schema(), Retained::new(0));
        let mut out = QueryOutput::lock(&h);
        let size = batch(0..100).get_array_memory_size();
        let mut slow = out.subscribe(None, false, 3 * size, None).unwrap();
        let mut fast = out.subscribe(None, false, 3 * size, None).unwrap();
        for i in 0..5 {
            out.deliver(&[batch(i * 100..(i + 1) * 100)]);
            // One reader keeps up.
            assert!(matches!(fast.try_recv(), Ok(SubscriptionEvent::Rows(_))));
        }
        assert_eq!(out.subscribers(), 1);
        assert_eq!(out.subscribers_dropped(), 1);
        let mut rows = 0;
        loop {
            match slow.try_recv() {
                Ok(SubscriptionEvent::Rows(b)) => rows += b.num_rows(),
                Ok(SubscriptionEvent::Failed(f)) => {
                    assert_eq!(f.sqlstate, "53400");
                    break;
                }
                Err(e) => panic!("no error after the rows: {e:?}"),
            }
        }
        assert_eq!(rows, 300);
    }

    #[test]
    fn retained_rows_after_a_seq_and_the_gap_before_them() {
        let h = QueryOutput::handle("q", batch(0..1).schema(), Retained::new(5));
        let mut out = QueryOutput::lock(&h);
        out.deliver(&[batch(0..3), batch(3..7)]);
        // Rows 3..=7 are retained.
        let first = |bs: &[RecordBatch]| bs[0].column(0).as_primitive::<Int64Type>().value(0);
        let (gap, rows) = out.retained_after_seq(0).unwrap();
        assert_eq!((gap, first(&rows)), (2, 3));
        let (gap, rows) = out.retained_after_seq(4).unwrap();
        assert_eq!((gap, first(&rows)), (0, 5));
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
        let (gap, rows) = out.retained_after_seq(7).unwrap();
        assert_eq!((gap, rows.len()), (0, 0));
        let (gap, rows) = out.retained_after_seq(9).unwrap();
        assert_eq!((gap, rows.len()), (0, 0));
    }

    #[test]
    fn restore_continues_the_numbering() {
        let h = QueryOutput::handle("q", batch(0..1).schema(), Retained::new(10));
        let (rows, kept) = {
            let mut out = QueryOutput::lock(&h);
            out.deliver(&[batch(0..4)]);
            out.snapshot()
        };
        let h2 = QueryOutput::handle("q", batch(0..1).schema(), Retained::new(10));
        let mut out = QueryOutput::lock(&h2);
        out.restore(rows, &kept);
        let mut rx = out.subscribe(Some(2), true, usize::MAX, None).unwrap();
        out.deliver(&[batch(4..5)]);
        assert_eq!(seqs(&mut rx), vec![3, 4, 5]);
    }
}
