//! The reconcile loop end to end: throwaway Git repositories, the real
//! binary, the sim executor, the state read back from the embedded database.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use reconciler::state::{Batch, Loading, Phase, Store};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

const BASE: &str = r#"apiVersion: gitfleet/v1
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
spec: {value: 100, gracePeriod: 5m, default: true}
"#;

fn queues(a_guaranteed: u32, b_guaranteed: u32) -> String {
    format!(
        "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: a}}\nspec: {{quota: [{{model: H100, guaranteed: {a_guaranteed}, limit: 16}}]}}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: b}}\nspec: {{quota: [{{model: H100, guaranteed: {b_guaranteed}, limit: 16}}]}}\n"
    )
}

fn job(name: &str, queue: &str, gpus: u32, extra: &str) -> String {
    format!(
        "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}{extra}}}\nspec: {{queue: {queue}, gpusPerReplica: {gpus}}}\n"
    )
}

/// A fleet repository in a temporary directory, with a state directory beside it.
struct Fleet {
    dir: tempfile::TempDir,
}

impl Fleet {
    fn new() -> Fleet {
        let fleet = Fleet {
            dir: tempfile::tempdir().unwrap(),
        };
        fleet.git(&["init", "-q", "-b", "main", "repo"], fleet.dir.path());
        fleet
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn git(&self, args: &[&str], cwd: &Path) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(cwd)
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Writes the files and commits them; returns the commit id.
    fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        for (name, text) in files {
            std::fs::write(self.repo().join(name), text).unwrap();
        }
        self.git(&["add", "-A", "."], &self.repo());
        self.git(&["commit", "-q", "-m", message], &self.repo());
        self.git(&["rev-parse", "HEAD"], &self.repo())
    }

    fn run(&self, args: &[&str]) -> Output {
        let state = self.state();
        let repo = self.repo();
        let mut all: Vec<&str> = args.to_vec();
        all.extend([repo.to_str().unwrap(), "--state", state.to_str().unwrap()]);
        Command::new(BIN).args(&all).output().unwrap()
    }

    fn reconcile(&self, extra: &[&str]) -> Output {
        let mut args = vec!["reconcile", "--once", "--now", "2026-11-21T10:00:00Z"];
        // After the first run the state's clock goes on; --now only starts it.
        if self.state().join("state.redb").exists() {
            args.truncate(2);
            args.extend(["--sim-step", "1m"]);
        }
        args.extend(extra);
        self.run(&args)
    }

