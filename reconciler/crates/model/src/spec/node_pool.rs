//! `kind: NodePool`: a group of identical GPU nodes.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// The default `scaleDownAfter`.
pub const DEFAULT_SCALE_DOWN_AFTER: Duration = Duration::from_secs(600);

/// The desired shape of a node pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    /// The GPUs of every node in the pool.
    pub gpu: PoolGpu,
    /// NVLink layout inside a node.
    #[serde(default)]
    pub nvlink: NvLink,
    /// Node count bounds; a fixed on-prem pool has `min == max`.
    pub size: PoolSize,
    /// Nodes per rack in the derived inventory (no `--observed` file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub nodes_per_rack: Option<u32>,
    /// Labels copied onto the pool's nodes (e.g. `zone: a`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Idle time before a node above `min` is removed (default 10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_after: Option<Duration>,
}

impl NodePoolSpec {
    /// `scaleDownAfter`, or its default.
    pub fn scale_down_after(&self) -> Duration {
        self.scale_down_after.unwrap_or(DEFAULT_SCALE_DOWN_AFTER)
    }
}

/// GPU model and count of each node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolGpu {
    /// GPU model name, e.g. `H100-SXM-80GB`; jobs and quotas refer to it.
    #[schemars(length(min = 1))]
    pub model: String,
    /// GPUs per node.
    #[schemars(range(min = 1, max = super::limits::MAX_GPUS_PER_NODE))]
    pub count: u32,
    /// Memory per GPU in GiB (informational).
    #[serde(default, rename = "memoryGiB", skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<u32>,
}

/// How the GPUs of a node are linked.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum NvLink {
    /// All GPUs of a node form one NVLink domain.
    Full,
    /// GPUs are linked in pairs: (0,1), (2,3), …
    Pairs,
    /// PCIe only: every GPU is its own domain.
    #[default]
    None,
}

/// Node count bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolSize {
    /// Fewest nodes; scale-down never goes below.
    #[schemars(range(max = super::limits::MAX_POOL_NODES))]
    pub min: u32,
    /// Most nodes; scale-up never goes above.
    #[schemars(range(max = super::limits::MAX_POOL_NODES))]
    pub max: u32,
}
