//! The matcher's partitions, kept so that neither a watermark nor a checkpoint has to walk
//! all of them:
//!
//! - each partition sits behind an `Arc`, shared copy-on-write with a checkpoint that
//!   captured it: taking a snapshot clones the pointers, and a partition the stream changes
//!   before the snapshot is encoded is copied first ([`Arc::make_mut`]);
//! - partitions with an attempt that `WITHIN` can end are indexed by when the oldest such
//!   attempt expires (a min-heap with lazy deletion: an entry counts only while the
//!   partition still names it as its own), so a watermark visits only the partitions it
//!   expires something in;
//! - the bytes of all partitions are kept as a running total, updated for the partition a
//!   row or a watermark touched.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use ahash::AHashMap;

use super::{Inst, Matcher, Partition, StoredRow, Thread};
use crate::error::Result;

/// A partition's key in Arrow's row format; shared with the expiry index and snapshots.
pub(super) type Key = Arc<[u8]>;

/// The partitions of one matcher with their expiry index and byte total.
#[derive(Default)]
pub(super) struct Partitions {
    map: AHashMap<Key, Arc<Partition>>,
    /// (watermark past which an attempt of the partition ends, partition).
    expiry: BinaryHeap<Reverse<(i64, Key)>>,
    /// The sum of every partition's `bytes`.
    bytes: usize,
}

impl Partitions {
    /// Runs `f` on the partition of `key` (created empty if missing), then brings its byte
    /// count and expiry entry up to date; a partition left with nothing worth keeping is
    /// dropped (a fresh one behaves the same).
    pub(super) fn touch<R>(
        &mut self,
        m: &Matcher,
        key: &[u8],
        f: impl FnOnce(&mut Partition) -> Result<R>,
    ) -> Result<R> {
        let part = match self.map.get_mut(key) {
            Some(p) => p,
            None => self.map.entry(Key::from(key)).or_default(),
        };
        let part = Arc::make_mut(part);
        let result = f(part);
        let bytes = m.partition_bytes(key.len(), part);
        self.bytes = self.bytes + bytes - part.bytes;
        part.bytes = bytes;
        if m.removable(part) {
            self.bytes -= part.bytes;
            self.map.remove(key);
        } else if let Some(due) = m.due(part) {
            if part.due.is_none_or(|d| due < d) {
                part.due = Some(due);
                let key = self
                    .map
                    .get_key_value(key)
                    .map(|(k, _)| k.clone())
                    .expect("the partition was just touched");
                self.expiry.push(Reverse((due, key)));
            }
        }
        result
    }

    /// The keys of the partitions with an attempt that the watermark `wm` ends (some may
    /// have none left: their entry predates a change); each leaves the index.
    pub(super) fn due_before(&mut self, wm: i64) -> Vec<Key> {
        let mut keys = Vec::new();
        while let Some(Reverse((due, _))) = self.expiry.peek() {
            if *due >= wm {
                break;
            }
            let Some(Reverse((due, key))) = self.expiry.pop() else {
                break;
            };
            if let Some(part) = self.map.get_mut(&key) {
                if part.due == Some(due) {
                    Arc::make_mut(part).due = None;
                    keys.push(key);
                }
            }
        }
        self.compact();
        keys
    }

    /// Every partition's key and the partitions leave the index (the end of the input).
    pub(super) fn all(&mut self) -> Vec<Key> {
        self.expiry.clear();
        self.map
            .values_mut()
            .for_each(|p| Arc::make_mut(p).due = None);
        self.map.keys().cloned().collect()
    }

    /// The partitions as they are now, sharing their state until either side changes it.
    pub(super) fn share(&self) -> Vec<(Key, Arc<Partition>)> {
        self.map
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect()
    }

    /// Replaces every partition (a restore), rebuilding the index and the byte total.
    pub(super) fn replace(&mut self, m: &Matcher, parts: Vec<(Vec<u8>, Partition)>) {
        self.map.clear();
        self.expiry.clear();
        self.bytes = 0;
        for (key, part) in parts {
            self.map.insert(Key::from(key), Arc::new(part));
        }
        let keys: Vec<Key> = self.map.keys().cloned().collect();
        for key in keys {
            let _ = self.touch(m, &key, |_| Ok(()));
        }
    }

    /// The bytes the partitions hold.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops stale entries once they outnumber the partitions, so the index stays bounded.
    fn compact(&mut self) {
        if self.expiry.len() <= 2 * self.map.len() + 1024 {
            return;
        }
        let map = &self.map;
        self.expiry
            .retain(|Reverse((due, key))| map.get(key).is_some_and(|p| p.due == Some(*due)));
    }
}

impl Matcher {
    /// The latest watermark that ends none of the partition's attempts: the earliest start,
    /// plus WITHIN, of its threads that wait for a row (a thread at the end of the pattern,
    /// or at `$`, is ended by the next row, not by the watermark). `None` when WITHIN is not
    /// set or no thread waits.
    fn due(&self, part: &Partition) -> Option<i64> {
        let within = self.within?;
        part.threads
            .iter()
            .filter(|t| !t.timed_out && !matches!(self.program.inst(t.pc), Inst::Match | Inst::End))
            .map(|t| t.start_ts.saturating_add(within))
            .min()
    }

    /// Whether an empty partition behaves as a fresh one: it does unless its match count,
    /// its rows for PREV or whether it has started (for `^`) matter.
    fn removable(&self, part: &Partition) -> bool {
        part.threads.is_empty()
            && self.prev_depth == 0
            && !self.uses_match_number()
            && !self.anchored
            && part.undecided.is_empty()
    }

