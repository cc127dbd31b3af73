//! The robust and adaptive frame functions of history (`MEDIAN`, `MAD`, `QUANTILE`, `EWMA`,
//! `EWM_STDDEV`, `ANOMALY_LIKELIHOOD`, `FIRST_VALUE` over a `RANGE` frame) computed
//! incrementally by the engine over rows that arrive out of order (within the watermark delay)
//! in random batches, against a brute force over each partition's rows sorted by time, written
//! from the definitions (closed-form exponential weights, a numerically integrated normal
//! distribution) rather than from the operator's code.

use crate::common;

use common::{
    fmt_ts, incremental, jittered_rows, parse_floats as parse, sorted_rows, Row, BASE, SEC,
};
use proptest::prelude::*;

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

fn median(v: &[f64]) -> Option<f64> {
    let s = sorted(v);
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

fn quantile(v: &[f64], p: f64) -> Option<f64> {
    let s = sorted(v);
    if s.is_empty() {
        return None;
    }
    let pos = p * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(s.len() - 1);
    Some(s[lo] * (1.0 - (pos - lo as f64)) + s[hi] * (pos - lo as f64))
}

/// The weights of an exponentially weighted mean started at the first value: the first gets
/// `(1-a)^(n-1)`, value `j > 0` gets `a (1-a)^(n-1-j)`.
fn ew_weights(n: usize, a: f64) -> Vec<f64> {
    (0..n)
        .map(|j| {
            let decay = (1.0 - a).powi((n - 1 - j) as i32);
            if j == 0 {
                decay
            } else {
                a * decay
            }
        })
        .collect()
}

fn ewm(v: &[f64], a: f64) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let w = ew_weights(v.len(), a);
    let mean: f64 = v.iter().zip(&w).map(|(x, w)| x * w).sum();
    let var: f64 = v.iter().zip(&w).map(|(x, w)| w * (x - mean).powi(2)).sum();
    Some((mean, var))
}

