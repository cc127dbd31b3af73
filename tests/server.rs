#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]
#![cfg(feature = "server")]
//! End-to-end tests against the real server on 127.0.0.1 with real clients: tokio-postgres
//! (simple and extended protocol, COPY, cancel) and psql where it is installed.

use crate::pg_errors;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use pg_errors::{code, message};
use saql::{Engine, EngineConfig};
use tokio::sync::oneshot;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(data_dir: Option<&Path>) -> Server {
        let engine = Engine::open(EngineConfig {
            data_dir: data_dir.map(|p| p.to_path_buf()),
            retain_rows: 1000,
            workers: 2,
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

    async fn connect(&self) -> Client {
        self.connect_with_handle().await.0
    }

    /// A client and the task that owns its socket: aborting the task closes the connection
    /// the way a client process that goes away does.
    async fn connect_with_handle(&self) -> (Client, tokio::task::JoinHandle<()>) {
        let conn = format!(
            "host=127.0.0.1 port={} user=saql dbname=saql",
            self.addr.port()
        );
        let (client, connection) = tokio_postgres::connect(&conn, NoTls).await.unwrap();
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        (client, task)
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = self.task.await;
    }
}

const EVENTS: &str = "CREATE STREAM events (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, \
                      WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)";

/// Polls SHOW QUERIES until the (only) query has `n` subscribers; false after 10 seconds.
async fn await_subscribers(client: &Client, n: u64) -> bool {
    for _ in 0..200 {
        let rows = data_rows(&client.simple_query("SHOW QUERIES").await.unwrap());
        if rows[0][7].as_deref() == Some(n.to_string().as_str()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Whether psql is absent (the psql tests then skip).
fn psql_missing() -> bool {
    let missing = std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_err();
    if missing {
        eprintln!("psql not installed: skipping");
    }
    missing
}

/// Runs psql on the server at `port` (database `saql`, no psqlrc) with `args`, to the end.
async fn run_psql(port: u16, args: &[&str]) -> std::process::Output {
    let port = port.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "saql",
                "-X",
                "-d",
                "saql",
            ])
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// A server with the `events` stream and a query `big` of rows with amount > 10.
async fn server_with_query_big() -> (Server, Client) {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY big AS SELECT host, amount FROM events WHERE amount > 10",
        )
        .await
        .unwrap();
    (server, client)
}

/// psql with `args`, its stdout line-buffered (on a pipe psql buffers fully; on a terminal it
/// prints each line as it arrives, which stdbuf reproduces), and a reader of its lines.
fn spawn_psql(
    port: u16,
    args: &[&str],
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new("stdbuf")
        .args([
            "-oL",
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "saql",
            "-X",
        ])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

fn data_rows(messages: &[SimpleQueryMessage]) -> Vec<Vec<Option<String>>> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).map(|s| s.to_string()))
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn windowed_query_streams_to_a_subscriber() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY per_host AS \
             SELECT host, window_end, COUNT(*) AS n, SUM(amount) AS total \
             FROM TUMBLE(events, ts, INTERVAL '10' SECOND) \
             GROUP BY host, window_start, window_end",
        )
        .await
        .unwrap();

    let subscriber = server.connect().await;
    let mut feed = Box::pin(
        subscriber
            .simple_query_raw("SUBSCRIBE per_host")
            .await
            .unwrap(),
    );

    // Extended protocol with typed parameters, as drivers send it.
    let insert = client
        .prepare("INSERT INTO events (ts, host, amount) VALUES ($1, $2, $3)")
        .await
        .unwrap();
    let t0 = chrono::NaiveDate::from_ymd_opt(2024, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    for (secs, host, amount) in [(1, "a", 10i64), (2, "b", 5), (3, "a", 7), (9, "a", 1)] {
        let ts = t0 + chrono::Duration::seconds(secs);
        let n = client
            .execute(&insert, &[&ts, &host, &amount])
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
    // Nothing yet: the watermark (9s - 1s) has not passed the window end (10s).
    // This row moves the watermark to 11s, closing [0s, 10s).
    client
        .batch_execute("INSERT INTO events VALUES ('2024-01-01 00:00:12', 'c', 100)")
        .await
        .unwrap();

    let mut rows = Vec::new();
    while rows.len() < 2 {
        let msg = tokio::time::timeout(Duration::from_secs(10), feed.next())
            .await
            .expect("alert arrives while the subscription is open")
            .expect("stream open")
            .unwrap();
        if let SimpleQueryMessage::Row(r) = msg {
            rows.push((
                r.get(0).unwrap().to_string(),
                r.get(1).unwrap().to_string(),
                r.get(2).unwrap().to_string(),
                r.get(3).unwrap().to_string(),
            ));
        }
    }
    rows.sort();
    // a: 10 + 7 + 1 over 3 rows; b: 5 over 1 row.
    assert_eq!(
        rows,
        vec![
            (
                "a".into(),
                "2024-01-01 00:00:10".into(),
                "3".into(),
                "18".into()
            ),
            (
                "b".into(),
                "2024-01-01 00:00:10".into(),
                "1".into(),
                "5".into()
            ),
        ]
    );

    // The results are also retained for ad hoc SELECT.
    let r = client
        .query("SELECT host, total FROM per_host ORDER BY host", &[])
        .await
        .unwrap();
    let got: Vec<(String, i64)> = r.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![("a".to_string(), 18), ("b".to_string(), 5)]);

    // SHOW QUERIES reports counters.
    let shown = client.simple_query("SHOW QUERIES").await.unwrap();
    let rows = data_rows(&shown);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][0].as_deref(), Some("per_host"));
    assert_eq!(rows[0][3].as_deref(), Some("5"), "rows in");
    assert_eq!(rows[0][4].as_deref(), Some("2"), "rows out");
    drop(feed);
    server.stop().await;
}

#[tokio::test]
async fn copy_is_atomic_and_reports_the_line() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();

    let sink = client
        .copy_in("COPY events FROM STDIN WITH (FORMAT csv, HEADER true)")
        .await
        .unwrap();
    let data = "ts,host,amount\n2024-01-01 00:00:01,a,1\n2024-01-01 00:00:02,\"b,c\",\n";
    futures::pin_mut!(sink);
    use futures::SinkExt;
    sink.send(bytes::Bytes::from(data)).await.unwrap();
    let n = sink.finish().await.unwrap();
    assert_eq!(n, 2);

    let bad = client
        .copy_in("COPY events FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(bad);
    bad.send(bytes::Bytes::from(
        "2024-01-01 00:00:03,d,3\n2024-01-01 00:00:04,e,4\n2024-01-01 00:00:05,f,lots\n",
    ))
    .await
    .unwrap();
    let err = bad.finish().await.unwrap_err();
    assert_eq!(code(&err), "22P02", "{err:?}");
    let msg = message(&err);
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("\"amount\""), "{msg}");

    // Nothing of the failed COPY arrived; NULL and quoted commas survived.
    let rows = client
        .query("SELECT host, amount FROM events ORDER BY ts", &[])
        .await
        .unwrap();
    let got: Vec<(String, Option<i64>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![("a".into(), Some(1)), ("b,c".into(), None)]);
    server.stop().await;
}

