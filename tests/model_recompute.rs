//! The anomaly models, OUTLIER and INVARIANT, checked against a brute force over all rows at
//! once: random rows with bounded disorder (within the watermark delay, so none are late),
//! split into random batches, fed through the engine. For OUTLIER the reference computes each
//! window's group results by hand and applies the method's definition to them; for INVARIANT
//! it walks the results in event-time order, learning per key during training and checking
//! after it.

use crate::common;

use std::collections::{HashMap, HashSet};

use common::{fmt_ts, render, run, Row, BASE, SEC};
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use proptest::prelude::*;

/// Up to 200 rows, ~0.7 s apart minus up to 4 s of disorder (inside the 5 s watermark delay),
/// on a 0.1 s grid so that rows share times and fall on window and training boundaries, with
/// keys `0..keys` and values from `value`; and the lengths of the batches to insert.
fn rows_strategy(
    keys: i64,
    value: impl Strategy<Value = Option<i64>> + Clone,
) -> impl Strategy<Value = (Vec<Row>, Vec<usize>)> {
    (1usize..200).prop_flat_map(move |n| {
        (
            proptest::collection::vec((0i64..40, 0..keys, value.clone()), n),
            proptest::collection::vec(1usize..40, 1..20),
        )
            .prop_map(|(raw, splits)| {
                let rows = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (jitter, k, v))| Row {
                        ts: BASE + (i as i64 * 7 - jitter) * SEC / 10,
                        k,
                        v,
                    })
                    .collect();
                (rows, splits)
            })
    })
}

/// Eight keys, so a 10 s window has several groups to compare; mostly small values with the
/// odd far one, and some NULLs (a group whose values are all NULL has a NULL sum).
fn outlier_rows() -> impl Strategy<Value = (Vec<Row>, Vec<usize>)> {
    rows_strategy(
        8,
        proptest::option::weighted(0.85, prop_oneof![6 => 0i64..20, 1 => -300i64..300]),
    )
}

/// Few keys and few distinct values, so that sets and ranges are learned and then mostly kept.
fn invariant_rows() -> impl Strategy<Value = (Vec<Row>, Vec<usize>)> {
    rows_strategy(4, proptest::option::weighted(0.9, 0i64..6))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One group result of a window: `SUM(v) AS total, COUNT(*) AS n` of key `k`.
#[derive(Debug, Clone)]
struct Group {
    end: i64,
    k: i64,
    total: Option<i64>,
    n: i64,
}

/// The group results of the windows of `size` starting every `slide` (a TUMBLE when they are
/// equal), window by window in end order and, within a window, in the order its keys first
/// arrived, which is the order the window operator emits them in.
fn window_groups(rows: &[Row], size: i64, slide: i64) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<(i64, i64), usize> = HashMap::new();
    for r in rows {
        let mut start = r.ts.div_euclid(slide) * slide;
        while start + size > r.ts {
            let end = start + size;
            let g = *index.entry((end, r.k)).or_insert_with(|| {
                groups.push(Group {
                    end,
                    k: r.k,
                    total: None,
                    n: 0,
                });
                groups.len() - 1
            });
            groups[g].n += 1;
            if let Some(v) = r.v {
                groups[g].total = Some(groups[g].total.unwrap_or(0) + v);
            }
            start -= slide;
        }
    }
    groups.sort_by_key(|g| g.end); // stable: arrival order within a window
    groups
}

// ---------------------------------------------------------------------------------------------
// OUTLIER: the methods by their definitions, over the points of one window (and partition).
// ---------------------------------------------------------------------------------------------

fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
}

fn column(points: &[Vec<f64>], d: usize) -> Vec<f64> {
    points.iter().map(|p| p[d]).collect()
}

/// The largest score over the dimensions, each scored by `per_dimension` over that column.
fn max_over_dimensions(
    points: &[Vec<f64>],
    per_dimension: impl Fn(&[f64]) -> Vec<f64>,
) -> Vec<f64> {
    let mut score = vec![0.0f64; points.len()];
    for d in 0..points[0].len() {
        for (s, z) in score.iter_mut().zip(per_dimension(&column(points, d))) {
            *s = s.max(z);
        }
    }
    score
}

/// |x - mean| / sd with the population standard deviation; 0 when every value is equal.
fn zscore(points: &[Vec<f64>]) -> Vec<f64> {
    max_over_dimensions(points, |xs| {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        xs.iter()
            .map(|x| if sd > 0.0 { (x - mean).abs() / sd } else { 0.0 })
            .collect()
    })
}

