//! The Slurm executor's scheduler mode against real Slurm daemons (see
//! tests/slurm_support): `gitfleet apply --executor slurm --slurm-mode
//! scheduler` places a gang pinned to the planned nodes, preempts it for a
//! job reclaiming its guarantee, drains a node Slurm took down, cancels a
//! job removed from Git, places the preempted gang again, and does nothing
//! the next time. The urgent job's `slurm:` section (CPUs and memory per
//! task, output path) is read back from `squeue --json`. With
//! `--slurm-preempt-mode requeue` a preempted job goes back to pending,
//! held, under its Slurm job id, and is placed again on other nodes as the
//! same Slurm job.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod slurm_support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use slurm_support::{Cluster, logs, start, text};

const FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: h100}
spec:
  gpu: {model: H100-SXM-80GB, count: 8}
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: a100}
spec:
  gpu: {model: A100-SXM4-80GB, count: 8}
  size: {min: 1, max: 1}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: org}
spec:
  quota:
    - {model: H100-SXM-80GB, guaranteed: 16, limit: 16}
    - {model: A100-SXM4-80GB, guaranteed: 8, limit: 8}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: team-a}
spec:
  parent: org
  quota:
    - {model: H100-SXM-80GB, guaranteed: 8, limit: 16}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: team-b}
spec:
  parent: org
  quota:
    - {model: H100-SXM-80GB, guaranteed: 8, limit: 16}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: low}
spec: {value: 10, preemptible: true, gracePeriod: 30s, default: true}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: high}
spec: {value: 100, preemptible: false}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: train}
spec:
  queue: team-a
  replicas: 2
  gpusPerReplica: 8
  gpu: {models: [H100-SXM-80GB]}
  timeLimit: 10m
  command: [sleep, "300"]
"#;

const URGENT: &str = r#"apiVersion: gitfleet/v1
kind: Job
metadata: {name: urgent}
spec:
  queue: team-b
  priorityClass: high
  gpusPerReplica: 8
  gpu: {models: [H100-SXM-80GB]}
  command: [sleep, "300"]
  slurm: {cpusPerTask: 2, memPerCpu: 100M, output: "@OUT@/%x-%j.out"}
"#;

