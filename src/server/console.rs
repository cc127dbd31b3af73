//! The web console (`saql serve --http 127.0.0.1:PORT`): one page of plain HTML, JavaScript
//! and CSS built into the binary (`src/server/console/`, no build step, nothing fetched from
//! elsewhere), a JSON overview of the streams and queries (`/api/overview`: what `SHOW
//! STREAMS` and `SHOW QUERIES` tell, from the engine's typed stats), and per query a server-sent-events stream of its results
//! (`/queries/<name>/events`).
//!
//! An event stream is a `SUBSCRIBE <name> WITH (SEQ, SNAPSHOT)`: the same subscription as a
//! client's, so the same bounded buffer (`--subscriber-buffer-bytes`, cut off with 53400),
//! the same sequence numbers. Each batch of results is one `rows` event whose `id` is the
//! batch's last seq, so a browser that reconnects (sending `Last-Event-ID`) resumes with
//! `SUBSCRIBE <name> FROM <id>`: no gap, no duplicate. The subscription ends when the client
//! goes away (its socket reads end-of-file or a write fails) or the query fails (a `failed`
//! event with the SQLSTATE).

use crate::error::sqlstate;
use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::sql::sqlparser::ast::Ident;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http::{respond, Request, TEXT};
use crate::error::Error;
use crate::runtime::{QueryStats, StreamStats, SubscriptionEvent};
use crate::sinks::Delivery;
use crate::sql::{Statement, Subscribe};
use crate::{Engine, StatementResult};

const INDEX_HTML: &str = include_str!("console/index.html");
const CONSOLE_JS: &str = include_str!("console/console.js");
const CONSOLE_CSS: &str = include_str!("console/console.css");

/// How often a quiet event stream sends a comment, so that a dead client is noticed.
const HEARTBEAT: Duration = Duration::from_secs(15);

const JSON: &str = "application/json";

/// The query named by an event-stream path `/queries/<name>/events`.
fn event_stream_query(path: &str) -> Option<&str> {
    path.strip_prefix("/queries/")?
        .strip_suffix("/events")
        .filter(|n| !n.is_empty() && !n.contains('/'))
}

/// Whether `path` is a query's event stream.
pub fn is_event_stream(path: &str) -> bool {
    event_stream_query(path).is_some()
}

/// The answer to a console request other than an event stream: status, content type, body.
pub async fn page(engine: &Engine, path: &str) -> (&'static str, &'static str, String) {
    match path {
        "/" | "/index.html" => ("200 OK", "text/html; charset=utf-8", INDEX_HTML.into()),
        "/console.js" => (
            "200 OK",
            "text/javascript; charset=utf-8",
            CONSOLE_JS.into(),
        ),
        "/console.css" => ("200 OK", "text/css; charset=utf-8", CONSOLE_CSS.into()),
        "/api/overview" => match overview(engine).await {
            Ok(json) => ("200 OK", JSON, json),
            Err(e) => ("500 Internal Server Error", JSON, error_json(&e)),
        },
        _ => ("404 Not Found", TEXT, "no such page\n".into()),
    }
}

/// `{"streams": [...], "queries": [...]}`: what SHOW STREAMS and SHOW QUERIES tell, one
/// object per row with their column names as keys, from [`Engine::stats`].
async fn overview(engine: &Engine) -> crate::Result<String> {
    let engine = engine.clone();
    let stats = crate::spawn::blocking(move || engine.stats())
        .await
        .map_err(|e| Error::Internal(format!("the console's overview: {e}")))?;
    let streams: Vec<serde_json::Value> = stats.streams.iter().map(stream_json).collect();
    let queries: Vec<serde_json::Value> = stats.queries.iter().map(query_json).collect();
    Ok(serde_json::json!({"streams": streams, "queries": queries}).to_string())
}

fn stream_json(s: &StreamStats) -> serde_json::Value {
    let history = s.history.as_ref();
    serde_json::json!({
        "name": s.name,
        "columns": s.columns,
        "watermark": s.watermark.to_string(),
        "rows_in": s.rows_in,
        "late_rows": s.late_rows,
        "definition": s.definition,
        "shed_rows": s.shed_rows,
        "ingest_waits": s.ingest_waits,
        "history": history.map_or("off", |h| h.retention.as_str()),
        "history_rows": history.map_or(0, |h| h.rows),
        "history_bytes": history.map_or(0, |h| h.bytes),
    })
}

fn query_json(q: &QueryStats) -> serde_json::Value {
    serde_json::json!({
        "name": q.name,
        "stream": q.stream,
        "status": q.status.to_string(),
        "rows_in": q.rows_in,
        "rows_out": q.rows_out,
        "late_rows": q.late_rows,
        "watermark": q.watermark.to_string(),
        "subscribers": q.subscribers,
        "definition": q.definition,
        "subscribers_cut_off": q.subscribers_cut_off,
        "suppressed": q.suppressed,
        "state_bytes": q.state_bytes,
        "shed_rows": q.shed_rows,
    })
}

fn error_json(e: &Error) -> String {
    serde_json::json!({"sqlstate": e.sqlstate(), "message": e.to_string()}).to_string()
}

