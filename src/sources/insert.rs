//! `INSERT INTO stream [(cols)] VALUES (...), ...` into one Arrow batch. Literals take the
//! same text path as COPY; anything else (`now()`, `1 + 2`) is evaluated by DataFusion.
//! A bad value rejects the whole statement, naming its line and column.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::DFSchema;
use datafusion::scalar::ScalarValue;
use datafusion::sql::planner::{PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast::{self as sq, Expr, SetExpr, Spanned, UnaryOperator, Value};

use super::value::BatchBuilder;
use crate::error::{Error, Result};
use crate::plan::catalog::normalize;
use crate::plan::PlanContext;

/// The target stream of an INSERT.
pub fn insert_target(insert: &sq::Insert) -> Result<String> {
    match &insert.table {
        sq::TableObject::TableName(name) => Ok(crate::plan::catalog::normalize_object(name)),
        other => Err(Error::NotSupported(format!(
            "INSERT INTO {other} is not supported"
        ))),
    }
}

/// For each input column of the INSERT, the index of the stream column it fills.
pub fn insert_columns(insert: &sq::Insert, schema: &Schema) -> Result<Vec<usize>> {
    if insert.columns.is_empty() {
        return Ok((0..schema.fields().len()).collect());
    }
    insert
        .columns
        .iter()
        .map(|c| {
            let name =
                c.0.last()
                    .and_then(|p| p.as_ident())
                    .map(normalize)
                    .unwrap_or_default();
            schema.index_of(&name).map_err(|_| {
                Error::plan(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{name}\" does not exist"),
                )
            })
        })
        .collect()
}

/// The rows of `INSERT ... VALUES`, or an error for other sources.
pub fn insert_rows(insert: &sq::Insert) -> Result<Vec<&[Expr]>> {
    let source = insert
        .source
        .as_ref()
        .ok_or_else(|| Error::NotSupported("INSERT needs VALUES".into()))?;
    match source.body.as_ref() {
        SetExpr::Values(v) => Ok(v.rows.iter().map(|r| r.content.as_slice()).collect()),
        _ => Err(Error::NotSupported(
            "INSERT ... SELECT is not supported; use INSERT ... VALUES or COPY".into(),
        )),
    }
}

/// Builds the batch for an INSERT into a stream of `schema`; `params` fill `$1`, `$2`, ...
pub fn insert_batch(
    insert: &sq::Insert,
    schema: &SchemaRef,
    params: &[Option<String>],
) -> Result<RecordBatch> {
    let columns = insert_columns(insert, schema)?;
    let rows = insert_rows(insert)?;
    let mut builder = BatchBuilder::new(schema.clone())?;
    let mut evaluator: Option<PlanContext> = None;
    let mut given = vec![false; schema.fields().len()];
    for &c in &columns {
        given[c] = true;
    }
    for row in rows {
        let line = row.first().map(|e| e.span().start.line).unwrap_or(0);
        let at_line = |e: Error| if line > 0 { e.at_line(line) } else { e };
        if row.len() != columns.len() {
            return Err(at_line(Error::plan(
                sqlstate::SYNTAX_ERROR,
                if row.len() > columns.len() {
                    "INSERT has more expressions than target columns"
                } else {
                    "INSERT has more target columns than expressions"
                },
            )));
        }
        for (expr, &c) in row.iter().zip(&columns) {
            push_expr(&mut builder, c, expr, params, &mut evaluator).map_err(at_line)?;
        }
        for (c, g) in given.iter().enumerate() {
            if !g {
                builder.push_text(c, None).map_err(at_line)?;
            }
        }
        builder.finish_row()?;
    }
    builder.finish()
}

fn push_expr(
    builder: &mut BatchBuilder,
    column: usize,
    expr: &Expr,
    params: &[Option<String>],
    evaluator: &mut Option<PlanContext>,
) -> Result<()> {
    if let Some(text) = literal_text(expr, params)? {
        return builder.push_text(column, text.as_deref());
    }
    let ctx = evaluator.get_or_insert_with(PlanContext::new);
    let value = evaluate_constant(ctx, expr)?;
    builder.push_scalar(column, &value)
}

/// The text of a literal, `Some(None)` for NULL, `None` if `expr` is not a plain literal.
fn literal_text(expr: &Expr, params: &[Option<String>]) -> Result<Option<Option<String>>> {
    Ok(match expr {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => Some(Some(n.clone())),
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => Some(Some(s.clone())),
            Value::Boolean(b) => Some(Some(b.to_string())),
            Value::Null => Some(None),
            Value::Placeholder(p) => {
                let n: usize = p.trim_start_matches('$').parse().map_err(|_| {
                    Error::plan(
                        sqlstate::UNDEFINED_PARAMETER,
                        format!("invalid parameter reference {p}"),
                    )
                })?;
                let value = n
                    .checked_sub(1)
                    .and_then(|i| params.get(i))
                    .ok_or_else(|| {
                        Error::plan(
                            sqlstate::UNDEFINED_PARAMETER,
                            format!("there is no parameter {p}"),
                        )
                    })?;
                Some(value.clone())
            }
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } => match literal_text(inner, params)? {
            Some(Some(n)) if matches!(inner.as_ref(), Expr::Value(v) if matches!(v.value, Value::Number(..))) => {
                Some(Some(format!("-{n}")))
            }
            _ => None,
        },
        Expr::Nested(inner) => literal_text(inner, params)?,
        Expr::TypedString(ts) => match &ts.value.value {
            Value::SingleQuotedString(s) => Some(Some(s.clone())),
            _ => None,
        },
        _ => None,
    })
}

fn evaluate_constant(ctx: &PlanContext, expr: &Expr) -> Result<ScalarValue> {
    let empty = DFSchema::empty();
    let logical =
        SqlToRel::new(ctx).sql_to_expr(expr.clone(), &empty, &mut PlannerContext::new())?;
    let logical = crate::plan::expr::simplify(&logical, &empty)?;
    let physical = ctx.state().create_physical_expr(logical, &empty)?;
    let batch = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    let value = physical.evaluate(&batch)?.into_array(1)?;
    Ok(ScalarValue::try_from_array(&value, 0)?)
}
