//! Retained history: a stream's rows are kept as Parquet segments written at checkpoints, an
//! ad hoc SELECT reads all of them (not only the recent rows), a restart keeps them, a
//! checkpoint that never completed leaves no row twice, and a time predicate skips segments'
//! row groups (EXPLAIN ANALYZE shows it).

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

use crate::adhoc;

use adhoc::rows;
use saql::runtime::engine::StatementResult;
use saql::{Engine, EngineConfig};
use std::path::Path;

fn open(dir: &Path) -> Engine {
    Engine::open(EngineConfig {
        data_dir: Some(dir.to_path_buf()),
        checkpoint_interval: None,
        retain_rows: 10,
        ..EngineConfig::default()
    })
    .expect("engine opens")
}

async fn one(engine: &Engine, sql: &str) -> String {
    rows(engine, sql).await[0][0].clone()
}

/// Inserts rows `from..to`: one per second from 2026-01-01, host h<i % 7>, n = i.
async fn insert(engine: &Engine, from: i64, to: i64) {
    let values: Vec<String> = (from..to)
        .map(|i| {
            format!(
                "(TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{i}' SECOND, 'h{}', {i})",
                i % 7
            )
        })
        .collect();
    engine
        .execute(&format!("INSERT INTO s VALUES {}", values.join(", ")))
        .await
        .unwrap();
}

/// count and sum of n over rows `from..to` as the engine prints them.
fn expected(from: i64, to: i64) -> (String, String) {
    ((to - from).to_string(), (from..to).sum::<i64>().to_string())
}

async fn count_sum(engine: &Engine, filter: &str) -> (String, String) {
    let r = rows(engine, &format!("SELECT count(*), sum(n) FROM s {filter}")).await;
    (r[0][0].clone(), r[0][1].clone())
}

const STREAM: &str = "CREATE STREAM s (ts TIMESTAMP, host TEXT, n BIGINT, \
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (history = '30 days')";

#[tokio::test]
async fn ad_hoc_select_reads_the_whole_history_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.execute(STREAM).await.unwrap();
    insert(&engine, 0, 500).await;
    engine.execute("CHECKPOINT").await.unwrap();
    insert(&engine, 500, 1000).await;
    engine.execute("CHECKPOINT").await.unwrap();
    insert(&engine, 1000, 1200).await;
    // Far more than the 10 recent rows: two segments and the rows after them.
    assert_eq!(count_sum(&engine, "").await, expected(0, 1200));
    let segments = std::fs::read_dir(dir.path().join("history/s"))
        .unwrap()
        .count();
    assert_eq!(segments, 2);
    // A time predicate.
    assert_eq!(
        count_sum(&engine, "WHERE ts >= TIMESTAMP '2026-01-01 00:15:00'").await,
        expected(900, 1200)
    );
    let show = rows(&engine, "SHOW STREAMS").await;
    let header = ["history", "history_rows", "history_bytes"];
    let at = |name: &str| 8 + header.iter().position(|h| *h == name).unwrap();
    assert_eq!(show[0][at("history")], "30 days");
    assert_eq!(show[0][at("history_rows")], "1200");
    assert!(show[0][at("history_bytes")].parse::<u64>().unwrap() > 0);
    drop(engine);

    // After a restart: the segments, and the later rows replayed from the log.
    let engine = open(dir.path());
    assert_eq!(count_sum(&engine, "").await, expected(0, 1200));
    assert_eq!(
        one(&engine, "SELECT count(DISTINCT host) FROM s").await,
        "7"
    );
    insert(&engine, 1200, 1300).await;
    assert_eq!(count_sum(&engine, "").await, expected(0, 1300));
}

#[tokio::test]
async fn a_checkpoint_that_never_completed_leaves_no_row_twice() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.execute(STREAM).await.unwrap();
    insert(&engine, 0, 300).await;
    engine.execute("CHECKPOINT").await.unwrap();
    insert(&engine, 300, 700).await;
    engine.execute("CHECKPOINT").await.unwrap();
    insert(&engine, 700, 800).await;
    drop(engine);
    // As if the second checkpoint's manifest never reached the disk: its segment is on disk,
    // and its rows are in the log after the first checkpoint.
    let ckpt = dir.path().join("ckpt");
    let mut epochs: Vec<_> = std::fs::read_dir(&ckpt)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    epochs.sort();
    std::fs::remove_dir_all(epochs.last().unwrap()).unwrap();
    let engine = open(dir.path());
    assert_eq!(count_sum(&engine, "").await, expected(0, 800));
    let segments = std::fs::read_dir(dir.path().join("history/s"))
        .unwrap()
        .count();
    assert_eq!(segments, 1, "the uncommitted segment is gone");
    engine.execute("CHECKPOINT").await.unwrap();
    assert_eq!(count_sum(&engine, "").await, expected(0, 800));
}

