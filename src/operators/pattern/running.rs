//! RUNNING references of `ALL ROWS PER MATCH`, kept up to date as the rows of a match are
//! walked in order, so that returning every row of a match costs one pass over it.

use datafusion::arrow::datatypes::DataType;
use datafusion::scalar::ScalarValue;

use super::{Matcher, Partition, Ref, RefKind};
use crate::error::Result;

/// A RUNNING reference kept up to date as the rows of a match are walked in order (the
/// kinds whose value depends only on the rows so far, not on navigation).
pub(super) struct Running {
    /// Rows (COUNT(*)) or non-NULL values seen.
    count: i64,
    int_sum: i64,
    float_sum: f64,
    first: Option<ScalarValue>,
    last: Option<ScalarValue>,
    best: Option<ScalarValue>,
    /// The variable of the last row (CLASSIFIER).
    var: Option<u16>,
}

impl Running {
    pub(super) fn new(r: &Ref) -> Option<Running> {
        let simple = r.offset == 0 && r.shift == 0;
        let kept = matches!(
            r.kind,
            RefKind::Count
                | RefKind::Sum
                | RefKind::Avg
                | RefKind::Min
                | RefKind::Max
                | RefKind::Classifier
        ) || (simple && matches!(r.kind, RefKind::First | RefKind::Last));
        (kept && !r.is_final).then_some(Running {
            count: 0,
            int_sum: 0,
            float_sum: 0.0,
            first: None,
            last: None,
            best: None,
            var: None,
        })
    }

    /// The next row the reference ranges over: its value and variable.
    pub(super) fn push(&mut self, r: &Ref, ty: &DataType, v: ScalarValue, var: u16) -> Result<()> {
        self.var = Some(var);
        if self.first.is_none() {
            self.first = Some(v.clone());
        }
        if r.column.is_none() || !v.is_null() {
            self.count += 1;
        }
        if !v.is_null() {
            match r.kind {
                RefKind::Sum if *ty == DataType::Int64 => {
                    if let ScalarValue::Int64(Some(x)) = v.cast_to(&DataType::Int64)? {
                        self.int_sum = self.int_sum.wrapping_add(x);
                    }
                }
                RefKind::Sum | RefKind::Avg => {
                    if let ScalarValue::Float64(Some(x)) = v.cast_to(&DataType::Float64)? {
                        self.float_sum += x;
                    }
                }
                RefKind::Min | RefKind::Max => {
                    let better = self.best.as_ref().is_none_or(|b| match v.partial_cmp(b) {
                        Some(std::cmp::Ordering::Less) => r.kind == RefKind::Min,
                        Some(std::cmp::Ordering::Greater) => r.kind == RefKind::Max,
                        _ => false,
                    });
                    if better {
                        self.best = Some(v.clone());
                    }
                }
                _ => {}
            }
        }
        self.last = Some(v);
        Ok(())
    }

    /// The reference's value over the rows pushed so far, as [`Ref::compute`] gives it.
    pub(super) fn value(
        &self,
        r: &Ref,
        ty: &DataType,
        m: &Matcher,
        part: &Partition,
    ) -> Result<ScalarValue> {
        let one = |v: &Option<ScalarValue>| match v {
            Some(v) => r.compute(std::slice::from_ref(v), ty),
            None => r.compute(&[], ty),
        };
        match r.kind {
            RefKind::Count => Ok(ScalarValue::Int64(Some(self.count))),
            RefKind::Sum | RefKind::Avg if self.count == 0 => Ok(ScalarValue::try_from(ty)?),
            RefKind::Sum if *ty == DataType::Int64 => Ok(ScalarValue::Int64(Some(self.int_sum))),
            RefKind::Sum => Ok(ScalarValue::Float64(Some(self.float_sum))),
            RefKind::Avg => Ok(ScalarValue::Float64(Some(
                self.float_sum / self.count as f64,
            ))),
            RefKind::Min | RefKind::Max => one(&self.best),
            RefKind::First => one(&self.first),
            RefKind::Last => one(&self.last),
            RefKind::Classifier => Ok(ScalarValue::Utf8(
                self.var.map(|v| m.spec.variables[v as usize].name.clone()),
            )),
            _ => m.value(r, ty, part, None, None),
        }
    }
}
