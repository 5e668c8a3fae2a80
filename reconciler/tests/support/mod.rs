//! Random but valid fleets and consistent observed states for the engine's
//! property tests, plus small helpers to build and describe them.
//!
//! A case is generated from plain random numbers ([`CaseRaw`]) and built
//! deterministically ([`build`]), so proptest shrinks the numbers and the
//! fleet shrinks with them. The observed state is made by the engine itself:
//! a first plan over a subset of the jobs on the derived nodes, whose `place`
//! actions become running jobs; then some GPUs fail, some jobs leave Git,
//! some runs are being preempted, idle nodes get `idleSince`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers
#![allow(dead_code)] // each test binary uses a different part

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use proptest::prelude::*;
use reconciler::diag::{Origin, Pos};
use reconciler::engine::{PlanInput, plan};
use reconciler::observed::{NodeGpus, ObservedState, QueuedJob, RunningJob, Timestamp, pool_node};
use reconciler::plan::{Action, Plan};
use reconciler::spec::{
    Duration, Fleet, GpuSelector, JobSpec, Manifest, Metadata, ModelQuota, NodePoolSpec, NvLink,
    Object, PoolGpu, PoolSize, PriorityClassSpec, QueueSpec, Topology, TopologyLevel,
};

/// The two GPU models pools choose from.
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

/// Plans `fleet` against `observed` at [`now`].
pub fn plan_at(fleet: &Fleet, observed: &ObservedState) -> Plan {
    plan(&PlanInput {
        fleet,
        observed,
        now: now(),
        revision: None,
    })
}

// ---------------------------------------------------------------------------
// Raw random numbers
// ---------------------------------------------------------------------------

/// One NodePool, as random numbers.
#[derive(Debug, Clone)]
pub struct PoolRaw {
    model: usize,
    eight: bool,
    nvlink: u8,
    max: u32,
    min: u32,
    observed: u32,
    per_rack: Option<u32>,
    zone: Option<u8>,
    scale_down: Option<u8>,
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
    grace: u8,
    default: bool,
}

/// One Job and what happened to it before the plan.
#[derive(Debug, Clone)]
pub struct JobRaw {
    queue: u8,
    class: Option<u8>,
    replicas: u32,
    per_replica: u32,
    models: u8,
    topology: u8,
    time_limit: Option<u8>,
    /// Part of the first plan (may then run) when below the case's `load`.
    early: u8,
    /// Removed from Git after it started.
    removed: bool,
    /// Being preempted: minutes ago, and for which pending job.
    preempting: Option<(u32, Option<u8>)>,
    /// Started this many minutes before now.
    started_ago: u32,
    /// First seen pending this many minutes before now.
    queued: Option<u32>,
}

/// What happened to the nodes.
#[derive(Debug, Clone)]
pub struct NodesRaw {
    unhealthy: Vec<(u8, u8)>,
    idle: Vec<Option<u32>>,
    /// Running jobs list one placement entry per node rather than per
    /// replica (both shapes are valid observed state).
    per_node: bool,
}

/// Everything a case is built from.
#[derive(Debug, Clone)]
pub struct CaseRaw {
    pools: Vec<PoolRaw>,
    queues: Vec<QueueRaw>,
    classes: Vec<ClassRaw>,
    jobs: Vec<JobRaw>,
    nodes: NodesRaw,
    /// How many tenths of the jobs are in the first plan.
    load: u8,
}

fn pool_raw() -> impl Strategy<Value = PoolRaw> {
    (
        0..2usize,
        any::<bool>(),
        0..3u8,
        1..=6u32,
        0..=6u32,
        1..=6u32,
        prop::option::of(1..=3u32),
        prop::option::of(0..2u8),
        prop::option::of(0..3u8),
    )
        .prop_map(
            |(model, eight, nvlink, max, min, observed, per_rack, zone, scale_down)| PoolRaw {
                model,
                eight,
                nvlink,
                max,
                min: min.min(max),
                observed: observed.min(max),
                per_rack,
                zone,
                scale_down,
            },
        )
}

fn quota_raw() -> impl Strategy<Value = (bool, u32, Option<u32>)> {
    (
        prop::bool::weighted(0.7),
        0..=40u32,
        prop::option::weighted(0.6, 0..=24u32),
    )
}

