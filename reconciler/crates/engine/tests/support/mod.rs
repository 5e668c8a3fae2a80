//! Random small fleets for the reference and invariant tests of the engine:
//! 2–6 nodes of one or two GPU models, a queue tree of 1–3 levels, a few
//! priority classes, and up to ten jobs (gangs, several models, topology),
//! some of them running, some stopping (preempted in a grace period, past
//! their time limit, removed from Git), some pending (with an age and
//! sometimes GPUs nominated for them).
//!
//! A case is built deterministically from plain random numbers
//! ([`CaseRaw`]), so proptest shrinks the numbers and the fleet shrinks with
//! them; every shrink is still a valid fleet. Unlike the generator of
//! `reconciler/tests/support`, running jobs are placed here by the generator
//! itself (not by a first engine plan), so the reference test does not start
//! from the engine's own choices.
//!
//! Pools are fixed (`min == max ==` the observed nodes, no `idleSince`), so
//! no plan scales; time limits exist only on jobs already past them (so no
//! backfill reservation can form: nothing ends at a known future time but
//! stopping jobs, whose GPUs are waited for or promised).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers
#![allow(dead_code)] // each test binary uses a different part

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::sync::Arc;

use gitfleet_engine::{PlanInput, plan};
use model::diag::{Origin, Pos};
use model::observed::{
    CompletedJob, NodeGpus, ObservedGpu, ObservedNode, ObservedState, QueuedJob, RunningJob,
    Timestamp,
};
use model::plan::{Action, Plan};
use model::spec::{
    Duration, Fleet, GpuSelector, JobSpec, Metadata, ModelQuota, NodePoolSpec, NvLink, Object,
    PoolGpu, PoolSize, PriorityClassSpec, QueueSpec, Topology, TopologyLevel,
};
use proptest::prelude::*;

/// The GPU models pools choose from.
pub const MODELS: [&str; 2] = ["A100", "H100"];

/// The engine's `now` in every case.
pub fn now() -> Timestamp {
    "2026-11-21T10:00:00Z".parse().expect("timestamp")
}

/// `minutes` before [`now`].
pub fn ago(minutes: u32) -> Timestamp {
    now() - chrono::Duration::minutes(i64::from(minutes))
}

/// A loaded object as the loader would make it.
pub fn object<S>(name: &str, spec: S) -> Object<S> {
    Object {
        metadata: Metadata {
            name: name.to_string(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        },
        spec,
        origin: Origin::new(Arc::from("gen"), Pos::new(1, 1)),
    }
}

/// A fleet, an observed state and the time of the plan.
#[derive(Clone)]
pub struct Case {
    /// The specs in Git.
    pub fleet: Fleet,
    /// The live fleet.
    pub observed: ObservedState,
    /// The plan's `now`.
    pub now: Timestamp,
}

impl Case {
    /// The engine's plan for this case.
    pub fn plan(&self) -> Plan {
        plan(&self.input())
    }

    /// The engine's input.
    pub fn input(&self) -> PlanInput<'_> {
        PlanInput {
            fleet: &self.fleet,
            observed: &self.observed,
            now: self.now,
            revision: None,
        }
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&describe(self))
    }
}

// ---------------------------------------------------------------------------
// Raw random numbers
// ---------------------------------------------------------------------------

/// One NodePool: model, GPUs per node (4 or 8), NVLink layout, nodes.
#[derive(Debug, Clone)]
pub struct PoolRaw {
    model: u8,
    eight: bool,
    nvlink: u8,
    nodes: u8,
}

/// One node: its rack and zone label, and maybe one unhealthy GPU.
#[derive(Debug, Clone)]
pub struct NodeRaw {
    rack: u8,
    zone: u8,
    unhealthy: Option<u8>,
}

/// One Queue: parent choice, weight, and per model (listed, guaranteed, limit headroom).
#[derive(Debug, Clone)]
pub struct QueueRaw {
    parent: Option<u8>,
    weight: u32,
    quota: [(bool, u32, Option<u32>); 2],
}

/// One PriorityClass.
#[derive(Debug, Clone)]
pub struct ClassRaw {
    value: i32,
    preemptible: bool,
    grace: bool,
    default: bool,
}

/// What a job is doing before the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateRaw {
    /// Not running; maybe seen before, maybe with nominated GPUs.
    Pending,
    /// Running, not stopping.
    Running,
    /// Running, preempted this many minutes ago, maybe for a pending job.
    Preempting,
    /// Running, removed from Git since.
    Removed,
    /// Running past its time limit.
    Expired,
}

