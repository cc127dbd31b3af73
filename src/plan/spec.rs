//! Operator specs: what the planner decided about each operator of a query, as a typed value
//! that can be compared and hashed. Two equal specs build operators that compute the same rows
//! from the same input, and EXPLAIN them alike. So the operator graph shares a node between
//! queries whose specs are equal, worker replicas and restarted operators are built from the
//! spec rather than by planning the SQL again, and EXPLAIN renders specs
//! ([`OperatorSpec::explain`], in [`crate::plan::explain`]).
//!
//! Physical expressions, schemas and scalar values compare by structure. A part without an
//! equality of its own is compared by what it was made from: aggregates by their logical
//! expressions over the input schema ([`Aggregates`]), outlier methods by the bits of their
//! parameters ([`Method`]). The SQL that EXPLAIN shows is kept as the logical or parsed
//! expressions it is rendered from, and those are compared too: two queries that differ only
//! in how they spell something (`v > 1 + 1` and `v > 2`) keep separate operators. Nothing is
//! compared as text.

use crate::error::sqlstate;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::logical_expr::Expr as LExpr;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::sql::sqlparser::ast as sq;

use super::query::WindowSpec;
use crate::error::{Error, Result};
use crate::operators::aggregates::AggregateSpec;
use crate::operators::grouping_sets::GroupingSetsAggregate;
use crate::operators::history::HistoryColumn;
use crate::operators::interval_join::{IntervalJoin, IntervalKind, JoinSide};
use crate::operators::invariant::{InvariantKind, Training};
use crate::operators::lookup::{LookupJoin, LookupKind, TableStore};
use crate::operators::outlier::OutlierMethod;
use crate::operators::pattern::PatternSpec;
use crate::operators::session_window::GroupColumn;
use crate::operators::temporal_join::{TemporalJoin, TemporalJoinConfig};
use crate::operators::window_aggregate::{WindowAssigner, WindowedInput};
use crate::operators::window_rank::Numbering;
use crate::operators::{
    Filter, History, Invariant, Operator, Outlier, PatternMatcher, Project, SessionWindow, Sharded,
    Suppress, WindowAggregate, WindowAssign, WindowRank,
};

/// One operator of a planned query: everything its constructor needs, and what EXPLAIN shows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OperatorSpec {
    /// `WHERE`, or an `OUTLIER` clause's `HAVING`.
    Filter(FilterSpec),
    /// A `SELECT` list.
    Project(ProjectSpec),
    /// `GROUP BY` over `TUMBLE`, `HOP` or `CUMULATE` windows.
    WindowAggregate(WindowAggregateSpec),
    /// A window table function without `GROUP BY`: each row with its windows' bounds.
    WindowAssign(WindowAssignSpec),
    /// `GROUP BY` over `SESSION` windows.
    SessionWindow(SessionWindowSpec),
    /// `LAG` and aggregates `OVER (...)`.
    History(HistorySpec),
    /// `ROW_NUMBER() OVER (PARTITION BY window_start, window_end ...)`: window Top-N.
    WindowRank(WindowRankSpec),
    /// `MATCH_RECOGNIZE` (boxed: it is by far the largest).
    Pattern(Box<MatchRecognizeSpec>),
    /// An `INVARIANT` clause.
    Invariant(InvariantSpec),
    /// An `OUTLIER` clause.
    Outlier(OutlierSpec),
    /// A `SUPPRESS` clause.
    Suppress(SuppressSpec),
    /// Replicas of a keyed operator, each owning a share of its keys (worker parallelism).
    Sharded(ShardedSpec),
    /// A join with a table, by its primary key (`JOIN`, `LEFT JOIN`, `IN`/`EXISTS`).
    LookupJoin(LookupJoinSpec),
    /// A join of two streams bounded by time (`JOIN`, `LEFT JOIN`, `NOT EXISTS`).
    IntervalJoin(IntervalJoinSpec),
}

/// An [`IntervalJoin`](crate::operators::interval_join::IntervalJoin) over the merge of two
/// streams.
#[derive(Debug, Clone)]
pub struct IntervalJoinSpec {
    /// Inner, left or anti.
    pub kind: IntervalKind,
    /// The merged rows: `__time`, `__side`, the left's columns, the right's.
    pub input: SchemaRef,
    /// Each side's columns and key.
    pub sides: [JoinSide; 2],
    /// `right.time - left.time` lies in `lower..=upper` (nanoseconds).
    pub lower: i64,
    /// See `lower`.
    pub upper: i64,
    /// The output rows.
    pub schema: SchemaRef,
    /// The join condition as planned (EXPLAIN shows it).
    pub condition: LExpr,
    /// The two inputs (streams, or the aliases of windows' rows).
    pub streams: [String; 2],
    /// A window join's window: both inputs are its rows or results, joined by window.
    pub window: Option<WindowSpec>,
}

