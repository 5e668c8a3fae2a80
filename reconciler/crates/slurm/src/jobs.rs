//! Scheduler mode's first pieces (not yet an executor): a gang submitted
//! with `sbatch` pinned to the nodes gitfleet planned and held until
//! released, found again by a deterministic name and comment (so a crash
//! between `sbatch` and recording it never submits twice), observed with
//! `squeue --json`, cancelled with `scancel`.

use std::collections::BTreeMap;

use model::spec::{Duration, SlurmSpec};
use serde::Deserialize;

use crate::rest::RestClient;
use crate::sacctmgr::{RunError, Runner};

/// A gang to submit: one task per planned node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submit {
    /// The gitfleet job's name.
    pub job: String,
    /// Which placement of the job this is (a new one after a preemption).
    pub attempt: String,
    /// The Slurm account (the job's queue).
    pub account: String,
    /// The QOS (the job's priority class), if any.
    pub qos: Option<String>,
    /// The planned nodes, each once.
    pub nodes: Vec<String>,
    /// Replicas (tasks) on each node.
    pub tasks_per_node: u32,
    /// GPUs per node (of all its replicas).
    pub gpus_per_node: u32,
    /// The GPUs' GRES type.
    pub gres_type: String,
    /// The job's time limit (rounded up to whole minutes).
    pub time_limit: Option<Duration>,
    /// What each replica runs.
    pub command: Vec<String>,
    /// Environment values of every replica (plain ones only: the batch
    /// script is readable in Slurm).
    pub env: Vec<(String, String)>,
    /// The job's `slurm:` section (the options gitfleet does not own).
    pub options: SlurmSpec,
    /// `--requeue`: a preemption requeues the job (held) rather than
    /// cancelling it (`--slurm-preempt-mode requeue` in scheduler mode).
    pub requeue: bool,
    /// The job's image and how it is passed (`--slurm-image-option`).
    pub image: Option<(ImageOption, String)>,
}

/// How a Job's `image` is passed to `sbatch` (`--slurm-image-option`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageOption {
    /// `--container-image=IMAGE` (the pyxis SPANK plugin: an image
    /// reference pulled by enroot).
    ContainerImage,
    /// `--container=IMAGE` (Slurm's own OCI support: the path of an OCI
    /// bundle on the nodes).
    Container,
}

impl ImageOption {
    /// The `sbatch` option.
    pub fn flag(self) -> &'static str {
        match self {
            ImageOption::ContainerImage => "--container-image",
            ImageOption::Container => "--container",
        }
    }
}

impl Submit {
    /// The Slurm job name: `gitfleet-<job>`.
    pub fn name(&self) -> String {
        format!("gitfleet-{}", self.job)
    }

    /// The comment that identifies this placement: `gitfleet:<job>:<attempt>`.
    pub fn comment(&self) -> String {
        format!("gitfleet:{}:{}", self.job, self.attempt)
    }

    /// `sbatch` arguments: held, pinned, `tasks_per_node` tasks per node.
    pub fn sbatch_args(&self) -> Vec<String> {
        let n = self.nodes.len();
        let per_node = self.tasks_per_node.max(1);
        let mut args = vec![
            "--parsable".to_string(),
            "--hold".to_string(),
            format!("--job-name={}", self.name()),
            format!("--comment={}", self.comment()),
            format!("--account={}", self.account),
            format!("--nodes={n}"),
            format!("--ntasks={}", n as u64 * u64::from(per_node)),
            format!("--ntasks-per-node={per_node}"),
            format!("--nodelist={}", self.nodes.join(",")),
            format!("--gres=gpu:{}:{}", self.gres_type, self.gpus_per_node),
            format!(
                "--output={}",
                self.options.output.as_deref().unwrap_or("/dev/null")
            ),
        ];
        if let Some(qos) = &self.qos {
            args.push(format!("--qos={qos}"));
        }
        if let Some(limit) = self.time_limit {
            args.push(format!("--time={}", limit.as_secs().div_ceil(60).max(1)));
        }
        if self.requeue {
            args.push("--requeue".to_string());
        }
        if let Some((option, image)) = &self.image {
            args.push(format!("{}={image}", option.flag()));
        }
        args.extend(self.option_args());
        let mut line: Vec<String> = Vec::new();
        if !self.env.is_empty() {
            line.push("env".to_string());
            line.extend(
                self.env
                    .iter()
                    .map(|(k, v)| shell_quote(&format!("{k}={v}"))),
            );
        }
        line.push("srun".to_string());
        line.extend(self.command.iter().map(|a| shell_quote(a)));
        args.push(format!("--wrap={}", line.join(" ")));
        args
    }

