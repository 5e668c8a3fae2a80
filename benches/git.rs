//! `cargo bench --bench git`: planning a 10,000-file fleet read from a Git
//! revision (git2, objects only) against the same plan read from a
//! directory. Medians of several runs, in process (read + load + engine) and
//! as the whole `gitfleet plan -o json` command. The repository is generated
//! once into target/bench-fleets/git-10k/ (one job per file, 100 files per
//! directory) and committed with git2, so its objects are loose, as after
//! `git add` and `git commit`; when the `git` command is installed a packed
//! copy (as after a clone or `git gc`) is measured too.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reconciler::engine::{PlanInput, plan};
use reconciler::generate::{FleetSize, generate, settle};
use reconciler::load::parse_observed;
use reconciler::load::{SourceFile, fs::read_fleet_dir, load_fleet};
use reconciler::observed::{ObservedState, Timestamp};
use reconciler::source::GitSource;

const RUNS: usize = 7;

fn now() -> Timestamp {
    chrono::DateTime::parse_from_rfc3339("2026-11-21T10:00:00Z")
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_default()
}

/// Writes the fleet (one document per job file) and commits it; returns the
/// bench directory.
fn prepare() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-fleets/git-10k");
    if dir.join(".ready-v1").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let size = FleetSize {
        nodes: 1_000,
        gpus_per_node: 8,
        pending: 7_000,
        running: 3_000,
        leaves: 60,
        seed: 1,
    };
    let mut generated = generate(size, now());
    settle(&mut generated, 2, now());
    let repo_dir = dir.join("repo");
    let mut files = 0;
    for (path, text) in &generated.files {
        if !path.starts_with("jobs/") {
            write(&repo_dir.join(path), text);
            files += 1;
            continue;
        }
        for doc in text.split("---\n").filter(|d| !d.trim().is_empty()) {
            let sub = format!("jobs/{:03}/job-{files:05}.yaml", files / 100);
            write(&repo_dir.join(sub), doc);
            files += 1;
        }
    }
    let observed = serde_json::to_string(&generated.observed).expect("json");
    std::fs::write(dir.join("observed.json"), observed).expect("write observed");
    commit_all(&repo_dir);
    if let Ok(status) = Command::new("git")
        .args(["clone", "-q", "--bare", "--no-local"])
        .arg(&repo_dir)
        .arg(dir.join("packed.git"))
        .status()
    {
        assert!(status.success(), "git clone --bare");
    }
    std::fs::write(dir.join(".ready-v1"), files.to_string()).expect("marker");
    eprintln!("generated {files} files in {}", repo_dir.display());
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn commit_all(dir: &Path) {
    let repo = git2::Repository::init(dir).expect("init");
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .expect("add");
    index.write().expect("index write");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("find tree");
    let sig = git2::Signature::now("bench", "bench@example.com").expect("sig");
    repo.commit(Some("HEAD"), &sig, &sig, "fleet", &tree, &[])
        .expect("commit");
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Median time of `read` + load + engine, and of the read alone.
fn in_process(
    observed: &ObservedState,
    read: impl Fn() -> Vec<SourceFile>,
) -> (Duration, Duration) {
    let mut total = Vec::new();
    let mut reads = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let files = read();
        reads.push(started.elapsed());
        let loaded = load_fleet(&files);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics.first());
        let p = plan(&PlanInput {
            fleet: &loaded.fleet,
            observed,
            now: now(),
            revision: None,
        });
        std::hint::black_box(p);
        total.push(started.elapsed());
    }
    (median(total), median(reads))
}

fn command(args: &[&str], path: &Path, observed: &Path) -> Duration {
    let mut wall = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .args([
                "plan",
                "-o",
                "json",
                "--now",
                "2026-11-21T10:00:00Z",
                "--observed",
            ])
            .arg(observed)
            .args(args)
            .arg(path)
            .output()
            .expect("run gitfleet");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        wall.push(started.elapsed());
    }
    median(wall)
}

fn main() {
    let dir = prepare();
    let repo = dir.join("repo");
    let observed_path = dir.join("observed.json");
    let text = std::fs::read_to_string(&observed_path).expect("observed");
    let observed = parse_observed("observed.json", &text).expect("valid observed");
    let files = read_fleet_dir(&repo).expect("read").len();

    let (dir_total, dir_read) = in_process(&observed, || read_fleet_dir(&repo).expect("read"));
    let (git_total, git_read) = in_process(&observed, || {
        let source = GitSource::discover(&repo).expect("discover");
        source.read_files("HEAD").expect("read")
    });
    let ratio = git_total.as_secs_f64() / dir_total.as_secs_f64();
    println!("{files} files, medians of {RUNS} runs (read + load + engine; read alone)");
    println!("  directory          {dir_total:>9.1?}  (read {dir_read:>8.1?})");
    println!(
        "  git, loose objects {git_total:>9.1?}  (read {git_read:>8.1?})  {ratio:.2}× the directory"
    );
    let packed = dir.join("packed.git");
    if packed.exists() {
        let (total, read) = in_process(&observed, || {
            let source = GitSource::discover(&packed).expect("discover");
            source.read_files("HEAD").expect("read")
        });
        let ratio = total.as_secs_f64() / dir_total.as_secs_f64();
        println!(
            "  git, packed        {total:>9.1?}  (read {read:>8.1?})  {ratio:.2}× the directory"
        );
    }
    let cmd_dir = command(&[], &repo, &observed_path);
    let cmd_git = command(&["--rev", "HEAD"], &repo, &observed_path);
    println!(
        "  gitfleet plan -o json: directory {cmd_dir:>9.1?}, --rev HEAD {cmd_git:>9.1?} ({:.2}×)",
        cmd_git.as_secs_f64() / cmd_dir.as_secs_f64()
    );
}
