//! The job records the reconciler keeps in memory from one iteration to the
//! next ([`Reconciler::kept_records`]) against the store, and a reconciler
//! that keeps them against one that reads them from the store every
//! iteration ([`Reconciler::with_records_kept`]), on random histories of a
//! small fleet in a Git repository run by the sim executor: jobs added,
//! removed (cancelled), edited, given a higher priority (preemptions with a
//! grace period), time passing (jobs end, time limits), invalid commits,
//! plans prepared and dropped without being carried out, job records
//! written by someone else, a new reconciler on the same state. After every
//! step both reconcilers must have planned and done the same, their stores
//! must hold the same records, and the records kept must be those stored.
//! The one that reads its records also never re-uses a plan
//! ([`Reconciler::with_plans_reused`]); the other re-uses its last plan
//! when nothing changed (pauses of seconds make that common): they plan
//! the same but for a re-used plan's time.
//!
//! The cases come from a fixed seed, as the repository's other property
//! tests do (`GITFLEET_KEPT_CASES`, `GITFLEET_KEPT_SEED` to explore).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use exec::sim::SimExecutor;
use futures_executor::block_on;
use gitfleet_reconcile::state::{Batch, Phase, Store};
use gitfleet_reconcile::{FleetSource, Iteration, Reconciler};
use model::observed::Timestamp;
use proptest::prelude::*;
use support::{HEADER, env_u32, git};

/// A job: `class` low or high, running `minutes` in the sim (0: until its
/// time limit of 3h).
fn job(name: &str, queue: &str, gpus: u32, class: &str, minutes: u32) -> String {
    let duration = if minutes == 0 {
        String::new()
    } else {
        format!("  annotations: {{gitfleet/sim-duration: {minutes}m}}\n")
    };
    format!(
        "{HEADER}kind: Job\nmetadata:\n  name: {name}\n{duration}spec:\n  queue: {queue}\n  priorityClass: {class}\n  gpusPerReplica: {gpus}\n  timeLimit: 3h\n  command: [python, train.py]\n"
    )
}

fn fixed(limit: u32) -> String {
    [
        format!(
            "{HEADER}kind: NodePool\nmetadata: {{name: p}}\nspec:\n  gpu: {{model: H100, count: 8}}\n  size: {{min: 3, max: 3}}\n"
        ),
        format!(
            "{HEADER}kind: PriorityClass\nmetadata: {{name: low}}\nspec: {{value: 100, preemptible: true, gracePeriod: 5m, default: true}}\n"
        ),
        format!(
            "{HEADER}kind: PriorityClass\nmetadata: {{name: high}}\nspec: {{value: 500, preemptible: false}}\n"
        ),
        format!(
            "{HEADER}kind: Queue\nmetadata: {{name: org}}\nspec:\n  quota: [{{model: H100, guaranteed: 24}}]\n"
        ),
        format!(
            "{HEADER}kind: Queue\nmetadata: {{name: team-a}}\nspec:\n  parent: org\n  quota: [{{model: H100, guaranteed: 12, limit: {limit}}}]\n"
        ),
        format!(
            "{HEADER}kind: Queue\nmetadata: {{name: team-b}}\nspec:\n  parent: org\n  quota: [{{model: H100, guaranteed: 12}}]\n"
        ),
    ]
    .join("---\n")
}

/// The fleet: the queue limit and the jobs by name (queue, GPUs, class,
/// minutes).
#[derive(Debug, Clone)]
struct Files {
    limit: u32,
    jobs: BTreeMap<String, (String, u32, String, u32)>,
    /// A typo in the jobs' file (the revision is refused).
    typo: bool,
}

fn initial() -> Files {
    let mut jobs = BTreeMap::new();
    for i in 0..6 {
        let queue = ["team-a", "team-b"][i % 2];
        jobs.insert(
            format!("job-{i}"),
            (queue.to_string(), 2 + (i as u32 % 3) * 2, "low".into(), 0),
        );
    }
    Files {
        limit: 24,
        jobs,
        typo: false,
    }
}

/// A choice among however many there are (taken modulo their number).
type Index = usize;

fn pick_of(i: Index, len: usize) -> usize {
    i % len.max(1)
}

