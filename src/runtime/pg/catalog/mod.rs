//! Enough of PostgreSQL's catalog for psql (`\d`, `\d NAME`, `\d+`, `\l`, `\dn`), drivers'
//! introspection (SQLAlchemy's `inspect()`, pgJDBC's `getTables`/`getColumns`) and type probes
//! to describe what saql has: streams as tables and continuous queries as materialized views
//! (a query's results can be read with SELECT, as a materialized view's can), all in schema
//! `public` of database `saql`, owned by `saql`. `pg_type` lists the types saql sends, with
//! PostgreSQL's oids, and `to_regtype(name)` finds them, so that drivers probing for a type
//! (SQLAlchemy and psycopg looking for hstore) learn that it is absent. Relations saql has no
//! use for (indexes, constraints, triggers, policies, inheritance, defaults) are there and
//! empty, so the questions tools ask about them have their true answer: none.
//! `information_schema` says the same with PostgreSQL's type names ([`info_schema`]); the
//! empty tables are listed in [`empty`], the functions in [`functions`], the settings and
//! table statistics in [`settings`], the keywords in [`keywords`]. How the statements tools
//! send are made plannable is in [`crate::runtime::pg::rewrite`].

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::ListArray;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemorySchemaProvider;
use datafusion::logical_expr::{create_udf, ColumnarValue, ScalarUDF, Signature, Volatility};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};

mod empty;
mod functions;
mod info_schema;
mod keywords;
mod settings;
mod table;

use empty::EMPTY_TABLES;
use functions::{CatalogFn, FUNCTIONS};
use info_schema::information_schema;
use table::Table;

/// The schema the catalog's tables live in.
pub const SCHEMA: &str = "pg_catalog";
/// The database (DataFusion catalog) saql's relations are in, as `current_database()` says.
pub const DATABASE: &str = "saql";
/// The oid psql joins relations to their namespace by; `public` as in PostgreSQL.
const PUBLIC_OID: i64 = 2200;
const CATALOG_OID: i64 = 11;
pub(in crate::runtime) const OWNER: &str = "saql";
const OWNER_OID: i64 = 10;
const DATABASE_OID: i64 = 16383;
/// PostgreSQL's default collation, which text columns carry.
const DEFAULT_COLLATION: i64 = 100;

/// What a relation is, as `pg_class.relkind` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelKind {
    /// A stream: a table (`r`).
    Stream,
    /// A reference table (`r`).
    Table,
    /// A view (`v`).
    View,
    /// A continuous query: a materialized view (`m`).
    Query,
}

/// A stream or query as the catalog describes it.
pub struct Relation<'a> {
    pub name: &'a str,
    pub kind: RelKind,
    pub schema: &'a Schema,
    /// A query's statement, as `pg_get_viewdef` gives it.
    pub definition: Option<String>,
    /// The rows it holds now (a stream's recent rows, a query's retained results).
    pub rows: usize,
}

/// A relation's oid: derived from its name, so that it stays the same between the statements
/// of one `\d` (each builds the catalog anew) whatever else is created meanwhile.
pub fn relation_oid(name: &str) -> i64 {
    // FNV-1a, folded into the oids PostgreSQL gives user relations (from 16384 on).
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    16384 + i64::from(h % (1 << 30))
}

/// A PostgreSQL type saql sends: oid, name, array type oid, length, name as `format_type`
/// gives it, default collation.
pub(in crate::runtime) struct PgType {
    pub(in crate::runtime) oid: i64,
    pub(in crate::runtime) name: &'static str,
    array: i64,
    len: i64,
    pub(in crate::runtime) formatted: &'static str,
    collation: i64,
}

const fn ty(oid: i64, name: &'static str, array: i64, len: i64, formatted: &'static str) -> PgType {
    PgType {
        oid,
        name,
        array,
        len,
        formatted,
        collation: 0,
    }
}

pub(in crate::runtime) const TYPES: [PgType; 13] = [
    ty(16, "bool", 1000, 1, "boolean"),
    ty(18, "char", 1002, 1, "\"char\""),
    ty(19, "name", 1003, 64, "name"),
    ty(26, "oid", 1028, 4, "oid"),
    ty(20, "int8", 1016, 8, "bigint"),
    ty(21, "int2", 1005, 2, "smallint"),
    ty(23, "int4", 1007, 4, "integer"),
    PgType {
        collation: DEFAULT_COLLATION,
        ..ty(25, "text", 1009, -1, "text")
    },
    ty(700, "float4", 1021, 4, "real"),
    ty(701, "float8", 1022, 8, "double precision"),
    PgType {
        collation: DEFAULT_COLLATION,
        ..ty(1043, "varchar", 1015, -1, "character varying")
    },
    ty(1114, "timestamp", 1115, 8, "timestamp without time zone"),
    ty(1184, "timestamptz", 1185, 8, "timestamp with time zone"),
];

