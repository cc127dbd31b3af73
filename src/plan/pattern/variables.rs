//! The variables of a `MATCH_RECOGNIZE`: the PATTERN converted into the matcher's
//! [`Pattern`] (variables numbered in order of first appearance, `PERMUTE` expanded),
//! the SUBSET unions numbered after them, each variable's DEFINE, and
//! the variable `AFTER MATCH SKIP TO` names.

use crate::error::sqlstate;

use datafusion::sql::sqlparser::ast::{AfterMatchSkip, Expr, Ident, SymbolDefinition};

use crate::error::{Error, Result};
use crate::operators::pattern::{AfterMatch, Pattern};
use crate::sql::{RowPattern, SubsetDef};

/// A pattern variable's name: as written when quoted, else in upper case, as SQL:2016 folds
/// identifiers (`CLASSIFIER()` returns it, so `CLASSIFIER() = 'A'` holds for a variable `a`).
pub(super) fn var_name(id: &Ident) -> String {
    if id.quote_style.is_some() {
        id.value.clone()
    } else {
        id.value.to_uppercase()
    }
}

fn convert_pattern(p: &RowPattern, names: &mut Vec<String>, depth: usize) -> Result<Pattern> {
    use RowPattern as P;
    if depth > crate::limits::MAX_NESTING {
        return Err(Error::too_complex(format!(
            "statement too complex: PATTERN nested more than {} deep",
            crate::limits::MAX_NESTING
        )));
    }
    let depth = depth + 1;
    let all = |ps: &[RowPattern], names: &mut Vec<String>| {
        ps.iter()
            .map(|p| convert_pattern(p, names, depth))
            .collect::<Result<Vec<_>>>()
    };
    Ok(match p {
        P::Var(id) => {
            let name = var_name(id);
            let v = match names.iter().position(|n| *n == name) {
                Some(v) => v,
                None => {
                    names.push(name);
                    names.len() - 1
                }
            };
            Pattern::Var(v)
        }
        P::Start => Pattern::Start,
        P::End => Pattern::End,
        P::Exclude(inner) => Pattern::Exclude(Box::new(convert_pattern(inner, names, depth)?)),
        P::Permute(items) => {
            if items.len() > MAX_PERMUTE {
                return Err(Error::too_complex(format!(
                    "PERMUTE of {} variables (or patterns) has too many orders; at most {MAX_PERMUTE} \
                     may be permuted",
                    items.len()
                )));
            }
            Pattern::Alt(permutations(&all(items, names)?))
        }
        P::Concat(ps) => Pattern::Concat(all(ps, names)?),
        P::Alt(ps) => Pattern::Alt(all(ps, names)?),
        P::Group(p) => convert_pattern(p, names, depth)?,
        P::Repeat(x, q) => Pattern::Repeat {
            inner: Box::new(convert_pattern(x, names, depth)?),
            min: q.min,
            max: q.max,
            greedy: !q.reluctant,
        },
    })
}

/// Most variables in one `PERMUTE` (6! = 720 alternatives).
const MAX_PERMUTE: usize = 6;

/// Every order of `items`, as SQL:2016 prefers them: lexicographic in the order written
/// (`PERMUTE (a, b, c)` prefers `a b c`, then `a c b`, `b a c`, ...).
fn permutations(items: &[Pattern]) -> Vec<Pattern> {
    if items.len() <= 1 {
        return vec![Pattern::Concat(items.to_vec())];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let head = rest.remove(i);
        for tail in permutations(&rest) {
            let Pattern::Concat(mut tail) = tail else {
                continue;
            };
            tail.insert(0, head.clone());
            out.push(Pattern::Concat(tail));
        }
    }
    out
}

/// The pattern's variables and subsets, and what DEFINE says of each variable.
pub(super) struct Variables {
    /// The pattern's variables, in order of first appearance.
    pub names: Vec<String>,
    /// The pattern over variable numbers.
    pub pattern: Pattern,
    /// SUBSET names, numbered after the variables.
    pub subset_names: Vec<String>,
    /// Each SUBSET's variables.
    pub subset_vars: Vec<Vec<u16>>,
    /// Each variable's DEFINE condition (None: any row).
    pub defines: Vec<Option<Expr>>,
}