#[tokio::test]
async fn a_time_predicate_skips_row_groups_and_explain_analyze_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.execute(STREAM).await.unwrap();
    // Three segments an hour apart.
    for hour in 0..3 {
        insert(&engine, hour * 3600, hour * 3600 + 200).await;
        engine.execute("CHECKPOINT").await.unwrap();
    }
    let plan = rows(
        &engine,
        "EXPLAIN ANALYZE SELECT count(*) FROM s WHERE ts >= TIMESTAMP '2026-01-01 02:00:00'",
    )
    .await;
    let text: String = plan
        .iter()
        .map(|r| r.join(" "))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("pruning_predicate"), "{text}");
    // Two of the three segments are skipped by their statistics.
    assert!(
        text.contains("files_ranges_pruned_statistics=3 total \u{2192} 1 matched"),
        "{text}"
    );
    assert_eq!(
        count_sum(&engine, "WHERE ts >= TIMESTAMP '2026-01-01 02:00:00'").await,
        expected(7200, 7400)
    );
}

#[tokio::test]
async fn bad_history_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    let err = engine
        .execute("CREATE STREAM b (x BIGINT) WITH (history = 'forever')")
        .await
        .err()
        .expect("refused");
    assert_eq!(err.sqlstate(), "22023", "{err}");
    assert!(
        err.to_string().contains("invalid history \"forever\""),
        "{err}"
    );
    // Without a data directory there is nowhere to keep it.
    let memory = Engine::open(EngineConfig::default()).unwrap();
    let err = memory
        .execute("CREATE STREAM b (x BIGINT) WITH (history = '1 day')")
        .await
        .err()
        .expect("refused");
    assert_eq!(err.sqlstate(), "55000", "{err}");
    // 'off' keeps none, even with a server default.
    engine
        .execute("CREATE STREAM c (x BIGINT) WITH (history = 'off')")
        .await
        .unwrap();
    engine.execute("INSERT INTO c VALUES (1)").await.unwrap();
    engine.execute("CHECKPOINT").await.unwrap();
    assert!(!dir.path().join("history/c").exists());
}

/// The queries a backfill is checked with: a filter, a tumbling and a hopping window.
const KINDS: [(&str, &str); 3] = [
    ("filter", "SELECT ts, host, n FROM s WHERE n % 5 = 0"),
    (
        "tumble",
        "SELECT host, window_end, count(*) AS c, sum(n) AS total \
         FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end",
    ),
    (
        "hop",
        "SELECT window_end, max(n) AS top FROM HOP(s, ts, INTERVAL '30' SECOND, \
         INTERVAL '2' MINUTE) GROUP BY window_start, window_end",
    ),
];

fn open_retaining(dir: &Path) -> Engine {
    Engine::open(EngineConfig {
        data_dir: Some(dir.to_path_buf()),
        checkpoint_interval: None,
        retain_rows: 1_000_000,
        ..EngineConfig::default()
    })
    .expect("engine opens")
}

/// Inserts rows `from..to` in a jittered order (each within 3 s of its place, inside the
/// watermark's 5 s delay), in batches of random sizes.
async fn insert_jittered(engine: &Engine, from: i64, to: i64, rng: &mut impl rand::Rng) {
    insert_jittered_into(engine, "s", from, to, rng).await
}

async fn sorted(engine: &Engine, name: &str) -> Vec<Vec<String>> {
    let mut r = rows(engine, &format!("SELECT * FROM {name}")).await;
    r.sort();
    r
}

/// A query created with a start at a random point (history in segments and in memory, a
/// restart before or after it) gives exactly what the same query gave running all along.
#[tokio::test]
async fn backfill_then_live_equals_one_uninterrupted_run() {
    use rand::{Rng, SeedableRng};
    for seed in 0..8u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let mut engine = open_retaining(dir.path());
        engine
            .execute(
                "CREATE STREAM s (ts TIMESTAMP, host TEXT, n BIGINT, \
                 WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (history = '30 days')",
            )
            .await
            .unwrap();
        for (kind, sql) in KINDS {
            engine
                .execute(&format!("CREATE CONTINUOUS QUERY all_{kind} AS {sql}"))
                .await
                .unwrap();
        }
        let total = 1500;
        let handover = rng.gen_range(100..1400);
        let mut at = 0;
        while at < handover {
            let next = (at + rng.gen_range(50..400)).min(handover);
            insert_jittered(&engine, at, next, &mut rng).await;
            if rng.gen_bool(0.5) {
                engine.execute("CHECKPOINT").await.unwrap();
            }
            at = next;
        }
        for (kind, sql) in KINDS {
            let created = engine
                .execute(&format!(
                    "CREATE CONTINUOUS QUERY late_{kind} \
                     WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS {sql}"
                ))
                .await
                .unwrap();
            let StatementResult::CommandWithNotice { notice, .. } = &created[0] else {
                panic!("no notice for the backfill");
            };
            assert!(notice.starts_with("backfilled "), "{notice}");
        }
        while at < total {
            let next = (at + rng.gen_range(50..400)).min(total);
            insert_jittered(&engine, at, next, &mut rng).await;
            match rng.gen_range(0..3) {
                0 => {
                    engine.execute("CHECKPOINT").await.unwrap();
                }
                1 => {
                    // A restart: from the log alone or from a checkpoint.
                    drop(engine);
                    engine = open_retaining(dir.path());
                }
                _ => {}
            }
            at = next;
        }
        for (kind, _) in KINDS {
            let all = sorted(&engine, &format!("all_{kind}")).await;
            assert!(!all.is_empty(), "{kind}: no results");
            assert_eq!(
                sorted(&engine, &format!("late_{kind}")).await,
                all,
                "seed {seed}, {kind}, hand-over at row {handover}"
            );
        }
    }
}

