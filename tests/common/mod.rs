//! What the recompute proptests share: the test stream `s (ts, k, v)` with a 5 s watermark
//! delay, its rows as Arrow batches, a run of a continuous query through the public
//! [`Engine`] over rows split into random batches, and results rendered as sorted text lines.

// Each test crate that includes this module uses only part of it.
#![allow(
    dead_code,
    reason = "each crate that includes this module uses part of it"
)]

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use saql::runtime::engine::Subscription;
use saql::runtime::SubscriptionEvent;
use saql::{Engine, EngineConfig, StatementResult};

pub const SEC: i64 = 1_000_000_000;
pub const BASE: i64 = 1_700_000_000 * SEC;

/// One row of the test stream.
#[derive(Debug, Clone)]
pub struct Row {
    pub ts: i64,
    pub k: i64,
    pub v: Option<i64>,
}

pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

pub fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                rows.iter().map(|r| r.ts),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.k))),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.v).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

/// Every row of `batches` as `a|b|c` (NULL for nulls), sorted.
pub fn render(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            out.push(
                fmts.iter()
                    .map(|f| f.value(r).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    out.sort();
    out
}

/// Runs `query` over `rows`, inserted in batches of the lengths in `splits` (cycled), then
/// finishes the input; returns every batch the query's subscription received.
pub fn run(
    rt: &tokio::runtime::Runtime,
    query: &str,
    rows: &[Row],
    splits: &[usize],
) -> Vec<RecordBatch> {
    run_on(rt, query, rows, splits, 1)
}

/// [`run`] with keyed operators spread over `workers` threads.
pub fn run_on(
    rt: &tokio::runtime::Runtime,
    query: &str,
    rows: &[Row],
    splits: &[usize],
    workers: usize,
) -> Vec<RecordBatch> {
    let engine = Engine::open(EngineConfig {
        workers,
        ..EngineConfig::default()
    })
    .unwrap();
    rt.block_on(async {
        engine
            .execute("CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)")
            .await
            .unwrap();
        engine
            .execute(&format!("CREATE CONTINUOUS QUERY q AS {query}"))
            .await
            .unwrap();
    });
    let mut sub = match rt
        .block_on(engine.execute("SUBSCRIBE q"))
        .unwrap()
        .remove(0)
    {
        StatementResult::Subscribe(s) => s,
        _ => panic!("not a subscription"),
    };
    let mut start = 0;
    let mut i = 0;
    while start < rows.len() {
        let len = splits[i % splits.len()].min(rows.len() - start);
        engine
            .insert_batch("s", batch(&rows[start..start + len]))
            .unwrap();
        start += len;
        i += 1;
    }
    engine.finish();
    received(&mut sub)
}

/// Every batch waiting in a subscription; panics if the query failed.
pub fn received(sub: &mut Subscription) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    while let Ok(ev) = sub.events.try_recv() {
        match ev {
            SubscriptionEvent::Rows(b) => out.push(b),
            SubscriptionEvent::Failed(e) => panic!("query failed: {e}"),
        }
    }
    out
}

/// [`run`], rendered.
pub fn incremental(
    rt: &tokio::runtime::Runtime,
    query: &str,
    rows: &[Row],
    splits: &[usize],
) -> Vec<String> {
    render(&run(rt, query, rows, splits))
}

/// An event time as the engine renders a TIMESTAMP.
pub fn fmt_ts(t: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(t)
        .naive_utc()
        .format("%Y-%m-%dT%H:%M:%S%.f")
        .to_string()
}

/// Up to `max_rows` rows over `keys` keys with values in -50..50 (or NULL), about 0.7 s apart
/// minus up to 4 s of disorder (always within the 5 s watermark delay), and the sizes of the
/// batches to split them into.
pub fn jittered_rows(
    max_rows: usize,
    keys: i64,
) -> impl proptest::strategy::Strategy<Value = (Vec<Row>, Vec<usize>)> {
    use proptest::prelude::*;
    (1usize..max_rows).prop_flat_map(move |n| {
        (
            proptest::collection::vec(
                (0i64..4 * SEC, 0i64..keys, proptest::option::of(-50i64..50)),
                n,
            ),
            proptest::collection::vec(1usize..40, 1..20),
        )
            .prop_map(|(raw, splits)| {
                let rows = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (jitter, k, v))| Row {
                        ts: BASE + i as i64 * 7 * SEC / 10 - jitter,
                        k,
                        v,
                    })
                    .collect();
                (rows, splits)
            })
    })
}

/// A rendered row `ts|k|v|x|y...` as its first three fields joined and the numbers after them
/// (None for NULL).
pub fn parse_floats(line: &str) -> (String, Vec<Option<f64>>) {
    let fields: Vec<&str> = line.split('|').collect();
    let values = fields[3..]
        .iter()
        .map(|f| (*f != "NULL").then(|| f.parse::<f64>().unwrap()))
        .collect();
    (fields[..3].join("|"), values)
}

/// Rows of [`parse_floats`] sorted by their text, then by their numbers (rows of one
/// partition with the same time and value differ only there).
pub fn sorted_rows(mut rows: Vec<(String, Vec<Option<f64>>)>) -> Vec<(String, Vec<Option<f64>>)> {
    rows.sort_by(|a, b| {
        a.0.cmp(&b.0).then_with(|| {
            let key = |v: &[Option<f64>]| {
                v.iter()
                    .map(|x| x.unwrap_or(f64::NEG_INFINITY))
                    .collect::<Vec<_>>()
            };
            key(&a.1)
                .iter()
                .zip(key(&b.1).iter())
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    });
    rows
}
