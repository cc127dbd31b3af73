//! What makes an engine durable: the data directory's lock, its ingest log and checkpoints,
//! and the two halves of recovery: taking a snapshot of every hub (each under its own lock,
//! at one log position per stream) and restoring one into freshly planned hubs.

use crate::error::sqlstate;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::operators::snapshot::{decode, encode, StateImage};
use crate::runtime::core::hub::Hub;
use crate::runtime::core::output::QueryOutput;
use crate::runtime::core::union::{nested_merges, Tap};
use crate::runtime::durability::checkpoint::{
    CheckpointStore, Manifest, MergeState, QueryState, Snapshot, StreamState, TableState, TapState,
    UnionState, Written,
};
use crate::runtime::durability::history::{delete_segments, write_segment};
use crate::runtime::durability::wal::{FsyncPolicy, IngestLog, Record};
use crate::runtime::engine::{Engine, Shared};
use crate::sources::spec::{SourcePosition, SourceProgress};
use crate::sql;
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
    /// What the newest checkpoint written holds of the sources.
    held: Mutex<Arc<HeldPositions>>,
}

/// The sources' positions a written checkpoint holds rows up to.
#[derive(Debug, Default)]
pub struct HeldPositions {
    /// The checkpoint; 0 before one is written.
    pub epoch: u64,
    /// Position per source.
    pub sources: BTreeMap<String, SourcePosition>,
}

impl HeldPositions {
    /// The positions `manifest` holds.
    fn of(manifest: &Manifest) -> HeldPositions {
        let in_streams = manifest
            .streams
            .iter()
            .flat_map(|s| &s.sources)
            .map(|(name, p)| (name, p.position.clone()));
        let in_tables = manifest
            .tables
            .iter()
            .flat_map(|t| &t.sources)
            .map(|(name, json)| {
                let p = serde_json::from_str::<SourceProgress>(json).ok();
                (name, p.and_then(|p| p.position))
            });
        HeldPositions {
            epoch: manifest.epoch,
            sources: in_streams
                .chain(in_tables)
                .filter_map(|(name, position)| Some((name.clone(), position?)))
                .collect(),
        }
    }
}

impl Durability {
    /// What the newest checkpoint written holds of the sources.
    pub fn held(&self) -> Arc<HeldPositions> {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

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
        // The log and checkpoints hold every statement, sink credentials among them: only
        // the server's user may enter the directory (as PostgreSQL's 0700 data directory).
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::io(format!("restricting {}", dir.display()), e))?;
        }
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
            return Err(Error::limit(
                sqlstate::OBJECT_IN_USE,
                format!(
                    "data directory {} is in use by another saql process (it holds {}); \
                 stop it or choose another --data-dir",
                    dir.display(),
                    lock_path.display()
                ),
            ));
        }
        Ok(Durability {
            log: IngestLog::open(&dir.join("wal"), fsync, salvage)?,
            checkpoints: CheckpointStore::new(dir.join("ckpt"), keep_checkpoints)?,
            _lock: lock,
            checkpointing: Mutex::new(()),
            held: Mutex::default(),
        })
    }
}