    /// What a requeued job keeps of its submission: the `sbatch` arguments
    /// but its nodes and comment (which [`Jobs::reuse`] updates). A held,
    /// requeued job is placed again only when this is unchanged.
    pub fn shape(&self) -> Vec<String> {
        self.sbatch_args()
            .into_iter()
            .filter(|a| !a.starts_with("--nodelist=") && !a.starts_with("--comment="))
            .collect()
    }

    /// The `slurm:` section's options, each one argument (`--opt=value`:
    /// no shell sees them, and a value cannot pass for another option).
    fn option_args(&self) -> Vec<String> {
        let o = &self.options;
        let mut args = Vec::new();
        if let Some(error) = &o.error {
            args.push(format!("--error={error}"));
        }
        if let Some(n) = o.cpus_per_task {
            args.push(format!("--cpus-per-task={n}"));
        }
        for (_, option, size) in o.memory() {
            args.push(format!("{option}={size}"));
        }
        if let Some(constraint) = &o.constraint {
            args.push(format!("--constraint={constraint}"));
        }
        args
    }
}

impl Submit {
    /// `scontrol update` arguments placing the held job `id` as this
    /// submission: its nodes, its comment, eligible now.
    pub fn update_args(&self, id: u64) -> Vec<String> {
        vec![
            "update".to_string(),
            format!("JobId={id}"),
            format!("NodeList={}", self.nodes.join(",")),
            format!("Comment={}", self.comment()),
            "StartTime=now".to_string(),
        ]
    }
}

/// `'…'` quoting for `sbatch --wrap` (a shell line).
pub fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        return arg.to_string();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// The reason `squeue` gives for a job submitted with `--hold`.
const HELD: &str = "JobHeldUser";

/// A job `sbatch` just accepted, as the kept listing holds it: held.
fn submitted(submit: &Submit, id: u64) -> SlurmJob {
    SlurmJob {
        id,
        name: submit.name(),
        comment: submit.comment(),
        state: "PENDING".into(),
        reason: HELD.into(),
        nodes: String::new(),
        gres_detail: Vec::new(),
        exit_code: None,
    }
}

/// A Slurm job as `squeue --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmJob {
    /// Slurm's job id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its comment.
    pub comment: String,
    /// `PENDING`, `RUNNING`, …
    pub state: String,
    /// Why it waits (`JobHeldUser`, …).
    pub reason: String,
    /// Its nodes (Slurm's host list, e.g. `gpu-[1-2]`).
    pub nodes: String,
    /// Its GPUs per node (`gpu:h100:8(IDX:0-7)`).
    pub gres_detail: Vec<String>,
    /// How it ended, once it has: the exit code (128 + N when killed by
    /// signal N).
    pub exit_code: Option<i32>,
}

impl SlurmJob {
    /// Whether it is pending and held (submitted held, or requeued held by
    /// a preemption): it holds no nodes.
    pub fn held(&self) -> bool {
        self.state.split_whitespace().next() == Some("PENDING") && self.reason == HELD
    }

    /// Whether it still holds (or waits for) its nodes: pending, running,
    /// suspended, completing, requeued…
    pub fn active(&self) -> bool {
        is_active(&self.state)
    }
}

/// Whether a Slurm job state still holds or waits for resources.
pub fn is_active(state: &str) -> bool {
    matches!(
        state.split_whitespace().next().unwrap_or(""),
        "PENDING"
            | "RUNNING"
            | "SUSPENDED"
            | "COMPLETING"
            | "CONFIGURING"
            | "REQUEUED"
            | "REQUEUE_HOLD"
            | "REQUEUE_FED"
            | "RESIZING"
            | "SIGNALING"
            | "STAGE_OUT"
            | "STOPPED"
    )
}