/// The PostgreSQL type an Arrow column is sent as (the wire encoder's choice).
pub(in crate::runtime) fn pg_type_of(t: &DataType) -> &'static PgType {
    let oid = match t {
        DataType::Boolean => 16,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => 21,
        DataType::Int32 | DataType::UInt16 => 23,
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => 20,
        DataType::Float16 | DataType::Float32 => 700,
        DataType::Float64 => 701,
        DataType::Timestamp(_, None) => 1114,
        DataType::Timestamp(_, Some(_)) => 1184,
        _ => 25,
    };
    TYPES.iter().find(|t| t.oid == oid).expect("listed type")
}

/// The oid of a type name as `to_regtype` takes it (`int8`, `bigint`, `pg_catalog.text`, ...).
pub(in crate::runtime) fn type_oid(name: &str) -> Option<i64> {
    let name = name.trim().to_lowercase();
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    TYPES
        .iter()
        .find(|t| t.name == name || t.formatted == name || (name == "int" && t.oid == 23))
        .map(|t| t.oid)
}

/// Registers the catalog's tables and functions in `ctx`, describing `relations`.
pub fn register<'a>(
    ctx: &SessionContext,
    relations: impl Iterator<Item = Relation<'a>>,
    session: &crate::runtime::pg::functions::SessionInfo,
) -> Result<()> {
    let catalog = ctx
        .catalog(DATABASE)
        .ok_or_else(|| Error::Internal("no default catalog".into()))?;
    catalog.register_schema(SCHEMA, Arc::new(MemorySchemaProvider::new()))?;
    catalog.register_schema("information_schema", Arc::new(MemorySchemaProvider::new()))?;
    let relations: Vec<Relation> = relations.collect();

    Table::new("pg_namespace")
        .int("oid", [CATALOG_OID, PUBLIC_OID, 13000])
        .text("nspname", [SCHEMA, "public", "information_schema"])
        .int("nspowner", [OWNER_OID; 3])
        .null_text("nspacl", 3)
        .register(ctx, SCHEMA)?;
    pg_class(ctx, &relations)?;
    pg_attribute(ctx, &relations)?;
    pg_type(ctx)?;
    Table::new("pg_database")
        .int("oid", [DATABASE_OID])
        .text("datname", [DATABASE])
        .int("datdba", [OWNER_OID])
        .int("encoding", [6])
        .text("datlocprovider", ["c"])
        .boolean("datistemplate", [false])
        .boolean("datallowconn", [true])
        .int("datconnlimit", [-1])
        .int("dattablespace", [1663])
        .text("datcollate", ["C"])
        .text("datctype", ["C"])
        .null_text("daticulocale", 1)
        .null_text("daticurules", 1)
        .null_text("datacl", 1)
        .register(ctx, SCHEMA)?;
    for role in ["pg_roles", "pg_user"] {
        Table::new(role)
            .int("oid", [OWNER_OID])
            .text(
                if role == "pg_roles" {
                    "rolname"
                } else {
                    "usename"
                },
                [OWNER],
            )
            .boolean("rolsuper", [true])
            .boolean("rolinherit", [true])
            .boolean("rolcreaterole", [true])
            .boolean("rolcreatedb", [false])
            .boolean("rolcanlogin", [true])
            .boolean("rolreplication", [false])
            .boolean("rolbypassrls", [false])
            .int("rolconnlimit", [-1])
            .null_text("rolvaliduntil", 1)
            .register(ctx, SCHEMA)?;
    }
    Table::new("pg_tablespace")
        .int("oid", [1663])
        .text("spcname", ["pg_default"])
        .int("spcowner", [OWNER_OID])
        .register(ctx, SCHEMA)?;
    for (name, columns) in EMPTY_TABLES {
        let mut table = Table::new(name);
        for c in *columns {
            table = match c.split_once(':') {
                Some((c, "i")) => table.int(c, []),
                Some((c, "b")) => table.boolean(c, []),
                _ => table.text(c, Vec::<&str>::new()),
            };
        }
        table.register(ctx, SCHEMA)?;
    }
    information_schema(ctx, &relations)?;

    let definitions: BTreeMap<i64, String> = relations
        .iter()
        .filter_map(|r| Some((relation_oid(r.name), r.definition.clone()?)))
        .collect();
    let definitions = Arc::new(definitions);
    settings::register(ctx, &relations, session)?;
    ctx.register_udtf("pg_get_keywords", Arc::new(keywords::Keywords));
    ctx.register_udf(current_schemas());
    for (name, returns) in FUNCTIONS {
        ctx.register_udf(ScalarUDF::new_from_impl(CatalogFn {
            name,
            returns: returns.clone(),
            signature: Signature::variadic_any(Volatility::Stable),
            definitions: definitions.clone(),
        }));
    }
    Ok(())
}

