#![cfg(all(feature = "server", feature = "kafka"))]
//! Kafka sources against a real Kafka-compatible broker (Tansu, installed by
//! `tests/kafka/setup.sh`; the test prints `skip:` and passes when it is missing): records
//! produced to two partitions reach a SUBSCRIBE exactly once, a bad record is counted, and
//! after `kill -9` of saql the source resumes from the offsets in its own log and checkpoints
//! (no consumer group), so the stream holds every record once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;
use crate::broker;

use futures::StreamExt;
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use tokio_postgres::{Client, SimpleQueryMessage};

use binary::{connect, free_addr, show_row, start_saql};

async fn source_row(client: &Client, name: &str) -> BTreeMap<String, String> {
    show_row(client, "SHOW SOURCES", name).await
}

async fn await_rows(addr: SocketAddr, name: &str, rows: u64) -> BTreeMap<String, String> {
    let mut last = BTreeMap::new();
    for _ in 0..600 {
        let client = connect(addr).await;
        last = source_row(&client, name).await;
        if last["rows"] == rows.to_string() {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("source {name} never reached {rows} rows: {last:?}");
}

fn event(i: u64) -> Vec<u8> {
    format!(
        "{{\"ts\": \"2024-01-01 00:{:02}:{:02}\", \"host\": \"h{}\", \"pid\": {i}}}",
        i / 60 % 60,
        i % 60,
        i % 3
    )
    .into_bytes()
}

/// Produces records `range` to partition `i % 2`, plus the extra raw values given.
async fn produce(brokers: &str, range: std::ops::Range<u64>, extra: &[(i32, &[u8])]) {
    let client = ClientBuilder::new(vec![brokers.to_string()])
        .build()
        .await
        .unwrap();
    for p in 0..2 {
        let pc = client
            .partition_client("events", p, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        let mut records: Vec<Record> = range
            .clone()
            .filter(|i| (i % 2) as i32 == p)
            .map(|i| Record {
                key: None,
                value: Some(event(i)),
                headers: BTreeMap::new(),
                timestamp: chrono::Utc::now(),
            })
            .collect();
        for (_, v) in extra.iter().filter(|(q, _)| *q == p) {
            records.push(Record {
                key: None,
                value: Some(v.to_vec()),
                headers: BTreeMap::new(),
                timestamp: chrono::Utc::now(),
            });
        }
        pc.produce(records, Compression::NoCompression)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_records_reach_a_subscriber_once_and_resume_after_kill_9() {
    let Some(broker) = broker::start("events", 2).await else {
        println!("skip: no tansu binary (run tests/kafka/setup.sh or set SAQL_TANSU)");
        return;
    };
    let brokers = broker.brokers.clone();
    produce(&brokers, 0..100, &[(1, b"{\"ts\": \"never\"}")]).await;

    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut saql = start_saql(dir.path(), addr, &[]);
    let client = connect(addr).await;
    client
        .batch_execute(&format!(
            "CREATE STREAM ev (ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
             CREATE CONTINUOUS QUERY q AS SELECT pid, host FROM ev;
             CREATE SOURCE k FROM KAFKA (brokers = '{brokers}', topic = 'events',
               format = 'json', partitions = '0,1', poll_interval_ms = '20') INTO STREAM ev;"
        ))
        .await
        .unwrap();
    let mut feed = Box::pin(client.simple_query_raw("SUBSCRIBE q").await.unwrap());
    let mut seen = Vec::new();
    while seen.len() < 100 {
        let msg = tokio::time::timeout(Duration::from_secs(30), feed.next())
            .await
            .expect("rows arrive")
            .unwrap()
            .unwrap();
        if let SimpleQueryMessage::Row(r) = msg {
            let pid: u64 = r.get(0).unwrap().parse().unwrap();
            assert_eq!(r.get(1), Some(format!("h{}", pid % 3).as_str()));
            seen.push(pid);
        }
    }
    seen.sort();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    let row = await_rows(addr, "k", 100).await;
    assert_eq!(row["bad_records"], "1");
    assert_eq!(row["position"], "0:50,1:51");
    assert!(row["error"].contains("partition 1 offset 50"), "{row:?}");
    let extra = tokio::time::timeout(Duration::from_millis(300), feed.next()).await;
    assert!(
        !matches!(extra, Ok(Some(Ok(SimpleQueryMessage::Row(_))))),
        "an extra row arrived"
    );
    drop(feed);
    drop(client);

    // kill -9 between batches; records produced while saql is down are read after restart.
    for round in 0..3u64 {
        let from = 100 + round * 50;
        produce(&brokers, from..from + 50, &[]).await;
        tokio::time::sleep(Duration::from_millis(30 * round)).await;
        saql.kill();
        saql = start_saql(dir.path(), addr, &[]);
        await_rows(addr, "k", from + 50).await;
    }
    let client = connect(addr).await;
    let rows = client.simple_query("SELECT pid FROM ev").await.unwrap();
    let mut pids: Vec<u64> = rows
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap().parse().unwrap()),
            _ => None,
        })
        .collect();
    pids.sort();
    assert_eq!(pids, (0..250).collect::<Vec<_>>());
}
