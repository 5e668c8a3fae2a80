//! Specs read from Git (`--rev`, `--base`), shared by the input loader
//! (`plan`, `explain`), `plan --base`, `validate` and `history`.

use std::ops::Deref;
use std::path::Path;

use miette::{IntoDiagnostic, Result, WrapErr};
use reconciler::load::{Loaded, SourceFile, load_fleet};
use reconciler::source::{GitSource, fetch_mirror};

use super::args::{DEFAULT_BRANCH, SpecArgs};

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

/// A repository the specs are read from: a local one, or a temporary
/// mirror of a `--repo` (removed when this is dropped).
pub struct Repo {
    source: GitSource,
    _mirror: Option<tempfile::TempDir>,
}

impl Deref for Repo {
    type Target = GitSource;

    fn deref(&self) -> &GitSource {
        &self.source
    }
}

/// Opens the repository the spec arguments name: `--repo URL` fetched
/// (the branch `--rev`, default `main`) into a temporary mirror with PATH
/// as the fleet's directory in it, else the repository holding PATH.
pub fn open_specs(args: &SpecArgs) -> Result<Repo> {
    let Some(url) = &args.repo else {
        return Ok(Repo {
            source: open(&args.path)?,
            _mirror: None,
        });
    };
    let branch = args.rev.as_deref().unwrap_or(DEFAULT_BRANCH);
    let dir = tempfile::tempdir()
        .into_diagnostic()
        .wrap_err("--repo: cannot create a temporary directory for the mirror")?;
    let source = fetch_mirror(url, &dir.path().join("mirror.git"), branch)
        .into_diagnostic()
        .wrap_err_with(|| {
            format!("--repo {url} --rev {branch} (--rev names a branch of the remote)")
        })?;
    Ok(Repo {
        source: source.with_subdir(&subdir_of(&args.path)),
        _mirror: Some(dir),
    })
}

/// PATH as a directory inside a repository (`""` for its root).
pub fn subdir_of(path: &Path) -> String {
    let subdir = path.to_string_lossy();
    let subdir = subdir.trim_end_matches('/');
    match subdir {
        "." | "" => String::new(),
        other => other.strip_prefix("./").unwrap_or(other).to_string(),
    }
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
