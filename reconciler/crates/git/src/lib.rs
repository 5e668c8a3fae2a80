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
    #[error("{path} is not inside a Git repository{}", plain(cause))]
    Discover {
        /// The path as given.
        path: String,
        /// git2's error (shown in plain words by the message, not chained:
        /// its class and code mean nothing to a user).
        cause: git2::Error,
    },
    /// The revision does not exist, is ambiguous or is not valid syntax.
    #[error("{}", revision_words(rev, cause))]
    Revision {
        /// The revision as given.
        rev: String,
        /// git2's error (shown in plain words by the message, not chained:
        /// its class and code mean nothing to a user).
        cause: git2::Error,
    },
    /// The revision names something that is not a commit (a blob, a tree).
    #[error("revision `{rev}` is not a commit{}", plain(cause))]
    NotACommit {
        /// The revision as given.
        rev: String,
        /// git2's error (shown in plain words by the message, not chained:
        /// its class and code mean nothing to a user).
        cause: git2::Error,
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
    #[error("{rev}:{path}: cannot read the Git object{}", plain(cause))]
    Object {
        /// The revision.
        rev: String,
        /// The path inside the repository.
        path: String,
        /// git2's error (shown in plain words by the message, not chained:
        /// its class and code mean nothing to a user).
        cause: git2::Error,
    },
    /// Walking the history failed.
    #[error("cannot walk the history from `{rev}`{}", plain(cause))]
    Walk {
        /// The revision the walk started from.
        rev: String,
        /// git2's error (shown in plain words by the message, not chained:
        /// its class and code mean nothing to a user).
        cause: git2::Error,
    },
    /// Cloning or fetching a remote failed.
    #[error("cannot fetch {url} into {dir}{}", plain(cause))]
    Fetch {
        /// The remote's URL.
        url: String,
        /// The mirror directory.
        dir: String,
        /// git2's error (shown in plain words by the message, not chained:
        /// its class and code mean nothing to a user).
        cause: git2::Error,
    },
}

/// git2's error in words for a user, to follow a message that already names
/// the path or revision: nothing when that message says it all (not found),
/// else `: ` and libgit2's message without its class and code
/// (`class=Reference (4); code=NotFound (-3)` is noise to a user).
fn plain(cause: &git2::Error) -> String {
    use git2::ErrorCode;
    let said = match cause.code() {
        ErrorCode::NotFound => return String::new(),
        ErrorCode::Ambiguous => "more than one object matches it".to_string(),
        ErrorCode::Auth => "authentication failed".to_string(),
        ErrorCode::Certificate => "the server's certificate was not accepted".to_string(),
        ErrorCode::Locked => "the repository is locked by another Git process".to_string(),
        ErrorCode::InvalidSpec => "not a valid revision".to_string(),
        _ => cause.message().trim_end_matches(['.', ' ']).to_string(),
    };
    format!(": {said}")
}

/// Why a revision could not be resolved, in words that match the cause:
/// unknown (not found), ambiguous (an abbreviated id that several objects
/// share, or one too short), or not valid revision syntax.
fn revision_words(rev: &str, cause: &git2::Error) -> String {
    use git2::ErrorCode;
    match cause.code() {
        ErrorCode::Ambiguous => format!(
            "ambiguous revision `{rev}`: more than one object matches it (give more digits of the commit id, or a branch or tag)"
        ),
        ErrorCode::InvalidSpec => format!(
            "invalid revision `{rev}`: not a branch, tag, commit id or revision expression Git understands"
        ),
        _ => format!(
            "unknown revision `{rev}`: no branch, tag or commit of that name{}",
            plain(cause)
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn git2_errors_read_without_class_and_code() {
        let not_found = git2::Error::new(
            git2::ErrorCode::NotFound,
            git2::ErrorClass::Reference,
            "revspec 'nope' not found",
        );
        let err = super::SourceError::Revision {
            rev: "nope".into(),
            cause: not_found,
        };
        assert_eq!(
            err.to_string(),
            "unknown revision `nope`: no branch, tag or commit of that name"
        );
        assert!(std::error::Error::source(&err).is_none());
        // An abbreviated id several objects share (or too short): ambiguous,
        // not "no commit of that name".
        let ambiguous = super::SourceError::Revision {
            rev: "bad".into(),
            cause: git2::Error::new(
                git2::ErrorCode::Ambiguous,
                git2::ErrorClass::Odb,
                "ambiguous OID prefix - found multiple pack entries",
            ),
        };
        assert_eq!(
            ambiguous.to_string(),
            "ambiguous revision `bad`: more than one object matches it (give more digits of the commit id, or a branch or tag)"
        );
        let invalid = super::SourceError::Revision {
            rev: "a..b..c".into(),
            cause: git2::Error::new(
                git2::ErrorCode::InvalidSpec,
                git2::ErrorClass::Invalid,
                "failed to parse revision specifier - Invalid pattern 'a..b..c'",
            ),
        };
        assert_eq!(
            invalid.to_string(),
            "invalid revision `a..b..c`: not a branch, tag, commit id or revision expression Git understands"
        );
        let other = git2::Error::new(
            git2::ErrorCode::GenericError,
            git2::ErrorClass::Net,
            "failed to resolve address for nowhere.invalid: Name or service not known",
        );
        let err = super::SourceError::Fetch {
            url: "https://nowhere.invalid/fleet.git".into(),
            dir: "/tmp/m".into(),
            cause: other,
        };
        let text = err.to_string();
        assert_eq!(
            text,
            "cannot fetch https://nowhere.invalid/fleet.git into /tmp/m: \
             failed to resolve address for nowhere.invalid: Name or service not known"
        );
        assert!(!text.contains("class=") && !text.contains("code="));
    }
}
