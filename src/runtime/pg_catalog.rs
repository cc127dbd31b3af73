//! Enough of PostgreSQL's `pg_catalog` for psql's `\d` and `\dt` to list what saql has:
//! streams as tables and continuous queries as materialized views (a query's results can be
//! read with SELECT, as a materialized view's can), all in schema `public`, owned by `saql`.
//! Describing one relation (`\d name`) needs far more of the catalog and is not answered;
//! `SHOW STREAMS` and `SHOW QUERIES` describe them. `pg_type` lists the types saql sends, with
//! PostgreSQL's oids, and `to_regtype(name)` finds them, so that drivers probing for a type
//! (SQLAlchemy and psycopg looking for hstore) learn that it is absent. As in PostgreSQL, the
//! catalog's tables are found unqualified too, unless a stream or query has the name.

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
    visit_expressions_mut, visit_relations, visit_relations_mut, Expr, Ident, ObjectNamePart,
    Statement, Value,
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

/// The types saql sends, as `pg_type` rows: oid, name, array type oid.
const TYPES: [(i64, &str, i64); 10] = [
    (16, "bool", 1000),
    (20, "int8", 1016),
    (21, "int2", 1005),
    (23, "int4", 1007),
    (25, "text", 1009),
    (700, "float4", 1021),
    (701, "float8", 1022),
    (1043, "varchar", 1015),
    (1114, "timestamp", 1115),
    (1184, "timestamptz", 1185),
];

/// The oid of a type name as `to_regtype` takes it (`int8`, `bigint`, `pg_catalog.text`, ...).
fn type_oid(name: &str) -> Option<i64> {
    let name = name.trim().to_lowercase();
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    let canonical = match name {
        "boolean" => "bool",
        "bigint" => "int8",
        "smallint" => "int2",
        "integer" | "int" => "int4",
        "real" => "float4",
        "double precision" => "float8",
        "character varying" => "varchar",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        other => other,
    };
    TYPES
        .iter()
        .find(|(_, n, _)| *n == canonical)
        .map(|(oid, _, _)| *oid)
}

/// Registers `pg_catalog.pg_namespace`, `pg_class`, `pg_am`, `pg_type` and the functions
/// psql's listing and drivers' type probes call, describing `relations`.
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

    table(
        ctx,
        "pg_type",
        vec![
            (
                "oid",
                Arc::new(Int64Array::from_iter_values(TYPES.iter().map(|t| t.0))) as ArrayRef,
            ),
            (
                "typname",
                Arc::new(StringArray::from_iter_values(TYPES.iter().map(|t| t.1))),
            ),
            (
                "typnamespace",
                Arc::new(Int64Array::from(vec![11; TYPES.len()])),
            ),
            (
                "typarray",
                Arc::new(Int64Array::from_iter_values(TYPES.iter().map(|t| t.2))),
            ),
            (
                "typtype",
                Arc::new(StringArray::from(vec!["b"; TYPES.len()])),
            ),
            (
                "typdelim",
                Arc::new(StringArray::from(vec![","; TYPES.len()])),
            ),
            ("typelem", Arc::new(Int64Array::from(vec![0; TYPES.len()]))),
            ("typrelid", Arc::new(Int64Array::from(vec![0; TYPES.len()]))),
            (
                "typbasetype",
                Arc::new(Int64Array::from(vec![0; TYPES.len()])),
            ),
        ],
    )?;
    ctx.register_udf(create_udf(
        "to_regtype",
        vec![DataType::Utf8],
        DataType::Int64,
        Volatility::Immutable,
        Arc::new(|args| {
            Ok(match &args[0] {
                ColumnarValue::Scalar(ScalarValue::Utf8(name)) => {
                    ColumnarValue::Scalar(ScalarValue::Int64(name.as_deref().and_then(type_oid)))
                }
                ColumnarValue::Array(names) => {
                    let names = datafusion::arrow::array::AsArray::as_string::<i32>(names);
                    let oids: Int64Array = names.iter().map(|n| n.and_then(type_oid)).collect();
                    ColumnarValue::Array(Arc::new(oids))
                }
                _ => ColumnarValue::Scalar(ScalarValue::Int64(None)),
            })
        }),
    ));
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

/// Calls `pg_catalog.f(...)` as `f(...)` (DataFusion resolves unqualified function names
/// only), and drops casts to PostgreSQL's oid alias types (`x::regtype`, `::regclass`, `::oid`):
/// saql's oids are plain numbers.
pub fn unqualify_functions(stmt: &mut Statement) {
    let _ = visit_expressions_mut(stmt, |e| {
        if let Expr::Function(f) = e {
            if let [ObjectNamePart::Identifier(schema), _] = f.name.0.as_slice() {
                if schema.value.eq_ignore_ascii_case(SCHEMA) {
                    f.name.0.remove(0);
                }
            }
        }
        if let Expr::Cast {
            expr, data_type, ..
        } = e
        {
            let name = data_type.to_string().to_lowercase();
            if matches!(name.as_str(), "regtype" | "regclass" | "regproc" | "oid") {
                *e = std::mem::replace(expr.as_mut(), Expr::value(Value::Null));
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Names the catalog's tables that `stmt` reads unqualified (`FROM pg_type`) with their schema,
/// as PostgreSQL's search path finds them, unless `taken` (a stream or query of that name).
pub fn qualify_catalog_tables(stmt: &mut Statement, taken: impl Fn(&str) -> bool) {
    let _ = visit_relations_mut(stmt, |name| {
        if let [ObjectNamePart::Identifier(table)] = name.0.as_slice() {
            let lower = table.value.to_lowercase();
            if CATALOG_TABLES.contains(&lower.as_str()) && !taken(&lower) {
                name.0
                    .insert(0, ObjectNamePart::Identifier(Ident::new(SCHEMA)));
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

const CATALOG_TABLES: [&str; 4] = ["pg_namespace", "pg_class", "pg_am", "pg_type"];

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
