//! A reference table's rows, keyed by its primary key: what `CREATE TABLE` holds and lookup
//! joins read. Rows are kept as the Arrow batches they arrived in (chunks), each with its
//! keys in Arrow's row format in one buffer, and found through one hash index of
//! `(hash, chunk, row)` entries: a lookup is one hash probe with the bytes of the probing
//! row's key, the matched rows turn back into columns by one `interleave` per column, and
//! a million rows cost a few dozen allocations rather than two each.
//!
//! A row replaced or deleted stays in its chunk, unindexed, until its chunk holds no row of
//! the table (then the chunk is freed) or the dead rows outnumber the live ones (then every
//! live row is copied into one chunk).
//!
//! Changes arrive as [`TableChange`]s, each one statement's effect, logged before they are
//! applied; the engine checks a change against the rows (duplicate keys, the row limit)
//! before logging it, so applying it never fails half-way.

use std::collections::BTreeMap;

use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use datafusion::arrow::array::{new_empty_array, Array, ArrayRef};
use datafusion::arrow::compute::{concat_batches, interleave};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use hashbrown::HashTable;

use crate::error::{Error, Result};

/// Bytes a stored row costs beyond its share of its chunk (its index entry).
const ROW_OVERHEAD: usize = std::mem::size_of::<Slot>() * 2;

/// A chunk with fewer rows than this takes the next change's rows into it (so that many
/// one-row INSERTs do not make as many chunks).
const SMALL_CHUNK_ROWS: usize = 4096;

/// Dead rows (replaced or deleted, in chunks that still hold live rows) below this number
/// are never compacted away.
const COMPACT_MIN_DEAD: usize = 4096;

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

/// Where a stored row is: its chunk and its index there. Valid until the next change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowId {
    chunk: u32,
    row: u32,
}

/// An index entry: a row's key hash and where the row is.
#[derive(Debug, Clone, Copy)]
struct Slot {
    hash: u64,
    at: RowId,
}

/// Rows as they arrived, with their encoded keys.
struct Chunk {
    /// The table's columns.
    batch: RecordBatch,
    /// Row `i`'s key in row format.
    keys: Rows,
    /// Rows of it that the index points to.
    live: usize,
    /// The memory it holds (batch and keys).
    bytes: usize,
}

impl Chunk {
    fn new(batch: RecordBatch, keys: Rows) -> Chunk {
        let bytes = batch.get_array_memory_size() + keys.size();
        let live = batch.num_rows();
        Chunk {
            batch,
            keys,
            live,
            bytes,
        }
    }
}

