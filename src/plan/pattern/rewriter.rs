//! Rewrites the expressions of a `MATCH_RECOGNIZE` (DEFINE conditions, MEASURES) so that
//! every read of a pattern variable (`x.col`, `FIRST`/`LAST`, aggregates over a variable's
//! rows, `PREV`/`NEXT`, `CLASSIFIER()`, `MATCH_NUMBER()`) becomes a column `__ref<i>` of a
//! reference batch the matcher fills per candidate or per match.

use crate::error::sqlstate;
use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectNamePart,
    Value, VisitMut, VisitorMut,
};

use super::super::catalog::{normalize, normalize_object};
use super::variables::var_name;
use crate::error::{Error, Result};
use crate::operators::pattern::{Ref, RefKind};

/// Replaces references to pattern variables by columns `__ref<i>` of a reference batch.
pub(super) struct Rewriter<'a> {
    names: &'a [String],
    /// The variable being defined (None inside MEASURES).
    current: Option<u16>,
    /// Names of the SUBSET variables.
    pub subset_names: Vec<String>,
    /// Inside `FINAL ...`.
    in_final: bool,
    input: &'a Schema,
    stream: &'a str,
    pub refs: Vec<Ref>,
    /// Whether the last rewrite produced a reference.
    pub touched: bool,
}

impl<'a> Rewriter<'a> {
    pub(super) fn new(
        names: &'a [String],
        current: Option<u16>,
        input: &'a Schema,
        stream: &'a str,
    ) -> Self {
        Rewriter {
            names,
            current,
            subset_names: Vec::new(),
            input,
            stream,
            refs: Vec::new(),
            in_final: false,
            touched: false,
        }
    }

    /// Rewrites `e` in place.
    pub(super) fn rewrite(&mut self, e: &mut Expr) -> Result<()> {
        match e.visit(self) {
            ControlFlow::Break(err) => Err(err),
            ControlFlow::Continue(()) => Ok(()),
        }
    }

