//! `gitfleet explain JOB`: status, quota arithmetic, node verdicts and
//! fair-share position, checked on the plan scenario repos.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod git_support;

use std::path::Path;
use std::process::Command;

use git_support::{fleet_repo, gitfleet};
use serde_json::Value;

fn explain(case: &str, job: &str) -> (Value, i32) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases/plan")
        .join(case);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gitfleet"));
    cmd.args([
        "explain",
        job,
        "repo",
        "--now",
        "2026-11-21T10:00:00Z",
        "-o",
        "json",
    ])
    .current_dir(&dir);
    if dir.join("observed.yaml").exists() {
        cmd.args(["--observed", "observed.yaml"]);
    }
    let out = cmd.output().expect("run gitfleet explain");
    let json = serde_json::from_slice(&out.stdout).expect("explain prints JSON");
    (json, out.status.code().unwrap_or(-1))
}

#[test]
fn a_quota_blocked_job_shows_the_binding_limit_and_the_nodes() {
    let (x, code) = explain("quota-limit-no-head-of-line", "b-big");
    assert_eq!(code, 0);
    assert_eq!(x["status"], "pending");
    assert_eq!(x["queue"], "q");
    let line = &x["quota"][0];
    assert_eq!(
        (
            line["queue"].as_str(),
            line["usage"].as_u64(),
            line["limit"].as_u64()
        ),
        (Some("q"), Some(4), Some(8))
    );
    assert_eq!(line["fits"], false);
    assert_eq!(line["request"], 8);
    // The node with room is listed first, the full one with the reason.
    assert_eq!(x["nodes"][0]["node"], "p-1");
    assert_eq!(x["nodes"][0]["verdict"], "room for 1 replica");
    assert_eq!(x["nodes"][1]["verdict"], "4 free GPUs; a replica needs 8");
    assert_eq!(x["order"]["position"], 2);
    assert_eq!(x["order"]["of"], 3);
    assert!(
        x["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("4 left under limit 8")),
        "{x}"
    );
}

#[test]
fn a_preemptor_and_its_victim_are_explained() {
    let (x, _) = explain("preempt-same-queue-priority", "high-new");
    assert_eq!(x["status"], "pending");
    let actions = x["actions"].as_array().expect("actions");
    assert!(
        actions
            .iter()
            .any(|a| a["type"] == "preempt" && a["job"] == "low-run" && a["for"] == "high-new"),
        "{x}"
    );
    let (victim, _) = explain("preempt-same-queue-priority", "low-run");
    assert_eq!(victim["status"], "preempted");
    assert!(
        victim["summary"]
            .as_str()
            .is_some_and(|s| s.contains("for high-new")),
        "{victim}"
    );
}

#[test]
fn idle_gpus_kept_for_another_job_are_shown_as_such() {
    // `nominee` holds all of p-0 by nomination when `other` is considered:
    // the node reads as kept for it, not as plain "0 free".
    let (x, code) = explain("nominated-gpus-kept-within-guarantees", "other");
    assert_eq!(code, 0);
    let verdict = x["nodes"][0]["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("4 idle GPUs kept for nominee"),
        "{verdict}"
    );
}

#[test]
fn placed_and_unknown_jobs() {
    let (x, code) = explain("quota-limit-no-head-of-line", "c-small");
    assert_eq!((x["status"].as_str(), code), (Some("placed"), 0));
    let (x, code) = explain("quota-limit-no-head-of-line", "no-such-job");
    assert_eq!((x["status"].as_str(), code), (Some("unknown"), 1));
}

#[test]
fn text_output_names_the_sections() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/plan/quota-limit-no-head-of-line");
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["explain", "b-big", "repo", "--now", "2026-11-21T10:00:00Z"])
        .current_dir(&dir)
        .output()
        .expect("run gitfleet explain");
    let text = String::from_utf8_lossy(&out.stdout);
    for section in [
        "Job b-big: pending",
        "Fair-share order",
        "Quota along the queue path",
        "Candidate nodes",
    ] {
        assert!(text.contains(section), "missing {section:?} in:\n{text}");
    }
}

#[test]
fn rev_explains_the_committed_specs_as_the_working_tree_does() {
    let repo = fleet_repo();
    let now = "2026-11-21T10:00:00Z";
    let explain = |job: &str, output: &str, rev: Option<&str>| {
        let mut args = vec!["explain", job, "fleet", "--now", now, "-o", output];
        args.extend(rev.iter().flat_map(|r| ["--rev", r]));
        gitfleet(repo.path(), &args)
    };
    let mut at_head = Vec::new();
    for job in ["nlp-a", "vision-b"] {
        for output in ["text", "json"] {
            let disk = explain(job, output, None);
            let head = explain(job, output, Some("HEAD"));
            assert_eq!(
                (disk.code, head.code),
                (0, 0),
                "{}{}",
                disk.stderr,
                head.stderr
            );
            assert!(disk.stdout.contains(job), "{}", disk.stdout);
            assert_eq!(disk.stdout, head.stdout, "{job} -o {output}");
            at_head.push(head.stdout);
        }
    }
    // The working tree changes; --rev HEAD still reads the commit.
    repo.remove("fleet/jobs/vision.yaml");
    let gone = explain("vision-b", "json", None);
    assert_eq!(gone.code, 1, "{}", gone.stdout);
    assert_eq!(explain("vision-b", "json", Some("HEAD")).stdout, at_head[3]);
}
