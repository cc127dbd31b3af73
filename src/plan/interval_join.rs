//! Plans joins of two streams bounded by time: `FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN
//! l.ts - INTERVAL ... AND l.ts + INTERVAL ...` (inner, LEFT, RIGHT or FULL) and the anti
//! join `FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.k = l.k AND r.ts BETWEEN l.ts AND
//! l.ts + ...)`; and, through [`plan_join`], window joins ([`super::window_join`]).
//!
//! Both streams feed one merge, as the branches of a `UNION ALL` do ([`super::union`]): each
//! branch projects its stream into one wide row (`__time`, `__side`, the left's columns, the
//! right's, NULLs for the other side's), and the join runs over the merged rows in event-time
//! order. A join needs an equality of the two streams (the key) and both time bounds on
//! their event-time columns: without them its state would grow without end, so it is
//! refused, saying which bound to add.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::common::{Column, DFSchema, JoinType, ScalarValue};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    lit, BinaryExpr, Expr as LExpr, ExprSchemable, LogicalPlan, Operator as Op,
};
use datafusion::sql::planner::SqlToRel;
use datafusion::sql::sqlparser::ast::{self as sq, SetExpr, TableFactor};

use super::catalog::{normalize_object, Catalog, StreamDef};
use super::context::PlanContext;
use super::expr::physical;
use super::from::WindowSpec;
use super::query::QueryPlan;
use super::spec::{FilterSpec, IntervalJoinSpec, OperatorSpec, ProjectSpec};
use super::union::{UnionBranch, UnionPlan};
use crate::error::{sqlstate, Error, Result};
use crate::operators::interval_join::{IntervalKind, JoinSide};

