//! Scalar and aggregate expressions in Flink SQL: saql's expressions (sqlparser's AST, with
//! DataFusion's meaning) rewritten node by node into what Flink computes the same way, printed
//! by sqlparser. Column names are lowercased as saql normalises them (Flink matches names by
//! case); `ILIKE` becomes `LOWER(a) LIKE LOWER(b)`; `~` becomes `REGEXP`; intervals are
//! restated in Flink's units; `AVG`, `STDDEV_*` and `VAR_*` get a `DOUBLE` argument (Flink
//! would return the integer type of an integer argument; saql returns a double). Anything else
//! that Flink would compute differently, or not at all, is refused by name.

use std::ops::ControlFlow;
use std::time::Duration;

use datafusion::sql::sqlparser::ast::{
    self as sq, BinaryOperator, CastKind, DataType, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, ObjectName, UnaryOperator, Value, VisitMut, VisitorMut,
};

use crate::error::{Error, Result};
use crate::plan::catalog::normalize;
use crate::sql::interval::interval_duration;

/// Words Flink SQL reserves that may well be column names; such names are quoted with
/// backticks (the rest are written bare, lowercased).
const RESERVED: &[&str] = &[
    "all",
    "and",
    "as",
    "at",
    "avg",
    "between",
    "by",
    "case",
    "cast",
    "count",
    "current",
    "date",
    "day",
    "default",
    "desc",
    "end",
    "from",
    "function",
    "group",
    "hour",
    "interval",
    "key",
    "language",
    "like",
    "max",
    "min",
    "minute",
    "month",
    "not",
    "null",
    "or",
    "order",
    "position",
    "range",
    "result",
    "row",
    "rows",
    "second",
    "select",
    "start",
    "sum",
    "system",
    "table",
    "time",
    "timestamp",
    "to",
    "user",
    "value",
    "values",
    "where",
    "window",
    "year",
];

/// Functions whose Flink namesake computes what saql's does, with the Flink name.
const FUNCTIONS: &[(&str, &str)] = &[
    ("count", "COUNT"),
    ("sum", "SUM"),
    ("min", "MIN"),
    ("max", "MAX"),
    ("avg", "AVG"),
    ("stddev", "STDDEV_SAMP"),
    ("stddev_samp", "STDDEV_SAMP"),
    ("stddev_pop", "STDDEV_POP"),
    ("variance", "VAR_SAMP"),
    ("var_samp", "VAR_SAMP"),
    ("var_pop", "VAR_POP"),
    ("lag", "LAG"),
    ("lower", "LOWER"),
    ("upper", "UPPER"),
    ("abs", "ABS"),
    ("coalesce", "COALESCE"),
    ("nullif", "NULLIF"),
    ("length", "CHAR_LENGTH"),
    ("char_length", "CHAR_LENGTH"),
    ("character_length", "CHAR_LENGTH"),
    ("concat", "CONCAT"),
    ("regexp_like", "REGEXP"),
    ("floor", "FLOOR"),
    ("ceil", "CEIL"),
    ("round", "ROUND"),
    ("power", "POWER"),
    ("exp", "EXP"),
    ("ln", "LN"),
    ("greatest", "GREATEST"),
    ("least", "LEAST"),
    // Inside MATCH_RECOGNIZE only (the planner refuses them elsewhere).
    ("first", "FIRST"),
    ("last", "LAST"),
    ("prev", "PREV"),
];

/// Aggregates whose argument is cast to DOUBLE (saql's result type for any numeric input).
const DOUBLE_AGGREGATES: &[&str] = &["AVG", "STDDEV_SAMP", "STDDEV_POP", "VAR_SAMP", "VAR_POP"];

/// An identifier as Flink should read it: saql's normalised name, quoted if Flink reserves it.
pub fn ident(name: &Ident) -> Ident {
    name_ident(&normalize(name))
}

/// A normalised name as a Flink identifier.
pub fn name_ident(name: &str) -> Ident {
    let plain = name
        .chars()
        .enumerate()
        .all(|(i, c)| c == '_' || c.is_ascii_lowercase() || (i > 0 && c.is_ascii_digit()));
    if plain && !RESERVED.contains(&name) {
        Ident::new(name)
    } else {
        Ident::with_quote('`', name.replace('`', "``"))
    }
}

