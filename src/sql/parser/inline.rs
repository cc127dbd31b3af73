//! `FROM (SELECT ... UNION ALL SELECT ...) [AS] [alias] MATCH_RECOGNIZE (...)`: sqlparser reads
//! `MATCH_RECOGNIZE` only after a table's name, so the front end puts a placeholder name in
//! the subquery's place before parsing, then parses the subquery on its own and puts it back
//! into the tree, as the table the `MATCH_RECOGNIZE` reads. The tree prints back as written.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self as sq, TableFactor, VisitMut, VisitorMut};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Word};

use super::super::ast::{ExplainTarget, Statement};
use super::super::dialect::SaqlDialect;
use super::{is_word, parser_error};
use crate::error::Result;
use crate::limits::PARSER_RECURSION_LIMIT;

/// The placeholder names start so (a quoted name no user writes).
const PLACEHOLDER: &str = "__saql_subquery_";

/// A subquery taken out of the token stream, and the name left in its place.
pub(super) struct LiftedSubquery {
    name: String,
    tokens: Vec<TokenWithSpan>,
}

/// Takes every parenthesized subquery read by a `MATCH_RECOGNIZE` out of `tokens`, leaving a
/// placeholder name.
pub(super) fn lift_subqueries(
    mut tokens: Vec<TokenWithSpan>,
) -> (Vec<TokenWithSpan>, Vec<LiftedSubquery>) {
    let mut lifted = Vec::new();
    if !tokens.iter().any(|t| is_word(t, "MATCH_RECOGNIZE")) {
        return (tokens, lifted);
    }
    // Last first, so that the earlier positions stay where they are.
    let mut at = tokens.len();
    while at > 0 {
        at -= 1;
        if !is_word(&tokens[at], "MATCH_RECOGNIZE") {
            continue;
        }
        let Some((open, close)) = subquery_before(&tokens, at) else {
            continue;
        };
        let name = format!("{PLACEHOLDER}{}", lifted.len());
        let placeholder = TokenWithSpan::new(
            Token::Word(Word {
                value: name.clone(),
                quote_style: Some('"'),
                keyword: Keyword::NoKeyword,
            }),
            tokens[open].span,
        );
        let removed: Vec<TokenWithSpan> = tokens.splice(open..=close, [placeholder]).collect();
        let inner = removed[1..removed.len() - 1].to_vec();
        lifted.push(LiftedSubquery {
            name,
            tokens: inner,
        });
        at = open;
    }
    (tokens, lifted)
}

/// The parentheses `(open, close)` of a subquery that ends just before `tokens[at]` (a
/// `MATCH_RECOGNIZE`), maybe followed by `[AS] alias`, and that follows `FROM`, `JOIN` or a
/// comma (not a function's name).
fn subquery_before(tokens: &[TokenWithSpan], at: usize) -> Option<(usize, usize)> {
    let significant = |mut i: usize| -> Option<usize> {
        loop {
            i = i.checked_sub(1)?;
            if !matches!(tokens[i].token, Token::Whitespace(_)) {
                return Some(i);
            }
        }
    };
    let mut close = significant(at)?;
    if matches!(tokens[close].token, Token::Word(_)) {
        // The subquery's alias, maybe after AS.
        close = significant(close)?;
        if is_word(&tokens[close], "AS") {
            close = significant(close)?;
        }
    }
    if tokens[close].token != Token::RParen {
        return None;
    }
    let mut depth = 0usize;
    let mut open = close;
    loop {
        match tokens[open].token {
            Token::RParen => depth += 1,
            Token::LParen => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        open = open.checked_sub(1)?;
    }
    let before = significant(open)?;
    let follows_from = ["FROM", "JOIN"].iter().any(|w| is_word(&tokens[before], w))
        || tokens[before].token == Token::Comma;
    let first = (open + 1..close).find(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))?;
    let starts_query = ["SELECT", "WITH"]
        .iter()
        .any(|w| is_word(&tokens[first], w))
        || tokens[first].token == Token::LParen;
    (follows_from && starts_query).then_some((open, close))
}

/// Parses the lifted subqueries of `stmt` and puts each back in its placeholder's place.
pub(super) fn put_back(stmt: &mut Statement, lifted: &mut Vec<LiftedSubquery>) -> Result<()> {
    if lifted.is_empty() {
        return Ok(());
    }
    let mut restore = Restore {
        lifted,
        error: None,
    };
    match stmt {
        Statement::CreateQuery(cq) | Statement::AlterQuery(cq) => {
            let _ = cq.query.visit(&mut restore);
        }
        Statement::Explain {
            target: ExplainTarget::Create(cq),
            ..
        } => {
            let _ = cq.query.visit(&mut restore);
        }
        Statement::Explain {
            target: ExplainTarget::Query(q, _),
            ..
        } => {
            let _ = q.visit(&mut restore);
        }
        Statement::Sql(s) => {
            let _ = s.visit(&mut restore);
        }
        _ => {}
    }
    match restore.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Restore<'a> {
    lifted: &'a mut Vec<LiftedSubquery>,
    error: Option<crate::error::Error>,
}

impl VisitorMut for Restore<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::MatchRecognize { table, .. } = factor else {
            return ControlFlow::Continue(());
        };
        let TableFactor::Table { name, alias, .. } = table.as_mut() else {
            return ControlFlow::Continue(());
        };
        let [sq::ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
            return ControlFlow::Continue(());
        };
        let Some(at) = self.lifted.iter().position(|l| l.name == id.value) else {
            return ControlFlow::Continue(());
        };
        let l = self.lifted.remove(at);
        let dialect = SaqlDialect::default();
        let parsed = Parser::new(&dialect)
            .with_recursion_limit(PARSER_RECURSION_LIMIT)
            .with_tokens_with_locations(l.tokens)
            .parse_query();
        match parsed {
            Ok(subquery) => {
                **table = TableFactor::Derived {
                    lateral: false,
                    subquery,
                    alias: alias.take(),
                    sample: None,
                };
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(parser_error(e));
                ControlFlow::Break(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::sql::{parse_one, Statement};

    #[test]
    fn a_subquery_read_by_match_recognize_parses_and_prints_back() {
        let sql = "CREATE CONTINUOUS QUERY q AS SELECT * FROM (SELECT ts, host FROM a UNION ALL \
                   SELECT ts, host FROM b) u MATCH_RECOGNIZE (PARTITION BY host ORDER BY ts \
                   MEASURES x.ts AS at PATTERN (x y) DEFINE x AS true) AS m";
        let stmt = parse_one(sql).unwrap();
        let Statement::CreateQuery(cq) = &stmt else {
            panic!("not a query")
        };
        let text = cq.to_string();
        assert!(text.contains("UNION ALL"), "{text}");
        assert!(!text.contains("__saql_subquery"), "{text}");
        assert_eq!(parse_one(&text).unwrap(), stmt, "{text}");
    }

    #[test]
    fn a_function_call_before_match_recognize_is_left_alone() {
        let err = parse_one(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM TUMBLE(a, ts, INTERVAL '1' MINUTE) \
             MATCH_RECOGNIZE (ORDER BY ts MEASURES x.ts AS at PATTERN (x) DEFINE x AS true)",
        );
        // Parsed as a window function followed by MATCH_RECOGNIZE (refused when planned).
        assert!(err.is_ok(), "{err:?}");
    }
}
