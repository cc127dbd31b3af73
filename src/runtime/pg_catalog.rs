//! Enough of PostgreSQL's catalog for psql (`\d`, `\d NAME`, `\d+`, `\l`, `\dn`), drivers'
//! introspection (SQLAlchemy's `inspect()`, pgJDBC's `getTables`/`getColumns`) and type probes
//! to describe what saql has: streams as tables and continuous queries as materialized views
//! (a query's results can be read with SELECT, as a materialized view's can), all in schema
//! `public` of database `saql`, owned by `saql`. `pg_type` lists the types saql sends, with
//! PostgreSQL's oids, and `to_regtype(name)` finds them, so that drivers probing for a type
//! (SQLAlchemy and psycopg looking for hstore) learn that it is absent. Relations saql has no
//! use for (indexes, constraints, triggers, policies, inheritance, defaults) are there and
//! empty, so the questions tools ask about them have their true answer: none.
//! `information_schema.tables` and `.columns` say the same with PostgreSQL's type names.
//! How the statements tools send are made plannable is in [`super::pg_rewrite`].

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemorySchemaProvider;
use datafusion::datasource::MemTable;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};

/// The schema the catalog's tables live in.
pub const SCHEMA: &str = "pg_catalog";
/// The database (DataFusion catalog) saql's relations are in, as `current_database()` says.
pub const DATABASE: &str = "saql";
/// The oid psql joins relations to their namespace by; `public` as in PostgreSQL.
const PUBLIC_OID: i64 = 2200;
const CATALOG_OID: i64 = 11;
const OWNER: &str = "saql";
const OWNER_OID: i64 = 10;
const DATABASE_OID: i64 = 16383;
/// PostgreSQL's default collation, which text columns carry.
const DEFAULT_COLLATION: i64 = 100;

