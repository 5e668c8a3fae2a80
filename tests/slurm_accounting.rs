//! The Slurm executor's accounting mode against real Slurm daemons
//! (slurmdbd on MariaDB, slurmctld, three slurmd), started for this test by
//! tests/slurm/start-cluster.sh under a temporary directory and stopped at
//! the end. Skipped when Slurm cannot be installed here (not root, no
//! apt-get) unless GITFLEET_REQUIRE_SLURM is set (scripts/test sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod slurm_support;

use std::path::Path;
use std::process::{Command, Output};

use slurm_support::{Cluster, ROOT, logs, sacctmgr, start, text};

fn gitfleet(c: &Cluster, fleet: &Path, state: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .env("SLURM_CONF", &c.conf)
        .arg("apply")
        .arg(fleet)
        .arg("--state")
        .arg(state)
        .args(["--executor", "slurm", "--slurm-mode", "accounting"])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// `Account|Parent|Fairshare|GrpTRES` of the account associations.
fn tree(c: &Cluster) -> Vec<String> {
    let mut rows: Vec<String> = sacctmgr(
        c,
        &[
            "-P",
            "-n",
            "show",
            "assoc",
            "format=Account,User,ParentName,Fairshare,GrpTRES",
        ],
    )
    .lines()
    .filter(|l| l.split('|').nth(1) == Some("") && !l.starts_with("root|"))
    .map(|l| {
        let f: Vec<&str> = l.split('|').collect();
        format!("{}|{}|{}|{}", f[0], f[2], f[3], f[4])
    })
    .collect();
    rows.sort();
    rows
}

#[test]
fn accounting_mode_applies_the_queue_tree_reverts_drift_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cluster) = start(&tmp.path().join("cluster")) else {
        return;
    };
    let fleet = tmp.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    for f in ["queues.yaml", "priority-classes.yaml", "pools.yaml"] {
        std::fs::copy(format!("{ROOT}/examples/fleet/{f}"), fleet.join(f)).unwrap();
    }
    let state = tmp.path().join("state");

    // First apply: every queue and class appears.
    let out = gitfleet(&cluster, &fleet, &state, &["--auto-approve"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out),
        logs(&cluster.dir)
    );
    assert!(text(&out).contains("+ add account nlp"), "{}", text(&out));
    let accounts = tree(&cluster);
    assert_eq!(accounts.len(), 9, "{accounts:?}");
    assert!(
        accounts.contains(
            &"org|root|1|gres/gpu:a100-sxm4-80gb=232,gres/gpu:h100-sxm-80gb=832".to_string()
        ),
        "{accounts:?}"
    );
    assert!(
        accounts.contains(&"nlp|research|50|gres/gpu:h100-sxm-80gb=320".to_string()),
        "{accounts:?}"
    );
    assert!(
        accounts.contains(
            &"exploration|org|20|gres/gpu:a100-sxm4-80gb=32,gres/gpu:h100-sxm-80gb=256".to_string()
        ),
        "{accounts:?}"
    );
    let qos = sacctmgr(
        &cluster,
        &[
            "-P",
            "-n",
            "show",
            "qos",
            "format=Name,Priority,Preempt,PreemptMode,GraceTime",
        ],
    );
    for row in [
        "critical|1000|high,low,normal|requeue|00:00:00",
        "high|500|low,normal|requeue|00:05:00",
        "normal|100|low|requeue|00:05:00",
        "low|10||requeue|00:05:00",
    ] {
        assert!(qos.lines().any(|l| l == row), "{row} not in\n{qos}");
    }

    // Applying again is a no-op.
    let out = gitfleet(&cluster, &fleet, &state, &["--auto-approve"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Nothing to do."), "{}", text(&out));

    // A hand edit shows up as drift (apply without approval only shows it)…
    sacctmgr(
        &cluster,
        &[
            "-i",
            "modify",
            "account",
            "where",
            "name=vision",
            "set",
            "Fairshare=99",
        ],
    );
    let out = gitfleet(&cluster, &fleet, &state, &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains(
            "~ modify account vision: Fairshare 99 → 30 (drift: changed in Slurm, reverted)"
        ),
        "{}",
        text(&out)
    );
    assert!(tree(&cluster).contains(&"vision|research|99|gres/gpu:h100-sxm-80gb=200".to_string()));
    // …and the next apply reverts it.
    let out = gitfleet(&cluster, &fleet, &state, &["--auto-approve"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(tree(&cluster).contains(&"vision|research|30|gres/gpu:h100-sxm-80gb=200".to_string()));

    // A quota change in the fleet is exactly one sacctmgr modify.
    let queues = std::fs::read_to_string(fleet.join("queues.yaml")).unwrap();
    let changed = queues.replace("guaranteed: 200, limit: 320", "guaranteed: 200, limit: 300");
    assert_ne!(queues, changed);
    std::fs::write(fleet.join("queues.yaml"), changed).unwrap();
    let out = gitfleet(&cluster, &fleet, &state, &["--auto-approve"]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("slurm configuration changes (1):"), "{t}");
    assert!(
        t.contains("~ modify account nlp: GrpTRES gres/gpu:h100-sxm-80gb=320 → gres/gpu:h100-sxm-80gb=300\n"),
        "{t}"
    );
    assert!(tree(&cluster).contains(&"nlp|research|50|gres/gpu:h100-sxm-80gb=300".to_string()));

    // A queue removed from the fleet is deleted in Slurm.
    let queues = std::fs::read_to_string(fleet.join("queues.yaml")).unwrap();
    let speech = queues.find("---\n# yaml-language-server: $schema=../../schemas/fleet.schema.json\napiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: speech").unwrap();
    let next = queues[speech + 4..].find("---\n").unwrap() + speech + 4;
    let without = format!("{}{}", &queues[..speech], &queues[next..]);
    std::fs::write(fleet.join("queues.yaml"), without).unwrap();
    let out = gitfleet(&cluster, &fleet, &state, &["--auto-approve"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("- delete account speech"),
        "{}",
        text(&out)
    );
    assert!(!tree(&cluster).iter().any(|r| r.starts_with("speech|")));

    // Pools as partitions: the example's pools take the cluster's nodes by
    // GRES type, in the order declared (h100-zone-a both H100 nodes,
    // a100-infer the A100 one; h100-zone-b and h100-cloud none); the
    // site's own `gpu` partition is left alone.
    let with_partitions = ["--auto-approve", "--slurm-partitions"];
    let out = gitfleet(&cluster, &fleet, &state, &with_partitions);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("slurm configuration changes (2):"), "{t}");
    assert!(
        t.contains("+ add partition a100-infer: Nodes=gpu-3\n"),
        "{t}"
    );
    assert!(
        t.contains("+ add partition h100-zone-a: Nodes=gpu-1,gpu-2\n"),
        "{t}"
    );
    assert_eq!(
        partitions(&cluster),
        [
            "a100-infer gpu-3 UP",
            "gpu gpu-[1-3] UP",
            "h100-zone-a gpu-[1-2] UP"
        ]
    );
    let out = gitfleet(&cluster, &fleet, &state, &with_partitions);
    assert!(text(&out).contains("Nothing to do."), "{}", text(&out));

    // A hand edit of a pool's partition is drift, reverted.
    scontrol(
        &cluster,
        &["update", "PartitionName=h100-zone-a", "Nodes=gpu-1"],
    );
    let out = gitfleet(&cluster, &fleet, &state, &["--slurm-partitions"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains(
            "~ modify partition h100-zone-a: Nodes gpu-1 → gpu-1,gpu-2 (drift: changed in Slurm, reverted)"
        ),
        "{}",
        text(&out)
    );
    let out = gitfleet(&cluster, &fleet, &state, &with_partitions);
    assert!(out.status.success(), "{}", text(&out));
    assert!(partitions(&cluster).contains(&"h100-zone-a gpu-[1-2] UP".to_string()));

    // A renamed pool: the old partition (gitfleet's) is deleted, the new
    // one created.
    let pools = std::fs::read_to_string(fleet.join("pools.yaml")).unwrap();
    std::fs::write(
        fleet.join("pools.yaml"),
        pools.replace("name: a100-infer", "name: a100-serve"),
    )
    .unwrap();
    let out = gitfleet(&cluster, &fleet, &state, &with_partitions);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("+ add partition a100-serve: Nodes=gpu-3\n"),
        "{t}"
    );
    assert!(t.contains("- delete partition a100-infer\n"), "{t}");
    assert_eq!(
        partitions(&cluster),
        [
            "a100-serve gpu-3 UP",
            "gpu gpu-[1-3] UP",
            "h100-zone-a gpu-[1-2] UP"
        ]
    );
}

/// `scontrol ARGS` on the cluster.
fn scontrol(c: &Cluster, args: &[&str]) -> String {
    let out = Command::new("scontrol")
        .env("SLURM_CONF", &c.conf)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "scontrol {args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// `NAME NODES STATE` of every partition, by name.
fn partitions(c: &Cluster) -> Vec<String> {
    let shown = scontrol(c, &["show", "partition", "--oneliner"]);
    let mut rows: Vec<String> = shown
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let field = |name: &str| {
                l.split_whitespace()
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or("")
                    .to_string()
            };
            format!(
                "{} {} {}",
                field("PartitionName="),
                field("Nodes="),
                field("State=")
            )
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn scheduler_mode_gang_runs_pinned_on_the_planned_nodes_and_is_cancelled() {
    use reconciler::slurm::ProcessRunner;
    use reconciler::slurm::jobs::{Jobs, Submit};

    let tmp = tempfile::tempdir().unwrap();
    let Some(cluster) = start(&tmp.path().join("cluster")) else {
        return;
    };
    sacctmgr(&cluster, &["-i", "add", "account", "nlp"]);
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    sacctmgr(&cluster, &["-i", "add", "user", user.trim(), "account=nlp"]);

    let runner = || ProcessRunner {
        bin_dir: None,
        conf: Some(cluster.conf.clone()),
    };
    let mut jobs = Jobs::new(runner());
    let gang = Submit {
        job: "llama".into(),
        attempt: "1".into(),
        account: "nlp".into(),
        qos: None,
        nodes: vec!["gpu-1".into(), "gpu-2".into()],
        tasks_per_node: 1,
        gpus_per_node: 8,
        gres_type: "h100-sxm-80gb".into(),
        time_limit: Some("10m".parse().unwrap()),
        command: vec!["sleep".into(), "300".into()],
        env: Vec::new(),
        options: Default::default(),
        requeue: false,
        image: None,
    };
    let id = jobs.submit(&gang).unwrap();
    // Submitting the same placement again in the same iteration: known
    // from sbatch's answer.
    assert_eq!(jobs.submit(&gang).unwrap(), id);
    // …and after a crash before it was recorded (a new process lists the
    // queue): finds the held job instead of submitting a second one.
    let mut restarted = Jobs::new(runner());
    assert_eq!(restarted.submit(&gang).unwrap(), id);
    jobs.forget();
    let held = jobs.find(&gang).unwrap().unwrap();
    assert_eq!(
        (held.state.as_str(), held.reason.as_str()),
        ("PENDING", "JobHeldUser")
    );
    assert_eq!(jobs.list().unwrap().len(), 1);

    jobs.release(id).unwrap();
    let mut running = None;
    for _ in 0..100 {
        // A new iteration's look at the queue.
        jobs.forget();
        let job = jobs.find(&gang).unwrap().unwrap();
        if job.state == "RUNNING" {
            running = Some(job);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let running =
        running.unwrap_or_else(|| panic!("the gang did not start\n{}", logs(&cluster.dir)));
    assert_eq!(running.nodes, "gpu-[1-2]");
    assert_eq!(
        running.gres_detail,
        [
            "gpu:h100-sxm-80gb:8(IDX:0-7)",
            "gpu:h100-sxm-80gb:8(IDX:0-7)"
        ]
    );

    jobs.cancel(id, None).unwrap();
    let mut gone = false;
    for _ in 0..100 {
        jobs.forget();
        let left = jobs.find(&gang).unwrap();
        if left.is_none_or(|j| j.state != "RUNNING" && j.state != "PENDING") {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(gone, "the gang was not cancelled");
}

#[test]
fn bad_slurm_arguments_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .args([
                "apply",
                &format!("{ROOT}/examples/fleet"),
                "--auto-approve",
                "--state",
            ])
            .arg(tmp.path().join("state"))
            .args(["--executor", "slurm"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--slurm-user", "alice"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--slurm-user applies to --slurm-mode scheduler"),
        "{}",
        text(&out)
    );
    let out = run(&["--slurm-rest", "unix:/run/slurmrestd.sock"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--slurm-rest applies to --slurm-mode scheduler"),
        "{}",
        text(&out)
    );
    let out = run(&[
        "--slurm-mode",
        "scheduler",
        "--slurm-rest",
        "https://head:6820",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out)
            .contains("invalid slurmrestd address `https://head:6820`: https is not supported"),
        "{}",
        text(&out)
    );
    let out = run(&["--slurm-image-option", "container-image"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--slurm-image-option applies to --slurm-mode scheduler"),
        "{}",
        text(&out)
    );
    let out = run(&["--slurm-mode", "scheduler", "--slurm-image-option", "pyxis"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("container-image"), "{}", text(&out));
    let out = run(&["--slurm-gres-type", "h100"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--slurm-gres-type h100: expected MODEL=TYPE"),
        "{}",
        text(&out)
    );
    assert!(!tmp.path().join("state").exists(), "nothing written");
}
