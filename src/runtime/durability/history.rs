//! Retained history: a stream with a `history` setting keeps the rows it accepted as Parquet
//! segments in `<data dir>/history/<stream>/`, for hunting (ad hoc SELECT over all of them)
//! and backfill (a new query run over them first).
//!
//! Rows go into the open segment in memory as they are applied, in arrival order. A checkpoint
//! seals the open segment once it is big or old enough (or at an explicit `CHECKPOINT`) at the
//! stream's log position, writes it (fsynced) before its manifest, and records in the manifest
//! the log position after which rows are not yet in a segment; the log is kept from there on.
//! So a row is always in the log or in a written segment, and ingest never waits for Parquet:
//! under the stream's lock a checkpoint only moves the open batches aside. Recovery deletes
//! the segments past the restored checkpoint's position (written for a checkpoint that never
//! completed) and replays the log frames from there into the open segment.
//!
//! A segment is named `seg-<end>-<first row>-<rows>-<newest>.parquet`: the log position through
//! which it holds rows, the number of its first row (a stream's history rows are numbered
//! from 0 in arrival order), its row count and its newest event time in nanoseconds (its
//! sealing time, for a stream without event time), so that listing the directory tells all.
//! After each checkpoint, segments older than the retention behind the newest event (or past
//! its size, oldest first) are deleted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::plan::retention::Retention;
use crate::runtime::durability::wal::sync_dir;

/// The open segment is sealed at a periodic checkpoint once it holds this much Arrow memory...
const SEAL_BYTES: usize = 64 << 20;
/// ... or once its oldest row is this old.
const SEAL_AGE: Duration = Duration::from_secs(600);
/// Rows per Parquet row group: the unit a time predicate skips by its min/max statistics.
const ROW_GROUP_ROWS: usize = 128 * 1024;
/// The key of a segment's metadata that keeps the row counts of the batches its rows
/// arrived in (run-length: `count x rows, ...`): a backfill replays them batch by batch, as
/// they were applied, so that the watermark moves at the same rows and the same rows are late.
const BATCH_ROWS_KEY: &str = "saql.batch_rows";

fn encode_batch_rows(batches: &[RecordBatch]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for b in batches {
        match runs.last_mut() {
            Some((count, rows)) if *rows == b.num_rows() => *count += 1,
            _ => runs.push((1, b.num_rows())),
        }
    }
    let runs: Vec<String> = runs.iter().map(|(c, r)| format!("{c}x{r}")).collect();
    runs.join(",")
}

fn decode_batch_rows(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for run in text.split(',').filter(|r| !r.is_empty()) {
        let (count, rows) = run.split_once('x')?;
        let (count, rows): (usize, usize) = (count.parse().ok()?, rows.parse().ok()?);
        out.extend(std::iter::repeat_n(rows, count));
    }
    Some(out)
}

/// A written segment.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Its file.
    pub path: PathBuf,
    /// The log position through which it holds the stream's rows.
    pub end: u64,
    /// Number of its first row.
    pub first_row: u64,
    /// Its rows.
    pub rows: u64,
    /// Its newest event time (ns).
    pub newest: i64,
    /// Its size on disk.
    pub bytes: u64,
}

impl Segment {
    fn file_name(&self) -> String {
        format!(
            "seg-{:020}-{}-{}-{}.parquet",
            self.end, self.first_row, self.rows, self.newest
        )
    }

    /// Reads a segment's name back; None for anything else.
    fn parse(path: &Path) -> Option<Segment> {
        let name = path.file_name()?.to_str()?;
        let fields = name.strip_prefix("seg-")?.strip_suffix(".parquet")?;
        let mut it = fields.splitn(4, '-');
        let end = it.next()?.parse().ok()?;
        let first_row = it.next()?.parse().ok()?;
        let rows = it.next()?.parse().ok()?;
        let newest = it.next()?.parse().ok()?;
        let bytes = std::fs::metadata(path).ok()?.len();
        Some(Segment {
            path: path.to_path_buf(),
            end,
            first_row,
            rows,
            newest,
            bytes,
        })
    }
}

/// Rows sealed for a segment, not yet written.
#[derive(Debug, Clone)]
struct Sealed {
    segment: Segment,
    batches: Vec<RecordBatch>,
}

