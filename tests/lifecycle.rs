//! The real `saql serve` process when its disk refuses a catalog change and when it is told
//! to stop (issue #11): a catalog change that cannot be written answers an error and changes
//! nothing, and SIGTERM drains the sessions (idle ones get 57P01, a COPY in flight finishes
//! and its rows are there after a restart) before the server exits 0.

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;
use crate::pg_errors;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use binary::{connect, free_addr, show_row, start_saql, start_saql_in_shell};
use futures::SinkExt;
use pg_errors::code;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// The first column of every row `sql` returns.
async fn names(client: &Client, sql: &str) -> BTreeSet<String> {
    client
        .simple_query(sql)
        .await
        .unwrap()
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect()
}

async fn catalog(client: &Client) -> (BTreeSet<String>, BTreeSet<String>) {
    (
        names(client, "SHOW STREAMS").await,
        names(client, "SHOW QUERIES").await,
    )
}

async fn assert_select_1(client: &Client) {
    let rows = client.simple_query("SELECT 1").await.expect("SELECT 1");
    assert!(
        rows.iter()
            .any(|m| matches!(m, SimpleQueryMessage::Row(r) if r.get(0) == Some("1"))),
        "SELECT 1 returned no 1"
    );
}

/// Sets the soft limit on the size of the files process `pid` writes (`prlimit --fsize`).
fn limit_file_size(pid: u32, limit: &str) {
    let status = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--fsize={limit}:")])
        .status()
        .expect("prlimit runs");
    assert!(status.success(), "prlimit --fsize={limit}: failed");
}

/// Size of the ingest log segment the server appends to (the newest).
fn log_tail_size(data_dir: &Path) -> u64 {
    let newest = std::fs::read_dir(data_dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max()
        .expect("a log segment");
    std::fs::metadata(newest).unwrap().len()
}

#[tokio::test]
async fn catalog_changes_that_cannot_be_written_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    // A write past the file-size limit then fails with EFBIG instead of killing the server.
    let mut server = start_saql_in_shell(dir.path(), addr, &[], "trap '' XFSZ");
    let client = connect(addr).await;
    client
        .batch_execute(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, v BIGINT);
             CREATE CONTINUOUS QUERY q AS SELECT ts, v FROM s WHERE v > 0;",
        )
        .await
        .unwrap();
    let before = catalog(&client).await;
    assert!(
        before.0.contains("s") && before.1.contains("q"),
        "{before:?}"
    );

    // The ingest log can grow no more: every catalog change fails to be written.
    limit_file_size(server.pid(), &log_tail_size(dir.path()).to_string());
    for sql in [
        "CREATE STREAM s2 (ts TIMESTAMP NOT NULL)",
        "CREATE CONTINUOUS QUERY q2 AS SELECT ts FROM s WHERE v < 0",
        "DROP QUERY q",
        "DROP STREAM s CASCADE",
    ] {
        let e = client.simple_query(sql).await.unwrap_err();
        let sqlstate = code(&e);
        assert!(
            sqlstate == "58030" || sqlstate == "53100",
            "{sql}: {sqlstate} {e:?}"
        );
        assert_eq!(catalog(&client).await, before, "{sql} changed the catalog");
    }
    assert_select_1(&client).await;
    assert_select_1(&connect(addr).await).await;

    // Room again: the same changes go through, and after a crash the catalog holds exactly
    // the changes that were acknowledged.
    limit_file_size(server.pid(), "unlimited");
    client
        .batch_execute("CREATE STREAM s2 (ts TIMESTAMP NOT NULL); DROP QUERY q")
        .await
        .unwrap();
    server.kill();
    let _server = start_saql(dir.path(), addr, &[]);
    let client = connect(addr).await;
    let after = catalog(&client).await;
    let want: BTreeSet<String> = ["s", "s2"].map(String::from).into();
    assert_eq!(after, (want, BTreeSet::new()));
}

/// `n` CSV rows for stream `s (ts, v)`, from row `from` on.
fn csv_rows(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("2024-01-01 00:00:{:02},{i}\n", i % 60))
        .collect()
}

