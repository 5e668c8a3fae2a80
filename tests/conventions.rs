//! Output conventions shared by the commands (issue 21, item 5): `plan -o
//! json` starts with `format_version` and carries the commit of a clean Git
//! work tree as `revision`; `validate -o json`; an unsupported `-o` is a
//! usage error on every command, never a silent fallback; placements read
//! `node:gpu0-7` with nodes in natural order.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod git_support;

use git_support::{fleet_repo, gitfleet};

const NOW: &str = "2026-01-01T00:00:00Z";

#[test]
fn plan_json_starts_with_its_format_version_and_names_the_work_trees_commit() {
    let repo = fleet_repo();
    let head = repo.repo.revparse_single("HEAD").unwrap().id().to_string();
    let fleet = repo.path().join("fleet");
    let run = gitfleet(&fleet, &["plan", ".", "--now", NOW, "-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("{\n  \"format_version\": 1,\n"),
        "{}",
        run.stdout
    );
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["revision"], head.as_str());
    // With an uncommitted change the files on disk are no commit.
    repo.write("fleet/jobs/extra.yaml", "# a comment only\n");
    let run = gitfleet(&fleet, &["plan", ".", "--now", NOW, "-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(plan["revision"].is_null(), "{}", plan["revision"]);
}

#[test]
fn validate_json_is_one_document_with_counts() {
    let repo = fleet_repo();
    let run = gitfleet(repo.path(), &["validate", "fleet", "-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["valid"], true);
    assert!(doc["documents"]["Job"].as_u64().unwrap() > 0, "{doc}");
    // An invalid fleet: still one JSON document, and exit 1.
    repo.write(
        "fleet/jobs/broken.yaml",
        "apiVersion: gitfleet/v1\nkind: Job\n",
    );
    let run = gitfleet(repo.path(), &["validate", "fleet", "-o", "json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["valid"], false);
}

#[test]
fn an_unsupported_output_format_is_an_error_on_every_command() {
    let repo = fleet_repo();
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_str().unwrap();
    // (command line, a format it does not have)
    let cases: &[(&[&str], &str)] = &[
        (&["plan", "fleet"], "yaml"),
        (&["apply", "fleet", "--state", state], "yaml"),
        (&["simulate", "fleet", "--trace", "t.csv"], "yaml"),
        (&["explain", "nlp-a", "fleet"], "markdown"),
        (&["validate", "fleet"], "markdown"),
        (&["status", "--state", state], "markdown"),
        (&["audit", "--state", state], "markdown"),
        (&["history", "fleet"], "markdown"),
        (&["inventory"], "markdown"),
    ];
    for (args, format) in cases {
        let mut args = args.to_vec();
        args.extend(["-o", format]);
        let run = gitfleet(repo.path(), &args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr
                .contains(&format!("invalid value '{format}' for '--output")),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
}

/// Twelve nodes and a job on all of them: best fit breaks ties by name in
/// byte order (`p-0, p-1, p-10, p-11, p-2, …`); the plan shows them in
/// natural order.
const WIDE: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec: {gpu: {model: H100, count: 8}, size: {min: 12, max: 12}}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, default: true}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q}
spec: {quota: [{model: H100, guaranteed: 96}]}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: wide}
spec: {queue: q, replicas: 11, gpusPerReplica: 8}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: half}
spec: {queue: q, gpusPerReplica: 4}
";

#[test]
fn placements_read_node_colon_gpus_in_natural_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), WIDE).unwrap();
    let run = gitfleet(dir.path(), &["plan", ".", "--now", NOW]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let places: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("+ place"))
        .collect();
    assert_eq!(places.len(), 2, "{}", run.stdout);
    let mut all_nodes = Vec::new();
    for line in &places {
        let on = line.split(" on ").nth(1).unwrap();
        let placement = on.split(" — ").next().unwrap();
        assert!(!placement.contains('['), "{line}");
        let nodes: Vec<&str> = placement
            .split(", ")
            .map(|part| {
                let (node, gpus) = part.split_once(":gpu").unwrap_or_else(|| panic!("{line}"));
                assert!(
                    gpus.chars()
                        .all(|c| c.is_ascii_digit() || c == '-' || c == ','),
                    "{line}"
                );
                node
            })
            .collect();
        let mut natural = nodes.clone();
        natural.sort_by_key(|n| natural_key(n));
        assert_eq!(nodes, natural, "{line}");
        all_nodes.extend(nodes);
    }
    assert!(run.stdout.contains(":gpu0-7, p-"), "{}", run.stdout);
    assert!(all_nodes.contains(&"p-2") && all_nodes.contains(&"p-10"));
}

/// A node name as (prefix, number): `p-10` after `p-2`.
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (prefix, number) = name.split_at(name.len() - digits);
    (prefix.to_string(), number.parse().unwrap_or(0))
}
