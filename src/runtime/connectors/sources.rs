//! Sources at run time: each `CREATE SOURCE` runs on its own thread, reads records, decodes
//! them into batches and ingests them into its stream's hub as COPY does. Every batch goes to
//! the ingest log in one frame together with the source's progress (its position after the
//! batch and its counters), and the hub keeps that progress, so checkpoints hold it at the
//! same point as the stream's state: after a restart, recovery restores the checkpoint,
//! replays the log (positions included) and the source reads on from the last position
//! the engine holds rows for: no row twice, none lost.

use crate::error::sqlstate;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::runtime::engine::{Engine, WeakEngine};
use crate::sources::file::{FileTail, Poll};
use crate::sources::records::RecordDecoder;
use crate::sources::spec::{Connector, OnError, SourcePosition, SourceProgress, SourceSpec};

/// Most bytes of input read into one batch.
const CHUNK_BYTES: usize = 1 << 20;

/// A source's run-time state, shared by its thread, SHOW SOURCES and /metrics.
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

    fn update(&self, f: impl FnOnce(&mut SourceStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Asks its thread to stop (DROP SOURCE).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.update(|s| s.state = "stopped".into());
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn fail(&self, e: &Error) {
        tracing::warn!("source \"{}\" stopped: {e}", self.spec.name);
        self.update(|s| {
            s.state = "failed".into();
            s.error = Some(format!("{} ({})", e, e.sqlstate()));
        });
    }
}

impl Engine {
    /// Starts the thread of every source not running yet (after recovery, after CREATE SOURCE).
    pub(in crate::runtime) fn start_sources(&self) -> Result<()> {
        let sources: Vec<_> = self.read().sources.values().cloned().collect();
        for rt in sources {
            if rt.started.swap(true, Ordering::SeqCst) {
                continue;
            }
            let weak = self.downgrade();
            let thread_rt = rt.clone();
            crate::spawn::thread(
                format!("saql-source-{}", rt.spec.name.replace('\0', "")),
                move || run_source(weak, thread_rt),
            )
            .map_err(|e| Error::io("starting a source thread", e))?;
        }
        Ok(())
    }

    /// The progress the engine holds for a source (restored and replayed), and what it
    /// needs to decode: the stream's schema and the longest line allowed.
    fn source_start(&self, rt: &SourceRuntime) -> Result<(SourceProgress, RecordDecoder)> {
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

    /// Ingests a source's batch (possibly empty: its position alone moved) with its new
    /// progress, in one log frame, and waits until it is durable.
    fn ingest_from_source(
        &self,
        rt: &Arc<SourceRuntime>,
        batch: RecordBatch,
        progress: SourceProgress,
    ) -> Result<()> {
        let name = &rt.spec.name;
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

/// The body of a source's thread: runs until the source is dropped, fails, finishes, or
/// the engine is gone.
fn run_source(weak: WeakEngine, rt: Arc<SourceRuntime>) {
    let result = match &rt.spec.connector {
        Connector::File { .. } => run_file(&weak, &rt),
        #[cfg(feature = "kafka")]
        Connector::Kafka { .. } => run_kafka(&weak, &rt),
        #[cfg(not(feature = "kafka"))]
        Connector::Kafka { .. } => Err(Error::NotSupported(
            "this saql was built without the \"kafka\" feature".into(),
        )),
    };
    if let Err(e) = result {
        if !rt.stopped() {
            rt.fail(&e);
        }
    }
}

fn run_file(weak: &WeakEngine, rt: &Arc<SourceRuntime>) -> Result<()> {
    let Connector::File {
        path,
        follow,
        start_at_end,
    } = &rt.spec.connector
    else {
        return Err(Error::Internal("not a file source".into()));
    };
    let Some(engine) = weak.upgrade() else {
        return Ok(());
    };
    let (mut progress, mut decoder) = engine.source_start(rt)?;
    let max_line = engine.config.max_copy_line_bytes;
    drop(engine);
    rt.update(|s| {
        s.progress = progress.clone();
        s.state = "running".into();
    });
    let mut tail = FileTail::new(
        path.clone(),
        *follow,
        rt.spec.header,
        progress.position.clone(),
        *start_at_end,
        max_line,
    );
    let stop_at_bad = rt.spec.on_error == OnError::Fail;
    loop {
        if rt.stopped() {
            return Ok(());
        }
        let Some(engine) = weak.upgrade() else {
            return Ok(());
        };
        match tail.poll(CHUNK_BYTES)? {
            Poll::Lines(chunk) => {
                let mut lines: Vec<&[u8]> = chunk.data.split(|&b| b == b'\n').collect();
                lines.pop(); // after the last newline
                for line in lines.iter_mut() {
                    if let Some(stripped) = line.strip_suffix(b"\r") {
                        *line = stripped;
                    }
                }
                let decoded = decoder.decode(&lines, stop_at_bad)?;
                let mut next = progress.clone();
                next.rows += decoded.batch.num_rows() as u64;
                next.bad += decoded.bad.len() as u64;
                let SourcePosition::File {
                    dev,
                    inode,
                    offset,
                    line,
                } = chunk.start
                else {
                    return Err(Error::Internal(
                        "a file chunk without a file position".into(),
                    ));
                };
                if decoded.consumed == lines.len() {
                    next.position = tail.position();
                    next.bytes += chunk.bytes;
                } else {
                    // Stopping at a bad record: resume there once the source is recreated.
                    // Bytes up to the bad line's start (the lines before it, with their
                    // newlines and any carriage returns).
                    let used = chunk
                        .data
                        .iter()
                        .enumerate()
                        .filter(|(_, &b)| b == b'\n')
                        .nth(decoded.consumed.wrapping_sub(1))
                        .map_or(0, |(i, _)| i + 1);
                    next.position = Some(SourcePosition::File {
                        dev,
                        inode,
                        offset: offset + used as u64,
                        line: line + decoded.consumed as u64,
                    });
                    next.bytes += used as u64;
                }
                engine.ingest_from_source(rt, decoded.batch, next.clone())?;
                progress = next;
                if let Some((i, e)) = decoded.bad.last() {
                    let at = format!(
                        "line {} of {}: {e} ({})",
                        line + *i as u64 + 1,
                        path.display(),
                        e.sqlstate()
                    );
                    if stop_at_bad {
                        return Err(Error::invalid_input(e.sqlstate(), at));
                    }
                    rt.update(|s| s.error = Some(at));
                }
                rt.update(|s| s.state = "running".into());
                continue;
            }
            Poll::Idle => {
                if progress.position.is_none() && tail.position().is_some() {
                    // Remember where reading began (start = 'end'), so a restart begins there.
                    let mut next = progress.clone();
                    next.position = tail.position();
                    let schema = decoder_schema(&engine, rt)?;
                    engine.ingest_from_source(rt, RecordBatch::new_empty(schema), next.clone())?;
                    progress = next;
                }
                rt.update(|s| s.state = "running".into());
            }
            Poll::Missing => {
                if !follow {
                    return Err(Error::invalid_input(
                        sqlstate::UNDEFINED_FILE,
                        format!("file {} does not exist", path.display()),
                    ));
                }
                rt.update(|s| s.state = "waiting for file".into());
            }
            Poll::End => {
                rt.update(|s| s.state = "finished".into());
                return Ok(());
            }
            Poll::TooLong { line, max } => {
                let at = format!(
                    "line {line} of {} is longer than {max} bytes (--max-copy-line-bytes)",
                    path.display()
                );
                if stop_at_bad {
                    return Err(Error::limit(sqlstate::PROGRAM_LIMIT_EXCEEDED, at));
                }
                // Counted as a bad record; its position moves past what was dropped.
                let mut next = progress.clone();
                next.bad += 1;
                next.position = tail.position();
                let schema = decoder_schema(&engine, rt)?;
                engine.ingest_from_source(rt, RecordBatch::new_empty(schema), next.clone())?;
                progress = next;
                rt.update(|s| s.error = Some(format!("{at}: skipped")));
            }
        }
        drop(engine);
        std::thread::sleep(rt.spec.poll_interval);
    }
}

/// A Kafka source: fetches every assigned partition on a small runtime of its own thread
/// and ingests each partition's records as one batch, with the next offset of every
/// partition as its position.
#[cfg(feature = "kafka")]
fn run_kafka(weak: &WeakEngine, rt: &Arc<SourceRuntime>) -> Result<()> {
    use crate::sources::kafka::KafkaReader;
    let Connector::Kafka {
        brokers,
        topic,
        partitions,
        start_at_end,
    } = &rt.spec.connector
    else {
        return Err(Error::Internal("not a Kafka source".into()));
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting a Kafka source's runtime", e))?;
    let Some(engine) = weak.upgrade() else {
        return Ok(());
    };
    let (mut progress, mut decoder) = engine.source_start(rt)?;
    drop(engine);
    let saved = match &progress.position {
        Some(SourcePosition::Kafka { offsets }) => offsets.clone(),
        _ => Default::default(),
    };
    rt.update(|s| {
        s.progress = progress.clone();
        s.state = "connecting".into();
    });
    let retry = std::time::Duration::from_millis(500);
    let mut reader = loop {
        if rt.stopped() || weak.upgrade().is_none() {
            return Ok(());
        }
        let connect =
            KafkaReader::connect(brokers, topic, partitions.as_deref(), &saved, *start_at_end);
        match runtime.block_on(connect) {
            Ok(r) => break r,
            Err(e) => {
                rt.update(|s| s.error = Some(e.to_string()));
                std::thread::sleep(retry);
            }
        }
    };
    let stop_at_bad = rt.spec.on_error == OnError::Fail;
    if progress.position.is_none() {
        // Remember where reading began (start = 'end'), so a restart begins there.
        let Some(engine) = weak.upgrade() else {
            return Ok(());
        };
        let mut next = progress.clone();
        next.position = Some(SourcePosition::Kafka {
            offsets: reader.offsets().clone(),
        });
        let schema = decoder_schema(&engine, rt)?;
        engine.ingest_from_source(rt, RecordBatch::new_empty(schema), next.clone())?;
        progress = next;
    }
    rt.update(|s| {
        s.state = "running".into();
        s.error = None;
    });
    loop {
        if rt.stopped() {
            return Ok(());
        }
        let (fetched, lost) = match runtime.block_on(reader.poll(rt.spec.poll_interval)) {
            Ok(f) => f,
            Err(e) => {
                rt.update(|s| s.error = Some(e.to_string()));
                std::thread::sleep(retry);
                continue;
            }
        };
        let Some(engine) = weak.upgrade() else {
            return Ok(());
        };
        if lost > 0 {
            let note =
                format!("{lost} records expired from the topic before they were read (retention)");
            tracing::warn!("source \"{}\": {note}", rt.spec.name);
            progress.bad += lost;
            rt.update(|s| s.error = Some(note));
        }
        let quiet = fetched.is_empty();
        for f in fetched {
            let lines: Vec<&[u8]> = f
                .records
                .iter()
                .map(|(_, v)| {
                    let v = v.strip_suffix(b"\n").unwrap_or(v);
                    v.strip_suffix(b"\r").unwrap_or(v)
                })
                .collect();
            let decoded = decoder.decode(&lines, stop_at_bad)?;
            let next_offset = match f.records.get(decoded.consumed) {
                Some((offset, _)) if decoded.consumed < lines.len() => *offset,
                _ => f.next,
            };
            let mut next = progress.clone();
            next.rows += decoded.batch.num_rows() as u64;
            next.bad += decoded.bad.len() as u64;
            next.bytes += lines[..decoded.consumed]
                .iter()
                .map(|l| l.len() as u64)
                .sum::<u64>();
            let mut offsets = reader.offsets().clone();
            offsets.insert(f.partition, next_offset);
            next.position = Some(SourcePosition::Kafka { offsets });
            engine.ingest_from_source(rt, decoded.batch, next.clone())?;
            reader.commit(f.partition, next_offset);
            progress = next;
            if let Some((i, e)) = decoded.bad.last() {
                let at = format!(
                    "partition {} offset {}: {e} ({})",
                    f.partition,
                    f.records[*i].0,
                    e.sqlstate()
                );
                if stop_at_bad {
                    return Err(Error::invalid_input(e.sqlstate(), at));
                }
                rt.update(|s| s.error = Some(at));
            }
        }
        drop(engine);
        if quiet {
            // The broker answers an empty fetch at once when it cannot wait.
            std::thread::sleep(
                rt.spec
                    .poll_interval
                    .min(std::time::Duration::from_millis(50)),
            );
        }
    }
}

fn decoder_schema(
    engine: &Engine,
    rt: &SourceRuntime,
) -> Result<datafusion::arrow::datatypes::SchemaRef> {
    engine.relation_schema(&rt.spec.stream)
}
