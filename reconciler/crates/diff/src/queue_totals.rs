//! Each leaf queue's GPUs and pending jobs after a plan, and how they differ
//! between the plan at the base revision and the one at the new revision
//! (the per-queue table and chart of the pull-request comment).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use model::observed::ObservedState;
use model::plan::{Action, Plan};
use model::spec::Fleet;
use model::text::natural_cmp;

/// A queue's GPUs and pending jobs after one plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueTotals {
    /// GPUs its jobs hold after the plan: running jobs the plan keeps, plus
    /// the jobs it places.
    pub gpus: u64,
    /// Jobs the plan leaves pending.
    pub pending: u64,
}

/// One leaf queue in both plans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueChange {
    /// The leaf queue.
    pub queue: String,
    /// GPUs held after the base plan.
    pub gpus_before: u64,
    /// GPUs held after the new plan.
    pub gpus_after: u64,
    /// Pending jobs after the base plan.
    pub pending_before: u64,
    /// Pending jobs after the new plan.
    pub pending_after: u64,
}

impl QueueChange {
    /// Whether the two plans leave the queue alike.
    pub fn is_unchanged(&self) -> bool {
        self.gpus_before == self.gpus_after && self.pending_before == self.pending_after
    }
}

/// Each leaf queue's totals after `plan`, computed from the fleet the plan
/// was made for (which job is in which queue) and the observed state it
/// started from (what runs). Jobs the plan preempts, terminates or cancels
/// no longer count; jobs of no queue in `fleet` are left out.
pub fn queue_totals(
    fleet: &Fleet,
    observed: &ObservedState,
    plan: &Plan,
) -> BTreeMap<String, QueueTotals> {
    let queue_of: HashMap<&str, &str> = fleet
        .jobs
        .iter()
        .map(|j| (j.metadata.name.as_str(), j.spec.queue.as_str()))
        .collect();
    let mut totals: BTreeMap<String, QueueTotals> = BTreeMap::new();
    let mut stopped: HashSet<&str> = HashSet::new();
    let mut placed: HashSet<&str> = HashSet::new();
    for action in &plan.actions {
        match action {
            Action::Preempt { job, .. }
            | Action::Terminate { job, .. }
            | Action::Cancel { job, .. } => {
                stopped.insert(job);
            }
            Action::Place { job, placement, .. } => {
                placed.insert(job);
                if let Some(queue) = queue_of.get(job.as_str()) {
                    let gpus: usize = placement.iter().map(|p| p.gpus.len()).sum();
                    totals.entry((*queue).to_string()).or_default().gpus += gpus as u64;
                }
            }
            Action::Scale { .. } | Action::Drain { .. } => {}
        }
    }
    for run in &observed.running {
        let job = run.job.as_str();
        if stopped.contains(job) || placed.contains(job) {
            continue;
        }
        if let Some(queue) = queue_of.get(job) {
            let gpus: usize = run.placement.iter().map(|p| p.gpus.len()).sum();
            totals.entry((*queue).to_string()).or_default().gpus += gpus as u64;
        }
    }
    for pending in &plan.pending {
        let queue = pending
            .queue
            .as_deref()
            .or_else(|| queue_of.get(&*pending.job).copied());
        if let Some(queue) = queue {
            totals.entry(queue.to_string()).or_default().pending += 1;
        }
    }
    totals
}

/// Every queue of either side, in natural order (`q2` before `q10`).
pub fn queue_changes(
    before: &BTreeMap<String, QueueTotals>,
    after: &BTreeMap<String, QueueTotals>,
) -> Vec<QueueChange> {
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort_by(|a, b| natural_cmp(a, b));
    names.dedup();
    names
        .into_iter()
        .map(|queue| {
            let b = before.get(queue).copied().unwrap_or_default();
            let a = after.get(queue).copied().unwrap_or_default();
            QueueChange {
                queue: queue.clone(),
                gpus_before: b.gpus,
                gpus_after: a.gpus,
                pending_before: b.pending,
                pending_after: a.pending,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use load::{SourceFile, load_fleet};

    const FLEET: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec: {gpu: {model: H100, count: 8}, size: {min: 2, max: 2}}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: org}
spec: {quota: [{model: H100, guaranteed: 16}]}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q2}
spec: {parent: org, quota: [{model: H100, guaranteed: 8}]}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q10}
spec: {parent: org, quota: [{model: H100, guaranteed: 8}]}
";

    fn job(name: &str, queue: &str) -> String {
        format!(
            "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\n\
             spec: {{queue: {queue}, gpusPerReplica: 2}}\n"
        )
    }

    #[test]
    fn a_queue_holds_what_runs_on_and_what_is_placed_less_what_stops() {
        let yaml = [
            FLEET.to_string(),
            job("kept", "q2"),
            job("preempted", "q2"),
            job("placed", "q10"),
            job("waiting", "q10"),
        ]
        .concat();
        let loaded = load_fleet(&[SourceFile::new("f.yaml", yaml)]);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        let observed: ObservedState = serde_json::from_value(serde_json::json!({
            "nodes": [],
            "running": [
                {"job": "kept", "started": "2026-01-01T00:00:00Z",
                 "placement": [{"node": "p-0", "gpus": [0, 1]}]},
                {"job": "preempted", "started": "2026-01-01T00:00:00Z",
                 "placement": [{"node": "p-0", "gpus": [2, 3]}]},
                {"job": "gone", "started": "2026-01-01T00:00:00Z",
                 "placement": [{"node": "p-1", "gpus": [0, 1]}]},
            ],
        }))
        .unwrap();
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "revision": null,
            "time": "2026-01-01T00:00:00Z",
            "actions": [
                {"type": "place", "job": "placed", "reason": "r",
                 "placement": [{"node": "p-1", "gpus": [2, 3]}]},
                {"type": "preempt", "job": "preempted", "for": "placed", "reason": "r"},
                {"type": "cancel", "job": "gone", "reason": "removed from Git"},
            ],
            "pending": [{"job": "waiting", "reason": "r", "queue": "q10"}],
            "summary": model::plan::Summary::default(),
        }))
        .unwrap();
        let after = queue_totals(&loaded.fleet, &observed, &plan);
        assert_eq!(
            after["q2"],
            QueueTotals {
                gpus: 2,
                pending: 0
            }
        );
        assert_eq!(
            after["q10"],
            QueueTotals {
                gpus: 2,
                pending: 1
            }
        );
        // the base plan did nothing: everything running counts
        let idle = Plan {
            actions: vec![],
            pending: vec![],
            ..plan
        };
        let before = queue_totals(&loaded.fleet, &observed, &idle);
        assert_eq!(
            before["q2"],
            QueueTotals {
                gpus: 4,
                pending: 0
            }
        );
        assert!(!before.contains_key("q10"));
        let rows = queue_changes(&before, &after);
        let names: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
        assert_eq!(names, ["q2", "q10"], "natural order");
        assert_eq!(
            rows[1],
            QueueChange {
                queue: "q10".into(),
                gpus_before: 0,
                gpus_after: 2,
                pending_before: 0,
                pending_after: 1,
            }
        );
        assert!(!rows[0].is_unchanged());
    }
}