/// What a relation is, as `pg_class.relkind` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelKind {
    /// A stream: a table (`r`).
    Stream,
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
struct PgType {
    oid: i64,
    name: &'static str,
    array: i64,
    len: i64,
    formatted: &'static str,
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

const TYPES: [PgType; 10] = [
    ty(16, "bool", 1000, 1, "boolean"),
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
fn pg_type_of(t: &DataType) -> &'static PgType {
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
fn type_oid(name: &str) -> Option<i64> {
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

/// Catalog tables saql has nothing in, by column (`:i` integer, `:b` boolean, else text).
const EMPTY_TABLES: &[(&str, &[&str])] = &[
    ("pg_am", &["oid:i", "amname", "amtype"]),
    ("pg_attrdef", &["oid:i", "adrelid:i", "adnum:i", "adbin"]),
    ("pg_collation", &["oid:i", "collname", "collnamespace:i"]),
    (
        "pg_index",
        &[
            "indexrelid:i",
            "indrelid:i",
            "indnatts:i",
            "indisunique:b",
            "indisprimary:b",
            "indisexclusion:b",
            "indimmediate:b",
            "indisclustered:b",
            "indisvalid:b",
            "indisreplident:b",
            "indkey",
            "indexprs",
            "indpred",
        ],
    ),
    (
        "pg_constraint",
        &[
            "oid:i",
            "conname",
            "connamespace:i",
            "contype",
            "condeferrable:b",
            "condeferred:b",
            "convalidated:b",
            "conrelid:i",
            "conindid:i",
            "confrelid:i",
            "conparentid:i",
            "conislocal:b",
            "conkey",
            "confkey",
        ],
    ),
    (
        "pg_inherits",
        &[
            "inhrelid:i",
            "inhparent:i",
            "inhseqno:i",
            "inhdetachpending:b",
        ],
    ),
    (
        "pg_trigger",
        &[
            "oid:i",
            "tgrelid:i",
            "tgparentid:i",
            "tgname",
            "tgenabled",
            "tgisinternal:b",
        ],
    ),
    (
        "pg_policy",
        &[
            "oid:i",
            "polname",
            "polrelid:i",
            "polcmd",
            "polpermissive:b",
            "polroles",
            "polqual",
            "polwithcheck",
        ],
    ),
    (
        "pg_statistic_ext",
        &[
            "oid:i",
            "stxrelid:i",
            "stxname",
            "stxnamespace:i",
            "stxkeys",
            "stxkind",
            "stxstattarget:i",
        ],
    ),
    ("pg_publication", &["oid:i", "pubname", "puballtables:b"]),
    ("pg_publication_rel", &["oid:i", "prpubid:i", "prrelid:i"]),
    (
        "pg_publication_namespace",
        &["oid:i", "pnpubid:i", "pnnspid:i"],
    ),
    (
        "pg_rewrite",
        &["oid:i", "rulename", "ev_class:i", "ev_type", "is_instead:b"],
    ),
    (
        "pg_description",
        &["objoid:i", "classoid:i", "objsubid:i", "description"],
    ),
    (
        "pg_sequence",
        &["seqrelid:i", "seqstart:i", "seqincrement:i"],
    ),
    (
        "pg_proc",
        &[
            "oid:i",
            "proname",
            "pronamespace:i",
            "prokind",
            "prorettype:i",
            "proretset:b",
            "proargtypes",
        ],
    ),
    ("pg_foreign_table", &["ftrelid:i", "ftserver:i"]),
    (
        "pg_partitioned_table",
        &["partrelid:i", "partstrat", "partnatts:i"],
    ),
    ("pg_event_trigger", &["oid:i", "evtname"]),
    ("pg_extension", &["oid:i", "extname", "extversion"]),
    ("pg_opclass", &["oid:i", "opcname", "opcdefault:b"]),
    ("pg_enum", &["oid:i", "enumtypid:i", "enumlabel"]),
];

/// The functions the catalog queries of psql and drivers call, with what they return.
const FUNCTIONS: [(&str, DataType); 24] = [
    ("has_schema_privilege", DataType::Boolean),
    ("pg_size_pretty", DataType::Utf8),
    ("pg_table_size", DataType::Int64),
    ("pg_total_relation_size", DataType::Int64),
    ("array_to_string", DataType::Utf8),
    ("to_regtype", DataType::Int64),
    ("to_regclass", DataType::Int64),
    ("format_type", DataType::Utf8),
    ("pg_get_userbyid", DataType::Utf8),
    ("pg_table_is_visible", DataType::Boolean),
    ("pg_type_is_visible", DataType::Boolean),
    ("pg_function_is_visible", DataType::Boolean),
    ("pg_get_viewdef", DataType::Utf8),
    ("pg_get_expr", DataType::Utf8),
    ("pg_get_indexdef", DataType::Utf8),
    ("pg_get_constraintdef", DataType::Utf8),
    ("pg_get_function_result", DataType::Utf8),
    ("pg_get_function_arguments", DataType::Utf8),
    ("obj_description", DataType::Utf8),
    ("col_description", DataType::Utf8),
    ("shobj_description", DataType::Utf8),
    ("pg_encoding_to_char", DataType::Utf8),
    ("has_table_privilege", DataType::Boolean),
    ("pg_relation_size", DataType::Int64),
];

/// One catalog function, answered row by row (catalog queries read a few rows).
#[derive(Debug, PartialEq, Eq, Hash)]
struct CatalogFn {
    name: &'static str,
    returns: DataType,
    signature: Signature,
    /// Queries' definitions by oid, for `pg_get_viewdef`.
    definitions: Arc<BTreeMap<i64, String>>,
}

impl CatalogFn {
    fn answer(&self, args: &[ScalarValue]) -> ScalarValue {
        let text = |i: usize| match args.get(i) {
            Some(ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s)) => {
                s.clone()
            }
            Some(v) if !v.is_null() => Some(v.to_string()),
            _ => None,
        };
        let int = |i: usize| text(i).and_then(|s| s.trim().parse::<i64>().ok());
        match self.name {
            "to_regtype" => ScalarValue::Int64(text(0).as_deref().and_then(type_oid)),
            "to_regclass" => ScalarValue::Int64(text(0).map(|n| relation_oid(&n.to_lowercase()))),
            "format_type" => ScalarValue::Utf8(int(0).map(|oid| {
                TYPES
                    .iter()
                    .find(|t| t.oid == oid)
                    .map_or("???", |t| t.formatted)
                    .to_string()
            })),
            "pg_get_userbyid" => ScalarValue::from(OWNER),
            "pg_table_is_visible" | "pg_type_is_visible" | "pg_function_is_visible" => {
                ScalarValue::Boolean(Some(true))
            }
            // Without users every client is admin; with them, the role decides per statement
            // kind, not per relation.
            "has_table_privilege" | "has_schema_privilege" => ScalarValue::Boolean(Some(true)),
            "pg_get_viewdef" => {
                ScalarValue::Utf8(int(0).and_then(|oid| self.definitions.get(&oid).cloned()))
            }
            "pg_encoding_to_char" => ScalarValue::from("UTF8"),
            // Streams and queries keep their rows in memory and in the ingest log, not in
            // relation files.
            "pg_relation_size" | "pg_table_size" | "pg_total_relation_size" => {
                ScalarValue::Int64(Some(0))
            }
            "pg_size_pretty" => ScalarValue::Utf8(int(0).map(|b| format!("{b} bytes"))),
            _ => ScalarValue::Utf8(None),
        }
    }
}

impl ScalarUDFImpl for CatalogFn {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(self.returns.clone())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        if args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            let scalars: Vec<ScalarValue> = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => s.clone(),
                    ColumnarValue::Array(_) => unreachable!("all scalars"),
                })
                .collect();
            return Ok(ColumnarValue::Scalar(self.answer(&scalars)));
        }
        let mut values = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            let scalars = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => Ok(s.clone()),
                    ColumnarValue::Array(a) => ScalarValue::try_from_array(a, row),
                })
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            values.push(self.answer(&scalars));
        }
        if values.is_empty() {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(&self.returns),
            ));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(values)?))
    }
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
                RelKind::Stream => "r",
                RelKind::Query => "m",
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
        .register(ctx, SCHEMA)
}

