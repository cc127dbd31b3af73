//! Unit tests of [`Suppress`], and a check against a brute-force filter of the unsuppressed
//! rows over random batch splits, watermarks and a snapshot/restore midway.

use std::sync::Arc;

use datafusion::arrow::array::{AsArray, Int64Array, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::expressions::col;
use proptest::prelude::*;

use super::Suppress;
use crate::operators::Operator;
use crate::time::{EventTime, Watermark};

const SEC: i64 = 1_000_000_000;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new(
            "window_end",
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            true,
        ),
        Field::new("id", DataType::Int64, false),
    ]))
}

/// A row: key, time, and an id that names it in the output.
type Row = (Option<i64>, Option<i64>, i64);

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.0))),
            Arc::new(TimestampNanosecondArray::from_iter(
                rows.iter().map(|r| r.1),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

fn op(interval: i64, keyed: bool) -> Suppress {
    let keys = if keyed {
        vec![col("k", &schema()).unwrap()]
    } else {
        vec![]
    };
    Suppress::try_new(interval, keys, 1, schema()).unwrap()
}

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| b.column(2).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

fn wm(nanos: i64) -> Watermark {
    Watermark(EventTime(nanos))
}

#[test]
fn repeats_within_the_interval_are_counted_not_emitted() {
    let mut s = op(10 * SEC, true);
    let rows = [
        (Some(1), Some(0), 0),
        (Some(2), Some(SEC), 1),
        (Some(1), Some(5 * SEC), 2), // 5 s after key 1's alert: suppressed
        (Some(1), Some(9 * SEC), 3), // still within 10 s: suppressed
        (Some(1), Some(10 * SEC), 4), // 10 s after: emitted, a new interval starts
        (Some(1), Some(19 * SEC), 5), // within the new interval: suppressed
        (Some(2), Some(12 * SEC), 6), // 11 s after key 2's alert: emitted
        (None, Some(12 * SEC), 7),   // NULL is a key of its own
        (None, Some(13 * SEC), 8),   // suppressed
        (Some(3), None, 9),          // no time: emitted, starts nothing
        (Some(3), Some(13 * SEC), 10), // emitted
    ];
    let out = s.process_batch(batch(&rows)).unwrap();
    assert_eq!(ids(&out), vec![0, 1, 4, 6, 7, 9, 10]);
    assert_eq!(s.suppressed_rows(), 4);
}

#[test]
fn without_per_all_rows_share_one_key() {
    let mut s = op(10 * SEC, false);
    let rows = [
        (Some(1), Some(0), 0),
        (Some(2), Some(SEC), 1),
        (Some(3), Some(11 * SEC), 2),
    ];
    assert_eq!(ids(&s.process_batch(batch(&rows)).unwrap()), vec![0, 2]);
    assert_eq!(s.suppressed_rows(), 1);
}

#[test]
fn the_watermark_forgets_keys_whose_interval_ended_and_places_late_rows() {
    let mut s = op(10 * SEC, true);
    s.process_batch(batch(&[(Some(1), Some(0), 0), (Some(2), Some(5 * SEC), 1)]))
        .unwrap();
    assert_eq!(s.keys_held(), 2);
    s.on_watermark(wm(10 * SEC)).unwrap();
    assert_eq!(s.keys_held(), 1, "key 1's interval [0, 10 s) has passed");
    // A late row of key 2 counts as arriving at the watermark (10 s): within [5 s, 15 s).
    let out = s.process_batch(batch(&[(Some(2), Some(SEC), 2)])).unwrap();
    assert!(ids(&out).is_empty());
    s.on_watermark(wm(15 * SEC)).unwrap();
    assert_eq!(s.keys_held(), 0);
}

#[test]
fn keys_are_bounded_with_53200() {
    let mut s = op(10 * SEC, true).with_max_keys(2);
    s.process_batch(batch(&[(Some(1), Some(0), 0), (Some(2), Some(0), 1)]))
        .unwrap();
    // A known key passes the bound.
    s.process_batch(batch(&[(Some(1), Some(SEC), 2)])).unwrap();
    let e = s
        .process_batch(batch(&[(Some(3), Some(SEC), 3)]))
        .unwrap_err();
    assert_eq!(e.sqlstate(), "53200", "{e}");
    assert!(
        e.to_string().contains("SUPPRESS holds more than 2 keys"),
        "{e}"
    );
    // Once the watermark frees them, new keys fit again.
    s.on_watermark(wm(10 * SEC)).unwrap();
    s.process_batch(batch(&[(Some(3), Some(11 * SEC), 4)]))
        .unwrap();
}

#[test]
fn snapshot_restore_continues_where_it_was() {
    let mut s = op(10 * SEC, true);
    s.process_batch(batch(&[(Some(1), Some(0), 0), (Some(1), Some(SEC), 1)]))
        .unwrap();
    s.on_watermark(wm(2 * SEC)).unwrap();
    let bytes = s.snapshot().unwrap().encode().unwrap();
    let mut r = op(10 * SEC, true);
    r.restore(&bytes).unwrap();
    assert_eq!(r.suppressed_rows(), 1);
    assert_eq!(r.keys_held(), 1);
    let next = batch(&[(Some(1), Some(SEC), 2), (Some(1), Some(12 * SEC), 3)]);
    assert_eq!(ids(&r.process_batch(next).unwrap()), vec![3]);
    assert!(r.restore(&bytes[..bytes.len() / 2]).is_err());
}

/// What SUPPRESS means, stated directly: a row is suppressed when the latest emitted row of
/// its key has a time t0 with t0 <= t < t0 + interval, where t is the row's time but no
/// earlier than the watermark at its arrival. No state is forgotten here.
fn brute_force(rows: &[(Row, i64)], interval: i64) -> Vec<i64> {
    let mut emitted: Vec<(Option<i64>, i64)> = Vec::new();
    let mut out = Vec::new();
    for &((k, t, id), watermark) in rows {
        let Some(t) = t else {
            out.push(id);
            continue;
        };
        let t = t.max(watermark);
        let latest = emitted.iter().filter(|e| e.0 == k).map(|e| e.1).max();
        if latest.is_some_and(|t0| t0 <= t && t < t0 + interval) {
            continue;
        }
        emitted.push((k, t));
        out.push(id);
    }
    out
}

fn cases() -> impl Strategy<Value = (Vec<Row>, Vec<usize>, usize, i64)> {
    (1usize..200).prop_flat_map(|n| {
        (
            proptest::collection::vec(
                (
                    proptest::option::weighted(0.9, 0i64..4),
                    proptest::option::weighted(0.97, 0i64..8 * SEC),
                ),
                n,
            ),
            proptest::collection::vec(1usize..30, 1..20),
            0usize..20,
            1i64..20,
        )
            .prop_map(|(raw, splits, snap_at, interval_s)| {
                let rows = raw
                    .into_iter()
                    .enumerate()
                    // ~1 s per row, minus up to 8 s of disorder: some rows are late.
                    .map(|(i, (k, jitter))| (k, jitter.map(|j| i as i64 * SEC - j), i as i64))
                    .collect();
                (rows, splits, snap_at, interval_s * SEC)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn suppressed_output_equals_a_brute_force_filter(
        (rows, splits, snap_at, interval) in cases()
    ) {
        let mut s = op(interval, true);
        let mut got = Vec::new();
        let mut with_watermark = Vec::new();
        let (mut watermark, mut max_t) = (i64::MIN, i64::MIN);
        let mut at = 0;
        for (i, size) in splits.iter().cycle().enumerate() {
            if at >= rows.len() {
                break;
            }
            let part = &rows[at..(at + size).min(rows.len())];
            at += part.len();
            with_watermark.extend(part.iter().map(|&r| (r, watermark)));
            got.extend(ids(&s.process_batch(batch(part)).unwrap()));
            // The watermark trails the latest time by 3 s, as a stream's would.
            max_t = part.iter().filter_map(|r| r.1).fold(max_t, i64::max);
            if max_t > i64::MIN && max_t - 3 * SEC > watermark {
                watermark = max_t - 3 * SEC;
                prop_assert!(s.on_watermark(wm(watermark)).unwrap().is_empty());
            }
            if i == snap_at {
                let bytes = s.snapshot().unwrap().encode().unwrap();
                s = op(interval, true);
                s.restore(&bytes).unwrap();
            }
        }
        let want = brute_force(&with_watermark, interval);
        prop_assert_eq!(s.suppressed_rows() as usize, rows.len() - want.len());
        prop_assert_eq!(got, want);
    }
}
