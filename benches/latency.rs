//! Alert latency over the Postgres wire protocol: how long after the row that closes a window
//! is sent does the window's result row reach a subscriber?
//!
//! `cargo bench --bench latency`. Each run starts the server in this process on `127.0.0.1:0`
//! (as `tests/server.rs` does), declares a stream and a one-second tumbling-window query, and
//! subscribes to it from one tokio-postgres connection (`SUBSCRIBE q`, rows streamed as they
//! are produced). A producer on a second connection sends the events with `COPY ... FROM STDIN`
//! in batches of `SAQL_BENCH_BATCH_ROWS` (1000) rows, each COPY awaited before the next: first
//! back to back for `SAQL_BENCH_PEAK_SECONDS` (3) to measure the peak rate, then on a fixed
//! schedule at half that peak (or `SAQL_BENCH_RATE` events/s) for `SAQL_BENCH_SECONDS` (10).
//! Both phases send the same batches, so they differ only in how busy the server is.
//! `SAQL_BENCH_RUNS` (3) runs, each with a fresh server.
//!
//! Event time is synthetic and in order: event `i` is at `START + i` milliseconds, so each
//! one-second window holds 1000 events, and with a zero watermark delay the window ending at
//! `START + k` seconds closes with event `1000 k`. Latency is the time from just before the
//! COPY data holding that event is sent (after the server's CopyInResponse) to the arrival of
//! the window's row at the subscriber (one process, one clock). Every window's row must arrive, once, with COUNT 1000 and the right
//! SUM; otherwise the bench prints `MISMATCH` and exits 1. The server is stopped at the end of
//! each run. See `benches/README.md` for the latest figures.

#![allow(
    clippy::disallowed_methods,
    reason = "a bench starts its own threads and tasks"
)]

mod common;

use common::{env_count, median, mix, percentile, run_on_tokio, thousands};

use std::collections::HashMap;
use std::error::Error;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, NaiveDateTime};
use futures::{SinkExt, StreamExt};
use saql::{Engine, EngineConfig};
use tokio::sync::oneshot;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

const STREAM_DDL: &str = "CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts
)";
const QUERY_DDL: &str = "CREATE CONTINUOUS QUERY q AS
  SELECT window_end, COUNT(*) AS n, SUM(amount) AS total
  FROM TUMBLE(events, ts, INTERVAL '1' SECOND)
  GROUP BY window_start, window_end";

const DEFAULT_RUNS: usize = 3;
const DEFAULT_SECONDS: usize = 10;
const DEFAULT_PEAK_SECONDS: usize = 3;
/// Rows per COPY.
const DEFAULT_BATCH_ROWS: usize = 1000;
/// Windows closed in the first second of a phase are not counted (connections and caches
/// warming up).
const WARM_UP: Duration = Duration::from_secs(1);

const EVENTS_PER_WINDOW: u64 = 1000;
const KEYS: u64 = 10_000;
const HOSTS: u64 = 100;
const OPS: [&str; 5] = ["read", "write", "open", "close", "connect"];
/// 2024-01-01 00:00:00 UTC, in milliseconds: windows start on whole seconds.
const START_MS: i64 = 1_704_067_200_000;

fn main() -> ExitCode {
    run_on_tokio(run(), "some alerts were missing or wrong (see above)")
}