/// The exit code of a raw wait status (`squeue --json`'s `exit_code`).
fn wait_status(status: i64) -> i32 {
    let signal = status & 0x7f;
    let code = if signal != 0 {
        128 + signal
    } else {
        (status >> 8) & 0xff
    };
    i32::try_from(code).unwrap_or(-1)
}

/// The exit code of an ended job: what its state and code say (`None`
/// for a job cancelled or lost without a code).
pub(crate) fn ended_code(state: &str, code: i32) -> Option<i32> {
    let state = state.split_whitespace().next().unwrap_or("");
    match (state, code) {
        ("COMPLETED", c) => Some(c),
        (_, 0) => None,
        (_, c) => Some(c),
    }
}

/// The `sacct` fields [`parse_sacct`] reads
/// (`sacct -X -n -P -j IDS -o JobIDRaw,JobName,State,ExitCode`).
pub const SACCT_FORMAT: &str = "JobIDRaw,JobName,State,ExitCode";

/// A job as `sacct --parsable2` shows it, once it left the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountedJob {
    /// Slurm's job id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its state (`COMPLETED`, `CANCELLED`, `FAILED`, …; the first word).
    pub state: String,
    /// How it ended (as [`SlurmJob::exit_code`]), when it has.
    pub exit_code: Option<i32>,
}

/// Reads `sacct -X -n -P -o JobIDRaw,JobName,State,ExitCode` output
/// (`ExitCode` is `code:signal`).
pub fn parse_sacct(text: &str) -> Result<Vec<AccountedJob>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            let [id, name, state, exit] = fields.as_slice() else {
                return Err(format!("sacct: unexpected line `{line}`"));
            };
            let id = id
                .parse()
                .map_err(|_| format!("sacct: bad job id in `{line}`"))?;
            let state = state.split_whitespace().next().unwrap_or("").to_string();
            let (code, signal) = exit.split_once(':').unwrap_or((exit, "0"));
            let code: i32 = code.parse().unwrap_or(0);
            let signal: i32 = signal.parse().unwrap_or(0);
            let code = if signal != 0 { 128 + signal } else { code };
            Ok(AccountedJob {
                id,
                name: (*name).to_string(),
                exit_code: if is_active(&state) {
                    None
                } else {
                    ended_code(&state, code)
                },
                state,
            })
        })
        .collect()
}

/// A `squeue --json` document (Slurm 22.05, data parser 0.0.38), which is
/// also what slurmrestd's `GET /slurm/v0.0.38/jobs` serves.
#[derive(Debug, Deserialize)]
pub struct QueueResponse {
    /// Slurm's errors, if any.
    #[serde(default)]
    pub errors: Vec<crate::rest::ApiError>,
    /// The jobs.
    pub jobs: Vec<QueueJob>,
}

/// A job of a [`QueueResponse`] (the fields gitfleet reads).
#[derive(Debug, Deserialize)]
pub struct QueueJob {
    /// Slurm's job id.
    pub job_id: Option<u64>,
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its comment.
    #[serde(default)]
    pub comment: Option<String>,
    /// `PENDING`, `RUNNING`, …
    #[serde(default)]
    pub job_state: Option<String>,
    /// Why it waits.
    #[serde(default)]
    pub state_reason: Option<String>,
    /// Its nodes.
    #[serde(default)]
    pub nodes: Option<String>,
    /// Its GPUs per node.
    #[serde(default)]
    pub gres_detail: Option<Vec<String>>,
    /// The raw wait status, once ended.
    #[serde(default)]
    pub exit_code: Option<i64>,
}

impl QueueResponse {
    /// The jobs as gitfleet reads them.
    pub fn into_jobs(self) -> Result<Vec<SlurmJob>, String> {
        self.jobs
            .into_iter()
            .map(|j| {
                let state = j.job_state.unwrap_or_default();
                let exit_code = match j.exit_code {
                    Some(status) if !is_active(&state) => ended_code(&state, wait_status(status)),
                    _ => None,
                };
                Ok(SlurmJob {
                    exit_code,
                    id: j.job_id.ok_or("squeue --json: a job without `job_id`")?,
                    name: j.name.unwrap_or_default(),
                    comment: j.comment.unwrap_or_default(),
                    state,
                    reason: j.state_reason.unwrap_or_default(),
                    nodes: j.nodes.unwrap_or_default(),
                    gres_detail: j.gres_detail.unwrap_or_default(),
                })
            })
            .collect()
    }
}

