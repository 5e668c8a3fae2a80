//! An executor whose fleet is unreachable fails the iteration transiently,
//! nothing is recorded as done, and the next iteration carries the plan out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::sync::Arc;

use exec::{
    ActionContext, Capabilities, Event, ExecError, Executor, JobView, Observation, Outcome,
};
use gitfleet_reconcile::state::{Phase, Store};
use gitfleet_reconcile::{ActionResult, FleetSource, Reconciler};
use model::observed::{ObservedNode, Timestamp};
use model::plan::Action;
use model::spec::Fleet;

/// A fleet whose first observation and first action fail as unreachable.
#[derive(Debug)]
struct Flaky {
    observe_down: u32,
    execute_down: u32,
    nodes: Vec<ObservedNode>,
    runs_jobs: bool,
}

impl Flaky {
    fn check(down: &mut u32, what: &str) -> Result<(), ExecError> {
        if *down > 0 {
            *down -= 1;
            return Err(ExecError::Transient {
                what: what.to_string(),
                message: "connection refused".to_string(),
                retry_after: Some(std::time::Duration::from_secs(3)),
            });
        }
        Ok(())
    }
}

impl Executor for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scales_pools: false,
            grace_periods: false,
            exit_codes: false,
            runs_jobs: self.runs_jobs,
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
        Self::check(&mut self.observe_down, "observe")?;
        Ok(Observation {
            events: Vec::<Event>::new(),
            nodes: self.nodes.clone(),
        })
    }

    fn already_done(&self, _action: &Action) -> bool {
        false
    }

    async fn execute(
        &mut self,
        action: &Action,
        _ctx: &ActionContext<'_>,
        _now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        Self::check(&mut self.execute_down, "execute")?;
        assert!(matches!(action, Action::Place { .. }), "{action:?}");
        Ok(Outcome::Done)
    }
}

const FLEET: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100, count: 8}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec:\n  quota: [{model: H100, guaranteed: 8}]\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  queue: q\n  gpusPerReplica: 2\n  command: [\"true\"]\n";

/// FLEET in a directory, a state beside it, and a reconciler over a fake
/// fleet of one pool node whose first `down` observations and actions fail.
fn setup(down: u32, runs_jobs: bool) -> (tempfile::TempDir, Arc<Store>, Reconciler<Flaky>) {
    let dir = tempfile::tempdir().unwrap();
    let fleet_dir = dir.path().join("fleet");
    std::fs::create_dir_all(&fleet_dir).unwrap();
    std::fs::write(fleet_dir.join("fleet.yaml"), FLEET).unwrap();
    let store = Arc::new(Store::open(&dir.path().join("state")).unwrap());
    let pool = serde_json::from_str(
        r#"{"gpu": {"model": "H100", "count": 8}, "size": {"min": 1, "max": 1}}"#,
    )
    .unwrap();
    let flaky = Flaky {
        observe_down: down,
        execute_down: down,
        nodes: vec![model::observed::pool_node("p", &pool, 0)],
        runs_jobs,
    };
    let source = FleetSource::Dir { path: fleet_dir };
    let reconciler = Reconciler::new(source, store.clone(), flaky);
    (dir, store, reconciler)
}

#[test]
fn an_unreachable_fleet_is_retried_and_nothing_is_done_twice() {
    let (_dir, store, mut reconciler) = setup(1, true);
    let now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();

    // Observing fails: the iteration fails as a whole, transiently.
    let err = futures_executor::block_on(reconciler.iterate(now)).unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(err.retry_after(), Some(std::time::Duration::from_secs(3)));

    // Observing works, carrying the placement out fails transiently: the
    // job stays pending and the iteration says so.
    let iteration = futures_executor::block_on(reconciler.iterate(now)).unwrap();
    assert_eq!(iteration.executed.len(), 1);
    assert!(iteration.executed[0].transient);
    assert!(matches!(
        iteration.executed[0].result,
        ActionResult::Failed(_)
    ));
    let jobs = store.jobs().unwrap();
    assert!(
        jobs.get("j").is_none_or(|r| r.phase != Phase::Running),
        "{jobs:?}"
    );

    // The fleet is back: the job is placed once.
    let iteration = futures_executor::block_on(reconciler.iterate(now)).unwrap();
    assert!(!iteration.executed[0].transient);
    assert_eq!(store.jobs().unwrap()["j"].phase, Phase::Running);
    let again = futures_executor::block_on(reconciler.iterate(now)).unwrap();
    assert!(again.executed.is_empty(), "{:?}", again.executed);
}

#[test]
fn an_executor_that_runs_no_jobs_gets_a_plan_without_them() {
    // Slurm's accounting mode: gitfleet owns policy, Slurm runs the jobs.
    let (_dir, store, mut reconciler) = setup(0, false);
    let now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    for _ in 0..2 {
        let iteration = futures_executor::block_on(reconciler.iterate(now)).unwrap();
        let plan = iteration.plan.as_ref().unwrap();
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);
        assert!(plan.pending.is_empty(), "{:?}", plan.pending);
        assert!(iteration.executed.is_empty(), "{:?}", iteration.executed);
    }
    assert!(store.jobs().unwrap().is_empty());
}
