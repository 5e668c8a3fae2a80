//! Unchanged iterations re-use the last plan (docs/semantics.md, "Unchanged
//! iterations"): on a small fleet run by the sim executor, once nothing
//! changes an iteration re-uses the plan (the same plan, its time aside,
//! the sim not observed again); and a time limit passing, a commit, a job
//! that ends in the sim, or a job record written by someone else each make
//! the next iteration plan again. A reconciler that never re-uses plans
//! plans the same all along. A commit whose changes no plan can see keeps
//! the last plan for the new revision (docs/semantics.md, "Changes no plan
//! can see"); random commits plan as a reconciler that never re-uses does.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

mod support;

use std::path::Path;
use std::sync::Arc;

use exec::sim::SimExecutor;
use futures_executor::block_on;
use gitfleet_reconcile::state::{Batch, Store};
use gitfleet_reconcile::{FleetSource, Iteration, Reconciler};
use model::observed::Timestamp;
use model::plan::{Action, Plan};
use support::{HEADER, git};

const FLEET: &str = "kind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100, count: 8}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec:\n  quota: [{model: H100, guaranteed: 8}]\n";

/// A job of `gpus` GPUs with a time limit, running `sim` minutes in the sim
/// (longer than its limit: it is terminated).
fn job(name: &str, gpus: u32, limit: &str, sim: u32) -> String {
    format!(
        "{HEADER}kind: Job\nmetadata:\n  name: {name}\n  annotations: {{gitfleet/sim-duration: {sim}m}}\nspec:\n  queue: q\n  gpusPerReplica: {gpus}\n  timeLimit: {limit}\n  command: [train]\n"
    )
}

fn commit(repo: &Path, jobs: &[String]) {
    commit_fleet(repo, FLEET, jobs);
}

fn commit_fleet(repo: &Path, fleet: &str, jobs: &[String]) {
    let mut docs = vec![format!("{HEADER}{fleet}")];
    docs.extend(jobs.iter().cloned());
    std::fs::write(repo.join("fleet.yaml"), docs.join("---\n")).unwrap();
    git(&["add", "-A"], repo);
    git(&["commit", "-q", "-m", "step"], repo);
}

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn minutes(m: i64) -> chrono::Duration {
    chrono::Duration::minutes(m)
}

/// The plan with `time` blanked (a re-used plan keeps its own).
fn untimed(iteration: &Iteration) -> Plan {
    let mut plan = Plan::clone(iteration.plan.as_ref().unwrap());
    plan.time = String::new();
    plan
}

struct Pair {
    reusing: Reconciler<SimExecutor>,
    planning: Reconciler<SimExecutor>,
    stores: [Arc<Store>; 2],
}

impl Pair {
    fn new(repo: &Path, state: &Path) -> Pair {
        let open = |dir: &str| {
            let store = Arc::new(Store::open(&state.join(dir)).unwrap());
            let sim = SimExecutor::open(store.clone(), None, model::spec::Duration::ZERO).unwrap();
            (
                store.clone(),
                Reconciler::new(FleetSource::detect(repo, None), store, sim),
            )
        };
        let (a, reusing) = open("reusing");
        let (b, planning) = open("planning");
        Pair {
            reusing,
            planning: planning.with_plans_reused(false),
            stores: [a, b],
        }
    }

    /// One iteration of each at `now`: the same plan (time aside), the same
    /// actions and events, the same records; returns the re-using one's.
    fn iterate(&mut self, now: Timestamp) -> Iteration {
        let a = block_on(self.reusing.iterate(now)).unwrap();
        let b = block_on(self.planning.iterate(now)).unwrap();
        assert!(!b.reused, "plans are never re-used when told so");
        assert_eq!(untimed(&a), untimed(&b), "{now}: the plans");
        assert_eq!(a.executed, b.executed, "{now}: the actions");
        assert_eq!(a.events, b.events, "{now}: the events");
        assert_eq!(a.nodes, b.nodes, "{now}: the nodes");
        // A re-used plan's observed state is the one it was made from, at
        // its time.
        let untimed_state = |i: &Iteration| model::observed::ObservedState {
            time: None,
            ..model::observed::ObservedState::clone(&i.planned_from)
        };
        assert_eq!(
            untimed_state(&a),
            untimed_state(&b),
            "{now}: the observed state"
        );
        assert_eq!(
            self.stores[0].jobs().unwrap(),
            self.stores[1].jobs().unwrap(),
            "{now}: the records"
        );
        a
    }

