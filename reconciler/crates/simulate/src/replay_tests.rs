//! The replay's engine keeps its view of the nodes between plans
//! ([`engine::Planner`]): on random small traces, under every policy, every
//! plan is the one `engine::plan` builds from scratch on the same input
//! (an elastic pool whose nodes come and go, a fixed pool of another
//! model, jobs that name a model or not).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use load::{SourceFile, load_fleet};
use model::spec::{Duration, Fleet};
use proptest::prelude::*;
use trace::TraceJob;

use crate::{Limits, Options, Policy};

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
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: low}
spec: {value: 0, default: true, gracePeriod: 20s}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: high}
spec: {value: 10}
";

fn fleet() -> Fleet {
    let loaded = load_fleet(&[SourceFile::new("fleet.yaml", FLEET.as_bytes().to_vec())]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

/// (submit s, queue a, replicas, GPUs per replica, duration s, high, model)
type Spec = (u64, bool, u32, u32, u64, bool, u8);

fn job() -> impl Strategy<Value = Spec> {
    (
        0u64..600,
        any::<bool>(),
        1u32..=2,
        prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
        1u64..400,
        any::<bool>(),
        0u8..3,
    )
}

fn trace(specs: &[Spec]) -> Vec<TraceJob> {
    specs
        .iter()
        .enumerate()
        .map(
            |(i, &(submit, queue_a, replicas, per, duration, high, model))| TraceJob {
                line: i as u64 + 2,
                submit: Duration::from_secs(submit),
                queue: if queue_a { "a" } else { "b" }.to_string(),
                replicas,
                // Model B's nodes have 4 GPUs.
                gpus_per_replica: if model == 2 { per.min(4) } else { per },
                model: match model {
                    1 => Some("A".to_string()),
                    2 => Some("B".to_string()),
                    _ => None,
                },
                duration: Duration::from_secs(duration),
                priority_class: Some(if high { "high" } else { "low" }.to_string()),
                time_limit: None,
            },
        )
        .collect()
}

/// Replays with every plan checked against `engine::plan`; the plans made.
fn checked_replay(specs: &[Spec], options: &Options) -> u64 {
    let fleet = fleet();
    let prepared = crate::jobs::prepare(&fleet, &trace(specs), options).unwrap();
    let outcome = super::run_with(&fleet, &prepared, options, false, &mut |_| {}, true).unwrap();
    outcome.plans
}

fn policy() -> impl Strategy<Value = (Policy, Limits)> {
    (
        prop_oneof![
            Just(Policy::Gitfleet),
            Just(Policy::Fifo),
            Just(Policy::FifoSkip),
            Just(Policy::SjfOracle)
        ],
        prop_oneof![
            Just(Limits::Trace),
            Just(Limits::Exact),
            Just(Limits::Noisy)
        ],
    )
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
        specs in prop::collection::vec(job(), 1..30),
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
