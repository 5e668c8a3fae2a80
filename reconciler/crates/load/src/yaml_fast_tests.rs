//! The fast YAML path (`yaml_fast`) against the general parser
//! (`yaml_parse`): whenever the fast path takes a text, the general parser
//! must accept it and build the same non-empty documents, values and
//! positions alike. Checked on random trees rendered in many styles, on
//! random edits of those renderings (which the fast path must mostly
//! decline), on every YAML file of the repository and on a table of tricky
//! texts. Cases per property: `GITFLEET_YAML_FAST_CASES` (default 2,000).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::yaml::{MAX_FLEET_NODES, Node, NodeBudget, SyntaxError, Value};
use crate::yaml_fast::documents;
use crate::yaml_parse::{build_documents_within, plain};

// ---------------------------------------------------------------------------
// The check

/// The general parser's non-empty documents of `text`.
fn general(text: &str) -> Result<Vec<Node>, SyntaxError> {
    build_documents_within(text, &NodeBudget::new(MAX_FLEET_NODES)).map(|docs| {
        docs.into_iter()
            .filter(|doc| doc.value != Value::Null)
            .collect()
    })
}

/// Whether the fast path took a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Taken,
    Declined,
}

/// Panics unless the fast path declines `text` or builds exactly the
/// general parser's documents of it.
fn check(text: &str) -> Outcome {
    let Some(fast) = documents(text) else {
        return Outcome::Declined;
    };
    match general(text) {
        Err(err) => panic!(
            "the fast path took a text the general parser rejects \
             ({}:{}: {})\ntext:    {text:?}\nfast:    {}",
            err.pos.line,
            err.pos.column,
            err.message,
            show_docs(&fast)
        ),
        Ok(expected) => {
            if !same_docs(&fast, &expected) {
                panic!(
                    "the fast path and the general parser differ\ntext:    {text:?}\nfast:    {}\ngeneral: {}",
                    show_docs(&fast),
                    show_docs(&expected)
                );
            }
        }
    }
    Outcome::Taken
}

/// [`check`], and the fast path must take `text`.
fn check_taken(text: &str) {
    assert_eq!(
        check(text),
        Outcome::Taken,
        "the fast path declined {text:?}"
    );
}

fn same_docs(a: &[Node], b: &[Node]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
}

/// Equal values and positions; floats by their bits (so `-0.0` is not
/// `0.0`), NaN equal to NaN.
fn same(a: &Node, b: &Node) -> bool {
    a.pos == b.pos && same_value(&a.value, &b.value, &same)
}

/// Equal values, positions aside.
fn same_shape(a: &Node, b: &Node) -> bool {
    same_value(&a.value, &b.value, &same_shape)
}

fn same_value(a: &Value, b: &Value, node: &dyn Fn(&Node, &Node) -> bool) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (Value::Seq(x), Value::Seq(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| node(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k, v), (l, w))| node(k, l) && node(v, w))
        }
        _ => a == b,
    }
}

/// Documents on one line: `line:col` and the value of every node.
fn show_docs(docs: &[Node]) -> String {
    let mut out = String::new();
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str(" --- ");
        }
        show(doc, &mut out);
    }
    out
}

fn show(node: &Node, out: &mut String) {
    let _ = write!(out, "{}:{} ", node.pos.line, node.pos.column);
    match &node.value {
        Value::Null => out.push('~'),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Int(i) => {
            let _ = write!(out, "{i}i");
        }
        Value::Float(f) => {
            let _ = write!(out, "{f:?}f");
        }
        Value::Str(s) => {
            let _ = write!(out, "{s:?}");
        }
        Value::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                show(item, out);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                show(k, out);
                out.push_str(" => ");
                show(v, out);
            }
            out.push('}');
        }
    }
}

// ---------------------------------------------------------------------------
// Random trees and their renderings

/// Scalar texts, rendered plain where that is safe (and now and then where
/// it is not), else quoted.
const SCALARS: &[&str] = &[
    "x",
    "v",
    "1",
    "0",
    "-3",
    "+1",
    "007",
    "0x1f",
    "-0x1f",
    "0o17",
    "0x",
    "0x-1",
    "0x+1",
    "0o-7",
    "0XFF",
    "0x7fffffffffffffff",
    "0x8000000000000000",
    "+0x1f",
    "-007",
    "-0",
    "+0",
    "00.5",
    "-9223372036854775808",
    "+9223372036854775807",
    "99999999999999999999999",
    "1e400",
    "-1e400",
    "1e-400",
    "1E3",
    ".e3",
    ".",
    "+",
    "-.5",
    "+.nan",
    "NaN",
    "inf",
    "1_000",
    "0b101",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1e3",
    ".5",
    "+.5",
    "1.",
    "1e",
    "e3",
    "-0.0",
    "1.5",
    "6.02e+23",
    ".inf",
    "-.Inf",
    ".nan",
    "~",
    "null",
    "Null",
    "true",
    "True",
    "FALSE",
    "yes",
    "no",
    "on",
    "1h30m",
    "29h",
    "1.2.3",
    "12:30",
    "2026-11-21T10:00:00Z",
    "-x",
    "--nnodes=2",
    ":a",
    "?q",
    "a:b",
    "a b",
    "a  b",
    "a#b",
    "k=v",
    "x -y",
    "http://x",
    "H100-SXM-80GB",
    "team-0-0",
    "gitfleet/v1",
    "train.py",
    "registry.example.com/training/ranker:12.3",
    "",
    " lead",
    "trail ",
    "it's",
    "say \"hi\"",
    "back\\slash",
    "[x]",
    "{y}",
    "a, b",
    "a,b",
    "a: b",
    "a:",
    "x #y",
    "#z",
    "#",
    "- item",
    "-",
    "?",
    ":",
    "&a",
    "*b",
    "!t",
    "!!str",
    "|",
    ">",
    "%p",
    "@at",
    "`tick",
    "'q'",
    "\"d\"",
    "--",
    "---",
    "...",
    "a\tb",
    "é",
    "a × b",
];

/// Mapping keys.
const KEYS: &[&str] = &[
    "a",
    "b",
    "b-c",
    "x.y/z",
    "1",
    "true",
    "null",
    "0x1f",
    "k_2",
    "0x-1",
    "-0",
    "1e400",
    "name",
    "spec",
    "metadata",
    "labels",
    "apiVersion",
    "kind",
    "gpu",
    "a b",
    "~",
    "-1",
    ".5",
    "1.5",
    "k:v",
    "-k",
    "?k",
    "é",
    "",
    "'q'",
    "x #y",
    "[k]",
    "a: b",
];

/// A random document tree; every node carries random style bits (0 is the
/// plainest style, so that shrinking heads there).
#[derive(Debug, Clone)]
enum Tree {
    /// An index into [`SCALARS`].
    Scalar(usize, u32),
    Seq(Vec<Tree>, u32),
    /// Keys are indices into [`KEYS`] with their own style bits.
    Map(Vec<((usize, u32), Tree)>, u32),
}

