//! Predicates shared by the filters at the root of a stream's operator tree. Each filter's
//! `WHERE` is split into its conjuncts; a conjunct that compares columns with constants (the
//! atoms: `op = 'write'`, `amount > 5000`, `host IN (...)`, and AND/OR/NOT of them) that
//! several filters have is evaluated once per batch for all of them, and the equalities of
//! one text column with several constants (`host = 'a'`, `host = 'b'`, ... across queries) are
//! answered together by one lookup per row instead of one comparison per constant. A filter
//! evaluates the atoms only it has itself, over the whole batch while few rows are ruled out
//! and then on the rows kept, and the rest of its predicate on the rows its atoms keep.
//!
//! Only atoms are shared because evaluating them on every row cannot fail where the filter's
//! own evaluation (which may skip rows) would not: they read no more than a column and a
//! constant.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, GenericStringArray, OffsetSizeTrait};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{HashMap, ScalarValue};
use datafusion::logical_expr::Operator as Op;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal, NotExpr,
};
use datafusion::physical_expr::{conjunction, split_conjunction};
use datafusion::physical_plan::PhysicalExpr;

use crate::error::{Error, Result};

/// How many equalities with one text column make a per-row lookup cheaper than comparing the
/// column with each constant (each comparison is a pass over the column).
const LOOKUP_MIN_CONSTANTS: usize = 3;

/// A filter's predicate, split for shared evaluation.
pub struct SplitPredicate {
    /// Ids of its atoms in the [`SharedPredicates`] it was registered with.
    pub atoms: Vec<usize>,
    /// The AND of its other conjuncts, evaluated on the rows the atoms keep.
    pub residual: Option<Arc<dyn PhysicalExpr>>,
}

struct Atom {
    expr: Arc<dyn PhysicalExpr>,
    /// `column = 'constant'` over text: the column and the constant's bytes.
    equality: Option<(usize, Vec<u8>)>,
    users: usize,
}

/// The atoms of a stream's root filters, each registered once however many filters have it.
#[derive(Default)]
pub struct SharedPredicates {
    atoms: Vec<Option<Atom>>,
    /// Atom ids by expression: equal physical expressions evaluate alike.
    by_key: HashMap<Arc<dyn PhysicalExpr>, usize>,
}

/// Each atom's value over one batch: where it is true (false or NULL elsewhere).
pub struct AtomValues {
    values: Vec<Option<std::result::Result<BooleanBuffer, String>>>,
}

impl SharedPredicates {
    /// Registers `predicate`'s atoms (sharing those already registered). None if it has no
    /// atom: then the filter evaluates its predicate alone.
    pub fn register(&mut self, predicate: &Arc<dyn PhysicalExpr>) -> Option<SplitPredicate> {
        let (atoms, rest): (Vec<_>, Vec<_>) = split_conjunction(predicate)
            .into_iter()
            .partition(|e| is_atom(e));
        if atoms.is_empty() {
            return None;
        }
        // A repeated atom is counted once per occurrence, as `release` uncounts it.
        let ids: Vec<usize> = atoms.into_iter().map(|e| self.add(e)).collect();
        let residual = (!rest.is_empty()).then(|| conjunction(rest.into_iter().cloned()));
        Some(SplitPredicate {
            atoms: ids,
            residual,
        })
    }

    /// Releases a registration; atoms no filter uses any more are dropped.
    pub fn release(&mut self, split: &SplitPredicate) {
        for &id in &split.atoms {
            let atom = self.atoms[id].as_mut().expect("registered atoms live");
            atom.users -= 1;
            if atom.users == 0 {
                self.atoms[id] = None;
                self.by_key.retain(|_, &mut v| v != id);
            }
        }
    }

