//! Flink's canonical form of the window table functions,
//! `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTES))` (also HOP, CUMULATE and SESSION, the
//! latter with `TABLE t PARTITION BY k`), read as saql's `TUMBLE(t, ts, INTERVAL '1' MINUTES)`;
//! the table may be a subquery in parentheses (`TABLE(TUMBLE((SELECT ... UNION ALL SELECT
//! ...), DESCRIPTOR(ts), ...))`), read as saql's inline subquery.
//! sqlparser parses neither `TABLE t` as an argument nor `DESCRIPTOR`, so the tokens are
//! rewritten before parsing. Sessions are per GROUP BY key in saql, so a SESSION's
//! `PARTITION BY` is dropped; its keys belong in the GROUP BY, as Flink requires too.

use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::parser::is_word;

const WINDOWS: [&str; 4] = ["TUMBLE", "HOP", "CUMULATE", "SESSION"];

/// Rewrites every `TABLE(W(TABLE t [PARTITION BY ...], DESCRIPTOR(c), args...))` in `tokens`
/// into `W(t, c, args...)`; tokens of any other shape are left as they are.
pub fn rewrite(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !tokens.iter().any(|t| is_word(t, "DESCRIPTOR")) {
        return tokens;
    }
    // Whitespace is dropped (the parser skips it) so that the shape reads token by token.
    let mut tokens: Vec<TokenWithSpan> = tokens
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let mut i = 0;
    while i < tokens.len() {
        if let Some(replacement) = window_call(&tokens[i..]) {
            let (consumed, call) = replacement;
            tokens.splice(i..i + consumed, call);
        }
        i += 1;
    }
    tokens
}

/// The Flink form starting at `t[0]`: how many tokens it spans and saql's call for them.
fn window_call(t: &[TokenWithSpan]) -> Option<(usize, Vec<TokenWithSpan>)> {
    let tok = |i: usize| t.get(i).map(|t| &t.token);
    if !is_word(t.first()?, "TABLE") || tok(1) != Some(&Token::LParen) {
        return None;
    }
    let name = t.get(2)?;
    if !WINDOWS.iter().any(|w| is_word(name, w)) || tok(3) != Some(&Token::LParen) {
        return None;
    }
    // The table: `TABLE name`, or a subquery in parentheses (`TABLE (SELECT ...)` or
    // `(SELECT ...)`), read as saql's inline subquery.
    let keyword = is_word(t.get(4)?, "TABLE");
    let mut i = if keyword { 5 } else { 4 };
    let mut table = Vec::new();
    if tok(i) == Some(&Token::LParen) {
        let mut depth = 0usize;
        loop {
            match tok(i)? {
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                _ => {}
            }
            table.push(t[i].clone());
            i += 1;
            if depth == 0 {
                break;
            }
        }
    } else if keyword {
        // The table's name: words and dots up to PARTITION BY or the comma.
        while matches!(tok(i), Some(Token::Word(_) | Token::Period)) && !is_word(&t[i], "PARTITION")
        {
            table.push(t[i].clone());
            i += 1;
        }
    }
    if table.is_empty() {
        return None;
    }
    if is_word(t.get(i)?, "PARTITION") {
        // Skip `PARTITION BY a, b` up to the comma before DESCRIPTOR.
        while i < t.len() && !is_word(&t[i], "DESCRIPTOR") {
            i += 1;
        }
        i -= 1;
    }
    if tok(i) != Some(&Token::Comma)
        || !is_word(t.get(i + 1)?, "DESCRIPTOR")
        || tok(i + 2) != Some(&Token::LParen)
        || tok(i + 4) != Some(&Token::RParen)
    {
        return None;
    }
    let column = t.get(i + 3)?.clone();
    // The rest of the arguments, to the window's closing parenthesis, then TABLE's.
    let rest_start = i + 5;
    let mut depth = 1;
    let mut j = rest_start;
    while j < t.len() {
        match tok(j) {
            Some(Token::LParen) => depth += 1,
            Some(Token::RParen) => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        j += 1;
    }
    if tok(j) != Some(&Token::RParen) || tok(j + 1) != Some(&Token::RParen) {
        return None;
    }
    let mut call = vec![name.clone(), t[1].clone()];
    call.extend(table);
    call.push(TokenWithSpan::wrap(Token::Comma));
    call.push(column);
    call.extend(t[rest_start..=j].iter().cloned());
    Some((j + 2, call))
}

#[cfg(test)]
mod tests {
    use crate::sql::parse_one;

    fn same(flink: &str, saql: &str) {
        assert_eq!(
            parse_one(flink).unwrap_or_else(|e| panic!("{flink}: {e}")),
            parse_one(saql).unwrap()
        );
    }

    #[test]
    fn flink_window_tvfs_read_as_saql_windows() {
        same(
            "CREATE CONTINUOUS QUERY q AS SELECT host, COUNT(*) FROM TABLE(TUMBLE(TABLE s, \
             DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY host, window_start, window_end",
            "CREATE CONTINUOUS QUERY q AS SELECT host, COUNT(*) FROM TUMBLE(s, ts, \
             INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end",
        );
        same(
            "SELECT * FROM TABLE(HOP(TABLE public.s, DESCRIPTOR(ts), INTERVAL '1' MINUTE, \
             INTERVAL '5' MINUTE)) AS w",
            "SELECT * FROM HOP(public.s, ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS w",
        );
        same(
            "SELECT host, COUNT(*) FROM TABLE(SESSION(TABLE s PARTITION BY host, \
             DESCRIPTOR(ts), INTERVAL '5' MINUTE)) GROUP BY host, window_start, window_end",
            "SELECT host, COUNT(*) FROM SESSION(s, ts, INTERVAL '5' MINUTE) \
             GROUP BY host, window_start, window_end",
        );
        same(
            "SELECT window_end, COUNT(*) FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), \
             INTERVAL '1' MINUTE, INTERVAL '1' HOUR)) GROUP BY window_start, window_end",
            "SELECT window_end, COUNT(*) FROM CUMULATE(s, ts, INTERVAL '1' MINUTE, \
             INTERVAL '1' HOUR) GROUP BY window_start, window_end",
        );
        // A subquery as the table, with or without TABLE before it.
        same(
            "SELECT window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE (SELECT ts FROM a UNION ALL \
             SELECT ts FROM b), DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, \
             window_end",
            "SELECT window_end, COUNT(*) FROM TUMBLE((SELECT ts FROM a UNION ALL SELECT ts FROM \
             b), ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end",
        );
        same(
            "SELECT * FROM TABLE(HOP((SELECT ts, (k) FROM a), DESCRIPTOR(ts), INTERVAL '1' \
             MINUTE, INTERVAL '5' MINUTE))",
            "SELECT * FROM HOP((SELECT ts, (k) FROM a), ts, INTERVAL '1' MINUTE, INTERVAL '5' \
             MINUTE)",
        );
        // Other uses of TABLE stay as they were.
        same("SELECT * FROM s", "SELECT * FROM s");
    }
}
