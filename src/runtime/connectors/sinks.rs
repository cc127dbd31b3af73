//! Sinks at run time: each `CREATE SINK` runs as a task (`sink_loop`) that reads
//! its query's results with their sequence numbers and delivers them in order, advancing
//! its *delivered seq* only after the receiver acknowledged a batch.
//!
//! The delivered seq (and the sink's counters) is kept in a small file of its own,
//! `<data dir>/sinks/<hex of the name>.json`, written to a temporary name, fsynced and
//! renamed after every acknowledged batch. Not in checkpoints: a checkpoint every minute
//! would resend up to a minute of results after each restart, and the sink's progress is
//! not engine state that replay recomputes, it is what an outside system acknowledged. After
//! a restart (or `kill -9`) delivery resumes after the last acknowledged seq from the
//! query's retained results (`--retain-rows`): possibly a batch twice, never a gap, as long
//! as the rows are still retained. A sink that fell further behind than the retained rows
//! skips to the oldest one it can still read and counts the rows it skipped as `gap_rows`
//! (SHOW SINKS, /metrics); it is never allowed to hold results back from the query or slow
//! down ingest.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::runtime::core::output::{QueryOutput, SubscriptionEvents};
use crate::runtime::engine::Engine;
use crate::sinks::spec::SinkSpec;

/// What a sink has delivered, kept in its progress file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkProgress {
    /// Every result with a seq up to this one was acknowledged (or counted as a gap).
    pub delivered: u64,
    /// Rows acknowledged.
    pub rows: u64,
    /// Deliveries sent again after a failure.
    pub retries: u64,
    /// Failed delivery attempts (refused, error answer, timeout).
    pub errors: u64,
    /// Results skipped because they were no longer retained when the sink got to them.
    pub gap_rows: u64,
}

/// What SHOW SINKS shows of a sink.
#[derive(Debug, Clone, Default)]
pub struct SinkStatus {
    /// `starting`, `running`, `retrying`, `failed`, `stopped`.
    pub state: String,
    /// The last error (a failed attempt, a gap, or what stopped the sink).
    pub error: Option<String>,
    /// Counters and the delivered seq.
    pub progress: SinkProgress,
}

/// A sink's run-time state, shared by its thread, SHOW SINKS and /metrics.
pub struct SinkRuntime {
    /// Its checked definition.
    pub spec: Arc<SinkSpec>,
    /// Its progress file; `None` without a data directory.
    file: Option<PathBuf>,
    started: AtomicBool,
    stop: AtomicBool,
    status: Mutex<SinkStatus>,
    /// Where a sink without saved progress starts: fixed when its task is started (by the
    /// CREATE SINK statement itself), so that results produced before the task first attaches
    /// are delivered, or counted as a gap, not skipped unseen.
    first_from: std::sync::OnceLock<u64>,
}

impl SinkRuntime {
    /// A sink not started yet, keeping its progress under `dir` (if any).
    pub fn new(spec: SinkSpec, dir: Option<PathBuf>) -> SinkRuntime {
        let hex: String = spec.name.bytes().map(|b| format!("{b:02x}")).collect();
        SinkRuntime {
            file: dir.map(|d| d.join(format!("{hex}.json"))),
            spec: Arc::new(spec),
            started: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            status: Mutex::new(SinkStatus {
                state: "starting".into(),
                ..SinkStatus::default()
            }),
            first_from: std::sync::OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SinkStatus> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Its status now.
    pub fn status(&self) -> SinkStatus {
        self.lock().clone()
    }

    pub(in crate::runtime) fn update(&self, f: impl FnOnce(&mut SinkStatus)) {
        f(&mut self.lock());
    }

    pub(in crate::runtime) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Stops its thread (DROP SINK, DROP STREAM CASCADE); with `forget`, also removes its
    /// progress file, so that a sink created again under the name starts afresh.
    pub fn stop(&self, forget: bool) {
        let mut status = self.lock();
        self.stop.store(true, Ordering::SeqCst);
        status.state = "stopped".into();
        if let (true, Some(file)) = (forget, &self.file) {
            let _ = std::fs::remove_file(file);
        }
    }

    /// Removes a progress file left by an earlier sink of this name (a crash between
    /// logging its DROP and removing the file).
    pub(in crate::runtime) fn forget_stale(&self) {
        if let Some(file) = &self.file {
            let _ = std::fs::remove_file(file);
        }
    }

    /// The progress saved by an earlier run, if any.
    pub(in crate::runtime) fn load(&self) -> Result<Option<SinkProgress>> {
        let Some(file) = &self.file else {
            return Ok(None);
        };
        match std::fs::read(file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::Internal(format!("sink progress file {}: {e}", file.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("reading {}", file.display()), e)),
        }
    }

    /// Records `progress` (durably, with a data directory) unless the sink was stopped.
    pub(in crate::runtime) fn save(&self, progress: &SinkProgress) -> Result<()> {
        let mut status = self.lock();
        if self.stopped() {
            return Ok(());
        }
        if let Some(file) = &self.file {
            write_atomically(file, &serde_json::to_vec(progress).unwrap_or_default())?;
        }
        status.progress = progress.clone();
        Ok(())
    }

    pub(in crate::runtime) fn fail(&self, e: &Error) {
        tracing::warn!("sink \"{}\" stopped: {e}", self.spec.name);
        self.update(|s| {
            s.state = "failed".into();
            s.error = Some(format!("{} ({})", e, e.sqlstate()));
        });
    }
}

/// Writes `bytes` to `path` through a temporary file, fsynced and renamed.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .ok_or_else(|| Error::Internal("a sink file without a directory".into()))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp)
        .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(format!("renaming {}", tmp.display()), e))?;
    crate::runtime::durability::wal::sync_dir(dir)
}

