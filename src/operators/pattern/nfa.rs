//! A row pattern (`PATTERN (a b*? c)`) and the program it compiles to: a Thompson NFA
//! whose splits are ordered by preference, so that running its threads in priority order
//! (as a Pike VM does) finds the match SQL:2016 prefers: greedy quantifiers try one more row
//! first, reluctant ones one fewer, alternatives left to right.

use std::fmt;

use crate::error::{Error, Result};

/// The largest program a pattern may compile to (bounded quantifiers are unrolled).
const MAX_PROGRAM: usize = 4096;

/// A row pattern over variables numbered from 0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// One row satisfying the variable's condition.
    Var(usize),
    /// Patterns one after the other.
    Concat(Vec<Pattern>),
    /// The first alternative that leads to a match, left to right.
    Alt(Vec<Pattern>),
    /// `^`: the start of the partition (matches no row).
    Start,
    /// `$`: the end of the partition, i.e. of the input (matches no row).
    End,
    /// `{- inner -}`: rows mapped inside are part of the match but left out of the rows
    /// `ALL ROWS PER MATCH` returns.
    Exclude(Box<Pattern>),
    /// `inner` repeated `min..=max` times (`max` None: unbounded).
    Repeat {
        /// What repeats.
        inner: Box<Pattern>,
        /// Fewest repetitions.
        min: u32,
        /// Most repetitions, if bounded.
        max: Option<u32>,
        /// Greedy (prefer more) or reluctant (prefer fewer).
        greedy: bool,
    },
}

impl Pattern {
    /// Whether the pattern can match zero rows.
    pub fn matches_empty(&self) -> bool {
        match self {
            Pattern::Var(_) => false,
            Pattern::Start | Pattern::End => true,
            Pattern::Exclude(p) => p.matches_empty(),
            Pattern::Concat(ps) => ps.iter().all(Pattern::matches_empty),
            Pattern::Alt(ps) => ps.iter().any(Pattern::matches_empty),
            Pattern::Repeat { inner, min, .. } => *min == 0 || inner.matches_empty(),
        }
    }

    /// Whether the pattern uses `^`, `$` or `{- -}` (for the planner's checks).
    pub fn any(&self, test: &dyn Fn(&Pattern) -> bool) -> bool {
        test(self)
            || match self {
                Pattern::Concat(ps) | Pattern::Alt(ps) => ps.iter().any(|p| p.any(test)),
                Pattern::Exclude(p) => p.any(test),
                Pattern::Repeat { inner, .. } => inner.any(test),
                _ => false,
            }
    }

    /// Writes the pattern with variable names, e.g. `a (b | c)+? d`.
    pub fn display<'a>(&'a self, names: &'a [String]) -> impl fmt::Display + 'a {
        Shown {
            pattern: self,
            names,
        }
    }
}

struct Shown<'a> {
    pattern: &'a Pattern,
    names: &'a [String],
}

impl<'a> fmt::Display for Shown<'a> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sub = |p: &'a Pattern| Shown {
            pattern: p,
            names: self.names,
        };
        match self.pattern {
            Pattern::Var(v) => f.write_str(&self.names[*v]),
            Pattern::Start => f.write_str("^"),
            Pattern::End => f.write_str("$"),
            Pattern::Exclude(p) => write!(f, "{{- {} -}}", sub(p)),
            Pattern::Concat(ps) => {
                for (i, p) in ps.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    match p {
                        Pattern::Alt(_) => write!(f, "({})", sub(p))?,
                        _ => write!(f, "{}", sub(p))?,
                    }
                }
                Ok(())
            }
            Pattern::Alt(ps) => {
                for (i, p) in ps.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{}", sub(p))?;
                }
                Ok(())
            }
            Pattern::Repeat {
                inner,
                min,
                max,
                greedy,
            } => {
                match inner.as_ref() {
                    Pattern::Var(_) | Pattern::Exclude(_) => write!(f, "{}", sub(inner))?,
                    _ => write!(f, "({})", sub(inner))?,
                }
                match (min, max) {
                    (0, None) => f.write_str("*")?,
                    (1, None) => f.write_str("+")?,
                    (0, Some(1)) => f.write_str("?")?,
                    (n, Some(m)) if n == m => write!(f, "{{{n}}}")?,
                    (n, None) => write!(f, "{{{n},}}")?,
                    (n, Some(m)) => write!(f, "{{{n},{m}}}")?,
                }
                if !greedy {
                    f.write_str("?")?;
                }
                Ok(())
            }
        }
    }
}

/// One instruction of a compiled pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inst {
    /// Consume one row that satisfies variable `v`, then go on at the next instruction; the
    /// flag says the row is excluded from `ALL ROWS PER MATCH` output.
    Var(u16, bool),
    /// Go on only at the start of the partition (`^`).
    Start,
    /// Go on only at the end of the partition (`$`): a thread waits here for the next row
    /// (which ends it) or the end of the input (which lets it go on).
    End,
    /// Try both targets, the first with higher preference.
    Split(u32, u32),
    /// Go to the target.
    Jump(u32),
    /// A complete match.
    Match,
}

