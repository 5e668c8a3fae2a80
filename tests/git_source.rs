//! `validate --rev` and `plan --rev`: specs read from Git objects (no
//! checkout), from a subdirectory, a bare repository and a worktree.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod git_support;

use git_support::{fleet_repo, gitfleet, pull_request};

const NOW: &str = "2026-01-01T00:00:00Z";

#[test]
fn validate_reads_the_revision_not_the_work_tree() {
    let mut repo = fleet_repo();
    pull_request(&mut repo);
    // an uncommitted, broken edit: --rev does not see it, a plain run does
    repo.write(
        "fleet/queues.yaml",
        "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: x}\nspec: {parent: nowhere}\n",
    );
    let head = gitfleet(repo.path(), &["validate", "--rev", "HEAD", "fleet"]);
    assert_eq!(head.code, 0, "{}{}", head.stdout, head.stderr);
    let id = repo.repo.revparse_single("HEAD").unwrap().id().to_string();
    assert_eq!(
        head.stdout,
        format!(
            "valid: 10 documents in 5 files (1 NodePool, 3 Queue, 2 PriorityClass, 4 Job, 0 Policy) at HEAD ({})\n",
            &id[..12]
        )
    );
    let disk = gitfleet(repo.path(), &["validate", "fleet"]);
    assert_eq!(disk.code, 1);
}

#[test]
fn errors_name_the_revision_and_file() {
    let mut repo = fleet_repo();
    repo.write(
        "fleet/jobs/nlp.yaml",
        "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: nlp-a}\n\
         spec: {queue: nlp, gpusPerReplica: eight}\n",
    );
    repo.commit("Eve", "Break a job");
    let run = gitfleet(repo.path(), &["validate", "--rev", "main", "fleet"]);
    assert_eq!(run.code, 1);
    let first = run.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("main:fleet/jobs/nlp.yaml:4:"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with(
            "at main ({})\n"
                .replace(
                    "{}",
                    &repo.repo.revparse_single("main").unwrap().id().to_string()[..12]
                )
                .as_str()
        ),
        "{}",
        run.stdout
    );
    // the revision before is fine
    assert_eq!(
        gitfleet(repo.path(), &["validate", "--rev", "main~1", "fleet"]).code,
        0
    );
    // plan --rev refuses the broken revision and says how to see why
    let plan = gitfleet(repo.path(), &["plan", "--rev", "main", "fleet"]);
    assert_eq!(plan.code, 1);
    assert!(
        plan.stderr
            .contains("run `gitfleet validate --rev main fleet`"),
        "{}",
        plan.stderr
    );
}

#[test]
fn unknown_revisions_and_paths_are_clear_errors() {
    let repo = fleet_repo();
    let run = gitfleet(repo.path(), &["plan", "--rev", "v9", "fleet"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("unknown revision `v9`"),
        "{}",
        run.stderr
    );
    // Bad syntax and too short an id say so, in words without libgit2's
    // class and code.
    for (rev, words) in [
        ("main..", "invalid revision `main..`"),
        ("a", "ambiguous revision `a`"),
    ] {
        let run = gitfleet(repo.path(), &["plan", "--rev", rev, "fleet"]);
        assert_eq!(run.code, 1, "{rev}");
        assert!(run.stderr.contains(words), "{rev}: {}", run.stderr);
        assert!(
            !run.stderr.contains("class=") && !run.stderr.contains("code="),
            "{}",
            run.stderr
        );
    }
    let run = gitfleet(repo.path(), &["validate", "--rev", "HEAD", "nothing-here"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("HEAD:nothing-here: no such file or directory in revision `HEAD`"),
        "{}",
        run.stderr
    );
    let outside = tempfile::tempdir().unwrap();
    let run = gitfleet(outside.path(), &["validate", "--rev", "HEAD", "."]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("is not inside a Git repository"),
        "{}",
        run.stderr
    );
}

#[test]
fn plan_json_carries_the_commit_id() {
    let mut repo = fleet_repo();
    let first = repo.repo.revparse_single("HEAD").unwrap().id().to_string();
    pull_request(&mut repo);
    let run = gitfleet(
        &repo.path().join("fleet"),
        &["plan", "--rev", "HEAD~1", ".", "--now", NOW, "-o", "json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["revision"], first.as_str());
    // at the base revision, old-eval exists and is placed
    assert!(run.stdout.contains("\"job\": \"old-eval\""));
    // the same plan as from a checkout of that revision
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("pools.yaml", git_support::POOLS),
        ("queues.yaml", git_support::QUEUES),
        ("priority-classes.yaml", git_support::PRIORITIES),
        ("jobs/nlp.yaml", git_support::NLP_JOBS),
        ("jobs/vision.yaml", git_support::VISION_JOBS),
    ] {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    let disk = gitfleet(dir.path(), &["plan", ".", "--now", NOW, "-o", "json"]);
    let mut from_disk: serde_json::Value = serde_json::from_str(&disk.stdout).unwrap();
    from_disk["revision"] = plan["revision"].clone();
    assert_eq!(from_disk, plan);
}

#[test]
fn bare_repositories_and_worktrees() {
    let mut repo = fleet_repo();
    let first = repo.repo.revparse_single("HEAD").unwrap().id().to_string();
    pull_request(&mut repo);
    let second = repo.repo.revparse_single("HEAD").unwrap().id().to_string();

    let bare_dir = tempfile::tempdir().unwrap();
    repo.bare_clone(&bare_dir.path().join("fleet.git"));
    let run = gitfleet(
        bare_dir.path(),
        &[
            "plan",
            "--rev",
            "main",
            "fleet.git/fleet",
            "--now",
            NOW,
            "-o",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["revision"], second.as_str());

    // a worktree on a branch at the first commit: HEAD there is that commit
    let commit = repo
        .repo
        .find_commit(git2::Oid::from_str(&first).unwrap())
        .unwrap();
    let branch = repo.repo.branch("old", &commit, false).unwrap();
    let wt_dir = tempfile::tempdir().unwrap();
    let wt_path = wt_dir.path().join("wt");
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(branch.get()));
    repo.repo.worktree("old", &wt_path, Some(&opts)).unwrap();
    let run = gitfleet(
        &wt_path,
        &["plan", "--rev", "HEAD", "fleet", "--now", NOW, "-o", "json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["revision"], first.as_str());
    // and the preview works from the worktree too
    let run = gitfleet(
        &wt_path,
        &[
            "plan", "--base", "HEAD", "--rev", "main", "fleet", "--now", NOW,
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("  + job nlp-b added\n"),
        "{}",
        run.stdout
    );
}
