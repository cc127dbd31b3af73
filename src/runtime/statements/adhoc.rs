//! Ad hoc `SELECT`: a normal DataFusion batch query over each stream's recent rows (its whole
//! history, if it keeps one: [`crate::runtime::statements::hunt`]) and each
//! continuous query's retained results, with enough of `pg_catalog` for psql's listings, and
//! the `$n` placeholders of prepared statements: planned as DataFusion placeholders, each
//! bound value resolved to the type DataFusion infers for it ([`Param::resolve`]), then
//! substituted into the plan. Result columns are named as PostgreSQL
//! names them (`?column?`, `count`, `min`), and the session functions drivers call are there.

use crate::error::sqlstate;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::sqlparser::ast::{self as sq, Expr};
use futures::StreamExt;

use crate::error::{Error, Result};
use crate::runtime::core::output::QueryOutput;
use crate::runtime::core::rows::RowStream;
use crate::runtime::engine::Shared;
use crate::runtime::pg::catalog::{RelKind, Relation};
use crate::runtime::pg::functions::SessionInfo;
use crate::runtime::pg::{self, function_hint, param_types};
use crate::runtime::statements::adhoc_windows;
use crate::runtime::statements::hunt::history_table;
use crate::sources::param::{placeholder_number, Param};
use datafusion::catalog::TableProvider;

/// Most rows `TUMBLE`, `HOP` and `CUMULATE` over a stream's recent rows expand to (they are
/// built in memory) when the session sets no lower `saql.max_result_rows`.
const MAX_WINDOW_ROWS: u64 = 1_000_000;

/// A DataFusion session whose tables are the streams' recent rows and the queries' retained
/// results, as they are now, with the session functions answering for `session`.
/// `TUMBLE`, `HOP` and `CUMULATE` over a stream's recent rows expand to at most
/// [`MAX_WINDOW_ROWS`] rows, or the session's `saql.max_result_rows` if lower.
pub(in crate::runtime) fn context(
    shared: &Shared,
    session: &SessionInfo,
) -> Result<SessionContext> {
    let max_rows = match session.max_result_rows {
        Some(n) if n > 0 => n.min(MAX_WINDOW_ROWS),
        _ => MAX_WINDOW_ROWS,
    } as usize;
    let mut config = SessionConfig::new()
        .with_target_partitions(1)
        .with_default_catalog_and_schema(pg::catalog::DATABASE, "public");
    // Sessions are in UTC, so `now()` is a timestamptz, as in PostgreSQL.
    config.options_mut().execution.time_zone = Some("+00:00".into());
    // Columns keep their token spans, so that an unknown one is reported where it is written.
    config.options_mut().sql_parser.collect_spans = true;
    let ctx = SessionContext::new_with_config(config);
    let mut relations = Vec::new();
    let mut recent = adhoc_windows::Recent::new();
    for (name, hub) in shared.hubs.iter().chain(&shared.unions) {
        let hub = hub.lock();
        // A union's hub is no stream of the catalog: only its query's results are read.
        if hub.union.is_none() {
            let rows = hub.stream.recent.batches();
            recent.insert(name.clone(), (hub.stream.def.schema.clone(), rows.clone()));
            let schema = &hub.stream.def.schema;
            // A stream with history is its whole history, else its recent rows.
            let (table, count): (Arc<dyn TableProvider>, usize) = match &hub.history {
                Some(h) => (history_table(schema, h.scan())?, h.rows() as usize),
                None => {
                    let count = rows.iter().map(|b| b.num_rows()).sum();
                    (
                        Arc::new(MemTable::try_new(schema.clone(), vec![rows])?),
                        count,
                    )
                }
            };
            relations.push((name.clone(), RelKind::Stream, schema.clone(), None, count));
            ctx.register_table(name.as_str(), table)?;
        }
        for (q, rt) in &hub.queries {
            let output = QueryOutput::lock(&rt.output);
            let retained = output.retained();
            let count = retained.iter().map(|b| b.num_rows()).sum();
            let table = MemTable::try_new(rt.plan.schema.clone(), vec![retained])?;
            ctx.register_table(q.as_str(), Arc::new(table))?;
            let definition = rt.def.to_string();
            relations.push((
                q.clone(),
                RelKind::Query,
                rt.plan.schema.clone(),
                Some(definition),
                count,
            ));
        }
    }
    for t in shared.catalog.tables() {
        let schema = t.store.schema().clone();
        let rows = t.store.read().batch(&schema)?;
        relations.push((
            t.name.clone(),
            RelKind::Table,
            schema.clone(),
            None,
            rows.num_rows(),
        ));
        let table = MemTable::try_new(schema, vec![vec![rows]])?;
        ctx.register_table(t.name.as_str(), Arc::new(table))?;
    }
    // Views are listed (psql's \d); statements read them inlined (`inline_views`).
    for (name, view) in shared.catalog.views() {
        let planned =
            crate::plan::plan_continuous(&view.query, &Default::default(), &shared.catalog);
        if let Ok(plan) = planned {
            relations.push((
                name.clone(),
                RelKind::View,
                plan.schema.clone(),
                Some(view.query.to_string()),
                0,
            ));
        }
    }
    let relations = relations
        .iter()
        .map(|(name, kind, schema, definition, rows)| Relation {
            name,
            kind: *kind,
            schema,
            definition: definition.clone(),
            rows: *rows,
        });
    pg::catalog::register(&ctx, relations, session)?;
    adhoc_windows::register(&ctx, Arc::new(recent), max_rows);
    pg::functions::register(&ctx, session);
    Ok(ctx)
}

