//! The executor chosen on the command line: one enum over every executor
//! this binary is built with, so the loop is compiled once per executor
//! without boxing (the executor trait is `async`).

use reconciler::exec::local::LocalExecutor;
use reconciler::exec::sim::SimExecutor;
use reconciler::exec::{
    ActionContext, Capabilities, ExecError, Executor, JobView, Observation, Outcome,
};
use reconciler::observed::Timestamp;
use reconciler::plan::Action;
use reconciler::spec::Fleet;

/// Any of the executors.
#[derive(Debug)]
pub enum AnyExecutor {
    /// The embedded virtual fleet.
    Sim(SimExecutor),
    /// This host's GPUs, replicas as child processes.
    Local(LocalExecutor),
}

impl Executor for AnyExecutor {
    fn name(&self) -> &'static str {
        match self {
            AnyExecutor::Sim(e) => e.name(),
            AnyExecutor::Local(e) => e.name(),
        }
    }

    fn capabilities(&self) -> Capabilities {
        match self {
            AnyExecutor::Sim(e) => e.capabilities(),
            AnyExecutor::Local(e) => e.capabilities(),
        }
    }

    async fn set_fleet(&mut self, fleet: &Fleet) -> Result<(), ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.set_fleet(fleet).await,
            AnyExecutor::Local(e) => e.set_fleet(fleet).await,
        }
    }

    async fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.observe(now, running).await,
            AnyExecutor::Local(e) => e.observe(now, running).await,
        }
    }

    fn already_done(&self, action: &Action) -> bool {
        match self {
            AnyExecutor::Sim(e) => e.already_done(action),
            AnyExecutor::Local(e) => e.already_done(action),
        }
    }

    async fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.execute(action, ctx, now).await,
            AnyExecutor::Local(e) => e.execute(action, ctx, now).await,
        }
    }
}

/// The runtime the reconcile loop and `apply` run on: two workers, so the
/// HTTP endpoint answers while an iteration plans.
pub fn runtime() -> miette::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| miette::miette!("cannot start the async runtime: {e}"))
}