    /// One nullable field per reference.
    pub(super) fn fields(&self) -> Vec<Field> {
        self.refs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let column = r.column.map(|c| self.input.field(c).data_type());
                Field::new(format!("__ref{i}"), r.data_type(column), true)
            })
            .collect()
    }

    fn reference(&mut self, mut r: Ref) -> Expr {
        self.touched = true;
        r.is_final = self.in_final;
        let i = match self.refs.iter().position(|x| *x == r) {
            Some(i) => i,
            None => {
                self.refs.push(r);
                self.refs.len() - 1
            }
        };
        Expr::Identifier(Ident::new(format!("__ref{i}")))
    }

    fn var(&self, id: &Ident) -> Result<u16> {
        let name = var_name(id);
        self.names
            .iter()
            .position(|n| *n == name)
            .or_else(|| {
                (self.subset_names.iter().position(|n| *n == name)).map(|i| self.names.len() + i)
            })
            .map(|v| v as u16)
            .ok_or_else(|| {
                Error::plan(
                    sqlstate::UNDEFINED_TABLE,
                    format!(
                        "\"{name}\" is not a pattern variable; the variables are {}",
                        self.names.join(", ")
                    ),
                )
                .at_span(id.span)
            })
    }

    fn column(&self, id: &Ident) -> Result<usize> {
        let name = normalize(id);
        self.input.index_of(&name).map_err(|_| {
            Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" does not exist in stream \"{}\"",
                    self.stream
                ),
            )
            .at_span(id.span)
        })
    }

    /// `CLASSIFIER()` ranges over every row (None); `CLASSIFIER(v)` over the rows of a
    /// variable or SUBSET `v`.
    fn classifier_var(&self, args: &[&FunctionArg]) -> Result<Option<u16>> {
        match args {
            [] => Ok(None),
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(id)))] => {
                self.var(id).map(Some)
            }
            _ => Err(Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                "CLASSIFIER takes nothing or a pattern variable or SUBSET: CLASSIFIER(u)",
            )),
        }
    }

    /// `x.col` or `col` as (variable, column): variable None for a bare column.
    fn operand(&self, e: &Expr) -> Result<(Option<u16>, usize)> {
        match e {
            Expr::Identifier(id) => Ok((None, self.column(id)?)),
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                Ok((Some(self.var(&parts[0])?), self.column(&parts[1])?))
            }
            other => Err(Error::NotSupported(format!(
                "navigation in MATCH_RECOGNIZE reads a column or variable.column (or \
                 CLASSIFIER()), not an expression: {other}; navigate each column instead"
            ))),
        }
    }

    /// Rewrites `e` if it reads pattern variables; Ok(None) leaves it to the visitor.
    fn replace(&mut self, e: &Expr) -> Result<Option<Expr>> {
        let define = self.current.is_some();
        match e {
            Expr::Identifier(id) if !define => {
                let c = self.column(id)?;
                Ok(Some(self.reference(Ref {
                    var: None,
                    column: Some(c),
                    kind: RefKind::Last,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                    classifier: false,
                })))
            }
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                let (var, c) = self.operand(e)?;
                if var.is_some() && var == self.current {
                    return Ok(Some(Expr::Identifier(parts[1].clone())));
                }
                Ok(Some(self.reference(Ref {
                    var,
                    column: Some(c),
                    kind: RefKind::Last,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                    classifier: false,
                })))
            }
            Expr::CompoundIdentifier(parts) => Err(Error::NotSupported(format!(
                "{} is not a pattern variable's column; write variable.column",
                parts
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(".")
            ))),
            Expr::Function(f) => self.function(f),
            Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. } => {
                Err(Error::NotSupported(
                    "subqueries are not supported in MATCH_RECOGNIZE's MEASURES and DEFINE".into(),
                ))
            }
            _ => Ok(None),
        }
    }

    fn function(&mut self, f: &sq::Function) -> Result<Option<Expr>> {
        let name = normalize_object(&f.name).to_ascii_uppercase();
        let kind = match name.as_str() {
            "FIRST" => RefKind::First,
            "LAST" => RefKind::Last,
            "PREV" | "NEXT" if self.current.is_none() => {
                let r = self.physical_nav(f, name == "NEXT")?;
                return Ok(Some(self.reference(r)));
            }
            "PREV" if first_arg(f).is_some_and(|a| matches!(a, Expr::Function(_))) => {
                let r = self.physical_nav(f, false)?;
                return Ok(Some(self.reference(r)));
            }
            "PREV" => RefKind::Prev(1),
            "COUNT" => RefKind::Count,
            "SUM" => RefKind::Sum,
            "AVG" => RefKind::Avg,
            "MIN" => RefKind::Min,
            "MAX" => RefKind::Max,
            "MATCH_NUMBER" => RefKind::MatchNumber,
            "CLASSIFIER" => RefKind::Classifier,
            "RUNNING" | "FINAL" => return self.semantics(f, name == "FINAL").map(Some),
            // In DEFINE no row after the current one is mapped yet.
            "NEXT" if first_arg(f).is_some_and(is_classifier) => {
                return Ok(Some(Expr::Value(Value::Null.into())))
            }
            "NEXT" => {
                return Err(Error::NotSupported(
                    "NEXT in DEFINE would read a row that has not arrived yet; use PREV, or \
                     NEXT in MEASURES"
                        .into(),
                ))
            }
            _ => return Ok(None),
        };
        if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
            return Err(Error::NotSupported(format!(
                "{name} in MATCH_RECOGNIZE takes no FILTER, OVER or WITHIN GROUP"
            )));
        }
        let args: Vec<&FunctionArg> = match &f.args {
            FunctionArguments::None => vec![],
            FunctionArguments::List(l) => {
                if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
                    return Err(Error::NotSupported(format!(
                        "{name}(DISTINCT ...) is not supported in MATCH_RECOGNIZE"
                    )));
                }
                l.args.iter().collect()
            }
            FunctionArguments::Subquery(_) => {
                return Err(Error::NotSupported(format!(
                    "{name} takes a column, not a subquery"
                )))
            }
        };
        let r = match kind {
            RefKind::Classifier => {
                let var = self.classifier_var(&args)?;
                // In DEFINE, the row being decided is mapped to the variable being defined.
                if let (Some(v), None) = (self.current, var) {
                    return Ok(Some(Expr::Value(
                        Value::SingleQuotedString(self.names[v as usize].clone()).into(),
                    )));
                }
                Ref {
                    var,
                    column: None,
                    kind,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                    classifier: false,
                }
            }
            RefKind::MatchNumber => {
                if self.current.is_some() || !args.is_empty() {
                    return Err(Error::NotSupported(
                        "MATCH_NUMBER() without arguments, in MEASURES only".into(),
                    ));
                }
                Ref {
                    var: None,
                    column: None,
                    kind,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                    classifier: false,
                }
            }
            RefKind::Prev(_) => self.prev_ref(&args)?,
            _ => return self.aggregate_ref(kind, &name, &args).map(Some),
        };
        Ok(Some(self.reference(r)))
    }

    /// `PREV(col [, n])` in DEFINE: the row `n` before the current one.
    fn prev_ref(&self, args: &[&FunctionArg]) -> Result<Ref> {
        let arg = |i: usize| unnamed_arg(args, i, "PREV");
        if self.current.is_none() {
            return Err(Error::NotSupported(
                "PREV is supported in DEFINE only".into(),
            ));
        }
        let FunctionArgExpr::Expr(e) = arg(0)? else {
            return Err(Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                "PREV takes a column",
            ));
        };
        let (var, c) = self.operand(e)?;
        if var.is_some() && var != self.current {
            return Err(Error::NotSupported(
                "PREV reads the current variable's column; write PREV(col)".into(),
            ));
        }
        let n = match args.get(1) {
            None => 1,
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => match &v.value {
                Value::Number(n, _) => n.parse::<u32>().ok().filter(|n| (1..=1000).contains(n)),
                _ => None,
            }
            .ok_or_else(|| {
                Error::plan(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    "PREV's offset must be a number from 1 to 1000",
                )
            })?,
            Some(_) => {
                return Err(Error::plan(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    "PREV's offset must be a number from 1 to 1000",
                ))
            }
        };
        if args.len() > 2 {
            return Err(Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                "PREV takes a column and an offset",
            ));
        }
        Ok(Ref {
            var: None,
            column: Some(c),
            kind: RefKind::Prev(n),
            is_final: false,
            offset: 0,
            shift: 0,
            classifier: false,
        })
    }

    /// `FIRST`/`LAST(x.col [, n])`, `COUNT(x.*)`, `SUM/AVG/MIN/MAX(x.col)`: a reference, or
    /// in DEFINE the current row's column for `LAST` of the current variable.
    fn aggregate_ref(&mut self, kind: RefKind, name: &str, args: &[&FunctionArg]) -> Result<Expr> {
        let arg = |i: usize| unnamed_arg(args, i, name);
        let logical = matches!(kind, RefKind::First | RefKind::Last);
        if args.len() != 1 && !(logical && args.len() == 2) {
            return Err(Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                if logical {
                    format!("{name} takes a column and an optional offset")
                } else {
                    format!("{name} takes one argument in MATCH_RECOGNIZE")
                },
            ));
        }
        let offset = match args.get(1) {
            Some(a) => offset_arg(a, name, 0)?,
            None => 0,
        };
        let mut classifier = false;
        let (var, column) = match arg(0)? {
            FunctionArgExpr::Expr(Expr::Function(g)) if logical && is_classifier_call(g) => {
                classifier = true;
                (self.classifier_var(&call_args(g))?, None)
            }
            FunctionArgExpr::Wildcard if kind == RefKind::Count => (None, None),
            FunctionArgExpr::QualifiedWildcard(v) if kind == RefKind::Count => {
                let [ObjectNamePart::Identifier(id)] = v.0.as_slice() else {
                    return Err(Error::plan(
                        sqlstate::SYNTAX_ERROR,
                        format!("{v}.* is not a variable"),
                    ));
                };
                (Some(self.var(id)?), None)
            }
            FunctionArgExpr::Expr(e) => {
                let (var, c) = self.operand(e)?;
                (var, Some(c))
            }
            other => {
                return Err(Error::plan(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("{name}({other}) is not supported"),
                ))
            }
        };
        // In DEFINE, LAST of the current variable (or of the whole match) is the
        // current row.
        if kind == RefKind::Last
            && offset == 0
            && self.current.is_some()
            && (var.is_none() || var == self.current)
        {
            let Some(c) = column else {
                // LAST(CLASSIFIER()): the variable being defined.
                let name = self.current.map(|v| self.names[v as usize].clone());
                return Ok(Expr::Value(
                    Value::SingleQuotedString(name.unwrap_or_default()).into(),
                ));
            };
            return Ok(Expr::Identifier(Ident::with_quote(
                '"',
                self.input.field(c).name().clone(),
            )));
        }
        Ok(self.reference(Ref {
            var,
            column,
            kind,
            is_final: false,
            offset,
            shift: 0,
            classifier,
        }))
    }

    /// `PREV(x, n)` / `NEXT(x, n)` in MEASURES, `x` a column, `v.col` or `FIRST`/`LAST(v.col
    /// [, m])`: the row `n` rows of the match before (after) the row `x` reads.
    fn physical_nav(&mut self, f: &sq::Function, next: bool) -> Result<Ref> {
        let word = if next { "NEXT" } else { "PREV" };
        let args: Vec<&FunctionArg> = match &f.args {
            FunctionArguments::List(l) if l.duplicate_treatment.is_none() => {
                l.args.iter().collect()
            }
            _ => vec![],
        };
        let (Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(inner))), 1..=2) =
            (args.first(), args.len())
        else {
            return Err(Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                format!("{word} takes a column (or FIRST/LAST of one) and an optional offset"),
            ));
        };
        let n = match args.get(1) {
            Some(a) => offset_arg(a, word, 0)?,
            None => 1,
        };
        let mut base = match inner {
            Expr::Function(g) if is_classifier_call(g) => Ref {
                var: self.classifier_var(&call_args(g))?,
                column: None,
                kind: RefKind::Last,
                is_final: false,
                offset: 0,
                shift: 0,
                classifier: true,
            },
            Expr::Function(g)
                if matches!(
                    normalize_object(&g.name).to_ascii_uppercase().as_str(),
                    "FIRST" | "LAST" | "RUNNING" | "FINAL"
                ) =>
            {
                let Some(Expr::Identifier(id)) = self.function(g)? else {
                    return Err(Error::plan(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("{word} of {g} is not supported"),
                    ));
                };
                // The nested reference was just added: take it back out as a base.
                let i: usize = id.value.trim_start_matches("__ref").parse().map_err(|_| {
                    Error::plan(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("{word} of {g} is not supported"),
                    )
                })?;
                self.refs[i].clone()
            }
            e => {
                let (var, c) = self.operand(e)?;
                Ref {
                    var,
                    column: Some(c),
                    kind: RefKind::Last,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                    classifier: false,
                }
            }
        };
        base.shift = if next { n as i32 } else { -(n as i32) };
        Ok(base)
    }

    /// `RUNNING f(...)` or `FINAL f(...)` (the front end writes them `RUNNING(f(...))`):
    /// the reference `f` with that semantics. FINAL is for MEASURES only.
    fn semantics(&mut self, f: &sq::Function, is_final: bool) -> Result<Expr> {
        let word = if is_final { "FINAL" } else { "RUNNING" };
        let inner = match &f.args {
            FunctionArguments::List(l) if l.args.len() == 1 => match &l.args[0] {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Function(g))) => Some(g),
                _ => None,
            },
            _ => None,
        };
        let Some(inner) = inner else {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "{word} goes before a navigation or aggregate function, as in \
                     {word} LAST(a.x)"
                ),
            ));
        };
        if is_final && self.current.is_some() {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                "FINAL is not allowed in DEFINE: a row is decided before its match ends; \
                 use it in MEASURES",
            ));
        }
        let outer = std::mem::replace(&mut self.in_final, is_final);
        let out = self.function(inner);
        self.in_final = outer;
        match out? {
            Some(e) => Ok(e),
            None => Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "{word} applies to FIRST, LAST, COUNT, SUM, AVG, MIN, MAX, CLASSIFIER or \
                     MATCH_NUMBER, not {}",
                    inner.name
                ),
            )),
        }
    }
}

