//! Intents and outcomes are recorded in batches (a plan's intents in one
//! transaction, outcomes many actions a transaction): a crash between the
//! intents and the first action, or in the middle of the outcome batches,
//! neither loses nor repeats an action. A crash is a panic in the executor
//! (nothing more is committed) and the state reopened by a new reconciler.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use exec::{
    ActionContext, Capabilities, Event, ExecError, Executor, JobView, KeyValue, Observation,
    Outcome,
};
use futures_executor::block_on;
use gitfleet_reconcile::state::{Phase, Store};
use gitfleet_reconcile::{ActionResult, FleetSource, Reconciler};
use model::observed::{ObservedNode, Timestamp};
use model::plan::Action;
use model::spec::Fleet;

const JOBS: usize = 20;

/// The fleet outside gitfleet: it outlives a crash of the reconciler.
#[derive(Debug, Default)]
struct Outside {
    /// Jobs started, and how many times each (idempotent: at most once).
    started: BTreeMap<String, u32>,
    /// Every `execute`, in order.
    calls: Vec<String>,
}

/// Places jobs in [`Outside`], idempotently by job name (as the kube
/// executor's deterministic Pod names do), and keeps a value per started
/// job in its [`KeyValue`] (the state's executor table). `crash` panics at
/// the n-th call: before the start (`Before`) or after it (`After`).
#[derive(Debug)]
struct Ledger {
    outside: Arc<Mutex<Outside>>,
    kv: Arc<dyn KeyValue>,
    nodes: Vec<ObservedNode>,
    crash: Option<(usize, Crash)>,
    calls: usize,
    /// Dies (no unwinding, nothing closed: as a kill -9) when asked to
    /// change the fleet's configuration, after the iteration has planned
    /// and before it records its intents.
    abort_in_config: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Crash {
    Before,
    After,
}

impl Executor for Ledger {
    fn name(&self) -> &'static str {
        "ledger"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scales_pools: false,
            grace_periods: false,
            exit_codes: false,
            runs_jobs: true,
        }
    }

    async fn set_fleet(&mut self, _fleet: &Fleet) -> Result<(), ExecError> {
        Ok(())
    }

    async fn observe(
        &mut self,
        _now: Timestamp,
        _running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        Ok(Observation {
            events: Vec::<Event>::new(),
            nodes: self.nodes.clone(),
        })
    }

    fn already_done(&self, _action: &Action) -> bool {
        false
    }

    async fn apply_config(&mut self) -> Result<Vec<String>, ExecError> {
        if self.abort_in_config {
            std::process::abort();
        }
        Ok(Vec::new())
    }

    async fn execute(
        &mut self,
        action: &Action,
        _ctx: &ActionContext<'_>,
        _now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        let Action::Place { job, .. } = action else {
            panic!("only places expected: {action:?}");
        };
        self.calls += 1;
        let crash = self.crash.filter(|(at, _)| *at == self.calls).map(|c| c.1);
        assert!(
            crash != Some(Crash::Before),
            "crash before action {}",
            self.calls
        );
        {
            let mut outside = self.outside.lock().unwrap();
            outside.calls.push(job.clone());
            outside.started.entry(job.clone()).or_insert(1);
        }
        self.kv
            .write(&[(format!("ledger/{job}"), Some("started".to_string()))])?;
        assert!(
            crash != Some(Crash::After),
            "crash after action {}",
            self.calls
        );
        Ok(Outcome::Done)
    }
}

fn fleet_yaml() -> String {
    let mut yaml = format!(
        "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {{name: p}}\nspec:\n  gpu: {{model: H100, count: 8}}\n  size: {{min: {JOBS}, max: {JOBS}}}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: q}}\nspec:\n  quota: [{{model: H100, guaranteed: {}}}]\n",
        JOBS * 8
    );
    for i in 0..JOBS {
        yaml += &format!(
            "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: j-{i:02}}}\nspec:\n  queue: q\n  gpusPerReplica: 8\n  command: [\"true\"]\n"
        );
    }
    yaml
}

/// A fleet directory and a state directory.
struct Setup {
    dir: std::path::PathBuf,
    _temp: Option<tempfile::TempDir>,
    outside: Arc<Mutex<Outside>>,
}