impl PartialEq for IntervalJoinSpec {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.input == other.input
            && self.lower == other.lower
            && self.upper == other.upper
            && self.schema == other.schema
            && self.condition == other.condition
            && self.streams == other.streams
            && self.window == other.window
            && self
                .sides
                .iter()
                .zip(&other.sides)
                .all(|(a, b)| a.start == b.start && a.schema == b.schema && a.keys == b.keys)
    }
}

impl Eq for IntervalJoinSpec {}

impl Hash for IntervalJoinSpec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.lower.hash(state);
        self.upper.hash(state);
        self.schema.hash(state);
        self.condition.hash(state);
        self.streams.hash(state);
        self.window.hash(state);
    }
}

/// A [`LookupJoin`].
#[derive(Debug, Clone)]
pub struct LookupJoinSpec {
    /// The table's rows.
    pub table: Arc<TableStore>,
    /// The table's name (specs compare tables by it).
    pub table_name: String,
    /// What is emitted for a row.
    pub kind: LookupKind,
    /// One per key column, over `input`.
    pub probe: Vec<Arc<dyn PhysicalExpr>>,
    /// Over `joined`: what a matched pair must also satisfy.
    pub residual: Option<Arc<dyn PhysicalExpr>>,
    /// Schema of the rows in.
    pub input: SchemaRef,
    /// The input's columns followed by the table's.
    pub joined: SchemaRef,
    /// Schema of the rows out.
    pub schema: SchemaRef,
    /// The join condition as planned (EXPLAIN shows it).
    pub condition: Option<LExpr>,
    /// The relation that qualifies the stream's columns in `condition`.
    pub relation: String,
    /// `FOR SYSTEM_TIME AS OF`: a temporal join, reading the version valid at each row's
    /// event time instead of the table as it is.
    pub temporal: Option<TemporalSpec>,
}

/// What makes a [`LookupJoinSpec`] a temporal join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TemporalSpec {
    /// The input's event-time column (the stream's, named in `AS OF`).
    pub time: usize,
    /// The table's declared version-time column, if it has one.
    pub version_time: Option<usize>,
}

impl PartialEq for LookupJoinSpec {
    fn eq(&self, other: &Self) -> bool {
        self.table_name == other.table_name
            && Arc::ptr_eq(&self.table, &other.table)
            && self.kind == other.kind
            && self.probe == other.probe
            && match (&self.residual, &other.residual) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::eq(a, b),
                _ => false,
            }
            && self.input == other.input
            && self.joined == other.joined
            && self.schema == other.schema
            && self.condition == other.condition
            && self.relation == other.relation
            && self.temporal == other.temporal
    }
}

impl Eq for LookupJoinSpec {}

impl Hash for LookupJoinSpec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.table_name.hash(state);
        self.kind.hash(state);
        self.probe.hash(state);
        if let Some(r) = &self.residual {
            r.hash(state);
        }
        self.schema.hash(state);
        self.condition.hash(state);
        self.temporal.hash(state);
    }
}

/// A [`Filter`].
#[derive(Debug, Clone)]
pub struct FilterSpec {
    /// Rows for which this is true pass.
    pub predicate: Arc<dyn PhysicalExpr>,
    /// Schema of the rows, in and out.
    pub schema: SchemaRef,
    /// The condition as planned, before simplification (EXPLAIN shows it).
    pub condition: LExpr,
    /// The relation that qualifies the columns of `condition` (left out when shown).
    pub relation: String,
}

// Written out: a derived comparison of a bare `Arc<dyn PhysicalExpr>` field does not compile
// (rust-lang/rust#31740), and Hash must agree with it.
impl PartialEq for FilterSpec {
    fn eq(&self, other: &Self) -> bool {
        Arc::eq(&self.predicate, &other.predicate)
            && self.schema == other.schema
            && self.condition == other.condition
            && self.relation == other.relation
    }
}

impl Eq for FilterSpec {}

impl Hash for FilterSpec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.predicate.hash(state);
        self.schema.hash(state);
        self.condition.hash(state);
        self.relation.hash(state);
    }
}

