//! Expressions of a planned query: DataFusion logical expressions simplified (with the
//! regular-expression guard described on [`simplify`]) and compiled into the physical
//! expressions our operators evaluate on each batch; and [`ConstantEvaluator`], which gives
//! the INSERT path the value of a constant SQL expression.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::DFSchema;
use datafusion::common::DataFusionError;
use datafusion::logical_expr::expr::{BinaryExpr, Placeholder};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::Expr as LExpr;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use datafusion::sql::planner::{PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast::Expr as SqlExpr;

use super::context::PlanContext;
use crate::error::{Error, Result};

/// `e` simplified and compiled against `schema`.
pub(super) fn physical(
    ctx: &PlanContext,
    e: &LExpr,
    schema: &DFSchema,
) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(ctx
        .state()
        .create_physical_expr(simplify(e, schema)?, schema)?)
}

/// DataFusion's simplifier: some functions (coalesce, nvl, ...) only evaluate after it has
/// rewritten them.
///
/// It also rewrites a match with a constant regular expression (`x ~ '...'`) into LIKE, but
/// without escaping the backslashes (DataFusion 55): `image ~ '\\lsass\.exe$'` became
/// `image LIKE '%\lsass.exe'`, where `\l` means `l`, so it matched `notlsass.exe` too. Such
/// matches are held out of its reach and stay regular expressions.
///
/// A continuous query cannot read the clock (`now()`, `current_date`, `current_time`): its
/// results would depend on when rows were processed, so a replay or a recovery would change
/// them. That is refused with 0A000.
pub(super) fn simplify(e: &LExpr, schema: &DFSchema) -> Result<LExpr> {
    let mut clock = None;
    e.apply(|e| {
        if let LExpr::ScalarFunction(f) = e {
            if CLOCK_FUNCTIONS.contains(&f.name()) {
                clock = Some(f.name().to_string());
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    if let Some(name) = clock {
        return Err(Error::NotSupported(format!(
            "{name}() in a continuous query: its results would depend on when rows are \
             processed, and change on replay or recovery; compare with the event time instead \
             (a window, WITHIN, or the watermark)"
        )));
    }
    simplify_at(e, schema, None)
}

/// DataFusion's functions that read the clock (aliases such as `current_timestamp` and
/// `today` plan to these).
const CLOCK_FUNCTIONS: [&str; 3] = ["now", "current_date", "current_time"];

/// [`simplify`], with `now()` and the other current-time functions folded to `now` when given.
fn simplify_at(e: &LExpr, schema: &DFSchema, now: Option<DateTime<Utc>>) -> Result<LExpr> {
    let info = SimplifyContext::builder()
        .with_schema(Arc::new(schema.clone()))
        .with_query_execution_start_time(now)
        .build();
    let simplifier = ExprSimplifier::new(info);
    let mut held = Vec::new();
    let e = e
        .clone()
        .transform_down(|e| match e {
            LExpr::BinaryExpr(b) if is_regex_with_backslash(&b) => {
                let id = format!("$saql_regex_{}", held.len());
                held.push(b);
                Ok(Transformed::new(
                    LExpr::Placeholder(Placeholder::new_with_field(
                        id,
                        Some(Arc::new(Field::new("", DataType::Boolean, true))),
                    )),
                    true,
                    TreeNodeRecursion::Jump,
                ))
            }
            e => Ok(Transformed::no(e)),
        })?
        .data;
    let e = simplifier.simplify(e)?;
    if held.is_empty() {
        return Ok(e);
    }
    let mut held: Vec<Option<BinaryExpr>> = held.into_iter().map(Some).collect();
    Ok(e.transform_up(|e| match e {
        LExpr::Placeholder(p) if p.id.starts_with("$saql_regex_") => {
            let i: usize = p.id["$saql_regex_".len()..]
                .parse()
                .map_err(|_| DataFusionError::Internal(format!("bad placeholder {}", p.id)))?;
            let b = held
                .get_mut(i)
                .and_then(Option::take)
                .ok_or_else(|| DataFusionError::Internal(format!("placeholder {} twice", p.id)))?;
            Ok(Transformed::yes(LExpr::BinaryExpr(BinaryExpr::new(
                Box::new(simplifier.simplify(*b.left)?),
                b.op,
                b.right,
            ))))
        }
        e => Ok(Transformed::no(e)),
    })?
    .data)
}

/// `x ~ 'pattern'` (or `~*`, `!~`, `!~*`) whose constant pattern has a backslash.
fn is_regex_with_backslash(b: &BinaryExpr) -> bool {
    use datafusion::logical_expr::Operator as Op;
    matches!(
        b.op,
        Op::RegexMatch | Op::RegexIMatch | Op::RegexNotMatch | Op::RegexNotIMatch
    ) && matches!(
        b.right.as_ref(),
        LExpr::Literal(ScalarValue::Utf8(Some(p)) | ScalarValue::LargeUtf8(Some(p)) | ScalarValue::Utf8View(Some(p)), _)
            if p.contains('\\')
    )
}

/// Each of `exprs` simplified and compiled against `schema`.
pub(super) fn physical_all(
    ctx: &PlanContext,
    exprs: &[LExpr],
    schema: &DFSchema,
) -> Result<Vec<Arc<dyn PhysicalExpr>>> {
    exprs.iter().map(|e| physical(ctx, e, schema)).collect()
}

/// Whether `e` reads `window_start` or `window_end`.
pub(super) fn mentions_window(e: &LExpr) -> bool {
    e.column_refs()
        .iter()
        .any(|c| c.name == "window_start" || c.name == "window_end")
}

/// Evaluates constant SQL expressions (an INSERT's values that are not plain literals:
/// `1 + 2`, `CAST(...)`, `now()`) with DataFusion, planning them against no columns. The
/// planning context is made on first use.
#[derive(Default)]
pub struct ConstantEvaluator {
    ctx: Option<PlanContext>,
}

impl ConstantEvaluator {
    /// The value of `expr`, which reads no column; `now()` is the time of the call.
    pub fn evaluate(&mut self, expr: &SqlExpr) -> Result<ScalarValue> {
        self.evaluate_bound(expr, &|n, _| {
            Err(Error::plan(
                crate::error::sqlstate::UNDEFINED_PARAMETER,
                format!("there is no parameter ${n}"),
            ))
        })
    }

    /// [`ConstantEvaluator::evaluate`] of an expression with `$n` placeholders
    /// (`$1::timestamp`, `$2 || 'x'`): `param(n, type)` gives the value of `$n` for a place of
    /// the type DataFusion infers for it (`None` where nothing says, as inside a cast).
    pub fn evaluate_bound(
        &mut self,
        expr: &SqlExpr,
        param: &dyn Fn(usize, Option<&DataType>) -> Result<ScalarValue>,
    ) -> Result<ScalarValue> {
        let ctx = self.ctx.get_or_insert_with(PlanContext::new);
        let empty = DFSchema::empty();
        let logical =
            SqlToRel::new(ctx).sql_to_expr(expr.clone(), &empty, &mut PlannerContext::new())?;
        let (logical, _) = logical.infer_placeholder_types(&empty)?;
        let mut failure = None;
        let logical = logical
            .transform(|e| match &e {
                LExpr::Placeholder(Placeholder { id, field }) => {
                    let n = id.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
                    let value = match n {
                        Some(n) => param(n, field.as_ref().map(|f| f.data_type())),
                        None => Err(Error::plan(
                            crate::error::sqlstate::UNDEFINED_PARAMETER,
                            format!("there is no parameter {id}"),
                        )),
                    };
                    match value {
                        Ok(v) => Ok(Transformed::yes(LExpr::Literal(v, None))),
                        Err(err) => {
                            failure.get_or_insert(err);
                            Ok(Transformed::no(e))
                        }
                    }
                }
                _ => Ok(Transformed::no(e)),
            })?
            .data;
        if let Some(err) = failure {
            return Err(err);
        }
        let logical = simplify_at(&logical, &empty, Some(Utc::now()))?;
        let physical = ctx.state().create_physical_expr(logical, &empty)?;
        let batch = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(1)),
        )?;
        let value = physical.evaluate(&batch)?.into_array(1)?;
        Ok(ScalarValue::try_from_array(&value, 0)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn constant(sql: &str) -> Result<ScalarValue> {
        let expr = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect("an expression");
        ConstantEvaluator::default().evaluate(&expr)
    }

    #[test]
    fn now_is_the_time_of_the_evaluation() {
        let before = Utc::now().timestamp_nanos_opt().unwrap();
        let value = constant("now() - INTERVAL '1' HOUR").unwrap();
        let after = Utc::now().timestamp_nanos_opt().unwrap();
        let ScalarValue::TimestampNanosecond(Some(t), _) = value else {
            panic!("a timestamp, got {value:?}")
        };
        let hour = 3_600_000_000_000;
        assert!(
            before - hour <= t && t <= after - hour,
            "{before} {t} {after}"
        );
        assert_eq!(constant("1 + 2").unwrap(), ScalarValue::Int64(Some(3)));
    }
}
