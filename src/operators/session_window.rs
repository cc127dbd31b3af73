//! Session windows (`SESSION(stream, ts, gap)`): per group key, rows closer than `gap` to each
//! other fall into one session; a row that bridges two sessions merges them (their aggregate
//! states are merged). A session is emitted when the watermark passes its last row plus the
//! gap.

use crate::error::sqlstate;
use std::sync::Arc;

use ahash::AHashMap as HashMap;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, PrimitiveArray};
use datafusion::arrow::compute::concat;
use datafusion::arrow::datatypes::{Int64Type, SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use datafusion::physical_plan::PhysicalExpr;

use super::aggregates::{AggregateSet, AggregateSpec};
use super::window_aggregate::WindowedInput;
use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::{EventTime, Watermark};

/// Where each output group column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupColumn {
    /// The i-th key expression.
    Key(usize),
    /// The session's start (its first row's time).
    WindowStart,
    /// The session's end (its last row's time plus the gap).
    WindowEnd,
}

struct Session {
    start: i64,
    end: i64,
    aggs: AggregateSet,
}

/// Session-window aggregation.
pub struct SessionWindow {
    gap: i64,
    input: WindowedInput,
    key_exprs: Vec<Arc<dyn PhysicalExpr>>,
    layout: Vec<GroupColumn>,
    converter: RowConverter,
    specs: Arc<[AggregateSpec]>,
    /// Key row → index into `keys` and `sessions`.
    index: HashMap<Box<[u8]>, usize>,
    keys: Rows,
    /// Open sessions per key, sorted by start, non-overlapping.
    sessions: Vec<Vec<Session>>,
    watermark: Watermark,
    late_rows: u64,
    schema: SchemaRef,
}

impl SessionWindow {
    /// A session aggregate with `gap` nanoseconds, keyed by `key_exprs`, whose output group
    /// columns follow `layout`, then the aggregates of `specs`.
    pub fn try_new(
        gap: i64,
        input: WindowedInput,
        key_exprs: Vec<Arc<dyn PhysicalExpr>>,
        layout: Vec<GroupColumn>,
        specs: Vec<AggregateSpec>,
        schema: SchemaRef,
    ) -> Result<Self> {
        if gap <= 0 {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "session gap must be positive",
            ));
        }
        // Without keys all rows share one key; Arrow's row format needs at least one column.
        let key_exprs = if key_exprs.is_empty() {
            vec![datafusion::physical_expr::expressions::lit(true)]
        } else {
            key_exprs
        };
        let fields = key_exprs
            .iter()
            .map(|e| Ok(SortField::new(e.data_type(&input.schema)?)))
            .collect::<Result<Vec<_>>>()?;
        let converter = RowConverter::new(fields)?;
        let keys = converter.empty_rows(64, 1024);
        Ok(SessionWindow {
            gap,
            input,
            key_exprs,
            layout,
            converter,
            specs: specs.into(),
            index: HashMap::new(),
            keys,
            sessions: Vec::new(),
            watermark: Watermark::START,
            late_rows: 0,
            schema,
        })
    }

    fn key_index(&mut self, row: datafusion::arrow::row::Row<'_>) -> usize {
        if let Some(&k) = self.index.get(row.as_ref()) {
            return k;
        }
        let k = self.sessions.len();
        self.index.insert(row.as_ref().into(), k);
        self.keys.push(row);
        self.sessions.push(Vec::new());
        k
    }

    /// Adds one row at time `t` to key `k`'s sessions, merging the sessions it bridges.
    fn add(
        &mut self,
        k: usize,
        t: i64,
        inputs: &super::aggregates::AggregateInputs,
    ) -> Result<bool> {
        let gap = self.gap;
        let wm = self.watermark.0.nanos();
        let sessions = &mut self.sessions[k];
        let hi = t
            .checked_add(gap)
            .ok_or_else(|| crate::time::bound_overflow(t, gap, "a session gap"))?;
        let lo = t;
        let touching: Vec<usize> = sessions
            .iter()
            .enumerate()
            .filter(|(_, s)| s.start <= hi && lo <= s.end)
            .map(|(i, _)| i)
            .collect();
        if touching.is_empty() && hi <= wm {
            return Ok(false);
        }
        let mut merged = match touching.first() {
            Some(&i) => sessions.remove(i),
            None => Session {
                start: lo,
                end: hi,
                aggs: AggregateSet::try_new(self.specs.clone())?,
            },
        };
        // Remaining touching sessions shifted left by one after the first removal.
        for (n, &i) in touching.iter().enumerate().skip(1) {
            let mut other = sessions.remove(i - n);
            let state = other.aggs.take_state()?;
            merged.aggs.merge(&state, &[0], 1)?;
            merged.start = merged.start.min(other.start);
            merged.end = merged.end.max(other.end);
        }
        merged.start = merged.start.min(lo);
        merged.end = merged.end.max(hi);
        merged.aggs.update(inputs, &[0], 1)?;
        let pos = sessions.partition_point(|s| s.start < merged.start);
        sessions.insert(pos, merged);
        Ok(true)
    }

    fn timestamp_array(&self, values: Vec<i64>) -> ArrayRef {
        let ty = self
            .input
            .schema
            .field(self.input.time_column)
            .data_type()
            .clone();
        Arc::new(PrimitiveArray::<TimestampNanosecondType>::from(values).with_data_type(ty))
    }

    fn state_schema(&self) -> Result<SchemaRef> {
        super::aggregates::state_schema(
            ["__start", "__end"],
            &self.key_exprs,
            &self.input.schema,
            &self.specs,
        )
    }
}

