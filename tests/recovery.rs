//! Durability through the library: random inserts, checkpoints and restarts (each restart
//! drops the engine without a final checkpoint, as a crash would, and opens the same data
//! directory again) give every query exactly the rows an uninterrupted run gives, numbered
//! the same, when a subscriber resumes after the last sequence number it saw.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, TimestampNanosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::arrow::util::display::array_value_to_string;
use proptest::prelude::*;
use saql::runtime::FsyncPolicy;
use saql::runtime::SubscriptionEvent;
use saql::{Engine, EngineConfig, StatementResult, Subscription};

const STREAM: &str = "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
                      WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)";

/// A reference table the lookup joins read.
const TABLE: &str = "CREATE TABLE watch (k BIGINT PRIMARY KEY, label TEXT)";

/// A windowed aggregate, a pattern, an outlier model, a plain filter, a suppressed one, an
/// enrichment from the table, a watch-list over it, a query over the windowed one's
/// results, and a window over a UNION ALL (of two filters of the stream: two taps, one merge).
const QUERIES: [(&str, &str); 9] = [
    (
        "win",
        "SELECT k, window_end, COUNT(*) AS n, SUM(v) AS total \
         FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end",
    ),
    (
        "pat",
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts \
         MEASURES FIRST(up.v) AS first_v, LAST(up.v) AS last_v, COUNT(up.*) AS n \
         PATTERN (up{3,}) WITHIN INTERVAL '30' SECOND DEFINE up AS v > PREV(v))",
    ),
    (
        "out",
        "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
         GROUP BY k, window_start, window_end OUTLIER ZSCORE(1.5) ON (total)",
    ),
    ("big", "SELECT ts, k, v FROM s WHERE v > 80"),
    (
        "sup",
        "SELECT ts, k, v FROM s WHERE v > 30 SUPPRESS FOR INTERVAL '3' SECOND PER (k)",
    ),
    (
        "enr",
        "SELECT s.k, s.v, w.label FROM s LEFT JOIN watch w ON s.k = w.k",
    ),
    (
        "wat",
        "SELECT k, v FROM s WHERE k IN (SELECT k FROM watch WHERE label <> 'quiet')",
    ),
    ("chn", "SELECT k, window_end, total FROM win WHERE n >= 2"),
    (
        "uni",
        "SELECT k, window_end, COUNT(*) AS n FROM TUMBLE(both_halves, ts, INTERVAL '5' SECOND) \
         GROUP BY k, window_start, window_end",
    ),
];

/// The view the union query reads.
const VIEW: &str = "CREATE VIEW both_halves AS SELECT ts, k, v FROM s WHERE v >= 50 \
                    UNION ALL SELECT ts, k, v FROM s WHERE k = 0";