#[tokio::test]
async fn errors_carry_sqlstate_and_the_server_keeps_serving() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();

    let cases = [
        ("SELEC 1", "42601"),
        ("CREATE STREAM events (x INT)", "42P07"),
        ("INSERT INTO nowhere VALUES (1)", "42P01"),
        ("SUBSCRIBE nothing", "42P01"),
        (
            "CREATE CONTINUOUS QUERY q AS SELECT nope FROM events",
            "42703",
        ),
        (
            "CREATE CONTINUOUS QUERY q AS SELECT COUNT(*) FROM events",
            "0A000",
        ),
        (
            "CREATE CONTINUOUS QUERY q AS SELECT host, COUNT(*) FROM TUMBLE(events, ts, \
             INTERVAL '1' MINUTE) GROUP BY host",
            "42803",
        ),
        (
            "INSERT INTO events VALUES ('yesterday-ish', 'a', 1)",
            "22007",
        ),
        (
            "INSERT INTO events VALUES ('2024-01-01', 'a', 99999999999999999999)",
            "22003",
        ),
        ("INSERT INTO events VALUES (NULL, 'a', 1)", "23502"),
        // Data errors of evaluation get PostgreSQL's codes, not XX000.
        ("SELECT 1/0", "22012"),
        ("SELECT CAST('abc' AS BIGINT)", "22P02"),
        ("SELECT sqrt(-1)", "2201F"),
        ("SELECT 'a' ~ '('", "2201B"),
        (
            "SELECT date_trunc('bogus', TIMESTAMP '2024-01-01')",
            "22023",
        ),
        ("SELECT substr('abc', -1, -1)", "22023"),
    ];
    for (sql, expected) in cases {
        let err = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(code(&err), expected, "{sql}: {err:?}");
    }
    let err = client.batch_execute("SELECT 1 +").await.unwrap_err();
    let db = err.as_db_error().unwrap();
    assert!(matches!(
        db.position(),
        Some(tokio_postgres::error::ErrorPosition::Original(_))
    ));
    // An unknown column is pointed at (1-based characters), as PostgreSQL does.
    let sql = "CREATE CONTINUOUS QUERY q AS SELECT host, nope FROM events";
    let err = client.batch_execute(sql).await.unwrap_err();
    assert_eq!(code(&err), "42703");
    assert_eq!(
        err.as_db_error().unwrap().position(),
        Some(&tokio_postgres::error::ErrorPosition::Original(
            sql.find("nope").unwrap() as u32 + 1
        ))
    );
    // The position is where the statement writes the unknown name, found from its token
    // span: not the same word earlier in a string or as an alias, and in the second of two
    // statements sent together, counted from the start of the text sent (as PostgreSQL does).
    for (sql, before) in [
        (
            "CREATE CONTINUOUS QUERY q AS SELECT 'total' AS label, host AS total, total \
             FROM events",
            "host AS total, ",
        ),
        (
            "SELECT 1 AS total;\nSELECT host AS total FROM events WHERE total > 1",
            "WHERE ",
        ),
    ] {
        let err = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(code(&err), "42703", "{sql}");
        let at = sql.find(before).unwrap() + before.len();
        assert_eq!(
            err.as_db_error().unwrap().position(),
            Some(&tokio_postgres::error::ErrorPosition::Original(
                sql[..at].chars().count() as u32 + 1
            )),
            "{sql}"
        );
    }

    // A multi-row INSERT with one bad row applies nothing.
    let err = client
        .batch_execute(
            "INSERT INTO events VALUES ('2024-01-01 00:00:01', 'a', 1),\n ('2024-01-01 00:00:02', 'b', 'two')",
        )
        .await
        .unwrap_err();
    assert_eq!(code(&err), "22P02");
    assert!(message(&err).contains("line 2"), "{}", message(&err));
    let n: i64 = client
        .query_one("SELECT count(*) FROM events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    let one: i64 = client
        .query_one("SELECT 1::BIGINT", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(one, 1);
    server.stop().await;
}

#[tokio::test]
async fn catalog_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(dir.path())).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY big AS SELECT ts, host FROM events WHERE amount > 100",
        )
        .await
        .unwrap();
    drop(client);
    server.stop().await;

    let server = Server::start(Some(dir.path())).await;
    let client = server.connect().await;
    let streams = data_rows(&client.simple_query("SHOW STREAMS").await.unwrap());
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0][0].as_deref(), Some("events"));
    let queries = data_rows(&client.simple_query("SHOW QUERIES").await.unwrap());
    assert_eq!(queries.len(), 1);
    assert_eq!(queries[0][0].as_deref(), Some("big"));
    // And the restored query runs.
    let mut feed = Box::pin(client.simple_query_raw("SUBSCRIBE big").await.unwrap());
    let other = server.connect().await;
    other
        .batch_execute("INSERT INTO events VALUES ('2024-01-01', 'x', 500), ('2024-01-01', 'y', 5)")
        .await
        .unwrap();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), feed.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let SimpleQueryMessage::Row(r) = msg {
            assert_eq!(r.get(1), Some("x"));
            break;
        }
    }
    drop(feed);
    server.stop().await;
}

#[tokio::test]
async fn cancel_ends_a_subscription_and_frees_it() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute("CREATE CONTINUOUS QUERY all_rows AS SELECT * FROM events")
        .await
        .unwrap();
    let subscriber = server.connect().await;
    let token = subscriber.cancel_token();
    let mut feed = Box::pin(
        subscriber
            .simple_query_raw("SUBSCRIBE all_rows")
            .await
            .unwrap(),
    );
    // Wait until the subscription is registered.
    assert!(
        await_subscribers(&client, 1).await,
        "the subscription is registered"
    );
    token.cancel_query(NoTls).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match feed.next().await {
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Some(e),
                None => return None,
            }
        }
    })
    .await
    .expect("cancel ends the subscription");
    let e = end.expect("a canceled subscription ends with an error");
    assert_eq!(code(&e), "57014");
    // The same connection is usable again, and the subscription is gone.
    let one = subscriber.simple_query("SELECT 1").await.unwrap();
    assert_eq!(data_rows(&one), vec![vec![Some("1".to_string())]]);
    assert!(
        await_subscribers(&client, 0).await,
        "canceled subscription is freed"
    );

    // A client that disconnects mid-subscription is freed too.
    let (quitter, socket) = server.connect_with_handle().await;
    let feed2 = quitter
        .simple_query_raw("SUBSCRIBE all_rows")
        .await
        .unwrap();
    assert!(
        await_subscribers(&client, 1).await,
        "the subscription is registered"
    );
    socket.abort();
    drop(feed2);
    drop(quitter);
    assert!(
        await_subscribers(&client, 0).await,
        "a departed client's subscription is freed"
    );
    server.stop().await;
}

#[tokio::test]
async fn psql_session_works() {
    if psql_missing() {
        return;
    }
    let server = Server::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("events.csv");
    std::fs::write(
        &csv,
        "ts,host,amount\n2024-01-01 00:00:01,a,5\n2024-01-01 00:00:02,b,7\n",
    )
    .unwrap();
    let script = dir.path().join("session.sql");
    std::fs::write(
        &script,
        format!(
            "{EVENTS};\n\\copy events FROM '{}' WITH (FORMAT csv, HEADER true)\nSELECT host, amount FROM events ORDER BY host;\nSHOW server_version;\n",
            csv.display()
        ),
    )
    .unwrap();
    let script = script.display().to_string();
    let out = run_psql(
        server.addr.port(),
        &["-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", &script],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "psql failed: {stderr}");
    assert!(stdout.contains("a|5\nb|7"), "{stdout}");
    server.stop().await;
}

