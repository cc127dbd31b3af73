//! `information_schema`: tables and columns, in database `saql` and with PostgreSQL's type
//! names, and the constraint views (empty: streams have no keys) that BI tools read.

use datafusion::arrow::datatypes::Field;
use datafusion::prelude::SessionContext;

use super::table::Table;
use super::{pg_type_of, RelKind, Relation, DATABASE};
use crate::error::Result;

/// `information_schema.tables` and `.columns`, in database `saql` and with PostgreSQL's type
/// names (`bigint`, `timestamp without time zone`).
pub(super) fn information_schema(ctx: &SessionContext, relations: &[Relation]) -> Result<()> {
    let n = relations.len();
    Table::new("tables")
        .text("table_catalog", vec![DATABASE; n])
        .text("table_schema", vec!["public"; n])
        .text("table_name", relations.iter().map(|r| r.name))
        .text(
            "table_type",
            relations.iter().map(|r| match r.kind {
                RelKind::Stream | RelKind::Table => "BASE TABLE",
                RelKind::Query | RelKind::View => "VIEW",
            }),
        )
        .text(
            "is_insertable_into",
            relations
                .iter()
                .map(|r| yes(matches!(r.kind, RelKind::Stream | RelKind::Table))),
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
        .null_text("character_maximum_length", n)
        .null_text("numeric_precision", n)
        .null_text("numeric_scale", n)
        .text("is_identity", vec!["NO"; n])
        .text("is_generated", vec!["NEVER"; n])
        .text("is_updatable", columns.iter().map(|_| "NO"))
        .register(ctx, "information_schema")?;
    Table::new("schemata")
        .text("catalog_name", [DATABASE; 3])
        .text(
            "schema_name",
            ["pg_catalog", "public", "information_schema"],
        )
        .text("schema_owner", [super::OWNER; 3])
        .register(ctx, "information_schema")?;
    let queries: Vec<&Relation> = relations
        .iter()
        .filter(|r| matches!(r.kind, RelKind::Query | RelKind::View))
        .collect();
    let n = queries.len();
    Table::new("views")
        .text("table_catalog", vec![DATABASE; n])
        .text("table_schema", vec!["public"; n])
        .text("table_name", queries.iter().map(|r| r.name))
        .text(
            "view_definition",
            queries
                .iter()
                .map(|r| r.definition.clone().unwrap_or_default()),
        )
        .text("is_updatable", vec!["NO"; n])
        .text("is_insertable_into", vec!["NO"; n])
        .register(ctx, "information_schema")?;
    for (name, columns) in CONSTRAINT_VIEWS {
        let mut table = Table::new(name);
        for c in *columns {
            table = match c.strip_suffix(":i") {
                Some(c) => table.int(c, []),
                None => table.text(c, Vec::<&str>::new()),
            };
        }
        table.register(ctx, "information_schema")?;
    }
    Ok(())
}

/// The constraint views, empty: a stream has no primary, unique or foreign key (Metabase's
/// and Power BI's sync join them to find keys).
const CONSTRAINT_VIEWS: &[(&str, &[&str])] = &[
    (
        "table_constraints",
        &[
            "constraint_catalog",
            "constraint_schema",
            "constraint_name",
            "table_catalog",
            "table_schema",
            "table_name",
            "constraint_type",
            "is_deferrable",
            "initially_deferred",
            "enforced",
            "nulls_distinct",
        ],
    ),
    (
        "key_column_usage",
        &[
            "constraint_catalog",
            "constraint_schema",
            "constraint_name",
            "table_catalog",
            "table_schema",
            "table_name",
            "column_name",
            "ordinal_position:i",
            "position_in_unique_constraint:i",
        ],
    ),
    (
        "referential_constraints",
        &[
            "constraint_catalog",
            "constraint_schema",
            "constraint_name",
            "unique_constraint_catalog",
            "unique_constraint_schema",
            "unique_constraint_name",
            "match_option",
            "update_rule",
            "delete_rule",
        ],
    ),
    (
        "constraint_column_usage",
        &[
            "table_catalog",
            "table_schema",
            "table_name",
            "column_name",
            "constraint_catalog",
            "constraint_schema",
            "constraint_name",
        ],
    ),
];

fn yes(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}
