//! Helpers of the CLI tests that run the binary on throwaway fleets and
//! repositories made with the real `git` (saved plans, signed commits,
//! sensitive env values).

use std::path::Path;
use std::process::{Command, Output};

/// Runs `git args` in `cwd` as a fixed author and committer, with `envs`;
/// asserts success and returns its trimmed stdout.
pub fn git(cwd: &Path, args: &[&str], envs: &[(&str, &Path)]) -> String {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(cwd)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com");
    for (name, value) in envs {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// stdout and stderr together.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The command failed (exit 1) saying `expected`.
pub fn assert_fails_with(out: &Output, expected: &str) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains(expected), "expected {expected:?} in: {all}");
}

/// A fleet of one pool of `nodes` 8-GPU H100 nodes, a default priority
/// class and one queue `a` guaranteed all of it; jobs are appended.
pub fn fleet(nodes: u32) -> String {
    format!(
        r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {{name: p}}
spec:
  gpu: {{model: H100, count: 8}}
  nvlink: full
  size: {{min: {nodes}, max: {nodes}}}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {{name: normal}}
spec: {{value: 100, default: true}}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {{name: a}}
spec: {{quota: [{{model: H100, guaranteed: {gpus}, limit: {gpus}}}]}}
"#,
        gpus = nodes * 8
    )
}

/// A temporary directory with an empty Git repository `repo/` in it.
pub fn dir_with_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    git(&dir.path().join("repo"), &["init", "-q", "-b", "main"], &[]);
    dir
}

/// `reconcile PATH --state st --once` from the start of the test clock.
pub const RECONCILE_FIRST: [&str; 6] = [
    "--state",
    "st",
    "--once",
    "--now",
    "2026-11-21T10:00:00Z",
    "--listen=off",
];
