//! Leader election on a Lease against the mocked API server: acquire,
//! renew, follow, take over, lose (409), and a replica that does not lead
//! writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod api_server;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use api_server::{mock_client, status, step};
use exec::{ActionContext, ExecError, Executor, Outcome};
use gitfleet_kube::lease::{Elector, Leadership, LeaseConfig};
use gitfleet_kube::{KubeConfig, KubeExecutor, Namespaces};
use kube::Client;
use model::observed::Timestamp;
use model::plan::Action;
use model::spec::Duration;
use serde_json::{Value, json};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/gitfleet/leases";
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/gitfleet/leases/gitfleet";

fn at(secs: i64) -> Timestamp {
    let start: Timestamp = "2026-11-21T12:00:00Z".parse().unwrap();
    start + chrono::Duration::seconds(secs)
}

fn micro(t: Timestamp) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn lease(holder: &str, renewed: Timestamp, rv: &str, transitions: i32) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": "gitfleet", "namespace": "gitfleet", "resourceVersion": rv},
           "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                    "acquireTime": micro(at(-100)), "renewTime": micro(renewed),
                    "leaseTransitions": transitions}})
}

/// `then`, after the script of acquiring the absent Lease: a GET that finds
/// none, then the create, answered with pod-a's Lease at `at(0)`, version
/// `rv`.
fn acquired(rv: &str, then: Vec<api_server::Step>) -> Vec<api_server::Step> {
    let mut script = vec![
        step("GET", LEASE, 404, status(404, "NotFound")),
        step("POST", LEASES, 201, lease("pod-a", at(0), rv, 0)).query("fieldManager", "gitfleet"),
    ];
    script.extend(then);
    script
}

fn config() -> LeaseConfig {
    LeaseConfig::new("gitfleet", "pod-a")
}

/// An executor electing itself `pod-a` on the Lease `gitfleet/gitfleet`,
/// its Lease kept on a clock the test sets (seconds after [`at`]`(0)`).
fn executor(client: Client) -> (KubeExecutor, Arc<AtomicI64>) {
    let mut config = KubeConfig::new(Namespaces::Fixed("ml".to_string()));
    config.lease = Some(LeaseConfig::new("gitfleet", "pod-a"));
    let clock = Arc::new(AtomicI64::new(0));
    let read = clock.clone();
    let kube = KubeExecutor::new(client, config)
        .with_lease_clock(Arc::new(move || at(read.load(Ordering::SeqCst))));
    (kube, clock)
}

fn drain(node: &str) -> Action {
    Action::Drain {
        node: node.to_string(),
        reason: "x".to_string(),
    }
}

fn ctx() -> ActionContext<'static> {
    ActionContext {
        spec: None,
        attempt: None,
        grace: Duration::ZERO,
        revision: "abc",
    }
}

fn drained_node(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"unschedulable": true,
           "taints": [{"key": "gitfleet.io/unhealthy-gpu", "effect": "NoSchedule"}]}})
}

