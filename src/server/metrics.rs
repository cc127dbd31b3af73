//! `/metrics` over HTTP for Prometheus (`saql serve --metrics-listen 127.0.0.1:9187`): a
//! minimal HTTP/1.1 server that answers `GET /metrics` with [`Engine::metrics_text`] and
//! closes the connection. Requests are bounded (8 KiB of headers, 5 seconds) and at most
//! [`MAX_SCRAPERS`] are served at once; anything else gets 404 or 405.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::Engine;

/// Most scrapes served at once; more wait for a slot.
pub const MAX_SCRAPERS: usize = 16;

/// Longest request head accepted.
const MAX_REQUEST_BYTES: usize = 8 << 10;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `/metrics` of `engine` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPERS));
    let accept = async {
        loop {
            let (socket, _) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("metrics: accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let engine = engine.clone();
            tokio::spawn(async move {
                let _ = answer(socket, engine).await;
                drop(permit);
            });
        }
    };
    tokio::select! {
        _ = accept => {}
        _ = shutdown => {}
    }
    Ok(())
}

async fn answer(mut socket: TcpStream, engine: Engine) -> std::io::Result<()> {
    let head = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut socket)).await {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => {
            return respond(&mut socket, "431 Request Header Fields Too Large", "", "").await
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return respond(&mut socket, "408 Request Timeout", "", "").await,
    };
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return respond(&mut socket, "404 Not Found", "text/plain", "try /metrics\n").await;
    }
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut socket,
            "405 Method Not Allowed",
            "text/plain",
            "use GET\n",
        )
        .await;
    }
    let text = match tokio::task::spawn_blocking(move || engine.metrics_text()).await {
        Ok(t) => t,
        Err(_) => {
            return respond(&mut socket, "500 Internal Server Error", "", "").await;
        }
    };
    let body = if method == "HEAD" { "" } else { text.as_str() };
    respond(
        &mut socket,
        "200 OK",
        "text/plain; version=0.0.4; charset=utf-8",
        body,
    )
    .await
}

/// Reads up to the blank line ending the request head; `None` if it is too long.
async fn read_head(socket: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Some(String::from_utf8_lossy(&buf).into_owned()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            return Ok(Some(String::from_utf8_lossy(&buf).into_owned()));
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return Ok(None);
        }
    }
}

async fn respond(
    socket: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.shutdown().await
}
