//! File names, object names and commit messages are the committer's to
//! choose: what gitfleet prints of them must not drive a terminal (escape
//! codes) or start a line of its own (a GitHub Actions `::error::` command in
//! a CI log).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

const FILE: &str = "q\n::error file=x::pwned\u{1b}[31m\u{202e}.yaml";
const DOC: &str = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: \"Bad\\n::error::x\\e[2J\"}\nspec: {}\n";

/// Every line of stdout and stderr: none holds a control character (but
/// tab) and none starts a workflow command.
fn assert_safe(out: &Output) {
    for stream in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(stream);
        for line in text.lines() {
            assert!(
                !line
                    .chars()
                    .any(|c| (c.is_control() && c != '\t') || c == '\u{202e}'),
                "raw control character in {line:?}"
            );
            assert!(
                !line.trim_start().starts_with("::"),
                "workflow command: {line:?}"
            );
        }
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Mallory\u{1b}[2J")
        .env("GIT_AUTHOR_EMAIL", "m@example.com")
        .env("GIT_COMMITTER_NAME", "Mallory")
        .env("GIT_COMMITTER_EMAIL", "m@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn names_from_files_and_documents_are_escaped_in_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(FILE), DOC).unwrap();
    let out = Command::new(BIN)
        .arg("validate")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_safe(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("q\\n::error file=x::pwned\\u{1b}[31m\\u{202e}.yaml:3:18: Queue Bad\\n::error::x\\u{1b}[2J:"),
        "{text}"
    );
}

#[test]
fn git_mode_and_history_escape_paths_and_commit_messages() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(
        repo.join("ok.yaml"),
        "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n",
    )
    .unwrap();
    git(repo, &["add", "-A"]);
    git(
        repo,
        &[
            "commit",
            "-q",
            "-m",
            "good\n\n::error::from the body\u{1b}[31m",
        ],
    );
    std::fs::write(repo.join(FILE), DOC).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "bad \u{1b}]0;title\u{7}"]);

    let validate = Command::new(BIN)
        .args(["validate", "--rev", "HEAD", "."])
        .current_dir(repo)
        .output()
        .unwrap();
    assert_eq!(
        validate.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );
    assert_safe(&validate);

    let history = Command::new(BIN)
        .args(["history", "."])
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(
        history.status.success(),
        "{}",
        String::from_utf8_lossy(&history.stderr)
    );
    assert_safe(&history);
    let text = String::from_utf8_lossy(&history.stdout);
    assert!(text.contains("Mallory\\u{1b}[2J"), "{text}");
    assert!(text.contains("bad \\u{1b}]0;title\\u{7}"), "{text}");
}
