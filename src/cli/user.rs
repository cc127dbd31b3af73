//! `saql user`: adds users to (or updates them in) the users file of `saql serve --users`.
//! The password is read from `SAQL_PASSWORD` or stdin, never from the command line, where
//! other local users could see it.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use saql::server::auth::{add_user, Role};

/// The `saql user` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum UserCommand {
    /// Add a user, or replace its role and password: writes NAME ROLE SCRAM-SHA-256$...
    /// (the file keeps a verifier, not the password). The password comes from SAQL_PASSWORD
    /// or the first line of stdin.
    Add {
        /// User name.
        name: String,
        /// admin (everything), writer (INSERT/COPY and reading) or reader (SELECT, SUBSCRIBE,
        /// SHOW, EXPLAIN, cursors).
        #[arg(long)]
        role: Role,
        /// The users file.
        #[arg(long, env = "SAQL_USERS", default_value = "saql-users")]
        users: PathBuf,
    },
}

/// Runs a `saql user` subcommand.
pub fn run(command: UserCommand) -> ExitCode {
    match command {
        UserCommand::Add { name, role, users } => {
            let password = match password() {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("saql: cannot read the password from stdin: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match add_user(&users, &name, role, &password) {
                Ok(()) => {
                    eprintln!("user \"{name}\" ({role}) written to {}", users.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("saql: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The password: `SAQL_PASSWORD`, else the first line of stdin.
fn password() -> std::io::Result<String> {
    if let Ok(p) = std::env::var("SAQL_PASSWORD") {
        return Ok(p);
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        // Echo is not turned off: type it where nobody watches, or pipe it in.
        eprint!("password: ");
        let _ = std::io::stderr().flush();
    }
    let mut line = String::new();
    stdin.lock().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}