#[tokio::test]
async fn acquires_an_absent_lease_then_renews_it_with_its_resource_version() {
    let (client, server) = mock_client(acquired(
        "100",
        vec![
            step("PUT", LEASE, 200, lease("pod-a", at(6), "101", 0)),
            step("PUT", LEASE, 200, lease("pod-a", at(12), "102", 0)),
        ],
    ));
    let mut elector = Elector::new(config());
    assert_eq!(
        elector.try_lead(&client, at(0)).await.unwrap(),
        Leadership::Leading
    );
    // Renewed less than 5 s ago: writes without asking.
    assert!(elector.may_write(&client, at(4)).await.unwrap());
    // Due: renewed (one PUT), then writes.
    assert!(elector.may_write(&client, at(6)).await.unwrap());
    assert_eq!(
        elector.try_lead(&client, at(12)).await.unwrap(),
        Leadership::Leading
    );
    drop(client);
    let seen = server.await.unwrap();
    let created = &seen[1].body;
    assert_eq!(created["metadata"]["name"], "gitfleet");
    assert_eq!(created["spec"]["holderIdentity"], "pod-a");
    assert_eq!(created["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(created["spec"]["leaseTransitions"], 0);
    assert_eq!(created["spec"]["renewTime"], micro(at(0)));
    // Each renewal replaces the object last written: its resourceVersion
    // makes it a compare-and-swap.
    assert_eq!(seen[2].body["metadata"]["resourceVersion"], "100");
    assert_eq!(seen[2].body["spec"]["renewTime"], micro(at(6)));
    assert_eq!(seen[2].body["spec"]["holderIdentity"], "pod-a");
    assert_eq!(seen[3].body["metadata"]["resourceVersion"], "101");
    assert_eq!(seen[3].body["spec"]["renewTime"], micro(at(12)));
}

#[tokio::test]
async fn a_fresh_lease_of_another_replica_is_followed_and_nothing_is_written() {
    let (client, server) = mock_client(vec![step(
        "GET",
        LEASE,
        200,
        lease("pod-b", at(-5), "7", 1),
    )]);
    let (mut kube, clock) = executor(client);
    let err = kube.lead(at(0)).await.unwrap_err();
    assert!(
        matches!(&err, ExecError::NotLeader { holder, lease, .. }
            if holder == "pod-b" && lease == "gitfleet/gitfleet"),
        "{err}"
    );
    assert!(err.is_transient());
    assert_eq!(err.retry_after(), Some(std::time::Duration::from_secs(5)));
    // A follower's action is refused before any request.
    clock.store(1, Ordering::SeqCst);
    let err = kube
        .execute(&drain("gpu-1"), &ctx(), at(1))
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::NotLeader { .. }), "{err}");
    drop(kube);
    server.await.unwrap();
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_with_compare_and_swap() {
    let (client, server) = mock_client(vec![
        step("GET", LEASE, 200, lease("pod-b", at(-16), "9", 2)),
        step("PUT", LEASE, 200, lease("pod-a", at(0), "10", 3)),
    ]);
    let mut elector = Elector::new(config());
    assert_eq!(
        elector.try_lead(&client, at(0)).await.unwrap(),
        Leadership::Leading
    );
    drop(client);
    let seen = server.await.unwrap();
    let put = &seen[1].body;
    assert_eq!(put["metadata"]["resourceVersion"], "9");
    assert_eq!(put["spec"]["holderIdentity"], "pod-a");
    assert_eq!(put["spec"]["leaseTransitions"], 3);
    assert_eq!(put["spec"]["acquireTime"], micro(at(0)));
    assert_eq!(put["spec"]["renewTime"], micro(at(0)));
}

#[tokio::test]
async fn a_conflict_means_another_replica_won() {
    let (client, server) = mock_client(vec![
        // Two contenders take over the same expired Lease: the other wins.
        step("GET", LEASE, 200, lease("pod-b", at(-30), "9", 2)),
        step("PUT", LEASE, 409, status(409, "Conflict")),
        // Two contenders create it: the other was first.
        step("GET", LEASE, 404, status(404, "NotFound")),
        step("POST", LEASES, 409, status(409, "AlreadyExists")),
        // A server error: not leading, and transient.
        step("GET", LEASE, 500, status(500, "InternalError")),
    ]);
    let mut elector = Elector::new(config());
    for _ in 0..2 {
        assert!(matches!(
            elector.try_lead(&client, at(0)).await.unwrap(),
            Leadership::Following { .. }
        ));
        assert!(!elector.is_leading());
        assert!(!elector.may_write(&client, at(0)).await.unwrap());
    }
    assert!(elector.try_lead(&client, at(0)).await.is_err());
    assert!(!elector.is_leading());
    drop(client);
    server.await.unwrap();
}

#[tokio::test]
async fn leadership_lost_mid_iteration_stops_every_further_write() {
    let (client, server) = mock_client(vec![
        step("GET", LEASE, 200, lease("pod-a", at(-3), "50", 0)),
        // A restart of the same Pod renews its own Lease.
        step("PUT", LEASE, 200, lease("pod-a", at(0), "51", 0)),
        step("GET", "/api/v1/nodes/gpu-1", 200, drained_node("gpu-1")),
        // Renewal due: someone else wrote the Lease meanwhile.
        step("PUT", LEASE, 409, status(409, "Conflict")),
    ]);
    let (mut kube, clock) = executor(client);
    kube.lead(at(0)).await.unwrap();
    // Every action of an iteration gets the iteration's start as `now`;
    // the Lease is kept on the wall clock instead.
    clock.store(1, Ordering::SeqCst);
    let done = kube.execute(&drain("gpu-1"), &ctx(), at(0)).await.unwrap();
    assert_eq!(done, Outcome::Done);
    clock.store(6, Ordering::SeqCst);
    let err = kube
        .execute(&drain("gpu-2"), &ctx(), at(0))
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::NotLeader { .. }), "{err}");
    // No request at all now, until the next iteration's try to lead.
    clock.store(7, Ordering::SeqCst);
    let err = kube
        .execute(&drain("gpu-3"), &ctx(), at(0))
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::NotLeader { .. }), "{err}");
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(seen[1].body["metadata"]["resourceVersion"], "50");
    assert_eq!(seen[1].body["spec"]["leaseTransitions"], 0);
}

