//! Limits on a rule's text (checked before parsing) and on its syntax tree
//! (checked after), so that the CEL library's recursive parser and evaluator
//! stay well within the policy thread's stack and its parser does bounded work.

use cel_interpreter::IdedExpr;
use cel_parser::ast::{EntryExpr, Expr};
use cel_parser::reference::Val;

use super::PolicyError;
use super::patterns::{self, Patterns};

/// The longest rule expression, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 10_000;
/// The deepest nesting of `(`, `[` and `{` outside string literals and comments.
pub const MAX_NESTING: usize = 32;
/// How many runs of two or more `!` or `-` (as in `!!x`) an expression may
/// hold: the library's parser does twice the work under each such run.
pub const MAX_REPEATED_UNARY: usize = 2;
/// The deepest syntax tree (operators, calls, selections, macros) a rule may have.
pub const MAX_AST_DEPTH: usize = 200;
/// The largest compiled size of a `matches()` pattern, in bytes.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// Checks the text of an expression before it is parsed: its length, how
/// deeply it nests brackets and how often it repeats unary operators.
pub(super) fn check_text(expression: &str) -> Result<(), PolicyError> {
    if expression.len() > MAX_EXPRESSION_BYTES {
        return Err(PolicyError::Limit(format!(
            "expression too long: {} bytes (the limit is {MAX_EXPRESSION_BYTES})",
            expression.len()
        )));
    }
    let src = expression.as_bytes();
    let mut scan = Scan::default();
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        if matches!(c, b' ' | b'\t' | b'\r' | b'\n' | 0x0c) {
            i += 1;
            continue;
        }
        if c == b'/' && src.get(i + 1) == Some(&b'/') {
            i = src[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(src.len(), |n| i + n);
            continue;
        }
        let unary = match c {
            b'!' if src.get(i + 1) != Some(&b'=') => Some(c),
            b'-' if !scan.after_operand => Some(c),
            _ => None,
        };
        scan.unary(unary, i)
            .map_err(|at| repeated_unary(expression, at))?;
        let (next, operand) = match c {
            b'"' | b'\'' => lex_string(src, i, false),
            b'`' => lex_escaped_ident(src, i),
            b'(' | b'[' | b'{' => {
                scan.depth += 1;
                if scan.depth > MAX_NESTING {
                    return Err(PolicyError::Limit(format!(
                        "brackets nested too deeply: more than {MAX_NESTING} levels {}",
                        place(expression, i)
                    )));
                }
                (i + 1, false)
            }
            b')' | b']' | b'}' => {
                scan.depth = scan.depth.saturating_sub(1);
                (i + 1, true)
            }
            b'0'..=b'9' => (lex_number(src, i), true),
            c if c == b'_' || c.is_ascii_alphabetic() => lex_word(src, i),
            _ => (i + 1, false),
        };
        scan.after_operand = operand;
        i = next;
    }
    scan.unary(None, src.len())
        .map_err(|at| repeated_unary(expression, at))
}

/// What the scan has seen so far.
#[derive(Default)]
struct Scan {
    depth: usize,
    /// Whether the last token ends an operand, so that a `-` after it is binary.
    after_operand: bool,
    /// The unary operator being repeated, how often, and where the run began.
    run: Option<(u8, usize, usize)>,
    /// Runs of two or more so far.
    runs: usize,
}

impl Scan {
    /// Records a token that is the unary operator `op` (or not one), and
    /// fails with the position of a run that breaks the limit.
    fn unary(&mut self, op: Option<u8>, at: usize) -> Result<(), usize> {
        match (op, self.run) {
            (Some(op), Some((run, n, start))) if op == run => {
                self.run = Some((run, n + 1, start));
                return Ok(());
            }
            (_, Some((_, n, start))) if n >= 2 => {
                self.runs += 1;
                if self.runs > MAX_REPEATED_UNARY {
                    return Err(start);
                }
            }
            _ => {}
        }
        self.run = op.map(|op| (op, 1, at));
        Ok(())
    }
}

fn repeated_unary(expression: &str, at: usize) -> PolicyError {
    PolicyError::Limit(format!(
        "`!` or `-` repeated (as in `!!x`) more than {MAX_REPEATED_UNARY} times {}; \
         drop the pairs, they cancel out",
        place(expression, at)
    ))
}

/// "at column N" or "at line L, column N" for a byte offset, as syntax errors say it.
fn place(expression: &str, at: usize) -> String {
    let before = expression.get(..at).unwrap_or(expression);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    if expression.trim_end().contains('\n') {
        format!("at line {line}, column {column}")
    } else {
        format!("at column {column}")
    }
}

