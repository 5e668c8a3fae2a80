//! Attained service recorded by the reconcile loop (issue 19 item 4): a
//! job's GPU-seconds of runs that ended are kept in its record, on disk,
//! through a preemption and a restart of the loop, and fed to the engine as
//! the observed state's `attained` map when a queue orders by least
//! attained service; a job that ends drops it. Two long jobs of one
//! `least-attained` queue on GPUs for one then swap only at tier crossings
//! (without the record, a preempted job would count from zero again and
//! the two would preempt each other every 7.5 minutes).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

mod support;

use std::path::Path;
use std::sync::Arc;

use exec::sim::SimExecutor;
use futures_executor::block_on;
use gitfleet_reconcile::state::{JobRecord, Phase, Store};
use gitfleet_reconcile::{FleetSource, Iteration, Reconciler};
use model::observed::Timestamp;
use model::plan::Action;
use support::{HEADER, git};

/// One node of 8 GPUs, one queue ordered by `ordering`, preemptible jobs
/// (grace 1m) and a non-preemptible `high` class; jobs (name, GPUs, class,
/// minutes in the sim).
fn commit(repo: &Path, ordering: &str, jobs: &[(&str, u32, &str, u32)]) {
    let mut docs = vec![
        format!(
            "{HEADER}kind: NodePool\nmetadata: {{name: p}}\nspec:\n  gpu: {{model: H100, count: 8}}\n  size: {{min: 1, max: 1}}\n"
        ),
        format!(
            "{HEADER}kind: PriorityClass\nmetadata: {{name: batch}}\nspec: {{value: 100, preemptible: true, gracePeriod: 1m, default: true}}\n"
        ),
        format!(
            "{HEADER}kind: PriorityClass\nmetadata: {{name: high}}\nspec: {{value: 500, preemptible: false}}\n"
        ),
        format!(
            "{HEADER}kind: Queue\nmetadata: {{name: q}}\nspec:\n  ordering: {ordering}\n  quota: [{{model: H100, guaranteed: 8}}]\n"
        ),
    ];
    for (name, gpus, class, minutes) in jobs {
        docs.push(format!(
            "{HEADER}kind: Job\nmetadata:\n  name: {name}\n  annotations: {{gitfleet/sim-duration: {minutes}m}}\nspec:\n  queue: q\n  priorityClass: {class}\n  gpusPerReplica: {gpus}\n  timeLimit: 24h\n  command: [python, train.py]\n"
        ));
    }
    std::fs::write(repo.join("fleet.yaml"), docs.join("---\n")).unwrap();
    git(&["add", "-A"], repo);
    git(&["commit", "-q", "--allow-empty", "-m", "step"], repo);
}

/// A test repository and state directory.
struct Setup {
    _dir: tempfile::TempDir,
    repo: std::path::PathBuf,
    state: std::path::PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    let state = dir.path().join("state");
    Setup {
        _dir: dir,
        repo,
        state,
    }
}

/// A reconciler with the sim executor on the state in `state`.
fn reconciler_of(repo: &Path, state: &Path) -> (Arc<Store>, Reconciler<SimExecutor>) {
    let store = Arc::new(Store::open(state).unwrap());
    let sim = SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
    let reconciler = Reconciler::new(FleetSource::detect(repo, None), store.clone(), sim);
    (store, reconciler)
}

fn record(store: &Store, job: &str) -> JobRecord {
    store.jobs().unwrap().remove(job).expect("recorded")
}

