#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]
#![cfg(feature = "server")]
//! The web console. Over plain HTTP against the server in this process: the overview agrees
//! with SHOW QUERIES, a query's event stream carries the same rows and sequence numbers as
//! `SUBSCRIBE q WITH SEQ`, resumes after `Last-Event-ID` with no gap or duplicate, frees its
//! subscription when the client goes, and needs the token when the server has one.
//!
//! In headless Chromium (Debian's `chromium`; the test prints `skip:` without it) against
//! the real `saql serve --demo`: the page lists the demo's queries and an alert marker of a
//! demo query appears on a chart. The page is driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: NUL-separated JSON on file descriptors 3 and 4), and a
//! screenshot is written to `target/tmp/console.png` (the path is printed).

#[allow(dead_code, reason = "each test crate uses part of the shared helpers")]
use crate::binary;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use datafusion::arrow::array::Int64Array;
use saql::server::http::{serve, ConsoleAccess, HttpOptions};
use saql::{Engine, EngineConfig};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An engine with a stream `s` and a query `q` passing rows with `n > 0`, served over HTTP
/// on a free loopback port.
async fn console(access: ConsoleAccess) -> (Engine, SocketAddr) {
    let engine = Engine::open(EngineConfig::default()).unwrap();
    engine
        .execute(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, n BIGINT, WATERMARK FOR ts AS ts); \
             CREATE CONTINUOUS QUERY q AS SELECT ts, n FROM s WHERE n > 0",
        )
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let options = HttpOptions {
        console: Some(access),
        // The requests below name it so.
        allowed_hosts: vec!["saql".into()],
        ..HttpOptions::default()
    };
    tokio::spawn(serve(
        listener,
        engine.clone(),
        options,
        std::future::pending(),
    ));
    (engine, addr)
}

/// Rows of `s`: the k-th at `first_second + k` seconds with `n = values[k]`.
async fn insert(engine: &Engine, first_second: i64, values: &[i64]) {
    let rows: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let at = first_second + k as i64;
            format!("(TIMESTAMP '2024-01-01 00:00:00' + INTERVAL '{at} seconds', {n})")
        })
        .collect();
    engine
        .execute(&format!("INSERT INTO s VALUES {}", rows.join(", ")))
        .await
        .unwrap();
}

/// Sends a GET and returns the open connection after the response head, with the status
/// line.
async fn get(addr: SocketAddr, target: &str, headers: &str) -> (String, BufConn) {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: saql\r\n{headers}\r\n");
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut conn = BufConn {
        socket,
        buf: Vec::new(),
    };
    let head = conn.until(b"\r\n\r\n").await;
    (head.lines().next().unwrap_or("").to_string(), conn)
}

/// The body of a whole (Connection: close) response.
async fn get_body(addr: SocketAddr, target: &str) -> (String, String) {
    let (status, mut conn) = get(addr, target, "").await;
    conn.socket.read_to_end(&mut conn.buf).await.unwrap();
    (status, String::from_utf8_lossy(&conn.buf).into_owned())
}

struct BufConn {
    socket: TcpStream,
    buf: Vec<u8>,
}

impl BufConn {
    /// Reads through `end`, returning what came before it (10 s at most).
    async fn until(&mut self, end: &[u8]) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = self.buf.windows(end.len()).position(|w| w == end) {
                let text = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + end.len());
                return text;
            }
            let mut chunk = [0u8; 4096];
            let left = deadline.saturating_duration_since(Instant::now());
            let n = tokio::time::timeout(left, self.socket.read(&mut chunk))
                .await
                .expect("the server answers within 10 s")
                .unwrap();
            assert!(n > 0, "connection closed; had {:?}", self.buf);
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next server-sent event that is not a comment: (event, id, data).
    async fn event(&mut self) -> (String, Option<u64>, String) {
        loop {
            let block = self.until(b"\n\n").await;
            let (mut event, mut id, mut data) = (String::from("message"), None, String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_string();
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = v.parse().ok();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            if !data.is_empty() {
                return (event, id, data);
            }
        }
    }

    /// The `seq` and `n` of the next `rows` event's rows, with the event's id.
    async fn rows(&mut self) -> (Option<u64>, Vec<(i64, i64)>) {
        let (event, id, data) = self.event().await;
        assert_eq!(event, "rows", "{data}");
        let rows: Vec<Value> = serde_json::from_str(&data).unwrap();
        let rows = rows
            .iter()
            .map(|r| (r["seq"].as_i64().unwrap(), r["n"].as_i64().unwrap()))
            .collect();
        (id, rows)
    }
}