async fn run() -> BenchResult<bool> {
    let runs = env_count("SAQL_BENCH_RUNS", DEFAULT_RUNS)?;
    let seconds = env_count("SAQL_BENCH_SECONDS", DEFAULT_SECONDS)?;
    let peak_seconds = env_count("SAQL_BENCH_PEAK_SECONDS", DEFAULT_PEAK_SECONDS)?;
    let batch_rows = env_count("SAQL_BENCH_BATCH_ROWS", DEFAULT_BATCH_ROWS)? as u64;
    let fixed_rate = match std::env::var("SAQL_BENCH_RATE") {
        Ok(_) => Some(env_count("SAQL_BENCH_RATE", 1)? as f64),
        Err(_) => None,
    };
    println!(
        "saql alert latency bench: {runs} runs; COPYs of {batch_rows} rows, per run \
         {peak_seconds} s back to back, then {seconds} s at {}\n",
        fixed_rate.map_or("half the peak rate".to_string(), |r| format!(
            "{r} events/s"
        )),
    );
    let mut all_right = true;
    let mut peaks = Vec::new();
    let mut fixed = Vec::new();
    for run in 1..=runs {
        let server = Server::start().await?;
        let result = one_run(&server, batch_rows, peak_seconds, seconds, fixed_rate).await;
        server.stop().await;
        let (peak, steady) = result?;
        for (name, phase) in [("flat out", &peak), ("fixed rate", &steady)] {
            println!(
                "run {run} {name:<10}: {:>9} events/s sent, {:>5} alerts, latency p50 {:>7.3} ms, \
                 p99 {:>7.3} ms, max {:>7.3} ms",
                thousands(phase.rate as u64),
                phase.latencies.len(),
                phase.percentile(0.50),
                phase.percentile(0.99),
                phase.percentile(1.0)
            );
            for p in &phase.problems {
                all_right = false;
                println!("MISMATCH run {run} {name}: {p}");
            }
        }
        peaks.push(peak);
        fixed.push(steady);
    }

    println!(
        "\n| phase | events/s sent | alerts per run | p50 ms | p99 ms | max ms | runs: p50 / p99 (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (name, phases) in [("flat out (peak)", &peaks), ("fixed rate", &fixed)] {
        let med = |f: &dyn Fn(&Phase) -> f64| median(phases.iter().map(f));
        let all: Vec<String> = phases
            .iter()
            .map(|p| format!("{:.3} / {:.3}", p.percentile(0.5), p.percentile(0.99)))
            .collect();
        println!(
            "| {name} | {} | {} | {:.3} | {:.3} | {:.3} | {} |",
            thousands(med(&|p| p.rate) as u64),
            med(&|p| p.latencies.len() as f64),
            med(&|p| p.percentile(0.5)),
            med(&|p| p.percentile(0.99)),
            med(&|p| p.percentile(1.0)),
            all.join(", ")
        );
    }
    Ok(all_right)
}

