//! `gitfleet explain JOB` and `gitfleet plan --suggest` on a small fleet:
//! what would let pending jobs run (verified suggestions) and when they are
//! expected to start (running jobs' time limits, or unknown without one).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const FLEET: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: h100}
spec: {gpu: {model: H100, count: 8}, nvlink: full, size: {min: 3, max: 3}}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, default: true, gracePeriod: 5m}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: research}
spec: {quota: [{model: H100, guaranteed: 8, limit: 8}]}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: prod}
spec: {quota: [{model: H100, guaranteed: 8}]}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: train}
spec: {queue: research, gpusPerReplica: 8, timeLimit: 4h}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: serve}
spec: {queue: prod, gpusPerReplica: 8}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: eval}
spec: {queue: research, gpusPerReplica: 8, timeLimit: 1h}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: wide}
spec: {queue: prod, replicas: 3, gpusPerReplica: 8, timeLimit: 2h}
";

fn observed() -> String {
    let mut out = String::from("nodes:\n");
    for i in 0..3 {
        out.push_str(&format!(
            "  - name: h100-{i}\n    pool: h100\n    gpus: [{}]\n",
            (0..8)
                .map(|g| format!("{{index: {g}, model: H100}}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out.push_str(
        "running:\n\
         \x20 - {job: train, started: 2026-11-21T09:00:00Z, placement: [{node: h100-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}]}\n\
         \x20 - {job: serve, started: 2026-11-20T09:00:00Z, placement: [{node: h100-1, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}]}\n",
    );
    out
}

fn gitfleet(dir: &Path, args: &[&str]) -> (String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .current_dir(dir)
        .args(args)
        .args([
            "--observed",
            "observed.yaml",
            "--now",
            "2026-11-21T10:00:00Z",
        ])
        .output()
        .expect("run gitfleet");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).expect("UTF-8"),
        out.status.code().unwrap_or(-1),
    )
}

fn fleet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("fleet")).unwrap();
    std::fs::write(dir.path().join("fleet/fleet.yaml"), FLEET).unwrap();
    std::fs::write(dir.path().join("observed.yaml"), observed()).unwrap();
    dir
}

#[test]
fn explain_says_what_would_let_a_pending_job_run_and_when_it_starts() {
    let dir = fleet();
    let (out, code) = gitfleet(dir.path(), &["explain", "eval", "fleet", "-o", "json"]);
    assert_eq!(code, 0);
    let x: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(x["status"], "pending");
    // research uses 8 of its limit 8: raised to 16, a node is free.
    let raise = &x["suggestions"][0];
    assert_eq!(raise["changes"][0]["kind"], "raise-limit");
    assert_eq!(raise["changes"][0]["queue"], "research");
    assert_eq!(raise["changes"][0]["from"], 8);
    assert_eq!(raise["changes"][0]["to"], 16);
    // train's time limit ends at 13:00; then eval fits under the limit.
    let start = &x["expected_start"];
    assert_eq!(start["status"], "expected");
    assert_eq!(start["at"], "2026-11-21T13:00:00Z");
    assert_eq!(start["waits_for"], serde_json::json!(["train"]));

    let (text, _) = gitfleet(dir.path(), &["explain", "eval", "fleet"]);
    assert!(
        text.contains("What would let it run now (each change checked by planning with it):\n  - raise queue research's limit on H100 by 8 (from 8 to 16)"),
        "{text}"
    );
    assert!(
        text.contains("  by 2026-11-21T13:00:00Z, when train ends (time limit or grace period)"),
        "{text}"
    );

    // A running job gets neither field.
    let (out, _) = gitfleet(dir.path(), &["explain", "train", "fleet", "-o", "json"]);
    let x: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(x["status"], "running");
    assert!(
        x.get("suggestions").is_none() && x.get("expected_start").is_none(),
        "{x}"
    );
}

#[test]
fn plan_suggest_adds_answers_to_pending_entries_and_nothing_else() {
    let dir = fleet();
    let (plain, _) = gitfleet(dir.path(), &["plan", "fleet", "-o", "json"]);
    let (suggested, code) = gitfleet(dir.path(), &["plan", "fleet", "--suggest", "-o", "json"]);
    assert_eq!(code, 0);
    let mut with: Value = serde_json::from_str(&suggested).unwrap();
    let pending = with["pending"].as_array().unwrap().clone();
    let by_job = |job: &str| pending.iter().find(|p| p["job"] == job).unwrap().clone();
    assert_eq!(
        by_job("eval")["expected_start"]["at"],
        "2026-11-21T13:00:00Z"
    );
    // wide needs all three nodes; serve holds one and has no time limit.
    let wide = by_job("wide");
    assert_eq!(wide["expected_start"]["status"], "unknown");
    assert_eq!(
        wide["expected_start"]["text"],
        "unknown: serve runs without a time limit"
    );
    assert!(wide["suggestions"].is_array(), "{wide}");
    // Without the two fields, the plan is the plain one.
    for p in with["pending"].as_array_mut().unwrap() {
        let p = p.as_object_mut().unwrap();
        assert!(p.remove("expected_start").is_some());
        assert!(p.remove("suggestions").is_some());
    }
    assert_eq!(with, serde_json::from_str::<Value>(&plain).unwrap());

    // --suggest-jobs caps who gets suggestions; every one has a start.
    let (capped, _) = gitfleet(
        dir.path(),
        &[
            "plan",
            "fleet",
            "--suggest",
            "--suggest-jobs",
            "1",
            "-o",
            "json",
        ],
    );
    let capped: Value = serde_json::from_str(&capped).unwrap();
    let entries = capped["pending"].as_array().unwrap();
    assert_eq!(
        entries
            .iter()
            .filter(|p| p.get("suggestions").is_some())
            .count(),
        1
    );
    assert!(entries.iter().all(|p| p.get("expected_start").is_some()));
    assert!(
        entries[0].get("suggestions").is_some(),
        "the first in fair-share order"
    );
}
