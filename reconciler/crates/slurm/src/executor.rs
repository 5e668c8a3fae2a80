//! The `slurm` executor. Accounting mode: gitfleet owns the policy
//! (accounts, shares, limits, QOS), Slurm schedules. `set_fleet` computes
//! the diff between `sacctmgr show` and the fleet (cheap: three reads);
//! `apply_config` runs it, and remembers what it applied through the
//! [`KeyValue`] handle so the next diff can tell a hand edit (drift) from a
//! change in Git. Slurm owns the nodes and runs the jobs: the executor
//! reports the pools' nodes as declared (so no scaling is planned) and
//! refuses to run jobs. Scheduler mode ([`SlurmExecutor::with_scheduler`])
//! does all that and runs the fleet's jobs through [`Scheduler`].

use std::future::Future;
use std::sync::Arc;

use exec::{
    ActionContext, Capabilities, ExecError, Executor, JobView, KeyValue, Observation, Outcome,
};
use model::observed::{ObservedNode, Timestamp, derive_inventory};
use model::plan::Action;
use model::spec::Fleet;

use crate::desired::{Mapping, desired};
use crate::diff::{Diff, diff};
use crate::sacctmgr::{RunError, Runner, Sacctmgr};
use crate::scheduler::Scheduler;
use crate::state::SlurmState;

const LAST_APPLIED: &str = "slurm/last-applied";

/// The Slurm executor (accounting mode, or scheduler mode with a [`Scheduler`]).
#[derive(Debug)]
pub struct SlurmExecutor<R> {
    runner: Option<R>,
    client: Option<Sacctmgr<R>>,
    cluster: Option<String>,
    mapping: Mapping,
    store: Arc<dyn KeyValue>,
    pending: Option<(SlurmState, Diff)>,
    nodes: Vec<ObservedNode>,
    /// Boxed: scheduler mode's state is large and optional.
    scheduler: Option<Box<Scheduler<R>>>,
}

impl<R: Runner> SlurmExecutor<R> {
    /// An executor running Slurm's commands through `runner` on `cluster`
    /// (default: the only cluster of the accounting database), keeping
    /// what it applied in `store`.
    pub fn new(
        runner: R,
        cluster: Option<String>,
        mapping: Mapping,
        store: Arc<dyn KeyValue>,
    ) -> Self {
        SlurmExecutor {
            runner: Some(runner),
            client: None,
            cluster,
            mapping,
            store,
            pending: None,
            nodes: Vec::new(),
            scheduler: None,
        }
    }

    /// Scheduler mode: besides the accounts and QOS, gitfleet places the
    /// jobs and Slurm runs them ([`Scheduler`]).
    pub fn with_scheduler(mut self, scheduler: Scheduler<R>) -> Self {
        self.scheduler = Some(Box::new(scheduler));
        self
    }

    fn client(&mut self) -> Result<&Sacctmgr<R>, ExecError> {
        if self.client.is_none() {
            let Some(runner) = self.runner.take() else {
                return Err(ExecError::Inventory("slurm: no command runner".into()));
            };
            let client = Sacctmgr::connect(runner, self.cluster.as_deref(), &self.mapping.root)
                .map_err(|e| error("connect", e))?;
            self.client = Some(client);
        }
        self.client
            .as_ref()
            .ok_or_else(|| ExecError::Inventory("slurm: no client".into()))
    }

    fn last_applied(&self) -> Result<Option<SlurmState>, ExecError> {
        let entries = self.store.entries(LAST_APPLIED)?;
        match entries.get(LAST_APPLIED) {
            Some(text) => serde_json::from_str(text)
                .map(Some)
                .map_err(|e| ExecError::Inventory(format!("slurm: last applied state: {e}"))),
            None => Ok(None),
        }
    }

    /// The diff `set_fleet` found (empty before it ran).
    pub fn pending(&self) -> Option<&Diff> {
        self.pending.as_ref().map(|(_, d)| d)
    }

