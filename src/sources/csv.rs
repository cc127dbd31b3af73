//! PostgreSQL `COPY ... FROM STDIN` decoding, formats `text` and `csv`, into one Arrow
//! `RecordBatch`. Data arrives in chunks of any size (a chunk may end mid-line or inside a
//! quoted field); each complete record is split into fields borrowed from the input buffer
//! (copied only when escapes or quotes change them) and parsed by [`BatchBuilder`], so errors
//! carry the 1-based input line where the record starts and the column the value was for.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::sources::value::BatchBuilder;

/// The data format of a COPY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    /// PostgreSQL's `text` format: delimited fields, backslash escapes, `\N` for NULL.
    Text,
    /// RFC 4180-style CSV as PostgreSQL reads it: quoted fields, unquoted empty field = NULL.
    Csv,
}

/// The options of a COPY, as in `COPY s FROM STDIN WITH (FORMAT csv, HEADER, ...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOptions {
    /// The data format.
    pub format: CopyFormat,
    /// Whether the first line is a header to skip.
    pub header: bool,
    /// The field separator (one ASCII byte).
    pub delimiter: u8,
    /// The CSV quote character (one ASCII byte; unused in text format).
    pub quote: u8,
    /// The CSV escape character inside quotes (one ASCII byte; unused in text format).
    pub escape: u8,
    /// The unquoted spelling of NULL, compared with the raw field before any decoding.
    pub null: String,
}

impl CopyOptions {
    /// PostgreSQL's defaults for `FORMAT text`: tab-delimited, `\N` for NULL.
    pub fn text() -> Self {
        CopyOptions {
            format: CopyFormat::Text,
            header: false,
            delimiter: b'\t',
            quote: b'"',
            escape: b'"',
            null: "\\N".to_string(),
        }
    }

    /// PostgreSQL's defaults for `FORMAT csv`: comma-delimited, `"` quote and escape, an
    /// unquoted empty field for NULL.
    pub fn csv() -> Self {
        CopyOptions {
            format: CopyFormat::Csv,
            header: false,
            delimiter: b',',
            quote: b'"',
            escape: b'"',
            null: String::new(),
        }
    }

    /// The errors PostgreSQL raises for option combinations that make the data ambiguous.
    fn validate(&self) -> Result<()> {
        let bad = |message: &str| Err(Error::invalid_input("22023", message));
        let csv = self.format == CopyFormat::Csv;
        let special = [self.delimiter].into_iter().chain(
            csv.then_some([self.quote, self.escape])
                .into_iter()
                .flatten(),
        );
        for byte in special {
            if !byte.is_ascii() {
                return bad("COPY delimiter, quote and escape must be single one-byte characters");
            }
            if byte == b'\n' || byte == b'\r' {
                return bad(
                    "COPY delimiter, quote and escape cannot be newline or carriage return",
                );
            }
        }
        if self.null.contains(['\n', '\r']) {
            return bad("COPY null representation cannot use newline or carriage return");
        }
        if self.null.as_bytes().contains(&self.delimiter) {
            return bad("COPY delimiter character must not appear in the NULL specification");
        }
        if csv && self.delimiter == self.quote {
            return bad("COPY delimiter and quote must be different");
        }
        if csv && self.null.as_bytes().contains(&self.quote) {
            return bad("CSV quote character must not appear in the NULL specification");
        }
        if !csv && b"\\.abcdefghijklmnopqrstuvwxyz0123456789".contains(&self.delimiter) {
            return Err(Error::invalid_input(
                "22023",
                format!("COPY delimiter cannot be \"{}\"", self.delimiter as char),
            ));
        }
        Ok(())
    }
}

impl Default for CopyOptions {
    /// `FORMAT text`, PostgreSQL's default.
    fn default() -> Self {
        CopyOptions::text()
    }
}

