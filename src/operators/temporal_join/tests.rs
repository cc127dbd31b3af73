//! The temporal join on a hand-made sequence of rows, table changes and watermarks: versions
//! start at the watermark or at their declared time, rows read the version valid at their
//! time once the watermark passes them, late rows are counted, and a snapshot restores it all.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, StringArray, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::physical_expr::expressions::col;

use super::*;

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, None)
}

/// k (key), tag, valid (the version time).
fn table_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("tag", DataType::Utf8, true),
        Field::new("valid", ts(), true),
    ]))
}

fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ts", ts(), false),
        Field::new("x", DataType::Int64, true),
    ]))
}

fn joined() -> SchemaRef {
    let mut fields: Vec<Field> = input_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend(
        table_schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true)),
    );
    Arc::new(Schema::new(fields))
}

fn table_rows(rows: &[(i64, &str, Option<i64>)]) -> RecordBatch {
    RecordBatch::try_new(
        table_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(TimestampNanosecondArray::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

fn input(rows: &[(i64, i64)]) -> RecordBatch {
    RecordBatch::try_new(
        input_schema(),
        vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                rows.iter().map(|r| r.0),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )
    .unwrap()
}

fn join(store: &Arc<TableStore>, kind: LookupKind) -> TemporalJoin {
    TemporalJoin::try_new(TemporalJoinConfig {
        table: store.clone(),
        kind,
        probe: vec![col("x", &input_schema()).unwrap()],
        residual: None,
        input: input_schema(),
        time: 0,
        version_time: Some(2),
        joined: joined(),
    })
    .unwrap()
}

/// Output rows as (time, tag or "-").
fn tags(out: &[RecordBatch]) -> Vec<(i64, String)> {
    out.iter()
        .flat_map(|b| {
            let t = b
                .column(0)
                .as_primitive::<TimestampNanosecondType>()
                .clone();
            let tag = b.column(3).as_string::<i32>().clone();
            (0..b.num_rows())
                .map(|i| {
                    let s = if tag.is_null(i) { "-" } else { tag.value(i) };
                    (t.value(i), s.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn wm(t: i64) -> Watermark {
    Watermark(EventTime(t))
}

fn upsert(rows: &[(i64, &str, Option<i64>)]) -> TableChange {
    TableChange {
        upserts: vec![table_rows(rows)],
        ..Default::default()
    }
}

#[test]
fn rows_read_the_version_valid_at_their_time_once_the_watermark_passes_them() {
    let store = Arc::new(TableStore::try_new("t", table_schema(), vec![0]).unwrap());
    store
        .apply(&upsert(&[(1, "a", None), (2, "z", None)]), 1)
        .unwrap();
    let mut j = join(&store, LookupKind::Left);
    assert!(j.on_watermark(wm(5)).unwrap().is_empty());
    // Rows wait for the watermark; the one behind it is late.
    assert!(j
        .process_batch(input(&[(20, 1), (10, 1), (30, 2), (3, 1), (40, 9)]))
        .unwrap()
        .is_empty());
    assert_eq!(j.late_rows(), 1);
    // Key 1 is "b" from its declared time 15 on; key 2 is deleted from the watermark (5) on.
    j.table_change("t", &upsert(&[(1, "b", Some(15))])).unwrap();
    let delete = TableChange {
        deletes: vec![RecordBatch::try_new(
            store.key_schema().clone(),
            vec![Arc::new(Int64Array::from(vec![2]))],
        )
        .unwrap()],
        ..Default::default()
    };
    j.table_change("t", &delete).unwrap();
    // Another table's change is not this join's.
    j.table_change("other", &upsert(&[(1, "x", None)])).unwrap();
    assert_eq!(
        tags(&j.on_watermark(wm(12)).unwrap()),
        vec![(10, "a".into())]
    );
    // A snapshot keeps the versions and the waiting rows.
    let snap = j.snapshot().unwrap().encode().unwrap();
    let mut r = join(&store, LookupKind::Left);
    r.restore(&snap).unwrap();
    assert_eq!(r.state_bytes() > 0, j.state_bytes() > 0);
    // A version declared in the past starts at the watermark (12): the past is final.
    r.table_change("t", &upsert(&[(2, "c", Some(0))])).unwrap();
    assert_eq!(
        tags(&r.on_watermark(wm(100)).unwrap()),
        vec![(20, "b".into()), (30, "c".into()), (40, "-".into())]
    );
    assert_eq!(r.late_rows(), 1);
    assert!(r.changed.is_empty(), "superseded versions are pruned");
    assert_eq!(r.versions.values().map(Vec::len).sum::<usize>(), 2);
}

#[test]
fn an_inner_join_drops_rows_without_a_version_and_truncate_ends_every_key() {
    let store = Arc::new(TableStore::try_new("t", table_schema(), vec![0]).unwrap());
    store.apply(&upsert(&[(1, "a", Some(50))]), 1).unwrap();
    let mut j = join(&store, LookupKind::Inner);
    j.process_batch(input(&[(40, 1), (60, 1), (70, 1)]))
        .unwrap();
    j.on_watermark(wm(65)).unwrap();
    j.table_change(
        "t",
        &TableChange {
            truncate: true,
            ..Default::default()
        },
    )
    .unwrap();
    let out = j.on_watermark(wm(100)).unwrap();
    // 40 is before the row's version (50); 70 is after the truncate (65).
    assert_eq!(tags(&out), vec![]);
    assert!(
        j.versions.is_empty(),
        "a key whose last version is no row goes"
    );
}
