//! Scheduler mode: gitfleet decides placement, Slurm runs the jobs.
//!
//! - Place: one Slurm job per gang, `sbatch` pinned to the planned nodes
//!   (`--nodelist`, `--ntasks-per-node`, `--gres=gpu:<type>:<n>`), held,
//!   then released ([`Jobs::start`]). Its comment `gitfleet:<job>:<attempt>`
//!   is looked up before submitting, so an intent carried out again after a
//!   crash never submits twice. Its id is kept in the [`KeyValue`] store.
//!   The job's `slurm:` section adds its `sbatch` options (CPUs and memory
//!   per task, constraint, output paths), each one argument.
//! - Observe: `sinfo` for the nodes ([`crate::nodes`]), `squeue --json`
//!   for the jobs (finished ones stay there `MinJobAge`), `sacct` for those
//!   that left it; a job no longer active is `Exited` (with its code) or,
//!   when gitfleet stopped it, `Stopped`.
//! - Preempt: `scancel --signal=TERM`, then plain `scancel` once the
//!   class's grace period is over, or with [`PreemptMode::Requeue`]
//!   `scontrol requeuehold`: the same Slurm job goes back to pending, held,
//!   and is placed again with `scontrol update` (nodes, comment) and
//!   released instead of a new `sbatch`. Terminate and cancel: `scancel`.
//! - Drain: `scontrol update NodeName=… State=DRAIN Reason=gitfleet: …`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use exec::{ActionContext, Event, ExecError, JobView, KeyValue, Observation, Outcome, StopKind};
use model::observed::{NodeGpus, Timestamp};
use model::plan::Action;
use model::spec::{Fleet, JobSpec, Object};

use crate::desired::Mapping;
use crate::jobs::{ImageOption, Jobs, SlurmJob, Submit};
use crate::nodes::{PoolInfo, SINFO_FORMAT, SlurmNode, observed, parse_sinfo, pools};
use crate::rest::RestClient;
use crate::sacctmgr::{RunError, Runner};
use crate::state::PreemptMode;

const JOB_IDS: &str = "slurm/job/";
/// A requeue-mode job's last submission's [`Submit::shape`], with its id.
const SHAPES: &str = "slurm/shape/";

/// Scheduler mode's part of the Slurm executor.
#[derive(Debug)]
pub struct Scheduler<R> {
    jobs: Jobs<R>,
    user: String,
    mapping: Mapping,
    store: Arc<dyn KeyValue>,
    pools: Vec<PoolInfo>,
    default_class: Option<String>,
    /// The nodes at the last observation.
    nodes: BTreeMap<String, SlurmNode>,
    /// Nodes drained since.
    drained: BTreeSet<String>,
    /// Accounts `user` was associated with by this process.
    joined: BTreeSet<String>,
    /// Slurm jobs killed (or requeued) after their grace period.
    killed: BTreeSet<u64>,
    /// How gitfleet's own preemptions end.
    preempt: PreemptMode,
    /// How a Job's `image` is passed to `sbatch`, if at all.
    image: Option<ImageOption>,
    /// The fleet's jobs, once a fleet was set.
    fleet_jobs: Option<BTreeSet<String>>,
}

/// A requeue-mode submission as kept: the Slurm job and its
/// [`Submit::shape`].
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
struct Shape {
    id: u64,
    args: Vec<String>,
}

fn failed(action: &'static str, subject: &str, e: RunError) -> ExecError {
    if e.is_unreachable() {
        ExecError::Transient {
            what: format!("slurm {action} {subject}"),
            message: e.to_string(),
            retry_after: None,
        }
    } else {
        ExecError::Action {
            action,
            subject: subject.to_string(),
            message: e.to_string(),
        }
    }
}

fn refused(action: &'static str, subject: &str, message: impl Into<String>) -> ExecError {
    ExecError::Action {
        action,
        subject: subject.to_string(),
        message: message.into(),
    }
}

/// The Slurm job name of a gitfleet job.
pub fn job_name(job: &str) -> String {
    format!("gitfleet-{job}")
}

fn is_gitfleets(slurm: &SlurmJob, job: &str) -> bool {
    slurm.name == job_name(job) && slurm.comment.starts_with(&format!("gitfleet:{job}:"))
}

