//! The ingest log: every accepted batch, every watermark moved by processing time and every
//! catalog change, appended in the order the engine applied them, so that a restart replays
//! exactly what happened after the last checkpoint.
//!
//! Files are `wal/seg-<first seq>.log`, each a run of frames
//! `len u32 | crc32 u32 | seq u64 | kind u8 | stream len u16 | stream | payload`, where `len`
//! counts the bytes after the CRC and the CRC covers them. Payloads: an Arrow IPC stream of the
//! rows (its buffers zstd-compressed; LZ4 in logs written before), a watermark in nanoseconds,
//! or the SQL of a catalog change.
//!
//! Durability follows [`FsyncPolicy`]: a writer that must not lose its rows waits for a
//! background thread that fsyncs on behalf of every writer waiting at that moment (group
//! commit). A frame cut short by a crash at the end of the newest segment is truncated at
//! open; a bad frame anywhere else stops the open, naming the file and offset, unless the
//! caller salvages the log up to it.

use crate::error::sqlstate;
use std::fs::{File, OpenOptions};
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::{
    write_message, DictionaryTracker, EncodedData, IpcDataGenerator, IpcWriteContext,
    IpcWriteOptions, StreamWriter,
};
use datafusion::arrow::ipc::CompressionType;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::operators::lookup::TableChange;
use crate::time::{EventTime, Watermark};

/// When appended frames reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// A writer returns once an fsync covering its frame is done; writers waiting together
    /// share one fsync.
    Always,
    /// As `Always`, but fsyncs start at most once per interval, so that many small writers
    /// share each one (group commit).
    Interval(Duration),
    /// Never fsync: frames reach the OS at once (a killed process loses nothing), the disk
    /// when the OS decides (a power cut loses the last seconds).
    Off,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "interval" => Ok(FsyncPolicy::Interval(DEFAULT_GROUP_COMMIT)),
            "off" => Ok(FsyncPolicy::Off),
            other => Err(format!(
                "unknown fsync policy \"{other}\": use always, interval or off"
            )),
        }
    }
}

/// How long the group-commit thread gathers writers before an fsync, by default.
pub const DEFAULT_GROUP_COMMIT: Duration = Duration::from_millis(2);

/// A new segment starts once the current one is this large.
const SEGMENT_BYTES: u64 = 64 << 20;

/// Most bytes handed to one write().
const WRITE_PIECE_BYTES: usize = 8 << 20;

/// Writes all of `data` in pieces of at most [`WRITE_PIECE_BYTES`]: one write() of a large
/// buffer (a COPY of millions of rows is one frame) took 3.7 s for 217 MiB on Linux 6.18 and
/// ext4, where 8 MiB pieces take 0.2 s (benches/README.md, Over the wire).
pub(crate) fn write_in_pieces(file: &mut impl Write, data: &[u8]) -> std::io::Result<()> {
    data.chunks(WRITE_PIECE_BYTES)
        .try_for_each(|piece| file.write_all(piece))
}

const KIND_ROWS: u8 = 1;
const KIND_WATERMARK: u8 = 2;
const KIND_CATALOG: u8 = 3;
const KIND_SOURCE_ROWS: u8 = 4;
const KIND_TABLE: u8 = 5;

/// What a frame holds.
#[derive(Debug, Clone)]
pub enum Record {
    /// Rows accepted into a stream by one statement (all of a COPY's batches are one frame,
    /// so a crash keeps all of them or none).
    Rows {
        /// The stream.
        stream: String,
        /// Its rows, with the stream's schema; at least one batch.
        batches: Vec<RecordBatch>,
    },
    /// A stream's watermark moved without rows (idle timeout, end of input).
    Watermark {
        /// The stream.
        stream: String,
        /// Where it moved.
        watermark: Watermark,
    },
    /// Rows a source read, with its progress after them (JSON of
    /// [`crate::sources::spec::SourceProgress`]); the rows may be none when only the
    /// position moved.
    SourceRows {
        /// The stream.
        stream: String,
        /// The source.
        source: String,
        /// Its progress after these rows.
        progress: String,
        /// The rows, with the stream's schema.
        batch: RecordBatch,
    },
    /// A catalog change, as SQL.
    Catalog {
        /// The statement.
        sql: String,
    },
    /// One statement's change to a reference table.
    Table {
        /// The table.
        table: String,
        /// What changed.
        change: TableChange,
    },
}

