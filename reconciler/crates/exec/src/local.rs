//! The `local` executor: this host's GPUs, replicas as child processes.
//!
//! A placed job's replicas run `spec.command` (an argv, no shell), each in its
//! own process group, with `CUDA_VISIBLE_DEVICES` set to the GPUs placed for
//! it and the `torchrun`-style rendezvous variables (`WORLD_SIZE`, `RANK`,
//! `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`). A stop (preempt, terminate,
//! cancel) is SIGTERM to every replica's group, then SIGKILL once the grace
//! period has passed, as Kubernetes and Slurm do.
//!
//! Everything that must survive a crash of the reconciler is in
//! `<dir>/<job>/pids.json`, written atomically after each replica starts:
//! each replica's pid and its start time (from `/proc/<pid>/stat`, so a
//! reused pid is never taken for the replica), the exit codes seen, and the
//! stop's deadline. A `place` carried out again after a crash adopts the
//! processes already started instead of starting them twice.
//!
//! Architecture invariants:
//! - Deadlines compare with the `now` the reconciler passes, never with the
//!   wall clock, so tests (and a simulated clock) are deterministic.
//! - A process group is signalled only when its leader is known to be the
//!   replica (alive with the recorded start time, or its zombie), so a reused
//!   pid is never signalled.
//! - Time limits are not enforced here: the engine plans `terminate`.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::{
    ActionContext, Capabilities, Event, ExecError, Executor, JobView, Observation, Outcome,
    busy_nodes,
};
use model::observed::{NodeGpus, ObservedNode, Timestamp};
use model::plan::Action;
use model::spec::{JobSpec, Object, is_dns_label};
use model::time::after;

/// The file in a job's directory that records its processes.
pub const PIDS_FILE: &str = "pids.json";

/// `MASTER_PORT` is derived from the job's name in `PORT_BASE..PORT_BASE+PORT_SPAN`.
const PORT_BASE: u16 = 20000;
const PORT_SPAN: u16 = 10000;
/// How many ports after the derived one are tried before asking the OS for any.
const PORT_TRIES: u16 = 64;

/// One replica's process, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Replica {
    /// Its index in the placement (`RANK`).
    rank: u32,
    /// The node and GPUs it was placed on.
    node: String,
    gpus: Vec<u32>,
    /// The process (and process group) id.
    pid: i32,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot).
    start_time: u64,
    /// Set once it is seen gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit: Option<ReplicaExit>,
}

/// How a replica ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplicaExit {
    /// When it was seen gone (the reconciler's clock).
    at: Timestamp,
    /// Its exit code (128 + signal number for a signal); `None` when the
    /// process was not this process's child and so could not be reaped.
    #[serde(default)]
    code: Option<i32>,
}

/// A stop under way.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StopState {
    /// When it was asked for.
    since: Timestamp,
    /// When SIGKILL follows.
    deadline: Timestamp,
    /// SIGTERM was sent.
    #[serde(default)]
    signalled: bool,
    /// SIGKILL was sent.
    #[serde(default)]
    killed: bool,
}

/// `<dir>/<job>/pids.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobFile {
    job: String,
    /// Which placement of the job this is ([`ActionContext::attempt`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attempt: Option<String>,
    master_port: u16,
    replicas: Vec<Replica>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stop: Option<StopState>,
}

impl JobFile {
    fn alive(&self) -> impl Iterator<Item = &Replica> {
        self.replicas.iter().filter(|r| r.exit.is_none())
    }

    fn same_placement(&self, placement: &[NodeGpus]) -> bool {
        self.replicas.iter().all(|r| {
            placement
                .get(r.rank as usize)
                .is_some_and(|p| p.node == r.node && p.gpus == r.gpus)
        })
    }
}

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
    /// Killed processes of failed starts, reaped on the next polls.
    orphans: Vec<(i32, u64)>,
}

/// What became of a recorded process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Running,
    /// Gone. `group_safe`: its pid was still its own when seen (reaped just
    /// now, or a zombie), so its process group may be signalled.
    Exited {
        code: Option<i32>,
        group_safe: bool,
    },
}

/// The fields of `/proc/<pid>/stat` this executor needs.
#[derive(Debug, Clone, Copy)]
struct ProcStat {
    state: char,
    start_time: u64,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // starttime is field 22; `rest` starts at field 3.
    let start_time = fields.get(22 - 3)?.parse().ok()?;
    Some(ProcStat { state, start_time })
}

/// Looks at a recorded process without blocking; reaps it if it is a child.
fn status(pid: i32, start_time: u64) -> Status {
    let gone = Status::Exited {
        code: None,
        group_safe: false,
    };
    let Some(stat) = proc_stat(pid) else {
        return gone;
    };
    if stat.start_time != start_time {
        return gone; // the pid was reused
    }
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Status::Exited {
            code: Some(code),
            group_safe: true,
        },
        Ok(WaitStatus::Signaled(_, signal, _)) => Status::Exited {
            code: Some(128 + signal as i32),
            group_safe: true,
        },
        // Not this process's child (adopted after a restart): its parent reaps it.
        Err(Errno::ECHILD) if matches!(stat.state, 'Z' | 'X') => Status::Exited {
            code: None,
            group_safe: true,
        },
        _ => Status::Running,
    }
}

