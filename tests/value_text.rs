#![cfg(feature = "server")]
//! One text for every value in every output: the same awkward floats and microsecond
//! timestamps read through `saql run` (its CSV output), the wire (a simple-query SELECT over a
//! query's retained rows) and `COPY (SUBSCRIBE ...) TO STDOUT` (CSV) come out as the same
//! bytes, and those bytes are what PostgreSQL prints for the same values. A value the wire
//! cannot carry is an error.

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;

use std::process::Command;
use std::time::Duration;

use binary::{connect, free_addr, start_saql};
use futures::{SinkExt, StreamExt};
use tokio_postgres::SimpleQueryMessage;

const STATEMENTS: &str = "\
CREATE STREAM v (ts TIMESTAMP NOT NULL, d DOUBLE PRECISION, r REAL,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE CONTINUOUS QUERY out AS SELECT ts, d, r FROM v;
";

/// Input rows: a timestamp to the microsecond, a double and a real.
const INPUT: &str = "\
2026-01-01 10:00:00.123456,0.30000000000000004,0.1
2026-01-01 10:00:01.000001,1e21,1e6
2026-01-01 10:00:02.654321,-0,-0
2026-01-01 10:00:03.100001,NaN,NaN
2026-01-01 10:00:04.999999,Infinity,-Infinity
2026-01-01 10:00:05.000010,-1.5e-7,100000
2026-01-01 10:00:06.123457,100,3.4028235e38
";

/// What PostgreSQL 12+ prints for the same values (timestamps without trailing zeros).
const EXPECTED: &str = "\
2026-01-01 10:00:00.123456,0.30000000000000004,0.1
2026-01-01 10:00:01.000001,1e+21,1e+06
2026-01-01 10:00:02.654321,-0,-0
2026-01-01 10:00:03.100001,NaN,NaN
2026-01-01 10:00:04.999999,Infinity,-Infinity
2026-01-01 10:00:05.00001,-1.5e-07,100000
2026-01-01 10:00:06.123457,100,3.4028235e+38
";

/// `saql run`'s CSV output for the input, header line dropped.
fn run_output(dir: &std::path::Path) -> String {
    let sql = dir.join("q.sql");
    let csv = dir.join("v.csv");
    std::fs::write(&sql, STATEMENTS).unwrap();
    std::fs::write(&csv, format!("ts,d,r\n{INPUT}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_saql"))
        .arg("run")
        .arg(&sql)
        .arg("--input")
        .arg(format!("v={}", csv.display()))
        .env("RUST_LOG", "warn")
        .output()
        .expect("saql runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (header, rows) = text.split_once('\n').unwrap();
    assert_eq!(header, "ts,d,r");
    rows.to_string()
}

#[tokio::test]
async fn floats_and_timestamps_read_the_same_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run_output(dir.path()), EXPECTED, "saql run");

    let addr = free_addr();
    let _server = start_saql(&dir.path().join("data"), addr, &[]);
    let client = connect(addr).await;
    client.batch_execute(STATEMENTS).await.unwrap();
    let copy = client
        .copy_out("COPY (SUBSCRIBE out) TO STDOUT WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(copy);
    let writer = connect(addr).await;
    let sink = writer
        .copy_in("COPY v FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(INPUT.as_bytes()))
        .await
        .unwrap();
    sink.finish().await.unwrap();

    let mut copied = String::new();
    while copied.lines().count() < EXPECTED.lines().count() {
        let chunk: bytes::Bytes = tokio::time::timeout(Duration::from_secs(20), copy.next())
            .await
            .expect("the rows arrive")
            .unwrap()
            .unwrap();
        copied.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(copied, EXPECTED, "COPY TO");

    let mut wire = String::new();
    // `client` is still in its COPY.
    for m in writer
        .simple_query("SELECT ts, d, r FROM out")
        .await
        .unwrap()
    {
        if let SimpleQueryMessage::Row(row) = m {
            let values: Vec<&str> = (0..3).map(|i| row.get(i).unwrap()).collect();
            wire.push_str(&values.join(","));
            wire.push('\n');
        }
    }
    assert_eq!(wire, EXPECTED, "the wire");

    // PostgreSQL has no unsigned bigint: a UInt64 past i64::MAX is 22003, not a NULL.
    let e = writer
        .simple_query("SELECT 18446744073709551615 AS big")
        .await
        .expect_err("u64::MAX does not fit a bigint");
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "22003", "{db}");
    assert!(db.message().contains("18446744073709551615"), "{db}");
    let rows = writer
        .simple_query("SELECT arrow_cast(9223372036854775807, 'UInt64') AS big")
        .await
        .unwrap();
    let SimpleQueryMessage::Row(row) = &rows[1] else {
        panic!("{rows:?}")
    };
    assert_eq!(row.get(0), Some("9223372036854775807"));
}
