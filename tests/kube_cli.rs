//! `--executor kube` on the command line: where no cluster exists, refused
//! with a clear message before the state directory is touched; against a
//! fake API server over HTTP (tests/kube_support), the whole binary runs
//! the plan on the cluster (`reconcile --once`, three runs).

#![cfg(feature = "kube")] // the binary's kube executor (a default feature)
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::collections::{BTreeMap, BTreeSet};
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

// ---------------------------------------------------------------------------
// End to end: the binary against a fake API server over HTTP.

mod kube_support;

use std::time::{Duration, Instant};

use kube_support::{Cluster, FakeApi, Seen};
use reconciler::state::{Phase, Store};
use serde_json::{Value, json};

const FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: H100-SXM-80GB, count: 8}
  nvlink: full
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q}
spec:
  quota: [{model: H100-SXM-80GB, guaranteed: 16}]
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: low}
spec: {value: 10, gracePeriod: 30s, default: true}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: high}
spec: {value: 500, gracePeriod: 45s}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: train}
spec:
  queue: q
  priorityClass: low
  replicas: 2
  gpusPerReplica: 4
  image: registry.example.com/train:1
  command: [python, train.py]
  env: {EPOCHS: "3"}
"#;

/// The job the second run finds in Git: it needs both nodes whole.
const URGENT: &str = r#"apiVersion: gitfleet/v1
kind: Job
metadata: {name: urgent}
spec:
  queue: q
  priorityClass: high
  replicas: 2
  gpusPerReplica: 8
  image: registry.example.com/eval:2
"#;

/// A GPU node of pool `p` as GPU Feature Discovery and the device plugin
/// describe it.
fn gpu_node(name: &str) -> Value {
    node_of(name, "p", "a", "r0", "NVIDIA-H100-80GB-HBM3")
}

