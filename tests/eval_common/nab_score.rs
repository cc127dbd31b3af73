//! NAB's scoring (Lavin & Ahmad, "Evaluating real-time anomaly detection algorithms — the
//! Numenta Anomaly Benchmark", 2015, and NAB's documentation), written from the published
//! method: a detector gives every row of every file a score in [0, 1]; a threshold turns the
//! scores into detections, and the detections are scored against the labelled windows:
//!
//! - the first `min(floor(15% of the rows), 750)` rows of each file are a probationary period
//!   where the detector learns: nothing there counts, not even a window lying in it;
//! - a detection in a window earns `A_TP · σ(y) / σ(-1)`, where `y ∈ [-1, 0]` is its position
//!   relative to the window's right edge (`-1` the first row, `0` just past the last) and
//!   `σ(y) = 2 / (1 + e^{5y}) - 1`, so early detections earn nearly the full weight; only the
//!   best (earliest) detection of a window counts, and a window without one costs `A_FN`;
//! - a detection outside every window costs `A_FP · σ(y)` (a negative amount) with `y` its
//!   distance past the end of the window before it, in that window's widths (`σ` is `-1` from
//!   `y > 3` on, and before the first window), so a late detection just after a window costs
//!   less than a stray one;
//! - the threshold is the one giving the highest total over all files (the sweep), chosen per
//!   profile: `standard` (A_TP 1, A_FP 0.11, A_FN 1), `reward_low_FP_rate` (A_FP 0.22) and
//!   `reward_low_FN_rate` (A_FN 2);
//! - the total is normalised to `100 · (S - S_null) / (S_perfect - S_null)`: the null detector
//!   (one constant score, swept like any other) scores 0, and a detector that finds every
//!   window at its first row with no false positive scores 100 (`S_perfect = A_TP · windows`).

// Each evaluation uses only part of this module.
#![allow(
    dead_code,
    reason = "each crate that includes this module uses part of it"
)]

/// An application profile: the weights of true positives, false positives and false
/// negatives (NAB's `A_TN` is 0 in every profile: true negatives earn nothing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    pub tp: f64,
    pub fp: f64,
    pub fn_: f64,
}

/// NAB's three profiles (`config/profiles.json` of NAB).
pub const PROFILES: [Profile; 3] = [
    Profile {
        name: "standard",
        tp: 1.0,
        fp: 0.11,
        fn_: 1.0,
    },
    Profile {
        name: "reward_low_FP_rate",
        tp: 1.0,
        fp: 0.22,
        fn_: 1.0,
    },
    Profile {
        name: "reward_low_FN_rate",
        tp: 1.0,
        fp: 0.11,
        fn_: 2.0,
    },
];

/// Share of each file's rows that is probationary, and the most rows it can be.
const PROBATION_SHARE: f64 = 0.15;
const PROBATION_MAX_ROWS: f64 = 0.15 * 5000.0;

/// One labelled file: its rows' timestamps (ascending) and its windows `[start, end]` (both
/// ends included, in the same unit as the timestamps).
#[derive(Debug, Clone)]
pub struct LabelledFile {
    pub name: String,
    pub timestamps: Vec<i64>,
    pub windows: Vec<(i64, i64)>,
}

impl LabelledFile {
    /// Rows at the start of the file that are not scored.
    pub fn probation(&self) -> usize {
        let n = self.timestamps.len() as f64;
        (PROBATION_SHARE * n).floor().min(PROBATION_MAX_ROWS) as usize
    }

    /// Each window as the index of its first and last row (windows holding no row are
    /// dropped: no detection can fall in them).
    fn window_rows(&self) -> Vec<(usize, usize)> {
        self.windows
            .iter()
            .filter_map(|&(start, end)| {
                let first = self.timestamps.partition_point(|&t| t < start);
                let last = self.timestamps.partition_point(|&t| t <= end);
                (last > first).then(|| (first, last - 1))
            })
            .collect()
    }
}

/// `2 / (1 + e^{5y}) - 1`, and `-1` past `y = 3`.
pub fn scaled_sigmoid(y: f64) -> f64 {
    if y > 3.0 {
        -1.0
    } else {
        2.0 / (1.0 + (5.0 * y).exp()) - 1.0
    }
}

/// A scored row: the detector's score, what a detection there earns (positive in a window)
/// or costs (negative outside), and the window it lies in (numbered over all files).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    score: f64,
    weight: f64,
    window: Option<usize>,
}

