//! `saql serve`: the Postgres-protocol server, optionally with the built-in demo.

use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use saql::error::sqlstate;
use saql::server::auth::{check_listen, Users, UsersFile};
use saql::server::http::{ConsoleAccess, HttpOptions};
use saql::server::setup::SetupError;
use saql::server::{tls, Security, ServerConfig};
use saql::sources::demo::{Attack, DemoGenerator};
use saql::time::EventTime;
use saql::{Engine, EngineConfig};

/// The limits `saql serve` puts on statements, results, COPY and connections.
#[derive(clap::Args, Debug, Clone)]
pub struct LimitFlags {
    /// Most client connections at once; one more gets `53300 too many connections`.
    #[arg(long, env = "SAQL_MAX_CONNECTIONS", default_value_t = saql::server::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Of --max-connections, slots only admins may take (PostgreSQL's
    /// superuser_reserved_connections), so that other clients cannot lock the admin out.
    #[arg(long, default_value_t = saql::server::slots::DEFAULT_RESERVED_CONNECTIONS)]
    reserved_connections: usize,
    /// Seconds a client has from connecting to being logged in; then it is disconnected.
    /// Clients count against --max-connections only once logged in.
    #[arg(long, default_value_t = saql::server::slots::DEFAULT_AUTHENTICATION_TIMEOUT.as_secs())]
    authentication_timeout: u64,
    /// Seconds a session may sit idle (no statement running) before it is closed with
    /// 57P05; 0 never closes it.
    #[arg(long, default_value_t = 0)]
    idle_session_timeout: u64,
    /// Default statement timeout in seconds for ad hoc statements (SET statement_timeout
    /// changes it per session); 0 disables it. Past it the statement fails with 57014.
    #[arg(long, default_value_t = 300)]
    statement_timeout: u64,
    /// Seconds that statements and COPYs in flight get to finish on shutdown (SIGTERM or
    /// Ctrl-C); idle sessions are closed at once with 57P01, and the final checkpoint is
    /// written after the last session ends.
    #[arg(long, default_value_t = saql::server::DEFAULT_SHUTDOWN_GRACE.as_secs())]
    shutdown_grace: u64,
    /// Result bytes that may wait for one subscriber; a subscriber further behind is cut off
    /// with 53400.
    #[arg(long, default_value_t = saql::runtime::DEFAULT_SUBSCRIBER_BUFFER_BYTES)]
    subscriber_buffer_bytes: usize,
    /// Default of each session's saql.max_result_rows: most rows an ad hoc SELECT may
    /// return (54000 past it); 0 is no bound (results are streamed as they are produced).
    #[arg(long, default_value_t = 0)]
    max_result_rows: u64,
    /// Default of each session's saql.max_result_bytes: most bytes an ad hoc SELECT may
    /// return, counted as Arrow memory (54000 past it); 0 is no bound.
    #[arg(long, default_value_t = 0)]
    max_result_bytes: u64,
    /// Longest COPY line in bytes (54000 past it, naming the line).
    #[arg(long, default_value_t = 16 << 20)]
    max_copy_line_bytes: usize,
    /// Most bytes one COPY may send; it is held until CopyDone so that it applies atomically
    /// (54000 past it: split the COPY).
    #[arg(long, default_value_t = 1 << 30)]
    max_copy_bytes: usize,
    /// Most bytes of state (groups, buffered rows, learned sets, retained results) one
    /// continuous query may hold; past it the query fails with 53200 and the others run on.
    /// Retained results (--retain-rows) take at most a quarter of it.
    #[arg(long, env = "SAQL_MAX_QUERY_STATE_BYTES", default_value_t = saql::runtime::DEFAULT_MAX_QUERY_STATE_BYTES)]
    max_query_state_bytes: usize,
    /// Bytes of batches (INSERT, COPY, sources) that may wait to enter their streams or be
    /// processed at once; past it writers wait (backpressure).
    #[arg(long, default_value_t = 256 << 20)]
    max_ingest_bytes: usize,
}

impl LimitFlags {
    /// `config` with these limits.
    pub fn apply(&self, config: EngineConfig) -> EngineConfig {
        EngineConfig {
            subscriber_buffer_bytes: self.subscriber_buffer_bytes,
            max_result_rows: self.max_result_rows,
            max_result_bytes: self.max_result_bytes,
            max_copy_line_bytes: self.max_copy_line_bytes,
            max_copy_bytes: self.max_copy_bytes,
            max_query_state_bytes: self.max_query_state_bytes,
            max_ingest_bytes: self.max_ingest_bytes,
            ..config
        }
    }