/// The middle value, or the mean of the two middle values.
fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// 0.6745 |x - median| / MAD; when the MAD is 0 (most values equal), 0 at the median and
/// infinite elsewhere.
fn mad(points: &[Vec<f64>]) -> Vec<f64> {
    max_over_dimensions(points, |xs| {
        let med = median(xs);
        let deviations: Vec<f64> = xs.iter().map(|x| (x - med).abs()).collect();
        let mad = median(&deviations);
        xs.iter()
            .map(|x| match (mad > 0.0, *x == med) {
                (true, _) => 0.6745 * (x - med).abs() / mad,
                (false, true) => 0.0,
                (false, false) => f64::INFINITY,
            })
            .collect()
    })
}

/// The `q` quantile interpolated linearly between the closest ranks (type 7).
fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let h = (v.len() - 1) as f64 * q;
    let i = h.floor() as usize;
    if i + 1 < v.len() {
        v[i] + (h - i as f64) * (v[i + 1] - v[i])
    } else {
        v[i]
    }
}

/// How far beyond [Q1 - factor IQR, Q3 + factor IQR] a value lies, in IQRs (infinite when the
/// IQR is 0); 0 inside.
fn iqr(points: &[Vec<f64>], factor: f64) -> Vec<f64> {
    max_over_dimensions(points, |xs| {
        let (q1, q3) = (quantile(xs, 0.25), quantile(xs, 0.75));
        let iqr = q3 - q1;
        let (lo, hi) = (q1 - factor * iqr, q3 + factor * iqr);
        xs.iter()
            .map(|&x| {
                let beyond = (lo - x).max(x - hi).max(0.0);
                if beyond == 0.0 {
                    0.0
                } else if iqr > 0.0 {
                    beyond / iqr
                } else {
                    f64::INFINITY
                }
            })
            .collect()
    })
}

/// Naive DBSCAN: a core point has at least `min_points` points (itself included) within
/// `eps`; a point within `eps` of a core point belongs to a cluster, any other is noise (an
/// outlier). Score: the distance to the nearest core point, or without any core point, to the
/// nearest other point (0 for a lone point).
fn dbscan(points: &[Vec<f64>], eps: f64, min_points: usize) -> Vec<(bool, f64)> {
    let core: Vec<&Vec<f64>> = points
        .iter()
        .filter(|p| points.iter().filter(|q| distance(p, q) <= eps).count() >= min_points)
        .collect();
    points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let nearest_core = core
                .iter()
                .map(|c| distance(p, c))
                .fold(f64::INFINITY, f64::min);
            if nearest_core <= eps {
                (false, nearest_core)
            } else if !core.is_empty() {
                (true, nearest_core)
            } else {
                let nearest = (0..points.len())
                    .filter(|&j| j != i)
                    .map(|j| distance(p, &points[j]))
                    .fold(f64::INFINITY, f64::min);
                (true, if nearest.is_finite() { nearest } else { 0.0 })
            }
        })
        .collect()
}

/// Lloyd's k-means from the seeds the operator documents (the first point, then repeatedly
/// the point farthest from the seeds so far; on a tie the last such point, as
/// `Iterator::max_by` picks), at most 50 rounds, a point joining the first of equally near
/// centroids. Score: the distance to the nearest centroid.
fn kmeans(points: &[Vec<f64>], k: usize) -> Vec<f64> {
    let k = k.clamp(1, points.len());
    let nearest = |p: &[f64], cs: &[Vec<f64>]| {
        cs.iter()
            .map(|c| distance(p, c))
            .fold(f64::INFINITY, f64::min)
    };
    let mut centroids = vec![points[0].clone()];
    while centroids.len() < k {
        let mut far = 0;
        for i in 0..points.len() {
            if nearest(&points[i], &centroids) >= nearest(&points[far], &centroids) {
                far = i;
            }
        }
        centroids.push(points[far].clone());
    }
    for _ in 0..50 {
        let mut members: Vec<Vec<&Vec<f64>>> = vec![Vec::new(); k];
        for p in points {
            let mut best = 0;
            for c in 1..k {
                if distance(p, &centroids[c]) < distance(p, &centroids[best]) {
                    best = c;
                }
            }
            members[best].push(p);
        }
        let mut moved = false;
        for (c, m) in members.iter().enumerate() {
            if m.is_empty() {
                continue;
            }
            let mean: Vec<f64> = (0..points[0].len())
                .map(|d| m.iter().map(|p| p[d]).sum::<f64>() / m.len() as f64)
                .collect();
            moved |= mean != centroids[c];
            centroids[c] = mean;
        }
        if !moved {
            break;
        }
    }
    points.iter().map(|p| nearest(p, &centroids)).collect()
}