fn category(oid: i64) -> &'static str {
    match oid {
        16 => "B",
        20 | 21 | 23 | 700 | 701 => "N",
        1114 | 1184 => "D",
        _ => "S",
    }
}

/// `information_schema.tables` and `.columns`, in database `saql` and with PostgreSQL's type
/// names (`bigint`, `timestamp without time zone`).
fn information_schema(ctx: &SessionContext, relations: &[Relation]) -> Result<()> {
    let n = relations.len();
    Table::new("tables")
        .text("table_catalog", vec![DATABASE; n])
        .text("table_schema", vec!["public"; n])
        .text("table_name", relations.iter().map(|r| r.name))
        .text(
            "table_type",
            relations.iter().map(|r| match r.kind {
                RelKind::Stream => "BASE TABLE",
                RelKind::Query => "VIEW",
            }),
        )
        .text(
            "is_insertable_into",
            relations.iter().map(|r| yes(r.kind == RelKind::Stream)),
        )
        .register(ctx, "information_schema")?;
    let columns: Vec<(&str, usize, &Field)> = relations
        .iter()
        .flat_map(|r| {
            r.schema
                .fields()
                .iter()
                .enumerate()
                .map(move |(i, f)| (r.name, i + 1, f.as_ref()))
        })
        .collect();
    let n = columns.len();
    let types = || columns.iter().map(|c| pg_type_of(c.2.data_type()));
    Table::new("columns")
        .text("table_catalog", vec![DATABASE; n])
        .text("table_schema", vec!["public"; n])
        .text("table_name", columns.iter().map(|c| c.0))
        .text("column_name", columns.iter().map(|c| c.2.name().as_str()))
        .int("ordinal_position", columns.iter().map(|c| c.1 as i64))
        .null_text("column_default", n)
        .text(
            "is_nullable",
            columns.iter().map(|c| yes(c.2.is_nullable())),
        )
        .text("data_type", types().map(|t| t.formatted))
        .text("udt_name", types().map(|t| t.name))
        .register(ctx, "information_schema")
}

fn yes(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}

/// A catalog table built column by column.
struct Table {
    name: &'static str,
    columns: Vec<(String, ArrayRef)>,
}

impl Table {
    fn new(name: &'static str) -> Self {
        Table {
            name,
            columns: Vec::new(),
        }
    }

    fn column(mut self, name: &str, values: ArrayRef) -> Self {
        self.columns.push((name.to_string(), values));
        self
    }

    fn int(self, name: &str, values: impl IntoIterator<Item = i64>) -> Self {
        self.column(name, Arc::new(Int64Array::from_iter_values(values)))
    }

    fn float(self, name: &str, values: impl IntoIterator<Item = f64>) -> Self {
        self.column(name, Arc::new(Float64Array::from_iter_values(values)))
    }

    fn boolean(self, name: &str, values: impl IntoIterator<Item = bool>) -> Self {
        let values: BooleanArray = values.into_iter().map(Some).collect();
        self.column(name, Arc::new(values))
    }

    fn text<S: AsRef<str>>(self, name: &str, values: impl IntoIterator<Item = S>) -> Self {
        self.column(name, Arc::new(StringArray::from_iter_values(values)))
    }

    fn null_text(self, name: &str, rows: usize) -> Self {
        self.column(name, Arc::new(StringArray::new_null(rows)))
    }

    fn register(self, ctx: &SessionContext, schema: &str) -> Result<()> {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|(n, a)| Field::new(n, a.data_type().clone(), a.null_count() > 0))
            .collect();
        let schema_ref = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(
            schema_ref.clone(),
            self.columns.into_iter().map(|c| c.1).collect(),
        )?;
        let table = MemTable::try_new(schema_ref, vec![vec![batch]])?;
        ctx.register_table(format!("{schema}.{}", self.name), Arc::new(table))?;
        Ok(())
    }
}

/// Whether `name` is a catalog table found without its schema (`FROM pg_type`), as PostgreSQL's
/// search path finds `pg_catalog` first.
pub fn is_catalog_table(name: &str) -> bool {
    CATALOG_TABLES.contains(&name) || EMPTY_TABLES.iter().any(|(t, _)| *t == name)
}

const CATALOG_TABLES: [&str; 8] = [
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
