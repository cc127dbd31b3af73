//! Result rows as CSV text, the one way `saql run` writes them and `saql test` compares them:
//! a header of column names, timestamps as `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC, no zero
//! fraction), booleans `true`/`false`, floats in their shortest round-trip form (`NaN`,
//! `Infinity`), NULL as an empty field and the empty string as `""`. A field is quoted when
//! it is empty or holds a comma, a quote, a line break or leading or trailing white space.

use std::fmt::Write;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float32Array, Float64Array, Int16Array, Int32Array,
    Int64Array,
};
use datafusion::arrow::datatypes::{
    DataType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use saql::sources::csv::{read_header, CopyOptions};
use saql::text::write_float;
use saql::time::{write_timestamp, Fraction};

/// One row as text fields; `None` is SQL NULL.
pub type Row = Vec<Option<String>>;

/// Every row of `batch` as text fields.
pub fn batch_rows(batch: &RecordBatch) -> Result<Vec<Row>, ArrowError> {
    let columns = column_texts(batch)?;
    let mut text = String::new();
    Ok((0..batch.num_rows())
        .map(|row| {
            columns
                .iter()
                .map(|c| {
                    text.clear();
                    c.write(row, &mut text).then(|| text.clone())
                })
                .collect()
        })
        .collect())
}

/// Appends every row of `batch` to `out` as CSV records, writing each value straight into
/// `out` (no text per value is allocated).
pub fn write_batch(out: &mut String, batch: &RecordBatch) -> Result<(), ArrowError> {
    let columns = column_texts(batch)?;
    for row in 0..batch.num_rows() {
        for (i, column) in columns.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let start = out.len();
            if column.write(row, out) && column.may_need_quotes() && needs_quotes(&out[start..]) {
                let text = out.split_off(start);
                push_quoted(out, &text);
            }
        }
        out.push('\n');
    }
    Ok(())
}

fn column_texts(batch: &RecordBatch) -> Result<Vec<ColumnText<'_>>, ArrowError> {
    batch.columns().iter().map(ColumnText::try_new).collect()
}

/// Appends one CSV record (fields and a `\n`) to `out`.
pub fn push_record<'a>(out: &mut String, fields: impl IntoIterator<Item = Option<&'a str>>) {
    for (i, field) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if let Some(text) = field {
            push_field(out, text);
        }
    }
    out.push('\n');
}

/// The CSV record of `fields`, without the line break.
pub fn record_text<'a>(fields: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let mut out = String::new();
    push_record(&mut out, fields);
    out.pop();
    out
}

fn push_field(out: &mut String, text: &str) {
    if needs_quotes(text) {
        push_quoted(out, text);
    } else {
        out.push_str(text);
    }
}

fn needs_quotes(text: &str) -> bool {
    text.is_empty()
        || text
            .bytes()
            .any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
}

fn push_quoted(out: &mut String, text: &str) {
    out.push('"');
    for (i, part) in text.split('"').enumerate() {
        if i > 0 {
            out.push_str("\"\"");
        }
        out.push_str(part);
    }
    out.push('"');
}

/// Splits one CSV record (without its line break) into fields by the rules COPY's CSV
/// decoder reads (one splitter for both): an unquoted empty field is NULL, `""` the empty
/// string, and `""` inside quotes a quote.
pub fn split_record(record: &str) -> Result<Row, String> {
    match read_header(record.as_bytes(), &CopyOptions::csv(), true) {
        Ok(Some(header)) => Ok(header.fields),
        Ok(None) => Ok(vec![None]),
        Err(e) => Err(e.to_string()),
    }
}

