//! The NAB detector (`eval/nab/detector.sql`, run as it is through the engine) on labelled
//! synthetic series of our own, generated from fixed seeds: a daily-like cycle with noise,
//! clean or noisy, short or long, in which one kind of change starts at 70% of the series
//! (level shift up or down, variance change, frequency change, flat stretch, spikes getting
//! denser, a new trend, a seasonal break) or nothing changes. It is the guard against tuning
//! the detector to NAB's 24 series: what it catches here it catches by design.
//!
//! A row alerts when its score reaches 0.52 (the detector's `DEBOUNCE` threshold). The first
//! 15% of each series is warm-up (as NAB's probationary period) and not judged; a change is
//! *detected* when an alert falls in its window (the 10% of the series from its onset), and an
//! alert before the onset (anywhere after warm-up in a series without a change) is *false*.
//! Alerts after the window are not judged: the series is in its new regime by then.
//!
//! ```sh
//! cargo test --test all synthetic_detect -- --nocapture    # prints the table per kind
//! ```

use crate::eval_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use eval_common::{floats, nanos, texts, Replay};

/// A seeded generator (SplitMix64) with normal draws (Box-Muller).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// What changes at the onset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    None,
    LevelUp,
    LevelDown,
    Variance,
    Frequency,
    Flat,
    SpikeDensity,
    Trend,
    SeasonalBreak,
}

const KINDS: [Kind; 9] = [
    Kind::None,
    Kind::LevelUp,
    Kind::LevelDown,
    Kind::Variance,
    Kind::Frequency,
    Kind::Flat,
    Kind::SpikeDensity,
    Kind::Trend,
    Kind::SeasonalBreak,
];

/// Rows of a short and a long series (at 5 minutes: 3.5 and 14 days).
const LENGTHS: [usize; 2] = [1000, 4000];
const SEEDS: [u64; 2] = [1, 2];
const PERIOD: f64 = 96.0;
const STEP: i64 = 300 * 1_000_000_000;
const START: i64 = 1_700_000_000 * 1_000_000_000;
/// A score at or above this is an alert (the detector's DEBOUNCE threshold).
const ALERT: f64 = 0.52;

/// One labelled series: its values and the window of its change (rows, both ends included).
struct Synthetic {
    name: String,
    kind: Kind,
    noisy: bool,
    values: Vec<f64>,
    window: Option<(usize, usize)>,
}

/// `len` rows of a cycle of 96 rows (amplitude 10 about 50) plus normal noise (sd 0.5 clean,
/// 2 noisy). At 70% of the series the change starts: the level moves by 15 (1.5 amplitudes),
/// the noise grows 5 times, the cycle runs 3 times faster, the series sticks at its value, spikes
/// of 8 sd come every 8 rows instead of every 250 (the series of this kind has them from the
/// start), a slope of 0.15 a row sets in, or the cycle turns upside down.
fn generate(kind: Kind, noisy: bool, len: usize, seed: u64) -> Synthetic {
    let mut rng = Rng(seed.wrapping_mul(1_000_003) ^ len as u64 ^ ((kind as u64) << 40));
    let sd = if noisy { 2.0 } else { 0.5 };
    let onset = len * 7 / 10;
    let tau = 2.0 * std::f64::consts::PI;
    let mut flat = None;
    let values = (0..len)
        .map(|i| {
            let after = i >= onset && kind != Kind::None;
            let t = i as f64;
            let since = (i as f64 - onset as f64).max(0.0);
            let cycle = match kind {
                Kind::Frequency if after => tau * (onset as f64 + 3.0 * since) / PERIOD,
                Kind::SeasonalBreak if after => tau * t / PERIOD + std::f64::consts::PI,
                _ => tau * t / PERIOD,
            };
            let noise = if after && kind == Kind::Variance {
                5.0 * sd
            } else {
                sd
            };
            let mut x = 50.0 + 10.0 * cycle.sin() + noise * rng.normal();
            let spikes = match kind {
                Kind::SpikeDensity if after => 1.0 / 8.0,
                Kind::SpikeDensity => 1.0 / 250.0,
                _ => 0.0,
            };
            if rng.uniform() < spikes {
                x += 8.0 * sd;
            }
            match kind {
                Kind::LevelUp if after => x + 15.0,
                Kind::LevelDown if after => x - 15.0,
                Kind::Trend if after => x + 0.15 * since,
                Kind::Flat if after => *flat.get_or_insert(x),
                _ => x,
            }
        })
        .collect();
    Synthetic {
        name: format!(
            "{kind:?}_{}_{len}_{seed}",
            if noisy { "noisy" } else { "clean" }
        ),
        kind,
        noisy,
        values,
        window: (kind != Kind::None).then_some((onset, onset + len / 10)),
    }
}

