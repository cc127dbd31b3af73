//! The SQL regression suite: runs every `tests/slt/*.slt` file, each against a fresh in-memory
//! [`Engine`], with the `sqllogictest` crate, and reports every record that fails.
//!
//! What the files can rely on, beyond standard sqllogictest:
//!
//! - `statement ok` followed by `FLUSH` declares the end of all input ([`Engine::finish`]):
//!   every watermark moves to the end, so every open window emits its results.
//! - Values print as text: `NULL`; booleans `true`/`false`; timestamps
//!   `YYYY-MM-DD HH:MM:SS[.fff]` (TIMESTAMPTZ adds the offset, always `+00`); floats rounded
//!   to 6 decimal places with trailing zeros trimmed; the empty string as `(empty)`.
//! - Column types are checked: `I` integer, `R` float or decimal, `T` text, `B` boolean,
//!   `P` timestamp, `?` anything else.
//! - Errors read `SQLSTATE: message` (e.g. `42P01: stream "nope" does not exist`), so
//!   `statement error <regex>` can pin the code, the message, or both.
//!
//! Run with `cargo test --test slt`. Extra arguments select the files whose name contains
//! them (`cargo test --test slt -- tumble`), or name `.slt` files to run instead. The last
//! line says `N passed, N failed`, counting statement and query records, and the exit status
//! is non-zero when any failed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use saql::{Engine, EngineConfig, StatementResult};
use sqllogictest::{
    parse_file, strict_column_validator, ColumnType, DBOutput, Record, RecordOutput, Runner,
};
use tokio::runtime::Runtime;

/// The runner's own statement: close every window by moving all watermarks to the end.
const FLUSH: &str = "FLUSH";

/// Result column types as the `query` line spells them, after DataFusion's own suite.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SltType {
    Boolean,
    Integer,
    Float,
    Text,
    Timestamp,
    Other,
}

impl ColumnType for SltType {
    fn from_char(value: char) -> Option<Self> {
        Some(match value {
            'B' => SltType::Boolean,
            'I' => SltType::Integer,
            'R' => SltType::Float,
            'T' => SltType::Text,
            'P' => SltType::Timestamp,
            _ => SltType::Other,
        })
    }

    fn to_char(&self) -> char {
        match self {
            SltType::Boolean => 'B',
            SltType::Integer => 'I',
            SltType::Float => 'R',
            SltType::Text => 'T',
            SltType::Timestamp => 'P',
            SltType::Other => '?',
        }
    }
}

impl SltType {
    fn of(data_type: &DataType) -> SltType {
        match data_type {
            DataType::Boolean => SltType::Boolean,
            t if t.is_integer() => SltType::Integer,
            t if t.is_floating() => SltType::Float,
            DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..) => SltType::Float,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => SltType::Text,
            DataType::Timestamp(..) => SltType::Timestamp,
            _ => SltType::Other,
        }
    }
}

/// An engine error as the test files see it: `SQLSTATE: message`.
#[derive(Debug)]
struct SltError(String);

impl std::fmt::Display for SltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SltError {}

impl From<saql::Error> for SltError {
    fn from(e: saql::Error) -> Self {
        SltError(format!("{}: {e}", e.sqlstate()))
    }
}

/// One test file's database: an in-memory engine, and the runtime its `SELECT`s run on.
struct SaqlDb {
    engine: Engine,
    runtime: Arc<Runtime>,
}

impl sqllogictest::DB for SaqlDb {
    type Error = SltError;
    type ColumnType = SltType;

    fn run(&mut self, sql: &str) -> Result<DBOutput<SltType>, SltError> {
        if sql
            .trim()
            .trim_end_matches(';')
            .trim()
            .eq_ignore_ascii_case(FLUSH)
        {
            self.engine.finish();
            return Ok(DBOutput::StatementComplete(0));
        }
        let mut output = DBOutput::StatementComplete(0);
        for result in self.runtime.block_on(self.engine.execute(sql))? {
            match result {
                StatementResult::Command(_) | StatementResult::CommandWithNotice { .. } => {}
                // `COPY (query) TO STDOUT` shows the rows it would send.
                StatementResult::Rows { schema, batches }
                | StatementResult::CopyOut {
                    schema, batches, ..
                } => {
                    let types = schema
                        .fields()
                        .iter()
                        .map(|f| SltType::of(f.data_type()))
                        .collect();
                    output = DBOutput::Rows {
                        types,
                        rows: format_rows(&batches)?,
                    };
                }
                StatementResult::Streaming { .. } => {
                    return Err(SltError("Engine::execute reads results whole".into()))
                }
                StatementResult::Subscribe(_) | StatementResult::CopyIn(_) => {
                    return Err(SltError(
                        "SUBSCRIBE and COPY FROM STDIN cannot run in a .slt file; \
                         use SELECT over the query and INSERT"
                            .into(),
                    ))
                }
            }
        }
        Ok(output)
    }

    fn engine_name(&self) -> &str {
        "saql"
    }
}

