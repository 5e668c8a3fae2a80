//! Saved plans (`plan --state DIR --out FILE`, `apply FILE`), plans against
//! a reconciler's live state, and `status --export-observed`: the real
//! binary, the sim executor, a fleet directory (no Git) beside its state.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::cli_support::{RECONCILE_FIRST, assert_fails_with, fleet, git, text};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

fn job(name: &str, gpus: u32) -> String {
    format!(
        "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec: {{queue: a, gpusPerReplica: {gpus}}}\n"
    )
}

/// A fleet directory and a state directory in a temporary directory; the
/// commands run there, with relative paths (as a person types them).
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    /// A fleet with `jobs`, reconciled once (so a live state exists).
    fn reconciled(jobs: &[(&str, u32)]) -> Setup {
        let setup = Setup {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir(setup.path("fleet")).unwrap();
        setup.write_jobs(jobs);
        setup.reconcile_first("fleet");
        setup
    }

    /// The first `reconcile --once` of `path` into `st`.
    fn reconcile_first(&self, path: &str) {
        let mut args = vec!["reconcile", path];
        args.extend(RECONCILE_FIRST);
        let out = self.run(&args);
        assert!(out.status.success(), "{}", text(&out));
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write_jobs(&self, jobs: &[(&str, u32)]) {
        let mut text = fleet(2);
        for (name, gpus) in jobs {
            text += &job(name, *gpus);
        }
        std::fs::write(self.path("fleet/fleet.yaml"), text).unwrap();
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    /// `plan --state st --out plan.json` (asserting success).
    fn save_plan(&self) -> Output {
        let out = self.run(&["plan", "fleet", "--state", "st", "--out", "plan.json"]);
        assert!(out.status.success(), "{}", text(&out));
        out
    }

    fn apply_saved(&self) -> Output {
        self.run(&["apply", "plan.json", "--state", "st"])
    }

    fn phases(&self) -> Vec<(String, String)> {
        let out = self.run(&["status", "--state", "st", "-o", "json"]);
        assert!(out.status.success(), "{}", text(&out));
        let status: Value = serde_json::from_slice(&out.stdout).unwrap();
        status["job_list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["job"].as_str().unwrap().to_string(),
                    j["phase"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    fn saved(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.path("plan.json")).unwrap()).unwrap()
    }

    fn write_saved(&self, value: &Value) {
        std::fs::write(
            self.path("plan.json"),
            serde_json::to_string_pretty(value).unwrap(),
        )
        .unwrap();
    }
}

/// The digest a saved plan holds: SHA-256 of its compact JSON (keys sorted)
/// without the `digest` member.
fn redigest(value: &mut Value) {
    value.as_object_mut().unwrap().remove("digest");
    let hash = Sha256::digest(serde_json::to_vec(&*value).unwrap());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    value["digest"] = Value::String(format!("sha256:{hex}"));
}

fn running(setup: &Setup, job: &str) -> bool {
    setup
        .phases()
        .iter()
        .any(|(j, phase)| j == job && phase == "running")
}

#[test]
fn a_saved_plan_is_applied_exactly_once_and_then_stale() {
    let setup = Setup::reconciled(&[("a-1", 8)]);
    setup.write_jobs(&[("a-1", 8), ("a-2", 4)]);
    let out = setup.save_plan();
    assert!(
        text(&out).contains("Saved the plan to plan.json"),
        "{}",
        text(&out)
    );
    let saved = setup.saved();
    assert_eq!(saved["format"], "gitfleet-saved-plan");
    assert_eq!(saved["format_version"], 1);
    assert_eq!(saved["specs"]["source"], "dir");
    assert_eq!(saved["observed"]["source"], "state");
    assert_eq!(saved["observed"]["executor"], "sim");
    assert!(
        saved["observed"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let actions = saved["plan"]["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "{actions:?}");
    assert_eq!(actions[0]["job"], "a-2");
    assert!(!running(&setup, "a-2"), "plan carries nothing out");

    let out = setup.apply_saved();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Apply complete! 1 action carried out"),
        "{}",
        text(&out)
    );
    assert!(running(&setup, "a-2"));

    // The state it was computed from is gone: applying it again is refused.
    let out = setup.apply_saved();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = text(&out);
    assert!(
        shown.contains("Saved plan plan.json is stale: the live state changed"),
        "{shown}"
    );
    assert!(shown.contains("nothing applied"), "{shown}");
}

#[test]
fn a_saved_plan_is_refused_when_the_specs_changed() {
    let setup = Setup::reconciled(&[("a-1", 8)]);
    setup.write_jobs(&[("a-1", 8), ("a-2", 4)]);
    setup.save_plan();
    setup.write_jobs(&[("a-1", 8), ("a-2", 4), ("a-3", 2)]);
    let out = setup.apply_saved();
    assert_fails_with(&out, "is stale: the specs changed since the plan was made");
    assert!(!running(&setup, "a-2"), "nothing applied");
    assert!(!running(&setup, "a-3"), "nothing applied");
}

#[test]
fn an_edited_saved_plan_is_never_applied() {
    let setup = Setup::reconciled(&[("a-1", 8)]);
    setup.write_jobs(&[("a-1", 8), ("a-2", 4)]);
    setup.save_plan();
    let original = setup.saved();
    let mut edited = original.clone();
    edited["plan"]["actions"][0]["placement"][0]["gpus"] = serde_json::json!([4, 5, 6, 7]);

    // Edited without the digest: the digest no longer matches.
    setup.write_saved(&edited);
    let out = setup.apply_saved();
    assert_fails_with(
        &out,
        "plan.json: the saved plan was modified after it was written",
    );

    // Edited with the digest recomputed: the engine's plan differs.
    redigest(&mut edited);
    setup.write_saved(&edited);
    let out = setup.apply_saved();
    assert_fails_with(
        &out,
        "the plan's actions are not what the specs and the live state give",
    );
    assert!(!running(&setup, "a-2"), "nothing applied");

    // The file as written still applies (the refusals changed nothing).
    setup.write_saved(&original);
    let out = setup.apply_saved();
    assert!(out.status.success(), "{}", text(&out));
    assert!(running(&setup, "a-2"));
}

#[test]
fn files_that_are_not_saved_plans_get_clear_messages() {
    let setup = Setup::reconciled(&[("a-1", 8)]);
    let cases: [(&str, &str); 4] = [
        (
            "{\"format\": \"gitfleet-saved-plan\",\n  \"format_version\": ",
            "plan.json: not a valid saved plan: line 2, column",
        ),
        (
            "{\"revision\": null, \"time\": \"2026-11-21T10:00:00Z\", \"actions\": []}",
            "this is a plan as `plan -o json` prints it",
        ),
        (
            "{\"format\": \"gitfleet-saved-plan\", \"format_version\": 2}",
            "format_version 2 is not supported",
        ),
        (
            "{\"format\": \"gitfleet-saved-plan\", \"format_version\": 1}",
            "no `digest` member",
        ),
    ];
    for (content, expected) in cases {
        std::fs::write(setup.path("plan.json"), content).unwrap();
        let out = setup.apply_saved();
        assert_eq!(out.status.code(), Some(1), "{content}: {}", text(&out));
        assert!(text(&out).contains(expected), "{content}: {}", text(&out));
        assert!(!text(&out).contains("panicked"), "{}", text(&out));
    }
    // A missing member with a valid digest names the field.
    let mut value: Value =
        serde_json::json!({"format": "gitfleet-saved-plan", "format_version": 1});
    redigest(&mut value);
    setup.write_saved(&value);
    let out = setup.apply_saved();
    assert!(
        text(&out).contains("missing field `created`"),
        "{}",
        text(&out)
    );
}

#[test]
fn only_plans_against_this_live_state_are_applied() {
    let setup = Setup::reconciled(&[("a-1", 8)]);
    setup.write_jobs(&[("a-1", 8), ("a-2", 4)]);
    // Against the derived inventory: reviewable, not applicable.
    let out = setup.run(&["plan", "fleet", "--out", "plan.json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("can be reviewed but not applied"),
        "{}",
        text(&out)
    );
    let out = setup.apply_saved();
    assert_fails_with(
        &out,
        "computed against the inventory derived from the pools, not a reconciler's live state",
    );
    // Against st, applied with another state directory: refused before
    // that directory is created.
    setup.save_plan();
    let out = setup.run(&["apply", "plan.json", "--state", "other"]);
    assert_fails_with(
        &out,
        "computed against the state in st, but apply uses other",
    );
    assert!(!setup.path("other").exists());
    // --state without a live state.
    std::fs::create_dir(setup.path("empty")).unwrap();
    let out = setup.run(&["plan", "fleet", "--state", "empty"]);
    assert_fails_with(&out, "--state empty: no live state recorded there");
}

#[test]
fn the_exported_live_state_plans_like_the_state_itself() {
    let setup = Setup::reconciled(&[("a-1", 8), ("a-2", 8), ("a-3", 4)]);
    setup.write_jobs(&[("a-1", 8), ("a-2", 8), ("a-3", 4), ("a-4", 8)]);
    let out = setup.run(&["status", "--state", "st", "--export-observed", "live.json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Wrote the live state (2 nodes, 2 running, 1 queued) to live.json"),
        "{}",
        text(&out)
    );
    let from_state = setup.run(&["plan", "fleet", "--state", "st", "-o", "json"]);
    let from_file = setup.run(&["plan", "fleet", "--observed", "live.json", "-o", "json"]);
    assert!(from_state.status.success(), "{}", text(&from_state));
    assert!(from_file.status.success(), "{}", text(&from_file));
    assert_eq!(
        String::from_utf8_lossy(&from_state.stdout),
        String::from_utf8_lossy(&from_file.stdout)
    );
    let plan: Value = serde_json::from_slice(&from_state.stdout).unwrap();
    assert_eq!(plan["summary"]["allocated"], 16, "{plan}");
    // The same digest: a plan saved from the exported file names the same live state.
    setup.run(&[
        "plan",
        "fleet",
        "--observed",
        "live.json",
        "--out",
        "file.json",
    ]);
    setup.save_plan();
    let digest = |name: &str| -> Value {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(setup.path(name)).unwrap()).unwrap();
        v["observed"]["digest"].clone()
    };
    assert_eq!(digest("file.json"), digest("plan.json"));
}

#[test]
fn a_plan_of_a_git_revision_follows_the_fleet_not_the_commit() {
    let setup = Setup {
        dir: tempfile::tempdir().unwrap(),
    };
    let repo = setup.path("repo");
    let git = |args: &[&str]| git(&repo, args, &[]);
    std::fs::create_dir_all(setup.path("repo/fleet")).unwrap();
    git(&["init", "-q", "-b", "main"]);
    let commit = |jobs: &[(&str, u32)], readme: &str| {
        let mut yaml = fleet(2);
        for (name, gpus) in jobs {
            yaml += &job(name, *gpus);
        }
        std::fs::write(setup.path("repo/fleet/fleet.yaml"), yaml).unwrap();
        std::fs::write(setup.path("repo/README.md"), readme).unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "change"]);
        git(&["rev-parse", "HEAD"])
    };
    commit(&[("a-1", 8)], "one");
    setup.reconcile_first("repo/fleet");
    commit(&[("a-1", 8), ("a-2", 4)], "one");
    let save = || {
        let out = setup.run(&[
            "plan",
            "repo/fleet",
            "--rev",
            "HEAD",
            "--state",
            "st",
            "--out",
            "plan.json",
        ]);
        assert!(out.status.success(), "{}", text(&out));
    };
    save();
    assert_eq!(setup.saved()["specs"]["source"], "git");
    // A commit outside the fleet changes nothing the plan was computed from.
    let readme = commit(&[("a-1", 8), ("a-2", 4)], "two");
    let out = setup.apply_saved();
    assert!(out.status.success(), "{}", text(&out));
    assert!(running(&setup, "a-2"));
    let out = setup.run(&["status", "--state", "st", "-o", "json"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["revisions"]["lastApplied"], readme.as_str());

    commit(&[("a-1", 8), ("a-2", 4), ("a-3", 2)], "two");
    save();
    commit(&[("a-1", 8), ("a-2", 4), ("a-3", 4)], "two");
    let out = setup.apply_saved();
    assert_fails_with(
        &out,
        "the specs changed since the plan was made: it was made at",
    );
    assert!(text(&out).contains("HEAD is now "), "{}", text(&out));
}

#[test]
fn a_plan_of_a_remote_branch_is_applied_to_the_loop_that_mirrors_it() {
    let setup = Setup {
        dir: tempfile::tempdir().unwrap(),
    };
    let repo = setup.path("upstream");
    let git = |args: &[&str]| git(&repo, args, &[]);
    std::fs::create_dir_all(setup.path("upstream/fleet")).unwrap();
    git(&["init", "-q", "-b", "main"]);
    let commit = |jobs: &[(&str, u32)]| {
        let mut yaml = fleet(2);
        for (name, gpus) in jobs {
            yaml += &job(name, *gpus);
        }
        std::fs::write(setup.path("upstream/fleet/fleet.yaml"), yaml).unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "change"]);
        git(&["rev-parse", "HEAD"])
    };
    let url = format!("file://{}", repo.display());
    commit(&[("a-1", 8)]);
    let mut first = vec!["reconcile", "fleet", "--repo", &url];
    first.extend(RECONCILE_FIRST);
    let out = setup.run(&first);
    assert!(out.status.success(), "{}", text(&out));
    assert!(setup.path("st/repo.git").is_dir());

    // No clone here: the specs are read from the remote.
    let second = commit(&[("a-1", 8), ("a-2", 4)]);
    let out = setup.run(&["validate", "fleet", "--repo", &url]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("at main ("), "{}", text(&out));
    let save = || {
        let out = setup.run(&[
            "plan",
            "fleet",
            "--repo",
            &url,
            "--state",
            "st",
            "--out",
            "plan.json",
        ]);
        assert!(out.status.success(), "{}", text(&out));
    };
    save();
    let saved = setup.saved();
    assert_eq!(saved["specs"]["source"], "remote");
    assert_eq!(saved["specs"]["url"], url.as_str());
    assert_eq!(saved["specs"]["rev"], "main");
    assert_eq!(saved["specs"]["path"], "fleet");
    assert_eq!(saved["specs"]["revision"], second.as_str());
    assert_eq!(saved["plan"]["revision"], second.as_str());
    let out = setup.apply_saved();
    assert!(out.status.success(), "{}", text(&out));
    assert!(running(&setup, "a-2"));
    let out = setup.run(&["status", "--state", "st", "-o", "json"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["revisions"]["lastApplied"], second.as_str());

    // The branch moves on with other fleet files: the plan is stale.
    commit(&[("a-1", 8), ("a-2", 4), ("a-3", 2)]);
    save();
    commit(&[("a-1", 8), ("a-2", 4), ("a-3", 4)]);
    let out = setup.apply_saved();
    assert_fails_with(
        &out,
        "the specs changed since the plan was made: it was made at",
    );
    assert!(
        text(&out).contains(&format!("main of {url} is now ")),
        "{}",
        text(&out)
    );
    assert!(!running(&setup, "a-3"), "nothing of a stale plan applied");

    // A preview needs two revisions of a clone.
    let out = setup.run(&["plan", "fleet", "--repo", &url, "--base", "main"]);
    assert_fails_with(&out, "a preview compares two revisions of a local clone");
    // A branch the remote does not have.
    let out = setup.run(&["plan", "fleet", "--repo", &url, "--rev", "nope"]);
    assert_fails_with(&out, "--rev names a branch of the remote");
}