/// One stream's history.
#[derive(Debug)]
pub struct History {
    dir: PathBuf,
    schema: SchemaRef,
    time_column: Option<usize>,
    /// What it keeps.
    pub retention: Retention,
    /// Written segments, oldest first.
    segments: Vec<Segment>,
    /// Sealed segments waiting to be written by the checkpoint that sealed them.
    sealed: Vec<Sealed>,
    /// Rows not yet sealed, in arrival order.
    open: Vec<RecordBatch>,
    open_rows: u64,
    open_bytes: usize,
    open_newest: Option<i64>,
    /// When the open segment received its first row.
    open_since: Option<Instant>,
    /// The open segment's rows lie after this log position.
    open_after: u64,
    /// Number of the next row appended.
    next_row: u64,
}

/// What a reader sees of a history at one moment: the written segments' files, then the rows
/// not yet written, in arrival order, with no row twice and none missing.
#[derive(Debug, Clone, Default)]
pub struct HistoryScan {
    /// Written segments, oldest first.
    pub segments: Vec<Segment>,
    /// Sealed and open rows after them.
    pub batches: Vec<RecordBatch>,
    /// The number of the first row in `batches`.
    pub batches_first_row: u64,
}

impl History {
    /// The history of a stream with `schema` in `dir`, with the segments found there (recovery
    /// then settles them with [`History::settle`]).
    pub fn open(
        dir: PathBuf,
        schema: SchemaRef,
        time_column: Option<usize>,
        retention: Retention,
    ) -> Result<History> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let mut segments = Vec::new();
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            match Segment::parse(&path) {
                Some(s) => segments.push(s),
                // A segment whose write a crash cut short.
                None if path.extension().is_some_and(|e| e == "tmp") => {
                    let _ = std::fs::remove_file(&path);
                }
                None => {}
            }
        }
        segments.sort_by_key(|s| s.end);
        let next_row = segments.last().map_or(0, |s| s.first_row + s.rows);
        let open_after = segments.last().map_or(0, |s| s.end);
        Ok(History {
            dir,
            schema,
            time_column,
            retention,
            segments,
            sealed: Vec::new(),
            open: Vec::new(),
            open_rows: 0,
            open_bytes: 0,
            open_newest: None,
            open_since: None,
            open_after,
            next_row,
        })
    }

    /// After recovery restored a checkpoint whose history of this stream reached log position
    /// `through`: segments past it were written for a checkpoint that never completed, and
    /// are deleted (their rows are replayed from the log into the open segment).
    pub fn settle(&mut self, through: u64) -> Result<()> {
        let (keep, drop): (Vec<_>, Vec<_>) =
            self.segments.drain(..).partition(|s| s.end <= through);
        for s in drop {
            std::fs::remove_file(&s.path)
                .map_err(|e| Error::io(format!("removing {}", s.path.display()), e))?;
        }
        self.segments = keep;
        self.next_row = self.segments.last().map_or(0, |s| s.first_row + s.rows);
        self.open.clear();
        self.open_rows = 0;
        self.open_bytes = 0;
        self.open_newest = None;
        self.open_since = None;
        self.open_after = through;
        Ok(())
    }

    /// Appends rows just applied to the stream.
    pub fn append(&mut self, batch: &RecordBatch) {
        if batch.num_rows() == 0 {
            return;
        }
        if let Some(c) = self.time_column {
            let times = batch.column(c).as_primitive::<TimestampNanosecondType>();
            if let Some(max) = datafusion::arrow::compute::max(times) {
                self.open_newest = Some(self.open_newest.map_or(max, |n| n.max(max)));
            }
        }
        self.open_since.get_or_insert_with(Instant::now);
        self.open_rows += batch.num_rows() as u64;
        self.open_bytes += batch.get_array_memory_size();
        self.open.push(batch.clone());
    }

    /// At a checkpoint whose position for this stream is `position` (every row applied so far
    /// lies at or before it): seals the open segment if it is big or old enough, or if `all`;
    /// returns the log position after which rows are not yet in a segment once the sealed ones
    /// are written.
    pub fn checkpoint(&mut self, position: u64, all: bool) -> u64 {
        if self.open.is_empty() {
            self.open_after = position;
            return position;
        }
        let due = all
            || self.open_bytes >= SEAL_BYTES
            || self.open_since.is_some_and(|t| t.elapsed() >= SEAL_AGE);
        if !due {
            return self.open_after;
        }
        let newest = self.open_newest.unwrap_or_else(wall_clock_nanos);
        let mut segment = Segment {
            path: PathBuf::new(),
            end: position,
            first_row: self.next_row,
            rows: self.open_rows,
            newest,
            bytes: 0,
        };
        segment.path = self.dir.join(segment.file_name());
        self.next_row += self.open_rows;
        self.sealed.push(Sealed {
            segment,
            batches: std::mem::take(&mut self.open),
        });
        self.open_rows = 0;
        self.open_bytes = 0;
        self.open_newest = None;
        self.open_since = None;
        self.open_after = position;
        position
    }

    /// The sealed segments to write, with their rows (taken under the stream's lock, written
    /// outside it by [`write_segment`]).
    pub fn to_write(&self) -> Vec<(Segment, Vec<RecordBatch>)> {
        self.sealed
            .iter()
            .map(|s| (s.segment.clone(), s.batches.clone()))
            .collect()
    }

    /// Records that the sealed segment ending at `end` is on disk, `bytes` long.
    pub fn written(&mut self, end: u64, bytes: u64) {
        if let Some(i) = self.sealed.iter().position(|s| s.segment.end == end) {
            let mut segment = self.sealed.remove(i).segment;
            segment.bytes = bytes;
            self.segments.push(segment);
        }
    }

    /// Removes (from the list) the segments the retention no longer keeps and returns them,
    /// for their files to be deleted. `newest` is the stream's newest event time, if it has
    /// event time.
    pub fn expire(&mut self, newest: Option<i64>) -> Vec<Segment> {
        let keep_from = match self.retention {
            Retention::Span(span) => {
                let now = newest.unwrap_or_else(wall_clock_nanos);
                let span = i64::try_from(span.as_nanos()).unwrap_or(i64::MAX);
                let cutoff = now.saturating_sub(span);
                self.segments
                    .iter()
                    .take_while(|s| s.newest < cutoff)
                    .count()
            }
            Retention::Bytes(max) => {
                let mut total: u64 = self.segments.iter().map(|s| s.bytes).sum();
                let mut n = 0;
                while total > max && n < self.segments.len() {
                    total -= self.segments[n].bytes;
                    n += 1;
                }
                n
            }
        };
        self.segments.drain(..keep_from).collect()
    }

    /// What a reader sees now.
    pub fn scan(&self) -> HistoryScan {
        HistoryScan {
            segments: self.segments.clone(),
            batches: self
                .sealed
                .iter()
                .flat_map(|s| s.batches.iter().cloned())
                .chain(self.open.iter().cloned())
                .collect(),
            batches_first_row: self
                .sealed
                .first()
                .map_or(self.next_row, |s| s.segment.first_row),
        }
    }

    /// Bytes of written segments.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Rows held (written, sealed and open).
    pub fn rows(&self) -> u64 {
        self.segments.iter().map(|s| s.rows).sum::<u64>()
            + self.sealed.iter().map(|s| s.segment.rows).sum::<u64>()
            + self.open_rows
    }

    /// The stream's schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The directory of its segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The directory name of a stream's history: its name, or for a name with other characters
