//! saql's SQL dialect: sqlparser's `GenericDialect` (which parses MATCH_RECOGNIZE and keeps
//! PostgreSQL syntax such as `::` casts), except that the words that start saql's trailing
//! clauses (`OUTLIER`, `INVARIANT`, `EMIT`, `SUPPRESS`) are never taken as a table alias, so
//! `FROM s OUTLIER ...` parses as a clause, and the right operand of `IS [NOT] DISTINCT FROM`
//! ends where PostgreSQL's does (sqlparser 0.62 reads it to the end of the expression, so
//! `a IS DISTINCT FROM b AND c` became `a IS DISTINCT FROM (b AND c)`; fixed upstream in
//! apache/datafusion-sqlparser-rs#2436, after the version DataFusion 55 uses). Everything
//! else is delegated to `GenericDialect`, whose type id it reports so that sqlparser's
//! dialect checks treat it as generic.

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::Expr;
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

/// Words that begin a saql clause after a query.
pub const CLAUSE_WORDS: &[&str] = &["OUTLIER", "INVARIANT", "EMIT", "SUPPRESS"];

/// The dialect saql parses with.
#[derive(Debug, Default)]
pub struct SaqlDialect(GenericDialect);

fn is_clause_word(token: &Token) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none()
        && CLAUSE_WORDS.iter().any(|c| w.value.eq_ignore_ascii_case(c)))
}

/// Whether `token` is the keyword `kw`.
fn is_keyword(token: &Token, kw: Keyword) -> bool {
    matches!(token, Token::Word(w) if w.keyword == kw)
}

