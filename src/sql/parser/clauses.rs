//! The clauses that follow a continuous query's body: `OUTLIER`, `INVARIANT` (anomaly
//! models over the results) and `SUPPRESS` (alert control).

use datafusion::sql::sqlparser::ast::{self as sq, Expr};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::super::ast::{
    Clauses, InvariantClause, InvariantKind, OutlierClause, OutlierMethod, SuppressClause, Training,
};
use super::super::interval::interval_duration;
use super::{error_at, expect_word, parse_word};
use crate::error::Result;

/// The anomaly-model clauses after a query body (at most one).
pub(super) fn parse_clauses(parser: &mut Parser) -> Result<Clauses> {
    let at = parser.peek_token();
    let clauses = Clauses {
        outlier: parse_outlier(parser)?,
        invariant: parse_invariant(parser)?,
        within: None,
        pattern: None,
        subsets: Vec::new(),
        emit_timeout: false,
        suppress: parse_suppress(parser)?,
    };
    if clauses.outlier.is_some() && clauses.invariant.is_some() {
        return Err(error_at(
            &at,
            "a query takes either OUTLIER or INVARIANT, not both",
        ));
    }
    Ok(clauses)
}

/// `SUPPRESS FOR INTERVAL '...' [PER (exprs)]`, if present.
fn parse_suppress(parser: &mut Parser) -> Result<Option<SuppressClause>> {
    if !parse_word(parser, "SUPPRESS") {
        return Ok(None);
    }
    parser.expect_keyword_is(Keyword::FOR)?;
    let tok = parser.peek_token();
    let expr = parser.parse_expr()?;
    let interval = interval_duration(&expr).map_err(|e| error_at(&tok, e.to_string()))?;
    if interval.as_micros() == 0 {
        return Err(error_at(
            &tok,
            "SUPPRESS FOR takes a positive interval of at least a microsecond",
        ));
    }
    let mut per = Vec::new();
    if parse_word(parser, "PER") {
        parser.expect_token(&Token::LParen)?;
        per = parser.parse_comma_separated(|p| p.parse_expr())?;
        parser.expect_token(&Token::RParen)?;
    }
    Ok(Some(SuppressClause { interval, per }))
}

/// `INVARIANT SET|RANGE (exprs) [PER (exprs)] TRAINING n WINDOWS | INTERVAL '...' |
/// UNTIL ts | BETWEEN ts AND ts [MIN SUPPORT n] [OFFLINE|ONLINE]`, if present.
fn parse_invariant(parser: &mut Parser) -> Result<Option<InvariantClause>> {
    if !parse_word(parser, "INVARIANT") {
        return Ok(None);
    }
    let tok = parser.peek_token();
    let kind = if parse_word(parser, "SET") || parser.parse_keyword(Keyword::SET) {
        InvariantKind::Set
    } else if parse_word(parser, "RANGE") {
        InvariantKind::Range
    } else {
        return Err(error_at(&tok, "expected SET or RANGE after INVARIANT"));
    };
    parser.expect_token(&Token::LParen)?;
    let exprs = parser.parse_comma_separated(|p| p.parse_expr())?;
    parser.expect_token(&Token::RParen)?;
    let mut per = Vec::new();
    if parse_word(parser, "PER") {
        parser.expect_token(&Token::LParen)?;
        per = parser.parse_comma_separated(|p| p.parse_expr())?;
        parser.expect_token(&Token::RParen)?;
    }
    expect_word(parser, "TRAINING")?;
    let tok = parser.peek_token();
    let training = match &tok.token {
        _ if parse_word(parser, "UNTIL") => Training::Between {
            from: None,
            until: parse_timestamp_literal(parser)?,
        },
        _ if parse_word(parser, "BETWEEN") => {
            let from = parse_timestamp_literal(parser)?;
            parser.expect_keyword(Keyword::AND)?;
            let until_tok = parser.peek_token();
            let until = parse_timestamp_literal(parser)?;
            if until <= from {
                return Err(error_at(
                    &until_tok,
                    "TRAINING BETWEEN needs an end after its start",
                ));
            }
            Training::Between {
                from: Some(from),
                until,
            }
        }
        Token::Number(n, _) => {
            parser.next_token();
            let n: u64 = n
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| error_at(&tok, "TRAINING takes a positive number of windows"))?;
            if !(parse_word(parser, "WINDOWS") || parse_word(parser, "WINDOW")) {
                return Err(error_at(&parser.peek_token(), "expected WINDOWS"));
            }
            Training::Windows(n)
        }
        _ => {
            let expr = parser.parse_expr()?;
            Training::Interval(interval_duration(&expr).map_err(|e| error_at(&tok, e.to_string()))?)
        }
    };
    let mut min_support = 1;
    if parse_word(parser, "MIN") {
        expect_word(parser, "SUPPORT")?;
        let tok = parser.next_token();
        min_support = match &tok.token {
            Token::Number(n, _) => n.parse().ok().filter(|&n| n > 0),
            _ => None,
        }
        .ok_or_else(|| error_at(&tok, "MIN SUPPORT takes a positive number of rows"))?;
    }
    let online = if parse_word(parser, "ONLINE") {
        true
    } else {
        parse_word(parser, "OFFLINE");
        false
    };
    Ok(Some(InvariantClause {
        kind,
        exprs,
        per,
        training,
        min_support,
        online,
    }))
}

