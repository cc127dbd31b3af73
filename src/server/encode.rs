//! Arrow to Postgres: column types, DataRow encoding (text or binary, as the client asks) and
//! COPY text lines. Rows exist only here, at the wire.

use std::fmt::Write as _;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Schema, TimeUnit,
    TimestampNanosecondType, UInt64Type,
};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;

use crate::error::{sqlstate, Result};
use crate::sql::CopyOut;
use crate::text::write_float;
use crate::time::{write_timestamp, Fraction};

/// The Postgres type a column is sent as.
pub fn pg_type(t: &DataType) -> Type {
    match t {
        DataType::Boolean => Type::BOOL,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => Type::INT2,
        DataType::Int32 | DataType::UInt16 => Type::INT4,
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => Type::INT8,
        DataType::Float16 | DataType::Float32 => Type::FLOAT4,
        DataType::Float64 => Type::FLOAT8,
        DataType::Timestamp(_, None) => Type::TIMESTAMP,
        DataType::Timestamp(_, Some(_)) => Type::TIMESTAMPTZ,
        _ => Type::TEXT,
    }
}

/// The Arrow type values of `t` are converted to before encoding.
fn wire_arrow_type(t: &DataType) -> DataType {
    arrow_type(&pg_type(t)).unwrap_or(DataType::Utf8)
}

/// The Arrow type saql holds values of the PostgreSQL type `ty` as, for the types it stores
/// other than text.
pub(super) fn arrow_type(ty: &Type) -> Option<DataType> {
    Some(match *ty {
        Type::BOOL => DataType::Boolean,
        Type::INT2 => DataType::Int16,
        Type::INT4 => DataType::Int32,
        Type::INT8 => DataType::Int64,
        Type::FLOAT4 => DataType::Float32,
        Type::FLOAT8 => DataType::Float64,
        Type::TIMESTAMP => DataType::Timestamp(TimeUnit::Nanosecond, None),
        Type::TIMESTAMPTZ => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        _ => return None,
    })
}

/// Field descriptions for a schema; `format` per the client's Bind (text when unknown).
pub fn field_infos(schema: &Schema, format: impl Fn(usize) -> FieldFormat) -> Vec<FieldInfo> {
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            FieldInfo::new(
                f.name().clone(),
                None,
                None,
                pg_type(f.data_type()),
                format(i),
            )
        })
        .collect()
}

pub use crate::time::{timestamp_text, wire_timestamp};

fn wire_columns(batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    batch
        .columns()
        .iter()
        .map(|c| {
            let target = wire_arrow_type(c.data_type());
            if c.data_type() == &target {
                return Ok(c.clone());
            }
            if target == DataType::Utf8 {
                let options = FormatOptions::default().with_null("");
                let f = ArrayFormatter::try_new(c.as_ref(), &options)?;
                // Logical nulls: a NULL-typed column (`SELECT NULL`) has no null buffer.
                let nulls = c.logical_nulls();
                let values: Vec<Option<String>> = (0..c.len())
                    .map(|i| {
                        let valid = nulls.as_ref().is_none_or(|n| n.is_valid(i));
                        valid.then(|| f.value(i).to_string())
                    })
                    .collect();
                return Ok(
                    Arc::new(datafusion::arrow::array::StringArray::from(values)) as ArrayRef,
                );
            }
            if let DataType::UInt64 = c.data_type() {
                check_bigint(c)?;
            }
            Ok(cast(c, &target)?)
        })
        .collect()
}

/// PostgreSQL has no unsigned 64-bit type: a UInt64 above `i64::MAX` cannot be sent as
/// `bigint`, and is an error (22003) rather than the NULL a cast would make of it.
fn check_bigint(column: &ArrayRef) -> Result<()> {
    let values = column.as_primitive::<UInt64Type>();
    match values.iter().flatten().find(|&v| i64::try_from(v).is_err()) {
        Some(v) => Err(crate::Error::invalid_input(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            format!(
                "bigint out of range: {v} is above 9223372036854775807; cast it to numeric or text"
            ),
        )),
        None => Ok(()),
    }
}

