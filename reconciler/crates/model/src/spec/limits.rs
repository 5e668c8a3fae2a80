//! Documented bounds on sizes in a fleet, so that no commit can make a
//! command allocate without bound. A value beyond them is a validation error
//! with its position (the schema's `maximum`, or a fleet-wide check).

/// GPUs per node (`NodePool.spec.gpu.count`) and per replica
/// (`Job.spec.gpusPerReplica`, since a replica never spans nodes).
pub const MAX_GPUS_PER_NODE: u32 = 128;
/// Nodes per pool (`NodePool.spec.size.min` and `.max`).
pub const MAX_POOL_NODES: u32 = 100_000;
/// Replicas of one job (`Job.spec.replicas`).
pub const MAX_REPLICAS: u32 = 100_000;
/// Nodes of all pools together at their `size.max`.
pub const MAX_FLEET_NODES: u64 = 200_000;
/// GPUs of all pools together at their `size.max`.
pub const MAX_FLEET_GPUS: u64 = 2_000_000;
/// Quota figures (`guaranteed`, `limit`), in GPUs.
pub const MAX_QUOTA_GPUS: u32 = 100_000_000;
/// Fair-share `weight`.
pub const MAX_WEIGHT: u32 = 1_000_000;