impl Tree {
    fn bits(&self) -> u32 {
        match self {
            Tree::Scalar(_, b) | Tree::Seq(_, b) | Tree::Map(_, b) => *b,
        }
    }
}

/// Documents (`None`: an empty one) with their style bits, and the
/// stream's.
#[derive(Debug, Clone)]
struct Stream {
    docs: Vec<(Option<Tree>, u32)>,
    bits: u32,
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = (0..SCALARS.len(), any::<u32>()).prop_map(|(i, b)| Tree::Scalar(i, b));
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            (vec(inner.clone(), 0..6), any::<u32>()).prop_map(|(v, b)| Tree::Seq(v, b)),
            (vec((key(), inner), 0..6), any::<u32>()).prop_map(|(v, b)| Tree::Map(v, b)),
        ]
    })
}

fn key() -> impl Strategy<Value = (usize, u32)> {
    (0..KEYS.len(), any::<u32>())
}

/// Mostly mappings, as fleet documents are.
fn root() -> impl Strategy<Value = Tree> {
    prop_oneof![
        4 => (vec((key(), tree()), 1..7), any::<u32>()).prop_map(|(v, b)| Tree::Map(v, b)),
        1 => tree(),
    ]
}

fn stream() -> impl Strategy<Value = Stream> {
    (
        vec(
            (proptest::option::weighted(0.85, root()), any::<u32>()),
            1..4,
        ),
        any::<u32>(),
    )
        .prop_map(|(docs, bits)| Stream { docs, bits })
}

/// What a rendering means, positions aside.
#[derive(Debug, Clone)]
enum Shape {
    Scalar(Value),
    Seq(Vec<Shape>),
    Map(Vec<(Shape, Shape)>),
}

fn shape_matches(shape: &Shape, node: &Node) -> bool {
    match (shape, &node.value) {
        (Shape::Scalar(v), _) => same_shape(
            &Node {
                pos: node.pos,
                value: v.clone(),
            },
            node,
        ),
        (Shape::Seq(items), Value::Seq(nodes)) => {
            items.len() == nodes.len() && items.iter().zip(nodes).all(|(s, n)| shape_matches(s, n))
        }
        (Shape::Map(entries), Value::Map(nodes)) => {
            entries.len() == nodes.len()
                && entries
                    .iter()
                    .zip(nodes)
                    .all(|((k, v), (l, w))| shape_matches(k, l) && shape_matches(v, w))
        }
        _ => false,
    }
}

/// Where a scalar goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A block mapping's value or a block sequence's item.
    Value,
    /// A block mapping's key.
    Key,
    /// Inside a flow collection.
    Flow,
    /// A document of its own.
    Root,
}

/// Whether `text` reads back as itself (or as what the core schema makes
/// of it) when written plain in `ctx`; conservative.
fn plain_safe(text: &str, ctx: Ctx) -> bool {
    if text.is_empty() {
        return ctx == Ctx::Value;
    }
    let b = text.as_bytes();
    if text.starts_with(' ')
        || text.ends_with(' ')
        || text.chars().any(char::is_control)
        || text.starts_with("---")
        || text.starts_with("...")
        || text.contains(": ")
        || text.ends_with(':')
        || text.contains(" #")
    {
        return false;
    }
    match b[0] {
        b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>' | b'\''
        | b'"' | b'%' | b'@' | b'`' => return false,
        b'-' | b'?' | b':' if b.len() == 1 || b[1] == b' ' => return false,
        _ => {}
    }
    !(ctx == Ctx::Flow && text.contains([',', '[', ']', '{', '}', ':']))
}

/// Texts in the fast path's subset: printable ASCII, no backslash or double
/// quote (which would need escapes in double quotes).
fn tame_text(text: &str) -> bool {
    text.bytes().all(|b| (b' '..=b'~').contains(&b))
}

const COMMENTS: [&str; 4] = ["# note", "#", "# a: 'b' - [c] {d} \"e\" #f", "#no-space"];

/// Renders random trees as YAML text.
struct Render {
    out: String,
    /// Only the subset the fast path is meant to take.
    tame: bool,
    /// Whether [`Render::stream`]'s shapes are what the text means (false
    /// once an unsafe scalar was written plain).
    exact: bool,
    /// A block scalar ended the last line: no deeper comment or
    /// whitespace-only line may follow.
    after_block_scalar: bool,
    /// Where the last block scalar's final line break is.
    block_scalar_end: usize,
}

impl Render {
    fn new(tame: bool) -> Self {
        Self {
            out: String::new(),
            tame,
            exact: true,
            after_block_scalar: false,
            block_scalar_end: 0,
        }
    }

