//! The kube executor against a mocked API server (tower-test's
//! `mock::pair`, as kube-rs controllers are tested): every request the
//! executor makes is asserted in order (method, path, query, body fields)
//! and answered from a script; a request the script does not expect, or
//! one it expects and does not get, fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod api_server;

use std::collections::BTreeMap;

use api_server::{
    executor, list, mock_client, now, ok_status, pod as pod_in_phase, quiet_watch, status, step,
};
use kube::Client;
use serde_json::{Value, json};

use exec::{ActionContext, Event, ExecError, Executor, JobView, Outcome, StopKind, StopView};
use gitfleet_kube::{KubeConfig, KubeExecutor, Namespaces};
use model::observed::{NodeGpus, Timestamp};
use model::plan::Action;
use model::spec::{Duration, JobSpec, Object};

fn job(name: &str, replicas: u32) -> Object<JobSpec> {
    Object {
        metadata: model::spec::Metadata {
            name: name.to_string(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        },
        spec: serde_json::from_value(json!({
            "queue": "research", "replicas": replicas, "gpusPerReplica": 4,
            "image": "nvcr.io/nvidia/pytorch:24.03-py3",
            "command": ["torchrun", "train.py"], "env": {"EPOCHS": "3"}
        }))
        .unwrap(),
        origin: model::diag::Origin::new(
            "test.yaml".into(),
            model::diag::Pos { line: 1, column: 1 },
        ),
    }
}

fn placement() -> Vec<NodeGpus> {
    vec![
        NodeGpus {
            node: "gpu-1".to_string(),
            gpus: vec![0, 1, 2, 3],
        },
        NodeGpus {
            node: "gpu-2".to_string(),
            gpus: vec![4, 5, 6, 7],
        },
    ]
}

const ATTEMPT: &str = "2026-11-21T11:00:00+00:00#0";

fn base() -> String {
    let key = gitfleet_kube::names::start_key(Some(ATTEMPT), &placement());
    gitfleet_kube::names::base_name("llama", Some(&key))
}

fn service_answer() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": base(), "namespace": "ml", "uid": "svc-uid-1"}})
}

fn pod_answer(rank: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": format!("{}-{rank}", base()), "namespace": "ml"}})
}

fn unbound_pod() -> Value {
    let mut pod = pod_in_phase("stale", 0, "none", "Pending", None);
    pod["spec"].as_object_mut().unwrap().remove("nodeName");
    pod
}

/// A GPU node; a cordoned one is drained (cordoned and tainted).
fn gpu_node(name: &str, cordoned: bool) -> Value {
    let mut node = plain_gpu_node(name, cordoned);
    if cordoned {
        node["spec"]["taints"] =
            json!([{"key": "gitfleet.io/unhealthy-gpu", "effect": "NoSchedule"}]);
    }
    node
}

fn plain_gpu_node(name: &str, cordoned: bool) -> Value {
    json!({"metadata": {"name": name, "labels": {
              "gitfleet.io/pool": "h100", "topology.kubernetes.io/zone": "z1",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
           "spec": {"unschedulable": cordoned},
           "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn ctx<'a>(spec: Option<&'a Object<JobSpec>>, grace: u64) -> ActionContext<'a> {
    ActionContext {
        spec,
        attempt: Some(ATTEMPT.to_string()),
        grace: Duration::from_secs(grace),
        revision: "abc123",
    }
}

fn place_action() -> Action {
    Action::Place {
        job: "llama".to_string(),
        placement: placement(),
        reason: "test".to_string(),
    }
}

fn env_of(body: &Value) -> BTreeMap<String, String> {
    body["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn place_creates_the_service_then_every_pod_then_binds_each() {
    let b = base();
    let (client, server) = mock_client(vec![
        step(
            "POST",
            "/api/v1/namespaces/ml/services",
            201,
            service_answer(),
        )
        .query("fieldManager", "gitfleet"),
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(0)),
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(1)),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-0/binding"),
            201,
            ok_status(),
        ),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-1/binding"),
            201,
            ok_status(),
        ),
    ]);
    let mut kube = executor(client);
    let spec = job("llama", 2);
    let outcome = kube
        .execute(&place_action(), &ctx(Some(&spec), 30), now())
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Done);
    drop(kube);
    let seen = server.await.unwrap();
    let service = &seen[0].body;
    assert_eq!(service["metadata"]["name"], b);
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(service["spec"]["selector"]["gitfleet.io/job"], "llama");
    for rank in 0..2u32 {
        let pod = &seen[1 + rank as usize].body;
        assert_eq!(pod["metadata"]["name"], format!("{b}-{rank}"));
        assert_eq!(pod["metadata"]["labels"]["gitfleet.io/job"], "llama");
        assert_eq!(
            pod["metadata"]["labels"]["gitfleet.io/replica"],
            rank.to_string()
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "svc-uid-1");
        assert_eq!(pod["spec"]["schedulerName"], "gitfleet");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
        assert!(pod["spec"].get("nodeName").is_none());
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"],
            "4"
        );
        let env = env_of(pod);
        let gpus = if rank == 0 { "0,1,2,3" } else { "4,5,6,7" };
        assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], gpus);
        assert_eq!(env["RANK"], rank.to_string());
        assert_eq!(env["WORLD_SIZE"], "2");
        assert_eq!(env["MASTER_ADDR"], format!("replica-0.{b}.ml.svc"));
        assert_eq!(env["EPOCHS"], "3");
        let binding = &seen[3 + rank as usize].body;
        assert_eq!(binding["kind"], "Binding");
        assert_eq!(binding["metadata"]["name"], format!("{b}-{rank}"));
        assert_eq!(binding["target"]["kind"], "Node");
        assert_eq!(binding["target"]["name"], format!("gpu-{}", rank + 1));
    }
}