fn pg_class(ctx: &SessionContext, relations: &[Relation]) -> Result<()> {
    let n = relations.len();
    Table::new("pg_class")
        .int("oid", relations.iter().map(|r| relation_oid(r.name)))
        .text("relname", relations.iter().map(|r| r.name))
        .int("relnamespace", vec![PUBLIC_OID; n])
        .int("reltype", vec![0; n])
        .int("relowner", vec![OWNER_OID; n])
        .int("relam", vec![0; n])
        .text(
            "relkind",
            relations.iter().map(|r| match r.kind {
                RelKind::Stream | RelKind::Table => "r",
                RelKind::Query => "m",
                RelKind::View => "v",
            }),
        )
        .int(
            "relnatts",
            relations.iter().map(|r| r.schema.fields().len() as i64),
        )
        .int("relchecks", vec![0; n])
        .boolean("relhasindex", vec![false; n])
        .boolean("relhasrules", vec![false; n])
        .boolean("relhastriggers", vec![false; n])
        .boolean("relhassubclass", vec![false; n])
        .boolean("relrowsecurity", vec![false; n])
        .boolean("relforcerowsecurity", vec![false; n])
        .boolean("relispartition", vec![false; n])
        .boolean("relispopulated", vec![true; n])
        .int("reltablespace", vec![0; n])
        .int("reloftype", vec![0; n])
        .int("reltoastrelid", vec![0; n])
        .int("relpages", vec![0; n])
        .float("reltuples", vec![-1.0; n])
        .text("relpersistence", vec!["p"; n])
        .text("relreplident", vec!["d"; n])
        .null_text("reloptions", n)
        .null_text("relpartbound", n)
        .null_text("relacl", n)
        .register(ctx, SCHEMA)
}

/// Each relation's columns, numbered from 1 as PostgreSQL numbers them.
fn pg_attribute(ctx: &SessionContext, relations: &[Relation]) -> Result<()> {
    let columns: Vec<(i64, i64, &Field)> = relations
        .iter()
        .flat_map(|r| {
            let oid = relation_oid(r.name);
            r.schema
                .fields()
                .iter()
                .enumerate()
                .map(move |(i, f)| (oid, i as i64 + 1, f.as_ref()))
        })
        .collect();
    let n = columns.len();
    let types = || columns.iter().map(|(_, _, f)| pg_type_of(f.data_type()));
    Table::new("pg_attribute")
        .int("attrelid", columns.iter().map(|c| c.0))
        .text("attname", columns.iter().map(|c| c.2.name().as_str()))
        .int("atttypid", types().map(|t| t.oid))
        .int("atttypmod", vec![-1; n])
        .int("attnum", columns.iter().map(|c| c.1))
        .int("attlen", types().map(|t| t.len))
        .int("attndims", vec![0; n])
        .boolean("attnotnull", columns.iter().map(|c| !c.2.is_nullable()))
        .boolean("atthasdef", vec![false; n])
        .boolean("atthasmissing", vec![false; n])
        .boolean("attisdropped", vec![false; n])
        .boolean("attislocal", vec![true; n])
        .int("attinhcount", vec![0; n])
        .int("attcollation", types().map(|t| t.collation))
        .int("attstattarget", vec![-1; n])
        .text("attidentity", vec![""; n])
        .text("attgenerated", vec![""; n])
        .text(
            "attstorage",
            types().map(|t| if t.len < 0 { "x" } else { "p" }),
        )
        .text("attcompression", vec![""; n])
        .null_text("attacl", n)
        .null_text("attoptions", n)
        .null_text("attfdwoptions", n)
        .register(ctx, SCHEMA)
}

