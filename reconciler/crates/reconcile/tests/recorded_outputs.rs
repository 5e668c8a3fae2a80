//! What the loop writes after an iteration (`run::record`) when nothing
//! changed is what it writes after any other: on a small fleet run by the
//! sim executor, iterations with and without changes (re-used plans, a
//! commit, a job ending) leave `dashboard.json`, `status.json` and
//! `observed.json` byte for byte as a fresh, full record of the same
//! iteration writes them (the status's duration aside), the served view and
//! the fleet's gauges the same, and their times those of the iteration.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use exec::sim::SimExecutor;
use futures_executor::block_on;
use gitfleet_reconcile::run::{Shared, record};
use gitfleet_reconcile::state::Store;
use gitfleet_reconcile::{FleetSource, Iteration, Reconciler};
use model::observed::Timestamp;
use support::{HEADER, git};

const FLEET: &str = "kind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100, count: 8}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec:\n  quota: [{model: H100, guaranteed: 8}]\n";

const FILES: [&str; 3] = ["dashboard.json", "status.json", "observed.json"];

/// A job of `gpus` GPUs with a time limit, running `sim` minutes in the sim.
fn job(name: &str, gpus: u32, limit: &str, sim: u32) -> String {
    format!(
        "{HEADER}kind: Job\nmetadata:\n  name: {name}\n  annotations: {{gitfleet/sim-duration: {sim}m}}\nspec:\n  queue: q\n  gpusPerReplica: {gpus}\n  timeLimit: {limit}\n  command: [train]\n"
    )
}

fn commit(repo: &Path, jobs: &[String]) {
    let mut docs = vec![format!("{HEADER}{FLEET}")];
    docs.extend(jobs.iter().cloned());
    std::fs::write(repo.join("fleet.yaml"), docs.join("---\n")).unwrap();
    git(&["add", "-A"], repo);
    git(&["commit", "-q", "-m", "step"], repo);
}

/// `text` without its `duration_ms` line (the wall time of a record).
fn timeless_duration(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains("\"duration_ms\""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines of the fleet's gauges (what the state sets, not what adds up
/// over iterations).
fn gauges(shared: &Shared) -> String {
    const STATE: [&str; 8] = [
        "gitfleet_jobs",
        "gitfleet_gpus",
        "gitfleet_queue_",
        "gitfleet_pool_",
        "gitfleet_pending_jobs",
        "gitfleet_gpu_",
        "gitfleet_last_reconcile_timestamp_seconds",
        "gitfleet_applied_revision_info",
    ];
    shared
        .metrics
        .render()
        .lines()
        .filter(|l| STATE.iter().any(|s| l.starts_with(s)))
        .collect::<Vec<_>>()
        .join("\n")
}

struct Loop {
    reconciler: Reconciler<SimExecutor>,
    shared: Shared,
    dir: std::path::PathBuf,
    fresh: std::path::PathBuf,
    /// Plans said to take 50 ms: their expected starts (20 plans) are
    /// computed off the loop.
    slow: bool,
}

impl Loop {
    /// One iteration at `now`, recorded by the loop's `Shared` and by a new
    /// one; checks that both wrote and show the same.
    fn iterate(&mut self, now: Timestamp) -> Iteration {
        // The last expected starts computed first (they show from this
        // iteration on, when it re-uses their plan).
        let waited = Instant::now();
        while self.shared.starts.computing() {
            assert!(
                waited.elapsed().as_secs() < 60,
                "expected starts never computed"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let started = Instant::now();
        let mut iteration = block_on(self.reconciler.iterate(now)).unwrap();
        if self.slow {
            iteration.plan_seconds = iteration.plan_seconds.map(|_| 0.05);
        }
        let status = record(
            &self.reconciler,
            &iteration,
            started,
            &self.shared,
            &self.dir,
        )
        .unwrap();
        let fresh = Shared::default();
        let full = record(&self.reconciler, &iteration, started, &fresh, &self.fresh).unwrap();
        self.shared.recorded.flush();
        fresh.recorded.flush();
        for file in FILES {
            let a = std::fs::read_to_string(self.dir.join(file)).unwrap();
            let b = std::fs::read_to_string(self.fresh.join(file)).unwrap();
            if file == "status.json" {
                assert_eq!(
                    timeless_duration(&a),
                    timeless_duration(&b),
                    "{now}: {file}"
                );
            } else {
                assert_eq!(a, b, "{now}: {file}");
            }
        }
        let time = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        // The status, view and observed state are of this iteration.
        assert_eq!(status.time, now);
        assert_eq!(status.time, full.time);
        assert_eq!(status.job_list, full.job_list);
        assert_eq!(status.jobs, full.jobs);
        assert_eq!(self.shared.status.lock().unwrap().as_ref(), Some(&status));
        let view = self.shared.current_view().unwrap();
        assert_eq!(view.time, time);
        assert_eq!(*view, *fresh.current_view().unwrap(), "{now}: the view");
        let observed: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("observed.json")).unwrap())
                .unwrap();
        assert_eq!(observed["time"], time.as_str());
        let on_disk: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("status.json")).unwrap())
                .unwrap();
        assert_eq!(on_disk["time"], time.as_str());
        assert_eq!(
            on_disk["last_iteration"]["duration_ms"],
            serde_json::json!(status.last_iteration.duration_ms)
        );
        assert_eq!(gauges(&self.shared), gauges(&fresh), "{now}: the gauges");
        iteration
    }
}

