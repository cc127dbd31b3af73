//! Tumbling and hopping window aggregation (`TUMBLE`, `HOP`). Each row is assigned to the
//! windows that contain its event time; each open window keeps its groups (keys in Arrow row
//! format) and their accumulators; a window is emitted once, when the watermark reaches its
//! end, and then forgotten.

use std::collections::BTreeMap;
use std::sync::Arc;

use ahash::AHashMap as HashMap;
use datafusion::arrow::array::{ArrayRef, AsArray, Int64Array, PrimitiveArray, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::{Int64Type, SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use datafusion::physical_plan::PhysicalExpr;

use super::aggregates::{AggregateSet, AggregateSpec};
use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::{EventTime, Watermark};

/// How rows map to fixed-size windows: `TUMBLE` has `slide == size`, `HOP` a smaller slide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowAssigner {
    /// Window length in nanoseconds.
    pub size: i64,
    /// Distance between window starts in nanoseconds.
    pub slide: i64,
}

impl WindowAssigner {
    /// Starts of every window containing `t`, latest first.
    pub fn starts(&self, t: i64) -> impl Iterator<Item = i64> + '_ {
        let last = t.div_euclid(self.slide) * self.slide;
        (0..)
            .map(move |k| last - k * self.slide)
            .take_while(move |s| s + self.size > t)
    }
}

/// The layout of a windowed query's input: where the event time and window columns are.
#[derive(Debug, Clone)]
pub struct WindowedInput {
    /// Schema the group expressions were planned against: stream columns, then
    /// `window_start` and `window_end`.
    pub schema: SchemaRef,
    /// Index of the event-time column.
    pub time_column: usize,
}

impl WindowedInput {
    /// `batch` (stream columns only) with constant window bounds appended.
    pub fn with_bounds(&self, batch: &RecordBatch, start: i64, end: i64) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let ty = self
            .schema
            .field(self.schema.fields().len() - 1)
            .data_type()
            .clone();
        let mut cols = batch.columns().to_vec();
        for v in [start, end] {
            let arr: ArrayRef = Arc::new(
                PrimitiveArray::<TimestampNanosecondType>::from_value(v, n)
                    .with_data_type(ty.clone()),
            );
            cols.push(arr);
        }
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }

    /// The event times of a batch.
    pub fn times<'a>(&self, batch: &'a RecordBatch) -> &'a PrimitiveArray<TimestampNanosecondType> {
        batch
            .column(self.time_column)
            .as_primitive::<TimestampNanosecondType>()
    }
}

struct WindowGroups {
    keys: Rows,
    index: HashMap<Box<[u8]>, usize>,
    aggs: AggregateSet,
}

/// Aggregates rows per (window, group) and emits each window when the watermark passes it.
pub struct WindowAggregate {
    assigner: WindowAssigner,
    input: WindowedInput,
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    converter: RowConverter,
    specs: Arc<[AggregateSpec]>,
    /// Open windows by (end, start).
    windows: BTreeMap<(i64, i64), WindowGroups>,
    watermark: Watermark,
    late_rows: u64,
    schema: SchemaRef,
}

