//! Recorded events for `saql run` and `saql test`: CSV with a header or JSON lines (gzip by a
//! `.gz` suffix), decoded into Arrow batches of the stream's schema. CSV is read in large
//! blocks and handed to the COPY decoder ([`CopyDecoder`], PostgreSQL's CSV rules), which
//! finds the records, decodes them a column at a time and reports bad ones with their lines;
//! JSON values go through [`BatchBuilder`] a line at a time. A bad line is reported as
//! `path:line: message`; [`BadRows`] decides whether it stops the run or is counted and
//! skipped.

use saql::error::sqlstate;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use saql::sources::csv::{complete_records, read_header, CopyDecoder, CopyOptions, Header};
use saql::sources::value::BatchBuilder;

/// Bytes of CSV read from the input at a time.
const CSV_BLOCK: usize = 1 << 20;

/// The longest CSV header read.
const MAX_HEADER_BYTES: usize = 16 << 20;

/// How many bad lines [`BadRows`] quotes in its summary.
const QUOTED_BAD_ROWS: usize = 3;

/// A problem with an input: `path:line: message`, or `path: message` when it is not about a
/// line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The input, as messages name it.
    pub path: String,
    /// The 1-based line, when the problem is on one.
    pub line: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// What happens to bad input lines: the first stops the run, or each is counted and skipped.
#[derive(Debug)]
pub struct BadRows {
    skip: bool,
    count: u64,
    first: Vec<InputError>,
}

impl BadRows {
    /// Bad lines stop the run unless `skip`.
    pub fn new(skip: bool) -> Self {
        BadRows {
            skip,
            count: 0,
            first: Vec::new(),
        }
    }

    /// Records a bad line: `Err` (stop) unless skipping.
    pub(super) fn record(&mut self, e: InputError) -> Result<(), InputError> {
        if !self.skip {
            return Err(e);
        }
        self.count += 1;
        if self.first.len() < QUOTED_BAD_ROWS {
            self.first.push(e);
        }
        Ok(())
    }

    /// Whether bad lines are skipped.
    pub fn skips(&self) -> bool {
        self.skip
    }

    /// Adds what `other` skipped (its quotes after this one's).
    pub fn merge(&mut self, other: BadRows) {
        self.count += other.count;
        let room = QUOTED_BAD_ROWS.saturating_sub(self.first.len());
        self.first.extend(other.first.into_iter().take(room));
    }

    /// One line saying how many lines were skipped and quoting the first few, if any were.
    pub fn summary(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let quoted: Vec<String> = self.first.iter().map(ToString::to_string).collect();
        let first = if self.count as usize > quoted.len() {
            format!("first {}", quoted.len())
        } else {
            "all".to_string()
        };
        Some(format!(
            "skipped {} bad input line{} ({first}: {})",
            self.count,
            if self.count == 1 { "" } else { "s" },
            quoted.join("; ")
        ))
    }
}

/// The format of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// CSV whose first line names the columns.
    Csv,
    /// One JSON object per line, keys naming the columns.
    JsonLines,
}

impl Format {
    /// The format a file name says (`.csv`, `.json`, `.jsonl`, `.ndjson`, each also with
    /// `.gz`), if it says one.
    fn of_name(name: &str) -> Option<Format> {
        let name = name.to_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".csv") {
            Some(Format::Csv)
        } else if [".json", ".jsonl", ".ndjson"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            Some(Format::JsonLines)
        } else {
            None
        }
    }
}

/// Counts the bytes read through it, for the progress bar.
struct Counting<R> {
    inner: R,
    bytes: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The records of one chunk: their bytes back to back, each ending in `\n`.
#[derive(Default)]
struct Chunk {
    data: Vec<u8>,
    /// Offset of each record in `data`, plus the end.
    bounds: Vec<usize>,
    /// The input line on which each record starts.
    lines: Vec<u64>,
}

impl Chunk {
    fn clear(&mut self) {
        self.data.clear();
        self.bounds.clear();
        self.bounds.push(0);
        self.lines.clear();
    }

    fn len(&self) -> usize {
        self.lines.len()
    }

