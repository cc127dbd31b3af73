//! Throughput of continuous queries in events per second: a selective filter, a tumbling and a
//! hopping window aggregate over 10,000 keys, a MATCH_RECOGNIZE pattern per host, per-window
//! z-score outliers among the keys' sums, the pattern on two workers, and a
//! hand-written loop that computes the tumbling aggregate directly over the same Arrow columns,
//! as the practical limit to measure against.
//!
//! `cargo bench --bench engine`; `SAQL_BENCH_EVENTS` and `SAQL_BENCH_RUNS` override the input
//! size and the repetitions, `SAQL_BENCH_CASES` (e.g. `c` or `b,e`) picks the engine cases. The
//! input is generated once, untimed; each run opens a fresh engine with one query and times only
//! `insert_batch` (draining the query's subscription after each call) and the final `finish`.
//! Every result is checked against the input, the tumbling aggregate group by group against the
//! loop and the outliers against a z-score computed here from the loop's groups; a wrong result
//! prints `MISMATCH` and the bench exits non-zero. See `benches/README.md` for the latest
//! figures.

mod common;

use common::{drain, env_count, query_stats, thousands, QueryStats};

use std::collections::HashMap;
use std::error::Error;
use std::hash::{BuildHasherDefault, Hasher};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, Float64Type, Int64Type, SchemaRef, TimestampNanosecondType,
};
use futures::executor::block_on;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use saql::{Engine, EngineConfig, StatementResult};

type BenchResult<T> = Result<T, Box<dyn Error>>;

const STREAM_DDL: &str = "CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
)";
const FILTER_SQL: &str = "SELECT ts, host, amount FROM events WHERE op = 'write' AND amount > 5000";
const TUMBLE_SQL: &str = "SELECT key, window_end, COUNT(*), SUM(amount), AVG(amount), MAX(amount) \
     FROM TUMBLE(events, ts, INTERVAL '1' MINUTE) GROUP BY key, window_start, window_end";
const HOP_SQL: &str = "SELECT key, window_end, COUNT(*), SUM(amount), AVG(amount), MAX(amount) \
     FROM HOP(events, ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE) \
     GROUP BY key, window_start, window_end";
/// Keys whose sum in a minute is more than [`ZSCORE_THRESHOLD`] population standard deviations
/// from the mean of all keys' sums in that minute.
const OUTLIER_SQL: &str = "SELECT key, window_end, SUM(amount) AS total \
     FROM TUMBLE(events, ts, INTERVAL '1' MINUTE) GROUP BY key, window_start, window_end \
     OUTLIER ZSCORE(3) ON (total) HAVING is_outlier";
const ZSCORE_THRESHOLD: f64 = 3.0;
/// (d): per host, a large write followed within 5 s by a larger read.
const PATTERN_SQL: &str = "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY host ORDER BY ts \
     MEASURES a.ts AS started, b.ts AS ended, a.amount AS written, b.amount AS read \
     AFTER MATCH SKIP PAST LAST ROW PATTERN (a x*? b) WITHIN INTERVAL '5' SECOND \
     DEFINE a AS op = 'write' AND amount > 9000, b AS op = 'read' AND b.amount > a.amount)";
const PATTERN_WITHIN: i64 = 5 * NANOS_PER_SECOND;

const DEFAULT_EVENTS: usize = 10_000_000;
const DEFAULT_RUNS: usize = 3;
const BATCH_ROWS: usize = 8192;
const SEED: u64 = 0x5a71_be4c;
const KEYS: i64 = 10_000;
const HOSTS: usize = 100;
/// One op in five is a write and half the amounts exceed 5000: the filter keeps about 10%.
const OPS: [&str; 5] = ["read", "write", "open", "close", "connect"];
const MAX_AMOUNT: i64 = 10_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
const EVENTS_PER_SECOND: i64 = 1_000;
/// 2024-01-01 00:00:00 UTC.
const START: i64 = 1_704_067_200 * NANOS_PER_SECOND;
/// How far an event may trail its place in the sequence. Well inside the stream's 5 s watermark
/// delay, so no row is late and every window the engine emits is complete.
const MAX_DISORDER: i64 = 2 * NANOS_PER_SECOND;
const TUMBLE_SIZE: i64 = 60 * NANOS_PER_SECOND;
/// A one-minute window sliding by ten seconds holds each event six times.
const HOP_WINDOWS_PER_EVENT: i64 = 6;