fn queue_raw() -> impl Strategy<Value = QueueRaw> {
    (
        prop::option::weighted(0.7, any::<u8>()),
        1..=4u32,
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
        prop::sample::select(vec![0, 10, 100, 500, 1000]),
        prop::bool::weighted(0.75),
        0..3u8,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(value, preemptible, grace, default)| ClassRaw {
            value,
            preemptible,
            grace,
            default,
        })
}

fn job_raw() -> impl Strategy<Value = JobRaw> {
    (
        any::<u8>(),
        prop::option::weighted(0.8, any::<u8>()),
        1..=4u32,
        1..=8u32,
        0..5u8,
        0..8u8,
        prop::option::weighted(0.4, 0..3u8),
        0..10u8,
        prop::bool::weighted(0.1),
        prop::option::weighted(0.12, (0..=10u32, prop::option::of(any::<u8>()))),
        1..=720u32,
        prop::option::weighted(0.5, 0..=180u32),
    )
        .prop_map(
            |(
                queue,
                class,
                replicas,
                per_replica,
                models,
                topology,
                time_limit,
                early,
                removed,
                preempting,
                started_ago,
                queued,
            )| JobRaw {
                queue,
                class,
                replicas,
                per_replica,
                models,
                topology,
                time_limit,
                early,
                removed,
                preempting,
                started_ago,
                queued,
            },
        )
}

fn nodes_raw() -> impl Strategy<Value = NodesRaw> {
    (
        prop::option::weighted(
            0.3,
            prop::collection::vec((any::<u8>(), any::<u8>()), 1..=2),
        )
        .prop_map(Option::unwrap_or_default),
        prop::collection::vec(prop::option::weighted(0.6, 0..=60u32), 18),
        any::<bool>(),
    )
        .prop_map(|(unhealthy, idle, per_node)| NodesRaw {
            unhealthy,
            idle,
            per_node,
        })
}

/// Random raw numbers for one case.
pub fn case_raw() -> impl Strategy<Value = CaseRaw> {
    (
        prop::collection::vec(pool_raw(), 1..=3),
        prop::collection::vec(queue_raw(), 1..=7),
        prop::collection::vec(class_raw(), 1..=4),
        prop::collection::vec(job_raw(), 0..=25),
        nodes_raw(),
        0..=10u8,
    )
        .prop_map(|(pools, queues, classes, jobs, nodes, load)| CaseRaw {
            pools,
            queues,
            classes,
            jobs,
            nodes,
            load,
        })
}

/// Random cases.
pub fn cases() -> impl Strategy<Value = Case> {
    case_raw().prop_map(|raw| build(&raw))
}

// ---------------------------------------------------------------------------
// Building a case
// ---------------------------------------------------------------------------

/// A valid fleet, a consistent observed state, and `now`.
#[derive(Clone)]
pub struct Case {
    /// The specs in Git.
    pub fleet: Fleet,
    /// The live fleet.
    pub observed: ObservedState,
}

impl Case {
    /// Plans this case.
    pub fn plan(&self) -> Plan {
        plan_at(&self.fleet, &self.observed)
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&describe(&self.fleet, &self.observed))
    }
}

fn pool_spec(raw: &PoolRaw) -> NodePoolSpec {
    let mut labels = BTreeMap::new();
    if let Some(z) = raw.zone {
        labels.insert("zone".to_string(), format!("z{z}"));
    }
    NodePoolSpec {
        gpu: PoolGpu {
            model: MODELS[raw.model].to_string(),
            count: if raw.eight { 8 } else { 4 },
            memory_gib: Some(80),
        },
        nvlink: [NvLink::Full, NvLink::Pairs, NvLink::None][raw.nvlink as usize],
        size: PoolSize {
            min: raw.min,
            max: raw.max,
        },
        nodes_per_rack: raw.per_rack,
        labels,
        scale_down_after: raw
            .scale_down
            .map(|s| Duration::from_secs([60, 600, 3600][s as usize])),
    }
}