/// Where a sink starts reading: the rows after `from` that are still retained, then live
/// rows.
pub(in crate::runtime) struct Attached {
    /// The query's result schema (without `seq`).
    pub schema: SchemaRef,
    /// The seq the sink has delivered through (moved past a gap, or set on a first start).
    pub from: u64,
    /// Results after the sink's last seq that are no longer retained.
    pub gap: u64,
    /// Retained rows after `from`, with their `seq` column.
    pub backlog: Vec<RecordBatch>,
    /// Live rows, with their `seq` column.
    pub events: SubscriptionEvents,
}

impl Engine {
    /// Starts the thread of every sink not running yet (after recovery, after CREATE SINK).
    pub(in crate::runtime) fn start_sinks(&self) -> Result<()> {
        let sinks: Vec<_> = self.read().sinks.values().cloned().collect();
        for rt in sinks {
            if rt.started.swap(true, Ordering::SeqCst) {
                continue;
            }
            if let Ok(from) = self.first_from(&rt) {
                let _ = rt.first_from.set(from);
            }
            crate::runtime::connectors::sink_loop::spawn(self.downgrade(), rt)?;
        }
        Ok(())
    }

    /// Where sinks keep their progress files.
    pub(in crate::runtime) fn sink_dir(&self) -> Option<PathBuf> {
        self.config.data_dir.as_ref().map(|d| d.join("sinks"))
    }

    /// Runs `f` on the output of the sink's query, under the query's lock.
    fn with_output<R>(
        &self,
        rt: &SinkRuntime,
        f: impl FnOnce(&mut QueryOutput) -> Result<R>,
    ) -> Result<R> {
        let (hub, _) = self.query_hub(&rt.spec.query)?;
        let hub = hub.lock();
        let q = hub
            .queries
            .get(&rt.spec.query)
            .ok_or_else(|| Error::undefined("query", &rt.spec.query))?;
        let mut output = QueryOutput::lock(&q.output);
        f(&mut output)
    }

    /// Where a sink starts that has delivered nothing: after the oldest retained result, or
    /// after the latest with `start = 'end'`.
    fn first_from(&self, rt: &SinkRuntime) -> Result<u64> {
        self.with_output(rt, |output| {
            Ok(match rt.spec.start_at_end {
                true => output.rows_out(),
                false => output.retained_after(),
            })
        })
    }

    /// Attaches a sink to its query: the retained rows after `delivered` (`None`: where
    /// [`Engine::first_from`] put it when it was started) and a live subscription, taken under
    /// the query's lock so that no row falls between them.
    pub(in crate::runtime) fn attach_sink(
        &self,
        rt: &SinkRuntime,
        delivered: Option<u64>,
    ) -> Result<Attached> {
        let from = match delivered.or(rt.first_from.get().copied()) {
            Some(from) => from,
            None => self.first_from(rt)?,
        };
        self.with_output(rt, |output| {
            let (gap, backlog) = output.retained_after_seq(from)?;
            let events = output.subscribe(None, true, self.config.subscriber_buffer_bytes, None)?;
            Ok(Attached {
                schema: output.subscriber_schema(false),
                from: from + gap,
                gap,
                backlog,
                events,
            })
        })
    }
}
