//! Plans a continuous query: finds its stream and window in `FROM`, lets DataFusion's SQL
//! planner resolve names and types against the stream's schema, then maps the logical plan,
//! node by node, onto incremental operators.

use crate::error::sqlstate;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::DFSchema;
use datafusion::common::DataFusionError;
use datafusion::logical_expr::expr::{BinaryExpr, Placeholder};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr as LExpr, LogicalPlan};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::sql::planner::SqlToRel;
use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, FunctionArg, FunctionArgExpr, ObjectName, ObjectNamePart, SetExpr,
    TableFactor,
};

use super::catalog::{normalize, normalize_object, Catalog, StreamDef};
use super::clauses;
use super::context::PlanContext;
use super::evidence;
use super::explain;
use super::grouping;
use super::pattern::{plan_match_recognize, PlannedPattern};
use super::spec::{
    Aggregates, FilterSpec, HistorySpec, OperatorSpec, ProjectSpec, SessionWindowSpec,
    WindowAggregateSpec, WindowAssignSpec,
};
use super::topn;
use crate::error::{Error, Result};
use crate::operators::aggregates::AggregateSpec;
use crate::operators::history::{FrameStart, HistoryAgg, HistoryColumn, HistoryFn};
use crate::operators::robust::FrameFn;
use crate::operators::session_window::GroupColumn;
use crate::operators::window_aggregate::WindowedInput;
use crate::operators::Operator;
use crate::sql::interval::interval_duration;
use crate::sql::Clauses;
use datafusion::scalar::ScalarValue;

/// A window table function in `FROM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowSpec {
    /// `TUMBLE(s, ts, size)`.
    Tumble {
        /// Window length.
        size: Duration,
    },
    /// `HOP(s, ts, slide, size)`.
    Hop {
        /// Distance between window starts.
        slide: Duration,
        /// Window length.
        size: Duration,
    },
    /// `CUMULATE(s, ts, step, size)`: windows that start together every `size` and end
    /// every `step` up to `size` (Flink's cumulating windows).
    Cumulate {
        /// Distance between window ends.
        step: Duration,
        /// The longest window's length, a whole multiple of `step`.
        size: Duration,
    },
    /// `SESSION(s, ts, gap)`.
    Session {
        /// Inactivity that closes a session.
        gap: Duration,
    },
}

/// A planned continuous query: the stream it reads and the specs of the operators its rows
/// pass through.
pub struct QueryPlan {
    /// The input stream.
    pub stream: Arc<StreamDef>,
    /// The window in `FROM`, if any.
    pub window: Option<WindowSpec>,
    /// The operators, from source to result.
    pub specs: Vec<OperatorSpec>,
    /// Schema of the result rows.
    pub schema: SchemaRef,
}

impl QueryPlan {
    /// Fresh operators built from the specs, from source to result.
    pub fn build_operators(&self) -> Result<Vec<Box<dyn Operator>>> {
        self.specs.iter().map(OperatorSpec::build).collect()
    }

    /// EXPLAIN as indented text.
    pub fn explain_text(&self) -> String {
        explain::explain_text(
            &self.stream,
            self.window.as_ref(),
            &self.explain_nodes(),
            &self.schema,
        )
    }

    /// EXPLAIN as JSON (shape documented in [`crate::plan::explain`]).
    pub fn explain_json(&self) -> serde_json::Value {
        explain::explain_json(
            &self.stream,
            self.window.as_ref(),
            &self.explain_nodes(),
            &self.schema,
        )
    }

    fn explain_nodes(&self) -> Vec<explain::ExplainNode> {
        self.specs.iter().map(OperatorSpec::explain).collect()
    }
}

impl std::fmt::Debug for QueryPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.specs.iter().map(OperatorSpec::name).collect();
        f.debug_struct("QueryPlan")
            .field("stream", &self.stream.name)
            .field("window", &self.window)
            .field("operators", &names)
            .finish()
    }
}

/// Plans `query` against the catalog.
pub fn plan_query(query: &sq::Query, catalog: &Catalog) -> Result<QueryPlan> {
    plan_continuous(query, &Clauses::default(), catalog)
}

