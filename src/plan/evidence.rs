//! Plans `EVIDENCE(...)` (see [`crate::operators::evidence`]): before DataFusion's planner
//! sees the query, each call `EVIDENCE(* | col, ... [, n])` becomes the aggregate's internal
//! form `evidence(n, <event time>, named_struct('col', col, ...))`, and a select item that is
//! only the call is named `evidence`.

use crate::error::sqlstate;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments, Ident,
    ObjectName, SelectItem, SetExpr, TableFactor, Value,
};

use super::catalog::{normalize, StreamDef};
use crate::error::{Error, Result};
use crate::limits::MAX_EVIDENCE_ROWS;
use crate::operators::evidence::{DEFAULT_ROWS, NAME};

/// Rewrites every `EVIDENCE(...)` call of `query` over `stream`'s rows. `windowed`: whether the
/// query groups a window's rows (elsewhere the call is refused).
pub(super) fn rewrite(query: &mut sq::Query, stream: &StreamDef, windowed: bool) -> Result<()> {
    if !mentions_evidence(query) {
        return Ok(());
    }
    if !windowed {
        return Err(Error::NotSupported(
            "EVIDENCE(...) returns the rows of a window's group: use it in the select list of a \
             windowed GROUP BY query (FROM TUMBLE, HOP, CUMULATE or SESSION)"
                .into(),
        ));
    }
    name_items(query);
    let time = stream
        .event_time
        .as_ref()
        .map(|e| stream.schema.field(e.column).name().clone())
        .ok_or_else(|| Error::Internal("windowed stream without event time".into()))?;
    let mut failed = None;
    let _ = sq::visit_expressions_mut(query, |e| {
        if let Expr::Function(f) = e {
            if is_evidence(f) {
                if let Err(err) = internal_form(f, stream, &time) {
                    failed = Some(err);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    });
    failed.map_or(Ok(()), Err)
}

fn is_evidence(f: &sq::Function) -> bool {
    matches!(f.name.0.as_slice(), [sq::ObjectNamePart::Identifier(id)]
        if id.quote_style.is_none() && id.value.eq_ignore_ascii_case(NAME))
}

fn mentions_evidence(query: &mut sq::Query) -> bool {
    let mut found = false;
    let _ = sq::visit_expressions_mut(query, |e| {
        if matches!(e, Expr::Function(f) if is_evidence(f)) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// Names `evidence` each select item that is only an EVIDENCE call, in the query and the
/// subqueries of its FROM.
fn name_items(query: &mut sq::Query) {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    for item in &mut select.projection {
        if let SelectItem::UnnamedExpr(e @ Expr::Function(_)) = item {
            if matches!(e, Expr::Function(f) if is_evidence(f)) {
                *item = SelectItem::ExprWithAlias {
                    expr: e.clone(),
                    alias: Ident::new(NAME),
                };
            }
        }
    }
    for from in &mut select.from {
        if let TableFactor::Derived { subquery, .. } = &mut from.relation {
            name_items(subquery);
        }
    }
}

/// Turns the user's call into `evidence(n, time, named_struct(...))`, keeping its FILTER.
fn internal_form(f: &mut sq::Function, stream: &StreamDef, time: &str) -> Result<()> {
    let usage = "EVIDENCE(*) or EVIDENCE(column, ...), optionally ending in the number of rows \
                 to keep: EVIDENCE(*, 20)";
    let FunctionArguments::List(list) = &f.args else {
        return Err(Error::plan(sqlstate::SYNTAX_ERROR, format!("use {usage}")));
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() || f.over.is_some() {
        return Err(Error::NotSupported(format!(
            "EVIDENCE takes no DISTINCT, ORDER BY or OVER: use {usage}"
        )));
    }
    let mut args: Vec<&FunctionArg> = list.args.iter().collect();
    let mut limit = DEFAULT_ROWS as u64;
    if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) = args.last() {
        if let Value::Number(n, _) = &v.value {
            limit = n.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::plan(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("EVIDENCE keeps a positive whole number of rows, not {n}"),
                )
            })?;
            if limit > MAX_EVIDENCE_ROWS {
                return Err(Error::plan(
                    sqlstate::PROGRAM_LIMIT_EXCEEDED,
                    format!(
                        "EVIDENCE keeps at most {MAX_EVIDENCE_ROWS} rows per window and group, \
                         not {limit}"
                    ),
                ));
            }
            args.pop();
        }
    }
    let columns = evidence_columns(&args, stream, usage)?;
    let mut fields = Vec::with_capacity(columns.len() * 2);
    for (key, value) in columns {
        fields.push(unnamed(Expr::value(Value::SingleQuotedString(key))));
        fields.push(unnamed(value));
    }
    f.name = ObjectName::from(vec![Ident::new(NAME)]);
    let mut row = f.clone();
    row.name = ObjectName::from(vec![Ident::new("named_struct")]);
    row.filter = None;
    row.args = list_of(fields);
    f.args = list_of(vec![
        unnamed(Expr::value(Value::Number(limit.to_string(), false))),
        unnamed(Expr::Identifier(Ident::with_quote('"', time))),
        unnamed(Expr::Function(row)),
    ]);
    Ok(())
}

/// The named values a call shows: every stream column for `*`, else each argument, named by
/// its column (or its SQL text).
fn evidence_columns(
    args: &[&FunctionArg],
    stream: &StreamDef,
    usage: &str,
) -> Result<Vec<(String, Expr)>> {
    let mut out: Vec<(String, Expr)> = Vec::new();
    for a in args {
        match a {
            FunctionArg::Unnamed(FunctionArgExpr::Wildcard) if args.len() == 1 => {
                for field in stream.schema.fields() {
                    out.push((
                        field.name().clone(),
                        Expr::Identifier(Ident::with_quote('"', field.name())),
                    ));
                }
            }
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                let key = match e {
                    Expr::Identifier(id) => normalize(id),
                    Expr::CompoundIdentifier(ids) => ids.last().map(normalize).unwrap_or_default(),
                    other => other.to_string(),
                };
                if out.iter().any(|(k, _)| *k == key) {
                    return Err(Error::plan(
                        sqlstate::DUPLICATE_COLUMN,
                        format!("EVIDENCE shows \"{key}\" twice"),
                    ));
                }
                out.push((key, e.clone()));
            }
            _ => return Err(Error::plan(sqlstate::SYNTAX_ERROR, format!("use {usage}"))),
        }
    }
    if out.is_empty() {
        return Err(Error::plan(sqlstate::SYNTAX_ERROR, format!("use {usage}")));
    }
    Ok(out)
}

fn unnamed(e: Expr) -> FunctionArg {
    FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
}

fn list_of(args: Vec<FunctionArg>) -> FunctionArguments {
    FunctionArguments::List(FunctionArgumentList {
        duplicate_treatment: None,
        args,
        clauses: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Catalog;

    fn rewritten(select: &str) -> Result<String> {
        let catalog = Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, n BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        )?;
        let stmt = crate::sql::parse_one(&format!("CREATE CONTINUOUS QUERY q AS {select}"))?;
        let crate::sql::Statement::CreateQuery(mut cq) = stmt else {
            panic!("a query")
        };
        rewrite(&mut cq.query, catalog.require_stream("s")?, true)?;
        Ok(cq.query.to_string())
    }

    #[test]
    fn calls_become_the_internal_form() {
        let q = rewritten("SELECT host, EVIDENCE(*) FROM s GROUP BY host").unwrap();
        assert!(
            q.contains(
                r#"evidence(20, "ts", named_struct('ts', "ts", 'host', "host", 'n', "n")) AS evidence"#
            ),
            "{q}"
        );
        let q = rewritten(
            "SELECT EVIDENCE(host, n + 1, 3) FILTER (WHERE n > 0) AS ev FROM s GROUP BY host",
        )
        .unwrap();
        assert!(
            q.contains(
                r#"evidence(3, "ts", named_struct('host', host, 'n + 1', n + 1)) FILTER (WHERE n > 0) AS ev"#
            ),
            "{q}"
        );
    }

    #[test]
    fn bad_calls_are_refused_with_their_sqlstate() {
        let code = |sql: &str| rewritten(sql).unwrap_err().sqlstate();
        assert_eq!(code("SELECT EVIDENCE(*, 0) FROM s"), "22023");
        assert_eq!(code("SELECT EVIDENCE(*, 10001) FROM s"), "54000");
        assert_eq!(code("SELECT EVIDENCE(host, host) FROM s"), "42701");
        assert_eq!(code("SELECT EVIDENCE(5) FROM s"), "42601");
        assert_eq!(code("SELECT EVIDENCE(*, host) FROM s"), "42601");
        assert_eq!(code("SELECT EVIDENCE(DISTINCT host) FROM s"), "0A000");
    }
}