    /// True when no atom is registered.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Evaluates over `batch` the atoms that more than one filter has, and the equalities
    /// answered by lookup. A filter evaluates its other atoms itself ([`AtomValues::select`]).
    pub fn evaluate(&self, batch: &RecordBatch) -> AtomValues {
        let mut values: Vec<Option<std::result::Result<BooleanBuffer, String>>> =
            (0..self.atoms.len()).map(|_| None).collect();
        // Equalities with text constants, by column.
        let mut by_column: HashMap<usize, Vec<(usize, &[u8])>> = HashMap::new();
        for (id, atom) in self.live() {
            if let Some((column, constant)) = &atom.equality {
                by_column
                    .entry(*column)
                    .or_default()
                    .push((id, constant.as_slice()));
            }
        }
        for (column, constants) in by_column {
            if constants.len() < LOOKUP_MIN_CONSTANTS {
                continue;
            }
            if let Some(masks) = text_equalities(batch.column(column).as_ref(), &constants) {
                for ((id, _), mask) in constants.iter().zip(masks) {
                    values[*id] = Some(Ok(mask));
                }
            }
        }
        for (id, atom) in self.live() {
            if values[id].is_none() && atom.users > 1 {
                values[id] = Some(atom.evaluate(batch).map_err(|e| e.to_string()));
            }
        }
        AtomValues { values }
    }

    fn atom(&self, id: usize) -> &Atom {
        self.atoms[id].as_ref().expect("registered atoms live")
    }

    fn live(&self) -> impl Iterator<Item = (usize, &Atom)> {
        self.atoms
            .iter()
            .enumerate()
            .filter_map(|(id, a)| a.as_ref().map(|a| (id, a)))
    }

    fn add(&mut self, expr: &Arc<dyn PhysicalExpr>) -> usize {
        if let Some(&id) = self.by_key.get(expr) {
            self.atoms[id]
                .as_mut()
                .expect("registered atoms live")
                .users += 1;
            return id;
        }
        let atom = Atom {
            expr: expr.clone(),
            equality: text_equality(expr),
            users: 1,
        };
        let id = match self.atoms.iter().position(Option::is_none) {
            Some(id) => {
                self.atoms[id] = Some(atom);
                id
            }
            None => {
                self.atoms.push(Some(atom));
                self.atoms.len() - 1
            }
        };
        self.by_key.insert(expr.clone(), id);
        id
    }
}

/// What a filter keeps of a batch.
pub struct Selection {
    /// The rows where the atoms evaluated so far are true.
    pub mask: BooleanArray,
    /// Conjuncts left to evaluate, in order, on the rows the mask keeps.
    pub rest: Vec<Arc<dyn PhysicalExpr>>,
}

/// A filter's own atoms are evaluated over the whole batch while they keep more than
/// 1/`SELECTIVE` of its rows, then on the rows kept (as DataFusion's AND does).
const SELECTIVE: usize = 8;

impl AtomValues {
    /// What the filter `split` (registered with `predicates`) keeps of `batch`.
    pub fn select(
        &self,
        predicates: &SharedPredicates,
        split: &SplitPredicate,
        batch: &RecordBatch,
    ) -> Result<Selection> {
        let rows = batch.num_rows();
        let mut mask: Option<BooleanBuffer> = None;
        let mut own = Vec::new();
        for &id in &split.atoms {
            match &self.values[id] {
                Some(Ok(value)) => mask = Some(and(mask, value)),
                Some(Err(message)) => return Err(Error::Execution(message.clone())),
                None => own.push(predicates.atom(id)),
            }
        }
        let mut rest = Vec::new();
        for atom in own {
            let kept = mask.as_ref().map_or(rows, BooleanBuffer::count_set_bits);
            if rest.is_empty() && kept * SELECTIVE > rows {
                mask = Some(and(mask, &atom.evaluate(batch)?));
            } else {
                rest.push(atom.expr.clone());
            }
        }
        rest.extend(split.residual.clone());
        Ok(Selection {
            mask: BooleanArray::new(mask.unwrap_or_else(|| BooleanBuffer::new_set(rows)), None),
            rest,
        })
    }
}

fn and(mask: Option<BooleanBuffer>, value: &BooleanBuffer) -> BooleanBuffer {
    match mask {
        None => value.clone(),
        Some(m) => &m & value,
    }
}

impl Atom {
    /// Where the atom is true over `batch`. A text equality compares words, without a branch
    /// or a call per row ([`text_equals`]).
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanBuffer> {
        if let Some((column, constant)) = &self.equality {
            if let Some(mask) = text_equals(batch.column(*column).as_ref(), constant) {
                return Ok(mask);
            }
        }
        evaluate_atom(&self.expr, batch)
    }
}

