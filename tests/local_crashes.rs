#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

//! The local executor under `kill -9` of the reconciler at random (seeded)
//! points, restarts in between, some rounds as `reconcile --once` runs (as
//! cron starts it): no replica starts twice, no GPU holds two live replicas
//! at once, no finished job starts again, and exit codes are the jobs' own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reconciler::reconcile::status::Status;
use reconciler::state::{Phase, Store};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

/// How many jobs, and how long each replica runs.
const JOBS: usize = 96;
const RUN_SECS: &str = "0.4";
/// Time for the rounds of random kills; then a last run finishes the work.
const KILLING: Duration = Duration::from_secs(30);
const FINISH: Duration = Duration::from_secs(25);

const FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: H100, count: 8}
  nvlink: full
  size: {min: 1, max: 1}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, gracePeriod: 5m, default: true}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: a}
spec: {quota: [{model: H100, guaranteed: 8, limit: 8}]}
"#;

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Job `i`: its replicas, GPUs per replica and exit code.
fn shape(i: usize) -> (u32, u32, i32) {
    let replicas = if i % 4 == 1 { 2 } else { 1 };
    let gpus = [1, 2, 4, 1, 2][i % 5];
    let code = if i.is_multiple_of(3) { 3 } else { 0 };
    (replicas, gpus, code)
}

fn jobs_yaml(log: &Path) -> String {
    let mut yaml = String::new();
    for i in 0..JOBS {
        let (replicas, gpus, code) = shape(i);
        // Each replica logs its start and end with its identity and GPUs.
        let script = format!(
            "echo \"start $GITFLEET_JOB/$RANK $CUDA_VISIBLE_DEVICES $(date +%s%N) $GITFLEET_REPLICA\" >> \"$LOG\"; \
             sleep {RUN_SECS}; \
             echo \"end $GITFLEET_JOB/$RANK $CUDA_VISIBLE_DEVICES $(date +%s%N)\" >> \"$LOG\"; exit {code}"
        );
        yaml += &format!(
            "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: j-{i:02}}}\nspec:\n  queue: a\n  replicas: {replicas}\n  gpusPerReplica: {gpus}\n  env: {{LOG: '{}'}}\n  command: [sh, -c, '{script}']\n",
            log.display()
        );
    }
    yaml
}

struct World {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    state: PathBuf,
    host: PathBuf,
    log: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let log = dir.path().join("replicas.log");
        std::fs::create_dir(&repo).unwrap();
        std::fs::write(repo.join("fleet.yaml"), FLEET).unwrap();
        std::fs::write(repo.join("jobs.yaml"), jobs_yaml(&log)).unwrap();
        let host = dir.path().join("host.yaml");
        let gpus: Vec<String> = (0..8)
            .map(|i| format!("{{index: {i}, model: H100}}"))
            .collect();
        std::fs::write(
            &host,
            format!(
                "nodes:\n  - name: p-0\n    pool: p\n    gpus: [{}]\n",
                gpus.join(", ")
            ),
        )
        .unwrap();
        World {
            state: dir.path().join("state"),
            repo,
            host,
            log,
            _dir: dir,
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg("reconcile")
            .arg(&self.repo)
            .args(["--no-git", "--executor", "local", "--listen", "off"])
            .arg("--observed")
            .arg(&self.host)
            .arg("--state")
            .arg(&self.state)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    fn finished(&self) -> usize {
        Status::read(&self.state)
            .map(|s| {
                s.jobs.get("succeeded").copied().unwrap_or(0)
                    + s.jobs.get("failed").copied().unwrap_or(0)
            })
            .unwrap_or(0) as usize
    }
}

/// One replica's run, from the log.
#[derive(Debug, Default)]
struct Run {
    gpus: Vec<u32>,
    start: u128,
    end: Option<u128>,
}

fn parse_log(text: &str) -> BTreeMap<String, Vec<Run>> {
    let mut runs: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (kind, who, gpus, at) = (fields[0], fields[1], fields[2], fields[3]);
        let at: u128 = at.parse().unwrap();
        let gpus: Vec<u32> = gpus.split(',').map(|g| g.parse().unwrap()).collect();
        let list = runs.entry(who.to_string()).or_default();
        match kind {
            "start" => list.push(Run {
                gpus,
                start: at,
                end: None,
            }),
            "end" => {
                let run = list
                    .iter_mut()
                    .rev()
                    .find(|r| r.end.is_none())
                    .unwrap_or_else(|| panic!("{who} ended without a start"));
                run.end = Some(at);
            }
            other => panic!("{other}: unexpected log line {line:?}"),
        }
    }
    runs
}

