//! `gitfleet explain JOB -o text`.

use std::fmt::Write;

use engine::Explanation;
use model::plan::Wording;

/// The explanation for a terminal.
pub fn explanation_text(x: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Job {}: {}", x.job, x.status);
    let _ = writeln!(out, "  {}", x.summary);
    if let Some(q) = &x.queue {
        let _ = writeln!(out, "  queue:    {q}");
    }
    if let Some(p) = &x.priority {
        let _ = writeln!(out, "  priority: {p}");
    }
    if let Some(r) = &x.request {
        let _ = writeln!(out, "  request:  {r}");
    }
    for line in &x.history {
        let _ = writeln!(out, "  before:   {line}");
    }
    if let Some(order) = &x.order {
        let _ = writeln!(
            out,
            "\nFair-share order: considered {} of {} pending jobs",
            order.position, order.of
        );
        for (depth, level) in order.levels.iter().enumerate() {
            let cells: Vec<String> = level
                .iter()
                .map(|s| {
                    format!(
                        "{}{} {:.4} (weight {}, {} pending)",
                        if s.on_path { "*" } else { "" },
                        s.queue,
                        s.weighted_share,
                        s.weight,
                        s.pending_jobs
                    )
                })
                .collect();
            let _ = writeln!(out, "  level {}: {}", depth + 1, cells.join(", "));
        }
        let _ = writeln!(
            out,
            "  (* the job's queue; among queues with pending jobs, the lowest share ÷ weight goes first)"
        );
    }
    if !x.quota.is_empty() {
        let _ = writeln!(out, "\nQuota along the queue path (usage before this job):");
        let _ = writeln!(
            out,
            "  {:<16} {:<18} {:>7} {:>10} {:>7} {:>8}  fits",
            "queue", "model", "usage", "guaranteed", "limit", "request"
        );
        for q in &x.quota {
            let limit = q.limit.map_or("-".to_string(), |l| l.to_string());
            let _ = writeln!(
                out,
                "  {:<16} {:<18} {:>7} {:>10} {:>7} {:>8}  {}",
                q.queue,
                q.model,
                q.usage,
                q.guaranteed,
                limit,
                q.request,
                if q.fits { "yes" } else { "NO" }
            );
        }
    }
    if !x.nodes.is_empty() {
        let _ = writeln!(out, "\nCandidate nodes when it was considered:");
        for n in &x.nodes {
            let _ = writeln!(
                out,
                "  {:<24} {:<18} {:>3} free  {}",
                n.node, n.model, n.free, n.verdict
            );
        }
        if x.nodes_not_listed > 0 {
            let _ = writeln!(out, "  … and {} more nodes", x.nodes_not_listed);
        }
    }
    if !x.actions.is_empty() {
        let _ = writeln!(out, "\nPlan actions:");
        for a in &x.actions {
            let _ = writeln!(
                out,
                "  {} {} {}  {}",
                a.symbol(),
                a.kind(),
                a.target(),
                a.describe(Wording::Details)
            );
        }
    }
    out
}