struct Writer {
    file: File,
    path: PathBuf,
    size: u64,
    /// Sequence number of the last frame written.
    last_seq: u64,
    /// Tests make the next fsync fail, as a failing disk would.
    fail_next_sync: bool,
}

#[derive(Default)]
struct SyncState {
    written: u64,
    durable: u64,
    /// Set by a failed fsync, for good: the frames after `durable` are cut off the log, and
    /// every later append and wait fails until the server restarts (as PostgreSQL panics),
    /// since what the disk holds after a failed fsync is unknown.
    error: Option<String>,
    closed: bool,
}

struct Syncer {
    state: Mutex<SyncState>,
    /// Signalled when frames are written (for the syncer) and when they are durable.
    changed: Condvar,
}

/// The append-only log of one data directory.
pub struct IngestLog {
    dir: PathBuf,
    policy: FsyncPolicy,
    writer: Mutex<Writer>,
    syncer: Arc<Syncer>,
}

/// Where a frame that could not be read starts.
#[derive(Debug)]
struct BadFrame {
    path: PathBuf,
    offset: u64,
    reason: String,
}

impl IngestLog {
    /// Opens the log in `dir` (created if missing): truncates a torn frame at the end of the
    /// newest segment; a bad frame anywhere else is an error naming the file and offset, or,
    /// with `salvage`, the end of the log (later frames and segments are removed).
    pub fn open(dir: &Path, policy: FsyncPolicy, salvage: bool) -> Result<Arc<IngestLog>> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let segments = segments(dir)?;
        let mut last_seq = 0;
        let mut tail: Option<(PathBuf, u64)> = None;
        for (i, (first, path)) in segments.iter().enumerate() {
            let newest = i + 1 == segments.len();
            let scan = scan(path, |seq, _| {
                last_seq = seq;
                Ok(())
            })?;
            match scan {
                Ok(end) => tail = Some((path.clone(), end)),
                Err(bad) if newest && bad.reason == TORN || salvage => {
                    tracing::warn!(
                        "ingest log: {} at {} offset {}; the log ends there",
                        bad.reason,
                        bad.path.display(),
                        bad.offset
                    );
                    truncate(&bad.path, bad.offset)?;
                    for (_, later) in &segments[i + 1..] {
                        std::fs::remove_file(later)
                            .map_err(|e| Error::io(format!("removing {}", later.display()), e))?;
                    }
                    tail = Some((path.clone(), bad.offset));
                    break;
                }
                Err(bad) => {
                    return Err(Error::Internal(format!(
                        "ingest log is corrupt: {} at {} offset {} (frames after it would be \
                         lost; start with --salvage-log to keep the log up to that offset)",
                        bad.reason,
                        bad.path.display(),
                        bad.offset
                    )))
                }
            }
            if *first > last_seq + 1 && last_seq > 0 {
                return Err(Error::Internal(format!(
                    "ingest log is missing frames before {}",
                    path.display()
                )));
            }
        }
        let (path, size) = match tail {
            Some(t) => t,
            None => (segment_path(dir, 1), 0),
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let syncer = Arc::new(Syncer {
            state: Mutex::new(SyncState {
                written: last_seq,
                durable: last_seq,
                ..SyncState::default()
            }),
            changed: Condvar::new(),
        });
        let log = Arc::new(IngestLog {
            dir: dir.to_path_buf(),
            policy,
            writer: Mutex::new(Writer {
                file,
                path,
                size,
                last_seq,
                fail_next_sync: false,
            }),
            syncer,
        });
        if policy != FsyncPolicy::Off {
            let weak = Arc::downgrade(&log);
            crate::spawn::thread("saql-fsync", move || group_commit(weak))
                .map_err(|e| Error::io("starting the fsync thread", e))?;
        }
        Ok(log)
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_sync(&self) -> MutexGuard<'_, SyncState> {
        self.syncer.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sequence number of the last frame appended.
    pub fn last_seq(&self) -> u64 {
        self.lock_writer().last_seq
    }

    /// The sequence number up to which frames are as durable as the policy promises.
    pub fn durable_seq(&self) -> u64 {
        self.lock_sync().durable
    }

    /// Makes the next fsync fail as a failing disk would (for tests of what a writer sees).
    #[doc(hidden)]
    pub fn inject_sync_failure(&self) {
        self.lock_writer().fail_next_sync = true;
    }

    fn failed(&self) -> Result<()> {
        match &self.lock_sync().error {
            Some(e) => Err(Error::Io {
                context: "the ingest log failed to sync earlier; restart the server".into(),
                source: std::io::Error::other(e.clone()),
            }),
            None => Ok(()),
        }
    }

    /// [`IngestLog::append_on`] one thread.
    #[cfg(test)]
    pub fn append(&self, record: &Record) -> Result<u64> {
        self.append_on(record, 1)
    }

    /// Appends a frame (its rows compressed on up to `threads` threads) and hands it to the
    /// OS; returns its sequence number. Nothing is appended if this fails (a partial frame is
    /// cut off again).
    pub fn append_on(&self, record: &Record, threads: usize) -> Result<u64> {
        self.failed()?;
        // Encoding (compressing a COPY's rows) holds no lock; the frame gets its sequence
        // number and checksum once it has its place.
        let (mut frame, rest) = encode(record, threads)?;
        let mut w = self.lock_writer();
        let seq = w.last_seq + 1;
        seal(&mut frame, seq, rest);
        if w.size > 0 && w.size + frame.len() as u64 > SEGMENT_BYTES {
            self.roll(&mut w, seq)?;
        }
        if let Err(e) = write_in_pieces(&mut w.file, &frame) {
            // Leave no partial frame behind: a later frame would follow garbage.
            let _ = w.file.set_len(w.size);
            return Err(Error::io(format!("writing {}", w.path.display()), e));
        }
        w.size += frame.len() as u64;
        w.last_seq = seq;
        drop(w);
        let mut s = self.lock_sync();
        s.written = seq;
        if self.policy == FsyncPolicy::Off {
            s.durable = seq;
        }
        self.syncer.changed.notify_all();
        Ok(seq)
    }

    /// After a failed fsync: the frames not known durable are cut off the log (best effort:
    /// the disk is failing), so that a restart does not replay rows whose writers were told
    /// they failed; every writer waiting and every later one gets the error.
    fn fail(&self, e: std::io::Error) {
        tracing::error!("ingest log: fsync failed ({e}); writes fail until the server restarts");
        let durable = self.lock_sync().durable;
        let mut w = self.lock_writer();
        if w.last_seq > durable {
            match durable_prefix(&w.path, durable) {
                Ok(len) => {
                    let _ = w.file.set_len(len);
                    w.size = len;
                }
                Err(e) => tracing::error!("ingest log: cannot cut undurable frames: {e}"),
            }
        }
        drop(w);
        let mut s = self.lock_sync();
        s.error = Some(e.to_string());
        self.syncer.changed.notify_all();
    }

    /// Starts a new segment whose first frame will be `seq`, after making the old one durable.
    fn roll(&self, w: &mut Writer, seq: u64) -> Result<()> {
        w.file
            .sync_data()
            .map_err(|e| Error::io(format!("syncing {}", w.path.display()), e))?;
        let path = segment_path(&self.dir, seq);
        w.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        sync_dir(&self.dir)?;
        w.path = path;
        w.size = 0;
        Ok(())
    }

    /// Waits until frame `seq` is as durable as the policy promises.
    pub fn wait_durable(&self, seq: u64) -> Result<()> {
        let mut s = self.lock_sync();
        loop {
            if let Some(e) = &s.error {
                return Err(Error::Io {
                    context: "syncing the ingest log".into(),
                    source: std::io::Error::other(e.clone()),
                });
            }
            if s.durable >= seq {
                return Ok(());
            }
            s = self
                .syncer
                .changed
                .wait(s)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Makes everything appended so far durable, whatever the policy.
    /// The fsync runs outside the writer's lock, so appends to every stream go on meanwhile.
    pub fn sync(&self) -> Result<()> {
        let (file, path) = {
            let w = self.lock_writer();
            (w.file.try_clone(), w.path.clone())
        };
        file.and_then(|f| f.sync_data())
            .map_err(|e| Error::io(format!("syncing {}", path.display()), e))
    }

    /// Removes whole segments whose frames are all at or below `seq`.
    pub fn truncate_through(&self, seq: u64) -> Result<()> {
        let current = self.lock_writer().path.clone();
        let segments = segments(&self.dir)?;
        for pair in segments.windows(2) {
            let ((_, path), (next_first, _)) = (&pair[0], &pair[1]);
            if *next_first <= seq + 1 && *path != current {
                std::fs::remove_file(path)
                    .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
            }
        }
        Ok(())
    }

    /// Calls `apply` with every frame after `after`, in order.
    pub fn replay(
        &self,
        after: u64,
        mut apply: impl FnMut(u64, Record) -> Result<()>,
    ) -> Result<()> {
        let _w = self.lock_writer();
        let segments = segments(&self.dir)?;
        for (i, (_, path)) in segments.iter().enumerate() {
            if let Some((next_first, _)) = segments.get(i + 1) {
                if *next_first <= after + 1 {
                    continue;
                }
            }
            let scan = scan(path, |seq, body| {
                if seq > after {
                    apply(seq, decode(body)?)?;
                }
                Ok(())
            })?;
            if let Err(bad) = scan {
                return Err(Error::Internal(format!(
                    "ingest log: {} at {} offset {}",
                    bad.reason,
                    bad.path.display(),
                    bad.offset
                )));
            }
        }
        Ok(())
    }
}

impl Drop for IngestLog {
    fn drop(&mut self) {
        let mut s = self.lock_sync();
        s.closed = true;
        self.syncer.changed.notify_all();
    }
}

/// The group-commit loop: waits for written frames, fsyncs once for all of them, wakes their
/// writers. Ends when the log is dropped.
fn group_commit(log: std::sync::Weak<IngestLog>) {
    // When the last fsync started: under `Interval`, the next one waits out the rest of the
    // interval (gathering writers) but not a moment more, so a lone writer is not slowed.
    let mut last_start: Option<std::time::Instant> = None;
    loop {
        let Some(log) = log.upgrade() else {
            return;
        };
        let target = {
            let mut s = log.lock_sync();
            while s.written <= s.durable && !s.closed {
                let (next, _) = log
                    .syncer
                    .changed
                    .wait_timeout(s, Duration::from_millis(200))
                    .unwrap_or_else(|p| p.into_inner());
                s = next;
                if s.written <= s.durable && Arc::strong_count(&log) == 1 {
                    return;
                }
            }
            if s.closed {
                return;
            }
            s.written
        };
        if let (FsyncPolicy::Interval(gather), Some(last)) = (log.policy, last_start) {
            let rest = gather.saturating_sub(last.elapsed());
            if !rest.is_zero() {
                std::thread::sleep(rest);
            }
        }
        last_start = Some(std::time::Instant::now());
        // Frames written up to now are covered by this fsync, some beyond `target` too.
        let (file, written) = {
            let mut w = log.lock_writer();
            let file = if std::mem::take(&mut w.fail_next_sync) {
                Err(std::io::Error::other("injected fsync failure"))
            } else {
                w.file.try_clone()
            };
            (file, w.last_seq)
        };
        let result = file.and_then(|f| f.sync_data());
        if let Err(e) = result {
            log.fail(e);
            return;
        }
        let mut s = log.lock_sync();
        s.durable = s.durable.max(written.max(target));
        log.syncer.changed.notify_all();
    }
}

const TORN: &str = "a frame cut short";

/// Reads a segment's frames, calling `each` with every frame's sequence number and body.
/// Returns the offset after the last good frame, or where the first bad one starts.
fn scan(
    path: &Path,
    mut each: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<std::result::Result<u64, BadFrame>> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let mut pos = 0usize;
    let bad = |offset: usize, reason: &str| BadFrame {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason: reason.to_string(),
    };
    while pos < bytes.len() {
        let Some(header) = bytes.get(pos..pos + 8) else {
            return Ok(Err(bad(pos, TORN)));
        };
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        let Some(body) = bytes.get(pos + 8..pos + 8 + len) else {
            return Ok(Err(bad(pos, TORN)));
        };
        if crc32fast::hash(body) != crc || len < 11 {
            // Zeros from here to the end of the file are space the file system allocated but
            // the crash never filled (ext4 and XFS leave that after a power cut): a torn tail.
            // (A run of zeros reads as a frame of length 0 whose checksum matches.)
            if bytes[pos..].iter().all(|&b| b == 0) {
                return Ok(Err(bad(pos, TORN)));
            }
            // A bad checksum on the very last frame is a write the crash cut short.
            let last = pos + 8 + len == bytes.len();
            if last && len >= 11 {
                // Whole but wrong: a torn write, or a flipped byte in a frame that was
                // acknowledged. Either way it cannot be read; say loudly what it held.
                tracing::error!(
                    "ingest log: the last frame of {} (offset {pos}) fails its checksum and is \
                     dropped: {}; if it was acknowledged, that is lost",
                    path.display(),
                    describe_frame(body)
                );
            }
            return Ok(Err(bad(
                pos,
                if last {
                    TORN
                } else {
                    "a frame with a bad checksum"
                },
            )));
        }
        let seq = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
        each(seq, body)?;
        pos += 8 + len;
    }
    Ok(Ok(pos as u64))
}

/// Where the frames up to `seq` end in the segment at `path`.
fn durable_prefix(path: &Path, seq: u64) -> Result<u64> {
    let mut end = 0u64;
    scan(path, |frame_seq, body| {
        if frame_seq <= seq {
            end += 8 + body.len() as u64;
        }
        Ok(())
    })?
    .map_err(|bad| Error::Internal(format!("{} at offset {}", bad.reason, bad.offset)))?;
    Ok(end)
}

/// What an unreadable frame seems to hold, from its header and, if its payload still
/// decodes, its rows: for the error that reports it dropped.
fn describe_frame(body: &[u8]) -> String {
    let seq = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
    match decode(body) {
        Ok(Record::Rows { stream, batches }) => format!(
            "log seq {seq}, {} rows of stream \"{stream}\"",
            batches.iter().map(|b| b.num_rows()).sum::<usize>()
        ),
        Ok(Record::SourceRows { stream, batch, .. }) => format!(
            "log seq {seq}, {} rows of stream \"{stream}\" from a source",
            batch.num_rows()
        ),
        Ok(Record::Watermark { stream, .. }) => {
            format!("log seq {seq}, a watermark of stream \"{stream}\"")
        }
        Ok(Record::Catalog { sql }) => format!("log seq {seq}, the catalog change {sql:?}"),
        Ok(Record::Table { table, change }) => format!(
            "log seq {seq}, a change of {} rows to table \"{table}\"",
            change
                .upserts
                .iter()
                .chain(&change.deletes)
                .map(|b| b.num_rows())
                .sum::<usize>()
        ),
        Err(_) => format!("log seq {seq}, contents unreadable"),
    }
}

/// Rows as an Arrow IPC stream, each buffer compressed with zstd at its fastest level: system
/// events compress several times over (2M `proc_events` rows: 227 MB as they are, 117 MB with
/// LZ4, 63 MB with zstd), and the bytes not written cost more than compressing them
/// (benches/README.md, "The server on one core and two"). The batches are compressed on up to
/// `threads` threads at once and written in order. Readers decompress by themselves, so logs
/// written before (uncompressed, then LZ4) read as they did.
fn write_ipc(out: &mut Vec<u8>, batches: &[RecordBatch], threads: usize) -> Result<()> {
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let options = IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::ZSTD))?
        .try_with_compression_level(Some(1))?;
    let schema = first.schema();
    if schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), DataType::Dictionary(..)))
    {
        // Dictionaries are tracked across a stream's batches: one writer, in order.
        let mut writer = StreamWriter::try_new_with_options(out, &schema, options)?;
        for batch in batches {
            writer.write(batch)?;
        }
        writer.finish()?;
        return Ok(());
    }
    let generator = IpcDataGenerator::default();
    let mut tracker = DictionaryTracker::new(false);
    let head = generator.schema_to_bytes_with_dictionary_tracker(&schema, &mut tracker, &options);
    write_message(&mut *out, head, &options)?;
    let shares: Vec<&[RecordBatch]> = batches
        .chunks(batches.len().div_ceil(threads.max(1)))
        .collect();
    let encode = |share: &[RecordBatch]| -> Result<Vec<EncodedData>> {
        let mut tracker = DictionaryTracker::new(false);
        // Keeps the compressor between the share's batches.
        let mut context = IpcWriteContext::default();
        share
            .iter()
            .map(|batch| {
                let (_, data) = generator.encode(batch, &mut tracker, &options, &mut context)?;
                Ok(data)
            })
            .collect()
    };
    for encoded in crate::spawn::each_in_parallel("saql-log-encode", shares, encode) {
        for data in encoded? {
            write_message(&mut *out, data, &options)?;
        }
    }
    // The end of the stream: a continuation marker and a message of length 0.
    out.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    Ok(())
}