/// psql's `\d`, `\dt` and `\dm` list streams as tables and queries as materialized views.
#[tokio::test]
async fn psql_backslash_d_lists_streams_and_queries() {
    if psql_missing() {
        return;
    }
    let (server, _client) = server_with_query_big().await;
    let port = server.addr.port();
    let out = run_psql(
        port,
        &[
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "\\d",
            "-c",
            "\\dt",
            "-c",
            "\\dm",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "psql failed: {stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "public|big|materialized view|saql",
            "public|events|table|saql",
            "public|events|table|saql",
            "public|big|materialized view|saql",
        ],
        "{stdout}"
    );
    server.stop().await;
}

/// psql describes one stream (`\d NAME`: its columns with PostgreSQL's type names and
/// NOT NULL) and one query (`\d+ NAME`: a materialized view with its definition), and the
/// other listings answer: `\l`, `\dn`, `\dt+`, `\du`, `\df`, `\dT`, an unknown name.
#[tokio::test]
async fn psql_describes_a_stream_and_a_query() {
    if psql_missing() {
        return;
    }
    let (server, _client) = server_with_query_big().await;
    let port = server.addr.port();
    let psql = |args: &'static [&'static str]| async move {
        let out = run_psql(port, args).await;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "psql {args:?} failed: {stderr}");
        assert!(stderr.is_empty(), "psql {args:?}: {stderr}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let stream = psql(&["-c", "\\d events"]).await;
    let lines: Vec<&str> = stream.lines().map(str::trim_end).collect();
    assert_eq!(lines[0].trim(), "Table \"public.events\"", "{stream}");
    assert!(
        lines.contains(&" ts     | timestamp without time zone |           | not null |"),
        "{stream}"
    );
    assert!(
        lines.contains(&" amount | bigint                      |           |          |"),
        "{stream}"
    );
    let query = psql(&["-c", "\\d+ big"]).await;
    assert!(
        query.contains("Materialized view \"public.big\""),
        "{query}"
    );
    assert!(query.contains("View definition:"), "{query}");
    assert!(query.contains("FROM events WHERE amount > 10"), "{query}");
    let listings = psql(&[
        "-A", "-t", "-c", "\\l", "-c", "\\dn", "-c", "\\dt+", "-c", "\\du", "-c", "\\df", "-c",
        "\\dT",
    ])
    .await;
    let lines: Vec<&str> = listings.lines().collect();
    assert!(lines[0].starts_with("saql|saql|UTF8|"), "{listings}");
    assert!(lines.contains(&"public|saql"), "{listings}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("public|events|table|saql|")),
        "{listings}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("saql|Superuser")),
        "{listings}"
    );
    let out = run_psql(port, &["-c", "\\d no_such"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Did not find any relation named \"no_such\""),
        "{stderr}"
    );
    server.stop().await;
}

#[tokio::test]
async fn psql_prints_subscribed_rows_at_once_and_ctrl_c_ends_it() {
    if psql_missing() {
        return;
    }
    let (server, client) = server_with_query_big().await;
    let (mut psql, mut lines) = spawn_psql(
        server.addr.port(),
        &["saql", "-c", "COPY (SUBSCRIBE big) TO STDOUT"],
    );
    assert!(
        await_subscribers(&client, 1).await,
        "the subscription is registered"
    );
    for (i, amount) in [(1, 50), (2, 5), (3, 70)] {
        client
            .batch_execute(&format!(
                "INSERT INTO events VALUES ('2024-01-01 00:00:0{i}', 'h{i}', {amount})"
            ))
            .await
            .unwrap();
        if amount > 10 {
            // Each alert is printed while psql is still running.
            let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                .await
                .expect("psql prints the row at once")
                .unwrap()
                .unwrap();
            assert_eq!(line, format!("h{i}\t{amount}"));
        }
    }
    // Ctrl-C: psql sends a CancelRequest and exits.
    let pid = psql.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), psql.wait())
        .await
        .expect("psql exits after Ctrl-C")
        .unwrap();
    assert!(!status.success());
    assert!(
        await_subscribers(&client, 0).await,
        "the canceled subscription is freed"
    );
    server.stop().await;
}

#[tokio::test]
async fn cursors_fetch_from_a_subscription() {
    let (server, client) = server_with_query_big().await;
    let reader = server.connect().await;
    reader
        .batch_execute("BEGIN; DECLARE c NO SCROLL CURSOR FOR SUBSCRIBE big")
        .await
        .unwrap();
    // Nothing yet: a FETCH with a timeout returns no rows.
    let empty = reader
        .simple_query("FETCH 10 FROM c WITH (timeout = '100ms')")
        .await
        .unwrap();
    assert!(data_rows(&empty).is_empty());
    client
        .batch_execute(
            "INSERT INTO events VALUES ('2024-01-01', 'a', 50), ('2024-01-01', 'b', 1), ('2024-01-01', 'c', 70)",
        )
        .await
        .unwrap();
    // FETCH 1 returns one row, the next FETCH the other.
    let first = reader.simple_query("FETCH 1 FROM c").await.unwrap();
    assert_eq!(
        data_rows(&first),
        vec![vec![Some("a".into()), Some("50".into())]]
    );
    let rest = reader.simple_query("FETCH ALL FROM c").await.unwrap();
    assert_eq!(
        data_rows(&rest),
        vec![vec![Some("c".into()), Some("70".into())]]
    );
    // A blocking FETCH returns as soon as a row exists.
    let waiting = tokio::spawn(async move {
        let rows = reader.simple_query("FETCH 5 FROM c").await.unwrap();
        reader.batch_execute("CLOSE c; COMMIT").await.unwrap();
        data_rows(&rows)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
        .batch_execute("INSERT INTO events VALUES ('2024-01-01', 'd', 99)")
        .await
        .unwrap();
    let rows = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("FETCH returns once a row arrives")
        .unwrap();
    assert_eq!(rows, vec![vec![Some("d".into()), Some("99".into())]]);
    let err = client.batch_execute("FETCH 1 FROM nope").await.unwrap_err();
    assert_eq!(code(&err), "34000");
    server.stop().await;
}

#[tokio::test]
async fn psql_prints_a_plain_subscribe_live() {
    if psql_missing() {
        return;
    }
    let (server, client) = server_with_query_big().await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("live.sql");
    std::fs::write(&script, "SUBSCRIBE big;\n").unwrap();
    let script = script.display().to_string();
    let (mut psql, mut lines) =
        spawn_psql(server.addr.port(), &["-A", "-t", "saql", "-f", &script]);
    assert!(
        await_subscribers(&client, 1).await,
        "the subscription is registered"
    );
    for (i, amount) in [(1, 50), (2, 70)] {
        client
            .batch_execute(&format!(
                "INSERT INTO events VALUES ('2024-01-01 00:00:0{i}', 'h{i}', {amount})"
            ))
            .await
            .unwrap();
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("psql prints the row while SUBSCRIBE runs")
            .unwrap()
            .unwrap();
        assert_eq!(line, format!("h{i}|{amount}"));
    }
    let _ = psql.kill().await;
    server.stop().await;
}

#[tokio::test]
async fn explain_over_the_wire() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    let sql = "SELECT host, COUNT(*) AS n FROM TUMBLE(events, ts, INTERVAL '1' MINUTE) \
               WHERE amount > 10 GROUP BY host, window_start, window_end";
    let text = data_rows(
        &client
            .simple_query(&format!("EXPLAIN {sql}"))
            .await
            .unwrap(),
    );
    let lines: Vec<String> = text.into_iter().map(|r| r[0].clone().unwrap()).collect();
    assert_eq!(lines[0], "Continuous query -> (host, n)");
    assert!(
        lines
            .iter()
            .any(|l| l.trim() == "#1 WindowAggregate TUMBLE(size 1min)"),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.trim() == "predicate: (amount > 10)"),
        "{lines:?}"
    );

    // JSON through the extended protocol, as a driver would ask for it.
    let row = client
        .query_one(
            &format!("EXPLAIN (FORMAT JSON) CREATE CONTINUOUS QUERY q AS {sql}"),
            &[],
        )
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(row.get(0)).unwrap();
    assert_eq!(json["stream"], "events");
    assert_eq!(json["window"]["size_ms"], 60_000);
    assert_eq!(json["operators"][0]["operator"], "Filter");
    assert_eq!(json["operators"][1]["keys"][0], "host");

    // A registered query by name; an unknown one is 42P01.
    client
        .batch_execute(&format!("CREATE CONTINUOUS QUERY per_host AS {sql}"))
        .await
        .unwrap();
    let named = data_rows(&client.simple_query("EXPLAIN per_host").await.unwrap());
    assert_eq!(
        named[0][0].as_deref(),
        Some("Continuous query -> (host, n)")
    );
    let err = client.batch_execute("EXPLAIN nothing").await.unwrap_err();
    assert_eq!(code(&err), "42P01");
    server.stop().await;
}

