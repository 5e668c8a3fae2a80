//! The reconcile loop plans through one [`engine::Planner`] kept from one
//! iteration to the next (the engine's view of the observed nodes is kept
//! while they stay the same). On random generated fleets in a Git
//! repository, run by the sim executor through random one-job changes
//! (resized, reclassed, removed, added), one-queue changes (a limit) and
//! time passing (jobs end, time limits pass, pools scale so the nodes
//! change), every plan the loop makes must be, byte for byte, the plan
//! [`engine::plan`] makes from scratch on the same input (its fleet, the
//! observed state it was made from, its time and revision). A commit that
//! changes jobs in place (or none) tells the planner which jobs changed,
//! and it makes its job table from what it kept (debug builds make it anew
//! too and compare).
//!
//! The cases come from a fixed seed, as the repository's other property
//! tests do (`GITFLEET_PLANNER_CASES`, `GITFLEET_PLANNER_SEED` to explore).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

mod support;

use std::path::Path;
use std::sync::Arc;

use engine::{PlanInput, plan};
use exec::sim::SimExecutor;
use futures_executor::block_on;
use gitfleet_reconcile::prune::PrunePolicy;
use gitfleet_reconcile::state::Store;
use gitfleet_reconcile::{FleetSource, Iteration, Reconciler};
use model::observed::{ObservedState, Timestamp};
use proptest::prelude::*;
use sim::generate::{FleetSize, generate};
use support::{env_u32, git};

/// One step of a case.
#[derive(Debug, Clone)]
enum Step {
    /// Job `pick` (modulo the jobs) gets `gpus` GPUs per replica.
    Resize { pick: usize, gpus: u32 },
    /// Job `pick` gets another priority class.
    Reclass { pick: usize, class: usize },
    /// Job `pick` is removed.
    Remove { pick: usize },
    /// A new job of `gpus` GPUs in team `team` (modulo the teams).
    Add { team: usize, gpus: u32 },
    /// Queue `pick` (modulo the limited ones) gets the limit `limit`.
    Limit { pick: usize, limit: u32 },
    /// No commit: `minutes` pass.
    Wait { minutes: i64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (any::<usize>(), 1u32..=8).prop_map(|(pick, gpus)| Step::Resize { pick, gpus }),
        (any::<usize>(), 0usize..4).prop_map(|(pick, class)| Step::Reclass { pick, class }),
        any::<usize>().prop_map(|pick| Step::Remove { pick }),
        (any::<usize>(), 1u32..=8).prop_map(|(team, gpus)| Step::Add { team, gpus }),
        (any::<usize>(), 0u32..64).prop_map(|(pick, limit)| Step::Limit { pick, limit }),
        (1i64..600).prop_map(|minutes| Step::Wait { minutes }),
    ]
}

const CLASSES: [&str; 4] = ["critical", "high", "normal", "low"];

/// The documents of a multi-document YAML file (each ends with `---\n`).
fn docs(text: &str) -> Vec<String> {
    text.split_inclusive("---\n").map(str::to_string).collect()
}

/// Replaces the value after `key` on its line in `doc` by `value`.
fn set(doc: &str, key: &str, value: &str) -> String {
    let Some(at) = doc.find(key) else {
        return doc.to_string();
    };
    let start = at + key.len();
    let end = start + doc[start..].find('\n').unwrap_or(doc.len() - start);
    format!("{}{value}{}", &doc[..start], &doc[end..])
}

/// Applies `step` to the repository's files; whether anything changed.
fn apply(step: &Step, repo: &Path, added: &mut u32) -> bool {
    let jobs_file = repo.join("jobs/jobs-0000.yaml");
    let before = std::fs::read_to_string(&jobs_file).unwrap();
    let mut jobs = docs(&before);
    let queues_file = repo.join("queues.yaml");
    match step {
        Step::Resize { pick, gpus } if !jobs.is_empty() => {
            let k = pick % jobs.len();
            jobs[k] = set(&jobs[k], "gpusPerReplica: ", &gpus.to_string());
        }
        Step::Reclass { pick, class } if !jobs.is_empty() => {
            let k = pick % jobs.len();
            jobs[k] = set(&jobs[k], "priorityClass: ", CLASSES[*class]);
        }
        Step::Remove { pick } if jobs.len() > 1 => {
            jobs.remove(pick % jobs.len());
        }
        Step::Add { team, gpus } => {
            *added += 1;
            let queues = std::fs::read_to_string(&queues_file).unwrap();
            let teams: Vec<&str> = queues
                .split("name: ")
                .skip(1)
                .filter_map(|s| s.split('}').next())
                .filter(|n| n.starts_with("team-"))
                .collect();
            let queue = teams[team % teams.len()];
            jobs.push(format!(
                "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: new-{added}}}\nspec:\n  queue: {queue}\n  gpusPerReplica: {gpus}\n  timeLimit: 2h\n  command: [python, train.py]\n---\n"
            ));
        }
        Step::Limit { pick, limit } => {
            let queues = docs(&std::fs::read_to_string(&queues_file).unwrap());
            let limited: Vec<usize> = (0..queues.len())
                .filter(|k| queues[*k].contains("limit: "))
                .collect();
            if limited.is_empty() {
                return false;
            }
            let mut queues = queues;
            let was = queues.concat();
            let k = limited[pick % limited.len()];
            // At least the quota's guarantee (else the revision is refused).
            let guaranteed: u32 = queues[k]
                .split("guaranteed: ")
                .nth(1)
                .and_then(|s| s.split(',').next())
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            queues[k] = set(&queues[k], "limit: ", &format!("{}}}", guaranteed + limit));
            let now = queues.concat();
            std::fs::write(&queues_file, &now).unwrap();
            return now != was;
        }
        _ => return false,
    }
    let after = jobs.concat();
    std::fs::write(&jobs_file, &after).unwrap();
    after != before
}

