//! The executor chosen on the command line: `--executor` with one argument
//! group per executor ([`ExecutorArgs`]), and one enum over every executor
//! this binary is built with ([`AnyExecutor`]), so the loop is compiled once
//! per executor without boxing (the executor trait is `async`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{IntoDiagnostic, Result, miette};
use reconciler::observed::ObservedState;
use reconciler::reconcile::run::{Clock, SimClock, WallClock};
use reconciler::spec::Duration;
use reconciler::state::Store;
use reconciler::time::after;

use crate::commands::input::{read_observed, resolve_now};

use reconciler::exec::local::LocalExecutor;
use reconciler::exec::sim::SimExecutor;
use reconciler::exec::{
    ActionContext, Capabilities, ExecError, Executor, JobView, Observation, Outcome,
};
#[cfg(feature = "kube")]
use reconciler::kube::lease::{DEFAULT_LEASE, LeaseConfig};
#[cfg(feature = "kube")]
use reconciler::kube::nodes::{DEFAULT_POOL_LABEL, DEFAULT_RACK_LABEL, NodeLabels};
#[cfg(feature = "kube")]
use reconciler::kube::scale::{ScaleTarget, parse_target};
#[cfg(feature = "kube")]
use reconciler::kube::{KubeConfig, KubeExecutor, Namespaces, infer_config};
use reconciler::observed::Timestamp;
use reconciler::plan::Action;
use reconciler::slurm::{
    Endpoint, ImageOption, Mapping, PreemptMode, ProcessRunner, RestClient, Scheduler,
    SlurmExecutor,
};
use reconciler::spec::Fleet;
#[cfg(feature = "kube")]
use std::collections::BTreeMap;

/// Which executor carries out plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecutorKind {
    /// The embedded virtual fleet.
    Sim,
    /// This host: replicas as child processes pinned to GPUs.
    Local,
    /// A Kubernetes cluster: replicas as Pods (kubeconfig or in-cluster;
    /// cargo feature `kube`, on by default).
    Kube,
    /// A Slurm cluster through its own commands (see --slurm-mode).
    Slurm,
}

/// `--executor` and what each executor is given.
#[derive(Debug, clap::Args)]
pub struct ExecutorArgs {
    /// Which executor carries out the plan.
    #[arg(long, value_enum, default_value = "sim")]
    pub executor: ExecutorKind,
    /// An observed-state file: the sim's first nodes (on a new state), or
    /// this host's GPUs for the local executor.
    #[arg(long, value_name = "FILE")]
    pub observed: Option<PathBuf>,
    /// The sim executor's own arguments.
    #[command(flatten)]
    pub sim: SimArgs,
    /// The Slurm executor's own arguments.
    #[command(flatten)]
    pub slurm: SlurmArgs,
    /// The kube executor's own arguments.
    #[cfg(feature = "kube")]
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// What the Slurm executor does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SlurmMode {
    /// gitfleet owns accounts, shares, limits and QOS; Slurm schedules.
    Accounting,
    /// As accounting, and gitfleet places the jobs: Slurm runs them
    /// pinned to the planned nodes (docs/slurm.md).
    Scheduler,
}

/// How preempted Slurm jobs end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SlurmPreemptMode {
    /// Requeued (they become pending again, as in gitfleet).
    Requeue,
    /// Cancelled.
    Cancel,
}

impl SlurmPreemptMode {
    fn mode(self) -> PreemptMode {
        match self {
            SlurmPreemptMode::Requeue => PreemptMode::Requeue,
            SlurmPreemptMode::Cancel => PreemptMode::Cancel,
        }
    }
}

/// How scheduler mode passes a Job's `image` to `sbatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SlurmImageOption {
    /// `--container-image=IMAGE` (the pyxis plugin; enroot pulls it).
    ContainerImage,
    /// `--container=IMAGE`: Slurm's own OCI support; IMAGE is the path of
    /// an OCI bundle on the nodes.
    Container,
}

