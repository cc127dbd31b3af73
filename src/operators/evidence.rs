//! `EVIDENCE(...)`: the rows behind a windowed alert, as an aggregate. In a windowed GROUP BY
//! query, `EVIDENCE(*)` (or `EVIDENCE(col, ...)`, optionally ending in a row bound `n`) returns,
//! for each window and group, the group's rows as JSON text:
//! `{"count":27,"rows":[{"ts":"2024-05-01 10:00:00","user":"root"},...]}`. `count` is every row
//! the group had in the window; `rows` holds the first `n` of them (20 unless given) by event
//! time, rows with the same time in the order of their JSON text. The order depends only on the
//! rows, not on how they arrived, so the state of panes, shards and merged sessions combines
//! exactly, and the state per group is bounded by `n` rows.
//!
//! The planner ([`crate::plan`]) rewrites the user's call into this function's internal form,
//! `evidence(n, event_time, named_struct('col', col, ...))`.

use std::fmt::Write as _;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, StructArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, TimestampNanosecondType, UInt64Type,
};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::expressions::Literal;
use datafusion::scalar::ScalarValue;

use crate::time::timestamp_text;

/// The internal name of the function the planner calls.
pub const NAME: &str = "evidence";

/// Rows kept per group when the call gives no bound.
pub const DEFAULT_ROWS: usize = 20;

/// The aggregate to register with the planner.
pub fn udaf() -> AggregateUDF {
    AggregateUDF::new_from_impl(EvidenceUdaf {
        signature: Signature::any(3, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct EvidenceUdaf {
    signature: Signature,
}

impl AggregateUDFImpl for EvidenceUdaf {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let list = |name: &str, item: DataType| {
            Arc::new(Field::new(
                format!("{}[{name}]", args.name),
                DataType::List(Arc::new(Field::new_list_field(item, true))),
                true,
            ))
        };
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[count]", args.name),
                DataType::UInt64,
                true,
            )),
            list("times", DataType::Int64),
            list("rows", DataType::Utf8),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let limit = args
            .exprs
            .first()
            .and_then(|e| e.downcast_ref::<Literal>())
            .and_then(|l| match l.value() {
                ScalarValue::Int64(Some(n)) if *n > 0 => usize::try_from(*n).ok(),
                _ => None,
            })
            .ok_or_else(|| {
                DataFusionError::Plan(
                    "evidence() takes its row bound as a positive integer literal".into(),
                )
            })?;
        Ok(Box::new(EvidenceAccumulator::new(limit)))
    }
}

/// One group's evidence: how many rows it saw and the first `limit` of them, sorted.
#[derive(Debug)]
pub struct EvidenceAccumulator {
    limit: usize,
    count: u64,
    rows: Vec<(i64, String)>,
    text_bytes: usize,
}

impl EvidenceAccumulator {
    /// Empty evidence keeping at most `limit` rows.
    pub fn new(limit: usize) -> Self {
        EvidenceAccumulator {
            limit,
            count: 0,
            rows: Vec::new(),
            text_bytes: 0,
        }
    }

    /// Whether a row at `time` could still be among the kept rows (before rendering it).
    fn may_keep(&self, time: i64) -> bool {
        self.rows.len() < self.limit || self.rows.last().is_some_and(|(t, _)| time <= *t)
    }

    /// Keeps the row if it is among the first `limit`.
    fn offer(&mut self, time: i64, text: String) {
        let at = self
            .rows
            .partition_point(|(t, s)| (*t, s.as_str()) <= (time, text.as_str()));
        if at >= self.limit {
            return;
        }
        self.text_bytes += text.capacity();
        self.rows.insert(at, (time, text));
        if self.rows.len() > self.limit {
            if let Some((_, dropped)) = self.rows.pop() {
                self.text_bytes -= dropped.capacity();
            }
        }
    }

    /// The JSON text this evidence evaluates to.
    fn render(&self) -> String {
        let mut out = format!("{{\"count\":{},\"rows\":[", self.count);
        for (i, (_, row)) in self.rows.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(row);
        }
        out.push_str("]}");
        out
    }
}

impl Accumulator for EvidenceAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let [_, times, rows] = values else {
            return Err(DataFusionError::Internal(
                "evidence() takes three arguments".into(),
            ));
        };
        let times = cast(times, &DataType::Int64)?;
        let times = times.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let rows = rows
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| DataFusionError::Internal("evidence() rows must be a struct".into()))?;
        let renderer = RowRenderer::try_new(rows)?;
        for i in 0..rows.len() {
            self.count += 1;
            let time = if times.is_null(i) {
                i64::MIN
            } else {
                times.value(i)
            };
            if self.may_keep(time) {
                self.offer(time, renderer.row(i));
            }
        }
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Utf8(Some(self.render())))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.rows.capacity() * std::mem::size_of::<(i64, String)>()
            + self.text_bytes
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let times: Vec<ScalarValue> = self
            .rows
            .iter()
            .map(|(t, _)| ScalarValue::Int64(Some(*t)))
            .collect();
        let texts: Vec<ScalarValue> = self
            .rows
            .iter()
            .map(|(_, s)| ScalarValue::Utf8(Some(s.clone())))
            .collect();
        Ok(vec![
            ScalarValue::UInt64(Some(self.count)),
            ScalarValue::List(ScalarValue::new_list_nullable(&times, &DataType::Int64)),
            ScalarValue::List(ScalarValue::new_list_nullable(&texts, &DataType::Utf8)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let [counts, times, texts] = states else {
            return Err(DataFusionError::Internal(
                "evidence() state has three columns".into(),
            ));
        };
        let counts = counts.as_primitive::<UInt64Type>();
        let times = list(times)?;
        let texts = list(texts)?;
        for i in 0..counts.len() {
            if counts.is_null(i) {
                continue;
            }
            self.count += counts.value(i);
            let t = times.value(i);
            let t = t.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            let s = texts.value(i);
            let s = s.as_string::<i32>();
            for j in 0..t.len().min(s.len()) {
                if self.may_keep(t.value(j)) {
                    self.offer(t.value(j), s.value(j).to_string());
                }
            }
        }
        Ok(())
    }
}

fn list(a: &ArrayRef) -> DfResult<&ListArray> {
    a.as_any()
        .downcast_ref::<ListArray>()
        .ok_or_else(|| DataFusionError::Internal("evidence() state must be a list".into()))
}

/// Renders rows of a struct array as JSON objects, fields in order: numbers and booleans bare,
/// timestamps in PostgreSQL's text form, everything else as a string, NULL as `null`.
struct RowRenderer<'a> {
    keys: Vec<String>,
    columns: Vec<(&'a ArrayRef, ArrayFormatter<'a>)>,
    /// Timestamp columns as nanoseconds, by column.
    nanos: Vec<Option<ArrayRef>>,
}

