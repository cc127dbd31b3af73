//! ALTER CONTINUOUS QUERY keeps the state of every operator whose definition is unchanged:
//! after a changed HAVING and select list, the altered query gives exactly what the new query
//! gives having run all along, with its sequence numbers going on; a change that would
//! start a window empty is refused and changes nothing; a restart keeps the altered query.

use crate::adhoc;

use saql::{Engine, EngineConfig};
use std::path::Path;

fn open(dir: &Path) -> Engine {
    Engine::open(EngineConfig {
        data_dir: Some(dir.to_path_buf()),
        checkpoint_interval: None,
        retain_rows: 100_000,
        ..EngineConfig::default()
    })
    .expect("engine opens")
}

/// The rows of `sql`, each as `a,b,c`, in the order the engine gives them.
async fn rows(engine: &Engine, sql: &str) -> Vec<String> {
    adhoc::rows(engine, sql)
        .await
        .into_iter()
        .map(|r| r.join(","))
        .collect()
}

/// Rows `from..to`: one per second, hosts h0..h2, n = i.
async fn insert(engine: &Engine, from: i64, to: i64) {
    let values: Vec<String> = (from..to)
        .map(|i| {
            format!(
                "(TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{i}' SECOND, 'h{}', {i})",
                (i * 7) % 3
            )
        })
        .collect();
    engine
        .execute(&format!("INSERT INTO s VALUES {}", values.join(", ")))
        .await
        .unwrap();
}

const WINDOW: &str =
    "FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end";

fn old_sql() -> String {
    format!("SELECT host, window_end, sum(n) AS c {WINDOW} HAVING sum(n) >= 0")
}

/// A changed select list (same columns) and HAVING.
fn new_sql() -> String {
    format!("SELECT upper(host) AS host, window_end, sum(n) AS c {WINDOW} HAVING sum(n) % 3 = 0")
}

const STREAM: &str = "CREATE STREAM s (ts TIMESTAMP, host TEXT, n BIGINT, \
                      WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)";

#[tokio::test]
async fn a_changed_having_and_select_list_keep_the_windows() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    engine.execute(STREAM).await.unwrap();
    engine
        .execute(&format!("CREATE CONTINUOUS QUERY q AS {}", old_sql()))
        .await
        .unwrap();
    // The reference: the new query running all along, in an engine of its own (so that it
    // shares no operator with q).
    let reference = Engine::open(EngineConfig {
        retain_rows: 100_000,
        ..EngineConfig::default()
    })
    .unwrap();
    reference.execute(STREAM).await.unwrap();
    reference
        .execute(&format!("CREATE CONTINUOUS QUERY q AS {}", new_sql()))
        .await
        .unwrap();
    // The change lands in the middle of a window (90 s: the second minute is half full).
    insert(&engine, 0, 90).await;
    insert(&reference, 0, 90).await;
    let before_q = rows(&engine, "SELECT * FROM q").await.len();
    let before_ref = rows(&reference, "SELECT * FROM q").await.len();
    // Another aggregate, or another window, would start empty: refused, q runs on unchanged.
    for changed in [
        format!("SELECT host, window_end, count(*) AS c {WINDOW}"),
        "SELECT host, window_end, sum(n) AS c FROM TUMBLE(s, ts, INTERVAL '2' MINUTE) \
         GROUP BY host, window_start, window_end"
            .to_string(),
    ] {
        let err = engine
            .execute(&format!("ALTER CONTINUOUS QUERY q AS {changed}"))
            .await
            .err()
            .expect("refused");
        assert_eq!(err.sqlstate(), "0A000", "{err}");
        assert!(err.to_string().contains("WindowAggregate"), "{err}");
    }
    engine
        .execute(&format!("ALTER CONTINUOUS QUERY q AS {}", new_sql()))
        .await
        .unwrap();
    for (from, to) in [(90, 200), (200, 260), (260, 400)] {
        insert(&engine, from, to).await;
        insert(&reference, from, to).await;
        if from == 90 {
            engine.execute("CHECKPOINT").await.unwrap();
        }
        if from == 200 {
            drop(engine);
            engine = open(dir.path());
        }
    }
    let q = rows(&engine, "SELECT * FROM q").await;
    let expected = rows(&reference, "SELECT * FROM q").await;
    assert!(expected.len() > before_ref + 3, "{expected:?}");
    assert!(
        q[before_q..].iter().any(|r| r.contains("00:02:00")),
        "{q:?}"
    );
    assert_eq!(
        q[before_q..],
        expected[before_ref..],
        "after the ALTER, q gives what the new query gave running all along"
    );
    // Its definition is the new one, across the restart.
    let shown = rows(&engine, "SHOW QUERIES").await;
    let line = shown.iter().find(|l| l.starts_with("q,")).unwrap();
    assert!(line.contains("upper(host)"), "{line}");
}

