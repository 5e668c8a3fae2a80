//! The `local` executor: this host's GPUs, replicas as processes.
//!
//! A placed job's replicas run `spec.command` (an argv, no shell), each under
//! a supervisor ([`supervisor`]) that leads its own process group, with a
//! clean environment ([`INHERITED_ENV`] of the reconciler's, the spec's
//! `env`, `CUDA_VISIBLE_DEVICES` set to the GPUs placed for it, the
//! `torchrun`-style rendezvous variables `WORLD_SIZE`, `RANK`, `LOCAL_RANK`,
//! `MASTER_ADDR`, `MASTER_PORT`, and `GITFLEET_JOB`, [`REPLICA_ENV`]). A stop
//! (preempt, terminate, cancel) is SIGTERM to the supervisor, which forwards
//! it to the group, then SIGKILL to the group once the grace period has
//! passed, as Kubernetes and Slurm do.
//!
//! Exactly once: everything that must survive a crash of the reconciler is
//! on disk ([`records`]). A start is recorded as an intent (attempt, run,
//! each replica's rank, node and GPUs) in `pids.json` before any process
//! starts. Each replica's supervisor claims the replica (creates
//! `<run>/<rank>.claim`, atomically, only if it does not exist) before
//! starting it, so a replica of a run starts at most once. A `place` carried
//! out again after a crash finds each replica whose pid was not recorded by
//! its claim, else by its identity in a supervisor's environment
//! (`GITFLEET_REPLICA=<job>/<run>/<rank>`), and starts only those found
//! nowhere; a supervisor started twice loses the claim and starts nothing. A
//! replica given up before it started gets a tombstone claim, so a
//! supervisor late to start never runs it.
//!
//! Exit codes: the supervisor writes its replica's exit code atomically to
//! `<run>/<rank>.exit` before it ends; the executor reads exit files rather
//! than waiting for its own children, so a restarted reconciler, or the next
//! `reconcile --once`, records how replicas really ended. A supervisor gone
//! without an exit file was killed (SIGKILL, or a signal it does not
//! forward), and its replica with it: recorded as 137.
//!
//! Architecture invariants:
//! - Deadlines compare with the `now` the reconciler passes, never with the
//!   wall clock, so tests (and a simulated clock) are deterministic.
//! - A process (group) is signalled only when it is known to be the
//!   supervisor (alive with the recorded start time, or its zombie), so a
//!   reused pid is never signalled.
//! - No replica runs twice and no GPU is given twice: a run's replica starts
//!   only through its claim, and a start is given up only through a
//!   tombstone claim, after which nothing of it can start.
//! - Time limits are not enforced here: the engine plans `terminate`.

mod launch;
mod process;
mod records;
pub mod supervisor;

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration as StdDuration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::Signal;

use crate::{
    ActionContext, Capabilities, Event, ExecError, Executor, JobView, Observation, Outcome,
    busy_nodes,
};
use model::observed::{NodeGpus, ObservedNode, Timestamp};
use model::plan::Action;
use model::spec::{JobSpec, Object, is_dns_label};
use model::time::after;

pub use launch::{DEFAULT_PATH, INHERITED_ENV, REPLICA_ENV, SupervisorCommand, inherited};
pub use records::{Claim, ExitRecord, PIDS_FILE};

use launch::{ReplicaVars, check_program, replica_env, resolve_env, wait_for_claim};
use process::{Status, proc_stat, signal_group, signal_process, status};
use records::{
    JobFile, Replica, ReplicaExit, StopState, claim_path, create_exclusive, exit_path, read_claim,
    read_exit, to_json, write_atomic,
};
use supervisor::SupervisorArgs;

/// `MASTER_PORT` is derived from the job's name in `PORT_BASE..PORT_BASE+PORT_SPAN`.
const PORT_BASE: u16 = 20000;
const PORT_SPAN: u16 = 10000;
/// How many ports after the derived one are tried before asking the OS for any.
const PORT_TRIES: u16 = 64;

