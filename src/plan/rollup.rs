//! Windows of one input with different sizes share work: a tumbling-window aggregate whose size
//! is a multiple of another's, over the same rows, keys and decomposable aggregates (COUNT,
//! SUM, MIN, MAX without DISTINCT), is computed from the smaller one's results instead of from
//! the rows: a 5-minute `COUNT(*)` per host is the `SUM` of the five 1-minute counts. The
//! operator graph asks [`rollup`] for such a plan when it attaches a query whose window
//! aggregate no existing node computes.
//!
//! The rolled-up operator is an ordinary [`WindowAggregate`](crate::operators::WindowAggregate)
//! over the smaller window's result rows, with their `window_start` as event time. Every such
//! row reaches it before the watermark that closes its larger window (the smaller window ends
//! first, and a node emits before its children advance), so none is late. A query that joins
//! a running smaller window starts with that window's state as it stands, as any query that
//! shares a node does.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::logical_expr::Expr as LExpr;

use super::catalog::Catalog;
use super::query::{plan_continuous, WindowSpec};
use super::spec::{OperatorSpec, WindowAggregateSpec};
use crate::sql::{self, Clauses};

/// A spec that computes `target`'s output from `base`'s output rows, if `target` is a larger
/// tumbling window over the same input, keys and aggregates that decompose.
pub fn rollup(base: &WindowAggregateSpec, target: &WindowAggregateSpec) -> Option<OperatorSpec> {
    let (WindowSpec::Tumble { size: small }, WindowSpec::Tumble { size: large }) =
        (base.window, target.window)
    else {
        return None;
    };
    if large <= small
        || !base.grouping_sets.is_empty()
        || !target.grouping_sets.is_empty()
        || !large.as_nanos().is_multiple_of(small.as_nanos())
        || base.input != target.input
        || base.keys != target.keys
        || base.aggregates.input != target.aggregates.input
    {
        return None;
    }
    let columns = base.schema.fields();
    let start = columns.iter().position(|f| f.name() == "window_start")?;
    // The rolled-up query, over the base's output as a stream of its own.
    let mut ddl = String::from("CREATE STREAM rollup_input (");
    for (i, f) in columns.iter().enumerate() {
        write!(ddl, "c{i} {}, ", sql_type(f.data_type())?).ok()?;
    }
    write!(ddl, "WATERMARK FOR c{start} AS c{start})").ok()?;
    let catalog = Catalog::from_sql(&ddl).ok()?;
    let mut group = Vec::new();
    for (i, key) in target.keys.iter().enumerate() {
        group.push(match key {
            LExpr::Column(c) if c.name == "window_start" || c.name == "window_end" => {
                c.name.clone()
            }
            _ => format!("c{i}"),
        });
    }
    let mut select = group.clone();
    for agg in &target.aggregates.exprs {
        let j = base.aggregates.exprs.iter().position(|b| b == agg)?;
        let combine = combine(agg)?;
        select.push(format!("{combine}(c{})", target.keys.len() + j));
    }
    let query = format!(
        "SELECT {} FROM TUMBLE(rollup_input, c{start}, {}) GROUP BY {}",
        select.join(", "),
        interval(large)?,
        group.join(", ")
    );
    let sql::Statement::Sql(stmt) = sql::parse_one(&query).ok()? else {
        return None;
    };
    let datafusion::sql::sqlparser::ast::Statement::Query(q) = *stmt else {
        return None;
    };
    let plan = plan_continuous(&q, &Clauses::default(), &catalog).ok()?;
    let Some(OperatorSpec::WindowAggregate(mut spec)) = plan.specs.into_iter().next() else {
        return None;
    };
    // The rolled-up rows must be the target's, column for column.
    let types = |s: &datafusion::arrow::datatypes::Schema| -> Vec<DataType> {
        s.fields().iter().map(|f| f.data_type().clone()).collect()
    };
    if spec.window != target.window || types(&spec.schema) != types(&target.schema) {
        return None;
    }
    spec.schema = Arc::clone(&target.schema);
    Some(OperatorSpec::WindowAggregate(spec))
}

