//! Answers that describe the engine rather than run a query: `SHOW STREAMS`, `SHOW QUERIES`,
//! `SHOW <variable>` as a PostgreSQL client expects it, and EXPLAIN's result set.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast as sq;

use crate::runtime::engine::StatementResult;
use crate::runtime::pg::functions::SessionInfo;
use crate::runtime::statements::stats::{QueryStats, SinkStats, SourceStats, StreamStats};

pub(in crate::runtime) fn show_schema(variable: &[sq::Ident]) -> SchemaRef {
    // `SHOW saql.max_result_rows` names its column as PostgreSQL names a dotted setting's.
    let dotted = variable.len() == 2 && variable[0].value.eq_ignore_ascii_case("saql");
    let name = variable
        .iter()
        .map(|i| i.value.to_lowercase())
        .collect::<Vec<_>>()
        .join(if dotted { "." } else { "_" });
    Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, false)]))
}

pub(in crate::runtime) fn show_value(variable: &[sq::Ident], session: &SessionInfo) -> String {
    let name = variable
        .iter()
        .map(|i| i.value.to_lowercase())
        .collect::<Vec<_>>()
        .join(" ");
    session.setting(&name)
}

/// A text column of `values`.
pub(in crate::runtime) fn text_column(values: Vec<String>) -> ArrayRef {
    Arc::new(StringArray::from(values))
}

/// A BIGINT column of `values`.
pub(in crate::runtime) fn int_column(values: Vec<u64>) -> ArrayRef {
    Arc::new(Int64Array::from(
        values.into_iter().map(|v| v as i64).collect::<Vec<_>>(),
    ))
}

/// One batch of `columns` named and typed by `fields` (no rows if they do not fit).
pub(in crate::runtime) fn rows_result(
    fields: Vec<(&str, DataType)>,
    columns: Vec<ArrayRef>,
) -> StatementResult {
    let schema = Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|(n, t)| Field::new(n, t, true))
            .collect::<Vec<_>>(),
    ));
    match RecordBatch::try_new(schema.clone(), columns) {
        Ok(b) => StatementResult::Rows {
            schema,
            batches: vec![b],
        },
        Err(_) => StatementResult::Rows {
            schema,
            batches: vec![],
        },
    }
}

impl StatementResult {
    pub(in crate::runtime) fn schema(&self) -> SchemaRef {
        match self {
            StatementResult::Rows { schema, .. } => schema.clone(),
            _ => Arc::new(Schema::empty()),
        }
    }
}

/// EXPLAIN's result: one text column `QUERY PLAN`, a row per line (or one row of JSON), as
/// PostgreSQL returns it.
pub(in crate::runtime) fn explain_result(
    plan: &crate::plan::QueryPlan,
    json: bool,
) -> StatementResult {
    let lines: Vec<String> = if json {
        vec![serde_json::to_string_pretty(&plan.explain_json()).unwrap_or_default()]
    } else {
        plan.explain_text().lines().map(str::to_string).collect()
    };
    rows_result(
        vec![("QUERY PLAN", DataType::Utf8)],
        vec![text_column(lines)],
    )
}

/// `SHOW STREAMS`: each stream's columns, watermark and counters.
pub(in crate::runtime) fn show_streams(streams: &[StreamStats]) -> StatementResult {
    let text = |f: fn(&StreamStats) -> String| text_column(streams.iter().map(f).collect());
    let int = |f: fn(&StreamStats) -> u64| int_column(streams.iter().map(f).collect());
    rows_result(
        vec![
            ("name", DataType::Utf8),
            ("columns", DataType::Utf8),
            ("watermark", DataType::Utf8),
            ("rows_in", DataType::Int64),
            ("late_rows", DataType::Int64),
            ("definition", DataType::Utf8),
            ("shed_rows", DataType::Int64),
            ("ingest_waits", DataType::Int64),
            ("history", DataType::Utf8),
            ("history_rows", DataType::Int64),
            ("history_bytes", DataType::Int64),
        ],
        vec![
            text(|s| s.name.clone()),
            text(|s| s.columns.clone()),
            text(|s| s.watermark.to_string()),
            int(|s| s.rows_in),
            int(|s| s.late_rows),
            text(|s| s.definition.clone()),
            int(|s| s.shed_rows),
            int(|s| s.ingest_waits),
            text(|s| {
                s.history
                    .as_ref()
                    .map_or_else(|| "off".to_string(), |h| h.retention.clone())
            }),
            int(|s| s.history.as_ref().map_or(0, |h| h.rows)),
            int(|s| s.history.as_ref().map_or(0, |h| h.bytes)),
        ],
    )
}

