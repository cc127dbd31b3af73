//! PostgreSQL `COPY ... FROM STDIN` decoding, formats `text` and `csv`, into Arrow batches:
//! the one decoder of delimited text, for COPY, `saql run`'s files and the file and Kafka
//! sources. Data arrives in chunks of any size (a chunk may end mid-line or inside a quoted
//! field); one pass finds where each record ends and splits it into fields as PostgreSQL's
//! rules say (decoded only when escapes or quotes change them); a chunk of records at a time
//! is then parsed a column at a time ([`super::columns`]). Errors carry the 1-based input
//! line where the record starts and the column the value was for; bad records can be skipped
//! instead ([`CopyDecoder::skipping_bad_records`]).
//!
//! Why our own splitter rather than `arrow-csv`/`csv-core`: PostgreSQL's COPY rules differ
//! from theirs where it matters here: the text format's backslash escapes and `\N`; an
//! unquoted empty field (or the NULL string) is NULL but a quoted one is a value; a distinct
//! ESCAPE character; the `\.` end marker; and errors worded and numbered as PostgreSQL's.

use crate::error::sqlstate;
use std::collections::VecDeque;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::sources::columns::{utf8, PendingRecords};
use crate::sources::copy_binary::BinaryCopy;
use crate::sources::value::BatchBuilder;

#[path = "csv/parallel.rs"]
mod parallel;
#[path = "csv/split.rs"]
mod split;
use split::{split_csv, split_text, Span};

/// Records decoded into one batch, unless [`CopyDecoder::with_batch_rows`] says otherwise.
pub const DEFAULT_BATCH_ROWS: usize = 16_384;