/// Plans a `SELECT` (placeholders bound to `params`) in `ctx` and starts it: its rows come
/// as DataFusion produces them, batch by batch, ended with 54000 past the session's
/// `saql.max_result_rows` or `saql.max_result_bytes` (when set). Errors in planning are
/// returned here; errors while running end the stream.
pub(in crate::runtime) async fn select(
    ctx: SessionContext,
    mut stmt: sq::Statement,
    params: &[Param],
    session: &SessionInfo,
) -> Result<RowStream> {
    refuse_versions(&stmt)?;
    let exists = |t: &str| ctx.table_exist(t).unwrap_or(true);
    let unbound = (!params.is_empty()).then(|| stmt.clone());
    pg::rewrite::rewrite(&mut stmt, exists);
    let catalog_query = pg::rewrite::reads_catalog(&stmt);
    if let Some(unbound) = unbound.filter(|_| catalog_query) {
        stmt = unbound;
        bind_literals(&mut stmt, params);
        pg::rewrite::rewrite(&mut stmt, exists);
    }
    alias_beside_wildcard(&mut stmt);
    let names = pg_column_names(&stmt);
    let hints = param_types::hinted(&stmt);
    let df_stmt = datafusion::sql::parser::Statement::Statement(Box::new(stmt));
    let plan = match ctx.state().statement_to_plan(df_stmt).await {
        Ok(plan) => plan,
        Err(e) if catalog_query => {
            return Err(Error::NotSupported(format!(
                "saql's pg_catalog cannot answer this catalog query ({e}); \
                 SHOW STREAMS and SHOW QUERIES describe streams and queries"
            )))
        }
        Err(e) => return Err(function_hint::with_hint(e.into(), &ctx)),
    };
    let plan = bind(plan, params, &hints)?;
    let df = ctx.execute_logical_plan(plan).await?;
    let schema = unalias(&rename(df.schema().as_arrow(), &names));
    let stream = df.execute_stream().await?;
    let batches = stream.map(move |batch| {
        let batch = batch?;
        let renamed = unalias(&rename(batch.schema_ref(), &names));
        Ok(RecordBatch::try_new(renamed, batch.columns().to_vec())?)
    });
    let rows = RowStream::new(schema, batches);
    Ok(rows.limited(
        session.max_result_rows.unwrap_or(0),
        session.max_result_bytes.unwrap_or(0),
    ))
}