/// The standard normal distribution function by Simpson's rule over the density.
fn normal_cdf(z: f64) -> f64 {
    let density = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let (a, b) = (0.0, z.abs());
    let steps = 2000;
    let h = (b - a) / steps as f64;
    let mut sum = density(a) + density(b);
    for i in 1..steps {
        sum += density(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    let half = sum * h / 3.0;
    if z >= 0.0 {
        0.5 + half
    } else {
        0.5 - half
    }
}

fn likelihood(v: &[f64], short: usize) -> Option<f64> {
    let n = v.len();
    if n < short + 2 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
    let recent = v[n - short..].iter().sum::<f64>() / short as f64;
    Some(if sd > 0.0 {
        normal_cdf((recent - mean) / sd)
    } else if recent > mean {
        1.0
    } else {
        0.5
    })
}

const QUERY: &str = "SELECT ts, k, v, \
    MEDIAN(v) OVER w AS med, MAD(v) OVER w AS mad, QUANTILE(v, 0.75) OVER w AS q75, \
    EWMA(v, 0.3) OVER w AS ewma, EWM_STDDEV(v, 0.3) OVER w AS ewsd, \
    ANOMALY_LIKELIHOOD(v, 2) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 7 PRECEDING AND CURRENT ROW) AS lik, \
    FIRST_VALUE(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW) AS season \
    FROM s WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 5 PRECEDING AND 1 PRECEDING)";

/// The expected columns after `ts|k|v` for every row, by brute force.
fn brute_force(rows: &[Row]) -> Vec<(String, Vec<Option<f64>>)> {
    let mut want = Vec::new();
    for k in 0..3 {
        let mut mine: Vec<&Row> = rows.iter().filter(|r| r.k == k).collect();
        mine.sort_by_key(|r| r.ts); // stable: ties keep arrival order
        let values =
            |rs: &[&Row]| -> Vec<f64> { rs.iter().filter_map(|r| r.v).map(|v| v as f64).collect() };
        for (i, r) in mine.iter().enumerate() {
            let w = values(&mine[i.saturating_sub(5)..i]);
            let long = values(&mine[i.saturating_sub(7)..=i]);
            // RANGE: rows with the current row's time are its peers, in its frame too.
            let season = mine
                .iter()
                .filter(|o| o.ts >= r.ts - 3 * SEC && o.ts <= r.ts)
                .find_map(|o| o.v)
                .map(|v| v as f64);
            let mad = median(&w).and_then(|m| {
                let dev: Vec<f64> = w.iter().map(|x| (x - m).abs()).collect();
                median(&dev)
            });
            let key = format!(
                "{}|{k}|{}",
                fmt_ts(r.ts),
                r.v.map_or("NULL".to_string(), |v| v.to_string())
            );
            want.push((
                key,
                vec![
                    median(&w),
                    mad,
                    quantile(&w, 0.75),
                    ewm(&w, 0.3).map(|e| e.0),
                    ewm(&w, 0.3).map(|e| e.1.sqrt()),
                    likelihood(&long, 2),
                    season,
                ],
            ));
        }
    }
    want.sort_by(|a, b| a.0.cmp(&b.0));
    want
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn frame_functions_match_brute_force((rows, splits) in jittered_rows(200, 3)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got: Vec<(String, Vec<Option<f64>>)> =
            incremental(&rt, QUERY, &rows, &splits).iter().map(|l| parse(l)).collect();
        let mut got = got;
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let want = brute_force(&rows);
        prop_assert_eq!(got.len(), want.len());
        for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
            prop_assert_eq!(gk, wk);
            for (col, (g, w)) in gv.iter().zip(wv).enumerate() {
                let same = match (g, w) {
                    (Some(g), Some(w)) => (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                    (None, None) => true,
                    _ => false,
                };
                prop_assert!(same, "{} column {}: engine {:?}, brute force {:?}", gk, col, g, w);
            }
        }
    }
}

/// Rows on whole seconds, so that many share a time (peers), never behind the watermark: row
/// `i` is about 0.7 s after row `i - 1`, up to 4 s early, rounded down to the second.
fn tied_rows_strategy() -> impl Strategy<Value = (Vec<Row>, Vec<usize>)> {
    (1usize..120).prop_flat_map(|n| {
        (
            proptest::collection::vec((0i64..4, 0i64..3, proptest::option::of(-50i64..50)), n),
            proptest::collection::vec(1usize..40, 1..20),
        )
            .prop_map(|(raw, splits)| {
                let rows = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (early, k, v))| {
                        let t = i as i64 * 7 * SEC / 10 - early * SEC;
                        Row {
                            ts: BASE + t.div_euclid(SEC) * SEC,
                            k,
                            v,
                        }
                    })
                    .collect();
                (rows, splits)
            })
    })
}

const PEERS_PARTITIONED: &str = "SELECT ts, k, v, \
    COUNT(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '1' SECOND PRECEDING AND CURRENT ROW) AS n1, \
    SUM(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '1' SECOND PRECEDING AND CURRENT ROW) AS s1, \
    MAX(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS top, \
    AVG(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN CURRENT ROW AND CURRENT ROW) AS same_time, \
    MEDIAN(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND CURRENT ROW) AS med, \
    COUNT(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto \
    FROM s";

const PEERS_ALL: &str = "SELECT ts, k, v, \
    COUNT(v) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '1' SECOND PRECEDING AND CURRENT ROW) AS n1, \
    SUM(v) OVER (ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS total \
    FROM s";

