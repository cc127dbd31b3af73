//! A continuous query's SELECT in Flink SQL, printed clause by clause from saql's AST: the
//! window functions `TUMBLE/HOP/SESSION(stream, ts, ...)` in Flink's table-valued form
//! `TABLE(TUMBLE(TABLE stream, DESCRIPTOR(ts), ...))` grouped by `window_start, window_end`,
//! subqueries, `UNION ALL`, views and other queries read as views, joins (see `join`),
//! `MATCH_RECOGNIZE` (see `pattern`), window functions (see `over`), WHERE, GROUP BY and
//! HAVING. What has no translation is refused (`0A000`).

use crate::error::sqlstate;
use std::cell::RefCell;

use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, FunctionArg, FunctionArgExpr, GroupByExpr, SelectItem, SetExpr, TableFactor,
};

use super::expr::{self, ident, interval_sql, name_sql};
use super::join;
use super::over::{self, OrderRule};
use super::pattern::match_recognize_sql;
use super::FlinkView;
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
    /// The result column that is still Flink's time attribute (the stream's event-time
    /// column selected as it is), which windows and joins over the results need.
    pub rowtime: Option<String>,
}

/// How a query reads a reference table on Flink (see [`super::ddl::reference_table`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableUse {
    /// The saql table.
    pub table: String,
    /// Read by a temporal join (`FOR SYSTEM_TIME AS OF`) of a table with a `version_time`
    /// column: its rows' versions start at that column's time. Otherwise (lookup joins, and
    /// temporal joins of tables without one) every row is valid from the start.
    pub versioned: bool,
}

impl TableUse {
    /// The Flink table's name.
    pub fn flink_name(&self) -> String {
        if self.versioned {
            format!("{}__versions", self.table)
        } else {
            self.table.clone()
        }
    }
}

/// What a query reads: the sources, tables and views its program must declare first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reads {
    /// Streams, in the order first read.
    pub streams: Vec<String>,
    /// Reference tables and how they are read.
    pub tables: Vec<TableUse>,
    /// Views (saql's views and the queries read as streams), each after those it reads.
    pub views: Vec<FlinkView>,
}

impl Reads {
    pub(super) fn stream(&mut self, name: &str) {
        if !self.streams.iter().any(|s| s == name) {
            self.streams.push(name.to_string());
        }
    }

    pub(super) fn table(&mut self, table: TableUse) {
        if !self.tables.contains(&table) {
            self.tables.push(table);
        }
    }
}

/// Translation state: the catalog and the query's clauses (WITHIN lives there).
pub struct Ctx<'a> {
    /// Streams.
    pub catalog: &'a Catalog,
    /// saql's clauses of the query.
    pub clauses: &'a Clauses,
    /// What the translation has read so far.
    pub reads: &'a RefCell<Reads>,
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
    body_sql(&query.body, ctx, window_time)
}

/// A query body: a SELECT, a nested query, or a `UNION ALL` of them (Flink's own `UNION
/// ALL`; the union keeps a time attribute when every branch keeps one at the same place).
fn body_sql(body: &SetExpr, ctx: &Ctx, window_time: bool) -> Result<Translated> {
    match body {
        SetExpr::Select(s) => select_sql(s, ctx, window_time),
        SetExpr::Query(q) => query_sql(q, ctx, window_time),
        SetExpr::SetOperation {
            op: sq::SetOperator::Union,
            set_quantifier: sq::SetQuantifier::All,
            left,
            right,
        } => {
            let l = body_sql(left, ctx, window_time)?;
            let r = body_sql(right, ctx, window_time)?;
            Ok(Translated {
                sql: format!("{} UNION ALL {}", l.sql, r.sql),
                windowed: l.windowed || r.windowed,
                rowtime: l.rowtime.filter(|_| r.rowtime.is_some()),
                event_time: l.event_time,
            })
        }
        other => Err(refuse(format!("the set operation in {other}"))),
    }
}

pub(super) fn refuse(what: impl std::fmt::Display) -> Error {
    Error::NotSupported(format!("{what} has no Flink translation"))
}

/// The translated FROM item.
pub(super) struct From {
    pub(super) sql: String,
    /// The window TVF's grouping columns must include window_start and window_end.
    pub(super) window: bool,
    /// A subquery that is a window aggregate.
    pub(super) windowed_subquery: bool,
    pub(super) event_time: Option<String>,
    /// The column of its rows that is Flink's time attribute.
    pub(super) rowtime: Option<String>,
    /// The name the FROM item goes by (its alias, or the stream's name).
    pub(super) alias: Option<String>,
    /// What `*` must say when Flink's `*` would differ (a joined table's bookkeeping column).
    pub(super) star: Option<String>,
    /// The same for `alias.*` of a joined table.
    pub(super) table_stars: Vec<(String, String)>,
}

pub(super) fn event_time_of(stream: &StreamDef) -> Option<String> {
    stream
        .event_time
        .as_ref()
        .map(|et| stream.schema.field(et.column).name().clone())
}

