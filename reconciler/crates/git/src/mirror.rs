//! A local bare mirror of a remote fleet repository, for `reconcile --repo URL`.

use std::path::Path;

use git2::{AutotagOption, FetchOptions, Repository};

use super::{GitSource, SourceError};

/// Clones `url` into the bare repository `dir` (created when missing) or
/// fetches into it when it already exists, so that `refs/heads/BRANCH` and
/// `HEAD` point at the remote's `BRANCH`. Works for every URL git2 handles
/// without TLS or SSH (this build has neither): a local path or `file://`.
/// The returned source reads the repository's root; narrow it with
/// [`GitSource::with_subdir`].
pub fn fetch_mirror(url: &str, dir: &Path, branch: &str) -> Result<GitSource, SourceError> {
    let fetch_err = |source| SourceError::Fetch {
        url: url.to_string(),
        dir: dir.display().to_string(),
        cause: source,
    };
    let repo = match Repository::open_bare(dir) {
        Ok(repo) => repo,
        Err(_) => Repository::init_bare(dir).map_err(fetch_err)?,
    };
    {
        let mut remote = repo.remote_anonymous(url).map_err(fetch_err)?;
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        let mut options = FetchOptions::new();
        options.download_tags(AutotagOption::None);
        remote
            .fetch(&[refspec.as_str()], Some(&mut options), None)
            .map_err(fetch_err)?;
    }
    let head = format!("refs/heads/{branch}");
    repo.find_reference(&head).map_err(fetch_err)?;
    repo.set_head(&head).map_err(fetch_err)?;
    Ok(GitSource::from_repository(repo, ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::tests::commit;

    #[test]
    fn clones_then_fetches_new_commits() {
        let dir = tempfile::tempdir().unwrap();
        let upstream = Repository::init(dir.path().join("up")).unwrap();
        let first = commit(&upstream, &[("a.yaml", Some("a\n"))], "one", 1_700_000_000);
        let branch = upstream.head().unwrap().shorthand().unwrap().to_string();
        let url = dir.path().join("up").display().to_string();
        let mirror = dir.path().join("mirror.git");
        let source = fetch_mirror(&url, &mirror, &branch).unwrap();
        assert_eq!(source.resolve("HEAD").unwrap(), first.to_string());
        let second = commit(&upstream, &[("a.yaml", Some("b\n"))], "two", 1_700_000_100);
        let url = format!("file://{url}");
        let source = fetch_mirror(&url, &mirror, &branch).unwrap();
        assert_eq!(source.resolve("HEAD").unwrap(), second.to_string());
        assert_eq!(source.read_files("HEAD").unwrap()[0].bytes, b"b\n");
        let err = fetch_mirror(&url, &mirror, "no-such-branch").unwrap_err();
        assert!(err.to_string().starts_with("cannot fetch file://"), "{err}");
    }
}
