//! Reference tables in the catalog: `CREATE TABLE name (cols..., PRIMARY KEY (k)) [WITH
//! (max_rows = N, max_bytes = N, version_time = 'col')]` (`version_time`: the TIMESTAMP
//! column from which a row's version is valid, for temporal joins). A table is keyed by its primary key (every lookup join
//! reads it by that key), its key columns are NOT NULL, and its rows live in a shared
//! [`TableStore`] that the catalog entry holds, so the queries planned against it read the
//! same rows that INSERT, UPDATE, DELETE and COPY change.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::sql::sqlparser::ast::{self as sq, Spanned};

use super::catalog::{arrow_type, normalize, normalize_object};
use crate::error::{sqlstate, Error, Result};
use crate::operators::lookup::TableStore;

/// A declared reference table.
#[derive(Debug, Clone)]
pub struct TableDef {
    /// Normalised name.
    pub name: String,
    /// Its rows (schema, key and data).
    pub store: Arc<TableStore>,
    /// Most rows it may hold.
    pub max_rows: usize,
    /// Most bytes its rows may take.
    pub max_bytes: usize,
    /// The column whose time a row's version is valid from (`WITH (version_time = 'col')`):
    /// a temporal join starts the row's version then, if that is after the stream's
    /// watermark when the row changes.
    pub version_time: Option<usize>,
    /// The statement that created it, for persistence.
    pub ddl: sq::CreateTable,
}

