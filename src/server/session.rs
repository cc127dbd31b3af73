//! What one connection's limits need to know about it: its `statement_timeout` (set with
//! `SET statement_timeout`, defaulting to `--statement-timeout`) and whether it is idle, and
//! since when, for `--idle-session-timeout`.

use crate::error::sqlstate;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::sql::sqlparser::ast::{self as sq, Expr, Value};

use crate::error::{Error, Result};
use crate::runtime::pg::functions::{MAX_RESULT_BYTES, MAX_RESULT_ROWS};
use crate::sql::Statement;

/// The per-connection state the limits use. Shared by the connection's handlers and the
/// task that closes idle sessions.
#[derive(Debug)]
pub struct Session {
    statement_timeout: Mutex<Option<Duration>>,
    busy: AtomicUsize,
    last_active: Mutex<Instant>,
    tls: AtomicBool,
    /// Set when the server shuts down: statements that never finish on their own (a
    /// SUBSCRIBE, a FETCH waiting for rows) end at once instead of holding up the shutdown.
    closing: tokio::sync::watch::Sender<bool>,
    /// Until the client logs in: its place in the start-up room. Then: its connection slot.
    login: Mutex<Login>,
    /// `saql.max_result_rows` and `saql.max_result_bytes` as the session set them (None:
    /// the server's default).
    result_bounds: Mutex<ResultBounds>,
}

/// The bounds a session set on its results (None: the server's default, `--max-result-*`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ResultBounds {
    /// `saql.max_result_rows`; 0 is no bound.
    pub rows: Option<u64>,
    /// `saql.max_result_bytes`; 0 is no bound.
    pub bytes: Option<u64>,
}

#[derive(Debug, Default)]
enum Login {
    #[default]
    Pending,
    // Both are held for what dropping them frees.
    Waiting {
        _place: super::slots::Waiting,
    },
    Done {
        _slot: Option<tokio::sync::OwnedSemaphorePermit>,
    },
}

/// Marks its session busy while it lives.
pub struct Active(Arc<Session>);

