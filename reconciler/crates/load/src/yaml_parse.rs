//! Builds [`Node`] trees straight from the YAML event stream of serde-saphyr's
//! parser (granit), keeping the position of every node. This is the hot path
//! of loading large fleets: no serde layer between events and the tree.
//!
//! Scalars resolve by the YAML 1.2 core schema (`yes`/`no`/`on`/`off` stay
//! strings); anchors, aliases and `<<` merge keys are supported, with a cap
//! on how many nodes aliases may expand to (no "billion laughs").

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span};

use super::yaml::{Node, Pos, ScalarKey, SyntaxError, Value};

/// Nesting deeper than this is refused (trees are dropped recursively).
const MAX_DEPTH: usize = 256;

fn pos(span: &Span) -> Pos {
    Pos::new(span.start.line() as u32, span.start.col() as u32 + 1)
}

/// A collection being built.
enum Open {
    Seq(Pos, usize, Vec<Node>),
    /// Entries so far, and a key waiting for its value.
    Map(Pos, usize, Vec<(Node, Node)>, Option<Node>),
}

/// The most YAML nodes parsed for one fleet, all its files together, and
/// so for one file (16 million: a 150,000-job fleet has about 3 million;
/// trees cost about 40 bytes a node, so this bounds them near 1 GB where
/// the byte limits alone would allow over 100 million nodes).
pub const MAX_FLEET_NODES: usize = 16_000_000;

/// Nodes taken from a [`NodeBudget`] at a time (a shared counter touched
/// once per this many nodes, not per node).
const BUDGET_STEP: usize = 1 << 16;

/// YAML nodes left to the files of one fleet; shared by the threads that
/// parse them.
#[derive(Debug)]
pub struct NodeBudget {
    used: AtomicUsize,
    limit: usize,
}

impl NodeBudget {
    /// A budget of `limit` nodes.
    pub fn new(limit: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// The nodes taken so far.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `n` nodes if that many are left; `false` (and nothing taken)
    /// otherwise.
    pub(super) fn take_if_left(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(n).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    /// Takes `n` nodes; `false` once the budget is spent.
    fn take(&self, n: usize) -> bool {
        self.used.fetch_add(n, Ordering::Relaxed).saturating_add(n) <= self.limit
    }

    fn exceeded(&self, at: Pos) -> SyntaxError {
        SyntaxError {
            pos: at,
            message: format!(
                "too many YAML nodes: more than {} in this fleet's files (gitfleet's limit, \
                 docs/semantics.md \"Limits\")",
                self.limit
            ),
        }
    }
}

/// Parses every document of `text` with a budget of its own.
#[cfg(test)]
fn build_documents(text: &str) -> Result<Vec<Node>, SyntaxError> {
    build_documents_within(text, &NodeBudget::new(MAX_FLEET_NODES))
}

/// Parses every document of `text`, taking the nodes it makes from `nodes`;
/// empty documents are dropped by the caller.
pub fn build_documents_within(text: &str, nodes: &NodeBudget) -> Result<Vec<Node>, SyntaxError> {
    let budget = (text.len() * 4).max(100_000);
    let mut nodes_made = 0usize;
    let mut untaken = 0usize;
    let mut parser = Parser::new_from_str(text);
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut root: Option<Node> = None;
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|err| SyntaxError {
            pos: Pos::new(err.marker().line() as u32, err.marker().col() as u32 + 1),
            message: err.info(),
        })?;
        let at = pos(&span);
        let finished: Option<(Node, usize)> = match event {
            Event::StreamStart | Event::DocumentStart(..) => None,
            Event::StreamEnd => break,
            Event::DocumentEnd => {
                docs.push(root.take().unwrap_or(Node {
                    pos: at,
                    value: Value::Null,
                }));
                anchors.clear();
                None
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.and_then(|t| t.core_suffix().map(str::to_string));
                Some((
                    Node {
                        pos: at,
                        value: resolve(&text, style, tag.as_deref()),
                    },
                    anchor,
                ))
            }
            Event::SequenceStart(_, anchor, _) => {
                push(&mut stack, Open::Seq(at, anchor, Vec::new()), at)?;
                None
            }
            Event::MappingStart(_, anchor, _) => {
                push(&mut stack, Open::Map(at, anchor, Vec::new(), None), at)?;
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq(p, anchor, items)) => Some((
                    Node {
                        pos: p,
                        value: Value::Seq(items),
                    },
                    anchor,
                )),
                _ => return Err(internal(at)),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(p, anchor, entries, _)) => Some((
                    Node {
                        pos: p,
                        value: Value::Map(merge_keys(entries)),
                    },
                    anchor,
                )),
                _ => return Err(internal(at)),
            },
            Event::Alias(id) => {
                let Some(target) = anchors.get(&id) else {
                    return Err(SyntaxError {
                        pos: at,
                        message: "unknown alias".to_string(),
                    });
                };
                let copied = count(target);
                nodes_made += copied;
                untaken += copied;
                if nodes_made > budget {
                    return Err(SyntaxError {
                        pos: at,
                        message: "aliases expand to too many nodes".to_string(),
                    });
                }
                let mut copy = target.clone();
                copy.pos = at;
                Some((copy, 0))
            }
            _ => None,
        };
        let Some((node, anchor)) = finished else {
            continue;
        };
        nodes_made += 1;
        untaken += 1;
        if untaken >= BUDGET_STEP {
            if !nodes.take(untaken) {
                return Err(nodes.exceeded(at));
            }
            untaken = 0;
        }
        if anchor != 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Open::Seq(_, _, items)) => items.push(node),
            Some(Open::Map(_, _, entries, key)) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
    }
    if !nodes.take(untaken) {
        return Err(nodes.exceeded(Pos::new(1, 1)));
    }
    Ok(docs)
}

