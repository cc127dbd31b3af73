//! Unit tests for the JSON decoder: paths, NULLs, repeated keys, numbers as timestamps, nested
//! values, errors with their SQLSTATE; and a property test holding the fast path to the
//! reference one (a `Value` per record) on random records, good and bad.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};
use datafusion::arrow::util::pretty::pretty_format_batches;
use proptest::prelude::*;

use super::*;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("pid", DataType::Int64, true),
        Field::new("exe", DataType::Utf8, true),
        Field::new("proc", DataType::Utf8, true),
        Field::new("ok", DataType::Boolean, true),
        Field::new("x", DataType::Float64, true),
    ]))
}

/// The decoder the tests use; with `prefix`, column `proc` reads the object that `pid` and
/// `exe` are in (a path that ends where others go on), else the key `v`.
fn decoder(prefix: bool) -> JsonDecoder {
    let proc = if prefix { "proc" } else { "v" };
    let paths: Vec<Vec<String>> = ["ts", "proc.pid", "proc.args.0", proc, "ok", "x"]
        .iter()
        .map(|p| p.split('.').map(str::to_string).collect())
        .collect();
    JsonDecoder::new(schema(), &paths)
}

/// Each record's row as a table, or its error as `SQLSTATE: message`; through the fast path,
/// or only through the reference one.
fn rows(records: &[&[u8]], prefix: bool, reference: bool) -> Vec<String> {
    let mut d = decoder(prefix);
    records
        .iter()
        .map(|record| {
            let mut builder = BatchBuilder::new(schema()).unwrap();
            let pushed = if reference {
                d.text.clear();
                d.slots.fill_with(|| Slot::Null);
                d.parse_value(record)
                    .and_then(|()| d.push_slots(&mut builder))
            } else {
                d.push_record(record, &mut builder)
            };
            match pushed.and_then(|()| builder.finish()) {
                Ok(batch) => pretty_format_batches(&[batch]).unwrap().to_string(),
                Err(e) => format!("{}: {e}", e.sqlstate()),
            }
        })
        .collect()
}

fn one(record: &str) -> String {
    let fast = rows(&[record.as_bytes()], true, false).remove(0);
    let reference = rows(&[record.as_bytes()], true, true).remove(0);
    assert_eq!(fast, reference, "{record}");
    fast
}

/// The data line of a one-row table.
fn row(record: &str) -> String {
    let table = one(record);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{record}: {table}");
    lines[3].to_string()
}

