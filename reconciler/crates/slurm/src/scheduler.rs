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
            options: spec.spec.slurm.clone().unwrap_or_default(),
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
mod tests {
    use super::*;
    use exec::{MemoryKv, StopView};
    use std::sync::Mutex;

    /// Answers `sinfo` and `squeue` from recorded outputs, `sbatch` with
    /// job 42, and keeps every command line.
    #[derive(Debug, Default)]
    struct Recorded {
        squeue: Mutex<String>,
        sacct: Mutex<String>,
        calls: Mutex<Vec<String>>,
    }

    impl Runner for Arc<Recorded> {
        fn run(&self, program: &str, args: &[String]) -> Result<String, RunError> {
            let line = format!("{program} {}", args.join(" "));
            self.calls.lock().unwrap().push(line);
            Ok(match program {
                "sinfo" => "gpu-1|idle|gpu*|gpu:h100-sxm-80gb:8|none\ngpu-2|idle|gpu*|gpu:h100-sxm-80gb:8|none\ngpu-3|down|gpu*|gpu:a100-sxm4-80gb:8|test\n".into(),
                "squeue" => self.squeue.lock().unwrap().clone(),
                "sbatch" => "42\n".into(),
                "sacct" => self.sacct.lock().unwrap().clone(),
                _ => String::new(),
            })
        }
    }

