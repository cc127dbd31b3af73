//! Stream time: event timestamps, watermarks and durations, as their own types rather than bare
//! integers. Every timestamp in saql is nanoseconds since the Unix epoch, as Arrow's
//! `Timestamp(Nanosecond, _)` stores it.

use std::fmt;
use std::time::Duration;

/// An event's timestamp: nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EventTime(pub i64);

impl EventTime {
    /// The earliest representable time; the watermark of a stream that has seen nothing.
    pub const MIN: EventTime = EventTime(i64::MIN);
    /// The latest representable time; the watermark at the end of all input.
    pub const MAX: EventTime = EventTime(i64::MAX);

    /// Nanoseconds since the epoch.
    pub fn nanos(self) -> i64 {
        self.0
    }

    /// This time moved later by `d` (saturating).
    pub fn plus(self, d: Duration) -> EventTime {
        EventTime(self.0.saturating_add(duration_nanos(d)))
    }

    /// This time moved earlier by `d` (saturating).
    pub fn minus(self, d: Duration) -> EventTime {
        EventTime(self.0.saturating_sub(duration_nanos(d)))
    }

    /// The current wall-clock time.
    pub fn now() -> EventTime {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        EventTime(duration_nanos(since))
    }
}

impl fmt::Display for EventTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EventTime::MIN => f.write_str("-infinity"),
            EventTime::MAX => f.write_str("infinity"),
            EventTime(n) => {
                let dt = chrono::DateTime::from_timestamp_nanos(n);
                write!(f, "{}", dt.naive_utc().format("%Y-%m-%d %H:%M:%S%.f"))
            }
        }
    }
}

/// Nanoseconds in a duration, saturating at `i64::MAX`.
pub fn duration_nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// A stream's watermark: the claim that no more rows with an event time before it will arrive.
/// Windows whose end is at or before the watermark are complete and may be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Watermark(pub EventTime);

impl Watermark {
    /// The watermark of a stream that has seen nothing yet.
    pub const START: Watermark = Watermark(EventTime::MIN);
    /// The watermark at the end of all input: every window closes.
    pub const END: Watermark = Watermark(EventTime::MAX);

    /// Whether a row with this event time arrives behind the watermark.
    pub fn is_late(self, t: EventTime) -> bool {
        t < self.0
    }
}

impl fmt::Display for Watermark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

const DATE_TIME_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// A timestamp as PostgreSQL holds it: saql keeps nanoseconds, PostgreSQL microseconds, so
/// the nanoseconds below the microsecond are cut off (rounded down, towards the past: a row
/// never appears to belong to a later window than the one it was counted in).
pub fn wire_timestamp(nanos: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(nanos.div_euclid(1000) * 1000)
}

/// A timestamp in PostgreSQL's text output: `2026-12-01 13:47:58.167865`, microseconds at
/// most, trailing zeros of the fraction dropped (none when it is zero), `+00` after a
/// `timestamptz` (saql's sessions are in UTC).
pub fn timestamp_text(nanos: i64, with_zone: bool) -> String {
    let dt = wire_timestamp(nanos);
    let mut s = dt.naive_utc().format(DATE_TIME_FORMAT).to_string();
    let micros = dt.timestamp_subsec_micros();
    if micros != 0 {
        let fraction = format!("{micros:06}");
        s.push('.');
        s.push_str(fraction.trim_end_matches('0'));
    }
    if with_zone {
        s.push_str("+00");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(EventTime::MAX.plus(Duration::from_secs(1)), EventTime::MAX);
        assert_eq!(EventTime::MIN.minus(Duration::from_secs(1)), EventTime::MIN);
        assert_eq!(EventTime(10).plus(Duration::from_nanos(5)), EventTime(15));
    }

    #[test]
    fn displays_as_utc() {
        assert_eq!(
            EventTime(1_500_000_000).to_string(),
            "1970-01-01 00:00:01.500"
        );
        assert!(Watermark(EventTime(10)).is_late(EventTime(9)));
        assert!(!Watermark(EventTime(10)).is_late(EventTime(10)));
    }
}