impl TableDef {
    /// Validates a `CREATE TABLE` and builds the table's definition (with no rows).
    pub fn try_new(ddl: &sq::CreateTable) -> Result<TableDef> {
        let name = normalize_object(&ddl.name);
        let refuse = |what: &str| {
            Err(Error::NotSupported(format!(
                "CREATE TABLE ... {what} is not supported; a table is declared as \
                 CREATE TABLE name (column type, ..., PRIMARY KEY (columns)) \
                 [WITH (max_rows = n, max_bytes = n, version_time = 'column')]"
            )))
        };
        if ddl.query.is_some() {
            return refuse("AS SELECT");
        }
        if ddl.like.is_some() || ddl.clone.is_some() {
            return refuse("LIKE");
        }
        if ddl.or_replace || ddl.external || ddl.temporary {
            return refuse("with OR REPLACE, EXTERNAL or TEMPORARY");
        }
        if ddl.columns.is_empty() {
            return Err(Error::plan(
                sqlstate::INVALID_TABLE_DEFINITION,
                format!("table \"{name}\" must have at least one column"),
            ));
        }
        let mut names: Vec<String> = Vec::new();
        let mut not_null = Vec::new();
        let mut key: Vec<String> = Vec::new();
        let mut types = Vec::new();
        for c in &ddl.columns {
            let col = normalize(&c.name);
            if names.contains(&col) {
                return Err(Error::plan(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{col}\" specified more than once"),
                ));
            }
            let mut nn = false;
            for o in &c.options {
                match &o.option {
                    sq::ColumnOption::NotNull => nn = true,
                    sq::ColumnOption::Null => {}
                    sq::ColumnOption::PrimaryKey(_) => {
                        if !key.is_empty() {
                            return Err(Error::plan(
                                sqlstate::INVALID_TABLE_DEFINITION,
                                format!(
                                    "multiple primary keys for table \"{name}\" are not allowed"
                                ),
                            ));
                        }
                        key.push(col.clone());
                    }
                    other => {
                        return Err(Error::NotSupported(format!(
                            "column option {other} is not supported; use NOT NULL and \
                             PRIMARY KEY"
                        )))
                    }
                }
            }
            types.push(arrow_type(&c.data_type)?);
            names.push(col);
            not_null.push(nn);
        }
        for constraint in &ddl.constraints {
            match constraint {
                sq::TableConstraint::PrimaryKey(pk) => {
                    if !key.is_empty() {
                        return Err(Error::plan(
                            sqlstate::INVALID_TABLE_DEFINITION,
                            format!("multiple primary keys for table \"{name}\" are not allowed"),
                        ));
                    }
                    for ic in &pk.columns {
                        let sq::Expr::Identifier(id) = &ic.column.expr else {
                            return Err(Error::plan(
                                sqlstate::SYNTAX_ERROR,
                                format!("a primary key lists columns, not {}", ic.column.expr),
                            )
                            .at_span(ic.column.expr.span()));
                        };
                        key.push(normalize(id));
                    }
                }
                other => {
                    return Err(Error::NotSupported(format!(
                        "table constraint {other} is not supported; a table has one PRIMARY KEY"
                    )))
                }
            }
        }
        if key.is_empty() {
            return Err(Error::plan(
                sqlstate::INVALID_TABLE_DEFINITION,
                format!(
                    "table \"{name}\" needs a PRIMARY KEY: reference tables are read by key \
                     (lookup joins, IN (SELECT ...)) and changed by key (upserts)"
                ),
            ));
        }
        let mut key_idx = Vec::with_capacity(key.len());
        for k in &key {
            let Some(i) = names.iter().position(|n| n == k) else {
                return Err(Error::plan(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{k}\" named in key does not exist"),
                ));
            };
            if key_idx.contains(&i) {
                return Err(Error::plan(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{k}\" appears twice in primary key constraint"),
                ));
            }
            key_idx.push(i);
        }
        let fields: Vec<Field> = names
            .iter()
            .zip(types)
            .enumerate()
            .map(|(i, (n, t))| Field::new(n, t, !(not_null[i] || key_idx.contains(&i))))
            .collect();
        let (mut max_rows, mut max_bytes) = (
            crate::limits::DEFAULT_TABLE_MAX_ROWS,
            crate::limits::DEFAULT_TABLE_MAX_BYTES,
        );
        let mut version_time = None;
        for (k, v) in options(&ddl.table_options)? {
            if k == "version_time" {
                let col = v.to_lowercase();
                let Some(i) = names.iter().position(|n| *n == col) else {
                    return Err(Error::plan(
                        sqlstate::UNDEFINED_COLUMN,
                        format!("version_time column \"{col}\" does not exist in table \"{name}\""),
                    ));
                };
                if !matches!(
                    fields[i].data_type(),
                    datafusion::arrow::datatypes::DataType::Timestamp(_, _)
                ) {
                    return Err(Error::plan(
                        sqlstate::DATATYPE_MISMATCH,
                        format!(
                            "version_time column \"{col}\" of table \"{name}\" is {}, not a \
                             timestamp",
                            crate::sources::value::type_name(fields[i].data_type())
                        ),
                    ));
                }
                version_time = Some(i);
                continue;
            }
            let n = v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::plan(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("{k} must be a positive whole number, not \"{v}\""),
                )
            });
            match k.as_str() {
                "max_rows" => max_rows = n?,
                "max_bytes" => max_bytes = n?,
                other => {
                    return Err(Error::plan(
                        sqlstate::SYNTAX_ERROR,
                        format!(
                            "unknown table option \"{other}\"; known: max_rows, max_bytes, \
                             version_time"
                        ),
                    ))
                }
            }
        }
        let store = TableStore::try_new(&name, Arc::new(Schema::new(fields)), key_idx)?;
        Ok(TableDef {
            name,
            store: Arc::new(store),
            max_rows,
            max_bytes,
            version_time,
            ddl: ddl.clone(),
        })
    }
}

/// `WITH (key = value, ...)` as lower-case keys and unquoted values.
fn options(opts: &sq::CreateTableOptions) -> Result<Vec<(String, String)>> {
    let list = match opts {
        sq::CreateTableOptions::None => return Ok(vec![]),
        sq::CreateTableOptions::With(l) => l,
        other => {
            return Err(Error::NotSupported(format!(
                "table options {other} are not supported; use WITH (max_rows = n)"
            )))
        }
    };
    list.iter()
        .map(|o| match o {
            sq::SqlOption::KeyValue { key, value } => {
                let v = match value {
                    sq::Expr::Value(v) => match &v.value {
                        sq::Value::SingleQuotedString(s) => s.clone(),
                        sq::Value::Number(n, _) => n.clone(),
                        other => other.to_string(),
                    },
                    other => other.to_string(),
                };
                Ok((key.value.to_lowercase(), v))
            }
            other => Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("expected key = value in WITH, found {other}"),
            )),
        })
        .collect()
}