/// than lowercase letters, digits and `_`, `x` and the name's bytes in hex.
pub fn history_dir_name(stream: &str) -> String {
    if !stream.is_empty()
        && stream
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return stream.to_string();
    }
    let hex: String = stream.bytes().map(|b| format!("{b:02x}")).collect();
    format!("x{hex}")
}

fn wall_clock_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Writes a sealed segment: to `<name>.tmp`, fsynced, then renamed, so that a segment file
/// is always whole. Returns its size.
pub fn write_segment(
    segment: &Segment,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<u64> {
    let io =
        |what: &str, p: &Path, e: std::io::Error| Error::io(format!("{what} {}", p.display()), e);
    let tmp = segment.path.with_extension("parquet.tmp");
    let file = std::fs::File::create(&tmp).map_err(|e| io("creating", &tmp, e))?;
    let props = segment_properties(schema);
    let parquet = |e: datafusion::parquet::errors::ParquetError| {
        Error::Internal(format!("writing {}: {e}", tmp.display()))
    };
    let mut writer =
        ArrowWriter::try_new(file, Arc::clone(schema), Some(props)).map_err(parquet)?;
    writer.append_key_value_metadata(KeyValue::new(
        BATCH_ROWS_KEY.to_string(),
        encode_batch_rows(batches),
    ));
    for b in batches {
        writer.write(b).map_err(parquet)?;
    }
    let file = writer.into_inner().map_err(parquet)?;
    file.sync_all().map_err(|e| io("syncing", &tmp, e))?;
    let bytes = file.metadata().map_err(|e| io("reading", &tmp, e))?.len();
    std::fs::rename(&tmp, &segment.path).map_err(|e| io("renaming", &tmp, e))?;
    if let Some(dir) = segment.path.parent() {
        sync_dir(dir)?;
    }
    Ok(bytes)
}

/// How segments are written: zstd, row groups of [`ROW_GROUP_ROWS`], and per column the
/// encoding that costs least to write for what it holds. Parquet's default tries a dictionary
/// for every column and gives it up only once the dictionary outgrows its page, so a column of
/// distinct numbers (event times above all) would be hashed value by value for nothing; numbers
/// are delta-encoded instead (event times come nearly in order), floats written plain, and
/// dictionaries kept for text and the rest, where hosts, users and programs repeat. Min/max
/// statistics, which let a time predicate skip row groups, are kept for all but text.
fn segment_properties(schema: &SchemaRef) -> WriterProperties {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::parquet::basic::Encoding;
    use datafusion::parquet::file::properties::EnabledStatistics;
    use datafusion::parquet::schema::types::ColumnPath;
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("a valid level"),
        ))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
    for field in schema.fields() {
        let column = ColumnPath::from(field.name().as_str());
        let encoding = match field.data_type() {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Timestamp(..)
            | DataType::Date32
            | DataType::Date64
            | DataType::Time64(_)
            | DataType::Duration(_) => Encoding::DELTA_BINARY_PACKED,
            DataType::Float32 | DataType::Float64 => Encoding::PLAIN,
            // Text keeps its dictionary but no min/max: comparing every value with the
            // page's bounds was a quarter of a checkpoint's time, and text in arrival order
            // (hosts, paths) spans nearly its whole range in every row group, so its bounds
            // would prune nothing.
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                props = props.set_column_statistics_enabled(column, EnabledStatistics::None);
                continue;
            }
            _ => continue,
        };
        props = props
            .set_column_dictionary_enabled(column.clone(), false)
            .set_column_encoding(column, encoding);
    }
    props.build()
}

