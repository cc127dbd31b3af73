//! `OUTLIER`: among the complete group results of a window (one input batch per window, as
//! the window operators emit them), finds the rows that are outliers by one of five methods
//! and appends `is_outlier` and `outlier_score`. Rows are compared within their partition
//! (`PARTITION BY` values, and `window_end` when the results carry it).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_plan::PhysicalExpr;

use super::Operator;
use crate::error::Result;

/// How outliers are found: the operator's own form of an `OUTLIER` clause's method, which
/// planning converts from the parsed clause.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OutlierMethod {
    /// Density clustering: points not within `eps` of a core point (one with at least
    /// `min_points` neighbours, itself included) are outliers. Score: distance to the nearest
    /// core point.
    Dbscan {
        /// Neighbourhood radius.
        eps: f64,
        /// Neighbours (including the point) that make a core point.
        min_points: usize,
    },
    /// k-means: points farther than `threshold` from their centroid are outliers.
    Kmeans {
        /// Number of clusters.
        k: usize,
        /// Distance beyond which a point is an outlier.
        threshold: f64,
    },
    /// Largest absolute z-score over the columns above `threshold`.
    Zscore {
        /// Score above which a point is an outlier.
        threshold: f64,
    },
    /// Largest robust z-score (0.6745 * |x - median| / MAD) above `threshold`.
    Mad {
        /// Score above which a point is an outlier.
        threshold: f64,
    },
    /// Outside [Q1 - factor * IQR, Q3 + factor * IQR].
    Iqr {
        /// Fence factor, usually 1.5.
        factor: f64,
    },
}

/// Marks outliers among each window's results.
pub struct Outlier {
    method: OutlierMethod,
    /// Indices of the numeric columns that make up a point.
    on: Vec<usize>,
    /// Partition expressions (plus `window_end` when present).
    partition: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
}

impl Outlier {
    /// An outlier operator appending `is_outlier` and `outlier_score` to batches, producing
    /// `schema` (the input columns followed by those two).
    pub fn new(
        method: OutlierMethod,
        on: Vec<usize>,
        partition: Vec<Arc<dyn PhysicalExpr>>,
        schema: SchemaRef,
    ) -> Self {
        Outlier {
            method,
            on,
            partition,
            schema,
        }
    }
}

impl Operator for Outlier {
    fn name(&self) -> &'static str {
        "Outlier"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let n = batch.num_rows();
        let columns: Vec<Float64Array> = self
            .on
            .iter()
            .map(|&i| {
                let c = cast(batch.column(i), &DataType::Float64)?;
                Ok(c.as_any()
                    .downcast_ref::<Float64Array>()
                    .cloned()
                    .unwrap_or_else(|| Float64Array::from(vec![None; n])))
            })
            .collect::<Result<_>>()?;
        // Rows with a NULL coordinate are never outliers and have no score.
        let points: Vec<Option<Vec<f64>>> = (0..n)
            .map(|r| {
                columns
                    .iter()
                    .map(|c| c.is_valid(r).then(|| c.value(r)))
                    .collect()
            })
            .collect();
        let mut groups: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
        let mut order: Vec<Vec<u8>> = Vec::new();
        if self.partition.is_empty() {
            order.push(Vec::new());
            groups.insert(Vec::new(), (0..n).collect());
        } else {
            let keys = self
                .partition
                .iter()
                .map(|e| e.evaluate(&batch).and_then(|v| v.into_array(n)))
                .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
            let converter = RowConverter::new(
                keys.iter()
                    .map(|k| SortField::new(k.data_type().clone()))
                    .collect(),
            )?;
            let rows = converter.convert_columns(&keys)?;
            for (r, row) in rows.iter().enumerate() {
                let key = row.as_ref().to_vec();
                groups
                    .entry(key.clone())
                    .or_insert_with(|| {
                        order.push(key);
                        Vec::new()
                    })
                    .push(r);
            }
        }
        let mut flags = vec![None; n];
        let mut scores = vec![None; n];
        for key in &order {
            let members: Vec<usize> = groups[key]
                .iter()
                .copied()
                .filter(|&r| points[r].is_some())
                .collect();
            let pts: Vec<&[f64]> = members
                .iter()
                .filter_map(|&r| points[r].as_deref())
                .collect();
            for (i, (flag, score)) in detect(self.method, &pts).into_iter().enumerate() {
                flags[members[i]] = Some(flag);
                scores[members[i]] = Some(score);
            }
        }
        for r in 0..n {
            if points[r].is_none() {
                flags[r] = Some(false);
            }
        }
        let mut cols = batch.columns().to_vec();
        cols.push(Arc::new(BooleanArray::from(flags)));
        cols.push(Arc::new(Float64Array::from(scores)));
        Ok(vec![RecordBatch::try_new(self.schema.clone(), cols)?])
    }
}

fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

/// `(is_outlier, score)` for each point.
pub fn detect(method: OutlierMethod, points: &[&[f64]]) -> Vec<(bool, f64)> {
    if points.is_empty() {
        return vec![];
    }
    match method {
        OutlierMethod::Zscore { threshold } => {
            flag_above(per_dimension_max(points, zscore_scores), threshold)
        }
        OutlierMethod::Mad { threshold } => {
            flag_above(per_dimension_max(points, mad_scores), threshold)
        }
        OutlierMethod::Iqr { factor } => {
            flag_above(per_dimension_max(points, |v| iqr_scores(v, factor)), 0.0)
        }
        OutlierMethod::Dbscan { eps, min_points } => dbscan(points, eps, min_points),
        OutlierMethod::Kmeans { k, threshold } => {
            let centroids = kmeans(points, k);
            let scores = points
                .iter()
                .map(|p| {
                    centroids
                        .iter()
                        .map(|c| distance(p, c))
                        .fold(f64::INFINITY, f64::min)
                })
                .collect();
            flag_above(scores, threshold)
        }
    }
}

/// Each score paired with whether it is above `threshold`.
fn flag_above(scores: Vec<f64>, threshold: f64) -> Vec<(bool, f64)> {
    scores.into_iter().map(|s| (s > threshold, s)).collect()
}

/// Each point's largest score over its dimensions, `score` giving the scores of one dimension's
/// values.
fn per_dimension_max(points: &[&[f64]], score: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let mut max = vec![0.0f64; points.len()];
    for d in 0..points[0].len() {
        let values: Vec<f64> = points.iter().map(|p| p[d]).collect();
        for (m, s) in max.iter_mut().zip(score(&values)) {
            *m = m.max(s);
        }
    }
    max
}

/// Distance from the mean in standard deviations (0 when all values are equal).
fn zscore_scores(values: &[f64]) -> Vec<f64> {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    values
        .iter()
        .map(|v| if sd > 0.0 { (v - mean).abs() / sd } else { 0.0 })
        .collect()
}

/// The modified z-score: 0.6745 times the distance from the median over the median absolute
/// deviation (infinite for a value off a median that no other value deviates from).
fn mad_scores(values: &[f64]) -> Vec<f64> {
    let med = median(values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - med).abs()).collect();
    let mad = median(&deviations);
    values
        .iter()
        .map(|v| {
            if mad > 0.0 {
                0.6745 * (v - med).abs() / mad
            } else if *v == med {
                0.0
            } else {
                f64::INFINITY
            }
        })
        .collect()
}

/// How far beyond Tukey's fences `[q1 - factor*iqr, q3 + factor*iqr]` a value lies, in IQRs
/// (0 inside them, infinite outside fences of zero width).
fn iqr_scores(values: &[f64], factor: f64) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (q1, q3) = (quantile(&sorted, 0.25), quantile(&sorted, 0.75));
    let iqr = q3 - q1;
    let (lo, hi) = (q1 - factor * iqr, q3 + factor * iqr);
    values
        .iter()
        .map(|&v| {
            let beyond = if v < lo {
                lo - v
            } else if v > hi {
                v - hi
            } else {
                0.0
            };
            if beyond == 0.0 {
                0.0
            } else if iqr > 0.0 {
                beyond / iqr
            } else {
                f64::INFINITY
            }
        })
        .collect()
}

/// DBSCAN's noise points are the outliers: points neither core (`min_points` within `eps`,
/// themselves included) nor within `eps` of a core point. A point's score is its distance to
/// the nearest core point, or to the nearest other point when there is no cluster at all.
///
/// Points are searched in the order of their first coordinate: only those whose first
/// coordinate lies within `eps` can be within `eps`, and a nearest-point search stops once the
/// first coordinate alone is farther than the best distance found. So a window of n groups
/// costs about n times the neighbours of a point rather than n² (the distances, and so the
/// flags and scores, are exactly those of comparing every pair; the test checks it).
fn dbscan(points: &[&[f64]], eps: f64, min_points: usize) -> Vec<(bool, f64)> {
    let n = points.len();
    // A point whose first coordinate is NaN is at a NaN distance from every point: within
    // `eps` of none, nearest to none. The others, by first coordinate.
    let mut order: Vec<usize> = (0..n).filter(|&i| !points[i][0].is_nan()).collect();
    order.sort_by(|&a, &b| points[a][0].total_cmp(&points[b][0]));
    let first = |i: usize| points[i][0];
    let mut is_core = vec![min_points == 0; n];
    // On one coordinate, the distance grows with the gap in sorted order, so a finite point's
    // neighbours are one run of `order` around it, found by two binary searches.
    let line = eps.is_finite() && points.iter().all(|p| p.len() == 1);
    let mut low = 0;
    for (k, &i) in order.iter().enumerate() {
        let x = first(i);
        let neighbours = if line && x.is_finite() {
            let within = |j: &usize| distance(points[i], points[*j]) <= eps;
            let from = order[..k].partition_point(|j| !within(j));
            k + order[k..].partition_point(within) - from
        } else {
            while low < order.len() && first(order[low]) < x - eps {
                low += 1;
            }
            order[low..]
                .iter()
                .take_while(|&&j| first(j) <= x + eps)
                .filter(|&&j| distance(points[i], points[j]) <= eps)
                .count()
        };
        is_core[i] = neighbours >= min_points;
    }
    let core: Vec<usize> = order.iter().copied().filter(|&i| is_core[i]).collect();
    (0..n)
        .map(|i| {
            let nearest_core = nearest(points, &core, i, true);
            if nearest_core <= eps {
                return (false, nearest_core);
            }
            let score = if core.is_empty() {
                nearest(points, &order, i, false)
            } else {
                nearest_core
            };
            (true, if score.is_finite() { score } else { 0.0 })
        })
        .collect()
}

