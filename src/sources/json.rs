//! JSON records into rows, without a `serde_json::Value` per record. The columns' paths are
//! folded into a tree of keys once; each record is then parsed by serde_json straight into
//! that tree: keys are compared borrowed, values no column wants are skipped unparsed, and the
//! wanted scalars land as text in one scratch buffer that is reused from record to record.
//! The row is pushed into the [`BatchBuilder`] only once the whole record parsed, so a record
//! that repeats a key keeps its last value, as a parsed `Value` would.
//!
//! Semantics (the same as decoding a `Value` and looking each path up in it): a missing key
//! or `null` is NULL; strings are the column's input text; booleans are `true`/`false`;
//! numbers are their JSON text, except in a timestamp column, where they are seconds since the
//! epoch; an object or array is its JSON text in a TEXT column and an error elsewhere. A record
//! that is not valid JSON or not an object is parsed again as a `Value` for its error: the
//! rare path, and the reference for the fast one. One difference: values that no column reads
//! are checked for JSON syntax only, so a number too large for a double there is no error.

use std::fmt::Write as _;
use std::ops::Range;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::scalar::ScalarValue;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value};

use super::value::BatchBuilder;
use crate::error::sqlstate;
use crate::error::{Error, Result};

/// The columns' paths as a tree: node 0 is the record's top-level object.
#[derive(Debug, Default)]
struct PathTree {
    nodes: Vec<Vec<Entry>>,
}

/// A key (or array index) of a node: the columns whose path ends here and the node below.
#[derive(Debug)]
struct Entry {
    key: String,
    index: Option<usize>,
    columns: Vec<usize>,
    child: Option<usize>,
    /// Every column whose path goes through this key (reset when the key is seen again).
    covers: Vec<usize>,
}

impl PathTree {
    fn new(paths: &[Vec<String>]) -> PathTree {
        let mut tree = PathTree {
            nodes: vec![Vec::new()],
        };
        for (column, path) in paths.iter().enumerate() {
            let mut node = 0;
            for (depth, key) in path.iter().enumerate() {
                let at = match tree.nodes[node].iter().position(|e| &e.key == key) {
                    Some(at) => at,
                    None => {
                        tree.nodes[node].push(Entry {
                            key: key.clone(),
                            index: key.parse().ok(),
                            columns: Vec::new(),
                            child: None,
                            covers: Vec::new(),
                        });
                        tree.nodes[node].len() - 1
                    }
                };
                tree.nodes[node][at].covers.push(column);
                if depth + 1 == path.len() {
                    tree.nodes[node][at].columns.push(column);
                    break;
                }
                node = match tree.nodes[node][at].child {
                    Some(child) => child,
                    None => {
                        tree.nodes.push(Vec::new());
                        let child = tree.nodes.len() - 1;
                        tree.nodes[node][at].child = Some(child);
                        child
                    }
                };
            }
        }
        tree
    }

    fn by_key(&self, node: usize, key: &str) -> Option<&Entry> {
        self.nodes[node].iter().find(|e| e.key == key)
    }

    fn by_index(&self, node: usize, index: usize) -> Option<&Entry> {
        self.nodes[node].iter().find(|e| e.index == Some(index))
    }
}

/// What a column holds once its record is parsed.
#[derive(Debug)]
enum Slot {
    Null,
    /// Input text, a range of the scratch buffer.
    Text(Range<usize>),
    /// A timestamp given as a number.
    Nanos(i64),
    /// A number in a BIGINT column.
    Int(i64),
    /// A number in a DOUBLE PRECISION column.
    Double(f64),
    /// Why the record cannot fill the column.
    Bad(Box<Error>),
}

/// How a column takes a JSON value that is not a string.
#[derive(Debug, Clone)]
enum Kind {
    /// Numbers are seconds since the epoch.
    Timestamp(ScalarValue),
    /// Objects and arrays are stored as their JSON text.
    Text,
    /// Integral numbers go in as they are (others as text, for the text's error).
    BigInt,
    /// Numbers go in as they are.
    Double,
    Other,
}