/// A result row of the OUTLIER queries below: `k, [window_end,] total, n, is_outlier,
/// outlier_score`.
#[derive(Debug, Clone)]
struct Marked {
    end: Option<i64>,
    k: i64,
    total: Option<i64>,
    n: i64,
    outlier: bool,
    score: Option<f64>,
}

/// The OUTLIER queries' shape: `method` over `on` (of `total`, `n`), partitioned by
/// `k % partitions` when that is above 1, then `having`.
struct OutlierQuery<'a> {
    window: &'a str,
    method: String,
    on: &'a [&'a str],
    partitions: i64,
    with_window_end: bool,
    having: &'a str,
}

impl OutlierQuery<'_> {
    fn sql(&self) -> String {
        format!(
            "SELECT k, {}SUM(v) AS total, COUNT(*) AS n FROM {} \
             GROUP BY k, window_start, window_end OUTLIER {} ON ({}) {} {}",
            if self.with_window_end {
                "window_end, "
            } else {
                ""
            },
            self.window,
            self.method,
            self.on.join(", "),
            if self.partitions > 1 {
                format!("PARTITION BY (k % {})", self.partitions)
            } else {
                String::new()
            },
            self.having
        )
    }

    /// Marks `groups` window by window and partition by partition: `detect` gets the points
    /// (the groups with no NULL coordinate, in the order the window emits them) and returns
    /// `(is_outlier, score)` for each; a group with a NULL coordinate is no outlier and has no
    /// score.
    fn reference(
        &self,
        groups: &[Group],
        detect: impl Fn(&[Vec<f64>]) -> Vec<(bool, f64)>,
    ) -> Vec<Marked> {
        let point = |g: &Group| -> Option<Vec<f64>> {
            self.on
                .iter()
                .map(|c| match *c {
                    "total" => g.total.map(|t| t as f64),
                    _ => Some(g.n as f64),
                })
                .collect()
        };
        let mut out: Vec<Marked> = groups
            .iter()
            .map(|g| Marked {
                end: self.with_window_end.then_some(g.end),
                k: g.k,
                total: g.total,
                n: g.n,
                outlier: false,
                score: None,
            })
            .collect();
        let mut sets: Vec<((i64, i64), Vec<usize>)> = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            if point(g).is_none() {
                continue;
            }
            let set = (g.end, g.k % self.partitions);
            match sets.iter_mut().find(|(s, _)| *s == set) {
                Some((_, members)) => members.push(i),
                None => sets.push((set, vec![i])),
            }
        }
        for (_, members) in sets {
            let points: Vec<Vec<f64>> = members.iter().filter_map(|&i| point(&groups[i])).collect();
            for (&i, (outlier, score)) in members.iter().zip(detect(&points)) {
                out[i].outlier = outlier;
                out[i].score = Some(score);
            }
        }
        out
    }
}

fn ints(b: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let c = cast(b.column_by_name(name).unwrap(), &DataType::Int64).unwrap();
    c.as_primitive::<Int64Type>().iter().collect()
}

