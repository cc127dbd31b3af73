//! The front-end parser: peeks the first keywords of each statement, parses saql's own
//! statements with sqlparser's token-level API, and hands everything else to sqlparser
//! whole. Keywords of ours are matched by text, case-insensitively.

use crate::error::sqlstate;
use datafusion::sql::sqlparser::ast::{
    self as sq, BinaryOperator, CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource,
    CopyTarget, Expr, Ident,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace};

use super::ast::{
    Clauses, ColumnDef, CopyFrom, CopyOut, CreateQuery, CreateSource, CreateStream, ExplainTarget,
    InvariantClause, InvariantKind, OutlierClause, OutlierMethod, SourceConnector, Statement,
    Subscribe, SubsetDef, SuppressClause, Training, WatermarkDef,
};
use super::complexity;
use super::dialect::SaqlDialect;
use super::interval::interval_duration;
use super::window_tvf;
use crate::error::{Error, Location, Result};
use crate::limits::PARSER_RECURSION_LIMIT;

/// Parses one or more statements separated by semicolons.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    complexity::check_size(sql)?;
    let dialect = SaqlDialect::default();
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| parser_error(ParserError::TokenizerError(e.to_string())))?;
    complexity::check_tokens(&tokens)?;
    let tokens = window_tvf::rewrite(tokens);
    let tokens = rewrite_pattern_words(tokens);
    let (tokens, mut withins) = lift_within(&dialect, tokens)?;
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens);
    let mut out = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        let mut stmt = parse_statement(&mut parser)?;
        complexity::check_depth(&stmt)?;
        let mine = withins.iter().take_while(|w| w.at < parser.index()).count();
        for w in withins.drain(..mine) {
            let clauses = match &mut stmt {
                Statement::CreateQuery(cq) => Some(&mut cq.clauses),
                Statement::Explain {
                    target: ExplainTarget::Create(cq),
                    ..
                } => Some(&mut cq.clauses),
                Statement::Explain {
                    target: ExplainTarget::Query(_, c),
                    ..
                } => Some(c),
                _ => None,
            };
            match clauses {
                Some(c) if c.within.is_none() && c.subsets.is_empty() => {
                    c.within = w.interval;
                    c.subsets = w.subsets;
                    c.emit_timeout = w.emit_timeout;
                }
                Some(_) => {
                    return Err(error_at(
                        &w.token,
                        "a continuous query takes one MATCH_RECOGNIZE with one WITHIN and \
                         SUBSET",
                    ))
                }
                None => {
                    return Err(error_at(
                        &w.token,
                        format!("{} is supported in continuous queries only", w.token.token),
                    ))
                }
            }
        }
        out.push(stmt);
        let next = parser.peek_token();
        match next.token {
            Token::SemiColon | Token::EOF => {}
            _ => {
                return Err(error_at(
                    &next,
                    format!("syntax error at or near \"{}\"", next.token),
                ))
            }
        }
    }
    Ok(out)
}

/// `WITHIN interval` and `SUBSET ...` lifted out of a `MATCH_RECOGNIZE`.
struct LiftedWithin {
    /// Index, among the remaining tokens, of the token that followed them (`DEFINE`).
    at: usize,
    /// The first lifted keyword, for error positions.
    token: TokenWithSpan,
    interval: Option<Expr>,
    subsets: Vec<SubsetDef>,
    /// `EMIT TIMEOUT` after the interval.
    emit_timeout: bool,
}

