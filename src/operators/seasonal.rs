//! A seasonal baseline found by detecting the period: `SEASONAL_PERIOD(x, max_period)` is the
//! dominant period (in rows, at most `max_period`) of the frame's values, found from their
//! autocorrelation, and `SEASONAL_ZSCORE(x, max_period)` scores the newest value against the
//! same phase of the cycles before it: how far it is from the median of the values one, two and
//! three periods back, in robust units of how far the earlier values of the frame were from
//! theirs. An optional third argument, the least autocorrelation a period must have (0.3 by
//! default), keeps weak cycles out: `SEASONAL_ZSCORE(x, 350, 0.6)` scores only strongly
//! seasonal series (NULL otherwise). A departure from a daily cycle that stays inside the series' range (demand
//! at the wrong hour, a cycle turned upside down or running faster) scores high; the cycle's own
//! peaks score low.
//!
//! Like the other scores of change ([`super::change`]) both are functions of the frame alone,
//! computed by the history operator over its per-partition ring buffer: the period is detected
//! anew at every row from the frame's values (so it follows a series whose cycle changes, once
//! the frame holds the new one), the state is bounded by the frame and part of every snapshot,
//! and an incremental run equals a recompute over the sorted rows. To keep the detection cheap
//! over long frames, the autocorrelation is first taken over means of blocks of rows (at most 48
//! lags of blocks), and the best block lag is then refined row by row.
//!
//! ```sql
//! SELECT series, timestamp, value,
//!   SEASONAL_PERIOD(value, 350) OVER w AS period,
//!   SEASONAL_ZSCORE(value, 350) OVER w AS surprise
//! FROM metric
//! WINDOW w AS (PARTITION BY series ORDER BY timestamp ROWS BETWEEN 1500 PRECEDING AND CURRENT ROW)
//! ```

use super::robust::{FrameFn, Param};

/// By default a period is accepted when the autocorrelation at it is at least this, and at least
/// this above the lowest autocorrelation at a shorter lag (a real trough between the cycles,
/// which a slowly drifting series does not have).
pub const MIN_CORRELATION: f64 = 0.3;

/// The shortest candidate period whose autocorrelation is at least this share of the best
/// candidate's is the period.
const NEAR_BEST: f64 = 0.9;

/// The coarse search looks at no more than this many lags of blocks.
const COARSE_LAGS: usize = 48;

/// Names of the functions of this module, for the planner.
pub const NAMES: [&str; 2] = ["seasonal_period", "seasonal_zscore"];

/// The function for a call `name(x, params...)`, `None` if `name` is not one of these; an error
/// (to show the user) if its parameters are wrong.
pub fn from_call(name: &str, params: &[f64]) -> Option<Result<FrameFn, String>> {
    let make: fn(usize, Param) -> FrameFn = match name {
        "seasonal_period" => FrameFn::SeasonalPeriod,
        "seasonal_zscore" => FrameFn::SeasonalZscore,
        _ => return None,
    };
    let longest = |p: f64| -> Result<usize, String> {
        if p.fract() == 0.0 && (2.0..=100_000.0).contains(&p) {
            Ok(p as usize)
        } else {
            Err(format!(
                "{name}: the longest period must be a whole number of rows in [2, 100000], not {p}"
            ))
        }
    };
    let strength = |r: f64| -> Result<Param, String> {
        if (0.0..=1.0).contains(&r) {
            Ok(Param::new(r))
        } else {
            Err(format!(
                "{name}: the least correlation must be in [0, 1], not {r}"
            ))
        }
    };
    Some(match params {
        [p] => longest(*p).map(|p| make(p, Param::new(MIN_CORRELATION))),
        [p, r] => longest(*p).and_then(|p| Ok(make(p, strength(*r)?))),
        _ => Err(format!(
            "{name} takes a value, the longest period in rows and optionally the least \
             correlation"
        )),
    })
}

/// How many earlier cycles the seasonal forecast takes the median of.
const CYCLES: usize = 3;

/// A robust scale's denominator never falls below this share of its numerator (as in
/// [`super::change`]): a departure from a perfectly repeated cycle scores large but finite.
const FLOOR: f64 = 1e-9;

/// The autocorrelation of `v` at `lag`, about `v`'s mean `mean`: the mean product of the pairs
/// `lag` apart over `v`'s mean square `power` (each lag averaged over its own pairs, so that a
/// cycle correlates as well at two periods as at one).
fn autocorrelation(v: &[f64], mean: f64, power: f64, lag: usize) -> f64 {
    let sum: f64 = v[lag..]
        .iter()
        .zip(v)
        .map(|(a, b)| (a - mean) * (b - mean))
        .sum();
    sum / (v.len() - lag) as f64 / power
}