/// Evaluates an atom to where it is true.
fn evaluate_atom(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<BooleanBuffer> {
    let value = expr.evaluate(batch)?.into_array(batch.num_rows())?;
    let value = value.as_boolean_opt().ok_or_else(|| {
        Error::plan(
            sqlstate::DATATYPE_MISMATCH,
            "argument of WHERE must be type boolean",
        )
    })?;
    Ok(match value.nulls() {
        Some(nulls) => value.values() & nulls.inner(),
        None => value.values().clone(),
    })
}

/// Where `column` equals `constant`; None if the column is not `Utf8` or `LargeUtf8`. A
/// constant of up to 16 bytes is compared with each value as two words read at the value's
/// start and masked to the constant's length, and the lengths compared: no branch and no
/// `memcmp` per row (arrow's kernel spends ~8 ns a row there, this ~1 ns).
fn text_equals(column: &dyn Array, constant: &[u8]) -> Option<BooleanBuffer> {
    let values = match column.data_type() {
        DataType::Utf8 => equal_values(column.as_string::<i32>(), constant),
        DataType::LargeUtf8 => equal_values(column.as_string::<i64>(), constant),
        _ => return None,
    };
    Some(where_valid(values, column.logical_nulls().as_ref()))
}

/// `mask` where the column whose `nulls` these are is not NULL.
fn where_valid(mask: BooleanBuffer, nulls: Option<&NullBuffer>) -> BooleanBuffer {
    match nulls {
        Some(nulls) if nulls.null_count() > 0 => &mask & nulls.inner(),
        _ => mask,
    }
}

fn equal_values<O: OffsetSizeTrait>(a: &GenericStringArray<O>, constant: &[u8]) -> BooleanBuffer {
    let (offsets, data) = (a.value_offsets(), a.value_data());
    let n = constant.len();
    if n > SHORT {
        return BooleanBuffer::collect_bool(a.len(), |i| a.value(i).as_bytes() == constant);
    }
    let (lo, hi) = words(constant, 0, n);
    let (keep_lo, keep_hi) = (KEEP[n.min(8)], KEEP[n.saturating_sub(8)]);
    BooleanBuffer::collect_bool(a.len(), |i| {
        let (start, end) = (offsets[i].as_usize(), offsets[i + 1].as_usize());
        match load16(data, start) {
            // Masked to the constant's length.
            Some((w_lo, w_hi)) => {
                (end - start == n) & (w_lo & keep_lo == lo) & (w_hi & keep_hi == hi)
            }
            // The last values of the buffer.
            None => data[start..end] == *constant,
        }
    })
}

/// For each constant, where `column` equals it: one lookup per row. None if the column is not
/// text.
fn text_equalities(column: &dyn Array, constants: &[(usize, &[u8])]) -> Option<Vec<BooleanBuffer>> {
    let rows = column.len();
    // Two atoms may compare with the same constant: they get the same rows.
    let mut distinct: Vec<&[u8]> = Vec::new();
    let positions: Vec<usize> = constants
        .iter()
        .map(|(_, c)| {
            distinct.iter().position(|d| d == c).unwrap_or_else(|| {
                distinct.push(c);
                distinct.len() - 1
            })
        })
        .collect();
    let lookup = Lookup::new(distinct.iter().copied());
    // One bit set per row, in the words of the constant found or in a last, discarded set:
    // no branch on whether a row matched.
    let chunks = rows.div_ceil(64);
    let mut bits: Vec<Vec<u64>> = (0..=distinct.len()).map(|_| vec![0; chunks]).collect();
    let mut mark = |row: usize, found: usize| bits[found][row / 64] |= 1 << (row % 64);
    match column.data_type() {
        DataType::Utf8 => each_value(column.as_string::<i32>(), &lookup, mark),
        DataType::LargeUtf8 => each_value(column.as_string::<i64>(), &lookup, mark),
        DataType::Utf8View => {
            let a = column.as_string_view();
            for row in 0..rows {
                mark(row, lookup.find(a.value(row).as_bytes()));
            }
        }
        _ => return None,
    }
    bits.pop();
    let nulls = column.logical_nulls();
    let masks: Vec<BooleanBuffer> = bits
        .into_iter()
        .map(|b| where_valid(BooleanBuffer::new(b.into(), 0, rows), nulls.as_ref()))
        .collect();
    Some(positions.into_iter().map(|p| masks[p].clone()).collect())
}

/// Calls `f` with each row of a text array and the constant it equals (or [`Lookup::none`]).
fn each_value<O: OffsetSizeTrait>(
    a: &GenericStringArray<O>,
    lookup: &Lookup,
    mut f: impl FnMut(usize, usize),
) {
    let (offsets, data) = (a.value_offsets(), a.value_data());
    for (row, w) in offsets.windows(2).enumerate() {
        f(row, lookup.find_in(data, w[0].as_usize(), w[1].as_usize()));
    }
}

/// Finds which of a few constants a value equals. Values of up to 16 bytes (names of hosts,
/// verbs, programs) are read as two machine words and hashed to one slot of a table in which
/// no two constants share a slot: one comparison with that slot's entry decides, with no
/// branch on the outcome, no general-purpose hash of a byte string and no `memcmp`.
struct Lookup<'a> {
    /// (low word, high word, length, constant) by slot, a power of two of them; empty slots
    /// have a length no value has.
    short: Vec<(u64, u64, u64, usize)>,
    /// The hash's multiplier, chosen so that the constants do not collide.
    multiplier: u64,
    long: HashMap<&'a [u8], usize>,
    /// What a value equal to no constant finds: the number of constants.
    none: usize,
}