    fn status(&self) -> Value {
        let out = Command::new(BIN)
            .args([
                "status",
                "-o",
                "json",
                "--state",
                self.state().to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn phase(&self, job: &str) -> String {
        let status = self.status();
        status["job_list"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == job)
            .map(|j| j["phase"].as_str().unwrap().to_string())
            .unwrap_or_else(|| "unknown".to_string())
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_new_commit_is_picked_up_and_applied() {
    let fleet = Fleet::new();
    let c1 = fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &job("a-1", "a", 8, "")),
        ],
        "first",
    );
    let out = fleet.reconcile(&[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("place a-1"), "{}", text(&out));
    assert_eq!(fleet.status()["revisions"]["lastApplied"], c1.as_str());
    assert_eq!(fleet.phase("a-1"), "running");

    let jobs = job("a-1", "a", 8, "") + &job("b-1", "b", 8, "");
    let c2 = fleet.commit(&[("jobs.yaml", &jobs)], "add b-1");
    let out = fleet.reconcile(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let status = fleet.status();
    assert_eq!(status["revisions"]["lastApplied"], c2.as_str());
    assert_eq!(status["revisions"]["lastAttempted"], c2.as_str());
    assert_eq!(fleet.phase("b-1"), "running");
    assert!(!text(&out).contains("place a-1"), "a-1 is not placed twice");

    // Nothing changed: nothing is done.
    let out = fleet.reconcile(&[]);
    assert!(!text(&out).contains("place"), "{}", text(&out));
}

#[test]
fn an_invalid_commit_is_refused_and_the_last_good_one_kept() {
    let fleet = Fleet::new();
    let good = fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &job("a-1", "a", 8, "")),
        ],
        "good",
    );
    assert!(fleet.reconcile(&[]).status.success());

    let broken = job("a-1", "a", 8, "")
        + "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: b-1}\nspec: {queue: b, gpusPerReplica: eight}\n";
    let bad = fleet.commit(&[("jobs.yaml", &broken)], "broken");
    let out = fleet.reconcile(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("refused"), "{shown}");
    assert!(
        shown.contains("jobs.yaml:10:34:"),
        "names file and line: {shown}"
    );
    let status = fleet.status();
    assert_eq!(status["revisions"]["lastApplied"], good.as_str());
    assert_eq!(status["revisions"]["lastAttempted"], bad.as_str());
    assert!(
        status["revisions"]["lastError"]
            .as_str()
            .unwrap()
            .contains("gpusPerReplica")
    );
    assert_eq!(
        fleet.phase("a-1"),
        "running",
        "the last good revision stays in force"
    );
    assert_eq!(fleet.phase("b-1"), "unknown");

    // The same bad commit again: still refused, recorded once.
    let out = fleet.reconcile(&[]);
    assert_eq!(out.status.code(), Some(1));
    let store = Store::open(&fleet.state()).unwrap();
    let refusals = store
        .audit(0)
        .unwrap()
        .into_iter()
        .filter(|(_, e)| e.what == "refused")
        .count();
    assert_eq!(refusals, 1);
    drop(store);

    let fixed = job("a-1", "a", 8, "") + &job("b-1", "b", 8, "");
    let c3 = fleet.commit(&[("jobs.yaml", &fixed)], "fixed");
    assert!(fleet.reconcile(&[]).status.success());
    let status = fleet.status();
    assert_eq!(status["revisions"]["lastApplied"], c3.as_str());
    assert!(status["revisions"]["lastError"].is_null());
    assert_eq!(fleet.phase("b-1"), "running");
}

/// A fleet whose jobs `a-1` (8 GPUs) and `a-2` (4) run; the jobs file's text.
fn two_running_jobs() -> (Fleet, String) {
    let fleet = Fleet::new();
    let jobs = job("a-1", "a", 8, "") + &job("a-2", "a", 4, "");
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &jobs),
        ],
        "two jobs",
    );
    assert!(fleet.reconcile(&[]).status.success());
    assert_eq!(fleet.phase("a-1"), "running");
    (fleet, jobs)
}

#[test]
fn a_job_removed_from_git_is_cancelled() {
    let (fleet, _) = two_running_jobs();

    fleet.commit(&[("jobs.yaml", &job("a-2", "a", 4, ""))], "remove a-1");
    let out = fleet.reconcile(&[]);
    assert!(text(&out).contains("cancel a-1"), "{}", text(&out));
    assert_eq!(fleet.phase("a-1"), "stopped");
    assert_eq!(fleet.phase("a-2"), "running");
    let status = fleet.status();
    let a1 = status["job_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == "a-1")
        .unwrap();
    assert_eq!(a1["reason"], "removed from Git");
    assert_eq!(status["gpus"]["allocated"], 4);
}

#[test]
fn a_mistyped_api_version_is_refused_and_cancels_nothing() {
    let (fleet, jobs) = two_running_jobs();

    // One character off: the document must not read as deleted.
    let typo = jobs.replacen(
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: a-1}",
        "apiVersion: gitfleet/V1\nkind: Job\nmetadata: {name: a-1}",
        1,
    );
    assert_ne!(typo, jobs);
    fleet.commit(&[("jobs.yaml", &typo)], "typo");
    let out = fleet.reconcile(&[]);
    assert!(
        !out.status.success(),
        "--once exits 1 on a refused revision"
    );
    assert!(
        text(&out).contains("apiVersion: unknown version \"gitfleet/V1\""),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("cancel a-1"), "{}", text(&out));
    assert_eq!(fleet.phase("a-1"), "running");
    assert_eq!(fleet.phase("a-2"), "running");
}

