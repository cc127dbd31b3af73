//! Statement complexity checks, run before anything recurses over a statement: its size,
//! the nesting of its parentheses (on the tokens, iteratively) and the depth of its
//! expression trees (on the AST, stopping at the bound). A statement past a bound fails with
//! 54001, naming the bound, instead of overflowing a thread's stack.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self as sq, Visit, Visitor};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::ast::{ExplainTarget, Statement};
use crate::error::{Error, Result};
use crate::limits::{MAX_EXPR_DEPTH, MAX_NESTING, MAX_PREFIX_RUN, MAX_STATEMENT_BYTES};

/// Refuses statement text longer than [`MAX_STATEMENT_BYTES`].
pub fn check_size(sql: &str) -> Result<()> {
    if sql.len() > MAX_STATEMENT_BYTES {
        return Err(Error::too_complex(format!(
            "statement too long: {} bytes, the limit is {MAX_STATEMENT_BYTES} bytes; \
             send rows with COPY or in several INSERTs",
            sql.len()
        )));
    }
    Ok(())
}

/// Refuses tokens nested deeper than [`MAX_NESTING`] or with an operator chain that would
/// make an expression deeper than a few times [`MAX_EXPR_DEPTH`] (the exact depth is
/// checked on the AST by [`check_depth`]; this bounds the tree the parser builds first).
pub fn check_tokens(tokens: &[TokenWithSpan]) -> Result<()> {
    let chain_limit = 4 * MAX_EXPR_DEPTH;
    // Per open parenthesis: operators chained in its current argument, and the deepest
    // argument so far.
    let mut levels: Vec<(usize, usize)> = vec![(0, 0)];
    // Operators in a row with no operand between them (`NOT NOT ...`, `- - ...`): each is a
    // level of recursion in sqlparser.
    let mut run = 0usize;
    for t in tokens {
        if is_operator(&t.token) {
            run += 1;
            if run > MAX_PREFIX_RUN {
                return Err(Error::too_complex(format!(
                    "statement too complex: more than {MAX_PREFIX_RUN} operators in a row"
                )));
            }
        } else if !matches!(t.token, Token::Whitespace(_)) {
            run = 0;
        }
        match &t.token {
            Token::LParen | Token::LBracket | Token::LBrace => {
                if levels.len() > MAX_NESTING {
                    return Err(nesting_error());
                }
                levels.push((0, 0));
            }
            Token::RParen | Token::RBracket | Token::RBrace if levels.len() > 1 => {
                let (chain, deepest) = levels.pop().unwrap_or_default();
                if let Some(outer) = levels.last_mut() {
                    outer.0 += chain.max(deepest) + 1;
                }
            }
            Token::Comma | Token::SemiColon => {
                if let Some(l) = levels.last_mut() {
                    l.1 = l.1.max(l.0);
                    l.0 = 0;
                }
            }
            token if is_operator(token) => {
                if let Some(l) = levels.last_mut() {
                    l.0 += 1;
                }
            }
            _ => {}
        }
        if levels.last().is_some_and(|l| l.0 > chain_limit) {
            return Err(depth_error());
        }
    }
    Ok(())
}

fn is_operator(token: &Token) -> bool {
    match token {
        Token::Word(w) => matches!(
            w.keyword,
            Keyword::AND
                | Keyword::OR
                | Keyword::NOT
                | Keyword::IS
                | Keyword::LIKE
                | Keyword::ILIKE
                | Keyword::IN
                | Keyword::BETWEEN
                | Keyword::COLLATE
                | Keyword::AT
        ),
        Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::Whitespace(_)
        | Token::Period
        | Token::Colon
        | Token::Comma
        | Token::SemiColon
        | Token::LParen
        | Token::RParen
        | Token::LBracket
        | Token::RBracket
        | Token::LBrace
        | Token::RBrace
        | Token::EOF => false,
        // A lone `?` is a PATTERN quantifier.
        Token::Placeholder(p) => p == "?",
        _ => true,
    }
}

