//! The `kube` executor: gitfleet as the GPU scheduler of a Kubernetes
//! cluster, through kube-rs (docs/kubernetes.md).
//!
//! - Inventory: the cluster's Nodes ([`nodes::observed_node`]), with the
//!   per-GPU view the node agent publishes on each ([`agent::AgentView`]).
//! - Place: a headless Service per multi-replica job, one Pod per replica
//!   with `schedulerName: gitfleet` ([`pods::Gang`]), all created before
//!   any is bound, then each bound to its planned node through the Binding
//!   subresource. Names derive from the job, its attempt and its placement
//!   ([`names::start_key`]), so an action carried out again after a crash
//!   meets 409 AlreadyExists and goes on: no duplicate Pods.
//! - Preempt: the Eviction API with the class's grace period; terminate
//!   and cancel: delete with the grace period. Once a stopped job's Pods
//!   are gone its Service goes too.
//! - Watch: Nodes and gitfleet's Pods are kept in watch caches
//!   ([`cache::Watched`]): listed once, then watched, the events drained at
//!   the start of each observation, so an unchanged iteration makes no
//!   request. What the cache says is confirmed by a LIST of the job's Pods
//!   before a job is reported ended or gone, and a Pod this executor bound
//!   is never taken for a leftover of an unfinished start.
//! - Observe: Pod phases and exit codes ([`status::job_state`]) become the
//!   loop's events; a gang with a failed replica has its other Pods
//!   deleted and is reported when all have ended; a Pod on a Node that is
//!   gone has ended with no code.
//! - Scale: the `/scale` subresource of the pool's configured target
//!   ([`scale::ScaleTarget`]), within the pool's size.
//! - Drain: cordon (`spec.unschedulable`) and taint
//!   `gitfleet.io/unhealthy-gpu:NoSchedule`; running Pods stay.
//! - One writer: with a Lease configured ([`lease::Elector`]) every
//!   iteration starts by acquiring or renewing it, and every write
//!   checks it is still held; a replica that does not lead writes nothing.
//!   When the loop stops, the leader releases the Lease
//!   ([`lease::Elector::release`]) so another replica takes over at once.
//!
//! Objects without gitfleet's managed-by label are never listed, changed
//! or deleted: every list carries [`names::MANAGED_SELECTOR`] and every
//! write names an object gitfleet created, except a drained Node, a
//! pool's scale target and the Lease.

pub mod agent;
pub mod cache;
pub mod errors;
mod leader;
pub mod lease;
pub mod names;
pub mod nodes;
pub mod pods;
pub mod scale;
pub mod status;
pub mod template;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use cache::Watched;

use exec::{
    ActionContext, Capabilities, Event, ExecError, Executor, JobView, Observation, Outcome,
    StopKind, busy_nodes,
};
use model::observed::{NodeGpus, Timestamp};
use model::plan::Action;
use model::spec::{Duration, Fleet};

use errors::{action_error, already_exists, conflict, not_found, observe_error};
use leader::{LeaseSlot, SharedLease, spawn_renewal};
use lease::{Elector, Leadership, LeaseConfig};
use names::{JOB_LABEL, MANAGED_SELECTOR, job_selector};
use nodes::NodeLabels;
use pods::Gang;
use scale::ScaleTarget;
use status::JobState;

/// A cluster's configuration (kubeconfig or in-cluster), as kube-rs reads it.
pub use kube::Config as ClusterConfig;

/// A kube-rs client (the node agent makes one from a [`ClusterConfig`]).
pub use kube::Client;

pub use leader::LeaseClock;

/// The field manager of gitfleet's writes.
pub const FIELD_MANAGER: &str = "gitfleet";

/// Where a job's objects go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespaces {
    /// Every job in this namespace.
    Fixed(String),
    /// Each job in the namespace named like its top-level queue (which
    /// must exist); gitfleet then lists its Pods in all namespaces.
    PerQueue,
}

