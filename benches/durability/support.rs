//! What the cases share: the generated events, engines, SQL, results as integer rows, the
//! comparison of a recovered engine with an in-memory one, temporary directories.

use std::error::Error;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef, TimestampNanosecondType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use saql::runtime::FsyncPolicy;
use saql::runtime::SubscriptionEvents;
use saql::{Engine, EngineConfig, StatementResult};

use crate::common::{drain, query_stats, stream_stats};
use crate::BenchResult;

/// Batches that build state and fill logs.
pub const BULK_BATCH: usize = 8192;
pub const SEED: u64 = 0x0d07_ab1e;
const KEYS: i64 = 10_000;
const HOSTS: usize = 100;
pub const OPS: [&str; 5] = ["read", "write", "open", "close", "connect"];
pub const MAX_AMOUNT: i64 = 10_000;
pub const NANOS_PER_MS: i64 = 1_000_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
/// 2024-01-01 00:00:00 UTC.
pub const START: i64 = 1_704_067_200 * NANOS_PER_SECOND;
/// How far an event may trail its place in the sequence, inside the 5 s watermark delay.
const MAX_DISORDER: i64 = 2 * NANOS_PER_SECOND;
/// The aggregate's window in (a) and (c), as in `benches/engine.rs` (b).
pub const TUMBLE_MINUTE: &str = "INTERVAL '1' MINUTE";

/// One row of the `events` streams.
#[derive(Clone, Copy)]
pub struct Event {
    pub ts: i64,
    pub key: i64,
    pub op: &'static str,
    pub amount: i64,
}

/// `n` events `step` ns apart, each up to [`MAX_DISORDER`] early, with uniform key, op and
/// amount (as `benches/engine.rs` draws them).
pub fn random_events(n: usize, step: i64, seed: u64) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| Event {
            ts: START + i as i64 * step - rng.gen_range(0..MAX_DISORDER),
            key: rng.gen_range(0..KEYS),
            op: OPS[rng.gen_range(0..OPS.len())],
            amount: rng.gen_range(0..MAX_AMOUNT),
        })
        .collect()
}

fn host_of(key: i64) -> &'static str {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| (0..HOSTS).map(|h| format!("host-{h:02}")).collect());
    &names[key.rem_euclid(HOSTS as i64) as usize]
}

pub fn to_batch(schema: &SchemaRef, events: &[Event]) -> BenchResult<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from_iter_values(
            events.iter().map(|e| e.ts),
        )),
        Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.key))),
        Arc::new(StringArray::from_iter_values(
            events.iter().map(|e| host_of(e.key)),
        )),
        Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.op))),
        Arc::new(Int64Array::from_iter_values(
            events.iter().map(|e| e.amount),
        )),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

pub fn split(schema: &SchemaRef, events: &[Event], rows: usize) -> BenchResult<Vec<RecordBatch>> {
    events.chunks(rows).map(|c| to_batch(schema, c)).collect()
}

pub fn engine_at(dir: Option<&Path>, fsync: FsyncPolicy) -> saql::Result<Engine> {
    Engine::open(EngineConfig {
        data_dir: dir.map(Path::to_path_buf),
        fsync,
        checkpoint_interval: None,
        ..EngineConfig::default()
    })
}

pub fn stream_ddl(name: &str, delay_seconds: u32) -> String {
    format!(
        "CREATE STREAM {name} (ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, \
         amount BIGINT, WATERMARK FOR ts AS ts - INTERVAL '{delay_seconds}' SECOND)"
    )
}

pub fn tumble_query(name: &str, stream: &str, size: &str) -> String {
    format!(
        "CREATE CONTINUOUS QUERY {name} AS SELECT key, window_end, COUNT(*) AS n, \
         SUM(amount) AS total, MAX(amount) AS biggest FROM TUMBLE({stream}, ts, {size}) \
         GROUP BY key, window_start, window_end"
    )
}

pub fn subscribe(engine: &Engine, query: &str) -> BenchResult<SubscriptionEvents> {
    match engine
        .execute_blocking(&format!("SUBSCRIBE {query}"))?
        .pop()
    {
        Some(StatementResult::Subscribe(sub)) => Ok(sub.events),
        _ => Err(format!("SUBSCRIBE {query} did not return a subscription").into()),
    }
}

