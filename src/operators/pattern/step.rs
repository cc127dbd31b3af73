//! The Pike VM's step: a row offered to a partition's threads (which may map it, which
//! start an attempt), the end of the input, and WITHIN's expiry.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::array::BooleanArray;

use super::{
    rows_limit, Binding, Current, EmptyMatches, Found, Inst, Matcher, Partition, Position, RefKind,
    RowsPerMatch, Scratch, StoredRow, Thread, MAX_ROWS_PER_PARTITION, MAX_THREADS_PER_PARTITION,
};
use crate::error::{Error, Result};

impl Matcher {
    pub(super) fn uses_match_number(&self) -> bool {
        self.spec
            .measures
            .refs
            .iter()
            .any(|r| r.kind == RefKind::MatchNumber)
    }

    /// Ends the partition's threads that watermark `wm` leaves no row to take (every one
    /// waiting for a row at the end of the input), and emits what that decides.
    pub(super) fn expire(
        &self,
        part: &mut Partition,
        wm: i64,
        scratch: &mut Scratch,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        if part.threads.is_empty() {
            return Ok(());
        }
        let prog = &self.program;
        let at_end = wm == i64::MAX;
        let before = part.threads.len();
        let within = self.within;
        // A thread waiting at `$` has mapped its last row: WITHIN is met, and the next
        // row of its partition ends it.
        self.drop_threads(
            part,
            |t| match prog.inst(t.pc) {
                Inst::Match | Inst::End => true,
                _ => !at_end && within.is_none_or(|w| t.start_ts.saturating_add(w) >= wm),
            },
            found,
        )?;
        if at_end {
            self.finish(part, scratch);
        }
        // Also when no thread ended: one may have become a timed-out partial match.
        if part.threads.len() != before || at_end || self.spec.emit_timeout {
            self.resolve(part, found)?;
        }
        Ok(())
    }

    /// Offers one row to a partition's threads, and lets it start an attempt.
    pub(super) fn step(
        &self,
        part: &mut Partition,
        cur: &Current,
        masks: &[Option<BooleanArray>],
        scratch: &mut Scratch,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let prog = &self.program;
        if let Some(w) = self.within {
            self.drop_threads(
                part,
                |t| prog.inst(t.pc) == Inst::Match || cur.ts.saturating_sub(t.start_ts) <= w,
                found,
            )?;
        }
        if matches!(
            self.spec.rows_per_match,
            RowsPerMatch::All(EmptyMatches::WithUnmatched)
        ) {
            if part.undecided.len() >= MAX_ROWS_PER_PARTITION {
                return Err(rows_limit());
            }
            part.undecided.push_back(StoredRow {
                seq: cur.seq,
                batch: cur.batch.clone(),
                row: cur.row as u32,
            });
        }
        let start = if part.started {
            &self.start
        } else {
            &self.start_first
        };
        part.started = true;
        // Most rows neither extend a match nor can start one: skip them quickly. An attempt
        // that can match empty always starts.
        let may_start = |pc: &u32| match prog.inst(*pc) {
            Inst::Var(v, _) => masks[v as usize].as_ref().is_none_or(|m| m.value(cur.row)),
            Inst::Match => true,
            _ => false,
        };
        let can_start = cur.seq >= part.next_start && start.iter().any(may_start);
        if part.threads.is_empty() && !can_start {
            self.remember(part, cur);
            return Ok(());
        }
        if can_start {
            for &pc in start {
                part.threads.push(Thread {
                    start: cur.seq,
                    start_ts: cur.ts,
                    pc,
                    last: None,
                    mapped: 0,
                    timed_out: false,
                });
            }
        }

        let Scratch {
            seen,
            pcs,
            verdict,
            ask,
            parked,
        } = scratch;
        self.verdicts(part, cur, masks, verdict, ask)?;
        let bound = self.advance(part, cur, verdict, seen, pcs, parked);
        if part.threads.len() > MAX_THREADS_PER_PARTITION {
            return Err(Error::limit(
                sqlstate::OUT_OF_MEMORY,
                format!(
                    "MATCH_RECOGNIZE holds more than {MAX_THREADS_PER_PARTITION} open match \
                     attempts in one partition; bound the pattern with WITHIN or make its \
                     conditions stricter"
                ),
            ));
        }
        let mapped: usize = part.threads.iter().map(|t| t.mapped as usize).sum();
        if mapped.max(part.rows.len()) > MAX_ROWS_PER_PARTITION {
            return Err(rows_limit());
        }
        if bound || (can_start && self.keep_start_rows) {
            part.rows.push_back(StoredRow {
                seq: cur.seq,
                batch: cur.batch.clone(),
                row: cur.row as u32,
            });
        }
        self.remember(part, cur);
        Ok(())
    }

