//! Queries over a `UNION ALL` of two streams, and interval and window joins of them, checked
//! against a batch recompute over all the rows of both: random rows with bounded disorder
//! (within each stream's watermark delay), split into random batches, the two streams'
//! batches interleaved in a random order, and a checkpoint, more rows and a crash (the engine
//! dropped, the log replayed by the next one) at a random point. The union's rows leave in
//! event-time order whatever the interleaving, so two runs with different splits and orders
//! emit the same rows in the same order.
//!
//! And a temporal join of a stream with a versioned table changed between its batches,
//! checked against a direct computation of the version each row must read, across random
//! splits, changes, a checkpoint and a crash.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{batch, jittered_rows, render, schema, Row};
use datafusion::arrow::array::{Array, Int64Array, RecordBatch};
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use proptest::prelude::*;
use saql::runtime::{FsyncPolicy, SubscriptionEvent};
use saql::{Engine, EngineConfig, StatementResult, Subscription};

const SETUP: [&str; 3] = [
    "CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
    "CREATE STREAM b (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
     WATERMARK FOR ts AS ts - INTERVAL '4' SECOND)",
    "CREATE VIEW u AS SELECT ts, k, v FROM a UNION ALL SELECT ts, k, v FROM b WHERE v IS NOT NULL",
];

/// The union's rows, filtered and marked with their stream; a tumbling and a hopping window
/// over the view; an inner, a LEFT and an anti interval join of the two streams; a window
/// join of two tumbling windows' results and a LEFT window join of two hopping windows' rows;
/// a RIGHT and a FULL interval join; then unions whose branches read those queries: a window's
/// results, an interval join's rows by its left's and its right's time, an anti join's, a
/// window join's and another union's, a MATCH_RECOGNIZE's matches, and a window over such a
/// union; a window over an inline union.
const QUERIES: [(&str, &str); 17] = [
    (
        "rows",
        "SELECT ts, k, v, src FROM (SELECT ts, k, v, 'a' AS src FROM a WHERE v > -30 \
         UNION ALL SELECT ts, k, v, 'b' AS src FROM b) x WHERE k <> 3",
    ),
    (
        "win",
        "SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total \
         FROM TUMBLE(u, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end",
    ),
    (
        "hop",
        "SELECT window_start, window_end, COUNT(*) AS n, MAX(v) AS hi \
         FROM HOP(u, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) \
         GROUP BY window_start, window_end",
    ),
    (
        "inner",
        "SELECT a.ts, a.k, a.v, b.ts AS bts, b.v AS bv FROM a JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '3' SECOND",
    ),
    (
        "lft",
        "SELECT a.ts, a.k, a.v, b.ts AS bts FROM a LEFT JOIN b ON a.k = b.k \
         AND b.ts >= a.ts AND b.ts <= a.ts + INTERVAL '1' SECOND",
    ),
    (
        "anti",
        "SELECT a.ts, a.k, a.v FROM a WHERE a.v IS NOT NULL AND NOT EXISTS (SELECT 1 FROM b \
         WHERE b.k = a.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '2' SECOND)",
    ),
    (
        "wjoin",
        "SELECT l.k, l.window_start, l.window_end, l.n, r.total \
         FROM (SELECT k, window_start, window_end, COUNT(*) AS n \
           FROM TUMBLE(a, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end) l \
         JOIN (SELECT k, window_start, window_end, SUM(v) AS total \
           FROM TUMBLE(b, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end) r \
         ON l.k = r.k AND l.window_start = r.window_start AND l.window_end = r.window_end",
    ),
    (
        "whop",
        "SELECT l.ts, l.k, l.window_start, r.ts AS rts \
         FROM HOP(a, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) l \
         LEFT JOIN HOP(b, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) r \
         ON l.k = r.k AND l.window_start = r.window_start AND l.window_end = r.window_end",
    ),
    (
        "rgt",
        "SELECT a.ts, a.k, b.ts AS bts, b.k AS bk FROM a RIGHT JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '2' SECOND",
    ),
    (
        "full",
        "SELECT a.ts, a.v, b.ts AS bts, b.v AS bv FROM a FULL JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND",
    ),
    (
        "wa",
        "SELECT k, window_end, COUNT(*) AS n FROM TUMBLE(a, ts, INTERVAL '10' SECOND) \
         GROUP BY k, window_start, window_end",
    ),
    ("mix", MIX),
    (
        "iwin",
        "SELECT k, window_end, COUNT(*) AS n FROM TUMBLE((SELECT ts, k, v FROM a UNION ALL \
         SELECT ts, k, v FROM b WHERE v IS NOT NULL), ts, INTERVAL '10' SECOND) \
         GROUP BY k, window_start, window_end",
    ),
    (
        "mixwin",
        "SELECT src, window_end, COUNT(*) AS n, MIN(ts) AS first, MAX(v) AS hi \
         FROM TUMBLE(mix, ts, INTERVAL '30' SECOND) GROUP BY src, window_start, window_end",
    ),
    (
        "pat",
        "SELECT * FROM a MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts \
         MEASURES FIRST(x.ts) AS ts, LAST(y.ts) AS yts, x.v AS v \
         ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (x y+) \
         WITHIN INTERVAL '3' SECOND DEFINE x AS x.v > 0, y AS y.v < x.v)",
    ),
    (
        "mixp",
        "SELECT ts, k, v, 'p' AS src FROM pat UNION ALL SELECT ts, k, v, 'b' FROM b WHERE k <> 3",
    ),
    (
        "mix2",
        "SELECT bts AS ts, k, bv AS v FROM \"inner\" \
         UNION ALL SELECT ts, k, v FROM anti \
         UNION ALL SELECT ts, k, v FROM \"rows\" WHERE src = 'b' \
         UNION ALL SELECT window_end, k, n FROM wjoin",
    ),
];

