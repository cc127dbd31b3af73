//! Plans stream–table joins into lookup joins: `FROM s JOIN t ON s.x = t.k [AND ...]` and
//! `LEFT JOIN` (enrichment), `WHERE s.x [NOT] IN (SELECT k FROM t [WHERE ...])` and
//! `[NOT] EXISTS (SELECT ... FROM t WHERE t.k = s.x [AND ...])` (watch-lists and
//! allow-lists). Each reads the table by its primary key: the equalities must give every
//! key column; whatever else the condition says is checked on the matched pair.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, JoinType};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    BinaryExpr, Expr as LExpr, ExprSchemable, LogicalPlan, Operator as Op,
};

use super::catalog::Catalog;
use super::context::PlanContext;
use super::expr::physical;
use super::spec::{LookupJoinSpec, OperatorSpec};
use super::table_def::TableDef;
use crate::error::{sqlstate, Error, Result};
use crate::operators::lookup::LookupKind;

/// The table a join's right side scans (through aliases), if it is a table.
pub(super) fn scanned_table(plan: &LogicalPlan, catalog: &Catalog) -> Option<Arc<TableDef>> {
    match plan {
        LogicalPlan::TableScan(scan) => catalog.table(scan.table_name.table()).cloned(),
        LogicalPlan::SubqueryAlias(a) => scanned_table(&a.input, catalog),
        _ => None,
    }
}

/// A `JOIN` of the stream's rows (left) with a table (right).
pub(super) fn plan_join(
    ctx: &PlanContext,
    join: &datafusion::logical_expr::logical_plan::Join,
    catalog: &Catalog,
    relation: &str,
) -> Result<OperatorSpec> {
    let Some(table) = scanned_table(&join.right, catalog) else {
        return Err(Error::NotSupported(
            "a continuous query joins its stream with tables (CREATE TABLE), written after \
             the stream: FROM stream s JOIN table t ON s.col = t.key, or with another stream \
             by name, bounded by time: FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts - \
             INTERVAL ... AND a.ts + INTERVAL ..."
                .into(),
        ));
    };
    let kind = match join.join_type {
        JoinType::Inner => LookupKind::Inner,
        JoinType::Left => LookupKind::Left,
        other => {
            return Err(Error::NotSupported(format!(
                "{other} JOIN with a table is not supported: use JOIN or LEFT JOIN, the stream \
                 first"
            )))
        }
    };
    let mut conjuncts: Vec<LExpr> = join
        .on
        .iter()
        .map(|(l, r)| l.clone().eq(r.clone()))
        .collect();
    if let Some(f) = &join.filter {
        conjuncts.extend(split_conjunction(f).into_iter().cloned());
    }
    let right = join.right.schema();
    let left = join.left.schema();
    let (probe, rest) = key_probes(&table, &conjuncts, left, right)?;
    let input = left.as_ref();
    let probe = probe
        .iter()
        .map(|e| physical(ctx, e, input))
        .collect::<Result<Vec<_>>>()?;
    let residual = conjunction(rest.clone())
        .map(|e| physical(ctx, &e, &join.schema))
        .transpose()?;
    let joined = Arc::new(join.schema.as_arrow().clone());
    Ok(OperatorSpec::LookupJoin(LookupJoinSpec {
        table: table.store.clone(),
        table_name: table.name.clone(),
        kind,
        probe,
        residual,
        input: Arc::new(input.as_arrow().clone()),
        joined: joined.clone(),
        schema: joined,
        condition: conjunction(conjuncts),
        relation: relation.to_string(),
        temporal: None,
    }))
}

/// A conjunct of `WHERE` that is a subquery over a table (`IN`, `EXISTS`, negated or not),
/// as a semi or anti lookup join over the rows of `input`; `None` if it is not one.
pub(super) fn plan_subquery(
    ctx: &PlanContext,
    conjunct: &LExpr,
    input: &DFSchema,
    catalog: &Catalog,
    relation: &str,
) -> Result<Option<OperatorSpec>> {
    let (subquery, probe_of, negated, null_aware) = match conjunct {
        LExpr::InSubquery(s) => (&s.subquery, Some(s.expr.as_ref()), s.negated, s.negated),
        LExpr::Exists(e) => (&e.subquery, None, e.negated, false),
        LExpr::Not(inner) => match inner.as_ref() {
            LExpr::Exists(e) => (&e.subquery, None, !e.negated, false),
            LExpr::InSubquery(s) => (&s.subquery, Some(s.expr.as_ref()), !s.negated, !s.negated),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    // Projection, filters and aliases over one table scan.
    let mut node = subquery.subquery.as_ref();
    let mut filters: Vec<LExpr> = Vec::new();
    let mut projected: Option<&LExpr> = None;
    // The table's columns as the subquery names them (through its alias).
    let mut table_schema = None;
    loop {
        match node {
            LogicalPlan::Projection(p) => {
                if projected.is_none() && p.expr.len() == 1 {
                    projected = Some(&p.expr[0]);
                }
                node = &p.input;
            }
            LogicalPlan::Filter(f) => {
                filters.extend(split_conjunction(&f.predicate).into_iter().cloned());
                node = &f.input;
            }
            LogicalPlan::SubqueryAlias(a) => {
                table_schema.get_or_insert(a.schema.clone());
                node = &a.input;
            }
            LogicalPlan::TableScan(s) => {
                table_schema.get_or_insert(s.projected_schema.clone());
                break;
            }
            other => {
                return Err(Error::NotSupported(format!(
                    "a subquery in a continuous query reads one table (SELECT key FROM table \
                     [WHERE ...]); {} is not supported there",
                    other.display()
                )))
            }
        }
    }
    let Some(table) = scanned_table(node, catalog) else {
        return Err(Error::NotSupported(
            "a subquery in a continuous query reads a table (CREATE TABLE), not a stream or \
             a query"
                .into(),
        ));
    };
    let table_schema = table_schema.unwrap_or_else(|| node.schema().clone());
    let table_schema = table_schema.as_ref();
    let mut conjuncts = filters;
    if let Some(probe) = probe_of {
        let Some(column) = projected else {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                "subquery has too many columns",
            ));
        };
        conjuncts.push(probe.clone().eq(column.clone()));
    }
    // Outer references are the stream's columns.
    let unouter = |e: &LExpr| -> LExpr {
        e.clone()
            .transform(|e| {
                Ok(match e {
                    LExpr::OuterReferenceColumn(_, c) => Transformed::yes(LExpr::Column(c)),
                    other => Transformed::no(other),
                })
            })
            .map(|t| t.data)
            .unwrap_or_else(|_| e.clone())
    };
    let conjuncts: Vec<LExpr> = conjuncts.iter().map(unouter).collect();
    let joined = input.join(table_schema)?;
    let (probe, rest) = key_probes(&table, &conjuncts, input, table_schema)?;
    let probe = probe
        .iter()
        .map(|e| physical(ctx, e, input))
        .collect::<Result<Vec<_>>>()?;
    let residual = conjunction(rest)
        .map(|e| physical(ctx, &e, &joined))
        .transpose()?;
    let schema = Arc::new(input.as_arrow().clone());
    Ok(Some(OperatorSpec::LookupJoin(LookupJoinSpec {
        table: table.store.clone(),
        table_name: table.name.clone(),
        kind: if negated {
            LookupKind::Anti { null_aware }
        } else {
            LookupKind::Semi
        },
        probe,
        residual,
        input: schema.clone(),
        joined: Arc::new(joined.as_arrow().clone()),
        schema,
        condition: conjunction(conjuncts),
        relation: relation.to_string(),
        temporal: None,
    })))
}