    /// Ends the current line (if any) and starts one at `col`.
    fn nl(&mut self, col: usize) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
        self.spaces(col);
    }

    fn spaces(&mut self, n: usize) {
        self.out.extend(std::iter::repeat_n(' ', n));
    }

    fn end_line(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    /// Blank and comment lines before an entry at `col`.
    fn before(&mut self, bits: u32, col: usize) {
        let shallow = std::mem::take(&mut self.after_block_scalar);
        match (bits >> 16) & 7 {
            5 => {
                self.end_line();
                if !shallow {
                    self.spaces(((bits >> 19) & 3) as usize);
                }
                self.out.push('\n');
            }
            6 => {
                self.end_line();
                self.spaces(col);
                self.out.push_str(COMMENTS[((bits >> 19) & 3) as usize]);
                self.out.push('\n');
            }
            7 => {
                // A comment line at an odd column.
                self.end_line();
                let off = ((bits >> 19) & 3) as usize;
                self.spaces(if shallow || bits & (1 << 21) != 0 {
                    col.saturating_sub(off + 1)
                } else {
                    col + off + 1
                });
                self.out.push_str("# odd\n");
            }
            _ => {}
        }
    }

    /// An inline comment and trailing spaces after a value.
    fn after(&mut self, bits: u32) {
        if (bits >> 22) & 3 == 3 {
            self.out.push(' ');
            if bits & (1 << 24) != 0 {
                self.out.push_str("  ");
            }
            self.out.push_str(COMMENTS[((bits >> 19) & 3) as usize]);
        }
        if (bits >> 25) & 3 == 3 {
            self.spaces(1 + ((bits >> 19) & 1) as usize);
        }
    }

    fn scalar(&mut self, text: &str, bits: u32, ctx: Ctx) -> Shape {
        let text = if self.tame && !tame_text(text) {
            "x"
        } else {
            text
        };
        let safe = plain_safe(text, ctx);
        let q = bits & 15;
        // 0 plain if safe, 1 single, 2 double.
        let mut style = match q {
            15 if !self.tame => 0,
            4 | 5 | 12 => 1,
            6 | 7 | 13 => 2,
            _ if safe => 0,
            _ => 1 + (q & 1),
        };
        if self.tame && style == 2 && text.contains(['\\', '"']) {
            style = 1;
        }
        if self.tame && style == 0 && !safe {
            style = 1;
        }
        match style {
            0 => {
                if !safe {
                    self.exact = false;
                }
                self.out.push_str(text);
                Shape::Scalar(if text.is_empty() {
                    Value::Null
                } else {
                    plain(text)
                })
            }
            1 => {
                self.out.push('\'');
                self.out.push_str(&text.replace('\'', "''"));
                self.out.push('\'');
                Shape::Scalar(Value::Str(text.to_string()))
            }
            _ => {
                self.out.push('"');
                for c in text.chars() {
                    match c {
                        '"' => self.out.push_str("\\\""),
                        '\\' => self.out.push_str("\\\\"),
                        '\t' => self.out.push_str("\\t"),
                        c if c.is_control() => {
                            let _ = write!(self.out, "\\x{:02x}", c as u32);
                        }
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
                Shape::Scalar(Value::Str(text.to_string()))
            }
        }
    }

    fn key(&mut self, (i, bits): (usize, u32), ctx: Ctx) -> Shape {
        self.scalar(KEYS[i], bits, ctx)
    }

    /// A single-line flow rendering of `t`.
    fn flow(&mut self, t: &Tree) -> Shape {
        let bits = t.bits();
        // 0 `[a, b]`, 1 `[a,b]`, 2 `[ a , b ]`, 3 `[a, b,]`.
        let spacing = if self.tame { 0 } else { (bits >> 7) & 3 };
        let (sep, open_pad) = match spacing {
            1 => (",", ""),
            2 => (" , ", " "),
            _ => (", ", ""),
        };
        match t {
            Tree::Scalar(i, b) => self.scalar(SCALARS[*i], *b, Ctx::Flow),
            Tree::Seq(items, _) => {
                self.out.push('[');
                self.out.push_str(open_pad);
                let mut shapes = Vec::new();
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        self.out.push_str(sep);
                    }
                    shapes.push(self.flow(item));
                }
                if spacing == 3 && !items.is_empty() {
                    self.out.push(',');
                }
                self.out.push_str(open_pad);
                self.out.push(']');
                Shape::Seq(shapes)
            }
            Tree::Map(entries, _) => {
                self.out.push('{');
                self.out.push_str(open_pad);
                let mut shapes = Vec::new();
                for (n, (k, v)) in entries.iter().enumerate() {
                    if n > 0 {
                        self.out.push_str(sep);
                    }
                    let ks = self.key(*k, Ctx::Flow);
                    // JSON-like `"k":v` after a quoted key.
                    let quoted = self.out.ends_with(['\'', '"']);
                    self.out.push(':');
                    if !(spacing == 1 && quoted) {
                        self.out.push(' ');
                    }
                    shapes.push((ks, self.flow(v)));
                }
                if spacing == 3 && !entries.is_empty() {
                    self.out.push(',');
                }
                self.out.push_str(open_pad);
                self.out.push('}');
                Shape::Map(shapes)
            }
        }
    }

    /// Whether `t` is written in block style.
    fn is_block(&self, t: &Tree) -> bool {
        match t {
            Tree::Scalar(..) => false,
            Tree::Seq(items, b) => !items.is_empty() && b & 3 != 3,
            Tree::Map(entries, b) => !entries.is_empty() && b & 3 != 3,
        }
    }

    fn width(&self, bits: u32) -> usize {
        [2, 1, 3, 4][((bits >> 2) & 3) as usize]
    }

    /// A block mapping with its keys at `col`; `inline` when the cursor
    /// already stands at `col` (after a sequence's `- `).
    fn block_map(&mut self, entries: &[((usize, u32), Tree)], col: usize, inline: bool) -> Shape {
        let mut shapes = Vec::new();
        for (n, (k, v)) in entries.iter().enumerate() {
            if !(n == 0 && inline) {
                self.before(v.bits(), col);
                self.nl(col);
            }
            let ks = self.key(*k, Ctx::Key);
            let vb = v.bits();
            if !self.tame && (vb >> 27) & 7 == 7 {
                self.out.push(' ');
            }
            self.out.push(':');
            shapes.push((ks, self.value(v, col)));
        }
        Shape::Map(shapes)
    }

    /// The value of a block mapping entry whose key is at `col`.
    fn value(&mut self, v: &Tree, col: usize) -> Shape {
        let bits = v.bits();
        if self.is_block(v) {
            if (bits >> 9) & 3 == 3 {
                self.out.push_str(" # c");
            }
            let w = self.width(bits);
            return match v {
                Tree::Seq(items, _) => {
                    let indentless = (bits >> 4) & 1 == 1;
                    self.block_seq(items, if indentless { col } else { col + w }, false)
                }
                Tree::Map(entries, _) => self.block_map(entries, col + w, false),
                Tree::Scalar(..) => unreachable!(),
            };
        }
        let empty = matches!(v, Tree::Scalar(i, b) if SCALARS[*i].is_empty() && b & 15 < 4);
        let next_line = !self.tame && !empty && (bits >> 11) & 7 == 7;
        if next_line {
            // On the next line, more indented.
            self.nl(col + self.width(bits));
        } else if !empty {
            self.out.push(' ');
            if !self.tame && (bits >> 14) & 3 == 3 {
                self.spaces(2);
            }
        }
        let (shape, more) = match v {
            Tree::Scalar(i, b) if !next_line => {
                self.block_scalar(SCALARS[*i], *b, col + self.width(bits))
            }
            _ => (self.inline_value(v, Ctx::Value), true),
        };
        if more {
            self.after(bits);
        }
        shape
    }

    /// A scalar in block context whose continuation lines go at `cont`:
    /// now and then (never in tame renderings) a block scalar, a scalar
    /// over two lines, an anchor or a tag. `false` when nothing may follow
    /// on its (last) line.
    fn block_scalar(&mut self, text: &str, bits: u32, cont: usize) -> (Shape, bool) {
        if self.tame {
            return (self.scalar(text, bits, Ctx::Value), true);
        }
        let space = |out: &mut String| {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        };
        match (bits >> 28) & 15 {
            15 if !text.is_empty() && plain_safe(text, Ctx::Value) => {
                let (header, clip) = [("|-", false), ("|", true), (">-", false), (">", true)]
                    [((bits >> 26) & 3) as usize];
                space(&mut self.out);
                self.out.push_str(header);
                self.out.push('\n');
                self.spaces(cont);
                self.out.push_str(text);
                self.out.push('\n');
                self.after_block_scalar = true;
                self.block_scalar_end = self.out.len();
                let mut value = text.to_string();
                if clip {
                    value.push('\n');
                }
                (Shape::Scalar(Value::Str(value)), false)
            }
            14 => {
                // Folded over two lines at an inner space.
                let start = self.out.len();
                let shape = self.scalar(text, bits, Ctx::Value);
                let written = self.out[start..].as_bytes();
                if let Some(k) = (1..written.len().saturating_sub(1)).find(|&k| {
                    written[k] == b' ' && written[k - 1] != b' ' && written[k + 1] != b' '
                }) {
                    let fold = format!("\n{}", " ".repeat(cont));
                    self.out.replace_range(start + k..start + k + 1, &fold);
                }
                (shape, true)
            }
            13 => {
                space(&mut self.out);
                self.out.push_str("&a ");
                (self.scalar(text, bits, Ctx::Value), true)
            }
            12 if !text.is_empty() => {
                space(&mut self.out);
                self.out.push_str("!!str ");
                self.scalar(text, bits, Ctx::Value);
                (Shape::Scalar(Value::Str(text.to_string())), true)
            }
            _ => (self.scalar(text, bits, Ctx::Value), true),
        }
    }

    /// A scalar or a flow collection.
    fn inline_value(&mut self, v: &Tree, ctx: Ctx) -> Shape {
        match v {
            Tree::Scalar(i, b) => self.scalar(SCALARS[*i], *b, ctx),
            _ => self.flow(v),
        }
    }

    /// A block sequence with its dashes at `col`.
    fn block_seq(&mut self, items: &[Tree], col: usize, inline: bool) -> Shape {
        let mut shapes = Vec::new();
        for (n, item) in items.iter().enumerate() {
            let bits = item.bits();
            if !(n == 0 && inline) {
                self.before(bits, col);
                self.nl(col);
            }
            self.out.push('-');
            let d = [1, 1, 2, 3][((bits >> 5) & 3) as usize];
            let compact = (bits >> 4) & 1 == 0;
            let w = self.width(bits);
            let shape = match item {
                Tree::Seq(inner, _) if self.is_block(item) => {
                    if compact && !self.tame {
                        self.spaces(d);
                        self.block_seq(inner, col + 1 + d, true)
                    } else {
                        if (bits >> 9) & 3 == 3 {
                            self.out.push_str(" # c");
                        }
                        self.block_seq(inner, col + w, false)
                    }
                }
                Tree::Map(entries, _) if self.is_block(item) => {
                    if compact {
                        self.spaces(d);
                        self.block_map(entries, col + 1 + d, true)
                    } else {
                        if (bits >> 9) & 3 == 3 {
                            self.out.push_str(" # c");
                        }
                        self.block_map(entries, col + w, false)
                    }
                }
                _ => {
                    let empty =
                        matches!(item, Tree::Scalar(i, b) if SCALARS[*i].is_empty() && b & 15 < 4);
                    if !empty {
                        self.spaces(d);
                    }
                    let (shape, more) = match item {
                        Tree::Scalar(i, b) => self.block_scalar(SCALARS[*i], *b, col + 1 + d),
                        _ => (self.inline_value(item, Ctx::Value), true),
                    };
                    if more {
                        self.after(bits);
                    }
                    shape
                }
            };
            shapes.push(shape);
        }
        Shape::Seq(shapes)
    }

    /// A document's root; `marker` when the cursor stands after `---`.
    fn root(&mut self, t: &Tree, bits: u32, marker: bool) -> Shape {
        let col = if !self.tame && (bits >> 6) & 7 == 7 {
            1 + ((bits >> 9) & 1) as usize
        } else {
            0
        };
        if self.is_block(t) {
            return match t {
                Tree::Map(entries, _) => self.block_map(entries, col, false),
                Tree::Seq(items, _) => self.block_seq(items, col, false),
                Tree::Scalar(..) => unreachable!(),
            };
        }
        if marker && !self.tame && (bits >> 4) & 3 == 3 {
            // `--- value`
            self.out.push(' ');
        } else {
            self.nl(col);
        }
        let shape = self.inline_value(t, Ctx::Root);
        self.after(t.bits());
        shape
    }

    /// The stream's text and its non-empty documents' shapes.
    fn stream(mut self, s: &Stream) -> (String, Vec<Shape>, bool) {
        let mut shapes = Vec::new();
        for (n, (doc, bits)) in s.docs.iter().enumerate() {
            self.before(*bits, 0);
            let marker = n > 0 || s.bits & 1 == 1;
            if n > 0 && !self.tame && (bits >> 12) & 7 == 7 {
                self.nl(0);
                self.out.push_str("...");
            }
            if marker {
                self.nl(0);
                self.out.push_str("---");
                if (bits >> 14) & 3 == 3 {
                    self.out.push_str(" # doc");
                }
            }
            if let Some(t) = doc {
                let marker = marker && (bits >> 14) & 3 != 3;
                let shape = self.root(t, *bits, marker);
                if !matches!(shape, Shape::Scalar(Value::Null)) {
                    shapes.push(shape);
                }
            }
        }
        self.before(s.bits >> 1, 0);
        if s.bits & (1 << 8) == 0 {
            self.end_line();
        } else if self.out.ends_with('\n') && self.out.len() != self.block_scalar_end {
            self.out.pop();
        }
        if !self.tame && (s.bits >> 9) & 15 == 15 {
            self.out = self.out.replace('\n', "\r\n");
        }
        (self.out, shapes, self.exact)
    }
}

