//! History within a partition: `LAG(x, k)` and aggregates `OVER (PARTITION BY ... ORDER BY
//! time ROWS|RANGE BETWEEN ... PRECEDING AND ...)`, computed incrementally from per-partition
//! ring buffers. Over a stream's raw rows, rows are held until the watermark passes them and
//! then processed in event-time order (as Flink's OVER aggregation does); over a windowed
//! query's results, which arrive in window order, each batch is processed at once. Missing
//! history (the first rows of a partition) gives NULL, or LAG's default.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use serde::{Deserialize, Serialize};

use super::event_order::EventOrder;
use super::robust::FrameFn;
use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::Watermark;

/// An aggregate over a frame of history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HistoryAgg {
    /// COUNT of non-NULL values.
    Count,
    /// SUM.
    Sum,
    /// AVG.
    Avg,
    /// MIN.
    Min,
    /// MAX.
    Max,
    /// Sample standard deviation (STDDEV, STDDEV_SAMP).
    StddevSamp,
    /// Population standard deviation.
    StddevPop,
    /// Sample variance.
    VarSamp,
    /// Population variance.
    VarPop,
    /// A robust or adaptive statistic ([`FrameFn`]: MEDIAN, MAD, QUANTILE, EWMA, ...).
    Frame(FrameFn),
}

impl HistoryAgg {
    /// The aggregate for a DataFusion function name, if supported.
    pub fn from_name(name: &str) -> Option<HistoryAgg> {
        Some(match name.to_ascii_lowercase().as_str() {
            "count" => HistoryAgg::Count,
            "sum" => HistoryAgg::Sum,
            "avg" | "mean" => HistoryAgg::Avg,
            "min" => HistoryAgg::Min,
            "max" => HistoryAgg::Max,
            "stddev" | "stddev_samp" => HistoryAgg::StddevSamp,
            "stddev_pop" => HistoryAgg::StddevPop,
            "var" | "var_samp" | "variance" => HistoryAgg::VarSamp,
            "var_pop" => HistoryAgg::VarPop,
            _ => return None,
        })
    }

    fn compute(self, values: impl Iterator<Item = f64> + Clone) -> Option<f64> {
        match self {
            HistoryAgg::Frame(f) => return f.compute(&values.collect::<Vec<f64>>()),
            // One pass, not the three the others take.
            HistoryAgg::Min => return values.reduce(f64::min),
            HistoryAgg::Max => return values.reduce(f64::max),
            _ => {}
        }
        let n = values.clone().count();
        if self == HistoryAgg::Count {
            return Some(n as f64);
        }
        if n == 0 {
            return None;
        }
        let sum: f64 = values.clone().sum();
        let mean = sum / n as f64;
        let sq = || values.clone().map(|v| (v - mean) * (v - mean)).sum::<f64>();
        match self {
            HistoryAgg::Count => Some(n as f64),
            HistoryAgg::Sum => Some(sum),
            HistoryAgg::Avg => Some(mean),
            HistoryAgg::Min => values.clone().reduce(f64::min),
            HistoryAgg::Max => values.clone().reduce(f64::max),
            HistoryAgg::VarPop => Some(sq() / n as f64),
            HistoryAgg::StddevPop => Some((sq() / n as f64).sqrt()),
            HistoryAgg::VarSamp => (n > 1).then(|| sq() / (n - 1) as f64),
            HistoryAgg::StddevSamp => (n > 1).then(|| (sq() / (n - 1) as f64).sqrt()),
            HistoryAgg::Frame(_) => None,
        }
    }
}

/// Where a frame starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameStart {
    /// `UNBOUNDED PRECEDING`: all history (kept as the values themselves: unbounded state, so
    /// prefer a bounded frame on long-lived streams).
    Unbounded,
    /// `n PRECEDING` rows.
    Rows(usize),
    /// `INTERVAL ... PRECEDING` in event time (nanoseconds).
    Range(i64),
}

/// One history column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HistoryFn {
    /// `LAG(arg, offset, default)`.
    Lag {
        /// Rows back.
        offset: usize,
        /// Value when there is no such row.
        default: ScalarValue,
    },
    /// An aggregate over `[start, end_offset PRECEDING]` (`end_offset` 0 is CURRENT ROW).
    Aggregate {
        /// The aggregate.
        agg: HistoryAgg,
        /// Frame start.
        start: FrameStart,
        /// Rows before the current one where the frame ends.
        end_offset: usize,
        /// A `RANGE` frame ending at `CURRENT ROW`: the rows of the partition with the same
        /// time as the current one are its peers and all in its frame, so peers get the same
        /// value (SQL's RANGE semantics); `ROWS` frames end at the row itself.
        peers: bool,
    },
}