/// `{"query": ..., "columns": [{"name", "kind"}]}`, kind `time`, `number`, `bool` or `text`:
/// what the page needs to chart the rows.
fn schema_json(query: &str, schema: &SchemaRef) -> String {
    let columns: Vec<serde_json::Value> = schema
        .fields()
        .iter()
        .map(|f| {
            let kind = match f.data_type() {
                DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => "time",
                DataType::Boolean => "bool",
                t if t.is_numeric() => "number",
                _ => "text",
            };
            serde_json::json!({"name": f.name(), "kind": kind})
        })
        .collect();
    serde_json::json!({"query": query, "columns": columns}).to_string()
}

/// Serves `/queries/<name>/events` as server-sent events until the client leaves or the
/// query ends.
pub async fn events(
    mut socket: TcpStream,
    engine: Engine,
    request: &Request,
) -> std::io::Result<()> {
    let Some(name) = event_stream_query(&request.path) else {
        return respond(&mut socket, "404 Not Found", TEXT, "no such page\n").await;
    };
    let from = request
        .header("last-event-id")
        .or(request.param("from"))
        .and_then(|v| v.trim().parse::<u64>().ok());
    let subscribe = Subscribe {
        from,
        seq: true,
        snapshot: from.is_none(),
        ..Subscribe::to(Ident::with_quote('"', name))
    };
    let mut sub = match engine
        .execute_statement(Statement::Subscribe(subscribe), &[])
        .await
    {
        Ok(StatementResult::Subscribe(sub)) => sub,
        Ok(_) => {
            let e = Error::Internal("SUBSCRIBE returned no subscription".into());
            return respond(
                &mut socket,
                "500 Internal Server Error",
                JSON,
                &error_json(&e),
            )
            .await;
        }
        Err(e) => {
            let status = match e.sqlstate() {
                sqlstate::UNDEFINED_TABLE => "404 Not Found",
                s if s.starts_with("53") => "503 Service Unavailable",
                _ => "400 Bad Request",
            };
            return respond(&mut socket, status, JSON, &error_json(&e)).await;
        }
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\
         Connection: close\r\nX-Content-Type-Options: nosniff\r\n\r\n\
         retry: 2000\n\nevent: schema\ndata: {}\n\n",
        schema_json(&sub.query, &sub.schema)
    );
    let (mut reader, mut writer) = socket.into_split();
    writer.write_all(head.as_bytes()).await?;
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.tick().await;
    let mut scratch = [0u8; 256];
    loop {
        let message = tokio::select! {
            event = sub.events.recv() => match event {
                Some(SubscriptionEvent::Rows(batch)) if batch.num_rows() == 0 => continue,
                Some(SubscriptionEvent::Rows(batch)) => match Delivery::encode(&batch) {
                    Ok(d) => format!("id: {}\nevent: rows\ndata: {}\n\n", d.last, d.json_array()),
                    Err(e) => failed(e.sqlstate(), &e.to_string()),
                },
                Some(SubscriptionEvent::Failed(f)) => failed(f.sqlstate, &f.message),
                None => failed(sqlstate::ADMIN_SHUTDOWN, "the query was dropped or the server is shutting down"),
            },
            _ = heartbeat.tick() => ": keepalive\n\n".to_string(),
            read = reader.read(&mut scratch) => match read {
                // The client sends nothing after its request: end of file or an error means
                // it went away.
                Ok(0) | Err(_) => return Ok(()),
                Ok(_) => continue,
            },
        };
        writer.write_all(message.as_bytes()).await?;
        if message.starts_with("event: failed") {
            return writer.shutdown().await;
        }
    }
}

/// A `failed` event: the subscription is over.
fn failed(sqlstate: &str, message: &str) -> String {
    format!(
        "event: failed\ndata: {}\n\n",
        serde_json::json!({"sqlstate": sqlstate, "message": message})
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_stream_paths_name_one_query() {
        assert_eq!(event_stream_query("/queries/q/events"), Some("q"));
        assert_eq!(
            event_stream_query("/queries/Failed Logins/events"),
            Some("Failed Logins")
        );
        assert_eq!(event_stream_query("/queries//events"), None);
        assert_eq!(event_stream_query("/queries/a/b/events"), None);
        assert_eq!(event_stream_query("/queries/q"), None);
    }

    #[tokio::test]
    async fn overview_lists_streams_and_queries() {
        let engine = Engine::open(crate::EngineConfig::default()).unwrap();
        engine
            .execute(
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, n BIGINT, WATERMARK FOR ts AS ts); \
                 CREATE CONTINUOUS QUERY q AS SELECT ts, n FROM s WHERE n > 1; \
                 INSERT INTO s VALUES ('2024-01-01 00:00:00', 1), ('2024-01-01 00:00:01', 2)",
            )
            .await
            .unwrap();
        let (status, _, body) = page(&engine, "/api/overview").await;
        assert_eq!(status, "200 OK");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["streams"][0]["name"], "s");
        assert_eq!(v["streams"][0]["rows_in"], 2);
        assert_eq!(v["queries"][0]["name"], "q");
        assert_eq!(v["queries"][0]["rows_out"], 1);
        assert_eq!(page(&engine, "/nope").await.0, "404 Not Found");
        assert!(page(&engine, "/").await.2.contains("console.js"));
    }

    #[test]
    fn schema_kinds() {
        use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};
        let schema = std::sync::Arc::new(Schema::new(vec![
            Field::new("seq", DataType::Int64, false),
            Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
            Field::new("x", DataType::Float64, true),
            Field::new("h", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
        ]));
        let v: serde_json::Value = serde_json::from_str(&schema_json("q", &schema)).unwrap();
        let kinds: Vec<&str> = v["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["number", "time", "number", "text", "bool"]);
    }
}