impl Setup {
    fn new() -> Setup {
        let temp = tempfile::tempdir().unwrap();
        let fleet = temp.path().join("fleet");
        std::fs::create_dir_all(&fleet).unwrap();
        std::fs::write(fleet.join("fleet.yaml"), fleet_yaml()).unwrap();
        Setup {
            dir: temp.path().to_path_buf(),
            _temp: Some(temp),
            outside: Arc::default(),
        }
    }

    /// The setup in `dir`, made by another process's [`Setup::new`].
    fn at(dir: &std::path::Path) -> Setup {
        Setup {
            dir: dir.to_path_buf(),
            _temp: None,
            outside: Arc::default(),
        }
    }

    /// A reconciler on the state (opened afresh, as after a restart) that
    /// records at most `batch` outcomes a transaction.
    fn reconciler(&self, crash: Option<(usize, Crash)>, batch: usize) -> Reconciler<Ledger> {
        self.reconciler_dying(crash, batch, false)
    }

    /// [`Setup::reconciler`], whose executor aborts the process in
    /// `apply_config` when `abort_in_config`.
    fn reconciler_dying(
        &self,
        crash: Option<(usize, Crash)>,
        batch: usize,
        abort_in_config: bool,
    ) -> Reconciler<Ledger> {
        let store = Arc::new(Store::open(&self.dir.join("state")).unwrap());
        let pool = serde_json::from_str(
            r#"{"gpu": {"model": "H100", "count": 8}, "size": {"min": 1, "max": 1}}"#,
        )
        .unwrap();
        let ledger = Ledger {
            outside: self.outside.clone(),
            kv: store.clone(),
            nodes: (0..JOBS)
                .map(|i| model::observed::pool_node("p", &pool, i as u32))
                .collect(),
            crash,
            calls: 0,
            abort_in_config,
        };
        let source = FleetSource::Dir {
            path: self.dir.join("fleet"),
        };
        Reconciler::new(source, store, ledger).with_outcome_batch(batch)
    }

    /// The state as a crash left it: (intents left, jobs recorded running,
    /// jobs with an executor value, place lines in the audit log).
    fn state(&self) -> (usize, Vec<String>, Vec<String>, usize) {
        let store = Store::open(&self.dir.join("state")).unwrap();
        let intents = store.pending_intents().unwrap().len();
        let running: Vec<String> = store
            .jobs()
            .unwrap()
            .into_values()
            .filter(|r| r.phase == Phase::Running)
            .map(|r| r.job)
            .collect();
        let values: Vec<String> = store
            .entries("ledger/")
            .unwrap()
            .into_keys()
            .map(|k| k.trim_start_matches("ledger/").to_string())
            .collect();
        let places = store
            .audit(0)
            .unwrap()
            .iter()
            .filter(|(_, e)| e.what == "place")
            .count();
        (intents, running, values, places)
    }

    /// After recovery: every job placed once, recorded once, nothing left.
    fn assert_each_job_placed_once(&self) {
        let (intents, running, values, places) = self.state();
        assert_eq!(intents, 0, "no intent left");
        assert_eq!(running.len(), JOBS, "every job runs: {running:?}");
        assert_eq!(values.len(), JOBS, "every executor value kept");
        assert_eq!(places, JOBS, "one place line per job");
        let outside = self.outside.lock().unwrap();
        assert_eq!(outside.started.len(), JOBS, "every job started");
        assert!(outside.started.values().all(|n| *n == 1));
        let store = Store::open(&self.dir.join("state")).unwrap();
        for job in outside.started.keys() {
            let lines = store
                .audit(0)
                .unwrap()
                .into_iter()
                .filter(|(_, e)| e.what == "place" && e.subject == *job)
                .count();
            assert_eq!(lines, 1, "{job} recorded as placed once");
        }
    }

    /// How many times the executor was asked to carry out each job's place.
    fn calls(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for job in &self.outside.lock().unwrap().calls {
            *out.entry(job.clone()).or_insert(0) += 1;
        }
        out
    }
}

fn t(minute: i64) -> Timestamp {
    let start: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    start + chrono::Duration::minutes(minute)
}

