//! The real `saql serve` binary for end-to-end tests: started on a free 127.0.0.1 port with a
//! data directory, killed (SIGKILL) when dropped, reached with tokio-postgres.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// A running saql; killed with SIGKILL when dropped or by [`Process::kill`].
pub struct Process(Option<Child>);

impl Process {
    /// `kill -9`, then waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `saql serve` on `addr` with data directory `dir`, one worker, a checkpoint every second,
/// and the `extra` arguments.
pub fn start_saql(dir: &Path, addr: SocketAddr, extra: &[&str]) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_saql"))
        .args(["serve", "--listen", &addr.to_string(), "--workers", "1"])
        .arg("--data-dir")
        .arg(dir)
        .args(["--checkpoint-interval", "1"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("saql starts");
    Process(Some(child))
}

/// A client of the server on `addr`, waiting up to 30 s for it to come up.
pub async fn connect(addr: SocketAddr) -> Client {
    for _ in 0..600 {
        let conn = format!("host=127.0.0.1 port={} user=saql dbname=saql", addr.port());
        if let Ok((client, connection)) = tokio_postgres::connect(&conn, NoTls).await {
            tokio::spawn(async move {
                let _ = connection.await;
            });
            return client;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not come up on {addr}");
}

/// The row named `name` of `show` (`SHOW SOURCES`, `SHOW SINKS`), column name to text.
pub async fn show_row(client: &Client, show: &str, name: &str) -> BTreeMap<String, String> {
    for m in client.simple_query(show).await.unwrap() {
        if let SimpleQueryMessage::Row(r) = m {
            if r.get(0) == Some(name) {
                return r
                    .columns()
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.name().to_string(), r.get(i).unwrap_or("").to_string()))
                    .collect();
            }
        }
    }
    panic!("{show}: no row {name}");
}
