//! Reading a fleet from Git objects with git2: no checkout, no work tree.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, FixedOffset, Offset as _};
use git2::{ObjectType, Oid, Repository, Tree};
use serde::Serialize;

use super::SourceError;
use load::SourceFile;
use load::cache::ListedFile;
use load::fs::{MAX_FILE_BYTES, MAX_FLEET_BYTES};

/// A fleet inside a Git repository: the repository and the fleet's directory
/// (or single file) inside its tree. Files are read from the objects of a
/// commit, never from the work tree.
pub struct GitSource {
    repo: Repository,
    /// The fleet's path inside the repository tree, `/`-separated; empty for
    /// the repository root.
    subdir: String,
    /// The sizes of the blobs the last listing read (a blob's id names its
    /// bytes: its size never changes), so that listing the next revision
    /// reads the headers of new blobs only.
    sizes: std::sync::Mutex<HashMap<Oid, u64>>,
}

/// Who made a commit, when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitInfo {
    /// The full commit id (hex).
    pub id: String,
    /// The author's name.
    pub author_name: String,
    /// The author's e-mail address.
    pub author_email: String,
    /// The author date, with the author's UTC offset.
    pub time: DateTime<FixedOffset>,
    /// The first line of the message.
    pub summary: String,
    /// The whole message, trailing newlines removed.
    pub message: String,
    /// The parents' commit ids.
    pub parents: Vec<String>,
}

/// A signed commit's signature and the bytes it signs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedData {
    /// The armored signature (`-----BEGIN SSH SIGNATURE-----` or `PGP`).
    pub signature: Vec<u8>,
    /// The commit object without its signature header.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for GitSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitSource")
            .field("repo", &self.repo.path())
            .field("subdir", &self.subdir)
            .finish()
    }
}

impl GitSource {
    /// Opens the repository that contains `path` and remembers where the
    /// fleet lies in it. `path` is a directory inside a repository's work
    /// tree (a subdirectory is a fleet inside a monorepo), a single YAML file
    /// there, a bare repository, or a worktree made with `git worktree add`.
    ///
    /// `path` need not exist on disk: its nearest existing ancestor locates
    /// the repository and the rest is a path inside the tree, so
    /// `fleet.git/fleet` is the `fleet` directory of the bare repository
    /// `fleet.git`, and a directory deleted from the work tree can still be
    /// read at an older revision.
    pub fn discover(path: &Path) -> Result<Self, SourceError> {
        let shown = path.display().to_string();
        let (existing, rest) = split_existing(path).map_err(|source| SourceError::Path {
            path: shown.clone(),
            source,
        })?;
        let canonical = existing
            .canonicalize()
            .map_err(|source| SourceError::Path {
                path: shown.clone(),
                source,
            })?;
        // Upward from the path, stopping at GIT_CEILING_DIRECTORIES as git does.
        let ceilings = std::env::var_os("GIT_CEILING_DIRECTORIES")
            .map(|dirs| std::env::split_paths(&dirs).collect::<Vec<_>>())
            .unwrap_or_default();
        let repo = Repository::open_ext(&canonical, git2::RepositoryOpenFlags::empty(), ceilings)
            .map_err(|source| SourceError::Discover {
            path: shown.clone(),
            cause: source,
        })?;
        let mut subdir = subdir_of(&repo, &canonical);
        for part in rest {
            if !subdir.is_empty() {
                subdir.push('/');
            }
            subdir.push_str(&part);
        }
        Ok(Self {
            repo,
            subdir,
            sizes: Default::default(),
        })
    }

    /// Opens the repository (its `.git` directory, a work tree or a bare
    /// repository) exactly at `path`, with the fleet at `subdir` inside its
    /// tree (`""` for the root).
    pub fn open(path: &Path, subdir: &str) -> Result<Self, SourceError> {
        let repo = Repository::open(path).map_err(|source| SourceError::Discover {
            path: path.display().to_string(),
            cause: source,
        })?;
        Ok(Self::from_repository(repo, subdir))
    }

    /// Wraps an open repository; `subdir` is the fleet's path inside its tree.
    pub fn from_repository(repo: Repository, subdir: &str) -> Self {
        let subdir = subdir.trim_matches('/').to_string();
        Self {
            repo,
            subdir,
            sizes: Default::default(),
        }
    }

