//! Query files as `saql run` and `saql test` load them: every statement parsed with its
//! position; CREATE STREAM, CREATE TABLE (and INSERTs of its rows), CREATE VIEW and CREATE
//! CONTINUOUS QUERY are kept, anything else, and every parse or planning error, is reported
//! as `saql check` reports it: `file:line:col: message [SQLSTATE]`, the source line and a
//! caret. Views and queries are created in the order they read each other.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast as sq;
use saql::error::sqlstate::UNDEFINED_TABLE;
use saql::error::Location;
use saql::plan::catalog::{normalize, normalize_object};
use saql::plan::{Catalog, StreamDef, TableDef};
use saql::sql::{self, CreateQuery, CreateStream, Statement};
use saql::{Engine, EngineConfig};

use super::source::{describe, locate, split_statements, Problem, SourceStatement};

/// One query file: its path as given and its text.
pub struct QueryFile {
    /// The path, for messages.
    pub path: String,
    /// The whole text.
    pub text: String,
}

/// A CREATE CONTINUOUS QUERY of a file.
pub struct QueryStatement {
    /// Index of its file in [`QueryFiles::files`].
    pub file: usize,
    /// Where it is.
    pub source: SourceStatement,
    /// The statement.
    pub create: CreateQuery,
    /// Its normalised name.
    pub name: String,
}

struct StreamStatement {
    file: usize,
    source: SourceStatement,
    create: CreateStream,
}

/// A CREATE VIEW of a file.
struct ViewStatement {
    file: usize,
    source: SourceStatement,
    create: Box<sq::CreateView>,
    name: String,
}

/// A CREATE TABLE, or an INSERT of a table's reference rows.
struct TableStatement {
    file: usize,
    source: SourceStatement,
    statement: Statement,
}

/// The streams and queries of a set of files.
pub struct QueryFiles {
    /// The files, in the order given.
    pub files: Vec<QueryFile>,
    /// Every declared stream.
    pub catalog: Catalog,
    /// The queries, in file order.
    pub queries: Vec<QueryStatement>,
    streams: Vec<StreamStatement>,
    tables: Vec<TableStatement>,
    views: Vec<ViewStatement>,
}

/// The `.sql` files of `paths`: files as given, directories expanded to their `*.sql` files
/// in name order.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "sql"))
                .collect();
            found.sort();
            out.extend(found);
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}

