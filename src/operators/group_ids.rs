//! Group keys numbered once per batch for every window aggregate that groups by the same
//! columns. Five aggregates of `GROUP BY host` (one per `op = ...` filter) would otherwise
//! each copy the host names of the rows their filter keeps and hash them into their own
//! group tables; with a shared [`KeyDictionary`] the host column is hashed once per batch into
//! dense ids ([`GroupIds`]), and each group table remembers which of its groups an id names
//! ([`IdGroups`]), so it hashes a key only the first time it sees its id.
//!
//! A dictionary holds every distinct key it has seen, up to [`KeyDictionary::MAX_KEYS`]; past
//! that it starts afresh under a new generation number, and the group tables' memos of the
//! old generation are forgotten (they look the keys up again). Ids are only ever a cache of
//! what the group tables' own key tables hold: results, snapshots and restores do not depend
//! on them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;

use crate::error::{Error, Result};

/// Generation numbers, unique in the process: a memo never mistakes one dictionary's (or one
/// generation's) ids for another's.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

/// Dense ids for the distinct values of some columns of a stream, stable within a generation.
pub struct KeyDictionary {
    columns: Vec<usize>,
    /// The key columns' schema.
    schema: SchemaRef,
    values: Box<dyn GroupValues>,
    generation: u64,
    scratch: Vec<usize>,
}

/// The id of each row of one batch under a [`KeyDictionary`], rows with equal keys (NULLs
/// included) sharing an id.
#[derive(Debug, Clone)]
pub struct GroupIds {
    /// The dictionary's generation when the ids were given.
    pub generation: u64,
    /// One id per row, each below `distinct`.
    pub ids: UInt32Array,
    /// How many ids the dictionary had given in this generation.
    pub distinct: usize,
}

impl KeyDictionary {
    /// Past this many distinct keys a dictionary starts afresh, so that it and the memos of
    /// the group tables (4 bytes an id) stay bounded.
    pub const MAX_KEYS: usize = 1 << 16;

    /// A dictionary of the values of `columns` of batches of `stream`.
    pub fn try_new(columns: Vec<usize>, stream: &Schema) -> Result<Self> {
        let fields = columns
            .iter()
            .map(|&c| {
                stream
                    .fields()
                    .get(c)
                    .map(|f| f.as_ref().clone().with_nullable(true))
                    .ok_or_else(|| Error::Internal(format!("no column {c} to group by")))
            })
            .collect::<Result<Vec<_>>>()?;
        if fields.is_empty() {
            return Err(Error::Internal("a key dictionary needs a column".into()));
        }
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        Ok(KeyDictionary {
            columns,
            values: new_group_values(schema.clone(), &GroupOrdering::None)?,
            schema,
            generation: next_generation(),
            scratch: Vec::new(),
        })
    }

    /// The stream columns whose values it numbers.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The ids of the rows of `batch` (of the stream's schema).
    pub fn ids(&mut self, batch: &RecordBatch) -> Result<GroupIds> {
        let keys: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|&c| batch.column(c).clone())
            .collect();
        if self.values.len() + batch.num_rows() > Self::MAX_KEYS {
            self.values = new_group_values(self.schema.clone(), &GroupOrdering::None)?;
            self.generation = next_generation();
        }
        self.values.intern(&keys, &mut self.scratch)?;
        let ids = UInt32Array::from_iter_values(self.scratch.iter().map(|&g| g as u32));
        Ok(GroupIds {
            generation: self.generation,
            ids,
            distinct: self.values.len(),
        })
    }
}

/// A group table's memo of the group each id of a [`KeyDictionary`] names.
#[derive(Debug, Default)]
pub struct IdGroups {
    generation: u64,
    /// By id: 0 unknown, [`IdGroups::PENDING`] being looked up, else the group + 1.
    groups: Vec<u32>,
}

impl IdGroups {
    const PENDING: u32 = u32::MAX;

    /// Forgets every id (the table's groups were emptied).
    pub fn clear(&mut self) {
        self.groups.clear();
    }

    /// Bytes the memo holds.
    pub fn size_bytes(&self) -> usize {
        self.groups.capacity() * 4
    }

    /// The positions in `ids` of the first occurrence of each id the memo does not know, in
    /// order; they are marked pending until [`IdGroups::learn`].
    pub fn misses(&mut self, generation: u64, distinct: usize, ids: &[u32]) -> Vec<u32> {
        if generation != self.generation {
            self.groups.clear();
            self.generation = generation;
        }
        if self.groups.len() < distinct {
            self.groups.resize(distinct, 0);
        }
        let mut misses = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let slot = &mut self.groups[id as usize];
            if *slot == 0 {
                *slot = Self::PENDING;
                misses.push(i as u32);
            }
        }
        misses
    }

    /// Records that the id at `ids[misses[j]]` names group `groups[j]`.
    pub fn learn(&mut self, ids: &[u32], misses: &[u32], groups: &[usize]) {
        for (&at, &g) in misses.iter().zip(groups) {
            self.groups[ids[at as usize] as usize] = g as u32 + 1;
        }
    }

    /// The group of each id (all known), into `out`.
    pub fn groups_of(&self, ids: &[u32], out: &mut Vec<usize>) {
        out.clear();
        out.extend(
            ids.iter()
                .map(|&id| self.groups[id as usize].wrapping_sub(1) as usize),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field};

    fn batch(hosts: &[Option<&str>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("host", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..hosts.len() as i64)),
                Arc::new(StringArray::from(hosts.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn equal_keys_get_equal_ids_across_batches() {
        let b = batch(&[Some("a"), None, Some("b"), Some("a"), None]);
        let mut d = KeyDictionary::try_new(vec![1], &b.schema()).unwrap();
        let first = d.ids(&b).unwrap();
        assert_eq!(first.ids.values().to_vec(), vec![0, 1, 2, 0, 1]);
        assert_eq!(first.distinct, 3);
        let second = d.ids(&batch(&[Some("c"), Some("b")])).unwrap();
        assert_eq!(second.ids.values().to_vec(), vec![3, 2]);
        assert_eq!(second.generation, first.generation);
    }

    #[test]
    fn a_full_dictionary_starts_a_new_generation() {
        let names: Vec<String> = (0..KeyDictionary::MAX_KEYS)
            .map(|i| i.to_string())
            .collect();
        let b = batch(&names.iter().map(|s| Some(s.as_str())).collect::<Vec<_>>());
        let mut d = KeyDictionary::try_new(vec![1], &b.schema()).unwrap();
        let first = d.ids(&b).unwrap();
        let again = d.ids(&batch(&[Some("x")])).unwrap();
        assert_ne!(again.generation, first.generation);
        assert_eq!(again.ids.values().to_vec(), vec![0]);
    }

    #[test]
    fn the_memo_reports_each_unknown_id_once_and_forgets_old_generations() {
        let mut memo = IdGroups::default();
        let ids = [3, 1, 3, 0, 1];
        let misses = memo.misses(7, 4, &ids);
        assert_eq!(misses, vec![0, 1, 3]);
        memo.learn(&ids, &misses, &[5, 6, 7]);
        let mut groups = Vec::new();
        memo.groups_of(&ids, &mut groups);
        assert_eq!(groups, vec![5, 6, 5, 7, 6]);
        assert!(memo.misses(7, 4, &[0, 3]).is_empty());
        assert_eq!(memo.misses(8, 4, &[0, 3]), vec![0, 1], "a new generation");
    }
}
