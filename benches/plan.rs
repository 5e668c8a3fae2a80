//! `cargo bench --bench plan [-- SIZE…]`: the whole `gitfleet plan -o json`
//! command and the engine alone on generated fleets, medians of several
//! runs, plus the command's peak memory (`-- --engine-only SIZE…`: the
//! engine alone, loaded once, for profiling; `-- --planner SIZE…`: the
//! engine as the reconcile loop runs it, a `Planner` planning again;
//! `-- --replan SIZE…`: its plans fed back, then re-plans after a one-job
//! and a one-queue change, as the loop's after a commit). A fleet's name
//! is its size — xs (100 nodes), s (1k nodes, 10k pending, 5k running), m
//! (3k, 30k, 15k), l (10k nodes × 8 GPUs, 100k pending, 50k running) — a
//! settled snapshot (a live fleet's, plus 2 % fresh jobs), or with `-storm`
//! unsettled: every pending job that outranks a running one preempts at
//! once. Then any of these, each changing the default shape (60 leaf
//! queues in three levels, 4 priority classes, 95 % preemptible, two GPU
//! models, a trace-like job mix, a few percent of running jobs past their
//! time limit; see `generate::Shape`):
//! `-q{N}` N leaf queues; `-2m` pools of 200 nodes instead of 1,000 (so
//! s's five pools have l's model mix, one in five A100); `-late` a third
//! of the running jobs past their time limit (`-past{N}`: N %); `-np{N}`
//! N % of the jobs in a class that is not preemptible; `-p{N}` N priority
//! classes; `-d{N}` N queue levels; `-g{N}` N % of the jobs gangs of 2–4
//! whole nodes (`-gn{N}`: up to N); `-m{N}` N GPU models.
//! Named shapes: s-storm → l-storm grows the fleet (same 60 teams, deeper
//! queues); s-storm-q6 → l-storm grows it with its teams (6 → 60: each
//! team's share of the fleet the same); s-storm-q6 → l-storm-q600 grows it
//! by its number of teams;
//! s-storm-2m → l-storm grows the size alone (s-storm's single pool has one
//! model); l-storm-late-q67 is issue 20's fleet (75 queues in three levels,
//! a third of the running jobs past their limit). Fleets are generated
//! once into target/bench-fleets/ (the observed state as YAML and JSON; the
//! bench reads the JSON, as a machine-written snapshot would be).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reconciler::engine::{PlanInput, Planner, Unchanged, plan};
use reconciler::generate::{FleetSize, Shape, generate_shaped, settle};
use reconciler::load::parse_observed;
use reconciler::load::{Loaded, fs::read_fleet_dir, load_fleet};
use reconciler::observed::{ObservedState, Timestamp};
use reconciler::plan::Plan;

const RUNS: usize = 5;

/// The allocator the binary uses, so in-process figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// As the binary: freed memory kept for the next plan.
#[path = "../src/keep_freed.rs"]
mod keep_freed;

fn now() -> Timestamp {
    chrono::DateTime::parse_from_rfc3339("2026-11-21T10:00:00Z")
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_default()
}

/// A bench fleet: its size and shape, whether its snapshot is settled, its
/// nodes per pool at most.
#[derive(Debug, Clone, Copy)]
struct Fleet {
    size: FleetSize,
    shape: Shape,
    settled: bool,
    pool_nodes: u32,
}

/// The fleet a name stands for (the module's doc), if any.
fn fleet(name: &str) -> Option<Fleet> {
    let mut parts = name.split('-').peekable();
    let (nodes, pending, running) = match parts.next()? {
        "xs" => (100, 1_000, 500),
        "s" => (1_000, 10_000, 5_000),
        "m" => (3_000, 30_000, 15_000),
        "l" => (10_000, 100_000, 50_000),
        _ => return None,
    };
    let settled = parts.next_if_eq(&"storm").is_none();
    let mut fleet = Fleet {
        size: FleetSize {
            nodes,
            gpus_per_node: 8,
            pending,
            running,
            leaves: 60,
            seed: 1,
        },
        shape: Shape::default(),
        settled,
        pool_nodes: 1000,
    };
    // `prefix` followed by digits only: the number.
    let knob = |part: &str, prefix: &str| -> Option<u32> {
        part.strip_prefix(prefix)
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
    };
    for part in parts {
        let shape = &mut fleet.shape;
        if part == "2m" {
            fleet.pool_nodes = 200;
        } else if part == "late" {
            shape.past_limit_percent = Some(33);
        } else if let Some(n) = knob(part, "q") {
            fleet.size.leaves = n.max(1);
        } else if let Some(n) = knob(part, "past") {
            shape.past_limit_percent = Some(n.min(100));
        } else if let Some(n) = knob(part, "np") {
            shape.preemptible_percent = 100 - n.min(100);
        } else if let Some(n) = knob(part, "p") {
            shape.priority_classes = n.clamp(1, 16);
        } else if let Some(n) = knob(part, "d") {
            shape.queue_levels = n.clamp(2, 8);
        } else if let Some(n) = knob(part, "gn") {
            shape.gang_nodes = n.clamp(2, 64);
        } else if let Some(n) = knob(part, "g") {
            shape.gang_percent = Some(n.min(100));
        } else if let Some(n) = knob(part, "m") {
            shape.models = n.clamp(1, 4);
        } else {
            return None;
        }
    }
    Some(fleet)
}