/// Runs an iteration that crashes (panics in the executor).
fn crash(mut reconciler: Reconciler<Ledger>, now: Timestamp) {
    let crashed = std::panic::catch_unwind(AssertUnwindSafe(|| {
        block_on(reconciler.iterate(now)).map(|_| ())
    }));
    assert!(crashed.is_err(), "the iteration crashed");
    drop(reconciler);
}

/// Runs the iterations after the crash: recovery, then a plan with nothing
/// left to do.
fn recover(setup: &Setup, left: usize) {
    let mut reconciler = setup.reconciler(None, 6);
    let iteration = block_on(reconciler.iterate(t(1))).unwrap();
    assert_eq!(iteration.recovered, left, "the intents left carried out");
    assert!(
        iteration.executed.is_empty(),
        "nothing else to do: {:?}",
        iteration.executed
    );
    let again = block_on(reconciler.iterate(t(2))).unwrap();
    assert_eq!(again.recovered, 0);
    assert!(again.executed.is_empty(), "{:?}", again.executed);
}

#[test]
fn without_a_crash_outcomes_are_recorded_in_batches_and_each_action_once() {
    let setup = Setup::new();
    let mut reconciler = setup.reconciler(None, 6);
    let iteration = block_on(reconciler.iterate(t(0))).unwrap();
    assert_eq!(iteration.executed.len(), JOBS);
    assert!(
        iteration
            .executed
            .iter()
            .all(|e| e.result == ActionResult::Applied(Outcome::Done))
    );
    drop(reconciler);
    setup.assert_each_job_placed_once();
    assert!(setup.calls().values().all(|n| *n == 1));
}

#[test]
fn a_crash_between_the_intents_and_the_first_action_loses_and_repeats_nothing() {
    let setup = Setup::new();
    crash(setup.reconciler(Some((1, Crash::Before)), 6), t(0));

    // Every action intended in one transaction, none carried out or recorded.
    let (intents, running, values, places) = setup.state();
    assert_eq!(intents, JOBS, "the whole plan is intended");
    assert!(running.is_empty() && values.is_empty() && places == 0);
    assert!(setup.outside.lock().unwrap().started.is_empty());

    recover(&setup, JOBS);
    setup.assert_each_job_placed_once();
    assert!(
        setup.calls().values().all(|n| *n == 1),
        "each carried out once: {:?}",
        setup.calls()
    );
}

#[test]
fn a_crash_in_the_middle_of_the_outcome_batches_loses_and_repeats_nothing() {
    let setup = Setup::new();
    // Outcomes 1–6 and 7–12 are committed; 13 and 14 are carried out and
    // waiting for their batch; 15 is carried out and then the process dies.
    crash(setup.reconciler(Some((15, Crash::After)), 6), t(0));

    let (intents, running, values, places) = setup.state();
    assert_eq!(intents, JOBS - 12, "intents of the unrecorded actions stay");
    assert_eq!(running.len(), 12, "two batches of outcomes recorded");
    assert_eq!(places, 12);
    assert_eq!(
        values, running,
        "the executor's values landed with their outcomes, and only they"
    );
    let calls = setup.outside.lock().unwrap().calls.clone();
    assert_eq!(calls.len(), 15);
    let unrecorded: Vec<String> = calls[12..].to_vec();
    assert!(unrecorded.iter().all(|job| !running.contains(job)));

    recover(&setup, JOBS - 12);
    setup.assert_each_job_placed_once();
    // Recorded actions are never carried out again; the three carried out
    // but not recorded are asked once more (a no-op for an idempotent
    // executor); the rest once.
    for (job, n) in setup.calls() {
        let expected = if unrecorded.contains(&job) { 2 } else { 1 };
        assert_eq!(n, expected, "{job}");
    }
}

#[test]
fn an_iteration_and_a_prepare_leave_nothing_deferred() {
    let setup = Setup::new();
    let mut reconciler = setup.reconciler(None, 6);
    let prepared = block_on(reconciler.prepare(t(0))).unwrap();
    assert!(
        !reconciler.store().has_deferred(),
        "apply may wait for a person: what preparing recorded is on disk"
    );
    block_on(reconciler.apply(prepared)).unwrap();
    assert!(!reconciler.store().has_deferred());
    block_on(reconciler.iterate(t(1))).unwrap();
    assert!(
        !reconciler.store().has_deferred(),
        "an iteration ends on disk"
    );
}

