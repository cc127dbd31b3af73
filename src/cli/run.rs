//! `saql run`: replays recorded events through the queries of some files, offline.
//!
//! ```text
//! saql run FILE... --input STREAM=PATH [--input ...] [--output DIR] [--skip-bad-rows]
//! ```
//!
//! The files' CREATE STREAM, CREATE TABLE, INSERT (of a table's rows) and CREATE CONTINUOUS
//! QUERY statements are executed (any other statement is an error at its `file:line:col`). Each input is CSV with a header or JSON
//! lines, gzip-compressed if its name ends in `.gz`; the format comes from the name (`.csv`,
//! `.json`, `.jsonl`, `.ndjson`), else from the first byte (`{` for JSON lines). CSV columns
//! are matched to the stream's by header name (columns it lacks are NULL, unknown names are
//! an error); JSON keys likewise, with timestamps as strings. Blank lines are skipped.
//! An input named after a reference table (`--input assets=assets.csv`) fills the table
//! before any event is replayed, its rows upserts by the table's key.
//! Inputs are merged in event-time order (ties: the input given first, then file order) and
//! the end of input closes every window, so the same files always give the same bytes.
//!
//! Each query's results are CSV with a header row (see [`super::csv_text`] for how values
//! print): with `--output DIR`, in `DIR/<query>.csv`; otherwise on stdout, and when the files
//! define several queries each block is preceded by a line `-- query <name>`, in the order
//! the queries are defined.
//!
//! A bad input line prints `path:line: message` and stops the run with exit status 1; with
//! `--skip-bad-rows` it is skipped and one line on stderr reports how many were and quotes
//! the first few. On a terminal, stderr shows a progress bar (rows/s, % of input read).

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::record_batch::RecordBatch;
use indicatif::{ProgressBar, ProgressStyle};

use super::csv_text::{push_record, write_batch};
use super::input::{BadRows, Input, InputError};
use super::query_files::{expand, QueryFiles};
use super::replay::{Replay, ReplayError};

/// Where one query's results go.
enum Sink {
    /// Straight to stdout (a single query, no `--output`).
    Stdout(BufWriter<std::io::Stdout>),
    /// Held until the end, then printed under `-- query <name>`.
    Buffer(Vec<u8>),
    /// `DIR/<query>.csv`.
    File(BufWriter<File>, PathBuf),
}

impl Sink {
    fn write(&mut self, text: &str) -> Result<(), ReplayError> {
        let result = match self {
            Sink::Stdout(w) => w.write_all(text.as_bytes()),
            Sink::Buffer(b) => {
                b.extend_from_slice(text.as_bytes());
                Ok(())
            }
            Sink::File(w, _) => w.write_all(text.as_bytes()),
        };
        result.map_err(|e| ReplayError::Output(self.describe(e)))
    }

    fn flush(&mut self) -> Result<(), ReplayError> {
        let result = match self {
            Sink::Stdout(w) => w.flush(),
            Sink::Buffer(_) => Ok(()),
            Sink::File(w, _) => w.flush(),
        };
        result.map_err(|e| ReplayError::Output(self.describe(e)))
    }

    fn describe(&self, e: std::io::Error) -> String {
        match self {
            Sink::File(_, path) => format!("{}: {e}", path.display()),
            _ => format!("writing results: {e}"),
        }
    }
}

/// Why `saql run` cannot start: an `--input` it cannot use, or results it cannot write.
#[derive(Debug, thiserror::Error)]
enum RunError {
    /// An input without `=`.
    #[error("saql run: --input {spec}: expected STREAM=PATH, e.g. --input proc_events=events.csv")]
    NoStream { spec: String },
    /// An input with an empty stream or path.
    #[error("saql run: --input {spec}: expected STREAM=PATH")]
    Empty { spec: String },
    /// An input for a stream or table the files do not declare (`known`: those they do).
    #[error(
        "saql run: --input {spec}: no stream or table \"{stream}\"; the files declare {known}"
    )]
    Unknown {
        spec: String,
        stream: String,
        known: String,
    },
    /// A table's input that does not load.
    #[error("saql run: --input {spec}: {source}")]
    Table {
        spec: String,
        source: Box<TableError>,
    },
    /// A results file or directory that cannot be created.
    #[error("{}: {source}", .path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why a table's input does not load.
