//! Shared work across the queries of a stream (SAQL's master-dependent queries, generalised):
//! the operator chains of all queries on a stream form one tree. Queries whose chains begin
//! with the same operators (equal [`OperatorSpec`]s: same expressions, keys, windows and
//! schemas) share those nodes, so an identical predicate or projection is evaluated once per
//! batch and an identical window aggregate is computed once, however many queries use it.
//! Each query is a path from a root to the node that produces its results.
//!
//! A query attached to existing nodes shares their state as it stands (e.g. a window already
//! half full); the nodes it adds start empty. Batches flow depth-first, so every query sees
//! its results in the order its own chain would produce them.
//!
//! The node that produces a query's results holds the query's [`OutputHandle`] and delivers
//! to it directly; a failing node fails the outputs of every query below it.

use std::collections::VecDeque;
use std::time::Instant;

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::operators::filter;
use crate::operators::lookup::TableChange;
use crate::operators::Operator;
use crate::plan::rollup::rollup;
use crate::plan::OperatorSpec;
use crate::runtime::core::output::{OutputHandle, QueryFailure, QueryOutput};
use crate::runtime::core::predicates::{AtomValues, SharedPredicates, SplitPredicate};
use crate::time::Watermark;

struct Node {
    /// What the operator computes; equal specs under one parent compute the same.
    spec: OperatorSpec,
    op: Box<dyn Operator>,
    children: Vec<usize>,
    /// Queries whose results are this node's output, with where those results go.
    sinks: Vec<(String, OutputHandle)>,
    /// Queries whose path runs through this node.
    users: usize,
    failed: bool,
    /// A root filter's predicate, split into atoms shared with the other root filters.
    split: Option<SplitPredicate>,
    /// For a root: what running a batch through its subtree has cost lately, and what
    /// advancing its subtree's watermark has (how the roots are spread over threads).
    cost: Cost,
}

/// Recent time a root's subtree took, per batch row and per watermark advance (moving
/// averages, in nanoseconds).
#[derive(Default, Clone, Copy)]
pub(super) struct Cost {
    pub(super) per_row: f64,
    pub(super) per_advance: f64,
}

impl Cost {
    pub(super) fn update(average: &mut f64, sample: f64) {
        *average = if *average == 0.0 {
            sample
        } else {
            0.8 * *average + 0.2 * sample
        };
    }
}

/// Work below this many nanoseconds (as the roots' recent costs predict it) runs on the
/// calling thread: starting a thread costs tens of microseconds.
const PARALLEL_NANOS: f64 = 200_000.0;

/// The nodes of a graph by id (`None` where a node was dropped, or where it lives in another
/// part while the graph's subtrees run on several threads).
#[derive(Default)]
struct Nodes(Vec<Option<Node>>);

/// The operator tree of one stream's queries.
#[derive(Default)]
pub struct OperatorGraph {
    nodes: Nodes,
    roots: Vec<usize>,
    /// Queries without operators: their results are the stream's rows.
    passthrough: Vec<(String, OutputHandle)>,
    /// The atoms of the root filters' predicates, each evaluated once per batch.
    predicates: SharedPredicates,
    /// Threads the roots' subtrees may run on at once (queries that share no operator are
    /// independent: each query's results keep their order whichever thread runs it).
    workers: usize,
    /// Predicted work (nanoseconds) from which the roots run on several threads.
    parallel_nanos: f64,
}

