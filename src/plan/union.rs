//! `UNION ALL` of streams as a continuous query's input: `FROM (SELECT ... FROM s1 UNION ALL
//! SELECT ... FROM s2) u` or a view over such a union. Each branch reads one stream through
//! a `WHERE` and a select list (filters and projections, run where the stream's rows arrive);
//! the branches' columns must agree in number (42601) and, position by position, in type
//! (42804). Every branch must keep its stream's event-time column, at the same position: it
//! is the union's event time, and the union's watermark is the smallest of its streams'
//! (see [`crate::operators::union`]).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::logical_expr::Expr as LExpr;
use datafusion::sql::sqlparser::ast::{self as sq, SetExpr, SetOperator, SetQuantifier};

use super::catalog::{Catalog, StreamDef};
use super::query::{plan_continuous, QueryPlan};
use super::spec::OperatorSpec;
use crate::error::{sqlstate, Error, Result};
use crate::sql::Clauses;

/// Most streams one `UNION ALL` reads (54001 past it).
pub const MAX_UNION_INPUTS: usize = 16;

/// One branch of a union: a stream, and the filters and projections its rows pass.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnionBranch {
    /// The stream it reads.
    pub stream: String,
    /// Its operators (filters and projections), from the stream's rows to the union's.
    pub specs: Vec<OperatorSpec>,
}

/// A `UNION ALL` of streams, read as one stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnionPlan {
    /// The branches, in the order written.
    pub branches: Vec<UnionBranch>,
    /// The union's rows, as a stream (its event time is the branches' event-time column).
    pub schema: SchemaRef,
    /// The position of the event-time column in `schema`.
    pub time_column: usize,
}

impl UnionPlan {
    /// Whether a branch reads stream `name`.
    pub fn reads(&self, name: &str) -> bool {
        self.branches.iter().any(|b| b.stream == name)
    }
}

/// Whether a query's body is a `UNION ALL` (or another set operation).
pub(super) fn is_set_operation(query: &sq::Query) -> bool {
    matches!(query.body.as_ref(), SetExpr::SetOperation { .. })
}

/// Plans a query whose body is `... UNION ALL ...` as a plan with no operators of its own,
/// reading the union as its stream.
pub(super) fn plan_union(query: &sq::Query, catalog: &Catalog) -> Result<QueryPlan> {
    if query.order_by.is_some() || query.limit_clause.is_some() || query.with.is_some() {
        return Err(Error::NotSupported(
            "ORDER BY, LIMIT and WITH are not supported in continuous queries".into(),
        ));
    }
    let mut selects = Vec::new();
    flatten(query.body.as_ref(), &mut selects)?;
    let mut branches = Vec::new();
    let mut planned: Vec<(QueryPlan, usize)> = Vec::new();
    for (i, select) in selects.iter().enumerate() {
        let q = sq::Query {
            body: Box::new((*select).clone()),
            ..query.clone()
        };
        let plan = plan_continuous(&q, &Clauses::default(), catalog)?;
        let time = branch_time(&plan, i + 1)?;
        planned.push((plan, time));
    }
    let (first, time_column) = (&planned[0].0, planned[0].1);
    for (i, (plan, time)) in planned.iter().enumerate().skip(1) {
        check_columns(first, plan, i + 1)?;
        if *time != time_column {
            return Err(Error::NotSupported(format!(
                "the branches of a UNION ALL must each select their stream's event-time column \
                 at the same position: branch 1 has it at position {}, branch {} at position {}; \
                 reorder the select lists",
                time_column + 1,
                i + 1,
                time + 1
            )));
        }
    }
    // Names from the first branch; a column is nullable if it is in any branch.
    let fields: Vec<Field> = first
        .schema
        .fields()
        .iter()
        .enumerate()
        .map(|(c, f)| {
            let nullable = planned.iter().any(|(p, _)| p.schema.field(c).is_nullable());
            f.as_ref().clone().with_nullable(nullable)
        })
        .collect();
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let names: Vec<String> = planned.iter().map(|(p, _)| p.stream.name.clone()).collect();
    // What the branches read besides their streams (queries read as streams), so that the
    // union's readers depend on them.
    let (mut tables, mut queries) = (Vec::new(), Vec::new());
    for (plan, _) in &planned {
        for t in &plan.tables {
            if !tables.contains(t) {
                tables.push(t.clone());
            }
        }
        for q in &plan.queries {
            if !queries.contains(q) {
                queries.push(q.clone());
            }
        }
    }
    for (plan, _) in planned {
        branches.push(UnionBranch {
            stream: plan.stream.name.clone(),
            specs: plan.specs,
        });
    }
    let name = format!("union({})", names.join(", "));
    let stream = Arc::new(StreamDef::derived(&name, schema.clone(), Some(time_column)));
    Ok(QueryPlan {
        stream,
        window: None,
        specs: Vec::new(),
        schema: schema.clone(),
        tables,
        queries,
        union: Some(Arc::new(UnionPlan {
            branches,
            schema,
            time_column,
        })),
    })
}

