//! `matches()`: literal patterns only, compiled when the rule is and kept for
//! the policy thread, instead of at every call as the library does.

use std::cell::RefCell;
use std::sync::Arc;

use cel_interpreter::extractors::This;
use cel_interpreter::{ExecutionError, FunctionContext};
use regex::{Regex, RegexBuilder};
use rustc_hash::FxHashMap;

use super::PolicyError;
use super::limits::MAX_REGEX_BYTES;

/// What the cost estimate needs to know of one `matches()` call's pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pattern {
    /// The compiled-size class, in bytes (0 for an invalid pattern, which
    /// fails as soon as it is parsed).
    pub(super) size: u64,
    /// Whether it is compiled at every call (the cache being full).
    pub(super) per_call: bool,
}

/// The pattern of every `matches()` call, by call node id.
pub(super) type Patterns = FxHashMap<u64, Pattern>;

/// Compiled-size classes tried for a pattern, smallest first.
const SIZE_CLASSES: [usize; 5] = [1 << 12, 1 << 14, 1 << 16, 1 << 18, MAX_REGEX_BYTES];
/// At most this many compiled patterns are kept, of this total size class.
const MAX_KEPT: usize = 64;
const MAX_KEPT_BYTES: usize = 16 << 20;
/// The lazy DFA's cache per pattern (the library's default is 2 MiB).
const DFA_BYTES: usize = 1 << 20;

#[derive(Default)]
struct Kept {
    regexes: FxHashMap<String, (Regex, usize)>,
    bytes: usize,
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
}

fn build(pattern: &str, size_limit: usize) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(size_limit)
        .dfa_size_limit(DFA_BYTES)
        .build()
}

/// Classifies a literal pattern by compiled size, keeping it compiled when
/// there is room.
pub(super) fn classify(pattern: &str) -> Result<Pattern, PolicyError> {
    if let Some(size) = KEPT.with(|k| k.borrow().regexes.get(pattern).map(|(_, s)| *s)) {
        return Ok(Pattern {
            size: size as u64,
            per_call: false,
        });
    }
    for class in SIZE_CLASSES {
        match build(pattern, class) {
            Ok(regex) => {
                let kept = KEPT.with(|k| {
                    let mut k = k.borrow_mut();
                    let room = k.regexes.len() < MAX_KEPT && k.bytes + class <= MAX_KEPT_BYTES;
                    if room {
                        k.bytes += class;
                        k.regexes.insert(pattern.to_string(), (regex, class));
                    }
                    room
                });
                return Ok(Pattern {
                    size: class as u64,
                    per_call: !kept,
                });
            }
            Err(regex::Error::CompiledTooBig(_)) => continue,
            // The call reports the invalid pattern when the rule runs.
            Err(_) => {
                return Ok(Pattern {
                    size: 0,
                    per_call: false,
                });
            }
        }
    }
    Err(PolicyError::Limit(format!(
        "regular expression too complex: it compiles to more than {} KiB",
        MAX_REGEX_BYTES / 1024
    )))
}

/// The policy thread's `matches()`: as the library's, with kept patterns.
pub(super) fn matches(
    ftx: &FunctionContext,
    This(this): This<Arc<String>>,
    pattern: Arc<String>,
) -> Result<bool, ExecutionError> {
    let kept = KEPT.with(|k| {
        (k.borrow().regexes.get(pattern.as_str())).map(|(regex, _)| regex.is_match(&this))
    });
    if let Some(found) = kept {
        return Ok(found);
    }
    match build(&pattern, MAX_REGEX_BYTES) {
        Ok(regex) => Ok(regex.is_match(&this)),
        Err(err) => Err(ftx.error(format!("'{pattern}' not a valid regex:\n{err}"))),
    }
}