#[derive(Debug, Clone)]
enum Step {
    /// A job added: queue (0 or 1), GPUs, high priority, minutes in the sim.
    Add(u8, u32, bool, u32),
    /// A job removed from Git (cancelled when running).
    Remove(Index),
    /// A job's GPUs changed.
    Edit(Index, u32),
    /// A job given the high priority class.
    Promote(Index),
    /// The queue's limit changed.
    Limit(u32),
    /// A typo toggled.
    Typo,
    /// Time passes, no commit.
    Wait(u32),
    /// Seconds pass, no commit.
    Pause(u32),
    /// A plan prepared and dropped, not carried out.
    PrepareOnly,
    /// Someone else rewrites a job record (here: forgets a job's reason).
    Outside(Index),
    /// A new reconciler on the same state.
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..2_u8, 1..=8_u32, any::<bool>(), prop_oneof![Just(0_u32), 5..90_u32])
            .prop_map(|(q, g, h, m)| Step::Add(q, g, h, m)),
        2 => any::<usize>().prop_map(Step::Remove),
        1 => (any::<usize>(), 1..=8_u32).prop_map(|(j, g)| Step::Edit(j, g)),
        1 => any::<usize>().prop_map(Step::Promote),
        1 => (4..=24_u32).prop_map(Step::Limit),
        1 => Just(Step::Typo),
        4 => (0..120_u32).prop_map(Step::Wait),
        3 => (0..90_u32).prop_map(Step::Pause),
        1 => Just(Step::PrepareOnly),
        1 => any::<usize>().prop_map(Step::Outside),
        1 => Just(Step::Restart),
    ]
}

fn commit(repo: &Path, files: &Files) {
    std::fs::write(repo.join("fleet.yaml"), fixed(files.limit)).unwrap();
    let mut jobs: Vec<String> = files
        .jobs
        .iter()
        .map(|(name, (queue, gpus, class, minutes))| job(name, queue, *gpus, class, *minutes))
        .collect();
    if files.typo {
        jobs.push(format!(
            "{HEADER}kind: Job\nmetadata: {{name: typo}}\nspec: [\n"
        ));
    }
    std::fs::write(repo.join("jobs.yaml"), jobs.join("---\n")).unwrap();
    git(&["add", "-A"], repo);
    git(&["commit", "-q", "--allow-empty", "-m", "step"], repo);
}

/// One side of the comparison: a reconciler and its own state.
struct Side {
    store: Arc<Store>,
    reconciler: Reconciler<SimExecutor>,
    keep: bool,
}

impl Side {
    fn new(repo: &Path, state: &Path, keep: bool) -> Side {
        let store = Arc::new(Store::open(state).unwrap());
        let reconciler = Side::reconciler(repo, &store, keep);
        Side {
            store,
            reconciler,
            keep,
        }
    }

    fn reconciler(repo: &Path, store: &Arc<Store>, keep: bool) -> Reconciler<SimExecutor> {
        let sim = SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
        Reconciler::new(FleetSource::detect(repo, None), store.clone(), sim)
            .with_records_kept(keep)
            .with_plans_reused(keep)
    }
}

/// What an iteration planned and did, less its timings (and the time of
/// its plan and observed state: a re-used plan keeps its own).
fn seen(iteration: &Iteration) -> String {
    let plan = iteration.plan.as_deref().map(|p| model::plan::Plan {
        time: String::new(),
        ..p.clone()
    });
    let planned_from = model::observed::ObservedState {
        time: None,
        ..model::observed::ObservedState::clone(&iteration.planned_from)
    };
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        iteration.revision,
        iteration.refused,
        plan,
        iteration.events,
        iteration.executed,
        iteration.nodes,
        planned_from
    )
}

