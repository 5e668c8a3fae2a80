//! The what-if module on small fleets: each kind of suggestion, the
//! verification that drops a change that does not help, and expected
//! starts from time limits (unknown without them, never when nothing ends).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use engine::{PlanInput, plan};
use gitfleet_whatif::{
    Change, ExpectedStart, Horizon, StartStatus, Suggestion, expected_starts, suggest,
};
use load::{SourceFile, load_fleet, parse_observed};
use model::observed::ObservedState;
use model::spec::{Duration, Fleet};
use model::time::Timestamp;

const NOW: &str = "2026-11-21T10:00:00Z";

const CLASSES: &str = "
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: low}
spec: {value: 10, gracePeriod: 5m}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, gracePeriod: 5m, default: true}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: high}
spec: {value: 500, gracePeriod: 5m}
";

struct Case {
    fleet: Fleet,
    observed: ObservedState,
    now: Timestamp,
}

impl Case {
    fn new(specs: &str, observed: &str) -> Case {
        let loaded = load_fleet(&[
            SourceFile::new("classes.yaml", CLASSES.as_bytes().to_vec()),
            SourceFile::new("fleet.yaml", specs.as_bytes().to_vec()),
        ]);
        assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
        let observed = parse_observed("observed.yaml", observed).expect("observed state");
        Case {
            fleet: loaded.fleet,
            observed,
            now: NOW.parse().unwrap(),
        }
    }

    fn input(&self) -> PlanInput<'_> {
        PlanInput {
            fleet: &self.fleet,
            observed: &self.observed,
            now: self.now,
            revision: None,
        }
    }

    fn suggestions(&self, job: &str) -> Vec<Suggestion> {
        let input = self.input();
        let plan = plan(&input);
        assert!(
            plan.pending.iter().any(|p| *p.job == *job),
            "{job} is pending"
        );
        suggest(&input, &plan, &[job])
            .remove(job)
            .expect("an entry")
    }

    fn start(&self, job: &str, horizon: Horizon) -> ExpectedStart {
        let input = self.input();
        let plan = plan(&input);
        expected_starts(&input, &plan, None, horizon)
            .remove(job)
            .expect("an entry")
    }
}

