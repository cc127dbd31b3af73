//! Records split into fields, waiting to become Arrow columns. The COPY decoder
//! ([`super::csv::CopyDecoder`]) splits each record as PostgreSQL's rules say and appends its
//! fields here; once a chunk of records is complete it is decoded a column at a time: the
//! chunk's bytes are checked to be UTF-8 once, then every value of a column is parsed in one
//! loop by [`BatchBuilder::push_texts`]. A bad record is the earliest one with any error (in a
//! record, the first field's error): it fails the decode, or, when skipping bad records, is
//! left out of the batch and reported with its line.

use crate::error::sqlstate;
use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::sources::value::BatchBuilder;

/// The span of a NULL field.
const NULL: (usize, usize) = (usize::MAX, usize::MAX);

/// Complete records not yet decoded into a batch.
#[derive(Debug, Default)]
pub(crate) struct PendingRecords {
    /// Fields per record.
    width: usize,
    /// Every field's decoded bytes, back to back.
    text: Vec<u8>,
    /// Record by record, each field's range of `text`, or [`NULL`].
    spans: Vec<(usize, usize)>,
    /// The input line on which each record starts.
    lines: Vec<u64>,
    /// Records that could not be split (wrong number of fields, open quote), with their
    /// errors (each carrying its line); kept to be reported in line order.
    unsplit: Vec<Error>,
}

impl PendingRecords {
    /// Records of `width` fields.
    pub(crate) fn new(width: usize) -> Self {
        PendingRecords {
            width,
            ..PendingRecords::default()
        }
    }

    /// The number of records held.
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    /// Appends one record starting on `line`: `fields` yields each field's bytes (`None` for
    /// NULL), exactly `width` of them.
    pub(crate) fn push<'a>(&mut self, line: u64, fields: impl Iterator<Item = Option<&'a [u8]>>) {
        for field in fields {
            self.spans.push(match field {
                None => NULL,
                Some(bytes) => {
                    let start = self.text.len();
                    self.text.extend_from_slice(bytes);
                    (start, self.text.len())
                }
            });
        }
        self.lines.push(line);
    }

    /// Notes a record that could not be split; `error` carries its line.
    pub(crate) fn push_unsplit(&mut self, error: Error) {
        self.unsplit.push(error);
    }

    /// Whether any record could not be split.
    pub(crate) fn has_unsplit(&self) -> bool {
        !self.unsplit.is_empty()
    }

    /// Decodes the records into a batch, `columns[i]` being the column field `i` fills and
    /// `unlisted` the columns no field fills (NULL). Bad records fail it unless `skip`, which
    /// leaves them out and appends their errors to `skipped`, in line order. Empties `self`.
    pub(crate) fn decode(
        &mut self,
        builder: &mut BatchBuilder,
        columns: &[usize],
        unlisted: &[usize],
        skip: bool,
        skipped: &mut Vec<Error>,
    ) -> Result<RecordBatch> {
        let rows = self.len();
        // The first error of each bad record, by record; fields are decoded in input order,
        // so the first one kept is the one PostgreSQL would report.
        let mut bad: Vec<Option<Error>> = Vec::new();
        let mut note = |row: usize, e: Error| {
            if bad.is_empty() {
                bad.resize_with(rows, || None);
            }
            bad[row].get_or_insert(e);
        };
        let whole = std::str::from_utf8(&self.text).ok();
        for (field, &column) in columns.iter().enumerate() {
            let texts = (0..rows).map(|row| {
                let (start, end) = self.spans[row * self.width + field];
                if (start, end) == NULL {
                    return Ok(None);
                }
                // A field that starts or ends inside a character is not UTF-8 on its own.
                match whole.and_then(|w| w.get(start..end)) {
                    Some(text) => Ok(Some(text)),
                    None => utf8(&self.text[start..end]).map(Some),
                }
            });
            builder.push_texts(column, texts, &mut note)?;
        }
        for &column in unlisted {
            builder.push_texts(column, (0..rows).map(|_| Ok(None)), &mut note)?;
        }
        builder.finish_rows(rows)?;
        let mut errors: Vec<Error> = std::mem::take(&mut self.unsplit);
        let keep: Option<BooleanArray> =
            (!bad.is_empty()).then(|| bad.iter().map(|e| Some(e.is_none())).collect());
        for (row, e) in bad.into_iter().enumerate() {
            if let Some(e) = e {
                errors.push(e.at_line(self.lines[row]));
            }
        }
        self.text.clear();
        self.spans.clear();
        self.lines.clear();
        errors.sort_by_key(line_of);
        if !skip && !errors.is_empty() {
            // The builder holds the failed rows: start it afresh.
            *builder = BatchBuilder::new(builder.schema().clone())?;
            return Err(errors.swap_remove(0));
        }
        skipped.append(&mut errors);
        match keep {
            Some(keep) => builder.finish_filtered(&keep),
            None => builder.finish(),
        }
    }
}

/// The line an input error carries (0 for none).
fn line_of(e: &Error) -> u64 {
    match e {
        Error::InvalidInput {
            line: Some(line), ..
        } => *line,
        _ => 0,
    }
}

/// `bytes` as text, or PostgreSQL's error naming the first byte sequence that is not UTF-8.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|error| {
        let at = error.valid_up_to();
        let len = error.error_len().unwrap_or(bytes.len() - at);
        let shown: Vec<String> = bytes[at..at + len]
            .iter()
            .map(|b| format!("0x{b:02x}"))
            .collect();
        Error::invalid_input(
            sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
            format!(
                "invalid byte sequence for encoding \"UTF8\": {}",
                shown.join(" ")
            ),
        )
    })
}
