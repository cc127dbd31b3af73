//! One running continuous query: its operator chain, counters, retained results and
//! subscribers.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

use super::retained::Retained;
use crate::plan::QueryPlan;
use crate::sql::CreateQuery;

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum SubscriptionEvent {
    /// New result rows.
    Rows(RecordBatch),
    /// The query failed and will produce nothing more.
    Failed(String),
}

/// How many batches a subscriber may fall behind before it is disconnected.
pub const SUBSCRIBER_BACKLOG: usize = 4096;

/// A continuous query at run time.
pub struct QueryRuntime {
    /// Normalised name.
    pub name: String,
    /// Its definition.
    pub def: CreateQuery,
    /// Its plan; its operators run in the stream's [`super::graph::OperatorGraph`].
    pub plan: QueryPlan,
    /// Its operators' node ids in the stream's operator graph, source first.
    pub path: Vec<usize>,
    /// Rows offered to the query.
    pub rows_in: u64,
    /// Result rows produced.
    pub rows_out: u64,
    /// Why it stopped, if it failed.
    pub failed: Option<String>,
    /// Recent results for ad hoc SELECT.
    pub retained: Retained,
    subscribers: Vec<mpsc::Sender<SubscriptionEvent>>,
}

impl QueryRuntime {
    /// A query ready to receive rows.
    pub fn new(name: String, def: CreateQuery, plan: QueryPlan, retain_rows: usize) -> Self {
        QueryRuntime {
            name,
            def,
            plan,
            path: Vec::new(),
            rows_in: 0,
            rows_out: 0,
            failed: None,
            retained: Retained::new(retain_rows),
            subscribers: Vec::new(),
        }
    }

    /// Result schema.
    pub fn schema(&self) -> SchemaRef {
        self.plan.schema.clone()
    }

    /// Adds a subscriber and returns its receiving end.
    pub fn subscribe(&mut self) -> mpsc::Receiver<SubscriptionEvent> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BACKLOG);
        if let Some(reason) = &self.failed {
            let _ = tx.try_send(SubscriptionEvent::Failed(reason.clone()));
        }
        self.subscribers.push(tx);
        rx
    }

    /// Live subscribers, after dropping those whose client went away.
    pub fn subscribers(&mut self) -> usize {
        self.subscribers.retain(|s| !s.is_closed());
        self.subscribers.len()
    }

    /// Hands the query's new results (or its failure) to its subscribers and retained rows.
    pub fn deliver(&mut self, result: std::result::Result<Vec<RecordBatch>, String>) {
        if self.failed.is_some() {
            return;
        }
        match result {
            Ok(batches) => {
                for b in batches {
                    if b.num_rows() == 0 {
                        continue;
                    }
                    self.rows_out += b.num_rows() as u64;
                    self.retained.push(&b);
                    self.subscribers.retain(|s| {
                        // A subscriber that fell too far behind is cut off rather than
                        // letting memory grow without bound; its client sees the stream end.
                        s.try_send(SubscriptionEvent::Rows(b.clone())).is_ok()
                    });
                }
            }
            Err(reason) => {
                tracing::warn!("query \"{}\" failed: {reason}", self.name);
                for s in self.subscribers.drain(..) {
                    let message = format!("query \"{}\" failed: {reason}", self.name);
                    let _ = s.try_send(SubscriptionEvent::Failed(message));
                }
                self.failed = Some(reason);
            }
        }
    }
}