/// A [`Project`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProjectSpec {
    /// One per output column, over `input`.
    pub exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// Schema of the input rows.
    pub input: SchemaRef,
    /// Schema of the output rows.
    pub schema: SchemaRef,
    /// The output columns as planned (EXPLAIN shows them).
    pub columns: Vec<LExpr>,
    /// The relation that qualifies the columns of `columns`.
    pub relation: String,
}

/// The aggregates of a windowed `GROUP BY`. DataFusion's aggregate expressions cannot be
/// compared or hashed, so these compare by the logical expressions they were planned from
/// and the schema those were planned against, which determine them.
#[derive(Debug, Clone)]
pub struct Aggregates {
    /// The aggregates as planned, before simplification (EXPLAIN shows them).
    pub exprs: Vec<LExpr>,
    /// The schema `exprs` read.
    pub input: SchemaRef,
    /// What `exprs` planned into, one per aggregate.
    pub planned: Vec<AggregateSpec>,
}

impl PartialEq for Aggregates {
    fn eq(&self, other: &Self) -> bool {
        self.exprs == other.exprs && self.input == other.input
    }
}

impl Eq for Aggregates {}

impl Hash for Aggregates {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.exprs.hash(state);
        self.input.hash(state);
    }
}

/// A [`WindowAggregate`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WindowAggregateSpec {
    /// `TUMBLE`, `HOP` or `CUMULATE`.
    pub window: WindowSpec,
    /// The stream's rows with the window columns, and its event-time column.
    pub input: WindowedInput,
    /// Group expressions over `input` (window_start and window_end among them); with
    /// grouping sets, the distinct expressions of all sets.
    pub group: Vec<Arc<dyn PhysicalExpr>>,
    /// `GROUPING SETS`, `ROLLUP` or `CUBE`: the members of each set, as indices into `group`;
    /// empty for a plain GROUP BY.
    pub grouping_sets: Vec<Vec<usize>>,
    /// The aggregates.
    pub aggregates: Aggregates,
    /// Schema of the output rows: group columns, (with grouping sets, `__grouping_id`,) then
    /// aggregates.
    pub schema: SchemaRef,
    /// The group expressions as planned (EXPLAIN shows them).
    pub keys: Vec<LExpr>,
    /// The relation that qualifies the columns of `keys` and of the aggregates.
    pub relation: String,
}

/// A [`WindowAssign`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WindowAssignSpec {
    /// `TUMBLE`, `HOP` or `CUMULATE`.
    pub window: WindowSpec,
    /// The stream's rows with the window columns (the output), and its event-time column.
    pub input: WindowedInput,
}

/// A [`SessionWindow`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionWindowSpec {
    /// Inactivity that closes a session.
    pub gap: Duration,
    /// The stream's rows with the window columns, and its event-time column.
    pub input: WindowedInput,
    /// Key expressions over `input` (the group expressions other than the window bounds).
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Where each output group column comes from.
    pub layout: Vec<GroupColumn>,
    /// The aggregates.
    pub aggregates: Aggregates,
    /// Schema of the output rows: group columns, then aggregates.
    pub schema: SchemaRef,
    /// The group expressions as planned (EXPLAIN shows them).
    pub group: Vec<LExpr>,
    /// The relation that qualifies the columns of `group` and of the aggregates.
    pub relation: String,
}

/// A [`History`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HistorySpec {
    /// The history columns.
    pub columns: Vec<HistoryColumn>,
    /// Partition expressions over `input`.
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// The input column history is ordered by.
    pub time_column: usize,
    /// Whether input arrives in time order (a windowed query's results).
    pub ordered: bool,
    /// Schema of the input rows.
    pub input: SchemaRef,
    /// Schema of the output rows: input columns, then history columns.
    pub schema: SchemaRef,
    /// The window functions as planned (EXPLAIN shows them).
    pub functions: Vec<LExpr>,
    /// Their `PARTITION BY` as planned.
    pub partition: Vec<LExpr>,
    /// The relation that qualifies the columns of `functions` and `partition`.
    pub relation: String,
}

/// A [`WindowRank`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WindowRankSpec {
    /// `PARTITION BY` over the input (window_start or window_end among them).
    pub partition: Vec<Arc<dyn PhysicalExpr>>,
    /// `ORDER BY` over the input, each with its direction and NULLS placement.
    pub order: Vec<(Arc<dyn PhysicalExpr>, SortOptions)>,
    /// The input column (window_end or window_start) that says when a window closed.
    pub time_column: usize,
    /// `n` of `WHERE rn <= n` above, if found: rows numbered past it are dropped early.
    pub limit: Option<u64>,
    /// Schema of the input rows.
    pub input: SchemaRef,
    /// Schema of the output rows: input columns, then the number.
    pub schema: SchemaRef,
    /// ROW_NUMBER, RANK or DENSE_RANK.
    pub numbering: Numbering,
    /// The `ROW_NUMBER() OVER (...)` as planned (EXPLAIN shows it).
    pub function: LExpr,
    /// The relation that qualifies the columns of `function`.
    pub relation: String,
}

