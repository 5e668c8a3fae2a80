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

use gitfleet_engine::{PlanInput, Planner, plan};
use proptest::prelude::*;
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