#[tokio::test]
async fn alter_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine
        .execute(
            "CREATE STREAM s (ts TIMESTAMP, host TEXT, n BIGINT, WATERMARK FOR ts AS ts); \
             CREATE STREAM t (ts TIMESTAMP, host TEXT, n BIGINT, WATERMARK FOR ts AS ts)",
        )
        .await
        .unwrap();
    engine
        .execute("CREATE CONTINUOUS QUERY q AS SELECT * FROM s WHERE n > 1")
        .await
        .unwrap();
    let code = |sql: &'static str| {
        let engine = engine.clone();
        async move {
            engine
                .execute(sql)
                .await
                .err()
                .map(|e| e.sqlstate().to_string())
        }
    };
    assert_eq!(
        code("ALTER CONTINUOUS QUERY nope AS SELECT * FROM s")
            .await
            .as_deref(),
        Some("42P01")
    );
    assert_eq!(
        code("ALTER CONTINUOUS QUERY q AS SELECT * FROM t")
            .await
            .as_deref(),
        Some("0A000")
    );
    // A filter-only query has no state to lose: its WHERE may change.
    assert_eq!(
        code("ALTER CONTINUOUS QUERY q AS SELECT * FROM s WHERE n > 5").await,
        None
    );
    insert(&engine, 0, 10).await;
    assert_eq!(
        rows(&engine, "SELECT n FROM q").await,
        vec!["6", "7", "8", "9"]
    );
}

/// Rows `from..to` of stream `e (ts, host, v)`: one per second, hosts h0..h2, a value that
/// rises and falls, and a child process name from a small set (a rare one now and then).
async fn insert_events(engine: &Engine, from: i64, to: i64) {
    let values: Vec<String> = (from..to)
        .map(|i| {
            let child = match i % 23 {
                0 => format!("rare{}", i % 5),
                k => format!("c{}", k % 4),
            };
            format!(
                "(TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{i}' SECOND, 'h{}', {}, '{child}')",
                i % 3,
                mix(i as u64) % 13
            )
        })
        .collect();
    engine
        .execute(&format!("INSERT INTO e VALUES {}", values.join(", ")))
        .await
        .unwrap();
}

/// A well-mixed hash of `i` (splitmix64's finalizer).
fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

const EVENTS: &str = "CREATE STREAM e (ts TIMESTAMP, host TEXT, v BIGINT, child TEXT, \
                      WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)";

/// Runs `old`, alters it to `new` after `at` rows (a checkpoint and a restart after), and
/// checks that from the ALTER on q gives what `new` gave running all along in another
/// engine. Returns the number of results after the ALTER.
async fn altered_equals_new_all_along(old: &str, new: &str, at: i64) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    engine.execute(EVENTS).await.unwrap();
    engine
        .execute(&format!("CREATE CONTINUOUS QUERY q AS {old}"))
        .await
        .unwrap();
    let reference = Engine::open(EngineConfig {
        retain_rows: 100_000,
        ..EngineConfig::default()
    })
    .unwrap();
    reference.execute(EVENTS).await.unwrap();
    reference
        .execute(&format!("CREATE CONTINUOUS QUERY q AS {new}"))
        .await
        .unwrap();
    insert_events(&engine, 0, at).await;
    insert_events(&reference, 0, at).await;
    let before_ref = rows(&reference, "SELECT * FROM q").await.len();
    engine
        .execute(&format!("ALTER CONTINUOUS QUERY q AS {new}"))
        .await
        .unwrap_or_else(|e| panic!("ALTER refused: {e}"));
    // With other columns, q's retained results start afresh at the ALTER.
    let before_q = rows(&engine, "SELECT * FROM q").await.len();
    let end = at + 600;
    for (i, from) in (at..end).step_by(97).enumerate() {
        let to = (from + 97).min(end);
        insert_events(&engine, from, to).await;
        insert_events(&reference, from, to).await;
        match i {
            1 => {
                engine.execute("CHECKPOINT").await.unwrap();
            }
            3 => {
                drop(engine);
                engine = open(dir.path());
            }
            _ => {}
        }
    }
    let q = rows(&engine, "SELECT * FROM q").await;
    let expected = rows(&reference, "SELECT * FROM q").await;
    assert_eq!(
        q[before_q..],
        expected[before_ref..],
        "after the ALTER, q gives what the new query gave running all along"
    );
    q.len() - before_q
}