/// `count` nodes of 8 GPUs of `model` in pool `pool`, with `labels`.
fn nodes(pool: &str, model: &str, count: usize, labels: &[&str]) -> String {
    let mut out = String::new();
    for i in 0..count {
        let label = labels.get(i).copied().unwrap_or("{}");
        out.push_str(&format!(
            "  - name: {pool}-{i}\n    pool: {pool}\n    labels: {label}\n    gpus: [{}]\n",
            (0..8)
                .map(|g| format!("{{index: {g}, model: {model}}}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

fn pool(name: &str, model: &str, size: u32) -> String {
    format!(
        "---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {{name: {name}}}\n\
         spec: {{gpu: {{model: {model}, count: 8}}, nvlink: full, size: {{min: {size}, max: {size}}}}}\n"
    )
}

fn job(name: &str, spec: &str) -> String {
    format!("---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

fn queue(name: &str, spec: &str) -> String {
    format!("---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

fn limits(s: &[Suggestion]) -> Vec<&Change> {
    s.iter()
        .flat_map(|s| &s.changes)
        .filter(|c| matches!(c, Change::RaiseLimit { .. }))
        .collect()
}

#[test]
fn a_binding_limit_at_two_levels_is_raised_at_both_by_what_the_job_needs() {
    let specs = pool("p", "H100", 2)
        + &queue("dept", "{quota: [{model: H100, limit: 8}]}")
        + &queue("team", "{parent: dept, quota: [{model: H100, limit: 8}]}")
        + &job("r", "{queue: team, gpusPerReplica: 4}")
        + &job("big", "{queue: team, gpusPerReplica: 8}");
    let observed = format!(
        "nodes:\n{}running:\n  - {{job: r, started: 2026-11-21T09:00:00Z, placement: [{{node: p-0, gpus: [0, 1, 2, 3]}}]}}\n",
        nodes("p", "H100", 2, &[])
    );
    let case = Case::new(&specs, &observed);
    let s = case.suggestions("big");
    let raise = s
        .iter()
        .find(|s| matches!(s.changes[0], Change::RaiseLimit { .. }))
        .expect("a limit suggestion");
    // 4 running + 8 asked = 12, at the team and at the department.
    assert_eq!(
        raise.changes,
        vec![
            Change::RaiseLimit {
                queue: "team".into(),
                model: "H100".into(),
                from: 8,
                to: 12
            },
            Change::RaiseLimit {
                queue: "dept".into(),
                model: "H100".into(),
                from: 8,
                to: 12
            },
        ]
    );
    assert!(
        raise
            .text
            .contains("raise queue team's limit on H100 by 4 (from 8 to 12)"),
        "{}",
        raise.text
    );
}

#[test]
fn a_limit_below_the_request_gets_the_raise_that_fixes_it() {
    let specs = pool("p", "H100", 2)
        + &queue("small", "{quota: [{model: H100, guaranteed: 4, limit: 8}]}")
        + &job(
            "over-limit",
            "{queue: small, replicas: 2, gpusPerReplica: 8}",
        );
    let case = Case::new(&specs, &format!("nodes:\n{}", nodes("p", "H100", 2, &[])));
    assert_eq!(
        limits(&case.suggestions("over-limit")),
        vec![&Change::RaiseLimit {
            queue: "small".into(),
            model: "H100".into(),
            from: 8,
            to: 16
        }]
    );
    // And the simulation says no end of anything lets it run.
    let start = case.start("over-limit", Horizon::DEFAULT);
    assert_eq!(start.status, StartStatus::Never);
    assert!(
        start.text.starts_with("never, as the fleet is declared:"),
        "{}",
        start.text
    );
}

#[test]
fn a_limit_raise_that_would_not_place_the_job_is_not_suggested() {
    // The limit binds, but the only node is held by a job that cannot be
    // preempted: raising the limit alone places nothing.
    let specs = pool("p", "H100", 1)
        + "---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: pinned}\nspec: {value: 1000, preemptible: false}\n"
        + &queue("q", "{quota: [{model: H100, limit: 4}]}")
        + &queue("other", "{}")
        + &job(
            "wall",
            "{queue: other, gpusPerReplica: 8, priorityClass: pinned}",
        )
        + &job("j", "{queue: q, gpusPerReplica: 8}");
    let observed = format!(
        "nodes:\n{}running:\n  - {{job: wall, started: 2026-11-21T09:00:00Z, placement: [{{node: p-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}}]}}\n",
        nodes("p", "H100", 1, &[])
    );
    let case = Case::new(&specs, &observed);
    let s = case.suggestions("j");
    assert!(s.is_empty(), "none found: {s:?}");
    // `wall` has no time limit: no bound on when `j` starts.
    let start = case.start("j", Horizon::DEFAULT);
    assert_eq!(start.status, StartStatus::Unknown);
    assert_eq!(start.waits_for, vec!["wall".to_string()]);
    assert_eq!(start.text, "unknown: wall runs without a time limit");
}

#[test]
fn another_model_is_suggested_only_where_it_has_room() {
    let specs = pool("h", "H100", 1)
        + &pool("a", "A100", 1)
        + &pool("b", "B200", 1)
        + &queue("q", "{}")
        + &job("hold-h", "{queue: q, gpusPerReplica: 8, timeLimit: 1h}")
        + &job("hold-b", "{queue: q, gpusPerReplica: 8, timeLimit: 1h}")
        + &job("j", "{queue: q, gpusPerReplica: 8, gpu: {models: [H100]}}");
    let observed = format!(
        "nodes:\n{}{}{}running:\n  - {{job: hold-h, started: 2026-11-21T09:30:00Z, placement: [{{node: h-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}}]}}\n  - {{job: hold-b, started: 2026-11-21T09:30:00Z, placement: [{{node: b-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}}]}}\n",
        nodes("h", "H100", 1, &[]),
        nodes("a", "A100", 1, &[]),
        nodes("b", "B200", 1, &[])
    );
    let case = Case::new(&specs, &observed);
    let s = case.suggestions("j");
    let models: Vec<&Change> = s
        .iter()
        .flat_map(|s| &s.changes)
        .filter(|c| matches!(c, Change::AcceptModel { .. }))
        .collect();
    assert_eq!(
        models,
        vec![&Change::AcceptModel {
            job: "j".into(),
            model: "A100".into()
        }],
        "B200 is full, so it is not suggested"
    );
    // hold-h ends at its time limit, 10:30; then j starts on its GPUs.
    let start = case.start("j", Horizon::DEFAULT);
    assert_eq!(start.status, StartStatus::Expected);
    assert_eq!(start.at.as_deref(), Some("2026-11-21T10:30:00Z"));
    assert_eq!(start.waits_for, vec!["hold-h".to_string()]);
}

fn racks(zones: bool) -> Case {
    let specs = pool("p", "H100", 2)
        + &queue("q", "{}")
        + &job(
            "gang",
            "{queue: q, replicas: 2, gpusPerReplica: 8, topology: {required: rack}}",
        );
    let labels = if zones {
        ["{rack: r1, zone: z}", "{rack: r2, zone: z}"]
    } else {
        ["{rack: r1}", "{rack: r2}"]
    };
    Case::new(
        &specs,
        &format!("nodes:\n{}", nodes("p", "H100", 2, &labels)),
    )
}

#[test]
fn a_required_rack_widens_to_the_zone_when_that_is_enough() {
    let s = racks(true).suggestions("gang");
    assert_eq!(s.len(), 1, "{s:?}");
    let Change::Topology { to, .. } = &s[0].changes[0] else {
        panic!("{s:?}")
    };
    assert_eq!(to.required, Some(model::spec::TopologyLevel::Zone));
    assert_eq!(
        s[0].text,
        "relax topology from required rack to required zone"
    );
}

#[test]
fn a_required_rack_becomes_preferred_when_no_wider_domain_works() {
    let s = racks(false).suggestions("gang");
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(
        s[0].text,
        "relax topology from required rack to preferred rack"
    );
}

#[test]
fn a_higher_class_is_suggested_with_the_jobs_it_would_preempt() {
    let specs = pool("p", "H100", 1)
        + &queue("q", "{}")
        + &job(
            "low-run",
            "{queue: q, gpusPerReplica: 8, priorityClass: low}",
        )
        + &job("new", "{queue: q, gpusPerReplica: 8, priorityClass: low}");
    let observed = format!(
        "nodes:\n{}running:\n  - {{job: low-run, started: 2026-11-21T09:00:00Z, placement: [{{node: p-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}}]}}\n",
        nodes("p", "H100", 1, &[])
    );
    let case = Case::new(&specs, &observed);
    let s = case.suggestions("new");
    assert_eq!(s.len(), 1, "{s:?}");
    // The lowest class that works: normal, not high.
    assert_eq!(
        s[0].changes,
        vec![Change::PriorityClass {
            job: "new".into(),
            from: Some("low".into()),
            to: "normal".into(),
            value: 100
        }]
    );
    assert_eq!(s[0].preempts, vec!["low-run".to_string()]);
}

#[test]
fn expected_starts_follow_time_limits_in_one_simulation() {
    // r ends at 11:00 (2h from 09:00; first's class cannot preempt it);
    // second (lower class, behind first) waits for first's limit, 12:00.
    let specs = pool("p", "H100", 1)
        + &queue("q", "{}")
        // The simulator's own run length is not the fleet's: ignored.
        + "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: r, annotations: {gitfleet/sim-duration: 10m}}\n\
           spec: {queue: q, gpusPerReplica: 8, timeLimit: 2h}\n"
        + &job("first", "{queue: q, gpusPerReplica: 8, timeLimit: 1h}")
        + &job("second", "{queue: q, gpusPerReplica: 8, timeLimit: 1h, priorityClass: low}");
    let observed = format!(
        "nodes:\n{}running:\n  - {{job: r, started: 2026-11-21T09:00:00Z, placement: [{{node: p-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}}]}}\n",
        nodes("p", "H100", 1, &[])
    );
    let case = Case::new(&specs, &observed);
    let input = case.input();
    let plan = plan(&input);
    let starts = expected_starts(&input, &plan, None, Horizon::DEFAULT);
    let first = &starts["first"];
    assert_eq!(first.status, StartStatus::Expected);
    assert_eq!(first.at.as_deref(), Some("2026-11-21T11:00:00Z"));
    assert_eq!(first.waits_for, vec!["r".to_string()]);
    assert_eq!(
        first.text,
        "by 2026-11-21T11:00:00Z, when r ends (time limit or grace period)"
    );
    let second = &starts["second"];
    assert_eq!(second.at.as_deref(), Some("2026-11-21T12:00:00Z"));
    assert_eq!(second.waits_for, vec!["first".to_string()]);
    // A horizon short of 11:00 gives a lower bound instead.
    let short = Horizon {
        until: Duration::from_secs(1800),
        max_plans: 10,
    };
    let later = case.start("first", short);
    assert_eq!(later.status, StartStatus::Later);
    assert_eq!(later.at.as_deref(), Some("2026-11-21T10:30:00Z"));
}

#[test]
fn a_job_the_plan_already_preempts_for_gets_only_changes_that_place_it_at_once() {
    // `new` (normal) already preempts `low-run`: a higher class would only
    // preempt it too, which is no change.
    let specs = pool("p", "H100", 1)
        + &queue("q", "{}")
        + &job(
            "low-run",
            "{queue: q, gpusPerReplica: 8, priorityClass: low}",
        )
        + &job("new", "{queue: q, gpusPerReplica: 8, timeLimit: 1h}");
    let observed = format!(
        "nodes:\n{}running:\n  - {{job: low-run, started: 2026-11-21T09:00:00Z, placement: [{{node: p-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}}]}}\n",
        nodes("p", "H100", 1, &[])
    );
    let case = Case::new(&specs, &observed);
    assert!(case.suggestions("new").is_empty());
    // It starts when low-run's grace period (5m) ends.
    let start = case.start("new", Horizon::DEFAULT);
    assert_eq!(start.at.as_deref(), Some("2026-11-21T10:05:00Z"));
    assert_eq!(start.waits_for, vec!["low-run".to_string()]);
}