pub fn collect(sub: &mut SubscriptionEvents, into: &mut Vec<RecordBatch>) -> BenchResult<()> {
    drain(sub, |b| {
        into.push(b);
        Ok::<_, Box<dyn Error>>(())
    })
}

/// Result rows as integers (BIGINT and TIMESTAMP columns only), in order.
pub fn int_rows(batches: &[RecordBatch]) -> BenchResult<Vec<Vec<i64>>> {
    let mut rows = Vec::new();
    for batch in batches {
        let mut columns: Vec<&[i64]> = Vec::new();
        for (i, column) in batch.columns().iter().enumerate() {
            let name = batch.schema_ref().field(i).name().clone();
            if column.null_count() > 0 {
                return Err(format!("result column \"{name}\" has NULLs").into());
            }
            columns.push(match column.data_type() {
                DataType::Int64 => column.as_primitive::<Int64Type>().values(),
                DataType::Timestamp(_, _) => column
                    .as_primitive_opt::<TimestampNanosecondType>()
                    .ok_or_else(|| format!("result column \"{name}\" is not in nanoseconds"))?
                    .values(),
                other => return Err(format!("result column \"{name}\" is {other}").into()),
            });
        }
        for r in 0..batch.num_rows() {
            rows.push(columns.iter().map(|c| c[r]).collect());
        }
    }
    Ok(rows)
}

pub fn temp_dir(root: &Path) -> BenchResult<tempfile::TempDir> {
    Ok(tempfile::Builder::new()
        .prefix("saql-durability.")
        .tempdir_in(root)?)
}

/// Bytes in the files under `dir`.
pub fn dir_bytes(dir: &Path) -> BenchResult<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(0.0, f64::max)
}

pub fn runs_text(seconds: &[f64], decimals: usize) -> String {
    let runs: Vec<String> = seconds.iter().map(|s| format!("{s:.decimals$}")).collect();
    runs.join(", ")
}

/// Where `engine` and `reference` disagree on the stream's counters, the query's counters and
/// its retained results.
pub fn compare_engines(
    engine: &Engine,
    reference: &Engine,
    stream: &str,
    query: &str,
) -> BenchResult<Vec<String>> {
    let mut problems = Vec::new();
    let (got, want) = (stream_stats(engine)?, stream_stats(reference)?);
    match (got.get(stream), want.get(stream)) {
        (Some(g), Some(w)) if g.rows_in == w.rows_in && g.late_rows == w.late_rows => {}
        (Some(g), Some(w)) => problems.push(format!(
            "SHOW STREAMS: {} rows in, {} late; in memory {} and {}",
            g.rows_in, g.late_rows, w.rows_in, w.late_rows
        )),
        _ => problems.push(format!("SHOW STREAMS does not list \"{stream}\"")),
    }
    let (got, want) = (query_stats(engine)?, query_stats(reference)?);
    match (got.get(query), want.get(query)) {
        (Some(g), Some(w)) if g.rows_out == w.rows_out && g.status == w.status => {}
        (Some(g), Some(w)) => problems.push(format!(
            "SHOW QUERIES: {} rows out ({}); in memory {} ({})",
            g.rows_out, g.status, w.rows_out, w.status
        )),
        _ => problems.push(format!("SHOW QUERIES does not list \"{query}\"")),
    }
    let retained = |e: &Engine| -> BenchResult<Vec<Vec<i64>>> {
        match e.execute_blocking(&format!("SELECT * FROM {query}"))?.pop() {
            Some(StatementResult::Rows { batches, .. }) => int_rows(&batches),
            _ => Err("SELECT returned no rows".into()),
        }
    };
    let (got, want) = (retained(engine)?, retained(reference)?);
    if got != want {
        problems.push(format!(
            "retained results: {}",
            describe_difference(&got, &want)
        ));
    }
    Ok(problems)
}

pub fn describe_difference(got: &[Vec<i64>], want: &[Vec<i64>]) -> String {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        Some(i) => format!(
            "row {i} is {:?}, in memory {:?} ({} and {} rows)",
            got[i],
            want[i],
            got.len(),
            want.len()
        ),
        None if got.len() != want.len() => {
            format!("{} rows, in memory {}", got.len(), want.len())
        }
        None => "no rows".into(),
    }
}