/// A union of a window's results (`wa`), an interval join's rows (`inner`, by its left's
/// time) and a stream's.
const MIX: &str = "SELECT window_end AS ts, k, n AS v, 'w' AS src FROM wa \
     UNION ALL SELECT ts, k, v, 'j' FROM \"inner\" \
     UNION ALL SELECT ts, k, v, 'b' FROM b WHERE v > 0";

/// [`MIX`] computed by DataFusion.
const MIX_REFERENCE: &str =
    "SELECT ws + INTERVAL '10 seconds' AS ts, k, COUNT(*) AS v, 'w' AS src \
     FROM (SELECT k, date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws \
       FROM a) GROUP BY k, ws \
     UNION ALL SELECT a.ts, a.k, a.v, 'j' FROM a JOIN b ON a.k = b.k \
       AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '3' SECOND \
     UNION ALL SELECT ts, k, v, 'b' FROM b WHERE v > 0";

/// The same results computed by DataFusion over all rows at once.
const REFERENCE: [(&str, &str); 17] = [
    (
        "rows",
        "SELECT ts, k, v, src FROM (SELECT ts, k, v, 'a' AS src FROM a WHERE v > -30 \
         UNION ALL SELECT ts, k, v, 'b' AS src FROM b) x WHERE k <> 3",
    ),
    (
        "win",
        "SELECT k, ws, ws + INTERVAL '10 seconds', COUNT(*), SUM(v) FROM \
         (SELECT *, date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws \
          FROM (SELECT ts, k, v FROM a UNION ALL SELECT ts, k, v FROM b WHERE v IS NOT NULL)) \
         GROUP BY k, ws",
    ),
    (
        "hop",
        "SELECT ws, ws + INTERVAL '15 seconds', COUNT(*), MAX(v) FROM ( \
           SELECT v, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws FROM u \
           UNION ALL SELECT v, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') \
             - INTERVAL '5 seconds' FROM u \
           UNION ALL SELECT v, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') \
             - INTERVAL '10 seconds' FROM u) \
         GROUP BY ws",
    ),
    (
        "inner",
        "SELECT a.ts, a.k, a.v, b.ts AS bts, b.v AS bv FROM a JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '3' SECOND",
    ),
    (
        "lft",
        "SELECT a.ts, a.k, a.v, b.ts AS bts FROM a LEFT JOIN b ON a.k = b.k \
         AND b.ts >= a.ts AND b.ts <= a.ts + INTERVAL '1' SECOND",
    ),
    (
        "anti",
        "SELECT a.ts, a.k, a.v FROM a WHERE a.v IS NOT NULL AND NOT EXISTS (SELECT 1 FROM b \
         WHERE b.k = a.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '2' SECOND)",
    ),
    (
        "wjoin",
        "SELECT l.k, l.ws, l.ws + INTERVAL '10 seconds', l.n, r.total \
         FROM (SELECT k, ws, COUNT(*) AS n FROM (SELECT k, \
           date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws FROM a) \
           GROUP BY k, ws) l \
         JOIN (SELECT k, ws, SUM(v) AS total FROM (SELECT k, v, \
           date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws FROM b) \
           GROUP BY k, ws) r \
         ON l.k = r.k AND l.ws = r.ws",
    ),
    (
        "whop",
        "SELECT l.ts, l.k, l.ws, r.ts FROM ( \
           SELECT ts, k, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws \
           FROM a UNION ALL SELECT ts, k, date_bin(INTERVAL '5 seconds', ts, \
           TIMESTAMP '1970-01-01 00:00:00') - INTERVAL '5 seconds' FROM a) l \
         LEFT JOIN ( \
           SELECT ts, k, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws \
           FROM b UNION ALL SELECT ts, k, date_bin(INTERVAL '5 seconds', ts, \
           TIMESTAMP '1970-01-01 00:00:00') - INTERVAL '5 seconds' FROM b) r \
         ON l.k = r.k AND l.ws = r.ws",
    ),
    (
        "rgt",
        "SELECT a.ts, a.k, b.ts AS bts, b.k AS bk FROM a RIGHT JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '2' SECOND",
    ),
    (
        "full",
        "SELECT a.ts, a.v, b.ts AS bts, b.v AS bv FROM a FULL JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND",
    ),
    (
        "wa",
        "SELECT k, ws + INTERVAL '10 seconds', COUNT(*) FROM (SELECT k, \
           date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws FROM a) \
         GROUP BY k, ws",
    ),
    ("mix", MIX_REFERENCE),
    (
        "iwin",
        "SELECT k, ws + INTERVAL '10 seconds', COUNT(*) FROM \
         (SELECT *, date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws \
          FROM u) GROUP BY k, ws",
    ),
    (
        "mixwin",
        "SELECT src, ws + INTERVAL '30 seconds', COUNT(*), MIN(ts), MAX(v) FROM (SELECT *, \
           date_bin(INTERVAL '30 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws \
           FROM mix) GROUP BY src, ws",
    ),
    // Checked against the pattern's own rows and b's (DataFusion has no MATCH_RECOGNIZE).
    ("pat", ""),
    ("mixp", ""),
    (
        "mix2",
        "SELECT b.ts, a.k, b.v FROM a JOIN b ON a.k = b.k \
           AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '3' SECOND \
         UNION ALL SELECT a.ts, a.k, a.v FROM a WHERE a.v IS NOT NULL AND NOT EXISTS ( \
           SELECT 1 FROM b WHERE b.k = a.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '2' SECOND) \
         UNION ALL SELECT ts, k, v FROM b WHERE k <> 3 \
         UNION ALL SELECT l.ws + INTERVAL '10 seconds', l.k, l.n \
         FROM (SELECT k, ws, COUNT(*) AS n FROM (SELECT k, \
           date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws FROM a) \
           GROUP BY k, ws) l \
         JOIN (SELECT k, ws FROM (SELECT k, \
           date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws FROM b) \
           GROUP BY k, ws) r \
         ON l.k = r.k AND l.ws = r.ws",
    ),
];

