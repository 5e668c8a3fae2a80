//! A reference scheduler for small fleets: DESIGN.md §2 "Scheduling rules"
//! and docs/semantics.md, written as plainly as possible and with exhaustive
//! search wherever the rules ask for a minimum (victims, topology domains).
//! It is slow on purpose and only meant for fleets of a few nodes and jobs.
//!
//! It was written from the contract, `docs/semantics.md` and issue 16, not
//! from the engine's code, so that it is an independent check. Where issue
//! 16 says how the engine must change (items 1–10), the reference follows
//! the issue; [`Rules`] can switch each such item back to the behaviour
//! `docs/semantics.md` documents today, which is how the property test
//! recognises a known divergence.
//!
//! What it decides, from the same `PlanInput` as the engine: which pending
//! jobs are placed (and where), which running jobs are preempted (and for
//! whom), which are terminated (time limit) or cancelled (removed from Git),
//! and why each other pending job waits. It does not model scaling (the
//! generated pools are fixed), backfill reservations (no job ends at a known
//! future time in the generated cases), drift, or the words of reasons.
//!
//! The rules, in the order a plan applies them:
//!
//! - **Stopping jobs** (preempted in a grace period, past their time limit,
//!   removed from Git) keep their GPUs; nothing is placed on them in this
//!   plan. A pending job that fits once they are gone waits for them, and
//!   where it will sit uses their GPUs before free ones (so that it keeps
//!   as few free GPUs idle as it can).
//! - **Usage** (fair share, guarantees): running jobs that are not stopping,
//!   jobs placed by the plan, jobs waiting for GPUs promised to them. For a
//!   queue's `limit` (a cap) stopping jobs count too, until they are gone,
//!   except where the job they stop for is charged in their place (item 6).
//!   Borrowing, for choosing victims, is judged on running jobs.
//! - **Order**: a first pass over jobs within their leaf's guarantee, then
//!   every other job ("borrowers last"); in each pass the leaf comes from
//!   hierarchical fair share (lowest dominant share ÷ weight at each level,
//!   ties by name, recomputed after every decision) and the job from the
//!   leaf's order (priority, age, name). A job that would borrow holds back
//!   the lower-priority jobs of its leaf too (item 4); the second pass is
//!   fair share too, not priority bands (item 3), and starts with the
//!   leaves that hold GPUs (nominated, promised) or were held back, each up
//!   to its last such job (docs/semantics.md: they keep their turn).
//! - **Each job**, in turn: placed now on free GPUs, trying every model
//!   before waiting; else it waits for GPUs of stopping jobs; else it
//!   preempts the best victim set over all its models (item 2); else it
//!   stays pending. In the first pass it tries only the models where it
//!   stays within its guarantee, and models it would borrow that no other
//!   queue's pending jobs are entitled to (item 8); failing those, it waits
//!   for the second pass.
//! - **Placement**: best fit per replica (the node left with the fewest
//!   usable GPUs, ties by name; inside the node the fullest NVLink domain
//!   that holds the replica); `required` topology: the domain left with the
//!   least capacity; `preferred`: the fewest domains, then the least left
//!   (item 7). GPUs nominated for the job are used first.
//! - **Nominations and promises** (item 5): GPUs nominated for a pending
//!   job, or held by jobs stopping for it, are kept for it only while it can
//!   use them: not once it is placed elsewhere or blocked, not when it does
//!   not fit its quota, nominated ones not against a job of higher priority,
//!   and neither against a job within its guarantee when the holder would
//!   borrow them (the next plan would reclaim them).
//! - **Victims**: see [`Reference::victims`].

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code
#![allow(dead_code)] // each test binary uses a different part

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet};

use gitfleet_engine::PlanInput;
use model::observed::{NodeGpus, Timestamp};
use model::spec::{Fleet, JobSpec, NvLink, TopologyLevel};

/// A GPU: node number and index.
pub type Gpu = (usize, u32);

/// Where a job sits: per replica, a node number and GPU indices.
type Placement = Vec<(usize, Vec<u32>)>;

/// Victims found for a job: the model, the runs (by number), and where the
/// job will then sit.
type Victims = (String, Vec<usize>, Placement);

/// How a node ranks for a replica: most GPUs of the first preference, of
/// the second, fewest left, name.
type NodeKey<'a> = (Reverse<usize>, Reverse<usize>, usize, &'a str);

/// The items of issue 16 whose rule [`Rules`] can switch back to the
/// behaviour documented today.
pub const ITEMS: &[u8] = &[NEW_RECLAIM_BEFORE_OWN_VICTIMS, NEW_LENT_PROMISE_KEEPS_TURN];

/// Not an item of issue 16: a job waits for GPUs of stopping jobs on its
/// first model although it fits free GPUs of another model now.
pub const NEW_WAIT_FIRST_MODEL: u8 = 11;

/// Not an item of issue 16: the victim search counts only free GPUs and the
/// victims' GPUs, not GPUs of stopping jobs the preemptor could wait for,
/// so a preemption that needs both is never found.
pub const NEW_VICTIMS_IGNORE_STOPPING: u8 = 12;

/// Not an item of issue 16 (in the spirit of item 5): where a job that waits
/// for stopping jobs will sit is plain best fit over free and soon-free
/// GPUs, and a preemptor's replicas go to nodes that need no victims first,
/// so either may hold free GPUs idle that another job could use now where
/// the GPUs of stopping jobs or victims would have done. (The contract:
/// soon-free GPUs first.)
pub const NEW_FREE_GPUS_HELD_FOR_WAITING: u8 = 13;

/// Not an item of issue 16 (next to item 1's "the same holds inside a
/// subtree"): reclaim (rule 5b) checks only that the preemptor's leaf stays
/// within its guarantee, not its ancestors below the common ancestor with
/// the victim's queue.
pub const NEW_RECLAIM_LEAF_ONLY: u8 = 15;

/// Not an item of issue 16 (`docs/semantics.md`, "Nominations": "it is
/// placed there first"): a job is placed by best fit, not on the GPUs
/// nominated for it first.
pub const NEW_NOMINATED_NOT_FIRST: u8 = 16;

/// Not an item of issue 16 (rule 4 with 5a): a victim must free GPUs the
/// preemptor will sit on, so a job blocked only by its queue's `limit`
/// does not preempt a lower-priority job of its leaf elsewhere to make room
/// under the limit.
pub const NEW_VICTIMS_MUST_FREE_PLACED_GPUS: u8 = 17;

/// Not an item of issue 16 (next to items 1 and 2): a lower-priority job of
/// the preemptor's own leaf whose usage straddles the leaf's guarantee
/// counts as borrowed usage, preferred as a victim like a job whose removal
/// leaves its queue at its guarantee.
pub const NEW_STRADDLING_SAME_LEAF_IS_BORROWED: u8 = 18;

/// Not an item of issue 16 (the contract: "lowest usage ÷ weight …, ties by
/// queue name"): shares are compared in floating point, so an exact tie
/// (2/11 ÷ 2 against 3/11 ÷ 3) is broken by rounding, not by name.
pub const NEW_FLOAT_SHARES: u8 = 21;

/// Not an item of issue 16 (rule 5b read with 5a): whether the preemptor's
/// queue "stays within its guaranteed" is judged before its own leaf's
/// lower-priority victims are removed, so a job that preempts one of its
/// own leaf to come back within its guarantee cannot also reclaim.
pub const NEW_RECLAIM_BEFORE_OWN_VICTIMS: u8 = 22;

/// Not an item of issue 16 (tension T6 in docs/reference-divergences.md): a
/// preemptor whose victims' GPUs were promised to it at the start of the
/// plan keeps its leaf's early turn in the second pass even after the
/// first pass lent those GPUs to a job within its guarantee.
pub const NEW_LENT_PROMISE_KEEPS_TURN: u8 = 23;

/// Which rules the reference applies: the contract as issue 16 reads it, or
/// for some items the behaviour `docs/semantics.md` documents today.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    today: BTreeSet<u8>,
}