fn check_select(s: &sq::Select) -> Result<()> {
    if s.distinct.is_some() || s.top.is_some() || s.into.is_some() {
        return Err(refuse("DISTINCT, TOP or INTO"));
    }
    if s.qualify.is_some() || !s.sort_by.is_empty() || !s.lateral_views.is_empty() {
        return Err(refuse("QUALIFY, SORT BY or LATERAL VIEW"));
    }
    if s.from.len() != 1 {
        return Err(refuse(
            "a comma-separated FROM list (write the join as FROM a JOIN b ON ...)",
        ));
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
    check_select(s)?;
    let rewritten = join::rewrite_subqueries(s, ctx)?;
    let s = rewritten.as_ref().unwrap_or(s);
    let keys = group_keys(s)?;
    let relation = &s.from[0].relation;
    let joined = !s.from[0].joins.is_empty();
    // The FROM first without window_time, to learn what it is; again if a window needs it.
    let from_item = |window_time| {
        if joined {
            join::joined_from(&s.from[0], ctx)
        } else {
            from_sql(relation, &keys, ctx, window_time)
        }
    };
    let mut from = from_item(false)?;
    let mut projection = s.projection.clone();
    let rule = OrderRule {
        event_time: from.event_time.as_deref(),
        windowed_input: from.windowed_subquery,
    };
    let overs = over::rewrite(&mut projection, &s.named_window, &rule)?;
    if overs.needs_window_time {
        from = from_item(true)?;
    }
    if overs.functions > 0 && !keys.is_empty() {
        return Err(refuse(
            "a window function in a grouped SELECT (group in a subquery, then apply it)",
        ));
    }
    let mut items = Vec::new();
    for item in &projection {
        items.push(select_item(item, &from)?);
    }
    let rowtime = match (&from.rowtime, keys.is_empty() && !from.window) {
        (Some(t), true) => selected_as(&projection, t),
        _ => None,
    };
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
        rowtime,
    })
}

