//! Decoding a large COPY on several threads ([`CopyDecoder::with_threads`]). The one
//! sequential step, finding where each record ends (a quote may hide a newline), runs as the
//! data arrives and cuts the complete records into pieces of about [`PIECE_BYTES`], each
//! noting the line it starts at. Once there are enough pieces for every thread, each thread
//! decodes its share with a decoder of its own (splitting into fields and parsing values,
//! the costly steps), and their batches and errors are taken in input order: the rows, the
//! line numbers, the first error and the records skipped are those one thread would give.

use std::ops::Range;

use datafusion::arrow::record_batch::RecordBatch;

use super::{CopyDecoder, Scan};
use crate::error::{Error, Result};

/// Bytes of complete records one thread decodes in a go.
pub(super) const PIECE_BYTES: usize = 4 << 20;

/// What a thread's decoder made of its pieces.
type Decoded = Result<(Vec<RecordBatch>, Vec<Error>)>;

impl CopyDecoder {
    /// The text or csv path of [`CopyDecoder::feed`] when more than one thread decodes.
    pub(super) fn feed_in_pieces(&mut self, chunk: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(chunk);
        self.cut_records()?;
        if self.pieces.len() >= self.threads {
            self.decode_pieces()?;
        }
        Ok(())
    }

    /// The end of input when more than one thread decodes: every record cut so far, then
    /// the last one (which has no line terminator) as one thread would decode it.
    pub(super) fn end_input_in_pieces(&mut self) -> Result<()> {
        if !self.ended {
            self.close_piece();
            self.decode_pieces()?;
            let rest = std::mem::take(&mut self.buf);
            // A header with no line after it is all there was.
            if !rest.is_empty() && !std::mem::take(&mut self.header_pending) {
                let mut last = self.piece_decoder(self.line)?;
                last.feed(&rest)?;
                last.end_input()?;
                self.end_marker |= last.end_marker;
                self.take_decoded(Ok((last.batches.into(), last.skipped)))?;
            }
        }
        // After the end marker: the pieces before it.
        self.decode_pieces()?;
        self.ended = true;
        self.buf = Vec::new();
        self.scan = Scan::default();
        Ok(())
    }

    /// Moves the cut over every complete record in `buf`, closing a piece every
    /// `piece_bytes`; the header is dropped and the `\.` end marker ends the input.
    fn cut_records(&mut self) -> Result<()> {
        while !self.ended {
            let start = self.cut;
            let Some(newline) = self.find_record_end() else {
                break;
            };
            if newline - start > self.max_line_bytes {
                return self.fail_after_pieces();
            }
            let end = match newline > start && self.buf[newline - 1] == b'\r' {
                true => newline - 1,
                false => newline,
            };
            let end_marker = &self.buf[start..end] == b"\\.";
            self.line += 1 + self.scan.newlines;
            self.cut = newline + 1;
            self.scan = Scan {
                pos: self.cut,
                ..Scan::default()
            };
            if end_marker {
                self.ended = true;
                self.end_marker = true;
                self.buf.truncate(start);
                self.cut = start;
                self.close_piece();
            } else if std::mem::take(&mut self.header_pending) {
                // The header is the first record: nothing was cut before it.
                self.buf.drain(..self.cut);
                self.cut = 0;
                self.scan.pos = 0;
                self.piece_line = self.line;
            } else if self.cut - self.piece_start() >= self.piece_bytes {
                self.close_piece();
            }
        }
        if !self.ended && self.buf.len() - self.cut > self.max_line_bytes {
            return self.fail_after_pieces();
        }
        Ok(())
    }

    /// The record at the cut is too long: the records before it come first, with their
    /// errors, then this error.
    fn fail_after_pieces(&mut self) -> Result<()> {
        self.close_piece();
        self.decode_pieces()?;
        Err(self.line_too_long())
    }

    /// Where the piece being cut starts in `buf`.
    fn piece_start(&self) -> usize {
        self.pieces.last().map_or(0, |p| p.0.end)
    }

    /// Ends the piece being cut at the cut, if it holds any record.
    fn close_piece(&mut self) {
        let start = self.piece_start();
        if self.cut > start {
            let line = self.pieces.last().map_or(self.piece_line, |p| p.2);
            self.pieces.push((start..self.cut, line, self.line));
        }
    }

    /// Decodes the pieces cut so far, each thread a run of them, and drops their bytes.
    fn decode_pieces(&mut self) -> Result<()> {
        if self.pieces.is_empty() {
            return Ok(());
        }
        let pieces = std::mem::take(&mut self.pieces);
        let cut = pieces.last().map_or(0, |p| p.0.end);
        let per_thread = pieces.len().div_ceil(self.threads.max(1));
        let runs: Vec<&[(Range<usize>, u64, u64)]> = pieces.chunks(per_thread).collect();
        let this = &*self;
        let results: Vec<Decoded> = std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for run in &runs[1..] {
                let run = *run;
                handles.push(crate::spawn::scoped(scope, "saql-copy-decode", move || {
                    this.decode_run(run)
                }));
            }
            let mut results = vec![this.decode_run(runs[0])];
            for handle in handles {
                results.push(match handle {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        Err(Error::Internal("a COPY decoding thread panicked".into()))
                    }),
                    Err(e) => Err(Error::Internal(format!(
                        "cannot start a COPY decoding thread: {e}"
                    ))),
                });
            }
            results
        });
        self.piece_line = pieces.last().map_or(self.piece_line, |p| p.2);
        self.buf.drain(..cut);
        self.cut -= cut;
        self.scan.pos -= cut;
        for result in results {
            self.take_decoded(result)?;
        }
        Ok(())
    }

    /// Decodes a run of pieces with a decoder of its own.
    fn decode_run(&self, run: &[(Range<usize>, u64, u64)]) -> Decoded {
        let mut decoder = self.piece_decoder(run[0].1)?;
        for (range, _, _) in run {
            decoder.feed(&self.buf[range.clone()])?;
        }
        decoder.end_input()?;
        Ok((decoder.batches.into(), decoder.skipped))
    }

    /// A one-thread decoder like this one for records starting at input line `line`.
    fn piece_decoder(&self, line: u64) -> Result<CopyDecoder> {
        let mut decoder = CopyDecoder::new(
            self.schema.clone(),
            self.columns.clone(),
            self.options.clone(),
        )?
        .with_batch_rows(self.batch_rows)
        .with_first_line(line);
        decoder.header_pending = false;
        decoder.skip_bad = self.skip_bad;
        decoder.skip_blank = self.skip_blank;
        Ok(decoder)
    }

    /// Takes a thread's batches and skipped records, or its error.
    fn take_decoded(&mut self, decoded: Decoded) -> Result<()> {
        let (batches, skipped) = decoded?;
        for batch in batches {
            self.decoded_rows += batch.num_rows();
            self.batches.push_back(batch);
        }
        self.skipped.extend(skipped);
        Ok(())
    }
}
