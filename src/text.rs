//! Values as PostgreSQL writes them as text, for every output: the wire (text format), COPY TO
//! and the files `saql run` writes. [`write_float`] is the one formatter of floats;
//! timestamps have theirs in [`crate::time::write_timestamp`].
//!
//! Floats follow PostgreSQL 12 and later (`extra_float_digits` ≥ 1, the default and what the
//! drivers set): the shortest digits that read back to the same value, in fixed notation when
//! the decimal exponent is in `-4..15` (`-4..6` for `real`) and as `1.5e+21` otherwise, with
//! `NaN`, `Infinity`, `-Infinity` and `-0`. Nothing is allocated per value.

use std::fmt::{self, Write as _};

/// A float type PostgreSQL has: `real` (f32) or `double precision` (f64).
pub trait PgFloat: Copy + fmt::LowerExp {
    /// The decimal exponent from which the value is written in exponent notation (C's
    /// `DBL_DIG`/`FLT_DIG`, as in printf's `%g`).
    const DIG: i32;
    /// The value widened to f64 (exactly), for its class and sign.
    fn wide(self) -> f64;
}

impl PgFloat for f64 {
    const DIG: i32 = 15;
    fn wide(self) -> f64 {
        self
    }
}

impl PgFloat for f32 {
    const DIG: i32 = 6;
    fn wide(self) -> f64 {
        f64::from(self)
    }
}

/// The longest text [`write_float`] writes (`-2.2250738585072014e-308`).
pub const FLOAT_TEXT_MAX: usize = 25;

/// Appends `value` as PostgreSQL's text output of `real`/`double precision` writes it.
pub fn write_float<F: PgFloat>(out: &mut String, value: F) {
    let wide = value.wide();
    if wide.is_nan() {
        return out.push_str("NaN");
    }
    if wide.is_infinite() {
        return out.push_str(if wide > 0.0 { "Infinity" } else { "-Infinity" });
    }
    if wide == 0.0 {
        return out.push_str(if wide.is_sign_negative() { "-0" } else { "0" });
    }
    // The shortest round-trip digits, as `d.ddde-x`: std's exponent form is exactly that.
    let mut sci = StackText::default();
    let _ = write!(sci, "{value:e}");
    let sci = sci.as_str();
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let (first, rest) = mantissa.split_at(1);
    let rest = rest.strip_prefix('.').unwrap_or(rest);
    if negative {
        out.push('-');
    }
    if (-4..F::DIG).contains(&exponent) {
        write_fixed(out, first, rest, exponent);
    } else {
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push_str(if exponent < 0 { "e-" } else { "e+" });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        let _ = write!(out, "{magnitude}");
    }
}

/// Writes the digits `first` `rest` (value `first.rest × 10^exponent`) in fixed notation.
fn write_fixed(out: &mut String, first: &str, rest: &str, exponent: i32) {
    if exponent < 0 {
        out.push_str("0.");
        for _ in 1..exponent.unsigned_abs() {
            out.push('0');
        }
        out.push_str(first);
        out.push_str(rest);
        return;
    }
    let whole = exponent as usize;
    out.push_str(first);
    if rest.len() <= whole {
        out.push_str(rest);
        for _ in rest.len()..whole {
            out.push('0');
        }
    } else {
        out.push_str(&rest[..whole]);
        out.push('.');
        out.push_str(&rest[whole..]);
    }
}

/// A float's text on the stack: std writes into it without allocating.
#[derive(Default)]
struct StackText {
    bytes: [u8; 32],
    len: usize,
}

impl StackText {
    fn as_str(&self) -> &str {
        // Only whole `&str`s were copied in.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<F: PgFloat>(v: F) -> String {
        let mut s = String::new();
        write_float(&mut s, v);
        s
    }

    #[test]
    fn doubles_print_as_postgresql_does() {
        let cases: &[(f64, &str)] = &[
            (0.1 + 0.2, "0.30000000000000004"),
            (1e21, "1e+21"),
            (1e15, "1e+15"),
            (1e14, "100000000000000"),
            (123456789012345.6, "123456789012345.6"),
            (-0.0, "-0"),
            (0.0, "0"),
            (100.0, "100"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-1.5e-7, "-1.5e-07"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-2.2250738585072014e-308, "-2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for &(v, want) in cases {
            assert_eq!(text(v), want, "{v:e}");
            assert!(text(v).len() <= FLOAT_TEXT_MAX);
        }
    }

    #[test]
    fn reals_switch_to_exponents_at_a_million() {
        assert_eq!(text(100000f32), "100000");
        assert_eq!(text(1e6f32), "1e+06");
        assert_eq!(text(0.1f32), "0.1");
        assert_eq!(text(1.1f32), "1.1");
        assert_eq!(text(-3.4028235e38f32), "-3.4028235e+38");
    }

    #[test]
    fn the_text_reads_back_to_the_same_value() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if v.is_finite() {
                let t = text(v);
                assert_eq!(t.parse::<f64>().ok(), Some(v), "{t}");
            }
        }
    }
}
