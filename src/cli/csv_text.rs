//! Result rows as CSV text, the one way `saql run` writes them and `saql test` compares them:
//! a header of column names, timestamps as `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC, no zero
//! fraction), booleans `true`/`false`, floats in their shortest round-trip form (`NaN`,
//! `Infinity`), NULL as an empty field and the empty string as `""`. A field is quoted when
//! it is empty or holds a comma, a quote, a line break or leading or trailing white space.

use std::sync::Arc;

use chrono::DateTime;
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Float32Type, Float64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

/// One row as text fields; `None` is SQL NULL.
pub type Row = Vec<Option<String>>;

/// Every row of `batch` as text fields.
pub fn batch_rows(batch: &RecordBatch) -> Result<Vec<Row>, ArrowError> {
    let columns: Vec<ColumnText> = batch
        .columns()
        .iter()
        .map(ColumnText::try_new)
        .collect::<Result<_, _>>()?;
    Ok((0..batch.num_rows())
        .map(|row| columns.iter().map(|c| c.value(row)).collect())
        .collect())
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
    let needs_quotes = text.is_empty()
        || text.contains([',', '"', '\n', '\r'])
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace);
    if needs_quotes {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

/// Splits one CSV record (without its line break) into fields: an unquoted empty field is
/// NULL, `""` the empty string, and `""` inside quotes a quote.
pub fn split_record(record: &str) -> Result<Row, String> {
    let mut fields = Vec::new();
    let mut chars = record.chars().peekable();
    loop {
        if chars.peek() == Some(&'"') {
            chars.next();
            let mut field = String::new();
            loop {
                match chars.next() {
                    None => return Err("unterminated quoted field".to_string()),
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            fields.push(Some(field));
            match chars.next() {
                None => return Ok(fields),
                Some(',') => continue,
                Some(c) => return Err(format!("unexpected {c:?} after a closing quote")),
            }
        }
        let mut field = String::new();
        loop {
            match chars.next() {
                None => {
                    fields.push((!field.is_empty()).then_some(field));
                    return Ok(fields);
                }
                Some(',') => break,
                Some('"') => return Err("a quote inside an unquoted field".to_string()),
                Some(c) => field.push(c),
            }
        }
        fields.push((!field.is_empty()).then_some(field));
    }
}

/// How one column's values become text.
enum ColumnText {
    Boolean(ArrayRef),
    Float32(ArrayRef),
    Float64(ArrayRef),
    Timestamp(ArrayRef, TimeUnit),
    Text(ArrayRef),
    /// Any other type, through Arrow's display (checked to be displayable up front).
    Other(ArrayRef),
}

impl ColumnText {
    fn try_new(column: &ArrayRef) -> Result<ColumnText, ArrowError> {
        let c = Arc::clone(column);
        Ok(match column.data_type() {
            DataType::Boolean => ColumnText::Boolean(c),
            DataType::Float32 => ColumnText::Float32(c),
            DataType::Float64 => ColumnText::Float64(c),
            DataType::Timestamp(unit, _) => ColumnText::Timestamp(c, *unit),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnText::Text(c),
            _ => {
                ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())?;
                ColumnText::Other(c)
            }
        })
    }

    fn value(&self, row: usize) -> Option<String> {
        let array = match self {
            ColumnText::Boolean(a)
            | ColumnText::Float32(a)
            | ColumnText::Float64(a)
            | ColumnText::Timestamp(a, _)
            | ColumnText::Text(a)
            | ColumnText::Other(a) => a,
        };
        if array.is_null(row) {
            return None;
        }
        Some(match self {
            ColumnText::Boolean(a) => a.as_boolean().value(row).to_string(),
            ColumnText::Float32(a) => float_text(a.as_primitive::<Float32Type>().value(row)),
            ColumnText::Float64(a) => float_text(a.as_primitive::<Float64Type>().value(row)),
            ColumnText::Timestamp(a, unit) => timestamp_text(a, *unit, row),
            ColumnText::Text(a) => match a.data_type() {
                DataType::LargeUtf8 => a.as_string::<i64>().value(row).to_string(),
                DataType::Utf8View => a.as_string_view().value(row).to_string(),
                _ => a.as_string::<i32>().value(row).to_string(),
            },
            ColumnText::Other(a) => ArrayFormatter::try_new(a.as_ref(), &FormatOptions::default())
                .map(|f| f.value(row).to_string())
                .unwrap_or_default(),
        })
    }
}

/// A float as PostgreSQL prints it: shortest round-trip digits, `NaN`, `Infinity`.
fn float_text<F: Into<f64> + std::fmt::Display + Copy>(f: F) -> String {
    let wide: f64 = f.into();
    if wide.is_nan() {
        "NaN".to_string()
    } else if wide.is_infinite() {
        if wide > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        f.to_string()
    }
}

fn timestamp_text(array: &ArrayRef, unit: TimeUnit, row: usize) -> String {
    let nanos = match unit {
        TimeUnit::Second => array
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .saturating_mul(1_000_000_000),
        TimeUnit::Millisecond => array
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .saturating_mul(1_000_000),
        TimeUnit::Microsecond => array
            .as_primitive::<TimestampMicrosecondType>()
            .value(row)
            .saturating_mul(1_000),
        TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().value(row),
    };
    DateTime::from_timestamp_nanos(nanos)
        .naive_utc()
        .format("%Y-%m-%d %H:%M:%S%.f")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        BooleanArray, Float64Array, Int64Array, StringArray, TimestampNanosecondArray,
    };
    use datafusion::arrow::datatypes::{Field, Schema};

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
        assert_eq!(
            out,
            "2024-01-01 00:01:00,\"a,b\",7,95.5,true\n\
             2024-01-01 00:01:00.500,\"\",,100,\n\
             ,,-1,,false\n"
        );
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
