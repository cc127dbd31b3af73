//! The ingest log's tests: frames, torn tails, corruption, full disks, failed fsyncs.

use super::*;
use datafusion::arrow::array::Int64Array;
use datafusion::arrow::datatypes::{DataType, Field, Schema};

fn rows(values: std::ops::Range<i64>) -> Record {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let batch =
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(values))]).unwrap();
    Record::Rows {
        stream: "s".into(),
        batches: vec![batch],
    }
}

fn replayed(log: &IngestLog, after: u64) -> Vec<(u64, usize)> {
    let mut out = Vec::new();
    log.replay(after, |seq, r| {
        out.push((
            seq,
            match r {
                Record::Rows { batches, .. } => batches.iter().map(|b| b.num_rows()).sum(),
                Record::Watermark { .. } => 0,
                Record::Catalog { sql } => sql.len(),
                Record::SourceRows { batch, .. } => 1000 + batch.num_rows(),
                Record::Table { change, .. } => {
                    10_000
                        + usize::from(change.truncate)
                        + 10 * change.deletes.iter().map(|b| b.num_rows()).sum::<usize>()
                        + 100 * change.upserts.iter().map(|b| b.num_rows()).sum::<usize>()
                }
            },
        ));
        Ok(())
    })
    .unwrap();
    out
}

#[test]
fn a_table_change_comes_back_whole() {
    use crate::operators::lookup::TableChange;
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Always, false).unwrap();
    let Record::Rows { batches, .. } = rows(0..4) else {
        unreachable!()
    };
    let change = |truncate, deletes: Vec<RecordBatch>, upserts: Vec<RecordBatch>| Record::Table {
        table: "t".into(),
        change: TableChange {
            truncate,
            deletes,
            upserts,
            source: truncate.then(|| ("feed".to_string(), "{}".to_string())),
        },
    };
    let a = log
        .append(&change(
            false,
            vec![],
            vec![batches[0].clone(), batches[0].clone()],
        ))
        .unwrap();
    log.append(&change(true, batches.clone(), vec![])).unwrap();
    let c = log.append(&change(true, vec![], vec![])).unwrap();
    log.wait_durable(c).unwrap();
    drop(log);
    let log = IngestLog::open(dir.path(), FsyncPolicy::Always, false).unwrap();
    assert_eq!(
        replayed(&log, 0),
        vec![(a, 10_800), (a + 1, 10_041), (c, 10_001)]
    );
}

#[test]
fn frames_come_back_in_order_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Always, false).unwrap();
    let a = log.append(&rows(0..3)).unwrap();
    log.wait_durable(a).unwrap();
    let sql = "CREATE STREAM s (x BIGINT)".to_string();
    log.append(&Record::Catalog { sql: sql.clone() }).unwrap();
    let c = log.append(&rows(0..5)).unwrap();
    log.wait_durable(c).unwrap();
    drop(log);
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    assert_eq!(log.last_seq(), 3);
    assert_eq!(replayed(&log, 0), vec![(1, 3), (2, sql.len()), (3, 5)]);
    assert_eq!(replayed(&log, 2), vec![(3, 5)]);
    assert_eq!(log.append(&rows(0..1)).unwrap(), 4);
}

#[test]
fn source_rows_keep_their_source_and_progress() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    let Record::Rows { mut batches, .. } = rows(0..4) else {
        unreachable!()
    };
    let batch = batches.remove(0);
    for b in [batch.clone(), batch.slice(0, 0)] {
        log.append(&Record::SourceRows {
            stream: "s".into(),
            source: "f".into(),
            progress: "{\"rows\":4}".into(),
            batch: b,
        })
        .unwrap();
    }
    drop(log);
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    let mut seen = Vec::new();
    log.replay(0, |_, r| {
        if let Record::SourceRows {
            stream,
            source,
            progress,
            batch,
        } = r
        {
            seen.push((stream, source, progress, batch.num_rows()));
        }
        Ok(())
    })
    .unwrap();
    let one = |n| {
        (
            "s".to_string(),
            "f".to_string(),
            "{\"rows\":4}".to_string(),
            n,
        )
    };
    assert_eq!(seen, vec![one(4), one(0)]);
}

#[test]
fn a_torn_tail_is_cut_off_and_a_corrupt_middle_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    for i in 0..3 {
        log.append(&rows(0..(i + 1))).unwrap();
    }
    drop(log);
    let path = segment_path(dir.path(), 1);
    let full = std::fs::read(&path).unwrap();
    // Cut the last frame in half: the log opens with two frames.
    std::fs::write(&path, &full[..full.len() - 10]).unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    assert_eq!(replayed(&log, 0).len(), 2);
    assert_eq!(log.append(&rows(0..7)).unwrap(), 3);
    drop(log);
    // Flip a byte inside the first frame: refused, then salvaged to nothing.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let err = IngestLog::open(dir.path(), FsyncPolicy::Off, false)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("offset 0") && err.contains("seg-000000000001.log"),
        "{err}"
    );
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, true).unwrap();
    assert!(replayed(&log, 0).is_empty());
}

#[test]
fn a_full_disk_fails_the_writer_with_53100_and_leaves_the_log_recoverable() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Always, false).unwrap();
    let first = log.append(&rows(0..3)).unwrap();
    log.wait_durable(first).unwrap();
    // The next segment lands on a device that is always full.
    let full = segment_path(dir.path(), 2);
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    {
        let mut w = log.lock_writer();
        log.roll(&mut w, 2).unwrap();
    }
    let err = log.append(&rows(0..4)).unwrap_err();
    assert_eq!(err.sqlstate(), "53100", "{err}");
    assert_eq!(log.last_seq(), 1, "nothing was appended");
    drop(log);
    // Space is freed: the log opens with what was acknowledged and takes new frames.
    std::fs::remove_file(&full).unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Always, false).unwrap();
    assert_eq!(replayed(&log, 0), vec![(1, 3)]);
    let next = log.append(&rows(0..5)).unwrap();
    log.wait_durable(next).unwrap();
    assert_eq!(replayed(&log, 0), vec![(1, 3), (2, 5)]);
}

