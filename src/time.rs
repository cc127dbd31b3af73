//! Stream time: event timestamps, watermarks and durations, as their own types rather than bare
//! integers. Every timestamp in saql is nanoseconds since the Unix epoch, as Arrow's
//! `Timestamp(Nanosecond, _)` stores it.
//!
//! [`write_timestamp`] is the one formatter of timestamps as text (files, the wire, COPY TO,
//! messages): digits written straight into the caller's buffer, no format string parsed and
//! nothing allocated per value.

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
                let mut text = String::with_capacity(TIMESTAMP_TEXT_MAX);
                write_timestamp(&mut text, n, Fraction::Nanos);
                f.write_str(&text)
            }
        }
    }
}

/// The longest text [`write_timestamp`] writes.
pub const TIMESTAMP_TEXT_MAX: usize = "2262-04-11 23:47:16.854775807".len();

/// How [`write_timestamp`] writes the fraction of a second: PostgreSQL's style, trailing zeros
/// dropped (`.5`, `.00025`) and none when it is zero, in one of two precisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fraction {
    /// Nanoseconds, all that saql holds (`.000000001`): files and messages.
    Nanos,
    /// Microseconds, the nanoseconds below cut off (towards the past): PostgreSQL's
    /// precision, on the wire and in COPY TO.
    Micros,
}

/// Appends `nanos` (since the epoch, UTC) as `YYYY-MM-DD HH:MM:SS[.fraction]`.
pub fn write_timestamp(out: &mut String, nanos: i64, fraction: Fraction) {
    let seconds = nanos.div_euclid(1_000_000_000);
    let mut sub = nanos.rem_euclid(1_000_000_000) as u32;
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400) as u32;
    let (year, month, day) = civil_from_days(days);
    let mut buf = [0u8; TIMESTAMP_TEXT_MAX];
    put_digits(&mut buf[0..4], year as u32);
    buf[4] = b'-';
    put_digits(&mut buf[5..7], month);
    buf[7] = b'-';
    put_digits(&mut buf[8..10], day);
    buf[10] = b' ';
    put_digits(&mut buf[11..13], of_day / 3600);
    buf[13] = b':';
    put_digits(&mut buf[14..16], of_day / 60 % 60);
    buf[16] = b':';
    put_digits(&mut buf[17..19], of_day % 60);
    let mut len = 19;
    let mut digits = 9;
    if fraction == Fraction::Micros {
        sub /= 1_000;
        digits = 6;
    }
    while digits > 0 && sub.is_multiple_of(10) {
        sub /= 10;
        digits -= 1;
    }
    if digits > 0 {
        buf[19] = b'.';
        put_digits(&mut buf[20..20 + digits], sub);
        len = 20 + digits;
    }
    // Only ASCII digits and separators were written.
    out.push_str(std::str::from_utf8(&buf[..len]).unwrap_or_default());
}

/// Writes `value` as exactly `out.len()` decimal digits (zero-padded, high digits dropped).
fn put_digits(out: &mut [u8], mut value: u32) {
    for slot in out.iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The proleptic Gregorian (year, month, day) of a day counted from 1970-01-01, by the
/// usual era arithmetic: 400-year eras of 146,097 days starting on March 1st.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Nanoseconds in a duration, saturating at `i64::MAX`.
pub fn duration_nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The error for event-time arithmetic that would leave the range of timestamps (about
/// 1677-09-21 to 2262-04-11): a window bound, a session's end. Names the row's time and the
/// width that overflowed (22008, PostgreSQL's "datetime field overflow").
pub fn bound_overflow(nanos: i64, width: i64, what: &str) -> crate::Error {
    crate::Error::invalid_input(
        crate::error::sqlstate::DATETIME_FIELD_OVERFLOW,
        format!(
            "timestamp {} is too near the end of the timestamp range for {what} of {:?}: \
             its bounds would fall outside 1677-09-21 .. 2262-04-11",
            EventTime(nanos),
            Duration::from_nanos(width.unsigned_abs()),
        ),
    )
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

/// A timestamp as PostgreSQL holds it: saql keeps nanoseconds, PostgreSQL microseconds, so
/// the nanoseconds below the microsecond are cut off (rounded down, towards the past: a row
/// never appears to belong to a later window than the one it was counted in).
pub fn wire_timestamp(nanos: i64) -> chrono::DateTime<chrono::Utc> {
    // In microseconds, so that the earliest instants do not overflow when scaled back.
    chrono::DateTime::<chrono::Utc>::from_timestamp_micros(nanos.div_euclid(1000))
        .unwrap_or_else(|| chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(nanos))
}

/// A timestamp in PostgreSQL's text output: `2026-12-01 13:47:58.167865`, microseconds at
/// most, trailing zeros of the fraction dropped (none when it is zero), `+00` after a
/// `timestamptz` (saql's sessions are in UTC).
pub fn timestamp_text(nanos: i64, with_zone: bool) -> String {
    let mut s = String::with_capacity(TIMESTAMP_TEXT_MAX + 3);
    write_timestamp(&mut s, nanos, Fraction::Micros);
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
    fn wire_timestamps_round_down_to_the_microsecond_at_both_ends() {
        for nanos in [i64::MIN, i64::MIN + 999, -1, 0, 1_999, i64::MAX] {
            let t = wire_timestamp(nanos);
            let micros = nanos.div_euclid(1000);
            assert_eq!(t.timestamp_micros(), micros, "{nanos}");
            assert_eq!(t.timestamp_subsec_nanos() % 1000, 0, "{nanos}");
        }
    }

    #[test]
    fn displays_as_utc() {
        assert_eq!(
            EventTime(1_500_000_000).to_string(),
            "1970-01-01 00:00:01.5"
        );
        assert!(Watermark(EventTime(10)).is_late(EventTime(9)));
        assert_eq!(EventTime::MIN.to_string(), "-infinity");
    }

    /// Every instant, against chrono's `%Y-%m-%d %H:%M:%S%.9f` trimmed, in both precisions.
    #[test]
    fn timestamps_match_chrono() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut samples = vec![i64::MIN, i64::MAX, 0, -1, 1, 951_782_400_000_000_000];
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let rounding = [1, 1_000, 1_000_000, 1_000_000_000][(rng % 4) as usize];
            samples.push((rng as i64) / rounding * rounding);
        }
        for nanos in samples {
            let dt = chrono::DateTime::from_timestamp_nanos(nanos).naive_utc();
            let mut full = String::new();
            write_timestamp(&mut full, nanos, Fraction::Nanos);
            let expected = dt.format("%Y-%m-%d %H:%M:%S%.9f").to_string();
            assert_eq!(full, expected.trim_end_matches('0').trim_end_matches('.'));
            // chrono cannot hold the microsecond before i64::MIN nanoseconds.
            let Some(floor) = nanos.div_euclid(1000).checked_mul(1000) else {
                continue;
            };
            let micros = chrono::DateTime::from_timestamp_nanos(floor);
            let mut expected = micros
                .naive_utc()
                .format("%Y-%m-%d %H:%M:%S%.6f")
                .to_string();
            expected = expected
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string();
            let mut wire = String::new();
            write_timestamp(&mut wire, nanos, Fraction::Micros);
            assert_eq!(wire, expected, "{nanos}");
        }
        assert!(!Watermark(EventTime(10)).is_late(EventTime(10)));
    }
}
