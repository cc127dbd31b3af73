//! PostgreSQL's syntax in the catalog queries of psql and drivers, rewritten into what
//! DataFusion plans with the same meaning: `pg_catalog.f(...)` calls, `OPERATOR(pg_catalog.~)`,
//! `COLLATE pg_catalog.default`, `= ANY (ARRAY[...])`, casts to the oid alias types and to `pg_catalog.text`, catalog
//! tables named without their schema, and scalar subqueries over catalog tables that are always
//! empty (their value is NULL, and DataFusion cannot decorrelate some of them).
//! In a query that reads the catalog, `ARRAY(SELECT ...)` is read as the empty array all of
//! saql's catalog arrays are.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, visit_relations, visit_relations_mut, AccessExpr,
    BinaryOperator, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr,
    Ident, ObjectName, ObjectNamePart, SelectItem, SetExpr, SetOperator, Statement, TableFactor,
    TableWithJoins, Value,
};

use crate::runtime::pg::array_literal;
use crate::runtime::pg::catalog::{is_catalog_table, is_empty_table, SCHEMA};
use crate::runtime::statements::adhoc::pg_expr_name;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;

/// Rewrites `stmt` in place; `taken` says whether a stream or query has a name, which then
/// wins over a catalog table's.
pub fn rewrite(stmt: &mut Statement, taken: impl Fn(&str) -> bool) {
    qualify_catalog_tables(stmt, taken);
    let catalog = reads_catalog(stmt);
    if catalog {
        if let Statement::Query(q) = stmt {
            empty_query(q);
        }
    }
    // Before the casts to oid types are dropped: `x::regtype::text` is the type's name.
    let _ = visit_expressions_mut(stmt, |e| {
        if let Some(oid) = regtype_as_text(e) {
            *e = call("format_type", oid);
        }
        ControlFlow::<()>::Continue(())
    });
    let _ = visit_expressions_mut(stmt, |e| {
        rewrite_expr(e, catalog);
        ControlFlow::<()>::Continue(())
    });
}

/// The `x` of `x::regtype::text` (pgcli's `att.atttypid::regtype::text`, psql's
/// `c.reloftype::pg_catalog.regtype::pg_catalog.text`), where `x` is not a literal name.
fn regtype_as_text(e: &Expr) -> Option<Expr> {
    let Expr::Cast {
        expr, data_type, ..
    } = e
    else {
        return None;
    };
    let name = |t: &DataType| {
        let name = t.to_string().to_lowercase();
        name.strip_prefix("pg_catalog.")
            .unwrap_or(&name)
            .to_string()
    };
    if !matches!(name(data_type).as_str(), "text" | "varchar" | "name") {
        return None;
    }
    match expr.as_ref() {
        Expr::Cast {
            expr: inner,
            data_type,
            ..
        } if name(data_type) == "regtype" && !is_text_or_parameter(inner) => {
            Some(inner.as_ref().clone())
        }
        _ => None,
    }
}

