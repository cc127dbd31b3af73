//! `INVARIANT`: learns, per key, the set of values (or the range) of some expressions over a
//! query's results during a training period, then passes on only the results that break it,
//! with a `violation` column saying how. `OFFLINE` freezes what was learned; `ONLINE` adds each
//! new value after reporting it once. SAQL's "Apache only ever starts these child processes".
//! Results are learned from and checked in event-time order: a stream's raw rows, which may
//! arrive out of order, wait until the watermark passes them (as in `History`); a windowed
//! query's results arrive in window order and pass at once.
//!
//! Training is the first windows, an interval from the first result, or a fixed period of
//! event time the user vouches for as clean (`UNTIL` / `BETWEEN`). With `MIN SUPPORT n` a
//! SET learns a value only once training has seen it in n rows: a one-off during training (an
//! attack under way while the model learns) is not taken for normal.

use crate::error::sqlstate;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray, UInt32Array};
use datafusion::arrow::compute::{cast, concat_batches, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::physical_plan::PhysicalExpr;
use serde::{Deserialize, Serialize};

use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::{duration_nanos, Watermark};

/// What an invariant learns of its values: the operator's own form of `INVARIANT SET` and
/// `INVARIANT RANGE`, which planning converts from the parsed clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvariantKind {
    /// The set of distinct values.
    Set,
    /// The minimum and maximum.
    Range,
}

/// When an invariant learns (planning converts the parsed clause's training period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Training {
    /// The first n windows with results.
    Windows(u64),
    /// Until the watermark has advanced this far past the first result.
    Interval(std::time::Duration),
    /// A fixed period of event time, `[from, until)` in nanoseconds since the epoch. Rows
    /// before `from` are neither learned nor checked.
    Between {
        /// The first instant learned from; from the first row when absent.
        from: Option<i64>,
        /// The first instant checked.
        until: i64,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Learned {
    /// SET: the learned value tuples in Arrow row format.
    set: HashSet<Vec<u8>>,
    /// RANGE: (min, max) per value expression, once anything was learned.
    range: Vec<Option<(f64, f64)>>,
    /// SET with MIN SUPPORT: values seen in training but fewer times than the support, with
    /// their counts. Dropped once training is over.
    #[serde(default)]
    candidates: HashMap<Vec<u8>, u32>,
}

/// Where a row's time places it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before a `BETWEEN` period: neither learned nor checked.
    Before,
    Training,
    Checking,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    #[serde(with = "as_pairs")]
    learned: HashMap<Vec<u8>, Learned>,
    /// Window values seen during training (TRAINING n WINDOWS).
    windows: BTreeSet<i64>,
    /// Time at which interval training ends: the first result's time plus the interval.
    train_end: Option<i64>,
}

/// JSON maps need string keys; the learned state is keyed by bytes, so it is stored as pairs.
mod as_pairs {
    use std::collections::HashMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Learned;

