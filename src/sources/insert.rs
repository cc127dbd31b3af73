//! `INSERT INTO stream [(cols)] VALUES (...), ...` into one Arrow batch. Literals take the
//! same text path as COPY; a bound parameter goes into its column by value ([`Param`]: text
//! by the column type's input rules, a typed value converted as an assignment converts it);
//! anything else (`now()`, `1 + 2`) is evaluated by DataFusion. A bad value rejects the whole
//! statement, naming its line and column (and the parameter's number).

use crate::error::sqlstate;

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::{self as sq, Expr, SetExpr, Spanned, UnaryOperator, Value};

use super::param::{placeholder_number, Param};
use super::value::BatchBuilder;
use crate::error::{Error, Result};
use crate::plan::catalog::{arrow_type, normalize};
use crate::plan::ConstantEvaluator;

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

/// The types of an INSERT's `$1`, `$2`, ... as a Describe reports them: a placeholder that
/// is a value takes its column's type, one under a cast (`$1::timestamp`, as SQLAlchemy's
/// psycopg dialect writes every parameter) the cast's type, any other TEXT.
pub fn insert_param_types(insert: &sq::Insert, schema: &Schema) -> Result<Vec<DataType>> {
    let columns = insert_columns(insert, schema)?;
    let mut types: Vec<Option<DataType>> = Vec::new();
    let mut note = |n: usize, ty: Option<DataType>| {
        if types.len() < n {
            types.resize(n, None);
        }
        if let Some(ty) = ty {
            types[n - 1].get_or_insert(ty);
        }
    };
    for row in insert_rows(insert)? {
        for (e, &c) in row.iter().zip(&columns) {
            if let Some(n) = placeholder_number(e) {
                note(n, Some(schema.field(c).data_type().clone()));
                continue;
            }
            let _ = sq::visit_expressions(e, |e| {
                if let Expr::Cast {
                    expr, data_type, ..
                } = e
                {
                    if let Some(n) = placeholder_number(expr) {
                        note(n, arrow_type(data_type).ok());
                    }
                } else if let Some(n) = placeholder_number(e) {
                    note(n, None);
                }
                ControlFlow::<()>::Continue(())
            });
        }
    }
    Ok(types
        .into_iter()
        .map(|t| t.unwrap_or(DataType::Utf8))
        .collect())
}

/// Builds the batch for an INSERT into a stream of `schema`; `params` fill `$1`, `$2`, ...
pub fn insert_batch(
    insert: &sq::Insert,
    schema: &SchemaRef,
    params: &[Param],
) -> Result<RecordBatch> {
    let columns = insert_columns(insert, schema)?;
    let rows = insert_rows(insert)?;
    let mut builder = BatchBuilder::new(schema.clone())?;
    let mut evaluator = ConstantEvaluator::default();
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

/// Bound parameter `$n`, or 42P02 when the statement has fewer.
fn parameter(params: &[Param], n: usize) -> Result<&Param> {
    n.checked_sub(1).and_then(|i| params.get(i)).ok_or_else(|| {
        Error::plan(
            sqlstate::UNDEFINED_PARAMETER,
            format!("there is no parameter ${n}"),
        )
    })
}

fn push_expr(
    builder: &mut BatchBuilder,
    column: usize,
    expr: &Expr,
    params: &[Param],
    evaluator: &mut ConstantEvaluator,
) -> Result<()> {
    if let Some(n) = placeholder_number(expr) {
        let param = parameter(params, n)?;
        return param
            .push_into(builder, column)
            .map_err(|e| e.for_parameter(n));
    }
    if let Some(text) = literal_text(expr) {
        return builder.push_text(column, text.as_deref());
    }
    let value = evaluator.evaluate_bound(expr, &|n, ty| {
        let param = parameter(params, n)?;
        param.resolve(ty).map_err(|e| e.for_parameter(n))
    })?;
    builder.push_scalar(column, &value)
}

/// The text of a literal, `Some(None)` for NULL, `None` if `expr` is not a plain literal.
fn literal_text(expr: &Expr) -> Option<Option<String>> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => Some(Some(n.clone())),
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => Some(Some(s.clone())),
            Value::Boolean(b) => Some(Some(b.to_string())),
            Value::Null => Some(None),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } => match literal_text(inner) {
            Some(Some(n)) if matches!(inner.as_ref(), Expr::Value(v) if matches!(v.value, Value::Number(..))) => {
                Some(Some(format!("-{n}")))
            }
            _ => None,
        },
        Expr::Nested(inner) => literal_text(inner),
        Expr::TypedString(ts) => match &ts.value.value {
            Value::SingleQuotedString(s) => Some(Some(s.clone())),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::{Field, TimeUnit, TimestampNanosecondType};
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use std::sync::Arc;

    fn insert(sql: &str) -> sq::Insert {
        match Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0)
        {
            sq::Statement::Insert(i) => i,
            other => panic!("not an INSERT: {other}"),
        }
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("host", DataType::Utf8, true),
            Field::new("amount", DataType::Int64, true),
        ]))
    }

    #[test]
    fn parameters_bind_under_casts_and_inside_expressions() {
        let ins =
            insert("INSERT INTO s (ts, host, amount) VALUES ($1::timestamp, upper($2), $3 + 1)");
        assert_eq!(
            insert_param_types(&ins, &schema()).unwrap(),
            vec![
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                DataType::Utf8,
                DataType::Utf8
            ]
        );
        let params = [
            Param::from("2024-01-01 00:00:01"),
            Param::from("ab"),
            Param::from("41"),
        ];
        let batch = insert_batch(&ins, &schema(), &params).unwrap();
        assert_eq!(
            batch
                .column(0)
                .as_primitive::<TimestampNanosecondType>()
                .value(0),
            1_704_067_201_000_000_000
        );
        assert_eq!(batch.column(1).as_string::<i32>().value(0), "AB");
        assert_eq!(
            batch
                .column(2)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(0),
            42
        );
        // A missing parameter is 42P02, a bad one names itself.
        let e = insert_batch(&ins, &schema(), &params[..2]).unwrap_err();
        assert_eq!(e.sqlstate(), sqlstate::UNDEFINED_PARAMETER, "{e}");
        let bad = [params[0].clone(), params[1].clone(), Param::from("x")];
        let e = insert_batch(&ins, &schema(), &bad).unwrap_err();
        assert!(e.to_string().contains("$3"), "{e}");
    }
}
