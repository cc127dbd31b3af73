//! A reference table's rows, keyed by its primary key: what `CREATE TABLE` holds and lookup
//! joins read. Rows are kept in Arrow's row format (one byte string for the key, one for the
//! whole row), so a lookup is one hash probe with the bytes of the probing row's key, and
//! the matched rows turn back into columns in one pass.
//!
//! Changes arrive as [`TableChange`]s, each one statement's effect, logged before they are
//! applied; the engine checks a change against the rows (duplicate keys, the row limit)
//! before logging it, so applying it never fails half-way.

use std::collections::BTreeMap;

use ahash::AHashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, RowParser, Rows, SortField};

use crate::error::{Error, Result};

/// Bytes a stored row costs beyond its key and row bytes (hash entry, two boxes).
const ROW_OVERHEAD: usize = 64;

/// One statement's effect on a table, in the order it is applied: empty the table, delete
/// keys, then insert or replace rows by key.
#[derive(Debug, Clone, Default)]
pub struct TableChange {
    /// `TRUNCATE`: every row goes first.
    pub truncate: bool,
    /// Keys to delete, as batches of the key columns.
    pub deletes: Vec<RecordBatch>,
    /// Rows to insert, replacing the row of the same key if there is one.
    pub upserts: Vec<RecordBatch>,
    /// A source that read these rows, with its progress after them (as JSON), kept with
    /// the rows so that it resumes after them.
    pub source: Option<(String, String)>,
}

impl TableChange {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        !self.truncate
            && self.source.is_none()
            && self.deletes.iter().all(|b| b.num_rows() == 0)
            && self.upserts.iter().all(|b| b.num_rows() == 0)
    }
}

/// A table's rows with what encodes and decodes them.
pub struct TableRows {
    key_conv: RowConverter,
    row_conv: RowConverter,
    parser: RowParser,
    rows: AHashMap<Box<[u8]>, Box<[u8]>>,
    bytes: usize,
    /// The log sequence number of the last change applied (0: none, or no log).
    pub applied_seq: u64,
    /// The progress (JSON) of each source writing into the table, as of its last change.
    pub sources: BTreeMap<String, String>,
    /// Every row as one batch, built when first asked for after a change (ad hoc SELECT
    /// reads it; most statements read no table).
    whole: Mutex<Option<RecordBatch>>,
}

/// A reference table: its schema, primary key and rows. Readers (lookup joins, ad hoc
/// SELECT) take the rows' read lock for one batch; writers go one at a time through
/// [`TableStore::writer`] (check, log, wait until durable, apply), so a change is applied
/// whole and in log order.
pub struct TableStore {
    name: String,
    schema: SchemaRef,
    key: Vec<usize>,
    key_schema: SchemaRef,
    rows: RwLock<TableRows>,
    writer: Mutex<()>,
}

impl std::fmt::Debug for TableStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableStore")
            .field("name", &self.name)
            .field("key", &self.key)
            .finish()
    }
}

impl TableStore {
    /// An empty table of `schema` whose primary key is the columns at `key`.
    pub fn try_new(name: &str, schema: SchemaRef, key: Vec<usize>) -> Result<TableStore> {
        let key_schema = Arc::new(schema.project(&key)?);
        let fields = |s: &SchemaRef| -> Vec<SortField> {
            s.fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect()
        };
        let key_conv = RowConverter::new(fields(&key_schema))?;
        let row_conv = RowConverter::new(fields(&schema))?;
        let parser = row_conv.parser();
        Ok(TableStore {
            name: name.to_string(),
            schema,
            key,
            key_schema,
            rows: RwLock::new(TableRows {
                key_conv,
                row_conv,
                parser,
                rows: AHashMap::new(),
                bytes: 0,
                applied_seq: 0,
                sources: BTreeMap::new(),
                whole: Mutex::new(None),
            }),
            writer: Mutex::new(()),
        })
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema of its rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Indexes of the primary key's columns.
    pub fn key(&self) -> &[usize] {
        &self.key
    }

    /// The schema of its keys (the primary key's columns).
    pub fn key_schema(&self) -> &SchemaRef {
        &self.key_schema
    }

    /// The rows, for reading.
    pub fn read(&self) -> RwLockReadGuard<'_, TableRows> {
        self.rows.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, TableRows> {
        self.rows.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The right to change the table, held from checking a change until it is applied.
    pub fn writer(&self) -> MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The key columns of rows of the table's schema.
    pub fn keys_of(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        Ok(batch.project(&self.key)?)
    }

    /// Applies a change (checked by the caller) logged at `seq`.
    pub fn apply(&self, change: &TableChange, seq: u64) -> Result<()> {
        let mut rows = self.write();
        rows.apply(change, self)?;
        rows.applied_seq = rows.applied_seq.max(seq);
        Ok(())
    }

    /// Replaces every row with `batches` (a checkpoint's), applied through log `seq`, and
    /// the sources' progress with `sources`.
    pub fn restore(
        &self,
        batches: &[RecordBatch],
        sources: BTreeMap<String, String>,
        seq: u64,
    ) -> Result<()> {
        let change = TableChange {
            truncate: true,
            upserts: batches.to_vec(),
            ..Default::default()
        };
        let mut rows = self.write();
        rows.apply(&change, self)?;
        rows.applied_seq = seq;
        rows.sources = sources;
        Ok(())
    }

    /// Forgets a source's progress (DROP SOURCE).
    pub fn forget_source(&self, name: &str) {
        self.write().sources.remove(name);
    }
}

impl TableRows {
    /// Rows held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// An estimate of the bytes the rows take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The keys of `key_columns` (arrays of the key's types) in row format.
    pub fn encode_keys(&self, key_columns: &[ArrayRef]) -> Result<Rows> {
        Ok(self.key_conv.convert_columns(key_columns)?)
    }

    /// Whether a row with this encoded key exists.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.rows.contains_key(key)
    }

    /// The encoded row of an encoded key.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.rows.get(key).map(|r| &r[..])
    }

