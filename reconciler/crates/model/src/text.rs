//! Text from users (file names, names, commit messages) made safe to print.
//!
//! A committed file named `x\n::error::…` or a name holding `ESC[2J` must not
//! print a GitHub Actions workflow command in a CI log or drive a terminal:
//! control characters (C0 but tab, DEL, C1) and the bidirectional overrides
//! that reorder what a reader sees (Trojan Source) are written as Rust
//! escapes (`\n`, `\u{1b}`, `\u{202e}`).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Write;

/// Whether `c` must not reach a terminal or log as it is.
pub fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every unsafe character escaped; borrowed when there is none.
/// A leading `::` (after spaces), which starts a GitHub Actions workflow
/// command when the text starts a line, has its first colon escaped.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let command = text.trim_start_matches([' ', '\t']).starts_with("::");
    if !command && !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    if command {
        while let Some(c) = chars.next_if(|c| *c == ' ' || *c == '\t') {
            out.push(c);
        }
        chars.next();
        out.push_str("\\u{3a}");
    }
    for c in chars {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Compares names with runs of digits as numbers (`n2` before `n10`).
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (&a[..da], &b[..db]);
                let ta = trim_zeros(na);
                let tb = trim_zeros(nb);
                let order = ta.len().cmp(&tb.len()).then(ta.cmp(tb)).then(da.cmp(&db));
                if order != Ordering::Equal {
                    return order;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|c| **c == b'0').count();
    &digits[zeros..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_are_escaped_the_rest_kept() {
        assert!(matches!(
            escape_controls("plain ütf-8\ttab"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\n::error::x\u{1b}[31m\r\u{7f}\u{85}\u{202e}z"),
            "a\\n::error::x\\u{1b}[31m\\r\\u{7f}\\u{85}\\u{202e}z"
        );
    }

    #[test]
    fn a_leading_workflow_command_is_defused() {
        assert_eq!(escape_controls("::error::x"), "\\u{3a}:error::x");
        assert_eq!(escape_controls("  ::set-env"), "  \\u{3a}:set-env");
        assert!(matches!(escape_controls("a ::b"), Cow::Borrowed(_)));
    }

    #[test]
    fn natural_order_reads_numbers_as_numbers() {
        let mut names = vec!["n10", "n2", "n1", "m", "n02", "n1a"];
        names.sort_by(|a, b| super::natural_cmp(a, b));
        assert_eq!(names, ["m", "n1", "n1a", "n2", "n02", "n10"]);
    }
}
