//! Ad hoc `SELECT`: a normal DataFusion batch query over each stream's recent rows and each
//! continuous query's retained results, with enough of `pg_catalog` for psql's listings, and
//! the `$n` placeholders of prepared statements.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::sqlparser::ast::{self as sq, Expr, Value, VisitMut, VisitorMut};
use futures::StreamExt;

use super::engine::{Shared, StatementResult};
use super::output::QueryOutput;
use super::pg_catalog::{self, Relation};
use crate::error::{Error, Result};

/// A DataFusion session whose tables are the streams' recent rows and the queries' retained
/// results, as they are now.
pub(super) fn context(shared: &Shared) -> Result<SessionContext> {
    let config = SessionConfig::new()
        .with_target_partitions(1)
        .with_information_schema(true);
    let ctx = SessionContext::new_with_config(config);
    for (name, hub) in &shared.hubs {
        let hub = hub.lock();
        let table = MemTable::try_new(
            hub.stream.def.schema.clone(),
            vec![hub.stream.recent.batches()],
        )?;
        ctx.register_table(name.as_str(), Arc::new(table))?;
        for (q, rt) in &hub.queries {
            let output = QueryOutput::lock(&rt.output);
            let table = MemTable::try_new(rt.plan.schema.clone(), vec![output.retained()])?;
            ctx.register_table(q.as_str(), Arc::new(table))?;
        }
    }
    let streams = shared.hubs.keys().map(|n| Relation::Stream(n));
    let queries = shared.query_streams.keys().map(|n| Relation::Query(n));
    pg_catalog::register(&ctx, streams.chain(queries))?;
    Ok(ctx)
}

/// Runs a `SELECT` (placeholders bound to `params`) in `ctx`. Its result is read batch by
/// batch and refused with 54000 once it passes `max_rows` rows or `max_bytes` bytes, so a
/// huge result never builds up in memory.
pub(super) async fn select(
    ctx: SessionContext,
    mut stmt: sq::Statement,
    params: &[Option<String>],
    max_rows: usize,
    max_bytes: usize,
) -> Result<StatementResult> {
    if !params.is_empty() {
        bind_placeholders(&mut stmt, params);
    }
    pg_catalog::unqualify_functions(&mut stmt);
    let catalog_query = pg_catalog::reads_catalog(&stmt);
    let df_stmt = datafusion::sql::parser::Statement::Statement(Box::new(stmt));
    let plan = match ctx.state().statement_to_plan(df_stmt).await {
        Ok(plan) => plan,
        Err(_) if catalog_query => {
            return Err(Error::NotSupported(
                "saql's pg_catalog answers psql's \\d, \\dt and \\dm only; \
                 SHOW STREAMS and SHOW QUERIES describe streams and queries"
                    .into(),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let df = ctx.execute_logical_plan(plan).await?;
    let schema = Arc::new(df.schema().as_arrow().clone());
    let mut stream = df.execute_stream().await?;
    let mut batches = Vec::new();
    let (mut rows, mut bytes) = (0usize, 0usize);
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        rows += batch.num_rows();
        bytes += batch.get_array_memory_size();
        if rows > max_rows || bytes > max_bytes {
            return Err(Error::limit(
                "54000",
                format!(
                    "result too large: more than {max_rows} rows or {max_bytes} bytes \
                     (--max-result-rows, --max-result-bytes); add a LIMIT or aggregate"
                ),
            ));
        }
        batches.push(batch);
    }
    Ok(StatementResult::Rows { schema, batches })
}

/// The result schema of a `SELECT`, without running it.
pub(super) async fn select_schema(ctx: SessionContext, stmt: &sq::Statement) -> Result<SchemaRef> {
    let df_stmt = datafusion::sql::parser::Statement::Statement(Box::new(stmt.clone()));
    let plan = ctx.state().statement_to_plan(df_stmt).await?;
    Ok(Arc::new(plan.schema().as_arrow().clone()))
}

/// The number `n` of a `$n` placeholder.
pub(super) fn placeholder_index(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Placeholder(p) => p.trim_start_matches('$').parse().ok().filter(|&n| n > 0),
            _ => None,
        },
        _ => None,
    }
}

struct Placeholders<'a> {
    params: &'a [Option<String>],
    max: usize,
}

impl VisitorMut for Placeholders<'_> {
    type Break = ();
    fn post_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
        if let Some(n) = placeholder_index(expr) {
            self.max = self.max.max(n);
            if let Some(value) = self.params.get(n - 1) {
                *expr = Expr::value(match value {
                    Some(v) => Value::SingleQuotedString(v.clone()),
                    None => Value::Null,
                });
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// The highest `$n` in a statement.
pub(super) fn count_placeholders(stmt: &sq::Statement) -> usize {
    let mut stmt = stmt.clone();
    let mut v = Placeholders {
        params: &[],
        max: 0,
    };
    let _ = stmt.visit(&mut v);
    v.max
}

fn bind_placeholders(stmt: &mut sq::Statement, params: &[Option<String>]) {
    let mut v = Placeholders { params, max: 0 };
    let _ = stmt.visit(&mut v);
}