/// How the executor reads and writes the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeConfig {
    /// Where jobs' objects go.
    pub namespaces: Namespaces,
    /// Which Node labels name the pool and the rack.
    pub labels: NodeLabels,
    /// Pool → the object whose `/scale` subresource sizes it
    /// (`--kube-scale-target`); pools without one are not scaled.
    pub scale_targets: BTreeMap<String, ScaleTarget>,
    /// The Lease to hold before writing; `None`: no leader election.
    pub lease: Option<LeaseConfig>,
}

impl KubeConfig {
    /// Jobs in `namespaces`, the default Node labels, no scale targets,
    /// no leader election.
    pub fn new(namespaces: Namespaces) -> Self {
        KubeConfig {
            namespaces,
            labels: NodeLabels::default(),
            scale_targets: BTreeMap::new(),
            lease: None,
        }
    }
}

/// Why the executor could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No kubeconfig and no in-cluster service account.
    #[error("no Kubernetes cluster configuration: {0}")]
    Config(String),
}

/// The cluster configuration the usual way: `$KUBECONFIG` (or
/// `~/.kube/config`), else the in-cluster service account.
pub async fn infer_config() -> Result<ClusterConfig, KubeError> {
    kube::Config::infer()
        .await
        .map_err(|e| KubeError::Config(e.to_string()))
}

/// The client, or what makes one: a kube-rs client spawns its worker on
/// the async runtime it is made in, so one made from a configuration is
/// made on the loop's runtime, at the first call.
#[derive(Clone)]
enum Connection {
    Ready(Client),
    Pending(Box<kube::Config>),
}

/// What the executor knows from its watches.
#[derive(Debug)]
struct WatchState {
    /// The cluster's Nodes.
    nodes: Watched<Node>,
    /// gitfleet's Pods.
    pods: Watched<Pod>,
    /// Pods this executor bound (namespace, name) that the Pod cache does
    /// not show bound yet: not leftovers of an unfinished start.
    bound: BTreeSet<(String, String)>,
}

/// Runs jobs as Pods of a Kubernetes cluster.
pub struct KubeExecutor {
    connection: Connection,
    config: KubeConfig,
    /// The watch caches (boxed: the executor stays small).
    watch: Box<WatchState>,
    /// Nodes cordoned and tainted (drained) at the last observation.
    drained: BTreeSet<String>,
    /// Since when each node has had no job (kept in memory).
    idle: BTreeMap<String, Timestamp>,
    /// Queue → its top-level queue (from the fleet).
    top_queue: BTreeMap<String, String>,
    /// Pool → the GPU model it declares (from the fleet).
    pool_models: BTreeMap<String, String>,
    /// Pool → its `size` (min, max) (from the fleet).
    pool_sizes: BTreeMap<String, (u32, u32)>,
    /// Pool → its scale target's `spec.replicas`, as last read or written.
    scales: BTreeMap<String, i32>,
    /// The Lease this replica must hold to write, if elected (shared with
    /// the task that renews it between iterations).
    lease: Option<SharedLease>,
    /// The wall clock the Lease is kept on.
    clock: LeaseClock,
}

impl std::fmt::Debug for KubeExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeExecutor")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn grace_secs(grace: Duration) -> u32 {
    u32::try_from(grace.as_secs()).unwrap_or(u32::MAX)
}

fn job_error(action: &'static str, job: &str, message: impl Into<String>) -> ExecError {
    ExecError::Action {
        action,
        subject: job.to_string(),
        message: message.into(),
    }
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_string()),
    }
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

fn delete_params(grace: Duration) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(grace_secs(grace)),
        ..DeleteParams::default()
    }
}

/// A Pod of a start that failed part-way (created, never bound): it holds
/// nothing, and the job is planned again under other names. Place and
/// observe never overlap, and an intent left by a crash is carried out
/// before the next observation, so no start in progress has such Pods.
fn unbound(pod: &Pod) -> bool {
    pod.spec.as_ref().is_none_or(|s| s.node_name.is_none())
        && is_live(pod)
        && pod.metadata.deletion_timestamp.is_none()
}