/// The type bytes of the messages a server sends until ReadyForQuery, and the body of each.
async fn read_until_ready(socket: &mut tokio::net::TcpStream) -> Vec<(u8, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    loop {
        let tag = socket.read_u8().await.unwrap();
        let len = socket.read_i32().await.unwrap() as usize;
        let mut body = vec![0; len - 4];
        socket.read_exact(&mut body).await.unwrap();
        out.push((tag, body));
        if tag == b'Z' {
            return out;
        }
    }
}

fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// A raw protocol connection, past start-up; also returns the start-up's ParameterStatus pairs.
async fn raw_connect(addr: SocketAddr) -> (tokio::net::TcpStream, Vec<(String, String)>) {
    use tokio::io::AsyncWriteExt;
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut body = 196_608i32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0saql\0database\0saql\0\0");
    let mut startup = (body.len() as i32 + 4).to_be_bytes().to_vec();
    startup.extend_from_slice(&body);
    socket.write_all(&startup).await.unwrap();
    let params = read_until_ready(&mut socket)
        .await
        .into_iter()
        .filter(|(t, _)| *t == b'S')
        .map(|(_, b)| {
            let mut parts = b
                .split(|c| *c == 0)
                .map(|p| String::from_utf8_lossy(p).into_owned());
            (parts.next().unwrap(), parts.next().unwrap())
        })
        .collect();
    (socket, params)
}

#[tokio::test]
async fn a_prepared_insert_describes_as_no_data_and_executes_to_its_tag_only() {
    // pgJDBC from its 5th execution: Parse a named statement, Describe it, Bind, Describe the
    // portal, Execute. Rows described for an INSERT made it fail "a result was returned when
    // none was expected".
    use tokio::io::AsyncWriteExt;
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    let (mut socket, _) = raw_connect(server.addr).await;
    let mut out = Vec::new();
    out.extend(frame(
        b'P',
        b"S_1\0INSERT INTO events (ts, host, amount) VALUES ($1, $2, $3)\0\0\0",
    ));
    out.extend(frame(b'D', b"SS_1\0"));
    let mut bind = b"P_1\0S_1\0\0\0\0\x03".to_vec();
    for p in ["2024-01-01 00:00:00", "h", "42"] {
        bind.extend_from_slice(&(p.len() as i32).to_be_bytes());
        bind.extend_from_slice(p.as_bytes());
    }
    bind.extend_from_slice(b"\0\0");
    out.extend(frame(b'B', &bind));
    out.extend(frame(b'D', b"PP_1\0"));
    out.extend(frame(b'E', b"P_1\0\0\0\0\0"));
    out.extend(frame(b'S', b""));
    socket.write_all(&out).await.unwrap();
    let replies = read_until_ready(&mut socket).await;
    let tags: String = replies.iter().map(|(t, _)| *t as char).collect();
    // ParseComplete, ParameterDescription, NoData, BindComplete, NoData, CommandComplete.
    assert_eq!(tags, "1tn2nCZ");
    let complete = &replies[5].1;
    assert_eq!(complete.as_slice(), b"INSERT 0 1\0");
    server.stop().await;
}

#[tokio::test]
async fn one_postgresql_version_everywhere() {
    let server = Server::start(None).await;
    let (_socket, params) = raw_connect(server.addr).await;
    let startup = params
        .iter()
        .find(|(k, _)| k == "server_version")
        .map(|(_, v)| v.clone())
        .expect("server_version at start-up");
    assert!(startup.starts_with("16.0 (saql "), "{startup}");
    let client = server.connect().await;
    let one = |q: &'static str| {
        let client = &client;
        async move {
            data_rows(&client.simple_query(q).await.unwrap())[0][0]
                .clone()
                .unwrap()
        }
    };
    let version = one("SELECT version()").await;
    assert!(
        version.starts_with(&format!("PostgreSQL {startup} on ")),
        "{version}"
    );
    assert_eq!(one("SELECT pg_catalog.version()").await, version);
    assert_eq!(one("SHOW server_version").await, startup);
    assert_eq!(one("SHOW server_version_num").await, "160000");
    assert_eq!(
        one("SELECT current_setting('server_version_num')").await,
        "160000"
    );
    server.stop().await;
}

#[tokio::test]
async fn timestamps_go_out_with_microseconds_in_text_and_binary() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "INSERT INTO events VALUES ('2026-12-01 13:47:58.167865008', 'a', 1), \
             ('2026-12-01 13:47:59', 'b', 2)",
        )
        .await
        .unwrap();
    let text = data_rows(
        &client
            .simple_query("SELECT ts FROM events ORDER BY ts")
            .await
            .unwrap(),
    );
    assert_eq!(
        text,
        vec![
            vec![Some("2026-12-01 13:47:58.167865".into())],
            vec![Some("2026-12-01 13:47:59".into())],
        ]
    );
    let now = data_rows(&client.simple_query("SELECT now()").await.unwrap())[0][0]
        .clone()
        .unwrap();
    let fraction = now.split('.').nth(1).unwrap_or("+00");
    assert!(
        fraction.len() <= "123456+00".len() && now.ends_with("+00"),
        "{now}"
    );
    // Binary: microseconds since 2000, which SystemTime decodes exactly.
    let row = client
        .query_one("SELECT ts FROM events WHERE host = $1", &[&"a"])
        .await
        .unwrap();
    let ts: std::time::SystemTime = row.get(0);
    let since = ts.duration_since(std::time::UNIX_EPOCH).unwrap();
    assert_eq!(since.as_nanos(), 1_796_132_878_167_865_000);
    server.stop().await;
}