/// Splits `conjuncts` into one probe expression (over `left`) per key column of `table`,
/// from equalities `left_expr = table.key`, and the rest.
fn key_probes(
    table: &TableDef,
    conjuncts: &[LExpr],
    left: &DFSchema,
    right: &DFSchema,
) -> Result<(Vec<LExpr>, Vec<LExpr>)> {
    let schema = table.store.schema();
    let key_names: Vec<&String> = table
        .store
        .key()
        .iter()
        .map(|&i| schema.field(i).name())
        .collect();
    let mut probes: Vec<Option<LExpr>> = vec![None; key_names.len()];
    let mut rest = Vec::new();
    for c in conjuncts {
        let pair = match c {
            LExpr::BinaryExpr(BinaryExpr {
                left: l,
                op: Op::Eq,
                right: r,
            }) => {
                if let Some(k) = key_column(r, right, &key_names).filter(|_| reads_only(l, left)) {
                    Some((k, l.as_ref(), r.as_ref()))
                } else {
                    key_column(l, right, &key_names)
                        .filter(|_| reads_only(r, left))
                        .map(|k| (k, r.as_ref(), l.as_ref()))
                }
            }
            _ => None,
        };
        match pair {
            Some((k, probe, key)) if probes[k].is_none() => {
                check_types(probe, key, left, right)?;
                probes[k] = Some(strip_cast(probe).clone());
            }
            _ => rest.push(c.clone()),
        }
    }
    if probes.iter().any(Option::is_none) {
        return Err(Error::NotSupported(format!(
            "a continuous query reads table \"{}\" by its primary key: give every key column \
             with an equality (ON s.column = {}.{} ...); the key is ({})",
            table.name,
            table.name,
            key_names[probes.iter().position(Option::is_none).unwrap_or(0)],
            key_names
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok((probes.into_iter().flatten().collect(), rest))
}

/// The position in the key of the key column `e` is (through casts), if it is one of the
/// table's.
fn key_column(e: &LExpr, table: &DFSchema, key: &[&String]) -> Option<usize> {
    match strip_cast(e) {
        LExpr::Column(c) if table.has_column(c) => key.iter().position(|k| *k == &c.name),
        _ => None,
    }
}

/// Whether every column `e` reads is in `schema`.
fn reads_only(e: &LExpr, schema: &DFSchema) -> bool {
    let cols = e.column_refs();
    !cols.is_empty() && cols.iter().all(|c| schema.has_column(c))
}

fn strip_cast(e: &LExpr) -> &LExpr {
    match e {
        LExpr::Cast(c) => strip_cast(&c.expr),
        LExpr::TryCast(c) => strip_cast(&c.expr),
        other => other,
    }
}

/// 42804 when a probe and the key column it is compared with have types that only a cast
/// through text could compare (TEXT against INT, ...).
fn check_types(probe: &LExpr, key: &LExpr, left: &DFSchema, right: &DFSchema) -> Result<()> {
    let (Ok(p), Ok(k)) = (
        strip_cast(probe).get_type(left),
        strip_cast(key).get_type(right),
    ) else {
        return Ok(());
    };
    let class = |t: &DataType| {
        if t.is_numeric() {
            1
        } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
            2
        } else if matches!(
            t,
            DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64
        ) {
            3
        } else {
            4
        }
    };
    if p != k && class(&p) != class(&k) {
        return Err(Error::plan(
            sqlstate::DATATYPE_MISMATCH,
            format!(
                "join key types do not match: {} is {} but {} is {}; cast one of them",
                strip_cast(probe),
                crate::sources::value::type_name(&p),
                strip_cast(key),
                crate::sources::value::type_name(&k)
            ),
        ));
    }
    Ok(())
}
