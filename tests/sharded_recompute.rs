//! Key-partitioned workers change nothing but speed: every keyed query gives the same rows
//! (as a multiset) on 1, 2 and 3 workers, for random rows and batch splits, and for one batch
//! large enough to run the replicas on their own threads.

use crate::common;

use common::{render, run_on, Row, BASE, SEC};
use datafusion::arrow::array::AsArray;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use proptest::prelude::*;

const QUERIES: [&str; 5] = [
    "SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top \
     FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end",
    "SELECT k % 3 AS g, window_end, COUNT(DISTINCT v) AS d FROM HOP(s, ts, INTERVAL '5' SECOND, \
     INTERVAL '15' SECOND) WHERE v IS NOT NULL GROUP BY k % 3, window_start, window_end \
     HAVING COUNT(*) > 1",
    "SELECT k, window_start, window_end, COUNT(*) AS n FROM SESSION(s, ts, INTERVAL '2' SECOND) \
     GROUP BY k, window_start, window_end",
    "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(a.ts) AS t0, \
     MATCH_NUMBER() AS mn, COUNT(*) AS n PATTERN (a b+) WITHIN INTERVAL '10' SECOND \
     DEFINE a AS v < 3, b AS b.v > a.v)",
    // Not sharded (the outlier needs each window whole), still equal.
    "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
     GROUP BY k, window_start, window_end OUTLIER ZSCORE(1) ON (total)",
];

fn rows(n: usize, keys: i64, seed: u64) -> Vec<Row> {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| Row {
            ts: BASE + i as i64 * SEC / 10 + (next() % 3000) as i64 * 1_000_000,
            k: (next() % keys as u64) as i64,
            v: Some((next() % 10) as i64),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn workers_give_the_same_rows(n in 0usize..400, keys in 1i64..20, seed in 1u64.., splits in prop::collection::vec(1usize..50, 1..5)) {
        let rows = rows(n, keys, seed);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for q in QUERIES {
            let one = render(&run_on(&rt, q, &rows, &splits, 1));
            for workers in [2, 3] {
                let many = render(&run_on(&rt, q, &rows, &splits, workers));
                prop_assert_eq!(&many, &one, "{} on {} workers", q, workers);
            }
        }
    }
}

#[test]
fn large_batches_run_on_threads_and_agree() {
    let rows = rows(20_000, 500, 42);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The window_end column of the windowed queries: results stay in window order.
    let window_end = [Some(2), Some(1), Some(2), None, Some(1)];
    for (q, end) in QUERIES.iter().zip(window_end) {
        let one = render(&run_on(&rt, q, &rows, &[8192], 1));
        assert!(!one.is_empty(), "{q} produces rows");
        let batches = run_on(&rt, q, &rows, &[8192], 2);
        if let Some(c) = end {
            let ends: Vec<i64> = batches
                .iter()
                .flat_map(|b| {
                    let a = cast(b.column(c), &DataType::Int64).unwrap();
                    a.as_primitive::<Int64Type>().values().to_vec()
                })
                .collect();
            assert!(
                ends.windows(2).all(|w| w[0] <= w[1]),
                "{q}: out of window order"
            );
        }
        assert_eq!(render(&batches), one, "{q}");
    }
}
