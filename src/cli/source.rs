//! Query files as statements with their positions, for tools that report `file:line:col`.

use std::fmt;

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use saql::error::Location;

/// A problem in a query file: `file:line:col: message`, the source line and a caret.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The file, as given.
    pub file: String,
    /// Where in it.
    pub location: Location,
    line_text: String,
    message: String,
}

impl Problem {
    /// A problem at `location` of `file`, whose text is `text`.
    pub fn new(file: &str, text: &str, location: Location, message: &str) -> Problem {
        let line_text = text
            .lines()
            .nth(location.line.saturating_sub(1) as usize)
            .unwrap_or_default()
            .to_string();
        Problem {
            file: file.to_string(),
            location,
            line_text,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pad = " ".repeat(self.location.column.saturating_sub(1) as usize);
        write!(
            f,
            "{}:{}:{}: {}\n{}\n{pad}^",
            self.file, self.location.line, self.location.column, self.message, self.line_text
        )
    }
}

/// An error's message with its SQLSTATE, as the tools print it.
pub fn describe(e: &saql::Error) -> String {
    format!("{e} [{}]", e.sqlstate())
}

/// Where in a statement an error points: where the error says it applies in the statement's
/// text ([`saql::Error::location`], from the statement's token spans), else at the
/// statement's start.
pub fn locate(e: &saql::Error, s: &SourceStatement) -> Location {
    e.location().map_or(s.start, |l| s.absolute(l))
}

/// One statement of a file: its text and where it starts.
#[derive(Debug, Clone)]
pub struct SourceStatement {
    /// The statement's text, without the terminating `;`.
    pub text: String,
    /// Line and column of its first character in the file.
    pub start: Location,
}

impl SourceStatement {
    /// A location inside the statement's text, as a location in the file.
    pub fn absolute(&self, inner: Location) -> Location {
        if inner.line <= 1 {
            Location {
                line: self.start.line,
                column: self.start.column + inner.column.saturating_sub(1),
            }
        } else {
            Location {
                line: self.start.line + inner.line - 1,
                column: inner.column,
            }
        }
    }
}

/// Splits a file into statements at top-level semicolons (not inside strings or comments).
/// Returns the location of the problem if the file does not tokenize.
pub fn split_statements(text: &str) -> Result<Vec<SourceStatement>, Location> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(|e| Location {
            line: e.location.line.max(1),
            column: e.location.column.max(1),
        })?;
    // Byte offset of each line start, to cut statement texts out of the file.
    let mut line_starts = vec![0usize];
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            line_starts.push(i + 1);
        }
    }
    let offset = |line: u64, column: u64| -> usize {
        let start = line_starts
            .get(line.saturating_sub(1) as usize)
            .copied()
            .unwrap_or(text.len());
        let line_text = &text[start..];
        line_text
            .char_indices()
            .nth(column.saturating_sub(1) as usize)
            .map(|(i, _)| start + i)
            .unwrap_or(text.len())
    };
    let mut out = Vec::new();
    let mut first: Option<Location> = None;
    for t in &tokens {
        match &t.token {
            Token::Whitespace(_) => {}
            Token::SemiColon | Token::EOF => {
                if let Some(start) = first.take() {
                    let from = offset(start.line, start.column);
                    let to = if t.token == Token::EOF {
                        text.len()
                    } else {
                        offset(t.span.start.line, t.span.start.column)
                    };
                    out.push(SourceStatement {
                        text: text[from..to.max(from)].to_string(),
                        start,
                    });
                }
            }
            _ => {
                if first.is_none() {
                    first = Some(Location {
                        line: t.span.start.line,
                        column: t.span.start.column,
                    });
                }
            }
        }
    }
    if let Some(start) = first {
        let from = offset(start.line, start.column);
        out.push(SourceStatement {
            text: text[from..].to_string(),
            start,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_with_positions_ignoring_strings_and_comments() {
        let text = "-- a comment; not a split\nSELECT 'a;b' FROM s;\n\n  SHOW STREAMS";
        let stmts = split_statements(text).unwrap();
        assert_eq!(stmts.len(), 2);
        assert_eq!(stmts[0].text, "SELECT 'a;b' FROM s");
        assert_eq!(stmts[0].start, Location { line: 2, column: 1 });
        assert_eq!(stmts[1].text, "SHOW STREAMS");
        assert_eq!(stmts[1].start, Location { line: 4, column: 3 });
        assert_eq!(
            stmts[1].absolute(Location { line: 1, column: 6 }),
            Location { line: 4, column: 8 }
        );
        // An error that carries its place in the statement (the planner's, from the token
        // spans: the word s) is placed in the file; one without points at the statement.
        let missing =
            saql::Error::plan("42P01", "stream \"s\" does not exist").at(Some(Location {
                line: 1,
                column: 19,
            }));
        assert_eq!(
            locate(&missing, &stmts[0]),
            Location {
                line: 2,
                column: 19
            }
        );
        let other = saql::Error::Execution("failed".into());
        assert_eq!(locate(&other, &stmts[0]), stmts[0].start);
    }
}