    fn bytes(&self, from: usize, to: usize) -> &[u8] {
        &self.data[self.bounds[from]..self.bounds[to]]
    }
}

/// Bytes of CSV cut into one [`CsvChunk`], at least.
pub const CHUNK_BYTES: usize = 4 << 20;

/// Whole CSV records of an input and the line the first one starts on.
pub struct CsvChunk {
    bytes: Vec<u8>,
    first_line: u64,
}

/// The records of a CSV input after its header, read a [`CsvChunk`] at a time.
pub struct CsvChunks {
    path: String,
    reader: Box<dyn BufRead + Send>,
    /// Input read but not yet handed out: the start of a record at most, unless at the end.
    carry: Vec<u8>,
    /// Lines before `carry`.
    lines: u64,
    at_end: bool,
    /// Bytes read at a time.
    chunk_bytes: usize,
}

impl CsvChunks {
    /// The next chunk: the whole records among the next `chunk_bytes` read (and the record
    /// they end in), `None` at the end. A chunk ends where a record ends, as the decoder finds record ends.
    pub fn next_chunk(&mut self) -> Result<Option<CsvChunk>, InputError> {
        loop {
            if self.at_end {
                if self.carry.is_empty() {
                    return Ok(None);
                }
                let bytes = std::mem::take(&mut self.carry);
                return Ok(Some(self.chunk(bytes, 0)));
            }
            self.at_end =
                read_into(&mut self.reader, &mut self.carry, self.chunk_bytes).map_err(|e| {
                    InputError {
                        path: self.path.clone(),
                        line: None,
                        message: e.to_string(),
                    }
                })?;
            if self.at_end {
                continue;
            }
            let (len, lines) = complete_records(&self.carry, &CopyOptions::csv());
            if len > 0 {
                let rest = self.carry.split_off(len);
                let bytes = std::mem::replace(&mut self.carry, rest);
                return Ok(Some(self.chunk(bytes, lines)));
            }
        }
    }

    /// `bytes` as the next chunk, `lines` long.
    fn chunk(&mut self, bytes: Vec<u8>, lines: u64) -> CsvChunk {
        let first_line = self.lines + 1;
        self.lines += lines;
        CsvChunk { bytes, first_line }
    }
}

/// Appends up to `n` bytes of `reader` to `buf`; true at the end of the input.
fn read_into(reader: &mut dyn Read, buf: &mut Vec<u8>, n: usize) -> std::io::Result<bool> {
    let start = buf.len();
    buf.resize(start + n, 0);
    let mut filled = start;
    let mut at_end = false;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => {
                at_end = true;
                break;
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(filled);
                return Err(e);
            }
        }
    }
    buf.truncate(filled);
    Ok(at_end)
}

/// Decodes the [`CsvChunk`]s of one input, each on its own (on any thread).
#[derive(Clone)]
pub struct ChunkDecoder {
    path: String,
    schema: SchemaRef,
    /// The stream column each field fills; `None`: the input has no header (it is empty).
    columns: Option<Vec<usize>>,
    max_rows: usize,
    skip_bad_rows: bool,
}

/// What one [`CsvChunk`] decoded to.
pub struct DecodedChunk {
    /// Its rows, in batches of at most the decoder's `max_rows`.
    pub batches: Vec<RecordBatch>,
    /// The bad records skipped, in line order.
    pub skipped: Vec<InputError>,
    /// The bad record that ends the input (after `batches`), when bad records are not skipped.
    pub failed: Option<InputError>,
    /// Whether the chunk held the end marker `\.`: the input ends with it.
    pub ended: bool,
}

