//! Random small traces for the replay's property tests, shared by the
//! unit tests of `replay` (`src/replay_tests.rs`) and `tests/conservation.rs`.
//! The includer brings `Policy` and `Limits` into its scope.

use load::{SourceFile, load_fleet};
use model::spec::{Duration, Fleet};
use proptest::prelude::*;
use trace::TraceJob;

use super::{Limits, Policy};

/// The priority classes the traces name: `low` (the default, with a 20 s
/// grace period) and `high`.
pub const CLASSES: &str = "\
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

/// The fleet of `pools_and_queues` (documents ending in `---`) and
/// [`CLASSES`].
pub fn fleet_with_classes(pools_and_queues: &str) -> Fleet {
    let text = format!("{pools_and_queues}{CLASSES}");
    let loaded = load_fleet(&[SourceFile::new("fleet.yaml", text.into_bytes())]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

/// (submit s, queue a, replicas, GPUs per replica, duration s, high, model:
/// 0 none, 1 `A`, 2 `B`).
pub type Spec = (u64, bool, u32, u32, u64, bool, u8);

/// A job of up to 2 × 8 GPUs submitted in the first 10 minutes; `models`
/// of 1 names no model, 3 names none, `A` or `B`.
pub fn job(models: u8) -> impl Strategy<Value = Spec> {
    (
        0u64..600,
        any::<bool>(),
        1u32..=2,
        prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
        1u64..400,
        any::<bool>(),
        0u8..models,
    )
}

/// Jobs long enough to reach the attained-service tiers (1 and 10
/// GPU-hours): up to 16 GPUs for up to 6 hours, naming no model.
pub fn long_job() -> impl Strategy<Value = Spec> {
    (
        0u64..20_000,
        any::<bool>(),
        1u32..=2,
        prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
        prop_oneof![1u64..600, 600u64..21_600],
        prop::bool::weighted(0.2),
        Just(0u8),
    )
}

/// The trace of `specs`, line numbers from 2 (after a header), queues `a`
/// and `b`, classes `high` and `low`.
pub fn trace(specs: &[Spec]) -> Vec<TraceJob> {
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

/// Every baseline policy with every way of reading time limits.
pub fn policy() -> impl Strategy<Value = (Policy, Limits)> {
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
