//! Extended-protocol portals over a live subscription, read by Execute with a row limit
//! (asyncpg `conn.cursor(...)`, pgJDBC `setFetchSize`, node `pg-query-stream`): each Execute
//! waits until at least one row exists, sends up to the limit, then PortalSuspended; the next
//! Execute on the portal goes on where it stopped. Portals over finite results (an ad hoc
//! SELECT) are suspended by pgwire itself.

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
    binds: HashMap<String, BindId>,
    /// The subscriptions behind them, read as cursors named after the portals.
    pub rows: Cursors,
}

impl LivePortals {
    /// Whether `name` is a live portal made by the Bind `bind`. A portal of that name from
    /// an earlier Bind is dropped.
    pub fn is_open(&mut self, name: &str, bind: &BindId) -> bool {
        match self.binds.get(name) {
            Some(b) if Arc::ptr_eq(b, bind) => true,
            Some(_) => {
                self.close(name);
                false
            }
            None => false,
        }
    }

    /// Makes `name` a live portal over `result` (a subscription).
    pub fn open(&mut self, name: &str, bind: BindId, result: StatementResult) -> Result<()> {
        self.close(name);
        self.rows.declare(name.to_string(), result)?;
        self.binds.insert(name.to_string(), bind);
        Ok(())
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
