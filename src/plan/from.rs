//! Resolves a continuous query's `FROM`: a stream, a window table function over one
//! (TUMBLE, HOP, CUMULATE, SESSION) or a `MATCH_RECOGNIZE` over one, and the schema the
//! SQL planner then sees (the stream's columns, plus the window's bounds).

use crate::error::sqlstate;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, FunctionArg, FunctionArgExpr, ObjectName, ObjectNamePart, SetExpr, Spanned,
    TableFactor,
};

use super::catalog::{normalize, normalize_object, Catalog, EventTimeDef, StreamDef};
use super::chained::{query_as_stream, subquery_as_stream};
use super::pattern::{plan_match_recognize, PlannedPattern};
use super::query::QueryPlan;
use crate::error::{Error, Result};
use crate::sql::interval::interval_duration;
use crate::sql::Clauses;

/// A window table function in `FROM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowSpec {
    /// `TUMBLE(s, ts, size)`.
    Tumble {
        /// Window length.
        size: Duration,
    },
    /// `HOP(s, ts, slide, size)`.
    Hop {
        /// Distance between window starts.
        slide: Duration,
        /// Window length.
        size: Duration,
    },
    /// `CUMULATE(s, ts, step, size)`: windows that start together every `size` and end
    /// every `step` up to `size` (Flink's cumulating windows).
    Cumulate {
        /// Distance between window ends.
        step: Duration,
        /// The longest window's length, a whole multiple of `step`.
        size: Duration,
    },
    /// `SESSION(s, ts, gap)`.
    Session {
        /// Inactivity that closes a session.
        gap: Duration,
    },
}

/// The stream's columns followed by `window_start` and `window_end`.
pub(super) fn windowed_schema(stream: &StreamDef) -> Result<SchemaRef> {
    let et = event_time(stream)?;
    let ty = match stream.schema.field(et.column).data_type() {
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Nanosecond, tz.clone()),
        other => other.clone(),
    };
    // Over a query's windowed results, the results' own bounds are read as
    // input_window_start and input_window_end: window_start and window_end are the new
    // window's.
    let mut fields: Vec<Field> = stream
        .schema
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "window_start" | "window_end" => {
                f.as_ref().clone().with_name(format!("input_{}", f.name()))
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    fields.push(Field::new("window_start", ty.clone(), false));
    fields.push(Field::new("window_end", ty, false));
    Ok(Arc::new(Schema::new(fields)))
}

/// The stream's event time, which windows need.
fn event_time(stream: &StreamDef) -> Result<&EventTimeDef> {
    stream
        .event_time
        .as_ref()
        .ok_or_else(|| stream.no_event_time("windows"))
}

/// What `FROM` reads: a stream (or a query's results, with the query's plan), maybe
/// through a window or a `MATCH_RECOGNIZE`.
pub(super) type Source = (
    Arc<StreamDef>,
    Option<WindowSpec>,
    Option<PlannedPattern>,
    Option<Box<QueryPlan>>,
);