impl OperatorGraph {
    /// Adds a query's operators, sharing every leading operator whose spec equals one that an
    /// existing path already runs there (unless `share` is false: a backfilled query brings
    /// its own state); builds the others from their specs and advances them to `watermark`.
    /// The query's results go to `output`. Returns the query's path of node ids.
    pub fn attach(
        &mut self,
        query: &str,
        specs: Vec<OperatorSpec>,
        watermark: Watermark,
        output: OutputHandle,
        share: bool,
    ) -> Result<Vec<usize>> {
        let mut path = Vec::new();
        let mut parent: Option<usize> = None;
        let mut fresh = !share;
        let mut specs: VecDeque<OperatorSpec> = specs.into();
        while let Some(spec) = specs.pop_front() {
            let siblings = match parent {
                None => &self.roots,
                Some(p) => &self.node(p).children,
            };
            let existing = if fresh {
                None
            } else {
                siblings.iter().copied().find(|&id| {
                    let n = self.node(id);
                    n.spec == spec && !n.failed
                })
            };
            // A larger window computed from a smaller one's results, where one runs here.
            if existing.is_none() && !fresh {
                let smaller = siblings.iter().copied().find_map(|id| {
                    let n = self.node(id);
                    match (&n.spec, &spec) {
                        (OperatorSpec::WindowAggregate(base), OperatorSpec::WindowAggregate(t))
                            if !n.failed =>
                        {
                            rollup(base, t).map(|r| (id, r))
                        }
                        _ => None,
                    }
                });
                if let Some((id, rolled)) = smaller {
                    self.node_mut(id).users += 1;
                    path.push(id);
                    parent = Some(id);
                    specs.push_front(rolled);
                    continue;
                }
            }
            let id = match existing {
                Some(id) => id,
                None => {
                    fresh = true;
                    let mut op = match spec.build() {
                        Ok(op) => op,
                        Err(e) => {
                            // Leave the graph as it was.
                            self.detach(query, &path);
                            return Err(e);
                        }
                    };
                    if watermark > Watermark::START {
                        // A fresh operator holds nothing for the watermark to complete.
                        let _ = op.on_watermark(watermark);
                    }
                    let split = match (parent, op.predicate()) {
                        (None, Some(predicate)) => self.predicates.register(&predicate),
                        _ => None,
                    };
                    let id = self.insert(Node {
                        spec,
                        op,
                        children: Vec::new(),
                        sinks: Vec::new(),
                        users: 0,
                        failed: false,
                        split,
                        cost: Cost::default(),
                    });
                    match parent {
                        None => self.roots.push(id),
                        Some(p) => self.node_mut(p).children.push(id),
                    }
                    id
                }
            };
            self.node_mut(id).users += 1;
            path.push(id);
            parent = Some(id);
        }
        let sink = (query.to_string(), output);
        match path.last() {
            Some(&last) => self.node_mut(last).sinks.push(sink),
            None => self.passthrough.push(sink),
        }
        Ok(path)
    }

    /// Removes a query; nodes no other query uses are dropped with their state.
    pub fn detach(&mut self, query: &str, path: &[usize]) {
        self.passthrough.retain(|(q, _)| q != query);
        if let Some(&last) = path.last() {
            self.node_mut(last).sinks.retain(|(q, _)| q != query);
        }
        for (i, &id) in path.iter().enumerate().rev() {
            let n = self.node_mut(id);
            n.users -= 1;
            if n.users == 0 {
                if let Some(split) = self.nodes.0[id].take().and_then(|n| n.split) {
                    self.predicates.release(&split);
                }
                match i.checked_sub(1).map(|p| path[p]) {
                    None => self.roots.retain(|&r| r != id),
                    Some(p) => self.node_mut(p).children.retain(|&c| c != id),
                }
            }
        }
    }