/// Deletes expired segments' files.
pub fn delete_segments(segments: &[Segment]) {
    for s in segments {
        if let Err(e) = std::fs::remove_file(&s.path) {
            tracing::warn!("removing expired history {}: {e}", s.path.display());
        }
    }
}

/// Reads a segment's rows back, in arrival order, in the batches they arrived in.
pub fn read_segment(segment: &Segment) -> Result<Vec<RecordBatch>> {
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let file = std::fs::File::open(&segment.path)
        .map_err(|e| Error::io(format!("opening {}", segment.path.display()), e))?;
    let bad = |e: &dyn std::fmt::Display| {
        Error::Internal(format!("reading {}: {e}", segment.path.display()))
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(&e))?;
    let sizes = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|kv| kv.key == BATCH_ROWS_KEY))
        .and_then(|kv| kv.value.as_deref())
        .and_then(decode_batch_rows);
    let schema = builder.schema().clone();
    let read = builder
        .with_batch_size(64 * 1024)
        .build()
        .map_err(|e| bad(&e))?
        .map(|b| b.map_err(|e| bad(&e)))
        .collect::<Result<Vec<_>>>()?;
    let Some(sizes) = sizes else {
        return Ok(read);
    };
    if sizes.iter().sum::<usize>() != read.iter().map(RecordBatch::num_rows).sum::<usize>() {
        return Err(bad(&"its batch sizes do not add up to its rows"));
    }
    rebatch(&schema, &read, &sizes)
}