/// Queries over two streams: a UNION ALL, a window over an inline union, an interval join,
/// an anti join, a window join, and a union whose branch reads the join (`all_j` is the
/// join's query, which runs all along).
const TWO_STREAM_KINDS: [(&str, &str); 6] = [
    (
        "u",
        "SELECT ts, host, n, src FROM (SELECT ts, host, n, 'a' AS src FROM a \
         UNION ALL SELECT ts, host, n, 'b' FROM b WHERE n % 2 = 0) x WHERE host <> 'h1'",
    ),
    (
        "w",
        "SELECT host, window_end, count(*) AS c, sum(n) AS total FROM TUMBLE((SELECT ts, \
         host, n FROM a UNION ALL SELECT ts, host, n FROM b), ts, INTERVAL '1' MINUTE) \
         GROUP BY host, window_start, window_end",
    ),
    (
        "j",
        "SELECT a.ts, a.host, a.n, b.ts AS bts, b.n AS bn FROM a JOIN b ON a.host = b.host \
         AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '3' SECOND",
    ),
    (
        "anti",
        "SELECT a.ts, a.host, a.n FROM a WHERE NOT EXISTS (SELECT 1 FROM b \
         WHERE b.host = a.host AND b.n = a.n + 1 AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '4' SECOND)",
    ),
    (
        "wj",
        "SELECT l.host, l.window_end, l.c, r.top FROM (SELECT host, window_start, window_end, \
         count(*) AS c FROM TUMBLE(a, ts, INTERVAL '30' SECOND) GROUP BY host, window_start, \
         window_end) l JOIN (SELECT host, window_start, window_end, max(n) AS top \
         FROM TUMBLE(b, ts, INTERVAL '30' SECOND) GROUP BY host, window_start, window_end) r \
         ON l.host = r.host AND l.window_start = r.window_start AND l.window_end = r.window_end",
    ),
    (
        "nested",
        "SELECT ts, host, n FROM all_j UNION ALL SELECT ts, host, n FROM b WHERE n % 5 = 0",
    ),
];

/// Rows `from..to` of stream `stream` in a jittered order, in batches of random sizes: as
/// [`insert_jittered`], with n = i and host h<i % 3>.
/// [`insert_jittered`] into stream `stream`.
async fn insert_jittered_into(
    engine: &Engine,
    stream: &str,
    from: i64,
    to: i64,
    rng: &mut impl rand::Rng,
) {
    let mut order: Vec<i64> = (from..to).collect();
    for i in 0..order.len() {
        let j = (i + rng.gen_range(0..3)).min(order.len() - 1);
        order.swap(i, j);
    }
    for chunk in order.chunks(rng.gen_range(1..60)) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| {
                format!(
                    "(TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{i}' SECOND, 'h{}', {i})",
                    i % 3
                )
            })
            .collect();
        engine
            .execute(&format!(
                "INSERT INTO {stream} VALUES {}",
                values.join(", ")
            ))
            .await
            .unwrap();
    }
}