/// Each query's rows as text with their sequence numbers, in the order received.
type Seen = BTreeMap<&'static str, Vec<(i64, String)>>;

fn subscribe(engine: &Engine, seen: &Seen) -> Vec<(&'static str, Subscription)> {
    QUERIES
        .iter()
        .map(|(name, _)| {
            let from = seen.get(name).and_then(|r| r.last()).map_or(0, |r| r.0);
            let sql = format!("SUBSCRIBE {name} FROM {from} WITH SEQ");
            match engine.execute_blocking(&sql).unwrap().remove(0) {
                StatementResult::Subscribe(s) => (*name, s),
                _ => panic!("not a subscription"),
            }
        })
        .collect()
}

fn drain(subs: &mut [(&'static str, Subscription)], seen: &mut Seen) {
    for (name, sub) in subs {
        while let Ok(event) = sub.events.try_recv() {
            let b: RecordBatch = match event {
                SubscriptionEvent::Rows(b) => b,
                SubscriptionEvent::Failed(e) => panic!("{name} failed: {e}"),
            };
            let seqs = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            for row in 0..b.num_rows() {
                let text: Vec<String> = (1..b.num_columns())
                    .map(|c| match b.column(c).is_null(row) {
                        true => "NULL".to_string(),
                        false => array_value_to_string(b.column(c), row).unwrap(),
                    })
                    .collect();
                seen.entry(name)
                    .or_default()
                    .push((seqs.value(row), text.join("|")));
            }
        }
    }
}

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(EngineConfig {
        data_dir: Some(dir.to_path_buf()),
        fsync: FsyncPolicy::Off,
        checkpoint_interval: None,
        ..EngineConfig::default()
    })
    .unwrap()
}

/// The batches of both streams in the order `order` picks them (true: the next of `a`), a
/// checkpoint before batch `checkpoint_at` and a crash before batch `crash_at`.
fn run(
    a: &[RecordBatch],
    b: &[RecordBatch],
    order: &[bool],
    checkpoint_at: usize,
    crash_at: usize,
) -> Seen {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    for sql in SETUP {
        engine.execute_blocking(sql).unwrap();
    }
    for (name, sql) in QUERIES {
        engine
            .execute_blocking(&format!("CREATE CONTINUOUS QUERY {name} AS {sql}"))
            .unwrap();
    }
    let mut seen = Seen::new();
    let mut subs = subscribe(&engine, &seen);
    let (mut ia, mut ib) = (0, 0);
    let mut step = 0;
    let mut pick = order.iter().cycle();
    while ia < a.len() || ib < b.len() {
        if step == checkpoint_at {
            engine.execute_blocking("CHECKPOINT").unwrap();
        }
        if step == crash_at {
            drain(&mut subs, &mut seen);
            drop(subs);
            drop(engine);
            engine = open(dir.path());
            subs = subscribe(&engine, &seen);
        }
        let take_a = match (ia < a.len(), ib < b.len()) {
            (true, true) => *pick.next().unwrap(),
            (more_a, _) => more_a,
        };
        if take_a {
            engine.insert_batch("a", a[ia].clone()).unwrap();
            ia += 1;
        } else {
            engine.insert_batch("b", b[ib].clone()).unwrap();
            ib += 1;
        }
        step += 1;
        drain(&mut subs, &mut seen);
    }
    engine.finish();
    drain(&mut subs, &mut seen);
    seen
}

fn split(rows: &[Row], splits: &[usize]) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while start < rows.len() {
        let len = splits[i % splits.len()].min(rows.len() - start);
        out.push(batch(&rows[start..start + len]));
        start += len;
        i += 1;
    }
    out
}