/// Every row of `batches`, each value formatted as text.
fn format_rows(batches: &[RecordBatch]) -> Result<Vec<Vec<String>>, SltError> {
    let options = FormatOptions::default()
        .with_null("NULL")
        .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f"))
        .with_timestamp_tz_format(Some("%Y-%m-%d %H:%M:%S%.f%:::z"));
    let mut rows = Vec::new();
    for batch in batches {
        let columns = batch
            .columns()
            .iter()
            .map(|c| format_column(c, &options))
            .collect::<Result<Vec<_>, _>>()?;
        for r in 0..batch.num_rows() {
            rows.push(columns.iter().map(|c| c[r].clone()).collect());
        }
    }
    Ok(rows)
}

/// The values of one column as text.
fn format_column(array: &ArrayRef, options: &FormatOptions) -> Result<Vec<String>, SltError> {
    let n = array.len();
    let text = |i: usize, value: String| {
        if array.is_null(i) {
            "NULL".to_string()
        } else if value.is_empty() {
            "(empty)".to_string()
        } else {
            value
        }
    };
    match array.data_type() {
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            Ok((0..n).map(|i| text(i, format_float(a.value(i)))).collect())
        }
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            Ok((0..n)
                .map(|i| text(i, format_float(f64::from(a.value(i)))))
                .collect())
        }
        _ => {
            let formatter = ArrayFormatter::try_new(array.as_ref(), options)
                .map_err(|e| SltError(format!("cannot format {}: {e}", array.data_type())))?;
            Ok((0..n)
                .map(|i| text(i, formatter.value(i).to_string()))
                .collect())
        }
    }
}

/// A float rounded to 6 decimal places, without trailing zeros: `2.5`, `3`, `0.333333`.
fn format_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let fixed = format!("{v:.6}");
    let trimmed = fixed.trim_end_matches('0').trim_end_matches('.');
    match trimmed {
        "-0" => "0".into(),
        t => t.into(),
    }
}

/// What running one file came to.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}

/// Runs every record of `path` against a fresh engine, reporting each failure.
fn run_file(path: &Path, runtime: &Arc<Runtime>) -> Tally {
    let mut tally = Tally::default();
    let records = match parse_file::<SltType>(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            tally.failed += 1;
            return tally;
        }
    };
    let mut runner = Runner::new(|| {
        let db = Engine::open(EngineConfig::default())
            .map(|engine| SaqlDb {
                engine,
                runtime: runtime.clone(),
            })
            .map_err(SltError::from);
        std::future::ready(db)
    });
    runner.with_column_validator(strict_column_validator);
    for record in records {
        let counted = matches!(record, Record::Statement { .. } | Record::Query { .. });
        if matches!(record, Record::Halt { .. }) {
            break;
        }
        match runner.run(record) {
            Ok(RecordOutput::Nothing) if counted => tally.skipped += 1,
            Ok(_) if counted => tally.passed += 1,
            Ok(_) => {}
            Err(e) => {
                eprintln!("{}\n", e.display(false));
                tally.failed += 1;
            }
        }
    }
    runner.shutdown();
    tally
}

/// The `.slt` files, sorted, whose names contain one of `filters` (all when there are none).
/// A filter that is the path of an existing `.slt` file selects that file, wherever it is.
fn test_files(filters: &[String]) -> std::io::Result<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = filters
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.extension().is_some_and(|e| e == "slt") && p.is_file())
        .collect();
    if !paths.is_empty() {
        return Ok(paths);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "slt"));
    files.retain(|p| {
        let name = file_name(p);
        filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
    });
    files.sort();
    Ok(files)
}

/// libtest's flags that take a value as the next argument.
const FLAGS_WITH_VALUE: &[&str] = &[
    "--format",
    "--color",
    "--test-threads",
    "--logfile",
    "--skip",
];

/// The last component of a path, for messages.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn main() -> ExitCode {
    // Flags (and the values of libtest's flags that take one) are what `cargo test` and
    // nextest pass to every test binary; the other words select files.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut filters = Vec::new();
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        if FLAGS_WITH_VALUE.contains(&arg.as_str()) {
            words.next();
        } else if !arg.starts_with('-') {
            filters.push(arg.clone());
        }
    }
    let files = match test_files(&filters) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot list tests/slt: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.iter().any(|a| a == "--list") {
        // libtest's listing format, so that runners such as nextest can discover the files.
        if !args.iter().any(|a| a == "--ignored") {
            for f in &files {
                println!("{}: test", file_name(f));
            }
        }
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut total = Tally::default();
    for file in &files {
        let tally = run_file(file, &runtime);
        let name = file_name(file);
        let status = if tally.failed == 0 { "ok" } else { "FAILED" };
        let skipped = match tally.skipped {
            0 => String::new(),
            n => format!(", {n} skipped"),
        };
        println!(
            "{name}: {status} ({} passed, {} failed{skipped})",
            tally.passed, tally.failed
        );
        total.passed += tally.passed;
        total.failed += tally.failed;
        total.skipped += tally.skipped;
    }
    let skipped = match total.skipped {
        0 => String::new(),
        n => format!(", {n} skipped"),
    };
    println!(
        "{} files: {} passed, {} failed{skipped}",
        files.len(),
        total.passed,
        total.failed
    );
    if total.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