impl QueryFiles {
    /// Reads, splits and parses `paths`, and declares their streams. Returns every problem
    /// found, in file order, if there is any.
    pub fn load(paths: &[PathBuf], what: &str) -> Result<QueryFiles, Vec<String>> {
        let mut files = Vec::new();
        for path in paths {
            match std::fs::read_to_string(path) {
                Ok(text) => files.push(QueryFile {
                    path: display(path),
                    text,
                }),
                Err(e) => return Err(vec![format!("{}: {e}", path.display())]),
            }
        }
        let mut problems = Vec::new();
        let mut streams = Vec::new();
        let mut queries = Vec::new();
        let mut tables = Vec::new();
        let mut views = Vec::new();
        for (index, file) in files.iter().enumerate() {
            let stmts = match split_statements(&file.text) {
                Ok(stmts) => stmts,
                Err(at) => {
                    problems.push(problem(file, at, "unterminated string or comment"));
                    continue;
                }
            };
            for s in stmts {
                match sql::parse_one(&s.text) {
                    Ok(Statement::CreateStream(create)) => streams.push(StreamStatement {
                        file: index,
                        source: s,
                        create,
                    }),
                    Ok(Statement::CreateQuery(create)) => queries.push(QueryStatement {
                        file: index,
                        name: normalize(&create.name),
                        source: s,
                        create,
                    }),
                    Ok(Statement::CreateView(create)) => views.push(ViewStatement {
                        file: index,
                        name: normalize_object(&create.name),
                        source: s,
                        create,
                    }),
                    Ok(statement @ Statement::CreateTable(_)) => tables.push(TableStatement {
                        file: index,
                        source: s,
                        statement,
                    }),
                    Ok(Statement::Sql(stmt)) if matches!(*stmt, sq::Statement::Insert(_)) => tables
                        .push(TableStatement {
                            file: index,
                            source: s,
                            statement: Statement::Sql(stmt),
                        }),
                    Ok(_) => {
                        let message = format!(
                            "{what} runs only CREATE STREAM, CREATE TABLE, INSERT (of a \
                             table's rows), CREATE VIEW and CREATE CONTINUOUS QUERY statements; \
                             remove this one [0A000]"
                        );
                        problems.push(problem(file, s.start, &message));
                    }
                    Err(e) => {
                        let at = e.location().map(|l| s.absolute(l)).unwrap_or(s.start);
                        problems.push(problem(file, at, &describe(&e)));
                    }
                }
            }
        }
        let mut catalog = Catalog::default();
        for s in &streams {
            let added = StreamDef::try_new(&s.create).and_then(|d| catalog.add_stream(d));
            if let Err(e) = added {
                problems.push(problem(
                    &files[s.file],
                    locate(&e, &s.source),
                    &describe(&e),
                ));
            }
        }
        for s in &tables {
            let Statement::CreateTable(ct) = &s.statement else {
                continue;
            };
            let added = TableDef::try_new(ct).and_then(|d| catalog.add_table(d));
            if let Err(e) = added {
                problems.push(problem(
                    &files[s.file],
                    locate(&e, &s.source),
                    &describe(&e),
                ));
            }
        }
        // Views are named queries: later queries (and `saql compile`) read them by name.
        for v in &views {
            if let Err(e) = catalog.add_view(v.name.clone(), (*v.create).clone()) {
                problems.push(problem(
                    &files[v.file],
                    locate(&e, &v.source),
                    &describe(&e),
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems.iter().map(ToString::to_string).collect());
        }
        Ok(QueryFiles {
            files,
            catalog,
            queries,
            streams,
            tables,
            views,
        })
    }

    /// A fresh in-memory engine with every stream and the queries `chosen` picks (by index
    /// into [`QueryFiles::queries`]); problems are located in the files.
    pub fn engine(&self, chosen: impl Fn(usize) -> bool) -> Result<Engine, Vec<String>> {
        let config = EngineConfig {
            data_dir: None,
            retain_rows: 0,
            workers: 1,
            ..EngineConfig::default()
        };
        let engine = Engine::open(config).map_err(|e| vec![format!("saql: {e}")])?;
        let mut problems = Vec::new();
        let execute = |stmt: Statement| {
            futures::executor::block_on(engine.execute_statement(stmt, &[])).map(|_| ())
        };
        for s in &self.streams {
            if let Err(e) = execute(Statement::CreateStream(s.create.clone())) {
                problems.push(self.problem(s.file, &s.source, &e));
            }
        }
        // Tables, then their rows (the INSERTs in file order).
        let creates = self
            .tables
            .iter()
            .filter(|s| matches!(s.statement, Statement::CreateTable(_)));
        let inserts = self
            .tables
            .iter()
            .filter(|s| !matches!(s.statement, Statement::CreateTable(_)));
        for s in creates.chain(inserts) {
            if let Err(e) = execute(s.statement.clone()) {
                problems.push(self.problem(s.file, &s.source, &e));
            }
        }
        // The views and queries wanted, in the order they read each other.
        let wanted = self.with_upstream(chosen);
        let results = in_dependency_order(wanted.len(), |i| match wanted[i] {
            Named::View(v) => execute(Statement::CreateView(self.views[v].create.clone())),
            Named::Query(q) => execute(Statement::CreateQuery(self.queries[q].create.clone())),
        });
        for (&named, result) in wanted.iter().zip(results) {
            if let Err(e) = result {
                let (file, source) = match named {
                    Named::View(v) => (self.views[v].file, &self.views[v].source),
                    Named::Query(q) => (self.queries[q].file, &self.queries[q].source),
                };
                problems.push(self.problem(file, source, &e));
            }
        }
        if problems.is_empty() {
            Ok(engine)
        } else {
            Err(problems)
        }
    }

    /// The queries `chosen` picks and the views and queries they read, directly or not (one
    /// whose name appears as a word in the text of one read): views first, each list in file
    /// order.
    fn with_upstream(&self, chosen: impl Fn(usize) -> bool) -> Vec<Named> {
        let named: Vec<(Named, &str, &str)> = self
            .views
            .iter()
            .enumerate()
            .map(|(i, v)| (Named::View(i), v.name.as_str(), v.source.text.as_str()))
            .chain(
                self.queries
                    .iter()
                    .enumerate()
                    .map(|(i, q)| (Named::Query(i), q.name.as_str(), q.source.text.as_str())),
            )
            .collect();
        let mut wanted: Vec<bool> = named
            .iter()
            .map(|(n, _, _)| matches!(n, Named::Query(q) if chosen(*q)))
            .collect();
        let mut todo: Vec<usize> = (0..wanted.len()).filter(|&i| wanted[i]).collect();
        while let Some(i) = todo.pop() {
            let text = named[i].2.to_lowercase();
            let words: HashSet<&str> = text
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .collect();
            for (j, (_, name, _)) in named.iter().enumerate() {
                if !wanted[j] && words.contains(name) {
                    wanted[j] = true;
                    todo.push(j);
                }
            }
        }
        (0..wanted.len())
            .filter(|&i| wanted[i])
            .map(|i| named[i].0)
            .collect()
    }

    /// Fills the catalog's tables with the rows their INSERTs give (ON CONFLICT as saql
    /// applies it), for a program that must hold them (`saql compile --target flink`).
    pub fn fill_tables(&self) -> Result<(), Vec<String>> {
        if self.catalog.tables().next().is_none() {
            return Ok(());
        }
        let engine = self.engine(|_| false)?;
        for table in self.catalog.tables() {
            let rows = engine
                .execute_blocking(&format!("SELECT * FROM \"{}\"", table.name))
                .and_then(|results| {
                    let mut batches = Vec::new();
                    for r in results {
                        if let saql::StatementResult::Rows { batches: b, .. } =
                            futures::executor::block_on(r.collect())?
                        {
                            batches.extend(b);
                        }
                    }
                    Ok(batches)
                })
                .and_then(|batches| {
                    let schema = table.store.schema().clone();
                    let batches = batches
                        .into_iter()
                        .map(|b| {
                            RecordBatch::try_new(schema.clone(), b.columns().to_vec())
                                .map_err(saql::Error::from)
                        })
                        .collect::<saql::error::Result<Vec<_>>>()?;
                    table.store.restore(&batches, Default::default(), 0)
                });
            if let Err(e) = rows {
                return Err(vec![format!("saql: table \"{}\": {e}", table.name)]);
            }
        }
        Ok(())
    }

    /// Where each statement of file `file` ends (line and column of its last character),
    /// in order, with the index into [`QueryFiles::queries`] of those that are queries.
    pub fn statement_ends(&self, file: usize) -> Vec<(Location, Option<usize>)> {
        let streams = self
            .streams
            .iter()
            .filter(|s| s.file == file)
            .map(|s| (end_of(&s.source), None));
        let views = self
            .views
            .iter()
            .filter(|v| v.file == file)
            .map(|v| (end_of(&v.source), None));
        let queries = self
            .queries
            .iter()
            .enumerate()
            .filter(|(_, q)| q.file == file)
            .map(|(i, q)| (end_of(&q.source), Some(i)));
        let mut ends: Vec<(Location, Option<usize>)> =
            streams.chain(views).chain(queries).collect();
        ends.sort_by_key(|(l, _)| (l.line, l.column));
        ends
    }

    /// A planning or execution error of a statement, located in its file.
    fn problem(&self, file: usize, source: &SourceStatement, e: &saql::Error) -> String {
        problem(&self.files[file], locate(e, source), &describe(e)).to_string()
    }
}

/// A view or a query of the files, by its index in its list.
#[derive(Debug, Clone, Copy)]
enum Named {
    View(usize),
    Query(usize),
}

/// The location of the last character of a statement.
fn end_of(s: &SourceStatement) -> Location {
    let text = s.text.trim_end();
    let newlines = text.matches('\n').count() as u64;
    let last_line = text.rsplit('\n').next().unwrap_or_default();
    let chars = last_line.chars().count() as u64;
    if newlines == 0 {
        Location {
            line: s.start.line,
            column: s.start.column + chars.saturating_sub(1),
        }
    } else {
        Location {
            line: s.start.line + newlines,
            column: chars.max(1),
        }
    }
}

/// Runs `attempt` on items `0..n` so that queries may read queries defined after them: an
/// item that fails with 42P01 (it reads something not there yet) is tried again after the
/// others, for as long as a pass makes progress. Returns each item's last result.
pub fn in_dependency_order(
    n: usize,
    mut attempt: impl FnMut(usize) -> saql::Result<()>,
) -> Vec<saql::Result<()>> {
    let mut results: Vec<Option<saql::Result<()>>> = (0..n).map(|_| None).collect();
    let mut pending: Vec<usize> = (0..n).collect();
    loop {
        let before = pending.len();
        let mut waiting = Vec::new();
        for i in pending {
            let result = attempt(i);
            let undefined = matches!(&result, Err(e) if e.sqlstate() == UNDEFINED_TABLE);
            if undefined {
                waiting.push(i);
            }
            results[i] = Some(result);
        }
        if waiting.is_empty() || waiting.len() == before {
            break;
        }
        pending = waiting;
    }
    results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
}

/// A path as messages show it.
pub fn display(path: &Path) -> String {
    path.display().to_string()
}

fn problem(file: &QueryFile, location: Location, message: &str) -> Problem {
    Problem::new(&file.path, &file.text, location, message)
}
