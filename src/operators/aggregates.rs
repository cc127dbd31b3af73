//! Aggregate state for many groups at once. DataFusion supplies the accumulators: the
//! vectorised `GroupsAccumulator` where the function has one, otherwise one `Accumulator` per
//! group (e.g. `COUNT(DISTINCT x)`). State can be exported and merged back, which is how
//! snapshots and session-window merges work.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::logical_expr::{Accumulator, EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};

/// One aggregate of a query: the function with its arguments, and its `FILTER (WHERE ...)`.
#[derive(Debug, Clone)]
pub struct AggregateSpec {
    /// The aggregate function applied to its argument expressions.
    pub expr: Arc<AggregateFunctionExpr>,
    /// Rows for which this is false or NULL are not aggregated.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
}

/// The evaluated inputs of every aggregate for one batch.
pub struct AggregateInputs {
    args: Vec<(Vec<ArrayRef>, Option<BooleanArray>)>,
}

impl AggregateInputs {
    /// Rows `offset..offset+len` of these inputs, without copying.
    pub fn slice(&self, offset: usize, len: usize) -> AggregateInputs {
        AggregateInputs {
            args: self
                .args
                .iter()
                .map(|(vals, filter)| {
                    (
                        vals.iter().map(|v| v.slice(offset, len)).collect(),
                        filter.as_ref().map(|f| f.slice(offset, len)),
                    )
                })
                .collect(),
        }
    }
}

enum Acc {
    Groups(Box<dyn GroupsAccumulator>),
    PerGroup(Vec<Box<dyn Accumulator>>),
}

/// The accumulators of every aggregate for a dense range of group indices `0..groups`.
pub struct AggregateSet {
    specs: Arc<[AggregateSpec]>,
    accs: Vec<Acc>,
    groups: usize,
}

