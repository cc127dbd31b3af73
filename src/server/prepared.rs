//! SQL-level prepared statements of one session: `PREPARE name [(types)] AS statement`,
//! `EXECUTE name [(constants)]`, `DEALLOCATE [PREPARE] name | ALL` (psycopg 3 sends
//! `DEALLOCATE ALL` after DDL). The arguments of EXECUTE bind `$1`, `$2`, ... as the
//! parameters of the extended protocol do.

use crate::error::sqlstate;
use std::collections::HashMap;

use datafusion::sql::sqlparser::ast::{self as sq, Expr, UnaryOperator, Value};

use crate::error::{Error, Result};
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

/// The arguments of `EXECUTE name (a, b, ...)` as parameter text (`None` for NULL). Only
/// constants are taken, as PostgreSQL takes them in practice.
pub fn arguments(args: &[Expr]) -> Result<Vec<Option<String>>> {
    args.iter().map(constant_text).collect()
}

fn constant_text(e: &Expr) -> Result<Option<String>> {
    Ok(match e {
        Expr::Value(v) => match &v.value {
            Value::Null => None,
            Value::SingleQuotedString(s)
            | Value::EscapedStringLiteral(s)
            | Value::DoubleQuotedString(s) => Some(s.clone()),
            Value::Number(n, _) => Some(n.to_string()),
            Value::Boolean(b) => Some(b.to_string()),
            other => {
                return Err(Error::NotSupported(format!(
                    "EXECUTE argument {other} is not supported; pass a constant"
                )))
            }
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => constant_text(expr)?.map(|s| format!("-{s}")),
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => constant_text(expr)?,
        Expr::Cast { expr, .. } | Expr::Nested(expr) => constant_text(expr)?,
        other => {
            return Err(Error::NotSupported(format!(
                "EXECUTE argument {other} is not supported; pass a constant"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_constants() {
        let stmt = crate::sql::parse_one("EXECUTE p('a', 1, -2.5, NULL, '2024-01-01'::timestamp)")
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
                Some("a".to_string()),
                Some("1".to_string()),
                Some("-2.5".to_string()),
                None,
                Some("2024-01-01".to_string()),
            ]
        );
    }
}
