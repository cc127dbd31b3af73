//! A catalog table built column by column and registered as an in-memory table.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

use crate::error::Result;

/// A catalog table built column by column.
pub(super) struct Table {
    name: &'static str,
    columns: Vec<(String, ArrayRef)>,
}

impl Table {
    pub(super) fn new(name: &'static str) -> Self {
        Table {
            name,
            columns: Vec::new(),
        }
    }

    pub(super) fn column(mut self, name: &str, values: ArrayRef) -> Self {
        self.columns.push((name.to_string(), values));
        self
    }

    pub(super) fn int(self, name: &str, values: impl IntoIterator<Item = i64>) -> Self {
        self.column(name, Arc::new(Int64Array::from_iter_values(values)))
    }

    pub(super) fn float(self, name: &str, values: impl IntoIterator<Item = f64>) -> Self {
        self.column(name, Arc::new(Float64Array::from_iter_values(values)))
    }

    pub(super) fn boolean(self, name: &str, values: impl IntoIterator<Item = bool>) -> Self {
        let values: BooleanArray = values.into_iter().map(Some).collect();
        self.column(name, Arc::new(values))
    }

    pub(super) fn text<S: AsRef<str>>(
        self,
        name: &str,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        self.column(name, Arc::new(StringArray::from_iter_values(values)))
    }

    pub(super) fn null_text(self, name: &str, rows: usize) -> Self {
        self.column(name, Arc::new(StringArray::new_null(rows)))
    }

    pub(super) fn register(self, ctx: &SessionContext, schema: &str) -> Result<()> {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|(n, a)| Field::new(n, a.data_type().clone(), a.null_count() > 0))
            .collect();
        let schema_ref = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(
            schema_ref.clone(),
            self.columns.into_iter().map(|c| c.1).collect(),
        )?;
        let table = MemTable::try_new(schema_ref, vec![vec![batch]])?;
        ctx.register_table(format!("{schema}.{}", self.name), Arc::new(table))?;
        Ok(())
    }
}
