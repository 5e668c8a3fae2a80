#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

//! `ordering: least-attained` (issue 19 item 4, Tiresias; docs/semantics.md
//! "Order and quota") on random full leaves: one node of 8 GPUs, the leaf's
//! limit 8, up to 8 running jobs of 1 GPU (random classes, starts and
//! earlier attained service) and 1 to 4 pending jobs of 1 GPU.
//!
//! - every preemption takes a preemptible job of the leaf of lower priority,
//!   or of the same priority in a higher tier (rules (a) and (d));
//! - the first pending job in the leaf's order preempts when some running
//!   job is such a victim for it (the leaf is full: nothing else fits);
//! - no swap back: a victim, pending with its attained service kept, does
//!   not preempt its preemptor until the preemptor has run into a higher
//!   tier than the victim's, and then does (same priority, preemptible);
//! - tiers are exactly below 1, 10 and 100 GPU-hours.

use chrono::{DateTime, Duration, Utc};
use gitfleet_engine::{PlanInput, plan, plan_with_horizon};
use model::plan::Action;
use proptest::prelude::*;

/// Classes: (name, value, preemptible).
const CLASSES: [(&str, i32, bool); 3] = [
    ("low", 10, true),
    ("normal", 100, true),
    ("pinned", 100, false),
];

/// Tier bounds in GPU-seconds (docs/semantics.md).
const BOUNDS: [u64; 3] = [3_600, 36_000, 360_000];

fn tier(secs: u64) -> u8 {
    BOUNDS.iter().filter(|b| secs >= **b).count() as u8
}

fn now() -> DateTime<Utc> {
    "2026-11-21T10:00:00Z".parse().unwrap()
}

#[derive(Debug, Clone)]
struct Running {
    class: usize,
    /// Minutes since it started.
    ran_min: u32,
    /// GPU-seconds of earlier runs.
    before: u64,
}

#[derive(Debug, Clone)]
struct Pending {
    class: usize,
    /// Minutes waited.
    age_min: u32,
    /// GPU-seconds of earlier runs.
    before: u64,
}

fn attained() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        0u64..400_000,
        prop::sample::select(BOUNDS.to_vec())
    ]
}

fn running() -> impl Strategy<Value = Running> {
    (0..CLASSES.len(), 0u32..=6_000, attained()).prop_map(|(class, ran_min, before)| Running {
        class,
        ran_min,
        before,
    })
}

fn pending() -> impl Strategy<Value = Pending> {
    (0..CLASSES.len(), 0u32..=600, attained()).prop_map(|(class, age_min, before)| Pending {
        class,
        age_min,
        before,
    })
}

impl Running {
    fn attained(&self) -> u64 {
        self.before + u64::from(self.ran_min) * 60
    }
}

fn fleet_yaml(running: &[Running], pending: &[Pending]) -> String {
    let mut y = String::from(
        "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {gpu: {model: H100, count: 8}, nvlink: full, size: {min: 1, max: 1}}\n\
         ---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {ordering: least-attained, quota: [{model: H100, guaranteed: 8, limit: 8}]}\n",
    );
    for (name, value, preemptible) in CLASSES {
        y.push_str(&format!(
            "---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nspec: {{value: {value}, preemptible: {preemptible}}}\n"
        ));
    }
    let job = |name: String, class: usize| {
        format!(
            "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec: {{queue: q, gpusPerReplica: 1, priorityClass: {}}}\n",
            CLASSES[class].0
        )
    };
    for (i, r) in running.iter().enumerate() {
        y.push_str(&job(format!("r{i}"), r.class));
    }
    for (i, p) in pending.iter().enumerate() {
        y.push_str(&job(format!("p{i}"), p.class));
    }
    y
}