/// A [`PatternMatcher`]: the planned pattern, and the clauses EXPLAIN shows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MatchRecognizeSpec {
    /// Everything the matcher is built from.
    pub matcher: PatternSpec,
    /// Each variable's `DEFINE` condition as written, if it has one.
    pub defines: Vec<Option<sq::Expr>>,
    /// `MEASURES` as written.
    pub measures: Vec<sq::Measure>,
    /// `WITHIN` as written.
    pub within: Option<sq::Expr>,
}

/// An [`Invariant`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InvariantSpec {
    /// A set or a range.
    pub kind: InvariantKind,
    /// The expressions whose values are learned, over the input.
    pub values: Vec<Arc<dyn PhysicalExpr>>,
    /// Those expressions as written: the violation column names them, EXPLAIN shows them.
    pub values_sql: Vec<sq::Expr>,
    /// The expressions whose values key what is learned (`PER`).
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Those expressions as written (EXPLAIN shows them).
    pub keys_sql: Vec<sq::Expr>,
    /// How long it learns.
    pub training: Training,
    /// How many training rows must show a value before it is learned (SET; 1 = all).
    pub min_support: u32,
    /// Whether it keeps learning after training.
    pub online: bool,
    /// The input column (window_end, or the event time) that places a row in or after
    /// training.
    pub time_column: usize,
    /// Whether the input is a windowed query's results, which arrive in time order.
    pub windowed: bool,
    /// Schema of the output rows: input columns, then `violation`.
    pub schema: SchemaRef,
}

/// An [`OutlierMethod`] that compares and hashes by the bits of its parameters (its `f64`s
/// have no `Eq`), so `NaN` equals itself and `0.0` differs from `-0.0`.
#[derive(Debug, Clone, Copy)]
pub struct Method(pub OutlierMethod);

impl Method {
    fn bits(&self) -> (u8, u64, u64) {
        match self.0 {
            OutlierMethod::Dbscan { eps, min_points } => (0, eps.to_bits(), min_points as u64),
            OutlierMethod::Kmeans { k, threshold } => (1, k as u64, threshold.to_bits()),
            OutlierMethod::Zscore { threshold } => (2, threshold.to_bits(), 0),
            OutlierMethod::Mad { threshold } => (3, threshold.to_bits(), 0),
            OutlierMethod::Iqr { factor } => (4, factor.to_bits(), 0),
        }
    }
}

impl PartialEq for Method {
    fn eq(&self, other: &Self) -> bool {
        self.bits() == other.bits()
    }
}

impl Eq for Method {}

impl Hash for Method {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bits().hash(state);
    }
}

/// An [`Outlier`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutlierSpec {
    /// How outliers are found.
    pub method: Method,
    /// Input columns that make up a point.
    pub on: Vec<usize>,
    /// Partition expressions over the input: `PARTITION BY`, then the window column if any.
    pub partition: Vec<Arc<dyn PhysicalExpr>>,
    /// `PARTITION BY` as written (EXPLAIN shows it).
    pub partition_sql: Vec<sq::Expr>,
    /// The window column (window_end, else window_start) that also partitions, if any.
    pub window_column: Option<usize>,
    /// Schema of the output rows: input columns, then `is_outlier` and `outlier_score`.
    pub schema: SchemaRef,
}

/// A [`Suppress`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SuppressSpec {
    /// How long after an emitted row the key's repeats are suppressed.
    pub interval: Duration,
    /// Key expressions over the input (`PER`); none: one key.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Those expressions as written (EXPLAIN shows them).
    pub keys_sql: Vec<sq::Expr>,
    /// The input column that gives a row's time.
    pub time_column: usize,
    /// Schema of the rows, in and out.
    pub schema: SchemaRef,
}

/// A [`Sharded`] operator: `workers` replicas of `inner`, split by its shard keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardedSpec {
    /// The operator each replica runs.
    pub inner: Box<OperatorSpec>,
    /// How many replicas.
    pub workers: usize,
}

