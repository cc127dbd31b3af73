//! Conditions over earlier rows of a match: a variable's cross condition evaluated for all
//! the threads waiting for it at once, over a batch of their reference values.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::DataType;
use datafusion::scalar::ScalarValue;

use super::{Binding, CrossCondition, Current, Matcher, Partition, Ref, RefKind};
use crate::error::{Error, Result};

impl Matcher {
    /// Evaluates a cross condition for the threads `which` of `part` at the current row.
    pub(super) fn cross(
        &self,
        cond: &CrossCondition,
        var: u16,
        part: &Partition,
        which: &[usize],
        cur: &Current,
    ) -> Result<Vec<bool>> {
        let width = cur.batch.num_columns();
        let mut answers = vec![true; which.len()];
        if !cond.comparisons.is_empty() {
            let current: Vec<ScalarValue> = cond
                .comparisons
                .iter()
                .map(|c| ScalarValue::try_from_array(cur.batch.column(c.column), cur.row))
                .collect::<std::result::Result<_, _>>()?;
            for (answer, &i) in answers.iter_mut().zip(which) {
                let last = part.threads[i].last.as_ref();
                for (c, value) in cond.comparisons.iter().zip(&current) {
                    let ty = cond.schema.field(width + c.reference).data_type();
                    let r =
                        self.value(&cond.refs[c.reference], ty, part, last, Some((cur, var)))?;
                    if !c.op.holds(value, &r) {
                        *answer = false;
                        break;
                    }
                }
            }
        }
        let Some(predicate) = &cond.predicate else {
            return Ok(answers);
        };
        let still: Vec<usize> = (0..which.len()).filter(|&j| answers[j]).collect();
        if still.is_empty() {
            return Ok(answers);
        }
        let k = still.len();
        let repeat = UInt32Array::from(vec![cur.row as u32; k]);
        let mut columns = cur
            .batch
            .columns()
            .iter()
            .map(|c| Ok(take(c, &repeat, None)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        for (j, r) in cond.refs.iter().enumerate() {
            let ty = cond.schema.field(width + j).data_type();
            let values = still
                .iter()
                .map(|&s| {
                    let last = part.threads[which[s]].last.as_ref();
                    self.value(r, ty, part, last, Some((cur, var)))
                })
                .collect::<Result<Vec<_>>>()?;
            columns.push(ScalarValue::iter_to_array(values)?);
        }
        let batch = RecordBatch::try_new(cond.schema.clone(), columns)?;
        let result = predicate.evaluate(&batch)?.into_array(k)?;
        let result = result.as_boolean_opt().ok_or_else(|| {
            Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                "DEFINE must be a boolean condition",
            )
        })?;
        for (j, &s) in still.iter().enumerate() {
            answers[s] = result.is_valid(j) && result.value(j);
        }
        Ok(answers)
    }

    /// A reference's value for a thread whose rows are `bindings`; `current` is the row being
    /// decided and the variable it would be mapped to (None for a complete match).
    pub(super) fn value(
        &self,
        r: &Ref,
        ty: &DataType,
        part: &Partition,
        last: Option<&Arc<Binding>>,
        current: Option<(&Current, u16)>,
    ) -> Result<ScalarValue> {
        self.value_in(r, ty, part, last, current, None)
    }

    /// [`Matcher::value`] at the row `last` of a complete match whose last row is `whole`:
    /// `PREV`/`NEXT` and `FIRST(x, n)` then reach every row of the match, past `last` too.
    pub(super) fn value_in(
        &self,
        r: &Ref,
        ty: &DataType,
        part: &Partition,
        last: Option<&Arc<Binding>>,
        current: Option<(&Current, u16)>,
        whole: Option<&Arc<Binding>>,
    ) -> Result<ScalarValue> {
        let column_value = |batch: &RecordBatch, row: usize, var: u16| -> Result<ScalarValue> {
            match r.column {
                _ if r.classifier => Ok(ScalarValue::Utf8(Some(
                    self.spec.variables[var as usize].name.clone(),
                ))),
                Some(c) => Ok(ScalarValue::try_from_array(batch.column(c), row)?),
                None => Ok(ScalarValue::Null),
            }
        };
        let stored = |b: &Binding| -> Result<ScalarValue> {
            let s = part.row(b.seq)?;
            column_value(&s.batch, s.row as usize, b.var)
        };
        let wanted = |v: u16| r.var.is_none_or(|rv| self.member(rv, v));
        // The current row counts as the newest row of its variable (DEFINE's running view).
        let current = current.filter(|(_, v)| wanted(*v));
        // The mapped rows, newest first.
        let chain = || std::iter::successors(last, |b| b.prev.as_ref()).filter(|b| wanted(b.var));
        let navigates = r.offset > 0 || r.shift != 0;
        let values = match r.kind {
            // FIRST(x, n) / LAST(x, n), maybe moved by PREV/NEXT: index the rows so far.
            RefKind::First | RefKind::Last if navigates => {
                // The rows of the match so far (or all of them, with `whole`), oldest first,
                // and how many of them are up to the current row.
                let mut rows: Vec<Option<&Arc<Binding>>> =
                    std::iter::successors(whole.or(last), |b| b.prev.as_ref())
                        .map(Some)
                        .collect();
                rows.reverse();
                let upto = match (whole, last) {
                    (Some(_), Some(l)) => rows
                        .iter()
                        .position(|b| b.is_some_and(|b| b.seq == l.seq))
                        .map_or(0, |i| i + 1),
                    (Some(_), None) => 0,
                    (None, _) => rows.len(),
                };
                if current.is_some() {
                    rows.push(None);
                }
                let is_wanted = |b: &Option<&Arc<Binding>>| match b {
                    Some(b) => wanted(b.var),
                    None => true,
                };
                let of_var: Vec<usize> = (0..rows.len()).filter(|&i| is_wanted(&rows[i])).collect();
                let off = r.offset as usize;
                let pick = match r.kind {
                    RefKind::First => of_var.get(off).copied(),
                    _ => {
                        // RUNNING LAST counts back from the current row.
                        let before: Vec<usize> = of_var
                            .iter()
                            .copied()
                            .filter(|&i| i < upto || current.is_some())
                            .collect();
                        (before.len().checked_sub(off + 1)).map(|i| before[i])
                    }
                };
                let target = pick
                    .and_then(|i| i.checked_add_signed(r.shift as isize))
                    .filter(|&i| i < rows.len());
                match (target.map(|i| rows[i]), current) {
                    (Some(Some(b)), _) => vec![stored(b)?],
                    (Some(None), Some((cur, v))) => vec![column_value(cur.batch, cur.row, v)?],
                    _ => vec![],
                }
            }
            RefKind::MatchNumber => vec![ScalarValue::Int64(Some(part.matches as i64 + 1))],
            RefKind::Classifier => {
                let var = match current {
                    Some((_, v)) => Some(v),
                    None => chain().next().map(|b| b.var),
                };
                return Ok(ScalarValue::Utf8(
                    var.map(|v| self.spec.variables[v as usize].name.clone()),
                ));
            }
            RefKind::Prev(n) => {
                let n = n as usize;
                match part.recent.len().checked_sub(n) {
                    Some(i) if n > 0 => {
                        let s = &part.recent[i];
                        vec![column_value(&s.batch, s.row as usize, 0)?]
                    }
                    _ => vec![],
                }
            }
            // Only the newest row is needed: no walk past it.
            RefKind::Last => match (current, chain().next()) {
                (Some((cur, v)), _) => vec![column_value(cur.batch, cur.row, v)?],
                (None, Some(b)) => vec![stored(b)?],
                (None, None) => vec![],
            },
            RefKind::First => match chain().last() {
                Some(b) => vec![stored(b)?],
                None => match current {
                    Some((cur, v)) => vec![column_value(cur.batch, cur.row, v)?],
                    None => vec![],
                },
            },
            _ => {
                // Aggregates do not depend on order.
                let mut values = chain().map(|b| stored(b)).collect::<Result<Vec<_>>>()?;
                if let Some((cur, v)) = current {
                    values.push(column_value(cur.batch, cur.row, v)?);
                }
                values
            }
        };
        r.compute(&values, ty)
    }
}
