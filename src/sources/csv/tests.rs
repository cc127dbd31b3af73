//! Unit tests for COPY decoding: NULL versus empty, quoting and escapes in both formats, line
//! numbers in errors, chunking at every byte, and round trips of random typed rows.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray,
    TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::scalar::ScalarValue;
use proptest::prelude::*;

use super::*;

fn schema(fields: &[(&str, DataType, bool)]) -> SchemaRef {
    let fields: Vec<Field> = fields
        .iter()
        .map(|(name, ty, nullable)| Field::new(*name, ty.clone(), *nullable))
        .collect();
    Arc::new(Schema::new(fields))
}

/// Two nullable text columns, a and b.
fn text2() -> SchemaRef {
    schema(&[("a", DataType::Utf8, true), ("b", DataType::Utf8, true)])
}

fn decode_chunks(
    schema: SchemaRef,
    columns: Vec<usize>,
    options: CopyOptions,
    chunks: &[&[u8]],
) -> Result<RecordBatch> {
    let mut decoder = CopyDecoder::new(schema, columns, options)?;
    for chunk in chunks {
        decoder.feed(chunk)?;
    }
    decoder.finish()
}

fn decode(schema: SchemaRef, options: CopyOptions, input: &str) -> Result<RecordBatch> {
    let columns = (0..schema.fields().len()).collect();
    decode_chunks(schema, columns, options, &[input.as_bytes()])
}

/// The batch as rows of displayed values, NULL spelled `NULL`.
fn rows(batch: &RecordBatch) -> Vec<Vec<String>> {
    (0..batch.num_rows())
        .map(|row| {
            batch
                .columns()
                .iter()
                .map(|column| match ScalarValue::try_from_array(column, row) {
                    Ok(v) if v.is_null() => "NULL".to_string(),
                    Ok(v) => v.to_string(),
                    Err(e) => panic!("{e}"),
                })
                .collect()
        })
        .collect()
}

fn table(expected: &[&[&str]]) -> Vec<Vec<String>> {
    expected
        .iter()
        .map(|row| row.iter().map(|v| v.to_string()).collect())
        .collect()
}

