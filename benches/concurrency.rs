//! Many continuous queries on one stream: throughput and memory with 1, 10, 100 and 1000
//! registered queries, a mix of filters (with partly identical predicates), tumbling-window
//! aggregates, and exact duplicates of earlier queries.
//!
//! `cargo bench --bench concurrency`; `SAQL_BENCH_EVENTS` (default 2,000,000),
//! `SAQL_BENCH_RUNS` (3), `SAQL_BENCH_QUERIES` (`1,10,100,1000`) and `SAQL_BENCH_WORKERS` (the
//! engine's `workers`, default 1 as in the library and `saql run`) override the defaults;
//! `SAQL_BENCH_SHARING=1` also runs every distinct query of the mixes of 100 and more alone
//! and prints each mix's cost against the sum of theirs (sharing measured as sharing). Each
//! run is a child process of this one (the same binary, told which case to run by
//! `SAQL_CONCURRENCY_CASE`), so that its resident set size starts from a clean heap: the child
//! generates the input (untimed), reads RSS from `/proc/self/statm`, opens an engine, registers
//! and subscribes to the queries, reads RSS again, then times `insert_batch` and `finish` only
//! (between the calls, untimed, it drains every subscription, summarising each result batch
//! and dropping it, and samples RSS). Every query's result is checked against a direct
//! recompute over the input, and each query's own counters against what its subscriber
//! received; a wrong result prints `MISMATCH` and the bench exits non-zero. The engine
//! shares the operators and the conjuncts that queries have in common
//! (`src/runtime/graph.rs`, `src/runtime/predicates.rs`), so the cost follows the distinct
//! operators more than the number of queries: the table shows how many of each mix's queries
//! are distinct. See `benches/README.md` for the latest figures.

mod common;

use common::{drain, env_count, env_list, median, query_stats, thousands};

use std::collections::HashMap;
use std::error::Error;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{Int64Type, SchemaRef};
use futures::executor::block_on;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use saql::runtime::SubscriptionEvents;
use saql::{Engine, EngineConfig, StatementResult};

type BenchResult<T> = Result<T, Box<dyn Error>>;

const STREAM_DDL: &str = "CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
)";

const DEFAULT_EVENTS: usize = 2_000_000;
const DEFAULT_RUNS: usize = 3;
const DEFAULT_QUERIES: [usize; 4] = [1, 10, 100, 1000];
/// Set in a child process: the number of queries of the one run it makes.
const CHILD_ENV: &str = "SAQL_CONCURRENCY_CASE";
/// The line a child prints its measurements on, for the parent to read.
const RESULT_PREFIX: &str = "CONCURRENCY-RESULT";

const BATCH_ROWS: usize = 8192;
const SEED: u64 = 0x5a71_be4c;
const KEYS: i64 = 10_000;
const HOSTS: usize = 100;
const OPS: [&str; 5] = ["read", "write", "open", "close", "connect"];
const MAX_AMOUNT: i64 = 10_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_MINUTE: i64 = 60 * NANOS_PER_SECOND;
const EVENTS_PER_SECOND: i64 = 1_000;
/// 2024-01-01 00:00:00 UTC.
const START: i64 = 1_704_067_200 * NANOS_PER_SECOND;
/// Inside the stream's 5 s watermark delay: no row is late, every window is complete.
const MAX_DISORDER: i64 = 2 * NANOS_PER_SECOND;
/// x86-64 Linux pages; `/proc/self/statm` counts in pages.
const PAGE_BYTES: u64 = 4096;
const MIB: f64 = 1024.0 * 1024.0;

