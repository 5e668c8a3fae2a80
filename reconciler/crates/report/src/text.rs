//! `gitfleet plan -o text`.

use std::fmt::Write;

use super::{action_counts, drift_target};
use model::plan::{Plan, Wording};

/// The plan for a terminal: a legend, one line per action, pending jobs with
/// their reasons, and a summary line.
pub fn plan_text(plan: &Plan, source: &str) -> String {
    let mut out = String::new();
    let rev = plan
        .revision
        .as_deref()
        .map(|r| format!(" @ {}", &r[..r.len().min(12)]))
        .unwrap_or_default();
    let _ = writeln!(out, "gitfleet plan for {source}{rev} at {}", plan.time);
    let _ = writeln!(
        out,
        "Symbols: + place  - preempt  ~ scale  ! drain  x terminate/cancel\n"
    );
    if plan.actions.is_empty() {
        let _ = writeln!(out, "No changes. The fleet matches the specs.");
    } else {
        let width = plan
            .actions
            .iter()
            .map(|a| a.target().len())
            .max()
            .unwrap_or(0);
        for action in &plan.actions {
            let _ = writeln!(
                out,
                "  {} {:<9} {:<width$}  {}",
                action.symbol(),
                action.kind(),
                action.target(),
                action.describe(Wording::Details)
            );
        }
    }
    if !plan.drift.is_empty() {
        let _ = writeln!(out, "\nDrift ({}):", plan.drift.len());
        let targets: Vec<String> = plan.drift.iter().map(drift_target).collect();
        let width = targets.iter().map(String::len).max().unwrap_or(0);
        for (d, target) in plan.drift.iter().zip(&targets) {
            let _ = writeln!(
                out,
                "  {target:<width$}  {:<15}  {} → {}",
                d.kind.as_str(),
                d.reason,
                d.action.as_str()
            );
        }
    }
    if !plan.pending.is_empty() {
        let _ = writeln!(out, "\nPending ({}):", plan.pending.len());
        let width = plan.pending.iter().map(|p| p.job.len()).max().unwrap_or(0);
        for p in &plan.pending {
            let _ = writeln!(out, "  {:<width$}  {}", p.job, p.reason);
        }
    }
    let s = &plan.summary;
    let _ = writeln!(
        out,
        "\nPlan: {}; {} pending. GPUs: {} allocated of {}{}.",
        action_counts(plan),
        s.pending_jobs,
        s.allocated,
        s.gpus,
        if s.unhealthy_gpus > 0 {
            format!(", {} unhealthy", s.unhealthy_gpus)
        } else {
            String::new()
        }
    );
    out
}
