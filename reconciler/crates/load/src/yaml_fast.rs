//! A fast path for the YAML that fleets are made of: block mappings and
//! sequences of plain keys, single-line scalars and single-line flow
//! collections, in printable ASCII (comments may hold any printable
//! character). It builds the same [`Node`] trees as
//! the general parser (`yaml_parse`, granit) for every text it accepts, and
//! declines (`None`) anything else, which then goes through the general
//! parser: errors, positions and rare forms always come from there.
//!
//! The subset, line by line:
//! - blank lines and comment lines anywhere; `---` alone on a line between
//!   documents;
//! - `KEY: VALUE`, `KEY:` (the value on the lines below: a more indented
//!   block, a sequence at the key's indentation, or null), `- ITEM` and
//!   `- KEY: VALUE` (a mapping inside the item);
//! - keys of `[A-Za-z0-9_][A-Za-z0-9_./-]*`; values that are a plain
//!   scalar, a quoted scalar (`\\ \" \/ \n \t` escapes only) or a flow
//!   collection that closes on its own line, then an optional comment.
//!
//! Anything else (tabs, `\r`, non-ASCII outside comments, anchors, aliases, tags, block and
//! multi-line scalars, quoted or complex keys, empty sequence items, trailing
//! commas, `...`, a `:` inside a flow scalar) is declined as a whole file.

use super::yaml::{Node, Pos, Value};
use super::yaml_parse::plain;

/// Nesting deeper than this is declined (the general parser's limit is
/// higher and has its own message).
const MAX_DEPTH: usize = 64;

/// Longer keys are declined.
const MAX_KEY_LEN: usize = 512;

/// The non-empty documents of `text`, as the general parser would build
/// them; `None` when `text` uses anything beyond the fast path's subset.
#[cfg(test)]
pub(crate) fn documents(text: &str) -> Option<Vec<Node>> {
    documents_counted(text).map(|(docs, _)| docs)
}

/// [`documents`] and the number of nodes they hold (keys included, as the
/// general parser counts them).
pub(crate) fn documents_counted(text: &str) -> Option<(Vec<Node>, usize)> {
    documents_counted_in(text, 0..text.len(), 1)
}

/// [`documents_counted`] of the lines of `text` in `range`, which starts
/// at the start of line `line` (1-based) and ends at the start of a line or
/// at the end of `text`: positions are those of the whole `text`.
pub(crate) fn documents_counted_in(
    text: &str,
    range: std::ops::Range<usize>,
    line: u32,
) -> Option<(Vec<Node>, usize)> {
    let text = text.get(..range.end)?;
    let s = text.as_bytes();
    if !printable(text.get(range.start..)?) {
        return None;
    }
    let mut p = Fast {
        s,
        text,
        next: range.start,
        next_no: line,
        peeked: None,
        nodes: 0,
    };
    let mut docs = Vec::new();
    while let Some(line) = p.peek() {
        if p.is_document_start(&line) {
            p.consume(&line);
            // An explicit document with nothing in it holds one (null)
            // node, as the general parser counts it.
            if p.peek().is_none_or(|next| p.is_document_start(&next)) {
                p.nodes += 1;
            }
            continue;
        }
        docs.push(p.block(line, line.start + line.indent, 0)?);
        match p.peek() {
            None => break,
            Some(next) if p.is_document_start(&next) => {}
            Some(_) => return None,
        }
    }
    Some((docs, p.nodes))
}

/// A line with content (not blank, not only a comment).
#[derive(Debug, Clone, Copy)]
struct Line {
    /// Byte offset of its first character.
    start: usize,
    /// Byte offset of its end (the `\n` or the end of the text).
    end: usize,
    /// 1-based line number.
    no: u32,
    /// Leading spaces.
    indent: usize,
}

struct Fast<'a> {
    s: &'a [u8],
    text: &'a str,
    /// Byte offset of the first line not yet consumed.
    next: usize,
    /// Its line number.
    next_no: u32,
    peeked: Option<Line>,
    nodes: usize,
}