impl Variables {
    /// Numbers PATTERN's variables, then resolves SUBSET and DEFINE against them.
    /// `with_unmatched`: ALL ROWS PER MATCH WITH UNMATCHED ROWS, which excludes `{- ... -}`.
    pub(super) fn resolve(
        pattern: &RowPattern,
        subsets: &[SubsetDef],
        symbols: &[SymbolDefinition],
        with_unmatched: bool,
    ) -> Result<Self> {
        let mut names = Vec::new();
        let pattern = convert_pattern(pattern, &mut names, 0)?;
        if with_unmatched && pattern.any(&|p| matches!(p, Pattern::Exclude(_))) {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                "ALL ROWS PER MATCH WITH UNMATCHED ROWS cannot be used with a pattern exclusion \
                 {- ... -}: an excluded row would be neither returned nor unmatched",
            ));
        }
        let mut vars = Variables {
            defines: vec![None; names.len()],
            names,
            pattern,
            subset_names: Vec::new(),
            subset_vars: Vec::new(),
        };
        for s in subsets {
            vars.add_subset(s)?;
        }
        for s in symbols {
            vars.define(s)?;
        }
        Ok(vars)
    }

    fn var_index(&self, id: &Ident) -> Option<usize> {
        self.names.iter().position(|n| *n == var_name(id))
    }

    /// A variable's or a subset's number.
    fn set_index(&self, id: &Ident) -> Option<usize> {
        self.var_index(id).or_else(|| {
            let name = var_name(id);
            (self.subset_names.iter().position(|n| *n == name)).map(|i| self.names.len() + i)
        })
    }

    /// SUBSET: a union variable, numbered after the pattern's variables.
    fn add_subset(&mut self, s: &SubsetDef) -> Result<()> {
        let name = var_name(&s.name);
        if self.var_index(&s.name).is_some() || self.subset_names.contains(&name) {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("SUBSET {name} is already a pattern variable or subset; pick another name"),
            ));
        }
        let mut vars = Vec::new();
        for v in &s.vars {
            let i = self.var_index(v).ok_or_else(|| {
                Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    format!(
                        "SUBSET {name} names \"{}\", which does not appear in PATTERN",
                        var_name(v)
                    ),
                )
            })?;
            vars.push(i as u16);
        }
        self.subset_names.push(name);
        self.subset_vars.push(vars);
        Ok(())
    }

    /// `DEFINE v AS ...`: once per variable of the pattern.
    fn define(&mut self, s: &SymbolDefinition) -> Result<()> {
        let Some(v) = self.var_index(&s.symbol) else {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "DEFINE names \"{}\", which does not appear in PATTERN",
                    var_name(&s.symbol)
                ),
            ));
        };
        if self.defines[v].replace(s.definition.clone()).is_some() {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("variable \"{}\" is defined twice", self.names[v]),
            ));
        }
        Ok(())
    }

    /// Where the next match attempt starts (`AFTER MATCH SKIP ...`).
    pub(super) fn after_match(&self, skip: Option<&AfterMatchSkip>) -> Result<AfterMatch> {
        Ok(match skip {
            None | Some(AfterMatchSkip::PastLastRow) => AfterMatch::PastLastRow,
            Some(AfterMatchSkip::ToNextRow) => AfterMatch::ToNextRow,
            Some(AfterMatchSkip::ToFirst(id)) | Some(AfterMatchSkip::ToLast(id)) => {
                let v = self.set_index(id).ok_or_else(|| {
                    Error::plan(
                        sqlstate::SYNTAX_ERROR,
                        format!(
                            "AFTER MATCH SKIP names \"{}\", which is not a variable of PATTERN \
                             or a SUBSET",
                            var_name(id)
                        ),
                    )
                })? as u16;
                if matches!(skip, Some(AfterMatchSkip::ToFirst(_))) {
                    AfterMatch::ToFirst(v)
                } else {
                    AfterMatch::ToLast(v)
                }
            }
        })
    }
}