/// Arguments of the Slurm executor (docs/slurm.md).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Slurm executor")]
pub struct SlurmArgs {
    /// What gitfleet owns in the Slurm cluster.
    #[arg(long, value_enum, default_value = "accounting")]
    pub slurm_mode: SlurmMode,
    /// The cluster in Slurm's accounting database (default: its only one).
    #[arg(long, value_name = "NAME")]
    pub slurm_cluster: Option<String>,
    /// The account top-level queues are made under.
    #[arg(long, value_name = "ACCOUNT", default_value = "root")]
    pub slurm_root_account: String,
    /// A GPU model's GRES type when it is not the model's name in lower
    /// case (repeatable), e.g. H100-SXM-80GB=h100.
    #[arg(long, value_name = "MODEL=TYPE")]
    pub slurm_gres_type: Vec<String>,
    /// How preempted jobs end: the QOS's PreemptMode (Slurm's own
    /// preemptions; default requeue) and, given in scheduler mode, how
    /// gitfleet's preemptions end after the grace period: scancel, or
    /// scontrol requeuehold (the same Slurm job placed again; default
    /// cancel). docs/slurm.md.
    #[arg(long, value_enum, value_name = "MODE")]
    pub slurm_preempt_mode: Option<SlurmPreemptMode>,
    /// Scheduler mode: pass a Job's `image` to sbatch as
    /// --container-image (pyxis) or --container (an OCI bundle path).
    /// Without it a Job with an image is refused in scheduler mode.
    #[arg(long, value_enum, value_name = "OPTION")]
    pub slurm_image_option: Option<SlurmImageOption>,
    /// Where sacctmgr and the other Slurm commands are (default: PATH).
    #[arg(long, value_name = "DIR")]
    pub slurm_bin_dir: Option<PathBuf>,
    /// The cluster's slurm.conf (default: $SLURM_CONF, else Slurm's own).
    #[arg(long, value_name = "FILE")]
    pub slurm_conf: Option<PathBuf>,
    /// Scheduler mode: the Slurm user jobs are submitted as, added to the
    /// accounts of the queues it submits to (default: this process's user).
    #[arg(long, value_name = "USER")]
    pub slurm_user: Option<String>,
    /// Scheduler mode: read the observed state (nodes, jobs, exit codes)
    /// from slurmrestd instead of sinfo, squeue and sacct: unix:PATH
    /// (rest_auth/local) or http://HOST:PORT (rest_auth/jwt, the token
    /// from $SLURM_JWT).
    #[arg(long, value_name = "unix:PATH|http://HOST:PORT")]
    pub slurm_rest: Option<String>,
    /// Make each pool a Slurm partition of the same name holding the pool's
    /// nodes (scontrol; docs/slurm.md "Pools as partitions").
    #[arg(long)]
    pub slurm_partitions: bool,
}

impl SlurmArgs {
    /// `--slurm-rest`'s address, when given.
    fn rest_endpoint(&self) -> Result<Option<Endpoint>> {
        self.slurm_rest
            .as_deref()
            .map(|text| text.parse::<Endpoint>().map_err(|e| miette!("{e}")))
            .transpose()
    }

    /// The site mapping these arguments describe.
    fn mapping(&self) -> Result<Mapping> {
        let mut mapping = Mapping {
            root: self.slurm_root_account.clone(),
            preempt_mode: self
                .slurm_preempt_mode
                .map_or(PreemptMode::Requeue, SlurmPreemptMode::mode),
            partitions: self.slurm_partitions,
            ..Mapping::default()
        };
        for pair in &self.slurm_gres_type {
            let Some((model, gres)) = pair.split_once('=') else {
                return Err(miette!(
                    "--slurm-gres-type {pair}: expected MODEL=TYPE, e.g. H100-SXM-80GB=h100"
                ));
            };
            mapping
                .gres_types
                .insert(model.to_string(), gres.to_string());
        }
        Ok(mapping)
    }
}

