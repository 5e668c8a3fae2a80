//! Property tests of the scheduling engine (DESIGN.md §2 "Scheduling rules").
//!
//! Every case is a random but valid fleet with a consistent observed state
//! (see `support`): the engine's own placements from a first plan, then
//! failed GPUs, jobs removed from Git, preemptions in progress and idle
//! nodes. Each property plans the case and checks one promise.
//!
//! Cases per property: `PROPTEST_CASES` or [`CASES`]. The seed is fixed so
//! that CI is reproducible; set `PROPTEST_RNG_SEED=<u64>` to explore others.
//! A failure prints the shrunk fleet and observed state, and the plan.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

mod support;

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngSeed, TestCaseError, TestRunner};
use reconciler::observed::{NodeGpus, ObservedNode, RunningJob};
use reconciler::plan::{Action, Plan};
use reconciler::spec::{GpuSelector, JobSpec, QueueSpec, TopologyLevel};

use support::{Case, cases, describe, describe_plan, now, plan_at, shuffled};

/// Cases per property when `PROPTEST_CASES` is not set.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    let base = ProptestConfig::default();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    let rng_seed = if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
        base.rng_seed
    } else {
        RngSeed::Fixed(0x6769_7466_6c65_6574) // "gitfleet"
    };
    ProptestConfig {
        cases,
        rng_seed,
        failure_persistence: None,
        max_shrink_iters: 10_000,
        ..base
    }
}

// ---------------------------------------------------------------------------
// What a case says, in the terms of DESIGN.md
// ---------------------------------------------------------------------------

/// Lookups over a case's fleet and observed state.
struct Facts<'a> {
    case: &'a Case,
    jobs: BTreeMap<&'a str, &'a JobSpec>,
    queues: BTreeMap<&'a str, &'a QueueSpec>,
    nodes: BTreeMap<&'a str, &'a ObservedNode>,
    running: BTreeMap<&'a str, &'a RunningJob>,
    /// GPU → the observed running job holding it.
    held: BTreeMap<(&'a str, u32), &'a str>,
}

impl<'a> Facts<'a> {
    fn new(case: &'a Case) -> Self {
        let mut held = BTreeMap::new();
        for r in &case.observed.running {
            for part in &r.placement {
                for g in &part.gpus {
                    held.insert((part.node.as_str(), *g), r.job.as_str());
                }
            }
        }
        Facts {
            case,
            jobs: case
                .fleet
                .jobs
                .iter()
                .map(|j| (j.name(), &j.spec))
                .collect(),
            queues: case
                .fleet
                .queues
                .iter()
                .map(|q| (q.name(), &q.spec))
                .collect(),
            nodes: case
                .observed
                .nodes
                .iter()
                .map(|n| (n.name.as_str(), n))
                .collect(),
            running: case
                .observed
                .running
                .iter()
                .map(|r| (r.job.as_str(), r))
                .collect(),
            held,
        }
    }

    /// The queue and its ancestors, leaf first.
    fn path(&self, queue: &'a str) -> Vec<&'a str> {
        let mut out = vec![queue];
        let mut cur = queue;
        while let Some(p) = self.queues.get(cur).and_then(|q| q.parent.as_deref()) {
            out.push(p);
            cur = p;
        }
        out
    }

    fn guaranteed(&self, queue: &str, model: &str) -> u64 {
        self.queues
            .get(queue)
            .map_or(0, |q| u64::from(q.guaranteed(model)))
    }

    fn limit(&self, queue: &str, model: &str) -> Option<u64> {
        self.queues
            .get(queue)
            .and_then(|q| q.limit(model))
            .map(u64::from)
    }

    /// Priority value and preemptibility of a job (default class, else 0 / true).
    fn class(&self, job: &str) -> (i32, bool) {
        let classes = &self.case.fleet.priority_classes;
        let spec = self.jobs[job];
        let class = match &spec.priority_class {
            Some(name) => classes.iter().find(|c| c.name() == name),
            None => classes.iter().find(|c| c.spec.default),
        };
        class.map_or((0, true), |c| (c.spec.value, c.spec.preemptible))
    }

    /// The GPU model of a node (its first GPU's).
    fn node_model(&self, node: &str) -> &'a str {
        self.nodes[node].gpus[0].model.as_str()
    }

