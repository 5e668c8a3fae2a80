//! The simulated world: a virtual fleet's nodes, the jobs running on them
//! and the jobs that ended, moved by plan actions and by time, under the
//! rules listed in the crate docs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use model::observed::{
    CompletedJob, NodeGpus, ObservedNode, ObservedState, QueuedJob, RunningJob, Timestamp,
    derive_inventory, pool_node,
};
use model::plan::Action;
use model::spec::{Duration, Fleet, JobSpec, NodePoolSpec, Object};
use model::time::after;
use serde::{Deserialize, Serialize};

/// The annotation that says how long a job runs in the simulator.
pub const SIM_DURATION_ANNOTATION: &str = "gitfleet/sim-duration";

/// The annotation that sets a simulated job's exit code (default 0).
pub const SIM_EXIT_CODE_ANNOTATION: &str = "gitfleet/sim-exit-code";

/// How long a job without a `gitfleet/sim-duration` annotation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RunLength {
    /// Its `timeLimit` (it succeeds just as the limit is reached), else until
    /// stopped: the `sim` executor's rule.
    AnnotationOrTimeLimit,
    /// Until stopped: the rule of [`crate::apply_plan`]/[`crate::advance`],
    /// so of the generator (its settled fleets stay as they were, and jobs
    /// over their limit are terminated by the plan, as in a live fleet).
    Annotation,
}

/// The world's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rules {
    /// How long a scale-up's nodes take to become ready.
    pub provision_delay: Duration,
    /// How long a job without a duration annotation runs.
    pub run_length: RunLength,
}

impl Rules {
    /// The rules of [`crate::apply_plan`] and [`crate::advance`], so of the
    /// generator and the stability tests: no provisioning delay,
    /// [`RunLength::Annotation`].
    pub const GENERATOR: Rules = Rules {
        provision_delay: Duration::ZERO,
        run_length: RunLength::Annotation,
    };

    /// The `sim` executor's rules: nodes after `provision_delay`,
    /// [`RunLength::AnnotationOrTimeLimit`].
    pub const fn executor(provision_delay: Duration) -> Rules {
        Rules {
            provision_delay,
            run_length: RunLength::AnnotationOrTimeLimit,
        }
    }
}

/// What the world needs to know about a job to carry out an action on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFacts {
    /// How long it runs before it exits by itself; `None`: until stopped.
    pub run_length: Option<Duration>,
    /// The exit code it ends with.
    pub exit_code: i32,
    /// Its grace period when preempted.
    pub grace: Duration,
    /// Its `gitfleet/restart` annotation (kept by a job it starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
    /// Its spec's runtime digest (kept by a job it starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_digest: Option<String>,
}

impl JobFacts {
    /// A job's facts as the fleet says: run length and exit code from its
    /// annotations (and time limit, per `rules`), grace from its priority
    /// class ([`Fleet::grace_period_of`]; `None` is a job no longer in Git).
    pub fn of(fleet: &Fleet, spec: Option<&Object<JobSpec>>, rules: &Rules) -> JobFacts {
        let grace = fleet.grace_period_of(spec.map(|j| &j.spec));
        JobFacts::with_grace(spec, grace, rules)
    }

    /// The same with the grace period already known (the executor's
    /// `ActionContext::grace`). An annotation that does not parse is ignored.
    pub fn with_grace(spec: Option<&Object<JobSpec>>, grace: Duration, rules: &Rules) -> JobFacts {
        JobFacts {
            spec_digest: spec.map(|j| j.spec.runtime_digest()),
            ..JobFacts::undigested(spec, grace, rules)
        }
    }

    /// [`JobFacts::with_grace`] without the spec's runtime digest: for a
    /// world whose jobs' digests nobody reads (the `sim` executor's; the
    /// reconciler keeps them in its records), which spares hashing each
    /// spec once more.
    pub fn undigested(spec: Option<&Object<JobSpec>>, grace: Duration, rules: &Rules) -> JobFacts {
        let annotation = |key: &str| spec.and_then(|j| j.metadata.annotations.get(key));
        let run_length = annotation(SIM_DURATION_ANNOTATION)
            .and_then(|d| d.trim().parse::<Duration>().ok())
            .or(match rules.run_length {
                RunLength::AnnotationOrTimeLimit => spec.and_then(|j| j.spec.time_limit),
                RunLength::Annotation => None,
            });
        let exit_code = annotation(SIM_EXIT_CODE_ANNOTATION)
            .and_then(|c| c.trim().parse::<i32>().ok())
            .unwrap_or(0);
        JobFacts {
            run_length,
            exit_code,
            grace,
            restart: spec.and_then(|j| j.restart_token()).map(str::to_string),
            spec_digest: None,
        }
    }
}

/// Why a job is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopKind {
    /// To make room for another job; ends after the grace period.
    Preempt,
    /// Past its time limit; ends at once.
    Terminate,
    /// No longer in Git; ends at once.
    Cancel,
}

/// A stop under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stop {
    /// Why.
    pub kind: StopKind,
    /// When it was asked for.
    pub since: Timestamp,
    /// When the job stops (preempt: `since + grace`; the others: `since`).
    pub ends: Timestamp,
    /// The job a preemption makes room for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_job: Option<String>,
    /// The action's reason (a terminated job's completion reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A job running in the world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorldJob {
    /// The Job's name.
    pub job: String,
    /// GPUs held, per node.
    pub placement: Vec<NodeGpus>,
    /// When it started.
    pub started: Timestamp,
    /// How long it runs before it exits by itself; `None`: until stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_length: Option<Duration>,
    /// The exit code it ends with.
    #[serde(default)]
    pub exit_code: i32,
    /// A stop under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
    /// The `gitfleet/restart` annotation it started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
    /// The runtime digest of the spec it started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_digest: Option<String>,
}

/// How a job leaves the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Exit,
    Stop,
}

impl WorldJob {
    /// When it exits by itself, if ever.
    pub fn exits_at(&self) -> Option<Timestamp> {
        self.run_length.and_then(|d| never(after(self.started, d)))
    }

    /// When it leaves the world: its exit or the end of its stop, whichever
    /// comes first (the stop on a tie); `None`: it runs on.
    pub fn ends_at(&self) -> Option<Timestamp> {
        self.ending().map(|(at, _)| at)
    }

    fn ending(&self) -> Option<(Timestamp, Ending)> {
        let stop = self.stop.as_ref().and_then(|s| never(s.ends));
        match (self.exits_at(), stop) {
            (Some(exit), Some(stop)) if exit < stop => Some((exit, Ending::Exit)),
            (_, Some(stop)) => Some((stop, Ending::Stop)),
            (exit, None) => exit.map(|at| (at, Ending::Exit)),
        }
    }

    /// The job as the observed state shows it (a preemption's start and
    /// preemptor; terminate and cancel are not shown).
    pub fn to_running(&self) -> RunningJob {
        let preempt = self.stop.as_ref().filter(|s| s.kind == StopKind::Preempt);
        RunningJob {
            job: self.job.clone(),
            started: self.started,
            placement: self.placement.clone(),
            preempting_since: preempt.map(|s| s.since),
            preempted_for: preempt.and_then(|s| s.for_job.clone()),
            restart: self.restart.clone(),
            spec_digest: self.spec_digest.clone(),
        }
    }
}

/// A node of the world. (The same JSON as the `sim` executor's stored nodes.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorldNode {
    /// The node as observed (`idleSince` kept by the world).
    pub node: ObservedNode,
    /// While provisioning: when it becomes ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<Timestamp>,
    /// Drained: marked for no new placements.
    #[serde(default)]
    pub drained: bool,
}

impl WorldNode {
    /// A ready node.
    pub fn ready(node: ObservedNode) -> WorldNode {
        WorldNode {
            node,
            ready_at: None,
            drained: false,
        }
    }
}