fn fleet_dir(name: &str, fleet: &Fleet) -> PathBuf {
    let Fleet {
        size,
        shape,
        settled,
        pool_nodes,
    } = *fleet;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-fleets")
        .join(name);
    if !dir.join("observed.json").exists() || !dir.join(".settled-v1").exists() {
        let started = Instant::now();
        let mut generated = generate_shaped(size, shape, pool_nodes, now());
        if settled {
            settle(&mut generated, 2, now());
        }
        for (path, text) in &generated.files {
            let file = dir.join("repo").join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, text).expect("write");
        }
        let observed = serde_saphyr::to_string(&generated.observed).expect("yaml");
        std::fs::write(dir.join("observed.yaml"), observed).expect("write observed");
        let json = serde_json::to_string(&generated.observed).expect("json");
        std::fs::write(dir.join("observed.json"), json).expect("write observed");
        std::fs::write(
            dir.join(".settled-v1"),
            if settled { "settled" } else { "storm" },
        )
        .expect("write marker");
        eprintln!(
            "generated {name}: {} running of {} started, in {:.1?}",
            generated.running,
            size.running,
            started.elapsed()
        );
    }
    dir
}

/// The fleet repository and observed state of a generated fleet, in process.
fn load_generated(dir: &Path) -> (Loaded, ObservedState) {
    let files = read_fleet_dir(&dir.join("repo")).expect("read");
    let loaded = load_fleet(&files);
    assert!(loaded.is_valid());
    let text = std::fs::read_to_string(dir.join("observed.json")).expect("observed");
    let observed = parse_observed("observed.json", &text).expect("valid observed");
    (loaded, observed)
}