/// A history column: its function, argument and output type.
#[derive(Debug, Clone)]
pub struct HistoryColumn {
    /// What it computes.
    pub function: HistoryFn,
    /// Its argument, over the input rows.
    pub arg: Arc<dyn PhysicalExpr>,
    /// Output type.
    pub data_type: DataType,
}

// Written out: a derived comparison of a bare `Arc<dyn PhysicalExpr>` field does not compile
// (rust-lang/rust#31740), and Hash must agree with it.
impl PartialEq for HistoryColumn {
    fn eq(&self, other: &Self) -> bool {
        self.function == other.function
            && Arc::eq(&self.arg, &other.arg)
            && self.data_type == other.data_type
    }
}

impl Eq for HistoryColumn {}

impl Hash for HistoryColumn {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.function.hash(state);
        self.arg.hash(state);
        self.data_type.hash(state);
    }
}

#[derive(Default)]
struct Partition {
    /// Per history column: (time, value) of recent rows, oldest first.
    recent: Vec<VecDeque<(i64, ScalarValue)>>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    watermark: i64,
    late_rows: u64,
    seq: u64,
}

/// Computes history columns and appends them to each row.
pub struct History {
    columns: Vec<HistoryColumn>,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// Whether input arrives in time order (a windowed query's results).
    ordered: bool,
    converter: Option<RowConverter>,
    partitions: HashMap<Vec<u8>, Partition>,
    /// Rows waiting for the watermark (unordered input).
    order: EventOrder,
    schema: SchemaRef,
}

impl History {
    /// A history operator producing `schema` (input columns, then one per history column).
    pub fn new(
        columns: Vec<HistoryColumn>,
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        time_column: usize,
        ordered: bool,
        input_schema: SchemaRef,
        schema: SchemaRef,
    ) -> Self {
        History {
            columns,
            partition_by,
            ordered,
            converter: None,
            partitions: HashMap::new(),
            order: EventOrder::new(time_column, input_schema),
            schema,
        }
    }

    /// Computes the history columns for rows already in time order.
    fn compute(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let times = self.order.times(&batch)?;
        let mut keys: Vec<ArrayRef> = self
            .partition_by
            .iter()
            .map(|e| e.evaluate(&batch).and_then(|v| v.into_array(n)))
            .collect::<datafusion::error::Result<_>>()?;
        if keys.is_empty() {
            keys.push(Arc::new(datafusion::arrow::array::BooleanArray::from(
                vec![true; n],
            )));
        }
        if self.converter.is_none() {
            self.converter = Some(RowConverter::new(
                keys.iter()
                    .map(|k| SortField::new(k.data_type().clone()))
                    .collect(),
            )?);
        }
        let rows = self
            .converter
            .as_ref()
            .ok_or_else(|| Error::Internal("no row converter".into()))?
            .convert_columns(&keys)?;
        let args: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|c| c.arg.evaluate(&batch).and_then(|v| v.into_array(n)))
            .collect::<datafusion::error::Result<_>>()?;
        let numeric: Vec<Option<Vec<Option<f64>>>> = self
            .columns
            .iter()
            .zip(&args)
            .map(|(c, a)| match c.function {
                HistoryFn::Lag { .. } => Ok(None),
                HistoryFn::Aggregate { .. } => {
                    let f = cast(a, &DataType::Float64)?;
                    Ok(Some(f.as_primitive::<Float64Type>().iter().collect()))
                }
            })
            .collect::<Result<_>>()?;
        let mut outputs: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(n); self.columns.len()];
        let width = self.columns.len();
        let keys: Vec<Vec<u8>> = (0..n).map(|row| rows.row(row).as_ref().to_vec()).collect();
        for key in &keys {
            if !self.partitions.contains_key(key) {
                self.partitions.insert(
                    key.clone(),
                    Partition {
                        recent: vec![VecDeque::new(); width],
                    },
                );
            }
        }
        // Rows arrive in time order: each run of rows with one time is a group of peers.
        let mut group = 0;
        while group < n {
            let t = times[group].unwrap_or(i64::MIN);
            let end = (group..n)
                .find(|&r| times[r].unwrap_or(i64::MIN) != t)
                .unwrap_or(n);
            for (i, col) in self.columns.iter().enumerate() {
                match &col.function {
                    HistoryFn::Lag { offset, default } => {
                        for (row, key) in (group..end).zip(&keys[group..end]) {
                            let recent = recent_of(&mut self.partitions, key, i)?;
                            let value = ScalarValue::try_from_array(&args[i], row)?;
                            let out = if *offset == 0 {
                                value.clone()
                            } else if recent.len() >= *offset {
                                recent[recent.len() - offset].1.clone()
                            } else {
                                default.clone()
                            };
                            outputs[i].push(out);
                            recent.push_back((t, value));
                            while recent.len() > *offset {
                                recent.pop_front();
                            }
                        }
                    }
                    HistoryFn::Aggregate {
                        agg,
                        start,
                        end_offset,
                        peers,
                    } => {
                        let x = |row: usize| numeric[i].as_ref().and_then(|v| v[row]);
                        if *peers {
                            // Every peer joins its partition's frame before any is computed.
                            for (row, key) in (group..end).zip(&keys[group..end]) {
                                push_value(
                                    recent_of(&mut self.partitions, key, i)?,
                                    t,
                                    x(row),
                                    *start,
                                );
                            }
                            for key in &keys[group..end] {
                                let recent = recent_of(&mut self.partitions, key, i)?;
                                outputs[i].push(frame_value(recent, *agg, *start, 0));
                            }
                        } else {
                            for (row, key) in (group..end).zip(&keys[group..end]) {
                                let recent = recent_of(&mut self.partitions, key, i)?;
                                outputs[i].push(row_value(
                                    recent,
                                    t,
                                    x(row),
                                    *agg,
                                    *start,
                                    *end_offset,
                                ));
                            }
                        }
                    }
                }
            }
            group = end;
        }
        let mut cols = batch.columns().to_vec();
        for (col, values) in self.columns.iter().zip(outputs) {
            let arr = if values.is_empty() {
                datafusion::arrow::array::new_empty_array(&col.data_type)
            } else {
                ScalarValue::iter_to_array(values)?
            };
            let arr = if arr.data_type() == &col.data_type {
                arr
            } else {
                cast(&arr, &col.data_type)?
            };
            cols.push(arr);
        }
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }
}