    /// The same repository with the fleet at `subdir` inside its tree.
    pub fn with_subdir(self, subdir: &str) -> Self {
        Self::from_repository(self.repo, subdir)
    }

    /// The repository.
    pub fn repository(&self) -> &Repository {
        &self.repo
    }

    /// The fleet's path inside the repository tree (`""` for the root).
    pub fn subdir(&self) -> &str {
        &self.subdir
    }

    /// The commit whose fleet files the work tree holds: `HEAD`'s id when no
    /// YAML file below the fleet's path is modified, staged, deleted or
    /// untracked (ignored files do not count). `None` for a bare repository,
    /// an unborn `HEAD`, a fleet with changes, or when Git's status cannot be
    /// read: then the files on disk are no commit.
    pub fn work_tree_commit(&self) -> Option<String> {
        if self.repo.is_bare() {
            return None;
        }
        let head = self.repo.head().ok()?.peel_to_commit().ok()?.id();
        let mut options = git2::StatusOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false)
            .exclude_submodules(true);
        if !self.subdir.is_empty() {
            options.pathspec(&self.subdir);
        }
        let statuses = self.repo.statuses(Some(&mut options)).ok()?;
        let changed = statuses.iter().any(|entry| {
            entry.status() != git2::Status::CURRENT
                && load::fs::is_yaml(Path::new(&*String::from_utf8_lossy(entry.path_bytes())))
        });
        (!changed).then(|| head.to_string())
    }

    /// The full commit id (hex) of a revision: `HEAD`, a branch, `HEAD~2`, a
    /// (short) commit id, a tag (annotated tags are peeled to their commit).
    pub fn resolve(&self, rev: &str) -> Result<String, SourceError> {
        Ok(self.resolve_oid(rev)?.to_string())
    }

    /// Like [`GitSource::resolve`], as an object id.
    pub fn resolve_oid(&self, rev: &str) -> Result<Oid, SourceError> {
        let object = self
            .repo
            .revparse_single(rev)
            .map_err(|source| SourceError::Revision {
                rev: rev.to_string(),
                cause: source,
            })?;
        let commit = object
            .peel_to_commit()
            .map_err(|source| SourceError::NotACommit {
                rev: rev.to_string(),
                cause: source,
            })?;
        Ok(commit.id())
    }

    /// A commit's signature (the `gpgsig` header: an SSH or OpenPGP
    /// signature) and the data it signs (the commit object without that
    /// header), as `git verify-commit` checks them; `None` when unsigned.
    pub fn commit_signature(&self, id: &str) -> Result<Option<SignedData>, SourceError> {
        let oid = self.resolve_oid(id)?;
        match self.repo.extract_signature(&oid, None) {
            Ok((signature, data)) => Ok(Some(SignedData {
                signature: signature.to_vec(),
                data: data.to_vec(),
            })),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(source) => Err(SourceError::Revision {
                rev: id.to_string(),
                cause: source,
            }),
        }
    }

    /// The fleet's `*.yaml`/`*.yml` files in the tree of `rev` (any revision
    /// spec; usually a commit id from [`GitSource::resolve`]), below the
    /// fleet's directory, dot-directories and dot-files skipped, sorted by
    /// path: the same files [`load::fs::read_fleet_dir`] reads from a
    /// checkout. Each file is named `REV:path/in/repo.yaml` (see
    /// [`file_label`]), so `git show` opens it as shown.
    pub fn read_files(&self, rev: &str) -> Result<Vec<SourceFile>, SourceError> {
        let oid = self.resolve_oid(rev)?;
        self.read_files_at(oid, &rev_label(rev))
    }

    /// The fleet's files at commit `commit`, named `LABEL:path`.
    pub fn read_files_at(&self, commit: Oid, label: &str) -> Result<Vec<SourceFile>, SourceError> {
        self.list_files_at(commit, label)?
            .into_iter()
            .map(|file| {
                let bytes = self.read_listed(&file, label)?;
                Ok(SourceFile::new(file.name, bytes))
            })
            .collect()
    }

    /// The fleet's YAML files at commit `commit`, named `LABEL:path`, with
    /// their blob ids, in the order [`GitSource::read_files_at`] reads them,
    /// without reading their contents ([`load::cache`] reads only the blobs
    /// it does not hold). The sizes are checked against the limits from the
    /// object headers, so a committed multi-GB blob is refused unread.
    pub fn list_files_at(&self, commit: Oid, label: &str) -> Result<Vec<ListedFile>, SourceError> {
        let mut entries = Vec::new();
        match self.fleet_entry(commit, label)? {
            FleetEntry::Missing => {
                return Err(SourceError::MissingPath {
                    rev: label.to_string(),
                    path: self.subdir.clone(),
                });
            }
            FleetEntry::File(oid) => entries.push((self.subdir.clone(), oid)),
            FleetEntry::Dir(tree) => collect_yaml(&self.repo, &tree, &self.subdir, &mut entries)
                .map_err(|(path, source)| SourceError::Object {
                    rev: label.to_string(),
                    path,
                    cause: source,
                })?,
        }
        entries.sort_by(|a, b| a.0.split('/').cmp(b.0.split('/')));
        let odb = self.repo.odb().map_err(|source| SourceError::Object {
            rev: label.to_string(),
            path: self.subdir.clone(),
            cause: source,
        })?;
        let mut known = self
            .sizes
            .lock()
            .map(|mut k| std::mem::take(&mut *k))
            .unwrap_or_default();
        let mut sizes = HashMap::with_capacity(entries.len());
        let mut total = 0_u64;
        for (path, oid) in &entries {
            let size = match known.remove(oid).or_else(|| sizes.get(oid).copied()) {
                Some(size) => size,
                None => {
                    let (size, _) =
                        odb.read_header(*oid)
                            .map_err(|source| SourceError::Object {
                                rev: label.to_string(),
                                path: path.clone(),
                                cause: source,
                            })?;
                    size as u64
                }
            };
            sizes.insert(*oid, size);
            total += size;
            let too_large = |size, what, limit| SourceError::TooLarge {
                rev: label.to_string(),
                path: model::text::escape_controls(path).into_owned(),
                size,
                what,
                limit,
            };
            if size > MAX_FILE_BYTES {
                return Err(too_large(size, "", MAX_FILE_BYTES));
            }
            if total > MAX_FLEET_BYTES {
                return Err(too_large(
                    total,
                    " in the fleet's files up to this one",
                    MAX_FLEET_BYTES,
                ));
            }
        }
        if let Ok(mut kept) = self.sizes.lock() {
            *kept = sizes;
        }
        Ok(entries
            .into_iter()
            .map(|(path, id)| ListedFile {
                name: Arc::from(file_label(label, &path)),
                path,
                id: id.as_bytes().to_vec(),
            })
            .collect())
    }

    /// The contents of a file [`GitSource::list_files_at`] listed; `label`
    /// names the revision in errors.
    pub fn read_listed(&self, file: &ListedFile, label: &str) -> Result<Vec<u8>, SourceError> {
        Oid::from_bytes(&file.id)
            .and_then(|id| self.repo.find_blob(id))
            .map(|b| b.content().to_vec())
            .map_err(|source| SourceError::Object {
                rev: label.to_string(),
                path: file.path.clone(),
                cause: source,
            })
    }

    /// The id of the fleet's tree (or file) at `commit`, `None` when the
    /// fleet's path does not exist there. Two commits with the same id have
    /// the same fleet: history uses this to skip commits that touch nothing
    /// of it.
    pub fn fleet_id_at(&self, commit: Oid) -> Result<Option<Oid>, SourceError> {
        let label = short_id(&commit.to_string()).to_string();
        Ok(match self.fleet_entry(commit, &label)? {
            FleetEntry::Missing => None,
            FleetEntry::File(oid) => Some(oid),
            FleetEntry::Dir(tree) => Some(tree.id()),
        })
    }

    /// Who made `rev`, when, and its message.
    pub fn commit_info(&self, rev: &str) -> Result<CommitInfo, SourceError> {
        let oid = self.resolve_oid(rev)?;
        self.commit_info_at(oid)
    }

    /// [`GitSource::commit_info`] of a commit id.
    pub fn commit_info_at(&self, oid: Oid) -> Result<CommitInfo, SourceError> {
        let commit = self
            .repo
            .find_commit(oid)
            .map_err(|source| SourceError::Revision {
                rev: oid.to_string(),
                cause: source,
            })?;
        let author = commit.author();
        let when = author.when();
        let offset =
            FixedOffset::east_opt(when.offset_minutes() * 60).unwrap_or_else(|| chrono::Utc.fix());
        let time = DateTime::from_timestamp(when.seconds(), 0)
            .unwrap_or_default()
            .with_timezone(&offset);
        let message = String::from_utf8_lossy(commit.message_bytes())
            .trim_end()
            .to_string();
        let summary = message.lines().next().unwrap_or("").to_string();
        Ok(CommitInfo {
            id: oid.to_string(),
            author_name: String::from_utf8_lossy(author.name_bytes()).into_owned(),
            author_email: String::from_utf8_lossy(author.email_bytes()).into_owned(),
            time,
            summary,
            message,
            parents: commit.parent_ids().map(|p| p.to_string()).collect(),
        })
    }

    /// What sits at the fleet's path in the tree of `commit`.
    fn fleet_entry(&self, commit: Oid, label: &str) -> Result<FleetEntry<'_>, SourceError> {
        let object_err = |path: &str, source| SourceError::Object {
            rev: label.to_string(),
            path: path.to_string(),
            cause: source,
        };
        let commit = self
            .repo
            .find_commit(commit)
            .map_err(|source| SourceError::Revision {
                rev: label.to_string(),
                cause: source,
            })?;
        let root = commit.tree().map_err(|e| object_err("", e))?;
        if self.subdir.is_empty() {
            return Ok(FleetEntry::Dir(root));
        }
        let entry = match root.get_path(Path::new(&self.subdir)) {
            Ok(entry) => entry,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(FleetEntry::Missing),
            Err(e) => return Err(object_err(&self.subdir, e)),
        };
        match entry.kind() {
            Some(ObjectType::Tree) => {
                let tree = self
                    .repo
                    .find_tree(entry.id())
                    .map_err(|e| object_err(&self.subdir, e))?;
                Ok(FleetEntry::Dir(tree))
            }
            Some(ObjectType::Blob) if entry.filemode() != SYMLINK_MODE => {
                Ok(FleetEntry::File(entry.id()))
            }
            _ => Ok(FleetEntry::Missing),
        }
    }
}

