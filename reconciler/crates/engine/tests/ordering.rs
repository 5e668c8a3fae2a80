#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

//! A queue's `ordering` (issue 19 item 4) on random leaves whose jobs all
//! wait (the leaf's limit is 0 GPUs), so the plan's pending list is the
//! order the engine considered them in:
//!
//! - `shortest-first` (on the leaf or inherited from its parent): no
//!   starvation — a job that has waited 7 days goes before every job of its
//!   priority that arrived after it, so no job is passed by a later arrival
//!   of its priority for longer than that; priority classes still come
//!   first; the order is the documented rank `min(timeLimit, 7d) − age /
//!   24` (docs/semantics.md);
//! - `smallest-first`: the same with the job's GPUs as a factor of its
//!   limit (rank `min(timeLimit, 7d) × GPUs − age / 24`) and a 30-day
//!   bound; the order of two waiting jobs does not change as time passes
//!   (below the bound);
//! - `fifo` (explicit on the leaf or its parent, or omitted): the plan is
//!   byte-identical to the plan of the fleet without `ordering`, and the
//!   order is today's (priority, then first seen, never seen last, name).

use chrono::{DateTime, Duration, Utc};
use gitfleet_engine::{PlanInput, plan};
use proptest::prelude::*;

/// The declared limits jobs choose from (`None`: no `timeLimit`).
const LIMITS: [Option<&str>; 8] = [
    None,
    Some("15m"),
    Some("1h"),
    Some("4h"),
    Some("24h"),
    Some("7d"),
    Some("30d"),
    Some("90d"),
];

/// `shortest-first`'s maximum age (docs/semantics.md), in minutes.
const CAP_MIN: i64 = 7 * 24 * 60;

/// `shortest-first`'s aging: 24 minutes waited count as a minute of limit.
const AGING: i64 = 24;

/// `smallest-first`'s maximum age (docs/semantics.md), in minutes.
const SMALL_CAP_MIN: i64 = 30 * 24 * 60;

/// Priority classes jobs choose from (`None`: the default, `normal`).
const CLASSES: [Option<&str>; 3] = [None, Some("low"), Some("high")];

#[derive(Debug, Clone)]
struct JobRaw {
    class: usize,
    limit: usize,
    /// Minutes waited, `None`: never seen.
    age: Option<u32>,
    /// Replicas of one GPU each (1: the field is not written).
    replicas: u32,
}

fn job_raw() -> impl Strategy<Value = JobRaw> {
    (
        0..CLASSES.len(),
        0..LIMITS.len(),
        prop::option::weighted(0.9, 0u32..=10 * 24 * 60),
    )
        .prop_map(|(class, limit, age)| JobRaw {
            class,
            limit,
            age,
            replicas: 1,
        })
}

/// Jobs of 1 to 8 GPUs that may have waited past `smallest-first`'s bound.
fn sized_job_raw() -> impl Strategy<Value = JobRaw> {
    (
        0..CLASSES.len(),
        0..LIMITS.len(),
        prop::option::weighted(0.9, 0u32..=40 * 24 * 60),
        1u32..=8,
    )
        .prop_map(|(class, limit, age, replicas)| JobRaw {
            class,
            limit,
            age,
            replicas,
        })
}

fn now() -> DateTime<Utc> {
    "2026-11-21T10:00:00Z".parse().unwrap()
}