    pub fn serialize<S: Serializer>(
        map: &HashMap<Vec<u8>, Learned>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut pairs: Vec<(&Vec<u8>, &Learned)> = map.iter().collect();
        pairs.sort_by(|a, b| a.0.cmp(b.0));
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<HashMap<Vec<u8>, Learned>, D::Error> {
        let pairs: Vec<(Vec<u8>, Learned)> = Vec::deserialize(d)?;
        Ok(pairs.into_iter().collect())
    }
}

/// Learns an invariant, then emits the rows that break it.
pub struct Invariant {
    kind: InvariantKind,
    values: Vec<Arc<dyn PhysicalExpr>>,
    value_names: Vec<String>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    training: Training,
    min_support: u32,
    online: bool,
    time_column: usize,
    value_rows: Option<RowConverter>,
    key_rows: Option<RowConverter>,
    state: State,
    /// Rows ahead of the watermark, in arrival order, waiting to be checked in time order.
    pending: Vec<RecordBatch>,
    /// The latest watermark, in nanoseconds.
    watermark: i64,
    /// The input's schema: `schema` without `violation`.
    input_schema: SchemaRef,
    schema: SchemaRef,
}

impl Invariant {
    /// An invariant over `values` per `keys`, producing `schema` (input columns, then
    /// `violation`). `time_column` is the result column (window_end, or the event time) that
    /// places a row in or after training; `min_support` is 1 unless the query says otherwise.
    #[allow(
        clippy::too_many_arguments,
        reason = "one argument per part of the INVARIANT clause"
    )]
    pub fn try_new(
        kind: InvariantKind,
        values: Vec<Arc<dyn PhysicalExpr>>,
        value_names: Vec<String>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        training: Training,
        min_support: u32,
        online: bool,
        time_column: usize,
        schema: SchemaRef,
    ) -> Result<Self> {
        if values.is_empty() {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                "INVARIANT needs at least one expression",
            ));
        }
        if min_support > 1 && kind == InvariantKind::Range {
            return Err(Error::NotSupported(
                "MIN SUPPORT applies to INVARIANT SET; a RANGE learns bounds, not values".into(),
            ));
        }
        let fields = schema.fields();
        let input_schema = Arc::new(Schema::new(
            fields[..fields.len().saturating_sub(1)].to_vec(),
        ));
        Ok(Invariant {
            kind,
            values,
            value_names,
            keys,
            training,
            min_support: min_support.max(1),
            online,
            time_column,
            value_rows: None,
            key_rows: None,
            state: State::default(),
            pending: Vec::new(),
            watermark: i64::MIN,
            input_schema,
            schema,
        })
    }

    fn converter<'a>(
        slot: &'a mut Option<RowConverter>,
        arrays: &[ArrayRef],
    ) -> Result<&'a RowConverter> {
        if slot.is_none() {
            let fields = arrays
                .iter()
                .map(|a| SortField::new(a.data_type().clone()))
                .collect();
            *slot = Some(RowConverter::new(fields)?);
        }
        slot.as_ref()
            .ok_or_else(|| Error::Internal("row converter missing".into()))
    }

    /// Where a row at `time` (its window_end or event time) falls.
    fn phase(&mut self, time: Option<i64>) -> Phase {
        let Some(t) = time else {
            return Phase::Checking;
        };
        if let Training::Between { from, until } = self.training {
            return if from.is_some_and(|from| t < from) {
                Phase::Before
            } else if t < until {
                Phase::Training
            } else {
                Phase::Checking
            };
        }
        if self.in_training(t) {
            Phase::Training
        } else {
            Phase::Checking
        }
    }

    /// Whether `t` falls in a training period counted from the results themselves.
    fn in_training(&mut self, t: i64) -> bool {
        match self.training {
            Training::Windows(n) => {
                if self.state.windows.contains(&t) {
                    true
                } else if (self.state.windows.len() as u64) < n {
                    self.state.windows.insert(t);
                    true
                } else {
                    false
                }
            }
            Training::Interval(d) => {
                let end = *self
                    .state
                    .train_end
                    .get_or_insert_with(|| t.saturating_add(duration_nanos(d)));
                t < end
            }
            Training::Between { until, .. } => t < until,
        }
    }

    /// Each row's time (window_end or event time) in nanoseconds.
    fn times(&self, batch: &RecordBatch) -> Result<Vec<Option<i64>>> {
        Ok(cast(batch.column(self.time_column), &DataType::Int64)?
            .as_primitive::<Int64Type>()
            .iter()
            .collect())
    }
}

fn evaluate(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    let n = batch.num_rows();
    Ok(exprs
        .iter()
        .map(|e| e.evaluate(batch).and_then(|v| v.into_array(n)))
        .collect::<datafusion::error::Result<Vec<_>>>()?)
}

/// A batch's values in the form an invariant compares them.
enum Observed {
    /// SET: each row's value tuple in Arrow row format.
    Set(Rows),
    /// RANGE: each value expression's column as numbers (timestamps as nanoseconds).
    Range(Vec<Vec<Option<f64>>>),
}

/// How a RANGE value broke what was learned.
enum RangeBreak {
    Outside(f64, f64),
    NothingLearned,
}

impl Learned {
    /// SET: learns value tuple `v` in training (or when `online`), or checks it. Returns how
    /// many values were known when a checked `v` was not among them.
    fn see_value(&mut self, v: &[u8], training: bool, online: bool, support: u32) -> Option<usize> {
        if !training && !self.candidates.is_empty() {
            self.candidates = HashMap::new();
        }
        if training && support > 1 && !self.set.contains(v) {
            // Learned only once seen often enough; until then not normal.
            let seen = self.candidates.entry(v.to_vec()).or_insert(0);
            *seen += 1;
            if *seen >= support {
                self.candidates.remove(v);
                self.set.insert(v.to_vec());
            }
            None
        } else if training || online {
            let new = !self.set.contains(v) && self.set.insert(v.to_vec());
            (!training && new).then(|| self.set.len() - 1)
        } else if self.set.contains(v) {
            None
        } else {
            Some(self.set.len())
        }
    }

