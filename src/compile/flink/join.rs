//! saql's joins in Flink SQL. Stream–stream joins keep their text: an interval join (`JOIN`,
//! `LEFT`, `RIGHT` or `FULL`, bounded by `BETWEEN` on both event times) is Flink's interval
//! join, and a window join (both sides the same `TUMBLE`/`HOP` window, or windows' results,
//! joined on `window_start` and `window_end`) is Flink's window join, each side a `(SELECT *
//! FROM TABLE(TUMBLE(...)))`. A stream–table join reads the table as a versioned Flink table
//! (see [`super::ddl::reference_table`]) through an event-time temporal join: a lookup join
//! (`JOIN t ON`, `LEFT JOIN`) `FOR SYSTEM_TIME AS OF` the stream's event time against rows
//! valid from the start, which is what saql's lookup join reads when the table does not
//! change while the stream runs (the program's tables are the compiled files' rows, fixed);
//! `FOR SYSTEM_TIME AS OF s.ts` against the versions its `version_time` column starts.
//!
//! `WHERE` conjuncts that are subqueries become joins in a subquery that keeps the stream's
//! columns: `x IN (SELECT k FROM t ...)` and `EXISTS (SELECT ... FROM t WHERE t.k = ...)` an
//! inner temporal join (the key matches at most one row), `NOT IN` and `NOT EXISTS` a LEFT
//! temporal join keeping the rows with no match, and `NOT EXISTS (SELECT ... FROM stream
//! WHERE ... BETWEEN ...)` a LEFT interval join keeping the rows with no match (Flink emits a
//! left row without a match once the watermark closes its interval, as saql does).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, Ident, SetExpr, TableFactor, TableVersion, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::expr::{self, name_sql};
use super::select::{event_time_of, from_sql, refuse, Ctx, From, TableUse};
use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};

/// `FROM a JOIN b ON ... [JOIN ...]` in Flink SQL.
pub(super) fn joined_from(from: &sq::TableWithJoins, ctx: &Ctx) -> Result<From> {
    let left = side(&from.relation, ctx)?;
    let left_name = left.alias.clone().unwrap_or_default();
    let mut sql = left.sql.clone();
    let mut stars = vec![format!("{}.*", name_sql(&left_name))];
    let mut table_stars = Vec::new();
    for join in &from.joins {
        let (keyword, constraint) = match &join.join_operator {
            sq::JoinOperator::Join(c) | sq::JoinOperator::Inner(c) => ("JOIN", c),
            sq::JoinOperator::Left(c) | sq::JoinOperator::LeftOuter(c) => ("LEFT JOIN", c),
            sq::JoinOperator::Right(c) | sq::JoinOperator::RightOuter(c) => ("RIGHT JOIN", c),
            sq::JoinOperator::FullOuter(c) => ("FULL JOIN", c),
            _ => {
                return Err(refuse(
                    "a join other than JOIN, LEFT, RIGHT or FULL JOIN ... ON",
                ))
            }
        };
        let sq::JoinConstraint::On(on) = constraint else {
            return Err(refuse("a join without ON"));
        };
        let right = match &join.relation {
            TableFactor::Table {
                name,
                alias,
                version,
                args: None,
                ..
            } if ctx.catalog.table(&normalize_object(name)).is_some() => {
                let table = normalize_object(name);
                let alias = alias.as_ref().map_or(table.clone(), |a| normalize(&a.name));
                let text = table_side(&table, &alias, version.as_ref(), &left, ctx)?;
                let columns = table_columns(&table, &alias, ctx);
                stars.push(columns.clone());
                table_stars.push((alias, columns));
                text
            }
            other => {
                let right = side(other, ctx)?;
                stars.push(format!("{}.*", name_sql(&right.alias.unwrap_or_default())));
                right.sql
            }
        };
        sql.push_str(&format!(" {keyword} {right} ON {}", expr::sql(on, None)?));
    }
    Ok(From {
        sql,
        window: false,
        windowed_subquery: false,
        star: Some(stars.join(", ")).filter(|_| !table_stars.is_empty()),
        table_stars,
        ..left
    })
}

/// One joined input that is not a table: a stream, view, query or subquery as it is, a
/// window TVF as `(SELECT * FROM TABLE(...)) AS alias` (Flink's window join input).
fn side(relation: &TableFactor, ctx: &Ctx) -> Result<From> {
    if let TableFactor::Table {
        name,
        version: Some(_),
        ..
    } = relation
    {
        return Err(refuse(format!(
            "FOR SYSTEM_TIME AS OF on \"{}\", not a table joined after the stream,",
            normalize_object(name)
        )));
    }
    let mut from = from_sql(relation, &[], ctx, false)?;
    if from.window {
        let alias = from
            .alias
            .clone()
            .ok_or_else(|| refuse("a window join whose window has no alias (TUMBLE(...) AS l)"))?;
        let tvf = from
            .sql
            .strip_suffix(&format!(" AS {}", name_sql(&alias)))
            .unwrap_or(&from.sql)
            .to_string();
        from.sql = format!("(SELECT * FROM {tvf}) AS {}", name_sql(&alias));
        from.window = false;
    }
    Ok(from)
}

