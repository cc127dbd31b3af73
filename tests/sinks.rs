#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]
#![cfg(feature = "server")]
//! Sinks against the real server on 127.0.0.1: a webhook receiver inside the test fails the
//! first requests with 500 (the sink retries), stops answering while the real binary is
//! killed with `kill -9` and restarted, and in the end holds every result of the query once
//! per seq, exactly as `SUBSCRIBE q FROM 0 WITH SEQ` gives them; SHOW SINKS and /metrics
//! agree on the counters. A PostgreSQL sink writes into a real PostgreSQL started by the test
//! (skipped when Debian's postgresql is not installed), a Kafka sink into a real Tansu broker
//! (skipped without it). Catalog rules (unknown query, DROP QUERY under a sink, CASCADE) run
//! on an in-process engine.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;
#[cfg(feature = "kafka")]
use crate::broker;

use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use binary::{connect, free_addr, show_row, start_saql, Process};

/// saql with its metrics on `metrics` and JSON logs.
fn start(dir: &Path, addr: SocketAddr, metrics: SocketAddr) -> Process {
    let metrics = metrics.to_string();
    start_saql(
        dir,
        addr,
        &["--metrics-listen", &metrics, "--log-format", "json"],
    )
}

async fn sink_row(client: &Client, name: &str) -> BTreeMap<String, String> {
    show_row(client, "SHOW SINKS", name).await
}

const SETUP: &str = "
    CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, n BIGINT, WATERMARK FOR ts AS ts);
    CREATE CONTINUOUS QUERY q AS SELECT host, n, ts FROM s WHERE n % 3 <> 0;";

/// Inserts events `range` in INSERTs of 10 rows.
async fn insert(client: &Client, range: std::ops::Range<u64>) {
    let rows: Vec<u64> = range.collect();
    for chunk in rows.chunks(10) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| {
                format!(
                    "('2024-01-01 00:{:02}:{:02}', 'h{}', {i})",
                    i / 60 % 60,
                    i % 60,
                    i % 4
                )
            })
            .collect();
        client
            .batch_execute(&format!("INSERT INTO s VALUES {}", values.join(", ")))
            .await
            .unwrap();
    }
}

/// How many of the events `0..n` the query keeps.
fn results_of(n: u64) -> u64 {
    (0..n).filter(|i| i % 3 != 0).count() as u64
}

/// The query's results as SUBSCRIBE sees them (on a connection of its own, which the
/// subscription keeps busy): seq to (host, n).
async fn subscribed(addr: SocketAddr, count: u64) -> BTreeMap<u64, (String, i64)> {
    let client = connect(addr).await;
    let feed = client
        .simple_query_raw("SUBSCRIBE q FROM 0 WITH SEQ")
        .await
        .unwrap();
    futures::pin_mut!(feed);
    let mut out = BTreeMap::new();
    while (out.len() as u64) < count {
        let msg = tokio::time::timeout(Duration::from_secs(30), feed.next())
            .await
            .expect("rows arrive")
            .unwrap()
            .unwrap();
        if let SimpleQueryMessage::Row(r) = msg {
            let seq = r.get(0).unwrap().parse().unwrap();
            let host = r.get(1).unwrap().to_string();
            out.insert(seq, (host, r.get(2).unwrap().parse().unwrap()));
        }
    }
    out
}

/// Rows received by seq; a seq received again must come with the same row.
#[derive(Default)]
struct Received {
    rows: BTreeMap<u64, Value>,
    duplicates: usize,
}

impl Received {
    fn add(&mut self, row: Value) {
        let seq = row["seq"].as_u64().expect("every row has a seq");
        if let Some(before) = self.rows.insert(seq, row.clone()) {
            assert_eq!(before, row, "seq {seq} delivered twice with different rows");
            self.duplicates += 1;
        }
    }

    fn pairs(&self) -> BTreeMap<u64, (String, i64)> {
        self.rows
            .iter()
            .map(|(s, r)| {
                let host = r["host"].as_str().unwrap().to_string();
                (*s, (host, r["n"].as_i64().unwrap()))
            })
            .collect()
    }
}

/// A webhook receiver on 127.0.0.1: answers 500 to its first `fail_first` requests and to
/// every request while `down` is set, 200 otherwise, recording the rows of each 200.
struct Receiver {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
    received: Arc<Mutex<Received>>,
}