/// A JSON scalar (or a nested value) found at a column's path.
enum Found<'a> {
    Null,
    Str(&'a str),
    Bool(bool),
    Number(Number),
    Nested(&'a Value),
}

/// Decodes JSON records into rows of one schema.
#[derive(Debug)]
pub struct JsonDecoder {
    schema: SchemaRef,
    tree: PathTree,
    kinds: Vec<Kind>,
    text: String,
    slots: Vec<Slot>,
}

impl JsonDecoder {
    /// A decoder into `schema`, `paths[i]` being column `i`'s path of keys.
    pub fn new(schema: SchemaRef, paths: &[Vec<String>]) -> JsonDecoder {
        let kinds = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Timestamp(_, zone) => {
                    Kind::Timestamp(ScalarValue::TimestampNanosecond(None, zone.clone()))
                }
                DataType::Utf8 => Kind::Text,
                DataType::Int64 => Kind::BigInt,
                DataType::Float64 => Kind::Double,
                _ => Kind::Other,
            })
            .collect();
        JsonDecoder {
            tree: PathTree::new(paths),
            slots: schema.fields().iter().map(|_| Slot::Null).collect(),
            schema,
            kinds,
            text: String::new(),
        }
    }

    /// Parses one record (a JSON object, not blank) and appends its row to `builder`. On an
    /// error the builder may hold part of the row: the caller starts a new one.
    pub fn push_record(&mut self, line: &[u8], builder: &mut BatchBuilder) -> Result<()> {
        self.text.clear();
        self.slots.fill_with(|| Slot::Null);
        if self.parse(line).is_err() {
            self.parse_value(line)?;
        }
        self.push_slots(builder)
    }

    /// Appends the parsed record's row.
    fn push_slots(&mut self, builder: &mut BatchBuilder) -> Result<()> {
        for (c, slot) in self.slots.iter_mut().enumerate() {
            match slot {
                Slot::Null => builder.push_text(c, None)?,
                Slot::Text(range) => builder.push_text(c, Some(&self.text[range.clone()]))?,
                Slot::Nanos(nanos) => {
                    let Kind::Timestamp(ScalarValue::TimestampNanosecond(_, zone)) = &self.kinds[c]
                    else {
                        return Err(Error::Internal("a timestamp slot in another column".into()));
                    };
                    let value = ScalarValue::TimestampNanosecond(Some(*nanos), zone.clone());
                    builder.push_scalar(c, &value)?
                }
                Slot::Int(v) => builder.push_scalar(c, &ScalarValue::Int64(Some(*v)))?,
                Slot::Double(v) => builder.push_scalar(c, &ScalarValue::Float64(Some(*v)))?,
                Slot::Bad(_) => {
                    let Slot::Bad(e) = std::mem::replace(slot, Slot::Null) else {
                        unreachable!("matched above")
                    };
                    return Err(*e);
                }
            }
        }
        builder.finish_row()
    }

    /// The fast path: serde_json straight into the slots. Fails on anything but a valid
    /// UTF-8 JSON object.
    fn parse(&mut self, line: &[u8]) -> std::result::Result<(), serde_json::Error> {
        let text = std::str::from_utf8(line).map_err(serde::de::Error::custom)?;
        let mut de = serde_json::Deserializer::from_str(text);
        let seed = NodeSeed {
            decoder: self.parts(),
            node: 0,
            root: true,
        };
        seed.deserialize(&mut de)?;
        de.end()
    }

    /// The reference path: the record as a `Value`, each column looked up in it.
    fn parse_value(&mut self, line: &[u8]) -> Result<()> {
        let value: Value = serde_json::from_slice(line).map_err(|e| {
            Error::invalid_input(
                sqlstate::INVALID_TEXT_REPRESENTATION,
                format!("invalid JSON record: {e}"),
            )
        })?;
        if !value.is_object() {
            return Err(Error::invalid_input(
                sqlstate::INVALID_TEXT_REPRESENTATION,
                "a JSON record must be an object",
            ));
        }
        self.text.clear();
        self.slots.fill_with(|| Slot::Null);
        self.parts().walk(0, &value);
        Ok(())
    }

    fn parts(&mut self) -> Parts<'_> {
        Parts {
            schema: &self.schema,
            tree: &self.tree,
            kinds: &self.kinds,
            text: &mut self.text,
            slots: &mut self.slots,
        }
    }
}

/// The decoder's pieces, borrowed apart so the tree is read while the slots are written.
struct Parts<'d> {
    schema: &'d SchemaRef,
    tree: &'d PathTree,
    kinds: &'d [Kind],
    text: &'d mut String,
    slots: &'d mut [Slot],
}