impl Rules {
    /// The contract, every issue-16 item as the issue asks.
    pub fn contract() -> Self {
        Rules::default()
    }

    /// The contract, except that the given items behave as documented today:
    ///
    /// 1. A victim of another queue must leave its queue (and every queue up
    ///    to the common ancestor) at or above its guarantee after the whole
    ///    preemption, counting the candidates ranked before it that free
    ///    GPUs where the job will sit (taken first along the victim order);
    ///    a job straddling its queue's guarantee is immune.
    /// 2. The preemptor's models are searched in listed order; the first
    ///    model with any victim set wins.
    /// 5. Nominated GPUs and GPUs promised by `preemptedFor` are kept for
    ///    their job while it is pending, whatever its quota and priority.
    /// 6. Stopping jobs do not count against `limit`.
    /// 7. `preferred` topology: one domain when one holds the gang, else
    ///    best fit anywhere.
    /// 8. Models are tried in the order the job lists them.
    ///
    /// And behaviours no item names (see their constants):
    /// [`NEW_WAIT_FIRST_MODEL`], [`NEW_VICTIMS_IGNORE_STOPPING`],
    /// [`NEW_FREE_GPUS_HELD_FOR_WAITING`], [`NEW_RECLAIM_LEAF_ONLY`],
    /// [`NEW_NOMINATED_NOT_FIRST`], [`NEW_VICTIMS_MUST_FREE_PLACED_GPUS`],
    /// [`NEW_STRADDLING_SAME_LEAF_IS_BORROWED`],
    /// [`NEW_FLOAT_SHARES`],
    /// [`NEW_RECLAIM_BEFORE_OWN_VICTIMS`].
    pub fn with_today(items: &[u8]) -> Self {
        Rules {
            today: items.iter().copied().collect(),
        }
    }

    fn today(&self, item: u8) -> bool {
        self.today.contains(&item)
    }

    /// The items switched to today's behaviour.
    pub fn items(&self) -> Vec<u8> {
        self.today.iter().copied().collect()
    }
}

/// Why a pending job stays pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wait {
    /// Victims were preempted for it (now or before); it waits for them.
    Preemption,
    /// It fits on GPUs of stopping jobs and waits for them.
    Freeing,
    /// Its quota does not let it run on any model.
    Quota,
    /// No GPUs, no victims.
    Resources,
}

/// What the reference decided.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Placed jobs and their GPUs.
    pub placed: BTreeMap<String, Vec<NodeGpus>>,
    /// Victim → preemptor.
    pub preempted: BTreeMap<String, String>,
    /// Running jobs past their time limit.
    pub terminated: BTreeSet<String>,
    /// Running jobs no longer in Git.
    pub cancelled: BTreeSet<String>,
    /// Pending jobs and why.
    pub pending: BTreeMap<String, Wait>,
    /// Pending jobs in the order they were decided (as the engine lists
    /// them).
    pub order: Vec<String>,
    /// The decisions in order, in words.
    pub log: Vec<String>,
}

// ---------------------------------------------------------------------------
// The world as the rules see it
// ---------------------------------------------------------------------------

struct Node {
    name: String,
    model: String,
    /// Healthy GPUs of the node's model.
    usable: BTreeSet<u32>,
    /// NVLink domains (GPU indices), as the pool's `nvlink` declares them.
    domains: Vec<Vec<u32>>,
    labels: BTreeMap<String, String>,
    /// New placements allowed: in a declared pool, no unhealthy GPU (drain).
    schedulable: bool,
}

#[derive(Clone)]
struct Job {
    name: String,
    leaf: String,
    prio: i32,
    preemptible: bool,
    replicas: u32,
    gpr: u32,
    /// Acceptable models in the order they are tried.
    models: Vec<String>,
    required: Option<TopologyLevel>,
    preferred: Option<TopologyLevel>,
    since: Option<Timestamp>,
    nominated: BTreeSet<Gpu>,
}

