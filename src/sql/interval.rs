//! Durations written as SQL intervals: `INTERVAL '5' SECOND`, `INTERVAL '10 minutes'`,
//! `INTERVAL '1 hour 30 minutes'`, or option strings such as `'5s'`.

use crate::error::sqlstate;
use std::time::Duration;

use datafusion::sql::sqlparser::ast::{DateTimeField, Expr, Interval, Value};

use crate::error::{Error, Result};

/// The duration of an `INTERVAL` expression.
pub fn interval_duration(expr: &Expr) -> Result<Duration> {
    let Expr::Interval(Interval {
        value,
        leading_field,
        ..
    }) = expr
    else {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            format!("expected an INTERVAL, found {expr}"),
        ));
    };
    let text = match value.as_ref() {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::Number(s, _) => s.clone(),
            other => {
                return Err(Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    format!("invalid interval {other}"),
                ))
            }
        },
        other => {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("invalid interval {other}"),
            ))
        }
    };
    match leading_field {
        Some(field) => {
            let unit = field_unit(field)?;
            let amount: f64 = text.trim().parse().map_err(|_| {
                Error::invalid_input(
                    sqlstate::INVALID_DATETIME_FORMAT,
                    format!("invalid interval value \"{text}\""),
                )
            })?;
            scaled(amount, unit, &text)
        }
        None => parse_duration(&text),
    }
}

fn field_unit(field: &DateTimeField) -> Result<f64> {
    Ok(match field {
        DateTimeField::Millisecond | DateTimeField::Milliseconds => 1e-3,
        DateTimeField::Microsecond | DateTimeField::Microseconds => 1e-6,
        DateTimeField::Second | DateTimeField::Seconds => 1.0,
        DateTimeField::Minute | DateTimeField::Minutes => 60.0,
        DateTimeField::Hour | DateTimeField::Hours => 3600.0,
        DateTimeField::Day | DateTimeField::Days => 86400.0,
        DateTimeField::Week(_) | DateTimeField::Weeks => 7.0 * 86400.0,
        other => {
            return Err(Error::NotSupported(format!(
                "interval unit {other} is not supported; use WEEK or a smaller unit"
            )))
        }
    })
}

fn unit_seconds(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "ns" | "nanosecond" | "nanoseconds" => 1e-9,
        "us" | "microsecond" | "microseconds" => 1e-6,
        "ms" | "millisecond" | "milliseconds" => 1e-3,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        "w" | "week" | "weeks" => 7.0 * 86400.0,
        _ => return None,
    })
}

fn scaled(amount: f64, unit: f64, text: &str) -> Result<Duration> {
    let secs = amount * unit;
    if !secs.is_finite() || !(0.0..=1e12).contains(&secs) {
        return Err(Error::invalid_input(
            sqlstate::DATETIME_FIELD_OVERFLOW,
            format!("interval out of range: \"{text}\""),
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a duration such as `5s`, `10 minutes`, `1 hour 30 minutes` or `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let bad = || {
        Error::invalid_input(
            sqlstate::INVALID_DATETIME_FORMAT,
            format!("invalid interval \"{text}\"; write e.g. '5 seconds' or '10m'"),
        )
    };
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(bad());
        }
        let amount: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = rest[num_len..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = if unit_len == 0 {
            1.0
        } else {
            unit_seconds(&rest[..unit_len]).ok_or_else(bad)?
        };
        rest = rest[unit_len..].trim_start();
        total += scaled(amount, unit, text)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_words_and_abbreviations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(
            parse_duration("10 minutes").unwrap(),
            Duration::from_secs(600)
        );
        assert_eq!(
            parse_duration("1 hour 30 minutes").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5 fortnights").is_err());
    }
}