fn observed_yaml(running: &[Running], pending: &[Pending]) -> String {
    let mut y = String::from("nodes:\n  - name: p-0\n    pool: p\n    gpus:\n");
    for g in 0..8 {
        y.push_str(&format!("      - {{index: {g}, model: H100}}\n"));
    }
    y.push_str("running:\n");
    for (i, r) in running.iter().enumerate() {
        let started = now() - Duration::minutes(i64::from(r.ran_min));
        y.push_str(&format!(
            "  - {{job: r{i}, started: {}, placement: [{{node: p-0, gpus: [{i}]}}]}}\n",
            started.to_rfc3339()
        ));
    }
    if running.is_empty() {
        y.push_str("  []\n");
    }
    y.push_str("queued:\n");
    for (i, p) in pending.iter().enumerate() {
        let since = now() - Duration::minutes(i64::from(p.age_min));
        y.push_str(&format!(
            "  - {{job: p{i}, since: {}}}\n",
            since.to_rfc3339()
        ));
    }
    y.push_str("attained:\n");
    for (i, r) in running.iter().enumerate() {
        y.push_str(&format!("  r{i}: {}\n", r.before));
    }
    for (i, p) in pending.iter().enumerate() {
        y.push_str(&format!("  p{i}: {}\n", p.before));
    }
    y
}

fn plan_of(fleet: &str, observed: &str, at: DateTime<Utc>) -> model::plan::Plan {
    let loaded = load::load_fleet(&[load::SourceFile::new(
        "fleet.yaml",
        fleet.as_bytes().to_vec(),
    )]);
    assert!(loaded.is_valid(), "invalid fleet: {:?}", loaded.diagnostics);
    let observed = load::parse_observed("observed.yaml", observed)
        .unwrap_or_else(|e| panic!("invalid observed state: {e:?}"));
    plan(&PlanInput {
        fleet: &loaded.fleet,
        observed: &observed,
        now: at,
        revision: None,
    })
}

/// Whether a preemptor of class `pc` and tier `pt` may take a running job
/// of class `vc` and tier `vt` of its leaf (rules (a) and (d)).
fn may_take(pc: usize, pt: u8, vc: usize, vt: u8) -> bool {
    let (_, vp, preemptible) = CLASSES[vc];
    let pp = CLASSES[pc].1;
    preemptible && (vp < pp || (vp == pp && vt > pt))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn preempts_only_higher_tiers_or_lower_priorities(
        running in prop::collection::vec(running(), 8..=8),
        pending in prop::collection::vec(pending(), 1..=4),
    ) {
        let p = plan_of(&fleet_yaml(&running, &pending), &observed_yaml(&running, &pending), now());
        let mut preempted_for: Vec<usize> = Vec::new();
        for action in &p.actions {
            match action {
                Action::Preempt { job, for_job, reason } => {
                    let v: usize = job[1..].parse().unwrap();
                    let f: usize = for_job[1..].parse().unwrap();
                    prop_assert!(job.starts_with('r') && for_job.starts_with('p'));
                    let (r, q) = (&running[v], &pending[f]);
                    prop_assert!(
                        may_take(q.class, tier(q.before), r.class, tier(r.attained())),
                        "{job} ({:?}, tier {}) preempted for {for_job} ({:?}, tier {}): {reason}",
                        r, tier(r.attained()), q, tier(q.before)
                    );
                    if CLASSES[r.class].1 == CLASSES[q.class].1 {
                        prop_assert!(reason.starts_with("least attained service: "), "{reason}");
                    }
                    preempted_for.push(f);
                }
                other => prop_assert!(false, "only preemptions in a full leaf: {other:?}"),
            }
        }
        // The first pending job in the leaf's order: priority, tier, then
        // (all 1 GPU, no limit) older first, then name.
        let first = (0..pending.len())
            .min_by_key(|&i| {
                let q = &pending[i];
                (std::cmp::Reverse(CLASSES[q.class].1), tier(q.before), std::cmp::Reverse(q.age_min), format!("p{i}"))
            })
            .unwrap();
        let q = &pending[first];
        let has_victim = running
            .iter()
            .any(|r| may_take(q.class, tier(q.before), r.class, tier(r.attained())));
        prop_assert_eq!(preempted_for.contains(&first), has_victim, "{:?}", p.actions);
    }

    #[test]
    fn a_victim_takes_back_only_from_a_higher_tier(
        victim_before in attained(),
        preemptor_before in attained(),
        ran_min in 0u32..=12_000,
    ) {
        // The preemptor (normal) runs from `now` with its earlier attained
        // service; the victim (normal) waits with its own.
        let victim = Pending { class: 1, age_min: 0, before: victim_before };
        let runner = Running { class: 1, ran_min, before: preemptor_before };
        let (runners, victims) = ([runner], [victim]);
        let fleet = fleet_yaml(&runners, &victims);
        // One GPU node: only the runner's GPU could take the victim.
        let fleet = fleet
            .replace("count: 8", "count: 1")
            .replace("guaranteed: 8, limit: 8", "guaranteed: 1, limit: 1");
        let observed = observed_yaml(&runners, &victims)
            .lines()
            .filter(|l| !l.contains("index: ") || l.contains("index: 0,"))
            .collect::<Vec<_>>()
            .join("\n");
        let p = plan_of(&fleet, &observed, now());
        let takes_back = p.actions.iter().any(|a| matches!(a, Action::Preempt { job, for_job, .. } if job == "r0" && for_job == "p0"));
        prop_assert_eq!(takes_back, tier(runners[0].attained()) > tier(victim_before), "{:?}", p.actions);
    }
}

