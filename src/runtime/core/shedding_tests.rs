//! Load shedding end to end through the engine, with the wait each batch had to enter its
//! stream given (that is what shedding reacts to): the shed counters equal the rows that were
//! not processed, and with `shedding = 'window'` every window that is emitted is exact against
//! a batch recompute over all the input.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Int64Array, RecordBatch, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::arrow::util::display::array_value_to_string;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::runtime::engine::{Engine, EngineConfig, StatementResult};

const SEC: i64 = 1_000_000_000;

/// A statement's result rows as text, by column name.
fn rows(engine: &Engine, sql: &str) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    for result in engine.execute_blocking(sql).unwrap() {
        if let StatementResult::Rows { schema, batches } = result {
            for b in batches {
                for r in 0..b.num_rows() {
                    let row = schema
                        .fields()
                        .iter()
                        .enumerate()
                        .map(|(i, f)| {
                            (
                                f.name().clone(),
                                array_value_to_string(b.column(i), r).unwrap(),
                            )
                        })
                        .collect();
                    out.push(row);
                }
            }
        }
    }
    out
}

fn show(engine: &Engine, what: &str, name: &str, column: &str) -> u64 {
    rows(engine, &format!("SHOW {what}"))
        .into_iter()
        .find(|r| r["name"] == name)
        .unwrap()[column]
        .parse()
        .unwrap()
}

fn batch(rows: &[(i64, i64, i64)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                rows.iter().map(|r| r.0),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

fn engine(options: &str) -> Engine {
    let engine = Engine::open(EngineConfig {
        retain_rows: 1_000_000,
        ..EngineConfig::default()
    })
    .unwrap();
    engine
        .execute_blocking(&format!(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
             WATERMARK FOR ts AS ts) WITH ({options})"
        ))
        .unwrap();
    engine
}

#[test]
fn random_shedding_counts_every_row_it_drops_and_stops_when_the_lag_does() {
    let engine = engine("shedding = 'random', max_lag = '10ms'");
    engine
        .execute_blocking("CREATE CONTINUOUS QUERY q AS SELECT ts, k, v FROM s")
        .unwrap();
    let mut input = 0;
    for i in 0..60i64 {
        let rows: Vec<_> = (0..100).map(|r| (i * SEC + r, r, 1)).collect();
        input += rows.len() as u64;
        // Ten times the bound for a while, then no wait at all.
        let lag = Duration::from_millis(if i < 30 { 100 } else { 0 });
        engine.insert_lagged("s", batch(&rows), Some(lag)).unwrap();
    }
    let shed = show(&engine, "STREAMS", "s", "shed_rows");
    let rows_in = show(&engine, "STREAMS", "s", "rows_in");
    assert!(shed > 1000, "{shed} rows shed of {input}");
    assert_eq!(rows_in + shed, input, "every row is processed or shed");
    assert_eq!(show(&engine, "QUERIES", "q", "rows_out"), rows_in);
    assert_eq!(show(&engine, "QUERIES", "q", "shed_rows"), shed);
    // Once the lag is gone the fraction decays to nothing: a last batch gets through whole.
    engine
        .insert_lagged("s", batch(&[(100 * SEC, 1, 1); 100]), Some(Duration::ZERO))
        .unwrap();
    assert_eq!(show(&engine, "STREAMS", "s", "shed_rows"), shed);
}

#[test]
fn window_shedding_drops_whole_windows_so_the_emitted_ones_are_exact() {
    let engine = engine("shedding = 'window', shed_window = '10s', max_lag = '10ms'");
    engine
        .execute_blocking(
            "CREATE CONTINUOUS QUERY w AS SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total \
             FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end",
        )
        .unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    // The recompute: (window start, k) -> (count, sum) over all the input.
    let mut expected: BTreeMap<(i64, i64), (i64, i64)> = BTreeMap::new();
    let mut input = 0u64;
    for i in 0..200i64 {
        // Rows of the next 3 seconds, in time order (the watermark is the largest time).
        let mut times: Vec<i64> = (0..50)
            .map(|_| i * 3 * SEC + rng.gen_range(0..3 * SEC))
            .collect();
        times.sort();
        let rows: Vec<_> = times
            .into_iter()
            .map(|t| (t, rng.gen_range(0..4), rng.gen_range(-5..100)))
            .collect();
        for &(t, k, v) in &rows {
            let e = expected
                .entry((t.div_euclid(10 * SEC) * 10 * SEC, k))
                .or_default();
            e.0 += 1;
            e.1 += v;
        }
        input += rows.len() as u64;
        let lag = Duration::from_millis(if rng.gen_bool(0.5) { 100 } else { 0 });
        engine.insert_lagged("s", batch(&rows), Some(lag)).unwrap();
    }
    engine.finish();
    let out = rows(
        &engine,
        "SELECT k, CAST(window_start AS BIGINT) AS ws, n, total FROM w",
    );
    assert!(!out.is_empty());
    let mut emitted_rows = 0u64;
    for r in &out {
        let key = (r["ws"].parse::<i64>().unwrap(), r["k"].parse().unwrap());
        let got = (r["n"].parse().unwrap(), r["total"].parse().unwrap());
        assert_eq!(Some(&got), expected.get(&key), "window {key:?} is exact");
        emitted_rows += got.0 as u64;
    }
    let shed = show(&engine, "STREAMS", "s", "shed_rows");
    assert!(
        shed > 0 && out.len() < expected.len(),
        "some windows were shed"
    );
    assert_eq!(
        emitted_rows + shed,
        input,
        "the rows of dropped windows are the shed rows"
    );
    assert_eq!(show(&engine, "STREAMS", "s", "rows_in") + shed, input);
}

#[test]
fn shedding_options_are_checked() {
    let engine = Engine::open(EngineConfig::default()).unwrap();
    for (options, message) in [
        ("shedding = 'sometimes'", "unknown shedding"),
        ("shedding = 'window'", "needs shed_window"),
        ("max_lag = '1s'", "need shedding"),
        ("shedding = 'random', max_lag = '0s'", "must be positive"),
    ] {
        let e = engine
            .execute_blocking(&format!(
                "CREATE STREAM x (ts TIMESTAMP NOT NULL, WATERMARK FOR ts AS ts) WITH ({options})"
            ))
            .err()
            .unwrap();
        assert!(e.to_string().contains(message), "{options}: {e}");
    }
    let e = engine
        .execute_blocking(
            "CREATE STREAM x (ts TIMESTAMP) WITH (shedding = 'window', shed_window = '1s')",
        )
        .err()
        .unwrap();
    assert!(e.to_string().contains("WATERMARK"), "{e}");
}