impl<'a> Lookup<'a> {
    fn new(constants: impl Iterator<Item = &'a [u8]>) -> Self {
        let constants: Vec<&[u8]> = constants.collect();
        let none = constants.len();
        let mut long = HashMap::new();
        let mut short = Vec::new();
        for (i, c) in constants.iter().enumerate() {
            match c.len() > SHORT {
                true => {
                    long.entry(*c).or_insert(i);
                }
                false if !short.iter().any(|&(_, s)| s == *c) => short.push((i, *c)),
                false => {}
            }
        }
        let mut lookup = Lookup {
            short: Vec::new(),
            multiplier: 0,
            long,
            none,
        };
        let mut slots = (2 * short.len()).next_power_of_two().max(8);
        for attempt in 0u64.. {
            // Every 16 failed multipliers, twice the room.
            if attempt > 0 && attempt % 16 == 0 {
                slots *= 2;
            }
            lookup.multiplier = 0x9E37_79B9_7F4A_7C15_u64
                .wrapping_add(attempt.wrapping_mul(0xD1B5_4A32_D192_ED03))
                | 1;
            lookup.short = vec![(0, 0, u64::MAX, none); slots];
            let placed = short.iter().all(|&(i, c)| {
                let (lo, hi) = words(c, 0, c.len());
                let slot = lookup.slot(lo, hi, c.len());
                let free = lookup.short[slot].2 == u64::MAX;
                if free {
                    lookup.short[slot] = (lo, hi, c.len() as u64, i);
                }
                free
            });
            if placed {
                break;
            }
        }
        lookup
    }

    /// Which constant equals `value`, or [`Lookup::none`].
    fn find(&self, value: &[u8]) -> usize {
        self.find_in(value, 0, value.len())
    }

    /// Which constant equals `data[start..end]`, or [`Lookup::none`].
    fn find_in(&self, data: &[u8], start: usize, end: usize) -> usize {
        let len = end - start;
        if len > SHORT {
            return self
                .long
                .get(&data[start..end])
                .copied()
                .unwrap_or(self.none);
        }
        let (lo, hi) = words(data, start, len);
        let (l, h, n, i) = self.short[self.slot(lo, hi, len)];
        match (l == lo) & (h == hi) & (n == len as u64) {
            true => i,
            false => self.none,
        }
    }

    fn slot(&self, lo: u64, hi: u64, len: usize) -> usize {
        // Multiplicative hashing: the top bits of the product depend on every input bit.
        let h = (lo ^ hi.rotate_left(29) ^ ((len as u64) << 56)).wrapping_mul(self.multiplier);
        (h >> (64 - self.short.len().trailing_zeros())) as usize
    }
}

/// Values of up to this many bytes are compared as words.
const SHORT: usize = 16;

/// The mask of a word's first `n` bytes, by `n`: no branch on a value's length.
const KEEP: [u64; 9] = {
    let mut masks = [u64::MAX; 9];
    let mut n = 0;
    while n < 8 {
        masks[n] = (1 << (8 * n)) - 1;
        n += 1;
    }
    masks
};

