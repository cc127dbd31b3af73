//! Crash test: the real `saql serve` process, two writers (COPY into one stream, INSERT into
//! another), subscribers of a windowed, a pattern, an outlier and a filter query, a lookup
//! join with a table and a query over the windowed query's results, reading with
//! `SUBSCRIBE q FROM n WITH SEQ`, and `kill -9` at random moments. After each kill the server
//! restarts on the same data directory, writers resend only what was not acknowledged (a
//! batch whose acknowledgement was lost is looked up in `SHOW STREAMS`), subscribers resume
//! after the last sequence number they saw. The result must equal an uninterrupted run's:
//! no acknowledged row lost, the same alerts, no duplicates.
//!
//! CI runs a few crash points; `SAQL_CRASH_POINTS=25 cargo test --test all crash:: -- --nocapture`
//! runs the full set.

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;

use binary::connect;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex;
use tokio_postgres::SimpleQueryMessage;

const SETUP: &str = "
CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE STREAM b (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE CONTINUOUS QUERY win AS SELECT k, window_end, COUNT(*) AS n, SUM(v) AS total
  FROM TUMBLE(a, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end;
CREATE CONTINUOUS QUERY pat AS SELECT * FROM a MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
  MEASURES FIRST(up.v) AS first_v, LAST(up.v) AS last_v, COUNT(up.*) AS n
  PATTERN (up{3,}) WITHIN INTERVAL '30' SECOND DEFINE up AS v > PREV(v));
CREATE CONTINUOUS QUERY out AS SELECT k, window_end, SUM(v) AS total
  FROM TUMBLE(b, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end
  OUTLIER ZSCORE(1.5) ON (total);
CREATE CONTINUOUS QUERY big AS SELECT ts, k, v FROM b WHERE v > 80;
CREATE TABLE labels (k BIGINT PRIMARY KEY, label TEXT);
INSERT INTO labels VALUES (0, 'zero'), (2, 'two'), (3, 'three');
CREATE CONTINUOUS QUERY enr AS SELECT b.ts, b.k, b.v, l.label FROM b JOIN labels l ON b.k = l.k;
CREATE CONTINUOUS QUERY busy AS SELECT k, window_end, total FROM win WHERE n >= 3;
";

const QUERIES: [&str; 6] = ["win", "pat", "out", "big", "enr", "busy"];
const BATCHES: usize = 150;
const ROWS: usize = 25;

/// Batch `i` of stream `s` as (seconds, key, value) rows; the last batch is far ahead in
/// event time, so every window closes.
fn rows(s: u64, i: usize) -> Vec<(i64, i64, i64)> {
    if i == BATCHES {
        return vec![(100_000, 0, 0)];
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(s * 1000 + i as u64);
    (0..ROWS)
        .map(|j| {
            let t = (i * ROWS + j) as i64 / 4 + rng.gen_range(0..3);
            (t, rng.gen_range(0..4), rng.gen_range(0..100))
        })
        .collect()
}

fn ts(seconds: i64) -> String {
    let t = chrono::DateTime::from_timestamp(1_700_000_000 + seconds, 0).unwrap();
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

struct Server {
    child: Option<Child>,
}

impl Server {
    fn start(dir: &Path, addr: SocketAddr) -> Server {
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
        Server { child: Some(child) }
    }

    /// Waits up to 2 minutes (a loaded machine) until it accepts connections; panics saying
    /// why if it exits or hangs (with its threads' stacks, where gdb is installed).
    async fn wait_up(&mut self, addr: SocketAddr) {
        for _ in 0..2400 {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return;
            }
            let child = self.child.as_mut().expect("the server runs");
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the server exited at start: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pid = self.child.as_ref().expect("the server runs").id();
        let stacks = Command::new("gdb")
            .args([
                "-p",
                &pid.to_string(),
                "-batch",
                "-ex",
                "thread apply all bt",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        panic!("the server did not come up in 2 minutes; its threads:\n{stacks}");
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
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

/// A stream's accepted row count, or None while the server is down.
async fn rows_in(addr: SocketAddr, stream: &str) -> u64 {
    loop {
        let client = connect(addr).await;
        if let Ok(m) = client.simple_query("SHOW STREAMS").await {
            if let Some(r) = rows_of(&m).into_iter().find(|r| r[0] == stream) {
                return r[3].parse().unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends every batch of a stream, each exactly once as seen by the server.
async fn write(addr: SocketAddr, stream: &'static str, copy: bool) {
    let mut acked = 0u64;
    let mut i = 0;
    while i <= BATCHES {
        let batch = rows(if copy { 1 } else { 2 }, i);
        let client = connect(addr).await;
        let sent = if copy {
            let text: String = batch
                .iter()
                .map(|(t, k, v)| format!("{},{k},{v}\n", ts(*t)))
                .collect();
            async {
                let sink = client
                    .copy_in(&format!("COPY {stream} FROM STDIN (FORMAT csv)"))
                    .await?;
                futures::pin_mut!(sink);
                sink.send(bytes::Bytes::from(text)).await?;
                sink.finish().await
            }
            .await
        } else {
            let values: Vec<String> = batch
                .iter()
                .map(|(t, k, v)| format!("('{}', {k}, {v})", ts(*t)))
                .collect();
            client
                .execute(
                    &format!("INSERT INTO {stream} VALUES {}", values.join(", ")),
                    &[],
                )
                .await
        };
        match sent {
            Ok(n) => assert_eq!(n, batch.len() as u64),
            Err(_) => {
                // Lost with the server, or accepted before it died: the count tells.
                let now = rows_in(addr, stream).await;
                if now == acked {
                    continue;
                }
                assert_eq!(now, acked + batch.len() as u64, "{stream}: a partial batch");
            }
        }
        acked += batch.len() as u64;
        i += 1;
    }
}

type Seen = Arc<Mutex<BTreeMap<&'static str, Vec<(u64, String)>>>>;

/// Reads a query's results for ever, resuming after the last sequence number seen.
async fn subscribe(addr: SocketAddr, query: &'static str, seen: Seen) {
    loop {
        let client = connect(addr).await;
        let from = seen
            .lock()
            .await
            .get(query)
            .and_then(|r| r.last())
            .map_or(0, |r| r.0);
        let Ok(feed) = client
            .simple_query_raw(&format!("SUBSCRIBE {query} FROM {from} WITH SEQ"))
            .await
        else {
            continue;
        };
        futures::pin_mut!(feed);
        while let Some(Ok(msg)) = feed.next().await {
            if let SimpleQueryMessage::Row(r) = msg {
                let seq: u64 = r.get(0).unwrap().parse().unwrap();
                let text: Vec<&str> = (1..r.len()).map(|i| r.get(i).unwrap_or("")).collect();
                seen.lock()
                    .await
                    .entry(query)
                    .or_default()
                    .push((seq, text.join("|")));
            }
        }
    }
}

/// Each query's result count, once all input is in.
async fn rows_out(addr: SocketAddr) -> BTreeMap<String, u64> {
    let client = connect(addr).await;
    let m = client.simple_query("SHOW QUERIES").await.unwrap();
    rows_of(&m)
        .into_iter()
        .map(|r| (r[0].clone(), r[4].parse().unwrap()))
        .collect()
}

/// Runs the whole input, killing the server `kills` times at random moments.
async fn scenario(kills: usize, seed: u64) -> BTreeMap<&'static str, Vec<(u64, String)>> {
    let dir = tempfile::tempdir().unwrap();
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut server = Server::start(dir.path(), addr);
    connect(addr).await.batch_execute(SETUP).await.unwrap();
    let seen: Seen = Arc::default();
    let readers: Vec<_> = QUERIES
        .iter()
        .map(|q| tokio::spawn(subscribe(addr, q, seen.clone())))
        .collect();
    let writers = tokio::spawn(async move {
        tokio::join!(write(addr, "a", true), write(addr, "b", false));
    });
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for k in 0..kills {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..200))).await;
        if writers.is_finished() {
            break;
        }
        server.kill();
        eprintln!(
            "crash point {}: killed; results so far {:?}",
            k + 1,
            seen.lock().await.values().map(Vec::len).collect::<Vec<_>>()
        );
        server = Server::start(dir.path(), addr);
    }
    writers.await.unwrap();
    let expected = rows_out(addr).await;
    for _ in 0..600 {
        let seen = seen.lock().await;
        let done = QUERIES
            .iter()
            .all(|q| seen.get(q).map_or(0, |r| r.len() as u64) >= expected[*q]);
        if done {
            break;
        }
        drop(seen);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for r in readers {
        r.abort();
    }
    server.kill();
    let seen = seen.lock().await.clone();
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_nothing_acknowledged_and_duplicates_no_alert() {
    let points: usize = std::env::var("SAQL_CRASH_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let expected = scenario(0, 0).await;
    assert!(
        QUERIES.iter().all(|q| !expected[q].is_empty()),
        "every query alerts in the uninterrupted run"
    );
    let mut done = 0;
    let mut seed = 1;
    while done < points {
        let round = points.min(done + 5) - done;
        let seen = scenario(round, seed).await;
        for q in QUERIES {
            let got = &seen[q];
            let numbers: Vec<u64> = got.iter().map(|r| r.0).collect();
            let dense: Vec<u64> = (1..=got.len() as u64).collect();
            assert_eq!(numbers, dense, "{q}: a gap or a duplicate (seed {seed})");
            assert_eq!(
                got, &expected[q],
                "{q}: differs from the uninterrupted run (seed {seed})"
            );
        }
        done += round;
        seed += 1;
    }
    eprintln!("{done} crash points: every query equal to the uninterrupted run");
}

/// The stream a backfill reads in [`kill_9_during_a_backfill`], and the query created over it.
const HISTORY_SETUP: &str = "CREATE STREAM h (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (history = '30 days')";
const BACKFILLED: &str =
    "CREATE CONTINUOUS QUERY q WITH (start = TIMESTAMP '2023-11-14 22:13:20') \
    AS SELECT k, window_end, COUNT(*) AS n, SUM(v) AS total \
    FROM TUMBLE(h, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end";
/// Batches of history written before the backfill, and of live rows written while it runs.
const HISTORY_BATCHES: usize = 40;
const LIVE_BATCHES: usize = 60;
const HISTORY_ROWS: usize = 5000;
const LIVE_ROWS: usize = 100;

/// Batch `i` of stream `h`: history batches first, then live ones (100 rows a second of event
/// time); the last batch is far ahead, so every window closes.
fn h_rows(i: usize) -> Vec<(i64, i64, i64)> {
    if i == HISTORY_BATCHES + LIVE_BATCHES {
        return vec![(100_000, 0, 0)];
    }
    let (first, n) = if i < HISTORY_BATCHES {
        (i * HISTORY_ROWS, HISTORY_ROWS)
    } else {
        (
            HISTORY_BATCHES * HISTORY_ROWS + (i - HISTORY_BATCHES) * LIVE_ROWS,
            LIVE_ROWS,
        )
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(77 + i as u64);
    (first..first + n)
        .map(|j| {
            (
                j as i64 / 100 + rng.gen_range(0..2),
                rng.gen_range(0..4),
                rng.gen_range(0..100),
            )
        })
        .collect()
}

/// COPYs batches `from..to` of `h` into the server on `addr`, each exactly once as the server
/// sees it (a batch whose acknowledgement was lost with a killed server is looked up in
/// `SHOW STREAMS`), `pause` between batches.
async fn copy_h(addr: SocketAddr, from: usize, to: usize, pause: Duration) {
    let mut acked: u64 = (0..from).map(|i| h_rows(i).len() as u64).sum();
    let mut i = from;
    while i < to {
        let batch = h_rows(i);
        let text: String = batch
            .iter()
            .map(|(t, k, v)| format!("{},{k},{v}\n", ts(*t)))
            .collect();
        // While the server restarts, wait for it as long as `wait_up` does.
        let mut client = None;
        for _ in 0..2400 {
            let conn = format!("host=127.0.0.1 port={} user=saql dbname=saql", addr.port());
            if let Ok((c, connection)) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await
            {
                tokio::spawn(connection);
                client = Some(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let client = client.expect("the server comes back");
        let sent = async {
            let sink = client.copy_in("COPY h FROM STDIN (FORMAT csv)").await?;
            futures::pin_mut!(sink);
            sink.send(bytes::Bytes::from(text)).await?;
            sink.finish().await
        }
        .await;
        if sent.is_err() {
            let now = rows_in(addr, "h").await;
            if now == acked {
                continue;
            }
            assert_eq!(now, acked + batch.len() as u64, "h: a partial batch");
        }
        acked += batch.len() as u64;
        i += 1;
        tokio::time::sleep(pause).await;
    }
}

/// Whether query `q` exists (SHOW QUERIES), waiting for the server to answer.
async fn query_exists(addr: SocketAddr, name: &str) -> bool {
    loop {
        if let Ok(m) = connect(addr).await.simple_query("SHOW QUERIES").await {
            return rows_of(&m).iter().any(|r| r[0] == name);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The rows of `q` in the order it gave them.
async fn results_of(addr: SocketAddr, name: &str) -> Vec<Vec<String>> {
    let client = connect(addr).await;
    rows_of(
        &client
            .simple_query(&format!("SELECT * FROM {name}"))
            .await
            .unwrap(),
    )
}

/// A backfill over history while live rows arrive, the server killed `after` into it (never,
/// with None); returns whether the CREATE was acknowledged, whether q exists after the
/// restart, and q's results once all input is in (q created anew if it does not exist).
async fn backfill_scenario(after: Option<Duration>) -> (bool, bool, Vec<Vec<String>>, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let addr = binary::free_addr();
    let mut server = Server::start(dir.path(), addr);
    connect(addr)
        .await
        .batch_execute(HISTORY_SETUP)
        .await
        .unwrap();
    copy_h(addr, 0, HISTORY_BATCHES / 2, Duration::ZERO).await;
    // Half the history in segments, half in memory (and the log).
    connect(addr)
        .await
        .batch_execute("CHECKPOINT")
        .await
        .unwrap();
    copy_h(addr, HISTORY_BATCHES / 2, HISTORY_BATCHES, Duration::ZERO).await;
    let live = tokio::spawn(copy_h(
        addr,
        HISTORY_BATCHES,
        HISTORY_BATCHES + LIVE_BATCHES,
        Duration::from_millis(20),
    ));
    let started = std::time::Instant::now();
    let create = tokio::spawn(async move {
        let client = connect(addr).await;
        let acked = client.batch_execute(BACKFILLED).await.is_ok();
        (acked, started.elapsed())
    });
    let (acked, took) = match after {
        Some(after) => {
            tokio::time::sleep(after).await;
            server.kill();
            let (acked, took) = create.await.unwrap();
            eprintln!(
                "killed {after:?} after the CREATE began: {}",
                if acked {
                    "it was acknowledged"
                } else {
                    "no acknowledgement"
                }
            );
            server = Server::start(dir.path(), addr);
            server.wait_up(addr).await;
            (acked, took)
        }
        None => create.await.unwrap(),
    };
    let exists = query_exists(addr, "q").await;
    live.await.unwrap();
    copy_h(
        addr,
        HISTORY_BATCHES + LIVE_BATCHES,
        HISTORY_BATCHES + LIVE_BATCHES + 1,
        Duration::ZERO,
    )
    .await;
    if !exists {
        connect(addr).await.batch_execute(BACKFILLED).await.unwrap();
    }
    let results = results_of(addr, "q").await;
    server.kill();
    (acked, exists, results, took)
}

/// `kill -9` while `CREATE CONTINUOUS QUERY q WITH (start = ...)` backfills (live rows
/// arriving meanwhile): after the restart the catalog is consistent. Either the query exists,
/// and its results equal those of an uninterrupted run (backfill, then live), or the CREATE
/// was not acknowledged and the query does not exist (and can be created again). A CREATE
/// that was acknowledged always exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_backfill() {
    let points: usize = std::env::var("SAQL_CRASH_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let (acked, exists, expected, took) = backfill_scenario(None).await;
    assert!(acked && exists, "the uninterrupted run creates q");
    assert!(expected.len() > 100, "{} results", expected.len());
    eprintln!(
        "uninterrupted: the CREATE took {took:?}, {} results",
        expected.len()
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(27);
    for point in 0..points {
        // Mostly inside the backfill, sometimes just after it.
        let after = took.mul_f64(rng.gen_range(0.0..1.3));
        let (acked, exists, got, _) = backfill_scenario(Some(after)).await;
        assert!(
            exists || !acked,
            "point {point}: an acknowledged CREATE is lost"
        );
        assert_eq!(
            got,
            expected,
            "point {point} ({after:?}, {}): q differs from the uninterrupted run",
            if exists {
                "q survived"
            } else {
                "q created again"
            }
        );
    }
}
