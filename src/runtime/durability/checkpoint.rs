//! Checkpoints: the engine's whole state at one point of the ingest log, so that a restart
//! replays only the log after it. A checkpoint is `ckpt/epoch-N/` holding `manifest.json`
//! (the catalog as SQL, each stream's log position and watermark, each query's result
//! sequence number) and one file per piece of state (operator snapshots, retained rows).
//! It is written under `epoch-N.tmp`, every file fsynced, then renamed: a directory named
//! `epoch-N` is always complete.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::operators::snapshot::StateImage;
use crate::runtime::durability::history::Segment;
use crate::runtime::durability::wal::sync_dir;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

/// What a checkpoint holds besides its state files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Checkpoint number, increasing.
    pub epoch: u64,
    /// Worker replicas per keyed operator when it was taken; their snapshots need as many.
    pub workers: usize,
    /// The catalog (streams, then queries in creation order) as SQL.
    pub catalog_sql: String,
    /// Catalog changes up to this log sequence number are in `catalog_sql`.
    pub catalog_seq: u64,
    /// Per stream.
    pub streams: Vec<StreamState>,
    /// Per query.
    pub queries: Vec<QueryState>,
    /// Per reference table.
    #[serde(default)]
    pub tables: Vec<TableState>,
    /// Per query over a `UNION ALL`: the union's state.
    #[serde(default)]
    pub unions: Vec<UnionState>,
}

/// The state of the union a query reads, at the checkpoint (taken while every stream that
/// feeds it was held, so it agrees with their positions).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnionState {
    /// The query reading the union.
    pub query: String,
    /// The union's watermark in nanoseconds.
    pub watermark: i64,
    /// Largest event time the union released, in nanoseconds.
    pub max_event_time: Option<i64>,
    /// File with the union's waiting rows and its inputs' watermarks.
    pub merge: String,
    /// The merges its branches read (a join's, another union's), each in a hub of its own.
    #[serde(default)]
    pub merges: Vec<MergeState>,
}

/// The state of a merge that a union's branch reads (a join's two streams merged, another
/// union), taken with the union.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeState {
    /// Where it is: `[b]` for the merge branch `b` of the query's union reads, `[b, c]` for
    /// the one branch `c` of that merge reads, ...
    pub nest: Vec<usize>,
    /// Its watermark in nanoseconds.
    pub watermark: i64,
    /// Largest event time it released, in nanoseconds.
    pub max_event_time: Option<i64>,
    /// File with its waiting rows and its inputs' watermarks.
    pub merge: String,
    /// The state of the branch that reads it (a join's), if it keeps some.
    pub taps: Vec<TapState>,
}

/// A reference table's rows at the checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TableState {
    /// Table name.
    pub name: String,
    /// Its changes up to this log sequence number are in `rows`.
    pub position: u64,
    /// File with its rows.
    pub rows: String,
    /// The progress (JSON) of the sources writing into it, as of those rows.
    #[serde(default)]
    pub sources: std::collections::BTreeMap<String, String>,
}

/// A stream's state at the checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamState {
    /// Stream name.
    pub name: String,
    /// Its log frames up to this sequence number are in the checkpoint.
    pub position: u64,
    /// Watermark in nanoseconds.
    pub watermark: i64,
    /// Largest event time seen, in nanoseconds.
    pub max_event_time: Option<i64>,
    /// Rows accepted.
    pub rows_in: u64,
    /// Rows that arrived behind the watermark.
    pub late_rows: u64,
    /// File with the recent rows kept for ad hoc SELECT.
    pub recent: String,
    /// Progress of the sources writing into it, as of the rows in this checkpoint.
    #[serde(default)]
    pub sources: std::collections::BTreeMap<String, crate::sources::spec::SourceProgress>,
    /// With history: its rows up to this log sequence number are in history segments (the
    /// later ones are replayed into it).
    #[serde(default)]
    pub history: Option<u64>,
    /// The state of the window joins' branches that aggregate this stream's rows.
    #[serde(default)]
    pub taps: Vec<TapState>,
}

/// The state of a union's branch that keeps some (a window join's aggregate), taken with
/// the stream it reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TapState {
    /// The query reading the union.
    pub query: String,
    /// Which union of the query the branch feeds: empty for the query's own, else where the
    /// merge it feeds is (as [`MergeState::nest`]).
    #[serde(default)]
    pub nest: Vec<usize>,
    /// Which branch of it.
    pub branch: usize,
    /// One file per operator of the branch, source first.
    pub operators: Vec<String>,
}

/// A query's state at the checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryState {
    /// Query name.
    pub name: String,
    /// Rows offered to it.
    pub rows_in: u64,
    /// Result rows produced: the sequence number of the last one.
    pub rows_out: u64,
    /// File with its retained results.
    pub retained: String,
    /// The state file of each operator on its path, source first (shared operators name the
    /// same file).
    pub operators: Vec<String>,
}

/// A checkpoint taken in memory, ready to be written.
pub struct Snapshot {
    /// Its manifest.
    pub manifest: Manifest,
    /// State files by name, encoded as they are written.
    pub files: Vec<(String, StateImage)>,
    /// History segments to write before the manifest, by stream.
    pub segments: Vec<(String, Segment, SchemaRef, Vec<RecordBatch>)>,
}

