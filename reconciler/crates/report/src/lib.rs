//! Rendering plans for people: `text` (in the spirit of `terraform plan`)
//! and `markdown` (a pull-request comment). JSON is the plan's serde form.

mod explain;
mod markdown;
pub mod preview;
mod text;

pub use explain::explanation_text;
pub use markdown::plan_markdown;
pub use text::plan_text;

pub use model::plan::placement_short;
use model::plan::{Action, Drift, Plan};

/// The one-line count of actions, e.g. `3 to place, 1 to preempt`.
pub fn action_counts(plan: &Plan) -> String {
    let kinds = [
        ("place", "to place"),
        ("preempt", "to preempt"),
        ("scale", "to scale"),
        ("drain", "to drain"),
        ("terminate", "to terminate"),
        ("cancel", "to cancel"),
    ];
    let parts: Vec<String> = kinds
        .iter()
        .filter_map(|(kind, words)| {
            let n = plan.actions.iter().filter(|a| a.kind() == *kind).count();
            (n > 0).then(|| format!("{n} {words}"))
        })
        .collect();
    if parts.is_empty() {
        "no changes".to_string()
    } else {
        parts.join(", ")
    }
}

/// What a drift entry is about: `node n3`, or `pool p` for pool-level drift.
pub fn drift_target(d: &Drift) -> String {
    match (&d.node, &d.pool) {
        (Some(node), _) => format!("node {node}"),
        (None, Some(pool)) => format!("pool {pool}"),
        (None, None) => String::new(),
    }
}

/// Symbol, verb, target and details of an action, shared by the renderers.
pub fn describe(action: &Action) -> (&'static str, &'static str, String, String) {
    match action {
        Action::Place {
            job,
            placement,
            reason,
        } => (
            "+",
            "place",
            job.clone(),
            format!("on {} — {reason}", placement_short(placement)),
        ),
        Action::Preempt {
            job,
            for_job,
            reason,
        } => (
            "-",
            "preempt",
            job.clone(),
            format!("for {for_job} — {reason}"),
        ),
        Action::Scale {
            pool,
            from,
            to,
            reason,
            nodes,
        } => {
            let removed = if nodes.is_empty() {
                String::new()
            } else {
                format!(" (remove {})", nodes.join(", "))
            };
            (
                "~",
                "scale",
                pool.clone(),
                format!("{from} → {to} nodes{removed} — {reason}"),
            )
        }
        Action::Drain { node, reason } => ("!", "drain", node.clone(), reason.clone()),
        Action::Terminate { job, reason } => ("x", "terminate", job.clone(), reason.clone()),
        Action::Cancel { job, reason } => ("x", "cancel", job.clone(), reason.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::observed::NodeGpus;

    #[test]
    fn placements_are_compact() {
        let p = vec![
            NodeGpus {
                node: "n0".into(),
                gpus: vec![0, 1, 2, 3],
            },
            NodeGpus {
                node: "n1".into(),
                gpus: vec![0, 2, 3],
            },
        ];
        assert_eq!(placement_short(&p), "n0[0-3], n1[0,2-3]");
    }
}
