//! Plans window Top-N, Flink's form: `ROW_NUMBER() OVER (PARTITION BY window_start,
//! window_end [, keys] ORDER BY ...) AS rn` over a windowed aggregate's results, then
//! `WHERE rn <= n` in an outer query. The `n` found in that WHERE lets the operator drop the
//! rows past it at once; it is bounded by [`crate::limits::MAX_TOP_N`].

use crate::error::sqlstate;
use datafusion::arrow::compute::SortOptions;
use datafusion::common::DFSchema;
use datafusion::logical_expr::expr::{BinaryExpr, Cast, TryCast};
use datafusion::logical_expr::logical_plan::Window;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    Expr as LExpr, LogicalPlan, Operator as Op, WindowFunctionDefinition,
};

use super::context::PlanContext;
use super::expr::physical;
use super::spec::{OperatorSpec, WindowRankSpec};
use crate::error::{Error, Result};
use crate::operators::window_rank::Numbering;

/// Whether a window node computes `ROW_NUMBER()`, `RANK()` or `DENSE_RANK()`.
pub(super) fn is_ranking(w: &Window) -> bool {
    w.window_expr.iter().any(|e| numbering(e).is_some())
}

/// The numbering `e` computes, if it is `ROW_NUMBER()`, `RANK()` or `DENSE_RANK()`.
fn numbering(e: &LExpr) -> Option<Numbering> {
    match e.clone().unalias_nested().data {
        LExpr::WindowFunction(wf) => match &wf.fun {
            WindowFunctionDefinition::WindowUDF(f) => Numbering::of_function(f.name()),
            _ => None,
        },
        _ => None,
    }
}

/// The window Top-N operator for `w` over a windowed aggregate's results (`input`); `later`
/// are the plan nodes above it, where `WHERE rn <= n` may be found.
pub(super) fn plan_window_rank(
    ctx: &PlanContext,
    input: &DFSchema,
    w: &Window,
    later: &[&LogicalPlan],
    relation: &str,
) -> Result<OperatorSpec> {
    let unsupported = |m: &str| Error::NotSupported(m.to_string());
    let [expr] = &w.window_expr[..] else {
        return Err(unsupported(
            "ROW_NUMBER(), RANK() or DENSE_RANK() must be the only window function of its \
             SELECT (window Top-N)",
        ));
    };
    let Some(numbering) = numbering(expr) else {
        return Err(unsupported(
            "window Top-N takes ROW_NUMBER(), RANK() or DENSE_RANK()",
        ));
    };
    let LExpr::WindowFunction(wf) = expr.clone().unalias_nested().data else {
        return Err(unsupported("window Top-N takes a window function"));
    };
    let p = &wf.params;
    let bound = |e: &LExpr| matches!(e, LExpr::Column(c) if c.name == "window_start" || c.name == "window_end");
    if !p.partition_by.iter().any(bound) {
        return Err(unsupported(
            "ROW_NUMBER(), RANK() and DENSE_RANK() over windowed results must PARTITION BY \
             window_start, window_end (window Top-N)",
        ));
    }
    let arrow = input.as_arrow();
    let time_column = arrow
        .index_of("window_end")
        .or_else(|_| arrow.index_of("window_start"))
        .map_err(|_| {
            Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                "window Top-N needs window_end (or window_start) among the inner query's columns",
            )
        })?;
    let partition = p
        .partition_by
        .iter()
        .map(|e| physical(ctx, e, input))
        .collect::<Result<Vec<_>>>()?;
    let order = p
        .order_by
        .iter()
        .map(|s| {
            let options = SortOptions {
                descending: !s.asc,
                nulls_first: s.nulls_first,
            };
            Ok((physical(ctx, &s.expr, input)?, options))
        })
        .collect::<Result<Vec<_>>>()?;
    let name = w.schema.field(w.schema.fields().len() - 1).name().clone();
    let limit = top_n(&name, later)?;
    if let Some(n) = limit {
        if n > crate::limits::MAX_TOP_N {
            return Err(Error::limit(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "window Top-N keeps at most {} rows per window; {n} is too many",
                    crate::limits::MAX_TOP_N
                ),
            ));
        }
    }
    Ok(OperatorSpec::WindowRank(WindowRankSpec {
        partition,
        order,
        time_column,
        limit,
        numbering,
        input: std::sync::Arc::new(arrow.clone()),
        schema: std::sync::Arc::new(w.schema.as_arrow().clone()),
        function: expr.clone(),
        relation: relation.to_string(),
    }))
}

/// The `n` of the first WHERE above the ranking that keeps `rn <= n` (or `rn < n + 1`),
/// following the number's column through projections and aliases.
fn top_n(column: &str, later: &[&LogicalPlan]) -> Result<Option<u64>> {
    let mut name = column.to_string();
    for node in later {
        match node {
            LogicalPlan::SubqueryAlias(_) => {}
            LogicalPlan::Projection(p) => {
                let at = p.expr.iter().position(
                    |e| matches!(e.clone().unalias_nested().data, LExpr::Column(c) if c.name == name),
                );
                match at {
                    Some(i) => name = p.schema.field(i).name().clone(),
                    None => return Ok(None),
                }
            }
            LogicalPlan::Filter(f) => {
                return Ok(split_conjunction(&f.predicate)
                    .into_iter()
                    .filter_map(|c| bound_of(c, &name))
                    .min())
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// `n` if `e` is `rn <= n`, `rn < n + 1`, `n >= rn` or `n + 1 > rn` for the column `name`.
fn bound_of(e: &LExpr, name: &str) -> Option<u64> {
    let LExpr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return None;
    };
    // Type coercion may have cast both sides (to a decimal, comparing UInt64 with Int64).
    let uncast = |mut e: &LExpr| {
        while let LExpr::Cast(Cast { expr, .. }) | LExpr::TryCast(TryCast { expr, .. }) = e {
            e = expr;
        }
        e.clone()
    };
    let is_rn = |e: &LExpr| matches!(uncast(e), LExpr::Column(c) if c.name == name);
    let value = |e: &LExpr| match uncast(e) {
        LExpr::Literal(v, _) => v.to_string().parse::<i64>().ok(),
        _ => None,
    };
    let (n, strict) = match (op, is_rn(left), is_rn(right)) {
        (Op::LtEq, true, false) => (value(right)?, false),
        (Op::Lt, true, false) => (value(right)?, true),
        (Op::GtEq, false, true) => (value(left)?, false),
        (Op::Gt, false, true) => (value(left)?, true),
        (Op::Eq, true, false) if value(right) == Some(1) => (1, false),
        _ => return None,
    };
    let n = if strict { n - 1 } else { n };
    Some(n.max(0) as u64)
}
