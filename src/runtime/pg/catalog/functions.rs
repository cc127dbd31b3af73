//! The functions the catalog queries of psql, drivers and GUIs call (`format_type`,
//! `pg_get_viewdef`, `has_table_privilege`, `quote_ident`, ...), answered row by row.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature};
use datafusion::scalar::ScalarValue;

use super::{relation_oid, type_oid, OWNER, TYPES};

/// The functions the catalog queries of psql and drivers call, with what they return.
pub(super) const FUNCTIONS: [(&str, DataType); 38] = [
    ("has_schema_privilege", DataType::Boolean),
    ("has_database_privilege", DataType::Boolean),
    ("has_table_privilege", DataType::Boolean),
    ("has_column_privilege", DataType::Boolean),
    ("has_any_column_privilege", DataType::Boolean),
    ("has_function_privilege", DataType::Boolean),
    ("pg_size_pretty", DataType::Utf8),
    ("pg_table_size", DataType::Int64),
    ("pg_total_relation_size", DataType::Int64),
    ("pg_relation_size", DataType::Int64),
    ("pg_database_size", DataType::Int64),
    ("pg_indexes_size", DataType::Int64),
    ("pg_stat_get_numscans", DataType::Int64),
    ("array_to_string", DataType::Utf8),
    ("to_regtype", DataType::Int64),
    ("to_regclass", DataType::Int64),
    ("format_type", DataType::Utf8),
    ("pg_get_userbyid", DataType::Utf8),
    ("pg_table_is_visible", DataType::Boolean),
    ("pg_type_is_visible", DataType::Boolean),
    ("pg_function_is_visible", DataType::Boolean),
    ("pg_is_other_temp_schema", DataType::Boolean),
    ("pg_my_temp_schema", DataType::Int64),
    ("pg_get_viewdef", DataType::Utf8),
    ("pg_get_expr", DataType::Utf8),
    ("pg_get_indexdef", DataType::Utf8),
    ("pg_get_constraintdef", DataType::Utf8),
    ("pg_get_triggerdef", DataType::Utf8),
    ("pg_get_partkeydef", DataType::Utf8),
    ("pg_get_function_result", DataType::Utf8),
    ("pg_get_function_arguments", DataType::Utf8),
    ("pg_get_function_sqlbody", DataType::Utf8),
    ("pg_tablespace_location", DataType::Utf8),
    ("obj_description", DataType::Utf8),
    ("col_description", DataType::Utf8),
    ("shobj_description", DataType::Utf8),
    ("pg_encoding_to_char", DataType::Utf8),
    ("quote_ident", DataType::Utf8),
];

/// One catalog function, answered row by row (catalog queries read a few rows).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct CatalogFn {
    pub(super) name: &'static str,
    pub(super) returns: DataType,
    pub(super) signature: Signature,
    /// Queries' definitions by oid, for `pg_get_viewdef`.
    pub(super) definitions: Arc<BTreeMap<i64, String>>,
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
            "has_table_privilege"
            | "has_schema_privilege"
            | "has_database_privilege"
            | "has_column_privilege"
            | "has_any_column_privilege"
            | "has_function_privilege" => ScalarValue::Boolean(Some(true)),
            "pg_is_other_temp_schema" => ScalarValue::Boolean(Some(false)),
            "pg_my_temp_schema" | "pg_stat_get_numscans" => ScalarValue::Int64(Some(0)),
            "quote_ident" => ScalarValue::Utf8(text(0).map(|t| quote_ident(&t))),
            "pg_get_viewdef" => {
                ScalarValue::Utf8(int(0).and_then(|oid| self.definitions.get(&oid).cloned()))
            }
            "pg_encoding_to_char" => ScalarValue::from("UTF8"),
            // Streams and queries keep their rows in memory and in the ingest log, not in
            // relation files.
            "pg_relation_size"
            | "pg_table_size"
            | "pg_total_relation_size"
            | "pg_database_size"
            | "pg_indexes_size" => ScalarValue::Int64(Some(0)),
            "pg_size_pretty" => ScalarValue::Utf8(int(0).map(|b| format!("{b} bytes"))),
            _ => ScalarValue::try_from(&self.returns).unwrap_or(ScalarValue::Utf8(None)),
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

/// `quote_ident(name)`: the name as it must be written in SQL to mean itself, in double
/// quotes (with inner quotes doubled) unless it is a lower-case identifier that is no
/// keyword.
pub(super) fn quote_ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$')
        && !super::keywords::is_reserved(name);
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_ident_quotes_what_postgresql_quotes() {
        assert_eq!(quote_ident("proc_events"), "proc_events");
        assert_eq!(quote_ident("Mixed"), "\"Mixed\"");
        assert_eq!(quote_ident("a b"), "\"a b\"");
        assert_eq!(quote_ident("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quote_ident("select"), "\"select\"");
        assert_eq!(quote_ident("1x"), "\"1x\"");
    }
}
