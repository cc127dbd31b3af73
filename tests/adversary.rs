//! Adversary tests (issue #11): the real `saql serve` process on 127.0.0.1, attacked the ways
//! the issue found took it down, stalled it or let memory run away. Each attack must end in
//! a clear error with the right SQLSTATE, and the server must still answer `SELECT 1`.
//! Limits are set low by flags where the defaults would take long to reach.

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

use crate::pg_errors;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::SinkExt;
use pg_errors::{code, message};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// A `saql serve` child process with its own data directory.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(flags: &[&str]) -> Server {
        Server::start_with_fd_limit(flags, None)
    }

    /// Starts the server; with `fds`, under `ulimit -n fds`.
    fn start_with_fd_limit(flags: &[&str], fds: Option<u32>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let bin = env!("CARGO_BIN_EXE_saql");
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--listen".into(),
            addr.to_string(),
            "--workers".into(),
            "1".into(),
            "--data-dir".into(),
            dir.path().display().to_string(),
            "--checkpoint-interval".into(),
            "0".into(),
        ];
        args.extend(flags.iter().map(|s| s.to_string()));
        let mut command = match fds {
            None => {
                let mut c = Command::new(bin);
                c.args(&args);
                c
            }
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(bin)
                    .args(&args);
                c
            }
        };
        let child = command
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("saql starts");
        Server {
            child,
            addr,
            _dir: dir,
        }
    }

    fn conn_str(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=saql dbname=saql",
            self.addr.port()
        )
    }

    async fn connect(&self) -> Client {
        for _ in 0..600 {
            if let Ok(client) = self.try_connect().await {
                return client;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the server did not come up on {}", self.addr);
    }

    async fn try_connect(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::connect(&self.conn_str(), NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// The server process is alive and a new client gets `SELECT 1`.
    async fn assert_alive(&self) {
        let client = self.connect().await;
        let rows = client.simple_query("SELECT 1").await.expect("SELECT 1");
        assert_eq!(data_rows(&rows), vec![vec!["1".to_string()]]);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn data_rows(messages: &[SimpleQueryMessage]) -> Vec<Vec<String>> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("NULL").to_string())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// Runs `sql`, which must fail with `sqlstate`; returns the message.
async fn fails(client: &Client, sql: &str, sqlstate: &str) -> String {
    let e = client
        .simple_query(sql)
        .await
        .err()
        .unwrap_or_else(|| panic!("expected {sqlstate} from {:.80}", sql));
    assert_eq!(code(&e), sqlstate, "{e:?}");
    message(&e)
}

const EVENTS: &str = "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, t TEXT, \
                      WATERMARK FOR ts AS ts)";

fn ts(second: usize) -> String {
    let t = chrono::DateTime::from_timestamp(1_700_000_000 + second as i64, 0).unwrap();
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// `n` CSV lines `ts,k,v,t` from second `from` on, with a text of `width` bytes.
fn csv_rows(from: usize, n: usize, width: usize) -> String {
    let text = "x".repeat(width);
    (from..from + n)
        .map(|i| format!("{},{},{},{text}\n", ts(i), i % 3, i))
        .collect()
}

async fn copy(client: &Client, data: String) -> Result<u64, tokio_postgres::Error> {
    let sink = client
        .copy_in("COPY s FROM STDIN WITH (FORMAT csv)")
        .await?;
    futures::pin_mut!(sink);
    // In chunks, as psql sends them.
    for chunk in data.as_bytes().chunks(64 << 10) {
        sink.send(bytes::Bytes::copy_from_slice(chunk)).await?;
    }
    sink.finish().await
}

#[tokio::test]
async fn deep_and_huge_statements_fail_with_54001() {
    let server = Server::start(&[]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();

    let sum = vec!["1"; 1000].join("+");
    let m = fails(&client, &format!("SELECT {sum}"), "54001").await;
    assert!(m.contains("256"), "names the limit: {m}");
    let nested = format!(
        "CREATE CONTINUOUS QUERY p AS SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts \
         MEASURES COUNT(*) AS n PATTERN ({}a{}) DEFINE a AS v > 0)",
        "(".repeat(3000),
        ")".repeat(3000)
    );
    fails(&client, &nested, "54001").await;
    let stars = format!(
        "CREATE CONTINUOUS QUERY p AS SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts \
         MEASURES COUNT(*) AS n PATTERN (a{}) DEFINE a AS v > 0)",
        "*?".repeat(3000)
    );
    fails(&client, &stars, "54001").await;
    fails(
        &client,
        &format!("SELECT {}true", "NOT ".repeat(3000)),
        "54001",
    )
    .await;
    let parens = format!("SELECT {}1{}", "(".repeat(60), ")".repeat(60));
    fails(&client, &parens, "54001").await;
    // Within the limits, deep statements run (in a debug build 30 `NOT`s took a 2 MiB
    // thread stack).
    let nots = format!("SELECT {}({}true)", "NOT ".repeat(20), "NOT ".repeat(20));
    let rows = client.simple_query(&nots).await.unwrap();
    assert_eq!(data_rows(&rows), vec![vec!["t".to_string()]]);
    let long = format!("SELECT '{}'", "x".repeat(2 << 20));
    let m = fails(&client, &long, "54001").await;
    assert!(m.contains("1048576"), "names the limit: {m}");
    server.assert_alive().await;

    // ~150 summed terms in WHERE are within the limits: the query runs.
    let terms = vec!["v"; 150].join(" + ");
    client
        .batch_execute(&format!(
            "CREATE CONTINUOUS QUERY wide AS SELECT ts, k FROM s WHERE {terms} > 0"
        ))
        .await
        .unwrap();
    copy(&client, csv_rows(1, 10, 1)).await.unwrap();
    let shown = data_rows(&client.simple_query("SHOW QUERIES").await.unwrap());
    assert_eq!(shown[0][2], "running", "{shown:?}");
    assert_eq!(shown[0][4], "10", "{shown:?}");
    server.assert_alive().await;
}

#[tokio::test]
async fn hop_fan_out_is_refused_at_create_with_54000() {
    let server = Server::start(&[]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    let m = fails(
        &client,
        "CREATE CONTINUOUS QUERY h AS SELECT k, window_end, COUNT(*) AS n \
         FROM HOP(s, ts, INTERVAL '1' MILLISECOND, INTERVAL '1' DAY) \
         GROUP BY k, window_start, window_end",
        "54000",
    )
    .await;
    assert!(m.contains("1000 windows per row"), "{m}");
    // Within the bound, HOP works.
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY h AS SELECT k, window_end, COUNT(*) AS n \
             FROM HOP(s, ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR) \
             GROUP BY k, window_start, window_end",
        )
        .await
        .unwrap();
    copy(&client, csv_rows(1, 10, 1)).await.unwrap();
    server.assert_alive().await;
}

#[tokio::test]
async fn unbounded_pattern_fails_its_query_with_53200_and_others_run_on() {
    let server = Server::start(&[]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY greedy AS SELECT * FROM s MATCH_RECOGNIZE ( \
               ORDER BY ts MEASURES COUNT(*) AS n PATTERN (a+) DEFINE a AS true); \
             CREATE CONTINUOUS QUERY plain AS SELECT ts, v FROM s WHERE v >= 0",
        )
        .await
        .unwrap();
    // Every row starts an attempt that maps every later row: the rows held grow with the
    // square of the rows, past the bound after about 1400 rows.
    copy(&client, csv_rows(1, 2000, 1)).await.unwrap();
    let shown = data_rows(&client.simple_query("SHOW QUERIES").await.unwrap());
    let status = |name: &str| {
        shown
            .iter()
            .find(|r| r[0] == name)
            .map(|r| r[2].clone())
            .unwrap()
    };
    assert!(
        status("greedy").starts_with("failed: MATCH_RECOGNIZE holds more than"),
        "{shown:?}"
    );
    assert_eq!(status("plain"), "running");
    // Its subscribers get the error with its SQLSTATE.
    fails(&client, "SUBSCRIBE greedy", "53200").await;
    // The other query runs on.
    copy(&client, csv_rows(3000, 5, 1)).await.unwrap();
    let n = data_rows(
        &client
            .simple_query("SELECT count(*) FROM plain")
            .await
            .unwrap(),
    );
    assert_eq!(n, vec![vec!["2005".to_string()]]);
    server.assert_alive().await;
}

#[tokio::test]
async fn a_query_past_its_state_bound_fails_with_53200_and_others_run_on() {
    let server = Server::start(&["--max-query-state-bytes", "1000000"]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY wide AS SELECT k, window_end, COUNT(*) AS n \
               FROM TUMBLE(s, ts, INTERVAL '1' DAY) GROUP BY k, window_start, window_end; \
             CREATE CONTINUOUS QUERY plain AS SELECT ts, v FROM s WHERE v >= 0",
        )
        .await
        .unwrap();
    // A new group per row, all in one open window: its table passes 1 MB.
    let rows: String = (0..60_000)
        .map(|i| format!("{},{i},{i},x\n", ts(i / 1000)))
        .collect();
    copy(&client, rows).await.unwrap();
    let shown = data_rows(&client.simple_query("SHOW QUERIES").await.unwrap());
    let row = |name: &str| shown.iter().find(|r| r[0] == name).unwrap().clone();
    let (wide, plain) = (row("wide"), row("plain"));
    assert!(
        wide[2].starts_with("failed: query \"wide\" holds")
            && wide[2].contains("over the bound of 1000000 bytes"),
        "{wide:?}"
    );
    // SHOW QUERIES: ..., subscribers_cut_off, suppressed, state_bytes, shed_rows.
    let state_bytes: u64 = wide[11].parse().unwrap();
    assert!(state_bytes > 1_000_000, "{wide:?}");
    assert_eq!(plain[2], "running");
    // A filter holds no operator state; its retained results take at most a quarter of
    // the bound.
    let plain_bytes: u64 = plain[11].parse().unwrap();
    assert!((1..=250_000).contains(&plain_bytes), "{plain:?}");
    // Its subscribers get the error, naming the query.
    let e = fails(&client, "SUBSCRIBE wide", "53200").await;
    assert!(e.contains("query \"wide\""), "{e}");
    // The other query on the stream runs on.
    copy(&client, csv_rows(100, 5, 1)).await.unwrap();
    let shown = data_rows(&client.simple_query("SHOW QUERIES").await.unwrap());
    let plain = shown.iter().find(|r| r[0] == "plain").unwrap();
    assert_eq!((plain[2].as_str(), plain[4].as_str()), ("running", "60005"));
    server.assert_alive().await;
}

#[tokio::test]
async fn huge_ad_hoc_results_and_slow_statements_are_stopped() {
    let server = Server::start(&["--max-result-rows", "100000"]);
    let client = server.connect().await;
    let m = fails(
        &client,
        "SELECT * FROM generate_series(1, 300000000)",
        "54000",
    )
    .await;
    assert!(m.contains("100000 rows"), "{m}");
    // Within the limit, results arrive whole.
    let rows = client
        .simple_query("SELECT * FROM generate_series(1, 1000)")
        .await
        .unwrap();
    assert_eq!(data_rows(&rows).len(), 1000);

    client
        .simple_query("SET statement_timeout = 200")
        .await
        .unwrap();
    let m = fails(
        &client,
        "SELECT count(*) FROM generate_series(1, 100000000000)",
        "57014",
    )
    .await;
    assert!(m.contains("statement timeout"), "{m}");
    client
        .simple_query("SET statement_timeout = 0")
        .await
        .unwrap();
    server.assert_alive().await;
}

#[tokio::test]
async fn a_heavy_statement_does_not_stall_the_other_clients() {
    let server = Server::start(&[]);
    let other = server.connect().await;
    other.batch_execute(EVENTS).await.unwrap();
    other
        .batch_execute("CREATE CONTINUOUS QUERY plain AS SELECT ts, v FROM s WHERE v >= 0")
        .await
        .unwrap();
    let heavy = server.connect().await;
    let slow = tokio::spawn(async move {
        heavy
            .simple_query("SELECT count(*) FROM generate_series(1, 100000000000)")
            .await
            .map(|_| ())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // While it runs, the others connect, write, read and change the catalog.
    for i in 0..5 {
        server.assert_alive().await;
        copy(&other, csv_rows(i * 10, 10, 1)).await.unwrap();
        let rows = data_rows(
            &other
                .simple_query("SELECT count(*) FROM plain")
                .await
                .unwrap(),
        );
        assert_eq!(rows, vec![vec![((i + 1) * 10).to_string()]]);
    }
    other
        .batch_execute("CREATE STREAM s2 (ts TIMESTAMP NOT NULL); DROP STREAM s2")
        .await
        .unwrap();
    assert!(!slow.is_finished(), "the heavy statement ended: {slow:?}");
    slow.abort();
}

/// Reads backend messages from `socket` until an ErrorResponse; returns its SQLSTATE and
/// message.
fn read_error(socket: &mut TcpStream) -> (String, String) {
    loop {
        let mut head = [0u8; 5];
        socket.read_exact(&mut head).expect("a message");
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len - 4];
        socket.read_exact(&mut body).expect("its body");
        if head[0] != b'E' {
            continue;
        }
        let (mut code, mut text) = (String::new(), String::new());
        for field in body.split(|&b| b == 0) {
            match field.first() {
                Some(b'C') => code = String::from_utf8_lossy(&field[1..]).into(),
                Some(b'M') => text = String::from_utf8_lossy(&field[1..]).into(),
                _ => {}
            }
        }
        return (code, text);
    }
}

/// A raw protocol client that has sent a startup message and `query` and reads nothing.
fn raw_client(addr: SocketAddr, query: &str) -> TcpStream {
    let mut socket = TcpStream::connect(addr).unwrap();
    let mut startup = Vec::new();
    startup.extend_from_slice(&196608u32.to_be_bytes());
    for s in ["user", "saql", "database", "saql", ""] {
        startup.extend_from_slice(s.as_bytes());
        startup.push(0);
    }
    let mut packet = ((startup.len() + 4) as u32).to_be_bytes().to_vec();
    packet.extend_from_slice(&startup);
    packet.push(b'Q');
    packet.extend_from_slice(&((query.len() + 5) as u32).to_be_bytes());
    packet.extend_from_slice(query.as_bytes());
    packet.push(0);
    socket.write_all(&packet).unwrap();
    socket
}

#[tokio::test]
async fn a_malformed_message_closes_its_connection_with_08p01() {
    // Found by tests/no_panic.rs: a Parse whose parameter-type count promises more than the
    // message holds made the protocol decoder (pgwire) panic in the connection's task.
    let server = Server::start(&[]);
    server.assert_alive().await;
    let mut socket = raw_client(server.addr, "SELECT 1");
    let mut parse = vec![b'P'];
    let body = b"\0SELECT $1\0\0\x05";
    parse.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    parse.extend_from_slice(body);
    socket.write_all(&parse).unwrap();
    let (code, text) = read_error(&mut socket);
    assert_eq!(code, "08P01", "{text}");
    assert!(text.contains("invalid frontend message"), "{text}");
    server.assert_alive().await;
}

#[tokio::test]
async fn an_execute_with_a_huge_row_limit_returns_its_rows() {
    // Found by the wire fuzz target: pgwire reserved room for max_rows rows at once, and an
    // Execute asking for 721 million aborted the server.
    let server = Server::start(&[]);
    server.assert_alive().await;
    let mut socket = raw_client(server.addr, "SELECT 1");
    let frame = |kind: u8, body: &[u8]| {
        let mut f = vec![kind];
        f.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        f.extend_from_slice(body);
        f
    };
    let mut out = frame(b'P', b"\0SELECT 2\0\0\0");
    out.extend(frame(b'B', b"\0\0\0\0\0\0\0\0"));
    out.extend(frame(b'E', b"\0\x2b\0\0\0"));
    out.extend(frame(b'S', b""));
    // Then an error, to read up to: the server answered everything before it.
    out.extend(frame(b'Q', b"SELECT * FROM nope\0"));
    socket.write_all(&out).unwrap();
    let (code, _) = read_error(&mut socket);
    assert_eq!(code, "42P01");
    server.assert_alive().await;
}

#[tokio::test]
async fn a_subscriber_that_never_reads_is_cut_off_with_53400() {
    let server = Server::start(&["--subscriber-buffer-bytes", "1000000"]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute("CREATE CONTINUOUS QUERY all_rows AS SELECT ts, t FROM s")
        .await
        .unwrap();
    let mut lazy = raw_client(server.addr, "SUBSCRIBE all_rows");
    // Wait until the subscription is registered.
    let subscribers = || async {
        let shown = data_rows(&client.simple_query("SHOW QUERIES").await.unwrap());
        shown[0][7].clone()
    };
    for _ in 0..200 {
        if subscribers().await == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(subscribers().await, "1");
    // 1 MB per COPY, far more than the socket buffers plus the 1 MB bound hold.
    let mut cut = false;
    for i in 0..40 {
        copy(&client, csv_rows(i * 1000, 1000, 1000)).await.unwrap();
        if subscribers().await == "0" {
            cut = true;
            break;
        }
    }
    assert!(cut, "the subscriber was never cut off");
    let (code, text) = tokio::task::spawn_blocking(move || read_error(&mut lazy))
        .await
        .unwrap();
    assert_eq!(code, "53400", "{text}");
    assert!(text.contains("1000000 bytes"), "{text}");
    server.assert_alive().await;
}

#[tokio::test]
async fn connections_past_the_limit_get_53300_and_idle_ones_are_closed() {
    let server = Server::start(&["--max-connections", "3", "--idle-session-timeout", "2"]);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(server.connect().await);
    }
    let Err(e) = server.try_connect().await else {
        panic!("a fourth client was served");
    };
    assert_eq!(code(&e), "53300", "{e:?}");
    assert!(message(&e).contains("too many clients"), "{e:?}");
    // The three sit idle past the timeout and are closed; then there is room again.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for c in &clients {
        assert!(
            c.simple_query("SELECT 1").await.is_err(),
            "an idle session survived"
        );
    }
    server.assert_alive().await;
}

#[tokio::test]
async fn failed_accepts_do_not_stop_the_server() {
    // Few file descriptors: connections past them fail in accept (EMFILE).
    let server = Server::start_with_fd_limit(&[], Some(40));
    server.assert_alive().await;
    let sockets: Vec<TcpStream> = (0..60)
        .filter_map(|_| TcpStream::connect(server.addr).ok())
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(sockets);
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.assert_alive().await;
}

#[tokio::test]
async fn copy_lines_and_copies_are_bounded_with_54000() {
    let server = Server::start(&[
        "--max-copy-line-bytes",
        "1000000",
        "--max-copy-bytes",
        "4000000",
    ]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    let mut data = csv_rows(1, 2, 10);
    data.push_str(&csv_rows(3, 1, 2_000_000));
    let e = copy(&client, data).await.unwrap_err();
    assert_eq!(code(&e), "54000", "{e:?}");
    assert!(message(&e).contains("line 3"), "{e:?}");
    // Lines within the bound but more data than a COPY may hold.
    let e = copy(&client, csv_rows(10, 5000, 1000)).await.unwrap_err();
    assert_eq!(code(&e), "54000", "{e:?}");
    assert!(message(&e).contains("4000000 bytes"), "{e:?}");
    // Nothing of either arrived; a normal COPY does.
    assert_eq!(copy(&client, csv_rows(1, 10, 10)).await.unwrap(), 10);
    let n = data_rows(&client.simple_query("SELECT count(*) FROM s").await.unwrap());
    assert_eq!(n, vec![vec!["10".to_string()]]);
    server.assert_alive().await;
}

#[tokio::test]
async fn nul_bytes_in_text_are_rejected_with_22021() {
    let server = Server::start(&[]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    // A bound parameter.
    let e = client
        .execute(
            "INSERT INTO s (ts, t) VALUES ('2024-01-01 00:00:00', $1)",
            &[&"a\0b"],
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22021", "{e:?}");
    assert!(message(&e).contains("0x00"), "{e:?}");
    // An escaped literal never gets that far: sqlparser refuses a NUL escape (42601).
    fails(
        &client,
        "INSERT INTO s (ts, t) VALUES ('2024-01-01 00:00:00', E'a\\000b')",
        "42601",
    )
    .await;
    // COPY: a raw NUL byte, and the text format's octal escape.
    let e = copy(&client, format!("{},1,1,a\0b\n", ts(1)))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22021", "{e:?}");
    let sink = client.copy_in("COPY s FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(format!("{}\t1\t1\ta\\000b\n", ts(1))))
        .await
        .unwrap();
    let e = sink.finish().await.unwrap_err();
    assert_eq!(code(&e), "22021", "{e:?}");
    let n = data_rows(&client.simple_query("SELECT count(*) FROM s").await.unwrap());
    assert_eq!(n, vec![vec!["0".to_string()]]);
    server.assert_alive().await;
}

#[tokio::test]
async fn a_full_server_still_takes_cancel_requests() {
    let server = Server::start(&["--max-connections", "1"]);
    let client = server.connect().await;
    let token = client.cancel_token();
    let slow = tokio::spawn(async move {
        client
            .simple_query("SELECT count(*) FROM generate_series(1, 100000000000)")
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let Err(e) = server.try_connect().await else {
        panic!("a second client was served");
    };
    assert_eq!(code(&e), "53300", "{e:?}");
    token.cancel_query(NoTls).await.unwrap();
    let e = slow.await.unwrap().err().map(|e| code(&e));
    assert_eq!(e.as_deref(), Some("57014"));
}

#[tokio::test]
async fn a_quiet_subscription_is_not_an_idle_session() {
    let server = Server::start(&["--idle-session-timeout", "1"]);
    let client = server.connect().await;
    client.batch_execute(EVENTS).await.unwrap();
    client
        .batch_execute("CREATE CONTINUOUS QUERY all_rows AS SELECT ts, t FROM s")
        .await
        .unwrap();
    let mut subscriber = raw_client(server.addr, "SUBSCRIBE all_rows");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // The writer's own session went idle meanwhile and was closed; a new one writes.
    let writer = server.connect().await;
    copy(&writer, csv_rows(1, 1, 5)).await.unwrap();
    let first = tokio::task::spawn_blocking(move || loop {
        let mut head = [0u8; 5];
        subscriber.read_exact(&mut head).expect("a message");
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len - 4];
        subscriber.read_exact(&mut body).expect("its body");
        if head[0] == b'D' || head[0] == b'E' {
            return head[0];
        }
    })
    .await
    .unwrap();
    assert_eq!(
        first, b'D',
        "the subscriber got an error instead of its row"
    );
}
