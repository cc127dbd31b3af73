//! What the engine can tell about itself, read once under each stream's lock into plain
//! values: `SHOW STREAMS`, `SHOW QUERIES`, `SHOW SOURCES`, `SHOW SINKS`, `/metrics` and the
//! console all format [`EngineStats`], so they agree with each other and none of them reaches
//! into a hub.

use std::time::Duration;

use crate::plan::catalog::normalize;
use crate::runtime::connectors::sinks::SinkStatus;
use crate::runtime::connectors::sources::SourceStatus;
use crate::runtime::core::output::QueryOutput;
use crate::runtime::engine::{Engine, Shared};
use crate::sql;
use crate::time::Watermark;

/// Every stream, query, source and sink of the engine, and its ingest budget.
pub struct EngineStats {
    /// Streams in the order they were declared.
    pub streams: Vec<StreamStats>,
    /// Queries by name, those still backfilling before they start included.
    pub queries: Vec<QueryStats>,
    /// Sources by name.
    pub sources: Vec<SourceStats>,
    /// Sinks by name.
    pub sinks: Vec<SinkStats>,
    /// Bytes of batches waiting to enter their streams or being processed.
    pub ingest_bytes: u64,
    /// Batches that waited for room in the ingest budget.
    pub ingest_budget_waits: u64,
}

/// One stream.
pub struct StreamStats {
    pub name: String,
    /// `name TYPE, ...` as declared.
    pub columns: String,
    /// Its CREATE STREAM statement.
    pub definition: String,
    pub watermark: Watermark,
    pub rows_in: u64,
    pub late_rows: u64,
    pub shed_rows: u64,
    pub ingest_waits: u64,
    pub ingest_wait: Duration,
    /// Fraction of rows or new windows load shedding drops now.
    pub drop_fraction: f64,
    /// None when the stream keeps no history.
    pub history: Option<HistoryStats>,
}

/// A stream's retained history.
pub struct HistoryStats {
    /// How long it is kept, as written (`30 days`).
    pub retention: String,
    pub rows: u64,
    pub bytes: u64,
}

/// One continuous query.
pub struct QueryStats {
    pub name: String,
    /// The stream it reads (for a query over a union, as the catalog names its input).
    pub stream: String,
    pub status: QueryStatus,
    pub rows_in: u64,
    pub rows_out: u64,
    pub late_rows: u64,
    /// Its input's watermark.
    pub watermark: Watermark,
    pub subscribers: u64,
    pub subscribers_cut_off: u64,
    /// Result bytes waiting for its slowest subscriber.
    pub subscriber_lag_bytes: u64,
    pub suppressed: u64,
    pub state_bytes: u64,
    pub shed_rows: u64,
    /// Its SELECT and clauses.
    pub definition: String,
}

/// Where a query is in its life.
pub enum QueryStatus {
    Running,
    /// Created `WITH (start = ...)` and reading history: how far it is.
    Backfilling(String),
    /// Running while its altered version is rebuilt from history: how far that is.
    Rebuilding(String),
    /// Stopped by an error.
    Failed(String),
}

impl QueryStatus {
    /// Whether it failed.
    pub fn failed(&self) -> bool {
        matches!(self, QueryStatus::Failed(_))
    }
}

impl std::fmt::Display for QueryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryStatus::Running => f.write_str("running"),
            QueryStatus::Backfilling(p) => write!(f, "backfilling: {p}"),
            QueryStatus::Rebuilding(p) => write!(f, "running; rebuilding: {p}"),
            QueryStatus::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

/// One source.
pub struct SourceStats {
    pub name: String,
    /// `file`, `kafka`, ...
    pub kind: String,
    pub stream: String,
    /// Its CREATE SOURCE statement.
    pub definition: String,
    pub status: SourceStatus,
}

