//! Diagnostics: messages tied to `FILE:LINE:COL`, collected rather than thrown.

use std::fmt;
use std::sync::Arc;

use crate::text::escape_controls;

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl Pos {
    /// A position; lines and columns start at 1.
    pub fn new(line: u32, column: u32) -> Self {
        Self {
            line: line.max(1),
            column: column.max(1),
        }
    }
}

/// Where a document (or one of its fields) was read from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// The file as shown to the user (relative to the working directory, or `REV:path`).
    pub file: Arc<str>,
    /// Line and column.
    pub pos: Pos,
}

impl Origin {
    /// An origin in `file` at `pos`; line 0 means no place in a file, and
    /// only `file` (e.g. `revision abc1234`) is shown.
    pub fn new(file: Arc<str>, pos: Pos) -> Self {
        Self { file, pos }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = escape_controls(&self.file);
        if self.pos.line == 0 {
            // Not in a file: the whole revision, say.
            return write!(f, "{file}");
        }
        write!(f, "{file}:{}:{}", self.pos.line, self.pos.column)
    }
}

/// One problem found in a fleet repository.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Diagnostic {
    /// Where it is.
    pub origin: Origin,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic at `origin`.
    pub fn new(origin: Origin, message: impl Into<String>) -> Self {
        Self {
            origin,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, escape_controls(&self.message))
    }
}

/// Sorts diagnostics by file, line, column and message, and drops exact duplicates,
/// so output is stable whatever order checks ran in.
pub fn sort_diagnostics(diags: &mut Vec<Diagnostic>) {
    diags.sort();
    diags.dedup();
}
