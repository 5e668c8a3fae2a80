//! `kind: PriorityClass`: priority, preemptibility and grace period of jobs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// A named priority level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorityClassSpec {
    /// Higher values are scheduled first and may preempt lower ones.
    pub value: i32,
    /// Whether jobs of this class can be preempted.
    #[serde(default = "default_preemptible")]
    pub preemptible: bool,
    /// Time from the preemption signal until the GPUs are free.
    #[serde(default)]
    pub grace_period: Duration,
    /// The class of jobs that name none; at most one class is the default.
    #[serde(default)]
    pub default: bool,
    /// Free text shown in reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn default_preemptible() -> bool {
    true
}