/// The scored rows of one file (probation left out), numbering its windows from
/// `first_window`; returns the points and the number of windows scored.
fn points(
    file: &LabelledFile,
    scores: &[f64],
    profile: &Profile,
    first_window: usize,
) -> (Vec<Point>, usize) {
    assert_eq!(
        file.timestamps.len(),
        scores.len(),
        "{}: one score per row",
        file.name
    );
    let windows = file.window_rows();
    let max_tp = scaled_sigmoid(-1.0);
    let probation = file.probation();
    let mut out = Vec::with_capacity(scores.len());
    let mut scored_windows = std::collections::BTreeSet::new();
    let mut next = 0; // the first window not yet passed
    for (i, &score) in scores.iter().enumerate() {
        while next < windows.len() && windows[next].1 < i {
            next += 1;
        }
        let (weight, window) = match windows.get(next) {
            Some(&(first, last)) if first <= i => {
                let width = (last - first + 1) as f64;
                let y = -((last - i + 1) as f64) / width;
                (scaled_sigmoid(y) * profile.tp / max_tp, Some(next))
            }
            _ => {
                let cost = match next.checked_sub(1).map(|p| windows[p]) {
                    None => -1.0,
                    Some((first, last)) => {
                        let width = (last - first + 1) as f64;
                        scaled_sigmoid((i - last) as f64 / (width - 1.0))
                    }
                };
                (cost * profile.fp, None)
            }
        };
        if i >= probation {
            if let Some(w) = window {
                scored_windows.insert(w);
            }
            out.push(Point {
                score,
                weight,
                window: window.map(|w| first_window + w),
            });
        }
    }
    (out, scored_windows.len())
}

/// The raw score of a set of files at a threshold: detections are the rows whose score is at
/// least `threshold`.
pub fn raw_score(
    files: &[(&LabelledFile, &[f64])],
    profile: &Profile,
    threshold: f64,
) -> (f64, Counts) {
    let (points, windows) = all_points(files, profile);
    let mut best: Vec<Option<f64>> = vec![None; windows];
    // Windows wholly in probation are neither found nor missed.
    let mut scored = vec![false; windows];
    let mut total = 0.0;
    let mut counts = Counts::default();
    for p in &points {
        let detected = p.score >= threshold;
        if let Some(w) = p.window {
            scored[w] = true;
        }
        match (p.window, detected) {
            (Some(w), true) => {
                counts.tp += 1;
                best[w] = Some(best[w].map_or(p.weight, |b: f64| b.max(p.weight)));
            }
            (Some(_), false) => counts.fn_ += 1,
            (None, true) => {
                counts.fp += 1;
                total += p.weight;
            }
            (None, false) => counts.tn += 1,
        }
    }
    total += best
        .iter()
        .zip(&scored)
        .filter(|(_, s)| **s)
        .map(|(b, _)| b.unwrap_or(-profile.fn_))
        .sum::<f64>();
    (total, counts)
}

/// Row counts at a threshold (rows in windows detected or not, rows outside detected or not).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub tp: usize,
    pub fp: usize,
    pub tn: usize,
    pub fn_: usize,
}

/// The points of every file, windows numbered over all files; and how many windows.
fn all_points(files: &[(&LabelledFile, &[f64])], profile: &Profile) -> (Vec<Point>, usize) {
    let mut all = Vec::new();
    let mut windows = 0;
    for (file, scores) in files {
        let (points, _) = points(file, scores, profile, windows);
        windows += file.window_rows().len();
        all.extend(points);
    }
    (all, windows)
}

/// The best threshold over all files, and the raw score there: every distinct score is tried
/// as the threshold (and one above every score: no detection at all); ties go to the higher
/// threshold.
pub fn sweep(files: &[(&LabelledFile, &[f64])], profile: &Profile) -> (f64, f64) {
    let (mut points, windows) = all_points(files, profile);
    points.sort_by(|a, b| b.score.total_cmp(&a.score));
    // Nothing detected: every window scored in some file is missed.
    let mut scored = vec![false; windows];
    for p in &points {
        if let Some(w) = p.window {
            scored[w] = true;
        }
    }
    let mut best_in: Vec<Option<f64>> = vec![None; windows];
    let mut fp_total = 0.0;
    let mut window_total = -profile.fn_ * scored.iter().filter(|s| **s).count() as f64;
    let mut best = (f64::INFINITY, fp_total + window_total);
    let mut i = 0;
    while i < points.len() {
        let threshold = points[i].score;
        // Take in every point at this score, then score the threshold.
        while i < points.len() && points[i].score == threshold {
            let p = points[i];
            match p.window {
                None => fp_total += p.weight,
                Some(w) => {
                    let old = best_in[w].unwrap_or(-profile.fn_);
                    if best_in[w].is_none_or(|b| p.weight > b) {
                        best_in[w] = Some(p.weight);
                        window_total += p.weight - old;
                    }
                }
            }
            i += 1;
        }
        let total = fp_total + window_total;
        if total > best.1 {
            best = (threshold, total);
        }
    }
    // Recompute the winner exactly (the running sums above add and subtract in an order that
    // can differ from a fresh sum in the last bits).
    if best.0.is_finite() {
        best.1 = raw_score(files, profile, best.0).0;
    }
    best
}

