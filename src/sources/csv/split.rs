//! Splitting one record into fields as PostgreSQL's COPY does, in the `text` format
//! (CopyReadAttributesText: delimiters, backslash escapes, the NULL string) and the `csv`
//! format (CopyReadAttributesCSV: quotes, a distinct escape, only unquoted NULLs). A field is
//! a range of the record while it is an unchanged run of it, and is copied to a scratch
//! buffer only when quotes or escapes change it.

use super::CopyOptions;
use crate::error::sqlstate;
use crate::error::{Error, Result};

/// One field of the current record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Span {
    /// SQL NULL.
    Null,
    /// Bytes `start..end` of the record, unchanged.
    Input(usize, usize),
    /// Bytes `start..end` of the scratch buffer.
    Scratch(usize, usize),
}

/// A field's decoded bytes: a range of the record while they are an unchanged run of it,
/// moved into the scratch buffer once quotes or escapes make them differ.
enum FieldOut {
    Input(usize, usize),
    Scratch(usize),
}

impl FieldOut {
    /// Output the record's bytes `from..to`.
    fn input(&mut self, from: usize, to: usize, record: &[u8], scratch: &mut Vec<u8>) {
        if from == to {
            return;
        }
        match self {
            FieldOut::Input(start, end) if *start == *end => (*start, *end) = (from, to),
            FieldOut::Input(_, end) if *end == from => *end = to,
            FieldOut::Input(..) => {
                self.move_to_scratch(record, scratch);
                scratch.extend_from_slice(&record[from..to]);
            }
            FieldOut::Scratch(_) => scratch.extend_from_slice(&record[from..to]),
        }
    }

    /// Output a byte that is not in the record (a decoded escape).
    fn byte(&mut self, byte: u8, record: &[u8], scratch: &mut Vec<u8>) {
        self.move_to_scratch(record, scratch);
        scratch.push(byte);
    }

    fn move_to_scratch(&mut self, record: &[u8], scratch: &mut Vec<u8>) {
        if let FieldOut::Input(start, end) = *self {
            *self = FieldOut::Scratch(scratch.len());
            scratch.extend_from_slice(&record[start..end]);
        }
    }

    fn span(&self, scratch: &[u8]) -> Span {
        match *self {
            FieldOut::Input(start, end) => Span::Input(start, end),
            FieldOut::Scratch(start) => Span::Scratch(start, scratch.len()),
        }
    }
}

/// The index of the first byte at or after `from` that `stop` accepts, or the record's end.
fn run_until(record: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> usize {
    record[from..]
        .iter()
        .position(|&b| stop(b))
        .map_or(record.len(), |offset| from + offset)
}

/// Split a text-format record as PostgreSQL's CopyReadAttributesText does: the raw field is
/// compared with the NULL string, then `\b \f \n \r \t \v`, octal `\NNN`, hex `\xHH` are
/// decoded and a backslash before any other byte yields that byte.
pub(super) fn split_text(
    record: &[u8],
    options: &CopyOptions,
    fields: &mut Vec<Span>,
    scratch: &mut Vec<u8>,
) {
    fields.clear();
    scratch.clear();
    let delimiter = options.delimiter;
    let mut i = 0;
    loop {
        let start = i;
        let mut out = FieldOut::Input(i, i);
        let (end, more) = loop {
            let run_end = run_until(record, i, |b| b == delimiter || b == b'\\');
            out.input(i, run_end, record, scratch);
            i = run_end;
            match record.get(i) {
                None => break (i, false),
                Some(&b) if b == delimiter => break (i, true),
                Some(_) => {}
            }
            let Some(&escaped) = record.get(i + 1) else {
                // A lone backslash at the end of the line is dropped.
                break (i, false);
            };
            let digit =
                |at: usize, radix: u32| record.get(at).and_then(|&b| (b as char).to_digit(radix));
            let decoded = match escaped {
                b'0'..=b'7' => {
                    let mut value = u32::from(escaped - b'0');
                    i += 2;
                    for _ in 0..2 {
                        let Some(d) = digit(i, 8) else { break };
                        value = value * 8 + d;
                        i += 1;
                    }
                    (value & 0xff) as u8
                }
                b'x' if digit(i + 2, 16).is_some() => {
                    let mut value = 0;
                    i += 2;
                    for _ in 0..2 {
                        let Some(d) = digit(i, 16) else { break };
                        value = value * 16 + d;
                        i += 1;
                    }
                    value as u8
                }
                other => {
                    let byte = match other {
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'v' => 0x0b,
                        _ => {
                            out.input(i + 1, i + 2, record, scratch);
                            i += 2;
                            continue;
                        }
                    };
                    i += 2;
                    byte
                }
            };
            out.byte(decoded, record, scratch);
        };
        let raw = &record[start..end];
        fields.push(if raw == options.null.as_bytes() {
            Span::Null
        } else {
            out.span(scratch)
        });
        if !more {
            return;
        }
        i = end + 1;
    }
}

/// Split a csv-format record as PostgreSQL's CopyReadAttributesCSV does: quotes may open and
/// close anywhere in a field, inside quotes the escape before a quote or an escape yields it,
/// and only an unquoted field equal to the NULL string is NULL.
pub(super) fn split_csv(
    record: &[u8],
    options: &CopyOptions,
    fields: &mut Vec<Span>,
    scratch: &mut Vec<u8>,
) -> Result<()> {
    fields.clear();
    scratch.clear();
    let CopyOptions {
        delimiter,
        quote,
        escape,
        ..
    } = *options;
    let mut i = 0;
    loop {
        let start = i;
        let mut out = FieldOut::Input(i, i);
        let mut saw_quote = false;
        let (end, more) = loop {
            let run_end = run_until(record, i, |b| b == delimiter || b == quote);
            out.input(i, run_end, record, scratch);
            i = run_end;
            match record.get(i) {
                None => break (i, false),
                Some(&b) if b == delimiter => break (i, true),
                Some(_) => {}
            }
            saw_quote = true;
            i += 1;
            loop {
                let run_end = run_until(record, i, |b| b == quote || b == escape);
                out.input(i, run_end, record, scratch);
                i = run_end;
                let Some(&b) = record.get(i) else {
                    return Err(Error::invalid_input(
                        sqlstate::BAD_COPY_FILE_FORMAT,
                        "unterminated CSV quoted field",
                    ));
                };
                let next = record.get(i + 1).copied();
                if b == escape && (next == Some(escape) || next == Some(quote)) {
                    out.input(i + 1, i + 2, record, scratch);
                    i += 2;
                } else if b == quote {
                    i += 1;
                    break;
                } else {
                    out.input(i, i + 1, record, scratch);
                    i += 1;
                }
            }
        };
        let raw = &record[start..end];
        fields.push(if !saw_quote && raw == options.null.as_bytes() {
            Span::Null
        } else {
            out.span(scratch)
        });
        if !more {
            return Ok(());
        }
        i = end + 1;
    }
}
