//! SQL-level prepared statements of one session: `PREPARE name [(types)] AS statement`,
//! `EXECUTE name [(constants)]`, `DEALLOCATE [PREPARE] name | ALL` (psycopg 3 sends
//! `DEALLOCATE ALL` after DDL). The arguments of EXECUTE bind `$1`, `$2`, ... as the
//! parameters of the extended protocol do: quoted literals as text of unknown type, other
//! constants as typed values ([`Param`]).

use crate::error::sqlstate;
use std::collections::HashMap;

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::DataType;
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::{self as sq, Expr, UnaryOperator, Value};

use crate::error::{Error, Result};
use crate::plan::ConstantEvaluator;
use crate::sources::param::Param;
use crate::sql::Statement;

/// The prepared statements of a session, by name.
#[derive(Default)]
pub struct PreparedStatements {
    by_name: HashMap<String, Statement>,
}

fn undefined(name: &str) -> Error {
    Error::Catalog {
        sqlstate: sqlstate::INVALID_SQL_STATEMENT_NAME,
        message: format!("prepared statement \"{name}\" does not exist"),
        location: None,
    }
}

impl PreparedStatements {
    /// `PREPARE name AS statement`.
    pub fn prepare(&mut self, name: String, statement: Statement) -> Result<()> {
        if self.by_name.contains_key(&name) {
            return Err(Error::Catalog {
                sqlstate: sqlstate::DUPLICATE_PSTATEMENT,
                message: format!("prepared statement \"{name}\" already exists"),
                location: None,
            });
        }
        self.by_name.insert(name, statement);
        Ok(())
    }

    /// The statement prepared as `name`.
    pub fn get(&self, name: &str) -> Result<Statement> {
        self.by_name
            .get(name)
            .cloned()
            .ok_or_else(|| undefined(name))
    }

    /// `DEALLOCATE name`.
    pub fn deallocate(&mut self, name: &str) -> Result<()> {
        self.by_name
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| undefined(name))
    }

    /// `DEALLOCATE ALL`, `DISCARD ALL`.
    pub fn clear(&mut self) {
        self.by_name.clear();
    }
}

/// Whether `DEALLOCATE name` means `DEALLOCATE ALL`.
pub fn is_all(name: &sq::Ident) -> bool {
    name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all")
}

/// The arguments of `EXECUTE name (a, b, ...)` as parameters. A quoted literal is text
/// whose type the statement decides, as in PostgreSQL; another constant expression (`1`,
/// `-2.5`, `'2024-01-01'::timestamp`, `now()`) is evaluated to a typed value. Only
/// constants are taken, as PostgreSQL takes them in practice.
pub fn arguments(args: &[Expr]) -> Result<Vec<Param>> {
    let mut evaluator = ConstantEvaluator::default();
    args.iter().map(|e| argument(e, &mut evaluator)).collect()
}

fn argument(e: &Expr, evaluator: &mut ConstantEvaluator) -> Result<Param> {
    match e {
        Expr::Nested(inner) => return argument(inner, evaluator),
        Expr::Value(v) => match &v.value {
            Value::Null => return Ok(Param::Null),
            Value::SingleQuotedString(s)
            | Value::EscapedStringLiteral(s)
            | Value::DoubleQuotedString(s) => return Ok(Param::Text(s.clone())),
            Value::Number(n, _) => return Ok(number(n, false)),
            _ => {}
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } => {
            if let Expr::Value(v) = inner.as_ref() {
                if let Value::Number(n, _) = &v.value {
                    return Ok(number(n, true));
                }
            }
        }
        _ => {}
    }
    let reads_a_name = sq::visit_expressions(e, |e| match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    });
    if reads_a_name.is_break() {
        return Err(Error::NotSupported(format!(
            "EXECUTE argument {e} is not supported; pass a constant"
        )));
    }
    Ok(Param::from(evaluator.evaluate(e)?))
}

/// A numeric literal as PostgreSQL types it: a BIGINT when it is an integer that fits, else
/// an exact NUMERIC (so that `2.5` rounds to 3 in a BIGINT column, as in PostgreSQL), else
/// (an exponent, too many digits) a DOUBLE PRECISION.
fn number(text: &str, negative: bool) -> Param {
    let text = if negative {
        format!("-{text}")
    } else {
        text.to_string()
    };
    if let Ok(n) = text.parse::<i64>() {
        return Param::Value(ScalarValue::Int64(Some(n)));
    }
    let scale = text
        .split_once('.')
        .map_or(0, |(_, fraction)| fraction.len());
    let exact = i8::try_from(scale)
        .ok()
        .filter(|&s| s <= 38 && !text.contains(['e', 'E']))
        .and_then(|s| {
            ScalarValue::Utf8(Some(text.clone()))
                .cast_to(&DataType::Decimal128(38, s))
                .ok()
        });
    match exact {
        Some(value) => Param::Value(value),
        None => text.parse::<f64>().map_or(Param::Text(text), |f| {
            Param::Value(ScalarValue::Float64(Some(f)))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_constants() {
        let stmt = crate::sql::parse_one(
            "EXECUTE p('a', 1, -2.5, NULL, '2024-01-01'::timestamp, (2), 1e3)",
        )
        .unwrap();
        let Statement::Sql(s) = stmt else {
            panic!("EXECUTE is plain SQL")
        };
        let sq::Statement::Execute { parameters, .. } = *s else {
            panic!("not an EXECUTE: {s}")
        };
        assert_eq!(
            arguments(&parameters).unwrap(),
            vec![
                Param::Text("a".into()),
                Param::Value(ScalarValue::Int64(Some(1))),
                Param::Value(ScalarValue::Decimal128(Some(-25), 38, 1)),
                Param::Null,
                Param::Value(ScalarValue::TimestampNanosecond(
                    Some(1_704_067_200_000_000_000),
                    None
                )),
                Param::Value(ScalarValue::Int64(Some(2))),
                Param::Value(ScalarValue::Float64(Some(1000.0))),
            ]
        );
        let stmt = crate::sql::parse_one("EXECUTE p(x + 1)").unwrap();
        let Statement::Sql(s) = stmt else {
            panic!("EXECUTE is plain SQL")
        };
        let sq::Statement::Execute { parameters, .. } = *s else {
            panic!("not an EXECUTE: {s}")
        };
        let e = arguments(&parameters).unwrap_err();
        assert_eq!(e.sqlstate(), sqlstate::FEATURE_NOT_SUPPORTED, "{e}");
    }
}
