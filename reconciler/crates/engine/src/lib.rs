//! The scheduling engine: desired specs + observed state + `now` → [`Plan`].
//!
//! Architecture invariant: this module does no I/O, reads no clock and no
//! environment, and iterates no hash map into its output. The same input
//! gives a byte-identical plan.

pub mod drift;

mod alike;
mod attained;
pub use attained::TIER_BOUNDS as ATTAINED_TIER_BOUNDS;
mod backfill;
mod claims;
mod cluster;
mod explain;
mod freeing;
mod horizon;
mod ids;
mod jobs;
mod order;
mod placement;
mod planner;
mod preemption;
mod quota;
mod reasons;
mod records;
mod scaling;

use std::sync::Arc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use model::observed::{NodeGpus, ObservedState, Timestamp};
use model::plan::{Action, Pending, Plan, Summary};
use model::spec::{Duration, Fleet, NodePoolSpec, NvLink};
use model::time::after;

use cluster::{Cluster, Owner};
use ids::QueueId;
use ids::{JobId, ModelId, Models, NodeId, PoolId, RunId};
use jobs::JobInfo;
use placement::{Placement, Request};
use quota::QueueTree;

/// Everything the engine decides from.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// The loaded, valid specs.
    pub fleet: &'a Fleet,
    /// The live fleet (or the derived inventory).
    pub observed: &'a ObservedState,
    /// The time decisions are made at.
    pub now: Timestamp,
    /// The Git revision of the specs, when known.
    pub revision: Option<&'a str>,
}

pub use alike::job_plans_alike;
pub use explain::{Explanation, NodeLine, OrderInfo, QuotaLine, ShareLine, explain};
pub use horizon::{Horizon, plan_with_horizon};
pub use jobs::Unchanged;
pub use planner::Planner;

/// Computes the plan.
pub fn plan(input: &PlanInput) -> Plan {
    let (mut plan, _, _, mut names) = Engine::new(input).run_keeping();
    plan.drift = crate::drift::detect_kept(
        input.fleet,
        input.observed,
        &input.observed.nodes,
        &plan.actions,
        None,
        Some((&mut names, &mut [])),
    );
    plan
}

/// The plan's jobs by name, as the engine's job table has them (the first
/// document of a name), kept past the plan for drift detection.
pub(crate) struct JobNames<'a> {
    objects: Vec<&'a model::spec::Object<model::spec::JobSpec>>,
    index: jobs::JobIndex,
    /// Where the observed records' names led.
    resolved: records::Resolved,
    /// Per job: its shared name, once listed pending.
    shared_names: Vec<Option<Arc<str>>>,
    /// The plan's pending jobs in fair share's leaf order.
    fair_order: Vec<JobId>,
}

impl<'a> JobNames<'a> {
    /// The job document named `name`, and its place in the table.
    pub(crate) fn get(
        &self,
        name: &str,
    ) -> Option<(JobId, &'a model::spec::Object<model::spec::JobSpec>)> {
        let j = self.index.get(name, |j| self.objects[j as usize].name())?;
        Some((j, self.objects[j as usize]))
    }

    /// The job document of running record `k` (the observed order) and
    /// its place in the table: the one named as it is.
    pub(crate) fn of_running(
        &self,
        k: usize,
    ) -> Option<(JobId, &'a model::spec::Object<model::spec::JobSpec>)> {
        let j = (*self.resolved.running.get(k)?)?;
        Some((j, self.objects[j as usize]))
    }

    /// What the running records' jobs said of them, taken (for drift).
    pub(crate) fn take_said(&mut self) -> Vec<records::Said> {
        std::mem::take(&mut self.resolved.said)
    }

    /// Gives back what [`JobNames::take_said`] took, with what was asked since.
    pub(crate) fn give_said(&mut self, said: Vec<records::Said>) {
        self.resolved.said = said;
    }

    /// What the planner keeps of the plan's jobs for the next plan
    /// ([`planner::Planner`]).
    pub(crate) fn into_returned(self) -> jobs::Returned {
        jobs::Returned {
            index: self.index,
            resolved: self.resolved,
            names: self.shared_names,
            fair_order: self.fair_order,
        }
    }
}

/// A declared pool and its live size.
#[derive(Debug, Clone)]
struct PoolInfo<'a> {
    name: &'a str,
    spec: &'a NodePoolSpec,
    model: ModelId,
    /// Real nodes observed in the pool.
    observed_nodes: u32,
    /// Virtual nodes that scale-up would add, in the order they are used.
    virtual_nodes: Vec<NodeId>,
    /// Jobs that wait for this pool's new nodes.
    waiting_jobs: Vec<JobId>,
}

/// Per model of one queue: (priority, cumulative GPUs) of preemptible running
/// jobs, sorted by priority.
type VictimIndex = Vec<(ModelId, Vec<(i32, u64)>)>;

/// A preemptible running job with what orders it as a victim (kept inline:
/// the victim search reads these lists in its inner loop).
#[derive(Debug, Clone, Copy)]
struct Victim {
    run: RunId,
    priority: i32,
    started: Timestamp,
    /// Its attained-service tier in a `least-attained` leaf (0 elsewhere).
    tier: u8,
    /// Its place in victim order among all preemptible running jobs (lower
    /// priority, then most recently started, then run): one number for the
    /// candidate merge to compare.
    rank: u32,
}

/// Victim order's first keys in one number: lower priority first, then the
/// most recently started (seconds, then nanoseconds, as timestamps order).
fn victim_order(priority: i32, started: Timestamp) -> u128 {
    const SECONDS_AND_NANOS: u128 = (1 << 96) - 1;
    let priority = u128::from((priority as u32) ^ (1 << 31));
    let seconds = u128::from((started.timestamp() as u64) ^ (1 << 63));
    let at = seconds << 32 | u128::from(started.timestamp_subsec_nanos());
    priority << 96 | (SECONDS_AND_NANOS ^ at)
}

/// One queue's preemptible running jobs of one model in victim order (lower
/// priority, then most recently started, then name), and how many at the
/// front have been preempted since.
#[derive(Debug, Clone)]
struct VictimList {
    model: ModelId,
    victims: Vec<Victim>,
    head: usize,
    /// The fewest and the most GPUs a run of the list holds.
    gpus_range: (u64, u64),
    /// The victims' GPUs as a Fenwick tree (sums of the first k), those
    /// preempted since counting none; empty until the victim search asks
    /// (`preemption::candidates::eligible_gpus`).
    gpu_sums: Vec<u64>,
    /// Victims preempted in this plan still in `victims` past `head` (at
    /// most): the list is compacted when they are many.
    stale: usize,
}

/// Everything about a job that its admission depends on, besides the
/// fleet's state: jobs with equal keys fare alike.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct OutcomeKey {
    queue: QueueId,
    priority: i32,
    models: std::rc::Rc<[ModelId]>,
    replicas: u32,
    per_replica: u32,
    required: Option<model::spec::TopologyLevel>,
    preferred: Option<model::spec::TopologyLevel>,
    /// With a backfill reservation in place: whether the job's time limit
    /// ends before it starts (the only way time limits matter to admission).
    ends_before_reservation: Option<bool>,
    /// How many preemptible running jobs of lower priority started before
    /// the job was first seen (all, never seen): the lower-priority
    /// borrowers it may preempt are those (rule 5c), the only way its age
    /// matters to admission.
    started_before: usize,
    /// Its attained-service tier in a `least-attained` leaf (what it may
    /// preempt in its leaf depends on it).
    attained_tier: Option<u8>,
}

/// A pending outcome remembered for jobs with the same [`OutcomeKey`].
#[derive(Debug, Clone)]
struct KnownOutcome {
    /// The cluster's and the queue tree's epochs it was decided at.
    cluster_epoch: u64,
    tree_epoch: u64,
    reason: Arc<str>,
    waiting: &'static str,
    /// The time limit the reason quotes (blocked by a reservation), which
    /// jobs must share to share the reason.
    time_limit_in_reason: Option<Option<model::spec::Duration>>,
}

/// A request's shape: model, replicas, GPUs per replica, topology.
type ShapeKey = (ModelId, u32, u32, u8, u8);

/// What the words of one blocked attempt (not a reserved one) depend on
/// besides the cluster: the shape, or the quota block with what stopping
/// jobs hold in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum BlockedKey {
    NoNodes(ModelId),
    Quota(ModelId, QueueId, [u64; 4]),
    Placement(ShapeKey),
}

/// What a job's stopping runs hold per queue, shared ([`Engine::held_by`]).
type HeldPerQueue = std::rc::Rc<[(QueueId, u64)]>;

fn shape_key(req: &Request) -> ShapeKey {
    (
        req.model,
        req.replicas,
        req.per_replica,
        req.required.map_or(0, |l| l as u8 + 1),
        req.preferred.map_or(0, |l| l as u8 + 1),
    )
}

/// Why a running job is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopping {
    /// Still running.
    No,
    /// Preempted (now or earlier); frees its GPUs after the grace period.
    Preempted,
    /// Past its time limit.
    Terminated,
    /// Removed from Git.
    Cancelled,
}

/// A job that holds GPUs now.
#[derive(Debug, Clone)]
struct Run<'a> {
    name: &'a str,
    job: Option<JobId>,
    started: Timestamp,
    placement: Placement,
    model: Option<ModelId>,
    gpus: u64,
    stopping: Stopping,
    /// When its GPUs are expected to be free (grace end, time limit).
    ends_at: Option<Timestamp>,
    preempted_for: Option<&'a str>,
    /// The pending job its GPUs are kept for (its preemptor), once known.
    kept_for: Option<JobId>,
}

impl Run<'_> {
    /// Whether it is being restarted (preempted for itself): its GPUs are
    /// kept for it, not for any other job.
    fn restarting(&self) -> bool {
        self.preempted_for == Some(self.name)
    }
}

/// Per-job outcome of a failed attempt on one model, for the pending reason.
#[derive(Debug, Clone)]
enum Blocked {
    NoNodes(ModelId),
    Quota(ModelId, quota::QuotaBlock),
    Placement(Request),
    /// It would fit, but on GPUs reserved (backfill) past its time limit.
    Reserved(Request),
}

/// Per (leaf, model): queues and the preemption count they were found at.
type SourceMemo = HashMap<(QueueId, ModelId), (u64, std::rc::Rc<[QueueId]>)>;

/// Borrowing chains and reclaim masks by (preemptor's leaf, victim's queue)
/// (`preemption::candidates::chain_of`).
type ChainMemo = HashMap<(QueueId, QueueId), (std::rc::Rc<[QueueId]>, u64)>;

