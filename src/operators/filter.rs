//! `WHERE` and `HAVING`: keeps the rows for which a DataFusion predicate is true.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::array::{Array, BooleanArray};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_plan::PhysicalExpr;

use super::Operator;
use crate::error::{Error, Result};

/// Keeps rows whose predicate evaluates to true (NULL counts as false, as in SQL).
pub struct Filter {
    predicate: Arc<dyn PhysicalExpr>,
    schema: SchemaRef,
}

impl Filter {
    /// A filter over batches of `schema`; 42804 unless `predicate` is boolean over it (or
    /// NULL, which keeps no row).
    pub fn try_new(predicate: Arc<dyn PhysicalExpr>, schema: SchemaRef) -> Result<Self> {
        let t = predicate.data_type(&schema)?;
        let boolean = |t: &DataType| matches!(t, DataType::Boolean | DataType::Null);
        let ok = match &t {
            DataType::Dictionary(_, value) => boolean(value),
            t => boolean(t),
        };
        if !ok {
            return Err(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                format!("argument of WHERE or HAVING must be type boolean, not type {t}"),
            ));
        }
        Ok(Filter { predicate, schema })
    }
}

/// The rows of `batch` for which `predicate` is true.
pub fn select(predicate: &Arc<dyn PhysicalExpr>, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
    let mask = predicate.evaluate(&batch)?.into_array(batch.num_rows())?;
    let mask = mask
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| {
            Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                "argument of WHERE must be type boolean",
            )
        })?;
    keep(batch, mask)
}

/// The rows of `batch` where `mask` is true; no batch if none is.
pub fn keep(batch: RecordBatch, mask: &BooleanArray) -> Result<Vec<RecordBatch>> {
    if mask.true_count() == batch.num_rows() && mask.null_count() == 0 {
        return Ok(vec![batch]);
    }
    let out = filter_record_batch(&batch, mask)?;
    Ok(if out.num_rows() == 0 {
        vec![]
    } else {
        vec![out]
    })
}

impl Operator for Filter {
    fn name(&self) -> &'static str {
        "Filter"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        select(&self.predicate, batch)
    }

    fn predicate(&self) -> Option<Arc<dyn PhysicalExpr>> {
        Some(self.predicate.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::Operator as Op;
    use datafusion::physical_expr::expressions::{binary, col, lit};

    #[test]
    fn keeps_true_rows_and_round_trips_snapshot() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let pred = binary(col("x", &schema).unwrap(), Op::Gt, lit(2i64), &schema).unwrap();
        let mut f = Filter::try_new(pred, schema.clone()).unwrap();
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(vec![
                Some(1),
                Some(3),
                None,
                Some(5),
            ]))],
        )
        .unwrap();
        let out = f.process_batch(batch).unwrap();
        let xs = out[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(xs.values().to_vec(), vec![3, 5]);
        let snap = f.snapshot().unwrap().encode().unwrap();
        assert!(snap.is_empty(), "a filter keeps no state");
        f.restore(&snap).unwrap();
        assert!(f.restore(&[1]).is_err(), "state it never had is refused");
    }

    #[test]
    fn a_predicate_that_is_not_boolean_is_refused() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let sum = binary(col("x", &schema).unwrap(), Op::Plus, lit(1i64), &schema).unwrap();
        let err = Filter::try_new(sum, schema.clone())
            .err()
            .expect("x + 1 is refused");
        assert_eq!(err.sqlstate(), "42804");
        assert!(err.to_string().contains("not type Int64"), "{err}");
        let null = lit(datafusion::scalar::ScalarValue::Null);
        assert!(
            Filter::try_new(null, schema).is_ok(),
            "NULL keeps no row but is allowed"
        );
    }
}
