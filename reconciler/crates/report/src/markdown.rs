//! `gitfleet plan -o markdown`: a pull-request comment.

use std::fmt::Write;

use super::{action_counts, drift_target};
use model::plan::{Plan, Wording};

/// The plan as Markdown: a summary line first, then tables of actions and
/// pending jobs in collapsible blocks.
pub fn plan_markdown(plan: &Plan, source: &str) -> String {
    let mut out = String::new();
    let s = &plan.summary;
    let _ = writeln!(
        out,
        "### gitfleet plan: {}; {} pending\n",
        action_counts(plan),
        s.pending_jobs
    );
    let rev = plan
        .revision
        .as_deref()
        .map(|r| format!(" at `{}`", &r[..r.len().min(12)]))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "`{source}`{rev}, {}: {} of {} GPUs allocated after the plan.\n",
        plan.time, s.allocated, s.gpus
    );
    if !plan.actions.is_empty() {
        let _ = writeln!(
            out,
            "<details open><summary>Actions ({})</summary>\n",
            plan.actions.len()
        );
        let _ = writeln!(out, "| | action | target | details |\n|---|---|---|---|");
        for action in &plan.actions {
            let _ = writeln!(
                out,
                "| `{}` | {} | `{}` | {} |",
                action.symbol(),
                action.kind(),
                action.target(),
                escape(&action.describe(Wording::Details))
            );
        }
        let _ = writeln!(out, "\n</details>\n");
    }
    if !plan.drift.is_empty() {
        let _ = writeln!(
            out,
            "<details open><summary>Drift ({})</summary>\n",
            plan.drift.len()
        );
        let _ = writeln!(
            out,
            "| drift | target | details | follows |\n|---|---|---|---|"
        );
        for d in &plan.drift {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} |",
                d.kind.as_str(),
                drift_target(d),
                escape(&d.reason),
                d.action.as_str()
            );
        }
        let _ = writeln!(out, "\n</details>\n");
    }
    if !plan.pending.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Pending jobs ({})</summary>\n",
            plan.pending.len()
        );
        let _ = writeln!(
            out,
            "| job | queue | waiting for | reason |\n|---|---|---|---|"
        );
        for p in &plan.pending {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                p.job,
                p.queue.as_deref().unwrap_or(""),
                p.waiting_for.as_deref().unwrap_or(""),
                escape(&p.reason)
            );
        }
        let _ = writeln!(out, "\n</details>");
    }
    out
}

/// Table cells must not break the table.
fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}
