//! `gitfleet plan --base B --rev H --simulate TRACE`: the what-if of a pull
//! request (DESIGN.md §6a) on a throwaway repository whose head revision
//! moves guaranteed GPUs from `cv` to `nlp`; `--fail-on` with `base`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod git_support;

use git_support::{TestRepo, gitfleet};

const POOLS: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: A, count: 8}
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 0, default: true, preemptible: true, gracePeriod: 0s}
";

/// Both queues may borrow the whole pool; `nlp_guaranteed` of its 16 GPUs
/// are nlp's, the rest cv's.
fn queues(nlp_guaranteed: u32) -> String {
    format!(
        "\
apiVersion: gitfleet/v1
kind: Queue
metadata: {{name: nlp}}
spec:
  quota: [{{model: A, guaranteed: {nlp_guaranteed}, limit: 16}}]
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {{name: cv}}
spec:
  quota: [{{model: A, guaranteed: {}, limit: 16}}]
",
        16 - nlp_guaranteed
    )
}

/// cv fills the pool with four long 4-GPU jobs; then nlp submits three short
/// 4-GPU jobs, which get GPUs by reclaiming nlp's guarantee from cv.
const TRACE: &str = "\
submit,queue,replicas,gpus_per_replica,duration
0,cv,1,4,1000
0,cv,1,4,1000
0,cv,1,4,1000
0,cv,1,4,1000
10,nlp,1,4,100
10,nlp,1,4,100
10,nlp,1,4,100
";

/// `main~1`: nlp guaranteed 4; `main`: nlp guaranteed 12. The trace sits
/// outside the fleet's folder.
fn repo() -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write("fleet/pools.yaml", POOLS)
        .write("fleet/queues.yaml", &queues(4))
        .write("trace.csv", TRACE);
    repo.commit("Ada", "Initial fleet");
    repo.write("fleet/queues.yaml", &queues(12));
    repo.commit("Ada", "nlp: guarantee 4 -> 12");
    repo
}

fn plan(repo: &TestRepo, extra: &[&str]) -> git_support::Run {
    let mut args = vec![
        "plan",
        "--base",
        "main~1",
        "--rev",
        "main",
        "fleet",
        "--simulate",
        "trace.csv",
    ];
    args.extend_from_slice(extra);
    gitfleet(repo.path(), &args)
}

