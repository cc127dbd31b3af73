//! `saql check`: parses and plans every statement of query files without a server, and
//! reports each error as `file:line:col: message`, the source line and a caret.

use std::path::PathBuf;
use std::process::ExitCode;

use saql::error::Location;
use saql::plan::{plan_continuous, Catalog, StreamDef, TableDef};
use saql::sql::{self, Statement};

use super::query_files::in_dependency_order;
use super::source::{describe, locate, split_statements, Problem, SourceStatement};

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
    // Streams and tables first, from every file, so that queries may use those declared
    // anywhere.
    let mut catalog = Catalog::default();
    for (file, text, s, stmt) in &parsed {
        let result = match stmt {
            Statement::CreateStream(cs) => {
                StreamDef::try_new(cs).and_then(|d| catalog.add_stream(d).map(|_| ()))
            }
            Statement::CreateTable(ct) => {
                TableDef::try_new(ct).and_then(|d| catalog.add_table(d).map(|_| ()))
            }
            _ => Ok(()),
        };
        if let Err(e) = result {
            problems.push(problem(file, text, locate(&e, s), &describe(&e)));
        }
    }
    let mut names = std::collections::HashSet::new();
    let mut checked = 0;
    // Views and queries next, each added to the catalog once planned, so that they may read
    // each other (in any order of the files).
    let mut creates = Vec::new();
    for (file, text, s, stmt) in &parsed {
        let name = match stmt {
            Statement::CreateQuery(cq) => saql::plan::catalog::normalize(&cq.name),
            Statement::CreateView(cv) => saql::plan::catalog::normalize_object(&cv.name),
            _ => continue,
        };
        if catalog.name_taken(&name) || !names.insert(name.clone()) {
            let e = saql::Error::duplicate("relation", &name);
            problems.push(problem(file, text, s.start, &describe(&e)));
        }
        creates.push((file, text, s, name, stmt));
    }
    let results = in_dependency_order(creates.len(), |i| {
        let (_, _, _, name, stmt) = &creates[i];
        match stmt {
            Statement::CreateQuery(cq) => {
                plan_continuous(&cq.query, &cq.clauses, &catalog)?.check_result_columns()?;
                if catalog.query(name).is_none() {
                    catalog.add_query(name.clone(), cq.clone())?;
                }
            }
            Statement::CreateView(cv) => {
                plan_continuous(&cv.query, &Default::default(), &catalog)?
                    .check_result_columns()?;
                if catalog.view(name).is_none() {
                    catalog.add_view(name.clone(), (**cv).clone())?;
                }
            }
            _ => {}
        }
        Ok(())
    });
    for ((file, text, s, _, _), result) in creates.iter().zip(results) {
        checked += 1;
        if let Err(e) = result {
            problems.push(problem(file, text, locate(&e, s), &describe(&e)));
        }
    }
    for (file, text, s, stmt) in &parsed {
        let query: Option<(&Box<_>, &sql::Clauses)> = match stmt {
            Statement::CreateQuery(_) | Statement::CreateView(_) => continue,
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

fn problem(file: &str, text: &str, location: Location, message: &str) -> Problem {
    Problem::new(file, text, location, message)
}
