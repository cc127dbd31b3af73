//! What one subscriber sees of a query's results: `SUBSCRIBE (SELECT ... FROM q WHERE ...)`
//! filters and projects each result batch, and `WITH (PROGRESS)` adds a `progressed` and a
//! `watermark` column and a progress row each time the stream's watermark moves. Both are
//! applied on the subscriber's side as it reads, so the query's stream does no work for them.

use std::sync::Arc;

use datafusion::arrow::array::{
    new_null_array, Array, ArrayRef, BooleanArray, TimestampNanosecondArray,
};
use datafusion::arrow::compute::filter;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::sql::sqlparser::ast as sq;

use crate::error::{Error, Result};
use crate::operators::Operator;
use crate::plan::spec::OperatorSpec;
use crate::plan::{plan_query, Catalog, StreamDef};
use crate::runtime::core::output::SEQ_COLUMN;
use crate::sql::Subscribe;
use crate::time::Watermark;

/// The column telling a progress row (true) from a result row (false).
pub const PROGRESSED_COLUMN: &str = "progressed";
/// The column of a progress row holding the stream's new watermark.
pub const WATERMARK_COLUMN: &str = "watermark";

/// One step of a view: keep the rows a predicate holds for, or compute new columns.
enum Step {
    Filter(Arc<dyn PhysicalExpr>),
    Project(Box<dyn Operator>),
}

/// A filter and projection over one query's result rows.
pub struct SubscribeView {
    steps: Vec<Step>,
    schema: SchemaRef,
}

