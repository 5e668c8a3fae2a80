//! Where the reconcile loop reads the desired fleet: a branch of a Git
//! repository (the GitOps case: only committed specs are applied), or a
//! plain directory (no Git; its revision is a digest of its files).

use std::path::{Path, PathBuf};

use git::{GitSource, SourceError, fetch_mirror, rev_label, short_id};
use load::cache::{DocumentCache, LoadStats};
use load::fs::read_fleet_dir;
use load::{Loaded, SourceFile, load_fleet};
use model::spec::Fleet;

/// Why the desired fleet could not be read (not: why it is invalid).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Git failed.
    #[error(transparent)]
    Git(#[from] SourceError),
    /// The directory could not be read.
    #[error(transparent)]
    Dir(#[from] load::fs::ReadError),
}

/// A revision of the desired fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// A commit id, or `dir:<digest>` for a directory.
    pub id: String,
    /// What changes when the fleet's files change (the fleet's tree id in Git;
    /// the digest for a directory): commits that do not touch the fleet keep it.
    pub content: String,
}

impl Revision {
    /// The id as people read it (12 hex digits of a commit).
    pub fn short(&self) -> &str {
        short_id(&self.id)
    }
}

/// The desired fleet's origin.
#[derive(Debug)]
pub enum FleetSource {
    /// A branch (or any revision spec) of a Git repository.
    Git {
        /// The repository and the fleet's directory in it.
        repo: GitSource,
        /// What to follow: `HEAD`, a branch name, ….
        rev: String,
    },
    /// A remote repository, mirrored into a local bare repository and
    /// fetched before every iteration.
    Remote {
        /// The remote's URL (a path or `file://`; no TLS/SSH in this build).
        url: String,
        /// The mirror (a bare repository in the state directory).
        mirror: PathBuf,
        /// The branch followed.
        branch: String,
        /// The fleet's directory inside the repository (`""`: its root).
        subdir: String,
        /// The mirror, once fetched.
        repo: Option<GitSource>,
    },
    /// A directory read as it is.
    Dir {
        /// The directory (or single file).
        path: PathBuf,
    },
}

impl FleetSource {
    /// A Git source when `path` lies in a repository, else a directory.
    /// `branch` (default `HEAD`) is what a Git source follows.
    pub fn detect(path: &Path, branch: Option<&str>) -> FleetSource {
        match GitSource::discover(path) {
            Ok(repo) => FleetSource::Git {
                repo,
                rev: branch.unwrap_or("HEAD").to_string(),
            },
            Err(_) => FleetSource::Dir {
                path: path.to_path_buf(),
            },
        }
    }

    /// The newest revision (a remote is fetched first).
    pub fn current(&mut self) -> Result<Revision, FetchError> {
        match self {
            FleetSource::Git { repo, rev } => git_revision(repo, rev),
            FleetSource::Remote {
                url,
                mirror,
                branch,
                subdir,
                repo,
            } => {
                fetch_mirror(url, mirror, branch)?;
                let fetched = GitSource::open(mirror, subdir)?;
                let revision = git_revision(&fetched, branch)?;
                *repo = Some(fetched);
                Ok(revision)
            }
            FleetSource::Dir { path } => {
                let digest = format!("dir:{:016x}", digest(&read_fleet_dir(path)?));
                Ok(Revision {
                    id: digest.clone(),
                    content: digest,
                })
            }
        }
    }

    /// The fleet's files at `revision`. A directory can only be read as it
    /// is now: its files are returned when their digest still matches.
    pub fn files(&self, revision: &Revision) -> Result<Option<Vec<SourceFile>>, FetchError> {
        match self {
            FleetSource::Git { repo, .. }
            | FleetSource::Remote {
                repo: Some(repo), ..
            } => Ok(Some(repo.read_files(&revision.id)?)),
            FleetSource::Remote { repo: None, .. } => Ok(None),
            FleetSource::Dir { path } => {
                let files = read_fleet_dir(path)?;
                let now = format!("dir:{:016x}", digest(&files));
                Ok((now == revision.id).then_some(files))
            }
        }
    }