/// Something that happened in the world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "event"
)]
pub enum WorldEvent {
    /// A job ended by itself; its GPUs are free.
    Exited {
        /// Job name.
        job: String,
        /// When.
        at: Timestamp,
        /// Its exit code (0: success).
        exit_code: i32,
    },
    /// A job that was told to stop has stopped; its GPUs are free.
    Stopped {
        /// Job name.
        job: String,
        /// When.
        at: Timestamp,
        /// Why it was stopped.
        kind: StopKind,
        /// The GPUs it held.
        placement: Vec<NodeGpus>,
        /// The job a preemption made room for (its GPUs are kept for it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preempted_for: Option<String>,
    },
    /// A provisioned node became ready.
    NodeReady {
        /// Node name.
        node: String,
        /// When.
        at: Timestamp,
    },
}

impl WorldEvent {
    /// When it happened.
    pub fn at(&self) -> Timestamp {
        match self {
            WorldEvent::Exited { at, .. }
            | WorldEvent::Stopped { at, .. }
            | WorldEvent::NodeReady { at, .. } => *at,
        }
    }

    /// The job or node concerned.
    pub fn subject(&self) -> &str {
        match self {
            WorldEvent::Exited { job, .. } | WorldEvent::Stopped { job, .. } => job,
            WorldEvent::NodeReady { node, .. } => node,
        }
    }
}

/// Why the world refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// A placement names a node the world does not have.
    #[error("place {job}: node {node} does not exist")]
    UnknownNode {
        /// The job.
        job: String,
        /// The node.
        node: String,
    },
    /// A placement names a node that is still being provisioned.
    #[error("place {job}: node {node} is not ready yet")]
    NodeNotReady {
        /// The job.
        job: String,
        /// The node.
        node: String,
    },
    /// A placement names a GPU index the node does not have.
    #[error("place {job}: node {node} has no GPU {gpu}")]
    UnknownGpu {
        /// The job.
        job: String,
        /// The node.
        node: String,
        /// The GPU index.
        gpu: u32,
    },
    /// A placement names a GPU that a running job holds (or names it twice).
    #[error("place {job}: GPU {gpu} of node {node} is held by {holder}")]
    GpuHeld {
        /// The job.
        job: String,
        /// The node.
        node: String,
        /// The GPU index.
        gpu: u32,
        /// The job holding it.
        holder: String,
    },
    /// A running job added again ([`World::add_job`]).
    #[error("job {job} already runs")]
    DuplicateJob {
        /// The job.
        job: String,
    },
    /// A node added again ([`World::add_node`]).
    #[error("node {node} already exists")]
    DuplicateNode {
        /// The node.
        node: String,
    },
    /// A scale-up of a pool the world was not given.
    #[error("scale {pool}: no such pool in the fleet")]
    UnknownPool {
        /// The pool.
        pool: String,
    },
}

/// A scheduled change: a job leaving or a node becoming ready.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    at: Timestamp,
    name: String,
    what: DueKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DueKind {
    JobEnd,
    NodeReady,
}

#[derive(Debug, Clone)]
struct NodeEntry {
    /// Insertion order: the order of the observed state's nodes.
    seq: u64,
    node: WorldNode,
    /// GPU index → the job holding it (one name shared by its GPUs: a
    /// burst seats thousands of jobs on 8 GPUs each).
    held: BTreeMap<u32, Arc<str>>,
}

#[derive(Debug, Clone)]
struct JobEntry {
    /// Insertion order: the order of the observed state's running jobs.
    seq: u64,
    job: WorldJob,
}

/// A virtual fleet under one set of [`Rules`] (see the crate docs). Pure: no
/// I/O, no clock; time moves only by [`World::advance`]. Serialized as its
/// rules, clock, pools, nodes, running and completed jobs (read back with the
/// same checks as [`World::add_node`] and [`World::add_job`]). Two worlds are
/// equal when they hold the same state, nodes and jobs in the same order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "Snapshot", try_from = "Snapshot")]
pub struct World {
    rules: Rules,
    clock: Timestamp,
    pools: BTreeMap<String, NodePoolSpec>,
    nodes: BTreeMap<String, NodeEntry>,
    jobs: BTreeMap<String, JobEntry>,
    completed: Vec<CompletedJob>,
    due: BTreeSet<Due>,
    next_seq: u64,
}

impl PartialEq for World {
    fn eq(&self, other: &World) -> bool {
        self.rules == other.rules
            && self.clock == other.clock
            && self.pools == other.pools
            && self.completed == other.completed
            && self.due == other.due
            && self.ordered_nodes().eq(other.ordered_nodes())
            && self.ordered_jobs().eq(other.ordered_jobs())
    }
}

impl World {
    /// An empty world at `now`.
    pub fn new(rules: Rules, now: Timestamp) -> World {
        World {
            rules,
            clock: now,
            pools: BTreeMap::new(),
            nodes: BTreeMap::new(),
            jobs: BTreeMap::new(),
            completed: Vec::new(),
            due: BTreeSet::new(),
            next_seq: 0,
        }
    }

    /// A world at `now` with the fleet's pools and the derived inventory as
    /// its nodes (what the `sim` executor starts from without a file).
    pub fn from_fleet(fleet: &Fleet, rules: Rules, now: Timestamp) -> World {
        let mut world = World::new(rules, now);
        world.set_pools(fleet);
        world.seed_nodes(derive_inventory(fleet).nodes);
        world
    }

    /// A world at `now` holding an observed state: the fleet's pools, the
    /// nodes (ready), the running jobs (their facts from the fleet; a
    /// `preemptingSince` is a preemption under way) and the completed jobs.
    /// Queue entries are not the world's. Running jobs it cannot seat (on an
    /// unknown node or GPU, or a GPU held twice: states that
    /// `parse_observed` rejects) are left out and returned.
    pub fn from_observed(
        fleet: &Fleet,
        observed: &ObservedState,
        rules: Rules,
        now: Timestamp,
    ) -> (World, Vec<WorldError>) {
        let specs = spec_index(fleet);
        let mut world = World::new(rules, now);
        world.set_pools(fleet);
        world.seed_nodes(observed.nodes.iter().cloned());
        let mut refused = Vec::new();
        for run in &observed.running {
            let spec = specs.get(run.job.as_str()).copied();
            let facts = JobFacts::of(fleet, spec, &rules);
            let stop = run.preempting_since.map(|since| Stop {
                kind: StopKind::Preempt,
                since,
                ends: after(since, facts.grace),
                for_job: run.preempted_for.clone(),
                reason: None,
            });
            let job = WorldJob {
                job: run.job.clone(),
                placement: run.placement.clone(),
                started: run.started,
                run_length: facts.run_length,
                exit_code: facts.exit_code,
                stop,
                restart: run.restart.clone(),
                spec_digest: run.spec_digest.clone(),
            };
            if let Err(e) = world.add_job(job) {
                refused.push(e);
            }
        }
        world.completed = observed.completed.clone();
        (world, refused)
    }

    /// The pools scale-ups draw from: the fleet's (replacing any before).
    pub fn set_pools(&mut self, fleet: &Fleet) {
        self.pools = fleet
            .pools
            .iter()
            .map(|p| (p.name().to_string(), p.spec.clone()))
            .collect();
    }

    /// Adds ready nodes; a name the world already has is left as it is. A
    /// node without `idleSince` is idle since the world's clock.
    pub fn seed_nodes(&mut self, nodes: impl IntoIterator<Item = ObservedNode>) {
        for node in nodes {
            // A duplicate is the only refusal, and it is documented as skipped.
            let _ = self.add_node(WorldNode::ready(node));
        }
    }