/// `SHOW QUERIES`: each query's stream, status, counters and subscribers, by name; a query
/// being created `WITH (start = ...)` is `backfilling`, one being altered so is `running;
/// rebuilding`, with how far it is in its status.
pub(in crate::runtime) fn show_queries(queries: &[QueryStats]) -> StatementResult {
    let text = |f: fn(&QueryStats) -> String| text_column(queries.iter().map(f).collect());
    let int = |f: fn(&QueryStats) -> u64| int_column(queries.iter().map(f).collect());
    rows_result(
        vec![
            ("name", DataType::Utf8),
            ("stream", DataType::Utf8),
            ("status", DataType::Utf8),
            ("rows_in", DataType::Int64),
            ("rows_out", DataType::Int64),
            ("late_rows", DataType::Int64),
            ("watermark", DataType::Utf8),
            ("subscribers", DataType::Int64),
            ("definition", DataType::Utf8),
            ("subscribers_cut_off", DataType::Int64),
            ("suppressed", DataType::Int64),
            ("state_bytes", DataType::Int64),
            ("shed_rows", DataType::Int64),
        ],
        vec![
            text(|q| q.name.clone()),
            text(|q| q.stream.clone()),
            text(|q| q.status.to_string()),
            int(|q| q.rows_in),
            int(|q| q.rows_out),
            int(|q| q.late_rows),
            text(|q| q.watermark.to_string()),
            int(|q| q.subscribers),
            text(|q| q.definition.clone()),
            int(|q| q.subscribers_cut_off),
            int(|q| q.suppressed),
            int(|q| q.state_bytes),
            int(|q| q.shed_rows),
        ],
    )
}

/// `SHOW SOURCES`: each source's kind, stream, state, counters, position and last error.
pub(in crate::runtime) fn show_sources(sources: &[SourceStats]) -> StatementResult {
    let text = |f: fn(&SourceStats) -> String| text_column(sources.iter().map(f).collect());
    let int = |f: fn(&SourceStats) -> u64| int_column(sources.iter().map(f).collect());
    let (t, i) = (DataType::Utf8, DataType::Int64);
    rows_result(
        vec![
            ("name", t.clone()),
            ("kind", t.clone()),
            ("stream", t.clone()),
            ("state", t.clone()),
            ("rows", i.clone()),
            ("bytes", i.clone()),
            ("bad_records", i),
            ("position", t.clone()),
            ("error", t.clone()),
            ("definition", t),
        ],
        vec![
            text(|s| s.name.clone()),
            text(|s| s.kind.clone()),
            text(|s| s.stream.clone()),
            text(|s| s.status.state.clone()),
            int(|s| s.status.progress.rows),
            int(|s| s.status.progress.bytes),
            int(|s| s.status.progress.bad),
            text(|s| {
                let position = s.status.progress.position.as_ref();
                position.map(|p| p.to_string()).unwrap_or_default()
            }),
            text(|s| s.status.error.clone().unwrap_or_default()),
            text(|s| s.definition.clone()),
        ],
    )
}

/// `SHOW SINKS`: each sink's query, kind, delivered seq and rows, retries, errors, gaps,
/// state and last error. Secrets in the definitions and errors are masked, and only an admin
/// sees where a sink delivers and what its target answered (others get NULL there).
pub(in crate::runtime) fn show_sinks(sinks: &[SinkStats], admin: bool) -> StatementResult {
    let text = |f: fn(&SinkStats) -> String| text_column(sinks.iter().map(f).collect());
    let int = |f: fn(&SinkStats) -> u64| int_column(sinks.iter().map(f).collect());
    let hidden = |f: fn(&SinkStats) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter(
            sinks.iter().map(|s| admin.then(|| f(s))),
        ))
    };
    let (t, i) = (DataType::Utf8, DataType::Int64);
    rows_result(
        vec![
            ("name", t.clone()),
            ("query", t.clone()),
            ("kind", t.clone()),
            ("delivered_seq", i.clone()),
            ("delivered_rows", i.clone()),
            ("retries", i.clone()),
            ("errors", i.clone()),
            ("gap_rows", i),
            ("state", t.clone()),
            ("last_error", t.clone()),
            ("definition", t),
        ],
        vec![
            text(|s| s.name.clone()),
            text(|s| s.query.clone()),
            text(|s| s.kind.clone()),
            int(|s| s.status.progress.delivered),
            int(|s| s.status.progress.rows),
            int(|s| s.status.progress.retries),
            int(|s| s.status.progress.errors),
            int(|s| s.status.progress.gap_rows),
            text(|s| s.status.state.clone()),
            hidden(|s| s.status.error.clone().unwrap_or_default()),
            hidden(|s| s.definition.clone()),
        ],
    )
}

