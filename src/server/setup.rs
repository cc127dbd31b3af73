//! Why the server's security setup was refused: the users file, the TLS files, an address
//! that may not be served without authentication. Each carries what a caller may act on
//! (the file, the line, the address); its message is what `saql serve` and `saql user`
//! print.

use std::net::SocketAddr;
use std::path::PathBuf;

/// See the module docs.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file could not be read.
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// What the file is (`users file`, `TLS certificate`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line of a users file is wrong.
    #[error("users file {}: {error}", path.display())]
    UsersFile {
        /// The file.
        path: PathBuf,
        /// The line and what is wrong with it.
        error: LineError,
    },
    /// A user name or password that cannot be written to a users file.
    #[error("{0}")]
    BadUser(String),
    /// A TLS certificate or key that cannot be used.
    #[error("{}: {message}", path.display())]
    Tls {
        /// The certificate or key file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A non-loopback address without authentication.
    #[error(
        "refusing to listen on {0} without authentication: without --users every \
         client connects as admin with no password, so only loopback addresses \
         (127.0.0.1, ::1) are allowed; create users with `saql user add NAME --role ROLE \
         --users FILE` and start with `--users FILE` (and --tls-cert/--tls-key), or \
         listen on 127.0.0.1"
    )]
    Unauthenticated(SocketAddr),
    /// The console on a non-loopback address without authentication.
    #[error(
        "refusing to serve the console on {0} without --users: it shows every query's \
         results; listen on 127.0.0.1, or start with --users (the console then needs the \
         token saql prints)"
    )]
    OpenConsole(SocketAddr),
    /// An address that does not resolve.
    #[error("cannot resolve {flag} {addr}: {source}")]
    Resolve {
        /// The flag that gave it (`--listen`, `--http`).
        flag: &'static str,
        /// The address as given.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What is wrong with line `line` (1-based) of a users file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// The line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}
