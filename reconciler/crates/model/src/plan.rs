//! The plan: what the engine decided (DESIGN.md §4). Its JSON is a contract:
//! fields may be added, never renamed.

use serde::{Deserialize, Serialize};

use crate::observed::NodeGpus;

/// The version of the plan's JSON document (`plan -o json`), as the
/// preview and history documents carry theirs; bumped only when a field is
/// renamed or removed (fields may be added within a version).
pub const PLAN_FORMAT_VERSION: u32 = 1;

/// The plan as `plan -o json` prints it: `format_version` first, then the
/// plan's own fields (DESIGN.md §4).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PlanDocument<'a> {
    /// [`PLAN_FORMAT_VERSION`].
    pub format_version: u32,
    /// The plan.
    #[serde(flatten)]
    pub plan: &'a Plan,
}

impl Plan {
    /// This plan as its versioned JSON document.
    pub fn document(&self) -> PlanDocument<'_> {
        PlanDocument {
            format_version: PLAN_FORMAT_VERSION,
            plan: self,
        }
    }
}

/// Everything one engine run decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The Git revision the specs came from, when known.
    pub revision: Option<String>,
    /// The engine's `now`, RFC 3339 UTC.
    pub time: String,
    /// Actions, in the order: place, preempt, scale, drain, terminate, cancel.
    pub actions: Vec<Action>,
    /// Jobs left pending, in fair-share order, each with its binding constraint.
    pub pending: Vec<Pending>,
    /// Totals after the plan.
    pub summary: Summary,
    /// Differences between the declared fleet and the observed one, each with
    /// what follows from it (always present, often empty).
    #[serde(default)]
    pub drift: Vec<Drift>,
}

/// One difference between the declared fleet (NodePools) and the observed
/// one (see `drift::detect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// What kind of difference.
    pub kind: DriftKind,
    /// The pool it concerns, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The node it concerns, for node-level drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// GPU indices it concerns, when some GPUs of a node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<u32>,
    /// The running job it concerns (`job-spec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// What differs, in words.
    pub reason: String,
    /// What follows from it.
    pub action: DriftAction,
}

/// Kinds of drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriftKind {
    /// A pool has fewer nodes than its `size.min`.
    MissingNodes,
    /// A pool has more nodes than its `size.max`.
    ExcessNodes,
    /// A node of no declared pool.
    UnexpectedNode,
    /// A node whose GPU model, label or name says it belongs to another pool.
    WrongPool,
    /// GPUs of another model than the pool declares.
    GpuModel,
    /// Another GPU count than the pool declares.
    GpuCount,
    /// NVLink domains other than the pool's `nvlink` declares.
    Nvlink,
    /// Unhealthy GPUs.
    UnhealthyGpu,
    /// A running job that started with another spec than Git's now (the
    /// fields it reads when it starts); the change waits for a restart.
    JobSpec,
}

impl DriftKind {
    /// The kind as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::MissingNodes => "missing-nodes",
            DriftKind::ExcessNodes => "excess-nodes",
            DriftKind::UnexpectedNode => "unexpected-node",
            DriftKind::WrongPool => "wrong-pool",
            DriftKind::GpuModel => "gpu-model",
            DriftKind::GpuCount => "gpu-count",
            DriftKind::Nvlink => "nvlink",
            DriftKind::UnhealthyGpu => "unhealthy-gpu",
            DriftKind::JobSpec => "job-spec",
        }
    }
}

/// What the plan does about a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftAction {
    /// The plan drains the node.
    Drain,
    /// The plan scales the pool (to replace missing nodes, or down to `max`).
    Scale,
    /// Nothing automatic: a person must fix the fleet or the specs.
    Report,
}

impl DriftAction {
    /// The action as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftAction::Drain => "drain",
            DriftAction::Scale => "scale",
            DriftAction::Report => "report",
        }
    }
}