/// Column `i`'s recent values in the partition `key`.
fn recent_of<'p>(
    partitions: &'p mut HashMap<Vec<u8>, Partition>,
    key: &[u8],
    i: usize,
) -> Result<&'p mut VecDeque<(i64, ScalarValue)>> {
    partitions
        .get_mut(key)
        .and_then(|p| p.recent.get_mut(i))
        .ok_or_else(|| Error::Internal("history partition missing".into()))
}

/// Adds a value at time `t` to a column's recent values and drops what no frame starting at
/// `start` can reach any more.
fn push_value(
    recent: &mut VecDeque<(i64, ScalarValue)>,
    t: i64,
    x: Option<f64>,
    start: FrameStart,
) {
    recent.push_back((t, ScalarValue::Float64(x)));
    match start {
        FrameStart::Range(span) => {
            while recent
                .front()
                .is_some_and(|(ts, _)| *ts < t.saturating_sub(span))
            {
                recent.pop_front();
            }
        }
        FrameStart::Rows(k) => {
            while recent.len() > k + 1 {
                recent.pop_front();
            }
        }
        FrameStart::Unbounded => {}
    }
}

/// One row's value of an aggregate whose frame ends at the row or before it (no peers): the
/// row's value `x` joins the recent values, and the aggregate is computed over its frame. A
/// function that feeds back ([`FrameFn::feeds_back`]) answers from its earlier answers in the
/// frame, and its answer joins the recent values instead of `x`.
fn row_value(
    recent: &mut VecDeque<(i64, ScalarValue)>,
    t: i64,
    x: Option<f64>,
    agg: HistoryAgg,
    start: FrameStart,
    end_offset: usize,
) -> ScalarValue {
    match agg {
        HistoryAgg::Frame(f) if f.feeds_back() => {
            // The planner allows only `ROWS BETWEEN k PRECEDING AND CURRENT ROW` here.
            let k = match start {
                FrameStart::Rows(k) => k,
                _ => recent.len(),
            };
            let earlier = recent.iter().rev().take(k).map(|(_, v)| match v {
                ScalarValue::Float64(a) => *a,
                _ => None,
            });
            let answer = f.answer(earlier, x);
            push_value(recent, t, answer, start);
            ScalarValue::Float64(answer)
        }
        HistoryAgg::Frame(f) if f.scores_newest() && end_offset == 0 && x.is_none() => {
            push_value(recent, t, x, start);
            ScalarValue::Float64(None)
        }
        _ => {
            push_value(recent, t, x, start);
            frame_value(recent, agg, start, end_offset)
        }
    }
}

/// The aggregate over the frame that ends `end_offset` rows before the newest value.
fn frame_value(
    recent: &VecDeque<(i64, ScalarValue)>,
    agg: HistoryAgg,
    start: FrameStart,
    end_offset: usize,
) -> ScalarValue {
    let len = recent.len();
    let end = len.saturating_sub(end_offset);
    let begin = match start {
        FrameStart::Rows(k) => len.saturating_sub(k + 1),
        _ => 0,
    };
    let frame = recent
        .range(begin.min(end)..end)
        .filter_map(|(_, v)| match v {
            ScalarValue::Float64(Some(f)) => Some(*f),
            _ => None,
        });
    ScalarValue::Float64(agg.compute(frame))
}

