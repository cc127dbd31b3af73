//! One running continuous query: its operator chain, counters, retained results and
//! subscribers.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

use super::retained::Retained;
use crate::error::Result;
use crate::operators::Operator;
use crate::plan::QueryPlan;
use crate::sql::CreateQuery;
use crate::time::Watermark;

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
    /// Its plan (operators run in order).
    pub plan: QueryPlan,
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

    /// Rows dropped as late by any operator.
    pub fn late_rows(&self) -> u64 {
        self.plan.operators.iter().map(|o| o.late_rows()).sum()
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

    /// Feeds a batch of the stream's rows through the operators.
    pub fn process(&mut self, batch: &RecordBatch) {
        if self.failed.is_some() {
            return;
        }
        self.rows_in += batch.num_rows() as u64;
        let result = run_from(&mut self.plan.operators, 0, vec![batch.clone()]);
        self.deliver(result);
    }

    /// Advances every operator to `watermark`, in order, passing on what each emits.
    pub fn advance(&mut self, watermark: Watermark) {
        if self.failed.is_some() {
            return;
        }
        let mut out = Vec::new();
        let n = self.plan.operators.len();
        let mut result = Ok(());
        for i in 0..n {
            match self.plan.operators[i].on_watermark(watermark) {
                Ok(emitted) => match run_from(&mut self.plan.operators, i + 1, emitted) {
                    Ok(batches) => out.extend(batches),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                },
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.deliver(result.map(|_| out));
    }

    fn deliver(&mut self, result: Result<Vec<RecordBatch>>) {
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
            Err(e) => {
                let reason = e.to_string();
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

/// Pushes batches through operators `from..`, returning what comes out of the last one.
fn run_from(
    operators: &mut [Box<dyn Operator>],
    from: usize,
    mut batches: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    for op in operators.iter_mut().skip(from) {
        let mut next = Vec::new();
        for b in batches {
            next.extend(op.process_batch(b)?);
        }
        batches = next;
        if batches.is_empty() {
            break;
        }
    }
    Ok(batches)
}