/// One sink.
pub struct SinkStats {
    pub name: String,
    pub query: String,
    /// `webhook`, `kafka`, ...
    pub kind: String,
    /// Its CREATE SINK statement with secrets redacted.
    pub definition: String,
    /// Its status, the error's secrets masked.
    pub status: SinkStatus,
}

impl Engine {
    /// Everything SHOW, /metrics and the console tell, as of now.
    pub fn stats(&self) -> EngineStats {
        let shared = self.read();
        EngineStats {
            streams: streams(&shared),
            queries: queries(&shared),
            sources: sources(&shared),
            sinks: sinks(&shared),
            ingest_bytes: self.ingest.used() as u64,
            ingest_budget_waits: self.ingest.waits(),
        }
    }
}

fn streams(shared: &Shared) -> Vec<StreamStats> {
    let mut out = Vec::new();
    for s in shared.catalog.streams() {
        let columns = s
            .ddl
            .columns
            .iter()
            .map(|c| format!("{} {}", normalize(&c.name), c.data_type))
            .collect::<Vec<_>>()
            .join(", ");
        let mut stats = StreamStats {
            name: s.name.clone(),
            columns,
            definition: s.ddl.to_string(),
            watermark: Watermark::START,
            rows_in: 0,
            late_rows: 0,
            shed_rows: 0,
            ingest_waits: 0,
            ingest_wait: Duration::ZERO,
            drop_fraction: 0.0,
            history: None,
        };
        if let Some(hub) = shared.hubs.get(&s.name) {
            let hub = hub.lock();
            let rt = &hub.stream;
            stats.watermark = rt.watermark;
            stats.rows_in = rt.rows_in;
            stats.late_rows = rt.late_rows;
            stats.shed_rows = rt.shed_rows;
            stats.ingest_waits = rt.ingest_waits;
            stats.ingest_wait = rt.ingest_wait;
            stats.drop_fraction = hub.drop_fraction();
            stats.history = hub.history.as_ref().map(|h| HistoryStats {
                retention: h.retention.to_string(),
                rows: h.rows(),
                bytes: h.bytes(),
            });
        }
        out.push(stats);
    }
    out
}

fn queries(shared: &Shared) -> Vec<QueryStats> {
    let mut names: Vec<&String> = shared
        .query_streams
        .keys()
        .chain(shared.backfilling.keys())
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let Some(stream) = shared.query_streams.get(name) else {
            // A query being created WITH (start = ...): how far its backfill is.
            let progress = &shared.backfilling[name];
            out.push(QueryStats {
                name: name.clone(),
                stream: progress.stream.clone(),
                status: QueryStatus::Backfilling(progress.status()),
                rows_in: progress.fed(),
                rows_out: QueryOutput::lock(&progress.output).rows_out(),
                late_rows: 0,
                watermark: progress.watermark(),
                subscribers: 0,
                subscribers_cut_off: 0,
                subscriber_lag_bytes: 0,
                suppressed: 0,
                state_bytes: 0,
                shed_rows: 0,
                definition: progress.definition.clone(),
            });
            continue;
        };
        let Some(hub) = shared.hub_of_query(name) else {
            continue;
        };
        let hub = hub.lock();
        let Some(q) = hub.queries.get(name) else {
            continue;
        };
        let mut output = QueryOutput::lock(&q.output);
        let status = match (output.failed(), shared.backfilling.get(name)) {
            (Some(e), _) => QueryStatus::Failed(e.to_string()),
            // ALTER ... WITH (start = ...): the new query being rebuilt from history.
            (None, Some(progress)) => QueryStatus::Rebuilding(progress.status()),
            (None, None) => QueryStatus::Running,
        };
        out.push(QueryStats {
            name: name.clone(),
            stream: stream.clone(),
            status,
            rows_in: q.rows_in,
            rows_out: output.rows_out(),
            late_rows: hub.graph.late_rows(&q.path) + hub.union_late_rows(),
            watermark: hub.stream.watermark,
            subscribers: output.subscribers() as u64,
            subscribers_cut_off: output.subscribers_dropped(),
            subscriber_lag_bytes: output.queued_bytes() as u64,
            suppressed: hub.graph.suppressed_rows(&q.path),
            state_bytes: q.state_bytes as u64,
            shed_rows: q.shed_rows,
            definition: sql::query_sql(&q.def.query, &q.def.clauses),
        });
    }
    out
}