/// Refuses a statement with an expression deeper than [`MAX_EXPR_DEPTH`].
pub fn check_depth(stmt: &Statement) -> Result<()> {
    let mut v = Depth { depth: 0 };
    let flow = match stmt {
        Statement::Sql(s) => s.visit(&mut v),
        Statement::CreateQuery(cq) => cq.query.visit(&mut v),
        Statement::Explain { target, .. } => match target {
            ExplainTarget::Create(cq) => cq.query.visit(&mut v),
            ExplainTarget::Query(q, _) => q.visit(&mut v),
            ExplainTarget::Named(_) => ControlFlow::Continue(()),
        },
        Statement::DeclareCursor { target, .. } => return check_depth(target),
        _ => ControlFlow::Continue(()),
    };
    match flow {
        ControlFlow::Break(()) => Err(depth_error()),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Counts the nesting of expressions and queries; stops the walk past the bound, so the
/// walk itself never recurses deeper than it.
struct Depth {
    depth: usize,
}

impl Depth {
    fn enter(&mut self) -> ControlFlow<()> {
        self.depth += 1;
        if self.depth > MAX_EXPR_DEPTH {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

impl Visitor for Depth {
    type Break = ();

    fn pre_visit_expr(&mut self, _: &sq::Expr) -> ControlFlow<()> {
        self.enter()
    }

    fn post_visit_expr(&mut self, _: &sq::Expr) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, _: &sq::Query) -> ControlFlow<()> {
        self.enter()
    }

    fn post_visit_query(&mut self, _: &sq::Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

fn nesting_error() -> Error {
    Error::too_complex(format!(
        "statement too complex: parentheses nested more than {MAX_NESTING} deep"
    ))
}

fn depth_error() -> Error {
    Error::too_complex(format!(
        "statement too complex: an expression is more than {MAX_EXPR_DEPTH} operators deep; \
         split it or sum the terms in a subquery"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parse;

    /// Parses on a thread with the server's stack: in a debug build sqlparser alone needs
    /// about 70 KiB per level of `NOT NOT ...`, past a 2 MiB stack at 30.
    fn sqlstate(sql: &str) -> Option<&'static str> {
        let sql = sql.to_string();
        crate::spawn::thread("saql-test-parse", move || {
            parse(&sql).err().map(|e| e.sqlstate())
        })
        .unwrap()
        .join()
        .unwrap()
    }

    #[test]
    fn deep_chains_and_nesting_are_refused_with_54001() {
        let sum = vec!["1"; 1000].join("+");
        assert_eq!(sqlstate(&format!("SELECT {sum}")), Some("54001"));
        let sum = vec!["1"; 100_000].join("+");
        assert_eq!(sqlstate(&format!("SELECT {sum}")), Some("54001"));
        let nested = format!("SELECT {}1{}", "(".repeat(3000), ")".repeat(3000));
        assert_eq!(sqlstate(&nested), Some("54001"));
        let casts = format!("SELECT 1{}", "::int".repeat(2000));
        assert_eq!(sqlstate(&casts), Some("54001"));
        let nots = format!("SELECT {}true", "NOT ".repeat(80));
        assert_eq!(sqlstate(&nots), Some("54001"));
        let parens = format!("SELECT {}1{}", "(".repeat(80), ")".repeat(80));
        assert_eq!(sqlstate(&parens), Some("54001"));
        let stars = format!(
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts PATTERN (a{}) DEFINE a AS true)",
            "*?".repeat(3000)
        );
        assert_eq!(sqlstate(&stars), Some("54001"));
        let casts = format!("SELECT 1{}", "::int".repeat(2000));
        assert_eq!(sqlstate(&casts), Some("54001"));
        let long = format!("SELECT '{}'", "x".repeat(MAX_STATEMENT_BYTES));
        assert_eq!(sqlstate(&long), Some("54001"));
    }

    #[test]
    fn ordinary_statements_pass() {
        let sum = vec!["v"; 150].join(" + ");
        assert_eq!(sqlstate(&format!("SELECT * FROM s WHERE {sum} > 0")), None);
        let nots = format!("SELECT {}true", "NOT ".repeat(20));
        assert_eq!(sqlstate(&nots), None);
        let values = vec!["(1, 'a', -2)"; 5000].join(", ");
        assert_eq!(sqlstate(&format!("INSERT INTO s VALUES {values}")), None);
        let ands = vec!["x = 1"; 200].join(" AND ");
        assert_eq!(sqlstate(&format!("SELECT * FROM s WHERE {ands}")), None);
    }
}
