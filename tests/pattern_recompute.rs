//! MATCH_RECOGNIZE against a brute-force reference: random rows of `s (ts, k, v)` (bounded
//! disorder, random batch splits) through the engine, compared with a backtracking matcher
//! over all rows of each partition at once, written straight from the SQL:2016 rules: try
//! each start row in order, explore the pattern's alternatives in preference order (greedy
//! quantifiers take one more row first, reluctant ones one fewer, alternatives left to right),
//! the first complete match wins, then AFTER MATCH SKIP picks the next start.
//! Also: a snapshot taken mid-stream and restored into a freshly planned operator continues
//! exactly.

mod common;

use common::{batch, fmt_ts, render, Row, BASE, SEC};
use proptest::prelude::*;
use saql::operators::Operator;
use saql::time::{EventTime, Watermark};

/// The pattern, as the reference reads it.
#[derive(Debug, Clone)]
enum P {
    Var(usize),
    Cat(Vec<P>),
    Alt(Vec<P>),
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

/// PATTERN texts and the same patterns for the reference.
fn patterns() -> Vec<(&'static str, P)> {
    vec![
        ("a b", P::Cat(vec![var(A), var(B)])),
        (
            "a d*? b",
            P::Cat(vec![var(A), rep(var(D), 0, None, false), var(B)]),
        ),
        ("a+ b", P::Cat(vec![rep(var(A), 1, None, true), var(B)])),
        ("a+? b", P::Cat(vec![rep(var(A), 1, None, false), var(B)])),
        (
            "(a | c) b{1,2}",
            P::Cat(vec![
                P::Alt(vec![var(A), var(C)]),
                rep(var(B), 1, Some(2), true),
            ]),
        ),
        (
            "a c* b",
            P::Cat(vec![var(A), rep(var(C), 0, None, true), var(B)]),
        ),
        (
            "a (b | c)+? d",
            P::Cat(vec![
                var(A),
                rep(P::Alt(vec![var(B), var(C)]), 1, None, false),
                var(D),
            ]),
        ),
        (
            "c{2,3}? (a | b)?",
            P::Cat(vec![
                rep(var(C), 2, Some(3), false),
                rep(P::Alt(vec![var(A), var(B)]), 0, Some(1), true),
            ]),
        ),
        ("a b+", P::Cat(vec![var(A), rep(var(B), 1, None, true)])),
        (
            "(a b)+ c",
            P::Cat(vec![
                rep(P::Cat(vec![var(A), var(B)]), 1, None, true),
                var(C),
            ]),
        ),
        (
            "a d{0,2} b",
            P::Cat(vec![var(A), rep(var(D), 0, Some(2), true), var(B)]),
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
                        SUM(v) AS total, COUNT(b.*) AS nb, MAX(b.v) AS mb, LAST(a.v) AS la";

#[derive(Debug, Clone, Copy)]
enum Skip {
    PastLast,
    NextRow,
    ToLastB,
    ToFirstB,
}

impl Skip {
    fn sql(self) -> &'static str {
        match self {
            Skip::PastLast => "AFTER MATCH SKIP PAST LAST ROW",
            Skip::NextRow => "AFTER MATCH SKIP TO NEXT ROW",
            Skip::ToLastB => "AFTER MATCH SKIP TO LAST b",
            Skip::ToFirstB => "AFTER MATCH SKIP TO FIRST b",
        }
    }
}

fn query(pattern: &str, within: Option<i64>, skip: Skip) -> String {
    let within = within
        .map(|s| format!("WITHIN INTERVAL '{s}' SECOND"))
        .unwrap_or_default();
    // DEFINE may only name variables of the pattern.
    let define: Vec<&str> = DEFINE
        .iter()
        .filter(|(v, _)| pattern.contains(*v))
        .map(|(_, d)| *d)
        .collect();
    format!(
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {MEASURES} \
         ONE ROW PER MATCH {} PATTERN ({pattern}) {within} DEFINE {})",
        skip.sql(),
        define.join(", ")
    )
}

/// One partition's rows in event-time order (ties in arrival order).
struct Part<'a> {
    rows: Vec<&'a Row>,
    within: Option<i64>,
}

impl Part<'_> {
    fn v(&self, i: usize) -> Option<i64> {
        self.rows[i].v
    }