    /// Reads Slurm and computes the diff to `fleet`.
    pub fn compute(&mut self, fleet: &Fleet) -> Result<&Diff, ExecError> {
        let map_error = |e: crate::desired::MapError| ExecError::Action {
            action: "slurm",
            subject: "fleet".into(),
            message: e.to_string(),
        };
        let mut wanted = desired(fleet, &self.mapping).map_err(map_error)?;
        self.nodes = derive_inventory(fleet).nodes;
        if let Some(scheduler) = &mut self.scheduler {
            scheduler.set_fleet(fleet);
        }
        let last = self.last_applied()?;
        let mapping = self.mapping.clone();
        let client = self.client()?;
        let mut current = client.read().map_err(|e| error("sacctmgr show", e))?;
        if mapping.partitions {
            let (partitions, nodes) =
                crate::partitions::read(client.runner()).map_err(|e| error("partitions", e))?;
            current.partitions = partitions;
            wanted.partitions =
                crate::partitions::desired(fleet, &mapping, &nodes).map_err(map_error)?;
        }
        let d = diff(&current, &wanted, last.as_ref(), client.cluster());
        let (_, d) = self.pending.insert((wanted, d));
        Ok(d)
    }

    /// Runs the pending diff's commands and remembers the state applied.
    pub fn apply_pending(&mut self) -> Result<Vec<String>, ExecError> {
        let Some((wanted, d)) = self.pending.take() else {
            return Ok(Vec::new());
        };
        if !d.is_empty() {
            let client = self.client()?;
            client.apply(&d).map_err(|e| error("sacctmgr", e))?;
        }
        let text = serde_json::to_string(&wanted)
            .map_err(|e| ExecError::Inventory(format!("slurm: last applied state: {e}")))?;
        self.store
            .write(&[(LAST_APPLIED.to_string(), Some(text))])?;
        Ok(d.changes.iter().map(ToString::to_string).collect())
    }
}

fn error(what: &str, e: RunError) -> ExecError {
    if e.is_unreachable() {
        ExecError::Transient {
            what: format!("slurm {what}"),
            message: e.to_string(),
            retry_after: None,
        }
    } else {
        ExecError::Action {
            action: "slurm",
            subject: what.to_string(),
            message: e.to_string(),
        }
    }
}