#[test]
fn tier_bounds_exactly() {
    // A 1-GPU runner with no earlier service against a fresh waiter: the
    // waiter preempts from exactly 60 minutes of the runner's run on.
    for (ran_min, preempts) in [(59, false), (60, true)] {
        let runner = Running {
            class: 1,
            ran_min,
            before: 0,
        };
        let waiter = Pending {
            class: 1,
            age_min: 0,
            before: 0,
        };
        let (runners, waiters) = ([runner], [waiter]);
        let fleet = fleet_yaml(&runners, &waiters)
            .replace("count: 8", "count: 1")
            .replace("guaranteed: 8, limit: 8", "guaranteed: 1, limit: 1");
        let observed = observed_yaml(&runners, &waiters)
            .lines()
            .filter(|l| !l.contains("index: ") || l.contains("index: 0,"))
            .collect::<Vec<_>>()
            .join("\n");
        let p = plan_of(&fleet, &observed, now());
        assert_eq!(
            p.actions
                .iter()
                .any(|a| matches!(a, Action::Preempt { .. })),
            preempts,
            "after {ran_min} minutes: {:?}",
            p.actions
        );
    }
}

/// The plan's horizon is the instant a running job reaches its next tier:
/// a 1-GPU runner that started 30 minutes ago, a fresh waiter; nothing
/// changes before 60 minutes of its run, and at that instant the waiter
/// preempts it (`tier_bounds_exactly`).
#[test]
fn the_horizon_is_the_next_tier_crossing() {
    let (runners, waiters) = (
        [Running {
            class: 1,
            ran_min: 30,
            before: 0,
        }],
        [Pending {
            class: 1,
            age_min: 0,
            before: 0,
        }],
    );
    let fleet = fleet_yaml(&runners, &waiters)
        .replace("count: 8", "count: 1")
        .replace("guaranteed: 8, limit: 8", "guaranteed: 1, limit: 1");
    let observed = observed_yaml(&runners, &waiters)
        .lines()
        .filter(|l| !l.contains("index: ") || l.contains("index: 0,"))
        .collect::<Vec<_>>()
        .join("\n");
    let loaded = load::load_fleet(&[load::SourceFile::new("fleet.yaml", fleet.into_bytes())]);
    let observed = load::parse_observed("observed.yaml", &observed).unwrap();
    let (p, horizon) = plan_with_horizon(&PlanInput {
        fleet: &loaded.fleet,
        observed: &observed,
        now: now(),
        revision: None,
    });
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(horizon, Some(now() + Duration::minutes(30)));
}
