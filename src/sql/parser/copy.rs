//! `COPY`: `COPY stream FROM STDIN` with PostgreSQL's options (and the legacy forms),
//! `COPY (query) TO STDOUT` and `COPY stream TO STDOUT`, and the options of
//! `COPY (SUBSCRIBE ...) TO STDOUT`.

use crate::error::sqlstate;
use datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::super::ast::{CopyFrom, CopyOut, Statement};
use super::super::CopyTo;
use super::{error_at, is_word, parse_word};
use crate::error::{Error, Result};

/// `[=] true | false | on | off | 1 | 0` after an option name; the option alone is true.
pub(super) fn parse_option_bool(parser: &mut Parser) -> Result<bool> {
    let _ = parser.consume_token(&Token::Eq);
    let tok = parser.peek_token();
    let value = match &tok.token {
        Token::Comma | Token::RParen => return Ok(true),
        Token::Number(n, _) if n == "1" || n == "0" => n == "1",
        Token::Word(w)
            if ["true", "on"]
                .iter()
                .any(|v| w.value.eq_ignore_ascii_case(v)) =>
        {
            true
        }
        Token::Word(w)
            if ["false", "off"]
                .iter()
                .any(|v| w.value.eq_ignore_ascii_case(v)) =>
        {
            false
        }
        Token::SingleQuotedString(s) if ["true", "on"].contains(&s.to_lowercase().as_str()) => true,
        Token::SingleQuotedString(s) if ["false", "off"].contains(&s.to_lowercase().as_str()) => {
            false
        }
        _ => {
            return Err(error_at(
                &tok,
                format!("expected true or false, found \"{}\"", tok.token),
            ))
        }
    };
    parser.next_token();
    Ok(value)
}

