#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]
#![cfg(feature = "server")]
//! File sources against the real server on 127.0.0.1: a JSON file that grows (lines written
//! in pieces), holds bad records and is rotated is followed by `CREATE SOURCE`, and a
//! SUBSCRIBE sees exactly its rows; the position survives a restart (in-process, and
//! `kill -9` of the real binary at random moments) with no row lost and none twice;
//! `on_error = 'fail'` stops the source with the error in SHOW SOURCES; CSV with a header.

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;

use binary::{connect, show_row};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use rand::{Rng, SeedableRng};
use saql::{Engine, EngineConfig};
use tokio::sync::oneshot;
use tokio_postgres::{Client, SimpleQueryMessage};

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(data_dir: Option<&Path>) -> Server {
        let engine = Engine::open(EngineConfig {
            data_dir: data_dir.map(|p| p.to_path_buf()),
            checkpoint_interval: None,
            ..EngineConfig::default()
        })
        .expect("engine opens");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            saql::server::run(listener, engine, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Server {
            addr,
            stop: Some(tx),
            task,
        }
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = self.task.await;
    }
}

fn rows_of(messages: &[SimpleQueryMessage]) -> Vec<Vec<String>> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("").to_string())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// Polls SHOW SOURCES until `done` holds for the source's row; panics after 30 s.
async fn await_source(
    client: &Client,
    name: &str,
    done: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let mut last = BTreeMap::new();
    for _ in 0..600 {
        last = show_row(client, "SHOW SOURCES", name).await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("source {name} never got there: {last:?}");
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.sync_all().unwrap();
}

/// Event `i` as a nested JSON record.
fn event(i: u64) -> String {
    format!(
        "{{\"ts\": \"2024-01-01 00:{:02}:{:02}\", \"host\": \"h{}\", \"proc\": {{\"pid\": {i}, \
         \"exe\": \"/bin/p{i}\"}}}}\n",
        i / 60 % 60,
        i % 60,
        i % 3
    )
}

const SETUP: &str = "
CREATE STREAM ev (ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, exe TEXT,
                  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE CONTINUOUS QUERY q AS SELECT pid, exe, host FROM ev;
";

fn create_source(path: &Path, extra: &str) -> String {
    format!(
        "CREATE SOURCE f FROM FILE '{}' (format = 'json', poll_interval_ms = '10'{extra}) \
         INTO STREAM ev (pid PATH 'proc.pid', exe PATH 'proc.exe')",
        path.display()
    )
}

/// The pids a stream holds (its recent rows), sorted, duplicates kept.
async fn stream_pids(client: &Client) -> Vec<u64> {
    let rows = rows_of(&client.simple_query("SELECT pid FROM ev").await.unwrap());
    let mut pids: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    pids.sort();
    pids
}

#[tokio::test]
async fn a_file_source_follows_appends_and_rotation_and_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("events.jsonl");
    let server = Server::start(Some(&data)).await;
    let client = connect(server.addr).await;
    client.batch_execute(SETUP).await.unwrap();
    // The file does not exist yet: the source waits for it.
    client
        .batch_execute(&create_source(&log, ""))
        .await
        .unwrap();
    await_source(&client, "f", |r| r["state"] == "waiting for file").await;

    let mut feed = Box::pin(client.simple_query_raw("SUBSCRIBE q").await.unwrap());
    let writer = connect(server.addr).await;
    // Lines written in pieces, with two bad records among them.
    for i in 0..40 {
        let line = event(i);
        let (a, b) = line.split_at(line.len() / 2);
        append(&log, a);
        if i % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        append(&log, b);
    }
    append(
        &log,
        "{\"ts\": \"not a time\", \"proc\": {\"pid\": 999}}\nnot json at all\n",
    );
    for i in 40..60 {
        append(&log, &event(i));
    }
    // Rotation: the old file is renamed and holds rows not read yet; a new file takes over.
    std::fs::rename(&log, dir.path().join("events.jsonl.1")).unwrap();
    for i in 60..100 {
        append(&log, &event(i));
    }
    let mut seen = Vec::new();
    while seen.len() < 100 {
        let msg = tokio::time::timeout(Duration::from_secs(30), feed.next())
            .await
            .expect("rows arrive")
            .unwrap()
            .unwrap();
        if let SimpleQueryMessage::Row(r) = msg {
            let pid: u64 = r.get(0).unwrap().parse().unwrap();
            assert_eq!(r.get(1), Some(format!("/bin/p{pid}").as_str()));
            assert_eq!(r.get(2), Some(format!("h{}", pid % 3).as_str()));
            seen.push(pid);
        }
    }
    seen.sort();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    let row = await_source(&writer, "f", |r| r["rows"] == "100").await;
    assert_eq!(row["bad_records"], "2");
    assert_eq!(row["state"], "running");
    assert!(row["error"].contains("line 42"), "{row:?}");
    assert!(row["error"].contains("22P02"), "{row:?}");
    // Nothing more arrives: exactly the file's rows.
    let extra = tokio::time::timeout(Duration::from_millis(300), feed.next()).await;
    assert!(
        !matches!(extra, Ok(Some(Ok(SimpleQueryMessage::Row(_))))),
        "an extra row arrived"
    );
    // A checkpoint, more rows, then a restart with rows appended while saql is down.
    writer.batch_execute("CHECKPOINT").await.unwrap();
    for i in 100..110 {
        append(&log, &event(i));
    }
    await_source(&writer, "f", |r| r["rows"] == "110").await;
    drop(feed);
    drop(client);
    drop(writer);
    server.stop().await;
    for i in 110..130 {
        append(&log, &event(i));
    }

    let server = Server::start(Some(&data)).await;
    let client = connect(server.addr).await;
    let row = await_source(&client, "f", |r| r["rows"] == "130").await;
    assert_eq!(row["bad_records"], "2");
    assert_eq!(stream_pids(&client).await, (0..130).collect::<Vec<_>>());
    // DROP SOURCE stops it; the stream can then be dropped.
    let e = client.batch_execute("DROP STREAM ev").await.unwrap_err();
    assert_eq!(e.code().unwrap().code(), "2BP01");
    client.batch_execute("DROP SOURCE f").await.unwrap();
    append(&log, &event(130));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(stream_pids(&client).await.len(), 130);
    assert!(rows_of(&client.simple_query("SHOW SOURCES").await.unwrap()).is_empty());
    server.stop().await;
}

#[tokio::test]
async fn on_error_fail_stops_the_source_and_shows_why() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    for i in 0..5 {
        append(&log, &event(i));
    }
    append(
        &log,
        "{\"ts\": \"2024-01-01\", \"proc\": {\"pid\": \"seven\"}}\n",
    );
    append(&log, &event(6));
    let server = Server::start(None).await;
    let client = connect(server.addr).await;
    client.batch_execute(SETUP).await.unwrap();
    client
        .batch_execute(&create_source(&log, ", on_error = 'fail'"))
        .await
        .unwrap();
    let row = await_source(&client, "f", |r| r["state"] == "failed").await;
    assert_eq!(row["rows"], "5");
    assert!(
        row["error"].contains("line 6") && row["error"].contains("\"pid\""),
        "{row:?}"
    );
    assert_eq!(stream_pids(&client).await, (0..5).collect::<Vec<_>>());
    // The server goes on serving.
    client
        .batch_execute("INSERT INTO ev VALUES ('2024-01-02', 'x', 77, 'y')")
        .await
        .unwrap();
    assert_eq!(stream_pids(&client).await.len(), 6);
    // Bad definitions are refused with their SQLSTATE.
    for (sql, state) in [
        (
            "CREATE SOURCE g FROM FILE '/x' (colour = 'red') INTO STREAM ev",
            "42601",
        ),
        ("CREATE SOURCE g FROM FILE '/x' INTO STREAM nope", "42P01"),
        ("CREATE SOURCE f FROM FILE '/x' INTO STREAM ev", "42P07"),
        ("DROP SOURCE nope", "42P01"),
    ] {
        let e = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(e.code().unwrap().code(), state, "{sql}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_csv_file_with_a_header_is_read_to_its_end_without_follow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.csv");
    append(
        &path,
        "ts,host,pid,exe\n2024-01-01 00:00:01,a,1,\"/bin/a,b\"\n2024-01-01 00:00:02,b,2,\n2024-01-01 00:00:03,c,3,/c",
    );
    let server = Server::start(None).await;
    let client = connect(server.addr).await;
    client.batch_execute(SETUP).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE c FROM FILE '{}' (format = 'csv', header = true, follow = false) \
             INTO STREAM ev",
            path.display()
        ))
        .await
        .unwrap();
    let row = await_source(&client, "c", |r| r["state"] == "finished").await;
    assert_eq!(row["rows"], "3");
    let rows = rows_of(
        &client
            .simple_query("SELECT pid, exe IS NULL, exe FROM ev ORDER BY pid")
            .await
            .unwrap(),
    );
    assert_eq!(rows[0], vec!["1", "f", "/bin/a,b"]);
    assert_eq!(rows[1][1], "t");
    assert_eq!(rows[2], vec!["3", "f", "/c"]);
    server.stop().await;
}