impl Fast<'_> {
    /// The next line with content, not consumed; blank and comment lines
    /// before it are skipped for good.
    fn peek(&mut self) -> Option<Line> {
        if self.peeked.is_some() {
            return self.peeked;
        }
        while self.next < self.s.len() {
            let start = self.next;
            let end = self.s[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(self.s.len(), |i| start + i);
            let indent = self.s[start..end]
                .iter()
                .take_while(|&&b| b == b' ')
                .count();
            let no = self.next_no;
            if start + indent == end || self.s[start + indent] == b'#' {
                self.next = end + 1;
                self.next_no += 1;
                continue;
            }
            self.peeked = Some(Line {
                start,
                end,
                no,
                indent,
            });
            return self.peeked;
        }
        None
    }

    fn consume(&mut self, line: &Line) {
        self.next = line.end + 1;
        self.next_no = line.no + 1;
        self.peeked = None;
    }

    fn pos(&self, line: &Line, at: usize) -> Pos {
        Pos::new(line.no, (at - line.start + 1) as u32)
    }

    fn node(&mut self, pos: Pos, value: Value) -> Node {
        self.nodes += 1;
        Node { pos, value }
    }

    /// `---` alone (trailing spaces allowed) at the start of a line.
    fn is_document_start(&self, line: &Line) -> bool {
        line.indent == 0 && self.s[line.start..line.end].trim_ascii_end() == b"---"
    }

    /// A sequence entry's `-` at `at`.
    fn is_dash(&self, line: &Line, at: usize) -> bool {
        at < line.end && self.s[at] == b'-' && (at + 1 == line.end || self.s[at + 1] == b' ')
    }

    /// The end of a plain key starting at `at`, where its `:` is, when a
    /// space or the line's end follows the `:`.
    fn key_end(&self, line: &Line, at: usize, end: usize) -> Option<usize> {
        let first = *self.s.get(at)?;
        if at >= end || !(first.is_ascii_alphanumeric() || first == b'_') {
            return None;
        }
        let mut i = at + 1;
        while i < end && is_key_char(self.s[i]) {
            i += 1;
        }
        // YAML bounds implicit keys (1,024 characters); long ones are left
        // to the general parser, well before that bound.
        (i - at <= MAX_KEY_LEN
            && i < end
            && self.s[i] == b':'
            && (i + 1 == line.end || self.s[i + 1] == b' '))
            .then_some(i)
    }

    fn skip_spaces(&self, line: &Line, mut at: usize) -> usize {
        while at < line.end && self.s[at] == b' ' {
            at += 1;
        }
        at
    }

    /// Whether only spaces and a comment follow `at` (a comment needs a
    /// space before it).
    fn only_comment_after(&self, line: &Line, at: usize) -> bool {
        let rest = self.skip_spaces(line, at);
        rest == line.end || (rest > at && self.s[rest] == b'#')
    }

    /// A block collection whose first entry starts at `at` on `line`.
    fn block(&mut self, line: Line, at: usize, depth: usize) -> Option<Node> {
        if depth > MAX_DEPTH {
            return None;
        }
        if self.is_dash(&line, at) {
            self.seq(line, at - line.start, false, depth)
        } else {
            self.map(line, at, depth)
        }
    }

    /// A block mapping whose first key starts at `at`.
    fn map(&mut self, line: Line, at: usize, depth: usize) -> Option<Node> {
        let indent = at - line.start;
        let pos = self.pos(&line, at);
        let mut entries = Vec::new();
        let (mut line, mut at) = (line, at);
        loop {
            let colon = self.key_end(&line, at, line.end)?;
            let key_value = plain(&self.text[at..colon]);
            let key = self.node(self.pos(&line, at), key_value);
            let value = self.value(line, colon, indent, depth)?;
            entries.push((key, value));
            match self.peek() {
                Some(next) if next.indent == indent => {
                    if self.is_document_start(&next) {
                        break;
                    }
                    line = next;
                    at = next.start + indent;
                }
                Some(next) if next.indent > indent => return None,
                _ => break,
            }
        }
        Some(self.node(pos, Value::Map(entries)))
    }

    /// The value of the key whose `:` is at `colon`, in a mapping indented
    /// by `indent`; consumes the lines it reads.
    fn value(&mut self, line: Line, colon: usize, indent: usize, depth: usize) -> Option<Node> {
        let at = self.skip_spaces(&line, colon + 1);
        if at == line.end || self.s[at] == b'#' {
            self.consume(&line);
            let empty = self.pos(&line, colon);
            return match self.peek() {
                Some(next) if next.indent > indent => {
                    self.block(next, next.start + next.indent, depth + 1)
                }
                Some(next) if next.indent == indent && self.is_dash(&next, next.start + indent) => {
                    if depth + 1 > MAX_DEPTH {
                        return None;
                    }
                    self.seq(next, indent, true, depth + 1)
                }
                _ => Some(self.node(empty, Value::Null)),
            };
        }
        let (node, end) = self.inline(&line, at, depth + 1)?;
        if !self.only_comment_after(&line, end) {
            return None;
        }
        self.consume(&line);
        Some(node)
    }

    /// A block sequence whose `-` are at column `indent`; `indentless` when
    /// it is the value of a key at that same column (its position is then
    /// its first item's, as the general parser reports it).
    fn seq(&mut self, line: Line, indent: usize, indentless: bool, depth: usize) -> Option<Node> {
        let mut items = Vec::new();
        let mut pos = None;
        let mut line = line;
        loop {
            let dash = line.start + indent;
            let at = self.skip_spaces(&line, dash + 1);
            if at == line.end || self.s[at] == b'#' || self.is_dash(&line, at) {
                return None;
            }
            if pos.is_none() {
                pos = Some(self.pos(&line, if indentless { at } else { dash }));
            }
            let item = if self.key_end(&line, at, line.end).is_some() {
                if depth + 1 > MAX_DEPTH {
                    return None;
                }
                self.map(line, at, depth + 1)?
            } else {
                let (node, end) = self.inline(&line, at, depth + 1)?;
                if !self.only_comment_after(&line, end) {
                    return None;
                }
                self.consume(&line);
                node
            };
            items.push(item);
            match self.peek() {
                Some(next) if next.indent == indent && self.is_dash(&next, next.start + indent) => {
                    line = next;
                }
                Some(next) if next.indent == indent => {
                    if indentless || self.is_document_start(&next) {
                        break;
                    }
                    return None;
                }
                Some(next) if next.indent > indent => return None,
                _ => break,
            }
        }
        let pos = pos?;
        Some(self.node(pos, Value::Seq(items)))
    }

    /// A scalar or flow collection on one line from `at`, and where it ends.
    fn inline(&mut self, line: &Line, at: usize, depth: usize) -> Option<(Node, usize)> {
        match self.s[at] {
            b'[' => self.flow_seq(line, at, depth),
            b'{' => self.flow_map(line, at, depth),
            b'"' => self.double_quoted(line, at),
            b'\'' => self.single_quoted(line, at),
            _ => self.plain_block(line, at),
        }
    }

    /// A plain scalar in block context: to the end of the line or a comment.
    fn plain_block(&mut self, line: &Line, at: usize) -> Option<(Node, usize)> {
        let first = self.s[at];
        if b",[]{}#&*!|>'\"%@`?".contains(&first)
            || (matches!(first, b'-' | b':') && (at + 1 == line.end || self.s[at + 1] == b' '))
        {
            return None;
        }
        let mut end = at;
        let mut i = at;
        while i < line.end {
            match self.s[i] {
                b' ' if i + 1 < line.end && self.s[i + 1] == b'#' => break,
                b' ' => {}
                b':' if i + 1 == line.end || self.s[i + 1] == b' ' => return None,
                b if !b.is_ascii() => return None,
                _ => end = i + 1,
            }
            i += 1;
        }
        let value = plain(&self.text[at..end]);
        Some((self.node(self.pos(line, at), value), i))
    }

    /// A plain scalar inside a flow collection: up to `,`, `]`, `}`.
    fn plain_flow(&mut self, line: &Line, at: usize) -> Option<(Node, usize)> {
        let first = self.s[at];
        if b",[]{}#&*!|>'\"%@`?:".contains(&first)
            || (first == b'-' && (at + 1 == line.end || b" ,]}".contains(&self.s[at + 1])))
        {
            return None;
        }
        let mut end = at;
        let mut i = at;
        while i < line.end {
            match self.s[i] {
                b',' | b']' | b'}' => break,
                b':' | b'#' | b'[' | b'{' => return None,
                b if !b.is_ascii() => return None,
                b' ' => {}
                _ => end = i + 1,
            }
            i += 1;
        }
        let value = plain(&self.text[at..end]);
        Some((self.node(self.pos(line, at), value), end))
    }

    fn double_quoted(&mut self, line: &Line, at: usize) -> Option<(Node, usize)> {
        let mut out = String::new();
        let mut i = at + 1;
        loop {
            match *self.s.get(i).filter(|_| i < line.end)? {
                b'"' => break,
                b'\\' => {
                    let escaped = match *self.s.get(i + 1).filter(|_| i + 1 < line.end)? {
                        b'\\' => '\\',
                        b'"' => '"',
                        b'/' => '/',
                        b'n' => '\n',
                        b't' => '\t',
                        _ => return None,
                    };
                    out.push(escaped);
                    i += 2;
                }
                b if !b.is_ascii() => return None,
                b => {
                    out.push(b as char);
                    i += 1;
                }
            }
        }
        Some((self.node(self.pos(line, at), Value::Str(out)), i + 1))
    }

    fn single_quoted(&mut self, line: &Line, at: usize) -> Option<(Node, usize)> {
        let mut out = String::new();
        let mut i = at + 1;
        loop {
            match *self.s.get(i).filter(|_| i < line.end)? {
                b'\'' if i + 1 < line.end && self.s[i + 1] == b'\'' => {
                    out.push('\'');
                    i += 2;
                }
                b'\'' => break,
                b if !b.is_ascii() => return None,
                b => {
                    out.push(b as char);
                    i += 1;
                }
            }
        }
        Some((self.node(self.pos(line, at), Value::Str(out)), i + 1))
    }

    /// An item of a flow collection.
    fn flow_item(&mut self, line: &Line, at: usize, depth: usize) -> Option<(Node, usize)> {
        match self.s[at] {
            b'[' => self.flow_seq(line, at, depth),
            b'{' => self.flow_map(line, at, depth),
            b'"' => self.double_quoted(line, at),
            b'\'' => self.single_quoted(line, at),
            _ => self.plain_flow(line, at),
        }
    }

    /// After an entry of a flow collection closed by `close`: where the
    /// next entry starts, or `Err(end)` when the collection closed at `end`.
    fn flow_next(&self, line: &Line, at: usize, close: u8) -> Option<Result<usize, usize>> {
        let at = self.skip_spaces(line, at);
        match *self.s.get(at).filter(|_| at < line.end)? {
            b',' => {
                let next = self.skip_spaces(line, at + 1);
                (next < line.end && self.s[next] != close).then_some(Ok(next))
            }
            b if b == close => Some(Err(at + 1)),
            _ => None,
        }
    }

    fn flow_seq(&mut self, line: &Line, at: usize, depth: usize) -> Option<(Node, usize)> {
        if depth > MAX_DEPTH {
            return None;
        }
        let pos = self.pos(line, at);
        let mut items = Vec::new();
        let mut i = self.skip_spaces(line, at + 1);
        if i < line.end && self.s[i] == b']' {
            return Some((self.node(pos, Value::Seq(items)), i + 1));
        }
        loop {
            if i >= line.end {
                return None;
            }
            let (item, end) = self.flow_item(line, i, depth + 1)?;
            items.push(item);
            match self.flow_next(line, end, b']')? {
                Ok(next) => i = next,
                Err(end) => return Some((self.node(pos, Value::Seq(items)), end)),
            }
        }
    }

    fn flow_map(&mut self, line: &Line, at: usize, depth: usize) -> Option<(Node, usize)> {
        if depth > MAX_DEPTH {
            return None;
        }
        let pos = self.pos(line, at);
        let mut entries = Vec::new();
        let mut i = self.skip_spaces(line, at + 1);
        if i < line.end && self.s[i] == b'}' {
            return Some((self.node(pos, Value::Map(entries)), i + 1));
        }
        loop {
            let colon = self.key_end(line, i, line.end)?;
            let key_value = plain(&self.text[i..colon]);
            let key = self.node(self.pos(line, i), key_value);
            let v = self.skip_spaces(line, colon + 1);
            if v >= line.end {
                return None;
            }
            let (value, end) = if matches!(self.s[v], b',' | b'}') {
                (self.node(self.pos(line, colon), Value::Null), v)
            } else {
                self.flow_item(line, v, depth + 1)?
            };
            entries.push((key, value));
            match self.flow_next(line, end, b'}')? {
                Ok(next) => i = next,
                Err(end) => return Some((self.node(pos, Value::Map(entries)), end)),
            }
        }
    }
}

