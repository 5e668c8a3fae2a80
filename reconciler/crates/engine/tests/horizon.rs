#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

//! A plan's time horizon (`plan_with_horizon`): over random small fleets
//! given everything through which time enters a plan — running jobs with
//! time limits that expire soon (terminations, backfill reservations from
//! fixed ends), pending jobs with time limits (backfill, "would end at"
//! texts), preemptions in their grace period, shortest-first queues whose
//! jobs are about to reach the aging cap, pools that may scale down with
//! nodes idle for about their wait, and a `now` at any second, sometimes
//! just before midnight — the plan at any time in `[now, horizon)` is the
//! plan at `now`, its `time` aside; and the plan is `engine::plan`'s. A
//! known horizon (a time limit) is found exactly, and the plan changes
//! there, so a horizon of "never" cannot pass.

mod support;

use gitfleet_engine::{PlanInput, plan, plan_with_horizon};
use model::observed::{ObservedNode, ObservedState, RunningJob, Timestamp};
use model::plan::{Action, Plan};
use model::spec::{Duration, Fleet, JobSpec, QueueOrdering};
use proptest::prelude::*;
use support::{Case, build, case_raw, object};

/// How the random case is bent towards time: per job (limit choice, minutes),
/// per queue (shortest first?), per node (idle minutes), the pools' scale
/// down, the clock's second and whether it is near midnight.
#[derive(Debug, Clone)]
struct Twist {
    limits: Vec<(u8, u32, u32)>,
    shortest_first: Vec<bool>,
    idle: Vec<Option<u32>>,
    scale_down: bool,
    second: u32,
    near_midnight: bool,
    aging: Vec<Option<u32>>,
}

fn twist() -> impl Strategy<Value = Twist> {
    (
        prop::collection::vec((0..4u8, 0..=180u32, 0..60u32), 10),
        prop::collection::vec(any::<bool>(), 6),
        prop::collection::vec(prop::option::weighted(0.5, 0..=40u32), 6),
        any::<bool>(),
        0..60u32,
        prop::bool::weighted(0.2),
        prop::collection::vec(prop::option::weighted(0.3, 0..=30u32), 10),
    )
        .prop_map(
            |(limits, shortest_first, idle, scale_down, second, near_midnight, aging)| Twist {
                limits,
                shortest_first,
                idle,
                scale_down,
                second,
                near_midnight,
                aging,
            },
        )
}

const WEEK_MINUTES: i64 = 7 * 24 * 60;
/// Minutes in smallest-first's aging bound (30 days).
const MONTH_MINUTES: i64 = 30 * 24 * 60;