/// Writes what sqlparser does not read inside `MATCH_RECOGNIZE (...)` in a form it does:
/// `RUNNING f(...)` and `FINAL f(...)` (f a navigation or aggregate function) become
/// `RUNNING(f(...))` and `FINAL(f(...))`, `AFTER MATCH SKIP TO v` becomes `SKIP TO LAST
/// v` (SQL:2016's shorthand), an exclusion `{- v -}` is put in parentheses (sqlparser reads a
/// `{` after a variable as a quantifier), and `permute (` is spelt `PERMUTE (` (sqlparser
/// knows only the upper case).
fn rewrite_pattern_words(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
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
    let significant = |tokens: &[TokenWithSpan], k: usize| {
        (k..tokens.len()).find(|&k| !matches!(tokens[k].token, Token::Whitespace(_)))
    };
    if !tokens.iter().any(|t| is_word(t, "MATCH_RECOGNIZE")) {
        return tokens;
    }
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    // Exclusions opened and not yet closed by `-}`.
    let mut exclusions: Vec<bool> = Vec::new();
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
            // Only where a quantifier could be read: not first in a group or alternative.
            Token::LBrace
                if significant(&tokens, i + 1).is_some_and(|n| tokens[n].token == Token::Minus)
                    && out[..out.len() - 1]
                        .iter()
                        .rev()
                        .find(|p| !matches!(p.token, Token::Whitespace(_)))
                        .is_some_and(|p| !matches!(p.token, Token::LParen | Token::Pipe)) =>
            {
                out.insert(out.len() - 1, TokenWithSpan::new(Token::LParen, t.span));
                exclusions.push(true);
            }
            Token::LBrace
                if significant(&tokens, i + 1).is_some_and(|n| tokens[n].token == Token::Minus) =>
            {
                exclusions.push(false);
            }
            // The `}` that closes an exclusion put in parentheses closes them too.
            Token::RBrace if exclusions.pop() == Some(true) => {
                out.push(TokenWithSpan::new(Token::RParen, t.span));
            }
            Token::Word(w)
                if w.quote_style.is_none()
                    && w.value.eq_ignore_ascii_case("PERMUTE")
                    && w.value != "PERMUTE"
                    && significant(&tokens, i + 1)
                        .is_some_and(|n| tokens[n].token == Token::LParen) =>
            {
                if let Some(last) = out.last_mut() {
                    last.token = Token::make_word("PERMUTE", None);
                }
            }
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
        if (is_word(t, "RUNNING") || is_word(t, "FINAL"))
            && next.is_some_and(|n| WRAPPED.iter().any(|w| is_word(&tokens[n], w)))
        {
            let f = next.unwrap_or(i);
            if let Some(open) =
                significant(&tokens, f + 1).filter(|&o| tokens[o].token == Token::LParen)
            {
                // The `)` that closes the call.
                let mut depth = 0i32;
                let close = (open..tokens.len()).find(|&k| {
                    match tokens[k].token {
                        Token::LParen => depth += 1,
                        Token::RParen => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                });
                if let Some(close) = close {
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
            }
        }
        if is_word(t, "TO")
            && out.len() >= 2
            && out[..out.len() - 1]
                .iter()
                .rev()
                .find(|p| !matches!(p.token, Token::Whitespace(_)))
                .is_some_and(|p| is_word(p, "SKIP"))
            && next.is_some_and(|n| {
                matches!(tokens[n].token, Token::Word(_))
                    && !["NEXT", "FIRST", "LAST"]
                        .iter()
                        .any(|w| is_word(&tokens[n], w))
            })
        {
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
fn lift_within(
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
        // Find PATTERN at depth 1, then the end of its parentheses.
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
        let Some(end) = pattern_end else {
            i += 1;
            continue;
        };
        let significant = |k: usize| {
            (k..tokens.len()).find(|&k| !matches!(tokens[k].token, Token::Whitespace(_)))
        };
        let Some(first) = significant(end + 1) else {
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
                let e = p.parse_expr()?;
                interval_duration(&e).map_err(|e| match e {
                    Error::Parse { .. } => e,
                    other => error_at(&tokens[k], other.to_string()),
                })?;
                interval = Some(e);
                if is_word(&p.peek_token(), "EMIT") {
                    p.next_token();
                    let t = p.next_token();
                    if !is_word(&t, "TIMEOUT") {
                        return Err(error_at(
                            &t,
                            format!("expected TIMEOUT after EMIT, found \"{}\"", t.token),
                        ));
                    }
                    emit_timeout = true;
                }
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

/// Parses exactly one statement.
pub fn parse_one(sql: &str) -> Result<Statement> {
    let mut stmts = parse(sql)?;
    match stmts.len() {
        1 => Ok(stmts.remove(0)),
        0 => Err(Error::parse("empty statement", None)),
        n => Err(Error::parse(
            format!("expected one statement, found {n}"),
            None,
        )),
    }
}

/// Converts a sqlparser error, lifting its "at Line: L, Column: C" suffix into a location.
pub fn parser_error(e: ParserError) -> Error {
    let text = match e {
        ParserError::TokenizerError(s) | ParserError::ParserError(s) => s,
        ParserError::RecursionLimitExceeded => {
            return Error::too_complex(format!(
                "statement too complex: nested more than {PARSER_RECURSION_LIMIT} levels \
                 deep (stack depth limit exceeded)"
            ))
        }
    };
    if let Some(at) = text.rfind(" at Line: ") {
        let tail = &text[at + " at Line: ".len()..];
        let mut parts = tail.split(", Column: ");
        let line = parts.next().and_then(|l| l.trim().parse().ok());
        let column = parts.next().and_then(|c| c.trim().parse().ok());
        if let (Some(line), Some(column)) = (line, column) {
            return Error::parse(
                lowercase_first(&text[..at]),
                Some(Location { line, column }),
            );
        }
    }
    Error::parse(lowercase_first(&text), None)
}

impl From<ParserError> for Error {
    fn from(e: ParserError) -> Self {
        parser_error(e)
    }
}

fn lowercase_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

pub(super) fn error_at(tok: &TokenWithSpan, message: impl Into<String>) -> Error {
    let loc = tok.span.start;
    let location = (loc.line > 0).then_some(Location {
        line: loc.line,
        column: loc.column,
    });
    Error::parse(message, location)
}

pub(super) fn is_word(tok: &TokenWithSpan, word: &str) -> bool {
    matches!(&tok.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

pub(super) fn parse_word(parser: &mut Parser, word: &str) -> bool {
    if is_word(&parser.peek_token(), word) {
        parser.next_token();
        true
    } else {
        false
    }
}

pub(super) fn expect_word(parser: &mut Parser, word: &str) -> Result<()> {
    let tok = parser.peek_token();
    if is_word(&tok, word) {
        parser.next_token();
        Ok(())
    } else {
        Err(error_at(
            &tok,
            format!("expected {word}, found \"{}\"", tok.token),
        ))
    }
}

fn parse_statement(parser: &mut Parser) -> Result<Statement> {
    let first = parser.peek_token();
    let second = parser.peek_nth_token(1);
    if is_word(&first, "CREATE") && is_word(&second, "STREAM") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::CreateStream(parse_create_stream(parser)?));
    }
    if is_word(&first, "CREATE") && is_word(&second, "CONTINUOUS") {
        parser.next_token();
        parser.next_token();
        expect_word(parser, "QUERY")?;
        let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        let name = parser.parse_identifier()?;
        parser.expect_keyword_is(Keyword::AS)?;
        let query = parser.parse_query()?;
        let clauses = parse_clauses(parser)?;
        return Ok(Statement::CreateQuery(CreateQuery {
            name,
            query,
            clauses,
            if_not_exists,
        }));
    }
    if is_word(&first, "DROP") && (is_word(&second, "STREAM") || is_word(&second, "QUERY")) {
        parser.next_token();
        parser.next_token();
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = parser.parse_identifier()?;
        return Ok(if is_word(&second, "STREAM") {
            let cascade = parser.parse_keyword(Keyword::CASCADE);
            if !cascade {
                let _restrict = parser.parse_keyword(Keyword::RESTRICT);
            }
            Statement::DropStream {
                name,
                if_exists,
                cascade,
            }
        } else {
            Statement::DropQuery { name, if_exists }
        });
    }
    if is_word(&first, "CREATE") && is_word(&second, "SOURCE") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::CreateSource(parse_create_source(parser)?));
    }
    if is_word(&first, "DROP") && is_word(&second, "SOURCE") {
        parser.next_token();
        parser.next_token();
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = parser.parse_identifier()?;
        return Ok(Statement::DropSource { name, if_exists });
    }
    if is_word(&first, "CREATE") && is_word(&second, "SINK") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::CreateSink(super::sink::parse_create_sink(
            parser,
        )?));
    }
    if is_word(&first, "DROP") && is_word(&second, "SINK") {
        parser.next_token();
        parser.next_token();
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = parser.parse_identifier()?;
        return Ok(Statement::DropSink { name, if_exists });
    }
    if is_word(&first, "SHOW") && is_word(&second, "SINKS") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::ShowSinks);
    }
    if is_word(&first, "SHOW") && is_word(&second, "SOURCES") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::ShowSources);
    }
    if is_word(&first, "SHOW") && is_word(&second, "STREAMS") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::ShowStreams);
    }
    if is_word(&first, "SHOW") && is_word(&second, "QUERIES") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::ShowQueries);
    }
    if is_word(&first, "CHECKPOINT") {
        parser.next_token();
        return Ok(Statement::Checkpoint);
    }
    if is_word(&first, "EXPLAIN") {
        parser.next_token();
        return parse_explain(parser);
    }
    if is_word(&first, "DECLARE") {
        parser.next_token();
        return parse_declare(parser);
    }
    if is_word(&first, "FETCH") {
        parser.next_token();
        return parse_fetch(parser);
    }
    if is_word(&first, "CLOSE") {
        parser.next_token();
        if parser.parse_keyword(Keyword::ALL) {
            return Ok(Statement::CloseCursor { name: None });
        }
        let name = parser.parse_identifier()?;
        return Ok(Statement::CloseCursor { name: Some(name) });
    }
    if is_word(&first, "SUBSCRIBE") {
        parser.next_token();
        return Ok(Statement::Subscribe(parse_subscribe(parser)?));
    }
    if is_word(&first, "COPY")
        && second.token == Token::LParen
        && is_word(&parser.peek_nth_token(2), "SUBSCRIBE")
    {
        parser.next_token();
        parser.next_token();
        parser.next_token();
        let mut sub = parse_subscribe(parser)?;
        parser.expect_token(&Token::RParen)?;
        parser.expect_keyword_is(Keyword::TO)?;
        parser.expect_keyword_is(Keyword::STDOUT)?;
        sub.copy = Some(parse_copy_out_options(parser)?);
        return Ok(Statement::Subscribe(sub));
    }
    let stmt = parser.parse_statement()?;
    match stmt {
        sq::Statement::Copy {
            source,
            to,
            target,
            options,
            legacy_options,
            values,
        } => copy_from(source, to, target, options, legacy_options, values, &first),
        other => Ok(Statement::Sql(Box::new(other))),
    }
}

