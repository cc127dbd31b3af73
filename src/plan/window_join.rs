//! Plans joins whose inputs are not two declared streams: window joins (Flink's form, both
//! inputs in the same `TUMBLE`, `HOP` or `CUMULATE` window, joined on `l.window_start =
//! r.window_start AND l.window_end = r.window_end`), whether the inputs are a window's rows
//! (`FROM TUMBLE(a, ts, ...) l JOIN TUMBLE(b, ts, ...) r ON ...`) or its results (`FROM
//! (SELECT ... FROM TUMBLE(a, ...) GROUP BY ...) l JOIN (...) r ON ...`, or queries and views
//! that aggregate a window); and interval joins of a stream with a query over one.
//!
//! Each input is planned as a query of its own; its operators run in the merge's branch for
//! it ([`super::interval_join::plan_join`]), where its rows are timed at their window's last
//! instant: a window's rows of both inputs meet when the watermark passes the window's end,
//! and a window's pairs (and LEFT's unmatched rows) are emitted then, once. State is each
//! open window's rows or groups, bounded by the watermark. The anti join (`NOT EXISTS`) takes
//! such inputs too, a stream under two aliases included.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::sql::sqlparser::ast::{
    self as sq, ObjectName, ObjectNamePart, SetExpr, TableFactor,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::catalog::{normalize, normalize_object, Catalog};
use super::chained::query_as_stream;
use super::context::PlanContext;
use super::from::WindowSpec;
use super::interval_join::{plan_join, JoinInput};
use super::query::{plan_continuous, QueryPlan};
use crate::error::{sqlstate, Error, Result};
use crate::sql::Clauses;

/// Whether `query` joins two inputs that are not both declared streams and neither a table:
/// windows' rows or results, queries, views, or a stream with one of them.
pub(super) fn joins_inputs(query: &sq::Query, catalog: &Catalog) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    let [from] = select.from.as_slice() else {
        return false;
    };
    let right = match from.joins.as_slice() {
        [join] => join.relation.clone(),
        [] => match absent_relation(select) {
            Some(r) => r,
            None => return false,
        },
        _ => return false,
    };
    let input = |r: &TableFactor| match r {
        TableFactor::Table {
            name, args: None, ..
        } => {
            let key = normalize_object(name);
            catalog.table(&key).is_none()
                && (catalog.stream(&key).is_some()
                    || catalog.query(&key).is_some()
                    || catalog.view(&key).is_some())
        }
        TableFactor::Table { args: Some(_), .. } => true,
        TableFactor::Derived { subquery, .. } => !super::union::is_set_operation(subquery),
        _ => false,
    };
    input(&from.relation) && input(&right)
}