#[tokio::test]
async fn place_again_after_a_crash_creates_nothing_twice() {
    let b = base();
    let (client, server) = mock_client(vec![
        step(
            "POST",
            "/api/v1/namespaces/ml/services",
            409,
            status(409, "AlreadyExists"),
        ),
        step(
            "GET",
            format!("/api/v1/namespaces/ml/services/{b}"),
            200,
            service_answer(),
        ),
        step(
            "POST",
            "/api/v1/namespaces/ml/pods",
            409,
            status(409, "AlreadyExists"),
        ),
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(1)),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-0/binding"),
            409,
            status(409, "Conflict"),
        ),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-1/binding"),
            201,
            ok_status(),
        ),
    ]);
    let mut kube = executor(client);
    let spec = job("llama", 2);
    let outcome = kube
        .execute(&place_action(), &ctx(Some(&spec), 30), now())
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Done);
    drop(kube);
    let seen = server.await.unwrap();
    // The same names as the first try: the Pods it made are found, not doubled.
    assert_eq!(seen[2].body["metadata"]["name"], format!("{b}-0"));
    assert_eq!(seen[3].body["metadata"]["name"], format!("{b}-1"));
    assert_eq!(
        seen[3].body["metadata"]["ownerReferences"][0]["uid"],
        "svc-uid-1"
    );
}

#[tokio::test]
async fn a_server_error_is_transient_and_leaves_the_start_to_be_retried() {
    let (client, server) = mock_client(vec![
        step(
            "POST",
            "/api/v1/namespaces/ml/services",
            201,
            service_answer(),
        ),
        step(
            "POST",
            "/api/v1/namespaces/ml/pods",
            500,
            status(500, "InternalError"),
        ),
    ]);
    let mut kube = executor(client);
    let spec = job("llama", 2);
    let err = kube
        .execute(&place_action(), &ctx(Some(&spec), 30), now())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("500"), "{err}");
    drop(kube);
    // Nothing deleted: the retry goes on with the same names.
    assert_eq!(server.await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_refused_binding_is_permanent_and_undoes_the_start() {
    let b = base();
    let (client, server) = mock_client(vec![
        step(
            "POST",
            "/api/v1/namespaces/ml/services",
            201,
            service_answer(),
        ),
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(0)),
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(1)),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-0/binding"),
            403,
            status(403, "Forbidden"),
        ),
        step(
            "DELETE",
            format!("/api/v1/namespaces/ml/pods/{b}-0"),
            200,
            pod_answer(0),
        ),
        step(
            "DELETE",
            format!("/api/v1/namespaces/ml/pods/{b}-1"),
            404,
            status(404, "NotFound"),
        ),
        step(
            "DELETE",
            format!("/api/v1/namespaces/ml/services/{b}"),
            200,
            service_answer(),
        ),
    ]);
    let mut kube = executor(client);
    let spec = job("llama", 2);
    let err = kube
        .execute(&place_action(), &ctx(Some(&spec), 30), now())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::Action {
                action: "place",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("403 (Forbidden)"), "{err}");
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(seen[6].body["propagationPolicy"], "Background");
}

#[tokio::test]
async fn a_job_without_an_image_is_refused_before_any_request() {
    let (client, server) = mock_client(vec![]);
    let mut kube = executor(client);
    let mut spec = job("llama", 2);
    spec.spec.image = None;
    let err = kube
        .execute(&place_action(), &ctx(Some(&spec), 30), now())
        .await
        .unwrap_err();
    assert!(!err.is_transient());
    assert!(err.to_string().contains("image"), "{err}");
    drop(kube);
    assert!(server.await.unwrap().is_empty());
}

