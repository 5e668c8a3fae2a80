//! The fast YAML path (`yaml_fast`) against the general parser
//! (`yaml_parse`): whenever the fast path takes a text, the general parser
//! must accept it, build the same non-empty documents (values and every
//! position) and count as many nodes. Checked on random trees rendered in
//! many styles (tame renderings, within the fast path's documented subset,
//! must all be taken), on random edits of renderings, random line soups,
//! scalar texts and texts, on every YAML file of the repository and on
//! tables of tricky texts (`mismatches_found`: what differed once).
//! Cases per property: `GITFLEET_YAML_FAST_CASES` (default 5,000; the
//! module runs in about 3 s in a debug build).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::yaml::{MAX_FLEET_NODES, Node, NodeBudget, SyntaxError, Value};
use crate::yaml_fast::{documents, documents_counted, documents_counted_in};
use crate::yaml_parse::{build_documents_within, plain};

// ---------------------------------------------------------------------------
// The check

/// The general parser's non-empty documents of `text`.
fn general(text: &str) -> Result<Vec<Node>, SyntaxError> {
    general_counted(text).map(|(docs, _)| docs)
}

/// [`general`], and the nodes it took from its budget.
fn general_counted(text: &str) -> Result<(Vec<Node>, usize), SyntaxError> {
    let budget = NodeBudget::new(MAX_FLEET_NODES);
    let docs = build_documents_within(text, &budget)?;
    let docs = docs
        .into_iter()
        .filter(|doc| doc.value != Value::Null)
        .collect();
    Ok((docs, budget.used()))
}

/// Whether the fast path took a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Taken,
    Declined,
}

/// Panics unless the fast path declines `text` or builds exactly the
/// general parser's documents of it, counting the nodes as it does (the
/// fleet's node budget).
fn check(text: &str) -> Outcome {
    check_cuts(text);
    let Some((fast, fast_nodes)) = documents_counted(text) else {
        assert!(documents(text).is_none(), "{text:?}");
        return Outcome::Declined;
    };
    assert!(
        documents(text).is_some_and(|d| same_docs(&d, &fast)),
        "documents and documents_counted differ on {text:?}"
    );
    match general_counted(text) {
        Err(err) => panic!(
            "the fast path took a text the general parser rejects \
             ({}:{}: {})\ntext:    {text:?}\nfast:    {}",
            err.pos.line,
            err.pos.column,
            err.message,
            show_docs(&fast)
        ),
        Ok((expected, nodes)) => {
            if !same_docs(&fast, &expected) {
                panic!(
                    "the fast path and the general parser differ\ntext:    {text:?}\nfast:    {}\ngeneral: {}",
                    show_docs(&fast),
                    show_docs(&expected)
                );
            }
            assert_eq!(
                fast_nodes, nodes,
                "the fast path counts {fast_nodes} nodes, the general parser {nodes}, in {text:?}"
            );
        }
    }
    Outcome::Taken
}

/// Cuts compared with the whole text ([`check_cuts`]).
static CUTS_COMPARED: AtomicUsize = AtomicUsize::new(0);

