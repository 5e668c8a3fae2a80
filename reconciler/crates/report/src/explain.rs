//! `gitfleet explain JOB -o text`.

use std::fmt::Write;

use engine::{Explanation, NodeLine};
use model::plan::Wording;
use model::text::natural_cmp;

/// The candidate nodes as listed: those with room for a replica first, then
/// the others, each group in natural order of names (`n-2` before `n-10`).
fn nodes_in_natural_order(x: &Explanation) -> Vec<&NodeLine> {
    let mut nodes: Vec<&NodeLine> = x.nodes.iter().collect();
    nodes.sort_by(|a, b| {
        let fits = |n: &NodeLine| n.verdict.starts_with("room");
        fits(b)
            .cmp(&fits(a))
            .then_with(|| natural_cmp(&a.node, &b.node))
    });
    nodes
}

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
        for n in nodes_in_natural_order(x) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(node: &str, verdict: &str) -> NodeLine {
        NodeLine {
            node: node.into(),
            model: "H100".into(),
            free: 8,
            verdict: verdict.into(),
        }
    }

    #[test]
    fn candidate_nodes_are_listed_in_natural_order_fitting_first() {
        let x = Explanation {
            nodes: vec![
                line("n-10", "room for 1 replica"),
                line("n-2", "room for 1 replica"),
                line("n-1", "too few free GPUs"),
                line("n-9", "room for 1 replica"),
            ],
            ..Explanation::default()
        };
        let text = explanation_text(&x);
        let order: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("n-"))
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(order, ["2", "9", "10", "1"], "{text}");
    }
}
