//! Specs read from Git (`--rev`, `--base`), shared by the input loader
//! (`plan`, `explain`), `plan --base`, `validate` and `history`.

use std::path::Path;

use miette::{IntoDiagnostic, Result};
use reconciler::load::{Loaded, SourceFile, load_fleet};
use reconciler::source::GitSource;

/// The fleet's files at one revision.
pub struct SpecsAt {
    /// The revision as given (`main`, `HEAD~1`).
    pub rev: String,
    /// Its full commit id.
    pub commit: String,
    /// The fleet's files, named `REV:path/in/repo.yaml`.
    pub files: Vec<SourceFile>,
}

/// Opens the repository that holds `path` (a fleet directory or file inside
/// a work tree, a bare repository, or a worktree).
pub fn open(path: &Path) -> Result<GitSource> {
    GitSource::discover(path).into_diagnostic()
}

/// Reads the fleet's files at `rev`.
pub fn read_at(source: &GitSource, rev: &str) -> Result<SpecsAt> {
    let commit = source.resolve(rev).into_diagnostic()?;
    let files = source.read_files(rev).into_diagnostic()?;
    Ok(SpecsAt {
        rev: rev.to_string(),
        commit,
        files,
    })
}

/// Loads and validates the specs; prints the problems to stderr when they
/// do not validate, with a hint naming the revision.
pub fn load_reporting(specs: &SpecsAt, path: &Path) -> Loaded {
    let loaded = load_fleet(&specs.files);
    if !loaded.is_valid() {
        for d in &loaded.diagnostics {
            eprintln!("{d}");
        }
        let n = loaded.diagnostics.len();
        eprintln!(
            "invalid fleet at {} ({}): {n} error{}; run `gitfleet validate --rev {} {}`",
            specs.rev,
            reconciler::source::short_id(&specs.commit),
            if n == 1 { "" } else { "s" },
            specs.rev,
            path.display()
        );
    }
    loaded
}