/// One Job.
#[derive(Debug, Clone)]
pub struct JobRaw {
    queue: u8,
    class: Option<u8>,
    replicas: u32,
    per_replica: u32,
    models: u8,
    topology: u8,
    state: StateRaw,
    /// Started this many minutes before now (running jobs).
    started_ago: u32,
    /// First seen pending this many minutes before now (pending jobs).
    queued: Option<u32>,
    /// Preempting jobs: minutes since the signal, and the job it is for.
    preempted: (u32, Option<u8>),
    /// Pending jobs: GPUs nominated for it (a node choice).
    nominated: Option<u8>,
    /// Where a running job sits (node and GPU choice).
    seat: u16,
}

/// Everything a case is built from.
#[derive(Debug, Clone)]
pub struct CaseRaw {
    pools: Vec<PoolRaw>,
    nodes: Vec<NodeRaw>,
    queues: Vec<QueueRaw>,
    classes: Vec<ClassRaw>,
    jobs: Vec<JobRaw>,
}

fn pool_raw() -> impl Strategy<Value = PoolRaw> {
    (0..2u8, any::<bool>(), 0..3u8, 1..=3u8).prop_map(|(model, eight, nvlink, nodes)| PoolRaw {
        model,
        eight,
        nvlink,
        nodes,
    })
}

fn node_raw() -> impl Strategy<Value = NodeRaw> {
    (0..3u8, 0..2u8, prop::option::weighted(0.08, 0..8u8)).prop_map(|(rack, zone, unhealthy)| {
        NodeRaw {
            rack,
            zone,
            unhealthy,
        }
    })
}

fn quota_raw() -> impl Strategy<Value = (bool, u32, Option<u32>)> {
    (
        prop::bool::weighted(0.75),
        prop::sample::select(vec![0u32, 0, 2, 4, 4, 8, 8, 12, 16, 24]),
        prop::option::weighted(0.5, prop::sample::select(vec![0u32, 2, 4, 8, 12])),
    )
}

fn queue_raw() -> impl Strategy<Value = QueueRaw> {
    (
        prop::option::weighted(0.7, any::<u8>()),
        1..=3u32,
        quota_raw(),
        quota_raw(),
    )
        .prop_map(|(parent, weight, a, b)| QueueRaw {
            parent,
            weight,
            quota: [a, b],
        })
}

fn class_raw() -> impl Strategy<Value = ClassRaw> {
    (
        prop::sample::select(vec![0, 10, 100, 1000]),
        prop::bool::weighted(0.8),
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(value, preemptible, grace, default)| ClassRaw {
            value,
            preemptible,
            grace,
            default,
        })
}

fn state_raw() -> impl Strategy<Value = StateRaw> {
    prop::sample::select(vec![
        StateRaw::Pending,
        StateRaw::Pending,
        StateRaw::Pending,
        StateRaw::Pending,
        StateRaw::Pending,
        StateRaw::Running,
        StateRaw::Running,
        StateRaw::Running,
        StateRaw::Running,
        StateRaw::Preempting,
        StateRaw::Removed,
        StateRaw::Expired,
    ])
}

fn job_raw() -> impl Strategy<Value = JobRaw> {
    (
        (
            any::<u8>(),
            prop::option::weighted(0.85, any::<u8>()),
            prop::sample::select(vec![1u32, 1, 1, 2, 2, 3]),
            prop::sample::select(vec![1u32, 1, 2, 2, 3, 4, 4, 6, 8, 8]),
            0..5u8,
            prop::sample::select(vec![0u8, 0, 0, 0, 1, 2, 3, 4, 5]),
        ),
        (
            state_raw(),
            1..=600u32,
            prop::option::weighted(0.6, 0..=120u32),
            (0..=6u32, prop::option::weighted(0.6, any::<u8>())),
            prop::option::weighted(0.1, any::<u8>()),
            any::<u16>(),
        ),
    )
        .prop_map(
            |(
                (queue, class, replicas, per_replica, models, topology),
                (state, started_ago, queued, preempted, nominated, seat),
            )| JobRaw {
                queue,
                class,
                replicas,
                per_replica,
                models,
                topology,
                state,
                started_ago,
                queued,
                preempted,
                nominated,
                seat,
            },
        )
}

/// Random raw numbers for one case.
pub fn case_raw() -> impl Strategy<Value = CaseRaw> {
    (
        prop::collection::vec(pool_raw(), 1..=3),
        prop::collection::vec(node_raw(), 6),
        prop::collection::vec(queue_raw(), 2..=6),
        prop::collection::vec(class_raw(), 1..=3),
        prop::collection::vec(job_raw(), 2..=10),
    )
        .prop_map(|(pools, nodes, queues, classes, jobs)| CaseRaw {
            pools,
            nodes,
            queues,
            classes,
            jobs,
        })
}

