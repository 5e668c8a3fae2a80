//! A position-annotated YAML tree, parsed with serde-saphyr.
//!
//! The loader keeps every node's line and column so that schema errors
//! (reported by the jsonschema crate as JSON pointers) and semantic errors can
//! be mapped back to `FILE:LINE:COL`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

pub use model::diag::Pos;

pub use super::yaml_parse::{MAX_FLEET_NODES, NodeBudget};

/// A YAML node with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub pos: Pos,
    /// What the node holds.
    pub value: Value,
}

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`, `~` or an empty value.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// Any other number.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order, with the key nodes kept for positions.
    Map(Vec<(Node, Node)>),
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    /// Where the parser stopped.
    pub pos: Pos,
    /// What was wrong, without the position.
    pub message: String,
}

/// Parses every document of a YAML stream. Empty documents are dropped.
/// A key repeated in one mapping is an error that names both positions.
pub fn parse_documents(text: &str) -> Result<Vec<Node>, SyntaxError> {
    parse_documents_within(text, &NodeBudget::new(MAX_FLEET_NODES))
}

/// [`parse_documents`], taking its nodes from a budget shared by the files
/// of one fleet.
///
/// Texts in the fast path's subset (`yaml_fast`: what fleets are made of)
/// are parsed there; any other text, and one whose nodes would overrun the
/// budget, goes through the general parser, which has every message.
pub fn parse_documents_within(text: &str, nodes: &NodeBudget) -> Result<Vec<Node>, SyntaxError> {
    let fast = super::yaml_fast::documents_counted(text)
        .filter(|(_, count)| nodes.take_if_left(*count))
        .map(|(docs, _)| docs);
    let docs = match fast {
        Some(docs) => docs,
        None => super::yaml_parse::build_documents_within(text, nodes)?,
    };
    non_empty_without_duplicates(docs)
}

/// The non-empty documents of `docs`, or the first (by position) key that
/// repeats an earlier key of its mapping.
pub(crate) fn non_empty_without_duplicates(docs: Vec<Node>) -> Result<Vec<Node>, SyntaxError> {
    if let Some(err) = docs
        .iter()
        .filter_map(first_duplicate_key)
        .min_by_key(|e| e.pos)
    {
        return Err(err);
    }
    Ok(docs
        .into_iter()
        .filter(|doc| doc.value != Value::Null)
        .collect())
}

/// A scalar mapping key, hashable, equal exactly when the keys' values are
/// equal (`1` and `1.0` differ, as their [`Value`]s do; `-0.0` is `0.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ScalarKey<'a> {
    Null,
    Bool(bool),
    Int(i64),
    /// The bits of a float that is not NaN, with `-0.0` as `0.0`.
    Float(u64),
    Str(&'a str),
}

impl<'a> ScalarKey<'a> {
    /// The key of a scalar node; `None` for collections and NaN, which equal
    /// no other key.
    pub(crate) fn of(node: &'a Node) -> Option<Self> {
        Some(match &node.value {
            Value::Null => ScalarKey::Null,
            Value::Bool(b) => ScalarKey::Bool(*b),
            Value::Int(i) => ScalarKey::Int(*i),
            Value::Float(f) if f.is_nan() => return None,
            Value::Float(f) => ScalarKey::Float(if *f == 0.0 { 0 } else { f.to_bits() }),
            Value::Str(s) => ScalarKey::Str(s),
            Value::Seq(_) | Value::Map(_) => return None,
        })
    }
}

/// Mappings up to this size are checked for repeated keys pair by pair.
const SMALL_MAP: usize = 8;

/// The error of `key` repeating `first`.
fn duplicate(key: &Node, first: &Node) -> SyntaxError {
    SyntaxError {
        pos: key.pos,
        message: format!(
            "duplicate key {:?} (first at line {}, column {})",
            key.key_text(),
            first.pos.line,
            first.pos.column
        ),
    }
}

/// The first (by position) scalar key that repeats an earlier key of the same mapping.
fn first_duplicate_key(node: &Node) -> Option<SyntaxError> {
    let mut found: Option<SyntaxError> = None;
    let mut keep = |err: SyntaxError| {
        if found.as_ref().is_none_or(|f| err.pos < f.pos) {
            found = Some(err);
        }
    };
    match &node.value {
        Value::Seq(items) => items
            .iter()
            .filter_map(first_duplicate_key)
            .for_each(&mut keep),
        Value::Map(entries) if entries.len() <= SMALL_MAP => {
            // Pairs compared directly: cheaper than hashing for the few
            // keys of a typical mapping.
            for (i, (key, value)) in entries.iter().enumerate() {
                if let Some(scalar) = ScalarKey::of(key)
                    && let Some((first, _)) = entries[..i]
                        .iter()
                        .find(|(k, _)| ScalarKey::of(k) == Some(scalar))
                {
                    keep(duplicate(key, first));
                }
                if let Some(err) = first_duplicate_key(value) {
                    keep(err);
                }
            }
        }
        Value::Map(entries) => {
            // Linear in the mapping's size: a hostile 300k-key mapping must
            // not take minutes.
            let mut seen: HashMap<ScalarKey<'_>, &Node> = HashMap::with_capacity(entries.len());
            for (key, value) in entries {
                if let Some(scalar) = ScalarKey::of(key) {
                    match seen.entry(scalar) {
                        Entry::Occupied(first) => keep(duplicate(key, first.get())),
                        Entry::Vacant(slot) => {
                            slot.insert(key);
                        }
                    }
                }
                if let Some(err) = first_duplicate_key(value) {
                    keep(err);
                }
            }
        }
        _ => {}
    }
    found
}