/// Plans `query` with its anomaly-model clauses: an `OUTLIER` clause's operator runs on
/// each window's complete results, then its `HAVING` filters them; an `INVARIANT` clause's
/// operator learns from the results during training and then passes on those that break it.
pub fn plan_continuous(
    query: &sq::Query,
    clauses: &Clauses,
    catalog: &Catalog,
) -> Result<QueryPlan> {
    let mut plan = plan_select(query, clauses, catalog)?;
    if let Some(clause) = &clauses.outlier {
        clauses::add_outlier(&mut plan, clause)?;
    }
    if let Some(clause) = &clauses.invariant {
        clauses::add_invariant(&mut plan, clause)?;
    }
    if let Some(clause) = &clauses.suppress {
        clauses::add_suppress(&mut plan, clause)?;
    }
    // What the operators' constructors check (a pattern that matches no rows, a window
    // that is not positive, ...) is a planning error: check it now, once.
    plan.build_operators()?;
    Ok(plan)
}

fn plan_select(query: &sq::Query, clauses: &Clauses, catalog: &Catalog) -> Result<QueryPlan> {
    let mut query = query.clone();
    if query.order_by.is_some() || query.limit_clause.is_some() || query.with.is_some() {
        return Err(Error::NotSupported(
            "ORDER BY, LIMIT and WITH are not supported in continuous queries".into(),
        ));
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return Err(Error::NotSupported(
            "a continuous query must be a single SELECT".into(),
        ));
    };
    if select.from.len() != 1 || !select.from[0].joins.is_empty() {
        return Err(Error::NotSupported(
            "a continuous query reads exactly one stream; joins are not supported yet".into(),
        ));
    }
    let (stream, window, pattern) = resolve_from(&mut select.from[0].relation, clauses, catalog)?;
    evidence::rewrite(&mut query, &stream, window.is_some() && pattern.is_none())?;
    let scan_schema = match (&pattern, window) {
        (Some(p), _) => p.schema.clone(),
        (None, None) => stream.schema.clone(),
        (None, Some(_)) => windowed_schema(&stream)?,
    };
    let mut ctx = PlanContext::new();
    ctx.add_table(&stream.name, scan_schema.clone())?;
    let planner = SqlToRel::new(&ctx);
    let plan = planner.sql_statement_to_plan(sq::Statement::Query(Box::new(query)))?;
    let plan =
        ctx.state()
            .analyzer()
            .execute_and_check(plan, ctx.state().config_options(), |_, _| {})?;

    let mut chain = Vec::new();
    let mut node = &plan;
    loop {
        match node {
            LogicalPlan::TableScan(_) => break,
            LogicalPlan::Projection(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::Aggregate(_)
            | LogicalPlan::Window(_)
            | LogicalPlan::SubqueryAlias(_) => {
                chain.push(node);
                node = node.inputs()[0];
            }
            other => {
                return Err(Error::NotSupported(format!(
                    "{} is not supported in continuous queries yet",
                    other.display()
                )))
            }
        }
    }
    chain.reverse();

    let mut specs = Vec::new();
    if let Some(p) = pattern {
        specs.push(OperatorSpec::Pattern(Box::new(p.spec)));
    }
    // Without GROUP BY, a window function gives each row its windows' bounds (WindowAssign);
    // a WHERE that does not read them runs before, on the stream's rows.
    let assigns = window.is_some() && !chain.iter().any(|n| matches!(n, LogicalPlan::Aggregate(_)));
    let mut schema = match assigns {
        true => stream.schema.clone(),
        false => scan_schema.clone(),
    };
    let mut aggregated = false;
    let mut assigned = false;
    for (at, &node) in chain.iter().enumerate() {
        let input = node.inputs()[0].schema().clone();
        let reads_bounds = match node {
            LogicalPlan::Filter(f) => mentions_window(&f.predicate),
            _ => !matches!(node, LogicalPlan::SubqueryAlias(_)),
        };
        if assigns && !assigned && reads_bounds {
            specs.push(window_assign(window, &stream, &scan_schema)?);
            schema = scan_schema.clone();
            assigned = true;
        }
        match node {
            LogicalPlan::SubqueryAlias(_) => {}
            LogicalPlan::Filter(f) => {
                if window.is_some() && !aggregated && !assigns && mentions_window(&f.predicate) {
                    return Err(Error::NotSupported(
                        "WHERE cannot refer to window_start or window_end; use HAVING".into(),
                    ));
                }
                specs.push(OperatorSpec::Filter(FilterSpec {
                    predicate: physical(&ctx, &f.predicate, &input)?,
                    schema: schema.clone(),
                    condition: f.predicate.clone(),
                    relation: stream.name.clone(),
                }));
            }
            LogicalPlan::Projection(p) => {
                let exprs = p
                    .expr
                    .iter()
                    .map(|e| physical(&ctx, e, &input))
                    .collect::<Result<Vec<_>>>()?;
                schema = Arc::new(p.schema.as_arrow().clone());
                specs.push(OperatorSpec::Project(ProjectSpec {
                    exprs,
                    input: Arc::new(input.as_arrow().clone()),
                    schema: schema.clone(),
                    columns: p.expr.clone(),
                    relation: stream.name.clone(),
                }));
            }
            LogicalPlan::Aggregate(a) => {
                let Some(spec) = window else {
                    return Err(Error::NotSupported(
                        "aggregation over an unbounded stream needs a window: \
                         FROM TUMBLE(stream, ts, INTERVAL '1' MINUTE)"
                            .into(),
                    ));
                };
                schema = Arc::new(a.schema.as_arrow().clone());
                specs.push(plan_aggregate(
                    &ctx,
                    spec,
                    &stream,
                    &scan_schema,
                    &input,
                    &a.group_expr,
                    &a.aggr_expr,
                    schema.clone(),
                )?);
                aggregated = true;
            }
            LogicalPlan::Window(w) if topn::is_ranking(w) => {
                if !aggregated || matches!(window, Some(WindowSpec::Session { .. })) {
                    return Err(Error::NotSupported(
                        "ROW_NUMBER(), RANK() and DENSE_RANK() are supported over the results \
                         of a TUMBLE, HOP or CUMULATE aggregate, PARTITION BY window_start, \
                         window_end (window Top-N)"
                            .into(),
                    ));
                }
                schema = Arc::new(w.schema.as_arrow().clone());
                specs.push(topn::plan_window_rank(
                    &ctx,
                    &input,
                    w,
                    &chain[at + 1..],
                    &stream.name,
                )?);
            }
            LogicalPlan::Window(w) => {
                if window.is_some() && !aggregated && !assigns {
                    return Err(Error::NotSupported(
                        "OVER inside a windowed query: compute history over its results from an \
                         outer query (SELECT ... FROM (SELECT ... GROUP BY ...) AS t)"
                            .into(),
                    ));
                }
                schema = Arc::new(w.schema.as_arrow().clone());
                specs.push(plan_history(
                    &ctx,
                    &stream,
                    &input,
                    &w.window_expr,
                    aggregated,
                    schema.clone(),
                )?);
            }
            _ => unreachable!("chain holds only the node kinds matched above"),
        }
    }
    if assigns && !assigned {
        // SELECT * with no WHERE over the window's rows: nothing above the scan.
        specs.push(window_assign(window, &stream, &scan_schema)?);
        schema = scan_schema.clone();
    }
    Ok(QueryPlan {
        stream,
        window,
        specs,
        schema,
    })
}

/// The operator that gives each of the stream's rows its windows' bounds (no GROUP BY).
fn window_assign(
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

#[allow(clippy::too_many_arguments)]
fn plan_aggregate(
    ctx: &PlanContext,
    spec: WindowSpec,
    stream: &StreamDef,
    scan_schema: &SchemaRef,
    input: &DFSchema,
    group_expr: &[LExpr],
    aggr_expr: &[LExpr],
    schema: SchemaRef,
) -> Result<OperatorSpec> {
    let time_column = stream
        .event_time
        .as_ref()
        .map(|e| e.column)
        .ok_or_else(|| Error::Internal("windowed stream without event time".into()))?;
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
    let mut planned = Vec::new();
    for e in aggr_expr {
        #[allow(deprecated)]
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
    let aggregates = Aggregates {
        exprs: aggr_expr.to_vec(),
        input: Arc::new(input.as_arrow().clone()),
        planned,
    };
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
                relation: stream.name.clone(),
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
                relation: stream.name.clone(),
            }))
        }
    }
}