/// Resolves the `FROM` item: a stream, a window function over one, or a `MATCH_RECOGNIZE`
/// over one. Rewrites a window function or a `MATCH_RECOGNIZE` into a plain reference to the
/// stream (whose planning schema then carries the window columns, or is the match rows').
pub(super) fn resolve_from(
    relation: &mut TableFactor,
    clauses: &Clauses,
    catalog: &Catalog,
) -> Result<Source> {
    if let TableFactor::MatchRecognize { .. } = relation {
        let mut p = plan_match_recognize(relation, clauses, catalog)?;
        let upstream = p.upstream.take();
        return Ok((p.stream.clone(), None, Some(p), upstream));
    }
    if let TableFactor::Derived {
        subquery, alias, ..
    } = relation
    {
        let joins = match subquery.body.as_ref() {
            SetExpr::Select(inner) => inner.from.len() != 1 || !inner.from[0].joins.is_empty(),
            _ => false,
        };
        if super::union::is_set_operation(subquery) || joins {
            // A union, or a join: read as a stream of its own, under a name of its own.
            let (def, union) = subquery_as_stream(subquery, catalog)?;
            *relation = TableFactor::Table {
                name: ObjectName(vec![ObjectNamePart::Identifier(sq::Ident::with_quote(
                    '"',
                    def.name.clone(),
                ))]),
                alias: alias.take(),
                args: None,
                with_hints: Vec::new(),
                version: None,
                with_ordinality: false,
                partitions: Vec::new(),
                json_path: None,
                sample: None,
                index_hints: Vec::new(),
            };
            return Ok((def, None, None, Some(Box::new(union))));
        }
        let SetExpr::Select(inner) = subquery.body.as_mut() else {
            return Err(Error::NotSupported(
                "a subquery in FROM must be a SELECT or a UNION ALL of SELECTs".into(),
            ));
        };
        return resolve_from(&mut inner.from[0].relation, clauses, catalog);
    }
    if clauses.within.is_some() || !clauses.subsets.is_empty() {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            "WITHIN and SUBSET belong after PATTERN (...) in a MATCH_RECOGNIZE",
        ));
    }
    let TableFactor::Table { name, args, .. } = relation else {
        return Err(Error::NotSupported(
            "FROM must name a stream, a window function (TUMBLE, HOP, SESSION) or a subquery"
                .into(),
        ));
    };
    let Some(fargs) = args.take() else {
        let key = normalize_object(name);
        if let Some(s) = catalog.stream(&key) {
            return Ok((s.clone(), None, None, None));
        }
        if let Some((def, upstream)) = query_as_stream(&key, catalog)? {
            return Ok((def, None, None, Some(Box::new(upstream))));
        }
        if catalog.table(&key).is_some() {
            return Err(Error::NotSupported(format!(
                "a continuous query reads a stream; \"{key}\" is a table: join it \
                 (FROM stream s JOIN {key} t ON ...)"
            )));
        }
        return Err(Error::undefined("stream", &key).at_span(name.span()));
    };
    let (stream, spec, upstream) = window_function(name, &fargs, catalog)?;
    *name = ObjectName(vec![ObjectNamePart::Identifier(sq::Ident::with_quote(
        '"',
        stream.name.clone(),
    ))]);
    Ok((stream, Some(spec), None, upstream.map(Box::new)))
}

/// The stream and window of a window table function (`TUMBLE(s, ts, size)`, ...).
fn window_function(
    name: &ObjectName,
    fargs: &sq::TableFunctionArgs,
    catalog: &Catalog,
) -> Result<(Arc<StreamDef>, WindowSpec, Option<QueryPlan>)> {
    let func = normalize_object(name).to_ascii_uppercase();
    let mut exprs = Vec::new();
    for a in &fargs.args {
        match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => exprs.push(e.clone()),
            other => {
                return Err(Error::NotSupported(format!(
                    "window argument {other} is not supported; pass arguments by position"
                )))
            }
        }
    }
    let expected = match func.as_str() {
        "TUMBLE" => "TUMBLE(stream, time_column, size)",
        "HOP" => "HOP(stream, time_column, slide, size)",
        "CUMULATE" => "CUMULATE(stream, time_column, step, size)",
        "SESSION" => "SESSION(stream, time_column, gap)",
        other => {
            return Err(Error::NotSupported(format!(
                "table function {other} is not supported; use TUMBLE, HOP, CUMULATE or SESSION"
            )))
        }
    };
    let arity = if func == "HOP" || func == "CUMULATE" {
        4
    } else {
        3
    };
    if exprs.len() != arity {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            format!("expected {expected}"),
        ));
    }
    let stream_name = match &exprs[0] {
        Expr::Identifier(i) => normalize(i),
        Expr::CompoundIdentifier(parts) => parts.last().map(normalize).unwrap_or_default(),
        // An inline subquery: `TUMBLE((SELECT ... UNION ALL SELECT ...), ts, ...)`.
        Expr::Subquery(_) => String::new(),
        other => {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "expected a stream, a query or view, or a subquery in parentheses, found \
                     {other} in {expected}"
                ),
            ))
        }
    };
    let (stream, upstream) = match &exprs[0] {
        Expr::Subquery(q) => {
            let (def, plan) = subquery_as_stream(q, catalog)?;
            (def, Some(plan))
        }
        _ => match catalog.stream(&stream_name) {
            Some(s) => (s.clone(), None),
            None => match query_as_stream(&stream_name, catalog)? {
                Some((def, plan)) => (def, Some(plan)),
                None => {
                    return Err(Error::undefined("stream", &stream_name).at_span(exprs[0].span()))
                }
            },
        },
    };
    let time_col = time_column_arg(&exprs[1], expected)?;
    let et = event_time(&stream)?;
    let et_name = stream.schema.field(et.column).name();
    if &time_col != et_name {
        if stream.schema.column_with_name(&time_col).is_none() {
            return Err(Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!(
                    "column \"{time_col}\" does not exist in stream \"{}\"",
                    stream.name
                ),
            )
            .at_span(exprs[1].span()));
        }
        return Err(Error::NotSupported(format!(
            "windows must use the stream's event-time column \"{et_name}\", not \"{time_col}\""
        )));
    }
    let spec = match func.as_str() {
        "TUMBLE" => WindowSpec::Tumble {
            size: interval_duration(&exprs[2])?,
        },
        "HOP" => WindowSpec::Hop {
            slide: interval_duration(&exprs[2])?,
            size: interval_duration(&exprs[3])?,
        },
        "CUMULATE" => WindowSpec::Cumulate {
            step: interval_duration(&exprs[2])?,
            size: interval_duration(&exprs[3])?,
        },
        _ => WindowSpec::Session {
            gap: interval_duration(&exprs[2])?,
        },
    };
    check_window(spec)?;
    Ok((stream, spec, upstream))
}