/// Set in a child process of this test binary: the [`Setup`] directory
/// whose reconciler dies after planning, before recording its intents.
const CRASH_DIR: &str = "GITFLEET_TEST_CRASH_DIR";

/// Not a test of its own: run by
/// [`a_crash_after_planning_loses_only_deferred_records`] in a child
/// process (no unwinding: the store is not closed, as after a kill -9).
#[test]
fn crash_child_after_planning() {
    let Some(dir) = std::env::var_os(CRASH_DIR) else {
        return;
    };
    let setup = Setup::at(std::path::Path::new(&dir));
    let mut reconciler = setup.reconciler_dying(None, 6, true);
    let _ = block_on(reconciler.iterate(t(0)));
    unreachable!("the executor aborts the process");
}

#[test]
fn a_crash_after_planning_loses_only_deferred_records() {
    let setup = Setup::new();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child_after_planning", "--nocapture"])
        .env(CRASH_DIR, &setup.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child died");

    // The loading mark (durable) survived; what preparing recorded
    // (deferred: the pending jobs, the mark's clearing) did not.
    let store = Store::open(&setup.dir.join("state")).unwrap();
    assert!(store.pending_intents().unwrap().is_empty(), "no intent yet");
    assert!(store.jobs().unwrap().is_empty(), "{:?}", store.jobs());
    let loading = store.revisions().unwrap().loading.expect("loading mark");
    assert_eq!(loading.interrupted, 0);
    drop(store);

    // The next start plans again and carries every action out once.
    let mut reconciler = setup.reconciler(None, 6);
    let iteration = block_on(reconciler.iterate(t(1))).unwrap();
    assert_eq!(iteration.recovered, 0);
    assert_eq!(iteration.executed.len(), JOBS);
    drop(reconciler);
    setup.assert_each_job_placed_once();
    let store = Store::open(&setup.dir.join("state")).unwrap();
    assert_eq!(store.revisions().unwrap().loading, None);
}

#[test]
fn a_crash_after_the_last_action_loses_and_repeats_nothing() {
    let setup = Setup::new();
    // Outcomes 1–18 are committed in three batches; 19 and 20 are carried
    // out and the process dies before their (last, deferred) batch.
    crash(setup.reconciler(Some((JOBS, Crash::After)), 6), t(0));

    let (intents, running, values, places) = setup.state();
    assert_eq!(intents, 2, "the last two intents stay");
    assert_eq!(running.len(), 18);
    assert_eq!(places, 18);
    assert_eq!(values, running);

    recover(&setup, 2);
    setup.assert_each_job_placed_once();
    let calls = setup.calls();
    assert_eq!(calls.values().filter(|n| **n == 2).count(), 2, "{calls:?}");
    assert!(calls.values().all(|n| *n <= 2));
}

/// The sim executor, dying (a panic: nothing more is committed) right
/// after its n-th action: its nodes are written only when the reconciler
/// asks ([`Executor::flush`]), with the outcomes they belong to.
#[derive(Debug)]
struct DyingSim {
    sim: exec::sim::SimExecutor,
    dies_after: Option<usize>,
    /// Dies without unwinding (nothing closed: as a kill -9).
    aborts: bool,
    /// Says that it acts in the store only, as the sim does (its intents
    /// and outcomes deferred); otherwise as an executor that acts outside.
    in_store: bool,
    /// Its flush fails from the action of this number on (a store that
    /// cannot take the outcomes).
    flush_fails_from: Option<usize>,
    calls: usize,
}

impl Executor for DyingSim {
    fn name(&self) -> &'static str {
        self.sim.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.sim.capabilities()
    }

    async fn set_fleet(&mut self, fleet: &Fleet) -> Result<(), ExecError> {
        self.sim.set_fleet(fleet).await
    }

    async fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        self.sim.observe(now, running).await
    }

    fn already_done(&self, action: &Action) -> bool {
        self.sim.already_done(action)
    }

    async fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        let outcome = self.sim.execute(action, ctx, now).await;
        self.calls += 1;
        if self.aborts && self.dies_after == Some(self.calls) {
            std::process::abort();
        }
        assert!(
            self.dies_after != Some(self.calls),
            "crash after action {}",
            self.calls
        );
        outcome
    }

    fn flush(&mut self) -> Result<(), ExecError> {
        if self.flush_fails_from.is_some_and(|n| self.calls >= n) {
            return Err(ExecError::Inventory("the store is full".to_string()));
        }
        self.sim.flush()
    }

    fn acts_in_store_only(&self) -> bool {
        self.in_store && self.sim.acts_in_store_only()
    }
}

