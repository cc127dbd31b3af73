//! Plans `MATCH_RECOGNIZE` over a stream into the spec of a
//! [`PatternMatcher`](crate::operators::PatternMatcher): resolves the pattern's variables,
//! splits each `DEFINE` into conjuncts over the current row and conjuncts that read earlier
//! rows of the match, and turns `MEASURES` into expressions over per-match references.
//!
//! Inside `DEFINE v AS ...`, a bare column or `v.col` is the current row; `x.col` for another
//! variable is the last row mapped to `x` so far (NULL if none); `FIRST(x.col)`,
//! `LAST(x.col)`, `COUNT(x.*)`, `SUM/AVG/MIN/MAX(x.col)` range over the rows mapped to `x`
//! (for `v` itself, including the current row), and `PREV(col [, n])` is the row `n` before the
//! current one in the partition. Inside `MEASURES`, a bare column is the match's last row and
//! `MATCH_NUMBER()` counts the partition's matches from 1.
//!
//! The variables (PATTERN, SUBSET, DEFINE lookup) are `variables.rs`, the planning of each
//! DEFINE `define.rs`, MEASURES and the output row `measures.rs`, and the rewriting of
//! variable references into reference columns `rewriter.rs`.

mod define;
mod measures;
mod rewriter;
mod variables;

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::sql::sqlparser::ast::{
    EmptyMatchesMode, Expr, Ident, ObjectName, ObjectNamePart, OrderByExpr, RowsPerMatch,
    TableAlias, TableFactor,
};

use super::catalog::{normalize, normalize_object, Catalog, StreamDef};
use super::context::PlanContext;
use super::spec::MatchRecognizeSpec;
use crate::error::{Error, Result};
use crate::operators::pattern::{EmptyMatches, PatternSpec, RowsPerMatch as PatternRows};
use crate::sql::interval::interval_duration;
use crate::sql::Clauses;
use measures::OutputSpec;
use variables::Variables;

/// A planned `MATCH_RECOGNIZE`: its stream, operator spec and output schema.
pub(crate) struct PlannedPattern {
    pub stream: Arc<StreamDef>,
    pub spec: MatchRecognizeSpec,
    pub schema: SchemaRef,
    /// When it reads a query's results or a view (a `UNION ALL` among them): that plan.
    pub upstream: Option<Box<super::query::QueryPlan>>,
}

/// Plans the `MATCH_RECOGNIZE` in `relation` and rewrites `relation` into a reference to its
/// stream (keeping the alias), whose planning schema is then the match rows' schema.
pub(crate) fn plan_match_recognize(
    relation: &mut TableFactor,
    clauses: &Clauses,
    catalog: &Catalog,
) -> Result<PlannedPattern> {
    let within = clauses.within.as_ref();
    let TableFactor::MatchRecognize {
        table,
        partition_by,
        order_by,
        measures,
        rows_per_match,
        after_match_skip,
        pattern: _,
        symbols,
        alias,
    } = relation
    else {
        return Err(Error::Internal("not a MATCH_RECOGNIZE".into()));
    };
    let (stream, upstream) = match table.as_ref() {
        TableFactor::Table {
            name, args: None, ..
        } => {
            let key = normalize_object(name);
            match catalog.stream(&key) {
                Some(s) => (s.clone(), None),
                None => match super::chained::query_as_stream(&key, catalog)? {
                    Some((def, plan)) => (def, Some(Box::new(plan))),
                    None => (catalog.require_stream(&key)?.clone(), None),
                },
            }
        }
        // `FROM (SELECT ... UNION ALL SELECT ...) MATCH_RECOGNIZE (...)`.
        TableFactor::Derived { subquery, .. } => {
            let (def, plan) = super::chained::subquery_as_stream(subquery, catalog)?;
            (def, Some(Box::new(plan)))
        }
        _ => {
            return Err(Error::NotSupported(
                "MATCH_RECOGNIZE reads a stream, a query or a view by name, or a subquery in \
                 parentheses, not a window function: match over the stream (FROM s \
                 MATCH_RECOGNIZE (...)) and bound the pattern with WITHIN"
                    .into(),
            ))
        }
    };
    let input = stream.schema.clone();
    let Some(et) = stream.event_time.as_ref() else {
        return Err(stream.no_event_time("MATCH_RECOGNIZE"));
    };
    let rows = rows_per_match_of(rows_per_match.as_ref());
    let all_rows = rows != PatternRows::One;
    let partition_cols = partition_columns(&stream, partition_by)?;
    check_order(&stream, et.column, order_by)?;

    // Variables: in order of first appearance in PATTERN.
    let with_unmatched = rows == PatternRows::All(EmptyMatches::WithUnmatched);
    let pattern = clauses
        .pattern
        .as_ref()
        .ok_or_else(|| Error::Internal("MATCH_RECOGNIZE without its pattern".into()))?;
    let vars = Variables::resolve(pattern, &clauses.subsets, symbols, with_unmatched)?;
    let after_match = vars.after_match(after_match_skip.as_ref())?;
    let within_duration = within.map(interval_duration).transpose()?;

    let ctx = PlanContext::new();
    let variables = define::plan_variables(&ctx, &vars, &input, &stream.name)?;
    let mut leading = partition_cols.clone();
    if all_rows && !leading.contains(&et.column) {
        leading.push(et.column);
    }
    let output = OutputSpec {
        leading,
        all_rows,
        measures,
        emit_timeout: clauses.emit_timeout,
    };
    let (pattern_measures, schema) =
        measures::plan_measures(&ctx, &vars, &input, &stream.name, output)?;

    let Variables {
        names: _,
        pattern,
        subset_names,
        subset_vars,
        defines,
    } = vars;
    let matcher = PatternSpec {
        variables,
        pattern,
        partition_by: partition_cols,
        time_column: et.column,
        within: within_duration,
        emit_timeout: clauses.emit_timeout,
        after_match,
        rows_per_match: rows,
        subsets: subset_names.into_iter().zip(subset_vars).collect(),
        measures: pattern_measures,
        input_schema: input,
        schema: schema.clone(),
    };
    let spec = MatchRecognizeSpec {
        matcher,
        defines,
        measures: measures.clone(),
        within: within.cloned(),
    };
    *relation = stream_reference(&stream, alias.take());
    Ok(PlannedPattern {
        stream,
        spec,
        schema,
        upstream,
    })
}

