//! Carrying state across `ALTER CONTINUOUS QUERY` where an operator's spec changed but its
//! state means the same. An altered query shares every leading operator whose spec is
//! unchanged; past the first changed one its operators are new. An `INVARIANT` behind a
//! changed select list is new too (its input columns moved), yet what it learned still holds
//! when it learns the same expressions of the same rows: its values, keys and time, followed
//! back through the projections and filters to the last shared operator, are equal, and the
//! rows reaching it pass the same filters. Then its state carries over, the rows it holds
//! (waiting for the watermark) rebuilt in the new columns from the old ones.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;

use crate::error::Result;
use crate::plan::spec::{InvariantSpec, OperatorSpec};

type Expr = Arc<dyn PhysicalExpr>;

/// Each column of the rows at one point of a path as an expression over the rows where the
/// old and new paths part (None where it cannot be followed back), and the filters the rows
/// passed since, over those rows too.
#[derive(Clone)]
struct Lineage {
    columns: Vec<Option<Expr>>,
    filters: Vec<Expr>,
}

impl Lineage {
    fn start(input: &SchemaRef) -> Lineage {
        Lineage {
            columns: input
                .fields()
                .iter()
                .enumerate()
                .map(|(i, f)| Some(Arc::new(Column::new(f.name(), i)) as Expr))
                .collect(),
            filters: Vec::new(),
        }
    }

    /// `e` (over the current rows) over the rows where the paths part.
    fn follow(&self, e: &Expr) -> Option<Expr> {
        let mut unknown = false;
        let followed = Arc::clone(e)
            .transform(|e| {
                Ok(match e.downcast_ref::<Column>() {
                    Some(c) => match self.columns.get(c.index()).cloned().flatten() {
                        Some(origin) => Transformed::yes(origin),
                        None => {
                            unknown = true;
                            Transformed::no(e)
                        }
                    },
                    None => Transformed::no(e),
                })
            })
            .ok()?
            .data;
        (!unknown).then_some(followed)
    }
}

/// An `INVARIANT` on a path, with what reaches it followed back.
struct Reached<'a> {
    at: usize,
    spec: &'a InvariantSpec,
    lineage: Lineage,
}

/// The invariants of `specs` (a path from where the old and new paths part, whose rows there
/// have schema `input`) that rows reach through projections and filters only.
fn invariants<'a>(input: &SchemaRef, specs: &[&'a OperatorSpec]) -> Vec<Reached<'a>> {
    let mut lineage = Lineage::start(input);
    let mut out = Vec::new();
    for (at, spec) in specs.iter().enumerate() {
        match spec {
            OperatorSpec::Project(p) => {
                let columns = p.exprs.iter().map(|e| lineage.follow(e)).collect();
                lineage.columns = columns;
            }
            OperatorSpec::Filter(f) => match lineage.follow(&f.predicate) {
                Some(p) => lineage.filters.push(p),
                None => break,
            },
            OperatorSpec::Invariant(i) => {
                out.push(Reached {
                    at,
                    spec: i,
                    lineage: lineage.clone(),
                });
                // Its output: its input, then `violation`.
                lineage.columns.push(None);
            }
            _ => break,
        }
    }
    out
}

/// Whether `new`'s state would be `old`'s: the same kind of learning of the same expressions
/// of the same rows.
fn same_learning(old: &Reached, new: &Reached) -> bool {
    let (o, n) = (old.spec, new.spec);
    let follow_all = |r: &Reached, exprs: &[Expr]| -> Option<Vec<Expr>> {
        exprs.iter().map(|e| r.lineage.follow(e)).collect()
    };
    let time = |r: &Reached| r.lineage.columns.get(r.spec.time_column).cloned().flatten();
    o.kind == n.kind
        && o.training == n.training
        && o.min_support == n.min_support
        && o.online == n.online
        && o.windowed == n.windowed
        && old.lineage.filters == new.lineage.filters
        && follow_all(old, &o.values).is_some_and(|v| Some(v) == follow_all(new, &n.values))
        && follow_all(old, &o.keys).is_some_and(|k| Some(k) == follow_all(new, &n.keys))
        && time(old).is_some_and(|t| Some(t) == time(new))
}

/// How the rows an old operator holds become the new one's: each new input column computed
/// from the old input columns.
#[derive(Debug, Clone)]
pub struct RowMap {
    columns: Vec<Expr>,
    schema: SchemaRef,
}

impl RowMap {
    /// Rows of the old input as rows of the new.
    pub fn apply(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let arrays = self
            .columns
            .iter()
            .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(self.schema.clone(), arrays)?)
    }
}

/// `e` (over where the paths part) over the old input columns `old`, whose schema is
/// `schema`: every part of it that an old column computes replaced by that column. None if it
/// reads a column the old input does not hold.
fn over_old(e: &Expr, old: &[Option<Expr>], schema: &SchemaRef) -> Option<Expr> {
    if let Some(k) = old
        .iter()
        .position(|c| c.as_ref().is_some_and(|c| Arc::eq(c, e)))
    {
        return Some(Arc::new(Column::new(schema.field(k).name(), k)));
    }
    if e.is::<Column>() {
        return None;
    }
    let children = e
        .children()
        .into_iter()
        .map(|c| over_old(c, old, schema))
        .collect::<Option<Vec<_>>>()?;
    if children.is_empty() {
        return Some(Arc::clone(e));
    }
    Arc::clone(e).with_new_children(children).ok()
}

/// State that carries from an old operator to a new one.
#[derive(Debug, Clone)]
pub struct Carry {
    /// Index of the old operator in the old path's specs given.
    pub old: usize,
    /// Index of the new operator in the new path's specs given.
    pub new: usize,
    /// How the rows the old one holds become the new one's; None if some new column cannot
    /// be computed from the old ones (then it carries only if it holds no rows).
    pub rows: Option<RowMap>,
}

/// The operators of `new` whose state carries over from one of `old`: both are the parts of
/// an altered query's old and new paths past the operators they share, whose output (or the
/// stream's rows) has schema `input`.
pub fn carries(input: &SchemaRef, old: &[&OperatorSpec], new: &[&OperatorSpec]) -> Vec<Carry> {
    let olds = invariants(input, old);
    invariants(input, new)
        .into_iter()
        .filter_map(|n| {
            let o = olds.iter().find(|o| same_learning(o, &n))?;
            let old_input = match old[o.at] {
                OperatorSpec::Invariant(i) => invariant_input(i),
                _ => return None,
            };
            let new_input = invariant_input(n.spec);
            let rows = n
                .lineage
                .columns
                .iter()
                .map(|c| over_old(c.as_ref()?, &o.lineage.columns, &old_input))
                .collect::<Option<Vec<_>>>()
                .map(|columns| RowMap {
                    columns,
                    schema: new_input,
                });
            Some(Carry {
                old: o.at,
                new: n.at,
                rows,
            })
        })
        .collect()
}

/// An invariant's input schema: its output without `violation`.
fn invariant_input(spec: &InvariantSpec) -> SchemaRef {
    let fields = spec.schema.fields();
    Arc::new(datafusion::arrow::datatypes::Schema::new(
        fields[..fields.len().saturating_sub(1)].to_vec(),
    ))
}