    /// The first operator on `path` that keeps state across rows and was built for it alone
    /// (no other query uses it), other than those in `carried`: for an altered query, an
    /// operator that starts empty.
    pub fn first_fresh_stateful(&self, path: &[usize], carried: &[usize]) -> Option<&'static str> {
        path.iter()
            .filter(|id| !carried.contains(id))
            .map(|&id| self.node(id))
            .find_map(|n| (n.users == 1 && !n.spec.is_stateless()).then(|| n.spec.name()))
    }

    /// The spec of node `id`.
    pub fn spec(&self, id: usize) -> &OperatorSpec {
        &self.node(id).spec
    }

    /// The schema of the rows node `id` emits.
    pub fn output_schema(&self, id: usize) -> datafusion::arrow::datatypes::SchemaRef {
        self.node(id).op.schema()
    }

    /// Gives node `to` the state of node `from`, whose state means the same (see
    /// [`crate::plan::carry`]): the input rows `from` holds become `to`'s by `rows`.
    pub fn carry_state(
        &mut self,
        from: usize,
        to: usize,
        rows: &dyn Fn(&[RecordBatch]) -> Result<Vec<RecordBatch>>,
    ) -> Result<()> {
        let image = self.node_mut(from).op.snapshot()?.encode()?;
        self.node_mut(to).op.restore_carried(&image, rows)
    }

    /// Delivers the results of query `from` (whose path is `path`) as query `to`'s.
    pub fn rename_sink(&mut self, path: &[usize], from: &str, to: &str) {
        let sinks = match path.last() {
            Some(&last) => &mut self.node_mut(last).sinks,
            None => &mut self.passthrough,
        };
        for (q, _) in sinks.iter_mut().filter(|(q, _)| q == from) {
            *q = to.to_string();
        }
    }

    /// The state of node `id`, for a checkpoint.
    pub fn snapshot_node(
        &mut self,
        id: usize,
    ) -> crate::error::Result<crate::operators::snapshot::StateImage> {
        self.node_mut(id).op.snapshot()
    }

    /// Restores node `id` from a checkpoint's snapshot of the same operator.
    pub fn restore_node(&mut self, id: usize, snapshot: &[u8]) -> crate::error::Result<()> {
        self.node_mut(id).op.restore(snapshot)
    }

    /// Rows dropped as late along a path.
    pub fn late_rows(&self, path: &[usize]) -> u64 {
        path.iter().map(|&id| self.node(id).op.late_rows()).sum()
    }

    /// Result rows suppressed as repeats along a path.
    pub fn suppressed_rows(&self, path: &[usize]) -> u64 {
        path.iter()
            .map(|&id| self.node(id).op.suppressed_rows())
            .sum()
    }

    /// Bytes of state held by the operators along a path (failed ones hold none).
    pub fn state_bytes(&self, path: &[usize]) -> usize {
        path.iter()
            .map(|&id| self.node(id))
            .filter(|n| !n.failed)
            .map(|n| n.op.state_bytes())
            .sum()
    }

    /// Stops the query whose path is `path` with `error`: from its first operator that no
    /// other query uses on (or, when it shares every operator, at its last, whose every
    /// query holds at least as much state), so that queries sharing its leading operators
    /// run on. The stopped operators' state is released.
    pub fn fail_path(&mut self, path: &[usize], error: Error) {
        let at = path
            .iter()
            .copied()
            .find(|&id| self.node(id).users == 1)
            .or(path.last().copied());
        if let Some(id) = at {
            self.nodes.fail(id, error);
        }
    }

    /// Reference table `table` changed: the operators that keep its versions take the
    /// change (the others ignore it); one that fails fails its queries.
    pub fn table_change(&mut self, table: &str, change: &TableChange) {
        for id in 0..self.nodes.0.len() {
            let Some(node) = self.nodes.0[id].as_mut() else {
                continue;
            };
            if node.failed {
                continue;
            }
            if let Err(e) = node.op.table_change(table, change) {
                self.nodes.fail(id, e);
            }
        }
    }

    /// Threads the queries' operators may run on at once (1 unless set).
    pub fn set_workers(&mut self, workers: usize) {
        self.workers = workers.max(1);
        self.parallel_nanos = PARALLEL_NANOS;
    }

    /// Feeds a batch of the stream's rows to every query.
    pub fn process(&mut self, batch: &RecordBatch) {
        self.process_with(batch, Vec::new());
    }

    /// Feeds a batch of the stream's rows to every query, and runs `side` (work of the
    /// stream outside this graph: the unions it feeds) on the same threads as the queries.
    pub fn process_with(&mut self, batch: &RecordBatch, side: Vec<SideJob<'_>>) {
        for (_, output) in &self.passthrough {
            QueryOutput::lock(output).deliver(std::slice::from_ref(batch));
        }
        let atoms = (!self.predicates.is_empty()).then(|| self.predicates.evaluate(batch));
        let rows = batch.num_rows() as f64;
        let predicates = &self.predicates;
        each_root(
            &mut self.nodes,
            &self.roots,
            side,
            (self.workers, self.parallel_nanos),
            |cost| cost.per_row * rows,
            |cost, spent| Cost::update(&mut cost.per_row, spent / rows.max(1.0)),
            |nodes, root| match &atoms {
                Some(atoms) if nodes.node(root).split.is_some() => {
                    nodes.select(root, batch, atoms, predicates)
                }
                _ => nodes.push(root, vec![batch.clone()]),
            },
        );
    }

    /// Advances every node to `watermark`; what a node emits passes through its subtree
    /// before its children advance.
    pub fn advance(&mut self, watermark: Watermark) {
        self.advance_with(watermark, Vec::new());
    }

    /// Advances every node to `watermark`, running `side` on the same threads (see
    /// [`OperatorGraph::process_with`]).
    pub fn advance_with(&mut self, watermark: Watermark, side: Vec<SideJob<'_>>) {
        each_root(
            &mut self.nodes,
            &self.roots,
            side,
            (self.workers, self.parallel_nanos),
            |cost| cost.per_advance,
            |cost, spent| Cost::update(&mut cost.per_advance, spent),
            |nodes, root| nodes.advance_node(root, watermark),
        );
    }

    fn insert(&mut self, node: Node) -> usize {
        let nodes = &mut self.nodes.0;
        match nodes.iter().position(Option::is_none) {
            Some(id) => {
                nodes[id] = Some(node);
                id
            }
            None => {
                nodes.push(Some(node));
                nodes.len() - 1
            }
        }
    }

    fn node(&self, id: usize) -> &Node {
        self.nodes.node(id)
    }

    fn node_mut(&mut self, id: usize) -> &mut Node {
        self.nodes.node_mut(id)
    }
}

