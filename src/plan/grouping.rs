//! `GROUPING SETS`, `ROLLUP` and `CUBE` in a windowed `GROUP BY`: the distinct group
//! expressions, and for each grouping set the ones it groups by (ROLLUP from all expressions
//! down to none; CUBE every subset).

use crate::error::sqlstate;
use datafusion::logical_expr::{Expr as LExpr, GroupingSet};

use crate::error::{Error, Result};

/// The distinct group expressions and, per grouping set, the indices of its members.
pub(super) fn expand(set: &GroupingSet) -> Result<(Vec<LExpr>, Vec<Vec<usize>>)> {
    let distinct: Vec<LExpr> = set.distinct_expr().into_iter().cloned().collect();
    let index = |e: &LExpr| {
        distinct
            .iter()
            .position(|d| d == e)
            .ok_or_else(|| Error::Internal(format!("grouping expression {e} not found")))
    };
    let sets: Vec<Vec<usize>> = match set {
        GroupingSet::GroupingSets(groups) => groups
            .iter()
            .map(|g| g.iter().map(index).collect::<Result<Vec<_>>>())
            .collect::<Result<_>>()?,
        GroupingSet::Rollup(exprs) => (0..=exprs.len()).rev().map(|n| (0..n).collect()).collect(),
        GroupingSet::Cube(exprs) => {
            if exprs.len() > 10 {
                return Err(Error::limit(
                    sqlstate::PROGRAM_LIMIT_EXCEEDED,
                    format!(
                        "CUBE of {} expressions makes {} grouping sets; the limit is 10 \
                         expressions",
                        exprs.len(),
                        1u64 << exprs.len().min(63)
                    ),
                ));
            }
            let n = exprs.len();
            (0..1usize << n)
                .map(|mask| (0..n).filter(|i| mask & (1 << i) != 0).collect())
                .collect()
        }
    };
    if sets.len() > 1024 {
        return Err(Error::limit(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            format!("{} grouping sets; the limit is 1024", sets.len()),
        ));
    }
    Ok((distinct, sets))
}

/// Fails unless every grouping set groups by each window column the query groups by, as
/// Flink requires (`GROUP BY window_start, window_end, GROUPING SETS (...)`).
pub(super) fn check_window_columns(distinct: &[LExpr], sets: &[Vec<usize>]) -> Result<()> {
    let windows: Vec<usize> = distinct
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(e, LExpr::Column(c) if c.name == "window_start" || c.name == "window_end")
        })
        .map(|(i, _)| i)
        .collect();
    if sets.iter().any(|s| windows.iter().any(|w| !s.contains(w))) {
        return Err(Error::plan(
            sqlstate::GROUPING_ERROR,
            "every grouping set must group by the window: GROUP BY window_start, window_end, \
             GROUPING SETS (...) | ROLLUP (...) | CUBE (...)",
        ));
    }
    Ok(())
}