/// The case bent by `t`: all times shifted so that `now` falls where the
/// twist says; time limits, orderings, idle nodes and ages added.
fn twisted(case: &Case, t: &Twist) -> Case {
    let mut case = case.clone();
    let base = support::now();
    let now = if t.near_midnight {
        "2026-11-21T23:58:00Z".parse::<Timestamp>().unwrap()
    } else {
        base
    } + chrono::Duration::seconds(i64::from(t.second));
    let shift = now - base;
    shift_times(&mut case.observed, shift);
    case.now = now;
    let started: std::collections::BTreeMap<String, Timestamp> = case
        .observed
        .running
        .iter()
        .map(|r| (r.job.clone(), r.started))
        .collect();
    for (i, job) in case.fleet.jobs.iter_mut().enumerate() {
        let (kind, minutes, seconds) = t.limits[i % t.limits.len()];
        let extra = Duration::from_secs(u64::from(minutes) * 60 + u64::from(seconds));
        job.spec.time_limit = match (kind, started.get(job.name())) {
            // Kept as generated (none, or already past it).
            (0, _) => job.spec.time_limit,
            // A running job's limit ends `extra` from now.
            (_, Some(s)) => {
                let ran = (now - *s).to_std().unwrap_or_default();
                Some(Duration::from_millis(
                    ran.as_millis() as u64 + extra.max(secs(1)).as_millis(),
                ))
            }
            // A pending job's limit: short or long.
            (1, None) => Some(extra.max(secs(60))),
            (_, None) => Some(Duration::from_millis(3_600_000 + extra.as_millis())),
        };
    }
    for (i, queue) in case.fleet.queues.iter_mut().enumerate() {
        if t.shortest_first[i % t.shortest_first.len()] {
            // Both ranked orderings, leaf by leaf.
            queue.spec.ordering = Some(if i % 2 == 0 {
                QueueOrdering::ShortestFirst
            } else {
                QueueOrdering::SmallestFirst
            });
        }
    }
    for (i, queued) in case.observed.queued.iter_mut().enumerate() {
        if let Some(m) = t.aging[i % t.aging.len()] {
            // About to reach an aging cap (shortest-first's week or
            // smallest-first's 30 days; or just past it).
            let cap = if i % 3 == 2 {
                MONTH_MINUTES
            } else {
                WEEK_MINUTES
            };
            queued.since = now - chrono::Duration::minutes(cap - i64::from(m) + 15)
                + chrono::Duration::seconds(i64::from(t.second) * 7 % 60);
        }
    }
    if t.scale_down {
        for pool in &mut case.fleet.pools {
            pool.spec.size.max = pool.spec.size.min + 2;
            pool.spec.size.min = pool.spec.size.min.saturating_sub(1);
            pool.spec.scale_down_after = Some(secs(20 * 60));
        }
    }
    for (i, node) in case.observed.nodes.iter_mut().enumerate() {
        if let Some(m) = t.idle[i % t.idle.len()] {
            node.idle_since =
                Some(now - chrono::Duration::minutes(i64::from(m)) - chrono::Duration::seconds(5));
        }
    }
    case
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn shift_times(observed: &mut ObservedState, by: chrono::Duration) {
    for r in &mut observed.running {
        r.started += by;
        if let Some(s) = &mut r.preempting_since {
            *s += by;
        }
    }
    for q in &mut observed.queued {
        q.since += by;
    }
    for c in &mut observed.completed {
        c.finished += by;
    }
}

fn plan_at(case: &Case, now: Timestamp) -> Plan {
    plan(&PlanInput {
        fleet: &case.fleet,
        observed: &case.observed,
        now,
        revision: None,
    })
}

/// The plan with another plan's `time`, to compare all but the time.
fn timed_as(mut p: Plan, other: &Plan) -> Plan {
    p.time = other.time.clone();
    p
}

/// The instants checked before `horizon`: `now`, fractions of the way,
/// and the last nanosecond before it (or far ahead, without one).
fn probes(now: Timestamp, horizon: Option<Timestamp>, fractions: &[f64]) -> Vec<Timestamp> {
    let mut out = vec![now];
    match horizon {
        Some(h) => {
            let span = (h - now).num_nanoseconds().unwrap_or(i64::MAX) as f64;
            for f in fractions {
                out.push(now + chrono::Duration::nanoseconds((span * f) as i64));
            }
            out.push(h - chrono::Duration::nanoseconds(1));
            out.push(h - chrono::Duration::milliseconds(1));
            out.push(h - chrono::Duration::seconds(1));
        }
        None => {
            for days in [1, 30, 400] {
                out.push(now + chrono::Duration::days(days));
            }
        }
    }
    out.retain(|t| *t >= now && horizon.is_none_or(|h| *t < h));
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("HORIZON_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1500),
        rng_seed: prop::test_runner::RngSeed::Fixed(20),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_plan_stands_until_its_horizon(
        raw in case_raw(),
        t in twist(),
        fractions in prop::collection::vec(0.0..1.0f64, 4),
    ) {
        let case = twisted(&build(&raw), &t);
        let (first, horizon) = plan_with_horizon(&case.input());
        prop_assert_eq!(&first, &case.plan(), "plan_with_horizon's plan is plan's");
        if let Some(h) = horizon {
            prop_assert!(h > case.now);
        }
        for at in probes(case.now, horizon, &fractions) {
            let later = plan_at(&case, at);
            prop_assert_eq!(
                timed_as(later, &first),
                first.clone(),
                "plan at {} differs before the horizon {:?} (now {})",
                at,
                horizon,
                case.now
            );
        }
    }
}

/// The twisted cases are not all trivial: many have a horizon well ahead,
/// some none, and plans do change at some horizons.
#[test]
fn horizons_are_not_trivial() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngSeed, TestRunner};
    let mut runner = TestRunner::new(Config {
        rng_seed: RngSeed::Fixed(7),
        ..Config::default()
    });
    let (mut far, mut never, mut changed, mut total) = (0, 0, 0, 0);
    for _ in 0..400 {
        let raw = case_raw().new_tree(&mut runner).unwrap().current();
        let t = twist().new_tree(&mut runner).unwrap().current();
        let case = twisted(&build(&raw), &t);
        let (first, horizon) = plan_with_horizon(&case.input());
        total += 1;
        match horizon {
            None => never += 1,
            Some(h) => {
                if h - case.now >= chrono::Duration::minutes(1) {
                    far += 1;
                }
                if timed_as(plan_at(&case, h), &first) != first {
                    changed += 1;
                }
            }
        }
    }
    assert!(
        far * 4 >= total,
        "{far} of {total} horizons a minute or more ahead"
    );
    assert!(never > 0, "no case without a horizon");
    assert!(
        changed * 4 >= total,
        "{changed} of {total} plans change at their horizon"
    );
}