/// How long a supervisor may take to claim its replica.
const CLAIM_TIMEOUT: StdDuration = StdDuration::from_secs(10);
/// How long a discarded start's killed supervisors are waited for.
const KILL_TIMEOUT: StdDuration = StdDuration::from_secs(10);

/// The exit code recorded for a replica whose supervisor left no exit file:
/// killed, as by SIGKILL.
pub const KILLED: i32 = 128 + Signal::SIGKILL as i32;

/// Run directories are named `run-<hex>`.
const RUN_PREFIX: &str = "run-";

/// A node of this host.
#[derive(Debug, Clone)]
struct LocalNode {
    node: ObservedNode,
    drained: bool,
}

/// Runs jobs as processes on this host.
#[derive(Debug)]
pub struct LocalExecutor {
    dir: PathBuf,
    nodes: BTreeMap<String, LocalNode>,
    /// Killed supervisors of failed starts, reaped on the next polls.
    orphans: Vec<(i32, u64)>,
    supervisor: SupervisorCommand,
}

/// Where a replica recorded by its intent only is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Its supervisor (pid, start time).
    Process(i32, u64),
    /// Given up: it never starts.
    Abandoned,
    /// Nowhere: nothing started it yet.
    Nothing,
}

impl From<Claim> for Found {
    fn from(claim: Claim) -> Found {
        match claim {
            Claim::Process { pid, start_time } => Found::Process(pid, start_time),
            Claim::Abandoned => Found::Abandoned,
        }
    }
}