fn render(s: &Stream, tame: bool) -> (String, Vec<Shape>, bool) {
    Render::new(tame).stream(s)
}

/// One random edit of a text.
#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, usize),
    Delete(usize),
    Replace(usize, usize),
    DuplicateLine(usize),
    DeleteLine(usize),
    SwapLines(usize),
    Indent(usize, i8),
}

/// Characters that mean something to YAML, and a few that do not.
const EDIT_CHARS: &[char] = &[
    ' ', ' ', '\n', '-', ':', '#', ',', '[', ']', '{', '}', '\'', '"', '&', '*', '!', '|', '>',
    '%', '@', '?', '\t', '\r', '\\', '.', 'a', 'z', '0', '1', 'e', 'x',
];

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>();
    prop_oneof![
        3 => (at, 0..EDIT_CHARS.len()).prop_map(|(p, c)| Edit::Insert(p, c)),
        2 => at.prop_map(Edit::Delete),
        3 => (at, 0..EDIT_CHARS.len()).prop_map(|(p, c)| Edit::Replace(p, c)),
        1 => at.prop_map(Edit::DuplicateLine),
        1 => at.prop_map(Edit::DeleteLine),
        1 => at.prop_map(Edit::SwapLines),
        2 => (at, prop_oneof![Just(-2i8), Just(-1), Just(1), Just(2)])
            .prop_map(|(p, d)| Edit::Indent(p, d)),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let n = lines.len();
    match *edit {
        Edit::Insert(p, c) => {
            chars.insert(p % (chars.len() + 1), EDIT_CHARS[c]);
            return chars.into_iter().collect();
        }
        Edit::Delete(p) | Edit::Replace(p, _) if chars.is_empty() => {
            let _ = p;
            return String::new();
        }
        Edit::Delete(p) => {
            chars.remove(p % chars.len());
            return chars.into_iter().collect();
        }
        Edit::Replace(p, c) => {
            let len = chars.len();
            chars[p % len] = EDIT_CHARS[c];
            return chars.into_iter().collect();
        }
        Edit::DuplicateLine(p) => {
            let line = lines[p % n].clone();
            lines.insert(p % n, line);
        }
        Edit::DeleteLine(p) => {
            lines.remove(p % n);
        }
        Edit::SwapLines(p) => {
            if n > 1 {
                lines.swap(p % (n - 1), p % (n - 1) + 1);
            }
        }
        Edit::Indent(p, d) => {
            let line = &mut lines[p % n];
            if d > 0 {
                line.insert_str(0, &" ".repeat(d as usize));
            } else {
                let strip = line
                    .bytes()
                    .take(d.unsigned_abs() as usize)
                    .take_while(|&b| b == b' ')
                    .count();
                line.drain(..strip);
            }
        }
    }
    lines.join("\n")
}

