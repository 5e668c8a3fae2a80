//! Environment values from outside Git (`valueFrom`) and values marked
//! `sensitive`: resolved only by the local executor when a replica starts,
//! and never in any output (validate, plan, preview, history, reconcile,
//! status) nor in any file of the state directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::cli_support::{fleet, text};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

/// Every secret of the tests starts so (and nothing else gitfleet prints).
const SECRET: &str = "s3cr3t";

fn job(name: &str, inline: &str, secret_file: &Path, command: &str) -> String {
    format!(
        r#"---
apiVersion: gitfleet/v1
kind: Job
metadata: {{name: {name}}}
spec:
  queue: a
  gpusPerReplica: 1
  command: ["sh", "-c", {command:?}]
  env:
    PLAIN: visible-value
    TOKEN: {{value: {inline}, sensitive: true}}
    KEY: {{valueFrom: {{file: {file}}}}}
    FROMENV: {{valueFrom: {{env: GITFLEET_TEST_SECRET}}}}
"#,
        file = secret_file.display()
    )
}

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let repo = Repo {
            dir: crate::cli_support::dir_with_repo(),
        };
        std::fs::write(repo.path("key"), format!("{SECRET}-from-file\n")).unwrap();
        repo
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn git(&self, args: &[&str]) {
        crate::cli_support::git(&self.path("repo"), args, &[]);
    }

    fn commit(&self, jobs: &str) {
        std::fs::write(self.path("repo/fleet.yaml"), format!("{}{jobs}", fleet(1))).unwrap();
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", "change"]);
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .current_dir(self.dir.path())
            .env("GITFLEET_TEST_SECRET", format!("{SECRET}-from-env"))
            .output()
            .unwrap()
    }
}

/// Runs `args`, asserts success, and that no secret is in what it printed.
fn shown(repo: &Repo, args: &[&str]) -> String {
    let out = repo.run(args);
    let all = text(&out);
    assert!(out.status.success(), "{args:?}: {all}");
    assert!(!all.contains(SECRET), "{args:?} shows a secret: {all}");
    all
}

/// No file at or under `path` holds a secret.
fn assert_no_secret_in(path: &Path) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            assert_no_secret_in(&entry.unwrap().path());
        }
    } else {
        let bytes = std::fs::read(path).unwrap();
        let found = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
        assert!(!found, "{} holds a secret", path.display());
    }
}

#[test]
fn sensitive_values_are_masked_in_every_output_and_state() {
    let repo = Repo::new();
    let key = repo.path("key");
    let sleep = "sleep 60";
    repo.commit(&job("a", &format!("{SECRET}-inline-1"), &key, sleep));
    repo.commit(&job("a", &format!("{SECRET}-inline-2"), &key, sleep));

    shown(&repo, &["validate", "repo"]);
    for format in ["text", "json", "markdown"] {
        shown(&repo, &["plan", "repo", "-o", format]);
    }
    let preview = shown(
        &repo,
        &["plan", "repo", "--base", "HEAD~1", "--rev", "HEAD"],
    );
    assert!(
        preview.contains("TOKEN"),
        "the change is visible, masked: {preview}"
    );
    for format in ["json", "markdown"] {
        let out = shown(
            &repo,
            &[
                "plan", "repo", "--base", "HEAD~1", "--rev", "HEAD", "-o", format,
            ],
        );
        assert!(out.contains("(sensitive, changed)"), "{out}");
    }
    let history = shown(&repo, &["history", "repo", "-p"]);
    assert!(history.contains("(sensitive)"), "{history}");
    shown(&repo, &["history", "repo", "-o", "json"]);
    let reconciled = shown(
        &repo,
        &[
            "reconcile",
            "repo",
            "--state",
            "st",
            "--once",
            "--now",
            "2026-11-21T10:00:00Z",
        ],
    );
    assert!(reconciled.contains("place a"), "{reconciled}");
    shown(&repo, &["status", "--state", "st", "-o", "json"]);
    shown(
        &repo,
        &["status", "--state", "st", "--export-observed", "live.json"],
    );
    shown(
        &repo,
        &["plan", "repo", "--state", "st", "--out", "plan.json"],
    );
    assert_no_secret_in(&repo.path("st"));
    assert_no_secret_in(&repo.path("plan.json"));
    assert_no_secret_in(&repo.path("live.json"));
}

#[test]
fn the_local_executor_resolves_values_at_launch_and_keeps_them_out_of_its_records() {
    let repo = Repo::new();
    let out_file = repo.path("seen.txt");
    let script = format!(
        "printf '%s %s %s %s' \"$PLAIN\" \"$TOKEN\" \"$KEY\" \"$FROMENV\" > {}",
        out_file.display()
    );
    let missing = repo.path("missing-secret");
    let jobs = job("a", &format!("{SECRET}-inline"), &repo.path("key"), &script)
        + &job("b", &format!("{SECRET}-inline"), &missing, "true");
    std::fs::write(repo.path("repo/fleet.yaml"), format!("{}{jobs}", fleet(1))).unwrap();
    let gpus: Vec<String> = (0..8)
        .map(|i| format!("{{index: {i}, model: H100}}"))
        .collect();
    std::fs::write(
        repo.path("host.yaml"),
        format!(
            "nodes:\n  - name: p-0\n    pool: p\n    gpus: [{}]\n",
            gpus.join(", ")
        ),
    )
    .unwrap();
    let reconcile = || {
        repo.run(&[
            "reconcile",
            "repo",
            "--no-git",
            "--state",
            "st",
            "--once",
            "--executor",
            "local",
            "--observed",
            "host.yaml",
        ])
    };
    let out = reconcile();
    let all = text(&out);
    assert!(!all.contains(SECRET), "{all}");
    // b's value cannot be read: its place fails, naming the variable and
    // the file, never a value.
    assert!(
        all.contains("env KEY: cannot read valueFrom file") && all.contains("missing-secret"),
        "{all}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !out_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        std::fs::read_to_string(&out_file).unwrap(),
        format!("visible-value {SECRET}-inline {SECRET}-from-file {SECRET}-from-env")
    );
    // The next iteration sees a end; nothing recorded holds a value.
    let all = text(&reconcile());
    assert!(!all.contains(SECRET), "{all}");
    assert_no_secret_in(&repo.path("st"));
}

#[test]
fn a_wrong_env_entry_is_named_without_its_value() {
    let repo = Repo::new();
    let jobs = format!(
        "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: a}}\nspec:\n  queue: a\n  gpusPerReplica: 1\n  env:\n    BOTH: {{value: {SECRET}-1, sensitive: true, valueFrom: {{env: X}}}}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: c}}\nspec:\n  queue: a\n  gpusPerReplica: 1\n  env:\n    PIN: {{value: 31415926, sensitive: true}}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: b}}\nspec:\n  queue: a\n  gpusPerReplica: 1\n  env:\n    NONE: {{sensitive: true}}\n"
    );
    std::fs::write(repo.path("repo/fleet.yaml"), format!("{}{jobs}", fleet(1))).unwrap();
    let out = repo.run(&["validate", "repo"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!all.contains(SECRET), "{all}");
    assert!(
        all.contains("spec.env.BOTH: give either `value` or `valueFrom`, not both"),
        "{all}"
    );
    assert!(all.contains("spec.env.NONE: needs `value`"), "{all}");
    // A value YAML typed as a number is not quoted either.
    assert!(!all.contains("31415926"), "{all}");
    assert!(
        all.contains("spec.env.PIN.value: expected a string; the value is not shown"),
        "{all}"
    );
}