/// An identifier, or a string or bytes literal with its prefix (`r"…"`,
/// `b'…'`, `br"""…"""`): the next position and whether it ends an operand.
fn lex_word(src: &[u8], start: usize) -> (usize, bool) {
    let end = start
        + src[start..]
            .iter()
            .position(|&b| !(b == b'_' || b.is_ascii_alphanumeric()))
            .unwrap_or(src.len() - start);
    let word = &src[start..end];
    if matches!(src.get(end), Some(b'"' | b'\'')) {
        let raw = match word {
            b"r" | b"R" | b"br" | b"bR" | b"Br" | b"BR" => Some(true),
            b"b" | b"B" => Some(false),
            _ => None,
        };
        if let Some(raw) = raw {
            return lex_string(src, end, raw);
        }
    }
    (end, word != b"in")
}

/// A number (`12`, `0x1F`, `1.5e-3`, `7u`): the position after it.
fn lex_number(src: &[u8], start: usize) -> usize {
    let digits = |from: usize, hex: bool| {
        from + src[from..]
            .iter()
            .position(|b| !(b.is_ascii_digit() || hex && b.is_ascii_hexdigit()))
            .unwrap_or(src.len() - from)
    };
    let mut i;
    if src[start] == b'0'
        && matches!(src.get(start + 1), Some(b'x'))
        && src.get(start + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i = digits(start + 2, true);
    } else {
        i = digits(start, false);
        if src.get(i) == Some(&b'.') && src.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i = digits(i + 1, false);
        }
        if matches!(src.get(i), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(src.get(i + 1), Some(b'+' | b'-')));
            if src.get(i + 1 + sign).is_some_and(u8::is_ascii_digit) {
                i = digits(i + 1 + sign, false);
            }
        }
    }
    if matches!(src.get(i), Some(b'u' | b'U')) {
        i += 1;
    }
    i
}

/// A backquoted field name (`` `a.b-c` ``), which holds no brackets.
fn lex_escaped_ident(src: &[u8], start: usize) -> (usize, bool) {
    let body = src[start + 1..]
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b"_.-/ ".contains(&b)))
        .map_or(src.len(), |n| start + 1 + n);
    if body > start + 1 && src.get(body) == Some(&b'`') {
        (body + 1, true)
    } else {
        (start + 1, false)
    }
}

/// A string literal whose quote is at `quote`, as the CEL lexer reads it:
/// the next position and whether a literal was read. Like the lexer, an
/// unterminated `"""…` still yields the empty literal `""`, an unterminated
/// raw literal is read again as a plain one (its `r` being an identifier),
/// and otherwise the quote is dropped and lexing goes on after it.
fn lex_string(src: &[u8], quote: usize, raw: bool) -> (usize, bool) {
    if let Some(end) = string_end(src, quote, raw) {
        return (end, true);
    }
    if triple(src, quote) {
        return (quote + 2, true);
    }
    if raw {
        return lex_string(src, quote, false);
    }
    (quote + 1, false)
}

fn triple(src: &[u8], at: usize) -> bool {
    src.get(at + 1) == Some(&src[at]) && src.get(at + 2) == Some(&src[at])
}

/// The position after the closing quote of a complete literal, if any.
fn string_end(src: &[u8], quote: usize, raw: bool) -> Option<usize> {
    let q = src[quote];
    if triple(src, quote) {
        let mut j = quote + 3;
        while j < src.len() {
            if src[j] == q && triple(src, j) {
                return Some(j + 3);
            }
            j += if !raw && src[j] == b'\\' {
                escape_len(src, j)?
            } else {
                1
            };
        }
        return None;
    }
    let mut j = quote + 1;
    while j < src.len() {
        match src[j] {
            c if c == q => return Some(j + 1),
            b'\n' | b'\r' => return None,
            b'\\' if !raw => j += escape_len(src, j)?,
            _ => j += 1,
        }
    }
    None
}

/// The length of a valid escape sequence at `at` (a backslash).
fn escape_len(src: &[u8], at: usize) -> Option<usize> {
    let all = |from: usize, n: usize, ok: fn(&u8) -> bool| {
        src.get(from..from + n).is_some_and(|s| s.iter().all(ok))
    };
    let octal = |b: &u8| (b'0'..=b'7').contains(b);
    match src.get(at + 1)? {
        b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'"' | b'\'' | b'\\' | b'?' | b'`' => {
            Some(2)
        }
        b'x' | b'X' if all(at + 2, 2, u8::is_ascii_hexdigit) => Some(4),
        b'u' if all(at + 2, 4, u8::is_ascii_hexdigit) => Some(6),
        b'U' if all(at + 2, 8, u8::is_ascii_hexdigit) => Some(10),
        b'0'..=b'3' if all(at + 2, 2, octal) => Some(4),
        _ => None,
    }
}