impl AggregateSet {
    /// Empty state for `specs`.
    pub fn try_new(specs: Arc<[AggregateSpec]>) -> Result<Self> {
        let accs = specs
            .iter()
            .map(|s| {
                Ok(if s.expr.groups_accumulator_supported() {
                    Acc::Groups(s.expr.create_groups_accumulator()?)
                } else {
                    Acc::PerGroup(Vec::new())
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AggregateSet {
            specs,
            accs,
            groups: 0,
        })
    }

    /// Number of groups with state.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Evaluates every aggregate's arguments and filter on `batch`.
    pub fn inputs(&self, batch: &RecordBatch) -> Result<AggregateInputs> {
        evaluate_inputs(&self.specs, batch)
    }

    /// Adds rows to groups: row `i` of `inputs` goes to group `group_indices[i]`, which may be a
    /// new group `< total_groups`.
    pub fn update(
        &mut self,
        inputs: &AggregateInputs,
        group_indices: &[usize],
        total_groups: usize,
    ) -> Result<()> {
        self.groups = self.groups.max(total_groups);
        for ((spec, acc), (vals, filter)) in self.specs.iter().zip(&mut self.accs).zip(&inputs.args)
        {
            match acc {
                Acc::Groups(g) => {
                    g.update_batch(vals, group_indices, filter.as_ref(), total_groups)?
                }
                Acc::PerGroup(accs) => {
                    grow(accs, spec, total_groups)?;
                    for_each_group(group_indices, filter.as_ref(), |group, rows| {
                        let part = take_all(vals, rows)?;
                        accs[group].update_batch(&part)
                    })?;
                }
            }
        }
        Ok(())
    }

    /// The final value of every aggregate for every group; the state is reset.
    pub fn evaluate(&mut self) -> Result<Vec<ArrayRef>> {
        let groups = std::mem::take(&mut self.groups);
        let mut out = Vec::with_capacity(self.accs.len());
        for (spec, acc) in self.specs.iter().zip(&mut self.accs) {
            out.push(match acc {
                Acc::Groups(g) => {
                    let arr = g.evaluate(EmitTo::All)?;
                    *g = spec.expr.create_groups_accumulator()?;
                    arr
                }
                Acc::PerGroup(accs) => {
                    let values = accs
                        .iter_mut()
                        .map(|a| a.evaluate())
                        .collect::<datafusion::error::Result<Vec<_>>>()?;
                    accs.clear();
                    if values.is_empty() {
                        datafusion::arrow::array::new_empty_array(spec.expr.field().data_type())
                    } else {
                        ScalarValue::iter_to_array(values)?
                    }
                }
            });
            debug_assert_eq!(out.last().map(|a| a.len()), Some(groups));
        }
        Ok(out)
    }

    /// The intermediate state of every aggregate (its state fields, in order) for every group,
    /// without changing what the aggregates will produce.
    pub fn state(&mut self) -> Result<Vec<ArrayRef>> {
        let groups = self.groups;
        let mut out = Vec::new();
        for (spec, acc) in self.specs.iter().zip(&mut self.accs) {
            match acc {
                Acc::Groups(g) => {
                    let state = g.state(EmitTo::All)?;
                    // Taking the state empties the accumulator: put it back.
                    let mut fresh = spec.expr.create_groups_accumulator()?;
                    let indices: Vec<usize> = (0..groups).collect();
                    fresh.merge_batch(&state, &indices, groups)?;
                    *g = fresh;
                    out.extend(state);
                }
                Acc::PerGroup(accs) => {
                    let fields = spec.expr.state_fields()?.len();
                    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::new(); fields];
                    for a in accs.iter_mut() {
                        for (c, v) in columns.iter_mut().zip(a.state()?) {
                            c.push(v);
                        }
                    }
                    for (c, f) in columns.into_iter().zip(spec.expr.state_fields()?) {
                        out.push(if c.is_empty() {
                            datafusion::arrow::array::new_empty_array(f.data_type())
                        } else {
                            ScalarValue::iter_to_array(c)?
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// Number of state columns that [`AggregateSet::state`] returns.
    pub fn state_width(&self) -> Result<usize> {
        let mut n = 0;
        for s in self.specs.iter() {
            n += s.expr.state_fields()?.len();
        }
        Ok(n)
    }

    /// Merges exported state (as from [`AggregateSet::state`]): row `i` into group
    /// `group_indices[i]`.
    pub fn merge(
        &mut self,
        state: &[ArrayRef],
        group_indices: &[usize],
        total_groups: usize,
    ) -> Result<()> {
        self.groups = self.groups.max(total_groups);
        let mut offset = 0;
        for (spec, acc) in self.specs.iter().zip(&mut self.accs) {
            let width = spec.expr.state_fields()?.len();
            let cols = state.get(offset..offset + width).ok_or_else(|| {
                Error::Internal("aggregate state has fewer columns than expected".into())
            })?;
            offset += width;
            match acc {
                Acc::Groups(g) => g.merge_batch(cols, group_indices, total_groups)?,
                Acc::PerGroup(accs) => {
                    grow(accs, spec, total_groups)?;
                    for_each_group(group_indices, None, |group, rows| {
                        let part = take_all(cols, rows)?;
                        accs[group].merge_batch(&part)
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// Evaluates every aggregate's arguments and filter on `batch`.
pub fn evaluate_inputs(specs: &[AggregateSpec], batch: &RecordBatch) -> Result<AggregateInputs> {
    let n = batch.num_rows();
    let args = specs
        .iter()
        .map(|s| {
            let vals = s
                .expr
                .expressions()
                .iter()
                .map(|e| e.evaluate(batch).and_then(|v| v.into_array(n)))
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            let filter = match &s.filter {
                None => None,
                Some(f) => {
                    let mask = f.evaluate(batch)?.into_array(n)?;
                    Some(
                        mask.as_any()
                            .downcast_ref::<BooleanArray>()
                            .cloned()
                            .ok_or_else(|| {
                                Error::plan("42804", "FILTER condition must be boolean")
                            })?,
                    )
                }
            };
            Ok((vals, filter))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(AggregateInputs { args })
}

/// The schema of a windowed operator's snapshot table: two Int64 window bounds named
/// `bounds`, one column per key expression, then every aggregate's state fields.
pub fn state_schema(
    bounds: [&str; 2],
    keys: &[Arc<dyn PhysicalExpr>],
    input: &datafusion::arrow::datatypes::Schema,
    specs: &[AggregateSpec],
) -> Result<datafusion::arrow::datatypes::SchemaRef> {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let mut fields = vec![
        Field::new(bounds[0], DataType::Int64, false),
        Field::new(bounds[1], DataType::Int64, false),
    ];
    for (i, e) in keys.iter().enumerate() {
        fields.push(Field::new(format!("__key{i}"), e.data_type(input)?, true));
    }
    for s in specs {
        for f in s.expr.state_fields()? {
            fields.push(f.as_ref().clone().with_nullable(true));
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}

fn grow(accs: &mut Vec<Box<dyn Accumulator>>, spec: &AggregateSpec, n: usize) -> Result<()> {
    while accs.len() < n {
        accs.push(spec.expr.create_accumulator()?);
    }
    Ok(())
}

fn take_all(arrays: &[ArrayRef], rows: &UInt32Array) -> datafusion::error::Result<Vec<ArrayRef>> {
    arrays
        .iter()
        .map(|a| take(a.as_ref(), rows, None).map_err(Into::into))
        .collect()
}

/// Calls `f` once per group with the row indices of that group (rows filtered out skipped).
fn for_each_group(
    group_indices: &[usize],
    filter: Option<&BooleanArray>,
    mut f: impl FnMut(usize, &UInt32Array) -> datafusion::error::Result<()>,
) -> Result<()> {
    let mut order: Vec<u32> = (0..group_indices.len() as u32)
        .filter(|&i| filter.is_none_or(|m| m.is_valid(i as usize) && m.value(i as usize)))
        .collect();
    order.sort_by_key(|&i| group_indices[i as usize]);
    let mut start = 0;
    while start < order.len() {
        let group = group_indices[order[start] as usize];
        let mut end = start;
        while end < order.len() && group_indices[order[end] as usize] == group {
            end += 1;
        }
        let rows = UInt32Array::from(order[start..end].to_vec());
        f(group, &rows)?;
        start = end;
    }
    Ok(())
}
