//! Overload: writers offer a stream several times the rate the engine sustains, and we watch
//! what the engine does with the excess. First one writer inserts as fast as it can for a few
//! seconds: its rate is the sustainable rate R. Then, for each policy (no shedding, where
//! writers simply wait; `shedding = 'random'`; `shedding = 'window'`), a fresh engine gets
//! `SAQL_OVERLOAD_WRITERS` writer threads offering `SAQL_OVERLOAD_FACTOR` x R rows per second
//! in all, paced by the clock, for `SAQL_OVERLOAD_SECS` seconds. Event time follows the clock,
//! so windows close while the run goes on. A monitor samples the resident set size and the
//! queries' output every 100 ms.
//!
//! Reported per policy: rows offered, processed and shed (processed + shed must equal what
//! the writers handed over: checked), backpressure (batches that waited for the stream, and
//! for the ingest budget), the drop fraction at the end, the peak RSS, the longest time a
//! writer's insert took, and whether both queries produced rows in every second (no stall).
//!
//! `cargo bench --bench overload --profile dev` (a debug build runs the same, slower: R is
//! measured on the build that runs). `SAQL_OVERLOAD_SECS` (default 60), `SAQL_OVERLOAD_FACTOR`
//! (10), `SAQL_OVERLOAD_WRITERS` (8). See `benches/README.md`.

#![allow(
    clippy::disallowed_methods,
    reason = "a bench starts its own threads and tasks"
)]

mod common;

use common::{env_count, thousands};

use std::collections::HashMap;
use std::error::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::array::{Int64Array, RecordBatch, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{Int64Type, SchemaRef};
use futures::executor::block_on;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use saql::{Engine, EngineConfig, StatementResult};

type BenchResult<T> = Result<T, Box<dyn Error>>;

const BATCH_ROWS: usize = 1000;
const KEYS: i64 = 1000;
/// 2024-01-01 in nanoseconds: event time starts there and follows the clock.
const EPOCH: i64 = 1_704_067_200_000_000_000;

const QUERIES: &str = "
CREATE CONTINUOUS QUERY per_key AS SELECT key, window_end, COUNT(*) AS n, SUM(amount) AS total
  FROM TUMBLE(events, ts, INTERVAL '1' SECOND) GROUP BY key, window_start, window_end;
CREATE CONTINUOUS QUERY big AS SELECT ts, key, amount FROM events WHERE amount > 9990";

/// One policy's run.
struct Outcome {
    policy: &'static str,
    offered: u64,
    rows_in: u64,
    shed: u64,
    stream_waits: u64,
    budget_waits: u64,
    drop_fraction: f64,
    peak_rss: u64,
    slowest_insert: Duration,
    seconds_without_output: usize,
    seconds: usize,
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// A statement's single result set: each named column's integers, or text parsed as a number.
fn show(engine: &Engine, sql: &str) -> BenchResult<HashMap<String, HashMap<String, f64>>> {
    let Some(StatementResult::Rows { schema, batches }) = block_on(engine.execute(sql))?.pop()
    else {
        return Err(format!("{sql} returned no rows").into());
    };
    let mut out = HashMap::new();
    for b in &batches {
        let names = b.column(0).as_string::<i32>();
        for r in 0..b.num_rows() {
            let mut row = HashMap::new();
            for (i, f) in schema.fields().iter().enumerate() {
                if let Some(ints) = b.column(i).as_primitive_opt::<Int64Type>() {
                    row.insert(f.name().clone(), ints.value(r) as f64);
                }
            }
            out.insert(names.value(r).to_string(), row);
        }
    }
    Ok(out)
}

fn batch(schema: &SchemaRef, rng: &mut StdRng, now: i64) -> BenchResult<RecordBatch> {
    let ts: Vec<i64> = (0..BATCH_ROWS)
        .map(|_| now - rng.gen_range(0..50_000_000))
        .collect();
    Ok(RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(TimestampNanosecondArray::from(ts)),
            Arc::new(Int64Array::from_iter_values(
                (0..BATCH_ROWS).map(|_| rng.gen_range(0..KEYS)),
            )),
            Arc::new(Int64Array::from_iter_values(
                (0..BATCH_ROWS).map(|_| rng.gen_range(0..10_000)),
            )),
        ],
    )?)
}

fn open(options: &str) -> BenchResult<(Engine, SchemaRef)> {
    let engine = Engine::open(EngineConfig::default())?;
    engine.execute_blocking(&format!(
        "CREATE STREAM events (ts TIMESTAMP NOT NULL, key BIGINT, amount BIGINT, \
         WATERMARK FOR ts AS ts - INTERVAL '100' MILLISECOND){options}"
    ))?;
    engine.execute_blocking(QUERIES)?;
    let schema = engine.stream_schema("events")?;
    Ok((engine, schema))
}

/// Rows per second one writer gets through, inserting as fast as it can (the time spent
/// generating its batches not counted).
fn sustainable_rate() -> BenchResult<f64> {
    let (engine, schema) = open("")?;
    let mut rng = StdRng::seed_from_u64(1);
    let start = Instant::now();
    let (mut rows, mut busy) = (0, Duration::ZERO);
    while start.elapsed() < Duration::from_secs(3) {
        let now = EPOCH + start.elapsed().as_nanos() as i64;
        let b = batch(&schema, &mut rng, now)?;
        let t = Instant::now();
        engine.insert_batch("events", b)?;
        busy += t.elapsed();
        rows += BATCH_ROWS;
    }
    Ok(rows as f64 / busy.as_secs_f64())
}

