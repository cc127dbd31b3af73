//! MATCH_RECOGNIZE against a brute-force reference: random rows of `s (ts, k, v)` (bounded
//! disorder, random batch splits) through the engine, compared with a backtracking matcher
//! over all rows of each partition at once, written straight from the SQL:2016 rules: try
//! each start row in order, explore the pattern's alternatives in preference order (greedy
//! quantifiers take one more row first, reluctant ones one fewer, alternatives left to right),
//! the first complete match wins, then AFTER MATCH SKIP picks the next start.
//! Also: a snapshot taken mid-stream and restored into a freshly planned operator continues
//! exactly.

use crate::common;

use common::{batch, fmt_ts, render, Row, BASE, SEC};
use datafusion::arrow::array::RecordBatch;
use proptest::prelude::*;
use saql::operators::Operator;
use saql::time::{EventTime, Watermark};

/// The pattern, as the reference reads it.
#[derive(Debug, Clone)]
enum P {
    Var(usize),
    /// `{- v -}`: mapped, but not returned by ALL ROWS PER MATCH.
    Excluded(usize),
    /// `^`
    Start,
    /// `$`
    End,
    Cat(Vec<P>),
    Alt(Vec<P>),
    /// `PERMUTE (...)`: every order, lexicographic in the order written.
    Permute(Vec<P>),
    Rep(Box<P>, u32, Option<u32>, bool),
}

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const D: usize = 3;

fn var(v: usize) -> P {
    P::Var(v)
}

fn rep(p: P, min: u32, max: Option<u32>, greedy: bool) -> P {
    P::Rep(Box::new(p), min, max, greedy)
}

/// PATTERN texts, the same patterns for the reference, and whether every match maps a `b`
/// row that is not its first (so that `SKIP TO FIRST/LAST b` cannot fail).
fn patterns() -> Vec<(&'static str, P, bool)> {
    vec![
        ("a b", P::Cat(vec![var(A), var(B)]), true),
        (
            "a d*? b",
            P::Cat(vec![var(A), rep(var(D), 0, None, false), var(B)]),
            true,
        ),
        (
            "a+ b",
            P::Cat(vec![rep(var(A), 1, None, true), var(B)]),
            true,
        ),
        (
            "a+? b",
            P::Cat(vec![rep(var(A), 1, None, false), var(B)]),
            true,
        ),
        (
            "(a | c) b{1,2}",
            P::Cat(vec![
                P::Alt(vec![var(A), var(C)]),
                rep(var(B), 1, Some(2), true),
            ]),
            true,
        ),
        (
            "a c* b",
            P::Cat(vec![var(A), rep(var(C), 0, None, true), var(B)]),
            true,
        ),
        (
            "a (b | c)+? d",
            P::Cat(vec![
                var(A),
                rep(P::Alt(vec![var(B), var(C)]), 1, None, false),
                var(D),
            ]),
            false,
        ),
        (
            "c{2,3}? (a | b)?",
            P::Cat(vec![
                rep(var(C), 2, Some(3), false),
                rep(P::Alt(vec![var(A), var(B)]), 0, Some(1), true),
            ]),
            false,
        ),
        (
            "a b+",
            P::Cat(vec![var(A), rep(var(B), 1, None, true)]),
            true,
        ),
        (
            "(a b)+ c",
            P::Cat(vec![
                rep(P::Cat(vec![var(A), var(B)]), 1, None, true),
                var(C),
            ]),
            true,
        ),
        (
            "a d{0,2} b",
            P::Cat(vec![var(A), rep(var(D), 0, Some(2), true), var(B)]),
            true,
        ),
        // Anchors: only at the partition's first row; only at the end of the input.
        ("^ a b", P::Cat(vec![P::Start, var(A), var(B)]), true),
        (
            "a b+ $",
            P::Cat(vec![var(A), rep(var(B), 1, None, true), P::End]),
            true,
        ),
        (
            "^ a* $",
            P::Cat(vec![P::Start, rep(var(A), 0, None, true), P::End]),
            false,
        ),
        // Exclusion: d's rows are in the match but not returned.
        (
            "a {- d -} b",
            P::Cat(vec![var(A), P::Excluded(D), var(B)]),
            true,
        ),
        (
            "PERMUTE (a, c) b",
            P::Cat(vec![P::Permute(vec![var(A), var(C)]), var(B)]),
            true,
        ),
        // Patterns that match zero rows: empty matches.
        ("a*", rep(var(A), 0, None, true), false),
        (
            "a* b?",
            P::Cat(vec![
                rep(var(A), 0, None, true),
                rep(var(B), 0, Some(1), true),
            ]),
            false,
        ),
        (
            "a*? c?",
            P::Cat(vec![
                rep(var(A), 0, None, false),
                rep(var(C), 0, Some(1), true),
            ]),
            false,
        ),
    ]
}