fn main() -> ExitCode {
    let result = match std::env::var(CHILD_ENV) {
        Ok(n) => child(&n),
        Err(_) => parent(),
    };
    match result {
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

// ---------------------------------------------------------------------------------------------
// The query mix

/// One query of the mix. Query `i` is [`Spec::of`]`(i)`: the kinds take turns, and within a
/// kind the parameters cycle, so predicates repeat (`op = 'write'` in many filters) and from
/// 60 queries on whole queries repeat too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Spec {
    /// `WHERE op = .. AND amount > ..`: 15 distinct filters.
    OpFilter { op: usize, min_amount: i64 },
    /// `WHERE host = .. AND op = 'write'`: 100 distinct filters sharing `op = 'write'`.
    HostFilter { host: usize },
    /// Per host, per 1- or 5-minute window, COUNT and SUM of one op: 10 distinct.
    HostTumble { minutes: i64, op: usize },
    /// Per key, per 1-minute window, of the rows above an amount: COUNT and MAX, HAVING
    /// COUNT(*) >= 2 (an alerting rule over 10,000 keys): 3 distinct.
    KeyTumble { min_amount: i64 },
}

/// Amount thresholds of [`Spec::OpFilter`] and [`Spec::KeyTumble`].
const THRESHOLDS: [i64; 3] = [1_000, 5_000, 9_000];

impl Spec {
    fn of(i: usize) -> Spec {
        let round = i / 4;
        match i % 4 {
            0 => Spec::OpFilter {
                op: (1 + round) % OPS.len(),
                min_amount: THRESHOLDS[(round / OPS.len()) % THRESHOLDS.len()],
            },
            1 => Spec::HostFilter {
                host: (round * 7) % HOSTS,
            },
            2 => Spec::HostTumble {
                minutes: if (round / OPS.len()).is_multiple_of(2) {
                    1
                } else {
                    5
                },
                op: (1 + round) % OPS.len(),
            },
            _ => Spec::KeyTumble {
                min_amount: THRESHOLDS[THRESHOLDS.len() - 1 - round % THRESHOLDS.len()],
            },
        }
    }

    fn sql(&self) -> String {
        match *self {
            Spec::OpFilter { op, min_amount } => format!(
                "SELECT ts, host, amount FROM events WHERE op = '{}' AND amount > {min_amount}",
                OPS[op]
            ),
            Spec::HostFilter { host } => format!(
                "SELECT ts, key, amount FROM events WHERE host = '{}' AND op = 'write'",
                host_name(host)
            ),
            Spec::HostTumble { minutes, op } => format!(
                "SELECT host, window_end, COUNT(*) AS n, SUM(amount) AS total \
                 FROM TUMBLE(events, ts, INTERVAL '{minutes}' MINUTE) WHERE op = '{}' \
                 GROUP BY host, window_start, window_end",
                OPS[op]
            ),
            Spec::KeyTumble { min_amount } => format!(
                "SELECT key, window_end, COUNT(*) AS n, MAX(amount) AS top \
                 FROM TUMBLE(events, ts, INTERVAL '1' MINUTE) WHERE amount > {min_amount} \
                 GROUP BY key, window_start, window_end HAVING COUNT(*) >= 2"
            ),
        }
    }

    /// What the query must produce from `input`, by a direct recompute.
    fn expected(&self, input: &Input) -> Outcome {
        match *self {
            Spec::OpFilter { op, min_amount } => {
                let mut out = Outcome::default();
                for r in input.rows() {
                    if r.op == op && r.amount > min_amount {
                        out.add(r.amount, 0);
                    }
                }
                out
            }
            Spec::HostFilter { host } => {
                let mut out = Outcome::default();
                for r in input.rows() {
                    if r.host == host && r.op == 1 {
                        out.add(r.amount, r.key);
                    }
                }
                out
            }
            Spec::HostTumble { minutes, op } => {
                let size = minutes * NANOS_PER_MINUTE;
                let mut groups: HashMap<(i64, usize), (i64, i64)> = HashMap::new();
                for r in input.rows().filter(|r| r.op == op) {
                    let g = groups.entry((r.ts.div_euclid(size), r.host)).or_default();
                    g.0 += 1;
                    g.1 += r.amount;
                }
                let mut out = Outcome::default();
                for (n, total) in groups.into_values() {
                    out.add(n, total);
                }
                out
            }
            Spec::KeyTumble { min_amount } => {
                let mut groups: HashMap<(i64, i64), (i64, i64)> = HashMap::new();
                for r in input.rows().filter(|r| r.amount > min_amount) {
                    let g = groups
                        .entry((r.ts.div_euclid(NANOS_PER_MINUTE), r.key))
                        .or_default();
                    g.0 += 1;
                    g.1 = g.1.max(r.amount);
                }
                let mut out = Outcome::default();
                for (n, top) in groups.into_values().filter(|g| g.0 >= 2) {
                    out.add(n, top);
                }
                out
            }
        }
    }

    /// Adds one of the engine's result batches to `out`, summarised as [`Spec::expected`]
    /// does.
    fn summarise(&self, batch: &RecordBatch, out: &mut Outcome) -> BenchResult<()> {
        // Which result columns are summed: (filters) amount and key; (aggregates) the two
        // aggregates.
        let (a, b) = match self {
            Spec::OpFilter { .. } => (2, None),
            Spec::HostFilter { .. } => (2, Some(1)),
            Spec::HostTumble { .. } | Spec::KeyTumble { .. } => (2, Some(3)),
        };
        let first = int_column(batch, a)?;
        let second = b.map(|i| int_column(batch, i)).transpose()?;
        for row in 0..batch.num_rows() {
            out.add(first.value(row), second.map_or(0, |c| c.value(row)));
        }
        Ok(())
    }

    fn kind(&self) -> &'static str {
        match self {
            Spec::OpFilter { .. } => "filter op/amount",
            Spec::HostFilter { .. } => "filter host",
            Spec::HostTumble { .. } => "tumble per host",
            Spec::KeyTumble { .. } => "tumble per key",
        }
    }
}