    fn run_model(&self, run: &RunningJob) -> &'a str {
        self.node_model(&run.placement[0].node)
    }

    fn run_gpus(run: &RunningJob) -> u64 {
        run.placement.iter().map(|p| p.gpus.len() as u64).sum()
    }

    /// Whether an observed run was already stopping before the plan:
    /// removed from Git, being preempted, or past its time limit.
    fn stopping(&self, run: &RunningJob) -> bool {
        let Some(spec) = self.jobs.get(run.job.as_str()) else {
            return true;
        };
        let past_limit = spec.time_limit.is_some_and(|l| {
            run.started + chrono::Duration::milliseconds(l.as_millis() as i64) <= now()
        });
        run.preempting_since.is_some() || past_limit
    }

    /// Usage per (queue, model) of the runs that are not stopping, charged
    /// to every ancestor.
    fn usage_before(&self) -> BTreeMap<(&'a str, &'a str), u64> {
        let mut usage = BTreeMap::new();
        for r in &self.case.observed.running {
            if self.stopping(r) {
                continue;
            }
            let model = self.run_model(r);
            for q in self.path(&self.jobs[r.job.as_str()].queue) {
                *usage.entry((q, model)).or_default() += Self::run_gpus(r);
            }
        }
        usage
    }

    fn unhealthy_node(&self, node: &str) -> bool {
        self.nodes[node].gpus.iter().any(|g| !g.healthy)
    }
}

fn places(plan: &Plan) -> Vec<(&str, &[NodeGpus])> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Place { job, placement, .. } => Some((job.as_str(), placement.as_slice())),
            _ => None,
        })
        .collect()
}

/// (victim, preemptor) of every preempt action.
fn preempts(plan: &Plan) -> Vec<(&str, &str)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt { job, for_job, .. } => Some((job.as_str(), for_job.as_str())),
            _ => None,
        })
        .collect()
}

/// Plans the case and runs `property`; a violation fails with the case and plan.
fn check(
    case: &Case,
    property: impl FnOnce(&Facts, &Plan) -> Result<(), String>,
) -> Result<(), TestCaseError> {
    let plan = case.plan();
    let facts = Facts::new(case);
    property(&facts, &plan)
        .map_err(|msg| TestCaseError::fail(format!("{msg}\n{}", describe_plan(&plan))))
}

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(msg()) }
}

// ---------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------

/// 1. No GPU is given twice, nor a GPU that is missing, held, unhealthy or
///    on a drained node.
fn no_gpu_given_twice(f: &Facts, plan: &Plan) -> Result<(), String> {
    let mut given: BTreeMap<(&str, u32), &str> = BTreeMap::new();
    for (job, placement) in places(plan) {
        for part in placement {
            let node = part.node.as_str();
            let Some(observed) = f.nodes.get(node) else {
                return Err(format!("{job} placed on unknown node {node}"));
            };
            ensure(!f.unhealthy_node(node), || {
                format!("{job} placed on {node}, which has an unhealthy GPU (drained)")
            })?;
            for &g in &part.gpus {
                let Some(gpu) = observed.gpus.iter().find(|x| x.index == g) else {
                    return Err(format!(
                        "{job} given GPU {g} of {node}, which has no such GPU"
                    ));
                };
                ensure(gpu.healthy, || {
                    format!("{job} given unhealthy GPU {node}/{g}")
                })?;
                if let Some(holder) = f.held.get(&(node, g)) {
                    return Err(format!(
                        "{job} given GPU {node}/{g}, held by running {holder}"
                    ));
                }
                if let Some(other) = given.insert((node, g), job) {
                    return Err(format!("GPU {node}/{g} given to both {other} and {job}"));
                }
            }
        }
    }
    Ok(())
}

