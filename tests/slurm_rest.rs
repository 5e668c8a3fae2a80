//! Scheduler mode's observed state read through slurmrestd
//! (`--slurm-rest`) against real Slurm daemons (see tests/slurm_support):
//! `gitfleet apply --slurm-rest unix:…` places a gang and, applied again,
//! finds it (submits nothing); then the nodes, the queue and the
//! observation the executor builds from them are read through slurmrestd
//! and through `sinfo`/`squeue --json`/`sacct`, and must agree (nodes, GPUs
//! per node, a drained node, running jobs with their placements, exit
//! codes). Skipped where Slurm or slurmrestd cannot be installed, unless
//! GITFLEET_REQUIRE_SLURM is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod slurm_support;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reconciler::exec::{Event, JobView, KeyValue, MemoryKv};
use reconciler::observed::{NodeGpus, Timestamp};
use reconciler::slurm::jobs::{parse_sacct, parse_squeue};
use reconciler::slurm::nodes::{SINFO_FORMAT, parse_sinfo};
use reconciler::slurm::{Endpoint, Mapping, ProcessRunner, RestClient, Scheduler};
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
metadata: {name: team-a}
spec:
  quota:
    - {model: H100-SXM-80GB, guaranteed: 8, limit: 16}
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

fn apply(c: &Cluster, fleet: &Path, state: &Path, rest: &str, jwt: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gitfleet"));
    match jwt {
        Some(token) => command.env("SLURM_JWT", token),
        None => command.env_remove("SLURM_JWT"),
    };
    let out = command
        .env("SLURM_CONF", &c.conf)
        .arg("apply")
        .arg(fleet)
        .arg("--state")
        .arg(state)
        .args(["--executor", "slurm", "--slurm-mode", "scheduler"])
        .args(["--slurm-rest", rest])
        .arg("--auto-approve")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", text(&out), logs(&c.dir));
    out
}