/// A compiled pattern; instruction 0 is the start.
#[derive(Debug, Clone)]
pub struct Program {
    insts: Vec<Inst>,
}

impl Program {
    /// Compiles `pattern`; fails if it unrolls too far.
    pub fn compile(pattern: &Pattern) -> Result<Program> {
        let mut insts = Vec::new();
        emit(pattern, false, &mut insts)?;
        insts.push(Inst::Match);
        Ok(Program { insts })
    }

    /// The instruction at `pc`.
    pub fn inst(&self, pc: u32) -> Inst {
        self.insts[pc as usize]
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// Whether the program is empty (never: it ends with `Match`).
    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }

    /// The instructions reachable from `pc` without consuming a row that consume one,
    /// wait for the end (`$`) or match, in preference order, each once. `at` says where in
    /// the partition the position is (for `^` and `$`). `seen` is scratch space of `len()`
    /// flags. Iterative, so that no pattern can overflow the stack.
    pub fn closure(&self, pc: u32, at: Position, seen: &mut [bool], out: &mut Vec<u32>) {
        seen.iter_mut().for_each(|s| *s = false);
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if std::mem::replace(&mut seen[pc as usize], true) {
                continue;
            }
            match self.inst(pc) {
                Inst::Var(..) | Inst::Match => out.push(pc),
                Inst::Start if at == Position::First => stack.push(pc + 1),
                Inst::Start => {}
                Inst::End if at == Position::End => stack.push(pc + 1),
                Inst::End => out.push(pc),
                Inst::Jump(to) => stack.push(to),
                Inst::Split(first, second) => {
                    stack.push(second);
                    stack.push(first);
                }
            }
        }
    }
}

/// Where a closure is taken: before the partition's first row, between two rows, or after
/// the last row of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// Before the partition's first row: `^` holds.
    First,
    /// Between rows: neither holds (`$` waits).
    Inside,
    /// After the last row: `$` holds.
    End,
}