impl Drop for Active {
    fn drop(&mut self) {
        *lock(&self.0.last_active) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Session {
    /// A session whose statements time out after `statement_timeout` (None: never).
    pub fn new(statement_timeout: Option<Duration>) -> Arc<Session> {
        Arc::new(Session {
            statement_timeout: Mutex::new(statement_timeout),
            busy: AtomicUsize::new(0),
            last_active: Mutex::new(Instant::now()),
            tls: AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
            login: Mutex::new(Login::Pending),
            result_bounds: Mutex::new(ResultBounds::default()),
        })
    }

    /// Records that the client talks TLS: the server must not write plaintext to it.
    pub fn set_tls(&self) {
        self.tls.store(true, Ordering::Release);
    }

    /// Holds the connection's place in the start-up room until it logs in.
    pub fn wait_for_login(&self, waiting: super::slots::Waiting) {
        *lock(&self.login) = Login::Waiting { _place: waiting };
    }

    /// The client logged in and holds `slot` (None: slots are not counted) for as long as
    /// the session lives; it leaves the start-up room.
    pub fn logged_in(&self, slot: Option<tokio::sync::OwnedSemaphorePermit>) {
        *lock(&self.login) = Login::Done { _slot: slot };
    }

    /// Whether the client has logged in.
    pub fn is_logged_in(&self) -> bool {
        matches!(*lock(&self.login), Login::Done { .. })
    }

    /// Tells the session's open-ended statements that the server shuts down.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Completes once the server shuts down: an open-ended statement then ends with 57P01.
    pub async fn closed(&self) -> Error {
        let mut closing = self.closing.subscribe();
        let _ = closing.wait_for(|c| *c).await;
        Error::AdminShutdown
    }

    /// Whether the client talks TLS.
    pub fn tls(&self) -> bool {
        self.tls.load(Ordering::Acquire)
    }

    /// Marks the session busy (running a statement, receiving COPY data) until the guard
    /// is dropped.
    pub fn active(self: &Arc<Self>) -> Active {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Active(self.clone())
    }

    /// How long the session has been idle, or None while it is busy.
    pub fn idle_for(&self) -> Option<Duration> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(lock(&self.last_active).elapsed())
    }

    /// The timeout that applies to `stmt`: ad hoc SELECTs only, whose work stops when they
    /// are dropped (an INSERT or COPY that has started is not abandoned half-way, and a
    /// SUBSCRIBE runs until canceled).
    pub fn timeout_for(&self, stmt: &Statement) -> Option<Duration> {
        match stmt {
            Statement::Sql(s) if matches!(s.as_ref(), sq::Statement::Query(_)) => {
                *lock(&self.statement_timeout)
            }
            _ => None,
        }
    }

    /// The bounds the session set on its results.
    pub fn result_bounds(&self) -> ResultBounds {
        *lock(&self.result_bounds)
    }

    /// Applies `SET statement_timeout = ...` (milliseconds, or a string with a unit: `'5s'`,
    /// `'2min'`; 0 disables it) and `SET saql.max_result_rows | saql.max_result_bytes = n`
    /// (0: no bound, DEFAULT: the server's); returns false for any other statement.
    pub fn apply_set(&self, stmt: &Statement) -> Result<bool> {
        let Statement::Sql(s) = stmt else {
            return Ok(false);
        };
        let sq::Statement::Set(sq::Set::SingleAssignment {
            variable, values, ..
        }) = s.as_ref()
        else {
            return Ok(false);
        };
        let name = variable.to_string().to_lowercase();
        let bound = match name.as_str() {
            "statement_timeout" => None,
            MAX_RESULT_ROWS | MAX_RESULT_BYTES => Some(name.as_str()),
            _ => return Ok(false),
        };
        let text = match values.as_slice() {
            [Expr::Value(v)] => match &v.value {
                Value::Number(n, _) => n.clone(),
                Value::SingleQuotedString(s) => s.clone(),
                _ => String::new(),
            },
            [Expr::Identifier(i)] if i.value.eq_ignore_ascii_case("default") => "0".into(),
            _ => String::new(),
        };
        if let Some(name) = bound {
            let default = matches!(values.as_slice(),
                [Expr::Identifier(i)] if i.value.eq_ignore_ascii_case("default"));
            let value = if default {
                None
            } else {
                Some(parse_bound(name, &text)?)
            };
            let mut bounds = lock(&self.result_bounds);
            match name {
                MAX_RESULT_ROWS => bounds.rows = value,
                _ => bounds.bytes = value,
            }
            return Ok(true);
        }
        let timeout = parse_timeout(&text)?;
        *lock(&self.statement_timeout) = (!timeout.is_zero()).then_some(timeout);
        Ok(true)
    }
}

/// A count for a result bound: a non-negative integer (0: no bound).
fn parse_bound(name: &str, text: &str) -> Result<u64> {
    text.trim().parse::<u64>().map_err(|_| {
        Error::invalid_input(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!(
                "invalid value for parameter \"{name}\": \"{text}\"; give a number of \
                 rows or bytes, 0 for no bound, or DEFAULT"
            ),
        )
    })
}

/// `1000`, `'1000ms'`, `'5s'`, `'2min'`, `'1h'` as a duration (a bare number is in
/// milliseconds, as in PostgreSQL).
fn parse_timeout(text: &str) -> Result<Duration> {
    let bad = || {
        Error::invalid_input(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!(
                "invalid value for parameter \"statement_timeout\": \"{text}\"; \
                 give milliseconds or a number with ms, s, min or h"
            ),
        )
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..split].parse().map_err(|_| bad())?;
    let millis = match t[split..].trim() {
        "" | "ms" => n,
        "s" => n.saturating_mul(1000),
        "min" => n.saturating_mul(60_000),
        "h" => n.saturating_mul(3_600_000),
        _ => return Err(bad()),
    };
    Ok(Duration::from_millis(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_statement_timeout_takes_postgres_spellings() {
        let s = Session::new(None);
        let select = crate::sql::parse_one("SELECT 1").unwrap();
        assert_eq!(s.timeout_for(&select), None);
        for (sql, want) in [
            ("SET statement_timeout = 1500", Some(1500)),
            ("SET statement_timeout TO '2s'", Some(2000)),
            ("SET statement_timeout = '1min'", Some(60_000)),
            ("SET statement_timeout = 0", None),
        ] {
            let stmt = crate::sql::parse_one(sql).unwrap();
            assert!(s.apply_set(&stmt).unwrap(), "{sql}");
            let got = s.timeout_for(&select).map(|d| d.as_millis() as u64);
            assert_eq!(got, want, "{sql}");
        }
        let bad = crate::sql::parse_one("SET statement_timeout = '5 parsecs'").unwrap();
        assert_eq!(s.apply_set(&bad).unwrap_err().sqlstate(), "22023");
        let rows = crate::sql::parse_one("SET saql.max_result_rows = 10").unwrap();
        assert!(s.apply_set(&rows).unwrap());
        assert_eq!(s.result_bounds().rows, Some(10));
        let rows = crate::sql::parse_one("SET saql.max_result_rows TO DEFAULT").unwrap();
        assert!(s.apply_set(&rows).unwrap());
        assert_eq!(s.result_bounds().rows, None);
        let bad = crate::sql::parse_one("SET saql.max_result_bytes = 'lots'").unwrap();
        assert_eq!(s.apply_set(&bad).unwrap_err().sqlstate(), "22023");
        let other = crate::sql::parse_one("SET search_path = public").unwrap();
        assert!(!s.apply_set(&other).unwrap());
    }
}