/// Per (leaf, model, priority, reclaim mask): the other queues' share of
/// `preemption::candidates::upper_bound`, with the sources it was found for.
type BoundMemo = HashMap<(QueueId, ModelId, i32, u64), (std::rc::Rc<[QueueId]>, u64, Vec<u64>)>;

struct Engine<'a> {
    now: Timestamp,
    revision: Option<&'a str>,
    models: Models,
    pools: Vec<PoolInfo<'a>>,
    cluster: Cluster,
    tree: QueueTree,
    jobs: Vec<JobInfo<'a>>,
    /// The jobs by name ([`Engine::job_named`]).
    job_index: jobs::JobIndex,
    runs: Vec<Run<'a>>,
    /// Jobs still pending (preemptors that wait count as pending).
    pending_now: Vec<bool>,
    /// Jobs this plan has decided on (placed, waiting or blocked): what
    /// they were promised or nominated and did not take is free for others.
    decided: Vec<bool>,
    /// Per leaf queue and model: GPUs asked for by its pending jobs not
    /// decided yet that accept the model and whose replica fits a node of
    /// it (what the guaranteed pass keeps for other leaves' unused
    /// guarantees, issue 16 item 8).
    undecided_demand: Vec<Vec<u64>>,
    /// Per model: the most GPUs a node of a declared pool has, and the
    /// GPUs its pools hold at their `size.max`.
    model_capacity: Vec<(u32, u64)>,
    reservation: Option<backfill::Reservation>,
    actions: Actions,
    pending: Vec<Pending>,
    placed_gpus: u64,
    /// Jobs placed by this plan, in order.
    placed: Vec<(JobId, ModelId, Placement)>,
    unhealthy: u64,
    /// Set by `explain`: what to record about one job.
    explain: Option<explain::Capture>,
    /// Where the observed records' names lead (jobs, nodes).
    resolved: records::Resolved,
    /// Per job: its name as the plan lists it pending, made once (kept
    /// from plan to plan by a planner).
    shared_names: Vec<Option<Arc<str>>>,
    /// The last plan's pending jobs in fair share's leaf order (a guess),
    /// then this plan's.
    fair_order: Vec<JobId>,
    /// GPUs of stopping jobs.
    freeing: freeing::Freeing,
    /// Running jobs per leaf queue (preemption candidates).
    runs_by_queue: Vec<Vec<RunId>>,
    /// Stopping runs preempted for a job, which count against their queues'
    /// limits until that job is charged in their place (it waits for them).
    held_for: HashMap<JobId, Vec<RunId>>,
    /// The GPUs nominated for the job being decided (preferred where it
    /// waits or preempts, after GPUs of stopping jobs and victims).
    own_nominated: Vec<(NodeId, usize)>,
    /// GPUs kept for pending jobs that preemptions made room for.
    nominated: HashMap<JobId, Vec<(NodeId, usize)>>,
    /// The observed `queued` entries (first-seen times, nominations).
    observed_queued: &'a [model::observed::QueuedJob],
    /// Per queue, per model: preemptible running jobs' (priority, GPUs so
    /// far) sorted by priority, for a cheap bound on what preemption frees.
    victim_index: Vec<VictimIndex>,
    /// Per queue, per model: preemptible running jobs in victim order.
    victim_lists: Vec<Vec<VictimList>>,
    /// Bumped whenever GPUs become free again during the plan. Within one
    /// plan free GPUs, preemption candidates and borrowing headroom only
    /// shrink otherwise, so a failed preemption search stays failed until then.
    generation: u64,
    /// Pending reasons by what their attempts' words depend on, found at
    /// the cluster's epoch `reason_epoch` (dropped when it changes).
    reason_memo: HashMap<Vec<BlockedKey>, (String, &'static str)>,
    reason_epoch: u64,
    /// Reasons of jobs kept off reserved GPUs by shape, without their time
    /// limit's words: the cluster epoch and the reservation they were
    /// worded for.
    reserved_reason_memo: HashMap<ShapeKey, (u64, backfill::Reservation, String)>,
    /// Those time limit's words by time limit (they depend on the plan's
    /// time only).
    reserved_limit_memo: HashMap<Option<Duration>, String>,
    reservation_memo: HashMap<ShapeKey, (u64, bool)>,
    /// Pending outcomes by job key, with the cluster and quota epochs.
    outcome_memo: HashMap<OutcomeKey, KnownOutcome>,
    /// Per priority of a job: the starts of the preemptible running jobs of
    /// lower priority, sorted ([`OutcomeKey::started_before`]).
    run_starts: HashMap<i32, Vec<Timestamp>>,
    /// Per job: [`Engine::started_before`] once found (`u32::MAX` before).
    started_before_of: Vec<std::cell::Cell<u32>>,
    /// Failed preemption searches, by shape, at the generation they failed.
    preempt_memo: HashMap<preemption::MemoKey, u64>,
    /// Preemptions chosen so far (victim candidates change only then).
    preemptions: u64,
    /// Per model: the GPUs of its largest node and of all its nodes, real
    /// and virtual (fixed for the plan: for "can never run" reasons).
    node_sizes: std::cell::OnceCell<Vec<(u64, u64)>>,
    /// Per (model, topology level, GPUs per replica): the replicas the
    /// largest domain holds at the pools' size.max (fixed for the plan).
    domain_memo: std::cell::RefCell<HashMap<(ModelId, u8, u32), u64>>,
    /// By node id: 0 between checks; the GPUs counted per node during one
    /// check of `preemption::could_fit` (its scratch table, kept for the plan).
    victim_gpus: std::cell::RefCell<Vec<u32>>,
    /// The queues a victim of queue `vq` is taken from for a preemptor of
    /// leaf `q`, by `(q, vq)` (the tree's shape only).
    chain_memo: std::cell::RefCell<ChainMemo>,
    /// [`backfill::ends_before`] at the plan's `now` by time limit, and the
    /// start they were found for ([`backfill::ends_before_kept`]).
    ends_before_memo: std::cell::RefCell<(Option<Timestamp>, HashMap<Duration, bool>)>,
    /// Victim candidate lists, with the preemption count they were made at.
    candidate_memo:
        HashMap<preemption::CandidateKey, (u64, std::rc::Rc<preemption::CandidateList>)>,
    /// Per (leaf, model): the other queues whose victims a preemptor of
    /// the leaf may take, with the preemption count they were found at
    /// ([`preemption::candidates::cross_queue_sources`]).
    source_memo: SourceMemo,
    /// `preemption::candidates::upper_bound`'s share of the other queues.
    bound_memo: std::cell::RefCell<BoundMemo>,
    /// Per model: stopping runs whose GPUs are kept for one job (its
    /// preemptor, or itself when restarting), from `index_freeing` on; the
    /// other stopping runs' GPUs are open to all ([`Cluster::index_waiting`]).
    kept_runs: Vec<Vec<RunId>>,
    /// Per model: its kept runs grouped by whom they are kept for.
    kept_groups: Vec<claims::KeptGroups>,
    /// [`Engine::held_by`] of the jobs asked so far, by job and model
    /// (a job's entries go with its `held_for` entry).
    held_by_memo: std::cell::RefCell<HashMap<(JobId, ModelId), HeldPerQueue>>,
    /// Per job: whether stopping runs are kept for it or restart for it
    /// (from `index_freeing` on): its claims on them are its own.
    claim_owners: Vec<bool>,
    /// Counts changes of what claims on stopping runs depend on besides
    /// the cluster and the tree: a job runs are kept for decided or
    /// undecided, stopping runs no longer held for a job
    /// ([`claims::SharedKey`]).
    claims_epoch: u64,
    /// Jobs' claims on kept runs, and their nodes ([`Engine::freeing_claims`]).
    freeing_claims_memo: claims::SharedMemo<std::rc::Rc<FreeingClaims>>,
}

/// Whether a job may claim each kept run of a model (`kept_runs`' order),
/// asked only of runs with GPUs still stopping on a schedulable node (the
/// others' answers, `false`, are never read), and the nodes of those it may
/// ([`Engine::wait_for_freeing`]).
#[derive(Debug, PartialEq)]
struct FreeingClaims {
    runs: Vec<(RunId, bool)>,
    nodes: Vec<NodeId>,
}

#[derive(Debug, Default)]
struct Actions {
    place: Vec<Action>,
    preempt: Vec<Action>,
    drain: Vec<Action>,
    terminate: Vec<Action>,
    cancel: Vec<Action>,
}

impl<'a> Engine<'a> {
    fn new(input: &PlanInput<'a>) -> Self {
        Self::build(input, &input.observed.nodes, None)
    }

    /// The job named `name` (the first document of that name).
    fn job_named(&self, name: &str) -> Option<JobId> {
        self.job_index.get(name, |j| self.jobs[j as usize].name)
    }

