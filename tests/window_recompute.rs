//! Incremental window operators checked against a batch recompute of the same query: random
//! rows with bounded disorder (within the watermark delay, so none are late), split into
//! random batches, fed through the engine; the reference computes the same windows over all
//! rows at once, with DataFusion (TUMBLE, HOP) or a brute-force loop (SESSION).

use crate::common;

use std::sync::Arc;

use common::{batch, incremental, jittered_rows, received, render, schema, Row, BASE, SEC};
use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use proptest::prelude::*;
use saql::{Engine, EngineConfig, StatementResult};

fn rows_strategy() -> impl Strategy<Value = (Vec<Row>, Vec<usize>)> {
    jittered_rows(300, 5)
}

fn reference(rt: &tokio::runtime::Runtime, sql: &str, rows: &[Row]) -> Vec<String> {
    rt.block_on(async {
        let ctx = SessionContext::new();
        let table = MemTable::try_new(schema(), vec![vec![batch(rows)]]).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        render(&batches)
    })
}

const AGGS: &str =
    "COUNT(*) AS n, SUM(v) AS total, MIN(v) AS lo, MAX(v) AS hi, COUNT(DISTINCT v) AS d";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn tumble_matches_batch_recompute((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = incremental(&rt, &format!(
            "SELECT k, window_start, window_end, {AGGS} FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
             GROUP BY k, window_start, window_end"), &rows, &splits);
        let want = reference(&rt, &format!(
            "SELECT k, ws, ws + INTERVAL '10 seconds', {AGGS} FROM \
             (SELECT *, date_bin(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws FROM t) \
             GROUP BY k, ws"), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn a_larger_window_rolled_up_from_a_smaller_one_matches_batch_recompute(
        (rows, splits) in rows_strategy()
    ) {
        // The 30 s query shares the 10 s query's filter and is computed from its results.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        const ROLLED: &str = "COUNT(*) AS n, SUM(v) AS total, MIN(v) AS lo, MAX(v) AS hi";
        let engine = Engine::open(EngineConfig::default()).unwrap();
        let run = |sql: &str| engine.execute_blocking(sql).unwrap().remove(0);
        run("CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)");
        for (name, secs) in [("small", 10), ("large", 30)] {
            run(&format!(
                "CREATE CONTINUOUS QUERY {name} AS SELECT k, window_start, window_end, {ROLLED} \
                 FROM TUMBLE(s, ts, INTERVAL '{secs}' SECOND) WHERE v > -20 \
                 GROUP BY k, window_start, window_end"
            ));
        }
        let StatementResult::Subscribe(mut sub) = run("SUBSCRIBE large") else {
            panic!("not a subscription")
        };
        let mut start = 0;
        for (i, _) in (0..).zip(0..rows.len()) {
            if start >= rows.len() {
                break;
            }
            let len = splits[i % splits.len()].min(rows.len() - start);
            engine.insert_batch("s", batch(&rows[start..start + len])).unwrap();
            start += len;
        }
        engine.finish();
        let got = render(&received(&mut sub));
        let want = reference(&rt, &format!(
            "SELECT k, ws, ws + INTERVAL '30 seconds', {ROLLED} FROM \
             (SELECT *, date_bin(INTERVAL '30 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') AS ws \
              FROM t WHERE v > -20) GROUP BY k, ws"), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn hop_matches_batch_recompute((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = incremental(&rt, &format!(
            "SELECT k, window_start, window_end, {AGGS} FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) \
             GROUP BY k, window_start, window_end HAVING COUNT(*) > 1"), &rows, &splits);
        // Every row lies in the three 15 s windows starting 0, 5 and 10 s before its 5 s bin.
        let want = reference(&rt, &format!(
            "SELECT k, ws, ws + INTERVAL '15 seconds', {AGGS} FROM ( \
               SELECT *, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') - INTERVAL '0 seconds' AS ws FROM t \
               UNION ALL SELECT *, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') - INTERVAL '5 seconds' FROM t \
               UNION ALL SELECT *, date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00') - INTERVAL '10 seconds' FROM t) \
             GROUP BY k, ws HAVING COUNT(*) > 1"), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn cumulate_matches_batch_recompute((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Flink's form of the window table function.
        let got = incremental(&rt, &format!(
            "SELECT k, window_start, window_end, {AGGS} FROM TABLE(CUMULATE(TABLE s, \
             DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) \
             GROUP BY k, window_start, window_end"), &rows, &splits);
        // Every row lies in the windows that start with its 20 s period and end 5, 10, 15
        // or 20 s after that start, later than the row.
        let bin = "date_bin(INTERVAL '20 seconds', ts, TIMESTAMP '1970-01-01 00:00:00')";
        let windows: Vec<String> = [5, 10, 15, 20].iter().map(|len| format!(
            "SELECT *, {bin} AS ws, {bin} + INTERVAL '{len} seconds' AS we FROM t")).collect();
        let want = reference(&rt, &format!(
            "SELECT k, ws, we, {AGGS} FROM ({}) WHERE ts < we GROUP BY k, ws, we",
            windows.join(" UNION ALL ")), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn window_rows_without_aggregation_match_batch_recompute((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = incremental(&rt,
            "SELECT ts, k, v, window_start, window_end \
             FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) WHERE v > 0", &rows, &splits);
        let bin = "date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00')";
        let windows: Vec<String> = [0, 5, 10].iter().map(|back| format!(
            "SELECT ts, k, v, {bin} - INTERVAL '{back} seconds' AS ws, \
             {bin} - INTERVAL '{back} seconds' + INTERVAL '15 seconds' AS we FROM t WHERE v > 0"))
            .collect();
        let want = reference(&rt, &windows.join(" UNION ALL "), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn window_top_n_matches_batch_recompute((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Ties in n are broken by k, so that the numbering is the same in both.
        let got = incremental(&rt,
            "SELECT * FROM (SELECT k, window_start, window_end, n, total, ROW_NUMBER() OVER \
             (PARTITION BY window_start, window_end ORDER BY n DESC, k) AS rn FROM \
             (SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total \
              FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) \
              GROUP BY k, window_start, window_end) AS w) AS r WHERE rn <= 2", &rows, &splits);
        let bin = "date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00')";
        let want = reference(&rt, &format!(
            "SELECT * FROM (SELECT k, ws, we, n, total, ROW_NUMBER() OVER \
             (PARTITION BY ws, we ORDER BY n DESC, k) AS rn FROM \
             (SELECT k, ws, ws + INTERVAL '10 seconds' AS we, COUNT(*) AS n, SUM(v) AS total FROM \
              (SELECT *, {bin} AS ws FROM t UNION ALL \
               SELECT *, {bin} - INTERVAL '5 seconds' AS ws FROM t) AS u \
              GROUP BY k, ws) AS w) AS r WHERE rn <= 2"), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn window_rank_and_dense_rank_match_batch_recompute(
        (rows, splits) in rows_strategy(), dense in any::<bool>()
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Ties in n share a number, so arrival order does not matter.
        let f = if dense { "DENSE_RANK" } else { "RANK" };
        let got = incremental(&rt, &format!(
            "SELECT * FROM (SELECT k, window_start, window_end, n, {f}() OVER \
             (PARTITION BY window_start, window_end ORDER BY n DESC) AS rk FROM \
             (SELECT k, window_start, window_end, COUNT(*) AS n \
              FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) \
              GROUP BY k, window_start, window_end) AS w) AS r WHERE rk <= 2"), &rows, &splits);
        let bin = "date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00')";
        let want = reference(&rt, &format!(
            "SELECT * FROM (SELECT k, ws, we, n, {f}() OVER \
             (PARTITION BY ws, we ORDER BY n DESC) AS rk FROM \
             (SELECT k, ws, ws + INTERVAL '10 seconds' AS we, COUNT(*) AS n FROM \
              (SELECT *, {bin} AS ws FROM t UNION ALL \
               SELECT *, {bin} - INTERVAL '5 seconds' AS ws FROM t) AS u \
              GROUP BY k, ws) AS w) AS r WHERE rk <= 2"), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn cube_matches_batch_recompute((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = incremental(&rt,
            "SELECT k, v > 0 AS pos, window_start, window_end, COUNT(*) AS n, SUM(v) AS total \
             FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) \
             GROUP BY window_start, window_end, CUBE (k, v > 0)", &rows, &splits);
        let bin = "date_bin(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01 00:00:00')";
        let want = reference(&rt, &format!(
            "SELECT k, v > 0, ws, ws + INTERVAL '10 seconds', COUNT(*), SUM(v) FROM \
             (SELECT *, {bin} AS ws FROM t UNION ALL \
              SELECT *, {bin} - INTERVAL '5 seconds' AS ws FROM t) AS u \
             GROUP BY ws, CUBE (k, v > 0)"), &rows);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn hop_evidence_matches_brute_force((rows, splits) in rows_strategy(), keep in 1usize..5) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = incremental(&rt, &format!(
            "SELECT k, window_start, window_end, COUNT(*) AS n, EVIDENCE(ts, v, {keep}) \
             FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) \
             GROUP BY k, window_start, window_end"), &rows, &splits);
        // Brute force: every row in the three 15 s windows around its 5 s bin; per window and
        // key, the count and the first `keep` rows by time (ties by their text).
        let mut groups: std::collections::BTreeMap<(i64, i64), Vec<(i64, String)>> =
            Default::default();
        for r in &rows {
            let bin = r.ts.div_euclid(5 * SEC) * 5 * SEC;
            let v = r.v.map_or("null".to_string(), |v| v.to_string());
            let text = format!(r#"{{"ts":"{}","v":{v}}}"#, saql::time::timestamp_text(r.ts, false));
            for back in [0, 5, 10] {
                groups.entry((r.k, bin - back * SEC)).or_default().push((r.ts, text.clone()));
            }
        }
        let fmt = |t: i64| chrono::DateTime::from_timestamp_nanos(t).naive_utc().format("%Y-%m-%dT%H:%M:%S%.f").to_string();
        let mut want = Vec::new();
        for ((k, ws), mut members) in groups {
            members.sort();
            let shown: Vec<&str> = members.iter().take(keep).map(|(_, t)| t.as_str()).collect();
            want.push(format!(r#"{k}|{}|{}|{}|{{"count":{},"rows":[{}]}}"#,
                fmt(ws), fmt(ws + 15 * SEC), members.len(), members.len(), shown.join(",")));
        }
        want.sort();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn session_matches_brute_force((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = incremental(&rt,
            "SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total \
             FROM SESSION(s, ts, INTERVAL '2' SECOND) GROUP BY k, window_start, window_end",
            &rows, &splits);
        // Brute force: per key, sort by time; a row joins the current session when it is
        // no later than the session's last row plus the gap.
        let gap = 2 * SEC;
        let mut want = Vec::new();
        for k in 0..5 {
            let mut ts: Vec<(i64, Option<i64>)> =
                rows.iter().filter(|r| r.k == k).map(|r| (r.ts, r.v)).collect();
            ts.sort();
            let mut i = 0;
            while i < ts.len() {
                let start = ts[i].0;
                let mut end = start + gap;
                let (mut n, mut sum, mut any) = (0, 0i64, false);
                while i < ts.len() && ts[i].0 <= end {
                    end = end.max(ts[i].0 + gap);
                    n += 1;
                    if let Some(v) = ts[i].1 { sum += v; any = true; }
                    i += 1;
                }
                let fmt = |t: i64| chrono::DateTime::from_timestamp_nanos(t).naive_utc().format("%Y-%m-%dT%H:%M:%S%.f").to_string();
                let total = if any { sum.to_string() } else { "NULL".into() };
                want.push(format!("{k}|{}|{}|{n}|{total}", fmt(start), fmt(end)));
            }
        }
        want.sort();
        prop_assert_eq!(got, want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// LAG and a ROWS frame over raw rows that arrive out of order (within the watermark
    /// delay), against a brute force over the rows sorted by time (ties in arrival order).
    #[test]
    fn history_matches_brute_force((rows, splits) in rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = incremental(&rt,
            "SELECT ts, k, v, LAG(v) OVER (PARTITION BY k ORDER BY ts) AS prev, \
             SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s3 \
             FROM s", &rows, &splits);
        let fmt_ts = |t: i64| chrono::DateTime::from_timestamp_nanos(t).naive_utc().format("%Y-%m-%dT%H:%M:%S%.f").to_string();
        let fmt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_else(|| "NULL".into());
        let mut want = Vec::new();
        for k in 0..5 {
            let mut mine: Vec<&Row> = rows.iter().filter(|r| r.k == k).collect();
            mine.sort_by_key(|r| r.ts); // stable: ties keep arrival order
            for (i, r) in mine.iter().enumerate() {
                let prev = if i > 0 { mine[i - 1].v } else { None };
                let frame: Vec<i64> = mine[i.saturating_sub(2)..=i].iter().filter_map(|r| r.v).collect();
                let s3 = (!frame.is_empty()).then(|| frame.iter().sum::<i64>());
                want.push(format!("{}|{k}|{}|{}|{}", fmt_ts(r.ts), fmt(r.v), fmt(prev), fmt(s3)));
            }
        }
        want.sort();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn late_rows_are_counted_not_aggregated() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows = vec![
        Row {
            ts: BASE,
            k: 1,
            v: Some(1),
        },
        // Moves the watermark to BASE + 25 s: the window [BASE, BASE+10s) closes.
        Row {
            ts: BASE + 30 * SEC,
            k: 1,
            v: Some(2),
        },
        // Behind the watermark and in a closed window: late.
        Row {
            ts: BASE + SEC,
            k: 1,
            v: Some(100),
        },
    ];
    let engine = Engine::open(EngineConfig::default()).unwrap();
    rt.block_on(async {
        engine.execute("CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)").await.unwrap();
        engine.execute("CREATE CONTINUOUS QUERY q AS SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end").await.unwrap();
    });
    for r in &rows {
        engine
            .insert_batch("s", batch(std::slice::from_ref(r)))
            .unwrap();
    }
    engine.finish();
    let shown = rt
        .block_on(engine.execute("SHOW QUERIES"))
        .unwrap()
        .remove(0);
    let StatementResult::Rows { batches, .. } = shown else {
        panic!("rows")
    };
    let late = render(&[batches[0].project(&[5]).unwrap()]);
    assert_eq!(late, vec!["1".to_string()]);
    let results = rt
        .block_on(engine.execute("SELECT total FROM q ORDER BY window_end"))
        .unwrap()
        .remove(0);
    let StatementResult::Rows { batches, .. } = results else {
        panic!("rows")
    };
    // The late 100 is in neither window.
    assert_eq!(render(&batches), vec!["1".to_string(), "2".to_string()]);
}

/// Drives a planned operator chain by hand: batches, then the watermark they imply.
struct Chain {
    ops: Vec<Box<dyn saql::operators::Operator>>,
    out: Vec<RecordBatch>,
}

impl Chain {
    fn new(query: &str) -> Chain {
        let catalog = catalog();
        let stmt = saql::sql::parse_one(&format!("CREATE CONTINUOUS QUERY q AS {query}")).unwrap();
        let saql::sql::Statement::CreateQuery(cq) = stmt else {
            panic!("query")
        };
        let plan = saql::plan::plan_continuous(&cq.query, &cq.clauses, &catalog).unwrap();
        Chain {
            ops: plan.build_operators().unwrap(),
            out: Vec::new(),
        }
    }

    fn push(&mut self, from: usize, mut batches: Vec<RecordBatch>) {
        for op in self.ops.iter_mut().skip(from) {
            let mut next = Vec::new();
            for b in batches {
                next.extend(op.process_batch(b).unwrap());
            }
            batches = next;
        }
        self.out.extend(batches);
    }

    fn feed(&mut self, rows: &[Row]) {
        self.push(0, vec![batch(rows)]);
        let max = rows.iter().map(|r| r.ts).max().unwrap();
        self.watermark(saql::time::Watermark(saql::time::EventTime(max - 5 * SEC)));
    }

    fn watermark(&mut self, wm: saql::time::Watermark) {
        for i in 0..self.ops.len() {
            let emitted = self.ops[i].on_watermark(wm).unwrap();
            self.push(i + 1, emitted);
        }
    }
}

fn catalog() -> saql::plan::Catalog {
    let mut catalog = saql::plan::Catalog::default();
    let saql::sql::Statement::CreateStream(cs) = saql::sql::parse_one(
        "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
    )
    .unwrap() else {
        panic!("stream")
    };
    catalog
        .add_stream(saql::plan::StreamDef::try_new(&cs).unwrap())
        .unwrap();
    catalog
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Snapshot every operator mid-stream, restore into freshly planned operators, continue:
    /// the output equals that of an uninterrupted run.
    #[test]
    fn snapshot_restore_continues_exactly((rows, _splits) in rows_strategy(), cut in 0usize..300) {
        let queries = [
            format!("SELECT k, window_start, window_end, {AGGS} FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end HAVING COUNT(*) > 0"),
            format!("SELECT k, window_end, {AGGS} FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) WHERE v IS NOT NULL GROUP BY k, window_start, window_end"),
            "SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total, COUNT(DISTINCT v) AS d FROM SESSION(s, ts, INTERVAL '2' SECOND) GROUP BY k, window_start, window_end".to_string(),
            "SELECT ts, k, v * 2 AS w FROM s WHERE k > 1".to_string(),
            "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end INVARIANT RANGE (total) PER (k) TRAINING 2 WINDOWS".to_string(),
            "SELECT ts, k, v FROM s INVARIANT SET (v) PER (k) TRAINING INTERVAL '20' SECOND ONLINE".to_string(),
            "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end OUTLIER ZSCORE(1) ON (total)".to_string(),
            "SELECT ts, k, LAG(v, 2) OVER (PARTITION BY k ORDER BY ts) AS p, AVG(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS a FROM s".to_string(),
            format!("SELECT k, window_start, window_end, {AGGS} FROM CUMULATE(s, ts, INTERVAL '5' SECOND, INTERVAL '20' SECOND) GROUP BY k, window_start, window_end"),
            "SELECT k, v > 0 AS pos, window_end, COUNT(*) AS n, SUM(v) AS total FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) GROUP BY window_start, window_end, ROLLUP (k, v > 0)".to_string(),
            "SELECT * FROM (SELECT k, window_end, n, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn FROM (SELECT k, window_start, window_end, COUNT(*) AS n FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end) AS w) AS r WHERE rn <= 2".to_string(),
            "SELECT ts, k, v, window_start, window_end FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) WHERE v > 0".to_string(),
            "SELECT ts, k, v FROM s WHERE v > 0 SUPPRESS FOR INTERVAL '4' SECOND PER (k)".to_string(),
            "SELECT k, window_end, COUNT(*) AS n, EVIDENCE(ts, v, 3) AS e FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) GROUP BY k, window_start, window_end".to_string(),
            "SELECT k, window_start, window_end, EVIDENCE(*, 2) FILTER (WHERE v > 0) AS e FROM SESSION(s, ts, INTERVAL '2' SECOND) GROUP BY k, window_start, window_end".to_string(),
            "SELECT * FROM (SELECT k, window_end, n, DENSE_RANK() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rk FROM (SELECT k, window_start, window_end, COUNT(*) AS n FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end) AS w) AS r WHERE rk <= 2".to_string(),
            "SELECT k, window_end, EVIDENCE(v) AS e FROM CUMULATE(s, ts, INTERVAL '5' SECOND, INTERVAL '20' SECOND) GROUP BY k, window_start, window_end".to_string(),
            "SELECT ts, k, MEDIAN(v) OVER w AS m, MAD(v) OVER w AS d, QUANTILE(v, 0.9) OVER w AS q, EWMA(v, 0.2) OVER w AS e, EWM_STDDEV(v, 0.2) OVER w AS es, ANOMALY_LIKELIHOOD(v, 2) OVER w AS l, FIRST_VALUE(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW) AS f FROM s WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 6 PRECEDING AND CURRENT ROW)".to_string(),
            "SELECT ts, k, EWMA_ZSCORE(v, 0.3) OVER w AS e, HOLT_ZSCORE(v, 0.3, 0.1) OVER w AS h, VARIANCE_RATIO(v, 3) OVER w AS r, SLOPE_CHANGE(v, 3) OVER w AS c, SPIKE_RATE(v, 2, 1) OVER w AS p, DEBOUNCE(v, 10) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 4 PRECEDING AND CURRENT ROW) AS d FROM s WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 9 PRECEDING AND CURRENT ROW)".to_string(),
            "SELECT ts, k, SEASONAL_PERIOD(v, 5) OVER w AS p, SEASONAL_ZSCORE(v, 5) OVER w AS z, SEASONAL_ZSCORE(v, 4, 0.2) OVER w AS y FROM s WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 19 PRECEDING AND CURRENT ROW)".to_string(),
        ];
        let cut = cut.min(rows.len());
        for q in &queries {
            let mut whole = Chain::new(q);
            let mut first = Chain::new(q);
            let mut second = Chain::new(q);
            for chunk in rows.chunks(7) {
                whole.feed(chunk);
            }
            whole.watermark(saql::time::Watermark::END);
            let (before, after) = rows.split_at(cut);
            for chunk in before.chunks(7) {
                first.feed(chunk);
            }
            for (a, b) in first.ops.iter_mut().zip(second.ops.iter_mut()) {
                let snap = a.snapshot().unwrap().encode().unwrap();
                b.restore(&snap).unwrap();
                prop_assert_eq!(a.late_rows(), b.late_rows());
            }
            for chunk in after.chunks(7) {
                second.feed(chunk);
            }
            second.watermark(saql::time::Watermark::END);
            let mut resumed = first.out.clone();
            resumed.extend(second.out.clone());
            prop_assert_eq!(render(&resumed), render(&whole.out), "{}", q);
        }
    }
}

#[test]
fn idle_stream_closes_its_last_window() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::open(EngineConfig::default()).unwrap();
    rt.block_on(async {
        engine.execute("CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (idle_timeout = '2s')").await.unwrap();
        engine.execute("CREATE CONTINUOUS QUERY q AS SELECT k, COUNT(*) AS n FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_end").await.unwrap();
    });
    let start = std::time::Instant::now();
    engine
        .insert_batch(
            "s",
            batch(&[Row {
                ts: BASE + SEC,
                k: 7,
                v: None,
            }]),
        )
        .unwrap();
    let count = || {
        let r = rt
            .block_on(engine.execute("SELECT count(*) FROM q"))
            .unwrap()
            .remove(0);
        let StatementResult::Rows { batches, .. } = r else {
            panic!("rows")
        };
        render(&batches)
    };
    // Not idle long enough: nothing moves.
    engine.tick_at(start + std::time::Duration::from_secs(1));
    assert_eq!(count(), vec!["0".to_string()]);
    // Idle 5 s: watermark = 1 s + 5 s = 6 s < 10 s, still open.
    engine.tick_at(start + std::time::Duration::from_secs(5));
    assert_eq!(count(), vec!["0".to_string()]);
    // Idle 12 s: watermark = 13 s, the window [0 s, 10 s) closes.
    engine.tick_at(start + std::time::Duration::from_secs(12));
    assert_eq!(count(), vec!["1".to_string()]);
}

#[test]
fn queries_folder_declares_the_demo_streams() {
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/queries/00_streams.sql"
    ))
    .unwrap();
    let from_file = saql::parse(&file).unwrap();
    let from_demo = saql::parse(saql::sources::demo::DemoGenerator::streams_ddl()).unwrap();
    assert_eq!(from_file, from_demo);
}