/// The options of `COPY (SUBSCRIBE q) TO STDOUT`: `WITH (FORMAT text | csv, HEADER [bool])`
/// (or PostgreSQL's older `CSV [HEADER]`).
pub(super) fn parse_copy_out_options(parser: &mut Parser) -> Result<CopyOut> {
    let (mut csv, mut header) = (false, false);
    let with = parser.parse_keyword(Keyword::WITH);
    if parser.consume_token(&Token::LParen) {
        loop {
            let key = parser.next_token();
            if is_word(&key, "FORMAT") {
                let fmt = parser.next_token();
                if is_word(&fmt, "CSV") {
                    csv = true;
                } else if !is_word(&fmt, "TEXT") {
                    return Err(error_at(
                        &fmt,
                        "COPY (SUBSCRIBE ...) supports FORMAT text and csv",
                    ));
                }
            } else if is_word(&key, "HEADER") {
                header = parse_option_bool(parser)?;
            } else {
                return Err(error_at(
                    &key,
                    "COPY (SUBSCRIBE ...) TO STDOUT takes the options FORMAT and HEADER",
                ));
            }
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
    } else if with || is_word(&parser.peek_token(), "CSV") {
        let tok = parser.next_token();
        if !is_word(&tok, "CSV") {
            return Err(error_at(&tok, "expected ( or CSV after WITH"));
        }
        csv = true;
        header = parse_word(parser, "HEADER");
    }
    if header && !csv {
        return Err(Error::invalid_input(
            sqlstate::FEATURE_NOT_SUPPORTED,
            "COPY HEADER is available only in CSV mode".to_string(),
        ));
    }
    Ok(if csv {
        CopyOut::Csv { header }
    } else {
        CopyOut::Text
    })
}

/// `COPY (query) TO STDOUT` or `COPY name [(cols)] TO STDOUT` with FORMAT text or csv and
/// HEADER; a file target (the server's file system) is refused with 0A000.
pub(super) fn copy_to(
    source: CopySource,
    target: CopyTarget,
    options: Vec<CopyOption>,
    legacy_options: Vec<CopyLegacyOption>,
    at: &TokenWithSpan,
) -> Result<Statement> {
    if !matches!(target, CopyTarget::Stdout) {
        return Err(Error::NotSupported(
            "COPY TO a server file or program is not supported; use COPY ... TO STDOUT \
             (psql's \\copy ... TO 'file' writes the file on the client)"
                .to_string(),
        ));
    }
    let query = match source {
        CopySource::Query(q) => q,
        CopySource::Table {
            table_name,
            columns,
        } => {
            let list = if columns.is_empty() {
                "*".to_string()
            } else {
                columns
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let sql = format!("SELECT {list} FROM {table_name}");
            Parser::new(&datafusion::sql::sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql(&sql)
                .and_then(|mut p| p.parse_query())
                .map_err(|e| error_at(at, format!("COPY {table_name} TO STDOUT: {e}")))?
        }
    };
    let (mut csv, mut header) = (false, false);
    for opt in options {
        match opt {
            CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                "csv" => csv = true,
                "text" => csv = false,
                other => {
                    return Err(Error::NotSupported(format!(
                        "COPY TO format \"{other}\" is not supported; use csv or text"
                    )))
                }
            },
            CopyOption::Header(h) => header = h,
            other => {
                return Err(Error::NotSupported(format!(
                    "COPY TO option {other} is not supported; use FORMAT and HEADER"
                )))
            }
        }
    }
    for opt in legacy_options {
        match opt {
            CopyLegacyOption::Csv(csv_options) => {
                csv = true;
                for o in csv_options {
                    match o {
                        CopyLegacyCsvOption::Header => header = true,
                        other => {
                            return Err(Error::NotSupported(format!(
                                "COPY TO option {other} is not supported; use FORMAT and HEADER"
                            )))
                        }
                    }
                }
            }
            CopyLegacyOption::Header => header = true,
            other => {
                return Err(Error::NotSupported(format!(
                    "COPY TO option {other} is not supported; use FORMAT and HEADER"
                )))
            }
        }
    }
    if header && !csv {
        return Err(Error::invalid_input(
            sqlstate::FEATURE_NOT_SUPPORTED,
            "COPY HEADER is available only in CSV mode".to_string(),
        ));
    }
    let format = if csv {
        CopyOut::Csv { header }
    } else {
        CopyOut::Text
    };
    Ok(Statement::CopyTo(CopyTo { query, format }))
}

pub(super) fn copy_from(
    source: CopySource,
    to: bool,
    target: CopyTarget,
    options: Vec<CopyOption>,
    legacy_options: Vec<CopyLegacyOption>,
    values: Vec<Option<String>>,
    at: &TokenWithSpan,
) -> Result<Statement> {
    let (stream, columns) = match source {
        CopySource::Table {
            table_name,
            columns,
        } => (table_name, columns),
        CopySource::Query(_) => {
            return Err(error_at(
                at,
                "COPY (query) FROM is not valid; a query is copied TO STDOUT",
            ))
        }
    };
    if to || !matches!(target, CopyTarget::Stdin) {
        return Err(Error::NotSupported(
            "COPY FROM a server file or program is not supported; use COPY stream FROM STDIN \
             (psql's \\copy stream FROM 'file' reads the file on the client)"
                .to_string(),
        ));
    }
    if !values.is_empty() {
        return Err(Error::NotSupported(
            "inline COPY data is not supported".to_string(),
        ));
    }
    let mut copy = CopyFrom {
        stream,
        columns,
        csv: false,
        binary: false,
        header: false,
        delimiter: None,
        null: None,
        quote: None,
    };
    for opt in options {
        match opt {
            CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                "csv" => (copy.csv, copy.binary) = (true, false),
                "text" => (copy.csv, copy.binary) = (false, false),
                "binary" => (copy.csv, copy.binary) = (false, true),
                other => {
                    return Err(Error::NotSupported(format!(
                        "COPY format \"{other}\" is not supported; use csv, text or binary"
                    )))
                }
            },
            CopyOption::Header(h) => copy.header = h,
            CopyOption::Delimiter(c) => copy.delimiter = Some(c),
            CopyOption::Null(n) => copy.null = Some(n),
            CopyOption::Quote(q) => copy.quote = Some(q),
            other => {
                return Err(Error::NotSupported(format!(
                    "COPY option {other} is not supported"
                )))
            }
        }
    }
    for opt in legacy_options {
        match opt {
            CopyLegacyOption::Csv(csv_options) => {
                copy.csv = true;
                for o in csv_options {
                    match o {
                        CopyLegacyCsvOption::Header => copy.header = true,
                        CopyLegacyCsvOption::Quote(q) => copy.quote = Some(q),
                        other => {
                            return Err(Error::NotSupported(format!(
                                "COPY option {other} is not supported"
                            )))
                        }
                    }
                }
            }
            CopyLegacyOption::Delimiter(c) => copy.delimiter = Some(c),
            CopyLegacyOption::Null(n) => copy.null = Some(n),
            CopyLegacyOption::Header => copy.header = true,
            other => {
                return Err(Error::NotSupported(format!(
                    "COPY option {other} is not supported"
                )))
            }
        }
    }
    Ok(Statement::CopyFrom(copy))
}