fn dying_sim(setup: &Setup, dies_after: Option<usize>) -> Reconciler<DyingSim> {
    dying_sim_as(setup, dies_after, false, false, None)
}

fn dying_sim_as(
    setup: &Setup,
    dies_after: Option<usize>,
    aborts: bool,
    in_store: bool,
    flush_fails_from: Option<usize>,
) -> Reconciler<DyingSim> {
    let store = Arc::new(Store::open(&setup.dir.join("state")).unwrap());
    let sim =
        exec::sim::SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
    let executor = DyingSim {
        sim,
        dies_after,
        aborts,
        in_store,
        flush_fails_from,
        calls: 0,
    };
    let source = FleetSource::Dir {
        path: setup.dir.join("fleet"),
    };
    Reconciler::new(source, store, executor).with_outcome_batch(6)
}

/// After recovery: every job runs on the nodes its record names, no intent
/// is left, and the audit log has one `place` line per job.
fn every_job_placed_once(setup: &Setup) {
    assert_eq!(busy_nodes_match_the_records(setup), JOBS);
    let store = Store::open(&setup.dir.join("state")).unwrap();
    assert!(store.pending_intents().unwrap().is_empty());
    let places = store
        .audit(0)
        .unwrap()
        .into_iter()
        .filter(|(_, e)| e.what == "place")
        .count();
    assert_eq!(places, JOBS, "one place line per job");
}

/// The sim's stored nodes that run something (not idle), and the nodes
/// the job records say run something: the same.
fn busy_nodes_match_the_records(setup: &Setup) -> usize {
    let store = Store::open(&setup.dir.join("state")).unwrap();
    let stored: Vec<String> = store
        .entries("sim/node/")
        .unwrap()
        .into_values()
        .map(|text| serde_json::from_str::<serde_json::Value>(&text).unwrap())
        .filter(|node| node["node"]["idleSince"].is_null())
        .map(|node| node["node"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut recorded: Vec<String> = store
        .jobs()
        .unwrap()
        .into_values()
        .filter(|r| r.phase == Phase::Running)
        .flat_map(|r| r.placement.into_iter().map(|p| p.node))
        .collect();
    recorded.sort();
    assert_eq!(stored, recorded, "the sim's nodes as the outcomes recorded");
    stored.len()
}

#[test]
fn a_failed_in_store_iteration_leaves_the_intents_of_its_unrecorded_actions() {
    // Acting in the store only, the sim's intents are not written up
    // front. Its outcomes cannot be recorded from the second batch on
    // (actions 7 to 12; 13 to 20 never carried out): the intents of those
    // 14 actions are left, as an executor acting outside leaves them, and
    // the next iteration carries them out.
    let setup = Setup::new();
    let mut reconciler = dying_sim_as(&setup, None, false, true, Some(9));
    assert!(
        block_on(reconciler.iterate(t(0))).is_err(),
        "the iteration failed"
    );
    drop(reconciler);
    assert_eq!(busy_nodes_match_the_records(&setup), 6);
    let store = Store::open(&setup.dir.join("state")).unwrap();
    assert_eq!(store.pending_intents().unwrap().len(), JOBS - 6);
    drop(store);

    let mut reconciler = dying_sim_as(&setup, None, false, true, None);
    let iteration = block_on(reconciler.iterate(t(1))).unwrap();
    assert_eq!(iteration.recovered, JOBS - 6);
    assert!(iteration.executed.is_empty(), "{:?}", iteration.executed);
    drop(reconciler);
    every_job_placed_once(&setup);
}

#[test]
fn the_sims_nodes_land_with_their_outcomes_whenever_it_dies() {
    // After the first action, in the middle of a batch, at a batch's end,
    // after the last action.
    for dies_after in [1, 9, 12, JOBS] {
        let setup = Setup::new();
        let mut reconciler = dying_sim(&setup, Some(dies_after));
        let crashed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            block_on(reconciler.iterate(t(0))).map(|_| ())
        }));
        assert!(crashed.is_err(), "the iteration crashed");
        drop(reconciler);
        let recorded = (dies_after - 1) / 6 * 6;
        assert_eq!(
            busy_nodes_match_the_records(&setup),
            recorded,
            "dies after {dies_after}"
        );

        let mut reconciler = dying_sim(&setup, None);
        let iteration = block_on(reconciler.iterate(t(1))).unwrap();
        assert_eq!(iteration.recovered, JOBS - recorded);
        assert!(iteration.executed.is_empty(), "{:?}", iteration.executed);
        drop(reconciler);
        every_job_placed_once(&setup);
    }
}

