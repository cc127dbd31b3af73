//! Plans the clauses that follow a query body: `OUTLIER` and `INVARIANT` (anomaly models over
//! the results) and `SUPPRESS` (alert control), each an operator appended to the plan.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::sql::planner::{PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast as sq;

use super::catalog::normalize;
use super::context::PlanContext;
use super::expr::physical;
use super::query::{QueryPlan, WindowSpec};
use super::spec::{FilterSpec, InvariantSpec, Method, OperatorSpec, OutlierSpec, SuppressSpec};
use crate::error::{Error, Result};
use crate::operators::invariant;
use crate::operators::outlier;
use crate::sql::{
    self, InvariantClause, InvariantKind, OutlierClause, OutlierMethod, SuppressClause, Training,
};

/// The result column that places a row in time: window_end, else window_start, else the
/// stream's event-time column, if the results hold one.
fn result_time_column(plan: &QueryPlan) -> Option<usize> {
    let input = &plan.schema;
    let event_time = plan
        .stream
        .event_time
        .as_ref()
        .map(|et| plan.stream.schema.field(et.column).name().clone());
    input
        .index_of("window_end")
        .or_else(|_| input.index_of("window_start"))
        .ok()
        .or_else(|| event_time.and_then(|name| input.index_of(&name).ok()))
}

/// Plans SQL expressions over the result rows (named `results`).
fn result_exprs(input: &SchemaRef, exprs: &[sq::Expr]) -> Result<Vec<Arc<dyn PhysicalExpr>>> {
    let mut ctx = PlanContext::new();
    ctx.add_table("results", input.clone())?;
    let df_input = DFSchema::try_from_qualified_schema("results", input)?;
    let planner = SqlToRel::new(&ctx);
    exprs
        .iter()
        .map(|e| {
            let logical = planner.sql_to_expr(e.clone(), &df_input, &mut PlannerContext::new())?;
            physical(&ctx, &logical, &df_input)
        })
        .collect()
}

/// Appends the suppression of repeated results, last of all operators.
pub(super) fn add_suppress(plan: &mut QueryPlan, clause: &SuppressClause) -> Result<()> {
    let Some(time_column) = result_time_column(plan) else {
        return Err(Error::plan(
            sqlstate::UNDEFINED_COLUMN,
            "SUPPRESS places results in time: select window_end (windowed queries) or the \
             stream's event-time column",
        ));
    };
    let schema = plan.schema.clone();
    let keys = result_exprs(&schema, &clause.per)?;
    plan.specs.push(OperatorSpec::Suppress(SuppressSpec {
        interval: clause.interval,
        keys,
        keys_sql: clause.per.clone(),
        time_column,
        schema,
    }));
    Ok(())
}

/// Appends the invariant operator.
pub(super) fn add_invariant(plan: &mut QueryPlan, clause: &InvariantClause) -> Result<()> {
    let input = plan.schema.clone();
    if clause.min_support > 1 && clause.kind == InvariantKind::Range {
        return Err(Error::NotSupported(
            "MIN SUPPORT applies to INVARIANT SET; a RANGE learns bounds, not values".into(),
        ));
    }
    if matches!(clause.training, Training::Windows(_)) && plan.window.is_none() {
        return Err(Error::NotSupported(
            "TRAINING n WINDOWS needs a windowed query; use TRAINING INTERVAL '...'".into(),
        ));
    }
    // Rows are placed in or after training by their window (window_end) or event time.
    let Some(time_column) = result_time_column(plan) else {
        return Err(Error::plan(
            sqlstate::UNDEFINED_COLUMN,
            "INVARIANT places rows in or after training by time: select window_end (windowed \
             queries) or the stream's event-time column",
        ));
    };
    let values = result_exprs(&input, &clause.exprs)?;
    let keys = result_exprs(&input, &clause.per)?;
    if clause.kind == InvariantKind::Range {
        for (e, text) in values.iter().zip(&clause.exprs) {
            let t = e.data_type(&input)?;
            if !(t.is_numeric() || matches!(t, DataType::Timestamp(_, _))) {
                return Err(Error::plan(
                    sqlstate::DATATYPE_MISMATCH,
                    format!("INVARIANT RANGE needs numbers or timestamps; {text} is {t}"),
                ));
            }
        }
    }
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("violation", DataType::Utf8, false));
    let output = Arc::new(Schema::new(fields));
    plan.specs.push(OperatorSpec::Invariant(InvariantSpec {
        kind: invariant_kind(clause.kind),
        values,
        values_sql: clause.exprs.clone(),
        keys,
        keys_sql: clause.per.clone(),
        training: training(clause.training),
        min_support: clause.min_support,
        online: clause.online,
        time_column,
        windowed: plan.window.is_some(),
        schema: output.clone(),
    }));
    plan.schema = output;
    Ok(())
}

