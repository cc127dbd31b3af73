//! From Kafka to alerts: how many JSON events per second a Kafka source turns into alerts on
//! one core, next to the same events sent with COPY over the wire, and how long an event
//! produced to Kafka takes to reach a `SUBSCRIBE`.
//!
//! `cargo bench --bench kafka`. A Tansu broker (Kafka-compatible, installed by
//! `tests/kafka/setup.sh`) runs on 127.0.0.1; the bench produces `SAQL_BENCH_EVENTS` JSON
//! events to one partition before any timing. Each run starts the server in this process on
//! `127.0.0.1:0` with `workers = 1` (as `benches/latency.rs` does), declares the stream and a
//! filter query whose rows are the alerts (`op = 'write' AND amount > 9900`, ~0.2% of the
//! events), subscribes to it from a tokio-postgres connection, then:
//!
//! - **kafka**: `CREATE SOURCE ... FROM KAFKA (format = 'json')` reading the partition from its
//!   start; timed from the CREATE SOURCE until `SHOW SOURCES` counts every event.
//! - **copy**: the same events as CSV in one `COPY events FROM STDIN (FORMAT csv)`; timed from
//!   the COPY to its CommandComplete.
//! - **latency**: a source reading from the end of a second topic while the bench produces
//!   `SAQL_BENCH_RATE` (10,000) events/s for `SAQL_BENCH_SECONDS` (5) s in produce calls every
//!   10 ms, every 10th of them an alert; latency = from just before the produce call holding
//!   an alert to the alert's row at the subscriber (one process, one clock).
//!
//! Every alert must reach the subscriber exactly once (by its `key`); otherwise `MISMATCH`
//! and exit 1. CPU seconds of this process (the server, the source thread and the clients;
//! not the broker) are read from `/proc/self/stat` around each timed phase.

#![allow(
    clippy::disallowed_methods,
    reason = "a bench starts its own threads and tasks"
)]

#[path = "../tests/kafka/broker.rs"]
mod broker;
mod common;

use common::{env_count, median, mix, percentile, run_on_tokio, thousands};

use std::collections::BTreeMap;
use std::error::Error;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use saql::{Engine, EngineConfig};
use tokio::sync::oneshot;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

const STREAM_DDL: &str = "CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
)";
const QUERY_DDL: &str = "CREATE CONTINUOUS QUERY q AS
  SELECT key, host, amount FROM events WHERE op = 'write' AND amount > 9900";
const OPS: [&str; 5] = ["read", "write", "open", "close", "connect"];
/// 2024-01-01 00:00:00 UTC, in milliseconds.
const START_MS: i64 = 1_704_067_200_000;
/// Records per produce call while loading the topic.
const PRODUCE_CHUNK: usize = 5_000;

fn main() -> ExitCode {
    run_on_tokio(
        run(),
        "some alerts were missing, doubled or wrong (see above)",
    )
}

/// Event `i`: its values, as a JSON object and as a CSV line.
struct Event {
    ts: String,
    key: u64,
    host: String,
    op: &'static str,
    amount: u64,
}

impl Event {
    fn new(i: u64) -> Event {
        let h = mix(i);
        let ms = START_MS + i as i64;
        let ts = chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
            .unwrap_or_default();
        Event {
            ts,
            key: i,
            host: format!("host-{:02}", (h >> 20) % 100),
            op: OPS[((h >> 40) % OPS.len() as u64) as usize],
            amount: mix(i ^ 0x9e37_79b9) % 10_000,
        }
    }

    /// An event that is an alert.
    fn alert(i: u64) -> Event {
        Event {
            op: "write",
            amount: 9_999,
            ..Event::new(i)
        }
    }

    fn is_alert(&self) -> bool {
        self.op == "write" && self.amount > 9900
    }

    fn json(&self) -> Vec<u8> {
        format!(
            "{{\"ts\":\"{}\",\"key\":{},\"host\":\"{}\",\"op\":\"{}\",\"amount\":{}}}",
            self.ts, self.key, self.host, self.op, self.amount
        )
        .into_bytes()
    }

    fn csv(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(
            out,
            "{},{},{},{},{}",
            self.ts, self.key, self.host, self.op, self.amount
        );
    }
}

