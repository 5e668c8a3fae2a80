//! A Job's `kubernetes:` section: what the kube executor adds to each of
//! its Pods (docs/kubernetes.md). Other executors ignore it. Fields
//! gitfleet owns (the scheduler, the node, GPUs, its labels and
//! annotations, the rendezvous env, privileged containers) are not here
//! and cannot be set.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::DNS_LABEL_PATTERN;

/// A Kubernetes resource quantity (`16`, `500m`, `200Gi`, `1e3`).
pub const QUANTITY_PATTERN: &str =
    r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$";
/// A DNS-1123 subdomain (a service account's or a Secret's name).
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A label value: empty, or at most 63 alphanumerics, `-`, `_` and `.`
/// beginning and ending alphanumerically.
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$";
/// A label or annotation key: an optional DNS-subdomain prefix and `/`,
/// then a name of at most 63 characters.
pub const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
/// Where the shared-memory volume is mounted.
pub const SHM_PATH: &str = "/dev/shm";
/// Volume names starting so are gitfleet's (`gitfleet-shm`).
pub const RESERVED_VOLUME_PREFIX: &str = "gitfleet-";

/// What the kube executor adds to each Pod of the job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesSpec {
    /// The Pods' service account (`spec.serviceAccountName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DNS_SUBDOMAIN_PATTERN), length(max = 253))]
    pub service_account_name: Option<String>,
    /// Secrets to pull the image with (`spec.imagePullSecrets`), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = DNS_SUBDOMAIN_PATTERN), length(max = 253)))]
    pub image_pull_secrets: Vec<String>,
    /// Labels added to each Pod; keys under `gitfleet.io/` and
    /// `app.kubernetes.io/managed-by` are gitfleet's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = {"pattern": QUALIFIED_NAME_PATTERN, "maxLength": 317}))]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": LABEL_VALUE_PATTERN}))]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to each Pod; keys under `gitfleet.io/` are
    /// gitfleet's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = {"pattern": QUALIFIED_NAME_PATTERN, "maxLength": 317}))]
    pub annotations: BTreeMap<String, String>,
    /// Taints the Pods tolerate (`spec.tolerations`), e.g. a GPU node's
    /// `NoExecute` taint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// CPU, memory and ephemeral storage of the container (the GPUs are
    /// gitfleet's: `nvidia.com/gpu` is set from the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Size of a memory-backed `/dev/shm` (an `emptyDir` with medium
    /// `Memory`), as PyTorch's data loaders need beyond the runtime's 64 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUANTITY_PATTERN))]
    pub shared_memory: Option<String>,
    /// Volumes, each mounted into the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// The Pod's security context (users, groups, seccomp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    /// The security context of the main and every init container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<ContainerSecurityContext>,
    /// Containers run, in order, to completion before the main one
    /// (fetching data, warming a cache); they get no GPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<InitContainer>,
}

/// A toleration (`spec.tolerations[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    /// The taint's key; none with `operator: Exists` tolerates every taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub key: Option<String>,
    /// `Equal` (default) or `Exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    /// The taint's value (with `Equal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`; none: every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// With `NoExecute`: how long the Pod stays once the taint appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// How a toleration matches a taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TolerationOperator {
    /// Key and value equal.
    Equal,
    /// The key exists (any value).
    Exists,
}

impl TolerationOperator {
    /// As Kubernetes writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TolerationOperator::Equal => "Equal",
            TolerationOperator::Exists => "Exists",
        }
    }
}

/// A taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintEffect {
    /// Not scheduled there.
    NoSchedule,
    /// Preferably not scheduled there.
    PreferNoSchedule,
    /// Evicted from there.
    NoExecute,
}

impl TaintEffect {
    /// As Kubernetes writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// The container's requests and limits besides GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    /// What the container is guaranteed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceList>,
    /// What it may use at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
}

/// CPU, memory and ephemeral storage, as quantities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceList {
    /// Cores (`16`, `500m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUANTITY_PATTERN))]
    pub cpu: Option<String>,
    /// Bytes (`200Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUANTITY_PATTERN))]
    pub memory: Option<String>,
    /// Bytes of local scratch space (`100Gi`).
    #[serde(
        default,
        rename = "ephemeral-storage",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(regex(pattern = QUANTITY_PATTERN))]
    pub ephemeral_storage: Option<String>,
}

impl ResourceList {
    /// The quantities given, by Kubernetes resource name.
    pub fn entries(&self) -> Vec<(&'static str, &str)> {
        [
            ("cpu", &self.cpu),
            ("memory", &self.memory),
            ("ephemeral-storage", &self.ephemeral_storage),
        ]
        .into_iter()
        .filter_map(|(name, q)| q.as_deref().map(|q| (name, q)))
        .collect()
    }
}

/// A volume and where the container mounts it; exactly one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Volume {
    /// The volume's name (unique in the job; `gitfleet-…` is reserved).
    #[schemars(regex(pattern = DNS_LABEL_PATTERN), length(max = 63))]
    pub name: String,
    /// An absolute path in the container.
    #[schemars(regex(pattern = "^/"))]
    pub mount_path: String,
    /// Mounted read-only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// A PersistentVolumeClaim in the job's namespace (datasets, checkpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSource>,
    /// A ConfigMap's keys as files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<NamedSource>,
    /// A Secret's keys as files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretSource>,
    /// Scratch space that lives as long as the Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirSource>,
}

