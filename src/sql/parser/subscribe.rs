//! Reading results: `SUBSCRIBE`, and the cursors over it (`DECLARE ... CURSOR FOR
//! SUBSCRIBE`, `FETCH`).

use datafusion::sql::sqlparser::ast::{self as sq, Ident};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::super::ast::{Statement, Subscribe};
use super::copy::parse_option_bool;
use super::{error_at, expect_word, is_word, parse_word};
use crate::error::Result;

pub(super) fn parse_declare(parser: &mut Parser) -> Result<Statement> {
    let name = parser.parse_identifier()?;
    // PostgreSQL's options; a cursor here is always forward-only and read once.
    loop {
        if parse_word(parser, "BINARY")
            || parse_word(parser, "INSENSITIVE")
            || parse_word(parser, "ASENSITIVE")
            || parse_word(parser, "SCROLL")
        {
            continue;
        }
        if is_word(&parser.peek_token(), "NO") && is_word(&parser.peek_nth_token(1), "SCROLL") {
            parser.next_token();
            parser.next_token();
            continue;
        }
        break;
    }
    expect_word(parser, "CURSOR")?;
    if parse_word(parser, "WITH") || parse_word(parser, "WITHOUT") {
        expect_word(parser, "HOLD")?;
    }
    parser.expect_keyword_is(Keyword::FOR)?;
    let target = if parse_word(parser, "SUBSCRIBE") {
        Statement::Subscribe(parse_subscribe(parser)?)
    } else {
        Statement::Sql(Box::new(sq::Statement::Query(parser.parse_query()?)))
    };
    Ok(Statement::DeclareCursor {
        name,
        target: Box::new(target),
    })
}

/// What follows `SUBSCRIBE`: `[TO] name` or `(SELECT ... FROM name ...)`, then `[FROM n]` and
/// `[WITH SEQ | WITH (SNAPSHOT [= bool], SEQ [= bool], PROGRESS [= bool])]`, in either order.
pub(super) fn parse_subscribe(parser: &mut Parser) -> Result<Subscribe> {
    parse_word(parser, "TO");
    let mut sub = if parser.peek_token().token == Token::LParen {
        let open = parser.next_token();
        let view = parser.parse_query()?;
        parser.expect_token(&Token::RParen)?;
        let query = subscribed_query(&view).ok_or_else(|| {
            error_at(
                &open,
                "SUBSCRIBE (SELECT ...) reads one continuous query: SELECT ... FROM q [WHERE ...]",
            )
        })?;
        Subscribe {
            view: Some(view),
            ..Subscribe::to(query)
        }
    } else {
        Subscribe::to(parser.parse_identifier()?)
    };
    loop {
        if sub.from.is_none() && parser.parse_keyword(Keyword::FROM) {
            let tok = parser.next_token();
            match &tok.token {
                Token::Number(n, _) if n.parse::<u64>().is_ok() => sub.from = n.parse().ok(),
                _ => {
                    return Err(error_at(
                        &tok,
                        format!("expected a result sequence number, found \"{}\"", tok.token),
                    ))
                }
            }
        } else if parser.parse_keyword(Keyword::WITH) {
            if !parser.consume_token(&Token::LParen) {
                expect_word(parser, "SEQ")?;
                sub.seq = true;
                continue;
            }
            loop {
                let key = parser.next_token();
                let value = parse_option_bool(parser)?;
                if is_word(&key, "SNAPSHOT") {
                    sub.snapshot = value;
                } else if is_word(&key, "SEQ") {
                    sub.seq = value;
                } else if is_word(&key, "PROGRESS") {
                    sub.progress = value;
                } else {
                    return Err(error_at(
                        &key,
                        format!(
                            "unknown SUBSCRIBE option \"{}\"; the options are SNAPSHOT, SEQ and \
                             PROGRESS",
                            key.token
                        ),
                    ));
                }
                if !parser.consume_token(&Token::Comma) {
                    break;
                }
            }
            parser.expect_token(&Token::RParen)?;
        } else {
            return Ok(sub);
        }
    }
}

/// The one continuous query a `SUBSCRIBE (SELECT ...)` reads: a plain name alone in FROM.
fn subscribed_query(view: &sq::Query) -> Option<Ident> {
    let sq::SetExpr::Select(select) = view.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    if !from.joins.is_empty() {
        return None;
    }
    match &from.relation {
        sq::TableFactor::Table {
            name, args: None, ..
        } => match name.0.as_slice() {
            [part] => part.as_ident().cloned(),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn parse_fetch(parser: &mut Parser) -> Result<Statement> {
    let _ = parse_word(parser, "FORWARD") || parse_word(parser, "NEXT");
    let tok = parser.peek_token();
    let count = match &tok.token {
        Token::Number(n, _) => {
            parser.next_token();
            Some(
                n.parse::<u64>()
                    .map_err(|_| error_at(&tok, format!("invalid FETCH count {n}")))?,
            )
        }
        _ if parse_word(parser, "ALL") => None,
        _ => Some(1),
    };
    let _ = parse_word(parser, "FROM") || parse_word(parser, "IN");
    let name = parser.parse_identifier()?;
    let mut timeout = None;
    if parser.parse_keyword(Keyword::WITH) {
        parser.expect_token(&Token::LParen)?;
        let key = parser.peek_token();
        if !parse_word(parser, "TIMEOUT") {
            return Err(error_at(&key, "FETCH supports only the option timeout"));
        }
        parser.expect_token(&Token::Eq)?;
        let value = parser.next_token();
        let text = match &value.token {
            Token::SingleQuotedString(s) | Token::Number(s, _) => s.clone(),
            other => {
                return Err(error_at(
                    &value,
                    format!("expected a duration, found \"{other}\""),
                ))
            }
        };
        timeout = Some(super::super::interval::parse_duration(&text)?);
        parser.expect_token(&Token::RParen)?;
    }
    Ok(Statement::Fetch {
        name,
        count,
        timeout,
    })
}
