//! The fleet in force is lent to the load of a new revision (its unchanged
//! documents moved into the new fleet). In one process, as the loop runs:
//! a revision prune protection refuses (too many running jobs removed, or
//! one marked `gitfleet/prevent-prune`, whose annotation is then read from
//! the files that changed) leaves the fleet in force exactly as it was, and
//! the next valid revision is adopted as a full load gives it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

mod support;

use std::path::Path;
use std::sync::Arc;

use exec::sim::SimExecutor;
use futures_executor::block_on;
use gitfleet_reconcile::state::{Phase, Store};
use gitfleet_reconcile::{FleetSource, Reconciler, Refusal};
use load::load_fleet;
use model::observed::Timestamp;
use model::plan::Action;
use support::{HEADER, git};

fn job(name: &str, keep: bool) -> String {
    let annotation = if keep {
        "  annotations: {gitfleet/prevent-prune: \"true\"}\n"
    } else {
        ""
    };
    format!(
        "{HEADER}kind: Job\nmetadata:\n  name: {name}\n{annotation}spec:\n  queue: q\n  gpusPerReplica: 2\n  command: [python, train.py]\n"
    )
}

/// Commits the fixed documents and one file per job in `jobs` (name,
/// prevent-prune); returns the fleet a full load of the commit gives.
fn commit(repo: &Path, jobs: &[(&str, bool)]) -> model::spec::Fleet {
    let _ = std::fs::remove_dir_all(repo.join("jobs"));
    std::fs::create_dir_all(repo.join("jobs")).unwrap();
    std::fs::write(
        repo.join("fleet.yaml"),
        format!(
            "{HEADER}kind: NodePool\nmetadata: {{name: p}}\nspec:\n  gpu: {{model: H100, count: 8}}\n  size: {{min: 3, max: 3}}\n---\n{HEADER}kind: Queue\nmetadata: {{name: q}}\nspec:\n  quota: [{{model: H100, guaranteed: 24}}]\n"
        ),
    )
    .unwrap();
    for (name, keep) in jobs {
        std::fs::write(repo.join(format!("jobs/{name}.yaml")), job(name, *keep)).unwrap();
    }
    git(&["add", "-A"], repo);
    git(&["commit", "-q", "--allow-empty", "-m", "step"], repo);
    let mut source = FleetSource::detect(repo, None);
    let revision = source.current().unwrap();
    let loaded = load_fleet(&source.files(&revision).unwrap().unwrap());
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

#[test]
fn a_refused_revision_leaves_the_lent_fleet_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    let names: Vec<String> = (0..12).map(|i| format!("job-{i:02}")).collect();
    let all: Vec<(&str, bool)> = names.iter().map(|n| (n.as_str(), n == "job-00")).collect();
    let first = commit(&repo, &all);

    let store = Arc::new(Store::open(&dir.path().join("state")).unwrap());
    let sim = SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
    let mut reconciler = Reconciler::new(FleetSource::detect(&repo, None), store.clone(), sim);
    let mut now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
    let mut tick = || {
        now += chrono::Duration::minutes(1);
        now
    };
    block_on(reconciler.iterate(tick())).unwrap();
    let running = |store: &Store| {
        store
            .jobs()
            .unwrap()
            .values()
            .filter(|r| r.phase == Phase::Running)
            .count()
    };
    assert_eq!(running(&store), 12, "every job runs");
    // Lent from now on: the fleet in force is the one the cache gave.
    block_on(reconciler.iterate(tick())).unwrap();

    // Eleven running jobs removed: more than prune protection allows.
    let second = commit(&repo, &all[..1]);
    assert_ne!(second, first);
    let refused = block_on(reconciler.iterate(tick())).unwrap();
    let (_, diagnostics) = refused.refused.as_ref().expect("refused");
    assert_eq!(Refusal::of(&diagnostics[0].to_string()), Refusal::Prune);
    assert_eq!(
        reconciler.fleet(),
        Some(&first),
        "the fleet in force, as it was"
    );
    assert!(
        !refused
            .executed
            .iter()
            .any(|e| matches!(e.action, Action::Cancel { .. })),
        "nothing cancelled"
    );
    block_on(reconciler.iterate(tick())).unwrap();
    assert_eq!(reconciler.fleet(), Some(&first));

    // The marked job removed alone: its annotation is found in the file
    // that went, though the fleet in force was lent.
    let third = commit(&repo, &all[1..]);
    let refused = block_on(reconciler.iterate(tick())).unwrap();
    let (_, diagnostics) = refused.refused.as_ref().expect("refused");
    assert!(
        diagnostics[0].to_string().contains("job-00"),
        "{}",
        diagnostics[0]
    );
    assert_ne!(third, first);
    assert_eq!(
        reconciler.fleet(),
        Some(&first),
        "the fleet in force, as it was"
    );

    // A valid change: adopted, equal to a full load, and the next lends it
    // again.
    let mut changed = all.clone();
    changed[5].1 = true;
    let fourth = commit(&repo, &changed);
    let adopted = block_on(reconciler.iterate(tick())).unwrap();
    assert!(adopted.refused.is_none());
    let stats = adopted.phases.loaded.as_ref().unwrap();
    assert_eq!(stats.parsed, 1, "one file read");
    assert_eq!(reconciler.fleet(), Some(&fourth));
    let fifth = commit(&repo, &all);
    block_on(reconciler.iterate(tick())).unwrap();
    assert_eq!(reconciler.fleet(), Some(&fifth));
    assert_eq!(running(&store), 12, "nothing was cancelled");
}