/// Waits until `check` holds of `squeue -h -t all -o %j|%T|%N` (20 s).
fn wait_for(c: &Cluster, what: &str, check: impl Fn(&str) -> bool) {
    let started = Instant::now();
    loop {
        let q = slurm(c, "squeue", &["-h", "-t", "all", "-o", "%j|%T|%N"]);
        if check(&q) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what}: {q}\n{}",
            logs(&c.dir)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn slurmrestd_and_the_commands_observe_the_same_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cluster) = start(&tmp.path().join("cluster")) else {
        return;
    };
    let socket = cluster.dir.join("run/slurmrestd.sock");
    if !socket.exists() {
        assert!(
            std::env::var_os("GITFLEET_REQUIRE_SLURM").is_none(),
            "GITFLEET_REQUIRE_SLURM is set but slurmrestd did not start: {}",
            logs(&cluster.dir)
        );
        eprintln!("skipping: slurmrestd is not installed and cannot be here");
        return;
    }
    let rest = format!("unix:{}", socket.display());
    let fleet = tmp.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    std::fs::write(fleet.join("fleet.yaml"), FLEET).unwrap();
    let state = tmp.path().join("state");

    // The gang placed with the observation read through slurmrestd…
    let out = apply(&cluster, &fleet, &state, &rest, None);
    let t = words(&out);
    assert!(t.contains("place train on gpu-1"), "{t}");
    wait_for(&cluster, "train running", |q| {
        q.contains("gitfleet-train|RUNNING|gpu-[1-2]")
    });
    // …and found running the next time: nothing submitted again.
    let out = apply(&cluster, &fleet, &state, &rest, None);
    assert!(!words(&out).contains("place train"), "{}", text(&out));
    let jobs = slurm(&cluster, "squeue", &["-h", "-t", "all", "-o", "%i|%j"]);
    assert_eq!(jobs.lines().count(), 1, "{jobs}");

    // A job that fails with exit code 3 on gpu-3, then gpu-3 drained.
    let failed = slurm(
        &cluster,
        "sbatch",
        &[
            "--parsable",
            "--job-name=gitfleet-fails",
            "--comment=gitfleet:fails:1",
            "--nodelist=gpu-3",
            "--gres=gpu:a100-sxm4-80gb:2",
            "--output=/dev/null",
            "--wrap=exit 3",
        ],
    );
    let failed: u64 = failed.trim().parse().unwrap();
    wait_for(&cluster, "the failing job ended", |q| {
        q.contains("gitfleet-fails|FAILED|")
    });
    slurm(
        &cluster,
        "scontrol",
        &[
            "update",
            "NodeName=gpu-3",
            "State=DRAIN",
            "Reason=gitfleet: GPU 0 unhealthy",
        ],
    );

    let client = RestClient::new(rest.parse::<Endpoint>().unwrap());

    // Nodes: the same through both, GPUs per node, gpu-3 drained.
    let sinfo = parse_sinfo(&slurm(&cluster, "sinfo", &["-h", "-N", "-o", SINFO_FORMAT])).unwrap();
    let nodes = client.nodes().unwrap();
    assert_eq!(nodes, sinfo);
    let gpus: Vec<(&str, u32)> = nodes
        .iter()
        .map(|n| (n.name.as_str(), n.gpus.iter().map(|(_, k)| k).sum()))
        .collect();
    assert_eq!(gpus, [("gpu-1", 8), ("gpu-2", 8), ("gpu-3", 8)]);
    assert_eq!(nodes[2].state, "drained");
    assert!(nodes[2].drained());

    // The queue: the same jobs, states, placements and exit codes.
    let mut squeue = parse_squeue(&slurm(&cluster, "squeue", &["--json"])).unwrap();
    let mut queue = client.jobs().unwrap();
    squeue.sort_by_key(|j| j.id);
    queue.sort_by_key(|j| j.id);
    assert_eq!(queue, squeue);
    let train = queue.iter().find(|j| j.name == "gitfleet-train").unwrap();
    assert_eq!(
        (train.state.as_str(), train.nodes.as_str()),
        ("RUNNING", "gpu-[1-2]")
    );
    assert_eq!(train.gres_detail.len(), 2, "{:?}", train.gres_detail);
    assert!(
        train
            .gres_detail
            .iter()
            .all(|g| g.starts_with("gpu:h100-sxm-80gb:8(IDX:"))
    );
    let fails = queue.iter().find(|j| j.id == failed).unwrap();
    assert_eq!(fails.exit_code, Some(3));

    // The accounting record: the same state as sacct's; the exit code is
    // sacct's or, with 22.05.8's dbv0.0.38 (which reports 0), unknown.
    // slurmdbd records the job's end a moment after slurmctld knows it: both
    // views are read again until the record is final and they agree.
    let read_sacct = || {
        parse_sacct(&slurm(
            &cluster,
            "sacct",
            &[
                "-X",
                "-n",
                "-P",
                "-o",
                "JobIDRaw,JobName,State,ExitCode",
                "-j",
                &failed.to_string(),
            ],
        ))
        .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut sacct, mut accounted) = (read_sacct(), client.accounted(&[failed]).unwrap());
    while Instant::now() < deadline
        && (sacct
            .first()
            .is_none_or(|r| matches!(r.state.as_str(), "PENDING" | "RUNNING"))
            || accounted.first().map(|a| &a.state) != sacct.first().map(|r| &r.state))
    {
        std::thread::sleep(Duration::from_millis(250));
        sacct = read_sacct();
        accounted = client.accounted(&[failed]).unwrap();
    }
    assert_eq!(accounted.len(), 1);
    assert_eq!(
        (accounted[0].id, &accounted[0].state),
        (sacct[0].id, &sacct[0].state)
    );
    assert_eq!(sacct[0].exit_code, Some(3));
    assert!(
        accounted[0].exit_code == sacct[0].exit_code || accounted[0].exit_code.is_none(),
        "{accounted:?}"
    );

    // The executor's observation, both ways: the same nodes and events.
    let loaded =
        reconciler::load::load_fleet(&[reconciler::load::SourceFile::new("fleet.yaml", FLEET)]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    let observe = |through_rest: bool| {
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        store
            .write(&[
                ("slurm/job/train".into(), Some(train.id.to_string())),
                ("slurm/job/fails".into(), Some(failed.to_string())),
            ])
            .unwrap();
        let runner = ProcessRunner {
            bin_dir: None,
            conf: Some(cluster.conf.clone()),
        };
        let mut s = Scheduler::new(runner, "root".into(), Mapping::default(), store);
        if through_rest {
            s = s.with_rest(client.clone());
        }
        s.set_fleet(&loaded.fleet);
        let placement: Vec<NodeGpus> = ["gpu-1", "gpu-2"]
            .iter()
            .map(|n| NodeGpus {
                node: (*n).to_string(),
                gpus: (0..8).collect(),
            })
            .collect();
        let views: Vec<JobView<'_>> = ["train", "fails"]
            .iter()
            .map(|job| JobView {
                job,
                placement: &placement,
                started: None,
                stop: None,
                spec: None,
                grace: "30s".parse().unwrap(),
            })
            .collect();
        let now: Timestamp = "2026-11-24T00:00:00Z".parse().unwrap();
        s.observe(now, &views).unwrap()
    };
    let cli = observe(false);
    let through_rest = observe(true);
    assert_eq!(through_rest.nodes, cli.nodes);
    assert_eq!(through_rest.events, cli.events);
    let pools: Vec<Option<&str>> = cli.nodes.iter().map(|n| n.pool.as_deref()).collect();
    assert_eq!(pools, [Some("h100"), Some("h100"), Some("a100")]);
    assert!(cli.nodes[2].gpus.iter().all(|g| !g.healthy), "drained");
    assert!(cli.nodes[0].gpus.iter().all(|g| g.healthy));
    assert!(
        matches!(
            through_rest.events.as_slice(),
            [Event::Exited { job, exit_code: Some(3), .. }] if job == "fails"
        ),
        "{:?}",
        through_rest.events
    );

    // slurmrestd on TCP with rest_auth/jwt (where the JWT plugin is
    // installed): the same answers with a token, HTTP 401 without, and
    // `apply --slurm-rest http://…` with $SLURM_JWT finds the gang.
    let Ok(url) = std::fs::read_to_string(cluster.dir.join("run/slurmrestd-jwt.url")) else {
        eprintln!("skipping the JWT part: slurm-wlm-jwt-plugin is not installed");
        return;
    };
    let url = url.trim();
    let token = slurm(&cluster, "scontrol", &["token", "lifespan=600"]);
    let token = token.trim().strip_prefix("SLURM_JWT=").unwrap().to_string();
    let tcp = RestClient::new(url.parse::<Endpoint>().unwrap());
    let e = tcp.nodes().unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("slurmrestd {url}/slurm/v0.0.38/nodes: HTTP 401")),
        "{e}"
    );
    let tcp = tcp.with_token("root".into(), token.clone());
    assert_eq!(tcp.nodes().unwrap(), client.nodes().unwrap());
    let mut jobs = tcp.jobs().unwrap();
    jobs.sort_by_key(|j| j.id);
    assert_eq!(jobs, queue);
    assert_eq!(
        tcp.accounted(&[failed]).unwrap(),
        client.accounted(&[failed]).unwrap()
    );
    let out = apply(&cluster, &fleet, &state, url, Some(&token));
    assert!(!words(&out).contains("place train"), "{}", text(&out));
    let jobs = slurm(&cluster, "squeue", &["-h", "-o", "%j|%T"]);
    assert_eq!(jobs.trim(), "gitfleet-train|RUNNING", "{jobs}");
}