    /// Whether row `i` satisfies variable `var` given the rows mapped so far.
    fn holds(&self, var: usize, i: usize, binds: &[(usize, usize)]) -> bool {
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
    fn go(&self, stack: &[P], pos: usize, start: usize, binds: &mut Vec<(usize, usize)>) -> bool {
        let Some((head, rest)) = stack.split_first() else {
            return true;
        };
        let with = |front: Vec<P>| {
            let mut s = front;
            s.extend_from_slice(rest);
            s
        };
        match head {
            P::Var(v) => {
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
                binds.push((pos, *v));
                if self.go(rest, pos + 1, start, binds) {
                    return true;
                }
                binds.pop();
                false
            }
            P::Cat(ps) => self.go(&with(ps.clone()), pos, start, binds),
            P::Alt(ps) => ps
                .iter()
                .any(|p| self.go(&with(vec![p.clone()]), pos, start, binds)),
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

    /// Every match, in order, as the measures' rendered values.
    fn matches(&self, k: i64, pattern: &P, skip: Skip) -> Vec<String> {
        let mut out = Vec::new();
        let mut start = 0;
        let mut number = 0;
        while start < self.rows.len() {
            let mut binds = Vec::new();
            if !self.go(std::slice::from_ref(pattern), start, start, &mut binds) {
                start += 1;
                continue;
            }
            number += 1;
            let vals: Vec<i64> = binds.iter().filter_map(|b| self.v(b.0)).collect();
            let b_vals: Vec<i64> = binds
                .iter()
                .filter(|b| b.1 == B)
                .filter_map(|b| self.v(b.0))
                .collect();
            let opt = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
            let last_a = binds.iter().rev().find(|b| b.1 == A).map(|b| self.v(b.0));
            out.push(
                [
                    k.to_string(),
                    number.to_string(),
                    fmt_ts(self.rows[binds[0].0].ts),
                    fmt_ts(self.rows[binds.last().unwrap().0].ts),
                    binds.len().to_string(),
                    opt((!vals.is_empty()).then(|| vals.iter().sum())),
                    binds.iter().filter(|b| b.1 == B).count().to_string(),
                    opt(b_vals.iter().max().copied()),
                    opt(last_a.flatten()),
                ]
                .join("|"),
            );
            let first = binds[0].0;
            let last = binds.last().unwrap().0;
            let b_rows: Vec<usize> = binds.iter().filter(|b| b.1 == B).map(|b| b.0).collect();
            let next = match skip {
                Skip::PastLast => last + 1,
                Skip::NextRow => first + 1,
                Skip::ToLastB => b_rows.last().copied().unwrap_or(first + 1),
                Skip::ToFirstB => b_rows.first().copied().unwrap_or(first + 1),
            };
            start = next.max(first + 1);
        }
        out
    }
}

fn reference(rows: &[Row], pattern: &P, within: Option<i64>, skip: Skip) -> Vec<String> {
    let mut keys: Vec<i64> = rows.iter().map(|r| r.k).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        let mut part: Vec<&Row> = rows.iter().filter(|r| r.k == k).collect();
        part.sort_by_key(|r| r.ts);
        out.extend(Part { rows: part, within }.matches(k, pattern, skip));
    }
    out.sort();
    out
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
        Just(Skip::ToFirstB)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn pattern_matches_the_backtracking_reference(
        (rows, splits) in rows_strategy(),
        which in 0usize..11,
        within in prop_oneof![Just(None), Just(Some(3i64)), Just(Some(10i64))],
        skip in skip_strategy(),
    ) {
        let (text, pattern) = patterns().swap_remove(which);
        let sql = query(text, within, skip);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = render(&common::run(&rt, &sql, &rows, &splits));
        let want = reference(&rows, &pattern, within, skip);
        prop_assert_eq!(got, want, "{}", sql);
    }

    /// A snapshot taken after any prefix, restored into a freshly planned operator, continues
    /// as if never interrupted.
    #[test]
    fn snapshot_restore_continues_exactly(
        (rows, _splits) in rows_strategy(),
        which in 0usize..11,
        cut in 0usize..60,
    ) {
        let (text, _) = patterns().swap_remove(which);
        let sql = query(text, Some(10), Skip::PastLast);
        let plan = || {
            let mut catalog = saql::plan::Catalog::default();
            let saql::sql::Statement::CreateStream(cs) = saql::sql::parse_one(
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
            ).unwrap() else { panic!("stream") };
            catalog.add_stream(saql::plan::StreamDef::try_new(&cs).unwrap()).unwrap();
            let saql::sql::Statement::CreateQuery(cq) =
                saql::sql::parse_one(&format!("CREATE CONTINUOUS QUERY q AS {sql}")).unwrap()
            else { panic!("query") };
            let plan = saql::plan::plan_continuous(&cq.query, &cq.clauses, &catalog).unwrap();
            assert_eq!(plan.specs.len(), 2, "pattern, then SELECT *'s projection");
            plan.specs[0].build().unwrap()
        };
        let feed = |op: &mut Box<dyn Operator>, rows: &[Row], out: &mut Vec<_>| {
            for chunk in rows.chunks(5) {
                out.extend(op.process_batch(batch(chunk)).unwrap());
                let max = chunk.iter().map(|r| r.ts).max().unwrap();
                out.extend(op.on_watermark(Watermark(EventTime(max - 5 * SEC))).unwrap());
            }
        };
        let mut whole = plan();
        let mut expected = Vec::new();
        feed(&mut whole, &rows, &mut expected);
        expected.extend(whole.on_watermark(Watermark::END).unwrap());

        let cut = cut.min(rows.len());
        let (before, after) = rows.split_at(cut);
        let mut first = plan();
        let mut got = Vec::new();
        feed(&mut first, before, &mut got);
        let mut second = plan();
        second.restore(&first.snapshot().unwrap().encode().unwrap()).unwrap();
        feed(&mut second, after, &mut got);
        got.extend(second.on_watermark(Watermark::END).unwrap());
        prop_assert_eq!(render(&got), render(&expected), "{}", sql);
    }
}

/// The reference itself on a hand-worked case, so that a wrong reference cannot hide a wrong
/// matcher: values 0, 4, 1, 3 on one key; `a b` matches (0, 4) and (1, 3).
#[test]
fn reference_on_a_worked_case() {
    let rows: Vec<Row> = [0, 4, 1, 3]
        .iter()
        .enumerate()
        .map(|(i, &v)| Row {
            ts: BASE + i as i64 * SEC,
            k: 0,
            v: Some(v),
        })
        .collect();
    let (_, ab) = patterns().swap_remove(0);
    let got = reference(&rows, &ab, None, Skip::PastLast);
    assert_eq!(got.len(), 2);
    assert!(got[0].starts_with("0|1|"), "{got:?}");
    // Second match: a 1, b 3: 3 > 2 and 3 >= 1.
    assert!(got[1].ends_with("|2|4|1|3|1"), "{got:?}");
}