/// The nodes of a placement, in order, each with its replica count.
fn per_node(placement: &[NodeGpus]) -> Vec<(&str, u32)> {
    let mut nodes: Vec<(&str, u32)> = Vec::new();
    for part in placement {
        match nodes.iter_mut().find(|(n, _)| *n == part.node) {
            Some((_, k)) => *k += 1,
            None => nodes.push((&part.node, 1)),
        }
    }
    nodes
}

impl<R: Runner> Scheduler<R> {
    /// Runs jobs through `runner` as `user` (who must be allowed to add
    /// its own associations, e.g. a Slurm operator or root).
    pub fn new(runner: R, user: String, mapping: Mapping, store: Arc<dyn KeyValue>) -> Self {
        Scheduler {
            jobs: Jobs::new(runner),
            user,
            mapping,
            store,
            pools: Vec::new(),
            default_class: None,
            nodes: BTreeMap::new(),
            drained: BTreeSet::new(),
            joined: BTreeSet::new(),
            killed: BTreeSet::new(),
            preempt: PreemptMode::Cancel,
            image: None,
            fleet_jobs: None,
        }
    }

    /// How gitfleet's own preemptions end: `Cancel` (the default:
    /// `scancel`, a new Slurm job when placed again) or `Requeue`
    /// (`scontrol requeuehold`, the same Slurm job placed again).
    pub fn with_preempt_mode(mut self, mode: PreemptMode) -> Self {
        self.preempt = mode;
        self
    }

    /// Passes a Job's `image` to `sbatch` with `option`; without one a
    /// Job with an `image` is refused.
    pub fn with_image_option(mut self, option: ImageOption) -> Self {
        self.image = Some(option);
        self
    }

    fn requeues(&self) -> bool {
        self.preempt == PreemptMode::Requeue
    }

    /// Reads the observed state (nodes, the queue, jobs that left it) from
    /// slurmrestd instead of `sinfo`, `squeue --json` and `sacct`
    /// (`--slurm-rest`); jobs are still submitted, released and cancelled,
    /// and nodes drained, with the commands.
    pub fn with_rest(mut self, rest: RestClient) -> Self {
        self.jobs = self.jobs.with_rest(rest);
        self
    }

    /// Starts an iteration: the queue listing kept for duplicate checks is
    /// dropped, so the first placement after it (a crash's intent carried
    /// out again included) lists the queue anew.
    pub fn begin(&mut self) {
        self.jobs.forget();
    }

    /// Takes the fleet's pools and default class.
    pub fn set_fleet(&mut self, fleet: &Fleet) {
        self.pools = pools(fleet, &self.mapping);
        self.default_class = fleet
            .priority_classes
            .iter()
            .find(|c| c.spec.default)
            .map(|c| c.name().to_string());
        self.fleet_jobs = Some(fleet.jobs.iter().map(|j| j.name().to_string()).collect());
    }