impl ChunkDecoder {
    /// Decodes `chunk` as the sequential decoder would decode its records.
    pub fn decode(&self, chunk: CsvChunk) -> DecodedChunk {
        let mut decoded = DecodedChunk {
            batches: Vec::new(),
            skipped: Vec::new(),
            failed: None,
            ended: false,
        };
        let Some(columns) = &self.columns else {
            return decoded;
        };
        let error = |e: &saql::Error| InputError {
            path: self.path.clone(),
            line: line_of(e),
            message: input_message(e),
        };
        let decoder = CopyDecoder::new(self.schema.clone(), columns.clone(), CopyOptions::csv())
            .map(|d| {
                let d = d
                    .with_batch_rows(self.max_rows)
                    .skipping_blank_lines()
                    .with_first_line(chunk.first_line);
                match self.skip_bad_rows {
                    true => d.skipping_bad_records(),
                    false => d,
                }
            });
        let mut decoder = match decoder {
            Ok(d) => d,
            Err(e) => {
                decoded.failed = Some(error(&e));
                return decoded;
            }
        };
        let fed = decoder
            .feed(&chunk.bytes)
            .and_then(|()| decoder.end_input());
        decoded.failed = fed.err().map(|e| error(&e));
        decoded.skipped = decoder.take_skipped().iter().map(error).collect();
        decoded.ended = decoder.saw_end_marker();
        while let Some(batch) = decoder.take_batch() {
            decoded.batches.push(batch);
        }
        decoded
    }
}

/// One input of a stream, read a chunk at a time.
pub struct Input {
    /// The stream its rows go to.
    pub stream: String,
    /// The input, as messages name it.
    pub path: String,
    schema: SchemaRef,
    reader: Box<dyn BufRead + Send>,
    format: Format,
    /// Input line -> line to report (test cases embed their input in a query file).
    line_map: Option<Vec<u64>>,
    /// Lines read so far (JSON; CSV: before the data).
    line: u64,
    /// CSV: the decoder of the data, once the header is read.
    decoder: Option<CopyDecoder>,
    /// CSV: bytes read before the header is complete; then the block being read.
    block: Vec<u8>,
    /// CSV: the whole input has been read (or decoding failed).
    at_end: bool,
    /// CSV: why decoding failed, to report after the batches decoded before it.
    failed: Option<InputError>,
    chunk: Chunk,
}

impl Input {
    /// Opens a file (gzip if its name ends in `.gz`); the format comes from the name, else
    /// from the first byte (`{` for JSON lines). Bytes read are added to `bytes_read`.
    pub fn open(
        stream: &str,
        path: &Path,
        schema: SchemaRef,
        bytes_read: Arc<AtomicU64>,
    ) -> Result<Input, InputError> {
        let name = path.display().to_string();
        let io_error = |e: std::io::Error| InputError {
            path: name.clone(),
            line: None,
            message: e.to_string(),
        };
        let file = File::open(path).map_err(io_error)?;
        let counting = Counting {
            inner: file,
            bytes: bytes_read,
        };
        let mut reader: Box<dyn BufRead + Send> = if name.to_lowercase().ends_with(".gz") {
            let gz = flate2::read::MultiGzDecoder::new(BufReader::new(counting));
            Box::new(BufReader::with_capacity(1 << 16, gz))
        } else {
            Box::new(BufReader::with_capacity(1 << 16, counting))
        };
        let format = match Format::of_name(&name) {
            Some(f) => f,
            None => {
                let head = reader.fill_buf().map_err(io_error)?;
                match head.iter().find(|b| !b.is_ascii_whitespace()) {
                    Some(b'{') => Format::JsonLines,
                    _ => Format::Csv,
                }
            }
        };
        Ok(Input::new(stream, name, schema, reader, format, None))
    }

    /// An input held in memory; `line_map[i]` is the line reported for its line `i + 1`.
    pub fn from_text(
        stream: &str,
        path: String,
        schema: SchemaRef,
        text: String,
        format: Format,
        line_map: Vec<u64>,
    ) -> Input {
        let reader = Box::new(std::io::Cursor::new(text.into_bytes()));
        Input::new(stream, path, schema, reader, format, Some(line_map))
    }

    fn new(
        stream: &str,
        path: String,
        schema: SchemaRef,
        reader: Box<dyn BufRead + Send>,
        format: Format,
        line_map: Option<Vec<u64>>,
    ) -> Input {
        Input {
            stream: stream.to_string(),
            path,
            schema,
            reader,
            format,
            line_map,
            line: 0,
            decoder: None,
            block: Vec::new(),
            at_end: false,
            failed: None,
            chunk: Chunk::default(),
        }
    }

