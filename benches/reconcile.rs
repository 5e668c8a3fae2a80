//! `cargo bench --bench reconcile [-- example|burst]`: reconcile-iteration
//! latency with the sim executor, in-process.
//!
//! `example`: examples/fleet from a Git repository (a copy committed into a
//! temporary repository):
//! - unchanged: no new commit since the last iteration (target < 50 ms);
//! - quota change: a new commit that changes one queue's limit before each
//!   iteration (the fleet is re-read from Git, validated and re-planned).
//!
//! `burst` (issue 20 item 5, "apply as fast as plan"): 5,000 jobs queued on
//! an empty fleet of 512 nodes × 8 GPUs (the fleet generator, seed 1, not
//! settled), in a plain directory. Each run times what `gitfleet plan DIR`
//! does (read, validate, plan against the pools' inventory; the engine
//! alone too) and then a first `reconcile --once` on a new state (open the
//! state, the sim executor, one iteration that places every job the plan
//! places, each action recorded as intended and as done). Target: the first
//! reconcile at most 2× the plan.
//!
//! `large` (issue 20 item 3, "incremental re-plan"): the bench generator's
//! `l` fleet (10,000 nodes × 8 GPUs in 10 pools, 75 queues, 150,000 jobs in
//! 150 files of 1,000) committed into a temporary Git repository; a first
//! iteration places what fits, then it times unchanged iterations,
//! iterations after a commit that changes one job's command (no plan can
//! see it: the last plan is kept for the new revision, docs/semantics.md
//! "Changes no plan can see"), one that changes another job's replicas (what
//! the engine reads: planned again) and one that changes one queue's limit,
//! each split into prepare (fetch,
//! load, observe, plan, pending jobs recorded) and apply; and, beside the
//! loop, what a full load of the revision costs phase by phase (fetch the
//! revision, read the blobs, parse, validate); the rest of prepare split
//! (prune protection, the observed state built, the pending jobs noted);
//! and, after each iteration, what the loop does next (`run::record`:
//! expected starts, the dashboard's view, the status, `observed.json`, the
//! metrics), timed apart. Target: a one-job or
//! one-queue commit under 100 ms end to end, unchanged under 5 ms. Each
//! unchanged iteration is followed by two more, 15 s and 30 s later, which
//! may re-use the plan (docs/semantics.md, "Unchanged iterations"; the
//! first re-used plan is checked against the engine run again).
//!
//! Medians of many iterations; the state (redb) is on the temporary disk.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use futures_executor::block_on;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reconciler::engine::{PlanInput, plan};
use reconciler::exec::sim::SimExecutor;
use reconciler::generate::{FleetSize, generate};
use reconciler::load::{fs::read_fleet_dir, load_fleet, parse_files};
use reconciler::observed::{Timestamp, derive_inventory};
use reconciler::plan::Action;
use reconciler::reconcile::{ActionResult, FleetSource, Reconciler};
use reconciler::state::Store;
use reconciler::validate::check_documents;

/// The allocator the binary uses, so in-process figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// As the binary: freed memory kept for the next plan.
#[path = "../src/keep_freed.rs"]
mod keep_freed;

const UNCHANGED_RUNS: usize = 50;
const CHANGED_RUNS: usize = 20;
const BURST_RUNS: usize = 9;

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
    keep_freed::keep_freed_memory();
    // `cargo bench` passes `--bench`; other arguments choose the parts.
    let chosen: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |part: &str| chosen.is_empty() || chosen.iter().any(|c| c == part);
    if wants("example") {
        example();
    }
    if wants("burst") {
        burst();
    }
    if wants("large") {
        large();
    }
}