/// Reads `squeue --json` output (Slurm 22.05, data parser 0.0.38).
pub fn parse_squeue(text: &str) -> Result<Vec<SlurmJob>, String> {
    let queue: QueueResponse =
        serde_json::from_str(text).map_err(|e| format!("squeue --json: {e}"))?;
    queue.into_jobs()
}

/// Submits, finds, releases and cancels gangs.
///
/// Keeps the last `squeue --json` listing, by comment, with every job
/// `sbatch` accepted since added from its own answer: the duplicate check
/// before a submission reads it instead of listing the queue again (one
/// listing per iteration, not one per placement). The listing is dropped
/// whenever it may miss a job of ours: by [`Jobs::forget`] (each iteration
/// starts with it) and when an `sbatch` gives no readable answer (it may
/// have been accepted). The argument is in docs/slurm.md.
#[derive(Debug)]
pub struct Jobs<R> {
    runner: R,
    /// Where the queue and the accounting records are read, when not from
    /// `squeue` and `sacct` (`--slurm-rest`).
    rest: Option<RestClient>,
    /// The queue by comment, when known to hold every job of ours.
    known: Option<BTreeMap<String, SlurmJob>>,
}

impl<R: Runner> Jobs<R> {
    /// Over `runner`.
    pub fn new(runner: R) -> Self {
        Jobs {
            runner,
            rest: None,
            known: None,
        }
    }

    /// Reads the queue and the accounting records from slurmrestd instead
    /// of `squeue --json` and `sacct`.
    pub fn with_rest(mut self, rest: RestClient) -> Self {
        self.rest = Some(rest);
        self
    }

    /// The slurmrestd client, when the state is read from it.
    pub fn rest(&self) -> Option<&RestClient> {
        self.rest.as_ref()
    }

    /// The command runner.
    pub fn runner(&self) -> &R {
        &self.runner
    }

    /// Drops the kept listing: the next duplicate check lists the queue.
    pub fn forget(&mut self) {
        self.known = None;
    }

    /// Every job in the queue (finished ones too, for `MinJobAge`); kept
    /// for the duplicate checks that follow.
    pub fn list(&mut self) -> Result<Vec<SlurmJob>, RunError> {
        let jobs = match &self.rest {
            Some(rest) => rest.jobs()?,
            None => {
                let out = self.runner.run("squeue", &["--json".to_string()])?;
                parse_squeue(&out).map_err(|message| RunError::Failed {
                    command: "squeue --json".into(),
                    status: "unreadable output".into(),
                    stderr: message,
                })?
            }
        };
        let mut known = BTreeMap::new();
        for job in &jobs {
            known
                .entry(job.comment.clone())
                .or_insert_with(|| job.clone());
        }
        self.known = Some(known);
        Ok(jobs)
    }

    /// The job of this placement (queued, running or recently ended), if
    /// any: from the kept listing, or a new one when none is kept.
    pub fn find(&mut self, submit: &Submit) -> Result<Option<SlurmJob>, RunError> {
        if self.known.is_none() {
            self.list()?;
        }
        Ok(self
            .known
            .as_ref()
            .and_then(|known| known.get(&submit.comment()))
            .cloned())
    }

    /// Submits the gang held, unless this placement was submitted already
    /// (then its id is returned): idempotent across crashes.
    pub fn submit(&mut self, submit: &Submit) -> Result<u64, RunError> {
        if let Some(job) = self.find(submit)? {
            return Ok(job.id);
        }
        self.sbatch(submit)
    }