/// The server, in this process, on an ephemeral loopback port.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start() -> BenchResult<Server> {
        // As `saql serve` runs it: one worker per core unless SAQL_BENCH_WORKERS says otherwise.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let engine = Engine::open(EngineConfig {
            workers: env_count("SAQL_BENCH_WORKERS", cores)?,
            ..EngineConfig::default()
        })?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(saql::server::run(listener, engine, async {
            let _ = stopped.await;
        }));
        Ok(Server { addr, stop, task })
    }

    async fn connect(&self) -> BenchResult<(Client, tokio::task::JoinHandle<()>)> {
        let conn = format!(
            "host=127.0.0.1 port={} user=saql dbname=saql",
            self.addr.port()
        );
        let (client, connection) = tokio_postgres::connect(&conn, NoTls).await?;
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((client, task))
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// What one phase of a run measured.
struct Phase {
    /// Events per second the producer achieved.
    rate: f64,
    /// Milliseconds, sorted.
    latencies: Vec<f64>,
    problems: Vec<String>,
}

impl Phase {
    fn percentile(&self, q: f64) -> f64 {
        percentile(&self.latencies, q)
    }
}

/// Window end (ms) -> when the COPY holding its closing event was sent.
type SentTimes = Arc<Mutex<HashMap<i64, Instant>>>;
/// Window end (ms) -> when its row arrived, with its COUNT and SUM.
type Arrivals = Arc<Mutex<HashMap<i64, Vec<(Instant, u64, i64)>>>>;

async fn one_run(
    server: &Server,
    batch_rows: u64,
    peak_seconds: usize,
    seconds: usize,
    fixed_rate: Option<f64>,
) -> BenchResult<(Phase, Phase)> {
    let (producer, producer_task) = server.connect().await?;
    producer.batch_execute(STREAM_DDL).await?;
    producer.batch_execute(QUERY_DDL).await?;

    let (subscriber, subscriber_task) = server.connect().await?;
    let arrivals: Arrivals = Arc::default();
    let feed = {
        let arrivals = arrivals.clone();
        tokio::spawn(async move { read_alerts(subscriber, arrivals).await })
    };
    await_subscriber(&producer).await?;

    let sent: SentTimes = Arc::default();
    let mut producer = Producer {
        client: producer,
        next_event: 0,
        sent: sent.clone(),
    };
    let mut amounts = Amounts::default();

    // Flat out: back-to-back COPYs.
    let phase_start = Instant::now();
    let first_event = producer.next_event;
    while phase_start.elapsed() < Duration::from_secs(peak_seconds as u64) {
        producer.send(batch_rows, &mut amounts).await?;
    }
    let peak_rate =
        (producer.next_event - first_event) as f64 / phase_start.elapsed().as_secs_f64();
    let peak_windows = (first_event, producer.next_event, phase_start);

    // Fixed rate: the same COPYs on an absolute schedule (one that falls behind catches up).
    let rate = fixed_rate.unwrap_or(peak_rate / 2.0);
    let interval = Duration::from_secs_f64(batch_rows as f64 / rate);
    let phase_start = Instant::now();
    let first_fixed = producer.next_event;
    let batches = (seconds as f64 * rate / batch_rows as f64).ceil() as u32;
    for batch in 0..batches {
        tokio::time::sleep_until((phase_start + interval * batch).into()).await;
        producer.send(batch_rows, &mut amounts).await?;
    }
    let fixed_rate_achieved =
        (producer.next_event - first_fixed) as f64 / phase_start.elapsed().as_secs_f64();
    let fixed_windows = (first_fixed, producer.next_event, phase_start);

    // Let the last alerts arrive, then stop reading.
    let last_window_end = window_end_ms((producer.next_event - 1) / EVENTS_PER_WINDOW);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if arrivals.lock().unwrap().contains_key(&last_window_end) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    feed.abort();
    subscriber_task.abort();
    drop(producer);
    producer_task.abort();

    let sent = sent.lock().unwrap().clone();
    let arrivals = arrivals.lock().unwrap().clone();
    let phase = |(first, end, start): (u64, u64, Instant), rate: f64| {
        measure(first, end, start, rate, &sent, &arrivals, &amounts)
    };
    Ok((
        phase(peak_windows, peak_rate),
        phase(fixed_windows, fixed_rate_achieved),
    ))
}

/// Latencies of the windows closed by events `first..end`, skipping those closed within
/// [`WARM_UP`] of `start`, and what is wrong with their alerts.
fn measure(
    first: u64,
    end: u64,
    start: Instant,
    rate: f64,
    sent: &HashMap<i64, Instant>,
    arrivals: &HashMap<i64, Vec<(Instant, u64, i64)>>,
    amounts: &Amounts,
) -> Phase {
    let mut latencies = Vec::new();
    let mut problems = Vec::new();
    for k in first.div_ceil(EVENTS_PER_WINDOW).max(1)..=(end.saturating_sub(1) / EVENTS_PER_WINDOW)
    {
        let window_end = window_end_ms(k);
        let Some(&sent_at) = sent.get(&window_end) else {
            problems.push(format!("no send time for the window ending {window_end}"));
            continue;
        };
        let rows = arrivals.get(&window_end).map(Vec::as_slice).unwrap_or(&[]);
        let [(arrived, count, sum)] = rows else {
            problems.push(format!(
                "{} rows for the window ending at {} ms after the epoch, expected 1",
                rows.len(),
                window_end
            ));
            continue;
        };
        let want_sum = amounts.window(k - 1);
        if *count != EVENTS_PER_WINDOW || *sum != want_sum {
            problems.push(format!(
                "window ending {window_end}: COUNT {count} SUM {sum}, expected \
                 {EVENTS_PER_WINDOW} and {want_sum}"
            ));
        }
        if sent_at.duration_since(start) >= WARM_UP {
            latencies.push(arrived.duration_since(sent_at).as_secs_f64() * 1000.0);
        }
    }
    latencies.sort_by(f64::total_cmp);
    Phase {
        rate,
        latencies,
        problems,
    }
}

/// Sends events with COPY and notes when each window-closing event went out.
struct Producer {
    client: Client,
    next_event: u64,
    sent: SentTimes,
}

impl Producer {
    /// Sends the next `rows` events as one `COPY events FROM STDIN` and waits for it to
    /// complete.
    async fn send(&mut self, rows: u64, amounts: &mut Amounts) -> BenchResult<()> {
        let first = self.next_event;
        let end = first + rows;
        let mut text = String::with_capacity(rows as usize * 48);
        for i in first..end {
            let amount = amounts.push(i);
            let ts = timestamp_text(START_MS + i as i64);
            let h = mix(i);
            text.push_str(&format!(
                "{ts},{},host-{:02},{},{amount}\n",
                h % KEYS,
                (h >> 20) % HOSTS,
                OPS[((h >> 40) % OPS.len() as u64) as usize]
            ));
        }
        let sink = self
            .client
            .copy_in::<_, Bytes>("COPY events FROM STDIN WITH (FORMAT csv)")
            .await?;
        let sent_at = Instant::now();
        {
            let mut sent = self.sent.lock().unwrap();
            // Event 1000 k closes the window ending at START + k seconds.
            for k in first.div_ceil(EVENTS_PER_WINDOW).max(1)..=(end - 1) / EVENTS_PER_WINDOW {
                sent.insert(window_end_ms(k), sent_at);
            }
        }
        futures::pin_mut!(sink);
        sink.send(Bytes::from(text)).await?;
        let n = sink.finish().await?;
        if n != rows {
            return Err(format!("COPY stored {n} rows, sent {rows}").into());
        }
        self.next_event = end;
        Ok(())
    }
}

/// The amounts sent, summed per window, to check the alerts' SUM.
#[derive(Default)]
struct Amounts {
    per_window: Vec<i64>,
}

impl Amounts {
    /// The amount of event `i`, noted in its window.
    fn push(&mut self, i: u64) -> i64 {
        let amount = (mix(i ^ 0x9e37_79b9) % 10_000) as i64;
        let w = (i / EVENTS_PER_WINDOW) as usize;
        if self.per_window.len() <= w {
            self.per_window.resize(w + 1, 0);
        }
        self.per_window[w] += amount;
        amount
    }

    /// Total amount of window `w` (events `1000 w .. 1000 (w + 1)`).
    fn window(&self, w: u64) -> i64 {
        self.per_window.get(w as usize).copied().unwrap_or(0)
    }
}

/// Reads the subscription's rows, noting when each arrived.
async fn read_alerts(subscriber: Client, arrivals: Arrivals) -> BenchResult<()> {
    let feed = subscriber.simple_query_raw("SUBSCRIBE q").await?;
    futures::pin_mut!(feed);
    while let Some(msg) = feed.next().await {
        let at = Instant::now();
        if let SimpleQueryMessage::Row(row) = msg? {
            let end = row.get(0).ok_or("window_end is NULL")?;
            let end = NaiveDateTime::parse_from_str(end, "%Y-%m-%d %H:%M:%S%.f")?
                .and_utc()
                .timestamp_millis();
            let count: u64 = row.get(1).ok_or("COUNT is NULL")?.parse()?;
            let sum: i64 = row.get(2).ok_or("SUM is NULL")?.parse()?;
            arrivals
                .lock()
                .unwrap()
                .entry(end)
                .or_default()
                .push((at, count, sum));
        }
    }
    Ok(())
}

/// Waits until SHOW QUERIES lists the subscriber.
async fn await_subscriber(client: &Client) -> BenchResult<()> {
    for _ in 0..200 {
        for msg in client.simple_query("SHOW QUERIES").await? {
            if let SimpleQueryMessage::Row(r) = msg {
                if r.get("subscribers") == Some("1") {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err("the subscriber did not show up in SHOW QUERIES within 4 s".into())
}

fn window_end_ms(k: u64) -> i64 {
    START_MS + (k * EVENTS_PER_WINDOW) as i64
}

fn timestamp_text(ms: i64) -> String {
    match DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        None => String::new(),
    }
}