/// The data format of a COPY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    /// PostgreSQL's `text` format: delimited fields, backslash escapes, `\N` for NULL.
    Text,
    /// RFC 4180-style CSV as PostgreSQL reads it: quoted fields, unquoted empty field = NULL.
    Csv,
    /// PostgreSQL's binary format ([`super::copy_binary`]).
    Binary,
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
        let bad = |message: &str| {
            Err(Error::invalid_input(
                sqlstate::INVALID_PARAMETER_VALUE,
                message,
            ))
        };
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
                sqlstate::INVALID_PARAMETER_VALUE,
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
/// mid-quoted-field) into batches of the target schema.
///
/// After an error (other than a skipped bad record) the decoder is left mid-record; the COPY
/// is failed and the decoder dropped.
pub struct CopyDecoder {
    schema: SchemaRef,
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
    /// Whether the input ended: the end marker `\.` was seen (everything after it is
    /// ignored) or [`CopyDecoder::end_input`] was called.
    ended: bool,
    /// Whether the end marker `\.` was seen.
    end_marker: bool,
    /// The current record's fields, reused across records.
    fields: Vec<Span>,
    /// Longest record accepted, in bytes.
    max_line_bytes: usize,
    /// Most input bytes accepted in all.
    max_bytes: usize,
    /// Input bytes received so far.
    received: usize,
    /// Decoded bytes of the current record's fields that differ from the input.
    scratch: Vec<u8>,
    /// Complete records not yet decoded.
    pending: PendingRecords,
    /// Records per batch.
    batch_rows: usize,
    /// Decoded batches not yet taken.
    batches: VecDeque<RecordBatch>,
    /// Rows in `batches` and in batches already taken.
    decoded_rows: usize,
    /// Whether a bad record is skipped (and kept in `skipped`) rather than an error.
    skip_bad: bool,
    /// The errors of skipped records, in line order, until taken.
    skipped: Vec<Error>,
    /// Whether a record of white space only is skipped (files), not a row (COPY).
    skip_blank: bool,
    /// The state of a binary COPY (`FORMAT binary`).
    binary: Option<BinaryCopy>,
    /// Threads that decode text and csv records ([`CopyDecoder::with_threads`]).
    threads: usize,
    /// With more than one thread: the end in `buf` of the complete records found so far.
    cut: usize,
    /// With more than one thread: pieces of `buf` cut for decoding, each with the lines it
    /// starts and ends at.
    pieces: Vec<(std::ops::Range<usize>, u64, u64)>,
    /// With more than one thread: the line of the first record in `buf`.
    piece_line: u64,
    /// With more than one thread: bytes of records one thread decodes in a go.
    piece_bytes: usize,
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
                        sqlstate::DUPLICATE_COLUMN,
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
        let columns_listed = columns.len();
        let distinct_escape = (options.escape != options.quote).then_some(options.escape);
        let options_format = options.format;
        Ok(CopyDecoder {
            header_pending: options.header,
            options,
            distinct_escape,
            columns,
            unlisted,
            builder: BatchBuilder::new(schema.clone())?,
            schema,
            buf: Vec::new(),
            scan: Scan::default(),
            line: 1,
            ended: false,
            end_marker: false,
            fields: Vec::new(),
            max_line_bytes: usize::MAX,
            max_bytes: usize::MAX,
            received: 0,
            scratch: Vec::new(),
            pending: PendingRecords::new(columns_listed),
            batch_rows: DEFAULT_BATCH_ROWS,
            batches: VecDeque::new(),
            decoded_rows: 0,
            skip_bad: false,
            skipped: Vec::new(),
            skip_blank: false,
            binary: (options_format == CopyFormat::Binary).then(BinaryCopy::default),
            threads: 1,
            cut: 0,
            pieces: Vec::new(),
            piece_line: 1,
            piece_bytes: parallel::PIECE_BYTES,
        })
    }

    /// Bounds the decoder: a record longer than `max_line_bytes`, or more than `max_bytes`
    /// of input in all, fails with 54000 (the COPY is held in memory until it completes, so
    /// that it applies atomically).
    pub fn with_limits(mut self, max_line_bytes: usize, max_bytes: usize) -> Self {
        self.max_line_bytes = max_line_bytes;
        self.max_bytes = max_bytes;
        self
    }

    /// Decodes `rows` records into each batch (at least one).
    pub fn with_batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = rows.max(1);
        self
    }

    /// Skips bad records instead of failing: their errors are kept for
    /// [`CopyDecoder::take_skipped`].
    pub fn skipping_bad_records(mut self) -> Self {
        self.skip_bad = true;
        self
    }

    /// Skips records of white space only (blank lines of a file) instead of decoding them.
    pub fn skipping_blank_lines(mut self) -> Self {
        self.skip_blank = true;
        self
    }

    /// Decodes text and csv records on `threads` threads (the calling one among them) once
    /// a few MiB have arrived: the same batches, errors and line numbers, sooner.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Numbers input lines from `line` (the data follows a header read elsewhere).
    pub fn with_first_line(mut self, line: u64) -> Self {
        self.line = line;
        self.piece_line = line;
        self
    }

    /// Whether the data held the end marker `\.`, after which it ignores everything.
    pub fn saw_end_marker(&self) -> bool {
        self.end_marker
    }

    /// The next decoded batch, if one is complete.
    pub fn take_batch(&mut self) -> Option<RecordBatch> {
        self.batches.pop_front()
    }

    /// The errors of the records skipped since the last call, in line order.
    pub fn take_skipped(&mut self) -> Vec<Error> {
        std::mem::take(&mut self.skipped)
    }

    /// Decode every complete record in the data so far; keep the rest for the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.received = self.received.saturating_add(chunk.len());
        if self.received > self.max_bytes {
            return Err(Error::limit(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "COPY data exceeds {} bytes (--max-copy-bytes), at line {}; split it \
                     into several COPY statements",
                    self.max_bytes, self.line
                ),
            ));
        }
        if let Some(binary) = &mut self.binary {
            return binary.feed(chunk, &mut self.builder, &self.columns, &self.unlisted);
        }
        if self.threads > 1 {
            return self.feed_in_pieces(chunk);
        }
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        while !self.ended {
            let Some(newline) = self.find_record_end() else {
                break;
            };
            if newline - start > self.max_line_bytes {
                return Err(self.line_too_long());
            }
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
            if self.buf.len() > self.max_line_bytes {
                return Err(self.line_too_long());
            }
        }
        Ok(())
    }

    fn line_too_long(&self) -> Error {
        Error::limit(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            format!(
                "COPY line {} is longer than {} bytes (--max-copy-line-bytes)",
                self.line, self.max_line_bytes
            ),
        )
    }

    /// Decode the final record (one without a trailing newline) and return all rows.
    pub fn finish(self) -> Result<RecordBatch> {
        let schema = self.schema.clone();
        let mut batches = self.finish_batches()?;
        match batches.len() {
            1 => Ok(batches.remove(0)),
            _ => datafusion::arrow::compute::concat_batches(&schema, &batches)
                .map_err(|e| Error::Internal(e.to_string())),
        }
    }

    /// Decode the final record (one without a trailing newline) and return the batches not
    /// yet taken.
    pub fn finish_batches(mut self) -> Result<Vec<RecordBatch>> {
        self.end_input()?;
        Ok(self.batches.into())
    }

    /// Decodes the final record (one without a trailing newline) and every pending record;
    /// the decoder then takes no more data.
    pub fn end_input(&mut self) -> Result<()> {
        if let Some(binary) = &self.binary {
            binary.finish()?;
            let batch = self.builder.finish()?;
            self.decoded_rows += batch.num_rows();
            self.batches.push_back(batch);
            return Ok(());
        }
        if self.threads > 1 {
            return self.end_input_in_pieces();
        }
        if !self.ended && !self.buf.is_empty() {
            let end = match self.buf.last() {
                Some(b'\r') => self.buf.len() - 1,
                _ => self.buf.len(),
            };
            self.decode_record(0, end)?;
        }
        self.ended = true;
        self.buf = Vec::new();
        self.decode_pending()
    }

    /// The number of rows decoded so far (complete records, bad ones included until their
    /// chunk is decoded).
    pub fn rows(&self) -> usize {
        self.decoded_rows + self.pending.len() + self.builder.len()
    }

    /// Decodes the pending records into a batch, if there are any.
    fn decode_pending(&mut self) -> Result<()> {
        if self.pending.len() == 0 && !self.pending.has_unsplit() {
            return Ok(());
        }
        let batch = self.pending.decode(
            &mut self.builder,
            &self.columns,
            &self.unlisted,
            self.skip_bad,
            &mut self.skipped,
        )?;
        if batch.num_rows() > 0 {
            self.decoded_rows += batch.num_rows();
            self.batches.push_back(batch);
        }
        Ok(())
    }

    /// A record that cannot be split: skipped, or (after the pending records, whose errors
    /// come first) the error.
    fn bad_record(&mut self, error: Error) -> Result<()> {
        if self.skip_bad {
            self.pending.push_unsplit(error);
            return Ok(());
        }
        self.decode_pending()?;
        Err(error)
    }

    /// The index of the newline that ends the record at the front of `buf`, resuming the
    /// search where the previous call stopped; None if the record is not complete yet.
    fn find_record_end(&mut self) -> Option<usize> {
        find_record_end(
            &self.buf,
            &mut self.scan,
            &self.options,
            self.distinct_escape,
        )
    }

    /// Decode the record in `buf[start..end]` (its line terminator excluded) into one row.
    fn decode_record(&mut self, start: usize, end: usize) -> Result<()> {
        let line = self.line;
        self.line += 1 + self.scan.newlines;
        let record = &self.buf[start..end];
        if record == b"\\." {
            self.ended = true;
            self.end_marker = true;
            return Ok(());
        }
        if std::mem::take(&mut self.header_pending) {
            return Ok(());
        }
        if self.skip_blank && record.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let options = &self.options;
        let split = match options.format {
            CopyFormat::Text => {
                split_text(record, options, &mut self.fields, &mut self.scratch);
                Ok(())
            }
            CopyFormat::Csv => split_csv(record, options, &mut self.fields, &mut self.scratch),
            CopyFormat::Binary => unreachable!("binary COPY is decoded by BinaryCopy"),
        };
        if let Err(e) = split {
            return self.bad_record(e.at_line(line));
        }
        let fields = &self.fields[..];
        let empty_line_for_no_columns = self.columns.is_empty() && fields == [Span::Input(0, 0)];
        if fields.len() > self.columns.len() && !empty_line_for_no_columns {
            let e = Error::invalid_input(
                sqlstate::BAD_COPY_FILE_FORMAT,
                "extra data after last expected column",
            );
            return self.bad_record(e.at_line(line));
        }
        if let Some(&missing) = self.columns.get(fields.len()) {
            let name = self.schema.field(missing).name();
            let e = Error::invalid_input(
                sqlstate::BAD_COPY_FILE_FORMAT,
                format!("missing data for column \"{name}\""),
            );
            return self.bad_record(e.at_line(line));
        }
        let record = &self.buf[start..end];
        let scratch = &self.scratch;
        let width = self.columns.len();
        self.pending.push(
            line,
            fields.iter().take(width).map(|field| match *field {
                Span::Null => None,
                Span::Input(from, to) => Some(&record[from..to]),
                Span::Scratch(from, to) => Some(&scratch[from..to]),
            }),
        );
        if self.pending.len() >= self.batch_rows {
            self.decode_pending()?;
        }
        Ok(())
    }
}