/// Bytes of a frame before its body: `len` and `crc32`.
const FRAME_HEAD: usize = 8;

/// The frame of `record`, built in one buffer (a COPY's frame is hundreds of MiB), with
/// its sequence number and checksum left for [`seal`], and the checksum of what follows the
/// sequence number.
fn encode(record: &Record, threads: usize) -> Result<(Vec<u8>, crc32fast::Hasher)> {
    let (kind, stream) = match record {
        Record::Rows { stream, .. } => (KIND_ROWS, stream.as_str()),
        Record::Watermark { stream, .. } => (KIND_WATERMARK, stream.as_str()),
        Record::Catalog { .. } => (KIND_CATALOG, ""),
        Record::Table { table, .. } => (KIND_TABLE, table.as_str()),
        Record::SourceRows { stream, .. } => (KIND_SOURCE_ROWS, stream.as_str()),
    };
    let stream_len = u16::try_from(stream.len()).map_err(|_| {
        Error::invalid_input(
            sqlstate::NAME_TOO_LONG,
            "stream name too long for the ingest log",
        )
    })?;
    let mut frame = vec![0u8; FRAME_HEAD + 8];
    frame.push(kind);
    frame.extend_from_slice(&stream_len.to_le_bytes());
    frame.extend_from_slice(stream.as_bytes());
    match record {
        Record::Rows { batches, .. } => {
            if batches.is_empty() {
                return Err(Error::Internal("logging rows without a batch".into()));
            }
            write_ipc(&mut frame, batches, threads)?;
        }
        Record::Watermark { watermark, .. } => {
            frame.extend_from_slice(&watermark.0 .0.to_le_bytes());
        }
        Record::Catalog { sql } => frame.extend_from_slice(sql.as_bytes()),
        Record::Table { change, .. } => {
            frame.push(u8::from(change.truncate));
            for part in [&change.deletes, &change.upserts] {
                let mut bytes = Vec::new();
                write_ipc(&mut bytes, part, threads)?;
                put_part(&mut frame, &bytes).map_err(|_| {
                    Error::limit(
                        sqlstate::PROGRAM_LIMIT_EXCEEDED,
                        "a table change over 4 GiB cannot be logged: split it",
                    )
                })?;
            }
            // The source and its progress; an empty name for none.
            let (name, progress) = change
                .source
                .as_ref()
                .map_or(("", ""), |(n, p)| (n.as_str(), p.as_str()));
            for part in [name, progress] {
                put_part(&mut frame, part.as_bytes())?;
            }
        }
        Record::SourceRows {
            source,
            progress,
            batch,
            ..
        } => {
            for part in [source.as_bytes(), progress.as_bytes()] {
                put_part(&mut frame, part)?;
            }
            write_ipc(&mut frame, std::slice::from_ref(batch), threads)?;
        }
    }
    let len = u32::try_from(frame.len() - FRAME_HEAD).map_err(|_| {
        Error::limit(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            "a single batch over 4 GiB cannot be logged: split the COPY",
        )
    })?;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    let mut rest = crc32fast::Hasher::new();
    rest.update(&frame[FRAME_HEAD + 8..]);
    Ok((frame, rest))
}