/// The preemptions an iteration carried out.
fn preemptions(iteration: &Iteration) -> Vec<(String, String, String)> {
    iteration
        .executed
        .iter()
        .filter_map(|e| match &e.action {
            Action::Preempt {
                job,
                for_job,
                reason,
            } => Some((job.clone(), for_job.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

const START: &str = "2026-11-21T10:00:00Z";

#[test]
fn attained_service_grows_survives_a_restart_and_a_preemption_without_thrash() {
    let s = setup();
    // Two 8-GPU jobs of 3 hours: tier 1 after 7.5 minutes, tier 2 after
    // 75 minutes, tier 3 after 12.5 hours (never reached).
    commit(
        &s.repo,
        "least-attained",
        &[("a", 8, "batch", 180), ("b", 8, "batch", 180)],
    );
    let (mut store, mut reconciler) = reconciler_of(&s.repo, &s.state);
    let mut now: Timestamp = START.parse().unwrap();
    let minute = chrono::Duration::minutes(1);
    let mut swaps: Vec<(Timestamp, String, String, String)> = Vec::new();
    let mut restarted = false;
    let mut seen_growing = Vec::new();
    // Eight hours, one iteration a minute.
    for _ in 0..8 * 60 {
        let iteration = block_on(reconciler.iterate(now)).unwrap();
        for (job, for_job, reason) in preemptions(&iteration) {
            swaps.push((now, job, for_job, reason));
        }
        let a = record(&store, "a");
        if a.phase == Phase::Running && a.attained == 0 {
            seen_growing.push(a.attained_at(now));
        }
        // What the engine was given: the recorded runs that ended.
        for (job, secs) in &iteration.planned_from.attained {
            assert_eq!(*secs, record(&store, job).attained, "{job} at {now}");
        }
        // Restart the loop (a new reconciler and executor on the same
        // state directory) once the first preemption is done.
        if !restarted && record(&store, "a").phase == Phase::Pending && !swaps.is_empty() {
            let before = record(&store, "a").attained;
            drop(reconciler);
            drop(store);
            (store, reconciler) = reconciler_of(&s.repo, &s.state);
            assert_eq!(record(&store, "a").attained, before, "kept on disk");
            restarted = true;
        }
        now += minute;
    }
    assert!(restarted);
    // Grew by 8 GPU-seconds a second while `a` first ran.
    assert!(seen_growing.len() >= 5, "{seen_growing:?}");
    assert!(
        seen_growing.windows(2).all(|w| w[1] == w[0] + 8 * 60),
        "{seen_growing:?}"
    );

    // `a` reached tier 1 (7.5 minutes × 8 GPUs) first and was preempted
    // for `b` (tier 0), then `b` reached tier 2 while `a` waited in tier 1
    // and gave the GPUs back; at tier 2 both, nobody preempts again.
    let who: Vec<(&str, &str)> = swaps
        .iter()
        .map(|(_, job, for_job, _)| (job.as_str(), for_job.as_str()))
        .collect();
    assert_eq!(who, [("a", "b"), ("b", "a")], "{swaps:#?}");
    let (first, _, _, reason) = &swaps[0];
    let start: Timestamp = START.parse().unwrap();
    // Planned the first minute past 7.5 minutes of running (placed at START).
    assert_eq!(*first, start + chrono::Duration::minutes(8), "{reason}");
    assert!(
        reason.starts_with("least attained service: b has held 0.0 GPU-hours (tier 0), a 1.0"),
        "{reason}"
    );
    // The second swap counted `a`'s first run, kept through the restart:
    // 9 minutes (to the end of its grace period) × 8 GPUs = 1.2 GPU-hours.
    let (_, _, _, reason) = &swaps[1];
    assert!(
        reason.starts_with("least attained service: a has held 1.2 GPU-hours (tier 1), b 10."),
        "{reason}"
    );

    // Both ran to the end; ended jobs keep no attained service.
    for job in ["a", "b"] {
        let r = record(&store, job);
        assert_eq!(r.phase, Phase::Succeeded, "{job}: {r:?}");
        assert_eq!(r.attained, 0, "{job}");
        assert_eq!(r.preemptions, 1, "{job}");
    }
}

#[test]
fn a_preempted_jobs_run_is_recorded_in_any_fleet_and_given_only_to_least_attained() {
    let s = setup();
    commit(&s.repo, "fifo", &[("low", 8, "batch", 600)]);
    let (store, mut reconciler) = reconciler_of(&s.repo, &s.state);
    let mut now: Timestamp = START.parse().unwrap();
    let minute = chrono::Duration::minutes(1);
    block_on(reconciler.iterate(now)).unwrap();
    assert_eq!(record(&store, "low").phase, Phase::Running);
    now += chrono::Duration::minutes(30);
    commit(
        &s.repo,
        "fifo",
        &[("low", 8, "batch", 600), ("urgent", 8, "high", 600)],
    );
    for _ in 0..5 {
        let iteration = block_on(reconciler.iterate(now)).unwrap();
        assert!(
            iteration.planned_from.attained.is_empty(),
            "a fifo fleet's observed state has no attained map"
        );
        now += minute;
    }
    let low = record(&store, "low");
    assert_eq!(low.phase, Phase::Pending);
    // Preempted 30 minutes after it started, stopped a minute later.
    assert_eq!(low.attained, 31 * 60 * 8);

    // The same records, the queue now least-attained: the engine gets it.
    commit(
        &s.repo,
        "least-attained",
        &[("low", 8, "batch", 600), ("urgent", 8, "high", 600)],
    );
    let iteration = block_on(reconciler.iterate(now)).unwrap();
    assert_eq!(
        iteration.planned_from.attained.get("low"),
        Some(&(31 * 60 * 8))
    );
    assert!(!iteration.planned_from.attained.contains_key("urgent"));
}