fn keys(value: &serde_json::Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[test]
fn a_larger_guarantee_shortens_the_queues_waits_in_every_output() {
    let repo = repo();
    let run = plan(&repo, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    // The preview's keys stand; `simulation` is added.
    assert_eq!(
        keys(&doc),
        [
            "base",
            "changed",
            "format_version",
            "head",
            "path",
            "plan",
            "simulation",
            "spec"
        ]
    );
    let sim = &doc["simulation"];
    assert_eq!(keys(sim), ["base", "head", "policy", "queues", "trace"]);
    assert_eq!(sim["trace"], "trace.csv");
    assert_eq!(sim["policy"], "gitfleet");
    for side in ["base", "head"] {
        assert_eq!(
            keys(&sim[side]),
            ["dropped", "jobs", "metrics", "queues"],
            "{side}"
        );
        assert_eq!(sim[side]["jobs"], 7);
        assert_eq!(keys(&sim[side]["queues"]), ["cv", "nlp"]);
        assert_eq!(
            keys(&sim[side]["queues"]["nlp"]),
            [
                "gpu_hours",
                "gpu_share",
                "jobs",
                "p50_wait_s",
                "p95_wait_s",
                "preemptions"
            ]
        );
    }
    assert_eq!(
        keys(&sim["queues"]["nlp"]),
        ["gpu_share", "p50_wait_s", "p95_wait_s", "preemptions"]
    );
    let q =
        |side: &str, queue: &str, field: &str| sim[side]["queues"][queue][field].as_f64().unwrap();
    let delta = |queue: &str, field: &str| sim["queues"][queue][field].as_f64().unwrap();
    // Under the base, nlp's 4 guaranteed GPUs run its jobs one after the
    // other; under the head, its 12 run all three at once.
    assert!(q("base", "nlp", "p95_wait_s") >= 150.0, "{sim:#}");
    assert_eq!(q("head", "nlp", "p95_wait_s"), 0.0, "{sim:#}");
    assert!(delta("nlp", "p95_wait_s") <= -150.0);
    assert_eq!(
        delta("nlp", "p95_wait_s"),
        q("head", "nlp", "p95_wait_s") - q("base", "nlp", "p95_wait_s")
    );
    // ... by taking more of cv's borrowed GPUs back.
    assert!(delta("cv", "preemptions") > 0.0, "{sim:#}");
    assert!(q("head", "cv", "preemptions") >= 3.0, "{sim:#}");
    let shares = q("head", "nlp", "gpu_share") + q("head", "cv", "gpu_share");
    assert!((shares - 1.0).abs() < 1e-3, "{sim:#}");

    // The same in words, and in the pull-request comment.
    let text = plan(&repo, &[]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("Simulated what-if (trace.csv replayed under both revisions, policy gitfleet): 7 → 7 jobs"),
        "{}",
        text.stdout
    );
    let nlp_line = text
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("nlp "))
        .unwrap();
    assert!(nlp_line.contains("→ 0s (−"), "{nlp_line}");
    let md = plan(&repo, &["-o", "markdown"]);
    assert_eq!(md.code, 0, "{}", md.stderr);
    assert!(
        md.stdout.starts_with("### gitfleet preview"),
        "{}",
        md.stdout
    );
    assert!(
        md.stdout.contains("#### Simulated what-if"),
        "{}",
        md.stdout
    );
    assert!(
        md.stdout
            .contains("| queue | p50 wait | p95 wait | GPU-hours share | preemptions |"),
        "{}",
        md.stdout
    );
    assert!(md.stdout.contains("| `nlp` | "), "{}", md.stdout);
    // Without --simulate, the preview has no `simulation`.
    let plain = gitfleet(
        repo.path(),
        &["plan", "--base", "main~1", "fleet", "-o", "json"],
    );
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let plain: serde_json::Value = serde_json::from_str(&plain.stdout).unwrap();
    assert!(plain.get("simulation").is_none());
}

#[test]
fn fail_on_compares_with_the_base_and_exits_3() {
    let repo = repo();
    // nlp waits less under the head: its bound holds not.
    let out = plan(&repo, &["--fail-on", "p95_wait(queue=nlp) > 1.2 * base"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = plan(
        &repo,
        &[
            "--fail-on",
            "p95_wait(queue=nlp) > 1.2 * base",
            "--fail-on",
            "preemptions(queue=cv) > base",
            "-o",
            "json",
        ],
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("plan: --fail-on `preemptions(queue=cv) > base` holds"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("p95_wait(queue=nlp)"),
        "{}",
        out.stderr
    );
    // The preview is still printed.
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(doc["simulation"]["queues"]["cv"].is_object());
    // A metric the report lacks is an error, not a pass.
    let out = plan(&repo, &["--fail-on", "p95_wait(queue=speech) > base"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("no metric `queues.speech.p95_wait_s` in the head report"),
        "{}",
        out.stderr
    );
}

/// `gitfleet ARGS` in `repo` exits 1 saying `message`.
fn refused_with(repo: &TestRepo, args: &[&str], message: &str) {
    let out = gitfleet(repo.path(), args);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(message), "{}", out.stderr);
}

#[test]
fn simulate_needs_a_base() {
    let repo = repo();
    refused_with(
        &repo,
        &["plan", "fleet", "--simulate", "trace.csv"],
        "--simulate TRACE replays the trace under two revisions: it needs --base B",
    );
    refused_with(
        &repo,
        &[
            "plan",
            "--base",
            "main~1",
            "fleet",
            "--fail-on",
            "p95_wait_s > base",
        ],
        "--fail-on bounds the replay of --simulate TRACE",
    );
    let out = gitfleet(
        repo.path(),
        &[
            "plan",
            "--base",
            "main~1",
            "fleet",
            "--trace-format",
            "philly",
        ],
    );
    assert_eq!(
        out.code, 2,
        "clap refuses --trace-format alone: {}",
        out.stderr
    );
    assert!(out.stderr.contains("--simulate <TRACE>"), "{}", out.stderr);
    // `base` has no meaning for a single replay.
    refused_with(
        &repo,
        &[
            "simulate",
            "fleet",
            "--trace",
            "trace.csv",
            "--fail-on",
            "p95_wait_s > base",
        ],
        "only `gitfleet plan --base B --simulate TRACE` has",
    );
}

#[test]
fn nothing_is_replayed_when_a_revision_does_not_validate() {
    let mut repo = repo();
    repo.write(
        "fleet/queues.yaml",
        &queues(12).replace("limit: 16}]\n---", "limit: 16, bogus: 1}]\n---"),
    );
    repo.commit("Ada", "a typo");
    let out = gitfleet(
        repo.path(),
        &[
            "plan",
            "--base",
            "main~1",
            "--rev",
            "main",
            "fleet",
            "--simulate",
            "trace.csv",
            "--fail-on",
            "p95_wait_s > base",
            "-o",
            "json",
        ],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["head"]["valid"], false);
    assert!(doc["simulation"].is_null(), "{doc:#}");
    assert!(
        out.stderr.contains(
            "--simulate: not replayed, a revision does not validate (--fail-on not evaluated)"
        ),
        "{}",
        out.stderr
    );
}
