//! The executor interface: what carries a plan's actions out on a fleet and
//! reports what the fleet did. `sim` (an embedded virtual fleet, the
//! default) and `local` (this host: replicas as supervised processes) live here;
//! remote executors (Kubernetes, Slurm) implement the same trait in crates of
//! their own.
//!
//! Contract with the reconciler:
//! - Executors get plain data ([`JobView`], [`ActionContext`]), never the
//!   reconciler's records; what they must remember across restarts goes
//!   into a [`KeyValue`] handle (or files of their own).
//! - `execute` is idempotent: after a crash an intended action is carried
//!   out again, so doing it twice must not start a job twice.
//! - A job stop (preempt, terminate, cancel) may take time (a grace period);
//!   the executor reports [`Event::Stopped`] when the GPUs are free.
//! - Errors say whether trying again later can help ([`ExecError::is_transient`]):
//!   an API server that is busy or unreachable is transient and the loop
//!   retries with backoff, as kube-rs controllers' error policy does; an
//!   action the fleet cannot do is permanent.

pub mod json;
pub mod local;
pub mod sim;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use model::observed::{NodeGpus, ObservedNode, Timestamp};
use model::plan::Action;
use model::spec::{Duration, Fleet, JobSpec, Object};

/// Why an executor failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The fleet could not be reached or was busy; the same call may
    /// succeed later (the loop retries with backoff).
    #[error("{what}: {message}")]
    Transient {
        /// What was attempted.
        what: String,
        /// What went wrong.
        message: String,
        /// When the fleet asked to be tried again, if it said.
        retry_after: Option<std::time::Duration>,
    },
    /// An action could not be carried out, and trying again will not help.
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
    /// Another replica leads (the kube executor's Lease): this one writes
    /// nothing and tries again after `retry_after` (transient).
    #[error("not the leader: {holder} holds the lease {lease}")]
    NotLeader {
        /// The Lease, `namespace/name`.
        lease: String,
        /// Who holds it, as far as known.
        holder: String,
        /// When to try again.
        retry_after: std::time::Duration,
    },
    /// The executor's own stored values could not be read or written.
    #[error(transparent)]
    Store(#[from] KvError),
}

impl ExecError {
    /// Whether the same call may succeed if tried again later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ExecError::Transient { .. } | ExecError::NotLeader { .. }
        )
    }

    /// How long the fleet asked to wait before the next try, if it said.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ExecError::Transient { retry_after, .. } => *retry_after,
            ExecError::NotLeader { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// What an executor can do, so the reconciler and the status can say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// It can add and remove nodes of a pool (`scale` actions).
    pub scales_pools: bool,
    /// It honours grace periods (SIGTERM, then SIGKILL after the grace).
    pub grace_periods: bool,
    /// It reports how jobs exited (exit codes).
    pub exit_codes: bool,
    /// It runs the fleet's Jobs. Without (Slurm's accounting mode: gitfleet
    /// owns accounts and QOS, Slurm schedules its own jobs) the reconciler
    /// plans the fleet without its Jobs: nothing is placed or stopped.
    pub runs_jobs: bool,
}

/// Why a stop was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopKind {
    /// Preempted for another job: it becomes pending again once stopped.
    Preempt,
    /// Past its time limit: it ends.
    Terminate,
    /// Removed from Git: it ends.
    Cancel,
}

impl StopKind {
    /// Lower-case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::Preempt => "preempt",
            StopKind::Terminate => "terminate",
            StopKind::Cancel => "cancel",
        }
    }
}

/// A stop under way, as the executor needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopView {
    /// Why.
    pub kind: StopKind,
    /// When it was asked for (a preemption's grace period counts from here).
    pub since: Timestamp,
}

/// A job the reconciler believes runs.
#[derive(Debug, Clone, Copy)]
pub struct JobView<'a> {
    /// The job's name.
    pub job: &'a str,
    /// Where it runs.
    pub placement: &'a [NodeGpus],
    /// When it started, if known.
    pub started: Option<Timestamp>,
    /// A stop under way.
    pub stop: Option<StopView>,
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

/// The fleet as one observation sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// What the running jobs did since the last observation (the jobs named
    /// here no longer run).
    pub events: Vec<Event>,
    /// The nodes ready for jobs, with `idleSince` kept.
    pub nodes: Vec<ObservedNode>,
}

/// What the executor knows about the action it is asked to carry out.
#[derive(Debug, Clone)]
pub struct ActionContext<'a> {
    /// The job's spec (place; preempt/terminate while still in Git).
    pub spec: Option<&'a Object<JobSpec>>,
    /// Which placement of the job this is: a job placed again after a
    /// preemption has another attempt, so leftovers of the old one are not
    /// taken for the new start.
    pub attempt: Option<String>,
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

/// Something that runs jobs on GPUs. Methods that talk to the fleet are
/// `async` so that remote executors wait without blocking the loop.
pub trait Executor: Send {
    /// `sim`, `local`, …
    fn name(&self) -> &'static str;

    /// What it can do.
    fn capabilities(&self) -> Capabilities;