/// Random cases.
pub fn cases() -> impl Strategy<Value = Case> {
    case_raw().prop_map(|raw| build(&raw))
}

// ---------------------------------------------------------------------------
// Building a case
// ---------------------------------------------------------------------------

fn pool_spec(raw: &PoolRaw, nodes: u32) -> NodePoolSpec {
    NodePoolSpec {
        gpu: PoolGpu {
            model: MODELS[raw.model as usize % 2].to_string(),
            count: if raw.eight { 8 } else { 4 },
            memory_gib: None,
        },
        nvlink: [NvLink::Full, NvLink::Pairs, NvLink::None][raw.nvlink as usize % 3],
        size: PoolSize {
            min: nodes,
            max: nodes,
        },
        nodes_per_rack: None,
        labels: BTreeMap::new(),
        scale_down_after: None,
    }
}

/// The queue tree: depth 1–3, children's guarantees summing to at most the
/// parent's, limits at least the guarantee. Queues are named `q0`, `q1`….
fn queues(raw: &[QueueRaw], provided: &BTreeSet<&str>) -> Vec<Object<QueueSpec>> {
    let mut depth: Vec<u32> = Vec::new();
    let mut guaranteed: Vec<[u32; 2]> = Vec::new();
    let mut given: Vec<[u32; 2]> = Vec::new();
    let mut out = Vec::new();
    for (i, q) in raw.iter().enumerate() {
        let allowed: Vec<usize> = (0..i).filter(|k| depth[*k] < 3).collect();
        let parent = match q.parent {
            Some(x) if !allowed.is_empty() => Some(allowed[x as usize % allowed.len()]),
            _ => None,
        };
        depth.push(parent.map_or(1, |p| depth[p] + 1));
        let mut g = [0u32; 2];
        let mut quota = Vec::new();
        for (m, (listed, want, headroom)) in q.quota.iter().enumerate() {
            if !listed || !provided.contains(MODELS[m]) {
                continue;
            }
            let room = parent.map_or(u32::MAX, |p| guaranteed[p][m] - given[p][m]);
            g[m] = (*want).min(room);
            if let Some(p) = parent {
                given[p][m] += g[m];
            }
            quota.push(ModelQuota {
                model: MODELS[m].to_string(),
                guaranteed: g[m],
                limit: headroom.map(|h| g[m] + h),
            });
        }
        guaranteed.push(g);
        given.push([0, 0]);
        out.push(object(
            &format!("q{i}"),
            QueueSpec {
                parent: parent.map(|p| format!("q{p}")),
                weight: q.weight,
                quota,
                ordering: None,
            },
        ));
    }
    out
}

fn classes(raw: &[ClassRaw]) -> Vec<Object<PriorityClassSpec>> {
    let mut has_default = false;
    raw.iter()
        .enumerate()
        .map(|(i, c)| {
            let default = c.default && !has_default;
            has_default |= default;
            object(
                &format!("pc{i}"),
                PriorityClassSpec {
                    value: c.value,
                    preemptible: c.preemptible,
                    grace_period: Duration::from_secs(if c.grace { 300 } else { 0 }),
                    default,
                    description: None,
                },
            )
        })
        .collect()
}

fn job_spec(
    raw: &JobRaw,
    leaves: &[String],
    classes: &[Object<PriorityClassSpec>],
    pools: &[Object<NodePoolSpec>],
) -> JobSpec {
    let provided: BTreeSet<&str> = pools.iter().map(|p| p.spec.gpu.model.as_str()).collect();
    let wanted: Vec<&str> = match raw.models {
        1 => vec![MODELS[0]],
        2 => vec![MODELS[1]],
        3 => vec![MODELS[0], MODELS[1]],
        4 => vec![MODELS[1], MODELS[0]],
        _ => vec![],
    };
    let models: Vec<String> = wanted
        .into_iter()
        .filter(|m| provided.contains(m))
        .map(str::to_string)
        .collect();
    let gpu = (!models.is_empty()).then_some(GpuSelector { models });
    let accepts = |m: &str| gpu.as_ref().is_none_or(|s| s.models.iter().any(|x| x == m));
    let largest = pools
        .iter()
        .filter(|p| accepts(&p.spec.gpu.model))
        .map(|p| p.spec.gpu.count)
        .max()
        .unwrap_or(1);
    let level = |l: u8| {
        if l == 0 {
            TopologyLevel::Rack
        } else {
            TopologyLevel::Zone
        }
    };
    let topology = match raw.topology {
        1 | 2 => Some(Topology {
            required: Some(level(raw.topology - 1)),
            preferred: None,
        }),
        3 | 4 => Some(Topology {
            required: None,
            preferred: Some(level(raw.topology - 3)),
        }),
        _ => None,
    };
    let expired = raw.state == StateRaw::Expired;
    JobSpec {
        queue: leaves[raw.queue as usize % leaves.len()].clone(),
        priority_class: raw
            .class
            .map(|c| classes[c as usize % classes.len()].name().to_string()),
        replicas: raw.replicas,
        gpus_per_replica: raw.per_replica.min(largest),
        gpu,
        topology,
        // Only jobs already past their limit have one: no reservation.
        time_limit: expired.then(|| Duration::from_secs(3600)),
        command: vec!["train".to_string()],
        image: None,
        env: BTreeMap::new(),
        kubernetes: None,
        slurm: None,
    }
}