/// A normalised name as Flink SQL text.
pub fn name_sql(name: &str) -> String {
    name_ident(name).to_string()
}

/// `expr` rewritten for Flink. `current_var`, inside a MATCH_RECOGNIZE `DEFINE`, qualifies
/// bare column names with the variable being defined (saql's meaning of a bare name there).
pub fn rewrite(expr: &Expr, current_var: Option<&str>) -> Result<Expr> {
    let mut e = expr.clone();
    let mut rewriter = Rewriter { current_var };
    match e.visit(&mut rewriter) {
        ControlFlow::Break(err) => Err(err),
        ControlFlow::Continue(()) => Ok(e),
    }
}

/// [`rewrite`], printed.
pub fn sql(expr: &Expr, current_var: Option<&str>) -> Result<String> {
    rewrite(expr, current_var).map(|e| e.to_string())
}

/// A duration as a Flink interval literal: the largest unit that states it exactly, with the
/// leading precision Flink needs past two digits. Flink keeps milliseconds.
pub fn interval_sql(d: Duration) -> Result<String> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(Error::NotSupported(format!(
            "the interval of {d:?} has a part below a millisecond, which Flink does not keep"
        )));
    }
    let ms = d.as_millis();
    let unit = [
        (86_400_000, "DAY"),
        (3_600_000, "HOUR"),
        (60_000, "MINUTE"),
        (1_000, "SECOND"),
    ]
    .into_iter()
    .find(|(size, _)| ms > 0 && ms.is_multiple_of(*size));
    let (text, lead, unit) = match unit {
        Some((size, unit)) => ((ms / size).to_string(), ms / size, unit),
        None => (
            format!("{}.{:03}", ms / 1000, ms % 1000),
            ms / 1000,
            "SECOND",
        ),
    };
    let digits = lead.to_string().len();
    Ok(if digits > 2 {
        format!("INTERVAL '{text}' {unit}({digits})")
    } else {
        format!("INTERVAL '{text}' {unit}")
    })
}

/// The Flink name of a supported function, or an error naming it.
pub fn function_name(name: &ObjectName) -> Result<&'static str> {
    let key = crate::plan::catalog::normalize_object(name);
    FUNCTIONS
        .iter()
        .find(|(saql, _)| *saql == key)
        .map(|(_, flink)| *flink)
        .ok_or_else(|| {
            Error::NotSupported(format!(
                "function {key}() has no faithful Flink translation"
            ))
        })
}

/// A SQL type of a `CAST` as Flink spells it.
fn flink_type(t: &DataType) -> Result<DataType> {
    let arrow = crate::plan::catalog::arrow_type(t)?;
    let name = super::ddl::flink_type(&arrow)?;
    Ok(DataType::Custom(
        ObjectName::from(vec![Ident::new(name)]),
        vec![],
    ))
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(sq::Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(sq::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn cast_double(e: Expr) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(e),
        data_type: DataType::Custom(ObjectName::from(vec![Ident::new("DOUBLE")]), vec![]),
        array: false,
        format: None,
    }
}

/// A `LIKE` pattern that holds a backslash needs `ESCAPE '\'` in Flink (DataFusion escapes
/// with a backslash by default; Flink has no default escape).
fn like_escape(pattern: &Expr, escape: Option<sq::ValueWithSpan>) -> Option<sq::ValueWithSpan> {
    if escape.is_some() {
        return escape;
    }
    match pattern {
        Expr::Value(v) if matches!(&v.value, Value::SingleQuotedString(s) if s.contains('\\')) => {
            Some(Value::SingleQuotedString("\\".into()).into())
        }
        _ => None,
    }
}

struct Rewriter<'a> {
    current_var: Option<&'a str>,
}

fn refuse(what: impl std::fmt::Display) -> ControlFlow<Error> {
    ControlFlow::Break(Error::NotSupported(format!(
        "{what} has no faithful Flink translation"
    )))
}

