//! Ad hoc results streamed as they are produced (issue #30): a result past the old 1M-row
//! limit arrives whole, its first rows arrive before it ends (and a CancelRequest ends it),
//! an Execute with a row limit suspends the portal and the next goes on, an error in the
//! middle arrives after the rows before it, cursors read a SELECT as it runs, and the row
//! bound is an opt-in session setting. Against the server on 127.0.0.1:0 with tokio-postgres,
//! the raw protocol and psql.

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

use crate::pg_errors;

use std::net::SocketAddr;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use pg_errors::code;
use saql::{Engine, EngineConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// More rows than the old fixed bound on a result (1,000,000).
const PAST_OLD_LIMIT: i64 = 1_200_000;

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Server {
        let engine = Engine::open(EngineConfig::default()).expect("engine opens");
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
        let conn = format!(
            "host=127.0.0.1 port={} user=saql dbname=saql",
            self.addr.port()
        );
        let (client, connection) = tokio_postgres::connect(&conn, NoTls).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = self.task.await;
    }
}

/// A raw protocol connection, past start-up, with its cancel key (process id, secret).
struct Raw {
    socket: TcpStream,
    key: (i32, i32),
}

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        let mut body = 196_608i32.to_be_bytes().to_vec();
        body.extend_from_slice(b"user\0saql\0database\0saql\0\0");
        let mut startup = (body.len() as i32 + 4).to_be_bytes().to_vec();
        startup.extend_from_slice(&body);
        socket.write_all(&startup).await.unwrap();
        let mut raw = Raw {
            socket,
            key: (0, 0),
        };
        loop {
            let (tag, body) = raw.message().await;
            if tag == b'K' {
                let word = |i: usize| i32::from_be_bytes(body[i..i + 4].try_into().unwrap());
                raw.key = (word(0), word(4));
            }
            if tag == b'Z' {
                return raw;
            }
        }
    }

    async fn message(&mut self) -> (u8, Vec<u8>) {
        let tag = self.socket.read_u8().await.unwrap();
        let len = self.socket.read_i32().await.unwrap() as usize;
        let mut body = vec![0; len - 4];
        self.socket.read_exact(&mut body).await.unwrap();
        (tag, body)
    }

    async fn query(&mut self, sql: &str) {
        let mut body = sql.as_bytes().to_vec();
        body.push(0);
        let mut m = vec![b'Q'];
        m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        m.extend_from_slice(&body);
        self.socket.write_all(&m).await.unwrap();
    }

    /// Reads to ReadyForQuery: the DataRows counted, and the tags of the other messages in
    /// order with an ErrorResponse's SQLSTATE.
    async fn until_ready(&mut self) -> (usize, Vec<String>) {
        let (mut rows, mut others) = (0, Vec::new());
        loop {
            match self.message().await {
                (b'D', _) => rows += 1,
                (b'E', body) => others.push(format!("E {}", sqlstate(&body))),
                (tag, _) => others.push((tag as char).to_string()),
            }
            if others.last().is_some_and(|t| t == "Z") {
                return (rows, others);
            }
        }
    }
}

/// The SQLSTATE field of an ErrorResponse body.
fn sqlstate(body: &[u8]) -> String {
    body.split(|b| *b == 0)
        .find_map(|f| f.strip_prefix(b"C"))
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .unwrap_or_default()
}

/// Sends a CancelRequest for the connection with `key`, as libpq does, on its own socket.
async fn cancel(addr: SocketAddr, key: (i32, i32)) {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let mut m = 16i32.to_be_bytes().to_vec();
    m.extend_from_slice(&80_877_102i32.to_be_bytes());
    m.extend_from_slice(&key.0.to_be_bytes());
    m.extend_from_slice(&key.1.to_be_bytes());
    socket.write_all(&m).await.unwrap();
}

fn numbers(n: i64) -> String {
    format!("SELECT g FROM generate_series(1, {n}) AS s(g)")
}