/// `[TIMESTAMP] 'YYYY-MM-DD[ HH:MM[:SS[.f]]]'` as nanoseconds since the epoch (no zone: the
/// stream's TIMESTAMP columns have none).
pub(super) fn parse_timestamp_literal(parser: &mut Parser) -> Result<i64> {
    parse_word(parser, "TIMESTAMP");
    let tok = parser.next_token();
    let Token::SingleQuotedString(text) = &tok.token else {
        return Err(error_at(
            &tok,
            "expected a timestamp such as '2024-01-01 00:00:00'",
        ));
    };
    let text = text.trim();
    let time = [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok())
    .or_else(|| {
        chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })
    .ok_or_else(|| error_at(&tok, format!("invalid timestamp '{text}'")))?;
    time.and_utc()
        .timestamp_nanos_opt()
        .ok_or_else(|| error_at(&tok, format!("timestamp '{text}' is out of range")))
}

/// `OUTLIER method(args) ON (cols) [PARTITION BY (exprs)] [HAVING expr]`, if present.
fn parse_outlier(parser: &mut Parser) -> Result<Option<OutlierClause>> {
    if !parse_word(parser, "OUTLIER") {
        return Ok(None);
    }
    let method_tok = parser.peek_token();
    let method = parser.parse_identifier()?.value.to_ascii_uppercase();
    parser.expect_token(&Token::LParen)?;
    let args = parse_outlier_args(parser)?;
    let method = outlier_method(&method, &method_tok, &args)?;
    parser.expect_keyword_is(Keyword::ON)?;
    parser.expect_token(&Token::LParen)?;
    let on = parser.parse_comma_separated(|p| p.parse_identifier())?;
    parser.expect_token(&Token::RParen)?;
    let mut partition_by = Vec::new();
    if parser.parse_keywords(&[Keyword::PARTITION, Keyword::BY]) {
        let paren = parser.consume_token(&Token::LParen);
        partition_by = parser.parse_comma_separated(|p| p.parse_expr())?;
        if paren {
            parser.expect_token(&Token::RParen)?;
        }
    }
    let having = if parser.parse_keyword(Keyword::HAVING) {
        Some(parser.parse_expr()?)
    } else {
        None
    };
    Ok(Some(OutlierClause {
        method,
        on,
        partition_by,
        having,
    }))
}

/// An OUTLIER method's arguments, `(name => number, ...)` or by position, after its `(`.
fn parse_outlier_args(parser: &mut Parser) -> Result<Vec<(Option<String>, f64, TokenWithSpan)>> {
    let mut args: Vec<(Option<String>, f64, TokenWithSpan)> = Vec::new();
    if !parser.consume_token(&Token::RParen) {
        loop {
            let mut name = None;
            if matches!(parser.peek_nth_token(1).token, Token::RArrow) {
                name = Some(parser.parse_identifier()?.value.to_ascii_lowercase());
                parser.next_token();
            }
            let tok = parser.peek_token();
            let value = match parser.parse_expr()? {
                Expr::Value(v) => match v.value {
                    sq::Value::Number(n, _) => n.parse::<f64>().ok(),
                    _ => None,
                },
                Expr::UnaryOp {
                    op: sq::UnaryOperator::Minus,
                    expr,
                } => match *expr {
                    Expr::Value(v) => match v.value {
                        sq::Value::Number(n, _) => n.parse::<f64>().ok().map(|x| -x),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            }
            .ok_or_else(|| error_at(&tok, "OUTLIER arguments must be numbers"))?;
            args.push((name, value, tok));
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
    }
    Ok(args)
}

/// The method named `method` (at `method_tok`) with its arguments, defaults filled in.
fn outlier_method(
    method: &str,
    method_tok: &TokenWithSpan,
    args: &[(Option<String>, f64, TokenWithSpan)],
) -> Result<OutlierMethod> {
    let names: &[&str] = match method {
        "DBSCAN" => &["eps", "min_points"],
        "KMEANS" => &["k", "threshold"],
        "ZSCORE" | "MAD" => &["threshold"],
        "IQR" => &["factor"],
        _ => {
            return Err(error_at(
                method_tok,
                format!("unknown OUTLIER method {method}; use DBSCAN, KMEANS, ZSCORE, MAD or IQR"),
            ))
        }
    };
    let defaults: &[Option<f64>] = match method {
        "ZSCORE" => &[Some(3.0)],
        "MAD" => &[Some(3.5)],
        "IQR" => &[Some(1.5)],
        _ => &[None, None],
    };
    let mut values: Vec<Option<f64>> = defaults.to_vec();
    for (i, (name, value, tok)) in args.iter().enumerate() {
        let slot = match name {
            Some(n) => names.iter().position(|x| x == n).ok_or_else(|| {
                error_at(
                    tok,
                    format!(
                        "{method} has no argument {n}; it takes {}",
                        names.join(", ")
                    ),
                )
            })?,
            None => i,
        };
        if slot >= names.len() {
            return Err(error_at(
                tok,
                format!("{method} takes {}", names.join(", ")),
            ));
        }
        values[slot] = Some(*value);
    }
    let get = |i: usize| -> Result<f64> {
        values[i].ok_or_else(|| {
            error_at(
                method_tok,
                format!("{method} needs {}", names.join(" and ")),
            )
        })
    };
    let count = |i: usize| -> Result<usize> {
        let v = get(i)?;
        if v < 1.0 || v.fract() != 0.0 {
            return Err(error_at(
                method_tok,
                format!("{} must be a positive whole number", names[i]),
            ));
        }
        Ok(v as usize)
    };
    Ok(match method {
        "DBSCAN" => OutlierMethod::Dbscan {
            eps: get(0)?,
            min_points: count(1)?,
        },
        "KMEANS" => OutlierMethod::Kmeans {
            k: count(0)?,
            threshold: get(1)?,
        },
        "ZSCORE" => OutlierMethod::Zscore { threshold: get(0)? },
        "MAD" => OutlierMethod::Mad { threshold: get(0)? },
        _ => OutlierMethod::Iqr { factor: get(0)? },
    })
}