async fn receiver(fail_first: usize) -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let r = Receiver {
        addr: listener.local_addr().unwrap(),
        requests: Arc::new(AtomicUsize::new(0)),
        down: Arc::new(AtomicBool::new(false)),
        received: Arc::new(Mutex::new(Received::default())),
    };
    let (requests, down, received) = (r.requests.clone(), r.down.clone(), r.received.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let (requests, down, received) = (requests.clone(), down.clone(), received.clone());
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 8192];
                let head_end = loop {
                    if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&data[..head_end]).to_lowercase();
                assert!(head.starts_with("post /alerts?x=1 http/1.1\r\n"), "{head}");
                let header = |name: &str| {
                    head.lines()
                        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                        .map(str::to_string)
                };
                let length: usize = header("content-length").unwrap().parse().unwrap();
                assert_eq!(header("content-type").as_deref(), Some("application/json"));
                while data.len() < head_end + length {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                }
                let n = requests.fetch_add(1, Ordering::SeqCst);
                let fail = n < fail_first || down.load(Ordering::SeqCst);
                if !fail {
                    let body: Value = serde_json::from_slice(&data[head_end..]).unwrap();
                    let rows = body.as_array().expect("a JSON array").clone();
                    let key = format!("{}-{}", rows[0]["seq"], rows[rows.len() - 1]["seq"]);
                    assert_eq!(header("idempotency-key"), Some(key));
                    assert!(rows.len() <= 4, "batch_size is 4");
                    let mut got = received.lock().unwrap();
                    for row in rows {
                        got.add(row);
                    }
                }
                let status = if fail {
                    "500 Internal Server Error"
                } else {
                    "200 OK"
                };
                let answer =
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    r
}