/// Work outside a graph that runs on the threads of its roots (each thread takes roots and
/// side jobs by their predicted cost alike), e.g. feeding the unions that read the stream.
pub struct SideJob<'a> {
    /// What it is expected to cost, in nanoseconds.
    pub predicted: f64,
    /// The work; it measures and learns its own cost.
    pub run: Box<dyn FnOnce() + Send + 'a>,
}

/// One thread's share: its roots' subtrees (moved into a `Nodes` of its own) and side jobs.
struct Share<'a> {
    nodes: Nodes,
    roots: Vec<usize>,
    side: Vec<SideJob<'a>>,
}

/// Runs `work` on every root's subtree, and the `side` jobs: on the calling thread, or, when
/// there are several workers and the recent costs (`predict` for the roots) reach
/// `parallel_nanos`, on up to `workers` threads at once, each taking a share of the roots and
/// side jobs (the most costly first, each to the least loaded thread), roots with their
/// subtrees moved to it. Each root's time is measured and kept (`learn`).
fn each_root(
    nodes: &mut Nodes,
    roots: &[usize],
    side: Vec<SideJob<'_>>,
    (workers, parallel_nanos): (usize, f64),
    predict: impl Fn(&Cost) -> f64,
    learn: impl Fn(&mut Cost, f64) + Sync,
    work: impl Fn(&mut Nodes, usize) + Sync,
) {
    let run_roots = |nodes: &mut Nodes, roots: &[usize]| {
        for &root in roots {
            let started = Instant::now();
            work(nodes, root);
            let spent = started.elapsed().as_nanos() as f64;
            learn(&mut nodes.node_mut(root).cost, spent);
        }
    };
    // Roots first (index < roots.len()), then side jobs.
    let predicted: Vec<f64> = roots
        .iter()
        .map(|&r| predict(&nodes.node(r).cost))
        .chain(side.iter().map(|j| j.predicted))
        .collect();
    let threads = workers.min(predicted.len());
    if threads < 2 || predicted.iter().sum::<f64>() < parallel_nanos {
        run_roots(nodes, roots);
        for job in side {
            (job.run)();
        }
        return;
    }
    // The most costly first, each to the thread with the least work so far.
    let mut order: Vec<usize> = (0..predicted.len()).collect();
    order.sort_by(|&a, &b| predicted[b].total_cmp(&predicted[a]));
    let mut load = vec![0.0f64; threads];
    let mut owner = vec![0usize; predicted.len()];
    for i in order {
        let t = (0..threads)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]))
            .expect("two threads or more");
        load[t] += predicted[i];
        owner[i] = t;
    }
    tracing::trace!(
        "{} roots and {} side jobs on {threads} threads, predicted ns by thread {load:?}, \
         by item {predicted:?}",
        roots.len(),
        predicted.len() - roots.len()
    );
    let mut shares: Vec<Share> = (0..threads)
        .map(|_| {
            let mut part = Nodes(Vec::new());
            part.0.resize_with(nodes.0.len(), || None);
            Share {
                nodes: part,
                roots: Vec::new(),
                side: Vec::new(),
            }
        })
        .collect();
    for (i, &root) in roots.iter().enumerate() {
        let share = &mut shares[owner[i]];
        nodes.move_subtree(root, &mut share.nodes);
        share.roots.push(root);
    }
    for (job, &t) in side.into_iter().zip(&owner[roots.len()..]) {
        shares[t].side.push(job);
    }
    let run_roots = &run_roots;
    // Each share stays here, so that its nodes come back even if an operator panics.
    crate::spawn::each_in_parallel("saql-queries", shares.iter_mut().collect(), |share| {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_roots(&mut share.nodes, &share.roots);
            for job in std::mem::take(&mut share.side) {
                (job.run)();
            }
        }));
        if ran.is_err() {
            tracing::error!("a query worker thread panicked");
        }
    });
    for part in shares.into_iter().map(|share| share.nodes) {
        for (id, node) in part.0.into_iter().enumerate() {
            if node.is_some() {
                nodes.0[id] = node;
            }
        }
    }
}