/// The DEFINE conditions the reference's `holds` mirrors (`d` has none: any row).
const DEFINE: [(char, &str); 3] = [
    ('a', "a AS v < 2"),
    // `b.v >= a.v` and `PREV(v) < v` are compared directly on the values, `v > 2` per batch.
    ('b', "b AS v > 2 AND b.v >= a.v"),
    ('c', "c AS PREV(v) < v"),
];

const MEASURES: &str = "MATCH_NUMBER() AS mn, FIRST(ts) AS t0, LAST(ts) AS t1, COUNT(*) AS n, \
                        SUM(v) AS total, COUNT(u.*) AS nb, MAX(u.v) AS mb, LAST(a.v) AS la, \
                        CLASSIFIER() AS cls, FINAL COUNT(u.*) AS nu";

/// ALL ROWS PER MATCH: running and final measures, CLASSIFIER, a SUBSET, and navigation
/// (physical PREV/NEXT over the match's rows, logical FIRST/LAST offsets, and both nested).
const ALL_MEASURES: &str = "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n, \
                            FINAL COUNT(*) AS fin_n, RUNNING SUM(v) AS rs, FINAL LAST(v) AS fl, \
                            LAST(u.v) AS lu, PREV(v) AS pv, FIRST(v, 1) AS f1, \
                            NEXT(LAST(u.v, 1), 1) AS nx, MIN(u.v) AS mnu, MAX(v) AS mx, \
                            FIRST(u.v) AS fu";

#[derive(Debug, Clone, Copy)]
enum Skip {
    PastLast,
    NextRow,
    ToLastB,
    ToFirstB,
    /// `SKIP TO u`: SQL:2016's shorthand for `TO LAST u`, with u the SUBSET.
    ToU,
}

impl Skip {
    fn sql(self) -> &'static str {
        match self {
            Skip::PastLast => "AFTER MATCH SKIP PAST LAST ROW",
            Skip::NextRow => "AFTER MATCH SKIP TO NEXT ROW",
            Skip::ToLastB => "AFTER MATCH SKIP TO LAST b",
            Skip::ToFirstB => "AFTER MATCH SKIP TO FIRST b",
            Skip::ToU => "AFTER MATCH SKIP TO u",
        }
    }
}

/// `ALL ROWS PER MATCH` modes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rows {
    One,
    Show,
    Omit,
    Unmatched,
}

impl Rows {
    fn sql(self) -> &'static str {
        match self {
            Rows::One => "ONE ROW PER MATCH",
            Rows::Show => "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
            Rows::Omit => "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
            Rows::Unmatched => "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        }
    }
}

/// The variables of the SUBSET `u`: `a` and `b` if the pattern has them (every pattern has
/// `a` or `c`; then `c`).
fn subset(pattern: &str) -> Vec<usize> {
    let has = |v: char| pattern.contains(v);
    let mut u: Vec<usize> = [(A, 'a'), (B, 'b')]
        .into_iter()
        .filter(|(_, n)| has(*n))
        .map(|(v, _)| v)
        .collect();
    if u.is_empty() {
        u.push(C);
    }
    u
}

fn query(pattern: &str, within: Option<i64>, skip: Skip, rows: Rows) -> String {
    let within = within
        .map(|s| format!("WITHIN INTERVAL '{s}' SECOND"))
        .unwrap_or_default();
    // DEFINE may only name variables of the pattern.
    let define: Vec<&str> = DEFINE
        .iter()
        .filter(|(v, _)| pattern.contains(*v))
        .map(|(_, d)| *d)
        .collect();
    let names = ["A", "B", "C", "D"];
    let u: Vec<&str> = subset(pattern).into_iter().map(|v| names[v]).collect();
    let measures = if rows == Rows::One {
        MEASURES
    } else {
        ALL_MEASURES
    };
    format!(
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {measures} \
         {} {} PATTERN ({pattern}) SUBSET u = ({}) {within} DEFINE {})",
        rows.sql(),
        skip.sql(),
        u.join(", "),
        define.join(", ")
    )
}