    fn stored_ids(&self) -> Result<BTreeMap<String, u64>, ExecError> {
        Ok(self
            .store
            .entries(JOB_IDS)?
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(JOB_IDS)?.to_string(), v.parse().ok()?)))
            .collect())
    }

    /// The nodes and what the running jobs did.
    pub fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        let nodes = match self.jobs.rest() {
            Some(rest) => rest
                .nodes()
                .map_err(|e| failed("observe", "nodes", RunError::from(e)))?,
            None => {
                let out = self
                    .jobs
                    .runner()
                    .run("sinfo", &args(&["-h", "-N", "-o", SINFO_FORMAT]))
                    .map_err(|e| failed("observe", "sinfo", e))?;
                parse_sinfo(&out).map_err(ExecError::Inventory)?
            }
        };
        self.nodes = nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
        self.drained
            .retain(|n| self.nodes.get(n).is_some_and(SlurmNode::drained));
        let observed_nodes = self
            .nodes
            .values()
            .map(|n| observed(n, &self.pools))
            .collect();

        let queue = self
            .jobs
            .list()
            .map_err(|e| failed("observe", "squeue", e))?;
        let ids = self.stored_ids()?;
        let mut events = Vec::new();
        let mut forget = Vec::new();
        let mut lost: Vec<(&JobView<'_>, u64)> = Vec::new();
        for view in running {
            let id = ids.get(view.job).copied();
            let found = queue
                .iter()
                .filter(|j| Some(j.id) == id || (id.is_none() && is_gitfleets(j, view.job)))
                .max_by_key(|j| j.id);
            let preempted = view.stop.is_some_and(|s| s.kind == StopKind::Preempt);
            match found {
                // Requeued and held by the preemption: it left its nodes.
                Some(job) if self.requeues() && preempted && job.held() => {
                    events.push(ended(view, now, None));
                    forget.push(view.job.to_string());
                }
                // Ended within its grace period (on SIGTERM): requeued
                // and held all the same, to be placed again under its id
                // (if Slurm no longer can, the next placement submits anew).
                Some(job) if self.requeues() && preempted && !job.active() => {
                    if let Err(e) = self.jobs.requeue_hold(job.id) {
                        tracing::debug!(job = view.job, id = job.id, "requeuehold: {e}");
                    }
                    events.push(ended(view, now, None));
                    forget.push(view.job.to_string());
                }
                Some(job) if job.active() => self.after_grace(now, view, job.id)?,
                Some(job) => {
                    events.push(ended(view, now, job.exit_code));
                    forget.push(view.job.to_string());
                }
                None => match id {
                    Some(id) => lost.push((view, id)),
                    None => {
                        events.push(ended(view, now, None));
                    }
                },
            }
        }
        if !lost.is_empty() {
            let ids: Vec<u64> = lost.iter().map(|(_, id)| *id).collect();
            let accounted = self
                .jobs
                .accounted(&ids)
                .map_err(|e| failed("observe", "sacct", e))?;
            for (view, id) in lost {
                let record = accounted.iter().find(|a| a.id == id);
                if record.is_some_and(|a| crate::jobs::is_active(&a.state)) {
                    continue;
                }
                events.push(ended(view, now, record.and_then(|a| a.exit_code)));
                forget.push(view.job.to_string());
            }
        }
        if self.requeues() {
            self.cancel_orphans(&queue)?;
        }
        if !forget.is_empty() {
            let changes: Vec<(String, Option<String>)> = forget
                .into_iter()
                .map(|job| (format!("{JOB_IDS}{job}"), None))
                .collect();
            self.store.write(&changes)?;
        }
        Ok(Observation {
            events,
            nodes: observed_nodes,
        })
    }

    /// A preempted job still running past its grace period is cancelled.
    fn after_grace(
        &mut self,
        now: Timestamp,
        view: &JobView<'_>,
        id: u64,
    ) -> Result<(), ExecError> {
        let Some(stop) = view.stop else {
            return Ok(());
        };
        let over = model::time::after(stop.since, view.grace) <= now;
        if stop.kind == StopKind::Preempt && over && self.killed.insert(id) {
            self.end_preempted(id)
                .map_err(|e| failed("preempt", view.job, e))?;
        }
        Ok(())
    }

    /// A preemption's last step: `scancel`, or `scontrol requeuehold`.
    fn end_preempted(&mut self, id: u64) -> Result<(), RunError> {
        match self.preempt {
            PreemptMode::Cancel => self.jobs.cancel(id, None),
            PreemptMode::Requeue => self.jobs.requeue_hold(id),
        }
    }

    /// Held jobs of gitfleet's whose job is no longer in the fleet (left
    /// by a preemption, or by a crash between `sbatch` and `scontrol
    /// release`) are cancelled: nothing would place them again.
    fn cancel_orphans(&self, queue: &[SlurmJob]) -> Result<(), ExecError> {
        let Some(fleet_jobs) = &self.fleet_jobs else {
            return Ok(());
        };
        for slurm in queue.iter().filter(|j| j.held()) {
            let Some(job) = slurm
                .comment
                .strip_prefix("gitfleet:")
                .and_then(|rest| rest.rsplit_once(':'))
                .map(|(job, _)| job)
            else {
                continue;
            };
            if slurm.name == job_name(job) && !fleet_jobs.contains(job) {
                tracing::debug!(job, id = slurm.id, "scancel: held, no longer in the fleet");
                self.jobs
                    .cancel(slurm.id, None)
                    .map_err(|e| failed("cancel", job, e))?;
            }
        }
        Ok(())
    }

    /// Whether `action` needs nothing more: pools are Slurm's (no scaling),
    /// and a drained node stays drained.
    pub fn already_done(&self, action: &Action) -> bool {
        match action {
            Action::Scale { .. } => true,
            Action::Drain { node, .. } => {
                self.drained.contains(node) || self.nodes.get(node).is_some_and(SlurmNode::drained)
            }
            _ => false,
        }
    }

    /// Carries out one action.
    pub fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
    ) -> Result<Outcome, ExecError> {
        match action {
            Action::Place { job, placement, .. } => self.place(job, placement, ctx),
            Action::Preempt { job, .. } => self.stop(StopKind::Preempt, job, ctx),
            Action::Terminate { job, .. } => self.stop(StopKind::Terminate, job, ctx),
            Action::Cancel { job, .. } => self.stop(StopKind::Cancel, job, ctx),
            Action::Drain { node, reason } => {
                let reason = format!("Reason=gitfleet: {reason}");
                self.jobs
                    .runner()
                    .run(
                        "scontrol",
                        &args(&[
                            "update",
                            &format!("NodeName={node}"),
                            "State=DRAIN",
                            &reason,
                        ]),
                    )
                    .map_err(|e| failed("drain", node, e))?;
                self.drained.insert(node.clone());
                Ok(Outcome::Done)
            }
            // Slurm's nodes are as slurm.conf declares them.
            Action::Scale { .. } => Ok(Outcome::Done),
        }
    }

    /// The `sbatch` submission of a placement.
    pub fn submission(
        &self,
        job: &str,
        placement: &[NodeGpus],
        spec: &Object<JobSpec>,
        attempt: Option<&str>,
    ) -> Result<Submit, ExecError> {
        let nodes = per_node(placement);
        let Some(&(first, k)) = nodes.first() else {
            return Err(refused("place", job, "an empty placement"));
        };
        if nodes.iter().any(|(_, n)| *n != k) {
            return Err(refused(
                "place",
                job,
                "replicas spread unevenly over nodes: Slurm's --ntasks-per-node and --gres are the same on every node",
            ));
        }
        if spec.spec.command.is_empty() {
            return Err(refused("place", job, "no command to run"));
        }
        let mut env = Vec::new();
        for (name, value) in &spec.spec.env {
            match value.inline() {
                Some(v) if !value.is_sensitive() => env.push((name.clone(), v.to_string())),
                _ => {
                    return Err(refused(
                        "place",
                        job,
                        format!(
                            "env {name}: sensitive values and `valueFrom` are not passed to Slurm jobs yet (the batch script is readable in Slurm)"
                        ),
                    ));
                }
            }
        }
        let image = match (&spec.spec.image, self.image) {
            (None, _) => None,
            (Some(image), Some(option)) => Some((option, image.clone())),
            (Some(_), None) => {
                return Err(refused(
                    "place",
                    job,
                    "image: not passed to Slurm without --slurm-image-option (container-image: pyxis's --container-image; container: an OCI bundle path for --container)",
                ));
            }
        };
        let gres_type = self
            .nodes
            .get(first)
            .and_then(|n| n.gpus.first())
            .map(|(t, _)| t.clone())
            .filter(|t| !t.is_empty())
            .or_else(|| {
                let model = spec.spec.gpu.as_ref()?.models.first()?;
                Some(self.mapping.gres_type(model))
            })
            .ok_or_else(|| refused("place", job, format!("node {first}: no GPU type known")))?;
        Ok(Submit {
            job: job.to_string(),
            attempt: attempt.unwrap_or("1").to_string(),
            account: spec.spec.queue.clone(),
            qos: spec
                .spec
                .priority_class
                .clone()
                .or_else(|| self.default_class.clone()),
            nodes: nodes.iter().map(|(n, _)| (*n).to_string()).collect(),
            tasks_per_node: k,
            gpus_per_node: k * spec.spec.gpus_per_replica,
            gres_type,
            time_limit: spec.spec.time_limit,
            command: spec.spec.command.clone(),
            env,
            options: spec.spec.slurm.as_deref().cloned().unwrap_or_default(),
            requeue: self.requeues(),
            image,
        })
    }

    fn place(
        &mut self,
        job: &str,
        placement: &[NodeGpus],
        ctx: &ActionContext<'_>,
    ) -> Result<Outcome, ExecError> {
        let spec = ctx
            .spec
            .ok_or_else(|| refused("place", job, "the job is not in Git"))?;
        let submit = self.submission(job, placement, spec, ctx.attempt.as_deref())?;
        self.join(&submit.account)
            .map_err(|e| failed("place", job, e))?;
        let id = if self.requeues() {
            let kept = self.kept_shape(job)?;
            self.start_or_reuse(job, &submit, kept)
        } else {
            self.jobs.start(&submit)
        }
        .map_err(|e| failed("place", job, e))?;
        self.killed.remove(&id);
        let mut changes = vec![(format!("{JOB_IDS}{job}"), Some(id.to_string()))];
        if self.requeues() {
            let shape = Shape {
                id,
                args: submit.shape(),
            };
            let text = serde_json::to_string(&shape)
                .map_err(|e| refused("place", job, format!("its shape: {e}")))?;
            changes.push((format!("{SHAPES}{job}"), Some(text)));
        }
        self.store.write(&changes)?;
        Ok(Outcome::Done)
    }

    /// Requeue mode's placement: this attempt's job if submitted already;
    /// else the job's held, requeued Slurm job placed again when submitted
    /// exactly so but for its nodes (else cancelled); else a new job.
    fn start_or_reuse(
        &mut self,
        job: &str,
        submit: &Submit,
        kept: Option<Shape>,
    ) -> Result<u64, RunError> {
        if self.jobs.find(submit)?.is_some() {
            return self.jobs.start(submit);
        }
        let Some(held) = self.jobs.requeued(submit)? else {
            return self.jobs.start(submit);
        };
        let same = kept.is_some_and(|shape| {
            shape
                == Shape {
                    id: held.id,
                    args: submit.shape(),
                }
        });
        if same {
            tracing::debug!(job, id = held.id, "placing the requeued job again");
            self.jobs.reuse(&held, submit)
        } else {
            tracing::debug!(job, id = held.id, "scancel: requeued, submitted otherwise");
            self.jobs.cancel(held.id, None)?;
            self.jobs.start(submit)
        }
    }

    /// The shape kept for `job`'s last submission (an unreadable one
    /// counts as none: the held job is then cancelled, not reused).
    fn kept_shape(&self, job: &str) -> Result<Option<Shape>, ExecError> {
        let key = format!("{SHAPES}{job}");
        Ok(self
            .store
            .entries(&key)?
            .get(&key)
            .and_then(|text| serde_json::from_str(text).ok()))
    }

    /// Associates the submitting user with `account` (once per process;
    /// an association that exists already is fine).
    fn join(&mut self, account: &str) -> Result<(), RunError> {
        if self.joined.contains(account) {
            return Ok(());
        }
        let user = &self.user;
        match self.jobs.runner().run(
            "sacctmgr",
            &args(&["-i", "add", "user", user, &format!("account={account}")]),
        ) {
            Ok(_) => {}
            Err(RunError::Failed { stderr, .. }) if stderr.contains("Nothing new added") => {}
            Err(e) => return Err(e),
        }
        self.joined.insert(account.to_string());
        Ok(())
    }

    fn stop(
        &mut self,
        kind: StopKind,
        job: &str,
        ctx: &ActionContext<'_>,
    ) -> Result<Outcome, ExecError> {
        let action = kind.as_str();
        let requeue = kind == StopKind::Preempt && self.requeues();
        let active: Vec<u64> = self
            .jobs
            .list()
            .map_err(|e| failed(kind.as_str(), job, e))?
            .into_iter()
            // A job requeued and held already is stopped.
            .filter(|j| is_gitfleets(j, job) && j.active() && !(requeue && j.held()))
            .map(|j| j.id)
            .collect();
        if active.is_empty() {
            return Ok(Outcome::Done);
        }
        for id in active {
            let graceful = kind == StopKind::Preempt && ctx.grace.as_secs() > 0;
            let result = if requeue && !graceful {
                tracing::debug!(job, id, action, "scontrol requeuehold");
                self.killed.insert(id);
                self.jobs.requeue_hold(id)
            } else {
                tracing::debug!(job, id, action, "scancel");
                self.jobs.cancel(id, graceful.then_some("TERM"))
            };
            result.map_err(|e| failed(kind.as_str(), job, e))?;
        }
        Ok(Outcome::Underway)
    }
}

fn ended(view: &JobView<'_>, now: Timestamp, exit_code: Option<i32>) -> Event {
    if view.stop.is_some() {
        Event::Stopped {
            job: view.job.to_string(),
            at: now,
        }
    } else {
        Event::Exited {
            job: view.job.to_string(),
            at: now,
            exit_code,
        }
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| (*a).to_string()).collect()
}

#[cfg(test)]
mod tests;
