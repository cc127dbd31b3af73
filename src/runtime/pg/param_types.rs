//! The types PostgreSQL gives a statement's `$n` placeholders where DataFusion's inference
//! finds none: a placeholder that is a `LIMIT` or `OFFSET` count is a `bigint` (knex's
//! `.limit()` and `.first()`, node pg's `LIMIT $1` send it as untyped text).

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::arrow::datatypes::DataType;
use datafusion::sql::sqlparser::ast::{LimitClause, Query, Statement, Visit, Visitor};

use crate::sources::param::placeholder_number;

/// The type of each `$n` (by number) that `stmt` puts where only one type fits.
pub(in crate::runtime) fn hinted(stmt: &Statement) -> HashMap<usize, DataType> {
    let mut hints = Hints::default();
    let _ = stmt.visit(&mut hints);
    hints.types
}

#[derive(Default)]
struct Hints {
    types: HashMap<usize, DataType>,
}

impl Visitor for Hints {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        let counts: Vec<_> = match &query.limit_clause {
            Some(LimitClause::LimitOffset { limit, offset, .. }) => limit
                .iter()
                .chain(offset.as_ref().map(|o| &o.value))
                .collect(),
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => vec![offset, limit],
            None => vec![],
        };
        for n in counts.into_iter().filter_map(placeholder_number) {
            self.types.insert(n, DataType::Int64);
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn hints(sql: &str) -> Vec<(usize, DataType)> {
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        let mut v: Vec<_> = hinted(&stmt).into_iter().collect();
        v.sort_by_key(|(n, _)| *n);
        v
    }

    #[test]
    fn limit_and_offset_counts_are_bigint() {
        assert_eq!(
            hints("SELECT * FROM s WHERE host = $1 LIMIT $2 OFFSET $3"),
            vec![(2, DataType::Int64), (3, DataType::Int64)]
        );
        assert_eq!(
            hints("SELECT * FROM (SELECT * FROM s LIMIT $1) t"),
            vec![(1, DataType::Int64)]
        );
        assert!(hints("SELECT * FROM s WHERE amount > $1").is_empty());
    }
}
