//! `saql run`: replays recorded events through queries offline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Runs the queries of `files` over `inputs` (`STREAM=PATH`).
pub fn run(
    _files: &[PathBuf],
    _inputs: &[String],
    _output: Option<&Path>,
    _skip_bad_rows: bool,
) -> ExitCode {
    eprintln!("saql run: not implemented yet");
    ExitCode::FAILURE
}