/// The output with runs of spaces as one (plan lines pad their columns).
fn words(out: &Output) -> String {
    text(out).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn slurm(c: &Cluster, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .env("SLURM_CONF", &c.conf)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn apply(c: &Cluster, fleet: &Path, state: &Path) -> Output {
    apply_with(c, fleet, state, &[])
}

fn apply_with(c: &Cluster, fleet: &Path, state: &Path, extra: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .env("SLURM_CONF", &c.conf)
        .arg("apply")
        .arg(fleet)
        .arg("--state")
        .arg(state)
        .args(["--executor", "slurm", "--slurm-mode", "scheduler"])
        .args(extra)
        .arg("--auto-approve")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", text(&out), logs(&c.dir));
    out
}

/// `name|state|nodes` of the jobs in squeue (all states), by job id.
fn queue(c: &Cluster) -> Vec<String> {
    slurm(c, "squeue", &["-h", "-t", "all", "-o", "%j|%T|%N"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Whether a `queue` line is of a job that ended (not pending, running or
/// completing: its GPUs are free).
fn ended(line: &str) -> bool {
    !["|PENDING|", "|RUNNING|", "|COMPLETING|"]
        .iter()
        .any(|s| line.contains(s))
}

/// Waits until `check` holds of the queue (at most 20 s).
fn wait_for(c: &Cluster, what: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    let started = Instant::now();
    loop {
        let q = queue(c);
        if check(&q) {
            return q;
        }
        if started.elapsed() > Duration::from_secs(20) {
            panic!("{what}: {q:?}\n{}", logs(&c.dir));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn scheduler_mode_places_preempts_drains_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cluster) = start(&tmp.path().join("cluster")) else {
        return;
    };
    let fleet = tmp.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    std::fs::write(fleet.join("fleet.yaml"), FLEET).unwrap();
    let state = tmp.path().join("state");

    // The accounts and QOS, and the gang pinned to the two H100 nodes.
    let out = apply(&cluster, &fleet, &state);
    let t = words(&out);
    assert!(t.contains("+ add account team-a"), "{t}");
    assert!(t.contains("place train"), "{t}");
    let q = wait_for(&cluster, "train running", |q| {
        q.iter().any(|l| l == "gitfleet-train|RUNNING|gpu-[1-2]")
    });
    assert_eq!(q.len(), 1, "one Slurm job for the gang: {q:?}");
    let gres = slurm(&cluster, "squeue", &["-h", "-o", "%b|%a|%q|%k"]);
    assert_eq!(
        gres.trim(),
        "gres:gpu:h100-sxm-80gb:8|team-a|low|gitfleet:train:1",
        "GPUs, account, QOS and marker"
    );

    // Applying again submits nothing.
    let out = apply(&cluster, &fleet, &state);
    assert!(!words(&out).contains("place train"), "{}", text(&out));
    assert_eq!(queue(&cluster).len(), 1);

    // team-b reclaims its guarantee: train is preempted (SIGTERM ends
    // `sleep` well within the grace period)…
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let urgent = URGENT.replace("@OUT@", out_dir.to_str().unwrap());
    std::fs::write(fleet.join("urgent.yaml"), urgent).unwrap();
    let out = apply(&cluster, &fleet, &state);
    let t = words(&out);
    assert!(t.contains("preempt train"), "{t}");
    wait_for(&cluster, "train stopped", |q| {
        q.iter()
            .any(|l| l.starts_with("gitfleet-train|") && ended(l))
    });
    // …and once it stopped, urgent starts on one of its nodes.
    let out = apply(&cluster, &fleet, &state);
    let t = words(&out);
    assert!(t.contains("place urgent"), "{t}");
    let q = wait_for(&cluster, "urgent running", |q| {
        q.iter()
            .any(|l| l.starts_with("gitfleet-urgent|RUNNING|gpu-"))
    });
    assert!(
        q.iter()
            .any(|l| l == "gitfleet-urgent|RUNNING|gpu-1" || l == "gitfleet-urgent|RUNNING|gpu-2"),
        "{q:?}"
    );
    // Its slurm: section: 2 CPUs for its one task, 100 MB per CPU, the
    // output where it says (Slurm creates the file when the job starts),
    // and gitfleet's marker comment (squeue --json of 22.05 shows
    // `cpus_per_task` as null: `cpus` and `minimum_cpus_per_node` tell).
    let json: serde_json::Value =
        serde_json::from_str(&slurm(&cluster, "squeue", &["--json"])).unwrap();
    let job = json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "gitfleet-urgent")
        .unwrap();
    let pattern = format!("{}/%x-%j.out", out_dir.display());
    assert_eq!(
        (
            &job["cpus"],
            &job["minimum_cpus_per_node"],
            &job["memory_per_cpu"],
            job["standard_output"].as_str(),
            job["comment"]
                .as_str()
                .is_some_and(|c| c.starts_with("gitfleet:urgent:")),
        ),
        (
            &serde_json::json!(2),
            &serde_json::json!(2),
            &serde_json::json!(100),
            Some(pattern.as_str()),
            true,
        ),
        "{job}"
    );
    // slurmstepd creates it once the job is RUNNING in squeue, a moment
    // later on a loaded machine: wait up to 10 s.
    let file = out_dir.join(format!("gitfleet-urgent-{}.out", job["job_id"]));
    for _ in 0..100 {
        if file.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(file.exists(), "{} is missing", file.display());

    // A node Slurm took down is drained by gitfleet.
    slurm(
        &cluster,
        "scontrol",
        &[
            "update",
            "NodeName=gpu-3",
            "State=DOWN",
            "Reason=test-failure",
        ],
    );
    let out = apply(&cluster, &fleet, &state);
    assert!(words(&out).contains("drain gpu-3"), "{}", text(&out));
    let node = slurm(&cluster, "scontrol", &["show", "node", "gpu-3"]);
    assert!(node.contains("DRAIN"), "{node}");
    assert!(node.contains("Reason=gitfleet: GPUs"), "{node}");

    // urgent removed from Git is cancelled; then train, pending since its
    // preemption, starts again as a new Slurm job (a new attempt).
    std::fs::remove_file(fleet.join("urgent.yaml")).unwrap();
    let out = apply(&cluster, &fleet, &state);
    assert!(words(&out).contains("cancel urgent"), "{}", text(&out));
    wait_for(&cluster, "urgent cancelled", |q| {
        q.iter()
            .any(|l| l.starts_with("gitfleet-urgent|") && ended(l))
    });
    let out = apply(&cluster, &fleet, &state);
    assert!(words(&out).contains("place train"), "{}", text(&out));
    let q = wait_for(&cluster, "train running again", |q| {
        q.iter().any(|l| l == "gitfleet-train|RUNNING|gpu-[1-2]")
    });
    assert_eq!(
        q.iter()
            .filter(|l| l.starts_with("gitfleet-train|"))
            .count(),
        2,
        "the preempted Slurm job and the new one: {q:?}"
    );

    // Nothing left to do: nothing is submitted, cancelled or drained again
    // (a drain carried out again would overwrite this reason).
    slurm(
        &cluster,
        "scontrol",
        &[
            "update",
            "NodeName=gpu-3",
            "State=DRAIN",
            "Reason=gitfleet: marked",
        ],
    );
    let before = queue(&cluster);
    let out = apply(&cluster, &fleet, &state);
    let t = words(&out);
    assert!(
        !t.contains("place train") && !t.contains("cancel urgent") && !t.contains("preempt train"),
        "{t}"
    );
    // The drain stays in the plan (the node is still unhealthy) but is
    // not carried out again.
    assert_eq!(queue(&cluster), before);
    let node = slurm(&cluster, "scontrol", &["show", "node", "gpu-3"]);
    assert!(node.contains("Reason=gitfleet: marked"), "{node}");
}

/// team-a has no guarantee, so team-b's urgent job reclaims the one healthy
/// H100 node from train.
const REQUEUE_FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: h100}
spec:
  gpu: {model: H100-SXM-80GB, count: 8}
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: a100}
spec:
  gpu: {model: A100-SXM4-80GB, count: 8}
  size: {min: 1, max: 1}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: org}
spec:
  quota:
    - {model: H100-SXM-80GB, guaranteed: 16, limit: 16}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: team-a}
spec:
  parent: org
  quota:
    - {model: H100-SXM-80GB, guaranteed: 0, limit: 16}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: team-b}
spec:
  parent: org
  quota:
    - {model: H100-SXM-80GB, guaranteed: 8, limit: 16}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: low}
spec: {value: 10, preemptible: true, gracePeriod: 30s, default: true}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: high}
spec: {value: 100, preemptible: false}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: train}
spec:
  queue: team-a
  gpusPerReplica: 8
  gpu: {models: [H100-SXM-80GB]}
  command: [sleep, "300"]
