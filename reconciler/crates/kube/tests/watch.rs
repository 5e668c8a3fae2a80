//! The watch caches of Nodes and Pods against the mocked API server: the
//! first observation lists and watches; later ones drain the events the
//! test sent (no request when nothing changed); a watch that ends is
//! resumed from the last version, one that meets 410 Gone lists again;
//! and the cache never invents an event (a job that looks ended or gone
//! is confirmed by a LIST of its Pods).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod api_server;

use api_server::{
    executor, first_observation, list, mock_client, now, pod, quiet_watch, refused_watch, step,
    watch,
};
use exec::{Event, Executor, JobView};
use model::observed::NodeGpus;
use model::spec::Duration;
use serde_json::{Value, json};

const MANAGED: &str = "app.kubernetes.io/managed-by=gitfleet";
const PODS: &str = "/api/v1/namespaces/ml/pods";
const NODES: &str = "/api/v1/nodes";

fn node(name: &str, cordoned: bool) -> Value {
    json!({"metadata": {"name": name, "labels": {"gitfleet.io/pool": "h100"}},
           "spec": {"unschedulable": cordoned},
           "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn placement(node: &str) -> Vec<NodeGpus> {
    vec![NodeGpus {
        node: node.to_string(),
        gpus: vec![0],
    }]
}

fn view<'a>(job: &'a str, placement: &'a [NodeGpus]) -> JobView<'a> {
    JobView {
        job,
        placement,
        started: None,
        stop: None,
        spec: None,
        grace: Duration::from_secs(10),
    }
}

fn job_list(job: &str, pods: Vec<Value>) -> api_server::Step {
    step("GET", PODS, 200, list("PodList", pods))
        .query("labelSelector", format!("{MANAGED},gitfleet.io/job={job}"))
}

fn healthy(o: &exec::Observation, node: &str) -> Option<bool> {
    o.nodes
        .iter()
        .find(|n| n.name == node)
        .map(|n| n.gpus.iter().all(|g| g.healthy))
}

#[tokio::test]
async fn an_unchanged_iteration_makes_no_request() {
    let (client, server) = mock_client(first_observation(
        list("NodeList", vec![node("gpu-1", false)]),
        list("PodList", vec![pod("runs", 0, "gpu-1", "Running", None)]),
    ));
    let mut kube = executor(client);
    let p = placement("gpu-1");
    let running = [view("runs", &p)];
    let first = kube.observe(now(), &running).await.unwrap();
    for _ in 0..3 {
        let again = kube.observe(now(), &running).await.unwrap();
        assert!(again.events.is_empty());
        assert_eq!(again.nodes, first.nodes);
    }
    drop(kube);
    assert_eq!(server.await.unwrap().len(), 4, "two LISTs, two WATCHes");
}

#[tokio::test]
async fn events_change_nodes_and_pods_and_an_end_is_confirmed_by_a_list() {
    let (node_watch, mut nodes) = watch(NODES, "7");
    let (pod_watch, mut pods) = watch(PODS, "7");
    let (client, server) = mock_client(vec![
        step(
            "GET",
            NODES,
            200,
            list("NodeList", vec![node("gpu-1", false), node("gpu-2", false)]),
        ),
        node_watch,
        step(
            "GET",
            PODS,
            200,
            list("PodList", vec![pod("done", 0, "gpu-1", "Running", None)]),
        )
        .query("labelSelector", MANAGED),
        pod_watch.query("labelSelector", MANAGED),
        // The watch says `done` succeeded: read again before it is reported.
        job_list("done", vec![pod("done", 0, "gpu-1", "Succeeded", Some(0))]),
    ]);
    let mut kube = executor(client);
    let p = placement("gpu-1");
    let running = [view("done", &p)];
    let first = kube.observe(now(), &running).await.unwrap();
    assert_eq!(healthy(&first, "gpu-2"), Some(true));
    nodes.send("MODIFIED", node("gpu-2", true), "8");
    nodes.send("ADDED", node("gpu-3", false), "9");
    nodes.send("DELETED", node("gpu-1", false), "10");
    pods.send(
        "MODIFIED",
        pod("done", 0, "gpu-1", "Succeeded", Some(0)),
        "11",
    );
    let second = kube.observe(now(), &running).await.unwrap();
    assert_eq!(healthy(&second, "gpu-2"), Some(false), "cordoned");
    assert_eq!(healthy(&second, "gpu-3"), Some(true), "added");
    assert_eq!(healthy(&second, "gpu-1"), None, "deleted");
    assert_eq!(
        second.events,
        [Event::Exited {
            job: "done".to_string(),
            at: "2026-11-21T11:30:00Z".parse().unwrap(),
            exit_code: Some(0)
        }]
    );
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(seen.len(), 5);
    assert!(nodes.sent > 0 && pods.sent > 0);
}

#[tokio::test]
async fn a_pod_not_in_the_cache_yet_does_not_make_its_job_gone() {
    let (client, server) = mock_client(
        first_observation(
            list("NodeList", vec![node("gpu-1", false)]),
            list("PodList", vec![]),
        )
        .into_iter()
        .chain([
            // Second observation: `new` has no Pod in the cache (its
            // creation has not been seen yet): the LIST finds it.
            job_list("new", vec![pod("new", 0, "gpu-1", "Pending", None)]),
            // Third: the LIST finds none either: the job is gone.
            job_list("new", vec![]),
        ])
        .collect(),
    );
    let mut kube = executor(client);
    kube.observe(now(), &[]).await.unwrap();
    let p = placement("gpu-1");
    let running = [view("new", &p)];
    let second = kube.observe(now(), &running).await.unwrap();
    assert!(second.events.is_empty(), "{:?}", second.events);
    let third = kube.observe(now(), &running).await.unwrap();
    assert_eq!(
        third.events,
        [Event::Exited {
            job: "new".to_string(),
            at: now(),
            exit_code: None
        }]
    );
    drop(kube);
    server.await.unwrap();
}

#[tokio::test]
async fn a_watch_that_ends_is_resumed_from_the_last_version_seen() {
    let (node_watch, mut nodes) = watch(NODES, "7");
    let (pod_watch, mut pods) = watch(PODS, "7");
    let (client, server) = mock_client(vec![
        step(
            "GET",
            NODES,
            200,
            list("NodeList", vec![node("gpu-1", false)]),
        ),
        node_watch,
        step("GET", PODS, 200, list("PodList", vec![])).query("labelSelector", MANAGED),
        pod_watch.query("labelSelector", MANAGED),
        // The nodes' watch ended after a bookmark at 12: resumed there.
        quiet_watch(NODES, "12"),
        // The Pods' watch ended after an event at 9: resumed there.
        quiet_watch(PODS, "9").query("labelSelector", MANAGED),
    ]);
    let mut kube = executor(client);
    kube.observe(now(), &[]).await.unwrap();
    nodes.send("MODIFIED", node("gpu-1", true), "11");
    nodes.bookmark("Node", "12");
    drop(nodes);
    pods.send("ADDED", pod("x", 0, "gpu-1", "Succeeded", Some(0)), "9");
    drop(pods);
    let second = kube.observe(now(), &[]).await.unwrap();
    assert_eq!(healthy(&second, "gpu-1"), Some(false));
    // Watching again: nothing more to ask.
    kube.observe(now(), &[]).await.unwrap();
    drop(kube);
    assert_eq!(server.await.unwrap().len(), 6);
}

#[tokio::test]
async fn gone_410_lists_again_as_an_event_or_as_the_answer_to_a_watch() {
    let (node_watch, mut nodes) = watch(NODES, "7");
    let (pod_watch, pods) = watch(PODS, "7");
    let relisted = list("NodeList", vec![node("gpu-2", false)]);
    let mut relisted_at_20 = relisted.clone();
    relisted_at_20["metadata"]["resourceVersion"] = json!("20");
    let (client, server) = mock_client(vec![
        step(
            "GET",
            NODES,
            200,
            list("NodeList", vec![node("gpu-1", false)]),
        ),
        node_watch,
        step("GET", PODS, 200, list("PodList", vec![])).query("labelSelector", MANAGED),
        pod_watch.query("labelSelector", MANAGED),
        // Second observation. Nodes: a 410 event: listed again (the list
        // replaces the cache), watched from the new list's version.
        step("GET", NODES, 200, relisted_at_20),
        quiet_watch(NODES, "20"),
        // Pods: the watch ended; watching from 7 again meets 410: listed
        // again and watched from there.
        refused_watch(PODS, "7", 410).query("labelSelector", MANAGED),
        step("GET", PODS, 200, list("PodList", vec![])).query("labelSelector", MANAGED),
        quiet_watch(PODS, "7").query("labelSelector", MANAGED),
    ]);
    let mut kube = executor(client);
    kube.observe(now(), &[]).await.unwrap();
    nodes.gone();
    drop(pods);
    let second = kube.observe(now(), &[]).await.unwrap();
    let names: Vec<&str> = second.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["gpu-2"]);
    drop(kube);
    assert_eq!(server.await.unwrap().len(), 9);
}

#[tokio::test]
async fn a_watch_the_server_refuses_fails_the_observation_and_is_tried_again() {
    let (node_watch, nodes) = watch(NODES, "7");
    let (client, server) = mock_client(vec![
        step("GET", NODES, 200, list("NodeList", vec![])),
        node_watch,
        step("GET", PODS, 200, list("PodList", vec![])).query("labelSelector", MANAGED),
        quiet_watch(PODS, "7").query("labelSelector", MANAGED),
        // The node watch ended; opening it again meets a 503: transient.
        refused_watch(NODES, "7", 503),
        // Next time: opened from the same version, no LIST.
        quiet_watch(NODES, "7"),
    ]);
    let mut kube = executor(client);
    kube.observe(now(), &[]).await.unwrap();
    drop(nodes);
    let err = kube.observe(now(), &[]).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    kube.observe(now(), &[]).await.unwrap();
    drop(kube);
    server.await.unwrap();
}