fn is_live(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed"))
}

impl KubeExecutor {
    /// An executor over `client` (its default namespace is not used:
    /// [`KubeConfig::namespaces`] says where jobs go).
    pub fn new(client: Client, config: KubeConfig) -> Self {
        Self::with(Connection::Ready(client), config)
    }

    /// An executor that connects with `cluster` at its first call (on the
    /// runtime it is called on).
    pub fn from_config(cluster: ClusterConfig, config: KubeConfig) -> Self {
        Self::with(Connection::Pending(Box::new(cluster)), config)
    }

    fn with(connection: Connection, config: KubeConfig) -> Self {
        KubeExecutor {
            lease: config.lease.clone().map(|c| {
                Arc::new(tokio::sync::Mutex::new(LeaseSlot {
                    elector: Elector::new(c),
                    client: None,
                    generation: 0,
                }))
            }),
            clock: Arc::new(chrono::Utc::now),
            connection,
            watch: Box::new(WatchState {
                nodes: Watched::new(None),
                pods: Watched::new(Some(MANAGED_SELECTOR)),
                bound: BTreeSet::new(),
            }),
            config,
            drained: BTreeSet::new(),
            idle: BTreeMap::new(),
            top_queue: BTreeMap::new(),
            pool_models: BTreeMap::new(),
            pool_sizes: BTreeMap::new(),
            scales: BTreeMap::new(),
        }
    }

    /// The same executor keeping its Lease on `clock` (tests).
    pub fn with_lease_clock(mut self, clock: LeaseClock) -> Self {
        self.clock = clock;
        self
    }

    /// The client, made now if it is not yet.
    fn connect(&mut self) -> Result<Client, ExecError> {
        match &self.connection {
            Connection::Ready(client) => Ok(client.clone()),
            Connection::Pending(cluster) => {
                let client = Client::try_from((**cluster).clone()).map_err(|e| {
                    ExecError::Inventory(format!("cannot make a Kubernetes client: {e}"))
                })?;
                self.connection = Connection::Ready(client.clone());
                Ok(client)
            }
        }
    }

    /// The namespace of a job charged to `queue`.
    pub fn namespace_of(&self, queue: &str) -> String {
        match &self.config.namespaces {
            Namespaces::Fixed(ns) => ns.clone(),
            Namespaces::PerQueue => self
                .top_queue
                .get(queue)
                .cloned()
                .unwrap_or_else(|| queue.to_string()),
        }
    }

    /// Where gitfleet's Pods are listed.
    fn pod_scope(&self, client: &Client) -> Api<Pod> {
        match &self.config.namespaces {
            Namespaces::Fixed(ns) => Api::namespaced(client.clone(), ns),
            Namespaces::PerQueue => Api::all(client.clone()),
        }
    }

    fn service_scope(&self, client: &Client) -> Api<Service> {
        match &self.config.namespaces {
            Namespaces::Fixed(ns) => Api::namespaced(client.clone(), ns),
            Namespaces::PerQueue => Api::all(client.clone()),
        }
    }

    /// The Pods of `job` (every attempt).
    async fn job_pods(
        &self,
        client: &Client,
        action: &'static str,
        job: &str,
    ) -> Result<Vec<Pod>, ExecError> {
        let lp = ListParams::default().labels(&job_selector(job));
        self.pod_scope(client)
            .list(&lp)
            .await
            .map(|l| l.items)
            .map_err(|e| action_error(action, job, &e))
    }