/// 2. Gangs are all-or-nothing: one entry per replica, each of
///    `gpusPerReplica` GPUs on one node, one accepted model for the gang; a
///    job is placed at most once and never both placed and pending.
fn gangs_all_or_nothing(f: &Facts, plan: &Plan) -> Result<(), String> {
    let pending: BTreeSet<&str> = plan.pending.iter().map(|p| &*p.job).collect();
    let mut placed = BTreeSet::new();
    for (job, placement) in places(plan) {
        let Some(spec) = f.jobs.get(job) else {
            return Err(format!("placed {job}, which is not in Git"));
        };
        ensure(!f.running.contains_key(job), || {
            format!("placed {job}, which is already running")
        })?;
        ensure(placed.insert(job), || format!("{job} placed twice"))?;
        ensure(!pending.contains(job), || {
            format!("{job} is both placed and pending")
        })?;
        ensure(placement.len() == spec.replicas as usize, || {
            format!(
                "{job}: {} placement entries for {} replicas",
                placement.len(),
                spec.replicas
            )
        })?;
        let mut models = BTreeSet::new();
        for part in placement {
            let distinct: BTreeSet<u32> = part.gpus.iter().copied().collect();
            ensure(
                distinct.len() == spec.gpus_per_replica as usize
                    && part.gpus.len() == distinct.len(),
                || {
                    format!(
                        "{job}: replica on {} got GPUs {:?}, wants {} distinct",
                        part.node, part.gpus, spec.gpus_per_replica
                    )
                },
            )?;
            if let Some(node) = f.nodes.get(part.node.as_str()) {
                for g in &part.gpus {
                    if let Some(gpu) = node.gpus.iter().find(|x| x.index == *g) {
                        models.insert(gpu.model.as_str());
                    }
                }
            }
        }
        ensure(models.len() == 1, || {
            format!("{job}: replicas on several models {models:?}")
        })?;
        let model = models.first().copied().unwrap_or_default();
        ensure(spec.accepts_model(model), || {
            format!("{job} placed on {model}, which it does not accept")
        })?;
    }
    Ok(())
}

/// 3. `topology.required`: all replicas in one rack / zone.
fn required_topology(f: &Facts, plan: &Plan) -> Result<(), String> {
    for (job, placement) in places(plan) {
        let Some(level) = f.jobs[job].topology.and_then(|t| t.required) else {
            continue;
        };
        let key = match level {
            TopologyLevel::Rack => "rack",
            TopologyLevel::Zone => "zone",
            _ => continue,
        };
        let domains: BTreeSet<Option<&String>> = placement
            .iter()
            .map(|p| f.nodes[p.node.as_str()].labels.get(key))
            .collect();
        ensure(domains.len() == 1 && !domains.contains(&None), || {
            format!("{job} requires one {key} but sits in {domains:?}")
        })?;
    }
    Ok(())
}

/// 4. Placements never push a queue over its limit: usage after the plan
///    (runs that keep running, minus this plan's victims, plus placed jobs;
///    and pending jobs that hold a claim on GPUs where their model is
///    unambiguous) stays within every limit it was within before.
fn quotas_hold(f: &Facts, plan: &Plan) -> Result<(), String> {
    let before = f.usage_before();
    let mut after = before.clone();
    for (victim, _) in preempts(plan) {
        let run = f.running[victim];
        if f.stopping(run) {
            continue; // was never charged
        }
        let model = f.run_model(run);
        for q in f.path(&f.jobs[victim].queue) {
            let u = after.entry((q, model)).or_default();
            *u = u.saturating_sub(Facts::run_gpus(run));
        }
    }
    for (job, placement) in places(plan) {
        let model = f.node_model(&placement[0].node);
        for q in f.path(&f.jobs[job].queue) {
            *after.entry((q, model)).or_default() += f.jobs[job].total_gpus();
        }
    }
    // Pending jobs that wait with GPUs set aside are charged too (when their
    // model is unambiguous from the spec and the pools).
    let provided: BTreeSet<&str> = f
        .case
        .fleet
        .pools
        .iter()
        .map(|p| p.spec.gpu.model.as_str())
        .collect();
    let mut with_claims = after.clone();
    for p in &plan.pending {
        let waits = matches!(
            p.waiting_for.as_deref(),
            Some("preemption" | "freeing" | "scale-up")
        );
        let Some(spec) = f.jobs.get(&*p.job) else {
            continue;
        };
        let models: Vec<&str> = provided
            .iter()
            .copied()
            .filter(|m| spec.accepts_model(m))
            .collect();
        if waits && models.len() == 1 {
            for q in f.path(&spec.queue) {
                *with_claims.entry((q, models[0])).or_default() += spec.total_gpus();
            }
        }
    }
    for ((queue, model), used) in &with_claims {
        let Some(limit) = f.limit(queue, model) else {
            continue;
        };
        let was = before.get(&(*queue, *model)).copied().unwrap_or(0);
        if was > limit {
            continue;
        }
        let placed_only = after.get(&(*queue, *model)).copied().unwrap_or(0);
        ensure(placed_only <= limit, || {
            format!(
                "queue {queue} {model}: usage {was} before, {placed_only} after the plan's placements, limit {limit}"
            )
        })?;
        ensure(*used <= limit, || {
            format!(
                "queue {queue} {model}: usage {was} before, {used} with placements and waiting claims, limit {limit}"
            )
        })?;
    }
    Ok(())
}

