//! `SELECT` lists: computes each output column with a DataFusion expression.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_plan::PhysicalExpr;

use super::Operator;
use crate::error::Result;
use crate::time::Watermark;

/// Evaluates one expression per output column.
pub struct Project {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
}

impl Project {
    /// A projection producing batches of `schema`, one expression per field.
    pub fn new(exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Self {
        Project { exprs, schema }
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
        let options =
            datafusion::arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
        Ok(vec![RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &options,
        )?])
    }

    fn on_watermark(&mut self, _watermark: Watermark) -> Result<Vec<RecordBatch>> {
        Ok(vec![])
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        Ok(vec![])
    }

    fn restore(&mut self, _snapshot: &[u8]) -> Result<()> {
        Ok(())
    }
}
