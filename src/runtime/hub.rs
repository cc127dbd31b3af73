//! A stream hub: one stream's watermark and counters, the operator graph of the queries that
//! read it, and those queries. Each hub has its own lock, so a busy stream never stalls
//! another; rows reach a hub's queries in the order the hub accepted them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use datafusion::arrow::record_batch::RecordBatch;

use super::graph::OperatorGraph;
use super::output::{OutputHandle, QueryOutput};
use super::stream::StreamRuntime;
use crate::error::{Error, Result};
use crate::plan::{QueryPlan, StreamDef};
use crate::sources::spec::SourceProgress;
use crate::sql::CreateQuery;
use crate::time::Watermark;

/// A stream with its queries, behind the stream's own lock.
pub struct StreamHub {
    inner: Mutex<Hub>,
}

impl StreamHub {
    /// An empty hub for a newly declared stream.
    pub fn new(def: Arc<StreamDef>, retain_rows: usize) -> Arc<StreamHub> {
        Arc::new(StreamHub {
            inner: Mutex::new(Hub {
                stream: StreamRuntime::new(def, retain_rows),
                graph: OperatorGraph::default(),
                queries: BTreeMap::new(),
                sources: BTreeMap::new(),
                dropped: false,
            }),
        })
    }

    /// Locks the hub. A panic while it was held leaves state we cannot repair; keep serving
    /// with what is there.
    pub fn lock(&self) -> MutexGuard<'_, Hub> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The state of one stream and its queries.
pub struct Hub {
    /// Watermark, counters, recent rows.
    pub stream: StreamRuntime,
    /// The queries' operators, shared where they coincide.
    pub graph: OperatorGraph,
    /// The queries reading this stream, by name.
    pub queries: BTreeMap<String, QueryRuntime>,
    /// The progress of each source writing into this stream, as of the rows applied here.
    pub sources: BTreeMap<String, SourceProgress>,
    /// Set when the stream is dropped: later writers get an error.
    pub dropped: bool,
}

/// A continuous query at run time.
pub struct QueryRuntime {
    /// Its definition.
    pub def: CreateQuery,
    /// Its plan; its operators run in the hub's graph.
    pub plan: QueryPlan,
    /// Its operators' node ids in the graph, source first.
    pub path: Vec<usize>,
    /// Rows offered to the query.
    pub rows_in: u64,
    /// Where its results go.
    pub output: OutputHandle,
}

impl Hub {
    /// Fails with 42P01 once the stream is dropped.
    pub fn check_live(&self) -> Result<()> {
        if self.dropped {
            return Err(Error::undefined("stream", &self.stream.def.name));
        }
        Ok(())
    }

    /// Fails unless the stream is live and `batch` has its schema.
    pub fn check_batch(&self, batch: &RecordBatch) -> Result<()> {
        self.check_live()?;
        if batch.schema().fields() != self.stream.def.schema.fields() {
            return Err(Error::plan(
                "42804",
                format!(
                    "batch schema does not match stream \"{}\"",
                    self.stream.def.name
                ),
            ));
        }
        Ok(())
    }

    /// Runs a batch of the stream's rows through every query and advances the watermark it
    /// implies. The batch must have the stream's schema.
    pub fn insert(&mut self, batch: &RecordBatch, now: Instant) -> Result<u64> {
        self.check_batch(batch)?;
        let n = batch.num_rows() as u64;
        if n == 0 {
            return Ok(0);
        }
        let advanced = self.stream.observe(batch, now);
        for q in self.queries.values_mut() {
            if QueryOutput::lock(&q.output).failed().is_none() {
                q.rows_in += n;
            }
        }
        self.graph.process(batch);
        if let Some(wm) = advanced {
            self.graph.advance(wm);
            self.progressed(wm);
        }
        Ok(n)
    }

    /// Moves the watermark to `to` if that is later, emitting what it completes; returns it
    /// if it moved.
    pub fn advance(&mut self, to: Watermark) -> Option<Watermark> {
        let moved = self.stream.advance(to)?;
        self.graph.advance(moved);
        self.progressed(moved);
        Some(moved)
    }

    /// Tells the queries' subscribers that asked for progress where the watermark is now.
    fn progressed(&self, wm: Watermark) {
        for q in self.queries.values() {
            QueryOutput::lock(&q.output).progress(wm);
        }
    }

    /// Adds a planned query; its operators join the graph at the current watermark. On an
    /// error the graph is left as it was.
    pub fn attach(
        &mut self,
        name: &str,
        def: CreateQuery,
        plan: QueryPlan,
        retain: usize,
    ) -> Result<()> {
        let output = QueryOutput::handle(name, plan.schema.clone(), retain);
        let path = self.graph.attach(
            name,
            plan.specs.clone(),
            self.stream.watermark,
            output.clone(),
        )?;
        self.queries.insert(
            name.to_string(),
            QueryRuntime {
                def,
                plan,
                path,
                rows_in: 0,
                output,
            },
        );
        Ok(())
    }

    /// Removes a query and the operators no other query uses.
    pub fn detach(&mut self, name: &str) {
        if let Some(q) = self.queries.remove(name) {
            self.graph.detach(name, &q.path);
        }
    }
}
