//! What a change of specs does to scheduling: the plan at the base revision
//! against the plan at the new one, both computed from the same observed
//! state. Jobs newly placed, newly pending (with the reason), newly
//! preempted, and scaling or drains that change.

use std::collections::BTreeMap;

use serde::Serialize;

use model::observed::NodeGpus;
use model::plan::{Action, Plan, Summary, Wording, placement_short};

use crate::queue_totals::{QueueChange, QueueTotals, queue_changes};

/// What one plan does with a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum JobOutcome {
    /// Not mentioned by the plan: running undisturbed, or not a job at all.
    None,
    /// Placed on these GPUs.
    Placed {
        /// GPUs per node, one entry per replica.
        placement: Vec<NodeGpus>,
    },
    /// Left pending.
    Pending {
        /// The binding constraint.
        reason: String,
    },
    /// Preempted for another job.
    Preempted {
        /// The preemptor.
        #[serde(rename = "for")]
        for_job: String,
    },
    /// Terminated (time limit).
    Terminated,
    /// Cancelled (removed from Git).
    Cancelled,
}

impl JobOutcome {
    fn words(&self) -> String {
        match self {
            JobOutcome::None => "no action".to_string(),
            JobOutcome::Placed { placement } => format!("placed on {}", placement_short(placement)),
            JobOutcome::Pending { reason } => format!("pending: {reason}"),
            JobOutcome::Preempted { for_job } => format!("preempted for {for_job}"),
            JobOutcome::Terminated => "terminated".to_string(),
            JobOutcome::Cancelled => "cancelled".to_string(),
        }
    }

    fn state(&self) -> &'static str {
        match self {
            JobOutcome::None => "none",
            JobOutcome::Placed { .. } => "placed",
            JobOutcome::Pending { .. } => "pending",
            JobOutcome::Preempted { .. } => "preempted",
            JobOutcome::Terminated => "terminated",
            JobOutcome::Cancelled => "cancelled",
        }
    }
}

/// A job whose outcome differs between the two plans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobChange {
    /// Job name.
    pub job: String,
    /// Its leaf queue, when a plan names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// At the base revision.
    pub before: JobOutcome,
    /// At the new revision.
    pub after: JobOutcome,
    /// In words: `job a newly pending: queue nlp: …`.
    pub text: String,
}

impl JobChange {
    /// Whether the job is placed in both plans, only on other GPUs (a side
    /// effect of best fit that reports list by name only).
    pub fn placed_elsewhere(&self) -> bool {
        matches!(
            (&self.before, &self.after),
            (JobOutcome::Placed { .. }, JobOutcome::Placed { .. })
        )
    }
}

/// A pool, node or other target whose action differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetChange {
    /// `scale`, `drain`.
    pub action: String,
    /// The pool or node.
    pub target: String,
    /// What the base plan did (`2 → 4 nodes`), absent when nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// What the new plan does, absent when nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// In words: `pool p scales 2 → 4 nodes (was no scaling)`.
    pub text: String,
}

/// Counts of the changes, for summary lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlanDiffSummary {
    /// Jobs placed now that were not.
    pub newly_placed: usize,
    /// Jobs pending now that were not.
    pub newly_pending: usize,
    /// Jobs preempted now that were not.
    pub newly_preempted: usize,
    /// Jobs placed in both plans, on other GPUs.
    pub placed_elsewhere: usize,
    /// Other job changes (reason changed, no longer pending…).
    pub other_job_changes: usize,
    /// Pools whose scaling changes, nodes whose drain changes.
    pub target_changes: usize,
    /// Newly pending jobs by leaf queue (queue → count), sorted by queue.
    pub newly_pending_by_queue: BTreeMap<String, usize>,
}

/// The scheduling consequences of a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanDiff {
    /// Counts.
    pub summary: PlanDiffSummary,
    /// Jobs whose outcome differs, by name.
    pub jobs: Vec<JobChange>,
    /// Scaling and drains that differ, by action and target.
    pub targets: Vec<TargetChange>,
    /// Totals of the base plan.
    pub before: Summary,
    /// Totals of the new plan.
    pub after: Summary,
    /// Each leaf queue's GPUs and pending jobs in both plans, in natural
    /// order; empty unless filled in with [`PlanDiff::with_queues`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueChange>,
}

impl PlanDiff {
    /// This difference with each queue's totals in both plans (see
    /// [`crate::queue_totals::queue_totals`]).
    pub fn with_queues(
        mut self,
        before: &BTreeMap<String, QueueTotals>,
        after: &BTreeMap<String, QueueTotals>,
    ) -> Self {
        self.queues = queue_changes(before, after);
        self
    }

    /// Whether the two plans decide anything differently.
    pub fn has_changes(&self) -> bool {
        !self.jobs.is_empty() || !self.targets.is_empty()
    }

