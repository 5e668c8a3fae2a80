//! The node agent against the mocked API server: its publication is one
//! merge patch of the Node's `gitfleet.io/gpus` annotation, allowed by the
//! agent's own ClusterRole (`deploy/kubernetes/agent-rbac.yaml`: patch on
//! nodes, nothing else); and the executor reads it: a GPU the agent marks
//! unhealthy is unhealthy in the next observation, a malformed or stale
//! view is ignored.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod api_server;

use api_server::{list, mock_client, mock_client_as, quiet_watch, step, watch};
use exec::Executor;
use gitfleet_kube::agent::{AGENT_ANNOTATION, AgentView, publish};
use gitfleet_kube::{KubeConfig, KubeExecutor, Namespaces};
use model::observed::{ObservedGpu, ObservedNode, Timestamp};
use serde_json::{Value, json};

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn host(sick: Option<u32>) -> ObservedNode {
    ObservedNode {
        name: "gpu-1".to_string(),
        pool: Some("h100".to_string()),
        labels: Default::default(),
        idle_since: None,
        gpus: (0..8)
            .map(|i| {
                let unhealthy = sick == Some(i);
                ObservedGpu {
                    uuid: Some(format!("GPU-{i:04}")),
                    memory_mib: Some(81559),
                    nvlink_domain: Some(0),
                    healthy: !unhealthy,
                    health_reason: unhealthy.then(|| "XID 48: double-bit ECC error".to_string()),
                    ..ObservedGpu::new(i, "H100-SXM-80GB")
                }
            })
            .collect(),
    }
}

fn node(annotation: Option<String>) -> Value {
    let mut node = json!({"metadata": {"name": "gpu-1", "labels": {"gitfleet.io/pool": "h100"}},
           "spec": {},
           "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                      "conditions": [{"type": "Ready", "status": "True"}]}});
    if let Some(a) = annotation {
        node["metadata"]["annotations"] = json!({AGENT_ANNOTATION: a});
    }
    node
}

#[tokio::test]
async fn the_agent_patches_only_its_nodes_annotation() {
    let (client, server) = mock_client_as(
        "agent-rbac.yaml",
        vec![
            step("PATCH", "/api/v1/nodes/gpu-1", 200, node(None))
                .query("fieldManager", "gitfleet-agent"),
        ],
    );
    let view = AgentView::of(&host(Some(3)), at("2026-11-21T12:00:00Z"));
    publish(&client, "gpu-1", &view).await.unwrap();
    drop(client);
    let seen = server.await.unwrap();
    let body = &seen[0].body;
    assert_eq!(body.as_object().unwrap().len(), 1, "only metadata: {body}");
    let annotations = body["metadata"]["annotations"].as_object().unwrap();
    assert_eq!(annotations.len(), 1);
    let published: Value =
        serde_json::from_str(annotations[AGENT_ANNOTATION].as_str().unwrap()).unwrap();
    assert_eq!(published["version"], 1);
    assert_eq!(published["publishedAt"], "2026-11-21T12:00:00Z");
    assert_eq!(published["gpus"].as_array().unwrap().len(), 8);
    assert_eq!(
        published["gpus"][3],
        json!({"index": 3, "uuid": "GPU-0003", "model": "H100-SXM-80GB", "memoryMiB": 81559,
               "healthy": false, "reason": "XID 48: double-bit ECC error", "nvlinkDomain": 0})
    );
}

#[tokio::test]
async fn the_executor_reads_the_agents_view_and_ignores_a_bad_one() {
    let now = at("2026-11-21T12:00:00Z");
    let healthy = AgentView::of(&host(None), now).patch();
    let text = |v: &Value| {
        v["metadata"]["annotations"][AGENT_ANNOTATION]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (node_watch, mut nodes) = watch("/api/v1/nodes", "7");
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/nodes",
            200,
            list("NodeList", vec![node(Some(text(&healthy)))]),
        ),
        node_watch,
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list("PodList", vec![]),
        ),
        quiet_watch("/api/v1/namespaces/ml/pods", "7"),
    ]);
    let mut kube = KubeExecutor::new(client, KubeConfig::new(Namespaces::Fixed("ml".to_string())));
    let first = kube.observe(now, &[]).await.unwrap();
    let gpus = &first.nodes[0].gpus;
    assert!(gpus.iter().all(|g| g.healthy));
    assert_eq!(gpus[5].uuid.as_deref(), Some("GPU-0005"));
    // An XID on GPU 3: the agent publishes, the next observation has it.
    let sick = AgentView::of(&host(Some(3)), at("2026-11-21T12:00:30Z")).patch();
    nodes.send("MODIFIED", node(Some(text(&sick))), "8");
    let later = at("2026-11-21T12:01:00Z");
    let second = kube.observe(later, &[]).await.unwrap();
    let health: Vec<bool> = second.nodes[0].gpus.iter().map(|g| g.healthy).collect();
    assert_eq!(health, [true, true, true, false, true, true, true, true]);
    assert_eq!(
        second.nodes[0].gpus[3].health_reason.as_deref(),
        Some("XID 48: double-bit ECC error")
    );
    // Malformed: ignored (a warning); the Node's counts give 8 healthy GPUs.
    nodes.send("MODIFIED", node(Some("{\"version\": 1".to_string())), "9");
    let third = kube.observe(later, &[]).await.unwrap();
    assert!(
        third.nodes[0]
            .gpus
            .iter()
            .all(|g| g.healthy && g.uuid.is_none())
    );
    // Stale (the agent stopped 20 minutes ago): ignored too.
    nodes.send("MODIFIED", node(Some(text(&sick))), "10");
    let fourth = kube.observe(at("2026-11-21T12:20:31Z"), &[]).await.unwrap();
    assert!(
        fourth.nodes[0]
            .gpus
            .iter()
            .all(|g| g.healthy && g.uuid.is_none())
    );
    drop(kube);
    server.await.unwrap();
}
