//! saql's own small HTTP/1.1 server: `/metrics` for Prometheus and, when asked for, the web
//! console (`saql serve --http 127.0.0.1:PORT`, see [`super::console`]). One request per
//! connection (`Connection: close`); request heads are bounded (8 KiB, 5 seconds) and read
//! before a request takes one of the [`MAX_REQUESTS`] slots, so that clients sending half a
//! request delay nobody; at most [`MAX_CONNECTIONS`] connections are open and
//! [`MAX_EVENT_STREAMS`] event streams served at once.
//!
//! A request must name this server in its `Host` header: an IP address, `localhost`, or a
//! name given with `--http-allowed-hosts` (421 otherwise), so that a web page cannot read the
//! console through a name it rebinds to 127.0.0.1 (DNS rebinding). Every response forbids
//! framing and scripts from elsewhere (`Content-Security-Policy`, `X-Frame-Options`).
//!
//! The console's data (the overview, the query results and `/metrics`, whose counters name
//! every stream and query) is guarded by a token when the server has users
//! ([`ConsoleAccess::Token`]), given as `?token=` (an `EventSource` cannot send headers) or
//! `Authorization: Bearer`; `--metrics-public` opens `/metrics` again. The page itself holds
//! no data. The metrics-only listener (`--metrics-listen`) has no token.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::console;
use crate::Engine;

/// Most plain requests (metrics, pages, overview) served at once; more wait for a slot.
pub const MAX_REQUESTS: usize = 16;

/// Most HTTP connections open at once (reading their request or waiting for a slot); one more
/// is closed at once.
pub const MAX_CONNECTIONS: usize = 512;

/// Most console event streams open at once; one more gets 503.
pub const MAX_EVENT_STREAMS: usize = 64;

/// Longest request head accepted.
const MAX_REQUEST_BYTES: usize = 8 << 10;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Who may use the console.
#[derive(Clone, PartialEq, Eq)]
pub enum ConsoleAccess {
    /// Anyone who reaches the listener (a server without users: loopback only).
    Open,
    /// Requests must carry this token.
    Token(String),
}

impl std::fmt::Debug for ConsoleAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsoleAccess::Open => f.write_str("Open"),
            ConsoleAccess::Token(_) => f.write_str("Token(..)"),
        }
    }
}

impl ConsoleAccess {
    /// A fresh random token of 128 bits, as 32 hex digits.
    pub fn random_token() -> ConsoleAccess {
        use rand::RngCore;
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        ConsoleAccess::Token(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Whether `request` may see the console.
    fn allows(&self, request: &Request) -> bool {
        let ConsoleAccess::Token(token) = self else {
            return true;
        };
        let bearer = request
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "));
        let given = request.param("token").or(bearer).unwrap_or("");
        // Compared in time independent of where they differ.
        given.len() == token.len()
            && given
                .bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// What the server answers besides `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// The console, and who may use it; `None`: metrics only.
    pub console: Option<ConsoleAccess>,
    /// Host names (besides IP addresses and `localhost`) requests may name in `Host`.
    pub allowed_hosts: Vec<String>,
    /// `/metrics` without the console's token even when the console has one
    /// (`--metrics-public`); off by default, since the counters name every stream and query.
    pub metrics_public: bool,
}

impl HttpOptions {
    /// Whether a request naming `host` in its `Host` header is for this server: IP
    /// addresses cannot be rebound, `localhost` resolves only here, other names must be
    /// listed. A request without `Host` (HTTP/1.0) does not come from a browser.
    fn serves_host(&self, host: Option<&str>) -> bool {
        let Some(host) = host else {
            return true;
        };
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        name.parse::<std::net::IpAddr>().is_ok()
            || name == "localhost"
            || self
                .allowed_hosts
                .iter()
                .any(|a| a.eq_ignore_ascii_case(&name))
    }
}

/// A parsed request head.
#[derive(Debug)]
pub struct Request {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The path, without the query string, percent-decoded.
    pub path: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
}

impl Request {
    fn parse(head: &str) -> Request {
        let mut lines = head.lines();
        let mut parts = lines.next().unwrap_or("").split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let query = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(k), percent_decode(v))
            })
            .collect();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Request {
            method,
            path: percent_decode(path),
            query,
            headers,
        }
    }

    /// A header's value (name in lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A query-string parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `%XX` escapes decoded (and `+` as a space); invalid escapes are kept as they are.
fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', hi, lo]) => hex(*hi).zip(hex(*lo)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Serves `engine` over HTTP on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    options: HttpOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let requests = Arc::new(Semaphore::new(MAX_REQUESTS));
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let streams = Arc::new(Semaphore::new(MAX_EVENT_STREAMS));
    let options = Arc::new(options);
    let accept = async {
        loop {
            let (socket, _) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("http: accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(open) = connections.clone().try_acquire_owned() else {
                drop(socket);
                continue;
            };
            let (engine, options) = (engine.clone(), options.clone());
            let (requests, streams) = (requests.clone(), streams.clone());
            crate::spawn::task(async move {
                let _ = answer(socket, engine, &options, requests, streams).await;
                drop(open);
            });
        }
    };
    tokio::select! {
        _ = accept => {}
        _ = shutdown => {}
    }
    Ok(())
}

