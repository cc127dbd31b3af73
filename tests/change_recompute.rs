//! The change scores of history (`EWMA_ZSCORE`, `HOLT_ZSCORE`, `VARIANCE_RATIO`,
//! `SLOPE_CHANGE`, `SPIKE_RATE`, `DEBOUNCE`) computed incrementally by the engine over rows
//! that arrive out of order (within the watermark delay) in random batches, against a brute
//! force over each partition's rows sorted by time, written from the definitions (closed-form
//! exponential weights, each frame cut out of the partition anew, debouncing replayed over the
//! whole partition) rather than from the operator's code.

mod common;

use common::{
    fmt_ts, incremental, jittered_rows, parse_floats as parse, sorted_rows as sorted, Row,
};
use proptest::prelude::*;

/// `a / b`, `b` no smaller than a billionth of `a`; 0 for 0 / 0.
fn ratio(a: f64, b: f64) -> f64 {
    if a == 0.0 && b == 0.0 {
        0.0
    } else {
        a / b.max(1e-9 * a.abs())
    }
}

/// Holt's one-step forecast errors of `v` (level from `v[0]`, trend from 0), written as the
/// textbook recurrences of level and trend.
fn forecast_errors(v: &[f64], a: f64, b: f64) -> Vec<f64> {
    let (mut level, mut trend) = (v[0], 0.0);
    let mut errors = Vec::new();
    for &x in &v[1..] {
        let forecast = level + trend;
        errors.push(x - forecast);
        let new_level = a * x + (1.0 - a) * forecast;
        trend = b * (new_level - level) + (1.0 - b) * trend;
        level = new_level;
    }
    errors
}

fn holt_z(v: &[f64], a: f64, b: f64) -> Option<f64> {
    if v.len() < 3 {
        return None;
    }
    let e = forecast_errors(v, a, b);
    let (last, earlier) = e.split_last().unwrap();
    // Exponential weights in closed form: the first error `(1-a)^(m-1)`, error j `a (1-a)^(m-1-j)`.
    let m = earlier.len();
    let square: f64 = earlier
        .iter()
        .enumerate()
        .map(|(j, e)| {
            let decay = (1.0 - a).powi((m - 1 - j) as i32);
            e * e * if j == 0 { decay } else { a * decay }
        })
        .sum();
    Some(ratio(*last, square.sqrt()))
}

fn rms_of_steps(v: &[f64]) -> f64 {
    let steps: Vec<f64> = v.windows(2).map(|w| w[1] - w[0]).collect();
    (steps.iter().map(|s| s * s).sum::<f64>() / steps.len() as f64).sqrt()
}

fn variance_ratio(v: &[f64], short: usize) -> Option<f64> {
    let n = v.len();
    if n < short + 2 {
        return None;
    }
    let (recent, earlier) = (
        rms_of_steps(&v[n - short..]),
        rms_of_steps(&v[..=n - short]),
    );
    let big = recent.max(earlier);
    if big == 0.0 {
        return Some(0.0);
    }
    Some((recent.max(1e-9 * big) / earlier.max(1e-9 * big)).ln())
}

fn slope_and_scatter(y: &[f64]) -> (f64, f64) {
    let n = y.len() as f64;
    let mx = (n - 1.0) / 2.0;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, v) in y.iter().enumerate() {
        sxy += (i as f64 - mx) * (v - my);
        sxx += (i as f64 - mx) * (i as f64 - mx);
    }
    let b = sxy / sxx;
    let ssr: f64 = y
        .iter()
        .enumerate()
        .map(|(i, v)| (v - my - b * (i as f64 - mx)).powi(2))
        .sum();
    (b, (ssr / n).sqrt())
}

