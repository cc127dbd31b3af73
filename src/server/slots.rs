//! Connection slots, counted as PostgreSQL counts them, so that clients that never log in
//! cannot lock anyone out: a connection takes one of `--max-connections` slots only once it
//! has authenticated, and the last `--reserved-connections` of them only if its role is
//! admin (PostgreSQL's `superuser_reserved_connections`), so that idle readers cannot lock
//! the admin out either. Until then it waits in the start-up room: it must authenticate within
//! `--authentication-timeout` (PostgreSQL's `authentication_timeout`), and when the room is
//! full the connection that has waited longest is closed to make room for the newest.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use crate::error::{sqlstate, Error};

/// Default time a client has from connecting to being logged in.
pub const DEFAULT_AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(5);

/// Default slots only admins may take.
pub const DEFAULT_RESERVED_CONNECTIONS: usize = 3;

/// Connections that may wait to log in at once, by default.
const DEFAULT_STARTUP_ROOM: usize = 1024;

/// The server's connection slots and start-up room.
#[derive(Debug)]
pub struct Slots {
    max: usize,
    /// Slots anyone may take.
    general: Arc<Semaphore>,
    /// Slots only admins may take.
    reserved: Arc<Semaphore>,
    /// Connections not yet logged in, oldest first, each with what closes it.
    waiting: Mutex<VecDeque<(u64, oneshot::Sender<()>)>>,
    room: usize,
    next: AtomicU64,
    /// How long a connection may take to log in.
    pub authentication_timeout: Duration,
}

/// A connection's place in the start-up room; it leaves the room when dropped.
pub struct Waiting {
    id: u64,
    slots: Arc<Slots>,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Waiting({})", self.id)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waiting = self.slots.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.retain(|(id, _)| *id != self.id);
    }
}

impl Slots {
    /// `max` slots of which `reserved` (at most `max - 1`) are for admins; a client has
    /// `authentication_timeout` to log in.
    pub fn new(max: usize, reserved: usize, authentication_timeout: Duration) -> Arc<Slots> {
        let max = max.max(1);
        let reserved = reserved.min(max - 1);
        Arc::new(Slots {
            max,
            general: Arc::new(Semaphore::new(max - reserved)),
            reserved: Arc::new(Semaphore::new(reserved)),
            waiting: Mutex::new(VecDeque::new()),
            room: DEFAULT_STARTUP_ROOM.max(max),
            next: AtomicU64::new(0),
            authentication_timeout,
        })
    }

    /// Lets a new connection into the start-up room; if the room is full, the connection
    /// that has waited longest is told to close. The receiver completes when this one must.
    pub fn enter(self: &Arc<Self>) -> (Waiting, oneshot::Receiver<()>) {
        let (close, closed) = oneshot::channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        while waiting.len() >= self.room {
            if let Some((_, oldest)) = waiting.pop_front() {
                let _ = oldest.send(());
            }
        }
        waiting.push_back((id, close));
        drop(waiting);
        (
            Waiting {
                id,
                slots: self.clone(),
            },
            closed,
        )
    }

    /// A slot for a client that just logged in with the admin role or not; 53300 when none
    /// is left for it.
    pub fn take(&self, admin: bool) -> Result<OwnedSemaphorePermit, Error> {
        if let Ok(slot) = self.general.clone().try_acquire_owned() {
            return Ok(slot);
        }
        if admin {
            if let Ok(slot) = self.reserved.clone().try_acquire_owned() {
                return Ok(slot);
            }
        }
        let message = if admin || self.reserved.available_permits() == 0 {
            format!(
                "sorry, too many clients already: {} connections are open (--max-connections)",
                self.max
            )
        } else {
            "remaining connection slots are reserved for admins (--reserved-connections)".into()
        };
        Err(Error::limit(sqlstate::TOO_MANY_CONNECTIONS, message))
    }

    /// Connections logged in now.
    pub fn in_use(&self) -> usize {
        self.max - self.general.available_permits() - self.reserved.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_slots_are_for_admins() {
        let slots = Slots::new(4, 2, DEFAULT_AUTHENTICATION_TIMEOUT);
        let readers: Vec<_> = (0..2).map(|_| slots.take(false).unwrap()).collect();
        let e = slots.take(false).unwrap_err();
        assert_eq!(e.sqlstate(), "53300");
        assert!(e.to_string().contains("reserved for admins"), "{e}");
        let admins: Vec<_> = (0..2).map(|_| slots.take(true).unwrap()).collect();
        let e = slots.take(true).unwrap_err();
        assert!(e.to_string().contains("too many clients"), "{e}");
        assert_eq!(slots.in_use(), 4);
        drop(readers);
        assert!(slots.take(false).is_ok());
        drop(admins);
    }

    #[test]
    fn a_full_start_up_room_closes_the_longest_waiting() {
        let slots = Slots::new(1, 0, DEFAULT_AUTHENTICATION_TIMEOUT);
        let room = slots.room;
        let mut entered: Vec<_> = (0..room).map(|_| slots.enter()).collect();
        let (_newest, mut newest_closed) = slots.enter();
        assert!(
            entered[0].1.try_recv().is_ok(),
            "the oldest is told to close"
        );
        assert!(entered[1].1.try_recv().is_err());
        assert!(newest_closed.try_recv().is_err());
        // One that leaves frees its place: the next newcomer closes no one.
        entered.remove(1);
        let _another = slots.enter();
        assert!(entered[1].1.try_recv().is_err());
    }
}