/// The mean and the mean square about it.
fn moments(v: &[f64]) -> (f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let power = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
    (mean, power)
}

/// The dominant period of `values` in rows, from 2 to `max_period` and at most a third of the
/// values (three cycles must be seen), or `None` when there is none.
///
/// With `L` that longest period, the values are averaged in blocks of `b = ceil(L / 48)` rows
/// (whole blocks counted from the newest value; the oldest `len % b` values left out) and the
/// blocks' autocorrelation taken at lags 1 to `L / b` (each lag's mean product over the mean
/// square). A lag `j` from 3 to `L / b - 1` (a cycle of 3 blocks at least, so that block means
/// cannot fold a short cycle onto a long one) is a candidate when its correlation is at least
/// its neighbours', at least `least` (0.3 by default), and at least `least` above the lowest at
/// a lag before it. The period in blocks is the shortest candidate within 90% of the highest
/// candidate's correlation: a daily cycle's multiples correlate as well as it does, but a
/// weekly cycle whose days differ correlates better than the daily one. With blocks of one row
/// that is the period; otherwise the rows' own autocorrelation is taken at lags `(j - 1) b + 1`
/// to `(j + 1) b - 1` (within 2 to `L`), and the lag of the highest (the shortest of equals) is
/// the period.
pub fn seasonal_period(values: &[f64], max_period: usize, least: f64) -> Option<usize> {
    let longest = max_period.min(values.len() / 3);
    if longest < 2 {
        return None;
    }
    let block = longest.div_ceil(COARSE_LAGS);
    let blocks: Vec<f64> = values[values.len() % block..]
        .chunks(block)
        .map(|c| c.iter().sum::<f64>() / block as f64)
        .collect();
    let (mean, power) = moments(&blocks);
    if power <= 0.0 {
        return None;
    }
    let lags = longest / block;
    let r: Vec<f64> = (0..=lags)
        .map(|j| autocorrelation(&blocks, mean, power, j))
        .collect();
    let mut candidates: Vec<usize> = Vec::new();
    let mut trough = r[1];
    for j in 3..lags {
        trough = trough.min(r[j - 1]);
        let peak = r[j] >= r[j - 1] && r[j] >= r[j + 1];
        if peak && r[j] >= least && r[j] - trough >= least {
            candidates.push(j);
        }
    }
    let highest = candidates
        .iter()
        .map(|&j| r[j])
        .fold(f64::NEG_INFINITY, f64::max);
    let j = candidates
        .into_iter()
        .find(|&j| r[j] >= NEAR_BEST * highest)?;
    if block == 1 {
        return Some(j);
    }
    let (mean, power) = moments(values);
    let lo = ((j - 1) * block + 1).max(2);
    let hi = ((j + 1) * block - 1).min(longest);
    let mut refined = (lo, f64::NEG_INFINITY);
    for k in lo..=hi {
        let c = autocorrelation(values, mean, power, k);
        if c > refined.1 {
            refined = (k, c);
        }
    }
    Some(refined.0)
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

/// The seasonal forecast of `values[s]` for period `p`: the median of the values 1, 2 and 3
/// periods before it (those in `values`; `s >= p`).
fn forecast(values: &[f64], s: usize, p: usize) -> f64 {
    let mut same_phase: Vec<f64> = (1..=CYCLES)
        .filter(|i| i * p <= s)
        .map(|i| values[s - i * p])
        .collect();
    median(&mut same_phase)
}

/// The newest value's departure from its seasonal forecast ([`forecast`], with the period
/// [`seasonal_period`] finds in the values before it), less the median departure of the values
/// of the last two periods before it (each from its own forecast, within the frame), over the
/// larger of 1.4826 times their median absolute deviation from that median and 1.2533 times
/// their mean absolute deviation from it (each a standard deviation under normal noise; the
/// mean keeps a series that is mostly flat with rare bursts from scoring every burst as
/// infinitely unlikely), floored at a billionth of the departure. `None` when the values
/// before the newest have no period.
pub fn seasonal_zscore(values: &[f64], max_period: usize, least: f64) -> Option<f64> {
    let (&newest, earlier) = values.split_last()?;
    let p = seasonal_period(earlier, max_period, least)?;
    let n = earlier.len();
    let from = p.max(n.saturating_sub(2 * p));
    let mut errors: Vec<f64> = (from..n)
        .map(|s| earlier[s] - forecast(earlier, s, p))
        .collect();
    let centre = median(&mut errors);
    let mut spread: Vec<f64> = errors.iter().map(|e| (e - centre).abs()).collect();
    let mean_spread = spread.iter().sum::<f64>() / spread.len() as f64;
    let scale = (1.4826 * median(&mut spread)).max(1.2533 * mean_spread);
    let departure = newest - forecast(values, n, p) - centre;
    Some(if departure == 0.0 {
        0.0
    } else {
        departure / scale.max(FLOOR * departure.abs())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cycle of `period` rows (amplitude 10) with a little deterministic wobble.
    fn cycle(len: usize, period: f64) -> Vec<f64> {
        (0..len)
            .map(|i| {
                let t = i as f64;
                50.0 + 10.0 * (std::f64::consts::TAU * t / period).sin() + 0.3 * (t * 1.7).sin()
            })
            .collect()
    }

    #[test]
    fn the_period_of_a_cycle_is_found() {
        // Blocks of one row (longest period 30 < 48).
        assert_eq!(seasonal_period(&cycle(120, 12.0), 30, 0.3), Some(12));
        // Blocks of 7 rows (longest period 300), refined row by row.
        assert_eq!(seasonal_period(&cycle(1200, 96.0), 300, 0.3), Some(96));
        // The longest period is capped at a third of the values: a cycle of 96 in 250 values
        // is not seen; a series with no cycle (a ramp) has no period; nor has a constant.
        assert_eq!(seasonal_period(&cycle(250, 96.0), 300, 0.3), None);
        let ramp: Vec<f64> = (0..500).map(|i| i as f64 + (i % 3) as f64).collect();
        assert_eq!(seasonal_period(&ramp, 100, 0.3), None);
        assert_eq!(seasonal_period(&[4.0; 300], 50, 0.3), None);
        // The shortest harmonic wins: a cycle of 24 is also one of 48.
        assert_eq!(seasonal_period(&cycle(600, 24.0), 100, 0.3), Some(24));
        // But a week of 7 cycles of 24 whose last 2 run the other way repeats better than a day
        // (only 4 of 7 days are like the day before: a daily correlation of 0.59).
        let week: Vec<f64> = cycle(1200, 24.0)
            .iter()
            .enumerate()
            .map(|(i, x)| {
                if (i / 24) % 7 >= 5 {
                    50.0 - 0.5 * (x - 50.0)
                } else {
                    *x
                }
            })
            .collect();
        assert_eq!(seasonal_period(&week, 200, 0.3), Some(168));
        assert_eq!(seasonal_period(&week, 100, 0.3), Some(24));
        // A stricter least correlation refuses a weak cycle.
        let weak: Vec<f64> = cycle(600, 24.0)
            .iter()
            .enumerate()
            .map(|(i, x)| x + 25.0 * ((i as f64 * 12.9898).sin() * 43_758.545).fract())
            .collect();
        assert!(seasonal_period(&weak, 100, 0.3).is_some());
        assert_eq!(seasonal_period(&weak, 100, 0.9), None);
    }

    #[test]
    fn a_departure_from_the_cycle_scores_and_the_cycle_does_not() {
        let mut v = cycle(1000, 96.0);
        // The cycle's own peak, where a range detector looks hardest: ordinary.
        let peak = (900..996).max_by(|a, b| v[*a].total_cmp(&v[*b])).unwrap();
        let z = seasonal_zscore(&v[..=peak], 300, 0.3).unwrap();
        assert!(z.abs() < 4.0, "peak {z}");
        // The trough's value at the peak's time: inside the range, far from the cycle.
        let trough = (900..996).min_by(|a, b| v[*a].total_cmp(&v[*b])).unwrap();
        v[peak] = v[trough];
        let z = seasonal_zscore(&v[..=peak], 300, 0.3).unwrap();
        assert!(z < -20.0, "departure {z}");
        // No period, no score.
        assert_eq!(seasonal_zscore(&[1.0; 100], 10, 0.3), None);
        assert_eq!(seasonal_zscore(&[], 10, 0.3), None);
    }

    #[test]
    fn scores_by_hand() {
        // Period 4 repeated exactly: 0 1 0 -1 ...; the earlier errors are all 0, so a departure
        // of 3 from the forecast (the median of 0, 0, 0) is at the floor: 3 / 3e-9.
        let mut v: Vec<f64> = (0..40).map(|i| [0.0, 1.0, 0.0, -1.0][i % 4]).collect();
        assert_eq!(seasonal_period(&v, 10, 0.3), Some(4));
        v.push(3.0);
        let z = seasonal_zscore(&v, 10, 0.3).unwrap();
        assert!((z - 1e9).abs() < 1.0, "{z}");
        v.pop();
        v.push(0.0);
        assert_eq!(seasonal_zscore(&v, 10, 0.3), Some(0.0));
    }
}