    /// The next batch of up to `max_rows` rows in input order, or `None` at the end.
    pub fn next_batch(
        &mut self,
        max_rows: usize,
        bad: &mut BadRows,
    ) -> Result<Option<RecordBatch>, InputError> {
        match self.format {
            Format::Csv => self.next_csv_batch(max_rows, bad),
            Format::JsonLines => self.next_json_batch(max_rows, bad),
        }
    }

    fn next_csv_batch(
        &mut self,
        max_rows: usize,
        bad: &mut BadRows,
    ) -> Result<Option<RecordBatch>, InputError> {
        loop {
            if let Some(decoder) = &mut self.decoder {
                let skipped = decoder.take_skipped();
                let batch = decoder.take_batch();
                for e in skipped {
                    bad.record(self.input_error(&e))?;
                }
                if batch.is_some() {
                    return Ok(batch);
                }
                // A bad record ends the input once the batches before it are taken.
                if let Some(e) = self.failed.take() {
                    return Err(e);
                }
                if self.at_end {
                    return Ok(None);
                }
            } else if self.at_end {
                return Ok(None);
            }
            self.read_block()?;
            if self.decoder.is_none() {
                self.start_csv(max_rows, bad.skips())?;
                continue;
            }
            let Some(decoder) = &mut self.decoder else {
                continue;
            };
            let mut fed = decoder.feed(&self.block);
            if self.at_end {
                fed = fed.and_then(|()| decoder.end_input());
            }
            if let Err(e) = fed {
                self.failed = Some(self.input_error(&e));
                self.at_end = true;
            }
        }
    }

    /// Reads the next block of CSV: appended to the header's bytes until the header is
    /// read, else in place of the last block.
    fn read_block(&mut self) -> Result<(), InputError> {
        if self.decoder.is_some() {
            self.block.clear();
        }
        self.at_end = read_into(&mut self.reader, &mut self.block, CSV_BLOCK)
            .map_err(|e| self.error(None, e.to_string()))?;
        Ok(())
    }

    /// Reads the header from the bytes read so far, if it is complete, and starts the
    /// decoder with the rest.
    fn start_csv(&mut self, max_rows: usize, skip_bad_rows: bool) -> Result<(), InputError> {
        let Some(columns) = self.read_csv_header()? else {
            return Ok(());
        };
        let mut decoder = self.csv_decoder(columns, max_rows, skip_bad_rows)?;
        let mut fed = decoder.feed(&self.block);
        if self.at_end {
            fed = fed.and_then(|()| decoder.end_input());
        }
        self.decoder = Some(decoder);
        if let Err(e) = fed {
            self.failed = Some(self.input_error(&e));
            self.at_end = true;
        }
        Ok(())
    }

    /// Reads the header from the bytes read so far, if it is complete: blank lines and a
    /// byte order mark before it are skipped, and `block` is left holding what follows it.
    /// Returns the stream column each of its fields names.
    fn read_csv_header(&mut self) -> Result<Option<Vec<usize>>, InputError> {
        if self.line == 0 && self.block.starts_with(b"\xef\xbb\xbf") {
            self.block.drain(..3);
        }
        loop {
            let Some(end) = self.block.iter().position(|&b| b == b'\n') else {
                if self.block.iter().all(u8::is_ascii_whitespace) {
                    // Nothing but blank lines so far: read on, or the input is empty.
                    return Ok(None);
                }
                break;
            };
            if !self.block[..end].iter().all(u8::is_ascii_whitespace) {
                break;
            }
            self.block.drain(..=end);
            self.line += 1;
        }
        let header = read_header(&self.block, &CopyOptions::csv(), self.at_end).map_err(|e| {
            self.error(
                Some(self.line + 1),
                format!("bad CSV header: {}", input_message(&e)),
            )
        })?;
        let Some(header) = header else {
            if self.block.len() > MAX_HEADER_BYTES {
                let message = format!("the header is longer than {MAX_HEADER_BYTES} bytes");
                return Err(self.error(Some(self.line + 1), message));
            }
            return Ok(None);
        };
        let columns = self.header_columns(&header)?;
        self.block.drain(..header.len);
        self.line += header.lines;
        Ok(Some(columns))
    }

