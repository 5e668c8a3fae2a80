//! Rendering plans for people: `text` (in the spirit of `terraform plan`)
//! and `markdown` (a pull-request comment). JSON is the plan's serde form.

mod comment;
mod explain;
mod markdown;
pub mod preview;
mod text;
pub mod validation;
mod whatif;

pub use explain::explanation_text;
pub use markdown::plan_markdown;
pub use text::plan_text;
pub use whatif::{whatif_explain_text, whatif_plan_text};

pub use model::plan::placement_short;
use model::plan::{Drift, Plan};

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

/// What a drift entry is about: `node n3`, `pool p` for pool-level drift,
/// `job j` for a running job's spec.
pub fn drift_target(d: &Drift) -> String {
    match (&d.node, &d.pool, &d.job) {
        (Some(node), _, _) => format!("node {node}"),
        (None, Some(pool), _) => format!("pool {pool}"),
        (None, None, Some(job)) => format!("job {job}"),
        (None, None, None) => String::new(),
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
        assert_eq!(placement_short(&p), "n0:gpu0-3, n1:gpu0,2-3");
        // nodes in natural order, a node's GPUs merged across replicas
        let p = vec![
            NodeGpus {
                node: "n10".into(),
                gpus: vec![4, 5],
            },
            NodeGpus {
                node: "n2".into(),
                gpus: vec![1],
            },
            NodeGpus {
                node: "n10".into(),
                gpus: vec![0, 1],
            },
        ];
        assert_eq!(placement_short(&p), "n2:gpu1, n10:gpu0-1,4-5");
    }
}
