//! `saql compile --target flink` and `saql submit --flink local|HOST:PORT`: the queries of some
//! files as one PyFlink program, and that program run on a local Flink mini-cluster or
//! submitted to a running JobManager.
//!
//! ```text
//! saql compile --target flink FILE... [-o OUT.py] [--skip-unsupported]
//! saql submit FILE... --flink local|HOST:PORT [--input STREAM=PATH ...] --output DIR [--parallelism N]
//! ```
//!
//! A query that has no faithful Flink translation is an error at its `file:line:col`; with
//! `--skip-unsupported` it is left out with a warning instead (at least one must compile).
//! `submit` writes the program to `DIR/flink_job.py`, runs it with the Python of a PyFlink
//! venv (`--python`, `SAQL_FLINK_PYTHON`, else `~/.cache/saql-flink-venv/bin/python`, which
//! `tests/flink/setup.sh` installs), and leaves each query's results in `DIR/<query>.csv`.
//! `HOST:PORT` is a JobManager's REST endpoint (`rest.address`, `rest.port`); it must accept a
//! connection before anything is compiled; the program is submitted with the PyFlink package's
//! own `bin/flink run -m HOST:PORT -py`, and the cluster's task managers must see the same
//! paths (the inputs are copied under DIR, results are written there). Run as root with `--flink local`,
//! the job runs in a network namespace of its own that has only a loopback
//! interface (`unshare --net`): PyFlink's start-up opens one wildcard socket that no option
//! moves (see benches/README.md).

use saql::error::sqlstate;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use saql::compile::flink::{compile_query, FlinkProgram, FlinkQuery};

use super::query_files::{expand, in_dependency_order, QueryFiles};
use super::source::{describe, locate, Problem};

/// Compiles the files' queries; prints refusals (errors, or warnings when skipping).
fn compile(paths: &[PathBuf], what: &str, skip_unsupported: bool) -> Option<String> {
    let paths = match expand(paths) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("saql: {e}");
            return None;
        }
    };
    let mut files = match QueryFiles::load(&paths, what) {
        Ok(f) => f,
        Err(problems) => {
            problems.iter().for_each(|p| eprintln!("{p}"));
            return None;
        }
    };
    if let Err(problems) = files.fill_tables() {
        problems.iter().for_each(|p| eprintln!("{p}"));
        return None;
    }
    // In the order the queries read each other, whatever the files' order: a later query may
    // read this one (as a Flink view), compiled or not.
    let mut outcomes = Vec::new();
    let unresolved = in_dependency_order(files.queries.len(), |i| {
        let q = &files.queries[i];
        match compile_query(&q.create, &files.catalog) {
            Err(e) if e.sqlstate() == sqlstate::UNDEFINED_TABLE => Err(e),
            outcome => {
                let _ = files.catalog.add_query(q.name.clone(), q.create.clone());
                outcomes.push((i, outcome));
                Ok(())
            }
        }
    });
    for (i, result) in unresolved.into_iter().enumerate() {
        if let Err(e) = result {
            outcomes.push((i, Err(e)));
        }
    }
    let mut compiled: Vec<FlinkQuery> = Vec::new();
    let mut refused = 0;
    for (i, outcome) in outcomes {
        let q = &files.queries[i];
        match outcome {
            Ok(c) => compiled.push(c),
            Err(e) => {
                refused += 1;
                let file = &files.files[q.file];
                let p = Problem::new(&file.path, &file.text, locate(&e, &q.source), &describe(&e));
                if skip_unsupported && e.sqlstate() == sqlstate::FEATURE_NOT_SUPPORTED {
                    eprintln!("warning: left out: {p}");
                } else {
                    eprintln!("{p}");
                }
            }
        }
    }
    if refused > 0 && !skip_unsupported {
        eprintln!("{refused} query(ies) cannot run on Flink (--skip-unsupported leaves them out)");
        return None;
    }
    if compiled.is_empty() {
        eprintln!("saql: no continuous query to compile");
        return None;
    }
    let origin: Vec<String> = files.files.iter().map(|f| f.path.clone()).collect();
    match FlinkProgram::new(&files.catalog, compiled) {
        Ok(p) => Some(p.to_python(&origin.join(", "))),
        Err(e) => {
            eprintln!("saql: {}", describe(&e));
            None
        }
    }
}

