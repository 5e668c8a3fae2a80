//! How observation scales: 1,000 GPU Nodes and 10,000 of gitfleet's Pods
//! (2,500 running 4-replica jobs) in the mocked cluster. The first
//! observation lists both (what every iteration cost before the watch
//! caches) and opens two watches; an unchanged iteration then makes no
//! request and reads nothing; one with a few changes reads their events
//! and one LIST per job that ended (its Pods, to confirm). The test holds
//! the requests; the figures in docs/kubernetes.md are what it prints:
//! `cargo test -p gitfleet-kube --test observe_scale -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod api_server;

use std::time::Instant;

use api_server::{list, mock_client, step, watch};
use exec::{Event, Executor, JobView};
use gitfleet_kube::{KubeConfig, KubeExecutor, Namespaces};
use model::observed::{NodeGpus, Timestamp};
use model::spec::Duration;
use serde_json::{Value, json};

const NODES: usize = 1_000;
const JOBS: usize = 2_500;
const REPLICAS: usize = 4;
/// Jobs that end in the changed iteration.
const ENDED: usize = 3;
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

fn succeeded(mut pod: Value) -> Value {
    pod["status"] = json!({"phase": "Succeeded", "containerStatuses": [{"name": "main",
        "image": "x", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-21T11:30:00Z"}}}]});
    pod
}

fn len(v: &Value) -> usize {
    serde_json::to_vec(v).unwrap().len()
}

#[tokio::test]
async fn observation_at_1000_nodes_and_10000_pods_costs_what_changed() {
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
    let pod_list = list("PodList", pods.clone());
    let listed_bytes = len(&node_list) + len(&pod_list);
    let managed = "app.kubernetes.io/managed-by=gitfleet";
    let (node_watch, mut node_events) = watch("/api/v1/nodes", "7");
    let (pod_watch, mut pod_events) = watch("/api/v1/namespaces/ml/pods", "7");
    let mut script = vec![
        step("GET", "/api/v1/nodes", 200, node_list),
        node_watch,
        step("GET", "/api/v1/namespaces/ml/pods", 200, pod_list).query("labelSelector", managed),
        pod_watch.query("labelSelector", managed),
    ];
    let mut confirm_bytes = 0;
    for job in 0..ENDED {
        let ended: Vec<Value> = (0..REPLICAS)
            .map(|rank| succeeded(pods[job * REPLICAS + rank].clone()))
            .collect();
        let answer = list("PodList", ended);
        confirm_bytes += len(&answer);
        script.push(
            step("GET", "/api/v1/namespaces/ml/pods", 200, answer).query(
                "labelSelector",
                format!("{managed},gitfleet.io/job=job-{job}"),
            ),
        );
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
    let started = Instant::now();
    let first = kube.observe(now, &views).await.unwrap();
    let first_time = started.elapsed();
    assert!(first.events.is_empty());
    assert_eq!(first.nodes.len(), NODES);

    let mut unchanged = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let observed = kube.observe(now, &views).await.unwrap();
        unchanged.push(started.elapsed());
        assert!(observed.events.is_empty());
        assert_eq!(observed.nodes.len(), NODES);
    }

    // A few changes: three jobs end (twelve Pod events), a node is cordoned.
    for job in 0..ENDED {
        for rank in 0..REPLICAS {
            let pod = succeeded(pods[job * REPLICAS + rank].clone());
            pod_events.send("MODIFIED", pod, &format!("{}", 100 + job * REPLICAS + rank));
        }
    }
    let mut cordoned = node(NODES - 1);
    cordoned["spec"]["unschedulable"] = json!(true);
    node_events.send("MODIFIED", cordoned, "200");
    let started = Instant::now();
    let changed = kube.observe(now, &views).await.unwrap();
    let changed_time = started.elapsed();
    assert_eq!(changed.events.len(), ENDED);
    assert!(changed.events.iter().all(|e| matches!(
        e,
        Event::Exited {
            exit_code: Some(0),
            ..
        }
    )));
    let last = changed
        .nodes
        .iter()
        .find(|n| n.name == format!("gpu-{}", NODES - 1));
    assert!(last.unwrap().gpus.iter().all(|g| !g.healthy));
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(
        seen.len(),
        4 + ENDED,
        "the first observation's 2 LISTs and 2 WATCHes, then one LIST per ended job"
    );
    println!(
        "{NODES} nodes, {} pods. First observation: 4 requests (2 LISTs, 2 WATCHes), {:.1} MB read, {first_time:?}. \
         Unchanged iteration: 0 requests, 0 bytes, {unchanged:?}. \
         Changed iteration ({} Pod events, 1 Node event, {ENDED} jobs ended): {ENDED} requests (a LIST per ended job), {:.1} kB read ({} B of events, {confirm_bytes} B of LISTs), {changed_time:?}.",
        JOBS * REPLICAS,
        listed_bytes as f64 / 1e6,
        ENDED * REPLICAS,
        (node_events.sent + pod_events.sent + confirm_bytes) as f64 / 1e3,
        node_events.sent + pod_events.sent,
    );
}
