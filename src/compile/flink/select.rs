//! A continuous query's SELECT in Flink SQL, printed clause by clause from saql's AST: the
//! window functions `TUMBLE/HOP/SESSION(stream, ts, ...)` in Flink's table-valued form
//! `TABLE(TUMBLE(TABLE stream, DESCRIPTOR(ts), ...))` grouped by `window_start, window_end`,
//! subqueries, `MATCH_RECOGNIZE` (see `pattern`), window functions (see `over`), WHERE,
//! GROUP BY and HAVING. What has no translation is refused (`0A000`).

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, FunctionArg, FunctionArgExpr, GroupByExpr, SelectItem, SetExpr, TableFactor,
};

use super::expr::{self, ident, interval_sql, name_sql};
use super::over::{self, OrderRule};
use super::pattern::match_recognize_sql;
use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};
use crate::plan::{Catalog, StreamDef};
use crate::sql::interval::interval_duration;
use crate::sql::Clauses;

/// What a translated query reads and exposes.
pub struct Translated {
    /// The Flink SQL text.
    pub sql: String,
    /// Whether it is a window aggregate (its rows carry `window_time` when asked for).
    pub windowed: bool,
    /// The event-time column of the stream it reads.
    pub event_time: Option<String>,
}

/// Translation state: the catalog and the query's clauses (WITHIN lives there).
pub struct Ctx<'a> {
    /// Streams.
    pub catalog: &'a Catalog,
    /// saql's clauses of the query.
    pub clauses: &'a Clauses,
}

/// `query` in Flink SQL; with `window_time`, a window aggregate also selects (and groups by)
/// `window_time`.
pub fn query_sql(query: &sq::Query, ctx: &Ctx, window_time: bool) -> Result<Translated> {
    if query.with.is_some() {
        return Err(refuse("WITH"));
    }
    if query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
        return Err(refuse("ORDER BY, LIMIT or FETCH on a continuous query"));
    }
    match query.body.as_ref() {
        SetExpr::Select(s) => select_sql(s, ctx, window_time),
        SetExpr::Query(q) => query_sql(q, ctx, window_time),
        SetExpr::SetOperation {
            op: sq::SetOperator::Union,
            set_quantifier: sq::SetQuantifier::All,
            ..
        } => Err(refuse("UNION ALL of streams")),
        other => Err(refuse(format!("the set operation in {other}"))),
    }
}

fn refuse(what: impl std::fmt::Display) -> Error {
    Error::NotSupported(format!("{what} has no Flink translation"))
}

/// The translated FROM item.
struct From {
    sql: String,
    /// The window TVF's grouping columns must include window_start and window_end.
    window: bool,
    /// A subquery that is a window aggregate.
    windowed_subquery: bool,
    event_time: Option<String>,
    /// The name the FROM item goes by (its alias, or the stream's name).
    alias: Option<String>,
}

fn event_time_of(stream: &StreamDef) -> Option<String> {
    stream
        .event_time
        .as_ref()
        .map(|et| stream.schema.field(et.column).name().clone())
}

/// The join in `s`'s FROM, named as its refusal names it: saql's joins (interval, window,
/// temporal, lookup) are not translated yet.
fn join_refusal(s: &sq::Select, ctx: &Ctx) -> Error {
    let [from] = s.from.as_slice() else {
        return refuse("a comma-separated FROM list");
    };
    let Some(join) = from.joins.first() else {
        return refuse("a join");
    };
    let outer = match &join.join_operator {
        sq::JoinOperator::Left(_) | sq::JoinOperator::LeftOuter(_) => "LEFT ",
        sq::JoinOperator::Right(_) | sq::JoinOperator::RightOuter(_) => "RIGHT ",
        sq::JoinOperator::FullOuter(_) => "FULL ",
        _ => "",
    };
    if let TableFactor::Table {
        version: Some(_), ..
    } = &join.relation
    {
        return refuse(format!("a {outer}temporal join (FOR SYSTEM_TIME AS OF)"));
    }
    if let TableFactor::Table {
        name, args: None, ..
    } = &join.relation
    {
        let table = normalize_object(name);
        if ctx.catalog.table(&table).is_some() {
            return refuse(format!("a {outer}lookup join with table \"{table}\""));
        }
    }
    let windowed = |r: &TableFactor| match r {
        TableFactor::Table { args, .. } => args.is_some(),
        TableFactor::Derived { subquery, .. } => subquery.to_string().contains("window_start"),
        _ => false,
    };
    if windowed(&from.relation) && windowed(&join.relation) {
        return refuse(format!("a {outer}window join"));
    }
    match outer {
        "" => refuse("an interval join"),
        _ => refuse(format!("a {outer}interval join")),
    }
}