impl Volume {
    /// How many sources it names (valid: exactly one).
    pub fn sources(&self) -> usize {
        usize::from(self.persistent_volume_claim.is_some())
            + usize::from(self.config_map.is_some())
            + usize::from(self.secret.is_some())
            + usize::from(self.empty_dir.is_some())
    }
}

/// `persistentVolumeClaim: {claimName}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimSource {
    /// The claim's name.
    #[schemars(regex(pattern = DNS_SUBDOMAIN_PATTERN), length(max = 253))]
    pub claim_name: String,
}

/// `configMap: {name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedSource {
    /// The object's name.
    #[schemars(regex(pattern = DNS_SUBDOMAIN_PATTERN), length(max = 253))]
    pub name: String,
}

/// `secret: {secretName}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSource {
    /// The Secret's name.
    #[schemars(regex(pattern = DNS_SUBDOMAIN_PATTERN), length(max = 253))]
    pub secret_name: String,
}

/// `emptyDir: {medium, sizeLimit}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmptyDirSource {
    /// `Memory` for a tmpfs; none: the node's disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<StorageMedium>,
    /// At most this much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUANTITY_PATTERN))]
    pub size_limit: Option<String>,
}

/// An `emptyDir`'s medium.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum StorageMedium {
    /// A tmpfs (counts against the container's memory).
    Memory,
}

/// A Linux capability as Kubernetes names it (`IPC_LOCK`, `SYS_PTRACE`).
pub const CAPABILITY_PATTERN: &str = r"^[A-Z][A-Z_]*$";
/// The main container's name; init containers may not take it.
pub const MAIN_CONTAINER: &str = "main";

/// The Pod's security context (`spec.securityContext`): users, groups and
/// the seccomp profile of every container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSecurityContext {
    /// The user the containers run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub run_as_user: Option<i64>,
    /// The primary group the containers run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub run_as_group: Option<i64>,
    /// Refuse to start a container whose image runs as root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    /// The group that owns the volumes (e.g. so a claim is writable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub fs_group: Option<i64>,
    /// More groups of the containers' processes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(range(min = 0)))]
    pub supplemental_groups: Vec<i64>,
    /// The seccomp profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<SeccompProfile>,
}

/// A seccomp profile (`seccompProfile`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeccompProfile {
    /// `RuntimeDefault`, `Localhost` or `Unconfined`.
    #[serde(rename = "type")]
    pub kind: SeccompType,
    /// With `Localhost`: the profile's path under the kubelet's seccomp
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localhost_profile: Option<String>,
}

/// Which seccomp profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SeccompType {
    /// The container runtime's default.
    RuntimeDefault,
    /// A file on the node (`localhostProfile`).
    Localhost,
    /// No seccomp filtering.
    Unconfined,
}

impl SeccompType {
    /// As Kubernetes writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SeccompType::RuntimeDefault => "RuntimeDefault",
            SeccompType::Localhost => "Localhost",
            SeccompType::Unconfined => "Unconfined",
        }
    }
}

/// A container's security context (`containers[].securityContext`),
/// given to the main and every init container. There is no `privileged`:
/// a privileged container sees every GPU of its node, and which GPUs a
/// replica uses is gitfleet's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerSecurityContext {
    /// The user the container runs as (over the Pod's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub run_as_user: Option<i64>,
    /// The primary group the container runs as (over the Pod's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub run_as_group: Option<i64>,
    /// Refuse to start when the image runs as root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    /// Whether a process may gain more privileges than its parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_privilege_escalation: Option<bool>,
    /// A read-only root file system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_root_filesystem: Option<bool>,
    /// Capabilities added to and dropped from the runtime's default set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
}

/// `capabilities: {add, drop}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Added (`IPC_LOCK` for RDMA memory registration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = CAPABILITY_PATTERN)))]
    pub add: Vec<String>,
    /// Dropped (`ALL`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = CAPABILITY_PATTERN)))]
    pub drop: Vec<String>,
}

/// A container run to completion before the main one
/// (`spec.initContainers[]`): it mounts the section's volumes and gets no
/// GPU (gitfleet sets `NVIDIA_VISIBLE_DEVICES=void` in it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitContainer {
    /// Its name (unique; not `main`, not `gitfleet-…`).
    #[schemars(regex(pattern = DNS_LABEL_PATTERN), length(max = 63))]
    pub name: String,
    /// Its image.
    #[schemars(length(min = 1))]
    pub image: String,
    /// Its command (none: the image's entrypoint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Its environment: plain values; names gitfleet sets are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = {"pattern": ENV_NAME_PATTERN}))]
    pub env: BTreeMap<String, String>,
    /// Its CPU, memory and ephemeral storage (never GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

/// An environment variable's name as Kubernetes takes it.
pub const ENV_NAME_PATTERN: &str = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$";

/// Environment variables gitfleet sets in its containers (the GPUs, the
/// rendezvous, the job): an init container may not set them.
pub const OWNED_ENV: &[&str] = &[
    "GITFLEET_JOB",
    "GITFLEET_GPUS",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
];