    /// A decoder of the CSV data after the header, whose fields fill `columns`.
    fn csv_decoder(
        &self,
        columns: Vec<usize>,
        max_rows: usize,
        skip_bad_rows: bool,
    ) -> Result<CopyDecoder, InputError> {
        let mut decoder = CopyDecoder::new(self.schema.clone(), columns, CopyOptions::csv())
            .map_err(|e| self.error(None, e.to_string()))?
            .with_batch_rows(max_rows)
            .skipping_blank_lines()
            .with_first_line(self.line + 1);
        if skip_bad_rows {
            decoder = decoder.skipping_bad_records();
        }
        Ok(decoder)
    }

    /// Whether the input can be cut into [`CsvChunk`]s ([`Input::into_chunks`]): CSV read from
    /// a file.
    pub fn chunkable(&self) -> bool {
        self.format == Format::Csv && self.line_map.is_none()
    }

    /// The input as chunks of whole records, each decoded on its own by the returned
    /// [`ChunkDecoder`], so that several threads can decode one input; `chunk_bytes` are read
    /// at a time. Reads the header.
    pub fn into_chunks(
        mut self,
        max_rows: usize,
        skip_bad_rows: bool,
        chunk_bytes: usize,
    ) -> Result<(CsvChunks, ChunkDecoder), InputError> {
        debug_assert!(self.chunkable());
        let columns = loop {
            self.read_block()?;
            if let Some(columns) = self.read_csv_header()? {
                break Some(columns);
            }
            if self.at_end {
                break None;
            }
        };
        let decoder = ChunkDecoder {
            path: self.path.clone(),
            schema: self.schema.clone(),
            columns,
            max_rows,
            skip_bad_rows,
        };
        let chunks = CsvChunks {
            path: self.path,
            reader: self.reader,
            carry: std::mem::take(&mut self.block),
            lines: self.line,
            at_end: self.at_end,
            chunk_bytes,
        };
        Ok((chunks, decoder))
    }

    /// An error of the decoder, at the line it names.
    fn input_error(&self, e: &saql::Error) -> InputError {
        self.error(line_of(e), input_message(e))
    }

    fn next_json_batch(
        &mut self,
        max_rows: usize,
        bad: &mut BadRows,
    ) -> Result<Option<RecordBatch>, InputError> {
        loop {
            self.chunk.clear();
            while self.chunk.len() < max_rows.max(1) {
                if !self.read_record()? {
                    break;
                }
            }
            if self.chunk.len() == 0 {
                return Ok(None);
            }
            let batch = self.decode_chunk(bad)?;
            if batch.num_rows() > 0 {
                return Ok(Some(batch));
            }
        }
    }

    /// Appends the next non-blank line to the chunk; false at the end of the input.
    fn read_record(&mut self) -> Result<bool, InputError> {
        loop {
            let start = self.chunk.data.len();
            let n = self
                .reader
                .read_until(b'\n', &mut self.chunk.data)
                .map_err(|e| self.error(None, e.to_string()))?;
            if n == 0 {
                return Ok(false);
            }
            self.line += 1;
            if self.chunk.data[start..].iter().all(u8::is_ascii_whitespace) {
                self.chunk.data.truncate(start);
                continue;
            }
            if self.chunk.data.last() != Some(&b'\n') {
                self.chunk.data.push(b'\n');
            }
            self.chunk.bounds.push(self.chunk.data.len());
            self.chunk.lines.push(self.line);
            return Ok(true);
        }
    }