fn host_name(h: usize) -> String {
    format!("host-{h:02}")
}

fn int_column(batch: &RecordBatch, i: usize) -> BenchResult<&Int64Array> {
    let column = batch.column(i);
    if column.null_count() > 0 {
        return Err(format!("result column {i} has NULLs").into());
    }
    column.as_primitive_opt::<Int64Type>().ok_or_else(|| {
        format!(
            "result column {i} is {}, expected BIGINT",
            column.data_type()
        )
        .into()
    })
}

/// A query's result summarised: its row count and the sums of two of its columns.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    rows: u64,
    sum_a: i64,
    sum_b: i64,
}

impl Outcome {
    fn add(&mut self, a: i64, b: i64) {
        self.rows += 1;
        self.sum_a += a;
        self.sum_b += b;
    }
}

// ---------------------------------------------------------------------------------------------
// The parent: spawns one child per run, collects and reports

/// What a child measured.
#[derive(Debug, Clone, Copy)]
struct Measured {
    queries: usize,
    register_seconds: f64,
    seconds: f64,
    rss_start: u64,
    rss_registered: u64,
    rss_peak: u64,
    rss_end: u64,
    rows_out: u64,
}

impl Measured {
    fn to_line(self) -> String {
        format!(
            "{RESULT_PREFIX} {} {} {} {} {} {} {} {}",
            self.queries,
            self.register_seconds,
            self.seconds,
            self.rss_start,
            self.rss_registered,
            self.rss_peak,
            self.rss_end,
            self.rows_out
        )
    }

    fn from_line(line: &str) -> Option<Measured> {
        let f: Vec<&str> = line
            .strip_prefix(RESULT_PREFIX)?
            .split_whitespace()
            .collect();
        if f.len() != 8 {
            return None;
        }
        Some(Measured {
            queries: f[0].parse().ok()?,
            register_seconds: f[1].parse().ok()?,
            seconds: f[2].parse().ok()?,
            rss_start: f[3].parse().ok()?,
            rss_registered: f[4].parse().ok()?,
            rss_peak: f[5].parse().ok()?,
            rss_end: f[6].parse().ok()?,
            rows_out: f[7].parse().ok()?,
        })
    }
}

