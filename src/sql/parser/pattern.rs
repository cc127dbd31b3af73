//! Reads the `PATTERN (...)` of every `MATCH_RECOGNIZE` from the statement's text, before it
//! is tokenized: SQL's tokenizer reads `$A$` as the start of a dollar-quoted string and `$A`
//! as a parameter, and sqlparser's pattern grammar lacks `()`, `{,}` and exclusions of more
//! than one variable. Each pattern is parsed here into a [`RowPattern`] and its text is blanked
//! out (a `_` and spaces, newlines kept, so that every later token keeps its line and column);
//! the front end puts the pattern into the statement's clauses.

use crate::error::{Error, Location, Result};
use crate::limits::MAX_NESTING;
use crate::sql::pattern::{Quantifier, RowPattern};
use datafusion::sql::sqlparser::ast::Ident;

/// A pattern read from the text, and where its blanked-out placeholder is.
#[derive(Debug)]
pub(super) struct LiftedPattern {
    /// The pattern.
    pub pattern: RowPattern,
    /// Where the placeholder `_` now stands, in place of the pattern's first character.
    pub at: Location,
}

/// Finds the `PATTERN (...)` of every `MATCH_RECOGNIZE` in `sql`, parses each, and returns the
/// text with each pattern blanked out, and the patterns in order.
pub(super) fn lift_patterns(sql: &str) -> Result<(String, Vec<LiftedPattern>)> {
    let chars: Vec<char> = sql.chars().collect();
    let mut scan = Scanner::new(&chars);
    let mut lifted = Vec::new();
    // (start, end, placeholder) of each pattern's text.
    let mut blank: Vec<(usize, usize, usize)> = Vec::new();
    // Parenthesis depth inside the current MATCH_RECOGNIZE; None outside one.
    let mut inside: Option<i32> = None;
    let mut after_match_recognize = false;
    while let Some(tok) = scan.next_token() {
        match tok {
            Tok::Word(w, _) if w.eq_ignore_ascii_case("MATCH_RECOGNIZE") => {
                after_match_recognize = true;
                continue;
            }
            Tok::LParen if after_match_recognize => inside = Some(1),
            Tok::LParen => inside = inside.map(|d| d + 1),
            Tok::RParen => {
                inside = inside.map(|d| d - 1).filter(|&d| d > 0);
            }
            Tok::Word(w, _) if inside == Some(1) && w.eq_ignore_ascii_case("PATTERN") => {
                let save = scan.pos;
                if scan.next_token() != Some(Tok::LParen) {
                    scan.pos = save;
                    continue;
                }
                let start = scan.pos;
                let close = scan.token_start();
                if scan.next_token() == Some(Tok::RParen) {
                    return Err(error(
                        &scan,
                        close,
                        "PATTERN is empty; write PATTERN (()) for the empty pattern",
                    ));
                }
                scan.pos = start;
                let mut parser = PatternParser {
                    scan: &mut scan,
                    peeked: None,
                };
                let pattern = parser.pattern(0)?;
                let end = parser.expect_close()?;
                // The placeholder goes on the pattern's first character that is no line break.
                let first = (start..end)
                    .find(|&k| !matches!(chars[k], '\n' | '\r'))
                    .unwrap_or(start);
                blank.push((start, end, first));
                lifted.push(LiftedPattern {
                    pattern,
                    at: scan.location(first),
                });
            }
            _ => {}
        }
        after_match_recognize = false;
    }
    if blank.is_empty() {
        return Ok((sql.to_string(), lifted));
    }
    let mut out: Vec<char> = chars.clone();
    for (start, end, first) in blank {
        for c in out[start..end].iter_mut() {
            if *c != '\n' && *c != '\r' {
                *c = ' ';
            }
        }
        out[first] = '_';
    }
    Ok((out.into_iter().collect(), lifted))
}

/// A token of the statement text, as far as finding and parsing patterns needs.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A word or a quoted identifier (the quote, if any).
    Word(String, Option<char>),
    Number(String),
    LParen,
    RParen,
    /// Any other character outside literals and comments.
    Punct(char),
    /// A string literal or anything else opaque.
    Other,
}