/// `SHOW <variable>`: one row, one column named after the variable.
pub(in crate::runtime) fn show_variable(
    variable: &[sq::Ident],
    session: &SessionInfo,
) -> crate::Result<StatementResult> {
    let schema = show_schema(variable);
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from(vec![show_value(
            variable, session,
        )]))],
    )?;
    Ok(StatementResult::Rows {
        schema,
        batches: vec![batch],
    })
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    use crate::{Engine, EngineConfig, StatementResult};

    /// SHOW QUERIES' value of `column` for the only query.
    fn shown(engine: &Engine, column: &str) -> i64 {
        match engine.execute_blocking("SHOW QUERIES").unwrap().remove(0) {
            StatementResult::Rows { schema, batches } => {
                let i = schema.index_of(column).unwrap();
                batches[0].column(i).as_primitive::<Int64Type>().value(0)
            }
            _ => panic!("SHOW QUERIES returned no rows"),
        }
    }

    #[test]
    fn show_queries_counts_suppressed_rows() {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        engine
            .execute_blocking(
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, WATERMARK FOR ts AS ts); \
                 CREATE CONTINUOUS QUERY q AS SELECT ts, k FROM s \
                 SUPPRESS FOR INTERVAL '10' SECOND PER (k)",
            )
            .unwrap();
        assert_eq!(shown(&engine, "suppressed"), 0);
        // k = 1 at 0 s alerts, at 5 s is suppressed, at 10 s alerts; k = 2 at 1 s alerts.
        engine
            .execute_blocking(
                "INSERT INTO s VALUES ('2024-01-01 00:00:00', 1), ('2024-01-01 00:00:01', 2), \
                 ('2024-01-01 00:00:05', 1), ('2024-01-01 00:00:10', 1)",
            )
            .unwrap();
        assert_eq!(shown(&engine, "suppressed"), 1);
        assert_eq!(shown(&engine, "rows_out"), 3);
    }

    /// `n` rows of 1000 bytes of text each, numbered from `from`.
    fn wide_rows(from: usize, n: usize) -> String {
        let text = "x".repeat(1000);
        let rows: Vec<String> = (from..from + n)
            .map(|i| format!("('2024-01-01 00:00:00', {i}, '{text}')"))
            .collect();
        format!("INSERT INTO s VALUES {}", rows.join(", "))
    }

    #[test]
    fn retained_results_count_in_state_bytes_within_a_quarter_of_the_bound() {
        let config = EngineConfig {
            max_query_state_bytes: 400_000,
            ..EngineConfig::default()
        };
        let engine = Engine::open(config).unwrap();
        engine
            .execute_blocking(
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, t TEXT); \
                 CREATE CONTINUOUS QUERY q AS SELECT k, t FROM s WHERE k >= 0",
            )
            .unwrap();
        assert_eq!(shown(&engine, "state_bytes"), 0);
        // A filter holds no operator state: what it holds is its retained results.
        engine.execute_blocking(&wide_rows(0, 50)).unwrap();
        let held = shown(&engine, "state_bytes");
        assert!((50_000..100_000).contains(&held), "{held} bytes for 50 kB");
        // More results than a quarter of the bound: the oldest go, the query runs on.
        for i in 0..5 {
            engine
                .execute_blocking(&wide_rows(50 + i * 50, 50))
                .unwrap();
        }
        let held = shown(&engine, "state_bytes");
        assert!(
            (50_000..=100_000).contains(&held),
            "{held} bytes over 100 kB"
        );
        assert_eq!(shown(&engine, "rows_out"), 300);
        let retained = match engine.execute_blocking("SELECT min(k), count(*) FROM q") {
            Ok(mut r) => match r.remove(0) {
                StatementResult::Rows { batches, .. } => (
                    batches[0].column(0).as_primitive::<Int64Type>().value(0),
                    batches[0].column(1).as_primitive::<Int64Type>().value(0),
                ),
                _ => panic!("no rows"),
            },
            Err(e) => panic!("{e}"),
        };
        assert_eq!(retained.0 + retained.1, 300, "the newest rows are kept");
        assert!(retained.1 < 100, "{retained:?}");
    }
}