fn rewrite_expr(e: &mut Expr, catalog: bool) {
    match e {
        Expr::Function(f) => {
            if let [ObjectNamePart::Identifier(schema), _] = f.name.0.as_slice() {
                if schema.value.eq_ignore_ascii_case(SCHEMA) {
                    f.name.0.remove(0);
                }
            }
            // Arrays are indexed from 1: the upper bound of dimension 1 is its length (a
            // bigint, as `generate_series` takes it).
            if f.name.to_string().eq_ignore_ascii_case("array_upper") {
                let mut length = f.clone();
                length.name = ObjectName::from(vec![Ident::new("array_length")]);
                *e = Expr::Cast {
                    kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
                    expr: Box::new(Expr::Function(length)),
                    data_type: DataType::BigInt(None),
                    array: false,
                    format: None,
                };
                return;
            }
            // The catalog's array columns (`reloptions`, ...) are all NULL.
            if catalog && f.name.to_string().eq_ignore_ascii_case("array_remove") {
                if let FunctionArguments::List(list) = &f.args {
                    if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) =
                        list.args.first()
                    {
                        *e = first.clone();
                        return;
                    }
                }
            }
            if f.name.to_string().eq_ignore_ascii_case("array_lower") {
                if let FunctionArguments::List(list) = &f.args {
                    let length = Expr::Function(datafusion::sql::sqlparser::ast::Function {
                        name: ObjectName::from(vec![Ident::new("array_length")]),
                        args: FunctionArguments::List(list.clone()),
                        ..f.clone()
                    });
                    *e = Expr::Case {
                        case_token: AttachedToken::empty(),
                        end_token: AttachedToken::empty(),
                        operand: None,
                        conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
                            condition: Expr::BinaryOp {
                                left: Box::new(length),
                                op: BinaryOperator::Gt,
                                right: Box::new(Expr::value(Value::Number("0".into(), false))),
                            },
                            result: Expr::value(Value::Number("1".into(), false)),
                        }],
                        else_result: None,
                    };
                    return;
                }
            }
            // `ARRAY(SELECT ...)`, which DataFusion lacks, builds the catalog's arrays (options,
            // the roles of a policy), and saql's are all empty.
            if catalog
                && matches!(f.args, FunctionArguments::Subquery(_))
                && f.name.to_string().eq_ignore_ascii_case("array")
            {
                *e = Expr::value(Value::Null);
            }
        }
        Expr::BinaryOp { op, .. } => {
            if let BinaryOperator::PGCustomBinaryOperator(path) = op {
                if let Some(plain) = path.last().and_then(|o| pg_operator(o)) {
                    *op = plain;
                }
            }
        }
        // `x = ANY (ARRAY[a, b])` is `x IN (a, b)`, `x <> ALL (ARRAY[...])` is `NOT IN`; the
        // same for a text array literal (`x = ANY ('{a,b}')`, `'{a,b}'::text[]`).
        Expr::AnyOp {
            left,
            compare_op: BinaryOperator::Eq,
            right,
            ..
        }
        | Expr::AllOp {
            left,
            compare_op: BinaryOperator::NotEq,
            right,
        } if in_list_of(right).is_some() => {
            let list = in_list_of(right).unwrap_or_default();
            let left = std::mem::replace(left, Box::new(Expr::value(Value::Null)));
            let negated = matches!(e, Expr::AllOp { .. });
            *e = Expr::InList {
                expr: left,
                list,
                negated,
            };
        }
        // `x = ANY (c.reloptions)`: the catalog's array columns are all NULL, and so is the
        // comparison.
        Expr::AnyOp {
            left,
            compare_op: BinaryOperator::Eq,
            right,
            ..
        } if catalog
            && matches!(
                right.as_ref(),
                Expr::Identifier(_) | Expr::CompoundIdentifier(_)
            ) =>
        {
            let left = std::mem::replace(left, Box::new(Expr::value(Value::Null)));
            let right = std::mem::replace(right, Box::new(Expr::value(Value::Null)));
            *e = Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            };
        }
        // Grafana's query builder lists the tables of the schemas on the search path with a
        // subquery that splits `current_setting('search_path')` into an array and reads it
        // back row by row: that set is saql's search path, `"$user", public`.
        Expr::InSubquery {
            expr,
            subquery,
            negated,
        } if catalog
            && subquery
                .to_string()
                .to_lowercase()
                .contains("current_setting('search_path')") =>
        {
            let user = Expr::Function(datafusion::sql::sqlparser::ast::Function {
                name: ObjectName::from(vec![Ident::new("current_user")]),
                uses_odbc_syntax: false,
                parameters: FunctionArguments::None,
                args: FunctionArguments::List(
                    datafusion::sql::sqlparser::ast::FunctionArgumentList {
                        duplicate_treatment: None,
                        args: vec![],
                        clauses: vec![],
                    },
                ),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            });
            let expr = std::mem::replace(expr, Box::new(Expr::value(Value::Null)));
            *e = Expr::InList {
                expr,
                list: vec![
                    user,
                    Expr::value(Value::SingleQuotedString("public".into())),
                ],
                negated: *negated,
            };
        }
        // `(composite).field`: saql's catalog has no composite values (pgJDBC's
        // `(information_schema._pg_expandarray(i.indkey)).x` reads an index, and there are none).
        Expr::CompoundFieldAccess { access_chain, .. }
            if catalog && matches!(access_chain.first(), Some(AccessExpr::Dot(_))) =>
        {
            *e = Expr::value(Value::Null);
        }
        // DataFusion's LIKE escapes with `\` only: a pattern of literals with another escape
        // character is rewritten to escape with `\`.
        Expr::Like {
            pattern,
            escape_char,
            ..
        }
        | Expr::ILike {
            pattern,
            escape_char,
            ..
        } => {
            let escape = escape_char.as_ref().and_then(|v| match &v.value {
                Value::SingleQuotedString(c) if c.chars().count() == 1 => c.chars().next(),
                _ => None,
            });
            if let (Some(escape), Some(text)) = (escape, literal_text(pattern)) {
                if escape != '\\' {
                    **pattern =
                        Expr::value(Value::SingleQuotedString(backslash_escaped(&text, escape)));
                    *escape_char = None;
                }
            }
        }
        Expr::Collate { expr, .. } => {
            *e = std::mem::replace(expr.as_mut(), Expr::value(Value::Null));
        }
        Expr::Cast {
            expr, data_type, ..
        } => {
            let name = data_type.to_string().to_lowercase();
            let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
            match name {
                // `'name'::regclass` is the relation's oid; saql's oids are plain numbers. A
                // parameter cast so is a name too (SQLAlchemy's `CAST($1 AS REGCLASS)`).
                "regclass" if is_text_or_parameter(expr) => {
                    *e = call(
                        "to_regclass",
                        std::mem::replace(expr, Expr::value(Value::Null)),
                    )
                }
                "regtype" if is_text_or_parameter(expr) => {
                    *e = call(
                        "to_regtype",
                        std::mem::replace(expr, Expr::value(Value::Null)),
                    )
                }
                "regtype" | "regclass" | "regproc" | "regnamespace" | "oid" => {
                    *e = std::mem::replace(expr.as_mut(), Expr::value(Value::Null));
                }
                _ => {
                    if let DataType::Custom(n, _) = data_type {
                        if let Some(plain) = plain_type(n) {
                            *data_type = plain;
                        }
                    }
                }
            }
        }
        Expr::Subquery(q) => {
            if let SetExpr::Select(select) = q.body.as_mut() {
                let mut empty = false;
                for from in &mut select.from {
                    empty |= from_is_empty(from);
                }
                if empty {
                    *e = Expr::value(Value::Null);
                } else if catalog && !aggregated(select) {
                    // A scalar subquery has at most one row, and DataFusion plans a correlated
                    // one only when it aggregates: `max` of its one row is that row.
                    if let [SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. }] =
                        select.projection.as_mut_slice()
                    {
                        *x = call("max", std::mem::replace(x, Expr::value(Value::Null)));
                    }
                }
            }
        }
        _ => {}
    }
}