#[test]
fn unchanged_iterations_write_what_a_full_record_writes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    // `long` holds the node for 20 minutes of the sim; `wait` waits for it.
    let mut jobs = vec![job("long", 8, "1h", 20), job("wait", 8, "2h", 600)];
    commit(&repo, &jobs);
    let store = Arc::new(Store::open(&dir.path().join("state")).unwrap());
    let sim = SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
    let mut lp = Loop {
        reconciler: Reconciler::new(FleetSource::detect(&repo, None), store, sim),
        shared: Shared::default(),
        dir: dir.path().join("loop"),
        fresh: dir.path().join("fresh"),
        slow: false,
    };
    std::fs::create_dir(&lp.dir).unwrap();
    std::fs::create_dir(&lp.fresh).unwrap();
    let start: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    let mut now = start;
    lp.iterate(now);
    assert_eq!(lp.shared.recorded.times_again(), 0);

    // Nothing changes: iterations 30 s apart soon re-use the plan, and
    // then their outputs are the last ones with new times.
    let mut again = 0;
    for _ in 0..6 {
        now += chrono::Duration::seconds(30);
        let iteration = lp.iterate(now);
        if iteration.reused {
            again += 1;
        }
    }
    assert!(again >= 3, "the plan re-used: {again}");
    assert!(
        lp.shared.recorded.times_again() >= again,
        "recorded from the last outputs: {} of {again} re-used plans",
        lp.shared.recorded.times_again()
    );
    let before = lp.shared.recorded.times_again();

    // A commit: everything built again (the waiting job's limit shows in
    // the status's pending reason or the view's pending line).
    jobs[1] = job("wait", 8, "3h", 600);
    commit(&repo, &jobs);
    now += chrono::Duration::seconds(30);
    let changed = lp.iterate(now);
    assert!(!changed.reused);
    assert_eq!(lp.shared.recorded.times_again(), before, "a commit");
    for _ in 0..4 {
        now += chrono::Duration::seconds(30);
        lp.iterate(now);
    }
    assert!(lp.shared.recorded.times_again() > before);

    // `long` ends in the sim (20 minutes): `wait` is placed; unchanged
    // again afterwards.
    let ended = start + chrono::Duration::minutes(21);
    let mut placed = false;
    now = ended;
    for _ in 0..6 {
        let iteration = lp.iterate(now);
        placed |= iteration
            .executed
            .iter()
            .any(|e| matches!(&e.action, model::plan::Action::Place { job, .. } if job == "wait"));
        now += chrono::Duration::seconds(30);
    }
    assert!(placed, "wait placed once long ended");
    lp.shared.recorded.flush();
    let status = gitfleet_reconcile::status::Status::read(&lp.dir).unwrap();
    assert!(
        status
            .job_list
            .iter()
            .any(|l| &*l.job == "wait" && l.phase == gitfleet_reconcile::state::Phase::Running),
        "{:?}",
        status.job_list
    );
}

/// The expected starts of `view`'s pending jobs, by job.
fn shown_starts(view: &dashboard::FleetView) -> Vec<(String, bool)> {
    view.pending
        .iter()
        .map(|p| (p.job.clone(), p.expected_start.is_some()))
        .collect()
}

#[test]
fn slow_expected_starts_show_from_the_next_iteration_for_their_plan_only() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    let mut jobs = vec![job("long", 8, "1h", 600), job("wait", 8, "2h", 600)];
    commit(&repo, &jobs);
    let store = Arc::new(Store::open(&dir.path().join("state")).unwrap());
    let sim = SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
    let mut lp = Loop {
        reconciler: Reconciler::new(FleetSource::detect(&repo, None), store, sim),
        shared: Shared::default(),
        dir: dir.path().join("loop"),
        fresh: dir.path().join("fresh"),
        slow: true,
    };
    std::fs::create_dir(&lp.dir).unwrap();
    std::fs::create_dir(&lp.fresh).unwrap();
    let mut now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    let mut shown = 0;
    for round in 0..2 {
        if round == 1 {
            // A commit: the next plan's starts are computed again.
            jobs[1] = job("wait", 8, "3h", 600);
            commit(&repo, &jobs);
        }
        for _ in 0..6 {
            let iteration = lp.iterate(now);
            let view = lp.shared.current_view().unwrap();
            let starts = shown_starts(&view);
            assert!(!starts.is_empty(), "wait is pending");
            if iteration.reused {
                // The plan's forecast, computed meanwhile, is shown.
                assert!(starts.iter().all(|(_, s)| *s), "{now}: {starts:?}");
                shown += 1;
            } else {
                // A plan of its own: its forecast is being computed, none
                // shown (never the last plan's).
                assert!(starts.iter().all(|(_, s)| !*s), "{now}: {starts:?}");
            }
            now += chrono::Duration::seconds(30);
        }
    }
    assert!(shown >= 4, "forecasts shown: {shown}");
    assert!(lp.shared.starts.ready() >= 2);
}