/// Printable ASCII and line feeds; beyond ASCII, characters YAML prints
/// as themselves and that no parser may take for a line break or a byte
/// order mark. The scanner declines any byte beyond ASCII it meets, so
/// these are taken only where it never looks: in comments (where they
/// shift no column of a node).
fn printable(text: &str) -> bool {
    if text.is_ascii() {
        return text
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) || b == b'\n');
    }
    text.chars().all(|c| {
        matches!(c, ' '..='~' | '\n')
            || (c >= '\u{a0}'
                && !matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ))
    })
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml_parse::{MAX_FLEET_NODES, NodeBudget, build_documents_within};

    fn general(text: &str) -> Option<Vec<Node>> {
        build_documents_within(text, &NodeBudget::new(MAX_FLEET_NODES))
            .ok()
            .map(|docs| {
                docs.into_iter()
                    .filter(|d| d.value != Value::Null)
                    .collect()
            })
    }

    /// Taken by the fast path, and equal to the general parser's tree.
    fn same(text: &str) {
        let fast = documents(text).unwrap_or_else(|| panic!("declined: {text:?}"));
        assert_eq!(Some(fast), general(text), "{text:?}");
    }

    fn declined(text: &str) {
        assert_eq!(documents(text), None, "{text:?}");
    }

    #[test]
    fn takes_what_fleets_are_made_of() {
        same(
            "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: job-1}\nspec:\n  queue: team-0-0\n  replicas: 1\n  gpu: {models: [H100-SXM-80GB]}\n  timeLimit: 29h\n  command: [python, train.py]\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata:\n  name: j2\n  labels:\n    team: a # owner\n",
        );
        same(
            "a: 1\nb:\n  c: x\n  d: [1, 'two', {e: f}]\nl:\n- 1\n- k: v\n  m: n\ne:\nq: \"x\" # c\n",
        );
        same("---\na: 1\n---\n# c\n---\nb: 2\n");
        same("  a: 1\n  b: 2\n");
        same("a: [ ]\nb: {}\nc: [a , b ]\nd: {x: , y: 2}\n");
        same("k: -1\nj: -x\nm: :a\nn: a:b\no: a b  # x\np: 'it''s'\nq: \"a\\tb\\\\\"\n");
        same("- a: 1\n  b:\n- c\n- [x, y]\n");
        same("a:\n  - x\n  - y: 1\n    z:\n      - 2\nb: ~\n");
    }

    #[test]
    fn declines_the_rest() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: |\n  x\n",
            "a: b\n  c\n",
            "a:\n- \n",
            "a: [x,\n  y]\n",
            "a: [x, ]\n",
            "'a': 1\n",
            "a: 1\r\n",
            "a:\t1\n",
            "a: é\n",
            "a: b: c\n",
            "<<: {a: 1}\n",
            "--- a\n",
            "a: 1\n...\n",
            "- - a\n",
            "a: {b: c:d}\n",
            "plain\n",
        ] {
            declined(text);
        }
    }

    #[test]
    fn nodes_are_counted_as_the_general_parser_counts_them() {
        for text in [
            "a: 1\n",
            "---\na: 1\n",
            "---\n---\na: 1\n",
            "a: 1\n---\n",
            "a: 1\n---\n# c\n",
            "---\n",
            "# c\n",
            "",
            "a: 1\n---\n---\n",
            "a: [1, {b: c}]\nd:\n- e\n- f: g\n",
        ] {
            let budget = NodeBudget::new(MAX_FLEET_NODES);
            build_documents_within(text, &budget).unwrap();
            assert_eq!(
                documents_counted(text).map(|(_, n)| n),
                Some(budget.used()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn comments_may_hold_any_printable_character() {
        same("# é\na: 1 # ü — ×\nb: [x, y] # 日本\nc:   # ø\n  - d # é\n");
        for text in [
            "a: \"x #é\"\n",
            "a: 'é' # é\n",
            "a: [\"é\", b]\n",
            "a: x é # é\n",
            "é: 1\n",
            "# \u{85}\na: 1\n",
            "# \u{2028}\na: 1\n",
            "# \u{feff}\na: 1\n",
            "# \u{9f}\na: 1\n",
        ] {
            declined(text);
        }
    }

    #[test]
    fn long_keys_are_left_to_the_general_parser() {
        same(&format!("{}: 1\n", "k".repeat(MAX_KEY_LEN)));
        declined(&format!("{}: 1\n", "k".repeat(MAX_KEY_LEN + 1)));
        declined(&format!("a: {{{}: 1}}\n", "k".repeat(2000)));
    }

    #[test]
    fn the_repository_s_yaml() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        let mut stack = vec![root];
        let (mut taken, mut all) = (0, 0);
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if path.is_dir() {
                    if name != ".git" && name != "target" && name != "node_modules" {
                        stack.push(path);
                    }
                } else if name.ends_with(".yaml") || name.ends_with(".yml") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    all += 1;
                    if let Some(fast) = documents(&text) {
                        taken += 1;
                        assert_eq!(Some(fast), general(&text), "{}", path.display());
                    }
                }
            }
        }
        eprintln!("fast path took {taken} of {all} files");
        assert!(taken * 2 > all, "{taken} of {all}");
    }
}
