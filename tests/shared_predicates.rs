//! Many filters on one stream share the evaluation of their common conjuncts
//! (`src/runtime/predicates.rs`), and what they keep goes to projections and window
//! aggregates that pick out only the columns they read. Each query here is checked against
//! DataFusion running the same query over the rows inserted while it was registered: random
//! queries (rows, or a tumbling aggregate by a column or by a computed key) built
//! from a pool of conjuncts (text equalities answered by one lookup, comparisons, IN, LIKE,
//! IS NULL, OR/NOT of them, and conjuncts that are not shared), aggregates grouped by a
//! number column or by two text columns, rows with NULLs in random
//! batches, and queries dropped and added midway so that shared conjuncts are released and
//! registered again.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use proptest::prelude::*;
use saql::runtime::engine::Subscription;
use saql::{Engine, EngineConfig, StatementResult};

use crate::common;
use common::{received, render, BASE, SEC};

const HOSTS: [&str; 6] = ["h0", "h1", "h2", "h3", "h4", "h5"];
const OPS: [&str; 4] = ["read", "write", "open", "close"];

/// Conjuncts a query's WHERE is made of. The first ones are shared atoms; the last ones are
/// not (they compute over a column), so they run on the rows the atoms keep.
const CONJUNCTS: [&str; 21] = [
    "host = 'h1'",
    "host = 'h2'",
    "host = 'h3'",
    "'h4' = host",
    "'h3' = host",
    "op = 'write'",
    "op = 'read'",
    "op = 'open'",
    "n > 3",
    "n <= 5",
    "n <> 4",
    "n IS NULL",
    "host IS NOT NULL",
    "host IN ('h0', 'h5')",
    "op LIKE 'c%'",
    "(n < 2 OR op = 'close')",
    "NOT (host = 'h2')",
    "n + 1 > 4",
    "n % 2 = 0",
    "length(host) = 2",
    "(n * 2 > 6 OR host = 'h3')",
];

#[derive(Debug, Clone)]
struct Row {
    host: Option<usize>,
    op: Option<usize>,
    n: Option<i64>,
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new("host", DataType::Utf8, true),
        Field::new("op", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]))
}

/// Rows `first..first + rows.len()` of the input, one second apart.
fn batch(first: usize, rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                (first..first + rows.len()).map(|i| BASE + i as i64 * SEC),
            )),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.host.map(|h| HOSTS[h])),
            )),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.op.map(|o| OPS[o])),
            )),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.n))),
        ],
    )
    .unwrap()
}

fn where_clause(conjuncts: &[usize]) -> String {
    conjuncts
        .iter()
        .map(|&c| CONJUNCTS[c])
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// What a query selects from the rows its WHERE keeps.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// The rows themselves.
    Rows,
    /// Per host and 10 s tumbling window: count, sum and least op.
    PerHost,
    /// The same per `n % 3`, a key computed from the rows.
    PerBucket,
    /// Per `n` (a number column, NULLs among its values): count and greatest host.
    PerN,
    /// Per host and op (two key columns): count and sum.
    PerHostOp,
}

impl Shape {
    fn sql(self, conjuncts: &[usize]) -> String {
        let w = where_clause(conjuncts);
        match self {
            Shape::Rows => format!("SELECT ts, host, op, n FROM e WHERE {w}"),
            Shape::PerHost => format!(
                "SELECT host, window_start, COUNT(*) AS c, SUM(n) AS total, MIN(op) AS first_op \
                 FROM TUMBLE(e, ts, INTERVAL '10' SECOND) WHERE {w} \
                 GROUP BY host, window_start, window_end"
            ),
            Shape::PerBucket => format!(
                "SELECT n % 3 AS bucket, window_start, COUNT(*) AS c, MAX(host) AS top \
                 FROM TUMBLE(e, ts, INTERVAL '10' SECOND) WHERE {w} \
                 GROUP BY n % 3, window_start, window_end"
            ),
            Shape::PerN => format!(
                "SELECT n, window_start, COUNT(*) AS c, MAX(host) AS top \
                 FROM TUMBLE(e, ts, INTERVAL '10' SECOND) WHERE {w} \
                 GROUP BY n, window_start, window_end"
            ),
            Shape::PerHostOp => format!(
                "SELECT host, op, window_start, COUNT(*) AS c, SUM(n) AS total \
                 FROM TUMBLE(e, ts, INTERVAL '10' SECOND) WHERE {w} \
                 GROUP BY host, op, window_start, window_end"
            ),
        }
    }

    /// The same query over a table `e` of all its rows, in DataFusion.
    fn reference_sql(self, conjuncts: &[usize]) -> String {
        let w = where_clause(conjuncts);
        let bin = "date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00')";
        match self {
            Shape::Rows => format!("SELECT ts, host, op, n FROM e WHERE {w}"),
            Shape::PerHost => format!(
                "SELECT host, {bin} AS ws, COUNT(*), SUM(n), MIN(op) FROM e WHERE {w} \
                 GROUP BY host, ws"
            ),
            Shape::PerBucket => format!(
                "SELECT n % 3, {bin} AS ws, COUNT(*), MAX(host) FROM e WHERE {w} \
                 GROUP BY n % 3, ws"
            ),
            Shape::PerN => format!(
                "SELECT n, {bin} AS ws, COUNT(*), MAX(host) FROM e WHERE {w} GROUP BY n, ws"
            ),
            Shape::PerHostOp => format!(
                "SELECT host, op, {bin} AS ws, COUNT(*), SUM(n) FROM e WHERE {w} \
                 GROUP BY host, op, ws"
            ),
        }
    }
}

