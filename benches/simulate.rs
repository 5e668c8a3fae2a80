//! `cargo bench --bench simulate [-- --scale F] [--runs N] [--until DUR] [CASE…]`:
//! the full Philly trace (`data/traces/philly_pollux_jobs.csv`, 82,229
//! jobs on its 11 virtual clusters, no borrowing) replayed in-process, per
//! case: `gitfleet` (the engine, ladder limits), `gitfleet-noisy` (noisy
//! limits), `gitfleet-none` (no limits), `gitfleet-sf`,
//! `gitfleet-sf-noisy` and `gitfleet-sf-exact` (every queue `ordering:
//! shortest-first`, ladder, noisy or exact limits: the last knows the
//! future, as the oracle), `gitfleet-sm` and `gitfleet-sm-noisy` (every
//! queue `ordering: smallest-first`, ladder or noisy limits), `fifo`,
//! `fifo-skip`, `sjf-oracle`. Prints, per case, the
//! median wall time of N runs (default 1), plans, waits, and the ratios of
//! each gitfleet case's average wait to fifo's and sjf-oracle's; then the
//! process's peak memory. CPU seconds are shown
//! beside wall seconds: on a shared machine they are the figure to compare.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reconciler::load::{SourceFile, load_fleet};
use reconciler::simulate::{Limits, Options, Policy, Report, simulate};
use reconciler::spec::QueueOrdering;
use reconciler::trace::{Source, TraceFormat, parse};

/// The allocator the binary uses, so in-process figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CASES: [&str; 11] = [
    "gitfleet",
    "gitfleet-noisy",
    "gitfleet-none",
    "gitfleet-sf",
    "gitfleet-sf-noisy",
    "gitfleet-sf-exact",
    "gitfleet-sm",
    "gitfleet-sm-noisy",
    "fifo",
    "fifo-skip",
    "sjf-oracle",
];

fn case(name: &str) -> Option<(Policy, Limits, Option<QueueOrdering>)> {
    let sf = Some(QueueOrdering::ShortestFirst);
    let sm = Some(QueueOrdering::SmallestFirst);
    Some(match name {
        "gitfleet" => (Policy::Gitfleet, Limits::Ladder, None),
        "gitfleet-noisy" => (Policy::Gitfleet, Limits::Noisy, None),
        "gitfleet-none" => (Policy::Gitfleet, Limits::None, None),
        "gitfleet-sf" => (Policy::Gitfleet, Limits::Ladder, sf),
        "gitfleet-sf-noisy" => (Policy::Gitfleet, Limits::Noisy, sf),
        "gitfleet-sf-exact" => (Policy::Gitfleet, Limits::Exact, sf),
        "gitfleet-sm" => (Policy::Gitfleet, Limits::Ladder, sm),
        "gitfleet-sm-noisy" => (Policy::Gitfleet, Limits::Noisy, sm),
        "fifo" => (Policy::Fifo, Limits::None, None),
        "fifo-skip" => (Policy::FifoSkip, Limits::None, None),
        "sjf-oracle" => (Policy::SjfOracle, Limits::None, None),
        _ => return None,
    })
}

/// CPU seconds this process has used (user + system): on a shared machine
/// the honest figure beside the wall time.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

fn main() {
    let mut scale = 4.0;
    let mut runs = 1;
    let mut until: Option<reconciler::spec::Duration> = None;
    let mut cases: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--scale" => scale = args.next().unwrap().parse().unwrap(),
            "--runs" => runs = args.next().unwrap().parse().unwrap(),
            "--until" => until = Some(args.next().unwrap().parse().unwrap()),
            "--bench" => {}
            name if case(name).is_some() => cases.push(name.to_string()),
            other => panic!("unknown argument {other}; cases: {CASES:?}"),
        }
    }
    if cases.is_empty() {
        cases = CASES.iter().map(|c| c.to_string()).collect();
    }
    let traces = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/traces");
    let jobs = std::fs::read_to_string(traces.join("philly_pollux_jobs.csv"))
        .expect("the Philly trace in data/traces");
    let nodes = std::fs::read_to_string(traces.join("philly_vc_nodes.csv")).unwrap();
    let trace = parse(
        TraceFormat::Philly,
        Source {
            name: "philly_pollux_jobs.csv",
            text: &jobs,
        },
        Some(Source {
            name: "philly_vc_nodes.csv",
            text: &nodes,
        }),
    )
    .unwrap();
    let files: Vec<SourceFile> = trace
        .shape
        .as_ref()
        .unwrap()
        .files()
        .into_iter()
        .map(|(name, text)| SourceFile::new(name.as_str(), text.into_bytes()))
        .collect();
    let loaded = load_fleet(&files);
    assert!(loaded.is_valid());
    let fleet = loaded.fleet;
    println!(
        "Philly: {} jobs, {} dropped, arrival scale {scale}, {runs} run(s) per case",
        trace.jobs.len(),
        trace.dropped.len()
    );
    println!(
        "{:<17} {:>9} {:>9} {:>8} {:>10} {:>9} {:>9} {:>10} {:>7} {:>7} {:>6}",
        "case",
        "wall",
        "cpu",
        "plans",
        "plans/cpu-s",
        "avg wait",
        "p50 wait",
        "p95 wait",
        "alloc",
        "backlog",
        "preempt"
    );
    let mut reports: Vec<(String, Report)> = Vec::new();
    for name in &cases {
        let (policy, limits, ordering) = case(name).unwrap();
        let options = Options {
            arrival_scale: scale,
            limits,
            policy,
            seed: 1,
            until,
            ordering,
            checkpoint: false,
        };
        let mut times: Vec<Duration> = Vec::new();
        let mut cpus: Vec<f64> = Vec::new();
        let mut last = None;
        for _ in 0..runs {
            let start = Instant::now();
            let cpu = cpu_seconds();
            let report = simulate(
                &fleet,
                &trace.jobs,
                trace.dropped.len() as u64,
                &options,
                &mut |_| {},
            )
            .unwrap();
            times.push(start.elapsed());
            cpus.push(cpu_seconds() - cpu);
            last = Some(report);
        }
        times.sort();
        cpus.sort_by(f64::total_cmp);
        let wall = times[times.len() / 2];
        let cpu = cpus[cpus.len() / 2];
        let r = last.unwrap();
        let m = &r.metrics;
        println!(
            "{:<17} {:>8.1}s {:>8.1}s {:>8} {:>10.0} {:>8}s {:>8}s {:>9}s {:>7.3} {:>7.3} {:>6}",
            name,
            wall.as_secs_f64(),
            cpu,
            r.totals.plans,
            r.totals.plans as f64 / cpu.max(1e-9),
            m.avg_wait_s,
            m.p50_wait_s,
            m.p95_wait_s,
            m.gpu_alloc,
            m.gpu_alloc_backlog,
            m.preemptions
        );
        reports.push((name.clone(), r));
    }
    let wait = |name: &str| {
        reports
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.metrics.avg_wait_s.max(1) as f64)
    };
    for case in CASES.iter().filter(|c| c.starts_with("gitfleet")) {
        if let (Some(g), Some(f)) = (wait(case), wait("fifo")) {
            println!(
                "fifo avg wait / {case} avg wait: {:.2}x (target >= 7)",
                f / g
            );
        }
        if let (Some(g), Some(s)) = (wait(case), wait("sjf-oracle")) {
            println!(
                "{case} avg wait / sjf-oracle avg wait: {:.2}x (target <= 1.1)",
                g / s
            );
        }
    }
    if let Some(mib) = peak_rss_mib() {
        println!("peak memory: {mib} MiB");
    }
}