/// The table `table` joined as `alias`: `t FOR SYSTEM_TIME AS OF <time> AS alias`.
fn table_side(
    table: &str,
    alias: &str,
    version: Option<&TableVersion>,
    left: &From,
    ctx: &Ctx,
) -> Result<String> {
    let def = ctx
        .catalog
        .table(table)
        .ok_or_else(|| Error::undefined("table", table))?;
    let (time, versioned) = match version {
        None => {
            let Some(rowtime) = &left.rowtime else {
                return Err(refuse(format!(
                    "a lookup join with table \"{table}\" of rows that have no event-time \
                     column (a window's or a pattern's results)"
                )));
            };
            let left_name = left.alias.clone().unwrap_or_default();
            (
                format!("{}.{}", name_sql(&left_name), name_sql(rowtime)),
                false,
            )
        }
        Some(TableVersion::ForSystemTimeAsOf(e)) => {
            (expr::sql(e, None)?, def.version_time.is_some())
        }
        Some(other) => return Err(refuse(format!("{other}"))),
    };
    let used = TableUse {
        table: table.to_string(),
        versioned,
    };
    let text = format!(
        "{} FOR SYSTEM_TIME AS OF {time} AS {}",
        name_sql(&used.flink_name()),
        name_sql(alias)
    );
    ctx.reads.borrow_mut().table(used);
    Ok(text)
}

/// The table's own columns, qualified: what `alias.*` means (the Flink table has a column
/// more, its rows' version time).
fn table_columns(table: &str, alias: &str, ctx: &Ctx) -> String {
    let Some(def) = ctx.catalog.table(table) else {
        return format!("{}.*", name_sql(alias));
    };
    def.store
        .schema()
        .fields()
        .iter()
        .map(|f| format!("{}.{}", name_sql(alias), name_sql(f.name())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `s` with its `WHERE` subqueries (`[NOT] IN`, `[NOT] EXISTS`, top-level conjuncts) turned
/// into joins in a subquery over its stream (see the module docs); `None` if it has none.
pub(super) fn rewrite_subqueries(s: &sq::Select, ctx: &Ctx) -> Result<Option<sq::Select>> {
    let Some(selection) = &s.selection else {
        return Ok(None);
    };
    let mut conjuncts = Vec::new();
    split_and(selection, &mut conjuncts);
    if !conjuncts.iter().any(|c| subquery_of(c).is_some()) {
        return Ok(None);
    }
    let stream = match (&s.from[0].relation, s.from[0].joins.is_empty()) {
        (
            TableFactor::Table {
                name,
                alias,
                args: None,
                version: None,
                ..
            },
            true,
        ) if ctx.catalog.stream(&normalize_object(name)).is_some() => {
            let stream = normalize_object(name);
            let alias = alias
                .as_ref()
                .map_or(stream.clone(), |a| normalize(&a.name));
            (stream, alias)
        }
        _ => {
            return Err(refuse(
                "a subquery in WHERE over anything but one stream (FROM stream [alias] WHERE \
                 ... IN (SELECT ...))",
            ))
        }
    };
    let (stream, outer) = stream;
    let mut joins = String::new();
    let mut nulls = Vec::new();
    let mut rest = Vec::new();
    let mut n = 0;
    for conjunct in conjuncts {
        let Some(sub) = subquery_of(conjunct) else {
            rest.push(conjunct.clone());
            continue;
        };
        n += 1;
        let inner = format!("__saql_sub{n}");
        let (join, null) = subquery_join(&sub, &inner, &outer, ctx)?;
        joins.push_str(&join);
        nulls.extend(null);
    }
    let mut sql = format!(
        "SELECT {o}.* FROM {stream} AS {o}{joins}",
        o = name_sql(&outer),
        stream = name_sql(&stream)
    );
    if !nulls.is_empty() {
        sql.push_str(&format!(" WHERE {}", nulls.join(" AND ")));
    }
    let query = Parser::new(&GenericDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| Error::Internal(format!("{sql}: {e}")))?;
    let mut out = s.clone();
    out.from[0].relation = TableFactor::Derived {
        lateral: false,
        subquery: query,
        alias: Some(sq::TableAlias {
            explicit: true,
            name: Ident::new(outer),
            columns: Vec::new(),
            at: None,
        }),
        sample: None,
    };
    out.selection = rest.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: sq::BinaryOperator::And,
        right: Box::new(b),
    });
    Ok(Some(out))
}

fn split_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: sq::BinaryOperator::And,
            right,
        } => {
            split_and(left, out);
            split_and(right, out);
        }
        Expr::Nested(inner) => split_and(inner, out),
        other => out.push(other),
    }
}

/// A `WHERE` conjunct that is a subquery.
struct Subquery<'e> {
    query: &'e sq::Query,
    /// `x` of `x IN (...)`.
    probe: Option<&'e Expr>,
    negated: bool,
}

