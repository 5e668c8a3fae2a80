#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

//! `Planner` keeps the engine's view of the nodes between plans: one planner
//! fed a sequence of random small fleets — the same nodes with other jobs
//! (a plan fed back), other nodes, models and pools (another case), the
//! same nodes listed in another order, a GPU turned unhealthy, `idleSince`
//! changed — gives at every step the plan `engine::plan` builds from
//! scratch; so does `Planner::plan_same_nodes` where the nodes are the
//! previous step's (debug builds check that they are), and
//! `Planner::plan_with_nodes` given the nodes apart from the observed state
//! (with the horizon `plan_with_horizon` finds).

mod support;

use gitfleet_engine::{PlanInput, Planner, Unchanged, plan};
use proptest::prelude::*;
#[cfg(debug_assertions)]
use proptest::strategy::ValueTree;
use support::{Case, build, case_raw, feed_back};

fn same_plan(planner: &mut Planner, case: &Case, step: &str) -> Result<(), TestCaseError> {
    let input = PlanInput {
        fleet: &case.fleet,
        observed: &case.observed,
        now: case.now,
        revision: None,
    };
    prop_assert_eq!(planner.plan(&input), plan(&input), "{}", step);
    // The nodes apart (the observed state's own left empty).
    let (whole, horizon) = planner.plan_with_horizon(&input);
    let without_nodes = model::observed::ObservedState {
        nodes: Vec::new(),
        ..case.observed.clone()
    };
    let apart = PlanInput {
        observed: &without_nodes,
        ..input
    };
    let (planned, found) = planner.plan_with_nodes(&apart, &case.observed.nodes);
    prop_assert_eq!(&planned, &whole, "{}, nodes apart", step);
    prop_assert_eq!(found, horizon, "{}, nodes apart: the horizon", step);
    prop_assert_eq!(whole, plan(&input), "{}, with its horizon", step);
    Ok(())
}

/// [`same_plan`] through `Planner::plan_same_nodes` (the nodes are the
/// previous step's).
fn same_plan_same_nodes(
    planner: &mut Planner,
    case: &Case,
    step: &str,
) -> Result<(), TestCaseError> {
    let input = PlanInput {
        fleet: &case.fleet,
        observed: &case.observed,
        now: case.now,
        revision: None,
    };
    prop_assert_eq!(planner.plan_same_nodes(&input), plan(&input), "{}", step);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        rng_seed: prop::test_runner::RngSeed::Fixed(1),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_plan_is_the_one_built_from_scratch(a in case_raw(), b in case_raw()) {
        let (a, b) = (build(&a), build(&b));
        let mut planner = Planner::new();
        same_plan(&mut planner, &a, "a")?;
        let fed = feed_back(&a, &a.plan());
        same_plan(&mut planner, &fed, "a fed back")?;
        same_plan_same_nodes(&mut planner, &feed_back(&fed, &fed.plan()), "a fed back twice")?;
        same_plan_same_nodes(&mut planner, &a, "a, same nodes")?;
        same_plan(&mut planner, &b, "b")?;
        same_plan(&mut planner, &feed_back(&b, &b.plan()), "b fed back")?;
        same_plan(&mut planner, &a, "a again")?;
        let mut reversed = a.clone();
        reversed.observed.nodes.reverse();
        same_plan(&mut planner, &reversed, "a, nodes reversed")?;
        same_plan(&mut planner, &reversed, "a, nodes reversed, again")?;
        let mut idle = reversed.clone();
        for (k, node) in idle.observed.nodes.iter_mut().enumerate() {
            node.idle_since = Some(support::ago(k as u32 * 7));
        }
        same_plan(&mut planner, &idle, "a, idle since")?;
        same_plan_same_nodes(&mut planner, &reversed, "a, idle since as before")?;
        same_plan_same_nodes(&mut planner, &idle, "a, idle since again")?;
        let mut sick = idle.clone();
        if let Some(gpu) = sick.observed.nodes.iter_mut().flat_map(|n| &mut n.gpus).next() {
            gpu.healthy = false;
        }
        same_plan(&mut planner, &sick, "a, a GPU unhealthy")?;
        // Its node drained by that plan is schedulable again in the kept
        // cluster, and drained again by the next.
        same_plan_same_nodes(&mut planner, &sick, "a, a GPU unhealthy, again")?;
        let sick_fed = feed_back(&sick, &sick.plan());
        same_plan_same_nodes(&mut planner, &sick_fed, "a, a GPU unhealthy, fed back")?;
        same_plan(&mut planner, &idle, "a, healthy again")?;
    }
}