#[tokio::test]
async fn preempt_evicts_with_the_grace_period() {
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list(
                "PodList",
                vec![
                    pod_in_phase("llama", 0, "gpu-1", "Running", None),
                    pod_in_phase("llama", 1, "gpu-2", "Running", None),
                ],
            ),
        )
        .query(
            "labelSelector",
            "app.kubernetes.io/managed-by=gitfleet,gitfleet.io/job=llama",
        ),
        step(
            "POST",
            "/api/v1/namespaces/ml/pods/llama-p0/eviction",
            201,
            ok_status(),
        ),
        step(
            "POST",
            "/api/v1/namespaces/ml/pods/llama-p1/eviction",
            201,
            ok_status(),
        ),
    ]);
    let mut kube = executor(client);
    let action = Action::Preempt {
        job: "llama".to_string(),
        for_job: "urgent".to_string(),
        reason: "test".to_string(),
    };
    let outcome = kube.execute(&action, &ctx(None, 45), now()).await.unwrap();
    assert_eq!(outcome, Outcome::Underway);
    drop(kube);
    let seen = server.await.unwrap();
    for eviction in &seen[1..] {
        assert_eq!(eviction.body["kind"], "Eviction");
        assert_eq!(eviction.body["apiVersion"], "policy/v1");
        assert_eq!(eviction.body["deleteOptions"]["gracePeriodSeconds"], 45);
    }
    assert_eq!(seen[1].body["metadata"]["name"], "llama-p0");
    assert_eq!(seen[1].body["metadata"]["namespace"], "ml");
    assert_eq!(seen[2].body["metadata"]["name"], "llama-p1");
}

#[tokio::test]
async fn an_eviction_a_budget_blocks_is_retried_later() {
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list(
                "PodList",
                vec![pod_in_phase("llama", 0, "gpu-1", "Running", None)],
            ),
        ),
        step(
            "POST",
            "/api/v1/namespaces/ml/pods/llama-p0/eviction",
            429,
            status(429, "TooManyRequests"),
        ),
    ]);
    let mut kube = executor(client);
    let action = Action::Preempt {
        job: "llama".to_string(),
        for_job: "urgent".to_string(),
        reason: "test".to_string(),
    };
    let err = kube
        .execute(&action, &ctx(None, 45), now())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    drop(kube);
    server.await.unwrap();
}

#[tokio::test]
async fn cancel_deletes_live_pods_with_the_grace_period_and_leaves_ended_ones() {
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list(
                "PodList",
                vec![
                    pod_in_phase("llama", 0, "gpu-1", "Running", None),
                    pod_in_phase("llama", 1, "gpu-2", "Succeeded", Some(0)),
                ],
            ),
        ),
        step(
            "DELETE",
            "/api/v1/namespaces/ml/pods/llama-p0",
            200,
            pod_answer(0),
        ),
    ]);
    let mut kube = executor(client);
    let action = Action::Cancel {
        job: "llama".to_string(),
        reason: "removed from Git".to_string(),
    };
    let outcome = kube.execute(&action, &ctx(None, 20), now()).await.unwrap();
    assert_eq!(outcome, Outcome::Underway);
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(seen[1].body["gracePeriodSeconds"], 20);
}

#[tokio::test]
async fn cancel_of_a_job_with_no_pods_is_done() {
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list("PodList", vec![]),
        ),
        // Stopped at once: its Service goes now.
        step(
            "GET",
            "/api/v1/namespaces/ml/services",
            200,
            list(
                "ServiceList",
                vec![json!({"metadata": {"name": "gf-llama-1", "namespace": "ml"}})],
            ),
        )
        .query(
            "labelSelector",
            "app.kubernetes.io/managed-by=gitfleet,gitfleet.io/job=llama",
        ),
        step(
            "DELETE",
            "/api/v1/namespaces/ml/services/gf-llama-1",
            200,
            service_answer(),
        ),
    ]);
    let mut kube = executor(client);
    let action = Action::Cancel {
        job: "llama".to_string(),
        reason: "removed from Git".to_string(),
    };
    assert_eq!(
        kube.execute(&action, &ctx(None, 20), now()).await.unwrap(),
        Outcome::Done
    );
    drop(kube);
    server.await.unwrap();
}

fn view<'a>(job: &'a str, placement: &'a [NodeGpus], stop: Option<StopKind>) -> JobView<'a> {
    JobView {
        job,
        placement,
        started: None,
        stop: stop.map(|kind| StopView { kind, since: now() }),
        spec: None,
        grace: Duration::from_secs(10),
    }
}

