//! Per-value aggregates of one key share work: a query that filters on `column = value` and
//! then aggregates windows (`WHERE op = 'write' ... GROUP BY host, window_start,
//! window_end`) is attached in a split form, so that the queries asking the same for other
//! values (`op = 'read'`, ...) compute one aggregate between them:
//!
//! ```text
//! Filter(other conjuncts)?  ->  PerValue(the aggregate, grouped by `op` too,
//!                                        over the rows whose op some query asks for)
//!                           ->  SplitValue(op = 'write', drop op)  ->  the query's rest
//! ```
//!
//! All queries of that shape differ only in their `SplitValue`, so they share the filter and
//! the aggregate by spec equality. The operator graph tells the shared aggregate which values
//! the queries below it ask for ([`crate::operators::PerValueAggregate`]): a value's groups
//! start when its first query attaches, as a fresh node's would. The results are exact: each
//! group of the shared aggregate holds the rows of one value, which are exactly the rows the
//! query's own filter would have kept.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::logical_expr::utils::split_conjunction as split_logical;
use datafusion::logical_expr::{BinaryExpr as LBinary, Expr as LExpr, Operator as LOp};
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::{conjunction, split_conjunction};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use super::spec::{FilterSpec, OperatorSpec, PerValueSpec, SplitValueSpec};

/// `specs` in the split form, if they begin with a filter holding one equality of a column
/// with a constant followed by a window aggregate that can take that column as a key.
pub fn per_value(specs: &[OperatorSpec]) -> Option<Vec<OperatorSpec>> {
    let (OperatorSpec::Filter(filter), OperatorSpec::WindowAggregate(agg)) =
        (specs.first()?, specs.get(1)?)
    else {
        return None;
    };
    if !agg.grouping_sets.is_empty()
        || agg.schema.fields().len() != agg.group.len() + agg.aggregates.exprs.len()
    {
        return None;
    }
    let (rest, column, name, value, logical_rest) = equality(filter)?;
    // The filter reads the stream's rows; the aggregate the same columns, window bounds after.
    let input = &agg.input.schema;
    if input.fields().get(column)?.name() != &name
        || filter.schema.field(column).data_type() != &value.data_type()
        || agg.group.iter().any(|g| {
            g.downcast_ref::<Column>()
                .is_some_and(|c| c.index() == column)
        })
    {
        return None;
    }
    let mut shared = agg.clone();
    let at = agg.group.len();
    shared
        .group
        .push(Arc::new(Column::new(&name, column)) as Arc<dyn PhysicalExpr>);
    shared
        .keys
        .push(LExpr::Column(datafusion::common::Column::new_unqualified(
            name.clone(),
        )));
    let mut fields: Vec<Arc<Field>> = agg.schema.fields().iter().cloned().collect();
    fields.insert(
        at,
        Arc::new(Field::new(
            &name,
            input.field(column).data_type().clone(),
            true,
        )),
    );
    shared.schema = Arc::new(Schema::new(fields));
    let mut out = Vec::with_capacity(specs.len() + 1);
    if let Some((predicate, condition)) = rest.zip(logical_rest) {
        out.push(OperatorSpec::Filter(FilterSpec {
            predicate,
            schema: filter.schema.clone(),
            condition,
            relation: filter.relation.clone(),
        }));
    }
    out.push(OperatorSpec::SplitValue(SplitValueSpec {
        column: at,
        value,
        input: shared.schema.clone(),
        schema: agg.schema.clone(),
    }));
    out.insert(
        out.len() - 1,
        OperatorSpec::PerValue(PerValueSpec {
            aggregate: shared,
            column,
        }),
    );
    out.extend(specs[2..].iter().cloned());
    Some(out)
}