fn parent() -> BenchResult<bool> {
    let events = env_count("SAQL_BENCH_EVENTS", DEFAULT_EVENTS)?;
    let runs = env_count("SAQL_BENCH_RUNS", DEFAULT_RUNS)?;
    let counts = env_list("SAQL_BENCH_QUERIES", &DEFAULT_QUERIES)?;
    println!(
        "saql concurrency bench: {events} events in batches of {BATCH_ROWS}, queries {counts:?}, \
         {runs} runs each, one child process per run, {} engine worker(s)",
        env_count("SAQL_BENCH_WORKERS", 1)?
    );
    let largest = counts.iter().copied().max().unwrap_or(1);
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    let mut distinct = std::collections::HashSet::new();
    for i in 0..largest {
        let kind = Spec::of(i).kind();
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
        distinct.insert(Spec::of(i));
    }
    println!(
        "mix of the first {largest} queries: {kinds:?}, {} distinct\n",
        distinct.len()
    );

    let exe = std::env::current_exe()?;
    let mut all_right = true;
    let mut run_case = |case: String, label: String| -> BenchResult<Vec<Measured>> {
        let mut measured = Vec::new();
        for run in 1..=runs {
            let (m, right) = run_child(&exe, &case, events)?;
            all_right &= right;
            println!(
                "{label:<28} run {run}: {:>8.3} s {:>12} events/s, registering {:.3} s, \
                 RSS {:.0} -> {:.0} MiB registered -> {:.0} MiB peak, {} rows out",
                m.seconds,
                thousands((events as f64 / m.seconds) as u64),
                m.register_seconds,
                m.rss_start as f64 / MIB,
                m.rss_registered as f64 / MIB,
                m.rss_peak as f64 / MIB,
                thousands(m.rows_out)
            );
            measured.push(m);
        }
        Ok(measured)
    };
    let mut cases = Vec::new();
    for &n in &counts {
        cases.push(run_case(n.to_string(), format!("{n} queries"))?);
    }
    // Each kind's first query alone, to read the mixes' costs against.
    let mut solos = Vec::new();
    for k in 0..4 {
        let spec = Spec::of(k);
        solos.push((
            spec,
            run_case(format!("solo:{k}"), format!("alone: {}", spec.kind()))?,
        ));
    }

    println!(
        "\n| queries | distinct | median s | events/s | query-events/s | cost vs 1 query \
         | per query vs 1 | register s | RSS registered - start (MiB) | RSS peak - start (MiB) \
         | rows out | all runs (s) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let one = cases
        .iter()
        .find(|c| c[0].queries == 1)
        .map(|c| median(c.iter().map(|m| m.seconds)));
    for c in &cases {
        let n = c[0].queries;
        let seconds = median(c.iter().map(|m| m.seconds));
        let (ratio, per_query) = match one {
            Some(t1) => (
                format!("{:.1}x", seconds / t1),
                format!("{:.2}x", seconds / t1 / n as f64),
            ),
            None => ("-".into(), "-".into()),
        };
        let distinct: std::collections::HashSet<Spec> = (0..n).map(Spec::of).collect();
        println!(
            "| {n} | {} | {seconds:.3} | {} | {} | {ratio} | {per_query} | {:.3} | {:.1} | {:.1} | {} | {} |",
            distinct.len(),
            thousands((events as f64 / seconds) as u64),
            thousands((n as f64 * events as f64 / seconds) as u64),
            median(c.iter().map(|m| m.register_seconds)),
            median_mib(c, |m| m.rss_registered),
            median_mib(c, |m| m.rss_peak),
            thousands(c[0].rows_out),
            all_runs(c)
        );
    }

    println!("\n| alone | query | median s | events/s | RSS peak - start (MiB) | rows out | all runs (s) |");
    println!("|---|---|---:|---:|---:|---:|---|");
    let mut solo_sum = 0.0;
    for (spec, c) in &solos {
        let seconds = median(c.iter().map(|m| m.seconds));
        solo_sum += seconds;
        println!(
            "| {} | `{}` | {seconds:.3} | {} | {:.1} | {} | {} |",
            spec.kind(),
            spec.sql(),
            thousands((events as f64 / seconds) as u64),
            median_mib(c, |m| m.rss_peak),
            thousands(c[0].rows_out),
            all_runs(c)
        );
    }
    if std::env::var("SAQL_BENCH_SHARING").is_ok_and(|v| v == "1") {
        all_right &= sharing(&exe, &cases, events)?;
    }
    if let Some(t1) = one {
        for c in cases.iter().filter(|c| c[0].queries == 100) {
            let t100 = median(c.iter().map(|m| m.seconds));
            println!(
                "\ncost(100) / cost(1) = {:.1}; 100 queries / (25 x the four kinds alone) = {:.2}",
                t100 / t1,
                t100 / (25.0 * solo_sum)
            );
        }
    }
    Ok(all_right)
}

/// Sharing measured as sharing (`SAQL_BENCH_SHARING=1`): for each mix of 100 or more
/// queries, its cost against the sum of the costs of each of its distinct queries run alone
/// (one child each, one run: the sum averages their noise), and its cost per distinct query.
/// Returns whether every solo run's results were right.
fn sharing(exe: &std::path::Path, cases: &[Vec<Measured>], events: usize) -> BenchResult<bool> {
    let mut all_right = true;
    let mut alone: HashMap<Spec, f64> = HashMap::new();
    println!(
        "\n| queries | distinct | together s | sum of each distinct alone s | together / alone \
         | together per distinct query (ms) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for c in cases.iter().filter(|c| c[0].queries >= 100) {
        let n = c[0].queries;
        let mut firsts: Vec<usize> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for i in 0..n {
            if seen.insert(Spec::of(i)) {
                firsts.push(i);
            }
        }
        let mut sum = 0.0;
        for &i in &firsts {
            let spec = Spec::of(i);
            let seconds = match alone.get(&spec) {
                Some(s) => *s,
                None => {
                    let (m, right) = run_child(exe, &format!("solo:{i}"), events)?;
                    all_right &= right;
                    alone.insert(spec, m.seconds);
                    m.seconds
                }
            };
            sum += seconds;
        }
        let together = median(c.iter().map(|m| m.seconds));
        println!(
            "| {n} | {} | {together:.3} | {sum:.3} | {:.3} | {:.2} |",
            firsts.len(),
            together / sum,
            together * 1000.0 / firsts.len() as f64
        );
    }
    Ok(all_right)
}

/// Runs one case in a child process; returns its measurements and whether its results
/// were right.
fn run_child(exe: &std::path::Path, case: &str, events: usize) -> BenchResult<(Measured, bool)> {
    let output = Command::new(exe)
        .env(CHILD_ENV, case)
        .env("SAQL_BENCH_EVENTS", events.to_string())
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut result = None;
    for line in stdout.lines() {
        match Measured::from_line(line) {
            Some(m) => result = Some(m),
            None => println!("  {line}"),
        }
    }
    let right = match output.status.code() {
        Some(0) => true,
        Some(1) => false,
        _ => {
            eprint!("{}", String::from_utf8_lossy(&output.stderr));
            return Err(format!("the run of case {case} failed: {}", output.status).into());
        }
    };
    let m = result.ok_or_else(|| format!("the run of case {case} printed no result line"))?;
    Ok((m, right))
}

/// Median over the runs of an RSS reading minus the RSS at the start, in MiB.
fn median_mib(runs: &[Measured], reading: fn(&Measured) -> u64) -> f64 {
    median(
        runs.iter()
            .map(|m| reading(m).saturating_sub(m.rss_start) as f64 / MIB),
    )
}

fn all_runs(runs: &[Measured]) -> String {
    let all: Vec<String> = runs.iter().map(|m| format!("{:.3}", m.seconds)).collect();
    all.join(", ")
}

// ---------------------------------------------------------------------------------------------
// The child: one run with n queries

/// `case` is `N` (queries 0..N of the mix) or `solo:K` (query K of the mix alone).
fn child(case: &str) -> BenchResult<bool> {
    let specs: Vec<Spec> = match case.strip_prefix("solo:") {
        Some(k) => vec![Spec::of(k.parse()?)],
        None => (0..case.parse()?).map(Spec::of).collect(),
    };
    let n = specs.len();
    let events = env_count("SAQL_BENCH_EVENTS", DEFAULT_EVENTS)?;

    // Untimed: the input and the expected result of every distinct query.
    let schema = open_engine()?.stream_schema("events")?;
    let input = Input::generate(schema, events)?;
    let mut expected: HashMap<Spec, Outcome> = HashMap::new();
    for s in &specs {
        if !expected.contains_key(s) {
            expected.insert(*s, s.expected(&input));
        }
    }

    let rss_start = rss_bytes()?;
    let registering = Instant::now();
    let engine = open_engine()?;
    let mut subscriptions = Vec::with_capacity(n);
    for (i, spec) in specs.iter().enumerate() {
        block_on(engine.execute(&format!(
            "CREATE CONTINUOUS QUERY q{i:04} AS {}",
            spec.sql()
        )))?;
        let Some(StatementResult::Subscribe(sub)) =
            block_on(engine.execute(&format!("SUBSCRIBE q{i:04}")))?.pop()
        else {
            return Err(format!("SUBSCRIBE q{i:04} did not return a subscription").into());
        };
        subscriptions.push(sub.events);
    }
    let register_seconds = registering.elapsed().as_secs_f64();
    let rss_registered = rss_bytes()?;

    // Only the engine's calls are timed. Between them, untimed, every subscription is drained
    // and its batches summarised and dropped (keeping 10^8 result rows for the check would
    // dwarf the engine's memory), and RSS is sampled.
    let mut results = vec![Outcome::default(); n];
    let mut rss_peak = rss_registered;
    let mut seconds = 0.0;
    for batch in &input.batches {
        let start = Instant::now();
        engine.insert_batch("events", batch.clone())?;
        seconds += start.elapsed().as_secs_f64();
        drain_all(&specs, &mut subscriptions, &mut results)?;
        rss_peak = rss_peak.max(rss_bytes()?);
    }
    let start = Instant::now();
    engine.finish();
    seconds += start.elapsed().as_secs_f64();
    rss_peak = rss_peak.max(rss_bytes()?);
    drain_all(&specs, &mut subscriptions, &mut results)?;
    let rss_end = rss_bytes()?;

    let stats = query_stats(&engine)?;
    let mut all_right = true;
    let mut rows_out = 0;
    for (i, (spec, &got)) in specs.iter().zip(&results).enumerate() {
        rows_out += got.rows;
        let want = expected[spec];
        let mut problems = Vec::new();
        if got != want {
            problems.push(format!("got {got:?}, expected {want:?}"));
        }
        match stats.get(&format!("q{i:04}")) {
            Some(s) => problems.extend(s.problems(got.rows)),
            None => problems.push("missing from SHOW QUERIES".into()),
        }
        for p in problems {
            all_right = false;
            println!("MISMATCH q{i:04} ({}): {p}", spec.sql());
        }
    }
    println!(
        "{}",
        Measured {
            queries: n,
            register_seconds,
            seconds,
            rss_start,
            rss_registered,
            rss_peak,
            rss_end,
            rows_out,
        }
        .to_line()
    );
    Ok(all_right)
}

/// Resident set size of this process, from `/proc/self/statm` (its second field, in pages).
fn rss_bytes() -> BenchResult<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("/proc/self/statm has no second field")?
        .parse()?;
    Ok(pages * PAGE_BYTES)
}