    /// The fleet at `revision`, loaded and validated: what
    /// [`load_fleet`] gives for [`FleetSource::files`], `None` when that is
    /// `None`. From Git, through `cache`: files whose blob is unchanged
    /// since the last load are neither read nor parsed again
    /// ([`load::cache`]); a directory is loaded from scratch.
    pub fn load(
        &self,
        revision: &Revision,
        cache: &mut DocumentCache,
    ) -> Result<Option<(Loaded, LoadStats)>, FetchError> {
        self.load_reusing(revision, cache, &mut None)
    }

    /// [`FleetSource::load`], lending the cache `previous`, the fleet its
    /// last clean load gave ([`DocumentCache::load_reusing`]): taken only
    /// when the revision is valid, its unchanged documents moved into the
    /// new fleet. A directory leaves it alone.
    pub fn load_reusing(
        &self,
        revision: &Revision,
        cache: &mut DocumentCache,
        previous: &mut Option<Fleet>,
    ) -> Result<Option<(Loaded, LoadStats)>, FetchError> {
        match self {
            FleetSource::Git { repo, .. }
            | FleetSource::Remote {
                repo: Some(repo), ..
            } => {
                let commit = repo.resolve_oid(&revision.id)?;
                let label = rev_label(&revision.id);
                let listed = repo.list_files_at(commit, &label)?;
                let loaded =
                    cache.load_reusing(&listed, |file| repo.read_listed(file, &label), previous)?;
                Ok(Some(loaded))
            }
            FleetSource::Remote { repo: None, .. } => Ok(None),
            FleetSource::Dir { .. } => {
                let started = std::time::Instant::now();
                let Some(files) = self.files(revision)? else {
                    return Ok(None);
                };
                let read = started.elapsed();
                let started = std::time::Instant::now();
                let loaded = load_fleet(&files);
                let stats = LoadStats {
                    files: files.len(),
                    parsed: files.len(),
                    full: true,
                    read,
                    fallback: started.elapsed(),
                    ..LoadStats::default()
                };
                Ok(Some((loaded, stats)))
            }
        }
    }

    /// The Git repository, when the source is one (and has been fetched).
    pub fn git(&self) -> Option<&GitSource> {
        match self {
            FleetSource::Git { repo, .. } => Some(repo),
            FleetSource::Remote { repo, .. } => repo.as_ref(),
            FleetSource::Dir { .. } => None,
        }
    }

    /// `git`, `remote` or `dir`, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            FleetSource::Git { .. } => "git",
            FleetSource::Remote { .. } => "remote",
            FleetSource::Dir { .. } => "dir",
        }
    }
}

fn git_revision(repo: &GitSource, rev: &str) -> Result<Revision, FetchError> {
    let oid = repo.resolve_oid(rev)?;
    let content = repo
        .fleet_id_at(oid)?
        .map(|t| t.to_string())
        .unwrap_or_default();
    Ok(Revision {
        id: oid.to_string(),
        content,
    })
}

/// FNV-1a over the files' paths and bytes: stable across runs and builds.
fn digest(files: &[SourceFile]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in files {
        eat(file.path.as_bytes());
        eat(&[0]);
        eat(&file.bytes);
        eat(&[0]);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_revision_follows_content() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), "x: 1\n").unwrap();
        let mut source = FleetSource::Dir {
            path: dir.path().to_path_buf(),
        };
        let first = source.current().unwrap();
        assert_eq!(source.current().unwrap(), first, "stable");
        assert!(source.files(&first).unwrap().is_some());
        std::fs::write(dir.path().join("a.yaml"), "x: 2\n").unwrap();
        let second = source.current().unwrap();
        assert_ne!(first, second);
        assert!(source.files(&first).unwrap().is_none(), "gone from disk");
    }
}