/// Arguments of the kube executor (a Kubernetes cluster, reached through
/// `$KUBECONFIG`, `~/.kube/config` or the in-cluster service account).
#[cfg(feature = "kube")]
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Kube executor")]
pub struct KubeArgs {
    /// The namespace of the jobs' Pods and Services. Default: the
    /// kubeconfig context's namespace, or the service account's in a
    /// cluster.
    #[arg(
        long,
        value_name = "NAMESPACE",
        conflicts_with = "kube_namespace_per_queue"
    )]
    pub kube_namespace: Option<String>,
    /// Put each job in the namespace named like its top-level queue.
    #[arg(long)]
    pub kube_namespace_per_queue: bool,
    /// The Node label naming a node's NodePool.
    #[arg(long, value_name = "LABEL", default_value = DEFAULT_POOL_LABEL)]
    pub kube_pool_label: String,
    /// The Node label naming a node's rack.
    #[arg(long, value_name = "LABEL", default_value = DEFAULT_RACK_LABEL)]
    pub kube_rack_label: String,
    /// The object whose `/scale` subresource sizes a pool (repeatable),
    /// e.g. h100-a=cluster.x-k8s.io/v1beta1/MachineDeployment/capi/h100-a.
    /// Pools without one are not scaled.
    #[arg(long, value_name = "POOL=GROUP/VERSION/KIND/NAMESPACE/NAME")]
    pub kube_scale_target: Vec<String>,
    /// The Lease that elects the one replica that writes, in the
    /// kubeconfig context's namespace (in a cluster: the service
    /// account's).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_LEASE)]
    pub kube_lease: String,
    /// No leader election: this process writes without holding a Lease
    /// (only when nothing else reconciles the cluster).
    #[arg(long, conflicts_with = "kube_lease")]
    pub kube_no_leader_election: bool,
}

#[cfg(feature = "kube")]
impl KubeArgs {
    /// Whether any kube argument was given.
    fn given(&self) -> bool {
        self.kube_namespace.is_some()
            || self.kube_namespace_per_queue
            || self.kube_pool_label != DEFAULT_POOL_LABEL
            || self.kube_rack_label != DEFAULT_RACK_LABEL
            || !self.kube_scale_target.is_empty()
            || self.kube_lease != DEFAULT_LEASE
            || self.kube_no_leader_election
    }

    /// The scale targets by pool.
    fn scale_targets(&self) -> Result<BTreeMap<String, ScaleTarget>> {
        let mut targets = BTreeMap::new();
        for given in &self.kube_scale_target {
            let (pool, target) = parse_target(given).map_err(|e| miette!("{e}"))?;
            if targets.insert(pool.clone(), target).is_some() {
                return Err(miette!("--kube-scale-target: pool {pool} is given twice"));
            }
        }
        Ok(targets)
    }

    /// The cluster's configuration, or why there is none.
    fn cluster(&self) -> Result<reconciler::kube::ClusterConfig> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| miette!("cannot start the async runtime: {e}"))?;
        runtime.block_on(infer_config()).map_err(|e| {
            miette!(
                "--executor kube: {e}; set KUBECONFIG to a kubeconfig file, or run gitfleet in a Pod with a service account (deploy/kubernetes/)"
            )
        })
    }

    /// The executor, connecting at its first call.
    fn open(&self) -> Result<KubeExecutor> {
        let cluster = self.cluster()?;
        let namespaces = if self.kube_namespace_per_queue {
            Namespaces::PerQueue
        } else {
            Namespaces::Fixed(
                self.kube_namespace
                    .clone()
                    .unwrap_or_else(|| cluster.default_namespace.clone()),
            )
        };
        let lease = (!self.kube_no_leader_election).then(|| LeaseConfig {
            name: self.kube_lease.clone(),
            ..LeaseConfig::new(cluster.default_namespace.clone(), identity())
        });
        let config = KubeConfig {
            namespaces,
            labels: NodeLabels {
                pool: self.kube_pool_label.clone(),
                rack: self.kube_rack_label.clone(),
            },
            scale_targets: self.scale_targets()?,
            lease,
        };
        Ok(KubeExecutor::from_config(cluster, config))
    }
}

/// This process's Lease holder identity: `$POD_NAME` (the Deployment
/// sets it from the downward API), else the host name and process id.
#[cfg(feature = "kube")]
fn identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "gitfleet".to_string());
    format!("{host}-{}", std::process::id())
}

/// Arguments of the sim executor (the embedded virtual fleet).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Sim executor")]
pub struct SimArgs {
    /// The clock's time for this run (RFC 3339; sim only). Default: the
    /// state's clock, else the observed file's time, else now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Run the sim clock N times faster than the wall clock.
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    pub speed: f64,
    /// Move the sim clock by exactly this much per iteration (e.g. 5m).
    #[arg(long, value_name = "DURATION")]
    pub sim_step: Option<Duration>,
    /// How long the sim takes to provision a node on scale-up.
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    pub provision_delay: Duration,
}