#[test]
fn a_lost_state_database_is_refused_and_places_nothing_again() {
    let (fleet, _) = two_running_jobs();
    let db = fleet.state().join("state.redb");
    for lose in ["empty", "missing"] {
        match lose {
            "empty" => std::fs::write(&db, b"").unwrap(),
            _ => std::fs::remove_file(&db).unwrap(),
        }
        let out = fleet.reconcile(&[]);
        assert!(!out.status.success(), "{lose}: {}", text(&out));
        assert!(
            text(&out).contains("starting from an empty state would run finished jobs again"),
            "{lose}: {}",
            text(&out)
        );
        assert!(!text(&out).contains("place a-1"), "{}", text(&out));
    }
    assert!(!db.exists(), "the lost database is not recreated");
}

/// Leaves the state as a process leaves it when it dies while loading or
/// planning `revision` for the `interrupted + 1`-th time.
fn died_while_loading(fleet: &Fleet, revision: &str, interrupted: u32) {
    let store = Store::open(&fleet.state()).unwrap();
    let mut revisions = store.revisions().unwrap();
    revisions.loading = Some(Loading {
        revision: revision.to_string(),
        interrupted,
    });
    store
        .commit(&Batch {
            revisions: Some(revisions),
            ..Batch::default()
        })
        .unwrap();
}

#[test]
fn a_revision_that_killed_the_process_three_times_is_refused_and_the_last_good_kept() {
    let (fleet, _) = two_running_jobs();
    let head = fleet.commit(&[("jobs.yaml", &job("a-2", "a", 4, ""))], "remove a-1");

    // Died twice: tried again (a kill -9 or a reboot is not the commit's fault).
    died_while_loading(&fleet, &head, 1);
    let out = fleet.reconcile(&[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("cancel a-1"), "{}", text(&out));
    assert_eq!(fleet.status()["revisions"].get("loading"), None);

    // Died three times on the next commit: refused, nothing of it applied.
    let next = fleet.commit(&[("jobs.yaml", "")], "remove a-2");
    died_while_loading(&fleet, &next, 2);
    let out = fleet.reconcile(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "revision {}: gitfleet stopped 3 times while loading or planning this revision",
            &next[..12]
        )),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("cancel a-2"), "{}", text(&out));
    assert_eq!(fleet.phase("a-2"), "running");
    let revisions = &fleet.status()["revisions"];
    assert_eq!(revisions["lastApplied"], head.as_str());
    assert_eq!(revisions["lastAttempted"], next.as_str());
    assert!(
        revisions["lastError"]
            .as_str()
            .unwrap()
            .contains("stopped 3 times"),
        "{revisions}"
    );
    // And it stays refused without being loaded again.
    let out = fleet.reconcile(&[]);
    assert!(text(&out).contains("still refused"), "{}", text(&out));
}