/// A zone offset on input: TIMESTAMP ignores it (as PostgreSQL does), TIMESTAMPTZ converts
/// the instant to UTC; the same in INSERT literals, text parameters and COPY.
#[tokio::test]
async fn timestamp_input_with_an_offset_as_postgresql_reads_it() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE STREAM zoned (local_ts TIMESTAMP NOT NULL, utc_ts TIMESTAMPTZ, n BIGINT); \
             INSERT INTO zoned VALUES ('2026-01-01 14:00:00+02:00', '2026-01-01 14:00:00+02:00', 1)",
        )
        .await
        .unwrap();
    let text = tokio_postgres::types::Type::TEXT;
    let insert = client
        .prepare_typed(
            "INSERT INTO zoned VALUES ($1, $2, 2)",
            &[text.clone(), text],
        )
        .await
        .unwrap();
    let offset = "2026-01-01 14:00:00+02:00";
    client.execute(&insert, &[&offset, &offset]).await.unwrap();
    let sink = client
        .copy_in("COPY zoned FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    use futures::SinkExt;
    sink.send(bytes::Bytes::from_static(
        b"2026-01-01T14:00:00+0200,2026-01-01T14:00:00+0200,3\n",
    ))
    .await
    .unwrap();
    sink.finish().await.unwrap();
    let rows = data_rows(
        &client
            .simple_query("SELECT local_ts, utc_ts FROM zoned ORDER BY n")
            .await
            .unwrap(),
    );
    let expected = vec![
        Some("2026-01-01 14:00:00".to_string()),
        Some("2026-01-01 12:00:00+00".to_string()),
    ];
    assert_eq!(rows, vec![expected.clone(), expected.clone(), expected]);
    server.stop().await;
}

#[tokio::test]
async fn execute_with_a_row_limit_suspends_the_portal() {
    let (server, client) = server_with_query_big().await;
    client
        .batch_execute(
            "INSERT INTO events VALUES ('2024-01-01 00:00:01', 'a', 11), \
             ('2024-01-01 00:00:02', 'b', 12), ('2024-01-01 00:00:03', 'c', 13), \
             ('2024-01-01 00:00:04', 'd', 14), ('2024-01-01 00:00:05', 'e', 1)",
        )
        .await
        .unwrap();
    let mut reader = server.connect().await;
    let tx = reader.transaction().await.unwrap();
    // An ad hoc SELECT, two rows at a time.
    let select = tx
        .prepare("SELECT host FROM events ORDER BY ts")
        .await
        .unwrap();
    let portal = tx.bind(&select, &[]).await.unwrap();
    let mut hosts = Vec::new();
    loop {
        let rows = tx.query_portal(&portal, 2).await.unwrap();
        assert!(rows.len() <= 2);
        if rows.is_empty() {
            break;
        }
        hosts.extend(rows.iter().map(|r| r.get::<_, String>(0)));
    }
    assert_eq!(hosts, ["a", "b", "c", "d", "e"]);
    // A live subscription: the retained rows, then a live one, each Execute as many as asked.
    let live = tx.prepare("SUBSCRIBE big FROM 0").await.unwrap();
    let portal = tx.bind(&live, &[]).await.unwrap();
    let first: Vec<String> = tx
        .query_portal(&portal, 3)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(first, ["a", "b", "c"]);
    let next = tx.query_portal(&portal, 1).await.unwrap();
    assert_eq!(next[0].get::<_, String>(0), "d");
    let insert = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        client
            .batch_execute("INSERT INTO events VALUES ('2024-01-01 00:00:09', 'f', 99)")
            .await
            .unwrap();
    };
    let (rows, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(tx.query_portal(&portal, 1), insert)
    })
    .await
    .expect("the Execute returns once the row exists");
    assert_eq!(rows.unwrap()[0].get::<_, i64>(1), 99);
    // When its query is dropped the subscription ends: the portal completes, and stays done.
    client.batch_execute("DROP QUERY big").await.unwrap();
    for _ in 0..2 {
        let rest = tokio::time::timeout(Duration::from_secs(10), tx.query_portal(&portal, 5))
            .await
            .expect("an ended subscription completes the portal");
        assert!(rest.unwrap().is_empty());
    }
    tx.rollback().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn fetch_and_declared_cursors_describe_their_rows() {
    let (server, client) = server_with_query_big().await;
    client
        .batch_execute("INSERT INTO events VALUES ('2024-01-01', 'a', 50), ('2024-01-01', 'b', 60)")
        .await
        .unwrap();
    let mut reader = server.connect().await;
    let tx = reader.transaction().await.unwrap();
    tx.batch_execute("DECLARE c CURSOR FOR SELECT host, amount FROM events ORDER BY host")
        .await
        .unwrap();
    // Through the extended protocol, as asyncpg and pgJDBC send FETCH.
    let rows = tx.query("FETCH 1 FROM c", &[]).await.unwrap();
    assert_eq!(rows[0].columns().len(), 2);
    assert_eq!(rows[0].get::<_, String>(0), "a");
    assert_eq!(rows[0].get::<_, i64>(1), 50);
    tx.rollback().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn prepare_execute_deallocate_and_discard() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "PREPARE ins (timestamp, text, bigint) AS \
             INSERT INTO events (ts, host, amount) VALUES ($1, $2, $3)",
        )
        .await
        .unwrap();
    for i in 0..3 {
        let n = client
            .execute(
                &format!("EXECUTE ins('2024-01-01 00:00:0{i}', 'h{i}', {i})"),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
    client
        .batch_execute("PREPARE q AS SELECT host FROM events WHERE amount >= $1 ORDER BY host")
        .await
        .unwrap();
    let rows = data_rows(&client.simple_query("EXECUTE q(1)").await.unwrap());
    assert_eq!(rows, vec![vec![Some("h1".into())], vec![Some("h2".into())]]);
    let err = client
        .batch_execute("PREPARE q AS SELECT 1")
        .await
        .unwrap_err();
    assert_eq!(code(&err), "42P05");
    client.batch_execute("DEALLOCATE q").await.unwrap();
    let err = client.batch_execute("EXECUTE q(1)").await.unwrap_err();
    assert_eq!(code(&err), "26000");
    client.batch_execute("DEALLOCATE ALL").await.unwrap();
    let err = client
        .batch_execute("EXECUTE ins('2024-01-01', 'x', 1)")
        .await
        .unwrap_err();
    assert_eq!(code(&err), "26000");
    client
        .batch_execute("PREPARE again AS SELECT 1; DISCARD ALL")
        .await
        .unwrap();
    let err = client.batch_execute("EXECUTE again").await.unwrap_err();
    assert_eq!(code(&err), "26000");
    server.stop().await;
}

#[tokio::test]
async fn session_functions_and_postgresql_column_names() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    let stmt = client
        .prepare("SELECT 1, count(*), min(ts), max(amount) AS top, host FROM events GROUP BY host")
        .await
        .unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["?column?", "count", "min", "top", "host"]);
    let row = &data_rows(
        &client
            .simple_query(
                "SELECT current_database(), current_schema(), current_user, session_user, \
                 pg_catalog.current_setting('timezone'), pg_backend_pid() > 0",
            )
            .await
            .unwrap(),
    )[0];
    let expected = ["saql", "public", "saql", "saql", "UTC", "t"];
    assert_eq!(
        row.iter()
            .map(|v| v.as_deref().unwrap_or("NULL"))
            .collect::<Vec<_>>(),
        expected
    );
    let err = client
        .batch_execute("SELECT no_such_function(1)")
        .await
        .unwrap_err();
    assert_eq!(code(&err), "42883");
    // Drivers' type probes: pg_type (found unqualified, as on PostgreSQL's search path) with
    // PostgreSQL's oids, to_regtype, casts to regtype, inside a savepoint.
    let probe = data_rows(
        &client
            .simple_query(
                "BEGIN; SAVEPOINT probe; \
                 SELECT typname, oid::regtype::text FROM pg_type t \
                 WHERE t.oid = to_regtype('bigint') OR t.oid = to_regtype('hstore'); \
                 RELEASE SAVEPOINT probe; COMMIT",
            )
            .await
            .unwrap(),
    );
    // `oid::regtype::text` is the type's name, as PostgreSQL gives it.
    assert_eq!(
        probe,
        vec![vec![Some("int8".into()), Some("bigint".into())]]
    );
    server.stop().await;
}