/// A query over two streams (a union, an interval, anti or window join, a union reading a
/// join) created with a start at a random point, the streams written in turns, with
/// checkpoints and restarts before and after, gives exactly what the same query gave running
/// all along.
#[tokio::test]
async fn a_union_or_a_join_backfilled_then_live_equals_one_uninterrupted_run() {
    use rand::{Rng, SeedableRng};
    for seed in 0..6u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let mut engine = open_retaining(dir.path());
        for stream in ["a", "b"] {
            engine
                .execute(&format!(
                    "CREATE STREAM {stream} (ts TIMESTAMP, host TEXT, n BIGINT, \
                     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (history = '30 days')"
                ))
                .await
                .unwrap();
        }
        for (kind, sql) in TWO_STREAM_KINDS {
            engine
                .execute(&format!("CREATE CONTINUOUS QUERY all_{kind} AS {sql}"))
                .await
                .unwrap();
        }
        let total = 900;
        let handover = rng.gen_range(100..800);
        // Each stream runs ahead of the other by turns: b starts 20 s later.
        let (mut at_a, mut at_b) = (0, 20);
        while at_a < handover || at_b < handover {
            if at_a <= at_b && at_a < handover || at_b >= handover {
                let next = (at_a + rng.gen_range(30..200)).min(handover);
                insert_jittered_into(&engine, "a", at_a, next, &mut rng).await;
                at_a = next;
            } else {
                let next = (at_b + rng.gen_range(30..200)).min(handover);
                insert_jittered_into(&engine, "b", at_b, next, &mut rng).await;
                at_b = next;
            }
            if rng.gen_bool(0.3) {
                engine.execute("CHECKPOINT").await.unwrap();
            }
        }
        for (kind, sql) in TWO_STREAM_KINDS {
            let created = engine
                .execute(&format!(
                    "CREATE CONTINUOUS QUERY late_{kind} \
                     WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS {sql}"
                ))
                .await
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            let StatementResult::CommandWithNotice { notice, .. } = &created[0] else {
                panic!("no notice for the backfill");
            };
            assert!(
                notice.starts_with("backfilled ") && notice.contains("of streams \"a\", \"b\""),
                "{notice}"
            );
        }
        while at_a < total || at_b < total {
            if at_a <= at_b && at_a < total || at_b >= total {
                let next = (at_a + rng.gen_range(30..200)).min(total);
                insert_jittered_into(&engine, "a", at_a, next, &mut rng).await;
                at_a = next;
            } else {
                let next = (at_b + rng.gen_range(30..200)).min(total);
                insert_jittered_into(&engine, "b", at_b, next, &mut rng).await;
                at_b = next;
            }
            match rng.gen_range(0..3) {
                0 => {
                    engine.execute("CHECKPOINT").await.unwrap();
                }
                1 => {
                    drop(engine);
                    engine = open_retaining(dir.path());
                }
                _ => {}
            }
        }
        engine.finish();
        for (kind, _) in TWO_STREAM_KINDS {
            let all = sorted(&engine, &format!("all_{kind}")).await;
            assert!(!all.is_empty(), "{kind}: no results");
            assert_eq!(
                sorted(&engine, &format!("late_{kind}")).await,
                all,
                "seed {seed}, {kind}, hand-over at row {handover}"
            );
        }
    }
}

#[tokio::test]
async fn a_backfill_needs_history_and_says_where_it_begins() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.execute(STREAM).await.unwrap();
    insert(&engine, 0, 100).await;
    let created = engine
        .execute(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s WHERE n > 10 \
             WITH (start = TIMESTAMP '2025-12-31 00:00:00')",
        )
        .await
        .unwrap();
    let StatementResult::CommandWithNotice { notice, .. } = &created[0] else {
        panic!("no notice");
    };
    assert!(notice.contains("backfilled 100 rows"), "{notice}");
    assert!(
        notice.contains("its history begins at TIMESTAMP '2026-01-01 00:00:00'"),
        "{notice}"
    );
    // Relative to the newest event: the last 10 seconds (rows 89..99).
    let created = engine
        .execute("CREATE CONTINUOUS QUERY r WITH (start = INTERVAL '10' SECOND) AS SELECT * FROM s")
        .await
        .unwrap();
    let StatementResult::CommandWithNotice { notice, .. } = &created[0] else {
        panic!("no notice");
    };
    assert!(notice.contains("backfilled 11 rows"), "{notice}");
    // The catalog keeps the start as the timestamp it was, so that a replay of the log, which
    // may hold rows that arrived while the backfill ran, backfills the same rows.
    engine.execute("CHECKPOINT").await.unwrap();
    let manifests: String = std::fs::read_dir(dir.path().join("ckpt"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path().join("manifest.json")).unwrap())
        .collect();
    assert!(
        manifests.contains("r WITH (start = TIMESTAMP '2026-01-01 00:01:29"),
        "{manifests}"
    );
    engine
        .execute("CREATE STREAM bare (ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (history = 'off')")
        .await
        .unwrap();
    let err = engine
        .execute("CREATE CONTINUOUS QUERY b WITH (start = INTERVAL '1' DAY) AS SELECT * FROM bare")
        .await
        .err()
        .expect("refused");
    assert_eq!(err.sqlstate(), "55000", "{err}");
    assert!(err.to_string().contains("keeps no history"), "{err}");
}

#[tokio::test]
async fn alter_stream_starts_changes_and_stops_history() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine
        .execute(
            "CREATE STREAM s (ts TIMESTAMP, host TEXT, n BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (history = 'off')",
        )
        .await
        .unwrap();
    insert(&engine, 0, 100).await;
    engine
        .execute("ALTER STREAM s SET (history = '1 day')")
        .await
        .unwrap();
    insert(&engine, 100, 250).await;
    engine.execute("CHECKPOINT").await.unwrap();
    insert(&engine, 250, 300).await;
    // Kept from the ALTER on.
    assert_eq!(count_sum(&engine, "").await, expected(100, 300));
    let history = |rows: &[Vec<String>]| rows[0][8].clone();
    assert_eq!(history(&rows(&engine, "SHOW STREAMS").await), "1 day");
    drop(engine);
    let engine = open(dir.path());
    assert_eq!(count_sum(&engine, "").await, expected(100, 300));
    assert_eq!(history(&rows(&engine, "SHOW STREAMS").await), "1 day");
    let err = engine
        .execute("ALTER STREAM s SET (idle_timeout = '5s')")
        .await
        .err()
        .expect("refused");
    assert_eq!(err.sqlstate(), "0A000", "{err}");
    engine
        .execute("ALTER STREAM s SET (history = 'off')")
        .await
        .unwrap();
    assert!(!dir.path().join("history/s").exists());
    drop(engine);
    let engine = open(dir.path());
    assert_eq!(history(&rows(&engine, "SHOW STREAMS").await), "off");
}

