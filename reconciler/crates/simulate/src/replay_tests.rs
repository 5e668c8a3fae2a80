//! The replay's engine keeps its view of the nodes between plans
//! ([`engine::Planner`]): on random small traces, under every policy, every
//! plan is the one `engine::plan` builds from scratch on the same input
//! (an elastic pool whose nodes come and go, a fixed pool of another
//! model, jobs that name a model or not).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use model::spec::Fleet;
use proptest::prelude::*;

use crate::{Limits, Options, Policy};

#[allow(dead_code)] // the long jobs serve tests/conservation.rs only
#[path = "../tests/support/random_traces.rs"]
mod random_traces;
use random_traces::{Spec, fleet_with_classes, job, policy, trace};

const FLEET: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: A, count: 8}
  nvlink: pairs
  size: {min: 1, max: 3}
  scaleDownAfter: 60s
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: q}
spec:
  gpu: {model: B, count: 4}
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: a}
spec:
  quota: [{model: A, guaranteed: 8, limit: 24}, {model: B, guaranteed: 4, limit: 8}]
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: b}
spec:
  quota: [{model: A, guaranteed: 8, limit: 16}, {model: B, guaranteed: 4, limit: 8}]
---
";

fn fleet() -> Fleet {
    fleet_with_classes(FLEET)
}

/// Replays with every plan checked against `engine::plan`; the plans made.
fn checked_replay(specs: &[Spec], options: &Options) -> u64 {
    let fleet = fleet();
    let prepared = crate::jobs::prepare(&fleet, &trace(specs), options).unwrap();
    let outcome = super::run_with(&fleet, &prepared, options, false, &mut |_| {}, true).unwrap();
    outcome.plans
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        rng_seed: prop::test_runner::RngSeed::Fixed(1),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_plan_is_the_one_built_from_scratch(
        specs in prop::collection::vec(job(3), 1..30),
        (policy, limits) in policy(),
    ) {
        let options = Options { policy, limits, ..Options::default() };
        prop_assert!(checked_replay(&specs, &options) > 0);
    }
}

#[test]
fn a_busy_replay_plans_as_from_scratch() {
    // Gangs of both queues that preempt, wait for a scale-up and leave
    // idle nodes behind: the kept nodes change and are used again.
    let specs: Vec<Spec> = (0..40u64)
        .map(|i| {
            (
                i * 7 % 300,
                i % 3 != 0,
                1 + (i % 2) as u32,
                [1, 2, 4, 8][(i % 4) as usize],
                30 + i * 13 % 200,
                i % 5 == 0,
                (i % 3) as u8,
            )
        })
        .collect();
    for policy in [Policy::Gitfleet, Policy::Fifo] {
        let options = Options {
            policy,
            limits: Limits::Exact,
            ..Options::default()
        };
        assert!(checked_replay(&specs, &options) > 10);
    }
}