/// The filter's one `column = constant` conjunct: the other conjuncts (physical, logical;
/// None when there are none), the column's index and name, and the constant.
#[allow(clippy::type_complexity)]
fn equality(
    filter: &FilterSpec,
) -> Option<(
    Option<Arc<dyn PhysicalExpr>>,
    usize,
    String,
    ScalarValue,
    Option<LExpr>,
)> {
    let physical = split_conjunction(&filter.predicate);
    let logical = split_logical(&filter.condition);
    if physical.len() != logical.len() {
        return None;
    }
    // The first conjunct that is an equality in both forms, on the same column.
    let (i, column, value) = physical.iter().enumerate().find_map(|(i, e)| {
        let (column, value) = column_equals(e)?;
        Some((i, column, value))
    })?;
    let name = filter.schema.field(column.index()).name().clone();
    let j = logical.iter().position(|e| logical_equality_on(e, &name))?;
    if value.is_null() {
        return None;
    }
    let rest: Vec<Arc<dyn PhysicalExpr>> = (physical.iter().enumerate())
        .filter(|&(k, _)| k != i)
        .map(|(_, e)| Arc::clone(e))
        .collect();
    let logical_rest: Vec<LExpr> = (logical.iter().enumerate())
        .filter(|&(k, _)| k != j)
        .map(|(_, e)| (*e).clone())
        .collect();
    let rest = (!rest.is_empty()).then(|| conjunction(rest));
    let logical_rest = logical_rest.into_iter().reduce(|a, b| a.and(b));
    Some((rest, column.index(), name, value, logical_rest))
}

/// `column = constant`, either way round.
fn column_equals(e: &Arc<dyn PhysicalExpr>) -> Option<(Column, ScalarValue)> {
    let b = e.downcast_ref::<BinaryExpr>()?;
    if *b.op() != datafusion::logical_expr::Operator::Eq {
        return None;
    }
    let pick = |c: &Arc<dyn PhysicalExpr>, l: &Arc<dyn PhysicalExpr>| {
        Some((
            c.downcast_ref::<Column>()?.clone(),
            l.downcast_ref::<Literal>()?.value().clone(),
        ))
    };
    pick(b.left(), b.right()).or_else(|| pick(b.right(), b.left()))
}

/// Whether `e` is `name = constant` (either way round) as planned.
fn logical_equality_on(e: &LExpr, name: &str) -> bool {
    let LExpr::BinaryExpr(LBinary { left, op, right }) = e else {
        return false;
    };
    let is = |c: &LExpr, l: &LExpr| {
        matches!(c, LExpr::Column(c) if c.name == name) && matches!(l, LExpr::Literal(..))
    };
    *op == LOp::Eq && (is(left, right) || is(right, left))
}

/// The value a [`OperatorSpec::SplitValue`] takes out, for the graph to gather.
pub fn split_value(spec: &OperatorSpec) -> Option<&ScalarValue> {
    match spec {
        OperatorSpec::SplitValue(s) => Some(&s.value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Catalog;

    fn specs(sql: &str) -> Vec<OperatorSpec> {
        let catalog = Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, op TEXT, v BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        )
        .unwrap();
        crate::plan(sql, &catalog).unwrap().specs
    }

    fn q(filter: &str) -> String {
        format!(
            "SELECT host, window_end, COUNT(*) AS n, SUM(v) AS total \
             FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) WHERE {filter} \
             GROUP BY host, window_start, window_end"
        )
    }

    #[test]
    fn queries_that_differ_in_one_value_share_all_but_the_split() {
        let a = per_value(&specs(&q("op = 'write' AND v > 10"))).unwrap();
        let b = per_value(&specs(&q("op = 'read' AND v > 10"))).unwrap();
        assert_eq!(a.len(), b.len());
        let kinds: Vec<&str> = a.iter().map(|s| s.name()).collect();
        assert_eq!(kinds[..3], ["Filter", "PerValueAggregate", "SplitValue"]);
        assert_eq!(a[..2], b[..2], "filter and aggregate are shared");
        assert_ne!(a[2], b[2]);
        assert_eq!(a[3..], b[3..], "the same projection after the split");
        // Without other conjuncts the shared aggregate reads the stream itself.
        let c = per_value(&specs(&q("op = 'open'"))).unwrap();
        assert_eq!(c[0].name(), "PerValueAggregate");
        let OperatorSpec::SplitValue(split) = &c[1] else {
            panic!("no split")
        };
        assert_eq!(split.value, ScalarValue::Utf8(Some("open".into())));
    }

    #[test]
    fn other_shapes_are_left_alone() {
        for sql in [
            q("v > 10"),
            q("op <> 'write'"),
            "SELECT host, window_end, COUNT(*) AS n FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) \
             WHERE host = 'a' GROUP BY host, window_start, window_end"
                .to_string(),
            "SELECT ts, host FROM s WHERE op = 'write'".to_string(),
        ] {
            assert!(per_value(&specs(&sql)).is_none(), "{sql}");
        }
    }
}
