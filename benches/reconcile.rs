//! `cargo bench --bench reconcile`: reconcile-iteration latency on
//! examples/fleet with the sim executor, in-process, from a Git repository
//! (a copy of examples/fleet committed into a temporary repository):
//! - unchanged: no new commit since the last iteration (target < 50 ms);
//! - quota change: a new commit that changes one queue's limit before each
//!   iteration (the fleet is re-read from Git, validated and re-planned).
//!
//! Medians of many iterations; the state (redb) is on the temporary disk.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use futures_executor::block_on;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reconciler::exec::sim::SimExecutor;
use reconciler::observed::Timestamp;
use reconciler::reconcile::{FleetSource, Reconciler};
use reconciler::state::Store;

const UNCHANGED_RUNS: usize = 50;
const CHANGED_RUNS: usize = 20;

fn git(args: &[&str], cwd: &Path) {
    let status = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is ignored.
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("repo dir");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet");
    for entry in walk(&examples) {
        let relative = entry.strip_prefix(&examples).expect("inside");
        let target = repo.join(relative);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&entry, &target).expect("copy");
    }
    git(&["init", "-q", "-b", "main"], &repo);
    git(&["add", "-A"], &repo);
    git(&["commit", "-q", "-m", "fleet"], &repo);

    let store = Arc::new(Store::open(&dir.path().join("state")).expect("state"));
    let sim =
        SimExecutor::open(store.clone(), None, reconciler::spec::Duration::ZERO).expect("sim");
    let mut reconciler = Reconciler::new(FleetSource::detect(&repo, None), store, sim);
    let start: Timestamp = "2026-11-21T10:00:00Z".parse().expect("time");
    let mut minute = 0;
    let mut tick = || {
        minute += 1;
        start + chrono::Duration::minutes(minute)
    };

    let first = Instant::now();
    let iteration = block_on(reconciler.iterate(tick())).expect("first iteration");
    let first = first.elapsed();
    let placed = iteration.executed.len();

    let mut unchanged = Vec::new();
    for _ in 0..UNCHANGED_RUNS {
        let t = Instant::now();
        block_on(reconciler.iterate(tick())).expect("iteration");
        unchanged.push(t.elapsed());
    }

    let queues = repo.join("queues.yaml");
    let original = std::fs::read_to_string(&queues).expect("queues.yaml");
    let mut changed = Vec::new();
    for i in 0..CHANGED_RUNS {
        let limit = if i % 2 == 0 {
            "limit: 561"
        } else {
            "limit: 560"
        };
        std::fs::write(&queues, original.replacen("limit: 560", limit, 1)).expect("write");
        git(&["commit", "-q", "-am", "quota change"], &repo);
        let t = Instant::now();
        let iteration = block_on(reconciler.iterate(tick())).expect("iteration");
        changed.push(t.elapsed());
        assert!(iteration.refused.is_none());
    }

    println!("reconcile iteration on examples/fleet (sim executor, Git source), medians:");
    println!("  first iteration ({placed} actions): {}", ms(first));
    println!(
        "  unchanged, {UNCHANGED_RUNS} runs:        {}",
        ms(median(unchanged))
    );
    println!(
        "  one quota change, {CHANGED_RUNS} runs:  {}",
        ms(median(changed))
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