/// Git's file mode of a symbolic link.
const SYMLINK_MODE: i32 = 0o120000;

enum FleetEntry<'r> {
    Missing,
    File(Oid),
    Dir(Tree<'r>),
}

/// Every YAML blob below `tree` (whose path is `prefix`), dot-entries,
/// symbolic links and submodules skipped.
fn collect_yaml(
    repo: &Repository,
    tree: &Tree<'_>,
    prefix: &str,
    out: &mut Vec<(String, Oid)>,
) -> Result<(), (String, git2::Error)> {
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes());
        if name.starts_with('.') {
            continue;
        }
        let path = if prefix.is_empty() {
            name.into_owned()
        } else {
            format!("{prefix}/{name}")
        };
        match entry.kind() {
            Some(ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id()).map_err(|e| (path.clone(), e))?;
                collect_yaml(repo, &sub, &path, out)?;
            }
            Some(ObjectType::Blob)
                if entry.filemode() != SYMLINK_MODE && load::fs::is_yaml(Path::new(&path)) =>
            {
                out.push((path, entry.id()));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The nearest existing ancestor of `path` (itself if it exists) and the
/// names below it that do not exist.
fn split_existing(path: &Path) -> Result<(PathBuf, Vec<String>), std::io::Error> {
    let mut existing = if path.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        path.to_path_buf()
    };
    let mut rest = Vec::new();
    while !existing.exists() {
        let name = existing
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        match (name, existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = if parent.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    parent.to_path_buf()
                };
            }
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file or directory",
                ));
            }
        }
    }
    rest.reverse();
    Ok((existing, rest))
}