#[tokio::test]
async fn observe_lists_nodes_and_pods_and_reports_how_jobs_ended() {
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/nodes",
            200,
            list(
                "NodeList",
                vec![
                    gpu_node("gpu-1", false),
                    gpu_node("gpu-2", true),
                    json!({"metadata": {"name": "cpu-1"}, "status": {"capacity": {"cpu": "8"}}}),
                ],
            ),
        ),
        quiet_watch("/api/v1/nodes", "7"),
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list(
                "PodList",
                vec![
                    pod_in_phase("done", 0, "gpu-1", "Succeeded", Some(0)),
                    pod_in_phase("done", 1, "gpu-2", "Succeeded", Some(0)),
                    pod_in_phase("broke", 0, "gpu-1", "Failed", Some(2)),
                    pod_in_phase("broke", 1, "gpu-2", "Running", None),
                    pod_in_phase("runs", 0, "gpu-1", "Running", None),
                    pod_in_phase("lost", 0, "gpu-9", "Running", None),
                    unbound_pod(),
                ],
            ),
        )
        .query("labelSelector", "app.kubernetes.io/managed-by=gitfleet"),
        quiet_watch("/api/v1/namespaces/ml/pods", "7")
            .query("labelSelector", "app.kubernetes.io/managed-by=gitfleet"),
        // A Pod of a start that failed part-way (never bound) goes.
        step(
            "DELETE",
            "/api/v1/namespaces/ml/pods/stale-p0",
            200,
            pod_answer(0),
        ),
        // The failed gang's other replica is stopped; it is reported once gone.
        step(
            "DELETE",
            "/api/v1/namespaces/ml/pods/broke-p1",
            200,
            pod_answer(1),
        ),
        // A stopped job whose Pods are gone: its Service goes too.
        step(
            "GET",
            "/api/v1/namespaces/ml/services",
            200,
            list(
                "ServiceList",
                vec![json!({"metadata": {"name": "gf-evicted-1", "namespace": "ml"}})],
            ),
        )
        .query(
            "labelSelector",
            "app.kubernetes.io/managed-by=gitfleet,gitfleet.io/job=evicted",
        ),
        step(
            "DELETE",
            "/api/v1/namespaces/ml/services/gf-evicted-1",
            200,
            json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "gf-evicted-1"}}),
        ),
    ]);
    let mut kube = executor(client);
    let p1 = [NodeGpus {
        node: "gpu-1".to_string(),
        gpus: vec![0],
    }];
    let p2 = [NodeGpus {
        node: "gpu-2".to_string(),
        gpus: vec![0],
    }];
    let running = [
        view("done", &p1, None),
        view("broke", &p2, None),
        view("runs", &p1, None),
        view("lost", &p1, None),
        view("vanished", &p1, None),
        view("evicted", &p2, Some(StopKind::Preempt)),
    ];
    let observation = kube.observe(now(), &running).await.unwrap();
    let finished: Timestamp = "2026-11-21T11:30:00Z".parse().unwrap();
    assert_eq!(
        observation.events,
        vec![
            Event::Exited {
                job: "done".to_string(),
                at: finished,
                exit_code: Some(0)
            },
            Event::Exited {
                job: "lost".to_string(),
                at: now(),
                exit_code: None
            },
            Event::Exited {
                job: "vanished".to_string(),
                at: now(),
                exit_code: None
            },
            Event::Stopped {
                job: "evicted".to_string(),
                at: now()
            },
        ]
    );
    let names: Vec<&str> = observation.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["gpu-1", "gpu-2"]);
    let gpu1 = &observation.nodes[0];
    assert_eq!(gpu1.pool.as_deref(), Some("h100"));
    assert_eq!(gpu1.gpus.len(), 8);
    assert!(
        gpu1.gpus
            .iter()
            .all(|g| g.healthy && g.model == "H100-SXM-80GB")
    );
    assert_eq!(gpu1.idle_since, None, "`runs` holds it");
    let gpu2 = &observation.nodes[1];
    assert!(gpu2.gpus.iter().all(|g| !g.healthy));
    assert_eq!(gpu2.idle_since, None, "`broke` still holds it");
    // A drain of the cordoned node is done already; of the other, not.
    let drain = |node: &str| Action::Drain {
        node: node.to_string(),
        reason: "x".to_string(),
    };
    assert!(kube.already_done(&drain("gpu-2")));
    assert!(!kube.already_done(&drain("gpu-1")));
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(seen[4].body["gracePeriodSeconds"], 0);
    assert_eq!(seen[5].body["gracePeriodSeconds"], 10);
}

#[tokio::test]
async fn an_unreachable_api_server_is_transient_and_forbidden_is_not() {
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/nodes",
            503,
            status(503, "ServiceUnavailable"),
        ),
        step("GET", "/api/v1/nodes", 403, status(403, "Forbidden")),
    ]);
    let mut kube = executor(client);
    let err = kube.observe(now(), &[]).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    let err = kube.observe(now(), &[]).await.unwrap_err();
    assert!(matches!(err, ExecError::Inventory(_)), "{err}");
    assert!(err.to_string().contains("403"), "{err}");
    drop(kube);
    server.await.unwrap();
}

