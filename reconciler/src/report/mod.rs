//! Rendering plans for people: `text` (in the spirit of `terraform plan`)
//! and `markdown` (a pull-request comment). JSON is the plan's serde form.

mod explain;
mod markdown;
mod text;

pub use explain::explanation_text;
pub use markdown::plan_markdown;
pub use text::plan_text;

use crate::observed::NodeGpus;
use crate::plan::{Action, Plan};

/// `n0[0-7], n1[0,2]`: a placement in one line, GPU indices as ranges.
pub fn placement_short(placement: &[NodeGpus]) -> String {
    let mut merged: Vec<(String, Vec<u32>)> = Vec::new();
    for part in placement {
        match merged.iter_mut().find(|(n, _)| *n == part.node) {
            Some((_, g)) => g.extend(&part.gpus),
            None => merged.push((part.node.clone(), part.gpus.clone())),
        }
    }
    merged
        .into_iter()
        .map(|(node, mut gpus)| {
            gpus.sort_unstable();
            format!("{node}[{}]", ranges(&gpus))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ranges(values: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let start = values[i];
        let mut end = start;
        while i + 1 < values.len() && values[i + 1] == end + 1 {
            i += 1;
            end = values[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

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