/// Encodes every row of `batch` as a DataRow for `fields`.
pub fn data_rows(batch: &RecordBatch, fields: &Arc<Vec<FieldInfo>>) -> Result<Vec<DataRow>> {
    let columns = wire_columns(batch)?;
    let mut encoder = DataRowEncoder::new(fields.clone());
    let mut rows = Vec::with_capacity(batch.num_rows());
    let mut scratch = String::new();
    for row in 0..batch.num_rows() {
        for (col, field) in columns.iter().zip(fields.iter()) {
            let text = field.format() == FieldFormat::Text;
            encode_value(&mut encoder, col, row, text, &mut scratch)
                .map_err(|e| crate::Error::Internal(e.to_string()))?;
        }
        rows.push(encoder.take_row());
    }
    Ok(rows)
}

fn encode_value(
    encoder: &mut DataRowEncoder,
    col: &ArrayRef,
    row: usize,
    text: bool,
    scratch: &mut String,
) -> PgWireResult<()> {
    let valid = col.is_valid(row);
    match col.data_type() {
        DataType::Boolean => encoder.encode_field(&valid.then(|| col.as_boolean().value(row))),
        DataType::Int16 => {
            encoder.encode_field(&valid.then(|| col.as_primitive::<Int16Type>().value(row)))
        }
        DataType::Int32 => {
            encoder.encode_field(&valid.then(|| col.as_primitive::<Int32Type>().value(row)))
        }
        DataType::Int64 => {
            encoder.encode_field(&valid.then(|| col.as_primitive::<Int64Type>().value(row)))
        }
        DataType::Float32 | DataType::Float64 if text => {
            let text = valid.then(|| {
                scratch.clear();
                match col.data_type() {
                    DataType::Float32 => {
                        write_float(scratch, col.as_primitive::<Float32Type>().value(row))
                    }
                    _ => write_float(scratch, col.as_primitive::<Float64Type>().value(row)),
                }
                scratch.as_str()
            });
            encoder.encode_field(&text)
        }
        DataType::Float32 => {
            encoder.encode_field(&valid.then(|| col.as_primitive::<Float32Type>().value(row)))
        }
        DataType::Float64 => {
            encoder.encode_field(&valid.then(|| col.as_primitive::<Float64Type>().value(row)))
        }
        DataType::Timestamp(_, tz) => {
            let nanos = valid.then(|| col.as_primitive::<TimestampNanosecondType>().value(row));
            let dt = nanos.map(wire_timestamp);
            if text {
                let text = nanos.map(|n| {
                    scratch.clear();
                    write_timestamp(scratch, n, Fraction::Micros);
                    if tz.is_some() {
                        scratch.push_str("+00");
                    }
                    scratch.as_str()
                });
                encoder.encode_field(&text)
            } else if tz.is_some() {
                encoder.encode_field(&dt)
            } else {
                encoder.encode_field(&dt.map(|d| d.naive_utc()))
            }
        }
        _ => encoder.encode_field(&valid.then(|| col.as_string::<i32>().value(row))),
    }
}

/// Encodes every row of `batch` as a line of COPY output, each ending in a newline: text
/// format (tab-separated, `\N` for NULL, backslash escapes) or CSV (see [`csv_line`]).
pub fn copy_lines(batch: &RecordBatch, format: CopyOut) -> Result<Vec<Vec<u8>>> {
    let columns = wire_columns(batch)?;
    let options = FormatOptions::default();
    let formatters = columns
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let mut lines = Vec::with_capacity(batch.num_rows());
    let mut value = String::new();
    for row in 0..batch.num_rows() {
        let mut line = String::new();
        for (i, (col, f)) in columns.iter().zip(&formatters).enumerate() {
            if i > 0 {
                line.push(if format == CopyOut::Text { '\t' } else { ',' });
            }
            if col.is_null(row) {
                if format == CopyOut::Text {
                    line.push_str("\\N");
                }
                continue;
            }
            value.clear();
            write_text(&mut value, col, f, row);
            if format == CopyOut::Text {
                push_escaped(&mut line, &value);
            } else {
                push_csv_value(&mut line, &value);
            }
        }
        line.push('\n');
        lines.push(line.into_bytes());
    }
    Ok(lines)
}

