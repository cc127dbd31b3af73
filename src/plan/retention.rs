//! How long a stream keeps its history (`WITH (history = '30 days')`, `'10 GB'` or `'off'`):
//! a span of event time behind the newest event, or a size on disk.

use std::time::Duration;

use crate::error::{sqlstate, Error, Result};
use crate::sql::interval::parse_duration;

/// What a stream's history keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Rows whose event time is within this span of the stream's newest event time (of their
    /// arrival, for a stream without event time).
    Span(Duration),
    /// The newest segments within this many bytes on disk.
    Bytes(u64),
}

/// A stream's `history` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistorySetting {
    /// Not set: the server's default (`serve --history`).
    #[default]
    ServerDefault,
    /// `'off'`: no history.
    Off,
    /// Kept as said.
    Keep(Retention),
}

impl HistorySetting {
    /// The retention in effect, given the server's default.
    pub fn resolve(self, server_default: Option<Retention>) -> Option<Retention> {
        match self {
            HistorySetting::ServerDefault => server_default,
            HistorySetting::Off => None,
            HistorySetting::Keep(r) => Some(r),
        }
    }

    /// Reads a `history` option's value.
    pub fn parse(text: &str) -> Result<HistorySetting> {
        Ok(Retention::parse(text)?.map_or(HistorySetting::Off, HistorySetting::Keep))
    }
}

impl Retention {
    /// Reads a `history` setting: an interval (`'30 days'`, `'12h'`), a size (`'500 MB'`,
    /// `'10 GB'`: units B, KB, MB, GB, TB, powers of 1024) or `'off'` (None).
    pub fn parse(text: &str) -> Result<Option<Retention>> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("off") || t == "0" {
            return Ok(None);
        }
        if let Some(bytes) = parse_size(t) {
            return match bytes {
                0 => Ok(None),
                n => Ok(Some(Retention::Bytes(n))),
            };
        }
        match parse_duration(t) {
            Ok(d) if d.is_zero() => Ok(None),
            Ok(d) => Ok(Some(Retention::Span(d))),
            Err(_) => Err(Error::invalid_input(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!(
                    "invalid history \"{text}\": write a span of event time ('30 days', '12 \
                     hours'), a size ('500 MB', '10 GB') or 'off'"
                ),
            )),
        }
    }
}

impl std::fmt::Display for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Retention::Span(d) => write!(f, "{}", humantime_span(*d)),
            Retention::Bytes(n) => write!(f, "{n} bytes"),
        }
    }
}

/// `d` in the largest whole unit that states it exactly (`30 days`, `90 minutes`).
fn humantime_span(d: Duration) -> String {
    let s = d.as_secs();
    if d.subsec_nanos() != 0 {
        return format!("{} seconds", d.as_secs_f64());
    }
    for (unit, name) in [
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ] {
        if s >= unit && s.is_multiple_of(unit) {
            let plural = if s / unit == 1 { "" } else { "s" };
            return format!("{} {name}{plural}", s / unit);
        }
    }
    format!("{s} seconds")
}

/// `'500 MB'` as bytes; None unless it is a number with a byte unit.
fn parse_size(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|&i| i > 0)?;
    let amount: f64 = text[..split].parse().ok()?;
    let scale: u64 = match text[split..].trim().to_ascii_uppercase().as_str() {
        "B" => 1,
        "KB" | "KIB" => 1 << 10,
        "MB" | "MIB" => 1 << 20,
        "GB" | "GIB" => 1 << 30,
        "TB" | "TIB" => 1 << 40,
        _ => return None,
    };
    let bytes = amount * scale as f64;
    (bytes.is_finite() && bytes < u64::MAX as f64).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_sizes_and_off() {
        let day = Duration::from_secs(86_400);
        assert_eq!(
            Retention::parse("30 days").unwrap(),
            Some(Retention::Span(30 * day))
        );
        assert_eq!(
            Retention::parse("12h").unwrap(),
            Some(Retention::Span(day / 2))
        );
        assert_eq!(
            Retention::parse("500 MB").unwrap(),
            Some(Retention::Bytes(500 << 20))
        );
        assert_eq!(
            Retention::parse("1.5GB").unwrap(),
            Some(Retention::Bytes(3 << 29))
        );
        assert_eq!(Retention::parse("off").unwrap(), None);
        assert_eq!(Retention::parse("0").unwrap(), None);
        let e = Retention::parse("forever").unwrap_err().to_string();
        assert!(e.contains("invalid history \"forever\""), "{e}");
        assert!(Retention::parse("10 parsecs").is_err());
        assert_eq!(Retention::Span(30 * day).to_string(), "30 days");
        assert_eq!(
            Retention::Span(Duration::from_secs(90)).to_string(),
            "90 seconds"
        );
    }
}
