//! The observed state of the live fleet (DESIGN.md §3): nodes with their GPUs,
//! running jobs with placements, and when pending jobs were first seen.
//!
//! Read from a YAML or JSON file (`--observed`), printed by `gitfleet
//! inventory`, written by executors; or derived from the pools when absent.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::Fleet;

pub use crate::time::Timestamp;

/// The live fleet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedState {
    /// When this state was observed; `--now` overrides it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::time::fast::option"
    )]
    #[schemars(with = "Option<Timestamp>")]
    pub time: Option<Timestamp>,
    /// Every node with its GPUs.
    #[serde(default)]
    pub nodes: Vec<ObservedNode>,
    /// Jobs that hold GPUs now.
    #[serde(default)]
    pub running: Vec<RunningJob>,
    /// When pending jobs were first seen (their age in fair-share order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<QueuedJob>,
    /// Jobs that ran to an end (success, failure, time limit); a Job in Git
    /// that completed is not started again, as a Kubernetes Job is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completed: Vec<CompletedJob>,
    /// Per job name, the GPU-seconds it held in runs before its current one
    /// (a running job) or in all its runs (a pending job): the attained
    /// service that `least-attained` leaves rank by (a running job's
    /// current run is counted from its `started`). Absent: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attained: BTreeMap<String, u64>,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedNode {
    /// Node name, unique.
    pub name: String,
    /// The NodePool the node belongs to; nodes of no declared pool get no jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Topology labels: `rack`, `zone`, and any others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Since when no job has run on the node (for scale-down).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::time::fast::option"
    )]
    #[schemars(with = "Option<Timestamp>")]
    pub idle_since: Option<Timestamp>,
    /// The node's GPUs.
    #[serde(default)]
    pub gpus: Vec<ObservedGpu>,
}

/// One GPU of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedGpu {
    /// Index on the node (as `CUDA_VISIBLE_DEVICES` counts).
    pub index: u32,
    /// Model name, normalised to the names pools use.
    pub model: String,
    /// Total memory, `memoryMiB` as DESIGN.md §3 spells it (`memoryMib`,
    /// what earlier versions wrote, is read too).
    #[serde(
        default,
        rename = "memoryMiB",
        alias = "memoryMib",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_mib: Option<u64>,
    /// Unhealthy GPUs are never given out.
    #[serde(default = "default_true")]
    pub healthy: bool,
    /// NVML UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// PCI bus id, e.g. `0000:18:00.0` (written by `gitfleet inventory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// The NVLink domain the GPU belongs to, named by its lowest GPU index;
    /// a GPU with no active NVLink is a domain of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_domain: Option<u32>,
    /// Why the GPU is unhealthy (or a warning about a healthy one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_reason: Option<String>,
    /// What NVML reported besides the above; informational, the engine does
    /// not read it. A fact the GPU could not report is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<GpuDetails>>,
}

impl ObservedGpu {
    /// A healthy GPU with only an index and a model.
    pub fn new(index: u32, model: impl Into<String>) -> Self {
        ObservedGpu {
            index,
            model: model.into(),
            memory_mib: None,
            healthy: true,
            uuid: None,
            pci_bus_id: None,
            nvlink_domain: None,
            health_reason: None,
            details: None,
        }
    }
}

/// Per-GPU facts from NVML that the engine does not use: modes, error
/// counters, telemetry. Every field is optional: absent means "unknown"
/// (the GPU or driver does not support the query).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuDetails {
    /// The product name as NVML reports it, before normalisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    /// MIG mode: is it on now, and will it be after the next reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<ModeState>,
    /// ECC mode: on now, and after the next reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc: Option<ModeState>,
    /// Uncorrectable ECC errors since the driver loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_uncorrectable_volatile: Option<u64>,
    /// Uncorrectable ECC errors over the GPU's lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_uncorrectable_aggregate: Option<u64>,
    /// Memory pages waiting to be retired at the next reset (pre-Ampere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_pages_pending: Option<bool>,
    /// Row remapping (Ampere and newer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows: Option<RemappedRows>,
    /// Active NVLink links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_active: Option<u32>,
    /// PCI bus ids at the other end of the active links (GPUs or NVSwitches), sorted, unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlink_peers: Vec<String>,
    /// GPU die temperature, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// Power draw, watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_draw_w: Option<u32>,
    /// Enforced power limit, watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_w: Option<u32>,
    /// Percent of time a kernel ran over the last sample period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_gpu_pct: Option<u32>,
    /// Percent of time memory was read or written over the last sample period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_memory_pct: Option<u32>,
}

/// A mode's current and pending (after reset) state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModeState {
    /// On now.
    pub current: bool,
    /// On after the next reset or reboot.
    pub pending: bool,
}