/// The aggregate that combines partial results of `agg` into the result over their union.
fn combine(agg: &LExpr) -> Option<&'static str> {
    let LExpr::AggregateFunction(f) = agg else {
        return None;
    };
    if f.params.distinct || !f.params.order_by.is_empty() {
        return None;
    }
    match f.func.name() {
        "count" | "sum" => Some("SUM"),
        "min" => Some("MIN"),
        "max" => Some("MAX"),
        _ => None,
    }
}

fn sql_type(t: &DataType) -> Option<&'static str> {
    Some(match t {
        DataType::Boolean => "BOOLEAN",
        DataType::Int16 => "SMALLINT",
        DataType::Int32 => "INT",
        DataType::Int64 => "BIGINT",
        DataType::Float32 => "REAL",
        DataType::Float64 => "DOUBLE PRECISION",
        DataType::Utf8 => "TEXT",
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "TIMESTAMP",
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => "TIMESTAMPTZ",
        _ => return None,
    })
}

fn interval(d: Duration) -> Option<String> {
    if d.subsec_nanos() == 0 {
        Some(format!("INTERVAL '{}' SECOND", d.as_secs()))
    } else if d.as_nanos().is_multiple_of(1_000_000) {
        Some(format!("INTERVAL '{}' MILLISECOND", d.as_millis()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window_spec(sql: &str) -> WindowAggregateSpec {
        let catalog = Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, op TEXT, v BIGINT, d DOUBLE PRECISION, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        )
        .unwrap();
        let plan = crate::plan(sql, &catalog).unwrap();
        plan.specs
            .into_iter()
            .find_map(|s| match s {
                OperatorSpec::WindowAggregate(w) => Some(w),
                _ => None,
            })
            .unwrap()
    }

    fn q(minutes: u32, aggs: &str, filter: &str) -> WindowAggregateSpec {
        window_spec(&format!(
            "SELECT host, window_end, {aggs} FROM TUMBLE(s, ts, INTERVAL '{minutes}' MINUTE) \
             WHERE {filter} GROUP BY host, window_start, window_end"
        ))
    }

    #[test]
    fn larger_multiples_with_decomposable_aggregates_roll_up() {
        let aggs = "COUNT(*), SUM(v), MIN(d), MAX(v)";
        let base = q(1, aggs, "op = 'write'");
        let target = q(5, aggs, "op = 'write'");
        let Some(OperatorSpec::WindowAggregate(r)) = rollup(&base, &target) else {
            panic!("no rollup");
        };
        assert_eq!(r.window, target.window);
        assert_eq!(r.schema, target.schema);
        // Fewer aggregates than the base computes is fine too.
        assert!(rollup(&base, &q(5, "SUM(v)", "op = 'write'")).is_some());
    }

    #[test]
    fn what_does_not_decompose_or_align_does_not_roll_up() {
        let base = q(2, "COUNT(*), SUM(v), AVG(v)", "op = 'write'");
        for target in [
            q(5, "COUNT(*)", "op = 'write'"),          // not a multiple
            q(4, "AVG(v)", "op = 'write'"),            // AVG of averages is wrong
            q(4, "COUNT(DISTINCT v)", "op = 'write'"), // not computed by the base
            q(1, "COUNT(*)", "op = 'write'"),          // smaller
        ] {
            assert!(rollup(&base, &target).is_none(), "{:?}", target.window);
        }
        let other_keys = window_spec(
            "SELECT op, COUNT(*) FROM TUMBLE(s, ts, INTERVAL '4' MINUTE) \
             WHERE op = 'write' GROUP BY op, window_start, window_end",
        );
        assert!(rollup(&base, &other_keys).is_none());
    }
}