fn run(
    policy: &'static str,
    options: &str,
    rate: f64,
    writers: usize,
    secs: u64,
) -> BenchResult<Outcome> {
    let (engine, schema) = open(options)?;
    let offered = Arc::new(AtomicU64::new(0));
    let slowest = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let interval = Duration::from_secs_f64(BATCH_ROWS as f64 * writers as f64 / rate);
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (engine, schema) = (engine.clone(), schema.clone());
            let (offered, slowest) = (offered.clone(), slowest.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let mut rng = StdRng::seed_from_u64(w as u64 + 10);
                let mut next = start + interval.mul_f64(w as f64 / writers as f64);
                while start.elapsed() < Duration::from_secs(secs) {
                    if let Some(wait) = next.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    next += interval;
                    let now = EPOCH + start.elapsed().as_nanos() as i64;
                    let b = batch(&schema, &mut rng, now).map_err(|e| e.to_string())?;
                    let t = Instant::now();
                    engine
                        .insert_batch("events", b)
                        .map_err(|e| e.to_string())?;
                    slowest.fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    offered.fetch_add(BATCH_ROWS as u64, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    // The monitor: RSS every 100 ms, the queries' output every second.
    let monitor = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || -> Result<(u64, usize, usize), String> {
            let (mut peak, mut quiet, mut seconds) = (0, 0, 0);
            let mut last: HashMap<String, f64> = HashMap::new();
            let mut tick = 0;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                peak = peak.max(rss_bytes());
                tick += 1;
                if tick % 10 == 0 {
                    let queries = show(&engine, "SHOW QUERIES").map_err(|e| e.to_string())?;
                    seconds += 1;
                    for (q, row) in queries {
                        let out = row["rows_out"];
                        if last.get(&q).is_some_and(|&before| out <= before) {
                            quiet += 1;
                        }
                        last.insert(q, out);
                    }
                }
            }
            Ok((peak, quiet, seconds))
        })
    };
    for h in handles {
        h.join().map_err(|_| "a writer panicked")??;
    }
    done.store(true, Ordering::Relaxed);
    let (peak_rss, seconds_without_output, seconds) =
        monitor.join().map_err(|_| "the monitor panicked")??;
    let streams = show(&engine, "SHOW STREAMS")?;
    let s = &streams["events"];
    let metrics = engine.metrics_text();
    let metric = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let outcome = Outcome {
        policy,
        offered: offered.load(Ordering::Relaxed),
        rows_in: s["rows_in"] as u64,
        shed: s["shed_rows"] as u64,
        stream_waits: s["ingest_waits"] as u64,
        budget_waits: metric("saql_ingest_budget_waits_total") as u64,
        drop_fraction: metric("saql_stream_drop_fraction{"),
        peak_rss,
        slowest_insert: Duration::from_nanos(slowest.load(Ordering::Relaxed)),
        seconds_without_output,
        seconds,
    };
    if outcome.rows_in + outcome.shed != outcome.offered {
        return Err(format!(
            "MISMATCH {policy}: {} processed + {} shed != {} offered",
            outcome.rows_in, outcome.shed, outcome.offered
        )
        .into());
    }
    Ok(outcome)
}

fn main() -> ExitCode {
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("overload: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench() -> BenchResult<()> {
    let secs = env_count("SAQL_OVERLOAD_SECS", 60)? as u64;
    let factor = env_count("SAQL_OVERLOAD_FACTOR", 10)? as f64;
    let writers = env_count("SAQL_OVERLOAD_WRITERS", 8)?;
    let rate = sustainable_rate()?;
    println!(
        "sustainable rate: {} rows/s (one writer); offering {factor}x = {} rows/s from {writers} writers for {secs} s",
        thousands(rate as u64),
        thousands((rate * factor) as u64)
    );
    let policies = [
        ("backpressure", ""),
        ("random", " WITH (shedding = 'random', max_lag = '50ms')"),
        (
            "window",
            " WITH (shedding = 'window', shed_window = '1s', max_lag = '50ms')",
        ),
    ];
    println!(
        "\nthe writers' schedule: {} rows; `handed over` is what they got through (they wait while \
         their stream is busy)",
        thousands((rate * factor * secs as f64) as u64)
    );
    println!(
        "\n| policy | handed over | processed | shed | stream waits | budget waits | drop fraction at end | peak RSS | slowest insert | query-seconds without output |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (policy, options) in policies {
        let o = run(policy, options, rate * factor, writers, secs)?;
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} MiB | {:.2} s | {} of {} |",
            o.policy,
            thousands(o.offered),
            thousands(o.rows_in),
            thousands(o.shed),
            thousands(o.stream_waits),
            thousands(o.budget_waits),
            o.drop_fraction,
            o.peak_rss >> 20,
            o.slowest_insert.as_secs_f64(),
            o.seconds_without_output,
            o.seconds * 2,
        );
    }
    Ok(())
}
