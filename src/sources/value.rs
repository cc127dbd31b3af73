//! Text and scalar values into Arrow columns. This is the one place that decides how an input
//! value of each SQL type is spelled and how it is rejected, so INSERT (scalars) and COPY (text)
//! accept the same values and fail with the same PostgreSQL-worded errors. The per-value path
//! parses straight from `&str` into a typed Arrow builder without allocating.

use std::num::{IntErrorKind, ParseIntError};
use std::str::FromStr;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate};
use datafusion::arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Builder, StringBuilder, TimestampNanosecondBuilder,
};
use datafusion::arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};

/// The SQL types a column may have, resolved once per schema so each value is a plain match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SqlType {
    Boolean,
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    Text,
    Timestamp,
    TimestampTz,
}

impl SqlType {
    fn of(data_type: &DataType) -> Result<SqlType> {
        Ok(match data_type {
            DataType::Boolean => SqlType::Boolean,
            DataType::Int16 => SqlType::SmallInt,
            DataType::Int32 => SqlType::Integer,
            DataType::Int64 => SqlType::BigInt,
            DataType::Float32 => SqlType::Real,
            DataType::Float64 => SqlType::Double,
            DataType::Utf8 => SqlType::Text,
            DataType::Timestamp(TimeUnit::Nanosecond, None) => SqlType::Timestamp,
            DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => SqlType::TimestampTz,
            other => {
                return Err(Error::NotSupported(format!(
                    "columns of type {other} are not supported"
                )))
            }
        })
    }

    /// The PostgreSQL name of the type, as its error messages spell it.
    fn name(self) -> &'static str {
        match self {
            SqlType::Boolean => "boolean",
            SqlType::SmallInt => "smallint",
            SqlType::Integer => "integer",
            SqlType::BigInt => "bigint",
            SqlType::Real => "real",
            SqlType::Double => "double precision",
            SqlType::Text => "text",
            SqlType::Timestamp => "timestamp",
            SqlType::TimestampTz => "timestamp with time zone",
        }
    }
}

/// Builds one RecordBatch of a given schema from text or scalar values, row by row.
///
/// Callers push exactly one value into every column, then call [`BatchBuilder::finish_row`].
/// After an error the current row is incomplete: drop the builder or [`BatchBuilder::finish`]
/// it (which then reports the unfinished row and resets).
pub struct BatchBuilder {
    schema: SchemaRef,
    columns: Vec<Column>,
    rows: usize,
}

/// One column being built: its type, whether it takes NULL, and its typed Arrow builder.
struct Column {
    name: String,
    sql_type: SqlType,
    nullable: bool,
    builder: ColumnBuilder,
}

