//! EXPLAIN for continuous queries: what each operator does, what it keys on, which window it
//! keeps and how its state is bounded, as indented text or as JSON of a stable shape:
//!
//! ```json
//! {
//!   "stream": "proc_events",
//!   "watermark": {"column": "ts", "delay_ms": 5000},
//!   "window": {"kind": "tumble", "size_ms": 600000},
//!   "operators": [
//!     {"id": 0, "operator": "Filter", "input": "stream proc_events", "predicate": "..."},
//!     {"id": 1, "operator": "WindowAggregate", "input": "#0", "keys": ["..."],
//!      "aggregates": ["..."], "state": "..."}
//!   ],
//!   "output": [{"name": "host", "type": "Utf8"}]
//! }
//! ```
//!
//! `operators` runs from source to result; each names its input (`stream <name>` or `#<id>`).

use std::fmt::Write as _;

use datafusion::arrow::datatypes::Schema;
use serde_json::{json, Map, Value};

use super::catalog::StreamDef;
use super::query::WindowSpec;

/// One operator of a plan, for EXPLAIN.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainNode {
    /// Operator type, e.g. `Filter`.
    pub operator: &'static str,
    /// Its properties in display order (predicate, keys, aggregates, window, state).
    pub properties: Vec<(&'static str, Value)>,
}

impl ExplainNode {
    /// A node with no properties yet.
    pub fn new(operator: &'static str) -> Self {
        ExplainNode {
            operator,
            properties: Vec::new(),
        }
    }

    /// Adds a property.
    pub fn with(mut self, key: &'static str, value: impl Into<Value>) -> Self {
        self.properties.push((key, value.into()));
        self
    }
}

/// The JSON form of a window.
pub fn window_json(w: &WindowSpec) -> Value {
    let ms = |d: &std::time::Duration| d.as_millis() as u64;
    match w {
        WindowSpec::Tumble { size } => json!({"kind": "tumble", "size_ms": ms(size)}),
        WindowSpec::Hop { slide, size } => {
            json!({"kind": "hop", "slide_ms": ms(slide), "size_ms": ms(size)})
        }
        WindowSpec::Session { gap } => json!({"kind": "session", "gap_ms": ms(gap)}),
    }
}

fn window_text(w: &WindowSpec) -> String {
    let d = |d: &std::time::Duration| humantime(d.as_millis());
    match w {
        WindowSpec::Tumble { size } => format!("TUMBLE(size {})", d(size)),
        WindowSpec::Hop { slide, size } => format!("HOP(slide {}, size {})", d(slide), d(size)),
        WindowSpec::Session { gap } => format!("SESSION(gap {})", d(gap)),
    }
}

fn humantime(ms: u128) -> String {
    for (unit, n) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1000),
    ] {
        if ms >= n && ms.is_multiple_of(n) {
            return format!("{}{unit}", ms / n);
        }
    }
    format!("{ms}ms")
}

/// The whole EXPLAIN document of a plan.
pub fn explain_json(
    stream: &StreamDef,
    window: Option<&WindowSpec>,
    nodes: &[ExplainNode],
    output: &Schema,
) -> Value {
    let operators: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut m = Map::new();
            m.insert("id".into(), json!(i));
            m.insert("operator".into(), json!(n.operator));
            let input = if i == 0 {
                format!("stream {}", stream.name)
            } else {
                format!("#{}", i - 1)
            };
            m.insert("input".into(), json!(input));
            for (k, v) in &n.properties {
                m.insert((*k).into(), v.clone());
            }
            Value::Object(m)
        })
        .collect();
    let watermark = stream.event_time.as_ref().map(|et| {
        json!({
            "column": stream.schema.field(et.column).name(),
            "delay_ms": et.delay.as_millis() as u64,
        })
    });
    json!({
        "stream": stream.name,
        "watermark": watermark,
        "window": window.map(window_json),
        "operators": operators,
        "output": output.fields().iter().map(|f| json!({
            "name": f.name(),
            "type": f.data_type().to_string(),
        })).collect::<Vec<_>>(),
    })
}

/// The text form: operators from result down to source, one per line, as PostgreSQL prints
/// plans.
pub fn explain_text(
    stream: &StreamDef,
    window: Option<&WindowSpec>,
    nodes: &[ExplainNode],
    output: &Schema,
) -> String {
    let mut out = String::new();
    let cols: Vec<&str> = output.fields().iter().map(|f| f.name().as_str()).collect();
    let _ = writeln!(out, "Continuous query -> ({})", cols.join(", "));
    for (depth, (i, n)) in nodes.iter().enumerate().rev().enumerate() {
        let pad = "  ".repeat(depth + 1);
        let _ = write!(out, "{pad}#{i} {}", n.operator);
        if n.operator == "WindowAggregate" || n.operator == "SessionWindow" {
            if let Some(w) = window {
                let _ = write!(out, " {}", window_text(w));
            }
        }
        let _ = writeln!(out);
        for (k, v) in &n.properties {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| i.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            let _ = writeln!(out, "{pad}    {k}: {text}");
        }
    }
    let pad = "  ".repeat(nodes.len() + 1);
    let _ = write!(out, "{pad}Stream {}", stream.name);
    if let Some(et) = &stream.event_time {
        let _ = write!(
            out,
            " (watermark {} - {})",
            stream.schema.field(et.column).name(),
            humantime(et.delay.as_millis())
        );
    }
    out.push('\n');
    out
}