/// `rows_out` and `subscribers` of `q`, from SHOW QUERIES.
async fn show_q(engine: &Engine) -> (i64, i64) {
    let batches = match engine.execute("SHOW QUERIES").await.unwrap().pop() {
        Some(saql::StatementResult::Rows { batches, .. }) => batches,
        _ => panic!("SHOW QUERIES returned no rows"),
    };
    let int = |name: &str| {
        batches[0]
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>().map(|a| a.value(0)))
            .unwrap()
    };
    (int("rows_out"), int("subscribers"))
}

#[tokio::test]
async fn the_overview_agrees_with_show_queries() {
    let (engine, addr) = console(ConsoleAccess::Open).await;
    insert(&engine, 0, &[0, 1, 2, 3, 4]).await;
    let (status, body) = get_body(addr, "/api/overview").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["queries"][0]["name"], "q");
    assert_eq!(v["queries"][0]["rows_out"], json!(show_q(&engine).await.0));
    assert_eq!(v["queries"][0]["rows_out"], 4);
    assert_eq!(v["streams"][0]["rows_in"], 5);
    let (status, page) = get_body(addr, "/").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(page.contains("<script src=\"console.js\">"));
    let (status, js) = get_body(addr, "/console.js").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(js.contains("EventSource"));
    assert_eq!(
        get_body(addr, "/elsewhere").await.0,
        "HTTP/1.1 404 Not Found"
    );
    let (status, body) = get_body(addr, "/queries/nope/events").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(body.contains("42P01"), "{body}");
}

