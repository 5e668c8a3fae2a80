//! SIGTERM stops `gitfleet reconcile` within a bound, between iterations at
//! once and in the middle of one after `--shutdown-timeout`, and a restart
//! carries on from where it stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reconciler::state::{Phase, Store};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

fn generate(dir: &Path) {
    let out = Command::new(BIN)
        .args(["generate", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn reconcile(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("reconcile")
        .arg(dir.join("repo"))
        .args(["--no-git", "--listen", "off", "--state"])
        .arg(dir.join("state"))
        .arg("--observed")
        .arg(dir.join("observed.yaml"))
        .args(extra);
    cmd
}

fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for the child to exit; returns its code and how long it took.
fn wait_bounded(child: &mut Child, bound: Duration) -> (Option<i32>, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), started.elapsed());
        }
        if started.elapsed() > bound {
            child.kill().unwrap();
            panic!("still running {bound:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_between_iterations_stops_the_loop_at_once() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path());
    let mut child = reconcile(dir.path(), &["--interval", "1h", "--sim-step", "1m"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The first iteration's summary line: the loop then waits an hour.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.find(|l| l.as_ref().unwrap().contains(" rev dir:"));
    assert!(first.is_some(), "no iteration line");
    terminate(&child);
    let (code, took) = wait_bounded(&mut child, Duration::from_secs(10));
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn sigterm_during_an_iteration_exits_within_the_timeout_and_a_restart_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path());
    // The first iteration places hundreds of jobs (a second or more here);
    // SIGTERM comes in the middle of it.
    let mut child = reconcile(dir.path(), &["--once", "--shutdown-timeout", "200ms"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let state = dir.path().join("state");
    let started = Instant::now();
    // The database (a new one under a temporary name until its first
    // synced commit, `state.redb.new-<boot id>`) shows the iteration began.
    let begun = || {
        std::fs::read_dir(&state).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("state.redb"))
            })
        })
    };
    while !begun() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(150));
    terminate(&child);
    let (code, took) = wait_bounded(&mut child, Duration::from_secs(20));
    // 143 when the timeout passed mid-iteration; 0 if it just finished.
    assert!(matches!(code, Some(143) | Some(0)), "{code:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");

    // What was under way is carried out on the next start, once: no GPU
    // is held by two jobs, and the status counts what the records hold.
    let out = reconcile(dir.path(), &["--once"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open(&state).unwrap();
    let mut held = HashSet::new();
    for record in store.jobs().unwrap().values() {
        if record.phase == Phase::Running {
            for replica in &record.placement {
                for gpu in &replica.gpus {
                    assert!(
                        held.insert((replica.node.clone(), *gpu)),
                        "{}[{gpu}] given twice",
                        replica.node
                    );
                }
            }
        }
    }
    assert!(store.pending_intents().unwrap().is_empty());
    drop(store);
    let status = Command::new(BIN)
        .args(["status", "-o", "json", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        status["gpus"]["allocated"].as_u64().unwrap(),
        held.len() as u64
    );
}