/// One action for an executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Action {
    /// Start a job on these GPUs.
    Place {
        /// Job name.
        job: String,
        /// GPUs per node, one entry per replica.
        placement: Vec<NodeGpus>,
        /// Why here (queue, model, quota state).
        reason: String,
    },
    /// Signal a job to stop so that another one fits.
    Preempt {
        /// The victim.
        job: String,
        /// The job that needs its GPUs.
        #[serde(rename = "for")]
        for_job: String,
        /// Which rule allowed it.
        reason: String,
    },
    /// Change a pool's node count.
    Scale {
        /// Pool name.
        pool: String,
        /// Nodes now.
        from: u32,
        /// Nodes wanted.
        to: u32,
        /// Why.
        reason: String,
        /// Nodes to remove, on scale-down.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes: Vec<String>,
    },
    /// Stop placing on a node.
    Drain {
        /// Node name.
        node: String,
        /// Why (unhealthy GPUs).
        reason: String,
    },
    /// Stop a job that ran past its time limit.
    Terminate {
        /// Job name.
        job: String,
        /// Why.
        reason: String,
    },
    /// Stop a job that is no longer in Git.
    Cancel {
        /// Job name.
        job: String,
        /// Why.
        reason: String,
    },
}

impl Action {
    /// The action's `type` as written in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Place { .. } => "place",
            Action::Preempt { .. } => "preempt",
            Action::Scale { .. } => "scale",
            Action::Drain { .. } => "drain",
            Action::Terminate { .. } => "terminate",
            Action::Cancel { .. } => "cancel",
        }
    }

    /// The job the action is about, if any.
    pub fn job(&self) -> Option<&str> {
        match self {
            Action::Place { job, .. }
            | Action::Preempt { job, .. }
            | Action::Terminate { job, .. }
            | Action::Cancel { job, .. } => Some(job),
            Action::Scale { .. } | Action::Drain { .. } => None,
        }
    }

    /// What the action acts on: the job, the pool (scale) or the node (drain).
    pub fn target(&self) -> &str {
        match self {
            Action::Place { job, .. }
            | Action::Preempt { job, .. }
            | Action::Terminate { job, .. }
            | Action::Cancel { job, .. } => job,
            Action::Scale { pool, .. } => pool,
            Action::Drain { node, .. } => node,
        }
    }

    /// The plan's symbol for the action: `+` place, `-` preempt, `~` scale,
    /// `!` drain, `x` terminate or cancel.
    pub fn symbol(&self) -> &'static str {
        match self {
            Action::Place { .. } => "+",
            Action::Preempt { .. } => "-",
            Action::Scale { .. } => "~",
            Action::Drain { .. } => "!",
            Action::Terminate { .. } | Action::Cancel { .. } => "x",
        }
    }

    /// The action in words, in the form `wording` names; the one place an
    /// action is put into words (the verb is [`Action::kind`]).
    pub fn describe(&self, wording: Wording) -> String {
        match (self, wording) {
            (Action::Scale { pool, from, to, .. }, Wording::Subject) => {
                format!("{pool} {from} → {to}")
            }
            (_, Wording::Subject) => self.target().to_string(),
            (
                Action::Place {
                    placement, reason, ..
                },
                Wording::Details,
            ) => format!("on {} — {reason}", placement_short(placement)),
            (
                Action::Place {
                    placement, reason, ..
                },
                Wording::Audit,
            ) => {
                let mut out = String::with_capacity(32 + reason.len());
                push_placement_short(placement, &mut out);
                out.push_str(" (");
                out.push_str(reason);
                out.push(')');
                out
            }
            (Action::Place { placement, .. }, Wording::Change) => {
                format!("on {}", placement_short(placement))
            }
            (
                Action::Preempt {
                    for_job, reason, ..
                },
                Wording::Details,
            ) => format!("for {for_job} — {reason}"),
            (
                Action::Preempt {
                    for_job, reason, ..
                },
                Wording::Audit,
            ) => format!("for {for_job}: {reason}"),
            (Action::Preempt { for_job, .. }, Wording::Change) => format!("for {for_job}"),
            (
                Action::Scale {
                    from,
                    to,
                    reason,
                    nodes,
                    ..
                },
                Wording::Details,
            ) => format!("{from} → {to} nodes{} — {reason}", removed(nodes)),
            (
                Action::Scale {
                    from, to, reason, ..
                },
                Wording::Audit,
            ) => format!("{from} → {to}: {reason}"),
            (
                Action::Scale {
                    from, to, nodes, ..
                },
                Wording::Change,
            ) => format!("{from} → {to} nodes{}", removed(nodes)),
            (
                Action::Drain { reason, .. }
                | Action::Terminate { reason, .. }
                | Action::Cancel { reason, .. },
                Wording::Details | Wording::Audit | Wording::Change,
            ) => reason.clone(),
        }
    }
}

