//! `gitfleet generate`'s workload shapes from the command line: every knob
//! makes a fleet that validates and plans, a third of the running jobs past
//! their limit shows as terminations, and a value out of range is refused
//! with the flag named.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod git_support;

use git_support::{TestRepo, gitfleet};

const NOW: &str = "2026-01-01T00:00:00Z";

fn generate(repo: &TestRepo, out: &str, extra: &[&str]) {
    let mut args = vec![
        "generate",
        "--out",
        out,
        "--nodes",
        "48",
        "--pending",
        "400",
        "--running",
        "300",
        "--leaves",
        "14",
        "--pool-nodes",
        "12",
        "--now",
        NOW,
        "--storm",
    ];
    args.extend_from_slice(extra);
    let run = gitfleet(repo.path(), &args);
    assert_eq!(run.code, 0, "{extra:?}: {}", run.stderr);
}

/// How many actions of `kind` the plan of generated fleet `out` has.
fn actions(repo: &TestRepo, out: &str, kind: &str) -> usize {
    let observed = format!("{out}/observed.json");
    let fleet = format!("{out}/repo");
    let run = gitfleet(
        repo.path(),
        &["plan", "-o", "json", "--observed", &observed, &fleet],
    );
    assert!(run.code == 0 || run.code == 2, "{out}: {}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == kind)
        .count()
}

#[test]
fn every_shape_knob_makes_a_fleet_that_validates_and_plans() {
    let repo = TestRepo::new();
    let shapes: [(&str, &[&str]); 7] = [
        ("late", &["--past-limit", "50"]),
        ("fixed", &["--preemptible", "40"]),
        ("classes", &["--priority-classes", "7"]),
        ("deep", &["--queue-levels", "5"]),
        ("flat", &["--queue-levels", "2"]),
        ("gangs", &["--gangs", "25", "--gang-nodes", "6"]),
        ("models", &["--models", "4"]),
    ];
    for (out, flags) in shapes {
        generate(&repo, out, flags);
        let fleet = format!("{out}/repo");
        let valid = gitfleet(repo.path(), &["validate", &fleet]);
        assert_eq!(valid.code, 0, "{out}: {}{}", valid.stdout, valid.stderr);
        actions(&repo, out, "preempt");
    }
    // Half the running jobs past their limit: terminated in the plan, far
    // more than the job mix's own few.
    generate(&repo, "mix", &[]);
    let (late, mix) = (
        actions(&repo, "late", "terminate"),
        actions(&repo, "mix", "terminate"),
    );
    assert!(late > 3 * mix.max(1), "{late} terminations against {mix}");
    let queues = std::fs::read_to_string(repo.path().join("deep/repo/queues.yaml")).unwrap();
    assert!(queues.contains("group-0-0"), "{queues}");
}

#[test]
fn nodes_without_gpus_make_a_fleet_not_a_panic() {
    let repo = TestRepo::new();
    let run = gitfleet(
        repo.path(),
        &[
            "generate",
            "--out",
            "z",
            "--nodes",
            "10",
            "--gpus-per-node",
            "0",
            "--pending",
            "10",
            "--running",
            "10",
            "--models",
            "3",
            "--gangs",
            "50",
            "--past-limit",
            "50",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn a_knob_out_of_range_is_refused_with_its_flag() {
    let repo = TestRepo::new();
    for (flag, value) in [
        ("--models", "9"),
        ("--past-limit", "101"),
        ("--queue-levels", "1"),
    ] {
        let run = gitfleet(repo.path(), &["generate", "--out", "x", flag, value]);
        assert_ne!(run.code, 0, "{flag} {value}");
        assert!(run.stderr.contains(flag), "{flag}: {}", run.stderr);
        assert!(!repo.path().join("x").exists(), "{flag}: wrote a fleet");
    }
}