/// Where `ordering` is written: nowhere, on the leaf, on its parent.
#[derive(Debug, Clone, Copy)]
enum Placement {
    None,
    Leaf(&'static str),
    Parent(&'static str),
    /// The parent says `shortest-first`, the leaf overrides with `fifo`.
    Override,
}

fn fleet_yaml(jobs: &[JobRaw], placement: Placement) -> String {
    let mut y = String::from(
        "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {gpu: {model: H100, count: 1}, nvlink: full, size: {min: 1, max: 1}}\n\
         ---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: low}\nspec: {value: 10}\n\
         ---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: normal}\nspec: {value: 100, default: true}\n\
         ---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: high}\nspec: {value: 500}\n",
    );
    let (parent, leaf) = match placement {
        Placement::None => ("", ""),
        Placement::Leaf(o) => ("", o),
        Placement::Parent(o) => (o, ""),
        Placement::Override => ("shortest-first", "fifo"),
    };
    let ordering = |o: &str| {
        if o.is_empty() {
            String::new()
        } else {
            format!(", ordering: {o}")
        }
    };
    y.push_str(&format!(
        "---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: org}}\nspec: {{weight: 1{}}}\n",
        ordering(parent)
    ));
    y.push_str(&format!(
        "---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: q}}\nspec: {{parent: org, quota: [{{model: H100, guaranteed: 0, limit: 0}}]{}}}\n",
        ordering(leaf)
    ));
    for (i, j) in jobs.iter().enumerate() {
        let mut spec = "queue: q, gpusPerReplica: 1".to_string();
        if j.replicas > 1 {
            spec.push_str(&format!(", replicas: {}", j.replicas));
        }
        if let Some(c) = CLASSES[j.class] {
            spec.push_str(&format!(", priorityClass: {c}"));
        }
        if let Some(l) = LIMITS[j.limit] {
            spec.push_str(&format!(", timeLimit: {l}"));
        }
        y.push_str(&format!(
            "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: j{i:02}}}\nspec: {{{spec}}}\n"
        ));
    }
    y
}

fn observed_yaml(jobs: &[JobRaw]) -> String {
    let mut y = format!(
        "time: {}\nnodes:\n  - name: p-0\n    pool: p\n    gpus:\n      - {{index: 0, model: H100}}\nqueued:\n",
        now().to_rfc3339()
    );
    for (i, j) in jobs.iter().enumerate() {
        if let Some(age) = j.age {
            let since = now() - Duration::minutes(i64::from(age));
            y.push_str(&format!(
                "  - {{job: j{i:02}, since: {}}}\n",
                since.to_rfc3339()
            ));
        }
    }
    if jobs.iter().all(|j| j.age.is_none()) {
        y.push_str("  []\n");
    }
    y
}

/// The plan, as JSON, and the names of its pending jobs in order.
fn run(jobs: &[JobRaw], placement: Placement) -> (String, Vec<usize>) {
    run_at(jobs, placement, now())
}

/// [`run`] with the plan at `at` (the ages are counted to [`now`]).
fn run_at(jobs: &[JobRaw], placement: Placement, at: DateTime<Utc>) -> (String, Vec<usize>) {
    let loaded = load::load_fleet(&[load::SourceFile::new(
        "fleet.yaml",
        fleet_yaml(jobs, placement).into_bytes(),
    )]);
    assert!(loaded.is_valid(), "invalid fleet: {:?}", loaded.diagnostics);
    let observed = load::parse_observed("observed.yaml", &observed_yaml(jobs))
        .unwrap_or_else(|e| panic!("invalid observed state: {e:?}"));
    let p = plan(&PlanInput {
        fleet: &loaded.fleet,
        observed: &observed,
        now: at,
        revision: None,
    });
    assert!(p.actions.is_empty(), "every job waits: {:?}", p.actions);
    let order = p
        .pending
        .iter()
        .map(|pj| pj.job[1..].parse::<usize>().unwrap())
        .collect();
    (serde_json::to_string(&p).unwrap(), order)
}

fn priority(j: &JobRaw) -> i32 {
    match CLASSES[j.class] {
        Some("low") => 10,
        Some("high") => 500,
        _ => 100,
    }
}

/// Arrival in minutes before now (never seen: now, 0).
fn arrived_ago(j: &JobRaw) -> i64 {
    j.age.map_or(0, i64::from)
}

fn limit_min(j: &JobRaw) -> i64 {
    let minutes = match LIMITS[j.limit] {
        None => CAP_MIN,
        Some(text) => {
            let (n, unit) = text.split_at(text.len() - 1);
            let n: i64 = n.parse().unwrap();
            n * match unit {
                "m" => 1,
                "h" => 60,
                _ => 24 * 60,
            }
        }
    };
    minutes.min(CAP_MIN)
}

/// Today's order: priority, first seen (old first, never seen last), name.
fn fifo_order(jobs: &[JobRaw]) -> Vec<usize> {
    let mut ids: Vec<usize> = (0..jobs.len()).collect();
    ids.sort_by_key(|&i| {
        let j = &jobs[i];
        (
            std::cmp::Reverse(priority(j)),
            j.age.is_none(),
            std::cmp::Reverse(j.age.unwrap_or(0)),
            i,
        )
    });
    ids
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn shortest_first_never_starves(
        jobs in prop::collection::vec(job_raw(), 1..12),
        on_parent in any::<bool>(),
    ) {
        let placement = if on_parent {
            Placement::Parent("shortest-first")
        } else {
            Placement::Leaf("shortest-first")
        };
        let (_, order) = run(&jobs, placement);
        prop_assert_eq!(order.len(), jobs.len());
        let pos = |i: usize| order.iter().position(|&o| o == i).unwrap();
        for (a, ja) in jobs.iter().enumerate() {
            for (b, jb) in jobs.iter().enumerate() {
                if a == b {
                    continue;
                }
                if priority(ja) != priority(jb) {
                    // Priority classes first.
                    prop_assert_eq!(pos(a) < pos(b), priority(ja) > priority(jb));
                    continue;
                }
                let later_by = arrived_ago(ja) - arrived_ago(jb);
                if later_by <= 0 || pos(b) > pos(a) {
                    continue;
                }
                // b arrived `later_by` minutes after a and goes first.
                prop_assert!(
                    arrived_ago(ja) < CAP_MIN,
                    "j{a} waited {} min (≥ 7 days) yet j{b}, which arrived after it, goes first",
                    arrived_ago(ja)
                );
                // Only with a limit shorter by more than the gap ÷ 24: the
                // rank min(limit, 7d) − age / 24 (× 24), lower first.
                prop_assert!(
                    AGING * limit_min(jb) - arrived_ago(jb)
                        < AGING * limit_min(ja) - arrived_ago(ja),
                    "j{b} passes j{a} with a higher rank"
                );
            }
        }
        // Equal priority: jobs that waited 7 days first (oldest first), then
        // by rank, then older, then name.
        let key = |i: usize| {
            let j = &jobs[i];
            let rank = if arrived_ago(j) >= CAP_MIN {
                (false, -arrived_ago(j))
            } else {
                (true, AGING * limit_min(j) - arrived_ago(j))
            };
            (rank, j.age.is_none(), -arrived_ago(j), i)
        };
        for w in order.windows(2) {
            if priority(&jobs[w[0]]) == priority(&jobs[w[1]]) {
                prop_assert!(key(w[0]) < key(w[1]), "j{} before j{}", w[0], w[1]);
            }
        }
    }

    #[test]
    fn smallest_first_never_starves(
        jobs in prop::collection::vec(sized_job_raw(), 1..12),
        on_parent in any::<bool>(),
        later_min in 0i64..=2 * 24 * 60,
    ) {
        let placement = if on_parent {
            Placement::Parent("smallest-first")
        } else {
            Placement::Leaf("smallest-first")
        };
        let (_, order) = run(&jobs, placement);
        prop_assert_eq!(order.len(), jobs.len());
        let pos = |i: usize| order.iter().position(|&o| o == i).unwrap();
        // The rank × 24 in minutes: 24 × limit × GPUs − age.
        let rank = |j: &JobRaw| AGING * limit_min(j) * i64::from(j.replicas) - arrived_ago(j);
        for (a, ja) in jobs.iter().enumerate() {
            for (b, jb) in jobs.iter().enumerate() {
                if a == b || priority(ja) != priority(jb) {
                    prop_assert!(a == b || (pos(a) < pos(b)) == (priority(ja) > priority(jb)));
                    continue;
                }
                let later_by = arrived_ago(ja) - arrived_ago(jb);
                if later_by <= 0 || pos(b) > pos(a) {
                    continue;
                }
                // b arrived after a and goes first: a has waited less than
                // 30 days and b's declared GPU-time is smaller by more than
                // the gap ÷ 24.
                prop_assert!(
                    arrived_ago(ja) < SMALL_CAP_MIN,
                    "j{a} waited {} min (≥ 30 days) yet j{b}, which arrived after it, goes first",
                    arrived_ago(ja)
                );
                prop_assert!(rank(jb) < rank(ja), "j{b} passes j{a} with a higher rank");
            }
        }
        let key = |i: usize| {
            let j = &jobs[i];
            let r = if arrived_ago(j) >= SMALL_CAP_MIN {
                (false, -arrived_ago(j))
            } else {
                (true, rank(j))
            };
            (r, j.age.is_none(), -arrived_ago(j), i)
        };
        for w in order.windows(2) {
            if priority(&jobs[w[0]]) == priority(&jobs[w[1]]) {
                prop_assert!(key(w[0]) < key(w[1]), "j{} before j{}", w[0], w[1]);
            }
        }
        // As time passes, seen jobs that stay below the bound keep their
        // order (never-seen jobs rank as arriving at the plan's time).
        let (_, later) = run_at(&jobs, placement, now() + Duration::minutes(later_min));
        let young = |i: &usize| {
            jobs[*i].age.is_some_and(|a| i64::from(a) + later_min < SMALL_CAP_MIN)
        };
        let before: Vec<usize> = order.iter().copied().filter(young).collect();
        let after: Vec<usize> = later.iter().copied().filter(young).collect();
        prop_assert_eq!(before, after);
    }

    #[test]
    fn fifo_is_todays_order(
        jobs in prop::collection::vec(job_raw(), 1..12),
        placement in 0..4usize,
    ) {
        let placement = [
            Placement::Leaf("fifo"),
            Placement::Parent("fifo"),
            Placement::Override,
            Placement::None,
        ][placement];
        let (plan, order) = run(&jobs, placement);
        let (today, _) = run(&jobs, Placement::None);
        prop_assert_eq!(plan, today, "fifo changes the plan ({:?})", placement);
        prop_assert_eq!(order, fifo_order(&jobs));
    }
}