#[test]
fn prune_protection_refuses_mass_removals_and_apply_needs_a_flag() {
    let fleet = Fleet::new();
    let jobs: String = (1..=4)
        .map(|i| job(&format!("a-{i}"), "a", 2, ""))
        .collect();
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &jobs),
        ],
        "four jobs",
    );
    assert!(fleet.reconcile(&[]).status.success());
    assert_eq!(fleet.phase("a-4"), "running");

    // Three of four running jobs removed: more than half.
    fleet.commit(&[("jobs.yaml", &job("a-4", "a", 2, ""))], "remove three");
    let out = fleet.reconcile(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(
            "prune protection: the revision removes 3 of 4 running jobs from Git (a-1, a-2, a-3)"
        ),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("cancel"), "{}", text(&out));
    assert_eq!(fleet.phase("a-1"), "running");
    assert!(
        fleet.status()["revisions"]["lastError"]
            .as_str()
            .unwrap()
            .contains("prune protection")
    );

    // apply refuses it too, unless told.
    let out = fleet.run(&["apply", "--auto-approve", "--sim-step", "1m"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("refused by prune protection"),
        "{}",
        text(&out)
    );
    assert_eq!(fleet.phase("a-1"), "running");
    let out = fleet.run(&[
        "apply",
        "--auto-approve",
        "--allow-prune",
        "--sim-step",
        "1m",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Plan: 3 to cancel"), "{}", text(&out));
    assert_eq!(fleet.phase("a-1"), "stopped");
    assert_eq!(fleet.phase("a-4"), "running");
}

#[test]
fn an_empty_path_or_a_protected_job_cancels_nothing() {
    let (fleet, jobs) = two_running_jobs();
    // A commit that empties the fleet (a wrong path, a bad merge).
    fleet.git(
        &["rm", "-q", "fleet.yaml", "queues.yaml", "jobs.yaml"],
        &fleet.repo(),
    );
    fleet.commit(&[("README.md", "moved\n")], "empty");
    let out = fleet.reconcile(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("has no gitfleet documents"),
        "{}",
        text(&out)
    );
    assert_eq!(fleet.phase("a-1"), "running");

    // Restored, with a-1 protected; removing it is refused even with the flag.
    let protected = jobs.replacen(
        "metadata: {name: a-1}",
        "metadata: {name: a-1, annotations: {gitfleet/prevent-prune: \"true\"}}",
        1,
    );
    assert_ne!(protected, jobs);
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &protected),
        ],
        "back, protected",
    );
    assert!(fleet.reconcile(&[]).status.success());
    fleet.commit(&[("jobs.yaml", &job("a-2", "a", 4, ""))], "remove a-1");
    let out = fleet.run(&[
        "apply",
        "--auto-approve",
        "--allow-prune",
        "--sim-step",
        "1m",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("removes running job(s) a-1 marked gitfleet/prevent-prune"),
        "{}",
        text(&out)
    );
    assert_eq!(fleet.phase("a-1"), "running");
}