    /// Runs `sbatch`; the job it accepted joins the kept listing. Without
    /// a readable answer the listing is dropped: the job may exist.
    fn sbatch(&mut self, submit: &Submit) -> Result<u64, RunError> {
        let id = match self.runner.run("sbatch", &submit.sbatch_args()) {
            Ok(out) => {
                let id = out.trim().split(';').next().unwrap_or("");
                id.parse().map_err(|_| RunError::Failed {
                    command: "sbatch --parsable".into(),
                    status: "unreadable output".into(),
                    stderr: out.trim().to_string(),
                })
            }
            Err(e) => Err(e),
        };
        match id {
            Ok(id) => {
                if let Some(known) = &mut self.known {
                    known.insert(submit.comment(), submitted(submit, id));
                }
                Ok(id)
            }
            Err(e) => {
                self.known = None;
                Err(e)
            }
        }
    }

    /// Submits the gang (unless this placement was submitted already) and
    /// releases it if it is held: idempotent across crashes. Its id.
    pub fn start(&mut self, submit: &Submit) -> Result<u64, RunError> {
        let id = match self.find(submit)? {
            Some(job) if job.reason != HELD => return Ok(job.id),
            Some(job) => job.id,
            None => self.sbatch(submit)?,
        };
        self.release(id)?;
        if let Some(job) = self
            .known
            .as_mut()
            .and_then(|known| known.get_mut(&submit.comment()))
        {
            job.reason = String::new();
        }
        Ok(id)
    }

    /// The held job of `submit`'s gitfleet job left by an earlier
    /// preemption (`scontrol requeuehold`), under an earlier attempt's
    /// comment, if any (the newest).
    pub fn requeued(&mut self, submit: &Submit) -> Result<Option<SlurmJob>, RunError> {
        if self.known.is_none() {
            self.list()?;
        }
        let name = submit.name();
        let prefix = format!("gitfleet:{}:", submit.job);
        Ok(self.known.as_ref().and_then(|known| {
            known
                .values()
                .filter(|j| j.name == name && j.comment.starts_with(&prefix) && j.held())
                .max_by_key(|j| j.id)
                .cloned()
        }))
    }

    /// Places `submit` on the held, requeued job `held` instead of
    /// submitting a new one: `scontrol update` sets its nodes and comment
    /// (one request, so a crash leaves it under the old comment or the
    /// new) and makes it eligible at once (a requeue delays it), then it
    /// is released. Its id.
    pub fn reuse(&mut self, held: &SlurmJob, submit: &Submit) -> Result<u64, RunError> {
        self.runner
            .run("scontrol", &submit.update_args(held.id))
            .map(|_| ())?;
        if let Some(known) = &mut self.known {
            known.remove(&held.comment);
            known.insert(submit.comment(), submitted(submit, held.id));
        }
        self.start(submit)
    }

    /// Requeues a running job and holds it: it goes back to pending under
    /// the same id (a preemption's last step with `--slurm-preempt-mode
    /// requeue`).
    /// A job that ended already (within `MinJobAge`) is requeued too.
    pub fn requeue_hold(&mut self, id: u64) -> Result<(), RunError> {
        self.runner
            .run("scontrol", &["requeuehold".to_string(), id.to_string()])?;
        if let Some(known) = &mut self.known {
            for job in known.values_mut().filter(|j| j.id == id) {
                job.state = "PENDING".into();
                job.reason = HELD.into();
                job.exit_code = None;
            }
        }
        Ok(())
    }

