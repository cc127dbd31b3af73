//! Robust and adaptive statistics over a frame of history, for anomaly scores that one
//! outlier cannot drag and that follow a drifting series: `MEDIAN`, `MAD` (median absolute
//! deviation), `QUANTILE(x, p)`, the exponentially weighted mean and standard deviation
//! `EWMA(x, alpha)` / `EWM_STDDEV(x, alpha)`, `ANOMALY_LIKELIHOOD(score, short)` (how unusual
//! the mean of the last `short` scores is against the frame's scores, as Numenta's detector
//! turns its raw score into a likelihood) and `FIRST_VALUE` (over a `RANGE` frame of a day or a
//! week: the seasonal baseline, the value the same time a period ago). Each is computed by the
//! history operator ([`super::history`]) over its per-partition ring buffer of the frame, so
//! the state is the frame's values, bounded by the frame and part of every snapshot.
//!
//! ```sql
//! SELECT series, timestamp, value,
//!   MEDIAN(value) OVER w AS med, MAD(value) OVER w AS mad,
//!   QUANTILE(value, 0.99) OVER w AS p99, EWMA(value, 0.05) OVER w AS trend
//! FROM metric
//! WINDOW w AS (PARTITION BY series ORDER BY timestamp ROWS BETWEEN 288 PRECEDING AND 1 PRECEDING)
//! ```

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use serde::{Deserialize, Serialize};

/// A constant parameter of a frame function, kept as the bits of an `f64` so that the function
/// compares and hashes exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Param(u64);

impl Param {
    /// The parameter `v`.
    pub fn new(v: f64) -> Param {
        Param(v.to_bits())
    }

    /// Its value.
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

/// A statistic of the values of a frame (oldest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameFn {
    /// The middle value (the mean of the two middle ones for an even count).
    Median,
    /// The median of the absolute deviations from the median (unscaled: multiply by 1.4826 for
    /// a standard deviation's estimate under normal noise).
    Mad,
    /// The `p` quantile, `0 <= p <= 1`, interpolated linearly between the values around it
    /// (as `percentile_cont`).
    Quantile(Param),
    /// Exponentially weighted mean, oldest value first, weight `alpha` on each new value.
    Ewma(Param),
    /// Exponentially weighted standard deviation with the same weights.
    EwmStddev(Param),
    /// `Φ((mean of the last short values − mean) / standard deviation)` over the frame: near 1
    /// when the recent scores are unusually high for this partition, 0.5 when typical.
    Likelihood(usize),
    /// The oldest value of the frame.
    First,
    /// `HOLT_ZSCORE(x, alpha, beta)` (and `EWMA_ZSCORE(x, alpha)`, beta 0): the newest value's
    /// forecast error ([`super::change::holt_zscore`]).
    HoltZscore(Param, Param),
    /// `VARIANCE_RATIO(x, short)` ([`super::change::variance_ratio`]).
    VarianceRatio(usize),
    /// `SLOPE_CHANGE(x, short)` ([`super::change::slope_change`]).
    SlopeChange(usize),
    /// `SPIKE_RATE(x, short, k)` ([`super::change::spike_rate`]).
    SpikeRate(usize, Param),
    /// `DEBOUNCE(score, threshold)`: 1 when the score reaches the threshold and no earlier row
    /// of the frame alerted ([`super::change::debounce`]); its frame holds its own answers.
    Debounce(Param),
    /// `SEASONAL_PERIOD(x, max_period[, least_correlation])`: the dominant period of the
    /// frame's values ([`super::seasonal::seasonal_period`]).
    SeasonalPeriod(usize, Param),
    /// `SEASONAL_ZSCORE(x, max_period[, least_correlation])`: the newest value against the same
    /// phase of earlier cycles ([`super::seasonal::seasonal_zscore`]).
    SeasonalZscore(usize, Param),
}

/// Functions registered for planning (`MEDIAN` and `FIRST_VALUE` are DataFusion's own), with
/// those of [`super::change`].
const REGISTERED: [&str; 5] = [
    "mad",
    "quantile",
    "ewma",
    "ewm_stddev",
    "anomaly_likelihood",
];

