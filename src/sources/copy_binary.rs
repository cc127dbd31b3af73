//! PostgreSQL's binary COPY format (`COPY s FROM STDIN WITH (FORMAT binary)`, what psycopg's
//! binary copy and asyncpg's `copy_records_to_table` send): the `PGCOPY\n\377\r\n\0`
//! signature, flags and header extension, then per tuple a 16-bit field count and per field
//! a 32-bit length (-1 for NULL) and the value in the type's binary send format, then a -1
//! trailer. Values are read by the target column's type: `bool`, `int2/4/8`, `float4/8`,
//! `text` (UTF-8, no NUL), `timestamp[tz]` (microseconds since 2000-01-01). Data arrives in
//! chunks of any size; errors name the tuple (as `line`) and the column.

use crate::error::sqlstate;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};
use crate::sources::value::BatchBuilder;

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// Microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The decoding state of one binary COPY.
#[derive(Debug, Default)]
pub struct BinaryCopy {
    /// Input not yet decoded.
    buf: Vec<u8>,
    header_done: bool,
    ended: bool,
    /// Tuples decoded so far (the 1-based number of the next is this plus one).
    tuples: u64,
}

fn bad(message: impl Into<String>) -> Error {
    Error::invalid_input(sqlstate::BAD_COPY_FILE_FORMAT, message)
}

impl BinaryCopy {
    /// Decodes every complete tuple of the data so far into `builder`: input field `i` fills
    /// column `columns[i]`, the `unlisted` columns get NULL.
    pub fn feed(
        &mut self,
        chunk: &[u8],
        builder: &mut BatchBuilder,
        columns: &[usize],
        unlisted: &[usize],
    ) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.buf.extend_from_slice(chunk);
        let mut at = 0;
        if !self.header_done {
            self.check_signature()?;
            let Some(end) = self.header_end() else {
                return Ok(());
            };
            at = end;
            self.header_done = true;
        }
        while let Some(end) = self.tuple_end(at)? {
            let count = i16::from_be_bytes([self.buf[at], self.buf[at + 1]]);
            if count == -1 {
                self.ended = true;
                self.buf = Vec::new();
                return Ok(());
            }
            let tuple = self.tuples + 1;
            if count as usize != columns.len() {
                return Err(bad(format!(
                    "row field count is {count}, expected {}",
                    columns.len()
                ))
                .at_line(tuple));
            }
            let mut pos = at + 2;
            for &column in columns {
                let len = i32::from_be_bytes(self.buf[pos..pos + 4].try_into().expect("4 bytes"));
                pos += 4;
                let value = if len < 0 {
                    None
                } else {
                    let bytes = &self.buf[pos..pos + len as usize];
                    pos += len as usize;
                    Some(bytes)
                };
                let schema = builder.schema().clone();
                let scalar = match value {
                    None => None,
                    Some(bytes) => Some(
                        decode(bytes, &schema, column)
                            .map_err(|e| e.in_column(schema.field(column).name()).at_line(tuple))?,
                    ),
                };
                match scalar {
                    None => builder.push_text(column, None),
                    Some(v) => builder.push_scalar(column, &v),
                }
                .map_err(|e| e.at_line(tuple))?;
            }
            for &column in unlisted {
                builder
                    .push_text(column, None)
                    .map_err(|e| e.at_line(tuple))?;
            }
            builder.finish_row()?;
            self.tuples += 1;
            at = end;
        }
        self.buf.drain(..at);
        Ok(())
    }

    /// Checks that the data ended with the trailer, as PostgreSQL requires.
    pub fn finish(&self) -> Result<()> {
        if self.ended {
            Ok(())
        } else if !self.header_done {
            Err(bad("COPY file signature not recognized"))
        } else {
            Err(bad("unexpected EOF in COPY data").at_line(self.tuples + 1))
        }
    }

    /// The end of the header once it is all in `buf`; checks the signature and flags.
    fn header_end(&self) -> Option<usize> {
        if self.buf.len() < SIGNATURE.len() + 8 {
            return None;
        }
        let extension = u32::from_be_bytes(self.buf[15..19].try_into().expect("4 bytes")) as usize;
        let end = 19usize.checked_add(extension)?;
        (self.buf.len() >= end).then_some(end)
    }

    /// The end of the tuple (or trailer) starting at `at` once it is all in `buf`.
    fn tuple_end(&self, at: usize) -> Result<Option<usize>> {
        if at == 0 && !self.header_done {
            return Ok(None);
        }
        if self.buf.len() < at + 2 {
            return Ok(None);
        }
        let count = i16::from_be_bytes([self.buf[at], self.buf[at + 1]]);
        if count == -1 {
            return Ok(Some(at + 2));
        }
        if count < 0 {
            return Err(bad(format!("row field count is {count}")).at_line(self.tuples + 1));
        }
        let mut pos = at + 2;
        for _ in 0..count {
            if self.buf.len() < pos + 4 {
                return Ok(None);
            }
            let len = i32::from_be_bytes(self.buf[pos..pos + 4].try_into().expect("4 bytes"));
            pos += 4;
            if len < -1 {
                return Err(bad(format!("invalid field length {len}")).at_line(self.tuples + 1));
            }
            if len > 0 {
                pos += len as usize;
                if self.buf.len() < pos {
                    return Ok(None);
                }
            }
        }
        Ok(Some(pos))
    }

    /// Checks the signature once enough bytes are there (called before decoding tuples).
    pub fn check_signature(&self) -> Result<()> {
        let n = self.buf.len().min(SIGNATURE.len());
        if self.buf[..n] != SIGNATURE[..n] {
            return Err(bad("COPY file signature not recognized"));
        }
        if self.buf.len() >= 15 {
            let flags = u32::from_be_bytes(self.buf[11..15].try_into().expect("4 bytes"));
            if flags & 0xffff_0000 & !(1 << 16) != 0 {
                return Err(bad("unrecognized critical flags in COPY file header"));
            }
            if flags & (1 << 16) != 0 {
                return Err(bad("COPY with OIDs is not supported"));
            }
        }
        Ok(())
    }
}

