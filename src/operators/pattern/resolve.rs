//! Deciding matches: the partition's attempts finished in start order, AFTER MATCH SKIP,
//! the rows each match (or timed-out attempt, or unmatched row) emits, and threads ended.

use std::sync::Arc;

use datafusion::scalar::ScalarValue;

use super::{
    AfterMatch, Binding, EmptyMatches, Found, Inst, Matcher, Partition, RefKind, RowsPerMatch,
    Running, Thread, SKIP_ERROR,
};
use crate::error::{Error, Result};

impl Matcher {
    /// Emits the partition's matches that are final, in start order, applying AFTER MATCH
    /// SKIP after each; then forgets rows no thread maps any more.
    pub(super) fn resolve(&self, part: &mut Partition, found: &mut Vec<Found>) -> Result<()> {
        let unmatched_rows = matches!(
            self.spec.rows_per_match,
            RowsPerMatch::All(EmptyMatches::WithUnmatched)
        );
        while part
            .threads
            .first()
            .is_some_and(|t| t.timed_out || self.program.inst(t.pc) == Inst::Match)
        {
            let t = part.threads.remove(0);
            if unmatched_rows {
                self.decide(part, t.start, found)?;
            }
            let bindings = t.bindings();
            if t.timed_out {
                self.emit_timeout(part, &t, &bindings, found)?;
                continue;
            }
            self.emit_match(part, &t, &bindings, found)?;
            part.matches += 1;
            let last = bindings.last().map_or(t.start, |b| b.seq);
            part.covered = part.covered.max(last + 1);
            let of = |set: u16, first: bool| {
                let mut rows = bindings
                    .iter()
                    .filter(|b| self.member(set, b.var))
                    .map(|b| b.seq);
                if first {
                    rows.next()
                } else {
                    rows.next_back()
                }
            };
            let next = match self.spec.after_match {
                _ if bindings.is_empty() => t.start + 1,
                AfterMatch::PastLastRow => last + 1,
                AfterMatch::ToNextRow => t.start + 1,
                AfterMatch::ToFirst(v) | AfterMatch::ToLast(v) => {
                    let first = matches!(self.spec.after_match, AfterMatch::ToFirst(_));
                    let how = if first { "FIRST" } else { "LAST" };
                    let name = self.var_name(v);
                    let Some(target) = of(v, first) else {
                        return Err(Error::invalid_input(
                            SKIP_ERROR,
                            format!(
                                "AFTER MATCH SKIP TO {how} {name} failed: \"{name}\" maps no row \
                                 of match {}; make it mandatory in PATTERN or skip PAST LAST ROW",
                                part.matches
                            ),
                        ));
                    };
                    if target == t.start {
                        return Err(Error::invalid_input(
                            SKIP_ERROR,
                            format!(
                                "AFTER MATCH SKIP TO {how} {name} failed: it would resume at the \
                                 first row of match {}, which would find it again; skip TO NEXT \
                                 ROW or to a later variable",
                                part.matches
                            ),
                        ));
                    }
                    target
                }
            };
            part.next_start = part.next_start.max(next);
            let next_start = part.next_start;
            part.threads.retain(|t| t.start >= next_start);
        }
        if unmatched_rows {
            let until = part.threads.first().map_or(u64::MAX, |t| t.start);
            self.decide(part, until, found)?;
        }
        match part.threads.first() {
            Some(t) => {
                let oldest = t.start;
                while part.rows.front().is_some_and(|r| r.seq < oldest) {
                    part.rows.pop_front();
                }
            }
            None => part.rows.clear(),
        }
        Ok(())
    }

    /// `WITH UNMATCHED ROWS`: the rows before `until` are decided (no open attempt can map
    /// them any more); those in no match are returned with NULL measures.
    pub(super) fn decide(
        &self,
        part: &mut Partition,
        until: u64,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        while part.undecided.front().is_some_and(|r| r.seq < until) {
            let Some(row) = part.undecided.pop_front() else {
                break;
            };
            if row.seq >= part.covered {
                let refs = (self.spec.measures.schema.fields().iter())
                    .map(|f| ScalarValue::try_from(f.data_type()))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                found.push(Found {
                    refs,
                    row: Some(row),
                    matched: false,
                    timed_out: false,
                });
            }
        }
        Ok(())
    }