#[tokio::test]
async fn drain_cordons_and_taints_the_node_keeping_its_taints() {
    let mut node = plain_gpu_node("gpu-3", false);
    node["metadata"]["resourceVersion"] = json!("812");
    node["spec"]["taints"] = json!([{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]);
    let (client, server) = mock_client(vec![
        step("GET", "/api/v1/nodes/gpu-3", 200, node),
        step("PATCH", "/api/v1/nodes/gpu-3", 200, gpu_node("gpu-3", true))
            .query("fieldManager", "gitfleet"),
    ]);
    let mut kube = executor(client);
    let action = Action::Drain {
        node: "gpu-3".to_string(),
        reason: "GPU 2 unhealthy".to_string(),
    };
    assert!(!kube.already_done(&action));
    assert_eq!(
        kube.execute(&action, &ctx(None, 0), now()).await.unwrap(),
        Outcome::Done
    );
    assert!(kube.already_done(&action));
    drop(kube);
    let seen = server.await.unwrap();
    // One merge patch, guarded by the resourceVersion read; no eviction.
    assert_eq!(
        seen[1].body,
        json!({"metadata": {"resourceVersion": "812"},
               "spec": {"unschedulable": true, "taints": [
                   {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
                   {"key": "gitfleet.io/unhealthy-gpu", "effect": "NoSchedule"}]}})
    );
}

#[tokio::test]
async fn drain_of_a_drained_node_writes_nothing_and_a_conflict_is_transient() {
    let (client, server) = mock_client(vec![
        step("GET", "/api/v1/nodes/gpu-4", 200, gpu_node("gpu-4", true)),
        step(
            "GET",
            "/api/v1/nodes/gpu-5",
            200,
            plain_gpu_node("gpu-5", true),
        ),
        step("PATCH", "/api/v1/nodes/gpu-5", 409, status(409, "Conflict")),
    ]);
    let mut kube = executor(client);
    let drain = |node: &str| Action::Drain {
        node: node.to_string(),
        reason: "x".to_string(),
    };
    assert_eq!(
        kube.execute(&drain("gpu-4"), &ctx(None, 0), now())
            .await
            .unwrap(),
        Outcome::Done
    );
    // Cordoned by someone else but not tainted: patched; a taint written
    // meanwhile (409) is read again next time.
    let err = kube
        .execute(&drain("gpu-5"), &ctx(None, 0), now())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(!kube.already_done(&drain("gpu-5")));
    drop(kube);
    server.await.unwrap();
}

#[tokio::test]
async fn per_queue_namespaces_follow_the_top_level_queue() {
    let (client, server) = mock_client(vec![]);
    let mut kube = KubeExecutor::new(client, KubeConfig::new(Namespaces::PerQueue));
    let queue = |name: &str, parent: Option<&str>| Object {
        metadata: model::spec::Metadata {
            name: name.to_string(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        },
        spec: serde_json::from_value(json!({"parent": parent})).unwrap(),
        origin: model::diag::Origin::new(
            "test.yaml".into(),
            model::diag::Pos { line: 1, column: 1 },
        ),
    };
    let fleet = model::spec::Fleet {
        queues: vec![
            queue("org", None),
            queue("research", Some("org")),
            queue("nlp", Some("research")),
        ],
        ..model::spec::Fleet::default()
    };
    kube.set_fleet(&fleet).await.unwrap();
    assert_eq!(kube.namespace_of("nlp"), "org");
    assert_eq!(kube.namespace_of("org"), "org");
    let scale = Action::Scale {
        pool: "h100".to_string(),
        from: 1,
        to: 2,
        reason: "x".to_string(),
        nodes: vec![],
    };
    let err = kube
        .execute(&scale, &ctx(None, 0), now())
        .await
        .unwrap_err();
    assert!(!err.is_transient());
    drop(kube);
    server.await.unwrap();
}

const MD_SCALE: &str =
    "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md-h100/scale";

fn scale_answer(replicas: i32) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
           "metadata": {"name": "md-h100", "namespace": "capi"},
           "spec": {"replicas": replicas}, "status": {"replicas": replicas}})
}