/// The forms an action is put into words in ([`Action::describe`]). Drains,
/// terminations and cancellations are their reason in every form but
/// [`Wording::Subject`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wording {
    /// After the verb and target in a plan (text, Markdown, `explain`):
    /// `on n0:gpu0-7 — reason`, `for b — reason`,
    /// `2 → 4 nodes (remove n3) — reason`.
    Details,
    /// The audit log's detail: `n0:gpu0-7 (reason)`, `for b: reason`,
    /// `2 → 4: reason`.
    Audit,
    /// What changes, without the reason (plan diffs): `on n0:gpu0-7`,
    /// `for b`, `2 → 4 nodes (remove n3)`.
    Change,
    /// After the verb on the reconcile loop's line: the job, the node, or
    /// `pool 2 → 4`.
    Subject,
}

/// ` (remove n3, n4)` for a scale-down that names its nodes.
fn removed(nodes: &[String]) -> String {
    if nodes.is_empty() {
        String::new()
    } else {
        format!(" (remove {})", nodes.join(", "))
    }
}

/// A job that stays pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// Job name (shared: a planner keeps one per job from plan to plan).
    pub job: std::sync::Arc<str>,
    /// The binding constraint, in words a user can act on (shared: jobs
    /// held back alike have the same words).
    pub reason: std::sync::Arc<str>,
    /// Its leaf queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<std::sync::Arc<str>>,
    /// What it waits for: `quota`, `resources`, `preemption`, `scale-up`,
    /// `freeing`, `reservation`, `unschedulable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<std::borrow::Cow<'static, str>>,
}

/// Totals after the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// GPUs on all observed nodes.
    pub gpus: u64,
    /// GPUs held by running jobs plus GPUs placed by this plan.
    pub allocated: u64,
    /// Jobs left pending.
    pub pending_jobs: u64,
    /// Jobs running before the plan.
    pub running_jobs: u64,
    /// Jobs this plan places.
    pub placed_jobs: u64,
    /// Jobs this plan preempts.
    pub preempted_jobs: u64,
    /// GPUs that are unhealthy.
    pub unhealthy_gpus: u64,
}

/// `n0:gpu0-7, n1:gpu0,2`: a placement in one line, nodes in natural order
/// (`n2` before `n10`), GPU indices as ranges. Not Slurm's `n0[0-7]`, which
/// a Slurm user reads as the nodes `n00` to `n07`.
pub fn placement_short(placement: &[NodeGpus]) -> String {
    let mut out = String::new();
    push_placement_short(placement, &mut out);
    out
}

/// [`placement_short`], appended to `out` (no text of its own: a burst's
/// audit writes thousands).
pub fn push_placement_short(placement: &[NodeGpus], out: &mut String) {
    // Usually each node once, in natural order, its GPUs increasing: written
    // as they are, with nothing to merge or sort.
    let in_order = placement
        .windows(2)
        .all(|w| crate::text::natural_cmp(&w[0].node, &w[1].node).is_lt())
        && placement
            .iter()
            .all(|p| p.gpus.windows(2).all(|g| g[0] < g[1]));
    if in_order {
        for (i, part) in placement.iter().enumerate() {
            push_node_gpus(i, &part.node, &part.gpus, out);
        }
        return;
    }
    let mut merged: Vec<(&str, Vec<u32>)> = Vec::new();
    for part in placement {
        match merged.iter_mut().find(|(n, _)| *n == part.node) {
            Some((_, g)) => g.extend(&part.gpus),
            None => merged.push((&part.node, part.gpus.clone())),
        }
    }
    merged.sort_by(|a, b| crate::text::natural_cmp(a.0, b.0));
    for (i, (node, mut gpus)) in merged.into_iter().enumerate() {
        gpus.sort_unstable();
        gpus.dedup();
        push_node_gpus(i, node, &gpus, out);
    }
}

/// `node:gpu…` (GPUs sorted, distinct), after `, ` unless it is the first (`i`).
fn push_node_gpus(i: usize, node: &str, gpus: &[u32], out: &mut String) {
    if i > 0 {
        out.push_str(", ");
    }
    out.push_str(node);
    out.push_str(":gpu");
    push_ranges(gpus, out);
}