fn parse_explain(parser: &mut Parser) -> Result<Statement> {
    let mut json = false;
    let parenthesized = parser.consume_token(&Token::LParen);
    if parenthesized || is_word(&parser.peek_token(), "FORMAT") {
        expect_word(parser, "FORMAT")?;
        let tok = parser.peek_token();
        if parse_word(parser, "JSON") {
            json = true;
        } else if !parse_word(parser, "TEXT") {
            return Err(error_at(
                &tok,
                "EXPLAIN supports FORMAT TEXT or FORMAT JSON",
            ));
        }
        if parenthesized {
            parser.expect_token(&Token::RParen)?;
        }
    }
    let first = parser.peek_token();
    let target = if is_word(&first, "CREATE") {
        match parse_statement(parser)? {
            Statement::CreateQuery(cq) => ExplainTarget::Create(cq),
            _ => {
                return Err(error_at(
                    &first,
                    "EXPLAIN takes a continuous query, a SELECT or a query name",
                ))
            }
        }
    } else if is_word(&first, "SELECT") || is_word(&first, "WITH") || first.token == Token::LParen {
        let query = parser.parse_query()?;
        ExplainTarget::Query(query, parse_clauses(parser)?)
    } else {
        ExplainTarget::Named(parser.parse_identifier()?)
    };
    Ok(Statement::Explain { json, target })
}

