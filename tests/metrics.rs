#![cfg(feature = "server")]
//! `saql serve --metrics-listen`: the real binary's `/metrics` is scraped over HTTP, parsed
//! as Prometheus text, and its values checked against SHOW STREAMS, SHOW QUERIES and SHOW
//! SOURCES of the same moment (no rows flow while both are read).

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;

use binary::connect;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio_postgres::{Client, SimpleQueryMessage};

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn start(dir: &Path, addr: SocketAddr, metrics: SocketAddr) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_saql"))
        .args(["serve", "--listen", &addr.to_string(), "--workers", "1"])
        .args(["--metrics-listen", &metrics.to_string()])
        .arg("--data-dir")
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("saql starts");
    Process(child)
}

/// A SHOW statement's rows as column name -> value, keyed by the first column.
async fn show(client: &Client, what: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for m in client.simple_query(what).await.unwrap() {
        if let SimpleQueryMessage::Row(r) = m {
            let row: BTreeMap<String, String> = r
                .columns()
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name().to_string(), r.get(i).unwrap_or("").to_string()))
                .collect();
            out.insert(row["name"].clone(), row);
        }
    }
    out
}

/// One raw HTTP exchange; returns (status line, headers, body).
fn http(addr: SocketAddr, request: &str) -> (String, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_string(), body.to_string())
}