    /// Adds a node as it is (ready or provisioning, drained or not), e.g.
    /// one read back from storage. Without `idleSince` it is idle since it
    /// became ready (or the world's clock).
    pub fn add_node(&mut self, mut node: WorldNode) -> Result<(), WorldError> {
        let name = node.node.name.clone();
        if self.nodes.contains_key(&name) {
            return Err(WorldError::DuplicateNode { node: name });
        }
        node.node
            .idle_since
            .get_or_insert(node.ready_at.unwrap_or(self.clock));
        if let Some(at) = node.ready_at.and_then(never) {
            self.due.insert(Due {
                at,
                name: name.clone(),
                what: DueKind::NodeReady,
            });
        }
        let seq = self.seq();
        self.nodes.insert(
            name,
            NodeEntry {
                seq,
                node,
                held: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// Adds a running job as it is (with its start, run length and any stop
    /// under way), e.g. one read back from storage. Its GPUs must be free
    /// GPUs of ready nodes.
    pub fn add_job(&mut self, job: WorldJob) -> Result<(), WorldError> {
        if self.jobs.contains_key(&job.job) {
            return Err(WorldError::DuplicateJob { job: job.job });
        }
        self.check_placement(&job.job, &job.placement)?;
        self.seat(job);
        Ok(())
    }

    /// Carries out one plan action at `now` (which should not be before the
    /// world's clock: [`World::advance`] first; `apply` does not move it).
    /// `facts` are the action's job's: `Place` reads the run length and exit
    /// code, `Preempt` the grace period; the others read nothing. Returns
    /// what happened at once (terminate/cancel: `Stopped`; scale-up without
    /// a provisioning delay: `NodeReady`). Actions on jobs that do not run and
    /// drains of unknown nodes change nothing.
    pub fn apply(
        &mut self,
        action: &Action,
        facts: &JobFacts,
        now: Timestamp,
    ) -> Result<Vec<WorldEvent>, WorldError> {
        match action {
            Action::Place { job, placement, .. } => {
                self.start(job, placement, facts, now)?;
                Ok(Vec::new())
            }
            Action::Preempt { job, for_job, .. } => {
                self.preempt(job, for_job, facts.grace, now);
                Ok(Vec::new())
            }
            Action::Terminate { job, reason } => {
                Ok(self.stop(job, StopKind::Terminate, Some(reason), now))
            }
            Action::Cancel { job, reason } => {
                Ok(self.stop(job, StopKind::Cancel, Some(reason), now))
            }
            Action::Scale {
                pool, to, nodes, ..
            } => self.scale(pool, *to, nodes, now),
            Action::Drain { node, .. } => {
                self.drain(node);
                Ok(Vec::new())
            }
        }
    }

    /// [`World::apply`] with the job's facts read from `fleet` under the
    /// world's rules ([`JobFacts::of`]).
    pub fn apply_from_fleet(
        &mut self,
        fleet: &Fleet,
        action: &Action,
        now: Timestamp,
    ) -> Result<Vec<WorldEvent>, WorldError> {
        let spec = action
            .job()
            .and_then(|name| fleet.jobs.iter().find(|j| j.name() == name));
        let facts = JobFacts::of(fleet, spec, &self.rules);
        self.apply(action, &facts, now)
    }

    /// Starts `job` on `placement` at `now`; it exits after
    /// `facts.run_length` (the trace simulator gives its own) with
    /// `facts.exit_code`. A job that already runs is left as it is.
    pub fn start(
        &mut self,
        job: &str,
        placement: &[NodeGpus],
        facts: &JobFacts,
        now: Timestamp,
    ) -> Result<(), WorldError> {
        if self.jobs.contains_key(job) {
            return Ok(());
        }
        self.check_placement(job, placement)?;
        self.seat(WorldJob {
            job: job.to_string(),
            placement: placement.to_vec(),
            started: now,
            run_length: facts.run_length,
            exit_code: facts.exit_code,
            stop: None,
            restart: facts.restart.clone(),
            spec_digest: facts.spec_digest.clone(),
        });
        Ok(())
    }

    /// Preempts `job` for `for_job` at `now`: it stops at `now + grace`. A
    /// job already stopping keeps its deadline (and now makes room for
    /// `for_job`); a job that does not run is ignored.
    pub fn preempt(&mut self, job: &str, for_job: &str, grace: Duration, now: Timestamp) {
        let Some(entry) = self.jobs.get_mut(job) else {
            return;
        };
        let old = entry.job.ending();
        match &mut entry.job.stop {
            Some(stop) => {
                if stop.kind == StopKind::Preempt {
                    stop.for_job = Some(for_job.to_string());
                }
            }
            None => {
                entry.job.stop = Some(Stop {
                    kind: StopKind::Preempt,
                    since: now,
                    ends: after(now, grace),
                    for_job: Some(for_job.to_string()),
                    reason: None,
                })
            }
        }
        let new = entry.job.ending();
        self.reschedule(job, old, new);
    }

    /// Stops `job` at once (`kind` terminate or cancel; a preemption's
    /// grace is not waited for here either); a terminated job is recorded as
    /// completed with `reason`. Returns its `Stopped` event; nothing when it
    /// does not run.
    pub fn stop(
        &mut self,
        job: &str,
        kind: StopKind,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Vec<WorldEvent> {
        let Some(entry) = self.jobs.get_mut(job) else {
            return Vec::new();
        };
        let old = entry.job.ending();
        let for_job = match kind {
            StopKind::Preempt => entry.job.stop.as_ref().and_then(|s| s.for_job.clone()),
            StopKind::Terminate | StopKind::Cancel => None,
        };
        entry.job.stop = Some(Stop {
            kind,
            since: now,
            ends: now,
            for_job,
            reason: reason.map(str::to_string),
        });
        self.reschedule(job, old, None);
        self.leave(job, now, Ending::Stop).into_iter().collect()
    }

    /// Takes `job` out of the world without an event or a completion: its
    /// end was recorded elsewhere (the reconciler took a stop as done). Its
    /// GPUs are free, its nodes idle since `at` when it was their last job.
    /// Returns whether it was running.
    pub fn forget_job(&mut self, job: &str, at: Timestamp) -> bool {
        let Some(entry) = self.jobs.get(job) else {
            return false;
        };
        let old = entry.job.ending();
        self.reschedule(job, old, None);
        let completed = self.completed.len();
        let _ = self.leave(job, at, Ending::Stop);
        self.completed.truncate(completed);
        true
    }

    /// The jobs that ended since the last call (a long-running world, as the
    /// `sim` executor's, keeps no history: its owner records the ends).
    pub fn take_completed(&mut self) -> Vec<CompletedJob> {
        std::mem::take(&mut self.completed)
    }

    /// Scales `pool` to `to` nodes at `now` (counting nodes still being
    /// provisioned). Up: new nodes (never beyond the pool's `max`), ready
    /// after the provisioning delay. Down: the named nodes of the pool
    /// first, then the newest; nodes running jobs stay. Returns the
    /// `NodeReady` events of nodes ready at once.
    pub fn scale(
        &mut self,
        pool: &str,
        to: u32,
        remove: &[String],
        now: Timestamp,
    ) -> Result<Vec<WorldEvent>, WorldError> {
        let current = self.pool_nodes(pool).count();
        let to = usize::try_from(to).unwrap_or(usize::MAX);
        if to > current {
            let spec = self
                .pools
                .get(pool)
                .cloned()
                .ok_or_else(|| WorldError::UnknownPool {
                    pool: pool.to_string(),
                })?;
            let max = usize::try_from(spec.size.max).unwrap_or(usize::MAX);
            let wanted = to.min(max).saturating_sub(current);
            let ready_at = after(now, self.rules.provision_delay);
            let delayed = !self.rules.provision_delay.is_zero();
            let mut events = Vec::new();
            let mut added = 0;
            let mut k: u32 = 0;
            while added < wanted {
                let mut node = pool_node(pool, &spec, k);
                if !self.nodes.contains_key(&node.name) {
                    node.idle_since = Some(ready_at);
                    let name = node.name.clone();
                    let node = WorldNode {
                        node,
                        ready_at: delayed.then_some(ready_at),
                        drained: false,
                    };
                    if self.add_node(node).is_ok() {
                        added += 1;
                        if !delayed {
                            events.push(WorldEvent::NodeReady {
                                node: name,
                                at: now,
                            });
                        }
                    }
                }
                let Some(next) = k.checked_add(1) else { break };
                k = next;
            }
            return Ok(events);
        }
        let mut excess = current.saturating_sub(to);
        let mut victims: Vec<String> = Vec::new();
        let removable = |name: &str| {
            self.nodes
                .get(name)
                .is_some_and(|e| e.node.node.pool.as_deref() == Some(pool) && e.held.is_empty())
        };
        for name in remove {
            if excess == 0 {
                break;
            }
            if removable(name) && !victims.contains(name) {
                victims.push(name.clone());
                excess -= 1;
            }
        }
        let mut newest: Vec<&str> = self
            .pool_nodes(pool)
            .map(|n| n.node.name.as_str())
            .filter(|n| removable(n) && !victims.iter().any(|v| v == n))
            .collect();
        newest.sort_by(|a, b| (b.len(), b).cmp(&(a.len(), a)));
        let more: Vec<String> = newest
            .into_iter()
            .take(excess)
            .map(str::to_string)
            .collect();
        victims.extend(more);
        for name in victims {
            if let Some(entry) = self.nodes.remove(&name)
                && let Some(at) = entry.node.ready_at
            {
                self.due.remove(&Due {
                    at,
                    name,
                    what: DueKind::NodeReady,
                });
            }
        }
        Ok(Vec::new())
    }

    /// Marks `node` drained; an unknown node is ignored. Returns whether it
    /// is known.
    pub fn drain(&mut self, node: &str) -> bool {
        match self.nodes.get_mut(node) {
            Some(entry) => {
                entry.node.drained = true;
                true
            }
            None => false,
        }
    }

    /// When the next thing happens by itself (a job exits, a stop ends, a
    /// node becomes ready); `None`: nothing ever will.
    pub fn next_event(&self) -> Option<Timestamp> {
        self.due.first().map(|d| d.at)
    }

    /// Moves the clock to `to` (never back): everything due up to and
    /// including `to` happens, in time order then by name. Exited and
    /// stopped jobs leave, their GPUs free; provisioned nodes become ready.
    /// Advancing in one step or in several gives the same world and events.
    pub fn advance(&mut self, to: Timestamp) -> Vec<WorldEvent> {
        let mut events = Vec::new();
        while self.due.first().is_some_and(|d| d.at <= to) {
            let Some(due) = self.due.pop_first() else {
                break;
            };
            match due.what {
                DueKind::JobEnd => {
                    let ending = self
                        .jobs
                        .get(&due.name)
                        .and_then(|e| e.job.ending())
                        .map_or(Ending::Exit, |(_, how)| how);
                    events.extend(self.leave(&due.name, due.at, ending));
                }
                DueKind::NodeReady => {
                    if let Some(entry) = self.nodes.get_mut(&due.name) {
                        entry.node.ready_at = None;
                        entry.node.node.idle_since.get_or_insert(due.at);
                        events.push(WorldEvent::NodeReady {
                            node: due.name,
                            at: due.at,
                        });
                    }
                }
            }
        }
        self.clock = self.clock.max(to);
        events
    }

    /// The rules.
    pub fn rules(&self) -> Rules {
        self.rules
    }

    /// The clock: the latest time advanced to.
    pub fn now(&self) -> Timestamp {
        self.clock
    }

    /// A node (ready or not) by name.
    pub fn node(&self, name: &str) -> Option<&WorldNode> {
        self.nodes.get(name).map(|e| &e.node)
    }

    /// Every node, provisioning ones included, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &WorldNode> {
        self.nodes.values().map(|e| &e.node)
    }

    /// A pool's nodes, provisioning ones included, by name.
    pub fn pool_nodes<'a>(&'a self, pool: &'a str) -> impl Iterator<Item = &'a WorldNode> + 'a {
        self.nodes()
            .filter(move |n| n.node.pool.as_deref() == Some(pool))
    }

    /// The job holding GPU `gpu` of `node`.
    pub fn holder(&self, node: &str, gpu: u32) -> Option<&str> {
        self.nodes
            .get(node)
            .and_then(|e| e.held.get(&gpu))
            .map(|holder| &**holder)
    }

    /// A running job by name.
    pub fn job(&self, name: &str) -> Option<&WorldJob> {
        self.jobs.get(name).map(|e| &e.job)
    }

    /// The running jobs, by name.
    pub fn jobs(&self) -> impl Iterator<Item = &WorldJob> {
        self.jobs.values().map(|e| &e.job)
    }

    /// The jobs that ended (seeded ones first, then in the order they ended).
    pub fn completed(&self) -> &[CompletedJob] {
        &self.completed
    }

    /// The ready nodes as observed, in the order they joined the world.
    pub fn ready_nodes(&self) -> Vec<ObservedNode> {
        self.ordered_nodes()
            .filter(|(n, _)| n.ready_at.is_none())
            .map(|(n, _)| n.node.clone())
            .collect()
    }

    /// The running jobs as observed, in the order they started.
    pub fn running_jobs(&self) -> Vec<RunningJob> {
        self.ordered_jobs().map(WorldJob::to_running).collect()
    }

    /// The whole observed state at the clock (no queue entries: those are
    /// the caller's).
    pub fn to_observed(&self) -> ObservedState {
        ObservedState {
            time: Some(self.clock),
            nodes: self.ready_nodes(),
            running: self.running_jobs(),
            queued: Vec::new(),
            completed: self.completed.clone(),
            attained: Default::default(),
        }
    }

    /// Nodes (with their held GPUs) in the order they joined.
    fn ordered_nodes(&self) -> impl Iterator<Item = (&WorldNode, &BTreeMap<u32, Arc<str>>)> {
        let mut nodes: Vec<&NodeEntry> = self.nodes.values().collect();
        nodes.sort_by_key(|e| e.seq);
        nodes.into_iter().map(|e| (&e.node, &e.held))
    }

    /// Running jobs in the order they started.
    fn ordered_jobs(&self) -> impl Iterator<Item = &WorldJob> {
        let mut jobs: Vec<&JobEntry> = self.jobs.values().collect();
        jobs.sort_by_key(|e| e.seq);
        jobs.into_iter().map(|e| &e.job)
    }

    fn seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        seq
    }

    /// Refuses a placement on unknown or provisioning nodes, unknown GPUs,
    /// or held GPUs (also a GPU named twice).
    fn check_placement(&self, job: &str, placement: &[NodeGpus]) -> Result<(), WorldError> {
        // A placement has a few GPUs: a list is cheaper than a set.
        let mut taken: Vec<(&str, u32)> = Vec::new();
        for p in placement {
            let Some(entry) = self.nodes.get(&p.node) else {
                return Err(WorldError::UnknownNode {
                    job: job.to_string(),
                    node: p.node.clone(),
                });
            };
            if entry.node.ready_at.is_some() {
                return Err(WorldError::NodeNotReady {
                    job: job.to_string(),
                    node: p.node.clone(),
                });
            }
            for &gpu in &p.gpus {
                if !entry.node.node.gpus.iter().any(|g| g.index == gpu) {
                    return Err(WorldError::UnknownGpu {
                        job: job.to_string(),
                        node: p.node.clone(),
                        gpu,
                    });
                }
                let holder = entry
                    .held
                    .get(&gpu)
                    .map(|holder| &**holder)
                    .or_else(|| taken.contains(&(p.node.as_str(), gpu)).then_some(job));
                if let Some(holder) = holder {
                    return Err(WorldError::GpuHeld {
                        job: job.to_string(),
                        node: p.node.clone(),
                        gpu,
                        holder: holder.to_string(),
                    });
                }
                taken.push((p.node.as_str(), gpu));
            }
        }
        Ok(())
    }

    /// Seats a checked job: its GPUs held, its nodes busy, its end scheduled.
    fn seat(&mut self, job: WorldJob) {
        let name: Arc<str> = Arc::from(job.job.as_str());
        for p in &job.placement {
            if let Some(entry) = self.nodes.get_mut(&p.node) {
                for &gpu in &p.gpus {
                    entry.held.insert(gpu, name.clone());
                }
                entry.node.node.idle_since = None;
            }
        }
        self.reschedule(&job.job, None, job.ending());
        let seq = self.seq();
        self.jobs.insert(job.job.clone(), JobEntry { seq, job });
    }

    fn reschedule(
        &mut self,
        job: &str,
        old: Option<(Timestamp, Ending)>,
        new: Option<(Timestamp, Ending)>,
    ) {
        if let Some((at, _)) = old {
            self.due.remove(&Due {
                at,
                name: job.to_string(),
                what: DueKind::JobEnd,
            });
        }
        if let Some((at, _)) = new {
            self.due.insert(Due {
                at,
                name: job.to_string(),
                what: DueKind::JobEnd,
            });
        }
    }

    /// `job` leaves at `at`: its GPUs free (its nodes idle since `at` when
    /// it was their last job), recorded as completed when it exited or was
    /// terminated.
    fn leave(&mut self, job: &str, at: Timestamp, ending: Ending) -> Option<WorldEvent> {
        let entry = self.jobs.remove(job)?;
        let job = entry.job;
        for p in &job.placement {
            if let Some(node) = self.nodes.get_mut(&p.node) {
                node.held.retain(|_, holder| **holder != *job.job);
                if node.held.is_empty() {
                    node.node.node.idle_since.get_or_insert(at);
                }
            }
        }
        match (ending, job.stop) {
            (Ending::Stop, Some(stop)) => {
                if stop.kind == StopKind::Terminate {
                    self.completed.push(CompletedJob {
                        job: job.job.clone(),
                        finished: at,
                        exit_code: None,
                        reason: stop.reason,
                    });
                }
                let preempted_for = stop.for_job.filter(|_| stop.kind == StopKind::Preempt);
                Some(WorldEvent::Stopped {
                    job: job.job,
                    at,
                    kind: stop.kind,
                    placement: job.placement,
                    preempted_for,
                })
            }
            _ => {
                self.completed.push(CompletedJob {
                    job: job.job.clone(),
                    finished: at,
                    exit_code: Some(job.exit_code),
                    reason: Some(exit_reason(job.exit_code)),
                });
                Some(WorldEvent::Exited {
                    job: job.job,
                    at,
                    exit_code: job.exit_code,
                })
            }
        }
    }
}

/// A completed job's reason for an exit code, as the reconciler words it.
pub fn exit_reason(exit_code: i32) -> String {
    match exit_code {
        0 => "succeeded".to_string(),
        code => format!("failed: exit code {code}"),
    }
}

/// Hands a stopped preempted job's GPUs to the job it was preempted for:
/// appended to its queue entry's `nominated`, or a new entry first seen at
/// `since`. (For callers that keep the queue beside a [`World`].)
pub fn nominate(queued: &mut Vec<QueuedJob>, for_job: &str, gpus: Vec<NodeGpus>, since: Timestamp) {
    match queued.iter_mut().find(|q| q.job == for_job) {
        Some(q) => q.nominated.extend(gpus),
        None => queued.push(QueuedJob {
            job: for_job.to_string(),
            since,
            nominated: gpus,
        }),
    }
}

/// The fleet's jobs by name.
pub(crate) fn spec_index(fleet: &Fleet) -> BTreeMap<&str, &Object<JobSpec>> {
    fleet.jobs.iter().map(|j| (j.name(), j)).collect()
}

/// `None` for a time that saturated at the end of `chrono`'s range.
fn never(t: Timestamp) -> Option<Timestamp> {
    (t < chrono::DateTime::<chrono::Utc>::MAX_UTC).then_some(t)
}

/// The world as stored: rules, clock, pools, nodes and jobs in their order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Snapshot {
    rules: Rules,
    time: Timestamp,
    #[serde(default)]
    pools: BTreeMap<String, NodePoolSpec>,
    #[serde(default)]
    nodes: Vec<WorldNode>,
    #[serde(default)]
    running: Vec<WorldJob>,
    #[serde(default)]
    completed: Vec<CompletedJob>,
}

