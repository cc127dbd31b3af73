//! `saql test`: runs the test cases written in query files.
//!
//! A test case is a run of `--` comment lines just before (or inside) a
//! `CREATE CONTINUOUS QUERY` statement:
//!
//! ```sql
//! -- test: ten failures within a minute fire
//! -- input proc_events:
//! --   ts,host,user_name,op
//! --   2024-01-01 00:00:01,web-1,root,login_failed
//! --   ...
//! -- expect:
//! --   host,user_name,window_end,failures
//! --   web-1,root,2024-01-01 00:01:00,10
//! -- (a note: any comment line that is not a directive nor indented)
//! --
//! -- test: nine failures stay silent
//! -- input proc_events:
//! --   ...
//! -- expect: nothing
//! CREATE CONTINUOUS QUERY failed_logins AS ...
//! ```
//!
//! - Directives sit after `--` and at most one space: `test: NAME` starts a case, which runs
//!   to the next `test:` or to the statement; `input STREAM:` and `expect:` open a block.
//! - Data lines are indented (at least two spaces after `--`) and belong to the block above;
//!   indentation and trailing white space are dropped. Any other comment line is a note and
//!   closes the block. Comments before the first `test:` are ordinary comments.
//! - `input STREAM:` is CSV as `saql run` reads it: a header naming some of the stream's
//!   columns (the others are NULL), then rows (an unquoted empty field is NULL). A case may
//!   have several inputs, for one or more streams; they are merged in event-time order.
//! - `expect:` is CSV: a header naming some or all of the query's result columns, in any
//!   order, then the rows. The rows the query produces, cut down to those columns and
//!   written as `saql run` writes them (timestamps `YYYY-MM-DD HH:MM:SS[.fraction]`, NULL an
//!   empty field, the empty string `""`), must be the expected rows as a multiset: order is
//!   ignored, duplicates count. `expect: nothing` means the query produces no row.
//!
//! Streams come from the CREATE STREAM statements of all the files given (a directory
//! stands for its `*.sql` files). Each case runs in a fresh engine with those streams, its
//! query and the queries it reads (in any file order); the end of input closes every window. One line is printed per case,
//! `ok   <file>: <query>: <case>` or `FAIL <file>: <query>: <case>` followed by indented
//! lines with the missing and unexpected rows or the error, and at the end a line
//! `N passed, N failed`. The exit status is 1 if anything failed, or if a file has errors
//! (reported as `saql check` reports them, each counted as a failure).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use datafusion::arrow::record_batch::RecordBatch;

use super::cases::{comments, parse_cases, Case, Expect, Line};
use super::csv_text::{batch_rows, record_text, split_record, Row};
use super::input::{BadRows, Format, Input};
use super::query_files::{expand, QueryFiles};
use super::replay::{Replay, ReplayError};