fn reference(rt: &tokio::runtime::Runtime, sql: &str, a: &[Row], b: &[Row]) -> Vec<String> {
    rt.block_on(async {
        let ctx = SessionContext::new();
        for (name, rows) in [("a", a), ("b", b)] {
            let table = MemTable::try_new(schema(), vec![vec![batch(rows)]]).unwrap();
            ctx.register_table(name, Arc::new(table)).unwrap();
        }
        ctx.sql(
            "CREATE VIEW u AS SELECT ts, k, v FROM a UNION ALL SELECT ts, k, v FROM b \
                 WHERE v IS NOT NULL",
        )
        .await
        .unwrap();
        ctx.sql(&format!("CREATE VIEW mix AS {MIX_REFERENCE}"))
            .await
            .unwrap();
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        render(&batches)
    })
}

fn sorted(seen: &Seen, name: &str) -> Vec<String> {
    let mut rows: Vec<String> = seen
        .get(name)
        .map(|r| r.iter().map(|(_, t)| t.clone()).collect())
        .unwrap_or_default();
    rows.sort();
    rows
}

/// A stream's rows and the sizes of the batches to split them into.
type Split = (Vec<Row>, Vec<usize>);

fn streams() -> impl Strategy<Value = (Split, Split)> {
    (jittered_rows(120, 4), jittered_rows(120, 4))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn a_union_matches_batch_recompute_across_splits_orders_and_a_crash(
        ((a, splits_a), (b, splits_b)) in streams(),
        order in prop::collection::vec(any::<bool>(), 1..12),
        other_order in prop::collection::vec(any::<bool>(), 1..12),
        checkpoint_at in 0usize..20,
        crash_offset in 0usize..10,
    ) {
        // Stream b starts a little later, so that the union waits for it at first.
        let b: Vec<Row> = b.into_iter().map(|r| Row { ts: r.ts + 3 * common::SEC, ..r }).collect();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (batches_a, batches_b) = (split(&a, &splits_a), split(&b, &splits_b));
        let seen = run(&batches_a, &batches_b, &order, checkpoint_at, checkpoint_at + crash_offset);
        for ((name, _), (_, sql)) in QUERIES.iter().zip(REFERENCE) {
            let got = seen.get(name).cloned().unwrap_or_default();
            let numbers: Vec<i64> = got.iter().map(|r| r.0).collect();
            let dense: Vec<i64> = (1..=got.len() as i64).collect();
            prop_assert_eq!(numbers, dense, "{}: a gap or a repeat in the sequence numbers", name);
            if sql.is_empty() {
                continue;
            }
            let want = reference(&rt, sql, &a, &b)
                .into_iter()
                .map(|l| l.replace('T', " "))
                .collect::<Vec<_>>();
            let got: Vec<String> = sorted(&seen, name).into_iter().map(|l| l.replace('T', " ")).collect();
            prop_assert_eq!(got, want, "{} differs from the recompute", name);
        }
        // A union reading a MATCH_RECOGNIZE's matches (timed by their first row, WITHIN
        // bounding them) holds each match once, and b's rows.
        let mut want: Vec<String> = sorted(&seen, "pat")
            .iter()
            .map(|r| {
                let c: Vec<&str> = r.split('|').collect();
                format!("{}|{}|{}|p", c[1], c[0], c[3])
            })
            .chain(sorted(&seen, "rows").into_iter().filter(|r| r.ends_with("|b")))
            .collect();
        want.sort();
        prop_assert_eq!(sorted(&seen, "mixp"), want, "mixp differs from its inputs");
        // The unions' rows leave in event-time order.
        for name in ["rows", "mix", "mix2", "mixp"] {
            let times: Vec<String> = seen.get(name).into_iter().flatten()
                .map(|(_, t)| t.split('|').next().unwrap().to_string()).collect();
            let mut in_order = times.clone();
            in_order.sort();
            prop_assert_eq!(&times, &in_order, "{} leaves out of time order", name);
        }
        // Other batch sizes, another interleaving, no crash: the very same rows, in order (a
        // pattern over one stream emits its partitions' matches as batches decide them: the
        // same rows, in an order of their own).
        let (again_a, again_b) = (split(&a, &[7, 1, 30]), split(&b, &[2, 19]));
        let again = run(&again_a, &again_b, &other_order, usize::MAX, usize::MAX);
        prop_assert_eq!(sorted(&again, "pat"), sorted(&seen, "pat"), "pat differs between the runs");
        for (name, _) in QUERIES.iter().filter(|(n, _)| *n != "pat") {
            prop_assert_eq!(again.get(name), seen.get(name), "{} differs between the runs", name);
        }
    }
}