    /// Ended jobs as `sacct` knows them (those no longer in the queue).
    pub fn accounted(&self, ids: &[u64]) -> Result<Vec<AccountedJob>, RunError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(rest) = &self.rest {
            return Ok(rest.accounted(ids)?);
        }
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        let args = ["-X", "-n", "-P", "-o", SACCT_FORMAT, "-j", &list.join(",")];
        let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
        let out = self.runner.run("sacct", &args)?;
        parse_sacct(&out).map_err(|message| RunError::Failed {
            command: "sacct".into(),
            status: "unreadable output".into(),
            stderr: message,
        })
    }

    /// Lets a held gang start.
    pub fn release(&self, id: u64) -> Result<(), RunError> {
        self.runner
            .run("scontrol", &["release".to_string(), id.to_string()])
            .map(|_| ())
    }

    /// Cancels a job (with `signal`, only signals it: a preemption's first
    /// step before its grace period ends).
    pub fn cancel(&self, id: u64, signal: Option<&str>) -> Result<(), RunError> {
        let mut args = Vec::new();
        if let Some(signal) = signal {
            args.push(format!("--signal={signal}"));
        }
        args.push(id.to_string());
        self.runner.run("scancel", &args).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gang() -> Submit {
        Submit {
            job: "llama".into(),
            attempt: "3".into(),
            account: "nlp".into(),
            qos: Some("high".into()),
            nodes: vec!["gpu-1".into(), "gpu-2".into()],
            tasks_per_node: 1,
            gpus_per_node: 8,
            gres_type: "h100".into(),
            time_limit: Some("90s".parse().unwrap()),
            command: vec!["python".into(), "train.py".into(), "--name=it's".into()],
            env: Vec::new(),
            options: SlurmSpec::default(),
            requeue: false,
            image: None,
        }
    }

    #[test]
    fn env_values_go_before_srun_quoted() {
        let mut gang = gang();
        gang.env = vec![("A".into(), "1".into()), ("B".into(), "x y".into())];
        assert_eq!(
            gang.sbatch_args().last().unwrap(),
            r"--wrap=env A=1 'B=x y' srun python train.py '--name=it'\''s'"
        );
    }

    #[test]
    fn sbatch_pins_the_gang_and_holds_it() {
        assert_eq!(
            gang().sbatch_args(),
            [
                "--parsable",
                "--hold",
                "--job-name=gitfleet-llama",
                "--comment=gitfleet:llama:3",
                "--account=nlp",
                "--nodes=2",
                "--ntasks=2",
                "--ntasks-per-node=1",
                "--nodelist=gpu-1,gpu-2",
                "--gres=gpu:h100:8",
                "--output=/dev/null",
                "--qos=high",
                "--time=2",
                r"--wrap=srun python train.py '--name=it'\''s'",
            ]
        );
    }

    #[test]
    fn the_slurm_section_adds_its_options_as_single_arguments() {
        let mut gang = gang();
        gang.options = SlurmSpec {
            cpus_per_task: Some(4),
            mem: None,
            mem_per_cpu: Some("4G".into()),
            mem_per_gpu: None,
            constraint: Some("ib&nvme".into()),
            output: Some("/scratch/logs/%x-%j.out".into()),
            error: Some("/scratch/logs/%x-%j.err; rm -rf /".into()),
        };
        assert_eq!(
            gang.sbatch_args(),
            [
                "--parsable",
                "--hold",
                "--job-name=gitfleet-llama",
                "--comment=gitfleet:llama:3",
                "--account=nlp",
                "--nodes=2",
                "--ntasks=2",
                "--ntasks-per-node=1",
                "--nodelist=gpu-1,gpu-2",
                "--gres=gpu:h100:8",
                "--output=/scratch/logs/%x-%j.out",
                "--qos=high",
                "--time=2",
                // One argument, never part of a shell line: sbatch takes
                // it all as a file name.
                "--error=/scratch/logs/%x-%j.err; rm -rf /",
                "--cpus-per-task=4",
                "--mem-per-cpu=4G",
                "--constraint=ib&nvme",
                r"--wrap=srun python train.py '--name=it'\''s'",
            ]
        );
    }

    #[test]
    fn requeue_adds_its_option_and_a_shape_without_nodes_or_comment() {
        let mut gang = gang();
        gang.requeue = true;
        gang.image = Some((ImageOption::ContainerImage, "pytorch:24.01".into()));
        let args = gang.sbatch_args();
        assert_eq!(
            args[12..15],
            ["--time=2", "--requeue", "--container-image=pytorch:24.01"]
        );
        let shape = gang.shape();
        assert_eq!(shape.len(), args.len() - 2);
        let mut elsewhere = gang.clone();
        elsewhere.nodes = vec!["gpu-3".into(), "gpu-4".into()];
        elsewhere.attempt = "4".into();
        assert_eq!(elsewhere.shape(), shape, "nodes and comment are updated");
        assert_eq!(
            elsewhere.update_args(7),
            [
                "update",
                "JobId=7",
                "NodeList=gpu-3,gpu-4",
                "Comment=gitfleet:llama:4",
                "StartTime=now"
            ]
        );
        elsewhere.tasks_per_node = 2;
        assert_ne!(elsewhere.shape(), shape, "tasks per node are not");
    }

    // Trimmed from squeue --json of Slurm 22.05.8 (tests/slurm/start-cluster.sh).
    const SQUEUE: &str = r#"{"meta":{},"errors":[],"jobs":[{"job_id":1,"name":"gitfleet-j1","comment":"gitfleet:j1:1","job_state":"RUNNING","state_reason":"None","nodes":"gpu-[1-2]","gres_detail":["gpu:h100-sxm-80gb:8(IDX:0-7)","gpu:h100-sxm-80gb:8(IDX:0-7)"]}]}"#;

    #[test]
    fn reads_squeue_json() {
        let jobs = parse_squeue(SQUEUE).unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].id, 1);
        assert_eq!(jobs[0].state, "RUNNING");
        assert_eq!(jobs[0].nodes, "gpu-[1-2]");
        assert_eq!(jobs[0].gres_detail[1], "gpu:h100-sxm-80gb:8(IDX:0-7)");
        assert_eq!(jobs[0].exit_code, None, "still running");
        assert!(jobs[0].active());
        assert!(parse_squeue("{}").is_err());
        assert!(parse_squeue(r#"{"jobs":[{"name":"x"}]}"#).is_err());
    }

    // A gang whose step was sent SIGTERM (exit 143), one cancelled
    // by hand (no code), one completed (22.05.8).
    const ENDED: &str = r#"{"jobs":[
      {"job_id":4,"name":"gitfleet-a","comment":"gitfleet:a:1","job_state":"FAILED","state_reason":"NonZeroExitCode","exit_code":36608,"nodes":"gpu-1"},
      {"job_id":5,"name":"gitfleet-b","comment":"gitfleet:b:1","job_state":"CANCELLED","exit_code":0,"nodes":"gpu-2"},
      {"job_id":6,"name":"gitfleet-c","comment":"gitfleet:c:2","job_state":"COMPLETED","exit_code":0,"nodes":"gpu-3"},
      {"job_id":7,"name":"gitfleet-d","comment":"gitfleet:d:1","job_state":"COMPLETING","exit_code":9,"nodes":"gpu-3"}]}"#;

    #[test]
    fn reads_how_jobs_ended_from_squeue() {
        let jobs = parse_squeue(ENDED).unwrap();
        let seen: Vec<(bool, Option<i32>)> =
            jobs.iter().map(|j| (j.active(), j.exit_code)).collect();
        assert_eq!(
            seen,
            [
                (false, Some(143)),
                (false, None),
                (false, Some(0)),
                (true, None)
            ]
        );
    }

    #[test]
    fn reads_sacct_parsable2() {
        // sacct -X -n -P -o JobIDRaw,JobName,State,ExitCode -j 1,2,3,4 (22.05.8)
        let text = "1|gitfleet-a|FAILED|15:0
2|gitfleet-b|CANCELLED by 0|0:15
3|gitfleet-c|COMPLETED|0:0
4|gitfleet-d|RUNNING|0:0
";
        let jobs = parse_sacct(text).unwrap();
        let seen: Vec<(u64, &str, Option<i32>)> = jobs
            .iter()
            .map(|j| (j.id, j.state.as_str(), j.exit_code))
            .collect();
        assert_eq!(
            seen,
            [
                (1, "FAILED", Some(15)),
                (2, "CANCELLED", Some(143)),
                (3, "COMPLETED", Some(0)),
                (4, "RUNNING", None)
            ]
        );
        assert!(
            parse_sacct(
                "1|x|FAILED
"
            )
            .is_err()
        );
        assert!(
            parse_sacct(
                "x|y|FAILED|0:0
"
            )
            .is_err()
        );
    }

    /// Answers squeue from a recorded output, sbatch with ids from 42 on
    /// (or a failure while `refuse` is set), and keeps the programs run.
    #[derive(Debug, Default)]
    struct Recorded {
        squeue: String,
        refuse: std::sync::atomic::AtomicBool,
        calls: std::sync::Mutex<Vec<String>>,
    }

    impl Recorded {
        fn count(&self, program: &str) -> usize {
            self.calls
                .lock()
                .unwrap()
                .iter()
                .filter(|p| *p == program)
                .count()
        }
    }

    impl Runner for Recorded {
        fn run(&self, program: &str, _args: &[String]) -> Result<String, RunError> {
            let mut calls = self.calls.lock().unwrap();
            calls.push(program.to_string());
            if program == "sbatch" && self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(RunError::Failed {
                    command: "sbatch".into(),
                    status: "exit status: 1".into(),
                    stderr: "Socket timed out on send/recv operation".into(),
                });
            }
            let sbatches = calls.iter().filter(|p| *p == "sbatch").count();
            Ok(match program {
                "squeue" => self.squeue.clone(),
                "sbatch" => format!("{}\n", 41 + sbatches),
                _ => String::new(),
            })
        }
    }

    #[test]
    fn a_placement_submitted_before_a_crash_is_not_submitted_again() {
        let mut submit = gang();
        submit.job = "j1".into();
        submit.attempt = "1".into();
        let mut jobs = Jobs::new(Recorded {
            squeue: SQUEUE.into(),
            ..Recorded::default()
        });
        assert_eq!(jobs.submit(&submit).unwrap(), 1);
        assert_eq!(*jobs.runner.calls.lock().unwrap(), ["squeue"]);
        // Another attempt is a new submission, checked against the listing
        // already taken.
        submit.attempt = "2".into();
        assert_eq!(jobs.submit(&submit).unwrap(), 42);
        assert_eq!(*jobs.runner.calls.lock().unwrap(), ["squeue", "sbatch"]);
        // Submitted again in the same iteration: known from sbatch's answer.
        assert_eq!(jobs.submit(&submit).unwrap(), 42);
        assert_eq!(*jobs.runner.calls.lock().unwrap(), ["squeue", "sbatch"]);
    }

    fn placements(n: usize) -> Vec<Submit> {
        (0..n)
            .map(|i| Submit {
                job: format!("burst-{i}"),
                attempt: "1".into(),
                ..gang()
            })
            .collect()
    }

    #[test]
    fn n_placements_take_one_queue_listing_not_n() {
        let mut jobs = Jobs::new(Recorded {
            squeue: SQUEUE.into(),
            ..Recorded::default()
        });
        let burst = placements(50);
        let ids: Vec<u64> = burst.iter().map(|s| jobs.start(s).unwrap()).collect();
        assert_eq!(ids, (42..92).collect::<Vec<u64>>());
        assert_eq!(jobs.runner.count("squeue"), 1);
        assert_eq!(jobs.runner.count("sbatch"), 50);
        assert_eq!(jobs.runner.count("scontrol"), 50);

        // All carried out again in the same iteration (intents retried):
        // every one known from sbatch's answer, nothing run at all.
        jobs.runner.calls.lock().unwrap().clear();
        let again: Vec<u64> = burst.iter().map(|s| jobs.start(s).unwrap()).collect();
        assert_eq!(again, ids);
        assert!(jobs.runner.calls.lock().unwrap().is_empty());
    }

    #[test]
    fn the_next_iteration_lists_the_queue_again() {
        let mut jobs = Jobs::new(Recorded {
            squeue: SQUEUE.into(),
            ..Recorded::default()
        });
        let burst = placements(3);
        jobs.start(&burst[0]).unwrap();
        jobs.forget();
        jobs.start(&burst[1]).unwrap();
        jobs.start(&burst[2]).unwrap();
        assert_eq!(jobs.runner.count("squeue"), 2);
        assert_eq!(jobs.runner.count("sbatch"), 3);
    }

    #[test]
    fn an_sbatch_without_an_answer_makes_the_next_check_list_the_queue() {
        let mut jobs = Jobs::new(Recorded {
            squeue: SQUEUE.into(),
            ..Recorded::default()
        });
        let burst = placements(3);
        jobs.start(&burst[0]).unwrap();
        jobs.runner
            .refuse
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // It may have been accepted: the listing no longer holds every job.
        assert!(jobs.start(&burst[1]).is_err());
        jobs.runner
            .refuse
            .store(false, std::sync::atomic::Ordering::SeqCst);
        jobs.start(&burst[2]).unwrap();
        assert_eq!(jobs.runner.count("squeue"), 2);
    }
}
