//! The body of a sink: a task on the server's tokio runtime that attaches to the
//! query (retained rows after the delivered seq, then live rows), cuts the rows into
//! batches of at most `batch_size`, and delivers each until it is acknowledged, retrying with
//! exponential backoff (doubling from `retry_initial_ms` up to `retry_max_ms`, each delay
//! drawn between half and all of it). Only then does the delivered seq advance and get saved.
//! While a batch is retried the query goes on: the sink's live subscription is cut off once
//! it holds `--subscriber-buffer-bytes` of results, and the sink attaches again from its
//! delivered seq when the batch finally goes through, reading the retained rows.

#[cfg(feature = "server")]
use crate::error::sqlstate;
use std::collections::VecDeque;
use std::sync::Arc;
#[cfg(feature = "server")]
use std::time::Duration;

use crate::error::{Error, Result};
use crate::runtime::connectors::sinks::SinkRuntime;
use crate::runtime::engine::WeakEngine;

/// Starts a sink: a task on the caller's runtime (the server's), or, for a library caller
/// with no runtime, a thread with a small one of its own.
#[cfg(feature = "server")]
pub(in crate::runtime) fn spawn(weak: WeakEngine, rt: Arc<SinkRuntime>) -> Result<()> {
    let name = format!("saql-sink-{}", rt.spec.name.replace('\0', ""));
    let sink = Arc::clone(&rt);
    let deliver = async move {
        if let Err(e) = run(&weak, &rt).await {
            if !rt.stopped() {
                rt.fail(&e);
            }
        }
    };
    crate::spawn::task_or_thread(name, deliver, move |e| {
        sink.fail(&Error::io("starting a sink's runtime", e))
    })
    .map_err(|e| Error::io("starting a sink thread", e))
}

/// Records `p` as delivered, off the async workers (it fsyncs).
#[cfg(feature = "server")]
async fn save(
    rt: &Arc<SinkRuntime>,
    p: &crate::runtime::connectors::sinks::SinkProgress,
) -> Result<()> {
    let (rt, p) = (Arc::clone(rt), p.clone());
    crate::spawn::blocking(move || rt.save(&p))
        .await
        .map_err(|e| Error::Internal(format!("saving a sink's progress: {e}")))?
}

/// Without the server feature there is no async runtime to deliver with.
#[cfg(not(feature = "server"))]
pub(in crate::runtime) fn spawn(_weak: WeakEngine, rt: Arc<SinkRuntime>) -> Result<()> {
    rt.fail(&Error::NotSupported(
        "sinks need saql built with the \"server\" feature".into(),
    ));
    Ok(())
}

/// How often a waiting sink checks that it was not dropped and the engine still runs.
#[cfg(feature = "server")]
const CHECK_EVERY: Duration = Duration::from_millis(200);