/// An executor scaling pool `h100` (size 1..=4) through a Cluster API
/// MachineDeployment.
async fn scaling_executor(client: Client) -> KubeExecutor {
    let mut config = KubeConfig::new(Namespaces::Fixed("ml".to_string()));
    let (pool, target) = gitfleet_kube::scale::parse_target(
        "h100=cluster.x-k8s.io/v1beta1/MachineDeployment/capi/md-h100",
    )
    .unwrap();
    config.scale_targets.insert(pool, target);
    let mut kube = KubeExecutor::new(client, config);
    let pool = Object {
        metadata: model::spec::Metadata {
            name: "h100".to_string(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        },
        spec: serde_json::from_value(json!({
            "gpu": {"model": "H100-SXM-80GB", "count": 8}, "size": {"min": 1, "max": 4}
        }))
        .unwrap(),
        origin: model::diag::Origin::new(
            "test.yaml".into(),
            model::diag::Pos { line: 1, column: 1 },
        ),
    };
    let fleet = model::spec::Fleet {
        pools: vec![pool],
        ..model::spec::Fleet::default()
    };
    kube.set_fleet(&fleet).await.unwrap();
    kube
}

fn scale_to(pool: &str, to: u32) -> Action {
    Action::Scale {
        pool: pool.to_string(),
        from: 2,
        to,
        reason: "x".to_string(),
        nodes: vec![],
    }
}

#[tokio::test]
async fn scale_reads_then_patches_the_targets_scale_within_the_pools_size() {
    let (client, server) = mock_client(vec![
        step("GET", MD_SCALE, 200, scale_answer(2)),
        step("PATCH", MD_SCALE, 200, scale_answer(3)).query("fieldManager", "gitfleet"),
        // Beyond the pool's max: 4 written, not 9.
        step("GET", MD_SCALE, 200, scale_answer(3)),
        step("PATCH", MD_SCALE, 200, scale_answer(4)),
    ]);
    let mut kube = scaling_executor(client).await;
    assert!(exec::Executor::capabilities(&kube).scales_pools);
    assert!(!kube.already_done(&scale_to("h100", 3)));
    let done = kube
        .execute(&scale_to("h100", 3), &ctx(None, 0), now())
        .await
        .unwrap();
    assert_eq!(done, Outcome::Done);
    assert!(kube.already_done(&scale_to("h100", 3)));
    assert!(!kube.already_done(&scale_to("h100", 2)));
    let done = kube
        .execute(&scale_to("h100", 9), &ctx(None, 0), now())
        .await
        .unwrap();
    assert_eq!(done, Outcome::Done);
    // 9 clamps to 4, which is what the target has now.
    assert!(kube.already_done(&scale_to("h100", 9)));
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(seen[0].body, Value::Null);
    assert_eq!(seen[1].body, json!({"spec": {"replicas": 3}}));
    assert_eq!(seen[3].body, json!({"spec": {"replicas": 4}}));
}

#[tokio::test]
async fn scale_to_the_size_it_has_patches_nothing_and_observe_reads_it() {
    let (client, server) = mock_client(vec![
        // Below the pool's min: 1 is meant, which the target has.
        step("GET", MD_SCALE, 200, scale_answer(1)),
        // Observation reads the target's size after nodes and Pods.
        step("GET", "/api/v1/nodes", 200, list("NodeList", vec![])),
        quiet_watch("/api/v1/nodes", "7"),
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list("PodList", vec![]),
        ),
        quiet_watch("/api/v1/namespaces/ml/pods", "7"),
        step("GET", MD_SCALE, 200, scale_answer(3)),
        // A server error is transient.
        step("GET", MD_SCALE, 500, status(500, "InternalError")),
    ]);
    let mut kube = scaling_executor(client).await;
    let done = kube
        .execute(&scale_to("h100", 0), &ctx(None, 0), now())
        .await
        .unwrap();
    assert_eq!(done, Outcome::Done);
    assert!(kube.already_done(&scale_to("h100", 0)));
    kube.observe(now(), &[]).await.unwrap();
    assert!(kube.already_done(&scale_to("h100", 3)));
    assert!(!kube.already_done(&scale_to("h100", 1)));
    let err = kube
        .execute(&scale_to("h100", 2), &ctx(None, 0), now())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    // A pool without a target: a permanent error naming the option.
    let err = kube
        .execute(&scale_to("a100", 2), &ctx(None, 0), now())
        .await
        .unwrap_err();
    assert!(!err.is_transient());
    assert!(
        err.to_string().contains("--kube-scale-target a100="),
        "{err}"
    );
    drop(kube);
    server.await.unwrap();
}