/// Where checkpoints live, how many are kept.
pub struct CheckpointStore {
    dir: PathBuf,
    keep: usize,
}

/// What writing a checkpoint took.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    /// Its epoch.
    pub epoch: u64,
    /// Bytes of state written.
    pub bytes: u64,
}

impl CheckpointStore {
    /// Checkpoints in `dir`, keeping the newest `keep` (at least 1).
    pub fn new(dir: PathBuf, keep: usize) -> Result<CheckpointStore> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        Ok(CheckpointStore {
            dir,
            keep: keep.max(1),
        })
    }

    /// The epochs on disk, oldest first (complete ones only).
    fn epochs(&self) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| Error::io(format!("listing {}", self.dir.display()), e))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(tmp) = name.strip_suffix(".tmp") {
                // Left by a crash while writing: never complete.
                if tmp.starts_with("epoch-") {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
                continue;
            }
            if let Some(n) = name.strip_prefix("epoch-").and_then(|n| n.parse().ok()) {
                out.push(n);
            }
        }
        out.sort();
        Ok(out)
    }

    fn epoch_dir(&self, epoch: u64) -> PathBuf {
        self.dir.join(format!("epoch-{epoch}"))
    }

    /// The newest checkpoint whose manifest reads back, if any.
    pub fn latest(&self) -> Result<Option<Manifest>> {
        for epoch in self.epochs()?.into_iter().rev() {
            let path = self.epoch_dir(epoch).join("manifest.json");
            match std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            {
                Some(m) => return Ok(Some(m)),
                None => tracing::warn!(
                    "checkpoint {} is unreadable; trying an older one",
                    path.display()
                ),
            }
        }
        Ok(None)
    }

    /// The next epoch number.
    pub fn next_epoch(&self) -> Result<u64> {
        Ok(self.epochs()?.last().map_or(1, |e| e + 1))
    }

    /// Reads a state file of checkpoint `epoch`.
    pub fn read(&self, epoch: u64, file: &str) -> Result<Vec<u8>> {
        let path = self.epoch_dir(epoch).join(file);
        std::fs::read(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))
    }

    /// Writes a snapshot atomically and removes checkpoints beyond the newest `keep`.
    /// Returns the oldest kept manifest, whose positions bound what the log must keep.
    pub fn write(&self, snapshot: Snapshot) -> Result<(Written, Manifest)> {
        let epoch = snapshot.manifest.epoch;
        let tmp = self.dir.join(format!("epoch-{epoch}.tmp"));
        let io = |what: &str, p: &Path, e| Error::io(format!("{what} {}", p.display()), e);
        std::fs::create_dir_all(&tmp).map_err(|e| io("creating", &tmp, e))?;
        let mut bytes = 0;
        let manifest = serde_json::to_vec_pretty(&snapshot.manifest)
            .map_err(|e| Error::Internal(format!("encoding a checkpoint manifest: {e}")))?;
        let files = snapshot
            .files
            .into_iter()
            .chain([("manifest.json".to_string(), StateImage::ready(manifest))]);
        for (name, image) in files {
            let data = image.encode()?;
            let path = tmp.join(name);
            write_synced(&path, &data).map_err(|e| io("writing", &path, e))?;
            bytes += data.len() as u64;
        }
        sync_dir(&tmp)?;
        let dest = self.epoch_dir(epoch);
        std::fs::rename(&tmp, &dest).map_err(|e| io("renaming", &tmp, e))?;
        sync_dir(&self.dir)?;
        let epochs = self.epochs()?;
        let excess = epochs.len().saturating_sub(self.keep);
        for old in &epochs[..excess] {
            let path = self.epoch_dir(*old);
            std::fs::remove_dir_all(&path).map_err(|e| io("removing", &path, e))?;
        }
        let oldest = epochs[excess];
        let path = self.epoch_dir(oldest).join("manifest.json");
        let oldest = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            .ok_or_else(|| Error::Internal(format!("cannot read back {}", path.display())))?;
        Ok((Written { epoch, bytes }, oldest))
    }
}

impl Manifest {
    /// The log position up to which every frame is covered by this checkpoint: frames at or
    /// below it may be removed from the log.
    pub fn covered(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| s.history.unwrap_or(s.position).min(s.position))
            .chain(self.tables.iter().map(|t| t.position))
            .chain([self.catalog_seq])
            .min()
            .unwrap_or(0)
    }

    /// Where replay of a table's changes must begin: after this.
    pub fn table_position(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|t| t.name == table)
            .map_or(0, |t| t.position)
    }

    /// Through where a stream's history is in segments: its frames after this are replayed
    /// into its history (and after [`Manifest::position`], into its queries too).
    pub fn history_position(&self, stream: &str) -> u64 {
        self.streams
            .iter()
            .find(|s| s.name == stream)
            .map_or(0, |s| s.history.unwrap_or(s.position).min(s.position))
    }

    /// Where replay must begin: a stream's frames after its position, the catalog's after
    /// `catalog_seq`.
    pub fn position(&self, stream: &str) -> u64 {
        self.streams
            .iter()
            .find(|s| s.name == stream)
            .map_or(0, |s| s.position)
    }
}

fn write_synced(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    super::wal::write_in_pieces(&mut f, data)?;
    f.sync_all()
}
