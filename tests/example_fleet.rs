//! The README's quick start holds: the reconcile loop over `examples/fleet`
//! on the `sim` executor (30 minutes per iteration, 12 iterations) prints
//! one line per iteration, shows a job pending from the first iteration and
//! preempts a job within those iterations (examples/fleet/README.md, "What
//! the first iterations show").

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

/// The README's command, with a state of its own, a fixed start time and no
/// HTTP port; `--no-git` reads the example as it is in the work tree.
fn reconcile(state: &Path) -> String {
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet");
    let out = Command::new(BIN)
        .arg("reconcile")
        .arg(&fleet)
        .args(["--no-git", "--listen", "off", "--state"])
        .arg(state)
        .args(["--now", "2026-11-23T08:00:00Z", "--sim-step", "30m"])
        .args(["--interval", "1ms", "--iterations", "12"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The number before `word` in an iteration line (`29 running, 1 pending`).
fn count(line: &str, word: &str) -> u64 {
    let before = line.split(&format!(" {word}")).next().unwrap();
    before
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no count of {word} in {line:?}"))
}

#[test]
fn the_example_fleet_shows_pending_jobs_and_a_preemption_in_its_first_iterations() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let stdout = reconcile(&state);

    // One line per iteration with revision, jobs and GPU use.
    let iterations: Vec<&str> = stdout.lines().filter(|l| l.contains(" rev ")).collect();
    assert_eq!(iterations.len(), 12, "{stdout}");
    for line in &iterations {
        assert!(
            line.contains(" running, ") && line.contains(" GPUs ("),
            "{line}"
        );
    }
    // A job waits from the first iteration on, with its reason.
    assert!(count(iterations[0], "pending") >= 1, "{}", iterations[0]);
    let view: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("dashboard.json")).unwrap())
            .unwrap();
    let pending = view["pending"].as_array().unwrap();
    assert!(!pending.is_empty(), "{view}");
    assert!(
        pending
            .iter()
            .all(|p| !p["reason"].as_str().unwrap().is_empty())
    );

    // At least one preemption, in the loop's output and in the audit log.
    assert!(stdout.contains("  preempt "), "{stdout}");
    let out = Command::new(BIN)
        .args(["audit", "--what", "preempt", "-o", "json", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(out.status.success());
    let preempted: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let preempted = preempted.as_array().unwrap();
    assert!(!preempted.is_empty(), "no preemption in the audit log");
    // The one examples/fleet/README.md tells of.
    assert!(
        preempted.iter().any(|e| e["subject"] == "whisper-large-asr"
            && e["detail"]
                .as_str()
                .unwrap()
                .starts_with("for speech-lm-pretrain")),
        "{preempted:?}"
    );
}