fn slope_change(v: &[f64], short: usize) -> Option<f64> {
    let n = v.len();
    if n < short + 3 {
        return None;
    }
    let (old, scatter) = slope_and_scatter(&v[..n - short]);
    let (new, _) = slope_and_scatter(&v[n - short..]);
    Some(ratio((new - old) * short as f64, scatter))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn spike_rate(v: &[f64], short: usize, k: f64) -> Option<f64> {
    let n = v.len();
    if n < short + 3 {
        return None;
    }
    let (earlier, recent) = v.split_at(n - short);
    let m = median(earlier);
    let mad = median(&earlier.iter().map(|x| (x - m).abs()).collect::<Vec<_>>());
    let width = k * 1.4826 * mad;
    let share =
        |s: &[f64]| s.iter().filter(|x| (*x - m).abs() > width).count() as f64 / s.len() as f64;
    Some(share(recent) - share(earlier))
}

const QUERY: &str = "SELECT ts, k, v, \
    EWMA_ZSCORE(v, 0.3) OVER w AS ez, HOLT_ZSCORE(v, 0.4, 0.2) OVER w AS hz, \
    VARIANCE_RATIO(v, 3) OVER w AS vr, SLOPE_CHANGE(v, 3) OVER w AS sc, \
    SPIKE_RATE(v, 2, 1.5) OVER w AS sr, \
    DEBOUNCE(v, 20) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS d \
    FROM s WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 8 PRECEDING AND CURRENT ROW)";

/// The expected columns after `ts|k|v` for every row, by brute force.
fn brute_force(rows: &[Row]) -> Vec<(String, Vec<Option<f64>>)> {
    let mut want = Vec::new();
    for k in 0..3 {
        let mut mine: Vec<&Row> = rows.iter().filter(|r| r.k == k).collect();
        mine.sort_by_key(|r| r.ts); // stable: ties keep arrival order
                                    // DEBOUNCE over the whole partition: a row alerts when its value reaches 20 and none
                                    // of the 3 rows before it alerted.
        let mut alerted: Vec<bool> = Vec::new();
        for (i, r) in mine.iter().enumerate() {
            let frame: Vec<f64> = mine[i.saturating_sub(8)..=i]
                .iter()
                .filter_map(|r| r.v)
                .map(|v| v as f64)
                .collect();
            let scored = |f: fn(&[f64]) -> Option<f64>| r.v.and_then(|_| f(&frame));
            let fires =
                r.v.is_some_and(|v| v >= 20) && !alerted[i.saturating_sub(3)..i].iter().any(|a| *a);
            alerted.push(fires);
            let key = format!(
                "{}|{k}|{}",
                fmt_ts(r.ts),
                r.v.map_or("NULL".to_string(), |v| v.to_string())
            );
            want.push((
                key,
                vec![
                    scored(|f| holt_z(f, 0.3, 0.0)),
                    scored(|f| holt_z(f, 0.4, 0.2)),
                    scored(|f| variance_ratio(f, 3)),
                    scored(|f| slope_change(f, 3)),
                    scored(|f| spike_rate(f, 2, 1.5)),
                    r.v.map(|_| if fires { 1.0 } else { 0.0 }),
                ],
            ));
        }
    }
    want
}

/// Equal within rounding; scores at the floor of a flat stretch (a billion) compare by sign.
fn same(g: Option<f64>, w: Option<f64>) -> bool {
    match (g, w) {
        (Some(g), Some(w)) if w.abs() >= 1e6 => g.signum() == w.signum() && g.abs() >= 1e6,
        (Some(g), Some(w)) => (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
        (None, None) => true,
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn change_scores_match_brute_force((rows, splits) in jittered_rows(200, 3)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = sorted(incremental(&rt, QUERY, &rows, &splits).iter().map(|l| parse(l)).collect());
        let want = sorted(brute_force(&rows));
        prop_assert_eq!(got.len(), want.len());
        for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
            prop_assert_eq!(gk, wk);
            for (col, (g, w)) in gv.iter().zip(wv).enumerate() {
                prop_assert!(same(*g, *w), "{} column {}: engine {:?}, brute force {:?}", gk, col, g, w);
            }
        }
    }
}

/// Wrong parameters are refused when the query is created, with SQLSTATE 22023 (or 0A000 for
/// a frame DEBOUNCE cannot keep its answers in), naming the function.
#[test]
fn bad_arguments_are_refused() {
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
        let rows = "ROWS BETWEEN 10 PRECEDING AND CURRENT ROW";
        for (call, frame, code, needle) in [
            ("EWMA_ZSCORE(v, 1.5)", rows, "22023", "alpha"),
            ("HOLT_ZSCORE(v, 0.5)", rows, "22023", "alpha and beta"),
            ("HOLT_ZSCORE(v, 0.5, 2)", rows, "22023", "beta"),
            ("VARIANCE_RATIO(v, 1)", rows, "22023", "short-term count"),
            ("SLOPE_CHANGE(v, 2.5)", rows, "22023", "whole"),
            ("SPIKE_RATE(v, 3, -1)", rows, "22023", "width k"),
            ("DEBOUNCE(v)", rows, "22023", "threshold"),
            ("EWMA_ZSCORE(v, v)", rows, "0A000", "constant"),
            ("DEBOUNCE(v, 1)", "ROWS BETWEEN 10 PRECEDING AND 1 PRECEDING", "0A000", "current row"),
            ("DEBOUNCE(v, 1)", "RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING AND CURRENT ROW", "0A000", "current row"),
            ("VARIANCE_RATIO(v, 3)", "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "0A000", "bounded frame"),
        ] {
            let err = engine
                .execute(&format!(
                    "CREATE CONTINUOUS QUERY q AS SELECT ts, {call} OVER (PARTITION BY k ORDER BY ts {frame}) AS x FROM s"
                ))
                .await
                .err()
                .unwrap_or_else(|| panic!("{call} {frame} was accepted"));
            assert_eq!(err.sqlstate(), code, "{call} {frame}: {err}");
            let text = err.to_string().to_lowercase();
            assert!(text.contains(needle), "{call} {frame}: {text}");
        }
    });
}