impl<R: Runner + 'static> Executor for SlurmExecutor<R> {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn capabilities(&self) -> Capabilities {
        let scheduler = self.scheduler.is_some();
        Capabilities {
            scales_pools: false,
            grace_periods: scheduler,
            exit_codes: scheduler,
            runs_jobs: scheduler,
        }
    }

    fn lead(&mut self, _now: Timestamp) -> impl Future<Output = Result<(), ExecError>> + Send {
        // First in every iteration: a listing kept from an earlier one may
        // miss jobs another replica submitted since.
        if let Some(scheduler) = &mut self.scheduler {
            scheduler.begin();
        }
        std::future::ready(Ok(()))
    }

    fn set_fleet(&mut self, fleet: &Fleet) -> impl Future<Output = Result<(), ExecError>> + Send {
        let result = self.compute(fleet).map(|_| ());
        std::future::ready(result)
    }

    fn config_changes(&self) -> Vec<String> {
        self.pending()
            .map(|d| d.changes.iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    }

    fn apply_config(&mut self) -> impl Future<Output = Result<Vec<String>, ExecError>> + Send {
        std::future::ready(self.apply_pending())
    }

    fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> impl Future<Output = Result<Observation, ExecError>> + Send {
        if let Some(scheduler) = &mut self.scheduler {
            return std::future::ready(scheduler.observe(now, running));
        }
        // Accounting mode: Slurm runs the jobs and owns the nodes, which
        // are taken to be as the pools declare them.
        std::future::ready(Ok(Observation {
            events: Vec::new(),
            nodes: self.nodes.clone(),
        }))
    }

    fn already_done(&self, action: &Action) -> bool {
        if let Some(scheduler) = &self.scheduler {
            return scheduler.already_done(action);
        }
        // Scaling and draining are Slurm's in accounting mode: not carried out.
        true
    }

    fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        _now: Timestamp,
    ) -> impl Future<Output = Result<Outcome, ExecError>> + Send {
        if let Some(scheduler) = &mut self.scheduler {
            return std::future::ready(scheduler.execute(action, ctx));
        }
        std::future::ready(Err(ExecError::Action {
            action: action.kind(),
            subject: action.target().to_string(),
            message:
                "the slurm executor's accounting mode does not run jobs (Slurm schedules them)"
                    .to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exec::MemoryKv;
    use futures_executor::block_on;
    use std::sync::Mutex;

    /// Answers `sacctmgr show` from recorded outputs (22.05.8) and keeps
    /// the other commands it is given.
    #[derive(Debug, Default)]
    struct Recorded {
        assoc: Mutex<String>,
        commands: Mutex<Vec<String>>,
    }

    impl Runner for Arc<Recorded> {
        fn run(&self, program: &str, args: &[String]) -> Result<String, RunError> {
            let line = args.join(" ");
            Ok(match (program, args.get(3).map(String::as_str)) {
                ("sacctmgr", Some("cluster")) => "gitfleet\n".into(),
                ("sacctmgr", Some("assoc")) => self.assoc.lock().unwrap().clone(),
                ("sacctmgr", Some("account")) => "nlp|gitfleet\nroot|root\n".into(),
                ("sacctmgr", Some("qos")) => {
                    "normal|0||cluster|00:00:00|Normal QOS default\n".into()
                }
                _ => {
                    self.commands
                        .lock()
                        .unwrap()
                        .push(format!("{program} {line}"));
                    String::new()
                }
            })
        }
    }

    fn fleet() -> Fleet {
        let yaml = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: nlp}\nspec:\n  weight: 5\n  quota:\n    - {model: H100-SXM-80GB, guaranteed: 8, limit: 16}\n---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100-SXM-80GB, count: 8}\n  size: {min: 2, max: 2}\n";
        let loaded = load::load_fleet(&[load::SourceFile::new("f.yaml", yaml)]);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    #[test]
    fn diffs_on_set_fleet_applies_on_apply_config_and_tells_drift_after() {
        let slurm = Arc::new(Recorded::default());
        *slurm.assoc.lock().unwrap() = "root|||1||normal|\nnlp||root|1|||\n".into();
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut ex = SlurmExecutor::new(slurm.clone(), None, Mapping::default(), store.clone());
        block_on(ex.set_fleet(&fleet())).unwrap();
        assert_eq!(
            ex.config_changes(),
            ["~ modify account nlp: Fairshare 1 → 5, GrpTRES (none) → gres/gpu:h100-sxm-80gb=16"]
        );
        assert!(
            slurm.commands.lock().unwrap().is_empty(),
            "set_fleet only reads"
        );
        let nodes = block_on(ex.observe("2026-11-23T00:00:00Z".parse().unwrap(), &[]))
            .unwrap()
            .nodes;
        assert_eq!(nodes.len(), 2, "the pools' nodes as declared");

        assert_eq!(block_on(ex.apply_config()).unwrap().len(), 1);
        assert_eq!(
            *slurm.commands.lock().unwrap(),
            [
                "sacctmgr -i modify account where name=nlp cluster=gitfleet set Fairshare=5 GrpTRES=gres/gpu:h100-sxm-80gb=16"
            ]
        );
        assert!(
            store
                .entries(LAST_APPLIED)
                .unwrap()
                .contains_key(LAST_APPLIED)
        );

        // Slurm now as applied, but with the share edited by hand.
        *slurm.assoc.lock().unwrap() = "nlp||root|9|gres/gpu:h100-sxm-80gb=16||\n".into();
        block_on(ex.set_fleet(&fleet())).unwrap();
        assert_eq!(
            ex.config_changes(),
            ["~ modify account nlp: Fairshare 9 → 5 (drift: changed in Slurm, reverted)"]
        );
        let action = Action::Scale {
            pool: "p".into(),
            from: 2,
            to: 3,
            reason: String::new(),
            nodes: Vec::new(),
        };
        assert!(ex.already_done(&action), "scaling is Slurm's");
    }
}