fn subscription(engine: &Engine, name: &str) -> Subscription {
    match engine
        .execute_blocking(&format!("SUBSCRIBE {name}"))
        .unwrap()
        .remove(0)
    {
        StatementResult::Subscribe(s) => s,
        _ => panic!("not a subscription"),
    }
}

/// The SQLSTATE and message of the failure `sub` has received.
fn first_failure(sub: &mut Subscription) -> (&'static str, String) {
    std::iter::from_fn(|| sub.events.try_recv().ok())
        .find_map(|e| match e {
            SubscriptionEvent::Failed(f) => Some((f.sqlstate, f.message)),
            SubscriptionEvent::Rows(_) => None,
        })
        .expect("the union query failed")
}

fn rows_every_second(from: i64, n: i64) -> RecordBatch {
    let rows: Vec<Row> = (0..n)
        .map(|i| Row {
            ts: common::BASE + (from + i) * common::SEC,
            k: i % 3,
            v: Some(i),
        })
        .collect();
    batch(&rows)
}

#[test]
fn a_quiet_stream_with_an_idle_timeout_does_not_hold_the_union_back() {
    let engine = Engine::open(EngineConfig::default()).unwrap();
    for sql in [
        "CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE STREAM b (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts) \
         WITH (idle_timeout = '2s')",
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM (SELECT ts, k, v FROM a UNION ALL \
         SELECT ts, k, v FROM b) u",
    ] {
        engine.execute_blocking(sql).unwrap();
    }
    let mut sub = subscription(&engine, "q");
    engine.insert_batch("b", rows_every_second(0, 1)).unwrap();
    engine.insert_batch("a", rows_every_second(0, 10)).unwrap();
    assert_eq!(
        common::received(&mut sub).len(),
        0,
        "b's watermark holds the rows"
    );
    // b is quiet for longer than its idle timeout: its watermark follows processing time.
    engine.tick_at(std::time::Instant::now() + std::time::Duration::from_secs(5));
    let rows: usize = common::received(&mut sub)
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert!(
        rows >= 5,
        "the idle stream let a's rows through ({rows} released)"
    );
}