/// Maps window functions (`LAG`, aggregates `OVER (...)`) onto a history operator.
fn plan_history(
    ctx: &PlanContext,
    stream: &StreamDef,
    input: &DFSchema,
    window_expr: &[LExpr],
    ordered: bool,
    schema: SchemaRef,
) -> Result<OperatorSpec> {
    use datafusion::logical_expr::{WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition};
    let unsupported = |m: String| Error::NotSupported(m);
    let time_name = if ordered {
        if input.index_of_column_by_name(None, "window_end").is_some() {
            "window_end".to_string()
        } else {
            "window_start".to_string()
        }
    } else {
        stream
            .event_time
            .as_ref()
            .map(|et| stream.schema.field(et.column).name().clone())
            .ok_or_else(|| {
                Error::plan(
                    sqlstate::INVALID_OBJECT_DEFINITION,
                    format!(
                        "stream \"{}\" has no event time to order history by",
                        stream.name
                    ),
                )
            })?
    };
    let time_column = input
        .fields()
        .iter()
        .position(|f| f.name() == &time_name)
        .ok_or_else(|| {
            Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!("history is ordered by \"{time_name}\": select it in the inner query"),
            )
        })?;
    let mut columns = Vec::new();
    let mut partition: Option<Vec<LExpr>> = None;
    let base = input.fields().len();
    for (i, e) in window_expr.iter().enumerate() {
        let inner = e.clone().unalias_nested().data;
        let LExpr::WindowFunction(wf) = &inner else {
            return Err(unsupported(format!("{e} is not a window function")));
        };
        let p = &wf.params;
        match &partition {
            None => partition = Some(p.partition_by.clone()),
            Some(existing) if existing != &p.partition_by => {
                return Err(unsupported(
                    "all OVER clauses of a query must use the same PARTITION BY".into(),
                ))
            }
            _ => {}
        }
        let ordered_by_time = match p.order_by.as_slice() {
            [sort] => sort.asc && matches!(&sort.expr, LExpr::Column(c) if c.name == time_name),
            _ => false,
        };
        if !ordered_by_time {
            return Err(unsupported(format!(
                "OVER must be ORDER BY {time_name} (ascending): history follows event time"
            )));
        }
        let arg = match p.args.first() {
            Some(a) => physical(ctx, a, input)?,
            None => datafusion::physical_expr::expressions::lit(1i64),
        };
        let frame_fn = frame_function(&wf.fun, &p.args)?;
        let function = match &wf.fun {
            WindowFunctionDefinition::WindowUDF(f) if f.name().eq_ignore_ascii_case("lag") => {
                let offset = match p.args.get(1) {
                    None => 1,
                    Some(LExpr::Literal(v, _)) => v
                        .to_string()
                        .parse::<usize>()
                        .map_err(|_| unsupported("LAG offset must be a whole number".into()))?,
                    Some(other) => {
                        return Err(unsupported(format!(
                            "LAG offset must be a constant, not {other}"
                        )))
                    }
                };
                let data_type = schema.field(base + i).data_type().clone();
                let default = match p.args.get(2) {
                    Some(LExpr::Literal(v, _)) => v.cast_to(&data_type)?,
                    Some(other) => {
                        return Err(unsupported(format!(
                            "LAG default must be a constant, not {other}"
                        )))
                    }
                    None => ScalarValue::try_from(&data_type)?,
                };
                HistoryFn::Lag { offset, default }
            }
            WindowFunctionDefinition::AggregateUDF(_) | WindowFunctionDefinition::WindowUDF(_)
                if frame_fn.is_some()
                    || matches!(&wf.fun, WindowFunctionDefinition::AggregateUDF(_)) =>
            {
                let agg = match frame_fn {
                    Some(f) => HistoryAgg::Frame(f),
                    None => HistoryAgg::from_name(wf.fun.name()).ok_or_else(|| {
                        unsupported(format!(
                            "{} OVER (...) is not supported; use COUNT, SUM, AVG, MIN, MAX, \
                             STDDEV, VAR, MEDIAN, MAD, QUANTILE, EWMA, EWM_STDDEV, \
                             ANOMALY_LIKELIHOOD or FIRST_VALUE",
                            wf.fun.name()
                        ))
                    })?,
                };
                if p.distinct || p.filter.is_some() {
                    return Err(unsupported("DISTINCT and FILTER in OVER aggregates".into()));
                }
                let frame = &p.window_frame;
                let bound_rows = |v: &ScalarValue| -> Result<usize> {
                    v.to_string().parse::<usize>().map_err(|_| {
                        unsupported(format!("frame offset {v} must be a whole number"))
                    })
                };
                let start = match (&frame.units, &frame.start_bound) {
                    (_, WindowFrameBound::Preceding(v)) if v.is_null() => FrameStart::Unbounded,
                    (WindowFrameUnits::Rows, WindowFrameBound::Preceding(v)) => {
                        FrameStart::Rows(bound_rows(v)?)
                    }
                    (WindowFrameUnits::Range, WindowFrameBound::Preceding(v)) => {
                        FrameStart::Range(interval_nanos(v)?)
                    }
                    (_, WindowFrameBound::CurrentRow) => FrameStart::Rows(0),
                    _ => {
                        return Err(unsupported(
                            "frames that start after the current row".into(),
                        ))
                    }
                };
                let end_offset = match (&frame.units, &frame.end_bound) {
                    (_, WindowFrameBound::CurrentRow) => 0,
                    (WindowFrameUnits::Rows, WindowFrameBound::Preceding(v)) if !v.is_null() => {
                        bound_rows(v)?
                    }
                    (WindowFrameUnits::Range, WindowFrameBound::Following(v)) if v.is_null() => {
                        // DataFusion's default frame without ORDER BY; ORDER BY is required
                        // above, so this does not happen.
                        0
                    }
                    _ => {
                        return Err(unsupported(
                            "frames must end at CURRENT ROW or n PRECEDING (ROWS): the future \
                             is not known yet"
                                .into(),
                        ))
                    }
                };
                if let (FrameStart::Rows(k), e) = (start, end_offset) {
                    if e > k {
                        return Err(Error::plan(
                            sqlstate::WINDOWING_ERROR,
                            "frame starts after it ends",
                        ));
                    }
                }
                if matches!((agg, start), (HistoryAgg::Frame(_), FrameStart::Unbounded)) {
                    // Each row sorts or walks its whole frame: over all history that grows
                    // without bound, in memory and in time per row.
                    return Err(unsupported(format!(
                        "{} needs a bounded frame: ROWS BETWEEN n PRECEDING or RANGE BETWEEN \
                         INTERVAL ... PRECEDING",
                        wf.fun.name()
                    )));
                }
                HistoryFn::Aggregate {
                    agg,
                    start,
                    end_offset,
                }
            }
            other => {
                return Err(unsupported(format!(
                    "window function {} is not supported; use LAG or an aggregate",
                    other.name()
                )))
            }
        };
        columns.push(HistoryColumn {
            function,
            arg,
            data_type: schema.field(base + i).data_type().clone(),
        });
    }
    let partition = partition.unwrap_or_default();
    Ok(OperatorSpec::History(HistorySpec {
        columns,
        partition_by: physical_all(ctx, &partition, input)?,
        time_column,
        ordered,
        input: Arc::new(input.as_arrow().clone()),
        schema,
        functions: window_expr.to_vec(),
        partition,
        relation: stream.name.clone(),
    }))
}