#[tokio::test]
async fn a_standby_replicas_iteration_records_nothing() {
    let (client, server) = mock_client(vec![step(
        "GET",
        LEASE,
        200,
        lease("pod-b", at(-1), "7", 1),
    )]);
    let (kube, _clock) = executor(client);
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    std::fs::create_dir_all(&fleet).unwrap();
    std::fs::write(
        fleet.join("fleet.yaml"),
        "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n",
    )
    .unwrap();
    let store = Arc::new(reconcile::state::Store::open(&dir.path().join("state")).unwrap());
    let mut reconciler = reconcile::Reconciler::new(
        reconcile::FleetSource::Dir { path: fleet },
        store.clone(),
        kube,
    );
    let err = reconciler.iterate(at(0)).await.unwrap_err();
    assert!(err.is_following(), "{err}");
    assert!(err.is_transient());
    assert!(store.jobs().unwrap().is_empty());
    assert!(store.pending_intents().unwrap().is_empty());
    assert_eq!(store.clock().unwrap(), None, "no state written");
    drop(reconciler);
    server.await.unwrap();
}

#[tokio::test]
async fn the_leader_renews_between_iterations_and_stops_when_dropped() {
    let (client, server) = mock_client(acquired(
        "1",
        vec![
            // The renewal task, while the loop sleeps.
            step("PUT", LEASE, 200, lease("pod-a", at(2), "2", 0)),
        ],
    ));
    let mut config = KubeConfig::new(Namespaces::Fixed("ml".to_string()));
    // Renewed every second.
    config.lease = Some(LeaseConfig {
        duration_secs: 3,
        ..LeaseConfig::new("gitfleet", "pod-a")
    });
    let clock = Arc::new(AtomicI64::new(0));
    let read = clock.clone();
    let mut kube = KubeExecutor::new(client, config)
        .with_lease_clock(Arc::new(move || at(read.load(Ordering::SeqCst))));
    kube.lead(at(0)).await.unwrap();
    clock.store(2, Ordering::SeqCst);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(seen[2].body["metadata"]["resourceVersion"], "1");
    assert_eq!(seen[2].body["spec"]["renewTime"], micro(at(2)));
}

/// The Lease as a release writes it: no holder, a duration of one second,
/// renewed and acquired at the release, the transitions kept.
fn released(at_: Timestamp, rv: &str, transitions: i32) -> Value {
    json!({"holderIdentity": "", "leaseDurationSeconds": 1,
           "acquireTime": micro(at_), "renewTime": micro(at_),
           "leaseTransitions": transitions, "rv": rv})
}

fn spec_with_rv(body: &Value) -> Value {
    let mut spec = body["spec"].clone();
    spec["rv"] = body["metadata"]["resourceVersion"].clone();
    spec
}

#[tokio::test]
async fn the_leader_releases_the_lease_on_shutdown_and_writes_nothing_after() {
    let (client, server) = mock_client(vec![
        step("GET", LEASE, 200, lease("pod-b", at(-20), "9", 2)),
        step("PUT", LEASE, 200, lease("pod-a", at(0), "10", 3)),
        // The release: one compare-and-swap replace of the object last written.
        step("PUT", LEASE, 200, lease("", at(4), "11", 3)).query("fieldManager", "gitfleet"),
    ]);
    let (mut kube, clock) = executor(client);
    kube.lead(at(0)).await.unwrap();
    clock.store(4, Ordering::SeqCst);
    kube.release().await.unwrap();
    // Released: no write, no renewal, and a second release asks nothing.
    let err = kube
        .execute(&drain("gpu-1"), &ctx(), at(4))
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::NotLeader { .. }), "{err}");
    kube.release().await.unwrap();
    drop(kube);
    let seen = server.await.unwrap();
    assert_eq!(spec_with_rv(&seen[2].body), released(at(4), "10", 3));
    assert_eq!(seen[2].body["metadata"]["name"], "gitfleet");
}