impl ExecutorArgs {
    /// Refuses what cannot run, before anything is written.
    pub fn check(&self) -> Result<()> {
        #[cfg(feature = "kube")]
        if self.executor != ExecutorKind::Kube && self.kube.given() {
            return Err(miette!("--kube-* options apply to --executor kube"));
        }
        match self.executor {
            #[cfg(not(feature = "kube"))]
            ExecutorKind::Kube => Err(miette!(
                "this gitfleet was built without the kube executor (cargo feature `kube`, on by default): build it with `cargo build --release`"
            )),
            #[cfg(feature = "kube")]
            ExecutorKind::Kube if self.observed.is_some() => Err(miette!(
                "--observed does not apply to the kube executor: it reads the cluster's Nodes"
            )),
            #[cfg(feature = "kube")]
            ExecutorKind::Kube if self.sim.now.is_some() || self.sim.sim_step.is_some() => {
                Err(miette!(
                    "--now and --sim-step apply to the sim executor; the kube executor runs on the wall clock"
                ))
            }
            // No cluster configuration: refused before the state is opened.
            #[cfg(feature = "kube")]
            ExecutorKind::Kube => {
                self.kube.scale_targets()?;
                self.kube.cluster().map(|_| ())
            }
            ExecutorKind::Local if self.sim.now.is_some() || self.sim.sim_step.is_some() => {
                Err(miette!(
                    "--now and --sim-step apply to the sim executor; the local executor runs on the wall clock"
                ))
            }
            ExecutorKind::Local if self.observed.is_none() => Err(miette!(
                "the local executor needs this host's GPUs: pass --observed FILE (e.g. from `gitfleet inventory`)"
            )),
            ExecutorKind::Slurm
                if self.slurm.slurm_user.is_some()
                    && self.slurm.slurm_mode != SlurmMode::Scheduler =>
            {
                Err(miette!("--slurm-user applies to --slurm-mode scheduler"))
            }
            ExecutorKind::Slurm
                if self.slurm.slurm_image_option.is_some()
                    && self.slurm.slurm_mode != SlurmMode::Scheduler =>
            {
                Err(miette!(
                    "--slurm-image-option applies to --slurm-mode scheduler"
                ))
            }
            ExecutorKind::Slurm
                if self.slurm.slurm_rest.is_some()
                    && self.slurm.slurm_mode != SlurmMode::Scheduler =>
            {
                Err(miette!("--slurm-rest applies to --slurm-mode scheduler"))
            }
            ExecutorKind::Slurm if self.sim.now.is_some() || self.sim.sim_step.is_some() => {
                Err(miette!(
                    "--now and --sim-step apply to the sim executor; the slurm executor runs on the wall clock"
                ))
            }
            ExecutorKind::Slurm => {
                self.slurm.rest_endpoint()?;
                self.slurm.mapping().map(|_| ())
            }
            ExecutorKind::Sim | ExecutorKind::Local => Ok(()),
        }
    }

