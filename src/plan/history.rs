//! Plans window functions (`LAG`, aggregates and frame functions `OVER (...)`) onto the
//! history operator: the ordering column, the partition, each function and its frame.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::{
    Expr as LExpr, WindowFrame, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition,
};
use datafusion::scalar::ScalarValue;

use super::catalog::StreamDef;
use super::context::PlanContext;
use super::expr::{physical, physical_all};
use super::spec::{HistorySpec, OperatorSpec};
use crate::error::{Error, Result};
use crate::operators::history::{FrameStart, HistoryAgg, HistoryColumn, HistoryFn};
use crate::operators::robust::FrameFn;

/// Maps window functions (`LAG`, aggregates `OVER (...)`) onto a history operator.
pub(super) fn plan_history(
    ctx: &PlanContext,
    stream: &StreamDef,
    input: &DFSchema,
    window_expr: &[LExpr],
    ordered: bool,
    schema: SchemaRef,
) -> Result<OperatorSpec> {
    let (time_name, time_column) = history_time(stream, input, ordered)?;
    let mut columns = Vec::new();
    let mut partition: Option<Vec<LExpr>> = None;
    let base = input.fields().len();
    for (i, e) in window_expr.iter().enumerate() {
        let inner = e.clone().unalias_nested().data;
        let LExpr::WindowFunction(wf) = &inner else {
            return Err(unsupported(format!("{e} is not a window function")));
        };
        let p = &wf.params;
        match &partition {
            None => partition = Some(p.partition_by.clone()),
            Some(existing) if existing != &p.partition_by => {
                return Err(unsupported(
                    "all OVER clauses of a query must use the same PARTITION BY".into(),
                ))
            }
            _ => {}
        }
        let ordered_by_time = match p.order_by.as_slice() {
            [sort] => sort.asc && matches!(&sort.expr, LExpr::Column(c) if c.name == time_name),
            _ => false,
        };
        if !ordered_by_time {
            return Err(unsupported(format!(
                "OVER must be ORDER BY {time_name} (ascending): history follows event time"
            )));
        }
        let arg = match p.args.first() {
            Some(a) => physical(ctx, a, input)?,
            None => datafusion::physical_expr::expressions::lit(1i64),
        };
        let data_type = schema.field(base + i).data_type().clone();
        columns.push(HistoryColumn {
            function: history_function(wf, &data_type)?,
            arg,
            data_type,
        });
    }
    let partition = partition.unwrap_or_default();
    Ok(OperatorSpec::History(HistorySpec {
        columns,
        partition_by: physical_all(ctx, &partition, input)?,
        time_column,
        ordered,
        input: Arc::new(input.as_arrow().clone()),
        schema,
        functions: window_expr.to_vec(),
        partition,
        relation: stream.name.clone(),
    }))
}

fn unsupported(m: String) -> Error {
    Error::NotSupported(m)
}

/// The column history is ordered by, its name and its index in `input`: the window's end
/// (else start) over a windowed query's results, else the stream's event time.
fn history_time(stream: &StreamDef, input: &DFSchema, ordered: bool) -> Result<(String, usize)> {
    let time_name = if ordered {
        if input.index_of_column_by_name(None, "window_end").is_some() {
            "window_end".to_string()
        } else {
            "window_start".to_string()
        }
    } else {
        stream
            .event_time
            .as_ref()
            .map(|et| stream.schema.field(et.column).name().clone())
            .ok_or_else(|| {
                Error::plan(
                    sqlstate::INVALID_OBJECT_DEFINITION,
                    format!(
                        "stream \"{}\" has no event time to order history by",
                        stream.name
                    ),
                )
            })?
    };
    let time_column = input
        .fields()
        .iter()
        .position(|f| f.name() == &time_name)
        .ok_or_else(|| {
            Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!("history is ordered by \"{time_name}\": select it in the inner query"),
            )
        })?;
    Ok((time_name, time_column))
}