#[tokio::test]
async fn an_insert_of_late_rows_warns_with_a_notice() {
    let server = Server::start(None).await;
    let conn = format!(
        "host=127.0.0.1 port={} user=saql dbname=saql",
        server.addr.port()
    );
    let (client, mut connection) = tokio_postgres::connect(&conn, NoTls).await.unwrap();
    let (tx, mut notices) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(m)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notice(n) = m {
                let _ = tx.send(n.message().to_string());
            }
        }
    });
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute("INSERT INTO events VALUES ('2024-01-01 00:10:00', 'a', 1)")
        .await
        .unwrap();
    // In time: no notice. Then two rows behind the watermark (00:09:59) and one in time.
    let n = client
        .execute(
            "INSERT INTO events VALUES ('2024-01-01 00:00:00', 'b', 1), \
             ('2024-01-01 00:09:00', 'c', 1), ('2024-01-01 00:10:01', 'd', 1)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 3);
    let notice = tokio::time::timeout(Duration::from_secs(5), notices.recv())
        .await
        .expect("a notice")
        .unwrap();
    assert!(
        notice.starts_with("2 of 3 rows are behind the watermark of stream \"events\""),
        "{notice}"
    );
    assert!(notices.try_recv().is_err(), "one notice only");
    server.stop().await;
}

/// `SUBSCRIBE q WITH (SNAPSHOT)` starts with the retained rows, then goes on live; through
/// `COPY (...) TO STDOUT WITH (FORMAT csv, HEADER)` the rows are PostgreSQL's CSV after a
/// header line. Without SNAPSHOT a subscriber sees only new rows.
#[tokio::test]
async fn subscribe_with_snapshot_as_csv() {
    use futures::StreamExt;
    let (server, client) = server_with_query_big().await;
    client
        .batch_execute(
            "INSERT INTO events VALUES ('2026-01-01 10:00:00', 'a,b', 50), \
             ('2026-01-01 10:00:01', NULL, 60), ('2026-01-01 10:00:02', 'c', 5)",
        )
        .await
        .unwrap();
    let copy = client
        .copy_out("COPY (SUBSCRIBE big WITH (SNAPSHOT)) TO STDOUT WITH (FORMAT csv, HEADER)")
        .await
        .unwrap();
    futures::pin_mut!(copy);
    let mut text = String::new();
    while text.lines().count() < 3 {
        let chunk: bytes::Bytes = tokio::time::timeout(Duration::from_secs(10), copy.next())
            .await
            .expect("retained rows arrive")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(text, "host,amount\n\"a,b\",50\n,60\n");
    let live = server.connect().await;
    live.batch_execute("INSERT INTO events VALUES ('2026-01-01 10:00:03', '', 70)")
        .await
        .unwrap();
    let chunk = tokio::time::timeout(Duration::from_secs(10), copy.next())
        .await
        .expect("the live row arrives")
        .unwrap()
        .unwrap();
    assert_eq!(std::str::from_utf8(&chunk).unwrap(), "\"\",70\n");
    server.stop().await;
}

/// `SUBSCRIBE (SELECT ... FROM q WHERE ...)` streams only the rows its WHERE keeps,
/// projected, each with the query's own sequence number; `WITH (PROGRESS)` adds a progress
/// row (`progressed` true, the stream's watermark) after the rows of each watermark move.
/// A view that would need state (GROUP BY) is refused with 0A000.
#[tokio::test]
async fn subscribe_to_a_filtered_view_with_progress() {
    use futures::StreamExt;
    let (server, client) = server_with_query_big().await;
    let copy = client
        .copy_out(
            "COPY (SUBSCRIBE (SELECT upper(host) AS h, amount * 2 AS twice FROM big \
             WHERE amount >= 50) WITH (SEQ, PROGRESS)) TO STDOUT WITH (FORMAT csv, HEADER)",
        )
        .await
        .unwrap();
    futures::pin_mut!(copy);
    let writer = server.connect().await;
    assert!(await_subscribers(&writer, 1).await);
    for values in [
        "('2026-01-01 10:00:00', 'a', 50), ('2026-01-01 10:00:01', 'b', 20), \
         ('2026-01-01 10:00:02', 'c', 60)",
        "('2026-01-01 10:00:05', 'd', 5)",
    ] {
        writer
            .batch_execute(&format!("INSERT INTO events VALUES {values}"))
            .await
            .unwrap();
    }
    let mut text = String::new();
    while text.lines().count() < 5 {
        let chunk: bytes::Bytes = tokio::time::timeout(Duration::from_secs(10), copy.next())
            .await
            .expect("rows and progress arrive")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    // b (seq 2) is in big but not in the view; d is not in big.
    assert_eq!(
        text,
        "seq,progressed,watermark,h,twice\n1,f,,A,100\n3,f,,C,120\n\
         ,t,2026-01-01 10:00:01,,\n,t,2026-01-01 10:00:04,,\n"
    );
    let err = writer
        .simple_query("SUBSCRIBE (SELECT host, count(*) AS n FROM big GROUP BY host)")
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("0A000"), "{err:?}");
    server.stop().await;
}

/// An ad hoc `SELECT ... FROM TUMBLE(...)` / `HOP(...)` over a stream's recent rows (in
/// saql's or Flink's form) gives the windows the continuous query gives for the same rows.
#[tokio::test]
async fn ad_hoc_windows_agree_with_the_continuous_query() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    for (name, window) in [
        ("tumbling", "TUMBLE(events, ts, INTERVAL '10' SECOND)"),
        (
            "hopping",
            "HOP(events, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
        ),
    ] {
        client
            .batch_execute(&format!(
                "CREATE CONTINUOUS QUERY {name} AS SELECT host, window_end, COUNT(*) AS n, \
                 SUM(amount) AS total FROM {window} GROUP BY host, window_start, window_end"
            ))
            .await
            .unwrap();
    }
    let mut values = Vec::new();
    for i in 0..120i64 {
        let host = ["a", "b", "c"][(i * 7 % 3) as usize];
        values.push(format!(
            "('2026-01-01 10:00:00'::timestamp + INTERVAL '{}' SECOND, '{host}', {})",
            i * 13 % 97,
            i % 11
        ));
    }
    // Rows out of order within the watermark's second of delay would be late; insert sorted.
    values.sort_by_key(|v| v.split('\'').nth(3).unwrap().parse::<i64>().unwrap());
    client
        .batch_execute(&format!("INSERT INTO events VALUES {}", values.join(", ")))
        .await
        .unwrap();
    // A last row far ahead closes every window before it.
    client
        .batch_execute("INSERT INTO events VALUES ('2026-01-01 11:00:00', 'z', 0)")
        .await
        .unwrap();
    let rows = |sql: String| {
        let client = &client;
        async move { data_rows(&client.simple_query(&sql).await.unwrap()) }
    };
    for (name, adhoc) in [
        ("tumbling", "TUMBLE(events, ts, INTERVAL '10' SECOND)"),
        (
            "tumbling",
            "TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECONDS))",
        ),
        (
            "hopping",
            "HOP(events, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
        ),
    ] {
        let continuous = rows(format!(
            "SELECT host, window_end, n, total FROM {name} ORDER BY window_end, host"
        ))
        .await;
        let recomputed = rows(format!(
            "SELECT host, window_end, COUNT(*) AS n, SUM(amount) AS total FROM {adhoc} \
             WHERE window_end <= TIMESTAMP '2026-01-01 10:59:00' \
             GROUP BY host, window_start, window_end ORDER BY window_end, host"
        ))
        .await;
        assert!(continuous.len() > 10, "{name}: {continuous:?}");
        assert_eq!(continuous, recomputed, "{name} against {adhoc}");
    }
    server.stop().await;
}

