//! Plans a continuous query: resolves its `FROM` (`from.rs`), lets DataFusion's SQL planner
//! resolve names and types against the stream's schema, then maps the logical plan, node by
//! node, onto the specs of incremental operators (filters and projections here; aggregation
//! in `aggregate.rs`, window functions in `history.rs`, Top-N in `topn.rs`).

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNode;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{Expr as LExpr, LogicalPlan};
use datafusion::sql::planner::SqlToRel;
use datafusion::sql::sqlparser::ast::{self as sq, SetExpr};

use super::aggregate::{plan_aggregate, window_assign};
use super::catalog::{Catalog, StreamDef};
use super::chained;
use super::clauses;
use super::context::PlanContext;
use super::evidence;
use super::explain;
use super::expr::{mentions_window, physical};
pub use super::from::WindowSpec;
use super::from::{resolve_from, windowed_schema};
use super::history::plan_history;
use super::lookup;
use super::result_time::{self, TimeColumn};
use super::spec::{FilterSpec, OperatorSpec, ProjectSpec};
use super::topn;
use super::union::{is_set_operation, plan_union, UnionPlan};
use crate::error::{Error, Result};
use crate::operators::Operator;
use crate::sql::Clauses;

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
    /// The tables it reads (joins and subqueries), by name.
    pub tables: Vec<String>,
    /// The queries whose results it reads (directly or through them), by name.
    pub queries: Vec<String>,
    /// When it reads a `UNION ALL` of streams: the union, whose rows are `stream`'s.
    pub union: Option<Arc<UnionPlan>>,
    /// The result columns that carry the input's event time (see
    /// [`super::result_time`]).
    pub times: Vec<TimeColumn>,
}

impl QueryPlan {
    /// Fresh operators built from the specs, from source to result.
    pub fn build_operators(&self) -> Result<Vec<Box<dyn Operator>>> {
        self.specs.iter().map(OperatorSpec::build).collect()
    }

