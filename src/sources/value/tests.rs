//! Unit tests for text and scalar values: each type's accepted and rejected spellings with
//! their exact SQLSTATE and message, casts of scalars, and the row discipline of `BatchBuilder`.

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    Field, Float64Type, Int16Type, Int32Type, Schema, TimestampNanosecondType,
};
use proptest::prelude::*;

use super::*;

/// The SQLSTATE and message of a failed parse.
fn rejected(text: &str, data_type: DataType) -> (&'static str, String) {
    match parse_scalar(text, &data_type) {
        Err(Error::InvalidInput {
            sqlstate, message, ..
        }) => (sqlstate, message),
        other => panic!("{text:?} as {data_type}: expected an input error, got {other:?}"),
    }
}

fn accepted(text: &str, data_type: DataType) -> ScalarValue {
    parse_scalar(text, &data_type).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn ts(text: &str) -> i64 {
    parse_timestamp_nanos(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn builder(fields: Vec<Field>) -> BatchBuilder {
    BatchBuilder::new(Arc::new(Schema::new(fields))).unwrap()
}

#[test]
fn booleans() {
    for t in ["t", "TRUE", " yes ", "on", "1", "y", "tr"] {
        assert_eq!(
            accepted(t, DataType::Boolean),
            ScalarValue::Boolean(Some(true))
        );
    }
    for f in ["f", "False", "no", "OFF", "0", "of", "n"] {
        assert_eq!(
            accepted(f, DataType::Boolean),
            ScalarValue::Boolean(Some(false))
        );
    }
    for bad in ["x", "o", "", "truee", "2"] {
        assert_eq!(
            rejected(bad, DataType::Boolean),
            (
                "22P02",
                format!("invalid input syntax for type boolean: \"{bad}\"")
            )
        );
    }
}

#[test]
fn integers() {
    assert_eq!(
        accepted(" 42 ", DataType::Int64),
        ScalarValue::Int64(Some(42))
    );
    assert_eq!(accepted("+7", DataType::Int32), ScalarValue::Int32(Some(7)));
    assert_eq!(
        accepted("-32768", DataType::Int16),
        ScalarValue::Int16(Some(-32768))
    );
    assert_eq!(
        rejected("x", DataType::Int64),
        (
            "22P02",
            "invalid input syntax for type bigint: \"x\"".to_string()
        )
    );
    assert_eq!(
        rejected("1.5", DataType::Int16),
        (
            "22P02",
            "invalid input syntax for type smallint: \"1.5\"".to_string()
        )
    );
    assert_eq!(rejected("", DataType::Int32).0, "22P02");
    assert_eq!(
        rejected("99999999999", DataType::Int32),
        (
            "22003",
            "value \"99999999999\" is out of range for type integer".to_string()
        )
    );
    assert_eq!(
        rejected("-99999999999999999999", DataType::Int64),
        (
            "22003",
            "value \"-99999999999999999999\" is out of range for type bigint".to_string()
        )
    );
}

#[test]
fn floats() {
    assert_eq!(
        accepted(" 1.5e3", DataType::Float64),
        ScalarValue::Float64(Some(1500.0))
    );
    assert_eq!(
        accepted("-Infinity", DataType::Float64),
        ScalarValue::Float64(Some(f64::NEG_INFINITY))
    );
    assert_eq!(
        accepted("infinity", DataType::Float32),
        ScalarValue::Float32(Some(f32::INFINITY))
    );
    assert!(
        matches!(accepted("NaN", DataType::Float64), ScalarValue::Float64(Some(v)) if v.is_nan())
    );
    assert_eq!(
        rejected("abc", DataType::Float64),
        (
            "22P02",
            "invalid input syntax for type double precision: \"abc\"".to_string()
        )
    );
    assert_eq!(
        rejected("1,5", DataType::Float32),
        (
            "22P02",
            "invalid input syntax for type real: \"1,5\"".to_string()
        )
    );
    assert_eq!(
        rejected("1e400", DataType::Float64),
        (
            "22003",
            "\"1e400\" is out of range for type double precision".to_string()
        )
    );
}

#[test]
fn text_is_kept_as_is() {
    assert_eq!(
        accepted("  a b ", DataType::Utf8),
        ScalarValue::Utf8(Some("  a b ".into()))
    );
}

#[test]
fn timestamps() {
    let base = 1_704_103_200_000_000_000; // 2024-01-01 10:00:00 UTC
    assert_eq!(ts("2024-01-01 10:00:00"), base);
    assert_eq!(ts("2024-01-01T10:00:00Z"), base);
    assert_eq!(ts(" 2024-01-01 10:00 "), base);
    // TIMESTAMP ignores a zone offset, as PostgreSQL does; TIMESTAMPTZ converts to UTC.
    assert_eq!(ts("2024-01-01 10:00:00+02"), base);
    assert_eq!(ts("2024-01-01 10:00:00-04:30"), base);
    assert_eq!(ts("2024-01-01 10:00:00 UTC"), base);
    let tstz = |text| match accepted(
        text,
        DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
    ) {
        ScalarValue::TimestampNanosecond(Some(n), _) => n,
        other => panic!("{other:?}"),
    };
    assert_eq!(tstz("2024-01-01 12:00:00+02"), base);
    assert_eq!(tstz("2024-01-01 05:30:00-04:30"), base);
    assert_eq!(tstz("2024-01-01T15:30:00+0530"), base);
    assert_eq!(tstz("2024-01-01 10:00:00 UTC"), base);
    assert_eq!(ts("2024-01-01 10:00:00.5"), base + 500_000_000);
    assert_eq!(ts("2024-01-01 10:00:00.123456789123"), base + 123_456_789);
    assert_eq!(ts("2024-01-01"), base - 10 * 3_600_000_000_000);
    assert_eq!(ts("2023-12-31 24:00:00"), base - 10 * 3_600_000_000_000);
    assert_eq!(ts("1970-01-01"), 0);
    assert_eq!(ts("1677-09-21 00:12:44"), -9_223_372_036_000_000_000);

    let bad = |t: &str| rejected(t, DataType::Timestamp(TimeUnit::Nanosecond, None));
    for text in [
        "x",
        "2024-01-01 10",
        "2024-01-01 10:00:00+",
        "2024/01/01",
        "2024-01-01 10:00:00.",
        "10:00",
    ] {
        assert_eq!(
            bad(text),
            (
                "22007",
                format!("invalid input syntax for type timestamp: \"{text}\"")
            )
        );
    }
    for text in [
        "2024-02-30",
        "2024-13-01",
        "2024-01-01 25:00:00",
        "2024-01-01 10:61:00",
    ] {
        assert_eq!(
            bad(text),
            (
                "22008",
                format!("date/time field value out of range: \"{text}\"")
            )
        );
    }
    for text in ["2300-01-01", "1600-01-01 00:00:00", "99999-01-01"] {
        assert_eq!(
            bad(text),
            ("22008", format!("timestamp out of range: \"{text}\""))
        );
    }
    let tz = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    assert_eq!(
        accepted("2024-01-01 11:00:00+01", tz.clone()),
        ScalarValue::TimestampNanosecond(Some(base), Some("UTC".into()))
    );
    assert_eq!(
        rejected("soon", tz),
        (
            "22007",
            "invalid input syntax for type timestamp with time zone: \"soon\"".to_string()
        )
    );
}

#[test]
fn unknown_types_are_not_supported() {
    assert!(matches!(
        parse_scalar("1", &DataType::Date32),
        Err(Error::NotSupported(_))
    ));
    let schema = Arc::new(Schema::new(vec![Field::new("d", DataType::UInt8, true)]));
    assert!(matches!(
        BatchBuilder::new(schema),
        Err(Error::NotSupported(_))
    ));
}

#[test]
fn builds_typed_columns_and_resets() {
    let mut b = builder(vec![
        Field::new("ok", DataType::Boolean, true),
        Field::new("n", DataType::Int16, true),
        Field::new("s", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into())),
            false,
        ),
    ]);
    for (ok, n, s) in [(Some("t"), Some("5"), Some("a")), (None, None, None)] {
        b.push_text(0, ok).unwrap();
        b.push_text(1, n).unwrap();
        b.push_text(2, s).unwrap();
        b.push_text(3, Some("1970-01-01 00:00:01")).unwrap();
        b.finish_row().unwrap();
    }
    assert_eq!(b.len(), 2);
    let batch = b.finish().unwrap();
    assert_eq!(batch.schema(), *b.schema());
    assert_eq!(batch.num_rows(), 2);
    assert!(batch.column(0).as_boolean().value(0));
    assert_eq!(batch.column(1).as_primitive::<Int16Type>().value(0), 5);
    assert!(batch.column(2).is_null(1));
    assert_eq!(
        batch
            .column(3)
            .as_primitive::<TimestampNanosecondType>()
            .value(1),
        1_000_000_000
    );
    assert!(b.is_empty());
    assert_eq!(b.finish().unwrap().num_rows(), 0);
}

#[test]
fn errors_name_the_column() {
    let mut b = builder(vec![
        Field::new("pid", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
    ]);
    let e = b.push_text(0, Some("x")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid input syntax for type bigint: \"x\", column \"pid\""
    );
    let e = b.push_text(1, None).unwrap_err();
    assert_eq!(e.sqlstate(), "23502");
    assert!(matches!(
        &e,
        Error::InvalidInput { message, column: Some(c), .. }
            if message == "null value in column \"ts\" violates not-null constraint" && c == "ts"
    ));
    let e = b.push_scalar(1, &ScalarValue::Int64(None)).unwrap_err();
    assert_eq!(e.sqlstate(), "23502");
}

#[test]
fn finish_row_demands_one_value_per_column() {
    let mut b = builder(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Int32, true),
    ]);
    b.push_text(0, Some("1")).unwrap();
    assert!(matches!(b.finish_row(), Err(Error::Internal(_))));
    assert!(matches!(b.finish(), Err(Error::Internal(_))));
    // finish reset the builder even though it failed
    b.push_text(0, Some("1")).unwrap();
    b.push_text(1, Some("2")).unwrap();
    b.push_text(1, Some("3")).unwrap();
    assert!(matches!(b.finish_row(), Err(Error::Internal(_))));
    assert!(matches!(b.push_text(2, Some("1")), Err(Error::Internal(_))));
}