    /// The connection limits.
    pub fn server(&self) -> ServerConfig {
        let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
        ServerConfig {
            max_connections: self.max_connections.max(1),
            reserved_connections: self.reserved_connections,
            authentication_timeout: Duration::from_secs(self.authentication_timeout.max(1)),
            idle_session_timeout: secs(self.idle_session_timeout),
            statement_timeout: secs(self.statement_timeout),
            shutdown_grace: Duration::from_secs(self.shutdown_grace),
            security: Security::default(),
        }
    }
}

/// Who may connect: users and roles, TLS.
#[derive(clap::Args, Debug, Clone)]
pub struct SecurityFlags {
    /// Users file (`saql user add` writes it): clients authenticate with SCRAM-SHA-256 and
    /// get their user's role. Without it every client is admin with no password, and only
    /// loopback addresses may be listened on.
    #[arg(long, env = "SAQL_USERS", value_name = "FILE")]
    users: Option<PathBuf>,
    /// TLS certificate chain (PEM); with --tls-key, clients may connect with TLS.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Refuse clients that do not use TLS (28000); needs --tls-cert and --tls-key.
    #[arg(long, requires = "tls_cert")]
    require_tls: bool,
}

impl SecurityFlags {
    /// Loads the users file and the TLS certificate, and checks that `listen` may be served
    /// by them (a non-loopback address needs --users).
    pub fn load(&self, listen: &str) -> Result<Security, SetupError> {
        let users = match &self.users {
            Some(path) => Some(Arc::new(Users::load(path)?)),
            None => None,
        };
        // The users file is read again on SIGHUP.
        let users_file = users.as_deref().cloned().map(UsersFile::new);
        let addrs = listen
            .to_socket_addrs()
            .map_err(|source| SetupError::Resolve {
                flag: "--listen",
                addr: listen.to_string(),
                source,
            })?;
        for addr in addrs {
            check_listen(&addr, users.as_deref())?;
        }
        if let Some(users) = &users {
            if users.is_empty() {
                tracing::warn!("the users file has no users: nobody can connect");
            }
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
            _ => None,
        };
        if users.is_some() && tls.is_none() {
            tracing::warn!(
                "serving without TLS: passwords are not sent (SCRAM), but queries and results \
                 are readable on the network; add --tls-cert and --tls-key"
            );
        }
        let cert_pem = match &self.tls_cert {
            Some(cert) => Some(Arc::new(std::fs::read(cert).map_err(|source| {
                SetupError::Read {
                    what: "TLS certificate",
                    path: cert.clone(),
                    source,
                }
            })?)),
            None => None,
        };
        Ok(Security {
            users: users_file,
            tls,
            require_tls: self.require_tls,
            cert_pem,
        })
    }

    /// Checks that the console may listen on `addr`: a non-loopback address needs --users
    /// (the console then needs its token).
    pub fn check_http(&self, addr: &str) -> Result<(), SetupError> {
        let addrs = addr
            .to_socket_addrs()
            .map_err(|source| SetupError::Resolve {
                flag: "--http",
                addr: addr.to_string(),
                source,
            })?;
        for a in addrs {
            if self.users.is_none() && !a.ip().is_loopback() {
                return Err(SetupError::OpenConsole(a));
            }
        }
        Ok(())
    }
}

/// Where `saql serve` answers HTTP.
#[derive(Debug, Clone, Default)]
pub struct HttpListeners {
    /// `--metrics-listen`: /metrics only.
    pub metrics: Option<String>,
    /// `--http` (or the demo's default): the console and /metrics.
    pub console: Option<String>,
    /// The console address is the demo's default: a port in use is a warning, not an error.
    pub console_is_default: bool,
    /// `--http-allowed-hosts`: names requests may give as `Host`.
    pub allowed_hosts: Vec<String>,
    /// `--metrics-public`: the console listener's /metrics needs no token.
    pub metrics_public: bool,
}

/// Where `serve --demo` serves the console unless `--http` says otherwise.
pub const DEMO_CONSOLE: &str = "127.0.0.1:5480";

