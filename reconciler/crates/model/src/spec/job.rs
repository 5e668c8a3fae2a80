//! `kind: Job`: a gang of replicas that asks for GPUs.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// What a job asks for and how it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobSpec {
    /// The leaf queue the job is charged to.
    #[schemars(length(min = 1))]
    pub queue: String,
    /// The priority class; the default class when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Gang size: all replicas start together or none does.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = super::limits::MAX_REPLICAS))]
    pub replicas: u32,
    /// GPUs per replica; a replica never spans nodes.
    #[schemars(range(min = 1, max = super::limits::MAX_GPUS_PER_NODE))]
    pub gpus_per_replica: u32,
    /// Acceptable GPU models (default: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSelector>,
    /// Where the replicas must or should sit together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// Wall-clock limit: used for backfill and enforced by `terminate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<Duration>,
    /// The command of every replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Container image (used by the Kubernetes executor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Environment variables of every replica: a value, `{value, sensitive:
    /// true}` (masked wherever specs are shown), or `{valueFrom: {file: PATH}}`
    /// / `{valueFrom: {env: NAME}}` (read when a replica starts, never in Git).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, super::EnvValue>,
    /// What the kube executor adds to each Pod (service account, pull
    /// secrets, labels, annotations, tolerations, CPU/memory, shared
    /// memory, volumes); other executors ignore it.
    // Boxed (not a doc comment: the schema's description comes from those):
    // most jobs have none, and a fleet's jobs are moved in bulk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<Box<super::KubernetesSpec>>,
    /// The `sbatch` options gitfleet does not own (CPUs and memory per
    /// task, constraints, output paths), passed by the Slurm executor in
    /// scheduler mode; other executors ignore it.
    // Boxed, as `kubernetes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<Box<super::SlurmSpec>>,
}

fn default_replicas() -> u32 {
    1
}

impl JobSpec {
    /// Total GPUs of the gang.
    pub fn total_gpus(&self) -> u64 {
        u64::from(self.replicas) * u64::from(self.gpus_per_replica)
    }

    /// Whether `model` is acceptable for this job.
    pub fn accepts_model(&self, model: &str) -> bool {
        match &self.gpu {
            Some(sel) if !sel.models.is_empty() => sel.models.iter().any(|m| m == model),
            _ => true,
        }
    }
}

/// Acceptable GPU models.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuSelector {
    /// Model names as the pools declare them; any of them will do.
    #[schemars(length(min = 1))]
    pub models: Vec<String>,
}

/// Topology constraints on the whole gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Topology {
    /// All replicas inside one such domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<TopologyLevel>,
    /// Replicas in as few such domains as possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<TopologyLevel>,
}

/// A level of the topology: node ⊂ rack ⊂ zone.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TopologyLevel {
    /// No constraint.
    None,
    /// One node.
    Node,
    /// One rack (node label `rack`).
    Rack,
    /// One zone (node label `zone`).
    Zone,
}
