//! Plans a windowed query's aggregation: GROUP BY over TUMBLE, HOP or CUMULATE onto a
//! window aggregate (with grouping sets), over SESSION onto a session window, and a window
//! without GROUP BY onto the operator that gives each row its windows' bounds.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr as LExpr;

use super::catalog::StreamDef;
use super::context::PlanContext;
use super::expr::{mentions_window, physical, physical_all, simplify};
use super::from::WindowSpec;
use super::grouping;
use super::spec::{
    Aggregates, OperatorSpec, SessionWindowSpec, WindowAggregateSpec, WindowAssignSpec,
};
use crate::error::{Error, Result};
use crate::operators::aggregates::AggregateSpec;
use crate::operators::session_window::GroupColumn;
use crate::operators::window_aggregate::WindowedInput;

/// The operator that gives each of the stream's rows its windows' bounds (no GROUP BY).
pub(super) fn window_assign(
    window: Option<WindowSpec>,
    stream: &StreamDef,
    scan_schema: &SchemaRef,
) -> Result<OperatorSpec> {
    let window = match window {
        Some(WindowSpec::Session { .. }) => {
            return Err(Error::NotSupported(
                "SESSION without GROUP BY: a session's bounds are known only when it closes; \
                 group by window_start, window_end"
                    .into(),
            ))
        }
        Some(w) => w,
        None => return Err(Error::Internal("window bounds without a window".into())),
    };
    let time_column = stream
        .event_time
        .as_ref()
        .map(|e| e.column)
        .ok_or_else(|| Error::Internal("windowed stream without event time".into()))?;
    Ok(OperatorSpec::WindowAssign(WindowAssignSpec {
        window,
        input: WindowedInput {
            schema: scan_schema.clone(),
            time_column,
        },
    }))
}

/// Maps a windowed aggregation onto a window aggregate or a session window.
#[allow(
    clippy::too_many_arguments,
    reason = "the planner's state for one aggregation, passed as it is"
)]
/// `relation` names the input (a stream, or a smaller window's results being rolled up) and
/// `time_column` is its event time's index in `scan_schema`.
pub(super) fn plan_aggregate(
    ctx: &PlanContext,
    spec: WindowSpec,
    relation: &str,
    time_column: usize,
    scan_schema: &SchemaRef,
    input: &DFSchema,
    group_expr: &[LExpr],
    aggr_expr: &[LExpr],
    schema: SchemaRef,
) -> Result<OperatorSpec> {
    let windowed = WindowedInput {
        schema: scan_schema.clone(),
        time_column,
    };
    let written = group_expr;
    let (distinct, grouping_sets) = match group_expr {
        [LExpr::GroupingSet(set)] => {
            let (distinct, sets) = grouping::expand(set)?;
            grouping::check_window_columns(&distinct, &sets)?;
            (distinct, sets)
        }
        _ => (group_expr.to_vec(), Vec::new()),
    };
    let group_expr = &distinct[..];
    if let Some(g) = group_expr
        .iter()
        .find(|g| matches!(g, LExpr::GroupingSet(_)))
    {
        return Err(Error::NotSupported(format!("{g} is not supported")));
    }
    let window_col = |e: &LExpr| match e {
        LExpr::Column(c) if c.name == "window_start" => Some(GroupColumn::WindowStart),
        LExpr::Column(c) if c.name == "window_end" => Some(GroupColumn::WindowEnd),
        _ => None,
    };
    if !group_expr.iter().any(|g| window_col(g).is_some()) {
        return Err(Error::plan(
            sqlstate::GROUPING_ERROR,
            "a windowed query must GROUP BY window_start or window_end",
        ));
    }
    let aggregates = aggregates(ctx, input, aggr_expr)?;
    match spec {
        WindowSpec::Tumble { .. } | WindowSpec::Hop { .. } | WindowSpec::Cumulate { .. } => {
            Ok(OperatorSpec::WindowAggregate(WindowAggregateSpec {
                window: spec,
                input: windowed,
                group: physical_all(ctx, group_expr, input)?,
                grouping_sets,
                aggregates,
                schema,
                keys: written.to_vec(),
                relation: relation.to_string(),
            }))
        }
        WindowSpec::Session { .. } if !grouping_sets.is_empty() => Err(Error::NotSupported(
            "GROUPING SETS, ROLLUP and CUBE over SESSION windows; use TUMBLE, HOP or CUMULATE"
                .into(),
        )),
        WindowSpec::Session { gap } => {
            let mut layout = Vec::new();
            let mut keys = Vec::new();
            for g in group_expr {
                match window_col(g) {
                    Some(w) => layout.push(w),
                    None => {
                        if mentions_window(g) {
                            return Err(Error::NotSupported(
                                "session windows group by window_start/window_end only as bare columns"
                                    .into(),
                            ));
                        }
                        layout.push(GroupColumn::Key(keys.len()));
                        keys.push(physical(ctx, g, input)?);
                    }
                }
            }
            Ok(OperatorSpec::SessionWindow(SessionWindowSpec {
                gap,
                input: windowed,
                keys,
                layout,
                aggregates,
                schema,
                group: group_expr.to_vec(),
                relation: relation.to_string(),
            }))
        }
    }
}

/// The aggregate calls of a windowed query, compiled against its input.
fn aggregates(ctx: &PlanContext, input: &DFSchema, aggr_expr: &[LExpr]) -> Result<Aggregates> {
    let mut planned = Vec::new();
    for e in aggr_expr {
        #[allow(
            deprecated,
            reason = "DataFusion 55 has no other public way to build an aggregate with its FILTER"
        )]
        let (expr, filter, order) =
            datafusion::physical_planner::create_aggregate_expr_and_maybe_filter(
                &simplify(e, input)?,
                input,
                input.as_arrow(),
                ctx.state().execution_props(),
            )?;
        if !order.is_empty() {
            return Err(Error::NotSupported(
                "ORDER BY inside an aggregate is not supported".into(),
            ));
        }
        if mentions_window(e) {
            return Err(Error::NotSupported(
                "aggregates cannot take window_start or window_end as arguments".into(),
            ));
        }
        // Functions that exist only over history (MAD, QUANTILE, ...) refuse here, when the
        // query is created, rather than with its first row.
        expr.create_accumulator()?;
        planned.push(AggregateSpec { expr, filter });
    }
    Ok(Aggregates {
        exprs: aggr_expr.to_vec(),
        input: Arc::new(input.as_arrow().clone()),
        planned,
    })
}