fn rows_per_match_of(rows: Option<&RowsPerMatch>) -> PatternRows {
    match rows {
        None | Some(RowsPerMatch::OneRow) => PatternRows::One,
        Some(RowsPerMatch::AllRows(None | Some(EmptyMatchesMode::Show))) => {
            PatternRows::All(EmptyMatches::Show)
        }
        Some(RowsPerMatch::AllRows(Some(EmptyMatchesMode::Omit))) => {
            PatternRows::All(EmptyMatches::Omit)
        }
        Some(RowsPerMatch::AllRows(Some(EmptyMatchesMode::WithUnmatched))) => {
            PatternRows::All(EmptyMatches::WithUnmatched)
        }
    }
}

/// PARTITION BY: columns of the stream, by number.
fn partition_columns(stream: &StreamDef, partition_by: &[Expr]) -> Result<Vec<usize>> {
    let mut partition_cols = Vec::new();
    for e in partition_by.iter() {
        match e {
            Expr::Identifier(id) => {
                let name = normalize(id);
                let c = stream.schema.index_of(&name).map_err(|_| {
                    Error::plan(
                        sqlstate::UNDEFINED_COLUMN,
                        format!(
                            "column \"{name}\" does not exist in stream \"{}\"",
                            stream.name
                        ),
                    )
                    .at_span(id.span)
                })?;
                partition_cols.push(c);
            }
            other => {
                return Err(Error::NotSupported(format!(
                    "PARTITION BY takes columns of the stream, not {other}"
                )))
            }
        }
    }
    Ok(partition_cols)
}

/// ORDER BY: the stream's event-time column, ascending; without ORDER BY, rows are in
/// event-time order all the same.
fn check_order(stream: &StreamDef, time_column: usize, order_by: &[OrderByExpr]) -> Result<()> {
    let time_name = stream.schema.field(time_column).name();
    match order_by {
        [] => Ok(()),
        [o] if matches!(&o.expr, Expr::Identifier(id) if &normalize(id) == time_name)
            && o.options.asc != Some(false) =>
        {
            Ok(())
        }
        _ => Err(Error::NotSupported(format!(
            "MATCH_RECOGNIZE must be ORDER BY the stream's event-time column \"{time_name}\""
        ))),
    }
}

/// A plain reference to `stream` under `alias`: what the SQL planner reads in place of the
/// `MATCH_RECOGNIZE`.
fn stream_reference(stream: &StreamDef, alias: Option<TableAlias>) -> TableFactor {
    TableFactor::Table {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
            '"',
            stream.name.clone(),
        ))]),
        alias,
        args: None,
        with_hints: vec![],
        version: None,
        partitions: vec![],
        with_ordinality: false,
        json_path: None,
        sample: None,
        index_hints: vec![],
    }
}