/// The history function of one window call whose result has type `data_type`.
fn history_function(wf: &WindowFunction, data_type: &DataType) -> Result<HistoryFn> {
    let p = &wf.params;
    let frame_fn = frame_function(&wf.fun, &p.args)?;
    match &wf.fun {
        WindowFunctionDefinition::WindowUDF(f) if f.name().eq_ignore_ascii_case("lag") => {
            lag_function(&p.args, data_type)
        }
        WindowFunctionDefinition::AggregateUDF(_) | WindowFunctionDefinition::WindowUDF(_)
            if frame_fn.is_some()
                || matches!(&wf.fun, WindowFunctionDefinition::AggregateUDF(_)) =>
        {
            let agg = match frame_fn {
                Some(f) => HistoryAgg::Frame(f),
                None => HistoryAgg::from_name(wf.fun.name()).ok_or_else(|| {
                    unsupported(format!(
                        "{} OVER (...) is not supported; use COUNT, SUM, AVG, MIN, MAX, \
                         STDDEV, VAR, MEDIAN, MAD, QUANTILE, EWMA, EWM_STDDEV, \
                         ANOMALY_LIKELIHOOD, FIRST_VALUE, EWMA_ZSCORE, HOLT_ZSCORE, \
                         VARIANCE_RATIO, SLOPE_CHANGE, SPIKE_RATE or DEBOUNCE",
                        wf.fun.name()
                    ))
                })?,
            };
            if p.distinct || p.filter.is_some() {
                return Err(unsupported("DISTINCT and FILTER in OVER aggregates".into()));
            }
            let (start, end_offset) = frame_bounds(&p.window_frame)?;
            let peers = p.window_frame.units == WindowFrameUnits::Range && end_offset == 0;
            if let HistoryAgg::Frame(f) = agg {
                let rows_to_current =
                    matches!(start, FrameStart::Rows(_)) && end_offset == 0 && !peers;
                if f.feeds_back() && !rows_to_current {
                    // Its frame holds its own answers, one per row up to the current one.
                    return Err(unsupported(format!(
                        "{} needs a frame of ROWS BETWEEN n PRECEDING AND CURRENT ROW",
                        wf.fun.name()
                    )));
                }
            }
            if matches!((agg, start), (HistoryAgg::Frame(_), FrameStart::Unbounded)) {
                // Each row sorts or walks its whole frame: over all history that grows
                // without bound, in memory and in time per row.
                return Err(unsupported(format!(
                    "{} needs a bounded frame: ROWS BETWEEN n PRECEDING or RANGE BETWEEN \
                     INTERVAL ... PRECEDING",
                    wf.fun.name()
                )));
            }
            Ok(HistoryFn::Aggregate {
                agg,
                start,
                end_offset,
                peers,
            })
        }
        other => Err(unsupported(format!(
            "window function {} is not supported; use LAG or an aggregate",
            other.name()
        ))),
    }
}

/// `LAG(x [, offset [, default]])`: constant offset and default.
fn lag_function(args: &[LExpr], data_type: &DataType) -> Result<HistoryFn> {
    let offset = match args.get(1) {
        None => 1,
        Some(LExpr::Literal(v, _)) => v
            .to_string()
            .parse::<usize>()
            .map_err(|_| unsupported("LAG offset must be a whole number".into()))?,
        Some(other) => {
            return Err(unsupported(format!(
                "LAG offset must be a constant, not {other}"
            )))
        }
    };
    let default = match args.get(2) {
        Some(LExpr::Literal(v, _)) => v.cast_to(data_type)?,
        Some(other) => {
            return Err(unsupported(format!(
                "LAG default must be a constant, not {other}"
            )))
        }
        None => ScalarValue::try_from(data_type)?,
    };
    Ok(HistoryFn::Lag { offset, default })
}