/// The iteration's plan against [`engine::plan`] from scratch on its input.
fn same_as_from_scratch(
    reconciler: &Reconciler<SimExecutor>,
    done: &Iteration,
) -> Result<(), TestCaseError> {
    let observed = ObservedState {
        nodes: done.nodes.to_vec(),
        ..ObservedState::clone(&done.planned_from)
    };
    let again = plan(&PlanInput {
        fleet: reconciler.fleet().unwrap(),
        observed: &observed,
        now: done.time,
        revision: done.revision.as_ref().map(|r| r.id.as_str()),
    });
    let kept = done.plan.as_deref().unwrap();
    prop_assert_eq!(
        serde_json::to_string(&again).unwrap(),
        serde_json::to_string(kept).unwrap(),
        "the kept planner's plan is the plan from scratch"
    );
    Ok(())
}

fn check(size: FleetSize, steps: &[Step]) -> Result<(), TestCaseError> {
    let start: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    let generated = generate(size, start);
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for (path, text) in &generated.files {
        let file = repo.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text).unwrap();
    }
    git(&["init", "-q", "-b", "main"], &repo);
    git(&["add", "-A"], &repo);
    git(&["commit", "-q", "-m", "fleet"], &repo);
    let store = Arc::new(Store::open(&dir.path().join("state")).unwrap());
    // Pools scale up at once and jobs run 30 minutes in the sim.
    let sim = SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
    // Every iteration plans (none re-uses the last plan).
    // Every iteration plans (none re-uses the last plan); removing running
    // jobs is allowed (prune protection aside).
    let mut reconciler = Reconciler::new(FleetSource::detect(&repo, None), store, sim)
        .with_plans_reused(false)
        .with_prune_policy(PrunePolicy {
            allow: true,
            ..PrunePolicy::default()
        });
    let mut now = start;
    let done = block_on(reconciler.iterate(now)).unwrap();
    same_as_from_scratch(&reconciler, &done)?;
    let mut added = 0;
    for (k, step) in steps.iter().enumerate() {
        now += match step {
            Step::Wait { minutes } => chrono::Duration::minutes(*minutes),
            _ => chrono::Duration::minutes(1),
        };
        if apply(step, &repo, &mut added) {
            git(&["commit", "-q", "-am", &format!("step {k}")], &repo);
        }
        let done = block_on(reconciler.iterate(now)).unwrap();
        prop_assert!(done.refused.is_none(), "step {k} ({step:?}) was refused");
        // Jobs or a queue changed in place, or no commit: the planner is
        // told which jobs changed and makes its job table from what it kept.
        if matches!(
            step,
            Step::Resize { .. } | Step::Reclass { .. } | Step::Limit { .. } | Step::Wait { .. }
        ) {
            prop_assert!(done.phases.jobs_kept, "step {k} ({step:?}): jobs kept");
        }
        same_as_from_scratch(&reconciler, &done)?;
    }
    Ok(())
}

fn size() -> impl Strategy<Value = FleetSize> {
    (2u32..12, 1u32..30, 0u32..30, 1u32..12, any::<u64>()).prop_map(
        |(nodes, pending, running, leaves, seed)| FleetSize {
            nodes,
            gpus_per_node: 8,
            pending,
            running,
            leaves,
            seed,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: env_u32("GITFLEET_PLANNER_CASES", 12),
        rng_seed: prop::test_runner::RngSeed::Fixed(env_u32("GITFLEET_PLANNER_SEED", 1).into()),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn kept_planner_plans_as_from_scratch(
        size in size(),
        steps in prop::collection::vec(step(), 1..10),
    ) {
        check(size, &steps)?;
    }
}
