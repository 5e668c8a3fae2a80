//! Throwaway Git repositories for the Git integration tests: files written
//! into a work tree and committed with git2 under a fixed author and clock,
//! so commit ids (and so the expected outputs) are the same on every run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use git2::{IndexAddOption, Repository, Signature, Time};

/// A repository in a temporary directory.
pub struct TestRepo {
    pub dir: tempfile::TempDir,
    pub repo: Repository,
    clock: i64,
}

impl TestRepo {
    /// An empty repository whose first branch is `main`.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = git2::RepositoryInitOptions::new();
        opts.initial_head("main");
        let repo = Repository::init_opts(dir.path(), &opts).expect("init");
        Self {
            dir,
            repo,
            clock: 1_763_700_000, // 2025-11-21T04:40:00Z
        }
    }

    /// The work tree.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file of the work tree (directories created).
    pub fn write(&self, path: &str, text: &str) -> &Self {
        let full = self.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
        self
    }

    /// Removes a file of the work tree.
    pub fn remove(&self, path: &str) -> &Self {
        std::fs::remove_file(self.path().join(path)).expect("remove");
        self
    }

    /// Renames a file of the work tree.
    pub fn rename(&self, from: &str, to: &str) -> &Self {
        let to_full = self.path().join(to);
        std::fs::create_dir_all(to_full.parent().expect("parent")).expect("mkdir");
        std::fs::rename(self.path().join(from), to_full).expect("rename");
        self
    }

    /// Commits the whole work tree; returns the commit id. Each commit is a
    /// minute after the previous one.
    pub fn commit(&mut self, author: &str, message: &str) -> String {
        self.clock += 60;
        let mut index = self.repo.index().expect("index");
        index
            .add_all(["*"], IndexAddOption::DEFAULT, None)
            .expect("add");
        index.update_all(["*"], None).expect("update");
        index.write().expect("write index");
        let tree = self
            .repo
            .find_tree(index.write_tree().expect("write tree"))
            .expect("tree");
        let email = format!("{}@example.com", author.to_lowercase());
        let sig = Signature::new(author, &email, &Time::new(self.clock, 0)).expect("signature");
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        self.repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .expect("commit")
            .to_string()
    }

    /// A bare clone of this repository next to it.
    pub fn bare_clone(&self, into: &Path) -> PathBuf {
        let url = format!("file://{}", self.path().display());
        git2::build::RepoBuilder::new()
            .bare(true)
            .clone(&url, into)
            .expect("bare clone");
        into.to_path_buf()
    }
}

/// The result of one `gitfleet` run.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// Runs the built binary in `cwd`.
pub fn gitfleet(cwd: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("run gitfleet");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

pub const POOLS: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: h100}
spec:
  gpu: {model: H100, count: 8}
  nvlink: full
  size: {min: 3, max: 3}
";

pub const QUEUES: &str = "\
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: org}
spec:
  quota:
    - {model: H100, guaranteed: 24}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: nlp}
spec:
  parent: org
  quota:
    - {model: H100, guaranteed: 8, limit: 16}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: vision}
spec:
  parent: org
  quota:
    - {model: H100, guaranteed: 8, limit: 16}
";

pub const PRIORITIES: &str = "\
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: low}
spec: {value: 10, preemptible: true}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: high}
spec: {value: 100, default: true}
";

pub const NLP_JOBS: &str = "\
apiVersion: gitfleet/v1
kind: Job
metadata: {name: nlp-a}
spec: {queue: nlp, gpusPerReplica: 8}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: old-eval}
spec: {queue: nlp, gpusPerReplica: 2, priorityClass: low}
";

pub const VISION_JOBS: &str = "\
apiVersion: gitfleet/v1
kind: Job
metadata: {name: vision-a}
spec: {queue: vision, gpusPerReplica: 4}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: vision-b}
spec: {queue: vision, gpusPerReplica: 4}
";

/// A repository with a fleet in `fleet/` (a monorepo with other files):
/// one commit, `initial`.
pub fn fleet_repo() -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write("README.md", "# monorepo\n")
        .write("fleet/pools.yaml", POOLS)
        .write("fleet/queues.yaml", QUEUES)
        .write("fleet/priority-classes.yaml", PRIORITIES)
        .write("fleet/jobs/nlp.yaml", NLP_JOBS)
        .write("fleet/jobs/vision.yaml", VISION_JOBS)
        .write("fleet/.github/ci.yaml", "not: [a fleet file\n");
    repo.commit("Ada", "Initial fleet");
    repo
}

/// The pull request: the vision quota cut to 4, job nlp-b added, job
/// old-eval removed, priority class low made non-preemptible, and
/// jobs/vision.yaml renamed to jobs/cv.yaml.
pub fn pull_request(repo: &mut TestRepo) -> String {
    repo.write(
        "fleet/queues.yaml",
        &QUEUES.replace(
            "metadata: {name: vision}\nspec:\n  parent: org\n  quota:\n    - {model: H100, guaranteed: 8, limit: 16}",
            "metadata: {name: vision}\nspec:\n  parent: org\n  quota:\n    - {model: H100, guaranteed: 4, limit: 4}",
        ),
    )
    .write(
        "fleet/jobs/nlp.yaml",
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: nlp-a}\n\
         spec: {queue: nlp, gpusPerReplica: 8}\n---\napiVersion: gitfleet/v1\nkind: Job\n\
         metadata: {name: nlp-b}\nspec: {queue: nlp, gpusPerReplica: 4}\n",
    )
    .write(
        "fleet/priority-classes.yaml",
        &PRIORITIES.replace("preemptible: true", "preemptible: false"),
    )
    .rename("fleet/jobs/vision.yaml", "fleet/jobs/cv.yaml");
    repo.commit("Bob", "Cut vision, add nlp-b, drop old-eval")
}
