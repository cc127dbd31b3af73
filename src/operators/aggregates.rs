//! Aggregate state for many groups at once. DataFusion supplies the accumulators: the
//! vectorised `GroupsAccumulator` where the function has one, otherwise one `Accumulator` per
//! group (e.g. `COUNT(DISTINCT x)` over text). State can be exported and merged back, which is
//! how snapshots, session-window merges and the panes of hopping windows work. [`GroupTable`]
//! adds the group keys (DataFusion's `GroupValues`, a hash table specialised to the key types).

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{take, FilterPredicate};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::logical_expr::{Accumulator, EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
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
#[derive(Clone)]
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

    /// The rows that `predicate` keeps.
    pub fn filter(&self, predicate: &FilterPredicate) -> Result<AggregateInputs> {
        let args = self
            .args
            .iter()
            .map(|(vals, filter)| {
                let vals = vals
                    .iter()
                    .map(|v| predicate.filter(v))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let filter = match filter {
                    None => None,
                    Some(f) => Some(predicate.filter(f)?.as_boolean().clone()),
                };
                Ok((vals, filter))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AggregateInputs { args })
    }

    /// The rows at `indices`, in that order.
    pub fn take(&self, indices: &UInt32Array) -> Result<AggregateInputs> {
        let args = self
            .args
            .iter()
            .map(|(vals, filter)| {
                let filter = match filter {
                    None => None,
                    Some(f) => Some(take(f, indices, None)?.as_boolean().clone()),
                };
                Ok((take_all(vals, indices)?, filter))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AggregateInputs { args })
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

    /// Bytes the accumulators hold, as they report them.
    pub fn size_bytes(&self) -> usize {
        self.accs
            .iter()
            .map(|acc| match acc {
                Acc::Groups(g) => g.size(),
                Acc::PerGroup(accs) => accs.iter().map(|a| a.size()).sum(),
            })
            .sum()
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
        let state = self.take_state()?;
        // Taking the state emptied the accumulators: put it back.
        let indices: Vec<usize> = (0..groups).collect();
        self.merge(&state, &indices, groups)?;
        Ok(state)
    }

    /// The intermediate state of every aggregate for every group, as [`AggregateSet::state`];
    /// the state is reset.
    pub fn take_state(&mut self) -> Result<Vec<ArrayRef>> {
        self.groups = 0;
        let mut out = Vec::new();
        for (spec, acc) in self.specs.iter().zip(&mut self.accs) {
            match acc {
                Acc::Groups(g) => {
                    out.extend(g.state(EmitTo::All)?);
                    *g = spec.expr.create_groups_accumulator()?;
                }
                Acc::PerGroup(accs) => {
                    let fields = spec.expr.state_fields()?.len();
                    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::new(); fields];
                    for a in accs.iter_mut() {
                        for (c, v) in columns.iter_mut().zip(a.state()?) {
                            c.push(v);
                        }
                    }
                    accs.clear();
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

/// Groups found by their key columns, each with its aggregate state and the sequence number of
/// its first row. Results come out in the order of those numbers, so a table merged from
/// several partial tables lists its groups as one table fed all their rows in order would.
pub struct GroupTable {
    keys: Box<dyn GroupValues>,
    aggs: AggregateSet,
    first_seen: Vec<u64>,
    /// Group index of each input row, reused between calls.
    indices: Vec<usize>,
}

/// The exported content of a [`GroupTable`]: key columns, aggregate state columns (as
/// [`AggregateSet::state`]) and each group's first sequence number, one row per group.
#[derive(Debug, Clone)]
pub struct GroupPartials {
    /// One column per key.
    pub keys: Vec<ArrayRef>,
    /// The state fields of every aggregate.
    pub state: Vec<ArrayRef>,
    /// Sequence number of each group's first row.
    pub first_seen: Vec<u64>,
}

impl GroupPartials {
    /// Bytes the exported arrays hold.
    pub fn size_bytes(&self) -> usize {
        self.keys
            .iter()
            .chain(&self.state)
            .map(|a| a.get_array_memory_size())
            .sum::<usize>()
            + self.first_seen.capacity() * 8
    }
}

impl GroupTable {
    /// An empty table for keys of `key_schema` (at least one column) and aggregates `specs`.
    pub fn try_new(key_schema: SchemaRef, specs: Arc<[AggregateSpec]>) -> Result<Self> {
        Ok(GroupTable {
            keys: new_group_values(key_schema, &GroupOrdering::None)?,
            aggs: AggregateSet::try_new(specs)?,
            first_seen: Vec::new(),
            indices: Vec::new(),
        })
    }

    /// Whether the table has no groups.
    pub fn is_empty(&self) -> bool {
        self.first_seen.is_empty()
    }

    /// Bytes the table holds: its key table, accumulators and per-group bookkeeping
    /// (allocated room included: an emptied table kept for reuse still holds it).
    pub fn size_bytes(&self) -> usize {
        self.keys.size()
            + self.aggs.size_bytes()
            + (self.first_seen.capacity() + self.indices.capacity()) * 8
    }

    /// Adds rows: `keys` and `inputs` are their key columns and aggregate inputs; row `i` has
    /// sequence number `seq(i)`, increasing with `i`.
    pub fn update(
        &mut self,
        keys: &[ArrayRef],
        inputs: &AggregateInputs,
        seq: impl Fn(usize) -> u64,
    ) -> Result<()> {
        self.keys.intern(keys, &mut self.indices)?;
        let before = self.first_seen.len();
        let total = self.keys.len();
        if total > before {
            self.first_seen.resize(total, u64::MAX);
            for (i, &g) in self.indices.iter().enumerate() {
                if g >= before && self.first_seen[g] == u64::MAX {
                    self.first_seen[g] = seq(i);
                }
            }
        }
        self.aggs.update(inputs, &self.indices, total)
    }

    /// Merges exported partials into this table's groups.
    pub fn merge(&mut self, partials: &GroupPartials) -> Result<()> {
        self.keys.intern(&partials.keys, &mut self.indices)?;
        let total = self.keys.len();
        self.first_seen.resize(total, u64::MAX);
        for (&g, &seq) in self.indices.iter().zip(&partials.first_seen) {
            let first = &mut self.first_seen[g];
            *first = (*first).min(seq);
        }
        // New groups are numbered after the existing ones and all occur in this call, as
        // DataFusion's accumulators assume (their null tracking marks every group below
        // `total` as seen when the input has no nulls).
        self.aggs.merge(&partials.state, &self.indices, total)
    }

    /// The table's content, for merging into other tables or for a snapshot. The table is left
    /// empty, ready for reuse.
    pub fn take_partials(&mut self) -> Result<GroupPartials> {
        Ok(GroupPartials {
            keys: self.take_keys()?,
            state: self.aggs.take_state()?,
            first_seen: std::mem::take(&mut self.first_seen),
        })
    }

    /// The key columns and the final value of every aggregate, one row per group, groups in
    /// the order of their first rows. The table is left empty, ready for reuse.
    pub fn finish(&mut self) -> Result<(Vec<ArrayRef>, Vec<ArrayRef>)> {
        let keys = self.take_keys()?;
        let values = self.aggs.evaluate()?;
        // Merged tables, and rare hash collisions inside `GroupValues`, number groups out of
        // first-seen order.
        match first_seen_order(&std::mem::take(&mut self.first_seen)) {
            None => Ok((keys, values)),
            Some(order) => {
                let order = UInt32Array::from(order);
                Ok((take_all(&keys, &order)?, take_all(&values, &order)?))
            }
        }
    }

    /// Emits the key columns and empties the key table, keeping its room: the next use of the
    /// table likely sees as many groups.
    fn take_keys(&mut self) -> Result<Vec<ArrayRef>> {
        let groups = self.keys.len();
        let keys = self.keys.emit(EmitTo::All)?;
        self.keys.clear_shrink(groups);
        Ok(keys)
    }
}

/// The groups in order of their first sequence numbers, or `None` when they already are.
fn first_seen_order(first_seen: &[u64]) -> Option<Vec<u32>> {
    if first_seen.is_sorted() {
        return None;
    }
    let n = first_seen.len();
    let lo = first_seen.iter().copied().min().unwrap_or(0);
    let hi = first_seen.iter().copied().max().unwrap_or(0);
    // Each group's first row is a different row, so the numbers are distinct: when they are
    // dense enough, placing each group at its number sorts them in one pass.
    if hi - lo < 8 * n as u64 {
        let mut at = vec![u32::MAX; (hi - lo + 1) as usize];
        for (g, &s) in first_seen.iter().enumerate() {
            at[(s - lo) as usize] = g as u32;
        }
        let order: Vec<u32> = at.into_iter().filter(|&g| g != u32::MAX).collect();
        if order.len() == n {
            return Some(order);
        }
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&g| first_seen[g as usize]);
    Some(order)
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
                                Error::plan(
                                    sqlstate::DATATYPE_MISMATCH,
                                    "FILTER condition must be boolean",
                                )
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::physical_expr::aggregate::AggregateExprBuilder;
    use datafusion::physical_expr::expressions::col;

    fn sum_of_v() -> Arc<[AggregateSpec]> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
        let expr = AggregateExprBuilder::new(sum_udaf(), vec![col("v", &schema).unwrap()])
            .schema(schema)
            .alias("total")
            .build()
            .unwrap();
        vec![AggregateSpec {
            expr: Arc::new(expr),
            filter: None,
        }]
        .into()
    }

    fn table(specs: &Arc<[AggregateSpec]>) -> GroupTable {
        let keys = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        GroupTable::try_new(keys, specs.clone()).unwrap()
    }

    /// Feeds `(key, value)` rows numbered from `first_seq`.
    fn feed(
        t: &mut GroupTable,
        specs: &[AggregateSpec],
        first_seq: u64,
        rows: &[(i64, Option<i64>)],
    ) {
        let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
        let values: ArrayRef = Arc::new(Int64Array::from(
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        ));
        let batch = RecordBatch::try_from_iter([("v", values)]).unwrap();
        let inputs = evaluate_inputs(specs, &batch).unwrap();
        t.update(&[keys], &inputs, |i| first_seq + i as u64)
            .unwrap();
    }

    fn rows(keys: &[ArrayRef], values: &[ArrayRef]) -> Vec<String> {
        let k = keys[0].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let v = values[0].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        (0..k.len())
            .map(|i| {
                format!(
                    "{}={}",
                    k.value(i),
                    if v.is_null(i) {
                        "NULL".into()
                    } else {
                        v.value(i).to_string()
                    }
                )
            })
            .collect()
    }

    #[test]
    fn merged_partials_list_groups_in_first_seen_order_and_keep_nulls() {
        let specs = sum_of_v();
        // Rows 0..3 go to one partial table, rows 3..6 to another; key 9 first occurs in the
        // second (rows 3 and 4 arrived before row 5, the first of key 1 in the first table).
        let mut early = table(&specs);
        feed(&mut early, &specs, 0, &[(2, Some(1)), (2, Some(2))]);
        feed(&mut early, &specs, 5, &[(1, Some(7))]);
        let mut late = table(&specs);
        feed(&mut late, &specs, 3, &[(9, None), (2, Some(10))]);
        let (a, b) = (
            early.take_partials().unwrap(),
            late.take_partials().unwrap(),
        );
        assert!(early.is_empty() && late.is_empty());

        let mut merged = table(&specs);
        merged.merge(&a).unwrap();
        merged.merge(&b).unwrap();
        let (keys, values) = merged.finish().unwrap();
        // Key 9 saw only a NULL: its sum stays NULL after the merge.
        assert_eq!(rows(&keys, &values), ["2=13", "9=NULL", "1=7"]);

        // A finished table is empty and can be used again.
        assert!(merged.is_empty());
        feed(&mut merged, &specs, 10, &[(4, Some(1))]);
        let (keys, values) = merged.finish().unwrap();
        assert_eq!(rows(&keys, &values), ["4=1"]);
    }

    #[test]
    fn first_seen_order_places_or_sorts() {
        assert_eq!(first_seen_order(&[1, 5, 9]), None);
        // Dense numbers are placed directly, sparse ones sorted: the same order either way.
        assert_eq!(first_seen_order(&[12, 10, 11]), Some(vec![1, 2, 0]));
        assert_eq!(first_seen_order(&[1_000_000, 3, 70]), Some(vec![1, 2, 0]));
    }
}
