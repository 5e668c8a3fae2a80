//! The dashboard's history page (`/history?rev=ID`): the semantic history
//! of a Git fleet from a commit the action log links to, as `gitfleet
//! history` walks it, the newest [`HISTORY_LIMIT`] changes. Only a commit
//! id (hexadecimal) is accepted, never a revision expression.

use std::path::PathBuf;

use dashboard::history::{CommitView, HistoryView};
use git::history::{HistoryQuery, history};
use git::{GitSource, SourceError};

/// The most commits one history page shows.
pub const HISTORY_LIMIT: usize = 20;

/// Where the history page reads commits: a repository (its `.git`
/// directory, a work tree or a bare mirror) and the fleet's path in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRepo {
    /// The repository.
    pub path: PathBuf,
    /// The fleet's directory inside its tree (`""`: the root).
    pub subdir: String,
}

impl HistoryRepo {
    /// Where `source`'s history is read from.
    pub fn of(source: &GitSource) -> Self {
        Self {
            path: source.repository().path().to_path_buf(),
            subdir: source.subdir().to_string(),
        }
    }
}

/// Why a history page could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum HistoryPageError {
    /// The revision asked for is not a commit id.
    #[error("{0:?} is not a commit id (4 to 64 hexadecimal digits)")]
    NotACommit(String),
    /// The repository could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// Whether `rev` is accepted: a commit id or an abbreviation of one.
pub fn is_commit_id(rev: &str) -> bool {
    (4..=64).contains(&rev.len()) && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The newest [`HISTORY_LIMIT`] changes of the fleet up to commit `rev`.
pub fn history_view(repo: &HistoryRepo, rev: &str) -> Result<HistoryView, HistoryPageError> {
    if !is_commit_id(rev) {
        return Err(HistoryPageError::NotACommit(rev.to_string()));
    }
    let source = GitSource::open(&repo.path, &repo.subdir)?;
    let query = HistoryQuery {
        limit: Some(HISTORY_LIMIT),
        ..HistoryQuery::default()
    };
    let commits = history(&source, rev, &query)?
        .into_iter()
        .map(|e| {
            let c = e.commit;
            let mut problems = Vec::new();
            if let Some(invalid) = &e.invalid {
                problems.push(format!(
                    "the fleet does not validate at this commit ({} errors):\n{}",
                    invalid.error_count,
                    invalid.errors.join("\n")
                ));
            }
            if let Some(error) = &e.error {
                problems.push(format!("cannot read this commit: {error}"));
            }
            CommitView {
                id: c.id,
                time: c.time.format("%Y-%m-%d %H:%M:%S %:z").to_string(),
                author: format!("{} <{}>", c.author_name, c.author_email),
                message: c.message,
                changes: e
                    .objects
                    .iter()
                    .flat_map(|o| o.lines().into_iter().map(|l| (o.symbol().to_string(), l)))
                    .collect(),
                problems,
            }
        })
        .collect();
    Ok(HistoryView {
        rev: rev.to_string(),
        commits,
        limit: HISTORY_LIMIT,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_commit_ids_are_walked() {
        let repo = HistoryRepo {
            path: PathBuf::from("/nonexistent"),
            subdir: String::new(),
        };
        for rev in ["HEAD", "main~1", "abc", "abcd..ef01", "--all", ""] {
            assert!(
                matches!(
                    history_view(&repo, rev),
                    Err(HistoryPageError::NotACommit(_))
                ),
                "{rev}"
            );
        }
        assert!(is_commit_id("0123abcd"));
    }
}