/// The first `n` nodes' raw numbers, cycling.
fn node_raw_at(raw: &CaseRaw, i: usize) -> &NodeRaw {
    &raw.nodes[i % raw.nodes.len()]
}

/// Builds the fleet and observed state from raw numbers.
pub fn build(raw: &CaseRaw) -> Case {
    // Pools: at most 6 nodes in all, at least 2.
    let mut counts: Vec<u32> = Vec::new();
    let mut total = 0u32;
    for p in &raw.pools {
        let n = u32::from(p.nodes).min(6 - total);
        counts.push(n);
        total += n;
    }
    if total < 2 {
        counts[0] += 2 - total;
    }
    let pools: Vec<Object<NodePoolSpec>> = raw
        .pools
        .iter()
        .zip(&counts)
        .enumerate()
        .filter(|(_, (_, n))| **n > 0)
        .map(|(i, (p, n))| object(&format!("p{i}"), pool_spec(p, *n)))
        .collect();
    let provided: BTreeSet<&str> = pools.iter().map(|p| p.spec.gpu.model.as_str()).collect();
    let queues = queues(&raw.queues, &provided);
    let leaves: Vec<String> = queues
        .iter()
        .filter(|q| {
            !queues
                .iter()
                .any(|c| c.spec.parent.as_deref() == Some(q.name()))
        })
        .map(|q| q.name().to_string())
        .collect();
    let classes = classes(&raw.classes);
    let jobs: Vec<(Object<JobSpec>, &JobRaw)> = raw
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            (
                object(&format!("j{i}"), job_spec(j, &leaves, &classes, &pools)),
                j,
            )
        })
        .collect();

    // Nodes: every node has a rack and a zone label.
    let mut nodes = Vec::new();
    let mut k = 0;
    for pool in &pools {
        for i in 0..pool.spec.size.min {
            let r = node_raw_at(raw, k);
            k += 1;
            let mut labels = BTreeMap::new();
            labels.insert("rack".to_string(), format!("r{}", r.rack));
            labels.insert("zone".to_string(), format!("z{}", r.zone));
            let gpus = (0..pool.spec.gpu.count)
                .map(|index| ObservedGpu {
                    healthy: r
                        .unhealthy
                        .is_none_or(|u| u32::from(u) % pool.spec.gpu.count != index),
                    ..ObservedGpu::new(index, pool.spec.gpu.model.clone())
                })
                .collect();
            nodes.push(ObservedNode {
                name: format!("{}-{i}", pool.name()),
                pool: Some(pool.name().to_string()),
                labels,
                idle_since: None,
                gpus,
            });
        }
    }

    // Running jobs: seated in job order on healthy free GPUs of a model they
    // accept (the first acceptable model where every replica finds a node).
    let mut held: BTreeSet<(usize, u32)> = BTreeSet::new();
    let mut running = Vec::new();
    let mut seated: BTreeSet<String> = BTreeSet::new();
    let model_order = |spec: &JobSpec| -> Vec<String> {
        match &spec.gpu {
            Some(sel) => sel.models.clone(),
            None => provided.iter().map(|m| m.to_string()).collect(),
        }
    };
    for (job, r) in &jobs {
        if r.state == StateRaw::Pending {
            continue;
        }
        let spec = &job.spec;
        for model in model_order(spec) {
            let mut taken = held.clone();
            let mut placement = Vec::new();
            let mut seat = u32::from(r.seat);
            for _ in 0..spec.replicas {
                let fits: Vec<usize> = (0..nodes.len())
                    .filter(|n| {
                        nodes[*n].gpus[0].model == model
                            && free_on(&nodes[*n], *n, &taken).len()
                                >= spec.gpus_per_replica as usize
                    })
                    .collect();
                if fits.is_empty() {
                    placement.clear();
                    break;
                }
                let n = fits[seat as usize % fits.len()];
                seat /= 3;
                let free = free_on(&nodes[n], n, &taken);
                let start = seat as usize % free.len();
                seat /= 5;
                let mut gpus: Vec<u32> = free
                    .iter()
                    .cycle()
                    .skip(start)
                    .take(spec.gpus_per_replica as usize)
                    .copied()
                    .collect();
                gpus.sort_unstable();
                for g in &gpus {
                    taken.insert((n, *g));
                }
                placement.push(NodeGpus {
                    node: nodes[n].name.clone(),
                    gpus,
                });
            }
            if placement.is_empty() {
                continue;
            }
            held = taken;
            seated.insert(job.name().to_string());
            running.push(RunningJob {
                job: job.name().to_string(),
                started: if r.state == StateRaw::Expired {
                    ago(60 + r.started_ago)
                } else {
                    ago(r.started_ago)
                },
                placement,
                preempting_since: None,
                preempted_for: None,
                restart: None,
                spec_digest: None,
            });
            break;
        }
    }

    // Git now: removed jobs that ran are gone; jobs that could not be
    // seated are pending (an expired one loses its time limit: it never ran).
    let waiting: Vec<&str> = jobs
        .iter()
        .filter(|(j, _)| !seated.contains(j.name()))
        .map(|(j, _)| j.name())
        .collect();
    let raw_of: BTreeMap<&str, &JobRaw> = jobs.iter().map(|(j, r)| (j.name(), *r)).collect();
    for run in &mut running {
        let r = raw_of[run.job.as_str()];
        if r.state == StateRaw::Preempting {
            run.preempting_since = Some(ago(r.preempted.0));
            run.preempted_for = r
                .preempted
                .1
                .filter(|_| !waiting.is_empty())
                .map(|k| waiting[k as usize % waiting.len()].to_string());
        }
    }
    let fleet_jobs: Vec<Object<JobSpec>> = jobs
        .iter()
        .filter(|(j, r)| !(r.state == StateRaw::Removed && seated.contains(j.name())))
        .map(|(j, r)| {
            let mut j = j.clone();
            if !seated.contains(j.name()) && r.state == StateRaw::Expired {
                j.spec.time_limit = None;
            }
            j
        })
        .collect();

    // Pending jobs: their age, and GPUs nominated for some (free ones of a
    // model they accept, as an executor records GPUs a victim freed).
    let mut queued = Vec::new();
    for name in &waiting {
        let r = raw_of[name];
        let spec = &fleet_jobs.iter().find(|j| j.name() == *name).unwrap().spec;
        let mut nominated = Vec::new();
        if let Some(choice) = r.nominated {
            let fits: Vec<usize> = (0..nodes.len())
                .filter(|n| {
                    spec.accepts_model(&nodes[*n].gpus[0].model)
                        && !free_on(&nodes[*n], *n, &held).is_empty()
                })
                .collect();
            if !fits.is_empty() {
                let n = fits[choice as usize % fits.len()];
                let gpus: Vec<u32> = free_on(&nodes[n], n, &held)
                    .into_iter()
                    .take(spec.total_gpus() as usize)
                    .collect();
                for g in &gpus {
                    held.insert((n, *g));
                }
                nominated.push(NodeGpus {
                    node: nodes[n].name.clone(),
                    gpus,
                });
            }
        }
        if r.queued.is_some() || !nominated.is_empty() {
            queued.push(QueuedJob {
                job: name.to_string(),
                since: ago(r.queued.unwrap_or(0)),
                nominated,
            });
        }
    }

    let fleet = Fleet {
        pools,
        queues,
        priority_classes: classes,
        jobs: fleet_jobs,
        policies: Vec::new(),
    };
    let observed = ObservedState {
        time: None,
        nodes,
        running,
        queued,
        completed: Vec::new(),
        attained: Default::default(),
    };
    Case {
        fleet,
        observed,
        now: now(),
    }
}