/// One partition's rows in event-time order (ties in arrival order).
struct Part<'a> {
    rows: Vec<&'a Row>,
    within: Option<i64>,
}

/// A row mapped by a match: (row, variable, excluded).
type Bind = (usize, usize, bool);

/// A match found by the reference: its start row and its rows.
struct Found {
    start: usize,
    number: usize,
    binds: Vec<Bind>,
}

/// What the reference finds in one partition: matches, rows in no match (WITH UNMATCHED
/// ROWS), or the run-time error of a failed SKIP TO.
struct Outcome {
    matches: Vec<Found>,
    unmatched: Vec<usize>,
    error: bool,
}

impl Part<'_> {
    fn v(&self, i: usize) -> Option<i64> {
        self.rows[i].v
    }

    /// Whether row `i` satisfies variable `var` given the rows mapped so far.
    fn holds(&self, var: usize, i: usize, binds: &[Bind]) -> bool {
        let v = self.v(i);
        match var {
            A => v.is_some_and(|v| v < 2),
            B => {
                let last_a = binds
                    .iter()
                    .rev()
                    .find(|b| b.1 == A)
                    .and_then(|b| self.v(b.0));
                match (v, last_a) {
                    (Some(v), Some(a)) => v > 2 && v >= a,
                    _ => false,
                }
            }
            C => match (v, i.checked_sub(1).and_then(|p| self.v(p))) {
                (Some(v), Some(p)) => v > p,
                _ => false,
            },
            _ => true,
        }
    }

    /// Backtracking: the first way, in preference order, to match `stack` from row `pos`.
    fn go(&self, stack: &[P], pos: usize, start: usize, binds: &mut Vec<Bind>) -> bool {
        let Some((head, rest)) = stack.split_first() else {
            return true;
        };
        let with = |front: Vec<P>| {
            let mut s = front;
            s.extend_from_slice(rest);
            s
        };
        match head {
            P::Var(v) | P::Excluded(v) => {
                if pos >= self.rows.len() {
                    return false;
                }
                if let Some(w) = self.within {
                    if self.rows[pos].ts - self.rows[start].ts > w * SEC {
                        return false;
                    }
                }
                if !self.holds(*v, pos, binds) {
                    return false;
                }
                binds.push((pos, *v, matches!(head, P::Excluded(_))));
                if self.go(rest, pos + 1, start, binds) {
                    return true;
                }
                binds.pop();
                false
            }
            P::Start => pos == 0 && self.go(rest, pos, start, binds),
            P::End => pos == self.rows.len() && self.go(rest, pos, start, binds),
            P::Cat(ps) => self.go(&with(ps.clone()), pos, start, binds),
            P::Alt(ps) => ps
                .iter()
                .any(|p| self.go(&with(vec![p.clone()]), pos, start, binds)),
            P::Permute(ps) => (0..ps.len()).any(|i| {
                let mut others = ps.clone();
                let first = others.remove(i);
                let mut front = vec![first];
                if !others.is_empty() {
                    front.push(P::Permute(others));
                }
                self.go(&with(front), pos, start, binds)
            }),
            P::Rep(inner, min, max, greedy) => {
                let less = |n: Option<u32>| n.map(|n| n - 1);
                if *min > 0 {
                    let again = P::Rep(inner.clone(), min - 1, less(*max), *greedy);
                    return self.go(&with(vec![(**inner).clone(), again]), pos, start, binds);
                }
                if *max == Some(0) {
                    return self.go(rest, pos, start, binds);
                }
                let again = P::Rep(inner.clone(), 0, less(*max), *greedy);
                let more = with(vec![(**inner).clone(), again]);
                // Greedy tries one more repetition first, reluctant one fewer.
                let (first, second): (&[P], &[P]) = if *greedy {
                    (&more, rest)
                } else {
                    (rest, &more)
                };
                self.go(first, pos, start, binds) || self.go(second, pos, start, binds)
            }
        }
    }

    /// Every match in order, with AFTER MATCH SKIP applied (SKIP TO fails on a match that
    /// maps no row of its target, or whose target is the match's first row).
    fn outcome(&self, pattern: &P, skip: Skip, u: &[usize]) -> Outcome {
        let mut out = Outcome {
            matches: Vec::new(),
            unmatched: Vec::new(),
            error: false,
        };
        let mut start = 0;
        let mut covered = 0;
        while start < self.rows.len() {
            let mut binds = Vec::new();
            if !self.go(std::slice::from_ref(pattern), start, start, &mut binds) {
                if start >= covered {
                    out.unmatched.push(start);
                }
                start += 1;
                continue;
            }
            let first = start;
            let last = binds.last().map_or(start, |b| b.0);
            covered = covered.max(last + 1);
            let rows_of = |vars: &[usize]| -> Vec<usize> {
                binds
                    .iter()
                    .filter(|b| vars.contains(&b.1))
                    .map(|b| b.0)
                    .collect()
            };
            let target = match skip {
                _ if binds.is_empty() => Ok(first + 1),
                Skip::PastLast => Ok(last + 1),
                Skip::NextRow => Ok(first + 1),
                Skip::ToLastB => rows_of(&[B]).last().copied().ok_or(()),
                Skip::ToFirstB => rows_of(&[B]).first().copied().ok_or(()),
                Skip::ToU => rows_of(u).last().copied().ok_or(()),
            };
            out.matches.push(Found {
                start,
                number: out.matches.len() + 1,
                binds,
            });
            match target {
                Ok(next) if next > first => start = next,
                _ => {
                    out.error = true;
                    return out;
                }
            }
        }
        out
    }
}