impl Node {
    /// The mapping entry `key`, if this node is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key node and value node of mapping entry `key`.
    pub fn entry(&self, key: &str) -> Option<(&Node, &Node)> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(&k.value, Value::Str(s) if s == key))
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// The string value, if this node is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Follows a path of mapping keys and sequence indices; returns the
    /// deepest node reached, so a path into a missing field still yields the
    /// position of its closest existing parent.
    pub fn locate<S: AsRef<str>>(&self, path: impl IntoIterator<Item = PathSegment<S>>) -> &Node {
        let mut node = self;
        for seg in path {
            let next = match (&node.value, seg) {
                (Value::Map(_), PathSegment::Key(k)) => node.get(k.as_ref()),
                (Value::Seq(items), PathSegment::Index(i)) => items.get(i),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        node
    }

    /// Like [`Node::locate`], but returns the *key* node of the deepest mapping
    /// entry reached (or the sequence item): a message about a whole mapping
    /// reads best at `spec:`, not at the first field inside it. The node
    /// itself when the path reaches nothing.
    pub fn locate_key<S: AsRef<str>>(
        &self,
        path: impl IntoIterator<Item = PathSegment<S>>,
    ) -> &Node {
        let mut node = self;
        let mut key = self;
        for seg in path {
            let next = match (&node.value, seg) {
                (Value::Map(_), PathSegment::Key(k)) => node.entry(k.as_ref()),
                (Value::Seq(items), PathSegment::Index(i)) => items.get(i).map(|item| (item, item)),
                _ => None,
            };
            match next {
                Some((k, v)) => {
                    key = k;
                    node = v;
                }
                None => break,
            }
        }
        key
    }

    /// Converts to JSON, for schema validation, typed deserialization and CEL.
    /// Non-string keys become their YAML text; YAML-only values (NaN) become null.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.key_text(), v.to_json()))
                    .collect(),
            ),
        }
    }

    fn key_text(&self) -> String {
        match &self.value {
            Value::Str(s) => s.clone(),
            Value::Null => "null".to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Seq(_) | Value::Map(_) => self.to_json().to_string(),
        }
    }
}

/// Mappings up to this size are searched entry by entry; larger ones get an
/// index at their first look-up through a [`Locator`].
const INDEX_FROM: usize = 16;

/// Looks up paths in one tree like [`Node::locate`] and
/// [`Node::locate_key`], in time independent of the mappings' sizes: a large
/// mapping is indexed at its first look-up. For callers that may look up
/// many paths in one tree (one per schema error): 200,000 errors in a
/// 200,000-key mapping must not cost 200,000 scans of it.
pub struct Locator<'a> {
    root: &'a Node,
    /// Per indexed mapping (by address), its string keys: the first entry
    /// of each, as [`Node::entry`] finds it.
    index: HashMap<*const Node, HashMap<&'a str, (&'a Node, &'a Node)>>,
}

impl<'a> Locator<'a> {
    /// A locator over the tree at `root`.
    pub fn new(root: &'a Node) -> Self {
        Self {
            root,
            index: HashMap::new(),
        }
    }

    /// The key node and value node of mapping entry `key` of `map` (a node
    /// of this tree), as [`Node::entry`].
    pub fn entry(&mut self, map: &'a Node, key: &str) -> Option<(&'a Node, &'a Node)> {
        let Value::Map(entries) = &map.value else {
            return None;
        };
        if entries.len() <= INDEX_FROM {
            return map.entry(key);
        }
        let index = self.index.entry(map as *const Node).or_insert_with(|| {
            let mut index = HashMap::with_capacity(entries.len());
            for (k, v) in entries {
                if let Value::Str(s) = &k.value {
                    index.entry(s.as_str()).or_insert((k, v));
                }
            }
            index
        });
        index.get(key).copied()
    }