/// A character scanner that skips white space, comments and string literals.
struct Scanner<'a> {
    chars: &'a [char],
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn new(chars: &'a [char]) -> Self {
        Scanner { chars, pos: 0 }
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).copied()
    }

    /// The 1-based line and column of character `at`.
    fn location(&self, at: usize) -> Location {
        let mut line = 1;
        let mut column = 1;
        for &c in &self.chars[..at.min(self.chars.len())] {
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        Location { line, column }
    }

    fn skip_space(&mut self) {
        loop {
            match (self.peek_at(0), self.peek_at(1)) {
                (Some(c), _) if c.is_whitespace() => self.pos += 1,
                (Some('-'), Some('-')) => {
                    while self.peek_at(0).is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                (Some('/'), Some('*')) => {
                    self.pos += 2;
                    while self.pos < self.chars.len()
                        && !(self.peek_at(0) == Some('*') && self.peek_at(1) == Some('/'))
                    {
                        self.pos += 1;
                    }
                    self.pos = (self.pos + 2).min(self.chars.len());
                }
                _ => return,
            }
        }
    }

    /// The start of the next token (after white space and comments).
    fn token_start(&mut self) -> usize {
        self.skip_space();
        self.pos
    }

    fn next_token(&mut self) -> Option<Tok> {
        self.skip_space();
        let c = self.peek_at(0)?;
        if c.is_alphabetic() || c == '_' {
            let start = self.pos;
            while self
                .peek_at(0)
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
            {
                self.pos += 1;
            }
            return Some(Tok::Word(
                self.chars[start..self.pos].iter().collect(),
                None,
            ));
        }
        if c.is_ascii_digit() {
            let start = self.pos;
            while self.peek_at(0).is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
            return Some(Tok::Number(self.chars[start..self.pos].iter().collect()));
        }
        self.pos += 1;
        Some(match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '"' | '`' => {
                let mut value = String::new();
                loop {
                    match self.peek_at(0) {
                        None => break,
                        Some(q) if q == c && self.peek_at(1) == Some(c) => {
                            value.push(c);
                            self.pos += 2;
                        }
                        Some(q) if q == c => {
                            self.pos += 1;
                            break;
                        }
                        Some(ch) => {
                            value.push(ch);
                            self.pos += 1;
                        }
                    }
                }
                Tok::Word(value, Some(c))
            }
            '\'' => {
                loop {
                    match self.peek_at(0) {
                        None => break,
                        Some('\'') if self.peek_at(1) == Some('\'') => self.pos += 2,
                        Some('\'') => {
                            self.pos += 1;
                            break;
                        }
                        Some('\\') => self.pos += 2,
                        Some(_) => self.pos += 1,
                    }
                }
                Tok::Other
            }
            other => Tok::Punct(other),
        })
    }
}

fn error(scan: &Scanner<'_>, at: usize, message: impl Into<String>) -> Error {
    Error::parse(message, Some(scan.location(at)))
}

/// Recursive descent over the pattern grammar:
/// `pattern = alternative { "|" alternative }`, `alternative = term { term }`,
/// `term = primary { quantifier [ "?" ] }`, `primary = var | "^" | "$" | "(" [ pattern ] ")"
/// | "{-" pattern "-}" | PERMUTE "(" pattern { "," pattern } ")"`.
struct PatternParser<'s, 'a> {
    scan: &'s mut Scanner<'a>,
    /// The next token and where it starts, once peeked.
    peeked: Option<(usize, Option<Tok>, usize)>,
}

impl PatternParser<'_, '_> {
    /// The next token without consuming it: (start, token).
    fn peek(&mut self) -> (usize, Option<Tok>) {
        if self.peeked.is_none() {
            let start = self.scan.token_start();
            let tok = self.scan.next_token();
            let end = self.scan.pos;
            self.scan.pos = start;
            self.peeked = Some((start, tok, end));
        }
        let (start, tok, _) = self.peeked.clone().unwrap_or((0, None, 0));
        (start, tok)
    }

    fn bump(&mut self) -> (usize, Option<Tok>) {
        let (start, tok) = self.peek();
        if let Some((_, _, end)) = self.peeked.take() {
            self.scan.pos = end;
        }
        (start, tok)
    }

    fn at_punct(&mut self, c: char) -> bool {
        self.peek().1 == Some(Tok::Punct(c))
    }

    /// `{-` or `-}` next.
    fn at_pair(&mut self, a: char, b: char) -> bool {
        let (start, tok) = self.peek();
        tok == Some(Tok::Punct(a)) && self.scan.chars.get(start + 1) == Some(&b)
    }

    fn unexpected(&mut self, what: &str) -> Error {
        let (start, tok) = self.peek();
        let found = match tok {
            None => "end of input".to_string(),
            Some(Tok::Word(w, _)) => format!("\"{w}\""),
            Some(Tok::Number(n)) => format!("\"{n}\""),
            Some(Tok::LParen) => "\"(\"".into(),
            Some(Tok::RParen) => "\")\"".into(),
            Some(Tok::Punct(c)) => format!("\"{c}\""),
            Some(Tok::Other) => "a string".into(),
        };
        error(
            self.scan,
            start,
            format!("expected {what} in PATTERN, found {found}"),
        )
    }

    /// The `)` that closes the pattern: returns where it is, and consumes it.
    fn expect_close(&mut self) -> Result<usize> {
        let (start, tok) = self.peek();
        if tok != Some(Tok::RParen) {
            return Err(self.unexpected("\")\""));
        }
        self.bump();
        Ok(start)
    }

