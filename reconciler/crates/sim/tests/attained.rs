//! `ordering: least-attained` through the `sim` executor's physics
//! (`sim::apply_plan`, `sim::advance`): a preempted job's run is added to
//! the observed `attained` when it stops, so it keeps its tier while it
//! waits and takes its GPUs back only once its preemptor has run into a
//! higher tier (docs/semantics.md, rule (d)).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use engine::{PlanInput, plan};
use gitfleet_sim::{advance, apply_plan};
use load::{SourceFile, load_fleet, parse_observed};
use model::observed::{ObservedState, Timestamp};
use model::plan::Action;

const FLEET: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec: {gpu: {model: A, count: 8}, size: {min: 1, max: 1}}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q}
spec: {ordering: least-attained, quota: [{model: A, guaranteed: 8, limit: 8}]}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 0, default: true, gracePeriod: 60s}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: a}
spec: {queue: q, gpusPerReplica: 8}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: b}
spec: {queue: q, gpusPerReplica: 8}
";

const OBSERVED: &str = "\
nodes:
  - name: p-0
    pool: p
    gpus: [{index: 0, model: A}, {index: 1, model: A}, {index: 2, model: A}, {index: 3, model: A},
           {index: 4, model: A}, {index: 5, model: A}, {index: 6, model: A}, {index: 7, model: A}]
running:
  - {job: a, started: 2026-11-21T10:00:00Z, placement: [{node: p-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}]}
queued:
  - {job: b, since: 2026-11-21T10:30:00Z}
";

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn preempts(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt { job, for_job, .. } => Some((job.clone(), for_job.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_victim_keeps_its_attained_service_through_the_sim_executor() {
    let loaded = load_fleet(&[SourceFile::new("fleet.yaml", FLEET.as_bytes().to_vec())]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    let fleet = loaded.fleet;
    let step = |observed: &ObservedState, now: Timestamp| {
        let p = plan(&PlanInput {
            fleet: &fleet,
            observed,
            now,
            revision: None,
        });
        let next = apply_plan(&fleet, observed, &p, now);
        (p, next)
    };
    let observed = parse_observed("observed.yaml", OBSERVED).unwrap();
    // 11:00: a has held 8 GPU-hours (tier 1), b none (tier 0): b preempts a.
    let (p, observed) = step(&observed, t("2026-11-21T11:00:00Z"));
    assert_eq!(preempts(&p.actions), [("a".to_string(), "b".to_string())]);
    // a stops at the end of its grace period: 61 minutes × 8 GPUs.
    let observed = advance(&fleet, &observed, t("2026-11-21T11:01:00Z"));
    assert_eq!(observed.attained.get("a"), Some(&(61 * 60 * 8)));
    let (p, observed) = step(&observed, t("2026-11-21T11:01:00Z"));
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(a, Action::Place { job, .. } if job == "b")),
        "{:?}",
        p.actions
    );
    // b reaches tier 1 at 11:08:30 and tier 2 (10 GPU-hours) at 12:16; a
    // (tier 1) waits until then, and takes the GPUs back from then on.
    for (now, back) in [
        ("2026-11-21T11:30:00Z", false),
        ("2026-11-21T12:15:59Z", false),
        ("2026-11-21T12:16:00Z", true),
    ] {
        let (p, _) = step(&observed, t(now));
        let want: Vec<(String, String)> = if back {
            vec![("b".to_string(), "a".to_string())]
        } else {
            Vec::new()
        };
        assert_eq!(preempts(&p.actions), want, "at {now}");
    }
}
