//! Values a `DEFINE` condition or a `MEASURES` expression takes from the rows of a (partial)
//! match: `a.pid` (the last row mapped to `a`), `FIRST(a.ts)`, `LAST(a.ts)`, `PREV(x, n)`,
//! `COUNT(a.*)`, `SUM(a.amount)`, `AVG`, `MIN`, `MAX` over the rows mapped to a variable (or to
//! any variable), `MATCH_NUMBER()` and `CLASSIFIER()`. A reference is RUNNING (over the rows
//! up to the row being returned or decided) or FINAL (over all rows of the match). The planner replaces each by a column of a small batch
//! that the matcher fills per candidate.

use datafusion::arrow::datatypes::DataType;
use datafusion::scalar::ScalarValue;

use crate::error::Result;

/// What a reference computes from the rows it ranges over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefKind {
    /// The value in the first row.
    First,
    /// The value in the last row.
    Last,
    /// The value `n` rows before the current row of the partition (DEFINE only).
    Prev(u32),
    /// Rows (with `column` None) or non-NULL values.
    Count,
    /// Sum of non-NULL values: BIGINT for integer columns, else DOUBLE.
    Sum,
    /// Mean of non-NULL values, DOUBLE.
    Avg,
    /// Smallest non-NULL value.
    Min,
    /// Largest non-NULL value.
    Max,
    /// 1 for the first match of a partition, then 2, ...
    MatchNumber,
    /// The variable the last row is mapped to (NULL for none), as text.
    Classifier,
}

impl RefKind {
    /// SQL name, for EXPLAIN.
    pub fn name(self) -> &'static str {
        match self {
            RefKind::First => "FIRST",
            RefKind::Last => "LAST",
            RefKind::Prev(_) => "PREV",
            RefKind::Count => "COUNT",
            RefKind::Sum => "SUM",
            RefKind::Avg => "AVG",
            RefKind::Min => "MIN",
            RefKind::Max => "MAX",
            RefKind::MatchNumber => "MATCH_NUMBER",
            RefKind::Classifier => "CLASSIFIER",
        }
    }
}

/// One reference: a kind over the rows of a variable (or of the whole match) and a column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ref {
    /// The variable whose rows it ranges over; None: every row of the match.
    pub var: Option<u16>,
    /// The input column; None for `COUNT(*)` and `MATCH_NUMBER()`.
    pub column: Option<usize>,
    /// What it computes.
    pub kind: RefKind,
    /// FINAL: over all rows of the match, whichever row is returned (MEASURES only).
    pub is_final: bool,
    /// `FIRST(x, n)` / `LAST(x, n)`: the row `n` rows of the variable after the first (before
    /// the last).
    pub offset: u32,
    /// `PREV(..., n)` / `NEXT(..., n)` in MEASURES: then `n` rows of the match before (-) or
    /// after (+) that row.
    pub shift: i32,
    /// The value read from a row is the variable it is mapped to, not a column:
    /// `FIRST(CLASSIFIER(u))`, `PREV(CLASSIFIER())`, ...
    pub classifier: bool,
}

impl Ref {
    /// The type of the value, given the input column's type.
    pub fn data_type(&self, column: Option<&DataType>) -> DataType {
        match (self.kind, column) {
            (RefKind::Count | RefKind::MatchNumber, _) => DataType::Int64,
            (RefKind::Classifier, _) => DataType::Utf8,
            _ if self.classifier => DataType::Utf8,
            (RefKind::Avg, _) => DataType::Float64,
            (RefKind::Sum, Some(t)) if t.is_integer() => DataType::Int64,
            (RefKind::Sum, _) => DataType::Float64,
            (_, Some(t)) => t.clone(),
            (_, None) => DataType::Null,
        }
    }

