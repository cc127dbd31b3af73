//! The ingest budget: the bytes of the batches writers (INSERT, COPY, sources) have handed to
//! the engine and that are waiting to enter their stream or being processed. Ingest is
//! synchronous: a writer's batch waits for its stream's lock and then runs through the
//! stream's queries on the writer's thread, so the engine's only ingest queue is the set of
//! writers blocked on a stream. This budget bounds that queue in bytes across all streams: a
//! writer whose batch does not fit waits until enough bytes are done (backpressure; its
//! client simply sees a slower INSERT or COPY). A batch larger than the whole budget enters
//! alone. Before it reaches the engine a COPY is held by its decoder (bounded by
//! `--max-copy-bytes`), an INSERT by its statement (bounded by the statement size limit).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

/// Bytes of ingest in flight, bounded.
pub struct IngestBudget {
    max: usize,
    used: Mutex<usize>,
    freed: Condvar,
    waits: AtomicU64,
}

/// Bytes of one batch in flight; released when dropped.
pub struct IngestPermit<'a> {
    budget: &'a IngestBudget,
    bytes: usize,
}

impl IngestBudget {
    /// A budget of `max` bytes.
    pub fn new(max: usize) -> Self {
        IngestBudget {
            max,
            used: Mutex::new(0),
            freed: Condvar::new(),
            waits: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` from the budget, waiting while other batches hold too much of it.
    pub fn acquire(&self, bytes: usize) -> IngestPermit<'_> {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        if *used > 0 && used.saturating_add(bytes) > self.max {
            self.waits.fetch_add(1, Ordering::Relaxed);
            while *used > 0 && used.saturating_add(bytes) > self.max {
                used = self.freed.wait(used).unwrap_or_else(|p| p.into_inner());
            }
        }
        *used += bytes;
        IngestPermit {
            budget: self,
            bytes,
        }
    }

    /// Bytes in flight now.
    pub fn used(&self) -> usize {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Batches that had to wait for room.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }
}

impl Drop for IngestPermit<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        *used -= self.bytes;
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn writers_wait_for_room_and_a_big_batch_enters_alone() {
        let budget = Arc::new(IngestBudget::new(100));
        let first = budget.acquire(60);
        let waiter = {
            let budget = budget.clone();
            crate::spawn::thread("saql-test-waiter", move || {
                let _p = budget.acquire(60);
                budget.used()
            })
            .expect("the waiting thread starts")
        };
        // The second batch cannot enter while the first holds 60 of 100 bytes.
        while budget.waits() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(budget.used(), 60);
        drop(first);
        assert_eq!(waiter.join().unwrap(), 60);
        assert_eq!(budget.used(), 0);
        // Larger than the budget: it enters when nothing else is in flight.
        let big = budget.acquire(500);
        assert_eq!(budget.used(), 500);
        drop(big);
        assert_eq!(budget.used(), 0);
    }
}
