//! Stream–table joins: each row of the stream looks up the row of a reference table whose
//! primary key its join expressions give, in the table as it is when the row is processed
//! (Flink's lookup join). A change to the table never re-emits rows already sent. The join
//! keeps no state of its own: the table's rows are checkpointed with the table.

pub mod store;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_plan::PhysicalExpr;

use super::Operator;
use crate::error::{Error, Result};
pub use store::{TableChange, TableStore};

/// What a lookup join emits for a stream row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LookupKind {
    /// `JOIN`: the row with the table's columns, when a table row matches.
    Inner,
    /// `LEFT JOIN`: the row with the table's columns, NULLs when no table row matches.
    Left,
    /// `IN (SELECT ...)`, `EXISTS`: the row alone, when a table row matches.
    Semi,
    /// `NOT EXISTS`, `NOT IN`: the row alone, when no table row matches. With `null_aware`
    /// (`NOT IN`), a row whose probe is NULL passes only while the table is empty, as SQL's
    /// three-valued `NOT IN` gives.
    Anti {
        /// `NOT IN`'s NULL semantics.
        null_aware: bool,
    },
}

/// What a batch's lookups found.
struct Lookup {
    /// For each input row, its matched table row's index in `table_cols`, if one matched
    /// and passed the residual.
    matched: Vec<Option<u32>>,
    /// The columns of the table rows found.
    table_cols: Vec<ArrayRef>,
    /// For each input row, whether its answer is unknown (NOT IN over a NULL).
    unknown: Vec<bool>,
}

/// A lookup join of the stream's rows against a table.
pub struct LookupJoin {
    table: Arc<TableStore>,
    kind: LookupKind,
    /// Over the input: one per primary-key column, in key order.
    probe: Vec<Arc<dyn PhysicalExpr>>,
    /// Over `joined`: what a matched pair must also satisfy.
    residual: Option<Arc<dyn PhysicalExpr>>,
    /// The input's columns followed by the table's.
    joined: SchemaRef,
    schema: SchemaRef,
}

impl LookupJoin {
    /// A join whose `probe` expressions (over the input) give the table's key; `joined` is
    /// the input's columns then the table's, `schema` what it emits (`joined` for inner and
    /// left joins, the input for semi and anti joins).
    pub fn new(
        table: Arc<TableStore>,
        kind: LookupKind,
        probe: Vec<Arc<dyn PhysicalExpr>>,
        residual: Option<Arc<dyn PhysicalExpr>>,
        joined: SchemaRef,
        schema: SchemaRef,
    ) -> Result<LookupJoin> {
        if probe.len() != table.key().len() {
            return Err(Error::Internal(format!(
                "lookup of table \"{}\" with {} key values for a key of {} columns",
                table.name(),
                probe.len(),
                table.key().len()
            )));
        }
        Ok(LookupJoin {
            table,
            kind,
            probe,
            residual,
            joined,
            schema,
        })
    }

    /// Looks up every row of `batch`.
    fn lookup(&self, batch: &RecordBatch) -> Result<Lookup> {
        let n = batch.num_rows();
        let key_fields = self.table.key_schema().fields().clone();
        let mut probe = Vec::with_capacity(self.probe.len());
        for (e, f) in self.probe.iter().zip(key_fields.iter()) {
            let a = e.evaluate(batch)?.into_array(n)?;
            probe.push(if a.data_type() == f.data_type() {
                a
            } else {
                cast(&a, f.data_type())?
            });
        }
        let rows = self.table.read();
        let keys = rows.encode_keys(&probe)?;
        let mut input_idx = Vec::new();
        let mut found = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            if let Some(r) = rows.get(k.as_ref()) {
                input_idx.push(i as u32);
                found.push(r);
            }
        }
        let table_cols = rows.columns(found)?;
        let table_empty = rows.is_empty();
        drop(rows);
        let input_idx = UInt32Array::from(input_idx);
        let mut pass: Vec<bool> = vec![true; input_idx.len()];
        if let (Some(residual), false) = (&self.residual, input_idx.is_empty()) {
            let mut cols = Vec::with_capacity(self.joined.fields().len());
            for c in batch.columns() {
                cols.push(take(c.as_ref(), &input_idx, None)?);
            }
            cols.extend(table_cols.iter().cloned());
            let joined = RecordBatch::try_new(self.joined.clone(), cols)?;
            let mask = residual.evaluate(&joined)?.into_array(joined.num_rows())?;
            let mask = mask
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| Error::Internal("a join condition that is not boolean".into()))?;
            for (p, i) in pass.iter_mut().zip(0..mask.len()) {
                *p = mask.is_valid(i) && mask.value(i);
            }
        }
        let mut matched = vec![None; n];
        for (j, (&i, ok)) in input_idx.values().iter().zip(&pass).enumerate() {
            if *ok {
                matched[i as usize] = Some(j as u32);
            }
        }
        // NOT IN: a row whose probe is NULL is unknown (dropped) unless the table is empty.
        let mut unknown = vec![false; n];
        if matches!(self.kind, LookupKind::Anti { null_aware: true }) && !table_empty {
            for a in probe.iter().filter(|a| a.null_count() > 0) {
                for (i, u) in unknown.iter_mut().enumerate() {
                    *u |= a.is_null(i);
                }
            }
        }
        Ok(Lookup {
            matched,
            table_cols,
            unknown,
        })
    }
}

impl Operator for LookupJoin {
    fn name(&self) -> &'static str {
        "LookupJoin"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        if batch.num_rows() == 0 {
            return Ok(vec![]);
        }
        let Lookup {
            matched,
            table_cols,
            unknown,
        } = self.lookup(&batch)?;
        match self.kind {
            LookupKind::Semi | LookupKind::Anti { .. } => {
                let semi = self.kind == LookupKind::Semi;
                let mask: BooleanArray = matched
                    .iter()
                    .zip(&unknown)
                    .map(|(m, u)| Some(if semi { m.is_some() } else { m.is_none() && !u }))
                    .collect();
                super::filter::keep(batch, &mask)
            }
            LookupKind::Inner | LookupKind::Left => joined(
                &batch,
                &matched,
                self.kind == LookupKind::Left,
                &table_cols,
                &self.schema,
            ),
        }
    }
}

/// The rows of a stream–table join: each input row of `batch` with the table row it matched
/// (`matched`, an index into `table_cols`), and with NULLs where none did when `left`.
pub(crate) fn joined(
    batch: &RecordBatch,
    matched: &[Option<u32>],
    left: bool,
    table_cols: &[ArrayRef],
    schema: &SchemaRef,
) -> Result<Vec<RecordBatch>> {
    let rows: Vec<(u32, Option<u32>)> = matched
        .iter()
        .enumerate()
        .filter(|(_, m)| left || m.is_some())
        .map(|(i, m)| (i as u32, *m))
        .collect();
    if rows.is_empty() {
        return Ok(vec![]);
    }
    let input_idx: UInt32Array = rows.iter().map(|r| Some(r.0)).collect();
    let table_idx: UInt32Array = rows.iter().map(|r| r.1).collect();
    let mut cols = Vec::with_capacity(schema.fields().len());
    for c in batch.columns() {
        cols.push(take(c.as_ref(), &input_idx, None)?);
    }
    for c in table_cols {
        cols.push(take(c.as_ref(), &table_idx, None)?);
    }
    Ok(vec![RecordBatch::try_new(schema.clone(), cols)?])
}

#[cfg(test)]
mod tests;
