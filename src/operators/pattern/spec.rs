//! The configuration of a [`PatternMatcher`](super::PatternMatcher), as planning builds it:
//! the compiled pattern's variables and their conditions, what a match emits, and where the
//! next match starts.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use super::{Pattern, Ref};

/// Where the next match may start after one is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AfterMatch {
    /// After the match's last row (the default).
    PastLastRow,
    /// At the row after the match's first row.
    ToNextRow,
    /// At the first row mapped to the variable (or to a variable of the subset: indexes
    /// past the variables name [`PatternSpec::subsets`]).
    ToFirst(u16),
    /// At the last row mapped to the variable (or subset).
    ToLast(u16),
}

/// What a match returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowsPerMatch {
    /// One summary row per match (the default).
    One,
    /// Every row of every match (`ALL ROWS PER MATCH`).
    All(EmptyMatches),
}

/// What `ALL ROWS PER MATCH` does with empty matches and with rows in no match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmptyMatches {
    /// `SHOW EMPTY MATCHES` (the default): an empty match returns one row, the row it was
    /// found at, with its measures over no rows.
    Show,
    /// `OMIT EMPTY MATCHES`: an empty match returns nothing (it still takes a match number).
    Omit,
    /// `WITH UNMATCHED ROWS`: empty matches are shown, and every row that is in no match
    /// (and is not where an empty match was found) is returned once with NULL measures.
    WithUnmatched,
}

/// One column of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputColumn {
    /// The value of `Measures::exprs[i]` (NULL in an unmatched row).
    Measure(usize),
    /// The input column of the returned row (`ALL ROWS PER MATCH`).
    Input(usize),
    /// `timed_out`: true for a partial match that WITHIN ended (`EMIT TIMEOUT`).
    TimedOut,
}

/// The most match threads one partition may hold. Patterns such as `(a | b)*` without WITHIN
/// can fork without bound; past this the query fails with 53200 rather than exhausting memory.
pub const MAX_THREADS_PER_PARTITION: usize = crate::limits::MAX_PATTERN_THREADS;

/// The most rows one partition may hold: rows buffered for matches in progress, and rows
/// mapped by its open attempts (counted per attempt: `(a+)` without WITHIN starts an attempt
/// at every row, each mapping every later row). Past this the query fails with 53200.
pub const MAX_ROWS_PER_PARTITION: usize = crate::limits::MAX_PATTERN_ROWS;

/// A comparison between a column of the current row and a reference, such as
/// `b.pid = a.pid`, evaluated directly on the values (NULL on either side: false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Comparison {
    /// The input column.
    pub column: usize,
    /// `column <op> reference`.
    pub op: CompareOp,
    /// Index into the condition's references.
    pub reference: usize,
}

/// The operator of a [`Comparison`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CompareOp {
    pub(super) fn holds(self, a: &ScalarValue, b: &ScalarValue) -> bool {
        use std::cmp::Ordering::*;
        if a.is_null() || b.is_null() {
            return false;
        }
        match (self, a.partial_cmp(b)) {
            (_, None) => false,
            (CompareOp::Eq, Some(o)) => o == Equal,
            (CompareOp::NotEq, Some(o)) => o != Equal,
            (CompareOp::Lt, Some(o)) => o == Less,
            (CompareOp::LtEq, Some(o)) => o != Greater,
            (CompareOp::Gt, Some(o)) => o == Greater,
            (CompareOp::GtEq, Some(o)) => o != Less,
        }
    }
}

/// A `DEFINE` condition that reads earlier rows of the match: direct comparisons, then
/// (if any conjunct is not one) a predicate over a batch of reference values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CrossCondition {
    /// Conjuncts of the form `column <op> reference` on equal types.
    pub comparisons: Vec<Comparison>,
    /// The other conjuncts, evaluated over `schema`: the input columns, then one column per
    /// reference.
    pub predicate: Option<Arc<dyn PhysicalExpr>>,
    /// The references, in the order of their columns.
    pub refs: Vec<Ref>,
    /// Input fields followed by the reference fields.
    pub schema: SchemaRef,
}

/// One pattern variable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Variable {
    /// Its name, for EXPLAIN and errors.
    pub name: String,
    /// Conjuncts over the current row only (None: true).
    pub local: Option<Arc<dyn PhysicalExpr>>,
    /// Conjuncts that read earlier rows (None: true).
    pub cross: Option<CrossCondition>,
}

/// The output row of a match: references computed from its rows, then expressions over them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Measures {
    /// The references, in the order of the columns of `schema`.
    pub refs: Vec<Ref>,
    /// One field per reference.
    pub schema: SchemaRef,
    /// Expressions over `schema`.
    pub exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The output columns, in order.
    pub columns: Vec<OutputColumn>,
}

/// Everything the planner decides about a `MATCH_RECOGNIZE`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PatternSpec {
    /// The variables, numbered as in `pattern`.
    pub variables: Vec<Variable>,
    /// The row pattern.
    pub pattern: Pattern,
    /// Input columns whose values split the rows into independent partitions.
    pub partition_by: Vec<usize>,
    /// The input's event-time column.
    pub time_column: usize,
    /// Longest time from a match's first row to its last.
    pub within: Option<Duration>,
    /// `WITHIN ... EMIT TIMEOUT`: an attempt that WITHIN ends after it mapped a row returns
    /// its partial match (its most preferred thread's rows), marked in a `timed_out` column.
    pub emit_timeout: bool,
    /// `AFTER MATCH SKIP ...`.
    pub after_match: AfterMatch,
    /// `ONE ROW PER MATCH` or `ALL ROWS PER MATCH ...`.
    pub rows_per_match: RowsPerMatch,
    /// `SUBSET u = (a, b)`: each union variable's name and variables. A reference's
    /// variable `variables.len() + i` is subset `i`.
    pub subsets: Vec<(String, Vec<u16>)>,
    /// What a match emits.
    pub measures: Measures,
    /// Schema of the input rows.
    pub input_schema: SchemaRef,
    /// Schema of the output rows.
    pub schema: SchemaRef,
}