fn check_select(s: &sq::Select) -> Result<()> {
    if s.distinct.is_some() || s.top.is_some() || s.into.is_some() {
        return Err(refuse("DISTINCT, TOP or INTO"));
    }
    if s.qualify.is_some() || !s.sort_by.is_empty() || !s.lateral_views.is_empty() {
        return Err(refuse("QUALIFY, SORT BY or LATERAL VIEW"));
    }
    if s.from.len() != 1 || !s.from[0].joins.is_empty() {
        return Err(refuse("a join"));
    }
    Ok(())
}

fn group_keys(s: &sq::Select) -> Result<Vec<Expr>> {
    match &s.group_by {
        GroupByExpr::Expressions(keys, modifiers) if modifiers.is_empty() => Ok(keys.clone()),
        GroupByExpr::Expressions(..) => Err(refuse("ROLLUP, CUBE or GROUPING SETS")),
        GroupByExpr::All(_) => Err(refuse("GROUP BY ALL")),
    }
}

fn key_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(normalize(i)),
        Expr::CompoundIdentifier(parts) => parts.last().map(normalize),
        _ => None,
    }
}

fn select_sql(s: &sq::Select, ctx: &Ctx, window_time: bool) -> Result<Translated> {
    if s.from.len() != 1 || !s.from[0].joins.is_empty() {
        return Err(join_refusal(s, ctx));
    }
    check_select(s)?;
    let keys = group_keys(s)?;
    let relation = &s.from[0].relation;
    // The FROM first without window_time, to learn what it is; again if a window needs it.
    let mut from = from_sql(relation, &keys, ctx, false)?;
    let mut projection = s.projection.clone();
    let rule = OrderRule {
        event_time: from.event_time.as_deref(),
        windowed_input: from.windowed_subquery,
    };
    let overs = over::rewrite(&mut projection, &s.named_window, &rule)?;
    if overs.needs_window_time {
        from = from_sql(relation, &keys, ctx, true)?;
    }
    if overs.functions > 0 && !keys.is_empty() {
        return Err(refuse(
            "a window function in a grouped SELECT (group in a subquery, then apply it)",
        ));
    }
    let mut items = Vec::new();
    for item in &projection {
        items.push(select_item(item)?);
    }
    if from.window && window_time {
        items.push("window_time".into());
    }
    let mut body = String::new();
    if let Some(lag_window) = &overs.lag_window {
        // The first stage: the input with the previous row's values; WHERE applies before.
        let mut lags = Vec::new();
        let window = window_sql(lag_window)?;
        for (name, value) in &overs.lags {
            lags.push(format!(
                "LAG({}, 1) OVER ({window}) AS {}",
                expr::sql(value, None)?,
                name_sql(name)
            ));
        }
        let alias = from.alias.clone().unwrap_or_else(|| "__saql_rows".into());
        let mut inner = format!("SELECT *, {} FROM {}", lags.join(", "), from.sql);
        if let Some(w) = &s.selection {
            inner.push_str(&format!(" WHERE {}", expr::sql(w, None)?));
        }
        body.push_str(&format!(
            "SELECT {} FROM ({inner}) AS {}",
            items.join(", "),
            name_sql(&alias)
        ));
    } else {
        body.push_str(&format!("SELECT {} FROM {}", items.join(", "), from.sql));
        if let Some(w) = &s.selection {
            body.push_str(&format!(" WHERE {}", expr::sql(w, None)?));
        }
    }
    if !keys.is_empty() || from.window {
        let mut group = Vec::new();
        for k in &keys {
            group.push(expr::sql(k, None)?);
        }
        if from.window {
            let mut window_cols = vec!["window_start", "window_end"];
            if window_time {
                window_cols.push("window_time");
            }
            for col in window_cols {
                if !keys.iter().any(|k| key_name(k).as_deref() == Some(col)) {
                    group.push(col.into());
                }
            }
        }
        body.push_str(&format!(" GROUP BY {}", group.join(", ")));
    }
    if let Some(h) = &s.having {
        body.push_str(&format!(" HAVING {}", expr::sql(h, None)?));
    }
    Ok(Translated {
        sql: body,
        windowed: from.window,
        event_time: from.event_time,
    })
}

fn window_sql(spec: &sq::WindowSpec) -> Result<String> {
    let mut parts = Vec::new();
    if !spec.partition_by.is_empty() {
        let keys: Vec<String> = spec
            .partition_by
            .iter()
            .map(|e| expr::sql(e, None))
            .collect::<Result<_>>()?;
        parts.push(format!("PARTITION BY {}", keys.join(", ")));
    }
    let order: Vec<String> = spec
        .order_by
        .iter()
        .map(|o| expr::sql(&o.expr, None))
        .collect::<Result<_>>()?;
    parts.push(format!("ORDER BY {}", order.join(", ")));
    Ok(parts.join(" "))
}