// ---------------------------------------------------------------------------
// Running properties

fn cases() -> u32 {
    std::env::var("GITFLEET_YAML_FAST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Runs `test` on `cases()` values of `strategy`, shrinking a failure;
/// prints how many texts the fast path took.
fn property<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Outcome) {
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    };
    let taken = AtomicUsize::new(0);
    let declined = AtomicUsize::new(0);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |value| {
        match test(value) {
            Outcome::Taken => taken.fetch_add(1, Ordering::Relaxed),
            Outcome::Declined => declined.fetch_add(1, Ordering::Relaxed),
        };
        Ok(())
    });
    if let Err(err) = result {
        panic!("{name}: {err}");
    }
    eprintln!(
        "{name}: {} texts, {} taken by the fast path, {} declined",
        taken.load(Ordering::Relaxed) + declined.load(Ordering::Relaxed),
        taken.load(Ordering::Relaxed),
        declined.load(Ordering::Relaxed)
    );
}

#[test]
fn random_renderings_agree() {
    property("renderings", stream(), |s| check(&render(&s, false).0));
}

#[test]
fn random_edits_of_renderings_agree() {
    property(
        "edits",
        (stream(), any::<bool>(), vec(edit(), 1..=3)),
        |(s, tame, edits)| {
            let mut text = render(&s, tame).0;
            for e in &edits {
                text = apply(&text, e);
            }
            check(&text)
        },
    );
}

/// The renderer writes what it means: otherwise the properties above would
/// test less than they seem to.
#[test]
fn renderings_mean_their_trees() {
    property("meaning", (stream(), any::<bool>()), |(s, tame)| {
        let (text, shapes, exact) = render(&s, tame);
        if exact {
            let docs = general(&text)
                .unwrap_or_else(|e| panic!("{text:?} does not parse: {e:?} at {:?}", e.pos));
            assert!(
                docs.len() == shapes.len()
                    && shapes.iter().zip(&docs).all(|(s, d)| shape_matches(s, d)),
                "{text:?} means {}, not {shapes:?}",
                show_docs(&docs)
            );
        }
        check(&text)
    });
}

#[test]
#[ignore = "until the fast path lands"]
fn tame_renderings_take_the_fast_path() {
    property("tame", stream(), |s| {
        let (text, _, _) = render(&s, true);
        check_taken(&text);
        Outcome::Taken
    });
}

// ---------------------------------------------------------------------------
// The repository's YAML files

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn yaml_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                yaml_files(&path, found);
            }
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            found.push(path);
        }
    }
}

#[test]
fn every_yaml_file_of_the_repository_agrees() {
    let mut files = Vec::new();
    yaml_files(&repository(), &mut files);
    assert!(files.len() > 300, "only {} YAML files found", files.len());
    let mut taken = 0;
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue; // not UTF-8: never reaches the YAML parsers
        };
        if check(&text) == Outcome::Taken {
            taken += 1;
        }
    }
    eprintln!(
        "repository: {} YAML files, {taken} taken by the fast path",
        files.len()
    );
}

#[test]
#[ignore = "until the fast path lands"]
fn the_example_fleet_takes_the_fast_path() {
    let mut files = Vec::new();
    yaml_files(&repository().join("examples/fleet"), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    let declined: Vec<_> = files
        .iter()
        .filter(|path| check(&std::fs::read_to_string(path).unwrap()) == Outcome::Declined)
        .collect();
    assert!(declined.is_empty(), "declined: {declined:?}");
}

/// Documents as `gitfleet-sim` generates them for the benchmarks.
fn generated_fleet() -> Vec<String> {
    let h = "apiVersion: gitfleet/v1\n";
    let mut pools = String::new();
    for (p, model, nvlink) in [(0, "H100-SXM-80GB", "full"), (3, "A100-SXM4-80GB", "pairs")] {
        let _ = write!(
            pools,
            "{h}kind: NodePool\nmetadata: {{name: pool-{p}}}\nspec:\n  gpu: {{model: {model}, count: 8}}\n  nvlink: {nvlink}\n  size: {{min: 1000, max: 1000}}\n  nodesPerRack: 8\n  labels: {{zone: a}}\n---\n"
        );
    }
    let quota = "\n    - {model: H100-SXM-80GB, guaranteed: 750, limit: 1125}\n    - {model: A100-SXM4-80GB, guaranteed: 250, limit: 375}";
    let queues = format!(
        "{h}kind: Queue\nmetadata: {{name: org}}\nspec:\n  quota:{quota}\n---\n\
         {h}kind: Queue\nmetadata: {{name: dept-0}}\nspec:\n  parent: org\n  weight: 1\n  quota:{quota}\n---\n\
         {h}kind: Queue\nmetadata: {{name: team-0-0}}\nspec:\n  parent: dept-0\n  weight: 2\n  quota:{quota}\n---\n"
    );
    let classes = format!(
        "{h}kind: PriorityClass\nmetadata: {{name: normal}}\nspec: {{value: 100, preemptible: true, gracePeriod: 5m, default: true}}\n---\n"
    );
    let mut jobs = String::new();
    for i in 0..20 {
        let _ = write!(
            jobs,
            "{h}kind: Job\nmetadata: {{name: job-{i}}}\nspec:\n  queue: team-0-{}\n  priorityClass: normal\n  replicas: {}\n  gpusPerReplica: {}\n",
            i % 10,
            1 + i % 3,
            [1, 2, 4, 8][i % 4]
        );
        if i % 2 == 0 {
            jobs.push_str("  gpu: {models: [H100-SXM-80GB]}\n");
        }
        if i % 3 == 0 {
            jobs.push_str("  topology: {required: rack}\n");
        }
        if i % 5 != 4 {
            let _ = writeln!(jobs, "  timeLimit: {}h", 1 + i * 3);
        }
        jobs.push_str("  command: [python, train.py]\n---\n");
    }
    vec![pools, queues, classes, jobs]
}

#[test]
#[ignore = "until the fast path lands"]
fn generated_fleets_take_the_fast_path() {
    check_taken(
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: job-1}\nspec:\n  queue: team-0-0\n  priorityClass: normal\n  replicas: 1\n  gpusPerReplica: 1\n  gpu: {models: [H100-SXM-80GB]}\n  timeLimit: 29h\n  command: [python, train.py]\n---\n",
    );
    for text in generated_fleet() {
        check_taken(&text);
    }
}