/// A one-replica job with a `kubernetes:` section and a Secret reference.
fn templated_job() -> Object<JobSpec> {
    let mut spec = job("llama", 1);
    spec.spec = serde_json::from_value(json!({
        "queue": "research", "replicas": 1, "gpusPerReplica": 4,
        "image": "nvcr.io/nvidia/pytorch:24.03-py3",
        "env": {"EPOCHS": "3",
                "HF_TOKEN": {"valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}},
        "kubernetes": {
            "serviceAccountName": "trainer",
            "imagePullSecrets": ["nvcr"],
            "labels": {"team": "nlp"},
            "annotations": {"example.com/cost-center": "42"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}],
            "resources": {"requests": {"cpu": "32", "memory": "400Gi"},
                          "limits": {"memory": "400Gi", "ephemeral-storage": "200Gi"}},
            "sharedMemory": "64Gi",
            "volumes": [
                {"name": "data", "mountPath": "/data", "readOnly": true,
                 "persistentVolumeClaim": {"claimName": "datasets"}},
                {"name": "config", "mountPath": "/etc/train", "configMap": {"name": "train"}},
                {"name": "creds", "mountPath": "/var/run/creds", "secret": {"secretName": "s3"}},
                {"name": "scratch", "mountPath": "/scratch", "emptyDir": {"sizeLimit": "100Gi"}}
            ],
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true,
                                "fsGroup": 1000, "supplementalGroups": [44],
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": {"allowPrivilegeEscalation": false,
                                         "readOnlyRootFilesystem": true,
                                         "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]}},
            "initContainers": [
                {"name": "fetch", "image": "amazon/aws-cli:2", "command": ["aws", "s3", "sync", "s3://d", "/scratch"],
                 "env": {"AWS_REGION": "eu-west-1"},
                 "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "4Gi"}}},
                {"name": "warm", "image": "busybox:1.36"}
            ]
        }
    }))
    .unwrap();
    spec
}

#[tokio::test]
async fn the_kubernetes_section_and_secret_references_go_into_the_pod() {
    let one = vec![NodeGpus {
        node: "gpu-1".to_string(),
        gpus: vec![4, 5, 6, 7],
    }];
    let key = gitfleet_kube::names::start_key(Some(ATTEMPT), &one);
    let b = gitfleet_kube::names::base_name("llama", Some(&key));
    let id = gitfleet_kube::names::attempt_id(Some(&key));
    let (client, server) = mock_client(vec![
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(0)),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-0/binding"),
            201,
            ok_status(),
        ),
    ]);
    let mut kube = executor(client);
    let spec = templated_job();
    let action = Action::Place {
        job: "llama".to_string(),
        placement: one.clone(),
        reason: "test".to_string(),
    };
    let outcome = kube
        .execute(&action, &ctx(Some(&spec), 30), now())
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Done);
    drop(kube);
    let seen = server.await.unwrap();
    let var = |name: &str, value: &str| json!({"name": name, "value": value});
    // Every container mounts the section's volumes and has its security
    // context; init containers get no GPU.
    let mounts = json!([
        {"name": "gitfleet-shm", "mountPath": "/dev/shm"},
        {"name": "data", "mountPath": "/data", "readOnly": true},
        {"name": "config", "mountPath": "/etc/train"},
        {"name": "creds", "mountPath": "/var/run/creds"},
        {"name": "scratch", "mountPath": "/scratch"}
    ]);
    let security = json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                          "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]}});
    let expected = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{b}-0"), "namespace": "ml",
            "labels": {"app.kubernetes.io/managed-by": "gitfleet", "gitfleet.io/job": "llama",
                       "gitfleet.io/attempt": id, "gitfleet.io/replica": "0", "team": "nlp"},
            "annotations": {"gitfleet.io/attempt": ATTEMPT, "gitfleet.io/gpus": "4,5,6,7",
                            "gitfleet.io/revision": "abc123", "example.com/cost-center": "42"}
        },
        "spec": {
            "schedulerName": "gitfleet",
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "serviceAccountName": "trainer",
            "imagePullSecrets": [{"name": "nvcr"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}],
            "volumes": [
                {"name": "gitfleet-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": true}},
                {"name": "config", "configMap": {"name": "train"}},
                {"name": "creds", "secret": {"secretName": "s3"}},
                {"name": "scratch", "emptyDir": {"sizeLimit": "100Gi"}}
            ],
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true,
                                "fsGroup": 1000, "supplementalGroups": [44],
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": [
                {"name": "fetch", "image": "amazon/aws-cli:2",
                 "command": ["aws", "s3", "sync", "s3://d", "/scratch"],
                 "env": [var("AWS_REGION", "eu-west-1"), var("NVIDIA_VISIBLE_DEVICES", "void")],
                 "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "4Gi"}},
                 "volumeMounts": mounts.clone(),
                 "securityContext": security.clone()},
                {"name": "warm", "image": "busybox:1.36",
                 "env": [var("NVIDIA_VISIBLE_DEVICES", "void")],
                 "volumeMounts": mounts.clone(),
                 "securityContext": security.clone()}
            ],
            "containers": [{
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.03-py3",
                "env": [
                    var("EPOCHS", "3"),
                    {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
                    var("GITFLEET_JOB", "llama"),
                    var("GITFLEET_GPUS", "4,5,6,7"),
                    var("NVIDIA_VISIBLE_DEVICES", "4,5,6,7"),
                    var("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
                    var("MASTER_ADDR", "127.0.0.1"),
                    var("MASTER_PORT", "29500"),
                    var("WORLD_SIZE", "1"),
                    var("RANK", "0"),
                    var("LOCAL_RANK", "0")
                ],
                "resources": {
                    "requests": {"nvidia.com/gpu": "4", "cpu": "32", "memory": "400Gi"},
                    "limits": {"nvidia.com/gpu": "4", "memory": "400Gi", "ephemeral-storage": "200Gi"}
                },
                "volumeMounts": mounts,
                "securityContext": security
            }]
        }
    });
    assert_eq!(seen[0].body, expected);
    // The Secret's value is never in gitfleet: the Pod names the key only.
    assert!(!seen[0].body.to_string().contains("\"value\":\"token"));
}