/// Takes every hub's state in memory: the catalog is held still (no DDL) while each hub is
/// locked in turn just long enough to snapshot its operators and outputs.
///
/// Streams' history segments due (all of them with `seal_all`) are sealed, to be written
/// before the manifest.
pub(in crate::runtime) fn snapshot(
    shared: &Shared,
    log: &IngestLog,
    epoch: u64,
    workers: usize,
    seal_all: bool,
) -> Result<Snapshot> {
    let mut manifest = Manifest {
        epoch,
        workers,
        catalog_sql: shared.catalog.to_sql(),
        catalog_seq: log.last_seq(),
        streams: Vec::new(),
        queries: Vec::new(),
        tables: Vec::new(),
        unions: Vec::new(),
    };
    let mut files = Vec::new();
    let mut cut = HistoryCut {
        seal_all,
        segments: Vec::new(),
    };
    // Each table with its writers held off for a moment: every change logged so far is
    // applied, so its position is the log's end.
    for (i, t) in shared.catalog.tables().enumerate() {
        let _writer = t.store.writer();
        let position = log.last_seq();
        let schema = t.store.schema().clone();
        let (rows, sources) = {
            let r = t.store.read();
            (r.batch(&schema)?, r.sources.clone())
        };
        let file = format!("table-{i}.arrow");
        files.push((file.clone(), encoded_later(&schema, vec![rows])));
        manifest.tables.push(TableState {
            name: t.name.clone(),
            position,
            rows: file,
            sources,
        });
    }
    // The streams that feed a union are held together while it is taken, so that the
    // union's state and their log positions are one cut.
    let mut fed = std::collections::BTreeSet::new();
    for hub in shared.unions.values() {
        if let Some(u) = &hub.lock().union {
            fed.extend(u.streams.iter().cloned());
        }
    }
    let mut held: std::collections::BTreeMap<&String, _> = std::collections::BTreeMap::new();
    for name in &fed {
        if let Some((name, hub)) = shared.hubs.get_key_value(name) {
            held.insert(name, hub.lock());
        }
    }
    let mut names: Vec<&String> = shared.hubs.keys().collect();
    names.sort();
    for (i, name) in names.into_iter().enumerate() {
        match held.get_mut(name) {
            Some(hub) => snapshot_stream(i, name, hub, log, &mut manifest, &mut files, &mut cut)?,
            None => {
                let mut hub = shared.hubs[name].lock();
                snapshot_stream(i, name, &mut hub, log, &mut manifest, &mut files, &mut cut)?
            }
        }
    }
    for (k, (query, union_hub)) in shared.unions.iter().enumerate() {
        let merges = nested_merges(union_hub);
        let mut guard = union_hub.lock();
        let hub = &mut *guard;
        let Some(union) = &hub.union else {
            continue;
        };
        let file = format!("union-{k}.snap");
        files.push((file.clone(), union.merge.snapshot()));
        let mut state = UnionState {
            query: query.clone(),
            watermark: hub.stream.watermark.0 .0,
            max_event_time: hub.stream.max_event_time.map(|t| t.0),
            merge: file,
            merges: Vec::new(),
        };
        snapshot_queries(&format!("u{k}"), hub, &mut manifest, &mut files)?;
        drop(guard);
        // Each merge under the union, one hub at a time (a merge's hub is locked before the
        // union's when rows flow, never after).
        for (m, (nest, inner)) in merges.into_iter().enumerate() {
            let mut inner = inner.lock();
            let Some(merge) = &inner.union else {
                continue;
            };
            let file = format!("union-{k}-{m}.snap");
            files.push((file.clone(), merge.merge.snapshot()));
            let prefix = format!("u{k}-{m}");
            state.merges.push(MergeState {
                nest,
                watermark: inner.stream.watermark.0 .0,
                max_event_time: inner.stream.max_event_time.map(|t| t.0),
                merge: file,
                taps: snapshot_taps(&prefix, &mut inner.taps, &mut files)?,
            });
        }
        manifest.unions.push(state);
    }
    drop(held);
    Ok(Snapshot {
        manifest,
        files,
        segments: cut.segments,
    })
}

/// The history segments a checkpoint seals (all of them with `seal_all`), to be written
/// before its manifest.
struct HistoryCut {
    seal_all: bool,
    segments: Vec<(
        String,
        crate::runtime::durability::history::Segment,
        SchemaRef,
        Vec<RecordBatch>,
    )>,
}