/// 5. Preemption respects guarantees and the victim rules: victims are
///    preemptible observed runs (not stopping, not placed now), same-queue
///    victims have lower priority, and another queue's victims only come
///    out of that queue's borrowed usage. Preemptors stay pending.
fn guarantees_hold(f: &Facts, plan: &Plan) -> Result<(), String> {
    let before = f.usage_before();
    let placed: BTreeSet<&str> = places(plan).iter().map(|(j, _)| *j).collect();
    let mut taken: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut victims = BTreeSet::new();
    for (victim, preemptor) in preempts(plan) {
        ensure(victims.insert(victim), || {
            format!("{victim} preempted twice")
        })?;
        ensure(!placed.contains(victim), || {
            format!("{victim} is preempted and placed in the same plan")
        })?;
        let Some(run) = f.running.get(victim) else {
            return Err(format!("{victim} preempted but not running"));
        };
        ensure(!f.stopping(run), || {
            format!("{victim} preempted but already stopping")
        })?;
        ensure(f.class(victim).1, || {
            format!("{victim} preempted but its class is not preemptible")
        })?;
        let Some(pspec) = f.jobs.get(preemptor) else {
            return Err(format!("{victim} preempted for {preemptor}, not in Git"));
        };
        let pending = plan.pending.iter().find(|p| *p.job == *preemptor);
        ensure(
            pending.is_some_and(|p| p.waiting_for.as_deref() == Some("preemption")),
            || format!("preemptor {preemptor} is not pending waiting for preemption"),
        )?;
        let vq = f.jobs[victim].queue.as_str();
        if vq == pspec.queue {
            ensure(f.class(victim).0 < f.class(preemptor).0, || {
                format!(
                    "{victim} (priority {}) preempted by {preemptor} (priority {}) of the same queue",
                    f.class(victim).0,
                    f.class(preemptor).0
                )
            })?;
        } else {
            *taken.entry((vq, f.run_model(run))).or_default() += Facts::run_gpus(run);
        }
    }
    // Borrowing is judged on what running jobs held before the plan: jobs
    // the plan places or lets wait never expose another queue's running job.
    for ((queue, model), gpus) in taken {
        let was = before.get(&(queue, model)).copied().unwrap_or(0);
        let guaranteed = f.guaranteed(queue, model);
        let left = was.checked_sub(gpus);
        ensure(left.is_some_and(|l| l >= guaranteed), || {
            format!(
                "queue {queue} {model}: running jobs held {was} before the plan, guaranteed {guaranteed}, but other queues preempt {gpus} of it"
            )
        })?;
    }
    Ok(())
}

/// 6. A preemption makes its preemptor fit: with every victim gone, only the
///    runs plus the preemptor in Git, and the preemptor restricted to its
///    victims' GPU model, the preemptor is placed.
fn preemption_makes_room(case: &Case) -> Result<(), TestCaseError> {
    let plan = case.plan();
    let facts = Facts::new(case);
    let pairs = preempts(&plan);
    let victims: BTreeSet<&str> = pairs.iter().map(|(v, _)| *v).collect();
    let preemptors: BTreeSet<&str> = pairs.iter().map(|(_, p)| *p).collect();
    for preemptor in preemptors {
        let mut next = case.clone();
        next.observed
            .running
            .retain(|r| !victims.contains(r.job.as_str()));
        let keep: BTreeSet<&str> = next
            .observed
            .running
            .iter()
            .map(|r| r.job.as_str())
            .chain([preemptor])
            .collect();
        next.fleet.jobs.retain(|j| keep.contains(j.name()));
        // Only the victims' model: on another model the preemptor might now
        // (rightly) wait for a scale-up that other pending jobs had claimed.
        let model = pairs
            .iter()
            .find(|(_, p)| *p == preemptor)
            .and_then(|(v, _)| facts.running.get(v))
            .map(|r| facts.run_model(r).to_string());
        if let (Some(model), Some(job)) = (
            model,
            next.fleet.jobs.iter_mut().find(|j| j.name() == preemptor),
        ) {
            job.spec.gpu = Some(GpuSelector {
                models: vec![model],
            });
        }
        let after = next.plan();
        if !places(&after).iter().any(|(j, _)| *j == preemptor) {
            return Err(TestCaseError::fail(format!(
                "{preemptor} preempted {victims:?} but does not fit once they are gone\nfirst {}\nfollow-up input:{}\nfollow-up {}",
                describe_plan(&plan),
                describe(&next.fleet, &next.observed),
                describe_plan(&after)
            )));
        }
    }
    Ok(())
}