impl OperatorSpec {
    /// A fresh operator with empty state.
    pub fn build(&self) -> Result<Box<dyn Operator>> {
        Ok(match self {
            OperatorSpec::Filter(s) => {
                Box::new(Filter::try_new(s.predicate.clone(), s.schema.clone())?)
            }
            OperatorSpec::Project(s) => {
                Box::new(Project::new(s.exprs.clone(), &s.input, s.schema.clone()))
            }
            OperatorSpec::WindowAggregate(s) => {
                let assigner = assigner(s.window)?;
                if !s.grouping_sets.is_empty() {
                    return grouping_sets(s, assigner);
                }
                Box::new(WindowAggregate::try_new(
                    assigner,
                    s.input.clone(),
                    s.group.clone(),
                    s.aggregates.planned.clone(),
                    s.schema.clone(),
                )?)
            }
            OperatorSpec::WindowAssign(s) => {
                Box::new(WindowAssign::new(assigner(s.window)?, s.input.clone()))
            }
            OperatorSpec::SessionWindow(s) => Box::new(SessionWindow::try_new(
                nanos(s.gap)?,
                s.input.clone(),
                s.keys.clone(),
                s.layout.clone(),
                s.aggregates.planned.clone(),
                s.schema.clone(),
            )?),
            OperatorSpec::History(s) => Box::new(History::new(
                s.columns.clone(),
                s.partition_by.clone(),
                s.time_column,
                s.ordered,
                s.input.clone(),
                s.schema.clone(),
            )),
            OperatorSpec::WindowRank(s) => Box::new(
                WindowRank::try_new(
                    s.partition.clone(),
                    s.order.clone(),
                    s.time_column,
                    s.limit,
                    s.input.clone(),
                    s.schema.clone(),
                )?
                .with_numbering(s.numbering),
            ),
            OperatorSpec::Pattern(s) => Box::new(PatternMatcher::try_new(s.matcher.clone())?),
            OperatorSpec::Invariant(s) => Box::new(Invariant::try_new(
                s.kind,
                s.values.clone(),
                s.values_sql.iter().map(ToString::to_string).collect(),
                s.keys.clone(),
                s.training,
                s.min_support,
                s.online,
                s.time_column,
                s.schema.clone(),
            )?),
            OperatorSpec::Outlier(s) => Box::new(Outlier::new(
                s.method.0,
                s.on.clone(),
                s.partition.clone(),
                s.schema.clone(),
            )),
            OperatorSpec::Suppress(s) => Box::new(Suppress::try_new(
                crate::time::duration_nanos(s.interval),
                s.keys.clone(),
                s.time_column,
                s.schema.clone(),
            )?),
            OperatorSpec::LookupJoin(
                s @ LookupJoinSpec {
                    temporal: Some(t), ..
                },
            ) => Box::new(TemporalJoin::try_new(TemporalJoinConfig {
                table: s.table.clone(),
                kind: s.kind,
                probe: s.probe.clone(),
                residual: s.residual.clone(),
                input: s.input.clone(),
                time: t.time,
                version_time: t.version_time,
                joined: s.joined.clone(),
            })?),
            OperatorSpec::LookupJoin(s) => Box::new(LookupJoin::new(
                s.table.clone(),
                s.kind,
                s.probe.clone(),
                s.residual.clone(),
                s.joined.clone(),
                s.schema.clone(),
            )?),
            OperatorSpec::IntervalJoin(s) => Box::new(IntervalJoin::try_new(
                s.kind,
                s.input.clone(),
                s.sides.clone(),
                s.lower,
                s.upper,
                s.schema.clone(),
            )?),
            OperatorSpec::Sharded(s) => {
                let replicas = (0..s.workers)
                    .map(|_| s.inner.build())
                    .collect::<Result<Vec<_>>>()?;
                let keys = replicas
                    .first()
                    .and_then(|r| r.shard_keys())
                    .ok_or_else(|| {
                        Error::Internal(format!("{} has no shard keys", s.inner.name()))
                    })?;
                Box::new(Sharded::try_new(replicas, keys)?)
            }
        })
    }

    /// Whether the operator keeps no state and handles each row on its own (Filter,
    /// Project, WindowAssign), so that it may follow a sharded operator whose rows arrive split and
    /// reordered.
    pub fn is_stateless(&self) -> bool {
        matches!(
            self,
            OperatorSpec::Filter(_)
                | OperatorSpec::Project(_)
                | OperatorSpec::WindowAssign(_)
                | OperatorSpec::LookupJoin(LookupJoinSpec { temporal: None, .. })
        )
    }