    /// The engine on `input` with `nodes` as its observed nodes (the
    /// observed state's own, or given apart: [`Planner::plan_with_nodes`]),
    /// its cluster and job table from `kept` when given (those
    /// [`Cluster::unindexed`] and [`jobs::job_table`] build:
    /// [`planner::KeptNodes`], [`jobs::KeptJobs`]).
    fn build(
        input: &PlanInput<'a>,
        nodes: &[model::observed::ObservedNode],
        kept: Option<planner::Kept<'_, '_>>,
    ) -> Self {
        let fleet = input.fleet;
        let observed = input.observed;
        let mut models = Models::default();

        let mut pool_specs: Vec<&model::spec::Object<NodePoolSpec>> = fleet.pools.iter().collect();
        pool_specs.sort_by(|a, b| a.name().cmp(b.name()));
        pool_specs.dedup_by(|a, b| a.name() == b.name());
        let mut pools: Vec<PoolInfo> = pool_specs
            .iter()
            .map(|p| PoolInfo {
                name: p.name(),
                spec: &p.spec,
                model: models.intern(&p.spec.gpu.model),
                observed_nodes: 0,
                virtual_nodes: Vec::new(),
                waiting_jobs: Vec::new(),
            })
            .collect();
        let pool_ids: HashMap<&str, (PoolId, NvLink)> = pools
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name, (i as PoolId, p.spec.nvlink)))
            .collect();

        let tree = QueueTree::new(&fleet.queues, &mut models);
        let (kept_nodes, kept_jobs) = match kept {
            Some(planner::Kept {
                nodes,
                jobs,
                unchanged,
            }) => (Some(nodes), Some((jobs, unchanged))),
            None => (None, None),
        };
        let (jobs, job_index, kept_resolved, shared_names, fair_order) = match kept_jobs {
            Some((kept, unchanged)) => {
                let (jobs, index) =
                    kept.table(fleet, &tree, &mut models, &observed.queued, unchanged);
                // The last plan's look-ups, when its table was kept (the
                // same names at the same places) and so are the records.
                let mut resolved = kept.resolved.take().filter(|_| unchanged.records);
                // What the changed jobs' documents said is asked again.
                match (&mut resolved, unchanged.jobs_but) {
                    (Some(kept), Some(changed)) => {
                        let mut is_changed = vec![false; jobs.len()];
                        for &k in changed {
                            if let Some(slot) = is_changed.get_mut(k) {
                                *slot = true;
                            }
                        }
                        kept.forget_said(&is_changed);
                    }
                    _ => resolved = None,
                }
                let names = std::mem::take(&mut kept.names);
                let order = std::mem::take(&mut kept.fair_order);
                (jobs, index, resolved, names, order)
            }
            None => {
                let (jobs, index) = jobs::job_table(fleet, &tree, &mut models, &observed.queued);
                (jobs, index, None, Vec::new(), Vec::new())
            }
        };
        let shared_names = if shared_names.len() == jobs.len() {
            debug_assert!(
                jobs.iter()
                    .zip(&shared_names)
                    .all(|(job, shared)| shared.as_deref().is_none_or(|s| s == job.name)),
                "a kept shared name differs from its job's"
            );
            shared_names
        } else {
            vec![None; jobs.len()]
        };
        // Indexed once the running jobs hold their GPUs and unhealthy
        // nodes are cordoned (one bulk build, not an update per change).
        let pool_of = |name: &str| pool_ids.get(name).copied();
        let (cluster, nodes_kept) = match kept_nodes {
            Some(kept) => {
                let layouts: Vec<(&str, NvLink)> =
                    pools.iter().map(|p| (p.name, p.spec.nvlink)).collect();
                let cluster = kept.cluster(nodes, &layouts, &mut models, pool_of);
                (cluster, kept.reused)
            }
            None => (Cluster::unindexed(nodes, &mut models, pool_of), false),
        };
        let look_up = || {
            records::Resolved::of(
                observed,
                |name| job_index.get(name, |j| jobs[j as usize].name),
                |name| cluster.node_id(name),
            )
        };
        // Node ids hold while the cluster is the kept one.
        let resolved = match kept_resolved.filter(|_| nodes_kept) {
            Some(kept) => {
                debug_assert!(
                    kept.same_look_ups(&look_up()),
                    "kept records' look-ups differ"
                );
                kept
            }
            None => look_up(),
        };
        for node in &cluster.nodes {
            if let Some(p) = node.pool {
                pools[p as usize].observed_nodes += 1;
            }
        }
        let jobs_len = jobs.len();
        let pending_now = vec![false; jobs.len()];
        let decided = vec![false; jobs.len()];
        let pending = Vec::with_capacity(jobs.len());
        let mut engine = Engine {
            now: input.now,
            revision: input.revision,
            models,
            pools,
            cluster,
            tree,
            jobs,
            job_index,
            runs: Vec::new(),
            pending_now,
            decided,
            undecided_demand: Vec::new(),
            model_capacity: Vec::new(),
            reservation: None,
            actions: Actions::default(),
            pending,
            placed_gpus: 0,
            placed: Vec::new(),
            unhealthy: 0,
            explain: None,
            resolved,
            shared_names,
            fair_order,
            freeing: freeing::Freeing::default(),
            runs_by_queue: Vec::new(),
            victim_index: Vec::new(),
            victim_lists: Vec::new(),
            held_for: HashMap::default(),
            own_nominated: Vec::new(),
            nominated: HashMap::default(),
            observed_queued: &observed.queued,
            generation: 0,
            preempt_memo: HashMap::default(),
            reason_memo: HashMap::default(),
            reason_epoch: 0,
            reserved_reason_memo: HashMap::default(),
            reserved_limit_memo: HashMap::default(),
            reservation_memo: HashMap::default(),
            outcome_memo: HashMap::default(),
            run_starts: HashMap::default(),
            started_before_of: vec![std::cell::Cell::new(u32::MAX); jobs_len],
            preemptions: 0,
            candidate_memo: HashMap::default(),
            source_memo: HashMap::default(),
            kept_runs: Vec::new(),
            kept_groups: Vec::new(),
            held_by_memo: std::cell::RefCell::default(),
            claim_owners: Vec::new(),
            claims_epoch: 0,
            freeing_claims_memo: claims::SharedMemo::default(),
            node_sizes: std::cell::OnceCell::new(),
            domain_memo: std::cell::RefCell::default(),
            victim_gpus: std::cell::RefCell::default(),
            chain_memo: std::cell::RefCell::default(),
            bound_memo: std::cell::RefCell::default(),
            ends_before_memo: std::cell::RefCell::default(),
        };
        engine.load_runs(observed);
        let runs = engine.runs.iter().filter_map(|r| Some((r.job?, r.started)));
        attained::attain(&engine.tree, &mut engine.jobs, runs, observed, engine.now);
        engine.index_victims();
        engine.drain_unhealthy(nodes);
        engine.cluster.build_index();
        engine.add_virtual_nodes();
        engine
    }

    /// Running jobs: hold their GPUs, charge their queues, and decide which
    /// are stopping (cancel, terminate, preemption in progress).
    ///
    /// Run ids follow job names (so the observed file's order does not
    /// matter), but the file is walked in its own order: the order its
    /// records lie in memory, a third faster on a large fleet than walking
    /// them by name.
    fn load_runs(&mut self, observed: &'a ObservedState) {
        let running = &observed.running;
        let mut resolved = std::mem::take(&mut self.resolved);
        resolved.orders(running);
        let by_name = std::mem::take(&mut resolved.by_name);
        let mut run_of = vec![0 as RunId; running.len()];
        for (rank, (_, i)) in by_name.iter().enumerate() {
            run_of[*i as usize] = rank as RunId;
        }
        let mut unordered: Vec<Option<Run<'a>>> = Vec::with_capacity(running.len());
        let mut stops: Vec<(RunId, Action)> = Vec::new();
        let part_nodes_of = std::mem::take(&mut resolved.part_nodes);
        let mut part_nodes = part_nodes_of.iter();
        for (k, (r, &run_id)) in running.iter().zip(&run_of).enumerate() {
            let job = resolved.running[k];
            let mut placement: Placement = Vec::with_capacity(r.placement.len());
            let mut model = None;
            for part in &r.placement {
                let Some(node) = part_nodes.next().copied().flatten() else {
                    continue;
                };
                let state = self.cluster.node(node);
                model = model.or(state.model);
                let positions: Vec<usize> = part
                    .gpus
                    .iter()
                    .filter_map(|i| state.gpus.iter().position(|g| g.index == *i))
                    .collect();
                placement.push((node, positions));
            }
            let gpus: u64 = placement.iter().map(|(_, p)| p.len() as u64).sum();
            let mut restarting = false;
            let (stopping, ends_at) = match job {
                None => (Stopping::Cancelled, Some(self.now)),
                Some(j) => {
                    let info = &self.jobs[j as usize];
                    let limit_end = info.time_limit.map(|l| after(r.started, l));
                    if let Some(since) = r.preempting_since {
                        (Stopping::Preempted, Some(after(since, info.grace)))
                    } else if limit_end.is_some_and(|end| end <= self.now) {
                        (Stopping::Terminated, Some(self.now))
                    } else if let Some(reason) = resolved.restart_requested(k, info.object, r) {
                        // A restart: preempted for itself, so it comes back
                        // as a pending job with its GPUs nominated for it.
                        restarting = true;
                        stops.push((
                            run_id,
                            Action::Preempt {
                                job: r.job.clone(),
                                for_job: r.job.clone(),
                                reason,
                            },
                        ));
                        (Stopping::Preempted, Some(after(self.now, info.grace)))
                    } else {
                        // Terminated once its limit is reached.
                        if let Some(end) = limit_end {
                            horizon::note(end);
                        }
                        (Stopping::No, limit_end)
                    }
                }
            };
            let owner = match stopping {
                Stopping::No => Owner::Running(run_id),
                _ => Owner::Freeing(run_id),
            };
            placement::apply(&mut self.cluster, &placement, owner);
            if let (Some(j), Some(m)) = (job, model)
                && let Some(q) = self.jobs[j as usize].queue
            {
                match stopping {
                    Stopping::No => {
                        self.tree.charge(q, m, gpus, true);
                        self.tree.charge_running(q, m, gpus, true);
                    }
                    // A job in its grace period holds its GPUs: they count
                    // against its queues' limits until it is gone, or until
                    // the job it stops for is charged in its place.
                    Stopping::Preempted | Stopping::Terminated => {
                        self.tree.charge_held(q, m, gpus, true);
                        if stopping == Stopping::Preempted
                            && let Some(p) = r
                                .preempted_for
                                .as_deref()
                                .and_then(|name| self.job_named(name))
                        {
                            self.held_for.entry(p).or_default().push(run_id);
                        }
                    }
                    Stopping::Cancelled => {}
                }
            }
            match stopping {
                Stopping::Cancelled => stops.push((
                    run_id,
                    Action::Cancel {
                        job: r.job.clone(),
                        reason: "removed from Git".to_string(),
                    },
                )),
                Stopping::Terminated => {
                    let limit = job
                        .and_then(|j| self.jobs[j as usize].time_limit)
                        .unwrap_or_default();
                    stops.push((
                        run_id,
                        Action::Terminate {
                            job: r.job.clone(),
                            reason: format!(
                                "time limit {limit} exceeded (started {})",
                                reasons::clock(r.started)
                            ),
                        },
                    ));
                }
                Stopping::No | Stopping::Preempted => {}
            }
            unordered.push(Some(Run {
                name: &r.job,
                job,
                started: r.started,
                placement,
                model,
                gpus,
                stopping,
                ends_at,
                preempted_for: if restarting {
                    Some(r.job.as_str())
                } else {
                    r.preempted_for.as_deref()
                },
                kept_for: None,
            }));
        }
        resolved.part_nodes = part_nodes_of;
        self.runs = by_name
            .iter()
            .filter_map(|(_, i)| unordered[*i as usize].take())
            .collect();
        resolved.by_name = by_name;
        stops.sort_by_key(|(run, _)| *run);
        for (_, action) in stops {
            match action {
                Action::Cancel { .. } => self.actions.cancel.push(action),
                Action::Preempt { .. } => self.actions.preempt.push(action),
                _ => self.actions.terminate.push(action),
            }
        }
        // Per priority of a job: the starts of the preemptible running jobs
        // of lower priority, sorted.
        // (Sorted by start: which of those that started together comes
        // first does not matter, only their starts are listed.)
        let runs_by_start: Vec<(i32, Timestamp)> = resolved
            .by_start
            .iter()
            .filter_map(|k| {
                let r = &self.runs[run_of[*k as usize] as usize];
                let job = &self.jobs[r.job? as usize];
                job.preemptible.then_some((job.priority, r.started))
            })
            .collect();
        debug_assert!(runs_by_start.is_sorted_by_key(|(_, started)| *started));
        self.resolved = resolved;
        // The jobs' priorities, distinct (few: one per class), sorted.
        let mut distinct: HashSet<i32> = HashSet::default();
        let mut last = None;
        for job in &self.jobs {
            if last != Some(job.priority) {
                last = Some(job.priority);
                distinct.insert(job.priority);
            }
        }
        let mut priorities: Vec<i32> = distinct.into_iter().collect();
        priorities.sort_unstable();
        self.run_starts = priorities
            .into_iter()
            .map(|p| {
                let below = runs_by_start
                    .iter()
                    .filter(|(priority, _)| *priority < p)
                    .map(|(_, started)| *started)
                    .collect();
                (p, below)
            })
            .collect();
        self.runs_by_queue = vec![Vec::new(); self.tree.queues.len()];
        for (run_id, run) in self.runs.iter().enumerate() {
            if let Some(q) = run.job.and_then(|j| self.jobs[j as usize].queue) {
                self.runs_by_queue[q as usize].push(run_id as RunId);
            }
        }
    }

    /// Builds `victim_lists` and `victim_index` from the running jobs that may be preempted.
    fn index_victims(&mut self) {
        let mut lists: Vec<Vec<VictimList>> = vec![Vec::new(); self.tree.queues.len()];
        // Every victim, ranked in victim order, then dealt to its list in
        // that order (by its key, run and place in `all`).
        let mut all: Vec<(QueueId, ModelId, Victim)> = Vec::new();
        let mut order: Vec<(u128, RunId, u32)> = Vec::new();
        for (r, run) in self.runs.iter().enumerate() {
            let (Stopping::No, Some(j), Some(m)) = (run.stopping, run.job, run.model) else {
                continue;
            };
            let job = &self.jobs[j as usize];
            let (true, Some(q)) = (job.preemptible, job.queue) else {
                continue;
            };
            let victim = Victim {
                run: r as RunId,
                priority: job.priority,
                started: run.started,
                tier: job.attained.map_or(0, |a| a.tier),
                rank: 0,
            };
            // Lists in the order their first victims' runs come.
            let per_model = &mut lists[q as usize];
            if !per_model.iter().any(|list| list.model == m) {
                per_model.push(VictimList {
                    model: m,
                    victims: Vec::new(),
                    head: 0,
                    gpus_range: (0, 0),
                    gpu_sums: Vec::new(),
                    stale: 0,
                });
            }
            let key = victim_order(job.priority, run.started);
            order.push((key, r as RunId, all.len() as u32));
            all.push((q, m, victim));
        }
        // Runs are unique: the order is total, and the last plan's order
        // (of victims at the same places in `all`) is this one's when it
        // sorts them strictly (the victims move little from plan to plan).
        let guess = std::mem::take(&mut self.resolved.victim_order);
        let sorted = guess.len() == order.len()
            && guess
                .windows(2)
                .all(|w| order[w[0] as usize] < order[w[1] as usize]);
        let ranked: Vec<u32> = if sorted {
            guess
        } else {
            order.sort_unstable();
            order.iter().map(|(_, _, k)| *k).collect()
        };
        debug_assert!(ranked.is_sorted_by_key(|k| {
            let v = &all[*k as usize].2;
            (v.priority, std::cmp::Reverse(v.started), v.run)
        }));
        for (rank, &k) in ranked.iter().enumerate() {
            let (q, m, mut victim) = all[k as usize];
            victim.rank = rank as u32;
            if let Some(list) = lists[q as usize].iter_mut().find(|list| list.model == m) {
                list.victims.push(victim);
            }
        }
        self.resolved.victim_order = ranked;
        for per_model in &mut lists {
            for list in per_model.iter_mut() {
                debug_assert!(list.victims.is_sorted_by_key(|v| v.rank));
                let gpus = list.victims.iter().map(|v| self.runs[v.run as usize].gpus);
                list.gpus_range = (gpus.clone().min().unwrap_or(0), gpus.max().unwrap_or(0));
            }
        }
        // The lists are sorted by priority: cumulative GPUs give the bound.
        self.victim_index = lists
            .iter()
            .map(|per_model| {
                per_model
                    .iter()
                    .map(|list| {
                        let mut total = 0;
                        let sums = list
                            .victims
                            .iter()
                            .map(|v| {
                                total += self.runs[v.run as usize].gpus;
                                (v.priority, total)
                            })
                            .collect();
                        (list.model, sums)
                    })
                    .collect()
            })
            .collect();
        self.victim_lists = lists;
    }

    /// Nodes with unhealthy GPUs get no new placements.
    fn drain_unhealthy(&mut self, observed: &[model::observed::ObservedNode]) {
        let mut nodes: Vec<&model::observed::ObservedNode> = observed
            .iter()
            .filter(|n| n.gpus.iter().any(|g| !g.healthy))
            .collect();
        // natural order (`n2` before `n10`): drains are listed for people
        // (only nodes with unhealthy GPUs sorted: linear on a healthy fleet)
        nodes.sort_by(|a, b| model::text::natural_cmp(&a.name, &b.name));
        for node in nodes {
            let mut bad: Vec<u32> = node
                .gpus
                .iter()
                .filter(|g| !g.healthy)
                .map(|g| g.index)
                .collect();
            if bad.is_empty() {
                continue;
            }
            bad.sort_unstable();
            self.unhealthy += bad.len() as u64;
            let Some(id) = self.cluster.node_id(&node.name) else {
                continue;
            };
            self.cluster.cordon(id);
            let list: Vec<String> = bad.iter().map(u32::to_string).collect();
            let reason = if bad.len() == 1 {
                format!("GPU {} unhealthy", list[0])
            } else {
                format!("GPUs {} unhealthy", list.join(", "))
            };
            self.actions.drain.push(Action::Drain {
                node: node.name.clone(),
                reason,
            });
        }
    }

    /// Virtual nodes for every pool that may grow; those needed to reach
    /// `min` are activated from the start.
    fn add_virtual_nodes(&mut self) {
        let model_count = self.models.len();
        for p in 0..self.pools.len() {
            let (name, spec, observed) = {
                let pool = &self.pools[p];
                (pool.name, pool.spec, pool.observed_nodes)
            };
            let room = spec.size.max.saturating_sub(observed);
            let mut k = 0u32;
            let mut ids = Vec::new();
            while (ids.len() as u32) < room {
                let node = model::observed::pool_node(name, spec, k);
                k += 1;
                if self.cluster.node_id(&node.name).is_some() {
                    continue;
                }
                let mut state =
                    cluster_node_from(&node, self.pools[p].model, spec.nvlink, p as PoolId);
                state.is_virtual = true;
                ids.push(self.cluster.push_node(state, model_count));
            }
            let planned = spec.size.min.saturating_sub(observed).min(room);
            for id in ids.iter().take(planned as usize) {
                self.cluster.nodes[*id as usize].planned = true;
            }
            let pool = &mut self.pools[p];
            pool.virtual_nodes = ids;
        }
    }

    /// Per model: the GPUs of its largest node and of all its nodes (the
    /// nodes are fixed once the engine is built).
    fn node_sizes(&self, m: ModelId) -> (u64, u64) {
        let sizes = self.node_sizes.get_or_init(|| {
            let mut sizes = vec![(0, 0); self.models.len()];
            for node in &self.cluster.nodes {
                if let Some(size) = node.model.and_then(|m| sizes.get_mut(m as usize)) {
                    let gpus = node.gpus.len() as u64;
                    *size = (size.0.max(gpus), size.1 + gpus);
                }
            }
            sizes
        });
        sizes.get(m as usize).copied().unwrap_or((0, 0))
    }

    fn run_explained(self) -> (Plan, Option<explain::Capture>) {
        let (plan, capture, _, _) = self.run_keeping();
        (plan, capture)
    }

    /// The plan, what `explain` captured, the cluster as the plan left it
    /// (for [`planner::KeptNodes`] to reset and use again), and the jobs by
    /// name (for drift).
    fn run_keeping(mut self) -> (Plan, Option<explain::Capture>, Cluster, JobNames<'a>) {
        explain::describe_running(&mut self);
        let pending: Vec<JobId> = {
            let mut done = vec![false; self.jobs.len()];
            for j in self.runs.iter().filter_map(|r| r.job) {
                done[j as usize] = true;
            }
            for j in self.resolved.completed.iter().flatten() {
                done[*j as usize] = true;
            }
            (0..self.jobs.len() as JobId)
                .filter(|j| !done[*j as usize])
                .collect()
        };
        for &j in &pending {
            self.pending_now[j as usize] = true;
        }
        horizon::note_unseen_ranks(&self.tree, &self.jobs, &pending, self.now);
        self.undecided_demand = vec![vec![0; self.models.len()]; self.tree.queues.len()];
        self.model_capacity = vec![(0, 0); self.models.len()];
        for pool in &self.pools {
            let (largest, total) = &mut self.model_capacity[pool.model as usize];
            *largest = (*largest).max(pool.spec.gpu.count);
            *total += u64::from(pool.spec.gpu.count) * u64::from(pool.spec.size.max);
        }
        for &j in &pending {
            let job = &self.jobs[j as usize];
            if let Some(q) = job.queue {
                for &m in job.models.iter() {
                    if self.could_run_on(j, m) {
                        self.undecided_demand[q as usize][m as usize] += job.gpus;
                    }
                }
            }
        }

        self.index_freeing();
        self.hold_nominations();
        // Jobs that cannot be ordered (no leaf queue, no model) are pending first, by name.
        for &j in &pending {
            let job = &self.jobs[j as usize];
            if job.queue.is_none() {
                let reason = format!(
                    "queue {:?} is not a leaf queue in Git; jobs go to leaf queues",
                    job.spec.queue
                );
                self.push_pending(j, reason, "unschedulable");
            }
        }

        let guess = std::mem::take(&mut self.fair_order);
        let (mut order, found) =
            order::FairShare::new(&self.tree, &self.jobs, &pending, self.now, &guess);
        self.fair_order = found;
        // As Kueue does: jobs that fit within their queue's guarantee go
        // first, in fair-share order; jobs that would borrow come after, in
        // fair-share order too (issue 16 item 3: a queue that uses less is
        // not passed by a busier queue's high-priority borrower). Priority
        // orders jobs inside a leaf. Borrowers are kept in the order handed
        // out (so in within-leaf order inside each leaf). A borrower placed
        // so while a higher-priority borrower of another queue was waiting
        // is not that one's victim by priority alone in the next plan (rule
        // 5c counts only victims that started before their preemptor was
        // first seen; `preemption::candidates`), so fair share does not thrash.
        //
        // Priority within a leaf holds (issue 16 item 4): once a job of a
        // leaf is deferred, the leaf's jobs of lower priority are held back
        // with it, so they do not take the GPUs it needs first. A leaf held
        // back keeps its guaranteed turn: its deferred jobs up to its last
        // held-back one within its guarantee go first in the borrowers' pass (fair share among
        // such leaves), before other queues' borrowers could take the GPUs
        // its held-back jobs are guaranteed (which would be reclaimed in the
        // next plan). So do a leaf's deferred jobs up to its last one that
        // holds GPUs (nominated or promised: a preemptor whose victims
        // stopped): the room it preempted for is its own, and a borrower of
        // another queue taking it would make it preempt again. In a
        // `least-attained` leaf a lower tier outranks a higher one of the
        // same priority alike (rule (d) would take its GPUs back).
        let queues = self.tree.queues.len();
        let mut deferred_priority: Vec<Option<(i32, i16)>> = vec![None; queues];
        let mut last_held: Vec<Option<JobId>> = vec![None; queues];
        let mut borrowers: Vec<(QueueId, JobId)> = Vec::new();
        while let Some(j) = order.next(&self.tree, &self.cluster.healthy_total) {
            let Some(q) = self.jobs[j as usize].queue else {
                continue;
            };
            let job = &self.jobs[j as usize];
            let priority = (job.priority, -job.attained.map_or(0, |a| i16::from(a.tier)));
            let outranked = deferred_priority[q as usize].is_some_and(|p| p > priority);
            if outranked && !self.would_borrow(j) {
                last_held[q as usize] = Some(j);
            }
            if !outranked && !self.would_borrow(j) {
                explain::before_admit(&mut self, j, &order);
                if self.admit_guaranteed(j) {
                    continue;
                }
            }
            borrowers.push((q, j));
            if self.holds_gpus(j) {
                last_held[q as usize] = Some(j);
            }
            let deferred = &mut deferred_priority[q as usize];
            *deferred = Some(deferred.map_or(priority, |p| p.max(priority)));
        }
        // Leaves held back first, up to their last held-back (or holding) job.
        let (mut first, mut rest) = (Vec::new(), Vec::new());
        let mut past_held = vec![false; queues];
        for &(q, j) in &borrowers {
            let Some(last) = last_held[q as usize] else {
                rest.push((q, j));
                continue;
            };
            if past_held[q as usize] {
                rest.push((q, j));
            } else {
                first.push((q, j));
                past_held[q as usize] = j == last;
            }
        }
        for pass in [first, rest] {
            let mut order = order::FairShare::from_ordered(&self.tree, &self.jobs, &pass, self.now);
            while let Some(j) = order.next(&self.tree, &self.cluster.healthy_total) {
                explain::before_admit(&mut self, j, &order);
                self.admit(j);
            }
        }
        let scale = scaling::scale_actions(&mut self);
        self.into_plan(scale)
    }

    /// Tries to start job `j`: on free GPUs, on reserved GPUs (backfill), on
    /// GPUs being freed, on new nodes (scale-up), and last by preemption.
    ///
    /// Stopping jobs preempted for `j` do not count against the limits `j`
    /// is checked against; they count again unless `j` ends up charged in
    /// their place ([`Engine::charged_in_place_of_held`]).
    fn admit(&mut self, j: JobId) {
        self.admit_on(j, false);
    }

    /// [`Engine::admit`] in the guaranteed pass; `false` when the job is
    /// left for the borrowers' pass (see [`Engine::first_pass_models`]).
    fn admit_guaranteed(&mut self, j: JobId) -> bool {
        self.admit_on(j, true)
    }

    /// Whether GPUs are kept for pending job `j`: nominated to it, promised
    /// by stopping jobs preempted for it, or held for it against limits.
    fn holds_gpus(&self, j: JobId) -> bool {
        self.nominated.contains_key(&j)
            || self.freeing.has_dedicated(j)
            || self.held_for.contains_key(&j)
    }

    /// The models job `j` tries in the guaranteed pass (issue 16 item 8),
    /// and whether one was left out: first those on which it stays within
    /// its leaf's guarantee, then those it would borrow, but only while the
    /// GPUs of that model left free still cover what other leaves'
    /// undecided pending jobs may claim within their unused guarantees
    /// (borrowing them would be reclaimed in the next plan). A job with GPUs
    /// kept for it decides now and tries such models last instead.
    /// `None`: all its models, in their order.
    fn first_pass_models(&self, j: JobId) -> Option<(Vec<ModelId>, bool)> {
        let job = &self.jobs[j as usize];
        let all = &job.models;
        let q = job.queue?;
        if all.len() < 2 {
            return None;
        }
        let gpus = job.gpus;
        let within = |m: ModelId| self.tree.usage(q, m) + gpus <= self.tree.guaranteed(q, m);
        let mut models: Vec<ModelId> = all.iter().copied().filter(|m| within(*m)).collect();
        let mut left_out: Vec<ModelId> = Vec::new();
        for &m in all.iter().filter(|m| !within(**m)) {
            if self.lent_to_guarantees(q, m, gpus) {
                left_out.push(m);
            } else {
                models.push(m);
            }
        }
        let holds = self.holds_gpus(j);
        if left_out.is_empty() && *models == **all {
            return None;
        }
        if holds {
            models.extend(left_out);
            return Some((models, false));
        }
        let deferrable = !left_out.is_empty();
        Some((models, deferrable))
    }

    /// Whether job `j` could ever run on model `m` as the pools are
    /// declared: a replica fits a node of it and the job fits its pools at
    /// their `size.max` (health aside).
    fn could_run_on(&self, j: JobId, m: ModelId) -> bool {
        let job = &self.jobs[j as usize];
        let (largest, total) = self.model_capacity[m as usize];
        job.per_replica <= largest && job.gpus <= total
    }

    /// Whether borrowing `gpus` GPUs of model `m` for leaf `q` would leave
    /// fewer free than other leaves' undecided pending jobs may claim within
    /// their unused guarantees.
    fn lent_to_guarantees(&self, q: QueueId, m: ModelId, gpus: u64) -> bool {
        let mine: Vec<QueueId> = self.tree.path(q).collect();
        let claims: u64 = (0..self.tree.queues.len() as QueueId)
            .filter(|l| !mine.contains(l))
            .map(|l| {
                let demand = self.undecided_demand[l as usize][m as usize];
                if demand == 0 {
                    return 0;
                }
                let idle = self
                    .tree
                    .guaranteed(l, m)
                    .saturating_sub(self.tree.usage(l, m));
                idle.min(demand)
            })
            .sum();
        let free = self
            .cluster
            .free_total
            .get(m as usize)
            .copied()
            .unwrap_or(0);
        free < gpus + claims
    }

    /// Decides job `j`; in the guaranteed pass (`first_pass`) on the models
    /// of [`Engine::first_pass_models`], and a job that would stay pending
    /// after a model was left out is left undecided instead (`false`).
    fn admit_on(&mut self, j: JobId, first_pass: bool) -> bool {
        self.set_decided(j, true);
        // GPUs kept for `j` that it does not take become free for others.
        let holds = self.nominated.contains_key(&j) || self.freeing.has_dedicated(j);
        self.lend_held(j, false);
        let lent = self.lend_nominations(j);
        let first = if first_pass {
            self.first_pass_models(j)
        } else {
            None
        };
        let may_defer = first.as_ref().is_some_and(|(_, defer)| *defer);
        let models = first.as_ref().map(|(models, _)| models.as_slice());
        let decided = self.admit_inner(j, models, may_defer);
        self.take_back_nominations(lent);
        self.lend_held(j, true);
        if holds {
            self.generation += 1;
        }
        if decided {
            if let Some(q) = self.jobs[j as usize].queue {
                let job = &self.jobs[j as usize];
                for &m in job.models.iter() {
                    if self.could_run_on(j, m) {
                        let d = &mut self.undecided_demand[q as usize][m as usize];
                        *d = d.saturating_sub(job.gpus);
                    }
                }
            }
        } else {
            self.set_decided(j, false);
        }
        decided
    }

    /// Marks job `j` decided or not, counting the change in the claims'
    /// epoch when runs are kept for it.
    fn set_decided(&mut self, j: JobId, decided: bool) {
        if self.claim_owners.get(j as usize).copied().unwrap_or(false)
            && self.decided[j as usize] != decided
        {
            self.claims_epoch += 1;
        }
        self.decided[j as usize] = decided;
    }

    /// Whether pending job `p`, not decided yet, keeps the GPUs of model `m`
    /// nominated (`free`) or promised to it away from job `asking` (issue 16
    /// item 5): only while it fits its quota, nominated GPUs not against a
    /// job of higher priority, and nothing against a job within its
    /// guarantee when `p` would borrow them (the next plan would reclaim).
    fn keeps(&self, p: JobId, m: ModelId, asking: JobId, free: bool) -> bool {
        self.keeps_from(p, m, asking, free, &self.held_by(asking, m))
    }

    /// [`Engine::keeps`] with what job `asking`'s stopping runs hold per
    /// queue on model `m` ([`Engine::held_by`]) given.
    fn keeps_from(
        &self,
        p: JobId,
        m: ModelId,
        asking: JobId,
        free: bool,
        asking_held: &[(QueueId, u64)],
    ) -> bool {
        let (pj, aj) = (&self.jobs[p as usize], &self.jobs[asking as usize]);
        let Some(pq) = pj.queue else { return false };
        if !self.fits_without_own_held(p, asking_held, pq, m) {
            return false;
        }
        if free && aj.priority > pj.priority {
            return false;
        }
        let within =
            |q: QueueId, gpus: u64| self.tree.usage(q, m) + gpus <= self.tree.guaranteed(q, m);
        let outranked = aj.queue.is_some_and(|aq| within(aq, aj.gpus)) && !within(pq, pj.gpus);
        !outranked
    }

    /// Whether pending job `p` fits every limit on its path on model `m`,
    /// not counting the stopping jobs preempted for it (while a job is
    /// decided, those preempted for it count again for `p`: `asking_held`,
    /// [`Engine::held_by`]).
    fn fits_without_own_held(
        &self,
        p: JobId,
        asking_held: &[(QueueId, u64)],
        leaf: QueueId,
        m: ModelId,
    ) -> bool {
        let gpus = self.jobs[p as usize].gpus;
        let own = self.held_by_kept(p, m);
        let in_queue = |held: &[(QueueId, u64)], q: QueueId| {
            held.iter().find(|(k, _)| *k == q).map_or(0, |(_, n)| *n)
        };
        self.tree.path(leaf).all(|q| {
            let Some(limit) = self.tree.limit(q, m) else {
                return true;
            };
            let used = self.tree.usage(q, m) + self.tree.held(q, m) + in_queue(asking_held, q);
            used.saturating_sub(own.as_deref().map_or(0, |h| in_queue(h, q))) + gpus <= limit
        })
    }

    /// [`Engine::held_by`] of job `j`, found once while its stopping runs
    /// stay held for it (`None`: none are).
    fn held_by_kept(&self, j: JobId, m: ModelId) -> Option<HeldPerQueue> {
        if !self.held_for.contains_key(&j) {
            return None;
        }
        let held = self
            .held_by_memo
            .borrow_mut()
            .entry((j, m))
            .or_insert_with(|| self.held_by(j, m).into())
            .clone();
        debug_assert!(*held == *self.held_by(j, m), "a kept held_by is stale");
        Some(held)
    }

    /// Per queue, what job `j`'s stopping runs on model `m` hold in it or
    /// below ([`Engine::held_in`] of every queue at once; queues with none
    /// left out).
    fn held_by(&self, j: JobId, m: ModelId) -> Vec<(QueueId, u64)> {
        let mut held: Vec<(QueueId, u64)> = Vec::new();
        let Some(runs) = self.held_for.get(&j) else {
            return held;
        };
        for run in runs.iter().map(|r| &self.runs[*r as usize]) {
            let queue = run.job.and_then(|vj| self.jobs[vj as usize].queue);
            let (Some(vq), true) = (queue, run.model == Some(m)) else {
                continue;
            };
            for a in self.tree.path(vq) {
                match held.iter_mut().find(|(q, _)| *q == a) {
                    Some((_, n)) => *n += run.gpus,
                    None => held.push((a, run.gpus)),
                }
            }
        }
        debug_assert!(held.iter().all(|(q, n)| *n == self.held_in(j, *q, m)));
        held
    }

    /// GPUs of model `m` in queue `q` (or below) held by stopping runs
    /// preempted for job `j`.
    fn held_in(&self, j: JobId, q: QueueId, m: ModelId) -> u64 {
        let Some(runs) = self.held_for.get(&j) else {
            return 0;
        };
        runs.iter()
            .map(|r| &self.runs[*r as usize])
            .filter(|run| run.model == Some(m))
            .filter(|run| {
                run.job
                    .and_then(|vj| self.jobs[vj as usize].queue)
                    .is_some_and(|vq| self.tree.path(vq).any(|a| a == q))
            })
            .map(|run| run.gpus)
            .sum()
    }

    /// GPUs nominated for other undecided jobs that job `j` may take
    /// ([`Engine::keeps`]): free while `j` is decided on.
    fn lend_nominations(&mut self, j: JobId) -> Vec<(JobId, NodeId, usize)> {
        if self.nominated.is_empty() {
            return Vec::new();
        }
        let mut holders: Vec<JobId> = self.nominated.keys().copied().filter(|p| *p != j).collect();
        holders.sort_unstable();
        let mut lent = Vec::new();
        for p in holders {
            for &(node, pos) in &self.nominated[&p] {
                let state = self.cluster.node(node);
                if state.gpus[pos].owner != Owner::Promised(p) {
                    continue;
                }
                let Some(m) = state.model else { continue };
                if !self.keeps(p, m, j, true) {
                    lent.push((p, node, pos));
                }
            }
        }
        for &(_, node, pos) in &lent {
            self.cluster.set_owner(node, pos, Owner::Free);
        }
        if !lent.is_empty() {
            self.generation += 1;
        }
        lent
    }

    /// Nominates again what [`Engine::lend_nominations`] lent and was not taken.
    fn take_back_nominations(&mut self, lent: Vec<(JobId, NodeId, usize)>) {
        for (p, node, pos) in lent {
            if self.cluster.node(node).gpus[pos].owner == Owner::Free {
                self.cluster.set_owner(node, pos, Owner::Promised(p));
            } else if let Some(held) = self.nominated.get_mut(&p) {
                held.retain(|g| *g != (node, pos));
            }
        }
    }

    /// Releases (`back == false`) or charges again the limit usage of the
    /// stopping runs preempted for `j`.
    fn lend_held(&mut self, j: JobId, back: bool) {
        let Some(runs) = self.held_for.get(&j) else {
            return;
        };
        for &r in runs {
            let run = &self.runs[r as usize];
            if let (Some(vj), Some(m)) = (run.job, run.model)
                && let Some(q) = self.jobs[vj as usize].queue
            {
                self.tree.charge_held(q, m, run.gpus, back);
            }
        }
    }

    /// Job `j` is charged while it waits: the stopping runs preempted for it
    /// no longer count against their limits (it counts in their place).
    fn charged_in_place_of_held(&mut self, j: JobId) {
        if self.held_for.remove(&j).is_some() {
            self.claims_epoch += 1;
            self.held_by_memo.get_mut().retain(|(p, _), _| *p != j);
        }
    }

    fn admit_inner(&mut self, j: JobId, models: Option<&[ModelId]>, may_defer: bool) -> bool {
        if self.jobs[j as usize].queue.is_none() {
            return true;
        }
        // A job just like one that stayed pending, with nothing changed
        // since (no GPU changed hands, no usage moved), stays pending for the
        // same reason: the common case of a full fleet's long queue. (Not
        // for a job trying only some of its models.)
        let memo_key = self.outcome_key(j).filter(|_| models.is_none());
        if let Some(key) = &memo_key
            && let Some(known) = self.outcome_memo.get(key)
            && known.cluster_epoch == self.cluster.epoch
            && known.tree_epoch == self.tree.epoch
            && known
                .time_limit_in_reason
                .is_none_or(|limit| limit == self.jobs[j as usize].time_limit)
        {
            let (reason, waiting) = (known.reason.clone(), known.waiting);
            self.push_pending(j, reason, waiting);
            return true;
        }
        let job = self.jobs[j as usize].clone();
        let Some(q) = job.queue else { return true };
        let models: &[ModelId] = models.unwrap_or(&job.models);
        // Every acceptable model is tried for a start now (free, nominated
        // or reserved GPUs) before any for a wait (stopping jobs, new nodes):
        // a job never waits on one model while another fits now.
        let mut blocked = Vec::new();
        let mut fitting: Vec<Request> = Vec::new();
        self.own_nominated = self.nominated.get(&j).cloned().unwrap_or_default();
        for &m in models {
            let req = Request::for_job(&job, m);
            if !self.model_exists(m) {
                blocked.push(Blocked::NoNodes(m));
                continue;
            }
            if let Err(block) = self.tree.fits(q, m, job.gpus) {
                blocked.push(Blocked::Quota(m, block));
                continue;
            }
            if let Some(p) = self.place_nominated(j, &req) {
                placement::apply(&mut self.cluster, &p, Owner::Placed(j));
                self.release_nominated(j);
                self.commit_place(j, m, p, None);
                return true;
            }
            fitting.push(req);
        }
        self.release_nominated(j);
        for req in &fitting {
            if let Some(p) = placement::place_free(&mut self.cluster, req, j) {
                self.commit_place(j, req.model, p, None);
                return true;
            }
            if let Some(p) = backfill::place_on_reserved(self, req, &job) {
                placement::apply(&mut self.cluster, &p, Owner::Placed(j));
                self.commit_place(j, req.model, p, Some("backfill"));
                return true;
            }
        }
        for req in &fitting {
            if self.wait_for_freeing(j, req) || scaling::wait_for_scale_up(self, j, req) {
                return true;
            }
            if self.blocked_by_reservation(req) {
                blocked.push(Blocked::Reserved(*req));
            } else {
                blocked.push(Blocked::Placement(*req));
            }
        }
        // Its own nominated GPUs count as free for its victim search (and
        // are free for others when it stays pending).
        self.release_nominated(j);
        // Victims are compared across the acceptable models in one order
        // (borrowing before guaranteed, then priority…), not model by model.
        let reqs: Vec<Request> = models
            .iter()
            .filter(|&&m| self.model_exists(m))
            .map(|&m| Request::for_job(&job, m))
            .collect();
        if let Some(found) = preemption::find_best(self, j, &reqs) {
            preemption::carry_out(self, j, found);
            return true;
        }
        if may_defer {
            return false;
        }
        // Words first: the reservation takes free GPUs the reason counts.
        let (mut reason, waiting) = self.blocked_reason(&job, &blocked);
        if let Some(r) = self.reserve_if_first(j, &blocked) {
            reason.push_str(&r);
            self.push_pending(j, reason, waiting);
            return true;
        }
        let reason: Arc<str> = reason.into();
        if let Some(key) = memo_key {
            let reserved = blocked.iter().any(|b| matches!(b, Blocked::Reserved(_)));
            let known = KnownOutcome {
                cluster_epoch: self.cluster.epoch,
                tree_epoch: self.tree.epoch,
                reason: reason.clone(),
                waiting,
                time_limit_in_reason: reserved.then_some(job.time_limit),
            };
            self.outcome_memo.insert(key, known);
        }
        self.push_pending(j, reason, waiting);
        true
    }

    /// What decides a pending job's outcome besides the fleet's state; `None`
    /// for jobs with GPUs kept for them (nominated or freed by preemption).
    fn outcome_key(&self, j: JobId) -> Option<OutcomeKey> {
        let job = &self.jobs[j as usize];
        if self.nominated.contains_key(&j)
            || self.freeing.has_dedicated(j)
            || self.held_for.contains_key(&j)
        {
            return None;
        }
        Some(OutcomeKey {
            queue: job.queue?,
            priority: job.priority,
            models: job.models.clone(),
            replicas: job.replicas,
            per_replica: job.per_replica,
            required: job.required,
            preferred: job.preferred,
            ends_before_reservation: self
                .reservation
                .as_ref()
                .map(|res| backfill::ends_before_kept(self, job, res.start)),
            started_before: self.started_before(j),
            attained_tier: job.attained.map(|a| a.tier),
        })
    }

    /// [`OutcomeKey::started_before`]: how many preemptible running jobs of
    /// lower priority than `job` started before it was first seen (all,
    /// never seen). Jobs of one priority with the same count may preempt
    /// the same lower-priority borrowers (rule 5c): no such job started
    /// between their first-seen times.
    /// Found once per job (it is fixed for the plan).
    fn started_before(&self, j: JobId) -> usize {
        let known = &self.started_before_of[j as usize];
        if known.get() != u32::MAX {
            return known.get() as usize;
        }
        let job = &self.jobs[j as usize];
        let count = self.run_starts.get(&job.priority).map_or(0, |starts| {
            job.first_seen.map_or(starts.len(), |seen| {
                starts.partition_point(|started| *started < seen)
            })
        });
        // Counts are below the running jobs' count, far below u32::MAX.
        known.set(u32::try_from(count).unwrap_or(u32::MAX));
        count
    }

    /// The pending reason; remembered by what its words depend on while
    /// the cluster is unchanged (the jobs a storm leaves pending mostly
    /// fail alike), but for a reservation's.
    fn blocked_reason(&mut self, job: &JobInfo, blocked: &[Blocked]) -> (String, &'static str) {
        if let [Blocked::Reserved(req)] = blocked {
            return self.reserved_reason(job, blocked, req);
        }
        let Some(key) = self.blocked_key(blocked) else {
            return reasons::blocked(self, job, blocked);
        };
        if self.reason_epoch != self.cluster.epoch {
            self.reason_memo.clear();
            self.reason_epoch = self.cluster.epoch;
        }
        if let Some((text, waiting)) = self.reason_memo.get(&key) {
            #[cfg(debug_assertions)]
            {
                let fresh = reasons::blocked(self, job, blocked);
                debug_assert_eq!(
                    (text.as_str(), *waiting),
                    (fresh.0.as_str(), fresh.1),
                    "a remembered reason is stale"
                );
            }
            return (text.clone(), waiting);
        }
        let (text, waiting) = reasons::blocked(self, job, blocked);
        self.reason_memo.insert(key, (text.clone(), waiting));
        (text, waiting)
    }

    /// [`BlockedKey`]s of `blocked`; `None` with a reserved attempt (its
    /// words depend on the job's time limit).
    fn blocked_key(&self, blocked: &[Blocked]) -> Option<Vec<BlockedKey>> {
        blocked
            .iter()
            .map(|b| match b {
                Blocked::NoNodes(m) => Some(BlockedKey::NoNodes(*m)),
                Blocked::Quota(m, block) => Some(BlockedKey::Quota(
                    *m,
                    block.queue,
                    [
                        block.requested,
                        block.left,
                        block.limit,
                        self.tree.held(block.queue, *m),
                    ],
                )),
                Blocked::Placement(req) => Some(BlockedKey::Placement(shape_key(req))),
                Blocked::Reserved(_) => None,
            })
            .collect()
    }

    /// The pending reason of a job kept off reserved GPUs: all but its time
    /// limit's words remembered by shape while the cluster and the
    /// reservation are unchanged (most pending jobs of a full fleet wait
    /// alike).
    fn reserved_reason(
        &mut self,
        job: &JobInfo,
        blocked: &[Blocked],
        req: &Request,
    ) -> (String, &'static str) {
        let Some(reservation) = self.reservation.clone() else {
            return reasons::blocked(self, job, blocked);
        };
        let key = shape_key(req);
        let limit = self.reserved_limit(job);
        if let Some((epoch, held, head)) = self.reserved_reason_memo.get(&key)
            && *epoch == self.cluster.epoch
            && *held == reservation
        {
            let text = format!("{head}{limit}");
            debug_assert_eq!(text, reasons::blocked(self, job, blocked).0);
            return (text, "reservation");
        }
        let (text, waiting) = reasons::blocked(self, job, blocked);
        if waiting == "reservation"
            && let Some(head) = text.strip_suffix(limit.as_str())
        {
            self.reserved_reason_memo
                .insert(key, (self.cluster.epoch, reservation, head.to_string()));
        }
        (text, waiting)
    }

    /// [`reasons::reserved_limit`], remembered by time limit.
    fn reserved_limit(&mut self, job: &JobInfo) -> String {
        if let Some(text) = self.reserved_limit_memo.get(&job.time_limit) {
            debug_assert_eq!(*text, reasons::reserved_limit(self, job));
            return text.clone();
        }
        let text = reasons::reserved_limit(self, job);
        self.reserved_limit_memo
            .insert(job.time_limit, text.clone());
        text
    }

    /// [`backfill::blocked_by_reservation`], remembered while the cluster is
    /// unchanged (most pending jobs of a full fleet fail alike).
    fn blocked_by_reservation(&mut self, req: &Request) -> bool {
        if self.reservation.is_none() {
            return false;
        }
        let key = shape_key(req);
        if let Some((epoch, answer)) = self.reservation_memo.get(&key)
            && *epoch == self.cluster.epoch
        {
            return *answer;
        }
        let answer = backfill::blocked_by_reservation(self, req);
        self.reservation_memo
            .insert(key, (self.cluster.epoch, answer));
        answer
    }

    /// Whether job `j` would take its leaf queue above its guarantee on every
    /// acceptable model.
    fn would_borrow(&self, j: JobId) -> bool {
        let job = &self.jobs[j as usize];
        let Some(q) = job.queue else { return false };
        job.models
            .iter()
            .all(|m| self.tree.usage(q, *m) + job.gpus > self.tree.guaranteed(q, *m))
    }

    fn model_exists(&self, m: ModelId) -> bool {
        self.cluster
            .healthy_total
            .get(m as usize)
            .copied()
            .unwrap_or(0)
            > 0
            || self
                .pools
                .iter()
                .any(|p| p.model == m && !p.virtual_nodes.is_empty())
    }

    /// The first blocked job that fits its quota reserves GPUs (backfill).
    fn reserve_if_first(&mut self, j: JobId, blocked: &[Blocked]) -> Option<String> {
        if self.reservation.is_some() {
            return None;
        }
        let req = blocked.iter().find_map(|b| match b {
            Blocked::Placement(r) => Some(*r),
            _ => None,
        })?;
        let res = backfill::reserve(self, j, &req)?;
        let text = reasons::reservation(self, &res);
        self.reservation = Some(res);
        Some(text)
    }

    /// Records a placement: usage, action, reason.
    fn commit_place(&mut self, j: JobId, m: ModelId, p: Placement, how: Option<&str>) {
        let job = &self.jobs[j as usize];
        let Some(q) = job.queue else { return };
        self.tree.charge(q, m, job.gpus, true);
        self.pending_now[j as usize] = false;
        self.placed_gpus += job.gpus;
        let reason = reasons::placed(self, j, m, how);
        let placement = self.node_gpus(&p);
        self.placed.push((j, m, p));
        self.actions.place.push(Action::Place {
            job: self.jobs[j as usize].name.to_string(),
            placement,
            reason,
        });
    }

    /// Placement in executor terms: node names and GPU indices.
    fn node_gpus(&self, p: &Placement) -> Vec<NodeGpus> {
        p.iter()
            .map(|(id, positions)| {
                let node = self.cluster.node(*id);
                NodeGpus {
                    node: node.name.clone(),
                    gpus: positions.iter().map(|pos| node.gpus[*pos].index).collect(),
                }
            })
            .collect()
    }

    /// Whether `run`'s GPUs may go to job `j` once free: the job they are
    /// kept for, if any, is `j`, is decided already, or does not keep them
    /// from `j` ([`Engine::keeps`]).
    fn claimable(&self, run: RunId, j: JobId) -> bool {
        let run = &self.runs[run as usize];
        if run.restarting() {
            return run.job == Some(j);
        }
        match (run.kept_for, run.model) {
            (Some(p), Some(m)) => {
                p == j
                    || self.decided[p as usize]
                    || !self.pending_now[p as usize]
                    || !self.keeps(p, m, j, false)
            }
            _ => true,
        }
    }

    /// [`FreeingClaims`] of job `j` on model `m`, kept for the next job with
    /// the same claims ([`claims::SharedKey`]).
    fn freeing_claims(&mut self, j: JobId, m: ModelId) -> std::rc::Rc<FreeingClaims> {
        let key = claims::SharedKey::of(self, j, m);
        if let Some(known) = self.freeing_claims_memo.get(&key) {
            debug_assert!(
                **known == self.freeing_claims_of(j, m),
                "kept claims are stale"
            );
            return known.clone();
        }
        let found = std::rc::Rc::new(self.freeing_claims_of(j, m));
        self.freeing_claims_memo.insert(key, found.clone());
        found
    }

    /// [`Engine::freeing_claims`] found afresh: each owner of kept runs
    /// asked once ([`claims::KeptGroups`]; debug builds ask run by run too).
    fn freeing_claims_of(&self, j: JobId, m: ModelId) -> FreeingClaims {
        let kept = self
            .kept_runs
            .get(m as usize)
            .map_or(&[][..], Vec::as_slice);
        let runs = match self.kept_groups.get(m as usize) {
            Some(groups) => groups.claims(self, j, m, kept),
            None => Vec::new(),
        };
        let found = self.freeing_claims_from(runs);
        debug_assert!(
            found == self.freeing_claims_plain(j, m),
            "grouped claims differ from the plain ones"
        );
        found
    }

    /// [`FreeingClaims`] with `runs` (the claims, run by run).
    fn freeing_claims_from(&self, runs: Vec<(RunId, bool)>) -> FreeingClaims {
        debug_assert!(runs.is_sorted_by_key(|(r, _)| *r));
        let nodes: Vec<NodeId> = runs
            .iter()
            .filter(|(_, may)| *may)
            .flat_map(|(r, _)| self.runs[*r as usize].placement.iter().map(|(id, _)| *id))
            .collect();
        FreeingClaims { runs, nodes }
    }

    /// [`Engine::freeing_claims_of`] asked run by run ([`Engine::claimable`]).
    fn freeing_claims_plain(&self, j: JobId, m: ModelId) -> FreeingClaims {
        let runs = self
            .kept_runs
            .get(m as usize)
            .into_iter()
            .flatten()
            .map(|&r| (r, self.still_stopping(r) && self.claimable(r, j)))
            .collect();
        self.freeing_claims_from(runs)
    }

    /// Whether stopping run `r` still holds a GPU on a schedulable node
    /// (what the others held is claimed or drained).
    fn still_stopping(&self, r: RunId) -> bool {
        self.runs[r as usize]
            .placement
            .iter()
            .any(|(id, positions)| {
                let node = self.cluster.node(*id);
                node.schedulable
                    && positions
                        .iter()
                        .any(|&pos| node.gpus[pos].owner == Owner::Freeing(r))
            })
    }

    /// Job `j` fits once stopping jobs free their GPUs: it waits for them.
    fn wait_for_freeing(&mut self, j: JobId, req: &Request) -> bool {
        let mut freeing = std::mem::take(&mut self.freeing);
        // Each stopping run kept for one job is asked once whether `j` may
        // take its GPUs (not GPU by GPU). Only the nodes of those it may
        // are listed: on the others `j` may take free GPUs and those of
        // runs open to all, which is what the cluster's waiting index
        // counts, so they are streamed with the rest.
        // The answers are kept for the next job with the same claims
        // ([`Engine::freeing_claims`]).
        let known = self.freeing_claims(j, req.model);
        let (claims, kept_nodes) = (&known.runs, &known.nodes);
        let claimable = |r: RunId| match claims.binary_search_by_key(&r, |(k, _)| *k) {
            Ok(at) => claims[at].1,
            Err(_) => self.claimable(r, j),
        };
        let p = freeing.place(
            &self.cluster,
            req,
            &claimable,
            &self.own_nominated,
            kept_nodes,
        );
        self.freeing = freeing;
        let Some(p) = p else { return false };
        let mut waiting_on: Vec<RunId> = Vec::new();
        for (id, positions) in &p {
            for &pos in positions {
                let owner = self.cluster.node(*id).gpus[pos].owner;
                let new = match owner {
                    Owner::Freeing(r) => {
                        if !waiting_on.contains(&r) {
                            waiting_on.push(r);
                        }
                        self.freeing
                            .claimed(req.model, self.runs[r as usize].kept_for);
                        Owner::Claimed(r, j)
                    }
                    _ => Owner::Promised(j),
                };
                self.cluster.set_owner(*id, pos, new);
            }
        }
        let job = &self.jobs[j as usize];
        if let Some(q) = job.queue {
            self.tree.charge(q, req.model, job.gpus, true);
        }
        self.charged_in_place_of_held(j);
        waiting_on.sort_by_key(|r| self.runs[*r as usize].name);
        let reason = reasons::waiting_for_runs(self, &waiting_on);
        let waiting = if waiting_on
            .iter()
            .any(|r| self.runs[*r as usize].stopping == Stopping::Preempted)
        {
            "preemption"
        } else {
            "freeing"
        };
        self.push_pending(j, reason, waiting);
        true
    }

    /// Free GPUs that a preemption freed for a still-pending job are kept for
    /// it (`queued[].nominated`), so the job it was made for gets them.
    fn hold_nominations(&mut self) {
        let queued = self.observed_queued;
        for (k, q) in queued.iter().enumerate() {
            let Some(j) = self.resolved.queued[k] else {
                continue;
            };
            if !self.pending_now[j as usize] {
                continue;
            }
            for part in &q.nominated {
                // Only nodes observed now: a node scaled down since may come
                // back as a virtual node of the same name, not yet there.
                let Some(node) = self
                    .cluster
                    .node_id(&part.node)
                    .filter(|id| !self.cluster.node(*id).is_virtual)
                else {
                    continue;
                };
                for index in &part.gpus {
                    let state = self.cluster.node(node);
                    let Some(pos) = state.gpus.iter().position(|g| g.index == *index) else {
                        continue;
                    };
                    if state.schedulable && state.gpus[pos].owner == Owner::Free {
                        self.cluster.set_owner(node, pos, Owner::Promised(j));
                        self.nominated.entry(j).or_default().push((node, pos));
                    }
                }
            }
        }
    }

    /// Places job `j` on its nominated GPUs (plus free ones) when it fits;
    /// otherwise gives them back to everyone.
    fn place_nominated(&mut self, j: JobId, req: &Request) -> Option<Placement> {
        let held = self.nominated.get(&j)?.clone();
        let nodes = self
            .cluster
            .free_nodes_and(req.model, held.iter().map(|(n, _)| *n));
        let usable = |n: &cluster::NodeState, _: usize, g: &cluster::Gpu| {
            n.schedulable && (g.owner == Owner::Free || g.owner == Owner::Promised(j))
        };
        // Its nominated GPUs first ("it is placed there first").
        let prefer = |_: NodeId, _: usize, g: &cluster::Gpu| -> u8 {
            if g.owner == Owner::Promised(j) { 1 } else { 2 }
        };
        placement::place_preferring(&self.cluster, &nodes, req, &usable, &prefer)
    }

    /// Returns job `j`'s unused nominated GPUs to everyone.
    fn release_nominated(&mut self, j: JobId) {
        if let Some(held) = self.nominated.remove(&j) {
            for (node, pos) in held {
                if self.cluster.node(node).gpus[pos].owner == Owner::Promised(j) {
                    self.cluster.set_owner(node, pos, Owner::Free);
                    self.generation += 1;
                }
            }
        }
    }

    /// Indexes the GPUs of stopping jobs, once pending jobs are known.
    fn index_freeing(&mut self) {
        for r in 0..self.runs.len() {
            let run = &self.runs[r];
            if run.stopping == Stopping::No {
                continue;
            }
            let Some(m) = run.model else { continue };
            if run.restarting() {
                // Its GPUs come back to it: nobody else waits for them.
                continue;
            }
            let kept_for = run
                .preempted_for
                .and_then(|name| self.job_named(name))
                .filter(|j| self.pending_now[*j as usize]);
            self.freeing.add(m, &run.placement, kept_for);
            self.runs[r].kept_for = kept_for;
        }
        // Which stopping runs' GPUs every job may wait for, and which are
        // kept for one job, as the victim search tells them apart.
        let mut open = vec![false; self.runs.len()];
        self.kept_runs = vec![Vec::new(); self.models.len()];
        self.claim_owners = vec![false; self.jobs.len()];
        for (r, run) in self.runs.iter().enumerate() {
            if run.stopping == Stopping::No {
                continue;
            }
            let owner = if run.restarting() {
                run.job
            } else {
                run.kept_for
            };
            if let Some(owner) = owner {
                self.claim_owners[owner as usize] = true;
            }
            let kept = run.restarting() || (run.kept_for.is_some() && run.model.is_some());
            match (kept, run.model) {
                (true, Some(m)) => self.kept_runs[m as usize].push(r as RunId),
                (true, None) => {}
                (false, _) => open[r] = true,
            }
        }
        self.kept_groups = self
            .kept_runs
            .iter()
            .map(|kept| claims::KeptGroups::of(self, kept))
            .collect();
        self.cluster.index_waiting(open);
    }

    fn push_pending(&mut self, j: JobId, reason: impl Into<Arc<str>>, waiting_for: &'static str) {
        let job = &self.jobs[j as usize];
        let name = self.shared_names[j as usize]
            .get_or_insert_with(|| job.name.into())
            .clone();
        self.pending.push(Pending {
            job: name,
            reason: reason.into(),
            // The leaf's shared name is the spec's.
            queue: Some(match job.queue {
                Some(q) => self.tree.get(q).name.clone(),
                None => job.spec.queue.as_str().into(),
            }),
            waiting_for: Some(std::borrow::Cow::Borrowed(waiting_for)),
        });
    }

    fn into_plan(
        mut self,
        scale: Vec<Action>,
    ) -> (Plan, Option<explain::Capture>, Cluster, JobNames<'a>) {
        let capture = self.explain.take();
        let gpus: u64 = self
            .cluster
            .real_nodes()
            .map(|id| self.cluster.node(id).gpus.len() as u64)
            .sum();
        let cluster = std::mem::take(&mut self.cluster);
        let held: u64 = self.runs.iter().map(|r| r.gpus).sum();
        let unhealthy = self.unhealthy;
        let summary = Summary {
            gpus,
            allocated: held + self.placed_gpus,
            pending_jobs: self.pending.len() as u64,
            running_jobs: self.runs.len() as u64,
            placed_jobs: self.actions.place.len() as u64,
            preempted_jobs: self.actions.preempt.len() as u64,
            unhealthy_gpus: unhealthy,
        };
        let Actions {
            place,
            preempt,
            drain,
            terminate,
            cancel,
        } = self.actions;
        let mut actions = place;
        actions.extend(preempt);
        actions.extend(scale);
        actions.extend(drain);
        actions.extend(terminate);
        actions.extend(cancel);
        let plan = Plan {
            revision: self.revision.map(str::to_string),
            time: reasons::timestamp(self.now),
            actions,
            pending: self.pending,
            summary,
            drift: Vec::new(),
        };
        let names = JobNames {
            objects: self.jobs.iter().map(|j| j.object).collect(),
            index: std::mem::take(&mut self.job_index),
            resolved: std::mem::take(&mut self.resolved),
            shared_names: std::mem::take(&mut self.shared_names),
            fair_order: std::mem::take(&mut self.fair_order),
        };
        (plan, capture, cluster, names)
    }
}