/// 7. Scaling stays within bounds and never removes a busy node.
fn scaling_bounds(f: &Facts, plan: &Plan) -> Result<(), String> {
    let placed_nodes: BTreeSet<&str> = places(plan)
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.node.as_str()))
        .collect();
    for action in &plan.actions {
        let Action::Scale {
            pool,
            from,
            to,
            nodes,
            ..
        } = action
        else {
            continue;
        };
        let Some(spec) = f.case.fleet.pools.iter().find(|p| p.name() == pool) else {
            return Err(format!("scale of unknown pool {pool}"));
        };
        let observed = f
            .case
            .observed
            .nodes
            .iter()
            .filter(|n| n.pool.as_deref() == Some(pool.as_str()))
            .count() as u32;
        ensure(*from == observed, || {
            format!("scale {pool}: from {from}, but {observed} nodes observed")
        })?;
        if to > from {
            ensure(*to <= spec.spec.size.max, || {
                format!("scale {pool} up to {to}, above max {}", spec.spec.size.max)
            })?;
            ensure(nodes.is_empty(), || {
                format!("scale-up of {pool} names nodes")
            })?;
        } else {
            ensure(to < from, || {
                format!("scale {pool} {from}->{to} is no change")
            })?;
            ensure(*to >= spec.spec.size.min, || {
                format!(
                    "scale {pool} down to {to}, below min {}",
                    spec.spec.size.min
                )
            })?;
            ensure(nodes.len() as u32 == from - to, || {
                format!("scale {pool} {from}->{to} removes {nodes:?}")
            })?;
            for n in nodes {
                let Some(node) = f.nodes.get(n.as_str()) else {
                    return Err(format!("scale-down of {pool} removes unknown node {n}"));
                };
                ensure(node.pool.as_deref() == Some(pool.as_str()), || {
                    format!("scale-down of {pool} removes {n} of another pool")
                })?;
                let busy: Vec<&str> = f
                    .case
                    .observed
                    .running
                    .iter()
                    .filter(|r| r.placement.iter().any(|p| &p.node == n))
                    .map(|r| r.job.as_str())
                    .collect();
                ensure(busy.is_empty(), || {
                    format!("scale-down of {pool} removes {n}, where {busy:?} run")
                })?;
                ensure(!placed_nodes.contains(n.as_str()), || {
                    format!("scale-down of {pool} removes {n}, where this plan places a job")
                })?;
            }
        }
    }
    Ok(())
}

/// 8. Determinism: the same input, or the same input in another order, gives
///    byte-identical JSON.
fn deterministic(case: &Case, seed: u64) -> Result<(), TestCaseError> {
    let json = |p: &Plan| serde_json::to_string(p).expect("plan serializes");
    let first = json(&case.plan());
    let again = json(&case.plan());
    prop_assert_eq!(&first, &again, "planning twice differs");
    let other = shuffled(case, seed);
    let reordered = json(&other.plan());
    prop_assert_eq!(
        &first,
        &reordered,
        "reordered input plans differently; reordered input:{}",
        describe(&other.fleet, &other.observed)
    );
    Ok(())
}