fn pg_type(ctx: &SessionContext) -> Result<()> {
    let n = TYPES.len();
    Table::new("pg_type")
        .int("oid", TYPES.iter().map(|t| t.oid))
        .text("typname", TYPES.iter().map(|t| t.name))
        .int("typnamespace", vec![CATALOG_OID; n])
        .int("typowner", vec![OWNER_OID; n])
        .int("typlen", TYPES.iter().map(|t| t.len))
        .boolean("typbyval", TYPES.iter().map(|t| t.len > 0))
        .text("typtype", vec!["b"; n])
        .text("typcategory", TYPES.iter().map(|t| category(t.oid)))
        .text("typdelim", vec![","; n])
        .int("typrelid", vec![0; n])
        .int("typelem", vec![0; n])
        .int("typarray", TYPES.iter().map(|t| t.array))
        .boolean("typnotnull", vec![false; n])
        .int("typbasetype", vec![0; n])
        .int("typtypmod", vec![-1; n])
        .int("typndims", vec![0; n])
        .int("typcollation", TYPES.iter().map(|t| t.collation))
        .null_text("typdefault", n)
        .text("typinput", TYPES.iter().map(|t| format!("{}in", t.name)))
        .text("typoutput", TYPES.iter().map(|t| format!("{}out", t.name)))
        .null_text("typacl", n)
        .register(ctx, SCHEMA)
}

fn category(oid: i64) -> &'static str {
    match oid {
        16 => "B",
        20 | 21 | 23 | 26 | 700 | 701 => "N",
        1114 | 1184 => "D",
        _ => "S",
    }
}

/// `current_schemas(include_implicit)`: the search path, `pg_catalog` first when the implicit
/// schemas are asked for (pgcli completes names from it, pgJDBC orders types by it).
fn current_schemas() -> ScalarUDF {
    let item = Arc::new(Field::new("item", DataType::Utf8, true));
    create_udf(
        "current_schemas",
        vec![DataType::Boolean],
        DataType::List(item),
        Volatility::Stable,
        Arc::new(|args| {
            let implicit = match &args[0] {
                ColumnarValue::Scalar(ScalarValue::Boolean(b)) => b.unwrap_or(false),
                _ => true,
            };
            let schemas: Vec<Option<&str>> = if implicit {
                vec![Some(SCHEMA), Some("public")]
            } else {
                vec![Some("public")]
            };
            let values = datafusion::arrow::array::StringArray::from(schemas);
            let offsets = datafusion::arrow::buffer::OffsetBuffer::from_lengths([
                datafusion::arrow::array::Array::len(&values),
            ]);
            let field = Arc::new(Field::new("item", DataType::Utf8, true));
            let array = ListArray::try_new(field, offsets, Arc::new(values), None)?;
            Ok(ColumnarValue::Scalar(ScalarValue::List(Arc::new(array))))
        }),
    )
}

/// Whether `name` is a catalog table found without its schema (`FROM pg_type`), as PostgreSQL's
/// search path finds `pg_catalog` first.
pub fn is_catalog_table(name: &str) -> bool {
    CATALOG_TABLES.contains(&name) || EMPTY_TABLES.iter().any(|(t, _)| *t == name)
}

const CATALOG_TABLES: [&str; 10] = [
    "pg_settings",
    "pg_stat_user_tables",
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_database",
    "pg_roles",
    "pg_user",
    "pg_tablespace",
];

/// Whether `name` is a catalog table that is always empty: a scalar subquery that reads it
/// through inner joins is NULL.
pub fn is_empty_table(name: &str) -> bool {
    EMPTY_TABLES.iter().any(|(t, _)| *t == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_resolve_as_postgresql_resolves_them() {
        assert_eq!(type_oid("bigint"), Some(20));
        assert_eq!(type_oid("pg_catalog.int8"), Some(20));
        assert_eq!(type_oid("timestamp without time zone"), Some(1114));
        assert_eq!(type_oid("int"), Some(23));
        assert_eq!(type_oid("hstore"), None);
        assert_eq!(pg_type_of(&DataType::Utf8).formatted, "text");
    }

    #[test]
    fn relation_oids_are_stable_and_in_user_range() {
        assert_eq!(relation_oid("proc_events"), relation_oid("proc_events"));
        assert_ne!(relation_oid("proc_events"), relation_oid("net_events"));
        assert!((16384..16384 + (1 << 30)).contains(&relation_oid("x")));
    }
}