/// Runs the server until SIGTERM or Ctrl-C, then drains its sessions and writes a last
/// checkpoint.
pub fn serve(
    listen: String,
    http: HttpListeners,
    config: EngineConfig,
    mut server: ServerConfig,
    security: &SecurityFlags,
    demo_queries: Option<PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    // Before anything is opened or bound: a refusal leaves no trace.
    server.security = security.load(&listen)?;
    if let Some(addr) = &http.console {
        security.check_http(addr)?;
    }
    let users_path = security.users.clone();
    // Statements are parsed, planned and run on these threads; deep (but allowed)
    // expressions recurse in sqlparser, DataFusion and our planner, so their stacks are
    // larger than the 2 MiB default (memory is only committed as it is touched).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(saql::limits::THREAD_STACK_BYTES)
        .build()?;
    let data_dir = config.data_dir.clone().unwrap_or_default();
    let durable = config.data_dir.is_some();
    runtime.block_on(async move {
        let engine = Engine::open(config)?;
        if let Some(dir) = &demo_queries {
            start_demo(&engine, dir).await?;
        }
        let listener = tokio::net::TcpListener::bind(&listen).await?;
        if let Some(addr) = &http.metrics {
            start_http(&engine, addr, None, &http).await?;
        }
        let console = match &http.console {
            Some(addr) => {
                let access = match server.security.users {
                    Some(_) => ConsoleAccess::random_token(),
                    None => ConsoleAccess::Open,
                };
                match start_http(&engine, addr, Some(access), &http).await {
                    Ok(url) => Some(url),
                    Err(e) if http.console_is_default => {
                        tracing::warn!("no console: {e} (choose another address with --http)");
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
            None => None,
        };
        let security = &server.security;
        let (user, auth) = match &security.users {
            Some(users) => (
                "USER",
                format!(
                    "{} users, SCRAM-SHA-256, reloaded on SIGHUP",
                    users.current().len()
                ),
            ),
            None => (
                "saql",
                "no authentication: every client is admin".to_string(),
            ),
        };
        let tls = match (&security.tls, security.require_tls) {
            (None, _) => "no TLS",
            (Some(_), false) => "TLS offered",
            (Some(_), true) => "TLS required",
        };
        tracing::info!(
            "saql listening on {} (data in {}; {auth}; {tls}); connect with: psql -h {} -p {} \
             -U {user} saql{}",
            listener.local_addr()?,
            data_dir.display(),
            listener.local_addr()?.ip(),
            listener.local_addr()?.port(),
            console
                .map(|url| format!("; console on {url}"))
                .unwrap_or_default()
        );
        if let (Some(users), Some(path)) = (&security.users, &users_path) {
            reload_users_on_hangup(users.clone(), path.clone())?;
        }
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let shutdown = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: shutting down"),
                _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
            }
        };
        saql::server::run_with(listener, engine.clone(), server, shutdown).await?;
        if durable {
            // A restart then replays nothing: the log up to here is in this checkpoint.
            let written = saql::spawn::blocking(move || engine.checkpoint()).await??;
            tracing::info!(
                "final checkpoint written (epoch {}, {} bytes of state)",
                written.epoch,
                written.bytes
            );
        }
        Ok(())
    })
}

/// Serves HTTP on `addr` in the background: the console with `console`'s access, and
/// /metrics. Returns the address to open (with the token, if there is one).
async fn start_http(
    engine: &Engine,
    addr: &str,
    console: Option<ConsoleAccess>,
    http: &HttpListeners,
) -> Result<String, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    let url = match &console {
        Some(ConsoleAccess::Token(token)) => format!("http://{local}/?token={token}"),
        Some(ConsoleAccess::Open) => format!("http://{local}/"),
        None => format!("http://{local}/metrics"),
    };
    if !local.ip().is_loopback() {
        tracing::warn!(
            "metrics on {local} are readable by anyone who reaches it (no authentication)"
        );
    }
    match &console {
        Some(_) => tracing::info!("console (and Prometheus metrics) on {url}"),
        None => tracing::info!("Prometheus metrics on {url}"),
    }
    let engine = engine.clone();
    let options = HttpOptions {
        console,
        allowed_hosts: http.allowed_hosts.clone(),
        metrics_public: http.metrics_public,
    };
    saql::spawn::task(async move {
        if let Err(e) =
            saql::server::http::serve(listener, engine, options, std::future::pending()).await
        {
            tracing::warn!("http server on {local} stopped: {e}");
        }
    });
    Ok(url)
}