/// 9. Every Git job that is not running is placed or pending (with a
///    reason), pending jobs appear once, and running jobs neither.
fn every_job_accounted_for(f: &Facts, plan: &Plan) -> Result<(), String> {
    let placed: BTreeSet<&str> = places(plan).iter().map(|(j, _)| *j).collect();
    let mut pending = BTreeSet::new();
    for p in &plan.pending {
        ensure(pending.insert(&*p.job), || {
            format!("{} is pending twice", p.job)
        })?;
        ensure(!p.reason.trim().is_empty(), || {
            format!("{} is pending without a reason", p.job)
        })?;
        ensure(f.jobs.contains_key(&*p.job), || {
            format!("{} is pending but not in Git", p.job)
        })?;
        ensure(!f.running.contains_key(&*p.job), || {
            format!("{} is pending but running", p.job)
        })?;
    }
    for job in f.jobs.keys() {
        if f.running.contains_key(job) {
            continue;
        }
        ensure(placed.contains(job) || pending.contains(job), || {
            format!("{job} is neither running, placed nor pending")
        })?;
    }
    ensure(
        plan.summary.pending_jobs == plan.pending.len() as u64,
        || "summary.pending_jobs differs from the pending list".to_string(),
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn p1_no_gpu_is_given_twice(case in cases()) {
        check(&case, no_gpu_given_twice)?;
    }

    #[test]
    fn p2_gangs_are_all_or_nothing(case in cases()) {
        check(&case, gangs_all_or_nothing)?;
    }

    #[test]
    fn p3_required_topology_is_respected(case in cases()) {
        check(&case, required_topology)?;
    }

    #[test]
    fn p4_placements_stay_within_limits(case in cases()) {
        check(&case, quotas_hold)?;
    }

    #[test]
    fn p5_preemption_respects_guarantees(case in cases()) {
        check(&case, guarantees_hold)?;
    }

    #[test]
    fn p6_preemption_makes_the_preemptor_fit(case in cases()) {
        preemption_makes_room(&case)?;
    }

    #[test]
    fn p7_scaling_stays_within_bounds(case in cases()) {
        check(&case, scaling_bounds)?;
    }

    #[test]
    fn p8_plans_are_deterministic(case in cases(), seed in any::<u64>()) {
        deterministic(&case, seed)?;
    }

    #[test]
    fn p9_every_job_is_accounted_for(case in cases()) {
        check(&case, every_job_accounted_for)?;
    }
}

/// The generator makes fleets that `validate` accepts.
#[test]
fn generated_fleets_are_valid() {
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 24,
        ..config()
    });
    runner
        .run(&cases(), |case| {
            let yaml = support::to_yaml(&case.fleet);
            let loaded = reconciler::load::load_fleet(&[reconciler::load::SourceFile::new(
                "gen.yaml", yaml,
            )]);
            let errors: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
            prop_assert!(errors.is_empty(), "invalid fleet: {errors:#?}");
            Ok(())
        })
        .unwrap();
}

/// The generator reaches the interesting parts of the engine.
#[test]
fn generated_cases_exercise_the_engine() {
    let mut runner = TestRunner::new(ProptestConfig {
        rng_seed: RngSeed::Fixed(7),
        ..config()
    });
    let mut seen: BTreeMap<&'static str, u32> = BTreeMap::new();
    let total = 200;
    for _ in 0..total {
        let case = cases().new_tree(&mut runner).expect("generate").current();
        let plan = case.plan();
        let mut note = |what: &'static str, cond: bool| {
            if cond {
                *seen.entry(what).or_default() += 1;
            }
        };
        let has = |kind: &str| plan.actions.iter().any(|a| a.kind() == kind);
        let waiting = |w: &str| {
            plan.pending
                .iter()
                .any(|p| p.waiting_for.as_deref() == Some(w))
        };
        note("place", has("place"));
        note("preempt", has("preempt"));
        note(
            "scale-up",
            plan.actions
                .iter()
                .any(|a| matches!(a, Action::Scale { from, to, .. } if to > from)),
        );
        note(
            "scale-down",
            plan.actions
                .iter()
                .any(|a| matches!(a, Action::Scale { from, to, .. } if to < from)),
        );
        note("drain", has("drain"));
        note("terminate", has("terminate"));
        note("cancel", has("cancel"));
        note("pending quota", waiting("quota"));
        note("pending resources", waiting("resources"));
        note("pending preemption", waiting("preemption"));
        note(
            "backfill",
            plan.actions
                .iter()
                .any(|a| matches!(a, Action::Place { reason, .. } if reason.contains("backfill"))),
        );
        note("running", !case.observed.running.is_empty());
    }
    eprintln!("coverage over {total} cases: {seen:?}");
    for what in [
        "place",
        "preempt",
        "scale-up",
        "scale-down",
        "drain",
        "terminate",
        "cancel",
        "pending quota",
        "pending resources",
        "pending preemption",
        "running",
    ] {
        let n = seen.get(what).copied().unwrap_or(0);
        assert!(n >= 3, "only {n} of {total} cases have {what}: {seen:?}");
    }
}

// ---------------------------------------------------------------------------
// Engine bugs found by the properties, as minimal regression tests
// ---------------------------------------------------------------------------

