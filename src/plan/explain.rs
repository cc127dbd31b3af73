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
//! Each operator's entry is rendered from its [`OperatorSpec`].

use std::fmt::Write as _;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::Column;
use datafusion::logical_expr::Expr as LExpr;
use serde_json::{json, Map, Value};

use super::catalog::StreamDef;
use super::query::WindowSpec;
use super::spec::{
    FilterSpec, HistorySpec, IntervalJoinSpec, InvariantSpec, LookupJoinSpec, MatchRecognizeSpec,
    OperatorSpec, OutlierSpec, ProjectSpec, SessionWindowSpec, SuppressSpec, WindowAggregateSpec,
};
use super::union::UnionPlan;
use crate::operators::invariant::Training;
use crate::operators::lookup::LookupKind;
use crate::operators::outlier::OutlierMethod;
use crate::operators::pattern::{AfterMatch, EmptyMatches, RowsPerMatch};

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

impl OperatorSpec {
    /// What EXPLAIN shows of this operator. Equal specs are shown alike.
    pub fn explain(&self) -> ExplainNode {
        match self {
            OperatorSpec::Filter(s) => filter(s),
            OperatorSpec::LookupJoin(s) => lookup_join(s),
            OperatorSpec::IntervalJoin(s) => interval_join(s),
            OperatorSpec::Project(s) => project(s),
            OperatorSpec::WindowAggregate(s) => window_aggregate(s),
            OperatorSpec::WindowAssign(s) => ExplainNode::new("WindowAssign")
                .with("window", window_json(&s.window))
                .with(
                    "state",
                    "none: each row is emitted at once with window_start and window_end, once \
                     per window that holds it",
                ),
            OperatorSpec::SessionWindow(s) => session_window(s),
            OperatorSpec::History(s) => history(s),
            OperatorSpec::WindowRank(s) => ExplainNode::new("WindowTopN")
                .with("function", show(&s.function, &s.relation))
                .with(
                    "keeps",
                    s.limit.map_or("every row, numbered".to_string(), |n| {
                        format!("the first {n} rows of each partition")
                    }),
                )
                .with(
                    "state",
                    "the results of windows the watermark has closed, until it reaches this \
                     operator: then numbered and emitted",
                ),
            OperatorSpec::Pattern(s) => match_recognize(s),
            OperatorSpec::Invariant(s) => invariant(s),
            OperatorSpec::Outlier(s) => outlier(s),
            OperatorSpec::Suppress(s) => suppress(s),
            // Replicas compute what one operator would: the plan reads the same.
            OperatorSpec::Sharded(s) => s.inner.explain(),
        }
    }
}

/// A `UNION ALL`'s merge: what each branch reads and runs, and how long its rows wait.
pub(super) fn union_node(union: &UnionPlan) -> ExplainNode {
    let branches: Vec<String> = union
        .branches
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let from = match &b.merge {
                Some(m) => format!("merge {} of streams {}", b.stream, m.streams().join(", ")),
                None => format!("stream {}", b.stream),
            };
            let mut text = std::iter::once(from)
                .chain(b.specs.iter().map(|s| s.name().to_string()))
                .collect::<Vec<_>>()
                .join(" -> ");
            text = format!("{}: {text}", i + 1);
            if b.delay > 0 {
                let mut secs = String::new();
                crate::text::write_float(&mut secs, b.delay as f64 / 1e9);
                text.push_str(&format!(" (its watermark taken {secs} s back)"));
            }
            text
        })
        .collect();
    ExplainNode::new("UnionAll")
        .with("branches", branches)
        .with(
            "state",
            "each branch's rows until the union's watermark (the smallest of its branches') \
             passes them; then in event-time order",
        )
}

fn shown(exprs: &[LExpr], relation: &str) -> Vec<String> {
    exprs.iter().map(|e| show(e, relation)).collect()
}

fn filter(s: &FilterSpec) -> ExplainNode {
    ExplainNode::new("Filter")
        .with("predicate", show(&s.condition, &s.relation))
        .with("state", "none")
}