// Column positions in the `events` stream.
const TS: usize = 0;
const KEY: usize = 1;
const HOST: usize = 2;
const OP: usize = 3;
const AMOUNT: usize = 4;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("\nMISMATCH: at least one query produced wrong results (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs every case; returns whether all results were right.
fn run() -> BenchResult<bool> {
    let events = env_count("SAQL_BENCH_EVENTS", DEFAULT_EVENTS)?;
    let runs = env_count("SAQL_BENCH_RUNS", DEFAULT_RUNS)?;
    let only = std::env::var("SAQL_BENCH_CASES").ok();
    println!("saql engine bench: {events} events in batches of {BATCH_ROWS}, {runs} runs per case");

    let generating = Instant::now();
    let schema = open_engine(1)?.stream_schema("events")?;
    let input = Input::generate(schema, events)?;
    println!(
        "input generated in {:.1} s (untimed): {} batches, filter selectivity {:.1}%\n",
        generating.elapsed().as_secs_f64(),
        input.batches.len(),
        100.0 * input.filter_rows as f64 / events as f64
    );
    let mut report = Report::default();

    // The loop first: its groups are what (b) must produce.
    let mut expected = Vec::new();
    let mut seconds = Vec::new();
    for run in 1..=runs {
        let start = Instant::now();
        let groups = tumble_loop(&input.batches)?;
        seconds.push(start.elapsed().as_secs_f64());
        report.run_line(
            "(l) hand-written loop",
            run,
            events,
            seconds[run - 1],
            groups.len(),
        );
        expected = groups;
    }
    expected.sort_by_key(|g| (g.window_end, g.key));
    let loop_case = report.case(
        "(l) hand-written loop for (b)",
        events,
        seconds,
        expected.len(),
    );

    let matches = pattern_loop(&input.batches)?;
    let cases = [
        ("(a) filter, ~10% selective", FILTER_SQL, Check::Filter, 1),
        ("(b) TUMBLE 1 min, 10k keys", TUMBLE_SQL, Check::Tumble, 1),
        ("(c) HOP 1 min / 10 s, 10k keys", HOP_SQL, Check::Hop, 1),
        (
            "(d) MATCH_RECOGNIZE per host",
            PATTERN_SQL,
            Check::Pattern,
            1,
        ),
        (
            "(e) TUMBLE + OUTLIER ZSCORE(3)",
            OUTLIER_SQL,
            Check::Outlier,
            1,
        ),
        ("(f) (d) on 2 workers", PATTERN_SQL, Check::Pattern, 2),
    ];
    let mut measured = Vec::new();
    for (name, sql, check, workers) in cases {
        let letter = &name[1..2];
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|c| c.trim() == letter))
        {
            continue;
        }
        let mut seconds = Vec::new();
        let mut rows = Vec::new();
        for run in 1..=runs {
            let out = run_query(sql, &input.batches, workers)?;
            report.run_line(name, run, events, out.seconds, out.rows());
            let problems = match check {
                Check::Filter => check_filter(&out, &input)?,
                Check::Tumble => check_tumble(&out, &expected)?,
                Check::Hop => check_hop(&out, &input)?,
                Check::Outlier => check_outliers(&out, &expected)?,
                Check::Pattern => check_pattern(&out, &matches)?,
            };
            for p in problems {
                report.mismatch(name, run, p);
            }
            seconds.push(out.seconds);
            rows.push(out.rows());
        }
        if rows.iter().any(|&r| r != rows[0]) {
            report.mismatch(name, 0, format!("row counts differ between runs: {rows:?}"));
        }
        measured.push(report.case(name, events, seconds, rows[0]));
    }
    measured.push(loop_case);

    println!(
        "\n| case | events | median s | events/s | ratio to loop | output rows | all runs (s) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let loop_median = measured[measured.len() - 1].median();
    for c in &measured {
        let median = c.median();
        let runs: Vec<String> = c.seconds.iter().map(|s| format!("{s:.3}")).collect();
        println!(
            "| {} | {} | {median:.3} | {} | {:.1}x | {} | {} |",
            c.name,
            thousands(c.events as u64),
            thousands((c.events as f64 / median) as u64),
            median / loop_median,
            thousands(c.rows as u64),
            runs.join(", ")
        );
    }
    Ok(report.mismatches == 0)
}

/// The generated events, with the totals the results are checked against.
struct Input {
    batches: Vec<RecordBatch>,
    /// Rows the filter query keeps, and the sum of their amounts.
    filter_rows: u64,
    filter_amount: i64,
    /// Sum of every event's amount.
    total_amount: i64,
}