/// The index of the newline that ends the record at the front of `buf`, resuming the search
/// where `scan` stopped; None if the record is not complete yet. `escape`: the CSV escape when
/// it differs from the quote.
fn find_record_end(
    buf: &[u8],
    scan: &mut Scan,
    options: &CopyOptions,
    escape: Option<u8>,
) -> Option<usize> {
    let csv = options.format == CopyFormat::Csv;
    let quote = options.quote;
    loop {
        if !scan.escaped {
            // Skip the plain bytes: only newlines, quotes, escapes and backslashes matter.
            let (a, b) = match (csv, scan.in_quotes) {
                (false, _) => (b'\\', b'\\'),
                (true, false) => (quote, quote),
                (true, true) => (quote, escape.unwrap_or(quote)),
            };
            let rest = &buf[scan.pos..];
            scan.pos += memchr::memchr3(b'\n', a, b, rest).unwrap_or(rest.len());
        }
        let &c = buf.get(scan.pos)?;
        if csv {
            // PostgreSQL's CopyReadLineText: an escape counts only inside quotes, and a
            // doubled escape cancels itself.
            if c == b'\n' && !scan.in_quotes {
                return Some(scan.pos);
            }
            if scan.in_quotes && Some(c) == escape {
                scan.escaped = !scan.escaped;
            }
            if c == quote && !scan.escaped {
                scan.in_quotes = !scan.in_quotes;
            }
            if Some(c) != escape {
                scan.escaped = false;
            }
        } else if scan.escaped {
            scan.escaped = false;
        } else if c == b'\\' {
            scan.escaped = true;
        } else if c == b'\n' {
            return Some(scan.pos);
        }
        scan.newlines += u64::from(c == b'\n');
        scan.pos += 1;
    }
}

