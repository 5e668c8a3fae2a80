//! One change to the specs that a suggestion is made of, and how it is
//! applied to (and taken back from) a fleet.

use model::spec::{Fleet, GpuSelector, JobSpec, Topology, TopologyLevel};
use serde::Serialize;

/// A change to the specs, as a user would make it in Git.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Change {
    /// Raise `queue`'s limit on `model` from `from` to `to` GPUs.
    RaiseLimit {
        /// The queue whose limit binds.
        queue: String,
        /// The GPU model.
        model: String,
        /// The limit now.
        from: u32,
        /// The limit that lets the job run.
        to: u32,
    },
    /// Add `model` to the job's `gpu.models`.
    AcceptModel {
        /// The job.
        job: String,
        /// The model to accept as well.
        model: String,
    },
    /// Change the job's `topology`.
    Topology {
        /// The job.
        job: String,
        /// Its topology now.
        from: Topology,
        /// The relaxed one.
        to: Topology,
    },
    /// Run the job under another (higher) priority class.
    PriorityClass {
        /// The job.
        job: String,
        /// The class it names now (`None`: the default class).
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// The class that lets it run.
        to: String,
        /// That class's value.
        value: i32,
    },
}

impl Change {
    /// The change in words.
    pub fn words(&self) -> String {
        match self {
            Change::RaiseLimit {
                queue,
                model,
                from,
                to,
            } => format!(
                "raise queue {queue}'s limit on {model} by {} (from {from} to {to})",
                to - from
            ),
            Change::AcceptModel { model, .. } => format!("accept {model} as well"),
            Change::Topology { from, to, .. } => {
                format!("relax topology from {} to {}", topology(from), topology(to))
            }
            Change::PriorityClass {
                from, to, value, ..
            } => format!(
                "run it under priority class {to} (value {value}){}",
                match from {
                    Some(f) => format!(" instead of {f}"),
                    None => " instead of the default class".to_string(),
                }
            ),
        }
    }

    /// Applies the change to `fleet` (`undo`: takes it back). A job or
    /// queue the fleet does not have is left alone.
    pub(crate) fn apply(&self, fleet: &mut Fleet, undo: bool) {
        match self {
            Change::RaiseLimit {
                queue,
                model,
                from,
                to,
            } => {
                let limit = if undo { *from } else { *to };
                if let Some(q) = fleet.queues.iter_mut().find(|q| q.name() == queue)
                    && let Some(quota) = q.spec.quota.iter_mut().find(|m| &m.model == model)
                {
                    quota.limit = Some(limit);
                }
            }
            Change::AcceptModel { job, model } => {
                if let Some(spec) = job_mut(fleet, job) {
                    let models = &mut spec
                        .gpu
                        .get_or_insert_with(|| GpuSelector { models: Vec::new() })
                        .models;
                    if undo {
                        models.retain(|m| m != model);
                    } else {
                        models.push(model.clone());
                    }
                }
            }
            Change::Topology { job, from, to } => {
                if let Some(spec) = job_mut(fleet, job) {
                    spec.topology = Some(if undo { *from } else { *to });
                }
            }
            Change::PriorityClass { job, from, to, .. } => {
                if let Some(spec) = job_mut(fleet, job) {
                    spec.priority_class = if undo { from.clone() } else { Some(to.clone()) };
                }
            }
        }
    }
}

fn job_mut<'a>(fleet: &'a mut Fleet, job: &str) -> Option<&'a mut JobSpec> {
    fleet
        .jobs
        .iter_mut()
        .find(|j| j.name() == job)
        .map(|j| &mut j.spec)
}

/// `required rack`, `preferred zone`, `required rack, preferred node`, `none`.
fn topology(t: &Topology) -> String {
    let mut parts = Vec::new();
    if let Some(l) = t.required.filter(|l| *l != TopologyLevel::None) {
        parts.push(format!("required {}", level(l)));
    }
    if let Some(l) = t.preferred.filter(|l| *l != TopologyLevel::None) {
        parts.push(format!("preferred {}", level(l)));
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// A level as written in YAML.
fn level(l: TopologyLevel) -> &'static str {
    match l {
        TopologyLevel::None => "none",
        TopologyLevel::Node => "node",
        TopologyLevel::Rack => "rack",
        TopologyLevel::Zone => "zone",
    }
}