/// Healthy GPUs of node `n` not in `taken`, by index.
fn free_on(node: &ObservedNode, n: usize, taken: &BTreeSet<(usize, u32)>) -> Vec<u32> {
    node.gpus
        .iter()
        .filter(|g| g.healthy && !taken.contains(&(n, g.index)))
        .map(|g| g.index)
        .collect()
}

// ---------------------------------------------------------------------------
// Cases written as YAML (docs/reference-divergences.md)
// ---------------------------------------------------------------------------

/// A case from a fleet repository's YAML and an observed state's YAML,
/// read as `gitfleet plan --observed` reads them; `now` is the observed
/// `time`.
pub fn load_case(fleet_yaml: &str, observed_yaml: &str) -> Case {
    let loaded = load::load_fleet(&[load::SourceFile::new(
        "fleet.yaml",
        fleet_yaml.as_bytes().to_vec(),
    )]);
    assert!(loaded.is_valid(), "invalid fleet: {:?}", loaded.diagnostics);
    let observed = load::parse_observed("observed.yaml", observed_yaml)
        .unwrap_or_else(|e| panic!("invalid observed state: {e:?}"));
    Case {
        fleet: loaded.fleet,
        now: observed.time.expect("the observed state has a time"),
        observed,
    }
}

/// One example of a markdown file: its heading, the names in backquotes
/// on its `Predicate:` and `Invariant predicate:` lines, and its first two
/// YAML blocks (fleet, observed).
pub struct Example {
    /// The `###` heading.
    pub title: String,
    /// Predicates of `reference_vs_engine.rs` (`known::…`).
    pub predicates: Vec<String>,
    /// Predicates of `invariants.rs`.
    pub invariant_predicates: Vec<String>,
    /// The case.
    pub case: Case,
}