#[tokio::test]
async fn events_carry_subscribe_seqs_resume_and_end_with_the_client() {
    let (engine, addr) = console(ConsoleAccess::Open).await;
    insert(&engine, 0, &[1, 2, 3]).await; // seq 1..3, retained: the snapshot
    let (status, mut events) = get(addr, "/queries/q/events", "").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let (event, _, schema) = events.event().await;
    assert_eq!(event, "schema");
    let schema: Value = serde_json::from_str(&schema).unwrap();
    assert_eq!(
        schema["columns"],
        json!([{"name": "seq", "kind": "number"}, {"name": "ts", "kind": "time"},
               {"name": "n", "kind": "number"}])
    );
    assert_eq!(events.rows().await, (Some(3), vec![(1, 1), (2, 2), (3, 3)]));
    // Live rows, numbered as SUBSCRIBE q WITH SEQ numbers them.
    let mut sub = match engine.execute("SUBSCRIBE q WITH SEQ").await.unwrap().pop() {
        Some(saql::StatementResult::Subscribe(s)) => s,
        _ => panic!("no subscription"),
    };
    insert(&engine, 10, &[0, 1, 2, 3, 4, 5]).await; // n = 1..5 pass: seq 4..8
    let (id, live) = events.rows().await;
    assert_eq!(id, Some(8));
    assert_eq!(live, vec![(4, 1), (5, 2), (6, 3), (7, 4), (8, 5)]);
    let batch = sub.try_next().expect("SUBSCRIBE got the rows");
    let seqs = batch
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(seqs.values().to_vec(), vec![4, 5, 6, 7, 8]);
    drop(sub);
    // The browser leaves: its subscription goes with it.
    assert_eq!(show_q(&engine).await.1, 1);
    drop(events);
    let mut gone = false;
    for k in 0..200 {
        insert(&engine, 100 + k, &[1]).await;
        if show_q(&engine).await.1 == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the event stream's subscription outlived its client");
    // A reconnecting browser sends the last id it saw: it gets what came after, once.
    let (_, mut events) = get(addr, "/queries/q/events", "Last-Event-ID: 6\r\n").await;
    events.event().await; // schema
    let mut resumed = Vec::new();
    while resumed.len() < 3 {
        resumed.extend(events.rows().await.1);
    }
    assert_eq!(resumed[..3], [(7, 4), (8, 5), (9, 1)]);
}

#[tokio::test]
async fn a_token_guards_the_data_not_the_page() {
    let (_engine, addr) = console(ConsoleAccess::Token("t0ken".into())).await;
    assert_eq!(get_body(addr, "/").await.0, "HTTP/1.1 200 OK");
    // /metrics names every stream and query: with users it needs the token too.
    assert_eq!(
        get_body(addr, "/metrics?token=t0ken").await.0,
        "HTTP/1.1 200 OK"
    );
    for path in [
        "/metrics",
        "/api/overview",
        "/queries/q/events",
        "/api/overview?token=wrong",
    ] {
        assert_eq!(
            get_body(addr, path).await.0,
            "HTTP/1.1 401 Unauthorized",
            "{path}"
        );
    }
    assert_eq!(
        get_body(addr, "/api/overview?token=t0ken").await.0,
        "HTTP/1.1 200 OK"
    );
    let (status, _) = get(addr, "/queries/q/events?token=t0ken", "").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
}

/// A request's status line and whole head, for a raw request text.
async fn raw(addr: SocketAddr, request: &str) -> String {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    socket.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 sends
/// `Host: evil.example`; it gets 421, while IP addresses, localhost and the listed names are
/// served. Every response forbids framing and foreign scripts.
#[tokio::test]
async fn only_requests_for_this_host_are_answered() {
    let (_engine, addr) = console(ConsoleAccess::Open).await;
    for host in ["evil.example", "evil.example:5480", "saql.evil.example"] {
        let response = raw(
            addr,
            &format!("GET /api/overview HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
        .await;
        assert!(
            response.starts_with("HTTP/1.1 421 Misdirected Request"),
            "{host}: {response}"
        );
        assert!(!response.contains("\"queries\""), "{response}");
    }
    for host in [
        addr.to_string(),
        "localhost".into(),
        format!("localhost:{}", addr.port()),
        "[::1]:80".into(),
        "SAQL".into(),
    ] {
        let response = raw(
            addr,
            &format!("GET /api/overview HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
        .await;
        assert!(
            response.starts_with("HTTP/1.1 200 OK"),
            "{host}: {response}"
        );
        assert!(response.contains("X-Frame-Options: DENY"), "{response}");
        assert!(
            response
                .contains("Content-Security-Policy: default-src 'self'; frame-ancestors 'none'"),
            "{response}"
        );
    }
}

/// Clients that send half a request hold no request slot: with 40 of them waiting (more
/// than the 16 slots), a whole request is answered while they all still wait.
#[tokio::test]
async fn half_sent_requests_delay_no_one() {
    let (_engine, addr) = console(ConsoleAccess::Open).await;
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: saql\r\n")
            .await
            .unwrap();
        slow.push(s);
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (status, body) = get_body(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("saql_"), "{body}");
    // None of the half-sent ones has been answered (or timed out) yet.
    for s in &mut slow {
        let mut byte = [0u8; 1];
        assert!(
            s.try_read(&mut byte).is_err(),
            "a half-sent request was answered"
        );
    }
}

// --- headless Chromium ------------------------------------------------------------------

/// The browser: `SAQL_CHROMIUM`, or `chromium` / `chromium-browser` on the PATH.
fn chromium() -> Option<String> {
    if let Ok(p) = std::env::var("SAQL_CHROMIUM") {
        return Some(p);
    }
    let path = std::env::var("PATH").unwrap_or_default();
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.exists())
                .map(|p| p.display().to_string())
        })
}

/// Chromium driven over the DevTools protocol on a pipe: fd 3 takes commands, fd 4 gives
/// answers and events, each a JSON text ending in NUL. A shell maps them onto the child's
/// stdin and stdout.
struct Browser {
    child: std::process::Child,
    input: std::process::ChildStdin,
    messages: mpsc::Receiver<Value>,
    next_id: u64,
    session: Option<String>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    fn start(bin: &str, profile: &std::path::Path) -> Browser {
        let script = format!(
            "exec '{bin}' --headless --no-sandbox --disable-gpu --no-first-run \
             --disable-extensions --user-data-dir='{}' --remote-debugging-pipe \
             3<&0 4>&1 0</dev/null 1>/dev/null 2>/dev/null",
            profile.display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let input = child.stdin.take().unwrap();
        let output = child.stdout.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(output);
            let mut buf = Vec::new();
            while reader.read_until(0, &mut buf).unwrap_or(0) > 0 {
                buf.pop();
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
                buf.clear();
            }
        });
        Browser {
            child,
            input,
            messages,
            next_id: 0,
            session: None,
        }
    }

    /// Sends a command (to the attached page, once there is one) and waits for its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.input.write_all(&bytes).unwrap();
        self.input.flush().unwrap();
        loop {
            let v = self
                .messages
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("chromium did not answer {method}"));
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Opens `url` in a new page of `width` x `height` and attaches to it.
    fn open(&mut self, url: &str, width: u32, height: u32) {
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        self.call("Page.navigate", json!({"url": url}));
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        r["result"]["value"].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_chromium_shows_the_demo_queries_and_an_alert_on_a_chart() {
    let Some(bin) = chromium() else {
        println!("skip: no chromium (apt-get install chromium, or set SAQL_CHROMIUM)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (addr, http) = (binary::free_addr(), binary::free_addr());
    let started = Instant::now();
    let _saql = binary::start_saql(
        &dir.path().join("data"),
        addr,
        &["--demo", "--http", &http.to_string()],
    );
    binary::connect(addr).await;
    let mut browser = Browser::start(&bin, &dir.path().join("profile"));
    browser.open(&format!("http://{http}/"), 1280, 1000);

    // Every demo query is listed.
    let expected = [
        "alerts",
        "apt_chain",
        "apt_chain_evidence",
        "big_senders",
        "brute_force_evidence",
        "brute_force_sources",
        "cmd_starts_osql",
        "cpu_hot",
        "cpu_spike",
        "exfil_outlier",
        "external_logins",
        "failed_logins",
        "hot_critical_hosts",
        "incidents",
        "login_without_mfa",
        "send_surge",
        "start_then_connect",
        "threat_intel_hits",
        "tool_connections",
        "web_children",
        "web_shell_tree",
    ];
    let list = "[...document.querySelectorAll('#queries tbody tr')].map(r => r.dataset.query)";
    let mut listed = Value::Null;
    for _ in 0..100 {
        listed = browser.eval(list);
        if listed.as_array().is_some_and(|a| a.len() >= expected.len()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for q in expected {
        assert!(
            listed.as_array().unwrap().contains(&json!(q)),
            "{q} not listed: {listed}"
        );
    }

    // The demo injects its first attack 5 s in; an alert marker must reach a chart.
    let markers = "[...document.querySelectorAll('circle.alert')].map(c => c.dataset.query)";
    let mut marked = Value::Null;
    while started.elapsed() < Duration::from_secs(120) {
        marked = browser.eval(markers);
        if marked.as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let marked = marked.as_array().cloned().unwrap_or_default();
    assert!(!marked.is_empty(), "no alert reached a chart within 120 s");
    println!(
        "alert markers of {:?} on the charts {:.1} s after saql started",
        marked,
        started.elapsed().as_secs_f64()
    );
    for q in &marked {
        assert!(
            expected.contains(&q.as_str().unwrap()),
            "marker of an unknown query {q}"
        );
    }
    // The marker's query has a chart titled with its name.
    let q = marked[0].as_str().unwrap();
    let title = browser.eval(&format!(
        "document.querySelector('.chart[data-query=\"{q}\"] h3').textContent"
    ));
    assert!(title.as_str().unwrap().starts_with(q), "{title}");

    let shot = browser.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console.png");
    std::fs::write(&path, &png).unwrap();
    println!("screenshot: {}", path.display());
}