impl Nodes {
    fn node(&self, id: usize) -> &Node {
        self.0[id].as_ref().expect("paths hold live nodes")
    }

    fn node_mut(&mut self, id: usize) -> &mut Node {
        self.0[id].as_mut().expect("paths hold live nodes")
    }

    /// Moves node `root` and every node below it to `into` (at the same ids).
    fn move_subtree(&mut self, root: usize, into: &mut Nodes) {
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let node = self.0[id].take().expect("paths hold live nodes");
            stack.extend(node.children.iter().copied());
            into.0[id] = Some(node);
        }
    }

    /// Runs a batch through a root filter whose shared atoms are evaluated (`atoms`), and on
    /// down. When the filter's rows go only to children that can pick the rows they read out
    /// of the whole batch, the filter itself copies nothing.
    fn select(
        &mut self,
        id: usize,
        batch: &RecordBatch,
        atoms: &AtomValues,
        predicates: &SharedPredicates,
    ) {
        let node = self.node(id);
        if node.failed {
            return;
        }
        let split = node
            .split
            .as_ref()
            .expect("selected nodes have a split predicate");
        let selection = match atoms.select(predicates, split, batch) {
            Ok(selection) => selection,
            Err(e) => return self.fail(id, e),
        };
        let mut children = node.children.clone();
        if node.sinks.is_empty() && selection.rest.is_empty() {
            let mut rest = Vec::new();
            for child in children {
                if self.node(child).failed {
                    continue;
                }
                match self
                    .node_mut(child)
                    .op
                    .process_selected(batch, &selection.mask)
                {
                    Some(Ok(produced)) => self.emit(child, produced),
                    Some(Err(e)) => self.fail(child, e),
                    None => rest.push(child),
                }
            }
            if rest.is_empty() {
                return;
            }
            children = rest;
        }
        let kept = filter::keep(batch.clone(), &selection.mask).and_then(|mut kept| {
            for conjunct in &selection.rest {
                kept = match kept.pop() {
                    Some(b) => filter::select(conjunct, b)?,
                    None => break,
                };
            }
            Ok(kept)
        });
        match kept {
            Ok(produced) => self.emit_to(id, &children, produced),
            Err(e) => self.fail(id, e),
        }
    }

    fn advance_node(&mut self, id: usize, watermark: Watermark) {
        if self.node(id).failed {
            return;
        }
        match self.node_mut(id).op.on_watermark(watermark) {
            Ok(emitted) => self.emit(id, emitted),
            Err(e) => return self.fail(id, e),
        }
        for child in self.node(id).children.clone() {
            self.advance_node(child, watermark);
        }
    }

    /// Runs `batches` through node `id` and on down its subtree.
    fn push(&mut self, id: usize, batches: Vec<RecordBatch>) {
        if self.node(id).failed {
            return;
        }
        let mut produced = Vec::new();
        for b in batches {
            match self.node_mut(id).op.process_batch(b) {
                Ok(o) => produced.extend(o),
                Err(e) => return self.fail(id, e),
            }
        }
        self.emit(id, produced);
    }

    /// Hands a node's output to its queries and its children.
    fn emit(&mut self, id: usize, batches: Vec<RecordBatch>) {
        let children = self.node(id).children.clone();
        self.emit_to(id, &children, batches);
    }

    /// Hands a node's output to its queries and to `children`, some or all of its own.
    fn emit_to(&mut self, id: usize, children: &[usize], batches: Vec<RecordBatch>) {
        if batches.is_empty() {
            return;
        }
        for (_, output) in &self.node(id).sinks {
            QueryOutput::lock(output).deliver(&batches);
        }
        for &child in children {
            self.push(child, batches.clone());
        }
    }

    /// Stops a node; every query below it fails with the error. The state of the node and
    /// of those below it is dropped (a fresh, empty operator takes its place: a failed node
    /// never runs again, but a checkpoint still snapshots it).
    fn fail(&mut self, id: usize, error: Error) {
        self.node_mut(id).failed = true;
        let failure = QueryFailure::from_error(&error);
        let mut stack = vec![id];
        while let Some(n) = stack.pop() {
            let node = self.node_mut(n);
            if let Ok(fresh) = node.spec.build() {
                let late = node.op.late_rows();
                node.op = Box::new(Stopped { fresh, late });
            }
            for (_, output) in &node.sinks {
                QueryOutput::lock(output).fail(failure.clone());
            }
            stack.extend(node.children.iter().copied());
        }
    }
}