fn interval_join(s: &IntervalJoinSpec) -> ExplainNode {
    use crate::operators::interval_join::IntervalKind;
    let kind = match s.kind {
        IntervalKind::Inner => "inner",
        IntervalKind::Left => "left",
        IntervalKind::Right => "right",
        IntervalKind::Full => "full",
        IntervalKind::Anti => "anti (NOT EXISTS)",
    };
    let secs = |n: i64| {
        let mut out = String::new();
        crate::text::write_float(&mut out, n as f64 / 1e9);
        out
    };
    if let Some(w) = &s.window {
        return ExplainNode::new("WindowJoin")
            .with("inputs", format!("{}, {}", s.streams[0], s.streams[1]))
            .with("kind", kind)
            .with("window", window_text(w))
            .with("condition", s.condition.to_string())
            .with(
                "state",
                "each window's rows of both inputs, until the watermark passes its end",
            );
    }
    ExplainNode::new("IntervalJoin")
        .with("streams", format!("{}, {}", s.streams[0], s.streams[1]))
        .with("kind", kind)
        .with("condition", s.condition.to_string())
        .with(
            "interval",
            format!(
                "{}.time + {} s .. {}.time + {} s",
                s.streams[0],
                secs(s.lower),
                s.streams[0],
                secs(s.upper)
            ),
        )
        .with(
            "state",
            "the rows of each stream until the watermark passes the end of their interval",
        )
}

fn lookup_join(s: &LookupJoinSpec) -> ExplainNode {
    let kind = match s.kind {
        LookupKind::Inner => "inner",
        LookupKind::Left => "left",
        LookupKind::Semi => "semi (IN / EXISTS)",
        LookupKind::Anti { null_aware: true } => "anti (NOT IN)",
        LookupKind::Anti { null_aware: false } => "anti (NOT EXISTS)",
    };
    let name = match s.temporal {
        Some(_) => "TemporalJoin",
        None => "LookupJoin",
    };
    let mut node = ExplainNode::new(name)
        .with("table", s.table_name.clone())
        .with("kind", kind);
    if let Some(c) = &s.condition {
        node = node.with("condition", show(c, &s.relation));
    }
    if let Some(t) = &s.temporal {
        let time = s.input.field(t.time).name();
        let version = match t.version_time {
            Some(c) => format!(
                "its {} (not before the watermark when it changes)",
                s.table.schema().field(c).name()
            ),
            None => "the watermark when it changes".to_string(),
        };
        return node
            .with("as of", time.clone())
            .with("version starts", version)
            .with(
                "state",
                "the table's versions until the watermark passes the next one, and the rows \
                 until the watermark passes them",
            );
    }
    node.with(
        "state",
        "none: each row looks up the table by its primary key, as the table is when the row \
         is processed",
    )
}

fn project(s: &ProjectSpec) -> ExplainNode {
    ExplainNode::new("Project")
        .with("columns", shown(&s.columns, &s.relation))
        .with("state", "none")
}

fn window_aggregate(s: &WindowAggregateSpec) -> ExplainNode {
    ExplainNode::new("WindowAggregate")
        .with("window", window_json(&s.window))
        .with("keys", shown(&s.keys, &s.relation))
        .with("aggregates", shown(&s.aggregates.exprs, &s.relation))
        .with(
            "state",
            "per open pane (TUMBLE: the window; HOP: gcd(size, slide)): a group \
             table with one vectorised accumulator per aggregate; a window merges \
             its panes and is emitted when the watermark passes window_end, and a \
             pane is freed with its last window",
        )
}

fn session_window(s: &SessionWindowSpec) -> ExplainNode {
    ExplainNode::new("SessionWindow")
        .with("window", window_json(&WindowSpec::Session { gap: s.gap }))
        .with("keys", shown(&s.group, &s.relation))
        .with("aggregates", shown(&s.aggregates.exprs, &s.relation))
        .with(
            "state",
            "per key: open sessions with their accumulators; a session is emitted \
             and freed when the watermark passes its last row + gap",
        )
}

fn history(s: &HistorySpec) -> ExplainNode {
    ExplainNode::new("History")
        .with("columns", shown(&s.functions, &s.relation))
        .with("partition_by", shown(&s.partition, &s.relation))
        .with("order_by", s.input.field(s.time_column).name().clone())
        .with(
            "state",
            if s.ordered {
                "per partition: the frame's recent values (ring buffer)"
            } else {
                "per partition: the frame's recent values; rows wait for the watermark to be \
                 processed in event-time order"
            },
        )
}