    /// Iterates 30 s apart (the loop's default interval) from `now` until
    /// one re-uses its plan (at most `n`); returns the time of that
    /// iteration.
    fn until_reused(&mut self, mut now: Timestamp, n: usize) -> Timestamp {
        for _ in 0..n {
            now += chrono::Duration::seconds(30);
            if self.iterate(now).reused {
                return now;
            }
        }
        panic!("no iteration re-used its plan by {now}");
    }
}

#[test]
fn unchanged_iterations_reuse_the_plan_until_something_changes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    // `long` holds the node for an hour (then is terminated); `wait` needs
    // the whole node and waits for it.
    let mut jobs = vec![job("long", 8, "1h", 600), job("wait", 8, "2h", 600)];
    commit(&repo, &jobs);
    let mut pair = Pair::new(&repo, &dir.path().join("state"));
    let start = t("2026-11-21T10:00:00Z");
    let first = pair.iterate(start);
    assert!(!first.reused);
    assert!(
        matches!(first.executed.as_slice(), [e] if matches!(&e.action, Action::Place { job, .. } if job == "long")),
        "{:?}",
        first.executed
    );

    // Nothing changes: within a few iterations one re-uses the plan, and
    // the next ones too (no observation, no engine).
    let mut now = pair.until_reused(start, 4);
    let reused = pair.iterate(now + minutes(1));
    assert!(reused.reused);
    assert_eq!(reused.phases.observe, std::time::Duration::ZERO);
    assert!(reused.events.is_empty() && reused.executed.is_empty());
    // Its clock is recorded (deferred: a crash would lose only that).
    assert_eq!(
        pair.stores[0].clock().unwrap(),
        Some(now + minutes(1)),
        "the clock of a re-used iteration"
    );
    now += minutes(1);

    // A commit (the waiting job's limit changed): planned again.
    jobs[1] = job("wait", 8, "3h", 600);
    commit(&repo, &jobs);
    now += minutes(1);
    let committed = pair.iterate(now);
    assert!(!committed.reused, "a commit plans again");
    assert!(
        committed.phases.observation_reused,
        "the same pools, nothing carried out: the observation stands"
    );
    now = pair.until_reused(now, 4);

    // Someone else writes a job record: planned again.
    let mut record = pair.stores[0].jobs().unwrap().remove("wait").unwrap();
    record.reason = None;
    for store in &pair.stores {
        store
            .commit(&Batch {
                jobs: vec![record.clone()],
                ..Batch::default()
            })
            .unwrap();
    }
    now += minutes(1);
    assert!(
        !pair.iterate(now).reused,
        "a record written by someone else"
    );
    now = pair.until_reused(now, 4);

    // Just before the time limit the plan still stands; at it, `long` is
    // terminated.
    let limit = start + minutes(60);
    assert!(now < limit - minutes(10));
    let now = pair.until_reused(limit - minutes(10), 4);
    assert!(now < limit - minutes(2));
    let before = pair.iterate(limit - chrono::Duration::seconds(1));
    assert!(before.reused, "the plan stands until the time limit");
    let at = pair.iterate(limit);
    assert!(!at.reused, "the time limit is the plan's horizon");
    assert!(
        at.executed
            .iter()
            .any(|e| matches!(&e.action, Action::Terminate { job, .. } if job == "long")),
        "{:?}",
        at.executed
    );
}

#[test]
fn a_job_that_ends_in_the_sim_is_observed() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    // `short` runs 20 minutes of its 2-hour limit, then exits by itself.
    commit(
        &repo,
        &[job("short", 8, "2h", 20), job("wait", 8, "2h", 600)],
    );
    let mut pair = Pair::new(&repo, &dir.path().join("state"));
    let start = t("2026-11-21T10:00:00Z");
    pair.iterate(start);
    let now = pair.until_reused(start, 4);
    assert!(now < start + minutes(19));
    assert!(pair.iterate(start + minutes(19)).reused);
    let ended = pair.iterate(start + minutes(20));
    assert!(!ended.reused, "the sim's event is due");
    assert_eq!(ended.events.len(), 1, "{:?}", ended.events);
    assert!(
        ended
            .executed
            .iter()
            .any(|e| matches!(&e.action, Action::Place { job, .. } if job == "wait")),
        "{:?}",
        ended.executed
    );
}

