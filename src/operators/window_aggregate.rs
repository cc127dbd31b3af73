//! Tumbling, hopping and cumulating window aggregation (`TUMBLE`, `HOP`, `CUMULATE`), by
//! panes: time is cut into panes of `gcd(size, slide)` (the slide, or CUMULATE's step,
//! usually), every row updates the groups of its one pane, and when the watermark reaches a
//! window's end the window's result is its panes' partial states merged. A pane is dropped once no open window needs it. A tumbling window is one
//! pane and is evaluated directly. Group keys that are not the bare `window_start` or
//! `window_end` columns but depend on them (e.g. `ts > window_start + INTERVAL ...`) cannot be
//! computed per pane: such hopping queries keep one group table per window instead.
//!
//! Each window's groups come out in the order of their first rows, as if the window had been
//! fed its rows directly. SUM, AVG and variances over floating-point values can differ from
//! that in the last bits, since panes are summed separately.

use crate::error::sqlstate;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, PrimitiveArray, UInt32Array,
};
use datafusion::arrow::compute::kernels::aggregate::{max, min};
use datafusion::arrow::compute::{prep_null_mask_filter, take, take_record_batch, FilterBuilder};
use datafusion::arrow::datatypes::{
    DataType, Field, Int64Type, Schema, SchemaRef, TimestampNanosecondType,
};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::expressions::{lit, Column, Literal};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::PhysicalExpr;

use super::aggregates::{
    evaluate_inputs, AggregateInputs, AggregateSpec, GroupPartials, GroupTable,
};
use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::{EventTime, Watermark};

/// Above this many panes per window, a hopping window keeps its own group table instead: the
/// panes would be too small to gain anything (e.g. a 1 h window sliding by 59 min 59 s has
/// panes of 1 s).
const MAX_PANES_PER_WINDOW: i64 = 1024;

/// How rows map to windows: `TUMBLE` has `slide == size`, `HOP` a smaller slide. `CUMULATE`
/// (Flink's) cuts time into periods of `size` aligned to the epoch; each period has windows
/// that all start with it and end every `slide` (its step): `[s, s + step)`, `[s, s + 2 *
/// step)`, ... `[s, s + size)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowAssigner {
    /// Window length in nanoseconds (CUMULATE: the longest window's).
    pub size: i64,
    /// Distance between window starts in nanoseconds (CUMULATE: between window ends).
    pub slide: i64,
    /// CUMULATE windows rather than TUMBLE or HOP.
    pub cumulate: bool,
}

impl WindowAssigner {
    /// `TUMBLE` windows of `size`.
    pub fn tumble(size: i64) -> Self {
        WindowAssigner {
            size,
            slide: size,
            cumulate: false,
        }
    }

    /// `HOP` windows of `size` starting every `slide`.
    pub fn hop(slide: i64, size: i64) -> Self {
        WindowAssigner {
            size,
            slide,
            cumulate: false,
        }
    }

    /// `CUMULATE` windows growing by `step` up to `size`.
    pub fn cumulate(step: i64, size: i64) -> Self {
        WindowAssigner {
            size,
            slide: step,
            cumulate: true,
        }
    }

    /// Every window containing `t` as (start, end), the one ending last first.
    pub fn windows(&self, t: i64) -> Vec<(i64, i64)> {
        if self.cumulate {
            let start = t.div_euclid(self.size) * self.size;
            // The first window holding t ends after it.
            let first = (t - start).div_euclid(self.slide) + 1;
            (first..=self.size / self.slide)
                .rev()
                .map(|k| (start, start.saturating_add(k * self.slide)))
                .collect()
        } else {
            self.starts(t)
                .map(|s| (s, s.saturating_add(self.size)))
                .collect()
        }
    }

    /// End of the window containing `t` that ends last, if a window contains it.
    pub fn last_end(&self, t: i64) -> Option<i64> {
        if self.cumulate {
            Some((t.div_euclid(self.size) * self.size).saturating_add(self.size))
        } else {
            self.last_start(t).map(|s| s.saturating_add(self.size))
        }
    }

    /// Start of the last window that contains `t`, if a window does (hopping windows with a
    /// slide larger than their size leave gaps). TUMBLE and HOP only.
    pub fn last_start(&self, t: i64) -> Option<i64> {
        self.starts(t).next()
    }