fn marked(batches: &[RecordBatch]) -> Vec<Marked> {
    let mut out = Vec::new();
    for b in batches {
        let ends = b
            .column_by_name("window_end")
            .map(|_| ints(b, "window_end"));
        let (k, total, n) = (ints(b, "k"), ints(b, "total"), ints(b, "n"));
        let flags = b.column_by_name("is_outlier").unwrap().as_boolean();
        let scores = b
            .column_by_name("outlier_score")
            .unwrap()
            .as_primitive::<Float64Type>();
        for r in 0..b.num_rows() {
            out.push(Marked {
                end: ends.as_ref().map(|e| e[r].unwrap()),
                k: k[r].unwrap(),
                total: total[r],
                n: n[r].unwrap(),
                outlier: flags
                    .is_valid(r)
                    .then(|| flags.value(r))
                    .expect("is_outlier is never NULL"),
                score: scores.is_valid(r).then(|| scores.value(r)),
            });
        }
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

/// Compares the engine's rows with the reference's: the same rows (in any order), each with
/// a score equal up to rounding and the same verdict, except that a score within rounding of
/// `threshold` may go either way (the engine may sum in another order).
fn check_marked(
    got: &[RecordBatch],
    mut want: Vec<Marked>,
    threshold: Option<f64>,
) -> Result<(), TestCaseError> {
    let mut got = marked(got);
    let order = |a: &Marked, b: &Marked| {
        (a.end, a.k, a.total, a.n)
            .cmp(&(b.end, b.k, b.total, b.n))
            .then(a.score.unwrap_or(0.0).total_cmp(&b.score.unwrap_or(0.0)))
    };
    got.sort_by(order);
    want.sort_by(order);
    prop_assert_eq!(got.len(), want.len(), "got {:?}\nwant {:?}", got, want);
    for (g, w) in got.iter().zip(&want) {
        let same_score = match (g.score, w.score) {
            (Some(a), Some(b)) => close(a, b),
            (a, b) => a == b,
        };
        let on_the_fence = matches!((threshold, w.score), (Some(t), Some(s)) if close(s, t));
        prop_assert!(
            (g.end, g.k, g.total, g.n) == (w.end, w.k, w.total, w.n)
                && same_score
                && (g.outlier == w.outlier || on_the_fence),
            "got {:?}\nwant {:?}",
            g,
            w
        );
    }
    Ok(())
}

const TUMBLE: &str = "TUMBLE(s, ts, INTERVAL '10' SECOND)";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Two dimensions (the largest |z| counts), partitions, and a query without `window_end`
    /// (the operator then relies on each window's results arriving in a batch of their own).
    #[test]
    fn zscore_matches_brute_force(
        (rows, splits) in outlier_rows(),
        tenths in 5u32..30,
        partitions in 1i64..4,
        with_window_end in any::<bool>(),
    ) {
        let threshold = f64::from(tenths) / 10.0;
        let q = OutlierQuery {
            window: TUMBLE,
            method: format!("ZSCORE({threshold})"),
            on: &["total", "n"],
            partitions,
            with_window_end,
            having: "",
        };
        let got = run(&runtime(), &q.sql(), &rows, &splits);
        let want = q.reference(&window_groups(&rows, 10 * SEC, 10 * SEC), |points| {
            zscore(points).into_iter().map(|z| (z > threshold, z)).collect()
        });
        check_marked(&got, want, Some(threshold))?;
    }

    /// Over hopping windows, so that each row counts in two windows.
    #[test]
    fn mad_matches_brute_force(
        (rows, splits) in outlier_rows(),
        tenths in 5u32..50,
        partitions in 1i64..3,
    ) {
        let threshold = f64::from(tenths) / 10.0;
        let q = OutlierQuery {
            window: "HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND)",
            method: format!("MAD(threshold => {threshold})"),
            on: &["total"],
            partitions,
            with_window_end: true,
            having: "",
        };
        let got = run(&runtime(), &q.sql(), &rows, &splits);
        let want = q.reference(&window_groups(&rows, 10 * SEC, 5 * SEC), |points| {
            mad(points).into_iter().map(|z| (z > threshold, z)).collect()
        });
        check_marked(&got, want, Some(threshold))?;
    }

    #[test]
    fn iqr_matches_brute_force(
        (rows, splits) in outlier_rows(),
        tenths in 0u32..30,
        partitions in 1i64..3,
    ) {
        let factor = f64::from(tenths) / 10.0;
        let q = OutlierQuery {
            window: TUMBLE,
            method: format!("IQR({factor})"),
            on: &["total", "n"],
            partitions,
            with_window_end: true,
            having: "",
        };
        let got = run(&runtime(), &q.sql(), &rows, &splits);
        let want = q.reference(&window_groups(&rows, 10 * SEC, 10 * SEC), |points| {
            iqr(points, factor).into_iter().map(|s| (s > 0.0, s)).collect()
        });
        check_marked(&got, want, None)?;
    }

    /// Also with the clause's HAVING, which keeps only the outliers.
    #[test]
    fn dbscan_matches_brute_force(
        (rows, splits) in outlier_rows(),
        eps in 1u32..40,
        min_points in 1usize..5,
        partitions in 1i64..3,
        only_outliers in any::<bool>(),
    ) {
        let eps = f64::from(eps);
        let q = OutlierQuery {
            window: TUMBLE,
            method: format!("DBSCAN(eps => {eps}, min_points => {min_points})"),
            on: &["total", "n"],
            partitions,
            with_window_end: true,
            having: if only_outliers { "HAVING is_outlier" } else { "" },
        };
        let got = run(&runtime(), &q.sql(), &rows, &splits);
        let mut want = q.reference(&window_groups(&rows, 10 * SEC, 10 * SEC), |points| {
            dbscan(points, eps, min_points)
        });
        if only_outliers {
            want.retain(|m| m.outlier);
        }
        check_marked(&got, want, None)?;
    }

    #[test]
    fn kmeans_matches_brute_force(
        (rows, splits) in outlier_rows(),
        k in 1usize..4,
        threshold in 1u32..30,
        partitions in 1i64..3,
    ) {
        let threshold = f64::from(threshold);
        let q = OutlierQuery {
            window: TUMBLE,
            method: format!("KMEANS(k => {k}, threshold => {threshold})"),
            on: &["total"],
            partitions,
            with_window_end: true,
            having: "",
        };
        let got = run(&runtime(), &q.sql(), &rows, &splits);
        let want = q.reference(&window_groups(&rows, 10 * SEC, 10 * SEC), |points| {
            kmeans(points, k).into_iter().map(|d| (d > threshold, d)).collect()
        });
        check_marked(&got, want, Some(threshold))?;
    }
}

// ---------------------------------------------------------------------------------------------
// INVARIANT: learn per key in event-time order, then check.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Training {
    /// The first n windows (distinct times) with results.
    Windows(usize),
    /// Results earlier than the first result's time plus this many seconds.
    Seconds(i64),
    /// A fixed period, `[BASE + from, BASE + until)` in seconds: earlier results are skipped.
    Between(i64, i64),
}