#[test]
fn paths_nulls_and_scalars() {
    assert_eq!(
        row(
            r#"{"ts": "2024-01-01 00:00:01", "proc": {"pid": 7, "args": ["/bin/sh", "-c"]}, "ok": true, "x": 1.5}"#
        ),
        r#"| 2024-01-01T00:00:01 | 7   | /bin/sh | {"args":["/bin/sh","-c"],"pid":7} | true | 1.5 |"#
    );
    assert_eq!(
        row(r#"{"other": [1, {"a": 2}], "proc": {"pid": null}, "ok": null}"#),
        "|    |     |     | {\"pid\":null} |    |   |"
    );
    // A string where the path goes on, and an object where it ends in a number column.
    assert_eq!(
        row(r#"{"proc": "sh", "x": "2"}"#),
        "|    |     |     | sh   |    | 2.0 |"
    );
    assert_eq!(
        row(r#"{"proc": {"pid": "12", "args": {"0": "a"}}, "ok": "f"}"#),
        r#"|    | 12  | a   | {"args":{"0":"a"},"pid":"12"} | false |   |"#
    );
}

#[test]
fn a_repeated_key_keeps_its_last_value() {
    assert_eq!(
        row(r#"{"x": 1, "proc": {"pid": 1, "args": ["a"]}, "x": 2, "proc": {"other": 1}}"#),
        "|    |     |     | {\"other\":1} |    | 2.0 |"
    );
    assert_eq!(
        row(r#"{"proc": {"pid": 1, "pid": 2, "args": ["a", "b"]}, "x": null}"#),
        "|    | 2   | a   | {\"args\":[\"a\",\"b\"],\"pid\":2} |    |   |"
    );
}

#[test]
fn numbers_in_a_timestamp_column_are_epoch_seconds() {
    assert!(row(r#"{"ts": 1704067202}"#).starts_with("| 2024-01-01T00:00:02 "));
    assert!(row(r#"{"ts": 1704067202.5}"#).starts_with("| 2024-01-01T00:00:02.500 "));
    assert!(row(r#"{"ts": -1}"#).starts_with("| 1969-12-31T23:59:59 "));
    assert_eq!(
        one(r#"{"ts": 1e300}"#),
        "22008: timestamp out of range: 1e+300 seconds, in column \"ts\""
    );
}

#[test]
fn bad_records_fail_with_their_sqlstate() {
    let cases = [
        (r#"{"proc": {"pid": "x"}}"#, "22P02"),
        (r#"{"proc": {"pid": 1.5}}"#, "22P02"),
        (r#"{"proc": {"pid": [1]}}"#, "22P02"),
        (r#"{"ts": "not a time"}"#, "22007"),
        (r#"{"ts": {"a": 1}}"#, "22P02"),
        (r#"{"ts": 1, "x": "#, "22P02"),
        (r#"{"ts": 1} trailing"#, "22P02"),
        (r#"[{"ts": 1}]"#, "22P02"),
        (r#""a string""#, "22P02"),
        ("not json", "22P02"),
        (
            r#"{"exe": "a\u0000b", "proc": {"args": ["a\u0000b"]}}"#,
            "22021",
        ),
    ];
    for (record, sqlstate) in cases {
        let got = one(record);
        assert!(got.starts_with(&format!("{sqlstate}: ")), "{record}: {got}");
    }
    assert_eq!(
        one(r#"{"proc": {"pid": {"a": 1}}}"#),
        "22P02: column \"pid\" needs a scalar, the record holds an object"
    );
    assert_eq!(one("[1, 2]"), "22P02: a JSON record must be an object");
    // Bytes that are not UTF-8, even in a key no column reads.
    let record = b"{\"junk\": \"\xff\", \"x\": 1}";
    let fast = rows(&[record], true, false);
    assert_eq!(fast, rows(&[record], true, true));
    assert!(
        fast[0].starts_with("22P02: invalid JSON record"),
        "{fast:?}"
    );
}

/// A random JSON value over the keys the paths use, nested a few levels.
fn json_value() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("ts"),
        Just("proc"),
        Just("pid"),
        Just("args"),
        Just("ok"),
        Just("x"),
        Just("0"),
        Just("p\\u0069d"),
    ];
    let leaf = prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (-1e12f64..1e12).prop_map(|f| f.to_string()),
        Just("1e400".to_string()),
        Just("1704067200.5".to_string()),
        Just("\"2024-01-01 00:00:01\"".to_string()),
        Just("\"true\"".to_string()),
        Just("\"12\"".to_string()),
        "[a-z\\\\\"]{0,6}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key.clone(), inner), 0..5).prop_map(|kv| {
                let fields: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}", fields.join(", "))
            }),
        ]
    })
}

/// A record: mostly objects (some with a repeated key), sometimes cut short or with a stray
/// byte.
fn record() -> impl Strategy<Value = Vec<u8>> {
    (json_value(), json_value(), 0..10usize, any::<u8>()).prop_map(|(v, w, shape, byte)| {
        let mut bytes = format!("{{\"ts\": 1, \"v\": {v}, \"proc\": {v}}}").into_bytes();
        match shape {
            0 => bytes = v.into_bytes(),
            1 => bytes.truncate(bytes.len() / 2),
            2 => {
                let at = bytes.len() / 3;
                bytes[at] = byte;
            }
            3..=5 => bytes = format!("{{\"proc\": {v}, \"x\": {w}, \"proc\": {w}}}").into_bytes(),
            _ => {}
        }
        bytes
    })
}

proptest! {
    #[test]
    fn the_fast_path_agrees_with_the_reference(
        records in prop::collection::vec(record(), 1..8),
        prefix in any::<bool>(),
    ) {
        let records: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let fast = rows(&records, prefix, false);
        for (fast, reference) in fast.into_iter().zip(rows(&records, prefix, true)) {
            // Values no column reads are checked for syntax only: a number too large for a
            // double there is no error.
            let lenient = !fast.starts_with("22P02: invalid JSON record")
                && reference.starts_with("22P02: invalid JSON record: number out of range");
            prop_assert!(fast == reference || lenient, "fast: {}\nreference: {}", fast, reference);
        }
    }
}
