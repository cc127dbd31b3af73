//! `SUPPRESS FOR INTERVAL ... PER (keys)`: the last operator of a query that silences repeats.
//! Once a result row is emitted for a key, the key's later rows whose time falls less than the
//! interval after it are counted, not emitted; the first row at or past the interval is
//! emitted and starts a new interval.
//!
//! A row's time is a result column (window_end, window_start or the event time, chosen by the
//! planner), but never earlier than the watermark the operator last saw: a row behind the
//! watermark (a late row of a row query) counts as arriving at the watermark. So every row
//! still to come has a time at or past the watermark, and a key whose interval ended at or
//! before the watermark can be forgotten without changing what is emitted. Rows are decided in
//! the order they arrive, one by one, so how they are split into batches does not matter. A row
//! whose time is NULL is always emitted and starts nothing.

use crate::error::sqlstate;
use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Int64Array, UInt32Array,
};
use datafusion::arrow::compute::{cast, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_plan::PhysicalExpr;

use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::Watermark;

/// Passes a key's first row, then drops (and counts) its repeats within the interval.
pub struct Suppress {
    /// The interval in nanoseconds (positive).
    interval: i64,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    time_column: usize,
    key_rows: Option<RowConverter>,
    /// Per key (Arrow row format): the time of its last emitted row.
    last: HashMap<Vec<u8>, i64>,
    /// Bytes of the keys in `last`.
    key_bytes: usize,
    /// Most keys held at once.
    max_keys: usize,
    /// The latest watermark, in nanoseconds.
    watermark: i64,
    suppressed: u64,
    schema: SchemaRef,
}

impl Suppress {
    /// Suppresses repeats within `interval` nanoseconds per value of `keys` (expressions over
    /// `schema`; none: one key for all rows), placing rows in time by `time_column`.
    pub fn try_new(
        interval: i64,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        time_column: usize,
        schema: SchemaRef,
    ) -> Result<Self> {
        if interval <= 0 {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "SUPPRESS FOR needs a positive interval",
            ));
        }
        if time_column >= schema.fields().len() {
            return Err(Error::Internal("SUPPRESS time column out of range".into()));
        }
        Ok(Suppress {
            interval,
            keys,
            time_column,
            key_rows: None,
            last: HashMap::new(),
            key_bytes: 0,
            max_keys: crate::limits::MAX_SUPPRESS_KEYS,
            watermark: i64::MIN,
            suppressed: 0,
            schema,
        })
    }

    /// The same operator holding at most `max_keys` keys (tests use small bounds).
    pub fn with_max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Keys held now.
    pub fn keys_held(&self) -> usize {
        self.last.len()
    }

    fn key_arrays(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let n = batch.num_rows();
        let mut keys = self
            .keys
            .iter()
            .map(|e| e.evaluate(batch).and_then(|v| v.into_array(n)))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        if keys.is_empty() {
            // One key for all rows; Arrow's row format needs a column.
            keys.push(Arc::new(BooleanArray::from(vec![true; n])));
        }
        Ok(keys)
    }

    fn converter(&mut self, keys: &[ArrayRef]) -> Result<&RowConverter> {
        if self.key_rows.is_none() {
            let fields = keys
                .iter()
                .map(|a| SortField::new(a.data_type().clone()))
                .collect();
            self.key_rows = Some(RowConverter::new(fields)?);
        }
        self.key_rows
            .as_ref()
            .ok_or_else(|| Error::Internal("row converter missing".into()))
    }

    fn too_many_keys(&self) -> Error {
        Error::limit(
            sqlstate::OUT_OF_MEMORY,
            format!(
                "SUPPRESS holds more than {} keys within their intervals; use a shorter \
                 interval or fewer PER keys",
                self.max_keys
            ),
        )
    }
}

impl Operator for Suppress {
    fn name(&self) -> &'static str {
        "Suppress"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(vec![]);
        }
        let times = cast(batch.column(self.time_column), &DataType::Int64)?;
        let times = times.as_primitive::<Int64Type>();
        let keys = self.key_arrays(&batch)?;
        let rows = self.converter(&keys)?.convert_columns(&keys)?;
        let mut keep = Vec::with_capacity(n);
        for (i, t) in times.iter().enumerate() {
            let Some(t) = t else {
                keep.push(i as u32);
                continue;
            };
            let t = t.max(self.watermark);
            let key = rows.row(i);
            match self.last.get_mut(key.as_ref()) {
                Some(t0) if *t0 <= t && t.saturating_sub(*t0) < self.interval => {
                    self.suppressed += 1
                }
                Some(t0) => {
                    *t0 = (*t0).max(t);
                    keep.push(i as u32);
                }
                None => {
                    if self.last.len() >= self.max_keys {
                        return Err(self.too_many_keys());
                    }
                    self.key_bytes += key.as_ref().len();
                    self.last.insert(key.as_ref().to_vec(), t);
                    keep.push(i as u32);
                }
            }
        }
        if keep.len() == n {
            return Ok(vec![batch]);
        }
        if keep.is_empty() {
            return Ok(vec![]);
        }
        Ok(vec![take_record_batch(&batch, &UInt32Array::from(keep))?])
    }

    /// Forgets the keys whose interval ends at or before the watermark: every row still to
    /// come is placed at or after it, so none of them would be suppressed.
    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        self.watermark = self.watermark.max(watermark.0.nanos());
        let (wm, interval) = (self.watermark, self.interval);
        let mut freed = 0;
        self.last.retain(|key, t0| {
            let keep = t0.saturating_add(interval) > wm;
            if !keep {
                freed += key.len();
            }
            keep
        });
        self.key_bytes -= freed;
        Ok(vec![])
    }

    /// Header: watermark, suppressed count; then one row per key: its bytes and time.
    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        let mut entries: Vec<(Vec<u8>, i64)> =
            self.last.iter().map(|(k, &t)| (k.clone(), t)).collect();
        let header = [self.watermark, self.suppressed as i64];
        Ok(snapshot::StateImage::later(move || {
            entries.sort();
            let schema = state_schema();
            let keys = BinaryArray::from_iter_values(entries.iter().map(|(k, _)| k));
            let times = Int64Array::from_iter_values(entries.iter().map(|(_, t)| *t));
            let batch =
                RecordBatch::try_new(schema.clone(), vec![Arc::new(keys), Arc::new(times)])?;
            snapshot::encode(&header, &schema, &[batch])
        }))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let bad = || Error::Internal("corrupt suppress snapshot".into());
        let (header, batches) = snapshot::decode(bytes)?;
        let [watermark, suppressed] = header[..] else {
            return Err(bad());
        };
        self.watermark = watermark;
        self.suppressed = u64::try_from(suppressed).map_err(|_| bad())?;
        self.last.clear();
        self.key_bytes = 0;
        for b in batches {
            let keys = b.column(0).as_binary_opt::<i32>().ok_or_else(bad)?;
            let times = b
                .column(1)
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(bad)?;
            for i in 0..b.num_rows() {
                self.key_bytes += keys.value(i).len();
                self.last.insert(keys.value(i).to_vec(), times.value(i));
            }
        }
        Ok(())
    }

    fn suppressed_rows(&self) -> u64 {
        self.suppressed
    }

    /// The map's slots and the keys' bytes.
    fn state_bytes(&self) -> usize {
        self.last.capacity() * (std::mem::size_of::<(Vec<u8>, i64)>() + 1) + self.key_bytes
    }
}

fn state_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Binary, false),
        Field::new("time", DataType::Int64, false),
    ]))
}

#[cfg(test)]
mod tests;
