//! The robust and adaptive frame functions of history (`MEDIAN`, `MAD`, `QUANTILE`, `EWMA`,
//! `EWM_STDDEV`, `ANOMALY_LIKELIHOOD`, `FIRST_VALUE` over a `RANGE` frame) computed
//! incrementally by the engine over rows that arrive out of order (within the watermark delay)
//! in random batches, against a brute force over each partition's rows sorted by time, written
//! from the definitions (closed-form exponential weights, a numerically integrated normal
//! distribution) rather than from the operator's code.

mod common;

use common::{fmt_ts, incremental, Row, BASE, SEC};
use proptest::prelude::*;

fn rows_strategy() -> impl Strategy<Value = (Vec<Row>, Vec<usize>)> {
    (1usize..200).prop_flat_map(|n| {
        (
            proptest::collection::vec(
                (0i64..4 * SEC, 0i64..3, proptest::option::of(-50i64..50)),
                n,
            ),
            proptest::collection::vec(1usize..40, 1..20),
        )
            .prop_map(|(raw, splits)| {
                let rows = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (jitter, k, v))| Row {
                        ts: BASE + i as i64 * 7 * SEC / 10 - jitter,
                        k,
                        v,
                    })
                    .collect();
                (rows, splits)
            })
    })
}

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
            let season = mine[..=i]
                .iter()
                .filter(|o| o.ts >= r.ts - 3 * SEC)
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

fn parse(line: &str) -> (String, Vec<Option<f64>>) {
    let fields: Vec<&str> = line.split('|').collect();
    let values = fields[3..]
        .iter()
        .map(|f| (*f != "NULL").then(|| f.parse::<f64>().unwrap()))
        .collect();
    (fields[..3].join("|"), values)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn frame_functions_match_brute_force((rows, splits) in rows_strategy()) {
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
