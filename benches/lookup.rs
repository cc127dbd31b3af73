//! Stream–table joins in events per second: a stream of events enriched from a reference
//! table by its key (`JOIN`), the same stream checked against it as a watch-list (`IN (SELECT
//! ...)`), and, as baselines measured in the same process on the same input, a filter of the
//! same selectivity with no lookup (the cost of the rest of the path) and a hand-written loop
//! that probes a `HashMap` of the table and builds the same output columns (the practical
//! limit).
//!
//! `cargo bench --bench lookup`; `SAQL_BENCH_EVENTS` (default 5,000,000),
//! `SAQL_BENCH_TABLE_ROWS` (default 1,000,000) and `SAQL_BENCH_RUNS` (default 3) override the
//! sizes. The table is loaded once per engine with COPY (its rate is printed too); each run
//! times only `insert_batch` (draining the subscription) and `finish`. Every result is checked:
//! the joined rows' count and the sum of their `crit` against what the generator put in, and
//! the watch-list's count against the same. Peak RSS is printed at the end.

mod common;

use common::{drain, env_count, median, thousands};

use std::collections::HashMap;
use std::error::Error;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{
    ArrayRef, AsArray, Int32Array, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
    UInt32Array,
};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef, TimeUnit};
use futures::executor::block_on;
use saql::{Engine, EngineConfig, StatementResult};

type BenchResult<T> = Result<T, Box<dyn Error>>;

const BATCH: usize = 8192;

const DDL: &str = "CREATE STREAM events (ts TIMESTAMP NOT NULL, key BIGINT, amount BIGINT, \
                   WATERMARK FOR ts AS ts - INTERVAL '5' SECOND); \
                   CREATE TABLE assets (id BIGINT PRIMARY KEY, owner TEXT NOT NULL, \
                   crit INT NOT NULL) WITH (max_rows = 100000000, max_bytes = 100000000000)";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new("key", DataType::Int64, true),
        Field::new("amount", DataType::Int64, true),
    ]))
}

/// The table's row of key `k`: its owner and criticality.
fn owner(k: i64) -> String {
    format!("team-{}", k % 97)
}
fn crit(k: i64) -> i32 {
    (k % 5) as i32 + 1
}

/// Events with keys spread over twice the table's keys (half of them hit), in batches.
fn events(n: usize, table_rows: usize) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut i = 0usize;
    while i < n {
        let len = BATCH.min(n - i);
        let mut keys = Vec::with_capacity(len);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys.push((x % (2 * table_rows as u64)) as i64);
        }
        let ts: Vec<i64> = (i..i + len)
            .map(|j| 1_700_000_000_000_000_000 + j as i64 * 1_000_000)
            .collect();
        let amount: Vec<i64> = (i..i + len).map(|j| (j % 1000) as i64).collect();
        out.push(
            RecordBatch::try_new(
                schema(),
                vec![
                    Arc::new(TimestampNanosecondArray::from(ts)),
                    Arc::new(Int64Array::from(keys)),
                    Arc::new(Int64Array::from(amount)),
                ],
            )
            .expect("batch"),
        );
        i += len;
    }
    out
}

/// A fresh engine with the stream and the table loaded by COPY; returns the load's seconds.
fn engine_with_table(table_rows: usize) -> BenchResult<(Engine, f64)> {
    let engine = Engine::open(EngineConfig::default())?;
    block_on(engine.execute(DDL))?;
    let mut csv = String::with_capacity(table_rows * 24);
    for k in 0..table_rows as i64 {
        let _ = writeln!(csv, "{k},{},{}", owner(k), crit(k));
    }
    let start = Instant::now();
    let Some(StatementResult::CopyIn(mut copy)) =
        block_on(engine.execute("COPY assets FROM STDIN WITH (FORMAT csv)"))?.pop()
    else {
        return Err("COPY did not start".into());
    };
    for chunk in csv.as_bytes().chunks(1 << 20) {
        copy.feed(chunk)?;
    }
    let loaded = engine.finish_copy(*copy)?;
    if loaded != table_rows as u64 {
        return Err(format!("COPY loaded {loaded} rows, not {table_rows}").into());
    }
    Ok((engine, start.elapsed().as_secs_f64()))
}

/// Runs `sql` as the engine's one query over `input`; returns seconds and result batches.
fn run_query(
    engine: &Engine,
    sql: &str,
    input: &[RecordBatch],
) -> BenchResult<(f64, Vec<RecordBatch>)> {
    block_on(engine.execute(&format!("CREATE CONTINUOUS QUERY q AS {sql}")))?;
    let Some(StatementResult::Subscribe(sub)) = block_on(engine.execute("SUBSCRIBE q"))?.pop()
    else {
        return Err("SUBSCRIBE q did not return a subscription".into());
    };
    let mut events = sub.events;
    let mut out = Vec::new();
    let start = Instant::now();
    for batch in input {
        engine.insert_batch("events", batch.clone())?;
        drain(&mut events, |b| {
            out.push(b);
            Ok::<_, Box<dyn Error>>(())
        })?;
    }
    engine.finish();
    drain(&mut events, |b| {
        out.push(b);
        Ok::<_, Box<dyn Error>>(())
    })?;
    Ok((start.elapsed().as_secs_f64(), out))
}

