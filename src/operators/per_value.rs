//! Per-value aggregates of one key, computed once: queries that differ only in the value one
//! column is compared with (`WHERE op = 'read' ... GROUP BY host`, the same for `'write'`,
//! ...) share one window aggregate grouped by the column too, over the rows whose value some
//! query asks for ([`PerValueAggregate`]); each query then takes its value's rows out of the
//! shared results and drops the column ([`SplitValue`]). The operator graph keeps the set of
//! values to the queries attached below the shared aggregate (`plan/per_value.rs` plans the
//! split form).

use std::sync::Arc;

use datafusion::arrow::array::{Array, BooleanArray, Scalar};
use datafusion::arrow::compute::kernels::boolean::and;
use datafusion::arrow::compute::kernels::cmp::eq;
use datafusion::arrow::compute::{filter_record_batch, prep_null_mask_filter};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::expressions::{in_list, lit, Column};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use super::{filter, snapshot, Operator};
use crate::error::{Error, Result};
use crate::time::Watermark;

/// A window aggregate grouped by one more column, over the rows whose value in it is one of
/// the values its queries ask for.
pub struct PerValueAggregate {
    inner: Box<dyn Operator>,
    /// The compared column, in the input.
    column: Column,
    input: SchemaRef,
    /// `column IN (values)`; None while no value is asked for (no row passes).
    member: Option<Arc<dyn PhysicalExpr>>,
}

impl PerValueAggregate {
    /// Wraps `inner` (grouped by `column` among its keys), reading batches of `input`.
    pub fn new(inner: Box<dyn Operator>, column: Column, input: SchemaRef) -> Self {
        PerValueAggregate {
            inner,
            column,
            input,
            member: None,
        }
    }

    /// Which input rows (of those `selected`) the aggregate takes.
    fn mask(&self, batch: &RecordBatch, selected: Option<&BooleanArray>) -> Result<BooleanArray> {
        let n = batch.num_rows();
        let member = match &self.member {
            Some(m) => m.evaluate(batch)?.into_array(n)?,
            None => return Ok(BooleanArray::from(vec![false; n])),
        };
        let member = member
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| Error::Internal("IN did not give booleans".into()))?;
        let member = nulls_false(member);
        Ok(match selected {
            Some(s) => and(&member, &nulls_false(s))?,
            None => member,
        })
    }

    /// Hands the rows `mask` keeps to the aggregate, without a copy where it can pick them.
    fn take(&mut self, batch: &RecordBatch, mask: BooleanArray) -> Result<Vec<RecordBatch>> {
        if mask.true_count() == 0 {
            return Ok(vec![]);
        }
        if let Some(out) = self.inner.process_selected(batch, &mask) {
            return out;
        }
        let mut out = Vec::new();
        for b in filter::keep(batch.clone(), &mask)? {
            out.extend(self.inner.process_batch(b)?);
        }
        Ok(out)
    }
}

impl Operator for PerValueAggregate {
    fn name(&self) -> &'static str {
        "PerValueAggregate"
    }

    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let mask = self.mask(&batch, None)?;
        self.take(&batch, mask)
    }

    fn process_selected(
        &mut self,
        batch: &RecordBatch,
        selected: &BooleanArray,
    ) -> Option<Result<Vec<RecordBatch>>> {
        Some(
            self.mask(batch, Some(selected))
                .and_then(|mask| self.take(batch, mask)),
        )
    }

    fn on_watermark(&mut self, watermark: Watermark) -> Result<Vec<RecordBatch>> {
        self.inner.on_watermark(watermark)
    }

    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        self.inner.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        self.inner.restore(snapshot)
    }

    fn late_rows(&self) -> u64 {
        self.inner.late_rows()
    }

    fn state_bytes(&self) -> usize {
        self.inner.state_bytes()
    }

    fn emit_order(&self) -> Option<usize> {
        self.inner.emit_order()
    }

    fn select_values(&mut self, values: &[ScalarValue]) -> Result<()> {
        self.member = match values {
            [] => None,
            _ => {
                let list = values.iter().map(|v| lit(v.clone())).collect();
                Some(in_list(
                    Arc::new(self.column.clone()),
                    list,
                    &false,
                    &self.input,
                )?)
            }
        };
        Ok(())
    }
}

/// `mask` with NULL as false.
fn nulls_false(mask: &BooleanArray) -> BooleanArray {
    match mask.null_count() {
        0 => mask.clone(),
        _ => prep_null_mask_filter(mask),
    }
}

/// One query's rows of a [`PerValueAggregate`]'s results: those with its value, without the
/// column that holds it.
pub struct SplitValue {
    column: usize,
    value: ScalarValue,
    /// The other columns, in order.
    keep: Vec<usize>,
    schema: SchemaRef,
}

impl SplitValue {
    /// Keeps the rows whose `column` equals `value`, as batches of `schema` (the input's
    /// columns without `column`).
    pub fn try_new(
        column: usize,
        value: ScalarValue,
        input: &SchemaRef,
        schema: SchemaRef,
    ) -> Result<Self> {
        let keep: Vec<usize> = (0..input.fields().len()).filter(|&i| i != column).collect();
        if column >= input.fields().len() || keep.len() != schema.fields().len() {
            return Err(Error::Internal(
                "a value split does not fit its input".into(),
            ));
        }
        Ok(SplitValue {
            column,
            value,
            keep,
            schema,
        })
    }
}

impl Operator for SplitValue {
    fn name(&self) -> &'static str {
        "SplitValue"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let value = Scalar::new(self.value.to_array()?);
        let mask = eq(batch.column(self.column), &value)?;
        let kept = filter_record_batch(&batch, &mask)?;
        if kept.num_rows() == 0 {
            return Ok(vec![]);
        }
        let columns = self.keep.iter().map(|&i| kept.column(i).clone()).collect();
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}