mod regressions {
    use super::*;
    use reconciler::observed::{ObservedState, pool_node};
    use reconciler::spec::{
        Fleet, ModelQuota, NodePoolSpec, NvLink, PoolGpu, PoolSize, PriorityClassSpec,
    };
    use support::{ago, object};

    fn job(queue: &str, replicas: u32, per_replica: u32) -> JobSpec {
        JobSpec {
            queue: queue.to_string(),
            priority_class: None,
            replicas,
            gpus_per_replica: per_replica,
            gpu: None,
            topology: None,
            time_limit: None,
            command: vec!["train".to_string()],
            image: None,
            env: BTreeMap::new(),
            kubernetes: None,
            slurm: None,
        }
    }

    fn queue(weight: u32, guaranteed: u32) -> QueueSpec {
        QueueSpec {
            parent: None,
            weight,
            quota: vec![ModelQuota {
                model: "A100".to_string(),
                guaranteed,
                limit: None,
            }],
            ordering: None,
        }
    }

    fn run(job: &str, node: &str, gpus: &[u32]) -> RunningJob {
        RunningJob {
            job: job.to_string(),
            started: ago(60),
            placement: vec![NodeGpus {
                node: node.to_string(),
                gpus: gpus.to_vec(),
            }],
            preempting_since: None,
            preempted_for: None,
            restart: None,
            spec_digest: None,
        }
    }

    /// Pending jobs waiting for a scale-up are charged to their queue, and
    /// that charge counts as usage when deciding whether the queue is
    /// borrowing: a running job inside its queue's guarantee is reclaimed by
    /// another queue (DESIGN.md §2 Scheduling rule 5: "A job inside its
    /// queue's guaranteed usage is never preempted by another queue's job").
    ///
    /// Pool p: 2 nodes × 4 A100 (max 3). Queue a (weight 8) is guaranteed 4
    /// and runs `a-run` (4 GPUs on p-0): exactly its guarantee. Queue b is
    /// guaranteed 8 and runs `b-run` (1 GPU on p-1). `a-next` (1×4, queue a)
    /// comes first in fair share and waits for the third node; the engine now
    /// counts queue a as using 8 ("borrowing 4"). `b-next` (1×4, queue b)
    /// cannot fit, the only new node is promised, so it reclaims from a and
    /// preempts `a-run`, leaving queue a with nothing running under a
    /// guarantee of 4.
    #[test]
    fn scale_up_claims_do_not_make_a_queue_borrowing() {
        let pool = NodePoolSpec {
            gpu: PoolGpu {
                model: "A100".to_string(),
                count: 4,
                memory_gib: None,
            },
            nvlink: NvLink::Full,
            size: PoolSize { min: 2, max: 3 },
            nodes_per_rack: None,
            labels: BTreeMap::new(),
            scale_down_after: None,
        };
        let nodes = vec![pool_node("p", &pool, 0), pool_node("p", &pool, 1)];
        let fleet = Fleet {
            pools: vec![object("p", pool)],
            queues: vec![object("a", queue(8, 4)), object("b", queue(1, 8))],
            priority_classes: vec![object(
                "normal",
                PriorityClassSpec {
                    value: 0,
                    preemptible: true,
                    grace_period: Default::default(),
                    default: true,
                    description: None,
                },
            )],
            jobs: vec![
                object("a-run", job("a", 1, 4)),
                object("a-next", job("a", 1, 4)),
                object("b-run", job("b", 1, 1)),
                object("b-next", job("b", 1, 4)),
            ],
            policies: Vec::new(),
        };
        let observed = ObservedState {
            nodes,
            running: vec![
                run("a-run", "p-0", &[0, 1, 2, 3]),
                run("b-run", "p-1", &[0]),
            ],
            ..ObservedState::default()
        };
        let plan = plan_at(&fleet, &observed);
        let preempted: Vec<(&str, &str)> = preempts(&plan);
        assert!(
            preempted.is_empty(),
            "queue a runs exactly its guarantee (4 A100), yet {preempted:?} are preempted for queue b\n{}",
            describe_plan(&plan)
        );
    }

