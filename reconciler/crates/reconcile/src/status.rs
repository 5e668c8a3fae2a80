//! The reconciler's status as a document: what `gitfleet status` prints and
//! what the loop writes to `status.json` in the state directory after every
//! iteration (the database is locked by the running reconciler; the file can
//! be read at any time).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{ActionResult, Iteration};
use crate::state::{JobRecord, Phase, Revisions};
use model::observed::Timestamp;
use model::plan::placement_short;

/// The file the loop writes in the state directory.
pub const STATUS_FILE: &str = "status.json";

/// The reconciler's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// When the last iteration ran (the reconciler's clock).
    pub time: Timestamp,
    /// `sim`, `local`, ….
    pub executor: String,
    /// The last applied and last attempted revisions, and why the last
    /// attempt was refused.
    pub revisions: Revisions,
    /// Job counts by phase (`pending`, `running`, `succeeded`, `failed`, `stopped`).
    pub jobs: BTreeMap<String, u64>,
    /// GPU totals.
    pub gpus: GpuTotals,
    /// Every job that is not finished, then finished ones, by name (shared:
    /// the loop's statuses of iterations that changed no job share it).
    pub job_list: Arc<Vec<JobLine>>,
    /// The last iteration.
    pub last_iteration: IterationSummary,
}

/// GPU totals of the fleet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuTotals {
    /// GPUs on ready nodes.
    pub total: u64,
    /// GPUs held by running jobs.
    pub allocated: u64,
    /// Unhealthy GPUs.
    pub unhealthy: u64,
    /// allocated ÷ total, in percent.
    pub utilization_percent: f64,
}

/// One job in the status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobLine {
    /// Name.
    pub job: String,
    /// Phase.
    pub phase: Phase,
    /// Where it runs (`node:gpu0-7, …`), when running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// Why it is pending, or how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A stop under way (`preempt`, `terminate`, `cancel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<String>,
    /// How many times it was preempted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preemptions: u32,
    /// Its last stop: by whom, why, at which revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop: Option<crate::state::LastStop>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What the last iteration did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IterationSummary {
    /// Wall time it took, in milliseconds.
    pub duration_ms: f64,
    /// Actions carried out, by type.
    pub actions: BTreeMap<String, u64>,
    /// Actions that failed.
    pub failed_actions: u64,
    /// Events the fleet reported (jobs ended or stopped).
    pub events: u64,
    /// Intents recovered after a crash.
    pub recovered: u64,
}

impl IterationSummary {
    /// What `iteration` did, having taken `duration_ms`.
    pub fn of(iteration: &Iteration, duration_ms: f64) -> IterationSummary {
        let mut actions: BTreeMap<String, u64> = BTreeMap::new();
        let mut failed_actions = 0;
        for done in &iteration.executed {
            match done.result {
                ActionResult::Applied(_) => {
                    *actions.entry(done.action.kind().to_string()).or_default() += 1
                }
                ActionResult::Failed(_) => failed_actions += 1,
                ActionResult::AlreadyUnderway => {}
            }
        }
        IterationSummary {
            duration_ms: (duration_ms * 100.0).round() / 100.0,
            actions,
            failed_actions,
            events: iteration.events.len() as u64,
            recovered: iteration.recovered as u64,
        }
    }
}

impl Status {
    /// The status after `iteration`, from the job records.
    pub fn new(
        iteration: &Iteration,
        executor: &str,
        revisions: Revisions,
        records: &BTreeMap<String, JobRecord>,
        duration_ms: f64,
    ) -> Status {
        // Counted by phase first: no name allocated per record.
        let mut counts = [0u64; Phase::ALL.len()];
        for record in records.values() {
            if let Some(k) = Phase::ALL.iter().position(|p| *p == record.phase) {
                counts[k] += 1;
            }
        }
        let jobs: BTreeMap<String, u64> = Phase::ALL
            .iter()
            .zip(counts)
            .map(|(phase, n)| (phase.as_str().to_string(), n))
            .collect();
        let allocated: u64 = records
            .values()
            .filter(|r| r.phase == Phase::Running)
            .map(|r| r.gpus() as u64)
            .sum();
        let (total, unhealthy) = iteration
            .plan
            .as_ref()
            .map(|p| (p.summary.gpus, p.summary.unhealthy_gpus))
            .unwrap_or_default();
        let mut job_list: Vec<JobLine> = records
            .values()
            .map(|r| JobLine {
                job: r.job.clone(),
                phase: r.phase,
                placement: (!r.placement.is_empty()).then(|| placement_short(&r.placement)),
                reason: r.reason.clone(),
                stopping: r.stopping.as_ref().map(|s| s.kind.as_str().to_string()),
                preemptions: r.preemptions,
                last_stop: r.last_stop.clone(),
            })
            .collect();
        // Records come by name: then a stable sort by the flag alone is the
        // order by (final, name), with one pass of name comparisons.
        if job_list.is_sorted_by(|a, b| a.job <= b.job) {
            job_list.sort_by_key(|l| l.phase.is_final());
        } else {
            job_list
                .sort_by(|a, b| (a.phase.is_final(), &a.job).cmp(&(b.phase.is_final(), &b.job)));
        }
        Status {
            time: iteration.time,
            executor: executor.to_string(),
            revisions,
            jobs,
            gpus: GpuTotals {
                total,
                allocated,
                unhealthy,
                utilization_percent: if total == 0 {
                    0.0
                } else {
                    (allocated as f64 * 1000.0 / total as f64).round() / 10.0
                },
            },
            job_list: Arc::new(job_list),
            last_iteration: IterationSummary::of(iteration, duration_ms),
        }
    }

