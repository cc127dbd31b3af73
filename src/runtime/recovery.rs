//! What makes an engine durable: the data directory's lock, its ingest log and checkpoints,
//! and the two halves of recovery: taking a snapshot of every hub (each under its own lock,
//! at one log position per stream) and restoring one into freshly planned hubs.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;

use super::checkpoint::{CheckpointStore, Manifest, QueryState, Snapshot, StreamState};
use super::engine::Shared;
use super::output::QueryOutput;
use super::wal::{FsyncPolicy, IngestLog};
use crate::error::{Error, Result};
use crate::operators::snapshot::{decode, encode};
use crate::time::{EventTime, Watermark};

/// The durable side of an engine with a data directory.
pub struct Durability {
    /// The ingest log.
    pub log: Arc<IngestLog>,
    /// The checkpoints.
    pub checkpoints: CheckpointStore,
    /// Held for the engine's life: one server per data directory.
    _lock: File,
    /// One checkpoint at a time.
    pub checkpointing: Mutex<()>,
}

impl Durability {
    /// Locks `dir` (refusing a directory another process holds) and opens its log and
    /// checkpoints.
    pub fn open(
        dir: &Path,
        fsync: FsyncPolicy,
        keep_checkpoints: usize,
        salvage: bool,
    ) -> Result<Durability> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let lock_path = dir.join("LOCK");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(format!("opening {}", lock_path.display()), e))?;
        // A process that just stopped may still be letting go (its threads end within
        // moments); wait briefly before calling the directory taken.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut locked = lock.try_lock().is_ok();
        while !locked && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            locked = lock.try_lock().is_ok();
        }
        if !locked {
            return Err(Error::ResourceLimit(format!(
                "data directory {} is in use by another saql process (it holds {}); \
                 stop it or choose another --data-dir",
                dir.display(),
                lock_path.display()
            )));
        }
        Ok(Durability {
            log: IngestLog::open(&dir.join("wal"), fsync, salvage)?,
            checkpoints: CheckpointStore::new(dir.join("ckpt"), keep_checkpoints)?,
            _lock: lock,
            checkpointing: Mutex::new(()),
        })
    }
}

/// Takes every hub's state in memory: the catalog is held still (no DDL) while each hub is
/// locked in turn just long enough to snapshot its operators and outputs.
pub(super) fn snapshot(
    shared: &Shared,
    log: &IngestLog,
    epoch: u64,
    workers: usize,
) -> Result<Snapshot> {
    let mut manifest = Manifest {
        epoch,
        workers,
        catalog_sql: shared.catalog.to_sql(),
        catalog_seq: log.last_seq(),
        streams: Vec::new(),
        queries: Vec::new(),
    };
    let mut files = Vec::new();
    let mut names: Vec<&String> = shared.hubs.keys().collect();
    names.sort();
    for (i, name) in names.into_iter().enumerate() {
        let mut hub = shared.hubs[name].lock();
        // Frames of this stream are appended under its lock: all up to here are applied.
        let position = log.last_seq();
        let recent = format!("stream-{i}.arrow");
        files.push((
            recent.clone(),
            encode(&[], &hub.stream.def.schema, &hub.stream.recent.batches())?,
        ));
        manifest.streams.push(StreamState {
            name: name.clone(),
            position,
            watermark: hub.stream.watermark.0 .0,
            max_event_time: hub.stream.max_event_time.map(|t| t.0),
            rows_in: hub.stream.rows_in,
            late_rows: hub.stream.late_rows,
            recent,
        });
        let hub = &mut *hub;
        for (q, rt) in &hub.queries {
            let mut operators = Vec::new();
            for &node in &rt.path {
                let file = format!("op-{i}-{node}.snap");
                if !files.iter().any(|(f, _)| *f == file) {
                    files.push((file.clone(), hub.graph.snapshot_node(node)?));
                }
                operators.push(file);
            }
            let (rows_out, retained) = QueryOutput::lock(&rt.output).snapshot();
            let file = format!("results-{}.arrow", manifest.queries.len());
            files.push((file.clone(), encode(&[], &rt.plan.schema, &retained)?));
            manifest.queries.push(QueryState {
                name: q.clone(),
                rows_in: rt.rows_in,
                rows_out,
                retained: file,
                operators,
            });
        }
    }
    Ok(Snapshot { manifest, files })
}

/// Restores a checkpoint into `shared`, whose catalog was just rebuilt from the manifest's
/// SQL (so every hub and query exists, freshly planned).
pub(super) fn restore(shared: &Shared, store: &CheckpointStore, manifest: &Manifest) -> Result<()> {
    let epoch = manifest.epoch;
    let batches = |file: &str, schema: &SchemaRef| -> Result<Vec<_>> {
        let (_, batches) = decode(&store.read(epoch, file)?)?;
        for b in &batches {
            if b.schema().fields() != schema.fields() {
                return Err(Error::Internal(format!(
                    "checkpoint {epoch}: {file} does not match its schema"
                )));
            }
        }
        Ok(batches)
    };
    for s in &manifest.streams {
        let Some(hub) = shared.hubs.get(&s.name) else {
            continue;
        };
        let mut hub = hub.lock();
        let schema = hub.stream.def.schema.clone();
        let stream = &mut hub.stream;
        stream.watermark = Watermark(EventTime(s.watermark));
        stream.max_event_time = s.max_event_time.map(EventTime);
        stream.rows_in = s.rows_in;
        stream.late_rows = s.late_rows;
        stream.recent.clear();
        for b in batches(&s.recent, &schema)? {
            stream.recent.push(&b);
        }
    }
    let mut restored = std::collections::HashSet::new();
    for q in &manifest.queries {
        let Some(stream) = shared.query_streams.get(&q.name) else {
            continue;
        };
        let mut hub = shared.hubs[stream].lock();
        let hub = &mut *hub;
        let Some(rt) = hub.queries.get_mut(&q.name) else {
            continue;
        };
        if rt.path.len() != q.operators.len() {
            return Err(Error::Internal(format!(
                "checkpoint {epoch}: query \"{}\" has {} operators, the checkpoint {}",
                q.name,
                rt.path.len(),
                q.operators.len()
            )));
        }
        for (&node, file) in rt.path.iter().zip(&q.operators) {
            if restored.insert((stream.clone(), node)) {
                hub.graph
                    .restore_node(node, &store.read(epoch, file)?)
                    .map_err(|e| {
                        Error::Internal(format!(
                            "checkpoint {epoch}: restoring \"{}\" ({file}): {e}; it was taken \
                             with --workers {}",
                            q.name, manifest.workers
                        ))
                    })?;
            }
        }
        rt.rows_in = q.rows_in;
        let retained = batches(&q.retained, &rt.plan.schema)?;
        QueryOutput::lock(&rt.output).restore(q.rows_out, &retained);
    }
    Ok(())
}
