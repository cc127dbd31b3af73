//! Retained history, measured side by side in one process on the same events:
//!
//! - **write cost**: ingest of N events (insert, then `CHECKPOINT`, which writes the Parquet
//!   segments) into a stream with history against the same stream without (ratio; the
//!   issue's target is at most 10% slower);
//! - **compression**: bytes of the segments on disk per event, against the events' Arrow
//!   memory and their CSV text;
//! - **hunting**: an ad hoc `SELECT` with a time predicate (the newest tenth) and a full
//!   `GROUP BY` scan over the whole history, against DuckDB reading the same Parquet files
//!   (when `SAQL_BENCH_DUCKDB` names a Python with the `duckdb` package: whole process, and
//!   DuckDB's own query time);
//! - **backfill**: a TUMBLE query created `WITH (start = ...)` over the whole history, in events
//!   per second, against the same query fed the same events live in this process (no data
//!   directory, no decoding) and against `saql run` of the query over the events as a CSV
//!   file (the baseline: the rate of replaying a file, whole process).
//!
//! - **live ingest during a backfill**: SQL `INSERT`s of 100 rows, one after another, into a
//!   stream with a running TUMBLE query, on a 2-worker tokio runtime as the server has, with
//!   nothing else running and then while a query is backfilled over the whole history: the
//!   INSERTs' latency (median, p99, max) and rows per second, and the backfill's time.
//!
//! `cargo bench --bench history`; `SAQL_BENCH_EVENTS` (default 5,000,000) and
//! `SAQL_BENCH_RUNS` (default 3) override the sizes; `SAQL_BENCH_SECTIONS` (e.g. `live`)
//! runs only some of `write,hunt,backfill,live`. Results are checked (counts and sums
//! against the generator; backfilled windows against the live ones). Peak RSS is printed.

mod common;

use common::{drain, env_count, median, thousands};

use std::error::Error;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::util::display::array_value_to_string;
use saql::runtime::FsyncPolicy;
use saql::{Engine, EngineConfig, StatementResult};

type BenchResult<T> = Result<T, Box<dyn Error>>;

const BATCH: usize = 8192;
/// Events start here (2026-01-01) and come 1 ms apart.
const T0: i64 = 1_767_225_600_000_000_000;
const HOSTS: i64 = 1000;

const WINDOWS: &str = "SELECT host, window_end, count(*) AS c, sum(n) AS total \
                       FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, \
                       window_end";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new("host", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]))
}

fn events(n: usize) -> Vec<RecordBatch> {
    (0..n)
        .step_by(BATCH)
        .map(|start| {
            let end = (start + BATCH).min(n) as i64;
            let ids = start as i64..end;
            RecordBatch::try_new(
                schema(),
                vec![
                    Arc::new(TimestampNanosecondArray::from_iter_values(
                        ids.clone().map(|i| T0 + i * 1_000_000),
                    )),
                    Arc::new(StringArray::from_iter_values(ids.clone().map(|i| {
                        format!("host-{}", common::mix(i as u64) % HOSTS as u64)
                    }))),
                    Arc::new(Int64Array::from_iter_values(ids.map(|i| i % 1000))),
                ],
            )
            .expect("a batch")
        })
        .collect()
}

fn open(dir: Option<&Path>, history: &str) -> BenchResult<Engine> {
    let engine = Engine::open(EngineConfig {
        data_dir: dir.map(Path::to_path_buf),
        fsync: FsyncPolicy::Off,
        checkpoint_interval: None,
        retain_rows: 1_000,
        max_query_state_bytes: 8 << 30,
        ..EngineConfig::default()
    })?;
    let with = if dir.is_some() {
        format!(" WITH (history = '{history}')")
    } else {
        String::new()
    };
    futures::executor::block_on(engine.execute(&format!(
        "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, n BIGINT, \
         WATERMARK FOR ts AS ts - INTERVAL '5' SECOND){with}"
    )))?;
    Ok(engine)
}

/// Seconds to insert every batch and take a checkpoint (which writes history segments).
fn ingest(engine: &Engine, input: &[RecordBatch]) -> BenchResult<f64> {
    let start = Instant::now();
    for b in input {
        engine.insert_batch("s", b.clone())?;
    }
    engine.checkpoint()?;
    Ok(start.elapsed().as_secs_f64())
}