/// The shapes of `benches/yaml.rs` that are in the fast path's subset.
#[test]
#[ignore = "until the fast path lands"]
fn bench_shapes_take_the_fast_path() {
    let n = 50;
    let mut labels =
        String::from("apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: q\n  labels:\n");
    let mut foreign = String::new();
    let mut flow = String::from("data: {");
    let mut long = String::new();
    let mut seq = String::from("items:\n");
    let mut observed = String::from("time: 2026-11-21T10:00:00Z\nnodes:\n");
    let mut docs = String::new();
    for i in 0..n {
        let _ = writeln!(labels, "    k{i}: v");
        let _ = writeln!(foreign, "key-{i}: value {i}");
        let _ = write!(flow, "k{i}: v, ");
        let _ = writeln!(long, "k{i}: {}", "x".repeat(200));
        let _ = writeln!(seq, "  - item {i}");
        let _ = writeln!(
            observed,
            "  - {{name: n{i}, pool: p, gpus: [{{index: 0, model: H100}}]}}"
        );
        let _ = write!(
            docs,
            "---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: q{i}}}\nspec: {{}}\n"
        );
    }
    labels.push_str("spec: {}\n");
    flow.push_str("}\n");
    observed.push_str("running: []\n");
    for text in [labels, foreign, flow, long, seq, observed, docs] {
        check_taken(&text);
    }
}

// ---------------------------------------------------------------------------
// Tricky texts

#[test]
fn empty_values_and_documents() {
    check("");
    check("\n");
    check("k:");
    check("k:\n");
    check("k:   \n");
    check("k: # c\n");
    check("a:\nb:\n");
    check("a:\n  \nb: 1\n");
    check("- \n-\n- x\n");
    check("k: ~\nj: null\n");
    check("---\n");
    check("---\n---\n");
    check("--- \n---\na: 1\n");
    check("# only a comment\n");
    check("a: 1\n---\n# empty\n---\nb: 2\n");
    check("~\n");
    check("null\n---\na: 1\n");
    check("k: ''\nj: \"\"\n");
    check("{}\n");
    check("[]\n");
    check("k: {}\nj: []\n");
}

#[test]
fn positions_of_empty_values() {
    check("a:\nb: 1\n");
    check("a:\n\n\nb: 1\n");
    check("a:   \n  \nb: 1\n");
    check("a:\n  # c\nb: 1\n");
    check("a:   # c\n\n  \nb:");
    check("a:\n  b:\nc:\n");
    check("a:\n  b:\n    c:\n");
    check("a:\n  b:\n");
    check("a:\n  b:");
    check("a:");
    check("a: ");
    check("a:\n---\nb:\n");
    check("a:\n...\n");
    check("- a:\n- b:\n");
    check("- a:\n  b:\n");
    check("-\n-\n");
    check("- \n  # c\n- x\n");
    check("-\n\n-\n");
    check("-");
    check("- ");
    check("k:\n- \n-\n");
    check("k:\n  -\n  -");
    check("k: ~\nj: null\nl: Null\n");
    check("k: {a: }\n");
    check("- # c\n- # d\n");
    check("? a\n");
}

#[test]
fn nesting_beyond_the_general_parsers_limit() {
    let deep_flow = "[".repeat(300) + &"]".repeat(300);
    check(&deep_flow);
    check(&format!("k: {deep_flow}\n"));
    let deep_map = "{a: ".repeat(300) + "1" + &"}".repeat(300);
    check(&deep_map);
    let mut deep_block = String::new();
    for depth in 0..300 {
        deep_block.push_str(&" ".repeat(depth));
        deep_block.push_str("a:\n");
    }
    check(&deep_block);
    let mut deep_seq = String::new();
    for depth in 0..300 {
        deep_seq.push_str(&" ".repeat(depth));
        deep_seq.push_str("-\n");
    }
    check(&deep_seq);
    check(&("- ".repeat(300) + "x\n"));
    let mut at_limit = String::new();
    for depth in 0..255 {
        at_limit.push_str(&" ".repeat(depth));
        at_limit.push_str("a:\n");
    }
    check(&at_limit);
    check(&("[".repeat(256) + &"]".repeat(256)));
    check(&("[".repeat(257) + &"]".repeat(257)));
}

#[test]
fn block_sequences() {
    check("k:\n- a\n- b\nj: 1\n");
    check("k:\n  - a\n  - b\nj: 1\n");
    check("k:\n    - a\n    - b\n");
    check("- a: 1\n  b: 2\n- c: 3\n");
    check("- a: 1\n  b:\n  - x\n");
    check("- a: 1\n  b:\n    c: 2\n");
    check("-   a: 1\n    b: 2\n");
    check("- a: 1\n   b: 2\n");
    check("- a: 1\n b: 2\n");
    check("-\n  a: 1\n  b: 2\n");
    check("- - a\n  - b\n- c\n");
    check("-\n  - a\n");
    check("- [a, b]\n- {c: d}\n");
    check("- x\n-\n- y\n");
    check("k:\n- a\n  - b\n");
    check("k:\n- a\n -b\n");
    check("k:\n - a\n- b\n");
    check("- a\nk: v\n");
    check("-a\n");
    check("- -1\n- -x\n- --y\n");
    check("k: - a\n");
    check(
        "spec:\n  quota:\n    - {model: H100, guaranteed: 8}\n    - {model: A100, guaranteed: 4}\n",
    );
}