impl History {
    /// The state's bytes: the pending rows, then one batch per (partition, column) of
    /// recent values (these are scalars, so they are encoded while the stream is locked).
    fn encode_state(&self) -> Result<Vec<u8>> {
        let header = serde_json::to_string(&Header {
            watermark: self.order.watermark(),
            late_rows: self.order.late_rows(),
            seq: self.partitions.len() as u64,
        })
        .map_err(|e| Error::Internal(e.to_string()))?;
        let pending = self.order.pending()?;
        let mut out = snapshot::encode(&[header.len() as i64], &pending.schema(), &[pending])?;
        let mut state = Vec::new();
        for (key, part) in &self.partitions {
            for (i, recent) in part.recent.iter().enumerate() {
                let times: Vec<i64> = recent.iter().map(|(t, _)| *t).collect();
                let values: Vec<ScalarValue> = recent.iter().map(|(_, v)| v.clone()).collect();
                state.push((key.clone(), i, times, values));
            }
        }
        let mut tail = header.into_bytes();
        for (key, i, times, values) in state {
            if values.is_empty() {
                continue;
            }
            let arr = ScalarValue::iter_to_array(values)?;
            let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(vec![
                datafusion::arrow::datatypes::Field::new("t", DataType::Int64, false),
                datafusion::arrow::datatypes::Field::new("v", arr.data_type().clone(), true),
            ]));
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(datafusion::arrow::array::Int64Array::from(times)),
                    arr,
                ],
            )?;
            let mut meta = vec![i as i64, key.len() as i64];
            meta.extend(key.iter().map(|b| *b as i64));
            let bytes = snapshot::encode(&meta, &schema, &[batch])?;
            tail.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            tail.extend_from_slice(&bytes);
        }
        out.splice(0..0, (out.len() as u64).to_le_bytes());
        out.extend_from_slice(&tail);
        Ok(out)
    }
}

impl Operator for History {
    fn name(&self) -> &'static str {
        "History"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        if self.ordered {
            return Ok(vec![self.compute(batch)?]);
        }
        // Hold the rows until the watermark says nothing earlier can arrive; rows behind the
        // watermark come too late to take their place in history.
        self.order.push(batch)?;
        Ok(vec![])
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        let sorted = self.order.release(watermark)?;
        if self.ordered {
            return Ok(vec![]);
        }
        sorted.into_iter().map(|b| self.compute(b)).collect()
    }

    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        Ok(snapshot::StateImage::ready(self.encode_state()?))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let bad = || Error::Internal("corrupt history snapshot".into());
        let head_len = u64::from_le_bytes(
            bytes
                .get(..8)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        let head = bytes.get(8..8 + head_len).ok_or_else(bad)?;
        let (meta, pending) = snapshot::decode(head)?;
        let header_len = *meta.first().ok_or_else(bad)? as usize;
        let mut pos = 8 + head_len;
        let header: Header =
            serde_json::from_slice(bytes.get(pos..pos + header_len).ok_or_else(bad)?)
                .map_err(|_| bad())?;
        pos += header_len;
        self.order
            .restore(header.watermark, header.late_rows, pending);
        self.partitions.clear();
        let width = self.columns.len();
        while pos < bytes.len() {
            let len = u64::from_le_bytes(
                bytes
                    .get(pos..pos + 8)
                    .ok_or_else(bad)?
                    .try_into()
                    .map_err(|_| bad())?,
            ) as usize;
            pos += 8;
            let (meta, batches) = snapshot::decode(bytes.get(pos..pos + len).ok_or_else(bad)?)?;
            pos += len;
            let i = *meta.first().ok_or_else(bad)? as usize;
            let key: Vec<u8> = meta
                .get(2..)
                .ok_or_else(bad)?
                .iter()
                .map(|b| *b as u8)
                .collect();
            let part = self.partitions.entry(key).or_insert_with(|| Partition {
                recent: vec![VecDeque::new(); width],
            });
            for b in batches {
                let times = b.column(0).as_primitive::<Int64Type>();
                for r in 0..b.num_rows() {
                    let v = ScalarValue::try_from_array(b.column(1), r)?;
                    part.recent
                        .get_mut(i)
                        .ok_or_else(bad)?
                        .push_back((times.value(r), v));
                }
            }
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.order.late_rows()
    }

    fn state_bytes(&self) -> usize {
        // Values counted at their inline size: strings' heap bytes are not walked.
        let entry = std::mem::size_of::<(i64, ScalarValue)>();
        let partitions: usize = self
            .partitions
            .iter()
            .map(|(key, p)| {
                key.capacity()
                    + std::mem::size_of::<Partition>()
                    + p.recent
                        .iter()
                        .map(|r| std::mem::size_of_val(r) + r.capacity() * entry)
                        .sum::<usize>()
            })
            .sum();
        partitions + self.order.pending_bytes()
    }
}