/// The `SELECT`s of a tree of `UNION ALL`s, left to right (without recursion: the tree's
/// depth is the user's).
fn flatten<'a>(body: &'a SetExpr, out: &mut Vec<&'a SetExpr>) -> Result<()> {
    let mut stack = vec![body];
    while let Some(e) = stack.pop() {
        match e {
            SetExpr::SetOperation {
                op: SetOperator::Union,
                set_quantifier: SetQuantifier::All,
                left,
                right,
            } => {
                // Right pushed first: the left side comes out first.
                stack.push(right);
                stack.push(left);
            }
            SetExpr::SetOperation { op, .. } => {
                return Err(Error::NotSupported(format!(
                    "{op} of streams is not supported: only UNION ALL (a {op} would have to \
                     remember every row it has seen)"
                )))
            }
            SetExpr::Query(q) if q.order_by.is_none() && q.limit_clause.is_none() => {
                stack.push(q.body.as_ref())
            }
            SetExpr::Select(_) => out.push(e),
            other => {
                return Err(Error::NotSupported(format!(
                    "a UNION ALL branch must be a SELECT from a stream, not {other}"
                )))
            }
        }
        if out.len() + stack.len() > MAX_UNION_INPUTS {
            return Err(Error::limit(
                sqlstate::STATEMENT_TOO_COMPLEX,
                format!("a UNION ALL reads at most {MAX_UNION_INPUTS} streams"),
            ));
        }
    }
    Ok(())
}

/// Where branch `n` (1-based) keeps its stream's event-time column, which must pass
/// through unchanged; refuses a branch that does more than filter and project a stream.
fn branch_time(plan: &QueryPlan, n: usize) -> Result<usize> {
    let plain = plan.window.is_none()
        && plan.union.is_none()
        && plan
            .specs
            .iter()
            .all(|s| matches!(s, OperatorSpec::Filter(_) | OperatorSpec::Project(_)));
    if !plain {
        return Err(Error::NotSupported(format!(
            "branch {n} of the UNION ALL does more than filter and project stream \"{}\": \
             a branch is SELECT columns FROM stream [WHERE ...]; aggregate, join or match \
             over the union instead",
            plan.stream.name
        )));
    }
    let Some(et) = &plan.stream.event_time else {
        return Err(Error::plan(
            sqlstate::INVALID_OBJECT_DEFINITION,
            format!(
                "stream \"{}\" has no event time; every stream of a UNION ALL needs WATERMARK \
                 FOR <column>, so that the union has one clock",
                plan.stream.name
            ),
        ));
    };
    let et_name = plan.stream.schema.field(et.column).name().clone();
    // The last projection decides where each column ends up; without one, the stream's.
    let mut at = Some(et.column);
    for spec in &plan.specs {
        if let OperatorSpec::Project(p) = spec {
            at = at.and_then(|from| {
                let from_name = p.input.field(from).name().clone();
                p.columns.iter().position(
                    |c| matches!(c.clone().unalias(), LExpr::Column(col) if col.name == from_name),
                )
            });
        }
    }
    at.filter(|&c| matches!(plan.schema.field(c).data_type(), DataType::Timestamp(_, _)))
        .ok_or_else(|| {
            Error::NotSupported(format!(
                "branch {n} of the UNION ALL must select stream \"{}\"'s event-time column \
                 \"{et_name}\" as it is: it is the union's event time",
                plan.stream.name
            ))
        })
}

/// Branch `n` (1-based) has as many columns as the first, of the same types.
fn check_columns(first: &QueryPlan, plan: &QueryPlan, n: usize) -> Result<()> {
    let (a, b) = (first.schema.fields(), plan.schema.fields());
    if a.len() != b.len() {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            format!(
                "each UNION ALL branch must have the same number of columns: the first has {}, \
                 branch {n} has {}",
                a.len(),
                b.len()
            ),
        ));
    }
    for (c, (x, y)) in a.iter().zip(b.iter()).enumerate() {
        if x.data_type() != y.data_type() {
            return Err(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                format!(
                    "UNION ALL column {} is \"{}\" {} in the first branch but \"{}\" {} in \
                     branch {n}; cast one of them (CAST({} AS ...))",
                    c + 1,
                    x.name(),
                    crate::sources::value::type_name(x.data_type()),
                    y.name(),
                    crate::sources::value::type_name(y.data_type()),
                    y.name()
                ),
            ));
        }
    }
    Ok(())
}
