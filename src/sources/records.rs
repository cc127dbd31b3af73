//! Records of a source (one per line: a JSON object, or a CSV record) decoded into batches
//! of the target stream. A run of lines is decoded in one go; when that fails, the run is
//! decoded again line by line, so that the bad records are known by line and the good ones
//! kept. JSON values are found by each column's path (missing keys and `null` are NULL);
//! CSV goes through the COPY decoder.

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use super::csv::{CopyDecoder, CopyOptions};
use super::json::JsonDecoder;
use super::spec::RecordFormat;
use super::value::BatchBuilder;
use crate::error::{Error, Result};

/// Decodes records into batches of one schema.
pub struct RecordDecoder {
    schema: SchemaRef,
    format: RecordFormat,
    json: JsonDecoder,
}

/// What decoding a run of lines gave.
pub struct Decoded {
    /// The good records' rows, in input order.
    pub batch: RecordBatch,
    /// Bad records, as (index of the line in the run, error).
    pub bad: Vec<(usize, Error)>,
    /// Lines used: all of them, or (when stopping at the first bad record) the lines before it.
    pub consumed: usize,
}

impl RecordDecoder {
    /// A decoder into `schema`; `paths` gives each column's JSON path (unused for CSV).
    pub fn new(schema: SchemaRef, format: RecordFormat, paths: Vec<Vec<String>>) -> Self {
        RecordDecoder {
            json: JsonDecoder::new(schema.clone(), &paths),
            schema,
            format,
        }
    }

    /// Decodes `lines` (without their newlines). Blank lines are skipped. With
    /// `stop_at_bad`, decoding stops before the first bad record.
    pub fn decode(&mut self, lines: &[&[u8]], stop_at_bad: bool) -> Result<Decoded> {
        if let Ok(batch) = self.decode_all(lines) {
            return Ok(Decoded {
                batch,
                bad: Vec::new(),
                consumed: lines.len(),
            });
        }
        let mut good = Vec::new();
        let mut bad = Vec::new();
        let mut consumed = lines.len();
        for (i, line) in lines.iter().enumerate() {
            match self.decode_all(&[*line]) {
                Ok(b) => good.push(b),
                Err(e) => {
                    bad.push((i, e));
                    if stop_at_bad {
                        consumed = i;
                        break;
                    }
                }
            }
        }
        let batch = concat_batches(&self.schema, &good)?;
        Ok(Decoded {
            batch,
            bad,
            consumed,
        })
    }

    fn decode_all(&mut self, lines: &[&[u8]]) -> Result<RecordBatch> {
        match self.format {
            RecordFormat::Json => self.decode_json(lines),
            RecordFormat::Csv => {
                let columns = (0..self.schema.fields().len()).collect();
                let mut decoder =
                    CopyDecoder::new(self.schema.clone(), columns, CopyOptions::csv())?;
                for line in lines {
                    if is_blank(line) {
                        continue;
                    }
                    if line.contains(&b'\n') {
                        return Err(Error::Internal("a record holds a newline".into()));
                    }
                    decoder.feed(line)?;
                    decoder.feed(b"\n")?;
                }
                decoder.finish()
            }
        }
    }

    fn decode_json(&mut self, lines: &[&[u8]]) -> Result<RecordBatch> {
        let mut builder = BatchBuilder::new(self.schema.clone())?;
        for line in lines {
            if !is_blank(line) {
                self.json.push_record(line, &mut builder)?;
            }
        }
        builder.finish()
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use datafusion::arrow::util::pretty::pretty_format_batches;

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("pid", DataType::Int64, true),
            Field::new("exe", DataType::Utf8, true),
        ]))
    }

    fn json() -> RecordDecoder {
        let paths = vec![
            vec!["ts".to_string()],
            vec!["proc".to_string(), "pid".to_string()],
            vec!["proc".to_string(), "args".to_string(), "0".to_string()],
        ];
        RecordDecoder::new(schema(), RecordFormat::Json, paths)
    }

    #[test]
    fn json_paths_nested_and_missing() {
        let lines: Vec<&[u8]> = vec![
            br#"{"ts": "2024-01-01 00:00:01", "proc": {"pid": 7, "args": ["/bin/sh", "-c"]}}"#,
            b"",
            br#"{"ts": 1704067202, "proc": {"pid": null}}"#,
            br#"{"ts": "2024-01-01 00:00:03", "other": 1}"#,
        ];
        let d = json().decode(&lines, false).unwrap();
        assert!(d.bad.is_empty());
        assert_eq!(d.consumed, 4);
        let text = pretty_format_batches(&[d.batch]).unwrap().to_string();
        let expected = "\
+---------------------+-----+---------+
| ts                  | pid | exe     |
+---------------------+-----+---------+
| 2024-01-01T00:00:01 | 7   | /bin/sh |
| 2024-01-01T00:00:02 |     |         |
| 2024-01-01T00:00:03 |     |         |
+---------------------+-----+---------+";
        assert_eq!(text, expected);
    }

    #[test]
    fn bad_records_are_named_and_skipped_or_stop() {
        let lines: Vec<&[u8]> = vec![
            br#"{"ts": "2024-01-01 00:00:01", "proc": {"pid": 1}}"#,
            br#"{"ts": "2024-01-01 00:00:02", "proc": {"pid": "x"}}"#,
            b"not json",
            br#"{"proc": {"pid": 4}}"#,
            br#"{"ts": "2024-01-01 00:00:05", "proc": {"pid": 5}}"#,
        ];
        let d = json().decode(&lines, false).unwrap();
        assert_eq!(d.batch.num_rows(), 2);
        let bad: Vec<usize> = d.bad.iter().map(|(i, _)| *i).collect();
        assert_eq!(bad, vec![1, 2, 3]);
        assert_eq!(d.bad[0].1.sqlstate(), "22P02");
        assert_eq!(d.bad[2].1.sqlstate(), "23502");
        let d = json().decode(&lines, true).unwrap();
        assert_eq!((d.batch.num_rows(), d.consumed, d.bad.len()), (1, 1, 1));
    }

    #[test]
    fn csv_records() {
        let mut d = RecordDecoder::new(schema(), RecordFormat::Csv, vec![]);
        let lines: Vec<&[u8]> = vec![
            b"2024-01-01 00:00:01,1,\"a,b\"",
            b"2024-01-01 00:00:02,zz,c",
            b"2024-01-01 00:00:03,,",
        ];
        let out = d.decode(&lines, false).unwrap();
        assert_eq!(out.batch.num_rows(), 2);
        assert_eq!(out.bad.len(), 1);
        assert_eq!(out.bad[0].0, 1);
    }
}