impl SubscribeView {
    /// Plans `view` over the results (of schema `input`) of the query `query`. Only what
    /// handles each row on its own is allowed: WHERE and expressions in the select list.
    pub fn plan(view: &sq::Query, query: &str, input: SchemaRef) -> Result<Self> {
        let mut catalog = Catalog::default();
        // Planning only: this stream is never declared or persisted.
        catalog.add_stream(StreamDef::derived(query, input, None))?;
        let plan = plan_query(view, &catalog)?;
        let steps = plan
            .specs
            .iter()
            .map(|spec| match spec {
                OperatorSpec::Filter(f) => Ok(Step::Filter(f.predicate.clone())),
                OperatorSpec::Project(_) => Ok(Step::Project(spec.build()?)),
                other => Err(Error::NotSupported(format!(
                    "SUBSCRIBE (SELECT ...) filters and projects the rows of \"{query}\" one \
                     by one; it cannot run {} (windows, aggregates and patterns belong in a \
                     continuous query over a stream)",
                    other.name()
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SubscribeView {
            steps,
            schema: plan.schema,
        })
    }

    /// The columns of the view's rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The view of `data`, with `seq` (one number per row of `data`) kept beside the rows
    /// that pass.
    fn apply(
        &mut self,
        mut data: RecordBatch,
        mut seq: Option<ArrayRef>,
    ) -> Result<(RecordBatch, Option<ArrayRef>)> {
        for step in &mut self.steps {
            match step {
                Step::Filter(predicate) => {
                    let keep = predicate.evaluate(&data)?.into_array(data.num_rows())?;
                    let keep = keep
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or_else(|| Error::Internal("WHERE is not boolean".into()))?;
                    data = datafusion::arrow::compute::filter_record_batch(&data, keep)?;
                    seq = seq.map(|s| filter(&s, keep)).transpose()?;
                }
                Step::Project(project) => {
                    let rows = data.num_rows();
                    data = match project.process_batch(data)?.pop() {
                        Some(b) => b,
                        None => RecordBatch::new_empty(project.schema()),
                    };
                    debug_assert_eq!(data.num_rows(), rows);
                }
            }
        }
        Ok((data, seq))
    }
}

/// How a subscriber's rows are built from what its query sends it.
pub struct Shape {
    /// The rows come with a leading `seq` column (and keep it).
    with_seq: bool,
    /// Add `progressed` and `watermark`, and turn watermark moves into progress rows.
    progress: bool,
    view: Option<SubscribeView>,
    schema: SchemaRef,
}

impl Shape {
    /// The shape `sub` gives the rows of the query `query` (of schema `results`).
    pub fn of(sub: &Subscribe, query: &str, results: &SchemaRef) -> Result<Self> {
        let view = match &sub.view {
            Some(view) => Some(SubscribeView::plan(view, query, results.clone())?),
            None => None,
        };
        Ok(Shape::new(results, sub.seq, sub.progress, view))
    }

    /// The shape of a subscription to a query whose rows have schema `results`.
    pub fn new(
        results: &SchemaRef,
        with_seq: bool,
        progress: bool,
        view: Option<SubscribeView>,
    ) -> Self {
        let data = view.as_ref().map_or(results, |v| v.schema());
        let mut fields = Vec::new();
        if with_seq {
            fields.push(Field::new(SEQ_COLUMN, DataType::Int64, progress));
        }
        if progress {
            fields.push(Field::new(PROGRESSED_COLUMN, DataType::Boolean, false));
            fields.push(Field::new(
                WATERMARK_COLUMN,
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                true,
            ));
        }
        // In a progress row every result column is NULL.
        fields.extend(data.fields().iter().map(|f| {
            f.as_ref()
                .clone()
                .with_nullable(progress || f.is_nullable())
        }));
        Shape {
            with_seq,
            progress,
            view,
            schema: Arc::new(Schema::new(fields)),
        }
    }

    /// The columns the subscriber receives.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The subscriber's rows for a batch of results (with a leading `seq` column when the
    /// subscription asked for it); `None` when the view keeps none of them.
    pub fn rows(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        if !self.progress && self.view.is_none() {
            return Ok(Some(batch));
        }
        let (seq, data) = if self.with_seq {
            let data = batch.project(&(1..batch.num_columns()).collect::<Vec<_>>())?;
            (Some(batch.column(0).clone()), data)
        } else {
            (None, batch)
        };
        let (data, seq) = match &mut self.view {
            Some(view) => view.apply(data, seq)?,
            None => (data, seq),
        };
        let n = data.num_rows();
        if n == 0 {
            return Ok(None);
        }
        let mut columns: Vec<ArrayRef> = seq.into_iter().collect();
        if self.progress {
            columns.push(Arc::new(BooleanArray::from(vec![false; n])));
            columns.push(new_null_array(
                &DataType::Timestamp(TimeUnit::Nanosecond, None),
                n,
            ));
        }
        columns.extend(data.columns().iter().cloned());
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }

    /// The progress row for a watermark: `progressed` true, the watermark (NULL at the end of
    /// all input), NULL in every other column.
    pub fn progress_row(&self, watermark: Watermark) -> Result<RecordBatch> {
        let at = (watermark != Watermark::END).then_some(watermark.0.nanos());
        let progressed = usize::from(self.with_seq);
        let columns = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| -> ArrayRef {
                if i == progressed {
                    Arc::new(BooleanArray::from(vec![true]))
                } else if i == progressed + 1 {
                    Arc::new(TimestampNanosecondArray::from(vec![at]))
                } else {
                    new_null_array(f.data_type(), 1)
                }
            })
            .collect();
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{parse_one, Statement};
    use datafusion::arrow::array::{AsArray, Int64Array, StringArray};
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::arrow::util::pretty::pretty_format_batches;

    fn results() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, true),
            Field::new("amount", DataType::Int64, false),
        ]))
    }

    /// Results numbered from 1 with a leading `seq` column, as a subscriber WITH SEQ gets them.
    fn numbered(hosts: &[&str], amounts: &[i64]) -> RecordBatch {
        let seq = Int64Array::from_iter_values(1..=hosts.len() as i64);
        let mut fields = vec![Field::new(SEQ_COLUMN, DataType::Int64, false)];
        fields.extend(results().fields().iter().map(|f| f.as_ref().clone()));
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            vec![
                Arc::new(seq),
                Arc::new(StringArray::from(hosts.to_vec())),
                Arc::new(Int64Array::from(amounts.to_vec())),
            ],
        )
        .unwrap()
    }

    fn shape(sql: &str) -> Result<Shape> {
        let Statement::Subscribe(sub) = parse_one(sql).unwrap() else {
            panic!("not a subscription")
        };
        Shape::of(&sub, "big", &results())
    }

    #[test]
    fn a_view_keeps_its_rows_with_their_numbers() {
        let mut shape =
            shape("SUBSCRIBE (SELECT upper(host) AS h, amount * 2 AS twice FROM big WHERE amount >= 50) WITH SEQ")
                .unwrap();
        let names: Vec<&str> = shape
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["seq", "h", "twice"]);
        let out = shape
            .rows(numbered(&["a", "b", "c"], &[50, 20, 60]))
            .unwrap()
            .unwrap();
        assert_eq!(
            out.column(0).as_primitive::<Int64Type>().values().to_vec(),
            [1, 3]
        );
        assert_eq!(
            out.column(2).as_primitive::<Int64Type>().values().to_vec(),
            [100, 120]
        );
        // Nothing kept: nothing to send.
        assert!(shape.rows(numbered(&["d"], &[5])).unwrap().is_none());
    }

    #[test]
    fn progress_rows_carry_the_watermark_and_nulls() {
        let mut shape = shape("SUBSCRIBE big WITH (PROGRESS)").unwrap();
        let names: Vec<&str> = shape
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["progressed", "watermark", "host", "amount"]);
        let plain = RecordBatch::try_new(
            results(),
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(Int64Array::from(vec![7])),
            ],
        )
        .unwrap();
        let rows = shape.rows(plain).unwrap().unwrap();
        let wm = Watermark(crate::time::EventTime(1_700_000_000_000_000_000));
        let progress = shape.progress_row(wm).unwrap();
        let text = pretty_format_batches(&[rows, progress])
            .unwrap()
            .to_string();
        assert!(
            text.contains("| false      |                     | a    | 7      |"),
            "{text}"
        );
        assert!(
            text.contains("| true       | 2023-11-14T22:13:20 |      |        |"),
            "{text}"
        );
    }

    #[test]
    fn a_view_that_needs_state_is_refused() {
        let e = shape("SUBSCRIBE (SELECT host, count(*) AS n FROM big GROUP BY host)")
            .err()
            .expect("refused");
        assert_eq!(e.sqlstate(), "0A000", "{e}");
    }
}