/// Running records with the digests of the specs they started with: every
/// other one its job's now, the others another (drift lists them), so that
/// job changes add and remove drift.
fn with_spec_digests(case: &mut Case) {
    let digests: std::collections::BTreeMap<&str, String> = case
        .fleet
        .jobs
        .iter()
        .map(|j| (j.name(), j.spec.runtime_digest()))
        .collect();
    for (k, r) in case.observed.running.iter_mut().enumerate() {
        r.spec_digest = match digests.get(r.job.as_str()) {
            Some(now) if k % 2 == 0 => Some(now.clone()),
            _ => Some("00000000000000ff".into()),
        };
    }
}

/// One change to a job's spec or annotations, its name kept (what a commit
/// editing one job in place does), chosen by `kind` and `pick`.
fn change_job(case: &mut Case, at: usize, kind: u8, pick: u8) {
    let classes: Vec<String> = case
        .fleet
        .priority_classes
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let queues: Vec<String> = case
        .fleet
        .queues
        .iter()
        .map(|q| q.name().to_string())
        .collect();
    let models: Vec<String> = case
        .fleet
        .pools
        .iter()
        .map(|p| p.spec.gpu.model.clone())
        .collect();
    let job = &mut case.fleet.jobs[at];
    let spec = &mut job.spec;
    let pick = usize::from(pick);
    match kind % 9 {
        0 => spec.replicas = 1 + (spec.replicas + pick as u32) % 4,
        1 => spec.gpus_per_replica = 1 + (spec.gpus_per_replica + pick as u32) % 8,
        2 => {
            spec.priority_class = match classes.len() {
                0 => Some("unknown".into()),
                n if pick % (n + 1) == n => None,
                n => Some(classes[pick % n].clone()),
            }
        }
        3 if !queues.is_empty() => spec.queue = queues[pick % queues.len()].clone(),
        4 => {
            // A model of a pool, or one no pool has (a new model name).
            let model = match models.len() {
                n if n > 0 && pick % 3 != 0 => models[pick % n].clone(),
                _ => format!("X{pick}"),
            };
            spec.gpu = Some(model::spec::GpuSelector {
                models: vec![model],
            });
        }
        5 => spec.gpu = None,
        6 => {
            spec.time_limit = match pick % 3 {
                0 => None,
                k => Some(model::spec::Duration::from_secs(600 * k as u64)),
            }
        }
        7 => {
            job.metadata
                .annotations
                .insert(model::spec::RESTART_ANNOTATION.into(), format!("r{pick}"));
        }
        _ => spec.command = vec![format!("run-{pick}")],
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 150,
        rng_seed: prop::test_runner::RngSeed::Fixed(2),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// `Planner::plan_since_last` with the positions of the jobs a step
    /// changed (and whether the observed `queued` entries are the previous
    /// step's) plans as `engine::plan` does from scratch, step after step:
    /// jobs changed in place, the plan fed back, a queue's or class's
    /// change (which the planner sees itself), nothing changed.
    #[test]
    fn a_plan_since_last_is_the_one_built_from_scratch(
        a in case_raw(),
        steps in prop::collection::vec(
            (prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<u8>()), 0..4),
             0u8..6),
            1..6,
        ),
    ) {
        let mut case = build(&a);
        with_spec_digests(&mut case);
        let mut planner = Planner::new();
        let first = planner
            .plan_since_last(&case.input(), &case.observed.nodes, Unchanged::default())
            .0;
        prop_assert_eq!(&first, &case.plan(), "first");
        for (n, (changes, then)) in steps.into_iter().enumerate() {
            let nodes_before = case.observed.nodes.clone();
            let mut at: Vec<usize> = Vec::new();
            if !case.fleet.jobs.is_empty() {
                for (index, kind, pick) in changes {
                    let k = index.index(case.fleet.jobs.len());
                    change_job(&mut case, k, kind, pick);
                    at.push(k);
                }
            }
            let mut queued = true;
            match then {
                // The plan fed back: other records.
                1 => {
                    case = feed_back(&case, &case.plan());
                    queued = false;
                }
                // Another queue weight and quota (the same tree), a queue
                // gone (another tree), another class value: the planner
                // compares what the table depends on itself.
                2 => {
                    if let Some(q) = case.fleet.queues.first_mut() {
                        q.spec.weight += 1;
                        q.spec.quota.pop();
                    }
                }
                3 => {
                    case.fleet.queues.pop();
                }
                4 => {
                    if let Some(c) = case.fleet.priority_classes.first_mut() {
                        c.spec.value += 1;
                        c.spec.preemptible = !c.spec.preemptible;
                    }
                }
                _ => {}
            }
            // The same nodes are vouched for (debug builds compare them).
            let nodes = case.observed.nodes == nodes_before;
            let unchanged = Unchanged { jobs_but: Some(&at), records: queued, nodes };
            let (kept, _) = planner.plan_since_last(&case.input(), &case.observed.nodes, unchanged);
            prop_assert_eq!(&kept, &case.plan(), "step {}", n);
        }
    }
}