impl Job {
    fn gpus(&self) -> u64 {
        u64::from(self.replicas) * u64::from(self.gpr)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RunState {
    Active,
    /// Preempted (before or in this plan), for this pending job if any.
    Preempting(Option<String>),
    Terminating,
    Cancelling,
}

struct Run {
    name: String,
    gpus: BTreeSet<Gpu>,
    count: u64,
    model: String,
    started: Timestamp,
    /// Its job, when still in Git.
    job: Option<Job>,
    state: RunState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    Unseen,
    Placed,
    Waiting(Wait),
    Blocked(Wait),
}

/// A reading of the inputs plus the plan's state while it is made.
pub struct Reference<'a> {
    rules: Rules,
    fleet: &'a Fleet,
    nodes: Vec<Node>,
    /// Queue → parent.
    parent: BTreeMap<String, Option<String>>,
    /// Fair-share capacity per model: healthy GPUs in declared pools.
    capacity: BTreeMap<String, u64>,
    jobs: BTreeMap<String, Job>,
    runs: Vec<Run>,
    status: BTreeMap<String, Status>,
    /// Job → (model, GPUs) charged as usage: active runs, placed, waiting.
    charged: BTreeMap<String, (String, u64)>,
    /// Free GPUs placed or claimed (by a waiting job) in this plan.
    taken: BTreeSet<Gpu>,
    /// GPUs of stopping jobs kept for a pending job.
    promised: BTreeMap<Gpu, String>,
    /// Jobs GPUs were promised to at the start of the plan.
    promised_at_start: BTreeSet<String>,
    /// Set while victims are searched (for [`NEW_FREE_GPUS_HELD_FOR_WAITING`]).
    preempting: std::cell::Cell<bool>,
    /// Jobs that preempted in this plan.
    preempted_now: BTreeSet<String>,
    out: Outcome,
}

/// Runs the reference on `input`.
pub fn reference(input: &PlanInput, rules: &Rules) -> Outcome {
    let mut r = Reference::new(input, rules.clone());
    r.run();
    r.out
}

/// Whether pending `job` would fit its quota and GPUs once `victims` are
/// gone, after the jobs of `placed` (an engine plan's placements) took their
/// GPUs: on GPUs free after the plan (not nominated for another job, as
/// `rules` keep nominations) and the victims' GPUs, within its quota (as
/// `rules` count stopping jobs). Other waiting jobs' claims are not known
/// and not counted.
pub fn would_fit(
    input: &PlanInput,
    rules: &Rules,
    job: &str,
    victims: &BTreeSet<String>,
    placed: &BTreeMap<String, Vec<NodeGpus>>,
) -> bool {
    let mut r = Reference::new(input, rules.clone());
    let Some(j) = r.jobs.get(job).cloned() else {
        return false;
    };
    for (name, placement) in placed {
        let gpus: Vec<Gpu> = placement
            .iter()
            .filter_map(|p| {
                r.nodes
                    .iter()
                    .position(|n| n.name == p.node)
                    .map(|n| (n, p))
            })
            .flat_map(|(n, p)| p.gpus.iter().map(move |g| (n, *g)))
            .collect();
        let Some(first) = gpus.first() else { continue };
        let model = r.nodes[first.0].model.clone();
        r.charged.insert(name.clone(), (model, gpus.len() as u64));
        r.status.insert(name.clone(), Status::Placed);
        r.taken.extend(gpus);
    }
    let mut gpus = r.free_for(&j);
    for run in r.runs.iter().filter(|x| victims.contains(&x.name)) {
        for g in &run.gpus {
            let node = &r.nodes[g.0];
            if node.schedulable && node.usable.contains(&g.1) {
                gpus.insert(*g);
            }
        }
    }
    j.models
        .iter()
        .any(|m| r.fits_quota(&j, m, victims) && r.fit(&j, m, &gpus).is_some())
}

/// The reference's outcome as a plan: its places (in the order decided),
/// preemptions, terminations and cancellations, and its pending jobs with
/// what they wait for (`preemption`, `freeing`, `quota`, `resources`).
pub fn outcome_plan(o: &Outcome) -> model::plan::Plan {
    use model::plan::{Action, Pending, Plan, Summary};
    let mut actions = Vec::new();
    for line in &o.log {
        let Some(job) = line
            .split_once(": place ")
            .and_then(|(_, rest)| rest.split(' ').next())
        else {
            continue;
        };
        if let Some(placement) = o.placed.get(job) {
            actions.push(Action::Place {
                job: job.to_string(),
                placement: placement.clone(),
                reason: String::new(),
            });
        }
    }
    for (victim, for_job) in &o.preempted {
        actions.push(Action::Preempt {
            job: victim.clone(),
            for_job: for_job.clone(),
            reason: String::new(),
        });
    }
    for job in &o.terminated {
        actions.push(Action::Terminate {
            job: job.clone(),
            reason: String::new(),
        });
    }
    for job in &o.cancelled {
        actions.push(Action::Cancel {
            job: job.clone(),
            reason: String::new(),
        });
    }
    let pending = o
        .pending
        .iter()
        .map(|(job, wait)| Pending {
            job: job.as_str().into(),
            reason: std::sync::Arc::from(""),
            queue: None,
            waiting_for: Some(std::borrow::Cow::Borrowed(match wait {
                Wait::Preemption => "preemption",
                Wait::Freeing => "freeing",
                Wait::Quota => "quota",
                Wait::Resources => "resources",
            })),
        })
        .collect();
    Plan {
        revision: None,
        time: String::new(),
        actions,
        pending,
        summary: Summary::default(),
        drift: Vec::new(),
    }
}

/// The fewest `level` domains (rack, zone) a placement of `job` on model
/// `model` using only `gpus` (node name, index) can span, or `None` when it
/// does not fit.
pub fn fewest_domains(
    input: &PlanInput,
    job: &str,
    model: &str,
    level: TopologyLevel,
    gpus: &BTreeSet<(String, u32)>,
) -> Option<usize> {
    let r = Reference::new(input, Rules::contract());
    let mut j = r.jobs.get(job)?.clone();
    j.required = None;
    j.preferred = Some(level);
    j.nominated.clear();
    let gpus: BTreeSet<Gpu> = gpus
        .iter()
        .filter_map(|(n, g)| r.nodes.iter().position(|x| &x.name == n).map(|n| (n, *g)))
        .collect();
    let p = r.fit(&j, model, &gpus)?;
    Some(r.domains_of(&p, level))
}

fn pairs(indices: &[u32]) -> Vec<Vec<u32>> {
    indices.chunks(2).map(<[u32]>::to_vec).collect()
}

impl<'a> Reference<'a> {
    fn new(input: &PlanInput<'a>, rules: Rules) -> Self {
        let fleet = input.fleet;
        let now = input.now;
        let observed = input.observed;

        // Nodes.
        let mut nodes = Vec::new();
        for n in &observed.nodes {
            let pool = n
                .pool
                .as_deref()
                .and_then(|p| fleet.pools.iter().find(|x| x.name() == p));
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for g in &n.gpus {
                *counts.entry(g.model.as_str()).or_default() += 1;
            }
            let model = counts
                .iter()
                .max_by_key(|(m, c)| (**c, Reverse(**m)))
                .map(|(m, _)| m.to_string())
                .unwrap_or_default();
            let mut all: Vec<u32> = n.gpus.iter().map(|g| g.index).collect();
            all.sort_unstable();
            let domains = match pool.map(|p| p.spec.nvlink) {
                Some(NvLink::Full) => vec![all.clone()],
                Some(NvLink::Pairs) => pairs(&all),
                _ => all.iter().map(|i| vec![*i]).collect(),
            };
            let usable = n
                .gpus
                .iter()
                .filter(|g| g.healthy && g.model == model)
                .map(|g| g.index)
                .collect();
            nodes.push(Node {
                name: n.name.clone(),
                model,
                usable,
                domains,
                labels: n.labels.clone(),
                schedulable: pool.is_some() && n.gpus.iter().all(|g| g.healthy),
            });
        }
        let mut capacity: BTreeMap<String, u64> = BTreeMap::new();
        for n in nodes.iter().filter(|n| {
            observed
                .nodes
                .iter()
                .any(|o| o.name == n.name && o.pool.is_some())
        }) {
            *capacity.entry(n.model.clone()).or_default() += n.usable.len() as u64;
        }
        let node_of = |name: &str| nodes.iter().position(|n| n.name == name);

        // Queues.
        let parent: BTreeMap<String, Option<String>> = fleet
            .queues
            .iter()
            .map(|q| (q.name().to_string(), q.spec.parent.clone()))
            .collect();

        // Jobs.
        let pool_models: Vec<String> = fleet
            .pool_models()
            .into_iter()
            .map(str::to_string)
            .collect();
        let queued: BTreeMap<&str, &model::observed::QueuedJob> = observed
            .queued
            .iter()
            .map(|q| (q.job.as_str(), q))
            .collect();
        let mut jobs = BTreeMap::new();
        for j in &fleet.jobs {
            let spec: &JobSpec = &j.spec;
            let class = fleet.priority_class_of(spec);
            let models = match &spec.gpu {
                Some(sel) if !sel.models.is_empty() => sel.models.clone(),
                _ => pool_models.clone(),
            };
            let q = queued.get(j.name());
            let nominated = q
                .map(|q| {
                    q.nominated
                        .iter()
                        .filter_map(|p| node_of(&p.node).map(|n| (n, p)))
                        .flat_map(|(n, p)| p.gpus.iter().map(move |g| (n, *g)))
                        .collect()
                })
                .unwrap_or_default();
            jobs.insert(
                j.name().to_string(),
                Job {
                    name: j.name().to_string(),
                    leaf: spec.queue.clone(),
                    prio: class.map_or(0, |c| c.spec.value),
                    preemptible: class.is_none_or(|c| c.spec.preemptible),
                    replicas: spec.replicas,
                    gpr: spec.gpus_per_replica,
                    models,
                    required: spec.topology.and_then(|t| t.required),
                    preferred: spec.topology.and_then(|t| t.preferred),
                    since: q.map(|q| q.since),
                    nominated,
                },
            );
        }

        // Running jobs.
        let mut runs = Vec::new();
        let mut out = Outcome::default();
        for r in &observed.running {
            let gpus: BTreeSet<Gpu> = r
                .placement
                .iter()
                .filter_map(|p| node_of(&p.node).map(|n| (n, p)))
                .flat_map(|(n, p)| p.gpus.iter().map(move |g| (n, *g)))
                .collect();
            let model = r
                .placement
                .first()
                .and_then(|p| node_of(&p.node))
                .map(|n| nodes[n].model.clone())
                .unwrap_or_default();
            let spec = fleet.jobs.iter().find(|j| j.name() == r.job);
            let job = spec.and_then(|j| jobs.get(j.name()).cloned());
            let expired = spec
                .and_then(|j| j.spec.time_limit)
                .is_some_and(|l| model::time::after(r.started, l) <= now);
            let state = if spec.is_none() {
                out.cancelled.insert(r.job.clone());
                RunState::Cancelling
            } else if r.preempting_since.is_some() {
                RunState::Preempting(r.preempted_for.clone())
            } else if expired {
                out.terminated.insert(r.job.clone());
                RunState::Terminating
            } else {
                RunState::Active
            };
            runs.push(Run {
                name: r.job.clone(),
                count: r.placement.iter().map(|p| p.gpus.len() as u64).sum(),
                gpus,
                model,
                started: r.started,
                job,
                state,
            });
        }

        let running: BTreeSet<&str> = observed.running.iter().map(|r| r.job.as_str()).collect();
        let completed: BTreeSet<&str> = observed.completed.iter().map(|c| c.job.as_str()).collect();
        let mut status = BTreeMap::new();
        for j in &fleet.jobs {
            if !running.contains(j.name()) && !completed.contains(j.name()) {
                status.insert(j.name().to_string(), Status::Unseen);
            }
        }
        let mut charged = BTreeMap::new();
        for r in &runs {
            if r.state == RunState::Active {
                charged.insert(r.name.clone(), (r.model.clone(), r.count));
            }
        }
        let mut promised = BTreeMap::new();
        for r in &runs {
            if let RunState::Preempting(Some(p)) = &r.state
                && status.contains_key(p)
            {
                for g in &r.gpus {
                    promised.insert(*g, p.clone());
                }
            }
        }
        Reference {
            rules,
            fleet,
            nodes,
            parent,
            capacity,
            jobs,
            runs,
            status,
            charged,
            taken: BTreeSet::new(),
            promised_at_start: promised.values().cloned().collect(),
            promised,
            preempting: std::cell::Cell::new(false),
            preempted_now: BTreeSet::new(),
            out,
        }
    }

