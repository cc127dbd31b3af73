//! Group keys numbered once per batch for the operators of a stream that group by the same
//! columns (see [`crate::operators::group_ids`]). The operator graph registers each window
//! aggregate below a root filter by its key columns; aggregates with equal columns share one
//! [`KeyDictionary`], which numbers a batch's keys the first time one of them asks.

use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::record_batch::RecordBatch;

use super::predicates::insert_free;
use crate::operators::group_ids::{GroupIds, KeyDictionary};

struct KeySet {
    dictionary: KeyDictionary,
    users: usize,
}

/// The key dictionaries of one stream's operators, and their ids for the current batch.
#[derive(Default)]
pub struct SharedKeys {
    sets: Vec<Option<KeySet>>,
    /// Per set, the current batch's ids once asked for (None inside: numbering failed, and
    /// the operators take their own path).
    current: Vec<Option<Option<GroupIds>>>,
}

impl SharedKeys {
    /// Registers a user of the dictionary of `columns` of `stream`, sharing one with equal
    /// columns. None if the columns cannot be numbered, or if they are all of fixed width
    /// (numbers, timestamps): their values cost no more to hash in each group table than to
    /// number once, and many distinct ones (10,000 keys a minute in `benches/concurrency`)
    /// keep every new pane looking them up again, so a dictionary only adds its own pass
    /// (measured: slower). Text keys are what it saves copying and hashing for.
    pub fn register(&mut self, columns: Vec<usize>, stream: &Schema) -> Option<usize> {
        let fixed_width = |c: &usize| {
            stream
                .fields()
                .get(*c)
                .is_some_and(|f| f.data_type().is_primitive() || f.data_type().is_null())
        };
        if columns.iter().all(fixed_width) {
            return None;
        }
        let same = self.live().find(|(_, s)| s.dictionary.columns() == columns);
        if let Some((id, _)) = same {
            if let Some(set) = self.sets[id].as_mut() {
                set.users += 1;
            }
            return Some(id);
        }
        let set = KeySet {
            dictionary: KeyDictionary::try_new(columns, stream).ok()?,
            users: 1,
        };
        Some(insert_free(&mut self.sets, set))
    }

    /// Releases a registration; a dictionary nobody uses any more is dropped.
    pub fn release(&mut self, id: usize) {
        if let Some(set) = self.sets.get_mut(id).and_then(Option::as_mut) {
            set.users -= 1;
            if set.users == 0 {
                self.sets[id] = None;
            }
        }
    }

    /// Starts a new batch: ids are numbered again when asked for.
    pub fn begin_batch(&mut self) {
        self.current.clear();
        self.current.resize_with(self.sets.len(), || None);
    }

    /// The ids of the rows of `batch` (the batch of [`SharedKeys::begin_batch`]) under the
    /// dictionary `id`, numbered on the first call.
    pub fn ids(&mut self, id: usize, batch: &RecordBatch) -> Option<&GroupIds> {
        let set = self.sets.get_mut(id)?.as_mut()?;
        let current = self.current.get_mut(id)?;
        current
            .get_or_insert_with(|| set.dictionary.ids(batch).ok())
            .as_ref()
    }

    fn live(&self) -> impl Iterator<Item = (usize, &KeySet)> {
        self.sets
            .iter()
            .enumerate()
            .filter_map(|(id, s)| s.as_ref().map(|s| (id, s)))
    }
}