fn match_recognize(s: &MatchRecognizeSpec) -> ExplainNode {
    let m = &s.matcher;
    let names: Vec<String> = m.variables.iter().map(|v| v.name.clone()).collect();
    let mut node = ExplainNode::new("MatchRecognize")
        .with(
            "partition_by",
            m.partition_by
                .iter()
                .map(|&c| m.input_schema.field(c).name().clone())
                .collect::<Vec<_>>(),
        )
        .with(
            "order_by",
            m.input_schema.field(m.time_column).name().clone(),
        )
        .with("pattern", m.pattern.display(&names).to_string());
    if let Some(w) = &s.within {
        let emit = if m.emit_timeout { " EMIT TIMEOUT" } else { "" };
        node = node.with("within", format!("{w}{emit}"));
    }
    if !m.subsets.is_empty() {
        node = node.with(
            "subset",
            m.subsets
                .iter()
                .map(|(name, vars)| {
                    let vars: Vec<&str> =
                        vars.iter().map(|&v| names[v as usize].as_str()).collect();
                    format!("{name} = ({})", vars.join(", "))
                })
                .collect::<Vec<_>>(),
        );
    }
    let set_name = |v: u16| {
        (names.get(v as usize))
            .or_else(|| m.subsets.get(v as usize - names.len()).map(|s| &s.0))
            .cloned()
            .unwrap_or_default()
    };
    let skip = match m.after_match {
        AfterMatch::PastLastRow => "SKIP PAST LAST ROW".to_string(),
        AfterMatch::ToNextRow => "SKIP TO NEXT ROW".to_string(),
        AfterMatch::ToFirst(v) => format!("SKIP TO FIRST {}", set_name(v)),
        AfterMatch::ToLast(v) => format!("SKIP TO LAST {}", set_name(v)),
    };
    let rows = match m.rows_per_match {
        RowsPerMatch::One => "ONE ROW PER MATCH",
        RowsPerMatch::All(EmptyMatches::Show) => "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
        RowsPerMatch::All(EmptyMatches::Omit) => "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
        RowsPerMatch::All(EmptyMatches::WithUnmatched) => "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
    };
    node = node.with("rows_per_match", rows);
    let defines: Vec<String> = names
        .iter()
        .zip(&s.defines)
        .filter_map(|(name, def)| def.as_ref().map(|d| format!("{name} AS {d}")))
        .collect();
    let measures: Vec<String> = s
        .measures
        .iter()
        .map(|m| {
            let expr = crate::sql::ast::pattern_semantics_sql(&m.expr.to_string());
            format!("{expr} AS {}", m.alias)
        })
        .collect();
    let mut state = if s.within.is_some() {
        "per partition: open match attempts and the rows they map; an attempt ends when the \
         watermark passes its first row + WITHIN; rows wait for the watermark to be matched in \
         event-time order"
            .to_string()
    } else {
        "per partition: open match attempts and the rows they map (unbounded without WITHIN); \
         rows wait for the watermark to be matched in event-time order"
            .to_string()
    };
    if m.rows_per_match == RowsPerMatch::All(EmptyMatches::WithUnmatched) {
        state.push_str("; the rows an open attempt may still map, until they are known unmatched");
    }
    node.with("after_match", skip)
        .with("define", defines)
        .with("measures", measures)
        .with("state", state)
}

fn invariant(s: &InvariantSpec) -> ExplainNode {
    let sql = |exprs: &[datafusion::sql::sqlparser::ast::Expr]| -> Vec<String> {
        exprs.iter().map(ToString::to_string).collect()
    };
    let training = match s.training {
        Training::Windows(n) => format!("first {n} windows"),
        Training::Interval(d) => {
            format!("{} ms of event time from the first result", d.as_millis())
        }
        Training::Between { from, until } => {
            let from = from.map_or(
                "the first result".to_string(),
                crate::sql::timestamp_literal,
            );
            format!(
                "event time from {from} until {}",
                crate::sql::timestamp_literal(until)
            )
        }
    };
    let training = if s.min_support > 1 {
        format!("{training}, values seen in at least {} rows", s.min_support)
    } else {
        training
    };
    ExplainNode::new("Invariant")
        .with(
            "learns",
            format!("{:?} of ({})", s.kind, sql(&s.values_sql).join(", ")).to_lowercase(),
        )
        .with("per", sql(&s.keys_sql))
        .with("training", training)
        .with(
            "after_training",
            if s.online {
                "check, then learn (online)"
            } else {
                "check only (offline)"
            },
        )
        .with(
            "state",
            if s.windowed {
                "per key: the learned set (values in Arrow row format) or range"
            } else {
                "per key: the learned set (values in Arrow row format) or range; rows wait \
                 for the watermark to be checked in event-time order"
            },
        )
}

