//! The parameters of a Bind as the engine's [`Param`]s. A binary parameter is decoded by
//! pgwire's typed [`Portal::parameter`] (postgres-types' `FromSql`, which checks each
//! value's length) for the type the client declared or, when it declared none, the type
//! the statement gives it. A text parameter is read by saql's own input rules (those of
//! COPY and INSERT literals, not pgwire's text decoder, which turns `''` into `'` in strings
//! and an empty string into `false`): as its declared type when the client declared one
//! saql stores, else as text of unknown type that its place in the statement resolves.

use crate::error::sqlstate;

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime};
use datafusion::scalar::ScalarValue;
use pgwire::api::portal::Portal;
use pgwire::api::Type;
use tokio_postgres::types::FromSqlOwned;

use super::encode::arrow_type;
use crate::error::{Error, Result};
use crate::sources::param::Param;
use crate::sources::value::{check_text, parse_scalar};

/// The type the client declared for parameter `i` in its Parse, if it declared one.
pub fn declared_type(declared: &[Option<Type>], i: usize) -> Option<Type> {
    declared
        .get(i)
        .cloned()
        .flatten()
        .filter(|t| *t != Type::UNKNOWN)
}

/// Parameter `i` of `portal`, of type `ty`: the client's declared type, or for a binary
/// parameter without one the type the statement gives it (`None`: a text parameter is text
/// of unknown type, a binary one is read as TEXT).
pub fn bound_param(portal: &Portal<String>, i: usize, ty: Option<&Type>) -> Result<Param> {
    let n = i + 1;
    let Some(bytes) = portal.parameters.get(i).cloned().flatten() else {
        return Ok(Param::Null);
    };
    if !portal.parameter_format.is_binary(i) {
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            Error::invalid_input(
                sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
                "invalid byte sequence for encoding \"UTF8\"",
            )
            .for_parameter(n)
        })?;
        return text_param(text, ty).map_err(|e| e.for_parameter(n));
    }
    let ty = ty.unwrap_or(&Type::TEXT);
    binary_param(portal, i, ty)
}

/// A text parameter: parsed as `ty` when saql stores that type, else text for its place.
fn text_param(text: &str, ty: Option<&Type>) -> Result<Param> {
    match ty.and_then(arrow_type) {
        Some(data_type) => Ok(Param::Value(parse_scalar(text, &data_type)?)),
        None => Ok(Param::Text(check_text(text)?.to_string())),
    }
}

/// A binary parameter of type `ty`: 22P03 when its bytes are not a value of that type,
/// 0A000 for a type saql does not decode.
fn binary_param(portal: &Portal<String>, i: usize, ty: &Type) -> Result<Param> {
    let n = i + 1;
    let value = match *ty {
        Type::BOOL => ScalarValue::Boolean(Some(decode::<bool>(portal, i, ty)?)),
        Type::INT2 => ScalarValue::Int16(Some(decode(portal, i, ty)?)),
        Type::INT4 => ScalarValue::Int32(Some(decode(portal, i, ty)?)),
        Type::INT8 => ScalarValue::Int64(Some(decode(portal, i, ty)?)),
        Type::OID => ScalarValue::Int64(Some(i64::from(decode::<u32>(portal, i, ty)?))),
        Type::FLOAT4 => ScalarValue::Float32(Some(decode(portal, i, ty)?)),
        Type::FLOAT8 => ScalarValue::Float64(Some(decode(portal, i, ty)?)),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            let text: String = decode(portal, i, ty)?;
            return Ok(Param::Text(text));
        }
        Type::TIMESTAMP => {
            let ts: NaiveDateTime = decode(portal, i, ty)?;
            ScalarValue::TimestampNanosecond(Some(nanos(ts, n)?), None)
        }
        Type::TIMESTAMPTZ => {
            let ts: DateTime<FixedOffset> = decode(portal, i, ty)?;
            ScalarValue::TimestampNanosecond(Some(nanos(ts.naive_utc(), n)?), Some("UTC".into()))
        }
        Type::DATE => {
            let date: NaiveDate = decode(portal, i, ty)?;
            let days = date.signed_duration_since(DateTime::UNIX_EPOCH.date_naive());
            ScalarValue::Date32(Some(i32::try_from(days.num_days()).map_err(|_| {
                Error::invalid_input(sqlstate::DATETIME_FIELD_OVERFLOW, "date out of range")
                    .for_parameter(n)
            })?))
        }
        Type::BYTEA => ScalarValue::Binary(Some(decode(portal, i, ty)?)),
        _ => {
            return Err(Error::NotSupported(format!(
                "binary parameters of type {ty} are not supported (parameter ${n}); \
                 send it in text format"
            )))
        }
    };
    Ok(Param::Value(value))
}

/// Parameter `i` decoded as a `T` by pgwire (binary: postgres-types' `FromSql`).
fn decode<T>(portal: &Portal<String>, i: usize, ty: &Type) -> Result<T>
where
    T: FromSqlOwned + for<'a> pgwire::types::FromSqlText<'a>,
{
    let bad = || {
        Error::invalid_input(
            sqlstate::INVALID_BINARY_REPRESENTATION,
            format!("incorrect binary data format in bind parameter {}", i + 1),
        )
    };
    portal
        .parameter::<T>(i, ty)
        .map_err(|_| bad())?
        .ok_or_else(bad)
}

/// A timestamp as nanoseconds since the epoch (22008 outside 1677..2262).
fn nanos(ts: NaiveDateTime, n: usize) -> Result<i64> {
    ts.and_utc().timestamp_nanos_opt().ok_or_else(|| {
        Error::invalid_input(
            sqlstate::DATETIME_FIELD_OVERFLOW,
            format!("timestamp out of range: \"{ts}\" (parameter ${n})"),
        )
    })
}