/// Row-remapping counters of one GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RemappedRows {
    /// Rows remapped for correctable errors.
    #[serde(default)]
    pub correctable: u64,
    /// Rows remapped for uncorrectable errors.
    #[serde(default)]
    pub uncorrectable: u64,
    /// A remap waits for the next GPU reset.
    #[serde(default)]
    pub pending: bool,
    /// A remap failed: the GPU needs replacing.
    #[serde(default)]
    pub failed: bool,
}

fn default_true() -> bool {
    true
}

/// A job holding GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunningJob {
    /// The Job's name.
    pub job: String,
    /// When it started (time limits count from here).
    #[serde(with = "crate::time::fast")]
    #[schemars(with = "Timestamp")]
    pub started: Timestamp,
    /// GPUs held, per node.
    pub placement: Vec<NodeGpus>,
    /// Set while a preemption's grace period runs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::time::fast::option"
    )]
    #[schemars(with = "Option<Timestamp>")]
    pub preempting_since: Option<Timestamp>,
    /// The job the preemption makes room for (its GPUs are kept for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_for: Option<String>,
    /// The value of the Job's `gitfleet/restart` annotation when it started
    /// (none: it had none); a new value restarts the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
    /// The digest of the spec fields it started with (`JobSpec::runtime_digest`;
    /// none: unknown), so a plan can say that it runs an older spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_digest: Option<String>,
}

/// GPU indices on one node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct NodeGpus {
    /// Node name.
    pub node: String,
    /// GPU indices on that node.
    pub gpus: Vec<u32>,
}

/// When a pending job was first seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueuedJob {
    /// The Job's name.
    pub job: String,
    /// First seen by the reconciler.
    #[serde(with = "crate::time::fast")]
    #[schemars(with = "Timestamp")]
    pub since: Timestamp,
    /// GPUs that preemptions made free for this job (written by executors when
    /// a victim with `preemptedFor` stops); kept for it while it is pending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nominated: Vec<NodeGpus>,
}

/// A job that ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompletedJob {
    /// The Job's name.
    pub job: String,
    /// When it ended.
    #[serde(with = "crate::time::fast")]
    #[schemars(with = "Timestamp")]
    pub finished: Timestamp,
    /// Process exit code, when known (0: success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// How it ended, e.g. `succeeded`, `failed`, `time limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The inventory assumed when no observed state is given: pool `P` has nodes
/// `P-0 … P-(min-1)`, all GPUs healthy, racks `P-r0, P-r1 …` of
/// `nodesPerRack` nodes (no rack label when unset), the pool's labels, and
/// nothing runs.
pub fn derive_inventory(fleet: &Fleet) -> ObservedState {
    let mut nodes = Vec::new();
    for pool in &fleet.pools {
        let spec = &pool.spec;
        for i in 0..spec.size.min {
            nodes.push(pool_node(pool.name(), spec, i));
        }
    }
    ObservedState {
        time: None,
        nodes,
        running: Vec::new(),
        queued: Vec::new(),
        completed: Vec::new(),
        attained: BTreeMap::new(),
    }
}

/// Node number `i` of a pool as the derived inventory (and scale-up) names it.
pub fn pool_node(pool: &str, spec: &crate::spec::NodePoolSpec, i: u32) -> ObservedNode {
    let mut labels = spec.labels.clone();
    if let Some(per_rack) = spec.nodes_per_rack.filter(|n| *n > 0) {
        labels.insert("rack".to_string(), format!("{pool}-r{}", i / per_rack));
    }
    ObservedNode {
        name: format!("{pool}-{i}"),
        pool: Some(pool.to_string()),
        labels,
        idle_since: None,
        gpus: (0..spec.gpu.count)
            .map(|index| ObservedGpu {
                memory_mib: spec.gpu.memory_gib.map(|g| u64::from(g) * 1024),
                ..ObservedGpu::new(index, spec.gpu.model.clone())
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DESIGN.md §3's GPU line reads and writes as written there; the
    /// spelling of earlier versions still reads.
    #[test]
    fn memory_is_spelt_as_the_contract_spells_it() {
        let line = r#"{"index": 0, "model": "H100-SXM-80GB", "memoryMiB": 81559, "healthy": true, "uuid": "GPU-1"}"#;
        let gpu: ObservedGpu = serde_json::from_str(line).unwrap();
        assert_eq!(gpu.memory_mib, Some(81559));
        let json = serde_json::to_value(&gpu).unwrap();
        assert_eq!(json["memoryMiB"], 81559);
        assert!(json.get("memoryMib").is_none());
        let old: ObservedGpu =
            serde_json::from_str(r#"{"index": 0, "model": "X", "memoryMib": 40960}"#).unwrap();
        assert_eq!(old.memory_mib, Some(40960));
    }
}