async fn run() -> BenchResult<bool> {
    let events = env_count("SAQL_BENCH_EVENTS", 2_000_000)? as u64;
    let runs = env_count("SAQL_BENCH_RUNS", 3)?;
    let rate = env_count("SAQL_BENCH_RATE", 10_000)? as u64;
    let seconds = env_count("SAQL_BENCH_SECONDS", 5)? as u64;
    let Some(broker) = broker::start("events", 1).await else {
        return Err("no tansu binary: run tests/kafka/setup.sh or set SAQL_TANSU".into());
    };
    let client = ClientBuilder::new(vec![broker.brokers.clone()])
        .build()
        .await?;
    client
        .controller_client()?
        .create_topic("live", 1, 1, 5_000)
        .await?;
    let topic = client
        .partition_client("events", 0, UnknownTopicHandling::Retry)
        .await?;
    let live = client
        .partition_client("live", 0, UnknownTopicHandling::Retry)
        .await?;

    println!("saql Kafka bench: {events} JSON events, {runs} runs; latency at {rate} events/s");
    let loading = Instant::now();
    let (alerts, json_bytes, csv) = load_topic(&topic, events).await?;
    println!(
        "loaded the topic in {:.1} s ({} alerts, {:.0} MB of JSON, {:.0} bytes an event)\n",
        loading.elapsed().as_secs_f64(),
        thousands(alerts),
        json_bytes as f64 / 1e6,
        json_bytes as f64 / events as f64
    );

    let mut all_right = true;
    let mut kafka = Vec::new();
    let mut copy = Vec::new();
    let mut latency = Vec::new();
    let mut next_live = 0;
    for run in 1..=runs {
        let k = timed_source(&broker.brokers, events, alerts).await?;
        let c = timed_copy(&csv, events, alerts).await?;
        let l = live_latency(&broker.brokers, &live, &mut next_live, rate, seconds).await?;
        for (name, t) in [("kafka", &k), ("copy", &c)] {
            println!(
                "run {run} {name:<5}: {:.3} s, {:>10} events/s, {:.2} CPU s ({:>10} events per \
                 CPU s), {} alerts",
                t.seconds,
                thousands((events as f64 / t.seconds) as u64),
                t.cpu,
                thousands((events as f64 / t.cpu) as u64),
                t.alerts
            );
        }
        println!(
            "run {run} latency: {} alerts, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            l.latencies.len(),
            l.percentile(0.5),
            l.percentile(0.99),
            l.percentile(1.0)
        );
        for p in k.problems.iter().chain(&c.problems).chain(&l.problems) {
            all_right = false;
            println!("MISMATCH run {run}: {p}");
        }
        kafka.push(k);
        copy.push(c);
        latency.push(l);
    }
    print_tables(events, &kafka, &copy, &latency);
    Ok(all_right)
}

/// Produces `events` events to `topic`; returns the number of alerts among them, the JSON
/// bytes and the same events as CSV.
async fn load_topic(topic: &PartitionClient, events: u64) -> BenchResult<(u64, u64, String)> {
    let mut alerts = 0;
    let mut bytes = 0;
    let mut csv = String::with_capacity(events as usize * 50);
    let mut i = 0;
    while i < events {
        let end = (i + PRODUCE_CHUNK as u64).min(events);
        let mut records = Vec::with_capacity(PRODUCE_CHUNK);
        for j in i..end {
            let e = Event::new(j);
            alerts += e.is_alert() as u64;
            e.csv(&mut csv);
            let value = e.json();
            bytes += value.len() as u64;
            records.push(record(value));
        }
        topic.produce(records, Compression::NoCompression).await?;
        i = end;
    }
    Ok((alerts, bytes, csv))
}

fn record(value: Vec<u8>) -> Record {
    Record {
        key: None,
        value: Some(value),
        headers: BTreeMap::new(),
        timestamp: chrono::Utc::now(),
    }
}

/// One timed phase of a run.
struct Timed {
    seconds: f64,
    cpu: f64,
    alerts: u64,
    problems: Vec<String>,
}

/// The server, in this process, on an ephemeral loopback port, with a subscriber to `q`
/// counting the alerts by key.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    client: Client,
    /// key -> (times seen, when last seen).
    seen: Arc<Mutex<BTreeMap<u64, (u32, Instant)>>>,
}

impl Server {
    async fn start() -> BenchResult<Server> {
        let engine = Engine::open(EngineConfig {
            workers: 1,
            ..EngineConfig::default()
        })?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(saql::server::run(listener, engine, async {
            let _ = stopped.await;
        }));
        let client = connect(addr).await?;
        client.batch_execute(STREAM_DDL).await?;
        client.batch_execute(QUERY_DDL).await?;
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let subscriber = connect(addr).await?;
        tokio::spawn(read_alerts(subscriber, seen.clone()));
        let server = Server {
            addr,
            stop,
            task,
            client,
            seen,
        };
        server.await_subscriber().await?;
        Ok(server)
    }