fn opt(v: Option<i64>) -> String {
    v.map_or("NULL".to_string(), |v| v.to_string())
}

/// ONE ROW PER MATCH: each match's measures (MEASURES above), in the output's order.
fn one_row(part: &Part, k: i64, m: &Found, u: &[usize]) -> String {
    let names = ["A", "B", "C", "D"];
    let binds = &m.binds;
    let vals: Vec<i64> = binds.iter().filter_map(|b| part.v(b.0)).collect();
    let u_vals: Vec<i64> = binds
        .iter()
        .filter(|b| u.contains(&b.1))
        .filter_map(|b| part.v(b.0))
        .collect();
    let last_a = binds.iter().rev().find(|b| b.1 == A).map(|b| part.v(b.0));
    let ts = |b: Option<&Bind>| b.map_or("NULL".to_string(), |b| fmt_ts(part.rows[b.0].ts));
    [
        k.to_string(),
        m.number.to_string(),
        ts(binds.first()),
        ts(binds.last()),
        binds.len().to_string(),
        opt((!vals.is_empty()).then(|| vals.iter().sum())),
        binds
            .iter()
            .filter(|b| u.contains(&b.1))
            .count()
            .to_string(),
        opt(u_vals.iter().max().copied()),
        opt(last_a.flatten()),
        binds
            .last()
            .map_or("NULL".to_string(), |b| names[b.1].to_string()),
        binds
            .iter()
            .filter(|b| u.contains(&b.1))
            .count()
            .to_string(),
    ]
    .join("|")
}

/// ALL ROWS PER MATCH: k, ts, the measures (ALL_MEASURES above), v.
fn all_rows(part: &Part, k: i64, m: &Found, rows: Rows, u: &[usize], out: &mut Vec<String>) {
    let names = ["A", "B", "C", "D"];
    let line = |row: usize, measures: Vec<String>| {
        let mut cells = vec![k.to_string(), fmt_ts(part.rows[row].ts)];
        cells.extend(measures);
        cells.push(opt(part.v(row)));
        cells.join("|")
    };
    let sum = |bs: &[Bind]| {
        let vals: Vec<i64> = bs.iter().filter_map(|b| part.v(b.0)).collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<i64>())
    };
    let final_last = m.binds.last().and_then(|b| part.v(b.0));
    if m.binds.is_empty() {
        if rows != Rows::Omit {
            let mut measures = vec![m.number.to_string(), "NULL".into(), "0".into(), "0".into()];
            measures.extend(std::iter::repeat_n("NULL".to_string(), 9));
            out.push(line(m.start, measures));
        }
        return;
    }
    for (j, b) in m.binds.iter().enumerate() {
        if b.2 {
            continue;
        }
        let upto = &m.binds[..=j];
        let last_u = upto.iter().rev().find(|x| u.contains(&x.1));
        let v_at = |i: Option<usize>| opt(i.and_then(|i| upto.get(i)).and_then(|x| part.v(x.0)));
        // NEXT(LAST(u.v, 1), 1): the row after u's second-to-last row, among the rows so far.
        let u_rows: Vec<usize> = (0..upto.len())
            .filter(|&i| u.contains(&upto[i].1))
            .collect();
        let nx = u_rows.len().checked_sub(2).map(|i| u_rows[i] + 1);
        let measures = vec![
            m.number.to_string(),
            names[b.1].to_string(),
            upto.len().to_string(),
            m.binds.len().to_string(),
            opt(sum(upto)),
            opt(final_last),
            opt(last_u.and_then(|x| part.v(x.0))),
            v_at(j.checked_sub(1)),
            // FIRST(v, 1): the match is complete, so its second row, past this one too.
            opt(m.binds.get(1).and_then(|x| part.v(x.0))),
            v_at(nx),
            opt(u_rows.iter().filter_map(|&i| part.v(upto[i].0)).min()),
            opt(upto.iter().filter_map(|x| part.v(x.0)).max()),
            v_at(u_rows.first().copied()),
        ];
        out.push(line(b.0, measures));
    }
}

