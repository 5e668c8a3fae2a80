//! Data-driven `gitfleet validate` cases.
//!
//! Each directory under `tests/cases/validate/` holds a broken (or valid)
//! fleet repo in `repo/` and the exact expected output in `expected.txt`:
//! the `FILE:LINE:COL: message` lines and the summary, with paths relative to
//! `repo/`, followed by a last line `exit N`. Set `GITFLEET_BLESS=1` to
//! rewrite the expected files from the current output (then review the diff).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::{Path, PathBuf};
use std::process::Command;

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/validate")
}

fn run_case(dir: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .arg("validate")
        .current_dir(dir.join("repo"))
        .output()
        .expect("run gitfleet");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked"),
        "{}: gitfleet panicked:\n{stderr}",
        dir.display()
    );
    format!(
        "{}exit {}\n",
        String::from_utf8_lossy(&output.stdout),
        output.status.code().unwrap_or(-1)
    )
}

#[test]
fn validate_cases_match_expected_output() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("cases dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let bless = std::env::var_os("GITFLEET_BLESS").is_some();
    let mut failures = Vec::new();
    for dir in &dirs {
        let actual = run_case(dir);
        let expected_path = dir.join("expected.txt");
        if bless {
            std::fs::write(&expected_path, &actual).expect("write expected");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if actual != expected {
            failures.push(format!(
                "== {}\n-- expected\n{expected}-- actual\n{actual}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        dirs.len() >= 12,
        "expected at least a dozen cases, found {}",
        dirs.len()
    );
}