struct Process {
    child: Option<Child>,
}

impl Process {
    fn start(dir: &Path, addr: SocketAddr) -> Process {
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
        Process { child: Some(child) }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL
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
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// `kill -9` while the source reads and checkpoints run: after each restart the source
/// resumes from the position logged with the last rows the engine holds, so the stream
/// ends up with every line of the file exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_reading_loses_and_duplicates_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("events.jsonl");
    let addr = free_addr();
    let mut server = Process::start(&data, addr);
    let client = connect(addr).await;
    client.batch_execute(SETUP).await.unwrap();
    client
        .batch_execute(&create_source(&log, ""))
        .await
        .unwrap();
    drop(client);
    let seed = std::env::var("SAQL_SOURCE_SEED").map_or(14, |s| s.parse().unwrap());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let total = 3000u64;
    let mut next = 0u64;
    let mut kills = 0;
    while next < total {
        let n = rng.gen_range(50..400).min(total - next);
        let text: String = (next..next + n).map(event).collect();
        append(&log, &text);
        next += n;
        if rng.gen_bool(0.3) && next < total {
            // Rotate now and then. A source follows one rotation at a time: it must be
            // reading the current file (the one it followed the last rotation to).
            let client = connect(addr).await;
            await_source(&client, "f", |r| r["rows"].parse::<u64>().unwrap() >= next).await;
            drop(client);
            let rotated = dir.path().join(format!("events.jsonl.{next}"));
            std::fs::rename(&log, rotated).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..300))).await;
        if rng.gen_bool(0.4) {
            server.kill();
            kills += 1;
            server = Process::start(&data, addr);
        }
    }
    let client = connect(addr).await;
    let expected = total.to_string();
    await_source(&client, "f", |r| r["rows"] == expected).await;
    assert_eq!(stream_pids(&client).await, (0..total).collect::<Vec<_>>());
    println!("{kills} kills, {total} rows, each once");
    drop(client);
    server.kill();
}