#[derive(Debug, Clone)]
enum Step {
    /// Rows as (seconds, key, value).
    Insert(Vec<(i64, i64, i64)>),
    /// Table changes by key: a label upserts the row, None deletes it.
    Table(Vec<(i64, Option<&'static str>)>),
    Checkpoint,
    Restart,
}

fn batch(rows: &[(i64, i64, i64)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                rows.iter().map(|r| r.0 * 1_000_000_000),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

/// Each query's rows as text, keyed by sequence number.
type Seen = BTreeMap<&'static str, Vec<(i64, String)>>;

struct Consumer {
    subs: Vec<(&'static str, Subscription)>,
}

impl Consumer {
    fn subscribe(engine: &Engine, seen: &Seen) -> Consumer {
        let mut subs = Vec::new();
        for (name, _) in QUERIES {
            let from = seen.get(name).and_then(|r| r.last()).map_or(0, |r| r.0);
            let sql = format!("SUBSCRIBE {name} FROM {from} WITH SEQ");
            match engine.execute_blocking(&sql).unwrap().remove(0) {
                StatementResult::Subscribe(s) => subs.push((name, s)),
                _ => panic!("not a subscription"),
            }
        }
        Consumer { subs }
    }

    fn drain(&mut self, seen: &mut Seen) {
        for (name, sub) in &mut self.subs {
            while let Ok(event) = sub.events.try_recv() {
                let b = match event {
                    SubscriptionEvent::Rows(b) => b,
                    SubscriptionEvent::Failed(e) => panic!("{name} failed: {e}"),
                };
                let seqs = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                for row in 0..b.num_rows() {
                    let text: Vec<String> = (1..b.num_columns())
                        .map(|c| array_value_to_string(b.column(c), row).unwrap())
                        .collect();
                    seen.entry(name)
                        .or_default()
                        .push((seqs.value(row), text.join("|")));
                }
            }
        }
    }
}

fn open(dir: Option<&std::path::Path>, fsync: FsyncPolicy) -> Engine {
    Engine::open(EngineConfig {
        data_dir: dir.map(|d| d.to_path_buf()),
        fsync,
        checkpoint_interval: None,
        ..EngineConfig::default()
    })
    .unwrap()
}

fn create(engine: &Engine) {
    engine.execute_blocking(STREAM).unwrap();
    engine.execute_blocking(TABLE).unwrap();
    engine.execute_blocking(VIEW).unwrap();
    for (name, sql) in QUERIES {
        engine
            .execute_blocking(&format!("CREATE CONTINUOUS QUERY {name} AS {sql}"))
            .unwrap();
    }
}

/// Runs the steps; with a data directory, restarts where the steps say.
fn run(steps: &[Step], dir: Option<&std::path::Path>, fsync: FsyncPolicy) -> Seen {
    let mut seen = Seen::new();
    let mut engine = open(dir, fsync);
    create(&engine);
    let mut consumer = Consumer::subscribe(&engine, &seen);
    for step in steps {
        match step {
            Step::Insert(rows) => {
                engine.insert_batch("s", batch(rows)).unwrap();
            }
            Step::Table(changes) => {
                for sql in table_sql(changes) {
                    engine.execute_blocking(&sql).unwrap();
                }
            }
            Step::Checkpoint if dir.is_some() => {
                engine.execute_blocking("CHECKPOINT").unwrap();
            }
            Step::Restart if dir.is_some() => {
                consumer.drain(&mut seen);
                drop(consumer);
                drop(engine);
                engine = open(dir, fsync);
                consumer = Consumer::subscribe(&engine, &seen);
            }
            _ => {}
        }
        consumer.drain(&mut seen);
    }
    engine.finish();
    consumer.drain(&mut seen);
    seen
}

/// The statements of one step's table changes: upserts, then deletes.
fn table_sql(changes: &[(i64, Option<&'static str>)]) -> Vec<String> {
    let mut latest = BTreeMap::new();
    for (k, label) in changes {
        latest.insert(*k, *label);
    }
    let upserts: Vec<String> = latest
        .iter()
        .filter_map(|(k, l)| l.map(|l| format!("({k}, '{l}')")))
        .collect();
    let deletes: Vec<String> = latest
        .iter()
        .filter(|(_, l)| l.is_none())
        .map(|(k, _)| k.to_string())
        .collect();
    let mut out = Vec::new();
    if !upserts.is_empty() {
        out.push(format!(
            "INSERT INTO watch VALUES {} ON CONFLICT (k) DO UPDATE SET label = EXCLUDED.label",
            upserts.join(", ")
        ));
    }
    if !deletes.is_empty() {
        out.push(format!(
            "DELETE FROM watch WHERE k IN ({})",
            deletes.join(", ")
        ));
    }
    out
}

/// The lookup joins' results computed directly: every row against the table as the steps
/// before it left it.
fn direct(steps: &[Step]) -> (Vec<String>, Vec<String>) {
    let mut table: BTreeMap<i64, &str> = BTreeMap::new();
    let (mut enr, mut wat) = (Vec::new(), Vec::new());
    for step in steps {
        match step {
            Step::Insert(rows) => {
                for (_, k, v) in rows {
                    let label = table.get(k).copied();
                    enr.push(format!("{k}|{v}|{}", label.unwrap_or("")));
                    if label.is_some_and(|l| l != "quiet") {
                        wat.push(format!("{k}|{v}"));
                    }
                }
            }
            Step::Table(changes) => {
                let mut latest = BTreeMap::new();
                for (k, label) in changes {
                    latest.insert(*k, *label);
                }
                for (k, label) in latest {
                    match label {
                        Some(l) => table.insert(k, l),
                        None => table.remove(&k),
                    };
                }
            }
            _ => {}
        }
    }
    enr.sort();
    wat.sort();
    (enr, wat)
}

/// The rows a query emitted, without their sequence numbers, sorted.
fn texts(seen: &Seen, name: &str) -> Vec<String> {
    let mut out: Vec<String> = seen
        .get(name)
        .map(|rows| rows.iter().map(|r| r.1.clone()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let rows = prop::collection::vec((0i64..4, 0i64..3, 0i64..100), 1..12);
    let labels = prop::sample::select(vec![Some("bad"), Some("quiet"), Some("worse"), None]);
    let changes = prop::collection::vec((0i64..3, labels), 1..4);
    let step = prop_oneof![
        6 => rows.prop_map(Step::Insert),
        2 => changes.prop_map(Step::Table),
        1 => Just(Step::Checkpoint),
        2 => Just(Step::Restart),
    ];
    prop::collection::vec(step, 1..30).prop_map(|steps| {
        // Event time moves on by a second a batch, with up to 3 s of disorder within one.
        let mut t = 0;
        steps
            .into_iter()
            .map(|s| match s {
                Step::Insert(rows) => {
                    t += 1 + rows.len() as i64 / 3;
                    Step::Insert(rows.into_iter().map(|(d, k, v)| (t + d, k, v)).collect())
                }
                other => other,
            })
            .collect()
    })
}

fn check(seen: &Seen, expected: &Seen) {
    for (name, _) in QUERIES {
        let got = seen.get(name).cloned().unwrap_or_default();
        let want = expected.get(name).cloned().unwrap_or_default();
        let numbers: Vec<i64> = got.iter().map(|r| r.0).collect();
        let dense: Vec<i64> = (1..=got.len() as i64).collect();
        assert_eq!(
            numbers, dense,
            "{name}: sequence numbers with a gap or a duplicate"
        );
        assert_eq!(got, want, "{name}: rows differ from the uninterrupted run");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn restarts_give_the_uninterrupted_results_exactly_once(steps in steps()) {
        let expected = run(&steps, None, FsyncPolicy::Off);
        let dir = tempfile::tempdir().unwrap();
        let seen = run(&steps, Some(dir.path()), FsyncPolicy::Off);
        check(&seen, &expected);
        let (enr, wat) = direct(&steps);
        prop_assert_eq!(texts(&expected, "enr"), enr);
        prop_assert_eq!(texts(&expected, "wat"), wat);
    }
}

#[test]
fn a_restart_between_every_batch_with_fsync_always_loses_nothing() {
    let mut steps = Vec::new();
    for i in 0..20i64 {
        let rows: Vec<_> = (0..5)
            .map(|j| (i * 2 + j % 3, j % 2, (i * 37 + j * 11) % 100))
            .collect();
        steps.push(Step::Insert(rows));
        if i % 3 == 0 {
            let label = ["bad", "quiet"][(i % 2) as usize];
            steps.push(Step::Table(vec![(i % 2, Some(label)), ((i + 1) % 2, None)]));
        }
        steps.push(if i % 4 == 0 {
            Step::Checkpoint
        } else {
            Step::Restart
        });
    }
    let expected = run(&steps, None, FsyncPolicy::Off);
    assert!(
        expected.values().map(Vec::len).sum::<usize>() > 20,
        "the queries produce rows"
    );
    let dir = tempfile::tempdir().unwrap();
    let seen = run(&steps, Some(dir.path()), FsyncPolicy::Always);
    check(&seen, &expected);
}

#[test]
fn a_second_engine_on_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(Some(dir.path()), FsyncPolicy::Off);
    let err = Engine::open(EngineConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..EngineConfig::default()
    })
    .err()
    .expect("refused");
    assert!(
        err.to_string().contains("in use by another saql process"),
        "{err}"
    );
}

#[test]
fn checkpoints_bound_the_log_and_recovery_replays_only_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(Some(dir.path()), FsyncPolicy::Off);
    create(&engine);
    for i in 0..50 {
        engine
            .insert_batch("s", batch(&[(i, i % 3, i % 100)]))
            .unwrap();
    }
    engine.execute_blocking("CHECKPOINT").unwrap();
    engine.execute_blocking("CHECKPOINT").unwrap();
    let ckpts: Vec<_> = std::fs::read_dir(dir.path().join("ckpt"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(ckpts.len(), 2, "{ckpts:?}");
    let rows_in = |e: &Engine| match e.execute_blocking("SHOW STREAMS").unwrap().remove(0) {
        StatementResult::Rows { batches, .. } => {
            array_value_to_string(batches[0].column(3), 0).unwrap()
        }
        _ => panic!("no rows"),
    };
    assert_eq!(rows_in(&engine), "50");
    drop(engine);
    let engine = open(Some(dir.path()), FsyncPolicy::Off);
    assert_eq!(
        rows_in(&engine),
        "50",
        "counters come back from the checkpoint"
    );
}

/// An fsync that fails leaves the rows it covered unapplied: the writer gets the error, no
/// query saw the rows, and a restart does not bring them back (a retry would duplicate them).
#[test]
fn rows_whose_fsync_failed_are_not_applied_before_or_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(Some(dir.path()), FsyncPolicy::Always);
    create(&engine);
    let mut seen = Seen::new();
    let mut consumer = Consumer::subscribe(&engine, &seen);
    engine.insert_batch("s", batch(&[(1, 1, 90)])).unwrap();
    engine.inject_log_sync_failure();
    let err = engine
        .insert_batch("s", batch(&[(2, 1, 95), (3, 2, 99)]))
        .unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert!(
        engine.insert_batch("s", batch(&[(4, 1, 91)])).is_err(),
        "writes fail until a restart"
    );
    consumer.drain(&mut seen);
    assert_eq!(seen["big"].len(), 1, "only the durable row: {seen:?}");
    drop(consumer);
    drop(engine);

    let engine = open(Some(dir.path()), FsyncPolicy::Always);
    let mut consumer = Consumer::subscribe(&engine, &seen);
    engine.insert_batch("s", batch(&[(5, 1, 92)])).unwrap();
    consumer.drain(&mut seen);
    let values: Vec<&str> = seen["big"].iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(
        values,
        vec!["1970-01-01T00:00:01|1|90", "1970-01-01T00:00:05|1|92"],
        "{seen:?}"
    );
}
