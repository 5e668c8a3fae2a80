//! The loop's HTTP endpoint: /metrics (checked by Prometheus's own
//! `promtool check metrics` when installed; CI installs it), /healthz,
//! /status, and POST /hooks/git waking the loop for a new commit.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

const FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: H100, count: 8}
  nvlink: full
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, default: true}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: a}
spec: {quota: [{model: H100, guaranteed: 8, limit: 8}]}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: a-1}
spec: {queue: a, gpusPerReplica: 6}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: a-2}
spec: {queue: a, gpusPerReplica: 6}
"#;

fn git(args: &[&str], cwd: &Path) {
    let status = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

struct Loop {
    child: Child,
    addr: String,
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(repo: &Path, state: &Path) -> Loop {
    let mut child = Command::new(BIN)
        .args([
            "reconcile",
            repo.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "1h",
            "--now",
            "2026-11-21T10:00:00Z",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines.next().expect("the loop prints its address").unwrap();
        if let Some(rest) = line.strip_prefix("serving http://") {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Loop { child, addr }
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_health_status_and_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    std::fs::write(repo.join("fleet.yaml"), FLEET).unwrap();
    git(&["add", "."], &repo);
    git(&["commit", "-q", "-m", "first"], &repo);
    let running = start(&repo, &dir.path().join("state"));
    let addr = running.addr.clone();

    assert_eq!(http(&addr, "GET", "/healthz"), (200, "ok\n".to_string()));
    wait_for("the first iteration", || {
        http(&addr, "GET", "/status").0 == 200
    });

    let (code, metrics) = http(&addr, "GET", "/metrics");
    assert_eq!(code, 200);
    for line in [
        "gitfleet_gpus{model=\"H100\",pool=\"p\"} 16",
        "gitfleet_gpus_allocated{model=\"H100\",pool=\"p\"} 6",
        "gitfleet_gpus_idle{model=\"H100\",pool=\"p\"} 10",
        "gitfleet_queue_pending_jobs{priority_class=\"normal\",queue=\"a\"} 1",
        "gitfleet_pending_jobs{reason=\"quota\"} 1",
        "gitfleet_jobs{phase=\"running\"} 1",
        "gitfleet_actions_total{type=\"place\"} 1",
        "gitfleet_gpu_fragmentation_ratio 0.2",
        "gitfleet_reconcile_duration_seconds_count 1",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
    assert!(metrics.contains("gitfleet_applied_revision_info{revision=\""));
    promtool_check(&metrics);

    // A new commit, then the webhook: applied at once, not after the 1h interval.
    let more = FLEET.replace("guaranteed: 8, limit: 8", "guaranteed: 8, limit: 16");
    std::fs::write(repo.join("fleet.yaml"), more).unwrap();
    git(&["commit", "-q", "-am", "raise the limit"], &repo);
    assert_eq!(http(&addr, "POST", "/hooks/git").0, 202);
    wait_for("the webhook's iteration", || {
        http(&addr, "GET", "/metrics")
            .1
            .contains("gitfleet_jobs{phase=\"running\"} 2")
    });
    assert_eq!(http(&addr, "GET", "/nope").0, 404);
}

/// Runs `promtool check metrics` on the exposition; CI sets
/// GITFLEET_REQUIRE_PROMTOOL=1 after installing Debian's prometheus package.
fn promtool_check(metrics: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("GITFLEET_REQUIRE_PROMTOOL").is_none(),
            "promtool is required but not installed"
        );
        eprintln!("promtool not installed: skipping the exposition-format check");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