/// examples/fleet from Git: first, unchanged and quota-change iterations.
fn example() {
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

/// 5,000 jobs on an empty 512-node fleet: `plan` against a first
/// `reconcile --once`, interleaved run by run.
fn burst() {
    let now: Timestamp = "2026-11-21T10:00:00Z".parse().expect("time");
    let size = FleetSize {
        nodes: 512,
        gpus_per_node: 8,
        pending: 5_000,
        running: 0,
        leaves: 60,
        seed: 1,
    };
    let generated = generate(size, now);
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet_dir = dir.path().join("fleet");
    for (path, text) in &generated.files {
        let file = fleet_dir.join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(&file, text).expect("write");
    }
    let (mut plans, mut engines, mut firsts) = (Vec::new(), Vec::new(), Vec::new());
    // Open the state and the sim, load, observe, plan, note the pending jobs, the rest (apply).
    let mut splits: Vec<[Duration; 6]> = Vec::new();
    let mut placed = 0;
    let mut actions = 0;
    for run in 0..BURST_RUNS {
        // What `gitfleet plan DIR` does, less printing.
        let t = Instant::now();
        let files = read_fleet_dir(&fleet_dir).expect("read");
        let loaded = load_fleet(&files);
        assert!(loaded.is_valid());
        let observed = derive_inventory(&loaded.fleet);
        let e = Instant::now();
        let planned = plan(&PlanInput {
            fleet: &loaded.fleet,
            observed: &observed,
            now,
            revision: None,
        });
        engines.push(e.elapsed());
        plans.push(t.elapsed());
        actions = planned.actions.len();
        placed = planned
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Place { .. }))
            .count();
        drop((files, loaded, observed, planned));

        // A first `reconcile --once` on a new state.
        let state = dir.path().join(format!("state-{run}"));
        let t = Instant::now();
        let store = Arc::new(Store::open(&state).expect("state"));
        let sim =
            SimExecutor::open(store.clone(), None, reconciler::spec::Duration::ZERO).expect("sim");
        let source = FleetSource::Dir {
            path: fleet_dir.clone(),
        };
        let mut reconciler = Reconciler::new(source, store, sim);
        let opened = t.elapsed();
        let iteration = block_on(reconciler.iterate(now)).expect("first iteration");
        firsts.push(t.elapsed());
        let p = &iteration.phases;
        let engine = Duration::from_secs_f64(iteration.plan_seconds.unwrap_or_default());
        let before_apply = opened + p.fetch + p.load + p.observe + p.observed + engine + p.noted;
        splits.push([
            opened,
            p.load,
            p.observe + p.observed,
            engine,
            p.noted,
            t.elapsed().saturating_sub(before_apply),
        ]);
        assert_eq!(iteration.executed.len(), actions, "the plan's actions");
        assert!(
            iteration
                .executed
                .iter()
                .all(|e| matches!(e.result, ActionResult::Applied(_))),
            "every action carried out"
        );
        drop(reconciler);
        std::fs::remove_dir_all(&state).expect("remove state");
    }
    let (plan_med, first_med) = (median(plans), median(firsts));
    println!(
        "burst: 5,000 jobs queued on 512 empty nodes ({actions} actions, {placed} placed), medians of {BURST_RUNS} runs:"
    );
    println!("  plan (read, validate, plan): {}", ms(plan_med));
    println!("  engine alone:                {}", ms(median(engines)));
    println!("  first reconcile --once:      {}", ms(first_med));
    println!(
        "  first reconcile / plan:      {:.2}x",
        first_med.as_secs_f64() / plan_med.as_secs_f64()
    );
    let part = |i: usize| ms(median(splits.iter().map(|s| s[i]).collect()));
    println!(
        "  its parts: open {}, load {}, observe {}, engine {}, pending noted {}, apply {}",
        part(0),
        part(1),
        part(2),
        part(3),
        part(4),
        part(5)
    );
}

