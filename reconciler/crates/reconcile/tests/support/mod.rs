//! What the reconcile crate's property and scenario tests share: knobs from
//! the environment, the document header, and `git` in a test repository.

// Each test crate uses only part of this.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// A number from the environment (`GITFLEET_*_CASES`, `…_SEED`), else `default`.
pub fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The first line of every gitfleet document.
pub const HEADER: &str = "apiVersion: gitfleet/v1\n";

/// Runs `git ARGS` in `cwd` as a fixed test identity; panics if it fails.
pub fn git(args: &[&str], cwd: &Path) {
    let status = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}