/// The anomaly-model clauses after a query body (at most one).
fn parse_clauses(parser: &mut Parser) -> Result<Clauses> {
    let at = parser.peek_token();
    let clauses = Clauses {
        outlier: parse_outlier(parser)?,
        invariant: parse_invariant(parser)?,
        within: None,
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
fn parse_timestamp_literal(parser: &mut Parser) -> Result<i64> {
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
    let names: &[&str] = match method.as_str() {
        "DBSCAN" => &["eps", "min_points"],
        "KMEANS" => &["k", "threshold"],
        "ZSCORE" | "MAD" => &["threshold"],
        "IQR" => &["factor"],
        _ => {
            return Err(error_at(
                &method_tok,
                format!("unknown OUTLIER method {method}; use DBSCAN, KMEANS, ZSCORE, MAD or IQR"),
            ))
        }
    };
    let defaults: &[Option<f64>] = match method.as_str() {
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
                &method_tok,
                format!("{method} needs {}", names.join(" and ")),
            )
        })
    };
    let count = |i: usize| -> Result<usize> {
        let v = get(i)?;
        if v < 1.0 || v.fract() != 0.0 {
            return Err(error_at(
                &method_tok,
                format!("{} must be a positive whole number", names[i]),
            ));
        }
        Ok(v as usize)
    };
    let method = match method.as_str() {
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
    };
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