/// Refuses a version clause (`FOR SYSTEM_TIME AS OF`, ...) in an ad hoc statement: tables
/// keep no past versions (only a continuous query's temporal join does), and DataFusion would
/// read the table as it is now.
fn refuse_versions(stmt: &sq::Statement) -> Result<()> {
    struct Versions;
    impl sq::Visitor for Versions {
        type Break = String;
        fn pre_visit_table_factor(&mut self, t: &sq::TableFactor) -> ControlFlow<String> {
            match t {
                sq::TableFactor::Table {
                    name,
                    version: Some(v),
                    ..
                } => ControlFlow::Break(format!("{name} {v}")),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    match sq::Visit::visit(stmt, &mut Versions) {
        ControlFlow::Break(what) => Err(Error::NotSupported(format!(
            "{what} is not supported in an ad hoc SELECT: tables keep no past versions; a \
             continuous query reads them so in a temporal join (FROM s JOIN t FOR SYSTEM_TIME \
             AS OF s.ts ...)"
        ))),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The result schema of a `SELECT` and the types of its `$1`, `$2`, ... as DataFusion
/// infers them from their places (`ts > $1`: a timestamp), TEXT where nothing says, without
/// running it.
pub(in crate::runtime) async fn describe_select(
    ctx: SessionContext,
    stmt: &sq::Statement,
) -> Result<(SchemaRef, Vec<DataType>)> {
    refuse_versions(stmt)?;
    let mut stmt = stmt.clone();
    pg::rewrite::rewrite(&mut stmt, |t| ctx.table_exist(t).unwrap_or(true));
    alias_beside_wildcard(&mut stmt);
    let names = pg_column_names(&stmt);
    let count = count_placeholders(&stmt);
    let hints = param_types::hinted(&stmt);
    let df_stmt = datafusion::sql::parser::Statement::Statement(Box::new(stmt));
    let plan = ctx
        .state()
        .statement_to_plan(df_stmt)
        .await
        .map_err(|e| function_hint::with_hint(e.into(), &ctx))?;
    let mut inferred = plan.get_parameter_types()?;
    let params = (1..=count)
        .map(|n| {
            inferred
                .remove(&format!("${n}"))
                .flatten()
                .or_else(|| hints.get(&n).cloned())
                .unwrap_or(DataType::Utf8)
        })
        .collect();
    Ok((unalias(&rename(plan.schema().as_arrow(), &names)), params))
}

/// The names PostgreSQL gives the result columns of a `SELECT` whose select list has no
/// `*`: a function call is named after the function (`count(*)` is `count`), a cast after
/// what it casts, any other expression without an alias `?column?`. `None` keeps
/// DataFusion's name (a column, an alias).
fn pg_column_names(stmt: &sq::Statement) -> Vec<Option<String>> {
    let sq::Statement::Query(q) = stmt else {
        return vec![];
    };
    let sq::SetExpr::Select(select) = q.body.as_ref() else {
        return vec![];
    };
    let mut names = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        match item {
            sq::SelectItem::UnnamedExpr(e) => names.push(pg_expr_name(e)),
            sq::SelectItem::ExprWithAlias { .. } => names.push(None),
            // A `*` stands for a number of columns known only after planning.
            _ => return vec![],
        }
    }
    names
}

pub(in crate::runtime) fn pg_expr_name(e: &Expr) -> Option<String> {
    Some(match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => return None,
        Expr::Nested(inner) => return pg_expr_name(inner),
        Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| {
                if i.quote_style.is_some() {
                    i.value.clone()
                } else {
                    i.value.to_lowercase()
                }
            })
            .unwrap_or_else(|| "?column?".into()),
        Expr::Cast {
            expr, data_type, ..
        } => match expr.as_ref() {
            Expr::Identifier(i) => i.value.to_lowercase(),
            Expr::CompoundIdentifier(parts) => parts.last()?.value.to_lowercase(),
            inner => pg_expr_name(inner).unwrap_or_else(|| data_type.to_string().to_lowercase()),
        },
        Expr::Case { .. } => "case".into(),
        Expr::Extract { .. } => "extract".into(),
        Expr::Substring { .. } => "substring".into(),
        _ => "?column?".into(),
    })
}

/// The prefix of the aliases [`alias_beside_wildcard`] gives.
const BESIDE_WILDCARD: &str = "saql#beside*#";

/// PostgreSQL lets a column appear twice in a result (`SELECT db.oid, db.* FROM pg_database
/// db`, as DBeaver asks, or `SELECT a, a`), DataFusion does not: a column named beside a `*`,
/// or named twice, in the select list of `stmt` is aliased to a unique name that [`unalias`] turns back into the column's name.
fn alias_beside_wildcard(stmt: &mut sq::Statement) {
    let sq::Statement::Query(q) = stmt else {
        return;
    };
    let sq::SetExpr::Select(select) = q.body.as_mut() else {
        return;
    };
    let wildcard = select.projection.iter().any(|item| {
        matches!(
            item,
            sq::SelectItem::Wildcard(_) | sq::SelectItem::QualifiedWildcard(..)
        )
    });
    let column_name = |item: &sq::SelectItem| match item {
        sq::SelectItem::UnnamedExpr(Expr::Identifier(id)) => Some(id.value.to_lowercase()),
        sq::SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
            parts.last().map(|id| id.value.to_lowercase())
        }
        _ => None,
    };
    let names: Vec<Option<String>> = select.projection.iter().map(column_name).collect();
    for (i, item) in select.projection.iter_mut().enumerate() {
        let Some(name) = &names[i] else {
            continue;
        };
        let repeated = names.iter().filter(|n| n.as_ref() == Some(name)).count() > 1;
        let sq::SelectItem::UnnamedExpr(e) = item else {
            continue;
        };
        if !wildcard && !repeated {
            continue;
        }
        let name = match e {
            Expr::Identifier(id) => id.value.clone(),
            Expr::CompoundIdentifier(parts) => match parts.last() {
                Some(id) => id.value.clone(),
                None => continue,
            },
            _ => continue,
        };
        *item = sq::SelectItem::ExprWithAlias {
            expr: e.clone(),
            alias: sq::Ident::with_quote('"', format!("{BESIDE_WILDCARD}{i}#{name}")),
        };
    }
}

/// `schema` with the aliases of [`alias_beside_wildcard`] named as their columns again, and
/// the column of `FROM unnest(...)` named `unnest`, as PostgreSQL names it (DataFusion names
/// it after the whole call).
fn unalias(schema: &SchemaRef) -> SchemaRef {
    if !schema
        .fields()
        .iter()
        .any(|f| f.name().starts_with(BESIDE_WILDCARD) || f.name().starts_with("UNNEST("))
    {
        return schema.clone();
    }
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| match f.name().strip_prefix(BESIDE_WILDCARD) {
            Some(rest) => {
                let name = rest.split_once('#').map_or(rest, |(_, n)| n).to_string();
                Arc::new(f.as_ref().clone().with_name(name))
            }
            None if f.name().starts_with("UNNEST(") => {
                Arc::new(f.as_ref().clone().with_name("unnest"))
            }
            None => f.clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `schema` with the fields that `names` names renamed.
fn rename(schema: &Schema, names: &[Option<String>]) -> SchemaRef {
    if names.len() != schema.fields().len() {
        return Arc::new(schema.clone());
    }
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .zip(names)
        .map(|(f, n)| match n {
            Some(n) => Arc::new(f.as_ref().clone().with_name(n)),
            None => f.clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `plan` with its placeholders replaced by `params`, each resolved to the type DataFusion
/// inferred for its place, or else the type `hints` give it (42P02 for a placeholder without
/// a value).
fn bind(
    plan: LogicalPlan,
    params: &[Param],
    hints: &HashMap<usize, DataType>,
) -> Result<LogicalPlan> {
    let types = plan.get_parameter_types()?;
    if types.is_empty() {
        return Ok(plan);
    }
    let mut values = Vec::with_capacity(params.len());
    for (i, param) in params.iter().enumerate() {
        let n = i + 1;
        let target = types
            .get(&format!("${n}"))
            .cloned()
            .flatten()
            .or_else(|| hints.get(&n).cloned());
        values.push(
            param
                .resolve(target.as_ref())
                .map_err(|e| e.for_parameter(n))?,
        );
    }
    if let Some(missing) = types
        .keys()
        .filter_map(|id| id.strip_prefix('$')?.parse::<usize>().ok())
        .find(|&n| n == 0 || n > params.len())
    {
        return Err(Error::plan(
            sqlstate::UNDEFINED_PARAMETER,
            format!("there is no parameter ${missing}"),
        ));
    }
    Ok(plan.with_param_values(values)?)
}

/// Puts each bound value into a catalog query as a literal, before [`pg::rewrite`] reads it:
/// drivers' catalog queries pass names where the rewrite needs literals (SQLAlchemy's
/// `CAST($1 AS REGCLASS)`, `LIKE $1 || '%' ESCAPE '/'`, which DataFusion's LIKE cannot take
/// with a parameter for a pattern). Text goes in as a string, as PostgreSQL reads a value of
/// unknown type; typed values as their literals.
fn bind_literals(stmt: &mut sq::Statement, params: &[Param]) {
    let _ = sq::visit_expressions_mut(stmt, |e| {
        if let Some(param) = placeholder_number(e).and_then(|n| params.get(n - 1)) {
            *e = literal(param);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

/// A bound value as a SQL literal.
fn literal(param: &Param) -> Expr {
    use datafusion::scalar::ScalarValue as S;
    let value = match param {
        Param::Null => sq::Value::Null,
        Param::Text(text) => sq::Value::SingleQuotedString(text.clone()),
        Param::Value(v) => match v {
            S::Boolean(Some(b)) => sq::Value::Boolean(*b),
            S::Int8(Some(_)) | S::Int16(Some(_)) | S::Int32(Some(_)) | S::Int64(Some(_)) => {
                sq::Value::Number(v.to_string(), false)
            }
            S::Float32(Some(f)) if f.is_finite() => sq::Value::Number(v.to_string(), false),
            S::Float64(Some(f)) if f.is_finite() => sq::Value::Number(v.to_string(), false),
            other => sq::Value::SingleQuotedString(other.to_string()),
        },
    };
    Expr::value(value)
}

/// The highest `$n` in a statement.
fn count_placeholders(stmt: &sq::Statement) -> usize {
    let mut max = 0;
    let _ = sq::visit_expressions(stmt, |e| {
        if let Some(n) = placeholder_number(e) {
            max = max.max(n);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    max
}

/// Views read by an ad hoc statement, written in place as subqueries (`FROM v` becomes
/// `FROM (view's query) AS v`), so they read the streams' recent rows and the queries'
/// retained results; views of views expand in turn, at most [`MAX_CHAIN`] deep.
///
/// [`MAX_CHAIN`]: crate::plan::chained::MAX_CHAIN
pub(in crate::runtime) fn inline_views(stmt: &mut sq::Statement, catalog: &crate::plan::Catalog) {
    use datafusion::sql::sqlparser::ast::{TableAlias, TableFactor, VisitMut, VisitorMut};
    struct Inline<'a> {
        catalog: &'a crate::plan::Catalog,
        changed: bool,
    }
    impl VisitorMut for Inline<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> std::ops::ControlFlow<()> {
            if let TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } = t
            {
                let key = crate::plan::catalog::normalize_object(name);
                if let Some(view) = self.catalog.view(&key) {
                    let alias = alias.take().unwrap_or(TableAlias {
                        at: None,
                        explicit: true,
                        name: sq::Ident::with_quote('"', key),
                        columns: vec![],
                    });
                    *t = TableFactor::Derived {
                        lateral: false,
                        subquery: view.query.clone(),
                        alias: Some(alias),
                        sample: None,
                    };
                    self.changed = true;
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    for _ in 0..crate::plan::chained::MAX_CHAIN {
        let mut v = Inline {
            catalog,
            changed: false,
        };
        let _ = stmt.visit(&mut v);
        if !v.changed {
            break;
        }
    }
}
