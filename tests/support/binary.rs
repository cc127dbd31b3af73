//! The real `saql serve` binary for end-to-end tests: started on a free 127.0.0.1 port with a
//! data directory, killed (SIGKILL) when dropped, reached with tokio-postgres.

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

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

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.0.as_ref().expect("the process runs").id()
    }

    /// Sends `signal` (`TERM`, `INT`, ...) with `kill`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits up to `limit` for the process to exit; its status, or None if it still runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let child = self.0.as_mut()?;
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.0 = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
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
    start_saql_in_shell(dir, addr, extra, "")
}

/// [`start_saql`] run by `sh -c` after the shell commands `prelude` (`ulimit ...`,
/// `trap "" XFSZ`: what they set is inherited by the server, which the shell becomes).
pub fn start_saql_in_shell(dir: &Path, addr: SocketAddr, extra: &[&str], prelude: &str) -> Process {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("{prelude}\nexec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_saql"))
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