#[tokio::test]
async fn a_result_past_the_old_limit_arrives_whole_in_every_protocol() {
    let server = Server::start().await;
    // The simple protocol, counted on the wire.
    let mut raw = Raw::connect(server.addr).await;
    raw.query(&numbers(PAST_OLD_LIMIT)).await;
    let (rows, others) = raw.until_ready().await;
    assert_eq!(rows as i64, PAST_OLD_LIMIT);
    assert_eq!(others, ["T", "C", "Z"]);
    // The extended protocol, read as it arrives.
    let client = server.connect().await;
    let rows = client
        .query_raw(&numbers(PAST_OLD_LIMIT), Vec::<i64>::new())
        .await
        .unwrap();
    let (count, sum) = rows
        .try_fold((0i64, 0i64), |(n, s), r| async move {
            Ok((n + 1, s + r.get::<_, i64>(0)))
        })
        .await
        .unwrap();
    assert_eq!(
        (count, sum),
        (PAST_OLD_LIMIT, PAST_OLD_LIMIT * (PAST_OLD_LIMIT + 1) / 2)
    );
    // COPY TO STDOUT.
    let copy = client
        .copy_out(&format!("COPY ({}) TO STDOUT", numbers(PAST_OLD_LIMIT)))
        .await
        .unwrap();
    let lines = copy
        .try_fold(0usize, |n, data| async move {
            Ok(n + data.iter().filter(|b| **b == b'\n').count())
        })
        .await
        .unwrap();
    assert_eq!(lines as i64, PAST_OLD_LIMIT);
    server.stop().await;
}

#[tokio::test]
async fn first_rows_arrive_before_the_query_ends_and_cancel_ends_it() {
    let server = Server::start().await;
    // A result that would take hours: its first rows arrive, then a CancelRequest ends it.
    let endless = numbers(1_000_000_000_000);
    let mut raw = Raw::connect(server.addr).await;
    raw.query(&endless).await;
    assert_eq!(raw.message().await.0, b'T');
    assert_eq!(raw.message().await.0, b'D');
    cancel(server.addr, raw.key).await;
    let (_, others) = tokio::time::timeout(Duration::from_secs(30), raw.until_ready())
        .await
        .expect("a canceled SELECT ends");
    assert_eq!(others, ["E 57014", "Z"]);
    // The connection goes on.
    raw.query("SELECT 1").await;
    assert_eq!(
        raw.until_ready().await,
        (1, vec!["T".into(), "C".into(), "Z".into()])
    );

    // The same in the extended protocol.
    let client = server.connect().await;
    let mut rows = Box::pin(client.query_raw(&endless, Vec::<i64>::new()).await.unwrap());
    let first = rows.next().await.unwrap().unwrap();
    assert_eq!(first.get::<_, i64>(0), 1);
    client.cancel_token().cancel_query(NoTls).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match rows.next().await {
                Some(Ok(_)) => continue,
                Some(Err(e)) => return code(&e),
                None => return "no error".into(),
            }
        }
    })
    .await
    .expect("a canceled SELECT ends");
    assert_eq!(ended, "57014");
    drop(rows);
    let one: i64 = client
        .query_one("SELECT 1::BIGINT", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(one, 1);
    server.stop().await;
}