    /// The operator's name, as EXPLAIN and metrics show it.
    pub fn name(&self) -> &'static str {
        match self {
            OperatorSpec::Filter(_) => "Filter",
            OperatorSpec::Project(_) => "Project",
            OperatorSpec::WindowAggregate(_) => "WindowAggregate",
            OperatorSpec::WindowAssign(_) => "WindowAssign",
            OperatorSpec::SessionWindow(_) => "SessionWindow",
            OperatorSpec::History(_) => "History",
            OperatorSpec::WindowRank(_) => "WindowTopN",
            OperatorSpec::Pattern(_) => "MatchRecognize",
            OperatorSpec::Invariant(_) => "Invariant",
            OperatorSpec::Outlier(_) => "Outlier",
            OperatorSpec::Suppress(_) => "Suppress",
            OperatorSpec::Sharded(s) => s.inner.name(),
            OperatorSpec::LookupJoin(s) if s.temporal.is_some() => "TemporalJoin",
            OperatorSpec::LookupJoin(_) => "LookupJoin",
            OperatorSpec::IntervalJoin(_) => "IntervalJoin",
        }
    }

    /// `workers` replicas of this operator, each owning a share of its keys.
    pub fn sharded(self, workers: usize) -> OperatorSpec {
        OperatorSpec::Sharded(ShardedSpec {
            inner: Box::new(self),
            workers,
        })
    }
}

/// One window aggregate per grouping set, merged.
fn grouping_sets(s: &WindowAggregateSpec, assigner: WindowAssigner) -> Result<Box<dyn Operator>> {
    let keys = s.group.len();
    let fields = s.schema.fields();
    let mut aggregates = Vec::with_capacity(s.grouping_sets.len());
    for set in &s.grouping_sets {
        let mut own: Vec<_> = set.iter().map(|&i| fields[i].clone()).collect();
        own.extend(fields[keys + 1..].iter().cloned());
        aggregates.push(WindowAggregate::try_new(
            assigner,
            s.input.clone(),
            set.iter().map(|&i| s.group[i].clone()).collect(),
            s.aggregates.planned.clone(),
            Arc::new(datafusion::arrow::datatypes::Schema::new(own)),
        )?);
    }
    Ok(Box::new(GroupingSetsAggregate::try_new(
        aggregates,
        &s.grouping_sets,
        keys,
        s.schema.clone(),
    )?))
}

/// How a TUMBLE, HOP or CUMULATE window places rows.
fn assigner(window: WindowSpec) -> Result<WindowAssigner> {
    Ok(match window {
        WindowSpec::Tumble { size } => WindowAssigner::tumble(nanos(size)?),
        WindowSpec::Hop { slide, size } => WindowAssigner::hop(nanos(slide)?, nanos(size)?),
        WindowSpec::Cumulate { step, size } => WindowAssigner::cumulate(nanos(step)?, nanos(size)?),
        WindowSpec::Session { .. } => {
            return Err(Error::Internal(
                "fixed windows planned over SESSION windows".into(),
            ))
        }
    })
}