#[tokio::test]
async fn values_that_would_be_readable_in_the_pod_are_still_refused() {
    for env in [
        json!({"TOKEN": {"value": "s3cr3t", "sensitive": true}}),
        json!({"TOKEN": {"valueFrom": {"file": "/run/secrets/token"}}}),
        json!({"TOKEN": {"valueFrom": {"env": "HF_TOKEN"}}}),
    ] {
        let (client, server) = mock_client(vec![]);
        let mut kube = executor(client);
        let mut spec = job("llama", 2);
        spec.spec.env = serde_json::from_value(env).unwrap();
        let err = kube
            .execute(&place_action(), &ctx(Some(&spec), 30), now())
            .await
            .unwrap_err();
        assert!(!err.is_transient());
        let message = err.to_string();
        assert!(message.contains("env TOKEN:"), "{message}");
        assert!(message.contains("secretKeyRef"), "{message}");
        assert!(!message.contains("s3cr3t"), "{message}");
        drop(kube);
        assert!(server.await.unwrap().is_empty());
    }
}

/// A Pod of the placed gang as the watch first shows it: created, its
/// Binding not seen yet.
fn placed_pod(rank: u32, node: Option<&str>) -> Value {
    let mut pod = json!({
        "metadata": {"name": format!("{}-{rank}", base()), "namespace": "ml",
            "creationTimestamp": "2026-11-21T11:59:00Z",
            "labels": {"app.kubernetes.io/managed-by": "gitfleet", "gitfleet.io/job": "llama",
                       "gitfleet.io/replica": rank.to_string(), "gitfleet.io/attempt": "a1"}},
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": "Pending"}
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

#[tokio::test]
async fn a_pod_whose_binding_the_watch_has_not_shown_is_not_taken_for_a_leftover() {
    let b = base();
    let (pod_watch, mut pods) = api_server::watch("/api/v1/namespaces/ml/pods", "7");
    let (client, server) = mock_client(vec![
        step(
            "GET",
            "/api/v1/nodes",
            200,
            list(
                "NodeList",
                vec![gpu_node("gpu-1", false), gpu_node("gpu-2", false)],
            ),
        ),
        quiet_watch("/api/v1/nodes", "7"),
        step(
            "GET",
            "/api/v1/namespaces/ml/pods",
            200,
            list("PodList", vec![]),
        ),
        pod_watch.query("labelSelector", "app.kubernetes.io/managed-by=gitfleet"),
        // The gang is placed and bound.
        step(
            "POST",
            "/api/v1/namespaces/ml/services",
            201,
            service_answer(),
        ),
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(0)),
        step("POST", "/api/v1/namespaces/ml/pods", 201, pod_answer(1)),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-0/binding"),
            201,
            ok_status(),
        ),
        step(
            "POST",
            format!("/api/v1/namespaces/ml/pods/{b}-1/binding"),
            201,
            ok_status(),
        ),
        // The next observation sees the gang's Pods unbound, and a real
        // leftover: only the leftover is deleted.
        step(
            "DELETE",
            "/api/v1/namespaces/ml/pods/stale-p0",
            200,
            pod_answer(0),
        ),
    ]);
    let mut kube = executor(client);
    kube.observe(now(), &[]).await.unwrap();
    let spec = job("llama", 2);
    kube.execute(&place_action(), &ctx(Some(&spec), 30), now())
        .await
        .unwrap();
    pods.send("ADDED", placed_pod(0, None), "8");
    pods.send("ADDED", placed_pod(1, None), "9");
    pods.send("ADDED", unbound_pod(), "10");
    let p = placement();
    let running = [view("llama", &p, None)];
    let second = kube.observe(now(), &running).await.unwrap();
    assert!(second.events.is_empty(), "{:?}", second.events);
    // The Bindings and the leftover's deletion arrive: nothing to do.
    pods.send("MODIFIED", placed_pod(0, Some("gpu-1")), "11");
    pods.send("MODIFIED", placed_pod(1, Some("gpu-2")), "12");
    pods.send("DELETED", unbound_pod(), "13");
    let third = kube.observe(now(), &running).await.unwrap();
    assert!(third.events.is_empty(), "{:?}", third.events);
    drop(kube);
    assert_eq!(server.await.unwrap().len(), 10);
}