    /// Gives the executor the desired fleet before it is observed (the sim
    /// executor scales pools and seeds its nodes from it).
    fn set_fleet(&mut self, fleet: &Fleet) -> impl Future<Output = Result<(), ExecError>> + Send;

    /// Called first in every iteration, before anything is carried out or
    /// recorded: an executor that must be the only writer (the kube
    /// executor's Lease) returns [`ExecError::NotLeader`] while another
    /// replica leads, and the iteration stops there. Leads by default.
    fn lead(&mut self, now: Timestamp) -> impl Future<Output = Result<(), ExecError>> + Send {
        let _ = now;
        std::future::ready(Ok(()))
    }

    /// Called once when the loop stops (a signal, the end of
    /// `--iterations`, after `apply`): an executor that holds something
    /// only one replica may hold (the kube executor's Lease) gives it up,
    /// so another replica takes over at once. Nothing by default.
    fn release(&mut self) -> impl Future<Output = Result<(), ExecError>> + Send {
        std::future::ready(Ok(()))
    }

    /// Changes to the fleet's own configuration that the fleet given to
    /// `set_fleet` asks for (the Slurm executor's accounts and QOS), one
    /// line each, to show before they are made. None by default.
    fn config_changes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Makes the configuration changes `config_changes` showed; returns
    /// them. Called once per applied iteration, before its actions.
    fn apply_config(&mut self) -> impl Future<Output = Result<Vec<String>, ExecError>> + Send {
        std::future::ready(Ok(Vec::new()))
    }

    /// What the fleet did since the last observation and its nodes at `now`.
    /// `running` are the jobs the reconciler believes run; nodes holding
    /// none of them that are still running are idle.
    fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> impl Future<Output = Result<Observation, ExecError>> + Send;

    /// Whether the last observation still stands at `now`: an observation
    /// at `now`, given the same running jobs as the last one, would report
    /// no events and the same nodes. Only asked while nothing was carried
    /// out since that observation, after `set_fleet` with the fleet in
    /// force — a new revision's too: answer `false` when that fleet could
    /// change what an observation reports (the sim: other pools). The
    /// reconciler then skips observing. When in doubt, `false` (the
    /// default: observe every time).
    fn observation_stands(&self, now: Timestamp) -> bool {
        let _ = now;
        false
    }

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
    ) -> impl Future<Output = Result<Outcome, ExecError>> + Send;

    /// Writes to its [`KeyValue`] what the actions carried out so far
    /// changed and the executor still keeps in memory (the sim's nodes).
    /// The reconciler calls it before it records those actions' outcomes,
    /// so their values land in the same transaction. Nothing by default.
    fn flush(&mut self) -> Result<(), ExecError> {
        Ok(())
    }

    /// Whether everything its actions change lives in its [`KeyValue`]
    /// (the sim's world, rebuilt from its stored nodes): a crash then
    /// loses an action's effect together with its outcome, and nothing
    /// outside the state is left to repeat or to lose. The reconciler
    /// then need not wait for the disk before carrying actions out.
    /// `false` by default (the safe answer).
    fn acts_in_store_only(&self) -> bool {
        false
    }
}

/// The nodes that hold a job still running after `events`.
pub fn busy_nodes<'a>(running: &'a [JobView<'_>], events: &[Event]) -> Vec<&'a str> {
    let ended: Vec<&str> = events.iter().map(Event::job).collect();
    let mut busy: Vec<&str> = running
        .iter()
        .filter(|v| !ended.contains(&v.job))
        .flat_map(|v| v.placement.iter().map(|p| p.node.as_str()))
        .collect();
    busy.sort_unstable();
    busy.dedup();
    busy
}

/// Why the executor's stored values could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("executor state: {0}")]
pub struct KvError(pub String);

/// A small key-value store an executor keeps across restarts (the sim
/// executor's virtual nodes). The reconciler's state store provides it.
pub trait KeyValue: Send + Sync + std::fmt::Debug {
    /// Every value whose key starts with `prefix`, by key.
    fn entries(&self, prefix: &str) -> Result<BTreeMap<String, String>, KvError>;
    /// Sets (`Some`) or removes (`None`) values, all or none.
    fn write(&self, changes: &[(String, Option<String>)]) -> Result<(), KvError>;
}

/// A [`KeyValue`] in memory (tests, and executors that need nothing kept).
#[derive(Debug, Default)]
pub struct MemoryKv(Mutex<BTreeMap<String, String>>);

impl KeyValue for MemoryKv {
    fn entries(&self, prefix: &str) -> Result<BTreeMap<String, String>, KvError> {
        let map = self.0.lock().map_err(|e| KvError(e.to_string()))?;
        Ok(map
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn write(&self, changes: &[(String, Option<String>)]) -> Result<(), KvError> {
        let mut map = self.0.lock().map_err(|e| KvError(e.to_string()))?;
        for (key, value) in changes {
            match value {
                Some(v) => map.insert(key.clone(), v.clone()),
                None => map.remove(key),
            };
        }
        Ok(())
    }
}