/// Makes a select over an always-empty catalog table (inner-joined, not aggregated without
/// GROUP BY) into
/// `SELECT NULL AS name, ...` of it, with the same column names: its result has no rows
/// whatever it computes, and what it computes (statistics objects, publications, policies)
/// need not be plannable. Returns whether `body` has no rows.
fn empty_result(body: &mut SetExpr) -> bool {
    match body {
        SetExpr::SetOperation {
            op, left, right, ..
        } => {
            let (l, r) = (empty_result(left), empty_result(right));
            match op {
                SetOperator::Union => l && r,
                SetOperator::Intersect => l || r,
                _ => l,
            }
        }
        SetExpr::Query(q) => empty_query(q),
        SetExpr::Select(select) => {
            // Grouped rows of no rows are none; an aggregate without GROUP BY gives one row.
            let grouped =
                !matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty());
            let mut empty = false;
            for from in &mut select.from {
                empty |= from_is_empty(from);
            }
            if !empty || (!grouped && aggregated(select)) {
                return false;
            }
            let mut seen = std::collections::HashSet::new();
            // Beside a `*` (DBeaver's `e.oid, e.*`), a column stays itself: a NULL named
            // like it would make the name ambiguous.
            let wildcard = select.projection.iter().any(|item| {
                matches!(
                    item,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                )
            });
            for (i, item) in select.projection.iter_mut().enumerate() {
                if wildcard
                    && matches!(
                        item,
                        SelectItem::UnnamedExpr(Expr::Identifier(_) | Expr::CompoundIdentifier(_))
                    )
                {
                    continue;
                }
                let mut alias = match item {
                    SelectItem::UnnamedExpr(e) => {
                        let name = match &*e {
                            Expr::Identifier(i) => i.value.clone(),
                            Expr::CompoundIdentifier(parts) => {
                                parts.last().map(|i| i.value.clone()).unwrap_or_default()
                            }
                            e => pg_expr_name(e).unwrap_or_else(|| "?column?".into()),
                        };
                        Ident::with_quote('"', name)
                    }
                    SelectItem::ExprWithAlias { alias, .. } => alias.clone(),
                    _ => continue,
                };
                // PostgreSQL allows two columns of one name, DataFusion does not.
                if !seen.insert(alias.value.clone()) {
                    alias.value = format!("{}_{}", alias.value, i + 1);
                }
                *item = SelectItem::ExprWithAlias {
                    expr: Expr::value(Value::Null),
                    alias,
                };
            }
            select.selection = None;
            select.having = None;
            select.group_by = GroupByExpr::Expressions(vec![], vec![]);
            true
        }
        _ => false,
    }
}

