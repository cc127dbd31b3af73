//! Sources at run time: each `CREATE SOURCE` runs as a task (`source_loop`) that reads
//! records through its connector, decodes them into batches and ingests them into its
//! stream's hub as COPY does. Every batch goes to the ingest log in one frame together with
//! the source's progress (its position after the batch and its counters), and the hub keeps
//! that progress, so checkpoints hold it at the same point as the stream's state: after a
//! restart, recovery restores the checkpoint, replays the log (positions included) and the
//! source reads on from the last position the engine holds rows for: no row twice, none lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::runtime::engine::Engine;
use crate::sources::records::RecordDecoder;
use crate::sources::spec::{SourcePosition, SourceProgress, SourceSpec};

/// A source's run-time state, shared by its task, SHOW SOURCES and /metrics.
pub struct SourceRuntime {
    /// Its checked definition.
    pub spec: Arc<SourceSpec>,
    started: AtomicBool,
    stop: AtomicBool,
    status: Mutex<SourceStatus>,
}

/// What SHOW SOURCES shows of a source.
#[derive(Debug, Clone, Default)]
pub struct SourceStatus {
    /// `starting`, `running`, `waiting for file`, `finished`, `failed`, `stopped`.
    pub state: String,
    /// The last error (a bad record, or what stopped the source).
    pub error: Option<String>,
    /// Position and counters as of the last ingested batch.
    pub progress: SourceProgress,
}

impl SourceRuntime {
    /// A source not started yet.
    pub fn new(spec: SourceSpec) -> SourceRuntime {
        SourceRuntime {
            spec: Arc::new(spec),
            started: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            status: Mutex::new(SourceStatus {
                state: "starting".into(),
                ..SourceStatus::default()
            }),
        }
    }

    /// Its status now.
    pub fn status(&self) -> SourceStatus {
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(in crate::runtime) fn update(&self, f: impl FnOnce(&mut SourceStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Asks its task to stop (DROP SOURCE).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.update(|s| s.state = "stopped".into());
    }

    pub(in crate::runtime) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub(in crate::runtime) fn fail(&self, e: &Error) {
        tracing::warn!("source \"{}\" stopped: {e}", self.spec.name);
        self.update(|s| {
            s.state = "failed".into();
            s.error = Some(format!("{} ({})", e, e.sqlstate()));
        });
    }
}

impl Engine {
    /// Starts the task of every source not running yet (after recovery, after CREATE SOURCE).
    pub(in crate::runtime) fn start_sources(&self) -> Result<()> {
        let sources: Vec<_> = self.read().sources.values().cloned().collect();
        for rt in sources {
            if rt.started.swap(true, Ordering::SeqCst) {
                continue;
            }
            crate::runtime::connectors::source_loop::spawn(self.downgrade(), rt)?;
        }
        Ok(())
    }

    /// The progress the engine holds for a source (restored and replayed), and what it
    /// needs to decode: the stream's schema and the longest line allowed.
    pub(in crate::runtime) fn source_start(
        &self,
        rt: &SourceRuntime,
    ) -> Result<(SourceProgress, RecordDecoder)> {
        let shared = self.read();
        let (progress, schema) = if rt.spec.into_table {
            let table = shared
                .catalog
                .table(&rt.spec.stream)
                .ok_or_else(|| Error::undefined("table", &rt.spec.stream))?;
            let rows = table.store.read();
            let progress = match rows.sources.get(&rt.spec.name) {
                Some(json) => serde_json::from_str(json).map_err(|e| {
                    Error::Internal(format!(
                        "the position of source \"{}\" does not read back: {e}",
                        rt.spec.name
                    ))
                })?,
                None => SourceProgress::default(),
            };
            (progress, table.store.schema().clone())
        } else {
            let hub = shared
                .hubs
                .get(&rt.spec.stream)
                .ok_or_else(|| Error::undefined("stream", &rt.spec.stream))?;
            let hub = hub.lock();
            let progress = hub.sources.get(&rt.spec.name).cloned().unwrap_or_default();
            (progress, hub.stream.def.schema.clone())
        };
        let decoder = RecordDecoder::new(schema, rt.spec.format, rt.spec.paths.clone());
        Ok((progress, decoder))
    }

    /// The position of source `name` in the newest checkpoint written since this engine
    /// opened, with the checkpoint's epoch.
    pub(in crate::runtime) fn source_checkpointed(
        &self,
        name: &str,
    ) -> Option<(u64, SourcePosition)> {
        let held = self.durability.as_ref()?.held();
        Some((held.epoch, held.sources.get(name)?.clone()))
    }

    /// The epoch of the newest checkpoint written since this engine opened (0: none).
    pub(in crate::runtime) fn checkpointed_epoch(&self) -> u64 {
        self.durability.as_ref().map_or(0, |d| d.held().epoch)
    }

    /// Ingests a source's batch (`None`: none, its position alone moved) with its new
    /// progress, in one log frame, and waits until it is durable.
    pub(in crate::runtime) fn ingest_from_source(
        &self,
        rt: &Arc<SourceRuntime>,
        batch: Option<RecordBatch>,
        progress: SourceProgress,
    ) -> Result<()> {
        let name = &rt.spec.name;
        let batch = match batch {
            Some(b) => b,
            None => RecordBatch::new_empty(self.relation_schema(&rt.spec.stream)?),
        };
        let hub = {
            let shared = self.read();
            match shared.sources.get(name) {
                Some(current) if Arc::ptr_eq(current, rt) => {}
                _ => return Err(Error::undefined("source", name)),
            }
            if rt.spec.into_table {
                let table = shared
                    .catalog
                    .table(&rt.spec.stream)
                    .cloned()
                    .ok_or_else(|| Error::undefined("table", &rt.spec.stream))?;
                drop(shared);
                let json = serde_json::to_string(&progress)
                    .map_err(|e| Error::Internal(format!("a source's position: {e}")))?;
                self.upsert_from_source(&table, &batch, Some((name.clone(), json)))?;
                rt.update(|s| s.progress = progress);
                return Ok(());
            }
            shared
                .hubs
                .get(&rt.spec.stream)
                .cloned()
                .ok_or_else(|| Error::undefined("stream", &rt.spec.stream))?
        };
        let entry = crate::runtime::core::door::Entry {
            batches: vec![batch],
            source: Some((name.clone(), progress.clone())),
            lag: None,
        };
        self.enter(&rt.spec.stream, &hub, entry)?;
        rt.update(|s| s.progress = progress);
        Ok(())
    }
}