/// Takes stream `name`'s state (the `i`th stream) and its queries'.
fn snapshot_stream(
    i: usize,
    name: &str,
    hub: &mut Hub,
    log: &IngestLog,
    manifest: &mut Manifest,
    files: &mut Vec<(String, StateImage)>,
    cut: &mut HistoryCut,
) -> Result<()> {
    // Frames of this stream are appended under its lock and applied in order once
    // durable: all before the first one still waiting are applied.
    let position = hub
        .pending
        .first_seq()
        .map_or_else(|| log.last_seq(), |first| first - 1);
    let history = hub.history.as_mut().map(|h| {
        let through = h.checkpoint(position, cut.seal_all);
        for (segment, batches) in h.to_write() {
            cut.segments
                .push((name.to_string(), segment, h.schema().clone(), batches));
        }
        through
    });
    let taps = snapshot_taps(&i.to_string(), &mut hub.taps, files)?;
    let recent = format!("stream-{i}.arrow");
    files.push((
        recent.clone(),
        encoded_later(&hub.stream.def.schema, hub.stream.recent.batches()),
    ));
    manifest.streams.push(StreamState {
        name: name.to_string(),
        position,
        watermark: hub.stream.watermark.0 .0,
        max_event_time: hub.stream.max_event_time.map(|t| t.0),
        rows_in: hub.stream.rows_in,
        late_rows: hub.stream.late_rows,
        recent,
        sources: hub.sources.clone(),
        history,
        taps,
    });
    snapshot_queries(&i.to_string(), hub, manifest, files)
}

/// Takes the state of the taps on a hub that keep some (files named after `prefix`, the
/// hub's place in the checkpoint).
fn snapshot_taps(
    prefix: &str,
    taps: &mut [Tap],
    files: &mut Vec<(String, StateImage)>,
) -> Result<Vec<TapState>> {
    let mut out = Vec::new();
    for (t, tap) in taps.iter_mut().enumerate() {
        if !tap.is_stateful() {
            continue;
        }
        let mut operators = Vec::new();
        for (k, image) in tap.snapshot()?.into_iter().enumerate() {
            let file = format!("tap-{prefix}-{t}-{k}.snap");
            files.push((file.clone(), image));
            operators.push(file);
        }
        out.push(TapState {
            query: tap.query.clone(),
            nest: tap.nest.clone(),
            branch: tap.branch,
            operators,
        });
    }
    Ok(out)
}

/// Restores the taps on a hub from their states in checkpoint `epoch`.
fn restore_taps(
    store: &CheckpointStore,
    epoch: u64,
    taps: &mut [Tap],
    states: &[TapState],
) -> Result<()> {
    for t in states {
        let tap = taps
            .iter_mut()
            .find(|tap| tap.query == t.query && tap.nest == t.nest && tap.branch == t.branch);
        if let Some(tap) = tap {
            let states = t
                .operators
                .iter()
                .map(|f| store.read(epoch, f))
                .collect::<Result<Vec<_>>>()?;
            tap.restore(&states)?;
        }
    }
    Ok(())
}

/// Takes the state of a hub's queries: their operators (files named after `prefix`, the
/// hub's place in the checkpoint) and results.
fn snapshot_queries(
    prefix: &str,
    hub: &mut Hub,
    manifest: &mut Manifest,
    files: &mut Vec<(String, StateImage)>,
) -> Result<()> {
    for (q, rt) in &hub.queries {
        let mut operators = Vec::new();
        for &node in &rt.path {
            let file = format!("op-{prefix}-{node}.snap");
            if !files.iter().any(|(f, _)| *f == file) {
                files.push((file.clone(), hub.graph.snapshot_node(node)?));
            }
            operators.push(file);
        }
        let (rows_out, retained) = QueryOutput::lock(&rt.output).snapshot();
        let file = format!("results-{}.arrow", manifest.queries.len());
        files.push((file.clone(), encoded_later(&rt.plan.schema, retained)));
        manifest.queries.push(QueryState {
            name: q.clone(),
            rows_in: rt.rows_in,
            rows_out,
            retained: file,
            operators,
        });
    }
    Ok(())
}

/// Rows to be written as an IPC stream once the hub is unlocked.
fn encoded_later(schema: &SchemaRef, rows: Vec<RecordBatch>) -> StateImage {
    let schema = schema.clone();
    StateImage::later(move || encode(&[], &schema, &rows))
}