/// Decodes COPY data that arrives in arbitrary chunks (a chunk may end mid-line or
/// mid-quoted-field) into one batch of the target schema.
///
/// After an error the decoder is left mid-record; the COPY is failed and the decoder dropped.
pub struct CopyDecoder {
    options: CopyOptions,
    /// The CSV escape when it differs from the quote (PostgreSQL ignores it when they match
    /// while finding where a record ends).
    distinct_escape: Option<u8>,
    /// For each input field, the schema column it fills.
    columns: Vec<usize>,
    /// Schema columns no input field fills: NULL on every row.
    unlisted: Vec<usize>,
    builder: BatchBuilder,
    /// Input not yet decoded: the start of an incomplete record.
    buf: Vec<u8>,
    /// How far the search for the end of the record at the front of `buf` got.
    scan: Scan,
    /// The 1-based input line where the record at the front of `buf` starts.
    line: u64,
    header_pending: bool,
    /// Whether the end marker `\.` was seen; everything after it is ignored.
    ended: bool,
    /// The current record's fields, reused across records.
    fields: Vec<Span>,
    /// Decoded bytes of the current record's fields that differ from the input.
    scratch: Vec<u8>,
}

/// Where the search for a record's end stopped, so a chunk boundary never rescans.
#[derive(Debug, Default, Clone, Copy)]
struct Scan {
    /// Index into `buf` of the next byte to look at.
    pos: usize,
    /// Newlines inside the record so far (quoted in csv, backslash-escaped in text).
    newlines: u64,
    /// csv: inside a quoted field.
    in_quotes: bool,
    /// csv: the last byte was an escape inside quotes; text: the last byte was a backslash.
    escaped: bool,
}

/// One field of the current record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Span {
    /// SQL NULL.
    Null,
    /// Bytes `start..end` of the record, unchanged.
    Input(usize, usize),
    /// Bytes `start..end` of the scratch buffer.
    Scratch(usize, usize),
}