/// Where an aggregate's frame starts, and how many rows before the current one it ends.
fn frame_bounds(frame: &WindowFrame) -> Result<(FrameStart, usize)> {
    let bound_rows = |v: &ScalarValue| -> Result<usize> {
        v.to_string()
            .parse::<usize>()
            .map_err(|_| unsupported(format!("frame offset {v} must be a whole number")))
    };
    let start = match (&frame.units, &frame.start_bound) {
        (_, WindowFrameBound::Preceding(v)) if v.is_null() => FrameStart::Unbounded,
        (WindowFrameUnits::Rows, WindowFrameBound::Preceding(v)) => {
            FrameStart::Rows(bound_rows(v)?)
        }
        (WindowFrameUnits::Range, WindowFrameBound::Preceding(v)) => {
            FrameStart::Range(interval_nanos(v)?)
        }
        // RANGE from CURRENT ROW: the current row's peers, those with its time.
        (WindowFrameUnits::Range, WindowFrameBound::CurrentRow) => FrameStart::Range(0),
        (_, WindowFrameBound::CurrentRow) => FrameStart::Rows(0),
        _ => {
            return Err(unsupported(
                "frames that start after the current row".into(),
            ))
        }
    };
    let end_offset = match (&frame.units, &frame.end_bound) {
        (_, WindowFrameBound::CurrentRow) => 0,
        (WindowFrameUnits::Rows, WindowFrameBound::Preceding(v)) if !v.is_null() => bound_rows(v)?,
        (WindowFrameUnits::Range, WindowFrameBound::Following(v)) if v.is_null() => {
            // DataFusion's default frame without ORDER BY; ORDER BY is required
            // above, so this does not happen.
            0
        }
        _ => {
            return Err(unsupported(
                "frames must end at CURRENT ROW or n PRECEDING (ROWS): the future \
                 is not known yet"
                    .into(),
            ))
        }
    };
    if let (FrameStart::Rows(k), e) = (start, end_offset) {
        if e > k {
            return Err(Error::plan(
                sqlstate::WINDOWING_ERROR,
                "frame starts after it ends",
            ));
        }
    }
    Ok((start, end_offset))
}

/// A robust or adaptive frame function (`MEDIAN`, `MAD`, `QUANTILE(x, p)`, ...: see
/// [`FrameFn`]) for a window call, with its constant parameters; `None` for other functions.
fn frame_function(
    fun: &datafusion::logical_expr::WindowFunctionDefinition,
    args: &[LExpr],
) -> Result<Option<FrameFn>> {
    let params = args.iter().skip(1).map(|a| match a {
        LExpr::Literal(v, _) if !v.is_null() => v.to_string().parse::<f64>().map_err(|_| {
            Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("{}: parameter {v} must be a number", fun.name()),
            )
        }),
        other => Err(Error::NotSupported(format!(
            "{}: parameter {other} must be a constant",
            fun.name()
        ))),
    });
    if FrameFn::from_call(fun.name(), &[]).is_none() {
        return Ok(None);
    }
    let params = params.collect::<Result<Vec<f64>>>()?;
    match FrameFn::from_call(fun.name(), &params) {
        Some(Ok(f)) => Ok(Some(f)),
        Some(Err(m)) => Err(Error::plan(sqlstate::INVALID_PARAMETER_VALUE, m)),
        None => Ok(None),
    }
}

/// Nanoseconds of an interval literal (RANGE frames).
fn interval_nanos(v: &ScalarValue) -> Result<i64> {
    match v {
        ScalarValue::IntervalMonthDayNano(Some(i)) if i.months == 0 => {
            Ok(i.days as i64 * 86_400_000_000_000 + i.nanoseconds)
        }
        ScalarValue::IntervalDayTime(Some(i)) => {
            Ok(i.days as i64 * 86_400_000_000_000 + i.milliseconds as i64 * 1_000_000)
        }
        other => Err(Error::NotSupported(format!(
            "RANGE frames take an INTERVAL without months, not {other}"
        ))),
    }
}