/// `saql compile --target flink`.
pub fn compile_command(
    target: &str,
    files: &[PathBuf],
    output: Option<&Path>,
    skip_unsupported: bool,
) -> ExitCode {
    if !target.eq_ignore_ascii_case("flink") {
        eprintln!("saql: unknown target \"{target}\"; the one target is flink");
        return ExitCode::from(2);
    }
    let Some(program) = compile(files, "saql compile", skip_unsupported) else {
        return ExitCode::FAILURE;
    };
    match output {
        Some(path) => match std::fs::write(path, program) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("saql: {}: {e}", path.display());
                ExitCode::FAILURE
            }
        },
        None => {
            print!("{program}");
            ExitCode::SUCCESS
        }
    }
}

/// Options of `saql submit`.
pub struct Submit<'a> {
    /// Query files.
    pub files: &'a [PathBuf],
    /// `local`, or `HOST:PORT` of a JobManager.
    pub flink: &'a str,
    /// `STREAM=PATH` inputs.
    pub inputs: &'a [String],
    /// Where results (and the program) go.
    pub output: &'a Path,
    /// Flink's default parallelism.
    pub parallelism: u32,
    /// The Python of a PyFlink venv.
    pub python: Option<PathBuf>,
    /// Leave out the queries Flink cannot run.
    pub skip_unsupported: bool,
}

/// Why a job cannot be submitted: what `--flink` names cannot take it, or the PyFlink to
/// run it with is missing.
#[derive(Debug, thiserror::Error)]
enum SubmitError {
    /// `--flink` is neither `local` nor `HOST:PORT`.
    #[error("--flink {flink}: expected local or HOST:PORT")]
    BadTarget { flink: String },
    /// The host of `--flink` does not resolve.
    #[error("--flink {flink}: {source}")]
    Resolve {
        flink: String,
        source: std::io::Error,
    },
    /// Nothing accepts a connection at `--flink`.
    #[error(
        "no Flink JobManager answers at {flink} (nothing accepts a connection there); \
         start the cluster, or give its REST address (rest.address:rest.port)"
    )]
    Unreachable { flink: String },
    /// The Python found cannot import pyflink.
    #[error(
        "no PyFlink at {}: install apache-flink {} (tests/flink/setup.sh does, into \
         ~/.cache/saql-flink-venv) or name its python with --python or SAQL_FLINK_PYTHON",
        .python.display(),
        saql::compile::flink::FLINK_VERSION
    )]
    NoPyFlink { python: PathBuf },
    /// The Python cannot be run.
    #[error("{}: {source}", .python.display())]
    Python {
        python: PathBuf,
        source: std::io::Error,
    },
    /// The PyFlink package has no `bin/flink`.
    #[error("the PyFlink of {} has no bin/flink to submit with", .python.display())]
    NoFlinkCli { python: PathBuf },
}

/// The Python that has PyFlink.
fn flink_python(given: Option<PathBuf>) -> Result<PathBuf, SubmitError> {
    let candidate = given
        .or_else(|| std::env::var_os("SAQL_FLINK_PYTHON").map(PathBuf::from))
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/saql-flink-venv/bin/python"))
        })
        .unwrap_or_else(|| PathBuf::from("python3"));
    let ok = Command::new(&candidate)
        .args(["-c", "import pyflink"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(candidate)
    } else {
        Err(SubmitError::NoPyFlink { python: candidate })
    }
}

/// The `flink` command of the PyFlink package that `python` imports.
fn flink_cli(python: &Path) -> Result<PathBuf, SubmitError> {
    let out = Command::new(python)
        .args([
            "-c",
            "import os, pyflink; print(os.path.dirname(os.path.abspath(pyflink.__file__)))",
        ])
        .output()
        .map_err(|source| SubmitError::Python {
            python: python.to_path_buf(),
            source,
        })?;
    let home = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let cli = Path::new(&home).join("bin/flink");
    if out.status.success() && cli.is_file() {
        Ok(cli)
    } else {
        Err(SubmitError::NoFlinkCli {
            python: python.to_path_buf(),
        })
    }
}