/// Panics unless, cut at any document marker line (as a large file is
/// parsed in two halves, `halves`), the halves the fast path takes both
/// hold the general parser's documents of the whole text, counting as
/// many nodes.
fn check_cuts(text: &str) {
    let s = text.as_bytes();
    let (mut at, mut line) = (0, 1);
    let mut whole = None;
    while at < s.len() {
        let end = s[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(s.len(), |i| at + i);
        if at > 0 && crate::halves::is_marker(&s[at..end]) {
            let first = documents_counted_in(text, 0..at, 1);
            let second = documents_counted_in(text, at..s.len(), line);
            if let (Some((mut docs, first_nodes)), Some((rest, rest_nodes))) = (first, second) {
                docs.extend(rest);
                let (expected, nodes) = whole.get_or_insert_with(|| {
                    general_counted(text).unwrap_or_else(|err| {
                        panic!(
                            "halves cut at line {line} taken, the whole text rejected ({}:{}: {})\ntext: {text:?}",
                            err.pos.line, err.pos.column, err.message
                        )
                    })
                });
                assert!(
                    same_docs(&docs, expected),
                    "halves cut at line {line} differ from the whole\ntext:    {text:?}\nhalves:  {}\ngeneral: {}",
                    show_docs(&docs),
                    show_docs(expected)
                );
                assert_eq!(
                    first_nodes + rest_nodes,
                    *nodes,
                    "cut at line {line} of {text:?}"
                );
                CUTS_COMPARED.fetch_add(1, Ordering::Relaxed);
            }
        }
        at = end + 1;
        line += 1;
    }
}

#[test]
fn halves_cut_at_markers_hold_the_whole_texts_documents() {
    let texts = [
        "a: 1\n---\nb: 2\n",
        "---\na: 1\n---\n---\nb: [1, 2]\n",
        "a: |\n  x\n  y\n---\nb: >\n  z\n",
        "a: |-\n  x\n---   \nb: 'q'\n# c\n---\n\n",
        "- 1\n- 2\n---\n- k: v\n  l: w\n---\nc\n",
        "a:\n  b:\n    c: 1\n---\nd: \"e\"\n---",
        "a: b\n  c\n---\nd: e\n",
        "k: {a: 1, b: [x, y]}\n---\n# only a comment\n---\nk: 2\n",
        "a: |+\n  x\n\n---\nb: 1\n",
        "a: \"x\n---\ny\"\n",
    ];
    let before = CUTS_COMPARED.load(Ordering::Relaxed);
    for text in texts {
        check(text);
    }
    // Those the fast path takes on both sides (not the quoted scalar cut
    // in two, nor block scalars it leaves to the general parser).
    let compared = CUTS_COMPARED.load(Ordering::Relaxed) - before;
    assert!(compared >= 7, "{compared} cuts compared");
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
    "line\nbreak",
    "\n",
    "\t",
    "$x",
    "(a)",
    "<<",
    "=",
    "~x",
    "^",
    ";",
    "/x",
    "\\x",
    "+x",
    ".x",
    "_x",
    "a]b",
    "a}b",
    "x-",
    "a\"b",
    "a   b",
    "--x",
    "-- x",
    "--- x",
    "... x",
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
    "True",
    "NULL",
    "007",
    "1e3",
    "1.",
    "_",
    "x-",
    "a/",
    "0o17",
    "9223372036854775808",
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

/// Texts in the fast path's subset: printable ASCII, and tabs and line
/// breaks (which it takes as `\\t` and `\\n` in double quotes).
fn tame_text(text: &str) -> bool {
    text.bytes()
        .all(|b| (b' '..=b'~').contains(&b) || b == b'\t' || b == b'\n')
}

/// Keys in the fast path's subset: `[A-Za-z0-9_][A-Za-z0-9_./-]*`, plain.
fn tame_key(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"_./-".contains(&b))
}

/// Plain scalars the fast path takes (beyond [`plain_safe`]): none starting
/// with `?`, none with `#` in a flow collection.
fn tame_plain(text: &str, ctx: Ctx) -> bool {
    !(text.starts_with('?') || ctx == Ctx::Flow && text.contains('#'))
}

/// Comments of renderings; beyond ASCII too (the fast path takes any
/// printable character in a comment).
const COMMENTS: [&str; 4] = [
    "# note é",
    "#",
    "# a: 'b' - [c] {d} \"e\" #f × 日本",
    "#no-space",
];

/// What renderings may use beyond the fast path's subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feature {
    /// Non-ASCII texts and tabs in quoted scalars.
    Texts,
    /// Unsafe scalars written plain anyway.
    ForcedPlain,
    /// Plain scalars starting with `?`, `#` inside flow ones.
    PlainEdges,
    /// Quoted and odd keys, `k : v`.
    Keys,
    /// `[a, b,]` and `{"k":v}`.
    FlowEdges,
    /// `k:\n  v`.
    NextLine,
    /// `|`, `>`, scalars over two lines, anchors and tags.
    BlockScalars,
    /// `- - a`, `-\n  - a`, `-\n  k: v`, empty items.
    SeqItems,
    /// Scalar and flow roots, `--- value`.
    Roots,
    /// `...`, `--- # c`.
    Markers,
    /// `\r\n` line ends.
    Crlf,
}

const FEATURES: [Feature; 11] = [
    Feature::Texts,
    Feature::ForcedPlain,
    Feature::PlainEdges,
    Feature::Keys,
    Feature::FlowEdges,
    Feature::NextLine,
    Feature::BlockScalars,
    Feature::SeqItems,
    Feature::Roots,
    Feature::Markers,
    Feature::Crlf,
];

/// How far renderings stray from the fast path's subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Within the subset.
    Tame,
    /// Within it but for one feature.
    Mild(Feature),
    /// Anything.
    Wild,
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::Tame),
        proptest::sample::select(&FEATURES[..]).prop_map(Mode::Mild),
        Just(Mode::Wild),
    ]
}

/// Renders random trees as YAML text.
struct Render {
    out: String,
    mode: Mode,
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
    fn new(mode: Mode) -> Self {
        Self {
            out: String::new(),
            mode,
            exact: true,
            after_block_scalar: false,
            block_scalar_end: 0,
        }
    }