/// An in-memory engine with the `events` stream and the default configuration (each query
/// keeps its last 10,000 result rows for ad hoc SELECT, as `saql serve` does), with
/// `SAQL_BENCH_WORKERS` workers.
fn open_engine() -> BenchResult<Engine> {
    let engine = Engine::open(EngineConfig {
        workers: env_count("SAQL_BENCH_WORKERS", 1)?,
        ..EngineConfig::default()
    })?;
    block_on(engine.execute(STREAM_DDL))?;
    Ok(engine)
}

/// Summarises every result batch waiting in each query's subscription into its outcome.
fn drain_all(
    specs: &[Spec],
    subscriptions: &mut [SubscriptionEvents],
    outcomes: &mut [Outcome],
) -> BenchResult<()> {
    for ((spec, sub), outcome) in specs.iter().zip(subscriptions).zip(outcomes) {
        drain(sub, |batch| spec.summarise(&batch, outcome))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The input

/// The generated events, as Arrow batches and as plain columns for the recompute.
struct Input {
    batches: Vec<RecordBatch>,
    ts: Vec<i64>,
    key: Vec<i64>,
    host: Vec<usize>,
    op: Vec<usize>,
    amount: Vec<i64>,
}

/// One event, as the recompute sees it (host and op as indexes).
struct Row {
    ts: i64,
    key: i64,
    host: usize,
    op: usize,
    amount: i64,
}

impl Input {
    /// `events` rows, ~1000 per second of event time, each up to [`MAX_DISORDER`] early,
    /// with uniformly drawn key, host, op and amount (as in `benches/engine.rs`).
    fn generate(schema: SchemaRef, events: usize) -> BenchResult<Input> {
        let mut rng = StdRng::seed_from_u64(SEED);
        let hosts: Vec<String> = (0..HOSTS).map(host_name).collect();
        let step = NANOS_PER_SECOND / EVENTS_PER_SECOND;
        let mut input = Input {
            batches: Vec::with_capacity(events.div_ceil(BATCH_ROWS)),
            ts: Vec::with_capacity(events),
            key: Vec::with_capacity(events),
            host: Vec::with_capacity(events),
            op: Vec::with_capacity(events),
            amount: Vec::with_capacity(events),
        };
        for i in 0..events {
            input
                .ts
                .push(START + i as i64 * step - rng.gen_range(0..MAX_DISORDER));
            input.key.push(rng.gen_range(0..KEYS));
            input.host.push(rng.gen_range(0..HOSTS));
            input.op.push(rng.gen_range(0..OPS.len()));
            input.amount.push(rng.gen_range(0..MAX_AMOUNT));
        }
        let mut first = 0;
        while first < events {
            let rows = first..(first + BATCH_ROWS).min(events);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(TimestampNanosecondArray::from(
                    input.ts[rows.clone()].to_vec(),
                )),
                Arc::new(Int64Array::from(input.key[rows.clone()].to_vec())),
                Arc::new(StringArray::from_iter_values(
                    input.host[rows.clone()].iter().map(|&h| &hosts[h]),
                )),
                Arc::new(StringArray::from_iter_values(
                    input.op[rows.clone()].iter().map(|&o| OPS[o]),
                )),
                Arc::new(Int64Array::from(input.amount[rows.clone()].to_vec())),
            ];
            input
                .batches
                .push(RecordBatch::try_new(schema.clone(), columns)?);
            first = rows.end;
        }
        Ok(input)
    }

    fn rows(&self) -> impl Iterator<Item = Row> + '_ {
        (0..self.ts.len()).map(|i| Row {
            ts: self.ts[i],
            key: self.key[i],
            host: self.host[i],
            op: self.op[i],
            amount: self.amount[i],
        })
    }
}