/// A concrete Arrow builder per column type, so appending never downcasts.
enum ColumnBuilder {
    Boolean(BooleanBuilder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Utf8(StringBuilder),
    Timestamp(TimestampNanosecondBuilder),
}

impl BatchBuilder {
    /// A builder for `schema`; `Error::NotSupported` if a field has a type saql does not store.
    pub fn new(schema: SchemaRef) -> Result<Self> {
        let columns = schema
            .fields()
            .iter()
            .map(|field| {
                let sql_type = SqlType::of(field.data_type())?;
                let builder = match sql_type {
                    SqlType::Boolean => ColumnBuilder::Boolean(BooleanBuilder::new()),
                    SqlType::SmallInt => ColumnBuilder::Int16(Int16Builder::new()),
                    SqlType::Integer => ColumnBuilder::Int32(Int32Builder::new()),
                    SqlType::BigInt => ColumnBuilder::Int64(Int64Builder::new()),
                    SqlType::Real => ColumnBuilder::Float32(Float32Builder::new()),
                    SqlType::Double => ColumnBuilder::Float64(Float64Builder::new()),
                    SqlType::Text => ColumnBuilder::Utf8(StringBuilder::new()),
                    SqlType::Timestamp | SqlType::TimestampTz => ColumnBuilder::Timestamp(
                        TimestampNanosecondBuilder::new().with_data_type(field.data_type().clone()),
                    ),
                };
                Ok(Column {
                    name: field.name().clone(),
                    sql_type,
                    nullable: field.is_nullable(),
                    builder,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BatchBuilder {
            schema,
            columns,
            rows: 0,
        })
    }

    /// The schema of the batches this builder produces.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Parse `text` (None = SQL NULL) as the type of `column` and append it.
    pub fn push_text(&mut self, column: usize, text: Option<&str>) -> Result<()> {
        let Some(target) = self.columns.get_mut(column) else {
            return Err(no_such_column(column));
        };
        let pushed = match text {
            None => target.append_null(),
            Some(text) => target.append_text(text),
        };
        pushed.map_err(|e| e.in_column(self.schema.field(column).name()))
    }

    /// Append a scalar, casting it to the column type: any integer, float or decimal into a
    /// numeric column (range-checked, rounded to nearest into integers), a string parsed as
    /// [`BatchBuilder::push_text`] would, timestamps of any unit and dates into timestamp
    /// columns, and booleans and numbers into text. Other pairs fail with SQLSTATE 42804.
    pub fn push_scalar(&mut self, column: usize, value: &ScalarValue) -> Result<()> {
        let Some(target) = self.columns.get_mut(column) else {
            return Err(no_such_column(column));
        };
        target
            .append_scalar(value)
            .map_err(|e| e.in_column(self.schema.field(column).name()))
    }

    /// The number of complete rows so far.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no row has been completed yet.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Finish the current row. Every column must have received exactly one value since the
    /// last `finish_row`; otherwise this is a bug in the caller and returns `Error::Internal`.
    pub fn finish_row(&mut self) -> Result<()> {
        for column in &self.columns {
            let values = column.builder.len().saturating_sub(self.rows);
            if values != 1 {
                return Err(Error::Internal(format!(
                    "column \"{}\" got {values} values in row {}, expected exactly one",
                    column.name,
                    self.rows + 1
                )));
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The batch of all complete rows; the builder is then empty and ready for more. A row
    /// that was started but not finished is an `Error::Internal` (and is discarded).
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let rows = std::mem::take(&mut self.rows);
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|c| c.builder.finish())
            .collect();
        if arrays.iter().any(|a| a.len() != rows) {
            return Err(Error::Internal(format!(
                "batch finished with an incomplete row after {rows} rows"
            )));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)
            .map_err(|e| Error::Internal(e.to_string()))
    }
}

fn no_such_column(column: usize) -> Error {
    Error::Internal(format!("column index {column} is outside the schema"))
}

impl Column {
    fn append_null(&mut self) -> Result<()> {
        if !self.nullable {
            return Err(Error::invalid_input(
                "23502",
                format!(
                    "null value in column \"{}\" violates not-null constraint",
                    self.name
                ),
            ));
        }
        match &mut self.builder {
            ColumnBuilder::Boolean(b) => b.append_null(),
            ColumnBuilder::Int16(b) => b.append_null(),
            ColumnBuilder::Int32(b) => b.append_null(),
            ColumnBuilder::Int64(b) => b.append_null(),
            ColumnBuilder::Float32(b) => b.append_null(),
            ColumnBuilder::Float64(b) => b.append_null(),
            ColumnBuilder::Utf8(b) => b.append_null(),
            ColumnBuilder::Timestamp(b) => b.append_null(),
        }
        Ok(())
    }

    fn append_text(&mut self, text: &str) -> Result<()> {
        let ty = self.sql_type;
        match &mut self.builder {
            ColumnBuilder::Boolean(b) => b.append_value(parse_bool(text)?),
            ColumnBuilder::Int16(b) => b.append_value(parse_int(text, ty)?),
            ColumnBuilder::Int32(b) => b.append_value(parse_int(text, ty)?),
            ColumnBuilder::Int64(b) => b.append_value(parse_int(text, ty)?),
            ColumnBuilder::Float32(b) => b.append_value(parse_float(text, ty)?),
            ColumnBuilder::Float64(b) => b.append_value(parse_float(text, ty)?),
            ColumnBuilder::Utf8(b) => b.append_value(text),
            ColumnBuilder::Timestamp(b) => b.append_value(timestamp_nanos(text, ty)?),
        }
        Ok(())
    }

    fn append_scalar(&mut self, value: &ScalarValue) -> Result<()> {
        if value.is_null() {
            return self.append_null();
        }
        match value {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => return self.append_text(s),
            ScalarValue::Dictionary(_, inner) => return self.append_scalar(inner),
            _ => {}
        }
        let ty = self.sql_type;
        let mismatch = || {
            Error::invalid_input(
                "42804",
                format!(
                    "column is of type {} but expression is of type {}",
                    ty.name(),
                    type_name(&value.data_type())
                ),
            )
        };
        match &mut self.builder {
            ColumnBuilder::Boolean(b) => match value {
                ScalarValue::Boolean(Some(v)) => b.append_value(*v),
                _ => return Err(mismatch()),
            },
            ColumnBuilder::Int16(b) => b.append_value(int_from_scalar(value, ty, mismatch)?),
            ColumnBuilder::Int32(b) => b.append_value(int_from_scalar(value, ty, mismatch)?),
            ColumnBuilder::Int64(b) => b.append_value(int_from_scalar(value, ty, mismatch)?),
            ColumnBuilder::Float32(b) => {
                let v = float_from_scalar(value).ok_or_else(mismatch)?;
                if v.is_finite() && v.abs() > f64::from(f32::MAX) {
                    return Err(Error::invalid_input(
                        "22003",
                        "value out of range: overflow",
                    ));
                }
                b.append_value(v as f32)
            }
            ColumnBuilder::Float64(b) => {
                b.append_value(float_from_scalar(value).ok_or_else(mismatch)?)
            }
            ColumnBuilder::Utf8(b) => match value {
                ScalarValue::Boolean(Some(v)) => b.append_value(if *v { "true" } else { "false" }),
                _ => match (int_value(value), float_from_scalar(value)) {
                    (Some(i), _) => b.append_value(i.to_string()),
                    (None, Some(f)) => b.append_value(float_text(f)),
                    (None, None) => return Err(mismatch()),
                },
            },
            ColumnBuilder::Timestamp(b) => {
                b.append_value(timestamp_from_scalar(value).ok_or_else(mismatch)??)
            }
        }
        Ok(())
    }
}

impl ColumnBuilder {
    fn len(&self) -> usize {
        match self {
            ColumnBuilder::Boolean(b) => b.len(),
            ColumnBuilder::Int16(b) => b.len(),
            ColumnBuilder::Int32(b) => b.len(),
            ColumnBuilder::Int64(b) => b.len(),
            ColumnBuilder::Float32(b) => b.len(),
            ColumnBuilder::Float64(b) => b.len(),
            ColumnBuilder::Utf8(b) => b.len(),
            ColumnBuilder::Timestamp(b) => b.len(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Boolean(b) => Arc::new(b.finish()),
            ColumnBuilder::Int16(b) => Arc::new(b.finish()),
            ColumnBuilder::Int32(b) => Arc::new(b.finish()),
            ColumnBuilder::Int64(b) => Arc::new(b.finish()),
            ColumnBuilder::Float32(b) => Arc::new(b.finish()),
            ColumnBuilder::Float64(b) => Arc::new(b.finish()),
            ColumnBuilder::Utf8(b) => Arc::new(b.finish()),
            ColumnBuilder::Timestamp(b) => Arc::new(b.finish()),
        }
    }
}

/// Parse one text value as a scalar of `data_type` (same rules as [`BatchBuilder::push_text`]).
pub fn parse_scalar(text: &str, data_type: &DataType) -> Result<ScalarValue> {
    let ty = SqlType::of(data_type)?;
    Ok(match ty {
        SqlType::Boolean => ScalarValue::Boolean(Some(parse_bool(text)?)),
        SqlType::SmallInt => ScalarValue::Int16(Some(parse_int(text, ty)?)),
        SqlType::Integer => ScalarValue::Int32(Some(parse_int(text, ty)?)),
        SqlType::BigInt => ScalarValue::Int64(Some(parse_int(text, ty)?)),
        SqlType::Real => ScalarValue::Float32(Some(parse_float(text, ty)?)),
        SqlType::Double => ScalarValue::Float64(Some(parse_float(text, ty)?)),
        SqlType::Text => ScalarValue::Utf8(Some(text.to_string())),
        SqlType::Timestamp | SqlType::TimestampTz => {
            let zone = match data_type {
                DataType::Timestamp(_, zone) => zone.clone(),
                _ => None,
            };
            ScalarValue::TimestampNanosecond(Some(timestamp_nanos(text, ty)?), zone)
        }
    })
}

/// Parse a timestamp text into nanoseconds since the epoch (UTC). Accepts
/// `YYYY-MM-DD[ |T]HH:MM[:SS[.fraction]]` with an optional `Z`, `UTC` or `+HH[[:]MM]` offset
/// (the instant is converted to UTC; without one the text is taken as UTC), and a bare date
/// (midnight). Rejects bad text with 22007 and instants outside 1677..2262 with 22008.
pub fn parse_timestamp_nanos(text: &str) -> Result<i64> {
    timestamp_nanos(text, SqlType::Timestamp)
}

/// The whitespace PostgreSQL trims around numbers and booleans (C `isspace`).
fn trim_space(text: &str) -> &str {
    text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C'))
}

fn invalid_syntax(ty: SqlType, text: &str) -> Error {
    Error::invalid_input(
        "22P02",
        format!("invalid input syntax for type {}: \"{text}\"", ty.name()),
    )
}

/// PostgreSQL's boolean spellings: any prefix of true/false/yes/no, on/off (at least two
/// letters), 1 and 0, in any case.
fn parse_bool(text: &str) -> Result<bool> {
    let word = trim_space(text).as_bytes();
    let prefix_of = |full: &str, min: usize| {
        word.len() >= min
            && word.len() <= full.len()
            && full.as_bytes()[..word.len()].eq_ignore_ascii_case(word)
    };
    if prefix_of("true", 1) || prefix_of("yes", 1) || prefix_of("on", 2) || word == b"1" {
        Ok(true)
    } else if prefix_of("false", 1) || prefix_of("no", 1) || prefix_of("off", 2) || word == b"0" {
        Ok(false)
    } else {
        Err(invalid_syntax(SqlType::Boolean, text))
    }
}

fn parse_int<T: FromStr<Err = ParseIntError>>(text: &str, ty: SqlType) -> Result<T> {
    trim_space(text).parse::<T>().map_err(|e| match e.kind() {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => Error::invalid_input(
            "22003",
            format!("value \"{text}\" is out of range for type {}", ty.name()),
        ),
        _ => invalid_syntax(ty, text),
    })
}

/// A float type that parses from text and knows when it overflowed to infinity.
trait Float: FromStr + Copy {
    fn is_infinite(self) -> bool;
}

impl Float for f32 {
    fn is_infinite(self) -> bool {
        f32::is_infinite(self)
    }
}

impl Float for f64 {
    fn is_infinite(self) -> bool {
        f64::is_infinite(self)
    }
}

fn parse_float<T: Float>(text: &str, ty: SqlType) -> Result<T> {
    let trimmed = trim_space(text);
    let value = trimmed.parse::<T>().map_err(|_| invalid_syntax(ty, text))?;
    // Rust overflows "1e999" to infinity; PostgreSQL rejects it. Only the spelled-out
    // infinities contain an `i`.
    if value.is_infinite() && !trimmed.bytes().any(|b| b.eq_ignore_ascii_case(&b'i')) {
        return Err(Error::invalid_input(
            "22003",
            format!("\"{text}\" is out of range for type {}", ty.name()),
        ));
    }
    Ok(value)
}

/// Why a timestamp text was rejected.
enum TimestampProblem {
    /// Not a timestamp at all (22007).
    Syntax,
    /// A field such as the month or the hour is out of its range (22008).
    Field,
    /// A valid timestamp outside what nanoseconds since the epoch can hold (22008).
    Range,
}

fn timestamp_nanos(text: &str, ty: SqlType) -> Result<i64> {
    scan_timestamp(trim_space(text).as_bytes()).map_err(|problem| match problem {
        TimestampProblem::Syntax => Error::invalid_input(
            "22007",
            format!("invalid input syntax for type {}: \"{text}\"", ty.name()),
        ),
        TimestampProblem::Field => Error::invalid_input(
            "22008",
            format!("date/time field value out of range: \"{text}\""),
        ),
        TimestampProblem::Range => {
            Error::invalid_input("22008", format!("timestamp out of range: \"{text}\""))
        }
    })
}

/// Reads the fixed layout of a timestamp byte by byte.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, expected: u8) -> bool {
        let found = self
            .peek()
            .is_some_and(|b| b.eq_ignore_ascii_case(&expected));
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, expected: u8) -> Result<(), TimestampProblem> {
        if self.eat(expected) {
            Ok(())
        } else {
            Err(TimestampProblem::Syntax)
        }
    }

    /// Between `min` and `max` decimal digits as a number (`max` is at most 9).
    fn digits(&mut self, min: usize, max: usize) -> Result<u32, TimestampProblem> {
        let mut value = 0u32;
        let mut count = 0;
        while let Some(b @ b'0'..=b'9') = self.peek() {
            if count == max {
                return Err(TimestampProblem::Syntax);
            }
            value = value * 10 + u32::from(b - b'0');
            count += 1;
            self.at += 1;
        }
        if count < min {
            return Err(TimestampProblem::Syntax);
        }
        Ok(value)
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }
}

fn scan_timestamp(bytes: &[u8]) -> Result<i64, TimestampProblem> {
    let mut c = Cursor { bytes, at: 0 };
    let year = c.digits(4, 6)?;
    c.expect(b'-')?;
    let month = c.digits(1, 2)?;
    c.expect(b'-')?;
    let day = c.digits(1, 2)?;
    let (mut hour, mut minute, mut second, mut nanos, mut offset) = (0, 0, 0, 0u32, 0i64);
    if c.peek().is_some() {
        if !c.eat(b'T') {
            c.expect(b' ')?;
            c.skip_spaces();
        }
        hour = c.digits(1, 2)?;
        c.expect(b':')?;
        minute = c.digits(2, 2)?;
        if c.eat(b':') {
            second = c.digits(2, 2)?;
            if c.eat(b'.') {
                let start = c.at;
                while let Some(b @ b'0'..=b'9') = c.peek() {
                    if c.at - start < 9 {
                        nanos = nanos * 10 + u32::from(b - b'0');
                    }
                    c.at += 1;
                }
                let kept = (c.at - start).min(9);
                if kept == 0 {
                    return Err(TimestampProblem::Syntax);
                }
                nanos *= 10u32.pow((9 - kept) as u32);
            }
        }
        c.skip_spaces();
        offset = scan_offset(&mut c)?;
    }
    if c.peek().is_some() {
        return Err(TimestampProblem::Syntax);
    }
    let midnight_next_day = hour == 24 && minute == 0 && second == 0 && nanos == 0;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || (hour > 23 && !midnight_next_day)
        || minute > 59
        || second > 60
    {
        return Err(TimestampProblem::Field);
    }
    let Some(date) = NaiveDate::from_ymd_opt(year as i32, month, day) else {
        return Err(if year > 9999 {
            TimestampProblem::Range
        } else {
            TimestampProblem::Field
        });
    };
    const UNIX_EPOCH_DAYS_FROM_CE: i64 = 719_163;
    let days = i64::from(date.num_days_from_ce()) - UNIX_EPOCH_DAYS_FROM_CE;
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset;
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    i64::try_from(total).map_err(|_| TimestampProblem::Range)
}

/// An optional zone suffix: `Z`, `UTC`, or `+HH`, `+HHMM`, `+HH:MM` (or `-`), in seconds east.
fn scan_offset(c: &mut Cursor<'_>) -> Result<i64, TimestampProblem> {
    let sign = match c.peek() {
        None => return Ok(0),
        Some(b'+') => 1,
        Some(b'-') => -1,
        Some(_) => {
            if c.eat(b'Z') || (c.eat(b'U') && c.eat(b'T') && c.eat(b'C')) {
                return Ok(0);
            }
            return Err(TimestampProblem::Syntax);
        }
    };
    c.at += 1;
    let start = c.at;
    let hours_and_minutes = c.digits(1, 4)?;
    let (hours, minutes) = match c.at - start {
        1 | 2 if c.eat(b':') => (hours_and_minutes, c.digits(2, 2)?),
        1 | 2 => (hours_and_minutes, 0),
        4 => (hours_and_minutes / 100, hours_and_minutes % 100),
        _ => return Err(TimestampProblem::Syntax),
    };
    if hours > 23 || minutes > 59 {
        return Err(TimestampProblem::Field);
    }
    Ok(sign * i64::from(hours * 3600 + minutes * 60))
}

/// An integer scalar as i128, or None for other types.
fn int_value(value: &ScalarValue) -> Option<i128> {
    Some(match value {
        ScalarValue::Int8(Some(v)) => i128::from(*v),
        ScalarValue::Int16(Some(v)) => i128::from(*v),
        ScalarValue::Int32(Some(v)) => i128::from(*v),
        ScalarValue::Int64(Some(v)) => i128::from(*v),
        ScalarValue::UInt8(Some(v)) => i128::from(*v),
        ScalarValue::UInt16(Some(v)) => i128::from(*v),
        ScalarValue::UInt32(Some(v)) => i128::from(*v),
        ScalarValue::UInt64(Some(v)) => i128::from(*v),
        _ => return None,
    })
}

/// A numeric scalar as f64, or None for non-numeric types.
fn float_from_scalar(value: &ScalarValue) -> Option<f64> {
    match value {
        ScalarValue::Float32(Some(v)) => Some(f64::from(*v)),
        ScalarValue::Float64(Some(v)) => Some(*v),
        ScalarValue::Decimal128(Some(v), _, scale) => {
            Some(*v as f64 / 10f64.powi(i32::from(*scale)))
        }
        other => int_value(other).map(|v| v as f64),
    }
}

/// A numeric scalar rounded to the nearest integer of the column's type, as PostgreSQL's
/// assignment casts do (floats round half to even, decimals half away from zero).
fn int_from_scalar<T: TryFrom<i128>>(
    value: &ScalarValue,
    ty: SqlType,
    mismatch: impl FnOnce() -> Error,
) -> Result<T> {
    let out_of_range = || Error::invalid_input("22003", format!("{} out of range", ty.name()));
    let wide = match value {
        ScalarValue::Float32(Some(_)) | ScalarValue::Float64(Some(_)) => {
            let f = float_from_scalar(value).unwrap_or(f64::NAN);
            if !f.is_finite() {
                return Err(out_of_range());
            }
            // `as` saturates, and a saturated value fails the range check below.
            f.round_ties_even() as i128
        }
        ScalarValue::Decimal128(Some(v), _, scale) => {
            decimal_to_int(*v, *scale).ok_or_else(out_of_range)?
        }
        other => int_value(other).ok_or_else(mismatch)?,
    };
    T::try_from(wide).map_err(|_| out_of_range())
}

/// A decimal's unscaled value and scale as the nearest integer, ties away from zero.
fn decimal_to_int(unscaled: i128, scale: i8) -> Option<i128> {
    if scale <= 0 {
        return unscaled.checked_mul(10i128.checked_pow(u32::from(scale.unsigned_abs()))?);
    }
    let divisor = 10i128.checked_pow(u32::from(scale.unsigned_abs()))?;
    let (quotient, remainder) = (unscaled / divisor, unscaled % divisor);
    let round = remainder.unsigned_abs() * 2 >= divisor.unsigned_abs();
    Some(quotient + if round { unscaled.signum() } else { 0 })
}

/// A timestamp or date scalar as nanoseconds since the epoch; None for other types,
/// Some(Err) when it does not fit.
fn timestamp_from_scalar(value: &ScalarValue) -> Option<Result<i64>> {
    let (v, nanos_per_unit) = match value {
        ScalarValue::TimestampNanosecond(Some(v), _) => (*v, 1),
        ScalarValue::TimestampMicrosecond(Some(v), _) => (*v, 1_000),
        ScalarValue::TimestampMillisecond(Some(v), _) => (*v, 1_000_000),
        ScalarValue::TimestampSecond(Some(v), _) => (*v, 1_000_000_000),
        ScalarValue::Date64(Some(v)) => (*v, 1_000_000),
        ScalarValue::Date32(Some(v)) => (i64::from(*v), 86_400_000_000_000),
        _ => return None,
    };
    Some(
        v.checked_mul(nanos_per_unit)
            .ok_or_else(|| Error::invalid_input("22008", "timestamp out of range")),
    )
}

/// A float as PostgreSQL prints it: shortest round-trip digits, `NaN`, `Infinity`.
fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        f.to_string()
    }
}

/// A data type by its SQL name where saql has one, else Arrow's.
fn type_name(data_type: &DataType) -> String {
    match SqlType::of(data_type) {
        Ok(ty) => ty.name().to_string(),
        Err(_) => match data_type {
            DataType::Int8 => "tinyint".to_string(),
            DataType::LargeUtf8 | DataType::Utf8View => "text".to_string(),
            DataType::Date32 | DataType::Date64 => "date".to_string(),
            DataType::Decimal128(..) => "numeric".to_string(),
            other => other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(ts("2024-01-01 12:00:00+02"), base);
        assert_eq!(ts("2024-01-01 05:30:00-04:30"), base);
        assert_eq!(ts("2024-01-01T15:30:00+0530"), base);
        assert_eq!(ts("2024-01-01 10:00:00 UTC"), base);
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
            prop_assert_eq!(parse_scalar(&v.to_string(), &DataType::Int64).ok(), Some(ScalarValue::Int64(Some(v))));
            let narrow = parse_scalar(&v.to_string(), &DataType::Int32);
            match i32::try_from(v) {
                Ok(n) => prop_assert_eq!(narrow.ok(), Some(ScalarValue::Int32(Some(n)))),
                Err(_) => prop_assert_eq!(narrow.map_err(|e| e.sqlstate()).err(), Some("22003")),
            }
        }
    }
}
