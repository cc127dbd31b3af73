//! The front-end parser: peeks the first keywords of each statement, parses saql's own
//! statements with sqlparser's token-level API, and hands everything else to sqlparser
//! whole. Keywords of ours are matched by text, case-insensitively.
//!
//! Before parsing, the token stream is prepared: window table functions (`window_tvf.rs`),
//! `MATCH_RECOGNIZE` words sqlparser does not read and the `WITHIN`/`SUBSET` it lifts out
//! (`within.rs`), and a subquery that a `MATCH_RECOGNIZE` reads, put back once parsed
//! (`inline.rs`). The clauses after a query body are `clauses.rs`, `SUBSCRIBE` and its
//! cursors `subscribe.rs`, `COPY` `copy.rs`; the statements that define streams and sources
//! are here.

mod clauses;
mod copy;
mod inline;
mod pattern;
mod subscribe;
mod within;

use crate::error::sqlstate;
use datafusion::sql::sqlparser::ast::{self as sq, BinaryOperator, Expr, Ident};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use super::ast::{
    BackfillStart, Clauses, ColumnDef, CreateQuery, CreateSource, CreateStream, ExplainTarget,
    SourceConnector, Statement, WatermarkDef,
};
use super::complexity;
use super::dialect::SaqlDialect;
use super::interval::interval_duration;
use super::pattern::RowPattern;
use super::window_tvf;
use crate::error::{Error, Location, Result};
use crate::limits::PARSER_RECURSION_LIMIT;
use clauses::parse_clauses;
use copy::{copy_from, copy_to, parse_copy_out_options};
use subscribe::{parse_declare, parse_fetch, parse_subscribe};
use within::{lift_within, rewrite_pattern_words};

/// Parses one or more statements separated by semicolons.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    Ok(parse_statements(sql, false)?
        .into_iter()
        .map(|(s, _)| s)
        .collect())
}

/// Parses one continuous query: a `CREATE CONTINUOUS QUERY`, or a bare `SELECT` (which may
/// hold a `MATCH_RECOGNIZE`, its pattern then returned in the clauses).
pub fn parse_continuous(sql: &str) -> Result<Option<(Box<sq::Query>, Clauses)>> {
    let mut stmts = parse_statements(sql, true)?;
    if stmts.len() != 1 {
        return Ok(None);
    }
    Ok(match stmts.remove(0) {
        (Statement::CreateQuery(cq), _) => Some((cq.query, cq.clauses)),
        (Statement::Sql(s), pattern) => match *s {
            sq::Statement::Query(q) => Some((
                q,
                Clauses {
                    pattern,
                    ..Clauses::default()
                },
            )),
            _ => None,
        },
        _ => None,
    })
}