impl Input {
    /// `events` rows of `schema`, ~1000 per second of event time, each up to
    /// [`MAX_DISORDER`] early, with uniformly drawn key, host, op and amount.
    fn generate(schema: SchemaRef, events: usize) -> BenchResult<Input> {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        if names[..] != ["ts", "key", "host", "op", "amount"] {
            return Err(format!("unexpected columns in stream \"events\": {names:?}").into());
        }
        let mut rng = StdRng::seed_from_u64(SEED);
        let hosts: Vec<String> = (0..HOSTS).map(|h| format!("host-{h:02}")).collect();
        let step = NANOS_PER_SECOND / EVENTS_PER_SECOND;
        let mut input = Input {
            batches: Vec::with_capacity(events.div_ceil(BATCH_ROWS)),
            filter_rows: 0,
            filter_amount: 0,
            total_amount: 0,
        };
        let mut first = 0;
        while first < events {
            let n = BATCH_ROWS.min(events - first);
            let mut ts = Vec::with_capacity(n);
            let mut key = Vec::with_capacity(n);
            let mut host = Vec::with_capacity(n);
            let mut op = Vec::with_capacity(n);
            let mut amount = Vec::with_capacity(n);
            for i in first..first + n {
                ts.push(START + i as i64 * step - rng.gen_range(0..MAX_DISORDER));
                key.push(rng.gen_range(0..KEYS));
                host.push(hosts[rng.gen_range(0..HOSTS)].as_str());
                let o = OPS[rng.gen_range(0..OPS.len())];
                let a = rng.gen_range(0..MAX_AMOUNT);
                op.push(o);
                amount.push(a);
                input.total_amount += a;
                if o == "write" && a > 5000 {
                    input.filter_rows += 1;
                    input.filter_amount += a;
                }
            }
            let mut columns: Vec<ArrayRef> = vec![Arc::new(TimestampNanosecondArray::from(ts))];
            columns.push(Arc::new(Int64Array::from(key)));
            columns.push(Arc::new(StringArray::from(host)));
            columns.push(Arc::new(StringArray::from(op)));
            columns.push(Arc::new(Int64Array::from(amount)));
            input
                .batches
                .push(RecordBatch::try_new(schema.clone(), columns)?);
            first += n;
        }
        Ok(input)
    }
}

/// An in-memory engine with the `events` stream.
fn open_engine(workers: usize) -> BenchResult<Engine> {
    let engine = Engine::open(EngineConfig {
        workers,
        ..EngineConfig::default()
    })?;
    block_on(engine.execute(STREAM_DDL))?;
    Ok(engine)
}

/// What one engine run produced and how long it took.
struct QueryOutput {
    seconds: f64,
    batches: Vec<RecordBatch>,
    stats: QueryStats,
}

impl QueryOutput {
    fn rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}

/// Registers `sql` as the only query of a fresh engine with `workers` workers and feeds it
/// every batch.
fn run_query(sql: &str, input: &[RecordBatch], workers: usize) -> BenchResult<QueryOutput> {
    let engine = open_engine(workers)?;
    block_on(engine.execute(&format!("CREATE CONTINUOUS QUERY q AS {sql}")))?;
    let Some(StatementResult::Subscribe(sub)) = block_on(engine.execute("SUBSCRIBE q"))?.pop()
    else {
        return Err("SUBSCRIBE q did not return a subscription".into());
    };
    let mut events = sub.events;
    let mut batches = Vec::new();
    let start = Instant::now();
    for batch in input {
        engine.insert_batch("events", batch.clone())?;
        drain(&mut events, |b| {
            batches.push(b);
            Ok::<_, Box<dyn Error>>(())
        })?;
    }
    engine.finish();
    drain(&mut events, |b| {
        batches.push(b);
        Ok::<_, Box<dyn Error>>(())
    })?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(QueryOutput {
        seconds,
        batches,
        stats: stats_of_one(&engine)?,
    })
}

/// The counters of the engine's one query.
fn stats_of_one(engine: &Engine) -> BenchResult<QueryStats> {
    let stats = query_stats(engine)?;
    if stats.len() != 1 {
        return Err("SHOW QUERIES should list exactly one query".into());
    }
    let one = stats.into_values().next();
    one.ok_or_else(|| "SHOW QUERIES listed no query".into())
}