impl FrameFn {
    /// The function for a call `name(x, params...)`, `None` if `name` is not one of these; an
    /// error (to show the user) if its parameters are wrong.
    pub fn from_call(name: &str, params: &[f64]) -> Option<Result<FrameFn, String>> {
        let name = name.to_ascii_lowercase();
        let one = |lo: f64, hi: f64, what: &str| -> Result<f64, String> {
            match params {
                [v] if (lo..=hi).contains(v) => Ok(*v),
                [v] => Err(format!("{name}: {what} must be in [{lo}, {hi}], not {v}")),
                _ => Err(format!("{name} takes a value and {what}")),
            }
        };
        let none = |f: FrameFn| -> Result<FrameFn, String> {
            if params.is_empty() {
                Ok(f)
            } else {
                Err(format!("{name} takes one argument"))
            }
        };
        Some(match name.as_str() {
            "median" => none(FrameFn::Median),
            "mad" => none(FrameFn::Mad),
            "first_value" => none(FrameFn::First),
            "quantile" => one(0.0, 1.0, "a quantile p").map(|p| FrameFn::Quantile(Param::new(p))),
            "ewma" => one(0.0, 1.0, "a weight alpha").map(|a| FrameFn::Ewma(Param::new(a))),
            "ewm_stddev" => {
                one(0.0, 1.0, "a weight alpha").map(|a| FrameFn::EwmStddev(Param::new(a)))
            }
            "anomaly_likelihood" => one(1.0, 1e6, "a short-term count")
                .and_then(|n| {
                    (n.fract() == 0.0)
                        .then_some(n as usize)
                        .ok_or_else(|| format!("{name}: the short-term count must be whole"))
                })
                .map(FrameFn::Likelihood),
            other => return super::change::from_call(other, params),
        })
    }

    /// The statistic of `values` (oldest first), `None` when there are too few.
    pub fn compute(self, values: &[f64]) -> Option<f64> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        match self {
            FrameFn::Median => Some(median(&mut values.to_vec())),
            FrameFn::Mad => {
                let mut v = values.to_vec();
                let m = median(&mut v);
                v.iter_mut().for_each(|x| *x = (*x - m).abs());
                Some(median(&mut v))
            }
            FrameFn::Quantile(p) => {
                let mut v = values.to_vec();
                v.sort_by(f64::total_cmp);
                let pos = p.get() * (n - 1) as f64;
                let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
                Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
            }
            FrameFn::Ewma(alpha) => Some(ewm(values, alpha.get()).0),
            FrameFn::EwmStddev(alpha) => Some(ewm(values, alpha.get()).1.sqrt()),
            FrameFn::Likelihood(short) => {
                if n < short + 2 {
                    return None;
                }
                let mean = values.iter().sum::<f64>() / n as f64;
                let var = values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
                let recent = values[n - short..].iter().sum::<f64>() / short as f64;
                let sd = var.sqrt();
                Some(if sd > 0.0 {
                    normal_cdf((recent - mean) / sd)
                } else if recent > mean {
                    1.0
                } else {
                    0.5
                })
            }
            FrameFn::First => values.first().copied(),
            FrameFn::HoltZscore(a, b) => super::change::holt_zscore(values, a.get(), b.get()),
            FrameFn::VarianceRatio(short) => super::change::variance_ratio(values, short),
            FrameFn::SlopeChange(short) => super::change::slope_change(values, short),
            FrameFn::SpikeRate(short, k) => super::change::spike_rate(values, short, k.get()),
            FrameFn::SeasonalPeriod(longest, least) => {
                super::seasonal::seasonal_period(values, longest, least.get()).map(|p| p as f64)
            }
            FrameFn::SeasonalZscore(longest, least) => {
                super::seasonal::seasonal_zscore(values, longest, least.get())
            }
            // Computed from its own earlier answers by the history operator.
            FrameFn::Debounce(_) => None,
        }
    }

    /// The answer of a function that feeds back, for a row with value `x` after the frame's
    /// `earlier` answers (newest first); `None` for the others.
    pub fn answer(self, earlier: impl Iterator<Item = Option<f64>>, x: Option<f64>) -> Option<f64> {
        match self {
            FrameFn::Debounce(threshold) => super::change::debounce(earlier, x, threshold.get()),
            _ => None,
        }
    }

    /// Whether the function's frame holds its own earlier answers rather than its inputs.
    pub fn feeds_back(self) -> bool {
        matches!(self, FrameFn::Debounce(_))
    }

    /// Whether the function scores the newest value of its frame (so a NULL current value,
    /// in a frame ending at the current row, gives NULL rather than a score of an older one).
    pub fn scores_newest(self) -> bool {
        matches!(
            self,
            FrameFn::HoltZscore(..)
                | FrameFn::VarianceRatio(_)
                | FrameFn::SlopeChange(_)
                | FrameFn::SpikeRate(..)
                | FrameFn::SeasonalZscore(..)
        )
    }
}

/// The median of `v` (reordered in place).
fn median(v: &mut [f64]) -> f64 {
    let n = v.len();
    let (_, upper, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return upper;
    }
    let lower = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lower + upper) / 2.0
}

/// Exponentially weighted mean and variance of `values`, oldest first (West's recurrence).
fn ewm(values: &[f64], alpha: f64) -> (f64, f64) {
    let mut mean = values[0];
    let mut var = 0.0;
    for &x in &values[1..] {
        let diff = x - mean;
        let incr = alpha * diff;
        mean += incr;
        var = (1.0 - alpha) * (var + diff * incr);
    }
    (mean, var)
}

