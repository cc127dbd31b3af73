//! Values bound to a statement's `$1`, `$2`, ... placeholders: by the extended protocol's Bind,
//! by `EXECUTE name (a, b)`, or by [`crate::Engine::execute_with_params`]. A value is typed
//! (a binary parameter, a number) or text whose type its context decides, as PostgreSQL
//! resolves a parameter of type `unknown`: the column an INSERT fills, the type DataFusion
//! infers for the placeholder in a SELECT.

use crate::error::sqlstate;

use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::DataType;
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::{Expr, Value};

use super::value::{check_text, parse_scalar, BatchBuilder};
use crate::error::{Error, Result};

/// One bound parameter.
///
/// `Text` is what a client sends without a type (and what `"..".into()` makes): it is read
/// by the input rules of the type its context gives it, the same rules as COPY and INSERT
/// literals. `Value` keeps its type and is converted as an assignment converts it (INSERT:
/// floats round into integer columns, 22003 when out of range) or compared as DataFusion
/// compares mixed types (SELECT: `bigint_col >= 1.5` stays a comparison with 1.5).
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// SQL NULL, of whatever type the context needs.
    Null,
    /// Text of a type not yet known.
    Text(String),
    /// A typed value (never a null scalar: that is [`Param::Null`]).
    Value(ScalarValue),
}

impl Param {
    /// This parameter as a scalar for a place of type `target` (None: no type is known, so a
    /// value keeps its own type and text is `Utf8`). Text, and a typed `Utf8` value, is read
    /// by `target`'s input rules; another typed value is converted only when that loses
    /// nothing (a float for a BIGINT placeholder stays a float, and DataFusion's coercion
    /// compares the two as PostgreSQL does).
    pub fn resolve(&self, target: Option<&DataType>) -> Result<ScalarValue> {
        let target = target.filter(|t| **t != DataType::Null);
        match (self, target) {
            (Param::Null, Some(t)) => Ok(ScalarValue::try_from(t).unwrap_or(ScalarValue::Null)),
            (Param::Null, None) => Ok(ScalarValue::Null),
            (Param::Text(s), None) => Ok(ScalarValue::Utf8(Some(check_text(s)?.to_string()))),
            (Param::Text(s), Some(t)) => text_as(s, t),
            (Param::Value(v), Some(t)) => match text_of(v) {
                Some(s) => text_as(s, t),
                None => Ok(exact_cast(v, t).unwrap_or_else(|| v.clone())),
            },
            (Param::Value(v), None) => Ok(v.clone()),
        }
    }

    /// Appends this parameter to `column` of `builder`, converted to the column's type.
    pub fn push_into(&self, builder: &mut BatchBuilder, column: usize) -> Result<()> {
        match self {
            Param::Null => builder.push_text(column, None),
            Param::Text(s) => builder.push_text(column, Some(s)),
            Param::Value(v) => builder.push_scalar(column, v),
        }
    }
}

/// The number `n` of a `$n` placeholder (in parentheses or not), `None` for any other
/// expression.
pub fn placeholder_number(expr: &Expr) -> Option<usize> {
    match expr {
        Expr::Nested(inner) => placeholder_number(inner),
        Expr::Value(v) => match &v.value {
            Value::Placeholder(p) => p.strip_prefix('$')?.parse().ok().filter(|&n| n > 0),
            _ => None,
        },
        _ => None,
    }
}

/// The text of a string scalar.
fn text_of(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s),
        _ => None,
    }
}

/// `text` read as a value of `target`: by saql's input rules where saql stores the type,
/// else by Arrow's cast (22P02 when it does not read).
fn text_as(text: &str, target: &DataType) -> Result<ScalarValue> {
    let text = check_text(text)?;
    match parse_scalar(text, target) {
        // Not a type saql stores.
        Err(Error::NotSupported(_)) => {}
        other => return other,
    }
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    ScalarValue::Utf8(Some(text.to_string()))
        .to_array()
        .and_then(|a| Ok(cast_with_options(&a, target, &options)?))
        .and_then(|a| ScalarValue::try_from_array(&a, 0))
        .map_err(|_| {
            Error::invalid_input(
                sqlstate::INVALID_TEXT_REPRESENTATION,
                format!("invalid input syntax for type {target}: \"{text}\""),
            )
        })
}