#[test]
fn a_commit_observes_again_only_when_the_pools_change() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    // `long` holds the only node; `wait` and `gone` wait for it.
    let jobs = [
        job("long", 8, "2h", 600),
        job("wait", 8, "2h", 600),
        job("gone", 8, "2h", 600),
    ];
    commit(&repo, &jobs);
    let mut pair = Pair::new(&repo, &dir.path().join("state"));
    let start = t("2026-11-21T10:00:00Z");
    pair.iterate(start);
    let now = pair.until_reused(start, 4);

    // `gone` leaves Git: the observation stands (no event, the same
    // nodes), and the pending job is cancelled all the same.
    commit(&repo, &jobs[..2]);
    let now = now + minutes(1);
    let left = pair.iterate(now);
    assert!(left.phases.observation_reused);
    let gone = pair.stores[0].jobs().unwrap().remove("gone").unwrap();
    assert_eq!(gone.reason.as_deref(), Some("removed from Git"), "{gone:?}");
    let now = pair.until_reused(now, 4);

    // `wait`'s time limit changes: the same jobs wait for the same
    // reasons, already noted.
    let edited = [jobs[0].clone(), job("wait", 8, "3h", 600)];
    commit(&repo, &edited);
    let now = now + minutes(1);
    let same = pair.iterate(now);
    assert!(!same.reused && same.phases.observation_reused);
    assert!(same.phases.pending_already_noted);
    assert!(
        same.phases.observed_state_reused,
        "no record written since the last plan: its observed state"
    );
    let now = pair.until_reused(now, 4);

    // The pool may grow: the sim observes again.
    let grown = FLEET.replace("max: 1", "max: 2");
    commit_fleet(&repo, &grown, &edited);
    let now = now + minutes(1);
    let scaled = pair.iterate(now);
    assert!(!scaled.phases.observation_reused, "other pools");
    assert!(
        scaled
            .executed
            .iter()
            .any(|e| matches!(&e.action, Action::Scale { .. })),
        "{:?}",
        scaled.executed
    );
    // Something was carried out: the next iteration observes too.
    let next = pair.iterate(now + minutes(1));
    assert!(!next.phases.observation_reused, "after actions");
}

/// Commits `files` (path, text) as the whole fleet.
fn commit_files(repo: &Path, files: &[(String, String)]) {
    for entry in std::fs::read_dir(repo).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::remove_file(path).unwrap();
        }
    }
    for (path, text) in files {
        std::fs::write(repo.join(path), text).unwrap();
    }
    git(&["add", "-A"], repo);
    git(&["commit", "-q", "--allow-empty", "-m", "step"], repo);
}

#[test]
fn a_commit_no_plan_can_see_keeps_the_plan_for_its_revision() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    // `long` holds the only node; `wait` waits for it. Jobs in a file of
    // their own, so a commit changes them in place.
    let files = |long: &str, wait: &str| {
        vec![
            ("fleet.yaml".to_string(), format!("{HEADER}{FLEET}")),
            ("jobs.yaml".to_string(), format!("{long}---\n{wait}")),
        ]
    };
    let (long, wait) = (job("long", 8, "2h", 600), job("wait", 8, "2h", 600));
    commit_files(&repo, &files(&long, &wait));
    let mut pair = Pair::new(&repo, &dir.path().join("state"));
    let start = t("2026-11-21T10:00:00Z");
    pair.iterate(start);
    let mut now = pair.until_reused(start, 4);
    let revision = |i: &Iteration| i.plan.as_ref().unwrap().revision.clone().unwrap();
    let head = |repo: &Path| {
        let out = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(repo)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };

    // Kept: the waiting job's command and image; a commit that changes no
    // file at all.
    let kept_for = [
        files(&long, &wait.replace("[train]", "[eval]")),
        files(
            &long,
            &wait.replace("[train]", "[eval]\n  image: trainer:2"),
        ),
        files(
            &long,
            &wait.replace("[train]", "[eval]\n  image: trainer:2"),
        ),
    ];
    for fleet in &kept_for {
        commit_files(&repo, fleet);
        now += minutes(1);
        let kept = pair.iterate(now);
        assert!(
            kept.reused && kept.phases.plan_kept_for_revision,
            "{fleet:?}"
        );
        assert_eq!(kept.phases.observe, std::time::Duration::ZERO);
        assert_eq!(revision(&kept), head(&repo), "the plan of the new revision");
        assert_eq!(
            pair.stores[0].revisions().unwrap().last_applied,
            Some(head(&repo)),
            "recorded as applied"
        );
    }

    // Planned again: the running job's command (drift), the waiting job's
    // GPUs, its priority class.
    let wait = wait.replace("[train]", "[eval]\n  image: trainer:2");
    let planned_for = [
        files(&long.replace("[train]", "[eval]"), &wait),
        files(
            &long.replace("[train]", "[eval]"),
            &wait.replace("gpusPerReplica: 8", "gpusPerReplica: 4"),
        ),
        files(
            &long.replace("[train]", "[eval]"),
            &wait.replace("queue: q", "queue: q\n  priorityClass: none"),
        ),
    ];
    for fleet in &planned_for {
        now = pair.until_reused(now, 4);
        commit_files(&repo, fleet);
        now += minutes(1);
        let planned = pair.iterate(now);
        assert!(
            !planned.reused && !planned.phases.plan_kept_for_revision,
            "{fleet:?}"
        );
        // The planner is told which jobs changed since it last planned
        // (for the first, three commits back: the plans kept since).
        assert!(planned.phases.jobs_kept, "{fleet:?}: jobs kept");
    }
    let drift = &pair.iterate(now + minutes(1));
    assert!(
        drift
            .plan
            .as_ref()
            .unwrap()
            .drift
            .iter()
            .any(|d| d.job.as_deref() == Some("long")),
        "the running job's new command is drift"
    );
}

