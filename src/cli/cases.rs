//! Test cases written in the comments of a query file (the format is described in
//! [`super::test`]): the file's `--` comments are found with the SQL tokenizer, attached to
//! the statement they precede or sit in, and read as `test:`, `input STREAM:` and `expect:`
//! directives with indented data lines.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Whitespace};
use saql::error::Location;

/// A line of a file: its 1-based number and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// 1-based line number in the file.
    pub number: u64,
    /// The text, without indentation or trailing white space.
    pub text: String,
}

/// The rows of one `input STREAM:` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputBlock {
    /// The stream, as written.
    pub stream: String,
    /// The line of the `input` directive.
    pub line: u64,
    /// The CSV lines: a header, then rows.
    pub lines: Vec<Line>,
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// `expect: nothing`: the query stays silent.
    Nothing,
    /// `expect:` and CSV lines: a header naming result columns, then rows.
    Rows {
        /// The line of the `expect:` directive.
        line: u64,
        /// The CSV lines.
        lines: Vec<Line>,
    },
}

/// One test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Its name, from `test: NAME`.
    pub name: String,
    /// The line of its `test:` directive.
    pub line: u64,
    /// Its inputs, in the order written.
    pub inputs: Vec<InputBlock>,
    /// Its expectation, if it has one.
    pub expect: Option<Expect>,
    /// The first thing wrong with how it is written: a line and a message.
    pub error: Option<(u64, String)>,
}

/// Where the data lines that follow go.
#[derive(Clone, Copy)]
enum Block {
    None,
    Input,
    Expect,
}

/// The `--` comments of a file as lines (text after the dashes), with where each starts;
/// `None` if the file does not tokenize (`saql check` reports that).
pub fn comments(text: &str) -> Option<Vec<(Location, String)>> {
    let tokens = Tokenizer::new(&GenericDialect {}, text)
        .tokenize_with_location()
        .ok()?;
    Some(
        tokens
            .into_iter()
            .filter_map(|t| match t.token {
                Token::Whitespace(Whitespace::SingleLineComment { comment, prefix })
                    if prefix == "--" =>
                {
                    let at = Location {
                        line: t.span.start.line,
                        column: t.span.start.column,
                    };
                    Some((at, comment.trim_end_matches(['\n', '\r']).to_string()))
                }
                _ => None,
            })
            .collect(),
    )
}

/// Reads the test cases in comment lines (`(line number, text after --)`); lines before the
/// first `test:` are ordinary comments.
pub fn parse_cases(comments: &[(u64, String)]) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut block = Block::None;
    for (number, raw) in comments {
        let number = *number;
        let indent = raw.len() - raw.trim_start().len();
        let text = raw.trim();
        if indent <= 1 {
            if let Some(name) = text.strip_prefix("test:") {
                let mut case = Case {
                    name: name.trim().to_string(),
                    line: number,
                    inputs: Vec::new(),
                    expect: None,
                    error: None,
                };
                if case.name.is_empty() {
                    case.name = format!("line {number}");
                    case.error = Some((number, "the test case has no name".into()));
                }
                cases.push(case);
                block = Block::None;
                continue;
            }
            let Some(case) = cases.last_mut() else {
                continue;
            };
            block = directive(case, number, text);
            continue;
        }
        let Some(case) = cases.last_mut() else {
            continue;
        };
        let line = Line {
            number,
            text: text.to_string(),
        };
        match block {
            Block::Input => {
                if let Some(input) = case.inputs.last_mut() {
                    input.lines.push(line);
                }
            }
            Block::Expect => {
                if let Some(Expect::Rows { lines, .. }) = &mut case.expect {
                    lines.push(line);
                }
            }
            Block::None => fail(
                case,
                number,
                "an indented line outside an input or expect block; \
                 a note goes after `--` and one space",
            ),
        }
    }
    for case in &mut cases {
        if case.expect.is_none() {
            let line = case.line;
            fail(case, line, "the test case has no `expect:` block");
        }
        for input in case.inputs.clone() {
            if input.lines.is_empty() {
                fail(case, input.line, "an input block needs a CSV header line");
            }
        }
        if let Some(Expect::Rows { line, lines }) = case.expect.clone() {
            if lines.is_empty() {
                fail(
                    case,
                    line,
                    "an expect block needs a CSV header line (or write `expect: nothing`)",
                );
            }
        }
    }
    cases
}

