//! The temporal join of a stream with a reference table (Flink's event-time temporal join):
//! `FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.x = t.k`. Each stream row is joined with
//! the version of its key's table row valid at the row's event time.
//!
//! **Versions.** The join keeps its own versions of the table's rows, each valid from a
//! version time on. Every change to the table reaches the join in the stream's log order
//! ([`Operator::table_change`]) and starts a version of each key it touches at the stream's
//! watermark, or, for a row of a table with a declared version-time column (`WITH
//! (version_time = 'col')`), at that column's time if it is later. A change never reaches
//! back behind the watermark: the rows there are already joined and their results sent. A
//! version supersedes the versions of its key that start at or after it (a later statement
//! says what the key holds from its time on); a delete or `TRUNCATE` starts a version with
//! no row. A version is dropped once the watermark passes the start of the next one: no row
//! can read it any more.
//!
//! **Rows** wait until the watermark passes their time: then no change can start a version
//! at or before it, so the version they read is final. They are joined then, in event-time
//! order (ties in arrival order), so results do not depend on how rows were batched or
//! interleaved with changes within the watermark's delay. A row behind the watermark when it
//! arrives is late: counted and dropped.
//!
//! The versions (a copy of the table, plus the changes waiting to take effect) and the
//! waiting rows are the state: bounded by the table's size and the watermark, counted toward
//! the query's state bound, and in the snapshot.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, Int64Array, UInt32Array,
};
use datafusion::arrow::compute::{
    cast, concat_batches, filter_record_batch, take, take_record_batch,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_plan::PhysicalExpr;

use super::lookup::{LookupKind, TableChange, TableStore};
use super::snapshot::{decode, encode, StateImage};
use super::Operator;
use crate::error::{Error, Result};
use crate::time::{EventTime, Watermark};

/// Bytes a version costs beyond its key and row (map entry, boxes, stamp).
const VERSION_OVERHEAD: usize = 64;

/// A row of the table from `stamp` on (None: no row, deleted).
struct Version {
    stamp: i64,
    row: Option<Box<[u8]>>,
}

/// What a temporal join is: the table, how stream rows find their key, what a match must
/// also satisfy.
pub struct TemporalJoinConfig {
    /// The table's current rows (read once, when the join starts) and its schema and key.
    pub table: Arc<TableStore>,
    /// `Inner` or `Left`.
    pub kind: LookupKind,
    /// Over the input: one per primary-key column, in key order.
    pub probe: Vec<Arc<dyn PhysicalExpr>>,
    /// Over `joined`: what a matched pair must also satisfy.
    pub residual: Option<Arc<dyn PhysicalExpr>>,
    /// The input's rows.
    pub input: SchemaRef,
    /// The input's event-time column.
    pub time: usize,
    /// The table's declared version-time column, if it has one.
    pub version_time: Option<usize>,
    /// The input's columns followed by the table's.
    pub joined: SchemaRef,
}

/// See the module docs.
pub struct TemporalJoin {
    config: TemporalJoinConfig,
    table_name: String,
    key_conv: RowConverter,
    row_conv: RowConverter,
    /// Per encoded key, its versions in stamp order.
    versions: HashMap<Box<[u8]>, Vec<Version>>,
    /// Keys with more than one version, or whose version has no row: the ones pruning visits.
    changed: HashSet<Box<[u8]>>,
    bytes: usize,
    /// Rows waiting for the watermark, in arrival order.
    waiting: Vec<RecordBatch>,
    watermark: Watermark,
    late: u64,
}

impl TemporalJoin {
    /// A join whose versions start as the table's rows are now.
    pub fn try_new(config: TemporalJoinConfig) -> Result<TemporalJoin> {
        let store = &config.table;
        if config.probe.len() != store.key().len()
            || config.kind == LookupKind::Semi
            || matches!(config.kind, LookupKind::Anti { .. })
        {
            return Err(Error::Internal(
                "a temporal join is inner or left, by the whole key".into(),
            ));
        }
        let fields = |s: &SchemaRef| -> Vec<SortField> {
            s.fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect()
        };
        let mut join = TemporalJoin {
            table_name: store.name().to_string(),
            key_conv: RowConverter::new(fields(store.key_schema()))?,
            row_conv: RowConverter::new(fields(store.schema()))?,
            versions: HashMap::new(),
            changed: HashSet::new(),
            bytes: 0,
            waiting: Vec::new(),
            watermark: Watermark::START,
            late: 0,
            config,
        };
        let rows = join.config.table.read().batch(join.config.table.schema())?;
        join.upsert(&rows, i64::MIN)?;
        Ok(join)
    }

    /// Starts a version of each row of `rows` (of the table's schema) at `from`, or at its
    /// version time if that is later.
    fn upsert(&mut self, rows: &RecordBatch, from: i64) -> Result<()> {
        if rows.num_rows() == 0 {
            return Ok(());
        }
        let key_cols: Vec<ArrayRef> = self
            .config
            .table
            .key()
            .iter()
            .map(|&i| rows.column(i).clone())
            .collect();
        let keys = self.key_conv.convert_columns(&key_cols)?;
        let encoded = self.row_conv.convert_columns(rows.columns())?;
        let declared = self
            .config
            .version_time
            .map(|c| cast(rows.column(c), &DataType::Int64))
            .transpose()?;
        let declared = declared
            .as_ref()
            .map(|a| a.as_primitive::<datafusion::arrow::datatypes::Int64Type>());
        for i in 0..rows.num_rows() {
            let stamp = match declared {
                Some(d) if d.is_valid(i) => d.value(i).max(from),
                _ => from,
            };
            self.start(keys.row(i).as_ref(), stamp, Some(encoded.row(i).as_ref()));
        }
        Ok(())
    }

    /// Starts a version of `key` at `stamp`: the versions at or after it are superseded.
    fn start(&mut self, key: &[u8], stamp: i64, row: Option<&[u8]>) {
        let versions = self.versions.entry(key.into()).or_default();
        let before = versions.len();
        let mut freed = 0;
        versions.retain(|v| {
            let keep = v.stamp < stamp;
            if !keep {
                freed += v.row.as_ref().map_or(0, |r| r.len()) + VERSION_OVERHEAD;
            }
            keep
        });
        if before == 0 {
            self.bytes += key.len();
        }
        self.bytes -= freed;
        self.bytes += row.map_or(0, |r| r.len()) + VERSION_OVERHEAD;
        versions.push(Version {
            stamp,
            row: row.map(Into::into),
        });
        if versions.len() > 1 || row.is_none() {
            self.changed.insert(key.into());
        }
    }

    /// Drops the versions no row at or after the watermark can read.
    fn prune(&mut self) {
        let wm = self.watermark.0.nanos();
        let mut done = Vec::new();
        for key in &self.changed {
            let Some(versions) = self.versions.get_mut(key) else {
                done.push(key.clone());
                continue;
            };
            // The last version started at or before the watermark, and those after it.
            let current = versions.iter().rposition(|v| v.stamp <= wm).unwrap_or(0);
            for v in versions.drain(..current) {
                self.bytes -= v.row.as_ref().map_or(0, |r| r.len()) + VERSION_OVERHEAD;
            }
            if let [only] = versions.as_slice() {
                if only.row.is_none() && only.stamp <= wm {
                    self.bytes -= VERSION_OVERHEAD + key.len();
                    self.versions.remove(key);
                    done.push(key.clone());
                } else if only.row.is_some() {
                    done.push(key.clone());
                }
            }
        }
        for key in done {
            self.changed.remove(&key);
        }
    }

    /// The row of `key`'s version valid at `time`.
    fn row_at(&self, key: &[u8], time: i64) -> Option<&[u8]> {
        let versions = self.versions.get(key)?;
        let at = versions.iter().rposition(|v| v.stamp <= time)?;
        versions[at].row.as_deref()
    }

    /// Joins `batch` (rows the watermark passed, in time order).
    fn join(&self, batch: &RecordBatch) -> Result<Vec<RecordBatch>> {
        let n = batch.num_rows();
        let key_fields = self.config.table.key_schema().fields().clone();
        let mut probe = Vec::with_capacity(self.config.probe.len());
        for (e, f) in self.config.probe.iter().zip(key_fields.iter()) {
            let a = e.evaluate(batch)?.into_array(n)?;
            probe.push(if a.data_type() == f.data_type() {
                a
            } else {
                cast(&a, f.data_type())?
            });
        }
        let keys = self.key_conv.convert_columns(&probe)?;
        let times = batch
            .column(self.config.time)
            .as_primitive::<TimestampNanosecondType>();
        let mut input_idx = Vec::new();
        let mut found = Vec::new();
        for i in 0..n {
            if probe.iter().any(|p| p.is_null(i)) {
                continue;
            }
            if let Some(row) = self.row_at(keys.row(i).as_ref(), times.value(i)) {
                input_idx.push(i as u32);
                found.push(row);
            }
        }
        let parser = self.row_conv.parser();
        let table_cols = self
            .row_conv
            .convert_rows(found.iter().map(|r| parser.parse(r)))?;
        let input_idx = UInt32Array::from(input_idx);
        let mut pass = vec![true; input_idx.len()];
        let mut cols: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &input_idx, None))
            .collect::<std::result::Result<_, _>>()?;
        cols.extend(table_cols.iter().cloned());
        if let (Some(residual), false) = (&self.config.residual, input_idx.is_empty()) {
            let joined = RecordBatch::try_new(self.config.joined.clone(), cols.clone())?;
            let mask = residual.evaluate(&joined)?.into_array(joined.num_rows())?;
            let mask = mask
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| Error::Internal("a join condition that is not boolean".into()))?;
            for (i, p) in pass.iter_mut().enumerate() {
                *p = mask.is_valid(i) && mask.value(i);
            }
        }
        let mut matched: Vec<Option<u32>> = vec![None; n];
        for (j, (&i, ok)) in input_idx.values().iter().zip(&pass).enumerate() {
            if *ok {
                matched[i as usize] = Some(j as u32);
            }
        }
        super::lookup::joined(
            batch,
            &matched,
            self.config.kind == LookupKind::Left,
            &table_cols,
            &self.config.joined,
        )
    }

    /// Removes and returns, in time order, the waiting rows behind `wm`.
    fn release(&mut self, wm: Watermark) -> Result<Option<RecordBatch>> {
        if self.waiting.is_empty() {
            return Ok(None);
        }
        let all = concat_batches(&self.config.input, &self.waiting)?;
        self.waiting.clear();
        let times = all
            .column(self.config.time)
            .as_primitive::<TimestampNanosecondType>();
        let due: BooleanArray = times
            .iter()
            .map(|t| Some(t.is_some_and(|t| wm.is_late(EventTime(t)))))
            .collect();
        let rest = filter_record_batch(&all, &datafusion::arrow::compute::not(&due)?)?;
        if rest.num_rows() > 0 {
            self.waiting.push(rest);
        }
        let due = filter_record_batch(&all, &due)?;
        if due.num_rows() == 0 {
            return Ok(None);
        }
        let times = due
            .column(self.config.time)
            .as_primitive::<TimestampNanosecondType>();
        let mut order: Vec<u32> = (0..due.num_rows() as u32).collect();
        order.sort_by_key(|&i| times.value(i as usize));
        Ok(Some(take_record_batch(&due, &UInt32Array::from(order))?))
    }

    /// The versions as a batch: stamp, whether it has a row, then the table's columns (a
    /// version without a row holds its key only).
    fn versions_batch(&self) -> Result<RecordBatch> {
        let store = &self.config.table;
        let schema = versions_schema(store.schema());
        let (mut live_stamps, mut live_rows) = (Vec::new(), Vec::new());
        let (mut dead_stamps, mut dead_keys) = (Vec::new(), Vec::new());
        for (key, versions) in &self.versions {
            for v in versions {
                match &v.row {
                    Some(row) => {
                        live_stamps.push(v.stamp);
                        live_rows.push(&row[..]);
                    }
                    None => {
                        dead_stamps.push(v.stamp);
                        dead_keys.push(&key[..]);
                    }
                }
            }
        }
        let rows = self.row_conv.parser();
        let live = self
            .row_conv
            .convert_rows(live_rows.iter().map(|r| rows.parse(r)))?;
        let keys = self.key_conv.parser();
        let dead_key_cols = self
            .key_conv
            .convert_rows(dead_keys.iter().map(|k| keys.parse(k)))?;
        let mut dead = Vec::new();
        for (i, f) in store.schema().fields().iter().enumerate() {
            dead.push(match store.key().iter().position(|&k| k == i) {
                Some(k) => dead_key_cols[k].clone(),
                None => new_null_array(f.data_type(), dead_stamps.len()),
            });
        }
        let part = |stamps: Vec<i64>, live: bool, cols: Vec<ArrayRef>| -> Result<RecordBatch> {
            let n = stamps.len();
            let mut columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(stamps)),
                Arc::new(BooleanArray::from(vec![live; n])),
            ];
            columns.extend(cols);
            Ok(RecordBatch::try_new(schema.clone(), columns)?)
        };
        Ok(concat_batches(
            &schema,
            &[
                part(live_stamps, true, live)?,
                part(dead_stamps, false, dead)?,
            ],
        )?)
    }
}

