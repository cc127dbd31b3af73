//! The variables of a `MATCH_RECOGNIZE`: the PATTERN converted into the matcher's
//! [`Pattern`] (variables numbered in order of first appearance, `PERMUTE` expanded,
//! quantifiers checked), the SUBSET unions numbered after them, each variable's DEFINE, and
//! the variable `AFTER MATCH SKIP TO` names.

use crate::error::sqlstate;

use datafusion::sql::sqlparser::ast::{
    AfterMatchSkip, Expr, Ident, MatchRecognizePattern, MatchRecognizeSymbol, RepetitionQuantifier,
    SymbolDefinition,
};

use super::super::catalog::normalize;
use crate::error::{Error, Result};
use crate::operators::pattern::{AfterMatch, Pattern};
use crate::sql::SubsetDef;

fn convert_pattern(
    p: &MatchRecognizePattern,
    names: &mut Vec<String>,
    depth: usize,
) -> Result<Pattern> {
    use MatchRecognizePattern as P;
    if depth > crate::limits::MAX_NESTING {
        return Err(Error::too_complex(format!(
            "statement too complex: PATTERN nested more than {} deep",
            crate::limits::MAX_NESTING
        )));
    }
    let depth = depth + 1;
    Ok(match p {
        P::Symbol(MatchRecognizeSymbol::Named(id)) => {
            let name = normalize(id);
            let v = match names.iter().position(|n| *n == name) {
                Some(v) => v,
                None => {
                    names.push(name);
                    names.len() - 1
                }
            };
            Pattern::Var(v)
        }
        P::Symbol(MatchRecognizeSymbol::Start) => Pattern::Start,
        P::Symbol(MatchRecognizeSymbol::End) => Pattern::End,
        P::Exclude(s) => Pattern::Exclude(Box::new(convert_pattern(
            &P::Symbol(s.clone()),
            names,
            depth,
        )?)),
        P::Permute(symbols) => {
            if symbols.len() > MAX_PERMUTE {
                return Err(Error::too_complex(format!(
                    "PERMUTE of {} variables has too many orders; at most {MAX_PERMUTE} \
                     variables may be permuted",
                    symbols.len()
                )));
            }
            let items = symbols
                .iter()
                .map(|s| convert_pattern(&P::Symbol(s.clone()), names, depth))
                .collect::<Result<Vec<_>>>()?;
            Pattern::Alt(permutations(&items))
        }
        P::Concat(ps) => Pattern::Concat(
            ps.iter()
                .map(|p| convert_pattern(p, names, depth))
                .collect::<Result<_>>()?,
        ),
        P::Alternation(ps) => Pattern::Alt(
            ps.iter()
                .map(|p| convert_pattern(p, names, depth))
                .collect::<Result<_>>()?,
        ),
        P::Group(p) => convert_pattern(p, names, depth)?,
        // `x*?`: sqlparser reads the reluctant `?` as a second quantifier.
        P::Repetition(inner, RepetitionQuantifier::AtMostOne)
            if matches!(inner.as_ref(), P::Repetition(..)) =>
        {
            let P::Repetition(x, q) = inner.as_ref() else {
                unreachable!("matched above")
            };
            repeat(convert_pattern(x, names, depth)?, q, false)?
        }
        P::Repetition(x, q) => repeat(convert_pattern(x, names, depth)?, q, true)?,
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

fn repeat(inner: Pattern, q: &RepetitionQuantifier, greedy: bool) -> Result<Pattern> {
    use RepetitionQuantifier as Q;
    let (min, max) = match *q {
        Q::ZeroOrMore => (0, None),
        Q::OneOrMore => (1, None),
        Q::AtMostOne => (0, Some(1)),
        Q::Exactly(n) => (n, Some(n)),
        Q::AtLeast(n) => (n, None),
        Q::AtMost(n) => (0, Some(n)),
        Q::Range(n, m) => (n, Some(m)),
    };
    if max.is_some_and(|m| m < min) || max == Some(0) {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            format!("quantifier {q} matches nothing: its upper bound must be at least 1 and its lower bound"),
        ));
    }
    Ok(Pattern::Repeat {
        inner: Box::new(inner),
        min,
        max,
        greedy,
    })
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
        pattern: &MatchRecognizePattern,
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
        self.names.iter().position(|n| *n == normalize(id))
    }

    /// A variable's or a subset's number.
    fn set_index(&self, id: &Ident) -> Option<usize> {
        self.var_index(id).or_else(|| {
            let name = normalize(id);
            (self.subset_names.iter().position(|n| *n == name)).map(|i| self.names.len() + i)
        })
    }

    /// SUBSET: a union variable, numbered after the pattern's variables.
    fn add_subset(&mut self, s: &SubsetDef) -> Result<()> {
        let name = normalize(&s.name);
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
                        normalize(v)
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
                    normalize(&s.symbol)
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
                            normalize(id)
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
