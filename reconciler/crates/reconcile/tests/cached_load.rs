//! The reconcile loop's cached load ([`FleetSource::load`] through a
//! [`DocumentCache`]) against a load from scratch ([`FleetSource::files`] and
//! [`load_fleet`]) on random histories of a small fleet in a Git repository:
//! jobs edited, added, removed, moved between files; a queue's limit
//! changed; typos of several kinds (YAML syntax, schema, unknown reference,
//! duplicate name, unknown kind); reverts to an earlier state; commits that
//! touch no YAML. After every commit both must give the same fleet and the
//! same messages (file, line, column, text), and the cache must hold no more
//! than the revision's files and those of the fleet in force. The fleet in
//! force is lent to each load, as the reconcile loop does
//! ([`FleetSource::load_reusing`]): an invalid revision gives it back as it
//! was, and a valid one that is then not adopted (as prune protection
//! refuses one) gets it back from [`DocumentCache::restore_previous`].
//!
//! The cases come from a fixed seed, as the repository's other property
//! tests do (`GITFLEET_CACHE_CASES`, `GITFLEET_CACHE_SEED` to explore).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use gitfleet_reconcile::FleetSource;
use load::cache::DocumentCache;
use load::load_fleet;
use proptest::prelude::*;
use support::{HEADER, env_u32, git};

fn job(name: &str, queue: &str, gpus: u32) -> String {
    format!(
        "{HEADER}kind: Job\nmetadata: {{name: {name}}}\nspec:\n  queue: {queue}\n  gpusPerReplica: {gpus}\n  command: [python, train.py]\n"
    )
}

fn queues(limit: u32) -> Vec<String> {
    vec![
        format!(
            "{HEADER}kind: Queue\nmetadata: {{name: org}}\nspec:\n  quota: [{{model: H100, guaranteed: 16}}]\n"
        ),
        format!(
            "{HEADER}kind: Queue\nmetadata: {{name: team-a}}\nspec:\n  parent: org\n  quota: [{{model: H100, guaranteed: 8, limit: {limit}}}]\n"
        ),
        format!(
            "{HEADER}kind: Queue\nmetadata: {{name: team-b}}\nspec:\n  parent: org\n  quota: [{{model: H100, guaranteed: 8}}]\n"
        ),
    ]
}

/// The fleet's files: path → documents.
type Files = BTreeMap<String, Vec<String>>;

fn initial() -> Files {
    let mut files = Files::new();
    files.insert(
        "pools.yaml".into(),
        vec![format!(
            "{HEADER}kind: NodePool\nmetadata: {{name: p}}\nspec:\n  gpu: {{model: H100, count: 8}}\n  size: {{min: 2, max: 2}}\n"
        )],
    );
    files.insert("queues.yaml".into(), queues(16));
    files.insert(
        "classes.yaml".into(),
        vec![format!(
            "{HEADER}kind: PriorityClass\nmetadata: {{name: normal}}\nspec: {{value: 100, default: true}}\n"
        )],
    );
    for f in 0..3 {
        let docs = (0..3)
            .map(|j| job(&format!("job-{f}-{j}"), ["team-a", "team-b"][j % 2], 1))
            .collect();
        files.insert(format!("jobs/jobs-{f}.yaml"), docs);
    }
    files
}

/// A choice among however many there are (taken modulo their number).
type Index = usize;

fn pick_of(i: Index, len: usize) -> usize {
    i % len.max(1)
}