/// Applies a directive (or a note) line to the case; returns the block that follows.
fn directive(case: &mut Case, number: u64, text: &str) -> Block {
    if let Some(rest) = text.strip_prefix("input") {
        if rest.starts_with([' ', '\t', ':']) {
            let stream = rest.trim().strip_suffix(':').map(str::trim);
            match stream {
                Some(stream) if !stream.is_empty() => {
                    case.inputs.push(InputBlock {
                        stream: stream.to_string(),
                        line: number,
                        lines: Vec::new(),
                    });
                    return Block::Input;
                }
                _ => fail(case, number, "write an input block as `input STREAM:`"),
            }
            return Block::None;
        }
    }
    if let Some(rest) = text.strip_prefix("expect:") {
        if case.expect.is_some() {
            fail(case, number, "a test case has one `expect:` block");
            return Block::None;
        }
        match rest.trim() {
            "" => {
                case.expect = Some(Expect::Rows {
                    line: number,
                    lines: Vec::new(),
                });
                return Block::Expect;
            }
            "nothing" => case.expect = Some(Expect::Nothing),
            _ => fail(
                case,
                number,
                "write `expect:` with CSV lines below it, or `expect: nothing`",
            ),
        }
    }
    // Anything else is a note; it ends the block above it.
    Block::None
}

fn fail(case: &mut Case, line: u64, message: &str) {
    if case.error.is_none() {
        case.error = Some((line, message.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<(u64, String)> {
        comments(text)
            .unwrap()
            .into_iter()
            .map(|(at, text)| (at.line, text))
            .collect()
    }

    #[test]
    fn reads_cases_with_notes_and_blocks() {
        let text = "\
-- A query.
-- test: fires
-- input s:
--   ts,x
--   2024-01-01 00:00:01,5
-- input t:
--   ts
-- expect:
--   x,n
--   5,1
-- (5 is the only value)
-- test: silent
-- expect: nothing
SELECT 1;
";
        let cases = parse_cases(&lines(text));
        assert_eq!(cases.len(), 2);
        let fires = &cases[0];
        assert_eq!(fires.name, "fires");
        assert_eq!(fires.error, None);
        assert_eq!(fires.inputs.len(), 2);
        assert_eq!(fires.inputs[0].stream, "s");
        assert_eq!(fires.inputs[0].lines[1].number, 5);
        assert_eq!(fires.inputs[0].lines[1].text, "2024-01-01 00:00:01,5");
        assert_eq!(
            fires.expect,
            Some(Expect::Rows {
                line: 8,
                lines: vec![
                    Line {
                        number: 9,
                        text: "x,n".into()
                    },
                    Line {
                        number: 10,
                        text: "5,1".into()
                    }
                ]
            })
        );
        assert_eq!(cases[1].expect, Some(Expect::Nothing));
        assert_eq!(cases[1].error, None);
    }

    #[test]
    fn reports_malformed_cases() {
        let cases = parse_cases(&lines("-- test: a\n-- input s\n--   ts\n"));
        assert_eq!(
            cases[0].error,
            Some((2, "write an input block as `input STREAM:`".into()))
        );
        let cases = parse_cases(&lines("-- test: a\n-- input s:\n--   ts\n"));
        assert_eq!(
            cases[0].error,
            Some((1, "the test case has no `expect:` block".into()))
        );
        let cases = parse_cases(&lines("-- test: a\n-- expect: none\n"));
        assert!(cases[0].error.as_ref().unwrap().1.contains("nothing"));
    }
}