/// The relation read by the `NOT EXISTS (SELECT ... FROM r ...)` of `select`'s WHERE, if it
/// has one.
fn absent_relation(select: &sq::Select) -> Option<TableFactor> {
    let mut found = None;
    let _ = sq::visit_expressions(select.selection.as_ref()?, |e| {
        if let Some(r) = exists_relation(e) {
            found = Some(r.clone());
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}

/// The relation of `e` if it is `EXISTS (SELECT ... FROM r ...)` (negated or not).
fn exists_relation(e: &sq::Expr) -> Option<&TableFactor> {
    let sq::Expr::Exists { subquery, .. } = e else {
        return None;
    };
    let SetExpr::Select(inner) = subquery.body.as_ref() else {
        return None;
    };
    match inner.from.as_slice() {
        [f] if f.joins.is_empty() => Some(&f.relation),
        _ => None,
    }
}

/// Points the `NOT EXISTS` subquery of `select` at the input table named `name`.
fn read_absent_from(select: &mut sq::Select, name: &str) {
    let Some(selection) = select.selection.as_mut() else {
        return;
    };
    let _ = sq::visit_expressions_mut(selection, |e| {
        if exists_relation(e).is_some() {
            if let sq::Expr::Exists { subquery, .. } = e {
                if let SetExpr::Select(inner) = subquery.body.as_mut() {
                    inner.from[0].relation = table(name);
                }
            }
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
}

/// Plans a query joining two inputs (see the module docs).
pub(super) fn plan_input_join(query: &sq::Query, catalog: &Catalog) -> Result<QueryPlan> {
    let mut query = query.clone();
    let SetExpr::Select(select) = query.body.as_mut() else {
        return Err(Error::Internal("a join that is no SELECT".into()));
    };
    let anti = select.from[0].joins.is_empty();
    let right = if anti {
        absent_relation(select)
            .ok_or_else(|| Error::Internal("an anti join with no NOT EXISTS".into()))?
    } else {
        select.from[0].joins[0].relation.clone()
    };
    let left = join_input(&select.from[0].relation, catalog)?;
    let right = join_input(&right, catalog)?;
    if left.name == right.name {
        return Err(Error::plan(
            sqlstate::DUPLICATE_ALIAS,
            format!(
                "both inputs of the join are named \"{}\": give them aliases (FROM ... l JOIN \
                 ... r, or FROM ... l WHERE NOT EXISTS (SELECT ... FROM ... r ...))",
                left.name
            ),
        ));
    }
    // Each input is read as a table of its rows, under the name the query gives it.
    let mut ctx = PlanContext::new();
    ctx.add_table(&left.name, left.schema.clone())?;
    ctx.add_table(&right.name, right.schema.clone())?;
    select.from[0].relation = table(&left.name);
    if anti {
        read_absent_from(select, &right.name);
    } else {
        select.from[0].joins[0].relation = table(&right.name);
    }
    plan_join(&ctx, &query, [left, right])
}

/// A reference to the table named `name` (as it is written: no folding).
fn table(name: &str) -> TableFactor {
    TableFactor::Table {
        name: ObjectName(vec![ObjectNamePart::Identifier(sq::Ident::with_quote(
            '"', name,
        ))]),
        alias: None,
        args: None,
        with_hints: Vec::new(),
        version: None,
        with_ordinality: false,
        partitions: Vec::new(),
        json_path: None,
        sample: None,
        index_hints: Vec::new(),
    }
}

/// One input of the join, planned.
fn join_input(relation: &TableFactor, catalog: &Catalog) -> Result<JoinInput> {
    let alias = match relation {
        TableFactor::Table { alias, .. } | TableFactor::Derived { alias, .. } => {
            alias.as_ref().map(|a| normalize(&a.name))
        }
        _ => None,
    };
    match relation {
        TableFactor::Table {
            name, args: None, ..
        } => {
            let key = normalize_object(name);
            if let Some(s) = catalog.stream(&key) {
                let mut input = JoinInput::stream(s)?;
                input.name = alias.unwrap_or(key);
                return Ok(input);
            }
            match query_as_stream(&key, catalog)? {
                Some((_, plan)) => {
                    let mut input = from_plan(alias.unwrap_or_else(|| key.clone()), plan)?;
                    input.queries.push(key);
                    Ok(input)
                }
                None => Err(Error::undefined("stream", &key)),
            }
        }
        TableFactor::Table { args: Some(_), .. } => {
            // `TUMBLE(a, ts, ...)`: the window's rows, as `SELECT * FROM TUMBLE(...)` gives.
            let mut window = relation.clone();
            if let TableFactor::Table { alias, .. } = &mut window {
                *alias = None;
            }
            let mut q = select_all();
            if let SetExpr::Select(s) = q.body.as_mut() {
                s.from[0].relation = window;
            }
            let plan = plan_continuous(&q, &Clauses::default(), catalog)?;
            let name = alias.unwrap_or_else(|| plan.stream.name.clone());
            from_plan(name, plan)
        }
        TableFactor::Derived { subquery, .. } => {
            let plan = plan_continuous(subquery, &Clauses::default(), catalog)?;
            let name = alias.unwrap_or_else(|| plan.stream.name.clone());
            from_plan(name, plan)
        }
        other => Err(Error::NotSupported(format!(
            "a join of streams reads streams, windows and subqueries, not {other}"
        ))),
    }
}

/// `SELECT * FROM x`, whose `FROM` the caller replaces.
fn select_all() -> sq::Query {
    let mut statements =
        Parser::parse_sql(&GenericDialect {}, "SELECT * FROM x").expect("a SELECT that parses");
    match statements.remove(0) {
        sq::Statement::Query(q) => *q,
        _ => unreachable!("a SELECT is a query"),
    }
}

/// An input that runs the operators of `plan` (a query over one stream) on that stream's
/// rows: timed by its window's end if its rows are a window's (they carry `window_start`
/// and `window_end`), else by its stream's event-time column, which it must keep.
fn from_plan(name: String, plan: QueryPlan) -> Result<JoinInput> {
    if plan.union.is_some() {
        return Err(Error::NotSupported(format!(
            "\"{name}\" reads a UNION ALL or a join: a join's inputs each read one stream; \
             join the union's streams one by one"
        )));
    }
    let is_time = |c: &str| {
        plan.schema
            .index_of(c)
            .ok()
            .filter(|&i| matches!(plan.schema.field(i).data_type(), DataType::Timestamp(_, _)))
    };
    let window: Option<WindowSpec> = plan
        .window
        .filter(|_| is_time("window_start").is_some() && is_time("window_end").is_some());
    let time = match window {
        Some(_) => is_time("window_end"),
        None => plan
            .stream
            .event_time
            .as_ref()
            .and_then(|e| is_time(plan.stream.schema.field(e.column).name())),
    };
    let Some(time) = time else {
        let what = match plan.window {
            Some(_) => "window_start and window_end".to_string(),
            None => match &plan.stream.event_time {
                Some(e) => format!(
                    "stream \"{}\"'s event-time column \"{}\"",
                    plan.stream.name,
                    plan.stream.schema.field(e.column).name()
                ),
                None => format!("an event time (stream \"{}\" has none)", plan.stream.name),
            },
        };
        return Err(Error::NotSupported(format!(
            "\"{name}\" must select {what} for the join to be bounded by time"
        )));
    };
    Ok(JoinInput {
        name,
        stream: plan.stream.name.clone(),
        schema: Arc::clone(&plan.schema),
        specs: plan.specs,
        time,
        window,
        tables: plan.tables,
        queries: plan.queries,
    })
}