/// The queue tree: depth 1–3, children's guarantees summing to at most the
/// parent's, limits at least the guarantee.
fn queues(raw: &[QueueRaw], provided: &BTreeSet<&str>) -> Vec<Object<QueueSpec>> {
    let mut depth: Vec<u32> = Vec::new();
    let mut parent: Vec<Option<usize>> = Vec::new();
    let mut guaranteed: Vec<[u32; 2]> = Vec::new();
    let mut given: Vec<[u32; 2]> = Vec::new(); // guaranteed handed to children so far
    let mut out = Vec::new();
    for (i, q) in raw.iter().enumerate() {
        let allowed: Vec<usize> = (0..i).filter(|k| depth[*k] < 3).collect();
        let p = match q.parent {
            Some(x) if i > 0 => Some(allowed[x as usize % allowed.len()]),
            _ => None,
        };
        depth.push(p.map_or(1, |p| depth[p] + 1));
        parent.push(p);
        let mut g = [0u32; 2];
        let mut quota = Vec::new();
        for (m, (listed, want, headroom)) in q.quota.iter().enumerate() {
            if !listed || !provided.contains(MODELS[m]) {
                continue;
            }
            let room = match p {
                Some(p) => guaranteed[p][m] - given[p][m],
                None => u32::MAX,
            };
            g[m] = (*want).min(room);
            if let Some(p) = p {
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
                parent: p.map(|p| format!("q{p}")),
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
                    grace_period: Duration::from_secs([0, 30, 300][c.grace as usize]),
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
    let topology = match raw.topology {
        1 => Some(Topology {
            required: Some(TopologyLevel::Rack),
            preferred: None,
        }),
        2 => Some(Topology {
            required: Some(TopologyLevel::Zone),
            preferred: None,
        }),
        3 => Some(Topology {
            required: None,
            preferred: Some(TopologyLevel::Rack),
        }),
        4 => Some(Topology {
            required: None,
            preferred: Some(TopologyLevel::Zone),
        }),
        _ => None,
    };
    JobSpec {
        queue: leaves[raw.queue as usize % leaves.len()].clone(),
        priority_class: raw
            .class
            .map(|c| classes[c as usize % classes.len()].name().to_string()),
        replicas: raw.replicas,
        gpus_per_replica: raw.per_replica.min(largest),
        gpu,
        topology,
        time_limit: raw
            .time_limit
            .map(|t| Duration::from_secs([1800, 7200, 43200][t as usize])),
        command: vec!["train".to_string()],
        image: None,
        env: BTreeMap::new(),
        kubernetes: None,
        slurm: None,
    }
}

/// Builds the fleet and observed state from raw numbers.
pub fn build(raw: &CaseRaw) -> Case {
    let pools: Vec<Object<NodePoolSpec>> = raw
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| object(&format!("p{i}"), pool_spec(p)))
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
    let jobs: Vec<Object<JobSpec>> = raw
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| object(&format!("j{i:02}"), job_spec(j, &leaves, &classes, &pools)))
        .collect();

    // Nodes: `observed` of each pool, named and labelled as the derived inventory.
    let mut nodes = Vec::new();
    for (pool, p) in pools.iter().zip(&raw.pools) {
        for i in 0..p.observed {
            nodes.push(pool_node(pool.name(), &pool.spec, i));
        }
    }
    let mut observed = ObservedState {
        nodes,
        ..ObservedState::default()
    };

    // First plan: the early jobs on empty nodes; its placements become running jobs.
    let early = Fleet {
        pools: pools.clone(),
        queues: queues.clone(),
        priority_classes: classes.clone(),
        jobs: jobs
            .iter()
            .zip(&raw.jobs)
            .filter(|(_, r)| r.early < raw.load)
            .map(|(j, _)| j.clone())
            .collect(),
        policies: Vec::new(),
    };
    let first = plan_at(&early, &observed);
    let raw_of: BTreeMap<&str, &JobRaw> = jobs.iter().map(|j| j.name()).zip(&raw.jobs).collect();
    for action in &first.actions {
        if let Action::Place { job, placement, .. } = action {
            let placement = if raw.nodes.per_node || std::env::var_os("GEN_PER_NODE").is_some() {
                per_node(placement)
            } else {
                placement.clone()
            };
            observed.running.push(RunningJob {
                job: job.clone(),
                started: ago(raw_of[job.as_str()].started_ago),
                placement,
                preempting_since: None,
                preempted_for: None,
                restart: None,
                spec_digest: None,
            });
        }
    }

    // Git now: the removed jobs are gone.
    let fleet = Fleet {
        pools,
        queues,
        priority_classes: classes,
        jobs: jobs
            .iter()
            .zip(&raw.jobs)
            .filter(|(_, r)| !r.removed)
            .map(|(j, _)| j.clone())
            .collect(),
        policies: Vec::new(),
    };
    let running: BTreeSet<String> = observed.running.iter().map(|r| r.job.clone()).collect();
    let waiting: Vec<&str> = fleet
        .jobs
        .iter()
        .map(|j| j.name())
        .filter(|j| !running.contains(*j))
        .collect();
    for run in &mut observed.running {
        if let Some((minutes, for_job)) = raw_of[run.job.as_str()].preempting {
            run.preempting_since = Some(ago(minutes));
            run.preempted_for = for_job
                .filter(|_| !waiting.is_empty())
                .map(|k| waiting[k as usize % waiting.len()].to_string());
        }
    }
    for name in &waiting {
        if let Some(minutes) = raw_of[name].queued {
            observed.queued.push(QueuedJob {
                job: name.to_string(),
                since: ago(minutes),
                nominated: Vec::new(),
            });
        }
    }

    // Failed GPUs, and idleSince on nodes nothing runs on.
    let count = observed.nodes.len();
    for (n, g) in &raw.nodes.unhealthy {
        let node = &mut observed.nodes[*n as usize % count];
        let gpus = node.gpus.len();
        node.gpus[*g as usize % gpus].healthy = false;
    }
    let busy: BTreeSet<&str> = observed
        .running
        .iter()
        .flat_map(|r| r.placement.iter().map(|p| p.node.as_str()))
        .collect();
    for (i, node) in observed.nodes.iter_mut().enumerate() {
        if !busy.contains(node.name.as_str()) {
            node.idle_since = raw.nodes.idle[i % raw.nodes.idle.len()].map(ago);
        }
    }
    Case { fleet, observed }
}

/// One entry per node, GPUs sorted.
fn per_node(placement: &[NodeGpus]) -> Vec<NodeGpus> {
    let mut by_node: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for part in placement {
        by_node.entry(&part.node).or_default().extend(&part.gpus);
    }
    by_node
        .into_iter()
        .map(|(node, mut gpus)| {
            gpus.sort_unstable();
            NodeGpus {
                node: node.to_string(),
                gpus,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Validity, shuffling, description
// ---------------------------------------------------------------------------

/// The fleet as one multi-document YAML file (JSON flow style), as a user
/// would write it.
pub fn to_yaml(fleet: &Fleet) -> String {
    fn doc<S: serde::Serialize + Clone>(kind: &str, o: &Object<S>) -> String {
        let manifest = Manifest {
            api_version: "gitfleet/v1".to_string(),
            kind: kind.to_string(),
            metadata: o.metadata.clone(),
            spec: o.spec.clone(),
        };
        serde_json::to_string(&manifest).expect("serialize")
    }
    let mut docs = Vec::new();
    docs.extend(fleet.pools.iter().map(|o| doc("NodePool", o)));
    docs.extend(fleet.queues.iter().map(|o| doc("Queue", o)));
    docs.extend(
        fleet
            .priority_classes
            .iter()
            .map(|o| doc("PriorityClass", o)),
    );
    docs.extend(fleet.jobs.iter().map(|o| doc("Job", o)));
    docs.join("\n---\n") + "\n"
}

/// A small deterministic RNG for shuffles (xorshift64*).
pub struct Shuffler(u64);

impl Shuffler {
    /// Seeded; zero is replaced by a constant.
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// The same case with every list in another order.
pub fn shuffled(case: &Case, seed: u64) -> Case {
    let mut rng = Shuffler::new(seed);
    let mut c = case.clone();
    rng.shuffle(&mut c.fleet.pools);
    rng.shuffle(&mut c.fleet.queues);
    rng.shuffle(&mut c.fleet.priority_classes);
    rng.shuffle(&mut c.fleet.jobs);
    rng.shuffle(&mut c.observed.nodes);
    for node in &mut c.observed.nodes {
        rng.shuffle(&mut node.gpus);
    }
    rng.shuffle(&mut c.observed.running);
    rng.shuffle(&mut c.observed.queued);
    c
}

fn rel(t: Timestamp) -> String {
    let minutes = (now() - t).num_minutes();
    format!("now-{minutes}m")
}

/// A readable description of a fleet and observed state (for failures).
pub fn describe(fleet: &Fleet, observed: &ObservedState) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "\npools:");
    for p in &fleet.pools {
        let sp = &p.spec;
        let _ = writeln!(
            s,
            "  {}: {}x{} nvlink={:?} size={}..{} nodesPerRack={:?} labels={:?} scaleDownAfter={}",
            p.name(),
            sp.gpu.count,
            sp.gpu.model,
            sp.nvlink,
            sp.size.min,
            sp.size.max,
            sp.nodes_per_rack,
            sp.labels,
            sp.scale_down_after()
        );
    }
    let _ = writeln!(s, "queues:");
    for q in &fleet.queues {
        let quota: Vec<String> = q
            .spec
            .quota
            .iter()
            .map(|m| {
                format!(
                    "{} g{} l{}",
                    m.model,
                    m.guaranteed,
                    m.limit.map_or("-".to_string(), |l| l.to_string())
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "  {} parent={} weight={} quota=[{}]",
            q.name(),
            q.spec.parent.as_deref().unwrap_or("-"),
            q.spec.weight,
            quota.join(", ")
        );
    }
    let _ = writeln!(s, "priorityClasses:");
    for c in &fleet.priority_classes {
        let _ = writeln!(
            s,
            "  {} value={} preemptible={} grace={}{}",
            c.name(),
            c.spec.value,
            c.spec.preemptible,
            c.spec.grace_period,
            if c.spec.default { " default" } else { "" }
        );
    }
    let _ = writeln!(s, "jobs:");
    for j in &fleet.jobs {
        let sp = &j.spec;
        let mut line = format!(
            "  {} queue={} class={} {}x{}",
            j.name(),
            sp.queue,
            sp.priority_class.as_deref().unwrap_or("-"),
            sp.replicas,
            sp.gpus_per_replica
        );
        if let Some(g) = &sp.gpu {
            let _ = write!(line, " models={:?}", g.models);
        }
        if let Some(t) = &sp.topology {
            if let Some(r) = t.required {
                let _ = write!(line, " required={r:?}");
            }
            if let Some(p) = t.preferred {
                let _ = write!(line, " preferred={p:?}");
            }
        }
        if let Some(t) = sp.time_limit {
            let _ = write!(line, " timeLimit={t}");
        }
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s, "nodes:");
    for n in &observed.nodes {
        let bad: Vec<u32> = n
            .gpus
            .iter()
            .filter(|g| !g.healthy)
            .map(|g| g.index)
            .collect();
        let _ = writeln!(
            s,
            "  {} pool={} labels={:?} gpus={}x{}{}{}",
            n.name,
            n.pool.as_deref().unwrap_or("-"),
            n.labels,
            n.gpus.len(),
            n.gpus.first().map_or("-", |g| g.model.as_str()),
            if bad.is_empty() {
                String::new()
            } else {
                format!(" unhealthy={bad:?}")
            },
            n.idle_since
                .map_or(String::new(), |t| format!(" idleSince={}", rel(t)))
        );
    }
    let _ = writeln!(s, "running:");
    for r in &observed.running {
        let at: Vec<String> = r
            .placement
            .iter()
            .map(|p| format!("{}{:?}", p.node, p.gpus))
            .collect();
        let _ = writeln!(
            s,
            "  {} started={} on {}{}{}",
            r.job,
            rel(r.started),
            at.join(" "),
            r.preempting_since
                .map_or(String::new(), |t| format!(" preemptingSince={}", rel(t))),
            r.preempted_for
                .as_deref()
                .map_or(String::new(), |j| format!(" preemptedFor={j}"))
        );
    }
    if !observed.queued.is_empty() {
        let q: Vec<String> = observed
            .queued
            .iter()
            .map(|q| format!("{}@{}", q.job, rel(q.since)))
            .collect();
        let _ = writeln!(s, "queued: {}", q.join(" "));
    }
    s
}

/// The plan in a compact readable form (for failures).
pub fn describe_plan(plan: &Plan) -> String {
    use std::fmt::Write;
    let mut s = String::from("plan:\n");
    for a in &plan.actions {
        let _ = match a {
            Action::Place { job, placement, .. } => {
                let at: Vec<String> = placement
                    .iter()
                    .map(|p| format!("{}{:?}", p.node, p.gpus))
                    .collect();
                writeln!(s, "  place {job} on {}", at.join(" "))
            }
            Action::Preempt {
                job,
                for_job,
                reason,
            } => writeln!(s, "  preempt {job} for {for_job}: {reason}"),
            Action::Scale {
                pool,
                from,
                to,
                nodes,
                ..
            } => writeln!(s, "  scale {pool} {from}->{to} {nodes:?}"),
            Action::Drain { node, reason } => writeln!(s, "  drain {node}: {reason}"),
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