/// One node, one running job whose limit ends in ten minutes, nothing
/// pending: the horizon is the limit's end, and there the job is
/// terminated.
#[test]
fn a_time_limit_is_the_horizon_and_the_plan_changes_there() {
    let now: Timestamp = "2026-11-21T10:00:30Z".parse().unwrap();
    let started = now - chrono::Duration::minutes(50);
    let fleet = Fleet {
        pools: vec![object(
            "p",
            model::spec::NodePoolSpec {
                gpu: model::spec::PoolGpu {
                    model: "H100".to_string(),
                    count: 8,
                    memory_gib: None,
                },
                nvlink: model::spec::NvLink::Full,
                size: model::spec::PoolSize { min: 1, max: 1 },
                nodes_per_rack: None,
                labels: Default::default(),
                scale_down_after: None,
            },
        )],
        queues: vec![object(
            "q",
            model::spec::QueueSpec {
                parent: None,
                weight: 1,
                quota: Vec::new(),
                ordering: None,
            },
        )],
        jobs: vec![object(
            "train",
            JobSpec {
                queue: "q".to_string(),
                priority_class: None,
                replicas: 1,
                gpus_per_replica: 8,
                gpu: None,
                topology: None,
                time_limit: Some(secs(3600)),
                command: vec!["train".to_string()],
                image: None,
                env: Default::default(),
                kubernetes: None,
                slurm: None,
            },
        )],
        ..Fleet::default()
    };
    let observed = ObservedState {
        time: None,
        nodes: vec![ObservedNode {
            name: "p-0".to_string(),
            pool: Some("p".to_string()),
            labels: Default::default(),
            idle_since: None,
            gpus: (0..8)
                .map(|i| model::observed::ObservedGpu::new(i, "H100".to_string()))
                .collect(),
        }],
        running: vec![RunningJob {
            job: "train".to_string(),
            started,
            placement: vec![model::observed::NodeGpus {
                node: "p-0".to_string(),
                gpus: (0..8).collect(),
            }],
            preempting_since: None,
            preempted_for: None,
            restart: None,
            spec_digest: None,
        }],
        ..ObservedState::default()
    };
    let case = Case {
        fleet,
        observed,
        now,
    };
    let (first, horizon) = plan_with_horizon(&case.input());
    let end = started + chrono::Duration::hours(1);
    assert_eq!(horizon, Some(end));
    assert!(first.actions.is_empty(), "{:?}", first.actions);
    let before = plan_at(&case, end - chrono::Duration::nanoseconds(1));
    assert_eq!(timed_as(before, &first), first);
    let at = plan_at(&case, end);
    assert!(
        matches!(at.actions.as_slice(), [Action::Terminate { job, .. }] if job == "train"),
        "{:?}",
        at.actions
    );
}