/// Sorted distinct values as ranges: `0-3,5`.
fn push_ranges(values: &[u32], out: &mut String) {
    use std::fmt::Write as _;
    let mut i = 0;
    while i < values.len() {
        let start = values[i];
        let mut end = start;
        while i + 1 < values.len() && values[i + 1] == end + 1 {
            i += 1;
            end = values[i];
        }
        if start != values[0] {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = if start == end {
            write!(out, "{start}")
        } else {
            write!(out, "{start}-{end}")
        };
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(action: &Action) -> [String; 4] {
        [
            Wording::Details,
            Wording::Audit,
            Wording::Change,
            Wording::Subject,
        ]
        .map(|w| action.describe(w))
    }

    /// The straightforward way [`placement_short`] writes a placement.
    fn placement_short_plain(placement: &[NodeGpus]) -> String {
        let mut merged: Vec<(&str, Vec<u32>)> = Vec::new();
        for part in placement {
            match merged.iter_mut().find(|(n, _)| *n == part.node) {
                Some((_, g)) => g.extend(&part.gpus),
                None => merged.push((&part.node, part.gpus.clone())),
            }
        }
        merged.sort_by(|a, b| crate::text::natural_cmp(a.0, b.0));
        merged
            .into_iter()
            .map(|(node, mut gpus)| {
                gpus.sort_unstable();
                gpus.dedup();
                let mut ranges: Vec<String> = Vec::new();
                let mut i = 0;
                while i < gpus.len() {
                    let start = gpus[i];
                    let mut end = start;
                    while i + 1 < gpus.len() && gpus[i + 1] == end + 1 {
                        i += 1;
                        end = gpus[i];
                    }
                    ranges.push(if start == end {
                        start.to_string()
                    } else {
                        format!("{start}-{end}")
                    });
                    i += 1;
                }
                format!("{node}:gpu{}", ranges.join(","))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    proptest::proptest! {
        #[test]
        fn placement_short_is_the_plain_wording(
            parts in proptest::collection::vec(
                ("(n|m|n0)[0-9]{1,2}", proptest::collection::vec(0u32..12, 0..6)),
                0..5,
            ),
            reason in "[a-z ]{0,8}",
        ) {
            let placement: Vec<NodeGpus> = parts
                .into_iter()
                .map(|(node, gpus)| NodeGpus { node, gpus })
                .collect();
            let plain = placement_short_plain(&placement);
            proptest::prop_assert_eq!(placement_short(&placement), plain.clone());
            let place = Action::Place {
                job: "j".into(),
                placement,
                reason: reason.clone(),
            };
            proptest::prop_assert_eq!(
                place.describe(Wording::Audit),
                format!("{plain} ({reason})")
            );
        }
    }

    #[test]
    fn placement_short_in_order_and_not() {
        let p = |node: &str, gpus: &[u32]| NodeGpus {
            node: node.into(),
            gpus: gpus.to_vec(),
        };
        assert_eq!(
            placement_short(&[p("n2", &[0, 1, 2, 3, 5]), p("n10", &[7])]),
            "n2:gpu0-3,5, n10:gpu7"
        );
        assert_eq!(
            placement_short(&[p("n10", &[3, 1, 2]), p("n2", &[0]), p("n10", &[1, 0])]),
            "n2:gpu0, n10:gpu0-3"
        );
        assert_eq!(placement_short(&[]), "");
    }

    #[test]
    fn an_action_in_each_wording() {
        let place = Action::Place {
            job: "a".into(),
            placement: vec![NodeGpus {
                node: "n0".into(),
                gpus: vec![0, 1, 2, 3],
            }],
            reason: "queue q: fits".into(),
        };
        assert_eq!(
            words(&place),
            [
                "on n0:gpu0-3 — queue q: fits",
                "n0:gpu0-3 (queue q: fits)",
                "on n0:gpu0-3",
                "a"
            ]
        );
        let preempt = Action::Preempt {
            job: "v".into(),
            for_job: "a".into(),
            reason: "r".into(),
        };
        assert_eq!(words(&preempt), ["for a — r", "for a: r", "for a", "v"]);
        let scale = Action::Scale {
            pool: "p".into(),
            from: 4,
            to: 2,
            reason: "idle".into(),
            nodes: vec!["n2".into(), "n3".into()],
        };
        assert_eq!(
            words(&scale),
            [
                "4 → 2 nodes (remove n2, n3) — idle",
                "4 → 2: idle",
                "4 → 2 nodes (remove n2, n3)",
                "p 4 → 2"
            ]
        );
        let drain = Action::Drain {
            node: "n1".into(),
            reason: "GPU 3 unhealthy".into(),
        };
        assert_eq!(drain.describe(Wording::Details), "GPU 3 unhealthy");
        assert_eq!(drain.describe(Wording::Subject), "n1");
        assert_eq!(
            (drain.symbol(), drain.kind(), drain.target()),
            ("!", "drain", "n1")
        );
    }
}
