//! What the reconciler remembers between iterations, as plain data. The
//! store (`super::Store`) keeps these as JSON values in redb tables (job
//! records without a stop, a nomination or an end in a compact form:
//! `super::compact`).

use serde::{Deserialize, Serialize};

use model::observed::{NodeGpus, Timestamp};
use model::plan::Action;

/// Where a job is in its life, as the reconciler knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Seen in Git, not running (waiting, or preempted and waiting again).
    Pending,
    /// Holding GPUs (also while a preemption's grace period or a stop runs).
    Running,
    /// Ended with exit code 0 (or its simulated duration passed).
    Succeeded,
    /// Ended with a non-zero exit code; not restarted blindly.
    Failed,
    /// Stopped by gitfleet: time limit, or removed from Git.
    Stopped,
}

impl Phase {
    /// Every phase, in life order.
    pub const ALL: [Phase; 5] = [
        Phase::Pending,
        Phase::Running,
        Phase::Succeeded,
        Phase::Failed,
        Phase::Stopped,
    ];

    /// The job has ended and will not run again under this name.
    pub fn is_final(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Stopped)
    }

    /// Lower-case name, as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "pending",
            Phase::Running => "running",
            Phase::Succeeded => "succeeded",
            Phase::Failed => "failed",
            Phase::Stopped => "stopped",
        }
    }
}

pub use exec::StopKind;

/// Everything known about one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRecord {
    /// The Job's name.
    pub job: String,
    /// Where it is now.
    pub phase: Phase,
    /// When the reconciler first saw it pending (its age in fair-share order).
    #[serde(with = "model::time::fast")]
    pub first_seen: Timestamp,
    /// When it started running (time limits count from here).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "model::time::fast::option"
    )]
    pub started: Option<Timestamp>,
    /// The GPUs it holds while running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<NodeGpus>,
    /// A stop under way: what kind and since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<Stopping>,
    /// GPUs freed by preemptions for this pending job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nominated: Vec<NodeGpus>,
    /// When it ended.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "model::time::fast::option"
    )]
    pub finished: Option<Timestamp>,
    /// Its exit code, when it ended by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Pending: the binding constraint; ended: how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The revision whose plan last changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// How many times it was preempted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preemptions: u32,
    /// Running: the `gitfleet/restart` annotation it started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
    /// Running: the runtime digest of the spec it started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_digest: Option<String>,
    /// The last stop a plan asked for (preempt, terminate, cancel): kept
    /// after the job is pending again or gone, so `status` and `explain` can
    /// say by whom, why and at which revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop: Option<LastStop>,
    /// The GPU-seconds it held in its runs that ended without ending it
    /// (preempted, restarted): whole seconds from `started` to the stop
    /// the executor reported × the GPUs held. Its attained service less
    /// the current run, which counts from `started` ([`JobRecord::attained_at`]);
    /// what the observed state's `attained` map gives `least-attained`
    /// queues. Dropped (0) when the job ends.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub attained: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// The story of a job's last stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastStop {
    /// `preempt`, `terminate` or `cancel`.
    pub kind: StopKind,
    /// When the plan's action was carried out.
    #[serde(with = "model::time::fast")]
    pub at: Timestamp,
    /// The revision whose plan asked for it.
    pub revision: String,
    /// The job a preemption made room for (the job itself for a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_job: Option<String>,
    /// The action's reason (`reclaim: queue vision is borrowing 8 H100`).
    pub reason: String,
}

impl LastStop {
    /// `preempted for b-1 at 2026-11-21T10:05:00Z (revision 3f2c1a9b): reclaim: …`.
    pub fn words(&self) -> String {
        let what = match (self.kind, &self.for_job) {
            (StopKind::Preempt, Some(f)) => format!("preempted for {f}"),
            (StopKind::Preempt, None) => "preempted".to_string(),
            (StopKind::Terminate, _) => "terminated".to_string(),
            (StopKind::Cancel, _) => "cancelled".to_string(),
        };
        let revision: String = self.revision.chars().take(12).collect();
        format!(
            "{what} at {} (revision {revision}): {}",
            self.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            self.reason
        )
    }
}

/// A stop under way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stopping {
    /// Why.
    pub kind: StopKind,
    /// When the signal was sent (a preemption's grace period counts from here).
    #[serde(with = "model::time::fast")]
    pub since: Timestamp,
    /// The job a preemption makes room for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_job: Option<String>,
}

impl JobRecord {
    /// A job seen for the first time, pending.
    pub fn new_pending(job: &str, now: Timestamp) -> Self {
        JobRecord {
            job: job.to_string(),
            phase: Phase::Pending,
            first_seen: now,
            started: None,
            placement: Vec::new(),
            stopping: None,
            nominated: Vec::new(),
            finished: None,
            exit_code: None,
            reason: None,
            revision: None,
            preemptions: 0,
            restart: None,
            spec_digest: None,
            last_stop: None,
            attained: 0,
        }
    }

    /// GPUs it holds.
    pub fn gpus(&self) -> usize {
        self.placement.iter().map(|p| p.gpus.len()).sum()
    }