/// Checks a parsed expression: its depth, that it uses no message literals
/// (`Foo{a: 1}`, which the library cannot evaluate) and that every
/// `matches()` pattern is a string literal of bounded size. Returns the
/// patterns, which the cost estimate uses.
///
/// Walks with an explicit stack, so any tree the parser built is safe to check.
pub(super) fn check_tree(root: &IdedExpr) -> Result<Patterns, PolicyError> {
    let mut regexes = Patterns::default();
    let mut stack: Vec<(&IdedExpr, usize)> = vec![(root, 1)];
    while let Some((node, depth)) = stack.pop() {
        if depth > MAX_AST_DEPTH {
            return Err(PolicyError::Limit(format!(
                "expression nested too deeply: more than {MAX_AST_DEPTH} levels of \
                 operators, calls and fields; split it into several rules"
            )));
        }
        let mut push = |child| stack.push((child, depth + 1));
        match &node.expr {
            Expr::Call(call) => {
                if call.func_name == "matches" {
                    regexes.insert(node.id, pattern(call.args.last())?);
                }
                if let Some(target) = &call.target {
                    push(target);
                }
                call.args.iter().for_each(&mut push);
            }
            Expr::Comprehension(c) => {
                for child in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    push(child);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(&mut push),
            Expr::Map(map) => {
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) => {
                            push(&e.key);
                            push(&e.value);
                        }
                        EntryExpr::StructField(_) => return Err(message_literal("")),
                    }
                }
            }
            Expr::Select(select) => push(&select.operand),
            Expr::Struct(s) => return Err(message_literal(&s.type_name)),
            Expr::Unspecified => {
                return Err(PolicyError::Compile("syntax error".to_string()));
            }
            Expr::Ident(_) | Expr::Literal(_) => {}
        }
    }
    Ok(regexes)
}

fn message_literal(type_name: &str) -> PolicyError {
    PolicyError::Unsupported(format!(
        "message literals such as `{}{{…}}` cannot be evaluated; use a map literal `{{'key': value}}`",
        if type_name.is_empty() {
            "Foo"
        } else {
            type_name
        }
    ))
}

/// A `matches()` call's pattern. The library compiles the pattern at every
/// call; only a literal pattern can be bounded in advance.
fn pattern(pattern: Option<&IdedExpr>) -> Result<patterns::Pattern, PolicyError> {
    match pattern {
        Some(IdedExpr {
            expr: Expr::Literal(Val::String(pattern)),
            ..
        }) => patterns::classify(pattern),
        // A call without arguments fails at once.
        None => Ok(patterns::Pattern {
            size: 0,
            per_call: false,
        }),
        Some(_) => Err(PolicyError::Unsupported(
            "matches() needs a string literal as its pattern: a pattern computed \
             at run time cannot be bounded"
                .to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nesting_error(expression: &str) -> bool {
        matches!(check_text(expression), Err(PolicyError::Limit(m)) if m.starts_with("brackets"))
    }

    #[test]
    fn brackets_in_strings_and_comments_do_not_count() {
        let deep = "(".repeat(MAX_NESTING + 1);
        assert!(nesting_error(&format!("{deep}1")));
        assert!(!nesting_error(&format!("'{deep}' == \"{deep}\"")));
        assert!(
            !nesting_error(&format!("r'\\' + '{deep}'")),
            "raw: the backslash does not escape"
        );
        assert!(!nesting_error(&format!("'\\'{deep}'")), "escaped quote");
        assert!(
            !nesting_error(&format!("'''a'{deep}\n'''")),
            "triple quotes span lines"
        );
        assert!(
            !nesting_error(&format!("br\"\"\"\\{deep}\"\"\"")),
            "raw bytes"
        );
        assert!(!nesting_error(&format!("1 // {deep}\n")), "comment");
        // Lexed as the lexer does: an invalid escape or a line break ends no
        // literal, so the brackets after the quote are code.
        assert!(nesting_error(&format!("'\\q{deep}1")));
        assert!(nesting_error(&format!("'a\n{deep}1")));
        assert!(nesting_error(&format!("\"\"\"{deep}1")));
        // `bar` is an identifier, so its quote starts a plain literal.
        assert!(nesting_error(&format!("bar'\\' {deep}")));
        assert!(!nesting_error(&format!("1r'\\' + '{deep}'")));
    }

    #[test]
    fn nesting_at_the_limit_is_fine() {
        let ok = format!("{}1{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert_eq!(check_text(&ok), Ok(()));
    }

    #[test]
    fn repeated_unary_operators_are_counted_outside_literals() {
        let three = "!!a && !!b && - -1 == 1 && x - -1 > 0";
        assert_eq!(check_text(three), Err(repeated_unary(three, 14)));
        assert!(
            repeated_unary(three, 14)
                .to_string()
                .contains("at column 15")
        );
        assert_eq!(
            check_text("a - -1 > b - -2 && c != !d && e--f < 0"),
            Ok(()),
            "binary minus then unary"
        );
        assert_eq!(check_text("'--a' + '!!b' + '--c' + \"--d\""), Ok(()));
        assert_eq!(check_text("x in --y && !!a"), Ok(()));
    }

    #[test]
    fn place_names_line_and_column() {
        assert_eq!(place("abc", 1), "at column 2");
        assert_eq!(place("a\nbc\n", 3), "at line 2, column 2");
    }
}
