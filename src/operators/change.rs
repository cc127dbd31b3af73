//! Scores of change over a frame of history, for detectors that must see a change of shape and
//! not only a new extreme: the one-step forecast error of exponential smoothing
//! (`EWMA_ZSCORE(x, alpha)`, Holt's level and trend `HOLT_ZSCORE(x, alpha, beta)`), the change
//! of a series' distribution between the last `short` values of the frame and the values
//! before them (`VARIANCE_RATIO(x, short)`, `SLOPE_CHANGE(x, short)`, `SPIKE_RATE(x, short, k)`)
//! and `DEBOUNCE(score, threshold)`, which lets a score alert only when no row of its frame
//! alerted before it (so a debounce is spent only by an alert given, never by a near miss).
//!
//! Like the robust statistics ([`super::robust`]) they are computed by the history operator
//! over its per-partition ring buffer of the frame: the state is bounded by the frame and part
//! of every snapshot. Each is a function of the frame alone (the smoothing starts again at the
//! frame's oldest value), so an incremental run equals a recompute over the sorted rows.
//! `DEBOUNCE` keeps its own earlier answers in that buffer instead of its inputs.
//!
//! ```sql
//! SELECT series, timestamp, value,
//!   HOLT_ZSCORE(value, 0.1, 0.05) OVER w AS surprise,
//!   VARIANCE_RATIO(value, 12) OVER w AS volatility
//! FROM metric
//! WINDOW w AS (PARTITION BY series ORDER BY timestamp ROWS BETWEEN 288 PRECEDING AND CURRENT ROW)
//! ```

use super::robust::{FrameFn, Param};

/// A ratio's or a z-score's denominator never falls below this share of its numerator, so that
/// a change out of a perfectly flat stretch scores large (a billion) but finite.
const FLOOR: f64 = 1e-9;

/// Names of the functions of this module, for the planner.
pub const NAMES: [&str; 6] = [
    "ewma_zscore",
    "holt_zscore",
    "variance_ratio",
    "slope_change",
    "spike_rate",
    "debounce",
];

/// The function for a call `name(x, params...)`, `None` if `name` is not one of these; an error
/// (to show the user) if its parameters are wrong.
pub fn from_call(name: &str, params: &[f64]) -> Option<Result<FrameFn, String>> {
    let in_range = |v: f64, lo: f64, hi: f64, what: &str| -> Result<f64, String> {
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{name}: {what} must be in [{lo}, {hi}], not {v}"))
        }
    };
    let count = |v: f64, lo: f64| -> Result<usize, String> {
        let v = in_range(v, lo, 1e6, "the short-term count")?;
        (v.fract() == 0.0)
            .then_some(v as usize)
            .ok_or_else(|| format!("{name}: the short-term count must be whole, not {v}"))
    };
    let arity = |want: usize, what: &str| -> Result<(), String> {
        if params.len() == want {
            Ok(())
        } else {
            Err(format!("{name} takes a value and {what}"))
        }
    };
    Some(match name {
        "ewma_zscore" => arity(1, "a weight alpha")
            .and_then(|_| in_range(params[0], 0.0, 1.0, "the weight alpha"))
            .map(|a| FrameFn::HoltZscore(Param::new(a), Param::new(0.0))),
        "holt_zscore" => arity(2, "the weights alpha and beta").and_then(|_| {
            let a = in_range(params[0], 0.0, 1.0, "the weight alpha")?;
            let b = in_range(params[1], 0.0, 1.0, "the weight beta")?;
            Ok(FrameFn::HoltZscore(Param::new(a), Param::new(b)))
        }),
        "variance_ratio" => arity(1, "a short-term count")
            .and_then(|_| count(params[0], 2.0))
            .map(FrameFn::VarianceRatio),
        "slope_change" => arity(1, "a short-term count")
            .and_then(|_| count(params[0], 2.0))
            .map(FrameFn::SlopeChange),
        "spike_rate" => arity(2, "a short-term count and a width k").and_then(|_| {
            let short = count(params[0], 1.0)?;
            let k = in_range(params[1], 0.0, 1e6, "the width k")?;
            Ok(FrameFn::SpikeRate(short, Param::new(k)))
        }),
        "debounce" => arity(1, "a threshold").map(|_| FrameFn::Debounce(Param::new(params[0]))),
        _ => return super::seasonal::from_call(name, params),
    })
}

/// `a / b` with `b` floored at [`FLOOR`] of `a`: 0 when both are 0.
fn floored_ratio(a: f64, b: f64) -> f64 {
    if a == 0.0 && b == 0.0 {
        0.0
    } else {
        a / b.max(FLOOR * a.abs())
    }
}