/// The streams a query joins, if its `FROM` joins two streams or its `WHERE` asks for a
/// stream in `[NOT] EXISTS`.
pub(super) fn joined_streams(query: &sq::Query, catalog: &Catalog) -> Option<(String, String)> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    let left = stream_of(&from.relation, catalog)?;
    if let [join] = from.joins.as_slice() {
        return Some((left, stream_of(&join.relation, catalog)?));
    }
    let mut found = None;
    if let Some(selection) = &select.selection {
        let _ = sq::visit_expressions(selection, |e| {
            if let sq::Expr::Exists { subquery, .. } = e {
                if let SetExpr::Select(inner) = subquery.body.as_ref() {
                    if let [f] = inner.from.as_slice() {
                        if let Some(r) = stream_of(&f.relation, catalog) {
                            found = Some(r);
                        }
                    }
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
    }
    found.map(|r| (left, r))
}

fn stream_of(relation: &TableFactor, catalog: &Catalog) -> Option<String> {
    match relation {
        TableFactor::Table {
            name, args: None, ..
        } => {
            let key = normalize_object(name);
            catalog.stream(&key).map(|s| s.name.clone())
        }
        _ => None,
    }
}

/// One input of a join: a declared stream, or the rows of a query over one (a window's rows
/// or results, a view, another query's results), which reach the join through a branch of
/// the merge that runs the query's operators.
pub(super) struct JoinInput {
    /// How the join's messages name it: the stream's name, or the input's alias.
    pub name: String,
    /// The declared stream its rows come from.
    pub stream: String,
    /// The operators from that stream's rows to the input's rows (none for a stream).
    pub specs: Vec<OperatorSpec>,
    /// The input's rows.
    pub schema: SchemaRef,
    /// Its event-time column in `schema` (`window_end` for a window's rows or results).
    pub time: usize,
    /// Its window, when its rows are a window's rows or results.
    pub window: Option<WindowSpec>,
    /// The tables and queries it reads.
    pub tables: Vec<String>,
    /// See `tables`.
    pub queries: Vec<String>,
}

impl JoinInput {
    /// A declared stream, named `name` in the join's messages.
    pub(super) fn stream(s: &StreamDef) -> Result<JoinInput> {
        Ok(JoinInput {
            name: s.name.clone(),
            stream: s.name.clone(),
            specs: Vec::new(),
            schema: s.schema.clone(),
            time: time_of(s)?,
            window: None,
            tables: Vec::new(),
            queries: Vec::new(),
        })
    }
}

/// Plans a query joining streams `l` and `r`.
pub(super) fn plan_stream_join(
    query: &sq::Query,
    (l, r): (String, String),
    catalog: &Catalog,
) -> Result<QueryPlan> {
    if l == r {
        // Each side read under its alias.
        return super::window_join::plan_input_join(query, catalog);
    }
    let (ls, rs) = (catalog.require_stream(&l)?, catalog.require_stream(&r)?);
    let mut ctx = PlanContext::new();
    ctx.add_table(&ls.name, ls.schema.clone())?;
    ctx.add_table(&rs.name, rs.schema.clone())?;
    let inputs = [JoinInput::stream(ls)?, JoinInput::stream(rs)?];
    plan_join(&ctx, query, inputs)
}

/// Plans `query`, whose `FROM` joins `inputs` (registered in `ctx` under the names the query
/// reads them by), as a join over the merge of the two inputs.
pub(super) fn plan_join(
    ctx: &PlanContext,
    query: &sq::Query,
    mut inputs: [JoinInput; 2],
) -> Result<QueryPlan> {
    let planner = SqlToRel::new(ctx);
    let plan = planner.sql_statement_to_plan(sq::Statement::Query(Box::new(query.clone())))?;
    let plan =
        ctx.state()
            .analyzer()
            .execute_and_check(plan, ctx.state().config_options(), |_, _| {})?;
    let windowed = inputs[0].window.is_some();
    let what = if windowed {
        "a window join"
    } else {
        "a join of streams"
    };
    // The nodes above the join (or above the anti join's filter), top first.
    let mut above = Vec::new();
    let mut node = &plan;
    let (kind, conjuncts, left_schema, right_schema, joined, plain) = loop {
        match node {
            LogicalPlan::Join(j) => {
                let kind = match j.join_type {
                    JoinType::Inner => IntervalKind::Inner,
                    JoinType::Left => IntervalKind::Left,
                    JoinType::Right => IntervalKind::Right,
                    JoinType::Full => IntervalKind::Full,
                    other => {
                        return Err(Error::NotSupported(format!(
                            "{other} joins of streams are not supported: use JOIN, LEFT JOIN, \
                             RIGHT JOIN or FULL JOIN (or NOT EXISTS for absence)"
                        )))
                    }
                };
                let mut conjuncts: Vec<LExpr> =
                    j.on.iter().map(|(a, b)| a.clone().eq(b.clone())).collect();
                if let Some(f) = &j.filter {
                    conjuncts.extend(split_conjunction(f).into_iter().cloned());
                }
                break (
                    kind,
                    conjuncts,
                    j.left.schema().clone(),
                    j.right.schema().clone(),
                    j.schema.clone(),
                    Vec::new(),
                );
            }
            LogicalPlan::Filter(f) if has_exists(&f.predicate) => {
                let mut plain = Vec::new();
                let mut anti = None;
                for c in split_conjunction(&f.predicate) {
                    match (c, anti.is_some()) {
                        (LExpr::Exists(e), false) if e.negated => anti = Some(e),
                        (LExpr::Not(inner), false) => match inner.as_ref() {
                            LExpr::Exists(e) if !e.negated => anti = Some(e),
                            _ => plain.push(c.clone()),
                        },
                        _ if has_exists(c) => {
                            return Err(Error::NotSupported(
                                "of subqueries over a stream, one NOT EXISTS (SELECT ... FROM \
                                 stream WHERE ... AND stream.ts BETWEEN ...) is supported, as \
                                 a conjunct of WHERE"
                                    .into(),
                            ))
                        }
                        _ => plain.push(c.clone()),
                    }
                }
                let e = anti.expect("a NOT EXISTS");
                let (conjuncts, right_schema) = subquery_conditions(&e.subquery.subquery)?;
                let left_schema = f.input.schema().clone();
                break (
                    IntervalKind::Anti,
                    conjuncts,
                    left_schema.clone(),
                    right_schema,
                    left_schema,
                    plain,
                );
            }
            LogicalPlan::Projection(_) | LogicalPlan::Filter(_) => {
                above.push(node);
                node = node.inputs()[0];
            }
            LogicalPlan::SubqueryAlias(a) => node = &a.input,
            other => {
                // A window join's results carry their window_end, so windows over them can
                // read them; a join of streams' results carry no event time.
                let elsewhere = if windowed {
                    "aggregate its results from another query (CREATE CONTINUOUS QUERY ... \
                     FROM TUMBLE(the_join, window_end, ...))"
                } else {
                    "aggregate its results in an ad hoc SELECT over the join's query (a \
                     join of streams' results carry no event time, so no window can read \
                     them yet)"
                };
                return Err(Error::NotSupported(format!(
                    "{} over {what} is not supported yet: a join is followed by WHERE and a \
                     select list; {elsewhere}",
                    other.display()
                )));
            }
        }
    };
    let conjuncts = if kind == IntervalKind::Anti {
        absent_rows_filter(ctx, conjuncts, &right_schema, &mut inputs[1])?
    } else {
        conjuncts
    };
    let bounds = Bounds::of(&conjuncts, &left_schema, &right_schema, &inputs)?;
    // The merged rows.
    let wide = wide_schema(&left_schema, &right_schema);
    let nl = left_schema.fields().len();
    let side_schema = |s: &DFSchema| {
        Arc::new(Schema::new(
            s.fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ))
    };
    let sides = [
        JoinSide {
            schema: side_schema(&left_schema),
            start: 2,
            keys: bounds
                .keys
                .iter()
                .map(|(a, _)| physical(ctx, a, &left_schema))
                .collect::<Result<_>>()?,
        },
        JoinSide {
            schema: side_schema(&right_schema),
            start: 2 + nl,
            keys: bounds
                .keys
                .iter()
                .map(|(_, b)| physical(ctx, b, &right_schema))
                .collect::<Result<_>>()?,
        },
    ];
    let [li, ri] = inputs;
    let branches = [
        branch(ctx, &li, 0, &left_schema, nl, &wide)?,
        branch(ctx, &ri, 1, &right_schema, nl, &wide)?,
    ];
    let out_schema = Arc::new(joined.as_arrow().clone());
    let mut specs = vec![OperatorSpec::IntervalJoin(IntervalJoinSpec {
        kind,
        input: wide.clone(),
        sides,
        lower: bounds.lower,
        upper: bounds.upper,
        schema: out_schema.clone(),
        condition: datafusion::logical_expr::utils::conjunction(conjuncts)
            .unwrap_or_else(|| lit(true)),
        streams: [li.name.clone(), ri.name.clone()],
        window: li.window,
    })];
    let relation = format!("{} ⋈ {}", li.name, ri.name);
    let mut schema = out_schema;
    let mut times =
        super::result_time::join_results(kind, li.time, nl + ri.time, bounds.lower, bounds.upper);
    if let Some(predicate) = datafusion::logical_expr::utils::conjunction(plain) {
        specs.push(OperatorSpec::Filter(FilterSpec {
            predicate: physical(ctx, &predicate, &joined)?,
            schema: schema.clone(),
            condition: predicate,
            relation: relation.clone(),
        }));
    }
    for node in above.into_iter().rev() {
        let input = node.inputs()[0].schema().clone();
        match node {
            LogicalPlan::Filter(f) => specs.push(OperatorSpec::Filter(FilterSpec {
                predicate: physical(ctx, &f.predicate, &input)?,
                schema: schema.clone(),
                condition: f.predicate.clone(),
                relation: relation.clone(),
            })),
            LogicalPlan::Projection(p) => {
                schema = Arc::new(p.schema.as_arrow().clone());
                times = super::result_time::through_projection(&times, &p.expr, &input);
                specs.push(OperatorSpec::Project(ProjectSpec {
                    exprs: p
                        .expr
                        .iter()
                        .map(|e| physical(ctx, e, &input))
                        .collect::<Result<_>>()?,
                    input: Arc::new(input.as_arrow().clone()),
                    schema: schema.clone(),
                    columns: p.expr.clone(),
                    relation: relation.clone(),
                }));
            }
            _ => unreachable!("only filters and projections are kept above the join"),
        }
    }
    let name = format!("join({}, {})", li.name, ri.name);
    let stream = Arc::new(StreamDef::derived(&name, wide.clone(), Some(0)));
    let mut tables = li.tables;
    let mut queries = li.queries;
    for t in ri.tables {
        if !tables.contains(&t) {
            tables.push(t);
        }
    }
    for q in ri.queries {
        if !queries.contains(&q) {
            queries.push(q);
        }
    }
    Ok(QueryPlan {
        stream,
        window: None,
        specs,
        schema,
        tables,
        queries,
        union: Some(Arc::new(UnionPlan {
            branches: branches.into(),
            schema: wide,
            time_column: 0,
        })),
        times,
    })
}

fn has_exists(e: &LExpr) -> bool {
    use datafusion::common::tree_node::TreeNode;
    e.exists(|e| Ok(matches!(e, LExpr::Exists(_))))
        .unwrap_or(false)
}

/// A `NOT EXISTS` subquery's conditions on its own stream alone (`m.dst_port = 443`) choose
/// which of its rows count: they become a filter of that stream's branch, before the merge
/// (the same rows are absent either way, and fewer are kept). Returns the other conditions.
fn absent_rows_filter(
    ctx: &PlanContext,
    conjuncts: Vec<LExpr>,
    schema: &DFSchema,
    input: &mut JoinInput,
) -> Result<Vec<LExpr>> {
    let own = |e: &LExpr| {
        let cols = e.column_refs();
        !cols.is_empty() && cols.iter().all(|c| schema.index_of_column(c).is_ok())
    };
    let (own, rest): (Vec<LExpr>, Vec<LExpr>) = conjuncts.into_iter().partition(own);
    if let Some(condition) = datafusion::logical_expr::utils::conjunction(own) {
        input.specs.push(OperatorSpec::Filter(FilterSpec {
            predicate: physical(ctx, &condition, schema)?,
            schema: input.schema.clone(),
            condition,
            relation: input.name.clone(),
        }));
    }
    Ok(rest)
}

/// The conditions of a `NOT EXISTS` subquery over a stream (outer references read as the
/// left's columns) and the stream's columns as it names them.
fn subquery_conditions(plan: &LogicalPlan) -> Result<(Vec<LExpr>, Arc<DFSchema>)> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    let mut node = plan;
    let mut conjuncts = Vec::new();
    let schema = loop {
        match node {
            LogicalPlan::Projection(p) => node = &p.input,
            LogicalPlan::Filter(f) => {
                conjuncts.extend(split_conjunction(&f.predicate).into_iter().cloned());
                node = &f.input;
            }
            LogicalPlan::SubqueryAlias(a) => break a.schema.clone(),
            LogicalPlan::TableScan(s) => break s.projected_schema.clone(),
            other => {
                return Err(Error::NotSupported(format!(
                    "a NOT EXISTS over a stream reads the stream with WHERE only, not {}",
                    other.display()
                )))
            }
        }
    };
    let conjuncts = conjuncts
        .into_iter()
        .map(|c| {
            c.transform(|e| match e {
                LExpr::OuterReferenceColumn(_, col) => Ok(Transformed::yes(LExpr::Column(col))),
                e => Ok(Transformed::no(e)),
            })
            .map(|t| t.data)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((conjuncts, schema))
}

fn time_of(s: &StreamDef) -> Result<usize> {
    s.event_time.as_ref().map(|e| e.column).ok_or_else(|| {
        Error::plan(
            sqlstate::INVALID_OBJECT_DEFINITION,
            format!(
                "stream \"{}\" has no event time; a join of streams is bounded by their event \
                 times: declare WATERMARK FOR <column>",
                s.name
            ),
        )
    })
}

/// `__time`, `__side`, then both sides' columns, all nullable.
fn wide_schema(left: &DFSchema, right: &DFSchema) -> SchemaRef {
    let mut fields = vec![
        Field::new(
            "__time",
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            true,
        ),
        Field::new("__side", DataType::Int8, true),
    ];
    for (prefix, s) in [("left", left), ("right", right)] {
        for f in s.fields() {
            fields.push(Field::new(
                format!("{prefix}.{}", f.name()),
                f.data_type().clone(),
                true,
            ));
        }
    }
    Arc::new(Schema::new(fields))
}

/// The branch of side `side` (0 left): its input's rows as merged rows. A window's rows
/// are timed at the window's last instant (`window_end` - 1 ns), so that the merge releases
/// them once the watermark reaches the window's end, when the window is complete.
fn branch(
    ctx: &PlanContext,
    input: &JoinInput,
    side: i8,
    schema: &DFSchema,
    nl: usize,
    wide: &SchemaRef,
) -> Result<UnionBranch> {
    let nr = wide.fields().len() - 2 - nl;
    let time = LExpr::Column(Column::from(schema.qualified_field(input.time)));
    let time = match input.window {
        Some(_) => time - lit(ScalarValue::new_interval_mdn(0, 0, 1)),
        None => time,
    };
    let mut columns = vec![
        time.alias("__time"),
        lit(ScalarValue::Int8(Some(side))).alias("__side"),
    ];
    let own: Vec<LExpr> = (0..schema.fields().len())
        .map(|i| LExpr::Column(Column::from(schema.qualified_field(i))))
        .collect();
    let nulls = |from: usize, n: usize| -> Result<Vec<LExpr>> {
        (from..from + n)
            .map(|i| Ok(lit(ScalarValue::try_from(wide.field(i).data_type())?)))
            .collect()
    };
    if side == 0 {
        columns.extend(own);
        columns.extend(nulls(2 + nl, nr)?);
    } else {
        columns.extend(nulls(2, nl)?);
        columns.extend(own);
    }
    let columns: Vec<LExpr> = columns
        .into_iter()
        .enumerate()
        .map(|(i, e)| match e {
            LExpr::Alias(_) => e,
            e => e.alias(wide.field(i).name()),
        })
        .collect();
    let exprs = columns
        .iter()
        .map(|e| physical(ctx, e, schema))
        .collect::<Result<_>>()?;
    let mut specs = input.specs.clone();
    specs.push(OperatorSpec::Project(ProjectSpec {
        exprs,
        input: input.schema.clone(),
        schema: wide.clone(),
        columns,
        relation: input.name.clone(),
    }));
    Ok(UnionBranch::of_stream(&input.stream, specs))
}

/// The keys and time bounds of a join's condition.
struct Bounds {
    keys: Vec<(LExpr, LExpr)>,
    lower: i64,
    upper: i64,
}

/// Which side a time term reads, and the offset added to it.
fn time_term(e: &LExpr, sides: [(&DFSchema, usize); 2]) -> Option<(usize, i64)> {
    let e = match e {
        LExpr::Cast(c) => c.expr.as_ref(),
        e => e,
    };
    match e {
        LExpr::Column(c) => (0..2).find_map(|s| {
            let (schema, time) = sides[s];
            let i = schema.index_of_column(c).ok()?;
            (i == time).then_some((s, 0))
        }),
        LExpr::BinaryExpr(BinaryExpr { left, op, right }) if matches!(op, Op::Plus | Op::Minus) => {
            let (side, base) = time_term(left, sides)?;
            let n = interval_nanos(right)?;
            Some((side, if *op == Op::Plus { base + n } else { base - n }))
        }
        _ => None,
    }
}

/// A constant interval in nanoseconds (days as 24 hours; months are refused).
fn interval_nanos(e: &LExpr) -> Option<i64> {
    match e {
        LExpr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) if v.months == 0 => {
            Some(v.days as i64 * 86_400_000_000_000 + v.nanoseconds)
        }
        LExpr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => {
            Some(v.days as i64 * 86_400_000_000_000 + v.milliseconds as i64 * 1_000_000)
        }
        LExpr::Cast(c) => interval_nanos(&c.expr),
        _ => None,
    }
}

impl Bounds {
    fn of(
        conjuncts: &[LExpr],
        left: &DFSchema,
        right: &DFSchema,
        inputs: &[JoinInput; 2],
    ) -> Result<Bounds> {
        let (lt, rt) = (inputs[0].time, inputs[1].time);
        let sides = [(left, lt), (right, rt)];
        let (mut lower, mut upper) = (None::<i64>, None::<i64>);
        let mut keys = Vec::new();
        // A window join's `l.window_start = r.window_start`.
        let mut starts_equal = false;
        // `a op b` on times: right - left >= or <= a constant.
        let mut bound = |a: &LExpr, op: Op, b: &LExpr| -> bool {
            let (Some((sa, oa)), Some((sb, ob))) = (time_term(a, sides), time_term(b, sides))
            else {
                return false;
            };
            if sa == sb {
                return false;
            }
            // a = side sa + oa, b = side sb + ob; as right - left (op) c.
            let (op, c) = match (sa, op) {
                // right + oa op left + ob  =>  right - left op ob - oa
                (1, op) => (op, ob - oa),
                // left + oa op right + ob  =>  right - left (flipped op) oa - ob
                (_, Op::Gt) => (Op::Lt, oa - ob),
                (_, Op::GtEq) => (Op::LtEq, oa - ob),
                (_, Op::Lt) => (Op::Gt, oa - ob),
                (_, Op::LtEq) => (Op::GtEq, oa - ob),
                _ => return false,
            };
            match op {
                Op::GtEq => lower = Some(lower.map_or(c, |l| l.max(c))),
                Op::Gt => lower = Some(lower.map_or(c + 1, |l| l.max(c + 1))),
                Op::LtEq => upper = Some(upper.map_or(c, |u| u.min(c))),
                Op::Lt => upper = Some(upper.map_or(c - 1, |u| u.min(c - 1))),
                _ => return false,
            }
            true
        };
        let reads = |e: &LExpr, s: &DFSchema| {
            let cols = e.column_refs();
            !cols.is_empty() && cols.iter().all(|c| s.index_of_column(c).is_ok())
        };
        for c in conjuncts {
            match c {
                LExpr::Between(b)
                    if !b.negated
                        && bound(&b.expr, Op::GtEq, &b.low)
                        && bound(&b.expr, Op::LtEq, &b.high) =>
                {
                    continue;
                }
                LExpr::BinaryExpr(BinaryExpr {
                    left: a,
                    op,
                    right: b,
                }) => {
                    if matches!(op, Op::Gt | Op::GtEq | Op::Lt | Op::LtEq) && bound(a, *op, b) {
                        continue;
                    }
                    // Equal times: both bounds at once.
                    if *op == Op::Eq && bound(a, Op::GtEq, b) && bound(a, Op::LtEq, b) {
                        continue;
                    }
                    if *op == Op::Eq {
                        let pair = if reads(a, left) && reads(b, right) {
                            Some((a.as_ref().clone(), b.as_ref().clone()))
                        } else if reads(b, left) && reads(a, right) {
                            Some((b.as_ref().clone(), a.as_ref().clone()))
                        } else {
                            None
                        };
                        if let Some((x, y)) = pair {
                            // The types as written (the analyzer may have cast one to the
                            // other's): only text could compare text with anything else.
                            let uncast = |e: &LExpr| match e {
                                LExpr::Cast(c) => c.expr.as_ref().clone(),
                                LExpr::TryCast(c) => c.expr.as_ref().clone(),
                                e => e.clone(),
                            };
                            let (x0, y0) = (uncast(&x), uncast(&y));
                            let (tx, ty) = (x0.get_type(left)?, y0.get_type(right)?);
                            let text = |t: &DataType| {
                                matches!(
                                    t,
                                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                                )
                            };
                            if text(&tx) != text(&ty) {
                                let (x, y) = (x0, y0);
                                return Err(Error::plan(
                                    sqlstate::DATATYPE_MISMATCH,
                                    format!(
                                        "join keys {x} ({}) and {y} ({}) have different types; \
                                         cast one of them",
                                        crate::sources::value::type_name(&tx),
                                        crate::sources::value::type_name(&ty)
                                    ),
                                ));
                            }
                            let named = |e: &LExpr, name: &str| matches!(e, LExpr::Column(c) if c.name == name);
                            starts_equal |= named(&x, "window_start") && named(&y, "window_start");
                            keys.push((x, y));
                            continue;
                        }
                    }
                }
                _ => {}
            }
            return Err(Error::NotSupported(format!(
                "a join of streams takes equalities of the two streams and bounds on their \
                 event times; move {c} to WHERE"
            )));
        }
        let (l, r) = (&inputs[0].name, &inputs[1].name);
        if let (Some(lw), Some(rw)) = (inputs[0].window, inputs[1].window) {
            return Bounds::of_windows(keys, (lower, upper), starts_equal, [l, r], [lw, rw]);
        }
        if let Some(i) = (0..2).find(|&i| inputs[i].window.is_some()) {
            let w = &inputs[i].name;
            let o = &inputs[1 - i].name;
            return Err(Error::NotSupported(format!(
                "\"{w}\" is a window's rows but \"{o}\" is not: a window join reads both sides \
                 from the same TUMBLE, HOP or CUMULATE window (put \"{o}\" in one), and an \
                 interval join reads two streams"
            )));
        }
        let (lt_name, rt_name) = (
            inputs[0].schema.field(lt).name(),
            inputs[1].schema.field(rt).name(),
        );
        let example = format!(
            "{r}.{rt_name} BETWEEN {l}.{lt_name} - INTERVAL '5' SECOND AND {l}.{lt_name} + \
             INTERVAL '30' SECOND"
        );
        let (lower, upper) = match (lower, upper) {
            (Some(lo), Some(hi)) => (lo, hi),
            (None, None) => {
                return Err(Error::NotSupported(format!(
                    "a join of streams \"{l}\" and \"{r}\" needs a time bound, or its state \
                     would grow without end: add {example}"
                )))
            }
            (None, Some(_)) => {
                return Err(Error::NotSupported(format!(
                    "a join of streams \"{l}\" and \"{r}\" needs a lower time bound too, or its \
                     state would grow without end: add {r}.{rt_name} >= {l}.{lt_name} - INTERVAL \
                     ... (e.g. {example})"
                )))
            }
            (Some(_), None) => {
                return Err(Error::NotSupported(format!(
                    "a join of streams \"{l}\" and \"{r}\" needs an upper time bound too, or its \
                     state would grow without end: add {r}.{rt_name} <= {l}.{lt_name} + INTERVAL \
                     ... (e.g. {example})"
                )))
            }
        };
        if lower > upper {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "the join's time bounds leave no interval: its lower bound is above its upper",
            ));
        }
        if keys.is_empty() {
            return Err(Error::NotSupported(format!(
                "a join of streams \"{l}\" and \"{r}\" needs an equality of their columns (ON \
                 {l}.key = {r}.key)"
            )));
        }
        Ok(Bounds { keys, lower, upper })
    }

    /// A window join's keys: the windows' bounds must be equal (`l.window_start =
    /// r.window_start AND l.window_end = r.window_end`), and the windows the same.
    fn of_windows(
        keys: Vec<(LExpr, LExpr)>,
        (lower, upper): (Option<i64>, Option<i64>),
        starts_equal: bool,
        [l, r]: [&String; 2],
        [lw, rw]: [WindowSpec; 2],
    ) -> Result<Bounds> {
        if matches!(lw, WindowSpec::Session { .. }) || matches!(rw, WindowSpec::Session { .. }) {
            return Err(Error::NotSupported(
                "a window join of SESSION windows is not supported: sessions differ between \
                 the two sides; use TUMBLE, HOP or CUMULATE windows"
                    .into(),
            ));
        }
        if lw != rw {
            return Err(Error::NotSupported(format!(
                "a window join needs the same window on both sides, but \"{l}\" is in {} and \
                 \"{r}\" in {}: use one window for both",
                super::explain::window_text(&lw),
                super::explain::window_text(&rw)
            )));
        }
        let equal_ends = lower == Some(0) && upper == Some(0);
        if !equal_ends || !starts_equal {
            let missing = match (starts_equal, lower.is_some() || upper.is_some()) {
                (true, false) => format!("{l}.window_end = {r}.window_end"),
                (false, false) => format!(
                    "{l}.window_start = {r}.window_start AND {l}.window_end = {r}.window_end"
                ),
                (false, true) if equal_ends => format!("{l}.window_start = {r}.window_start"),
                _ => {
                    return Err(Error::NotSupported(format!(
                        "a window join joins rows of the same window: its only condition on \
                         window_end is {l}.window_end = {r}.window_end"
                    )))
                }
            };
            return Err(Error::NotSupported(format!(
                "a window join of \"{l}\" and \"{r}\" needs both windows' bounds equal: add \
                 {missing} to its ON"
            )));
        }
        Ok(Bounds {
            keys,
            lower: 0,
            upper: 0,
        })
    }
}