fn check(steps: &[Step]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    let mut files = initial();
    commit(&repo, &files);
    let mut kept = Side::new(&repo, &dir.path().join("kept"), true);
    let mut read = Side::new(&repo, &dir.path().join("read"), false);
    let mut now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    // A first iteration places the first jobs.
    let a = block_on(kept.reconciler.iterate(now)).unwrap();
    let b = block_on(read.reconciler.iterate(now)).unwrap();
    prop_assert_eq!(seen(&a), seen(&b), "the first iterations");
    let stored = kept.store.jobs().unwrap();
    prop_assert!(
        stored.values().any(|r| r.phase == Phase::Running),
        "some job runs"
    );
    prop_assert_eq!(kept.reconciler.kept_records(), Some(&stored));
    for (n, step) in steps.iter().enumerate() {
        let names: Vec<String> = files.jobs.keys().cloned().collect();
        let pick = |i: &Index| names.get(pick_of(*i, names.len())).cloned();
        let mut seconds = 60;
        match step {
            Step::Add(queue, gpus, high, sim) => {
                let class = if *high { "high" } else { "low" };
                files.jobs.insert(
                    format!("new-{n}"),
                    (
                        ["team-a", "team-b"][usize::from(*queue)].into(),
                        *gpus,
                        class.into(),
                        *sim,
                    ),
                );
            }
            Step::Remove(i) => {
                if let Some(name) = pick(i) {
                    files.jobs.remove(&name);
                }
            }
            Step::Edit(i, gpus) => {
                if let Some(name) = pick(i) {
                    files.jobs.get_mut(&name).unwrap().1 = *gpus;
                }
            }
            Step::Promote(i) => {
                if let Some(name) = pick(i) {
                    files.jobs.get_mut(&name).unwrap().2 = "high".into();
                }
            }
            Step::Limit(limit) => files.limit = *limit,
            Step::Typo => files.typo = !files.typo,
            Step::Wait(m) => seconds = 60 * *m,
            Step::Pause(s) => seconds = *s,
            Step::PrepareOnly => {
                for side in [&mut kept, &mut read] {
                    drop(block_on(side.reconciler.prepare(now)).unwrap());
                }
            }
            Step::Outside(i) => {
                let name = pick(i).unwrap_or_default();
                for side in [&kept, &read] {
                    if let Some(mut record) = side.store.jobs().unwrap().remove(&name) {
                        record.reason = None;
                        side.store
                            .commit(&Batch {
                                jobs: vec![record],
                                ..Batch::default()
                            })
                            .unwrap();
                    }
                }
                prop_assert!(
                    kept.reconciler.kept_records().is_none()
                        || !kept.store.jobs().unwrap().contains_key(&name),
                    "step {}: records written by someone else are not trusted",
                    n
                );
            }
            Step::Restart => {
                for side in [&mut kept, &mut read] {
                    side.reconciler = Side::reconciler(&repo, &side.store, side.keep);
                }
            }
        }
        if matches!(
            step,
            Step::Add(..)
                | Step::Remove(_)
                | Step::Edit(..)
                | Step::Promote(_)
                | Step::Limit(_)
                | Step::Typo
        ) {
            commit(&repo, &files);
        }
        now += chrono::Duration::seconds(i64::from(seconds));
        let a = block_on(kept.reconciler.iterate(now)).unwrap();
        let b = block_on(read.reconciler.iterate(now)).unwrap();
        prop_assert!(!b.reused);
        REUSED.fetch_add(usize::from(a.reused), std::sync::atomic::Ordering::SeqCst);
        prop_assert_eq!(
            seen(&a),
            seen(&b),
            "step {} ({:?}): the iterations",
            n,
            step
        );
        let stored = kept.store.jobs().unwrap();
        prop_assert_eq!(
            &stored,
            &read.store.jobs().unwrap(),
            "step {} ({:?}): the stores",
            n,
            step
        );
        prop_assert_eq!(
            kept.reconciler.kept_records(),
            Some(&stored),
            "step {} ({:?}): the records kept",
            n,
            step
        );
        prop_assert_eq!(read.reconciler.kept_records(), None);
        prop_assert_eq!(&*kept.reconciler.job_records().unwrap(), &stored);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: env_u32("GITFLEET_KEPT_CASES", 24),
        rng_seed: prop::test_runner::RngSeed::Fixed(env_u32("GITFLEET_KEPT_SEED", 1).into()),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn kept_records_are_those_stored(steps in prop::collection::vec(step(), 1..24)) {
        check(&steps)?;
    }
}

/// A fixed history through every kind of step, so each is certain to be
/// covered whatever the seed draws.
#[test]
fn every_kind_of_step_once() {
    let steps = [
        Step::Wait(1),
        Step::Add(0, 8, false, 30),
        Step::Add(1, 8, true, 0),
        Step::Wait(3),
        Step::Wait(10),
        Step::PrepareOnly,
        Step::Outside(2),
        Step::Promote(3),
        Step::Wait(6),
        Step::Edit(4, 1),
        Step::Limit(6),
        Step::Typo,
        Step::Wait(40),
        Step::Restart,
        Step::Typo,
        Step::Remove(0),
        Step::Remove(1),
        Step::Wait(200),
        Step::Outside(0),
        Step::Wait(1),
        Step::Pause(20),
        Step::Pause(5),
        Step::Pause(10),
        Step::Pause(20),
        Step::Pause(0),
    ];
    check(&steps).unwrap();
    assert!(
        REUSED.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "some iteration re-used its plan"
    );
}

/// Iterations that re-used their plan, in all checks so far.
static REUSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
