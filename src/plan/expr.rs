//! Expressions of a planned query: DataFusion logical expressions simplified (with the
//! regular-expression guard described on [`simplify`]) and compiled into the physical
//! expressions our operators evaluate on each batch.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::DFSchema;
use datafusion::common::DataFusionError;
use datafusion::logical_expr::expr::{BinaryExpr, Placeholder};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::Expr as LExpr;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use super::context::PlanContext;
use crate::error::Result;

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
pub(crate) fn simplify(e: &LExpr, schema: &DFSchema) -> Result<LExpr> {
    let info = SimplifyContext::builder()
        .with_schema(Arc::new(schema.clone()))
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