async fn answer(
    mut socket: TcpStream,
    engine: Engine,
    options: &HttpOptions,
    requests: Arc<Semaphore>,
    streams: Arc<Semaphore>,
) -> std::io::Result<()> {
    let head = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut socket)).await {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => {
            return respond(&mut socket, "431 Request Header Fields Too Large", "", "").await
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return respond(&mut socket, "408 Request Timeout", "", "").await,
    };
    let request = Request::parse(&head);
    if !options.serves_host(request.header("host")) {
        return respond(
            &mut socket,
            "421 Misdirected Request",
            TEXT,
            "this Host is not served here: use the address saql printed, or name the host \
             with --http-allowed-hosts\n",
        )
        .await;
    }
    // The whole request is here: now it waits for a slot to be answered.
    let Ok(permit) = requests.acquire_owned().await else {
        return Ok(());
    };
    if request.method != "GET" && request.method != "HEAD" {
        return respond(&mut socket, "405 Method Not Allowed", TEXT, "use GET\n").await;
    }
    let token_missing = |access: &ConsoleAccess| !access.allows(&request);
    if request.path == "/metrics"
        && !options.metrics_public
        && options.console.as_ref().is_some_and(token_missing)
    {
        return respond(
            &mut socket,
            "401 Unauthorized",
            TEXT,
            "with --users, /metrics on the console's listener needs its token (Authorization: \
             Bearer or ?token=); scrape --metrics-listen instead, or pass --metrics-public\n",
        )
        .await;
    }
    if request.path == "/metrics" {
        let text = match crate::spawn::blocking(move || engine.metrics_text()).await {
            Ok(t) => t,
            Err(_) => return respond(&mut socket, "500 Internal Server Error", "", "").await,
        };
        let body = if request.method == "HEAD" { "" } else { &text };
        return respond(&mut socket, "200 OK", PROMETHEUS, body).await;
    }
    let Some(access) = &options.console else {
        return respond(&mut socket, "404 Not Found", TEXT, "try /metrics\n").await;
    };
    let data = console::is_event_stream(&request.path) || request.path == "/api/overview";
    if data && !access.allows(&request) {
        return respond(
            &mut socket,
            "401 Unauthorized",
            TEXT,
            "the console needs the token saql printed at start: open the address it printed \
             (?token=...)\n",
        )
        .await;
    }
    if console::is_event_stream(&request.path) {
        // A stream is long-lived: it holds a stream slot, not a request slot.
        drop(permit);
        let Ok(_slot) = streams.try_acquire_owned() else {
            return respond(
                &mut socket,
                "503 Service Unavailable",
                TEXT,
                "too many console event streams open\n",
            )
            .await;
        };
        return console::events(socket, engine, &request).await;
    }
    let (status, content_type, body) = console::page(&engine, &request.path).await;
    let body = if request.method == "HEAD" { "" } else { &body };
    respond(&mut socket, status, content_type, body).await
}

/// `text/plain`.
pub const TEXT: &str = "text/plain; charset=utf-8";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

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

/// Writes a whole response and closes the connection.
pub async fn respond(
    socket: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\
         X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n\
         X-Frame-Options: DENY\r\n\
         Content-Security-Policy: default-src 'self'; frame-ancestors 'none'\r\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_path_query_and_headers() {
        let r = Request::parse(
            "GET /queries/failed%20logins/events?token=ab%2Bc&x HTTP/1.1\r\n\
             Host: h\r\nLast-Event-ID: 42\r\n\r\n",
        );
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/queries/failed logins/events");
        assert_eq!(r.param("token"), Some("ab+c"));
        assert_eq!(r.param("x"), Some(""));
        assert_eq!(r.header("last-event-id"), Some("42"));
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn a_token_console_needs_the_token() {
        let access = ConsoleAccess::Token("s3cret".into());
        let with = |head: &str| access.allows(&Request::parse(head));
        assert!(with("GET /?token=s3cret HTTP/1.1\r\n\r\n"));
        assert!(with(
            "GET / HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n"
        ));
        assert!(!with("GET / HTTP/1.1\r\n\r\n"));
        assert!(!with("GET /?token=s3creT HTTP/1.1\r\n\r\n"));
        assert!(!with("GET /?token=s3cre HTTP/1.1\r\n\r\n"));
        assert!(ConsoleAccess::Open.allows(&Request::parse("GET / HTTP/1.1\r\n\r\n")));
        let ConsoleAccess::Token(a) = ConsoleAccess::random_token() else {
            panic!("not a token")
        };
        assert_eq!(a.len(), 32);
    }
}
