#![cfg(feature = "server")]
//! The README's "A session" block, run statement by statement against the server the README
//! tells a newcomer to start (`saql serve --demo`, here on a free port of 127.0.0.1 with a
//! fresh data directory): every statement must succeed as written, COPY takes the data lines
//! that follow it (as psql sends them), and the subscriptions deliver the alerts the session
//! says they will.

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::{Client, SimpleQueryMessage};

/// One step of the session: a statement, with the data lines of a `COPY ... FROM STDIN`.
struct Step {
    sql: String,
    copy_data: Option<String>,
}

/// The SQL block under "## A session", split into statements.
fn session_steps() -> Vec<Step> {
    let readme = include_str!("../README.md");
    let start = readme
        .find("## A session")
        .expect("the README has a session");
    let block = &readme[start..];
    let block = &block[block.find("```sql\n").expect("an sql block") + 7..];
    let block = &block[..block.find("```").expect("the block ends")];
    let mut steps = Vec::new();
    let mut sql = String::new();
    let mut lines = block.lines();
    while let Some(line) = lines.next() {
        let code = line.split("--").next().unwrap_or("").trim_end();
        if code.trim().is_empty() {
            continue;
        }
        sql.push_str(code);
        sql.push('\n');
        if !code.ends_with(';') {
            continue;
        }
        let statement = std::mem::take(&mut sql).trim().to_string();
        let copy_data = statement.contains("FROM STDIN").then(|| {
            let mut data = String::new();
            for line in lines.by_ref().take_while(|l| *l != "\\.") {
                data.push_str(line);
                data.push('\n');
            }
            data
        });
        steps.push(Step {
            sql: statement,
            copy_data,
        });
    }
    assert!(sql.trim().is_empty(), "a statement without `;`: {sql}");
    steps
}

/// `saql serve --demo` on a free port with a fresh data directory.
struct Server {
    _process: binary::Process,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start_demo() -> Server {
        let addr = binary::free_addr();
        let dir = tempfile::tempdir().unwrap();
        let process = binary::start_saql(&dir.path().join("saql-data"), addr, &["--demo"]);
        Server {
            _process: process,
            addr,
            _dir: dir,
        }
    }

    async fn connect(&self) -> Client {
        binary::connect(self.addr).await
    }
}

/// The first data row a live subscription sends, as text.
async fn first_subscribed_row(server: &Server, sql: &str) -> String {
    let client = server.connect().await;
    let deadline = Duration::from_secs(20);
    if sql.starts_with("COPY") {
        let copy = client.copy_out(sql).await.expect(sql);
        futures::pin_mut!(copy);
        let chunk = tokio::time::timeout(deadline, copy.next())
            .await
            .unwrap_or_else(|_| panic!("no row from {sql}"))
            .expect("the copy goes on")
            .expect("no error");
        return String::from_utf8(chunk.to_vec()).unwrap();
    }
    let messages = client.simple_query_raw(sql).await.expect(sql);
    futures::pin_mut!(messages);
    loop {
        let message = tokio::time::timeout(deadline, messages.next())
            .await
            .unwrap_or_else(|_| panic!("no row from {sql}"))
            .expect("the subscription goes on")
            .expect("no error");
        if let SimpleQueryMessage::Row(row) = message {
            return (0..row.len())
                .map(|i| row.get(i).unwrap_or(""))
                .collect::<Vec<_>>()
                .join("|");
        }
    }
}

#[tokio::test]
async fn the_readme_session_runs_as_written_against_the_demo_server() {
    let steps = session_steps();
    assert!(steps.len() >= 10, "the session has its statements");
    let server = Server::start_demo();
    let client = server.connect().await;
    let mut subscribed = Vec::new();
    for step in &steps {
        let sql = step.sql.as_str();
        if let Some(data) = &step.copy_data {
            let sink = client.copy_in::<_, bytes::Bytes>(sql).await.expect(sql);
            futures::pin_mut!(sink);
            futures::SinkExt::send(&mut sink, bytes::Bytes::from(data.clone()))
                .await
                .unwrap();
            let rows = sink.finish().await.expect(sql);
            assert_eq!(rows as usize, data.lines().count() - 1, "{sql}");
        } else if sql.contains("SUBSCRIBE") {
            subscribed.push((sql.to_string(), first_subscribed_row(&server, sql).await));
        } else {
            let messages = client.simple_query(sql).await.expect(sql);
            if sql.starts_with("SELECT * FROM exfil") {
                let rows: Vec<_> = messages
                    .iter()
                    .filter(|m| matches!(m, SimpleQueryMessage::Row(_)))
                    .collect();
                assert_eq!(rows.len(), 1, "exfil's one alert is retained");
            }
        }
    }
    // exfil's window [10:00, 10:10) of db-01 sent 2,500,000 bytes; osql saw cmd.exe start
    // osql.exe as pid 4242.
    let text: Vec<String> = subscribed.iter().map(|(_, row)| row.clone()).collect();
    assert_eq!(subscribed.len(), 2, "{text:?}");
    assert!(
        text[0].contains("db-01") && text[0].contains("2500000"),
        "{text:?}"
    );
    assert!(
        text[1].contains("db-01") && text[1].contains("4242"),
        "{text:?}"
    );
    // The stream went with its queries; the demo's own queries still run.
    let queries = client.simple_query("SHOW QUERIES").await.unwrap();
    let names: Vec<String> = queries
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect();
    assert!(
        !names.iter().any(|n| n == "exfil" || n == "osql"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "failed_logins"), "{names:?}");
}
