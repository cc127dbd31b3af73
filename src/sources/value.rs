//! Text and scalar values into Arrow columns. This is the one place that decides how an input
//! value of each SQL type is spelled and how it is rejected, so INSERT (scalars) and COPY (text)
//! accept the same values and fail with the same PostgreSQL-worded errors. The per-value path
//! parses straight from `&str` into a typed Arrow builder without allocating.

use crate::error::sqlstate;
use std::num::{IntErrorKind, ParseIntError};
use std::str::FromStr;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate};
use datafusion::arrow::array::{
    Array, ArrayBuilder, ArrayRef, BooleanArray, BooleanBuilder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, StringBuilder, TimestampNanosecondBuilder,
};
use datafusion::arrow::compute::filter;
use datafusion::arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};
use crate::text::{write_float, FLOAT_TEXT_MAX};

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

/// Evaluates `$body` with `$b` bound to the concrete builder, whatever the column type.
macro_rules! each_builder {
    ($builder:expr, $b:ident => $body:expr) => {
        match $builder {
            ColumnBuilder::Boolean($b) => $body,
            ColumnBuilder::Int16($b) => $body,
            ColumnBuilder::Int32($b) => $body,
            ColumnBuilder::Int64($b) => $body,
            ColumnBuilder::Float32($b) => $body,
            ColumnBuilder::Float64($b) => $body,
            ColumnBuilder::Utf8($b) => $body,
            ColumnBuilder::Timestamp($b) => $body,
        }
    };
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

    /// Parse a whole column's worth of values at once: `texts` yields, for each row after the
    /// complete ones, the text of `column` (`Ok(None)` = NULL) or why there is none. Every row
    /// gets a value; one that fails is NULL in its place and is reported to `bad` with its
    /// index among `texts` (the caller drops such rows with [`BatchBuilder::finish_filtered`]).
    /// Call it once per column, then [`BatchBuilder::finish_rows`].
    pub fn push_texts<'a>(
        &mut self,
        column: usize,
        texts: impl Iterator<Item = Result<Option<&'a str>>>,
        bad: &mut dyn FnMut(usize, Error),
    ) -> Result<()> {
        let Some(target) = self.columns.get_mut(column) else {
            return Err(no_such_column(column));
        };
        let name = self.schema.field(column).name();
        let ty = target.sql_type;
        let nullable = target.nullable;
        // One loop per column type: the match on the type is outside the loop.
        macro_rules! fill {
            ($b:expr, $parse:expr) => {
                for (row, text) in texts.enumerate() {
                    match text.and_then(|t| match t {
                        Some(t) => $parse(t).map(Some),
                        None if nullable => Ok(None),
                        None => Err(not_null(name)),
                    }) {
                        Ok(Some(v)) => $b.append_value(v),
                        Ok(None) => $b.append_null(),
                        Err(e) => {
                            $b.append_null();
                            bad(row, e.in_column(name));
                        }
                    }
                }
            };
        }
        match &mut target.builder {
            ColumnBuilder::Boolean(b) => fill!(b, parse_bool),
            ColumnBuilder::Int16(b) => fill!(b, |t| parse_int::<i16>(t, ty)),
            ColumnBuilder::Int32(b) => fill!(b, |t| parse_int::<i32>(t, ty)),
            ColumnBuilder::Int64(b) => fill!(b, |t| parse_int::<i64>(t, ty)),
            ColumnBuilder::Float32(b) => fill!(b, |t| parse_float::<f32>(t, ty)),
            ColumnBuilder::Float64(b) => fill!(b, |t| parse_float::<f64>(t, ty)),
            ColumnBuilder::Utf8(b) => fill!(b, check_text),
            ColumnBuilder::Timestamp(b) => fill!(b, |t| timestamp_nanos(t, ty)),
        }
        Ok(())
    }

    /// Completes `rows` rows pushed a column at a time with [`BatchBuilder::push_texts`].
    pub fn finish_rows(&mut self, rows: usize) -> Result<()> {
        let expected = self.rows + rows;
        if let Some(c) = self.columns.iter().find(|c| c.builder.len() != expected) {
            return Err(Error::Internal(format!(
                "column \"{}\" has {} values, expected {expected}",
                c.name,
                c.builder.len()
            )));
        }
        self.rows = expected;
        Ok(())
    }

    /// [`BatchBuilder::finish`], keeping only the rows where `keep` is true.
    pub fn finish_filtered(&mut self, keep: &BooleanArray) -> Result<RecordBatch> {
        let rows = std::mem::take(&mut self.rows);
        let internal = |e: ArrowError| Error::Internal(e.to_string());
        let arrays = self
            .columns
            .iter_mut()
            .map(|c| filter(&c.builder.finish(), keep))
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()
            .map_err(internal)?;
        if keep.len() != rows {
            return Err(Error::Internal(format!(
                "a filter of {} rows for a batch of {rows}",
                keep.len()
            )));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(keep.true_count()));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options).map_err(internal)
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

/// PostgreSQL's error for a NULL in a NOT NULL column.
fn not_null(column: &str) -> Error {
    Error::invalid_input(
        sqlstate::NOT_NULL_VIOLATION,
        format!("null value in column \"{column}\" violates not-null constraint"),
    )
}