    // -----------------------------------------------------------------------
    // Queues and usage
    // -----------------------------------------------------------------------

    /// The queue and its ancestors, leaf first.
    fn path(&self, q: &str) -> Vec<String> {
        let mut out = vec![q.to_string()];
        let mut cur = q.to_string();
        while let Some(Some(p)) = self.parent.get(&cur) {
            if out.contains(p) {
                break;
            }
            out.push(p.clone());
            cur = p.clone();
        }
        out
    }

    /// The queues of `q`'s path strictly below the common ancestor with `other`.
    fn below_common(&self, q: &str, other: &str) -> Vec<String> {
        let theirs = self.path(other);
        self.path(q)
            .into_iter()
            .take_while(|x| !theirs.contains(x))
            .collect()
    }

    fn spec(&self, q: &str) -> Option<&model::spec::QueueSpec> {
        self.fleet
            .queues
            .iter()
            .find(|x| x.name() == q)
            .map(|x| &x.spec)
    }

    fn guaranteed(&self, q: &str, m: &str) -> u64 {
        self.spec(q).map_or(0, |s| u64::from(s.guaranteed(m)))
    }

    fn limit(&self, q: &str, m: &str) -> Option<u64> {
        self.spec(q).and_then(|s| s.limit(m)).map(u64::from)
    }

    fn leaf_of(&self, job: &str) -> Option<&str> {
        self.jobs.get(job).map(|j| j.leaf.as_str())
    }

    /// Charged usage of `q` on `m` (active runs, placed, waiting).
    fn usage(&self, q: &str, m: &str) -> u64 {
        self.charged
            .iter()
            .filter(|(job, (model, _))| {
                model == m
                    && self
                        .leaf_of(job)
                        .is_some_and(|l| self.path(l).iter().any(|x| x == q))
            })
            .map(|(_, (_, n))| n)
            .sum()
    }

    /// Usage of `q` on `m` by running jobs that are not stopping.
    fn running_usage(&self, q: &str, m: &str) -> u64 {
        self.runs
            .iter()
            .filter(|r| r.state == RunState::Active && r.model == m)
            .filter(|r| {
                r.job
                    .as_ref()
                    .is_some_and(|j| self.path(&j.leaf).iter().any(|x| x == q))
            })
            .map(|r| r.count)
            .sum()
    }

    /// Whether a stopping run still counts against its queue's limit: it
    /// does until it is gone (item 6), unless the job it stops for is
    /// charged in its place (or is the job asking, `asking`).
    fn stopping_counts(&self, r: &Run, asking: &str) -> bool {
        if self.rules.today(6) || r.job.is_none() {
            return false;
        }
        match &r.state {
            RunState::Active | RunState::Cancelling => false,
            RunState::Terminating => true,
            RunState::Preempting(p) => match p {
                Some(p) => p != asking && !matches!(self.status.get(p), Some(Status::Waiting(_))),
                None => true,
            },
        }
    }

    /// Usage of `q` on `m` as `limit` sees it for `asking`, without `victims`.
    fn limit_usage(&self, q: &str, m: &str, asking: &str, victims: &BTreeSet<String>) -> u64 {
        let charged: u64 = self
            .charged
            .iter()
            .filter(|(job, (model, _))| {
                model == m
                    && !victims.contains(*job)
                    && self
                        .leaf_of(job)
                        .is_some_and(|l| self.path(l).iter().any(|x| x == q))
            })
            .map(|(_, (_, n))| n)
            .sum();
        let stopping: u64 = self
            .runs
            .iter()
            .filter(|r| r.model == m && self.stopping_counts(r, asking))
            .filter(|r| {
                r.job
                    .as_ref()
                    .is_some_and(|j| self.path(&j.leaf).iter().any(|x| x == q))
            })
            .map(|r| r.count)
            .sum();
        charged + stopping
    }

    /// Rule 4: for every queue on the job's path, usage + request ≤ limit.
    fn fits_quota(&self, job: &Job, m: &str, victims: &BTreeSet<String>) -> bool {
        self.path(&job.leaf).iter().all(|q| match self.limit(q, m) {
            None => true,
            Some(limit) => self.limit_usage(q, m, &job.name, victims) + job.gpus() <= limit,
        })
    }

    /// Whether the job stays within its leaf's guarantee on `m`.
    fn within_guarantee_on(&self, job: &Job, m: &str) -> bool {
        self.usage(&job.leaf, m) + job.gpus() <= self.guaranteed(&job.leaf, m)
    }

    fn within_guarantee(&self, job: &Job) -> bool {
        job.models.iter().any(|m| self.within_guarantee_on(job, m))
    }

    /// The dominant share of `q`: max over models of usage ÷ capacity, as a
    /// fraction, divided by the weight.
    fn share(&self, q: &str) -> (u128, u128) {
        let weight = u128::from(self.spec(q).map_or(1, |s| s.weight.max(1)));
        let mut best: (u128, u128) = (0, 1);
        for (m, cap) in &self.capacity {
            if *cap == 0 {
                continue;
            }
            let f = (u128::from(self.usage(q, m)), u128::from(*cap));
            if f.0 * best.1 > best.0 * f.1 {
                best = f;
            }
        }
        (best.0, best.1 * weight)
    }

    /// [`Reference::share`] in floating point, as max(usage ÷ capacity) ÷
    /// weight (for [`NEW_FLOAT_SHARES`]).
    fn float_share(&self, q: &str) -> f64 {
        let weight = f64::from(self.spec(q).map_or(1, |s| s.weight.max(1)));
        let mut best = 0.0f64;
        for (m, cap) in &self.capacity {
            if *cap > 0 {
                best = best.max(self.usage(q, m) as f64 / *cap as f64);
            }
        }
        best / weight
    }

    /// Hierarchical fair share: from the top, the child with the lowest
    /// share ÷ weight (ties by name) among those holding a candidate leaf.
    fn pick_leaf(&self, leaves: &BTreeSet<String>) -> Option<String> {
        let holds = |q: &str| leaves.iter().any(|l| self.path(l).iter().any(|x| x == q));
        let mut level: Option<String> = None;
        loop {
            let children: Vec<&String> = self
                .parent
                .iter()
                .filter(|(_, p)| **p == level)
                .map(|(q, _)| q)
                .filter(|q| holds(q))
                .collect();
            let best = children.into_iter().min_by(|a, b| {
                let (x, y) = (self.share(a), self.share(b));
                let exact = (x.0 * y.1).cmp(&(y.0 * x.1));
                let order = if self.rules.today(NEW_FLOAT_SHARES) {
                    self.float_share(a).total_cmp(&self.float_share(b))
                } else {
                    exact
                };
                order.then_with(|| a.cmp(b))
            })?;
            if leaves.contains(best) {
                return Some(best.clone());
            }
            level = Some(best.clone());
        }
    }

    /// Order inside a leaf: priority, then older, then never seen by name.
    fn leaf_order(&self, a: &str, b: &str) -> Ordering {
        let (x, y) = (&self.jobs[a], &self.jobs[b]);
        y.prio
            .cmp(&x.prio)
            .then_with(|| match (x.since, y.since) {
                (Some(s), Some(t)) => s.cmp(&t),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            })
            .then_with(|| a.cmp(b))
    }

    fn head<'s>(&self, jobs: impl Iterator<Item = &'s String>) -> Option<String> {
        jobs.min_by(|a, b| self.leaf_order(a, b)).cloned()
    }

    // -----------------------------------------------------------------------
    // GPUs a job may use
    // -----------------------------------------------------------------------

