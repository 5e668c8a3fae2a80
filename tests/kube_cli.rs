//! `--executor kube` on the command line, where no cluster exists: refused
//! with a clear message before the state directory is touched.

#![cfg(feature = "kube")] // the binary's kube executor (a default feature)
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

/// `gitfleet ARGS` with no cluster configuration anywhere: `KUBECONFIG`
/// names a missing file, `HOME` has no `.kube/`, and no in-cluster
/// variables.
fn without_cluster(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("KUBECONFIG", home.join("missing-kubeconfig"))
        .env("HOME", home)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap()
}

#[test]
fn reconcile_without_a_cluster_fails_clearly_and_writes_no_state() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let state_arg = state.to_str().unwrap();
    for command in [
        vec![
            "reconcile",
            "examples/fleet",
            "--executor",
            "kube",
            "--once",
        ],
        vec!["apply", "examples/fleet", "--executor", "kube"],
    ] {
        let mut args = command.clone();
        args.extend(["--state", state_arg]);
        let out = without_cluster(tmp.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {stderr}");
        assert!(
            stderr.contains("--executor kube: no Kubernetes cluster configuration"),
            "{command:?}: {stderr}"
        );
        assert!(
            stderr.contains("KUBECONFIG"),
            "the help says what to do: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!state.exists(), "{command:?} created the state directory");
    }
}

#[test]
fn kube_options_belong_to_the_kube_executor() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let out = without_cluster(
        tmp.path(),
        &[
            "reconcile",
            "examples/fleet",
            "--once",
            "--kube-namespace",
            "ml",
            "--state",
            state.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--kube-* options apply to --executor kube"),
        "{stderr}"
    );
    assert!(!state.exists());
    let out = without_cluster(
        tmp.path(),
        &[
            "reconcile",
            "examples/fleet",
            "--executor",
            "kube",
            "--observed",
            "x.yaml",
            "--state",
            state.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--observed does not apply to the kube executor"),
        "{stderr}"
    );
}

#[test]
fn a_malformed_scale_target_is_refused_before_the_cluster_is_looked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    for (target, expected) in [
        (
            "h100-a=cluster.x-k8s.io/v1beta1/MachineDeployment/capi",
            "--kube-scale-target h100-a=cluster.x-k8s.io/v1beta1/MachineDeployment/capi: expected POOL=GROUP/VERSION/KIND/NAMESPACE/NAME",
        ),
        (
            "h100-a=g/v1/K/ns/a",
            "--kube-scale-target: pool h100-a is given twice",
        ),
    ] {
        let out = without_cluster(
            tmp.path(),
            &[
                "reconcile",
                "examples/fleet",
                "--once",
                "--executor",
                "kube",
                "--kube-scale-target",
                "h100-a=g/v1/K/ns/b",
                "--kube-scale-target",
                target,
                "--state",
                state.to_str().unwrap(),
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!state.exists());
    }
}

#[test]
fn the_node_agent_needs_watch_and_a_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let once = without_cluster(tmp.path(), &["inventory", "--publish-node", "gpu-1"]);
    assert_eq!(once.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&once.stderr).contains("--watch"),
        "{once:?}"
    );
    // The cluster is looked for before NVML: no cluster, a clear error.
    let agent = without_cluster(
        tmp.path(),
        &["inventory", "--watch", "--publish-node", "gpu-1"],
    );
    assert_eq!(agent.status.code(), Some(1), "{agent:?}");
    let stderr = String::from_utf8_lossy(&agent.stderr);
    assert!(
        stderr.contains("--publish-node: no Kubernetes cluster configuration"),
        "{stderr}"
    );
}