/// Appends the outlier operator (and the clause's HAVING) to a windowed plan.
pub(super) fn add_outlier(plan: &mut QueryPlan, clause: &OutlierClause) -> Result<()> {
    if plan.window.is_none() {
        return Err(Error::NotSupported(
            "OUTLIER compares the groups of a window: the query needs TUMBLE or HOP".into(),
        ));
    }
    if !plan
        .specs
        .iter()
        .any(|s| matches!(s, OperatorSpec::WindowAggregate(_)))
        && !matches!(plan.window, Some(WindowSpec::Session { .. }))
    {
        return Err(Error::NotSupported(
            "OUTLIER compares the groups of a window: the query needs GROUP BY window_start, \
             window_end"
                .into(),
        ));
    }
    if let Some(WindowSpec::Session { .. }) = plan.window {
        // Each key's sessions start and end at their own times: there is no one window
        // whose groups could be compared, and which sessions close together depends on
        // how the input happens to arrive.
        return Err(Error::NotSupported(
            "OUTLIER compares the groups of one window, and SESSION windows differ per key; \
             use TUMBLE or HOP"
                .into(),
        ));
    }
    let input = plan.schema.clone();
    let mut on = Vec::new();
    for c in &clause.on {
        let name = normalize(c);
        let (i, f) = input.column_with_name(&name).ok_or_else(|| {
            Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!(
                    "OUTLIER column \"{name}\" is not a result column; name it in the SELECT list"
                ),
            )
            .at_span(c.span)
        })?;
        if !f.data_type().is_numeric() {
            return Err(Error::plan(
                sqlstate::DATATYPE_MISMATCH,
                format!(
                    "OUTLIER column \"{name}\" must be numeric, not {}",
                    f.data_type()
                ),
            ));
        }
        on.push(i);
    }
    let mut ctx = PlanContext::new();
    ctx.add_table("results", input.clone())?;
    let df_input = DFSchema::try_from_qualified_schema("results", &input)?;
    let planner = SqlToRel::new(&ctx);
    let mut partition = Vec::new();
    for e in &clause.partition_by {
        let logical = planner.sql_to_expr(e.clone(), &df_input, &mut PlannerContext::new())?;
        partition.push(physical(&ctx, &logical, &df_input)?);
    }
    let window_column = input
        .index_of("window_end")
        .or_else(|_| input.index_of("window_start"))
        .ok();
    if let Some(i) = window_column {
        partition.push(datafusion::physical_expr::expressions::col(
            input.field(i).name(),
            &input,
        )?);
    }
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("is_outlier", DataType::Boolean, true));
    fields.push(Field::new("outlier_score", DataType::Float64, true));
    let output = Arc::new(Schema::new(fields));
    plan.specs.push(OperatorSpec::Outlier(OutlierSpec {
        method: Method(outlier_method(clause.method)),
        on,
        partition,
        partition_sql: clause.partition_by.clone(),
        window_column,
        schema: output.clone(),
    }));
    plan.schema = output.clone();
    if let Some(having) = &clause.having {
        let df_output = DFSchema::try_from_qualified_schema("results", &output)?;
        let logical =
            planner.sql_to_expr(having.clone(), &df_output, &mut PlannerContext::new())?;
        let predicate = physical(&ctx, &logical, &df_output)?;
        plan.specs.push(OperatorSpec::Filter(FilterSpec {
            predicate,
            schema: output.clone(),
            condition: logical,
            relation: "results".into(),
        }));
    }
    Ok(())
}

/// The operator's form of a parsed OUTLIER method.
fn outlier_method(m: OutlierMethod) -> outlier::OutlierMethod {
    use outlier::OutlierMethod as O;
    match m {
        OutlierMethod::Dbscan { eps, min_points } => O::Dbscan { eps, min_points },
        OutlierMethod::Kmeans { k, threshold } => O::Kmeans { k, threshold },
        OutlierMethod::Zscore { threshold } => O::Zscore { threshold },
        OutlierMethod::Mad { threshold } => O::Mad { threshold },
        OutlierMethod::Iqr { factor } => O::Iqr { factor },
    }
}

/// The operator's form of a parsed INVARIANT kind.
fn invariant_kind(k: InvariantKind) -> invariant::InvariantKind {
    match k {
        InvariantKind::Set => invariant::InvariantKind::Set,
        InvariantKind::Range => invariant::InvariantKind::Range,
    }
}

/// The operator's form of a parsed training period.
fn training(t: Training) -> invariant::Training {
    match t {
        sql::Training::Windows(n) => invariant::Training::Windows(n),
        sql::Training::Interval(d) => invariant::Training::Interval(d),
        sql::Training::Between { from, until } => invariant::Training::Between { from, until },
    }
}