#[test]
fn a_stalled_stream_fails_the_union_query_with_53200_naming_it() {
    let engine = Engine::open(EngineConfig {
        max_query_state_bytes: 256 << 10,
        ..EngineConfig::default()
    })
    .unwrap();
    for sql in [
        "CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE STREAM b (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM (SELECT ts, k, v FROM a UNION ALL \
         SELECT ts, k, v FROM b) u",
        "CREATE CONTINUOUS QUERY other AS SELECT ts, v FROM a WHERE v > 5",
    ] {
        engine.execute_blocking(sql).unwrap();
    }
    let mut sub = subscription(&engine, "q");
    for i in 0..200 {
        engine
            .insert_batch("a", rows_every_second(i * 500, 500))
            .unwrap();
    }
    let (sqlstate, text) = first_failure(&mut sub);
    assert_eq!(sqlstate, "53200", "{text}");
    assert!(text.contains("waiting for stream \"b\""), "{text}");
    // The stream and its other query run on.
    let mut other = subscription(&engine, "other");
    engine
        .insert_batch("a", rows_every_second(200_000, 10))
        .unwrap();
    assert!(!common::received(&mut other).is_empty());
}

#[test]
fn a_stalled_stream_under_a_joins_branch_fails_the_union_query_with_53200() {
    let engine = Engine::open(EngineConfig {
        max_query_state_bytes: 256 << 10,
        ..EngineConfig::default()
    })
    .unwrap();
    for sql in [
        "CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE STREAM b (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE STREAM c (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE CONTINUOUS QUERY j AS SELECT a.ts, a.k, b.v FROM a JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND",
        "CREATE CONTINUOUS QUERY q AS SELECT ts, k FROM c UNION ALL SELECT ts, k FROM j",
    ] {
        engine.execute_blocking(sql).unwrap();
    }
    let mut sub = subscription(&engine, "q");
    // b never comes: a's rows wait in the join's merge, under the union's branch.
    for i in 0..200 {
        engine
            .insert_batch("a", rows_every_second(i * 500, 500))
            .unwrap();
        engine
            .insert_batch("c", rows_every_second(i * 500, 500))
            .unwrap();
    }
    let (sqlstate, text) = first_failure(&mut sub);
    assert_eq!(sqlstate, "53200", "{text}");
    assert!(
        text.contains("waiting for branch 2 (streams \"a\", \"b\")"),
        "{text}"
    );
    // The streams run on, and so do their other queries.
    engine
        .execute_blocking("CREATE CONTINUOUS QUERY other AS SELECT ts, v FROM c WHERE v > 5")
        .unwrap();
    let mut other = subscription(&engine, "other");
    engine
        .insert_batch("c", rows_every_second(200_000, 10))
        .unwrap();
    assert!(!common::received(&mut other).is_empty());
}