fn sources(shared: &Shared) -> Vec<SourceStats> {
    shared
        .sources
        .iter()
        .map(|(name, rt)| SourceStats {
            name: name.clone(),
            kind: rt.spec.kind().to_string(),
            stream: rt.spec.stream.clone(),
            definition: rt.spec.ddl.to_string(),
            status: rt.status(),
        })
        .collect()
}

fn sinks(shared: &Shared) -> Vec<SinkStats> {
    shared
        .sinks
        .iter()
        .map(|(name, rt)| {
            let mut status = rt.status();
            status.error = status
                .error
                .map(|e| crate::sql::sink::mask(&e, &rt.spec.ddl.secrets()));
            SinkStats {
                name: name.clone(),
                query: rt.spec.query.clone(),
                kind: rt.spec.kind().to_string(),
                definition: rt.spec.ddl.redacted(),
                status,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::{Engine, EngineConfig};

    /// A query over a union and an interval join (their own hubs) are in the stats, SHOW
    /// QUERIES and /metrics alike, with the same counts.
    #[test]
    fn queries_over_several_streams_are_counted_everywhere() {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        engine
            .execute_blocking(
                "CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, WATERMARK FOR ts AS ts); \
                 CREATE STREAM b (ts TIMESTAMP NOT NULL, k BIGINT, WATERMARK FOR ts AS ts); \
                 CREATE CONTINUOUS QUERY u AS SELECT ts, k FROM a UNION ALL SELECT ts, k FROM b; \
                 CREATE CONTINUOUS QUERY j AS SELECT a.ts, a.k, b.ts AS bts FROM a JOIN b \
                   ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '5' SECOND; \
                 CREATE CONTINUOUS QUERY f AS SELECT ts, k FROM a WHERE k > 1",
            )
            .unwrap();
        engine
            .execute_blocking(
                "INSERT INTO a VALUES ('2024-01-01 00:00:00', 1), ('2024-01-01 00:00:01', 2); \
                 INSERT INTO b VALUES ('2024-01-01 00:00:02', 2), ('2024-01-01 00:00:09', 1); \
                 INSERT INTO a VALUES ('2024-01-01 00:01:00', 0); \
                 INSERT INTO b VALUES ('2024-01-01 00:01:00', 0)",
            )
            .unwrap();
        let stats = engine.stats();
        let names: Vec<&str> = stats.queries.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["f", "j", "u"]);
        let q = |n: &str| stats.queries.iter().find(|q| q.name == n).unwrap();
        // The union releases rows as its watermark (the smaller of a's and b's) passes them.
        assert!((4..=6).contains(&q("u").rows_out), "{}", q("u").rows_out);
        assert_eq!(q("f").rows_out, 1);
        assert_eq!(q("j").rows_out, 1, "a's k = 2 at 1 s meets b's at 2 s");
        assert!(stats.queries.iter().all(|q| !q.status.failed()));
        let metrics = engine.metrics_text();
        for query in &stats.queries {
            let line = metrics
                .lines()
                .find(|l| {
                    l.starts_with("saql_query_rows_out_total{")
                        && l.contains(&format!("query=\"{}\"", query.name))
                })
                .unwrap_or_else(|| panic!("no rows_out of {} in\n{metrics}", query.name));
            assert!(line.ends_with(&format!(" {}", query.rows_out)), "{line}");
        }
        let streams: Vec<(&str, u64)> = stats
            .streams
            .iter()
            .map(|s| (s.name.as_str(), s.rows_in))
            .collect();
        assert_eq!(streams, [("a", 3), ("b", 3)]);
    }
}