const TYPED: &str = "CREATE STREAM typed (ts TIMESTAMP NOT NULL, n BIGINT, small INT, x DOUBLE, \
                     ok BOOLEAN, host TEXT)";

/// A BIGINT parameter whose binary value is 4 bytes long, as a broken driver sends it.
#[derive(Debug)]
struct ShortInt8;

impl tokio_postgres::types::ToSql for ShortInt8 {
    fn to_sql(
        &self,
        _: &tokio_postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&7i32.to_be_bytes());
        Ok(tokio_postgres::types::IsNull::No)
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::INT8
    }

    tokio_postgres::types::to_sql_checked!();
}

#[tokio::test]
async fn binary_parameters_go_in_and_compare_by_value() {
    use tokio_postgres::types::Type;
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(TYPED).await.unwrap();
    // tokio-postgres sends every parameter in binary, typed as the statement describes it.
    let insert = client
        .prepare("INSERT INTO typed VALUES ($1, $2, $3, $4, $5, $6)")
        .await
        .unwrap();
    let t0 = chrono::NaiveDate::from_ymd_opt(2024, 1, 1)
        .unwrap()
        .and_hms_micro_opt(0, 0, 1, 250_000)
        .unwrap();
    client
        .execute(&insert, &[&t0, &(i64::MAX), &7i32, &0.1f64, &true, &"a''b"])
        .await
        .unwrap();
    let none: Option<i64> = None;
    let t1 = t0 + chrono::Duration::seconds(1);
    client
        .execute(
            &insert,
            &[&t1, &none, &None::<i32>, &-2.5f64, &false, &None::<&str>],
        )
        .await
        .unwrap();
    let rows = data_rows(
        &client
            .simple_query("SELECT ts, n, small, x, ok, host FROM typed ORDER BY ts")
            .await
            .unwrap(),
    );
    let text = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
    assert_eq!(
        rows[0],
        text(&[
            "2024-01-01 00:00:01.25",
            "9223372036854775807",
            "7",
            "0.1",
            "t",
            "a''b"
        ])
    );
    assert_eq!(
        rows[1],
        vec![
            Some("2024-01-01 00:00:02.25".into()),
            None,
            None,
            Some("-2.5".into()),
            Some("f".into()),
            None
        ]
    );
    // SELECT with typed binary parameters: each compares by value. The statement describes
    // each parameter with the type of its place, as PostgreSQL does, so the client needs no
    // declared types.
    let select = client
        .prepare("SELECT host FROM typed WHERE n = $1 AND x < $2 AND ts >= $3 AND ok = $4")
        .await
        .unwrap();
    assert_eq!(
        select.params(),
        &[Type::INT8, Type::FLOAT8, Type::TIMESTAMP, Type::BOOL]
    );
    let row = client
        .query_one(&select, &[&i64::MAX, &0.5f64, &t0, &true])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "a''b");
    // A float compared with a BIGINT column stays a float (not truncated to the column's
    // type), as in PostgreSQL: 1.5 < 7 but 7.5 > 7.
    let between = client
        .prepare_typed(
            "SELECT count(*) FROM typed WHERE small > $1",
            &[Type::FLOAT8],
        )
        .await
        .unwrap();
    let count = |row: tokio_postgres::Row| row.get::<_, i64>(0);
    assert_eq!(
        count(client.query_one(&between, &[&6.5f64]).await.unwrap()),
        1
    );
    assert_eq!(
        count(client.query_one(&between, &[&7.5f64]).await.unwrap()),
        0
    );
    // A NULL parameter compares as NULL.
    let by_n = client
        .prepare_typed("SELECT count(*) FROM typed WHERE n = $1", &[Type::INT8])
        .await
        .unwrap();
    assert_eq!(count(client.query_one(&by_n, &[&none]).await.unwrap()), 0);
    server.stop().await;
}

/// Parse (parameter types by oid, 0 for none), Bind (text parameters), Execute and Sync of
/// the unnamed statement: the replies, to ReadyForQuery.
async fn run_with_text_params(
    socket: &mut tokio::net::TcpStream,
    query: &str,
    oids: &[u32],
    params: &[&str],
) -> Vec<(u8, Vec<u8>)> {
    use tokio::io::AsyncWriteExt;
    let mut parse = format!("\0{query}\0").into_bytes();
    parse.extend_from_slice(&(oids.len() as i16).to_be_bytes());
    for oid in oids {
        parse.extend_from_slice(&oid.to_be_bytes());
    }
    let mut bind = b"\0\0\0\0".to_vec();
    bind.extend_from_slice(&(params.len() as i16).to_be_bytes());
    for p in params {
        bind.extend_from_slice(&(p.len() as i32).to_be_bytes());
        bind.extend_from_slice(p.as_bytes());
    }
    bind.extend_from_slice(b"\0\0");
    let mut out = frame(b'P', &parse);
    out.extend(frame(b'B', &bind));
    out.extend(frame(b'E', b"\0\0\0\0\0"));
    out.extend(frame(b'S', b""));
    socket.write_all(&out).await.unwrap();
    read_until_ready(socket).await
}

/// [`run_with_text_params`] with no declared types, for a query of one result row: asserts
/// the replies are ParseComplete, BindComplete, one DataRow, CommandComplete and
/// ReadyForQuery, and returns the DataRow's body.
async fn one_row_with_text_params(
    socket: &mut tokio::net::TcpStream,
    query: &str,
    params: &[&str],
) -> Vec<u8> {
    let mut replies = run_with_text_params(socket, query, &[], params).await;
    let tags: String = replies.iter().map(|(t, _)| *t as char).collect();
    assert_eq!(tags, "12DCZ", "{replies:?}");
    replies.swap_remove(2).1
}

/// The SQLSTATE and message of an ErrorResponse body.
fn error_fields(body: &[u8]) -> (String, String) {
    let field = |tag: u8| {
        body.split(|b| *b == 0)
            .find(|f| f.first() == Some(&tag))
            .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
            .unwrap_or_default()
    };
    (field(b'C'), field(b'M'))
}

#[tokio::test]
async fn text_parameters_with_a_declared_type_are_read_as_that_type() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(TYPED).await.unwrap();
    let (mut socket, _) = raw_connect(server.addr).await;
    // $2 declared int8, the others left to the columns; text keeps its `''` as sent.
    let insert = "INSERT INTO typed (ts, n, host) VALUES ($1, $2, $3)";
    let replies = run_with_text_params(
        &mut socket,
        insert,
        &[0, 20, 0],
        &["2024-01-01 00:00:09", "12", "a''b"],
    )
    .await;
    let tags: String = replies.iter().map(|(t, _)| *t as char).collect();
    assert_eq!(tags, "12CZ", "{replies:?}");
    let rows = data_rows(
        &client
            .simple_query("SELECT n, host FROM typed")
            .await
            .unwrap(),
    );
    assert_eq!(rows, vec![vec![Some("12".into()), Some("a''b".into())]]);
    // Text that is not an int8 fails as PostgreSQL's int8 input does, naming the parameter.
    let replies = run_with_text_params(
        &mut socket,
        insert,
        &[0, 20, 0],
        &["2024-01-01 00:00:09", "12x", "c"],
    )
    .await;
    let error = replies.iter().find(|(t, _)| *t == b'E').expect("an error");
    let (code, message) = error_fields(&error.1);
    assert_eq!(code, "22P02", "{message}");
    assert!(message.contains("(parameter $2)"), "{message}");
    // A binary timestamptz is an instant: it goes into TIMESTAMPTZ as UTC.
    client
        .batch_execute("CREATE STREAM zoned (ts TIMESTAMPTZ NOT NULL, n BIGINT)")
        .await
        .unwrap();
    let at = chrono::DateTime::parse_from_rfc3339("2026-01-01T14:00:00.5+02:00").unwrap();
    client
        .execute("INSERT INTO zoned VALUES ($1, 1)", &[&at])
        .await
        .unwrap();
    let rows = data_rows(&client.simple_query("SELECT ts FROM zoned").await.unwrap());
    assert_eq!(rows, vec![vec![Some("2026-01-01 12:00:00.5+00".into())]]);
    server.stop().await;
}

