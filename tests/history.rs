//! Retained history: a stream's rows are kept as Parquet segments written at checkpoints, an
//! ad hoc SELECT reads all of them (not only the recent rows), a restart keeps them, a
//! checkpoint that never completed leaves no row twice, and a time predicate skips segments'
//! row groups (EXPLAIN ANALYZE shows it).

use datafusion::arrow::util::display::array_value_to_string;
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

/// The rows of a statement's result, as text.
async fn rows(engine: &Engine, sql: &str) -> Vec<Vec<String>> {
    let result = engine.execute(sql).await.unwrap().remove(0);
    let batches = match result {
        StatementResult::Rows { batches, .. } => batches,
        StatementResult::Streaming { rows, .. } => rows.collect().await.unwrap(),
        _ => panic!("{sql}: no rows"),
    };
    batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |r| {
                (0..b.num_columns())
                    .map(|c| array_value_to_string(b.column(c), r).unwrap())
                    .collect()
            })
        })
        .collect()
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