impl Parts<'_> {
    fn reborrow(&mut self) -> Parts<'_> {
        Parts {
            schema: self.schema,
            tree: self.tree,
            kinds: self.kinds,
            text: self.text,
            slots: self.slots,
        }
    }

    /// The key `entry` was seen: whatever an earlier copy of it filled is forgotten.
    fn reset(&mut self, entry: &Entry) {
        for &c in &entry.covers {
            self.slots[c] = Slot::Null;
        }
    }

    /// Fills the columns whose path ends at `entry` with `found`.
    fn fill(&mut self, entry: &Entry, found: Found<'_>) {
        // The value's text, written (once, for all the columns that want it) on first use.
        let mut text: Option<Range<usize>> = None;
        for &c in &entry.columns {
            let slot = match (&found, &self.kinds[c]) {
                (Found::Null, _) => Slot::Null,
                (Found::Number(n), Kind::Timestamp(_)) => self.epoch_nanos(c, n),
                (Found::Number(n), Kind::BigInt) if n.as_i64().is_some() => {
                    Slot::Int(n.as_i64().unwrap_or_default())
                }
                (Found::Number(n), Kind::Double) => Slot::Double(n.as_f64().unwrap_or(f64::NAN)),
                (Found::Nested(_), Kind::Text)
                | (Found::Str(_) | Found::Bool(_) | Found::Number(_), _) => {
                    Slot::Text(text.get_or_insert_with(|| self.write_text(&found)).clone())
                }
                (Found::Nested(_), _) => Slot::Bad(Box::new(self.needs_scalar(c, &found))),
            };
            self.slots[c] = slot;
        }
    }

    /// Appends the text of `found` to the scratch buffer; its range there.
    fn write_text(&mut self, found: &Found<'_>) -> Range<usize> {
        let start = self.text.len();
        match found {
            Found::Null => {}
            Found::Str(s) => self.text.push_str(s),
            Found::Bool(b) => self.text.push_str(if *b { "true" } else { "false" }),
            Found::Number(n) => {
                let _ = write!(self.text, "{n}");
            }
            Found::Nested(v) => {
                let _ = write!(self.text, "{v}");
            }
        }
        start..self.text.len()
    }

    /// A number in a timestamp column: seconds since the epoch.
    fn epoch_nanos(&self, column: usize, n: &Number) -> Slot {
        let secs = n.as_f64().unwrap_or(f64::NAN);
        let nanos = secs * 1e9;
        if !nanos.is_finite() || nanos.abs() >= i64::MAX as f64 {
            return Slot::Bad(Box::new(Error::invalid_input(
                sqlstate::DATETIME_FIELD_OVERFLOW,
                format!(
                    "timestamp out of range: {n} seconds, in column \"{}\"",
                    self.schema.field(column).name()
                ),
            )));
        }
        Slot::Nanos(nanos.round() as i64)
    }

    fn needs_scalar(&self, column: usize, found: &Found<'_>) -> Error {
        let what = match found {
            Found::Nested(Value::Array(_)) => "an array",
            _ => "an object",
        };
        Error::invalid_input(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!(
                "column \"{}\" needs a scalar, the record holds {what}",
                self.schema.field(column).name()
            ),
        )
    }

    /// Fills the columns below `node` from `value` (the reference path, and the one for a
    /// path that ends where another goes on).
    fn walk(&mut self, node: usize, value: &Value) {
        let tree = self.tree;
        for entry in &tree.nodes[node] {
            let found = match value {
                Value::Object(map) => map.get(&entry.key),
                Value::Array(items) => entry.index.and_then(|i| items.get(i)),
                _ => None,
            };
            let Some(found) = found else { continue };
            self.fill_value(entry, found);
        }
    }

    fn fill_value(&mut self, entry: &Entry, value: &Value) {
        let found = match value {
            Value::Null => Found::Null,
            Value::String(s) => Found::Str(s),
            Value::Bool(b) => Found::Bool(*b),
            Value::Number(n) => Found::Number(n.clone()),
            nested => Found::Nested(nested),
        };
        self.fill(entry, found);
        if let Some(child) = entry.child {
            self.walk(child, value);
        }
    }
}

