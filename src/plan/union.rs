//! `UNION ALL` of streams as a continuous query's input: `FROM (SELECT ... FROM s1 UNION ALL
//! SELECT ... FROM s2) u` or a view over such a union. Each branch reads one stream through
//! a `WHERE` and a select list (filters and projections, run where the stream's rows arrive);
//! the branches' columns must agree in number (42601) and, position by position, in type
//! (42804). Every branch must keep its stream's event-time column, at the same position: it
//! is the union's event time, and the union's watermark is the smallest of its streams'
//! (see [`crate::operators::union`]).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::{self as sq, SetExpr, SetOperator, SetQuantifier};

use super::catalog::{Catalog, StreamDef};
use super::query::{plan_continuous, QueryPlan};
use super::result_time::TimeColumn;
use super::spec::OperatorSpec;
use crate::error::{sqlstate, Error, Result};
use crate::operators::interval_join::IntervalKind;
use crate::sql::Clauses;

/// Most streams one `UNION ALL` reads (54001 past it).
pub const MAX_UNION_INPUTS: usize = 16;

/// One branch of a union: a stream (or a merge of several: a join, another union), and the
/// operators its rows pass.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnionBranch {
    /// The stream it reads; with `merge`, the merge's name (`join(a, b)`, `union(a, b)`).
    pub stream: String,
    /// When its rows come out of a merge of several streams (it reads a join or another
    /// union): that merge, which runs in a hub of its own, feeding this branch.
    pub merge: Option<Arc<UnionPlan>>,
    /// Its operators, from the stream's (or the merge's) rows to the union's.
    pub specs: Vec<OperatorSpec>,
    /// How far (nanoseconds) behind its input's watermark its rows may come out (a join's
    /// time column: see [`super::result_time`]); the union reads the branch's watermark as
    /// that much earlier.
    pub delay: i64,
}

impl UnionBranch {
    /// A branch reading stream `stream` through `specs`, on time.
    pub fn of_stream(stream: &str, specs: Vec<OperatorSpec>) -> UnionBranch {
        UnionBranch {
            stream: stream.to_string(),
            merge: None,
            specs,
            delay: 0,
        }
    }
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
    /// Whether a branch reads stream `name` (directly or through a merge it reads).
    pub fn reads(&self, name: &str) -> bool {
        self.branches.iter().any(|b| match &b.merge {
            Some(m) => m.reads(name),
            None => b.stream == name,
        })
    }