    /// Whether pending job `p` keeps GPUs nominated or promised to it away
    /// from `asking` (`free`: nominated free GPUs, else GPUs of stopping
    /// jobs promised to it by `preemptedFor` or claimed by it).
    ///
    /// Contract (item 5): only a job that can still use them keeps them: not
    /// one that is placed or blocked, nor one that does not fit its quota;
    /// nominated GPUs not against a job of higher priority; a waiting job
    /// keeps what it claimed. And (the reference's reading, where issue 16
    /// is silent) a job that would borrow them keeps nothing from a job
    /// within its guarantee, which would reclaim them in the next plan. Today (as `docs/semantics.md` says: "while the
    /// preemptor is pending, only it may take those GPUs"): promised GPUs are
    /// kept for a job that was pending when observed, even once this plan
    /// places it elsewhere; nominated ones until their job is placed, waits
    /// for stopping jobs' GPUs or is found not to fit (a job that preempted
    /// in this plan keeps them).
    fn keeps(&self, p: &str, model: &str, asking: &Job, free: bool) -> bool {
        if p == asking.name {
            return false;
        }
        let today = self.rules.today(5);
        match self.status.get(p) {
            None => false,
            Some(Status::Placed) => today && !free,
            // Today a preemptor of this plan keeps its nominated GPUs too.
            Some(Status::Waiting(_)) => !free || (today && self.preempted_now.contains(p)),
            Some(Status::Blocked(Wait::Resources)) => today && !free,
            Some(Status::Blocked(_)) => today,
            Some(Status::Unseen) => {
                if today {
                    return true;
                }
                let job = &self.jobs[p];
                // A borrower's hold does not beat a guarantee: the next plan
                // would reclaim it (rule 5b).
                let outranked = self.within_guarantee_on(asking, model)
                    && !self.within_guarantee_on(job, model);
                self.fits_quota(job, model, &BTreeSet::new())
                    && !(free && asking.prio > job.prio)
                    && !outranked
            }
        }
    }

    /// Free GPUs `job` may take now.
    fn free_for(&self, job: &Job) -> BTreeSet<Gpu> {
        let busy: BTreeSet<Gpu> = self
            .runs
            .iter()
            .flat_map(|r| r.gpus.iter().copied())
            .collect();
        let mut nominated: BTreeMap<Gpu, &str> = BTreeMap::new();
        for j in self.jobs.values() {
            for g in &j.nominated {
                nominated.insert(*g, &j.name);
            }
        }
        let mut out = BTreeSet::new();
        for (n, node) in self.nodes.iter().enumerate() {
            if !node.schedulable {
                continue;
            }
            for g in &node.usable {
                let gpu = (n, *g);
                if busy.contains(&gpu) || self.taken.contains(&gpu) {
                    continue;
                }
                if let Some(p) = nominated.get(&gpu)
                    && self.keeps(p, &node.model, job, true)
                {
                    continue;
                }
                out.insert(gpu);
            }
        }
        out
    }

    /// GPUs of stopping jobs `job` may wait for.
    fn stopping_for(&self, job: &Job) -> BTreeSet<Gpu> {
        let mut out = BTreeSet::new();
        for r in &self.runs {
            if r.state == RunState::Active {
                continue;
            }
            for gpu in &r.gpus {
                let node = &self.nodes[gpu.0];
                if !node.schedulable || !node.usable.contains(&gpu.1) {
                    continue;
                }
                if let Some(p) = self.promised.get(gpu)
                    && self.keeps(p, &node.model, job, false)
                {
                    continue;
                }
                out.insert(*gpu);
            }
        }
        out
    }

    // -----------------------------------------------------------------------
    // Placement
    // -----------------------------------------------------------------------

    /// Places one replica of `gpr` GPUs on `node` from `free`, or `None`.
    /// Inside one NVLink domain when some domain is big enough (the fullest
    /// such domain, ties by domain order); else across as few domains as
    /// possible. GPUs of lower `rank` first, then lowest indices.
    fn on_node(
        &self,
        n: usize,
        gpr: u32,
        free: &BTreeSet<u32>,
        rank: &dyn Fn(u32) -> u8,
    ) -> Option<Vec<u32>> {
        let node = &self.nodes[n];
        let gpr = gpr as usize;
        let pick = |mut pool: Vec<u32>| -> Vec<u32> {
            pool.sort_by_key(|g| (rank(*g), *g));
            let mut got: Vec<u32> = pool.into_iter().take(gpr).collect();
            got.sort_unstable();
            got
        };
        if node.domains.iter().any(|d| d.len() >= gpr) {
            // The domain whose pick holds the most preferred GPUs, then the
            // fullest, then the first.
            let ranks = |got: &[u32], r: u8| got.iter().filter(|g| rank(**g) == r).count();
            node.domains
                .iter()
                .map(|d| {
                    d.iter()
                        .filter(|g| free.contains(g))
                        .copied()
                        .collect::<Vec<u32>>()
                })
                .filter(|f| f.len() >= gpr)
                .map(|f| {
                    let n = f.len();
                    let got = pick(f);
                    ((Reverse(ranks(&got, 0)), Reverse(ranks(&got, 1)), n), got)
                })
                .min_by_key(|(key, _)| *key)
                .map(|(_, got)| got)
        } else {
            if free.len() < gpr {
                return None;
            }
            let mut doms: Vec<Vec<u32>> = node
                .domains
                .iter()
                .map(|d| d.iter().filter(|g| free.contains(g)).copied().collect())
                .filter(|f: &Vec<u32>| !f.is_empty())
                .collect();
            // As few domains as possible, then the domains holding the most
            // preferred GPUs, then the first.
            doms.sort_by_key(|d| {
                let ranks = |r: u8| d.iter().filter(|g| rank(**g) == r).count();
                (Reverse(d.len()), Reverse(ranks(0)), Reverse(ranks(1)))
            });
            let mut got = Vec::new();
            for d in doms {
                let mut d = d;
                d.sort_by_key(|g| (rank(*g), *g));
                for g in d {
                    if got.len() < gpr {
                        got.push(g);
                    }
                }
            }
            got.sort_unstable();
            Some(got)
        }
    }

    /// Best fit of the whole gang on `nodes` using `gpus`: replica after
    /// replica, the node left with the fewest usable GPUs (ties by name).
    ///
    /// Where the job will sit once stopping jobs are gone (it waits, or
    /// preempts), GPUs held by stopping jobs or victims come first, so that
    /// it keeps as few free GPUs idle as it can; then GPUs nominated for it
    /// ("it is placed there first"); the node using most of them wins.
    fn greedy(&self, job: &Job, nodes: &[usize], gpus: &BTreeSet<Gpu>) -> Option<Placement> {
        let busy: BTreeSet<Gpu> = self
            .runs
            .iter()
            .flat_map(|r| r.gpus.iter().copied())
            .collect();
        let mut left: BTreeMap<usize, BTreeSet<u32>> = nodes
            .iter()
            .map(|n| (*n, gpus.iter().filter(|g| g.0 == *n).map(|g| g.1).collect()))
            .collect();
        let mut out = Vec::new();
        for _ in 0..job.replicas {
            let mut best: Option<(NodeKey, usize, Vec<u32>)> = None;
            for n in nodes {
                let free = &left[n];
                let rank = |g: u32| {
                    let busy = busy.contains(&(*n, g));
                    // Today: plain best fit for a job waiting for stopping
                    // jobs, free GPUs first for a preemptor.
                    let held = match (
                        self.rules.today(NEW_FREE_GPUS_HELD_FOR_WAITING),
                        self.preempting.get(),
                    ) {
                        (false, _) => busy,
                        (true, false) => false,
                        (true, true) => !busy,
                    };
                    if held {
                        0
                    } else if job.nominated.contains(&(*n, g))
                        && !self.rules.today(NEW_NOMINATED_NOT_FIRST)
                    {
                        1
                    } else {
                        2
                    }
                };
                let Some(got) = self.on_node(*n, job.gpr, free, &rank) else {
                    continue;
                };
                let key = (
                    Reverse(got.iter().filter(|g| rank(**g) == 0).count()),
                    Reverse(got.iter().filter(|g| rank(**g) == 1).count()),
                    free.len() - got.len(),
                    self.nodes[*n].name.as_str(),
                );
                if best.as_ref().is_none_or(|(k, _, _)| key < *k) {
                    best = Some((key, *n, got));
                }
            }
            let (_, n, got) = best?;
            for g in &got {
                left.get_mut(&n).unwrap().remove(g);
            }
            out.push((n, got));
        }
        Some(out)
    }

