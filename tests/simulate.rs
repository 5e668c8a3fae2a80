//! `gitfleet simulate` end to end: a tiny fleet and trace through the
//! built binary; the JSON's shape (DESIGN.md §6a), bad input, --make-fleet.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::path::Path;
use std::process::{Command, Output};

fn gitfleet(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

const FLEET: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: A, count: 8}
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: nlp}
spec:
  quota: [{model: A, guaranteed: 8, limit: 16}]
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: cv}
spec:
  quota: [{model: A, guaranteed: 8, limit: 16}]
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 0, default: true, preemptible: false}
";

/// Runs a command that must succeed and print JSON.
fn json(args: &[&str], dir: &Path) -> serde_json::Value {
    let out = gitfleet(args, dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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
fn json_has_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), FLEET).unwrap();
    std::fs::write(
        dir.path().join("trace.csv"),
        "submit,queue,replicas,gpus_per_replica,duration\n0,nlp,2,8,100\n5,cv,1,8,50\n6,cv,1,1,10\n",
    )
    .unwrap();
    let json = json(
        &[
            "simulate",
            "fleet.yaml",
            "--trace",
            "trace.csv",
            "--policy",
            "fifo",
            "-o",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(
        keys(&json),
        [
            "dropped",
            "format_version",
            "jobs",
            "metrics",
            "policy",
            "queues"
        ]
    );
    assert_eq!(json["format_version"], 1);
    assert_eq!(json["policy"], "fifo");
    assert_eq!(json["jobs"], 3);
    assert_eq!(json["dropped"], 0);
    assert_eq!(
        keys(&json["metrics"]),
        [
            "avg_jct_s",
            "avg_pending_s",
            "avg_wait_s",
            "gpu_alloc",
            "gpu_alloc_backlog",
            "makespan_s",
            "max_wait_s",
            "p50_wait_s",
            "p95_wait_s",
            "preemptions"
        ]
    );
    assert!(json["metrics"]["avg_wait_s"].is_u64());
    assert!(json["metrics"]["gpu_alloc"].is_f64());
    assert_eq!(keys(&json["queues"]), ["cv", "nlp"]);
    assert_eq!(
        keys(&json["queues"]["cv"]),
        ["avg_wait_s", "gpu_hours", "jobs", "p95_wait_s"]
    );
    // nlp's gang holds both nodes for 100 s: cv's jobs wait 95 and 94 s.
    assert_eq!(json["queues"]["cv"]["jobs"], 2);
    assert_eq!(json["metrics"]["max_wait_s"], 95);
    assert_eq!(json["queues"]["nlp"]["gpu_hours"].as_f64(), Some(0.44));
}

#[test]
fn fail_on_exits_3_naming_the_expression() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), FLEET).unwrap();
    std::fs::write(
        dir.path().join("trace.csv"),
        "submit,queue,replicas,gpus_per_replica,duration\n0,nlp,2,8,100\n5,cv,1,8,50\n",
    )
    .unwrap();
    let run = |expr: &str| {
        gitfleet(
            &[
                "simulate",
                "fleet.yaml",
                "--trace",
                "trace.csv",
                "--fail-on",
                expr,
            ],
            dir.path(),
        )
    };
    // cv's job waits 95 s behind nlp's gang.
    let out = run("queues.cv.avg_wait_s > 60");
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--fail-on `queues.cv.avg_wait_s > 60` holds"),
        "{stderr}"
    );
    assert_eq!(run("queues.cv.avg_wait_s > 95").status.code(), Some(0));
    // cv waited 5–100 s while nlp held every GPU: share 0 of a weight
    // share of 1/2; nlp never waited: share 1.
    let out = run("share(cv) < 0.9 * weight_share");
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--fail-on `share(cv) < 0.9 * weight_share` holds")
    );
    assert_eq!(
        run("share(nlp) < 0.9 * weight_share").status.code(),
        Some(0)
    );
    let out = run("p95_wait_s > weight_share");
    assert_eq!(
        out.status.code(),
        Some(2),
        "weight_share needs a queue's metric"
    );
    let out = run("queues.speech.avg_wait_s > 1");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no metric `queues.speech.avg_wait_s`"));
    assert_eq!(
        run("p95 wait").status.code(),
        Some(2),
        "clap refuses what does not parse"
    );
}

