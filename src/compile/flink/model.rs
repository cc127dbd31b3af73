//! `OUTLIER` and `INVARIANT` on Flink: the query's results in Flink SQL, then saql's model as
//! a keyed process function of PyFlink's DataStream API (the Python in `models.py`, written
//! into the program), then the clause's `HAVING` in Flink SQL on the way to the sink.
//!
//! Why a process function and not a (pandas) aggregate UDF: a model needs every row of a
//! window (OUTLIER), or every result in event-time order with state across windows
//! (INVARIANT), and must emit rows, not one value per group. A keyed process function keeps
//! the rows in keyed state and runs the model on an event-time timer, so it acts when the
//! watermark passes the rows, as saql's operator does: the same rows, in the same order, at
//! any parallelism. OUTLIER is keyed by its partition (PARTITION BY values and the window),
//! so it scales out; INVARIANT's training period starts at the query's first result over all
//! keys, so one task sees all its (already filtered) results, keyed by a constant.
//!
//! This module computes what the Python needs: the SELECT that adds window_time (the time
//! attribute the timers use) and one column per PARTITION BY, value or PER expression, the
//! model's parameters as JSON, and the INSERT that reads the model's output.

use datafusion::arrow::datatypes::{DataType, Schema};
use serde_json::{json, Value};

use super::ddl::{flink_type, sink_name};
use super::expr::{self, name_sql};
use super::select;
use crate::error::{Error, Result};
use crate::operators::invariant::{InvariantKind, Training};
use crate::operators::outlier::OutlierMethod;
use crate::plan::{OperatorSpec, QueryPlan};
use crate::sql::CreateQuery;

/// A query whose results go through a model before the sink.
#[derive(Debug, Clone, PartialEq)]
pub struct FlinkModel {
    /// The model's parameters and the layout of the rows it reads (see `models.py`).
    pub spec: Value,
    /// `INSERT INTO <name>__sink SELECT ... FROM <name>__model [WHERE having]`.
    pub insert: String,
}

/// The column types a model's rows may have (those `models.py` maps to Python types).
const MODEL_TYPES: [&str; 8] = [
    "STRING",
    "BIGINT",
    "INT",
    "SMALLINT",
    "DOUBLE",
    "FLOAT",
    "BOOLEAN",
    "TIMESTAMP(3)",
];

fn method_json(m: OutlierMethod) -> Value {
    match m {
        OutlierMethod::Dbscan { eps, min_points } => {
            json!({"name": "dbscan", "eps": eps, "min_points": min_points})
        }
        OutlierMethod::Kmeans { k, threshold } => {
            json!({"name": "kmeans", "k": k, "threshold": threshold})
        }
        OutlierMethod::Zscore { threshold } => json!({"name": "zscore", "threshold": threshold}),
        OutlierMethod::Mad { threshold } => json!({"name": "mad", "threshold": threshold}),
        OutlierMethod::Iqr { factor } => json!({"name": "iqr", "factor": factor}),
    }
}

/// How `models.py` prints a value in the violation column.
fn value_kind(t: &DataType) -> &'static str {
    match t {
        DataType::Boolean => "bool",
        DataType::Float16 | DataType::Float32 | DataType::Float64 => "float",
        DataType::Timestamp(..) => "timestamp",
        _ => "text",
    }
}

/// The output columns' names and Flink types, refusing a type the model cannot carry.
fn out_columns(schema: &Schema) -> Result<(Vec<String>, Vec<String>)> {
    let mut names = Vec::new();
    let mut types = Vec::new();
    for f in schema.fields() {
        let t = flink_type(f.data_type())?;
        if !MODEL_TYPES.contains(&t) {
            return Err(Error::NotSupported(format!(
                "a {t} result column (\"{}\") before OUTLIER or INVARIANT",
                f.name()
            )));
        }
        names.push(f.name().clone());
        types.push(t.to_string());
    }
    Ok((names, types))
}

/// The SELECT the model reads: the results, window_time when windowed, then `helpers`.
fn model_select(inner: &str, helpers: &[&datafusion::sql::sqlparser::ast::Expr]) -> Result<String> {
    if helpers.is_empty() {
        return Ok(inner.to_string());
    }
    let cols: Vec<String> = helpers
        .iter()
        .enumerate()
        .map(|(i, e)| Ok(format!("{} AS __saql_h{i}", expr::sql(e, None)?)))
        .collect::<Result<_>>()?;
    Ok(format!(
        "SELECT *, {} FROM ({inner}) AS __saql_r",
        cols.join(", ")
    ))
}