/// Whether a select groups or calls an aggregate outside its subqueries.
fn aggregated(select: &datafusion::sql::sqlparser::ast::Select) -> bool {
    !matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty())
        || select.projection.iter().any(|item| {
            let e = match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                _ => return false,
            };
            // Aggregates inside a subquery do not aggregate this select.
            let mut e = e.clone();
            let _ = visit_expressions_mut(&mut e, |e| {
                if matches!(e, Expr::Subquery(_)) {
                    *e = Expr::value(Value::Null);
                }
                ControlFlow::<()>::Continue(())
            });
            let mut found = false;
            let _ = visit_expressions(&e, |e| {
                found |= matches!(e, Expr::Function(f) if AGGREGATES.contains(
                    &f.name.to_string().to_lowercase().as_str()));
                ControlFlow::<()>::Continue(())
            });
            found
        })
}

const AGGREGATES: [&str; 8] = [
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "bool_and",
    "bool_or",
    "string_agg",
];

/// The elements of a text array literal (`'{a,b}'`, also cast: `'{a,b}'::text[]`).
/// The elements of `ARRAY[...]` or of a text array literal, as an IN list.
fn in_list_of(e: &Expr) -> Option<Vec<Expr>> {
    if let Expr::Array(array) = e {
        return Some(array.elem.clone());
    }
    let values = array_literal(e)?;
    Some(
        values
            .into_iter()
            .map(|v| Expr::value(v.map_or(Value::Null, Value::SingleQuotedString)))
            .collect(),
    )
}

fn array_literal(e: &Expr) -> Option<Vec<Option<String>>> {
    match e {
        Expr::Nested(inner) => array_literal(inner),
        Expr::Cast {
            expr,
            data_type: DataType::Array(_) | DataType::Custom(..),
            ..
        } => array_literal(expr),
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => array_literal::parse(s),
            _ => None,
        },
        _ => None,
    }
}

/// The text of an expression made of string literals, casts and `||`.
fn literal_text(e: &Expr) -> Option<String> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        Expr::Nested(e) | Expr::Cast { expr: e, .. } => literal_text(e),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::StringConcat,
            right,
        } => Some(literal_text(left)? + &literal_text(right)?),
        _ => None,
    }
}