impl Operator for SessionWindow {
    fn name(&self) -> &'static str {
        "SessionWindow"
    }

    fn emit_order(&self) -> Option<usize> {
        let at = |w: &GroupColumn| self.layout.iter().position(|g| g == w);
        at(&GroupColumn::WindowEnd).or_else(|| at(&GroupColumn::WindowStart))
    }

    fn shard_keys(&self) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
        (!self.key_exprs.is_empty()).then(|| self.key_exprs.clone())
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let n = batch.num_rows();
        let keys = self
            .key_exprs
            .iter()
            .map(|e| e.evaluate(&batch).and_then(|v| v.into_array(n)))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let rows = self.converter.convert_columns(&keys)?;
        // Aggregate arguments never refer to window bounds, so evaluate them once.
        let with_bounds = self.input.with_bounds(&batch, 0, 0)?;
        let inputs = super::aggregates::evaluate_inputs(&self.specs, &with_bounds)?;
        let times = self.input.times(&batch).clone();
        for (i, row) in rows.iter().enumerate() {
            if times.is_null(i) {
                self.late_rows += 1;
                continue;
            }
            let k = self.key_index(row);
            if !self.add(k, times.value(i), &inputs.slice(i, 1))? {
                self.late_rows += 1;
            }
        }
        Ok(vec![])
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        self.watermark = self.watermark.max(watermark);
        let wm = self.watermark.0.nanos();
        let mut closed: Vec<(i64, usize, Session)> = Vec::new();
        for (k, sessions) in self.sessions.iter_mut().enumerate() {
            while sessions.first().is_some_and(|s| s.end <= wm) {
                let s = sessions.remove(0);
                closed.push((s.end, k, s));
            }
        }
        if closed.is_empty() {
            return Ok(vec![]);
        }
        closed.sort_by_key(|(end, k, _)| (*end, *k));
        let key_rows = self.converter.empty_rows(closed.len(), 1024);
        let mut key_rows = key_rows;
        for (_, k, _) in &closed {
            key_rows.push(self.keys.row(*k));
        }
        let key_cols = self.converter.convert_rows(&key_rows)?;
        let starts = self.timestamp_array(closed.iter().map(|(_, _, s)| s.start).collect());
        let ends = self.timestamp_array(closed.iter().map(|(_, _, s)| s.end).collect());
        let mut columns: Vec<ArrayRef> = self
            .layout
            .iter()
            .map(|g| match g {
                GroupColumn::Key(i) => key_cols[*i].clone(),
                GroupColumn::WindowStart => starts.clone(),
                GroupColumn::WindowEnd => ends.clone(),
            })
            .collect();
        let mut per_agg: Vec<Vec<ArrayRef>> = vec![Vec::new(); self.specs.len()];
        for (_, _, mut s) in closed {
            for (col, v) in per_agg.iter_mut().zip(s.aggs.evaluate()?) {
                col.push(v);
            }
        }
        for parts in per_agg {
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            columns.push(concat(&refs)?);
        }
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }

    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        let schema = self.state_schema()?;
        let mut batches = Vec::new();
        for k in 0..self.sessions.len() {
            for si in 0..self.sessions[k].len() {
                let mut rows = self.converter.empty_rows(1, 64);
                rows.push(self.keys.row(k));
                let s = &mut self.sessions[k][si];
                let mut cols: Vec<ArrayRef> = vec![
                    Arc::new(Int64Array::from(vec![s.start])),
                    Arc::new(Int64Array::from(vec![s.end])),
                ];
                cols.extend(self.converter.convert_rows(&rows)?);
                cols.extend(s.aggs.state()?);
                batches.push(RecordBatch::try_new(schema.clone(), cols)?);
            }
        }
        let header = [self.watermark.0.nanos(), self.late_rows as i64];
        Ok(snapshot::StateImage::later(move || {
            snapshot::encode(&header, &schema, &batches)
        }))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let (header, batches) = snapshot::decode(bytes)?;
        let [wm, late] = header[..] else {
            return Err(Error::Internal("corrupt session snapshot header".into()));
        };
        self.watermark = Watermark(EventTime(wm));
        self.late_rows = late as u64;
        self.index.clear();
        self.keys = self.converter.empty_rows(64, 1024);
        self.sessions.clear();
        let nkeys = self.key_exprs.len();
        for b in batches {
            let rows = self.converter.convert_columns(&b.columns()[2..2 + nkeys])?;
            let starts = b.column(0).as_primitive::<Int64Type>();
            let ends = b.column(1).as_primitive::<Int64Type>();
            for (i, row) in rows.iter().enumerate() {
                let k = self.key_index(row);
                let mut aggs = AggregateSet::try_new(self.specs.clone())?;
                let state: Vec<ArrayRef> = b.columns()[2 + nkeys..]
                    .iter()
                    .map(|c| c.slice(i, 1))
                    .collect();
                aggs.merge(&state, &[0], 1)?;
                let session = Session {
                    start: starts.value(i),
                    end: ends.value(i),
                    aggs,
                };
                let list = &mut self.sessions[k];
                let pos = list.partition_point(|s| s.start < session.start);
                list.insert(pos, session);
            }
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }

    fn state_bytes(&self) -> usize {
        let sessions: usize = self
            .sessions
            .iter()
            .map(|list| {
                list.capacity() * std::mem::size_of::<Session>()
                    + list.iter().map(|s| s.aggs.size_bytes()).sum::<usize>()
            })
            .sum();
        // The index holds a copy of every key row and a pointer-sized entry per slot.
        let index = self.keys.size() + self.index.capacity() * 32;
        self.keys.size() + index + sessions
    }
}
