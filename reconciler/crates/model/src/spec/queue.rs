//! `kind: Queue`: one node of the quota hierarchy (org → department → team).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A queue's place in the tree, its fair-share weight and its quotas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueSpec {
    /// The parent queue; omitted for a top-level queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Fair-share weight among siblings.
    #[serde(default = "default_weight")]
    #[schemars(range(min = 1, max = super::limits::MAX_WEIGHT))]
    pub weight: u32,
    /// Quota per GPU model; a model not listed has guaranteed 0 and no limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quota: Vec<ModelQuota>,
    /// How the queue's pending jobs of one priority are ordered; omitted:
    /// the parent's ordering (a top-level queue: `fifo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<QueueOrdering>,
}

/// The order of a leaf's pending jobs of equal priority (priority classes
/// always come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum QueueOrdering {
    /// Older first (first seen pending), then by name.
    #[default]
    Fifo,
    /// Shorter declared `timeLimit` first, with aging: a job's rank is its
    /// time limit (none or above 7 days: 7 days) minus 1/24 of the time it
    /// has waited; after 7 days of waiting it goes before every later
    /// arrival.
    ShortestFirst,
    /// Smaller declared GPU-time (`timeLimit` × GPUs) first, with aging: a
    /// job's rank is its time limit (none or above 7 days: 7 days) × its
    /// GPUs minus 1/24 of the time it has waited; after 30 days of waiting
    /// it goes before every later arrival.
    SmallestFirst,
    /// Least attained service first (Tiresias' discretised 2D-LAS): jobs
    /// are ranked by the GPU-time they have held so far (all runs), in
    /// tiers below 1, 10 and 100 GPU-hours; inside a tier as
    /// `smallest-first`. A pending job may preempt a preemptible running
    /// job of its leaf and priority in a higher tier; after 30 days of
    /// waiting it goes before every later arrival.
    LeastAttained,
}

fn default_weight() -> u32 {
    1
}

impl QueueSpec {
    /// The quota entry for `model`, if listed.
    pub fn quota_for(&self, model: &str) -> Option<&ModelQuota> {
        self.quota.iter().find(|q| q.model == model)
    }

    /// Guaranteed GPUs of `model` (0 when not listed).
    pub fn guaranteed(&self, model: &str) -> u32 {
        self.quota_for(model).map_or(0, |q| q.guaranteed)
    }

    /// The cap on GPUs of `model` (`None`: no cap).
    pub fn limit(&self, model: &str) -> Option<u32> {
        self.quota_for(model).and_then(|q| q.limit)
    }
}

/// Guaranteed GPUs and cap for one model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelQuota {
    /// GPU model name as the pools declare it.
    #[schemars(length(min = 1))]
    pub model: String,
    /// GPUs this queue can always get back (reclaim); usage above it is borrowing.
    #[serde(default)]
    #[schemars(range(max = super::limits::MAX_QUOTA_GPUS))]
    pub guaranteed: u32,
    /// Cap on usage including borrowing; omitted means no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = super::limits::MAX_QUOTA_GPUS))]
    pub limit: Option<u32>,
}