/// An outlier method as the OUTLIER clause writes it.
fn method_text(m: OutlierMethod) -> String {
    match m {
        OutlierMethod::Dbscan { eps, min_points } => {
            format!("DBSCAN(eps => {eps}, min_points => {min_points})")
        }
        OutlierMethod::Kmeans { k, threshold } => {
            format!("KMEANS(k => {k}, threshold => {threshold})")
        }
        OutlierMethod::Zscore { threshold } => format!("ZSCORE(threshold => {threshold})"),
        OutlierMethod::Mad { threshold } => format!("MAD(threshold => {threshold})"),
        OutlierMethod::Iqr { factor } => format!("IQR(factor => {factor})"),
    }
}

fn outlier(s: &OutlierSpec) -> ExplainNode {
    let on: Vec<String> =
        s.on.iter()
            .map(|&c| s.schema.field(c).name().clone())
            .collect();
    let mut partition: Vec<String> = s.partition_sql.iter().map(ToString::to_string).collect();
    if let Some(c) = s.window_column {
        partition.push(s.schema.field(c).name().clone());
    }
    ExplainNode::new("Outlier")
        .with("method", method_text(s.method.0))
        .with("on", on)
        .with("partition_by", partition)
        .with(
            "state",
            "none: each window's results arrive complete in one batch",
        )
}

fn suppress(s: &SuppressSpec) -> ExplainNode {
    let per: Vec<String> = s.keys_sql.iter().map(ToString::to_string).collect();
    ExplainNode::new("Suppress")
        .with("interval", humantime(s.interval.as_millis()))
        .with("per", per)
        .with("time", s.schema.field(s.time_column).name().clone())
        .with(
            "state",
            "per key (Arrow row format): the time of its last emitted row, forgotten when the \
             watermark passes the end of its interval",
        )
}

/// The JSON form of a window.
pub fn window_json(w: &WindowSpec) -> Value {
    let ms = |d: &std::time::Duration| d.as_millis() as u64;
    match w {
        WindowSpec::Tumble { size } => json!({"kind": "tumble", "size_ms": ms(size)}),
        WindowSpec::Hop { slide, size } => {
            json!({"kind": "hop", "slide_ms": ms(slide), "size_ms": ms(size)})
        }
        WindowSpec::Cumulate { step, size } => {
            json!({"kind": "cumulate", "step_ms": ms(step), "size_ms": ms(size)})
        }
        WindowSpec::Session { gap } => json!({"kind": "session", "gap_ms": ms(gap)}),
    }
}

/// A window as EXPLAIN and messages show it: `TUMBLE(size 1min)`.
pub(super) fn window_text(w: &WindowSpec) -> String {
    let d = |d: &std::time::Duration| humantime(d.as_millis());
    match w {
        WindowSpec::Tumble { size } => format!("TUMBLE(size {})", d(size)),
        WindowSpec::Hop { slide, size } => format!("HOP(slide {}, size {})", d(slide), d(size)),
        WindowSpec::Cumulate { step, size } => {
            format!("CUMULATE(step {}, size {})", d(step), d(size))
        }
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
            if let ("branches", Value::Array(items)) = (*k, v) {
                // A union's branches, one a line.
                let _ = writeln!(out, "{pad}    {k}:");
                for i in items {
                    let _ = writeln!(out, "{pad}      {}", i.as_str().unwrap_or_default());
                }
                continue;
            }
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

/// An expression as SQL-like text, without DataFusion's table qualifiers.
fn show(e: &LExpr, stream: &str) -> String {
    if let LExpr::Alias(a) = e {
        let inner = a.expr.as_ref().clone().unalias_nested().data;
        return format!("{} AS {}", show(&inner, stream), a.name);
    }
    let unqualified = e
        .clone()
        .transform(|e| {
            Ok(match e {
                LExpr::Column(c) => {
                    Transformed::yes(LExpr::Column(Column::new_unqualified(c.name)))
                }
                other => Transformed::no(other),
            })
        })
        .map(|t| t.data)
        .unwrap_or_else(|_| e.clone());
    let text = match datafusion::sql::unparser::expr_to_sql(&unqualified) {
        Ok(sql) => sql.to_string(),
        Err(_) => unqualified.human_display().to_string(),
    };
    // Columns that name an aggregate's output carry the stream as a prefix inside the name,
    // and the unparser quotes them.
    unquote_computed(&text.replace(&format!("{stream}."), ""))
        .replace("count(Int64(1))", "count(*)")
}

/// Drops the double quotes around identifiers that are computed names such as
/// `"sum(amount)"`.
fn unquote_computed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('"') {
            Some(close) if after[..close].contains('(') => {
                out.push_str(&after[..close]);
                rest = &after[close + 1..];
            }
            Some(close) => {
                out.push_str(&rest[open..open + close + 2]);
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