/// Reads the users file again on each SIGHUP (`kill -HUP`), as PostgreSQL reloads its
/// configuration: a file that does not read or parse is reported and the users before it
/// stay.
fn reload_users_on_hangup(users: UsersFile, path: PathBuf) -> std::io::Result<()> {
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    saql::spawn::task(async move {
        while hangups.recv().await.is_some() {
            match Users::load(&path) {
                Ok(loaded) => {
                    tracing::info!(
                        "SIGHUP: reloaded {} users from {}",
                        loaded.len(),
                        path.display()
                    );
                    users.replace(loaded);
                }
                Err(e) => tracing::warn!("SIGHUP: {e}; the users loaded before stay"),
            }
        }
    });
    Ok(())
}

/// The demo queries built into the binary (`queries/` as it was built), registered by
/// `serve --demo` when its query directory is not there, so it works wherever it is started.
const BUILT_IN_QUERIES: &[(&str, &str)] = &[
    (
        "00_streams.sql",
        include_str!("../../queries/00_streams.sql"),
    ),
    ("01_tables.sql", include_str!("../../queries/01_tables.sql")),
    ("alerts.sql", include_str!("../../queries/alerts.sql")),
    ("apt_chain.sql", include_str!("../../queries/apt_chain.sql")),
    (
        "apt_chain_evidence.sql",
        include_str!("../../queries/apt_chain_evidence.sql"),
    ),
    (
        "big_senders.sql",
        include_str!("../../queries/big_senders.sql"),
    ),
    (
        "brute_force_evidence.sql",
        include_str!("../../queries/brute_force_evidence.sql"),
    ),
    (
        "brute_force_sources.sql",
        include_str!("../../queries/brute_force_sources.sql"),
    ),
    (
        "cmd_starts_osql.sql",
        include_str!("../../queries/cmd_starts_osql.sql"),
    ),
    ("cpu_hot.sql", include_str!("../../queries/cpu_hot.sql")),
    ("cpu_spike.sql", include_str!("../../queries/cpu_spike.sql")),
    (
        "exfil_outlier.sql",
        include_str!("../../queries/exfil_outlier.sql"),
    ),
    (
        "external_logins.sql",
        include_str!("../../queries/external_logins.sql"),
    ),
    (
        "failed_logins.sql",
        include_str!("../../queries/failed_logins.sql"),
    ),
    (
        "hot_critical_hosts.sql",
        include_str!("../../queries/hot_critical_hosts.sql"),
    ),
    ("incidents.sql", include_str!("../../queries/incidents.sql")),
    (
        "login_without_mfa.sql",
        include_str!("../../queries/login_without_mfa.sql"),
    ),
    (
        "send_surge.sql",
        include_str!("../../queries/send_surge.sql"),
    ),
    (
        "start_then_connect.sql",
        include_str!("../../queries/start_then_connect.sql"),
    ),
    (
        "threat_intel_hits.sql",
        include_str!("../../queries/threat_intel_hits.sql"),
    ),
    (
        "tool_connections.sql",
        include_str!("../../queries/tool_connections.sql"),
    ),
    (
        "web_children.sql",
        include_str!("../../queries/web_children.sql"),
    ),
    (
        "web_shell_tree.sql",
        include_str!("../../queries/web_shell_tree.sql"),
    ),
];

/// Declares the demo streams, registers the queries found in `dir` (or the built-in ones when
/// there is no such directory), and feeds the streams
/// with generated host activity in real time, injecting an attack 5 seconds in and every 20
/// seconds after.
async fn start_demo(engine: &Engine, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    for ddl in DemoGenerator::streams_ddl().split(';') {
        if ddl.trim().is_empty() {
            continue;
        }
        let ddl = ddl.replacen("CREATE STREAM", "CREATE STREAM IF NOT EXISTS", 1);
        engine.execute(&ddl).await?;
    }
    let files = match std::fs::read_dir(dir) {
        Ok(rd) => {
            let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.retain(|p| p.extension().is_some_and(|e| e == "sql"));
            paths.sort();
            let mut files = Vec::new();
            for path in paths {
                files.push((path.display().to_string(), std::fs::read_to_string(&path)?));
            }
            files
        }
        Err(_) => {
            tracing::info!(
                "no query directory {}: registering the demo queries built into saql",
                dir.display()
            );
            BUILT_IN_QUERIES
                .iter()
                .map(|(name, text)| (format!("built-in queries/{name}"), text.to_string()))
                .collect()
        }
    };
    register_files(engine, files).await;
    let engine = engine.clone();
    saql::spawn::task(async move {
        let mut generator = DemoGenerator::new(42, 6);
        let attacks = [
            Attack::StolenKey,
            Attack::BruteForce,
            Attack::CpuSpike,
            Attack::NetworkOutlier,
            Attack::UnusualChild,
            Attack::DataExfiltration,
        ];
        let mut next_attack = 0usize;
        let mut from = EventTime::now();
        let mut ticks = 0u64;
        let mut interval = tokio::time::interval(Duration::from_millis(500));
        loop {
            interval.tick().await;
            ticks += 1;
            let to = EventTime::now();
            // The first 5 s in, then every 20 s.
            if ticks % 40 == 10 {
                generator.inject(
                    attacks[next_attack % attacks.len()],
                    to.plus(Duration::from_millis(100)),
                );
                next_attack += 1;
            }
            let batches = match generator.generate(from, to) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!("demo generator: {e}");
                    continue;
                }
            };
            from = to;
            let engine = engine.clone();
            let _ = saql::spawn::blocking(move || {
                for (stream, batch) in batches {
                    if let Err(e) = engine.insert_batch(stream, batch) {
                        tracing::warn!("demo insert into {stream}: {e}");
                    }
                }
            })
            .await;
        }
    });
    Ok(())
}

