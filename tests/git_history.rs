//! `gitfleet history`: who changed what and when, as semantic diffs, across
//! renames and invalid commits.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod git_support;

use git_support::{QUEUES, TestRepo, fleet_repo, gitfleet, pull_request};

/// initial → pull request → an invalid quota → its fix; returns the ids.
fn repo_with_history() -> (TestRepo, Vec<String>) {
    let mut repo = fleet_repo();
    let mut ids = vec![repo.repo.revparse_single("HEAD").unwrap().id().to_string()];
    ids.push(pull_request(&mut repo));
    repo.write(
        "fleet/queues.yaml",
        &QUEUES.replace("guaranteed: 8, limit: 16}", "guaranteed: 100, limit: 100}"),
    );
    ids.push(repo.commit("Eve", "Give nlp everything"));
    repo.write(
        "fleet/queues.yaml",
        &QUEUES
            .replace("guaranteed: 8, limit: 16}", "guaranteed: 4, limit: 4}")
            .replacen("guaranteed: 4, limit: 4}", "guaranteed: 12, limit: 20}", 1),
    );
    ids.push(repo.commit("Fay", "Fix quotas\n\nnlp gets 12, vision keeps 4."));
    // a commit outside the fleet is not listed
    repo.write("README.md", "# monorepo, edited\n");
    repo.commit("Gus", "Docs");
    (repo, ids)
}

#[test]
fn history_of_the_whole_fleet() {
    let (repo, ids) = repo_with_history();
    let run = gitfleet(repo.path(), &["history", "fleet"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = |i: usize| &ids[i][..12];
    let expected = format!(
        "\
commit {}  2025-11-21 04:44:00 +00:00  Fay <fay@example.com>
    Fix quotas

    nlp gets 12, vision keeps 4.

  ~ queue nlp: H100 guaranteed 100 → 12
  ~ queue nlp: H100 limit 100 → 20
  ~ queue vision: H100 guaranteed 100 → 4
  ~ queue vision: H100 limit 100 → 4

commit {}  2025-11-21 04:43:00 +00:00  Eve <eve@example.com>
    Give nlp everything

  ~ queue nlp: H100 guaranteed 8 → 100
  ~ queue nlp: H100 limit 16 → 100
  ~ queue vision: H100 guaranteed 4 → 100
  ~ queue vision: H100 limit 4 → 100
  ! the fleet does not validate at this commit (1 error):
      {}:fleet/queues.yaml:6:33: Queue org: children's guaranteed H100 sum to 200 (nlp 100, vision 100), above this queue's guaranteed 24

commit {}  2025-11-21 04:42:00 +00:00  Bob <bob@example.com>
    Cut vision, add nlp-b, drop old-eval

  ~ queue vision: H100 guaranteed 8 → 4
  ~ queue vision: H100 limit 16 → 4
  ~ priority class low: preemptible true → false
  + job nlp-b added
  - job old-eval removed
  > job vision-a moved from fleet/jobs/vision.yaml to fleet/jobs/cv.yaml
  > job vision-b moved from fleet/jobs/vision.yaml to fleet/jobs/cv.yaml

commit {}  2025-11-21 04:41:00 +00:00  Ada <ada@example.com>
    Initial fleet

  + node pool h100 added
  + queue nlp added
  + queue org added
  + queue vision added
  + priority class high added
  + priority class low added
  + job nlp-a added
  + job old-eval added
  + job vision-a added
  + job vision-b added
",
        s(3),
        s(2),
        s(2),
        s(1),
        s(0)
    );
    assert_eq!(run.stdout, expected);
}

#[test]
fn history_of_one_object_follows_it_across_files() {
    let (repo, ids) = repo_with_history();
    let run = gitfleet(
        repo.path(),
        &["history", "job/vision-b", "fleet", "-o", "json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["format_version"], 1);
    let entries = doc["entries"].as_array().unwrap();
    let commits: Vec<&str> = entries
        .iter()
        .map(|e| e["commit"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(commits, [ids[1].as_str(), ids[0].as_str()]);
    assert_eq!(entries[0]["objects"][0]["change"], "moved");
    assert_eq!(entries[0]["objects"][0]["file_after"], "fleet/jobs/cv.yaml");
    assert_eq!(entries[0]["commit"]["author_name"], "Bob");
    assert_eq!(entries[0]["commit"]["time"], "2025-11-21T04:42:00Z");
    assert_eq!(entries[1]["objects"][0]["change"], "added");

    // the patch of a queue, from inside the fleet directory
    let run = gitfleet(
        &repo.path().join("fleet"),
        &[
            "history",
            "queue/vision",
            "-p",
            "--since",
            "2025-11-21T04:43:30Z",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!(
            "\
commit {}  2025-11-21 04:44:00 +00:00  Fay <fay@example.com>
    Fix quotas

    nlp gets 12, vision keeps 4.

  ~ queue vision: H100 guaranteed 100 → 4
  ~ queue vision: H100 limit 100 → 4

--- a/fleet/queues.yaml
+++ b/fleet/queues.yaml
@@ -6,5 +6,5 @@
   parent: org
   quota:
     - model: H100
-      guaranteed: 100
-      limit: 100
+      guaranteed: 4
+      limit: 4
",
            &ids[3][..12]
        )
    );
}

#[test]
fn history_arguments_are_checked() {
    let (repo, _) = repo_with_history();
    let run = gitfleet(repo.path(), &["history", "job/nope", "fleet"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "no commit changes job nope in fleet\n");
    let run = gitfleet(repo.path(), &["history", "nlp", "fleet"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("\"nlp\" is not KIND/NAME"),
        "{}",
        run.stderr
    );
    let run = gitfleet(repo.path(), &["history", "fleet", "--since", "yesterday"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("--since \"yesterday\": not a date"),
        "{}",
        run.stderr
    );
}