const PATTERN: &str = "FROM e MATCH_RECOGNIZE (PARTITION BY host ORDER BY ts \
    MEASURES FIRST(up.v) AS first_v, LAST(up.v) AS last_v, COUNT(up.*) AS c, LAST(up.ts) AS at \
    PATTERN (up{2,}) WITHIN INTERVAL '1' MINUTE DEFINE up AS v > PREV(v)) AS m";

/// A MATCH_RECOGNIZE query whose select list and threshold (a WHERE over the matches) change
/// halfway keeps its matches in flight.
#[tokio::test]
async fn a_changed_select_list_and_threshold_keep_a_pattern() {
    let after = altered_equals_new_all_along(
        &format!("SELECT * {PATTERN}"),
        &format!(
            "SELECT host, at, last_v - first_v AS rise, c {PATTERN} WHERE last_v - first_v >= 4"
        ),
        301,
    )
    .await;
    assert!(after > 5, "{after} matches after the ALTER");
}

const INVARIANT: &str = "FROM e WHERE v < 9 \
    INVARIANT SET (child) PER (host) TRAINING INTERVAL '5' MINUTE";

/// An INVARIANT query over a stream's rows whose select list changes halfway (columns added,
/// reordered, renamed) keeps what it learned and the rows waiting for the watermark.
#[tokio::test]
async fn a_changed_select_list_keeps_an_invariant() {
    let after = altered_equals_new_all_along(
        &format!("SELECT ts, host, child {INVARIANT}"),
        &format!("SELECT child, upper(host) AS loud, ts, host, v * 2 AS twice {INVARIANT}"),
        450,
    )
    .await;
    assert!(after >= 3, "{after} violations after the ALTER");
}

/// What an INVARIANT learns cannot carry to another learning: another training, other values
/// or keys, or other rows (a changed WHERE) start it empty, and the ALTER is refused.
#[tokio::test]
async fn an_invariant_that_would_learn_otherwise_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.execute(EVENTS).await.unwrap();
    engine
        .execute(&format!(
            "CREATE CONTINUOUS QUERY q AS SELECT ts, host, child {INVARIANT}"
        ))
        .await
        .unwrap();
    insert_events(&engine, 0, 100).await;
    for changed in [
        "SELECT ts, host, child FROM e WHERE v < 9          INVARIANT SET (child) PER (host) TRAINING INTERVAL '6' MINUTE",
        "SELECT ts, host, child FROM e WHERE v < 9          INVARIANT SET (child) TRAINING INTERVAL '5' MINUTE",
        "SELECT ts, host, child FROM e WHERE v < 10          INVARIANT SET (child) PER (host) TRAINING INTERVAL '5' MINUTE",
        "SELECT ts, host, upper(child) AS child FROM e WHERE v < 9          INVARIANT SET (child) PER (host) TRAINING INTERVAL '5' MINUTE",
    ] {
        let err = engine
            .execute(&format!("ALTER CONTINUOUS QUERY q AS {changed}"))
            .await
            .err()
            .unwrap_or_else(|| panic!("not refused: {changed}"));
        assert_eq!(err.sqlstate(), "0A000", "{err}");
        assert!(err.to_string().contains("Invariant"), "{err}");
    }
}

/// An INVARIANT over windows whose select list and output filter change halfway keeps the
/// windows and what it learned.
#[tokio::test]
async fn a_changed_select_list_keeps_a_windowed_invariant() {
    let window = "FROM TUMBLE(e, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end";
    let after = altered_equals_new_all_along(
        &format!(
            "SELECT host, window_end, sum(v) AS top {window} \
             INVARIANT RANGE (top) PER (host) TRAINING 3 WINDOWS"
        ),
        &format!(
            "SELECT window_end, sum(v) AS top, host, 'x' || host AS tag {window} \
             INVARIANT RANGE (top) PER (host) TRAINING 3 WINDOWS"
        ),
        200,
    )
    .await;
    let _ = after;
}

fn open_with_history(dir: &Path) -> Engine {
    Engine::open(EngineConfig {
        data_dir: Some(dir.to_path_buf()),
        checkpoint_interval: None,
        retain_rows: 100_000,
        history: Some(saql::plan::retention::Retention::Span(
            std::time::Duration::from_secs(30 * 86_400),
        )),
        ..EngineConfig::default()
    })
    .expect("engine opens")
}

