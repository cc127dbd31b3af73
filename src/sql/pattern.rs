//! The row pattern of a `MATCH_RECOGNIZE` (`PATTERN (...)`), as SQL:2016 writes it: saql
//! reads it itself (`parser/pattern.rs`), because sqlparser's pattern tree has no empty
//! pattern `()`, no `{,}` and excludes single variables only. Every node prints back to SQL
//! that reads to the same tree.

use std::fmt;

use datafusion::sql::sqlparser::ast::Ident;

/// A row pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowPattern {
    /// A pattern variable: one row that satisfies its `DEFINE`.
    Var(Ident),
    /// `^`: the start of the partition.
    Start,
    /// `$`: the end of the partition.
    End,
    /// Patterns one after the other; none is the empty pattern `()`, which matches no row.
    Concat(Vec<RowPattern>),
    /// `a | b`: the first alternative that leads to a match.
    Alt(Vec<RowPattern>),
    /// `( pattern )`.
    Group(Box<RowPattern>),
    /// `{- pattern -}`: rows that are part of the match but not returned by `ALL ROWS PER
    /// MATCH`.
    Exclude(Box<RowPattern>),
    /// `PERMUTE(a, b, ...)`: every order of the patterns, in lexicographic preference.
    Permute(Vec<RowPattern>),
    /// A pattern and its quantifier.
    Repeat(Box<RowPattern>, Quantifier),
}

/// How often a pattern repeats: `*`, `+`, `?`, `{n}`, `{n,}`, `{,m}`, `{n,m}`, `{,}`, each
/// optionally followed by `?` (reluctant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantifier {
    /// Fewest repetitions.
    pub min: u32,
    /// Most repetitions; None: unbounded.
    pub max: Option<u32>,
    /// `?` after the quantifier: prefer fewer repetitions.
    pub reluctant: bool,
}

impl RowPattern {
    /// Visits the pattern and every pattern inside it, outermost first.
    pub fn for_each<'a>(&'a self, f: &mut impl FnMut(&'a RowPattern)) {
        f(self);
        match self {
            RowPattern::Var(_) | RowPattern::Start | RowPattern::End => {}
            RowPattern::Concat(ps) | RowPattern::Alt(ps) | RowPattern::Permute(ps) => {
                ps.iter().for_each(|p| p.for_each(f))
            }
            RowPattern::Group(p) | RowPattern::Exclude(p) | RowPattern::Repeat(p, _) => {
                p.for_each(f)
            }
        }
    }
}

impl fmt::Display for Quantifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (0, None) => f.write_str("*")?,
            (1, None) => f.write_str("+")?,
            (0, Some(1)) => f.write_str("?")?,
            (n, Some(m)) if n == m => write!(f, "{{{n}}}")?,
            (0, Some(m)) => write!(f, "{{,{m}}}")?,
            (n, None) => write!(f, "{{{n},}}")?,
            (n, Some(m)) => write!(f, "{{{n},{m}}}")?,
        }
        if self.reluctant {
            f.write_str("?")?;
        }
        Ok(())
    }
}

fn join(f: &mut fmt::Formatter<'_>, ps: &[RowPattern], sep: &str) -> fmt::Result {
    for (i, p) in ps.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write!(f, "{p}")?;
    }
    Ok(())
}

impl fmt::Display for RowPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowPattern::Var(id) => write!(f, "{id}"),
            RowPattern::Start => f.write_str("^"),
            RowPattern::End => f.write_str("$"),
            RowPattern::Concat(ps) => join(f, ps, " "),
            RowPattern::Alt(ps) => join(f, ps, " | "),
            RowPattern::Group(p) => write!(f, "({p})"),
            RowPattern::Exclude(p) => write!(f, "{{- {p} -}}"),
            RowPattern::Permute(ps) => {
                f.write_str("PERMUTE(")?;
                join(f, ps, ", ")?;
                f.write_str(")")
            }
            RowPattern::Repeat(p, q) => write!(f, "{p}{q}"),
        }
    }
}
