//! Plans each variable's `DEFINE`: its conjuncts over the current row only are one boolean
//! expression evaluated per batch; those that read earlier rows of the match become a
//! [`CrossCondition`] over a small batch of references (direct column comparisons apart).

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::sql::planner::{PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr};

use super::super::catalog::normalize;
use super::super::context::PlanContext;
use super::rewriter::Rewriter;
use super::variables::Variables;
use crate::error::{Error, Result};
use crate::operators::pattern::{CompareOp, Comparison, CrossCondition, Variable};

/// The top-level conjuncts of a condition.
fn conjuncts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut out = conjuncts(left);
            out.extend(conjuncts(right));
            out
        }
        Expr::Nested(inner) => conjuncts(inner),
        other => vec![other],
    }
}

/// `column <op> __refN` (or reversed) on identical types, as a direct comparison.
fn comparison(e: &Expr, schema: &Schema, width: usize) -> Option<Comparison> {
    let Expr::BinaryOp { left, op, right } = e else {
        return None;
    };
    let op = match op {
        BinaryOperator::Eq => CompareOp::Eq,
        BinaryOperator::NotEq => CompareOp::NotEq,
        BinaryOperator::Lt => CompareOp::Lt,
        BinaryOperator::LtEq => CompareOp::LtEq,
        BinaryOperator::Gt => CompareOp::Gt,
        BinaryOperator::GtEq => CompareOp::GtEq,
        _ => return None,
    };
    let index = |e: &Expr| match e {
        Expr::Identifier(id) => schema.index_of(&normalize(id)).ok(),
        _ => None,
    };
    let (l, r) = (index(left)?, index(right)?);
    let (column, reference, op) = match (l < width, r < width) {
        (true, false) => (l, r, op),
        (false, true) => (
            r,
            l,
            match op {
                CompareOp::Lt => CompareOp::Gt,
                CompareOp::LtEq => CompareOp::GtEq,
                CompareOp::Gt => CompareOp::Lt,
                CompareOp::GtEq => CompareOp::LtEq,
                same => same,
            },
        ),
        _ => return None,
    };
    (schema.field(column).data_type() == schema.field(reference).data_type()).then_some(
        Comparison {
            column,
            op,
            reference: reference - width,
        },
    )
}

fn and_all(es: Vec<Expr>) -> Option<Expr> {
    es.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::And,
        right: Box::new(b),
    })
}

/// Plans a DEFINE condition and checks that it is boolean.
fn boolean(
    ctx: &PlanContext,
    e: Expr,
    schema: &SchemaRef,
    var: &str,
) -> Result<Arc<dyn PhysicalExpr>> {
    let df = DFSchema::try_from(schema.as_ref().clone())?;
    let p = physical(ctx, e, &df)?;
    let t = p.data_type(schema)?;
    if t != DataType::Boolean && t != DataType::Null {
        return Err(Error::plan(
            sqlstate::DATATYPE_MISMATCH,
            format!("DEFINE {var} must be a boolean condition, not {t}"),
        ));
    }
    Ok(p)
}

/// A SQL expression over `schema` (DataFusion's SQL planner, coerced, simplified), compiled.
pub(super) fn physical(
    ctx: &PlanContext,
    e: Expr,
    schema: &DFSchema,
) -> Result<Arc<dyn PhysicalExpr>> {
    let planner = SqlToRel::new(ctx);
    let logical = planner.sql_to_expr(e, schema, &mut PlannerContext::new())?;
    let info = SimplifyContext::builder()
        .with_schema(Arc::new(schema.clone()))
        .build();
    let coerced = ExprSimplifier::new(info).coerce(logical, schema)?;
    let logical = super::super::expr::simplify(&coerced, schema)?;
    Ok(ctx.state().create_physical_expr(logical, schema)?)
}

/// The matcher's variables: each one's name and its planned DEFINE.
pub(super) fn plan_variables(
    ctx: &PlanContext,
    vars: &Variables,
    input: &SchemaRef,
    stream: &str,
) -> Result<Vec<Variable>> {
    let mut variables = Vec::new();
    for (v, def) in vars.defines.iter().enumerate() {
        let name = vars.names[v].clone();
        let Some(def) = def else {
            variables.push(Variable {
                name,
                local: None,
                cross: None,
            });
            continue;
        };
        let mut rw = Rewriter::new(&vars.names, Some(v as u16), input, stream);
        rw.subset_names = vars.subset_names.clone();
        let (local, cross) = plan_define(ctx, &mut rw, def, input, &name)?;
        variables.push(Variable { name, local, cross });
    }
    Ok(variables)
}

/// A DEFINE condition planned: over the current row, and over earlier rows.
type DefineParts = (Option<Arc<dyn PhysicalExpr>>, Option<CrossCondition>);

/// One DEFINE condition: the conjuncts over the current row, and those over earlier rows.
fn plan_define(
    ctx: &PlanContext,
    rw: &mut Rewriter<'_>,
    def: &Expr,
    input: &SchemaRef,
    var: &str,
) -> Result<DefineParts> {
    let mut local = Vec::new();
    let mut cross = Vec::new();
    for conjunct in conjuncts(def) {
        let mut e = conjunct.clone();
        rw.touched = false;
        rw.rewrite(&mut e)?;
        if rw.touched {
            cross.push(e);
        } else {
            local.push(e);
        }
    }
    let local = match and_all(local) {
        None => None,
        Some(e) => Some(boolean(ctx, e, input, var)?),
    };
    if cross.is_empty() {
        return Ok((local, None));
    }
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(rw.fields());
    let schema = Arc::new(Schema::new(fields));
    let (comparisons, rest): (Vec<_>, Vec<_>) = cross
        .into_iter()
        .map(|e| (comparison(&e, &schema, input.fields().len()), e))
        .partition(|(c, _)| c.is_some());
    let predicate = match and_all(rest.into_iter().map(|(_, e)| e).collect()) {
        None => None,
        Some(e) => Some(boolean(ctx, e, &schema, var)?),
    };
    let cross = CrossCondition {
        comparisons: comparisons.into_iter().filter_map(|(c, _)| c).collect(),
        predicate,
        refs: rw.refs.clone(),
        schema,
    };
    Ok((local, Some(cross)))
}
