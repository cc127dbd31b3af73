//! Whatever a client sends, saql answers with a result or an error, never a panic: random
//! statements built from SQL fragments and random bytes go through the parser, the planner and
//! the engine, and random COPY data through the decoder.

use proptest::prelude::*;
use saql::sources::csv::{CopyDecoder, CopyOptions};
use saql::{Engine, EngineConfig};

const FRAGMENTS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "HAVING",
    "TUMBLE(",
    "HOP(",
    "SESSION(",
    "s",
    "ts",
    "host",
    "amount",
    ",",
    "(",
    ")",
    "INTERVAL '1' MINUTE",
    "'x'",
    "1",
    "-",
    "*",
    "COUNT(*)",
    "SUM(amount)",
    "window_start",
    "window_end",
    "OUTLIER",
    "ZSCORE(2)",
    "ON",
    "INVARIANT",
    "SET",
    "TRAINING",
    "2 WINDOWS",
    "CREATE",
    "CONTINUOUS",
    "QUERY",
    "q",
    "AS",
    "STREAM",
    "WATERMARK",
    "FOR",
    "INSERT INTO s VALUES",
    "('2024-01-01', 'h', 1)",
    "SUBSCRIBE",
    "EXPLAIN",
    "OVER",
    "PARTITION BY",
    "ORDER BY",
    "LAG(amount)",
    "ROWS BETWEEN",
    "PRECEDING",
    "AND",
    "CURRENT ROW",
    ";",
    "NULL",
    "::BIGINT",
    "DROP",
    "SHOW",
    "STREAMS",
    "QUERIES",
    "'",
    "\"",
    "$1",
    "DECLARE",
    "CURSOR",
    "FETCH",
    "COPY",
    "STDIN",
    "9999999999999999999999",
];

fn statement() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(proptest::sample::select(FRAGMENTS), 1..20)
            .prop_map(|parts| parts.join(" ")),
        ".{0,80}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn statements_never_panic(sql in statement()) {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        engine
            .execute_blocking(
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, \
                 WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
            )
            .unwrap();
        // Errors are fine; panics are not.
        let _ = saql::parse(&sql);
        let _ = engine.execute_blocking(&sql);
        let _ = engine.execute_blocking("INSERT INTO s VALUES ('2024-01-01 00:00:05', 'h', 5)");
        engine.finish();
    }

    #[test]
    fn copy_data_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), csv in any::<bool>(), split in 0usize..200) {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        engine
            .execute_blocking("CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, ok BOOLEAN)")
            .unwrap();
        let schema = engine.stream_schema("s").unwrap();
        let options = if csv { CopyOptions::csv() } else { CopyOptions::text() };
        let Ok(mut decoder) = CopyDecoder::new(schema, vec![0, 1, 2, 3], options) else {
            return Ok(());
        };
        let cut = split.min(data.len());
        if decoder.feed(&data[..cut]).is_ok() && decoder.feed(&data[cut..]).is_ok() {
            if let Ok(batch) = decoder.finish() {
                engine.insert_batch("s", batch).unwrap();
            }
        }
    }
}