/// The newest value's one-step forecast error under Holt's linear smoothing of the values
/// before it (level from the oldest value, trend from 0; `beta` 0 is simple exponential
/// smoothing), in units of the root of the exponentially weighted (weight `alpha`) mean of the
/// squares of the earlier forecast errors. `None` below 3 values.
pub fn holt_zscore(values: &[f64], alpha: f64, beta: f64) -> Option<f64> {
    let n = values.len();
    if n < 3 {
        return None;
    }
    let (mut level, mut trend, mut square): (f64, f64, f64) = (values[0], 0.0, 0.0);
    for (j, &x) in values.iter().enumerate().skip(1) {
        let forecast = level + trend;
        let error = x - forecast;
        if j == n - 1 {
            return Some(floored_ratio(error, square.sqrt()));
        }
        square = if j == 1 {
            error * error
        } else {
            (1.0 - alpha) * square + alpha * error * error
        };
        level = forecast + alpha * error;
        trend += alpha * beta * error;
    }
    None
}

/// The root mean square of successive differences of `values`.
fn rms_step(values: &[f64]) -> f64 {
    let steps = values.len().saturating_sub(1).max(1);
    let sum: f64 = values.windows(2).map(|w| (w[1] - w[0]).powi(2)).sum();
    (sum / steps as f64).sqrt()
}

/// `ln` of how much larger the steps between the last `short` values are (root mean square of
/// successive differences) than the steps between the values before them (the step into the
/// short stretch counts with those): positive when a series gets noisier, negative when it
/// calms or goes flat, insensitive to its level. At most `ln 1e9` either way. `None` until the
/// earlier values hold two steps.
pub fn variance_ratio(values: &[f64], short: usize) -> Option<f64> {
    let n = values.len();
    if n < short + 2 {
        return None;
    }
    let recent = rms_step(&values[n - short..]);
    let earlier = rms_step(&values[..=n - short]);
    let big = recent.max(earlier);
    if big == 0.0 {
        return Some(0.0);
    }
    Some((recent.max(FLOOR * big) / earlier.max(FLOOR * big)).ln())
}

/// Least-squares slope against position, and the root mean square residual.
fn line(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = values.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        let dx = i as f64 - mean_x;
        sxy += dx * (y - mean_y);
        sxx += dx * dx;
    }
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let ssr: f64 = values
        .iter()
        .enumerate()
        .map(|(i, y)| (y - mean_y - slope * (i as f64 - mean_x)).powi(2))
        .sum();
    (slope, (ssr / n).sqrt())
}

