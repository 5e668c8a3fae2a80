//! `gitfleet inventory` against the real binary. On a host without an NVIDIA
//! driver (CI) the NVML path must fail with one clear line and exit 1; on a
//! GPU host it must print an observed-state document.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::PathBuf;
use std::process::{Command, Output};

fn gitfleet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(args)
        .output()
        .expect("run gitfleet")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("gitfleet-inventory-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn without_a_driver_inventory_fails_with_one_line() {
    for args in [
        &["inventory"][..],
        &[
            "inventory",
            "-o",
            "json",
            "--pool",
            "h100",
            "--labels",
            "rack=r1",
        ],
        &["inventory", "--watch", "--interval", "1s"],
    ] {
        let out = gitfleet(args);
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        if out.status.success() {
            // A GPU host: the output is an observed state with this host.
            let stdout = text(&out.stdout);
            assert!(stdout.contains("nodes"), "{args:?}: {stdout}");
            continue;
        }
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().count(),
            1,
            "{args:?}: one line, got:\n{stderr}"
        );
        assert!(
            stderr.contains("NVML could not be loaded (libnvidia-ml.so.1 not found)"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("--observed FILE"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn bad_arguments_are_named() {
    let out = gitfleet(&["inventory", "--labels", "rack"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--labels \"rack\": expected KEY=VALUE"));

    let dir = scratch("model-map");
    let map = dir.join("map.yaml");
    std::fs::write(&map, "- not a mapping\n").expect("write");
    let out = gitfleet(&["inventory", "--model-map", map.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("map.yaml: expected a mapping"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn merge_joins_host_snapshots() {
    let dir = scratch("merge");
    let a = dir.join("a.yaml");
    let b = dir.join("b.yaml");
    std::fs::write(
        &a,
        "time: 2026-11-21T10:00:00Z\nnodes:\n  - name: host-b\n    pool: p\n    gpus:\n      - {index: 0, model: H100-SXM-80GB, uuid: GPU-b0, pciBusId: '0000:18:00.0', nvlinkDomain: 0}\n",
    )
    .expect("write");
    std::fs::write(
        &b,
        "time: 2026-11-21T10:01:00Z\nnodes:\n  - name: host-a\n    pool: p\n    gpus:\n      - {index: 0, model: H100-SXM-80GB, uuid: GPU-a0, healthy: false, healthReason: XID 79}\n",
    )
    .expect("write");
    let out = gitfleet(&[
        "inventory",
        "merge",
        a.to_str().expect("utf-8"),
        b.to_str().expect("utf-8"),
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(merged["time"], "2026-11-21T10:01:00Z");
    assert_eq!(merged["nodes"][0]["name"], "host-a");
    assert_eq!(merged["nodes"][0]["gpus"][0]["healthReason"], "XID 79");
    assert_eq!(merged["nodes"][1]["gpus"][0]["pciBusId"], "0000:18:00.0");

    // The YAML form is a valid observed state for `plan --observed`.
    let out = gitfleet(&[
        "inventory",
        "merge",
        a.to_str().expect("utf-8"),
        b.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let merged_file = dir.join("merged.yaml");
    std::fs::write(&merged_file, &out.stdout).expect("write");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    std::fs::write(
        repo.join("pools.yaml"),
        "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100-SXM-80GB, count: 1}\n  size: {min: 2, max: 2}\n",
    )
    .expect("write");
    let out = gitfleet(&[
        "plan",
        repo.to_str().expect("utf-8"),
        "--observed",
        merged_file.to_str().expect("utf-8"),
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(plan["drift"][0]["kind"], "unhealthy-gpu");
    assert_eq!(plan["drift"][0]["node"], "host-a");
    assert_eq!(plan["drift"][0]["action"], "drain");
}

#[test]
fn merge_refuses_a_node_twice() {
    let dir = scratch("conflict");
    let a = dir.join("a.yaml");
    std::fs::write(
        &a,
        "nodes:\n  - {name: host-a, gpus: [{index: 0, model: A}]}\n",
    )
    .expect("write");
    let path = a.to_str().expect("utf-8");
    let out = gitfleet(&["inventory", "merge", path, path]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("node \"host-a\" is in both"), "{stderr}");
    assert!(out.stdout.is_empty());

    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "nodes:\n  - {name: n, gpus: [{index: x, model: A}]}\n",
    )
    .expect("write");
    let out = gitfleet(&["inventory", "merge", bad.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.yaml:2:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn drift_shows_in_text_and_markdown_only_when_present() {
    let case = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cases/plan/drift-report");
    let plan = |format: &str, observed: bool| {
        let mut args = vec![
            "plan",
            "repo",
            "--now",
            "2026-11-21T10:00:00Z",
            "-o",
            format,
        ];
        if observed {
            args.extend(["--observed", "observed.yaml"]);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .args(&args)
            .current_dir(case)
            .output()
            .expect("run gitfleet");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let t = plan("text", true);
    assert!(t.contains("\nDrift (6):\n"), "{t}");
    assert!(t.contains("node h100-0       unhealthy-gpu    GPU 3: 2 uncorrectable ECC errors since the driver loaded → drain"), "{t}");
    let m = plan("markdown", true);
    assert!(
        m.contains("<details open><summary>Drift (6)</summary>"),
        "{m}"
    );
    assert!(
        m.contains(
            "| missing-nodes | `pool cloud` | pool cloud has 0 nodes of its minimum 1 | scale |"
        ),
        "{m}"
    );
    // The derived inventory matches the pools: no drift section at all.
    assert!(!plan("text", false).contains("Drift"));
    assert!(!plan("markdown", false).contains("Drift"));
}

/// What `gitfleet inventory` wrote on a real H100 host (the fixture is its
/// unedited output) reads as observed state: merged, planned against a pool
/// of that model without drift, memory and PCI id kept.
#[test]
fn a_real_hosts_inventory_plans_without_drift() {
    let dir = scratch("real-host");
    let host = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/inventory/h100-host.yaml"
    );
    let out = gitfleet(&["inventory", "merge", host, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let gpu = &merged["nodes"][0]["gpus"][0];
    assert_eq!(gpu["model"], "H100-SXM-80GB");
    assert_eq!(gpu["memoryMiB"], 81559);
    assert_eq!(gpu["pciBusId"], "00000000:00:06.0");
    assert_eq!(gpu["details"]["product"], "NVIDIA H100 80GB HBM3");

    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    std::fs::write(
        repo.join("fleet.yaml"),
        "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: h100}\nspec:\n  gpu: {model: H100-SXM-80GB, count: 1}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: research}\nspec: {quota: [{model: H100-SXM-80GB, guaranteed: 1, limit: 1}]}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: train}\nspec: {queue: research, gpusPerReplica: 1}\n",
    )
    .expect("write");
    let out = gitfleet(&[
        "plan",
        repo.to_str().expect("utf-8"),
        "--observed",
        host,
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(plan["drift"], serde_json::json!([]), "{plan}");
    assert_eq!(plan["actions"][0]["type"], "place", "{plan}");
    assert_eq!(
        plan["actions"][0]["placement"][0]["node"], "gpu-0",
        "{plan}"
    );
}