    fn pattern(&mut self, depth: usize) -> Result<RowPattern> {
        if depth > MAX_NESTING {
            let (start, _) = self.peek();
            return Err(Error::too_complex(format!(
                "statement too complex: PATTERN nested more than {MAX_NESTING} deep"
            ))
            .at(Some(self.scan.location(start))));
        }
        let mut alternatives = vec![self.alternative(depth)?];
        while self.at_punct('|') {
            self.bump();
            alternatives.push(self.alternative(depth)?);
        }
        Ok(if alternatives.len() == 1 {
            alternatives.remove(0)
        } else {
            RowPattern::Alt(alternatives)
        })
    }

    fn alternative(&mut self, depth: usize) -> Result<RowPattern> {
        let mut terms = Vec::new();
        loop {
            let (_, tok) = self.peek();
            let ends = match &tok {
                None | Some(Tok::RParen) => true,
                Some(Tok::Punct('|')) | Some(Tok::Punct(',')) => true,
                Some(Tok::Punct('-')) => self.at_pair('-', '}'),
                _ => false,
            };
            if ends {
                break;
            }
            terms.push(self.term(depth)?);
        }
        if terms.is_empty() {
            return Err(self.unexpected("a pattern variable, \"(\", \"^\", \"$\" or \"{-\""));
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            RowPattern::Concat(terms)
        })
    }

    /// A primary and its quantifiers: each quantifier applies to all before it (`a*{2}` is
    /// `(a*){2}`), and a `?` right after a quantifier makes it reluctant.
    fn term(&mut self, depth: usize) -> Result<RowPattern> {
        let mut term = self.primary(depth)?;
        let mut stacked = depth;
        while let Some(mut q) = self.quantifier()? {
            stacked += 1;
            if stacked > MAX_NESTING {
                let (start, _) = self.peek();
                return Err(Error::too_complex(format!(
                    "statement too complex: PATTERN nested more than {MAX_NESTING} deep"
                ))
                .at(Some(self.scan.location(start))));
            }
            if self.at_punct('?') {
                self.bump();
                q.reluctant = true;
            }
            term = RowPattern::Repeat(Box::new(term), q);
        }
        Ok(term)
    }

    fn primary(&mut self, depth: usize) -> Result<RowPattern> {
        if self.at_pair('{', '-') {
            let (start, _) = self.bump();
            self.scan.pos = start + 2;
            self.peeked = None;
            let inner = self.pattern(depth + 1)?;
            if !self.at_pair('-', '}') {
                return Err(self.unexpected("\"-}\""));
            }
            let (start, _) = self.bump();
            self.scan.pos = start + 2;
            self.peeked = None;
            return Ok(RowPattern::Exclude(Box::new(inner)));
        }
        let (start, tok) = self.bump();
        match tok {
            Some(Tok::Punct('^')) => Ok(RowPattern::Start),
            Some(Tok::Punct('$')) => Ok(RowPattern::End),
            Some(Tok::LParen) => {
                if self.peek().1 == Some(Tok::RParen) {
                    self.bump();
                    return Ok(RowPattern::Group(Box::new(RowPattern::Concat(Vec::new()))));
                }
                let inner = self.pattern(depth + 1)?;
                self.expect_close()?;
                Ok(RowPattern::Group(Box::new(inner)))
            }
            Some(Tok::Word(w, None))
                if w.eq_ignore_ascii_case("PERMUTE") && self.peek().1 == Some(Tok::LParen) =>
            {
                self.bump();
                let mut items = vec![self.pattern(depth + 1)?];
                while self.at_punct(',') {
                    self.bump();
                    items.push(self.pattern(depth + 1)?);
                }
                self.expect_close()?;
                Ok(RowPattern::Permute(items))
            }
            Some(Tok::Word(w, quote)) => Ok(RowPattern::Var(Ident {
                value: w,
                quote_style: quote,
                span: span_at(self.scan, start),
            })),
            _ => {
                self.scan.pos = start;
                self.peeked = None;
                Err(self.unexpected("a pattern variable, \"(\", \"^\", \"$\" or \"{-\""))
            }
        }
    }

    /// `*`, `+`, `?`, or `{n}`, `{n,}`, `{,m}`, `{n,m}`, `{,}`; None if none follows.
    fn quantifier(&mut self) -> Result<Option<Quantifier>> {
        let q = |min, max| {
            Some(Quantifier {
                min,
                max,
                reluctant: false,
            })
        };
        let (start, tok) = self.peek();
        let out = match tok {
            Some(Tok::Punct('*')) => q(0, None),
            Some(Tok::Punct('+')) => q(1, None),
            Some(Tok::Punct('?')) => q(0, Some(1)),
            Some(Tok::Punct('{')) if !self.at_pair('{', '-') => {
                self.bump();
                let min = self.bound()?;
                let (min, max) = if self.at_punct(',') {
                    self.bump();
                    (min.unwrap_or(0), self.bound()?)
                } else {
                    let Some(n) = min else {
                        return Err(self.unexpected("a number or \",\""));
                    };
                    (n, Some(n))
                };
                if !self.at_punct('}') {
                    return Err(self.unexpected("\"}\""));
                }
                self.bump();
                if max.is_some_and(|m| m < min || m == 0) {
                    return Err(error(
                        self.scan,
                        start,
                        "quantifier matches nothing: its upper bound must be at least 1 and \
                         its lower bound",
                    ));
                }
                return Ok(q(min, max));
            }
            _ => None,
        };
        if out.is_some() {
            self.bump();
        }
        Ok(out)
    }

    /// A quantifier bound, if one is written.
    fn bound(&mut self) -> Result<Option<u32>> {
        let (start, tok) = self.peek();
        let Some(Tok::Number(n)) = tok else {
            return Ok(None);
        };
        self.bump();
        n.parse::<u32>().map(Some).map_err(|_| {
            error(
                self.scan,
                start,
                format!("quantifier bound {n} is too large"),
            )
        })
    }
}

