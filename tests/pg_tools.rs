#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]
#![cfg(feature = "server")]
//! End-to-end checks of what the tools analysts open send, against the real server on
//! 127.0.0.1 with tokio-postgres and psql (where installed): parameters inside INSERT
//! expressions, `LIMIT $1`, psql's `\copy (query) TO 'file'` and its describing commands.

use std::net::SocketAddr;

use saql::{Engine, EngineConfig};
use tokio::sync::oneshot;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Server {
        let engine = Engine::open(EngineConfig {
            retain_rows: 1000,
            workers: 2,
            ..EngineConfig::default()
        })
        .expect("engine opens");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            saql::server::run(listener, engine, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Server { addr, stop, task }
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

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

const STREAM: &str = "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, \
                      WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)";

#[tokio::test]
async fn parameters_bind_inside_insert_expressions_and_limit() {
    let server = Server::start().await;
    let client = server.connect().await;
    client.batch_execute(STREAM).await.unwrap();
    // SQLAlchemy's psycopg dialect casts every parameter.
    let insert = client
        .prepare("INSERT INTO s (ts, host, amount) VALUES ($1::timestamp, $2, $3 + 1)")
        .await
        .unwrap();
    assert_eq!(insert.params(), &[Type::TIMESTAMP, Type::TEXT, Type::TEXT]);
    let t0 = chrono::NaiveDate::from_ymd_opt(2024, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    for i in 0..3i64 {
        let ts = t0 + chrono::Duration::seconds(i);
        let n = client
            .execute(&insert, &[&ts, &format!("h{i}"), &(i * 10).to_string()])
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
    // LIMIT and OFFSET counts are bigint, as PostgreSQL infers them.
    let page = client
        .prepare("SELECT host, amount FROM s WHERE amount > $1 ORDER BY ts LIMIT $2 OFFSET $3")
        .await
        .unwrap();
    assert_eq!(page.params(), &[Type::INT8, Type::INT8, Type::INT8]);
    let rows = client.query(&page, &[&0i64, &1i64, &1i64]).await.unwrap();
    let got: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    // amounts 1, 11, 21 ($3 + 1): the second row above 0.
    assert_eq!(got, vec![("h1".to_string(), 11)]);
    server.stop().await;
}

/// Runs psql on `port` with `args`; `None` when psql is not installed.
fn psql(port: u16, args: &[&str]) -> Option<std::process::Output> {
    let output = std::process::Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "saql",
            "-X",
            "-d",
            "saql",
        ])
        .args(args)
        .output();
    match output {
        Ok(o) => Some(o),
        Err(_) => {
            eprintln!("psql not installed: skipping");
            None
        }
    }
}

#[tokio::test]
async fn psql_copies_a_query_to_a_file_and_describes_without_errors() {
    let server = Server::start().await;
    let client = server.connect().await;
    client.batch_execute(STREAM).await.unwrap();
    client
        .batch_execute(
            "CREATE CONTINUOUS QUERY big AS SELECT ts, host, amount FROM s WHERE amount > 10; \
             INSERT INTO s VALUES ('2024-01-01 00:00:00', 'a', 5), ('2024-01-01 00:00:01', 'b', 50)",
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let txt = dir.path().join("s.txt");
    let port = server.addr.port();
    let copy_query = format!(
        "\\copy (SELECT host, amount FROM s ORDER BY ts) TO '{}' WITH (FORMAT csv, HEADER)",
        csv.display()
    );
    let copy_stream = format!("\\copy s TO '{}'", txt.display());
    let out = tokio::task::spawn_blocking(move || {
        psql(
            port,
            &[
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                &copy_query,
                "-c",
                &copy_stream,
                "-c",
                "\\l+",
                "-c",
                "\\df+",
                "-c",
                "\\dT+",
                "-c",
                "\\dx",
                "-c",
                "\\dconfig",
                "-c",
                "\\dt",
                "-c",
                "\\dm",
            ],
        )
    })
    .await
    .unwrap();
    let Some(out) = out else {
        server.stop().await;
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(stdout.contains("COPY 2"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        "host,amount\na,5\nb,50\n"
    );
    assert_eq!(
        std::fs::read_to_string(&txt).unwrap(),
        "2024-01-01 00:00:00\ta\t5\n2024-01-01 00:00:01\tb\t50\n"
    );
    // \l+ lists the database with its size; \dm the query as a materialized view.
    assert!(stdout.contains("pg_default"), "{stdout}");
    assert!(stdout.contains("materialized view"), "{stdout}");
    server.stop().await;
}