fn push(stack: &mut Vec<Open>, open: Open, at: Pos) -> Result<(), SyntaxError> {
    if stack.len() >= MAX_DEPTH {
        return Err(SyntaxError {
            pos: at,
            message: format!("nesting deeper than {MAX_DEPTH} levels"),
        });
    }
    stack.push(open);
    Ok(())
}

fn internal(at: Pos) -> SyntaxError {
    SyntaxError {
        pos: at,
        message: "unbalanced YAML structure".to_string(),
    }
}

fn count(node: &Node) -> usize {
    match &node.value {
        Value::Seq(items) => 1 + items.iter().map(count).sum::<usize>(),
        Value::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| count(k) + count(v))
                .sum::<usize>()
        }
        _ => 1,
    }
}

/// `<<: *base` (or a list of them) adds the entries of the merged mappings
/// that the mapping does not set itself.
fn merge_keys(entries: Vec<(Node, Node)>) -> Vec<(Node, Node)> {
    let is_merge = |k: &Node| matches!(&k.value, Value::Str(s) if s == "<<");
    if !entries
        .iter()
        .any(|(k, v)| is_merge(k) && !matches!(v.value, Value::Str(_)))
    {
        return entries;
    }
    let mut own: Vec<(Node, Node)> = Vec::with_capacity(entries.len());
    let mut merged: Vec<(Node, Node)> = Vec::new();
    for (k, v) in entries {
        if !is_merge(&k) {
            own.push((k, v));
            continue;
        }
        let sources = match v.value {
            Value::Map(m) => vec![m],
            Value::Seq(items) => items
                .into_iter()
                .filter_map(|n| match n.value {
                    Value::Map(m) => Some(m),
                    _ => None,
                })
                .collect(),
            other => {
                own.push((
                    k,
                    Node {
                        pos: v.pos,
                        value: other,
                    },
                ));
                continue;
            }
        };
        for source in sources {
            merged.extend(source);
        }
    }
    // Keys set by the mapping itself win, then the earliest merged source.
    // Scalar keys are hashed so that merging large mappings stays linear;
    // collection keys (rare) are compared one by one.
    let mut taken: HashSet<ScalarKey<'_>> =
        own.iter().filter_map(|(k, _)| ScalarKey::of(k)).collect();
    let mut add = Vec::with_capacity(merged.len());
    for (i, (mk, _)) in merged.iter().enumerate() {
        add.push(match ScalarKey::of(mk) {
            Some(key) => taken.insert(key),
            None => {
                !own.iter().any(|(x, _)| x.value == mk.value)
                    && !merged[..i].iter().any(|(x, _)| x.value == mk.value)
            }
        });
    }
    let extra: Vec<(Node, Node)> = merged
        .into_iter()
        .zip(add)
        .filter_map(|(entry, add)| add.then_some(entry))
        .collect();
    own.extend(extra);
    own
}

/// YAML 1.2 core schema resolution of a scalar.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&str>) -> Value {
    match tag {
        Some("str") => return Value::Str(text.to_string()),
        Some("null") => return Value::Null,
        Some("bool") | Some("int") | Some("float") => return plain(text),
        _ => {}
    }
    if style != ScalarStyle::Plain {
        return Value::Str(text.to_string());
    }
    plain(text)
}