/// Parses the value at a node of the tree: an object (or array) whose wanted keys are
/// followed and the others skipped.
struct NodeSeed<'d> {
    decoder: Parts<'d>,
    node: usize,
    /// The record itself, which must be an object.
    root: bool,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> std::result::Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<(), A::Error> {
        let tree = self.decoder.tree;
        while let Some(entry) = map.next_key_seed(KeySeed {
            tree,
            node: self.node,
        })? {
            match entry {
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
                Some(entry) => map.next_value_seed(EntrySeed {
                    decoder: self.decoder.reborrow(),
                    entry,
                })?,
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> std::result::Result<(), A::Error> {
        if self.root {
            return Err(serde::de::Error::custom("a JSON record must be an object"));
        }
        let tree = self.decoder.tree;
        let mut index = 0;
        loop {
            let more = match tree.by_index(self.node, index) {
                None => seq.next_element::<IgnoredAny>()?.is_some(),
                Some(entry) => seq
                    .next_element_seed(EntrySeed {
                        decoder: self.decoder.reborrow(),
                        entry,
                    })?
                    .is_some(),
            };
            if !more {
                return Ok(());
            }
            index += 1;
        }
    }

    // A scalar where the path goes on: the columns below stay NULL.
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        self.scalar()
    }
}

impl NodeSeed<'_> {
    fn scalar<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        if self.root {
            return Err(E::custom("a JSON record must be an object"));
        }
        Ok(())
    }
}

/// Reads a key and finds its entry in a node, without allocating.
struct KeySeed<'t> {
    tree: &'t PathTree,
    node: usize,
}

impl<'de, 't> DeserializeSeed<'de> for KeySeed<'t> {
    type Value = Option<&'t Entry>;

    fn deserialize<D: Deserializer<'de>>(
        self,
        de: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de, 't> Visitor<'de> for KeySeed<'t> {
    type Value = Option<&'t Entry>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> std::result::Result<Self::Value, E> {
        Ok(self.tree.by_key(self.node, key))
    }
}

/// Parses the value of a wanted key: a column's value, a node to go into, or both.
struct EntrySeed<'d, 't> {
    decoder: Parts<'d>,
    entry: &'t Entry,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(mut self, de: D) -> std::result::Result<(), D::Error> {
        self.decoder.reset(self.entry);
        match (self.entry.columns.is_empty(), self.entry.child) {
            (false, None) => de.deserialize_any(self),
            (true, Some(node)) => NodeSeed {
                decoder: self.decoder,
                node,
                root: false,
            }
            .deserialize(de),
            // A path that ends where another goes on: the rare case, through a `Value`.
            _ => {
                let value = Value::deserialize(de)?;
                self.decoder.fill_value(self.entry, &value);
                Ok(())
            }
        }
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: serde::de::Error>(mut self) -> std::result::Result<(), E> {
        self.decoder.fill(self.entry, Found::Null);
        Ok(())
    }
    fn visit_bool<E: serde::de::Error>(mut self, v: bool) -> std::result::Result<(), E> {
        self.decoder.fill(self.entry, Found::Bool(v));
        Ok(())
    }
    fn visit_i64<E: serde::de::Error>(mut self, v: i64) -> std::result::Result<(), E> {
        self.decoder.fill(self.entry, Found::Number(v.into()));
        Ok(())
    }
    fn visit_u64<E: serde::de::Error>(mut self, v: u64) -> std::result::Result<(), E> {
        self.decoder.fill(self.entry, Found::Number(v.into()));
        Ok(())
    }
    fn visit_f64<E: serde::de::Error>(mut self, v: f64) -> std::result::Result<(), E> {
        match Number::from_f64(v) {
            Some(n) => self.decoder.fill(self.entry, Found::Number(n)),
            None => return Err(E::custom("a number that is not finite")),
        }
        Ok(())
    }
    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> std::result::Result<(), E> {
        self.decoder.fill(self.entry, Found::Str(v));
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, map: A) -> std::result::Result<(), A::Error> {
        let value = Value::deserialize(MapAccessDeserializer::new(map))?;
        self.decoder.fill(self.entry, Found::Nested(&value));
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, seq: A) -> std::result::Result<(), A::Error> {
        let value = Value::deserialize(SeqAccessDeserializer::new(seq))?;
        self.decoder.fill(self.entry, Found::Nested(&value));
        Ok(())
    }
}

#[cfg(test)]
mod tests;
