//! The byte format of operator snapshots: a few fixed integers, then the state tables as an
//! Arrow IPC stream.

use std::io::Cursor;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};

/// An operator's state taken at a checkpoint barrier, turned into bytes later: the operator
/// captures what it holds (cheap clones of Arrow arrays, plain copies of its bookkeeping)
/// while its stream is locked, and the encoding runs after the lock is released.
pub struct StateImage(Box<dyn FnOnce() -> Result<Vec<u8>> + Send>);

impl StateImage {
    /// State already encoded.
    pub fn ready(bytes: Vec<u8>) -> Self {
        StateImage(Box::new(move || Ok(bytes)))
    }

    /// State to be encoded by `encode` when the bytes are needed.
    pub fn later(encode: impl FnOnce() -> Result<Vec<u8>> + Send + 'static) -> Self {
        StateImage(Box::new(encode))
    }

    /// The snapshot's bytes, as `Operator::restore` takes them.
    pub fn encode(self) -> Result<Vec<u8>> {
        (self.0)()
    }
}

/// Writes `header` integers, then `batches` (all of `schema`) as an IPC stream.
pub fn encode(header: &[i64], schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    for h in header {
        out.extend_from_slice(&h.to_le_bytes());
    }
    let mut writer = StreamWriter::try_new(&mut out, schema)?;
    for b in batches {
        writer.write(b)?;
    }
    writer.finish()?;
    drop(writer);
    Ok(out)
}

/// Reads what [`encode`] wrote: the header integers and the batches.
pub fn decode(bytes: &[u8]) -> Result<(Vec<i64>, Vec<RecordBatch>)> {
    let bad = || Error::Internal("corrupt operator snapshot".into());
    let n = u32::from_le_bytes(
        bytes
            .get(..4)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    );
    let mut header = Vec::with_capacity(n as usize);
    let mut pos = 4;
    for _ in 0..n {
        let raw = bytes.get(pos..pos + 8).ok_or_else(bad)?;
        header.push(i64::from_le_bytes(raw.try_into().map_err(|_| bad())?));
        pos += 8;
    }
    let reader = StreamReader::try_new(Cursor::new(&bytes[pos..]), None)?;
    let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((header, batches))
}