    /// Columns of the rows whose encoded bytes are `rows` (from [`TableRows::get`]), in order.
    pub fn columns<'a>(
        &'a self,
        rows: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vec<ArrayRef>> {
        Ok(self
            .row_conv
            .convert_rows(rows.into_iter().map(|r| self.parser.parse(r)))?)
    }

    /// Every row, as one batch of `schema` (in no particular order): built once after
    /// each change, then shared.
    pub fn batch(&self, schema: &SchemaRef) -> Result<RecordBatch> {
        let mut whole = self.whole.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = whole.as_ref().filter(|b| b.schema() == *schema) {
            return Ok(b.clone());
        }
        let columns = self.columns(self.rows.values().map(|r| &r[..]))?;
        let batch = if columns.is_empty() || schema.fields().is_empty() {
            RecordBatch::new_empty(schema.clone())
        } else {
            RecordBatch::try_new(schema.clone(), columns)?
        };
        *whole = Some(batch.clone());
        Ok(batch)
    }

    fn apply(&mut self, change: &TableChange, store: &TableStore) -> Result<()> {
        *self.whole.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        if let Some((name, progress)) = &change.source {
            self.sources.insert(name.clone(), progress.clone());
        }
        if change.truncate {
            self.rows.clear();
            self.bytes = 0;
        }
        for keys in &change.deletes {
            let encoded = self.key_conv.convert_columns(keys.columns())?;
            for k in encoded.iter() {
                if let Some((key, row)) = self.rows.remove_entry(k.as_ref()) {
                    self.bytes -= key.len() + row.len() + ROW_OVERHEAD;
                }
            }
        }
        for batch in &change.upserts {
            if batch.schema().fields() != store.schema.fields() {
                return Err(Error::Internal(format!(
                    "rows for table \"{}\" do not match its schema",
                    store.name
                )));
            }
            let keys = self
                .key_conv
                .convert_columns(store.keys_of(batch)?.columns())?;
            let rows = self.row_conv.convert_columns(batch.columns())?;
            for (k, r) in keys.iter().zip(rows.iter()) {
                let key: Box<[u8]> = k.as_ref().into();
                let row: Box<[u8]> = r.as_ref().into();
                self.bytes += key.len() + row.len() + ROW_OVERHEAD;
                if let Some(old) = self.rows.insert(key, row) {
                    self.bytes -= k.as_ref().len() + old.len() + ROW_OVERHEAD;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn store() -> TableStore {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ip", DataType::Utf8, false),
            Field::new("score", DataType::Int64, true),
        ]));
        TableStore::try_new("ioc", schema, vec![0]).unwrap()
    }

    fn rows(s: &TableStore, ips: &[&str], scores: &[Option<i64>]) -> RecordBatch {
        RecordBatch::try_new(
            s.schema().clone(),
            vec![
                Arc::new(StringArray::from(ips.to_vec())),
                Arc::new(Int64Array::from(scores.to_vec())),
            ],
        )
        .unwrap()
    }

    fn content(s: &TableStore) -> Vec<(String, Option<i64>)> {
        let b = s.read().batch(s.schema()).unwrap();
        let ips = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        let sc = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        let mut out: Vec<_> = (0..b.num_rows())
            .map(|i| {
                (
                    ips.value(i).to_string(),
                    sc.is_valid(i).then(|| sc.value(i)),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn upserts_replace_by_key_deletes_remove_and_truncate_empties() {
        let s = store();
        let up = rows(&s, &["a", "b"], &[Some(1), None]);
        s.apply(
            &TableChange {
                upserts: vec![up],
                ..Default::default()
            },
            3,
        )
        .unwrap();
        let again = rows(&s, &["b", "c"], &[Some(7), Some(8)]);
        s.apply(
            &TableChange {
                upserts: vec![again],
                deletes: vec![s.keys_of(&rows(&s, &["a"], &[None])).unwrap()],
                ..Default::default()
            },
            5,
        )
        .unwrap();
        assert_eq!(
            content(&s),
            vec![("b".into(), Some(7)), ("c".into(), Some(8))]
        );
        assert_eq!(s.read().applied_seq, 5);
        let bytes = s.read().bytes();
        assert!(bytes > 0);
        s.apply(
            &TableChange {
                truncate: true,
                ..Default::default()
            },
            6,
        )
        .unwrap();
        assert!(s.read().is_empty());
        assert_eq!(s.read().bytes(), 0);
    }

    #[test]
    fn a_lookup_finds_the_row_of_a_key_and_restore_replaces_everything() {
        let s = store();
        s.restore(
            &[rows(&s, &["x", "y"], &[Some(1), Some(2)])],
            BTreeMap::new(),
            9,
        )
        .unwrap();
        let r = s.read();
        let probe: ArrayRef = Arc::new(StringArray::from(vec![Some("y"), None, Some("z")]));
        let keys = r.encode_keys(&[probe]).unwrap();
        let found: Vec<_> = keys.iter().map(|k| r.get(k.as_ref())).collect();
        assert!(found[0].is_some() && found[1].is_none() && found[2].is_none());
        let cols = r.columns(found.into_iter().flatten()).unwrap();
        let sc = cols[1].as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(sc.value(0), 2);
        assert_eq!(r.applied_seq, 9);
    }
}
