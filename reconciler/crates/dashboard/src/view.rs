//! The view model: what the dashboard shows, as plain data. The reconcile
//! loop builds it after every iteration (`reconcile::view`), serves it and
//! writes it to `dashboard.json` in the state directory, where `gitfleet
//! serve` reads it back. The Prometheus gauges are set from the same data.

use serde::{Deserialize, Serialize};

/// The version of `dashboard.json`'s layout.
pub const FORMAT_VERSION: u32 = 1;

/// Pending jobs listed in the view (all are counted in `pending_total` and
/// in the queues' tallies).
pub const MAX_PENDING: usize = 500;

/// Everything the dashboard shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetView {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The reconciler's time of the iteration, RFC 3339.
    pub time: String,
    /// The executor's name (`sim`, `local`, …).
    pub executor: String,
    /// Applied and attempted revisions, and the last error.
    pub revisions: RevisionsView,
    /// Queues in tree order (depth first, siblings by name).
    pub queues: Vec<QueueView>,
    /// Pools by name, then nodes of no declared pool under `""`.
    pub pools: Vec<PoolView>,
    /// The first pending jobs in the plan's fair-share order (at most
    /// [`MAX_PENDING`]).
    pub pending: Vec<PendingView>,
    /// How many jobs are pending in all.
    #[serde(default)]
    pub pending_total: u64,
    /// The newest entries of the action log, newest first.
    pub actions: Vec<ActionView>,
}

/// Revision bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionsView {
    /// The revision whose plan was last carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
    /// The last revision tried (it may have been refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempted: Option<String>,
    /// Why the attempted revision was refused, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// One queue of the quota tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueView {
    /// Name.
    pub name: String,
    /// Its parent, `None` for a top-level queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Depth in the tree (0 for top-level queues).
    pub depth: u32,
    /// Usage against quota, one entry per GPU model of the fleet.
    pub models: Vec<QueueModel>,
    /// Pending jobs of the queue's subtree by the models they accept and
    /// their priority class.
    pub pending: Vec<PendingTally>,
}

/// A queue's usage of one GPU model; every count covers the queue's subtree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueModel {
    /// GPU model.
    pub model: String,
    /// GPUs held by the subtree's running jobs.
    pub used: u64,
    /// GPUs guaranteed (0 when the quota does not list the model).
    pub guaranteed: u64,
    /// The cap; `None`: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Used beyond the guarantee.
    pub borrowed: u64,
}

/// Pending jobs that accept the same models, of one priority class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingTally {
    /// The model they need, `any`, or several joined by `|`.
    pub model: String,
    /// Their priority class (`""` when they have none).
    pub priority_class: String,
    /// Jobs.
    pub jobs: u64,
    /// GPUs they ask for in all.
    pub gpus: u64,
}

/// One node pool with its nodes by rack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolView {
    /// Name (`""` for nodes of no declared pool).
    pub name: String,
    /// Ready nodes.
    pub nodes: u64,
    /// Nodes whose GPUs are all healthy.
    pub healthy_nodes: u64,
    /// Nodes drained (no new placements).
    pub drained_nodes: u64,
    /// Nodes with at least one GPU held.
    pub allocated_nodes: u64,
    /// GPU counts per model.
    pub gpus: Vec<GpuTally>,
    /// Racks by name (`""`: nodes without a `rack` label).
    pub racks: Vec<RackView>,
}

/// GPU counts of one model in a pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuTally {
    /// GPU model.
    pub model: String,
    /// GPUs on ready nodes.
    pub total: u64,
    /// Healthy GPUs.
    pub healthy: u64,
    /// GPUs held by running jobs.
    pub allocated: u64,
    /// GPUs on drained nodes.
    pub drained: u64,
}

/// One rack of a pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RackView {
    /// The `rack` label (`""` when the nodes have none).
    pub name: String,
    /// Nodes by name.
    pub nodes: Vec<NodeView>,
}

/// One node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// Drained: no new placements (an unhealthy GPU).
    pub drained: bool,
    /// GPUs by index.
    pub gpus: Vec<GpuView>,
}

/// One GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuView {
    /// Index on the node.
    pub index: u32,
    /// Model.
    pub model: String,
    /// Healthy.
    pub healthy: bool,
    /// The running job that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// That job's queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// A pending job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingView {
    /// Job name.
    pub job: String,
    /// Its leaf queue.
    pub queue: String,
    /// The models it accepts (`any`, or joined by `|`).
    pub model: String,
    /// GPUs it asks for.
    pub gpus: u64,
    /// What it waits for (`quota`, `resources`, …).
    pub waiting_for: String,
    /// The binding constraint in words.
    pub reason: String,
    /// When it is expected to start (computed for the first
    /// [`MAX_STARTS`] pending jobs only; `None` for the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_start: Option<StartView>,
}

/// Pending jobs whose expected start the view carries (the first ones in
/// the plan's order; the page lists them first).
pub const MAX_STARTS: usize = 50;

/// A pending job's expected start (the `whatif` crate's answer, as
/// `explain` and `plan --suggest -o json` give it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartView {
    /// `expected`, `later`, `unknown` or `never`.
    pub status: String,
    /// RFC 3339: the latest start (`expected`) or the horizon (`later`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// In words.
    pub text: String,
}

/// One entry of the action log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionView {
    /// When, RFC 3339.
    pub time: String,
    /// The revision whose plan caused it (empty for the fleet's events).
    pub revision: String,
    /// `place`, `preempt`, …, or an event (`succeeded`, `refused`, …).
    pub what: String,
    /// The job, node or pool.
    pub subject: String,
    /// Details.
    pub detail: String,
}