    /// Refuses results with two columns of one name (42701), as PostgreSQL refuses such a
    /// view: neither a `SELECT` over the query's results nor a query over them could read
    /// them. Checked when a query or view is created or altered, not when the catalog is
    /// replayed (a query created before this check must still load).
    pub fn check_result_columns(&self) -> Result<()> {
        let fields = self.schema.fields();
        for (i, f) in fields.iter().enumerate() {
            if fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::plan(
                    crate::error::sqlstate::DUPLICATE_COLUMN,
                    format!(
                        "column \"{}\" specified more than once in the query's results: give \
                         one of them another name (AS ...)",
                        f.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether it joins table `table` `FOR SYSTEM_TIME AS OF` (keeps versions of it).
    pub fn versions_table(&self, table: &str) -> bool {
        self.specs.iter().any(|s| {
            matches!(s, OperatorSpec::LookupJoin(l) if l.temporal.is_some() && l.table_name == table)
        })
    }

    /// The tables it joins `FOR SYSTEM_TIME AS OF`.
    pub fn versioned_tables(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.specs {
            if let OperatorSpec::LookupJoin(l) = s {
                if l.temporal.is_some() && !out.contains(&l.table_name) {
                    out.push(l.table_name.clone());
                }
            }
        }
        out
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
        let mut nodes: Vec<explain::ExplainNode> =
            self.specs.iter().map(OperatorSpec::explain).collect();
        // A join's inputs: the operators each runs on its stream's rows (the last of them
        // only shapes the rows for the merge).
        let join = self
            .specs
            .iter()
            .position(|s| matches!(s, OperatorSpec::IntervalJoin(_)));
        if let (None, Some(union)) = (join, &self.union) {
            nodes.insert(0, explain::union_node(union));
        }
        if let (Some(at), Some(union)) = (join, &self.union) {
            for (key, b) in ["left input", "right input"]
                .into_iter()
                .zip(&union.branches)
            {
                let ops = &b.specs[..b.specs.len().saturating_sub(1)];
                let text = std::iter::once(format!("stream {}", b.stream))
                    .chain(ops.iter().map(|s| s.name().to_string()))
                    .collect::<Vec<_>>()
                    .join(" -> ");
                let node = std::mem::replace(&mut nodes[at], explain::ExplainNode::new(""));
                nodes[at] = node.with(key, text);
            }
        }
        nodes
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
    if is_set_operation(query) {
        if clauses != &Clauses::default() {
            return Err(Error::NotSupported(
                "clauses after a UNION ALL are not supported: read the union from a \
                 subquery or a view (SELECT ... FROM (... UNION ALL ...) u ...)"
                    .into(),
            ));
        }
        return plan_union(query, catalog);
    }
    if let SetExpr::Select(select) = query.body.as_ref() {
        super::temporal::check_versions(select, catalog)?;
    }
    if let Some(streams) = super::interval_join::joined_streams(query, catalog) {
        if clauses != &Clauses::default() {
            return Err(Error::NotSupported(
                "clauses after a join of streams are not supported: read the join from \
                 another query"
                    .into(),
            ));
        }
        return super::interval_join::plan_stream_join(query, streams, catalog);
    }
    if super::window_join::joins_inputs(query, catalog) {
        if clauses != &Clauses::default() {
            return Err(Error::NotSupported(
                "clauses after a join are not supported: read the join from another query".into(),
            ));
        }
        return super::window_join::plan_input_join(query, catalog);
    }
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
    if select.from.len() != 1 {
        return Err(Error::NotSupported(
            "a continuous query reads one stream, joined with tables: FROM s JOIN t ON ... \
             (a comma-separated FROM list is not supported)"
                .into(),
        ));
    }
    let (stream, window, pattern, upstream) =
        resolve_from(&mut select.from[0].relation, clauses, catalog)?;
    let reads_merge = upstream.as_ref().is_some_and(|u| u.union.is_some());
    let temporal = super::temporal::take_temporal(select, &stream, window, reads_merge)?;
    evidence::rewrite(&mut query, &stream, window.is_some() && pattern.is_none())?;
    let scan_schema = match (&pattern, window) {
        (Some(p), _) => p.schema.clone(),
        (None, None) => stream.schema.clone(),
        (None, Some(_)) => windowed_schema(&stream)?,
    };
    let mut ctx = PlanContext::new();
    ctx.add_table(&stream.name, scan_schema.clone())?;
    // Joins and subqueries may read any table.
    for t in catalog.tables() {
        ctx.add_table(&t.name, t.store.schema().clone())?;
    }
    let planner = SqlToRel::new(&ctx);
    let plan = planner.sql_statement_to_plan(sq::Statement::Query(Box::new(query)))?;
    let plan =
        ctx.state()
            .analyzer()
            .execute_and_check(plan, ctx.state().config_options(), |_, _| {})?;
    let plan = filter_before_lookups(plan)?;
    let chain = node_chain(&plan)?;

    // Without GROUP BY, a window function gives each row its windows' bounds (WindowAssign);
    // a WHERE that does not read them runs before, on the stream's rows.
    let assigns = window.is_some() && !chain.iter().any(|n| matches!(n, LogicalPlan::Aggregate(_)));
    // Where the input's event time is: the upstream results' own time columns, a
    // stream's event-time column, or none in a MATCH_RECOGNIZE's matches.
    let times = match (&pattern, &upstream) {
        (Some(p), _) => result_time::pattern_results(&p.spec, &stream.schema),
        (None, Some(up)) => up.times.clone(),
        (None, None) => stream
            .event_time
            .as_ref()
            .map(|e| TimeColumn::on_time(e.column))
            .into_iter()
            .collect(),
    };
    let mut nodes = ChainPlanner {
        ctx: &ctx,
        catalog,
        tables: Vec::new(),
        stream: &stream,
        window,
        schema: match assigns {
            true => stream.schema.clone(),
            false => scan_schema.clone(),
        },
        scan_schema,
        assigns,
        aggregated: false,
        assigned: false,
        specs: Vec::new(),
        temporal,
        times,
    };
    if let Some(p) = pattern {
        nodes.specs.push(OperatorSpec::Pattern(Box::new(p.spec)));
    }
    for (at, &node) in chain.iter().enumerate() {
        nodes.node(node, &chain[at + 1..])?;
    }
    if assigns && !nodes.assigned {
        // SELECT * with no WHERE over the window's rows: nothing above the scan.
        nodes.assign_windows()?;
    }
    let ChainPlanner {
        specs,
        schema,
        tables,
        times,
        ..
    } = nodes;
    let plan = QueryPlan {
        stream,
        window,
        specs,
        schema,
        tables,
        queries: Vec::new(),
        union: None,
        times,
    };
    Ok(match upstream {
        Some(up) => {
            // A query or view of the catalog is read by name; an inline subquery is not.
            let name = plan.stream.name.clone();
            let named = catalog.query(&name).is_some() || catalog.view(&name).is_some();
            chained::chain(*up, named.then_some(name.as_str()), plan)
        }
        None => plan,
    })
}

/// The logical plan's nodes from the scan up (the scan left out); an error for a node kind
/// no operator of ours maps.
fn node_chain(plan: &LogicalPlan) -> Result<Vec<&LogicalPlan>> {
    let mut chain = Vec::new();
    let mut node = plan;
    loop {
        match node {
            LogicalPlan::TableScan(_) => break,
            // A join with a table: the stream is its left side.
            LogicalPlan::Join(j) => {
                chain.push(node);
                node = &j.left;
            }
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
    Ok(chain)
}

/// Maps the nodes of a logical plan, from the scan up, onto operator specs.
struct ChainPlanner<'a> {
    ctx: &'a PlanContext,
    catalog: &'a Catalog,
    /// The tables joined so far.
    tables: Vec<String>,
    stream: &'a Arc<StreamDef>,
    window: Option<WindowSpec>,
    /// What the SQL planner scanned: the stream's columns, with the window's bounds.
    scan_schema: SchemaRef,
    /// Whether a window without GROUP BY gives each row its windows' bounds.
    assigns: bool,
    /// The schema of the rows the last spec emits.
    schema: SchemaRef,
    aggregated: bool,
    assigned: bool,
    specs: Vec<OperatorSpec>,
    /// The tables joined `FOR SYSTEM_TIME AS OF` the stream's event time.
    temporal: Vec<String>,
    /// The columns of the rows the last spec emits that carry the input's event time.
    times: Vec<TimeColumn>,
}

impl ChainPlanner<'_> {
    /// What makes the join with `s.table_name` temporal: the stream's event-time column in
    /// its input, and the table's version-time column.
    fn temporal_spec(&self, s: &super::spec::LookupJoinSpec) -> Result<super::spec::TemporalSpec> {
        let et = self
            .stream
            .event_time
            .as_ref()
            .map(|e| self.stream.schema.field(e.column).name().clone())
            .unwrap_or_default();
        let time = s.input.index_of(&et).map_err(|_| {
            Error::NotSupported(format!(
                "the temporal join with \"{}\" reads the stream's event-time column \"{et}\", \
                 which no longer reaches it",
                s.table_name
            ))
        })?;
        let version_time = self
            .catalog
            .table(&s.table_name)
            .and_then(|t| t.version_time);
        Ok(super::spec::TemporalSpec { time, version_time })
    }

    /// Plans one node; `above` are the nodes that follow it.
    fn node(&mut self, node: &LogicalPlan, above: &[&LogicalPlan]) -> Result<()> {
        let input = node.inputs()[0].schema().clone();
        let reads_bounds = match node {
            LogicalPlan::Filter(f) => mentions_window(&f.predicate),
            _ => !matches!(node, LogicalPlan::SubqueryAlias(_)),
        };
        if self.assigns && !self.assigned && reads_bounds {
            self.assign_windows()?;
        }
        match node {
            LogicalPlan::SubqueryAlias(_) => Ok(()),
            LogicalPlan::Join(j) => {
                if self.window.is_some() && !self.aggregated && !self.assigns {
                    return Err(Error::NotSupported(
                        "a join inside a windowed GROUP BY is not supported yet: aggregate in a \
                         subquery and join its results (SELECT ... FROM (SELECT ... GROUP BY \
                         ...) w JOIN t ON ...)"
                            .into(),
                    ));
                }
                let mut spec = lookup::plan_join(self.ctx, j, self.catalog, &self.stream.name)?;
                if let OperatorSpec::LookupJoin(s) = &mut spec {
                    if self.temporal.contains(&s.table_name) {
                        s.temporal = Some(self.temporal_spec(s)?);
                    }
                    self.tables.push(s.table_name.clone());
                    self.schema = s.schema.clone();
                }
                self.specs.push(spec);
                Ok(())
            }
            LogicalPlan::Filter(f) if has_subquery(&f.predicate) => {
                // Plain conjuncts filter first; each subquery is a semi or anti join.
                let mut plain = Vec::new();
                let mut joins = Vec::new();
                for c in split_conjunction(&f.predicate) {
                    match lookup::plan_subquery(
                        self.ctx,
                        c,
                        &input,
                        self.catalog,
                        &self.stream.name,
                    )? {
                        Some(spec) => joins.push(spec),
                        None if has_subquery(c) => {
                            return Err(Error::NotSupported(format!(
                                "a subquery is supported in WHERE as a conjunct of the form \
                                 x [NOT] IN (SELECT key FROM table ...) or [NOT] EXISTS \
                                 (SELECT ... FROM table WHERE table.key = x ...), not in {c}"
                            )))
                        }
                        None => plain.push(c.clone()),
                    }
                }
                if let Some(predicate) = conjunction(plain) {
                    self.specs.push(OperatorSpec::Filter(FilterSpec {
                        predicate: physical(self.ctx, &predicate, &input)?,
                        schema: self.schema.clone(),
                        condition: predicate,
                        relation: self.stream.name.clone(),
                    }));
                }
                for spec in joins {
                    if let OperatorSpec::LookupJoin(s) = &spec {
                        self.tables.push(s.table_name.clone());
                    }
                    self.specs.push(spec);
                }
                Ok(())
            }
            LogicalPlan::Filter(f) => {
                if self.window.is_some()
                    && !self.aggregated
                    && !self.assigns
                    && mentions_window(&f.predicate)
                {
                    return Err(Error::NotSupported(
                        "WHERE cannot refer to window_start or window_end; use HAVING".into(),
                    ));
                }
                self.specs.push(OperatorSpec::Filter(FilterSpec {
                    predicate: physical(self.ctx, &f.predicate, &input)?,
                    schema: self.schema.clone(),
                    condition: f.predicate.clone(),
                    relation: self.stream.name.clone(),
                }));
                Ok(())
            }
            LogicalPlan::Projection(p) => {
                let exprs = p
                    .expr
                    .iter()
                    .map(|e| physical(self.ctx, e, &input))
                    .collect::<Result<Vec<_>>>()?;
                self.schema = Arc::new(p.schema.as_arrow().clone());
                self.times = result_time::through_projection(&self.times, &p.expr, &input);
                self.specs.push(OperatorSpec::Project(ProjectSpec {
                    exprs,
                    input: Arc::new(input.as_arrow().clone()),
                    schema: self.schema.clone(),
                    columns: p.expr.clone(),
                    relation: self.stream.name.clone(),
                }));
                Ok(())
            }
            LogicalPlan::Aggregate(a) => {
                let Some(spec) = self.window else {
                    return Err(Error::NotSupported(
                        "aggregation over an unbounded stream needs a window: \
                         FROM TUMBLE(stream, ts, INTERVAL '1' MINUTE)"
                            .into(),
                    ));
                };
                self.schema = Arc::new(a.schema.as_arrow().clone());
                self.times = result_time::window_results(&a.schema);
                let time_column = self
                    .stream
                    .event_time
                    .as_ref()
                    .map(|e| e.column)
                    .ok_or_else(|| Error::Internal("windowed stream without event time".into()))?;
                self.specs.push(plan_aggregate(
                    self.ctx,
                    spec,
                    &self.stream.name,
                    time_column,
                    &self.scan_schema,
                    &input,
                    &a.group_expr,
                    &a.aggr_expr,
                    self.schema.clone(),
                )?);
                self.aggregated = true;
                Ok(())
            }
            LogicalPlan::Window(w) => self.window_functions(w, &input, above),
            _ => unreachable!("the chain holds only the node kinds matched above"),
        }
    }

    /// Window functions: a ranking (window Top-N) or history (`LAG`, aggregates `OVER`).
    fn window_functions(
        &mut self,
        w: &datafusion::logical_expr::logical_plan::Window,
        input: &datafusion::common::DFSchema,
        above: &[&LogicalPlan],
    ) -> Result<()> {
        if topn::is_ranking(w) {
            if !self.aggregated || matches!(self.window, Some(WindowSpec::Session { .. })) {
                return Err(Error::NotSupported(
                    "ROW_NUMBER(), RANK() and DENSE_RANK() are supported over the results \
                     of a TUMBLE, HOP or CUMULATE aggregate, PARTITION BY window_start, \
                     window_end (window Top-N)"
                        .into(),
                ));
            }
            self.schema = Arc::new(w.schema.as_arrow().clone());
            let spec = topn::plan_window_rank(self.ctx, input, w, above, &self.stream.name)?;
            self.specs.push(spec);
            return Ok(());
        }
        if self.window.is_some() && !self.aggregated && !self.assigns {
            return Err(Error::NotSupported(
                "OVER inside a windowed query: compute history over its results from an \
                 outer query (SELECT ... FROM (SELECT ... GROUP BY ...) AS t)"
                    .into(),
            ));
        }
        self.schema = Arc::new(w.schema.as_arrow().clone());
        self.specs.push(plan_history(
            self.ctx,
            self.stream,
            input,
            &w.window_expr,
            self.aggregated,
            self.schema.clone(),
        )?);
        Ok(())
    }

    /// Adds the operator that gives each row its windows' bounds.
    fn assign_windows(&mut self) -> Result<()> {
        self.specs
            .push(window_assign(self.window, self.stream, &self.scan_schema)?);
        self.schema = self.scan_schema.clone();
        self.assigned = true;
        Ok(())
    }
}

/// Whether `e` holds a subquery (`IN (SELECT ...)`, `EXISTS`, a scalar subquery).
fn has_subquery(e: &LExpr) -> bool {
    e.exists(|e| {
        Ok(matches!(
            e,
            LExpr::InSubquery(_) | LExpr::Exists(_) | LExpr::ScalarSubquery(_)
        ))
    })
    .unwrap_or(false)
}

/// `WHERE` conditions that read only the stream's columns move below a join with a table,
/// so rows they drop are never looked up (for `JOIN` and `LEFT JOIN` alike: a left row's own
/// columns are the same with or without its match).
fn filter_before_lookups(plan: LogicalPlan) -> Result<LogicalPlan> {
    use datafusion::common::tree_node::Transformed;
    use datafusion::logical_expr::logical_plan::{Filter, Join};
    let moved = plan.transform_up(|node| {
        let LogicalPlan::Filter(f) = &node else {
            return Ok(Transformed::no(node));
        };
        let LogicalPlan::Join(j) = f.input.as_ref() else {
            return Ok(Transformed::no(node));
        };
        let left = j.left.schema();
        let (stream_only, rest): (Vec<LExpr>, Vec<LExpr>) = split_conjunction(&f.predicate)
            .into_iter()
            .cloned()
            .partition(|c| {
                let cols = c.column_refs();
                !has_subquery(c) && !cols.is_empty() && cols.iter().all(|c| left.has_column(c))
            });
        let Some(below) = conjunction(stream_only) else {
            return Ok(Transformed::no(node));
        };
        let filtered = LogicalPlan::Filter(Filter::try_new(below, j.left.clone())?);
        let join = LogicalPlan::Join(Join {
            left: Arc::new(filtered),
            ..j.clone()
        });
        Ok(Transformed::yes(match conjunction(rest) {
            Some(above) => LogicalPlan::Filter(Filter::try_new(above, Arc::new(join))?),
            None => join,
        }))
    })?;
    Ok(moved.data)
}
