//! Windows of one input with different sizes share work: a tumbling-window aggregate whose size
//! is a multiple of another's, over the same rows, keys and decomposable aggregates (COUNT,
//! SUM, MIN, MAX without DISTINCT), is computed from the smaller one's results instead of from
//! the rows: a 5-minute `COUNT(*)` per host is the `SUM` of the five 1-minute counts. The
//! operator graph asks [`rollup`] for such a plan when it attaches a query whose window
//! aggregate no existing node computes.
//!
//! The rolled-up operator is an ordinary [`WindowAggregate`](crate::operators::WindowAggregate)
//! over the smaller window's result rows, with their `window_start` as event time. Every such
//! row reaches it before the watermark that closes its larger window (the smaller window ends
//! first, and a node emits before its children advance), so none is late. A query that joins
//! a running smaller window starts with that window's state as it stands, as any query that
//! shares a node does.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::{Column, DFSchema};
use datafusion::functions_aggregate::expr_fn;
use datafusion::logical_expr::Expr as LExpr;

use super::aggregate::plan_aggregate;
use super::context::PlanContext;
use super::query::WindowSpec;
use super::spec::{OperatorSpec, WindowAggregateSpec};

/// The name the smaller window's result rows go by as the rolled-up aggregate's input.
const RELATION: &str = "rollup_input";

/// A spec that computes `target`'s output from `base`'s output rows, if `target` is a larger
/// tumbling window over the same input, keys and aggregates that decompose.
pub fn rollup(base: &WindowAggregateSpec, target: &WindowAggregateSpec) -> Option<OperatorSpec> {
    let (WindowSpec::Tumble { size: small }, WindowSpec::Tumble { size: large }) =
        (base.window, target.window)
    else {
        return None;
    };
    if large <= small
        || !base.grouping_sets.is_empty()
        || !target.grouping_sets.is_empty()
        || !large.as_nanos().is_multiple_of(small.as_nanos())
        || base.input != target.input
        || base.keys != target.keys
        || base.aggregates.input != target.aggregates.input
    {
        return None;
    }
    let start = base
        .schema
        .fields()
        .iter()
        .position(|f| f.name() == "window_start")?;
    let scan = rollup_input(&base.schema, start);
    let input = DFSchema::try_from_qualified_schema(RELATION, &scan).ok()?;
    let column = |name: &str| LExpr::Column(Column::new(Some(RELATION), name));
    // Group by the same keys, now columns of the base's rows, and the larger window's bounds.
    let group: Vec<LExpr> = target
        .keys
        .iter()
        .enumerate()
        .map(|(i, key)| match key {
            LExpr::Column(c) if c.name == "window_start" || c.name == "window_end" => {
                column(&c.name)
            }
            _ => column(&format!("c{i}")),
        })
        .collect();
    // Each aggregate combines the base's partial results of the same aggregate.
    let mut aggregates = Vec::new();
    for agg in &target.aggregates.exprs {
        let j = base.aggregates.exprs.iter().position(|b| b == agg)?;
        let partial = column(&format!("c{}", target.keys.len() + j));
        aggregates.push(combine(agg)?(partial));
    }
    let spec = plan_aggregate(
        &PlanContext::new(),
        target.window,
        RELATION,
        start,
        &scan,
        &input,
        &group,
        &aggregates,
        Arc::clone(&target.schema),
    )
    .ok()?;
    let OperatorSpec::WindowAggregate(spec) = spec else {
        return None;
    };
    // The combined aggregates must give the target's types (SUM of counts is still BIGINT).
    let aggregate_fields = &target.schema.fields()[target.keys.len()..];
    let same_types = spec.aggregates.planned.len() == aggregate_fields.len()
        && spec
            .aggregates
            .planned
            .iter()
            .zip(aggregate_fields)
            .all(|(p, f)| p.expr.field().data_type() == f.data_type());
    same_types.then_some(OperatorSpec::WindowAggregate(spec))
}

/// The base's output rows as the rolled-up aggregate reads them: its columns renamed `c0`,
/// `c1`, ... (event time: its `window_start`, column `start`), then the larger window's bounds.
fn rollup_input(base: &SchemaRef, start: usize) -> SchemaRef {
    let mut fields: Vec<Field> = base
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| Field::new(format!("c{i}"), f.data_type().clone(), true))
        .collect();
    let bound = base.field(start).data_type().clone();
    fields.push(Field::new("window_start", bound.clone(), false));
    fields.push(Field::new("window_end", bound, false));
    Arc::new(Schema::new(fields))
}

/// The aggregate that combines partial results of `agg` into the result over their union.
fn combine(agg: &LExpr) -> Option<fn(LExpr) -> LExpr> {
    let LExpr::AggregateFunction(f) = agg else {
        return None;
    };
    if f.params.distinct || !f.params.order_by.is_empty() {
        return None;
    }
    match f.func.name() {
        "count" | "sum" => Some(expr_fn::sum),
        "min" => Some(expr_fn::min),
        "max" => Some(expr_fn::max),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::catalog::Catalog;

    fn window_spec(sql: &str) -> WindowAggregateSpec {
        let catalog = Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, op TEXT, v BIGINT, d DOUBLE PRECISION, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        )
        .unwrap();
        let plan = crate::plan(sql, &catalog).unwrap();
        plan.specs
            .into_iter()
            .find_map(|s| match s {
                OperatorSpec::WindowAggregate(w) => Some(w),
                _ => None,
            })
            .unwrap()
    }

    fn q(minutes: u32, aggs: &str, filter: &str) -> WindowAggregateSpec {
        window_spec(&format!(
            "SELECT host, window_end, {aggs} FROM TUMBLE(s, ts, INTERVAL '{minutes}' MINUTE) \
             WHERE {filter} GROUP BY host, window_start, window_end"
        ))
    }

    #[test]
    fn larger_multiples_with_decomposable_aggregates_roll_up() {
        let aggs = "COUNT(*), SUM(v), MIN(d), MAX(v)";
        let base = q(1, aggs, "op = 'write'");
        let target = q(5, aggs, "op = 'write'");
        let Some(OperatorSpec::WindowAggregate(r)) = rollup(&base, &target) else {
            panic!("no rollup");
        };
        assert_eq!(r.window, target.window);
        assert_eq!(r.schema, target.schema);
        // Fewer aggregates than the base computes is fine too.
        assert!(rollup(&base, &q(5, "SUM(v)", "op = 'write'")).is_some());
    }

    #[test]
    fn what_does_not_decompose_or_align_does_not_roll_up() {
        let base = q(2, "COUNT(*), SUM(v), AVG(v)", "op = 'write'");
        for target in [
            q(5, "COUNT(*)", "op = 'write'"),          // not a multiple
            q(4, "AVG(v)", "op = 'write'"),            // AVG of averages is wrong
            q(4, "COUNT(DISTINCT v)", "op = 'write'"), // not computed by the base
            q(1, "COUNT(*)", "op = 'write'"),          // smaller
        ] {
            assert!(rollup(&base, &target).is_none(), "{:?}", target.window);
        }
        let other_keys = window_spec(
            "SELECT op, COUNT(*) FROM TUMBLE(s, ts, INTERVAL '4' MINUTE) \
             WHERE op = 'write' GROUP BY op, window_start, window_end",
        );
        assert!(rollup(&base, &other_keys).is_none());
    }
}