impl CopyDecoder {
    /// A decoder into `schema`. `columns`: for each field of an input line, the index of the
    /// schema column it fills (`COPY s (b, a) FROM STDIN`); schema columns not listed get NULL
    /// (and so 23502 if non-nullable).
    pub fn new(schema: SchemaRef, columns: Vec<usize>, options: CopyOptions) -> Result<Self> {
        options.validate()?;
        let width = schema.fields().len();
        let mut listed = vec![false; width];
        for &column in &columns {
            match listed.get_mut(column) {
                None => {
                    return Err(Error::Internal(format!(
                        "COPY column index {column} is outside the schema"
                    )))
                }
                Some(true) => {
                    return Err(Error::plan(
                        "42701",
                        format!(
                            "column \"{}\" specified more than once",
                            schema.field(column).name()
                        ),
                    ))
                }
                Some(seen) => *seen = true,
            }
        }
        let unlisted = (0..width).filter(|&c| !listed[c]).collect();
        let distinct_escape = (options.escape != options.quote).then_some(options.escape);
        Ok(CopyDecoder {
            header_pending: options.header,
            options,
            distinct_escape,
            columns,
            unlisted,
            builder: BatchBuilder::new(schema)?,
            buf: Vec::new(),
            scan: Scan::default(),
            line: 1,
            ended: false,
            fields: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Decode every complete record in the data so far; keep the rest for the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        while !self.ended {
            let Some(newline) = self.find_record_end() else {
                break;
            };
            let end = if newline > start && self.buf[newline - 1] == b'\r' {
                newline - 1
            } else {
                newline
            };
            self.decode_record(start, end)?;
            start = newline + 1;
            self.scan = Scan {
                pos: start,
                ..Scan::default()
            };
        }
        if self.ended {
            self.buf = Vec::new();
            self.scan = Scan::default();
        } else {
            self.buf.drain(..start);
            self.scan.pos -= start;
        }
        Ok(())
    }

    /// Decode the final record (one without a trailing newline) and return all rows.
    pub fn finish(mut self) -> Result<RecordBatch> {
        if !self.ended && !self.buf.is_empty() {
            let end = match self.buf.last() {
                Some(b'\r') => self.buf.len() - 1,
                _ => self.buf.len(),
            };
            self.decode_record(0, end)?;
        }
        self.builder.finish()
    }

    /// The number of rows decoded so far.
    pub fn rows(&self) -> usize {
        self.builder.len()
    }

    /// The index of the newline that ends the record at the front of `buf`, resuming the
    /// search where the previous call stopped; None if the record is not complete yet.
    fn find_record_end(&mut self) -> Option<usize> {
        let scan = &mut self.scan;
        let quote = self.options.quote;
        let csv = self.options.format == CopyFormat::Csv;
        let found = self.buf[scan.pos..].iter().position(|&c| {
            if csv {
                // PostgreSQL's CopyReadLineText: an escape counts only inside quotes, and a
                // doubled escape cancels itself.
                if c == b'\n' && !scan.in_quotes {
                    return true;
                }
                if scan.in_quotes && Some(c) == self.distinct_escape {
                    scan.escaped = !scan.escaped;
                }
                if c == quote && !scan.escaped {
                    scan.in_quotes = !scan.in_quotes;
                }
                if Some(c) != self.distinct_escape {
                    scan.escaped = false;
                }
            } else if scan.escaped {
                scan.escaped = false;
            } else if c == b'\\' {
                scan.escaped = true;
            } else if c == b'\n' {
                return true;
            }
            scan.newlines += u64::from(c == b'\n');
            false
        });
        match found {
            Some(offset) => {
                scan.pos += offset;
                Some(scan.pos)
            }
            None => {
                scan.pos = self.buf.len();
                None
            }
        }
    }

    /// Decode the record in `buf[start..end]` (its line terminator excluded) into one row.
    fn decode_record(&mut self, start: usize, end: usize) -> Result<()> {
        let line = self.line;
        self.line += 1 + self.scan.newlines;
        let record = &self.buf[start..end];
        if record == b"\\." {
            self.ended = true;
            return Ok(());
        }
        if std::mem::take(&mut self.header_pending) {
            return Ok(());
        }
        let options = &self.options;
        match options.format {
            CopyFormat::Text => split_text(record, options, &mut self.fields, &mut self.scratch),
            CopyFormat::Csv => split_csv(record, options, &mut self.fields, &mut self.scratch)
                .map_err(|e| e.at_line(line))?,
        }
        let fields = &self.fields[..];
        let schema = self.builder.schema().clone();
        let empty_line_for_no_columns = self.columns.is_empty() && fields == [Span::Input(0, 0)];
        if fields.len() > self.columns.len() && !empty_line_for_no_columns {
            let e = Error::invalid_input("22P04", "extra data after last expected column");
            return Err(e.at_line(line));
        }
        if let Some(&missing) = self.columns.get(fields.len()) {
            let name = schema.field(missing).name();
            let e = Error::invalid_input("22P04", format!("missing data for column \"{name}\""));
            return Err(e.at_line(line));
        }
        for (field, &column) in fields.iter().zip(&self.columns) {
            let bytes = match *field {
                Span::Null => None,
                Span::Input(from, to) => record.get(from..to),
                Span::Scratch(from, to) => self.scratch.get(from..to),
            };
            let text = match bytes {
                None => None,
                Some(bytes) => Some(std::str::from_utf8(bytes).map_err(|e| {
                    invalid_utf8(bytes, e)
                        .in_column(schema.field(column).name())
                        .at_line(line)
                })?),
            };
            self.builder
                .push_text(column, text)
                .map_err(|e| e.at_line(line))?;
        }
        for &column in &self.unlisted {
            self.builder
                .push_text(column, None)
                .map_err(|e| e.at_line(line))?;
        }
        self.builder.finish_row()
    }
}

/// PostgreSQL's message for bytes that are not UTF-8, naming the offending sequence.
fn invalid_utf8(bytes: &[u8], error: std::str::Utf8Error) -> Error {
    let at = error.valid_up_to();
    let len = error.error_len().unwrap_or(bytes.len() - at);
    let shown: Vec<String> = bytes[at..at + len]
        .iter()
        .map(|b| format!("0x{b:02x}"))
        .collect();
    Error::invalid_input(
        "22021",
        format!(
            "invalid byte sequence for encoding \"UTF8\": {}",
            shown.join(" ")
        ),
    )
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
                self.to_scratch(record, scratch);
                scratch.extend_from_slice(&record[from..to]);
            }
            FieldOut::Scratch(_) => scratch.extend_from_slice(&record[from..to]),
        }
    }

    /// Output a byte that is not in the record (a decoded escape).
    fn byte(&mut self, byte: u8, record: &[u8], scratch: &mut Vec<u8>) {
        self.to_scratch(record, scratch);
        scratch.push(byte);
    }

    fn to_scratch(&mut self, record: &[u8], scratch: &mut Vec<u8>) {
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
fn split_text(record: &[u8], options: &CopyOptions, fields: &mut Vec<Span>, scratch: &mut Vec<u8>) {
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
fn split_csv(
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
                        "22P04",
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray,
        TimestampNanosecondArray,
    };
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use datafusion::scalar::ScalarValue;
    use proptest::prelude::*;

    use super::*;

    fn schema(fields: &[(&str, DataType, bool)]) -> SchemaRef {
        let fields: Vec<Field> = fields
            .iter()
            .map(|(name, ty, nullable)| Field::new(*name, ty.clone(), *nullable))
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// Two nullable text columns, a and b.
    fn text2() -> SchemaRef {
        schema(&[("a", DataType::Utf8, true), ("b", DataType::Utf8, true)])
    }

    fn decode_chunks(
        schema: SchemaRef,
        columns: Vec<usize>,
        options: CopyOptions,
        chunks: &[&[u8]],
    ) -> Result<RecordBatch> {
        let mut decoder = CopyDecoder::new(schema, columns, options)?;
        for chunk in chunks {
            decoder.feed(chunk)?;
        }
        decoder.finish()
    }

    fn decode(schema: SchemaRef, options: CopyOptions, input: &str) -> Result<RecordBatch> {
        let columns = (0..schema.fields().len()).collect();
        decode_chunks(schema, columns, options, &[input.as_bytes()])
    }

    /// The batch as rows of displayed values, NULL spelled `NULL`.
    fn rows(batch: &RecordBatch) -> Vec<Vec<String>> {
        (0..batch.num_rows())
            .map(|row| {
                batch
                    .columns()
                    .iter()
                    .map(|column| match ScalarValue::try_from_array(column, row) {
                        Ok(v) if v.is_null() => "NULL".to_string(),
                        Ok(v) => v.to_string(),
                        Err(e) => panic!("{e}"),
                    })
                    .collect()
            })
            .collect()
    }

    fn table(expected: &[&[&str]]) -> Vec<Vec<String>> {
        expected
            .iter()
            .map(|row| row.iter().map(|v| v.to_string()).collect())
            .collect()
    }

    /// SQLSTATE, message, column and line of an input error.
    fn failure(result: Result<RecordBatch>) -> (&'static str, String, Option<String>, Option<u64>) {
        match result {
            Err(Error::InvalidInput {
                sqlstate,
                message,
                column,
                line,
            }) => (sqlstate, message, column, line),
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn csv_null_is_unquoted_empty_and_quoted_empty_is_text() {
        let batch = decode(text2(), CopyOptions::csv(), ",\"\"\n\"\",\nx,\"y,z\"\n").unwrap();
        assert_eq!(
            rows(&batch),
            table(&[&["NULL", ""], &["", "NULL"], &["x", "y,z"]])
        );
        let options = CopyOptions {
            null: "NA".into(),
            ..CopyOptions::csv()
        };
        let batch = decode(text2(), options, "NA,\"NA\"\n,x\n").unwrap();
        assert_eq!(rows(&batch), table(&[&["NULL", "NA"], &["", "x"]]));
    }

    #[test]
    fn csv_quotes_escapes_and_embedded_newlines() {
        let input = "\"a\"\"b\",\"say \"\"hi\"\"\"\n\"multi\nline\",pre\"fix,ed\"post\n";
        let batch = decode(text2(), CopyOptions::csv(), input).unwrap();
        assert_eq!(
            rows(&batch),
            table(&[&["a\"b", "say \"hi\""], &["multi\nline", "prefix,edpost"]])
        );
        let options = CopyOptions {
            escape: b'\\',
            ..CopyOptions::csv()
        };
        let batch = decode(text2(), options, "\"a\\\"b\",\"c\\\\d\\e\"\n").unwrap();
        assert_eq!(rows(&batch), table(&[&["a\"b", "c\\d\\e"]]));
    }

    #[test]
    fn lines_after_a_multiline_record_are_numbered_correctly() {
        let s = schema(&[("s", DataType::Utf8, true), ("n", DataType::Int64, true)]);
        let input = "\"x\ny\nz\",1\nw,oops\n";
        assert_eq!(
            failure(decode(s.clone(), CopyOptions::csv(), input)),
            (
                "22P02",
                "invalid input syntax for type bigint: \"oops\"".to_string(),
                Some("n".to_string()),
                Some(4)
            )
        );
        let text = "x\\\ny\t1\nw\toops\n";
        assert_eq!(failure(decode(s, CopyOptions::text(), text)).3, Some(3));
    }

    #[test]
    fn field_count_errors_name_the_line() {
        let s = schema(&[("a", DataType::Int32, true), ("b", DataType::Int32, true)]);
        let missing = failure(decode(s.clone(), CopyOptions::csv(), "1,2\n3\n"));
        assert_eq!(
            missing,
            (
                "22P04",
                "missing data for column \"b\"".to_string(),
                None,
                Some(2)
            )
        );
        let extra = failure(decode(s.clone(), CopyOptions::text(), "1\t2\n3\t4\t5\n"));
        assert_eq!(
            extra,
            (
                "22P04",
                "extra data after last expected column".to_string(),
                None,
                Some(2)
            )
        );
        let unterminated = failure(decode(s, CopyOptions::csv(), "1,2\n3,\"4\n5\n"));
        assert_eq!(
            unterminated,
            (
                "22P04",
                "unterminated CSV quoted field".to_string(),
                None,
                Some(2)
            )
        );
    }

    #[test]
    fn invalid_utf8_is_rejected() {
        let result = decode_chunks(
            text2(),
            vec![0, 1],
            CopyOptions::csv(),
            &[b"a,b\nok,\xff\xfe\n"],
        );
        assert_eq!(
            failure(result),
            (
                "22021",
                "invalid byte sequence for encoding \"UTF8\": 0xff".to_string(),
                Some("b".to_string()),
                Some(2)
            )
        );
        let escaped = decode(text2(), CopyOptions::text(), "\\xc3\\x28\tb\n");
        assert_eq!(failure(escaped).0, "22021");
    }

    #[test]
    fn header_is_skipped_and_counted() {
        let s = schema(&[("n", DataType::Int32, true), ("s", DataType::Utf8, true)]);
        let csv = CopyOptions {
            header: true,
            ..CopyOptions::csv()
        };
        let batch = decode(s.clone(), csv.clone(), "n,s\n1,a\n").unwrap();
        assert_eq!(rows(&batch), table(&[&["1", "a"]]));
        assert_eq!(
            failure(decode(s.clone(), csv, "n,s\n1,a\nx,b\n")).3,
            Some(3)
        );
        let text = CopyOptions {
            header: true,
            ..CopyOptions::text()
        };
        let batch = decode(s, text, "n\ts\n2\tb\n").unwrap();
        assert_eq!(rows(&batch), table(&[&["2", "b"]]));
    }

    #[test]
    fn column_list_reorders_and_leaves_the_rest_null() {
        let s = schema(&[
            ("a", DataType::Int32, true),
            ("b", DataType::Utf8, true),
            ("c", DataType::Boolean, true),
        ]);
        let batch =
            decode_chunks(s.clone(), vec![2, 0], CopyOptions::csv(), &[b"t,1\nf,2\n"]).unwrap();
        assert_eq!(
            rows(&batch),
            table(&[&["1", "NULL", "true"], &["2", "NULL", "false"]])
        );

        let strict = schema(&[("a", DataType::Int32, true), ("ts", DataType::Int64, false)]);
        let result = decode_chunks(strict.clone(), vec![0], CopyOptions::csv(), &[b"1\n"]);
        assert_eq!(
            failure(result),
            (
                "23502",
                "null value in column \"ts\" violates not-null constraint".to_string(),
                Some("ts".to_string()),
                Some(1)
            )
        );
        assert!(matches!(
            CopyDecoder::new(strict.clone(), vec![0, 0], CopyOptions::csv()),
            Err(Error::Plan {
                sqlstate: "42701",
                ..
            })
        ));
        assert!(CopyDecoder::new(strict, vec![2], CopyOptions::csv()).is_err());
    }

    #[test]
    fn text_escapes_and_null() {
        let input = "a\\tb\\\\c\\N\t\\N\nd\\x41\\101\\,\\q\\\t\\\\N\nend\\\t\n";
        let batch = decode(text2(), CopyOptions::text(), input).unwrap();
        assert_eq!(
            rows(&batch),
            table(&[&["a\tb\\cN", "NULL"], &["dAA,q\t", "\\N"], &["end\t", ""]])
        );
        let controls = decode(text2(), CopyOptions::text(), "\\b\\f\\n\\r\\v\\0\tx\\\n").unwrap();
        assert_eq!(
            rows(&controls),
            table(&[&["\u{8}\u{c}\n\r\u{b}\u{0}", "x"]])
        );
        let pipes = CopyOptions {
            delimiter: b'|',
            null: String::new(),
            ..CopyOptions::text()
        };
        let batch = decode(text2(), pipes, "a\\|b|\n").unwrap();
        assert_eq!(rows(&batch), table(&[&["a|b", "NULL"]]));
    }

    #[test]
    fn end_marker_crlf_and_a_final_line_without_newline() {
        for options in [CopyOptions::text(), CopyOptions::csv()] {
            let d = options.delimiter as char;
            let input = format!("a{d}b\r\nc{d}d\r\n\\.\r\nignored, not even{d}parsed\"\n");
            let batch = decode(text2(), options.clone(), &input).unwrap();
            assert_eq!(rows(&batch), table(&[&["a", "b"], &["c", "d"]]));
            let batch = decode(text2(), options, &format!("a{d}b\ne{d}f")).unwrap();
            assert_eq!(rows(&batch), table(&[&["a", "b"], &["e", "f"]]));
        }
        let csv = decode(text2(), CopyOptions::csv(), "\"\\.\",x\n\"a\n\\.\n\",y\n").unwrap();
        assert_eq!(rows(&csv), table(&[&["\\.", "x"], &["a\n\\.\n", "y"]]));
    }

    #[test]
    fn every_chunk_boundary_decodes_the_same() {
        let s = schema(&[("s", DataType::Utf8, true), ("n", DataType::Int64, true)]);
        let inputs = [
            (
                CopyOptions::csv(),
                "\"a,\"\"b\"\"\r\nc\",1\r\n,\n\"\",-2\nhé,3\n\\.\n",
            ),
            (
                CopyOptions::text(),
                "a\\tb\\\nc\t1\r\n\\N\t\\N\nhé\\\\\t3\nlast\t4",
            ),
        ];
        for (options, input) in inputs {
            let bytes = input.as_bytes();
            let whole = decode(s.clone(), options.clone(), input).unwrap();
            assert_eq!(whole.num_rows(), 4);
            for at in 0..=bytes.len() {
                let (head, tail) = bytes.split_at(at);
                let split =
                    decode_chunks(s.clone(), vec![0, 1], options.clone(), &[head, tail]).unwrap();
                assert_eq!(split, whole, "split at {at}");
            }
            let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(
                decode_chunks(s.clone(), vec![0, 1], options, &bytewise).unwrap(),
                whole
            );
        }
    }

    #[test]
    fn rows_counts_decoded_rows() {
        let mut decoder = CopyDecoder::new(text2(), vec![0, 1], CopyOptions::csv()).unwrap();
        decoder.feed(b"a,b\nc,").unwrap();
        assert_eq!(decoder.rows(), 1);
        decoder.feed(b"d").unwrap();
        assert_eq!(decoder.rows(), 1);
        assert_eq!(decoder.finish().unwrap().num_rows(), 2);
    }

    #[test]
    fn ambiguous_options_are_rejected() {
        let bad = [
            CopyOptions {
                delimiter: b'"',
                ..CopyOptions::csv()
            },
            CopyOptions {
                delimiter: b'\n',
                ..CopyOptions::csv()
            },
            CopyOptions {
                delimiter: 0xe9,
                ..CopyOptions::text()
            },
            CopyOptions {
                delimiter: b'\\',
                ..CopyOptions::text()
            },
            CopyOptions {
                null: "a,b".into(),
                ..CopyOptions::csv()
            },
        ];
        for options in bad {
            let result = CopyDecoder::new(text2(), vec![0, 1], options.clone());
            assert_eq!(
                result.err().map(|e| e.sqlstate()),
                Some("22023"),
                "{options:?}"
            );
        }
    }

    /// One row of the property test's schema.
    type Row = (
        Option<bool>,
        Option<i32>,
        Option<i64>,
        Option<f64>,
        Option<String>,
        Option<i64>,
    );

    fn row_strategy() -> impl Strategy<Value = Row> {
        (
            any::<Option<bool>>(),
            any::<Option<i32>>(),
            any::<Option<i64>>(),
            proptest::option::of(
                any::<f64>().prop_filter("NaN never equals itself", |f| !f.is_nan()),
            ),
            proptest::option::of(any::<String>()),
            any::<Option<i64>>(),
        )
    }

    fn property_schema() -> SchemaRef {
        schema(&[
            ("b", DataType::Boolean, true),
            ("i", DataType::Int32, true),
            ("n", DataType::Int64, true),
            ("f", DataType::Float64, true),
            ("s", DataType::Utf8, true),
            ("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        ])
    }

    /// The rows as a batch, built directly from Arrow arrays.
    fn expected_batch(rows: &[Row]) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(BooleanArray::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(Int32Array::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.4.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(TimestampNanosecondArray::from(
                rows.iter().map(|r| r.5).collect::<Vec<_>>(),
            )),
        ];
        RecordBatch::try_new(property_schema(), columns).unwrap()
    }

    /// The rows as text values, each field given to `write` (None = NULL).
    fn write_rows(rows: &[Row], mut write: impl FnMut(Option<String>, bool)) {
        for r in rows {
            let timestamp = |n: i64| {
                chrono::DateTime::from_timestamp_nanos(n)
                    .format("%Y-%m-%d %H:%M:%S%.9f")
                    .to_string()
            };
            write(r.0.map(|b| b.to_string()), false);
            write(r.1.map(|i| i.to_string()), false);
            write(r.2.map(|i| i.to_string()), false);
            write(r.3.map(|f| f.to_string()), false);
            write(r.4.clone(), false);
            write(r.5.map(timestamp), true);
        }
    }

    fn to_csv(rows: &[Row]) -> Vec<u8> {
        let mut out = String::new();
        write_rows(rows, |value, last| {
            match value {
                None => {}
                Some(v) if v.is_empty() || v.contains([',', '"', '\n', '\r']) => {
                    out.push('"');
                    out.push_str(&v.replace('"', "\"\""));
                    out.push('"');
                }
                Some(v) => out.push_str(&v),
            }
            out.push(if last { '\n' } else { ',' });
        });
        out.into_bytes()
    }

    fn to_text(rows: &[Row]) -> Vec<u8> {
        let mut out = String::new();
        write_rows(rows, |value, last| {
            match value {
                None => out.push_str("\\N"),
                Some(v) => {
                    for c in v.chars() {
                        match c {
                            '\\' => out.push_str("\\\\"),
                            '\t' => out.push_str("\\t"),
                            '\n' => out.push_str("\\n"),
                            '\r' => out.push_str("\\r"),
                            c => out.push(c),
                        }
                    }
                }
            }
            out.push(if last { '\n' } else { '\t' });
        });
        out.into_bytes()
    }

    /// `data` cut at the given (unsorted, possibly repeated) points.
    fn cut<'a>(data: &'a [u8], points: &[prop::sample::Index]) -> Vec<&'a [u8]> {
        let mut offsets: Vec<usize> = points.iter().map(|p| p.index(data.len() + 1)).collect();
        offsets.sort_unstable();
        let mut chunks = Vec::new();
        let mut from = 0;
        for to in offsets.into_iter().chain([data.len()]) {
            chunks.push(&data[from..to]);
            from = to;
        }
        chunks
    }

    proptest! {
        #[test]
        fn csv_round_trips_under_any_chunking(
            rows in prop::collection::vec(row_strategy(), 0..20),
            points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let data = to_csv(&rows);
            let decoded = decode_chunks(property_schema(), (0..6).collect(), CopyOptions::csv(), &cut(&data, &points));
            prop_assert_eq!(decoded.unwrap(), expected_batch(&rows));
        }

        #[test]
        fn text_round_trips_under_any_chunking(
            rows in prop::collection::vec(row_strategy(), 0..20),
            points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let data = to_text(&rows);
            let decoded = decode_chunks(property_schema(), (0..6).collect(), CopyOptions::text(), &cut(&data, &points));
            prop_assert_eq!(decoded.unwrap(), expected_batch(&rows));
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(data in prop::collection::vec(any::<u8>(), 0..200)) {
            for options in [CopyOptions::text(), CopyOptions::csv()] {
                let _ = decode_chunks(property_schema(), (0..6).collect(), options, &[&data]);
            }
        }
    }
}