/// An 8-GPU node of `pool` in `zone` and `rack` with GFD's `product`.
fn node_of(name: &str, pool: &str, zone: &str, rack: &str, product: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "gitfleet.io/pool": pool,
            "gitfleet.io/rack": rack,
            "topology.kubernetes.io/zone": zone,
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.count": "8"}},
        "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "192"},
                   "allocatable": {"nvidia.com/gpu": "8", "cpu": "190"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// `gitfleet reconcile FLEET --executor kube --once` against `api`, with
/// a kubeconfig naming it in `home` and nothing else; waits at most 60 s.
fn reconcile_once(api: &FakeApi, home: &Path, fleet: &Path, state: &Path) -> (i32, String) {
    let kubeconfig = api.kubeconfig(home, "gitfleet");
    let stdout = std::fs::File::create(home.join("stdout")).unwrap();
    let stderr = std::fs::File::create(home.join("stderr")).unwrap();
    let mut command = Command::new(BIN);
    command
        .args([
            "reconcile",
            fleet.to_str().unwrap(),
            "--executor",
            "kube",
            "--once",
        ])
        .args(["--kube-namespace", "ml", "--state", state.to_str().unwrap()])
        .current_dir(home)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", home)
        .env("POD_NAME", "gitfleet-0")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("RUST_LOG");
    // The fake is on loopback: no proxy in between.
    for proxy in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        command.env_remove(proxy).env_remove(proxy.to_lowercase());
    }
    let mut child = command.stdout(stdout).stderr(stderr).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "reconcile --once did not end in 60 s: {}",
                std::fs::read_to_string(home.join("stderr")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = std::fs::read_to_string(home.join("stdout")).unwrap()
        + &std::fs::read_to_string(home.join("stderr")).unwrap();
    (code, output)
}

/// The requests of one run besides the Lease's: `METHOD PATH`.
fn lines(seen: &[Seen], keep: impl Fn(&Seen) -> bool) -> Vec<String> {
    seen.iter()
        .filter(|s| !s.is_lease() && keep(s))
        .map(Seen::line)
        .collect()
}

/// `name`'s env as a map.
fn env_of(pod: &Value) -> BTreeMap<String, String> {
    pod["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_string(),
                e["value"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// The gang placed by one run: the Service's name (when the job has one)
/// and each rank's Pod body and Binding target, checked against what the
/// state directory records for `job`.
fn check_gang(writes: &[Seen], state: &Path, job: &str, gpus_each: usize, image: &str) -> String {
    let record = Store::open(state).unwrap().jobs().unwrap()[job].clone();
    assert_eq!(record.phase, Phase::Running, "{record:?}");
    assert_eq!(record.placement.len(), 2, "{record:?}");
    let service = &writes[0].body;
    let base = service["metadata"]["name"].as_str().unwrap().to_string();
    assert!(base.starts_with(&format!("gf-{job}-")), "{base}");
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(service["spec"]["selector"]["gitfleet.io/job"], job);
    for (rank, part) in record.placement.iter().enumerate() {
        let pod = &writes[1 + rank].body;
        let binding = &writes[3 + rank];
        let name = format!("{base}-{rank}");
        assert_eq!(pod["metadata"]["name"], name.as_str());
        assert_eq!(pod["metadata"]["labels"]["gitfleet.io/job"], job);
        assert_eq!(
            pod["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "gitfleet"
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["name"], base.as_str());
        assert_eq!(pod["spec"]["schedulerName"], "gitfleet");
        assert!(
            pod["spec"]["nodeName"].is_null(),
            "bound by the Binding, not the Pod"
        );
        let main = &pod["spec"]["containers"][0];
        assert_eq!(main["image"], image);
        let count = gpus_each.to_string();
        assert_eq!(
            main["resources"]["limits"]["nvidia.com/gpu"],
            count.as_str()
        );
        assert_eq!(
            main["resources"]["requests"]["nvidia.com/gpu"],
            count.as_str()
        );
        // The GPUs the plan chose on that node, and the rendezvous.
        assert_eq!(part.gpus.len(), gpus_each);
        let planned: Vec<String> = part.gpus.iter().map(u32::to_string).collect();
        let env = env_of(pod);
        assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], planned.join(","), "{env:?}");
        assert_eq!(env["GITFLEET_GPUS"], planned.join(","));
        let local: Vec<String> = (0..gpus_each).map(|i| i.to_string()).collect();
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], local.join(","));
        assert_eq!(env["WORLD_SIZE"], "2");
        assert_eq!(env["RANK"], rank.to_string());
        assert_eq!(env["MASTER_ADDR"], format!("replica-0.{base}.ml.svc"));
        assert_eq!(
            binding.path,
            format!("/api/v1/namespaces/ml/pods/{name}/binding")
        );
        assert_eq!(binding.body["target"]["kind"], "Node");
        assert_eq!(binding.body["target"]["name"], part.node.as_str());
    }
    base
}

#[test]
fn reconcile_once_runs_the_plan_on_a_cluster_over_http() {
    let mut cluster = Cluster::default();
    cluster.add_node(gpu_node("p-0"));
    cluster.add_node(gpu_node("p-1"));
    // A CPU node: no GPUs, no pool; not part of the fleet.
    cluster.add_node(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "cpu-0", "labels": {"topology.kubernetes.io/zone": "a"}},
        "status": {"capacity": {"cpu": "64"}, "conditions": [{"type": "Ready", "status": "True"}]}}));
    let api = FakeApi::start(cluster);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let fleet = tmp.path().join("fleet");
    let state = tmp.path().join("state");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&fleet).unwrap();
    std::fs::write(fleet.join("fleet.yaml"), FLEET).unwrap();

    // Run 1: the cluster is listed and watched, then `train` is placed:
    // the headless Service, both Pods, then both Bindings.
    let (code, output) = reconcile_once(&api, &home, &fleet, &state);
    assert_eq!(code, 0, "{output}");
    let seen = api.seen_since(0);
    assert_eq!(
        lines(&seen, |s| !s.is_write())[..4],
        [
            "GET /api/v1/nodes",
            "GET /api/v1/nodes",
            "GET /api/v1/namespaces/ml/pods",
            "GET /api/v1/namespaces/ml/pods",
        ],
        "{seen:#?}"
    );
    let reads: Vec<&Seen> = seen.iter().filter(|s| !s.is_lease()).take(4).collect();
    assert!(!reads[0].query.contains_key("watch"));
    assert_eq!(reads[1].query["watch"], "true");
    assert_eq!(
        reads[3].query["labelSelector"],
        "app.kubernetes.io/managed-by=gitfleet"
    );
    assert_eq!(reads[3].query["watch"], "true");
    let writes: Vec<Seen> = seen
        .iter()
        .filter(|s| s.is_write() && !s.is_lease())
        .cloned()
        .collect();
    let base = check_gang(&writes, &state, "train", 4, "registry.example.com/train:1");
    assert_eq!(
        lines(&writes, |_| true),
        [
            "POST /api/v1/namespaces/ml/services".to_string(),
            "POST /api/v1/namespaces/ml/pods".to_string(),
            "POST /api/v1/namespaces/ml/pods".to_string(),
            format!("POST /api/v1/namespaces/ml/pods/{base}-0/binding"),
            format!("POST /api/v1/namespaces/ml/pods/{base}-1/binding"),
        ]
    );
    let env = env_of(&writes[1].body);
    assert_eq!(env["EPOCHS"], "3");
    assert_eq!(
        writes[1].body["spec"]["containers"][0]["command"],
        json!(["python", "train.py"])
    );
    assert_eq!(writes[1].body["spec"]["terminationGracePeriodSeconds"], 30);
    // The Lease: created, then given up when the run ends.
    let lease: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.is_write() && s.is_lease())
        .collect();
    assert_eq!(
        lease.first().map(|s| s.line()).as_deref(),
        Some("POST /apis/coordination.k8s.io/v1/namespaces/gitfleet/leases")
    );
    assert_eq!(lease[0].body["spec"]["holderIdentity"], "gitfleet-0");
    let last = lease.last().unwrap();
    assert_eq!(last.method, "PUT");
    assert_eq!(last.body["spec"]["holderIdentity"], "");

    // Run 2: `urgent` (high) needs both nodes whole; `train` (low) is
    // evicted with its class's grace period, and `urgent` waits for it.
    std::fs::write(fleet.join("urgent.yaml"), URGENT).unwrap();
    let from = api.count();
    let (code, output) = reconcile_once(&api, &home, &fleet, &state);
    assert_eq!(code, 0, "{output}");
    let seen = api.seen_since(from);
    let writes: Vec<Seen> = seen
        .iter()
        .filter(|s| s.is_write() && !s.is_lease())
        .cloned()
        .collect();
    assert_eq!(
        lines(&writes, |_| true),
        [
            format!("POST /api/v1/namespaces/ml/pods/{base}-0/eviction"),
            format!("POST /api/v1/namespaces/ml/pods/{base}-1/eviction"),
        ],
        "{output}"
    );
    for eviction in &writes {
        assert_eq!(eviction.body["kind"], "Eviction");
        assert_eq!(eviction.body["deleteOptions"]["gracePeriodSeconds"], 30);
    }
    let jobs = Store::open(&state).unwrap().jobs().unwrap();
    assert!(jobs["train"].stopping.is_some(), "{:?}", jobs["train"]);
    assert_eq!(jobs["urgent"].phase, Phase::Pending, "{:?}", jobs["urgent"]);

    // The kubelets end the evicted Pods. Run 3: `train` is seen stopped
    // (its Service deleted), pending again; `urgent` is placed.
    assert_eq!(api.cluster.lock().unwrap().finish_evictions(), 2);
    let from = api.count();
    let (code, output) = reconcile_once(&api, &home, &fleet, &state);
    assert_eq!(code, 0, "{output}");
    let writes: Vec<Seen> = api
        .seen_since(from)
        .into_iter()
        .filter(|s| s.is_write() && !s.is_lease())
        .collect();
    assert_eq!(
        writes[0].line(),
        format!("DELETE /api/v1/namespaces/ml/services/{base}"),
        "{output}"
    );
    let urgent = check_gang(
        &writes[1..],
        &state,
        "urgent",
        8,
        "registry.example.com/eval:2",
    );
    assert_eq!(
        lines(&writes[1..], |_| true),
        [
            "POST /api/v1/namespaces/ml/services".to_string(),
            "POST /api/v1/namespaces/ml/pods".to_string(),
            "POST /api/v1/namespaces/ml/pods".to_string(),
            format!("POST /api/v1/namespaces/ml/pods/{urgent}-0/binding"),
            format!("POST /api/v1/namespaces/ml/pods/{urgent}-1/binding"),
        ]
    );
    assert_eq!(writes[2].body["spec"]["terminationGracePeriodSeconds"], 45);
    let jobs = Store::open(&state).unwrap().jobs().unwrap();
    assert_eq!(jobs["train"].phase, Phase::Pending, "{:?}", jobs["train"]);
    assert_eq!(jobs["train"].preemptions, 1);
    // The cluster holds what the state says runs: urgent's two Pods, bound.
    let pods = api.cluster.lock().unwrap().pods("ml");
    let bound: Vec<(&str, &str)> = pods
        .iter()
        .map(|(name, p)| (name.as_str(), p["spec"]["nodeName"].as_str().unwrap()))
        .collect();
    let placed: Vec<&str> = jobs["urgent"]
        .placement
        .iter()
        .map(|p| p.node.as_str())
        .collect();
    assert_eq!(
        bound,
        [
            (format!("{urgent}-0").as_str(), placed[0]),
            (format!("{urgent}-1").as_str(), placed[1]),
        ]
    );
}