/// One engine run and how long it took.
fn run_engine(loaded: &Loaded, observed: &ObservedState) -> (Duration, Plan) {
    let started = Instant::now();
    let p = plan(&PlanInput {
        fleet: &loaded.fleet,
        observed,
        now: now(),
        revision: None,
    });
    (started.elapsed(), p)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// The peak resident memory in MiB of `gitfleet args…`, run once more
/// under GNU time, whose own fork starts the command afresh (a child forked
/// from this process would count this process's memory as its own: Linux
/// keeps the larger resident size across exec); `None` without
/// `/usr/bin/time`.
fn peak_mib(args: &[&std::ffi::OsStr]) -> Option<f64> {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M"])
        .arg(env!("CARGO_BIN_EXE_gitfleet"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .ok()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib: f64 = stderr.lines().last()?.trim().parse().ok()?;
    Some(kib / 1024.0)
}

fn bench(name: &str, fleet: &Fleet) {
    let dir = fleet_dir(name, fleet);
    let repo = dir.join("repo");
    // The observed state as a machine would upload it: JSON.
    let observed_path = dir.join("observed.json");

    // Whole command, as a user runs it.
    let mut wall = Vec::new();
    let args = [
        "plan".as_ref(),
        "-o".as_ref(),
        "json".as_ref(),
        "--observed".as_ref(),
        observed_path.as_os_str(),
        repo.as_os_str(),
    ];
    for _ in 0..RUNS {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .args(args)
            .output()
            .expect("run gitfleet");
        wall.push(started.elapsed());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let peak = peak_mib(&args).map_or("peak n/a".to_string(), |p| format!("peak {p:.0} MiB"));

    // In process: loading and the engine separately.
    let mut load = Vec::new();
    let mut engine = Vec::new();
    let mut jobs = 0;
    let mut actions = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        let (loaded, observed) = load_generated(&dir);
        load.push(started.elapsed());
        let (took, p) = run_engine(&loaded, &observed);
        engine.push(took);
        jobs = loaded.fleet.jobs.len();
        actions = p.actions.len();
    }
    println!(
        "{name:>2}: {} nodes, {jobs} jobs | plan -o json {:>8.1?} ({peak}) | load+parse {:>8.1?} | engine {:>8.1?} | {actions} actions",
        fleet.size.nodes,
        median(wall),
        median(load),
        median(engine),
    );
}

/// The engine alone, loaded once and run `engine_runs()` times (for profiling
/// it with `perf record`).
fn bench_engine(name: &str, fleet: &Fleet) {
    let dir = fleet_dir(name, fleet);
    let (loaded, observed) = load_generated(&dir);
    let mut engine = Vec::new();
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    for run in 0..engine_runs() {
        let (took, p) = run_engine(&loaded, &observed);
        engine.push(took);
        if run == 0 {
            for action in &p.actions {
                *kinds.entry(action.kind()).or_default() += 1;
            }
        }
        std::hint::black_box(p);
    }
    let (min, max) = (
        engine.iter().min().copied().unwrap_or_default(),
        engine.iter().max().copied().unwrap_or_default(),
    );
    println!(
        "{name:>2}: engine median {:>8.1?} (min {min:.1?}, max {max:.1?}, {} runs) | actions {kinds:?}",
        median(engine),
        engine_runs()
    );
}

/// The engine as the reconcile loop runs it: one [`Planner`] planning the
/// same input again and again (its view of the nodes kept), with the
/// plan's horizon, `engine_runs()` times after a first plan.
fn bench_planner(name: &str, fleet: &Fleet) {
    let dir = fleet_dir(name, fleet);
    let (loaded, observed) = load_generated(&dir);
    let input = PlanInput {
        fleet: &loaded.fleet,
        observed: &observed,
        now: now(),
        revision: None,
    };
    let mut planner = Planner::new();
    let first = planner.plan_with_horizon(&input).0;
    let mut engine = Vec::new();
    for _ in 0..engine_runs() {
        let started = Instant::now();
        let (p, _) = planner.plan_with_horizon(&input);
        engine.push(started.elapsed());
        assert_eq!(p, first, "the same plan every time");
    }
    println!(
        "{name:>2}: planner (the loop's engine) median {:>8.1?} ({} runs)",
        median(engine),
        engine_runs()
    );
    // As the loop plans a revision whose jobs it was told are those of the
    // last plan (none changed): the job table made from what was kept.
    let unchanged = Unchanged {
        jobs_but: Some(&[]),
        records: true,
        nodes: true,
    };
    let mut kept = Vec::new();
    for _ in 0..engine_runs() {
        let started = Instant::now();
        let (p, _) = planner.plan_since_last(&input, &observed.nodes, unchanged);
        kept.push(started.elapsed());
        assert_eq!(p, first, "the same plan every time");
    }
    println!(
        "{name:>2}: planner, jobs kept    median {:>8.1?} ({} runs)",
        median(kept),
        engine_runs()
    );
}

/// The engine as the reconcile loop re-plans after a commit (issue 20
/// item 3): one [`Planner`] whose plans are fed back into the observed
/// state (`sim::apply_plan`, a minute apart) until they settle, as the
/// loop's sim executor does; then, `engine_runs()` times each, a plan after
/// a commit that changes one pending job's replicas (vouched: that job
/// alone changed) and one that changes a queue's limit (the jobs vouched
/// unchanged), alternating between the two fleets so every plan sees a
/// change. The timed plans run in [`replans_timed`] (a callgrind
/// `--toggle-collect` target).
fn bench_replan(name: &str, fleet: &Fleet) {
    const ROUNDS: i64 = 4;
    let dir = fleet_dir(name, fleet);
    let (loaded, mut observed) = load_generated(&dir);
    let fleet = loaded.fleet;
    let mut planner = Planner::new();
    let mut at = now();
    for _ in 0..ROUNDS {
        let input = PlanInput {
            fleet: &fleet,
            observed: &observed,
            now: at,
            revision: None,
        };
        let (p, _) = planner.plan_with_horizon(&input);
        observed = reconciler::sim::apply_plan(&fleet, &observed, &p, at);
        at += chrono::Duration::minutes(1);
    }
    // The settled state for `gitfleet plan --observed` (plans compared
    // across versions: `GITFLEET_REPLAN_DUMP=DIR`).
    if let Some(out) = std::env::var_os("GITFLEET_REPLAN_DUMP") {
        let out = PathBuf::from(out);
        std::fs::create_dir_all(&out).unwrap();
        let json = serde_json::to_string(&observed).unwrap();
        std::fs::write(out.join("observed.json"), json).unwrap();
        std::fs::write(out.join("now"), at.to_rfc3339()).unwrap();
        eprintln!(
            "{name}: settled state in {} (plan with --now {} and {})",
            out.display(),
            at.to_rfc3339(),
            dir.join("repo").display()
        );
    }
    // A pending job near the end (as the reconcile bench's), and the
    // first queue with a limit.
    let running: std::collections::HashSet<&str> =
        observed.running.iter().map(|r| r.job.as_str()).collect();
    let k = (0..fleet.jobs.len())
        .rev()
        .find(|&k| !running.contains(fleet.jobs[k].name()))
        .expect("a pending job");
    let mut reshaped = fleet.clone();
    let job = &mut reshaped.jobs[k].spec;
    job.replicas = if job.replicas == 1 { 2 } else { 1 };
    let mut limited = fleet.clone();
    let quota = limited
        .queues
        .iter_mut()
        .flat_map(|q| q.spec.quota.iter_mut())
        .find(|q| q.limit.is_some())
        .expect("a queue with a limit");
    quota.limit = quota.limit.map(|l| l + 8);
    let input = |fleet| PlanInput {
        fleet,
        observed: &observed,
        now: at,
        revision: None,
    };
    // The settled state planned once more, so the planner's last plan is
    // this observed state's.
    planner.plan_since_last(&input(&fleet), &observed.nodes, Unchanged::default());
    let (shape, queue) = replans_timed(&mut planner, [&fleet, &reshaped, &limited], k, &input);
    println!(
        "{name:>2}: re-plan (fed back), one job's replicas median {:>8.1?}, one queue's limit median {:>8.1?} ({} runs each)",
        median(shape),
        median(queue),
        engine_runs()
    );
}

/// The runs of an engine bench (`GITFLEET_ENGINE_RUNS`, 11 unless set:
/// fewer under a profiler).
fn engine_runs() -> usize {
    std::env::var("GITFLEET_ENGINE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(11)
}

/// [`bench_replan`]'s timed plans: `fleets` are the settled fleet, it with
/// job `k` reshaped, it with a queue's limit changed.
#[inline(never)]
fn replans_timed<'a>(
    planner: &mut Planner,
    fleets: [&'a reconciler::spec::Fleet; 3],
    k: usize,
    input: &dyn Fn(&'a reconciler::spec::Fleet) -> PlanInput<'a>,
) -> (Vec<Duration>, Vec<Duration>) {
    let [fleet, reshaped, limited] = fleets;
    let (mut shape, mut queue) = (Vec::new(), Vec::new());
    let changed = [k];
    for run in 0..2 * engine_runs() {
        let to = if run % 2 == 0 { reshaped } else { fleet };
        let unchanged = Unchanged {
            jobs_but: Some(&changed),
            records: true,
            nodes: true,
        };
        let started = Instant::now();
        let p = planner.plan_since_last(&input(to), &input(to).observed.nodes, unchanged);
        shape.push(started.elapsed());
        std::hint::black_box(p);
    }
    for run in 0..2 * engine_runs() {
        let to = if run % 2 == 0 { limited } else { fleet };
        let unchanged = Unchanged {
            jobs_but: Some(&[]),
            records: true,
            nodes: true,
        };
        let started = Instant::now();
        let p = planner.plan_since_last(&input(to), &input(to).observed.nodes, unchanged);
        queue.push(started.elapsed());
        std::hint::black_box(p);
    }
    (shape, queue)
}

fn main() {
    keep_freed::keep_freed_memory();
    let engine_only = std::env::args().any(|a| a == "--engine-only");
    let planner = std::env::args().any(|a| a == "--planner");
    let replan = std::env::args().any(|a| a == "--replan");
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let names: Vec<&str> = if args.is_empty() {
        vec!["s", "m", "l"]
    } else {
        args.iter().map(String::as_str).collect()
    };
    for name in names {
        match fleet(name) {
            Some(f) if replan => bench_replan(name, &f),
            Some(f) if planner => bench_planner(name, &f),
            Some(f) if engine_only => bench_engine(name, &f),
            Some(f) => bench(name, &f),
            None => eprintln!(
                "unknown fleet {name:?}: a size (xs, s, m, l), then -storm, -q{{N}}, -2m, -late, -past{{N}}, -np{{N}}, -p{{N}}, -d{{N}}, -g{{N}}, -gn{{N}}, -m{{N}} (benches/plan.rs)"
            ),
        }
    }
}