/// A query: its conjuncts and shape, and the batch before which it is created and (if any)
/// dropped. Windowed queries run from the first batch to the end, so that each of their
/// windows holds every row it should.
#[derive(Debug, Clone)]
struct QuerySpec {
    conjuncts: Vec<usize>,
    shape: Shape,
    from: usize,
    until: Option<usize>,
}

fn case() -> impl Strategy<Value = (Vec<Row>, Vec<usize>, Vec<QuerySpec>)> {
    let row = (
        proptest::option::weighted(0.9, 0..HOSTS.len()),
        proptest::option::weighted(0.9, 0..OPS.len()),
        proptest::option::weighted(0.85, 0i64..8),
    )
        .prop_map(|(host, op, n)| Row { host, op, n });
    let query = (
        proptest::collection::vec(0..CONJUNCTS.len(), 1..4),
        prop_oneof![
            4 => Just(Shape::Rows),
            1 => Just(Shape::PerHost),
            1 => Just(Shape::PerBucket),
            1 => Just(Shape::PerN),
            1 => Just(Shape::PerHostOp),
        ],
        0usize..4,
        proptest::option::of(1usize..6),
    )
        .prop_map(|(conjuncts, shape, from, span)| match shape {
            Shape::Rows => QuerySpec {
                conjuncts,
                shape,
                from,
                until: span.map(|s| from + s),
            },
            _ => QuerySpec {
                conjuncts,
                shape,
                from: 0,
                until: None,
            },
        });
    (
        proptest::collection::vec(row, 1..400),
        proptest::collection::vec(1usize..80, 1..8),
        proptest::collection::vec(query, 1..14),
    )
}

fn subscribe(rt: &tokio::runtime::Runtime, engine: &Engine, name: &str) -> Subscription {
    match rt
        .block_on(engine.execute(&format!("SUBSCRIBE {name}")))
        .unwrap()
        .remove(0)
    {
        StatementResult::Subscribe(s) => s,
        _ => panic!("not a subscription"),
    }
}

fn reference(rt: &tokio::runtime::Runtime, input: RecordBatch, query: &QuerySpec) -> Vec<String> {
    rt.block_on(async {
        let ctx = SessionContext::new();
        let table = MemTable::try_new(schema(), vec![vec![input]]).unwrap();
        ctx.register_table("e", Arc::new(table)).unwrap();
        let sql = query.shape.reference_sql(&query.conjuncts);
        render(&ctx.sql(&sql).await.unwrap().collect().await.unwrap())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn each_query_gets_what_datafusion_computes((rows, splits, queries) in case()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let engine = Engine::open(EngineConfig::default()).unwrap();
        rt.block_on(engine.execute(
            "CREATE STREAM e (ts TIMESTAMP NOT NULL, host TEXT, op TEXT, n BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
        ))
        .unwrap();
        // The input in batches; each query sees batches from..until.
        let mut batches = Vec::new();
        let mut start = 0;
        while start < rows.len() {
            let len = splits[batches.len() % splits.len()].min(rows.len() - start);
            batches.push((start, &rows[start..start + len]));
            start += len;
        }
        let mut subs: Vec<Option<Subscription>> = queries.iter().map(|_| None).collect();
        let mut got: Vec<Vec<RecordBatch>> = queries.iter().map(|_| Vec::new()).collect();
        for step in 0..=batches.len() {
            for (i, q) in queries.iter().enumerate() {
                if q.until == Some(step) && subs[i].is_some() {
                    got[i].extend(received(subs[i].as_mut().unwrap()));
                    subs[i] = None;
                    rt.block_on(engine.execute(&format!("DROP QUERY q{i}"))).unwrap();
                }
                if q.from == step {
                    rt.block_on(engine.execute(&format!(
                        "CREATE CONTINUOUS QUERY q{i} AS {}",
                        q.shape.sql(&q.conjuncts)
                    )))
                    .unwrap();
                    subs[i] = Some(subscribe(&rt, &engine, &format!("q{i}")));
                }
            }
            if let Some((first, rows)) = batches.get(step) {
                engine.insert_batch("e", batch(*first, rows)).unwrap();
            }
        }
        engine.finish();
        for (i, q) in queries.iter().enumerate() {
            if let Some(sub) = subs[i].as_mut() {
                got[i].extend(received(sub));
            }
            let seen: Vec<RecordBatch> = batches
                .iter()
                .enumerate()
                .filter(|(step, _)| *step >= q.from && q.until.is_none_or(|u| *step < u))
                .map(|(_, (first, rows))| batch(*first, rows))
                .collect();
            let want = if seen.is_empty() {
                Vec::new()
            } else {
                let all = datafusion::arrow::compute::concat_batches(&schema(), &seen).unwrap();
                reference(&rt, all, q)
            };
            prop_assert_eq!(render(&got[i]), want, "query q{}: {}", i, q.shape.sql(&q.conjuncts));
        }
    }
}