impl From<World> for Snapshot {
    fn from(world: World) -> Snapshot {
        Snapshot {
            rules: world.rules,
            time: world.clock,
            nodes: world.ordered_nodes().map(|(n, _)| n.clone()).collect(),
            running: world.ordered_jobs().cloned().collect(),
            pools: world.pools,
            completed: world.completed,
        }
    }
}

impl TryFrom<Snapshot> for World {
    type Error = WorldError;

    fn try_from(snapshot: Snapshot) -> Result<World, WorldError> {
        let mut world = World::new(snapshot.rules, snapshot.time);
        world.pools = snapshot.pools;
        for node in snapshot.nodes {
            world.add_node(node)?;
        }
        for job in snapshot.running {
            world.add_job(job)?;
        }
        world.completed = snapshot.completed;
        Ok(world)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use load::{SourceFile, load_fleet};
    use proptest::prelude::*;

    const FLEET: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: H100-SXM-80GB, count: 4}
  size: {min: 2, max: 12}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q}
spec:
  quota:
    - {model: H100-SXM-80GB, guaranteed: 8}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, default: true, gracePeriod: 5m}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: urgent}
spec: {value: 1000, preemptible: false, gracePeriod: 0s}
---
apiVersion: gitfleet/v1
kind: Job
metadata:
  name: annotated
  annotations: {gitfleet/sim-duration: 10m, gitfleet/sim-exit-code: \"3\"}
spec: {queue: q, replicas: 1, gpusPerReplica: 1, timeLimit: 1h}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: limited}
spec: {queue: q, replicas: 1, gpusPerReplica: 1, timeLimit: 1h}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: endless}
spec: {queue: q, priorityClass: urgent, replicas: 1, gpusPerReplica: 1}
---
apiVersion: gitfleet/v1
kind: Job
metadata:
  name: garbled
  annotations: {gitfleet/sim-duration: soon, gitfleet/sim-exit-code: one}