    /// The executor and the clock it runs on, over the state in `store`.
    pub fn open(&self, state: &Path, store: &Arc<Store>) -> Result<(AnyExecutor, Box<dyn Clock>)> {
        self.check()?;
        let observed: Option<ObservedState> = match &self.observed {
            Some(file) => match read_observed(file)? {
                Some(state) => Some(state),
                None => return Err(miette!("{}: invalid observed state", file.display())),
            },
            None => None,
        };
        match (self.executor, observed) {
            (ExecutorKind::Sim, observed) => {
                let seed = observed.as_ref().map(|o| o.nodes.clone());
                let sim = SimExecutor::open(store.clone(), seed, self.sim.provision_delay)
                    .into_diagnostic()?;
                let start = self.sim.start(store, observed.as_ref())?;
                let clock = SimClock::new(start, self.sim.speed, self.sim.sim_step);
                Ok((AnyExecutor::Sim(sim), Box::new(clock)))
            }
            (ExecutorKind::Local, Some(observed)) => {
                let local =
                    LocalExecutor::new(state.join("local"), observed.nodes).into_diagnostic()?;
                Ok((AnyExecutor::Local(local), Box::new(WallClock)))
            }
            (ExecutorKind::Slurm, _) => {
                let runner = ProcessRunner {
                    bin_dir: self.slurm.slurm_bin_dir.clone(),
                    conf: self.slurm.slurm_conf.clone(),
                };
                let mut slurm = SlurmExecutor::new(
                    runner.clone(),
                    self.slurm.slurm_cluster.clone(),
                    self.slurm.mapping()?,
                    store.clone(),
                );
                if self.slurm.slurm_mode == SlurmMode::Scheduler {
                    let user = match &self.slurm.slurm_user {
                        Some(user) => user.clone(),
                        None => this_user()?,
                    };
                    let mut scheduler =
                        Scheduler::new(runner, user.clone(), self.slurm.mapping()?, store.clone())
                            .with_preempt_mode(
                                self.slurm
                                    .slurm_preempt_mode
                                    .map_or(PreemptMode::Cancel, SlurmPreemptMode::mode),
                            );
                    match self.slurm.slurm_image_option {
                        Some(SlurmImageOption::ContainerImage) => {
                            scheduler = scheduler.with_image_option(ImageOption::ContainerImage);
                        }
                        Some(SlurmImageOption::Container) => {
                            scheduler = scheduler.with_image_option(ImageOption::Container);
                        }
                        None => {}
                    }
                    if let Some(endpoint) = self.slurm.rest_endpoint()? {
                        let mut client = RestClient::new(endpoint);
                        if let Ok(token) = std::env::var("SLURM_JWT") {
                            client = client.with_token(user, token);
                        }
                        scheduler = scheduler.with_rest(client);
                    }
                    slurm = slurm.with_scheduler(scheduler);
                }
                Ok((AnyExecutor::Slurm(slurm), Box::new(WallClock)))
            }
            #[cfg(feature = "kube")]
            (ExecutorKind::Kube, _) => {
                Ok((AnyExecutor::Kube(self.kube.open()?), Box::new(WallClock)))
            }
            // Refused by `check` above.
            #[cfg(not(feature = "kube"))]
            (ExecutorKind::Kube, _) => Err(miette!("no kube executor in this build")),
            (ExecutorKind::Local, _) => Err(miette!("no executor for these arguments")),
        }
    }
}

/// The user this process runs as (`id -un`).
fn this_user() -> Result<String> {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .map_err(|e| miette!("cannot run `id -un`: {e}; pass --slurm-user"))?;
    let user = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || user.is_empty() {
        return Err(miette!("`id -un` named no user; pass --slurm-user"));
    }
    Ok(user)
}

impl SimArgs {
    /// The sim clock's start: --now, else the state's clock (a restart goes
    /// on where it stopped), else the observed file's time, else now.
    fn start(&self, store: &Store, observed: Option<&ObservedState>) -> Result<Timestamp> {
        if self.now.is_some() {
            return resolve_now(self.now.as_deref(), &ObservedState::default());
        }
        if let Some(clock) = store.clock().into_diagnostic()? {
            return Ok(after(clock, self.sim_step.unwrap_or_default()));
        }
        resolve_now(None, observed.unwrap_or(&ObservedState::default()))
    }
}

/// Any of the executors.
#[derive(Debug)]
pub enum AnyExecutor {
    /// The embedded virtual fleet.
    Sim(SimExecutor),
    /// This host's GPUs, replicas as child processes.
    Local(LocalExecutor),
    /// A Slurm cluster (accounting or scheduler mode).
    Slurm(SlurmExecutor<ProcessRunner>),
    /// A Kubernetes cluster, replicas as Pods.
    #[cfg(feature = "kube")]
    Kube(KubeExecutor),
}

