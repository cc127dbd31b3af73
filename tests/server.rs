#![cfg(feature = "server")]
//! End-to-end tests against the real server on 127.0.0.1 with real clients: tokio-postgres
//! (simple and extended protocol, COPY, cancel) and psql where it is installed.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
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

fn code(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.code().code().to_string())
        .unwrap_or_else(|| format!("not a db error: {e}"))
}

fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default()
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
            "CREATE CONTINUOUS QUERY q AS SELECT host FROM TUMBLE(events, ts, INTERVAL '1' MINUTE)",
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
    // Describing one relation needs more of the catalog: a clear error, not a crash.
    let out = run_psql(port, &["-c", "\\d events"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("SHOW STREAMS and SHOW QUERIES"), "{stderr}");
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