fn suite() -> Vec<Synthetic> {
    let mut out = Vec::new();
    for kind in KINDS {
        for noisy in [false, true] {
            for len in LENGTHS {
                for seed in SEEDS {
                    out.push(generate(kind, noisy, len, seed));
                }
            }
        }
    }
    out
}

/// Every series through the detector as one stream, each its own partition, merged in time
/// order; the score of each row by series, in row order.
fn scores(suite: &[Synthetic]) -> BTreeMap<String, Vec<f64>> {
    let nab = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/nab");
    let mut replay = Replay::of_files(&[nab.join("00_streams.sql"), nab.join("detector.sql")]);
    let schema = replay.schema("nab_metric");
    let longest = suite.iter().map(|s| s.values.len()).max().unwrap_or(0);
    for step in 0..longest {
        let rows: Vec<&Synthetic> = suite.iter().filter(|s| step < s.values.len()).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    rows.iter().map(|_| START + step as i64 * STEP),
                )),
                Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|s| s.name.as_str()),
                )),
                Arc::new(Float64Array::from_iter_values(
                    rows.iter().map(|s| s.values[step]),
                )),
            ],
        )
        .unwrap();
        replay.insert("nab_metric", batch);
    }
    let mut by_series: BTreeMap<String, BTreeMap<i64, f64>> = BTreeMap::new();
    for b in replay.finish().remove("nab_anomaly").unwrap_or_default() {
        for ((s, t), v) in texts(&b, "series")
            .into_iter()
            .zip(nanos(&b, "timestamp"))
            .zip(floats(&b, "score"))
        {
            by_series.entry(s).or_default().insert(t, v);
        }
    }
    by_series
        .into_iter()
        .map(|(s, rows)| (s, rows.into_values().collect()))
        .collect()
}

/// How one series came out: its change detected (or None without one), and its false alerts.
struct Verdict {
    detected: Option<bool>,
    false_alerts: usize,
    /// Rows from the onset to the first alert in the window.
    delay: Option<usize>,
}

fn judge(s: &Synthetic, scores: &[f64]) -> Verdict {
    assert_eq!(scores.len(), s.values.len(), "{}: a score per row", s.name);
    let warm = s.values.len() * 15 / 100;
    let alerts: Vec<usize> = (warm..scores.len())
        .filter(|&i| scores[i] >= ALERT)
        .collect();
    let before = s.window.map_or(usize::MAX, |(onset, _)| onset);
    let first_in = s
        .window
        .and_then(|(a, b)| alerts.iter().find(|&&i| i >= a && i <= b).map(|i| i - a));
    Verdict {
        detected: s.window.map(|_| first_in.is_some()),
        false_alerts: alerts.iter().filter(|&&i| i < before).count(),
        delay: first_in,
    }
}

#[test]
fn the_generator_puts_each_change_where_its_label_says() {
    // Mean and spread of the window against the stretch before it, for one clean long series
    // of each kind: the labels are not wrong by construction.
    let stats = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let steps = v.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>() / (n - 1.0);
        (mean, sd, steps)
    };
    for kind in KINDS {
        let s = generate(kind, false, 4000, 1);
        let Some((a, b)) = s.window else {
            assert_eq!(kind, Kind::None);
            continue;
        };
        let (m0, sd0, st0) = stats(&s.values[a - 384..a]);
        let (m1, sd1, st1) = stats(&s.values[a..=b]);
        match kind {
            Kind::LevelUp => assert!(m1 - m0 > 12.0),
            Kind::LevelDown => assert!(m0 - m1 > 12.0),
            Kind::Variance => assert!(st1 > 3.0 * st0),
            Kind::Frequency => assert!(
                st1 > 1.3 * st0 && (sd1 - sd0).abs() < 1.0,
                "{st0} {st1} {sd0} {sd1}"
            ),
            Kind::Flat => assert!(sd1 < 1e-9, "{sd1}"),
            Kind::SpikeDensity => assert!(m1 - m0 > 0.2 && st1 > st0),
            Kind::Trend => assert!(s.values[b] - s.values[a] > 40.0),
            Kind::SeasonalBreak => {
                // The cycle flips: the first period after the onset is the opposite of the
                // period before it (but near the crossings, where noise decides the sign).
                let flipped = (a..a + 96)
                    .filter(|&i| (s.values[i] - 50.0) * (s.values[i - 96] - 50.0) < 0.0)
                    .count();
                assert!(flipped > 80, "{flipped} of 96");
            }
            Kind::None => {}
        }
    }
}