impl Receiver {
    async fn await_seqs(&self, count: u64) {
        for _ in 0..1200 {
            {
                let got = self.received.lock().unwrap();
                if got.rows.len() as u64 >= count {
                    assert_eq!(
                        got.rows.keys().copied().collect::<Vec<_>>(),
                        (1..=count).collect::<Vec<_>>()
                    );
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let got = self.received.lock().unwrap();
        panic!(
            "the receiver got {} of {count} rows: {:?}",
            got.rows.len(),
            got.rows.keys().collect::<Vec<_>>()
        );
    }
}

/// `name{labels}` to value for the families starting with `prefix`.
fn scrape(addr: SocketAddr, prefix: &str) -> BTreeMap<String, f64> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_gets_every_result_in_order_across_500s_and_a_kill_9() {
    let hook = receiver(3).await;
    let dir = tempfile::tempdir().unwrap();
    let (addr, maddr) = (free_addr(), free_addr());
    let mut saql = start(dir.path(), addr, maddr);
    let client = connect(addr).await;
    client.batch_execute(SETUP).await.unwrap();
    insert(&client, 0..30).await;
    client
        .batch_execute(&format!(
            "CREATE SINK hook FROM q INTO WEBHOOK (url = 'http://{}/alerts?x=1', batch_size = 4, \
             retry_initial_ms = 20, retry_max_ms = 200)",
            hook.addr
        ))
        .await
        .unwrap();
    insert(&client, 30..60).await;
    // The results from before the sink existed are retained: it starts with them.
    hook.await_seqs(results_of(60)).await;
    let row = sink_row(&client, "hook").await;
    assert_eq!(row["delivered_seq"], results_of(60).to_string(), "{row:?}");
    assert_eq!(row["delivered_rows"], results_of(60).to_string(), "{row:?}");
    assert_eq!(row["kind"], "webhook");
    assert_eq!(row["state"], "running", "{row:?}");
    let errors: u64 = row["errors"].parse().unwrap();
    assert!(errors >= 3, "the first three requests failed: {row:?}");
    assert_eq!(row["retries"], row["errors"], "{row:?}");
    assert!(row["last_error"].contains("500"), "{row:?}");
    let labels = "{sink=\"hook\",query=\"q\",kind=\"webhook\"}";
    let m = scrape(maddr, "saql_sink_");
    assert_eq!(
        m[&format!("saql_sink_delivered_seq{labels}")],
        results_of(60) as f64
    );
    assert_eq!(
        m[&format!("saql_sink_delivered_rows_total{labels}")],
        results_of(60) as f64
    );
    assert_eq!(m[&format!("saql_sink_errors_total{labels}")], errors as f64);
    assert_eq!(m[&format!("saql_sink_up{labels}")], 1.0);

    // The receiver goes down; results pile up undelivered; saql is killed.
    hook.down.store(true, Ordering::SeqCst);
    insert(&client, 60..90).await;
    let before = hook.requests.load(Ordering::SeqCst);
    for _ in 0..200 {
        if hook.requests.load(Ordering::SeqCst) > before + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sink_row(&client, "hook").await["state"], "retrying");
    saql.kill();
    hook.down.store(false, Ordering::SeqCst);
    let mut saql = start(dir.path(), addr, maddr);
    let client = connect(addr).await;
    insert(&client, 90..120).await;
    hook.await_seqs(results_of(120)).await;
    let expected = subscribed(addr, results_of(120)).await;
    let got = hook.received.lock().unwrap().pairs();
    assert_eq!(
        got, expected,
        "the webhook holds exactly what SUBSCRIBE gives"
    );
    let row = sink_row(&client, "hook").await;
    assert_eq!(row["delivered_seq"], results_of(120).to_string(), "{row:?}");
    assert_eq!(row["gap_rows"], "0");

    client.batch_execute("DROP SINK hook").await.unwrap();
    assert!(client
        .simple_query("SHOW SINKS")
        .await
        .unwrap()
        .iter()
        .all(|m| !matches!(m, SimpleQueryMessage::Row(_))));
    saql.kill();
}

#[tokio::test]
async fn catalog_rules_for_sinks() {
    let engine = saql::Engine::open(saql::EngineConfig::default()).unwrap();
    engine.execute(SETUP).await.unwrap();
    let code = |r: saql::Result<Vec<saql::StatementResult>>| match r {
        Err(e) => e.sqlstate(),
        Ok(_) => "ok",
    };
    let hook = "INTO WEBHOOK (url = 'http://127.0.0.1:9/x', start = 'end')";
    assert_eq!(
        code(
            engine
                .execute(&format!("CREATE SINK k FROM nope {hook}"))
                .await
        ),
        "42P01"
    );
    assert_eq!(
        code(
            engine
                .execute(&format!("CREATE SINK k FROM q {hook}"))
                .await
        ),
        "ok"
    );
    assert_eq!(
        code(
            engine
                .execute(&format!("CREATE SINK k FROM q {hook}"))
                .await
        ),
        "42P07"
    );
    assert_eq!(
        code(
            engine
                .execute(&format!("CREATE SINK IF NOT EXISTS k FROM q {hook}"))
                .await
        ),
        "ok"
    );
    assert_eq!(code(engine.execute("DROP QUERY q").await), "2BP01");
    assert_eq!(code(engine.execute("DROP SINK nope").await), "42P01");
    assert_eq!(code(engine.execute("DROP SINK IF EXISTS nope").await), "ok");
    assert_eq!(
        code(engine.execute("CREATE CONTINUOUS QUERY q2 AS SELECT n AS seq FROM s; CREATE SINK k2 FROM q2 INTO WEBHOOK (url = 'http://x')").await),
        "42701"
    );
    assert_eq!(code(engine.execute("DROP STREAM s CASCADE").await), "ok");
    let shown = engine.execute("SHOW SINKS").await.unwrap();
    let saql::StatementResult::Rows { batches, .. } = &shown[0] else {
        panic!("SHOW SINKS returns rows")
    };
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_behind_the_retained_results_counts_the_gap_and_goes_on() {
    let hook = receiver(0).await;
    hook.down.store(true, Ordering::SeqCst);
    let engine = saql::Engine::open(saql::EngineConfig {
        retain_rows: 5,
        subscriber_buffer_bytes: 1,
        ..saql::EngineConfig::default()
    })
    .unwrap();
    engine.execute(SETUP).await.unwrap();
    engine
        .execute(&format!(
            "CREATE SINK hook FROM q INTO WEBHOOK (url = 'http://{}/alerts?x=1', batch_size = 4, \
             retry_initial_ms = 10, retry_max_ms = 50)",
            hook.addr
        ))
        .await
        .unwrap();
    for i in 0..30u64 {
        let sql = format!(
            "INSERT INTO s VALUES ('2024-01-01 00:00:{:02}', 'h{}', {i})",
            i % 60,
            i % 4
        );
        engine.execute(&sql).await.unwrap();
        if i == 2 {
            // The first two results are in; the sink's first batch holds them from seq 1
            // once its first request is made. Under load its task may start later than the
            // inserts, so wait for it: the head asserted below starts at seq 1.
            while hook.requests.load(Ordering::SeqCst) < 1 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    while hook.requests.load(Ordering::SeqCst) < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    hook.down.store(false, Ordering::SeqCst);
    let total = results_of(30);
    let mut row = BTreeMap::new();
    for _ in 0..600 {
        let shown = engine.execute("SHOW SINKS").await.unwrap();
        let saql::StatementResult::Rows { batches, schema } = &shown[0] else {
            panic!("SHOW SINKS returns rows")
        };
        row = schema
            .fields()
            .iter()
            .zip(batches[0].columns())
            .map(|(f, c)| {
                let v = datafusion::arrow::util::display::array_value_to_string(c, 0).unwrap();
                (f.name().clone(), v)
            })
            .collect();
        if row["delivered_seq"] == total.to_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(row["delivered_seq"], total.to_string(), "{row:?}");
    // Delivered: what the sink held when the receiver went down, then the 5 retained rows;
    // everything between is counted as a gap, never silently lost.
    let got: Vec<u64> = hook.received.lock().unwrap().rows.keys().copied().collect();
    let gap: u64 = row["gap_rows"].parse().unwrap();
    assert!(gap > 0, "{row:?}");
    assert_eq!(got.len() as u64 + gap, total, "{got:?} {row:?}");
    let head = got.iter().take_while(|&&s| s <= total - 5).count();
    assert_eq!(got[..head], (1..=head as u64).collect::<Vec<_>>()[..]);
    assert_eq!(got[head..], ((total - 4)..=total).collect::<Vec<_>>()[..]);
    assert!(row["last_error"].contains("no longer retained"), "{row:?}");
}

/// The newest PostgreSQL server binaries from Debian's packages, if installed.
fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists() && b.join("pg_ctl").exists())
        .collect();
    found.sort();
    found.pop()
}

/// A throwaway PostgreSQL cluster on 127.0.0.1, stopped when dropped.
struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl Postgres {
    /// A command run as the postgres user when we are root (initdb and postgres refuse root).
    fn command(bin: &Path, tool: &str) -> Command {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
            c
        } else {
            Command::new(bin.join(tool))
        }
    }

    fn start(bin: PathBuf) -> Postgres {
        let dir = tempfile::tempdir().unwrap();
        let _ = Command::new("chown")
            .arg("postgres:")
            .arg(dir.path())
            .status();
        let data = dir.path().join("pg");
        let ok = Self::command(&bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "saql", "--auth=trust", "--no-sync"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "initdb failed");
        let port = free_addr().port();
        let ok = Self::command(&bin, "pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(data.join("server.log"))
            .args(["-w", "start", "-o"])
            .arg(format!(
                "-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={} -c fsync=off",
                dir.path().display()
            ))
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "pg_ctl start failed");
        Postgres { bin, dir, port }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Self::command(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("pg"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_sink_inserts_each_result_once() {
    let Some(bin) = pg_bin() else {
        eprintln!("skip: PostgreSQL is not installed (apt-get install postgresql)");
        return;
    };
    let pg = Postgres::start(bin);
    let url = format!("host=127.0.0.1 port={} user=saql dbname=postgres", pg.port);
    let (pg_client, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let dir = tempfile::tempdir().unwrap();
    let (addr, maddr) = (free_addr(), free_addr());
    let mut saql = start(dir.path(), addr, maddr);
    let client = connect(addr).await;
    client.batch_execute(SETUP).await.unwrap();
    // An existing table, already holding the first result as if an earlier delivery of the
    // batch had been cut off before its acknowledgement: it is not inserted twice.
    pg_client
        .batch_execute(
            "CREATE TABLE alerts (seq BIGINT PRIMARY KEY, host TEXT, n BIGINT, ts TIMESTAMP);
             INSERT INTO alerts VALUES (1, 'h1', 1, '2024-01-01 00:00:01')",
        )
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "CREATE SINK db FROM q INTO POSTGRES (url = '{url}', table = 'alerts', batch_size = 7);
             CREATE SINK db2 FROM q INTO POSTGRES (url = '{url}', table = 'public.made')"
        ))
        .await
        .unwrap();
    insert(&client, 0..50).await;
    let total = results_of(50) as i64;
    let count = |table: &'static str| {
        let pg = &pg_client;
        async move {
            let sql = format!("SELECT count(*) FROM {table}");
            for _ in 0..600 {
                if let Ok(row) = pg.query_one(&sql, &[]).await {
                    if row.get::<_, i64>(0) >= total {
                        return row.get::<_, i64>(0);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            -1
        }
    };
    assert_eq!(count("alerts").await, total);
    // The table the sink created: seq is its primary key, a column per result column.
    assert_eq!(count("made").await, total);
    let made = pg_client
        .query(
            "SELECT column_name, data_type FROM information_schema.columns \
             WHERE table_name = 'made' ORDER BY ordinal_position",
            &[],
        )
        .await
        .unwrap();
    let made: Vec<(String, String)> = made.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        made,
        [
            ("seq", "bigint"),
            ("host", "text"),
            ("n", "bigint"),
            ("ts", "timestamp without time zone")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let expected = subscribed(addr, results_of(50)).await;
    let rows = pg_client
        .query(
            "SELECT seq, host, n, ts::text FROM alerts ORDER BY seq",
            &[],
        )
        .await
        .unwrap();
    let got: BTreeMap<u64, (String, i64)> = rows
        .iter()
        .map(|r| (r.get::<_, i64>(0) as u64, (r.get(1), r.get(2))))
        .collect();
    assert_eq!(got, expected);
    assert!(rows[0]
        .get::<_, String>(3)
        .starts_with("2024-01-01 00:00:01"));
    let row = sink_row(&client, "db").await;
    assert_eq!(row["delivered_seq"], results_of(50).to_string(), "{row:?}");
    saql.kill();
}

#[cfg(feature = "kafka")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_sink_writes_one_record_per_result_keyed_by_a_column() {
    use rskafka::client::partition::UnknownTopicHandling;
    use rskafka::client::ClientBuilder;
    let Some(broker) = broker::start("alerts", 1).await else {
        println!("skip: no tansu binary (run tests/kafka/setup.sh or set SAQL_TANSU)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (addr, maddr) = (free_addr(), free_addr());
    let mut saql = start(dir.path(), addr, maddr);
    let client = connect(addr).await;
    client.batch_execute(SETUP).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SINK k FROM q INTO KAFKA (brokers = '{}', topic = 'alerts', key = 'host', \
             batch_size = 5)",
            broker.brokers
        ))
        .await
        .unwrap();
    insert(&client, 0..40).await;
    let total = results_of(40);
    let kafka = ClientBuilder::new(vec![broker.brokers.clone()])
        .build()
        .await
        .unwrap();
    let partition = kafka
        .partition_client("alerts", 0, UnknownTopicHandling::Retry)
        .await
        .unwrap();
    let mut got = Received::default();
    let mut last_seq = 0;
    let mut offset = 0;
    for _ in 0..300 {
        if got.rows.len() as u64 >= total {
            break;
        }
        let (records, _) = partition
            .fetch_records(offset, 1..1_000_000, 100)
            .await
            .unwrap();
        for r in records {
            offset = r.offset + 1;
            let value: Value = serde_json::from_slice(&r.record.value.unwrap()).unwrap();
            let key = String::from_utf8(r.record.key.unwrap()).unwrap();
            assert_eq!(
                Some(key.as_str()),
                value["host"].as_str(),
                "the key is the host"
            );
            let seq = String::from_utf8(r.record.headers["seq"].clone()).unwrap();
            assert_eq!(seq, value["seq"].to_string(), "the seq header");
            let seq: u64 = seq.parse().unwrap();
            assert!(
                seq > last_seq || got.rows.contains_key(&seq),
                "records in seq order"
            );
            last_seq = last_seq.max(seq);
            got.add(value);
        }
    }
    let expected = subscribed(addr, total).await;
    assert_eq!(
        got.pairs(),
        expected,
        "the topic holds exactly what SUBSCRIBE gives"
    );
    let row = sink_row(&client, "k").await;
    assert_eq!(row["delivered_seq"], total.to_string(), "{row:?}");
    assert_eq!(row["kind"], "kafka");
    saql.kill();
}

/// A sink whose target is not the server it should be (here a Kafka sink pointed at a port
/// that answers like an HTTP server) shows that at once in SHOW SINKS, before any result
/// needs delivering, instead of `running` with no error.
#[cfg(feature = "kafka")]
#[tokio::test]
async fn a_sink_at_a_port_that_is_not_its_kind_shows_the_error_at_once() {
    let not_kafka = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = not_kafka.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = not_kafka.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let (addr, maddr) = (free_addr(), free_addr());
    let _saql = start(dir.path(), addr, maddr);
    let client = connect(addr).await;
    client.batch_execute(SETUP).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SINK k FROM q INTO KAFKA (brokers = '127.0.0.1:{port}', topic = 'alerts', \
             timeout_ms = '2000')"
        ))
        .await
        .unwrap();
    let mut row = sink_row(&client, "k").await;
    for _ in 0..100 {
        if !row["last_error"].is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        row = sink_row(&client, "k").await;
    }
    assert_eq!(row["state"], "retrying", "{row:?}");
    assert!(
        row["last_error"].contains("cannot reach the target"),
        "{row:?}"
    );
}