/// A span for an identifier starting at character `at` (for error positions).
fn span_at(scan: &Scanner<'_>, at: usize) -> datafusion::sql::sqlparser::tokenizer::Span {
    use datafusion::sql::sqlparser::tokenizer::{Location as SpLocation, Span};
    let l = scan.location(at);
    let start = SpLocation::new(l.line, l.column);
    Span::new(start, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(sql: &str) -> RowPattern {
        let (_, mut p) = lift_patterns(sql).expect("parses");
        assert_eq!(p.len(), 1, "{sql}");
        p.remove(0).pattern
    }

    fn round_trip(pattern: &str) {
        let sql = format!(
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts PATTERN ({pattern}) DEFINE a AS true)"
        );
        let p = one(&sql);
        let again = one(&format!(
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts PATTERN ({p}) DEFINE a AS true)"
        ));
        assert_eq!(p, again, "{pattern} printed as {p}");
    }

    #[test]
    fn reads_what_sqlparser_does_not() {
        for p in [
            "() | A",
            "$A$",
            "^A^",
            "A$",
            "B{,}?",
            "B{,2}",
            "A {- {- B+ -} C+ -}",
            "A B+ {- ()* -} C+",
            " A {- B -}{1,2} {- C -}{1,2}",
            "(){5,} | B",
            "(B ()*)*?",
            "^+ | B",
            "PERMUTE(B, C)",
            "permute(a, b c)",
            "a \"b\"+ C+",
            "(A | B)+ LAST",
            "B??",
        ] {
            round_trip(p);
        }
    }

    #[test]
    fn blanks_the_pattern_keeping_positions() {
        let sql =
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts PATTERN ($A$\n b) DEFINE a AS true)";
        let (text, p) = lift_patterns(sql).expect("parses");
        assert_eq!(text.len(), sql.len());
        assert!(text.contains("PATTERN (_  \n  ) DEFINE"), "{text}");
        assert_eq!(
            p[0].at,
            Location {
                line: 1,
                column: 55
            }
        );
    }

    #[test]
    fn leaves_strings_and_other_text_alone() {
        let sql = "SELECT 'MATCH_RECOGNIZE (PATTERN (x' FROM s -- MATCH_RECOGNIZE (PATTERN ((\n";
        let (text, p) = lift_patterns(sql).expect("parses");
        assert!(p.is_empty());
        assert_eq!(text, sql);
    }

    #[test]
    fn errors_point_into_the_pattern() {
        let sql =
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts PATTERN (a {2,1}) DEFINE a AS true)";
        let e = lift_patterns(sql).unwrap_err();
        assert_eq!(e.sqlstate(), "42601");
        assert_eq!(
            e.location(),
            Some(Location {
                line: 1,
                column: 57
            })
        );
        let e = lift_patterns("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (a | ) DEFINE a AS true)")
            .unwrap_err();
        assert!(e.to_string().contains("found \")\""), "{e}");
        let e = lift_patterns("SELECT * FROM s MATCH_RECOGNIZE (PATTERN () DEFINE a AS true)")
            .unwrap_err();
        assert!(e.to_string().contains("PATTERN is empty"), "{e}");
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        let sql = format!("SELECT * FROM s MATCH_RECOGNIZE (PATTERN ({deep}) DEFINE a AS true)");
        let e = lift_patterns(&sql).unwrap_err();
        assert!(e.to_string().contains("too complex"), "{e}");
    }
}