/// Sends `signal` to a process group; a group already gone is fine.
fn signal_group(pid: i32, signal: Signal) {
    if let Err(e) = killpg(Pid::from_raw(pid), signal)
        && e != Errno::ESRCH
    {
        tracing::warn!(pid, %signal, error = %e, "cannot signal process group");
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

/// Writes `bytes` to `path` atomically and durably (temporary file, fsync,
/// rename, fsync of the directory).
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("json.tmp");
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    File::open(dir)?.sync_all()
}

impl LocalExecutor {
    /// An executor keeping its records in `dir` (e.g. `<state>/local`) and
    /// running jobs on `nodes`, the nodes of this host (from an
    /// observed-state file or NVML).
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
        })
    }

    /// Where the job's `pids.json` and logs (`<rank>.out`, `<rank>.err`) are.
    pub fn job_dir(&self, job: &str) -> PathBuf {
        self.dir.join(job)
    }

    fn load(&self, action: &'static str, job: &str) -> Result<Option<JobFile>, ExecError> {
        let path = self.job_dir(job).join(PIDS_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
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

    fn remove(&self, job: &str) {
        let path = self.job_dir(job).join(PIDS_FILE);
        if let Err(e) = fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove");
        }
    }

    /// Notes replicas that are gone; returns whether anything changed.
    fn refresh(file: &mut JobFile, now: Timestamp) -> bool {
        let mut changed = false;
        for replica in file.replicas.iter_mut().filter(|r| r.exit.is_none()) {
            if let Status::Exited { code, group_safe } = status(replica.pid, replica.start_time) {
                if group_safe {
                    // Whatever the replica left behind in its group goes too.
                    signal_group(replica.pid, Signal::SIGKILL);
                }
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

    /// Kills the live replicas of `file` (a failed or superseded start).
    fn kill_all(&mut self, file: &mut JobFile, now: Timestamp) {
        Self::refresh(file, now);
        for replica in file.alive() {
            signal_group(replica.pid, Signal::SIGKILL);
            self.orphans.push((replica.pid, replica.start_time));
        }
    }

    fn spawn(
        &self,
        spec: &Object<JobSpec>,
        rank: u32,
        part: &NodeGpus,
        world: usize,
        port: u16,
    ) -> Result<Replica, String> {
        let job = spec.name();
        let dir = self.job_dir(job);
        fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let log = |ext: &str| {
            let path = dir.join(format!("{rank}.{ext}"));
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))
        };
        let (out, err) = (log("out")?, log("err")?);
        let Some((program, args)) = spec.spec.command.split_first() else {
            return Err("the job has no command".to_string());
        };
        let devices: Vec<String> = part.gpus.iter().map(u32::to_string).collect();
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(&spec.spec.env)
            .env("CUDA_VISIBLE_DEVICES", devices.join(","))
            .env("WORLD_SIZE", world.to_string())
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", "0")
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env("GITFLEET_JOB", job)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        // The child is reaped with `waitpid` in `status`, not through `Child`.
        #[allow(clippy::zombie_processes)]
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {program:?} (replica {rank}): {e}"))?;
        let pid = i32::try_from(child.id()).map_err(|e| e.to_string())?;
        // The child exists (at worst as a zombie) until it is reaped.
        let start_time = proc_stat(pid).map(|s| s.start_time).unwrap_or_default();
        Ok(Replica {
            rank,
            node: part.node.clone(),
            gpus: part.gpus.clone(),
            pid,
            start_time,
            exit: None,
        })
    }

    fn place(
        &mut self,
        job: &str,
        placement: &[NodeGpus],
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        let fail = |message: String| action_error("place", job, message);
        if !is_dns_label(job) {
            return Err(fail("the job's name is not a DNS-1123 label".to_string()));
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
        if let Some(p) = placement.iter().find(|p| !self.nodes.contains_key(&p.node)) {
            let here: Vec<&str> = self.nodes.keys().map(String::as_str).collect();
            return Err(fail(format!(
                "node {} is not on this host (this host: {})",
                p.node,
                here.join(", ")
            )));
        }
        let attempt = ctx.attempt.clone();
        let mut file = match self.load("place", job)? {
            // Carried out again after a crash: adopt what was started.
            Some(file) if file.attempt == attempt && file.same_placement(placement) => file,
            other => {
                if let Some(mut old) = other {
                    self.kill_all(&mut old, now);
                }
                JobFile {
                    job: job.to_string(),
                    attempt,
                    master_port: master_port(job),
                    replicas: Vec::new(),
                    stop: None,
                }
            }
        };
        for (rank, part) in (0u32..).zip(placement) {
            if file.replicas.iter().any(|r| r.rank == rank) {
                continue;
            }
            match self.spawn(spec, rank, part, placement.len(), file.master_port) {
                Ok(replica) => {
                    file.replicas.push(replica);
                    self.save("place", &file)?;
                }
                Err(message) => {
                    // All replicas start together or none does.
                    self.kill_all(&mut file, now);
                    self.remove(job);
                    return Err(fail(message));
                }
            }
        }
        self.save("place", &file)?;
        Ok(Outcome::Done)
    }

    /// Sends SIGTERM to the live replicas of a stop not signalled yet.
    fn signal_stop(file: &mut JobFile) -> bool {
        match &mut file.stop {
            Some(stop) if !stop.signalled => {
                for replica in file.replicas.iter().filter(|r| r.exit.is_none()) {
                    signal_group(replica.pid, Signal::SIGTERM);
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
        Self::refresh(&mut file, now);
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
        let mut changed = Self::refresh(&mut file, now);
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
                for replica in file.replicas.iter().filter(|r| r.exit.is_none()) {
                    signal_group(replica.pid, Signal::SIGKILL);
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

impl Executor for LocalExecutor {
    fn name(&self) -> &'static str {
        "local"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scales_pools: false,
            grace_periods: true,
            exit_codes: true,
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
            Action::Place { job, placement, .. } => self.place(job, placement, ctx, now),
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