/// NAB's normalised score: 0 for the null detector's raw score, 100 for a perfect one.
pub fn normalise(raw: f64, null_raw: f64, windows: usize, profile: &Profile) -> f64 {
    let perfect = windows as f64 * profile.tp;
    100.0 * (raw - null_raw) / (perfect - null_raw)
}

/// The null detector's raw score: one constant score for every row, swept (so either every
/// row is a detection or none is, whichever scores higher).
pub fn null_raw(files: &[&LabelledFile], profile: &Profile) -> f64 {
    let constant: Vec<Vec<f64>> = files
        .iter()
        .map(|f| vec![0.5; f.timestamps.len()])
        .collect();
    let pairs: Vec<(&LabelledFile, &[f64])> = files
        .iter()
        .copied()
        .zip(constant.iter().map(|c| c.as_slice()))
        .collect();
    sweep(&pairs, profile).1
}

/// The three normalised scores of a detector's per-row scores (same order as the files), each
/// at its own best threshold: `(profile, threshold, normalised score)`.
pub fn nab_scores(files: &[&LabelledFile], scores: &[Vec<f64>]) -> Vec<(Profile, f64, f64)> {
    let windows: usize = files.iter().map(|f| f.windows.len()).sum();
    let pairs: Vec<(&LabelledFile, &[f64])> = files
        .iter()
        .copied()
        .zip(scores.iter().map(|s| s.as_slice()))
        .collect();
    PROFILES
        .iter()
        .map(|p| {
            let (threshold, raw) = sweep(&pairs, p);
            (
                *p,
                threshold,
                normalise(raw, null_raw(files, p), windows, p),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STANDARD: Profile = PROFILES[0];

    /// 100 rows at times 0..100 with one window over rows 40..=59 (probation: 15 rows).
    fn file() -> LabelledFile {
        LabelledFile {
            name: "f".into(),
            timestamps: (0..100).collect(),
            windows: vec![(40, 59)],
        }
    }

    fn spikes(at: &[(usize, f64)]) -> Vec<f64> {
        let mut s = vec![0.0; 100];
        for &(i, v) in at {
            s[i] = v;
        }
        s
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_scaled_sigmoid_has_the_published_values() {
        // NAB's sweeper documents these: the left edge of a window, halfway in, the right
        // edge, and one window-width past it.
        assert!((scaled_sigmoid(-1.0) - 0.98661).abs() < 1e-5);
        assert!((scaled_sigmoid(-0.5) - 0.84828).abs() < 1e-5);
        assert!(close(scaled_sigmoid(0.0), 0.0));
        assert!((scaled_sigmoid(1.0) + 0.98661).abs() < 1e-5);
        assert!(close(scaled_sigmoid(3.5), -1.0));
    }

    #[test]
    fn a_detection_at_a_window_start_earns_the_full_weight() {
        let f = file();
        let s = spikes(&[(40, 1.0)]);
        // y = -(59 - 40 + 1) / 20 = -1: σ(-1) / σ(-1) = 1, and no false positive.
        let (raw, counts) = raw_score(&[(&f, &s)], &STANDARD, 0.5);
        assert!(close(raw, 1.0), "{raw}");
        assert_eq!(counts.tp, 1);
        assert_eq!(counts.fp, 0);
        // Nothing detected: the window is missed.
        let (raw, _) = raw_score(&[(&f, &s)], &STANDARD, 1.5);
        assert!(close(raw, -1.0));
        // Low-FN profile: a miss costs 2.
        let (raw, _) = raw_score(&[(&f, &s)], &PROFILES[2], 1.5);
        assert!(close(raw, -2.0));
    }

    #[test]
    fn only_the_earliest_detection_in_a_window_counts() {
        let f = file();
        // Row 50: y = -(59 - 50 + 1) / 20 = -0.5; row 55 later still: the best is row 50.
        let s = spikes(&[(50, 1.0), (55, 1.0)]);
        let (raw, counts) = raw_score(&[(&f, &s)], &STANDARD, 0.5);
        let expected = scaled_sigmoid(-0.5) / scaled_sigmoid(-1.0);
        assert!(close(raw, expected), "{raw} vs {expected}");
        assert_eq!(counts.tp, 2);
    }

    #[test]
    fn false_positives_cost_by_their_distance_after_a_window() {
        let f = file();
        // Row 20, before any window: -1 · 0.11. Row 69: 10 rows past the last row (59) of a
        // window 20 wide, y = 10 / 19: σ(y) · 0.11. Plus the missed window, -1.
        let s = spikes(&[(20, 1.0), (69, 1.0)]);
        let (raw, counts) = raw_score(&[(&f, &s)], &STANDARD, 0.5);
        let expected = -0.11 + 0.11 * scaled_sigmoid(10.0 / 19.0) - 1.0;
        assert!(close(raw, expected), "{raw} vs {expected}");
        assert_eq!((counts.fp, counts.tp), (2, 0));
        // The low-FP profile doubles the cost.
        let (raw, _) = raw_score(&[(&f, &s)], &PROFILES[1], 0.5);
        assert!(close(raw, 2.0 * (expected + 1.0) - 1.0));
    }

    #[test]
    fn probationary_rows_are_not_scored() {
        let f = file();
        assert_eq!(f.probation(), 15);
        // A detection in probation costs nothing; the window is still missed.
        let s = spikes(&[(10, 1.0)]);
        let (raw, counts) = raw_score(&[(&f, &s)], &STANDARD, 0.5);
        assert!(close(raw, -1.0));
        assert_eq!(counts.tp + counts.fp + counts.tn + counts.fn_, 85);
        // Long files: at most 750 rows.
        let long = LabelledFile {
            name: "l".into(),
            timestamps: (0..10_000).collect(),
            windows: vec![],
        };
        assert_eq!(long.probation(), 750);
        // A window wholly in probation is neither found nor missed.
        let early = LabelledFile {
            name: "e".into(),
            timestamps: (0..100).collect(),
            windows: vec![(2, 8)],
        };
        let (raw, _) = raw_score(&[(&early, &vec![0.0; 100][..])], &STANDARD, 0.5);
        assert!(close(raw, 0.0));
    }

    #[test]
    fn the_sweep_finds_the_best_threshold() {
        let f = file();
        // 0.9 at the window's start, 0.8 and 0.7 at stray rows, 0.6 at another window row.
        let s = spikes(&[(40, 0.9), (20, 0.8), (80, 0.7), (45, 0.6)]);
        let pairs = [(&f, &s[..])];
        let (threshold, raw) = sweep(&pairs, &STANDARD);
        assert_eq!(threshold, 0.9);
        assert!(close(raw, 1.0));
        // Every threshold the sweep could pick scores at most what it picked.
        for t in [0.0, 0.6, 0.7, 0.8, 0.9, 1.0] {
            assert!(raw_score(&pairs, &STANDARD, t).0 <= raw + 1e-12);
        }
        // A late detection is still better than none, and a stray row below it is not
        // worth taking in.
        let s = spikes(&[(58, 0.9), (20, 0.1)]);
        let (threshold, raw) = sweep(&[(&f, &s[..])], &STANDARD);
        assert_eq!(threshold, 0.9);
        assert!(close(
            raw,
            scaled_sigmoid(-2.0 / 20.0) / scaled_sigmoid(-1.0)
        ));
    }

    #[test]
    fn the_null_detector_scores_zero_and_a_perfect_one_a_hundred() {
        let f = file();
        let files = [&f];
        // Constant scores: detecting every row costs 66 · 0.11-ish, more than one miss, so
        // the null detector detects nothing and scores -1.
        let null = null_raw(&files, &STANDARD);
        assert!(close(null, -1.0), "{null}");
        let perfect = spikes(&[(40, 1.0)]);
        let scores = nab_scores(&files, &[perfect]);
        for (p, _, s) in &scores {
            assert!(close(*s, 100.0), "{}: {s}", p.name);
        }
        let scores = nab_scores(&files, &[vec![0.5; 100]]);
        for (p, _, s) in &scores {
            assert!(close(*s, 0.0), "{}: {s}", p.name);
        }
    }
}
