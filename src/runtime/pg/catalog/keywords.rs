//! `pg_get_keywords()`: the SQL keywords saql's parser knows, with PostgreSQL's reserved ones
//! marked reserved (pgJDBC's `getSQLKeywords` and DBeaver's highlighter read it), and
//! whether a name must be quoted because it is reserved (`quote_ident`).

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;

/// PostgreSQL's reserved keywords (category R of `pg_get_keywords()`).
const RESERVED: [&str; 78] = [
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "current_catalog",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "localtime",
    "localtimestamp",
    "not",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "session_user",
    "some",
    "symmetric",
    "system_user",
    "table",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

/// Whether `word` (lower case) is reserved in PostgreSQL, so that it must be quoted as a name.
pub(super) fn is_reserved(word: &str) -> bool {
    RESERVED.contains(&word)
}

/// The `pg_get_keywords()` table function.
#[derive(Debug)]
pub(super) struct Keywords;

impl TableFunctionImpl for Keywords {
    fn call_with_args(
        &self,
        _args: TableFunctionArgs,
    ) -> datafusion::error::Result<Arc<dyn TableProvider>> {
        let words: BTreeSet<String> = ALL_KEYWORDS
            .iter()
            .map(|w| w.to_lowercase())
            .chain(RESERVED.iter().map(|w| w.to_string()))
            .collect();
        let reserved: Vec<bool> = words.iter().map(|w| is_reserved(w)).collect();
        let code = |r: &bool| if *r { "R" } else { "U" };
        let desc = |r: &bool| if *r { "reserved" } else { "unreserved" };
        let schema = Arc::new(Schema::new(vec![
            Field::new("word", DataType::Utf8, false),
            Field::new("catcode", DataType::Utf8, false),
            Field::new("barelabel", DataType::Boolean, false),
            Field::new("catdesc", DataType::Utf8, false),
            Field::new("baredesc", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(words.iter())),
                Arc::new(StringArray::from_iter_values(reserved.iter().map(code))),
                Arc::new(BooleanArray::from(vec![true; words.len()])),
                Arc::new(StringArray::from_iter_values(reserved.iter().map(desc))),
                Arc::new(StringArray::from_iter_values(
                    words.iter().map(|_| "can be bare label"),
                )),
            ],
        )?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}