impl VisitorMut for Rewriter<'_> {
    type Break = Error;

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<Error> {
        match self.replace(expr) {
            Ok(Some(e)) => {
                *expr = e;
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Continue(()),
            Err(err) => ControlFlow::Break(err),
        }
    }
}

/// The first argument of a call, when it is an expression.
fn first_arg(f: &sq::Function) -> Option<&Expr> {
    match call_args(f).first() {
        Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(e))) => Some(e),
        _ => None,
    }
}

/// A call's arguments (none for a call without a list).
fn call_args(f: &sq::Function) -> Vec<&FunctionArg> {
    match &f.args {
        FunctionArguments::List(l) => l.args.iter().collect(),
        _ => vec![],
    }
}

fn is_classifier_call(f: &sq::Function) -> bool {
    normalize_object(&f.name).eq_ignore_ascii_case("CLASSIFIER")
}

fn is_classifier(e: &Expr) -> bool {
    matches!(e, Expr::Function(f) if is_classifier_call(f))
}

/// A navigation offset: a whole number from `min` to 1000.
fn offset_arg(a: &FunctionArg, name: &str, min: u32) -> Result<u32> {
    let n = match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) => match &v.value {
            Value::Number(n, _) => n.parse::<u32>().ok(),
            _ => None,
        },
        _ => None,
    };
    n.filter(|n| (min..=1000).contains(n)).ok_or_else(|| {
        Error::plan(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("{name}'s offset must be a whole number from {min} to 1000"),
        )
    })
}

/// Argument `i` of `name`'s call, which must be positional.
fn unnamed_arg<'a>(args: &[&'a FunctionArg], i: usize, name: &str) -> Result<&'a FunctionArgExpr> {
    match args.get(i) {
        Some(FunctionArg::Unnamed(a)) => Ok(a),
        _ => Err(Error::plan(
            sqlstate::UNDEFINED_FUNCTION,
            format!("{name} takes a column argument"),
        )),
    }
}