/// A robust or adaptive frame function (`MEDIAN`, `MAD`, `QUANTILE(x, p)`, ...: see
/// [`FrameFn`]) for a window call, with its constant parameters; `None` for other functions.
fn frame_function(
    fun: &datafusion::logical_expr::WindowFunctionDefinition,
    args: &[LExpr],
) -> Result<Option<FrameFn>> {
    let params = args.iter().skip(1).map(|a| match a {
        LExpr::Literal(v, _) if !v.is_null() => v.to_string().parse::<f64>().map_err(|_| {
            Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("{}: parameter {v} must be a number", fun.name()),
            )
        }),
        other => Err(Error::NotSupported(format!(
            "{}: parameter {other} must be a constant",
            fun.name()
        ))),
    });
    if FrameFn::from_call(fun.name(), &[]).is_none() {
        return Ok(None);
    }
    let params = params.collect::<Result<Vec<f64>>>()?;
    match FrameFn::from_call(fun.name(), &params) {
        Some(Ok(f)) => Ok(Some(f)),
        Some(Err(m)) => Err(Error::plan(sqlstate::INVALID_PARAMETER_VALUE, m)),
        None => Ok(None),
    }
}

/// Nanoseconds of an interval literal (RANGE frames).
fn interval_nanos(v: &ScalarValue) -> Result<i64> {
    match v {
        ScalarValue::IntervalMonthDayNano(Some(i)) if i.months == 0 => {
            Ok(i.days as i64 * 86_400_000_000_000 + i.nanoseconds)
        }
        ScalarValue::IntervalDayTime(Some(i)) => {
            Ok(i.days as i64 * 86_400_000_000_000 + i.milliseconds as i64 * 1_000_000)
        }
        other => Err(Error::NotSupported(format!(
            "RANGE frames take an INTERVAL without months, not {other}"
        ))),
    }
}