/// Rows `from..to` of stream `s` (`ts, host, n`: one per millisecond from 2026-01-01, 100
/// hosts) as Arrow batches of 4096, inserted through the library.
fn insert_fast(engine: &Engine, from: i64, to: i64) {
    insert_fast_into(engine, "s", from, to)
}

/// [`insert_fast`] into stream `stream`.
fn insert_fast_into(engine: &Engine, stream: &str, from: i64, to: i64) {
    use datafusion::arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};
    use datafusion::arrow::record_batch::RecordBatch;
    use std::sync::Arc;
    let t0 = 1_767_225_600_000_000_000i64;
    let schema = engine.stream_schema(stream).unwrap();
    let mut at = from;
    while at < to {
        let end = (at + 4096).min(to);
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    (at..end).map(|i| t0 + i * 1_000_000),
                )),
                Arc::new(StringArray::from_iter_values(
                    (at..end).map(|i| format!("h{}", i % 100)),
                )),
                Arc::new(Int64Array::from_iter_values(at..end)),
            ],
        )
        .unwrap();
        engine.insert_batch(stream, batch).unwrap();
        at = end;
    }
}

/// What a union's or a join's backfill refuses, by name: a stream with no history, a
/// temporal join in a branch (its table's past versions are not kept).
#[tokio::test]
async fn a_union_backfill_refuses_what_it_cannot_replay() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    for sql in [
        "CREATE STREAM a (ts TIMESTAMP, host TEXT, n BIGINT, WATERMARK FOR ts AS ts) \
         WITH (history = '30 days')",
        "CREATE STREAM bare (ts TIMESTAMP, host TEXT, n BIGINT, WATERMARK FOR ts AS ts) \
         WITH (history = 'off')",
        "CREATE TABLE owners (host TEXT PRIMARY KEY, owner TEXT)",
    ] {
        engine.execute(sql).await.unwrap();
    }
    let err = engine
        .execute(
            "CREATE CONTINUOUS QUERY q WITH (start = INTERVAL '1' DAY) AS SELECT ts, host FROM a \
             UNION ALL SELECT ts, host FROM bare",
        )
        .await
        .err()
        .expect("refused");
    assert_eq!(err.sqlstate(), "55000", "{err}");
    assert!(
        err.to_string()
            .contains("stream \"bare\" keeps no history to backfill from"),
        "{err}"
    );
    let err = engine
        .execute(
            "CREATE CONTINUOUS QUERY q WITH (start = INTERVAL '1' DAY) AS SELECT ts, host, owner \
             FROM (SELECT a.ts, a.host, o.owner FROM a JOIN owners FOR SYSTEM_TIME AS OF a.ts AS o \
             ON a.host = o.host) x UNION ALL SELECT ts, host, 'none' FROM a",
        )
        .await
        .err()
        .expect("refused");
    assert_eq!(err.sqlstate(), "0A000", "{err}");
    assert!(
        err.to_string().contains(
            "a query with a temporal join (FOR SYSTEM_TIME AS OF) cannot start in the past: the \
             past versions of \"owners\" are not kept"
        ),
        "{err}"
    );
    // Nothing was created: the name is free.
    engine
        .execute("CREATE CONTINUOUS QUERY q AS SELECT ts, host FROM a")
        .await
        .unwrap();
}

/// A union's backfill reads its streams' histories in step (the one furthest behind
/// first), so its merge holds little: two streams written one after the other, each far
/// more than the query's state bound, backfill within it (a live union over them, written
/// so, would have held one stream whole).
#[tokio::test]
async fn a_union_backfill_reads_its_streams_in_step_within_the_state_bound() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig {
        data_dir: Some(dir.path().to_path_buf()),
        checkpoint_interval: None,
        retain_rows: 100,
        max_query_state_bytes: 4 << 20,
        ..EngineConfig::default()
    })
    .unwrap();
    for stream in ["a", "b"] {
        engine
            .execute(&format!(
                "CREATE STREAM {stream} (ts TIMESTAMP, host TEXT, n BIGINT, \
                 WATERMARK FOR ts AS ts) WITH (history = '30 days')"
            ))
            .await
            .unwrap();
    }
    let rows = 300_000;
    insert_fast_into(&engine, "a", 0, rows / 2);
    engine.execute("CHECKPOINT").await.unwrap();
    insert_fast_into(&engine, "a", rows / 2, rows);
    insert_fast_into(&engine, "b", 0, rows);
    engine
        .execute(
            "CREATE CONTINUOUS QUERY per_min WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS \
             SELECT window_end, count(*) AS c FROM TUMBLE((SELECT ts, n FROM a UNION ALL \
             SELECT ts, n FROM b), ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end",
        )
        .await
        .unwrap();
    engine.finish();
    let counted: i64 = rows_of(&engine, "SELECT c FROM per_min").await;
    assert_eq!(counted, 2 * rows);
}

