//! The Postgres wire protocol front end: accepts connections, serves each with the handlers
//! in [`handler`], and ticks the engine so idle streams advance and departed subscribers are
//! freed. Tests bind `127.0.0.1:0` and call [`run`] just as `saql serve` does.

pub mod admission;
pub mod auth;
pub mod auth_delay;
pub mod bind;
pub mod console;
pub mod cursor;
pub mod encode;
pub mod extended;
pub mod handler;
pub mod http;
pub mod metrics;
pub mod portal;
pub mod prepared;
mod rows;
pub mod session;
pub mod setup;
pub mod slots;
mod startup;
pub mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pgwire::api::ConnectionManager;
use tokio::net::TcpListener;

use crate::Engine;

/// Default for the most clients served at once; one more is refused with 53300.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Most clients served at once by [`run`].
pub const MAX_CONNECTIONS: usize = DEFAULT_MAX_CONNECTIONS;

/// Default statement timeout of ad hoc SELECTs.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(300);

/// How often the engine's housekeeping runs.
const TICK: Duration = Duration::from_millis(200);

/// How long the accept loop waits after a failed `accept` (out of file descriptors, ...).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Default time statements and COPYs in flight get to finish when the server shuts down.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The server's connection limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Most clients logged in at once; one more gets `53300 too many clients`.
    pub max_connections: usize,
    /// Of those, slots only admins may take.
    pub reserved_connections: usize,
    /// How long a client may take to log in before it is disconnected.
    pub authentication_timeout: Duration,
    /// Close sessions idle this long (57P05); None: never.
    pub idle_session_timeout: Option<Duration>,
    /// Default `statement_timeout` of each session (57014 past it); None: none.
    pub statement_timeout: Option<Duration>,
    /// At shutdown, how long statements and COPYs in flight may go on before their sessions
    /// are closed anyway (idle sessions are closed at once with 57P01).
    pub shutdown_grace: Duration,
    /// Who may connect, and over what.
    pub security: Security,
}

/// Authentication and TLS of the server.
#[derive(Clone, Default)]
pub struct Security {
    /// Users and roles; None: every client is admin, no password (loopback only).
    pub users: Option<auth::UsersFile>,
    /// TLS offered to clients that ask for it.
    pub tls: Option<tls::TlsAcceptor>,
    /// Refuse clients that do not use TLS (28000).
    pub require_tls: bool,
    /// The TLS certificate chain (PEM), for SCRAM channel binding over TLS
    /// (`SCRAM-SHA-256-PLUS`, `tls-server-end-point`).
    pub cert_pem: Option<Arc<Vec<u8>>>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("users", &self.users.as_ref().map(|u| u.current().len()))
            .field("tls", &self.tls.is_some())
            .field("require_tls", &self.require_tls)
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            reserved_connections: slots::DEFAULT_RESERVED_CONNECTIONS,
            authentication_timeout: slots::DEFAULT_AUTHENTICATION_TIMEOUT,
            idle_session_timeout: None,
            statement_timeout: Some(DEFAULT_STATEMENT_TIMEOUT),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            security: Security::default(),
        }
    }
}

/// Serves `engine` on `listener` until `shutdown` completes, with the default limits.
pub async fn run(
    listener: TcpListener,
    engine: Engine,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    run_with(listener, engine, ServerConfig::default(), shutdown).await
}

/// Serves `engine` on `listener` with `config`'s limits until `shutdown` completes, then
/// drains: stops accepting, closes idle sessions with 57P01, lets statements and COPYs in
/// flight finish (each session closes when it is idle) for up to `config.shutdown_grace`,
/// and returns when every connection has ended.
pub async fn run_with(
    listener: TcpListener,
    engine: Engine,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let manager = Arc::new(ConnectionManager::new());
    let slots = slots::Slots::new(
        config.max_connections,
        config.reserved_connections,
        config.authentication_timeout,
    );
    let ticker = {
        let engine = engine.clone();
        crate::spawn::task(async move {
            let mut interval = tokio::time::interval(TICK);
            loop {
                interval.tick().await;
                let engine = engine.clone();
                let _ = crate::spawn::blocking(move || engine.tick()).await;
            }
        })
    };
    let mut connections = tokio::task::JoinSet::new();
    let (closing, closing_rx) = tokio::sync::watch::channel(false);
    let accept = async {
        loop {
            let (socket, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept, ...: the
                    // listener is still good.
                    tracing::warn!("accepting a connection failed: {e}; retrying");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            while connections.try_join_next().is_some() {}
            // A slot is taken once the client logs in; until then it waits in the start-up
            // room, for at most the authentication timeout.
            let session = session::Session::new(config.statement_timeout);
            let (waiting, evicted) = slots.enter();
            session.wait_for_login(waiting);
            let handlers = Arc::new(
                handler::Connection::new(engine.clone(), manager.clone())
                    .with_session(session.clone())
                    .with_slots(slots.clone())
                    .with_auth(
                        config.security.users.as_ref().map(auth::UsersFile::current),
                        config.security.require_tls,
                    )
                    .with_channel_binding(config.security.cert_pem.clone()),
            );
            let lifetime = admission::Lifetime {
                idle_timeout: config.idle_session_timeout,
                closing: closing_rx.clone(),
                grace: config.shutdown_grace,
                login: admission::LoginDeadline {
                    timeout: config.authentication_timeout,
                    evicted,
                },
            };
            let tls = config.security.tls.clone();
            crate::spawn::task_in(&mut connections, async move {
                if let Err(e) = admission::serve(socket, tls, handlers, session, lifetime).await {
                    tracing::debug!("connection from {peer} ended: {e}");
                }
            });
        }
    };
    tokio::select! {
        () = accept => {}
        _ = shutdown => {}
    }
    // New clients are refused from here on; the sessions learn that the server closes.
    drop(listener);
    let _ = closing.send(true);
    let open = connections.len();
    if open > 0 {
        tracing::info!("shutting down: waiting for {open} connections to finish");
    }
    // Each session ends itself within the grace period (and a few seconds to write out
    // its last response); this bound only guards against one that does not.
    let drained = async { while connections.join_next().await.is_some() {} };
    let backstop = config.shutdown_grace + Duration::from_secs(10);
    if tokio::time::timeout(backstop, drained).await.is_err() {
        tracing::warn!("shutdown: connections still open after the grace period; closing them");
    }
    ticker.abort();
    let _ = ticker.await;
    // Connections hold the engine: end any left, so that a caller that drops its own
    // handle closes the engine (and frees its data directory) when this returns.
    connections.shutdown().await;
    Ok(())
}