    /// For each field of the CSV header, the stream's column it names.
    fn header_columns(&self, header: &Header) -> Result<Vec<usize>, InputError> {
        let line = self.line + 1;
        let names = &header.fields;
        let fields = self.schema.fields();
        let mut columns = Vec::with_capacity(names.len());
        let mut unknown = Vec::new();
        for name in names {
            let name = name.as_deref().unwrap_or("").trim();
            let found = fields
                .iter()
                .position(|f| f.name() == name)
                .or_else(|| fields.iter().position(|f| f.name() == &name.to_lowercase()));
            match found {
                Some(c) if columns.contains(&c) => {
                    let message = format!("column \"{name}\" appears twice in the header");
                    return Err(self.error(Some(line), message));
                }
                Some(c) => columns.push(c),
                None => unknown.push(format!("\"{name}\"")),
            }
        }
        if !unknown.is_empty() {
            let known: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
            let message = format!(
                "unknown column{} {} in the header; stream \"{}\" has columns {}",
                if unknown.len() == 1 { "" } else { "s" },
                unknown.join(", "),
                self.stream,
                known.join(", ")
            );
            return Err(self.error(Some(line), message));
        }
        let missing: Vec<String> = (0..fields.len())
            .filter(|c| !columns.contains(c) && !fields[*c].is_nullable())
            .map(|c| format!("\"{}\"", fields[c].name()))
            .collect();
        if !missing.is_empty() {
            let message = format!(
                "the header lacks column {} of stream \"{}\", which cannot be NULL",
                missing.join(", "),
                self.stream
            );
            return Err(self.error(Some(line), message));
        }
        Ok(columns)
    }

    /// Decodes the chunk's records. A bad record is reported to `bad`; when it lets the run
    /// go on, the records before it are decoded again on their own and decoding resumes after
    /// it, so each good record is decoded at most twice.
    fn decode_chunk(&mut self, bad: &mut BadRows) -> Result<RecordBatch, InputError> {
        let n = self.chunk.len();
        let mut parts = Vec::new();
        let mut from = 0;
        while from < n {
            match self.decode_range(from, n) {
                Ok(batch) => {
                    parts.push(batch);
                    break;
                }
                Err((at, e)) => {
                    let line = self.chunk.lines[at];
                    bad.record(self.error(Some(line), input_message(&e)))?;
                    if at > from {
                        let batch = self.decode_range(from, at).map_err(|(at, e)| {
                            self.error(Some(self.chunk.lines[at]), input_message(&e))
                        })?;
                        parts.push(batch);
                    }
                    from = at + 1;
                }
            }
        }
        match parts.len() {
            0 => Ok(RecordBatch::new_empty(self.schema.clone())),
            1 => Ok(parts.remove(0)),
            _ => datafusion::arrow::compute::concat_batches(&self.schema, &parts)
                .map_err(|e| self.error(None, e.to_string())),
        }
    }

    /// Decodes records `from..to`, or says which record failed and why.
    fn decode_range(&self, from: usize, to: usize) -> Result<RecordBatch, (usize, saql::Error)> {
        self.decode_json(from, to)
    }

    fn decode_json(&self, from: usize, to: usize) -> Result<RecordBatch, (usize, saql::Error)> {
        let mut builder = BatchBuilder::new(self.schema.clone()).map_err(|e| (from, e))?;
        for at in from..to {
            self.push_json(&mut builder, self.chunk.bytes(at, at + 1))
                .and_then(|()| builder.finish_row())
                .map_err(|e| (at, e))?;
        }
        builder.finish().map_err(|e| (from, e))
    }