#[test]
fn scalars_are_cast_to_the_column_type() {
    let mut b = builder(vec![
        Field::new("f", DataType::Float64, true),
        Field::new("i", DataType::Int32, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("s", DataType::Utf8, true),
    ]);
    let rows = [
        [
            ScalarValue::Int64(Some(3)),
            ScalarValue::Float64(Some(2.5)),
            ScalarValue::Utf8(Some("2024-01-01 10:00:00".into())),
            ScalarValue::Int64(Some(7)),
        ],
        [
            ScalarValue::Decimal128(Some(125), 5, 2),
            ScalarValue::Decimal128(Some(-125), 5, 1),
            ScalarValue::TimestampMillisecond(Some(1_500), None),
            ScalarValue::Boolean(Some(true)),
        ],
        [
            ScalarValue::Utf8(Some("NaN".into())),
            ScalarValue::Utf8(Some(" 12 ".into())),
            ScalarValue::Date32(Some(1)),
            ScalarValue::Null,
        ],
    ];
    for row in &rows {
        for (c, v) in row.iter().enumerate() {
            b.push_scalar(c, v).unwrap();
        }
        b.finish_row().unwrap();
    }
    let batch = b.finish().unwrap();
    let f = batch.column(0).as_primitive::<Float64Type>();
    assert_eq!((f.value(0), f.value(1)), (3.0, 1.25));
    assert!(f.value(2).is_nan());
    let i = batch.column(1).as_primitive::<Int32Type>();
    assert_eq!(i.values().to_vec(), vec![2, -13, 12]); // 2.5 rounds to even, -12.5 away from zero
    let t = batch.column(2).as_primitive::<TimestampNanosecondType>();
    assert_eq!(
        t.values().to_vec(),
        vec![ts("2024-01-01 10:00"), 1_500_000_000, 86_400_000_000_000]
    );
    let s = batch.column(3).as_string::<i32>();
    assert_eq!((s.value(0), s.value(1), s.is_null(2)), ("7", "true", true));
}

#[test]
fn scalar_casts_that_fail() {
    let mut b = builder(vec![
        Field::new("small", DataType::Int16, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
    ]);
    let fail = |b: &mut BatchBuilder, c: usize, v: ScalarValue| match b.push_scalar(c, &v) {
        Err(Error::InvalidInput {
            sqlstate,
            message,
            column: Some(_),
            ..
        }) => (sqlstate, message),
        other => panic!("{v:?}: {other:?}"),
    };
    assert_eq!(
        fail(&mut b, 0, ScalarValue::Int64(Some(70_000))),
        ("22003", "smallint out of range".into())
    );
    assert_eq!(
        fail(&mut b, 0, ScalarValue::Float64(Some(f64::INFINITY))),
        ("22003", "smallint out of range".into())
    );
    assert_eq!(
        fail(&mut b, 1, ScalarValue::Int32(Some(1))),
        (
            "42804",
            "column is of type boolean but expression is of type integer".into()
        )
    );
    assert_eq!(
        fail(
            &mut b,
            2,
            ScalarValue::TimestampSecond(Some(i64::MAX), None)
        ),
        ("22008", "timestamp out of range".into())
    );
    assert_eq!(
        fail(&mut b, 2, ScalarValue::Utf8(Some("x".into()))).0,
        "22007"
    );
}

proptest! {
    #[test]
    fn any_text_parses_or_fails_cleanly(text in ".{0,40}") {
        let types = [
            DataType::Boolean, DataType::Int16, DataType::Int32, DataType::Int64,
            DataType::Float32, DataType::Float64, DataType::Utf8,
            DataType::Timestamp(TimeUnit::Nanosecond, None),
        ];
        for ty in &types {
            if let Err(e) = parse_scalar(&text, ty) {
                prop_assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
            }
        }
    }

    #[test]
    fn timestamps_round_trip_through_text(nanos in any::<i64>(), t in any::<bool>()) {
        let text = chrono::DateTime::from_timestamp_nanos(nanos)
            .format(if t { "%Y-%m-%dT%H:%M:%S%.9fZ" } else { "%Y-%m-%d %H:%M:%S%.9f" })
            .to_string();
        prop_assert_eq!(parse_timestamp_nanos(&text).ok(), Some(nanos), "{}", text);
    }

    #[test]
    fn integers_round_trip_through_text(v in any::<i64>()) {
        let wide = parse_scalar(&v.to_string(), &DataType::Int64);
        prop_assert_eq!(wide.ok(), Some(ScalarValue::Int64(Some(v))));
        let narrow = parse_scalar(&v.to_string(), &DataType::Int32);
        match i32::try_from(v) {
            Ok(n) => prop_assert_eq!(narrow.ok(), Some(ScalarValue::Int32(Some(n)))),
            Err(_) => prop_assert_eq!(narrow.map_err(|e| e.sqlstate()).err(), Some("22003")),
        }
    }
}