    /// Checks that the bounds of every window of an event at `lo` or `hi` (and so of every
    /// event between) lie within the range of timestamps: 22008 naming the event otherwise.
    pub fn check(&self, lo: i64, hi: i64) -> Result<()> {
        let reach = self.size.max(self.slide);
        for t in [lo, hi] {
            if t.checked_sub(reach).is_none() || t.checked_add(reach).is_none() {
                return Err(crate::time::bound_overflow(t, self.size, "a window"));
            }
        }
        Ok(())
    }

    /// Starts of every window containing `t`, latest first. TUMBLE and HOP only.
    pub fn starts(&self, t: i64) -> impl Iterator<Item = i64> + '_ {
        let last = t.div_euclid(self.slide) * self.slide;
        (0..)
            .map(move |k| last - k * self.slide)
            .take_while(move |s| s + self.size > t)
    }
}

/// The layout of a windowed query's input: where the event time and window columns are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
        let ty = self.bound_type();
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

    /// The type of the `window_start` and `window_end` columns.
    pub fn bound_type(&self) -> DataType {
        self.schema
            .field(self.schema.fields().len() - 1)
            .data_type()
            .clone()
    }

    /// The event times of a batch.
    pub fn times<'a>(&self, batch: &'a RecordBatch) -> &'a PrimitiveArray<TimestampNanosecondType> {
        batch
            .column(self.time_column)
            .as_primitive::<TimestampNanosecondType>()
    }
}

/// Rows to add to their slots.
enum Rows<'a> {
    /// Their keys and aggregate inputs, evaluated once for every slot.
    Evaluated(Vec<ArrayRef>, AggregateInputs),
    /// The rows themselves, to evaluate per slot with its bounds.
    PerSlot(&'a RecordBatch),
}

/// Where an output group column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupColumn {
    /// The i-th key expression.
    Key(usize),
    WindowStart,
    WindowEnd,
}

/// How rows are laid out in slots: panes shared by the windows, or one slot per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slots {
    /// A row goes to the pane of this width containing it; a window merges its panes.
    Panes(i64),
    /// A row goes to every window containing it; a slot is a window.
    Windows,
}

/// The groups of one pane (or window): the live table that rows update, and partials frozen
/// out of it when a window needed the pane's state while later windows still need the pane.
struct Slot {
    live: GroupTable,
    frozen: Vec<GroupPartials>,
}

impl Slot {
    /// Moves the live groups into `frozen`, so that every partial is in `frozen`.
    fn freeze(&mut self) -> Result<()> {
        if !self.live.is_empty() {
            let partials = self.live.take_partials()?;
            self.frozen.push(partials);
        }
        Ok(())
    }
}

/// The snapshot column that marks a slot's live groups.
const LIVE_COLUMN: &str = "__live";

/// Emptied group tables kept for reuse: their hash tables keep their room, so new panes and
/// merged windows do not grow theirs from nothing.
const SPARE_TABLES: usize = 4;