#[test]
fn whole_segments_behind_a_checkpoint_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    log.append(&rows(0..1)).unwrap();
    {
        let mut w = log.lock_writer();
        log.roll(&mut w, 2).unwrap();
    }
    log.append(&rows(0..2)).unwrap();
    log.append(&rows(0..3)).unwrap();
    log.truncate_through(2).unwrap();
    assert_eq!(segments(dir.path()).unwrap().len(), 1);
    assert_eq!(replayed(&log, 0), vec![(2, 2), (3, 3)]);
}

#[test]
fn zeros_after_the_last_frame_are_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    log.append(&rows(0..3)).unwrap();
    log.append(&rows(0..4)).unwrap();
    drop(log);
    let path = segment_path(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    let frames = bytes.len();
    // What a power cut can leave: the file grew, the data never came.
    bytes.extend(std::iter::repeat_n(0u8, 4096));
    std::fs::write(&path, &bytes).unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    assert_eq!(replayed(&log, 0), vec![(1, 3), (2, 4)]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), frames as u64);
    assert_eq!(log.append(&rows(0..5)).unwrap(), 3);
    drop(log);
    // Zeros in the middle, with a frame after them, are still corruption.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.splice(frames..frames, std::iter::repeat_n(0u8, 64));
    std::fs::write(&path, &bytes).unwrap();
    let err = IngestLog::open(dir.path(), FsyncPolicy::Off, false)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("bad checksum"), "{err}");
}

#[test]
fn a_statement_of_many_batches_is_one_frame() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    let batches: Vec<RecordBatch> = [0..3, 3..10, 10..11]
        .into_iter()
        .map(|r| match rows(r) {
            Record::Rows { mut batches, .. } => batches.remove(0),
            _ => unreachable!(),
        })
        .collect();
    let seq = log
        .append(&Record::Rows {
            stream: "s".into(),
            batches,
        })
        .unwrap();
    assert_eq!(seq, 1);
    drop(log);
    // Cut anywhere inside it, none of its rows come back.
    let path = segment_path(dir.path(), 1);
    let full = std::fs::read(&path).unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    assert_eq!(replayed(&log, 0), vec![(1, 11)]);
    drop(log);
    std::fs::write(&path, &full[..full.len() / 2]).unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    assert!(replayed(&log, 0).is_empty());
}

#[test]
fn a_failed_fsync_cuts_the_frames_it_covered_and_fails_every_later_write() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Always, false).unwrap();
    let first = log.append(&rows(0..3)).unwrap();
    log.wait_durable(first).unwrap();
    log.inject_sync_failure();
    let second = log.append(&rows(0..4)).unwrap();
    let err = log.wait_durable(second).unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert!(log.append(&rows(0..5)).is_err(), "a later write is refused");
    assert_eq!(log.durable_seq(), first);
    drop(log);
    // A restart replays only what was durable: the writer of the second frame was told
    // it failed, so it must not come back.
    let log = IngestLog::open(dir.path(), FsyncPolicy::Always, false).unwrap();
    assert_eq!(replayed(&log, 0), vec![(1, 3)]);
}

#[test]
fn rows_compressed_on_several_threads_come_back_equal_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("x", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
    ]));
    // Seven batches over three threads: shares of three, three and one.
    let batches: Vec<RecordBatch> = (0..7i64)
        .map(|b| {
            let x = Int64Array::from_iter_values(b * 100..b * 100 + 50 + b);
            let s = datafusion::arrow::array::StringArray::from_iter(
                (0..50 + b).map(|i| (i % 3 != 0).then(|| format!("host-{}", (b + i) % 9))),
            );
            RecordBatch::try_new(schema.clone(), vec![Arc::new(x), Arc::new(s)]).unwrap()
        })
        .collect();
    let record = Record::Rows {
        stream: "s".into(),
        batches: batches.clone(),
    };
    log.append_on(&record, 3).unwrap();
    log.append_on(&record, 1).unwrap();
    drop(log);
    let log = IngestLog::open(dir.path(), FsyncPolicy::Off, false).unwrap();
    let mut back = Vec::new();
    log.replay(0, |_, r| {
        let Record::Rows { batches, .. } = r else {
            panic!("rows were logged")
        };
        back.push(batches);
        Ok(())
    })
    .unwrap();
    assert_eq!(back, vec![batches.clone(), batches]);
}

#[test]
fn rows_logged_with_lz4_before_still_read() {
    // The payload as logs before zstd held it: one LZ4-compressed IPC stream.
    let Record::Rows { batches, .. } = rows(0..1000) else {
        unreachable!()
    };
    let mut frame = vec![0u8; FRAME_HEAD + 8];
    frame.push(KIND_ROWS);
    frame.extend_from_slice(&1u16.to_le_bytes());
    frame.extend_from_slice(b"s");
    let options = IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::LZ4_FRAME))
        .unwrap();
    let mut writer =
        StreamWriter::try_new_with_options(&mut frame, &batches[0].schema(), options).unwrap();
    writer.write(&batches[0]).unwrap();
    writer.finish().unwrap();
    drop(writer);
    match decode(&frame[FRAME_HEAD..]).unwrap() {
        Record::Rows {
            stream,
            batches: back,
        } => {
            assert_eq!(stream, "s");
            assert_eq!(back, batches);
        }
        other => panic!("{other:?}"),
    }
}