#[test]
fn a_quota_cut_leads_to_the_preemptions_the_engine_planned() {
    let fleet = Fleet::new();
    // a holds 16 GPUs, 4 above its guarantee of 12; b-1 needs 8 but b's
    // guarantee is 4, so it cannot reclaim: pending.
    let jobs = job("a-1", "a", 8, "") + &job("a-2", "a", 8, "");
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(12, 4)),
            ("jobs.yaml", &jobs),
        ],
        "a runs",
    );
    assert!(fleet.reconcile(&[]).status.success());
    let jobs = jobs + &job("b-1", "b", 8, "");
    fleet.commit(&[("jobs.yaml", &jobs)], "b-1 arrives");
    assert!(fleet.reconcile(&[]).status.success());
    assert_eq!(fleet.phase("b-1"), "pending");

    // The cut: a's guarantee 12 → 8, b's 4 → 8. b-1 now reclaims.
    fleet.commit(&[("queues.yaml", &queues(8, 8))], "quota cut");
    let out = fleet.run(&["apply", "--auto-approve", "-o", "json", "--sim-step", "1m"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json_end = stdout.rfind("\n}").unwrap() + 2;
    let plan: Value = serde_json::from_str(&stdout[..json_end]).unwrap();
    let victims: Vec<String> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "preempt")
        .map(|a| {
            assert_eq!(a["for"], "b-1");
            a["job"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(victims.len(), 1, "one 8-GPU victim is enough: {plan}");
    let status = fleet.status();
    let victim = status["job_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == victims[0].as_str())
        .unwrap();
    assert_eq!(victim["stopping"], "preempt");
    assert_eq!(
        fleet.phase("b-1"),
        "pending",
        "b-1 waits for the grace period"
    );

    // After the 5m grace period the victim is pending again and b-1 runs.
    for _ in 0..5 {
        assert!(fleet.reconcile(&[]).status.success());
    }
    assert_eq!(fleet.phase(&victims[0]), "pending");
    assert_eq!(fleet.phase("b-1"), "running");
}

#[test]
fn an_intent_left_by_a_crash_is_carried_out_once() {
    let fleet = Fleet::new();
    let c1 = fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &job("a-1", "a", 8, "")),
        ],
        "first",
    );
    // A crash right after "intended": the intent is in the store, nothing else.
    {
        let store = Store::open(&fleet.state()).unwrap();
        let placement: Vec<reconciler::observed::NodeGpus> =
            serde_json::from_str(r#"[{"node": "p-1", "gpus": [0,1,2,3,4,5,6,7]}]"#).unwrap();
        store
            .record_intent(&reconciler::state::Intent {
                revision: c1.clone(),
                time: "2026-11-21T09:59:00Z".parse().unwrap(),
                action: reconciler::plan::Action::Place {
                    job: "a-1".into(),
                    placement,
                    reason: "test".into(),
                },
            })
            .unwrap();
    }
    let out = fleet.reconcile(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let status = fleet.status();
    assert_eq!(status["last_iteration"]["recovered"], 1);
    let a1 = status["job_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == "a-1")
        .unwrap();
    assert_eq!(
        a1["placement"], "p-1:gpu0-7",
        "the intended placement, carried out"
    );
    let store = Store::open(&fleet.state()).unwrap();
    assert!(store.pending_intents().unwrap().is_empty());
    let places = store
        .audit(0)
        .unwrap()
        .into_iter()
        .filter(|(_, e)| e.what == "place")
        .count();
    assert_eq!(places, 1, "placed once");
}

/// kill -9 at arbitrary points of a running loop, restart, repeat: every job
/// still runs exactly once and ends.
#[test]
fn kill_dash_nine_at_any_point_neither_loses_nor_doubles_a_job() {
    let fleet = Fleet::new();
    let mut jobs = String::new();
    for i in 0..24 {
        jobs += &job(
            &format!("j-{i:02}"),
            if i % 2 == 0 { "a" } else { "b" },
            2,
            ", annotations: {gitfleet/sim-duration: 3m}",
        );
    }
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &jobs),
        ],
        "many jobs",
    );
    let state = fleet.state();
    let repo = fleet.repo();
    let start = |first: bool| {
        let mut args = vec![
            "reconcile",
            repo.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--interval",
            "100ms",
            "--sim-step",
            "1m",
            "--listen",
            "off",
        ];
        if first {
            args.extend(["--now", "2026-11-21T10:00:00Z"]);
        }
        Command::new(BIN)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut kills = 0;
    for round in 0..12 {
        let mut child = start(round == 0);
        // Kill at a different moment each round (including mid-iteration).
        std::thread::sleep(Duration::from_millis(40 + 37 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
    }
    assert_eq!(kills, 12);
    // Let it finish.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut child = start(false);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let done = reconciler::reconcile::status::Status::read(&state)
            .map(|s| s.jobs.get("succeeded").copied() == Some(24))
            .unwrap_or(false);
        if done || Instant::now() > deadline {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let store = Store::open(&state).unwrap();
    let records = store.jobs().unwrap();
    assert_eq!(records.len(), 24, "no job lost");
    for record in records.values() {
        assert_eq!(record.phase, Phase::Succeeded, "{record:?}");
    }
    let audit = store.audit(0).unwrap();
    for i in 0..24 {
        let name = format!("j-{i:02}");
        let places = audit
            .iter()
            .filter(|(_, e)| e.what == "place" && e.subject == name)
            .count();
        assert_eq!(places, 1, "{name} placed exactly once");
    }
    assert!(store.pending_intents().unwrap().is_empty());
}

#[test]
fn a_remote_repository_is_mirrored_and_followed() {
    let fleet = Fleet::new();
    std::fs::create_dir(fleet.repo().join("fleet")).unwrap();
    fleet.commit(
        &[
            ("fleet/fleet.yaml", BASE),
            ("fleet/queues.yaml", &queues(8, 8)),
            ("fleet/jobs.yaml", &job("a-1", "a", 8, "")),
        ],
        "first",
    );
    let url = format!("file://{}", fleet.repo().display());
    let state = fleet.state();
    let run = || {
        Command::new(BIN)
            .args([
                "reconcile",
                "fleet",
                "--repo",
                &url,
                "--once",
                "--state",
                state.to_str().unwrap(),
            ])
            .args(["--sim-step", "1m", "--now", "2026-11-21T10:00:00Z"])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fleet.phase("a-1"), "running");
    assert!(
        state.join("repo.git").is_dir(),
        "the mirror lives in the state"
    );
    let jobs = job("a-1", "a", 8, "") + &job("b-1", "b", 8, "");
    let c2 = fleet.commit(&[("fleet/jobs.yaml", &jobs)], "add b-1");
    let out = run();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fleet.status()["revisions"]["lastApplied"], c2.as_str());
    assert_eq!(fleet.phase("b-1"), "running");
}

#[test]
fn the_local_executor_runs_replicas_as_processes() {
    let fleet = Fleet::new();
    let jobs = "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: hello}\nspec:\n  queue: a\n  gpusPerReplica: 2\n  command: [sh, -c, 'echo \"$RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES\"; exit 3']\n";
    let one_node = BASE.replace("size: {min: 2, max: 2}", "size: {min: 1, max: 1}");
    fleet.commit(
        &[
            ("fleet.yaml", &one_node),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", jobs),
        ],
        "first",
    );
    let host = fleet.dir.path().join("host.yaml");
    let gpus: Vec<String> = (0..8)
        .map(|i| format!("{{index: {i}, model: H100}}"))
        .collect();
    std::fs::write(
        &host,
        format!(
            "nodes:\n  - name: p-0\n    pool: p\n    gpus: [{}]\n",
            gpus.join(", ")
        ),
    )
    .unwrap();
    let state = fleet.state();
    // One process over several iterations.
    let out = Command::new(BIN)
        .args([
            "reconcile",
            fleet.repo().to_str().unwrap(),
            "--executor",
            "local",
        ])
        .args([
            "--observed",
            host.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ])
        .args([
            "--interval",
            "200ms",
            "--iterations",
            "10",
            "--listen",
            "off",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("place hello"), "{}", text(&out));
    assert!(
        text(&out).contains("hello failed (exit code 3)"),
        "{}",
        text(&out)
    );
    assert_eq!(fleet.phase("hello"), "failed");
    let log = std::fs::read_to_string(state.join("local/hello/0.out")).unwrap();
    assert_eq!(log.trim(), "0 1 0,1");
    // A failed job is recorded, not restarted.
    let out = Command::new(BIN)
        .args([
            "reconcile",
            fleet.repo().to_str().unwrap(),
            "--once",
            "--executor",
            "local",
        ])
        .args([
            "--observed",
            host.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!text(&out).contains("place hello"), "{}", text(&out));
}

/// `reconcile --once` runs, as cron starts them: the replicas outlive the
/// run that started them, and the next run reads how they ended; the
/// reconciler's secrets do not reach them.
#[test]
fn once_runs_of_the_local_executor_keep_exit_codes_and_secrets() {
    let fleet = Fleet::new();
    let out = fleet.dir.path().join("env");
    std::fs::create_dir(&out).unwrap();
    let script = "env > \"$OUT/$GITFLEET_JOB\"; sleep 0.3; exit $CODE";
    let mut jobs = String::new();
    for (name, code) in [("ok", 0), ("bad", 3)] {
        jobs += &format!(
            "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  queue: a\n  gpusPerReplica: 2\n  env: {{OUT: '{}', CODE: '{code}'}}\n  command: [sh, -c, '{script}']\n",
            out.display()
        );
    }
    let one_node = BASE.replace("size: {min: 2, max: 2}", "size: {min: 1, max: 1}");
    fleet.commit(
        &[
            ("fleet.yaml", &one_node),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &jobs),
        ],
        "first",
    );
    let host = fleet.dir.path().join("host.yaml");
    std::fs::write(
        &host,
        "nodes:\n  - name: p-0\n    pool: p\n    gpus: [{index: 0, model: H100}, {index: 1, model: H100}, {index: 2, model: H100}, {index: 3, model: H100}]\n",
    )
    .unwrap();
    let state = fleet.state();
    let once = || {
        let out = Command::new(BIN)
            .args(["reconcile", fleet.repo().to_str().unwrap(), "--once"])
            .args(["--executor", "local", "--observed", host.to_str().unwrap()])
            .args(["--state", state.to_str().unwrap()])
            .env("GITFLEET_TEST_SECRET_TOKEN", "hunter2")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        once();
        if fleet.phase("ok") == "succeeded" && fleet.phase("bad") == "failed" {
            break;
        }
        assert!(Instant::now() < deadline, "{:#}", fleet.status());
        std::thread::sleep(Duration::from_millis(150));
    }
    let store = Store::open(&state).unwrap();
    let jobs = store.jobs().unwrap();
    assert_eq!(jobs["ok"].exit_code, Some(0));
    assert_eq!(jobs["bad"].exit_code, Some(3));
    assert_eq!(jobs["bad"].reason.as_deref(), Some("failed: exit code 3"));
    for name in ["ok", "bad"] {
        let env = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(!env.contains("hunter2"), "{env}");
        assert!(
            env.contains(&format!("GITFLEET_REPLICA={name}/run-")),
            "{env}"
        );
        assert!(env.contains("CUDA_VISIBLE_DEVICES="), "{env}");
    }
}

#[test]
fn apply_asks_unless_approved_and_status_needs_a_state() {
    let fleet = Fleet::new();
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &job("a-1", "a", 8, "")),
        ],
        "first",
    );
    let out = fleet.run(&["apply"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("+ place"),
        "the plan is shown first: {}",
        text(&out)
    );
    assert!(text(&out).contains("--auto-approve"), "{}", text(&out));
    let out = fleet.run(&["apply", "--auto-approve"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Apply complete! 1 action carried out"),
        "{}",
        text(&out)
    );
    assert_eq!(fleet.phase("a-1"), "running");
    let out = fleet.run(&["apply", "--auto-approve"]);
    assert!(text(&out).contains("Nothing to do."), "{}", text(&out));

    let out = Command::new(BIN)
        .args(["status", "--state", "/nonexistent/state"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("no status in /nonexistent/state"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_restart_annotation_restarts_a_running_job_once_with_its_new_spec() {
    let fleet = Fleet::new();
    let train = |image: &str, annotations: &str| {
        format!(
            "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: train{annotations}}}\nspec: {{queue: a, gpusPerReplica: 8, image: \"{image}\"}}\n"
        )
    };
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(8, 8)),
            ("jobs.yaml", &train("train:v1", "")),
        ],
        "train runs",
    );
    assert!(fleet.reconcile(&[]).status.success());
    assert_eq!(fleet.phase("train"), "running");
    let plan = |fleet: &Fleet| -> Value {
        let out = fleet.run(&["plan", "-o", "json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let preempts = |plan: &Value| -> usize {
        plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["type"] == "preempt")
            .count()
    };

    // A new image alone: listed as job-spec drift, the job keeps running.
    fleet.commit(&[("jobs.yaml", &train("train:v2", ""))], "new image");
    let p = plan(&fleet);
    assert_eq!(preempts(&p), 0, "{p}");
    let drift: Vec<&Value> = p["drift"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "job-spec")
        .collect();
    assert_eq!(drift.len(), 1, "{p}");
    assert_eq!(drift[0]["job"], "train");
    assert!(
        drift[0]["reason"]
            .as_str()
            .unwrap()
            .contains("gitfleet/restart"),
        "{p}"
    );
    assert!(fleet.reconcile(&[]).status.success());
    assert_eq!(fleet.phase("train"), "running");

    // The annotation asks for a restart: preempted for itself, with grace.
    let restart = ", annotations: {gitfleet/restart: \"2026-11-21\"}";
    fleet.commit(
        &[("jobs.yaml", &train("train:v2", restart))],
        "restart train",
    );
    assert!(fleet.reconcile(&[]).status.success());
    let status = fleet.status();
    let record = status["job_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == "train")
        .unwrap()
        .clone();
    assert_eq!(record["stopping"], "preempt", "{record}");

    // After the 5m grace period it runs again, once: the same annotation
    // does not restart it twice, and its spec is current (no drift).
    for _ in 0..6 {
        assert!(fleet.reconcile(&[]).status.success());
    }
    assert_eq!(fleet.phase("train"), "running");
    let p = plan(&fleet);
    assert_eq!(preempts(&p), 0, "{p}");
    assert!(
        !p["drift"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "job-spec"),
        "{p}"
    );
}

#[test]
fn a_preempted_job_keeps_its_story_in_status_explain_and_the_audit_log() {
    let fleet = Fleet::new();
    let jobs = job("a-1", "a", 8, "") + &job("a-2", "a", 8, "") + &job("b-1", "b", 8, "");
    fleet.commit(
        &[
            ("fleet.yaml", BASE),
            ("queues.yaml", &queues(16, 0)),
            ("jobs.yaml", &jobs),
        ],
        "a runs",
    );
    assert!(fleet.reconcile(&[]).status.success());
    assert_eq!(fleet.phase("b-1"), "pending");
    let cut = fleet.commit(&[("queues.yaml", &queues(8, 8))], "quota cut");
    // The cut preempts one of a's jobs for b-1; after the grace period the
    // victim is pending again and its story stays.
    for _ in 0..7 {
        assert!(fleet.reconcile(&[]).status.success());
    }
    assert_eq!(fleet.phase("b-1"), "running");
    let status = fleet.status();
    let victim = status["job_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["last_stop"].is_object())
        .expect("a job with a last stop")
        .clone();
    let name = victim["job"].as_str().unwrap().to_string();
    assert_eq!(victim["phase"], "pending", "{victim}");
    assert_eq!(victim["preemptions"], 1, "{victim}");
    let stop = &victim["last_stop"];
    assert_eq!(stop["kind"], "preempt", "{victim}");
    assert_eq!(stop["forJob"], "b-1", "{victim}");
    assert_eq!(stop["revision"], cut.as_str(), "{victim}");
    assert!(!stop["reason"].as_str().unwrap().is_empty(), "{victim}");

    // `audit` lists the preemption with its revision; filters work.
    let state = fleet.state();
    let audit = |extra: &[&str]| -> Value {
        let mut args = vec!["audit", "--state", state.to_str().unwrap(), "-o", "json"];
        args.extend(extra);
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let all = audit(&[]);
    let entries = audit(&["--job", &name, "--what", "preempt"]);
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{all}");
    assert_eq!(entries[0]["revision"], cut.as_str());
    assert!(entries[0]["detail"].as_str().unwrap().contains("b-1"));
    assert!(all.as_array().unwrap().len() > entries.len());
    let last = audit(&["--last", "1"]);
    assert_eq!(last.as_array().unwrap().len(), 1);
    assert_eq!(
        last[0]["seq"],
        all.as_array().unwrap().last().unwrap()["seq"]
    );
    let out = Command::new(BIN)
        .args([
            "audit",
            "--state",
            state.to_str().unwrap(),
            "--revision",
            &cut[..8],
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("preempt"),
        "{}",
        text(&out)
    );

    // `explain --state` tells the story while the job waits.
    let out = Command::new(BIN)
        .args(["explain", &name])
        .arg(fleet.repo())
        .args(["--state", state.to_str().unwrap()])
        .output()
        .unwrap();
    let shown = text(&out);
    assert!(
        shown.contains("before:   last preempted for b-1 at ") && shown.contains(&cut[..12]),
        "{shown}"
    );
    assert!(shown.contains("preempted 1 time in all"), "{shown}");

    // A state directory without a database is a clear error, not a new state.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["audit", "--state", empty.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("no state here"), "{}", text(&out));
    assert!(!empty.path().join("state.redb").exists());
}