/// A row behind its own stream's watermark is late for a union over the stream, and for a
/// union reading a join of it: dropped, and counted in the query's late rows.
#[test]
fn late_rows_of_a_union_and_of_the_join_it_reads_are_counted() {
    let engine = Engine::open(EngineConfig::default()).unwrap();
    for sql in [
        "CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE STREAM b (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)",
        "CREATE CONTINUOUS QUERY u AS SELECT ts, k FROM a UNION ALL SELECT ts, k FROM b",
        "CREATE CONTINUOUS QUERY j AS SELECT a.ts, a.k FROM a JOIN b ON a.k = b.k \
         AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND",
        "CREATE CONTINUOUS QUERY uj AS SELECT ts, k FROM j UNION ALL SELECT ts, k FROM b",
    ] {
        engine.execute_blocking(sql).unwrap();
    }
    engine.insert_batch("a", rows_every_second(10, 1)).unwrap();
    engine.insert_batch("b", rows_every_second(10, 1)).unwrap();
    // Behind a's watermark (10 s); then both streams move on (a union reading a merge hears
    // of its late rows with the merge's next rows or watermark).
    engine.insert_batch("a", rows_every_second(5, 1)).unwrap();
    engine.insert_batch("a", rows_every_second(11, 1)).unwrap();
    engine.insert_batch("b", rows_every_second(11, 1)).unwrap();
    let late = |name: &str| {
        engine
            .stats()
            .queries
            .into_iter()
            .find(|q| q.name == name)
            .map(|q| q.late_rows)
            .unwrap()
    };
    assert_eq!(late("u"), 1);
    assert_eq!(late("j"), 1);
    assert_eq!(late("uj"), 1);
}

/// A change to the temporal join's table before a batch of the stream: (key, tag, declared
/// version time as an offset in ms from the batch's first row, or None; a delete).
type TableStep = (i64, i64, Option<i64>, bool);

/// The stream's batches with table changes before each (the list of changes cycles), a
/// checkpoint before step `checkpoint_at` and a crash before step `crash_at`; returns the
/// temporal join's rows with their sequence numbers.
fn run_temporal(
    batches: &[RecordBatch],
    changes: &[Vec<TableStep>],
    checkpoint_at: usize,
    crash_at: usize,
) -> Vec<(i64, String)> {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    for sql in [
        "CREATE STREAM a (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
         WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
        "CREATE TABLE t (k BIGINT, tag BIGINT, since TIMESTAMP, PRIMARY KEY (k)) \
         WITH (version_time = 'since')",
        "CREATE CONTINUOUS QUERY tj AS SELECT a.ts, a.k, a.v, t.tag FROM a \
         LEFT JOIN t FOR SYSTEM_TIME AS OF a.ts ON a.k = t.k",
    ] {
        engine.execute_blocking(sql).unwrap();
    }
    let subscribe = |engine: &Engine, seen: &Seen| {
        let from = seen.get("tj").and_then(|r| r.last()).map_or(0, |r| r.0);
        match engine
            .execute_blocking(&format!("SUBSCRIBE tj FROM {from} WITH SEQ"))
            .unwrap()
            .remove(0)
        {
            StatementResult::Subscribe(s) => vec![("tj", s)],
            _ => panic!("not a subscription"),
        }
    };
    let mut seen = Seen::new();
    let mut subs = subscribe(&engine, &seen);
    for (step, b) in batches.iter().enumerate() {
        if step == checkpoint_at {
            engine.execute_blocking("CHECKPOINT").unwrap();
        }
        if step == crash_at {
            drain(&mut subs, &mut seen);
            drop(subs);
            drop(engine);
            engine = open(dir.path());
            subs = subscribe(&engine, &seen);
        }
        let first = first_time(b);
        for &(k, tag, since, delete) in &changes[step % changes.len()] {
            let sql = match (delete, since) {
                (true, _) => format!("DELETE FROM t WHERE k = {k}"),
                (false, since) => {
                    let since = since.map_or("NULL".to_string(), |ms| {
                        format!("'{}'", common::fmt_ts(first + ms * 1_000_000))
                    });
                    format!(
                        "INSERT INTO t VALUES ({k}, {tag}, {since}) ON CONFLICT (k) DO UPDATE \
                         SET tag = EXCLUDED.tag, since = EXCLUDED.since"
                    )
                }
            };
            engine.execute_blocking(&sql).unwrap();
        }
        engine.insert_batch("a", b.clone()).unwrap();
        drain(&mut subs, &mut seen);
    }
    engine.finish();
    drain(&mut subs, &mut seen);
    seen.remove("tj").unwrap_or_default()
}

