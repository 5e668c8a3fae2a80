//! `gitfleet plan --base BASE --rev HEAD`: the pull-request preview, against
//! throwaway repositories (see `git_support`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod git_support;

use git_support::{fleet_repo, gitfleet, pull_request};

const NOW: &str = "2026-01-01T00:00:00Z";

fn short(id: &str) -> &str {
    &id[..12]
}

#[test]
fn text_preview_shows_spec_changes_and_scheduling_consequences() {
    let mut repo = fleet_repo();
    let base = repo.repo.head().unwrap().target().unwrap().to_string();
    let head = pull_request(&mut repo);
    let run = gitfleet(
        repo.path(),
        &[
            "plan", "--base", "main~1", "--rev", "main", "fleet", "--now", NOW,
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let expected = format!(
        "\
gitfleet preview of fleet: main~1 ({}) → main ({})

Spec changes: 1 added, 2 changed, 1 removed, 2 moved
  ~ queue vision: H100 guaranteed 8 → 4
  ~ queue vision: H100 limit 16 → 4
  ~ priority class low: preemptible true → false
  + job nlp-b added
  - job old-eval removed
  > job vision-a moved from fleet/jobs/vision.yaml to fleet/jobs/cv.yaml
  > job vision-b moved from fleet/jobs/vision.yaml to fleet/jobs/cv.yaml

Scheduling consequences (same observed state): 1 newly placed, 1 newly pending (vision 1), 1 other job change
  + job nlp-b newly placed on h100-1:gpu4-7
  ~ job old-eval no longer placed on h100-2:gpu0-1
  ! job vision-b newly pending: queue vision: 4 H100 requested, 0 left under limit 4 (was placed on h100-1:gpu4-7)
  GPUs allocated 18 → 16 of 24, pending jobs 0 → 1

YAML diffs:

~ queue vision
--- a/fleet/queues.yaml
+++ b/fleet/queues.yaml
@@ -6,5 +6,5 @@
   parent: org
   quota:
     - model: H100
-      guaranteed: 8
-      limit: 16
+      guaranteed: 4
+      limit: 4

~ priority class low
--- a/fleet/priority-classes.yaml
+++ b/fleet/priority-classes.yaml
@@ -3,5 +3,5 @@
 metadata:
   name: low
 spec:
-  preemptible: true
+  preemptible: false
   value: 10

+ job nlp-b
--- /dev/null
+++ b/fleet/jobs/nlp.yaml
@@ -0,0 +1,7 @@
+apiVersion: gitfleet/v1
+kind: Job
+metadata:
+  name: nlp-b
+spec:
+  gpusPerReplica: 4
+  queue: nlp

- job old-eval
--- a/fleet/jobs/nlp.yaml
+++ /dev/null
@@ -1,8 +0,0 @@
-apiVersion: gitfleet/v1
-kind: Job
-metadata:
-  name: old-eval
-spec:
-  gpusPerReplica: 2
-  priorityClass: low
-  queue: nlp

",
        short(&base),
        short(&head)
    );
    assert_eq!(run.stdout, expected);
}

#[test]
fn markdown_preview_is_a_pr_comment() {
    let mut repo = fleet_repo();
    let base = repo.repo.head().unwrap().target().unwrap().to_string();
    let head = pull_request(&mut repo);
    let run = gitfleet(
        repo.path(),
        &[
            "plan", "--base", "main~1", "fleet", "--now", NOW, "-o", "markdown",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let md = &run.stdout;
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(
        lines[0],
        "### gitfleet preview: changes — specs: 1 added, 2 changed, 1 removed, 2 moved; \
         1 newly placed, 1 newly pending (vision 1), 1 other job change"
    );
    assert_eq!(
        lines[2],
        format!(
            "`fleet`: base `main~1` (`{}`) → `HEAD` (`{}`)",
            short(&base),
            short(&head)
        )
    );
    for needle in [
        "| `!` | job vision-b newly pending: queue vision: 4 H100 requested, 0 left under limit 4 (was placed on h100-1:gpu4-7) |",
        "<details><summary><code>~ queue vision</code> H100 guaranteed 8 → 4 (+1 more)</summary>",
        "- H100 limit 16 → 4",
        "<details><summary><code>~ priority class low</code> preemptible true → false</summary>",
        "<details><summary><code>+ job nlp-b</code> added</summary>",
        "<details><summary><code>- job old-eval</code> removed</summary>",
        "<details><summary>2 objects moved to another file, unchanged</summary>",
        "- job vision-a: `fleet/jobs/vision.yaml` → `fleet/jobs/cv.yaml`",
        "```diff\n--- a/fleet/queues.yaml\n+++ b/fleet/queues.yaml\n",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in\n{md}");
    }
    assert_eq!(
        md.matches("<details>").count(),
        md.matches("</details>").count()
    );
}

#[test]
fn json_preview_is_a_stable_document() {
    let mut repo = fleet_repo();
    let head = pull_request(&mut repo);
    let run = gitfleet(
        repo.path(),
        &[
            "plan", "--base", "main~1", "fleet", "--now", NOW, "-o", "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["head"]["commit"], head.as_str());
    assert_eq!(doc["changed"], true);
    assert_eq!(
        doc["spec"]["summary"],
        serde_json::json!({"added": 1, "removed": 1, "changed": 2, "moved": 2})
    );
    assert_eq!(
        doc["spec"]["objects"][0]["fields"][0],
        serde_json::json!({"field": "H100 guaranteed", "before": 8, "after": 4})
    );
    let texts: Vec<&str> = doc["plan"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "job nlp-b newly placed on h100-1:gpu4-7",
            "job old-eval no longer placed on h100-2:gpu0-1",
            "job vision-b newly pending: queue vision: 4 H100 requested, 0 left under limit 4 \
             (was placed on h100-1:gpu4-7)",
        ]
    );
    assert_eq!(doc["plan"]["jobs"][2]["after"]["state"], "pending");
    assert_eq!(
        doc["plan"]["summary"]["newly_pending_by_queue"]["vision"],
        1
    );
    // byte-identical on a second run
    let again = gitfleet(
        repo.path(),
        &[
            "plan", "--base", "main~1", "fleet", "--now", NOW, "-o", "json",
        ],
    );
    assert_eq!(again.stdout, run.stdout);
}

/// An observed state's header and `count` nodes `h100-N` of 8 healthy H100.
fn h100_nodes(count: usize) -> String {
    let mut observed = String::from("time: 2026-01-01T00:00:00Z\nnodes:\n");
    for n in 0..count {
        observed.push_str(&format!("  - name: h100-{n}\n    pool: h100\n    gpus:\n"));
        for g in 0..8 {
            observed.push_str(&format!(
                "      - {{index: {g}, model: H100, healthy: true}}\n"
            ));
        }
    }
    observed
}

#[test]
fn the_same_observed_state_shows_cancellations() {
    let mut repo = fleet_repo();
    pull_request(&mut repo);
    let mut observed = h100_nodes(3);
    observed.push_str(
        "running:\n  - job: old-eval\n    started: 2025-12-31T00:00:00Z\n    \
         placement: [{node: h100-2, gpus: [0, 1]}]\n",
    );
    repo.write("observed.yaml", &observed);
    let run = gitfleet(
        repo.path(),
        &[
            "plan",
            "--base",
            "HEAD~1",
            "fleet",
            "--observed",
            "observed.yaml",
            "-o",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let old_eval = doc["plan"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == "old-eval")
        .unwrap();
    assert_eq!(old_eval["text"], "job old-eval newly cancelled");
    assert_eq!(old_eval["before"]["state"], "none");
}

#[test]
fn detailed_exit_codes() {
    let mut repo = fleet_repo();
    pull_request(&mut repo);
    let args = |base: &'static str| {
        vec![
            "plan",
            "--base",
            base,
            "fleet",
            "--now",
            NOW,
            "--detailed-exitcode",
        ]
    };
    assert_eq!(gitfleet(repo.path(), &args("HEAD~1")).code, 2);
    let same = gitfleet(repo.path(), &args("HEAD"));
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(
        same.stdout.contains("Spec changes: no changes\n"),
        "{}",
        same.stdout
    );
    assert!(
        same.stdout
            .contains("consequences (same observed state): no scheduling changes\n")
    );
    // without the flag, changes exit 0
    let plain = gitfleet(
        repo.path(),
        &["plan", "--base", "HEAD~1", "fleet", "--now", NOW],
    );
    assert_eq!(plain.code, 0);
    // an unknown revision is an error that names it
    let bad = gitfleet(repo.path(), &args("nope"));
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("unknown revision `nope`"),
        "{}",
        bad.stderr
    );
}

#[test]
fn an_invalid_head_fails_but_still_comments() {
    let mut repo = fleet_repo();
    repo.write(
        "fleet/jobs/nlp.yaml",
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: nlp-a}\n\
         spec: {queue: nlpp, gpusPerReplica: 8}\n",
    );
    repo.commit("Eve", "Typo in queue");
    let run = gitfleet(
        repo.path(),
        &[
            "plan",
            "--base",
            "HEAD~1",
            "fleet",
            "-o",
            "markdown",
            "--detailed-exitcode",
        ],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .starts_with("### gitfleet preview: ❌ does not validate — specs: 1 changed, 1 removed; plan not compared"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("HEAD:fleet/jobs/nlp.yaml:4:15: "),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("HEAD:fleet/jobs/nlp.yaml:4:15: "),
        "{}",
        run.stderr
    );
}

#[test]
fn long_comments_are_cut_with_a_note() {
    let mut repo = fleet_repo();
    let mut jobs = String::new();
    for i in 0..1500 {
        jobs.push_str(&format!(
            "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: sweep-{i:04}}}\n\
             spec: {{queue: nlp, gpusPerReplica: 1, command: [python, train.py, --trial={i}]}}\n"
        ));
    }
    repo.write("fleet/jobs/sweep.yaml", &jobs);
    repo.commit("Sam", "A big sweep");
    let run = gitfleet(
        repo.path(),
        &["plan", "--base", "HEAD~1", "fleet", "-o", "markdown"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let md = &run.stdout;
    assert!(
        md.chars().count() < 65_536,
        "{} characters",
        md.chars().count()
    );
    assert!(
        md.contains("> Output cut to fit a comment of 65536 characters: "),
        "{md}"
    );
    assert!(
        md.contains("Run `gitfleet plan --base HEAD~1 --rev HEAD fleet` for the whole preview.")
    );
    assert_eq!(
        md.matches("<details>").count(),
        md.matches("</details>").count()
    );
}

#[test]
fn base_and_head_may_be_branches_of_a_bare_repository() {
    let mut repo = fleet_repo();
    pull_request(&mut repo);
    let bare_dir = tempfile::tempdir().unwrap();
    repo.bare_clone(&bare_dir.path().join("fleet.git"));
    // `fleet.git/fleet`: the `fleet` directory inside the bare repository
    let run = gitfleet(
        bare_dir.path(),
        &[
            "plan",
            "--base",
            "main~1",
            "--rev",
            "main",
            "fleet.git/fleet",
            "--now",
            NOW,
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("  ~ queue vision: H100 guaranteed 8 → 4\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_change_that_prune_protection_refuses_says_so_in_the_preview() {
    let mut repo = fleet_repo();
    pull_request(&mut repo);
    let mut observed = h100_nodes(1);
    observed.push_str("running:\n");
    for (i, job) in ["old-eval", "gone-1", "gone-2"].iter().enumerate() {
        observed.push_str(&format!(
            "  - {{job: {job}, started: 2025-12-31T00:00:00Z, placement: [{{node: h100-0, gpus: [{i}]}}]}}\n"
        ));
    }
    repo.write("observed.yaml", &observed);
    let args = |output: &'static str| {
        [
            "plan",
            "--base",
            "HEAD~1",
            "fleet",
            "--observed",
            "observed.yaml",
            "-o",
            output,
        ]
    };
    let json = gitfleet(repo.path(), &args("json"));
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let prune = doc["prune"].as_str().unwrap();
    assert!(
        prune.starts_with(
            "the revision removes 3 of 3 running jobs from Git (gone-1, gone-2, old-eval)"
        ),
        "{prune}"
    );
    let text = gitfleet(repo.path(), &args("text"));
    assert!(
        text.stdout
            .contains("! prune protection: the revision removes 3 of 3"),
        "{}",
        text.stdout
    );
    let markdown = gitfleet(repo.path(), &args("markdown"));
    assert!(
        markdown
            .stdout
            .contains("> [!WARNING]\n> **Prune protection**: the revision removes 3 of 3"),
        "{}",
        markdown.stdout
    );
}

/// Commits the work tree's change and previews it against HEAD~1 with
/// `nlp-a` running on all of `h100-0`.
fn preview_with_nlp_a_running(repo: &mut git_support::TestRepo, message: &str) -> git_support::Run {
    repo.commit("Bob", message);
    let mut observed = h100_nodes(1);
    observed.push_str(
        "running:\n  - {job: nlp-a, started: 2025-12-31T23:00:00Z, placement: [{node: h100-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}]}\n",
    );
    repo.write("observed.yaml", &observed);
    gitfleet(
        repo.path(),
        &[
            "plan",
            "--base",
            "HEAD~1",
            "fleet",
            "--observed",
            "observed.yaml",
        ],
    )
}

#[test]
fn spec_changes_of_running_jobs_say_they_wait_for_a_restart() {
    let mut repo = fleet_repo();
    repo.write(
        "fleet/jobs/nlp.yaml",
        &git_support::NLP_JOBS.replace(
            "metadata: {name: nlp-a}\nspec: {queue: nlp, gpusPerReplica: 8}",
            "metadata: {name: nlp-a}\nspec: {queue: nlp, gpusPerReplica: 8, image: \"train:v2\", timeLimit: 2h}",
        ),
    );
    let run = preview_with_nlp_a_running(&mut repo, "New image for nlp-a");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("~ job nlp-a: image added: train:v2 (running; takes effect on restart)"),
        "{}",
        run.stdout
    );
    // A time limit applies at once: no note.
    assert!(
        run.stdout.contains("~ job nlp-a: timeLimit added: 2h\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_restart_annotation_in_the_preview_says_it_restarts_the_job() {
    let mut repo = fleet_repo();
    repo.write(
        "fleet/jobs/nlp.yaml",
        &git_support::NLP_JOBS.replace(
            "metadata: {name: nlp-a}\n",
            "metadata: {name: nlp-a, annotations: {gitfleet/restart: \"1\"}}\n",
        ),
    );
    let run = preview_with_nlp_a_running(&mut repo, "Restart nlp-a");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "~ job nlp-a: metadata.annotations added: {gitfleet/restart: \"1\"} (running; restarts it with the current spec)"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("job nlp-a newly restarted (preempted for itself)"),
        "the plan diff shows the restart: {}",
        run.stdout
    );
    // Nobody else plans on the GPUs of a restarting job: they come back to it.
    assert!(
        !run.stdout.contains("waiting for preemption of nlp-a"),
        "{}",
        run.stdout
    );
}