    /// RANGE: learns row `row` of each column of `numbers` in training (or when `online`), or
    /// checks it. Returns the columns that broke the learned range, and how.
    fn see_numbers(
        &mut self,
        numbers: &[Vec<Option<f64>>],
        row: usize,
        training: bool,
        online: bool,
    ) -> Vec<(usize, RangeBreak)> {
        if self.range.is_empty() {
            self.range = vec![None; numbers.len()];
        }
        let mut broken = Vec::new();
        for (i, col) in numbers.iter().enumerate() {
            let Some(x) = col[row] else { continue };
            match self.range[i] {
                Some((lo, hi)) if !training && (x < lo || x > hi) => {
                    broken.push((i, RangeBreak::Outside(lo, hi)))
                }
                None if !training => broken.push((i, RangeBreak::NothingLearned)),
                _ => {}
            }
            if training || online {
                self.range[i] = Some(match self.range[i] {
                    Some((lo, hi)) => (lo.min(x), hi.max(x)),
                    None => (x, x),
                });
            }
        }
        broken
    }
}

impl Invariant {
    /// Learns from and checks rows in the order given; returns the violating ones.
    fn check(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(vec![]);
        }
        let values = evaluate(&self.values, &batch)?;
        let key_rows = self.key_rows(&batch)?;
        let observed = self.observe(&values)?;
        let times = self.times(&batch)?;
        let formatters: Vec<ArrayFormatter> = values
            .iter()
            .map(|v| {
                ArrayFormatter::try_new(v.as_ref(), &FormatOptions::default().with_null("NULL"))
            })
            .collect::<std::result::Result<_, _>>()?;
        let mut violating = Vec::new();
        let mut messages = Vec::new();
        for (row, &time) in times.iter().enumerate() {
            let training = match self.phase(time) {
                Phase::Before => continue,
                Phase::Training => true,
                Phase::Checking => false,
            };
            // Look up by the row's bytes; allocate a key only for a new partition.
            let key = key_rows.row(row);
            if !self.state.learned.contains_key(key.as_ref()) {
                self.state
                    .learned
                    .insert(key.as_ref().to_vec(), Learned::default());
            }
            let Some(learned) = self.state.learned.get_mut(key.as_ref()) else {
                continue;
            };
            let (online, names) = (self.online, &self.value_names);
            let violation = match &observed {
                Observed::Set(rows) => learned
                    .see_value(rows.row(row).as_ref(), training, online, self.min_support)
                    .map(|known| {
                        let shown: Vec<String> = formatters
                            .iter()
                            .map(|f| f.value(row).to_string())
                            .collect();
                        format!(
                            "({}) = ({}) was not among the {known} values learned",
                            names.join(", "),
                            shown.join(", ")
                        )
                    }),
                Observed::Range(numbers) => {
                    let broken: Vec<String> = learned
                        .see_numbers(numbers, row, training, online)
                        .into_iter()
                        .map(|(i, how)| {
                            let shown = formatters[i].value(row);
                            match how {
                                RangeBreak::Outside(lo, hi) => format!(
                                    "{} = {shown} outside the learned range [{lo}, {hi}]",
                                    names[i]
                                ),
                                RangeBreak::NothingLearned => {
                                    format!("{} = {shown} with nothing learned", names[i])
                                }
                            }
                        })
                        .collect();
                    (!broken.is_empty()).then(|| broken.join("; "))
                }
            };
            if let Some(m) = violation {
                violating.push(row as u32);
                messages.push(m);
            }
        }
        if violating.is_empty() {
            return Ok(vec![]);
        }
        let picked = take_record_batch(&batch, &UInt32Array::from(violating))?;
        let mut cols = picked.columns().to_vec();
        cols.push(Arc::new(StringArray::from(messages)));
        Ok(vec![RecordBatch::try_new(self.schema.clone(), cols)?])
    }

    /// Each row's key in Arrow row format (one constant column when the invariant has no key:
    /// the row format needs a column).
    fn key_rows(&mut self, batch: &RecordBatch) -> Result<Rows> {
        let mut keys = evaluate(&self.keys, batch)?;
        if keys.is_empty() {
            keys.push(Arc::new(datafusion::arrow::array::BooleanArray::from(
                vec![true; batch.num_rows()],
            )));
        }
        Ok(Self::converter(&mut self.key_rows, &keys)?.convert_columns(&keys)?)
    }

    /// `values` in the form this invariant's kind compares them.
    fn observe(&mut self, values: &[ArrayRef]) -> Result<Observed> {
        Ok(match self.kind {
            InvariantKind::Set => Observed::Set(
                Self::converter(&mut self.value_rows, values)?.convert_columns(values)?,
            ),
            InvariantKind::Range => Observed::Range(
                values
                    .iter()
                    .map(|v| {
                        let as_int = match v.data_type() {
                            DataType::Timestamp(_, _) => cast(v, &DataType::Int64)?,
                            _ => v.clone(),
                        };
                        let f = cast(&as_int, &DataType::Float64)?;
                        Ok(f.as_primitive::<Float64Type>().iter().collect())
                    })
                    .collect::<Result<_>>()?,
            ),
        })
    }
}

