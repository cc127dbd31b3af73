//! `MATCH_RECOGNIZE` words sqlparser does not read: `RUNNING`/`FINAL f(...)` and `SKIP TO v`
//! are rewritten in the token stream into forms it does (the pattern itself is read from the
//! text before, by `pattern.rs`);
//! `WITHIN interval [EMIT TIMEOUT]` and `SUBSET` are lifted out of it, to be put back into the
//! statement's clauses once it is parsed.

use datafusion::sql::sqlparser::ast::Expr;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

use super::super::ast::SubsetDef;
use super::super::dialect::SaqlDialect;
use super::super::interval::interval_duration;
use super::{error_at, is_word};
use crate::error::{Error, Result};

pub(super) struct LiftedWithin {
    /// Index, among the remaining tokens, of the token that followed them (`DEFINE`).
    pub at: usize,
    /// The first lifted keyword, for error positions.
    pub token: TokenWithSpan,
    pub interval: Option<Expr>,
    pub subsets: Vec<SubsetDef>,
    /// `EMIT TIMEOUT` after the interval.
    pub emit_timeout: bool,
}

/// Writes what sqlparser does not read inside `MATCH_RECOGNIZE (...)` in a form it does:
/// `RUNNING f(...)` and `FINAL f(...)` (f a navigation or aggregate function) become
/// `RUNNING(f(...))` and `FINAL(f(...))`, and `AFTER MATCH SKIP TO v` becomes `SKIP TO LAST
/// v` (SQL:2016's shorthand).
pub(super) fn rewrite_pattern_words(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !tokens.iter().any(|t| is_word(t, "MATCH_RECOGNIZE")) {
        return tokens;
    }
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    // Where each pending `)` goes: after the token at this index closes the call.
    let mut closes: Vec<usize> = Vec::new();
    let mut inside = 0i32; // parenthesis depth inside MATCH_RECOGNIZE, 0 outside
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        out.push(t.clone());
        if inside == 0 {
            if is_word(t, "MATCH_RECOGNIZE") {
                inside = -1; // waiting for its `(`
            }
            i += 1;
            continue;
        }
        match &t.token {
            Token::LParen => inside = if inside < 0 { 1 } else { inside + 1 },
            Token::RParen => {
                inside -= 1;
                while closes.last() == Some(&i) {
                    closes.pop();
                    out.push(TokenWithSpan::new(Token::RParen, t.span));
                }
            }
            _ => {}
        }
        let next = significant(&tokens, i + 1);
        if let Some(close) = semantics_call_close(&tokens, i) {
            // One spelling, so that the printed form parses to the same tree.
            let upper = if is_word(t, "FINAL") {
                "FINAL"
            } else {
                "RUNNING"
            };
            if let Some(last) = out.last_mut() {
                last.token = Token::make_word(upper, None);
            }
            out.push(TokenWithSpan::new(Token::LParen, t.span));
            closes.push(close);
            closes.sort_unstable_by(|a, b| b.cmp(a));
        }
        if is_word(t, "TO") && after_skip(&out[..out.len() - 1]) && names_variable(&tokens, next) {
            out.push(TokenWithSpan::new(
                Token::Whitespace(Whitespace::Space),
                t.span,
            ));
            out.push(TokenWithSpan::new(Token::make_keyword("LAST"), t.span));
        }
        i += 1;
    }
    out
}

/// Removes `WITHIN <interval>` and `SUBSET u = (a, b), ...` (in either order) between
/// `PATTERN (...)` and `DEFINE` of every `MATCH_RECOGNIZE`, which sqlparser does not parse,
/// and returns them.
pub(super) fn lift_within(
    dialect: &SaqlDialect,
    mut tokens: Vec<TokenWithSpan>,
) -> Result<(Vec<TokenWithSpan>, Vec<LiftedWithin>)> {
    let word = |t: &TokenWithSpan, w: &str| is_word(t, w);
    let mut lifted = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if !word(&tokens[i], "MATCH_RECOGNIZE") {
            i += 1;
            continue;
        }
        let pattern_end = pattern_end(&tokens, i);
        let Some(end) = pattern_end else {
            i += 1;
            continue;
        };
        let Some(first) = significant(&tokens, end + 1) else {
            i = end;
            continue;
        };
        let mut k = first;
        let mut interval = None;
        let mut subsets = Vec::new();
        let mut emit_timeout = false;
        loop {
            let is_within = word(&tokens[k], "WITHIN") && interval.is_none();
            let is_subset = word(&tokens[k], "SUBSET") && subsets.is_empty();
            if !is_within && !is_subset {
                break;
            }
            // The clause runs to the next DEFINE, WITHIN or SUBSET outside parentheses.
            let mut depth = 0i32;
            let stop = (k + 1..tokens.len()).find(|&m| {
                match tokens[m].token {
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    _ => {}
                }
                depth <= 0
                    && ["DEFINE", "WITHIN", "SUBSET"]
                        .iter()
                        .any(|w| word(&tokens[m], w))
                    || depth < 0
            });
            let Some(stop) = stop.filter(|&m| tokens[m].token != Token::RParen) else {
                return Err(error_at(
                    &tokens[k],
                    format!("expected DEFINE after {}", tokens[k].token),
                ));
            };
            let mut sub: Vec<TokenWithSpan> = tokens[k + 1..stop].to_vec();
            sub.push(TokenWithSpan::wrap(Token::EOF));
            let mut p = Parser::new(dialect).with_tokens_with_locations(sub);
            if is_within {
                let (e, timeout) = parse_within(&mut p, &tokens[k])?;
                interval = Some(e);
                emit_timeout = timeout;
            } else {
                subsets = p.parse_comma_separated(|p| {
                    let name = p.parse_identifier()?;
                    p.expect_token(&Token::Eq)?;
                    p.expect_token(&Token::LParen)?;
                    let vars = p.parse_comma_separated(|p| p.parse_identifier())?;
                    p.expect_token(&Token::RParen)?;
                    Ok(SubsetDef { name, vars })
                })?;
            }
            if p.peek_token().token != Token::EOF {
                let t = p.peek_token();
                return Err(error_at(
                    &t,
                    format!("syntax error at or near \"{}\"", t.token),
                ));
            }
            k = stop;
        }
        if k == first {
            i = end;
            continue;
        }
        if !word(&tokens[k], "DEFINE") {
            return Err(error_at(
                &tokens[k],
                format!("expected DEFINE, found \"{}\"", tokens[k].token),
            ));
        }
        let token = tokens[first].clone();
        tokens.drain(first..k);
        lifted.push(LiftedWithin {
            at: first,
            token,
            interval,
            subsets,
            emit_timeout,
        });
        i = first;
    }
    Ok((tokens, lifted))
}