/// Cuts `read` (batches as the Parquet reader made them) into batches of `sizes` rows, in
/// order: a batch inside one read batch is a slice of it (no copy); only one that spans
/// read batches is concatenated from its pieces.
fn rebatch(schema: &SchemaRef, read: &[RecordBatch], sizes: &[usize]) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::with_capacity(sizes.len());
    let (mut batch, mut at) = (0, 0);
    for &size in sizes {
        let mut pieces = Vec::new();
        let mut wanted = size;
        while wanted > 0 {
            let Some(b) = read.get(batch) else {
                break;
            };
            let take = wanted.min(b.num_rows() - at);
            pieces.push(b.slice(at, take));
            wanted -= take;
            at += take;
            if at == b.num_rows() {
                (batch, at) = (batch + 1, 0);
            }
        }
        out.push(match pieces.len() {
            1 => pieces.pop().expect("one piece"),
            _ => datafusion::arrow::compute::concat_batches(schema, &pieces)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, TimestampNanosecondArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("x", DataType::Int64, false),
        ]))
    }

    fn batch(range: std::ops::Range<i64>) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    range.clone().map(|i| i * 1_000_000_000),
                )),
                Arc::new(Int64Array::from_iter_values(range)),
            ],
        )
        .unwrap()
    }

    fn xs(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                b.column(1)
                    .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect()
    }

    fn write_all(h: &mut History) {
        for (segment, batches) in h.to_write() {
            let bytes = write_segment(&segment, h.schema(), &batches).unwrap();
            h.written(segment.end, bytes);
        }
    }

    fn all_rows(h: &History) -> Vec<i64> {
        let scan = h.scan();
        let mut out = Vec::new();
        for s in &scan.segments {
            out.extend(xs(&read_segment(s).unwrap()));
        }
        out.extend(xs(&scan.batches));
        out
    }

    #[test]
    fn rows_are_in_segments_or_open_never_twice() {
        let dir = tempfile::tempdir().unwrap();
        let span = Retention::Span(Duration::from_secs(3600));
        let mut h = History::open(dir.path().into(), schema(), Some(0), span).unwrap();
        h.append(&batch(0..10));
        // Not due: kept open, and the log must keep it (from position 0).
        assert_eq!(h.checkpoint(3, false), 0);
        h.append(&batch(10..20));
        assert_eq!(h.checkpoint(5, true), 5);
        // Sealed but not written: still seen.
        assert_eq!(all_rows(&h), (0..20).collect::<Vec<_>>());
        write_all(&mut h);
        h.append(&batch(20..25));
        assert_eq!(all_rows(&h), (0..25).collect::<Vec<_>>());
        assert_eq!(h.rows(), 25);
        assert!(h.bytes() > 0);
        // Reopened, the segment is found by its name.
        let mut again = History::open(dir.path().into(), schema(), Some(0), span).unwrap();
        again.settle(5).unwrap();
        assert_eq!(all_rows(&again), (0..20).collect::<Vec<_>>());
        again.append(&batch(20..25));
        assert_eq!(again.checkpoint(9, true), 9);
        write_all(&mut again);
        assert_eq!(again.scan().segments[1].first_row, 20);
        // A checkpoint that never completed: its segment goes, its rows come back by replay.
        let mut third = History::open(dir.path().into(), schema(), Some(0), span).unwrap();
        third.settle(5).unwrap();
        assert_eq!(third.scan().segments.len(), 1);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn retention_by_span_and_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let span = Retention::Span(Duration::from_secs(100));
        let mut h = History::open(dir.path().into(), schema(), Some(0), span).unwrap();
        for (i, pos) in [(0, 1), (100, 2), (200, 3)] {
            h.append(&batch(i..i + 100));
            h.checkpoint(pos, true);
            write_all(&mut h);
        }
        // Newest event at 299 s: the first segment (newest 99 s) is older than 100 s behind.
        let gone = h.expire(Some(299_000_000_000));
        assert_eq!(gone.len(), 1);
        delete_segments(&gone);
        assert_eq!(all_rows(&h), (100..300).collect::<Vec<_>>());
        // Room for the newest segment only.
        let newest = h.scan().segments[1].bytes;
        h.retention = Retention::Bytes(newest);
        let gone = h.expire(None);
        assert_eq!(gone.len(), 1);
        assert_eq!(all_rows(&h), (200..300).collect::<Vec<_>>());
    }

    #[test]
    fn rebatch_slices_within_read_batches_and_joins_across_them() {
        let read = vec![batch(0..5), batch(5..12), batch(12..13)];
        let values = |b: &RecordBatch| -> Vec<i64> {
            let x = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
            x.values().to_vec()
        };
        let sizes = [2, 3, 0, 4, 4];
        let out = rebatch(&schema(), &read, &sizes).unwrap();
        assert_eq!(
            out.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(),
            sizes
        );
        let all: Vec<i64> = out.iter().flat_map(values).collect();
        assert_eq!(all, (0..13).collect::<Vec<_>>());
        assert_eq!(values(&out[4]), vec![9, 10, 11, 12]);
    }
}