/// The hand-written join: a `HashMap` probe per event, output columns built with `take`.
fn hand_join(
    input: &[RecordBatch],
    table: &HashMap<i64, u32>,
    owners: &StringArray,
    crits: &Int32Array,
) -> BenchResult<(f64, Vec<RecordBatch>)> {
    let start = Instant::now();
    let mut out = Vec::new();
    for b in input {
        let keys = b
            .column(1)
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let mut left = Vec::new();
        let mut right = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            if let Some(&r) = k.and_then(|k| table.get(&k)) {
                left.push(i as u32);
                right.push(r);
            }
        }
        let (left, right) = (UInt32Array::from(left), UInt32Array::from(right));
        let mut cols: Vec<ArrayRef> = Vec::new();
        for c in b.columns() {
            cols.push(take(c.as_ref(), &left, None)?);
        }
        cols.push(take(owners, &right, None)?);
        cols.push(take(crits, &right, None)?);
        out.push(RecordBatch::try_from_iter(
            ["ts", "key", "amount", "owner", "crit"]
                .into_iter()
                .zip(cols),
        )?);
    }
    Ok((start.elapsed().as_secs_f64(), out))
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

/// The sum of the `crit` column (the last) of join results.
fn crit_sum(batches: &[RecordBatch]) -> i64 {
    batches
        .iter()
        .map(|b| {
            let c = b.column(b.num_columns() - 1).as_primitive::<Int32Type>();
            c.iter().flatten().map(i64::from).sum::<i64>()
        })
        .sum()
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> BenchResult<bool> {
    let n = env_count("SAQL_BENCH_EVENTS", 5_000_000)?;
    let t = env_count("SAQL_BENCH_TABLE_ROWS", 1_000_000)?;
    let runs = env_count("SAQL_BENCH_RUNS", 3)?.max(1);
    let input = events(n, t);
    // What the generator put in: hits and the sum of their criticality.
    let (mut hits, mut crits_expected) = (0usize, 0i64);
    for b in &input {
        for k in b
            .column(1)
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
            .iter()
            .flatten()
        {
            if (k as usize) < t {
                hits += 1;
                crits_expected += i64::from(crit(k));
            }
        }
    }
    let owners = StringArray::from((0..t as i64).map(owner).collect::<Vec<_>>());
    let crits = Int32Array::from((0..t as i64).map(crit).collect::<Vec<_>>());
    let map: HashMap<i64, u32> = (0..t as i64).map(|k| (k, k as u32)).collect();
    println!(
        "lookup join: {} events against a table of {} rows ({} hit), {runs} runs each",
        thousands(n as u64),
        thousands(t as u64),
        thousands(hits as u64)
    );
    let cases: [(&str, Option<&str>); 4] = [
        (
            "join",
            Some("SELECT e.ts, e.key, e.amount, a.owner, a.crit FROM events e JOIN assets a ON e.key = a.id"),
        ),
        (
            "in (watch-list)",
            Some("SELECT ts, key, amount FROM events WHERE key IN (SELECT id FROM assets)"),
        ),
        ("filter, no lookup (baseline)", None),
        ("hand-written HashMap join (limit)", None),
    ];
    let mut ok = true;
    let mut loads = Vec::new();
    println!("| case | median s | M events/s | vs hand-written | runs (s) |");
    println!("|---|---:|---:|---:|---|");
    let mut limit = f64::NAN;
    let mut results = Vec::new();
    for (name, sql) in cases {
        let mut secs = Vec::new();
        for _ in 0..runs {
            let (s, out) = match (name, sql) {
                (_, Some(sql)) => {
                    let (engine, load) = engine_with_table(t)?;
                    loads.push(load);
                    run_query(&engine, sql, &input)?
                }
                ("filter, no lookup (baseline)", None) => {
                    let (engine, _) = engine_with_table(1)?;
                    run_query(
                        &engine,
                        &format!("SELECT ts, key, amount FROM events WHERE key < {t}"),
                        &input,
                    )?
                }
                _ => hand_join(&input, &map, &owners, &crits)?,
            };
            let got = rows(&out);
            if got != hits {
                println!("MISMATCH {name}: {got} rows, expected {hits}");
                ok = false;
            }
            if out.first().is_some_and(|b| b.num_columns() == 5) && crit_sum(&out) != crits_expected
            {
                println!(
                    "MISMATCH {name}: crit sum {} expected {crits_expected}",
                    crit_sum(&out)
                );
                ok = false;
            }
            secs.push(s);
        }
        let med = median(secs.iter().copied());
        results.push((name, med, secs));
        if name.starts_with("hand-written") {
            limit = med;
        }
    }
    for (name, med, secs) in &results {
        let runs: Vec<String> = secs.iter().map(|s| format!("{s:.2}")).collect();
        println!(
            "| {name} | {med:.3} | {:.2} | {:.2}x | {} |",
            n as f64 / med / 1e6,
            limit / med,
            runs.join(", ")
        );
    }
    let load = median(loads.iter().copied());
    println!(
        "table load by COPY: median {load:.2} s = {:.2} M rows/s",
        t as f64 / load / 1e6
    );
    if let Some(rss) = peak_rss_mib() {
        println!("peak RSS {rss:.0} MiB");
    }
    Ok(ok)
}