/// A failed node's operator: empty state of the same kind (what a checkpoint of it restores
/// into), keeping the late-row count the failed one had.
struct Stopped {
    fresh: Box<dyn Operator>,
    late: u64,
}

impl Operator for Stopped {
    fn name(&self) -> &'static str {
        self.fresh.name()
    }

    fn schema(&self) -> datafusion::arrow::datatypes::SchemaRef {
        self.fresh.schema()
    }

    fn process_batch(&mut self, _batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        Ok(vec![])
    }

    fn snapshot(&mut self) -> Result<crate::operators::snapshot::StateImage> {
        self.fresh.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        self.fresh.restore(snapshot)
    }

    fn late_rows(&self) -> u64 {
        self.late
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use datafusion::arrow::array::{Int64Array, TimestampNanosecondArray};

    use super::*;
    use crate::plan::{plan_query, Catalog};
    use crate::runtime::core::retained::Retained;
    use crate::time::EventTime;

    fn catalog() -> Catalog {
        Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        )
        .unwrap()
    }

    fn attach(g: &mut OperatorGraph, name: &str, sql: &str) -> (Vec<usize>, OutputHandle) {
        let cat = catalog();
        let crate::sql::Statement::Sql(stmt) = crate::sql::parse_one(sql).unwrap() else {
            panic!("not a query")
        };
        let datafusion::sql::sqlparser::ast::Statement::Query(q) = *stmt else {
            panic!("not a query")
        };
        let plan = plan_query(&q, &cat).unwrap();
        let output = QueryOutput::handle(name, plan.schema.clone(), Retained::new(100));
        let path = g
            .attach(name, plan.specs, Watermark::START, output.clone(), true)
            .unwrap();
        (path, output)
    }

    fn results(output: &OutputHandle) -> Vec<RecordBatch> {
        let out = QueryOutput::lock(output);
        assert_eq!(out.failed(), None);
        out.retained()
    }

    fn live(g: &OperatorGraph) -> usize {
        g.nodes.0.iter().filter(|n| n.is_some()).count()
    }

    fn batch(rows: &[(i64, i64, i64)]) -> RecordBatch {
        let cat = catalog();
        RecordBatch::try_new(
            cat.stream("s").unwrap().schema.clone(),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    rows.iter().map(|r| r.0 * 1_000_000_000),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap()
    }

    const SUM: &str =
        "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
                       WHERE v > 1 GROUP BY k, window_start, window_end";

    /// Side jobs (the unions a stream feeds) run once each, alongside the queries, whether
    /// the batch runs on one thread or is spread over two.
    #[test]
    fn side_jobs_run_once_each_on_one_thread_or_two() {
        for (threads, parallel_nanos) in [(1, PARALLEL_NANOS), (2, 0.0)] {
            let mut g = OperatorGraph::default();
            g.set_workers(threads);
            g.parallel_nanos = parallel_nanos;
            let (_, out) = attach(&mut g, "q", "SELECT ts, k, v FROM s WHERE v > 1");
            let runs: Vec<std::sync::atomic::AtomicUsize> =
                (0..3).map(|_| Default::default()).collect();
            let threads_seen = Mutex::new(std::collections::HashSet::new());
            let jobs = runs
                .iter()
                .map(|n| SideJob {
                    predicted: 1e6,
                    run: Box::new(|| {
                        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        threads_seen
                            .lock()
                            .unwrap()
                            .insert(std::thread::current().id());
                    }),
                })
                .collect();
            g.process_with(&batch(&[(1, 0, 2), (2, 0, 1)]), jobs);
            assert!(runs
                .iter()
                .all(|n| n.load(std::sync::atomic::Ordering::SeqCst) == 1));
            assert_eq!(threads_seen.lock().unwrap().len(), threads.min(2));
            assert_eq!(QueryOutput::lock(&out).rows_out(), 1, "the query ran too");
        }
    }

    /// A side job that panics while the queries run on another thread loses no query's
    /// nodes: the next batch runs through every query as before.
    #[test]
    fn a_panicking_side_job_leaves_the_queries_in_place() {
        let mut g = OperatorGraph::default();
        g.set_workers(2);
        g.parallel_nanos = 0.0;
        let (_, out) = attach(&mut g, "q", "SELECT ts, k, v FROM s WHERE v > 1");
        let jobs = vec![SideJob {
            // Costlier than the query: the two go to different threads.
            predicted: f64::MAX,
            run: Box::new(|| panic!("a failing union")),
        }];
        g.process_with(&batch(&[(1, 0, 2)]), jobs);
        g.process(&batch(&[(2, 0, 3), (3, 0, 1)]));
        assert_eq!(QueryOutput::lock(&out).rows_out(), 2, "a row of each batch");
    }

    /// Queries spread over threads give each query the rows it gets on one, in order,
    /// batch by batch and watermark by watermark (here every batch runs on two threads).
    #[test]
    fn queries_on_two_threads_give_what_they_give_on_one() {
        const QUERIES: [&str; 5] = [
            SUM,
            "SELECT k, window_end, COUNT(*) AS n FROM HOP(s, ts, INTERVAL '2' SECOND, \
             INTERVAL '6' SECOND) GROUP BY k, window_start, window_end",
            "SELECT ts, k, v FROM s WHERE v % 3 = 0",
            "SELECT k, window_start, window_end, COUNT(*) AS n FROM SESSION(s, ts, \
             INTERVAL '1' SECOND) GROUP BY k, window_start, window_end",
            "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '5' SECOND) \
             WHERE v > 4 GROUP BY k, window_start, window_end",
        ];
        let run = |threads: usize| {
            let mut g = OperatorGraph::default();
            g.set_workers(threads);
            g.parallel_nanos = 0.0;
            let outputs: Vec<OutputHandle> = QUERIES
                .iter()
                .enumerate()
                .map(|(i, sql)| attach(&mut g, &format!("q{i}"), sql).1)
                .collect();
            let mut x = 7u64;
            for b in 0..40i64 {
                let rows: Vec<(i64, i64, i64)> = (0..50)
                    .map(|i| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        (b * 3 + i % 2, (x >> 33) as i64 % 4, (x >> 40) as i64 % 9)
                    })
                    .collect();
                g.process(&batch(&rows));
                g.advance(Watermark(EventTime((b * 3 - 1) * 1_000_000_000)));
            }
            assert_eq!(live(&g), g.nodes.0.len(), "every node is back in its place");
            outputs.iter().map(results).collect::<Vec<_>>()
        };
        let one = run(1);
        let two = run(2);
        for (i, (a, b)) in one.iter().zip(&two).enumerate() {
            let rows = |r: &[RecordBatch]| r.iter().map(|b| b.num_rows()).sum::<usize>();
            assert!(rows(a) > 0, "query {i} gives rows");
            assert_eq!(a, b, "query {i}");
        }
    }

    #[test]
    fn identical_queries_share_every_node_and_get_the_same_rows() {
        let mut g = OperatorGraph::default();
        let (a, out_a) = attach(&mut g, "a", SUM);
        let nodes = live(&g);
        let (b, out_b) = attach(&mut g, "b", SUM);
        assert_eq!(a, b, "the second query reuses the first one's nodes");
        assert_eq!(live(&g), nodes);
        // Same filter, another aggregate: shares the filter only.
        let (c, out_c) = attach(
            &mut g,
            "c",
            "SELECT k, window_end, MAX(v) AS top FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
             WHERE v > 1 GROUP BY k, window_start, window_end",
        );
        assert_eq!(c[0], a[0]);
        assert_ne!(c[1], a[1]);

        g.process(&batch(&[(0, 1, 5), (1, 1, 7), (2, 2, 1), (3, 2, 4)]));
        g.advance(Watermark(EventTime(20 * 1_000_000_000)));
        let rows = |q: &OutputHandle| results(q).iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(rows(&out_a), 2);
        assert_eq!(results(&out_a), results(&out_b));
        assert_eq!(rows(&out_c), 2);

        // Dropping one sharer keeps the nodes; dropping the last frees them.
        g.detach("a", &a);
        assert_eq!(live(&g), nodes + c.len() - 1);
        g.detach("b", &b);
        g.detach("c", &c);
        assert_eq!(live(&g), 0);
        assert!(g.roots.is_empty());
    }

    #[test]
    fn a_larger_window_over_the_same_filter_reads_the_smaller_ones_results() {
        let mut g = OperatorGraph::default();
        let (small, out_small) = attach(&mut g, "small", SUM);
        let (large, out_large) = attach(
            &mut g,
            "large",
            "SELECT k, window_end, SUM(v) AS total FROM TUMBLE(s, ts, INTERVAL '30' SECOND) \
             WHERE v > 1 GROUP BY k, window_start, window_end",
        );
        assert_eq!(
            large[..2],
            small[..2],
            "filter and 10 s aggregate are shared"
        );
        assert_eq!(
            large.len(),
            small.len() + 1,
            "then a rollup and its projection"
        );
        g.process(&batch(&[(0, 1, 5), (12, 1, 7), (25, 2, 4), (31, 1, 9)]));
        g.advance(Watermark(EventTime(60 * 1_000_000_000)));
        let rows = |q: &OutputHandle| results(q).iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(rows(&out_small), 4);
        let totals: Vec<i64> = results(&out_large)
            .iter()
            .flat_map(|b| {
                b.column(2)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(
            totals,
            vec![12, 4, 9],
            "k=1 and k=2 in [0, 30), k=1 in [30, 60)"
        );
        g.detach("small", &small);
        g.detach("large", &large);
        assert_eq!(live(&g), 0);
    }

    #[test]
    fn a_failed_attach_leaves_the_graph_as_it_was() {
        let mut g = OperatorGraph::default();
        let (a, _) = attach(&mut g, "a", SUM);
        let nodes = live(&g);
        // Shares the filter and the aggregate, then fails to build its projection (one
        // replica of an operator without keys is not sharding).
        let cat = catalog();
        let mut specs = crate::plan(SUM, &cat).unwrap().specs;
        let last = specs.pop().unwrap();
        specs.push(last.sharded(1));
        let output = QueryOutput::handle(
            "b",
            cat.stream("s").unwrap().schema.clone(),
            Retained::new(10),
        );
        assert!(g
            .attach("b", specs, Watermark::START, output, true)
            .is_err());
        assert_eq!(live(&g), nodes);
        g.detach("a", &a);
        assert_eq!(live(&g), 0, "the shared nodes have the users they had");
    }

    #[test]
    fn a_query_added_later_starts_fresh_where_it_does_not_share() {
        let mut g = OperatorGraph::default();
        let (a, out_a) = attach(&mut g, "a", SUM);
        g.process(&batch(&[(0, 1, 5)]));
        let (b, out_b) = attach(
            &mut g,
            "b",
            "SELECT k, window_end, COUNT(*) AS n FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
             WHERE v > 1 GROUP BY k, window_start, window_end",
        );
        g.process(&batch(&[(1, 1, 6)]));
        g.advance(Watermark(EventTime(20 * 1_000_000_000)));
        let total = results(&out_a)[0]
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0);
        let n = results(&out_b)[0]
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0);
        assert_eq!(
            (total, n),
            (11, 1),
            "a saw both rows, b only the one after it began"
        );
        assert_eq!(a[0], b[0]);
    }
}