    async fn place(
        &mut self,
        client: &Client,
        job: &str,
        placement: &[NodeGpus],
        ctx: &ActionContext<'_>,
    ) -> Result<Outcome, ExecError> {
        let spec = ctx
            .spec
            .ok_or_else(|| job_error("place", job, "the job is not in Git"))?;
        let namespace = self.namespace_of(&spec.spec.queue);
        let gang = Gang {
            job: spec,
            placement,
            attempt: ctx.attempt.as_deref(),
            revision: ctx.revision,
            grace: ctx.grace,
            namespace: &namespace,
        };
        gang.check()
            .map_err(|e| job_error("place", job, e.to_string()))?;
        let pp = post_params();
        let base = gang.base();
        let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
        let owner = if gang.has_service() {
            let created = match services.create(&pp, &gang.service()).await {
                Ok(service) => service,
                Err(e) if already_exists(&e) => services
                    .get(&base)
                    .await
                    .map_err(|e| action_error("place", job, &e))?,
                Err(e) => return Err(action_error("place", job, &e)),
            };
            let uid = created
                .metadata
                .uid
                .ok_or_else(|| job_error("place", job, format!("service {base} has no uid")))?;
            Some(pods::service_owner(&base, &uid))
        } else {
            None
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        // Every Pod exists before any is bound: the gang starts whole.
        for rank in (0u32..).take(placement.len()) {
            let pod = gang
                .pod(rank, owner.clone())
                .map_err(|e| job_error("place", job, e.to_string()))?;
            match api.create(&pp, &pod).await {
                Ok(_) => {}
                Err(e) if already_exists(&e) => {}
                Err(e) => return Err(self.give_up(client, &gang, e).await),
            }
        }
        for (rank, part) in (0u32..).zip(placement) {
            let name = names::pod_name(&base, rank);
            let binding = pods::binding(&namespace, &name, &part.node);
            let bound: Result<serde_json::Value, _> = api
                .create_subresource("binding", &name, &pp, &binding)
                .await;
            match bound {
                Ok(_) => {}
                // Bound already (by the first try of this action).
                Err(e) if conflict(&e) => {}
                Err(e) => return Err(self.give_up(client, &gang, e).await),
            }
            // The Pod cache may see the Binding after the next observation
            // starts: until then this Pod is not a leftover.
            self.watch.bound.insert((namespace.clone(), name));
        }
        Ok(Outcome::Done)
    }

    /// A start that failed: when trying again cannot help, what it created
    /// is deleted (no half-started gang holds GPUs); the error to return.
    async fn give_up(&self, client: &Client, gang: &Gang<'_>, e: kube::Error) -> ExecError {
        let job = gang.job.name();
        let error = action_error("place", job, &e);
        if error.is_transient() {
            return error;
        }
        let base = gang.base();
        let api: Api<Pod> = Api::namespaced(client.clone(), gang.namespace);
        for rank in (0u32..).take(gang.placement.len()) {
            let name = names::pod_name(&base, rank);
            if let Err(e) = api.delete(&name, &DeleteParams::default()).await
                && !not_found(&e)
            {
                tracing::warn!(job, pod = %name, error = %e, "cannot delete the Pod of a failed start");
            }
        }
        if gang.has_service() {
            let services: Api<Service> = Api::namespaced(client.clone(), gang.namespace);
            if let Err(e) = services.delete(&base, &DeleteParams::background()).await
                && !not_found(&e)
            {
                tracing::warn!(job, service = %base, error = %e, "cannot delete the Service of a failed start");
            }
        }
        error
    }

    /// Evicts (preempt) or deletes (terminate, cancel) the job's live Pods
    /// with the grace period.
    async fn stop(
        &self,
        client: &Client,
        kind: StopKind,
        job: &str,
        ctx: &ActionContext<'_>,
    ) -> Result<Outcome, ExecError> {
        let action = kind.as_str();
        let mut underway = false;
        for pod in self.job_pods(client, action, job).await? {
            if !is_live(&pod) {
                continue;
            }
            underway = true;
            if pod.metadata.deletion_timestamp.is_some() {
                continue; // stopping already
            }
            let (Some(name), Some(ns)) = (&pod.metadata.name, &pod.metadata.namespace) else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            let done = match kind {
                StopKind::Preempt => {
                    // kube-rs's own `evict` writes `delete_options`, which
                    // the API server does not read: the body is made here.
                    let eviction = pods::eviction(ns, name, grace_secs(ctx.grace));
                    api.create_subresource::<_, serde_json::Value>(
                        "eviction",
                        name,
                        &post_params(),
                        &eviction,
                    )
                    .await
                    .map(|_| ())
                }
                StopKind::Terminate | StopKind::Cancel => api
                    .delete(name, &delete_params(ctx.grace))
                    .await
                    .map(|_| ()),
            };
            match done {
                Ok(()) => {}
                Err(e) if not_found(&e) => {}
                Err(e) => return Err(action_error(action, job, &e)),
            }
        }
        if underway {
            return Ok(Outcome::Underway);
        }
        // Nothing lives: stopped now, and no `Stopped` event will come.
        self.clean_up(client, job).await?;
        Ok(Outcome::Done)
    }

    /// Deletes the Services of a job that has stopped (and with them, by
    /// their owner references, its ended Pods).
    async fn clean_up(&self, client: &Client, job: &str) -> Result<(), ExecError> {
        let lp = ListParams::default().labels(&job_selector(job));
        let services = self
            .service_scope(client)
            .list(&lp)
            .await
            .map_err(|e| action_error("clean up", job, &e))?;
        for service in services.items {
            let (Some(name), Some(ns)) = (&service.metadata.name, &service.metadata.namespace)
            else {
                continue;
            };
            let api: Api<Service> = Api::namespaced(client.clone(), ns);
            match api.delete(name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(e) if not_found(&e) => {}
                Err(e) => return Err(action_error("clean up", job, &e)),
            }
        }
        Ok(())
    }

    /// Deletes a leftover Pod that was never bound ([`unbound`]); a
    /// failure is logged and the next observation tries again.
    async fn remove_unbound(&self, client: &Client, pod: &Pod) {
        let (Some(name), Some(ns)) = (&pod.metadata.name, &pod.metadata.namespace) else {
            return;
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        match api.delete(name, &delete_params(Duration::ZERO)).await {
            Ok(_) => tracing::info!(pod = %name, "deleted a Pod of a start that did not finish"),
            Err(e) if not_found(&e) => {}
            Err(e) => tracing::warn!(pod = %name, error = %e, "cannot delete an unbound Pod"),
        }
    }

    /// Deletes the live Pods of a gang that has failed.
    async fn stop_failed(
        &self,
        client: &Client,
        pods: &[&Pod],
        live: &[String],
        grace: Duration,
    ) -> Result<(), ExecError> {
        for pod in pods {
            let (Some(name), Some(ns)) = (&pod.metadata.name, &pod.metadata.namespace) else {
                continue;
            };
            if !live.contains(name) || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            match api.delete(name, &delete_params(grace)).await {
                Ok(_) => {}
                Err(e) if not_found(&e) => {}
                Err(e) => return Err(action_error("stop", name, &e)),
            }
        }
        Ok(())
    }

    /// Cordons `node` and taints it [`nodes::UNHEALTHY_TAINT`] (NoSchedule:
    /// its running Pods stay) in one patch, keeping its other taints; the
    /// patch carries the Node's resourceVersion, so a taint written by
    /// someone else meanwhile is not lost (409: transient, tried again).
    async fn drain(&mut self, client: &Client, node: &str) -> Result<Outcome, ExecError> {
        let api: Api<Node> = Api::all(client.clone());
        let current = api
            .get(node)
            .await
            .map_err(|e| action_error("drain", node, &e))?;
        if let Some(patch) = nodes::drain_patch(&current) {
            api.patch(node, &patch_params(), &Patch::Merge(patch))
                .await
                .map_err(|e| action_error("drain", node, &e))?;
        }
        self.drained.insert(node.to_string());
        Ok(Outcome::Done)
    }

    /// The replicas a scale of `pool` to `to` writes (within its size).
    fn replicas_for(&self, pool: &str, to: u32) -> i32 {
        scale::clamp(to, self.pool_sizes.get(pool).copied())
    }

    /// Reads each scale target's `spec.replicas` (so a scale already made
    /// is not made again); one that cannot be read is forgotten.
    async fn read_scales(&mut self, client: &Client) {
        for (pool, target) in &self.config.scale_targets {
            match target.api(client).get_scale(&target.name).await {
                Ok(s) => match s.spec.and_then(|s| s.replicas) {
                    Some(replicas) => {
                        self.scales.insert(pool.clone(), replicas);
                    }
                    None => {
                        self.scales.remove(pool);
                    }
                },
                Err(e) => {
                    tracing::warn!(pool, error = %e, "cannot read the pool's scale target");
                    self.scales.remove(pool);
                }
            }
        }
    }

    /// Sets the `/scale` of `pool`'s target to `to` (within the pool's
    /// size), unless it is that already.
    async fn scale(&mut self, client: &Client, pool: &str, to: u32) -> Result<Outcome, ExecError> {
        let Some(target) = self.config.scale_targets.get(pool) else {
            return Err(job_error(
                "scale",
                pool,
                format!(
                    "pool {pool} has no scale target: give --kube-scale-target {pool}=GROUP/VERSION/KIND/NAMESPACE/NAME (docs/kubernetes.md)"
                ),
            ));
        };
        let replicas = self.replicas_for(pool, to);
        let api = target.api(client);
        let current = api
            .get_scale(&target.name)
            .await
            .map_err(|e| action_error("scale", pool, &e))?;
        if current.spec.and_then(|s| s.replicas) != Some(replicas) {
            let patch = Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}}));
            api.patch_scale(&target.name, &patch_params(), &patch)
                .await
                .map_err(|e| action_error("scale", pool, &e))?;
        }
        self.scales.insert(pool.to_string(), replicas);
        Ok(Outcome::Done)
    }

    fn not_leader(elector: &Elector, holder: String) -> ExecError {
        let config = elector.config();
        ExecError::NotLeader {
            lease: format!("{}/{}", config.namespace, config.name),
            holder,
            retry_after: config.renew_every(),
        }
    }

    /// Before a write: whether this replica still leads (renewing the
    /// Lease when due); an error when it does not, so nothing is written.
    async fn check_leading(&mut self, client: &Client) -> Result<(), ExecError> {
        let now = (self.clock)();
        let Some(slot) = &self.lease else {
            return Ok(());
        };
        let mut slot = slot.lock().await;
        let elector = &mut slot.elector;
        let leading = elector
            .may_write(client, now)
            .await
            .map_err(|e| action_error("renew lease", &elector.config().name, &e))?;
        if leading {
            Ok(())
        } else {
            let holder = "another replica (this one lost the Lease)".to_string();
            Err(Self::not_leader(elector, holder))
        }
    }

    /// The event of one job the reconciler thinks runs, if it ended;
    /// `confirm`: the Pod cache may lag, so a job that looks anything but
    /// running is judged by a LIST of its Pods instead.
    async fn poll_job(
        &self,
        client: &Client,
        view: &JobView<'_>,
        pods: &[&Pod],
        nodes: &BTreeSet<&str>,
        now: Timestamp,
        confirm: bool,
    ) -> Result<Option<Event>, ExecError> {
        let job = view.job.to_string();
        let cached = status::newest_attempt(pods);
        let mut state = status::job_state(&cached, nodes);
        // The cache may lag (a Pod just created, an end not yet seen, a new
        // attempt's Pods behind the last one's): it can delay an event,
        // never invent one. Anything but Running is read again first,
        // unless the cache was listed in this observation.
        let listed;
        let mut pods = cached;
        if confirm && state != Some(JobState::Running) {
            listed = self.job_pods(client, "observe", &job).await?;
            let fresh: Vec<&Pod> = listed.iter().filter(|p| !unbound(p)).collect();
            pods = status::newest_attempt(&fresh);
            state = status::job_state(&pods, nodes);
        }
        let (at, exit_code) = match state {
            Some(JobState::Running) => return Ok(None),
            Some(JobState::Failing(live)) => {
                if view.stop.is_none() {
                    self.stop_failed(client, &pods, &live, view.grace).await?;
                }
                return Ok(None);
            }
            Some(JobState::Ended { at, code }) => (at.unwrap_or(now), code),
            None => {
                tracing::warn!(job, "no Pods of the job: reported gone");
                (now, None)
            }
        };
        Ok(Some(match view.stop {
            Some(_) => {
                self.clean_up(client, &job).await?;
                Event::Stopped { job, at }
            }
            None => Event::Exited { job, at, exit_code },
        }))
    }
}