/// `data[start..start + len]` (len <= [`SHORT`]) as two little-endian words, zero-padded.
fn words(data: &[u8], start: usize, len: usize) -> (u64, u64) {
    let (keep_lo, keep_hi) = (KEEP[len.min(8)], KEEP[len.saturating_sub(8)]);
    match load16(data, start) {
        // Reading past the value (within the buffer) and masking is two loads.
        Some((lo, hi)) => (lo & keep_lo, hi & keep_hi),
        // The last values of a buffer.
        None => {
            let mut w = [0; 16];
            w[..len].copy_from_slice(&data[start..start + len]);
            (word(&w[..8]), word(&w[8..]))
        }
    }
}

/// The 16 bytes of `data` from `start` as two little-endian words, unmasked; None within 16
/// bytes of the end.
#[inline]
fn load16(data: &[u8], start: usize) -> Option<(u64, u64)> {
    let w = data.get(start..start + 16)?;
    Some((word(&w[..8]), word(&w[8..])))
}

fn word(w: &[u8]) -> u64 {
    u64::from_le_bytes(w.try_into().expect("8 bytes"))
}

/// `column = 'constant'` (either way round) over a text column: the column and the bytes.
fn text_equality(expr: &Arc<dyn PhysicalExpr>) -> Option<(usize, Vec<u8>)> {
    let b = expr.downcast_ref::<BinaryExpr>()?;
    if *b.op() != Op::Eq {
        return None;
    }
    let (column, constant) = match (column(b.left()), literal(b.right())) {
        (Some(c), Some(l)) => (c, l),
        _ => (column(b.right())?, literal(b.left())?),
    };
    match constant {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some((column.index(), s.as_bytes().to_vec())),
        _ => None,
    }
}

/// A comparison of columns with constants, or AND/OR/NOT of such.
fn is_atom(expr: &Arc<dyn PhysicalExpr>) -> bool {
    if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
        let (l, r) = (b.left(), b.right());
        return match b.op() {
            Op::And | Op::Or => is_atom(l) && is_atom(r),
            Op::Eq
            | Op::NotEq
            | Op::Lt
            | Op::LtEq
            | Op::Gt
            | Op::GtEq
            | Op::IsDistinctFrom
            | Op::IsNotDistinctFrom
            | Op::LikeMatch
            | Op::ILikeMatch
            | Op::NotLikeMatch
            | Op::NotILikeMatch
            | Op::RegexMatch
            | Op::RegexIMatch
            | Op::RegexNotMatch
            | Op::RegexNotIMatch => {
                (column(l).is_some() && literal(r).is_some())
                    || (literal(l).is_some() && column(r).is_some())
            }
            _ => false,
        };
    }
    if let Some(n) = expr.downcast_ref::<NotExpr>() {
        return is_atom(n.arg());
    }
    if let Some(n) = expr.downcast_ref::<IsNullExpr>() {
        return column(n.arg()).is_some();
    }
    if let Some(n) = expr.downcast_ref::<IsNotNullExpr>() {
        return column(n.arg()).is_some();
    }
    if let Some(l) = expr.downcast_ref::<LikeExpr>() {
        return column(l.expr()).is_some() && literal(l.pattern()).is_some();
    }
    if let Some(l) = expr.downcast_ref::<InListExpr>() {
        return column(l.expr()).is_some() && l.list().iter().all(|e| literal(e).is_some());
    }
    false
}

fn column(expr: &Arc<dyn PhysicalExpr>) -> Option<&Column> {
    expr.downcast_ref::<Column>()
}