    /// Appends one JSON object as a row: keys name columns, absent keys are NULL, strings
    /// are parsed as the column's type, numbers and booleans are cast to it.
    fn push_json(&self, builder: &mut BatchBuilder, bytes: &[u8]) -> saql::Result<()> {
        let bad = |message: String| {
            saql::Error::invalid_input(sqlstate::INVALID_TEXT_REPRESENTATION, message)
        };
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("invalid JSON: {e}")))?;
        let serde_json::Value::Object(object) = value else {
            return Err(bad("expected a JSON object".to_string()));
        };
        let fields = self.schema.fields();
        let mut values: Vec<Option<&serde_json::Value>> = vec![None; fields.len()];
        let mut unknown = Vec::new();
        for (key, value) in &object {
            let found = fields
                .iter()
                .position(|f| f.name() == key)
                .or_else(|| fields.iter().position(|f| f.name() == &key.to_lowercase()));
            match found {
                Some(c) => values[c] = Some(value),
                None => unknown.push(format!("\"{key}\"")),
            }
        }
        if !unknown.is_empty() {
            return Err(bad(format!(
                "unknown column{} {} for stream \"{}\"",
                if unknown.len() == 1 { "" } else { "s" },
                unknown.join(", "),
                self.stream
            )));
        }
        for (c, value) in values.into_iter().enumerate() {
            use serde_json::Value as J;
            match value {
                None | Some(J::Null) => builder.push_text(c, None)?,
                Some(J::String(s)) => builder.push_text(c, Some(s))?,
                Some(J::Bool(b)) => builder.push_scalar(c, &ScalarValue::Boolean(Some(*b)))?,
                Some(J::Number(n)) => {
                    let scalar = if let Some(i) = n.as_i64() {
                        ScalarValue::Int64(Some(i))
                    } else if let Some(u) = n.as_u64() {
                        ScalarValue::UInt64(Some(u))
                    } else {
                        ScalarValue::Float64(n.as_f64())
                    };
                    if matches!(fields[c].data_type(), DataType::Timestamp(..)) {
                        return Err(bad(format!(
                            "a timestamp must be a string such as \"2024-01-01 00:00:00\", \
                             not {n}"
                        ))
                        .in_column(fields[c].name()));
                    }
                    builder.push_scalar(c, &scalar)?
                }
                Some(J::Array(_) | J::Object(_)) => {
                    return Err(bad("nested JSON values are not supported".to_string())
                        .in_column(fields[c].name()))
                }
            }
        }
        Ok(())
    }

    fn error(&self, line: Option<u64>, message: String) -> InputError {
        let line = line.map(|l| match &self.line_map {
            Some(map) => map.get(l.saturating_sub(1) as usize).copied().unwrap_or(l),
            None => l,
        });
        InputError {
            path: self.path.clone(),
            line,
            message,
        }
    }
}

/// The input line an error names, if it names one.
fn line_of(e: &saql::Error) -> Option<u64> {
    match e {
        saql::Error::InvalidInput { line, .. } => *line,
        _ => None,
    }
}