/// The statements of `sql`, each with the pattern of a bare `SELECT`'s `MATCH_RECOGNIZE`
/// when `bare_patterns` allows one (else such a pattern is refused).
fn parse_statements(
    sql: &str,
    bare_patterns: bool,
) -> Result<Vec<(Statement, Option<RowPattern>)>> {
    complexity::check_size(sql)?;
    let dialect = SaqlDialect::default();
    let (sql, mut patterns) = pattern::lift_patterns(sql)?;
    let tokens = Tokenizer::new(&dialect, &sql)
        .tokenize_with_location()
        .map_err(|e| parser_error(ParserError::TokenizerError(e.to_string())))?;
    complexity::check_tokens(&tokens)?;
    let tokens = window_tvf::rewrite(tokens);
    let tokens = rewrite_pattern_words(tokens);
    let (tokens, mut subqueries) = inline::lift_subqueries(tokens);
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
        inline::put_back(&mut stmt, &mut subqueries)?;
        complexity::check_depth(&stmt)?;
        let mine = withins.iter().take_while(|w| w.at < parser.index()).count();
        for w in withins.drain(..mine) {
            let clauses = match &mut stmt {
                Statement::CreateQuery(cq) | Statement::AlterQuery(cq) => Some(&mut cq.clauses),
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
        let after = Location::of_span(parser.peek_token().span);
        let mine = patterns
            .iter()
            .take_while(|p| after.is_none_or(|n| (p.at.line, p.at.column) < (n.line, n.column)))
            .count();
        let bare = attach_patterns(&mut stmt, patterns.drain(..mine).collect(), bare_patterns)?;
        out.push((stmt, bare));
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

/// Puts the patterns read from a statement's text into its clauses: a continuous query (or an
/// EXPLAIN of one) takes one `MATCH_RECOGNIZE`; a bare `SELECT`'s is returned when `bare`
/// allows it; elsewhere a pattern is refused.
fn attach_patterns(
    stmt: &mut Statement,
    patterns: Vec<pattern::LiftedPattern>,
    bare: bool,
) -> Result<Option<RowPattern>> {
    let mut patterns = patterns.into_iter();
    let Some(first) = patterns.next() else {
        return Ok(None);
    };
    if let Some(second) = patterns.next() {
        return Err(Error::plan(
            sqlstate::FEATURE_NOT_SUPPORTED,
            "a continuous query reads one stream through at most one MATCH_RECOGNIZE; \
             write one query per MATCH_RECOGNIZE",
        )
        .at(Some(second.at)));
    }
    let clauses = match stmt {
        Statement::CreateQuery(cq) | Statement::AlterQuery(cq) => &mut cq.clauses,
        Statement::Explain {
            target: ExplainTarget::Create(cq),
            ..
        } => &mut cq.clauses,
        Statement::Explain {
            target: ExplainTarget::Query(_, c),
            ..
        } => c,
        Statement::Sql(s) if bare && matches!(s.as_ref(), sq::Statement::Query(_)) => {
            return Ok(Some(first.pattern))
        }
        _ => {
            return Err(Error::plan(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "MATCH_RECOGNIZE is supported in continuous queries only: CREATE CONTINUOUS \
                 QUERY name AS SELECT ... MATCH_RECOGNIZE (...)",
            )
            .at(Some(first.at)))
        }
    };
    clauses.pattern = Some(first.pattern);
    Ok(None)
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

/// One statement: saql's catalog statements first, then [`parse_session_statement`].
fn parse_statement(parser: &mut Parser) -> Result<Statement> {
    let first = parser.peek_token();
    let second = parser.peek_nth_token(1);
    if is_word(&first, "CREATE") && is_word(&second, "STREAM") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::CreateStream(parse_create_stream(parser)?));
    }
    if is_word(&first, "ALTER") && is_word(&second, "CONTINUOUS") {
        parser.next_token();
        parser.next_token();
        let altered = parse_create_query(parser)?;
        if altered.if_not_exists {
            return Err(Error::NotSupported(
                "ALTER CONTINUOUS QUERY takes no IF NOT EXISTS".into(),
            ));
        }
        return Ok(Statement::AlterQuery(altered));
    }
    if is_word(&first, "ALTER") && is_word(&second, "STREAM") {
        parser.next_token();
        parser.next_token();
        let name = parser.parse_identifier()?;
        parser.expect_keyword_is(Keyword::SET)?;
        let options = parse_options(parser)?;
        return Ok(Statement::AlterStream { name, options });
    }
    if is_word(&first, "CREATE") && is_word(&second, "CONTINUOUS") {
        parser.next_token();
        parser.next_token();
        return Ok(Statement::CreateQuery(parse_create_query(parser)?));
    }
    if is_word(&first, "DROP") && (is_word(&second, "STREAM") || is_word(&second, "QUERY")) {
        parser.next_token();
        parser.next_token();
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = parser.parse_identifier()?;
        let cascade = parser.parse_keyword(Keyword::CASCADE);
        if !cascade {
            let _restrict = parser.parse_keyword(Keyword::RESTRICT);
        }
        return Ok(if is_word(&second, "STREAM") {
            Statement::DropStream {
                name,
                if_exists,
                cascade,
            }
        } else {
            Statement::DropQuery {
                name,
                if_exists,
                cascade,
            }
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
    parse_session_statement(parser, first, second)
}

/// The statements of a session (SHOW, CHECKPOINT, EXPLAIN, cursors, SUBSCRIBE, COPY) and,
/// past them, plain SQL for sqlparser.
fn parse_session_statement(
    parser: &mut Parser,
    first: TokenWithSpan,
    second: TokenWithSpan,
) -> Result<Statement> {
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
            ..
        } if to => copy_to(source, target, options, legacy_options, &first),
        sq::Statement::Copy {
            source,
            to,
            target,
            options,
            legacy_options,
            values,
        } => copy_from(source, to, target, options, legacy_options, values, &first),
        sq::Statement::CreateTable(ct) => Ok(Statement::CreateTable(Box::new(ct))),
        sq::Statement::CreateView(cv) => Ok(Statement::CreateView(Box::new(cv))),
        sq::Statement::Drop {
            object_type: kind @ (sq::ObjectType::Table | sq::ObjectType::View),
            if_exists,
            names,
            cascade,
            ..
        } => {
            let [name] = names.as_slice() else {
                return Err(error_at(&first, format!("DROP {kind} drops one at a time")));
            };
            let name = name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .cloned()
                .ok_or_else(|| error_at(&first, format!("expected a {kind} name")))?;
            Ok(if kind == sq::ObjectType::Table {
                Statement::DropTable {
                    name,
                    if_exists,
                    cascade,
                }
            } else {
                Statement::DropView {
                    name,
                    if_exists,
                    cascade,
                }
            })
        }
        sq::Statement::ShowTables { .. } => Ok(Statement::ShowTables),
        other => Ok(Statement::Sql(Box::new(other))),
    }
}

/// `CREATE CONTINUOUS QUERY [IF NOT EXISTS] name AS query [clauses]`, after `CONTINUOUS`.
fn parse_create_query(parser: &mut Parser) -> Result<CreateQuery> {
    expect_word(parser, "QUERY")?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    let mut start = parse_query_options(parser)?;
    parser.expect_keyword_is(Keyword::AS)?;
    let query = parser.parse_query()?;
    let clauses = parse_clauses(parser)?;
    if start.is_none() {
        start = parse_query_options(parser)?;
    }
    Ok(CreateQuery {
        name,
        start,
        query,
        clauses,
        if_not_exists,
    })
}

/// A continuous query's `WITH (start = TIMESTAMP '...' | INTERVAL '...')`, before `AS` or
/// after the query.
fn parse_query_options(parser: &mut Parser) -> Result<Option<BackfillStart>> {
    if !parser.parse_keyword(Keyword::WITH) {
        return Ok(None);
    }
    parser.expect_token(&Token::LParen)?;
    let key = parser.peek_token();
    if !parse_word(parser, "START") {
        return Err(error_at(
            &key,
            "a continuous query takes one option, start (WITH (start = TIMESTAMP '...' | \
             INTERVAL '...'))",
        ));
    }
    parser.expect_token(&Token::Eq)?;
    let start = if is_word(&parser.peek_token(), "INTERVAL") {
        let expr = parser.parse_expr()?;
        BackfillStart::Back(interval_duration(&expr)?)
    } else {
        BackfillStart::At(clauses::parse_timestamp_literal(parser)?)
    };
    parser.expect_token(&Token::RParen)?;
    Ok(Some(start))
}

fn parse_explain(parser: &mut Parser) -> Result<Statement> {
    // `EXPLAIN ANALYZE SELECT ...` runs the SELECT now, ad hoc, and shows DataFusion's plan
    // with what each step did (over history: the row groups a time predicate skipped).
    if is_word(&parser.peek_token(), "ANALYZE") {
        let explain = parser.parse_explain(sq::DescribeAlias::Explain)?;
        return Ok(Statement::Sql(Box::new(explain)));
    }
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

/// After `CREATE SOURCE`: `[IF NOT EXISTS] name FROM FILE 'path' [(options)] INTO {STREAM | TABLE} s
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
    let table = parse_word(parser, "TABLE");
    if !table {
        expect_word(parser, "STREAM")?;
    }
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
        table,
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
pub(super) mod tests;