fn select_item(item: &SelectItem) -> Result<String> {
    Ok(match item {
        SelectItem::UnnamedExpr(e) => expr::sql(e, None)?,
        SelectItem::ExprWithAlias { expr: e, alias } => {
            format!("{} AS {}", expr::sql(e, None)?, ident(alias))
        }
        SelectItem::Wildcard(opts) if opts.to_string().is_empty() => "*".into(),
        SelectItem::QualifiedWildcard(kind, opts) if opts.to_string().is_empty() => {
            let text = kind.to_string();
            let name = text.trim_end_matches(".*");
            format!("{}.*", name_sql(&name.to_lowercase()))
        }
        other => return Err(refuse(format!("the select item {other}"))),
    })
}

fn from_sql(relation: &TableFactor, keys: &[Expr], ctx: &Ctx, window_time: bool) -> Result<From> {
    let alias_of = |a: &Option<sq::TableAlias>| a.as_ref().map(|a| normalize(&a.name));
    match relation {
        TableFactor::MatchRecognize { table, alias, .. } => {
            let stream = match table.as_ref() {
                TableFactor::Table { name, .. } => {
                    Some(ctx.catalog.require_stream(&normalize_object(name))?.clone())
                }
                _ => None,
            };
            Ok(From {
                sql: match_recognize_sql(relation, ctx.clauses, ctx.catalog)?,
                window: false,
                windowed_subquery: false,
                event_time: None,
                alias: alias_of(alias).or(stream.map(|s| s.name.clone())),
            })
        }
        TableFactor::Derived {
            lateral: false,
            subquery,
            alias,
            ..
        } => {
            let inner = query_sql(subquery, ctx, window_time)?;
            let alias = alias_of(alias).unwrap_or_else(|| "__saql_sub".into());
            Ok(From {
                sql: format!("({}) AS {}", inner.sql, name_sql(&alias)),
                window: false,
                windowed_subquery: inner.windowed,
                event_time: inner.event_time,
                alias: Some(alias),
            })
        }
        TableFactor::Table {
            name,
            args: None,
            alias,
            ..
        } => {
            let key = normalize_object(name);
            if ctx.catalog.view(&key).is_some() || ctx.catalog.query(&key).is_some() {
                return Err(refuse(format!(
                    "reading the view or query \"{key}\" (views, unions and queries over \
                     queries)"
                )));
            }
            let stream = ctx.catalog.require_stream(&key)?;
            let mut sql = name_sql(&stream.name);
            if let Some(a) = alias_of(alias) {
                sql.push_str(&format!(" AS {}", name_sql(&a)));
            }
            Ok(From {
                sql,
                window: false,
                windowed_subquery: false,
                event_time: event_time_of(stream),
                alias: alias_of(alias).or(Some(stream.name.clone())),
            })
        }
        TableFactor::Table {
            name,
            args: Some(args),
            alias,
            ..
        } => {
            let (sql, stream) = window_tvf(&normalize_object(name), &args.args, keys, ctx)?;
            let mut sql = sql;
            if let Some(a) = alias_of(alias) {
                sql.push_str(&format!(" AS {}", name_sql(&a)));
            }
            Ok(From {
                sql,
                window: true,
                windowed_subquery: false,
                event_time: event_time_of(&stream),
                alias: alias_of(alias),
            })
        }
        other => Err(refuse(format!("the FROM item {other}"))),
    }
}

/// `TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), size))`, `HOP(..., slide, size)`, or
/// `SESSION(TABLE s PARTITION BY keys, DESCRIPTOR(ts), gap)` (saql's sessions are per group
/// key; Flink's per PARTITION BY key).
fn window_tvf(
    func: &str,
    args: &[FunctionArg],
    keys: &[Expr],
    ctx: &Ctx,
) -> Result<(String, Arc<StreamDef>)> {
    let exprs: Vec<&Expr> = args
        .iter()
        .filter_map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect();
    let stream_name = exprs.first().and_then(|e| key_name(e)).unwrap_or_default();
    let stream = ctx.catalog.require_stream(&stream_name)?.clone();
    let event_time = event_time_of(&stream).ok_or_else(|| {
        Error::plan(
            sqlstate::INVALID_OBJECT_DEFINITION,
            format!("stream \"{}\" has no event time", stream.name),
        )
    })?;
    let intervals: Vec<String> = exprs
        .iter()
        .skip(2)
        .map(|e| interval_duration(e).and_then(interval_sql))
        .collect::<Result<_>>()?;
    let mut table = format!("TABLE {}", name_sql(&stream.name));
    let upper = func.to_ascii_uppercase();
    if upper == "SESSION" {
        let mut partition = Vec::new();
        for k in keys {
            match key_name(k) {
                Some(n) if n == "window_start" || n == "window_end" => {}
                Some(n) => partition.push(name_sql(&n)),
                None => return Err(refuse(format!("a SESSION grouped by the expression {k}"))),
            }
        }
        if !partition.is_empty() {
            table.push_str(&format!(" PARTITION BY {}", partition.join(", ")));
        }
    }
    let sql = format!(
        "TABLE({upper}({table}, DESCRIPTOR({}), {}))",
        name_sql(&event_time),
        intervals.join(", ")
    );
    Ok((sql, stream))
}
