//! `GROUPING SETS`, `ROLLUP` and `CUBE` in a windowed aggregate: one [`WindowAggregate`] per
//! grouping set, all fed the same rows, so they open and close the same windows in the same
//! order. Each window's results of every set come out together, in one batch, laid out as
//! DataFusion lays out a grouping-set aggregate: every group expression (NULL where the set
//! leaves it out), the internal `__grouping_id` (a set bit for each expression left out, the
//! last expression in the lowest bit, and above them the set's ordinal among equal sets),
//! then the aggregates.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, ArrayRef, UInt64Array};
use datafusion::arrow::compute::{cast, concat_batches};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use super::window_aggregate::WindowAggregate;
use super::{snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::Watermark;

/// One grouping set: its aggregate and where its columns go.
struct Set {
    aggregate: WindowAggregate,
    /// For each group expression of the whole query, its column in this set's output.
    columns: Vec<Option<usize>>,
    /// This set's `__grouping_id`.
    id: u64,
}

/// The windowed aggregate of every grouping set, merged window by window.
pub struct GroupingSetsAggregate {
    sets: Vec<Set>,
    /// Number of group expressions (the grouping id's column; aggregates follow it).
    keys: usize,
    schema: SchemaRef,
}

impl GroupingSetsAggregate {
    /// Merges `aggregates`, one per grouping set: `members[i]` lists the group expressions
    /// (indices among the query's `keys` distinct ones) that set i groups by, in the order
    /// its aggregate outputs them. `schema` is the group expressions, `__grouping_id`, then
    /// the aggregates.
    pub fn try_new(
        aggregates: Vec<WindowAggregate>,
        members: &[Vec<usize>],
        keys: usize,
        schema: SchemaRef,
    ) -> Result<Self> {
        if aggregates.is_empty() || aggregates.len() != members.len() || keys > 63 {
            return Err(Error::Internal("grouping sets out of shape".into()));
        }
        let mut sets = Vec::new();
        let mut masks: Vec<u64> = Vec::new();
        for (aggregate, member) in aggregates.into_iter().zip(members) {
            let mut columns = vec![None; keys];
            for (at, &k) in member.iter().enumerate() {
                columns[k] = Some(at);
            }
            let mask = columns
                .iter()
                .fold(0u64, |acc, c| (acc << 1) | c.is_none() as u64);
            let ordinal = masks.iter().filter(|&&m| m == mask).count() as u64;
            masks.push(mask);
            sets.push(Set {
                aggregate,
                columns,
                id: mask | (ordinal << keys),
            });
        }
        Ok(GroupingSetsAggregate { sets, keys, schema })
    }

    /// One set's window result in the query's layout.
    fn widen(&self, set: &Set, batch: &RecordBatch) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let fields = self.schema.fields();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(fields.len());
        for (k, field) in fields.iter().take(self.keys).enumerate() {
            columns.push(match set.columns[k] {
                Some(c) => batch.column(c).clone(),
                None => new_null_array(field.data_type(), n),
            });
        }
        let id: ArrayRef = Arc::new(UInt64Array::from_value(set.id, n));
        columns.push(cast(&id, fields[self.keys].data_type())?);
        let members = set.columns.iter().flatten().count();
        columns.extend(batch.columns()[members..].iter().cloned());
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

impl Operator for GroupingSetsAggregate {
    fn name(&self) -> &'static str {
        "WindowAggregate"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        for set in &mut self.sets {
            // A window aggregate emits nothing here; its windows wait for the watermark.
            set.aggregate.process_batch(batch.clone())?;
        }
        Ok(vec![])
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        // Every set saw the same rows: the same windows close, one batch each, in order.
        let mut per_set = Vec::with_capacity(self.sets.len());
        for set in &mut self.sets {
            per_set.push(set.aggregate.on_watermark(watermark)?);
        }
        let windows = per_set[0].len();
        if per_set.iter().any(|w| w.len() != windows) {
            return Err(Error::Internal(
                "grouping sets closed different windows".into(),
            ));
        }
        let mut out = Vec::with_capacity(windows);
        for w in 0..windows {
            let parts = self
                .sets
                .iter()
                .zip(&per_set)
                .map(|(set, batches)| self.widen(set, &batches[w]))
                .collect::<Result<Vec<_>>>()?;
            out.push(concat_batches(&self.schema, &parts)?);
        }
        Ok(out)
    }

    /// Each set's snapshot, each preceded by its length.
    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        let images = self
            .sets
            .iter_mut()
            .map(|s| s.aggregate.snapshot())
            .collect::<Result<Vec<_>>>()?;
        Ok(snapshot::StateImage::later(move || {
            let mut out = Vec::new();
            for image in images {
                let bytes = image.encode()?;
                out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                out.extend(bytes);
            }
            Ok(out)
        }))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let bad = || Error::Internal("corrupt grouping sets snapshot".into());
        let mut at = 0usize;
        for set in &mut self.sets {
            let len = bytes.get(at..at + 8).ok_or_else(bad)?;
            let len = u64::from_le_bytes(len.try_into().map_err(|_| bad())?) as usize;
            let end = (at + 8).checked_add(len).ok_or_else(bad)?;
            set.aggregate
                .restore(bytes.get(at + 8..end).ok_or_else(bad)?)?;
            at = end;
        }
        if at != bytes.len() {
            return Err(bad());
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.sets[0].aggregate.late_rows()
    }

    fn emit_order(&self) -> Option<usize> {
        ["window_end", "window_start"]
            .iter()
            .find_map(|c| self.schema.index_of(c).ok())
            .filter(|&i| i < self.keys)
    }
}
