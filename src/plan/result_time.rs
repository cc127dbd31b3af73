//! Which result columns of a planned query carry its input's event time unchanged, and how
//! far behind its input's watermark a row may come out with that time: what a `UNION ALL`
//! branch reading the query's results needs, to merge them on one clock with other streams.
//!
//! A stream's rows, and whatever filters, projects, enriches or ranks them, carry the
//! stream's event-time column and come out no earlier than the watermark that let them
//! through (delay 0). A window's results carry `window_end`, emitted when the watermark
//! reaches it (delay 0). An interval join emits a pair when its later row arrives and an
//! unmatched row when its interval closes: at watermark `W`, every later output has a left
//! time of at least `W - max(upper, 0)` and a right time of at least `W + min(lower, 0)`
//! (the bounds of `right.ts - left.ts`), so those are the two columns' delays; a side that an
//! outer join may leave NULL carries no time. A `MATCH_RECOGNIZE`'s rows carry a match row's
//! time (`ALL ROWS PER MATCH`'s event-time column, a measure `v.ts`, `FIRST(v.ts)`,
//! `LAST(v.ts)` or `ts`) when `WITHIN` bounds its matches: an attempt alive at the row (or
//! watermark) that decides it started at most `WITHIN` before, so that is the delay; without
//! `WITHIN` a match's rows may lie any distance behind, and they carry none.

use datafusion::arrow::datatypes::Schema;
use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr as LExpr;
use datafusion::sql::sqlparser::ast as sq;

use super::catalog::{normalize, normalize_object};
use super::spec::MatchRecognizeSpec;
use crate::operators::interval_join::IntervalKind;
use crate::operators::pattern::OutputColumn;

/// A result column that carries event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeColumn {
    /// Its position in the results.
    pub column: usize,
    /// How far (nanoseconds, at least 0) behind the watermark of the query's input a result
    /// row may come out with this time: the watermark of the results, as a stream, is the
    /// input's minus this.
    pub delay: i64,
}

impl TimeColumn {
    /// A column that comes out no earlier than the watermark.
    pub fn on_time(column: usize) -> TimeColumn {
        TimeColumn { column, delay: 0 }
    }
}

/// The time columns after a projection of `exprs` over rows of `input`: each expression
/// that is (an alias of) a time column, as it is.
pub(super) fn through_projection(
    times: &[TimeColumn],
    exprs: &[LExpr],
    input: &DFSchema,
) -> Vec<TimeColumn> {
    let mut out = Vec::new();
    for (i, e) in exprs.iter().enumerate() {
        let LExpr::Column(c) = e.clone().unalias() else {
            continue;
        };
        let Ok(from) = input.index_of_column(&c) else {
            continue;
        };
        if let Some(t) = times.iter().find(|t| t.column == from) {
            out.push(TimeColumn {
                column: i,
                delay: t.delay,
            });
        }
    }
    out
}

/// The time columns of a windowed aggregate's rows, whose schema is `schema`: its
/// `window_end`, if it keeps it.
pub(super) fn window_results(schema: &DFSchema) -> Vec<TimeColumn> {
    schema
        .fields()
        .iter()
        .position(|f| f.name() == "window_end")
        .map(TimeColumn::on_time)
        .into_iter()
        .collect()
}

/// The time columns of an interval (or window) join's rows: the left's at `left` and the
/// right's at `right` (positions in the joined rows), those of each side that the join
/// never leaves NULL; `lower..=upper` bounds `right.time - left.time`.
pub(super) fn join_results(
    kind: IntervalKind,
    left: usize,
    right: usize,
    lower: i64,
    upper: i64,
) -> Vec<TimeColumn> {
    let left = TimeColumn {
        column: left,
        delay: upper.max(0),
    };
    let right = TimeColumn {
        column: right,
        delay: lower.saturating_neg().max(0),
    };
    match kind {
        IntervalKind::Inner => vec![left, right],
        IntervalKind::Left | IntervalKind::Anti => vec![left],
        IntervalKind::Right => vec![right],
        IntervalKind::Full => Vec::new(),
    }
}

/// The time columns of a `MATCH_RECOGNIZE`'s rows (see the module docs): none without
/// `WITHIN`. `input` is the schema of the rows it matches.
pub(super) fn pattern_results(spec: &MatchRecognizeSpec, input: &Schema) -> Vec<TimeColumn> {
    let m = &spec.matcher;
    let Some(within) = m.within else {
        return Vec::new();
    };
    let delay = crate::time::duration_nanos(within);
    let et = input.field(m.time_column).name();
    m.measures
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| match c {
            OutputColumn::Input(i) => *i == m.time_column,
            OutputColumn::Measure(i) => spec
                .measures
                .get(*i)
                .is_some_and(|measure| reads_row_time(&measure.expr, et)),
            OutputColumn::TimedOut => false,
        })
        .map(|(column, _)| TimeColumn { column, delay })
        .collect()
}

/// Whether a measure is a match row's event time (column `et`) as it is: `ts`, `v.ts`,
/// `FIRST(v.ts [, n])`, `LAST(v.ts [, n])`, maybe under `RUNNING` or `FINAL`.
fn reads_row_time(e: &sq::Expr, et: &str) -> bool {
    use sq::{Expr, FunctionArg, FunctionArgExpr, FunctionArguments};
    match e {
        Expr::Identifier(i) => normalize(i) == et,
        Expr::CompoundIdentifier(parts) => parts.len() == 2 && normalize(&parts[1]) == et,
        Expr::Nested(inner) => reads_row_time(inner, et),
        Expr::Function(f) => {
            let name = normalize_object(&f.name).to_ascii_uppercase();
            if !["FIRST", "LAST", "RUNNING", "FINAL"].contains(&name.as_str()) {
                return false;
            }
            let FunctionArguments::List(list) = &f.args else {
                return false;
            };
            match list.args.first() {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))) => reads_row_time(arg, et),
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_joins_times_lag_by_its_bounds() {
        // right.ts BETWEEN left.ts - 5 s AND left.ts + 30 s.
        let (lo, hi) = (-5_000_000_000, 30_000_000_000);
        assert_eq!(
            join_results(IntervalKind::Inner, 0, 3, lo, hi),
            vec![
                TimeColumn {
                    column: 0,
                    delay: hi
                },
                TimeColumn {
                    column: 3,
                    delay: -lo
                }
            ]
        );
        // right.ts BETWEEN left.ts AND left.ts + 10 s: the right's time is never behind.
        assert_eq!(
            join_results(IntervalKind::Right, 0, 3, 0, 10)[0],
            TimeColumn::on_time(3)
        );
        assert_eq!(join_results(IntervalKind::Anti, 1, 9, 0, 10).len(), 1);
        assert!(join_results(IntervalKind::Full, 0, 3, 0, 10).is_empty());
    }
}