    /// `text`, or `x` where its characters are beyond the subset.
    fn text<'a>(&self, text: &'a str) -> &'a str {
        if !self.wild(Feature::Texts) && !tame_text(text) {
            "x"
        } else {
            text
        }
    }

    /// Whether `feature` may be used.
    fn wild(&self, feature: Feature) -> bool {
        match self.mode {
            Mode::Tame => false,
            Mode::Mild(f) => f == feature,
            Mode::Wild => true,
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
        let text = self.text(text);
        let safe =
            plain_safe(text, ctx) && (self.wild(Feature::PlainEdges) || tame_plain(text, ctx));
        let q = bits & 15;
        // 0 plain if safe, 1 single, 2 double.
        let mut style = match q {
            15 if self.wild(Feature::ForcedPlain) => 0,
            4 | 5 | 12 => 1,
            6 | 7 | 13 => 2,
            _ if safe => 0,
            _ => 1 + (q & 1),
        };
        if !self.wild(Feature::ForcedPlain) && style == 0 && !safe {
            style = 1;
        }
        // A line break only as `\n`; a tab only as `\t` unless wild.
        if style == 1 && (text.contains('\n') || !self.wild(Feature::Texts) && text.contains('\t'))
        {
            style = 2;
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
                        '\n' => self.out.push_str("\\n"),
                        '/' if bits & (1 << 8) != 0 => self.out.push_str("\\/"),
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
        if !self.wild(Feature::Keys) {
            // Plain keys of the subset only.
            let text = if tame_key(KEYS[i]) { KEYS[i] } else { "k" };
            self.out.push_str(text);
            return Shape::Scalar(plain(text));
        }
        self.scalar(KEYS[i], bits, ctx)
    }

    /// A single-line flow rendering of `t`.
    fn flow(&mut self, t: &Tree) -> Shape {
        let bits = t.bits();
        // 0 `[a, b]`, 1 `[a,b]`, 2 `[ a , b ]`, 3 `[a, b,]`.
        let spacing = match (bits >> 7) & 3 {
            3 if !self.wild(Feature::FlowEdges) => 0,
            n => n,
        };
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
                    // `{k: }`: an empty value is null.
                    let empty =
                        matches!(v, Tree::Scalar(i, b) if SCALARS[*i].is_empty() && b & 15 < 4);
                    shapes.push((
                        ks,
                        if empty {
                            Shape::Scalar(Value::Null)
                        } else {
                            self.flow(v)
                        },
                    ));
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
            if self.wild(Feature::Keys) && (vb >> 27) & 7 == 7 {
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
        let next_line = self.wild(Feature::NextLine) && !empty && (bits >> 11) & 7 == 7;
        if next_line {
            // On the next line, more indented.
            self.nl(col + self.width(bits));
        } else if !empty {
            self.out.push(' ');
            if (bits >> 14) & 3 == 3 {
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
        if !self.wild(Feature::BlockScalars) {
            return (self.scalar(text, bits, Ctx::Value), true);
        }
        let text = self.text(text);
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
                let written = &self.out.as_bytes()[start..];
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
                // The fast path's subset has no block sequence right in
                // another's item: tame renderings write it in flow style.
                Tree::Seq(inner, _) if self.is_block(item) && self.wild(Feature::SeqItems) => {
                    if compact {
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
                    if compact || !self.wild(Feature::SeqItems) {
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
                    // No empty items in the fast path's subset: `~` instead.
                    let scalar = match item {
                        Tree::Scalar(i, b)
                            if !self.wild(Feature::SeqItems) && SCALARS[*i].is_empty() =>
                        {
                            Some(("~", *b))
                        }
                        Tree::Scalar(i, b) => Some((SCALARS[*i], *b)),
                        _ => None,
                    };
                    let empty = matches!(scalar, Some((t, b)) if t.is_empty() && b & 15 < 4);
                    if !empty {
                        self.spaces(d);
                    }
                    let (shape, more) = match scalar {
                        Some((text, b)) => self.block_scalar(text, b, col + 1 + d),
                        None => (self.inline_value(item, Ctx::Value), true),
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
        // An indented root (in the subset).
        let col = if (bits >> 6) & 7 == 7 {
            1 + ((bits >> 9) & 1) as usize
        } else {
            0
        };
        if !self.wild(Feature::Roots) && !self.is_block(t) {
            // The fast path's documents are block collections: `k: VALUE`.
            self.nl(col);
            self.out.push('k');
            self.out.push(':');
            let value = self.value(t, col);
            return Shape::Map(vec![(Shape::Scalar(Value::Str("k".into())), value)]);
        }
        if self.is_block(t) {
            return match t {
                Tree::Map(entries, _) => self.block_map(entries, col, false),
                Tree::Seq(items, _) => self.block_seq(items, col, false),
                Tree::Scalar(..) => unreachable!(),
            };
        }
        if marker && self.wild(Feature::Roots) && (bits >> 4) & 3 == 3 {
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
            if n > 0 && self.wild(Feature::Markers) && (bits >> 12) & 7 == 7 {
                self.nl(0);
                self.out.push_str("...");
            }
            let comment = self.wild(Feature::Markers) && (bits >> 14) & 3 == 3;
            if marker {
                self.nl(0);
                self.out.push_str("---");
                if comment {
                    self.out.push_str(" # doc");
                }
            }
            if let Some(t) = doc {
                let marker = marker && !comment;
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
        if self.wild(Feature::Crlf) && (s.bits >> 9) & 15 == 15 {
            self.out = self.out.replace('\n', "\r\n");
        }
        (self.out, shapes, self.exact)
    }
}

fn render(s: &Stream, mode: Mode) -> (String, Vec<Shape>, bool) {
    Render::new(mode).stream(s)
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
        .unwrap_or(5_000)
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
    property("renderings", (stream(), mode()), |(s, mode)| {
        check(&render(&s, mode).0)
    });
}

/// Characters of random scalar texts: what plain scalars may hold and what
/// ends or breaks them.
const SCALAR_CHARS: &[u8] = b"ab1 .-:#,[]{}'\"?!&*|>%@`~/\\";

/// Where a random text goes, written as it is (plain or not).
const SCALAR_SLOTS: [&str; 8] = [
    "k: {}\n",
    "- {}\n",
    "k: [{}, x]\n",
    "k: [x, {}]\n",
    "k: {{a: {}}}\n",
    "{}: v\n",
    "- {}: v\n  m: n\n",
    "k:\n- {}\nj: 1\n",
];

#[test]
fn random_scalar_texts_agree() {
    let text = vec(proptest::sample::select(SCALAR_CHARS), 1..8)
        .prop_map(|b| String::from_utf8(b).unwrap());
    property(
        "scalar texts",
        (text, 0..SCALAR_SLOTS.len()),
        |(text, slot)| {
            check(
                &SCALAR_SLOTS[slot]
                    .replace("{}", &text)
                    .replace("{{", "{")
                    .replace("}}", "}"),
            )
        },
    );
}

/// Characters of random texts: structure, indicators, a few letters.
const TEXT_CHARS: &[u8] = b"ab1 :- #,[]{}'\"\n\n  ?!&*|>.~\\/";

#[test]
fn random_texts_agree() {
    let text = vec(proptest::sample::select(TEXT_CHARS), 0..48)
        .prop_map(|b| String::from_utf8(b).unwrap());
    property("texts", text, |text| check(&text));
}

/// One line of a random line soup.
#[derive(Debug, Clone)]
struct SoupLine {
    indent: usize,
    kind: usize,
    key: usize,
}

/// Lines that block structure is made of, and some it is not.
const SOUP: [&str; 22] = [
    "K:",
    "K: v",
    "K: 1",
    "K: ''",
    "K: [a, b]",
    "K: {a: 1}",
    "K: # c",
    "- v",
    "- K: v",
    "- K:",
    "-   K: v",
    "- [a]",
    "-",
    "- - v",
    "# c",
    "",
    "   ",
    "---",
    "...",
    "v",
    "K: v # c",
    "\"K\": v",
];

fn soup_line() -> impl Strategy<Value = SoupLine> {
    (
        prop_oneof![4 => 0usize..5, 1 => 5usize..9],
        0..SOUP.len(),
        0usize..4,
    )
        .prop_map(|(indent, kind, key)| SoupLine { indent, kind, key })
}

/// A random line soup: indentation and line kinds drawn at random, so that
/// block structure (nesting, indentless sequences, compact mappings,
/// dedents, documents) is tried beyond what the trees render.
fn soup_text(lines: &[SoupLine], end_newline: bool) -> String {
    let mut text = String::new();
    for (n, line) in lines.iter().enumerate() {
        if n > 0 {
            text.push('\n');
        }
        let kind = SOUP[line.kind];
        let indent = if kind == "---" || kind == "..." {
            0
        } else {
            line.indent
        };
        text.push_str(&" ".repeat(indent));
        text.push_str(&kind.replace('K', ["a", "b", "c", "a"][line.key]));
    }
    if end_newline {
        text.push('\n');
    }
    text
}

#[test]
fn random_line_soups_agree() {
    property(
        "line soups",
        (vec(soup_line(), 1..12), any::<bool>()),
        |(lines, end_newline)| check(&soup_text(&lines, end_newline)),
    );
}

#[test]
fn random_edits_of_renderings_agree() {
    property(
        "edits",
        (stream(), mode(), vec(edit(), 1..=3)),
        |(s, mode, edits)| {
            let mut text = render(&s, mode).0;
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
    property("meaning", (stream(), mode()), |(s, mode)| {
        let (text, shapes, exact) = render(&s, mode);
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
fn tame_renderings_take_the_fast_path() {
    property("tame", stream(), |s| {
        let (text, _, _) = render(&s, Mode::Tame);
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
fn the_example_fleet_takes_the_fast_path() {
    let mut files = Vec::new();
    yaml_files(&repository().join("examples/fleet"), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    let mut taken = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        // Beyond the subset: non-ASCII (even in comments) and block scalars
        // (the policies' CEL expressions).
        let beyond = !text
            .bytes()
            .all(|b| b == b'\n' || (b' '..=b'~').contains(&b))
            || text.lines().any(|l| {
                let l = l.trim_end();
                [": |", ": >", ": |-", ": >-"]
                    .iter()
                    .any(|h| l.ends_with(h))
            });
        match check(&text) {
            Outcome::Taken => taken += 1,
            Outcome::Declined => assert!(beyond, "declined: {}", path.display()),
        }
    }
    eprintln!("examples/fleet: {} files, {taken} taken", files.len());
    assert!(taken >= 8, "only {taken} taken");
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
fn generated_fleets_take_the_fast_path() {
    check_taken(
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: job-1}\nspec:\n  queue: team-0-0\n  priorityClass: normal\n  replicas: 1\n  gpusPerReplica: 1\n  gpu: {models: [H100-SXM-80GB]}\n  timeLimit: 29h\n  command: [python, train.py]\n---\n",
    );
    for text in generated_fleet() {
        check_taken(&text);
    }
}

/// The shapes of `benches/yaml.rs` that are in the fast path's subset
/// (all but `flow`, whose mapping ends in `, }`, and the hostile `scalar`).
#[test]
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
    for text in [labels, foreign, long, seq, observed, docs] {
        check_taken(&text);
    }
    // `{k0: v, …, }`: a trailing comma, beyond the subset.
    check(&flow);
}

// ---------------------------------------------------------------------------
// Tricky texts

#[test]
fn empty_values_and_documents() {
    let mut t = Table::new("empty_values_and_documents");
    t.check("");
    t.check("\n");
    t.check("k:");
    t.check("k:\n");
    t.check("k:   \n");
    t.check("k: # c\n");
    t.check("a:\nb:\n");
    t.check("a:\n  \nb: 1\n");
    t.check("- \n-\n- x\n");
    t.check("k: ~\nj: null\n");
    t.check("---\n");
    t.check("---\n---\n");
    t.check("--- \n---\na: 1\n");
    t.check("# only a comment\n");
    t.check("a: 1\n---\n# empty\n---\nb: 2\n");
    t.check("~\n");
    t.check("null\n---\na: 1\n");
    t.check("k: ''\nj: \"\"\n");
    t.check("{}\n");
    t.check("[]\n");
    t.check("k: {}\nj: []\n");
}

/// A table of texts: each goes through [`check`]; prints how many the fast
/// path took.
struct Table {
    name: &'static str,
    all: usize,
    taken: usize,
}

impl Table {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            all: 0,
            taken: 0,
        }
    }

    fn check(&mut self, text: &str) {
        self.all += 1;
        if check(text) == Outcome::Taken {
            self.taken += 1;
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        eprintln!(
            "{}: {} texts, {} taken by the fast path",
            self.name, self.all, self.taken
        );
    }
}

/// Texts on which the first fast path (commit 97e1197) and the general
/// parser differed (both fixed in 7d97014).
#[test]
fn mismatches_found() {
    let mut t = Table::new("mismatches_found");
    // The general parser counts an explicit empty document's null node;
    // the fast path counted none (trees equal, node budgets not).
    t.check("---\n");
    t.check("---");
    t.check("---\n---\n");
    t.check("a: 1\n---\n");
    t.check("---\n# only a comment\n---\na: 1\n");
    // Implicit keys of more than 1024 characters: the general parser
    // rejects them ("mapping values are not allowed in this context", in
    // flow "did not find expected ',' or '}'", after a first entry "simple
    // key expected ':'"); the fast path took them.
    let key = "k".repeat(1025);
    t.check(&format!("{key}: v\n"));
    t.check(&format!("a:\n  {key}: v\n"));
    t.check(&format!("- {key}: v\n"));
    t.check(&format!("- a: 1\n  {key}: v\n"));
    t.check(&format!("k: {{{key}: v}}\n"));
    t.check(&format!("k: [{{a: 1, {key}: v}}]\n"));
    t.check(&format!("{key}:\n- x\n"));
}

#[test]
fn positions_of_empty_values() {
    let mut t = Table::new("positions_of_empty_values");
    t.check("a:\nb: 1\n");
    t.check("a:\n\n\nb: 1\n");
    t.check("a:   \n  \nb: 1\n");
    t.check("a:\n  # c\nb: 1\n");
    t.check("a:   # c\n\n  \nb:");
    t.check("a:\n  b:\nc:\n");
    t.check("a:\n  b:\n    c:\n");
    t.check("a:\n  b:\n");
    t.check("a:\n  b:");
    t.check("a:");
    t.check("a: ");
    t.check("a:\n---\nb:\n");
    t.check("a:\n...\n");
    t.check("- a:\n- b:\n");
    t.check("- a:\n  b:\n");
    t.check("-\n-\n");
    t.check("- \n  # c\n- x\n");
    t.check("-\n\n-\n");
    t.check("-");
    t.check("- ");
    t.check("k:\n- \n-\n");
    t.check("k:\n  -\n  -");
    t.check("k: ~\nj: null\nl: Null\n");
    t.check("k: {a: }\n");
    t.check("- # c\n- # d\n");
    t.check("? a\n");
}

#[test]
fn long_keys_and_lines() {
    let mut t = Table::new("long_keys_and_lines");
    for n in [1000, 1023, 1024, 1025, 1100, 5000] {
        let key = "k".repeat(n);
        t.check(&format!("{key}: v\n"));
        t.check(&format!("a:\n  {key}: v\n"));
        t.check(&format!("- {key}: v\n"));
        t.check(&format!("k: {{{key}: v}}\n"));
        t.check(&format!("k: {key}\n"));
        t.check(&format!("k: [{key}]\n"));
        t.check(&format!("k: '{key}'\n"));
        t.check(&format!("{key}:\n- x\n"));
    }
}

#[test]
fn nesting_beyond_the_general_parsers_limit() {
    let mut t = Table::new("nesting_beyond_the_general_parsers_limit");
    let deep_flow = "[".repeat(300) + &"]".repeat(300);
    t.check(&deep_flow);
    t.check(&format!("k: {deep_flow}\n"));
    let deep_map = "{a: ".repeat(300) + "1" + &"}".repeat(300);
    t.check(&deep_map);
    let mut deep_block = String::new();
    for depth in 0..300 {
        deep_block.push_str(&" ".repeat(depth));
        deep_block.push_str("a:\n");
    }
    t.check(&deep_block);
    let mut deep_seq = String::new();
    for depth in 0..300 {
        deep_seq.push_str(&" ".repeat(depth));
        deep_seq.push_str("-\n");
    }
    t.check(&deep_seq);
    t.check(&("- ".repeat(300) + "x\n"));
    let mut at_limit = String::new();
    for depth in 0..255 {
        at_limit.push_str(&" ".repeat(depth));
        at_limit.push_str("a:\n");
    }
    t.check(&at_limit);
    t.check(&("[".repeat(256) + &"]".repeat(256)));
    t.check(&("[".repeat(257) + &"]".repeat(257)));
}

#[test]
fn block_sequences() {
    let mut t = Table::new("block_sequences");
    t.check("k:\n- a\n- b\nj: 1\n");
    t.check("k:\n  - a\n  - b\nj: 1\n");
    t.check("k:\n    - a\n    - b\n");
    t.check("- a: 1\n  b: 2\n- c: 3\n");
    t.check("- a: 1\n  b:\n  - x\n");
    t.check("- a: 1\n  b:\n    c: 2\n");
    t.check("-   a: 1\n    b: 2\n");
    t.check("- a: 1\n   b: 2\n");
    t.check("- a: 1\n b: 2\n");
    t.check("-\n  a: 1\n  b: 2\n");
    t.check("- - a\n  - b\n- c\n");
    t.check("-\n  - a\n");
    t.check("- [a, b]\n- {c: d}\n");
    t.check("- x\n-\n- y\n");
    t.check("k:\n- a\n  - b\n");
    t.check("k:\n- a\n -b\n");
    t.check("k:\n - a\n- b\n");
    t.check("- a\nk: v\n");
    t.check("-a\n");
    t.check("- -1\n- -x\n- --y\n");
    t.check("k: - a\n");
    t.check(
        "spec:\n  quota:\n    - {model: H100, guaranteed: 8}\n    - {model: A100, guaranteed: 4}\n",
    );
}

#[test]
fn block_mappings() {
    let mut t = Table::new("block_mappings");
    t.check("a: 1\nb: 2\n");
    t.check("a:\n  b: 1\n  c: 2\nd: 3\n");
    t.check("a:\n b:\n  c: 1\n");
    t.check("a:\n    b: 1\n    c: 2\n");
    t.check("a:\n  b: 1\n   c: 2\n");
    t.check("a:\n  b: 1\n c: 2\n");
    t.check("a: 1\n b: 2\n");
    t.check("  a: 1\n  b: 2\n");
    t.check("  a: 1\nb: 2\n");
    t.check("a:\n  v\n");
    t.check("a:\n    v\nb: 1\n");
    t.check("a:\nv\n");
    t.check("a:\n  'v'\n");
    t.check("a:\n  [v]\n");
    t.check("a :1\n");
    t.check("a : 1\n");
    t.check("a:1\n");
    t.check("a:  1\n");
    t.check("a: 1 \nb: 2   \n");
    t.check("a: b: c\n");
    t.check("a: b:\n");
    t.check("a: 'b': c\n");
    t.check("'a': 1\n\"b\": 2\n");
    t.check("'a b': 1\n\"c\\\"d\": 2\n");
    t.check("1: a\ntrue: b\nnull: c\n~: d\n0x1f: e\n1.5: f\n");
    t.check("a b: 1\nx.y/z: 2\nb-c: 3\nk_2: 4\n");
    t.check("-k: 1\n?k: 2\n:k: 3\n");
    t.check("? a\n: 1\n");
    t.check("? [a]\n: 1\n");
    t.check("[a]: 1\n");
    t.check("{a: 1}: 2\n");
    t.check("a: 1\na: 2\n");
    t.check("a: 1\nb:\n  c: 1\n  c: 2\n");
    t.check("1: a\n01: b\n");
    t.check("k: v # c\nj: w\n");
    t.check("k: v #c\n");
    t.check("k: v#c\n");
    t.check("k: 'v' # c\n");
    t.check("k: 'v'# c\n");
    t.check("k: \"v\"#c\n");
    t.check("k: [a] # c\n");
    t.check("k: {a: b} # c\n");
    t.check("k: [a]# c\n");
    t.check("k: 'v' x\n");
    t.check("k: [a] x\n");
    t.check("k: {a: b}, c\n");
}

#[test]
fn comments_and_blank_lines() {
    let mut t = Table::new("comments_and_blank_lines");
    t.check("# c\na: 1\n# c\nb: 2\n# c\n");
    t.check("a:\n  # c\n  b: 1\n");
    t.check("a:\n# c\n  b: 1\n");
    t.check("a:\n      # c\n  b: 1\n");
    t.check("a:\n  b: 1\n# c\n  c: 2\n");
    t.check("a:\n  b: 1\n\n\n  c: 2\n");
    t.check("a:\n  b: 1\n   \n  c: 2\n");
    t.check("- a\n  # c\n- b\n");
    t.check("- # c\n  a: 1\n");
    t.check("a: # c\n  b: 1\n");
    t.check("a: # c\n- b\n");
    t.check("a: 1 # c: d\n");
    t.check("a: 1 #\n");
    t.check("#\n#\n");
    t.check("   # indented comment\na: 1\n");
    t.check("a: 1\n   # trailing indented comment");
    t.check("a: 1 # no newline");
}

#[test]
fn scalars() {
    let mut t = Table::new("scalars");
    t.check("v: 12\nw: -3\nx: +1\ny: 007\nz: 0x1f\n");
    t.check("v: 0o17\nw: 0x\nx: 1_000\ny: 0b101\n");
    t.check("v: 9223372036854775807\nw: 9223372036854775808\nx: -9223372036854775809\n");
    t.check("v: 1e3\nw: .5\nx: -0.0\ny: +.5\nz: 1.\n");
    t.check("v: 1e\nw: e3\nx: 6.02e+23\ny: 1E-3\n");
    t.check("v: .inf\nw: -.Inf\nx: .nan\ny: +.INF\nz: .NaN\n");
    t.check("v: true\nw: True\nx: FALSE\ny: yes\nz: no\n");
    t.check("v: ~\nw: null\nx: Null\ny: NULL\nz: nULL\n");
    t.check("v: 1h30m\nw: 1.2.3\nx: 12:30\ny: 2026-11-21T10:00:00Z\n");
    t.check("v: -x\nw: :a\nx: a:b\ny: ?q\nz: --nnodes=2\n");
    t.check("v: a b\nw: a  b\nx: a#b\ny: http://x\nz: H100-SXM-80GB\n");
    t.check("v: 'it''s'\nw: \"say \\\"hi\\\"\"\nx: 'back\\slash'\ny: \"back\\\\slash\"\n");
    t.check("v: ''''\nw: \"\\\\\"\nx: '\"'\ny: \"'\"\n");
    t.check("v: \"\\t\\n\\x41\\u00e9\\/\"\n");
    t.check("v: \"a\\/b\"\nw: \"\\t\"\nx: \"\\n\"\ny: \"\\\\\\\"\"\n");
    t.check("v: \"\\r\"\nw: \"\\0\"\nx: \"\\ \"\ny: \"\\_\"\n");
    t.check("v: [\"a\\/b\", \"\\t\", 'c''d']\n");
    t.check("v: \"a\\\n  b\"\n");
    t.check("v: 'a\tb'\nw: \"a\tb\"\n");
    t.check("v: a\tb\n");
    t.check("v: '[x]'\nw: '{y}'\nx: 'a, b'\ny: 'a: b'\nz: '#z'\n");
    t.check("v: !t x\n");
    t.check("v: !!str 12\nw: !!int \"12\"\nx: !!float 1\ny: !!null ''\nz: !!bool true\n");
    t.check("v: !!str\n");
    t.check("v: !<tag:yaml.org,2002:str> 12\n");
    t.check("v: %p\n");
    t.check("v: @at\n");
    t.check("v: `tick\n");
    t.check("v: |\n  a\n  b\n");
    t.check("v: >\n  a\n  b\n");
    t.check("v: |-\n  a\nw: >+\n  b\n\n");
    t.check("v: |2\n    a\n");
    t.check("v: a\n  b\n");
    t.check("v: a\n\n  b\n");
    t.check("- a\n  b\n");
    t.check("v: 'a\n  b'\n");
    t.check("v: \"a\n  b\"\n");
    t.check("v: 'unterminated\n");
    t.check("v: \"unterminated\n");
    t.check("v: 'a'b'\n");
    t.check("v: 'a' 'b'\n");
    t.check("v: x\n  # c\n");
    t.check("v: ---\nw: ...\n");
    t.check("---x\n");
    t.check("...x\n");
    t.check("v: \"\\q\"\n");
    t.check("v: \"\\x4\"\n");
    t.check("12\n");
    t.check("'x'\n");
    t.check("plain text\n");
}

#[test]
fn flow_collections() {
    let mut t = Table::new("flow_collections");
    t.check("k: [a, b, c]\n");
    t.check("k: [a,b,c]\n");
    t.check("k: [ a , b ]\n");
    t.check("k: [a, b,]\n");
    t.check("k: [a, , b]\n");
    t.check("k: [,]\n");
    t.check("k: [a b, c]\n");
    t.check("k: [[a, [b]], {c: [d, {e: f}]}]\n");
    t.check("k: {a: 1, b: [2, 3], c: {d: e}}\n");
    t.check("k: {a: 1,b: 2}\n");
    t.check("k: {a:1}\n");
    t.check("k: {\"a\":1}\n");
    t.check("k: {'a':1}\n");
    t.check("k: {a}\n");
    t.check("k: {a, b: 1}\n");
    t.check("k: {a: }\n");
    t.check("k: {a: , b: 1}\n");
    t.check("k: {: a}\n");
    t.check("k: [a: 1]\n");
    t.check("k: [a: 1, b]\n");
    t.check("k: [? a : 1]\n");
    t.check("k: {a: 1, a: 2}\n");
    t.check("k: {[a]: 1}\n");
    t.check("k: ['a', \"b\", 'c''d']\n");
    t.check("k: [-1, -x, .5, ~, null, true, '']\n");
    t.check("k: [a\n  , b]\n");
    t.check("k: [a,\n  b]\n");
    t.check("k: {a: 1,\n  b: 2}\n");
    t.check("k: [a, b\n");
    t.check("k: [a, b]]\n");
    t.check("k: {a: b}}\n");
    t.check("k: [a #b, c]\n");
    t.check("k: [a, b] # [c]\n");
    t.check("[a, b]\n");
    t.check("{a: 1}\n");
    t.check("- [a, b]\n  c: d\n");
    t.check("k: [http://x, a:b]\n");
    t.check("k: [a:b]\n");
    t.check("k: {a:b: c}\n");
    t.check("k: [*a]\n");
    t.check("k: [&a x, *a]\n");
    t.check("k: []\nj: [ ]\nl: {}\nm: { }\n");
    t.check("data: {k0: v, k1: v, }\n");
}

#[test]
fn documents_and_markers() {
    let mut t = Table::new("documents_and_markers");
    t.check("a: 1\n---\nb: 2\n");
    t.check("---\na: 1\n---\nb: 2\n");
    t.check("--- # c\na: 1\n");
    t.check("--- a\n");
    t.check("--- [a, b]\n");
    t.check("--- {a: 1}\n");
    t.check("--- 'x'\n");
    t.check("--- a: 1\n");
    t.check("--- - a\n");
    t.check("---a: 1\n");
    t.check(" ---\na: 1\n");
    t.check("a: 1\n...\n");
    t.check("a: 1\n...\n---\nb: 2\n");
    t.check("a: 1\n... # c\n");
    t.check("...\n");
    t.check("a: 1\n---\n");
    t.check("a: 1\n---");
    t.check("a: 1\n--- \n");
    t.check("%YAML 1.2\n---\na: 1\n");
    t.check("%TAG ! tag:x,2000:\n---\na: 1\n");
    t.check("a: 1\n--- |\n  x\n");
    t.check("---\n- a\n---\n- b\n");
    t.check("a: 1\n----\n");
    t.check("a: 1\n---x\n");
}

#[test]
fn whitespace_and_encoding() {
    let mut t = Table::new("whitespace_and_encoding");
    t.check("a: 1\r\nb: 2\r\n");
    t.check("a:\r\n  - x\r\n  - y\r\n");
    t.check("a: 1\rb: 2\r");
    t.check("a: 1\r\n");
    t.check("a: 'x'\r\n");
    t.check("\u{feff}a: 1\n");
    t.check("\u{feff}---\na: 1\n");
    t.check("a: 1\n\u{feff}b: 2\n");
    t.check("a: é\n");
    t.check("é: a\nb: 1\n");
    t.check("a: 'é'\nb: 1\n");
    t.check("a: \"é\"\nb: 1\n");
    t.check("a: [é, b]\n");
    t.check("# é\na: 1\n");
    t.check("a: 1 # é\nb: 2\n");
    t.check("a: \u{85}b\n");
    t.check("a: b\u{2028}c\n");
    t.check("a: \u{7f}\n");
    t.check("a: \u{1}\n");
    t.check("a:\t1\n");
    t.check("a: 1\t\nb: 2\n");
    t.check("a: 1\t# c\n");
    t.check("a:\n\tb: 1\n");
    t.check("\ta: 1\n");
    t.check("- \ta\n");
    t.check("-\ta\n");
    t.check("a: [\ta]\n");
    t.check("a: 1\n\t\nb: 2\n");
    t.check("a: 1\n  \t\nb: 2\n");
    t.check("a: 1\n\n\n\n");
    t.check("\n\n\na: 1\n");
    t.check("a: 1   ");
    t.check("a: 1\n ");
}

#[test]
fn anchors_aliases_and_merges() {
    let mut t = Table::new("anchors_aliases_and_merges");
    t.check("a: &x 1\nb: *x\n");
    t.check("a: &x {c: 1}\nb:\n  <<: *x\n  d: 2\n");
    t.check("a: &x [1, 2]\nb: *x\n");
    t.check("a: *x\n");
    t.check("&x a: 1\n");
    t.check("a: &x\n  b: 1\nc: *x\n");
    t.check("<<: {a: 1}\nb: 2\n");
    t.check("<<: x\n");
    t.check("a: &x 1\n---\nb: *x\n");
    t.check("a: & x\n");
    t.check("a: *\n");
    t.check("- &a\n- *a\n");
}

#[test]
fn fleet_documents() {
    let mut t = Table::new("fleet_documents");
    for text in generated_fleet() {
        t.check(&text);
    }
    t.check(
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata:\n  name: ranker\n  labels: {team: training, workload: retraining}\n  annotations:\n    gitfleet/sim-duration: 45m\nspec:\n  queue: training\n  command: [\"torchrun\", \"--nnodes=2\", \"train.py\"]\n  env:\n    MLFLOW_EXPERIMENT: ranker-nightly\n",
    );
    t.check(
        "spec:\n  match:\n    kinds: [Job]\n  rules:\n    - expression: \"object.spec.replicas * object.spec.gpusPerReplica <= 64\"\n      message: \"at most 64 GPUs\"\n",
    );
    t.check(
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
    let (text, shapes, exact) = render(&s, Mode::Wild);
    assert_eq!(
        text,
        "a: x\nb:\n  - 1\n  - x\nb-c:\n  x.y/z: null\n---\n---\na: x\nb:\n  - 1\n  - x\nb-c:\n  x.y/z: null\n"
    );
    assert!(exact);
    assert_eq!(shapes.len(), 2);
}