/// Registers the statements of query files (streams, tables, views, queries), each file as a
/// whole; a file that reads a view or query of a later file (42P01) is tried again after the
/// others. What exists already (a restart over a data directory) is left as it is.
async fn register_files(engine: &Engine, files: Vec<(String, String)>) {
    let mut pending = files;
    loop {
        let before = pending.len();
        let mut waiting = Vec::new();
        for (file, text) in pending {
            let sql = text
                .replace(
                    "CREATE CONTINUOUS QUERY ",
                    "CREATE CONTINUOUS QUERY IF NOT EXISTS ",
                )
                .replace("CREATE STREAM ", "CREATE STREAM IF NOT EXISTS ")
                .replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ")
                .replace("CREATE VIEW ", "CREATE VIEW IF NOT EXISTS ")
                .replace("IF NOT EXISTS IF NOT EXISTS", "IF NOT EXISTS");
            match engine.execute(&sql).await {
                Ok(_) => tracing::info!("registered {file}"),
                Err(e) if e.sqlstate() == sqlstate::UNDEFINED_TABLE => {
                    waiting.push((file, text, e))
                }
                Err(e) => tracing::warn!("skipping {file}: {e}"),
            }
        }
        if waiting.is_empty() || waiting.len() == before {
            for (file, _, e) in waiting {
                tracing::warn!("skipping {file}: {e}");
            }
            break;
        }
        pending = waiting.into_iter().map(|(f, t, _)| (f, t)).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::{register_files, BUILT_IN_QUERIES};

    /// Views in the query directory are registered with the queries, in the order they read
    /// each other, and again after a restart (they exist then: nothing fails).
    #[test]
    fn views_in_query_files_are_registered() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let engine = saql::Engine::open(saql::EngineConfig::default()).unwrap();
        let files = vec![
            (
                "a.sql".to_string(),
                "CREATE CONTINUOUS QUERY busy AS SELECT host, window_end, n FROM per_min \
                 WHERE n > 1;"
                    .to_string(),
            ),
            (
                "b.sql".to_string(),
                "CREATE VIEW per_min AS SELECT host, window_end, COUNT(*) AS n \
                 FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, \
                 window_end;"
                    .to_string(),
            ),
            (
                "c.sql".to_string(),
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, WATERMARK FOR ts AS ts);"
                    .to_string(),
            ),
        ];
        rt.block_on(register_files(&engine, files.clone()));
        rt.block_on(register_files(&engine, files));
        let shown = rt.block_on(async {
            let sql = "SELECT relname || ' ' || relkind FROM pg_class \
                       WHERE relname IN ('busy', 'per_min') ORDER BY relname";
            let mut names = Vec::new();
            for r in engine.execute(sql).await.unwrap() {
                if let saql::StatementResult::Rows { batches, .. } = r.collect().await.unwrap() {
                    for b in batches {
                        for i in 0..b.num_rows() {
                            names.push(
                                datafusion::arrow::util::display::array_value_to_string(
                                    b.column(0),
                                    i,
                                )
                                .unwrap(),
                            );
                        }
                    }
                }
            }
            names
        });
        assert_eq!(shown, ["busy m", "per_min v"]);
    }

    /// The built-in demo queries are `queries/*.sql`, every file, as they are now.
    #[test]
    fn built_in_queries_are_the_query_directory() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("queries");
        let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sql"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        on_disk.sort();
        let built_in: Vec<(String, String)> = BUILT_IN_QUERIES
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(built_in, on_disk, "add new query files to BUILT_IN_QUERIES");
    }
}