/// The job's rendezvous port: derived from its name (FNV-1a) in
/// 20000–29999; the next free one when that is taken; any free one last.
pub fn master_port(job: &str) -> u16 {
    let hash = job.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let first = u16::try_from(hash % u64::from(PORT_SPAN)).unwrap_or(0);
    for i in 0..PORT_TRIES {
        let port = PORT_BASE + (first + i) % PORT_SPAN;
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(PORT_BASE + first)
}

fn action_error(action: &'static str, subject: &str, message: impl Into<String>) -> ExecError {
    ExecError::Action {
        action,
        subject: subject.to_string(),
        message: message.into(),
    }
}

impl LocalExecutor {
    /// An executor keeping its records in `dir` (e.g. `<state>/local`) and
    /// running jobs on `nodes`, the nodes of this host (from an
    /// observed-state file or NVML). Supervisors are this binary's
    /// `__supervise` subcommand ([`SupervisorCommand::this_binary`]).
    pub fn new(dir: PathBuf, nodes: Vec<ObservedNode>) -> Result<Self, ExecError> {
        fs::create_dir_all(&dir)
            .map_err(|e| ExecError::Inventory(format!("cannot create {}: {e}", dir.display())))?;
        let nodes = nodes
            .into_iter()
            .map(|node| {
                (
                    node.name.clone(),
                    LocalNode {
                        node,
                        drained: false,
                    },
                )
            })
            .collect();
        Ok(LocalExecutor {
            dir,
            nodes,
            orphans: Vec::new(),
            supervisor: SupervisorCommand::this_binary(),
        })
    }

    /// Starts supervisors with `supervisor` instead (tests, or a binary
    /// other than gitfleet's).
    #[must_use]
    pub fn with_supervisor(mut self, supervisor: SupervisorCommand) -> Self {
        self.supervisor = supervisor;
        self
    }

    /// Where the job's `pids.json`, logs (`<rank>.out`, `<rank>.err`) and
    /// run directories (claims, exit files) are.
    pub fn job_dir(&self, job: &str) -> PathBuf {
        self.dir.join(job)
    }

    fn run_dir(&self, file: &JobFile) -> Option<PathBuf> {
        file.run
            .as_ref()
            .map(|run| self.job_dir(&file.job).join(run))
    }

    fn load(&self, action: &'static str, job: &str) -> Result<Option<JobFile>, ExecError> {
        let path = self.job_dir(job).join(PIDS_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(action_error(
                    action,
                    job,
                    format!("cannot read {}: {e}", path.display()),
                ));
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| action_error(action, job, format!("{}: {e}", path.display())))
    }

    fn save(&self, action: &'static str, file: &JobFile) -> Result<(), ExecError> {
        let dir = self.job_dir(&file.job);
        let path = dir.join(PIDS_FILE);
        let bytes = serde_json::to_vec_pretty(file)
            .map_err(|e| action_error(action, &file.job, e.to_string()))?;
        fs::create_dir_all(&dir)
            .and_then(|()| write_atomic(&path, &bytes))
            .map_err(|e| {
                action_error(
                    action,
                    &file.job,
                    format!("cannot write {}: {e}", path.display()),
                )
            })
    }

    /// Forgets a start that failed: its record and its run directory.
    fn remove(&self, file: &JobFile) {
        let path = self.job_dir(&file.job).join(PIDS_FILE);
        if let Err(e) = fs::remove_file(&path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove");
        }
        if let Some(dir) = self.run_dir(file) {
            remove_dir(&dir);
        }
    }

    /// Creates a new run directory for `job` and removes the others (their
    /// replicas are gone or discarded; a supervisor late to start cannot
    /// claim in a removed directory).
    fn new_run(&self, job: &str) -> Result<String, ExecError> {
        let fail = |e: io::Error| action_error("place", job, format!("cannot create a run: {e}"));
        let job_dir = self.job_dir(job);
        fs::create_dir_all(&job_dir).map_err(fail)?;
        let mut id = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let run = loop {
            let run = format!("{RUN_PREFIX}{id:x}");
            match fs::create_dir(job_dir.join(&run)) {
                Ok(()) => break run,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => id += 1,
                Err(e) => return Err(fail(e)),
            }
        };
        for entry in fs::read_dir(&job_dir).map_err(fail)?.flatten() {
            let name = entry.file_name();
            let old = name.to_str().is_some_and(|n| n.starts_with(RUN_PREFIX));
            if old && name != run.as_str() {
                remove_dir(&entry.path());
            }
        }
        Ok(run)
    }

    /// Where a replica recorded by its intent only is: its claim, else a
    /// supervisor with its identity in its environment.
    fn find(&self, file: &JobFile, rank: u32) -> Result<Found, String> {
        let Some(run_dir) = self.run_dir(file) else {
            return Ok(Found::Nothing);
        };
        let claim = claim_path(&run_dir, rank);
        match read_claim(&claim) {
            Ok(Some(claim)) => Ok(claim.into()),
            Ok(None) => Ok(process::find_by_environment(&format!(
                "{REPLICA_ENV}={}",
                identity(file, rank)
            ))
            .map_or(Found::Nothing, |(pid, start)| Found::Process(pid, start))),
            Err(e) => Err(format!("cannot read {}: {e}", claim.display())),
        }
    }

    /// Gives up a replica recorded by its intent only: a tombstone claim,
    /// unless a supervisor claimed it first (then it is found). An error
    /// leaves it as it was: a supervisor on its way may still start it.
    fn give_up(&self, file: &JobFile, rank: u32) -> Result<Found, String> {
        let Some(run_dir) = self.run_dir(file) else {
            return Ok(Found::Abandoned);
        };
        match self.find(file, rank)? {
            Found::Nothing => {}
            found => return Ok(found),
        }
        let claim = claim_path(&run_dir, rank);
        let created = to_json(&Claim::Abandoned).and_then(|b| create_exclusive(&claim, &b));
        match created {
            Ok(true) => Ok(Found::Abandoned),
            Ok(false) => match read_claim(&claim) {
                Ok(Some(claim)) => Ok(claim.into()),
                Ok(None) => Err(format!("{} vanished", claim.display())),
                Err(e) => Err(format!("cannot read {}: {e}", claim.display())),
            },
            // No run directory: nothing can claim it any more.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Found::Abandoned),
            Err(e) => Err(format!("cannot write {}: {e}", claim.display())),
        }
    }

    /// Notes replicas that are gone (and finds those recorded by their
    /// intent only); returns whether anything changed.
    fn refresh(&self, file: &mut JobFile, now: Timestamp) -> bool {
        let mut changed = false;
        let run_dir = self.run_dir(file);
        for i in 0..file.replicas.len() {
            let replica = &file.replicas[i];
            if replica.exit.is_some() {
                continue;
            }
            if replica.pid.is_none() {
                let rank = replica.rank;
                let found = match self.give_up(file, rank) {
                    Ok(found) => found,
                    Err(e) => {
                        // Looked for again at the next poll.
                        tracing::warn!(job = %file.job, rank, error = %e, "cannot find replica");
                        continue;
                    }
                };
                let replica = &mut file.replicas[i];
                changed = true;
                match found {
                    Found::Process(pid, start) => {
                        replica.pid = Some(pid);
                        replica.start_time = Some(start);
                    }
                    Found::Abandoned | Found::Nothing => {
                        tracing::warn!(job = %file.job, rank, "a replica never started");
                        replica.exit = Some(ReplicaExit {
                            at: now,
                            code: None,
                        });
                        continue;
                    }
                }
            }
            let replica = &mut file.replicas[i];
            let Some((pid, start)) = replica.process() else {
                continue;
            };
            if let Status::Exited { waited, group_safe } = status(pid, start) {
                if group_safe {
                    // Whatever the replica left behind in its group goes too.
                    signal_group(pid, Signal::SIGKILL);
                }
                let code = match &run_dir {
                    Some(dir) => match read_exit(&exit_path(dir, replica.rank)) {
                        Ok(Some(record)) => Some(record.code),
                        // Its supervisor was killed before it could write.
                        Ok(None) => Some(KILLED),
                        Err(e) => {
                            tracing::warn!(job = %file.job, rank = replica.rank, error = %e, "unreadable exit file");
                            None
                        }
                    },
                    // Recorded by a gitfleet without supervisors.
                    None => waited,
                };
                replica.exit = Some(ReplicaExit { at: now, code });
                changed = true;
            }
        }
        changed
    }

    fn reap_orphans(&mut self) {
        self.orphans
            .retain(|&(pid, start)| status(pid, start) == Status::Running);
    }

    /// Kills what runs of `file` (a failed or superseded start), gives up its
    /// replicas not started yet, and waits (for a while) until the killed
    /// ones are gone, so that their GPUs are free when this returns.
    fn discard(&mut self, file: &mut JobFile) {
        let mut killed = Vec::new();
        for i in 0..file.replicas.len() {
            let replica = &file.replicas[i];
            if replica.exit.is_some() {
                continue;
            }
            // On an error, the run directory's removal (or the new run's)
            // keeps a late supervisor from claiming it.
            if replica.pid.is_none()
                && let Ok(Found::Process(pid, start)) = self.give_up(file, replica.rank)
            {
                file.replicas[i].pid = Some(pid);
                file.replicas[i].start_time = Some(start);
            }
            let Some((pid, start)) = file.replicas[i].process() else {
                continue;
            };
            match status(pid, start) {
                Status::Running => {
                    signal_group(pid, Signal::SIGKILL);
                    killed.push((pid, start));
                }
                Status::Exited {
                    group_safe: true, ..
                } => signal_group(pid, Signal::SIGKILL),
                Status::Exited { .. } => {}
            }
        }
        let started = Instant::now();
        while !killed.is_empty() && started.elapsed() < KILL_TIMEOUT {
            std::thread::sleep(StdDuration::from_millis(5));
            killed.retain(|&(pid, start)| status(pid, start) == Status::Running);
        }
        // Still there (stuck in the kernel): reaped on later polls.
        self.orphans.extend(killed);
    }

    /// Starts replica `index` of `file` under a new supervisor; returns its
    /// supervisor, or the one that had claimed it first.
    fn start(
        &mut self,
        spec: &Object<JobSpec>,
        file: &JobFile,
        index: usize,
    ) -> Result<(i32, u64), String> {
        let replica = &file.replicas[index];
        let rank = replica.rank;
        let run_dir = self
            .run_dir(file)
            .ok_or_else(|| "the record has no run".to_string())?;
        let Some((program, _)) = spec.spec.command.split_first() else {
            return Err("the job has no command".to_string());
        };
        let spec_env = resolve_env(&spec.spec.env, |var| std::env::var(var).ok())?;
        let env = replica_env(
            std::env::vars_os(),
            &spec_env,
            &ReplicaVars {
                job: &file.job,
                identity: identity(file, rank),
                rank,
                world: file.replicas.len(),
                gpus: &replica.gpus,
                master_port: file.master_port,
            },
        );
        check_program(
            program,
            env.get(std::ffi::OsStr::new("PATH")).map(|p| p.as_os_str()),
        )
        .map_err(|e| format!("cannot start {program:?} (replica {rank}): {e}"))?;
        let dir = self.job_dir(&file.job);
        let log = |ext: &str| {
            let path = dir.join(format!("{rank}.{ext}"));
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))
        };
        let (out, err) = (log("out")?, log("err")?);
        let args = SupervisorArgs {
            claim: claim_path(&run_dir, rank),
            exit_file: exit_path(&run_dir, rank),
            command: spec.spec.command.iter().map(Into::into).collect(),
        };
        let mut child = self
            .supervisor
            .spawn(&args, &env, out, err)
            .map_err(|e| format!("cannot start the supervisor of replica {rank}: {e}"))?;
        let own = i32::try_from(child.id()).map_err(|e| e.to_string())?;
        // It exists (at worst as a zombie) until reaped.
        let own_start = proc_stat(own).map(|s| s.start_time);
        let claimed = wait_for_claim(&args.claim, &mut child, CLAIM_TIMEOUT);
        let claimant = match claimed {
            Ok(Claim::Process { pid, start_time }) => Some((pid, start_time)),
            Ok(Claim::Abandoned) | Err(_) => None,
        };
        if claimant.map(|(pid, _)| pid) != Some(own)
            && let Some(start) = own_start
        {
            // Not the replica's supervisor: it ends without starting it (or
            // is killed here); reaped later.
            if status(own, start) == Status::Running {
                if claimed.is_err() {
                    signal_group(own, Signal::SIGKILL);
                }
                self.orphans.push((own, start));
            }
        }
        match claimed {
            Ok(Claim::Process { pid, start_time }) => Ok((pid, start_time)),
            Ok(Claim::Abandoned) => Err(format!("replica {rank} of this start was given up")),
            Err(e) => Err(format!("cannot start replica {rank}: {e}")),
        }
    }

    fn place(
        &mut self,
        job: &str,
        placement: &[NodeGpus],
        ctx: &ActionContext<'_>,
    ) -> Result<Outcome, ExecError> {
        let fail = |message: String| action_error("place", job, message);
        if !is_dns_label(job) {
            return Err(fail("the job's name is not a DNS-1123 label".to_string()));
        }
        if let Some(p) = placement.iter().find(|p| !self.nodes.contains_key(&p.node)) {
            let here: Vec<&str> = self.nodes.keys().map(String::as_str).collect();
            return Err(fail(format!(
                "node {} is not on this host (this host: {})",
                p.node,
                here.join(", ")
            )));
        }
        let attempt = ctx.attempt.clone();
        let (mut file, fresh) = match self.load("place", job)? {
            // Carried out again after a crash: this start goes on.
            Some(file) if file.attempt == attempt && file.same_placement(placement) => {
                (file, false)
            }
            other => {
                if let Some(mut old) = other {
                    self.discard(&mut old);
                }
                let spec = ctx
                    .spec
                    .ok_or_else(|| fail("the job is not in Git".to_string()))?;
                if spec.spec.command.is_empty() {
                    return Err(fail(
                        "the job has no `command`: the local executor runs it as each replica's process"
                            .to_string(),
                    ));
                }
                let file = JobFile {
                    job: job.to_string(),
                    attempt,
                    run: Some(self.new_run(job)?),
                    master_port: master_port(job),
                    replicas: (0u32..)
                        .zip(placement)
                        .map(|(rank, part)| Replica::intent(rank, part))
                        .collect(),
                    stop: None,
                };
                // The intent, before any process starts.
                self.save("place", &file)?;
                (file, true)
            }
        };
        for index in 0..file.replicas.len() {
            let replica = &file.replicas[index];
            if replica.pid.is_some() || replica.exit.is_some() {
                continue;
            }
            let rank = replica.rank;
            // Nothing can carry the identity of a run created just now.
            let found = if fresh {
                Ok(Found::Nothing)
            } else {
                self.find(&file, rank)
            };
            let started = match found {
                Ok(Found::Process(pid, start)) => Ok((pid, start)),
                Ok(Found::Abandoned) => Err(format!("replica {rank} of this start was given up")),
                Ok(Found::Nothing) => match ctx.spec {
                    Some(spec) => self.start(spec, &file, index),
                    None => Err("the job is not in Git".to_string()),
                },
                Err(e) => Err(e),
            };
            match started {
                Ok((pid, start)) => {
                    file.replicas[index].pid = Some(pid);
                    file.replicas[index].start_time = Some(start);
                    self.save("place", &file)?;
                }
                Err(message) => {
                    // All replicas start together or none does.
                    self.discard(&mut file);
                    self.remove(&file);
                    return Err(fail(message));
                }
            }
        }
        Ok(Outcome::Done)
    }

    /// Sends SIGTERM to the live replicas of a stop not signalled yet.
    fn signal_stop(file: &mut JobFile) -> bool {
        let supervised = file.run.is_some();
        match &mut file.stop {
            Some(stop) if !stop.signalled => {
                for (pid, _) in file
                    .replicas
                    .iter()
                    .filter(|r| r.exit.is_none())
                    .filter_map(Replica::process)
                {
                    if supervised {
                        // The supervisor forwards it to the group.
                        signal_process(pid, Signal::SIGTERM);
                    } else {
                        signal_group(pid, Signal::SIGTERM);
                    }
                }
                stop.signalled = true;
                true
            }
            _ => false,
        }
    }

    fn stop(
        &mut self,
        action: &'static str,
        job: &str,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        let Some(mut file) = self.load(action, job)? else {
            return Ok(Outcome::Done); // nothing of it runs here
        };
        self.refresh(&mut file, now);
        if file.alive().next().is_none() {
            self.save(action, &file)?;
            return Ok(Outcome::Done);
        }
        if file.stop.is_none() {
            file.stop = Some(StopState {
                since: now,
                deadline: after(now, ctx.grace),
                signalled: false,
                killed: false,
            });
            // Recorded before the signal: a crash in between signals on the retry.
            self.save(action, &file)?;
        }
        if Self::signal_stop(&mut file) {
            self.save(action, &file)?;
        }
        Ok(Outcome::Underway)
    }

    /// Checks one job the reconciler thinks runs; returns its event, if it ended.
    fn poll_job(&mut self, view: &JobView<'_>, now: Timestamp) -> Result<Option<Event>, ExecError> {
        let job = view.job;
        let Some(mut file) = self.load("poll", job)? else {
            tracing::warn!(job, dir = %self.dir.display(), "no record of the job's processes: reported gone");
            return Ok(Some(match view.stop {
                Some(_) => Event::Stopped {
                    job: job.to_string(),
                    at: now,
                },
                None => Event::Exited {
                    job: job.to_string(),
                    at: now,
                    exit_code: None,
                },
            }));
        };
        let mut changed = self.refresh(&mut file, now);
        let alive = file.alive().next().is_some();
        if alive {
            if let (Some(stopping), None) = (&view.stop, &file.stop) {
                // The reconciler asked for a stop this executor has no record of.
                file.stop = Some(StopState {
                    since: stopping.since,
                    deadline: after(stopping.since, view.grace),
                    signalled: false,
                    killed: false,
                });
                changed = true;
            }
            changed |= Self::signal_stop(&mut file);
            if let Some(stop) = &mut file.stop
                && stop.deadline <= now
            {
                for (pid, _) in file
                    .replicas
                    .iter()
                    .filter(|r| r.exit.is_none())
                    .filter_map(Replica::process)
                {
                    signal_group(pid, Signal::SIGKILL);
                }
                changed |= !stop.killed;
                stop.killed = true;
            }
        }
        if changed {
            self.save("poll", &file)?;
        }
        if alive {
            return Ok(None);
        }
        let at = file
            .replicas
            .iter()
            .filter_map(|r| r.exit.map(|e| e.at))
            .max()
            .unwrap_or(now);
        if view.stop.is_some() {
            return Ok(Some(Event::Stopped {
                job: job.to_string(),
                at,
            }));
        }
        let mut codes: Vec<(u32, Option<i32>)> = file
            .replicas
            .iter()
            .map(|r| (r.rank, r.exit.and_then(|e| e.code)))
            .collect();
        codes.sort_unstable();
        let failed = codes.iter().find_map(|(_, c)| c.filter(|c| *c != 0));
        let unknown = codes.iter().any(|(_, c)| c.is_none());
        let exit_code = match (failed, unknown) {
            (Some(code), _) => Some(code),
            (None, true) => None,
            (None, false) => Some(0),
        };
        Ok(Some(Event::Exited {
            job: job.to_string(),
            at,
            exit_code,
        }))
    }
}