/// The non-null values of column `i`, which must be of type `T`.
fn values<T: ArrowPrimitiveType>(batch: &RecordBatch, i: usize) -> BenchResult<&[T::Native]> {
    let column = batch.column(i);
    let name = batch.schema_ref().field(i).name().clone();
    if column.null_count() > 0 {
        return Err(format!("column \"{name}\" has NULLs").into());
    }
    let array = column.as_primitive_opt::<T>().ok_or_else(|| {
        format!(
            "column \"{name}\" is {}, expected {}",
            column.data_type(),
            T::DATA_TYPE
        )
    })?;
    Ok(array.values())
}

/// How a case's result is checked.
#[derive(Clone, Copy)]
enum Check {
    Filter,
    Tumble,
    Hop,
    Outlier,
    Pattern,
}

/// (a): the filter keeps exactly the rows it should.
fn check_filter(out: &QueryOutput, input: &Input) -> BenchResult<Vec<String>> {
    let mut problems = out.stats.problems(out.rows() as u64);
    let mut amount = 0;
    for b in &out.batches {
        amount += values::<Int64Type>(b, 2)?.iter().sum::<i64>();
    }
    if out.rows() as u64 != input.filter_rows || amount != input.filter_amount {
        problems.push(format!(
            "{} rows with total amount {amount}, expected {} rows with total {}",
            out.rows(),
            input.filter_rows,
            input.filter_amount
        ));
    }
    Ok(problems)
}

/// (b): every group agrees with the hand-written loop.
fn check_tumble(out: &QueryOutput, expected: &[GroupRow]) -> BenchResult<Vec<String>> {
    let mut problems = out.stats.problems(out.rows() as u64);
    let mut got = group_rows(&out.batches)?;
    got.sort_by_key(|g| (g.window_end, g.key));
    let sum = |rows: &[GroupRow]| rows.iter().map(|g| g.sum).sum::<i64>();
    if got.len() != expected.len() || sum(&got) != sum(expected) {
        problems.push(format!(
            "{} groups with SUM total {}, the loop has {} groups with SUM total {}",
            got.len(),
            sum(&got),
            expected.len(),
            sum(expected)
        ));
    }
    let differing: Vec<(&GroupRow, &GroupRow)> = got
        .iter()
        .zip(expected)
        .filter(|(g, e)| !g.matches(e))
        .collect();
    if let Some((g, e)) = differing.first() {
        problems.push(format!(
            "{} groups differ from the loop; first: engine {g:?}, loop {e:?}",
            differing.len()
        ));
    }
    Ok(problems)
}

/// (c): every event is counted in six windows.
fn check_hop(out: &QueryOutput, input: &Input) -> BenchResult<Vec<String>> {
    let mut problems = out.stats.problems(out.rows() as u64);
    let (count, sum) = group_rows(&out.batches)?
        .iter()
        .fold((0, 0), |(c, s), g| (c + g.count, s + g.sum));
    let events: usize = input.batches.iter().map(|b| b.num_rows()).sum();
    let want_count = HOP_WINDOWS_PER_EVENT * events as i64;
    let want_sum = HOP_WINDOWS_PER_EVENT * input.total_amount;
    if count != want_count || sum != want_sum {
        problems.push(format!(
            "COUNT total {count} and SUM total {sum}, expected {want_count} and {want_sum}"
        ));
    }
    Ok(problems)
}