/// The rows of an ad hoc statement, as text, and the seconds it took.
fn query(
    rt: &tokio::runtime::Runtime,
    engine: &Engine,
    sql: &str,
) -> BenchResult<(Vec<Vec<String>>, f64)> {
    let start = Instant::now();
    let batches = rt.block_on(async {
        match engine.execute(sql).await?.remove(0) {
            StatementResult::Streaming { rows, .. } => rows.collect().await,
            StatementResult::Rows { batches, .. } => Ok(batches),
            _ => Err(saql::error::Error::Internal("no rows".into())),
        }
    })?;
    let secs = start.elapsed().as_secs_f64();
    let mut out = Vec::new();
    for b in &batches {
        for r in 0..b.num_rows() {
            out.push(
                (0..b.num_columns())
                    .map(|c| array_value_to_string(b.column(c), r))
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
    }
    Ok((out, secs))
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// DuckDB over the same files: whole-process seconds and DuckDB's own query seconds.
fn duckdb(
    python: &str,
    glob: &str,
    sql: &str,
    threads: Option<usize>,
) -> BenchResult<(f64, f64, String)> {
    let set = threads.map_or(String::new(), |t| {
        format!("con.execute('SET threads = {t}')\n")
    });
    let script = format!(
        "import duckdb, time\ncon = duckdb.connect()\n{set}t = time.perf_counter()\n\
         r = con.execute(\"\"\"{}\"\"\").fetchall()\nprint(time.perf_counter() - t)\nprint(r[0])\n",
        sql.replace("FROM s", &format!("FROM read_parquet('{glob}')"))
    );
    let start = Instant::now();
    let out = std::process::Command::new(python)
        .args(["-c", &script])
        .output()?;
    let whole = start.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let own: f64 = lines.next().unwrap_or("0").trim().parse()?;
    Ok((whole, own, lines.next().unwrap_or("").to_string()))
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
        Ok(false) => {
            println!("\nMISMATCH: a result differs from what it must be");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> BenchResult<bool> {
    let n = env_count("SAQL_BENCH_EVENTS", 5_000_000)?;
    let runs = env_count("SAQL_BENCH_RUNS", 3)?.max(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let input = events(n);
    let arrow_bytes: usize = input.iter().map(|b| b.get_array_memory_size()).sum();
    let sum_n: i64 = (0..n as i64).map(|i| i % 1000).sum();
    println!(
        "history bench: {} events, {runs} runs, batches of {BATCH}",
        thousands(n as u64)
    );
    let mut ok = true;
    let sections =
        std::env::var("SAQL_BENCH_SECTIONS").unwrap_or_else(|_| "write,hunt,backfill,live".into());
    let section = |name: &str| sections.split(',').any(|s| s.trim() == name);
    if section("live") {
        ok &= live_during_backfill(&input)?;
    }
    if !(section("write") || section("hunt") || section("backfill")) {
        return Ok(ok);
    }

    // Write cost, alternating with and without history.
    let (mut plain, mut kept) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs {
        let dir = tempfile::tempdir()?;
        let engine = open(Some(dir.path()), "off")?;
        plain.push(ingest(&engine, &input)?);
        drop(engine);
        let dir = tempfile::tempdir()?;
        let engine = open(Some(dir.path()), "30 days")?;
        kept.push(ingest(&engine, &input)?);
        last = Some((dir, engine));
    }
    let (plain, kept) = (median(plain.into_iter()), median(kept.into_iter()));
    println!(
        "ingest + checkpoint, no history:   {:>8.3} s  {:>12} events/s",
        plain,
        thousands((n as f64 / plain) as u64)
    );
    println!(
        "ingest + checkpoint, with history: {:>8.3} s  {:>12} events/s  (history costs {:+.1}%)",
        kept,
        thousands((n as f64 / kept) as u64),
        (kept / plain - 1.0) * 100.0
    );
    let (dir, engine) = last.ok_or("no run")?;
    let history_dir = dir.path().join("history/s");
    let on_disk = dir_bytes(&history_dir);
    let csv_bytes: usize = (0..n)
        .map(|i| 24 + format!("host-{}", common::mix(i as u64) % HOSTS as u64).len() + 1 + 4)
        .sum();
    println!(
        "history on disk: {} bytes, {:.1} bytes/event; Arrow in memory {:.1}x larger, CSV text {:.1}x larger",
        thousands(on_disk),
        on_disk as f64 / n as f64,
        arrow_bytes as f64 / on_disk as f64,
        csv_bytes as f64 / on_disk as f64
    );

    // Hunting.
    if !section("hunt") && !section("backfill") {
        return Ok(ok);
    }
    let cutoff = T0 + (n as i64 * 9 / 10) * 1_000_000;
    let recent = format!(
        "SELECT count(*), sum(n) FROM s WHERE ts >= {}",
        saql::sql::timestamp_literal(cutoff)
    );
    let grouped = "SELECT count(DISTINCT host), count(*), sum(n) FROM s";
    let expect_recent = (n - n * 9 / 10) as i64;
    let hunts = match section("hunt") {
        true => vec![("newest tenth", recent.as_str()), ("whole scan", grouped)],
        false => Vec::new(),
    };
    for (name, sql) in hunts {
        let mut times = Vec::new();
        let mut rows = Vec::new();
        for _ in 0..runs {
            let (r, secs) = query(&rt, &engine, sql)?;
            times.push(secs);
            rows = r;
        }
        let secs = median(times.into_iter());
        let row = rows.first().cloned().unwrap_or_default();
        let right = match name {
            "whole scan" => row == [HOSTS.to_string(), n.to_string(), sum_n.to_string()],
            _ => row.first() == Some(&expect_recent.to_string()),
        };
        ok &= right;
        print!(
            "hunt, {name:<12}: saql {:>8.3} s ({:>12} events/s) {row:?}{}",
            secs,
            thousands((n as f64 / secs) as u64),
            if right { "" } else { "  WRONG" }
        );
        match std::env::var("SAQL_BENCH_DUCKDB") {
            Ok(python) => {
                let glob = format!("{}/*.parquet", history_dir.display());
                // DuckDB on every core (its default) and on one, as saql's ad hoc query runs.
                for threads in [None, Some(1)] {
                    let mut whole = Vec::new();
                    let mut own = Vec::new();
                    let mut answer = String::new();
                    for _ in 0..runs {
                        let (w, o, a) = duckdb(&python, &glob, sql, threads)?;
                        whole.push(w);
                        own.push(o);
                        answer = a;
                    }
                    let (whole, own) = (median(whole.into_iter()), median(own.into_iter()));
                    let cores = threads.map_or("all cores".to_string(), |t| format!("{t} thread"));
                    print!(
                        "\n    DuckDB ({cores}) {whole:.3} s whole process ({own:.3} s its query) \
                         {answer}: saql / DuckDB query = {:.2}",
                        secs / own
                    );
                }
                println!();
            }
            Err(_) => println!("; DuckDB: set SAQL_BENCH_DUCKDB to a Python with duckdb"),
        }
    }

    // Backfill against live.
    if !section("backfill") {
        return Ok(ok);
    }
    let mut live_times = Vec::new();
    let mut live_rows = 0;
    for _ in 0..runs {
        let live = open(None, "off")?;
        futures::executor::block_on(
            live.execute(&format!("CREATE CONTINUOUS QUERY w AS {WINDOWS}")),
        )?;
        let Some(StatementResult::Subscribe(sub)) =
            futures::executor::block_on(live.execute("SUBSCRIBE w"))?.pop()
        else {
            return Err("no subscription".into());
        };
        let mut events = sub.events;
        let mut rows = 0;
        let start = Instant::now();
        for b in &input {
            live.insert_batch("s", b.clone())?;
            drain(&mut events, |b| {
                rows += b.num_rows();
                Ok::<_, Box<dyn Error>>(())
            })?;
        }
        live_times.push(start.elapsed().as_secs_f64());
        live_rows = rows;
    }
    let mut backfill_times = Vec::new();
    for run in 0..runs {
        let start = Instant::now();
        futures::executor::block_on(engine.execute(&format!(
            "CREATE CONTINUOUS QUERY b{run} WITH (start = {}) AS {WINDOWS}",
            saql::sql::timestamp_literal(T0)
        )))?;
        backfill_times.push(start.elapsed().as_secs_f64());
    }
    let backfilled_rows = common::query_stats(&engine)?
        .get("b0")
        .map_or(-1, |q| q.rows_out);
    let same = backfilled_rows == live_rows as i64;
    ok &= same;
    let (live, backfill) = (
        median(live_times.into_iter()),
        median(backfill_times.into_iter()),
    );
    println!(
        "TUMBLE live (no data dir): {:>8.3} s {:>12} events/s, {} windows",
        live,
        thousands((n as f64 / live) as u64),
        thousands(live_rows as u64)
    );
    println!(
        "TUMBLE backfilled:         {:>8.3} s {:>12} events/s (backfill / live rate = {:.2}), {} windows{}",
        backfill,
        thousands((n as f64 / backfill) as u64),
        live / backfill,
        thousands(backfilled_rows.max(0) as u64),
        if same { "" } else { "  WRONG: not the live count" }
    );
    // The baseline: `saql run` of the same query over the same events as a CSV file
    // (the whole process: decode, engine, encode), the rate a user sees replaying a file.
    // At the end of its input `saql run` also closes the windows live ones keep open (those
    // the watermark, 5 s behind the newest event, has not passed).
    let (run_secs, run_rows) = saql_run(&input, runs)?;
    let same = run_rows == live_rows + open_windows(&input);
    ok &= same;
    println!(
        "TUMBLE by `saql run` (CSV): {:>7.3} s {:>12} events/s (backfill / saql run rate = {:.2}), {} windows{}",
        run_secs,
        thousands((n as f64 / run_secs) as u64),
        run_secs / backfill,
        thousands(run_rows as u64),
        if same { "" } else { "  WRONG: not the live count and the open windows" }
    );
    if let Some(rss) = peak_rss_mib() {
        println!("peak RSS {rss:.0} MiB");
    }
    Ok(ok)
}

/// The (host, minute) windows of `input` a live TUMBLE of one minute keeps open at its end:
/// those from the minute holding the watermark (the newest event less 5 s) on.
fn open_windows(input: &[RecordBatch]) -> usize {
    const MINUTE: i64 = 60_000_000_000;
    let times = |b: &RecordBatch| {
        b.column(0)
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>()
            .map(|t| t.values().to_vec())
            .unwrap_or_default()
    };
    let newest = input.iter().flat_map(times).max().unwrap_or(T0);
    let first_open = (newest - 5_000_000_000).div_euclid(MINUTE) * MINUTE;
    let mut open = std::collections::HashSet::new();
    for b in input {
        let Some(hosts) = b.column(1).as_any().downcast_ref::<StringArray>() else {
            continue;
        };
        for (r, t) in times(b).into_iter().enumerate() {
            if t >= first_open {
                open.insert((hosts.value(r).to_string(), t.div_euclid(MINUTE)));
            }
        }
    }
    open.len()
}

/// Writes `input` as a CSV file and runs the backfill's query over it with `saql run`
/// (release binary of this build), `runs` times: the median wall seconds and the number of
/// result rows.
fn saql_run(input: &[RecordBatch], runs: usize) -> BenchResult<(f64, usize)> {
    use std::io::Write;
    let dir = tempfile::tempdir()?;
    let csv = dir.path().join("s.csv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&csv)?);
    writeln!(out, "ts,host,n")?;
    for b in input {
        let ts = b
            .column(0)
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>();
        let host = b.column(1).as_any().downcast_ref::<StringArray>();
        let n = b.column(2).as_any().downcast_ref::<Int64Array>();
        let (Some(ts), Some(host), Some(n)) = (ts, host, n) else {
            return Err("unexpected column types".into());
        };
        for r in 0..b.num_rows() {
            let t = chrono::DateTime::from_timestamp_nanos(ts.value(r));
            writeln!(
                out,
                "{},{},{}",
                t.format("%Y-%m-%d %H:%M:%S%.3f"),
                host.value(r),
                n.value(r)
            )?;
        }
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    let sql = dir.path().join("q.sql");
    std::fs::write(
        &sql,
        format!(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, n BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);\n\
             CREATE CONTINUOUS QUERY w AS {WINDOWS};\n"
        ),
    )?;
    let result = dir.path().join("out");
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_saql"))
            .arg("run")
            .arg(&sql)
            .arg("--input")
            .arg(format!("s={}", csv.display()))
            .arg("--output")
            .arg(&result)
            .status()?;
        times.push(start.elapsed().as_secs_f64());
        if !status.success() {
            return Err(format!("saql run failed: {status}").into());
        }
    }
    // The output's lines less its header.
    let rows = std::fs::read_to_string(result.join("w.csv"))?
        .lines()
        .count()
        .saturating_sub(1);
    Ok((median(times.into_iter()), rows))
}

/// INSERT latency and rate with nothing else running, then while a query is backfilled over
/// the history of `input`; prints both, and whether every row went in.
fn live_during_backfill(input: &[RecordBatch]) -> BenchResult<bool> {
    const ROWS: i64 = 100;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    let engine = open(Some(dir.path()), "30 days")?;
    ingest(&engine, input)?;
    let n: i64 = input.iter().map(|b| b.num_rows() as i64).sum();
    rt.block_on(engine.execute(&format!("CREATE CONTINUOUS QUERY live AS {WINDOWS}")))?;
    // INSERTs one after another from event `next` on, until `until` says stop; each one's
    // latency in milliseconds.
    async fn inserts(
        engine: Engine,
        mut next: i64,
        until: impl Fn(usize) -> bool,
    ) -> Result<(Vec<f64>, f64, i64), saql::error::Error> {
        let mut latencies = Vec::new();
        let start = Instant::now();
        while !until(latencies.len()) {
            let values: Vec<String> = (next..next + ROWS)
                .map(|i| {
                    format!(
                        "({}, 'host-{}', {})",
                        saql::sql::timestamp_literal(T0 + i * 1_000_000),
                        common::mix(i as u64) % HOSTS as u64,
                        i % 1000
                    )
                })
                .collect();
            let sql = format!("INSERT INTO s VALUES {}", values.join(", "));
            let sent = Instant::now();
            engine.execute(&sql).await?;
            latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
            next += ROWS;
        }
        Ok((latencies, start.elapsed().as_secs_f64(), next))
    }
    let report = |what: &str, mut ms: Vec<f64>, secs: f64| {
        ms.sort_by(f64::total_cmp);
        println!(
            "INSERT of {ROWS} rows, {what}: {:>6} statements, median {:>7.2} ms, p99 {:>7.2} ms, \
             max {:>7.2} ms, {:>9} rows/s",
            ms.len(),
            common::percentile(&ms, 0.5),
            common::percentile(&ms, 0.99),
            ms.last().copied().unwrap_or(f64::NAN),
            thousands((ms.len() as f64 * ROWS as f64 / secs) as u64)
        );
    };
    // Each INSERT loop runs as a task on the runtime's workers, as a server session does.
    let alone = rt.block_on(rt.spawn(inserts(engine.clone(), n, |done| done >= 500)))??;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let backfill = {
        let (engine, done) = (engine.clone(), done.clone());
        rt.spawn(async move {
            let start = Instant::now();
            let created = engine
                .execute(&format!(
                    "CREATE CONTINUOUS QUERY back WITH (start = {}) AS {WINDOWS}",
                    saql::sql::timestamp_literal(T0)
                ))
                .await;
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            created.map(|_| start.elapsed().as_secs_f64())
        })
    };
    let finished = move |_: usize| done.load(std::sync::atomic::Ordering::Relaxed);
    let during = rt.block_on(rt.spawn(inserts(engine.clone(), alone.2, finished)))??;
    let next = during.2;
    let backfill_secs = rt.block_on(backfill)??;
    println!(
        "live ingest during a backfill: {} events of history, backfilled in {:.3} s",
        thousands(n as u64),
        backfill_secs
    );
    report("alone          ", alone.0, alone.1);
    report("during backfill", during.0, during.1);
    let total = rt.block_on(async {
        match engine.execute("SELECT count(*) FROM s").await?.remove(0) {
            StatementResult::Streaming { rows, .. } => rows.collect().await,
            StatementResult::Rows { batches, .. } => Ok(batches),
            _ => Err(saql::error::Error::Internal("no rows".into())),
        }
    })?;
    let counted = array_value_to_string(total[0].column(0), 0)?;
    let right = counted == next.to_string();
    if !right {
        println!("WRONG: the stream holds {counted} rows, {next} were inserted");
    }
    Ok(right)
}