pub(super) fn physical(
    ctx: &PlanContext,
    e: &LExpr,
    schema: &DFSchema,
) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(ctx
        .state()
        .create_physical_expr(simplify(e, schema)?, schema)?)
}

/// DataFusion's simplifier: some functions (coalesce, nvl, ...) only evaluate after it has
/// rewritten them.
///
/// It also rewrites a match with a constant regular expression (`x ~ '...'`) into LIKE, but
/// without escaping the backslashes (DataFusion 55): `image ~ '\\lsass\.exe$'` became
/// `image LIKE '%\lsass.exe'`, where `\l` means `l`, so it matched `notlsass.exe` too. Such
/// matches are held out of its reach and stay regular expressions.
pub(crate) fn simplify(e: &LExpr, schema: &DFSchema) -> Result<LExpr> {
    let info = SimplifyContext::builder()
        .with_schema(Arc::new(schema.clone()))
        .build();
    let simplifier = ExprSimplifier::new(info);
    let mut held = Vec::new();
    let e = e
        .clone()
        .transform_down(|e| match e {
            LExpr::BinaryExpr(b) if is_regex_with_backslash(&b) => {
                let id = format!("$saql_regex_{}", held.len());
                held.push(b);
                Ok(Transformed::new(
                    LExpr::Placeholder(Placeholder::new_with_field(
                        id,
                        Some(Arc::new(Field::new("", DataType::Boolean, true))),
                    )),
                    true,
                    TreeNodeRecursion::Jump,
                ))
            }
            e => Ok(Transformed::no(e)),
        })?
        .data;
    let e = simplifier.simplify(e)?;
    if held.is_empty() {
        return Ok(e);
    }
    let mut held: Vec<Option<BinaryExpr>> = held.into_iter().map(Some).collect();
    Ok(e.transform_up(|e| match e {
        LExpr::Placeholder(p) if p.id.starts_with("$saql_regex_") => {
            let i: usize = p.id["$saql_regex_".len()..]
                .parse()
                .map_err(|_| DataFusionError::Internal(format!("bad placeholder {}", p.id)))?;
            let b = held
                .get_mut(i)
                .and_then(Option::take)
                .ok_or_else(|| DataFusionError::Internal(format!("placeholder {} twice", p.id)))?;
            Ok(Transformed::yes(LExpr::BinaryExpr(BinaryExpr::new(
                Box::new(simplifier.simplify(*b.left)?),
                b.op,
                b.right,
            ))))
        }
        e => Ok(Transformed::no(e)),
    })?
    .data)
}