/// The query's rows over all partitions (sorted), or None if it fails at run time.
fn reference(
    rows: &[Row],
    text: &str,
    pattern: &P,
    within: Option<i64>,
    skip: Skip,
    mode: Rows,
) -> Option<Vec<String>> {
    let mut keys: Vec<i64> = rows.iter().map(|r| r.k).collect();
    keys.sort();
    keys.dedup();
    let u = subset(text);
    let mut out = Vec::new();
    for k in keys {
        let mut part: Vec<&Row> = rows.iter().filter(|r| r.k == k).collect();
        part.sort_by_key(|r| r.ts);
        let part = Part { rows: part, within };
        let found = part.outcome(pattern, skip, &u);
        if found.error {
            return None;
        }
        for m in &found.matches {
            match mode {
                Rows::One => out.push(one_row(&part, k, m, &u)),
                _ => all_rows(&part, k, m, mode, &u, &mut out),
            }
        }
        if mode == Rows::Unmatched {
            for &r in &found.unmatched {
                let mut cells = vec![k.to_string(), fmt_ts(part.rows[r].ts)];
                cells.extend(std::iter::repeat_n("NULL".to_string(), 13));
                cells.push(opt(part.v(r)));
                out.push(cells.join("|"));
            }
        }
    }
    out.sort();
    Some(out)
}

/// Rows one second apart with up to 3 s of disorder (inside the 5 s watermark delay, so none
/// is late), keys 0..2, values 0..6 with a few NULLs; and batch lengths.
fn rows_strategy() -> impl Strategy<Value = (Vec<Row>, Vec<usize>)> {
    (
        prop::collection::vec(
            (0i64..3000, 0i64..2, prop::option::weighted(0.9, 0i64..6)),
            0..60,
        ),
        prop::collection::vec(1usize..12, 1..6),
    )
        .prop_map(|(raw, splits)| {
            let rows = raw
                .into_iter()
                .enumerate()
                .map(|(i, (jitter, k, v))| Row {
                    ts: BASE + i as i64 * SEC + jitter * 1_000_000,
                    k,
                    v,
                })
                .collect();
            (rows, splits)
        })
}

fn skip_strategy() -> impl Strategy<Value = Skip> {
    prop_oneof![
        Just(Skip::PastLast),
        Just(Skip::NextRow),
        Just(Skip::ToLastB),
        Just(Skip::ToFirstB),
        Just(Skip::ToU),
    ]
}

fn rows_mode_strategy() -> impl Strategy<Value = Rows> {
    prop_oneof![
        Just(Rows::One),
        Just(Rows::Show),
        Just(Rows::Omit),
        Just(Rows::Unmatched)
    ]
}

/// The operator of `sql`, planned afresh.
fn operator(sql: &str) -> Box<dyn Operator> {
    let mut catalog = saql::plan::Catalog::default();
    let saql::sql::Statement::CreateStream(cs) = saql::sql::parse_one(
        "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
    )
    .unwrap() else {
        panic!("stream")
    };
    catalog
        .add_stream(saql::plan::StreamDef::try_new(&cs).unwrap())
        .unwrap();
    let saql::sql::Statement::CreateQuery(cq) =
        saql::sql::parse_one(&format!("CREATE CONTINUOUS QUERY q AS {sql}")).unwrap()
    else {
        panic!("query")
    };
    let plan = saql::plan::plan_continuous(&cq.query, &cq.clauses, &catalog).unwrap();
    assert_eq!(plan.specs.len(), 2, "pattern, then SELECT *'s projection");
    plan.specs[0].build().unwrap()
}

