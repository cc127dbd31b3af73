//! Answers that describe the engine rather than run a query: `SHOW STREAMS`, `SHOW QUERIES`,
//! `SHOW <variable>` as a PostgreSQL client expects it, and EXPLAIN's result set.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast as sq;

use crate::plan::catalog::normalize;
use crate::runtime::core::output::QueryOutput;
use crate::runtime::engine::{Shared, StatementResult};
use crate::runtime::pg::functions::SessionInfo;
use crate::sql;

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
pub(in crate::runtime) fn show_streams(shared: &Shared) -> StatementResult {
    let mut names = Vec::new();
    let mut columns = Vec::new();
    let mut watermarks = Vec::new();
    let mut rows_in = Vec::new();
    let mut late = Vec::new();
    let mut ddl = Vec::new();
    let mut shed = Vec::new();
    let mut waits = Vec::new();
    let mut history = Vec::new();
    let mut history_rows = Vec::new();
    let mut history_bytes = Vec::new();
    for s in shared.catalog.streams() {
        let hub = shared.hubs.get(&s.name).map(|h| h.lock());
        let rt = hub.as_ref().map(|h| &h.stream);
        names.push(s.name.clone());
        columns.push(
            s.ddl
                .columns
                .iter()
                .map(|c| format!("{} {}", normalize(&c.name), c.data_type))
                .collect::<Vec<_>>()
                .join(", "),
        );
        watermarks.push(rt.map(|r| r.watermark.to_string()).unwrap_or_default());
        rows_in.push(rt.map(|r| r.rows_in).unwrap_or(0));
        late.push(rt.map(|r| r.late_rows).unwrap_or(0));
        shed.push(rt.map(|r| r.shed_rows).unwrap_or(0));
        waits.push(rt.map(|r| r.ingest_waits).unwrap_or(0));
        let h = hub.as_ref().and_then(|h| h.history.as_ref());
        history.push(h.map_or_else(|| "off".to_string(), |h| h.retention.to_string()));
        history_rows.push(h.map_or(0, |h| h.rows()));
        history_bytes.push(h.map_or(0, |h| h.bytes()));
        ddl.push(s.ddl.to_string());
    }
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
            text_column(names),
            text_column(columns),
            text_column(watermarks),
            int_column(rows_in),
            int_column(late),
            text_column(ddl),
            int_column(shed),
            int_column(waits),
            text_column(history),
            int_column(history_rows),
            int_column(history_bytes),
        ],
    )
}

/// `SHOW QUERIES`: each query's stream, status, counters and subscribers, by name; a query
/// being created `WITH (start = ...)` is `backfilling`, one being altered so is `running;
/// rebuilding`, with how far it is in its status.
pub(in crate::runtime) fn show_queries(shared: &Shared) -> StatementResult {
    let mut names = Vec::new();
    let mut streams = Vec::new();
    let mut status = Vec::new();
    let mut rows_in = Vec::new();
    let mut rows_out = Vec::new();
    let mut late = Vec::new();
    let mut watermarks = Vec::new();
    let mut subscribers = Vec::new();
    let mut defs = Vec::new();
    let mut cut_off = Vec::new();
    let mut suppressed = Vec::new();
    let mut state_bytes = Vec::new();
    let mut shed = Vec::new();
    let mut all: Vec<&String> = shared
        .query_streams
        .keys()
        .chain(shared.backfilling.keys())
        .collect();
    all.sort();
    all.dedup();
    for name in all {
        let Some(stream) = shared.query_streams.get(name) else {
            // A query being created WITH (start = ...): how far its backfill is.
            let progress = &shared.backfilling[name];
            names.push(name.clone());
            streams.push(progress.stream.clone());
            status.push(format!("backfilling: {}", progress.status()));
            rows_in.push(progress.fed());
            rows_out.push(QueryOutput::lock(&progress.output).rows_out());
            late.push(0);
            watermarks.push(progress.watermark().to_string());
            subscribers.push(0);
            cut_off.push(0);
            suppressed.push(0);
            state_bytes.push(0);
            shed.push(0);
            defs.push(progress.definition.clone());
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
        names.push(name.clone());
        streams.push(stream.clone());
        status.push(match (output.failed(), shared.backfilling.get(name)) {
            // ALTER ... WITH (start = ...): the new query being rebuilt from history.
            (None, Some(progress)) => format!("running; rebuilding: {}", progress.status()),
            (None, None) => "running".to_string(),
            (Some(e), _) => format!("failed: {e}"),
        });
        rows_in.push(q.rows_in);
        rows_out.push(output.rows_out());
        late.push(hub.graph.late_rows(&q.path));
        watermarks.push(hub.stream.watermark.to_string());
        subscribers.push(output.subscribers() as u64);
        cut_off.push(output.subscribers_dropped());
        suppressed.push(hub.graph.suppressed_rows(&q.path));
        state_bytes.push(q.state_bytes as u64);
        shed.push(q.shed_rows);
        defs.push(sql::query_sql(&q.def.query, &q.def.clauses));
    }
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
            text_column(names),
            text_column(streams),
            text_column(status),
            int_column(rows_in),
            int_column(rows_out),
            int_column(late),
            text_column(watermarks),
            int_column(subscribers),
            text_column(defs),
            int_column(cut_off),
            int_column(suppressed),
            int_column(state_bytes),
            int_column(shed),
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