impl WindowAggregate {
    /// A window aggregate grouping by `group_exprs` (which may name `window_start` and
    /// `window_end`) and computing `specs`, producing batches of `schema` (group columns, then
    /// aggregates).
    pub fn try_new(
        assigner: WindowAssigner,
        input: WindowedInput,
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        specs: Vec<AggregateSpec>,
        schema: SchemaRef,
    ) -> Result<Self> {
        if assigner.size <= 0 || assigner.slide <= 0 {
            return Err(Error::plan(
                "22023",
                "window size and slide must be positive",
            ));
        }
        let fields = group_exprs
            .iter()
            .map(|e| Ok(SortField::new(e.data_type(&input.schema)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(WindowAggregate {
            assigner,
            input,
            group_exprs,
            converter: RowConverter::new(fields)?,
            specs: specs.into(),
            windows: BTreeMap::new(),
            watermark: Watermark::START,
            late_rows: 0,
            schema,
        })
    }

    fn window_mut(&mut self, end: i64, start: i64) -> Result<&mut WindowGroups> {
        if !self.windows.contains_key(&(end, start)) {
            let groups = WindowGroups {
                keys: self.converter.empty_rows(64, 1024),
                index: HashMap::new(),
                aggs: AggregateSet::try_new(self.specs.clone())?,
            };
            self.windows.insert((end, start), groups);
        }
        self.windows
            .get_mut(&(end, start))
            .ok_or_else(|| Error::Internal("window vanished".into()))
    }

    fn update_window(&mut self, start: i64, rows: RecordBatch) -> Result<()> {
        let end = start + self.assigner.size;
        let batch = self.input.with_bounds(&rows, start, end)?;
        let n = batch.num_rows();
        let keys = self
            .group_exprs
            .iter()
            .map(|e| e.evaluate(&batch).and_then(|v| v.into_array(n)))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let rows = self.converter.convert_columns(&keys)?;
        let window = self.window_mut(end, start)?;
        let inputs = window.aggs.inputs(&batch)?;
        let mut group_indices = Vec::with_capacity(n);
        for row in rows.iter() {
            let next = window.index.len();
            let g = match window.index.get(row.as_ref()) {
                Some(&g) => g,
                None => {
                    window.index.insert(row.as_ref().into(), next);
                    window.keys.push(row);
                    next
                }
            };
            group_indices.push(g);
        }
        let total = window.index.len();
        window.aggs.update(&inputs, &group_indices, total)
    }

    fn emit(&mut self, end: i64, start: i64) -> Result<Option<RecordBatch>> {
        let Some(mut w) = self.windows.remove(&(end, start)) else {
            return Ok(None);
        };
        let mut columns = self.converter.convert_rows(&w.keys)?;
        columns.extend(w.aggs.evaluate()?);
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }

    fn state_schema(&self) -> Result<SchemaRef> {
        super::aggregates::state_schema(
            ["__window_end", "__window_start"],
            &self.group_exprs,
            &self.input.schema,
            &self.specs,
        )
    }
}

impl Operator for WindowAggregate {
    fn name(&self) -> &'static str {
        "WindowAggregate"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let times = self.input.times(&batch);
        // Rows per window start, in first-seen order; most batches touch one or two windows.
        let mut per_window: Vec<(i64, Vec<u32>)> = Vec::new();
        let wm = self.watermark.0.nanos();
        for (i, t) in times.iter().enumerate() {
            let Some(t) = t else {
                self.late_rows += 1;
                continue;
            };
            let mut placed = false;
            for start in self.assigner.starts(t) {
                if start.saturating_add(self.assigner.size) <= wm {
                    continue;
                }
                placed = true;
                match per_window.iter_mut().find(|(s, _)| *s == start) {
                    Some((_, rows)) => rows.push(i as u32),
                    None => per_window.push((start, vec![i as u32])),
                }
            }
            if !placed {
                self.late_rows += 1;
            }
        }
        for (start, rows) in per_window {
            let part = if rows.len() == batch.num_rows() {
                batch.clone()
            } else {
                take_record_batch(&batch, &UInt32Array::from(rows))?
            };
            self.update_window(start, part)?;
        }
        Ok(vec![])
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        self.watermark = self.watermark.max(watermark);
        let mut out = Vec::new();
        while let Some((&(end, start), _)) = self.windows.first_key_value() {
            if end > self.watermark.0.nanos() {
                break;
            }
            if let Some(b) = self.emit(end, start)? {
                out.push(b);
            }
        }
        Ok(out)
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        let schema = self.state_schema()?;
        let mut batches = Vec::new();
        let keys: Vec<(i64, i64)> = self.windows.keys().copied().collect();
        for (end, start) in keys {
            let converter = &self.converter;
            let w = self
                .windows
                .get_mut(&(end, start))
                .ok_or_else(|| Error::Internal("window vanished".into()))?;
            let n = w.keys.num_rows();
            let mut cols: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_value(end, n)),
                Arc::new(Int64Array::from_value(start, n)),
            ];
            cols.extend(converter.convert_rows(&w.keys)?);
            cols.extend(w.aggs.state()?);
            batches.push(RecordBatch::try_new(schema.clone(), cols)?);
        }
        let header = [self.watermark.0.nanos(), self.late_rows as i64];
        snapshot::encode(&header, &schema, &batches)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let (header, batches) = snapshot::decode(bytes)?;
        let [wm, late] = header[..] else {
            return Err(Error::Internal("corrupt window snapshot header".into()));
        };
        self.watermark = Watermark(EventTime(wm));
        self.late_rows = late as u64;
        self.windows.clear();
        let nkeys = self.group_exprs.len();
        for b in batches {
            if b.num_rows() == 0 {
                continue;
            }
            let end = b.column(0).as_primitive::<Int64Type>().value(0);
            let start = b.column(1).as_primitive::<Int64Type>().value(0);
            let rows = self.converter.convert_columns(&b.columns()[2..2 + nkeys])?;
            let w = self.window_mut(end, start)?;
            let mut indices = Vec::with_capacity(b.num_rows());
            for row in rows.iter() {
                let g = w.index.len();
                w.index.insert(row.as_ref().into(), g);
                w.keys.push(row);
                indices.push(g);
            }
            let total = w.index.len();
            w.aggs.merge(&b.columns()[2 + nkeys..], &indices, total)?;
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tumble_and_hop_assignment() {
        let tumble = WindowAssigner {
            size: 10,
            slide: 10,
        };
        assert_eq!(tumble.starts(0).collect::<Vec<_>>(), vec![0]);
        assert_eq!(tumble.starts(19).collect::<Vec<_>>(), vec![10]);
        assert_eq!(tumble.starts(-1).collect::<Vec<_>>(), vec![-10]);
        let hop = WindowAssigner { size: 10, slide: 5 };
        assert_eq!(hop.starts(12).collect::<Vec<_>>(), vec![10, 5]);
        assert_eq!(hop.starts(10).collect::<Vec<_>>(), vec![10, 5]);
        let hop = WindowAssigner { size: 10, slide: 3 };
        assert_eq!(hop.starts(9).collect::<Vec<_>>(), vec![9, 6, 3, 0]);
    }
}
