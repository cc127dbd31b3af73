//! Extended-protocol portals that saql reads itself: a live subscription read by Execute with
//! a row limit (asyncpg `conn.cursor(...)`, pgJDBC `setFetchSize`, node `pg-query-stream`):
//! each Execute waits until at least one row exists, sends up to the limit, then
//! PortalSuspended; and an ad hoc SELECT, whose rows each Execute reads from the running
//! query as they are produced, up to the limit (pgwire would collect them first). The next
//! Execute on the portal goes on where it stopped.

use std::collections::HashMap;
use std::sync::Arc;

use pgwire::api::portal::PortalExecutionState;
use tokio::sync::Mutex;

use super::cursor::Cursors;
use crate::error::Result;
use crate::runtime::engine::StatementResult;

/// Which Bind made a portal: a new Bind of the same name replaces the portal.
type BindId = Arc<Mutex<PortalExecutionState>>;

/// The live portals of a connection, by portal name.
#[derive(Default)]
pub struct LivePortals {
    /// The Bind that made each portal, and whether it reads a SELECT (not a subscription).
    binds: HashMap<String, (BindId, bool)>,
    /// The subscriptions behind them, read as cursors named after the portals.
    pub rows: Cursors,
}

impl LivePortals {
    /// Whether `name` is a live portal made by the Bind `bind`. A portal of that name from
    /// an earlier Bind is dropped.
    pub fn is_open(&mut self, name: &str, bind: &BindId) -> bool {
        match self.binds.get(name) {
            Some((b, _)) if Arc::ptr_eq(b, bind) => true,
            Some(_) => {
                self.close(name);
                false
            }
            None => false,
        }
    }

    /// Makes `name` a live portal over `result` (a subscription or a SELECT's rows).
    pub fn open(&mut self, name: &str, bind: BindId, result: StatementResult) -> Result<()> {
        self.close(name);
        let select = matches!(result, StatementResult::Streaming { .. });
        self.rows.declare(name.to_string(), result)?;
        self.binds.insert(name.to_string(), (bind, select));
        Ok(())
    }

    /// Whether the portal `name` reads a SELECT's rows (not a subscription).
    pub fn reads_select(&self, name: &str) -> bool {
        self.binds.get(name).is_some_and(|(_, select)| *select)
    }

    /// Closes one portal (Close, or its subscription ended).
    pub fn close(&mut self, name: &str) {
        if self.binds.remove(name).is_some() {
            let _ = self.rows.close(Some(name));
        }
    }

    /// Closes every portal (end of transaction, DISCARD ALL).
    pub fn clear(&mut self) {
        self.binds.clear();
        let _ = self.rows.close(None);
    }
}