fn parse_declare(parser: &mut Parser) -> Result<Statement> {
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
fn parse_subscribe(parser: &mut Parser) -> Result<Subscribe> {
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

fn parse_fetch(parser: &mut Parser) -> Result<Statement> {
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
        timeout = Some(super::interval::parse_duration(&text)?);
        parser.expect_token(&Token::RParen)?;
    }
    Ok(Statement::Fetch {
        name,
        count,
        timeout,
    })
}

/// `[=] true | false | on | off | 1 | 0` after an option name; the option alone is true.
fn parse_option_bool(parser: &mut Parser) -> Result<bool> {
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
fn parse_copy_out_options(parser: &mut Parser) -> Result<CopyOut> {
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

fn copy_from(
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
                "COPY (query) TO is not supported; use COPY (SUBSCRIBE q) TO STDOUT or SELECT",
            ))
        }
    };
    if to || !matches!(target, CopyTarget::Stdin) {
        return Err(Error::NotSupported(
            "only COPY stream FROM STDIN is supported; use \\copy in psql to load a file"
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

fn parse_create_stream(parser: &mut Parser) -> Result<CreateStream> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    parser.expect_token(&Token::LParen)?;
    let mut columns = Vec::new();
    let mut watermark = None;
    loop {
        let tok = parser.peek_token();
        if is_word(&tok, "WATERMARK") {
            parser.next_token();
            if watermark.is_some() {
                return Err(error_at(&tok, "a stream has at most one WATERMARK"));
            }
            parser.expect_keyword_is(Keyword::FOR)?;
            let column = parser.parse_identifier()?;
            parser.expect_keyword_is(Keyword::AS)?;
            let expr_tok = parser.peek_token();
            let expr = parser.parse_expr()?;
            let delay = watermark_delay(&column, &expr).map_err(|e| match e {
                Error::Plan { message, .. } => error_at(&expr_tok, message),
                other => other,
            })?;
            watermark = Some(WatermarkDef { column, delay });
        } else {
            let name = parser.parse_identifier()?;
            let data_type = parser.parse_data_type()?;
            let mut not_null = false;
            loop {
                if parser.parse_keywords(&[Keyword::NOT, Keyword::NULL]) {
                    not_null = true;
                } else if parser.parse_keyword(Keyword::NULL) {
                    not_null = false;
                } else {
                    break;
                }
            }
            columns.push(ColumnDef {
                name,
                data_type,
                not_null,
            });
        }
        if parser.consume_token(&Token::Comma) {
            continue;
        }
        parser.expect_token(&Token::RParen)?;
        break;
    }
    let options = if parser.parse_keyword(Keyword::WITH) {
        parse_options(parser)?
    } else {
        Vec::new()
    };
    Ok(CreateStream {
        name,
        columns,
        watermark,
        options,
        if_not_exists,
    })
}

/// `(key = value, ...)`: keys lowercased; values quoted strings, numbers or words.
pub(super) fn parse_options(parser: &mut Parser) -> Result<Vec<(String, String)>> {
    parser.expect_token(&Token::LParen)?;
    let mut options = Vec::new();
    loop {
        let key = parser.parse_identifier()?.value.to_ascii_lowercase();
        parser.expect_token(&Token::Eq)?;
        let tok = parser.next_token();
        let value = match &tok.token {
            Token::SingleQuotedString(s) => s.clone(),
            Token::Number(n, _) => n.clone(),
            Token::Word(w) => w.value.clone(),
            other => {
                return Err(error_at(
                    &tok,
                    format!("expected an option value, found \"{other}\""),
                ))
            }
        };
        options.push((key, value));
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    Ok(options)
}

/// After `CREATE SOURCE`: `[IF NOT EXISTS] name FROM FILE 'path' [(options)] INTO STREAM s
/// [(col PATH 'a.b', ...)]`, or `FROM KAFKA (options)`.
fn parse_create_source(parser: &mut Parser) -> Result<CreateSource> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    parser.expect_keyword_is(Keyword::FROM)?;
    let tok = parser.peek_token();
    let connector = if parse_word(parser, "FILE") {
        let path_tok = parser.next_token();
        match &path_tok.token {
            Token::SingleQuotedString(p) => SourceConnector::File(p.clone()),
            other => {
                return Err(error_at(
                    &path_tok,
                    format!("expected the file's path as a quoted string, found \"{other}\""),
                ))
            }
        }
    } else if parse_word(parser, "KAFKA") {
        SourceConnector::Kafka
    } else {
        return Err(error_at(
            &tok,
            format!("expected FILE or KAFKA, found \"{}\"", tok.token),
        ));
    };
    let options = if parser.peek_token().token == Token::LParen {
        parse_options(parser)?
    } else {
        Vec::new()
    };
    parser.expect_keyword_is(Keyword::INTO)?;
    expect_word(parser, "STREAM")?;
    let stream = parser.parse_identifier()?;
    let mut paths = Vec::new();
    if parser.consume_token(&Token::LParen) {
        loop {
            let column = parser.parse_identifier()?;
            expect_word(parser, "PATH")?;
            let path_tok = parser.next_token();
            let Token::SingleQuotedString(path) = path_tok.token.clone() else {
                return Err(error_at(
                    &path_tok,
                    format!("expected a quoted path, found \"{}\"", path_tok.token),
                ));
            };
            paths.push((column, path));
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
    }
    Ok(CreateSource {
        name,
        connector,
        options,
        stream,
        paths,
        if_not_exists,
    })
}

fn watermark_delay(column: &Ident, expr: &Expr) -> Result<std::time::Duration> {
    let same =
        |e: &Expr| matches!(e, Expr::Identifier(i) if i.value.eq_ignore_ascii_case(&column.value));
    match expr {
        e if same(e) => Ok(std::time::Duration::ZERO),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Minus,
            right,
        } if same(left) => interval_duration(right),
        Expr::Nested(inner) => watermark_delay(column, inner),
        _ => Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            format!("watermark must be \"{column}\" or \"{column} - INTERVAL '...'\""),
        )),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::error::WithSource;

    /// Parses, prints, parses again: both parses and the second print must agree.
    pub(crate) fn verified(sql: &str) -> Statement {
        let stmt = parse_one(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let printed = stmt.to_string();
        let again = parse_one(&printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
        assert_eq!(stmt, again, "round trip of {sql} via {printed}");
        assert_eq!(printed, again.to_string());
        stmt
    }

    #[test]
    fn create_stream_round_trips() {
        let s = verified(
            "CREATE STREAM proc_events (ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (idle_timeout = '5s')",
        );
        let Statement::CreateStream(cs) = s else {
            panic!("not a stream")
        };
        assert_eq!(cs.columns.len(), 3);
        assert!(cs.columns[0].not_null);
        let wm = cs.watermark.unwrap();
        assert_eq!(wm.delay, std::time::Duration::from_secs(5));
        assert_eq!(cs.options, vec![("idle_timeout".into(), "5s".into())]);
        verified(
            "CREATE STREAM IF NOT EXISTS m (ts TIMESTAMPTZ, v DOUBLE PRECISION, ok BOOLEAN, n INT)",
        );
        verified("CREATE STREAM m (ts TIMESTAMP, WATERMARK FOR ts AS ts)");
        verified("CREATE STREAM m (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10 minutes')");
    }

    #[test]
    fn other_statements_round_trip() {
        verified("CREATE CONTINUOUS QUERY q AS SELECT host, COUNT(*) FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end");
        verified("DROP STREAM IF EXISTS s");
        verified("DROP STREAM s CASCADE");
        verified("DROP QUERY q");
        verified("SHOW STREAMS");
        verified("SHOW QUERIES");
        verified("SUBSCRIBE q");
        verified("COPY (SUBSCRIBE q) TO STDOUT");
        verified("COPY (SUBSCRIBE q WITH (SNAPSHOT)) TO STDOUT WITH (FORMAT csv, HEADER)");
        verified("SUBSCRIBE q WITH (SNAPSHOT, SEQ)");
        verified("SUBSCRIBE q FROM 5 WITH (SEQ, PROGRESS)");
        assert_eq!(
            parse_one("SUBSCRIBE q FROM 5 WITH SEQ").unwrap(),
            parse_one("SUBSCRIBE q FROM 5 WITH (SEQ)").unwrap()
        );
        let Statement::Subscribe(sub) =
            verified("SUBSCRIBE (SELECT host, n * 2 AS twice FROM q WHERE n > 3) WITH (PROGRESS)")
        else {
            panic!("not a subscription")
        };
        assert_eq!(sub.query.value, "q");
        assert!(sub.view.is_some() && sub.progress);
        verified("COPY (SUBSCRIBE (SELECT * FROM q WHERE n > 3)) TO STDOUT WITH (FORMAT csv)");
        let err = parse_one("SUBSCRIBE (SELECT * FROM q, r)").unwrap_err();
        assert!(
            err.to_string().contains("reads one continuous query"),
            "{err}"
        );
        assert_eq!(err.location().map(|l| l.column), Some(11), "{err:?}");
        assert_eq!(
            parse_one("subscribe q with (snapshot = true, seq = off)").unwrap(),
            parse_one("SUBSCRIBE q WITH (SNAPSHOT)").unwrap()
        );
        assert_eq!(
            parse_one("COPY (SUBSCRIBE q) TO STDOUT WITH CSV HEADER").unwrap(),
            parse_one("COPY (SUBSCRIBE q) TO STDOUT WITH (FORMAT csv, HEADER true)").unwrap()
        );
        let err = parse_one("SUBSCRIBE q WITH (SNAPSHOT, PROGRES)").unwrap_err();
        assert!(
            err.to_string().contains("unknown SUBSCRIBE option"),
            "{err}"
        );
        assert_eq!(err.location().map(|l| l.column), Some(29), "{err:?}");
        verified("COPY s (a, b) FROM STDIN WITH (FORMAT csv, HEADER true)");
        verified("COPY s FROM STDIN");
        verified("COPY s FROM STDIN WITH (FORMAT binary)");
        verified("INSERT INTO s VALUES (1, 'a')");
        verified("SELECT 1");
        verified("DECLARE c CURSOR FOR SUBSCRIBE q");
        verified("DECLARE c CURSOR FOR SELECT 1");
        verified("FETCH 10 FROM c");
        verified("FETCH ALL FROM c WITH (timeout = '250ms')");
        verified("CLOSE c");
        verified("CLOSE ALL");
        verified("EXPLAIN SELECT a FROM s");
        verified("EXPLAIN (FORMAT JSON) CREATE CONTINUOUS QUERY q AS SELECT a FROM s");
        verified("EXPLAIN q");
        let s = verified(
            "CREATE CONTINUOUS QUERY exfil AS SELECT host, window_end, SUM(amount) AS sent \
             FROM TUMBLE(e, ts, INTERVAL '10' MINUTE) GROUP BY host, window_start, window_end \
             OUTLIER DBSCAN(eps => 100000, min_points => 5) ON (sent) HAVING is_outlier AND sent > 1000000",
        );
        let Statement::CreateQuery(cq) = s else {
            panic!("query")
        };
        let o = cq.clauses.outlier.unwrap();
        assert_eq!(
            o.method,
            OutlierMethod::Dbscan {
                eps: 100000.0,
                min_points: 5
            }
        );
        assert!(o.having.is_some());
        verified(
            "EXPLAIN SELECT a FROM s GROUP BY a OUTLIER ZSCORE(2.5) ON (a, b) PARTITION BY (job)",
        );
        verified("CREATE CONTINUOUS QUERY q AS SELECT a FROM s OUTLIER IQR() ON (a)");
        let s = verified(
            "CREATE CONTINUOUS QUERY children AS SELECT host, exe, obj_name AS child FROM e \
             WHERE op = 'start' INVARIANT SET (child) PER (host, exe) TRAINING INTERVAL '10' MINUTE",
        );
        let Statement::CreateQuery(cq) = s else {
            panic!("query")
        };
        let inv = cq.clauses.invariant.unwrap();
        assert_eq!(
            inv.training,
            Training::Interval(std::time::Duration::from_secs(600))
        );
        assert!(!inv.online);
        verified("EXPLAIN SELECT a FROM s INVARIANT RANGE (a) TRAINING 3 WINDOWS ONLINE");
        assert!(parse_one("SELECT 1; CREATE CONTINUOUS QUERY q AS SELECT a FROM s INVARIANT SET (a) TRAINING 0 WINDOWS").is_err());
        // A clean period the user names, and training that discounts rare values.
        let s = verified(
            "CREATE CONTINUOUS QUERY q AS SELECT ts, a FROM s INVARIANT SET (a) \
             TRAINING BETWEEN TIMESTAMP '2024-01-01' AND '2024-01-02 06:30:00.25' MIN SUPPORT 3 ONLINE",
        );
        let Statement::CreateQuery(cq) = s else {
            panic!("query")
        };
        let inv = cq.clauses.invariant.unwrap();
        let day = 86_400_000_000_000i64 * 19_723; // 2024-01-01 in days since 1970
        assert_eq!(
            inv.training,
            Training::Between {
                from: Some(day),
                until: day + 86_400_000_000_000 + 23_400_250_000_000
            }
        );
        assert_eq!((inv.min_support, inv.online), (3, true));
        verified("EXPLAIN SELECT ts, a FROM s INVARIANT SET (a) TRAINING UNTIL TIMESTAMP '2024-01-01 10:00:00'");
        for (sql, at) in [
            (
                "EXPLAIN SELECT ts FROM s INVARIANT SET (a) TRAINING UNTIL 'yesterday'",
                59,
            ),
            (
                "EXPLAIN SELECT ts FROM s INVARIANT SET (a) TRAINING BETWEEN '2024-01-02' AND '2024-01-01'",
                78,
            ),
            (
                "EXPLAIN SELECT ts FROM s INVARIANT SET (a) TRAINING INTERVAL '1' MINUTE MIN SUPPORT 0",
                85,
            ),
        ] {
            let e = parse_one(sql).unwrap_err();
            assert_eq!(e.location().map(|l| l.column), Some(at), "{sql}: {e}");
        }
        let e = parse_one("CREATE CONTINUOUS QUERY q AS SELECT a FROM s OUTLIER LOF(3) ON (a)")
            .unwrap_err();
        assert_eq!(
            e.location(),
            Some(Location {
                line: 1,
                column: 54
            })
        );
        assert!(
            parse_one("CREATE CONTINUOUS QUERY q AS SELECT a FROM s OUTLIER DBSCAN(1) ON (a)")
                .is_err()
        );
        // What psql sends with \set FETCH_COUNT.
        let Statement::DeclareCursor { target, .. } =
            parse_one("DECLARE _psql_cursor NO SCROLL CURSOR FOR SUBSCRIBE q").unwrap()
        else {
            panic!("not a cursor")
        };
        assert!(matches!(
            *target,
            Statement::Subscribe(Subscribe { copy: None, .. })
        ));
        assert_eq!(
            parse_one("FETCH FORWARD 1 FROM _psql_cursor").unwrap(),
            parse_one("FETCH 1 _psql_cursor").unwrap()
        );
    }

    #[test]
    fn create_source_round_trips() {
        let s = verified(
            "CREATE SOURCE f FROM FILE '/var/log/it''s.jsonl' (format = 'json', follow = true) \
             INTO STREAM s (pid PATH 'proc.pid', exe PATH 'proc.exe')",
        );
        let Statement::CreateSource(cs) = s else {
            panic!("not a source")
        };
        assert_eq!(
            cs.connector,
            SourceConnector::File("/var/log/it's.jsonl".into())
        );
        assert_eq!(cs.options[1], ("follow".to_string(), "true".to_string()));
        assert_eq!(cs.paths.len(), 2);
        verified("CREATE SOURCE IF NOT EXISTS k FROM KAFKA (brokers = '127.0.0.1:9092', topic = 't') INTO STREAM s");
        verified("DROP SOURCE IF EXISTS f");
        assert_eq!(parse_one("show sources").unwrap(), Statement::ShowSources);
        let e = parse_one("CREATE SOURCE f FROM SOCKET 'x' INTO STREAM s").unwrap_err();
        assert!(e.to_string().contains("expected FILE or KAFKA"), "{e}");
        let e = parse_one("CREATE SOURCE f FROM FILE x INTO STREAM s").unwrap_err();
        assert!(e.to_string().contains("quoted string"), "{e}");
    }

    #[test]
    fn legacy_copy_options() {
        let Statement::CopyFrom(c) = parse_one("COPY s FROM STDIN CSV HEADER").unwrap() else {
            panic!("not a copy")
        };
        assert!(c.csv && c.header);
    }

    #[test]
    fn several_statements() {
        let stmts = parse("SHOW STREAMS; ;SELECT 1;").unwrap();
        assert_eq!(stmts.len(), 2);
    }

    #[test]
    fn row_pattern_recognition_constructs_round_trip() {
        let sql = "CREATE CONTINUOUS QUERY ev AS SELECT * FROM s MATCH_RECOGNIZE(\
                   PARTITION BY host ORDER BY ts \
                   MEASURES CLASSIFIER() AS step, MATCH_NUMBER() AS n, RUNNING COUNT(*) AS so_far, \
                   final Last(u.v) AS fin, RUNNING sum(a.v) AS s \
                   ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP TO u \
                   PATTERN (^ a {- x -}*? PERMUTE(b, c) (d | {- e -}) $) \
                   SUBSET u = (a, b), w = (c, d) WITHIN INTERVAL '1' MINUTE \
                   DEFINE a AS CLASSIFIER() = 'a', b AS b.v > FIRST(u.v))";
        let Statement::CreateQuery(cq) = verified(sql) else {
            panic!("not a query")
        };
        assert_eq!(cq.clauses.subsets.len(), 2);
        assert_eq!(cq.clauses.subsets[1].to_string(), "w = (c, d)");
        let printed = cq.to_string();
        for part in [
            "RUNNING COUNT(*) AS so_far",
            "FINAL Last(u.v) AS fin",
            "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
            // SKIP TO v is SQL:2016's shorthand for SKIP TO LAST v.
            "AFTER MATCH SKIP TO LAST u",
            "PATTERN (^ a ( {- x -} )*? PERMUTE(b, c) ( d | {- e -} ) $) \
             SUBSET u = (a, b), w = (c, d) WITHIN INTERVAL '1' MINUTE DEFINE",
        ] {
            assert!(printed.contains(part), "{part} in {printed}");
        }
        // The other orders of the lifted clauses, and lower-case keywords.
        verified(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
             MEASURES final count(*) AS n ALL ROWS PER MATCH OMIT EMPTY MATCHES \
             PATTERN (permute(a, b) c*) WITHIN INTERVAL '5' SECOND SUBSET u = (a) \
             DEFINE a AS v > 0)",
        );
        let Statement::CreateQuery(cq) = verified(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
             MEASURES PREV(LAST(a.v, 1), 2) AS p, NEXT(v) AS n PATTERN (a b) \
             WITHIN INTERVAL '5' SECOND EMIT TIMEOUT DEFINE a AS v > LAST(a.v, 1))",
        ) else {
            panic!("not a query")
        };
        assert!(cq.clauses.emit_timeout);
        assert!(cq
            .to_string()
            .contains("WITHIN INTERVAL '5' SECOND EMIT TIMEOUT DEFINE"));
        verified(
            "EXPLAIN SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.v AS v \
             ALL ROWS PER MATCH SHOW EMPTY MATCHES PATTERN (a*) DEFINE a AS v > 0)",
        );
    }

    #[test]
    fn row_pattern_errors_point_at_the_token() {
        // A SUBSET without its parentheses.
        let err = parse_one(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
             MEASURES a.v AS v PATTERN (a) SUBSET u = a DEFINE a AS v > 0)",
        )
        .unwrap_err();
        assert_eq!(err.sqlstate(), "42601");
        assert_eq!(err.location().map(|l| l.column), Some(115), "{err}");
        // SUBSET outside a continuous query.
        let err = parse_one(
            "SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.v AS v\n  PATTERN (a) \
             SUBSET u = (a) DEFINE a AS v > 0)",
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("SUBSET is supported in continuous queries only"));
        let loc = err.location().unwrap();
        assert_eq!((loc.line, loc.column), (2, 15), "{err}");
        // Something else between PATTERN and DEFINE.
        let err = parse_one(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
             MEASURES a.v AS v PATTERN (a) SUBSET u = (a) FOO DEFINE a AS v > 0)",
        )
        .unwrap_err();
        assert_eq!(err.sqlstate(), "42601");
        assert_eq!(err.location().map(|l| l.column), Some(119), "{err}");
    }

    #[test]
    fn match_recognize_round_trips_with_within() {
        let sql = "CREATE CONTINUOUS QUERY theft AS SELECT * FROM proc_events MATCH_RECOGNIZE(\
                   PARTITION BY host ORDER BY ts \
                   MEASURES FIRST(w.ts) AS started, COUNT(x.*) AS noise \
                   ONE ROW PER MATCH AFTER MATCH SKIP TO LAST r \
                   PATTERN (w x*? (r | q){1,3}? s+) WITHIN INTERVAL '10' MINUTE \
                   DEFINE w AS op = 'write', r AS r.pid = w.obj_pid, s AS PREV(amount) > 1) AS m";
        let Statement::CreateQuery(cq) = verified(sql) else {
            panic!("not a query")
        };
        assert_eq!(
            cq.clauses.within.as_ref().map(|w| w.to_string()).as_deref(),
            Some("INTERVAL '10' MINUTE")
        );
        let printed = cq.to_string();
        assert!(
            printed
                .contains("PATTERN (w x*? ( r | q ){1,3}? s+) WITHIN INTERVAL '10' MINUTE DEFINE"),
            "{printed}"
        );
        // Without WITHIN, and as EXPLAIN of a SELECT.
        verified("EXPLAIN SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x PATTERN (a b) DEFINE a AS x > 1)");
        let Statement::Explain {
            target: ExplainTarget::Query(_, clauses),
            ..
        } = verified(
            "EXPLAIN SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x \
             PATTERN (a b) WITHIN INTERVAL '5' SECOND DEFINE a AS x > 1)",
        )
        else {
            panic!("not an explain")
        };
        assert!(clauses.within.is_some());
    }

    #[test]
    fn within_errors_point_at_the_token() {
        // WITHIN outside a continuous query.
        let e = parse(
            "SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x\n  PATTERN (a) WITHIN INTERVAL '1' SECOND DEFINE a AS x > 1)",
        )
        .unwrap_err();
        assert_eq!(
            e.location(),
            Some(Location {
                line: 2,
                column: 15
            })
        );
        assert!(e.to_string().contains("continuous queries only"), "{e}");
        // A WITHIN that is not an interval.
        let e = parse(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x PATTERN (a) WITHIN 5 DEFINE a AS x > 1)",
        )
        .unwrap_err();
        assert_eq!(e.sqlstate(), "42601");
        assert!(e.location().is_some(), "{e}");
        // No DEFINE after WITHIN.
        let e = parse(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts PATTERN (a) WITHIN INTERVAL '1' SECOND)",
        )
        .unwrap_err();
        assert!(e.to_string().contains("DEFINE"), "{e}");
    }

    #[test]
    fn errors_point_at_the_token() {
        let sql = "CREATE STREAM s (ts TIMESTAMP,\n  WATERMARK FOR ts AS ts * 2)";
        let e = parse(sql).unwrap_err();
        assert_eq!(e.sqlstate(), "42601");
        assert_eq!(
            e.location(),
            Some(Location {
                line: 2,
                column: 23
            })
        );
        let rendered = WithSource {
            error: &e,
            source: sql,
        }
        .to_string();
        assert!(
            rendered.ends_with("  WATERMARK FOR ts AS ts * 2)\n                      ^"),
            "{rendered}"
        );

        let e = parse("SELECT 1 2").unwrap_err();
        assert_eq!(
            e.location(),
            Some(Location {
                line: 1,
                column: 10
            })
        );
        let e = parse("SELEC 1").unwrap_err();
        assert_eq!(e.sqlstate(), "42601");
        assert_eq!(e.location(), Some(Location { line: 1, column: 1 }));
    }
}