/// The names in backquotes on the first line of `section` that starts with
/// `prefix`.
fn names(section: &str, prefix: &str) -> Vec<String> {
    section
        .lines()
        .find(|l| l.starts_with(prefix))
        .map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Every `###` section of `markdown` that holds two YAML blocks.
pub fn examples(markdown: &str) -> Vec<Example> {
    let mut out = Vec::new();
    for section in markdown.split("\n### ").skip(1) {
        let title = section.lines().next().unwrap_or_default().to_string();
        let blocks: Vec<&str> = section
            .split("```yaml\n")
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .collect();
        if blocks.len() < 2 {
            continue;
        }
        out.push(Example {
            title,
            predicates: names(section, "Predicate:"),
            invariant_predicates: names(section, "Invariant predicate:"),
            case: load_case(blocks[0], blocks[1]),
        });
    }
    out
}

// ---------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------

/// Job → placement of every `place` action.
pub fn placed(plan: &Plan) -> BTreeMap<String, Vec<NodeGpus>> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Place { job, placement, .. } => Some((job.clone(), placement.clone())),
            _ => None,
        })
        .collect()
}

/// Victim → preemptor of every `preempt` action.
pub fn preempted(plan: &Plan) -> BTreeMap<String, String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt { job, for_job, .. } => Some((job.clone(), for_job.clone())),
            _ => None,
        })
        .collect()
}

/// Jobs of every `terminate` (time limit) action.
pub fn terminated(plan: &Plan) -> BTreeSet<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Terminate { job, .. } => Some(job.clone()),
            _ => None,
        })
        .collect()
}

/// Jobs of every `cancel` (removed from Git) action.
pub fn cancelled(plan: &Plan) -> BTreeSet<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Cancel { job, .. } => Some(job.clone()),
            _ => None,
        })
        .collect()
}