/// Gives an encoded frame its sequence number, then its checksum (over the sequence number
/// and `rest`, the checksum of the bytes after it).
fn seal(frame: &mut [u8], seq: u64, rest: crc32fast::Hasher) {
    frame[FRAME_HEAD..FRAME_HEAD + 8].copy_from_slice(&seq.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&seq.to_le_bytes());
    crc.combine(&rest);
    frame[4..FRAME_HEAD].copy_from_slice(&crc.finalize().to_le_bytes());
}

fn decode(body: &[u8]) -> Result<Record> {
    let bad = || Error::Internal("ingest log frame with a bad layout".into());
    let kind = *body.get(8).ok_or_else(bad)?;
    let stream_len = u16::from_le_bytes(
        body.get(9..11)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    ) as usize;
    let stream = std::str::from_utf8(body.get(11..11 + stream_len).ok_or_else(bad)?)
        .map_err(|_| bad())?
        .to_string();
    let payload = &body[11 + stream_len..];
    Ok(match kind {
        KIND_ROWS => {
            let reader = StreamReader::try_new(Cursor::new(payload), None)?;
            let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
            if batches.is_empty() {
                return Err(bad());
            }
            Record::Rows { stream, batches }
        }
        KIND_WATERMARK => Record::Watermark {
            stream,
            watermark: Watermark(EventTime(i64::from_le_bytes(
                payload.try_into().map_err(|_| bad())?,
            ))),
        },
        KIND_CATALOG => Record::Catalog {
            sql: String::from_utf8(payload.to_vec()).map_err(|_| bad())?,
        },
        KIND_SOURCE_ROWS => {
            let mut rest = payload;
            let source = take_text(&mut rest).ok_or_else(bad)?;
            let progress = take_text(&mut rest).ok_or_else(bad)?;
            let mut reader = StreamReader::try_new(Cursor::new(rest), None)?;
            let batch = reader.next().ok_or_else(bad)??;
            Record::SourceRows {
                stream,
                source,
                progress,
                batch,
            }
        }
        KIND_TABLE => {
            let truncate = *payload.first().ok_or_else(bad)? != 0;
            let mut rest = &payload[1..];
            let batches = |rest: &mut &[u8]| -> Result<Vec<RecordBatch>> {
                let bytes = take_part(rest).ok_or_else(bad)?;
                if bytes.is_empty() {
                    return Ok(vec![]);
                }
                let reader = StreamReader::try_new(Cursor::new(bytes), None)?;
                Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
            };
            let deletes = batches(&mut rest)?;
            let upserts = batches(&mut rest)?;
            let name = take_text(&mut rest).ok_or_else(bad)?;
            let progress = take_text(&mut rest).ok_or_else(bad)?;
            Record::Table {
                table: stream,
                change: TableChange {
                    truncate,
                    deletes,
                    upserts,
                    source: (!name.is_empty()).then_some((name, progress)),
                },
            }
        }
        _ => return Err(bad()),
    })
}

/// Appends `bytes` with its length before it (u32, little-endian).
fn put_part(out: &mut Vec<u8>, bytes: &[u8]) -> Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| Error::Internal("a part of a log frame over 4 GiB".into()))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// The next part [`put_part`] wrote, moving `rest` past it; `None` if it is cut short.
fn take_part<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let part = rest.get(4..4 + len)?;
    *rest = &rest[4 + len..];
    Some(part)
}

/// The next part as UTF-8 text.
fn take_text(rest: &mut &[u8]) -> Option<String> {
    String::from_utf8(take_part(rest)?.to_vec()).ok()
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("seg-{first_seq:012}.log"))
}

/// The segments in `dir`, by first sequence number.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(first) = name
            .to_str()
            .and_then(|n| n.strip_prefix("seg-"))
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((first, entry.path()));
    }
    out.sort();
    Ok(out)
}

fn truncate(path: &Path, len: u64) -> Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    f.set_len(len)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(format!("truncating {}", path.display()), e))
}

/// Makes a directory's entries (new, renamed or removed files) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