    /// Computes the value over `values`: the column's values in the rows the reference
    /// ranges over, in match order (for `COUNT(*)`, one NULL per row).
    pub fn compute(&self, values: &[ScalarValue], data_type: &DataType) -> Result<ScalarValue> {
        let present = || values.iter().filter(|v| !v.is_null());
        let typed_null = || Ok::<_, crate::error::Error>(ScalarValue::try_from(data_type)?);
        Ok(match self.kind {
            RefKind::First => values.first().cloned().map_or_else(typed_null, Ok)?,
            RefKind::Last | RefKind::Prev(_) => {
                values.last().cloned().map_or_else(typed_null, Ok)?
            }
            RefKind::Count => {
                let n = if self.column.is_none() {
                    values.len()
                } else {
                    present().count()
                };
                ScalarValue::Int64(Some(n as i64))
            }
            RefKind::MatchNumber | RefKind::Classifier => {
                values.first().cloned().map_or_else(typed_null, Ok)?
            }
            RefKind::Sum | RefKind::Avg => {
                if present().next().is_none() {
                    return typed_null();
                }
                if *data_type == DataType::Int64 {
                    let mut sum: i64 = 0;
                    for v in present() {
                        let ScalarValue::Int64(Some(x)) = v.cast_to(&DataType::Int64)? else {
                            continue;
                        };
                        sum = sum.wrapping_add(x);
                    }
                    ScalarValue::Int64(Some(sum))
                } else {
                    let mut sum = 0.0;
                    let mut n = 0usize;
                    for v in present() {
                        if let ScalarValue::Float64(Some(x)) = v.cast_to(&DataType::Float64)? {
                            sum += x;
                            n += 1;
                        }
                    }
                    if self.kind == RefKind::Avg {
                        ScalarValue::Float64(Some(sum / n as f64))
                    } else {
                        ScalarValue::Float64(Some(sum))
                    }
                }
            }
            RefKind::Min | RefKind::Max => {
                let mut best: Option<&ScalarValue> = None;
                for v in present() {
                    let better = match best {
                        None => true,
                        Some(b) => match v.partial_cmp(b) {
                            Some(std::cmp::Ordering::Less) => self.kind == RefKind::Min,
                            Some(std::cmp::Ordering::Greater) => self.kind == RefKind::Max,
                            _ => false,
                        },
                    };
                    if better {
                        best = Some(v);
                    }
                }
                best.cloned().map_or_else(typed_null, Ok)?
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(kind: RefKind, column: Option<usize>) -> Ref {
        Ref {
            var: Some(0),
            column,
            kind,
            is_final: false,
            offset: 0,
            shift: 0,
            classifier: false,
        }
    }

    #[test]
    fn aggregates_skip_nulls_and_type_by_column() {
        let vals = vec![
            ScalarValue::Int32(Some(3)),
            ScalarValue::Int32(None),
            ScalarValue::Int32(Some(5)),
        ];
        let t = DataType::Int32;
        let sum = r(RefKind::Sum, Some(0));
        assert_eq!(sum.data_type(Some(&t)), DataType::Int64);
        assert_eq!(
            sum.compute(&vals, &DataType::Int64).unwrap(),
            ScalarValue::Int64(Some(8))
        );
        assert_eq!(
            r(RefKind::Avg, Some(0))
                .compute(&vals, &DataType::Float64)
                .unwrap(),
            ScalarValue::Float64(Some(4.0))
        );
        assert_eq!(
            r(RefKind::Count, Some(0))
                .compute(&vals, &DataType::Int64)
                .unwrap(),
            ScalarValue::Int64(Some(2))
        );
        assert_eq!(
            r(RefKind::Count, None)
                .compute(&vals, &DataType::Int64)
                .unwrap(),
            ScalarValue::Int64(Some(3))
        );
        assert_eq!(
            r(RefKind::Max, Some(0)).compute(&vals, &t).unwrap(),
            ScalarValue::Int32(Some(5))
        );
        assert_eq!(
            r(RefKind::Min, Some(0)).compute(&vals, &t).unwrap(),
            ScalarValue::Int32(Some(3))
        );
        assert_eq!(
            r(RefKind::First, Some(0)).compute(&[], &t).unwrap(),
            ScalarValue::Int32(None)
        );
        assert_eq!(
            r(RefKind::Sum, Some(0))
                .compute(&[ScalarValue::Int32(None)], &DataType::Int64)
                .unwrap(),
            ScalarValue::Int64(None)
        );
    }
}