/// The smallest distance from point `i` to the points `among` (sorted by first coordinate,
/// none of them NaN there; `i` itself among them only if `itself`), or infinity when none is
/// at a number's distance.
fn nearest(points: &[&[f64]], among: &[usize], i: usize, itself: bool) -> f64 {
    let x = points[i][0];
    if x.is_nan() {
        return f64::INFINITY;
    }
    let at = among.partition_point(|&j| points[j][0] < x);
    let mut best = f64::INFINITY;
    for &j in among[at..].iter() {
        if !nearer(points[j][0] - x, best) {
            break;
        }
        if itself || j != i {
            best = best.min(distance(points[i], points[j]));
        }
    }
    for &j in among[..at].iter().rev() {
        if !nearer(x - points[j][0], best) {
            break;
        }
        if itself || j != i {
            best = best.min(distance(points[i], points[j]));
        }
    }
    best
}

/// Whether a point `gap` away along one coordinate may be nearer than `best` (not when the
/// gap is NaN: infinity from infinity).
fn nearer(gap: f64, best: f64) -> bool {
    gap < best
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.5)
}

/// Linear-interpolated quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Lloyd's k-means with a deterministic farthest-point initialisation (first point, then
/// repeatedly the point farthest from the chosen centroids), 50 iterations at most.
fn kmeans(points: &[&[f64]], k: usize) -> Vec<Vec<f64>> {
    let k = k.min(points.len()).max(1);
    let mut centroids: Vec<Vec<f64>> = vec![points[0].to_vec()];
    while centroids.len() < k {
        let far = points
            .iter()
            .max_by(|a, b| {
                let da = centroids
                    .iter()
                    .map(|c| distance(a, c))
                    .fold(f64::INFINITY, f64::min);
                let db = centroids
                    .iter()
                    .map(|c| distance(b, c))
                    .fold(f64::INFINITY, f64::min);
                da.total_cmp(&db)
            })
            .map(|p| p.to_vec())
            .unwrap_or_default();
        centroids.push(far);
    }
    let dims = points[0].len();
    for _ in 0..50 {
        let mut sums = vec![vec![0.0; dims]; k];
        let mut counts = vec![0usize; k];
        for p in points {
            let best = (0..k)
                .min_by(|&a, &b| distance(p, &centroids[a]).total_cmp(&distance(p, &centroids[b])))
                .unwrap_or(0);
            counts[best] += 1;
            for d in 0..dims {
                sums[best][d] += p[d];
            }
        }
        let mut moved = false;
        for c in 0..k {
            if counts[c] == 0 {
                continue;
            }
            let next: Vec<f64> = sums[c].iter().map(|s| s / counts[c] as f64).collect();
            if next != centroids[c] {
                moved = true;
                centroids[c] = next;
            }
        }
        if !moved {
            break;
        }
    }
    centroids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(method: OutlierMethod, values: &[f64]) -> Vec<(bool, f64)> {
        let pts: Vec<Vec<f64>> = values.iter().map(|v| vec![*v]).collect();
        let refs: Vec<&[f64]> = pts.iter().map(|p| p.as_slice()).collect();
        detect(method, &refs)
    }

    #[test]
    fn zscore_flags_the_far_value() {
        // Mean of [1,1,1,1,1,1,1,1,1,11] is 2; population sd is 3; z(11) = 3.
        let r = run(
            OutlierMethod::Zscore { threshold: 2.5 },
            &[1., 1., 1., 1., 1., 1., 1., 1., 1., 11.],
        );
        assert!(r[9].0 && (r[9].1 - 3.0).abs() < 1e-9);
        assert!(r[..9]
            .iter()
            .all(|(o, s)| !o && (s - 1.0 / 3.0).abs() < 1e-9));
    }

    #[test]
    fn mad_and_iqr_are_robust() {
        let values = [10., 11., 12., 13., 14., 100.];
        // Median 12.5; deviations 2.5 1.5 .5 .5 1.5 87.5 → MAD 1.5; score(100) = .6745*87.5/1.5.
        let r = run(OutlierMethod::Mad { threshold: 3.5 }, &values);
        assert!(r[5].0 && (r[5].1 - 0.6745 * 87.5 / 1.5).abs() < 1e-9);
        assert!(!r[0].0);
        // Q1 = 11.25, Q3 = 13.75, IQR 2.5, upper fence 17.5: 100 is (100-17.5)/2.5 = 33 IQRs out.
        let r = run(OutlierMethod::Iqr { factor: 1.5 }, &values);
        assert!(r[5].0 && (r[5].1 - 33.0).abs() < 1e-9);
        assert!(r[..5].iter().all(|(o, _)| !o));
    }

    #[test]
    fn dbscan_finds_noise() {
        // With eps 1 and min_points 3, 0 (0, .5, 1) and 2 (1, 1.5, 2) are core points, and so
        // are .5, 1 and 1.5; 50 has no neighbour and is noise, 48 from the nearest core (2).
        let r = run(
            OutlierMethod::Dbscan {
                eps: 1.0,
                min_points: 3,
            },
            &[0., 0.5, 1., 1.5, 2., 50.],
        );
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![false, false, false, false, false, true]
        );
        assert!(
            (r[5].1 - 48.0).abs() < 1e-9,
            "nearest core point is 2: {}",
            r[5].1
        );
    }

    /// DBSCAN by comparing every pair: what the sorted search must give exactly.
    fn dbscan_every_pair(points: &[&[f64]], eps: f64, min_points: usize) -> Vec<(bool, f64)> {
        let n = points.len();
        let core: Vec<usize> = (0..n)
            .filter(|&i| {
                let near = points.iter().filter(|q| distance(points[i], q) <= eps);
                near.count() >= min_points
            })
            .collect();
        let nearest = |i: usize, among: &mut dyn Iterator<Item = usize>| {
            among
                .map(|j| distance(points[i], points[j]))
                .fold(f64::INFINITY, f64::min)
        };
        (0..n)
            .map(|i| {
                let nearest_core = nearest(i, &mut core.iter().copied());
                if nearest_core <= eps {
                    return (false, nearest_core);
                }
                let score = if core.is_empty() {
                    nearest(i, &mut (0..n).filter(|&j| j != i))
                } else {
                    nearest_core
                };
                (true, if score.is_finite() { score } else { 0.0 })
            })
            .collect()
    }

    #[test]
    fn dbscan_equals_comparing_every_pair() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0];
        for case in 0..400 {
            let n = rng.gen_range(0..60);
            let dims = rng.gen_range(1..4);
            let spread: f64 = [1.0, 10.0, 1000.0][case % 3];
            let points: Vec<Vec<f64>> = (0..n)
                .map(|_| {
                    (0..dims)
                        .map(|_| {
                            if rng.gen_ratio(1, 40) {
                                specials[rng.gen_range(0..specials.len())]
                            } else {
                                // Repeats and near ties, as group sums have.
                                (rng.gen_range(0.0..spread) * 4.0).round() / 4.0
                            }
                        })
                        .collect()
                })
                .collect();
            let refs: Vec<&[f64]> = points.iter().map(|p| p.as_slice()).collect();
            let eps = [0.0, 0.5, 1.0, 3.0, 50.0, -1.0, f64::INFINITY][rng.gen_range(0..7)];
            let min_points = rng.gen_range(0..6);
            let got = dbscan(&refs, eps, min_points);
            let want = dbscan_every_pair(&refs, eps, min_points);
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.0 == w.0 && (g.1 == w.1 || g.1.is_nan() && w.1.is_nan()),
                    "case {case}, point {i} {:?} (eps {eps}, min_points {min_points}): \
                     got {g:?}, comparing every pair gives {w:?}",
                    points[i]
                );
            }
        }
    }

    #[test]
    fn kmeans_flags_points_far_from_centroids() {
        // Two clusters around 0 and 100 and a point at 40 (assigned to the 0 cluster whose mean
        // moves to 10): 40 is 30 from its centroid.
        let r = run(
            OutlierMethod::Kmeans {
                k: 2,
                threshold: 20.0,
            },
            &[0., 0., 0., 100., 100., 40.],
        );
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![false, false, false, false, false, true]
        );
        assert!((r[5].1 - 30.0).abs() < 1e-9);
    }
}