impl<'a> RowRenderer<'a> {
    fn try_new(rows: &'a StructArray) -> DfResult<Self> {
        let keys = rows
            .fields()
            .iter()
            .map(|f| json_string(f.name()))
            .collect();
        let columns = rows
            .columns()
            .iter()
            .map(|c| Ok((c, ArrayFormatter::try_new(c.as_ref(), &FORMAT)?)))
            .collect::<DfResult<Vec<_>>>()?;
        let nanos = rows
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Timestamp(_, _) => Ok(Some(cast(c, &NANOS)?)),
                _ => Ok(None),
            })
            .collect::<DfResult<Vec<_>>>()?;
        Ok(RowRenderer {
            keys,
            columns,
            nanos,
        })
    }

    fn row(&self, i: usize) -> String {
        let mut out = String::from("{");
        let columns = self.keys.iter().zip(&self.columns).zip(&self.nanos);
        for (n, ((key, (column, formatter)), nanos)) in columns.enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(key);
            out.push(':');
            if column.is_null(i) {
                out.push_str("null");
                continue;
            }
            match column.data_type() {
                DataType::Boolean => out.push_str(if column.as_boolean().value(i) {
                    "true"
                } else {
                    "false"
                }),
                DataType::Timestamp(_, zone) => {
                    let n = nanos
                        .as_ref()
                        .map_or(0, |a| a.as_primitive::<TimestampNanosecondType>().value(i));
                    out.push_str(&json_string(&timestamp_text(n, zone.is_some())));
                }
                t if t.is_integer() => {
                    let _ = write!(out, "{}", formatter.value(i));
                }
                t if t.is_floating() => {
                    let text = formatter.value(i).to_string();
                    match text.parse::<f64>() {
                        Ok(v) if v.is_finite() => out.push_str(&text),
                        _ => out.push_str(&json_string(&text)),
                    }
                }
                _ => out.push_str(&json_string(&formatter.value(i).to_string())),
            }
        }
        out.push('}');
        out
    }
}

const FORMAT: FormatOptions<'static> = FormatOptions::new();
const NANOS: DataType =
    DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Nanosecond, None);

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};

    fn rows(times: &[i64], users: &[Option<&str>]) -> Vec<ArrayRef> {
        let t: ArrayRef = Arc::new(TimestampNanosecondArray::from(times.to_vec()));
        let u: ArrayRef = Arc::new(StringArray::from(users.to_vec()));
        let n: ArrayRef = Arc::new(Int64Array::from_iter_values(0..times.len() as i64));
        let s = StructArray::from(vec![
            (Arc::new(Field::new("user", DataType::Utf8, true)), u),
            (Arc::new(Field::new("n", DataType::Int64, true)), n),
        ]);
        vec![
            Arc::new(Int64Array::from(vec![0; times.len()])),
            t,
            Arc::new(s),
        ]
    }

    const SEC: i64 = 1_000_000_000;

    #[test]
    fn keeps_the_first_rows_by_time_and_counts_all() {
        let mut acc = EvidenceAccumulator::new(2);
        acc.update_batch(&rows(
            &[3 * SEC, SEC, 2 * SEC],
            &[Some("c"), Some("a\"x"), None],
        ))
        .unwrap();
        let ScalarValue::Utf8(Some(text)) = acc.evaluate().unwrap() else {
            panic!("text")
        };
        assert_eq!(
            text,
            r#"{"count":3,"rows":[{"user":"a\"x","n":1},{"user":null,"n":2}]}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["rows"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn merged_state_equals_one_accumulator_over_all_rows() {
        let all = rows(
            &[5, 1, 4, 1, 3],
            &[Some("e"), Some("b"), Some("d"), Some("a"), None],
        );
        let mut whole = EvidenceAccumulator::new(3);
        whole.update_batch(&all).unwrap();
        let (mut left, mut right) = (EvidenceAccumulator::new(3), EvidenceAccumulator::new(3));
        let part = |a: &[ArrayRef], o, l| a.iter().map(|c| c.slice(o, l)).collect::<Vec<_>>();
        left.update_batch(&part(&all, 0, 2)).unwrap();
        right.update_batch(&part(&all, 2, 3)).unwrap();
        let mut merged = EvidenceAccumulator::new(3);
        for acc in [&mut right, &mut left] {
            let state: Vec<ArrayRef> = acc
                .state()
                .unwrap()
                .iter()
                .map(|v| v.to_array().unwrap())
                .collect();
            merged.merge_batch(&state).unwrap();
        }
        assert_eq!(merged.evaluate().unwrap(), whole.evaluate().unwrap());
        assert!(merged.size() > std::mem::size_of::<EvidenceAccumulator>());
    }
}
