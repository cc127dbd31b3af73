//! `MATCH_RECOGNIZE` in Flink SQL. Flink's CEP runs the subset of SQL:2016 that it documents:
//! a sequence of variables with (greedy or reluctant) quantifiers, `ONE ROW PER MATCH`, the
//! four `AFTER MATCH SKIP` modes, `DEFINE` with navigation to earlier variables, `WITHIN`.
//! saql's extras (alternation, groups, `PERMUTE`, exclusion, anchors, `ALL ROWS PER MATCH`,
//! `SUBSET`, `CLASSIFIER()`, `MATCH_NUMBER()`, `RUNNING`/`FINAL`, `EMIT TIMEOUT`) are refused.
//!
//! `WITHIN`: saql keeps a match whose last row is at most the interval after its first; Flink
//! drops a partial match once the interval is reached (`ts - start >= within`). On Flink's
//! millisecond event times "at most w" is "less than w + 1 ms", so the compiled pattern says
//! `WITHIN w + 1 ms`.

use std::ops::ControlFlow;
use std::time::Duration;

use datafusion::sql::sqlparser::ast::{
    self as sq, AfterMatchSkip, Expr, Ident, RowsPerMatch, TableFactor, Visit, VisitMut, Visitor,
    VisitorMut,
};

use super::expr::{self, ident, interval_sql, name_sql};
use crate::error::{Error, Result};
use crate::plan::catalog::normalize;
use crate::plan::Catalog;
use crate::sql::interval::interval_duration;
use crate::sql::Clauses;
use crate::sql::RowPattern as P;

fn refuse(what: &str) -> Error {
    Error::NotSupported(format!(
        "{what} in MATCH_RECOGNIZE has no Flink translation (Flink's CEP does not run it)"
    ))
}

/// The `FROM` item `stream MATCH_RECOGNIZE (...) AS alias` for Flink.
pub fn match_recognize_sql(
    relation: &TableFactor,
    clauses: &Clauses,
    catalog: &Catalog,
) -> Result<String> {
    let TableFactor::MatchRecognize {
        table,
        partition_by,
        order_by,
        measures,
        rows_per_match,
        after_match_skip,
        pattern: _,
        symbols,
        alias,
    } = relation
    else {
        return Err(Error::NotSupported("expected MATCH_RECOGNIZE".into()));
    };
    let TableFactor::Table {
        name, args: None, ..
    } = table.as_ref()
    else {
        return Err(refuse("an input other than a stream"));
    };
    let stream = catalog.require_stream(&crate::plan::catalog::normalize_object(name))?;
    if !clauses.subsets.is_empty() {
        return Err(refuse("SUBSET"));
    }
    if clauses.emit_timeout {
        return Err(refuse(
            "EMIT TIMEOUT (Flink drops timed-out partial matches in SQL)",
        ));
    }
    if matches!(rows_per_match, Some(RowsPerMatch::AllRows(_))) {
        return Err(refuse("ALL ROWS PER MATCH"));
    }
    let mut out = format!("{} MATCH_RECOGNIZE (\n", name_sql(&stream.name));
    if !partition_by.is_empty() {
        let keys = list(partition_by.iter().map(|e| expr::sql(e, None)))?;
        out.push_str(&format!("  PARTITION BY {keys}\n"));
    }
    let event_time = stream
        .event_time
        .as_ref()
        .map(|et| stream.schema.field(et.column).name().clone());
    match (order_by.as_slice(), event_time) {
        ([o], Some(et)) if matches!(&o.expr, Expr::Identifier(i) if normalize(i) == et) => {
            out.push_str(&format!("  ORDER BY {}\n", name_sql(&et)));
        }
        _ => return Err(refuse("an ORDER BY other than the stream's event time")),
    }
    let mut ms = Vec::new();
    for m in measures {
        if uses_function(&m.expr, &["prev", "next"]) {
            return Err(refuse("PREV or NEXT in MEASURES"));
        }
        ms.push(format!(
            "{} AS {}",
            expr::sql(&m.expr, None)?,
            ident(&m.alias)
        ));
    }
    if !ms.is_empty() {
        out.push_str(&format!("  MEASURES {}\n", ms.join(",\n    ")));
    }
    out.push_str("  ONE ROW PER MATCH\n");
    let skip = match after_match_skip {
        None | Some(AfterMatchSkip::PastLastRow) => "PAST LAST ROW".to_string(),
        Some(AfterMatchSkip::ToNextRow) => "TO NEXT ROW".to_string(),
        Some(AfterMatchSkip::ToFirst(v)) => format!("TO FIRST {}", ident(v)),
        Some(AfterMatchSkip::ToLast(v)) => format!("TO LAST {}", ident(v)),
    };
    out.push_str(&format!("  AFTER MATCH SKIP {skip}\n"));
    let mut seen = Occurrences::default();
    let pattern = clauses
        .pattern
        .as_ref()
        .ok_or_else(|| Error::Internal("MATCH_RECOGNIZE without its pattern".into()))?;
    out.push_str(&format!("  PATTERN ({})", pattern_sql(pattern, &mut seen)?));
    check_repeated(&seen, measures, symbols, after_match_skip)?;
    if let Some(within) = &clauses.within {
        let span = interval_duration(within)? + Duration::from_millis(1);
        out.push_str(&format!(" WITHIN {}", interval_sql(span)?));
    }
    out.push('\n');
    let mut defs = Vec::new();
    for s in symbols {
        let var = normalize(&s.symbol);
        let names = match seen.of(&var) {
            [] => vec![var.clone()],
            names => names.to_vec(),
        };
        for name in names {
            let definition = rename_qualifier(&s.definition, &var, &name);
            defs.push(format!(
                "{} AS {}",
                name_sql(&name),
                expr::sql(&definition, Some(&name))?
            ));
        }
    }
    if !defs.is_empty() {
        out.push_str(&format!("  DEFINE\n    {}\n", defs.join(",\n    ")));
    }
    out.push(')');
    if let Some(a) = alias {
        out.push_str(&format!(" AS {}", ident(&a.name)));
    }
    Ok(out)
}