/// Plans the first generated case that `fits`, changes it (`change`), and
/// plans it again vouching for `unchanged`: what the wrong-vouch tests
/// below expect debug builds to catch.
#[cfg(debug_assertions)]
fn plan_after_a_wrong_vouch(
    fits: impl Fn(&Case) -> bool,
    change: impl FnOnce(&mut Case),
    unchanged: Unchanged<'_>,
) {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut case = loop {
        let raw = case_raw().new_tree(&mut runner).unwrap().current();
        let case = build(&raw);
        if fits(&case) {
            break case;
        }
    };
    let mut planner = Planner::new();
    planner.plan_since_last(&case.input(), &case.observed.nodes, Unchanged::default());
    change(&mut case);
    planner.plan_since_last(&case.input(), &case.observed.nodes, unchanged);
}

/// A caller that vouches wrongly (a job changed that it does not name) is
/// caught by debug builds, which make the job table anew too.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "a kept job table differs")]
fn a_wrong_vouch_is_caught_in_debug_builds() {
    plan_after_a_wrong_vouch(
        |case| !case.fleet.jobs.is_empty(),
        |case| change_job(case, 0, 0, 1),
        Unchanged {
            jobs_but: Some(&[]),
            records: true,
            nodes: true,
        },
    );
}

/// A caller that vouches for records that changed (a running job gone) is
/// caught by debug builds, which look the records up anew too.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "kept records' look-ups differ")]
fn a_wrong_vouch_for_records_is_caught_in_debug_builds() {
    plan_after_a_wrong_vouch(
        |case| !case.observed.running.is_empty(),
        |case| {
            case.observed.running.pop();
        },
        Unchanged {
            jobs_but: Some(&[]),
            records: true,
            nodes: true,
        },
    );
}

/// A caller that vouches for nodes that changed is caught by debug builds,
/// which compare them anyway.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "the nodes changed")]
fn a_wrong_vouch_for_nodes_is_caught_in_debug_builds() {
    plan_after_a_wrong_vouch(
        |case| !case.observed.nodes.is_empty(),
        |case| {
            case.observed.nodes.pop();
        },
        Unchanged {
            nodes: true,
            ..Unchanged::default()
        },
    );
}