/// A window size, slide or gap in nanoseconds; it must be positive.
fn nanos(d: Duration) -> Result<i64> {
    let n = crate::time::duration_nanos(d);
    if n <= 0 {
        return Err(Error::plan(
            sqlstate::INVALID_PARAMETER_VALUE,
            "window size, slide and gap must be positive",
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::collections::BTreeSet;
    use std::hash::{Hash, Hasher};
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};
    use datafusion::arrow::record_batch::RecordBatch;

    use super::*;
    use crate::plan::{Catalog, QueryPlan};
    use crate::time::{EventTime, Watermark};

    const SEC: i64 = 1_000_000_000;

    /// Together they plan every kind of operator.
    const QUERIES: &[&str] = &[
        "SELECT host, v * 2 AS w FROM s WHERE v > 1 AND host <> 'x'",
        "SELECT host, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
         WHERE v > 1 GROUP BY host, window_start, window_end",
        "SELECT k, window_end, COUNT(DISTINCT v) AS d \
         FROM HOP(s, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) \
         GROUP BY k, window_start, window_end",
        "SELECT k, window_start, window_end, COUNT(*) AS n \
         FROM SESSION(s, ts, INTERVAL '2' SECOND) GROUP BY k, window_start, window_end",
        "SELECT k, ts, v, LAG(v, 1, 0) OVER (PARTITION BY k ORDER BY ts) AS prev, \
         AVG(v) OVER (PARTITION BY k ORDER BY ts ROWS 2 PRECEDING) AS recent FROM s",
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts \
         MEASURES FIRST(a.ts) AS t0, COUNT(*) AS n PATTERN (a b+) \
         WITHIN INTERVAL '10' SECOND DEFINE a AS v < 3, b AS b.v > a.v)",
        "SELECT ts, k, v FROM s INVARIANT SET (v) PER (k) TRAINING INTERVAL '20' SECOND ONLINE",
        "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
         GROUP BY k, window_start, window_end OUTLIER ZSCORE(1) ON (total) HAVING is_outlier",
        "SELECT ts, k, v FROM s WHERE v > 1 SUPPRESS FOR INTERVAL '10' SECOND PER (k)",
    ];

    fn plan(sql: &str) -> QueryPlan {
        let catalog = Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, k BIGINT, v BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        )
        .unwrap();
        crate::plan(&format!("CREATE CONTINUOUS QUERY q AS {sql}"), &catalog)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn hash(spec: &OperatorSpec) -> u64 {
        let mut h = DefaultHasher::new();
        spec.hash(&mut h);
        h.finish()
    }

    /// The operator of the first spec where two plans differ, if any.
    fn first_difference(a: &QueryPlan, b: &QueryPlan) -> Option<&'static str> {
        a.specs
            .iter()
            .zip(&b.specs)
            .find(|(x, y)| x != y)
            .map(|(x, _)| x.name())
    }

    fn batch(schema: SchemaRef) -> RecordBatch {
        let rows: [(i64, &str, i64, i64); 12] = [
            (0, "a", 1, 1),
            (1, "b", 2, 5),
            (2, "a", 1, 2),
            (3, "b", 2, 1),
            (4, "a", 1, 7),
            (5, "c", 3, 4),
            (11, "a", 1, 3),
            (12, "b", 2, 9),
            (13, "c", 3, 2),
            (25, "a", 1, 8),
            (26, "b", 2, 1),
            (40, "a", 1, 10),
        ];
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    rows.iter().map(|r| r.0 * SEC),
                )),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
            ],
        )
        .unwrap()
    }

    /// Runs `batch` through a chain of operators, then a watermark past all of it.
    fn run(mut ops: Vec<Box<dyn Operator>>, batch: RecordBatch) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        let mut pass = |ops: &mut [Box<dyn Operator>], from: usize, batches: Vec<RecordBatch>| {
            let mut batches = batches;
            for op in ops[from..].iter_mut() {
                let mut next = Vec::new();
                for b in batches {
                    next.extend(op.process_batch(b).unwrap());
                }
                batches = next;
            }
            out.extend(batches);
        };
        pass(&mut ops, 0, vec![batch]);
        let end = Watermark(EventTime(100 * SEC));
        for i in 0..ops.len() {
            let emitted = ops[i].on_watermark(end).unwrap();
            pass(&mut ops, i + 1, emitted);
        }
        out
    }

    #[test]
    fn the_same_query_planned_twice_gives_equal_specs() {
        let mut kinds = BTreeSet::new();
        for sql in QUERIES {
            let (a, b) = (plan(sql), plan(sql));
            assert_eq!(a.specs, b.specs, "{sql}");
            for (x, y) in a.specs.iter().zip(&b.specs) {
                assert_eq!(hash(x), hash(y), "{sql}");
                kinds.insert(x.name());
            }
        }
        let all = [
            "Filter",
            "Project",
            "WindowAggregate",
            "SessionWindow",
            "History",
            "MatchRecognize",
            "Invariant",
            "Outlier",
            "Suppress",
        ];
        assert_eq!(kinds, all.into_iter().collect());
        // Spacing, keyword case and the query's name are not part of what it computes.
        let lower = plan("select host,   v * 2 as w from s\n where v > 1 and host <> 'x'");
        assert_eq!(lower.specs, plan(QUERIES[0]).specs);
    }

    #[test]
    fn queries_that_compute_different_things_get_unequal_specs() {
        let tumble = |body: &str| {
            format!(
                "SELECT host, k, window_end, {body} FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
                 WHERE v > 1 GROUP BY host, k, window_start, window_end"
            )
        };
        let pattern = |define_b: &str| {
            format!(
                "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts \
                 MEASURES COUNT(*) AS n PATTERN (a b+) DEFINE a AS v < 3, b AS {define_b})"
            )
        };
        let cases: Vec<(String, String, &str)> = vec![
            // A constant.
            (
                "SELECT host FROM s WHERE v > 1".into(),
                "SELECT host FROM s WHERE v > 2".into(),
                "Filter",
            ),
            // A window size.
            (
                tumble("SUM(v) AS x"),
                tumble("SUM(v) AS x").replace("'10'", "'20'"),
                "WindowAggregate",
            ),
            // An aggregate, under the same name.
            (
                tumble("SUM(v) AS x"),
                tumble("MAX(v) AS x"),
                "WindowAggregate",
            ),
            (
                tumble("COUNT(v) AS x"),
                tumble("COUNT(DISTINCT v) AS x"),
                "WindowAggregate",
            ),
            // The order of the keys (the same result columns, in another group layout).
            (
                tumble("SUM(v) AS x"),
                tumble("SUM(v) AS x").replace("BY host, k,", "BY k, host,"),
                "WindowAggregate",
            ),
            // A pattern's DEFINE.
            (
                pattern("b.v > a.v"),
                pattern("b.v >= a.v"),
                "MatchRecognize",
            ),
            // A history offset.
            (
                "SELECT k, ts, LAG(v, 1) OVER (PARTITION BY k ORDER BY ts) AS p FROM s".into(),
                "SELECT k, ts, LAG(v, 2) OVER (PARTITION BY k ORDER BY ts) AS p FROM s".into(),
                "History",
            ),
            // An outlier method's parameter.
            (
                QUERIES[7].into(),
                QUERIES[7].replace("ZSCORE(1)", "ZSCORE(2)"),
                "Outlier",
            ),
            // An invariant's training.
            (
                QUERIES[6].into(),
                QUERIES[6].replace("'20'", "'30'"),
                "Invariant",
            ),
            // A suppression's interval and key.
            (
                QUERIES[8].into(),
                QUERIES[8].replace("'10'", "'11'"),
                "Suppress",
            ),
            (
                QUERIES[8].into(),
                QUERIES[8].replace("PER (k)", "PER (v)"),
                "Suppress",
            ),
        ];
        for (a, b, differs) in &cases {
            let (pa, pb) = (plan(a), plan(b));
            assert_ne!(pa.specs, pb.specs, "{a}\n{b}");
            assert_eq!(first_difference(&pa, &pb), Some(*differs), "{a}\n{b}");
        }
    }

    #[test]
    fn equal_specs_explain_alike() {
        let mut sql: Vec<String> = QUERIES.iter().map(|q| q.to_string()).collect();
        // Same leading operators as some of the queries above, then others.
        sql.push("SELECT host FROM s WHERE v > 1 AND host <> 'x'".into());
        sql.push(
            "SELECT host, window_end, MAX(v) AS top FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
             WHERE v > 1 GROUP BY host, window_start, window_end"
                .into(),
        );
        // Spelled differently, computing the same: kept apart, and explained apart.
        sql.push("SELECT host FROM s WHERE v > 1 + 1".into());
        sql.push("SELECT host FROM s WHERE v > 2".into());
        let specs: Vec<OperatorSpec> = sql.iter().chain(&sql).flat_map(|q| plan(q).specs).collect();
        let mut equal_pairs = 0;
        for x in &specs {
            for y in &specs {
                if x == y {
                    equal_pairs += 1;
                    assert_eq!(hash(x), hash(y));
                    assert_eq!(x.explain(), y.explain(), "{x:?}");
                }
            }
        }
        assert!(
            equal_pairs > specs.len(),
            "some specs of different queries are equal"
        );
        let (a, b) = (plan(&sql[sql.len() - 2]), plan(&sql[sql.len() - 1]));
        assert_ne!(a.specs[0], b.specs[0]);
        assert_ne!(a.specs[0].explain(), b.specs[0].explain());
    }

    #[test]
    fn operators_built_twice_from_one_spec_compute_alike() {
        for sql in QUERIES {
            let p = plan(sql);
            let input = batch(p.stream.schema.clone());
            let first = run(p.build_operators().unwrap(), input.clone());
            let second = run(p.build_operators().unwrap(), input.clone());
            assert!(first.iter().any(|b| b.num_rows() > 0), "{sql}: no output");
            assert_eq!(first, second, "{sql}");
        }
        // Replicas too, built from the spec they shard.
        let p = plan(QUERIES[3]);
        let sharded = p.specs[0].clone().sharded(3);
        let input = batch(p.stream.schema.clone());
        let build = || vec![sharded.build().unwrap()];
        assert_eq!(run(build(), input.clone()), run(build(), input));
    }
}