"#;

const REQUEUE_URGENT: &str = r#"apiVersion: gitfleet/v1
kind: Job
metadata: {name: urgent}
spec:
  queue: team-b
  priorityClass: high
  gpusPerReplica: 8
  gpu: {models: [H100-SXM-80GB]}
  command: [sleep, "300"]
"#;

/// `id|state|reason|nodes|comment` of gitfleet-train's Slurm jobs (all states).
fn train_jobs(c: &Cluster) -> Vec<String> {
    slurm(
        c,
        "squeue",
        &[
            "-h",
            "-t",
            "all",
            "-n",
            "gitfleet-train",
            "-o",
            "%i|%T|%r|%N|%k",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn requeue_mode_places_a_preempted_job_again_as_the_same_slurm_job() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cluster) = start(&tmp.path().join("cluster")) else {
        return;
    };
    let fleet = tmp.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    std::fs::write(fleet.join("fleet.yaml"), REQUEUE_FLEET).unwrap();
    let state = tmp.path().join("state");
    let requeue = ["--slurm-preempt-mode", "requeue"];
    let node = |state: &str| {
        slurm(
            &cluster,
            "scontrol",
            &["update", "NodeName=gpu-2", state, "Reason=test"],
        )
    };

    // gpu-2 is down: train starts on gpu-1.
    node("State=DOWN");
    let out = apply_with(&cluster, &fleet, &state, &requeue);
    assert!(words(&out).contains("place train"), "{}", text(&out));
    wait_for(&cluster, "train running", |q| {
        q.iter().any(|l| l == "gitfleet-train|RUNNING|gpu-1")
    });
    let first = train_jobs(&cluster);
    assert_eq!(first.len(), 1, "{first:?}");
    let id = first[0].split('|').next().unwrap().to_string();
    let first_comment = first[0].rsplit_once('|').unwrap().1.to_string();
    assert!(first_comment.starts_with("gitfleet:train:"), "{first:?}");
    let shown = slurm(&cluster, "scontrol", &["show", "job", &id]);
    assert!(shown.contains("Requeue=1"), "{shown}");

    // urgent reclaims team-b's guarantee: train is signalled (SIGTERM ends
    // its `sleep` within the grace period)…
    std::fs::write(fleet.join("urgent.yaml"), REQUEUE_URGENT).unwrap();
    let out = apply_with(&cluster, &fleet, &state, &requeue);
    assert!(words(&out).contains("preempt train"), "{}", text(&out));
    wait_for(&cluster, "train's step ended", |q| {
        q.iter()
            .any(|l| l.starts_with("gitfleet-train|") && ended(l))
    });
    // …then requeued and held under its id, and urgent starts on gpu-1.
    let out = apply_with(&cluster, &fleet, &state, &requeue);
    assert!(words(&out).contains("place urgent"), "{}", text(&out));
    wait_for(&cluster, "urgent running", |q| {
        q.iter().any(|l| l == "gitfleet-urgent|RUNNING|gpu-1")
    });
    let held = train_jobs(&cluster);
    assert_eq!(
        held,
        // (squeue --json's reason is `JobHeldUser`.)
        [format!(
            "{id}|PENDING|job requeued in held state||gitfleet:train:1"
        )],
        "the same Slurm job, pending and held"
    );

    // gpu-2 is back: train is placed there, as the same Slurm job.
    node("State=RESUME");
    let out = apply_with(&cluster, &fleet, &state, &requeue);
    assert!(words(&out).contains("place train"), "{}", text(&out));
    wait_for(&cluster, "train running on gpu-2", |q| {
        q.iter().any(|l| l == "gitfleet-train|RUNNING|gpu-2")
    });
    let again = train_jobs(&cluster);
    assert_eq!(again.len(), 1, "nothing submitted: {again:?}");
    let (job, comment) = again[0].rsplit_once('|').unwrap();
    assert_eq!(
        job,
        format!("{id}|RUNNING|None|gpu-2"),
        "the held job, released"
    );
    assert!(
        comment.starts_with("gitfleet:train:") && comment != first_comment,
        "the new attempt's comment: {comment}"
    );

    // Nothing left to do.
    let out = apply_with(&cluster, &fleet, &state, &requeue);
    let t = words(&out);
    assert!(t.contains("No changes"), "{t}");
    assert_eq!(train_jobs(&cluster).len(), 1);
}