/// `--ordering shortest-first` (issue 19 item 4) with declared exact
/// limits: on one 8-GPU node of nlp, a 100 s job runs; a 50 s and a 10 s job
/// wait; shortest-first starts the 10 s one first (at 100 s, then the 50 s
/// one at 110 s: the longest wait 109 s), fifo the other way (the 10 s one
/// at 150 s: 148 s). A baseline refuses `--ordering`.
#[test]
fn ordering_shortest_first_replays_by_declared_limits() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = FLEET.replace("size: {min: 2, max: 2}", "size: {min: 1, max: 1}");
    std::fs::write(dir.path().join("fleet.yaml"), fleet).unwrap();
    std::fs::write(
        dir.path().join("trace.csv"),
        "submit,queue,gpus_per_replica,duration\n0,nlp,8,100\n1,nlp,8,50\n2,nlp,8,10\n",
    )
    .unwrap();
    let max_wait = |ordering: &str| {
        let v = json(
            &[
                "simulate",
                "fleet.yaml",
                "--trace",
                "trace.csv",
                "--limits",
                "exact",
                "--ordering",
                ordering,
                "-o",
                "json",
            ],
            dir.path(),
        );
        v["metrics"]["max_wait_s"].as_u64().unwrap()
    };
    assert_eq!(max_wait("shortest-first"), 109);
    assert_eq!(max_wait("fifo"), 148);
    let out = gitfleet(
        &[
            "simulate",
            "fleet.yaml",
            "--trace",
            "trace.csv",
            "--policy",
            "fifo",
            "--ordering",
            "shortest-first",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--ordering applies to --policy gitfleet")
    );
}

#[test]
fn bad_input_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), FLEET).unwrap();
    let cases = [
        (
            "submit,queue,gpus_per_replica,duration\n0,nlp,8,10\n1,nlp,8,-5\n",
            "trace.csv:3: field `duration`: -5 is negative",
        ),
        (
            "submit,queue,gpus_per_replica,duration\n",
            "trace.csv: no jobs to replay",
        ),
        ("", "trace.csv: empty: no header row"),
        (
            "submit,queue,gpus_per_replica,duration\n0,speech,8,10\n",
            "trace line 2: queue `speech` is not in the fleet",
        ),
    ];
    for (csv, want) in cases {
        std::fs::write(dir.path().join("trace.csv"), csv).unwrap();
        let out = gitfleet(
            &["simulate", "fleet.yaml", "--trace", "trace.csv"],
            dir.path(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{csv:?}: {stderr}");
        assert!(stderr.contains(want), "{csv:?}: {stderr}");
    }
    std::fs::write(
        dir.path().join("trace.csv"),
        "submit,queue,gpus_per_replica,duration\n0,nlp,8,10\n",
    )
    .unwrap();
    let out = gitfleet(
        &[
            "simulate",
            "fleet.yaml",
            "--trace",
            "trace.csv",
            "--arrival-scale",
            "0",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--arrival-scale 0"));
}

#[test]
fn make_fleet_writes_a_valid_fleet_for_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("jobs.csv"),
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:00:00,60,16,960,ab12\n2017-10-09 07:00:30,60,1,60,ffff\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("philly_vc_nodes.csv"),
        "vc,node num\nab12,2\n",
    )
    .unwrap();
    let out = gitfleet(
        &[
            "simulate",
            "--trace",
            "jobs.csv",
            "--trace-format",
            "philly",
            "--make-fleet",
            "fleet",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gitfleet(&["validate", "fleet"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let json = json(
        &[
            "simulate",
            "fleet",
            "--trace",
            "jobs.csv",
            "--trace-format",
            "philly",
            "-o",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(
        (json["jobs"].as_u64(), json["dropped"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(json["queues"]["vc-ab12"]["gpu_hours"].as_f64(), Some(0.27));
}

#[test]
fn plot_writes_svg_charts_and_names_an_unwritable_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), FLEET).unwrap();
    std::fs::write(
        dir.path().join("trace.csv"),
        "submit,queue,replicas,gpus_per_replica,duration\n0,nlp,2,8,100\n5,cv,1,8,50\n",
    )
    .unwrap();
    let args = |plot: &str| {
        gitfleet(
            &[
                "simulate",
                "fleet.yaml",
                "--trace",
                "trace.csv",
                "-o",
                "json",
                "--plot",
                plot,
            ],
            dir.path(),
        )
    };
    let out = args("charts/run-1");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The report is the one without --plot.
    let plain = json(
        &[
            "simulate",
            "fleet.yaml",
            "--trace",
            "trace.csv",
            "-o",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        plain
    );
    for (name, series) in [
        ("allocation.svg", "allocated GPUs"),
        ("queue-depth.svg", "nlp"),
        ("wait-cdf.svg", "cv"),
    ] {
        let svg = std::fs::read_to_string(dir.path().join("charts/run-1").join(name)).unwrap();
        assert!(
            svg.starts_with("<svg"),
            "{name}: {}",
            &svg[..svg.len().min(80)]
        );
        assert!(svg.trim_end().ends_with("</svg>"), "{name}");
        assert!(svg.contains("<polyline"), "{name}");
        assert!(svg.contains(series), "{name}: no {series}");
    }
    // Under a file: the directory cannot be created.
    let out = args("fleet.yaml/charts");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--plot fleet.yaml/charts: cannot create the directory"),
        "{stderr}"
    );
}