/// An INVARIANT clause over one value expression, `name`, per `k % per`.
#[derive(Debug, Clone, Copy)]
struct InvariantClause {
    set: bool,
    per: i64,
    training: Training,
    /// `MIN SUPPORT` (SET only; 1 = absent).
    support: usize,
    online: bool,
}

impl InvariantClause {
    fn sql(&self, name: &str) -> String {
        format!(
            "INVARIANT {} ({name}) PER (k % {}) TRAINING {}{} {}",
            if self.set { "SET" } else { "RANGE" },
            self.per,
            match self.training {
                Training::Windows(n) => format!("{n} WINDOWS"),
                Training::Seconds(s) => format!("INTERVAL '{s}' SECOND"),
                Training::Between(from, until) => format!(
                    "BETWEEN TIMESTAMP '{}' AND TIMESTAMP '{}'",
                    fmt_ts(BASE + from * SEC),
                    fmt_ts(BASE + until * SEC)
                ),
            },
            if self.support > 1 {
                format!(" MIN SUPPORT {}", self.support)
            } else {
                String::new()
            },
            if self.online { "ONLINE" } else { "OFFLINE" }
        )
    }

    /// The violating results, rendered with their violation. `results` are `(time, k, value,
    /// rendered row)` in event-time order (ties in arrival order).
    fn reference(&self, name: &str, results: &[(i64, i64, Option<i64>, String)]) -> Vec<String> {
        let mut times: Vec<i64> = results.iter().map(|r| r.0).collect();
        times.dedup();
        let training = |t: i64| match self.training {
            Training::Windows(n) => times[..n.min(times.len())].contains(&t),
            Training::Seconds(s) => t < times[0] + s * SEC,
            Training::Between(_, until) => t < BASE + until * SEC,
        };
        let skipped =
            |t: i64| matches!(self.training, Training::Between(from, _) if t < BASE + from * SEC);
        let show = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
        let mut sets: HashMap<i64, HashSet<Option<i64>>> = HashMap::new();
        let mut seen: HashMap<(i64, Option<i64>), usize> = HashMap::new();
        let mut ranges: HashMap<i64, (f64, f64)> = HashMap::new();
        let mut out = Vec::new();
        for (t, k, value, row) in results {
            if skipped(*t) {
                continue;
            }
            let (key, training) = (k % self.per, training(*t));
            let violation = if self.set {
                let set = sets.entry(key).or_default();
                let known = set.len();
                let new = !set.contains(value);
                if training {
                    // Learned once training has seen it `support` times.
                    let n = seen.entry((key, *value)).or_default();
                    *n += 1;
                    if *n >= self.support {
                        set.insert(*value);
                    }
                } else if self.online {
                    set.insert(*value);
                }
                (new && !training).then(|| {
                    format!(
                        "({name}) = ({}) was not among the {known} values learned",
                        show(*value)
                    )
                })
            } else {
                let Some(shown) = *value else { continue };
                let x = shown as f64;
                let violation = match ranges.get(&key) {
                    _ if training => None,
                    None => Some(format!("{name} = {shown} with nothing learned")),
                    Some(&(lo, hi)) if x < lo || x > hi => Some(format!(
                        "{name} = {shown} outside the learned range [{lo}, {hi}]"
                    )),
                    Some(_) => None,
                };
                if training || self.online {
                    let r = ranges.entry(key).or_insert((x, x));
                    *r = (r.0.min(x), r.1.max(x));
                }
                violation
            };
            if let Some(v) = violation {
                out.push(format!("{row}|{v}"));
            }
        }
        out.sort();
        out
    }
}