async fn rows_of(engine: &Engine, sql: &str) -> i64 {
    rows(engine, sql)
        .await
        .iter()
        .map(|r| r[0].parse::<i64>().unwrap())
        .sum()
}

/// A union's backfill while both its streams take live rows: SHOW QUERIES shows it reading
/// both streams' history; rows that arrive while it reads, and at its hand-over, are each
/// run once, so its results equal those of the same union running all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_union_backfill_hands_over_under_live_writes_with_no_gap_or_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_retaining(dir.path());
    for stream in ["a", "b"] {
        engine
            .execute(&format!(
                "CREATE STREAM {stream} (ts TIMESTAMP, host TEXT, n BIGINT, \
                 WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (history = '30 days')"
            ))
            .await
            .unwrap();
    }
    let union = "SELECT host, window_end, count(*) AS c, sum(n) AS total FROM TUMBLE((\
                 SELECT ts, host, n FROM a UNION ALL SELECT ts, host, n FROM b WHERE n % 3 = 0), \
                 ts, INTERVAL '1' SECOND) GROUP BY host, window_start, window_end";
    engine
        .execute(&format!("CREATE CONTINUOUS QUERY all_u AS {union}"))
        .await
        .unwrap();
    let history = 150_000;
    insert_fast_into(&engine, "a", 0, history / 2);
    insert_fast_into(&engine, "b", 0, history / 2);
    engine.execute("CHECKPOINT").await.unwrap();
    insert_fast_into(&engine, "a", history / 2, history);
    insert_fast_into(&engine, "b", history / 2, history);
    let create = {
        let engine = engine.clone();
        let sql = format!(
            "CREATE CONTINUOUS QUERY late_u WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS \
             {union}"
        );
        tokio::spawn(async move { engine.execute(&sql).await })
    };
    let mut seen = 0;
    let mut live = history;
    while !create.is_finished() {
        if let Some((status, _, _)) = query_status(&engine, "late_u").await {
            if status.starts_with("backfilling: ") {
                seen += 1;
            }
        }
        insert_fast_into(&engine, "a", live, live + 100);
        insert_fast_into(&engine, "b", live, live + 100);
        live += 100;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let created = create.await.unwrap().unwrap();
    let StatementResult::CommandWithNotice { notice, .. } = &created[0] else {
        panic!("no notice for the backfill");
    };
    assert!(notice.contains("of streams \"a\", \"b\""), "{notice}");
    assert!(seen > 0, "SHOW QUERIES never showed the backfill");
    insert_fast_into(&engine, "a", live, live + 2000);
    insert_fast_into(&engine, "b", live, live + 2000);
    engine.finish();
    let all = sorted(&engine, "all_u").await;
    assert!(all.len() > 100, "{} windows", all.len());
    assert_eq!(sorted(&engine, "late_u").await, all);
}

/// `SHOW QUERIES`' row of `name` as (status, rows_in, watermark), if it has one.
async fn query_status(engine: &Engine, name: &str) -> Option<(String, u64, String)> {
    rows(engine, "SHOW QUERIES")
        .await
        .into_iter()
        .find(|r| r[0] == name)
        .map(|r| (r[2].clone(), r[3].parse().unwrap(), r[6].clone()))
}

/// (read, total) out of a status `backfilling: P% (READ of TOTAL history rows), event time
/// reached T`.
fn backfill_numbers(status: &str) -> (u64, u64) {
    let inner = status
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(" history rows)"))
        .expect("a backfilling status")
        .0;
    let (read, total) = inner.split_once(" of ").unwrap();
    (read.parse().unwrap(), total.parse().unwrap())
}