mod random_commits {
    use super::*;
    use proptest::prelude::*;

    /// One edit of one of six jobs (in two files).
    #[derive(Debug, Clone, Copy)]
    enum Edit {
        Command,
        Image,
        Annotation,
        Gpus,
        Class,
        Limit,
        Nothing,
    }

    fn edit() -> impl Strategy<Value = (usize, Edit)> {
        let kinds = prop_oneof![
            Just(Edit::Command),
            Just(Edit::Image),
            Just(Edit::Annotation),
            Just(Edit::Gpus),
            Just(Edit::Class),
            Just(Edit::Limit),
            Just(Edit::Nothing),
        ];
        (0..6usize, kinds)
    }

    #[derive(Debug, Clone)]
    struct Spec {
        gpus: u32,
        high: bool,
        hours: u32,
        command: u32,
        image: u32,
        note: u32,
    }

    impl Spec {
        fn text(&self, name: &str) -> String {
            let class = if self.high { "high" } else { "low" };
            format!(
                "{HEADER}kind: Job\nmetadata:\n  name: {name}\n  annotations: {{gitfleet/sim-duration: 600m, note: n{}}}\nspec:\n  queue: q\n  priorityClass: {class}\n  gpusPerReplica: {}\n  timeLimit: {}h\n  command: [train, '{}']\n  image: img:{}\n",
                self.note, self.gpus, self.hours, self.command, self.image
            )
        }
    }

    const CLASSES: &str = "kind: PriorityClass\nmetadata: {name: high}\nspec: {value: 100, preemptible: false}\n---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: low}\nspec: {value: 10, preemptible: true, gracePeriod: 1m}\n";

    fn files(specs: &[Spec]) -> Vec<(String, String)> {
        let fleet = FLEET
            .replace("max: 1", "max: 2")
            .replace("min: 1", "min: 2");
        let mut out = vec![
            ("fleet.yaml".to_string(), format!("{HEADER}{fleet}")),
            ("classes.yaml".to_string(), format!("{HEADER}{CLASSES}")),
        ];
        for (k, chunk) in specs.chunks(3).enumerate() {
            let text: Vec<String> = chunk
                .iter()
                .enumerate()
                .map(|(i, s)| s.text(&format!("job-{}", k * 3 + i)))
                .collect();
            out.push((format!("jobs-{k}.yaml"), text.join("---\n")));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

        /// Random commits, each iterated twice: the re-using reconciler
        /// plans, acts and records as one that always plans (`Pair`).
        #[test]
        fn random_commits_plan_as_a_full_plan_does(
            shapes in proptest::collection::vec((0..3u32, any::<bool>()), 6),
            edits in proptest::collection::vec(edit(), 1..8),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let repo = dir.path().join("repo");
            std::fs::create_dir(&repo).unwrap();
            git(&["init", "-q", "-b", "main"], &repo);
            let mut specs: Vec<Spec> = shapes
                .iter()
                .map(|(g, high)| Spec { gpus: [4, 8, 8][*g as usize], high: *high, hours: 2, command: 0, image: 0, note: 0 })
                .collect();
            commit_files(&repo, &files(&specs));
            let mut pair = Pair::new(&repo, &dir.path().join("state"));
            let mut now = t("2026-11-21T10:00:00Z");
            pair.iterate(now);
            for (job, edit) in edits {
                let spec = &mut specs[job];
                match edit {
                    Edit::Command => spec.command += 1,
                    Edit::Image => spec.image += 1,
                    Edit::Annotation => spec.note += 1,
                    Edit::Gpus => spec.gpus = if spec.gpus == 8 { 2 } else { spec.gpus * 2 },
                    Edit::Class => spec.high = !spec.high,
                    Edit::Limit => spec.hours += 1,
                    Edit::Nothing => {}
                }
                commit_files(&repo, &files(&specs));
                now += chrono::Duration::seconds(30);
                pair.iterate(now);
                for _ in 0..2 {
                    now += chrono::Duration::seconds(30);
                    pair.iterate(now);
                }
            }
        }
    }
}