    /// Where the job would sit on model `m` using `gpus`, with its topology.
    fn fit(&self, job: &Job, m: &str, gpus: &BTreeSet<Gpu>) -> Option<Placement> {
        let nodes: Vec<usize> = (0..self.nodes.len())
            .filter(|n| self.nodes[*n].schedulable && self.nodes[*n].model == m)
            .collect();
        let label = |l: TopologyLevel| match l {
            TopologyLevel::Rack => Some("rack"),
            TopologyLevel::Zone => Some("zone"),
            TopologyLevel::Node | TopologyLevel::None => None,
        };
        let domains = |l: TopologyLevel| -> BTreeMap<String, Vec<usize>> {
            let mut d: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for n in &nodes {
                let key = match (l, label(l)) {
                    (TopologyLevel::Node, _) => Some(self.nodes[*n].name.clone()),
                    (_, Some(k)) => self.nodes[*n].labels.get(k).cloned(),
                    _ => None,
                };
                if let Some(key) = key {
                    d.entry(key).or_default().push(*n);
                }
            }
            d
        };
        let capacity = |ns: &[usize]| gpus.iter().filter(|g| ns.contains(&g.0)).count();
        // The placement inside the best group of domains of size `k`.
        // Today, a preemptor's domain is one needing the fewest victims' GPUs.
        let busy: BTreeSet<Gpu> = self
            .runs
            .iter()
            .flat_map(|r| r.gpus.iter().copied())
            .collect();
        let held = |p: &[(usize, Vec<u32>)]| {
            if self.rules.today(NEW_FREE_GPUS_HELD_FOR_WAITING) && self.preempting.get() {
                p.iter()
                    .flat_map(|(n, g)| g.iter().map(move |g| (*n, *g)))
                    .filter(|g| busy.contains(g))
                    .count()
            } else {
                0
            }
        };
        let within = |groups: Vec<Vec<usize>>| -> Option<Placement> {
            groups
                .into_iter()
                .filter_map(|ns| {
                    let p = self.greedy(job, &ns, gpus)?;
                    Some(((held(&p), capacity(&ns) - job.gpus() as usize), p))
                })
                .min_by_key(|(key, _)| *key)
                .map(|(_, p)| p)
        };
        match (job.required, job.preferred) {
            (Some(l), _) if l != TopologyLevel::None => within(domains(l).into_values().collect()),
            (_, Some(l)) if l != TopologyLevel::None => {
                let d: Vec<Vec<usize>> = domains(l).into_values().collect();
                for k in 1..=d.len() {
                    let groups: Vec<Vec<usize>> = combinations(d.len(), k)
                        .into_iter()
                        .map(|c| c.iter().flat_map(|i| d[*i].clone()).collect())
                        .collect();
                    if let Some(p) = within(groups) {
                        return Some(p);
                    }
                }
                self.greedy(job, &nodes, gpus)
            }
            _ => self.greedy(job, &nodes, gpus),
        }
    }