/// A version's stamp and whether it has a row, then the table's columns, all nullable.
fn versions_schema(table: &SchemaRef) -> SchemaRef {
    let mut fields = vec![
        Field::new("__stamp", DataType::Int64, false),
        Field::new("__live", DataType::Boolean, false),
    ];
    fields.extend(
        table
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true)),
    );
    Arc::new(Schema::new(fields))
}

impl Operator for TemporalJoin {
    fn name(&self) -> &'static str {
        "TemporalJoin"
    }

    fn schema(&self) -> SchemaRef {
        self.config.joined.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        if batch.num_rows() == 0 {
            return Ok(vec![]);
        }
        let wm = self.watermark;
        let times = batch
            .column(self.config.time)
            .as_primitive::<TimestampNanosecondType>();
        let keep: BooleanArray = times
            .iter()
            .map(|t| Some(t.is_some_and(|t| !wm.is_late(EventTime(t)))))
            .collect();
        let kept = keep.true_count();
        self.late += (batch.num_rows() - kept) as u64;
        let batch = if kept == batch.num_rows() {
            batch
        } else {
            filter_record_batch(&batch, &keep)?
        };
        if batch.num_rows() > 0 {
            self.waiting.push(batch);
        }
        Ok(vec![])
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        if watermark <= self.watermark {
            return Ok(vec![]);
        }
        self.watermark = watermark;
        let out = match self.release(watermark)? {
            Some(rows) => self.join(&rows)?,
            None => vec![],
        };
        self.prune();
        Ok(out)
    }

    fn table_change(&mut self, table: &str, change: &TableChange) -> Result<()> {
        if table != self.table_name {
            return Ok(());
        }
        let now = self.watermark.0.nanos();
        if change.truncate {
            let keys: Vec<Box<[u8]>> = self.versions.keys().cloned().collect();
            for k in keys {
                self.start(&k, now, None);
            }
        }
        for keys in &change.deletes {
            let encoded = self.key_conv.convert_columns(keys.columns())?;
            for k in encoded.iter() {
                self.start(k.as_ref(), now, None);
            }
        }
        for rows in &change.upserts {
            self.upsert(rows, now)?;
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Result<StateImage> {
        let versions = self.versions_batch()?;
        let vschema = versions.schema();
        let waiting = self.waiting.clone();
        let input = self.config.input.clone();
        let header = [self.watermark.0.nanos(), self.late as i64];
        Ok(StateImage::later(move || {
            let first = encode(&header, &vschema, &[versions])?;
            let second = encode(&[], &input, &waiting)?;
            let mut out = (first.len() as u64).to_le_bytes().to_vec();
            out.extend(first);
            out.extend(second);
            Ok(out)
        }))
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let bad = || Error::Internal("corrupt temporal join snapshot".into());
        let len = snapshot
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(bad)? as usize;
        let first = snapshot.get(8..8 + len).ok_or_else(bad)?;
        let second = snapshot.get(8 + len..).ok_or_else(bad)?;
        let (header, versions) = decode(first)?;
        let (_, waiting) = decode(second)?;
        let [wm, late] = header[..] else {
            return Err(bad());
        };
        let vschema = versions_schema(self.config.table.schema());
        self.versions.clear();
        self.changed.clear();
        self.bytes = 0;
        self.watermark = Watermark(EventTime(wm));
        self.late = late as u64;
        // Every version, with its key.
        let mut all: Vec<(Box<[u8]>, Version)> = Vec::new();
        for b in versions {
            if b.schema().fields() != vschema.fields() {
                return Err(bad());
            }
            let stamps = b
                .column(0)
                .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            let live = b.column(1).as_boolean();
            let cols = &b.columns()[2..];
            let key_cols: Vec<ArrayRef> = self
                .config
                .table
                .key()
                .iter()
                .map(|&i| cols[i].clone())
                .collect();
            let keys = self.key_conv.convert_columns(&key_cols)?;
            let rows = self.row_conv.convert_columns(cols)?;
            for i in 0..b.num_rows() {
                let row = live.value(i).then(|| rows.row(i).as_ref().into());
                let stamp = stamps.value(i);
                all.push((keys.row(i).as_ref().into(), Version { stamp, row }));
            }
        }
        all.sort_by_key(|(_, v)| v.stamp);
        for (key, v) in all {
            self.start(&key, v.stamp, v.row.as_deref());
        }
        for b in &waiting {
            if b.schema().fields() != self.config.input.fields() {
                return Err(bad());
            }
        }
        self.waiting = waiting;
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.late
    }

    fn state_bytes(&self) -> usize {
        self.bytes
            + self
                .waiting
                .iter()
                .map(|b| b.get_array_memory_size())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests;