    async fn await_subscriber(&self) -> BenchResult<()> {
        for _ in 0..200 {
            if self.show("SHOW QUERIES", "subscribers").await? == "1" {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err("the subscriber did not show up in SHOW QUERIES within 4 s".into())
    }

    /// `column` of the first row of `show`.
    async fn show(&self, show: &str, column: &str) -> BenchResult<String> {
        for msg in self.client.simple_query(show).await? {
            if let SimpleQueryMessage::Row(r) = msg {
                return Ok(r.get(column).unwrap_or("").to_string());
            }
        }
        Ok(String::new())
    }

    /// Waits until the subscriber saw `alerts` alerts (30 s at most); then checks that each
    /// was seen once.
    async fn await_alerts(&self, alerts: u64) -> Vec<String> {
        for _ in 0..3000 {
            if self.seen.lock().unwrap().len() as u64 >= alerts {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let seen = self.seen.lock().unwrap();
        let mut problems = Vec::new();
        if seen.len() as u64 != alerts {
            problems.push(format!("{} alerts arrived, expected {alerts}", seen.len()));
        }
        let doubled = seen.values().filter(|(n, _)| *n > 1).count();
        if doubled > 0 {
            problems.push(format!("{doubled} alerts arrived more than once"));
        }
        problems
    }

    /// A timed phase's result, once the `alerts` expected arrived; stops the server.
    async fn finish(self, seconds: f64, cpu: f64, alerts: u64, mut problems: Vec<String>) -> Timed {
        problems.extend(self.await_alerts(alerts).await);
        let seen = self.seen.lock().unwrap().len() as u64;
        self.stop().await;
        Timed {
            seconds,
            cpu,
            alerts: seen,
            problems,
        }
    }

    async fn stop(self) {
        drop(self.client);
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

async fn connect(addr: SocketAddr) -> BenchResult<Client> {
    let conn = format!("host=127.0.0.1 port={} user=saql dbname=saql", addr.port());
    let (client, connection) = tokio_postgres::connect(&conn, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Reads the subscription's rows, noting each key and when it arrived.
async fn read_alerts(
    subscriber: Client,
    seen: Arc<Mutex<BTreeMap<u64, (u32, Instant)>>>,
) -> BenchResult<()> {
    let feed = subscriber.simple_query_raw("SUBSCRIBE q").await?;
    futures::pin_mut!(feed);
    while let Some(msg) = feed.next().await {
        let at = Instant::now();
        if let SimpleQueryMessage::Row(row) = msg? {
            let key: u64 = row.get(0).ok_or("key is NULL")?.parse()?;
            let mut seen = seen.lock().unwrap();
            let entry = seen.entry(key).or_insert((0, at));
            entry.0 += 1;
        }
    }
    Ok(())
}

/// A Kafka source reading the loaded topic from its start, timed until it counted every
/// event.
async fn timed_source(brokers: &str, events: u64, alerts: u64) -> BenchResult<Timed> {
    let server = Server::start().await?;
    let (start, cpu) = (Instant::now(), cpu_seconds());
    server
        .client
        .batch_execute(&format!(
            "CREATE SOURCE k FROM KAFKA (brokers = '{brokers}', topic = 'events', \
             format = 'json', poll_interval_ms = '10') INTO STREAM events"
        ))
        .await?;
    let mut problems = Vec::new();
    loop {
        let rows = server.show("SHOW SOURCES", "rows").await?;
        if rows == events.to_string() {
            break;
        }
        if start.elapsed() > Duration::from_secs(600) {
            problems.push(format!(
                "the source read {rows} of {events} events in 600 s"
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (seconds, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let bad = server.show("SHOW SOURCES", "bad_records").await?;
    if bad != "0" {
        problems.push(format!("{bad} bad records"));
    }
    Ok(server.finish(seconds, cpu, alerts, problems).await)
}

/// The same events as one COPY over the wire.
async fn timed_copy(csv: &str, events: u64, alerts: u64) -> BenchResult<Timed> {
    let server = Server::start().await?;
    let producer = connect(server.addr).await?;
    let (start, cpu) = (Instant::now(), cpu_seconds());
    let sink = producer
        .copy_in::<_, Bytes>("COPY events FROM STDIN WITH (FORMAT csv)")
        .await?;
    futures::pin_mut!(sink);
    let bytes = csv.as_bytes();
    for chunk in bytes.chunks(1 << 20) {
        sink.send(Bytes::copy_from_slice(chunk)).await?;
    }
    let n = sink.finish().await?;
    let (seconds, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let mut problems = Vec::new();
    if n != events {
        problems.push(format!("COPY stored {n} rows, sent {events}"));
    }
    Ok(server.finish(seconds, cpu, alerts, problems).await)
}

/// What the latency phase of a run measured.
struct Latency {
    /// Milliseconds, sorted.
    latencies: Vec<f64>,
    problems: Vec<String>,
}

impl Latency {
    fn percentile(&self, q: f64) -> f64 {
        percentile(&self.latencies, q)
    }
}

/// Produces `rate` events/s to the `live` topic for `seconds`, every 10th an alert, while a
/// source reads it from its end; the latency of each alert from its produce call to the
/// subscriber.
async fn live_latency(
    brokers: &str,
    live: &PartitionClient,
    next: &mut u64,
    rate: u64,
    seconds: u64,
) -> BenchResult<Latency> {
    let server = Server::start().await?;
    server
        .client
        .batch_execute(&format!(
            "CREATE SOURCE k FROM KAFKA (brokers = '{brokers}', topic = 'live', \
             format = 'json', start = 'end') INTO STREAM events"
        ))
        .await?;
    for _ in 0..500 {
        if server.show("SHOW SOURCES", "state").await? == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let per_tick = (rate / 100).max(1);
    let mut sent: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let start = Instant::now();
    // Event keys go on across runs (one topic): each run's alerts are its own.
    while start.elapsed() < Duration::from_secs(seconds) {
        tick.tick().await;
        let mut records = Vec::with_capacity(per_tick as usize);
        let mut alerts = Vec::new();
        for _ in 0..per_tick {
            let i = *next;
            *next += 1;
            let e = if i.is_multiple_of(10) {
                alerts.push(i);
                Event::alert(i)
            } else {
                Event {
                    amount: 1,
                    ..Event::new(i)
                }
            };
            records.push(record(e.json()));
        }
        let at = Instant::now();
        live.produce(records, Compression::NoCompression).await?;
        sent.extend(alerts.into_iter().map(|k| (k, at)));
    }
    let first = sent.keys().next().copied().unwrap_or(0);
    // Tansu 0.6 answers ListOffsets(latest) with one past the first offset of the last
    // record batch, so a source with start = 'end' reads that batch's other records: noted,
    // and left out of the count.
    let older = server.seen.lock().unwrap().range(..first).count() as u64;
    let mut problems = server.await_alerts(sent.len() as u64 + older).await;
    let seen = server.seen.lock().unwrap().clone();
    server.stop().await;
    let mut latencies = Vec::new();
    for (key, at) in &sent {
        match seen.get(key) {
            Some((_, arrived)) => {
                latencies.push(arrived.saturating_duration_since(*at).as_secs_f64() * 1e3)
            }
            None => problems.push(format!("alert {key} never arrived")),
        }
    }
    problems.truncate(5);
    let older: Vec<u64> = seen.keys().copied().filter(|k| *k < first).collect();
    if let (Some(a), Some(b)) = (older.first(), older.last()) {
        println!(
            "note: {} alerts produced before the source was created (start = 'end') were \
             read: keys {a}..={b}, this run's first key {first}",
            older.len()
        );
    }
    latencies.sort_by(f64::total_cmp);
    Ok(Latency {
        latencies,
        problems,
    })
}

fn print_tables(events: u64, kafka: &[Timed], copy: &[Timed], latency: &[Latency]) {
    println!(
        "\n| path | events | median s | events/s | CPU s (this process) | events per CPU s | all runs (s) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (name, runs) in [
        ("Kafka source (JSON), 1 partition", kafka),
        ("COPY over the wire (CSV)", copy),
    ] {
        let secs = median(runs.iter().map(|t| t.seconds));
        let cpu = median(runs.iter().map(|t| t.cpu));
        let all: Vec<String> = runs.iter().map(|t| format!("{:.3}", t.seconds)).collect();
        println!(
            "| {name} | {} | {secs:.3} | {} | {cpu:.2} | {} | {} |",
            thousands(events),
            thousands((events as f64 / secs) as u64),
            thousands((events as f64 / cpu) as u64),
            all.join(", ")
        );
    }
    println!("\n| Kafka to SUBSCRIBE | alerts per run | p50 ms | p99 ms | max ms | runs: p50 / p99 (ms) |");
    println!("|---|---:|---:|---:|---:|---|");
    let med = |f: &dyn Fn(&Latency) -> f64| median(latency.iter().map(f));
    let all: Vec<String> = latency
        .iter()
        .map(|l| format!("{:.1} / {:.1}", l.percentile(0.5), l.percentile(0.99)))
        .collect();
    println!(
        "| latency | {} | {:.1} | {:.1} | {:.1} | {} |",
        med(&|l| l.latencies.len() as f64),
        med(&|l| l.percentile(0.5)),
        med(&|l| l.percentile(0.99)),
        med(&|l| l.percentile(1.0)),
        all.join(", ")
    );
}

/// CPU seconds (user + system) this process used so far, from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the command name (which is in parentheses): utime is the 14th field.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return f64::NAN;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        // Linux reports in clock ticks of 1/100 s (USER_HZ).
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}