    /// A running job whose replicas sit on one node (one placement entry per
    /// replica, as the engine's own `place` actions write them) is listed
    /// once per entry in the victim search's per-node index, so the search
    /// can choose it twice: the plan preempts it twice, names it twice in the
    /// preemptor's pending reason, and releases its quota usage twice.
    ///
    /// One node of 4 A100 in one queue: `a` and `b` (priority 0) each run
    /// 2×1 on it; `big` (priority 10, 1×3) needs both.
    #[test]
    fn a_victim_with_two_replicas_on_one_node_is_preempted_once() {
        let pool = NodePoolSpec {
            gpu: PoolGpu {
                model: "A100".to_string(),
                count: 4,
                memory_gib: None,
            },
            nvlink: NvLink::Full,
            size: PoolSize { min: 1, max: 1 },
            nodes_per_rack: None,
            labels: BTreeMap::new(),
            scale_down_after: None,
        };
        let class = |value: i32, default: bool| PriorityClassSpec {
            value,
            preemptible: true,
            grace_period: Default::default(),
            default,
            description: None,
        };
        let mut big = job("q", 1, 3);
        big.priority_class = Some("high".to_string());
        let fleet = Fleet {
            pools: vec![object("p", pool.clone())],
            queues: vec![object("q", queue(1, 0))],
            priority_classes: vec![
                object("low", class(0, true)),
                object("high", class(10, false)),
            ],
            jobs: vec![
                object("a", job("q", 2, 1)),
                object("b", job("q", 2, 1)),
                object("big", big),
            ],
            policies: Vec::new(),
        };
        let two_entries = |name: &str, first: u32| RunningJob {
            placement: vec![
                NodeGpus {
                    node: "p-0".to_string(),
                    gpus: vec![first],
                },
                NodeGpus {
                    node: "p-0".to_string(),
                    gpus: vec![first + 1],
                },
            ],
            ..run(name, "p-0", &[])
        };
        let observed = ObservedState {
            nodes: vec![pool_node("p", &pool, 0)],
            running: vec![two_entries("a", 0), two_entries("b", 2)],
            ..ObservedState::default()
        };
        let plan = plan_at(&fleet, &observed);
        let mut victims: Vec<&str> = preempts(&plan).iter().map(|(v, _)| *v).collect();
        victims.sort_unstable();
        assert_eq!(victims, ["a", "b"], "\n{}", describe_plan(&plan));
    }

    /// The same duplicate makes the engine panic: when the search has chosen
    /// one victim three times and a second one once, and the second alone is
    /// enough, the minimisation loop drops all three copies of the first at
    /// once and then indexes past the end of the shortened list
    /// (`preemption.rs`, `chosen[k]`: "index out of bounds"). DESIGN.md §5:
    /// bad input never panics — and this input is not even bad.
    ///
    /// One node of 8 A100 in one queue: `a` (priority 0, 3×1) and `b`
    /// (priority 0, 1×5) fill it; `big` (priority 10, 1×4) needs `b`.
    #[test]
    fn victim_search_does_not_panic_on_a_multi_replica_victim() {
        let pool = NodePoolSpec {
            gpu: PoolGpu {
                model: "A100".to_string(),
                count: 8,
                memory_gib: None,
            },
            nvlink: NvLink::Full,
            size: PoolSize { min: 1, max: 1 },
            nodes_per_rack: None,
            labels: BTreeMap::new(),
            scale_down_after: None,
        };
        let class = |value: i32, default: bool| PriorityClassSpec {
            value,
            preemptible: true,
            grace_period: Default::default(),
            default,
            description: None,
        };
        let mut big = job("q", 1, 4);
        big.priority_class = Some("high".to_string());
        let fleet = Fleet {
            pools: vec![object("p", pool.clone())],
            queues: vec![object("q", queue(1, 0))],
            priority_classes: vec![
                object("low", class(0, true)),
                object("high", class(10, false)),
            ],
            jobs: vec![
                object("a", job("q", 3, 1)),
                object("b", job("q", 1, 5)),
                object("big", big),
            ],
            policies: Vec::new(),
        };
        let a = RunningJob {
            placement: (0..3)
                .map(|g| NodeGpus {
                    node: "p-0".to_string(),
                    gpus: vec![g],
                })
                .collect(),
            ..run("a", "p-0", &[])
        };
        let observed = ObservedState {
            nodes: vec![pool_node("p", &pool, 0)],
            running: vec![a, run("b", "p-0", &[3, 4, 5, 6, 7])],
            ..ObservedState::default()
        };
        let plan = plan_at(&fleet, &observed);
        let victims: Vec<&str> = preempts(&plan).iter().map(|(v, _)| *v).collect();
        assert_eq!(victims, ["b"], "\n{}", describe_plan(&plan));
    }
}
