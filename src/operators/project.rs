//! `SELECT` lists: computes each output column with a DataFusion expression.

use std::sync::Arc;

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;

use super::filter::keep;
use super::Operator;
use crate::error::Result;

/// Evaluates one expression per output column.
pub struct Project {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    /// When every expression is an input column of the output's type: their indices.
    columns: Option<Vec<usize>>,
}

impl Project {
    /// A projection producing batches of `schema`, one expression per field, over batches of
    /// `input`.
    pub fn new(exprs: Vec<Arc<dyn PhysicalExpr>>, input: &Schema, schema: SchemaRef) -> Self {
        let columns = exprs
            .iter()
            .zip(schema.fields())
            .map(|(e, f)| {
                let c = e.downcast_ref::<Column>()?;
                let from = input.fields().get(c.index())?;
                (from.data_type() == f.data_type() && (f.is_nullable() || !from.is_nullable()))
                    .then_some(c.index())
            })
            .collect();
        Project {
            exprs,
            schema,
            columns,
        }
    }
}

impl Operator for Project {
    fn name(&self) -> &'static str {
        "Project"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let n = batch.num_rows();
        let columns = self
            .exprs
            .iter()
            .map(|e| e.evaluate(&batch).and_then(|v| v.into_array(n)))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let columns = columns
            .into_iter()
            .zip(self.schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c)
                } else {
                    datafusion::arrow::compute::cast(&c, f.data_type())
                }
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(n));
        Ok(vec![RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &options,
        )?])
    }

    fn process_selected(
        &mut self,
        batch: &RecordBatch,
        selected: &BooleanArray,
    ) -> Option<Result<Vec<RecordBatch>>> {
        // Only the selected columns are filtered, not the whole input.
        let columns = self.columns.as_ref()?;
        if columns.iter().any(|&i| i >= batch.num_columns()) {
            return None;
        }
        let narrow = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns.iter().map(|&i| batch.column(i).clone()).collect(),
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        );
        Some(narrow.map_err(Into::into).and_then(|b| keep(b, selected)))
    }
}