/// Runs of `large` (`GITFLEET_LARGE_RUNS`, 9 unless set: fewer under a
/// profiler).
fn large_runs() -> usize {
    std::env::var("GITFLEET_LARGE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(9)
}

/// Replaces the first `from` after `anchor` in the file `path` by `to`.
fn edit_after(path: &Path, anchor: &str, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    let at = text.find(anchor).expect("anchor");
    let offset = at + text[at..].find(from).expect("field after the anchor");
    let mut edited = text[..offset].to_string();
    edited.push_str(to);
    edited.push_str(&text[offset + from.len()..]);
    std::fs::write(path, edited).expect("write");
}

/// One timed iteration's phases: whole, prepare (of which fetch, load,
/// observe, engine, other), apply; the load's parts: list, read,
/// parse, assemble, validate, files parsed; and the other's parts: prune
/// protection, the observed state built, the pending jobs noted, the rest;
/// and what the loop does after the iteration (`run::record`: the status,
/// the dashboard's view, `observed.json`, the metrics, the expected starts).
type Row = [Duration; 22];

/// What the loop keeps beside the reconciler for [`run::record`].
struct Loop {
    shared: reconciler::reconcile::run::Shared,
    state_dir: std::path::PathBuf,
}

fn timed_iteration(reconciler: &mut Reconciler<SimExecutor>, now: Timestamp, lp: &Loop) -> Row {
    timed_iteration_reused(reconciler, now, lp).0
}

/// [`timed_iteration`], and whether it re-used the last plan.
fn timed_iteration_reused(
    reconciler: &mut Reconciler<SimExecutor>,
    now: Timestamp,
    lp: &Loop,
) -> (Row, bool) {
    let t = Instant::now();
    let prepared = block_on(reconciler.prepare(now)).expect("prepare");
    let prepare = t.elapsed();
    let iteration = &prepared.iteration;
    let reused = iteration.reused;
    let engine = Duration::from_secs_f64(iteration.plan_seconds.unwrap_or_default());
    assert!(iteration.refused.is_none(), "a valid revision");
    let phases = iteration.phases.clone();
    let t = Instant::now();
    let done = block_on(reconciler.apply(prepared)).expect("apply");
    let apply = t.elapsed();
    let t = Instant::now();
    reconciler::reconcile::run::record(reconciler, &done, t, &lp.shared, &lp.state_dir)
        .expect("record");
    let record = t.elapsed();
    if reused && !CHECKED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        same_as_planned_again(reconciler, &done);
    }
    let stats = phases.loaded.unwrap_or_default();
    assert!(!stats.full, "no full load");
    let parts = stats.read + stats.parse + stats.assemble + stats.validate;
    let row = [
        prepare + apply,
        prepare,
        phases.fetch,
        phases.load,
        phases.observe,
        engine,
        prepare.saturating_sub(phases.fetch + phases.load + phases.observe + engine),
        apply,
        phases.load.saturating_sub(parts),
        stats.read,
        stats.parse,
        stats.assemble,
        stats.validate,
        Duration::from_secs(stats.parsed as u64),
        phases.prune,
        phases.observed,
        phases.noted,
        prepare.saturating_sub(
            phases.fetch
                + phases.load
                + phases.observe
                + engine
                + phases.prune
                + phases.observed
                + phases.noted,
        ),
        record,
        Duration::from_secs(u64::from(stats.in_place)),
        Duration::from_secs(u64::from(stats.checked_alone)),
        Duration::from_secs(u64::from(phases.jobs_kept)),
    ];
    (row, reused)
}