/// A LIKE pattern escaped with `escape` as the same pattern escaped with `\`.
fn backslash_escaped(pattern: &str, escape: char) -> String {
    let mut out = String::with_capacity(pattern.len() + 2);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == escape {
            out.push('\\');
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    out
}

/// PostgreSQL's operators that `OPERATOR(pg_catalog.op)` names, as plain operators.
fn pg_operator(op: &str) -> Option<BinaryOperator> {
    Some(match op {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "=" => BinaryOperator::Eq,
        "<>" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        "||" => BinaryOperator::StringConcat,
        _ => return None,
    })
}

/// `pg_catalog.text` and friends, as the plain type.
fn plain_type(name: &ObjectName) -> Option<DataType> {
    let [ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(ty)] = name.0.as_slice()
    else {
        return None;
    };
    if !schema.value.eq_ignore_ascii_case(SCHEMA) {
        return None;
    }
    Some(match ty.value.to_lowercase().as_str() {
        "text" | "name" | "varchar" | "char" => DataType::Text,
        "int2" => DataType::SmallInt(None),
        "int4" => DataType::Int(None),
        "int8" => DataType::BigInt(None),
        "bool" => DataType::Boolean,
        "float8" => DataType::DoublePrecision,
        _ => return None,
    })
}

/// A string literal, or a `$n` parameter (whose text a cast to a name type reads as a name).
fn is_text_or_parameter(e: &Expr) -> bool {
    matches!(e, Expr::Value(v)
        if matches!(v.value, Value::SingleQuotedString(_) | Value::Placeholder(_)))
}

fn call(name: &str, arg: Expr) -> Expr {
    Expr::Function(datafusion::sql::sqlparser::ast::Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(datafusion::sql::sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// Whether a FROM item has no rows: it is, or inner-joins, an always-empty catalog table or a
/// subquery without rows (which is made plannable on the way, see [`empty_result`]).
fn from_is_empty(from: &mut TableWithJoins) -> bool {
    use datafusion::sql::sqlparser::ast::JoinOperator as J;
    let empty = |t: &mut TableFactor| match t {
        TableFactor::Table { name, .. } => name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .is_some_and(|i| is_empty_table(&i.value.to_lowercase())),
        TableFactor::Derived { subquery, .. } => empty_query(subquery),
        _ => false,
    };
    let keeps_right = from.joins.iter().any(|j| {
        matches!(
            j.join_operator,
            J::Right(_) | J::RightOuter(_) | J::FullOuter(_)
        )
    });
    let mut result = empty(&mut from.relation) && !keeps_right;
    for j in &mut from.joins {
        let inner = matches!(j.join_operator, J::Join(_) | J::Inner(_) | J::CrossJoin(_));
        result |= empty(&mut j.relation) && inner;
    }
    result
}

/// [`empty_result`] of a query's body, its ORDER BY dropped when it has no rows.
fn empty_query(q: &mut datafusion::sql::sqlparser::ast::Query) -> bool {
    let empty = empty_result(&mut q.body);
    if empty {
        q.order_by = None;
    }
    empty
}

/// Names the catalog's tables that `stmt` reads unqualified (`FROM pg_type`) with their schema,
/// as PostgreSQL's search path finds them, unless `taken` (a stream or query of that name).
fn qualify_catalog_tables(stmt: &mut Statement, taken: impl Fn(&str) -> bool) {
    let _ = visit_relations_mut(stmt, |name| {
        // The window table functions are registered lower-case; DataFusion looks table
        // functions up by name as written.
        if let [ObjectNamePart::Identifier(f)] = name.0.as_mut_slice() {
            if f.quote_style.is_none()
                && ["tumble", "hop", "cumulate", "session"]
                    .contains(&f.value.to_lowercase().as_str())
            {
                f.value = f.value.to_lowercase();
            }
        }
        // `pg_catalog.pg_get_keywords()`: table functions are registered without a schema.
        if let [ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(f)] =
            name.0.as_slice()
        {
            if schema.value.eq_ignore_ascii_case(SCHEMA)
                && TABLE_FUNCTIONS.contains(&f.value.to_lowercase().as_str())
            {
                name.0.remove(0);
            }
        }
        if let [ObjectNamePart::Identifier(table)] = name.0.as_slice() {
            let lower = table.value.to_lowercase();
            if is_catalog_table(&lower) && !taken(&lower) {
                name.0
                    .insert(0, ObjectNamePart::Identifier(Ident::new(SCHEMA)));
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The catalog's table functions, which tools may name with their schema.
const TABLE_FUNCTIONS: [&str; 3] = ["pg_get_keywords", "generate_series", "unnest"];

/// Whether a query reads a `pg_catalog` or `information_schema` relation (psql's describing
/// queries and drivers' introspection do).
pub fn reads_catalog(stmt: &Statement) -> bool {
    let mut found = false;
    let _ = visit_relations(stmt, |name| {
        if let [ObjectNamePart::Identifier(schema), _] = name.0.as_slice() {
            found |= schema.value.eq_ignore_ascii_case(SCHEMA)
                || schema.value.eq_ignore_ascii_case("information_schema");
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut stmts = datafusion::sql::sqlparser::parser::Parser::parse_sql(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
            sql,
        )
        .unwrap();
        rewrite(&mut stmts[0], |t| t == "pg_user");
        stmts[0].to_string()
    }

    #[test]
    fn psql_syntax_becomes_plain_sql() {
        assert_eq!(
            rewritten(
                "SELECT c.oid FROM pg_class c WHERE c.relname OPERATOR(pg_catalog.~) \
                 '^(x)$' COLLATE pg_catalog.default AND pg_catalog.pg_table_is_visible(c.oid)"
            ),
            "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname ~ '^(x)$' \
             AND pg_table_is_visible(c.oid)"
        );
        assert_eq!(
            rewritten("SELECT 'x'::regclass, a::regtype::pg_catalog.text FROM pg_user"),
            "SELECT to_regclass('x'), format_type(a) FROM pg_user"
        );
        assert_eq!(
            rewritten("SELECT CAST($1 AS REGCLASS), $2::regtype, b::regclass FROM pg_user"),
            "SELECT to_regclass($1), to_regtype($2), b FROM pg_user"
        );
    }

    #[test]
    fn subqueries_over_empty_tables_are_null() {
        assert_eq!(
            rewritten(
                "SELECT (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t \
                 WHERE c.oid = a.attcollation) FROM pg_attribute a"
            ),
            "SELECT NULL FROM pg_catalog.pg_attribute a"
        );
        assert_eq!(
            rewritten("SELECT 1 WHERE n NOT LIKE 'pg/_' || '%' ESCAPE '/'"),
            "SELECT 1 WHERE n NOT LIKE 'pg\\_%'"
        );
        assert_eq!(backslash_escaped(r"a\b//c", '/'), r"a\\b\/c");
        assert_eq!(
            rewritten("SELECT 1 WHERE a = ANY (ARRAY['r', 'p']) AND b <> ALL (ARRAY[1])"),
            "SELECT 1 WHERE a IN ('r', 'p') AND b NOT IN (1)"
        );
        // Text array literals, arrays' bounds, composite fields of empty catalog rows,
        // Grafana's search-path subquery.
        assert_eq!(
            rewritten(
                "SELECT 1 FROM pg_class c WHERE c.relkind = ANY ('{r,\"\",NULL}') \
                 AND w <> ALL ('{a,b}'::text[])"
            ),
            "SELECT 1 FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', '', NULL) \
             AND w NOT IN ('a', 'b')"
        );
        assert_eq!(
            rewritten("SELECT array_upper(current_schemas(false), 1), array_lower(a, 1)"),
            "SELECT CAST(array_length(current_schemas(false), 1) AS BIGINT), \
             CASE WHEN array_length(a, 1) > 0 THEN 1 END"
        );
        assert_eq!(
            rewritten("SELECT (a.keys).x FROM pg_attribute a"),
            "SELECT NULL FROM pg_catalog.pg_attribute a"
        );
        assert!(rewritten(
            "SELECT t FROM information_schema.tables WHERE s IN (SELECT trim(s[i]) \
             FROM generate_series(1, 2) AS i, string_to_array(current_setting('search_path'), ',') s)"
        )
        .ends_with("WHERE s IN (current_user(), 'public')"));
        // A subquery over a table with rows stays.
        assert!(rewritten("SELECT (SELECT max(oid) FROM pg_type)").contains("SELECT max(oid)"));
    }
}