/// Samples by `name{labels}` (labels as written), checking the exposition format on the way:
/// every sample's family has HELP and TYPE first, names are valid, counters end in `_total`.
fn parse(body: &str) -> BTreeMap<String, f64> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helped = Vec::new();
    let mut samples = BTreeMap::new();
    let valid = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    };
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.push(rest.split(' ').next().unwrap().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                helped.contains(&name.to_string()),
                "TYPE before HELP: {line}"
            );
            assert!(["counter", "gauge"].contains(&kind), "{line}");
            if kind == "counter" {
                assert!(
                    name.ends_with("_total"),
                    "a counter's name ends in _total: {name}"
                );
            }
            types.insert(name.to_string(), kind.to_string());
        } else {
            let (key, value) = line.rsplit_once(' ').unwrap();
            let name = key.split('{').next().unwrap();
            assert!(valid(name), "bad metric name {name}");
            assert!(types.contains_key(name), "sample without TYPE: {line}");
            assert!(name.starts_with("saql_"), "{name}");
            samples.insert(key.to_string(), value.parse::<f64>().unwrap());
        }
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_agree_with_show_streams_queries_and_sources() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, maddr) = (free_addr(), free_addr());
    let _server = start(&dir.path().join("data"), addr, maddr);
    let client = connect(addr).await;
    let log = dir.path().join("in.jsonl");
    let mut text = String::new();
    for i in 0..20 {
        text.push_str(&format!(
            "{{\"ts\": \"2024-01-01 00:01:{i:02}\", \"host\": \"h\\\"{}\", \"amount\": {i}}}\n",
            i % 2
        ));
    }
    text.push_str("{\"ts\": 12}{\n");
    std::fs::write(&log, text).unwrap();
    client
        .batch_execute(&format!(
            "CREATE STREAM ev (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT,
                WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
             CREATE STREAM quiet (ts TIMESTAMP NOT NULL, x BIGINT);
             CREATE CONTINUOUS QUERY big AS SELECT ts, host, amount FROM ev WHERE amount > 5;
             CREATE CONTINUOUS QUERY calm AS SELECT ts, host, amount FROM ev WHERE amount > 5
               SUPPRESS FOR INTERVAL '1' HOUR PER (host);
             CREATE CONTINUOUS QUERY per_host AS SELECT host, window_end, COUNT(*) AS n
               FROM TUMBLE(ev, ts, INTERVAL '10' SECOND) GROUP BY host, window_start, window_end;
             CREATE SOURCE f FROM FILE '{}' (poll_interval_ms = '10') INTO STREAM ev;",
            log.display()
        ))
        .await
        .unwrap();
    // A subscriber, and rows that arrive late.
    let subscriber = connect(addr).await;
    let feed = subscriber.simple_query_raw("SUBSCRIBE big").await.unwrap();
    for _ in 0..600 {
        let subscribed = show(&client, "SHOW QUERIES").await["big"]["subscribers"] == "1";
        if subscribed && show(&client, "SHOW SOURCES").await["f"]["rows"] == "20" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client
        .batch_execute("INSERT INTO ev VALUES ('2024-01-01 00:00:00', 'late', 100)")
        .await
        .unwrap();

    let (status, headers, body) = http(maddr, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let streams = show(&client, "SHOW STREAMS").await;
    let queries = show(&client, "SHOW QUERIES").await;
    let sources = show(&client, "SHOW SOURCES").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    let m = parse(&body);
    let num = |s: &str| s.parse::<f64>().unwrap();

    for (name, row) in &streams {
        let l = format!("{{stream=\"{name}\"}}");
        assert_eq!(
            m[&format!("saql_stream_rows_in_total{l}")],
            num(&row["rows_in"])
        );
        assert_eq!(
            m[&format!("saql_stream_late_rows_total{l}")],
            num(&row["late_rows"])
        );
        let wm = m.get(&format!("saql_stream_watermark_seconds{l}"));
        match row["watermark"].as_str() {
            "-infinity" => assert!(wm.is_none()),
            text => {
                let t = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
                    .unwrap()
                    .and_utc();
                assert_eq!(*wm.unwrap(), t.timestamp() as f64, "{name}");
                assert!(m[&format!("saql_stream_watermark_lag_seconds{l}")] > 0.0);
            }
        }
    }
    assert_eq!(streams["ev"]["rows_in"], "21");
    assert_eq!(streams["ev"]["late_rows"], "1");
    for (name, row) in &queries {
        let l = format!("{{query=\"{name}\",stream=\"{}\"}}", row["stream"]);
        assert_eq!(
            m[&format!("saql_query_rows_in_total{l}")],
            num(&row["rows_in"])
        );
        assert_eq!(
            m[&format!("saql_query_rows_out_total{l}")],
            num(&row["rows_out"])
        );
        assert_eq!(
            m[&format!("saql_query_late_rows_total{l}")],
            num(&row["late_rows"])
        );
        assert_eq!(
            m[&format!("saql_query_suppressed_total{l}")],
            num(&row["suppressed"])
        );
        assert_eq!(
            m[&format!("saql_query_subscribers{l}")],
            num(&row["subscribers"])
        );
        assert_eq!(m[&format!("saql_query_failed{l}")], 0.0);
        assert_eq!(
            m[&format!("saql_query_state_bytes{l}")],
            num(&row["state_bytes"])
        );
    }
    // The window aggregate holds its open window's groups; the filter holds only its
    // retained results.
    assert!(
        num(&queries["per_host"]["state_bytes"]) > 0.0,
        "{queries:?}"
    );
    assert!(num(&queries["big"]["state_bytes"]) > 0.0, "{queries:?}");
    assert_eq!(queries["big"]["subscribers"], "1");
    assert_eq!(queries["big"]["rows_out"], "15");
    // Amounts 6 to 19 alternate between two hosts: each host's first alerts, its other six
    // are suppressed; the late row's host is new.
    assert_eq!(queries["calm"]["rows_out"], "3");
    assert_eq!(queries["calm"]["suppressed"], "12");
    let f = &sources["f"];
    let l = "{source=\"f\",stream=\"ev\",kind=\"file\"}";
    assert_eq!(m[&format!("saql_source_rows_total{l}")], num(&f["rows"]));
    assert_eq!(
        m[&format!("saql_source_errors_total{l}")],
        num(&f["bad_records"])
    );
    assert_eq!(m[&format!("saql_source_bytes_total{l}")], num(&f["bytes"]));
    let size = std::fs::metadata(&log).unwrap().len() as f64;
    assert_eq!(m[&format!("saql_source_bytes_total{l}")], size);
    let offset = "saql_source_offset{source=\"f\",stream=\"ev\",kind=\"file\",partition=\"\"}";
    assert_eq!(m[offset], size);
    assert!(f["position"].contains(&format!("offset {size}")), "{f:?}");
    assert_eq!(m[&format!("saql_source_up{l}")], 1.0);
    assert_eq!((f["rows"].as_str(), f["bad_records"].as_str()), ("20", "1"));

    let (status, _, _) = http(maddr, "GET /nope HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _, _) = http(maddr, "POST /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    drop(feed);
}
