//! The `slurm` executor in accounting mode: gitfleet owns the policy
//! (accounts, shares, limits, QOS), Slurm schedules. `set_fleet` computes
//! the diff between `sacctmgr show` and the fleet (cheap: three reads);
//! `apply_config` runs it, and remembers what it applied through the
//! [`KeyValue`] handle so the next diff can tell a hand edit (drift) from a
//! change in Git. Slurm owns the nodes and runs the jobs: the executor
//! reports the pools' nodes as declared (so no scaling is planned) and
//! refuses to run jobs.

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
use crate::state::SlurmState;

const LAST_APPLIED: &str = "slurm/last-applied";

/// The Slurm executor (accounting mode).
#[derive(Debug)]
pub struct SlurmExecutor<R> {
    runner: Option<R>,
    client: Option<Sacctmgr<R>>,
    cluster: Option<String>,
    mapping: Mapping,
    store: Arc<dyn KeyValue>,
    pending: Option<(SlurmState, Diff)>,
    nodes: Vec<ObservedNode>,
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
        }
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
        let wanted = desired(fleet, &self.mapping).map_err(|e| ExecError::Action {
            action: "slurm",
            subject: "fleet".into(),
            message: e.to_string(),
        })?;
        self.nodes = derive_inventory(fleet).nodes;
        let last = self.last_applied()?;
        let client = self.client()?;
        let current = client.read().map_err(|e| error("sacctmgr show", e))?;
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
        Capabilities {
            scales_pools: false,
            grace_periods: false,
            exit_codes: false,
        }
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
        _now: Timestamp,
        _running: &[JobView<'_>],
    ) -> impl Future<Output = Result<Observation, ExecError>> + Send {
        // Accounting mode: Slurm runs the jobs and owns the nodes, which
        // are taken to be as the pools declare them.
        std::future::ready(Ok(Observation {
            events: Vec::new(),
            nodes: self.nodes.clone(),
        }))
    }

    fn already_done(&self, _action: &Action) -> bool {
        // Scaling and draining are Slurm's in accounting mode: not carried out.
        true
    }

    fn execute(
        &mut self,
        action: &Action,
        _ctx: &ActionContext<'_>,
        _now: Timestamp,
    ) -> impl Future<Output = Result<Outcome, ExecError>> + Send {
        std::future::ready(Err(ExecError::Action {
            action: action.kind(),
            subject: action.target().to_string(),
            message:
                "the slurm executor's accounting mode does not run jobs (Slurm schedules them)"
                    .to_string(),
        }))
    }
}