spec: {queue: q, replicas: 1, gpusPerReplica: 1, timeLimit: 2h}
";

    fn fleet() -> Fleet {
        let loaded = load_fleet(&[SourceFile::new("f.yaml", FLEET)]);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    fn t0() -> Timestamp {
        "2026-11-21T10:00:00Z".parse().unwrap()
    }

    fn min(m: i64) -> Timestamp {
        t0() + chrono::Duration::minutes(m)
    }

    fn d(text: &str) -> Duration {
        text.parse().unwrap()
    }

    fn on(node: &str, gpus: &[u32]) -> Vec<NodeGpus> {
        vec![NodeGpus {
            node: node.to_string(),
            gpus: gpus.to_vec(),
        }]
    }

    fn facts(run: Option<&str>) -> JobFacts {
        JobFacts {
            run_length: run.map(d),
            exit_code: 0,
            grace: d("5m"),
            ..JobFacts::default()
        }
    }

    fn world(rules: Rules) -> World {
        World::from_fleet(&fleet(), rules, t0())
    }

    fn place(job: &str, placement: Vec<NodeGpus>) -> Action {
        Action::Place {
            job: job.to_string(),
            placement,
            reason: String::new(),
        }
    }

    fn spec<'a>(fleet: &'a Fleet, name: &str) -> Option<&'a Object<JobSpec>> {
        fleet.jobs.iter().find(|j| j.name() == name)
    }

    #[test]
    fn run_length_rules() {
        let fleet = fleet();
        let exec = Rules::executor(Duration::ZERO);
        let generator = Rules::GENERATOR;
        let run = |name: &str, rules: &Rules| JobFacts::of(&fleet, spec(&fleet, name), rules);
        // The annotation wins under both rules.
        assert_eq!(run("annotated", &exec).run_length, Some(d("10m")));
        assert_eq!(run("annotated", &generator).run_length, Some(d("10m")));
        // The time limit counts only for the executor's rule.
        assert_eq!(run("limited", &exec).run_length, Some(d("1h")));
        assert_eq!(run("limited", &generator).run_length, None);
        // Neither: until stopped.
        assert_eq!(run("endless", &exec).run_length, None);
        // A garbled annotation is ignored.
        assert_eq!(run("garbled", &exec).run_length, Some(d("2h")));
        assert_eq!(run("garbled", &exec).exit_code, 0);
        // Grace from the priority class (default class without a spec).
        assert_eq!(run("endless", &exec).grace, Duration::ZERO);
        assert_eq!(run("limited", &exec).grace, d("5m"));
        assert_eq!(JobFacts::of(&fleet, None, &exec).grace, d("5m"));
        // Without the digest, the same facts.
        for name in ["annotated", "limited", "endless", "garbled", "none"] {
            let spec = spec(&fleet, name);
            let digested = JobFacts::with_grace(spec, d("5m"), &exec);
            assert_eq!(digested.spec_digest, spec.map(|j| j.spec.runtime_digest()));
            let undigested = JobFacts::undigested(spec, d("5m"), &exec);
            assert_eq!(undigested.spec_digest, None);
            assert_eq!(
                JobFacts {
                    spec_digest: None,
                    ..digested
                },
                undigested
            );
        }

        // In the world: the executor's rule ends `limited` at its limit.
        let mut w = world(exec);
        w.apply_from_fleet(&fleet, &place("limited", on("p-0", &[0])), t0())
            .unwrap();
        w.apply_from_fleet(&fleet, &place("endless", on("p-0", &[1])), t0())
            .unwrap();
        assert_eq!(w.next_event(), Some(min(60)));
        let events = w.advance(min(24 * 60));
        assert_eq!(
            events,
            [WorldEvent::Exited {
                job: "limited".into(),
                at: min(60),
                exit_code: 0
            }]
        );
        assert!(w.job("endless").is_some(), "runs until stopped");
        assert_eq!(w.next_event(), None);

        // An explicit length (the trace simulator's).
        let mut w = world(Rules::GENERATOR);
        w.start("endless", &on("p-1", &[2]), &facts(Some("7m")), min(1))
            .unwrap();
        assert_eq!(w.job("endless").unwrap().exits_at(), Some(min(8)));
        assert_eq!(w.advance(min(8)).len(), 1);
    }

    #[test]
    fn exit_code_annotation() {
        let fleet = fleet();
        let mut w = world(Rules::GENERATOR);
        w.apply_from_fleet(&fleet, &place("annotated", on("p-0", &[0, 1])), t0())
            .unwrap();
        assert!(w.advance(min(9)).is_empty());
        let events = w.advance(min(10));
        assert_eq!(
            events,
            [WorldEvent::Exited {
                job: "annotated".into(),
                at: min(10),
                exit_code: 3
            }]
        );
        assert_eq!(
            w.completed(),
            [CompletedJob {
                job: "annotated".into(),
                finished: min(10),
                exit_code: Some(3),
                reason: Some("failed: exit code 3".into()),
            }]
        );
        assert_eq!(w.holder("p-0", 0), None, "its GPUs are free");
    }

    #[test]
    fn preempted_job_stops_exactly_at_since_plus_grace() {
        let mut w = world(Rules::GENERATOR);
        w.start("victim", &on("p-0", &[0, 1]), &facts(None), t0())
            .unwrap();
        let preempt = Action::Preempt {
            job: "victim".into(),
            for_job: "big".into(),
            reason: String::new(),
        };
        w.apply(&preempt, &facts(None), min(2)).unwrap();
        assert_eq!(w.next_event(), Some(min(7)));
        let running = w.running_jobs();
        assert_eq!(running[0].preempting_since, Some(min(2)));
        assert_eq!(running[0].preempted_for.as_deref(), Some("big"));
        let just_before = min(7) - chrono::Duration::milliseconds(1);
        assert!(w.advance(just_before).is_empty());
        assert_eq!(w.holder("p-0", 1), Some("victim"));
        // Preempted again (for another job): the deadline stays.
        w.preempt("victim", "bigger", d("1h"), just_before);
        assert_eq!(
            w.advance(min(7)),
            [WorldEvent::Stopped {
                job: "victim".into(),
                at: min(7),
                kind: StopKind::Preempt,
                placement: on("p-0", &[0, 1]),
                preempted_for: Some("bigger".into()),
            }]
        );
        assert_eq!(w.holder("p-0", 0), None);
        assert!(w.completed().is_empty(), "a preempted job is pending again");
        assert_eq!(w.node("p-0").unwrap().node.idle_since, Some(min(7)));
    }

    #[test]
    fn a_job_may_exit_during_its_grace_period() {
        let mut w = world(Rules::GENERATOR);
        w.start("a", &on("p-0", &[0]), &facts(Some("3m")), t0())
            .unwrap();
        w.start("b", &on("p-0", &[1]), &facts(Some("5m")), t0())
            .unwrap();
        w.preempt("a", "x", d("5m"), min(1));
        w.preempt("b", "x", d("4m"), min(1));
        let events = w.advance(min(60));
        assert_eq!(
            events[0],
            WorldEvent::Exited {
                job: "a".into(),
                at: min(3),
                exit_code: 0
            }
        );
        assert!(
            matches!(&events[1], WorldEvent::Stopped { job, at, .. } if job == "b" && *at == min(5)),
            "on a tie the stop wins: {events:?}"
        );
    }

    #[test]
    fn scale_up_nodes_appear_at_now_plus_delay() {
        let mut w = world(Rules::executor(d("5m")));
        let up = Action::Scale {
            pool: "p".into(),
            from: 2,
            to: 4,
            reason: String::new(),
            nodes: Vec::new(),
        };
        assert!(w.apply(&up, &facts(None), min(1)).unwrap().is_empty());
        assert_eq!(w.pool_nodes("p").count(), 4);
        assert_eq!(w.ready_nodes().len(), 2);
        assert_eq!(w.next_event(), Some(min(6)));
        assert_eq!(
            w.start("j", &on("p-2", &[0]), &facts(None), min(1)),
            Err(WorldError::NodeNotReady {
                job: "j".into(),
                node: "p-2".into()
            })
        );
        // Carried out again: the nodes being provisioned count.
        w.apply(&up, &facts(None), min(2)).unwrap();
        assert_eq!(w.pool_nodes("p").count(), 4);
        assert!(
            w.advance(min(6) - chrono::Duration::milliseconds(1))
                .is_empty()
        );
        assert_eq!(
            w.advance(min(6)),
            [
                WorldEvent::NodeReady {
                    node: "p-2".into(),
                    at: min(6)
                },
                WorldEvent::NodeReady {
                    node: "p-3".into(),
                    at: min(6)
                },
            ]
        );
        let names: Vec<String> = w.ready_nodes().into_iter().map(|n| n.name).collect();
        assert_eq!(names, ["p-0", "p-1", "p-2", "p-3"]);
        assert_eq!(w.node("p-3").unwrap().node.idle_since, Some(min(6)));

        // Without a delay they are there at once; never beyond `max` (12).
        let mut w = world(Rules::GENERATOR);
        let events = w.scale("p", 1000, &[], min(1)).unwrap();
        assert_eq!(events.len(), 10);
        assert!(events.iter().all(|e| e.at() == min(1)));
        assert_eq!(w.ready_nodes().len(), 12);
        assert_eq!(
            w.scale("nope", 3, &[], t0()),
            Err(WorldError::UnknownPool {
                pool: "nope".into()
            })
        );
    }

    #[test]
    fn scale_down_removes_named_then_newest() {
        let mut w = world(Rules::GENERATOR);
        w.scale("p", 12, &[], t0()).unwrap();
        w.start("busy", &on("p-11", &[0]), &facts(None), t0())
            .unwrap();
        let down = Action::Scale {
            pool: "p".into(),
            from: 12,
            to: 9,
            reason: String::new(),
            nodes: vec!["p-1".into(), "ghost".into()],
        };
        w.apply(&down, &facts(None), min(1)).unwrap();
        let names: Vec<String> = w.ready_nodes().into_iter().map(|n| n.name).collect();
        // p-1 (named), then the newest idle ones: p-10, p-9 (p-11 runs a job).
        assert_eq!(
            names,
            [
                "p-0", "p-2", "p-3", "p-4", "p-5", "p-6", "p-7", "p-8", "p-11"
            ]
        );
        // A provisioning node can be removed too; its readiness is forgotten.
        let mut w = world(Rules::executor(d("5m")));
        w.scale("p", 3, &[], t0()).unwrap();
        w.scale("p", 2, &[], t0()).unwrap();
        assert_eq!(w.next_event(), None);
        assert!(w.node("p-2").is_none());
    }

    #[test]
    fn place_is_idempotent_and_refuses_taken_or_unknown_gpus() {
        let mut w = world(Rules::GENERATOR);
        w.start("a", &on("p-0", &[0, 1]), &facts(Some("1h")), t0())
            .unwrap();
        let before = w.clone();
        w.apply(&place("a", on("p-1", &[3])), &facts(None), min(5))
            .unwrap();
        assert_eq!(w, before, "placing a running job changes nothing");
        let refused = [
            (on("p-0", &[1]), "held by a"),
            (on("p-9", &[0]), "does not exist"),
            (on("p-1", &[4]), "has no GPU 4"),
            (on("p-1", &[2, 2]), "held by b"),
        ];
        for (placement, message) in refused {
            let err = w.start("b", &placement, &facts(None), t0()).unwrap_err();
            assert!(err.to_string().contains(message), "{err}");
            assert_eq!(w, before);
        }
    }

    #[test]
    fn terminate_and_cancel_stop_at_once() {
        let mut w = world(Rules::GENERATOR);
        w.start("t", &on("p-0", &[0]), &facts(None), t0()).unwrap();
        w.start("c", &on("p-1", &[0]), &facts(None), t0()).unwrap();
        let terminate = Action::Terminate {
            job: "t".into(),
            reason: "time limit 1h exceeded".into(),
        };
        let events = w.apply(&terminate, &facts(None), min(3)).unwrap();
        assert_eq!(
            events,
            [WorldEvent::Stopped {
                job: "t".into(),
                at: min(3),
                kind: StopKind::Terminate,
                placement: on("p-0", &[0]),
                preempted_for: None,
            }]
        );
        let cancel = Action::Cancel {
            job: "c".into(),
            reason: "removed".into(),
        };
        assert_eq!(w.apply(&cancel, &facts(None), min(3)).unwrap().len(), 1);
        assert_eq!(w.jobs().count(), 0);
        assert_eq!(
            w.completed(),
            [CompletedJob {
                job: "t".into(),
                finished: min(3),
                exit_code: None,
                reason: Some("time limit 1h exceeded".into()),
            }]
        );
        // Unknown jobs and nodes change nothing.
        let before = w.clone();
        assert!(
            w.apply(&terminate, &facts(None), min(4))
                .unwrap()
                .is_empty()
        );
        w.preempt("ghost", "x", d("1m"), min(4));
        assert!(!w.drain("ghost"));
        assert_eq!(w, before);
        assert!(w.drain("p-0"));
        assert!(w.node("p-0").unwrap().drained);
    }

    #[test]
    fn idle_since_follows_the_jobs() {
        let mut w = world(Rules::GENERATOR);
        assert_eq!(w.node("p-0").unwrap().node.idle_since, Some(t0()));
        w.start("a", &on("p-0", &[0]), &facts(Some("3m")), min(1))
            .unwrap();
        w.start("b", &on("p-0", &[1]), &facts(Some("4m")), min(1))
            .unwrap();
        assert_eq!(w.node("p-0").unwrap().node.idle_since, None);
        w.advance(min(10));
        assert_eq!(
            w.node("p-0").unwrap().node.idle_since,
            Some(min(5)),
            "idle since its last job left"
        );
        let observed = w.to_observed();
        assert_eq!(observed.time, Some(min(10)));
        assert_eq!(observed.nodes.len(), 2);
        assert_eq!(observed.completed.len(), 2);
    }

    #[test]
    fn huge_times_never_come() {
        let huge = Duration::from_millis(u64::MAX);
        let mut w = world(Rules::executor(huge));
        w.start("a", &on("p-0", &[0]), &facts(None), t0()).unwrap();
        w.start(
            "b",
            &on("p-0", &[1]),
            &JobFacts {
                run_length: Some(huge),
                ..JobFacts::default()
            },
            t0(),
        )
        .unwrap();
        w.preempt("a", "x", huge, t0());
        w.scale("p", 3, &[], t0()).unwrap();
        assert_eq!(w.next_event(), None);
        assert!(
            w.advance(chrono::DateTime::<chrono::Utc>::MAX_UTC)
                .is_empty()
        );
        assert_eq!(w.jobs().count(), 2);
        assert_eq!(w.ready_nodes().len(), 2, "p-2 is provisioned forever");
    }

    #[test]
    fn from_observed_and_storage_round_trip() {
        let fleet = fleet();
        let mut w = World::from_fleet(&fleet, Rules::executor(d("2m")), t0());
        w.apply_from_fleet(&fleet, &place("annotated", on("p-0", &[0])), t0())
            .unwrap();
        w.start("x", &on("p-1", &[0]), &facts(None), t0()).unwrap();
        w.preempt("x", "annotated", d("5m"), min(1));
        w.scale("p", 3, &[], min(1)).unwrap();
        w.drain("p-1");
        let json = serde_json::to_string(&w).unwrap();
        let back: World = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w);
        assert_eq!(back.next_event(), w.next_event());

        // A stored world whose GPU is held twice is refused.
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        value["running"][1]["placement"] = serde_json::json!([{"node": "p-0", "gpus": [0]}]);
        assert!(serde_json::from_value::<World>(value).is_err());

        // Through an observed state: the same running jobs and stops.
        let observed = w.to_observed();
        let (again, refused) = World::from_observed(&fleet, &observed, w.rules(), min(1));
        assert!(refused.is_empty());
        assert_eq!(again.running_jobs(), observed.running);
        assert_eq!(again.job("x").unwrap().ends_at(), Some(min(6)));
        assert_eq!(again.job("annotated").unwrap().ends_at(), Some(min(10)));
    }

    #[test]
    fn nominate_extends_or_adds_the_queue_entry() {
        let mut queued = vec![QueuedJob {
            job: "a".into(),
            since: t0(),
            nominated: on("p-0", &[0]),
        }];
        nominate(&mut queued, "a", on("p-1", &[1]), min(1));
        nominate(&mut queued, "b", on("p-2", &[2]), min(1));
        assert_eq!(queued[0].nominated.len(), 2);
        assert_eq!(queued[1].since, min(1));
        assert_eq!(queued[1].nominated, on("p-2", &[2]));
    }

    /// One step of a random run.
    #[derive(Debug, Clone)]
    enum Op {
        Place {
            job: u8,
            node: u8,
            gpus: u8,
            run: Option<u16>,
        },
        Preempt {
            job: u8,
            for_job: u8,
            grace: u16,
        },
        Terminate(u8),
        Cancel(u8),
        Scale {
            to: u8,
            named: Option<u8>,
        },
        Drain(u8),
        Advance {
            minutes: u32,
            split: u32,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..6u8, 0..5u8, 1..16u8, proptest::option::of(0..20u16))
                .prop_map(|(job, node, gpus, run)| Op::Place { job, node, gpus, run }),
            3 => (0..6u8, 0..6u8, 0..10u16)
                .prop_map(|(job, for_job, grace)| Op::Preempt { job, for_job, grace }),
            1 => (0..6u8).prop_map(Op::Terminate),
            1 => (0..6u8).prop_map(Op::Cancel),
            1 => (0..7u8, proptest::option::of(0..6u8))
                .prop_map(|(to, named)| Op::Scale { to, named }),
            1 => (0..6u8).prop_map(Op::Drain),
            4 => (0..30u32, 0..30u32)
                .prop_map(|(minutes, split)| Op::Advance { minutes, split }),
        ]
    }

    /// What the test expects of a running job.
    #[derive(Debug, Clone, Copy)]
    struct Expect {
        exits: Option<Timestamp>,
        stops: Option<Timestamp>,
    }

    /// Minutes: coarse, so that ends and stops often fall together.
    fn mins(m: impl Into<u64>) -> Duration {
        Duration::from_secs(m.into() * 60)
    }

    fn check_invariants(w: &World) -> Result<(), TestCaseError> {
        let mut held: BTreeMap<(String, u32), String> = BTreeMap::new();
        for job in w.jobs() {
            for p in &job.placement {
                let node = w.node(&p.node);
                prop_assert!(node.is_some_and(|n| n.ready_at.is_none()));
                for &gpu in &p.gpus {
                    let before = held.insert((p.node.clone(), gpu), job.job.clone());
                    prop_assert!(before.is_none(), "GPU {} {gpu} held twice", p.node);
                    prop_assert_eq!(w.holder(&p.node, gpu), Some(job.job.as_str()));
                }
            }
        }
        for node in w.nodes() {
            let busy = held.keys().any(|(n, _)| *n == node.node.name);
            let held_here = (0..4).filter(|g| w.holder(&node.node.name, *g).is_some());
            prop_assert_eq!(busy, held_here.count() > 0);
            prop_assert_eq!(busy, node.node.idle_since.is_none());
        }
        prop_assert!(w.next_event().is_none_or(|t| t >= w.now()));
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_runs_keep_the_rules(
            ops in proptest::collection::vec(op(), 1..60),
            delay in 0..5u64,
        ) {
            let rules = Rules::executor(mins(delay));
            let mut w = world(rules);
            let mut expect: BTreeMap<String, Expect> = BTreeMap::new();
            let mut ready_at: BTreeMap<String, Timestamp> = BTreeMap::new();
            for op in ops {
                let now = w.now();
                match op {
                    Op::Place { job, node, gpus, run } => {
                        let job = format!("j{job}");
                        let gpus: Vec<u32> = (0..4).filter(|g| gpus & (1 << g) != 0).collect();
                        let placement = on(&format!("p-{node}"), &gpus);
                        let facts = JobFacts {
                            run_length: run.map(mins),
                            exit_code: i32::from(node),
                            grace: Duration::ZERO,
                            ..JobFacts::default()
                        };
                        let before = w.clone();
                        let result = w.apply(&place(&job, placement), &facts, now);
                        if before.job(&job).is_some() {
                            prop_assert_eq!(&w, &before, "place is idempotent");
                        } else if result.is_ok() {
                            expect.insert(job, Expect {
                                exits: run.map(|r| after(now, mins(r))),
                                stops: None,
                            });
                        } else {
                            prop_assert_eq!(&w, &before, "a refused place changes nothing");
                        }
                    }
                    Op::Preempt { job, for_job, grace } => {
                        let job = format!("j{job}");
                        let action = Action::Preempt {
                            job: job.clone(),
                            for_job: format!("j{for_job}"),
                            reason: String::new(),
                        };
                        let facts = JobFacts { grace: mins(grace), ..JobFacts::default() };
                        prop_assert!(w.apply(&action, &facts, now).unwrap().is_empty());
                        if let Some(e) = expect.get_mut(&job) {
                            e.stops.get_or_insert(after(now, mins(grace)));
                        }
                    }
                    Op::Terminate(job) | Op::Cancel(job) => {
                        let job = format!("j{job}");
                        let action = match op {
                            Op::Terminate(_) => Action::Terminate { job: job.clone(), reason: "limit".into() },
                            _ => Action::Cancel { job: job.clone(), reason: "gone".into() },
                        };
                        let events = w.apply(&action, &JobFacts::default(), now).unwrap();
                        prop_assert_eq!(events.len(), usize::from(expect.remove(&job).is_some()));
                        prop_assert!(w.job(&job).is_none());
                    }
                    Op::Scale { to, named } => {
                        let remove: Vec<String> = named.map(|n| format!("p-{n}")).into_iter().collect();
                        let before: BTreeSet<String> = w.nodes().map(|n| n.node.name.clone()).collect();
                        let busy_before: Vec<String> = before
                            .iter()
                            .filter(|n| (0..4).any(|g| w.holder(n, g).is_some()))
                            .cloned()
                            .collect();
                        let current = before.len();
                        let events = w.scale("p", u32::from(to), &remove, now).unwrap();
                        let after_names: BTreeSet<String> = w.nodes().map(|n| n.node.name.clone()).collect();
                        for busy in &busy_before {
                            prop_assert!(after_names.contains(busy), "a busy node is never removed");
                        }
                        if usize::from(to) >= current {
                            prop_assert_eq!(after_names.len(), usize::from(to));
                            for new in after_names.difference(&before) {
                                ready_at.insert(new.clone(), after(now, mins(delay)));
                            }
                            prop_assert_eq!(events.len(), if delay == 0 { usize::from(to) - current } else { 0 });
                        } else {
                            let idle = current - busy_before.len();
                            prop_assert_eq!(after_names.len(), current - (current - usize::from(to)).min(idle));
                            if let Some(name) = remove.first()
                                && before.contains(name)
                                && !busy_before.contains(name)
                            {
                                prop_assert!(!after_names.contains(name), "the named node goes first");
                            }
                        }
                        ready_at.retain(|n, _| after_names.contains(n));
                    }
                    Op::Drain(node) => {
                        let name = format!("p-{node}");
                        prop_assert_eq!(w.drain(&name), w.node(&name).is_some());
                    }
                    Op::Advance { minutes, split } => {
                        let to = after(now, mins(minutes));
                        let mid = after(now, mins(split.min(minutes)));
                        let mut stepped = w.clone();
                        let mut step_events = stepped.advance(mid);
                        step_events.extend(stepped.advance(to));
                        let events = w.advance(to);
                        prop_assert_eq!(&stepped, &w, "one step or two: the same world");
                        prop_assert_eq!(&step_events, &events, "one step or two: the same events");
                        for pair in events.windows(2) {
                            prop_assert!(pair[0].at() <= pair[1].at(), "events in time order");
                        }
                        for event in &events {
                            prop_assert!(event.at() <= to);
                            match event {
                                WorldEvent::Exited { job, at, .. } => {
                                    let e = expect.remove(job).unwrap();
                                    prop_assert_eq!(Some(*at), e.exits);
                                    prop_assert!(e.stops.is_none_or(|s| *at < s));
                                }
                                WorldEvent::Stopped { job, at, kind, .. } => {
                                    prop_assert_eq!(*kind, StopKind::Preempt);
                                    let e = expect.remove(job).unwrap();
                                    prop_assert_eq!(Some(*at), e.stops, "stops at since + grace");
                                    prop_assert!(e.exits.is_none_or(|x| *at <= x));
                                }
                                WorldEvent::NodeReady { node, at } => {
                                    prop_assert_eq!(Some(*at), ready_at.remove(node), "ready at scale time + delay");
                                }
                            }
                        }
                        prop_assert!(w.next_event().is_none_or(|t| t > to));
                        prop_assert_eq!(w.now(), to);
                    }
                }
                check_invariants(&w)?;
                let running: BTreeSet<&str> = w.jobs().map(|j| j.job.as_str()).collect();
                let expected: BTreeSet<&str> = expect.keys().map(String::as_str).collect();
                prop_assert_eq!(running, expected);
            }
        }
    }
}