impl Executor for KubeExecutor {
    fn name(&self) -> &'static str {
        "kube"
    }

    async fn lead(&mut self, _now: Timestamp) -> Result<(), ExecError> {
        let Some(shared) = self.lease.clone() else {
            return Ok(());
        };
        let now = (self.clock)();
        let client = self.connect()?;
        let mut slot = shared.lock().await;
        slot.client = Some(client.clone());
        let was_leading = slot.elector.is_leading();
        let lease = slot.elector.config().name.clone();
        match slot.elector.try_lead(&client, now).await {
            Ok(Leadership::Leading) => {
                if !was_leading {
                    let config = slot.elector.config();
                    tracing::info!(lease, identity = %config.identity, "leading");
                    let every = config.renew_every();
                    slot.generation += 1;
                    spawn_renewal(&shared, slot.generation, every, self.clock.clone());
                }
                Ok(())
            }
            Ok(Leadership::Following { holder }) => {
                if was_leading {
                    tracing::warn!(lease, holder, "lost the Lease: writing nothing");
                }
                Err(Self::not_leader(&slot.elector, holder))
            }
            Err(e) => Err(action_error("lead", &lease, &e)),
        }
    }

    async fn release(&mut self) -> Result<(), ExecError> {
        let Some(shared) = self.lease.clone() else {
            return Ok(());
        };
        let mut slot = shared.lock().await;
        // The renewal task ends at its next wake.
        slot.generation += 1;
        if !slot.elector.is_leading() {
            return Ok(());
        }
        let client = self.connect()?;
        let lease = slot.elector.config().name.clone();
        match slot.elector.release(&client, (self.clock)()).await {
            Ok(true) => {
                tracing::info!(lease, "released the Lease");
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => Err(action_error("release", &lease, &e)),
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scales_pools: !self.config.scale_targets.is_empty(),
            grace_periods: true,
            exit_codes: true,
            runs_jobs: true,
        }
    }

    async fn set_fleet(&mut self, fleet: &Fleet) -> Result<(), ExecError> {
        let parents: BTreeMap<&str, Option<&str>> = fleet
            .queues
            .iter()
            .map(|q| (q.name(), q.spec.parent.as_deref()))
            .collect();
        self.top_queue = parents
            .keys()
            .map(|&queue| {
                let mut top = queue;
                // Bounded: a cycle (refused by validation) cannot loop.
                for _ in 0..parents.len() {
                    match parents.get(top).copied().flatten() {
                        Some(parent) => top = parent,
                        None => break,
                    }
                }
                (queue.to_string(), top.to_string())
            })
            .collect();
        self.pool_models = fleet
            .pools
            .iter()
            .map(|p| (p.name().to_string(), p.spec.gpu.model.clone()))
            .collect();
        self.pool_sizes = fleet
            .pools
            .iter()
            .map(|p| (p.name().to_string(), (p.spec.size.min, p.spec.size.max)))
            .collect();
        Ok(())
    }

    async fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        let client = &self.connect()?;
        let synced = self
            .watch
            .nodes
            .sync(&Api::<Node>::all(client.clone()))
            .await
            .map_err(|e| observe_error("nodes", &e))?;
        tracing::debug!(?synced, "nodes synced");
        let pod_api = self.pod_scope(client);
        let synced = self
            .watch
            .pods
            .sync(&pod_api)
            .await
            .map_err(|e| observe_error("pods", &e))?;
        tracing::debug!(?synced, "pods synced");
        // A LIST reads the current state (every Pod created and every
        // Binding made is in it): what it says needs no confirmation.
        let confirm = synced.lists == 0;
        let watch = &mut *self.watch;
        if !confirm {
            watch.bound.clear();
        }
        // Forgotten once the cache shows the Pod bound (a Pod not in the
        // cache yet is kept: its creation is still in flight).
        let cached = watch.pods.objects();
        watch
            .bound
            .retain(|key| cached.get(key).is_none_or(unbound));
        let present: BTreeSet<&str> = self
            .watch
            .nodes
            .objects()
            .values()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let mut by_job: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        for (key, pod) in self.watch.pods.objects() {
            if unbound(pod) && !self.watch.bound.contains(key) {
                self.remove_unbound(client, pod).await;
                continue;
            }
            if let Some(job) = pod.metadata.labels.as_ref().and_then(|l| l.get(JOB_LABEL)) {
                by_job.entry(job.as_str()).or_default().push(pod);
            }
        }
        let mut events = Vec::new();
        for view in running {
            let pods = by_job.get(view.job).map(Vec::as_slice).unwrap_or_default();
            events.extend(
                self.poll_job(client, view, pods, &present, now, confirm)
                    .await?,
            );
        }
        let busy = busy_nodes(running, &events);
        let pool_models = &self.pool_models;
        let mut observed = Vec::new();
        self.drained.clear();
        for node in self.watch.nodes.objects().values() {
            let Some(mut o) = nodes::observed_node(node, &self.config.labels, |pool| {
                pool_models.get(pool).cloned()
            }) else {
                continue;
            };
            match agent::AgentView::read(node, now) {
                Ok(Some(view)) => view.apply(&mut o, nodes::allocatable(node)),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(node = %o.name, error = %e, "node agent's view ignored: GPUs from the Node's counts");
                }
            }
            if nodes::drained(node) {
                self.drained.insert(o.name.clone());
            }
            o.idle_since = if busy.contains(&o.name.as_str()) {
                self.idle.remove(&o.name);
                None
            } else {
                Some(*self.idle.entry(o.name.clone()).or_insert(now))
            };
            observed.push(o);
        }
        self.idle.retain(|name, _| present.contains(name.as_str()));
        self.read_scales(client).await;
        Ok(Observation {
            events,
            nodes: observed,
        })
    }

    fn already_done(&self, action: &Action) -> bool {
        match action {
            Action::Drain { node, .. } => self.drained.contains(node),
            Action::Scale { pool, to, .. } => {
                self.scales.get(pool) == Some(&self.replicas_for(pool, *to))
            }
            _ => false,
        }
    }

    async fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        _now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        let client = &self.connect()?;
        self.check_leading(client).await?;
        match action {
            Action::Place { job, placement, .. } => self.place(client, job, placement, ctx).await,
            Action::Preempt { job, .. } => self.stop(client, StopKind::Preempt, job, ctx).await,
            Action::Terminate { job, .. } => self.stop(client, StopKind::Terminate, job, ctx).await,
            Action::Cancel { job, .. } => self.stop(client, StopKind::Cancel, job, ctx).await,
            Action::Scale { pool, to, .. } => self.scale(client, pool, *to).await,
            Action::Drain { node, .. } => self.drain(client, node).await,
        }
    }
}