/// Runs every test case in `files`.
pub fn run(files: &[PathBuf]) -> ExitCode {
    let paths = match expand(files) {
        Ok(paths) => paths,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let files = match QueryFiles::load(&paths, "saql test") {
        Ok(files) => files,
        Err(problems) => {
            for p in &problems {
                eprintln!("{p}");
            }
            println!("0 passed, {} failed", problems.len());
            return ExitCode::FAILURE;
        }
    };
    let (mut passed, mut failed) = (0, 0);
    for (index, file) in files.files.iter().enumerate() {
        let Some(comments) = comments(&file.text) else {
            continue; // QueryFiles::load has reported it.
        };
        let ends = files.statement_ends(index);
        // Each comment belongs to the first statement that ends after it.
        let mut groups: Vec<Vec<(u64, String)>> = vec![Vec::new(); ends.len() + 1];
        for (at, text) in comments {
            let target =
                ends.partition_point(|(end, _)| (end.line, end.column) < (at.line, at.column));
            groups[target].push((at.line, text));
        }
        for (target, group) in groups.iter().enumerate() {
            let cases = parse_cases(group);
            let query = ends.get(target).and_then(|(_, q)| *q);
            for case in &cases {
                let outcome = match query {
                    Some(q) => run_case(&files, q, case),
                    None => Err(vec![format!(
                        "{}:{}: a test case must come just before a CREATE CONTINUOUS QUERY",
                        file.path, case.line
                    )]),
                };
                let query_name = query.map_or("-", |q| files.queries[q].name.as_str());
                match outcome {
                    Ok(()) => {
                        passed += 1;
                        println!("ok   {}: {query_name}: {}", file.path, case.name);
                    }
                    Err(details) => {
                        failed += 1;
                        println!("FAIL {}: {query_name}: {}", file.path, case.name);
                        for d in details {
                            println!("    {d}");
                        }
                    }
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one case of query `query`; on failure, the lines that explain it.
fn run_case(files: &QueryFiles, query: usize, case: &Case) -> Result<(), Vec<String>> {
    let q = &files.queries[query];
    let path = &files.files[q.file].path;
    let at = |line: u64, message: String| vec![format!("{path}:{line}: {message}")];
    if let Some((line, message)) = &case.error {
        return Err(at(*line, message.clone()));
    }
    let engine = files.engine(|i| i == query)?;
    let replay = Replay::new(&engine, &files.catalog, std::slice::from_ref(&q.name))
        .map_err(|e| vec![e.to_string()])?;
    let schema = replay.schema(0);
    let mut inputs = Vec::new();
    for block in &case.inputs {
        let stream = block.stream.to_lowercase();
        let Some(def) = files.catalog.stream(&stream) else {
            return Err(at(
                block.line,
                format!("stream \"{stream}\" does not exist"),
            ));
        };
        let text: Vec<&str> = block.lines.iter().map(|l| l.text.as_str()).collect();
        let map = block.lines.iter().map(|l| l.number).collect();
        inputs.push(Input::from_text(
            &stream,
            path.clone(),
            def.schema.clone(),
            text.join("\n"),
            Format::Csv,
            map,
        ));
    }
    let mut produced: Vec<RecordBatch> = Vec::new();
    let mut collect = |_: usize, b: &RecordBatch| -> Result<(), ReplayError> {
        produced.push(b.clone());
        Ok(())
    };
    let mut bad = BadRows::new(false);
    replay
        .run(inputs, &mut bad, &mut collect, &mut |_| {})
        .map_err(|e| vec![e.to_string()])?;
    let mut rows: Vec<Row> = Vec::new();
    for b in &produced {
        rows.extend(batch_rows(b).map_err(|e| vec![e.to_string()])?);
    }
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    match &case.expect {
        None => Err(at(case.line, "the test case has no `expect:` block".into())),
        Some(Expect::Nothing) => {
            if rows.is_empty() {
                return Ok(());
            }
            let mut details = vec![format!(
                "expected nothing, got {} row(s) of {}",
                rows.len(),
                names.join(",")
            )];
            for row in &rows {
                details.push(format!("unexpected: {}", text_of(row)));
            }
            Err(details)
        }
        Some(Expect::Rows { lines, .. }) => compare(path, &names, &rows, lines),
    }
}

/// Compares produced rows (all columns `names`) with the expected CSV lines.
fn compare(path: &str, names: &[String], rows: &[Row], lines: &[Line]) -> Result<(), Vec<String>> {
    let at = |line: u64, message: String| vec![format!("{path}:{line}: {message}")];
    let (header, expected_lines) = lines.split_first().ok_or_else(Vec::new)?;
    let wanted = split_record(&header.text).map_err(|e| at(header.number, e))?;
    let mut columns = Vec::new();
    for name in &wanted {
        let name = name.as_deref().unwrap_or("").trim();
        let found = names
            .iter()
            .position(|n| n == name)
            .or_else(|| names.iter().position(|n| n == &name.to_lowercase()));
        match found {
            Some(c) => columns.push(c),
            None => {
                return Err(at(
                    header.number,
                    format!(
                        "the query has no column \"{name}\"; its columns are {}",
                        names.join(",")
                    ),
                ))
            }
        }
    }
    let mut expected = Vec::new();
    for line in expected_lines {
        let fields = split_record(&line.text).map_err(|e| at(line.number, e))?;
        if fields.len() != columns.len() {
            return Err(at(
                line.number,
                format!(
                    "{} fields where the header has {}",
                    fields.len(),
                    columns.len()
                ),
            ));
        }
        expected.push(text_of(&fields));
    }
    let actual: Vec<String> = rows
        .iter()
        .map(|row| {
            let projected: Row = columns.iter().map(|&c| row[c].clone()).collect();
            text_of(&projected)
        })
        .collect();
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for row in &actual {
        *counts.entry(row).or_default() += 1;
    }
    let mut missing = Vec::new();
    for row in &expected {
        match counts.get_mut(row.as_str()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => missing.push(row),
        }
    }
    let mut unexpected = Vec::new();
    for row in &actual {
        if let Some(n) = counts.get_mut(row.as_str()) {
            if *n > 0 {
                *n -= 1;
                unexpected.push(row);
            }
        }
    }
    if missing.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    let mut details = vec![format!("columns:    {}", header.text)];
    details.extend(missing.iter().map(|r| format!("missing:    {r}")));
    details.extend(unexpected.iter().map(|r| format!("unexpected: {r}")));
    Err(details)
}

/// A row as one CSV line, timestamps in their shortest form (`05.910` and `05.91` are one
/// value), so that an expected line compares by value however its fraction is written.
fn text_of(row: &Row) -> String {
    record_text(row.iter().map(|f| f.as_deref().map(shortest_timestamp)))
}

/// `field` without the trailing zeros of its fraction of a second if it is a timestamp
/// (`YYYY-MM-DD hh:mm:ss.fff`), else as it is.
fn shortest_timestamp(field: &str) -> &str {
    let b = field.as_bytes();
    let is_timestamp = b.len() > 20
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b' ' || b[10] == b'T')
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[20..].iter().all(u8::is_ascii_digit);
    match is_timestamp {
        true => field.trim_end_matches('0').trim_end_matches('.'),
        false => field,
    }
}

#[cfg(test)]
mod tests {
    use super::shortest_timestamp;

    #[test]
    fn timestamps_compare_by_value() {
        assert_eq!(
            shortest_timestamp("2020-10-18 23:50:05.910"),
            "2020-10-18 23:50:05.91"
        );
        assert_eq!(
            shortest_timestamp("2020-10-18T23:50:05.000"),
            "2020-10-18T23:50:05"
        );
        assert_eq!(
            shortest_timestamp("2020-10-18 23:50:05"),
            "2020-10-18 23:50:05"
        );
        // Not timestamps: left alone.
        assert_eq!(shortest_timestamp("10.500"), "10.500");
        assert_eq!(
            shortest_timestamp("2020-10-18 23:50:05.9x0"),
            "2020-10-18 23:50:05.9x0"
        );
    }
}