impl VisitorMut for Rewriter<'_> {
    type Break = Error;

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<Error> {
        let new = match expr {
            Expr::Identifier(i) => match self.current_var {
                Some(var) => Expr::CompoundIdentifier(vec![name_ident(var), ident(i)]),
                None => Expr::Identifier(ident(i)),
            },
            Expr::CompoundIdentifier(parts) => {
                Expr::CompoundIdentifier(parts.iter().map(ident).collect())
            }
            Expr::ILike {
                negated,
                any,
                expr: e,
                pattern,
                escape_char,
            } => {
                if *any {
                    return refuse("ILIKE ANY");
                }
                let escape = like_escape(pattern, escape_char.clone());
                Expr::Like {
                    negated: *negated,
                    any: false,
                    expr: Box::new(call("LOWER", vec![(**e).clone()])),
                    pattern: Box::new(call("LOWER", vec![(**pattern).clone()])),
                    escape_char: escape,
                }
            }
            Expr::Like {
                negated,
                any,
                expr: e,
                pattern,
                escape_char,
            } => {
                if *any {
                    return refuse("LIKE ANY");
                }
                Expr::Like {
                    negated: *negated,
                    any: false,
                    expr: e.clone(),
                    pattern: pattern.clone(),
                    escape_char: like_escape(pattern, escape_char.clone()),
                }
            }
            Expr::BinaryOp { left, op, right } => match op {
                BinaryOperator::PGRegexMatch => call("REGEXP", vec![*left.clone(), *right.clone()]),
                BinaryOperator::PGRegexNotMatch => Expr::UnaryOp {
                    op: UnaryOperator::Not,
                    expr: Box::new(call("REGEXP", vec![*left.clone(), *right.clone()])),
                },
                BinaryOperator::Plus
                | BinaryOperator::Minus
                | BinaryOperator::Multiply
                | BinaryOperator::Divide
                | BinaryOperator::Modulo
                | BinaryOperator::Gt
                | BinaryOperator::Lt
                | BinaryOperator::GtEq
                | BinaryOperator::LtEq
                | BinaryOperator::Eq
                | BinaryOperator::NotEq
                | BinaryOperator::And
                | BinaryOperator::Or
                | BinaryOperator::StringConcat => return ControlFlow::Continue(()),
                other => return refuse(format!("the operator {other}")),
            },
            Expr::UnaryOp { op, .. } => match op {
                UnaryOperator::Not | UnaryOperator::Minus | UnaryOperator::Plus => {
                    return ControlFlow::Continue(())
                }
                other => return refuse(format!("the operator {other}")),
            },
            Expr::Cast {
                kind,
                expr: e,
                data_type,
                format: None,
                array: false,
            } => {
                let kind = match kind {
                    CastKind::Cast | CastKind::DoubleColon => CastKind::Cast,
                    CastKind::TryCast => CastKind::TryCast,
                    CastKind::SafeCast => return refuse("SAFE_CAST"),
                };
                let data_type = match flink_type(data_type) {
                    Ok(t) => t,
                    Err(e) => return ControlFlow::Break(e),
                };
                Expr::Cast {
                    kind,
                    expr: e.clone(),
                    data_type,
                    array: false,
                    format: None,
                }
            }
            Expr::Interval(_) => {
                let text = match interval_duration(expr).and_then(interval_sql) {
                    Ok(t) => t,
                    Err(e) => return ControlFlow::Break(e),
                };
                // An interval literal in Flink's spelling, kept as an identifier so that
                // sqlparser prints it as it is.
                Expr::Identifier(Ident::new(text))
            }
            Expr::Function(f) => match rewrite_function(f) {
                Ok(()) => return ControlFlow::Continue(()),
                Err(e) => return ControlFlow::Break(e),
            },
            Expr::Value(v) => match &v.value {
                Value::Number(..)
                | Value::SingleQuotedString(_)
                | Value::Boolean(_)
                | Value::Null => return ControlFlow::Continue(()),
                _ => return refuse(format!("the literal {v}")),
            },
            Expr::Nested(_)
            | Expr::IsNull(_)
            | Expr::IsNotNull(_)
            | Expr::IsTrue(_)
            | Expr::IsFalse(_)
            | Expr::IsNotTrue(_)
            | Expr::IsNotFalse(_)
            | Expr::IsDistinctFrom(..)
            | Expr::IsNotDistinctFrom(..)
            | Expr::InList { .. }
            | Expr::Between { .. }
            | Expr::Case { .. }
            | Expr::Wildcard(_)
            | Expr::Substring { .. } => return ControlFlow::Continue(()),
            other => return refuse(format!("the expression {other}")),
        };
        *expr = new;
        ControlFlow::Continue(())
    }
}