/// Waits until no thread computes the dashboard's expected starts (about a
/// second of plans after a commit): a commit reaches the loop at its
/// interval, when the last one's thread is done and the fleet in force can
/// be lent to the load (docs/semantics.md, "Unchanged iterations"). Back to
/// back, the load copies the unchanged documents instead.
fn settle(lp: &Loop) {
    let until = Instant::now() + Duration::from_secs(60);
    while lp.shared.starts.computing() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a re-used plan was checked against planning again.
static CHECKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The first re-used plan against the engine run again on the same input
/// at the iteration's time (untimed: the re-used plan keeps its own time).
fn same_as_planned_again(
    reconciler: &Reconciler<SimExecutor>,
    done: &reconciler::reconcile::Iteration,
) {
    let observed = reconciler::observed::ObservedState {
        nodes: done.nodes.to_vec(),
        ..reconciler::observed::ObservedState::clone(&done.planned_from)
    };
    let again = plan(&PlanInput {
        fleet: reconciler.fleet().expect("a fleet"),
        observed: &observed,
        now: done.time,
        revision: done.revision.as_ref().map(|r| r.id.as_str()),
    });
    let reused = done.plan.as_deref().expect("a plan");
    assert_eq!(
        reconciler::plan::Plan {
            time: String::new(),
            ..again
        },
        reconciler::plan::Plan {
            time: String::new(),
            ..reused.clone()
        },
        "a re-used plan is the plan made again"
    );
    eprintln!("large: a re-used plan checked: the engine run again plans the same");
}

/// What loading the newest revision costs from scratch, phase by phase:
/// (fetch the revision, read its blobs, parse, validate).
fn full_load(repo: &Path) -> [Duration; 4] {
    let mut source = FleetSource::detect(repo, None);
    let t = Instant::now();
    let revision = source.current().expect("revision");
    let fetch = t.elapsed();
    let t = Instant::now();
    let files = source.files(&revision).expect("read").expect("files");
    let read = t.elapsed();
    let t = Instant::now();
    let mut diagnostics = Vec::new();
    let docs = parse_files(&files, &mut diagnostics);
    let parse = t.elapsed();
    let t = Instant::now();
    check_documents(&docs, &mut diagnostics);
    let validate = t.elapsed();
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    [fetch, read, parse, validate]
}

/// Medians of each column.
fn medians<const N: usize>(rows: &[[Duration; N]]) -> [Duration; N] {
    std::array::from_fn(|i| median(rows.iter().map(|r| r[i]).collect()))
}

/// The `l` fleet in Git: unchanged, one-job and one-queue iterations.
fn large() {
    let start: Timestamp = "2026-11-21T10:00:00Z".parse().expect("time");
    let size = FleetSize {
        nodes: 10_000,
        gpus_per_node: 8,
        pending: 100_000,
        running: 50_000,
        leaves: 60,
        seed: 1,
    };
    let t = Instant::now();
    let generated = generate(size, start);
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("repo");
    for (path, text) in &generated.files {
        let file = repo.join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(&file, text).expect("write");
    }
    let files = generated.files.len();
    drop(generated);
    git(&["init", "-q", "-b", "main"], &repo);
    git(&["add", "-A"], &repo);
    git(&["commit", "-q", "-m", "fleet"], &repo);
    eprintln!("large: generated and committed in {:.1?}", t.elapsed());

    let store = Arc::new(Store::open(&dir.path().join("state")).expect("state"));
    let sim =
        SimExecutor::open(store.clone(), None, reconciler::spec::Duration::ZERO).expect("sim");
    let mut reconciler = Reconciler::new(FleetSource::detect(&repo, None), store, sim);
    let lp = Loop {
        shared: Default::default(),
        state_dir: dir.path().join("loop"),
    };
    std::fs::create_dir(&lp.state_dir).expect("loop dir");
    let mut minute = 0;
    let mut tick = || {
        minute += 1;
        start + chrono::Duration::minutes(minute)
    };
    let t = Instant::now();
    let first = block_on(reconciler.iterate(tick())).expect("first iteration");
    let first_took = t.elapsed();
    let jobs = reconciler.fleet().map_or(0, |f| f.jobs.len());
    eprintln!(
        "large: first iteration {first_took:.1?} ({} actions)",
        first.executed.len()
    );
    drop(first);

    let queues = repo.join("queues.yaml");
    let last_jobs = repo.join(format!("jobs/jobs-{:04}.yaml", files - 4));
    let (mut unchanged, mut job, mut queue) = (Vec::new(), Vec::new(), Vec::new());
    let (mut shape, mut kept) = (Vec::new(), 0);
    let (mut later, mut reused) = ([Vec::new(), Vec::new()], [0, 0]);
    let mut loads = Vec::new();
    let runs = large_runs();
    for run in 0..runs {
        let at = tick();
        unchanged.push(timed_iteration(&mut reconciler, at, &lp));
        // Still unchanged, 15 s and 30 s (the loop's default interval)
        // later: the plan may be re-used (docs/semantics.md, "Unchanged
        // iterations").
        for (k, seconds) in [15, 30].into_iter().enumerate() {
            let (row, was) = timed_iteration_reused(
                &mut reconciler,
                at + chrono::Duration::seconds(seconds),
                &lp,
            );
            later[k].push(row);
            reused[k] += usize::from(was);
        }

        // One job's command changed (toggled, so the fleet stays the same size).
        let (from, to) = if run % 2 == 0 {
            ("[python, train.py]", "[python, eval.py]")
        } else {
            ("[python, eval.py]", "[python, train.py]")
        };
        edit_after(&last_jobs, "name: job-149999}", from, to);
        git(&["commit", "-q", "-am", "one job"], &repo);
        settle(&lp);
        let (row, was) = timed_iteration_reused(&mut reconciler, tick(), &lp);
        job.push(row);
        kept += usize::from(was);
        loads.push(full_load(&repo));

        // One job's replicas changed (what the engine reads: planned again).
        let (from, to) = if run % 2 == 0 {
            ("replicas: ", "replicas: 1")
        } else {
            ("replicas: 1", "replicas: ")
        };
        edit_after(&last_jobs, "name: job-149998}", from, to);
        git(&["commit", "-q", "-am", "one job's shape"], &repo);
        settle(&lp);
        shape.push(timed_iteration(&mut reconciler, tick(), &lp));

        // One queue's limit changed.
        let (from, to) = if run % 2 == 0 {
            ("limit: ", "limit: 1")
        } else {
            ("limit: 1", "limit: ")
        };
        edit_after(&queues, "name: team-0-0}", from, to);
        git(&["commit", "-q", "-am", "one queue"], &repo);
        settle(&lp);
        queue.push(timed_iteration(&mut reconciler, tick(), &lp));
    }
    println!(
        "large: {} nodes, {jobs} jobs in {files} files (sim executor, Git source), medians of {runs}:",
        size.nodes
    );
    println!("  first iteration: {}", ms(first_took));
    println!(
        "  iteration         | whole      | prepare    (fetch      load       observe    engine     other)     | apply"
    );
    let cases = [
        ("unchanged", &unchanged),
        ("unchanged, +15 s", &later[0]),
        ("unchanged, +30 s", &later[1]),
        ("one job changed", &job),
        ("one job's shape", &shape),
        ("one queue changed", &queue),
    ];
    for (name, rows) in cases {
        let m = medians(rows);
        println!(
            "  {name:<18}| {:>10} | {:>10} ({:>10} {:>10} {:>10} {:>10} {:>10}) | {:>10}",
            ms(m[0]),
            ms(m[1]),
            ms(m[2]),
            ms(m[3]),
            ms(m[4]),
            ms(m[5]),
            ms(m[6]),
            ms(m[7])
        );
    }
    println!(
        "  the load's parts  | list       | read       | parse      | assemble   | validate   | files parsed | in place | checked alone | jobs kept"
    );
    println!(
        "  plans re-used: {} of {runs} at +15 s, {} of {runs} at +30 s; kept for the one-job commit (its command: no plan can see it) {kept} of {runs}",
        reused[0], reused[1]
    );
    for (name, rows) in &cases[3..] {
        let m = medians(rows);
        println!(
            "  {name:<18}| {:>10} | {:>10} | {:>10} | {:>10} | {:>10} | {:>12} | {:>8} | {:>13} | {}",
            ms(m[8]),
            ms(m[9]),
            ms(m[10]),
            ms(m[11]),
            ms(m[12]),
            m[13].as_secs(),
            rows.iter().filter(|r| r[19] > Duration::ZERO).count(),
            rows.iter().filter(|r| r[20] > Duration::ZERO).count(),
            rows.iter().filter(|r| r[21] > Duration::ZERO).count()
        );
    }
    println!(
        "  the other's parts | prune      | observed   | noted      | rest       | then run::record"
    );
    for (name, rows) in &cases {
        let m = medians(rows);
        println!(
            "  {name:<18}| {:>10} | {:>10} | {:>10} | {:>10} | {:>10}",
            ms(m[14]),
            ms(m[15]),
            ms(m[16]),
            ms(m[17]),
            ms(m[18])
        );
    }
    let [fetch, read, parse, validate] = medians(&loads);
    println!(
        "  a full load of a revision: fetch {}, read {}, parse {}, validate {}",
        ms(fetch),
        ms(read),
        ms(parse),
        ms(validate)
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