#[tokio::test]
async fn a_replica_that_does_not_lead_releases_nothing() {
    // A follower: the Lease is another replica's.
    let (client, server) = mock_client(vec![step(
        "GET",
        LEASE,
        200,
        lease("pod-b", at(-5), "7", 1),
    )]);
    let (mut kube, _clock) = executor(client);
    assert!(kube.lead(at(0)).await.is_err());
    kube.release().await.unwrap();
    drop(kube);
    server.await.unwrap();
    // A leader that lost the Lease (409 on renewal) releases nothing.
    let (client, server) = mock_client(acquired(
        "1",
        vec![step("PUT", LEASE, 409, status(409, "Conflict"))],
    ));
    let (mut kube, clock) = executor(client);
    kube.lead(at(0)).await.unwrap();
    clock.store(6, Ordering::SeqCst);
    assert!(kube.execute(&drain("gpu-1"), &ctx(), at(0)).await.is_err());
    kube.release().await.unwrap();
    drop(kube);
    server.await.unwrap();
    // Without leader election there is no Lease to release.
    let (client, server) = mock_client(vec![]);
    let mut kube = KubeExecutor::new(client, KubeConfig::new(Namespaces::Fixed("ml".into())));
    kube.release().await.unwrap();
    drop(kube);
    server.await.unwrap();
}

#[tokio::test]
async fn a_release_that_meets_a_conflict_leaves_the_lease_alone() {
    let (client, server) = mock_client(acquired(
        "1",
        vec![
            // Another replica took the Lease (this one's had expired).
            step("PUT", LEASE, 409, status(409, "Conflict")),
        ],
    ));
    let (mut kube, _clock) = executor(client);
    kube.lead(at(0)).await.unwrap();
    kube.release().await.unwrap();
    drop(kube);
    server.await.unwrap();
}

#[tokio::test]
async fn a_released_lease_is_taken_over_at_once() {
    let (client, server) = mock_client(vec![
        // Released by pod-b a moment ago: free although renewed now.
        step("GET", LEASE, 200, {
            let mut l = lease("", at(0), "11", 3);
            l["spec"]["leaseDurationSeconds"] = json!(1);
            l
        }),
        step("PUT", LEASE, 200, lease("pod-a", at(0), "12", 4)),
    ]);
    let mut elector = Elector::new(config());
    assert_eq!(
        elector.try_lead(&client, at(0)).await.unwrap(),
        Leadership::Leading
    );
    drop(client);
    let seen = server.await.unwrap();
    assert_eq!(seen[1].body["spec"]["holderIdentity"], "pod-a");
    assert_eq!(seen[1].body["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(seen[1].body["spec"]["leaseTransitions"], 4);
}

#[tokio::test]
async fn the_loop_releases_the_lease_when_its_iterations_end() {
    let mut then = api_server::first_observation(
        api_server::list("NodeList", vec![]),
        api_server::list("PodList", vec![]),
    );
    then.push(step("PUT", LEASE, 200, lease("", at(0), "2", 0)));
    let (client, server) = mock_client(acquired("1", then));
    let (kube, _clock) = executor(client);
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    std::fs::create_dir_all(&fleet).unwrap();
    std::fs::write(
        fleet.join("fleet.yaml"),
        "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let store = Arc::new(reconcile::state::Store::open(&state).unwrap());
    let reconciler =
        reconcile::Reconciler::new(reconcile::FleetSource::Dir { path: fleet }, store, kube);
    let options = reconcile::run::LoopOptions {
        interval: std::time::Duration::from_secs(60),
        iterations: Some(1),
        listen: None,
        state_dir: state,
        deadline: std::time::Duration::from_secs(60),
        shutdown_timeout: std::time::Duration::from_secs(1),
        webhook_secret: None,
    };
    let clock = reconcile::run::SimClock::new(at(0), 1.0, None);
    reconcile::run::run_loop(
        reconciler,
        Box::new(clock),
        options,
        reconcile::run::ShutdownSignals::listen(),
        |_| {},
    )
    .await
    .unwrap();
    let seen = server.await.unwrap();
    assert_eq!(seen[6].body["spec"]["holderIdentity"], "");
    assert_eq!(seen[6].body["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(seen[6].body["metadata"]["resourceVersion"], "1");
}