/// The time column argument: a column, or `DESCRIPTOR(column)`.
fn time_column_arg(e: &Expr, expected: &str) -> Result<String> {
    Ok(match e {
        Expr::Identifier(i) => normalize(i),
        Expr::Function(f) if normalize_object(&f.name) == "descriptor" => match &f.args {
            sq::FunctionArguments::List(l) if l.args.len() == 1 => match &l.args[0] {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(i))) => normalize(i),
                other => {
                    return Err(Error::plan(
                        sqlstate::SYNTAX_ERROR,
                        format!("expected a column, found {other}"),
                    ))
                }
            },
            _ => {
                return Err(Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    "DESCRIPTOR takes one column",
                ))
            }
        },
        other => {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("expected the time column, found {other} in {expected}"),
            ))
        }
    })
}

/// Checks a window's sizes: CUMULATE's step divides its size, a HOP or CUMULATE puts each
/// row into a bounded number of windows.
fn check_window(spec: WindowSpec) -> Result<()> {
    if let WindowSpec::Cumulate { step, size } = spec {
        if step.is_zero() || step > size || !size.as_nanos().is_multiple_of(step.as_nanos()) {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "CUMULATE size must be a positive whole multiple of its step",
            ));
        }
    }
    if let WindowSpec::Hop { slide: step, size } | WindowSpec::Cumulate { step, size } = spec {
        if step > size {
            return Err(Error::plan(
                sqlstate::INVALID_PARAMETER_VALUE,
                "HOP slide must not exceed its size",
            ));
        }
        let windows = size.as_nanos() / step.as_nanos().max(1);
        if windows > crate::limits::MAX_WINDOWS_PER_ROW as u128 {
            let how = match spec {
                WindowSpec::Cumulate { .. } => {
                    format!("CUMULATE of size {size:?} by steps of {step:?}")
                }
                _ => format!("HOP of size {size:?} sliding by {step:?}"),
            };
            return Err(Error::limit(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "{how} puts each row into {windows} windows; the limit is {} \
                     windows per row: use a larger {}",
                    crate::limits::MAX_WINDOWS_PER_ROW,
                    if matches!(spec, WindowSpec::Cumulate { .. }) {
                        "step"
                    } else {
                        "slide"
                    }
                ),
            ));
        }
    }
    Ok(())
}