/// Aggregates rows per (window, group) and emits each window when the watermark passes it.
pub struct WindowAggregate {
    assigner: WindowAssigner,
    input: WindowedInput,
    slots_by: Slots,
    /// Group expressions other than bare `window_start` / `window_end`; a constant when there
    /// are none (the group tables need a key column).
    key_exprs: Vec<Arc<dyn PhysicalExpr>>,
    key_schema: SchemaRef,
    /// Output group columns, in order.
    layout: Vec<GroupColumn>,
    /// Whether keys or aggregate inputs read the window bounds, so that they are evaluated per
    /// slot, with its bounds, instead of once per batch.
    per_slot_eval: bool,
    /// Whether keys and aggregate inputs are input columns (or constants), so that picking
    /// the rows of some of them is cheaper than filtering the whole input first.
    columns_only: bool,
    specs: Arc<[AggregateSpec]>,
    /// Slots by start.
    slots: BTreeMap<i64, Slot>,
    /// Windows that have rows, by (end, start): each is emitted once.
    windows: BTreeSet<(i64, i64)>,
    /// Empty tables for reuse.
    spare: Vec<GroupTable>,
    /// Sequence number of the next input row.
    next_seq: u64,
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
                sqlstate::INVALID_PARAMETER_VALUE,
                "window size and slide must be positive",
            ));
        }
        if assigner.cumulate && assigner.size % assigner.slide != 0 {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "CUMULATE size must be a whole multiple of its step",
            ));
        }
        // The stream's columns, then window_start and window_end.
        let stream_columns = input.schema.fields().len().saturating_sub(2);
        let reads_window = |e: &Arc<dyn PhysicalExpr>| {
            collect_columns(e)
                .iter()
                .any(|c| c.index() >= stream_columns)
        };
        let mut layout = Vec::new();
        let mut key_exprs = Vec::new();
        for e in group_exprs {
            match e.downcast_ref::<Column>().map(|c| c.index()) {
                Some(i) if i == stream_columns => layout.push(GroupColumn::WindowStart),
                Some(i) if i == stream_columns + 1 => layout.push(GroupColumn::WindowEnd),
                _ => {
                    layout.push(GroupColumn::Key(key_exprs.len()));
                    key_exprs.push(e);
                }
            }
        }
        let per_slot_eval = key_exprs.iter().any(reads_window)
            || specs.iter().any(|s| {
                s.expr.expressions().iter().any(reads_window)
                    || s.filter.as_ref().is_some_and(reads_window)
            });
        let plain = |e: &Arc<dyn PhysicalExpr>| {
            e.downcast_ref::<Column>().is_some() || e.downcast_ref::<Literal>().is_some()
        };
        let columns_only = !per_slot_eval
            && key_exprs.iter().all(plain)
            && specs
                .iter()
                .all(|s| s.expr.expressions().iter().all(plain) && s.filter.is_none());
        if key_exprs.is_empty() {
            key_exprs.push(lit(true));
        }
        let pane = gcd(assigner.size, assigner.slide);
        if assigner.cumulate && per_slot_eval {
            // Cumulating windows share their start: they can only be cut into panes.
            return Err(Error::NotSupported(
                "CUMULATE with group keys or aggregates that read window_start or window_end"
                    .into(),
            ));
        }
        // A tumbling window is its own pane, whatever its keys read.
        let slots_by = if assigner.slide == assigner.size
            || assigner.cumulate
            || (!per_slot_eval && assigner.size / pane <= MAX_PANES_PER_WINDOW)
        {
            Slots::Panes(pane)
        } else {
            Slots::Windows
        };
        let key_fields = key_exprs
            .iter()
            .enumerate()
            .map(|(i, e)| {
                Ok(Field::new(
                    format!("__key{i}"),
                    e.data_type(&input.schema)?,
                    true,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(WindowAggregate {
            assigner,
            input,
            slots_by,
            key_exprs,
            key_schema: Arc::new(Schema::new(key_fields)),
            layout,
            per_slot_eval,
            columns_only,
            specs: specs.into(),
            slots: BTreeMap::new(),
            windows: BTreeSet::new(),
            spare: Vec::new(),
            next_seq: 0,
            watermark: Watermark::START,
            late_rows: 0,
            schema,
        })
    }

    /// Width of a slot: the pane, or the whole window.
    fn slot_width(&self) -> i64 {
        match self.slots_by {
            Slots::Panes(width) => width,
            Slots::Windows => self.assigner.size,
        }
    }

    /// Whether rows at `t` still have a window to go to.
    fn accepts(&self, t: i64) -> bool {
        self.assigner
            .last_end(t)
            .is_some_and(|end| end > self.watermark.0.nanos())
    }

    /// The row indices of `times` per slot start, slots in first-seen order; counts late rows.
    fn assign(&mut self, times: &PrimitiveArray<TimestampNanosecondType>) -> Vec<(i64, Vec<u32>)> {
        // Usually a batch lies within one pane: then its rows need not be placed one by one.
        if let (Slots::Panes(width), 0) = (self.slots_by, times.null_count()) {
            if let (Some(lo), Some(hi)) = (min(times), max(times)) {
                let start = lo.div_euclid(width) * width;
                if hi < start.saturating_add(width) && self.accepts(start) {
                    return vec![(start, (0..times.len() as u32).collect())];
                }
            }
        }
        let mut slots: Vec<(i64, Vec<u32>)> = Vec::new();
        let mut late = 0;
        match self.slots_by {
            Slots::Panes(width) => {
                // The previous row's pane, [lo, hi), and its entry in `slots` (None: late).
                let (mut lo, mut hi, mut entry) = (0, 0, None);
                for i in 0..times.len() {
                    if times.is_null(i) {
                        late += 1;
                        continue;
                    }
                    let t = times.value(i);
                    if t < lo || t >= hi {
                        lo = t.div_euclid(width) * width;
                        hi = lo.saturating_add(width);
                        entry = self.accepts(lo).then(|| {
                            slots.iter().position(|(s, _)| *s == lo).unwrap_or_else(|| {
                                slots.push((lo, Vec::new()));
                                slots.len() - 1
                            })
                        });
                    }
                    match entry {
                        Some(e) => slots[e].1.push(i as u32),
                        None => late += 1,
                    }
                }
            }
            Slots::Windows => {
                let wm = self.watermark.0.nanos();
                for (i, t) in times.iter().enumerate() {
                    let Some(t) = t else {
                        late += 1;
                        continue;
                    };
                    let mut placed = false;
                    for (start, end) in self.assigner.windows(t) {
                        if end <= wm {
                            continue;
                        }
                        placed = true;
                        match slots.iter_mut().find(|(s, _)| *s == start) {
                            Some((_, rows)) => rows.push(i as u32),
                            None => slots.push((start, vec![i as u32])),
                        }
                    }
                    if !placed {
                        late += 1;
                    }
                }
            }
        }
        self.late_rows += late;
        slots
    }

    /// Key columns and aggregate inputs of `batch` (stream columns only), as in the slot at
    /// `start`.
    fn evaluate(
        &self,
        batch: &RecordBatch,
        start: i64,
    ) -> Result<(Vec<ArrayRef>, AggregateInputs)> {
        // Expressions that do not read the bounds evaluate on the stream's columns alone.
        let with_bounds;
        let batch = match self.per_slot_eval {
            true => {
                with_bounds = self.input.with_bounds(
                    batch,
                    start,
                    start.saturating_add(self.slot_width()),
                )?;
                &with_bounds
            }
            false => batch,
        };
        let n = batch.num_rows();
        let keys = self
            .key_exprs
            .iter()
            .map(|e| e.evaluate(batch).and_then(|v| v.into_array(n)))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        Ok((keys, evaluate_inputs(&self.specs, batch)?))
    }

    /// Adds rows to their slots; `times` are their event times.
    fn update(
        &mut self,
        times: &PrimitiveArray<TimestampNanosecondType>,
        input: Rows,
    ) -> Result<Vec<RecordBatch>> {
        if let (Some(lo), Some(hi)) = (min(times), max(times)) {
            self.assigner.check(lo, hi)?;
        }
        let n = times.len();
        let first_seq = self.next_seq;
        self.next_seq += n as u64;
        for (start, rows) in self.assign(times) {
            let rows = UInt32Array::from(rows);
            let whole = rows.len() == n;
            let (keys, inputs) = match &input {
                Rows::Evaluated(keys, inputs) if whole => (keys.clone(), inputs.clone()),
                Rows::Evaluated(keys, inputs) => (
                    keys.iter()
                        .map(|k| take(k, &rows, None))
                        .collect::<std::result::Result<Vec<_>, _>>()?,
                    inputs.take(&rows)?,
                ),
                Rows::PerSlot(batch) if whole => self.evaluate(batch, start)?,
                Rows::PerSlot(batch) => self.evaluate(&take_record_batch(batch, &rows)?, start)?,
            };
            self.open_windows(start);
            let slot = self.slot_mut(start)?;
            slot.live
                .update(&keys, &inputs, |i| first_seq + rows.value(i) as u64)?;
        }
        Ok(vec![])
    }

    /// Records that the windows of the slot at `start` that are still open have rows.
    fn open_windows(&mut self, start: i64) {
        let wm = self.watermark.0.nanos();
        let size = self.assigner.size;
        match self.slots_by {
            Slots::Panes(_) => {
                for (s, end) in self.assigner.windows(start) {
                    if end <= wm {
                        break;
                    }
                    self.windows.insert((end, s));
                }
            }
            Slots::Windows => {
                self.windows.insert((start + size, start));
            }
        }
    }

    /// An empty group table, reused if one is spare.
    fn empty_table(&mut self) -> Result<GroupTable> {
        match self.spare.pop() {
            Some(t) => Ok(t),
            None => GroupTable::try_new(self.key_schema.clone(), self.specs.clone()),
        }
    }

    /// Keeps `table` for reuse if it is empty and there is room.
    fn recycle(&mut self, table: GroupTable) {
        if table.is_empty() && self.spare.len() < SPARE_TABLES {
            self.spare.push(table);
        }
    }

    fn slot_mut(&mut self, start: i64) -> Result<&mut Slot> {
        if !self.slots.contains_key(&start) {
            let slot = Slot {
                live: self.empty_table()?,
                frozen: Vec::new(),
            };
            self.slots.insert(start, slot);
        }
        self.slots
            .get_mut(&start)
            .ok_or_else(|| Error::Internal("window slot vanished".into()))
    }

    /// The groups of the window (end, start), taken out of its slots.
    fn window_groups(&mut self, end: i64, start: i64) -> Result<GroupTable> {
        let starts: Vec<i64> = match self.slots_by {
            Slots::Panes(_) => self.slots.range(start..end).map(|(s, _)| *s).collect(),
            Slots::Windows => vec![start],
        };
        // A slot that only this window needs, and that has never been frozen, is the result.
        if let [only] = starts[..] {
            let last = self.slots_by == Slots::Windows || self.assigner.last_end(only) == Some(end);
            if last && self.slots.get(&only).is_some_and(|s| s.frozen.is_empty()) {
                if let Some(slot) = self.slots.remove(&only) {
                    return Ok(slot.live);
                }
            }
        }
        for &s in &starts {
            self.slot_mut(s)?.freeze()?;
        }
        let mut merged = self.empty_table()?;
        for slot in starts.iter().filter_map(|s| self.slots.get(s)) {
            for partials in &slot.frozen {
                merged.merge(partials)?;
            }
        }
        if self.slots_by == Slots::Windows {
            if let Some(slot) = self.slots.remove(&start) {
                self.recycle(slot.live);
            }
        }
        Ok(merged)
    }

    fn emit(&mut self, end: i64, start: i64) -> Result<RecordBatch> {
        let mut groups = self.window_groups(end, start)?;
        let (keys, values) = groups.finish()?;
        self.recycle(groups);
        let n = keys.first().map_or(0, |k| k.len());
        let bound = |v: i64| -> ArrayRef {
            Arc::new(
                PrimitiveArray::<TimestampNanosecondType>::from_value(v, n)
                    .with_data_type(self.input.bound_type()),
            )
        };
        let mut columns: Vec<ArrayRef> = self
            .layout
            .iter()
            .map(|c| match c {
                GroupColumn::Key(i) => keys[*i].clone(),
                GroupColumn::WindowStart => bound(start),
                GroupColumn::WindowEnd => bound(end),
            })
            .collect();
        columns.extend(values);
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// Slots are written as their partials: the slot's bounds, the first-seen sequence number
    /// of each group, the keys, the aggregate state.
    fn state_schema(&self) -> Result<SchemaRef> {
        let base = super::aggregates::state_schema(
            ["__slot_start", "__slot_end"],
            &self.key_exprs,
            &self.input.schema,
            &self.specs,
        )?;
        let mut fields: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.insert(2, Field::new("__first_seen", DataType::Int64, false));
        // Whether the partial is the slot's live groups (snapshots of earlier versions lack
        // the column: all their partials are frozen).
        fields.push(Field::new(LIVE_COLUMN, DataType::Boolean, false));
        Ok(Arc::new(Schema::new(fields)))
    }
}

/// Greatest common divisor of two positive numbers.
fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Operator for WindowAggregate {
    fn name(&self) -> &'static str {
        "WindowAggregate"
    }

    fn emit_order(&self) -> Option<usize> {
        let at = |w: &GroupColumn| self.layout.iter().position(|g| g == w);
        at(&GroupColumn::WindowEnd).or_else(|| at(&GroupColumn::WindowStart))
    }

    // No `shard_keys`: at ~25 ns a row this operator is cheaper than splitting its input by
    // key (benches/engine.rs (f): TUMBLE on 2 workers ran at 0.27x of 1 worker).

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        // Keys and inputs that do not read the window bounds are evaluated once.
        let rows = match self.per_slot_eval {
            false => {
                let (keys, inputs) = self.evaluate(&batch, 0)?;
                Rows::Evaluated(keys, inputs)
            }
            true => Rows::PerSlot(&batch),
        };
        let times = self.input.times(&batch).clone();
        self.update(&times, rows)
    }

    fn process_selected(
        &mut self,
        batch: &RecordBatch,
        selected: &BooleanArray,
    ) -> Option<Result<Vec<RecordBatch>>> {
        if !self.columns_only {
            return None;
        }
        let mut pick = || {
            // One filter plan for every column the aggregate reads.
            let predicate = match selected.null_count() {
                0 => FilterBuilder::new(selected),
                _ => FilterBuilder::new(&prep_null_mask_filter(selected)),
            }
            .optimize()
            .build();
            let (keys, inputs) = self.evaluate(batch, 0)?;
            let keys = keys
                .iter()
                .map(|k| predicate.filter(k))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let inputs = inputs.filter(&predicate)?;
            let times = predicate.filter(self.input.times(batch))?;
            let times = times.as_primitive::<TimestampNanosecondType>().clone();
            self.update(&times, Rows::Evaluated(keys, inputs))
        };
        Some(pick())
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        self.watermark = self.watermark.max(watermark);
        let wm = self.watermark.0.nanos();
        let mut out = Vec::new();
        while let Some(&(end, start)) = self.windows.first() {
            if end > wm {
                break;
            }
            self.windows.pop_first();
            out.push(self.emit(end, start)?);
        }
        // Drop the panes whose last window has closed.
        if let Slots::Panes(_) = self.slots_by {
            while let Some((&s, _)) = self.slots.first_key_value() {
                if self.accepts(s) {
                    break;
                }
                if let Some((_, slot)) = self.slots.pop_first() {
                    self.recycle(slot.live);
                }
            }
        }
        Ok(out)
    }

    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        // The live accumulators are taken out as arrays (the batches share them, and the
        // encoding waits until the stream is unlocked) and merged straight back: a snapshot
        // must not change what later rows add up to, and a sum continued in a new table
        // beside the partial would differ from one continued in place in its last bits (so
        // would a backfill's, whose state moves by snapshot, from the query run all along).
        let schema = self.state_schema()?;
        let width = self.slot_width();
        let mut batches = Vec::new();
        for (&start, slot) in self.slots.iter_mut() {
            let live = if slot.live.is_empty() {
                None
            } else {
                let partials = slot.live.take_partials()?;
                slot.live.merge(&partials)?;
                Some(partials)
            };
            let frozen = slot.frozen.iter().map(|p| (p, false));
            for (p, is_live) in frozen.chain(live.iter().map(|p| (p, true))) {
                let n = p.first_seen.len();
                let mut cols: Vec<ArrayRef> = vec![
                    Arc::new(Int64Array::from_value(start, n)),
                    Arc::new(Int64Array::from_value(start.saturating_add(width), n)),
                    Arc::new(Int64Array::from_iter_values(
                        p.first_seen.iter().map(|&s| s as i64),
                    )),
                ];
                cols.extend(p.keys.iter().cloned());
                cols.extend(p.state.iter().cloned());
                cols.push(Arc::new(BooleanArray::from(vec![is_live; n])));
                batches.push(RecordBatch::try_new(schema.clone(), cols)?);
            }
        }
        let mut header = vec![
            self.watermark.0.nanos(),
            self.late_rows as i64,
            self.next_seq as i64,
        ];
        for &(end, start) in &self.windows {
            header.extend([end, start]);
        }
        Ok(snapshot::StateImage::later(move || {
            snapshot::encode(&header, &schema, &batches)
        }))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let (header, batches) = snapshot::decode(bytes)?;
        let [wm, late, next_seq, ref windows @ ..] = header[..] else {
            return Err(Error::Internal("corrupt window snapshot header".into()));
        };
        if windows.len() % 2 != 0 {
            return Err(Error::Internal("corrupt window snapshot header".into()));
        }
        self.watermark = Watermark(EventTime(wm));
        self.late_rows = late as u64;
        self.next_seq = next_seq as u64;
        self.windows = windows.chunks(2).map(|w| (w[0], w[1])).collect();
        self.slots.clear();
        let nkeys = self.key_exprs.len();
        for b in batches {
            if b.num_rows() == 0 {
                continue;
            }
            let start = b.column(0).as_primitive::<Int64Type>().value(0);
            let first_seen = b.column(2).as_primitive::<Int64Type>();
            let live = b.schema().index_of(LIVE_COLUMN).ok();
            let partials = GroupPartials {
                keys: b.columns()[3..3 + nkeys].to_vec(),
                state: b.columns()[3 + nkeys..live.unwrap_or(b.num_columns())].to_vec(),
                first_seen: first_seen.values().iter().map(|&s| s as u64).collect(),
            };
            let slot = self.slot_mut(start)?;
            match live.is_some_and(|c| b.column(c).as_boolean().value(0)) {
                true => slot.live.merge(&partials)?,
                false => slot.frozen.push(partials),
            }
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }

    /// The slots' group tables and frozen partials, and the window index. The emptied
    /// tables kept for reuse (at most [`SPARE_TABLES`], each with the room of a window's
    /// groups) are not state and not counted.
    fn state_bytes(&self) -> usize {
        let slots: usize = self
            .slots
            .values()
            .map(|s| s.live.size_bytes() + s.frozen.iter().map(|p| p.size_bytes()).sum::<usize>())
            .sum();
        // A B-tree entry: the key plus about its share of a node.
        slots + (self.slots.len() + self.windows.len()) * 48
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tumble_and_hop_assignment() {
        let tumble = WindowAssigner::tumble(10);
        assert_eq!(tumble.starts(0).collect::<Vec<_>>(), vec![0]);
        assert_eq!(tumble.starts(19).collect::<Vec<_>>(), vec![10]);
        assert_eq!(tumble.starts(-1).collect::<Vec<_>>(), vec![-10]);
        let hop = WindowAssigner::hop(5, 10);
        assert_eq!(hop.starts(12).collect::<Vec<_>>(), vec![10, 5]);
        assert_eq!(hop.starts(10).collect::<Vec<_>>(), vec![10, 5]);
        let hop = WindowAssigner::hop(3, 10);
        assert_eq!(hop.starts(9).collect::<Vec<_>>(), vec![9, 6, 3, 0]);
        assert_eq!(hop.last_end(9), Some(19));
        let cumulate = WindowAssigner::cumulate(5, 15);
        assert_eq!(cumulate.windows(0), vec![(0, 15), (0, 10), (0, 5)]);
        assert_eq!(cumulate.windows(7), vec![(0, 15), (0, 10)]);
        assert_eq!(cumulate.windows(14), vec![(0, 15)]);
        assert_eq!(cumulate.windows(15), vec![(15, 30), (15, 25), (15, 20)]);
        assert_eq!(cumulate.windows(-1), vec![(-15, 0)]);
        assert_eq!(cumulate.last_end(29), Some(30));
        assert_eq!(gcd(10, 3), 1);
        assert_eq!(gcd(60, 10), 10);
    }

    use crate::operators::test_run::{Run, SEC};

    /// A row whose windows would end after 2262-04-11 or start before 1677-09-21 (the ends of
    /// nanosecond timestamps) fails with 22008 naming its time, for every window kind, instead
    /// of wrapping round or panicking.
    #[test]
    fn windows_past_the_ends_of_time_are_an_error() {
        let queries = [
            "SELECT window_end, COUNT(*) AS n FROM TUMBLE(s, ts, INTERVAL '1' HOUR) \
             GROUP BY window_start, window_end",
            "SELECT window_end, COUNT(*) AS n \
             FROM HOP(s, ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR) GROUP BY window_start, window_end",
            "SELECT window_end, COUNT(*) AS n \
             FROM CUMULATE(s, ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR) \
             GROUP BY window_start, window_end",
            "SELECT window_end, COUNT(*) AS n FROM SESSION(s, ts, INTERVAL '1' HOUR) \
             GROUP BY window_start, window_end",
            "SELECT ts, window_end FROM TUMBLE(s, ts, INTERVAL '1' HOUR)",
        ];
        let (last, first) = (i64::MAX - 1, i64::MIN + 1);
        for sql in queries {
            for (t, year) in [(last, "2262-04-11"), (first, "1677-09-21")] {
                // A session starts at its first row: only its end can overflow.
                if sql.contains("SESSION") && t == first {
                    continue;
                }
                let mut run = Run::new(sql);
                let e = run
                    .try_process(Run::batch(&[(t, 1, Some(1))]))
                    .expect_err(sql);
                assert_eq!(e.sqlstate(), "22008", "{sql}: {e}");
                assert!(e.to_string().contains(year), "{sql}: {e}");
            }
            // An hour inside the range is fine.
            let mut run = Run::new(sql);
            run.try_process(Run::batch(&[(last - 2 * 3600 * SEC, 1, Some(1))]))
                .expect(sql);
        }
    }

    #[test]
    fn hop_windows_merge_panes_in_first_seen_order() {
        let mut run = Run::new(
            "SELECT k, window_end, COUNT(*) AS n, SUM(v) AS total \
             FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) \
             GROUP BY k, window_start, window_end",
        );
        // Key 1 arrives first, in pane [5 s, 10 s) with only a NULL; key 2 arrives later in the
        // earlier pane [0 s, 5 s). Window [0 s, 10 s) merges pane 0 then pane 5 and must still
        // list key 1 first, with a NULL sum.
        run.feed(&[(7, 1, None), (3, 2, Some(5)), (8, 2, Some(1))], 0);
        run.feed(&[], i64::MAX / SEC);
        let t = |s: i64| format!("1970-01-01T00:00:{s:02}");
        assert_eq!(
            run.out,
            vec![
                format!("2 {} 1 5", t(5)),
                format!("1 {} 1 NULL", t(10)),
                format!("2 {} 2 6", t(10)),
                format!("1 {} 1 NULL", t(15)),
                format!("2 {} 1 1", t(15)),
            ]
        );
    }

    #[test]
    fn a_row_behind_the_watermark_joins_only_its_open_windows() {
        let mut run = Run::new(
            "SELECT k, window_end, COUNT(*) AS n \
             FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) \
             GROUP BY k, window_start, window_end",
        );
        run.feed(&[(6, 1, None)], 10);
        // [0 s, 10 s) is closed; [5 s, 15 s) is open and takes the row at 7 s. The row at 3 s
        // has no open window left: late.
        run.feed(&[(7, 2, None), (3, 3, None)], 10);
        run.feed(&[], i64::MAX / SEC);
        let t = |s: i64| format!("1970-01-01T00:00:{s:02}");
        assert_eq!(
            run.out,
            vec![
                format!("1 {} 1", t(10)),
                format!("1 {} 1", t(15)),
                format!("2 {} 1", t(15)),
            ]
        );
        assert_eq!(run.ops[0].late_rows(), 1);
    }

    #[test]
    fn keys_that_read_the_window_bounds_are_computed_per_window() {
        // `ts >= window_start + 5 s` differs between the two windows holding a row, so this
        // query cannot use panes.
        let mut run = Run::new(
            "SELECT window_end, ts >= window_start + INTERVAL '5' SECOND AS second_half, \
             COUNT(*) AS n FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) \
             GROUP BY window_start, window_end, ts >= window_start + INTERVAL '5' SECOND",
        );
        run.feed(&[(7, 1, None), (8, 1, None), (2, 1, None)], i64::MAX / SEC);
        let t = |s: i64| format!("1970-01-01T00:00:{s:02}");
        assert_eq!(
            run.out,
            vec![
                format!("{} true 1", t(5)),
                format!("{} true 2", t(10)),
                format!("{} false 1", t(10)),
                format!("{} false 2", t(15)),
            ]
        );
    }

    #[test]
    fn snapshot_of_shared_panes_restores_exactly() {
        let sql = "SELECT k, window_end, COUNT(*) AS n, SUM(v) AS total, COUNT(DISTINCT v) AS d \
                   FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) \
                   GROUP BY k, window_start, window_end";
        let first: &[(i64, i64, Option<i64>)] =
            &[(1, 1, Some(1)), (6, 2, Some(2)), (11, 1, Some(1))];
        let second: &[(i64, i64, Option<i64>)] =
            &[(12, 2, None), (17, 1, Some(3)), (9, 1, Some(4))];
        let mut whole = Run::new(sql);
        whole.feed(first, 10);
        whole.feed(second, 12);
        whole.feed(&[], i64::MAX / SEC);
        // Cut after the first window: its panes are frozen and still needed by later windows.
        let mut before = Run::new(sql);
        before.feed(first, 10);
        let mut after = Run::new(sql);
        for (a, b) in before.ops.iter_mut().zip(after.ops.iter_mut()) {
            b.restore(&a.snapshot().unwrap().encode().unwrap()).unwrap();
        }
        after.out = std::mem::take(&mut before.out);
        after.feed(second, 12);
        after.feed(&[], i64::MAX / SEC);
        assert_eq!(after.out, whole.out);
        assert!(whole.out.len() > 4, "{:?}", whole.out);
    }
}
