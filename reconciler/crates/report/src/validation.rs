//! `gitfleet validate`'s verdict: problems and a summary line for people,
//! one versioned JSON document for programs (`validate -o json`).

use std::fmt::Write;

use serde::{Serialize, Serializer};

/// The version of `validate -o json`'s document; bumped only when a field
/// is renamed or removed (fields may be added within a version).
pub const VALIDATION_FORMAT_VERSION: u32 = 1;

/// What `validate` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Validation {
    /// [`VALIDATION_FORMAT_VERSION`].
    pub format_version: u32,
    /// The fleet's path as given.
    pub path: String,
    /// The revision read, with `--rev`.
    pub rev: Option<String>,
    /// Its full commit id, with `--rev`.
    pub commit: Option<String>,
    /// Whether the fleet validates.
    pub valid: bool,
    /// YAML files read.
    pub files: usize,
    /// Documents per kind (`NodePool`, `Queue`, …), in the kinds' order; a
    /// JSON object.
    #[serde(serialize_with = "as_map")]
    pub documents: Vec<(&'static str, usize)>,
    /// Files with at least one error.
    pub files_with_errors: usize,
    /// How many errors there are.
    pub error_count: usize,
    /// Every problem, sorted by file and position.
    pub errors: Vec<ValidationError>,
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValidationError {
    /// The file (`REV:path` with `--rev`).
    pub file: String,
    /// 1-based line; `null` for a problem of no place in a file.
    pub line: Option<u32>,
    /// 1-based column; `null` with the line.
    pub column: Option<u32>,
    /// What is wrong.
    pub message: String,
    /// `FILE:LINE:COL: message`, as the text prints it (committed text made
    /// inert).
    pub text: String,
}

fn as_map<S: Serializer>(pairs: &[(&'static str, usize)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The verdict for a terminal: every problem, then one summary line
/// (`valid: 50 documents in 15 files (…)`, `invalid: 3 errors in 2 files`).
pub fn validation_text(v: &Validation) -> String {
    let at = match (&v.rev, &v.commit) {
        (Some(rev), Some(commit)) => format!(" at {rev} ({})", commit.get(..12).unwrap_or(commit)),
        _ => String::new(),
    };
    let mut out = String::new();
    let files = v.files;
    if v.valid {
        let total: usize = v.documents.iter().map(|(_, n)| n).sum();
        if total == 0 {
            let _ = writeln!(
                out,
                "valid: no {} documents found ({files} YAML file{} read){at}",
                model::spec::API_VERSION,
                plural(files)
            );
            return out;
        }
        let counts: Vec<String> = v
            .documents
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        let _ = writeln!(
            out,
            "valid: {total} document{} in {files} file{} ({}){at}",
            plural(total),
            plural(files),
            counts.join(", ")
        );
        return out;
    }
    for error in &v.errors {
        let _ = writeln!(out, "{}", error.text);
    }
    let _ = writeln!(
        out,
        "invalid: {} error{} in {} file{}{at}",
        v.error_count,
        plural(v.error_count),
        v.files_with_errors,
        plural(v.files_with_errors)
    );
    out
}