#[derive(Debug, thiserror::Error)]
enum TableError {
    /// A bad or unreadable line.
    #[error("{0}")]
    Input(InputError),
    /// The table refused a batch.
    #[error("{}: {source}", .path.display())]
    Upsert { path: PathBuf, source: saql::Error },
}

/// Runs the queries of `files` over `inputs` (`STREAM=PATH`).
pub fn run(
    files: &[PathBuf],
    inputs: &[String],
    output: Option<&Path>,
    skip_bad_rows: bool,
) -> ExitCode {
    match run_inner(files, inputs, output, skip_bad_rows) {
        Ok(()) => ExitCode::SUCCESS,
        Err(messages) => {
            for m in messages {
                eprintln!("{m}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run_inner(
    files: &[PathBuf],
    inputs: &[String],
    output: Option<&Path>,
    skip_bad_rows: bool,
) -> Result<(), Vec<String>> {
    let paths = expand(files).map_err(|e| vec![e])?;
    let files = QueryFiles::load(&paths, "saql run").map_err(with_count)?;
    let engine = files.engine(|_| true).map_err(with_count)?;
    let names: Vec<String> = files.queries.iter().map(|q| q.name.clone()).collect();

    let bytes_read = Arc::new(AtomicU64::new(0));
    let mut bad = BadRows::new(skip_bad_rows);
    let mut total_bytes = 0;
    let mut opened = Vec::new();
    for spec in inputs {
        let (stream, path) = parse_input(spec).map_err(|e| vec![e.to_string()])?;
        if let Some(table) = files.catalog.table(&stream) {
            let schema = table.store.schema().clone();
            load_table(&engine, &stream, &path, schema, &mut bad).map_err(|e| {
                let (spec, source) = (spec.clone(), Box::new(e));
                vec![RunError::Table { spec, source }.to_string()]
            })?;
            continue;
        }
        let Some(def) = files.catalog.stream(&stream) else {
            let known: Vec<&str> = files
                .catalog
                .streams()
                .map(|s| s.name.as_str())
                .chain(files.catalog.tables().map(|t| t.name.as_str()))
                .collect();
            let known = match known.is_empty() {
                true => "none".to_string(),
                false => known.join(", "),
            };
            let spec = spec.clone();
            return Err(vec![RunError::Unknown {
                spec,
                stream,
                known,
            }
            .to_string()]);
        };
        total_bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let input = Input::open(&stream, &path, def.schema.clone(), bytes_read.clone())
            .map_err(|e| vec![e.to_string()])?;
        opened.push(input);
    }

    let replay = Replay::new(&engine, &files.catalog, &names).map_err(|e| vec![e.to_string()])?;
    let mut sinks = open_sinks(&names, output).map_err(|e| vec![e.to_string()])?;
    for (i, sink) in sinks.iter_mut().enumerate() {
        let schema = replay.schema(i);
        let mut header = String::new();
        push_record(
            &mut header,
            schema.fields().iter().map(|f| Some(f.name().as_str())),
        );
        sink.write(&header).map_err(|e| vec![e.to_string()])?;
    }

    let progress = progress_bar(total_bytes);
    let started = Instant::now();
    let mut text = String::new();
    let mut on_results = |query: usize, batch: &RecordBatch| -> Result<(), ReplayError> {
        text.clear();
        write_batch(&mut text, batch).map_err(|e| ReplayError::Output(e.to_string()))?;
        sinks[query].write(&text)
    };
    let mut on_progress = |rows: u64| {
        if let Some(bar) = &progress {
            bar.set_position(bytes_read.load(Ordering::Relaxed));
            let secs = started.elapsed().as_secs_f64().max(1e-3);
            bar.set_message(format!("{rows} rows, {:.0} rows/s", rows as f64 / secs));
        }
    };
    let result = replay.run(opened, &mut bad, &mut on_results, &mut on_progress);
    if let Some(bar) = &progress {
        bar.finish_and_clear();
    }
    let mut messages = Vec::new();
    if let Some(summary) = bad.summary() {
        messages.push(format!("saql run: {summary}"));
    }
    if let Err(e) = result {
        // Streamed results stay as far as they got; held blocks are dropped.
        for sink in sinks.iter_mut() {
            let _ = sink.flush();
        }
        messages.push(e.to_string());
        return Err(messages);
    }
    finish_sinks(&names, &mut sinks).map_err(|e| vec![e.to_string()])?;
    for m in messages {
        eprintln!("{m}");
    }
    Ok(())
}

/// Reads the whole file `path` into reference table `table` before any stream is replayed:
/// rows are upserts by the table's key (a later row of a key replaces an earlier one), so
/// the queries that join the table see all of it from their first row.
fn load_table(
    engine: &saql::Engine,
    table: &str,
    path: &Path,
    schema: datafusion::arrow::datatypes::SchemaRef,
    bad: &mut BadRows,
) -> Result<(), TableError> {
    let mut input =
        Input::open(table, path, schema, Arc::new(AtomicU64::new(0))).map_err(TableError::Input)?;
    while let Some(batch) = input
        .next_batch(TABLE_BATCH_ROWS, bad)
        .map_err(TableError::Input)?
    {
        engine
            .upsert_table(table, &batch)
            .map_err(|source| TableError::Upsert {
                path: path.to_path_buf(),
                source,
            })?;
    }
    Ok(())
}

/// Rows of a table input applied as one change.
const TABLE_BATCH_ROWS: usize = 65_536;

/// `STREAM=PATH`; the stream name is case-insensitive unless written in double quotes.
fn parse_input(spec: &str) -> Result<(String, PathBuf), RunError> {
    let Some((stream, path)) = spec.split_once('=') else {
        return Err(RunError::NoStream {
            spec: spec.to_string(),
        });
    };
    let stream = stream.trim();
    let stream = match stream.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(quoted) => quoted.to_string(),
        None => stream.to_lowercase(),
    };
    if stream.is_empty() || path.is_empty() {
        return Err(RunError::Empty {
            spec: spec.to_string(),
        });
    }
    Ok((stream, PathBuf::from(path)))
}

fn open_sinks(names: &[String], output: Option<&Path>) -> Result<Vec<Sink>, RunError> {
    let cannot = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RunError::Output { path, source }
    };
    match output {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(cannot(dir))?;
            names
                .iter()
                .map(|name| {
                    let path = dir.join(format!("{name}.csv"));
                    let file = File::create(&path).map_err(cannot(&path))?;
                    Ok(Sink::File(BufWriter::new(file), path))
                })
                .collect()
        }
        None if names.len() == 1 => Ok(vec![Sink::Stdout(BufWriter::new(std::io::stdout()))]),
        None => Ok(names.iter().map(|_| Sink::Buffer(Vec::new())).collect()),
    }
}

/// Flushes every sink; prints the buffered blocks, each under `-- query <name>`.
fn finish_sinks(names: &[String], sinks: &mut [Sink]) -> Result<(), ReplayError> {
    let mut stdout = std::io::stdout().lock();
    for (name, sink) in names.iter().zip(sinks.iter_mut()) {
        if let Sink::Buffer(buffer) = sink {
            let written = writeln!(stdout, "-- query {name}")
                .and_then(|()| stdout.write_all(buffer))
                .map_err(|e| ReplayError::Output(format!("writing results: {e}")));
            buffer.clear();
            written?;
        } else {
            sink.flush()?;
        }
    }
    stdout
        .flush()
        .map_err(|e| ReplayError::Output(format!("writing results: {e}")))
}

/// A progress bar on stderr when it is a terminal.
fn progress_bar(total_bytes: u64) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total_bytes.max(1));
    let style = ProgressStyle::with_template("{bar:30} {percent:>3}% of input  {msg}  {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}

/// Problems, then `N error(s)` as `saql check` ends.
fn with_count(mut problems: Vec<String>) -> Vec<String> {
    let n = problems.len();
    if problems.first().is_some_and(|p| p.contains(':'))
        && problems.iter().all(|p| p.contains('\n'))
    {
        problems.push(format!("{n} error(s)"));
    }
    problems
}