/// Set in a child process of this test binary: the [`Setup`] directory
/// whose sim dies (abort) after the action given by [`SIM_DIES_AFTER`].
const SIM_CRASH_DIR: &str = "GITFLEET_TEST_SIM_CRASH_DIR";
const SIM_DIES_AFTER: &str = "GITFLEET_TEST_SIM_DIES_AFTER";
/// Set (to anything) in that child process: its sim acts in the store only.
const SIM_IN_STORE: &str = "GITFLEET_TEST_SIM_IN_STORE";

/// Not a test of its own: run by
/// [`a_killed_sim_iteration_leaves_a_state_as_before_or_consistent`] in a
/// child process.
#[test]
fn sim_crash_child() {
    let Some(dir) = std::env::var_os(SIM_CRASH_DIR) else {
        return;
    };
    let dies_after: usize = std::env::var(SIM_DIES_AFTER).unwrap().parse().unwrap();
    let setup = Setup::at(std::path::Path::new(&dir));
    let in_store = std::env::var_os(SIM_IN_STORE).is_some();
    let mut reconciler = dying_sim_as(&setup, Some(dies_after), true, in_store, None);
    let _ = block_on(reconciler.iterate(t(0)));
    unreachable!("the executor aborts the process");
}

#[test]
fn a_killed_sim_iteration_leaves_a_state_as_before_or_consistent() {
    // The sim acts in the store only: its intents and outcome batches are
    // deferred, and a kill -9 before the iteration's end loses them with
    // the sim's nodes, as if the plan had not been carried out. Said to
    // act outside, its intents are durable and every action is recorded
    // or intended.
    let booted = std::path::Path::new("/proc/sys/kernel/random/boot_id").exists();
    for (dies_after, in_store) in [1, 9, JOBS]
        .into_iter()
        .flat_map(|n| [(n, false), (n, true)])
    {
        let setup = Setup::new();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args(["--exact", "sim_crash_child", "--nocapture"])
            .env(SIM_CRASH_DIR, &setup.dir)
            .env(SIM_DIES_AFTER, dies_after.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if in_store {
            child.env(SIM_IN_STORE, "1");
        }
        assert!(!child.status().unwrap().success(), "the child died");
        // Acting in the store only, it died before the new state's first
        // synced commit: the state is still under its temporary name
        // (where the system tells a boot id), and this boot goes on with
        // it, the loading mark (written, not synced) kept, so the crash
        // counts against the revision. Otherwise its durable intents were
        // the first synced commit.
        let state = setup.dir.join("state");
        let fresh = booted && in_store;
        assert_eq!(state.join("state.redb").exists(), !fresh);
        let store = Store::open(&state).unwrap();
        assert_eq!(store.is_fresh(), fresh);
        if in_store {
            let loading = store.revisions().unwrap().loading;
            assert_eq!(loading.unwrap().interrupted, 0);
        }
        drop(store);
        let recorded = busy_nodes_match_the_records(&setup);
        let store = Store::open(&state).unwrap();
        let left = store.pending_intents().unwrap().len();
        if in_store {
            assert_eq!(left + recorded, 0, "as before the plan");
        } else {
            assert_eq!(left + recorded, JOBS, "every action recorded or intended");
        }
        drop(store);

        let mut reconciler = dying_sim(&setup, None);
        let iteration = block_on(reconciler.iterate(t(1))).unwrap();
        assert_eq!(
            iteration.recovered + iteration.executed.len(),
            JOBS - recorded
        );
        drop(reconciler);
        every_job_placed_once(&setup);
    }
}