    /// The bytes a partition holds; a stored row pins its batch, counted as a fixed width
    /// per column.
    fn partition_bytes(&self, key_len: usize, p: &Partition) -> usize {
        let row = std::mem::size_of::<StoredRow>() + 16 * self.spec.input_schema.fields().len();
        let binding = std::mem::size_of::<super::Binding>() + 16;
        key_len
            + std::mem::size_of::<Partition>()
            + p.threads.capacity() * std::mem::size_of::<Thread>()
            + p.threads.iter().map(|t| t.mapped as usize).sum::<usize>() * binding
            + (p.rows.len() + p.recent.len() + p.undecided.len()) * row
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch, TimestampNanosecondArray};

    use super::super::PatternMatcher;
    use crate::operators::Operator;
    use crate::plan::OperatorSpec;
    use crate::time::{EventTime, Watermark};

    const SEC: i64 = 1_000_000_000;

    /// `a x*? b` per key within 10 s: an `a` row (v > 0) opens an attempt, a `b` row (v < 0)
    /// closes it.
    fn matcher() -> (PatternMatcher, datafusion::arrow::datatypes::SchemaRef) {
        let catalog = crate::Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, k BIGINT, v BIGINT, \
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        )
        .unwrap();
        let plan = crate::plan(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k \
             ORDER BY ts MEASURES FIRST(a.ts) AS t, COUNT(*) AS n ONE ROW PER MATCH \
             PATTERN (a x*? b) WITHIN INTERVAL '10' SECOND \
             DEFINE a AS a.v > 0, b AS b.v < 0)",
            &catalog,
        )
        .unwrap();
        let spec = plan
            .specs
            .iter()
            .find_map(|s| match s {
                OperatorSpec::Pattern(p) => Some(p.matcher.clone()),
                _ => None,
            })
            .unwrap();
        let schema = catalog.stream("s").unwrap().schema.clone();
        (PatternMatcher::try_new(spec).unwrap(), schema)
    }

    /// Rows `(second, k, v)`, then the watermark at `wm` seconds; the rows emitted.
    fn feed(
        op: &mut PatternMatcher,
        schema: &datafusion::arrow::datatypes::SchemaRef,
        rows: &[(i64, i64, i64)],
        wm: i64,
    ) -> usize {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    rows.iter().map(|r| r.0 * SEC),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap();
        op.process_batch(batch).unwrap();
        let out = op.on_watermark(Watermark(EventTime(wm * SEC))).unwrap();
        out.iter().map(|b| b.num_rows()).sum()
    }

    #[test]
    fn a_watermark_visits_only_partitions_with_an_attempt_it_ends() {
        let (mut op, schema) = matcher();
        // 100 keys open an attempt at second 1, key 1000 at second 30.
        let early: Vec<_> = (0..100).map(|k| (1, k, 5)).collect();
        feed(&mut op, &schema, &early, 2);
        feed(&mut op, &schema, &[(30, 1000, 5)], 31);
        // Second 31 ended the 100 early attempts (1 + 10 < 31): only key 1000 is left, and
        // the index holds its one entry.
        assert_eq!(op.partitions.map.len(), 1);
        assert_eq!(op.partitions.expiry.len(), 1);
        assert!(
            op.partitions.due_before(35 * SEC).is_empty(),
            "not due before 40"
        );
        let due = op.partitions.due_before(41 * SEC);
        assert_eq!(due.len(), 1, "key 1000 is due once the watermark passes 40");
        // A row that ends nothing leaves no partition behind, and bytes follow the state.
        let (mut op, schema) = matcher();
        feed(&mut op, &schema, &[(1, 7, -1)], 2);
        assert_eq!(op.partitions.map.len(), 0);
        assert_eq!(op.state_bytes(), 0);
        feed(&mut op, &schema, &[(3, 7, 5)], 4);
        assert!(op.state_bytes() > 0);
        assert_eq!(feed(&mut op, &schema, &[(5, 7, -5)], 6), 1, "a match");
        assert_eq!(op.state_bytes(), 0);
    }

    #[test]
    fn a_snapshot_keeps_the_state_it_was_taken_from_while_the_stream_goes_on() {
        let (mut op, schema) = matcher();
        let open: Vec<_> = (0..50).map(|k| (1, k, 5)).collect();
        feed(&mut op, &schema, &open, 2);
        let expected = op.snapshot().unwrap().encode().unwrap();
        let image = op.snapshot().unwrap();
        // Close half the attempts, open new ones, expire the rest.
        let close: Vec<_> = (0..25).map(|k| (3, k, -1)).collect();
        assert_eq!(feed(&mut op, &schema, &close, 4), 25);
        feed(&mut op, &schema, &[(20, 99, 5)], 21);
        assert_eq!(image.encode().unwrap(), expected);
        // Restored, the image goes on as the original did from there.
        let (mut restored, _) = matcher();
        restored.restore(&expected).unwrap();
        assert_eq!(restored.partitions.map.len(), 50);
        assert_eq!(feed(&mut restored, &schema, &close, 4), 25);
        feed(&mut restored, &schema, &[(20, 99, 5)], 21);
        assert_eq!(restored.state_bytes(), op.state_bytes());
        assert_eq!(restored.partitions.map.len(), 1);
    }
}