#[test]
fn block_mappings() {
    check("a: 1\nb: 2\n");
    check("a:\n  b: 1\n  c: 2\nd: 3\n");
    check("a:\n b:\n  c: 1\n");
    check("a:\n    b: 1\n    c: 2\n");
    check("a:\n  b: 1\n   c: 2\n");
    check("a:\n  b: 1\n c: 2\n");
    check("a: 1\n b: 2\n");
    check("  a: 1\n  b: 2\n");
    check("  a: 1\nb: 2\n");
    check("a:\n  v\n");
    check("a:\n    v\nb: 1\n");
    check("a:\nv\n");
    check("a:\n  'v'\n");
    check("a:\n  [v]\n");
    check("a :1\n");
    check("a : 1\n");
    check("a:1\n");
    check("a:  1\n");
    check("a: 1 \nb: 2   \n");
    check("a: b: c\n");
    check("a: b:\n");
    check("a: 'b': c\n");
    check("'a': 1\n\"b\": 2\n");
    check("'a b': 1\n\"c\\\"d\": 2\n");
    check("1: a\ntrue: b\nnull: c\n~: d\n0x1f: e\n1.5: f\n");
    check("a b: 1\nx.y/z: 2\nb-c: 3\nk_2: 4\n");
    check("-k: 1\n?k: 2\n:k: 3\n");
    check("? a\n: 1\n");
    check("? [a]\n: 1\n");
    check("[a]: 1\n");
    check("{a: 1}: 2\n");
    check("a: 1\na: 2\n");
    check("a: 1\nb:\n  c: 1\n  c: 2\n");
    check("1: a\n01: b\n");
    check("k: v # c\nj: w\n");
    check("k: v #c\n");
    check("k: v#c\n");
    check("k: 'v' # c\n");
    check("k: 'v'# c\n");
    check("k: \"v\"#c\n");
    check("k: [a] # c\n");
    check("k: {a: b} # c\n");
    check("k: [a]# c\n");
    check("k: 'v' x\n");
    check("k: [a] x\n");
    check("k: {a: b}, c\n");
}

#[test]
fn comments_and_blank_lines() {
    check("# c\na: 1\n# c\nb: 2\n# c\n");
    check("a:\n  # c\n  b: 1\n");
    check("a:\n# c\n  b: 1\n");
    check("a:\n      # c\n  b: 1\n");
    check("a:\n  b: 1\n# c\n  c: 2\n");
    check("a:\n  b: 1\n\n\n  c: 2\n");
    check("a:\n  b: 1\n   \n  c: 2\n");
    check("- a\n  # c\n- b\n");
    check("- # c\n  a: 1\n");
    check("a: # c\n  b: 1\n");
    check("a: # c\n- b\n");
    check("a: 1 # c: d\n");
    check("a: 1 #\n");
    check("#\n#\n");
    check("   # indented comment\na: 1\n");
    check("a: 1\n   # trailing indented comment");
    check("a: 1 # no newline");
}

#[test]
fn scalars() {
    check("v: 12\nw: -3\nx: +1\ny: 007\nz: 0x1f\n");
    check("v: 0o17\nw: 0x\nx: 1_000\ny: 0b101\n");
    check("v: 9223372036854775807\nw: 9223372036854775808\nx: -9223372036854775809\n");
    check("v: 1e3\nw: .5\nx: -0.0\ny: +.5\nz: 1.\n");
    check("v: 1e\nw: e3\nx: 6.02e+23\ny: 1E-3\n");
    check("v: .inf\nw: -.Inf\nx: .nan\ny: +.INF\nz: .NaN\n");
    check("v: true\nw: True\nx: FALSE\ny: yes\nz: no\n");
    check("v: ~\nw: null\nx: Null\ny: NULL\nz: nULL\n");
    check("v: 1h30m\nw: 1.2.3\nx: 12:30\ny: 2026-11-21T10:00:00Z\n");
    check("v: -x\nw: :a\nx: a:b\ny: ?q\nz: --nnodes=2\n");
    check("v: a b\nw: a  b\nx: a#b\ny: http://x\nz: H100-SXM-80GB\n");
    check("v: 'it''s'\nw: \"say \\\"hi\\\"\"\nx: 'back\\slash'\ny: \"back\\\\slash\"\n");
    check("v: ''''\nw: \"\\\\\"\nx: '\"'\ny: \"'\"\n");
    check("v: \"\\t\\n\\x41\\u00e9\\/\"\n");
    check("v: \"a\\\n  b\"\n");
    check("v: 'a\tb'\nw: \"a\tb\"\n");
    check("v: a\tb\n");
    check("v: '[x]'\nw: '{y}'\nx: 'a, b'\ny: 'a: b'\nz: '#z'\n");
    check("v: !t x\n");
    check("v: !!str 12\nw: !!int \"12\"\nx: !!float 1\ny: !!null ''\nz: !!bool true\n");
    check("v: !!str\n");
    check("v: !<tag:yaml.org,2002:str> 12\n");
    check("v: %p\n");
    check("v: @at\n");
    check("v: `tick\n");
    check("v: |\n  a\n  b\n");
    check("v: >\n  a\n  b\n");
    check("v: |-\n  a\nw: >+\n  b\n\n");
    check("v: |2\n    a\n");
    check("v: a\n  b\n");
    check("v: a\n\n  b\n");
    check("- a\n  b\n");
    check("v: 'a\n  b'\n");
    check("v: \"a\n  b\"\n");
    check("v: 'unterminated\n");
    check("v: \"unterminated\n");
    check("v: 'a'b'\n");
    check("v: 'a' 'b'\n");
    check("v: x\n  # c\n");
    check("v: ---\nw: ...\n");
    check("---x\n");
    check("...x\n");
    check("v: \"\\q\"\n");
    check("v: \"\\x4\"\n");
    check("12\n");
    check("'x'\n");
    check("plain text\n");
}

#[test]
fn flow_collections() {
    check("k: [a, b, c]\n");
    check("k: [a,b,c]\n");
    check("k: [ a , b ]\n");
    check("k: [a, b,]\n");
    check("k: [a, , b]\n");
    check("k: [,]\n");
    check("k: [a b, c]\n");
    check("k: [[a, [b]], {c: [d, {e: f}]}]\n");
    check("k: {a: 1, b: [2, 3], c: {d: e}}\n");
    check("k: {a: 1,b: 2}\n");
    check("k: {a:1}\n");
    check("k: {\"a\":1}\n");
    check("k: {'a':1}\n");
    check("k: {a}\n");
    check("k: {a, b: 1}\n");
    check("k: {a: }\n");
    check("k: {a: , b: 1}\n");
    check("k: {: a}\n");
    check("k: [a: 1]\n");
    check("k: [a: 1, b]\n");
    check("k: [? a : 1]\n");
    check("k: {a: 1, a: 2}\n");
    check("k: {[a]: 1}\n");
    check("k: ['a', \"b\", 'c''d']\n");
    check("k: [-1, -x, .5, ~, null, true, '']\n");
    check("k: [a\n  , b]\n");
    check("k: [a,\n  b]\n");
    check("k: {a: 1,\n  b: 2}\n");
    check("k: [a, b\n");
    check("k: [a, b]]\n");
    check("k: {a: b}}\n");
    check("k: [a #b, c]\n");
    check("k: [a, b] # [c]\n");
    check("[a, b]\n");
    check("{a: 1}\n");
    check("- [a, b]\n  c: d\n");
    check("k: [http://x, a:b]\n");
    check("k: [a:b]\n");
    check("k: {a:b: c}\n");
    check("k: [*a]\n");
    check("k: [&a x, *a]\n");
    check("k: []\nj: [ ]\nl: {}\nm: { }\n");
    check("data: {k0: v, k1: v, }\n");
}