/// The index of the `)` that ends the `PATTERN (...)` of the `MATCH_RECOGNIZE` at `i`.
fn pattern_end(tokens: &[TokenWithSpan], i: usize) -> Option<usize> {
    let word = |t: &TokenWithSpan, w: &str| is_word(t, w);
    let mut depth = 0i32;
    let mut j = i + 1;
    let mut pattern_end = None;
    while j < tokens.len() {
        match &tokens[j].token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth <= 0 {
                    break;
                }
            }
            _ if depth == 1 && word(&tokens[j], "PATTERN") => {
                let mut k = j + 1;
                let mut inner = 0i32;
                while k < tokens.len() {
                    match tokens[k].token {
                        Token::LParen => inner += 1,
                        Token::RParen => {
                            inner -= 1;
                            if inner == 0 {
                                pattern_end = Some(k);
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                break;
            }
            _ => {}
        }
        j += 1;
    }
    pattern_end
}

/// `WITHIN`'s interval and whether `EMIT TIMEOUT` follows it; `within` is the keyword, for
/// error positions.
fn parse_within(p: &mut Parser, within: &TokenWithSpan) -> Result<(Expr, bool)> {
    let e = p.parse_expr()?;
    interval_duration(&e).map_err(|e| match e {
        Error::Parse { .. } => e,
        other => error_at(within, other.to_string()),
    })?;
    if !is_word(&p.peek_token(), "EMIT") {
        return Ok((e, false));
    }
    p.next_token();
    let t = p.next_token();
    if !is_word(&t, "TIMEOUT") {
        return Err(error_at(
            &t,
            format!("expected TIMEOUT after EMIT, found \"{}\"", t.token),
        ));
    }
    Ok((e, true))
}

/// The navigation and aggregate functions `RUNNING` and `FINAL` may precede.
const WRAPPED: [&str; 11] = [
    "FIRST",
    "LAST",
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "CLASSIFIER",
    "MATCH_NUMBER",
    "PREV",
    "NEXT",
];

/// The first token from `k` on that is not whitespace.
fn significant(tokens: &[TokenWithSpan], k: usize) -> Option<usize> {
    (k..tokens.len()).find(|&k| !matches!(tokens[k].token, Token::Whitespace(_)))
}

/// For `RUNNING` or `FINAL` at `i` before a call `f(...)` of a [`WRAPPED`] function: the
/// index of the `)` that closes the call.
fn semantics_call_close(tokens: &[TokenWithSpan], i: usize) -> Option<usize> {
    let t = &tokens[i];
    if !(is_word(t, "RUNNING") || is_word(t, "FINAL")) {
        return None;
    }
    let f =
        significant(tokens, i + 1).filter(|&n| WRAPPED.iter().any(|w| is_word(&tokens[n], w)))?;
    let open = significant(tokens, f + 1).filter(|&o| tokens[o].token == Token::LParen)?;
    let mut depth = 0i32;
    (open..tokens.len()).find(|&k| {
        match tokens[k].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        depth == 0
    })
}

/// Whether the last significant token of `out` is `SKIP`.
fn after_skip(out: &[TokenWithSpan]) -> bool {
    out.iter()
        .rev()
        .find(|p| !matches!(p.token, Token::Whitespace(_)))
        .is_some_and(|p| is_word(p, "SKIP"))
}

/// Whether the token at `next` is a word other than `NEXT`, `FIRST` or `LAST`: `SKIP TO v`.
fn names_variable(tokens: &[TokenWithSpan], next: Option<usize>) -> bool {
    next.is_some_and(|n| {
        matches!(tokens[n].token, Token::Word(_))
            && !["NEXT", "FIRST", "LAST"]
                .iter()
                .any(|w| is_word(&tokens[n], w))
    })
}