impl Column {
    fn append_null(&mut self) -> Result<()> {
        if !self.nullable {
            return Err(not_null(&self.name));
        }
        each_builder!(&mut self.builder, b => b.append_null());
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
            ColumnBuilder::Utf8(b) => b.append_value(check_text(text)?),
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
                sqlstate::DATATYPE_MISMATCH,
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
                        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
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
                ScalarValue::Float32(Some(v)) => {
                    let mut text = String::with_capacity(FLOAT_TEXT_MAX);
                    write_float(&mut text, *v);
                    b.append_value(text)
                }
                _ => match (int_value(value), float_from_scalar(value)) {
                    (Some(i), _) => b.append_value(i.to_string()),
                    (None, Some(f)) => {
                        let mut text = String::with_capacity(FLOAT_TEXT_MAX);
                        write_float(&mut text, f);
                        b.append_value(text)
                    }
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
        each_builder!(self, b => b.len())
    }

    fn finish(&mut self) -> ArrayRef {
        each_builder!(self, b => Arc::new(b.finish()) as ArrayRef)
    }
}

/// `text` if PostgreSQL would store it: TEXT cannot hold a NUL character (22021).
pub fn check_text(text: &str) -> Result<&str> {
    if text.contains('\0') {
        return Err(Error::invalid_input(
            sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
            "invalid byte sequence for encoding \"UTF8\": 0x00",
        ));
    }
    Ok(text)
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
        SqlType::Text => ScalarValue::Utf8(Some(check_text(text)?.to_string())),
        SqlType::Timestamp | SqlType::TimestampTz => {
            let zone = match data_type {
                DataType::Timestamp(_, zone) => zone.clone(),
                _ => None,
            };
            ScalarValue::TimestampNanosecond(Some(timestamp_nanos(text, ty)?), zone)
        }
    })
}

/// Parse a `TIMESTAMP` (without time zone) text into nanoseconds since the epoch. Accepts
/// `YYYY-MM-DD[ |T]HH:MM[:SS[.fraction]]` with an optional `Z`, `UTC` or `+HH[[:]MM]` offset,
/// which is ignored as PostgreSQL ignores it for this type (`12:00+02` is 12:00; a
/// `TIMESTAMPTZ` column converts it to UTC instead), and a bare date (midnight). Rejects bad
/// text with 22007 and instants outside 1677..2262 with 22008.
pub fn parse_timestamp_nanos(text: &str) -> Result<i64> {
    timestamp_nanos(text, SqlType::Timestamp)
}

/// The whitespace PostgreSQL trims around numbers and booleans (C `isspace`).
fn trim_space(text: &str) -> &str {
    text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C'))
}

fn invalid_syntax(ty: SqlType, text: &str) -> Error {
    Error::invalid_input(
        sqlstate::INVALID_TEXT_REPRESENTATION,
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
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("value \"{text}\" is out of range for type {}", ty.name()),
        ),
        _ => invalid_syntax(ty, text),
    })
}

fn parse_float<T: FromStr + Into<f64> + Copy>(text: &str, ty: SqlType) -> Result<T> {
    let trimmed = trim_space(text);
    let value = trimmed.parse::<T>().map_err(|_| invalid_syntax(ty, text))?;
    // Rust overflows "1e999" to infinity; PostgreSQL rejects it. Only the spelled-out
    // infinities contain an `i`.
    if value.into().is_infinite() && !trimmed.bytes().any(|b| b.eq_ignore_ascii_case(&b'i')) {
        return Err(Error::invalid_input(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
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
    let with_zone = ty == SqlType::TimestampTz;
    scan_timestamp(trim_space(text).as_bytes(), with_zone).map_err(|problem| match problem {
        TimestampProblem::Syntax => Error::invalid_input(
            sqlstate::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type {}: \"{text}\"", ty.name()),
        ),
        TimestampProblem::Field => Error::invalid_input(
            sqlstate::DATETIME_FIELD_OVERFLOW,
            format!("date/time field value out of range: \"{text}\""),
        ),
        TimestampProblem::Range => Error::invalid_input(
            sqlstate::DATETIME_FIELD_OVERFLOW,
            format!("timestamp out of range: \"{text}\""),
        ),
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

/// A timestamp's nanoseconds since the epoch; its zone offset is applied when `with_zone`,
/// and otherwise only checked.
fn scan_timestamp(bytes: &[u8], with_zone: bool) -> Result<i64, TimestampProblem> {
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
        if !with_zone {
            offset = 0;
        }
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
    let out_of_range = || {
        Error::invalid_input(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{} out of range", ty.name()),
        )
    };
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
    Some(v.checked_mul(nanos_per_unit).ok_or_else(|| {
        Error::invalid_input(sqlstate::DATETIME_FIELD_OVERFLOW, "timestamp out of range")
    }))
}

/// A data type by its SQL name where saql has one, else Arrow's.
pub fn type_name(data_type: &DataType) -> String {
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
#[path = "value/tests.rs"]
mod tests;
