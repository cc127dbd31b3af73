//! The engine's counters in the Prometheus text exposition format (version 0.0.4): per
//! stream, per query, per source and per sink, from the same [`Engine::stats`] as SHOW
//! STREAMS, SHOW QUERIES, SHOW SOURCES and SHOW SINKS, so the values agree with them.

use std::fmt::Write;

use crate::runtime::engine::Engine;
use crate::runtime::statements::stats::StreamStats;
use crate::sources::spec::SourcePosition;
use crate::time::{EventTime, Watermark};

/// One metric family being written: its samples, then HELP and TYPE once.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        self.samples.push((labels, value));
    }

    fn write(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (labels, value) in &self.samples {
            out.push_str(self.name);
            if !labels.is_empty() {
                let pairs: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                let _ = write!(out, "{{{}}}", pairs.join(","));
            }
            let _ = writeln!(out, " {}", number(*value));
        }
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

impl Engine {
    /// Every metric as Prometheus text.
    pub fn metrics_text(&self) -> String {
        let now = EventTime::now();
        let seconds = |t: EventTime| t.nanos() as f64 / 1e9;
        let mut rows_in = Family::new(
            "saql_stream_rows_in_total",
            "counter",
            "Rows accepted into the stream.",
        );
        let mut late = Family::new(
            "saql_stream_late_rows_total",
            "counter",
            "Rows that arrived behind the stream's watermark.",
        );
        let mut watermark = Family::new(
            "saql_stream_watermark_seconds",
            "gauge",
            "The stream's watermark (event time, seconds since the epoch); absent before the first row.",
        );
        let mut lag = Family::new(
            "saql_stream_watermark_lag_seconds",
            "gauge",
            "How far the stream's watermark trails wall-clock time.",
        );
        let mut q_in = Family::new(
            "saql_query_rows_in_total",
            "counter",
            "Rows offered to the query.",
        );
        let mut q_out = Family::new(
            "saql_query_rows_out_total",
            "counter",
            "Result rows the query produced (its last sequence number).",
        );
        let mut q_late = Family::new(
            "saql_query_late_rows_total",
            "counter",
            "Rows the query's operators dropped as late.",
        );
        let mut q_suppressed = Family::new(
            "saql_query_suppressed_total",
            "counter",
            "Result rows the query's SUPPRESS clause counted as repeats instead of emitting.",
        );
        let mut q_subs = Family::new(
            "saql_query_subscribers",
            "gauge",
            "Live subscribers of the query.",
        );
        let mut q_cut = Family::new(
            "saql_query_subscribers_cut_off_total",
            "counter",
            "Subscribers cut off for falling behind (53400).",
        );
        let mut q_lag = Family::new(
            "saql_query_subscriber_lag_bytes",
            "gauge",
            "Result bytes waiting for the query's slowest subscriber.",
        );
        let mut q_failed = Family::new(
            "saql_query_failed",
            "gauge",
            "1 if the query failed (SHOW QUERIES says why), else 0.",
        );
        let mut shed = Family::new(
            "saql_stream_shed_rows_total",
            "counter",
            "Rows load shedding dropped before they were logged or processed.",
        );
        let mut history_bytes = Family::new(
            "saql_stream_history_bytes",
            "gauge",
            "Bytes of the stream's history segments on disk.",
        );
        let mut waits = Family::new(
            "saql_stream_ingest_waits_total",
            "counter",
            "Batches that waited for the stream while another writer held it (backpressure).",
        );
        let mut wait_seconds = Family::new(
            "saql_stream_ingest_wait_seconds_total",
            "counter",
            "Total time batches waited to enter the stream.",
        );
        let mut drop_fraction = Family::new(
            "saql_stream_drop_fraction",
            "gauge",
            "Fraction of rows (shedding = 'random') or new windows ('window') dropped now.",
        );
        let mut q_shed = Family::new(
            "saql_query_shed_rows_total",
            "counter",
            "Rows of the query's stream shed while it ran.",
        );
        let mut ingest_bytes = Family::new(
            "saql_ingest_bytes",
            "gauge",
            "Bytes of batches waiting to enter their streams or being processed (--max-ingest-bytes).",
        );
        let mut ingest_waits = Family::new(
            "saql_ingest_budget_waits_total",
            "counter",
            "Batches that waited for room in the ingest budget (backpressure).",
        );
        let mut q_state = Family::new(
            "saql_query_state_bytes",
            "gauge",
            "Bytes of state (operators and retained results) the query held after its last \
             batch (53200 past --max-query-state-bytes).",
        );
        let mut s_rows = Family::new(
            "saql_source_rows_total",
            "counter",
            "Rows the source ingested.",
        );
        let mut s_bytes = Family::new(
            "saql_source_bytes_total",
            "counter",
            "Input bytes the source consumed.",
        );
        let mut s_errors = Family::new(
            "saql_source_errors_total",
            "counter",
            "Bad records the source counted.",
        );
        let mut s_offset = Family::new(
            "saql_source_offset",
            "gauge",
            "The source's position: byte offset in its file, or next offset per Kafka partition.",
        );
        let mut s_up = Family::new(
            "saql_source_up",
            "gauge",
            "1 while the source runs (or waits for input), 0 once it failed, finished or stopped.",
        );
        let mut k_rows = Family::new(
            "saql_sink_delivered_rows_total",
            "counter",
            "Result rows the sink's receiver acknowledged.",
        );
        let mut k_seq = Family::new(
            "saql_sink_delivered_seq",
            "gauge",
            "The query's result seq the sink has delivered through.",
        );
        let mut k_retries = Family::new(
            "saql_sink_retries_total",
            "counter",
            "Deliveries the sink sent again after a failure.",
        );
        let mut k_errors = Family::new(
            "saql_sink_errors_total",
            "counter",
            "Failed delivery attempts (refused, error answer, timeout).",
        );
        let mut k_gaps = Family::new(
            "saql_sink_gap_rows_total",
            "counter",
            "Results the sink skipped because they were no longer retained.",
        );
        let mut k_up = Family::new(
            "saql_sink_up",
            "gauge",
            "1 while the sink runs (delivering or retrying), 0 once it failed or stopped.",
        );
        let stats = self.stats();
        ingest_bytes.add(vec![], stats.ingest_bytes as f64);
        ingest_waits.add(vec![], stats.ingest_budget_waits as f64);
        for k in &stats.sinks {
            let labels = || {
                vec![
                    ("sink", k.name.clone()),
                    ("query", k.query.clone()),
                    ("kind", k.kind.clone()),
                ]
            };
            let p = &k.status.progress;
            k_rows.add(labels(), p.rows as f64);
            k_seq.add(labels(), p.delivered as f64);
            k_retries.add(labels(), p.retries as f64);
            k_errors.add(labels(), p.errors as f64);
            k_gaps.add(labels(), p.gap_rows as f64);
            let up = matches!(k.status.state.as_str(), "running" | "starting" | "retrying");
            k_up.add(labels(), f64::from(u8::from(up)));
        }
        let mut streams: Vec<&StreamStats> = stats.streams.iter().collect();
        streams.sort_by(|a, b| a.name.cmp(&b.name));
        for s in streams {
            let label = || vec![("stream", s.name.clone())];
            rows_in.add(label(), s.rows_in as f64);
            late.add(label(), s.late_rows as f64);
            shed.add(label(), s.shed_rows as f64);
            waits.add(label(), s.ingest_waits as f64);
            if let Some(h) = &s.history {
                history_bytes.add(label(), h.bytes as f64);
            }
            wait_seconds.add(label(), s.ingest_wait.as_secs_f64());
            drop_fraction.add(label(), s.drop_fraction);
            let wm = s.watermark;
            if wm != Watermark::START && wm != Watermark::END {
                watermark.add(label(), seconds(wm.0));
                lag.add(label(), (seconds(now) - seconds(wm.0)).max(0.0));
            }
        }
        // Every query, those over a union or still backfilling included.
        for q in &stats.queries {
            let labels = || vec![("query", q.name.clone()), ("stream", q.stream.clone())];
            q_in.add(labels(), q.rows_in as f64);
            q_out.add(labels(), q.rows_out as f64);
            q_late.add(labels(), q.late_rows as f64);
            q_suppressed.add(labels(), q.suppressed as f64);
            q_subs.add(labels(), q.subscribers as f64);
            q_cut.add(labels(), q.subscribers_cut_off as f64);
            q_lag.add(labels(), q.subscriber_lag_bytes as f64);
            q_failed.add(labels(), f64::from(u8::from(q.status.failed())));
            q_state.add(labels(), q.state_bytes as f64);
            q_shed.add(labels(), q.shed_rows as f64);
        }
        for src in &stats.sources {
            let labels = || {
                vec![
                    ("source", src.name.clone()),
                    ("stream", src.stream.clone()),
                    ("kind", src.kind.clone()),
                ]
            };
            let p = &src.status.progress;
            s_rows.add(labels(), p.rows as f64);
            s_bytes.add(labels(), p.bytes as f64);
            s_errors.add(labels(), p.bad as f64);
            let up = matches!(
                src.status.state.as_str(),
                "running" | "starting" | "connecting" | "waiting for file"
            );
            s_up.add(labels(), f64::from(u8::from(up)));
            match &p.position {
                Some(SourcePosition::File { offset, .. }) => {
                    let mut l = labels();
                    l.push(("partition", String::new()));
                    s_offset.add(l, *offset as f64);
                }
                Some(SourcePosition::Kafka { offsets }) => {
                    for (partition, o) in offsets {
                        let mut l = labels();
                        l.push(("partition", partition.to_string()));
                        s_offset.add(l, *o as f64);
                    }
                }
                None => {}
            }
        }
        let mut out = String::new();
        for family in [
            &rows_in,
            &late,
            &ingest_bytes,
            &ingest_waits,
            &shed,
            &history_bytes,
            &waits,
            &wait_seconds,
            &drop_fraction,
            &watermark,
            &lag,
            &q_in,
            &q_out,
            &q_late,
            &q_suppressed,
            &q_subs,
            &q_cut,
            &q_lag,
            &q_failed,
            &q_state,
            &q_shed,
            &s_rows,
            &s_bytes,
            &s_errors,
            &s_offset,
            &s_up,
            &k_rows,
            &k_seq,
            &k_retries,
            &k_errors,
            &k_gaps,
            &k_up,
        ] {
            family.write(&mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_numbers_plain() {
        let mut f = Family::new("saql_x_total", "counter", "X.");
        f.add(vec![("stream", "a\"b\\c\nd".into())], 3.0);
        f.add(vec![], 0.25);
        let mut out = String::new();
        f.write(&mut out);
        assert_eq!(
            out,
            "# HELP saql_x_total X.\n# TYPE saql_x_total counter\n\
             saql_x_total{stream=\"a\\\"b\\\\c\\nd\"} 3\nsaql_x_total 0.25\n"
        );
    }
}