    /// GPU-seconds of its current run at `at`: whole seconds since
    /// `started` × the GPUs it holds, as the engine counts a running job's
    /// attained service (0 when it does not run).
    fn current_run(&self, at: Timestamp) -> u64 {
        let Some(started) = self.started.filter(|_| self.phase == Phase::Running) else {
            return 0;
        };
        let secs = u64::try_from((at - started).num_seconds()).unwrap_or(0);
        secs.saturating_mul(self.gpus() as u64)
    }

    /// Its attained service at `now` in GPU-seconds: the runs that ended
    /// ([`JobRecord::attained`]) and the current one.
    pub fn attained_at(&self, now: Timestamp) -> u64 {
        self.attained.saturating_add(self.current_run(now))
    }

    /// Adds the current run, stopped at `at`, to [`JobRecord::attained`]
    /// (before the record forgets its start and GPUs).
    pub fn end_run(&mut self, at: Timestamp) {
        self.attained = self.attained_at(at);
    }
}

/// An action recorded before it is carried out; removed when done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intent {
    /// The revision whose plan asked for it.
    pub revision: String,
    /// When it was planned.
    #[serde(with = "model::time::fast")]
    pub time: Timestamp,
    /// The action.
    pub action: Action,
}

/// An [`Intent`] as recorded, borrowing its revision and action (a plan's
/// thousands of intents are not copied to be written): the same JSON.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct IntentRef<'a> {
    /// The revision whose plan asked for it.
    pub revision: &'a str,
    /// When it was planned.
    #[serde(serialize_with = "model::time::fast::serialize")]
    pub time: Timestamp,
    /// The action.
    pub action: &'a Action,
}

/// One line of the append-only audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When it happened (the reconciler's clock).
    #[serde(with = "model::time::fast")]
    pub time: Timestamp,
    /// The revision whose plan caused it (empty for events the fleet caused).
    pub revision: String,
    /// What happened: an action's type (`place`, `preempt`, …) or an event
    /// (`succeeded`, `failed`, `stopped`, `refused`).
    pub what: String,
    /// The job, node or pool concerned.
    pub subject: String,
    /// Details: the action's reason, an exit code, an error.
    pub detail: String,
}

/// The reconciler's bookkeeping about revisions (as Flux's status).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revisions {
    /// The last revision whose plan was carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied: Option<String>,
    /// The last revision tried (may be invalid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted: Option<String>,
    /// Why the last attempt was refused, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// A revision being loaded and planned for the first time; still set
    /// after a restart when the process died doing so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loading: Option<Loading>,
}

/// A revision on its way from Git to a first plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Loading {
    /// The revision.
    pub revision: String,
    /// How many times the process died while loading or planning it.
    pub interrupted: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_borrowed_is_written_as_one_owned() {
        let action = Action::Place {
            job: "j \"1\"".into(),
            placement: vec![NodeGpus {
                node: "n0".into(),
                gpus: vec![0, 1, 7],
            }],
            reason: "queue q: fits".into(),
        };
        let time: Timestamp = "2026-11-21T10:00:00.5Z".parse().unwrap();
        let owned = Intent {
            revision: "abc".into(),
            time,
            action: action.clone(),
        };
        let borrowed = IntentRef {
            revision: "abc",
            time,
            action: &action,
        };
        assert_eq!(
            serde_json::to_string(&[borrowed, borrowed]).unwrap(),
            serde_json::to_string(&[owned.clone(), owned]).unwrap()
        );
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn attained_service_counts_ended_runs_and_the_current_one() {
        let mut r = JobRecord::new_pending("a", t("2026-11-21T10:00:00Z"));
        let stored = serde_json::to_string(&r).unwrap();
        assert!(!stored.contains("attained"), "none: not stored");
        assert_eq!(serde_json::from_str::<JobRecord>(&stored).unwrap(), r);
        assert_eq!(r.attained_at(t("2026-11-21T11:00:00Z")), 0, "pending");
        r.phase = Phase::Running;
        r.started = Some(t("2026-11-21T10:00:00Z"));
        r.placement = vec![NodeGpus {
            node: "n".into(),
            gpus: vec![0, 1, 2],
        }];
        assert_eq!(
            r.attained_at(t("2026-11-21T10:00:10.9Z")),
            30,
            "whole seconds"
        );
        r.end_run(t("2026-11-21T10:01:00Z"));
        assert_eq!(r.attained, 180);
        // Placed again: the new run adds to the ended one.
        r.started = Some(t("2026-11-21T11:00:00Z"));
        assert_eq!(r.attained_at(t("2026-11-21T11:00:01Z")), 183);
        // A clock behind `started` adds nothing.
        assert_eq!(r.attained_at(t("2026-11-21T10:59:00Z")), 180);
        let stored = serde_json::to_string(&r).unwrap();
        assert!(stored.contains("\"attained\":180"), "{stored}");
        assert_eq!(serde_json::from_str::<JobRecord>(&stored).unwrap(), r);
    }
}
