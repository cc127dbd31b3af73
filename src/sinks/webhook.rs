//! The webhook connector: one HTTP/1.1 `POST` per batch, the body a JSON array of the rows
//! (each with its `"seq"`), the header `Idempotency-Key: first-last`. Any 2xx answer
//! acknowledges the batch; anything else (another status, a refused connection, a timeout)
//! is an error the runtime retries.
//!
//! The request is written by hand over a tokio `TcpStream` (`Connection: close`, a
//! `Content-Length` body, only the status line of the answer read): that one request shape
//! is all a sink sends, and no HTTP client crate is in the dependency tree. Plain `http://`
//! only; https is a follow-up.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Delivery;
use crate::error::{Error, Result};

/// Most bytes of the answer read while looking for its status line.
const MAX_HEAD: usize = 16 << 10;

/// Where a webhook sink posts.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// Sink name (sent as `X-Saql-Sink`).
    pub sink: String,
    /// `host:port` as written in the URL (the `Host` header).
    pub authority: String,
    /// Host to connect to.
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// Path and query.
    pub path: String,
}

impl Webhook {
    /// Posts one batch; returns once a 2xx answer arrived, within `timeout`.
    pub async fn post(&self, batch: &Delivery, timeout: Duration) -> Result<()> {
        match tokio::time::timeout(timeout, self.exchange(batch)).await {
            Ok(result) => result,
            Err(_) => Err(Error::Execution(format!(
                "webhook http://{}{}: no answer within {} ms",
                self.authority,
                self.path,
                timeout.as_millis()
            ))),
        }
    }

    async fn exchange(&self, batch: &Delivery) -> Result<()> {
        let fail = |what: String| {
            Error::Execution(format!(
                "webhook http://{}{}: {what}",
                self.authority, self.path
            ))
        };
        let body = batch.json_array();
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: saql/{}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\
             Idempotency-Key: {}\r\nX-Saql-Sink: {}\r\nConnection: close\r\n\r\n",
            self.path,
            self.authority,
            env!("CARGO_PKG_VERSION"),
            body.len(),
            batch.key(),
            self.sink.replace(['\r', '\n'], " "),
        );
        let mut stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| fail(format!("connecting: {e}")))?;
        stream
            .write_all(head.as_bytes())
            .await
            .map_err(|e| fail(format!("sending: {e}")))?;
        stream
            .write_all(body.as_bytes())
            .await
            .map_err(|e| fail(format!("sending: {e}")))?;
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        let line = loop {
            if let Some(end) = answer.windows(2).position(|w| w == b"\r\n") {
                break String::from_utf8_lossy(&answer[..end]).into_owned();
            }
            if answer.len() > MAX_HEAD {
                return Err(fail("the answer has no status line".into()));
            }
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|e| fail(format!("reading the answer: {e}")))?;
            if n == 0 {
                return Err(fail("the connection closed before an answer".into()));
            }
            answer.extend_from_slice(&chunk[..n]);
        };
        let status =
            status_code(&line).ok_or_else(|| fail(format!("bad status line \"{line}\"")))?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(fail(format!("answered {}", line.trim())))
        }
    }
}

/// The code of an `HTTP/1.x NNN reason` status line.
fn status_code(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/1."))?;
    parts.next()?.parse().ok()
}

#[async_trait::async_trait]
impl super::Sink for Webhook {
    async fn send(&self, batch: &Delivery, timeout: Duration) -> Result<()> {
        self.post(batch, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(status_code("HTTP/1.1 204 No Content"), Some(204));
        assert_eq!(status_code("HTTP/1.0 500"), Some(500));
        assert_eq!(status_code("SSH-2.0-OpenSSH"), None);
        assert_eq!(status_code("HTTP/1.1 abc"), None);
    }
}
