//! The whole loop on the kube executor: `Reconciler` iterations over a
//! small fleet directory against the mocked API server. The first
//! iteration lists the cluster, starts watching it and places the gang
//! (Service, Pods, Bindings); the next one reads the Pods' ends from the
//! watch (confirmed by a LIST of the job's Pods) and records the job as
//! succeeded; a third makes no request at all.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod api_server;

use std::sync::Arc;

use api_server::{list, mock_client, ok_status, quiet_watch, step, watch};
use gitfleet_kube::{KubeConfig, KubeExecutor, Namespaces};
use model::observed::Timestamp;
use reconcile::state::{Phase, Store};
use reconcile::{ActionResult, FleetSource, Reconciler};
use serde_json::{Value, json};

const FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: H100-SXM-80GB, count: 8}
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q}
spec:
  quota: [{model: H100-SXM-80GB, guaranteed: 16}]
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: j}
spec:
  queue: q
  replicas: 2
  gpusPerReplica: 8
  image: busybox:1.36
  command: ["sleep", "1"]
"#;

fn node(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {
              "gitfleet.io/pool": "p", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
           "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn ended_pod(rank: u32, node: &str) -> Value {
    json!({
        "metadata": {"name": format!("gf-j-x-{rank}"), "namespace": "ml",
            "creationTimestamp": "2026-11-21T10:00:00Z",
            "labels": {"app.kubernetes.io/managed-by": "gitfleet", "gitfleet.io/job": "j",
                       "gitfleet.io/replica": rank.to_string(), "gitfleet.io/attempt": "x"}},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{"name": "main", "image": "x",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-21T10:00:30Z"}}}]}
    })
}

#[tokio::test]
async fn reconcile_places_the_gang_then_records_its_end() {
    let nodes = || list("NodeList", vec![node("p-0"), node("p-1")]);
    let created = |kind: &str| {
        json!({"apiVersion": "v1", "kind": kind,
        "metadata": {"name": "gf-j", "namespace": "ml", "uid": "uid-7"}})
    };
    let (pod_watch, mut pod_events) = watch("/api/v1/namespaces/ml/pods", "7");
    let (client, server) = mock_client(vec![
        // Iteration 1: observe (list and watch), then place.
        step("GET", "/api/v1/nodes", 200, nodes()),
        quiet_watch("/api/v1/nodes", "7"),
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list("PodList", vec![]),
        ),
        pod_watch.query("labelSelector", "app.kubernetes.io/managed-by=gitfleet"),
        step(
            "POST",
            "/api/v1/namespaces/ml/services",
            201,
            created("Service"),
        ),
        step("POST", "/api/v1/namespaces/ml/pods", 201, created("Pod")),
        step("POST", "/api/v1/namespaces/ml/pods", 201, created("Pod")),
        step(
            "POST",
            "/api/v1/namespaces/ml/pods/gf-j-*-0/binding",
            201,
            ok_status(),
        ),
        step(
            "POST",
            "/api/v1/namespaces/ml/pods/gf-j-*-1/binding",
            201,
            ok_status(),
        ),
        // Iteration 2: the watch says both replicas succeeded; a LIST of
        // the job's Pods confirms it before it is reported.
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list("PodList", vec![ended_pod(0, "p-0"), ended_pod(1, "p-1")]),
        )
        .query(
            "labelSelector",
            "app.kubernetes.io/managed-by=gitfleet,gitfleet.io/job=j",
        ),
        // Iteration 3: nothing changed, nothing runs: no request.
    ]);
    let kube = KubeExecutor::new(client, KubeConfig::new(Namespaces::Fixed("ml".to_string())));
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    std::fs::create_dir_all(&fleet).unwrap();
    std::fs::write(fleet.join("fleet.yaml"), FLEET).unwrap();
    let store = Arc::new(Store::open(&dir.path().join("state")).unwrap());
    let mut reconciler = Reconciler::new(FleetSource::Dir { path: fleet }, store.clone(), kube);
    let now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();

    let first = reconciler.iterate(now).await.unwrap();
    assert_eq!(first.executed.len(), 1, "{:?}", first.executed);
    assert!(
        matches!(
            first.executed[0].result,
            ActionResult::Applied(exec::Outcome::Done)
        ),
        "{:?}",
        first.executed[0]
    );
    let record = &store.jobs().unwrap()["j"];
    assert_eq!(record.phase, Phase::Running);
    let placed: Vec<&str> = record.placement.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(placed.len(), 2);

    pod_events.send("ADDED", ended_pod(0, "p-0"), "8");
    pod_events.send("ADDED", ended_pod(1, "p-1"), "9");
    let later: Timestamp = "2026-11-21T10:01:00Z".parse().unwrap();
    let second = reconciler.iterate(later).await.unwrap();
    assert!(second.executed.is_empty(), "{:?}", second.executed);
    let record = &store.jobs().unwrap()["j"];
    assert_eq!(record.phase, Phase::Succeeded);
    assert_eq!(record.exit_code, Some(0));

    let third = reconciler.iterate(later).await.unwrap();
    assert!(third.executed.is_empty(), "{:?}", third.executed);
    drop(reconciler);

    let seen = server.await.unwrap();
    // The Pods were pinned to the nodes and GPUs the plan chose.
    for rank in 0..2 {
        let pod = &seen[5 + rank].body;
        let binding = &seen[7 + rank].body;
        assert_eq!(pod["spec"]["schedulerName"], "gitfleet");
        assert_eq!(binding["metadata"]["name"], pod["metadata"]["name"]);
        assert_eq!(binding["target"]["name"], placed[rank]);
        assert_eq!(
            pod["metadata"]["annotations"]["gitfleet.io/gpus"],
            "0,1,2,3,4,5,6,7"
        );
    }
}
