//! No preemption thrashing: feeding each plan's outcome back as the next
//! observed state for 100 rounds on an unchanged repository, the fleet
//! settles and no job is preempted twice.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::collections::BTreeMap;
use std::path::Path;

use reconciler::engine::{PlanInput, plan};
use reconciler::generate::{FleetSize, generate};
use reconciler::load::{SourceFile, fs::read_fleet_dir, load_fleet};
use reconciler::observed::{ObservedState, Timestamp, derive_inventory};
use reconciler::plan::Action;
use reconciler::sim::{advance, apply_plan};
use reconciler::spec::Fleet;

fn t0() -> Timestamp {
    chrono::DateTime::parse_from_rfc3339("2026-11-21T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc)
}

/// Runs `rounds` reconcile rounds one minute apart; returns preemptions per
/// job and the round of the last preemption.
fn run_rounds(
    fleet: &Fleet,
    mut observed: ObservedState,
    rounds: u32,
) -> (BTreeMap<String, u32>, Option<u32>, usize) {
    let mut preempted: BTreeMap<String, u32> = BTreeMap::new();
    let mut last = None;
    let mut placed = 0;
    for round in 0..rounds {
        let now = t0() + chrono::Duration::minutes(i64::from(round));
        observed = advance(fleet, &observed, now);
        let p = plan(&PlanInput {
            fleet,
            observed: &observed,
            now,
            revision: None,
        });
        for action in &p.actions {
            match action {
                Action::Preempt { job, .. } => {
                    *preempted.entry(job.clone()).or_default() += 1;
                    last = Some(round);
                }
                Action::Place { .. } => placed += 1,
                _ => {}
            }
        }
        observed = apply_plan(fleet, &observed, &p, now);
    }
    (preempted, last, placed)
}

fn assert_settles(name: &str, fleet: &Fleet, observed: ObservedState) {
    let (preempted, last, placed) = run_rounds(fleet, observed, 100);
    let twice: Vec<_> = preempted.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{name}: preempted more than once: {twice:?}"
    );
    assert!(
        last.is_none_or(|r| r < 80),
        "{name}: still preempting in round {last:?}"
    );
    assert!(placed > 0, "{name}: nothing was ever placed");
}

#[test]
fn example_fleet_settles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/fleet");
    let loaded = load_fleet(&read_fleet_dir(&root).unwrap());
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    let observed = derive_inventory(&loaded.fleet);
    assert_settles("examples/fleet", &loaded.fleet, observed);
}

#[test]
fn contended_generated_fleet_settles() {
    for seed in 1..=6 {
        let generated = generate(
            FleetSize {
                nodes: 24,
                gpus_per_node: 8,
                pending: 160,
                running: 90,
                leaves: 8,
                seed,
            },
            t0(),
        );
        let files: Vec<SourceFile> = generated
            .files
            .iter()
            .map(|(p, t)| SourceFile::new(p.as_str(), t.as_bytes().to_vec()))
            .collect();
        let loaded = load_fleet(&files);
        assert!(loaded.is_valid());
        let (preempted, _, _) = run_rounds(&loaded.fleet, generated.observed.clone(), 1);
        assert!(!preempted.is_empty(), "seed {seed}: no contention to test");
        assert_settles(&format!("seed {seed}"), &loaded.fleet, generated.observed);
    }
}