/// The name under which `projection` selects column `column` as it is, if it does.
fn selected_as(projection: &[SelectItem], column: &str) -> Option<String> {
    projection.iter().find_map(|item| match item {
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => Some(column.to_string()),
        SelectItem::UnnamedExpr(e) if key_name(e).as_deref() == Some(column) => {
            Some(column.to_string())
        }
        SelectItem::ExprWithAlias { expr: e, alias } if key_name(e).as_deref() == Some(column) => {
            Some(normalize(alias))
        }
        _ => None,
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

fn select_item(item: &SelectItem, from: &From) -> Result<String> {
    Ok(match item {
        SelectItem::UnnamedExpr(e) => expr::sql(e, None)?,
        SelectItem::ExprWithAlias { expr: e, alias } => {
            format!("{} AS {}", expr::sql(e, None)?, ident(alias))
        }
        SelectItem::Wildcard(opts) if opts.to_string().is_empty() => {
            from.star.clone().unwrap_or_else(|| "*".into())
        }
        SelectItem::QualifiedWildcard(kind, opts) if opts.to_string().is_empty() => {
            let text = kind.to_string();
            let name = text.trim_end_matches(".*").to_lowercase();
            match from.table_stars.iter().find(|(alias, _)| *alias == name) {
                Some((_, columns)) => columns.clone(),
                None => format!("{}.*", name_sql(&name)),
            }
        }
        other => return Err(refuse(format!("the select item {other}"))),
    })
}

/// A FROM item without joins.
pub(super) fn from_sql(
    relation: &TableFactor,
    keys: &[Expr],
    ctx: &Ctx,
    window_time: bool,
) -> Result<From> {
    let alias_of = |a: &Option<sq::TableAlias>| a.as_ref().map(|a| normalize(&a.name));
    let plain = |sql: String, alias: Option<String>| From {
        sql,
        window: false,
        windowed_subquery: false,
        event_time: None,
        rowtime: None,
        alias,
        star: None,
        table_stars: Vec::new(),
    };
    match relation {
        TableFactor::MatchRecognize { table, alias, .. } => {
            let stream = match table.as_ref() {
                TableFactor::Table { name, .. } => {
                    Some(ctx.catalog.require_stream(&normalize_object(name))?.clone())
                }
                _ => None,
            };
            if let Some(s) = &stream {
                ctx.reads.borrow_mut().stream(&s.name);
            }
            Ok(plain(
                match_recognize_sql(relation, ctx.clauses, ctx.catalog)?,
                alias_of(alias).or(stream.map(|s| s.name.clone())),
            ))
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
                windowed_subquery: inner.windowed,
                event_time: inner.event_time,
                rowtime: inner.rowtime,
                ..plain(
                    format!("({}) AS {}", inner.sql, name_sql(&alias)),
                    Some(alias),
                )
            })
        }
        TableFactor::Table {
            name,
            args: None,
            alias,
            version: None,
            ..
        } => {
            let key = normalize_object(name);
            let mut sql = name_sql(&key);
            if let Some(a) = alias_of(alias) {
                sql.push_str(&format!(" AS {}", name_sql(&a)));
            }
            let alias = alias_of(alias).or(Some(key.clone()));
            if let Some(view) = view_sql(&key, ctx)? {
                return Ok(From {
                    windowed_subquery: view.windowed,
                    event_time: view.event_time,
                    rowtime: view.rowtime,
                    ..plain(sql, alias)
                });
            }
            if ctx.catalog.table(&key).is_some() {
                return Err(refuse(format!(
                    "reading table \"{key}\" other than by a join after a stream"
                )));
            }
            let stream = ctx.catalog.require_stream(&key)?;
            ctx.reads.borrow_mut().stream(&stream.name);
            Ok(From {
                event_time: event_time_of(stream),
                rowtime: event_time_of(stream),
                ..plain(sql, alias)
            })
        }
        TableFactor::Table {
            name,
            args: Some(args),
            alias,
            ..
        } => {
            let (sql, event_time) = window_tvf(&normalize_object(name), &args.args, keys, ctx)?;
            let mut sql = sql;
            if let Some(a) = alias_of(alias) {
                sql.push_str(&format!(" AS {}", name_sql(&a)));
            }
            Ok(From {
                window: true,
                event_time: Some(event_time),
                ..plain(sql, alias_of(alias))
            })
        }
        other => Err(refuse(format!("the FROM item {other}"))),
    }
}

/// If `name` is a view or a query, its SELECT in Flink SQL as a view of that name (added to
/// what the query reads, after the views it reads in turn).
pub(super) fn view_sql(name: &str, ctx: &Ctx) -> Result<Option<Translated>> {
    let no_clauses = Clauses::default();
    let (query, clauses) = match (ctx.catalog.view(name), ctx.catalog.query(name)) {
        (Some(view), _) => (view.query.as_ref(), &no_clauses),
        (None, Some(create)) => {
            let c = &create.clauses;
            let model = if c.outlier.is_some() {
                Some("OUTLIER")
            } else if c.invariant.is_some() {
                Some("INVARIANT")
            } else if c.suppress.is_some() {
                Some("SUPPRESS")
            } else {
                None
            };
            if let Some(clause) = model {
                return Err(refuse(format!(
                    "reading query \"{name}\", whose results pass through {clause},"
                )));
            }
            (create.query.as_ref(), c)
        }
        (None, None) => return Ok(None),
    };
    let inner = Ctx {
        catalog: ctx.catalog,
        clauses,
        reads: ctx.reads,
    };
    let translated = query_sql(query, &inner, false).map_err(|e| match e {
        Error::NotSupported(m) => Error::NotSupported(format!("reading \"{name}\": {m}")),
        other => other,
    })?;
    let mut reads = ctx.reads.borrow_mut();
    if !reads.views.iter().any(|v| v.name == name) {
        reads.views.push(FlinkView {
            name: name.to_string(),
            ddl: format!(
                "CREATE TEMPORARY VIEW {} AS {}",
                name_sql(name),
                translated.sql
            ),
        });
    }
    Ok(Some(translated))
}

/// `TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), size))`, `HOP(..., slide, size)`, or
/// `SESSION(TABLE s PARTITION BY keys, DESCRIPTOR(ts), gap)` (saql's sessions are per group
/// key; Flink's per PARTITION BY key), and the time column. `s` is a stream, or a view or
/// query whose rows keep their time column as Flink's time attribute.
fn window_tvf(
    func: &str,
    args: &[FunctionArg],
    keys: &[Expr],
    ctx: &Ctx,
) -> Result<(String, String)> {
    let exprs: Vec<&Expr> = args
        .iter()
        .filter_map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect();
    let upper = func.to_ascii_uppercase();
    let input_name = exprs.first().and_then(|e| key_name(e)).ok_or_else(|| {
        refuse(format!(
            "{upper} over an inline subquery (name it with CREATE VIEW)"
        ))
    })?;
    let event_time = match view_sql(&input_name, ctx)? {
        Some(view) => {
            let given = exprs.get(1).and_then(|e| key_name(e)).unwrap_or_default();
            if view.windowed || view.rowtime.as_deref() != Some(given.as_str()) {
                return Err(refuse(format!(
                    "{upper} over \"{input_name}\" by \"{given}\" (on Flink a window reads a \
                     time attribute: a stream's event-time column selected as it is; a \
                     window's results are timed by window_time, a millisecond before saql's \
                     window_end)"
                )));
            }
            given
        }
        None => {
            let stream = ctx.catalog.require_stream(&input_name)?.clone();
            ctx.reads.borrow_mut().stream(&stream.name);
            event_time_of(&stream).ok_or_else(|| {
                Error::plan(
                    sqlstate::INVALID_OBJECT_DEFINITION,
                    format!("stream \"{}\" has no event time", stream.name),
                )
            })?
        }
    };
    let intervals: Vec<String> = exprs
        .iter()
        .skip(2)
        .map(|e| interval_duration(e).and_then(interval_sql))
        .collect::<Result<_>>()?;
    let mut table = format!("TABLE {}", name_sql(&input_name));
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
    Ok((sql, event_time))
}
