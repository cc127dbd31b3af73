//! `saql test`: runs the test cases written in query files.

use std::path::PathBuf;
use std::process::ExitCode;

/// Runs every test case in `files`.
pub fn run(_files: &[PathBuf]) -> ExitCode {
    eprintln!("saql test: not implemented yet");
    ExitCode::FAILURE
}