/// A replica's identity, `<job>/<run>/<rank>` ([`REPLICA_ENV`]).
fn identity(file: &JobFile, rank: u32) -> String {
    format!(
        "{}/{}/{rank}",
        file.job,
        file.run.as_deref().unwrap_or_default()
    )
}

fn remove_dir(dir: &std::path::Path) {
    if let Err(e) = fs::remove_dir_all(dir)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot remove");
    }
}

impl Executor for LocalExecutor {
    fn name(&self) -> &'static str {
        "local"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scales_pools: false,
            grace_periods: true,
            exit_codes: true,
            runs_jobs: true,
        }
    }

    async fn set_fleet(&mut self, _fleet: &model::spec::Fleet) -> Result<(), ExecError> {
        Ok(())
    }

    async fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        self.reap_orphans();
        let mut events = Vec::new();
        for view in running {
            events.extend(self.poll_job(view, now)?);
        }
        let busy = busy_nodes(running, &events);
        for (name, local) in &mut self.nodes {
            if busy.contains(&name.as_str()) {
                local.node.idle_since = None;
            } else if local.node.idle_since.is_none() {
                local.node.idle_since = Some(now);
            }
        }
        let nodes = self.nodes.values().map(|n| n.node.clone()).collect();
        Ok(Observation { events, nodes })
    }

    fn already_done(&self, action: &Action) -> bool {
        match action {
            Action::Drain { node, .. } => self.nodes.get(node).is_some_and(|n| n.drained),
            _ => false,
        }
    }

    async fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        match action {
            Action::Place { job, placement, .. } => self.place(job, placement, ctx),
            Action::Preempt { job, .. } => self.stop("preempt", job, ctx, now),
            Action::Terminate { job, .. } => self.stop("terminate", job, ctx, now),
            Action::Cancel { job, .. } => self.stop("cancel", job, ctx, now),
            Action::Scale { pool, .. } => Err(action_error(
                "scale",
                pool,
                "the local executor cannot scale pools",
            )),
            Action::Drain { node, .. } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.drained = true;
                }
                Ok(Outcome::Done)
            }
        }
    }
}
