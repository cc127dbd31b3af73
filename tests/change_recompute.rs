//! The change scores of history (`EWMA_ZSCORE`, `HOLT_ZSCORE`, `VARIANCE_RATIO`,
//! `SLOPE_CHANGE`, `SPIKE_RATE`, `DEBOUNCE`, `SEASONAL_PERIOD`, `SEASONAL_ZSCORE`) computed incrementally by the engine over rows
//! that arrive out of order (within the watermark delay) in random batches, against a brute
//! force over each partition's rows sorted by time, written from the definitions (closed-form
//! exponential weights, each frame cut out of the partition anew, debouncing replayed over the
//! whole partition) rather than from the operator's code.

use crate::common;

use common::{
    fmt_ts, incremental, jittered_rows, parse_floats as parse, sorted_rows as sorted, Row, BASE,
    SEC,
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

/// The autocorrelation of `v` at `lag`: the mean product of deviations from the mean of the
/// pairs `lag` apart, over the mean square deviation.
fn autocorrelation(v: &[f64], lag: usize) -> f64 {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let power: f64 = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    let pairs = (lag..v.len()).map(|i| (v[i] - m) * (v[i - lag] - m));
    pairs.sum::<f64>() / (v.len() - lag) as f64 / power
}

/// `SEASONAL_PERIOD`'s definition: the longest period `L` is `max_period` or a third of the
/// values; blocks of `ceil(L / 48)` values counted from the newest; among the block lags from 3
/// to one short of `L / block` whose autocorrelation is not below either neighbour's, reaches
/// `least` and rises `least` above every shorter lag's, the shortest within 90% of the highest;
/// then the row lag of highest autocorrelation within a block of it either way.
fn seasonal_period(v: &[f64], max_period: usize, least: f64) -> Option<usize> {
    let longest = max_period.min(v.len() / 3);
    if longest < 2 {
        return None;
    }
    let b = longest.div_ceil(48);
    let blocks: Vec<f64> = v[v.len() % b..]
        .chunks(b)
        .map(|c| c.iter().sum::<f64>() / b as f64)
        .collect();
    if blocks.iter().all(|x| *x == blocks[0]) {
        return None;
    }
    let lags = longest / b;
    let r: Vec<f64> = (0..=lags).map(|j| autocorrelation(&blocks, j)).collect();
    let candidates: Vec<usize> = (3..lags)
        .filter(|&j| {
            let lowest_before = r[1..j].iter().copied().fold(f64::INFINITY, f64::min);
            r[j] >= r[j - 1] && r[j] >= r[j + 1] && r[j] >= least && r[j] - lowest_before >= least
        })
        .collect();
    let highest = candidates
        .iter()
        .map(|&j| r[j])
        .fold(f64::NEG_INFINITY, f64::max);
    let best = candidates.into_iter().find(|&j| r[j] >= 0.9 * highest);
    let j = best?;
    if b == 1 {
        return Some(j);
    }
    let row_lags = ((j - 1) * b + 1).max(2)..=((j + 1) * b - 1).min(longest);
    row_lags.reduce(|a, k| {
        if autocorrelation(v, k) > autocorrelation(v, a) {
            k
        } else {
            a
        }
    })
}

/// `SEASONAL_ZSCORE`'s definition: with `p` the period of the values before the newest, each
/// value's error from the median of the values 1, 2 and 3 periods before it (those there); the
/// newest's error less the median error of the last `2p` values before it (but the first
/// `p`), over 1.4826 times their median absolute deviation from it or 1.2533 times their mean
/// absolute deviation from it, whichever is larger.
fn seasonal_zscore(v: &[f64], max_period: usize, least: f64) -> Option<f64> {
    let n = v.len() - 1;
    let p = seasonal_period(&v[..n], max_period, least)?;
    let error = |s: usize| {
        let same_phase: Vec<f64> = (1..=3)
            .filter(|i| i * p <= s)
            .map(|i| v[s - i * p])
            .collect();
        v[s] - median(&same_phase)
    };
    let earlier: Vec<f64> = (p.max(n.saturating_sub(2 * p))..n).map(error).collect();
    let centre = median(&earlier);
    let deviations: Vec<f64> = earlier.iter().map(|e| (e - centre).abs()).collect();
    let mean_deviation = deviations.iter().sum::<f64>() / deviations.len() as f64;
    let scale = (1.4826 * median(&deviations)).max(1.2533 * mean_deviation);
    Some(ratio(error(n) - centre, scale))
}

const QUERY: &str = "SELECT ts, k, v, \
    EWMA_ZSCORE(v, 0.3) OVER w AS ez, HOLT_ZSCORE(v, 0.4, 0.2) OVER w AS hz, \
    VARIANCE_RATIO(v, 3) OVER w AS vr, SLOPE_CHANGE(v, 3) OVER w AS sc, \
    SPIKE_RATE(v, 2, 1.5) OVER w AS sr, \
    SEASONAL_PERIOD(v, 7) OVER long AS sp, SEASONAL_ZSCORE(v, 7) OVER long AS sz, \
    DEBOUNCE(v, 20) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS d \
    FROM s WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 8 PRECEDING AND CURRENT ROW), \
    long AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 30 PRECEDING AND CURRENT ROW)";

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
            let long: Vec<f64> = mine[i.saturating_sub(30)..=i]
                .iter()
                .filter_map(|r| r.v)
                .map(|v| v as f64)
                .collect();
            let period = seasonal_period(&long, 7, 0.3).map(|p| p as f64);
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
                    period,
                    r.v.and_then(|_| seasonal_zscore(&long, 7, 0.3)),
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

/// One partition's cycle of `period` rows (amplitude 20) with noise of up to `noise` and now
/// and then a NULL, 150 to 450 rows, and the sizes of the batches to split them into.
fn cyclic_rows() -> impl Strategy<Value = (Vec<Row>, Vec<usize>, usize)> {
    (
        150usize..450,
        3usize..60,
        0i64..8,
        proptest::collection::vec(any::<u8>(), 450),
        proptest::collection::vec(1usize..60, 1..10),
    )
        .prop_map(|(n, period, noise, draws, splits)| {
            let rows = (0..n)
                .map(|i| {
                    let phase = std::f64::consts::TAU * i as f64 / period as f64;
                    let wobble = draws[i] as i64 % (2 * noise + 1) - noise;
                    Row {
                        ts: BASE + i as i64 * SEC,
                        k: 0,
                        v: (draws[i] % 50 != 7)
                            .then(|| (20.0 * phase.sin()).round() as i64 + wobble),
                    }
                })
                .collect();
            (rows, splits, period)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Over frames of up to 300 rows and periods up to 100 the period search works on blocks of
    /// 2 and 3 rows and refines row by row: still the definition, row for row.
    #[test]
    fn seasonal_scores_of_long_cycles_match_brute_force((rows, splits, period) in cyclic_rows()) {
        let query = "SELECT ts, k, v, SEASONAL_PERIOD(v, 100) OVER w AS p, \
            SEASONAL_ZSCORE(v, 100, 0.5) OVER w AS z FROM s \
            WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 299 PRECEDING AND CURRENT ROW)";
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = sorted(incremental(&rt, query, &rows, &splits).iter().map(|l| parse(l)).collect());
        let want: Vec<(String, Vec<Option<f64>>)> = (0..rows.len())
            .map(|i| {
                let r = &rows[i];
                let frame: Vec<f64> = rows[i.saturating_sub(299)..=i]
                    .iter()
                    .filter_map(|r| r.v.map(|v| v as f64))
                    .collect();
                let key = format!("{}|0|{}", fmt_ts(r.ts), r.v.map_or("NULL".to_string(), |v| v.to_string()));
                (key, vec![
                    seasonal_period(&frame, 100, 0.3).map(|p| p as f64),
                    r.v.and_then(|_| seasonal_zscore(&frame, 100, 0.5)),
                ])
            })
            .collect();
        let want = sorted(want);
        prop_assert_eq!(got.len(), want.len());
        let mut found = 0;
        for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
            prop_assert_eq!(gk, wk);
            for (col, (g, w)) in gv.iter().zip(wv).enumerate() {
                prop_assert!(same(*g, *w), "{} column {}: engine {:?}, brute force {:?}", gk, col, g, w);
            }
            found += usize::from(gv[0].is_some());
        }
        // A cycle is there to be found once four of it are seen.
        if rows.len() >= 4 * period {
            prop_assert!(found > 0, "no period of {} found in {} rows", period, rows.len());
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
            ("SEASONAL_ZSCORE(v, 1)", rows, "22023", "longest period"),
            ("SEASONAL_PERIOD(v, 12.5)", rows, "22023", "whole number"),
            ("SEASONAL_ZSCORE(v)", rows, "22023", "longest period"),
            ("SEASONAL_ZSCORE(v, 24, 1.5)", rows, "22023", "least correlation"),
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