#[tokio::test]
async fn text_parameters_of_unknown_type_take_the_type_of_their_place() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(TYPED).await.unwrap();
    client
        .batch_execute(
            "INSERT INTO typed VALUES ('2024-01-01 00:00:01', 5, 1, 1.5, true, 'a'), \
             ('2024-01-01 00:00:03', 50, 2, 2.5, false, 'b')",
        )
        .await
        .unwrap();
    // Parse with no parameter types, Bind text values: the timestamp and the number are
    // read as the types of the columns they are compared with.
    let (mut socket, _) = raw_connect(server.addr).await;
    let row = one_row_with_text_params(
        &mut socket,
        "SELECT host FROM typed WHERE ts > $1 AND n < $2",
        &["2024-01-01 00:00:02", "100"],
    )
    .await;
    // DataRow: one column of 1 byte, "b".
    assert_eq!(row, b"\0\x01\0\0\0\x01b");
    // EXECUTE's quoted arguments are text of unknown type too.
    client
        .batch_execute("PREPARE later AS SELECT host FROM typed WHERE ts > $1 AND x > $2")
        .await
        .unwrap();
    let rows = data_rows(
        &client
            .simple_query("EXECUTE later('2024-01-01 00:00:00', '2')")
            .await
            .unwrap(),
    );
    assert_eq!(rows, vec![vec![Some("b".into())]]);
    // Its numbers are typed as PostgreSQL types them: 2.5 is an exact numeric, which an
    // assignment to BIGINT rounds away from zero.
    client
        .batch_execute(
            "PREPARE ins AS INSERT INTO typed (ts, n) VALUES ($1, $2); \
             EXECUTE ins('2024-01-01 00:00:05', 2.5)",
        )
        .await
        .unwrap();
    let rows = data_rows(
        &client
            .simple_query("SELECT n FROM typed WHERE ts = '2024-01-01 00:00:05'")
            .await
            .unwrap(),
    );
    assert_eq!(rows, vec![vec![Some("3".into())]]);
    server.stop().await;
}

/// Drivers' catalog queries pass names as parameters where PostgreSQL reads them as
/// literals (SQLAlchemy's inspector): a name cast to REGCLASS, a LIKE pattern with another
/// escape character.
#[tokio::test]
async fn catalog_queries_read_text_parameters_as_literals() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(TYPED).await.unwrap();
    let (mut socket, _) = raw_connect(server.addr).await;
    let row = one_row_with_text_params(
        &mut socket,
        "SELECT c.relname FROM pg_catalog.pg_class c \
         WHERE c.oid = CAST($1 AS REGCLASS) AND c.relname NOT LIKE $2::VARCHAR || '%' ESCAPE '/'",
        &["typed", "pg/_"],
    )
    .await;
    // DataRow: one column of 5 bytes, "typed".
    assert_eq!(row, b"\0\x01\0\0\0\x05typed");
    server.stop().await;
}

#[tokio::test]
async fn bad_parameters_fail_with_their_sqlstate_and_number() {
    use tokio_postgres::types::Type;
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(TYPED).await.unwrap();
    // A binary BIGINT 4 bytes long.
    let e = client
        .execute(
            "INSERT INTO typed (ts, n) VALUES ('2024-01-01', $1)",
            &[&ShortInt8],
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22P03", "{e:?}");
    assert!(message(&e).contains("parameter 1"), "{e:?}");
    let insert = client
        .prepare_typed(
            "INSERT INTO typed (ts, small, n) VALUES ('2024-01-01', $1, $2)",
            &[Type::INT8, Type::TEXT],
        )
        .await
        .unwrap();
    // A BIGINT too large for an INT column.
    let e = client
        .execute(&insert, &[&(1i64 << 40), &"1"])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22003", "{e:?}");
    assert!(message(&e).contains("parameter $1"), "{e:?}");
    // Text that is not a BIGINT.
    let e = client.execute(&insert, &[&1i64, &"x"]).await.unwrap_err();
    assert_eq!(code(&e), "22P02", "{e:?}");
    assert!(message(&e).contains("parameter $2"), "{e:?}");
    // Text for a SELECT's BIGINT placeholder.
    let select = client
        .prepare_typed("SELECT host FROM typed WHERE n = $1", &[Type::TEXT])
        .await
        .unwrap();
    let e = client.query(&select, &[&"x"]).await.unwrap_err();
    assert_eq!(code(&e), "22P02", "{e:?}");
    assert!(message(&e).contains("parameter $1"), "{e:?}");
    // The server goes on serving.
    let rows = data_rows(
        &client
            .simple_query("SELECT count(*) FROM typed")
            .await
            .unwrap(),
    );
    assert_eq!(rows, vec![vec![Some("0".into())]]);
    server.stop().await;
}

/// Non-ASCII identifiers, literals and comments in a continuous query (the text was once
/// sliced inside a character, which panicked on every later catalog read and cut every
/// client's `SELECT 1` off with 08P01).
#[tokio::test]
async fn non_ascii_query_text_is_served_and_shown_back() {
    let server = Server::start(None).await;
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY q AS SELECT ts, host AS café FROM events \
             WHERE host <> 'ñandú' /* ü */;
             CREATE CONTINUOUS QUERY p AS SELECT * FROM events MATCH_RECOGNIZE (
               PARTITION BY host ORDER BY ts
               MEASURES FINAL LAST(a.amount) AS \"mé\", RUNNING COUNT(a.*) AS n
               PATTERN (a+) DEFINE a AS host <> 'é€' AND amount > 1) AS m",
        )
        .await
        .unwrap();
    let other = server.connect().await;
    for c in [&client, &other] {
        let rows = data_rows(&c.simple_query("SELECT 1").await.unwrap());
        assert_eq!(rows, vec![vec![Some("1".to_string())]]);
    }
    let rows = data_rows(
        &other
            .simple_query(
                "SELECT relname, pg_get_viewdef(oid) FROM pg_catalog.pg_class \
                 WHERE relname IN ('q', 'p') ORDER BY relname",
            )
            .await
            .unwrap(),
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    let def = |i: usize| rows[i][1].clone().unwrap_or_default();
    assert!(
        def(0).contains("FINAL LAST(a.amount) AS \"mé\""),
        "{}",
        def(0)
    );
    assert!(
        def(1).contains("café") && def(1).contains("'ñandú'"),
        "{}",
        def(1)
    );
    client
        .batch_execute("INSERT INTO events VALUES ('2024-01-01 00:00:01', 'ñandú', 5)")
        .await
        .unwrap();
}