impl Executor for AnyExecutor {
    fn name(&self) -> &'static str {
        match self {
            AnyExecutor::Sim(e) => e.name(),
            AnyExecutor::Local(e) => e.name(),
            AnyExecutor::Slurm(e) => e.name(),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.name(),
        }
    }

    fn capabilities(&self) -> Capabilities {
        match self {
            AnyExecutor::Sim(e) => e.capabilities(),
            AnyExecutor::Local(e) => e.capabilities(),
            AnyExecutor::Slurm(e) => e.capabilities(),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.capabilities(),
        }
    }

    async fn set_fleet(&mut self, fleet: &Fleet) -> Result<(), ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.set_fleet(fleet).await,
            AnyExecutor::Local(e) => e.set_fleet(fleet).await,
            AnyExecutor::Slurm(e) => e.set_fleet(fleet).await,
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.set_fleet(fleet).await,
        }
    }

    async fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.observe(now, running).await,
            AnyExecutor::Local(e) => e.observe(now, running).await,
            AnyExecutor::Slurm(e) => e.observe(now, running).await,
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.observe(now, running).await,
        }
    }

    async fn release(&mut self) -> Result<(), ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.release().await,
            AnyExecutor::Local(e) => e.release().await,
            AnyExecutor::Slurm(e) => e.release().await,
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.release().await,
        }
    }

    async fn lead(&mut self, now: Timestamp) -> Result<(), ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.lead(now).await,
            AnyExecutor::Local(e) => e.lead(now).await,
            AnyExecutor::Slurm(e) => e.lead(now).await,
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.lead(now).await,
        }
    }

    fn config_changes(&self) -> Vec<String> {
        match self {
            AnyExecutor::Slurm(e) => e.config_changes(),
            AnyExecutor::Sim(_) | AnyExecutor::Local(_) => Vec::new(),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(_) => Vec::new(),
        }
    }

    async fn apply_config(&mut self) -> Result<Vec<String>, ExecError> {
        match self {
            AnyExecutor::Slurm(e) => e.apply_config().await,
            AnyExecutor::Sim(_) | AnyExecutor::Local(_) => Ok(Vec::new()),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(_) => Ok(Vec::new()),
        }
    }

    fn observation_stands(&self, now: Timestamp) -> bool {
        match self {
            AnyExecutor::Sim(e) => e.observation_stands(now),
            AnyExecutor::Local(e) => e.observation_stands(now),
            AnyExecutor::Slurm(e) => e.observation_stands(now),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.observation_stands(now),
        }
    }

    fn already_done(&self, action: &Action) -> bool {
        match self {
            AnyExecutor::Sim(e) => e.already_done(action),
            AnyExecutor::Local(e) => e.already_done(action),
            AnyExecutor::Slurm(e) => e.already_done(action),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.already_done(action),
        }
    }

    async fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.execute(action, ctx, now).await,
            AnyExecutor::Local(e) => e.execute(action, ctx, now).await,
            AnyExecutor::Slurm(e) => e.execute(action, ctx, now).await,
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.execute(action, ctx, now).await,
        }
    }

    fn flush(&mut self) -> Result<(), ExecError> {
        match self {
            AnyExecutor::Sim(e) => e.flush(),
            AnyExecutor::Local(e) => e.flush(),
            AnyExecutor::Slurm(e) => e.flush(),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.flush(),
        }
    }

    fn acts_in_store_only(&self) -> bool {
        match self {
            AnyExecutor::Sim(e) => e.acts_in_store_only(),
            AnyExecutor::Local(e) => e.acts_in_store_only(),
            AnyExecutor::Slurm(e) => e.acts_in_store_only(),
            #[cfg(feature = "kube")]
            AnyExecutor::Kube(e) => e.acts_in_store_only(),
        }
    }
}

/// The runtime the reconcile loop and `apply` run on: two workers, so the
/// HTTP endpoint answers while an iteration plans.
pub fn runtime() -> miette::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| miette::miette!("cannot start the async runtime: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may stop at the first surprise
mod tests {
    use super::*;

    /// Every answer the loop asks an executor for reaches the executor
    /// inside: a default left unforwarded would make the binary's sim
    /// observe and plan every iteration (and never defer its commits).
    #[test]
    fn the_sim_inside_answers_for_itself() {
        let store: Arc<dyn reconciler::exec::KeyValue> =
            Arc::new(reconciler::exec::MemoryKv::default());
        let mut any = AnyExecutor::Sim(SimExecutor::open(store, None, Duration::ZERO).unwrap());
        let now: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
        assert!(!any.observation_stands(now), "nothing observed yet");
        futures_executor::block_on(any.observe(now, &[])).unwrap();
        assert!(any.observation_stands(now), "the world has nothing due");
        assert!(any.acts_in_store_only());
        assert_eq!(any.name(), "sim");
    }
}