/// SQLSTATE, message, column and line of an input error.
fn failure(result: Result<RecordBatch>) -> (&'static str, String, Option<String>, Option<u64>) {
    match result {
        Err(Error::InvalidInput {
            sqlstate,
            message,
            column,
            line,
        }) => (sqlstate, message, column, line),
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn csv_null_is_unquoted_empty_and_quoted_empty_is_text() {
    let batch = decode(text2(), CopyOptions::csv(), ",\"\"\n\"\",\nx,\"y,z\"\n").unwrap();
    assert_eq!(
        rows(&batch),
        table(&[&["NULL", ""], &["", "NULL"], &["x", "y,z"]])
    );
    let options = CopyOptions {
        null: "NA".into(),
        ..CopyOptions::csv()
    };
    let batch = decode(text2(), options, "NA,\"NA\"\n,x\n").unwrap();
    assert_eq!(rows(&batch), table(&[&["NULL", "NA"], &["", "x"]]));
}

#[test]
fn csv_quotes_escapes_and_embedded_newlines() {
    let input = "\"a\"\"b\",\"say \"\"hi\"\"\"\n\"multi\nline\",pre\"fix,ed\"post\n";
    let batch = decode(text2(), CopyOptions::csv(), input).unwrap();
    assert_eq!(
        rows(&batch),
        table(&[&["a\"b", "say \"hi\""], &["multi\nline", "prefix,edpost"]])
    );
    let options = CopyOptions {
        escape: b'\\',
        ..CopyOptions::csv()
    };
    let batch = decode(text2(), options, "\"a\\\"b\",\"c\\\\d\\e\"\n").unwrap();
    assert_eq!(rows(&batch), table(&[&["a\"b", "c\\d\\e"]]));
}

#[test]
fn lines_after_a_multiline_record_are_numbered_correctly() {
    let s = schema(&[("s", DataType::Utf8, true), ("n", DataType::Int64, true)]);
    let input = "\"x\ny\nz\",1\nw,oops\n";
    assert_eq!(
        failure(decode(s.clone(), CopyOptions::csv(), input)),
        (
            "22P02",
            "invalid input syntax for type bigint: \"oops\"".to_string(),
            Some("n".to_string()),
            Some(4)
        )
    );
    let text = "x\\\ny\t1\nw\toops\n";
    assert_eq!(failure(decode(s, CopyOptions::text(), text)).3, Some(3));
}

#[test]
fn field_count_errors_name_the_line() {
    let s = schema(&[("a", DataType::Int32, true), ("b", DataType::Int32, true)]);
    let missing = failure(decode(s.clone(), CopyOptions::csv(), "1,2\n3\n"));
    assert_eq!(
        missing,
        (
            "22P04",
            "missing data for column \"b\"".to_string(),
            None,
            Some(2)
        )
    );
    let extra = failure(decode(s.clone(), CopyOptions::text(), "1\t2\n3\t4\t5\n"));
    assert_eq!(
        extra,
        (
            "22P04",
            "extra data after last expected column".to_string(),
            None,
            Some(2)
        )
    );
    let unterminated = failure(decode(s, CopyOptions::csv(), "1,2\n3,\"4\n5\n"));
    assert_eq!(
        unterminated,
        (
            "22P04",
            "unterminated CSV quoted field".to_string(),
            None,
            Some(2)
        )
    );
}

#[test]
fn invalid_utf8_is_rejected() {
    let result = decode_chunks(
        text2(),
        vec![0, 1],
        CopyOptions::csv(),
        &[b"a,b\nok,\xff\xfe\n"],
    );
    assert_eq!(
        failure(result),
        (
            "22021",
            "invalid byte sequence for encoding \"UTF8\": 0xff".to_string(),
            Some("b".to_string()),
            Some(2)
        )
    );
    let escaped = decode(text2(), CopyOptions::text(), "\\xc3\\x28\tb\n");
    assert_eq!(failure(escaped).0, "22021");
}

#[test]
fn header_is_skipped_and_counted() {
    let s = schema(&[("n", DataType::Int32, true), ("s", DataType::Utf8, true)]);
    let csv = CopyOptions {
        header: true,
        ..CopyOptions::csv()
    };
    let batch = decode(s.clone(), csv.clone(), "n,s\n1,a\n").unwrap();
    assert_eq!(rows(&batch), table(&[&["1", "a"]]));
    assert_eq!(
        failure(decode(s.clone(), csv, "n,s\n1,a\nx,b\n")).3,
        Some(3)
    );
    let text = CopyOptions {
        header: true,
        ..CopyOptions::text()
    };
    let batch = decode(s, text, "n\ts\n2\tb\n").unwrap();
    assert_eq!(rows(&batch), table(&[&["2", "b"]]));
}

#[test]
fn column_list_reorders_and_leaves_the_rest_null() {
    let s = schema(&[
        ("a", DataType::Int32, true),
        ("b", DataType::Utf8, true),
        ("c", DataType::Boolean, true),
    ]);
    let batch = decode_chunks(s.clone(), vec![2, 0], CopyOptions::csv(), &[b"t,1\nf,2\n"]).unwrap();
    assert_eq!(
        rows(&batch),
        table(&[&["1", "NULL", "true"], &["2", "NULL", "false"]])
    );

    let strict = schema(&[("a", DataType::Int32, true), ("ts", DataType::Int64, false)]);
    let result = decode_chunks(strict.clone(), vec![0], CopyOptions::csv(), &[b"1\n"]);
    assert_eq!(
        failure(result),
        (
            "23502",
            "null value in column \"ts\" violates not-null constraint".to_string(),
            Some("ts".to_string()),
            Some(1)
        )
    );
    assert!(matches!(
        CopyDecoder::new(strict.clone(), vec![0, 0], CopyOptions::csv()),
        Err(Error::Plan {
            sqlstate: "42701",
            ..
        })
    ));
    assert!(CopyDecoder::new(strict, vec![2], CopyOptions::csv()).is_err());
}

#[test]
fn text_escapes_and_null() {
    let input = "a\\tb\\\\c\\N\t\\N\nd\\x41\\101\\,\\q\\\t\t\\\\N\nend\\\t\t\n";
    let batch = decode(text2(), CopyOptions::text(), input).unwrap();
    assert_eq!(
        rows(&batch),
        table(&[&["a\tb\\cN", "NULL"], &["dAA,q\t", "\\N"], &["end\t", ""]])
    );
    // a backslash before a real newline keeps it; a lone one at the very end is dropped
    // (`\0`, NUL, is refused as in PostgreSQL: see nul_characters_are_rejected_with_22021)
    let input = "\\b\\f\\n\\r\\v\tx\\\ny\na\tb\\";
    let controls = decode(text2(), CopyOptions::text(), input).unwrap();
    assert_eq!(
        rows(&controls),
        table(&[&["\u{8}\u{c}\n\r\u{b}", "x\ny"], &["a", "b"]])
    );
    let pipes = CopyOptions {
        delimiter: b'|',
        null: String::new(),
        ..CopyOptions::text()
    };
    let batch = decode(text2(), pipes, "a\\|b|\n").unwrap();
    assert_eq!(rows(&batch), table(&[&["a|b", "NULL"]]));
}

#[test]
fn end_marker_crlf_and_a_final_line_without_newline() {
    for options in [CopyOptions::text(), CopyOptions::csv()] {
        let d = options.delimiter as char;
        let input = format!("a{d}b\r\nc{d}d\r\n\\.\r\nignored, not even{d}parsed\"\n");
        let batch = decode(text2(), options.clone(), &input).unwrap();
        assert_eq!(rows(&batch), table(&[&["a", "b"], &["c", "d"]]));
        let batch = decode(text2(), options, &format!("a{d}b\ne{d}f")).unwrap();
        assert_eq!(rows(&batch), table(&[&["a", "b"], &["e", "f"]]));
    }
    let csv = decode(text2(), CopyOptions::csv(), "\"\\.\",x\n\"a\n\\.\n\",y\n").unwrap();
    assert_eq!(rows(&csv), table(&[&["\\.", "x"], &["a\n\\.\n", "y"]]));
}

#[test]
fn every_chunk_boundary_decodes_the_same() {
    let s = schema(&[("s", DataType::Utf8, true), ("n", DataType::Int64, true)]);
    let inputs = [
        (
            CopyOptions::csv(),
            "\"a,\"\"b\"\"\r\nc\",1\r\n,\n\"\",-2\nhé,3\n\\.\n",
        ),
        (
            CopyOptions::text(),
            "a\\tb\\\nc\t1\r\n\\N\t\\N\nhé\\\\\t3\nlast\t4",
        ),
    ];
    for (options, input) in inputs {
        let bytes = input.as_bytes();
        let whole = decode(s.clone(), options.clone(), input).unwrap();
        assert_eq!(whole.num_rows(), 4);
        for at in 0..=bytes.len() {
            let (head, tail) = bytes.split_at(at);
            let split =
                decode_chunks(s.clone(), vec![0, 1], options.clone(), &[head, tail]).unwrap();
            assert_eq!(split, whole, "split at {at}");
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            decode_chunks(s.clone(), vec![0, 1], options, &bytewise).unwrap(),
            whole
        );
    }
}

#[test]
fn rows_counts_decoded_rows() {
    let mut decoder = CopyDecoder::new(text2(), vec![0, 1], CopyOptions::csv()).unwrap();
    decoder.feed(b"a,b\nc,").unwrap();
    assert_eq!(decoder.rows(), 1);
    decoder.feed(b"d").unwrap();
    assert_eq!(decoder.rows(), 1);
    assert_eq!(decoder.finish().unwrap().num_rows(), 2);
}

#[test]
fn ambiguous_options_are_rejected() {
    let bad = [
        CopyOptions {
            delimiter: b'"',
            ..CopyOptions::csv()
        },
        CopyOptions {
            delimiter: b'\n',
            ..CopyOptions::csv()
        },
        CopyOptions {
            delimiter: 0xe9,
            ..CopyOptions::text()
        },
        CopyOptions {
            delimiter: b'\\',
            ..CopyOptions::text()
        },
        CopyOptions {
            null: "a,b".into(),
            ..CopyOptions::csv()
        },
    ];
    for options in bad {
        let result = CopyDecoder::new(text2(), vec![0, 1], options.clone());
        assert_eq!(
            result.err().map(|e| e.sqlstate()),
            Some("22023"),
            "{options:?}"
        );
    }
}

/// One row of the property test's schema.
type Row = (
    Option<bool>,
    Option<i32>,
    Option<i64>,
    Option<f64>,
    Option<String>,
    Option<i64>,
);

fn row_strategy() -> impl Strategy<Value = Row> {
    (
        any::<Option<bool>>(),
        any::<Option<i32>>(),
        any::<Option<i64>>(),
        proptest::option::of(any::<f64>().prop_filter("NaN never equals itself", |f| !f.is_nan())),
        proptest::option::of(any::<String>()),
        any::<Option<i64>>(),
    )
}

fn property_schema() -> SchemaRef {
    schema(&[
        ("b", DataType::Boolean, true),
        ("i", DataType::Int32, true),
        ("n", DataType::Int64, true),
        ("f", DataType::Float64, true),
        ("s", DataType::Utf8, true),
        ("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
    ])
}

/// The rows as a batch, built directly from Arrow arrays.
fn expected_batch(rows: &[Row]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(BooleanArray::from(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.3).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.4.clone()).collect::<Vec<_>>(),
        )),
        Arc::new(TimestampNanosecondArray::from(
            rows.iter().map(|r| r.5).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(property_schema(), columns).unwrap()
}

/// The rows as text values, each field given to `write` (None = NULL).
fn write_rows(rows: &[Row], mut write: impl FnMut(Option<String>, bool)) {
    for r in rows {
        let timestamp = |n: i64| {
            chrono::DateTime::from_timestamp_nanos(n)
                .format("%Y-%m-%d %H:%M:%S%.9f")
                .to_string()
        };
        write(r.0.map(|b| b.to_string()), false);
        write(r.1.map(|i| i.to_string()), false);
        write(r.2.map(|i| i.to_string()), false);
        write(r.3.map(|f| f.to_string()), false);
        write(r.4.clone(), false);
        write(r.5.map(timestamp), true);
    }
}

fn to_csv(rows: &[Row]) -> Vec<u8> {
    let mut out = String::new();
    write_rows(rows, |value, last| {
        match value {
            None => {}
            Some(v) if v.is_empty() || v.contains([',', '"', '\n', '\r']) => {
                out.push('"');
                out.push_str(&v.replace('"', "\"\""));
                out.push('"');
            }
            Some(v) => out.push_str(&v),
        }
        out.push(if last { '\n' } else { ',' });
    });
    out.into_bytes()
}

fn to_text(rows: &[Row]) -> Vec<u8> {
    let mut out = String::new();
    write_rows(rows, |value, last| {
        match value {
            None => out.push_str("\\N"),
            Some(v) => {
                for c in v.chars() {
                    match c {
                        '\\' => out.push_str("\\\\"),
                        '\t' => out.push_str("\\t"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        c => out.push(c),
                    }
                }
            }
        }
        out.push(if last { '\n' } else { '\t' });
    });
    out.into_bytes()
}

/// `data` cut at the given (unsorted, possibly repeated) points.
fn cut<'a>(data: &'a [u8], points: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut offsets: Vec<usize> = points.iter().map(|p| p.index(data.len() + 1)).collect();
    offsets.sort_unstable();
    let mut chunks = Vec::new();
    let mut from = 0;
    for to in offsets.into_iter().chain([data.len()]) {
        chunks.push(&data[from..to]);
        from = to;
    }
    chunks
}

proptest! {
    #[test]
    fn csv_round_trips_under_any_chunking(
        rows in prop::collection::vec(row_strategy(), 0..20),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let data = to_csv(&rows);
        let chunks = cut(&data, &points);
        let columns = (0..6).collect();
        let decoded = decode_chunks(property_schema(), columns, CopyOptions::csv(), &chunks);
        prop_assert_eq!(decoded.unwrap(), expected_batch(&rows));
    }

    #[test]
    fn text_round_trips_under_any_chunking(
        rows in prop::collection::vec(row_strategy(), 0..20),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let data = to_text(&rows);
        let chunks = cut(&data, &points);
        let columns = (0..6).collect();
        let decoded = decode_chunks(property_schema(), columns, CopyOptions::text(), &chunks);
        prop_assert_eq!(decoded.unwrap(), expected_batch(&rows));
    }

    #[test]
    fn chunking_never_changes_the_outcome(
        data in prop::collection::vec(prop::sample::select(b",\t\"\n\r\\.N1x\xff".to_vec()), 0..60),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let s = schema(&[("a", DataType::Utf8, true), ("b", DataType::Int32, false)]);
        for options in [CopyOptions::text(), CopyOptions::csv()] {
            let whole = decode_chunks(s.clone(), vec![0, 1], options.clone(), &[&data]);
            let split = decode_chunks(s.clone(), vec![0, 1], options, &cut(&data, &points));
            prop_assert_eq!(format!("{whole:?}"), format!("{split:?}"));
        }
    }
}

/// Decodes `chunks` on `threads` threads in pieces of `piece_bytes`: the one batch, or the
/// error, and the errors of the records skipped.
fn decode_threaded(
    schema: SchemaRef,
    options: CopyOptions,
    skip_bad: bool,
    (threads, piece_bytes): (usize, usize),
    chunks: &[&[u8]],
) -> (String, Vec<String>) {
    let columns = (0..schema.fields().len()).collect();
    let mut decoder = CopyDecoder::new(schema.clone(), columns, options)
        .unwrap()
        .with_batch_rows(3)
        .with_first_line(7)
        .with_threads(threads);
    decoder.piece_bytes = piece_bytes;
    if skip_bad {
        decoder = decoder.skipping_bad_records();
    }
    let mut result = chunks.iter().try_for_each(|chunk| decoder.feed(chunk));
    if result.is_ok() {
        result = decoder.end_input();
    }
    let skipped = decoder
        .take_skipped()
        .iter()
        .map(|e| format!("{e:?}"))
        .collect();
    let marker = decoder.saw_end_marker();
    let batches: Vec<RecordBatch> = std::iter::from_fn(|| decoder.take_batch()).collect();
    let outcome = result.and_then(|()| {
        Ok(datafusion::arrow::compute::concat_batches(
            &schema, &batches,
        )?)
    });
    // Whether the end marker was seen matters only when the decode succeeds.
    let marker = outcome.is_ok() && marker;
    (format!("{outcome:?} {marker}"), skipped)
}

proptest! {
    #[test]
    fn threads_decode_what_one_thread_decodes(
        data in prop::collection::vec(
            prop::sample::select(b",\t\"\n\n\n\r\\.N1x\xff".to_vec()), 0..200),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        threads in 2usize..4,
        piece_bytes in 1usize..24,
        header: bool,
        skip_bad: bool,
    ) {
        let s = schema(&[("a", DataType::Utf8, true), ("b", DataType::Int32, false)]);
        for mut options in [CopyOptions::text(), CopyOptions::csv()] {
            options.header = header && options.format == CopyFormat::Csv;
            let chunks = cut(&data, &points);
            let one = decode_threaded(s.clone(), options.clone(), skip_bad, (1, 1), &[&data]);
            let many =
                decode_threaded(s.clone(), options, skip_bad, (threads, piece_bytes), &chunks);
            prop_assert_eq!(one, many);
        }
    }
}

#[test]
fn threads_decode_large_input_in_line_order() {
    // 3,000 rows in pieces of ~100 bytes on 3 threads; line 2,500 is bad.
    let s = schema(&[("n", DataType::Int64, false), ("t", DataType::Utf8, true)]);
    let mut data = String::from("n,t\n");
    for i in 0..3000 {
        match i {
            2498 => data.push_str("oops,\"x\n y\"\n"),
            _ => data.push_str(&format!("{i},\"a\nb\"\n")),
        }
    }
    let mut options = CopyOptions::csv();
    options.header = true;
    let (outcome, _) = decode_threaded(
        s.clone(),
        options.clone(),
        false,
        (3, 100),
        &[data.as_bytes()],
    );
    // Line 7 is the header; each row takes two lines.
    assert!(outcome.contains("line: Some(5004)"), "{outcome}");
    let (one, _) = decode_threaded(
        s.clone(),
        options.clone(),
        false,
        (1, 1),
        &[data.as_bytes()],
    );
    assert_eq!(one, outcome);
    let (many, skipped) = decode_threaded(
        s.clone(),
        options.clone(),
        true,
        (3, 100),
        &[data.as_bytes()],
    );
    assert_eq!(skipped.len(), 1);
    assert_eq!(
        (many, skipped),
        decode_threaded(s, options, true, (1, 1), &[data.as_bytes()])
    );
}

#[test]
fn long_lines_and_large_copies_fail_with_54000_naming_the_line() {
    let limited = || {
        CopyDecoder::new(text2(), vec![0, 1], CopyOptions::csv())
            .unwrap()
            .with_limits(100, 1000)
    };
    // A long line fails as soon as a chunk shows it is too long, before its end arrives.
    let mut d = limited();
    d.feed(b"a,b\nc,d\n").unwrap();
    let e = d.feed(&[b'x'; 150]).unwrap_err();
    assert_eq!(e.sqlstate(), "54000");
    assert!(e.to_string().contains("line 3"), "{e}");
    // Also when the whole line comes in one chunk.
    let mut d = limited();
    let mut line = vec![b'y'; 150];
    line.push(b'\n');
    let e = d.feed(&line).unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
    // More data in all than the COPY may hold.
    let mut d = limited();
    let e = (0..200)
        .map(|_| d.feed(b"aaaa,bbbb\n"))
        .find_map(Result::err)
        .unwrap();
    assert_eq!(e.sqlstate(), "54000");
    assert!(e.to_string().contains("1000 bytes"), "{e}");
}

#[test]
fn nul_characters_are_rejected_with_22021() {
    for (options, data) in [
        (CopyOptions::csv(), "a\0b,c\n"),
        (CopyOptions::text(), "a\\000b\tc\n"),
        (CopyOptions::text(), "a\\x00\tc\n"),
        (CopyOptions::text(), "a\\0\tc\n"),
    ] {
        let (sqlstate, message, _, line) = failure(decode(text2(), options, data));
        assert_eq!(sqlstate, "22021", "{data:?}");
        assert!(message.contains("0x00"), "{message}");
        assert_eq!(line, Some(1));
    }
}

/// Skipping: bad records (a bad value, too many fields, an open quote, a NULL in a NOT NULL
/// column) are left out and reported in line order; the good rows keep their order and come
/// in batches of the size asked for; blank lines are skipped when asked.
#[test]
fn skipping_bad_records_keeps_the_good_ones_in_batches() {
    let strict = schema(&[("n", DataType::Int64, false), ("s", DataType::Utf8, true)]);
    let input = "1,a\nx,b\n3,c,extra\n\n4,d\n,e\n5,\"f\n";
    let mut decoder = CopyDecoder::new(strict.clone(), vec![0, 1], CopyOptions::csv())
        .unwrap()
        .with_batch_rows(2)
        .skipping_bad_records()
        .skipping_blank_lines()
        .with_first_line(10);
    decoder.feed(input.as_bytes()).unwrap();
    decoder.end_input().unwrap();
    let mut got = Vec::new();
    while let Some(batch) = decoder.take_batch() {
        assert!(batch.num_rows() <= 2);
        got.extend(rows(&batch));
    }
    assert_eq!(got, [["1", "a"], ["4", "d"]]);
    let skipped: Vec<(Option<u64>, String)> = decoder
        .take_skipped()
        .into_iter()
        .map(|e| match e {
            Error::InvalidInput {
                line,
                sqlstate,
                column,
                ..
            } => (line, format!("{sqlstate} {}", column.unwrap_or_default())),
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(
        skipped,
        [
            (Some(11), "22P02 n".to_string()),
            (Some(12), "22P04 ".to_string()),
            (Some(15), "23502 n".to_string()),
            (Some(16), "22P04 ".to_string()),
        ]
    );

    // Without skipping, the first bad record in line order fails the decode, even when a
    // later record of the same chunk fails to split first.
    let mut decoder = CopyDecoder::new(strict, vec![0, 1], CopyOptions::csv()).unwrap();
    let e = decoder.feed(b"1,a\nx,b\n3,c,extra\n").unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput { line: Some(2), .. }),
        "{e}"
    );
}

#[test]
fn reads_a_header_across_lines() {
    let data = b"a,\"b\nc\",d\n1,2,3\n";
    let header = read_header(data, &CopyOptions::csv(), false)
        .unwrap()
        .unwrap();
    assert_eq!(
        header.fields,
        [
            Some("a".to_string()),
            Some("b\nc".to_string()),
            Some("d".to_string())
        ]
    );
    assert_eq!((header.len, header.lines), (10, 2));
    assert!(read_header(b"a,\"b", &CopyOptions::csv(), false)
        .unwrap()
        .is_none());
    assert!(read_header(b"a,\"b", &CopyOptions::csv(), true).is_err());
}
