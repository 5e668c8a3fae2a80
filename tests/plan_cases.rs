//! Data-driven `gitfleet plan` scenarios, one scheduling rule per case.
//!
//! Each directory under `tests/cases/plan/` holds:
//! - `repo/`: a tiny fleet repository (pools, queues, priority classes, jobs);
//! - `observed.yaml` (optional): the live fleet, passed as `--observed`;
//! - `args`: extra CLI arguments on one line (always `--now …`);
//! - `expected.json`: the exact stdout of
//!   `gitfleet plan repo [--observed observed.yaml] <args> -o json`, run with
//!   the case directory as the working directory;
//! - `exit` (optional): the expected exit code when it is not 0 (cases that
//!   pass `--detailed-exitcode` in `args`).
//!
//! A `README.md` in a case explains, in words, what the case checks and why
//! the expected plan is right. Set `GITFLEET_BLESS=1` to rewrite the expected
//! files from the current output, then review every changed line against
//! DESIGN.md's scheduling rules: a wrong expected file is worse than none.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::{Path, PathBuf};
use std::process::Command;

const CASES: &str = "tests/cases/plan";

fn case_dirs_in(root: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(root);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn case_dirs() -> Vec<PathBuf> {
    let dirs = case_dirs_in(CASES);
    assert!(!dirs.is_empty(), "no cases under {CASES}");
    dirs
}

fn name(dir: &Path) -> String {
    dir.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// What one run of `gitfleet plan` produced.
struct Outcome {
    stdout: String,
    code: i32,
}

fn run_case(dir: &Path) -> Outcome {
    let args = std::fs::read_to_string(dir.join("args"))
        .unwrap_or_else(|e| panic!("{}: cannot read args: {e}", dir.display()));
    assert!(
        args.contains("--now"),
        "{}: args must pin the time with --now",
        dir.display()
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gitfleet"));
    cmd.arg("plan").arg("repo").current_dir(dir);
    // A case lies inside this repository's work tree: without a ceiling its
    // plan's `revision` would be this repository's commit (a fleet in a
    // clean work tree is that commit), which changes with every commit.
    cmd.env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap_or(dir));
    if dir.join("observed.yaml").is_file() {
        cmd.arg("--observed").arg("observed.yaml");
    }
    cmd.args(args.split_whitespace()).args(["-o", "json"]);
    let output = cmd.output().expect("run gitfleet");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked"),
        "{}: gitfleet panicked:\n{stderr}",
        dir.display()
    );
    let code = output.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 2,
        "{}: gitfleet plan failed with exit {code}:\n{stderr}",
        dir.display()
    );
    Outcome {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        code,
    }
}

fn expected_code(dir: &Path) -> i32 {
    match std::fs::read_to_string(dir.join("exit")) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{}: bad exit file: {e}", dir.display())),
        Err(_) => 0,
    }
}

fn bless(dir: &Path, outcome: &Outcome) {
    std::fs::write(dir.join("expected.json"), &outcome.stdout).expect("write expected.json");
    let exit = dir.join("exit");
    if outcome.code == 0 {
        if exit.exists() {
            std::fs::remove_file(&exit).expect("remove exit");
        }
    } else {
        std::fs::write(&exit, format!("{}\n", outcome.code)).expect("write exit");
    }
}

/// Runs every case and returns one report per case whose output differs.
fn mismatches(dirs: &[PathBuf], blessing: bool) -> Vec<String> {
    let mut failures = Vec::new();
    for dir in dirs {
        let actual = run_case(dir);
        if blessing {
            bless(dir, &actual);
            continue;
        }
        let expected = std::fs::read_to_string(dir.join("expected.json")).unwrap_or_default();
        let code = expected_code(dir);
        if actual.stdout != expected || actual.code != code {
            failures.push(format!(
                "== {}\n-- expected (exit {code})\n{expected}-- actual (exit {})\n{}",
                name(dir),
                actual.code,
                actual.stdout
            ));
        }
    }
    failures
}

#[test]
fn plan_cases_match_expected_output() {
    let dirs = case_dirs();
    let blessing = std::env::var_os("GITFLEET_BLESS").is_some();
    let failures = mismatches(&dirs, blessing);
    assert!(
        failures.is_empty(),
        "{} of {} plan cases differ (GITFLEET_BLESS=1 rewrites them; review the diff):\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
    assert!(
        dirs.len() >= 30,
        "expected at least 30 plan cases, found {}",
        dirs.len()
    );
}

#[test]
fn plan_cases_are_deterministic() {
    // The engine promises byte-identical plans for the same input.
    for dir in case_dirs() {
        let first = run_case(&dir);
        let second = run_case(&dir);
        assert_eq!(
            first.stdout,
            second.stdout,
            "{}: two runs gave different plans",
            name(&dir)
        );
        assert_eq!(first.code, second.code, "{}: exit codes differ", name(&dir));
    }
}

#[test]
fn expected_plans_are_valid_json_with_pinned_time() {
    for dir in case_dirs() {
        let Ok(text) = std::fs::read_to_string(dir.join("expected.json")) else {
            continue; // reported by plan_cases_match_expected_output
        };
        let plan: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: expected.json: {e}", name(&dir)));
        assert_eq!(
            plan["time"],
            "2026-11-21T10:00:00Z",
            "{}: every case runs at the same pinned time",
            name(&dir)
        );
    }
}