/// The observed state after an executor carried out `plan` and every stop
/// finished, at the same `now`: placed jobs run (started now), every
/// stopping job is gone (a preempted one's GPUs nominated for the job it was
/// preempted for, as executors record them; a terminated one recorded as
/// completed), nothing else changes.
pub fn feed_back(case: &Case, plan: &Plan) -> Case {
    let mut observed = case.observed.clone();
    let preempted = preempted(plan);
    let terminated = terminated(plan);
    let cancelled = cancelled(plan);
    let mut nominated: BTreeMap<String, Vec<NodeGpus>> = BTreeMap::new();
    let mut completed = observed.completed.clone();
    observed.running.retain(|r| {
        let for_job = preempted.get(&r.job).cloned().or_else(|| {
            r.preempted_for
                .clone()
                .filter(|_| r.preempting_since.is_some())
        });
        let stops = preempted.contains_key(&r.job)
            || r.preempting_since.is_some()
            || terminated.contains(&r.job)
            || cancelled.contains(&r.job);
        if !stops {
            return true;
        }
        if let Some(p) = for_job {
            nominated
                .entry(p)
                .or_default()
                .extend(r.placement.iter().cloned());
        }
        if terminated.contains(&r.job) {
            completed.push(CompletedJob {
                job: r.job.clone(),
                finished: case.now,
                exit_code: None,
                reason: Some("time limit".to_string()),
            });
        }
        false
    });
    let placed = placed(plan);
    for (job, placement) in &placed {
        observed.running.push(RunningJob {
            job: job.clone(),
            started: case.now,
            placement: placement.clone(),
            preempting_since: None,
            preempted_for: None,
            restart: None,
            spec_digest: None,
        });
    }
    let running: BTreeSet<&str> = observed.running.iter().map(|r| r.job.as_str()).collect();
    let taken: BTreeSet<(String, u32)> = placed
        .values()
        .flatten()
        .flat_map(|p| p.gpus.iter().map(|g| (p.node.clone(), *g)))
        .collect();
    let mut queued: Vec<QueuedJob> = Vec::new();
    for q in &observed.queued {
        if running.contains(q.job.as_str()) {
            continue;
        }
        let mut q = q.clone();
        // GPUs nominated before stay nominated only while still free.
        for n in &mut q.nominated {
            n.gpus.retain(|g| !taken.contains(&(n.node.clone(), *g)));
        }
        q.nominated.retain(|n| !n.gpus.is_empty());
        queued.push(q);
    }
    for (job, gpus) in nominated {
        if running.contains(job.as_str()) || !case.fleet.jobs.iter().any(|j| j.name() == job) {
            continue;
        }
        match queued.iter_mut().find(|q| q.job == job) {
            Some(q) => q.nominated.extend(gpus),
            None => queued.push(QueuedJob {
                job,
                since: case.now,
                nominated: gpus,
            }),
        }
    }
    // Every pending job has now been seen.
    for j in &case.fleet.jobs {
        if !running.contains(j.name()) && !queued.iter().any(|q| q.job == j.name()) {
            queued.push(QueuedJob {
                job: j.name().to_string(),
                since: case.now,
                nominated: Vec::new(),
            });
        }
    }
    observed.queued = queued;
    observed.completed = completed;
    Case {
        fleet: case.fleet.clone(),
        observed,
        now: case.now,
    }
}

// ---------------------------------------------------------------------------
// Description (failure messages and docs/reference-divergences.md)
// ---------------------------------------------------------------------------

fn rel(t: Timestamp) -> String {
    t.format("%H:%M").to_string()
}

fn gpus_list(gpus: &[u32]) -> String {
    let v: Vec<String> = gpus.iter().map(u32::to_string).collect();
    format!("[{}]", v.join(", "))
}