#[test]
fn detector_on_labelled_synthetic_series() {
    let suite = suite();
    let scores = scores(&suite);
    let mut by_kind: BTreeMap<Kind, (usize, usize, usize, Vec<usize>)> = BTreeMap::new();
    println!();
    println!("| kind | noise | rows | seed | detected | rows to first alert | false alerts |");
    println!("|---|---|--:|--:|---|--:|--:|");
    for s in &suite {
        let got = scores
            .get(&s.name)
            .unwrap_or_else(|| panic!("no scores for {}", s.name));
        let v = judge(s, got);
        println!(
            "| {:?} | {} | {} | {} | {} | {} | {} |",
            s.kind,
            if s.noisy { "noisy" } else { "clean" },
            s.values.len(),
            s.name.rsplit('_').next().unwrap_or(""),
            v.detected.map_or("-", |d| if d { "yes" } else { "no" }),
            v.delay.map_or("-".to_string(), |d| d.to_string()),
            v.false_alerts
        );
        let e = by_kind.entry(s.kind).or_default();
        e.0 += 1;
        e.1 += usize::from(v.detected == Some(true));
        e.2 += usize::from(v.false_alerts > 0);
        e.3.extend(v.delay);
    }
    println!();
    println!("| kind | series | detected in window | median rows to first alert | series with a false alert |");
    println!("|---|--:|--:|--:|--:|");
    for (kind, (n, hit, noisy, delays)) in &by_kind {
        let mut d = delays.clone();
        d.sort();
        println!(
            "| {kind:?} | {n} | {hit} | {} | {noisy} |",
            d.get(d.len() / 2)
                .map_or("-".to_string(), |x| x.to_string())
        );
    }
    // What the detector is built to catch it catches in every series, clean or noisy, short
    // or long: a change that leaves the range (level, variance, trend), a stuck value, and a
    // cycle that runs faster or turns over (against the seasonal baseline).
    for kind in [
        Kind::LevelUp,
        Kind::LevelDown,
        Kind::Variance,
        Kind::Trend,
        Kind::Flat,
        Kind::Frequency,
        Kind::SeasonalBreak,
    ] {
        let (n, hit, _, _) = &by_kind[&kind];
        assert_eq!(hit, n, "{kind:?}: detected in {hit} of {n} series");
    }
    // Denser spikes inside the range of earlier ones it does not always see, and new extremes
    // of plain noise still alert in a few series: measured 2026-12-04 (see eval/README.md); a
    // change that does worse fails here.
    let missed: usize = [Kind::Frequency, Kind::SpikeDensity, Kind::SeasonalBreak]
        .iter()
        .map(|k| by_kind[k].0 - by_kind[k].1)
        .sum();
    let false_series: usize = by_kind.values().map(|v| v.2).sum();
    println!("missed inside the range: {missed}; series with a false alert: {false_series}");
    assert!(missed <= MISSED_INSIDE_RANGE, "missed {missed}");
    assert!(
        false_series <= SERIES_WITH_FALSE_ALERTS,
        "false {false_series}"
    );
}

/// Measured on 2026-12-04 (of 24 series of changes inside the range, and of 72 series), with
/// the seasonal baseline; 20 and 22 before it.
const MISSED_INSIDE_RANGE: usize = 4;
const SERIES_WITH_FALSE_ALERTS: usize = 8;