    /// The output rows of one match: one summary row, or each of its rows (without the
    /// excluded ones) with RUNNING measures over the rows up to it and FINAL measures over
    /// all its rows; an empty match returns the row it was found at (unless omitted).
    pub(super) fn emit_match(
        &self,
        part: &Partition,
        t: &Thread,
        bindings: &[&Arc<Binding>],
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let measures = &self.spec.measures;
        let refs_at = |last: Option<&Arc<Binding>>| -> Result<Vec<ScalarValue>> {
            (measures.refs.iter().enumerate())
                .map(|(j, r)| {
                    let ty = measures.schema.field(j).data_type();
                    let at = if r.is_final { t.last.as_ref() } else { last };
                    self.value_in(r, ty, part, at, None, t.last.as_ref())
                })
                .collect()
        };
        match self.spec.rows_per_match {
            // The row gives the partition columns: the last row, or where an empty match was.
            RowsPerMatch::One => found.push(Found {
                refs: refs_at(t.last.as_ref())?,
                row: Some(
                    part.row(bindings.last().map_or(t.start, |b| b.seq))?
                        .clone(),
                ),
                matched: true,
                timed_out: false,
            }),
            RowsPerMatch::All(mode) if bindings.is_empty() => {
                if mode != EmptyMatches::Omit {
                    found.push(Found {
                        refs: refs_at(None)?,
                        row: Some(part.row(t.start)?.clone()),
                        matched: true,
                        timed_out: false,
                    });
                }
            }
            RowsPerMatch::All(_) => {
                // RUNNING references are kept up to date row by row (one pass over the
                // match, not one per returned row); FINAL ones are computed once.
                let mut running: Vec<Option<Running>> =
                    measures.refs.iter().map(Running::new).collect();
                let finals = (measures.refs.iter().enumerate())
                    .map(|(j, r)| {
                        let ty = measures.schema.field(j).data_type();
                        r.is_final
                            .then(|| self.value(r, ty, part, t.last.as_ref(), None))
                            .transpose()
                    })
                    .collect::<Result<Vec<_>>>()?;
                for &b in bindings {
                    let row = part.row(b.seq)?;
                    for (j, (r, acc)) in measures.refs.iter().zip(&mut running).enumerate() {
                        if let Some(acc) = acc {
                            if r.var.is_none_or(|set| self.member(set, b.var)) {
                                let v = match r.column {
                                    _ if r.classifier => ScalarValue::Utf8(Some(
                                        self.spec.variables[b.var as usize].name.clone(),
                                    )),
                                    Some(c) => ScalarValue::try_from_array(
                                        row.batch.column(c),
                                        row.row as usize,
                                    )?,
                                    None => ScalarValue::Null,
                                };
                                acc.push(r, measures.schema.field(j).data_type(), v, b.var)?;
                            }
                        }
                    }
                    if b.excluded {
                        continue;
                    }
                    let mut refs = Vec::with_capacity(measures.refs.len());
                    for (j, r) in measures.refs.iter().enumerate() {
                        let ty = measures.schema.field(j).data_type();
                        refs.push(match (&finals[j], &running[j]) {
                            (Some(v), _) => v.clone(),
                            (None, Some(acc)) => acc.value(r, ty, self, part)?,
                            (None, None) => {
                                self.value_in(r, ty, part, Some(b), None, t.last.as_ref())?
                            }
                        });
                    }
                    found.push(Found {
                        refs,
                        row: Some(row.clone()),
                        matched: true,
                        timed_out: false,
                    });
                }
            }
        }
        Ok(())
    }

    /// Ends the threads that `keep` refuses (WITHIN has passed, or the input ended). With
    /// `EMIT TIMEOUT`, an attempt that loses all its threads this way after mapping a row
    /// leaves its most preferred thread behind, marked timed out: [`Matcher::resolve`]
    /// returns it in start order (unless a match before it skips past it).
    pub(super) fn drop_threads(
        &self,
        part: &mut Partition,
        keep: impl Fn(&Thread) -> bool,
        _found: &mut Vec<Found>,
    ) -> Result<()> {
        if self.spec.emit_timeout {
            let mut i = 0;
            while i < part.threads.len() {
                let start = part.threads[i].start;
                let end = i + part.threads[i..]
                    .iter()
                    .take_while(|t| t.start == start)
                    .count();
                let attempt = &part.threads[i..end];
                if !attempt[0].timed_out
                    && attempt[0].mapped > 0
                    && attempt.iter().all(|t| !keep(t))
                {
                    part.threads[i].timed_out = true;
                }
                i = end;
            }
        }
        part.threads.retain(|t| t.timed_out || keep(t));
        Ok(())
    }

    /// The rows of a timed-out partial match: as a match's, with `timed_out` set and no
    /// match number.
    pub(super) fn emit_timeout(
        &self,
        part: &Partition,
        t: &Thread,
        bindings: &[&Arc<Binding>],
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let first = found.len();
        self.emit_match(part, t, bindings, found)?;
        let numbers: Vec<usize> = (self.spec.measures.refs.iter().enumerate())
            .filter(|(_, r)| r.kind == RefKind::MatchNumber)
            .map(|(j, _)| j)
            .collect();
        for f in &mut found[first..] {
            f.timed_out = true;
            for &j in &numbers {
                f.refs[j] = ScalarValue::Int64(None);
            }
        }
        Ok(())
    }

    /// Whether variable `v` is `set` or in subset `set`.
    pub(super) fn member(&self, set: u16, v: u16) -> bool {
        let n = self.spec.variables.len();
        match (set as usize).checked_sub(n) {
            None => set == v,
            Some(i) => self.spec.subsets.get(i).is_some_and(|s| s.1.contains(&v)),
        }
    }

    /// The name of a variable or subset.
    pub(super) fn var_name(&self, set: u16) -> &str {
        let n = self.spec.variables.len();
        match (set as usize).checked_sub(n) {
            None => &self.spec.variables[set as usize].name,
            Some(i) => self.spec.subsets.get(i).map_or("?", |s| s.0.as_str()),
        }
    }
}
