//! The `saql` command line: `serve` runs the Postgres-protocol server; `check`, `run` and
//! `test` work on query files offline, without a server; `compile` and `submit` run them on
//! Apache Flink; `user` manages the users file.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "saql",
    version,
    about = "Streaming SQL for real-time anomaly detection"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at startup: the size of the `serve` variant does not matter.
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at startup: the size of the serve variant does not matter"
)]
#[derive(Subcommand)]
enum Command {
    /// Serve the Postgres wire protocol.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "SAQL_LISTEN", default_value = "127.0.0.1:5433")]
        listen: String,
        /// Where the catalog, the ingest log and the checkpoints are kept.
        #[arg(long, env = "SAQL_DATA_DIR", default_value = "saql-data")]
        data_dir: PathBuf,
        /// When accepted rows reach the disk: `always` (fsync before acknowledging; writers
        /// waiting together share one fsync: group commit), `interval` (the same, an fsync at
        /// most every 2 ms), `off` (the OS decides: survives a killed process, not a power cut).
        #[arg(long, env = "SAQL_FSYNC", default_value = "always")]
        fsync: saql::runtime::FsyncPolicy,
        /// Seconds between checkpoints; 0 takes them only on CHECKPOINT.
        #[arg(long, default_value_t = 60)]
        checkpoint_interval: u64,
        /// Checkpoints kept; the log is kept from the oldest of them on.
        #[arg(long, default_value_t = 2)]
        keep_checkpoints: usize,
        /// History each stream keeps unless it says otherwise (`WITH (history = ...)`), as
        /// Parquet files in the data directory, for ad hoc hunting and backfill: a span of
        /// event time ('7 days'), a size ('10 GB') or 'off'.
        #[arg(long, default_value = "7 days", value_parser = parse_history)]
        history: HistoryFlag,
        /// Start even if the ingest log has a corrupt frame before its end, keeping the log up
        /// to that frame (the frames after it are lost).
        #[arg(long)]
        salvage_log: bool,
        /// Recent rows kept per stream and per query for ad hoc SELECT.
        #[arg(long, default_value_t = 10_000)]
        retain_rows: usize,
        /// Threads a keyed operator is spread over (default: the number of cores).
        #[arg(long, env = "SAQL_WORKERS")]
        workers: Option<usize>,
        /// Feed built-in demo streams and register the queries in --queries.
        #[arg(long)]
        demo: bool,
        /// Directory of .sql files registered with --demo.
        #[arg(long, default_value = "queries")]
        queries: PathBuf,
        /// Serve Prometheus metrics at http://ADDR/metrics (no authentication: keep it on
        /// 127.0.0.1 or a network only the scraper reaches).
        #[arg(long, env = "SAQL_METRICS_LISTEN", value_name = "ADDR")]
        metrics_listen: Option<String>,
        /// Serve the web console (streams, queries, live alert charts) and /metrics at
        /// http://ADDR/; with --demo it defaults to 127.0.0.1:5480. With --users, the
        /// console's data needs the token printed at start.
        #[arg(long, env = "SAQL_HTTP", value_name = "ADDR")]
        http: Option<String>,
        /// Host names the console and /metrics answer to besides IP addresses and localhost
        /// (comma-separated): a request naming another Host gets 421, so that no web page
        /// reaches the console through a rebound DNS name.
        #[arg(long, value_delimiter = ',', value_name = "NAMES")]
        http_allowed_hosts: Vec<String>,
        /// With --users, serve /metrics on the --http listener without the console's token
        /// (by default it needs it, as the console's data does).
        #[arg(long)]
        metrics_public: bool,
        /// How log lines on stderr are written: `text` for people, `json` (one object per
        /// line: timestamp, level, target, fields) for log collectors.
        #[arg(long, env = "SAQL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
        #[command(flatten)]
        limits: cli::serve::LimitFlags,
        #[command(flatten)]
        security: cli::serve::SecurityFlags,
    },
    /// Manage the users file of `saql serve --users`.
    User {
        #[command(subcommand)]
        command: cli::user::UserCommand,
    },
    /// Parse and plan every statement of the given files; CREATE STREAM statements in any of
    /// them declare the streams the others use. Exit status 1 on any error.
    Check {
        /// Query files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Replay recorded events through the queries of the given files, offline, and write each
    /// query's results as CSV.
    Run {
        /// Query files (CREATE STREAM and CREATE CONTINUOUS QUERY statements).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// STREAM=PATH: events for a stream, as CSV with a header or JSON lines (.gz too);
        /// TABLE=PATH: a reference table's rows (upserts by key), loaded before any event.
        #[arg(long = "input", value_name = "STREAM=PATH")]
        inputs: Vec<String>,
        /// Write each query's results to DIR/<query>.csv instead of stdout.
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// Count and report bad input lines instead of stopping at the first.
        #[arg(long)]
        skip_bad_rows: bool,
    },
    /// Compile the streams and continuous queries of the given files for another engine:
    /// `--target flink` writes one runnable PyFlink program (Flink SQL inside).
    Compile {
        /// The engine: flink.
        #[arg(long, default_value = "flink")]
        target: String,
        /// Query files (or directories of .sql files).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write the program here instead of stdout.
        #[arg(short, long, value_name = "OUT.py")]
        output: Option<PathBuf>,
        /// Leave out (with a warning) the queries that have no Flink translation.
        #[arg(long)]
        skip_unsupported: bool,
    },
    /// Compile the queries of the given files for Flink and run them on a local Flink
    /// mini-cluster (loopback only) or a running JobManager; each query's results go to
    /// DIR/<query>.csv.
    Submit {
        /// Query files (or directories of .sql files).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// `local` (a mini-cluster in the PyFlink process), or `HOST:PORT`: the REST endpoint
        /// of a running JobManager whose task managers see the same paths.
        #[arg(long, value_name = "local|HOST:PORT")]
        flink: String,
        /// STREAM=PATH: events for a stream, CSV with a header (as `saql run` reads them).
        #[arg(long = "input", value_name = "STREAM=PATH")]
        inputs: Vec<String>,
        /// Directory for the results (DIR/<query>.csv) and the program (DIR/flink_job.py).
        #[arg(long, value_name = "DIR")]
        output: PathBuf,
        /// Flink's parallelism.
        #[arg(long, default_value_t = 1)]
        parallelism: u32,
        /// The Python of a venv with apache-flink (default: $SAQL_FLINK_PYTHON, else
        /// ~/.cache/saql-flink-venv/bin/python).
        #[arg(long)]
        python: Option<PathBuf>,
        /// Leave out (with a warning) the queries that have no Flink translation.
        #[arg(long)]
        skip_unsupported: bool,
    },
    /// Run the test cases written in query files; prints a line per case and a final
    /// `N passed, N failed` line. Exit status 1 on any failure.
    Test {
        /// Query files (or directories of .sql files).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// The format of log lines (`serve --log-format`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`); colours only when stderr is a
/// terminal, so that a log file or a pipe gets plain text.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(match &cli.command {
        Command::Serve { log_format, .. } => *log_format,
        _ => LogFormat::Text,
    });
    match cli.command {
        Command::Serve {
            listen,
            data_dir,
            fsync,
            checkpoint_interval,
            keep_checkpoints,
            history,
            salvage_log,
            retain_rows,
            workers,
            demo,
            queries,
            metrics_listen,
            http,
            http_allowed_hosts,
            metrics_public,
            limits,
            security,
            log_format: _,
        } => match cli::serve::serve(
            listen,
            cli::serve::HttpListeners {
                metrics: metrics_listen,
                allowed_hosts: http_allowed_hosts,
                metrics_public,
                console_is_default: demo && http.is_none(),
                console: http.or_else(|| demo.then(|| cli::serve::DEMO_CONSOLE.to_string())),
            },
            limits.apply(saql::EngineConfig {
                data_dir: Some(data_dir),
                retain_rows,
                workers: workers
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
                fsync,
                checkpoint_interval: (checkpoint_interval > 0)
                    .then(|| std::time::Duration::from_secs(checkpoint_interval)),
                keep_checkpoints,
                salvage_log,
                history: history.0,
                ..saql::EngineConfig::default()
            }),
            limits.server(),
            &security,
            demo.then_some(queries),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("saql: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Check { files } => cli::check::run(&files),
        Command::Run {
            files,
            inputs,
            output,
            skip_bad_rows,
        } => cli::run::run(&files, &inputs, output.as_deref(), skip_bad_rows),
        Command::Test { files } => cli::test::run(&files),
        Command::Compile {
            target,
            files,
            output,
            skip_unsupported,
        } => cli::flink::compile_command(&target, &files, output.as_deref(), skip_unsupported),
        Command::Submit {
            files,
            flink,
            inputs,
            output,
            parallelism,
            python,
            skip_unsupported,
        } => cli::flink::submit(cli::flink::Submit {
            files: &files,
            flink: &flink,
            inputs: &inputs,
            output: &output,
            parallelism,
            python,
            skip_unsupported,
        }),
        Command::User { command } => cli::user::run(command),
    }
}

/// A `--history` setting, read.
#[derive(Debug, Clone, Copy)]
struct HistoryFlag(Option<saql::plan::retention::Retention>);

fn parse_history(text: &str) -> saql::error::Result<HistoryFlag> {
    saql::plan::retention::Retention::parse(text).map(HistoryFlag)
}
