//! The fleet spec model: the five document kinds and the loaded [`Fleet`].

mod duration;
mod env;
mod job;
pub mod kubernetes;
pub mod limits;
mod meta;
mod node_pool;
mod policy;
mod priority_class;
mod queue;
mod restart;
pub mod schema;
pub mod slurm;

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use duration::{DURATION_PATTERN, Duration, DurationError};
pub use env::{EnvSource, EnvValue, InlineValue, MASK, SecretKeyRef, ValueFrom};
pub use job::{GpuSelector, JobSpec, Topology, TopologyLevel};
pub use kubernetes::KubernetesSpec;
pub use meta::{API_VERSION, DNS_LABEL_PATTERN, Metadata, is_dns_label};
pub use node_pool::{DEFAULT_SCALE_DOWN_AFTER, NodePoolSpec, NvLink, PoolGpu, PoolSize};
pub use policy::{PolicyMatch, PolicyRule, PolicySpec};
pub use priority_class::PriorityClassSpec;
pub use queue::{ModelQuota, QueueOrdering, QueueSpec};
pub use restart::{EXECUTOR_SECTIONS, RESTART_ANNOTATION, RUNTIME_FIELDS};
pub use slurm::SlurmSpec;

use crate::diag::Origin;

/// The document kinds of `apiVersion: gitfleet/v1`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Kind {
    /// [`NodePoolSpec`]
    NodePool,
    /// [`QueueSpec`]
    Queue,
    /// [`PriorityClassSpec`]
    PriorityClass,
    /// [`JobSpec`]
    Job,
    /// [`PolicySpec`]
    Policy,
}

impl Kind {
    /// Every kind, in the order reports list them.
    pub const ALL: [Kind; 5] = [
        Kind::NodePool,
        Kind::Queue,
        Kind::PriorityClass,
        Kind::Job,
        Kind::Policy,
    ];

    /// The `kind:` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NodePool => "NodePool",
            Kind::Queue => "Queue",
            Kind::PriorityClass => "PriorityClass",
            Kind::Job => "Job",
            Kind::Policy => "Policy",
        }
    }

    /// Parses a `kind:` string.
    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A whole document as written: the envelope plus a kind's spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest<S> {
    /// Always `gitfleet/v1`.
    pub api_version: String,
    /// The document kind.
    pub kind: String,
    /// Name, labels, annotations.
    pub metadata: Metadata,
    /// The kind's spec.
    pub spec: S,
}

/// A loaded document: metadata, typed spec, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Object<S> {
    /// Name, labels, annotations.
    pub metadata: Metadata,
    /// The kind's spec, with defaults applied.
    pub spec: S,
    /// The document's file and position.
    pub origin: Origin,
}

impl<S> Object<S> {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
}

/// Every gitfleet document of a fleet repository, in file and document order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleet {
    /// `kind: NodePool`
    pub pools: Vec<Object<NodePoolSpec>>,
    /// `kind: Queue`
    pub queues: Vec<Object<QueueSpec>>,
    /// `kind: PriorityClass`
    pub priority_classes: Vec<Object<PriorityClassSpec>>,
    /// `kind: Job`
    pub jobs: Vec<Object<JobSpec>>,
    /// `kind: Policy`
    pub policies: Vec<Object<PolicySpec>>,
}

impl Fleet {
    /// How many documents of `kind` the fleet holds.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::NodePool => self.pools.len(),
            Kind::Queue => self.queues.len(),
            Kind::PriorityClass => self.priority_classes.len(),
            Kind::Job => self.jobs.len(),
            Kind::Policy => self.policies.len(),
        }
    }

    /// The priority class a job runs under: the one it names, else the
    /// fleet's default class (none when it names an unknown class or the
    /// fleet has no default).
    pub fn priority_class_of(&self, job: &JobSpec) -> Option<&Object<PriorityClassSpec>> {
        match job.priority_class.as_deref() {
            Some(name) => self.priority_classes.iter().find(|c| c.name() == name),
            None => self.priority_classes.iter().find(|c| c.spec.default),
        }
    }

    /// A job's grace period (from [`Fleet::priority_class_of`]; zero
    /// without a class). `None` is a job no longer in Git: the default class's.
    pub fn grace_period_of(&self, job: Option<&JobSpec>) -> Duration {
        let class = match job {
            Some(job) => self.priority_class_of(job),
            None => self.priority_classes.iter().find(|c| c.spec.default),
        };
        class.map(|c| c.spec.grace_period).unwrap_or_default()
    }

    /// Whether some queue orders by least attained service (`ordering:
    /// least-attained`; its leaves inherit it): only then does the observed
    /// state's `attained` map matter to a plan.
    pub fn orders_by_attained_service(&self) -> bool {
        self.queues
            .iter()
            .any(|q| q.spec.ordering == Some(QueueOrdering::LeastAttained))
    }

    /// The GPU models that at least one pool provides, sorted.
    pub fn pool_models(&self) -> Vec<&str> {
        let mut models: Vec<&str> = self
            .pools
            .iter()
            .map(|p| p.spec.gpu.model.as_str())
            .collect();
        models.sort_unstable();
        models.dedup();
        models
    }
}