/// The standard normal distribution function, from the complementary error function
/// (W. J. Cody's rational approximation as given by Numerical Recipes' `erfcc`, relative
/// error below 1.2e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = -z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    0.5 * erfc
}

/// A frame function as DataFusion sees it while planning: a name, any arguments, a `DOUBLE`
/// result. It is only computed over history (`OVER (...)`); as a plain aggregate it is refused.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FrameUdaf {
    name: &'static str,
    signature: Signature,
}

impl AggregateUDFImpl for FrameUdaf {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(
        &self,
        _args: AccumulatorArgs,
    ) -> datafusion::error::Result<Box<dyn Accumulator>> {
        Err(datafusion::error::DataFusionError::NotImplemented(format!(
            "{} is computed over history only: use it with OVER (PARTITION BY ... ORDER BY time \
             ROWS|RANGE BETWEEN ... PRECEDING AND ...)",
            self.name
        )))
    }
}

/// The functions to register with the planner.
pub fn udafs() -> Vec<AggregateUDF> {
    REGISTERED
        .iter()
        .chain(super::change::NAMES.iter())
        .chain(super::seasonal::NAMES.iter())
        .map(|name| {
            AggregateUDF::new_from_impl(FrameUdaf {
                name,
                signature: Signature::variadic_any(Volatility::Immutable),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, params: &[f64]) -> FrameFn {
        FrameFn::from_call(name, params).unwrap().unwrap()
    }

    #[test]
    fn robust_statistics_by_hand() {
        let v = [3.0, 1.0, 100.0, 2.0, 4.0];
        assert_eq!(f("median", &[]).compute(&v), Some(3.0));
        assert_eq!(f("median", &[]).compute(&v[..4]), Some(2.5));
        // Deviations from 3: 0, 2, 97, 1, 1 -> median 1.
        assert_eq!(f("mad", &[]).compute(&v), Some(1.0));
        // Sorted 1 2 3 4 100: p = 0.5 at index 2; p = 0.9 at 3.6, between 4 and 100.
        assert_eq!(f("quantile", &[0.5]).compute(&v), Some(3.0));
        assert!((f("quantile", &[0.9]).compute(&v).unwrap() - 61.6).abs() < 1e-9);
        assert_eq!(f("quantile", &[0.0]).compute(&v), Some(1.0));
        assert_eq!(f("quantile", &[1.0]).compute(&v), Some(100.0));
        assert_eq!(f("first_value", &[]).compute(&v), Some(3.0));
        assert_eq!(f("median", &[]).compute(&[]), None);
    }

    #[test]
    fn exponential_weights_by_hand() {
        // alpha 0.5 over 0, 4: mean 2, variance 0.5 * (0 + 4 * 2) = 4.
        assert_eq!(f("ewma", &[0.5]).compute(&[0.0, 4.0]), Some(2.0));
        assert_eq!(f("ewm_stddev", &[0.5]).compute(&[0.0, 4.0]), Some(2.0));
        // alpha 1 follows the last value; a constant has no spread.
        assert_eq!(f("ewma", &[1.0]).compute(&[5.0, 7.0, 9.0]), Some(9.0));
        assert_eq!(f("ewm_stddev", &[0.3]).compute(&[5.0; 4]), Some(0.0));
    }

    #[test]
    fn likelihood_is_high_only_for_unusual_recent_scores() {
        let mut scores = vec![0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2];
        let l = f("anomaly_likelihood", &[2.0]);
        // The last two average 0.15, the mean: Φ(0) = 0.5.
        assert!((l.compute(&scores).unwrap() - 0.5).abs() < 1e-6);
        // Two high ones: mean 0.3, standard deviation sqrt(0.092), z = 0.6 / 0.3033 = 1.978,
        // Φ(z) = 0.976.
        scores.extend([0.9, 0.9]);
        assert!((l.compute(&scores).unwrap() - 0.976).abs() < 1e-3);
        // Too few scores for a short and a long term.
        assert_eq!(l.compute(&[0.1, 0.2, 0.3]), None);
        assert_eq!(l.compute(&[0.1; 5]), Some(0.5));
    }

    #[test]
    fn the_normal_distribution_function() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.0) - 0.841_344_746).abs() < 1e-6);
        assert!((normal_cdf(-1.96) - 0.024_997_895).abs() < 1e-6);
        assert!((normal_cdf(3.0) - 0.998_650_102).abs() < 1e-6);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(FrameFn::from_call("quantile", &[1.5]).unwrap().is_err());
        assert!(FrameFn::from_call("quantile", &[]).unwrap().is_err());
        assert!(FrameFn::from_call("ewma", &[-0.1]).unwrap().is_err());
        assert!(FrameFn::from_call("anomaly_likelihood", &[2.5])
            .unwrap()
            .is_err());
        assert!(FrameFn::from_call("median", &[1.0]).unwrap().is_err());
        assert!(FrameFn::from_call("sum", &[]).is_none());
    }
}
