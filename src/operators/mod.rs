//! Incremental operators over Arrow batches. Each continuous query is a chain of them; every
//! operator implements [`Operator`], keeps its state in Arrow-friendly form and can snapshot and
//! restore it.

pub mod aggregates;
pub mod change;
pub mod event_order;
pub mod evidence;
pub mod filter;
pub mod grouping_sets;
pub mod history;
pub mod interval_join;
pub mod invariant;
pub mod lookup;
pub mod outlier;
pub mod pattern;
pub mod project;
pub mod robust;
pub mod seasonal;
pub mod session_window;
pub mod sharded;
pub(crate) mod snapshot;
#[cfg(test)]
mod state_size;
pub mod suppress;
pub mod temporal_join;
#[cfg(test)]
mod test_run;
pub mod union;
pub mod window_aggregate;
pub mod window_assign;
pub mod window_rank;

use std::sync::Arc;

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_plan::PhysicalExpr;

use crate::error::{Error, Result};
use crate::time::Watermark;

pub use filter::Filter;
pub use history::History;
pub use invariant::Invariant;
pub use outlier::Outlier;
pub use pattern::PatternMatcher;
pub use project::Project;
pub use session_window::SessionWindow;
pub use sharded::Sharded;
pub use suppress::Suppress;
pub use window_aggregate::WindowAggregate;
pub use window_assign::WindowAssign;
pub use window_rank::WindowRank;

/// An incremental operator: consumes batches and watermarks, produces batches.
///
/// Contract:
/// - `process_batch` receives rows in arrival order; rows within the watermark bound may be out
///   of event-time order. It returns the rows it can emit at once (stateless operators emit
///   everything; windowed ones usually nothing).
/// - `on_watermark` is called with a watermark that never decreases. The operator emits every
///   result that the watermark completes (each window exactly once, in window-end order) and
///   may forget the state behind it. Rows that arrive later for a completed window are counted
///   in [`Operator::late_rows`] and dropped, never silently.
/// - `snapshot` captures all state so that `restore` on a freshly built operator of the same
///   spec continues exactly where the snapshot was taken. A stateless operator implements
///   neither `on_watermark`, `snapshot` nor `restore`: the defaults say it keeps nothing.
pub trait Operator: Send {
    /// A short name for EXPLAIN and metrics.
    fn name(&self) -> &'static str;
    /// The schema of the batches this operator emits.
    fn schema(&self) -> SchemaRef;
    /// Processes one batch of input rows.
    fn process_batch(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>>;
    /// Advances event time to `watermark` and emits what it completes. By default the
    /// operator holds nothing that time completes, and emits nothing.
    fn on_watermark(&mut self, _watermark: Watermark) -> Result<Vec<RecordBatch>> {
        Ok(vec![])
    }
    /// Takes the operator's state, to be encoded after the stream's lock is released (keep
    /// the work done here small). By default it has none: an empty snapshot.
    fn snapshot(&mut self) -> Result<snapshot::StateImage> {
        Ok(snapshot::StateImage::ready(vec![]))
    }
    /// Replaces the operator's state with a snapshot taken from an operator of the same plan.
    /// By default it has no state, and accepts only an empty snapshot.
    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        if snapshot.is_empty() {
            Ok(())
        } else {
            Err(Error::Internal(format!(
                "{} keeps no state, but its snapshot holds {} bytes",
                self.name(),
                snapshot.len()
            )))
        }
    }
    /// Reference table `table` changed: one statement's change, delivered in the stream's
    /// log order (between the batches and watermarks logged before and after it). Only an
    /// operator that keeps versions of a table (the temporal join) acts on it; by default
    /// it is ignored.
    fn table_change(&mut self, _table: &str, _change: &lookup::TableChange) -> Result<()> {
        Ok(())
    }
    /// Takes the state of another operator's snapshot whose state means the same as this
    /// one's would, though its spec differs (an altered query's: see
    /// [`crate::plan::carry`]); the input rows it holds become this one's by `rows`. By
    /// default an operator cannot.
    fn restore_carried(
        &mut self,
        _snapshot: &[u8],
        _rows: &dyn Fn(&[RecordBatch]) -> Result<Vec<RecordBatch>>,
    ) -> Result<()> {
        Err(Error::Internal(format!(
            "{} cannot take another operator's state",
            self.name()
        )))
    }
    /// Rows dropped because they arrived after their window was emitted.
    fn late_rows(&self) -> u64 {
        0
    }
    /// Result rows counted but not emitted because they repeated an alert (`SUPPRESS`).
    fn suppressed_rows(&self) -> u64 {
        0
    }
    /// An estimate of the bytes the operator's state holds (group tables, buffered rows,
    /// learned sets, ...), growing and shrinking with that state; the engine fails a query
    /// whose operators hold more than `--max-query-state-bytes` (53200). Called after every
    /// batch: keep it cheap (sizes the state already tracks, not a walk over every value).
    /// By default the operator keeps nothing.
    fn state_bytes(&self) -> usize {
        0
    }
    /// Expressions over the input whose values partition this operator's state: replicas
    /// that each see all rows of some of their values compute, together, what this operator
    /// computes alone (see [`Sharded`]). None if the state is not partitioned so.
    fn shard_keys(&self) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
        None
    }
    /// A stateless filter's predicate over its input. The operator graph may then evaluate
    /// the predicate itself, sharing its conjuncts with other filters, and keep the rows where
    /// it is true instead of calling `process_batch`.
    fn predicate(&self) -> Option<Arc<dyn PhysicalExpr>> {
        None
    }
    /// Processes the rows of `batch` where `selected` is true, as `process_batch` would
    /// process a batch of just those rows, when the operator can pick them out more cheaply
    /// than a filter copying every column (it reads only some). None: it cannot, and the
    /// caller filters the batch and calls `process_batch`.
    fn process_selected(
        &mut self,
        _batch: &RecordBatch,
        _selected: &BooleanArray,
    ) -> Option<Result<Vec<RecordBatch>>> {
        None
    }
    /// The output column (window_end, else window_start) in whose order `on_watermark` emits
    /// its rows, so that [`Sharded`] can keep that order when it merges its replicas' rows.
    fn emit_order(&self) -> Option<usize> {
        None
    }
}
