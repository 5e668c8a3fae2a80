//! A valid commit with a huge `timeLimit` or simulated duration must not
//! crash the engine or the simulated world: time saturates ("never").

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

use reconciler::engine::{PlanInput, plan};
use reconciler::load::{SourceFile, load_fleet};
use reconciler::observed::{NodeGpus, RunningJob, Timestamp, derive_inventory};
use reconciler::plan::Action;
use reconciler::sim::{advance, apply_plan};

const FLEET: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100, count: 8}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec:\n  quota: [{model: H100, guaranteed: 8}]\n---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: normal}\nspec: {value: 1, default: true, gracePeriod: 9999999999h}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: forever, annotations: {gitfleet/sim-duration: 9999999999h}}\nspec: {queue: q, gpusPerReplica: 4, timeLimit: 9999999999h}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: waiting}\nspec: {queue: q, gpusPerReplica: 8, timeLimit: 9999999999h}\n";

#[test]
fn huge_time_limits_and_durations_mean_never() {
    let loaded = load_fleet(&[SourceFile::new("fleet.yaml", FLEET)]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    let fleet = loaded.fleet;
    let now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    let mut observed = derive_inventory(&fleet);
    observed.running.push(RunningJob {
        job: "forever".into(),
        started: now - chrono::Duration::days(365),
        placement: vec![NodeGpus {
            node: "p-0".into(),
            gpus: vec![0, 1, 2, 3],
        }],
        preempting_since: None,
        preempted_for: None,
        restart: None,
        spec_digest: None,
    });
    let p = plan(&PlanInput {
        fleet: &fleet,
        observed: &observed,
        now,
        revision: None,
    });
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::Terminate { .. })),
        "{:?}",
        p.actions
    );
    assert!(
        p.pending.iter().any(|q| &*q.job == "waiting"),
        "{:?}",
        p.pending
    );
    let later = now + chrono::Duration::days(10_000);
    let moved = advance(&fleet, &apply_plan(&fleet, &observed, &p, now), later);
    assert!(moved.running.iter().any(|r| &*r.job == "forever"));
    assert!(moved.completed.is_empty());
}
