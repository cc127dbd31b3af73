//! `TUMBLE`, `HOP` and `CUMULATE` in an ad hoc SELECT: the windows of a stream's recent rows,
//! each row with its `window_start` and `window_end` (once per window it falls in), so a
//! windowed query can be tried on recent data before it is registered. The windows are those
//! the continuous operators assign (`WindowAssigner`: aligned to the epoch). SESSION windows
//! depend on the query's keys and are not offered here.

use crate::error::sqlstate;
use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, TimestampNanosecondArray, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;

use crate::error::Error;
use crate::operators::window_aggregate::WindowAssigner;

/// A stream's schema and recent rows.
pub(in crate::runtime) type Recent = HashMap<String, (SchemaRef, Vec<RecordBatch>)>;

/// Registers `tumble`, `hop` and `cumulate` over `streams`; a call expands to at most
/// `max_rows` rows.
pub(in crate::runtime) fn register(ctx: &SessionContext, streams: Arc<Recent>, max_rows: usize) {
    for kind in [Kind::Tumble, Kind::Hop, Kind::Cumulate] {
        let name = match kind {
            Kind::Tumble => "tumble",
            Kind::Hop => "hop",
            Kind::Cumulate => "cumulate",
        };
        ctx.register_udtf(
            name,
            Arc::new(WindowTvf {
                kind,
                streams: streams.clone(),
                max_rows,
            }),
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tumble,
    Hop,
    Cumulate,
}

#[derive(Debug)]
struct WindowTvf {
    kind: Kind,
    streams: Arc<Recent>,
    max_rows: usize,
}

impl WindowTvf {
    fn usage(&self) -> &'static str {
        match self.kind {
            Kind::Tumble => "TUMBLE(stream, time_column, size)",
            Kind::Hop => "HOP(stream, time_column, slide, size)",
            Kind::Cumulate => "CUMULATE(stream, time_column, step, size)",
        }
    }
}

impl TableFunctionImpl for WindowTvf {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let usage = || {
            fail(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                format!("expected {}", self.usage()),
            ))
        };
        let exprs = args.exprs();
        if exprs.len() != if self.kind == Kind::Tumble { 3 } else { 4 } {
            return Err(usage());
        }
        let (Expr::Column(stream), Expr::Column(time)) = (&exprs[0], &exprs[1]) else {
            return Err(usage());
        };
        let (schema, batches) = self
            .streams
            .get(&stream.name.to_lowercase())
            .ok_or_else(|| fail(Error::undefined("stream", &stream.name)))?;
        let time_index = schema.index_of(&time.name.to_lowercase()).map_err(|_| {
            fail(Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!("column \"{}\" does not exist", time.name),
            ))
        })?;
        if !matches!(
            schema.field(time_index).data_type(),
            DataType::Timestamp(..)
        ) {
            return Err(fail(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                format!("the time column \"{}\" is not a timestamp", time.name),
            )));
        }
        let size = nanos(exprs.last().expect("checked arity"))?;
        let assigner = match self.kind {
            Kind::Tumble => WindowAssigner::tumble(size),
            Kind::Hop => WindowAssigner::hop(nanos(&exprs[2])?, size),
            Kind::Cumulate => {
                let step = nanos(&exprs[2])?;
                if step > size || size % step != 0 {
                    return Err(fail(Error::plan(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "CUMULATE size must be a positive whole multiple of its step",
                    )));
                }
                WindowAssigner::cumulate(step, size)
            }
        };

        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        let bound = DataType::Timestamp(TimeUnit::Nanosecond, None);
        fields.push(Field::new("window_start", bound.clone(), false));
        fields.push(Field::new("window_end", bound, false));
        let out_schema = Arc::new(Schema::new(fields));
        let mut out = Vec::with_capacity(batches.len());
        let mut rows = 0usize;
        for batch in batches {
            let times = cast(
                batch.column(time_index),
                &DataType::Timestamp(TimeUnit::Nanosecond, None),
            )?;
            let times = times
                .as_any()
                .downcast_ref::<TimestampNanosecondArray>()
                .expect("cast to nanoseconds");
            let (mut indices, mut starts, mut ends) = (Vec::new(), Vec::new(), Vec::new());
            for (i, t) in times.iter().enumerate() {
                let Some(t) = t else { continue };
                assigner.check(t, t).map_err(fail)?;
                for (start, end) in assigner.windows(t) {
                    rows += 1;
                    if rows > self.max_rows {
                        return Err(fail(Error::limit(
                            sqlstate::PROGRAM_LIMIT_EXCEEDED,
                            format!(
                                "{} expands the recent rows to more than {} rows \
                                 (--max-result-rows); use a larger slide or a smaller size",
                                self.usage(),
                                self.max_rows
                            ),
                        )));
                    }
                    indices.push(i as u32);
                    starts.push(start);
                    ends.push(end);
                }
            }
            let indices = UInt32Array::from(indices);
            let mut columns: Vec<ArrayRef> = batch
                .columns()
                .iter()
                .map(|c| take(c.as_ref(), &indices, None))
                .collect::<Result<_, _>>()?;
            columns.push(Arc::new(TimestampNanosecondArray::from(starts)));
            columns.push(Arc::new(TimestampNanosecondArray::from(ends)));
            out.push(RecordBatch::try_new(out_schema.clone(), columns)?);
        }
        Ok(Arc::new(MemTable::try_new(out_schema, vec![out])?))
    }
}

/// An interval literal's length in nanoseconds; positive, without months.
fn nanos(e: &Expr) -> DfResult<i64> {
    let value = match e {
        Expr::Literal(v, _) => v,
        _ => {
            return Err(fail(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                "window sizes are INTERVAL literals",
            )))
        }
    };
    let n = match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            i64::from(v.days) * 86_400_000_000_000 + v.nanoseconds
        }
        ScalarValue::IntervalDayTime(Some(v)) => {
            i64::from(v.days) * 86_400_000_000_000 + i64::from(v.milliseconds) * 1_000_000
        }
        _ => {
            return Err(fail(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                format!("a window size must be an interval of days or less, not {value}"),
            )))
        }
    };
    if n <= 0 {
        return Err(fail(Error::invalid_input(
            sqlstate::INVALID_PARAMETER_VALUE,
            "a window size must be positive",
        )));
    }
    Ok(n)
}

fn fail(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