    /// The declared streams it reads, each once, in the order of its branches (those of a
    /// merge a branch reads included).
    pub fn streams(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for b in &self.branches {
            let names = match &b.merge {
                Some(m) => m.streams(),
                None => vec![b.stream.clone()],
            };
            for n in names {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out
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
    let mut planned: Vec<(QueryPlan, Vec<TimeColumn>)> = Vec::new();
    for (i, select) in selects.iter().enumerate() {
        let q = sq::Query {
            body: Box::new((*select).clone()),
            ..query.clone()
        };
        let plan = plan_continuous(&q, &Clauses::default(), catalog)?;
        let times = branch_times(&plan, i + 1)?;
        planned.push((plan, times));
    }
    for (i, (plan, _)) in planned.iter().enumerate().skip(1) {
        check_columns(&planned[0].0, plan, i + 1)?;
    }
    let time_column = common_time(&planned)?;
    let first = &planned[0].0;
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
    let branches: Vec<UnionBranch> = planned
        .into_iter()
        .map(|(plan, times)| {
            let delay = times
                .iter()
                .find(|t| t.column == time_column)
                .map_or(0, |t| t.delay);
            UnionBranch {
                stream: plan.stream.name.clone(),
                merge: plan.union,
                specs: plan.specs,
                delay,
            }
        })
        .collect();
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
        times: vec![TimeColumn::on_time(time_column)],
    })
}

/// The union's event-time column: the first of the first branch's time columns that every
/// branch has at the same position.
fn common_time(planned: &[(QueryPlan, Vec<TimeColumn>)]) -> Result<usize> {
    let first = &planned[0].1;
    let everywhere = |c: usize| planned.iter().all(|(_, t)| t.iter().any(|t| t.column == c));
    if let Some(t) = first.iter().find(|t| everywhere(t.column)) {
        return Ok(t.column);
    }
    let (n, other) = planned
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, (_, t))| !t.iter().any(|t| t.column == first[0].column))
        .map(|(i, (_, t))| (i + 1, t))
        .unwrap_or((1, first));
    let positions = |t: &[TimeColumn]| {
        t.iter()
            .map(|t| (t.column + 1).to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    };
    Err(Error::NotSupported(format!(
        "the branches of a UNION ALL must each select their stream's event-time column \
         at the same position: branch 1 has it at position {}, branch {n} at position {}; \
         reorder the select lists",
        positions(first),
        positions(other)
    )))
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

/// The columns where branch `n` (1-based) keeps its input's event time as it is (a
/// stream's event-time column, a window's `window_end`, a join's input time); refuses a
/// branch with none.
fn branch_times(plan: &QueryPlan, n: usize) -> Result<Vec<TimeColumn>> {
    let is_time = |c: usize| matches!(plan.schema.field(c).data_type(), DataType::Timestamp(_, _));
    let times: Vec<TimeColumn> = plan
        .times
        .iter()
        .copied()
        .filter(|t| is_time(t.column))
        .collect();
    if !times.is_empty() {
        return Ok(times);
    }
    let pattern = plan.specs.iter().find_map(|s| match s {
        OperatorSpec::Pattern(p) => Some(p),
        _ => None,
    });
    if let Some(p) = pattern {
        let et = p
            .matcher
            .input_schema
            .field(p.matcher.time_column)
            .name()
            .clone();
        if p.matcher.within.is_none() {
            return Err(Error::NotSupported(format!(
                "branch {n} of the UNION ALL reads the matches of a MATCH_RECOGNIZE without \
                 WITHIN, which carry no event time a union can wait for (a match's rows may lie \
                 any distance behind the row that completes it): bound it with WITHIN \
                 INTERVAL '...', or match over the union instead (FROM (SELECT ... UNION ALL \
                 SELECT ...) MATCH_RECOGNIZE (...))"
            )));
        }
        return Err(Error::NotSupported(format!(
            "branch {n} of the UNION ALL must select a match row's event time as it is (a \
             measure v.{et}, FIRST(v.{et}) or LAST(v.{et}), or ALL ROWS PER MATCH's {et}): it \
             is the union's event time"
        )));
    }
    let join = plan.specs.iter().find_map(|s| match s {
        OperatorSpec::IntervalJoin(j) => Some(j),
        _ => None,
    });
    if let Some(j) = join {
        let what = match j.kind {
            IntervalKind::Full => {
                return Err(Error::NotSupported(format!(
                    "branch {n} of the UNION ALL reads a FULL JOIN, whose rows may lack either \
                     side's time, so it has no event time: read a JOIN, LEFT JOIN or RIGHT \
                     JOIN, which keeps one side's"
                )))
            }
            IntervalKind::Inner => format!(
                "the event-time column of \"{}\" or of \"{}\"",
                j.streams[0], j.streams[1]
            ),
            IntervalKind::Right => format!(
                "the event-time column of \"{}\" (a RIGHT JOIN may leave the other NULL)",
                j.streams[1]
            ),
            IntervalKind::Left | IntervalKind::Anti => {
                format!("the event-time column of \"{}\"", j.streams[0])
            }
        };
        return Err(Error::NotSupported(format!(
            "branch {n} of the UNION ALL must select {what} as it is: it is the union's \
             event time"
        )));
    }
    let windowed = plan.specs.iter().any(|s| {
        matches!(
            s,
            OperatorSpec::WindowAggregate(_) | OperatorSpec::SessionWindow(_)
        )
    });
    if windowed {
        return Err(Error::NotSupported(format!(
            "branch {n} of the UNION ALL must select window_end as it is: a window's results \
             are timed by their window's end, the union's event time"
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
    Err(Error::NotSupported(format!(
        "branch {n} of the UNION ALL must select stream \"{}\"'s event-time column \
         \"{et_name}\" as it is: it is the union's event time",
        plan.stream.name
    )))
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