/// Renames a supported function to its Flink name and casts the argument of the aggregates
/// that saql computes in DOUBLE.
fn rewrite_function(f: &mut sq::Function) -> Result<()> {
    let name = function_name(&f.name)?;
    if !f.within_group.is_empty() || f.null_treatment.is_some() {
        return Err(Error::NotSupported(format!(
            "{name}() with WITHIN GROUP or IGNORE/RESPECT NULLS has no faithful Flink translation"
        )));
    }
    f.name = ObjectName::from(vec![Ident::new(name)]);
    if DOUBLE_AGGREGATES.contains(&name) {
        if let FunctionArguments::List(list) = &mut f.args {
            for arg in &mut list.args {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
                    *e = cast_double(e.clone());
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn flink(text: &str) -> Result<String> {
        let e = Parser::new(&GenericDialect {})
            .try_with_sql(text)
            .unwrap()
            .parse_expr()
            .unwrap();
        sql(&e, None)
    }

    #[test]
    fn ilike_becomes_lower_like() {
        assert_eq!(
            flink("Exe ILIKE '%cmd.exe' AND op = 'start'").unwrap(),
            "LOWER(exe) LIKE LOWER('%cmd.exe') AND op = 'start'"
        );
    }

    #[test]
    fn backslash_patterns_get_an_escape() {
        assert_eq!(
            flink(r"exe LIKE 'C:\\%'").unwrap(),
            r"exe LIKE 'C:\\%' ESCAPE '\'"
        );
    }

    #[test]
    fn averages_are_doubles_and_names_map() {
        assert_eq!(
            flink("avg(sent) + stddev(x) + length(s)").unwrap(),
            "AVG(CAST(sent AS DOUBLE)) + STDDEV_SAMP(CAST(x AS DOUBLE)) + CHAR_LENGTH(s)"
        );
    }

    #[test]
    fn reserved_names_are_quoted_and_casts_mapped() {
        assert_eq!(
            flink("\"user\" = 'x' AND CAST(n AS TEXT) = '1' AND v::double precision > 1").unwrap(),
            "`user` = 'x' AND CAST(n AS STRING) = '1' AND CAST(v AS DOUBLE) > 1"
        );
    }

    #[test]
    fn regex_match_becomes_regexp() {
        assert_eq!(flink("exe ~ 'a+'").unwrap(), "REGEXP(exe, 'a+')");
    }

    #[test]
    fn intervals_in_flink_units() {
        let s = |n| interval_sql(Duration::from_millis(n)).unwrap();
        assert_eq!(s(10_000), "INTERVAL '10' SECOND");
        assert_eq!(s(600_000), "INTERVAL '10' MINUTE");
        assert_eq!(s(100_000), "INTERVAL '100' SECOND(3)");
        assert_eq!(s(600_001), "INTERVAL '600.001' SECOND(3)");
        assert_eq!(s(1_500), "INTERVAL '1.500' SECOND");
        assert!(interval_sql(Duration::from_nanos(5)).is_err());
    }

    #[test]
    fn unknown_functions_are_refused_by_name() {
        let e = flink("median(x) > 1").unwrap_err();
        assert_eq!(e.sqlstate(), "0A000");
        assert!(e.to_string().contains("median()"), "{e}");
        let e = flink("now() > ts").unwrap_err();
        assert!(e.to_string().contains("now()"), "{e}");
    }

    #[test]
    fn define_qualifies_bare_columns() {
        let e = Parser::new(&GenericDialect {})
            .try_with_sql("op = 'read' AND pid <> w.pid")
            .unwrap()
            .parse_expr()
            .unwrap();
        assert_eq!(
            sql(&e, Some("r")).unwrap(),
            "r.op = 'read' AND r.pid <> w.pid"
        );
    }
}
