//! How an unchanged iteration's observation scales today: 1,000 GPU Nodes
//! and 10,000 of gitfleet's Pods (2,500 running 4-replica jobs) in the
//! mocked cluster. It is two LISTs per iteration, whatever changed (the
//! test holds that, and that nothing is taken for an event); the figures
//! in docs/kubernetes.md are what it prints:
//! `cargo test -p gitfleet-kube --test observe_scale -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod api_server;

use std::time::Instant;

use api_server::{list, mock_client, step};
use exec::{Executor, JobView};
use gitfleet_kube::{KubeConfig, KubeExecutor, Namespaces};
use model::observed::{NodeGpus, Timestamp};
use model::spec::Duration;
use serde_json::{Value, json};

const NODES: usize = 1_000;
const JOBS: usize = 2_500;
const REPLICAS: usize = 4;

fn node(i: usize) -> Value {
    json!({"metadata": {"name": format!("gpu-{i}"), "labels": {
              "gitfleet.io/pool": "h100", "topology.kubernetes.io/zone": "z1",
              "gitfleet.io/rack": format!("r{}", i / 32),
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}},
           "spec": {},
           "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "192", "memory": "2Ti"},
                      "allocatable": {"nvidia.com/gpu": "8", "cpu": "190", "memory": "2000Gi"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn pod(job: usize, rank: usize, node: usize) -> Value {
    json!({
        "metadata": {"name": format!("gf-job-{job}-a-{rank}"), "namespace": "ml",
            "creationTimestamp": "2026-11-21T11:00:00Z",
            "labels": {"app.kubernetes.io/managed-by": "gitfleet", "gitfleet.io/job": format!("job-{job}"),
                       "gitfleet.io/replica": rank.to_string(), "gitfleet.io/attempt": "a"},
            "annotations": {"gitfleet.io/gpus": "0,1", "gitfleet.io/revision": "abc"}},
        "spec": {"nodeName": format!("gpu-{node}"), "schedulerName": "gitfleet",
                 "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.03-py3"}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "main", "image": "x",
            "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-11-21T11:00:05Z"}}}]}
    })
}

#[tokio::test]
async fn an_unchanged_iteration_at_1000_nodes_and_10000_pods() {
    let nodes: Vec<Value> = (0..NODES).map(node).collect();
    let mut pods = Vec::new();
    let mut placements: Vec<Vec<NodeGpus>> = Vec::new();
    for job in 0..JOBS {
        let mut placement = Vec::new();
        for rank in 0..REPLICAS {
            let n = (job * REPLICAS + rank) * NODES / (JOBS * REPLICAS);
            let gpus = vec![
                u32::try_from((job * REPLICAS + rank) % 4 * 2).unwrap(),
                u32::try_from((job * REPLICAS + rank) % 4 * 2 + 1).unwrap(),
            ];
            pods.push(pod(job, rank, n));
            placement.push(NodeGpus {
                node: format!("gpu-{n}"),
                gpus,
            });
        }
        placements.push(placement);
    }
    let node_list = list("NodeList", nodes);
    let pod_list = list("PodList", pods);
    let bytes = serde_json::to_vec(&node_list).unwrap().len()
        + serde_json::to_vec(&pod_list).unwrap().len();
    let iterations = 3;
    let mut script = Vec::new();
    for _ in 0..iterations {
        script.push(step("GET", "/api/v1/nodes", 200, node_list.clone()));
        script.push(step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            pod_list.clone(),
        ));
    }
    let (client, server) = mock_client(script);
    let mut kube = KubeExecutor::new(client, KubeConfig::new(Namespaces::Fixed("ml".to_string())));
    let names: Vec<String> = (0..JOBS).map(|j| format!("job-{j}")).collect();
    let views: Vec<JobView<'_>> = names
        .iter()
        .zip(&placements)
        .map(|(job, placement)| JobView {
            job,
            placement,
            started: None,
            stop: None,
            spec: None,
            grace: Duration::ZERO,
        })
        .collect();
    let now: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
    let mut times = Vec::new();
    for _ in 0..iterations {
        let started = Instant::now();
        let observed = kube.observe(now, &views).await.unwrap();
        times.push(started.elapsed());
        assert!(observed.events.is_empty());
        assert_eq!(observed.nodes.len(), NODES);
    }
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(
        seen.len(),
        2 * iterations,
        "one LIST of Nodes and one of Pods"
    );
    println!(
        "{NODES} nodes, {} pods: {} requests per iteration, {:.1} MB read per iteration, observe took {:?}",
        JOBS * REPLICAS,
        seen.len() / iterations,
        bytes as f64 / 1e6,
        times
    );
}