    /// Writes the status to `dir/status.json` atomically (write, then rename).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        crate::recorded::write_pieces(dir, STATUS_FILE, &[&self.to_json()?, "\n"])
    }

    /// The text of `status.json` (without its final newline).
    pub fn to_json(&self) -> std::io::Result<String> {
        serde_json::to_string_pretty(self).map_err(std::io::Error::other)
    }

    /// Reads `dir/status.json`.
    pub fn read(dir: &Path) -> std::io::Result<Status> {
        let text = std::fs::read_to_string(dir.join(STATUS_FILE))?;
        serde_json::from_str(&text).map_err(std::io::Error::other)
    }

    /// For people: revisions, totals, then jobs.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let rev = |r: &Option<String>| {
            r.as_deref()
                .map(|id| git::short_id(id).to_string())
                .unwrap_or_else(|| "none".to_string())
        };
        let _ = writeln!(
            out,
            "time:          {}",
            self.time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        let _ = writeln!(out, "executor:      {}", self.executor);
        let _ = writeln!(out, "applied:       {}", rev(&self.revisions.last_applied));
        let _ = writeln!(
            out,
            "attempted:     {}",
            rev(&self.revisions.last_attempted)
        );
        if let Some(error) = &self.revisions.last_error {
            let _ = writeln!(
                out,
                "refused:       {}",
                error.replace('\n', "\n               ")
            );
        }
        let counts: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(phase, n)| format!("{n} {phase}"))
            .collect();
        let _ = writeln!(
            out,
            "jobs:          {}",
            if counts.is_empty() {
                "none".to_string()
            } else {
                counts.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "gpus:          {}/{} allocated ({}%), {} unhealthy",
            self.gpus.allocated,
            self.gpus.total,
            self.gpus.utilization_percent,
            self.gpus.unhealthy
        );
        let _ = writeln!(out, "iteration:     {} ms", self.last_iteration.duration_ms);
        if !self.job_list.is_empty() {
            out.push('\n');
            let width = self.job_list.iter().map(|j| j.job.len()).max().unwrap_or(0);
            for job in self.job_list.iter() {
                let detail = match (&job.placement, &job.reason, &job.stopping) {
                    (Some(p), _, Some(s)) => format!("{p} ({s} under way)"),
                    (Some(p), _, None) => p.clone(),
                    (None, Some(r), _) => r.clone(),
                    (None, None, _) => String::new(),
                };
                let _ = writeln!(
                    out,
                    "  {:<width$}  {:<9}  {detail}",
                    job.job,
                    job.phase.as_str()
                );
                // A job not running now says how it was stopped last.
                if job.placement.is_none()
                    && let Some(stop) = &job.last_stop
                {
                    let _ = writeln!(out, "  {:<width$}  {:<9}  last: {}", "", "", stop.words());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(job: &str, phase: Phase) -> (String, JobRecord) {
        let mut r = JobRecord::new_pending(job, chrono::DateTime::UNIX_EPOCH);
        r.phase = phase;
        (job.to_string(), r)
    }

    fn iteration() -> Iteration {
        Iteration {
            time: chrono::DateTime::UNIX_EPOCH,
            revision: None,
            refused: None,
            plan: None,
            reused: false,
            events: Vec::new(),
            executed: Vec::new(),
            recovered: 0,
            nodes: Default::default(),
            config: Vec::new(),
            plan_seconds: None,
            planned_from: Default::default(),
            phases: Default::default(),
        }
    }

    #[test]
    fn jobs_are_counted_by_phase_and_listed_live_first_by_name() {
        let records: BTreeMap<String, JobRecord> = [
            record("a-done", Phase::Succeeded),
            record("b-run", Phase::Running),
            record("c-failed", Phase::Failed),
            record("d-wait", Phase::Pending),
            record("e-run", Phase::Running),
        ]
        .into();
        let status = Status::new(&iteration(), "sim", Revisions::default(), &records, 1.0);
        let order: Vec<&str> = status.job_list.iter().map(|l| l.job.as_str()).collect();
        assert_eq!(order, ["b-run", "d-wait", "e-run", "a-done", "c-failed"]);
        let counts: Vec<(&str, u64)> = status.jobs.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        let mut expected: Vec<(&str, u64)> = Phase::ALL
            .iter()
            .map(|p| {
                let n = match p {
                    Phase::Running => 2,
                    Phase::Pending | Phase::Succeeded | Phase::Failed => 1,
                    Phase::Stopped => 0,
                };
                (p.as_str(), n)
            })
            .collect();
        expected.sort();
        assert_eq!(counts, expected);
    }
}
