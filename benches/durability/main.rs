//! What durability costs: (a) ingest rows/s through `insert_batch` with a data directory at
//! each fsync policy against the same engine in memory, one writer with large batches and
//! four writers with small ones (group commit); (b) checkpoints of growing state: how long
//! `Engine::checkpoint` takes, how many bytes it writes, and the longest `insert_batch` another
//! thread sees while it runs; (c) recovery: how long `Engine::open` takes to replay a log of
//! N rows, and to restore a checkpoint that covers all of it.
//!
//! `cargo bench --bench durability`; the variables are listed in `benches/README.md`
//! (`SAQL_BENCH_RUNS`, `SAQL_BENCH_ROWS`, `SAQL_BENCH_SMALL_ROWS`, `SAQL_BENCH_GROUPS`,
//! `SAQL_BENCH_PARTITIONS`, `SAQL_BENCH_LOG_ROWS`, `SAQL_BENCH_CASES`, `SAQL_BENCH_DIR`,
//! `SAQL_BENCH_CKPT_FSYNC`). Data directories are temporary directories under
//! `SAQL_BENCH_DIR` (default: the system's temp dir), whose file system is printed: it must be
//! a real disk for fsync to mean anything. Every case checks its results against an
//! in-memory run over the same rows (the aggregate's or the pattern's rows, the streams' and
//! queries' counters from `SHOW STREAMS` / `SHOW QUERIES`); a wrong result prints `MISMATCH`
//! and the bench exits 1.

mod checkpoints;
#[path = "../common/mod.rs"]
mod common;
mod ingest;
mod recovery;
mod support;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use common::{env_count, env_list};
use saql::runtime::FsyncPolicy;
use support::{engine_at, stream_ddl};

pub type BenchResult<T> = Result<T, Box<dyn Error>>;

const DEFAULT_RUNS: usize = 3;
const DEFAULT_ROWS: usize = 2_000_000;
const DEFAULT_SMALL_ROWS: usize = 400_000;
const DEFAULT_GROUPS: [usize; 3] = [1_000, 100_000, 1_000_000];
const DEFAULT_PARTITIONS: [usize; 1] = [100_000];
const DEFAULT_LOG_ROWS: [usize; 2] = [1_000_000, 5_000_000];

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("\nMISMATCH: at least one case produced wrong results (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// What the environment asks for.
pub struct Options {
    /// Runs per case.
    pub runs: usize,
    /// Rows of each single-writer ingest run.
    pub rows: usize,
    /// Rows of each four-writer ingest run.
    pub small_rows: usize,
    /// Open groups of the TUMBLE checkpoint cases.
    pub groups: Vec<usize>,
    /// Partitions in flight of the MATCH_RECOGNIZE checkpoint cases.
    pub partitions: Vec<usize>,
    /// Log lengths of the recovery cases.
    pub log_rows: Vec<usize>,
    cases: Option<String>,
    /// Where the data directories are made.
    pub root: PathBuf,
    /// The fsync policy of the checkpoint cases.
    pub checkpoint_fsync: FsyncPolicy,
}

impl Options {
    fn from_env() -> BenchResult<Options> {
        let root = match std::env::var_os("SAQL_BENCH_DIR") {
            Some(d) => PathBuf::from(d),
            None => std::env::temp_dir(),
        };
        let checkpoint_fsync = match std::env::var("SAQL_BENCH_CKPT_FSYNC") {
            Ok(p) => p
                .parse()
                .map_err(|e| format!("SAQL_BENCH_CKPT_FSYNC: {e}"))?,
            Err(_) => FsyncPolicy::Interval(Duration::from_millis(2)),
        };
        Ok(Options {
            runs: env_count("SAQL_BENCH_RUNS", DEFAULT_RUNS)?,
            rows: env_count("SAQL_BENCH_ROWS", DEFAULT_ROWS)?,
            small_rows: env_count("SAQL_BENCH_SMALL_ROWS", DEFAULT_SMALL_ROWS)?,
            groups: env_list("SAQL_BENCH_GROUPS", &DEFAULT_GROUPS)?,
            partitions: env_list("SAQL_BENCH_PARTITIONS", &DEFAULT_PARTITIONS)?,
            log_rows: env_list("SAQL_BENCH_LOG_ROWS", &DEFAULT_LOG_ROWS)?,
            cases: std::env::var("SAQL_BENCH_CASES").ok(),
            root: root.canonicalize()?,
            checkpoint_fsync,
        })
    }

    fn wants(&self, case: &str) -> bool {
        self.cases
            .as_ref()
            .is_none_or(|c| c.split(',').any(|c| c.trim() == case))
    }
}

/// Counts mismatches as they are printed.
#[derive(Default)]
pub struct Report {
    mismatches: usize,
}

impl Report {
    /// Prints each problem of a run as a `MISMATCH` line.
    pub fn check(&mut self, case: &str, run: usize, problems: Vec<String>) {
        for p in problems {
            println!("MISMATCH {case} run {run}: {p}");
            self.mismatches += 1;
        }
    }
}

/// Runs the cases asked for; returns whether every result was right.
fn run() -> BenchResult<bool> {
    let opts = Options::from_env()?;
    println!(
        "saql durability bench: {} runs per case; data directories under {}",
        opts.runs,
        opts.root.display()
    );
    println!("{}", file_system(&opts.root)?);
    println!(
        "nproc {}, load average {}\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    let schema = engine_at(None, FsyncPolicy::Off)
        .and_then(|e| {
            e.execute_blocking(&stream_ddl("events", 5))?;
            e.stream_schema("events")
        })
        .map_err(|e| format!("opening an engine: {e}"))?;
    let mut report = Report::default();
    let mut tables = Vec::new();
    if opts.wants("a") {
        tables.push(ingest::run(&opts, &schema, &mut report)?);
    }
    if opts.wants("b") {
        tables.push(checkpoints::run(&opts, &schema, &mut report)?);
    }
    if opts.wants("c") {
        tables.push(recovery::run(&opts, &schema, &mut report)?);
    }
    println!("\nload average at the end: {}", load_average());
    for t in tables {
        println!("\n{t}");
    }
    Ok(report.mismatches == 0)
}

/// The file system that holds `dir`, from `/proc/self/mounts` (the longest mount point that
/// contains it).
fn file_system(dir: &Path) -> BenchResult<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    let best = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| (f[0], f[1], f[2], f[3]))
        })
        .filter(|(_, at, _, _)| dir.starts_with(at))
        .max_by_key(|(_, at, _, _)| at.len());
    let Some((device, at, kind, options)) = best else {
        return Ok(format!("file system of {}: unknown", dir.display()));
    };
    let warning = if ["tmpfs", "ramfs"].contains(&kind) {
        " -- WARNING: memory, not a disk: fsync costs nothing here; set SAQL_BENCH_DIR"
    } else {
        ""
    };
    Ok(format!(
        "file system: {kind} on {device}, mounted at {at} ({options}){warning}"
    ))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