/// The engine's node for a (virtual) pool node.
fn cluster_node_from(
    node: &model::observed::ObservedNode,
    model: ModelId,
    nvlink: NvLink,
    pool: PoolId,
) -> cluster::NodeState {
    let gpus: Vec<cluster::Gpu> = node
        .gpus
        .iter()
        .enumerate()
        .map(|(pos, g)| cluster::Gpu {
            index: g.index,
            domain: cluster::domain_of(nvlink, pos),
            owner: Owner::Free,
        })
        .collect();
    cluster::NodeState {
        name: node.name.clone(),
        pool: Some(pool),
        model: Some(model),
        rack: node.labels.get("rack").cloned(),
        zone: node.labels.get("zone").cloned(),
        max_domain: cluster::max_domain_size(&gpus),
        domain_masks: cluster::domain_masks(&gpus),
        free: gpus.len() as u32,
        gpus,
        schedulable: true,
        is_virtual: false,
        planned: false,
        idle_since: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// [`victim_order`] orders as (priority, most recent start first) does.
        #[test]
        fn victim_order_orders_as_priority_then_latest_start(
            a in (-3i32..3, -3i64..3, 0u32..5),
            b in (-3i32..3, -3i64..3, 0u32..5),
            big in proptest::bool::ANY,
        ) {
            let at = |(p, s, n): (i32, i64, u32)| {
                // The 59th second of a minute: nanoseconds past 1 s (up to
                // 1.6 s) make a leap second there.
                let (p, s) = if big { (p.saturating_mul(i32::MAX / 3), s * 6_000_000_000 + 59) } else { (p, s * 60 + 59) };
                chrono::DateTime::from_timestamp(s, n * 400_000_000).map(|t| (p, t))
            };
            let (Some(a), Some(b)) = (at(a), at(b)) else {
                return Ok(());
            };
            proptest::prop_assert_eq!(
                victim_order(a.0, a.1).cmp(&victim_order(b.0, b.1)),
                (a.0, std::cmp::Reverse(a.1)).cmp(&(b.0, std::cmp::Reverse(b.1)))
            );
        }
    }
}