/// Feeds `rows` to the operator in batches of the lengths in `splits` (cycled), each
/// followed by the watermark; None once the operator fails.
fn feed(
    op: &mut dyn Operator,
    rows: &[Row],
    splits: &[usize],
    out: &mut Vec<RecordBatch>,
) -> Option<()> {
    let mut start = 0;
    let mut i = 0;
    while start < rows.len() {
        let len = splits[i % splits.len()].min(rows.len() - start);
        let chunk = &rows[start..start + len];
        out.extend(op.process_batch(batch(chunk)).ok()?);
        let max = chunk.iter().map(|r| r.ts).max().unwrap();
        out.extend(op.on_watermark(Watermark(EventTime(max - 5 * SEC))).ok()?);
        start += len;
        i += 1;
    }
    Some(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// ONE ROW PER MATCH through the whole engine (the SKIP TO targets that cannot fail).
    #[test]
    fn pattern_matches_the_backtracking_reference(
        (rows, splits) in rows_strategy(),
        which in 0usize..19,
        within in prop_oneof![Just(None), Just(Some(3i64)), Just(Some(10i64))],
        skip in skip_strategy(),
    ) {
        let (text, pattern, b_always) = patterns().swap_remove(which);
        let skip = match skip {
            Skip::ToLastB | Skip::ToFirstB | Skip::ToU if !b_always => Skip::PastLast,
            other => other,
        };
        let sql = query(text, within, skip, Rows::One);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = render(&common::run(&rt, &sql, &rows, &splits));
        let want = reference(&rows, text, &pattern, within, skip, Rows::One);
        prop_assert_eq!(Some(got), want, "{}", sql);
    }

    /// Every row-per-match mode, every SKIP (failures included), random batch splits, and
    /// a snapshot taken after a random prefix restored into a freshly planned operator.
    #[test]
    fn all_rows_per_match_with_snapshot_matches_the_reference(
        (rows, splits) in rows_strategy(),
        which in 0usize..19,
        within in prop_oneof![Just(None), Just(Some(3i64)), Just(Some(10i64))],
        skip in skip_strategy(),
        mode in rows_mode_strategy(),
        cut in 0usize..60,
    ) {
        let (text, pattern, _) = patterns().swap_remove(which);
        // An excluded row is neither returned nor unmatched: the planner refuses the pair.
        let mode = if mode == Rows::Unmatched && text.contains("{-") { Rows::Show } else { mode };
        // SKIP TO may only name a variable of the pattern.
        let skip = match skip {
            Skip::ToLastB | Skip::ToFirstB if !text.contains('b') => Skip::ToU,
            other => other,
        };
        let sql = query(text, within, skip, mode);
        let cut = cut.min(rows.len());
        let (before, after) = rows.split_at(cut);
        let mut out = Vec::new();
        let mut first = operator(&sql);
        let mut run = || -> Option<()> {
            feed(first.as_mut(), before, &splits, &mut out)?;
            let mut second = operator(&sql);
            second.restore(&first.snapshot().ok()?.encode().ok()?).ok()?;
            feed(second.as_mut(), after, &splits, &mut out)?;
            out.extend(second.on_watermark(Watermark::END).ok()?);
            Some(())
        };
        let got = run().map(|()| render(&out));
        let want = reference(&rows, text, &pattern, within, skip, mode);
        prop_assert_eq!(got, want, "{}", sql);
    }

    /// A snapshot taken after any prefix, restored into a freshly planned operator, continues
    /// as if never interrupted; so do other batch splits. Also with EMIT TIMEOUT, which the
    /// backtracking reference does not model (which thread of an attempt is the preferred one
    /// when WITHIN ends it is the matcher's own notion): the timed-out rows must not depend on
    /// how the input was cut.
    #[test]
    fn snapshot_restore_continues_exactly(
        (rows, splits) in rows_strategy(),
        which in 0usize..19,
        cut in 0usize..60,
        mode in rows_mode_strategy(),
        timeout in any::<bool>(),
    ) {
        let (text, _, _) = patterns().swap_remove(which);
        let mode = if mode == Rows::Unmatched && text.contains("{-") { Rows::Show } else { mode };
        let mut sql = query(text, Some(10), Skip::PastLast, mode);
        if timeout {
            sql = sql.replace("SECOND DEFINE", "SECOND EMIT TIMEOUT DEFINE");
        }
        let mut whole = operator(&sql);
        let mut expected = Vec::new();
        feed(whole.as_mut(), &rows, &splits, &mut expected).unwrap();
        expected.extend(whole.on_watermark(Watermark::END).unwrap());

        let cut = cut.min(rows.len());
        let (before, after) = rows.split_at(cut);
        let mut first = operator(&sql);
        let mut got = Vec::new();
        feed(first.as_mut(), before, &[5], &mut got).unwrap();
        let mut second = operator(&sql);
        second.restore(&first.snapshot().unwrap().encode().unwrap()).unwrap();
        feed(second.as_mut(), after, &[5], &mut got).unwrap();
        got.extend(second.on_watermark(Watermark::END).unwrap());
        prop_assert_eq!(render(&got), render(&expected), "{}", sql);
    }
}

/// The reference itself on hand-worked cases, so that a wrong reference cannot hide a wrong
/// matcher.
#[test]
fn reference_on_worked_cases() {
    let rows: Vec<Row> = [0, 4, 1, 3]
        .iter()
        .enumerate()
        .map(|(i, &v)| Row {
            ts: BASE + i as i64 * SEC,
            k: 0,
            v: Some(v),
        })
        .collect();
    let (text, ab, _) = patterns().swap_remove(0);
    // Values 0, 4, 1, 3 on one key: `a b` matches (0, 4) and (1, 3).
    let got = reference(&rows, text, &ab, None, Skip::PastLast, Rows::One).unwrap();
    assert_eq!(got.len(), 2);
    assert!(got[0].starts_with("0|1|"), "{got:?}");
    // Second match: a 1, b 3: 3 > 2 and 3 >= 1; 2 rows, sum 4, both in u = (a, b), the
    // largest 3, last a 1, the last row a b.
    assert!(got[1].ends_with("|2|4|2|3|1|B|2"), "{got:?}");
    // All rows: the first match's rows, running count 1 then 2, final count 2.
    let got = reference(&rows, text, &ab, None, Skip::PastLast, Rows::Show).unwrap();
    assert_eq!(got.len(), 4, "{got:?}");
    // PREV(v) is the row before in the match, FIRST(v, 1) its second row (the match is
    // complete: on its first row too); NEXT(LAST(u.v, 1), 1) is the row after u's
    // second-to-last row so far: on the second row, after the first.
    assert!(
        got[0].ends_with("|1|A|1|2|0|4|0|NULL|4|NULL|0|0|0|0"),
        "{got:?}"
    );
    assert!(got[1].ends_with("|1|B|2|2|4|4|4|0|4|4|0|4|0|4"), "{got:?}");
    // `a*` over 0, 4, 1, 3: a at 0, an empty match at 4, a at 1, an empty match at 3.
    let (text, star, _) = patterns().swap_remove(16);
    assert_eq!(text, "a*");
    let got = reference(&rows, text, &star, None, Skip::PastLast, Rows::Show).unwrap();
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(
        got.iter()
            .any(|l| l.ends_with("|2|NULL|0|0|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|4")),
        "{got:?}"
    );
    let got = reference(&rows, text, &star, None, Skip::PastLast, Rows::Omit).unwrap();
    assert_eq!(got.len(), 2, "{got:?}");
    // SKIP TO FIRST b after `a b`: b is the match's second row, so the next attempt starts
    // there; with `c{2,3}? (a | b)?` a match may have no b: the query fails.
    let (text, p, _) = patterns().swap_remove(7);
    let rising: Vec<Row> = (0..4)
        .map(|i| Row {
            ts: BASE + i * SEC,
            k: 0,
            v: Some(i),
        })
        .collect();
    assert!(reference(&rising, text, &p, None, Skip::ToFirstB, Rows::One).is_none());
    // WITH UNMATCHED ROWS: 5 is in no match of `a b`.
    let mut more = rows.clone();
    more.push(Row {
        ts: BASE + 4 * SEC,
        k: 0,
        v: Some(5),
    });
    let got = reference(&more, "a b", &ab, None, Skip::PastLast, Rows::Unmatched).unwrap();
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(got.iter().any(
        |l| l.ends_with("|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|5")
    ));
}