fn list(items: impl Iterator<Item = Result<String>>) -> Result<String> {
    Ok(items.collect::<Result<Vec<_>>>()?.join(", "))
}

/// The variables of a pattern as written: Flink wants each variable once, so the second and
/// later occurrences of a variable are renamed `v__2`, `v__3`, ... (each with `v`'s
/// definition: a row's class is decided by the definition alone, so this matches the same
/// rows), as long as nothing else refers to `v`.
#[derive(Default)]
struct Occurrences {
    /// Variable to the names of its occurrences, in order.
    names: Vec<(String, Vec<String>)>,
}

impl Occurrences {
    fn name(&mut self, var: &str) -> String {
        match self.names.iter_mut().find(|(v, _)| v == var) {
            Some((_, list)) => {
                let name = format!("{var}__{}", list.len() + 1);
                list.push(name.clone());
                name
            }
            None => {
                self.names.push((var.to_string(), vec![var.to_string()]));
                var.to_string()
            }
        }
    }

    fn of(&self, var: &str) -> &[String] {
        self.names
            .iter()
            .find(|(v, _)| v == var)
            .map_or(&[], |(_, list)| list.as_slice())
    }

    fn repeated(&self) -> impl Iterator<Item = &str> {
        self.names
            .iter()
            .filter(|(_, list)| list.len() > 1)
            .map(|(v, _)| v.as_str())
    }
}

/// A pattern Flink runs: variables with quantifiers, in sequence.
fn pattern_sql(p: &P, seen: &mut Occurrences) -> Result<String> {
    Ok(match p {
        P::Var(v) => name_sql(&seen.name(&normalize(v))),
        P::Start | P::End => return Err(refuse("the anchors ^ and $")),
        P::Concat(ps) if ps.is_empty() => return Err(refuse("the empty pattern ()")),
        P::Concat(ps) => ps
            .iter()
            .map(|p| pattern_sql(p, seen))
            .collect::<Result<Vec<_>>>()?
            .join(" "),
        P::Repeat(inner, q) => match inner.as_ref() {
            P::Var(v) => {
                let mut text = match (q.min, q.max) {
                    (0, Some(m)) if m != 1 => format!("{{0,{m}}}"),
                    _ => crate::sql::Quantifier {
                        reluctant: false,
                        ..*q
                    }
                    .to_string(),
                };
                if q.reluctant {
                    text.push('?');
                }
                format!("{}{text}", name_sql(&seen.name(&normalize(v))))
            }
            _ => return Err(refuse("a quantifier on a group")),
        },
        P::Exclude(_) => return Err(refuse("exclusion {- -}")),
        P::Permute(_) => return Err(refuse("PERMUTE")),
        P::Group(_) => return Err(refuse("a pattern group ( )")),
        P::Alt(_) => return Err(refuse("alternation |")),
    })
}

/// Refuses a repeated variable that MEASURES, another DEFINE or AFTER MATCH SKIP refers to:
/// there it stands for the rows of all its occurrences, which the renamed ones do not.
fn check_repeated(
    seen: &Occurrences,
    measures: &[sq::Measure],
    symbols: &[sq::SymbolDefinition],
    skip: &Option<AfterMatchSkip>,
) -> Result<()> {
    for var in seen.repeated() {
        let in_measures = measures.iter().any(|m| refers_to(&m.expr, var));
        let in_defines = symbols
            .iter()
            .any(|s| normalize(&s.symbol) != var && refers_to(&s.definition, var));
        let in_skip = matches!(skip, Some(AfterMatchSkip::ToFirst(v) | AfterMatchSkip::ToLast(v))
            if normalize(v) == var);
        if in_measures || in_defines || in_skip {
            return Err(refuse(&format!(
                "a variable that appears more than once in PATTERN (\"{var}\") and is referred \
                 to elsewhere"
            )));
        }
    }
    Ok(())
}

/// Whether `e` names `var.column`.
fn refers_to(e: &Expr, var: &str) -> bool {
    struct Finder<'a>(&'a str);
    impl Visitor for Finder<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::CompoundIdentifier(parts)
                    if parts.len() > 1 && normalize(&parts[0]) == self.0 =>
                {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    e.visit(&mut Finder(var)).is_break()
}

/// `e` with `from.column` written `to.column`.
fn rename_qualifier(e: &Expr, from: &str, to: &str) -> Expr {
    struct Renamer<'a>(&'a str, &'a str);
    impl VisitorMut for Renamer<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Expr::CompoundIdentifier(parts) = e {
                if parts.len() > 1 && normalize(&parts[0]) == self.0 {
                    parts[0] = Ident::new(self.1);
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut e = e.clone();
    let _ = VisitMut::visit(&mut e, &mut Renamer(from, to));
    e
}

/// Whether `e` calls any of `names` (lowercase).
fn uses_function(e: &Expr, names: &[&str]) -> bool {
    struct Finder<'a>(&'a [&'a str]);
    impl Visitor for Finder<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::Function(sq::Function { name, .. })
                    if self
                        .0
                        .contains(&crate::plan::catalog::normalize_object(name).as_str()) =>
                {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    e.visit(&mut Finder(names)).is_break()
}