    /// How many `level` domains a placement spans.
    fn domains_of(&self, p: &[(usize, Vec<u32>)], level: TopologyLevel) -> usize {
        let key = match level {
            TopologyLevel::Rack => "rack",
            TopologyLevel::Zone => "zone",
            TopologyLevel::Node | TopologyLevel::None => "",
        };
        p.iter()
            .map(|(n, _)| {
                self.nodes[*n]
                    .labels
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| self.nodes[*n].name.clone())
            })
            .collect::<BTreeSet<String>>()
            .len()
    }

    /// Whether GPUs are kept for the job: nominated on schedulable nodes,
    /// or promised by stopping jobs.
    fn holds(&self, job: &Job) -> bool {
        job.nominated
            .iter()
            .any(|(n, g)| self.nodes[*n].schedulable && self.nodes[*n].usable.contains(g))
            || self.promised.values().any(|p| *p == job.name)
            || (self.rules.today(NEW_LENT_PROMISE_KEEPS_TURN)
                && self.promised_at_start.contains(&job.name))
    }

    /// Whether `job` could ever run on model `m` as the pools are declared
    /// (a replica fits a node of it, the job fits its pools at `size.max`;
    /// health aside): a job that never could claims none of that model's
    /// guarantees.
    fn fits_a_node_of(&self, job: &Job, m: &str) -> bool {
        let pools = || self.fleet.pools.iter().filter(|p| p.spec.gpu.model == m);
        let total: u64 = pools()
            .map(|p| u64::from(p.spec.gpu.count) * u64::from(p.spec.size.max))
            .sum();
        pools().any(|p| job.gpr <= p.spec.gpu.count) && job.gpus() <= total
    }

    /// The job's models in the order they are tried, as listed. In the
    /// guaranteed pass (item 8): first those on which it stays within its
    /// leaf's guarantee, then those it would borrow, but only while the
    /// GPUs of that model left free still cover what other leaves' pending
    /// jobs may claim within their unused guarantees (borrowing more would
    /// be reclaimed in the next plan; for such a model the job waits for
    /// the second pass). A job with GPUs nominated or promised to it tries
    /// such models last instead (it decides now). The flag: whether a model
    /// was left out (a job that then finds nothing goes to the second pass).
    fn model_order(&self, job: &Job, pass: u8) -> (Vec<String>, bool) {
        if self.rules.today(8) || pass != 1 {
            return (job.models.clone(), false);
        }
        let mine = self.path(&job.leaf);
        let free = self.free_for(job);
        let lent = |m: &str| {
            let claims: u64 = self
                .fleet
                .queues
                .iter()
                .filter(|q| !mine.iter().any(|x| x == q.name()))
                .map(|q| {
                    let idle =
                        u64::from(q.spec.guaranteed(m)).saturating_sub(self.usage(q.name(), m));
                    let demand: u64 = self
                        .status
                        .iter()
                        .filter(|(p, st)| {
                            **st == Status::Unseen
                                && **p != job.name
                                && self.jobs[*p].leaf == q.name()
                                && self.jobs[*p].models.iter().any(|x| x == m)
                                && self.fits_a_node_of(&self.jobs[*p], m)
                        })
                        .map(|(p, _)| self.jobs[p].gpus())
                        .sum();
                    idle.min(demand)
                })
                .sum();
            let left = free.iter().filter(|g| self.nodes[g.0].model == m).count() as u64;
            left < job.gpus() + claims
        };
        let (mut first, rest): (Vec<String>, Vec<String>) = job
            .models
            .iter()
            .cloned()
            .partition(|m| self.within_guarantee_on(job, m));
        let (lent, kept): (Vec<String>, Vec<String>) = rest.into_iter().partition(|m| lent(m));
        first.extend(kept);
        if self.holds(job) {
            first.extend(lent);
            return (first, false);
        }
        (first, !lent.is_empty())
    }

    // -----------------------------------------------------------------------
    // Victims
    // -----------------------------------------------------------------------

    /// The victims for `job`, on one model, and where it would then sit.
    ///
    /// Candidates are preemptible running jobs (not stopping) on a model the
    /// job accepts that are (a) in its leaf with a lower priority, or in
    /// another queue that is borrowing — the victim's queue and each queue
    /// below the common ancestor uses more than its guarantee before the
    /// victim is removed (Kueue's rule, item 1) — and either (b) the job's
    /// queues below the common ancestor stay within their guarantees
    /// (reclaim) or (c) the victim has a lower priority and started before
    /// the job was first seen (with item 3: one placed by fair share while
    /// the job waited is not its victim by priority alone).
    ///
    /// Preference: borrowed usage whose removal leaves its queue at or
    /// above its guarantee, then borrowed usage that straddles it, then
    /// guaranteed usage (same leaf); then lower priority, then the most
    /// recently started, then name. With candidates ranked so, the chosen
    /// set is the feasible one with the smallest Σ 2^rank: its least
    /// preferred victim is as preferred as can be, and so on down — "lower
    /// priority first" and "no more than needed" (no victim can be left
    /// out). Found by trying every subset in that order. Across models
    /// (item 2) the ranks are shared, so borrowing before guaranteed decides.
    fn victims(&self, job: &Job, models: &[String]) -> Option<Victims> {
        struct Cand {
            run: usize,
            model: String,
            same_leaf: bool,
            key: (u8, i32, Reverse<Timestamp>, String),
        }
        let mut cands: Vec<Cand> = Vec::new();
        for (i, r) in self.runs.iter().enumerate() {
            let Some(rj) = &r.job else { continue };
            if r.state != RunState::Active || !rj.preemptible || !models.contains(&r.model) {
                continue;
            }
            let m = &r.model;
            let same_leaf = rj.leaf == job.leaf;
            let chain = if same_leaf {
                vec![rj.leaf.clone()]
            } else {
                self.below_common(&rj.leaf, &job.leaf)
            };
            let borrowing = chain
                .iter()
                .all(|q| self.running_usage(q, m) > self.guaranteed(q, m));
            let safe = chain
                .iter()
                .all(|q| self.running_usage(q, m) >= self.guaranteed(q, m) + r.count);
            if same_leaf {
                if rj.prio >= job.prio {
                    continue;
                }
            } else if !borrowing || (self.rules.today(1) && !safe) {
                continue;
            }
            let safe =
                safe || (same_leaf && self.rules.today(NEW_STRADDLING_SAME_LEAF_IS_BORROWED));
            let tier = match (borrowing, safe) {
                (true, true) => 0,
                (true, false) => 1,
                _ => 2,
            };
            cands.push(Cand {
                run: i,
                model: m.clone(),
                same_leaf,
                key: (tier, rj.prio, Reverse(r.started), r.name.clone()),
            });
        }
        cands.sort_by(|a, b| a.key.cmp(&b.key));
        let models: Vec<Vec<String>> = if self.rules.today(2) {
            models.iter().map(|m| vec![m.clone()]).collect()
        } else {
            vec![models.to_vec()]
        };
        let base = self.free_for(job);
        let stopping = if self.rules.today(NEW_VICTIMS_IGNORE_STOPPING) {
            BTreeSet::new()
        } else {
            self.stopping_for(job)
        };
        for group in models {
            let set: Vec<&Cand> = cands.iter().filter(|c| group.contains(&c.model)).collect();
            let n = set.len().min(16);
            for mask in 1u32..(1u32 << n) {
                let chosen: Vec<&Cand> = (0..n)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| set[i])
                    .collect();
                let m = &chosen[0].model;
                if chosen.iter().any(|c| &c.model != m) {
                    continue;
                }
                if !self.valid_victims(
                    job,
                    m,
                    &chosen
                        .iter()
                        .map(|c| (c.run, c.same_leaf))
                        .collect::<Vec<_>>(),
                ) {
                    continue;
                }
                let names: BTreeSet<String> = chosen
                    .iter()
                    .map(|c| self.runs[c.run].name.clone())
                    .collect();
                if !self.fits_quota(job, m, &names) {
                    continue;
                }
                let mut gpus: BTreeSet<Gpu> = base.union(&stopping).copied().collect();
                for c in &chosen {
                    for g in &self.runs[c.run].gpus {
                        let node = &self.nodes[g.0];
                        if node.schedulable && node.usable.contains(&g.1) {
                            gpus.insert(*g);
                        }
                    }
                }
                self.preempting.set(true);
                let fit = self.fit(job, m, &gpus);
                self.preempting.set(false);
                let Some(p) = fit else { continue };
                let used: BTreeSet<Gpu> = p
                    .iter()
                    .flat_map(|(n, g)| g.iter().map(move |g| (*n, *g)))
                    .collect();
                if self.rules.today(NEW_VICTIMS_MUST_FREE_PLACED_GPUS)
                    && !chosen
                        .iter()
                        .all(|c| self.runs[c.run].gpus.iter().any(|g| used.contains(g)))
                {
                    continue;
                }
                if self.rules.today(1) {
                    // Today the lender check runs along the victim order:
                    // candidates ranked before the last victim that free
                    // GPUs on the nodes the job uses were taken first, and
                    // their usage counts when later ones are checked.
                    let last = (0..n).rev().find(|i| mask & (1 << i) != 0).unwrap_or(0);
                    let nodes: BTreeSet<usize> = p.iter().map(|(n, _)| *n).collect();
                    let taken: Vec<(usize, bool)> = (0..=last)
                        .filter(|i| {
                            mask & (1 << i) != 0
                                || (!set[*i].same_leaf
                                    && self.runs[set[*i].run]
                                        .gpus
                                        .iter()
                                        .any(|g| nodes.contains(&g.0)))
                        })
                        .map(|i| (set[i].run, set[i].same_leaf))
                        .collect();
                    if !self.valid_victims(job, m, &taken) {
                        continue;
                    }
                }
                return Some((m.clone(), chosen.iter().map(|c| c.run).collect(), p));
            }
        }
        None
    }

    /// Set-level rules on victims (in preference order) of model `m`.
    fn valid_victims(&self, job: &Job, m: &str, chosen: &[(usize, bool)]) -> bool {
        let mut removed: BTreeMap<String, u64> = BTreeMap::new();
        for (run, same_leaf) in chosen {
            let r = &self.runs[*run];
            let rj = r.job.as_ref().unwrap();
            if !same_leaf {
                let chain = self.below_common(&rj.leaf, &job.leaf);
                // Kueue: the victim's queues are still borrowing before it goes.
                if !self.rules.today(1)
                    && !chain.iter().all(|q| {
                        self.running_usage(q, m) - removed.get(q).copied().unwrap_or(0)
                            > self.guaranteed(q, m)
                    })
                {
                    return false;
                }
            }
            for q in self.path(&rj.leaf) {
                *removed.entry(q).or_default() += r.count;
            }
        }
        for (run, same_leaf) in chosen {
            if *same_leaf {
                continue;
            }
            let rj = self.runs[*run].job.as_ref().unwrap();
            if self.rules.today(1) {
                // Today: every lender stays at or above its guarantee after all.
                let chain = self.below_common(&rj.leaf, &job.leaf);
                if !chain.iter().all(|q| {
                    self.running_usage(q, m) - removed.get(q).copied().unwrap_or(0)
                        >= self.guaranteed(q, m)
                }) {
                    return false;
                }
            }
            // (c) lower priority — and started before the job was first
            // seen (semantics.md: a borrower placed by fair share while the
            // job waited is not its victim by priority alone) — or (b)
            // reclaim: the job's queues below the common ancestor stay
            // within their guarantees.
            if rj.prio < job.prio
                && job
                    .since
                    .is_none_or(|since| self.runs[*run].started < since)
            {
                continue;
            }
            let mut mine = self.below_common(&job.leaf, &rj.leaf);
            if self.rules.today(NEW_RECLAIM_LEAF_ONLY) {
                mine.truncate(1);
            }
            let reclaim = mine.iter().all(|q| {
                let freed = if self.rules.today(NEW_RECLAIM_BEFORE_OWN_VICTIMS) {
                    0
                } else {
                    removed.get(q).copied().unwrap_or(0)
                };
                self.usage(q, m) + job.gpus() <= self.guaranteed(q, m) + freed
            });
            if !reclaim {
                return false;
            }
        }
        true
    }

    // -----------------------------------------------------------------------
    // One job
    // -----------------------------------------------------------------------

    fn describe(&self, p: &[(usize, Vec<u32>)]) -> Vec<NodeGpus> {
        p.iter()
            .map(|(n, g)| NodeGpus {
                node: self.nodes[*n].name.clone(),
                gpus: g.clone(),
            })
            .collect()
    }

    /// Takes the GPUs of a placement: free ones become taken, GPUs of
    /// stopping jobs promised to the job.
    fn claim(&mut self, job: &str, p: &[(usize, Vec<u32>)]) {
        if !self.rules.today(5) {
            // What was promised to it and it does not use is free (item 5).
            self.promised.retain(|_, j| j != job);
        }
        let busy: BTreeSet<Gpu> = self
            .runs
            .iter()
            .flat_map(|r| r.gpus.iter().copied())
            .collect();
        for (n, gpus) in p {
            for g in gpus {
                if busy.contains(&(*n, *g)) {
                    self.promised.insert((*n, *g), job.to_string());
                } else {
                    self.taken.insert((*n, *g));
                }
            }
        }
    }

    /// Decides for one job; `false` when, in the guaranteed pass, nothing
    /// within its guarantee works and it waits for the second pass.
    fn consider(&mut self, name: &str, pass: u8) -> bool {
        let job = self.jobs[name].clone();
        let (models, left_out) = self.model_order(&job, pass);
        let free = self.free_for(&job);
        // 1. Placed now; 2. waits for stopping jobs. Every model is tried
        // for 1 before any for 2 (today, rule 11: model by model).
        let stopping = self.stopping_for(&job);
        let both: BTreeSet<Gpu> = free.union(&stopping).copied().collect();
        let steps: Vec<(bool, Vec<String>)> = if self.rules.today(NEW_WAIT_FIRST_MODEL) {
            models
                .iter()
                .flat_map(|m| [(false, vec![m.clone()]), (true, vec![m.clone()])])
                .collect()
        } else {
            vec![(false, models.clone()), (true, models.clone())]
        };
        for (wait, models) in steps {
            for m in &models {
                if !self.fits_quota(&job, m, &BTreeSet::new()) {
                    continue;
                }
                let Some(p) = self.fit(&job, m, if wait { &both } else { &free }) else {
                    continue;
                };
                let mine = p
                    .iter()
                    .flat_map(|(n, g)| g.iter().map(move |g| (*n, *g)))
                    .any(|g| self.promised.get(&g).is_some_and(|x| x == name));
                self.claim(name, &p);
                self.charged
                    .insert(name.to_string(), (m.clone(), job.gpus()));
                let placement = self.describe(&p);
                if !wait {
                    self.status.insert(name.to_string(), Status::Placed);
                    self.out
                        .log
                        .push(format!("pass {pass}: place {name} on {m} {placement:?}"));
                    self.out.placed.insert(name.to_string(), placement);
                    return true;
                }
                let why = if mine {
                    Wait::Preemption
                } else {
                    Wait::Freeing
                };
                self.status.insert(name.to_string(), Status::Waiting(why));
                self.out.log.push(format!(
                    "pass {pass}: {name} waits ({why:?}) for {placement:?}"
                ));
                self.out.pending.insert(name.to_string(), why);
                return true;
            }
        }
        // 3. Preempts.
        if let Some((m, runs, p)) = self.victims(&job, &models) {
            let victims: Vec<String> = runs.iter().map(|i| self.runs[*i].name.clone()).collect();
            self.claim(name, &p);
            for i in &runs {
                let r = &mut self.runs[*i];
                r.state = RunState::Preempting(Some(name.to_string()));
                self.charged.remove(&r.name);
                let gpus: Vec<Gpu> = r.gpus.iter().copied().collect();
                for g in gpus {
                    self.promised.insert(g, name.to_string());
                }
                self.out.preempted.insert(r.name.clone(), name.to_string());
            }
            self.charged
                .insert(name.to_string(), (m.clone(), job.gpus()));
            self.preempted_now.insert(name.to_string());
            self.status
                .insert(name.to_string(), Status::Waiting(Wait::Preemption));
            self.out.log.push(format!(
                "pass {pass}: {name} preempts {victims:?} on {m}, to sit on {:?}",
                self.describe(&p)
            ));
            self.out.pending.insert(name.to_string(), Wait::Preemption);
            return true;
        }
        // 4. Pending (in the guaranteed pass, when a model was left out:
        // tried again in the second with all of them).
        if pass == 1 && left_out {
            self.out.log.push(format!(
                "pass 1: {name} does not fit within its guarantee: pass 2"
            ));
            return false;
        }
        let quota = !job
            .models
            .iter()
            .any(|m| self.fits_quota(&job, m, &BTreeSet::new()));
        let wait = if quota { Wait::Quota } else { Wait::Resources };
        self.status.insert(name.to_string(), Status::Blocked(wait));
        self.out
            .log
            .push(format!("pass {pass}: {name} pending ({wait:?})"));
        self.out.pending.insert(name.to_string(), wait);
        true
    }

    // -----------------------------------------------------------------------
    // Order
    // -----------------------------------------------------------------------

    fn run(&mut self) {
        let mut remaining: BTreeSet<String> = self
            .status
            .iter()
            .filter(|(j, s)| **s == Status::Unseen && self.parent.contains_key(&self.jobs[*j].leaf))
            .map(|(j, _)| j.clone())
            .collect();
        // Pass 1: jobs within their leaf's guarantee.
        let mut deferred_jobs: BTreeSet<String> = BTreeSet::new();
        // Per leaf, its deferred jobs in order and how many of them go
        // before other borrowers (up to its last held-back one).
        let mut deferred_in_order: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut held_upto: BTreeMap<String, usize> = BTreeMap::new();
        loop {
            let open: Vec<&String> = remaining
                .iter()
                .filter(|j| !deferred_jobs.contains(*j))
                .collect();
            let leaves: BTreeSet<String> =
                open.iter().map(|j| self.jobs[*j].leaf.clone()).collect();
            let Some(leaf) = self.pick_leaf(&leaves) else {
                break;
            };
            let head = self
                .head(open.into_iter().filter(|j| self.jobs[*j].leaf == leaf))
                .unwrap();
            // Item 4: a job that would borrow holds back the lower-priority
            // jobs of its leaf too (today: only itself).
            let outranked = deferred_jobs
                .iter()
                .any(|d| self.jobs[d].leaf == leaf && self.jobs[d].prio > self.jobs[&head].prio);
            if !outranked && self.within_guarantee(&self.jobs[&head]) && self.consider(&head, 1) {
                remaining.remove(&head);
                self.out.order.push(head);
                continue;
            }
            let list = deferred_in_order.entry(leaf.clone()).or_default();
            list.push(head.clone());
            if (outranked && self.within_guarantee(&self.jobs[&head]))
                || self.holds(&self.jobs[&head])
            {
                // A leaf held back keeps its guaranteed turn (T3), and a
                // preemptor whose victims stopped its room.
                held_upto.insert(leaf, list.len());
            }
            deferred_jobs.insert(head);
        }
        // Pass 2: first the leaves held back, up to their last held-back
        // job; then every other job.
        let first: BTreeSet<String> = held_upto
            .iter()
            .flat_map(|(leaf, n)| deferred_in_order[leaf][..*n].iter().cloned())
            .collect();
        for part in [first, remaining.clone()] {
            let mut part: BTreeSet<String> = part.intersection(&remaining).cloned().collect();
            while !part.is_empty() {
                let open: Vec<&String> = part.iter().collect();
                let leaves: BTreeSet<String> =
                    open.iter().map(|j| self.jobs[*j].leaf.clone()).collect();
                let leaf = self.pick_leaf(&leaves).unwrap();
                let head = self
                    .head(open.into_iter().filter(|j| self.jobs[*j].leaf == leaf))
                    .unwrap();
                part.remove(&head);
                remaining.remove(&head);
                self.consider(&head, 2);
                self.out.order.push(head);
            }
        }
    }
}

/// Every `k`-subset of `0..n`, in lexicographic order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    fn go(start: usize, n: usize, k: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if cur.len() == k {
            out.push(cur.clone());
            return;
        }
        for i in start..n {
            cur.push(i);
            go(i + 1, n, k, cur, out);
            cur.pop();
        }
    }
    go(0, n, k, &mut cur, &mut out);
    out
}