#[tokio::test]
async fn execute_with_a_row_limit_reads_a_large_select_in_parts() {
    let server = Server::start().await;
    let mut client = server.connect().await;
    let tx = client.transaction().await.unwrap();
    let select = tx.prepare(&numbers(PAST_OLD_LIMIT)).await.unwrap();
    let portal = tx.bind(&select, &[]).await.unwrap();
    let mut parts = Vec::new();
    let mut next = 1i64;
    loop {
        let rows = tx.query_portal(&portal, 500_000).await.unwrap();
        for row in &rows {
            assert_eq!(row.get::<_, i64>(0), next);
            next += 1;
        }
        parts.push(rows.len());
        if rows.is_empty() {
            break;
        }
    }
    assert_eq!(parts, [500_000, 500_000, 200_000, 0]);
    tx.rollback().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn an_error_in_the_middle_arrives_after_the_rows_before_it() {
    let server = Server::start().await;
    // Division by zero at the 20,000th row: the batches before it are sent first.
    let failing = "SELECT 1 / (g - 20000) AS x FROM generate_series(1, 30000) AS s(g)";
    let mut raw = Raw::connect(server.addr).await;
    raw.query(failing).await;
    let (rows, others) = raw.until_ready().await;
    assert!((1..20_000).contains(&rows), "{rows} rows before the error");
    assert_eq!(others, ["T", "E 22012", "Z"]);

    let client = server.connect().await;
    let mut stream = Box::pin(client.query_raw(failing, Vec::<i64>::new()).await.unwrap());
    let mut before = 0;
    let error = loop {
        match stream.next().await {
            Some(Ok(_)) => before += 1,
            Some(Err(e)) => break code(&e),
            None => break "no error".into(),
        }
    };
    assert_eq!((before, error.as_str()), (rows, "22012"));
    server.stop().await;
}

fn data_rows(messages: &[SimpleQueryMessage]) -> Vec<Vec<String>> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or_default().to_string())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_cursor_reads_a_select_as_it_runs() {
    let server = Server::start().await;
    let client = server.connect().await;
    client
        .batch_execute(&format!(
            "BEGIN; DECLARE c CURSOR FOR {}",
            numbers(1_000_000_000_000)
        ))
        .await
        .unwrap();
    let first = data_rows(&client.simple_query("FETCH 3 FROM c").await.unwrap());
    assert_eq!(first, [["1"], ["2"], ["3"]]);
    let next = data_rows(&client.simple_query("FETCH 2 FROM c").await.unwrap());
    assert_eq!(next, [["4"], ["5"]]);
    client.batch_execute("CLOSE c; COMMIT").await.unwrap();
    // A cursor whose query fails after some rows: a FETCH gets them, then the error.
    client
        .batch_execute(
            "BEGIN; DECLARE d CURSOR FOR \
             SELECT 1 / (g - 20000) AS x FROM generate_series(1, 30000) AS s(g)",
        )
        .await
        .unwrap();
    let e = client.simple_query("FETCH ALL FROM d").await.unwrap_err();
    assert_eq!(code(&e), "22012");
    client.batch_execute("ROLLBACK").await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn the_row_bound_is_an_opt_in_session_setting() {
    let server = Server::start().await;
    let client = server.connect().await;
    let show = |sql: &'static str| {
        let client = &client;
        async move { data_rows(&client.simple_query(sql).await.unwrap())[0][0].clone() }
    };
    assert_eq!(show("SHOW saql.max_result_rows").await, "0");
    client
        .batch_execute("SET saql.max_result_rows = 1000")
        .await
        .unwrap();
    let e = client.simple_query(&numbers(5000)).await.unwrap_err();
    assert_eq!(code(&e), "54000");
    assert!(
        e.as_db_error().unwrap().message().contains("1000 rows"),
        "{e}"
    );
    let rows = client.simple_query(&numbers(1000)).await.unwrap();
    assert_eq!(data_rows(&rows).len(), 1000);
    assert_eq!(show("SHOW saql.max_result_rows").await, "1000");
    assert_eq!(
        show("SELECT setting FROM pg_settings WHERE name = 'saql.max_result_rows'").await,
        "1000"
    );
    assert_eq!(
        show("SELECT current_setting('saql.max_result_rows')").await,
        "1000"
    );
    // Another session has its own.
    let other = server.connect().await;
    assert_eq!(
        data_rows(&other.simple_query(&numbers(5000)).await.unwrap()).len(),
        5000
    );
    client
        .batch_execute("SET saql.max_result_rows = DEFAULT")
        .await
        .unwrap();
    assert_eq!(
        data_rows(&client.simple_query(&numbers(5000)).await.unwrap()).len(),
        5000
    );
    let e = client
        .batch_execute("SET saql.max_result_bytes = 'lots'")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22023");
    server.stop().await;
}

#[tokio::test]
async fn psql_reads_a_large_select_through_its_fetch_count_cursor() {
    if std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("psql not installed; skipped");
        return;
    }
    let server = Server::start().await;
    let port = server.addr.port().to_string();
    let sql = numbers(PAST_OLD_LIMIT);
    let out = tokio::process::Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "saql",
            "-d",
            "saql",
            "-At",
        ])
        .args(["-v", "FETCH_COUNT=200000", "-c", &sql])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = out.stdout.iter().filter(|b| **b == b'\n').count();
    assert_eq!(lines as i64, PAST_OLD_LIMIT);
    server.stop().await;
}