/// While a backfill runs, SHOW QUERIES shows the query as backfilling, with the history rows
/// read of those to read and the event time reached, going forward; live rows go on being
/// accepted meanwhile. Once created, the query is running with the rows it was fed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_queries_shows_a_backfill_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.execute(STREAM).await.unwrap();
    let history = 400_000;
    insert_fast(&engine, 0, history / 2);
    engine.execute("CHECKPOINT").await.unwrap();
    insert_fast(&engine, history / 2, history);
    let create = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .execute(
                    "CREATE CONTINUOUS QUERY q WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS \
                     SELECT host, window_end, count(*) AS c FROM TUMBLE(s, ts, INTERVAL '1' SECOND) \
                     GROUP BY host, window_start, window_end",
                )
                .await
        })
    };
    let mut seen = Vec::new();
    let mut live = history;
    while !create.is_finished() {
        if let Some((status, fed, watermark)) = query_status(&engine, "q").await {
            if status.starts_with("backfilling: ") {
                assert!(status.contains("event time reached"), "{status}");
                seen.push((backfill_numbers(&status), fed, watermark));
            }
        }
        // Live rows are accepted while the backfill runs.
        insert_fast(&engine, live, live + 100);
        live += 100;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    create.await.unwrap().unwrap();
    assert!(!seen.is_empty(), "SHOW QUERIES never showed the backfill");
    for pair in seen.windows(2) {
        assert!(
            pair[0].0 .0 <= pair[1].0 .0,
            "rows read went back: {seen:?}"
        );
    }
    let ((read, total), fed, _) = seen.last().unwrap().clone();
    assert!(read <= total && total >= history as u64, "{seen:?}");
    assert!(fed <= read, "{seen:?}");
    let (status, fed, _) = query_status(&engine, "q").await.unwrap();
    assert_eq!(status, "running");
    assert!(fed >= history as u64, "rows fed {fed}");
    insert_fast(&engine, live, live + 100);
    live += 100;
    assert_eq!(
        count_sum(&engine, "").await.0,
        live.to_string(),
        "every live row accepted"
    );
    // An ALTER WITH (start = ...): q runs on while its new definition is rebuilt.
    let alter = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .execute(
                    "ALTER CONTINUOUS QUERY q WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS \
                     SELECT host, window_end, count(*) AS c FROM TUMBLE(s, ts, INTERVAL '2' SECOND) \
                     GROUP BY host, window_start, window_end",
                )
                .await
        })
    };
    let mut rebuilding = 0;
    while !alter.is_finished() {
        let (status, _, _) = query_status(&engine, "q").await.unwrap();
        if let Some(progress) = status.strip_prefix("running; rebuilding: ") {
            assert!(progress.contains("history rows"), "{status}");
            rebuilding += 1;
        } else {
            assert_eq!(status, "running");
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    alter.await.unwrap().unwrap();
    assert!(rebuilding > 0, "SHOW QUERIES never showed the rebuild");
    assert_eq!(query_status(&engine, "q").await.unwrap().0, "running");
}

/// A backfill whose statement is given up (canceled, timed out, client gone) stops and
/// creates nothing; the name is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceled_backfill_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.execute(STREAM).await.unwrap();
    insert_fast(&engine, 0, 400_000);
    let create = "CREATE CONTINUOUS QUERY q WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS \
                  SELECT host, window_end, count(*) AS c FROM TUMBLE(s, ts, INTERVAL '1' SECOND) \
                  GROUP BY host, window_start, window_end";
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(100),
        engine.execute(create),
    )
    .await;
    assert!(
        gave_up.is_err(),
        "the backfill ended within 100 ms: make the history larger"
    );
    let mut waited = 0;
    while query_status(&engine, "q").await.is_some() {
        assert!(waited < 3000, "the canceled backfill goes on");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        waited += 10;
    }
    assert!(rows(&engine, "SHOW QUERIES").await.is_empty());
    let err = engine
        .execute("SELECT * FROM q")
        .await
        .err()
        .expect("no query q");
    assert_eq!(err.sqlstate(), "42P01", "{err}");
    // The name is free, and a backfill that runs to its end creates the query.
    engine.execute(create).await.unwrap();
    assert_eq!(query_status(&engine, "q").await.unwrap().0, "running");
}

/// The streams of queries/00_streams.sql as this test keeps them: with history, and with no
/// idle timeout (a watermark moved by processing time is not replayed by a backfill, and
/// would make the runs depend on the clock).
fn demo_streams() -> String {
    let text = std::fs::read_to_string("queries/00_streams.sql").unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("WITH (idle_timeout = '5s')"), "{text}");
    text.replace("WITH (idle_timeout = '5s')", "WITH (history = '30 days')")
}

/// Each continuous query of queries/*.sql that reads streams by name (one, or two joined):
/// not those over other queries (their copies here would read the originals).
fn demo_queries() -> Vec<(String, saql::sql::CreateQuery)> {
    let mut files: Vec<_> = std::fs::read_dir("queries")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for stmt in saql::parse(&text).unwrap() {
            if let saql::sql::Statement::CreateQuery(cq) = stmt {
                out.push((cq.name.value.clone(), cq));
            }
        }
    }
    let names: Vec<String> = out.iter().map(|(n, _)| n.clone()).collect();
    out.retain(|(_, cq)| {
        let text = cq.query.to_string();
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .collect();
        let streams = ["proc_events", "host_metrics", "net_events"];
        let read = streams.iter().filter(|s| words.contains(s)).count();
        read >= 1 && !names.iter().any(|n| words.contains(&n.as_str()))
    });
    out
}