/// How far the last `short` values' trend (least-squares slope) departs from the trend of the
/// values before them, over `short` rows, in units of the earlier values' scatter about their
/// line: how many "noise widths" the new slope has drifted away from the old one. `None` until
/// the earlier values number 3.
pub fn slope_change(values: &[f64], short: usize) -> Option<f64> {
    let n = values.len();
    if n < short + 3 {
        return None;
    }
    let (old_slope, scatter) = line(&values[..n - short]);
    let (new_slope, _) = line(&values[n - short..]);
    Some(floored_ratio(
        (new_slope - old_slope) * short as f64,
        scatter,
    ))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The share of the last `short` values that are spikes less the share of the values before
/// them that are, a spike being a value more than `k` scaled MADs (1.4826 · MAD, a standard
/// deviation under normal noise) from the earlier values' median (any other value when their
/// MAD is 0): from -1 to 1, positive when spikes get denser. `None` until the earlier values
/// number 3.
pub fn spike_rate(values: &[f64], short: usize, k: f64) -> Option<f64> {
    let n = values.len();
    if n < short + 3 {
        return None;
    }
    let (earlier, recent) = values.split_at(n - short);
    let mut sorted = earlier.to_vec();
    let centre = median(&mut sorted);
    let mut dev: Vec<f64> = earlier.iter().map(|x| (x - centre).abs()).collect();
    let width = k * 1.4826 * median(&mut dev);
    let spikes = |v: &[f64]| {
        v.iter().filter(|x| (*x - centre).abs() > width).count() as f64 / v.len() as f64
    };
    Some(spikes(recent) - spikes(earlier))
}

/// `DEBOUNCE`'s answer for a row with score `x`, given its frame's earlier answers (the
/// buffer holds answers, not scores): 1 when `x` reaches `threshold` and no earlier row of the
/// frame alerted, else 0; `None` for a NULL score.
pub fn debounce(
    earlier: impl Iterator<Item = Option<f64>>,
    x: Option<f64>,
    threshold: f64,
) -> Option<f64> {
    let x = x?;
    let alerted = earlier.flatten().any(|a| a == 1.0);
    Some(if x >= threshold && !alerted { 1.0 } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, params: &[f64]) -> Result<FrameFn, String> {
        from_call(name, params).unwrap()
    }

    #[test]
    fn forecast_errors_by_hand() {
        // alpha 0.5, no trend over 0, 2, 2, 5: forecasts 0, 1, 1.5; errors 2, 1, 3.5; the
        // scale from the first two: 4, then 0.5 * 4 + 0.5 * 1 = 2.5; 3.5 / sqrt(2.5).
        let z = holt_zscore(&[0.0, 2.0, 2.0, 5.0], 0.5, 0.0).unwrap();
        assert!((z - 3.5 / 2.5f64.sqrt()).abs() < 1e-12);
        // A steady ramp: Holt learns the trend, so the next step of it surprises less than
        // simple smoothing, which lags behind it.
        let ramp: Vec<f64> = (0..40).map(|i| i as f64 + (i % 2) as f64 * 0.1).collect();
        let holt = holt_zscore(&ramp, 0.5, 0.5).unwrap().abs();
        let ewma = holt_zscore(&ramp, 0.5, 0.0).unwrap().abs();
        assert!(holt < ewma, "holt {holt}, ewma {ewma}");
        // Flat, then a step: large but finite; flat throughout: 0; too few values: None.
        let step = holt_zscore(&[1.0, 1.0, 1.0, 2.0], 0.3, 0.0).unwrap();
        assert!((step - 1e9).abs() < 1.0, "{step}");
        assert_eq!(holt_zscore(&[1.0; 5], 0.3, 0.0), Some(0.0));
        assert_eq!(holt_zscore(&[1.0, 2.0], 0.3, 0.0), None);
    }

    #[test]
    fn distribution_changes_by_hand() {
        // Steps of 1 before, of 2 in the last 3 values (2 steps): ln 2.
        let v = [0.0, 1.0, 0.0, 1.0, 3.0, 1.0];
        assert!((variance_ratio(&v, 3).unwrap() - 2f64.ln()).abs() < 1e-12);
        // A flat stretch in a noisy series: at the floor.
        let flat = [0.0, 1.0, 0.0, 1.0, 1.0, 1.0];
        assert!((variance_ratio(&flat, 3).unwrap() + 1e9f64.ln()).abs() < 1e-9);
        assert_eq!(variance_ratio(&[5.0; 6], 3), Some(0.0));
        assert_eq!(variance_ratio(&v[..4], 3), None);
        // A line of slope 1 with scatter ±1, then slope 3 over 4 values: (3 - 1) * 4 / 1.
        let mut bend: Vec<f64> = (0..8)
            .map(|i| i as f64 + if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        bend.extend([20.0, 23.0, 26.0, 29.0]);
        let (slope, scatter) = line(&bend[..8]);
        let want = (3.0 - slope) * 4.0 / scatter;
        assert!((slope_change(&bend, 4).unwrap() - want).abs() < 1e-9);
        assert!(slope_change(&bend, 4).unwrap() > 2.0);
        assert_eq!(slope_change(&bend[..6], 4), None);
        // Earlier: median 10, MAD 1 (width 2 * 1.4826): one spike of 6 (1/6); recent: 2 of 4.
        let spiky = [10.0, 11.0, 9.0, 10.0, 30.0, 10.0, 10.0, 40.0, -5.0, 10.0];
        let r = spike_rate(&spiky, 4, 2.0).unwrap();
        assert!((r - (0.5 - 1.0 / 6.0)).abs() < 1e-12, "{r}");
    }

    #[test]
    fn debounce_is_spent_only_by_an_alert() {
        let answers = [Some(0.0), None, Some(0.0)];
        assert_eq!(debounce(answers.into_iter(), Some(0.9), 0.5), Some(1.0));
        assert_eq!(debounce(answers.into_iter(), Some(0.4), 0.5), Some(0.0));
        let alerted = [Some(0.0), Some(1.0)];
        assert_eq!(debounce(alerted.into_iter(), Some(0.9), 0.5), Some(0.0));
        assert_eq!(debounce(std::iter::empty(), None, 0.5), None);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(call("ewma_zscore", &[1.5]).is_err());
        assert!(call("ewma_zscore", &[]).is_err());
        assert!(call("holt_zscore", &[0.5]).is_err());
        assert!(call("holt_zscore", &[0.5, -1.0]).is_err());
        assert!(call("variance_ratio", &[1.0]).is_err());
        assert!(call("variance_ratio", &[2.5]).is_err());
        assert!(call("slope_change", &[]).is_err());
        assert!(call("spike_rate", &[3.0, -1.0]).is_err());
        assert!(call("debounce", &[]).is_err());
        assert_eq!(
            call("ewma_zscore", &[0.2]),
            Ok(FrameFn::HoltZscore(Param::new(0.2), Param::new(0.0)))
        );
        assert!(from_call("median", &[]).is_none());
    }
}