/// How much of `data` is complete records (up to and including the newline that ends the
/// last of them, as the decoder finds record ends: quoted newlines stay inside their record),
/// and how many input lines that is. A decoder fed `data[..len]` then sees only whole records,
/// so a file cut this way can be decoded a piece at a time on different threads.
pub fn complete_records(data: &[u8], options: &CopyOptions) -> (usize, u64) {
    let escape = (options.escape != options.quote).then_some(options.escape);
    let (mut len, mut lines) = (0, 0);
    let mut scan = Scan::default();
    while let Some(newline) = find_record_end(data, &mut scan, options, escape) {
        len = newline + 1;
        lines += 1 + scan.newlines;
        scan = Scan {
            pos: len,
            ..Scan::default()
        };
    }
    (len, lines)
}

/// The first record of some data, split into fields: a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Its fields (`None` where unquoted and equal to the NULL string).
    pub fields: Vec<Option<String>>,
    /// The bytes it takes, its line break included.
    pub len: usize,
    /// The lines it spans.
    pub lines: u64,
}

/// Reads the first record of `data` as a header, by the rules of `options`; `Ok(None)` if it
/// is not complete yet (unless `at_end`, when what there is is the record).
pub fn read_header(data: &[u8], options: &CopyOptions, at_end: bool) -> Result<Option<Header>> {
    let mut scan = Scan::default();
    let escape = (options.escape != options.quote).then_some(options.escape);
    let (mut end, len) = match find_record_end(data, &mut scan, options, escape) {
        Some(newline) => (newline, newline + 1),
        None if at_end => (data.len(), data.len()),
        None => return Ok(None),
    };
    if end > 0 && data[end - 1] == b'\r' {
        end -= 1;
    }
    let record = &data[..end];
    let (mut spans, mut scratch) = (Vec::new(), Vec::new());
    match options.format {
        CopyFormat::Csv => split_csv(record, options, &mut spans, &mut scratch)?,
        _ => split_text(record, options, &mut spans, &mut scratch),
    }
    let fields = spans
        .iter()
        .map(|span| {
            let bytes = match *span {
                Span::Null => return Ok(None),
                Span::Input(from, to) => &record[from..to],
                Span::Scratch(from, to) => &scratch[from..to],
            };
            utf8(bytes).map(|text| Some(text.to_string()))
        })
        .collect::<Result<_>>()?;
    Ok(Some(Header {
        fields,
        len,
        lines: scan.newlines + 1,
    }))
}

#[cfg(test)]
#[path = "csv/tests.rs"]
mod tests;