fn subquery_of(e: &Expr) -> Option<Subquery<'_>> {
    match e {
        Expr::InSubquery {
            expr,
            subquery,
            negated,
        } => Some(Subquery {
            query: subquery,
            probe: Some(expr),
            negated: *negated,
        }),
        Expr::Exists { subquery, negated } => Some(Subquery {
            query: subquery,
            probe: None,
            negated: *negated,
        }),
        Expr::UnaryOp {
            op: sq::UnaryOperator::Not,
            expr,
        } => subquery_of(expr).map(|s| Subquery {
            negated: !s.negated,
            ..s
        }),
        Expr::Nested(inner) => subquery_of(inner),
        _ => None,
    }
}

/// The join for one subquery over `stream`, named `inner`, and the condition that keeps the
/// stream's rows with no match (for `NOT`).
fn subquery_join(
    sub: &Subquery,
    inner: &str,
    outer: &str,
    ctx: &Ctx,
) -> Result<(String, Option<String>)> {
    let SetExpr::Select(select) = sub.query.body.as_ref() else {
        return Err(refuse("a subquery that is not one SELECT"));
    };
    let (name, alias) = match select.from.as_slice() {
        [sq::TableWithJoins {
            relation:
                TableFactor::Table {
                    name,
                    alias,
                    args: None,
                    version: None,
                    ..
                },
            joins,
        }] if joins.is_empty() => {
            let name = normalize_object(name);
            let alias = alias.as_ref().map_or(name.clone(), |a| normalize(&a.name));
            (name, alias)
        }
        _ => return Err(refuse("a subquery that does not read one table or stream")),
    };
    let (columns, table_key, stream_time): (Vec<String>, Option<(String, bool)>, Option<String>) =
        if let Some(t) = ctx.catalog.table(&name) {
            let schema = t.store.schema();
            let key = schema.field(t.store.key()[0]).name().clone();
            let columns = schema.fields().iter().map(|f| f.name().clone()).collect();
            (columns, Some((key, t.store.read().is_empty())), None)
        } else if let Some(s) = ctx.catalog.stream(&name) {
            let columns = s.schema.fields().iter().map(|f| f.name().clone()).collect();
            (columns, None, event_time_of(s))
        } else {
            return Err(refuse(format!(
                "a subquery over \"{name}\" (a view or query)"
            )));
        };
    let mut conditions = Vec::new();
    if let Some(w) = &select.selection {
        let mut w = w.clone();
        let _ = w.visit(&mut Qualify {
            names: [name.clone(), alias],
            columns: &columns,
            inner,
            outer,
        });
        conditions.push(w);
    }
    let mut probe_sql = None;
    if let Some(probe) = sub.probe {
        let [sq::SelectItem::UnnamedExpr(k) | sq::SelectItem::ExprWithAlias { expr: k, .. }] =
            select.projection.as_slice()
        else {
            return Err(refuse("an IN subquery that selects other than one column"));
        };
        let mut k = k.clone();
        let _ = k.visit(&mut Qualify {
            names: [name.clone(), name.clone()],
            columns: &columns,
            inner,
            outer,
        });
        let mut probe = probe.clone();
        let _ = probe.visit(&mut Qualify {
            names: [String::new(), String::new()],
            columns: &[],
            inner,
            outer,
        });
        probe_sql = Some(probe.to_string());
        conditions.push(Expr::BinaryOp {
            left: Box::new(probe),
            op: sq::BinaryOperator::Eq,
            right: Box::new(k),
        });
    }
    let on = conditions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" AND ");
    let keyword = if sub.negated { "LEFT JOIN" } else { "JOIN" };
    let join = format!(" {keyword} {} AS {inner} ON {on}", name_sql(&name));
    let matched = |column: &str| format!("{inner}.{} IS NULL", name_sql(column));
    match (table_key, stream_time) {
        (Some((key, empty)), _) => {
            let mut null = sub.negated.then(|| matched(&key));
            // saql's NOT IN: a NULL probe passes only while the table is empty.
            if let (true, Some(probe), false) = (sub.negated, &probe_sql, empty) {
                null = null.map(|n| format!("{n} AND {probe} IS NOT NULL"));
            }
            Ok((join, null))
        }
        (None, Some(time)) if sub.negated && sub.probe.is_none() => {
            Ok((join, Some(matched(&time))))
        }
        (None, _) => Err(refuse(format!(
            "{} over stream \"{name}\" (only NOT EXISTS, the anti join, reads a stream)",
            if sub.probe.is_some() { "IN" } else { "EXISTS" }
        ))),
    }
}

/// Names the subquery's relation `inner` in its condition: `t.col` and the bare names of its
/// columns (SQL reads a bare name as the innermost relation's column first); the other bare
/// names are the outer stream's, named `outer`.
struct Qualify<'a> {
    names: [String; 2],
    columns: &'a [String],
    inner: &'a str,
    outer: &'a str,
}

impl VisitorMut for Qualify<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        match e {
            Expr::Identifier(i) => {
                let relation = if self.columns.contains(&normalize(i)) {
                    self.inner
                } else {
                    self.outer
                };
                *e = Expr::CompoundIdentifier(vec![Ident::new(relation), i.clone()]);
            }
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2 && self.names.contains(&normalize(&parts[0])) =>
            {
                parts[0] = Ident::new(self.inner);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