fn first_time(b: &RecordBatch) -> i64 {
    b.column(0)
        .as_any()
        .downcast_ref::<datafusion::arrow::array::TimestampNanosecondArray>()
        .unwrap()
        .value(0)
}

/// What the temporal join must give, computed directly: each change stamped with the
/// stream's watermark when it is made (or its declared time, if later), superseding the
/// key's versions at or after its stamp; each row reads its key's version at its time.
fn temporal_reference(batches: &[RecordBatch], changes: &[Vec<TableStep>]) -> Vec<String> {
    let mut versions: BTreeMap<i64, Vec<(i64, Option<i64>)>> = BTreeMap::new();
    let mut watermark = i64::MIN;
    let mut rows = Vec::new();
    for (step, b) in batches.iter().enumerate() {
        let first = first_time(b);
        for &(k, tag, since, delete) in &changes[step % changes.len()] {
            let stamp = match (delete, since) {
                (false, Some(ms)) => (first + ms * 1_000_000).max(watermark),
                _ => watermark,
            };
            let list = versions.entry(k).or_default();
            list.retain(|v| v.0 < stamp);
            list.push((stamp, (!delete).then_some(tag)));
        }
        let ts = b
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::TimestampNanosecondArray>()
            .unwrap();
        let (ks, vs) = (
            b.column(1).as_any().downcast_ref::<Int64Array>().unwrap(),
            b.column(2).as_any().downcast_ref::<Int64Array>().unwrap(),
        );
        for i in 0..b.num_rows() {
            rows.push((
                ts.value(i),
                ks.value(i),
                vs.is_valid(i).then(|| vs.value(i)),
            ));
            watermark = watermark.max(ts.value(i) - 5 * common::SEC);
        }
    }
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|(t, k, v)| {
            let tag = versions
                .get(&k)
                .and_then(|l| l.iter().rev().find(|x| x.0 <= t))
                .and_then(|x| x.1);
            let text = |x: Option<i64>| x.map_or("NULL".to_string(), |x| x.to_string());
            format!("{}|{k}|{}|{}", common::fmt_ts(t), text(v), text(tag))
        })
        .collect();
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_temporal_join_matches_a_direct_recomputation_across_splits_and_a_crash(
        (rows, splits) in jittered_rows(80, 4),
        changes in prop::collection::vec(
            prop::collection::vec(
                (0i64..4, 0i64..100, prop::option::of(-8_000i64..8_000), prop::bool::weighted(0.2)),
                0..3,
            ),
            1..8,
        ),
        checkpoint_at in 0usize..12,
        crash_offset in 0usize..8,
    ) {
        let batches = split(&rows, &splits);
        // Within the run: the checkpoint before some batch, the crash at it or later.
        let checkpoint_at = checkpoint_at % batches.len();
        let crash_at = checkpoint_at + crash_offset % (batches.len() - checkpoint_at + 1);
        let got = run_temporal(&batches, &changes, checkpoint_at, crash_at);
        let numbers: Vec<i64> = got.iter().map(|r| r.0).collect();
        let dense: Vec<i64> = (1..=got.len() as i64).collect();
        prop_assert_eq!(numbers, dense, "a gap or a repeat in the sequence numbers");
        let mut got: Vec<String> = got.into_iter().map(|(_, t)| t).collect();
        got.sort();
        prop_assert_eq!(got, temporal_reference(&batches, &changes));
    }
}
