//! Queries over queries and views: a continuous query may read another query's results, or
//! a view (`CREATE VIEW v AS SELECT ...`, a query with no results of its own), as its
//! stream (`FROM failed_logins`, `TUMBLE(failed_logins, window_end, ...)`). The reader is
//! planned against the results described as a stream, and runs as the upstream query's
//! operators followed by its own, in the upstream stream's operator graph: the graph shares
//! the upstream operators (their specs are equal), so they are computed once, watermarks
//! flow on down the chain, and checkpoints cover it whole.
//!
//! The results' event time is their `window_end`, else the column named as the upstream
//! stream's event-time column, if the query keeps it; without either, windows over them are
//! refused.

use std::cell::Cell;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::sql::sqlparser::ast as sq;

use super::catalog::{Catalog, StreamDef};
use super::query::{plan_continuous, QueryPlan};
use crate::error::{sqlstate, Error, Result};
use crate::sql::Clauses;

/// Most queries in a chain of queries over queries (54001 past it).
pub const MAX_CHAIN: usize = 16;

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Query `name`'s plan and its results described as a stream, if `name` is a query.
pub(super) fn query_as_stream(
    name: &str,
    catalog: &Catalog,
) -> Result<Option<(Arc<StreamDef>, QueryPlan)>> {
    let (query, clauses) = match (catalog.query(name), catalog.view(name)) {
        (Some(cq), _) => (&cq.query, cq.clauses.clone()),
        (None, Some(view)) => (&view.query, Clauses::default()),
        (None, None) => return Ok(None),
    };
    let depth = DEPTH.with(|d| d.get());
    if depth >= MAX_CHAIN {
        return Err(Error::limit(
            sqlstate::STATEMENT_TOO_COMPLEX,
            format!("queries over queries nest more than {MAX_CHAIN} deep at \"{name}\""),
        ));
    }
    DEPTH.with(|d| d.set(depth + 1));
    let planned = plan_continuous(query, &clauses, catalog);
    DEPTH.with(|d| d.set(depth));
    let upstream = planned?;
    Ok(Some((results_as_stream(name, &upstream), upstream)))
}

/// The name under which an inline subquery's rows are read (no catalog name can be it).
pub const SUBQUERY: &str = "(subquery)";

/// An inline subquery (`TUMBLE((SELECT ... UNION ALL SELECT ...), ts, ...)`, `FROM (SELECT
/// ...) MATCH_RECOGNIZE (...)`) planned, and its rows described as a stream, as a query's
/// results are: a `UNION ALL` is read as a union of its own.
pub(super) fn subquery_as_stream(
    query: &sq::Query,
    catalog: &Catalog,
) -> Result<(Arc<StreamDef>, QueryPlan)> {
    if super::union::is_set_operation(query) {
        let union = super::union::plan_union(query, catalog)?;
        return Ok((union.stream.clone(), union));
    }
    let plan = plan_continuous(query, &Clauses::default(), catalog)?;
    Ok((results_as_stream(SUBQUERY, &plan), plan))
}

/// `upstream`'s results described as a stream named `name`: timed by their `window_end`, else
/// by the column named as the upstream stream's event-time column, if they keep it.
fn results_as_stream(name: &str, upstream: &QueryPlan) -> Arc<StreamDef> {
    let schema = upstream.schema.clone();
    let is_time = |i: usize| matches!(schema.field(i).data_type(), DataType::Timestamp(_, _));
    let stream_time = upstream
        .stream
        .event_time
        .as_ref()
        .map(|e| upstream.stream.schema.field(e.column).name().clone());
    let column = schema
        .index_of("window_end")
        .ok()
        .filter(|&i| is_time(i))
        .or_else(|| {
            stream_time
                .and_then(|n| schema.index_of(&n).ok())
                .filter(|&i| is_time(i))
        });
    Arc::new(StreamDef::derived(name, schema.clone(), column))
}

/// `downstream` (planned over `upstream`'s results, read as query or view `name`, or inline
/// when `name` is None) as one plan over `upstream`'s stream: the upstream operators, then
/// its own.
pub(super) fn chain(upstream: QueryPlan, name: Option<&str>, downstream: QueryPlan) -> QueryPlan {
    let mut specs = upstream.specs;
    specs.extend(downstream.specs);
    let mut tables = upstream.tables;
    for t in downstream.tables {
        if !tables.contains(&t) {
            tables.push(t);
        }
    }
    let mut queries = upstream.queries;
    if let Some(name) = name {
        queries.push(name.to_string());
    }
    queries.extend(downstream.queries);
    QueryPlan {
        stream: upstream.stream,
        window: downstream.window,
        specs,
        schema: downstream.schema,
        tables,
        queries,
        union: upstream.union.or(downstream.union),
        times: downstream.times,
    }
}
