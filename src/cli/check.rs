//! `saql check`: parses and plans every statement of query files without a server, and
//! reports each error as `file:line:col: message`, the source line and a caret.

use std::path::PathBuf;
use std::process::ExitCode;

use saql::error::Location;
use saql::plan::{plan_continuous, Catalog, StreamDef};
use saql::sql::{self, Statement};

use super::source::{split_statements, SourceStatement};

/// One problem found in a file.
struct Problem {
    file: String,
    location: Location,
    line_text: String,
    message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pad = " ".repeat(self.location.column.saturating_sub(1) as usize);
        write!(
            f,
            "{}:{}:{}: {}\n{}\n{pad}^",
            self.file, self.location.line, self.location.column, self.message, self.line_text
        )
    }
}

/// Checks `files`; prints problems to stderr and a summary to stdout.
pub fn run(files: &[PathBuf]) -> ExitCode {
    let mut problems = Vec::new();
    let mut sources = Vec::new();
    for path in files {
        match std::fs::read_to_string(path) {
            Ok(text) => sources.push((path.display().to_string(), text)),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let mut parsed: Vec<(String, String, SourceStatement, Statement)> = Vec::new();
    for (file, text) in &sources {
        match split_statements(text) {
            Err(loc) => problems.push(problem(file, text, loc, "unterminated string or comment")),
            Ok(stmts) => {
                for s in stmts {
                    match sql::parse_one(&s.text) {
                        Ok(stmt) => parsed.push((file.clone(), text.clone(), s, stmt)),
                        Err(e) => {
                            let loc = e.location().map(|l| s.absolute(l)).unwrap_or(s.start);
                            problems.push(problem(file, text, loc, &describe(&e)));
                        }
                    }
                }
            }
        }
    }
    // Streams first, from every file, so that queries may use streams declared anywhere.
    let mut catalog = Catalog::default();
    for (file, text, s, stmt) in &parsed {
        if let Statement::CreateStream(cs) = stmt {
            let result = StreamDef::try_new(cs).and_then(|d| catalog.add_stream(d).map(|_| ()));
            if let Err(e) = result {
                problems.push(problem(file, text, locate(&e, s), &describe(&e)));
            }
        }
    }
    let mut names = std::collections::HashSet::new();
    let mut checked = 0;
    for (file, text, s, stmt) in &parsed {
        let query: Option<(&Box<_>, &sql::Clauses)> = match stmt {
            Statement::CreateQuery(cq) => {
                let name = saql::plan::catalog::normalize(&cq.name);
                if catalog.stream(&name).is_some() || !names.insert(name.clone()) {
                    let e = saql::Error::duplicate("relation", &name);
                    problems.push(problem(file, text, s.start, &describe(&e)));
                }
                Some((&cq.query, &cq.clauses))
            }
            Statement::Explain {
                target: sql::ExplainTarget::Create(cq),
                ..
            } => Some((&cq.query, &cq.clauses)),
            Statement::Explain {
                target: sql::ExplainTarget::Query(q, c),
                ..
            } => Some((q, c)),
            _ => None,
        };
        checked += 1;
        if let Some((q, clauses)) = query {
            if let Err(e) = plan_continuous(q, clauses, &catalog) {
                problems.push(problem(file, text, locate(&e, s), &describe(&e)));
            }
        }
    }
    let order = |file: &str| sources.iter().position(|(f, _)| f == file).unwrap_or(0);
    problems.sort_by_key(|p| (order(&p.file), p.location.line, p.location.column));
    for p in &problems {
        eprintln!("{p}");
    }
    if problems.is_empty() {
        println!("ok: {checked} statements in {} files", sources.len());
        ExitCode::SUCCESS
    } else {
        eprintln!("{} error(s)", problems.len());
        ExitCode::FAILURE
    }
}

fn describe(e: &saql::Error) -> String {
    format!("{e} [{}]", e.sqlstate())
}

fn problem(file: &str, text: &str, location: Location, message: &str) -> Problem {
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

/// Where in the statement a planning error points: at the parse location if it has one, at
/// the first mention of a quoted name in the message (`column "x"`, `stream "s"`), else at
/// the statement's start.
fn locate(e: &saql::Error, s: &SourceStatement) -> Location {
    if let Some(l) = e.location() {
        return s.absolute(l);
    }
    let message = e.to_string();
    if let Some(name) = message.split('"').nth(1) {
        if let Some(at) = s.find_word(name) {
            return at;
        }
    }
    s.start
}