    impl Recorded {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.calls.lock().unwrap())
        }
        fn queue(&self, state: &str, reason: &str) {
            *self.squeue.lock().unwrap() = format!(
                r#"{{"jobs":[{{"job_id":42,"name":"gitfleet-train","comment":"gitfleet:train:1","job_state":"{state}","state_reason":"{reason}","exit_code":36608,"nodes":"gpu-[1-2]"}}]}}"#
            );
        }
    }

    fn fleet() -> Fleet {
        let yaml = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: nlp}\nspec:\n  quota:\n    - {model: H100-SXM-80GB, guaranteed: 16, limit: 16}\n---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: low}\nspec: {value: 1, preemptible: true, gracePeriod: 30s, default: true}\n---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: h100}\nspec:\n  gpu: {model: H100-SXM-80GB, count: 8}\n  size: {min: 2, max: 2}\n---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: a100}\nspec:\n  gpu: {model: A100-SXM4-80GB, count: 8}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: train}\nspec:\n  queue: nlp\n  replicas: 2\n  gpusPerReplica: 8\n  timeLimit: 5m\n  command: [sleep, '300']\n";
        let loaded = load::load_fleet(&[load::SourceFile::new("f.yaml", yaml)]);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn places_once_preempts_with_grace_reports_the_stop_and_drains() {
        let slurm = Arc::new(Recorded::default());
        *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut s = Scheduler::new(slurm.clone(), "gitfleet".into(), Mapping::default(), store);
        let fleet = fleet();
        s.set_fleet(&fleet);
        let now = at("2026-11-23T00:00:00Z");

        let seen = s.observe(now, &[]).unwrap();
        assert!(seen.events.is_empty());
        let pools: Vec<_> = seen.nodes.iter().map(|n| n.pool.as_deref()).collect();
        assert_eq!(pools, [Some("h100"), Some("h100"), Some("a100")]);
        assert!(seen.nodes[2].gpus.iter().all(|g| !g.healthy), "down");
        slurm.take();

        let placement: Vec<NodeGpus> = ["gpu-1", "gpu-2"]
            .iter()
            .map(|n| NodeGpus {
                node: (*n).to_string(),
                gpus: (0..8).collect(),
            })
            .collect();
        let place = Action::Place {
            job: "train".into(),
            placement: placement.clone(),
            reason: String::new(),
        };
        let ctx = ActionContext {
            spec: fleet.jobs.first(),
            attempt: Some("1".into()),
            grace: "30s".parse().unwrap(),
            revision: "r1",
        };
        // The duplicate check reads the listing the observation took.
        assert_eq!(s.execute(&place, &ctx).unwrap(), Outcome::Done);
        assert_eq!(
            slurm.take(),
            [
                "sacctmgr -i add user gitfleet account=nlp",
                "sbatch --parsable --hold --job-name=gitfleet-train --comment=gitfleet:train:1 --account=nlp --nodes=2 --ntasks=2 --ntasks-per-node=1 --nodelist=gpu-1,gpu-2 --gres=gpu:h100-sxm-80gb:8 --output=/dev/null --qos=low --time=5 --wrap=srun sleep 300",
                "scontrol release 42",
            ]
        );

        // Carried out again in the same iteration: known from sbatch's
        // answer, nothing run.
        slurm.queue("RUNNING", "None");
        assert_eq!(s.execute(&place, &ctx).unwrap(), Outcome::Done);
        assert_eq!(slurm.take(), Vec::<String>::new());
        // Carried out again after a crash (a new iteration, before its
        // observation): the queue is listed, the job found, not submitted
        // twice; a job already released is left alone.
        s.begin();
        assert_eq!(s.execute(&place, &ctx).unwrap(), Outcome::Done);
        assert_eq!(slurm.take(), ["squeue --json"]);

        let preempt = Action::Preempt {
            job: "train".into(),
            for_job: "other".into(),
            reason: String::new(),
        };
        assert_eq!(s.execute(&preempt, &ctx).unwrap(), Outcome::Underway);
        assert_eq!(slurm.take(), ["squeue --json", "scancel --signal=TERM 42"]);

        // Still running within the grace period: left; after it: cancelled.
        let mut view = JobView {
            job: "train",
            placement: &placement,
            started: Some(now),
            stop: Some(StopView {
                kind: StopKind::Preempt,
                since: now,
            }),
            spec: fleet.jobs.first(),
            grace: "30s".parse().unwrap(),
        };
        let seen = s.observe(at("2026-11-23T00:00:10Z"), &[view]).unwrap();
        assert!(seen.events.is_empty());
        assert!(!slurm.take().iter().any(|c| c.starts_with("scancel")));
        s.observe(at("2026-11-23T00:00:31Z"), &[view]).unwrap();
        assert!(slurm.take().contains(&"scancel 42".to_string()));

        // Ended: a stop (it was told to), an exit code otherwise.
        slurm.queue("FAILED", "NonZeroExitCode");
        let seen = s.observe(at("2026-11-23T00:00:40Z"), &[view]).unwrap();
        assert_eq!(
            seen.events,
            [Event::Stopped {
                job: "train".into(),
                at: at("2026-11-23T00:00:40Z")
            }]
        );
        view.stop = None;
        let seen = s.observe(at("2026-11-23T00:00:41Z"), &[view]).unwrap();
        assert_eq!(
            seen.events,
            [Event::Exited {
                job: "train".into(),
                at: at("2026-11-23T00:00:41Z"),
                exit_code: Some(143)
            }]
        );

        let drain = Action::Drain {
            node: "gpu-3".into(),
            reason: "GPUs 0-7 unhealthy".into(),
        };
        assert!(!s.already_done(&drain));
        slurm.take();
        assert_eq!(s.execute(&drain, &ctx).unwrap(), Outcome::Done);
        assert_eq!(
            slurm.take(),
            ["scontrol update NodeName=gpu-3 State=DRAIN Reason=gitfleet: GPUs 0-7 unhealthy"]
        );
        assert!(s.already_done(&drain));
    }

    #[test]
    fn requeue_mode_places_the_preempted_job_again_under_its_id() {
        let slurm = Arc::new(Recorded::default());
        *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store)
            .with_preempt_mode(PreemptMode::Requeue);
        let fleet = fleet();
        s.set_fleet(&fleet);
        let now = at("2026-11-23T00:00:00Z");
        s.observe(now, &[]).unwrap();
        slurm.take();
        let on = |nodes: &[&str]| -> Vec<NodeGpus> {
            nodes
                .iter()
                .map(|n| NodeGpus {
                    node: (*n).to_string(),
                    gpus: (0..8).collect(),
                })
                .collect()
        };
        let place = |nodes: &[&str]| Action::Place {
            job: "train".into(),
            placement: on(nodes),
            reason: String::new(),
        };
        let ctx = |attempt: &str, grace: &str| ActionContext {
            spec: fleet.jobs.first(),
            attempt: Some(attempt.into()),
            grace: grace.parse().unwrap(),
            revision: "r1",
        };
        s.execute(&place(&["gpu-1", "gpu-2"]), &ctx("1", "30s"))
            .unwrap();
        let calls = slurm.take();
        assert!(
            calls[1].contains(" --time=5 --requeue --wrap="),
            "{calls:?}"
        );
        assert_eq!(calls[2], "scontrol release 42");

        // Preempted with grace: signalled, then requeued and held.
        slurm.queue("RUNNING", "None");
        let preempt = Action::Preempt {
            job: "train".into(),
            for_job: "other".into(),
            reason: String::new(),
        };
        s.execute(&preempt, &ctx("1", "30s")).unwrap();
        assert_eq!(slurm.take(), ["squeue --json", "scancel --signal=TERM 42"]);
        let placement = on(&["gpu-1", "gpu-2"]);
        let view = JobView {
            job: "train",
            placement: &placement,
            started: Some(now),
            stop: Some(StopView {
                kind: StopKind::Preempt,
                since: now,
            }),
            spec: fleet.jobs.first(),
            grace: "30s".parse().unwrap(),
        };
        let seen = s.observe(at("2026-11-23T00:00:31Z"), &[view]).unwrap();
        assert!(seen.events.is_empty(), "still on its nodes");
        assert!(
            slurm
                .take()
                .contains(&"scontrol requeuehold 42".to_string())
        );
        // Back to pending, held: stopped (it holds no nodes).
        slurm.queue("PENDING", "JobHeldUser");
        let seen = s.observe(at("2026-11-23T00:00:40Z"), &[view]).unwrap();
        assert_eq!(
            seen.events,
            [Event::Stopped {
                job: "train".into(),
                at: at("2026-11-23T00:00:40Z")
            }]
        );
        assert!(!slurm.take().iter().any(|c| c.starts_with("scancel")));

        // Placed again (a new attempt, other nodes): the same Slurm job,
        // updated and released; nothing submitted.
        s.execute(&place(&["gpu-2", "gpu-1"]), &ctx("2", "0s"))
            .unwrap();
        assert_eq!(
            slurm.take(),
            [
                "scontrol update JobId=42 NodeList=gpu-2,gpu-1 Comment=gitfleet:train:2 StartTime=now",
                "scontrol release 42",
            ]
        );
        // Carried out again after a crash: found under its new comment.
        *slurm.squeue.lock().unwrap() = r#"{"jobs":[{"job_id":42,"name":"gitfleet-train","comment":"gitfleet:train:2","job_state":"RUNNING","state_reason":"None"}]}"#.into();
        s.begin();
        s.execute(&place(&["gpu-2", "gpu-1"]), &ctx("2", "0s"))
            .unwrap();
        assert_eq!(slurm.take(), ["squeue --json"]);

        // Preempted again, without grace: requeued at once.
        s.execute(&preempt, &ctx("2", "0s")).unwrap();
        assert_eq!(slurm.take(), ["squeue --json", "scontrol requeuehold 42"]);
        // Ended on SIGTERM within a grace period: requeued and held all
        // the same.
        slurm.queue("FAILED", "NonZeroExitCode");
        let seen = s.observe(at("2026-11-23T00:00:50Z"), &[view]).unwrap();
        assert_eq!(seen.events.len(), 1, "stopped");
        assert!(
            slurm
                .take()
                .contains(&"scontrol requeuehold 42".to_string())
        );

        // A held job submitted otherwise (the spec changed) is cancelled
        // and a new one submitted.
        slurm.queue("PENDING", "JobHeldUser");
        s.begin();
        let mut changed = fleet.jobs[0].clone();
        changed.spec.time_limit = Some("10m".parse().unwrap());
        let ctx3 = ActionContext {
            spec: Some(&changed),
            ..ctx("3", "0s")
        };
        s.execute(&place(&["gpu-1", "gpu-2"]), &ctx3).unwrap();
        let calls = slurm.take();
        assert_eq!(calls[..2], ["squeue --json", "scancel 42"]);
        assert!(calls[2].starts_with("sbatch "), "{calls:?}");

        // A held job whose job left the fleet is cancelled.
        let mut gone = fleet.clone();
        gone.jobs.clear();
        s.set_fleet(&gone);
        s.observe(at("2026-11-23T00:01:00Z"), &[]).unwrap();
        assert!(slurm.take().contains(&"scancel 42".to_string()));
    }

    #[test]
    fn an_image_needs_the_operators_option() {
        let slurm = Arc::new(Recorded::default());
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store.clone());
        let mut job = fleet().jobs[0].clone();
        job.spec.image = Some("nvcr.io/nvidia/pytorch:24.01-py3".into());
        job.spec.gpu = Some(model::spec::GpuSelector {
            models: vec!["H100-SXM-80GB".into()],
        });
        let part = |n: &str| NodeGpus {
            node: n.into(),
            gpus: (0..8).collect(),
        };
        let placement = [part("gpu-1"), part("gpu-2")];
        let e = s.submission("train", &placement, &job, None).unwrap_err();
        assert!(e.to_string().contains("--slurm-image-option"), "{e}");
        for (option, arg) in [
            (
                ImageOption::ContainerImage,
                "--container-image=nvcr.io/nvidia/pytorch:24.01-py3",
            ),
            (
                ImageOption::Container,
                "--container=nvcr.io/nvidia/pytorch:24.01-py3",
            ),
        ] {
            let s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store.clone())
                .with_image_option(option);
            let args = s
                .submission("train", &placement, &job, None)
                .unwrap()
                .sbatch_args();
            assert!(args.contains(&arg.to_string()), "{args:?}");
        }
    }

    /// Slurm jobs `train-0` … as the fleet's `train`, each on `gpu-1`.
    fn burst(fleet: &Fleet, n: usize) -> Vec<(Action, Object<JobSpec>)> {
        (0..n)
            .map(|i| {
                let mut spec = fleet.jobs[0].clone();
                spec.metadata.name = format!("train-{i}");
                let place = Action::Place {
                    job: format!("train-{i}"),
                    placement: vec![NodeGpus {
                        node: "gpu-1".into(),
                        gpus: (0..8).collect(),
                    }],
                    reason: String::new(),
                };
                (place, spec)
            })
            .collect()
    }

    #[test]
    fn a_burst_of_placements_lists_the_queue_once_per_iteration() {
        let slurm = Arc::new(Recorded::default());
        *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store);
        let fleet = fleet();
        s.set_fleet(&fleet);
        let squeues = |calls: &[String]| calls.iter().filter(|c| *c == "squeue --json").count();
        let sbatches = |calls: &[String]| calls.iter().filter(|c| c.starts_with("sbatch")).count();
        let run = |s: &mut Scheduler<Arc<Recorded>>, burst: &[(Action, Object<JobSpec>)]| {
            for (place, spec) in burst {
                let ctx = ActionContext {
                    spec: Some(spec),
                    attempt: Some("1".into()),
                    grace: "0s".parse().unwrap(),
                    revision: "r1",
                };
                assert_eq!(s.execute(place, &ctx).unwrap(), Outcome::Done);
            }
        };
        let jobs = burst(&fleet, 20);

        // An iteration: observed, then 20 placed: one listing, not 21.
        s.begin();
        s.observe(at("2026-11-23T00:00:00Z"), &[]).unwrap();
        run(&mut s, &jobs);
        let calls = slurm.take();
        assert_eq!((squeues(&calls), sbatches(&calls)), (1, 20));

        // A restart carrying out the same intents before observing: one
        // listing; every job found in it (Slurm's queue now holds them),
        // none submitted again.
        let queue: Vec<String> = (0..20)
            .map(|i| format!(r#"{{"job_id":{},"name":"gitfleet-train-{i}","comment":"gitfleet:train-{i}:1","job_state":"RUNNING","state_reason":"None"}}"#, 100 + i))
            .collect();
        *slurm.squeue.lock().unwrap() = format!(r#"{{"jobs":[{}]}}"#, queue.join(","));
        s.begin();
        run(&mut s, &jobs);
        let calls = slurm.take();
        assert_eq!((squeues(&calls), sbatches(&calls)), (1, 0));
    }

    #[test]
    fn a_job_gone_from_the_queue_is_read_from_sacct_by_its_id() {
        let slurm = Arc::new(Recorded::default());
        *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
        *slurm.sacct.lock().unwrap() = "42|gitfleet-train|COMPLETED|0:0\n".into();
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        store
            .write(&[("slurm/job/train".into(), Some("42".into()))])
            .unwrap();
        let mut s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store.clone());
        let fleet = fleet();
        s.set_fleet(&fleet);
        let placement = [NodeGpus {
            node: "gpu-1".into(),
            gpus: (0..8).collect(),
        }];
        let view = |job| JobView {
            job,
            placement: &placement,
            started: None,
            stop: None,
            spec: None,
            grace: "0s".parse().unwrap(),
        };
        let now = at("2026-11-23T00:00:00Z");
        let seen = s.observe(now, &[view("train"), view("lost")]).unwrap();
        assert_eq!(
            seen.events,
            [
                Event::Exited {
                    job: "lost".into(),
                    at: now,
                    exit_code: None
                },
                Event::Exited {
                    job: "train".into(),
                    at: now,
                    exit_code: Some(0)
                }
            ]
        );
        assert!(
            slurm
                .take()
                .contains(&"sacct -X -n -P -o JobIDRaw,JobName,State,ExitCode -j 42".to_string())
        );
        assert!(store.entries("slurm/job/").unwrap().is_empty(), "forgotten");
    }

    #[test]
    fn uneven_gangs_and_jobs_without_a_command_are_refused() {
        let slurm = Arc::new(Recorded::default());
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let s = Scheduler::new(slurm, "u".into(), Mapping::default(), store);
        let fleet = fleet();
        let job = fleet.jobs.first().unwrap();
        let part = |n: &str| NodeGpus {
            node: n.into(),
            gpus: vec![0],
        };
        let uneven = [part("gpu-1"), part("gpu-1"), part("gpu-2")];
        let e = s.submission("train", &uneven, job, None).unwrap_err();
        assert!(e.to_string().contains("unevenly"), "{e}");
        let even = [part("gpu-1"), part("gpu-1")];
        let mut job = job.clone();
        job.spec.gpu = Some(model::spec::GpuSelector {
            models: vec!["H100-SXM-80GB".into()],
        });
        let submit = s.submission("train", &even, &job, None).unwrap();
        assert_eq!(
            (
                submit.tasks_per_node,
                submit.gpus_per_node,
                submit.attempt.as_str()
            ),
            (2, 16, "1")
        );
        assert_eq!(submit.gres_type, "h100-sxm-80gb", "from the job's model");
        job.spec
            .env
            .insert("WANDB".into(), model::spec::EnvValue::Plain("run-1".into()));
        let submit = s.submission("train", &even, &job, None).unwrap();
        assert_eq!(submit.env, [("WANDB".to_string(), "run-1".to_string())]);
        let token: model::spec::EnvValue =
            serde_json::from_str(r#"{"value": "s3cr3t", "sensitive": true}"#).unwrap();
        job.spec.env.insert("TOKEN".into(), token);
        let e = s.submission("train", &even, &job, None).unwrap_err();
        assert!(e.to_string().contains("env TOKEN: sensitive"), "{e}");
        job.spec.command.clear();
        let e = s.submission("train", &even, &job, None).unwrap_err();
        assert!(e.to_string().contains("no command"), "{e}");
    }
}