/// A table's rows with what encodes and decodes them.
pub struct TableRows {
    schema: SchemaRef,
    key_conv: RowConverter,
    hasher: ahash::RandomState,
    chunks: Vec<Chunk>,
    index: HashTable<Slot>,
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
        let fields = key_schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        let key_conv = RowConverter::new(fields)?;
        Ok(TableStore {
            name: name.to_string(),
            schema: schema.clone(),
            key,
            key_schema,
            rows: RwLock::new(TableRows {
                schema,
                key_conv,
                hasher: ahash::RandomState::new(),
                chunks: Vec::new(),
                index: HashTable::new(),
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
        self.index.len()
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// An estimate of the bytes the rows take: each chunk's memory in proportion to its
    /// live rows, and the index entries.
    pub fn bytes(&self) -> usize {
        let chunks: usize = self
            .chunks
            .iter()
            .filter(|c| c.live > 0)
            .map(|c| {
                let n = c.batch.num_rows().max(1);
                (c.bytes as u128 * c.live as u128 / n as u128) as usize
            })
            .sum();
        chunks + self.len() * ROW_OVERHEAD
    }

    /// The keys of `key_columns` (arrays of the key's types) in row format.
    pub fn encode_keys(&self, key_columns: &[ArrayRef]) -> Result<Rows> {
        Ok(self.key_conv.convert_columns(key_columns)?)
    }

    /// Whether a row with this encoded key exists.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Where the row of an encoded key is.
    pub fn get(&self, key: &[u8]) -> Option<RowId> {
        let hash = self.hasher.hash_one(key);
        let chunks = &self.chunks;
        self.index
            .find(hash, |s| s.hash == hash && key_at(chunks, s.at) == key)
            .map(|s| s.at)
    }

    /// Columns of the rows at `ids` (from [`TableRows::get`]), in order.
    pub fn columns(&self, ids: impl IntoIterator<Item = RowId>) -> Result<Vec<ArrayRef>> {
        let at: Vec<(usize, usize)> = ids
            .into_iter()
            .map(|id| (id.chunk as usize, id.row as usize))
            .collect();
        gather(&self.schema, &self.chunks, &at)
    }

    /// Every row, as one batch of `schema` (in the order the rows were stored): built once
    /// after each change, then shared.
    pub fn batch(&self, schema: &SchemaRef) -> Result<RecordBatch> {
        let mut whole = self.whole.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = whole.as_ref().filter(|b| b.schema() == *schema) {
            return Ok(b.clone());
        }
        let columns = if self.chunks.iter().all(|c| c.live == c.batch.num_rows()) {
            let batches: Vec<&RecordBatch> = self.chunks.iter().map(|c| &c.batch).collect();
            match batches.first() {
                Some(first) => concat_batches(&first.schema(), batches.iter().copied())?
                    .columns()
                    .to_vec(),
                None => Vec::new(),
            }
        } else {
            self.columns(self.live_ids())?
        };
        let batch = if columns.is_empty() || schema.fields().is_empty() {
            RecordBatch::new_empty(schema.clone())
        } else {
            RecordBatch::try_new(schema.clone(), columns)?
        };
        *whole = Some(batch.clone());
        Ok(batch)
    }

    /// Where every live row is, in the order they were stored.
    fn live_ids(&self) -> Vec<RowId> {
        let mut ids: Vec<RowId> = self.index.iter().map(|s| s.at).collect();
        ids.sort_unstable();
        ids
    }

    fn apply(&mut self, change: &TableChange, store: &TableStore) -> Result<()> {
        *self.whole.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        if let Some((name, progress)) = &change.source {
            self.sources.insert(name.clone(), progress.clone());
        }
        if change.truncate {
            self.chunks.clear();
            self.index.clear();
        }
        for keys in &change.deletes {
            let encoded = self.key_conv.convert_columns(keys.columns())?;
            for k in encoded.iter() {
                let key = k.data();
                let hash = self.hasher.hash_one(key);
                let chunks = &self.chunks;
                if let Ok(entry) = self
                    .index
                    .find_entry(hash, |s| s.hash == hash && key_at(chunks, s.at) == key)
                {
                    let (gone, _) = entry.remove();
                    self.chunks[gone.at.chunk as usize].live -= 1;
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
            if batch.num_rows() > 0 {
                self.upsert(batch, store)?;
            }
        }
        self.release();
        Ok(())
    }

    /// Stores `batch`'s rows, each replacing the row of its key (a later row of the batch
    /// replaces an earlier one).
    fn upsert(&mut self, batch: &RecordBatch, store: &TableStore) -> Result<()> {
        let key_columns = store.keys_of(batch)?;
        // A small last chunk takes the rows in: its rows keep their places.
        let small_last = batch.num_rows() < SMALL_CHUNK_ROWS
            && self
                .chunks
                .last()
                .is_some_and(|c| c.batch.num_rows() < SMALL_CHUNK_ROWS && c.live > 0);
        let (chunk, first) = if small_last {
            let last = self.chunks.pop().expect("checked above");
            let first = last.batch.num_rows();
            let merged = concat_batches(&last.batch.schema(), [&last.batch, batch])?;
            let mut keys = last.keys;
            self.key_conv.append(&mut keys, key_columns.columns())?;
            let mut chunk = Chunk::new(merged, keys);
            chunk.live = last.live + batch.num_rows();
            (chunk, first)
        } else {
            let keys = self.key_conv.convert_columns(key_columns.columns())?;
            (Chunk::new(batch.clone(), keys), 0)
        };
        let c = self.chunks.len();
        let chunk_no = u32::try_from(c)
            .map_err(|_| Error::Internal(format!("table \"{}\": too many chunks", store.name)))?;
        self.chunks.push(chunk);
        self.index.reserve(batch.num_rows(), |s| s.hash);
        let Self {
            chunks,
            index,
            hasher,
            ..
        } = self;
        for row in first..chunks[c].batch.num_rows() {
            let key = chunks[c].keys.row(row).data();
            let hash = hasher.hash_one(key);
            let at = RowId {
                chunk: chunk_no,
                row: row as u32,
            };
            match index.find_mut(hash, |s| s.hash == hash && key_at(chunks, s.at) == key) {
                Some(slot) => {
                    let old = std::mem::replace(&mut slot.at, at);
                    chunks[old.chunk as usize].live -= 1;
                }
                None => {
                    index.insert_unique(hash, Slot { hash, at }, |s| s.hash);
                }
            }
        }
        Ok(())
    }

    /// Frees the chunks no row is left in, and copies the live rows into one chunk when
    /// the dead ones outnumber them.
    fn release(&mut self) {
        if self.chunks.iter().any(|c| c.live == 0) {
            // Renumbered: the index's entries move to the chunks' new places.
            let mut place = Vec::with_capacity(self.chunks.len());
            let mut kept = 0u32;
            for c in &self.chunks {
                place.push(kept);
                kept += u32::from(c.live > 0);
            }
            self.chunks.retain(|c| c.live > 0);
            for slot in self.index.iter_mut() {
                slot.at.chunk = place[slot.at.chunk as usize];
            }
        }
        let dead: usize = self
            .chunks
            .iter()
            .map(|c| c.batch.num_rows() - c.live)
            .sum();
        if dead >= COMPACT_MIN_DEAD && dead > self.len() {
            // Only a failure to allocate could stop it; the rows stay as they are then.
            let _ = self.compact();
        }
    }

    /// Copies every live row into one chunk, in the order they were stored.
    fn compact(&mut self) -> Result<()> {
        let ids = self.live_ids();
        let at: Vec<(usize, usize)> = ids
            .iter()
            .map(|id| (id.chunk as usize, id.row as usize))
            .collect();
        let columns = gather(&self.schema, &self.chunks, &at)?;
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        let mut keys = self.key_conv.empty_rows(ids.len(), 0);
        for id in &ids {
            keys.push(self.chunks[id.chunk as usize].keys.row(id.row as usize));
        }
        for slot in self.index.iter_mut() {
            let row = ids
                .binary_search(&slot.at)
                .expect("a live row is in the index");
            slot.at = RowId {
                chunk: 0,
                row: row as u32,
            };
        }
        self.chunks = vec![Chunk::new(batch, keys)];
        Ok(())
    }
}

/// The encoded key of the row at `at`.
fn key_at(chunks: &[Chunk], at: RowId) -> &[u8] {
    chunks[at.chunk as usize].keys.row(at.row as usize).data()
}

/// The columns (of `schema`) of the rows at `at` (chunk, row) of `chunks`, in order.
fn gather(schema: &SchemaRef, chunks: &[Chunk], at: &[(usize, usize)]) -> Result<Vec<ArrayRef>> {
    (0..schema.fields().len())
        .map(|c| {
            if at.is_empty() || chunks.is_empty() {
                return Ok(new_empty_array(schema.field(c).data_type()));
            }
            let arrays: Vec<&dyn Array> =
                chunks.iter().map(|k| k.batch.column(c).as_ref()).collect();
            Ok(interleave(&arrays, at)?)
        })
        .collect()
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

    fn upsert(s: &TableStore, ips: &[String], score: i64) {
        let ips: Vec<&str> = ips.iter().map(|i| i.as_str()).collect();
        let batch = rows(s, &ips, &vec![Some(score); ips.len()]);
        s.apply(
            &TableChange {
                upserts: vec![batch],
                ..Default::default()
            },
            0,
        )
        .unwrap();
    }

    fn lookup(s: &TableStore, ip: &str) -> Option<i64> {
        let r = s.read();
        let probe: ArrayRef = Arc::new(StringArray::from(vec![ip]));
        let keys = r.encode_keys(&[probe]).unwrap();
        let id = r.get(keys.row(0).data())?;
        let cols = r.columns([id]).unwrap();
        let sc = cols[1].as_any().downcast_ref::<Int64Array>().unwrap();
        Some(sc.value(0))
    }

    #[test]
    fn the_last_row_of_a_key_in_a_batch_wins() {
        let s = store();
        let up = rows(&s, &["a", "b", "a"], &[Some(1), Some(2), Some(3)]);
        s.apply(
            &TableChange {
                upserts: vec![up],
                ..Default::default()
            },
            1,
        )
        .unwrap();
        assert_eq!(
            content(&s),
            vec![("a".into(), Some(3)), ("b".into(), Some(2))]
        );
        assert_eq!(lookup(&s, "a"), Some(3));
        assert_eq!(s.read().len(), 2);
    }

    #[test]
    fn small_changes_share_a_chunk_and_dead_rows_are_released() {
        let s = store();
        let ips = |from: usize, to: usize| -> Vec<String> {
            (from..to)
                .map(|i| format!("10.0.{}.{}", i / 256, i % 256))
                .collect()
        };
        // One-row inserts go into one chunk.
        for i in 0..100 {
            upsert(&s, &ips(i, i + 1), i as i64);
        }
        assert_eq!(s.read().chunks.len(), 1);
        assert_eq!(s.read().len(), 100);
        assert_eq!(lookup(&s, "10.0.0.42"), Some(42));
        // A big batch is a chunk of its own; replacing every row of a chunk frees it.
        upsert(&s, &ips(0, 10_000), 7);
        assert_eq!(s.read().chunks.len(), 1);
        assert_eq!(s.read().len(), 10_000);
        assert_eq!(lookup(&s, "10.0.0.42"), Some(7));
        let full = s.read().bytes();
        // Deleting most rows compacts the rest into one chunk of live rows.
        let gone = ips(0, 6_000);
        let keys: Vec<&str> = gone.iter().map(|i| i.as_str()).collect();
        let keys = s
            .keys_of(&rows(&s, &keys, &vec![None; keys.len()]))
            .unwrap();
        s.apply(
            &TableChange {
                deletes: vec![keys],
                ..Default::default()
            },
            0,
        )
        .unwrap();
        {
            let r = s.read();
            assert_eq!(r.len(), 4_000);
            assert_eq!(r.chunks.len(), 1);
            assert_eq!(r.chunks[0].batch.num_rows(), 4_000);
            assert!(r.bytes() < full);
        }
        assert_eq!(lookup(&s, "10.0.0.42"), None);
        assert_eq!(lookup(&s, "10.0.23.112"), Some(7));
        // Rows added after a compaction are found with the others.
        upsert(&s, &ips(0, 1), 9);
        assert_eq!(lookup(&s, "10.0.0.0"), Some(9));
        assert_eq!(lookup(&s, "10.0.39.15"), Some(7));
        assert_eq!(content(&s).len(), 4_001);
    }
}