/// Appends the PostgreSQL text of a non-NULL value of a wire column (see [`wire_columns`]).
fn write_text(out: &mut String, col: &ArrayRef, f: &ArrayFormatter, row: usize) {
    match col.data_type() {
        DataType::Timestamp(_, tz) => {
            write_timestamp(
                out,
                col.as_primitive::<TimestampNanosecondType>().value(row),
                Fraction::Micros,
            );
            if tz.is_some() {
                out.push_str("+00");
            }
        }
        // PostgreSQL's text form of a boolean.
        DataType::Boolean => out.push(if col.as_boolean().value(row) {
            't'
        } else {
            'f'
        }),
        DataType::Float32 => write_float(out, col.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => write_float(out, col.as_primitive::<Float64Type>().value(row)),
        // Writing to a String cannot fail.
        _ => drop(write!(out, "{}", f.value(row))),
    }
}

/// Appends `value` with COPY text format's backslash escapes.
fn push_escaped(line: &mut String, value: &str) {
    for ch in value.chars() {
        match ch {
            '\\' => line.push_str("\\\\"),
            '\t' => line.push_str("\\t"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            c => line.push(c),
        }
    }
}

/// Appends one CSV value: quoted (quotes doubled) when it holds a comma, quote, CR or LF, is
/// empty (so that it differs from NULL) or is `\.` (the end-of-data marker).
fn push_csv_value(line: &mut String, value: &str) {
    let quote = value.is_empty() || value == "\\." || value.contains([',', '"', '\n', '\r']);
    if quote {
        line.push('"');
        for ch in value.chars() {
            if ch == '"' {
                line.push('"');
            }
            line.push(ch);
        }
        line.push('"');
    } else {
        line.push_str(value);
    }
}

/// One line of PostgreSQL's CSV output: comma-separated, NULL as nothing, values quoted as
/// [`push_csv_value`] says.
pub fn csv_line<'a>(values: impl Iterator<Item = Option<&'a str>>) -> Vec<u8> {
    let mut line = String::new();
    for (i, value) in values.enumerate() {
        if i > 0 {
            line.push(',');
        }
        if let Some(value) = value {
            push_csv_value(&mut line, value);
        }
    }
    line.push('\n');
    line.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines_quote_as_postgresql_does() {
        let values = [
            Some("a"),
            None,
            Some(""),
            Some("x,y"),
            Some("say \"hi\""),
            Some("\\."),
        ];
        assert_eq!(
            String::from_utf8(csv_line(values.into_iter())).unwrap(),
            "a,,\"\",\"x,y\",\"say \"\"hi\"\"\",\"\\.\"\n"
        );
    }

    #[test]
    fn timestamps_print_as_postgresql_prints_them() {
        // 2026-12-01 13:47:58.167865008
        let t = 1_796_132_878_167_865_008;
        assert_eq!(timestamp_text(t, false), "2026-12-01 13:47:58.167865");
        assert_eq!(timestamp_text(t, true), "2026-12-01 13:47:58.167865+00");
        assert_eq!(
            timestamp_text(1_796_132_878_500_000_000, false),
            "2026-12-01 13:47:58.5"
        );
        assert_eq!(
            timestamp_text(1_796_132_878_000_000_999, false),
            "2026-12-01 13:47:58"
        );
        // Before the epoch the fraction is still cut towards the past.
        assert_eq!(timestamp_text(-1, false), "1969-12-31 23:59:59.999999");
    }
}
