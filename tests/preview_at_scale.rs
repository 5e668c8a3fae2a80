//! The pull-request comment on a 1,000-node generated fleet, where a
//! one-line limit change moves hundreds of jobs: the comment must lead with
//! the severe changes, collapse the long runs, show the per-queue table and
//! chart, and stay under GitHub's limit.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod git_support;

use git_support::{TestRepo, gitfleet};

const NOW: &str = "2026-01-01T00:00:00Z";

/// Where each of `needles` first occurs in `text` (panics when one is missing).
fn positions(text: &str, needles: &[&str]) -> Vec<usize> {
    needles
        .iter()
        .map(|n| {
            text.find(n)
                .unwrap_or_else(|| panic!("missing {n:?} in\n{text}"))
        })
        .collect()
}

#[test]
fn a_one_line_limit_change_on_a_thousand_nodes_stays_readable() {
    let mut repo = TestRepo::new();
    let generate = gitfleet(
        repo.path(),
        &[
            "generate",
            "--out",
            "gen",
            "--nodes",
            "1000",
            "--pending",
            "4000",
            "--running",
            "3000",
            "--now",
            NOW,
        ],
    );
    assert_eq!(generate.code, 0, "{}", generate.stderr);
    repo.commit("Gen", "A generated fleet");
    // one line: dept-0's H100 guarantee down to what its teams are
    // guaranteed (the least it may be), so other departments reclaim
    let queues_path = repo.path().join("gen/repo/queues.yaml");
    let queues = std::fs::read_to_string(&queues_path).unwrap();
    let guaranteed_of = |line: &str| -> u64 {
        line.split("guaranteed: ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let teams: u64 = queues
        .split("\n---")
        .filter(|doc| doc.contains("parent: dept-0\n"))
        .filter_map(|doc| doc.lines().find(|l| l.contains("- {model: H100")))
        .map(guaranteed_of)
        .sum();
    let at = queues.find("metadata: {name: dept-0}").unwrap();
    let line_start = at + queues[at..].find("- {model: H100").unwrap();
    let line_end = line_start + queues[line_start..].find('\n').unwrap();
    let line = &queues[line_start..line_end];
    let guaranteed = guaranteed_of(line);
    assert!(teams > 0 && teams < guaranteed, "{teams} of {guaranteed}");
    let changed = line.replace(
        &format!("guaranteed: {guaranteed},"),
        &format!("guaranteed: {teams},"),
    );
    assert_ne!(changed, line);
    repo.write(
        "gen/repo/queues.yaml",
        &format!("{}{changed}{}", &queues[..line_start], &queues[line_end..]),
    );
    repo.commit("Lee", "dept-0: H100 guarantee down to its teams' sum");
    let args = |format: &'static str| {
        vec![
            "plan",
            "--base",
            "HEAD~1",
            "--rev",
            "HEAD",
            "gen/repo",
            "--observed",
            "gen/observed.json",
            "--now",
            NOW,
            "-o",
            format,
        ]
    };
    let json = gitfleet(repo.path(), &args("json"));
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let jobs = doc["plan"]["jobs"].as_array().unwrap();
    let state = |j: &serde_json::Value, side: &str| j[side]["state"].as_str().unwrap().to_string();
    let still_pending = jobs
        .iter()
        .filter(|j| state(j, "before") == "pending" && state(j, "after") == "pending")
        .count();
    let preempted = jobs
        .iter()
        .filter(|j| state(j, "after") == "preempted")
        .count();
    let preempted_before = jobs
        .iter()
        .filter(|j| state(j, "before") == "preempted" && state(j, "after") == "preempted")
        .count();
    let newly_pending = jobs
        .iter()
        .filter(|j| state(j, "before") != "pending" && state(j, "after") == "pending")
        .count();
    assert!(
        jobs.len() >= 100 && preempted > 0,
        "the change should move a hundred jobs or more and preempt some: {} moved, {preempted} preempted",
        jobs.len()
    );

    let run = gitfleet(repo.path(), &args("markdown"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let md = &run.stdout;
    assert!(
        md.chars().count() < 65_536,
        "{} characters",
        md.chars().count()
    );
    // balanced: every <details> closed, every code fence closed
    assert_eq!(
        md.matches("<details>").count(),
        md.matches("</details>").count(),
        "{md}"
    );
    assert_eq!(md.matches("```").count() % 2, 0, "{md}");
    // the per-queue table and the chart come before the job changes
    let mut order = vec![
        "#### Scheduling consequences",
        "| queue | GPUs before | GPUs after | pending before | pending after |",
    ];
    let chart = md.contains("```mermaid\nxychart-beta\n");
    if chart {
        order.push("```mermaid\nxychart-beta\n");
    }
    // severity order: preemptions, newly pending, then the collapsed rest
    let preempted_title = if preempted_before == 0 {
        format!(
            "**{preempted} job{} newly preempted**",
            if preempted == 1 { "" } else { "s" }
        )
    } else {
        format!(
            "**{preempted} jobs preempted ({} newly, {preempted_before} for another job)**",
            preempted - preempted_before
        )
    };
    let newly_title = format!(
        "**{newly_pending} job{} newly pending**",
        if newly_pending == 1 { "" } else { "s" }
    );
    if preempted > 0 {
        order.push(&preempted_title);
    }
    if newly_pending > 0 {
        order.push(&newly_title);
    }
    let still_title =
        format!("<details><summary>{still_pending} jobs still pending; reasons changed: ");
    assert!(still_pending > 10, "{still_pending} still pending");
    order.push(&still_title);
    order.push("#### Spec changes (1 changed)");
    let at = positions(md, &order);
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "out of order {order:?} at {at:?}:\n{md}"
    );
    // queues of the changed department are in the table
    assert!(md.contains("| `team-0-"), "{md}");
    // the still-pending jobs are one collapsed block: no row of their own
    assert!(!md.contains("still pending, now:"), "{md}");
    // every preemption is a row of its own, near the top
    for job in jobs.iter().filter(|j| state(j, "after") == "preempted") {
        let name = job["job"].as_str().unwrap();
        assert!(
            md.contains(&format!("| `-` | job {name} newly preempted")),
            "{name} not shown:\n{md}"
        );
    }
    // the chart names the queues as a Mermaid list of strings
    if chart {
        assert!(md.contains("    x-axis [\""), "{md}");
        assert!(
            md.contains("    bar [") && md.contains("    line ["),
            "{md}"
        );
    }
}