/// How one column's values become text.
enum ColumnText<'a> {
    Boolean(&'a BooleanArray),
    Int64(&'a Int64Array),
    Int32(&'a Int32Array),
    Int16(&'a Int16Array),
    Float32(&'a Float32Array),
    Float64(&'a Float64Array),
    /// Nanoseconds per unit, and the values.
    Timestamp(i64, &'a dyn Array),
    Text(&'a dyn Array),
    /// Any other type, through Arrow's display.
    Other(&'a dyn Array, ArrayFormatter<'a>),
}

impl<'a> ColumnText<'a> {
    fn try_new(column: &'a ArrayRef) -> Result<ColumnText<'a>, ArrowError> {
        let c = column.as_ref();
        Ok(match column.data_type() {
            DataType::Boolean => ColumnText::Boolean(c.as_boolean()),
            DataType::Int64 => ColumnText::Int64(c.as_primitive()),
            DataType::Int32 => ColumnText::Int32(c.as_primitive()),
            DataType::Int16 => ColumnText::Int16(c.as_primitive()),
            DataType::Float32 => ColumnText::Float32(c.as_primitive()),
            DataType::Float64 => ColumnText::Float64(c.as_primitive()),
            DataType::Timestamp(unit, _) => {
                let per_unit = match unit {
                    TimeUnit::Second => 1_000_000_000,
                    TimeUnit::Millisecond => 1_000_000,
                    TimeUnit::Microsecond => 1_000,
                    TimeUnit::Nanosecond => 1,
                };
                ColumnText::Timestamp(per_unit, c)
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnText::Text(c),
            _ => ColumnText::Other(c, ArrayFormatter::try_new(c, &FormatOptions::default())?),
        })
    }

    /// Appends the text of `row` to `out`; false (and nothing written) for NULL.
    fn write(&self, row: usize, out: &mut String) -> bool {
        let array: &dyn Array = match self {
            ColumnText::Boolean(a) => *a,
            ColumnText::Int64(a) => *a,
            ColumnText::Int32(a) => *a,
            ColumnText::Int16(a) => *a,
            ColumnText::Float32(a) => *a,
            ColumnText::Float64(a) => *a,
            ColumnText::Timestamp(_, a) | ColumnText::Text(a) | ColumnText::Other(a, _) => *a,
        };
        if array.is_null(row) {
            return false;
        }
        // Writing to a String cannot fail.
        let _ = match self {
            ColumnText::Boolean(a) => {
                out.push_str(if a.value(row) { "true" } else { "false" });
                Ok(())
            }
            ColumnText::Int64(a) => {
                push_int(out, a.value(row));
                Ok(())
            }
            ColumnText::Int32(a) => {
                push_int(out, a.value(row).into());
                Ok(())
            }
            ColumnText::Int16(a) => {
                push_int(out, a.value(row).into());
                Ok(())
            }
            ColumnText::Float32(a) => {
                write_float(out, a.value(row));
                Ok(())
            }
            ColumnText::Float64(a) => {
                write_float(out, a.value(row));
                Ok(())
            }
            ColumnText::Timestamp(per_unit, a) => {
                let value = match a.data_type() {
                    DataType::Timestamp(TimeUnit::Second, _) => {
                        a.as_primitive::<TimestampSecondType>().value(row)
                    }
                    DataType::Timestamp(TimeUnit::Millisecond, _) => {
                        a.as_primitive::<TimestampMillisecondType>().value(row)
                    }
                    DataType::Timestamp(TimeUnit::Microsecond, _) => {
                        a.as_primitive::<TimestampMicrosecondType>().value(row)
                    }
                    _ => a.as_primitive::<TimestampNanosecondType>().value(row),
                };
                let nanos = value.saturating_mul(*per_unit);
                write_timestamp(out, nanos, Fraction::Nanos);
                Ok(())
            }
            ColumnText::Text(a) => {
                out.push_str(match a.data_type() {
                    DataType::LargeUtf8 => a.as_string::<i64>().value(row),
                    DataType::Utf8View => a.as_string_view().value(row),
                    _ => a.as_string::<i32>().value(row),
                });
                Ok(())
            }
            ColumnText::Other(_, f) => write!(out, "{}", f.value(row)),
        };
        true
    }

    /// Whether a value's text can need quotes: numbers, booleans and timestamps never do.
    fn may_need_quotes(&self) -> bool {
        matches!(self, ColumnText::Text(_) | ColumnText::Other(..))
    }
}

/// Appends the decimal text of `value` (as `{}` prints it), without the formatter.
fn push_int(out: &mut String, value: i64) {
    let mut buf = [0u8; 20];
    let mut start = buf.len();
    let mut rest = value.unsigned_abs();
    loop {
        start -= 1;
        buf[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if value < 0 {
        out.push('-');
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[start..]).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        BooleanArray, Float64Array, Int64Array, StringArray, TimestampNanosecondArray,
    };
    use datafusion::arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    #[test]
    fn formats_and_quotes_values() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
            Field::new("s", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("b", DataType::Boolean, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(1_704_067_260_000_000_000),
                    Some(1_704_067_260_500_000_000),
                    None,
                ])),
                Arc::new(StringArray::from(vec![Some("a,b"), Some(""), None])),
                Arc::new(Int64Array::from(vec![Some(7), None, Some(-1)])),
                Arc::new(Float64Array::from(vec![Some(95.5), Some(100.0), None])),
                Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            ],
        )
        .unwrap();
        let mut out = String::new();
        for row in batch_rows(&batch).unwrap() {
            push_record(&mut out, row.iter().map(|f| f.as_deref()));
        }
        let mut direct = String::new();
        write_batch(&mut direct, &batch).unwrap();
        assert_eq!(direct, out);
        assert_eq!(
            out,
            "2024-01-01 00:01:00,\"a,b\",7,95.5,true\n\
             2024-01-01 00:01:00.5,\"\",,100,\n\
             ,,-1,,false\n"
        );
    }

    #[test]
    fn integers_print_as_display_prints_them() {
        for v in [
            0,
            7,
            -1,
            10,
            99,
            -100,
            i64::from(i32::MIN),
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = String::from("x");
            push_int(&mut out, v);
            assert_eq!(out, format!("x{v}"));
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("s", DataType::Int16, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![Some(i32::MIN), None])),
                Arc::new(Int16Array::from(vec![Some(-3), Some(i16::MAX)])),
            ],
        )
        .unwrap();
        let mut out = String::new();
        write_batch(&mut out, &batch).unwrap();
        assert_eq!(out, "-2147483648,-3\n,32767\n");
    }

    #[test]
    fn splits_what_it_writes() {
        let fields = vec![
            Some("say \"hi\"".to_string()),
            None,
            Some(String::new()),
            Some(" x".to_string()),
        ];
        let text = record_text(fields.iter().map(|f| f.as_deref()));
        assert_eq!(text, "\"say \"\"hi\"\"\",,\"\",\" x\"");
        assert_eq!(split_record(&text).unwrap(), fields);
        assert_eq!(split_record("a,,b").unwrap().len(), 3);
        assert!(split_record("\"open").is_err());
    }
}