/// Where `path` (canonical) lies inside the repository's tree.
fn subdir_of(repo: &Repository, path: &Path) -> String {
    let Some(workdir) = repo.workdir() else {
        return String::new();
    };
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let relative: PathBuf = match path.strip_prefix(&workdir) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => return String::new(),
    };
    let parts: Vec<String> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.first().is_some_and(|p| p == ".git") {
        return String::new();
    }
    parts.join("/")
}

/// How a revision is shown in file names: a full commit id is shortened to
/// 12 characters, anything else (`HEAD`, `main`, `v1.2`) is kept as written.
pub fn rev_label(rev: &str) -> String {
    if rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
        short_id(rev).to_string()
    } else {
        rev.to_string()
    }
}

/// The first 12 characters of a commit id.
pub fn short_id(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The name of a file read from Git, as messages show it: `LABEL:path`,
/// the syntax of `git show REV:path` (the path is relative to the
/// repository's root).
pub fn file_label(label: &str, path: &str) -> String {
    format!("{label}:{path}")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// Writes `files` into the work tree (a `None` content deletes) and
    /// commits everything as `who` at `time` (seconds).
    pub(crate) fn commit(
        repo: &Repository,
        files: &[(&str, Option<&str>)],
        message: &str,
        time: i64,
    ) -> Oid {
        let root = repo.workdir().unwrap().to_path_buf();
        for (path, content) in files {
            let full = root.join(path);
            match content {
                Some(text) => {
                    fs::create_dir_all(full.parent().unwrap()).unwrap();
                    fs::write(&full, text).unwrap();
                }
                None => fs::remove_file(&full).unwrap(),
            }
        }
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::new(
            "Ada Lovelace",
            "ada@example.com",
            &git2::Time::new(time, 60),
        )
        .unwrap();
        let parents: Vec<git2::Commit> = repo
            .head()
            .ok()
            .and_then(|h| h.peel_to_commit().ok())
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    fn names(files: &[SourceFile]) -> Vec<&str> {
        files.iter().map(|f| &*f.path).collect()
    }

    #[test]
    fn reads_yaml_files_of_a_subdirectory_at_a_revision() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let first = commit(
            &repo,
            &[
                ("fleet/queues.yaml", Some("a: 1\n")),
                ("fleet/jobs/b.yml", Some("b: 1\n")),
                ("fleet/jobs/a.yaml", Some("a: 2\n")),
                ("fleet/.hidden/x.yaml", Some("x\n")),
                ("fleet/.dot.yaml", Some("x\n")),
                ("fleet/README.md", Some("# hi\n")),
                ("other/z.yaml", Some("z\n")),
            ],
            "first",
            1_700_000_000,
        );
        commit(
            &repo,
            &[("fleet/queues.yaml", Some("a: 3\n"))],
            "second",
            1_700_000_100,
        );
        let source = GitSource::discover(&dir.path().join("fleet")).unwrap();
        assert_eq!(source.subdir(), "fleet");
        let head = source.read_files("HEAD").unwrap();
        assert_eq!(
            names(&head),
            [
                "HEAD:fleet/jobs/a.yaml",
                "HEAD:fleet/jobs/b.yml",
                "HEAD:fleet/queues.yaml"
            ]
        );
        assert_eq!(head[2].bytes, b"a: 3\n");
        let old = source.read_files("HEAD~1").unwrap();
        assert_eq!(old[2].bytes, b"a: 1\n");
        let id = source.resolve("HEAD~1").unwrap();
        assert_eq!(id, first.to_string());
        let by_id = source.read_files(&id).unwrap();
        assert_eq!(
            by_id[0].path.as_ref(),
            format!("{}:fleet/jobs/a.yaml", &id[..12])
        );
        assert_eq!(source.resolve(&id[..7]).unwrap(), id);
    }

    #[test]
    fn commit_info_has_author_time_and_message() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let id = commit(
            &repo,
            &[("a.yaml", Some("a\n"))],
            "Raise nlp quota\n\nBecause.\n",
            1_700_000_000,
        );
        let source = GitSource::discover(dir.path()).unwrap();
        let info = source.commit_info("HEAD").unwrap();
        assert_eq!(info.id, id.to_string());
        assert_eq!(info.author_name, "Ada Lovelace");
        assert_eq!(info.author_email, "ada@example.com");
        assert_eq!(info.summary, "Raise nlp quota");
        assert_eq!(info.message, "Raise nlp quota\n\nBecause.");
        assert_eq!(info.time.to_rfc3339(), "2023-11-14T23:13:20+01:00");
        assert!(info.parents.is_empty());
    }

    #[test]
    fn errors_name_the_revision_and_path() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        commit(
            &repo,
            &[("fleet/a.yaml", Some("a\n"))],
            "one",
            1_700_000_000,
        );
        let source = GitSource::discover(&dir.path().join("fleet")).unwrap();
        let err = source.resolve("nope").unwrap_err().to_string();
        assert!(err.starts_with("unknown revision `nope`"), "{err}");
        let err = source.read_files("HEAD~5").unwrap_err().to_string();
        assert!(err.starts_with("unknown revision `HEAD~5`"), "{err}");
        let other = GitSource::from_repository(Repository::open(dir.path()).unwrap(), "gone");
        let err = other.read_files("HEAD").unwrap_err().to_string();
        assert_eq!(
            err,
            "HEAD:gone: no such file or directory in revision `HEAD`"
        );
        let outside = tempfile::tempdir().unwrap();
        assert!(matches!(
            GitSource::discover(outside.path()),
            Err(SourceError::Discover { .. })
        ));
    }

    #[test]
    fn the_work_tree_is_a_commit_while_its_fleet_files_are_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let first = commit(
            &repo,
            &[("fleet/a.yaml", Some("a\n")), ("README.md", Some("r\n"))],
            "one",
            1_700_000_000,
        );
        let source = GitSource::discover(&dir.path().join("fleet")).unwrap();
        assert_eq!(source.work_tree_commit(), Some(first.to_string()));
        // other files may change
        fs::write(dir.path().join("README.md"), "changed\n").unwrap();
        fs::write(dir.path().join("notes.yaml"), "outside the fleet\n").unwrap();
        fs::write(dir.path().join("fleet/notes.txt"), "not YAML\n").unwrap();
        assert_eq!(source.work_tree_commit(), Some(first.to_string()));
        // a fleet file modified, or a new one: the files are no commit
        fs::write(dir.path().join("fleet/a.yaml"), "b\n").unwrap();
        assert_eq!(source.work_tree_commit(), None);
        fs::write(dir.path().join("fleet/a.yaml"), "a\n").unwrap();
        assert_eq!(source.work_tree_commit(), Some(first.to_string()));
        fs::write(dir.path().join("fleet/new.yml"), "n\n").unwrap();
        assert_eq!(source.work_tree_commit(), None);
        // a bare repository has no work tree
        let bare = dir.path().join("bare.git");
        Repository::init_bare(&bare).unwrap();
        assert_eq!(GitSource::open(&bare, "").unwrap().work_tree_commit(), None);
    }

    #[test]
    fn a_single_file_is_a_fleet() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        commit(&repo, &[("fleet.yaml", Some("a\n"))], "one", 1_700_000_000);
        let source = GitSource::discover(&dir.path().join("fleet.yaml")).unwrap();
        assert_eq!(
            names(&source.read_files("HEAD").unwrap()),
            ["HEAD:fleet.yaml"]
        );
    }

    #[test]
    fn bare_repositories_are_read_from_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("work")).unwrap();
        commit(&repo, &[("a.yaml", Some("a\n"))], "one", 1_700_000_000);
        let bare_path = dir.path().join("bare.git");
        let url = format!("file://{}", dir.path().join("work").display());
        git2::build::RepoBuilder::new()
            .bare(true)
            .clone(&url, &bare_path)
            .unwrap();
        let source = GitSource::discover(&bare_path).unwrap();
        assert!(source.repository().is_bare());
        assert_eq!(source.subdir(), "");
        assert_eq!(names(&source.read_files("HEAD").unwrap()), ["HEAD:a.yaml"]);
    }

    #[test]
    fn paths_that_exist_only_in_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("work")).unwrap();
        commit(
            &repo,
            &[("fleet/a.yaml", Some("a\n"))],
            "one",
            1_700_000_000,
        );
        let bare_path = dir.path().join("bare.git");
        let url = format!("file://{}", dir.path().join("work").display());
        git2::build::RepoBuilder::new()
            .bare(true)
            .clone(&url, &bare_path)
            .unwrap();
        let source = GitSource::discover(&bare_path.join("fleet")).unwrap();
        assert_eq!(source.subdir(), "fleet");
        assert_eq!(
            names(&source.read_files("HEAD").unwrap()),
            ["HEAD:fleet/a.yaml"]
        );
        std::fs::remove_dir_all(dir.path().join("work/fleet")).unwrap();
        let source = GitSource::discover(&dir.path().join("work/fleet")).unwrap();
        assert_eq!(source.subdir(), "fleet");
        assert_eq!(source.read_files("HEAD").unwrap().len(), 1);
    }

    #[test]
    fn labels() {
        assert_eq!(rev_label("HEAD"), "HEAD");
        let id = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(rev_label(id), "0123456789ab");
        assert_eq!(file_label("main", "a/b.yaml"), "main:a/b.yaml");
    }
}