/// `unshare --net` with `lo` up, when this process may (root, with unshare and ip).
fn loopback_namespace() -> Vec<String> {
    let prefix: Vec<String> = [
        "unshare",
        "--net",
        "--",
        "sh",
        "-c",
        "ip link set lo up && exec \"$0\" \"$@\"",
    ]
    .map(String::from)
    .to_vec();
    let works = Command::new(&prefix[0])
        .args(&prefix[1..])
        .arg("true")
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        prefix
    } else {
        Vec::new()
    }
}

/// Where `--flink` sends the job.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// A mini-cluster in the PyFlink process.
    Local,
    /// The REST endpoint of a running JobManager.
    JobManager(String),
}

/// `local`, or `HOST:PORT` of a JobManager whose REST endpoint accepts a connection now.
fn target(flink: &str) -> Result<Target, SubmitError> {
    if flink == "local" {
        return Ok(Target::Local);
    }
    let (host, port) = flink
        .rsplit_once(':')
        .filter(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        .ok_or_else(|| SubmitError::BadTarget {
            flink: flink.to_string(),
        })?;
    let addrs: Vec<SocketAddr> = (
        host.trim_matches(['[', ']']),
        port.parse::<u16>().unwrap_or(0),
    )
        .to_socket_addrs()
        .map_err(|source| SubmitError::Resolve {
            flink: flink.to_string(),
            source,
        })?
        .collect();
    let reached = addrs
        .iter()
        .any(|a| TcpStream::connect_timeout(a, Duration::from_secs(5)).is_ok());
    if !reached {
        return Err(SubmitError::Unreachable {
            flink: flink.to_string(),
        });
    }
    Ok(Target::JobManager(flink.to_string()))
}

/// `saql submit`.
pub fn submit(opts: Submit) -> ExitCode {
    let target = match target(opts.flink) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("saql: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(program) = compile(opts.files, "saql submit", opts.skip_unsupported) else {
        return ExitCode::FAILURE;
    };
    let python = match flink_python(opts.python) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("saql: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("saql: Flink needs Java 17 or newer on PATH; `java -version` failed");
        return ExitCode::FAILURE;
    }
    if let Err(e) = std::fs::create_dir_all(opts.output) {
        eprintln!("saql: {}: {e}", opts.output.display());
        return ExitCode::FAILURE;
    }
    let job = opts.output.join("flink_job.py");
    if let Err(e) = std::fs::write(&job, program) {
        eprintln!("saql: {}: {e}", job.display());
        return ExitCode::FAILURE;
    }
    let mut argv = match &target {
        // A mini-cluster in a namespace of its own.
        Target::Local => {
            let mut argv = loopback_namespace();
            argv.extend([python.display().to_string(), job.display().to_string()]);
            argv
        }
        // `flink run` of the PyFlink package, from this namespace, to the JobManager.
        Target::JobManager(address) => match flink_cli(&python) {
            Ok(cli) => {
                let py = python.display().to_string();
                vec![
                    cli.display().to_string(),
                    "run".into(),
                    "-m".into(),
                    address.clone(),
                    "-p".into(),
                    opts.parallelism.to_string(),
                    "-pyexec".into(),
                    py.clone(),
                    "-pyclientexec".into(),
                    py,
                    "-py".into(),
                    job.display().to_string(),
                    "--remote".into(),
                ]
            }
            Err(e) => {
                eprintln!("saql: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    for input in opts.inputs {
        argv.push("--input".into());
        argv.push(input.clone());
    }
    argv.extend(["--output".into(), opts.output.display().to_string()]);
    if target == Target::Local {
        argv.extend(["--parallelism".into(), opts.parallelism.to_string()]);
    }
    let mut path = python
        .parent()
        .map(|d| d.as_os_str().to_owned())
        .unwrap_or_default();
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .env("PATH", path)
        .env("_python_worker_execution_mode", "process")
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("saql: the Flink job failed ({s})");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("saql: {}: {e}", argv[0]);
            ExitCode::FAILURE
        }
    }
}