impl Dialect for SaqlDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<GenericDialect>()
    }

    /// `IS [NOT] DISTINCT FROM`, with its right operand read at the precedence of `IS`: the
    /// operators that bind tighter (comparisons, arithmetic) are part of it, `AND`, `OR` and
    /// a further `IS` are not. The rest is sqlparser's.
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        let [is, t1, t2, t3] = parser.peek_tokens::<4>();
        if !is_keyword(&is, Keyword::IS) {
            return self.0.parse_infix(parser, expr, precedence);
        }
        let negated = if is_keyword(&t1, Keyword::DISTINCT) && is_keyword(&t2, Keyword::FROM) {
            false
        } else if is_keyword(&t1, Keyword::NOT)
            && is_keyword(&t2, Keyword::DISTINCT)
            && is_keyword(&t3, Keyword::FROM)
        {
            true
        } else {
            return self.0.parse_infix(parser, expr, precedence);
        };
        let words: &[Keyword] = if negated {
            &[Keyword::IS, Keyword::NOT, Keyword::DISTINCT, Keyword::FROM]
        } else {
            &[Keyword::IS, Keyword::DISTINCT, Keyword::FROM]
        };
        // The words were peeked above: they are there to take.
        let taken = parser.parse_keywords(words);
        debug_assert!(taken);
        let right = match parser.parse_subexpr(precedence) {
            Ok(right) => Box::new(right),
            Err(e) => return Some(Err(e)),
        };
        let left = Box::new(expr.clone());
        Some(Ok(if negated {
            Expr::IsNotDistinctFrom(left, right)
        } else {
            Expr::IsDistinctFrom(left, right)
        }))
    }

    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        if !explicit && is_clause_word(&parser.get_current_token().token) {
            return false;
        }
        self.0.is_table_factor_alias(explicit, kw, parser)
    }

    fn is_select_item_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        if !explicit && is_clause_word(&parser.get_current_token().token) {
            return false;
        }
        self.0.is_select_item_alias(explicit, kw, parser)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.0.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.0.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.0.is_identifier_part(ch)
    }

    fn supports_unicode_string_literal(&self) -> bool {
        self.0.supports_unicode_string_literal()
    }

    fn supports_partition_by_after_order_by(&self) -> bool {
        self.0.supports_partition_by_after_order_by()
    }

    fn supports_array_join_syntax(&self) -> bool {
        self.0.supports_array_join_syntax()
    }

    fn supports_group_by_expr(&self) -> bool {
        self.0.supports_group_by_expr()
    }

    fn supports_group_by_with_modifier(&self) -> bool {
        self.0.supports_group_by_with_modifier()
    }

    fn supports_left_associative_joins_without_parens(&self) -> bool {
        self.0.supports_left_associative_joins_without_parens()
    }

    fn supports_connect_by(&self) -> bool {
        self.0.supports_connect_by()
    }

    fn supports_match_recognize(&self) -> bool {
        self.0.supports_match_recognize()
    }

    fn supports_pipe_operator(&self) -> bool {
        self.0.supports_pipe_operator()
    }

    fn supports_start_transaction_modifier(&self) -> bool {
        self.0.supports_start_transaction_modifier()
    }

    fn supports_window_function_null_treatment_arg(&self) -> bool {
        self.0.supports_window_function_null_treatment_arg()
    }

    fn supports_dictionary_syntax(&self) -> bool {
        self.0.supports_dictionary_syntax()
    }

    fn supports_window_clause_named_window_reference(&self) -> bool {
        self.0.supports_window_clause_named_window_reference()
    }

    fn supports_parenthesized_set_variables(&self) -> bool {
        self.0.supports_parenthesized_set_variables()
    }

    fn supports_select_wildcard_except(&self) -> bool {
        self.0.supports_select_wildcard_except()
    }

    fn support_map_literal_syntax(&self) -> bool {
        self.0.support_map_literal_syntax()
    }

    fn allow_extract_custom(&self) -> bool {
        self.0.allow_extract_custom()
    }

    fn allow_extract_single_quotes(&self) -> bool {
        self.0.allow_extract_single_quotes()
    }

    fn supports_extract_comma_syntax(&self) -> bool {
        self.0.supports_extract_comma_syntax()
    }

    fn supports_create_view_comment_syntax(&self) -> bool {
        self.0.supports_create_view_comment_syntax()
    }

    fn supports_parens_around_table_factor(&self) -> bool {
        self.0.supports_parens_around_table_factor()
    }

    fn supports_values_as_table_factor(&self) -> bool {
        self.0.supports_values_as_table_factor()
    }

    fn supports_create_index_with_clause(&self) -> bool {
        self.0.supports_create_index_with_clause()
    }

    fn supports_explain_with_utility_options(&self) -> bool {
        self.0.supports_explain_with_utility_options()
    }

    fn supports_limit_comma(&self) -> bool {
        self.0.supports_limit_comma()
    }

    fn supports_update_order_by(&self) -> bool {
        self.0.supports_update_order_by()
    }

    fn supports_from_first_select(&self) -> bool {
        self.0.supports_from_first_select()
    }

    fn supports_projection_trailing_commas(&self) -> bool {
        self.0.supports_projection_trailing_commas()
    }

    fn supports_asc_desc_in_column_definition(&self) -> bool {
        self.0.supports_asc_desc_in_column_definition()
    }

    fn supports_try_convert(&self) -> bool {
        self.0.supports_try_convert()
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        self.0.supports_bitwise_shift_operators()
    }

    fn supports_comment_on(&self) -> bool {
        self.0.supports_comment_on()
    }

    /// `JOIN t FOR SYSTEM_TIME AS OF s.ts` (temporal joins).
    fn supports_table_versioning(&self) -> bool {
        true
    }

    fn supports_load_extension(&self) -> bool {
        self.0.supports_load_extension()
    }

    fn supports_named_fn_args_with_assignment_operator(&self) -> bool {
        self.0.supports_named_fn_args_with_assignment_operator()
    }

    fn supports_struct_literal(&self) -> bool {
        self.0.supports_struct_literal()
    }

    fn supports_empty_projections(&self) -> bool {
        self.0.supports_empty_projections()
    }

    fn supports_nested_comments(&self) -> bool {
        self.0.supports_nested_comments()
    }

    fn supports_multiline_comment_hints(&self) -> bool {
        self.0.supports_multiline_comment_hints()
    }

    fn supports_user_host_grantee(&self) -> bool {
        self.0.supports_user_host_grantee()
    }

    fn supports_string_escape_constant(&self) -> bool {
        self.0.supports_string_escape_constant()
    }

    fn supports_array_typedef_with_brackets(&self) -> bool {
        self.0.supports_array_typedef_with_brackets()
    }

    fn supports_match_against(&self) -> bool {
        self.0.supports_match_against()
    }

    fn supports_set_names(&self) -> bool {
        self.0.supports_set_names()
    }

    fn supports_comma_separated_set_assignments(&self) -> bool {
        self.0.supports_comma_separated_set_assignments()
    }

    fn supports_filter_during_aggregation(&self) -> bool {
        self.0.supports_filter_during_aggregation()
    }

    fn supports_select_wildcard_exclude(&self) -> bool {
        self.0.supports_select_wildcard_exclude()
    }

    fn supports_data_type_signed_suffix(&self) -> bool {
        self.0.supports_data_type_signed_suffix()
    }

    fn supports_interval_options(&self) -> bool {
        self.0.supports_interval_options()
    }

    fn supports_quote_delimited_string(&self) -> bool {
        self.0.supports_quote_delimited_string()
    }

    fn supports_select_wildcard_replace(&self) -> bool {
        self.0.supports_select_wildcard_replace()
    }

    fn supports_select_wildcard_ilike(&self) -> bool {
        self.0.supports_select_wildcard_ilike()
    }

    fn supports_select_wildcard_rename(&self) -> bool {
        self.0.supports_select_wildcard_rename()
    }

    fn supports_optimize_table(&self) -> bool {
        self.0.supports_optimize_table()
    }

    fn supports_install(&self) -> bool {
        self.0.supports_install()
    }

    fn supports_detach(&self) -> bool {
        self.0.supports_detach()
    }

    fn supports_prewhere(&self) -> bool {
        self.0.supports_prewhere()
    }

    fn supports_with_fill(&self) -> bool {
        self.0.supports_with_fill()
    }

    fn supports_limit_by(&self) -> bool {
        self.0.supports_limit_by()
    }

    fn supports_interpolate(&self) -> bool {
        self.0.supports_interpolate()
    }

    fn supports_settings(&self) -> bool {
        self.0.supports_settings()
    }

    fn supports_select_format(&self) -> bool {
        self.0.supports_select_format()
    }

    fn supports_comment_optimizer_hint(&self) -> bool {
        self.0.supports_comment_optimizer_hint()
    }

    fn supports_constraint_keyword_without_name(&self) -> bool {
        self.0.supports_constraint_keyword_without_name()
    }

    fn supports_key_column_option(&self) -> bool {
        self.0.supports_key_column_option()
    }

    fn supports_comma_separated_trim(&self) -> bool {
        self.0.supports_comma_separated_trim()
    }

    fn supports_cte_without_as(&self) -> bool {
        self.0.supports_cte_without_as()
    }

    fn supports_select_item_multi_column_alias(&self) -> bool {
        self.0.supports_select_item_multi_column_alias()
    }

    fn supports_xml_expressions(&self) -> bool {
        self.0.supports_xml_expressions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::{SetExpr, Statement, TableFactor};

    #[test]
    fn clause_words_are_not_aliases_but_other_words_are() {
        let dialect = SaqlDialect::default();
        let mut parser = Parser::new(&dialect)
            .try_with_sql("SELECT a FROM s OUTLIER")
            .unwrap();
        let q = parser.parse_query().unwrap();
        let SetExpr::Select(sel) = q.body.as_ref() else {
            panic!("select")
        };
        let TableFactor::Table { alias, .. } = &sel.from[0].relation else {
            panic!("table")
        };
        assert!(alias.is_none());
        assert!(is_clause_word(&parser.peek_token().token));

        let stmt = Parser::parse_sql(&dialect, "SELECT x::BIGINT FROM s t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.x AS ax PATTERN (a) DEFINE a AS a.x > 0)").unwrap();
        assert!(matches!(stmt[0], Statement::Query(_)));
    }

    /// The WHERE of `SELECT * FROM s WHERE <predicate>`, parsed with saql's dialect.
    fn predicate(sql: &str) -> Expr {
        let dialect = SaqlDialect::default();
        let stmt = Parser::parse_sql(&dialect, &format!("SELECT * FROM s WHERE {sql}")).unwrap();
        let Statement::Query(q) = &stmt[0] else {
            panic!("query")
        };
        let SetExpr::Select(sel) = q.body.as_ref() else {
            panic!("select")
        };
        sel.selection.clone().unwrap()
    }

    #[test]
    fn is_distinct_from_binds_tighter_than_and_or_looser_than_comparisons() {
        use datafusion::sql::sqlparser::ast::BinaryOperator as Op;
        // sqlparser 0.62 alone reads `a IS NOT DISTINCT FROM (b AND c = 1)`.
        let Expr::BinaryOp { left, op, right } = predicate("a IS NOT DISTINCT FROM b AND c = 1")
        else {
            panic!("AND at the top")
        };
        assert_eq!(op, Op::And);
        assert_eq!(left.to_string(), "a IS NOT DISTINCT FROM b");
        assert_eq!(right.to_string(), "c = 1");
        assert!(matches!(*left, Expr::IsNotDistinctFrom(..)));

        let Expr::BinaryOp { left, op, .. } = predicate("a IS DISTINCT FROM b OR c") else {
            panic!("OR at the top")
        };
        assert_eq!(op, Op::Or);
        assert!(matches!(*left, Expr::IsDistinctFrom(..)));

        // Arithmetic and comparisons stay in the right operand, as in PostgreSQL.
        let Expr::IsDistinctFrom(_, right) = predicate("a IS DISTINCT FROM b + 1") else {
            panic!("IS DISTINCT FROM at the top")
        };
        assert_eq!(right.to_string(), "b + 1");
        let Expr::IsNotDistinctFrom(_, right) = predicate("a IS NOT DISTINCT FROM b = c") else {
            panic!("IS NOT DISTINCT FROM at the top")
        };
        assert_eq!(right.to_string(), "b = c");

        // Both sides of AND, and the other IS forms, unchanged.
        let Expr::BinaryOp { left, right, .. } =
            predicate("a IS NOT DISTINCT FROM b AND c IS DISTINCT FROM d")
        else {
            panic!("AND at the top")
        };
        assert!(matches!(*left, Expr::IsNotDistinctFrom(..)));
        assert!(matches!(*right, Expr::IsDistinctFrom(..)));
        assert!(matches!(predicate("a IS NOT NULL"), Expr::IsNotNull(_)));
        assert!(matches!(
            predicate("a IS NOT TRUE AND b"),
            Expr::BinaryOp { .. }
        ));
    }
}