/// `ALTER ... WITH (start = ...)` to another window and aggregate (which plain ALTER refuses)
/// rebuilds the new query from history while the old one runs on: from the ALTER on, q gives
/// exactly what the new query gave running all along, its sequence numbers going on and its
/// subscriber served throughout; across a checkpoint and a restart. A query over another
/// stream is refused, with or without a start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_with_start_rebuilds_from_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_with_history(dir.path());
    engine.execute(STREAM).await.unwrap();
    engine
        .execute("CREATE STREAM t (ts TIMESTAMP, host TEXT, n BIGINT, WATERMARK FOR ts AS ts)")
        .await
        .unwrap();
    let old = format!("SELECT host, window_end, sum(n) AS c {WINDOW}");
    // Other windows and another aggregate, the same columns.
    let new = "SELECT host, window_end, count(*) + max(n) AS c \
               FROM HOP(s, ts, INTERVAL '30' SECOND, INTERVAL '2' MINUTE) \
               GROUP BY host, window_start, window_end";
    engine
        .execute(&format!("CREATE CONTINUOUS QUERY q AS {old}"))
        .await
        .unwrap();
    let reference = Engine::open(EngineConfig {
        retain_rows: 100_000,
        ..EngineConfig::default()
    })
    .unwrap();
    reference.execute(STREAM).await.unwrap();
    reference
        .execute(&format!("CREATE CONTINUOUS QUERY q AS {new}"))
        .await
        .unwrap();
    insert(&engine, 0, 150).await;
    engine.execute("CHECKPOINT").await.unwrap();
    insert(&engine, 150, 290).await;
    insert(&reference, 0, 290).await;
    let saql::StatementResult::Subscribe(mut sub) = engine
        .execute("SUBSCRIBE q WITH SEQ")
        .await
        .unwrap()
        .remove(0)
    else {
        panic!("no subscription")
    };
    let before_q = rows(&engine, "SELECT * FROM q").await.len();
    let before_ref = rows(&reference, "SELECT * FROM q").await.len();
    let err = engine
        .execute(&format!("ALTER CONTINUOUS QUERY q AS {new}"))
        .await
        .err()
        .expect("plain ALTER refuses new windows");
    assert!(err.to_string().contains("WITH (start = ...)"), "{err}");
    for other in [
        "ALTER CONTINUOUS QUERY q AS SELECT * FROM t",
        "ALTER CONTINUOUS QUERY q WITH (start = INTERVAL '1' HOUR) AS SELECT * FROM t",
    ] {
        let err = engine.execute(other).await.err().expect("refused");
        assert_eq!(err.sqlstate(), "0A000", "{err}");
        assert!(
            err.to_string().contains("keeps a query on its stream"),
            "{err}"
        );
    }
    let altered = engine
        .execute(&format!(
            "ALTER CONTINUOUS QUERY q WITH (start = TIMESTAMP '2026-01-01 00:00:00') AS {new}"
        ))
        .await
        .unwrap();
    let saql::StatementResult::CommandWithNotice { notice, .. } = &altered[0] else {
        panic!("no notice");
    };
    assert!(
        notice.starts_with("rebuilt the query over 290 rows"),
        "{notice}"
    );
    for (i, (from, to)) in [(290, 350), (350, 420), (420, 600)].into_iter().enumerate() {
        insert(&engine, from, to).await;
        insert(&reference, from, to).await;
        match i {
            0 => {
                // The subscriber got every row since it came, numbered on from before the
                // ALTER.
                let mut seqs = Vec::new();
                while let Ok(Some(event)) =
                    tokio::time::timeout(std::time::Duration::from_millis(200), sub.events.recv())
                        .await
                {
                    if let saql::runtime::SubscriptionEvent::Rows(b) = event {
                        let seq = b
                            .column(0)
                            .as_any()
                            .downcast_ref::<datafusion::arrow::array::Int64Array>()
                            .unwrap();
                        seqs.extend(seq.values().iter().copied());
                    }
                }
                let shown = rows(&engine, "SELECT * FROM q").await.len() as i64;
                let after = before_q as i64 + 1;
                assert!(shown > after, "results after the ALTER");
                assert_eq!(
                    seqs,
                    (after..=shown).collect::<Vec<i64>>(),
                    "no gap, no cut"
                );
                // A restart from the checkpoint before the ALTER: replayed from the log, the
                // ALTER rebuilds the same state.
                drop(engine);
                engine = open_with_history(dir.path());
            }
            1 => {
                engine.execute("CHECKPOINT").await.unwrap();
            }
            _ => {
                drop(engine);
                engine = open_with_history(dir.path());
            }
        }
    }
    let q = rows(&engine, "SELECT * FROM q").await;
    let expected = rows(&reference, "SELECT * FROM q").await;
    assert!(expected.len() > before_ref + 10, "{expected:?}");
    assert_eq!(
        q[before_q..],
        expected[before_ref..],
        "after the ALTER, q gives what the new query gave running all along"
    );
}