/// `v` as a `target` when converting it back gives `v` again.
fn exact_cast(v: &ScalarValue, target: &DataType) -> Option<ScalarValue> {
    let cast = v.cast_to(target).ok()?;
    let back = cast.cast_to(&v.data_type()).ok()?;
    (back == *v && !cast.is_null()).then_some(cast)
}

impl From<&str> for Param {
    fn from(text: &str) -> Self {
        Param::Text(text.to_string())
    }
}

impl From<String> for Param {
    fn from(text: String) -> Self {
        Param::Text(text)
    }
}

impl From<ScalarValue> for Param {
    fn from(value: ScalarValue) -> Self {
        if value.is_null() {
            Param::Null
        } else {
            Param::Value(value)
        }
    }
}

/// `From` for the Rust types that have one scalar type.
macro_rules! param_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for Param {
            fn from(v: $t) -> Self {
                Param::Value(ScalarValue::$variant(Some(v)))
            }
        })*
    };
}

param_from!(
    bool => Boolean,
    i16 => Int16,
    i32 => Int32,
    i64 => Int64,
    f32 => Float32,
    f64 => Float64,
);

impl<T: Into<Param>> From<Option<T>> for Param {
    fn from(value: Option<T>) -> Self {
        value.map_or(Param::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::TimeUnit;

    #[test]
    fn text_takes_the_type_of_its_context() {
        let p = Param::from("42");
        assert_eq!(
            p.resolve(Some(&DataType::Int64)).unwrap(),
            ScalarValue::Int64(Some(42))
        );
        assert_eq!(
            p.resolve(None).unwrap(),
            ScalarValue::Utf8(Some("42".into()))
        );
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
        assert_eq!(
            Param::from("2024-01-01 00:00:01")
                .resolve(Some(&ts))
                .unwrap(),
            ScalarValue::TimestampNanosecond(Some(1_704_067_201_000_000_000), None)
        );
        let e = Param::from("x")
            .resolve(Some(&DataType::Int64))
            .unwrap_err();
        assert_eq!(e.sqlstate(), sqlstate::INVALID_TEXT_REPRESENTATION, "{e}");
        // A type saql does not store is read by Arrow's cast.
        assert_eq!(
            Param::from("2024-01-02")
                .resolve(Some(&DataType::Date32))
                .unwrap(),
            ScalarValue::Date32(Some(19_724))
        );
        let e = Param::from("x")
            .resolve(Some(&DataType::Date32))
            .unwrap_err();
        assert_eq!(e.sqlstate(), sqlstate::INVALID_TEXT_REPRESENTATION, "{e}");
    }

    #[test]
    fn a_typed_value_is_converted_only_without_loss() {
        assert_eq!(
            Param::from(7i32).resolve(Some(&DataType::Int64)).unwrap(),
            ScalarValue::Int64(Some(7))
        );
        assert_eq!(
            Param::from(1.5f64).resolve(Some(&DataType::Int64)).unwrap(),
            ScalarValue::Float64(Some(1.5))
        );
        assert_eq!(
            Param::from(70_000i64)
                .resolve(Some(&DataType::Int16))
                .unwrap(),
            ScalarValue::Int64(Some(70_000))
        );
    }

    #[test]
    fn null_takes_the_type_of_its_context() {
        assert_eq!(
            Param::Null.resolve(Some(&DataType::Int64)).unwrap(),
            ScalarValue::Int64(None)
        );
        assert_eq!(Param::from(None::<i64>), Param::Null);
        assert_eq!(Param::from(ScalarValue::Int32(None)), Param::Null);
    }
}