fn emit(p: &Pattern, excluded: bool, out: &mut Vec<Inst>) -> Result<()> {
    if out.len() > MAX_PROGRAM {
        return Err(Error::NotSupported(format!(
            "the PATTERN unrolls to more than {MAX_PROGRAM} steps; use smaller {{n,m}} bounds"
        )));
    }
    match p {
        Pattern::Var(v) => out.push(Inst::Var(*v as u16, excluded)),
        Pattern::Start => out.push(Inst::Start),
        Pattern::End => out.push(Inst::End),
        Pattern::Exclude(p) => emit(p, true, out)?,
        Pattern::Concat(ps) => {
            for p in ps {
                emit(p, excluded, out)?;
            }
        }
        Pattern::Alt(ps) => {
            let mut jumps = Vec::new();
            for (i, p) in ps.iter().enumerate() {
                if i + 1 == ps.len() {
                    emit(p, excluded, out)?;
                } else {
                    let split = out.len();
                    out.push(Inst::Match);
                    emit(p, excluded, out)?;
                    jumps.push(out.len());
                    out.push(Inst::Match);
                    out[split] = Inst::Split(split as u32 + 1, out.len() as u32);
                }
            }
            let end = out.len() as u32;
            for j in jumps {
                out[j] = Inst::Jump(end);
            }
        }
        Pattern::Repeat {
            inner,
            min,
            max,
            greedy,
        } => {
            for _ in 0..*min {
                emit(inner, excluded, out)?;
            }
            let order = |body: u32, exit: u32| {
                if *greedy {
                    Inst::Split(body, exit)
                } else {
                    Inst::Split(exit, body)
                }
            };
            match max {
                None => {
                    let split = out.len();
                    out.push(Inst::Match);
                    emit(inner, excluded, out)?;
                    out.push(Inst::Jump(split as u32));
                    out[split] = order(split as u32 + 1, out.len() as u32);
                }
                Some(max) => {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(out.len());
                        out.push(Inst::Match);
                        emit(inner, excluded, out)?;
                    }
                    let end = out.len() as u32;
                    for s in splits {
                        out[s] = order(s as u32 + 1, end);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(v: usize) -> Pattern {
        Pattern::Var(v)
    }

    fn rep(p: Pattern, min: u32, max: Option<u32>, greedy: bool) -> Pattern {
        Pattern::Repeat {
            inner: Box::new(p),
            min,
            max,
            greedy,
        }
    }

    fn starts(prog: &Program, pc: u32) -> Vec<Inst> {
        let mut seen = vec![false; prog.len()];
        let mut out = Vec::new();
        prog.closure(pc, Position::Inside, &mut seen, &mut out);
        out.into_iter().map(|pc| prog.inst(pc)).collect()
    }

    #[test]
    fn greedy_prefers_more_and_reluctant_fewer() {
        // a b* c: after a, the greedy loop offers b before c.
        let greedy = Program::compile(&Pattern::Concat(vec![
            var(0),
            rep(var(1), 0, None, true),
            var(2),
        ]))
        .unwrap();
        assert_eq!(
            starts(&greedy, 1),
            vec![Inst::Var(1, false), Inst::Var(2, false)]
        );
        let reluctant = Program::compile(&Pattern::Concat(vec![
            var(0),
            rep(var(1), 0, None, false),
            var(2),
        ]))
        .unwrap();
        assert_eq!(
            starts(&reluctant, 1),
            vec![Inst::Var(2, false), Inst::Var(1, false)]
        );
    }

    #[test]
    fn alternatives_in_order_and_bounded_repeats_unroll() {
        let alt = Program::compile(&Pattern::Alt(vec![var(0), var(1), var(2)])).unwrap();
        assert_eq!(
            starts(&alt, 0),
            vec![
                Inst::Var(0, false),
                Inst::Var(1, false),
                Inst::Var(2, false)
            ]
        );
        // a{2,3}: two mandatory a's, then an optional one.
        let p = Program::compile(&rep(var(0), 2, Some(3), true)).unwrap();
        let vars = (0..p.len() as u32)
            .filter(|&pc| p.inst(pc) == Inst::Var(0, false))
            .count();
        assert_eq!(vars, 3);
    }

    #[test]
    fn empty_patterns_compile_and_huge_unrolls_are_rejected() {
        // a*: the closure offers a first, then the empty match.
        let p = Program::compile(&rep(var(0), 0, None, true)).unwrap();
        assert_eq!(starts(&p, 0), vec![Inst::Var(0, false), Inst::Match]);
        // a*?: the empty match first.
        let p = Program::compile(&rep(var(0), 0, None, false)).unwrap();
        assert_eq!(starts(&p, 0), vec![Inst::Match, Inst::Var(0, false)]);
        assert!(Program::compile(&rep(var(0), 5000, Some(5000), true)).is_err());
        // A nullable body inside a loop must not loop forever in the closure.
        let p = Program::compile(&Pattern::Concat(vec![
            rep(rep(var(0), 0, Some(1), true), 0, None, true),
            var(1),
        ]))
        .unwrap();
        assert_eq!(
            starts(&p, 0),
            vec![Inst::Var(0, false), Inst::Var(1, false)]
        );
    }

    #[test]
    fn anchors_depend_on_the_position_and_exclusion_marks_rows() {
        // ^ a | b
        let p = Program::compile(&Pattern::Alt(vec![
            Pattern::Concat(vec![Pattern::Start, var(0)]),
            var(1),
        ]))
        .unwrap();
        let at = |pos| {
            let mut seen = vec![false; p.len()];
            let mut out = Vec::new();
            p.closure(0, pos, &mut seen, &mut out);
            out.into_iter().map(|pc| p.inst(pc)).collect::<Vec<_>>()
        };
        assert_eq!(
            at(Position::First),
            vec![Inst::Var(0, false), Inst::Var(1, false)]
        );
        assert_eq!(at(Position::Inside), vec![Inst::Var(1, false)]);
        // a $: after a, the thread waits at $ between rows and matches at the end.
        let p = Program::compile(&Pattern::Concat(vec![var(0), Pattern::End])).unwrap();
        let mut seen = vec![false; p.len()];
        let mut out = Vec::new();
        p.closure(1, Position::Inside, &mut seen, &mut out);
        assert_eq!(
            out.iter().map(|&pc| p.inst(pc)).collect::<Vec<_>>(),
            vec![Inst::End]
        );
        out.clear();
        p.closure(1, Position::End, &mut seen, &mut out);
        assert_eq!(
            out.iter().map(|&pc| p.inst(pc)).collect::<Vec<_>>(),
            vec![Inst::Match]
        );
        // a {- b -}
        let p = Program::compile(&Pattern::Concat(vec![
            var(0),
            Pattern::Exclude(Box::new(var(1))),
        ]))
        .unwrap();
        assert_eq!(p.inst(1), Inst::Var(1, true));
        let names = vec!["a".to_string(), "b".to_string()];
        let shown = Pattern::Concat(vec![
            Pattern::Start,
            var(0),
            Pattern::Exclude(Box::new(var(1))),
            Pattern::End,
        ]);
        assert_eq!(shown.display(&names).to_string(), "^ a {- b -} $");
    }

    #[test]
    fn displays_with_names() {
        let names = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let p = Pattern::Concat(vec![
            var(0),
            rep(Pattern::Alt(vec![var(1), var(2)]), 1, None, false),
            rep(var(2), 2, Some(4), true),
        ]);
        assert_eq!(p.display(&names).to_string(), "a (b | c)+? c{2,4}");
    }
}