#[derive(Debug, Clone)]
enum Change {
    EditJob(Index, Index, u32),
    AddJob(Index, u32),
    RemoveJob(Index, Index),
    MoveFile(Index),
    NewFile(u32),
    Queue(u32),
    Typo(Index, Index, u8),
    Revert(Index),
    NoYaml,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (any::<usize>(), any::<usize>(), 1..=9_u32).prop_map(|(f, d, g)| Change::EditJob(f, d, g)),
        2 => (any::<usize>(), 1..=8_u32).prop_map(|(f, g)| Change::AddJob(f, g)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(f, d)| Change::RemoveJob(f, d)),
        1 => any::<usize>().prop_map(Change::MoveFile),
        1 => (1..=8_u32).prop_map(Change::NewFile),
        2 => (4..=24_u32).prop_map(Change::Queue),
        3 => (any::<usize>(), any::<usize>(), 0..6_u8).prop_map(|(f, d, k)| Change::Typo(f, d, k)),
        2 => any::<usize>().prop_map(Change::Revert),
        1 => Just(Change::NoYaml),
    ]
}

/// Paths of the job files (those a change may touch).
fn job_files(files: &Files) -> Vec<String> {
    files
        .keys()
        .filter(|p| p.starts_with("jobs/"))
        .cloned()
        .collect()
}

fn apply(change: &Change, files: &mut Files, history: &[Files], step: usize) {
    let jobs = job_files(files);
    let pick = |i: &Index| jobs.get(pick_of(*i, jobs.len())).cloned();
    match change {
        Change::EditJob(f, d, gpus) => {
            if let Some(path) = pick(f) {
                let docs = files.get_mut(&path).unwrap();
                if !docs.is_empty() {
                    let i = pick_of(*d, docs.len());
                    let name = docs[i]
                        .split("name: ")
                        .nth(1)
                        .and_then(|r| r.split('}').next())
                        .unwrap_or("x")
                        .to_string();
                    docs[i] = job(&name, "team-a", *gpus);
                }
            }
        }
        Change::AddJob(f, gpus) => {
            if let Some(path) = pick(f) {
                let name = format!("new-{step}");
                files
                    .get_mut(&path)
                    .unwrap()
                    .push(job(&name, "team-b", *gpus));
            }
        }
        Change::RemoveJob(f, d) => {
            if let Some(path) = pick(f) {
                let docs = files.get_mut(&path).unwrap();
                if !docs.is_empty() {
                    docs.remove(pick_of(*d, docs.len()));
                }
            }
        }
        Change::MoveFile(f) => {
            if let Some(path) = pick(f) {
                let docs = files.remove(&path).unwrap();
                files.insert(format!("jobs/moved-{step}.yaml"), docs);
            }
        }
        Change::NewFile(gpus) => {
            files.insert(
                format!("jobs/added-{step}.yaml"),
                vec![job(&format!("added-{step}"), "team-a", *gpus)],
            );
        }
        Change::Queue(limit) => {
            files.insert("queues.yaml".into(), queues(*limit));
        }
        Change::Typo(f, d, kind) => {
            let Some(path) = pick(f) else { return };
            let docs = files.get_mut(&path).unwrap();
            if docs.is_empty() {
                docs.push(job(&format!("typo-{step}"), "team-a", 1));
            }
            let i = pick_of(*d, docs.len());
            let doc = &mut docs[i];
            *doc = match kind {
                // YAML syntax.
                0 => format!("{doc}  extra: [\n"),
                // Schema: not an integer.
                1 => doc.replace("gpusPerReplica: ", "gpusPerReplica: x"),
                // Unknown queue.
                2 => doc.replace("queue: team", "queue: tema"),
                // Not a leaf queue.
                3 => doc
                    .replace("queue: team-a", "queue: org")
                    .replace("queue: team-b", "queue: org"),
                // Unknown kind.
                4 => doc.replace("kind: Job", "kind: Jbo"),
                // A replica larger than any node.
                _ => doc.replace("gpusPerReplica: ", "gpusPerReplica: 1"),
            };
            if *kind == 5 {
                // And a duplicate name in another file.
                let copy = doc.clone();
                files
                    .entry("jobs/duplicate.yaml".into())
                    .or_default()
                    .push(copy);
            }
        }
        Change::Revert(back) => {
            if !history.is_empty() {
                *files = history[history.len() - 1 - pick_of(*back, history.len().min(4))].clone();
            }
        }
        Change::NoYaml => {}
    }
}

