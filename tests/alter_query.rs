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
