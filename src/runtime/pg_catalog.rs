//! Enough of PostgreSQL's `pg_catalog` for psql's `\d` and `\dt` to list what saql has:
//! streams as tables and continuous queries as materialized views (a query's results can be
//! read with SELECT, as a materialized view's can), all in schema `public`, owned by `saql`.
//! Describing one relation (`\d name`) needs far more of the catalog and is not answered;
//! `SHOW STREAMS` and `SHOW QUERIES` describe them.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemorySchemaProvider;
use datafusion::datasource::MemTable;
use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, visit_relations, Expr, ObjectNamePart, Statement,
};

use crate::error::{Error, Result};

const SCHEMA: &str = "pg_catalog";
/// The oid psql joins relations to their namespace by; `public` as in PostgreSQL.
const PUBLIC_OID: i64 = 2200;
const OWNER: &str = "saql";

/// What a relation is, as `pg_class.relkind` says.
pub enum Relation<'a> {
    Stream(&'a str),
    Query(&'a str),
}

/// Registers `pg_catalog.pg_namespace`, `pg_class`, `pg_am` and the functions psql's listing
/// calls, describing `relations`.
pub fn register<'a>(
    ctx: &SessionContext,
    relations: impl Iterator<Item = Relation<'a>>,
) -> Result<()> {
    let catalog = ctx
        .catalog("datafusion")
        .ok_or_else(|| Error::Internal("no default catalog".into()))?;
    catalog.register_schema(SCHEMA, Arc::new(MemorySchemaProvider::new()))?;

    table(
        ctx,
        "pg_namespace",
        vec![
            (
                "oid",
                Arc::new(Int64Array::from(vec![11, PUBLIC_OID])) as ArrayRef,
            ),
            (
                "nspname",
                Arc::new(StringArray::from(vec![SCHEMA, "public"])),
            ),
        ],
    )?;
    let (mut names, mut kinds) = (Vec::new(), Vec::new());
    for r in relations {
        let (name, kind) = match r {
            Relation::Stream(n) => (n, "r"),
            Relation::Query(n) => (n, "m"),
        };
        names.push(name.to_string());
        kinds.push(kind);
    }
    let n = names.len();
    table(
        ctx,
        "pg_class",
        vec![
            (
                "oid",
                Arc::new(Int64Array::from_iter_values(16384..16384 + n as i64)) as ArrayRef,
            ),
            ("relname", Arc::new(StringArray::from(names))),
            (
                "relnamespace",
                Arc::new(Int64Array::from(vec![PUBLIC_OID; n])),
            ),
            ("relkind", Arc::new(StringArray::from(kinds))),
            ("relowner", Arc::new(Int64Array::from(vec![10; n]))),
            ("relam", Arc::new(Int64Array::from(vec![0; n]))),
        ],
    )?;
    table(
        ctx,
        "pg_am",
        vec![
            (
                "oid",
                Arc::new(Int64Array::from(Vec::<i64>::new())) as ArrayRef,
            ),
            ("amname", Arc::new(StringArray::from(Vec::<String>::new()))),
        ],
    )?;

    ctx.register_udf(create_udf(
        "pg_get_userbyid",
        vec![DataType::Int64],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|_| Ok(ColumnarValue::Scalar(ScalarValue::from(OWNER)))),
    ));
    ctx.register_udf(create_udf(
        "pg_table_is_visible",
        vec![DataType::Int64],
        DataType::Boolean,
        Volatility::Immutable,
        Arc::new(|args| {
            let rows = match &args[0] {
                ColumnarValue::Array(a) => a.len(),
                ColumnarValue::Scalar(_) => 1,
            };
            Ok(ColumnarValue::Array(Arc::new(BooleanArray::from(vec![
                true;
                rows
            ]))))
        }),
    ));
    Ok(())
}

/// Calls `pg_catalog.f(...)` as `f(...)`: DataFusion resolves unqualified function names only.
pub fn unqualify_functions(stmt: &mut Statement) {
    let _ = visit_expressions_mut(stmt, |e| {
        if let Expr::Function(f) = e {
            if let [ObjectNamePart::Identifier(schema), _] = f.name.0.as_slice() {
                if schema.value.eq_ignore_ascii_case(SCHEMA) {
                    f.name.0.remove(0);
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Whether a query reads a `pg_catalog` relation (psql's describing queries do).
pub fn reads_catalog(stmt: &Statement) -> bool {
    let mut found = false;
    let _ = visit_relations(stmt, |name| {
        if let [ObjectNamePart::Identifier(schema), _] = name.0.as_slice() {
            found |= schema.value.eq_ignore_ascii_case(SCHEMA);
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

fn table(ctx: &SessionContext, name: &str, columns: Vec<(&str, ArrayRef)>) -> Result<()> {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), false))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema.clone(), columns.into_iter().map(|c| c.1).collect())?;
    let table = MemTable::try_new(schema, vec![vec![batch]])?;
    ctx.register_table(format!("{SCHEMA}.{name}"), Arc::new(table))?;
    Ok(())
}