fn invariant_clause(windows: bool) -> impl Strategy<Value = InvariantClause> {
    let between = (0i64..30, 1i64..40).prop_map(|(from, len)| Training::Between(from, from + len));
    let training = if windows {
        prop_oneof![
            (1usize..5).prop_map(Training::Windows),
            (1i64..8).prop_map(|m| Training::Seconds(5 * m)),
            between,
        ]
        .boxed()
    } else {
        prop_oneof![(1i64..60).prop_map(Training::Seconds), between].boxed()
    };
    (any::<bool>(), 1i64..4, training, 1usize..4, any::<bool>()).prop_map(
        |(set, per, training, support, online)| InvariantClause {
            set,
            per,
            training,
            support: if set { support } else { 1 },
            online,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Over the stream's rows, which arrive out of order within the watermark delay: learning
    /// and checking follow event time, not arrival.
    #[test]
    fn row_invariant_matches_brute_force(
        (rows, splits) in invariant_rows(),
        clause in invariant_clause(false),
    ) {
        let got = render(&run(&runtime(), &format!("SELECT ts, k, v FROM s {}", clause.sql("v")), &rows, &splits));
        let mut by_time = rows.clone();
        by_time.sort_by_key(|r| r.ts); // stable: ties in arrival order
        let results: Vec<_> = by_time
            .iter()
            .map(|r| {
                let v = r.v.map_or("NULL".to_string(), |v| v.to_string());
                (r.ts, r.k, r.v, format!("{}|{}|{v}", fmt_ts(r.ts), r.k))
            })
            .collect();
        prop_assert_eq!(got, clause.reference("v", &results));
    }

    /// Over a TUMBLE query's results: SET learns the row counts, RANGE the sums, over the first
    /// windows or an interval of window ends.
    #[test]
    fn window_invariant_matches_brute_force(
        (rows, splits) in invariant_rows(),
        clause in invariant_clause(true),
    ) {
        let value = if clause.set { "n" } else { "total" };
        let got = render(&run(&runtime(), &format!(
            "SELECT k, window_end, SUM(v) AS total, COUNT(*) AS n FROM {TUMBLE} \
             GROUP BY k, window_start, window_end {}", clause.sql(value)), &rows, &splits));
        let results: Vec<_> = window_groups(&rows, 10 * SEC, 10 * SEC)
            .into_iter()
            .map(|g| {
                let total = g.total.map_or("NULL".to_string(), |v| v.to_string());
                let row = format!("{}|{}|{total}|{}", g.k, fmt_ts(g.end), g.n);
                (g.end, g.k, if clause.set { Some(g.n) } else { g.total }, row)
            })
            .collect();
        prop_assert_eq!(got, clause.reference(value, &results));
    }
}

/// A training row that arrives after a later row (within the watermark delay) still trains:
/// the later row's value was learned in time, so it is no violation.
#[test]
fn training_follows_event_time_not_arrival() {
    let row = |secs: i64, v: i64| Row {
        ts: BASE + secs * SEC,
        k: 0,
        v: Some(v),
    };
    let rows = [row(0, 1), row(12, 2), row(9, 2), row(30, 3)];
    let got = render(&run(
        &runtime(),
        "SELECT ts, v FROM s INVARIANT SET (v) TRAINING INTERVAL '10' SECOND",
        &rows,
        &[1],
    ));
    assert_eq!(
        got,
        vec![format!(
            "{}|3|(v) = (3) was not among the 2 values learned",
            fmt_ts(BASE + 30 * SEC)
        )]
    );
}