/// The model for a query with OUTLIER or INVARIANT, or `None` for one without.
pub fn model_query(
    create: &CreateQuery,
    plan: &QueryPlan,
    ctx: &select::Ctx,
    name: &str,
) -> Result<Option<FlinkModel>> {
    let clauses = &create.clauses;
    if clauses.outlier.is_none() && clauses.invariant.is_none() {
        // A query over one with a model plans that model too; its own has none.
        return Ok(None);
    }
    let spec = plan
        .specs
        .iter()
        .rev()
        .find(|s| matches!(s, OperatorSpec::Outlier(_) | OperatorSpec::Invariant(_)));
    let Some(spec) = spec else {
        return Ok(None);
    };
    let (out_names, out_types) = out_columns(&plan.schema)?;
    let from_model = format!(
        "SELECT {} FROM {}",
        out_names
            .iter()
            .map(|n| name_sql(n))
            .collect::<Vec<_>>()
            .join(", "),
        name_sql(&format!("{name}__model"))
    );
    let (model, insert_select) = match (spec, &clauses.outlier, &clauses.invariant) {
        (OperatorSpec::Outlier(s), Some(clause), _) => {
            let width = s.schema.fields().len() - 2;
            let translated = select::query_sql(&create.query, ctx, true)?;
            let helpers: Vec<_> = clause.partition_by.iter().collect();
            let base = width + 1;
            let mut partition: Vec<usize> = (base..base + helpers.len()).collect();
            partition.extend(s.window_column);
            let mut insert = from_model;
            if let Some(h) = &clause.having {
                insert.push_str(&format!(" WHERE {}", expr::sql(h, None)?));
            }
            let spec = json!({
                "kind": "outlier",
                "select": model_select(&translated.sql, &helpers)?,
                "width": width,
                "on": s.on,
                "partition": partition,
                "method": method_json(s.method.0),
            });
            (spec, insert)
        }
        (OperatorSpec::Invariant(s), _, Some(clause)) => {
            let width = s.schema.fields().len() - 1;
            let input = Schema::new(s.schema.fields()[..width].to_vec());
            let translated = select::query_sql(&create.query, ctx, s.windowed)?;
            if !s.windowed && translated.event_time.is_none() {
                return Err(Error::NotSupported(
                    "INVARIANT over results without an event time".into(),
                ));
            }
            let helpers: Vec<_> = clause.exprs.iter().chain(&clause.per).collect();
            let base = width + usize::from(s.windowed);
            let kinds: Vec<&str> = s
                .values
                .iter()
                .map(|v| Ok(value_kind(&v.data_type(&input)?)))
                .collect::<Result<_>>()?;
            let training = match s.training {
                Training::Windows(n) => json!({"kind": "windows", "n": n}),
                Training::Interval(d) => {
                    json!({"kind": "interval", "millis": d.as_millis() as u64})
                }
                Training::Between { .. } => {
                    return Err(Error::NotSupported(
                        "INVARIANT TRAINING UNTIL/BETWEEN is not translated to Flink yet".into(),
                    ))
                }
            };
            if s.min_support > 1 {
                return Err(Error::NotSupported(
                    "INVARIANT MIN SUPPORT is not translated to Flink yet".into(),
                ));
            }
            let values = clause.exprs.len();
            let spec = json!({
                "kind": "invariant",
                "select": model_select(&translated.sql, &helpers)?,
                "width": width,
                "set": s.kind == InvariantKind::Set,
                "values": (base..base + values).collect::<Vec<_>>(),
                "keys": (base + values..base + helpers.len()).collect::<Vec<_>>(),
                "value_kinds": kinds,
                "value_names": s.values_sql.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "time": s.time_column,
                "training": training,
                "online": s.online,
            });
            (spec, from_model)
        }
        _ => return Err(Error::Internal("model clause without its operator".into())),
    };
    let mut spec = model;
    spec["out_columns"] = json!(out_names);
    spec["out_types"] = json!(out_types);
    Ok(Some(FlinkModel {
        spec,
        insert: format!("INSERT INTO {} {insert_select}", sink_name(name)),
    }))
}