    /// As [`Node::locate`] from the root.
    pub fn locate<S: AsRef<str>>(
        &mut self,
        path: impl IntoIterator<Item = PathSegment<S>>,
    ) -> &'a Node {
        self.walk(path).1
    }

    /// As [`Node::locate_key`] from the root.
    pub fn locate_key<S: AsRef<str>>(
        &mut self,
        path: impl IntoIterator<Item = PathSegment<S>>,
    ) -> &'a Node {
        self.walk(path).0
    }

    /// The key node and the node of the deepest entry the path reaches.
    fn walk<S: AsRef<str>>(
        &mut self,
        path: impl IntoIterator<Item = PathSegment<S>>,
    ) -> (&'a Node, &'a Node) {
        let mut node = self.root;
        let mut key = self.root;
        for seg in path {
            let next = match (&node.value, seg) {
                (Value::Map(_), PathSegment::Key(k)) => self.entry(node, k.as_ref()),
                (Value::Seq(items), PathSegment::Index(i)) => items.get(i).map(|item| (item, item)),
                _ => None,
            };
            match next {
                Some((k, v)) => {
                    key = k;
                    node = v;
                }
                None => break,
            }
        }
        (key, node)
    }
}

/// One step of a path into a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment<S> {
    /// A mapping key.
    Key(S),
    /// A sequence index.
    Index(usize),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        let loc = spanned.referenced;
        Ok(Node {
            pos: Pos::new(loc.line() as u32, loc.column() as u32),
            value: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(key) = map.next_key::<Node>()? {
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_multiple_documents_with_positions() {
        let docs = parse_documents("a: 1\nb:\n  - x\n  - 2.5\n---\n---\nc: true\n").unwrap();
        assert_eq!(docs.len(), 2);
        let b = docs[0].get("b").unwrap();
        assert_eq!(b.pos, Pos::new(3, 3));
        let Value::Seq(items) = &b.value else {
            panic!("not a seq")
        };
        assert_eq!(items[1].value, Value::Float(2.5));
        assert_eq!(items[1].pos, Pos::new(4, 5));
        let (key, value) = docs[1].entry("c").unwrap();
        assert_eq!(key.pos, Pos::new(7, 1));
        assert_eq!(value.value, Value::Bool(true));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse_documents("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(err.pos.line >= 2, "{err:?}");
        assert!(!err.message.contains("line"), "{}", err.message);
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let err = parse_documents("a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.pos.line, 2, "{err:?}");
    }

    #[test]
    fn duplicate_keys_name_the_first_occurrence() {
        let text =
            "x: 1\n---\nspec:\n  gpu: {model: A, count: 8, model: B}\n  labels: {}\n  labels: {}\n";
        let err = parse_documents(text).unwrap_err();
        assert_eq!(err.pos, Pos::new(4, 29), "{err:?}");
        assert_eq!(
            err.message,
            "duplicate key \"model\" (first at line 4, column 9)"
        );
        // Equal keys in different mappings are fine.
        assert!(parse_documents("a: {k: 1}\nb: {k: 2}\n").is_ok());
    }

    #[test]
    fn small_and_large_mappings_report_the_same_repeat() {
        // Mappings of 5, 8 (SMALL_MAP), 9 and 42 keys: the second repeat of k1 is reported,
        // naming k1's first occurrence (not the first repeat).
        for n in [3, SMALL_MAP - 2, SMALL_MAP - 1, 40] {
            let mut text = String::new();
            for i in 0..n {
                text.push_str(&format!("k{i}: {i}\n"));
            }
            text.push_str("k1: x\nk1: y\n");
            let err = parse_documents(&text).unwrap_err();
            assert_eq!(err.pos, Pos::new(n as u32 + 1, 1), "{n}: {err:?}");
            assert_eq!(
                err.message, "duplicate key \"k1\" (first at line 2, column 1)",
                "{n}"
            );
        }
    }

    #[test]
    fn locate_stops_at_deepest_existing_node() {
        let docs = parse_documents("spec:\n  items:\n    - {a: 1}\n").unwrap();
        let path = [
            PathSegment::Key("spec"),
            PathSegment::Key("items"),
            PathSegment::Index(0),
            PathSegment::Key("missing"),
        ];
        assert_eq!(docs[0].locate(path).pos, Pos::new(3, 7));
    }

    #[test]
    fn locate_key_points_at_the_key_of_the_deepest_entry() {
        let docs =
            parse_documents("kind: Job\nspec:\n  queue: q\n  items:\n    - {a: 1}\n").unwrap();
        let key = |path: &[PathSegment<&str>]| docs[0].locate_key(path.iter().cloned()).pos;
        assert_eq!(key(&[PathSegment::Key("spec")]), Pos::new(2, 1));
        assert_eq!(
            key(&[PathSegment::Key("spec"), PathSegment::Key("missing")]),
            Pos::new(2, 1)
        );
        assert_eq!(
            key(&[
                PathSegment::Key("spec"),
                PathSegment::Key("items"),
                PathSegment::Index(0)
            ]),
            Pos::new(5, 7)
        );
        assert_eq!(key(&[]), Pos::new(1, 1));
    }
}