/// An input error's message without the line (the caller reports the line its own way).
fn input_message(e: &saql::Error) -> String {
    match e {
        saql::Error::InvalidInput {
            message, column, ..
        } => match column {
            Some(c) => format!("{message}, column \"{c}\""),
            None => message.clone(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("host", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    fn input(text: &str, format: Format) -> Input {
        let lines = (1..=text.lines().count() as u64 + 1)
            .map(|l| l + 10)
            .collect();
        Input::from_text("s", "f".into(), schema(), text.into(), format, lines)
    }

    #[test]
    fn csv_maps_header_names_and_skips_bad_lines() {
        let text =
            "n,TS\n1,2024-01-01 00:00:01\n\nx,2024-01-01 00:00:02\n\"3\",2024-01-01 00:00:03\n";
        let mut bad = BadRows::new(false);
        let e = input(text, Format::Csv)
            .next_batch(100, &mut bad)
            .unwrap_err();
        assert_eq!(e.line, Some(14));
        assert!(e.message.contains("column \"n\""), "{e}");

        let mut bad = BadRows::new(true);
        let mut input = input(text, Format::Csv);
        let batch = input.next_batch(100, &mut bad).unwrap().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert!(batch.column(1).is_null(0));
        assert!(bad
            .summary()
            .unwrap()
            .starts_with("skipped 1 bad input line (all: f:14: "));
        assert!(input.next_batch(100, &mut bad).unwrap().is_none());
    }

    #[test]
    fn csv_header_errors_name_the_columns() {
        let mut bad = BadRows::new(true);
        let e = input("ts,bogus,other\n", Format::Csv)
            .next_batch(10, &mut bad)
            .unwrap_err();
        assert_eq!(e.line, Some(11));
        assert!(e.message.contains("\"bogus\", \"other\""), "{e}");
        let e = input("host\nx\n", Format::Csv)
            .next_batch(10, &mut bad)
            .unwrap_err();
        assert!(e.message.contains("\"ts\""), "{e}");
    }

    /// Decodes `text` whole and in chunks read `chunk_bytes` at a time: the rows, the
    /// skipped lines and the error that ends it, as text.
    fn decode_both(text: &str, skip: bool, chunk_bytes: usize) -> (String, String) {
        let open = || {
            let reader = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
            Input::new("s", "f".into(), schema(), reader, Format::Csv, None)
        };
        let show = |batches: Vec<RecordBatch>, bad: BadRows, end: Option<InputError>| {
            let rows = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
                .unwrap()
                .to_string();
            format!("{rows}\n{:?}\n{end:?}", bad.summary())
        };
        let mut whole = open();
        let (mut batches, mut bad, mut end) = (Vec::new(), BadRows::new(skip), None);
        loop {
            match whole.next_batch(3, &mut bad) {
                Ok(Some(b)) => batches.push(b),
                Ok(None) => break,
                Err(e) => {
                    end = Some(e);
                    break;
                }
            }
        }
        let whole = show(batches, bad, end);
        let (mut chunks, decoder) = open().into_chunks(3, skip, chunk_bytes).unwrap();
        let (mut batches, mut bad, mut end) = (Vec::new(), BadRows::new(skip), None);
        while let Some(chunk) = chunks.next_chunk().unwrap() {
            let decoded = decoder.decode(chunk);
            for e in decoded.skipped {
                bad.record(e).unwrap();
            }
            batches.extend(decoded.batches);
            if decoded.failed.is_some() || decoded.ended {
                end = decoded.failed;
                break;
            }
        }
        (whole, show(batches, bad, end))
    }

    #[test]
    fn chunks_decode_as_the_whole_input_does() {
        let good = "\u{feff}\n\nhost,ts,n\n\"a,\nb\",2024-01-01 00:00:01,1\r\n\n\"q\"\"\",2024-01-01 00:00:02,\n,2024-01-01 00:00:03,3\nz,2024-01-01 00:00:04,4";
        let bad = "host,ts,n\nx,2024-01-01 00:00:01,1\ny,2024-01-01 00:00:0x,2\n\"open,2024-01-01 00:00:03,3\"\nw,2024-01-01 00:00:04,nope\nv,2024-01-01 00:00:05,5\n\\.\nu,2024-01-01 00:00:06,6\n";
        for text in [good, bad] {
            for skip in [false, true] {
                for chunk_bytes in [1, 2, 3, 5, 8, 13, 21, 64, 4096] {
                    let (whole, chunked) = decode_both(text, skip, chunk_bytes);
                    assert_eq!(whole, chunked, "skip {skip}, chunks of {chunk_bytes} bytes");
                }
            }
        }
        // The rows are there: a quoted newline, a doubled quote, a NULL, no trailing newline.
        let (whole, _) = decode_both(good, false, 1);
        assert!(whole.contains("| q\"") && whole.contains("| z "), "{whole}");
        let (stops, _) = decode_both(bad, false, 1);
        assert!(stops.contains("line: Some(3)"), "{stops}");
        let (skips, _) = decode_both(bad, true, 1);
        assert!(skips.contains("skipped 3 bad input lines"), "{skips}");
        assert!(skips.contains("| v ") && !skips.contains("| u "), "{skips}");
    }

    #[test]
    fn quoted_newlines_keep_line_numbers() {
        let text = "ts,host\n2024-01-01 00:00:01,\"a\nb\"\n2024-01-01 00:00:0x,c\n";
        let mut bad = BadRows::new(false);
        let e = input(text, Format::Csv).next_batch(1, &mut bad);
        let batch = e.unwrap().unwrap();
        assert_eq!(batch.num_rows(), 1);
        let mut i = input(text, Format::Csv);
        i.next_batch(1, &mut bad).unwrap();
        let e = i.next_batch(1, &mut bad).unwrap_err();
        assert_eq!(e.line, Some(14));
    }

    #[test]
    fn json_lines() {
        let text = "{\"ts\":\"2024-01-01 00:00:01\",\"n\":5}\n{\"ts\":\"2024-01-01 00:00:02\",\"zz\":1}\n{\"ts\":3}\n";
        let mut bad = BadRows::new(true);
        let batch = input(text, Format::JsonLines)
            .next_batch(10, &mut bad)
            .unwrap()
            .unwrap();
        assert_eq!(batch.num_rows(), 1);
        let summary = bad.summary().unwrap();
        assert!(
            summary.starts_with("skipped 2 bad input lines (all: "),
            "{summary}"
        );
        assert!(summary.contains("f:12: unknown column \"zz\""), "{summary}");
        assert!(
            summary.contains("f:13: a timestamp must be a string"),
            "{summary}"
        );
    }
}