#[tokio::test]
async fn sigterm_lets_a_copy_finish_and_closes_idle_sessions_with_57p01() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut server = start_saql(dir.path(), addr, &["--shutdown-grace", "60"]);
    let writer = connect(addr).await;
    writer
        .batch_execute("CREATE STREAM s (ts TIMESTAMP NOT NULL, v BIGINT)")
        .await
        .unwrap();
    let conn = format!("host=127.0.0.1 port={} user=saql dbname=saql", addr.port());
    let (idle, idle_connection) = tokio_postgres::connect(&conn, NoTls).await.unwrap();
    let idle_connection = tokio::spawn(idle_connection);
    assert_select_1(&idle).await;

    let sink = writer
        .copy_in::<_, bytes::Bytes>("COPY s FROM STDIN (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(csv_rows(0, 500).into()).await.unwrap();
    server.signal("TERM");

    // The idle session is told the server is going away, and no new client is served.
    let ended = tokio::time::timeout(Duration::from_secs(20), idle_connection)
        .await
        .expect("the idle session was closed")
        .unwrap();
    let e = ended.expect_err("the idle session ended with an error");
    assert_eq!(code(&e), "57P01", "{e:?}");
    assert!(
        tokio_postgres::connect(&conn, NoTls).await.is_err(),
        "a new client was served during shutdown"
    );

    // The COPY that was in flight finishes, all of it.
    sink.send(csv_rows(500, 500).into()).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 1000);
    let status = tokio::task::spawn_blocking(move || {
        let status = server.wait_exit(Duration::from_secs(60));
        (status, server)
    })
    .await
    .unwrap();
    let (status, _server) = status;
    let status = status.expect("the server exited after its last session");
    assert!(status.success(), "{status:?}");

    let _server = start_saql(dir.path(), addr, &[]);
    let client = connect(addr).await;
    let row = show_row(&client, "SHOW STREAMS", "s").await;
    assert_eq!(row["rows_in"], "1000", "{row:?}");
}

/// A COPY is one unit in the ingest log: one that cannot be written whole (here the disk
/// takes only part of it) answers an error and keeps none of its rows, before and after a
/// crash, so that the client's retry does not duplicate any.
#[tokio::test]
async fn a_copy_that_cannot_be_written_whole_keeps_none_of_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut server = start_saql_in_shell(dir.path(), addr, &[], "trap '' XFSZ");
    let client = connect(addr).await;
    client
        .batch_execute("CREATE STREAM s (ts TIMESTAMP NOT NULL, v BIGINT)")
        .await
        .unwrap();
    // Room for a part of the COPY's frame (its rows compress, but not into 16 KiB).
    let room = log_tail_size(dir.path()) + 16_384;
    limit_file_size(server.pid(), &room.to_string());
    let e = copy_40_000(&client)
        .await
        .expect_err("the COPY does not fit");
    let sqlstate = code(&e);
    assert!(
        sqlstate == "58030" || sqlstate == "53100",
        "{sqlstate} {e:?}"
    );
    let row = show_row(&client, "SHOW STREAMS", "s").await;
    assert_eq!(row["rows_in"], "0", "{row:?}");

    limit_file_size(server.pid(), "unlimited");
    server.kill();
    let _server = start_saql(dir.path(), addr, &[]);
    let client = connect(addr).await;
    let row = show_row(&client, "SHOW STREAMS", "s").await;
    assert_eq!(
        row["rows_in"], "0",
        "nothing of it after a restart: {row:?}"
    );
    // The client retries: exactly its rows are there.
    assert_eq!(copy_40_000(&client).await.unwrap(), 40_000);
    let row = show_row(&client, "SHOW STREAMS", "s").await;
    assert_eq!(row["rows_in"], "40000", "{row:?}");
}

async fn copy_40_000(client: &Client) -> Result<u64, tokio_postgres::Error> {
    let sink = client
        .copy_in::<_, bytes::Bytes>("COPY s FROM STDIN (FORMAT csv)")
        .await?;
    futures::pin_mut!(sink);
    sink.send(csv_rows(0, 40_000).into()).await?;
    sink.finish().await
}

/// A subscription never finishes by itself: SIGTERM ends it at once with 57P01 (like an idle
/// session), and the server exits without waiting out its 60 s grace period.
#[tokio::test]
async fn sigterm_ends_an_open_subscription_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut server = start_saql(dir.path(), addr, &["--shutdown-grace", "60"]);
    let client = connect(addr).await;
    client
        .batch_execute(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, v BIGINT);
             CREATE CONTINUOUS QUERY q AS SELECT ts, v FROM s WHERE v > 0",
        )
        .await
        .unwrap();
    let subscriber = connect(addr).await;
    let subscription = tokio::spawn(async move { subscriber.simple_query("SUBSCRIBE q").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.signal("TERM");
    let ended = tokio::time::timeout(Duration::from_secs(20), subscription)
        .await
        .expect("the subscription ended before the grace period")
        .unwrap();
    let e = ended.expect_err("the subscription ended with an error");
    assert_eq!(code(&e), "57P01", "{e:?}");
    let status = tokio::task::spawn_blocking(move || server.wait_exit(Duration::from_secs(30)))
        .await
        .unwrap()
        .expect("the server exited");
    assert!(status.success(), "{status:?}");
}