/// `x ~ 'pattern'` (or `~*`, `!~`, `!~*`) whose constant pattern has a backslash.
fn is_regex_with_backslash(b: &BinaryExpr) -> bool {
    use datafusion::logical_expr::Operator as Op;
    matches!(
        b.op,
        Op::RegexMatch | Op::RegexIMatch | Op::RegexNotMatch | Op::RegexNotIMatch
    ) && matches!(
        b.right.as_ref(),
        LExpr::Literal(ScalarValue::Utf8(Some(p)) | ScalarValue::LargeUtf8(Some(p)) | ScalarValue::Utf8View(Some(p)), _)
            if p.contains('\\')
    )
}

fn physical_all(
    ctx: &PlanContext,
    exprs: &[LExpr],
    schema: &DFSchema,
) -> Result<Vec<Arc<dyn PhysicalExpr>>> {
    exprs.iter().map(|e| physical(ctx, e, schema)).collect()
}

fn mentions_window(e: &LExpr) -> bool {
    e.column_refs()
        .iter()
        .any(|c| c.name == "window_start" || c.name == "window_end")
}

/// The stream's columns followed by `window_start` and `window_end`.
fn windowed_schema(stream: &StreamDef) -> Result<SchemaRef> {
    let et = stream.event_time.as_ref().ok_or_else(|| {
        Error::plan(
            sqlstate::INVALID_OBJECT_DEFINITION,
            format!(
                "stream \"{}\" has no event time; declare WATERMARK FOR <column> to use windows",
                stream.name
            ),
        )
    })?;
    let ty = match stream.schema.field(et.column).data_type() {
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Nanosecond, tz.clone()),
        other => other.clone(),
    };
    let mut fields: Vec<Field> = stream
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("window_start", ty.clone(), false));
    fields.push(Field::new("window_end", ty, false));
    Ok(Arc::new(Schema::new(fields)))
}