impl Operator for Invariant {
    fn name(&self) -> &'static str {
        "Invariant"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        // Rows at or behind the watermark (late, or without a time) have nothing to wait for.
        let times = self.times(&batch)?;
        let (now, wait): (Vec<u32>, Vec<u32>) = (0..batch.num_rows() as u32)
            .partition(|&i| times[i as usize].is_none_or(|t| t <= self.watermark));
        if !wait.is_empty() {
            self.pending
                .push(take_record_batch(&batch, &UInt32Array::from(wait))?);
        }
        if now.is_empty() {
            return Ok(vec![]);
        }
        self.check(take_record_batch(&batch, &UInt32Array::from(now))?)
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        self.watermark = self.watermark.max(watermark.0.nanos());
        if self.pending.is_empty() {
            return Ok(vec![]);
        }
        let all = concat_batches(&self.pending[0].schema(), &self.pending)?;
        self.pending.clear();
        let times = self.times(&all)?;
        // No row earlier than the watermark can arrive any more: check those up to it in time
        // order, ties in arrival order.
        let (mut ready, wait): (Vec<u32>, Vec<u32>) = (0..all.num_rows() as u32)
            .partition(|&i| times[i as usize].is_some_and(|t| t <= self.watermark));
        ready.sort_by_key(|&i| times[i as usize]);
        if !wait.is_empty() {
            self.pending
                .push(take_record_batch(&all, &UInt32Array::from(wait))?);
        }
        if ready.is_empty() {
            return Ok(vec![]);
        }
        self.check(take_record_batch(&all, &UInt32Array::from(ready))?)
    }

    /// The learned state as JSON (its length first), then the watermark and the waiting rows.
    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        let state = serde_json::to_vec(&self.state).map_err(|e| Error::Internal(e.to_string()))?;
        let pending = if self.pending.is_empty() {
            RecordBatch::new_empty(self.input_schema.clone())
        } else {
            concat_batches(&self.pending[0].schema(), &self.pending)?
        };
        let watermark = self.watermark;
        Ok(snapshot::StateImage::later(move || {
            let mut out = (state.len() as u64).to_le_bytes().to_vec();
            out.extend_from_slice(&state);
            out.extend(snapshot::encode(
                &[watermark],
                &pending.schema(),
                &[pending],
            )?);
            Ok(out)
        }))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let bad = || Error::Internal("corrupt invariant snapshot".into());
        let len = u64::from_le_bytes(
            bytes
                .get(..8)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        let end = len.checked_add(8).ok_or_else(bad)?;
        self.state = serde_json::from_slice(bytes.get(8..end).ok_or_else(bad)?)
            .map_err(|e| Error::Internal(format!("corrupt invariant snapshot: {e}")))?;
        let (header, pending) = snapshot::decode(bytes.get(end..).ok_or_else(bad)?)?;
        self.watermark = *header.first().ok_or_else(bad)?;
        self.pending = pending.into_iter().filter(|b| b.num_rows() > 0).collect();
        Ok(())
    }

    fn restore_carried(
        &mut self,
        snapshot: &[u8],
        rows: &dyn Fn(&[RecordBatch]) -> Result<Vec<RecordBatch>>,
    ) -> Result<()> {
        // The learned values and keys are the same expressions' values, in the same row
        // format; only the rows waiting for the watermark change columns.
        self.restore(snapshot)?;
        self.pending = rows(&self.pending)?
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .collect();
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        let slot = std::mem::size_of::<Vec<u8>>() + 8;
        let learned: usize = self
            .state
            .learned
            .iter()
            .map(|(key, l)| {
                key.capacity()
                    + slot
                    + std::mem::size_of::<Learned>()
                    + l.set.capacity() * slot
                    + l.set.iter().map(|v| v.capacity()).sum::<usize>()
                    + l.range.capacity() * std::mem::size_of::<Option<(f64, f64)>>()
                    + l.candidates.capacity() * (slot + 4)
                    + l.candidates.keys().map(|v| v.capacity()).sum::<usize>()
            })
            .sum();
        let pending: usize = self.pending.iter().map(|b| b.get_array_memory_size()).sum();
        learned + pending + self.state.windows.len() * 16
    }
}