#[test]
fn kill_dash_nine_of_the_reconciler_never_runs_a_replica_twice() {
    let world = World::new();
    let seed = std::env::var("GITFLEET_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1e55_u64);
    let mut rng = Rng(seed | 1);
    let started = Instant::now();
    let (mut kills, mut once_runs) = (0, 0);
    while started.elapsed() < KILLING && world.finished() < JOBS {
        if rng.below(5) == 0 {
            // A cron run: one iteration, to its end.
            let out = world
                .command()
                .arg("--once")
                .stderr(Stdio::piped())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "reconcile --once: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            once_runs += 1;
        } else {
            let mut child = world
                .command()
                .args(["--interval", "50ms"])
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(5 + rng.below(400)));
            child.kill().unwrap();
            child.wait().unwrap();
            kills += 1;
        }
    }
    // Let it finish.
    let mut child = world
        .command()
        .args(["--interval", "50ms"])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + FINISH;
    while world.finished() < JOBS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    eprintln!(
        "seed {seed:#x}: {kills} kills survived, {once_runs} --once runs, {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let log = std::fs::read_to_string(&world.log).unwrap();
    let runs = parse_log(&log);
    // No replica started twice (each job runs once: no preemption here).
    let mut expected = BTreeSet::new();
    for i in 0..JOBS {
        for rank in 0..shape(i).0 {
            expected.insert(format!("j-{i:02}/{rank}"));
        }
    }
    for (who, list) in &runs {
        assert_eq!(list.len(), 1, "{who} started {} times:\n{log}", list.len());
        assert!(list[0].end.is_some(), "{who} never ended:\n{log}");
    }
    assert_eq!(
        runs.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "every replica ran"
    );
    // Never two live replicas on one GPU.
    let mut by_gpu: BTreeMap<u32, Vec<(u128, u128, &str)>> = BTreeMap::new();
    for (who, list) in &runs {
        for run in list {
            for gpu in &run.gpus {
                by_gpu.entry(*gpu).or_default().push((
                    run.start,
                    run.end.unwrap_or(u128::MAX),
                    who,
                ));
            }
        }
    }
    for (gpu, mut spans) in by_gpu {
        spans.sort_unstable();
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "GPU {gpu}: {} started while {} ran",
                pair[1].2,
                pair[0].2
            );
        }
    }
    // Exit codes as the jobs returned them; every job placed once.
    let store = Store::open(&world.state).unwrap();
    let records = store.jobs().unwrap();
    assert_eq!(records.len(), JOBS);
    for i in 0..JOBS {
        let name = format!("j-{i:02}");
        let record = &records[&name];
        let code = shape(i).2;
        let phase = if code == 0 {
            Phase::Succeeded
        } else {
            Phase::Failed
        };
        assert_eq!(record.phase, phase, "{record:?}");
        assert_eq!(record.exit_code, Some(code), "{record:?}");
    }
    let audit = store.audit(0).unwrap();
    for i in 0..JOBS {
        let name = format!("j-{i:02}");
        let places = audit
            .iter()
            .filter(|(_, e)| e.what == "place" && e.subject == name)
            .count();
        assert_eq!(places, 1, "{name} placed exactly once");
    }
    assert!(store.pending_intents().unwrap().is_empty());
    assert!(kills >= 20, "only {kills} kills");
}