/// What `FROM` reads: a stream, maybe through a window or a `MATCH_RECOGNIZE`.
type Source = (Arc<StreamDef>, Option<WindowSpec>, Option<PlannedPattern>);

/// Resolves the `FROM` item: a stream, a window function over one, or a `MATCH_RECOGNIZE`
/// over one. Rewrites a window function or a `MATCH_RECOGNIZE` into a plain reference to the
/// stream (whose planning schema then carries the window columns, or is the match rows').
fn resolve_from(
    relation: &mut TableFactor,
    clauses: &Clauses,
    catalog: &Catalog,
) -> Result<Source> {
    if let TableFactor::MatchRecognize { .. } = relation {
        let p = plan_match_recognize(relation, clauses, catalog)?;
        return Ok((p.stream.clone(), None, Some(p)));
    }
    if let TableFactor::Derived { subquery, .. } = relation {
        let SetExpr::Select(inner) = subquery.body.as_mut() else {
            return Err(Error::NotSupported(
                "a subquery in FROM must be a single SELECT".into(),
            ));
        };
        if inner.from.len() != 1 || !inner.from[0].joins.is_empty() {
            return Err(Error::NotSupported(
                "a continuous query reads exactly one stream; joins are not supported yet".into(),
            ));
        }
        return resolve_from(&mut inner.from[0].relation, clauses, catalog);
    }
    if clauses.within.is_some() || !clauses.subsets.is_empty() {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            "WITHIN and SUBSET belong after PATTERN (...) in a MATCH_RECOGNIZE",
        ));
    }
    let TableFactor::Table { name, args, .. } = relation else {
        return Err(Error::NotSupported(
            "FROM must name a stream, a window function (TUMBLE, HOP, SESSION) or a subquery"
                .into(),
        ));
    };
    let Some(fargs) = args.take() else {
        let key = normalize_object(name);
        if let Some(s) = catalog.stream(&key) {
            return Ok((s.clone(), None, None));
        }
        if catalog.query(&key).is_some() {
            return Err(Error::NotSupported(format!(
                "a continuous query cannot read query \"{key}\" yet; read its stream"
            )));
        }
        return Err(Error::undefined("stream", &key));
    };
    let func = normalize_object(name).to_ascii_uppercase();
    let mut exprs = Vec::new();
    for a in &fargs.args {
        match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => exprs.push(e.clone()),
            other => {
                return Err(Error::NotSupported(format!(
                    "window argument {other} is not supported; pass arguments by position"
                )))
            }
        }
    }
    let expected = match func.as_str() {
        "TUMBLE" => "TUMBLE(stream, time_column, size)",
        "HOP" => "HOP(stream, time_column, slide, size)",
        "CUMULATE" => "CUMULATE(stream, time_column, step, size)",
        "SESSION" => "SESSION(stream, time_column, gap)",
        other => {
            return Err(Error::NotSupported(format!(
                "table function {other} is not supported; use TUMBLE, HOP, CUMULATE or SESSION"
            )))
        }
    };
    let arity = if func == "HOP" || func == "CUMULATE" {
        4
    } else {
        3
    };
    if exprs.len() != arity {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            format!("expected {expected}"),
        ));
    }
    let stream_name = match &exprs[0] {
        Expr::Identifier(i) => normalize(i),
        Expr::CompoundIdentifier(parts) => parts.last().map(normalize).unwrap_or_default(),
        other => {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("expected a stream name, found {other} in {expected}"),
            ))
        }
    };
    let stream = catalog.require_stream(&stream_name)?.clone();
    let time_col = match &exprs[1] {
        Expr::Identifier(i) => normalize(i),
        Expr::Function(f) if normalize_object(&f.name) == "descriptor" => match &f.args {
            sq::FunctionArguments::List(l) if l.args.len() == 1 => match &l.args[0] {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(i))) => normalize(i),
                other => {
                    return Err(Error::plan(
                        sqlstate::SYNTAX_ERROR,
                        format!("expected a column, found {other}"),
                    ))
                }
            },
            _ => {
                return Err(Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    "DESCRIPTOR takes one column",
                ))
            }
        },
        other => {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("expected the time column, found {other} in {expected}"),
            ))
        }
    };
    let et = stream.event_time.as_ref().ok_or_else(|| {
        Error::plan(
            sqlstate::INVALID_OBJECT_DEFINITION,
            format!(
                "stream \"{}\" has no event time; declare WATERMARK FOR <column> to use windows",
                stream.name
            ),
        )
    })?;
    let et_name = stream.schema.field(et.column).name();
    if &time_col != et_name {
        if stream.schema.column_with_name(&time_col).is_none() {
            return Err(Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!(
                    "column \"{time_col}\" does not exist in stream \"{}\"",
                    stream.name
                ),
            ));
        }
        return Err(Error::NotSupported(format!(
            "windows must use the stream's event-time column \"{et_name}\", not \"{time_col}\""
        )));
    }
    let spec = match func.as_str() {
        "TUMBLE" => WindowSpec::Tumble {
            size: interval_duration(&exprs[2])?,
        },
        "HOP" => WindowSpec::Hop {
            slide: interval_duration(&exprs[2])?,
            size: interval_duration(&exprs[3])?,
        },
        "CUMULATE" => WindowSpec::Cumulate {
            step: interval_duration(&exprs[2])?,
            size: interval_duration(&exprs[3])?,
        },
        _ => WindowSpec::Session {
            gap: interval_duration(&exprs[2])?,
        },
    };
    if let WindowSpec::Cumulate { step, size } = spec {
        if step.is_zero() || step > size || !size.as_nanos().is_multiple_of(step.as_nanos()) {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "CUMULATE size must be a positive whole multiple of its step",
            ));
        }
    }
    if let WindowSpec::Hop { slide: step, size } | WindowSpec::Cumulate { step, size } = spec {
        if step > size {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "HOP slide must not exceed its size",
            ));
        }
        let windows = size.as_nanos() / step.as_nanos().max(1);
        if windows > crate::limits::MAX_WINDOWS_PER_ROW as u128 {
            let how = match spec {
                WindowSpec::Cumulate { .. } => {
                    format!("CUMULATE of size {size:?} by steps of {step:?}")
                }
                _ => format!("HOP of size {size:?} sliding by {step:?}"),
            };
            return Err(Error::limit(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "{how} puts each row into {windows} windows; the limit is {} \
                     windows per row: use a larger {}",
                    crate::limits::MAX_WINDOWS_PER_ROW,
                    if matches!(spec, WindowSpec::Cumulate { .. }) {
                        "step"
                    } else {
                        "slide"
                    }
                ),
            ));
        }
    }
    *name = ObjectName(vec![ObjectNamePart::Identifier(sq::Ident::with_quote(
        '"',
        stream.name.clone(),
    ))]);
    Ok((stream, Some(spec), None))
}
