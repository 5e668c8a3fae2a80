//! Where fleet specs come from besides a directory: a Git repository, read
//! object by object with git2 (no checkout, no work tree).
//!
//! Files read from Git are named `REV:path/in/repo.yaml` (the syntax of
//! `git show`), so every diagnostic names the revision and the file.

mod git;
pub mod history;
mod mirror;

pub use git::{CommitInfo, GitSource, SignedData, file_label, rev_label, short_id};
pub use mirror::fetch_mirror;

/// Why a fleet could not be read from Git.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The path given does not exist.
    #[error("cannot read {path}")]
    Path {
        /// The path as given.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No repository contains the path.
    #[error("{path} is not inside a Git repository ({})", source.message())]
    Discover {
        /// The path as given.
        path: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
    /// The revision does not exist.
    #[error("unknown revision `{rev}` ({})", source.message())]
    Revision {
        /// The revision as given.
        rev: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
    /// The revision names something that is not a commit (a blob, a tree).
    #[error("revision `{rev}` is not a commit ({})", source.message())]
    NotACommit {
        /// The revision as given.
        rev: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
    /// The fleet's directory is not in the revision's tree.
    #[error("{rev}:{path}: no such file or directory in revision `{rev}`")]
    MissingPath {
        /// The revision.
        rev: String,
        /// The fleet's path inside the repository.
        path: String,
    },
    /// A file, or the fleet as a whole, is larger than a fleet may be
    /// ([`load::fs::MAX_FILE_BYTES`], [`load::fs::MAX_FLEET_BYTES`]).
    #[error("{rev}:{path}: {size} bytes{what}, more than the {limit} allowed; not read")]
    TooLarge {
        /// The revision.
        rev: String,
        /// The file in the repository (the last one counted, for the fleet).
        path: String,
        /// Its size, or the fleet's up to it.
        size: u64,
        /// `""` for one file, `" in the fleet's files up to this one"`.
        what: &'static str,
        /// The limit passed.
        limit: u64,
    },
    /// An object of the revision's tree could not be read.
    #[error("{rev}:{path}: cannot read the Git object ({})", source.message())]
    Object {
        /// The revision.
        rev: String,
        /// The path inside the repository.
        path: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
    /// Walking the history failed.
    #[error("cannot walk the history from `{rev}` ({})", source.message())]
    Walk {
        /// The revision the walk started from.
        rev: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
    /// Cloning or fetching a remote failed.
    #[error("cannot fetch {url} into {dir} ({})", source.message())]
    Fetch {
        /// The remote's URL.
        url: String,
        /// The mirror directory.
        dir: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
}