fn literal(expr: &Arc<dyn PhysicalExpr>) -> Option<&ScalarValue> {
    expr.downcast_ref::<Literal>().map(Literal::value)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, LargeStringArray, StringArray, StringViewArray};

    use super::*;

    const CONSTANTS: [&str; 9] = [
        "",
        "a",
        "write",
        "8-bytes!",
        "9-bytes!!",
        "fifteen-bytes!!",
        "sixteen-bytes!!!",
        "seventeen-bytes!!",
        "C:\\Windows\\System32\\lsass.exe",
    ];

    #[test]
    fn lookup_finds_exactly_the_constants() {
        let lookup = Lookup::new(CONSTANTS.iter().map(|c| c.as_bytes()));
        for (i, c) in CONSTANTS.iter().enumerate() {
            assert_eq!(lookup.find(c.as_bytes()), i, "{c:?}");
        }
        for miss in [
            "8-bytes?",
            "8-bytes",
            "9-bytes!?",
            "seventeen-bytes!?",
            "b",
            "a\0",
            "writ",
            "write\0",
            "wrote",
            "fifteen-bytes!?",
            "sixteen-bytes!!?",
            "C:\\Windows\\System32\\lsass.ex",
            "\0",
        ] {
            assert_eq!(lookup.find(miss.as_bytes()), lookup.none, "{miss:?}");
        }
    }

    #[test]
    fn text_equalities_mark_the_equal_rows_of_every_text_type() {
        let values = vec![
            Some("write"),
            None,
            Some("a"),
            Some("sixteen-bytes!!!"),
            Some("write"),
            Some("other"),
            Some(""),
        ];
        let constants: Vec<(usize, &[u8])> = ["write", "", "sixteen-bytes!!!", "absent", "write"]
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.as_bytes()))
            .collect();
        let arrays: Vec<Arc<dyn Array>> = vec![
            Arc::new(StringArray::from(values.clone())),
            Arc::new(LargeStringArray::from(values.clone())),
            Arc::new(StringViewArray::from(values.clone())),
        ];
        for array in arrays {
            let masks = text_equalities(array.as_ref(), &constants).unwrap();
            let rows = |m: &BooleanBuffer| m.set_indices().collect::<Vec<_>>();
            assert_eq!(rows(&masks[0]), vec![0, 4], "{}", array.data_type());
            assert_eq!(rows(&masks[1]), vec![6]);
            assert_eq!(rows(&masks[2]), vec![3]);
            assert!(rows(&masks[3]).is_empty());
            assert_eq!(rows(&masks[4]), vec![0, 4], "a constant given twice");
        }
        assert!(text_equalities(&Int64Array::from(vec![1]), &constants).is_none());
    }

    #[test]
    fn text_equals_agrees_with_arrows_kernel() {
        use datafusion::arrow::compute::kernels::cmp::eq;
        use datafusion::arrow::datatypes::DataType as T;
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let samples = [
            "",
            "w",
            "write",
            "wri",
            "writes",
            "close",
            "8-bytes!",
            "8-bytes?",
            "9-bytes!?",
            "sixteen-bytes!!!",
            "sixteen-bytes!!?",
            "seventeen-bytes!?",
            "a\0",
            "\0",
        ];
        for round in 0..200 {
            let values: Vec<Option<&str>> = (0..rng.gen_range(0..40))
                .map(|_| {
                    (rng.gen_range(0..8) > 0).then(|| samples[rng.gen_range(0..samples.len())])
                })
                .collect();
            let array = StringArray::from(values);
            // Sliced arrays read their offsets from the middle of the buffers.
            let offset = rng.gen_range(0..=array.len());
            let array = array.slice(offset, rng.gen_range(0..=array.len() - offset));
            for constant in samples {
                let expected = eq(&array, &StringArray::new_scalar(constant)).unwrap();
                let expected: Vec<bool> = expected.iter().map(|v| v == Some(true)).collect();
                for column in [
                    Arc::new(array.clone()) as Arc<dyn Array>,
                    datafusion::arrow::compute::cast(&array, &T::LargeUtf8).unwrap(),
                ] {
                    let got = text_equals(column.as_ref(), constant.as_bytes()).unwrap();
                    let got: Vec<bool> = got.iter().collect();
                    assert_eq!(got, expected, "round {round}, {constant:?}");
                    let all: Vec<(usize, &[u8])> = samples
                        .iter()
                        .enumerate()
                        .map(|(i, w)| (i, w.as_bytes()))
                        .collect();
                    let at = samples.iter().position(|w| *w == constant).unwrap();
                    let got = &text_equalities(column.as_ref(), &all).unwrap()[at];
                    let got: Vec<bool> = got.iter().collect();
                    assert_eq!(got, expected, "round {round}, {constant:?} among all");
                }
            }
        }
        // Many constants of one length: the table finds room for all without collisions.
        let hosts: Vec<String> = (0..400).map(|i| format!("host-{i:03}")).collect();
        let lookup = Lookup::new(hosts[..200].iter().map(|h| h.as_bytes()));
        for (i, h) in hosts.iter().enumerate() {
            let want = if i < 200 { i } else { lookup.none };
            assert_eq!(lookup.find(h.as_bytes()), want, "{h}");
        }
        assert!(text_equals(&Int64Array::from(vec![1]), b"1").is_none());
    }
}