#[cfg(feature = "server")]
async fn run(weak: &WeakEngine, rt: &Arc<SinkRuntime>) -> Result<()> {
    use crate::runtime::core::output::SubscriptionEvent;
    use crate::sinks::Delivery;
    use tokio::sync::mpsc::error::TryRecvError;

    let mut progress = rt.load()?;
    let mut connector: Option<Box<dyn crate::sinks::Sink>> = None;
    'attach: loop {
        if rt.stopped() {
            return Ok(());
        }
        let Some(engine) = weak.upgrade() else {
            return Ok(());
        };
        let attached = engine.attach_sink(rt, progress.as_ref().map(|p| p.delivered))?;
        drop(engine);
        let mut p = progress.take().unwrap_or_default();
        if attached.gap > 0 {
            let note = format!(
                "{} results (seq {} to {}) were no longer retained when the sink got to them \
                 (--retain-rows): skipped",
                attached.gap,
                attached.from - attached.gap + 1,
                attached.from
            );
            tracing::warn!("sink \"{}\": {note}", rt.spec.name);
            p.gap_rows += attached.gap;
            rt.update(|s| s.error = Some(note));
        }
        p.delivered = p.delivered.max(attached.from);
        save(rt, &p).await?;
        let schema = attached.schema;
        let mut events = attached.events;
        let mut pending: VecDeque<_> = attached.backlog.into();
        if connector.is_none() {
            // Reach the target at once, so that one that cannot be reached (nothing
            // listening, or not the kind of server it should be) shows in SHOW SINKS before
            // the first result needs it; deliveries keep retrying it as before.
            let timeout = rt.spec.timeout;
            let connect = crate::sinks::connect(&rt.spec.name, &rt.spec.target, &schema);
            match tokio::time::timeout(timeout, connect).await {
                Ok(Ok(c)) => connector = Some(c),
                Ok(Err(e)) => unreachable_target(rt, &e.to_string()),
                Err(_) => unreachable_target(
                    rt,
                    &format!("no answer within {} ms (timeout_ms)", timeout.as_millis()),
                ),
            }
        }
        if connector.is_some() {
            rt.update(|s| s.state = "running".into());
        }
        loop {
            // Take what is waiting, up to a batch; wait a moment when nothing is.
            loop {
                let queued: usize = pending.iter().map(|b| b.num_rows()).sum();
                if queued >= rt.spec.batch_rows {
                    break;
                }
                let ev = match events.try_recv() {
                    Ok(ev) => Some(ev),
                    Err(TryRecvError::Disconnected) => None,
                    Err(TryRecvError::Empty) if queued > 0 => break,
                    Err(TryRecvError::Empty) => {
                        match tokio::time::timeout(CHECK_EVERY, events.recv()).await {
                            Ok(ev) => ev,
                            Err(_) => {
                                if rt.stopped() || weak.upgrade().is_none() {
                                    return Ok(());
                                }
                                continue;
                            }
                        }
                    }
                };
                match ev {
                    Some(SubscriptionEvent::Rows(b)) => pending.push_back(b),
                    Some(SubscriptionEvent::Failed(f))
                        if f.sqlstate == sqlstate::CONFIGURATION_LIMIT_EXCEEDED =>
                    {
                        // Fell behind while retrying: read on from the retained rows.
                        progress = Some(p);
                        continue 'attach;
                    }
                    Some(SubscriptionEvent::Failed(f)) => {
                        return Err(Error::Execution(format!(
                            "query \"{}\" failed: {f}",
                            rt.spec.query
                        )))
                    }
                    None => {
                        if rt.stopped() || weak.upgrade().is_none() {
                            return Ok(());
                        }
                        return Err(Error::Execution(format!(
                            "query \"{}\" is gone",
                            rt.spec.query
                        )));
                    }
                }
            }
            let Some(batch) = next_batch(&mut pending, p.delivered, rt.spec.batch_rows)? else {
                continue;
            };
            let delivery = Delivery::encode(&batch)?;
            if !deliver(weak, rt, &mut connector, &schema, &delivery, &mut p).await {
                return Ok(());
            }
            p.delivered = delivery.last;
            p.rows += batch.num_rows() as u64;
            if weak.upgrade().is_none() {
                return Ok(());
            }
            save(rt, &p).await?;
            rt.update(|s| s.state = "running".into());
        }
    }
}

/// The next rows to deliver: those after `delivered`, at most `max` of them, taken from
/// the front of `pending` (batches whose first column is `seq`, in seq order).
#[cfg_attr(
    not(feature = "server"),
    allow(dead_code, reason = "sinks deliver only with the server feature")
)]
pub(in crate::runtime) fn next_batch(
    pending: &mut VecDeque<datafusion::arrow::record_batch::RecordBatch>,
    delivered: u64,
    max: usize,
) -> Result<Option<datafusion::arrow::record_batch::RecordBatch>> {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;
    let mut parts = Vec::new();
    let mut rows = 0;
    while rows < max {
        let Some(b) = pending.pop_front() else { break };
        let seqs = b.column(0).as_primitive::<Int64Type>();
        // Rows at or below the delivered seq were sent already (a resumed sink).
        let skip = seqs
            .values()
            .iter()
            .take_while(|&&s| s as u64 <= delivered)
            .count();
        let b = b.slice(skip, b.num_rows() - skip);
        let take = b.num_rows().min(max - rows);
        if take < b.num_rows() {
            pending.push_front(b.slice(take, b.num_rows() - take));
        }
        if take > 0 {
            parts.push(b.slice(0, take));
            rows += take;
        }
    }
    match parts.len() {
        0 => Ok(None),
        1 => Ok(parts.pop()),
        _ => Ok(Some(datafusion::arrow::compute::concat_batches(
            &parts[0].schema(),
            &parts,
        )?)),
    }
}