#[test]
fn documents_and_markers() {
    check("a: 1\n---\nb: 2\n");
    check("---\na: 1\n---\nb: 2\n");
    check("--- # c\na: 1\n");
    check("--- a\n");
    check("--- [a, b]\n");
    check("--- {a: 1}\n");
    check("--- 'x'\n");
    check("--- a: 1\n");
    check("--- - a\n");
    check("---a: 1\n");
    check(" ---\na: 1\n");
    check("a: 1\n...\n");
    check("a: 1\n...\n---\nb: 2\n");
    check("a: 1\n... # c\n");
    check("...\n");
    check("a: 1\n---\n");
    check("a: 1\n---");
    check("a: 1\n--- \n");
    check("%YAML 1.2\n---\na: 1\n");
    check("%TAG ! tag:x,2000:\n---\na: 1\n");
    check("a: 1\n--- |\n  x\n");
    check("---\n- a\n---\n- b\n");
    check("a: 1\n----\n");
    check("a: 1\n---x\n");
}

#[test]
fn whitespace_and_encoding() {
    check("a: 1\r\nb: 2\r\n");
    check("a:\r\n  - x\r\n  - y\r\n");
    check("a: 1\rb: 2\r");
    check("a: 1\r\n");
    check("a: 'x'\r\n");
    check("\u{feff}a: 1\n");
    check("\u{feff}---\na: 1\n");
    check("a: 1\n\u{feff}b: 2\n");
    check("a: é\n");
    check("é: a\nb: 1\n");
    check("a: 'é'\nb: 1\n");
    check("a: \"é\"\nb: 1\n");
    check("a: [é, b]\n");
    check("# é\na: 1\n");
    check("a: 1 # é\nb: 2\n");
    check("a: \u{85}b\n");
    check("a: b\u{2028}c\n");
    check("a: \u{7f}\n");
    check("a: \u{1}\n");
    check("a:\t1\n");
    check("a: 1\t\nb: 2\n");
    check("a: 1\t# c\n");
    check("a:\n\tb: 1\n");
    check("\ta: 1\n");
    check("- \ta\n");
    check("-\ta\n");
    check("a: [\ta]\n");
    check("a: 1\n\t\nb: 2\n");
    check("a: 1\n  \t\nb: 2\n");
    check("a: 1\n\n\n\n");
    check("\n\n\na: 1\n");
    check("a: 1   ");
    check("a: 1\n ");
}

#[test]
fn anchors_aliases_and_merges() {
    check("a: &x 1\nb: *x\n");
    check("a: &x {c: 1}\nb:\n  <<: *x\n  d: 2\n");
    check("a: &x [1, 2]\nb: *x\n");
    check("a: *x\n");
    check("&x a: 1\n");
    check("a: &x\n  b: 1\nc: *x\n");
    check("<<: {a: 1}\nb: 2\n");
    check("<<: x\n");
    check("a: &x 1\n---\nb: *x\n");
    check("a: & x\n");
    check("a: *\n");
    check("- &a\n- *a\n");
}

#[test]
fn fleet_documents() {
    for text in generated_fleet() {
        check(&text);
    }
    check(
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata:\n  name: ranker\n  labels: {team: training, workload: retraining}\n  annotations:\n    gitfleet/sim-duration: 45m\nspec:\n  queue: training\n  command: [\"torchrun\", \"--nnodes=2\", \"train.py\"]\n  env:\n    MLFLOW_EXPERIMENT: ranker-nightly\n",
    );
    check(
        "spec:\n  match:\n    kinds: [Job]\n  rules:\n    - expression: \"object.spec.replicas * object.spec.gpusPerReplica <= 64\"\n      message: \"at most 64 GPUs\"\n",
    );
    check(
        "spec:\n  gpu: {model: H100-SXM-80GB, count: 8}\n  nvlink: full            # all 8 GPUs in one NVLink domain\n  size: {min: 48, max: 48}\n",
    );
}

#[test]
fn edits_apply_where_they_say() {
    assert_eq!(apply("ab\ncd", &Edit::Insert(1, 3)), "a-b\ncd");
    assert_eq!(apply("ab\ncd", &Edit::Delete(2)), "abcd");
    assert_eq!(apply("ab\ncd", &Edit::Replace(6, 4)), "a:\ncd");
    assert_eq!(apply("ab\ncd", &Edit::DuplicateLine(1)), "ab\ncd\ncd");
    assert_eq!(apply("ab\ncd", &Edit::DeleteLine(0)), "cd");
    assert_eq!(apply("ab\ncd", &Edit::SwapLines(0)), "cd\nab");
    assert_eq!(apply("ab\n cd", &Edit::Indent(1, -2)), "ab\ncd");
    assert_eq!(apply("ab\ncd", &Edit::Indent(0, 2)), "  ab\ncd");
    assert_eq!(apply("", &Edit::Delete(3)), "");
}

#[test]
fn the_renderer_writes_the_plainest_style_at_zero_bits() {
    let at = |table: &[&str], text: &str| table.iter().position(|t| *t == text).unwrap();
    let (x, one, null) = (at(SCALARS, "x"), at(SCALARS, "1"), at(SCALARS, "null"));
    let t = Tree::Map(
        vec![
            ((at(KEYS, "a"), 0), Tree::Scalar(x, 0)),
            (
                (at(KEYS, "b"), 0),
                Tree::Seq(vec![Tree::Scalar(one, 0), Tree::Scalar(x, 0)], 0),
            ),
            (
                (at(KEYS, "b-c"), 0),
                Tree::Map(vec![((at(KEYS, "x.y/z"), 0), Tree::Scalar(null, 0))], 0),
            ),
        ],
        0,
    );
    let s = Stream {
        docs: vec![(Some(t.clone()), 0), (None, 0), (Some(t), 0)],
        bits: 0,
    };
    let (text, shapes, exact) = render(&s, false);
    assert_eq!(
        text,
        "a: x\nb:\n  - 1\n  - x\nb-c:\n  x.y/z: null\n---\n---\na: x\nb:\n  - 1\n  - x\nb-c:\n  x.y/z: null\n"
    );
    assert!(exact);
    assert_eq!(shapes.len(), 2);
}

#[test]
#[ignore = "prints sample renderings"]
fn print_samples() {
    use proptest::strategy::ValueTree;
    let mut runner = TestRunner::new(Config::default());
    for _ in 0..12 {
        let s = stream().new_tree(&mut runner).unwrap().current();
        let (text, _, exact) = render(&s, false);
        eprintln!("=== exact={exact}\n{text}");
    }
}