/// Brute force of [`PEERS_PARTITIONED`] (`partitioned`) or [`PEERS_ALL`]: each frame taken
/// from the definition, over the partition's rows sorted by time (ties in arrival order).
fn peers_brute_force(rows: &[Row], partitioned: bool) -> Vec<(String, Vec<Option<f64>>)> {
    let mut want = Vec::new();
    let keys: Vec<Option<i64>> = if partitioned {
        (0..3).map(Some).collect()
    } else {
        vec![None]
    };
    for key in keys {
        let mut mine: Vec<&Row> = rows
            .iter()
            .filter(|r| key.is_none_or(|k| r.k == k))
            .collect();
        mine.sort_by_key(|r| r.ts);
        let values = |from: i64, to: i64| -> Vec<f64> {
            mine.iter()
                .filter(|o| o.ts >= from && o.ts <= to)
                .filter_map(|o| o.v)
                .map(|v| v as f64)
                .collect()
        };
        let sum = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>());
        for (i, r) in mine.iter().enumerate() {
            let last_second = values(r.ts - SEC, r.ts);
            let columns = if partitioned {
                let so_far = values(i64::MIN, r.ts);
                let same = values(r.ts, r.ts);
                let upto = mine[..=i].iter().filter(|o| o.v.is_some()).count();
                vec![
                    Some(last_second.len() as f64),
                    sum(&last_second),
                    so_far.iter().copied().reduce(f64::max),
                    sum(&same).map(|s| s / same.len() as f64),
                    median(&values(r.ts - 2 * SEC, r.ts)),
                    Some(upto as f64),
                ]
            } else {
                vec![Some(last_second.len() as f64), sum(&values(i64::MIN, r.ts))]
            };
            let key = format!(
                "{}|{}|{}",
                fmt_ts(r.ts),
                r.k,
                r.v.map_or("NULL".to_string(), |v| v.to_string())
            );
            want.push((key, columns));
        }
    }
    want
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// RANGE frames over rows that share times: every peer gets the value of the whole time
    /// (with PARTITION BY and without, bounded and UNBOUNDED PRECEDING); ROWS frames do not.
    #[test]
    fn range_frames_treat_same_time_rows_as_peers((rows, splits) in tied_rows_strategy()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for (query, partitioned) in [(PEERS_PARTITIONED, true), (PEERS_ALL, false)] {
            let got = sorted_rows(incremental(&rt, query, &rows, &splits).iter().map(|l| parse(l)).collect());
            let want = sorted_rows(peers_brute_force(&rows, partitioned));
            prop_assert_eq!(got.len(), want.len());
            for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
                prop_assert_eq!(gk, wk);
                for (col, (g, w)) in gv.iter().zip(wv).enumerate() {
                    let same = match (g, w) {
                        (Some(g), Some(w)) => (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                        (None, None) => true,
                        _ => false,
                    };
                    prop_assert!(same, "{} column {}: engine {:?}, brute force {:?}", gk, col, g, w);
                }
            }
        }
    }
}

/// Wrong parameters are refused when the query is created, with the function named.
#[test]
fn bad_parameters_are_refused() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let engine = saql::Engine::open(saql::EngineConfig::default()).unwrap();
    rt.block_on(async {
        engine
            .execute("CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts)")
            .await
            .unwrap();
        for (call, needle) in [
            ("QUANTILE(v, 1.5)", "quantile"),
            ("EWMA(v, v)", "constant"),
            ("ANOMALY_LIKELIHOOD(v, 2.5)", "whole"),
            ("MAD(v, 2)", "one argument"),
        ] {
            let err = engine
                .execute(&format!(
                    "CREATE CONTINUOUS QUERY q AS SELECT ts, {call} OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS x FROM s"
                ))
                .await
                .err()
                .unwrap_or_else(|| panic!("{call} was accepted"))
                .to_string();
            assert!(err.to_lowercase().contains(needle), "{call}: {err}");
        }
        // Over all history the frame would grow without bound.
        let err = engine
            .execute("CREATE CONTINUOUS QUERY q AS SELECT ts, MEDIAN(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS x FROM s")
            .await
            .err()
            .expect("MEDIAN over all history was accepted")
            .to_string();
        assert!(err.contains("bounded frame"), "{err}");
        // As a plain aggregate these are refused, saying where they work.
        let err = engine
            .execute("CREATE CONTINUOUS QUERY q AS SELECT k, window_end, MAD(v) AS m FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY k, window_start, window_end")
            .await
            .err()
            .expect("MAD as a plain aggregate was accepted")
            .to_string();
        assert!(!err.is_empty());
        println!("MAD as a plain aggregate: {err}");
    });
}