/// Every continuous query in queries/ (filters, windows, HOP with SUPPRESS, OVER histories,
/// patterns with ONE and ALL ROWS PER MATCH, an INVARIANT, an OUTLIER, EVIDENCE, lookup
/// joins with tables, an interval and an anti join of two streams) over the demo generator's fleet with every attack injected: created
/// WITH (start = ...) at a random point, with checkpoints and restarts before and after, it
/// gives exactly what the same query gave running all along.
#[tokio::test]
async fn every_query_kind_in_queries_backfills_as_it_runs() {
    use rand::{Rng, SeedableRng};
    use saql::sources::demo::{Attack, DemoGenerator};
    use saql::time::EventTime;
    const SECOND: i64 = 1_000_000_000;
    // 2026-01-01 00:00:00.
    let t0 = 1_767_225_600 * SECOND;
    let minutes = 8;
    let queries = demo_queries();
    assert!(queries.len() >= 17, "{} queries", queries.len());
    for join in ["start_then_connect", "login_without_mfa"] {
        assert!(
            queries.iter().any(|(n, _)| n == join),
            "{join} is backfilled too"
        );
    }
    // SAQL_BACKFILL_SEEDS=20 runs more.
    let seeds: u64 = std::env::var("SAQL_BACKFILL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for seed in 0..seeds {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let mut engine = open_retaining(dir.path());
        engine.execute(&demo_streams()).await.unwrap();
        engine
            .execute(&std::fs::read_to_string("queries/01_tables.sql").unwrap())
            .await
            .unwrap();
        for (name, cq) in &queries {
            let mut all = cq.clone();
            all.name = datafusion::sql::sqlparser::ast::Ident::new(format!("all_{name}"));
            engine.execute(&all.to_string()).await.unwrap();
        }
        let mut demo = DemoGenerator::new(seed, 6).with_rate(5.0);
        for (i, attack) in Attack::ALL.into_iter().enumerate() {
            // Each attack twice: once before the hand-over at the latest, once at random.
            demo.inject(attack, EventTime(t0 + (20 + 10 * i as i64) * SECOND));
            let at = rng.gen_range(60..minutes * 60 - 60);
            demo.inject(attack, EventTime(t0 + at * SECOND));
        }
        let end = t0 + minutes * 60 * SECOND;
        // Each query's hand-over at a point of its own.
        let mut handovers: Vec<(i64, usize)> = (0..queries.len())
            .map(|q| (t0 + rng.gen_range(30..minutes * 60 - 20) * SECOND, q))
            .collect();
        handovers.sort();
        let mut pending = handovers.iter().peekable();
        let mut at = t0;
        while at < end {
            let mut next = (at + rng.gen_range(5..40) * SECOND).min(end);
            if let Some(&&(h, _)) = pending.peek() {
                next = next.min(h);
            }
            for (stream, batch) in demo.generate(EventTime(at), EventTime(next)).unwrap() {
                engine.insert_batch(stream, batch).unwrap();
            }
            at = next;
            while let Some((_, q)) = pending.next_if(|(h, _)| *h <= at) {
                let (name, cq) = &queries[*q];
                let mut late = cq.clone();
                late.name = datafusion::sql::sqlparser::ast::Ident::new(format!("late_{name}"));
                late.start = Some(saql::sql::BackfillStart::At(t0));
                engine
                    .execute(&late.to_string())
                    .await
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            match rng.gen_range(0..6) {
                0 => {
                    engine.execute("CHECKPOINT").await.unwrap();
                }
                1 => {
                    drop(engine);
                    engine = open_retaining(dir.path());
                }
                _ => {}
            }
        }
        let mut silent = Vec::new();
        for (name, _) in &queries {
            let all = sorted(&engine, &format!("all_{name}")).await;
            if all.is_empty() {
                silent.push(name.clone());
            }
            let handover = handovers
                .iter()
                .find(|(_, q)| queries[*q].0 == *name)
                .unwrap()
                .0;
            assert_eq!(
                sorted(&engine, &format!("late_{name}")).await,
                all,
                "seed {seed}, {name}, hand-over at {} s",
                (handover - t0) / SECOND
            );
        }
        assert!(silent.len() <= 3, "seed {seed}: silent queries {silent:?}");
    }
}

/// A checkpoint, or a backfill handing over, in the middle of a window does not change what
/// its floating-point sum adds up to: (0.1 + 0.2) + 0.3 is 0.6000000000000001, and 0.1 + (0.2
/// + 0.3) would be 0.6.
#[tokio::test]
async fn a_checkpoint_or_hand_over_keeps_float_sums_exact() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_retaining(dir.path());
    engine
        .execute(
            "CREATE STREAM f (ts TIMESTAMP, x DOUBLE PRECISION, WATERMARK FOR ts AS ts) \
             WITH (history = '30 days')",
        )
        .await
        .unwrap();
    let sums = "SELECT window_end, sum(x) AS total, avg(x) AS mean \
                FROM TUMBLE(f, ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end";
    engine
        .execute(&format!("CREATE CONTINUOUS QUERY live AS {sums}"))
        .await
        .unwrap();
    let row = |s: i64, x: f64| {
        format!(
            "INSERT INTO f VALUES (TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{s}' SECOND, {x})"
        )
    };
    engine.execute(&row(1, 0.1)).await.unwrap();
    engine.execute("CHECKPOINT").await.unwrap();
    engine
        .execute(&format!(
            "CREATE CONTINUOUS QUERY late WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS {sums}"
        ))
        .await
        .unwrap();
    engine.execute(&row(2, 0.2)).await.unwrap();
    engine.execute(&row(3, 0.3)).await.unwrap();
    engine.execute(&row(120, 0.0)).await.unwrap();
    for q in ["live", "late"] {
        let r = rows(&engine, &format!("SELECT total, mean FROM {q}")).await;
        assert_eq!(r[0][0], "0.6000000000000001", "{q}: {r:?}");
        assert_eq!(r[0][1], "0.20000000000000004", "{q}: {r:?}");
    }
}
