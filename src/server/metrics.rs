//! `/metrics` over HTTP for Prometheus (`saql serve --metrics-listen 127.0.0.1:9187`): the
//! HTTP server of [`super::http`] with the console left out, answering `GET /metrics` with
//! [`Engine::metrics_text`].

use std::future::Future;

use tokio::net::TcpListener;

use super::http::{self, HttpOptions};
use crate::Engine;

/// Most scrapes served at once; more wait for a slot.
pub const MAX_SCRAPERS: usize = http::MAX_REQUESTS;

/// Serves `/metrics` of `engine` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    http::serve(listener, engine, HttpOptions::default(), shutdown).await
}