/// Shows that a sink's target cannot be reached (secrets masked).
#[cfg(feature = "server")]
fn unreachable_target(rt: &SinkRuntime, why: &str) {
    let note = crate::sql::sink::mask(
        &format!("cannot reach the target: {why}"),
        &rt.spec.ddl.secrets(),
    );
    tracing::warn!("sink \"{}\": {note}", rt.spec.name);
    rt.update(|s| {
        s.state = "retrying".into();
        s.error = Some(note);
    });
}

/// Delivers `d` until it is acknowledged (true) or the sink is stopped or the engine gone
/// (false), counting failed attempts and retries in `p` and connecting when there is no
/// connection.
#[cfg(feature = "server")]
async fn deliver(
    weak: &WeakEngine,
    rt: &SinkRuntime,
    connector: &mut Option<Box<dyn crate::sinks::Sink>>,
    schema: &datafusion::arrow::datatypes::SchemaRef,
    d: &crate::sinks::Delivery,
    p: &mut crate::runtime::connectors::sinks::SinkProgress,
) -> bool {
    use rand::Rng;
    let timeout = rt.spec.timeout;
    let mut delay = rt.spec.retry_initial;
    let gone = || rt.stopped() || weak.upgrade().is_none();
    loop {
        if gone() {
            return false;
        }
        let attempt = async {
            if connector.is_none() {
                *connector =
                    Some(crate::sinks::connect(&rt.spec.name, &rt.spec.target, schema).await?);
            }
            match connector.as_ref() {
                Some(c) => c.send(d, timeout).await,
                None => Err(Error::Internal("a sink without a connection".into())),
            }
        };
        let result = match tokio::time::timeout(timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(Error::Execution(format!(
                "no acknowledgement within {} ms (timeout_ms)",
                timeout.as_millis()
            ))),
        };
        let e = match result {
            Ok(()) => return true,
            Err(e) => e,
        };
        p.errors += 1;
        // A broken connection is opened again on the next attempt.
        *connector = None;
        let note = crate::sql::sink::mask(&format!("seq {}: {e}", d.key()), &rt.spec.ddl.secrets());
        tracing::warn!(
            "sink \"{}\": {note}; retrying in up to {delay:?}",
            rt.spec.name
        );
        let errors = p.errors;
        rt.update(|s| {
            s.state = "retrying".into();
            s.error = Some(note);
            s.progress.errors = errors;
        });
        let half = delay / 2;
        let wait = half + rand::thread_rng().gen_range(Duration::ZERO..=half);
        let until = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < until {
            if gone() {
                return false;
            }
            tokio::time::sleep_until(until.min(tokio::time::Instant::now() + CHECK_EVERY)).await;
        }
        delay = (delay * 2).min(rt.spec.retry_max);
        p.retries += 1;
        let retries = p.retries;
        rt.update(|s| s.progress.retries = retries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use datafusion::arrow::record_batch::RecordBatch;

    fn seqs(range: std::ops::Range<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("seq", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(range))]).unwrap()
    }

    #[test]
    fn batches_skip_delivered_rows_and_respect_the_size() {
        let mut pending: VecDeque<_> = vec![seqs(1..4), seqs(4..6), seqs(6..12)].into();
        let mut out = Vec::new();
        while let Some(b) = next_batch(&mut pending, 2, 4).unwrap() {
            assert!(b.num_rows() <= 4);
            out.push(b.column(0).as_primitive::<Int64Type>().values().to_vec());
        }
        assert_eq!(out, vec![vec![3, 4, 5, 6], vec![7, 8, 9, 10], vec![11]]);
        let mut pending: VecDeque<_> = vec![seqs(1..4)].into();
        assert!(next_batch(&mut pending, 5, 4).unwrap().is_none());
        assert!(pending.is_empty());
    }
}
