//! Executors carry out a plan's actions on a fleet and report what the fleet
//! did since: `sim` (an embedded virtual fleet, the default), `local` (this
//! host: replicas as child processes). The reconciler keeps the job records;
//! an executor only does the side effects and reports events.
//!
//! Contract with the reconciler (`crate`):
//! - `execute` is idempotent: after a crash an intended action is carried out
//!   again, so doing it twice must not start a job twice.
//! - A job stop (preempt, terminate, cancel) may take time (a grace period);
//!   the executor reports [`Event::Stopped`] when the GPUs are free.

pub mod local;
pub mod sim;

use std::collections::BTreeSet;

use crate::state::{JobRecord, StateError};
use model::observed::{ObservedNode, Timestamp};
use model::plan::Action;
use model::spec::{Duration, Fleet, JobSpec, Object};

/// Why an executor failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The state store failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// An action could not be carried out.
    #[error("{action} {subject}: {message}")]
    Action {
        /// The action's type.
        action: &'static str,
        /// The job, node or pool.
        subject: String,
        /// What went wrong.
        message: String,
    },
    /// The executor's inventory could not be read.
    #[error("inventory: {0}")]
    Inventory(String),
}

/// A running job as the executor needs to see it.
#[derive(Debug, Clone, Copy)]
pub struct RunningView<'a> {
    /// The reconciler's record (placement, start, stop under way).
    pub record: &'a JobRecord,
    /// The job's spec, when it is still in Git.
    pub spec: Option<&'a Object<JobSpec>>,
    /// Its priority class's grace period.
    pub grace: Duration,
}

/// What happened in the fleet.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A job ended by itself (success or failure).
    Exited {
        /// Job name.
        job: String,
        /// When.
        at: Timestamp,
        /// Exit code (0 success); `None` when it could not be known.
        exit_code: Option<i32>,
    },
    /// A job that was told to stop has stopped; its GPUs are free.
    Stopped {
        /// Job name.
        job: String,
        /// When.
        at: Timestamp,
    },
}

impl Event {
    /// The job concerned.
    pub fn job(&self) -> &str {
        match self {
            Event::Exited { job, .. } | Event::Stopped { job, .. } => job,
        }
    }
}

/// What the executor knows about the action it is asked to carry out.
#[derive(Debug, Clone, Copy)]
pub struct ActionContext<'a> {
    /// The job's spec (place; preempt/terminate while still in Git).
    pub spec: Option<&'a Object<JobSpec>>,
    /// The job's record, for actions on running jobs.
    pub record: Option<&'a JobRecord>,
    /// The job's grace period (preempt, terminate, cancel).
    pub grace: Duration,
    /// The revision whose plan asked for it.
    pub revision: &'a str,
}

/// How far an action got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its effect is complete (a job started, a node drained, a job stopped).
    Done,
    /// It was started; the executor reports the end as an [`Event`].
    Underway,
}

/// Something that runs jobs on GPUs.
pub trait Executor {
    /// `sim`, `local`, …
    fn name(&self) -> &'static str;

    /// Gives the executor the desired fleet before it is observed (the sim
    /// executor scales pools and seeds its nodes from it).
    fn set_fleet(&mut self, _fleet: &Fleet) -> Result<(), ExecError> {
        Ok(())
    }

    /// The nodes as they are at `now`; `busy` names the nodes running jobs
    /// (for `idleSince`).
    fn nodes(
        &mut self,
        now: Timestamp,
        busy: &BTreeSet<&str>,
    ) -> Result<Vec<ObservedNode>, ExecError>;

    /// Events since the last poll, for the jobs the reconciler thinks run.
    fn poll(
        &mut self,
        now: Timestamp,
        running: &[RunningView<'_>],
    ) -> Result<Vec<Event>, ExecError>;

    /// Whether the same effect is already under way or done (a scale to the
    /// size being provisioned, a drain of a drained node): then the action is
    /// not carried out again.
    fn already_done(&self, action: &Action) -> bool;

    /// Carries out one action. Idempotent.
    fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError>;
}
