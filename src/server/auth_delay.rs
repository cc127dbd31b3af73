//! A delay after each failed login, longer for an address that keeps failing (PostgreSQL's
//! `auth_delay`, made to grow): guessing passwords from one address slows to a few tries a
//! second, while a user who mistypes once waits a tenth of a second. The failures are
//! forgotten after a quiet minute or at the address's next successful login; at most
//! [`MAX_ADDRESSES`] addresses are remembered.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The delay after a first failure.
const FIRST: Duration = Duration::from_millis(100);

/// The longest delay.
const MAX: Duration = Duration::from_secs(5);

/// Failures older than this are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// Addresses remembered at most (the oldest are forgotten first).
pub const MAX_ADDRESSES: usize = 10_000;

/// Recent failed logins by address.
#[derive(Debug, Default)]
pub struct FailedLogins {
    by_address: HashMap<IpAddr, (u32, Instant)>,
}

impl FailedLogins {
    /// Records a failure from `addr` at `now`; returns how long to wait before answering.
    pub fn failed(&mut self, addr: IpAddr, now: Instant) -> Duration {
        if self.by_address.len() >= MAX_ADDRESSES {
            self.by_address
                .retain(|_, (_, last)| now.duration_since(*last) < FORGET_AFTER);
            if self.by_address.len() >= MAX_ADDRESSES {
                if let Some(oldest) = self.by_address.iter().min_by_key(|(_, (_, t))| *t) {
                    let oldest = *oldest.0;
                    self.by_address.remove(&oldest);
                }
            }
        }
        let entry = self.by_address.entry(addr).or_insert((0, now));
        if now.duration_since(entry.1) >= FORGET_AFTER {
            entry.0 = 0;
        }
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now;
        // 100 ms, 200 ms, 400 ms, ... up to 5 s.
        FIRST.saturating_mul(1u32 << (entry.0 - 1).min(16)).min(MAX)
    }

    /// A successful login from `addr`: its failures are forgotten.
    pub fn succeeded(&mut self, addr: IpAddr) {
        self.by_address.remove(&addr);
    }
}

/// The server's record of failed logins.
pub fn failed_logins() -> std::sync::MutexGuard<'static, FailedLogins> {
    static LOGINS: OnceLock<Mutex<FailedLogins>> = OnceLock::new();
    LOGINS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_grows_per_address_and_is_forgotten() {
        let mut logins = FailedLogins::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let t = Instant::now();
        let delays: Vec<u128> = (0..8)
            .map(|i| logins.failed(a, t + Duration::from_millis(i)).as_millis())
            .collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        // Another address is not slowed by the first one's failures.
        assert_eq!(logins.failed(b, t), FIRST);
        // A quiet minute, or a success, starts over.
        assert_eq!(logins.failed(a, t + FORGET_AFTER * 2), FIRST);
        logins.failed(b, t);
        logins.succeeded(b);
        assert_eq!(logins.failed(b, t), FIRST);
    }

    #[test]
    fn the_addresses_remembered_are_bounded() {
        let mut logins = FailedLogins::default();
        let t = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 50) {
            let addr = IpAddr::from(i.to_be_bytes());
            logins.failed(addr, t + Duration::from_micros(i.into()));
        }
        assert!(logins.by_address.len() <= MAX_ADDRESSES);
    }
}