/// Writes `files` as the work tree's YAML (others removed) and commits.
fn commit(repo: &Path, files: &Files, step: usize) {
    let _ = std::fs::remove_dir_all(repo.join("jobs"));
    for entry in std::fs::read_dir(repo).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::remove_file(path).unwrap();
        }
    }
    for (path, docs) in files {
        let file = repo.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, docs.join("---\n")).unwrap();
    }
    std::fs::write(repo.join("notes.txt"), format!("step {step}\n")).unwrap();
    git(&["add", "-A"], repo);
    git(&["commit", "-q", "--allow-empty", "-m", "step"], repo);
}

/// Commits every state of `changes` and compares both loads after each.
fn check(changes: &[Change]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    let mut files = initial();
    let mut history = Vec::new();
    let mut cache = DocumentCache::new();
    // The fleet in force, lent to every load.
    let mut good: Option<load::Loaded> = None;
    commit(&repo, &files, 0);
    for step in 0..=changes.len() {
        if step > 0 {
            history.push(files.clone());
            apply(&changes[step - 1], &mut files, &history, step);
            commit(&repo, &files, step);
        }
        let mut source = FleetSource::detect(&repo, None);
        let revision = source.current().unwrap();
        let before = good.as_ref().map(|g| g.fleet.clone());
        let given_before = cache.given_files();
        let mut previous = good.take().map(|g| g.fleet);
        let (cached, stats) = source
            .load_reusing(&revision, &mut cache, &mut previous)
            .unwrap()
            .unwrap();
        let fresh = load_fleet(&source.files(&revision).unwrap().unwrap());
        prop_assert_eq!(
            &cached.diagnostics,
            &fresh.diagnostics,
            "step {}: messages",
            step
        );
        prop_assert_eq!(&cached.fleet, &fresh.fleet, "step {}: fleet", step);
        prop_assert!(
            cache.len() <= stats.files + given_before,
            "step {}: cache bounded",
            step
        );
        prop_assert_eq!(stats.full, !fresh.is_valid(), "step {}", step);
        if !cached.is_valid() {
            prop_assert_eq!(&previous, &before, "step {}: given back", step);
            good = previous.map(|fleet| load::Loaded {
                fleet,
                diagnostics: Vec::new(),
            });
        } else if step % 3 == 2 && before.is_some() {
            // Not adopted: the fleet in force is put together again.
            let restored = previous.or_else(|| cache.restore_previous());
            prop_assert_eq!(&restored, &before, "step {}: restored", step);
            good = restored.map(|fleet| load::Loaded {
                fleet,
                diagnostics: Vec::new(),
            });
        } else {
            good = Some(cached);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: env_u32("GITFLEET_CACHE_CASES", 24),
        rng_seed: prop::test_runner::RngSeed::Fixed(env_u32("GITFLEET_CACHE_SEED", 1).into()),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn cached_loads_equal_loads_from_scratch(changes in prop::collection::vec(change(), 1..14)) {
        check(&changes)?;
    }
}

/// A fixed history through every kind of change, so each is certain to
/// be covered whatever the seed draws.
#[test]
fn every_kind_of_change_once() {
    let changes = [
        Change::EditJob(0, 1, 3),
        Change::Queue(12),
        Change::AddJob(1, 2),
        Change::Typo(2, 0, 0),
        Change::Revert(0),
        Change::Typo(0, 0, 1),
        Change::Typo(1, 1, 2),
        Change::Revert(1),
        Change::Typo(1, 0, 3),
        Change::Typo(2, 2, 4),
        Change::Revert(2),
        Change::Typo(0, 2, 5),
        Change::RemoveJob(0, 0),
        Change::MoveFile(1),
        Change::NewFile(4),
        Change::NoYaml,
        Change::RemoveJob(0, 0),
    ];
    check(&changes).unwrap();
}
