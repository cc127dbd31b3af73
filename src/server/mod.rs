//! The Postgres wire protocol front end: accepts connections, serves each with the handlers
//! in [`handler`], and ticks the engine so idle streams advance and departed subscribers are
//! freed. Tests bind `127.0.0.1:0` and call [`run`] just as `saql serve` does.

pub mod cursor;
pub mod encode;
pub mod extended;
pub mod handler;
pub mod portal;
pub mod prepared;
mod startup;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pgwire::api::ConnectionManager;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::Engine;

/// Most clients served at once; further connections wait for a slot.
pub const MAX_CONNECTIONS: usize = 256;

/// How often the engine's housekeeping runs.
const TICK: Duration = Duration::from_millis(200);

/// Serves `engine` on `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    engine: Engine,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let manager = Arc::new(ConnectionManager::new());
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let ticker = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            loop {
                interval.tick().await;
                let engine = engine.clone();
                let _ = tokio::task::spawn_blocking(move || engine.tick()).await;
            }
        })
    };
    let mut connections = tokio::task::JoinSet::new();
    let accept = async {
        loop {
            let permit = limit
                .clone()
                .acquire_owned()
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let (socket, peer) = listener.accept().await?;
            let _ = socket.set_nodelay(true);
            let handlers = Arc::new(handler::Connection::new(engine.clone(), manager.clone()));
            while connections.try_join_next().is_some() {}
            connections.spawn(async move {
                if let Err(e) = pgwire::tokio::process_socket(socket, None, handlers).await {
                    tracing::debug!("connection from {peer} ended: {e}");
                }
                drop(permit);
            });
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    };
    let result = tokio::select! {
        r = accept => r,
        _ = shutdown => Ok(()),
    };
    ticker.abort();
    let _ = ticker.await;
    // Connections hold the engine: end them, so that a caller that drops its own handle
    // closes the engine (and frees its data directory) when this returns.
    connections.shutdown().await;
    result
}