/// A field's binary value as a scalar of its column's type.
fn decode(bytes: &[u8], schema: &SchemaRef, column: usize) -> Result<ScalarValue> {
    let data_type = schema.field(column).data_type();
    let fixed = |n: usize| -> Result<&[u8]> {
        if bytes.len() == n {
            Ok(bytes)
        } else {
            Err(bad(format!(
                "incorrect binary data format: {} bytes for a {data_type} value",
                bytes.len()
            )))
        }
    };
    Ok(match data_type {
        DataType::Boolean => ScalarValue::Boolean(Some(fixed(1)?[0] != 0)),
        DataType::Int16 | DataType::Int32 | DataType::Int64 => match bytes.len() {
            2 => ScalarValue::Int16(Some(i16::from_be_bytes(fixed(2)?.try_into().expect("2")))),
            4 => ScalarValue::Int32(Some(i32::from_be_bytes(fixed(4)?.try_into().expect("4")))),
            _ => ScalarValue::Int64(Some(i64::from_be_bytes(fixed(8)?.try_into().expect("8")))),
        },
        DataType::Float32 | DataType::Float64 => match bytes.len() {
            4 => ScalarValue::Float32(Some(f32::from_be_bytes(fixed(4)?.try_into().expect("4")))),
            _ => ScalarValue::Float64(Some(f64::from_be_bytes(fixed(8)?.try_into().expect("8")))),
        },
        DataType::Timestamp(_, zone) => {
            let micros = i64::from_be_bytes(fixed(8)?.try_into().expect("8"));
            let unix = micros.checked_add(PG_EPOCH_MICROS).ok_or_else(|| {
                Error::invalid_input(sqlstate::DATETIME_FIELD_OVERFLOW, "timestamp out of range")
            })?;
            ScalarValue::TimestampMicrosecond(Some(unix), zone.clone())
        }
        _ => {
            let text = std::str::from_utf8(bytes).map_err(|_| {
                Error::invalid_input(
                    sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
                    "invalid byte sequence for encoding \"UTF8\"",
                )
            })?;
            ScalarValue::Utf8(Some(text.to_string()))
        }
    })
}