/// Restores a checkpoint into `shared`, whose catalog was just rebuilt from the manifest's
/// SQL (so every hub and query exists, freshly planned).
pub(in crate::runtime) fn restore(
    shared: &Shared,
    store: &CheckpointStore,
    manifest: &Manifest,
) -> Result<()> {
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
        hub.sources = s.sources.clone();
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
        restore_taps(store, epoch, &mut hub.taps, &s.taps)?;
    }
    for t in &manifest.tables {
        if let Some(def) = shared.catalog.table(&t.name) {
            let rows = batches(&t.rows, def.store.schema())?;
            def.store.restore(&rows, t.sources.clone(), t.position)?;
        }
    }
    for u in &manifest.unions {
        let Some(union_hub) = shared.unions.get(&u.query) else {
            continue;
        };
        let merges = nested_merges(union_hub);
        let mut hub = union_hub.lock();
        hub.stream.watermark = Watermark(EventTime(u.watermark));
        hub.stream.max_event_time = u.max_event_time.map(EventTime);
        if let Some(union) = &mut hub.union {
            union.merge.restore(&store.read(epoch, &u.merge)?)?;
        }
        drop(hub);
        for m in &u.merges {
            let Some((_, inner)) = merges.iter().find(|(nest, _)| *nest == m.nest) else {
                return Err(Error::Internal(format!(
                    "checkpoint {epoch}: query \"{}\" has no merge at {:?}",
                    u.query, m.nest
                )));
            };
            let mut inner = inner.lock();
            let inner = &mut *inner;
            inner.stream.watermark = Watermark(EventTime(m.watermark));
            inner.stream.max_event_time = m.max_event_time.map(EventTime);
            if let Some(merge) = &mut inner.union {
                merge.merge.restore(&store.read(epoch, &m.merge)?)?;
            }
            restore_taps(store, epoch, &mut inner.taps, &m.taps)?;
        }
    }
    let mut restored = std::collections::HashSet::new();
    for q in &manifest.queries {
        let Some(hub) = shared.hub_of_query(&q.name) else {
            continue;
        };
        let stream = Arc::as_ptr(hub) as usize;
        let mut hub = hub.lock();
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
            if restored.insert((stream, node)) {
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

/// Where earlier versions kept the catalog; read once into the log if there is no log yet.
const CATALOG_FILE: &str = "catalog.sql";

impl Engine {
    /// Restores the newest checkpoint and replays the log after it.
    pub(in crate::runtime) fn recover(&self, d: &Durability) -> Result<()> {
        let started = Instant::now();
        let mut shared = self.write();
        let manifest = d.checkpoints.latest()?;
        // A statement that no longer plans (a query this version rejects) is skipped with a
        // warning rather than keeping the server down; everything else comes back.
        let apply = |shared: &mut Shared, text: &str, seq: u64| match sql::parse(text) {
            Ok(stmts) => {
                for stmt in stmts {
                    // A sink's credentials stay out of the log.
                    let shown = match &stmt {
                        crate::sql::Statement::CreateSink(sink) => sink.redacted(),
                        other => other.to_string(),
                    };
                    if let Err(e) = self.ddl(shared, stmt, false) {
                        tracing::warn!("recovery skips \"{shown}\" (log seq {seq}): {e}");
                    }
                }
            }
            Err(e) => tracing::warn!("recovery skips unreadable SQL at log seq {seq}: {e}"),
        };
        if let Some(m) = &manifest {
            shared.restoring = true;
            apply(&mut shared, &m.catalog_sql, m.catalog_seq);
            shared.restoring = false;
            restore(&shared, &d.checkpoints, m)?;
        } else if d.log.last_seq() == 0 {
            self.import_catalog_file(&mut shared)?;
        }
        // Segments past the restored checkpoint were written for one that never completed.
        for (name, hub) in &shared.hubs {
            if let Some(history) = &mut hub.lock().history {
                history.settle(manifest.as_ref().map_or(0, |m| m.history_position(name)))?;
            }
        }
        let catalog_seq = manifest.as_ref().map_or(0, |m| m.catalog_seq);
        let after = manifest.as_ref().map_or(0, |m| m.covered());
        let mut frames = 0u64;
        d.log.replay(after, |seq, record| {
            let position = |stream: &str| manifest.as_ref().map_or(0, |m| m.position(stream));
            let history =
                |stream: &str| manifest.as_ref().map_or(0, |m| m.history_position(stream));
            match record {
                Record::Catalog { sql } if seq > catalog_seq => apply(&mut shared, &sql, seq),
                // Rows the checkpoint's operators hold but its history does not.
                Record::Rows { stream, batches }
                    if seq > history(&stream) && seq <= position(&stream) =>
                {
                    if let Some(hub) = shared.hubs.get(&stream) {
                        if let Some(h) = &mut hub.lock().history {
                            batches.iter().for_each(|b| h.append(b));
                        }
                    }
                }
                Record::SourceRows { stream, batch, .. }
                    if seq > history(&stream) && seq <= position(&stream) =>
                {
                    if let Some(hub) = shared.hubs.get(&stream) {
                        if let Some(h) = &mut hub.lock().history {
                            h.append(&batch);
                        }
                    }
                }
                Record::Rows { stream, batches } if seq > position(&stream) => {
                    if let Some(hub) = shared.hubs.get(&stream) {
                        let mut hub = hub.lock();
                        for batch in &batches {
                            if let Err(e) = hub.insert(batch, Instant::now()) {
                                tracing::warn!(
                                    "recovery skips rows of \"{stream}\" (log seq {seq}): {e}"
                                );
                            }
                        }
                    }
                }
                Record::SourceRows {
                    stream,
                    source,
                    progress,
                    batch,
                } if seq > position(&stream) => {
                    if let Some(hub) = shared.hubs.get(&stream) {
                        let mut hub = hub.lock();
                        if batch.num_rows() > 0 {
                            if let Err(e) = hub.insert(&batch, Instant::now()) {
                                tracing::warn!(
                                    "recovery skips rows of \"{stream}\" (log seq {seq}): {e}"
                                );
                            }
                        }
                        match serde_json::from_str(&progress) {
                            Ok(p) => {
                                hub.sources.insert(source, p);
                            }
                            Err(e) => tracing::warn!(
                                "recovery skips the position of source \"{source}\" (log seq \
                                 {seq}): {e}"
                            ),
                        }
                    }
                }
                Record::Table { table, change } => {
                    // Its temporal joins take it after the rows their checkpoint holds.
                    let change = Arc::new(change);
                    for hub in crate::runtime::statements::table::versioning_hubs(&shared, &table) {
                        let mut hub = hub.lock();
                        if seq > position(&hub.stream.def.name) {
                            hub.apply_change(crate::runtime::core::door::Change::Table {
                                table: table.clone(),
                                change: change.clone(),
                            });
                        }
                    }
                    if seq <= manifest.as_ref().map_or(0, |m| m.table_position(&table)) {
                        return Ok(());
                    }
                    if let Some(def) = shared.catalog.table(&table) {
                        if let Err(e) = def.store.apply(&change, seq) {
                            tracing::warn!(
                                "recovery skips a change of table \"{table}\" (log seq {seq}): {e}"
                            );
                        }
                    }
                }
                Record::Watermark { stream, watermark } if seq > position(&stream) => {
                    if let Some(hub) = shared.hubs.get(&stream) {
                        hub.lock().advance(watermark);
                    }
                }
                _ => return Ok(()),
            }
            frames += 1;
            Ok(())
        })?;
        tracing::info!(
            "recovered {} streams and {} queries: checkpoint {}, {frames} log frames replayed in {:?}",
            shared.hubs.len(),
            shared.query_streams.len(),
            manifest.as_ref().map_or("none".to_string(), |m| m.epoch.to_string()),
            started.elapsed()
        );
        Ok(())
    }

    /// Reads a catalog kept by an earlier version as `catalog.sql` into the log.
    fn import_catalog_file(&self, shared: &mut Shared) -> Result<()> {
        let Some(dir) = &self.config.data_dir else {
            return Ok(());
        };
        let path = dir.join(CATALOG_FILE);
        if !path.exists() {
            return Ok(());
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        for stmt in sql::parse(&text)? {
            self.ddl(shared, stmt, true)?;
        }
        std::fs::remove_file(&path)
            .map_err(|e| Error::io(format!("removing {}", path.display()), e))
    }

    /// Starts the thread that takes a checkpoint every `every`; it ends with the engine.
    pub(in crate::runtime) fn checkpoint_every(&self, every: Duration) -> Result<()> {
        let shared = Arc::downgrade(&self.shared);
        let durability = self.durability.as_ref().map(Arc::downgrade);
        let config = self.config.clone();
        let ingest = self.ingest.clone();
        let upgrade = move |shared: &Weak<RwLock<Shared>>, d: &Option<Weak<Durability>>| {
            Some(Engine {
                shared: shared.upgrade()?,
                config: config.clone(),
                durability: Some(d.as_ref()?.upgrade()?),
                ingest: ingest.clone(),
            })
        };
        crate::spawn::thread("saql-checkpoint", move || {
            let mut waited = Duration::ZERO;
            let step = Duration::from_millis(100).min(every);
            loop {
                std::thread::sleep(step);
                waited += step;
                let Some(engine) = upgrade(&shared, &durability) else {
                    return;
                };
                if waited < every {
                    continue;
                }
                waited = Duration::ZERO;
                if let Err(e) = engine.checkpoint_sealing(false) {
                    tracing::warn!("checkpoint failed: {e}");
                }
            }
        })
        .map_err(|e| Error::io("starting the checkpoint thread", e))?;
        Ok(())
    }

    /// Takes a checkpoint now: every hub's state is snapshotted under its own lock (ingest
    /// into a stream pauses only while its operators copy their state), then written in the
    /// calling thread, and the log behind the oldest kept checkpoint is removed.
    /// Every stream's rows not yet in its history segments are written to one.
    pub fn checkpoint(&self) -> Result<Written> {
        self.checkpoint_sealing(true)
    }

    /// Takes a checkpoint; history segments are written for every stream with `seal_all`,
    /// else for those whose rows not yet written are many or old enough.
    pub(in crate::runtime) fn checkpoint_sealing(&self, seal_all: bool) -> Result<Written> {
        let Some(d) = &self.durability else {
            return Err(Error::NotSupported(
                "CHECKPOINT needs a data directory (--data-dir)".into(),
            ));
        };
        let _one = d.checkpointing.lock().unwrap_or_else(|p| p.into_inner());
        let epoch = d.checkpoints.next_epoch()?;
        let mut snapshot = {
            let shared = self.read();
            snapshot(&shared, &d.log, epoch, self.config.workers, seal_all)?
        };
        // History segments before the manifest that says they are written.
        for (stream, segment, schema, batches) in std::mem::take(&mut snapshot.segments) {
            let bytes = write_segment(&segment, &schema, &batches)?;
            if let Some(hub) = self.read().hubs.get(&stream) {
                if let Some(h) = &mut hub.lock().history {
                    h.written(segment.end, bytes);
                }
            }
        }
        d.log.sync()?;
        let held = HeldPositions::of(&snapshot.manifest);
        let (written, oldest) = d.checkpoints.write(snapshot)?;
        *d.held.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(held);
        d.log.truncate_through(oldest.covered())?;
        self.expire_history();
        Ok(written)
    }

    /// Deletes the history segments each stream's retention no longer keeps.
    fn expire_history(&self) {
        let hubs: Vec<_> = self.read().hubs.values().cloned().collect();
        for hub in hubs {
            let expired = {
                let mut hub = hub.lock();
                let newest = hub.stream.max_event_time.map(|t| t.nanos());
                match &mut hub.history {
                    Some(h) => h.expire(newest),
                    None => continue,
                }
            };
            delete_segments(&expired);
        }
    }
}