/// Copies the directory tree `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn reconcile_once_places_the_example_fleets_first_iteration() {
    // The example fleet's on-prem pools at their size, as the cluster
    // shows them: 48 + 48 H100 nodes and 29 A100 nodes, 4 to a rack.
    let mut cluster = Cluster::default();
    for (pool, count, zone, product) in [
        ("h100-zone-a", 48, "a", "NVIDIA-H100-80GB-HBM3"),
        ("h100-zone-b", 48, "b", "NVIDIA-H100-80GB-HBM3"),
        ("a100-infer", 29, "a", "NVIDIA-A100-SXM4-80GB"),
    ] {
        for i in 0..count {
            let rack = format!("{pool}-r{}", i / 4);
            cluster.add_node(node_of(&format!("{pool}-{i}"), pool, zone, &rack, product));
        }
    }
    let api = FakeApi::start(cluster);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let fleet = tmp.path().join("fleet");
    let state = tmp.path().join("state");
    std::fs::create_dir_all(&home).unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet"),
        &fleet,
    );
    let (code, output) = reconcile_once(&api, &home, &fleet, &state);
    assert_eq!(code, 0, "{output}");
    let seen = api.seen_since(0);
    // No write refused (the Lease's first read finds none: a 404).
    let failed: Vec<String> = seen
        .iter()
        .filter(|s| s.is_write() && s.status >= 400)
        .map(|s| format!("{} {}", s.line(), s.status))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    let jobs = Store::open(&state).unwrap().jobs().unwrap();
    let running: BTreeSet<&str> = jobs
        .values()
        .filter(|r| r.phase == Phase::Running)
        .map(|r| r.job.as_str())
        .collect();
    assert!(running.len() >= 20, "{running:?}");
    // The writes, job by job: its Service (more than one replica), its
    // Pods, their Bindings, each as the state records the placement.
    let writes: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.is_write() && !s.is_lease())
        .collect();
    let mut placed = BTreeSet::new();
    let mut i = 0;
    while i < writes.len() {
        let job = writes[i].body["metadata"]["labels"]["gitfleet.io/job"]
            .as_str()
            .unwrap_or_else(|| panic!("{:?}", writes[i]));
        let record = &jobs[job];
        let replicas = record.placement.len();
        if replicas > 1 {
            assert_eq!(writes[i].line(), "POST /api/v1/namespaces/ml/services");
            i += 1;
        }
        let pods = &writes[i..i + replicas];
        let bindings = &writes[i + replicas..i + 2 * replicas];
        for (rank, part) in record.placement.iter().enumerate() {
            let pod = &pods[rank].body;
            let name = pod["metadata"]["name"].as_str().unwrap();
            assert_eq!(pods[rank].line(), "POST /api/v1/namespaces/ml/pods");
            assert_eq!(pod["metadata"]["labels"]["gitfleet.io/job"], job);
            assert_eq!(pod["spec"]["schedulerName"], "gitfleet");
            let planned: Vec<String> = part.gpus.iter().map(u32::to_string).collect();
            assert_eq!(env_of(pod)["NVIDIA_VISIBLE_DEVICES"], planned.join(","));
            assert_eq!(
                bindings[rank].line(),
                format!("POST /api/v1/namespaces/ml/pods/{name}/binding")
            );
            assert_eq!(bindings[rank].body["target"]["name"], part.node.as_str());
        }
        i += 2 * replicas;
        assert!(placed.insert(job), "{job} placed twice");
    }
    assert_eq!(placed, running);
    eprintln!(
        "example fleet, first iteration: {} jobs placed, {} requests ({} writes besides the Lease's)",
        placed.len(),
        seen.len(),
        writes.len()
    );
}