/// One line over the line bound (16 MiB) is skipped and counted, and the source reads on:
/// whoever can write the followed log cannot blind detection with one huge record.
#[tokio::test]
async fn a_line_over_16_mib_is_skipped_and_the_source_reads_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    for i in 0..3 {
        append(&log, &event(i));
    }
    let huge = format!("{{\"pad\": \"{}\"}}\n", "x".repeat(17 << 20));
    append(&log, &huge);
    for i in 3..6 {
        append(&log, &event(i));
    }
    let server = Server::start(None).await;
    let client = connect(server.addr).await;
    client.batch_execute(SETUP).await.unwrap();
    client
        .batch_execute(&create_source(&log, ", on_error = 'skip'"))
        .await
        .unwrap();
    let row = await_source(&client, "f", |r| r["rows"] == "6").await;
    assert_eq!(row["bad_records"], "1", "{row:?}");
    assert!(row["error"].contains("line 4"), "{row:?}");
    assert_eq!(row["state"], "running", "{row:?}");
    // Later lines, appended after it, still arrive.
    append(&log, &event(6));
    await_source(&client, "f", |r| r["rows"] == "7").await;
    assert_eq!(stream_pids(&client).await, (0..7).collect::<Vec<_>>());
    server.stop().await;
}

#[tokio::test]
async fn a_file_source_into_a_table_upserts_by_key_and_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let path = dir.path().join("intel.jsonl");
    append(
        &path,
        "{\"ip\": \"10.0.0.1\", \"tag\": \"c2\"}\n{\"ip\": \"10.0.0.2\", \"tag\": \"scan\"}\n\
         {\"ip\": \"10.0.0.1\", \"tag\": \"c2-v2\"}\n{\"ip\": null, \"tag\": \"no key\"}\n",
    );
    let server = Server::start(Some(data.path())).await;
    let client = connect(server.addr).await;
    client
        .batch_execute(&format!(
            "CREATE TABLE intel (ip TEXT PRIMARY KEY, tag TEXT); \
             CREATE STREAM conn (ts TIMESTAMP NOT NULL, dst TEXT, WATERMARK FOR ts AS ts); \
             CREATE CONTINUOUS QUERY hits AS SELECT c.dst, i.tag FROM conn c JOIN intel i \
               ON c.dst = i.ip; \
             CREATE SOURCE feed FROM FILE '{}' (format = 'json', poll_interval_ms = '10') \
               INTO TABLE intel",
            path.display()
        ))
        .await
        .unwrap();
    let row = await_source(&client, "feed", |r| r["rows"] == "3").await;
    assert_eq!(row["bad_records"], "1", "the record without a key: {row:?}");
    // The later record of a key replaced the earlier one.
    assert_eq!(
        intel_rows(&client).await,
        vec![vec!["10.0.0.1", "c2-v2"], vec!["10.0.0.2", "scan"]]
    );
    client
        .batch_execute("INSERT INTO conn VALUES ('2024-01-01 00:00:01', '10.0.0.1')")
        .await
        .unwrap();
    let shown = show_row(&client, "SHOW TABLES", "intel").await;
    assert_eq!(shown["rows"], "2");
    drop(client);
    server.stop().await;

    // After a restart the source reads on from where it was: the old lines are not read
    // again, the new ones are.
    append(&path, "{\"ip\": \"10.0.0.3\", \"tag\": \"tor\"}\n");
    let server = Server::start(Some(data.path())).await;
    let client = connect(server.addr).await;
    await_source(&client, "feed", |r| r["rows"] == "4").await;
    assert_eq!(
        intel_rows(&client).await,
        vec![
            vec!["10.0.0.1", "c2-v2"],
            vec!["10.0.0.2", "scan"],
            vec!["10.0.0.3", "tor"]
        ]
    );
    let hits = rows_of(&client.simple_query("SELECT * FROM hits").await.unwrap());
    assert_eq!(hits, vec![vec!["10.0.0.1", "c2-v2"]]);
    // A table that a source writes into is dropped only with CASCADE.
    let e = client.batch_execute("DROP TABLE intel").await.unwrap_err();
    assert_eq!(e.code().unwrap().code(), "2BP01", "{e}");
    client
        .batch_execute("DROP TABLE intel CASCADE")
        .await
        .unwrap();
    let sources = rows_of(&client.simple_query("SHOW SOURCES").await.unwrap());
    assert!(sources.is_empty(), "{sources:?}");
    server.stop().await;
}

async fn intel_rows(client: &Client) -> Vec<Vec<String>> {
    rows_of(
        &client
            .simple_query("SELECT ip, tag FROM intel ORDER BY ip")
            .await
            .unwrap(),
    )
}