/// (e): the flagged groups are those whose SUM has a z-score above the threshold among the
/// sums of their window (population standard deviation), with the same scores.
fn check_outliers(out: &QueryOutput, groups: &[GroupRow]) -> BenchResult<Vec<String>> {
    let mut problems = out.stats.problems(out.rows() as u64);
    // Reference: z-scores per window over the loop's groups, sorted by (window_end, key).
    let mut want = Vec::new();
    let mut borderline = Vec::new();
    for window in groups.chunk_by(|a, b| a.window_end == b.window_end) {
        let n = window.len() as f64;
        let mean = window.iter().map(|g| g.sum as f64).sum::<f64>() / n;
        let var = window
            .iter()
            .map(|g| (g.sum as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        let sd = var.sqrt();
        for g in window {
            let z = if sd > 0.0 {
                (g.sum as f64 - mean).abs() / sd
            } else {
                0.0
            };
            if (z - ZSCORE_THRESHOLD).abs() <= 1e-9 {
                borderline.push((g.window_end, g.key));
            } else if z > ZSCORE_THRESHOLD {
                want.push((g.window_end, g.key, g.sum, z));
            }
        }
    }
    let mut got = Vec::new();
    for b in &out.batches {
        let key = values::<Int64Type>(b, 0)?;
        let end = values::<TimestampNanosecondType>(b, 1)?;
        let total = values::<Int64Type>(b, 2)?;
        let flag = b
            .column(3)
            .as_boolean_opt()
            .ok_or("is_outlier is not BOOLEAN")?;
        let score = values::<Float64Type>(b, 4)?;
        for i in 0..b.num_rows() {
            if !flag.value(i) {
                problems.push(format!("row {:?} has is_outlier false", (key[i], end[i])));
            }
            if !borderline.contains(&(end[i], key[i])) {
                got.push((end[i], key[i], total[i], score[i]));
            }
        }
    }
    got.sort_by_key(|&(end, key, _, _)| (end, key));
    let same = |(e1, k1, t1, z1): &(i64, i64, i64, f64),
                (e2, k2, t2, z2): &(i64, i64, i64, f64)| {
        (e1, k1, t1) == (e2, k2, t2) && (z1 - z2).abs() <= 1e-9 * z2.abs().max(1.0)
    };
    if got.len() != want.len() || !got.iter().zip(&want).all(|(g, w)| same(g, w)) {
        let first = got
            .iter()
            .zip(&want)
            .find(|(g, w)| !same(g, w))
            .map(|(g, w)| format!("; first difference: engine {g:?}, reference {w:?}"))
            .unwrap_or_default();
        problems.push(format!(
            "{} outliers, the reference has {}{first}",
            got.len(),
            want.len()
        ));
    }
    Ok(problems)
}

/// One group of the windowed aggregate: `key, window_end, COUNT(*), SUM, AVG, MAX`.
#[derive(Debug, Clone, Copy)]
struct GroupRow {
    key: i64,
    window_end: i64,
    count: i64,
    sum: i64,
    avg: f64,
    max: i64,
}

impl GroupRow {
    fn matches(&self, other: &GroupRow) -> bool {
        (self.key, self.window_end, self.count, self.sum, self.max)
            == (
                other.key,
                other.window_end,
                other.count,
                other.sum,
                other.max,
            )
            && (self.avg - other.avg).abs() <= 1e-9 * other.avg.abs().max(1.0)
    }
}

/// The groups in the engine's result batches.
fn group_rows(batches: &[RecordBatch]) -> BenchResult<Vec<GroupRow>> {
    let mut rows = Vec::new();
    for b in batches {
        let key = values::<Int64Type>(b, 0)?;
        let end = values::<TimestampNanosecondType>(b, 1)?;
        let count = values::<Int64Type>(b, 2)?;
        let sum = values::<Int64Type>(b, 3)?;
        let avg = values::<Float64Type>(b, 4)?;
        let max = values::<Int64Type>(b, 5)?;
        for i in 0..b.num_rows() {
            rows.push(GroupRow {
                key: key[i],
                window_end: end[i],
                count: count[i],
                sum: sum[i],
                avg: avg[i],
                max: max[i],
            });
        }
    }
    Ok(rows)
}

/// Running state of one group in the hand-written loop.
#[derive(Clone, Copy)]
struct Accumulator {
    count: i64,
    sum: i64,
    max: i64,
}

/// (l): query (b) written by hand: one pass over the Arrow columns into a hash map keyed by
/// (window start, key), then one result row per group. The input has no NULLs and no late
/// rows, so it needs no handling for either.
fn tumble_loop(batches: &[RecordBatch]) -> BenchResult<Vec<GroupRow>> {
    let mut groups: HashMap<(i64, i64), Accumulator, BuildHasherDefault<MixHasher>> =
        HashMap::default();
    for b in batches {
        let ts = values::<TimestampNanosecondType>(b, TS)?;
        let key = values::<Int64Type>(b, KEY)?;
        let amount = values::<Int64Type>(b, AMOUNT)?;
        for ((&t, &k), &a) in ts.iter().zip(key).zip(amount) {
            let start = t.div_euclid(TUMBLE_SIZE) * TUMBLE_SIZE;
            groups
                .entry((start, k))
                .and_modify(|g| {
                    g.count += 1;
                    g.sum += a;
                    g.max = g.max.max(a);
                })
                .or_insert(Accumulator {
                    count: 1,
                    sum: a,
                    max: a,
                });
        }
    }
    Ok(groups
        .into_iter()
        .map(|((start, key), g)| GroupRow {
            key,
            window_end: start + TUMBLE_SIZE,
            count: g.count,
            sum: g.sum,
            avg: g.sum as f64 / g.count as f64,
            max: g.max,
        })
        .collect())
}

/// A fast hasher for integer keys, as a hand-tuned loop would use instead of SipHash:
/// FxHash's multiply-rotate per word, then a splitmix64 finish so that window starts (multiples
/// of 2^11) do not leave the low bits, which pick the bucket, to the key alone.
#[derive(Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// All runs of one case.
struct Case {
    name: &'static str,
    events: usize,
    seconds: Vec<f64>,
    rows: usize,
}

impl Case {
    fn median(&self) -> f64 {
        let mut s = self.seconds.clone();
        s.sort_by(f64::total_cmp);
        let mid = s.len() / 2;
        if s.len() % 2 == 1 {
            s[mid]
        } else {
            (s[mid - 1] + s[mid]) / 2.0
        }
    }
}

/// Progress lines as the bench goes, and the count of wrong results.
#[derive(Default)]
struct Report {
    mismatches: usize,
}

impl Report {
    fn run_line(&self, name: &str, run: usize, events: usize, seconds: f64, rows: usize) {
        println!(
            "{name:<32} run {run}: {seconds:>8.3} s {:>12} events/s {:>12} rows out",
            thousands((events as f64 / seconds) as u64),
            thousands(rows as u64)
        );
    }

    fn mismatch(&mut self, name: &str, run: usize, problem: String) {
        self.mismatches += 1;
        let at = if run > 0 {
            format!(" run {run}")
        } else {
            String::new()
        };
        println!("MISMATCH {name}{at}: {problem}");
    }

    fn case(&self, name: &'static str, events: usize, seconds: Vec<f64>, rows: usize) -> Case {
        let case = Case {
            name,
            events,
            seconds,
            rows,
        };
        println!("{name:<32} median {:.3} s\n", case.median());
        case
    }
}

/// One match of (d): host, first and last event time, the two amounts.
type Match = (String, i64, i64, i64, i64);

/// (d) found directly: per host, rows in event-time order (ties in arrival order); from each
/// large write, the first larger read at most 5 s later is a match, and the search goes on
/// after it; a write without one is passed over.
fn pattern_loop(batches: &[RecordBatch]) -> BenchResult<Vec<Match>> {
    let mut hosts: HashMap<&str, Vec<(i64, &str, i64)>> = HashMap::new();
    for b in batches {
        let ts = values::<TimestampNanosecondType>(b, TS)?;
        let amount = values::<Int64Type>(b, AMOUNT)?;
        let host = b.column(HOST).as_string::<i32>();
        let op = b.column(OP).as_string::<i32>();
        for i in 0..b.num_rows() {
            hosts
                .entry(host.value(i))
                .or_default()
                .push((ts[i], op.value(i), amount[i]));
        }
    }
    let mut out = Vec::new();
    for (host, mut rows) in hosts {
        rows.sort_by_key(|r| r.0);
        let mut i = 0;
        while i < rows.len() {
            let (t0, op, written) = rows[i];
            let matched = (op == "write" && written > 9000)
                .then(|| {
                    rows[i + 1..]
                        .iter()
                        .take_while(|r| r.0 - t0 <= PATTERN_WITHIN)
                        .position(|r| r.1 == "read" && r.2 > written)
                })
                .flatten();
            match matched {
                Some(k) => {
                    let j = i + 1 + k;
                    out.push((host.to_string(), t0, rows[j].0, written, rows[j].2));
                    i = j + 1;
                }
                None => i += 1,
            }
        }
    }
    out.sort();
    Ok(out)
}

/// (d): the engine's matches are exactly the loop's.
fn check_pattern(out: &QueryOutput, expected: &[Match]) -> BenchResult<Vec<String>> {
    let mut got = Vec::new();
    for b in &out.batches {
        let host = b.column(0).as_string::<i32>();
        let started = values::<TimestampNanosecondType>(b, 1)?;
        let ended = values::<TimestampNanosecondType>(b, 2)?;
        let written = values::<Int64Type>(b, 3)?;
        let read = values::<Int64Type>(b, 4)?;
        for i in 0..b.num_rows() {
            got.push((
                host.value(i).to_string(),
                started[i],
                ended[i],
                written[i],
                read[i],
            ));
        }
    }
    got.sort();
    let mut problems = Vec::new();
    if got.len() != expected.len() {
        problems.push(format!(
            "{} matches, expected {}",
            got.len(),
            expected.len()
        ));
    }
    if let Some((g, e)) = got.iter().zip(expected).find(|(g, e)| g != e) {
        problems.push(format!("first difference: got {g:?}, expected {e:?}"));
    }
    Ok(problems)
}