fn placement_yaml(placement: &[NodeGpus]) -> String {
    let parts: Vec<String> = placement
        .iter()
        .map(|p| format!("{{node: {}, gpus: {}}}", p.node, gpus_list(&p.gpus)))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The fleet as YAML documents, one flow-style spec per document.
pub fn fleet_yaml(fleet: &Fleet) -> String {
    let mut s = String::new();
    for p in &fleet.pools {
        let sp = &p.spec;
        let _ = writeln!(
            s,
            "---\nkind: NodePool\nmetadata: {{name: {}}}\nspec: {{gpu: {{model: {}, count: {}}}, nvlink: {}, size: {{min: {}, max: {}}}}}",
            p.name(),
            sp.gpu.model,
            sp.gpu.count,
            match sp.nvlink {
                NvLink::Full => "full",
                NvLink::Pairs => "pairs",
                NvLink::None => "none",
            },
            sp.size.min,
            sp.size.max
        );
    }
    for q in &fleet.queues {
        let mut fields = Vec::new();
        if let Some(p) = &q.spec.parent {
            fields.push(format!("parent: {p}"));
        }
        if q.spec.weight != 1 {
            fields.push(format!("weight: {}", q.spec.weight));
        }
        let quota: Vec<String> = q
            .spec
            .quota
            .iter()
            .map(|m| match m.limit {
                Some(l) => format!(
                    "{{model: {}, guaranteed: {}, limit: {l}}}",
                    m.model, m.guaranteed
                ),
                None => format!("{{model: {}, guaranteed: {}}}", m.model, m.guaranteed),
            })
            .collect();
        if !quota.is_empty() {
            fields.push(format!("quota: [{}]", quota.join(", ")));
        }
        let _ = writeln!(
            s,
            "---\nkind: Queue\nmetadata: {{name: {}}}\nspec: {{{}}}",
            q.name(),
            fields.join(", ")
        );
    }
    for c in &fleet.priority_classes {
        let _ = writeln!(
            s,
            "---\nkind: PriorityClass\nmetadata: {{name: {}}}\nspec: {{value: {}, preemptible: {}, gracePeriod: {}{}}}",
            c.name(),
            c.spec.value,
            c.spec.preemptible,
            c.spec.grace_period,
            if c.spec.default {
                ", default: true"
            } else {
                ""
            }
        );
    }
    for j in &fleet.jobs {
        let sp = &j.spec;
        let mut fields = vec![format!("queue: {}", sp.queue)];
        if let Some(c) = &sp.priority_class {
            fields.push(format!("priorityClass: {c}"));
        }
        if sp.replicas != 1 {
            fields.push(format!("replicas: {}", sp.replicas));
        }
        fields.push(format!("gpusPerReplica: {}", sp.gpus_per_replica));
        if let Some(g) = &sp.gpu {
            fields.push(format!("gpu: {{models: [{}]}}", g.models.join(", ")));
        }
        if let Some(t) = &sp.topology {
            let level = |l: TopologyLevel| format!("{l:?}").to_lowercase();
            if let Some(r) = t.required {
                fields.push(format!("topology: {{required: {}}}", level(r)));
            }
            if let Some(p) = t.preferred {
                fields.push(format!("topology: {{preferred: {}}}", level(p)));
            }
        }
        if let Some(t) = sp.time_limit {
            fields.push(format!("timeLimit: {t}"));
        }
        let _ = writeln!(
            s,
            "---\nkind: Job\nmetadata: {{name: {}}}\nspec: {{{}}}",
            j.name(),
            fields.join(", ")
        );
    }
    s.replace("---\nkind", "---\napiVersion: gitfleet/v1\nkind")
}

fn time(t: Timestamp) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The observed state as YAML that `gitfleet plan --observed` reads (flow
/// style, a node's GPUs on one line).
pub fn observed_yaml(observed: &ObservedState, now: Timestamp) -> String {
    let mut s = format!("time: {}\nnodes:\n", time(now));
    for n in &observed.nodes {
        let labels: Vec<String> = n.labels.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let gpus: Vec<String> = n
            .gpus
            .iter()
            .map(|g| {
                format!(
                    "{{index: {}, model: {}{}}}",
                    g.index,
                    g.model,
                    if g.healthy { "" } else { ", healthy: false" }
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "  - {{name: {}, pool: {}, labels: {{{}}}, gpus: [{}]}}",
            n.name,
            n.pool.as_deref().unwrap_or("-"),
            labels.join(", "),
            gpus.join(", ")
        );
    }
    if !observed.running.is_empty() {
        s.push_str("running:\n");
    }
    for r in &observed.running {
        let mut line = format!(
            "  - {{job: {}, started: {}, placement: {}",
            r.job,
            time(r.started),
            placement_yaml(&r.placement)
        );
        if let Some(t) = r.preempting_since {
            let _ = write!(line, ", preemptingSince: {}", time(t));
        }
        if let Some(p) = &r.preempted_for {
            let _ = write!(line, ", preemptedFor: {p}");
        }
        let _ = writeln!(s, "{line}}}");
    }
    if !observed.queued.is_empty() {
        s.push_str("queued:\n");
    }
    for q in &observed.queued {
        let mut line = format!("  - {{job: {}, since: {}", q.job, time(q.since));
        if !q.nominated.is_empty() {
            let _ = write!(line, ", nominated: {}", placement_yaml(&q.nominated));
        }
        let _ = writeln!(s, "{line}}}");
    }
    if !observed.completed.is_empty() {
        s.push_str("completed:\n");
    }
    for c in &observed.completed {
        let _ = writeln!(s, "  - {{job: {}, finished: {}}}", c.job, time(c.finished));
    }
    s
}

/// The case in a readable form: the fleet's YAML, then the observed state.
pub fn describe(case: &Case) -> String {
    format!(
        "\n# fleet\n{}# observed (now {})\n{}",
        fleet_yaml(&case.fleet),
        rel(case.now),
        observed_yaml(&case.observed, case.now)
    )
}

/// The plan's actions and pending jobs, one per line.
pub fn describe_plan(plan: &Plan) -> String {
    let mut s = String::new();
    for a in &plan.actions {
        let _ = match a {
            Action::Place { job, placement, .. } => {
                writeln!(s, "  place {job} on {}", placement_yaml(placement))
            }
            Action::Preempt {
                job,
                for_job,
                reason,
            } => writeln!(s, "  preempt {job} for {for_job}: {reason}"),
            Action::Scale { pool, from, to, .. } => writeln!(s, "  scale {pool} {from} -> {to}"),
            Action::Drain { node, .. } => writeln!(s, "  drain {node}"),
            Action::Terminate { job, .. } => writeln!(s, "  terminate {job}"),
            Action::Cancel { job, .. } => writeln!(s, "  cancel {job}"),
        };
    }
    for p in &plan.pending {
        let _ = writeln!(
            s,
            "  pending {} [{}]: {}",
            p.job,
            p.waiting_for.as_deref().unwrap_or("-"),
            p.reason
        );
    }
    s
}
