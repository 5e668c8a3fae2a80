//! The `local` executor with real child processes (`sh`, `sleep`): start,
//! environment, exit codes, stops with a grace period, adoption after a crash.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration as StdDuration, Instant};

use reconciler::diag::{Origin, Pos};
use reconciler::exec::local::{LocalExecutor, PIDS_FILE, SupervisorCommand};
use reconciler::exec::{ActionContext, Event, ExecError, Executor, JobView, Outcome, StopView};
use reconciler::observed::{NodeGpus, ObservedNode, Timestamp};
use reconciler::plan::Action;
use reconciler::spec::{Duration, JobSpec, Metadata, Object};
use reconciler::state::{JobRecord, Phase, StopKind, Stopping};
use serde_json::json;

/// The executor's async methods, driven to completion for these tests.
trait Blocking {
    fn poll(&mut self, now: Timestamp, running: &[JobView<'_>]) -> Result<Vec<Event>, ExecError>;
    fn nodes_at(&mut self, now: Timestamp, running: &[JobView<'_>]) -> Vec<ObservedNode>;
    fn run(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError>;
}

impl Blocking for LocalExecutor {
    fn poll(&mut self, now: Timestamp, running: &[JobView<'_>]) -> Result<Vec<Event>, ExecError> {
        futures_executor::block_on(self.observe(now, running)).map(|o| o.events)
    }

    fn nodes_at(&mut self, now: Timestamp, running: &[JobView<'_>]) -> Vec<ObservedNode> {
        futures_executor::block_on(self.observe(now, running))
            .unwrap()
            .nodes
    }

    fn run(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        futures_executor::block_on(self.execute(action, ctx, now))
    }
}

/// What the reconciler shows an executor of a job it believes runs.
fn view<'a>(
    record: &'a JobRecord,
    spec: Option<&'a Object<JobSpec>>,
    grace: Duration,
) -> JobView<'a> {
    JobView {
        job: &record.job,
        placement: &record.placement,
        started: record.started,
        stop: record.stopping.as_ref().map(|s| StopView {
            kind: s.kind,
            since: s.since,
        }),
        spec,
        grace,
    }
}

/// The attempt the reconciler names for a record (first seen, preemptions).
fn attempt(record: &JobRecord) -> String {
    format!("{}#{}", record.first_seen.to_rfc3339(), record.preemptions)
}

/// Real time any process state change may take to show.
const SETTLE: StdDuration = StdDuration::from_secs(5);

fn t(secs: i64) -> Timestamp {
    let base: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    base + chrono::Duration::seconds(secs)
}

fn host() -> Vec<ObservedNode> {
    let gpus: Vec<_> = (0..8)
        .map(|i| json!({"index": i, "model": "H100-SXM-80GB"}))
        .collect();
    vec![serde_json::from_value(json!({"name": "local-0", "pool": "local", "gpus": gpus})).unwrap()]
}

fn job(name: &str, replicas: u32, command: &[&str], env: &[(&str, &str)]) -> Object<JobSpec> {
    let env: BTreeMap<&str, &str> = env.iter().copied().collect();
    let spec: JobSpec = serde_json::from_value(json!({
        "queue": "q",
        "replicas": replicas,
        "gpusPerReplica": 1,
        "command": command,
        "env": env,
    }))
    .unwrap();
    Object {
        metadata: Metadata {
            name: name.to_string(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        },
        spec,
        origin: Origin::new("jobs.yaml".into(), Pos::new(1, 1)),
    }
}

fn placement(gpus: &[&[u32]]) -> Vec<NodeGpus> {
    gpus.iter()
        .map(|g| NodeGpus {
            node: "local-0".to_string(),
            gpus: g.to_vec(),
        })
        .collect()
}

struct Fixture {
    dir: tempfile::TempDir,
    exec: LocalExecutor,
}

/// Replicas' supervisors: this package's standalone one (the test binary
/// is not gitfleet, whose `__supervise` the executor starts by default).
fn executor(dir: &Path) -> LocalExecutor {
    LocalExecutor::new(dir.join("local"), host())
        .unwrap()
        .with_supervisor(SupervisorCommand::new(
            env!("CARGO_BIN_EXE_gitfleet-supervise"),
            vec![],
        ))
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let exec = executor(dir.path());
        Fixture { dir, exec }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Reopens the executor on the same directory, as a restarted reconciler.
    fn restart(&mut self) {
        self.exec = executor(self.dir.path());
    }

    fn pids(&self, job: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.exec.job_dir(job).join(PIDS_FILE)).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn record(name: &str, gpus: &[NodeGpus], stopping: Option<Stopping>) -> JobRecord {
    let mut record = JobRecord::new_pending(name, t(-60));
    record.phase = Phase::Running;
    record.started = Some(t(0));
    record.placement = gpus.to_vec();
    record.stopping = stopping;
    record
}

fn place(
    exec: &mut LocalExecutor,
    spec: &Object<JobSpec>,
    gpus: &[NodeGpus],
) -> Result<Outcome, ExecError> {
    let pending = JobRecord::new_pending(spec.name(), t(-60));
    let action = Action::Place {
        job: spec.name().to_string(),
        placement: gpus.to_vec(),
        reason: String::new(),
    };
    let ctx = ActionContext {
        spec: Some(spec),
        attempt: Some(attempt(&pending)),
        grace: Duration::ZERO,
        revision: "r1",
    };
    exec.run(&action, &ctx, t(0))
}

fn preempt(
    exec: &mut LocalExecutor,
    spec: &Object<JobSpec>,
    running: &JobRecord,
    grace: Duration,
    now: Timestamp,
) -> Outcome {
    let action = Action::Preempt {
        job: spec.name().to_string(),
        for_job: "other".to_string(),
        reason: String::new(),
    };
    let ctx = ActionContext {
        spec: Some(spec),
        attempt: Some(attempt(running)),
        grace,
        revision: "r2",
    };
    exec.run(&action, &ctx, now).unwrap()
}

/// Polls at `now` until an event comes, for at most [`SETTLE`].
fn poll_until_event(
    exec: &mut LocalExecutor,
    record: &JobRecord,
    spec: &Object<JobSpec>,
    grace: Duration,
    now: Timestamp,
) -> Event {
    let started = Instant::now();
    let view = view(record, Some(spec), grace);
    loop {
        let mut events = exec.poll(now, &[view]).unwrap();
        if let Some(event) = events.pop() {
            assert!(events.is_empty());
            return event;
        }
        assert!(
            started.elapsed() < SETTLE,
            "{} did not end in time",
            record.job
        );
        std::thread::sleep(StdDuration::from_millis(20));
    }
}

fn wait_for_file(path: &Path) -> String {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(
            started.elapsed() < SETTLE,
            "{} never written",
            path.display()
        );
        std::thread::sleep(StdDuration::from_millis(20));
    }
}

fn alive(pid: i64) -> bool {
    // A zombie is not alive.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(
        |s| !matches!(s.rsplit(')').next().map(str::trim_start), Some(r) if r.starts_with('Z')),
    )
}

fn env_of(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn starts_a_process_and_records_its_pid() {
    let mut f = Fixture::new();
    assert_eq!(f.exec.name(), "local");
    let spec = job("sleeper", 1, &["sleep", "30"], &[]);
    let gpus = placement(&[&[0]]);
    assert_eq!(place(&mut f.exec, &spec, &gpus).unwrap(), Outcome::Done);
    let pids = f.pids("sleeper");
    let pid = pids["replicas"][0]["pid"].as_i64().unwrap();
    assert!(alive(pid));
    assert!(pids["replicas"][0]["startTime"].as_u64().unwrap() > 0);
    let running = record("sleeper", &gpus, None);
    let view = view(&running, Some(&spec), Duration::ZERO);
    assert!(
        f.exec.poll(t(1), &[view]).unwrap().is_empty(),
        "still running"
    );

    // Cleanup, and a cancel with no grace: SIGTERM, then SIGKILL at once.
    let cancel = Action::Cancel {
        job: "sleeper".into(),
        reason: String::new(),
    };
    let ctx = ActionContext {
        spec: None,
        attempt: Some(attempt(&running)),
        grace: Duration::ZERO,
        revision: "r2",
    };
    assert_eq!(f.exec.run(&cancel, &ctx, t(2)).unwrap(), Outcome::Underway);
    let stopping = record(
        "sleeper",
        &gpus,
        Some(Stopping {
            kind: StopKind::Cancel,
            since: t(2),
            for_job: None,
        }),
    );
    let event = poll_until_event(&mut f.exec, &stopping, &spec, Duration::ZERO, t(3));
    assert!(matches!(event, Event::Stopped { .. }), "{event:?}");
    assert!(!alive(pid));
}

#[test]
fn replicas_get_gpus_rank_and_rendezvous_in_their_environment() {
    let mut f = Fixture::new();
    let out = f.path("out");
    std::fs::create_dir(&out).unwrap();
    let spec = job(
        "envjob",
        2,
        &[
            "sh",
            "-c",
            "env > \"$OUT/$RANK.tmp\" && mv \"$OUT/$RANK.tmp\" \"$OUT/$RANK.env\"",
        ],
        &[("OUT", out.to_str().unwrap()), ("WANDB_PROJECT", "llama")],
    );
    let gpus = placement(&[&[2, 3], &[5, 6]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    let pids = f.pids("envjob");
    let run = pids["run"].as_str().unwrap().to_string();
    let replicas = pids["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2, "two processes");
    assert_ne!(replicas[0]["pid"], replicas[1]["pid"]);

    let running = record("envjob", &gpus, None);
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(5));
    assert_eq!(
        event,
        Event::Exited {
            job: "envjob".into(),
            at: t(5),
            exit_code: Some(0)
        }
    );
    let mut ports = BTreeSet::new();
    for (rank, devices) in [(0, "2,3"), (1, "5,6")] {
        let env = env_of(&std::fs::read_to_string(out.join(format!("{rank}.env"))).unwrap());
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], devices);
        assert_eq!(env["WORLD_SIZE"], "2");
        assert_eq!(env["RANK"], rank.to_string());
        assert_eq!(env["LOCAL_RANK"], "0");
        assert_eq!(env["MASTER_ADDR"], "127.0.0.1");
        assert_eq!(env["GITFLEET_JOB"], "envjob");
        assert_eq!(env["WANDB_PROJECT"], "llama");
        assert_eq!(env["GITFLEET_REPLICA"], format!("envjob/{run}/{rank}"));
        // The test process's (the reconciler's) other variables stay with it.
        if std::env::var_os("CARGO_MANIFEST_DIR").is_some() {
            assert!(!env.contains_key("CARGO_MANIFEST_DIR"), "{env:?}");
        }
        assert_eq!(env["PATH"], std::env::var("PATH").unwrap());
        let port: u16 = env["MASTER_PORT"].parse().unwrap();
        assert!((20000..30000).contains(&port), "{port}");
        ports.insert(port);
    }
    assert_eq!(ports.len(), 1, "one rendezvous port for the gang");
    // Logs are per rank.
    assert!(f.exec.job_dir("envjob").join("0.out").exists());
    assert!(f.exec.job_dir("envjob").join("1.err").exists());
}

#[test]
fn records_exit_codes() {
    let mut f = Fixture::new();
    let gpus = placement(&[&[0]]);
    for (name, script, code) in [
        ("exit-three", "exit 3", 3),
        ("killed", "kill -9 $$", 128 + 9),
        ("fine", "echo hello", 0),
    ] {
        let spec = job(name, 1, &["sh", "-c", script], &[]);
        place(&mut f.exec, &spec, &gpus).unwrap();
        let running = record(name, &gpus, None);
        let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(9));
        assert_eq!(
            event,
            Event::Exited {
                job: name.into(),
                at: t(9),
                exit_code: Some(code)
            },
            "{script}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.exec.job_dir("fine").join("0.out")).unwrap(),
        "hello\n"
    );
}

#[test]
fn a_failing_replica_fails_the_gang() {
    let mut f = Fixture::new();
    let spec = job("gang", 2, &["sh", "-c", "exit $((RANK * 7))"], &[]);
    let gpus = placement(&[&[0], &[1]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    let running = record("gang", &gpus, None);
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(4));
    assert!(
        matches!(
            event,
            Event::Exited {
                exit_code: Some(7),
                ..
            }
        ),
        "{event:?}"
    );
}

#[test]
fn a_replica_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let mut f = Fixture::new();
    let ready = f.path("ready");
    let spec = job(
        "stubborn",
        1,
        &["sh", "-c", "trap '' TERM; echo up > \"$READY\"; sleep 30"],
        &[("READY", ready.to_str().unwrap())],
    );
    let gpus = placement(&[&[0]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    wait_for_file(&ready);
    let pid = f.pids("stubborn")["replicas"][0]["pid"].as_i64().unwrap();
    let grace = Duration::from_secs(1);
    let running = record("stubborn", &gpus, None);
    assert_eq!(
        preempt(&mut f.exec, &spec, &running, grace, t(10)),
        Outcome::Underway
    );
    // Idempotent: carried out again, the deadline stays.
    assert_eq!(
        preempt(&mut f.exec, &spec, &running, grace, t(10)),
        Outcome::Underway
    );
    let deadline = f.pids("stubborn")["stop"]["deadline"].clone();
    let stopping = record(
        "stubborn",
        &gpus,
        Some(Stopping {
            kind: StopKind::Preempt,
            since: t(10),
            for_job: Some("other".into()),
        }),
    );
    let view = view(&stopping, Some(&spec), grace);
    // Within the grace period it keeps running: it ignores SIGTERM.
    for _ in 0..10 {
        assert!(
            f.exec
                .poll(t(10) + chrono::Duration::milliseconds(900), &[view])
                .unwrap()
                .is_empty()
        );
        std::thread::sleep(StdDuration::from_millis(30));
    }
    assert!(alive(pid), "SIGTERM is ignored");
    assert_eq!(f.pids("stubborn")["stop"]["deadline"], deadline);
    // Past the deadline: SIGKILL.
    let event = poll_until_event(&mut f.exec, &stopping, &spec, grace, t(11));
    assert_eq!(
        event,
        Event::Stopped {
            job: "stubborn".into(),
            at: t(11)
        }
    );
    assert!(!alive(pid));
    assert_eq!(f.pids("stubborn")["stop"]["killed"], true);
}

#[test]
fn a_replica_that_exits_on_sigterm_stops_before_the_deadline() {
    let mut f = Fixture::new();
    let spec = job("polite", 1, &["sleep", "30"], &[]);
    let gpus = placement(&[&[0]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    let grace = Duration::from_secs(300);
    let running = record("polite", &gpus, None);
    assert_eq!(
        preempt(&mut f.exec, &spec, &running, grace, t(10)),
        Outcome::Underway
    );
    let stopping = record(
        "polite",
        &gpus,
        Some(Stopping {
            kind: StopKind::Preempt,
            since: t(10),
            for_job: Some("other".into()),
        }),
    );
    let event = poll_until_event(&mut f.exec, &stopping, &spec, grace, t(11));
    assert_eq!(
        event,
        Event::Stopped {
            job: "polite".into(),
            at: t(11)
        }
    );
    assert_eq!(
        f.pids("polite")["stop"]["killed"],
        false,
        "no SIGKILL needed"
    );
}

#[test]
fn a_restarted_executor_adopts_running_replicas() {
    let mut f = Fixture::new();
    let starts = f.path("starts");
    let release = f.path("release");
    let spec = job(
        "adopted",
        1,
        &[
            "sh",
            "-c",
            "echo $$ >> \"$STARTS\"; while [ ! -e \"$RELEASE\" ]; do sleep 0.05; done",
        ],
        &[
            ("STARTS", starts.to_str().unwrap()),
            ("RELEASE", release.to_str().unwrap()),
        ],
    );
    let gpus = placement(&[&[4]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    let first = wait_for_file(&starts);
    let pid = f.pids("adopted")["replicas"][0]["pid"].clone();

    // The reconciler crashed before recording the place: it is carried out again.
    f.restart();
    assert_eq!(place(&mut f.exec, &spec, &gpus).unwrap(), Outcome::Done);
    std::thread::sleep(StdDuration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(&starts).unwrap(),
        first,
        "not started twice"
    );
    assert_eq!(f.pids("adopted")["replicas"][0]["pid"], pid);

    let running = record("adopted", &gpus, None);
    let view = view(&running, Some(&spec), Duration::ZERO);
    assert!(
        f.exec.poll(t(1), &[view]).unwrap().is_empty(),
        "adopted, running"
    );
    std::fs::write(&release, "").unwrap();
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(2));
    assert_eq!(
        event,
        Event::Exited {
            job: "adopted".into(),
            at: t(2),
            exit_code: Some(0)
        }
    );
}

#[test]
fn a_job_placed_again_after_preemption_starts_anew() {
    let mut f = Fixture::new();
    let spec = job("again", 1, &["sh", "-c", "exit 0"], &[]);
    let gpus = placement(&[&[0]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    let first = f.pids("again")["replicas"][0]["pid"].clone();
    let running = record("again", &gpus, None);
    poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(1));
    // Pending again since the preemption: another attempt.
    let mut pending = JobRecord::new_pending("again", t(100));
    pending.preemptions = 1;
    let action = Action::Place {
        job: "again".into(),
        placement: gpus.clone(),
        reason: String::new(),
    };
    let ctx = ActionContext {
        spec: Some(&spec),
        attempt: Some(attempt(&pending)),
        grace: Duration::ZERO,
        revision: "r3",
    };
    f.exec.run(&action, &ctx, t(100)).unwrap();
    assert_ne!(f.pids("again")["replicas"][0]["pid"], first);
}

#[test]
fn refuses_what_it_cannot_do() {
    let mut f = Fixture::new();
    let spec = job("nocmd", 1, &[], &[]);
    let err = place(&mut f.exec, &spec, &placement(&[&[0]])).unwrap_err();
    assert!(err.to_string().contains("no `command`"), "{err}");

    let spec = job("elsewhere", 1, &["true"], &[]);
    let other = vec![NodeGpus {
        node: "remote-9".into(),
        gpus: vec![0],
    }];
    let err = place(&mut f.exec, &spec, &other).unwrap_err();
    assert!(err.to_string().contains("not on this host"), "{err}");

    let spec = job("missing", 1, &["/nonexistent/binary"], &[]);
    let err = place(&mut f.exec, &spec, &placement(&[&[0]])).unwrap_err();
    assert!(err.to_string().contains("cannot start"), "{err}");
    assert!(!f.exec.job_dir("missing").join(PIDS_FILE).exists());

    let ctx = ActionContext {
        spec: None,
        attempt: None,
        grace: Duration::ZERO,
        revision: "r",
    };
    let scale = Action::Scale {
        pool: "local".into(),
        from: 1,
        to: 2,
        reason: String::new(),
        nodes: vec![],
    };
    let err = f.exec.run(&scale, &ctx, t(0)).unwrap_err();
    assert!(err.to_string().contains("cannot scale pools"), "{err}");

    let drain = Action::Drain {
        node: "local-0".into(),
        reason: "GPU 2 unhealthy".into(),
    };
    assert!(!f.exec.already_done(&drain));
    assert_eq!(f.exec.run(&drain, &ctx, t(0)).unwrap(), Outcome::Done);
    assert!(f.exec.already_done(&drain));
}

#[test]
fn nodes_track_idleness() {
    let mut f = Fixture::new();
    let idle = f.exec.nodes_at(t(0), &[]);
    assert_eq!(idle.len(), 1);
    assert_eq!(idle[0].idle_since, Some(t(0)));
    // A job that runs keeps its node busy.
    let spec = job("busy", 1, &["sleep", "30"], &[]);
    let gpus = placement(&[&[0]]);
    assert_eq!(place(&mut f.exec, &spec, &gpus).unwrap(), Outcome::Done);
    let running = record("busy", &gpus, None);
    let busy = f
        .exec
        .nodes_at(t(5), &[view(&running, Some(&spec), Duration::ZERO)]);
    assert_eq!(busy[0].idle_since, None);
    // Once it is no longer running, the node is idle from then on.
    let cancel = Action::Cancel {
        job: "busy".into(),
        reason: String::new(),
    };
    let ctx = ActionContext {
        spec: None,
        attempt: None,
        grace: Duration::ZERO,
        revision: "r2",
    };
    f.exec.run(&cancel, &ctx, t(6)).unwrap();
    let again = f.exec.nodes_at(t(9), &[]);
    assert_eq!(again[0].idle_since, Some(t(9)));
}

#[test]
fn a_job_without_records_is_reported_gone() {
    let mut f = Fixture::new();
    let spec = job("ghost", 1, &["true"], &[]);
    let gpus = placement(&[&[0]]);
    let running = record("ghost", &gpus, None);
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(3));
    assert_eq!(
        event,
        Event::Exited {
            job: "ghost".into(),
            at: t(3),
            exit_code: None
        }
    );
}

/// Field 22 of `/proc/<pid>/stat`.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// A record as a gitfleet without supervisors wrote it: no run, the
/// replica's own pid.
fn write_pids(f: &Fixture, job: &str, pid: u32, start: u64) {
    let dir = f.exec.job_dir(job);
    std::fs::create_dir_all(&dir).unwrap();
    let file = json!({
        "job": job,
        "masterPort": 20000,
        "replicas": [{"rank": 0, "node": "local-0", "gpus": [0], "pid": pid, "startTime": start}],
    });
    std::fs::write(dir.join(PIDS_FILE), file.to_string()).unwrap();
}

#[test]
fn adopts_a_process_that_is_not_its_child() {
    use std::os::unix::process::CommandExt;
    let mut f = Fixture::new();
    // `sh` starts `sleep` in its own group and exits: `sleep` is nobody's child here.
    let out = std::process::Command::new("sh")
        .args(["-c", "sleep 0.5 >/dev/null 2>&1 & echo $!"])
        .process_group(0)
        .output()
        .unwrap();
    let pid: u32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    write_pids(&f, "orphan", pid, start_time(pid));
    let spec = job("orphan", 1, &["true"], &[]);
    let gpus = placement(&[&[0]]);
    let running = record("orphan", &gpus, None);
    let view = view(&running, Some(&spec), Duration::ZERO);
    assert!(
        f.exec.poll(t(1), &[view]).unwrap().is_empty(),
        "adopted, running"
    );
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(2));
    assert_eq!(
        event,
        Event::Exited {
            job: "orphan".into(),
            at: t(2),
            exit_code: None
        },
        "a process recorded without a supervisor, not a child: its exit code cannot be known"
    );
}

#[test]
fn a_reused_pid_is_neither_adopted_nor_signalled() {
    use std::os::unix::process::CommandExt;
    let mut f = Fixture::new();
    let mut bystander = std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = bystander.id();
    // The recorded replica had this pid, but started at another time.
    write_pids(&f, "reused", pid, start_time(pid) + 1);
    let spec = job("reused", 1, &["true"], &[]);
    let gpus = placement(&[&[0]]);
    let stopping = record(
        "reused",
        &gpus,
        Some(Stopping {
            kind: StopKind::Cancel,
            since: t(0),
            for_job: None,
        }),
    );
    let event = poll_until_event(&mut f.exec, &stopping, &spec, Duration::ZERO, t(5));
    assert_eq!(
        event,
        Event::Stopped {
            job: "reused".into(),
            at: t(5)
        }
    );
    std::thread::sleep(StdDuration::from_millis(100));
    assert!(bystander.try_wait().unwrap().is_none(), "not signalled");
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}

fn set_pids(f: &Fixture, job: &str, pids: &serde_json::Value) {
    let dir = f.exec.job_dir(job);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(PIDS_FILE), pids.to_string()).unwrap();
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn wait_for_lines(path: &Path, n: usize) -> Vec<String> {
    let started = Instant::now();
    loop {
        let lines = lines(path);
        if lines.len() >= n {
            return lines;
        }
        assert!(
            started.elapsed() < SETTLE,
            "{} never had {n} lines",
            path.display()
        );
        std::thread::sleep(StdDuration::from_millis(20));
    }
}

#[test]
fn a_replica_started_but_not_recorded_is_found_and_not_started_again() {
    // Found by its claim, then (the claim lost too) by its identity in its
    // supervisor's environment.
    for claim_lost in [false, true] {
        let mut f = Fixture::new();
        let starts = f.path("starts");
        let release = f.path("release");
        let spec = job(
            "unrecorded",
            2,
            &[
                "sh",
                "-c",
                "echo $GITFLEET_REPLICA >> \"$STARTS\"; while [ ! -e \"$RELEASE\" ]; do sleep 0.05; done",
            ],
            &[
                ("STARTS", starts.to_str().unwrap()),
                ("RELEASE", release.to_str().unwrap()),
            ],
        );
        let gpus = placement(&[&[0], &[1]]);
        place(&mut f.exec, &spec, &gpus).unwrap();
        let first = wait_for_lines(&starts, 2);
        let before = f.pids("unrecorded");
        // A crash between starting rank 1's supervisor and recording its pid.
        let mut pids = before.clone();
        let rank1 = pids["replicas"][1].as_object_mut().unwrap();
        rank1.remove("pid").unwrap();
        rank1.remove("startTime").unwrap();
        set_pids(&f, "unrecorded", &pids);
        let run = f
            .exec
            .job_dir("unrecorded")
            .join(before["run"].as_str().unwrap());
        if claim_lost {
            std::fs::remove_file(run.join("1.claim")).unwrap();
        }

        f.restart();
        assert_eq!(place(&mut f.exec, &spec, &gpus).unwrap(), Outcome::Done);
        std::thread::sleep(StdDuration::from_millis(300));
        assert_eq!(
            lines(&starts),
            first,
            "not started twice (claim lost: {claim_lost})"
        );
        assert_eq!(f.pids("unrecorded"), before, "the same supervisor, found");

        std::fs::write(&release, "").unwrap();
        let running = record("unrecorded", &gpus, None);
        let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(2));
        assert_eq!(
            event,
            Event::Exited {
                job: "unrecorded".into(),
                at: t(2),
                exit_code: Some(0)
            }
        );
    }
}

/// `pids.json` as a crash right after the intent leaves it: no process yet.
fn intent_only(f: &Fixture, job: &str) {
    std::fs::create_dir_all(f.exec.job_dir(job).join("run-1")).unwrap();
    let pending = JobRecord::new_pending(job, t(-60));
    set_pids(
        f,
        job,
        &json!({
            "job": job,
            "attempt": attempt(&pending),
            "run": "run-1",
            "masterPort": 20000,
            "replicas": [{"rank": 0, "node": "local-0", "gpus": [0]}],
        }),
    );
}

#[test]
fn an_intent_left_by_a_crash_starts_its_replica_once() {
    let mut f = Fixture::new();
    let starts = f.path("starts");
    let spec = job(
        "intended",
        1,
        &["sh", "-c", "echo $GITFLEET_REPLICA >> \"$STARTS\"; exit 3"],
        &[("STARTS", starts.to_str().unwrap())],
    );
    let gpus = placement(&[&[0]]);
    intent_only(&f, "intended");
    assert_eq!(place(&mut f.exec, &spec, &gpus).unwrap(), Outcome::Done);
    let running = record("intended", &gpus, None);
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(1));
    assert_eq!(
        event,
        Event::Exited {
            job: "intended".into(),
            at: t(1),
            exit_code: Some(3)
        }
    );
    // Carried out once more (another crash before the reconciler recorded it).
    f.restart();
    assert_eq!(place(&mut f.exec, &spec, &gpus).unwrap(), Outcome::Done);
    std::thread::sleep(StdDuration::from_millis(200));
    assert_eq!(lines(&starts), ["intended/run-1/0"]);
}

#[test]
fn a_replica_given_up_is_never_started_by_a_late_supervisor() {
    let mut f = Fixture::new();
    let starts = f.path("starts");
    let spec = job(
        "late",
        1,
        &["sh", "-c", "echo started >> \"$STARTS\""],
        &[("STARTS", starts.to_str().unwrap())],
    );
    let gpus = placement(&[&[0]]);
    intent_only(&f, "late");
    // The reconciler thinks it runs; nothing of it is found: given up.
    let running = record("late", &gpus, None);
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(1));
    assert_eq!(
        event,
        Event::Exited {
            job: "late".into(),
            at: t(1),
            exit_code: None
        }
    );
    // A supervisor that was on its way finds the tombstone and starts nothing.
    let run = f.exec.job_dir("late").join("run-1");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet-supervise"))
        .arg("--claim")
        .arg(run.join("0.claim"))
        .arg("--exit-file")
        .arg(run.join("0.exit"))
        .args(["--", "sh", "-c", "echo started >> \"$STARTS\""])
        .env("STARTS", &starts)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!starts.exists(), "not started");
    assert!(!run.join("0.exit").exists());
}

#[test]
fn a_killed_supervisor_takes_its_replica_along_and_counts_as_killed() {
    let mut f = Fixture::new();
    let ready = f.path("ready");
    let spec = job(
        "orphaned",
        1,
        &[
            "sh",
            "-c",
            "echo $$ > \"$READY\"; while :; do sleep 0.05; done",
        ],
        &[("READY", ready.to_str().unwrap())],
    );
    let gpus = placement(&[&[0]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    let replica: i64 = wait_for_file(&ready).trim().parse().unwrap();
    let supervisor = f.pids("orphaned")["replicas"][0]["pid"].as_i64().unwrap();
    assert_ne!(replica, supervisor);
    let status = std::process::Command::new("kill")
        .args(["-KILL", &supervisor.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let running = record("orphaned", &gpus, None);
    let event = poll_until_event(&mut f.exec, &running, &spec, Duration::ZERO, t(1));
    assert_eq!(
        event,
        Event::Exited {
            job: "orphaned".into(),
            at: t(1),
            exit_code: Some(137)
        },
        "no exit file: killed"
    );
    let started = Instant::now();
    while alive(replica) {
        assert!(
            started.elapsed() < SETTLE,
            "the replica outlived its supervisor"
        );
        std::thread::sleep(StdDuration::from_millis(20));
    }
}

#[test]
fn a_stop_reaches_the_replica_once_through_its_supervisor() {
    let mut f = Fixture::new();
    let ready = f.path("ready");
    let terms = f.path("terms");
    let spec = job(
        "graceful",
        1,
        &[
            "sh",
            "-c",
            "trap 'echo TERM >> \"$TERMS\"' TERM; echo up > \"$READY\"; i=0; while [ $i -lt 30 ]; do sleep 0.05; i=$((i+1)); done; exit 0",
        ],
        &[
            ("READY", ready.to_str().unwrap()),
            ("TERMS", terms.to_str().unwrap()),
        ],
    );
    let gpus = placement(&[&[0]]);
    place(&mut f.exec, &spec, &gpus).unwrap();
    wait_for_file(&ready);
    let grace = Duration::from_secs(300);
    let running = record("graceful", &gpus, None);
    assert_eq!(
        preempt(&mut f.exec, &spec, &running, grace, t(10)),
        Outcome::Underway
    );
    let stopping = record(
        "graceful",
        &gpus,
        Some(Stopping {
            kind: StopKind::Preempt,
            since: t(10),
            for_job: Some("other".into()),
        }),
    );
    let event = poll_until_event(&mut f.exec, &stopping, &spec, grace, t(11));
    assert!(matches!(event, Event::Stopped { .. }), "{event:?}");
    assert_eq!(
        lines(&terms),
        ["TERM"],
        "SIGTERM once, and the replica kept running"
    );
    let run = f.pids("graceful")["run"].as_str().unwrap().to_string();
    let exit =
        std::fs::read_to_string(f.exec.job_dir("graceful").join(run).join("0.exit")).unwrap();
    assert_eq!(exit, r#"{"code":0}"#, "it exited by itself");
}