    /// Which waiting threads may map the current row to their variable (`verdict`, per
    /// thread): those whose variable's condition over the current row holds and, for a
    /// condition over earlier rows, those for which it holds too (asked per variable).
    fn verdicts(
        &self,
        part: &Partition,
        cur: &Current,
        masks: &[Option<BooleanArray>],
        verdict: &mut Vec<bool>,
        ask: &mut [Vec<usize>],
    ) -> Result<()> {
        let prog = &self.program;
        verdict.clear();
        verdict.resize(part.threads.len(), false);
        ask.iter_mut().for_each(Vec::clear);
        for (i, t) in part.threads.iter().enumerate() {
            let Inst::Var(v, _) = prog.inst(t.pc) else {
                continue;
            };
            if t.timed_out {
                continue;
            }
            let v = v as usize;
            if masks[v].as_ref().is_some_and(|m| !m.value(cur.row)) {
                continue;
            }
            if self.spec.variables[v].cross.is_some() {
                ask[v].push(i);
            } else {
                verdict[i] = true;
            }
        }
        for (v, threads) in ask.iter().enumerate() {
            if threads.is_empty() {
                continue;
            }
            let cond = self.spec.variables[v]
                .cross
                .as_ref()
                .expect("only variables with a cross condition are asked");
            let answers = self.cross(cond, v as u16, part, threads, cur)?;
            for (&i, ok) in threads.iter().zip(answers) {
                verdict[i] = ok;
            }
        }
        Ok(())
    }

    /// Moves the threads on by the current row, in preference order; whether a thread
    /// mapped it.
    fn advance(
        &self,
        part: &mut Partition,
        cur: &Current,
        verdict: &[bool],
        seen: &mut [bool],
        pcs: &mut Vec<u32>,
        parked: &mut Vec<u64>,
    ) -> bool {
        let prog = &self.program;
        // Advance, in preference order; once an attempt has a match, its less preferred
        // threads can never win and end.
        let old = std::mem::take(&mut part.threads);
        let mut matched: Option<u64> = None;
        let mut bound = false;
        // For dedupe: the attempt (start + 1) that last parked a thread at each instruction.
        parked.clear();
        parked.resize(if self.dedupe { prog.len() } else { 0 }, 0);
        for (i, t) in old.into_iter().enumerate() {
            if t.timed_out {
                part.threads.push(t);
                continue;
            }
            if matched == Some(t.start) {
                continue;
            }
            match prog.inst(t.pc) {
                Inst::Match => {
                    matched = Some(t.start);
                    part.threads.push(t);
                }
                Inst::Var(v, excluded) if verdict[i] => {
                    bound = true;
                    let b = Arc::new(Binding {
                        seq: cur.seq,
                        var: v,
                        excluded,
                        prev: t.last.clone(),
                    });
                    pcs.clear();
                    prog.closure(t.pc + 1, Position::Inside, seen, pcs);
                    for &pc in pcs.iter() {
                        if self.dedupe {
                            if parked[pc as usize] == t.start + 1 {
                                continue;
                            }
                            parked[pc as usize] = t.start + 1;
                        }
                        part.threads.push(Thread {
                            pc,
                            last: Some(b.clone()),
                            mapped: t.mapped.saturating_add(1),
                            ..t
                        });
                        if prog.inst(pc) == Inst::Match {
                            matched = Some(t.start);
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        bound
    }

    /// At the end of the input: threads waiting at `$` go on, and those that reach the end
    /// of the pattern match; every other thread that waits for a row ends. Preference
    /// order is kept: once an attempt has a match, its less preferred threads end.
    pub(super) fn finish(&self, part: &mut Partition, scratch: &mut Scratch) {
        let prog = &self.program;
        let old = std::mem::take(&mut part.threads);
        let mut matched: Option<u64> = None;
        for t in old {
            if t.timed_out {
                part.threads.push(t);
                continue;
            }
            if matched == Some(t.start) {
                continue;
            }
            match prog.inst(t.pc) {
                Inst::Match => {
                    matched = Some(t.start);
                    part.threads.push(t);
                }
                Inst::End => {
                    scratch.pcs.clear();
                    prog.closure(t.pc, Position::End, &mut scratch.seen, &mut scratch.pcs);
                    if let Some(&pc) = scratch.pcs.iter().find(|&&pc| prog.inst(pc) == Inst::Match)
                    {
                        matched = Some(t.start);
                        part.threads.push(Thread { pc, ..t });
                    }
                }
                _ => {}
            }
        }
    }

    /// Keeps the row for PREV, if any condition reads earlier rows of the partition.
    pub(super) fn remember(&self, part: &mut Partition, cur: &Current) {
        if self.prev_depth > 0 {
            part.recent.push_back(StoredRow {
                seq: cur.seq,
                batch: cur.batch.clone(),
                row: cur.row as u32,
            });
            if part.recent.len() > self.prev_depth {
                part.recent.pop_front();
            }
        }
    }
}