/// The value of a plain scalar (YAML 1.2 core schema).
pub(super) fn plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let bytes = text.as_bytes();
    let first = bytes[0];
    if !(first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.') {
        return Value::Str(text.to_string());
    }
    if let Some(hex) = text.strip_prefix("0x") {
        if let Ok(i) = i64::from_str_radix(hex, 16) {
            return Value::Int(i);
        }
    } else if let Some(oct) = text.strip_prefix("0o") {
        if let Ok(i) = i64::from_str_radix(oct, 8) {
            return Value::Int(i);
        }
    } else if is_decimal_int(text) {
        return match text.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => text
                .parse::<f64>()
                .map_or(Value::Str(text.to_string()), Value::Float),
        };
    } else if is_float(text)
        && let Ok(f) = text.parse::<f64>()
    {
        return Value::Float(f);
    }
    Value::Str(text.to_string())
}

fn is_decimal_int(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`
fn is_float(text: &str) -> bool {
    let s = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (int.is_empty() && !frac.is_empty() || !int.is_empty())
                && int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let d = e.strip_prefix(['-', '+']).unwrap_or(e);
        !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(yaml: &str) -> Value {
        build_documents(yaml)
            .unwrap()
            .remove(0)
            .get("v")
            .unwrap()
            .value
            .clone()
    }

    #[test]
    fn core_schema_scalars() {
        assert_eq!(value("v: 12"), Value::Int(12));
        assert_eq!(value("v: -3"), Value::Int(-3));
        assert_eq!(value("v: 0x1f"), Value::Int(31));
        assert_eq!(value("v: 8.5"), Value::Float(8.5));
        assert_eq!(value("v: 1e3"), Value::Float(1000.0));
        assert_eq!(value("v: true"), Value::Bool(true));
        assert_eq!(value("v: ~"), Value::Null);
        assert_eq!(value("v:"), Value::Null);
        assert_eq!(value("v: no"), Value::Str("no".into()));
        assert_eq!(value("v: '12'"), Value::Str("12".into()));
        assert_eq!(value("v: !!str 12"), Value::Str("12".into()));
        assert_eq!(value("v: 1h30m"), Value::Str("1h30m".into()));
        assert_eq!(value("v: 1.2.3"), Value::Str("1.2.3".into()));
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let doc = build_documents("base: &b {a: 1, b: 2}\nv:\n  <<: *b\n  b: 3\n")
            .unwrap()
            .remove(0);
        let v = doc.get("v").unwrap();
        assert_eq!(v.get("a").unwrap().value, Value::Int(1));
        assert_eq!(v.get("b").unwrap().value, Value::Int(3));
        let Value::Map(entries) = &v.value else {
            panic!()
        };
        assert_eq!(entries.len(), 2);
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            yaml.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n", p = i - 1));
        }
        let err = build_documents(&yaml).unwrap_err();
        assert!(err.message.contains("too many"), "{err:?}");
    }

    #[test]
    fn node_budget_is_shared_and_refuses_beyond_it() {
        let budget = NodeBudget::new(3 * BUDGET_STEP);
        let seq = |n: usize| format!("[{}]", vec!["1"; n].join(","));
        assert!(build_documents_within(&seq(BUDGET_STEP + 10), &budget).is_ok());
        assert!(build_documents_within(&seq(BUDGET_STEP + 10), &budget).is_ok());
        let err = build_documents_within(&seq(BUDGET_STEP), &budget).unwrap_err();
        assert!(err.message.contains("YAML nodes"), "{err:?}");
        // The first file alone is well within a fresh budget of that size.
        assert!(
            build_documents_within(&seq(BUDGET_STEP), &NodeBudget::new(3 * BUDGET_STEP)).is_ok()
        );
    }

    #[test]
    fn a_file_beyond_the_node_limit_fails_early() {
        // Far fewer bytes than the file limit, more nodes than a small budget.
        let text = format!("[{}]", vec!["1"; 5 * BUDGET_STEP].join(","));
        let err = build_documents_within(&text, &NodeBudget::new(2 * BUDGET_STEP)).unwrap_err();
        // Refused at most one step after the budget ran out (each node is
        // two columns), not after the whole file.
        let limit_col = 2 * (2 * BUDGET_STEP + BUDGET_STEP) as u32 + 10;
        assert!(err.pos.column <= limit_col, "{err:?}");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let yaml = "[".repeat(300) + &"]".repeat(300);
        assert!(build_documents(&yaml).is_err());
    }

    #[test]
    fn positions_are_one_based() {
        let doc = build_documents("a: 1\nb:\n  - x\n").unwrap().remove(0);
        let (k, v) = doc.entry("b").unwrap();
        assert_eq!(k.pos, Pos::new(2, 1));
        assert_eq!(v.pos, Pos::new(3, 3));
    }
}