    /// `2 newly placed, 3 newly pending (vision 3), 1 scaling change` or
    /// `no scheduling changes`.
    pub fn words(&self) -> String {
        let s = &self.summary;
        let mut parts = Vec::new();
        if s.newly_placed > 0 {
            parts.push(format!("{} newly placed", s.newly_placed));
        }
        if s.newly_pending > 0 {
            let by_queue: Vec<String> = s
                .newly_pending_by_queue
                .iter()
                .map(|(q, n)| format!("{q} {n}"))
                .collect();
            let detail = if by_queue.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_queue.join(", "))
            };
            parts.push(format!("{} newly pending{detail}", s.newly_pending));
        }
        if s.newly_preempted > 0 {
            parts.push(format!("{} newly preempted", s.newly_preempted));
        }
        if s.placed_elsewhere > 0 {
            parts.push(format!("{} placed on other GPUs", s.placed_elsewhere));
        }
        if s.other_job_changes > 0 {
            parts.push(format!(
                "{} other job change{}",
                s.other_job_changes,
                plural(s.other_job_changes)
            ));
        }
        if s.target_changes > 0 {
            parts.push(format!(
                "{} scaling/drain change{}",
                s.target_changes,
                plural(s.target_changes)
            ));
        }
        if parts.is_empty() {
            "no scheduling changes".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// `GPUs allocated 900 → 936 of 1000, pending jobs 3 → 2`.
    pub fn totals_words(&self) -> String {
        let (b, a) = (&self.before, &self.after);
        let gpus = if b.gpus == a.gpus {
            format!("of {}", a.gpus)
        } else {
            format!("of {} → {}", b.gpus, a.gpus)
        };
        format!(
            "GPUs allocated {} → {} {gpus}, pending jobs {} → {}",
            b.allocated, a.allocated, b.pending_jobs, a.pending_jobs
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Compares the plan at the base revision with the plan at the new one.
pub fn diff_plans(before: &Plan, after: &Plan) -> PlanDiff {
    let (jobs_before, queues_before) = job_outcomes(before);
    let (jobs_after, queues_after) = job_outcomes(after);
    let mut names: Vec<&String> = jobs_before.keys().chain(jobs_after.keys()).collect();
    names.sort();
    names.dedup();
    let mut summary = PlanDiffSummary::default();
    let mut jobs = Vec::new();
    for name in names {
        let b = jobs_before.get(name).cloned().unwrap_or(JobOutcome::None);
        let a = jobs_after.get(name).cloned().unwrap_or(JobOutcome::None);
        if b == a {
            continue;
        }
        let queue = queues_after
            .get(name)
            .or_else(|| queues_before.get(name))
            .cloned();
        let newly = b.state() != a.state();
        match &a {
            JobOutcome::Placed { .. } if newly => summary.newly_placed += 1,
            JobOutcome::Pending { .. } if newly => {
                summary.newly_pending += 1;
                if let Some(q) = &queue {
                    *summary.newly_pending_by_queue.entry(q.clone()).or_default() += 1;
                }
            }
            JobOutcome::Preempted { .. } if newly => summary.newly_preempted += 1,
            JobOutcome::Placed { .. } => summary.placed_elsewhere += 1,
            _ => summary.other_job_changes += 1,
        }
        let text = job_text(name, &b, &a);
        jobs.push(JobChange {
            job: name.clone(),
            queue,
            before: b,
            after: a,
            text,
        });
    }
    let targets = target_changes(before, after);
    summary.target_changes = targets.len();
    PlanDiff {
        summary,
        jobs,
        targets,
        before: before.summary.clone(),
        after: after.summary.clone(),
        queues: Vec::new(),
    }
}

fn job_text(name: &str, before: &JobOutcome, after: &JobOutcome) -> String {
    let was = match before {
        JobOutcome::None => String::new(),
        other => format!(" (was {})", other.words()),
    };
    match (before, after) {
        (JobOutcome::Pending { .. }, JobOutcome::Pending { reason }) => {
            format!("job {name} still pending, now: {reason}")
        }
        (JobOutcome::Placed { placement: old }, JobOutcome::Placed { placement }) => format!(
            "job {name} placed on {} instead of {}",
            placement_short(placement),
            placement_short(old)
        ),
        (_, JobOutcome::None) => format!("job {name} no longer {}", before.words()),
        (_, JobOutcome::Placed { placement }) => {
            format!(
                "job {name} newly placed on {}{was}",
                placement_short(placement)
            )
        }
        (_, JobOutcome::Pending { reason }) => format!("job {name} newly pending: {reason}{was}"),
        (_, JobOutcome::Preempted { for_job }) if for_job == name => {
            format!("job {name} newly restarted (preempted for itself){was}")
        }
        (_, other) => format!("job {name} newly {}{was}", other.words()),
    }
}

/// Each job's outcome in a plan, and the queues the plan names.
fn job_outcomes(plan: &Plan) -> (BTreeMap<String, JobOutcome>, BTreeMap<String, String>) {
    let mut outcomes = BTreeMap::new();
    let mut queues = BTreeMap::new();
    for action in &plan.actions {
        let (job, outcome) = match action {
            Action::Place { job, placement, .. } => (
                job,
                JobOutcome::Placed {
                    placement: placement.clone(),
                },
            ),
            Action::Preempt { job, for_job, .. } => (
                job,
                JobOutcome::Preempted {
                    for_job: for_job.clone(),
                },
            ),
            Action::Terminate { job, .. } => (job, JobOutcome::Terminated),
            Action::Cancel { job, .. } => (job, JobOutcome::Cancelled),
            Action::Scale { .. } | Action::Drain { .. } => continue,
        };
        outcomes.insert(job.clone(), outcome);
    }
    for p in &plan.pending {
        outcomes.insert(
            p.job.to_string(),
            JobOutcome::Pending {
                reason: p.reason.to_string(),
            },
        );
        if let Some(q) = &p.queue {
            queues.insert(p.job.to_string(), q.to_string());
        }
    }
    (outcomes, queues)
}

/// Scale and drain actions by `(action, target)`: what each changes (a
/// drain, its reason).
fn target_actions(plan: &Plan) -> BTreeMap<(&'static str, String), String> {
    plan.actions
        .iter()
        .filter(|a| matches!(a, Action::Scale { .. } | Action::Drain { .. }))
        .map(|a| {
            (
                (a.kind(), a.target().to_string()),
                a.describe(Wording::Change),
            )
        })
        .collect()
}

fn target_changes(before: &Plan, after: &Plan) -> Vec<TargetChange> {
    let b = target_actions(before);
    let a = target_actions(after);
    let mut keys: Vec<&(&'static str, String)> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| b.get(*k) != a.get(*k))
        .map(|key| {
            let (action, target) = key;
            let (bv, av) = (b.get(key).cloned(), a.get(key).cloned());
            let text = match (*action, &bv, &av) {
                ("scale", None, Some(now)) => {
                    format!("pool {target} scales {now} (was no scaling)")
                }
                ("scale", Some(was), None) => format!("pool {target} no longer scales (was {was})"),
                ("scale", Some(was), Some(now)) => {
                    format!("pool {target} scales {now} (was {was})")
                }
                (_, None, Some(now)) => format!("node {target} newly drained: {now}"),
                (_, Some(_), None) => format!("node {target} no longer drained"),
                (_, _, now) => format!("node {target} drained: {}", now.as_deref().unwrap_or("")),
            };
            TargetChange {
                action: action.to_string(),
                target: target.clone(),
                before: bv,
                after: av,
                text,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::plan::Pending;

    fn plan(actions: Vec<Action>, pending: Vec<Pending>) -> Plan {
        // through JSON, so fields added to the plan later need no change here
        serde_json::from_value(serde_json::json!({
            "revision": null,
            "time": "2026-11-21T10:00:00Z",
            "actions": actions,
            "pending": pending,
            "summary": Summary::default(),
        }))
        .unwrap()
    }

    fn place(job: &str, node: &str) -> Action {
        Action::Place {
            job: job.into(),
            placement: vec![NodeGpus {
                node: node.into(),
                gpus: vec![0, 1],
            }],
            reason: "r".into(),
        }
    }

    fn pending(job: &str, reason: &str) -> Pending {
        Pending {
            job: job.into(),
            reason: reason.into(),
            queue: Some("vision".into()),
            waiting_for: Some("quota".into()),
        }
    }

    #[test]
    fn outcomes_that_change_are_listed_in_words() {
        let before = plan(
            vec![
                place("a", "n0"),
                place("b", "n1"),
                place("m", "n2"),
                Action::Scale {
                    pool: "p".into(),
                    from: 2,
                    to: 4,
                    reason: "r".into(),
                    nodes: vec![],
                },
            ],
            vec![pending("c", "no GPUs"), pending("d", "quota")],
        );
        let after = plan(
            vec![
                place("c", "n1"),
                place("m", "n3"),
                Action::Preempt {
                    job: "x".into(),
                    for_job: "c".into(),
                    reason: "r".into(),
                },
            ],
            vec![
                pending("a", "queue vision: 2 left"),
                pending("d", "quota again"),
            ],
        );
        let d = diff_plans(&before, &after);
        let texts: Vec<&str> = d.jobs.iter().map(|j| j.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "job a newly pending: queue vision: 2 left (was placed on n0:gpu0-1)",
                "job b no longer placed on n1:gpu0-1",
                "job c newly placed on n1:gpu0-1 (was pending: no GPUs)",
                "job d still pending, now: quota again",
                "job m placed on n3:gpu0-1 instead of n2:gpu0-1",
                "job x newly preempted for c",
            ]
        );
        assert_eq!(
            d.targets[0].text,
            "pool p no longer scales (was 2 → 4 nodes)"
        );
        assert_eq!(
            d.words(),
            "1 newly placed, 1 newly pending (vision 1), 1 newly preempted, \
             1 placed on other GPUs, 2 other job changes, 1 scaling/drain change"
        );
        assert!(d.has_changes());
        assert!(!diff_plans(&after, &after).has_changes());
    }
}
