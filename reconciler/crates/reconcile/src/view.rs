//! The dashboard's view model, built after every iteration from what the
//! loop already has (the fleet in force, the plan, the observed nodes, the
//! job records, the revisions and the audit log's tail). Pure: the per-queue
//! and per-pool metrics ([`metrics`](super::metrics)) are set from the same
//! [`FleetView`], so the page and Prometheus never disagree.
//!
//! Queue counts cover the queue's subtree (a leaf is its own subtree), as
//! quotas do: a parent's use is compared with the parent's quota.

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use dashboard::view::{
    ActionView, FORMAT_VERSION, FleetView, GpuTally, GpuView, MAX_PENDING, NodeView, PendingTally,
    PendingView, PoolView, QueueModel, QueueView, RackView, RevisionsView, StartView,
};
use model::observed::{ObservedNode, Timestamp};
use model::plan::{Action, Plan};
use model::spec::{Fleet, JobSpec};
pub use model::text::natural_cmp;

use crate::state::{AuditEntry, JobRecord, Phase, Revisions};

/// The file the loop writes in the state directory (`gitfleet serve` reads it).
pub const VIEW_FILE: &str = "dashboard.json";

/// Action-log entries kept in the view.
pub const AUDIT_TAIL: usize = 200;

/// What the view is built from.
#[derive(Debug, Clone, Copy)]
pub struct ViewInput<'a> {
    /// The iteration's time.
    pub time: Timestamp,
    /// The executor's name.
    pub executor: &'a str,
    /// The fleet in force (none before the first valid revision).
    pub fleet: Option<&'a Fleet>,
    /// The iteration's plan.
    pub plan: Option<&'a Plan>,
    /// The ready nodes as observed.
    pub nodes: &'a [ObservedNode],
    /// The job records after the iteration.
    pub records: &'a BTreeMap<String, JobRecord>,
    /// Revision bookkeeping.
    pub revisions: &'a Revisions,
    /// The newest audit entries, newest first.
    pub audit: &'a [AuditEntry],
    /// Expected starts of pending jobs (those computed: see
    /// [`crate::starts`]).
    pub starts: &'a BTreeMap<String, StartView>,
}

/// The label of the models a job accepts: the one model, `any`, or several
/// joined by `|` (sorted).
pub fn model_label(spec: &JobSpec) -> String {
    match &spec.gpu {
        Some(sel) if !sel.models.is_empty() => {
            let models: BTreeSet<&str> = sel.models.iter().map(String::as_str).collect();
            models.into_iter().collect::<Vec<_>>().join("|")
        }
        _ => "any".to_string(),
    }
}

fn rfc3339(t: Timestamp) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Builds the view.
pub fn fleet_view(input: &ViewInput<'_>) -> FleetView {
    // Looked up, never walked: a hash table (150,000 jobs on a large fleet).
    let specs: FxHashMap<&str, &JobSpec> = input
        .fleet
        .map(|f| f.jobs.iter().map(|j| (j.name(), &j.spec)).collect())
        .unwrap_or_default();
    // (node, GPU) → running job (looked up, and walked only to count).
    let mut held: FxHashMap<(&str, u32), &str> = FxHashMap::default();
    for record in input.records.values().filter(|r| r.phase == Phase::Running) {
        for part in &record.placement {
            for gpu in &part.gpus {
                held.insert((part.node.as_str(), *gpu), record.job.as_str());
            }
        }
    }
    let queue_of = |job: &str| specs.get(job).map(|s| s.queue.as_str());
    FleetView {
        format_version: FORMAT_VERSION,
        time: rfc3339(input.time),
        executor: input.executor.to_string(),
        revisions: RevisionsView {
            applied: input.revisions.last_applied.clone(),
            attempted: input.revisions.last_attempted.clone(),
            last_error: input.revisions.last_error.clone(),
        },
        queues: queues(input, &specs, &held),
        pools: pools(input, &held, &queue_of),
        pending: input
            .plan
            .map(|plan| {
                plan.pending
                    .iter()
                    .take(MAX_PENDING)
                    .map(|p| {
                        let spec = specs.get(&*p.job);
                        PendingView {
                            job: p.job.to_string(),
                            queue: p.queue.as_deref().unwrap_or_default().to_string(),
                            model: spec.map(|s| model_label(s)).unwrap_or_default(),
                            gpus: spec.map(|s| s.total_gpus()).unwrap_or(0),
                            waiting_for: p.waiting_for.as_deref().unwrap_or("other").to_string(),
                            reason: p.reason.to_string(),
                            expected_start: input.starts.get(&*p.job).cloned(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default(),
        pending_total: input.plan.map_or(0, |p| p.pending.len() as u64),
        actions: input
            .audit
            .iter()
            .map(|a| ActionView {
                time: rfc3339(a.time),
                revision: a.revision.clone(),
                what: a.what.clone(),
                subject: a.subject.clone(),
                detail: a.detail.clone(),
            })
            .collect(),
    }
}

/// The queue tree in depth-first order, siblings by name: (name, parent, depth).
fn tree_order(fleet: &Fleet) -> Vec<(&str, Option<&str>, u32)> {
    let names: BTreeSet<&str> = fleet.queues.iter().map(|q| q.name()).collect();
    let mut children: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
    for q in &fleet.queues {
        // A parent that does not exist is refused by validation; such a
        // queue is shown at the top rather than lost.
        let parent = q.spec.parent.as_deref().filter(|p| names.contains(p));
        children.entry(parent).or_default().push(q.name());
    }
    for list in children.values_mut() {
        list.sort_unstable();
    }
    let mut out = Vec::with_capacity(fleet.queues.len());
    let mut seen: HashSet<&str> = HashSet::new();
    let mut stack: Vec<(&str, Option<&str>, u32)> = children
        .get(&None)
        .map(|roots| roots.iter().rev().map(|r| (*r, None, 0)).collect())
        .unwrap_or_default();
    while let Some((name, parent, depth)) = stack.pop() {
        if !seen.insert(name) {
            continue;
        }
        out.push((name, parent, depth));
        if let Some(kids) = children.get(&Some(name)) {
            stack.extend(kids.iter().rev().map(|k| (*k, Some(name), depth + 1)));
        }
    }
    out
}

/// The GPU models of the fleet: pools declare them, nodes report them,
/// quotas name them.
fn models(input: &ViewInput<'_>) -> BTreeSet<String> {
    // Borrowed while collecting: one copy per model, not per GPU.
    let mut out: BTreeSet<&str> = input
        .nodes
        .iter()
        .flat_map(|n| n.gpus.iter().map(|g| g.model.as_str()))
        .collect();
    if let Some(fleet) = input.fleet {
        out.extend(fleet.pools.iter().map(|p| p.spec.gpu.model.as_str()));
        for q in &fleet.queues {
            out.extend(q.spec.quota.iter().map(|m| m.model.as_str()));
        }
    }
    out.into_iter().map(str::to_string).collect()
}

/// Pending jobs' key: (model label, priority class).
type Key = (String, String);

/// GPUs used by model, and pending (jobs, GPUs) by [`Key`], of one queue.
#[derive(Debug, Default)]
struct Tally<'a> {
    used: BTreeMap<&'a str, u64>,
    pending: BTreeMap<Key, (u64, u64)>,
}

impl<'a> Tally<'a> {
    fn add(&mut self, other: &Tally<'a>) {
        for (model, n) in &other.used {
            *self.used.entry(model).or_default() += n;
        }
        for (key, (jobs, gpus)) in &other.pending {
            let e = self.pending.entry(key.clone()).or_default();
            e.0 += jobs;
            e.1 += gpus;
        }
    }
}

fn queues(
    input: &ViewInput<'_>,
    specs: &FxHashMap<&str, &JobSpec>,
    held: &FxHashMap<(&str, u32), &str>,
) -> Vec<QueueView> {
    let Some(fleet) = input.fleet else {
        return Vec::new();
    };
    let models = models(input);
    let gpu_model: FxHashMap<(&str, u32), &str> = input
        .nodes
        .iter()
        .flat_map(|n| {
            n.gpus
                .iter()
                .map(|g| ((n.name.as_str(), g.index), g.model.as_str()))
        })
        .collect();
    // Each queue's own jobs: GPUs held by model, pending by model and class.
    let mut direct: BTreeMap<&str, Tally<'_>> = BTreeMap::new();
    for (gpu, job) in held {
        let (Some(queue), Some(model)) =
            (specs.get(job).map(|s| s.queue.as_str()), gpu_model.get(gpu))
        else {
            continue;
        };
        *direct
            .entry(queue)
            .or_default()
            .used
            .entry(model)
            .or_default() += 1;
    }
    // Pending jobs counted by what their labels are made of (queue, class
    // named, models asked for) first, so each label is made once per kind
    // of job rather than once per job.
    type Kind<'s> = (&'s str, Option<&'s str>, Option<&'s [String]>);
    let mut kinds: HashMap<Kind<'_>, (&JobSpec, u64, u64)> = HashMap::new();
    for p in input.plan.map(|p| p.pending.as_slice()).unwrap_or_default() {
        let Some(spec) = specs.get(&*p.job) else {
            continue;
        };
        let kind = (
            spec.queue.as_str(),
            spec.priority_class.as_deref(),
            spec.gpu.as_ref().map(|g| g.models.as_slice()),
        );
        let entry = kinds.entry(kind).or_insert((spec, 0, 0));
        entry.1 += 1;
        entry.2 += spec.total_gpus();
    }
    for (spec, jobs, gpus) in kinds.into_values() {
        let class = fleet
            .priority_class_of(spec)
            .map(|c| c.name().to_string())
            .unwrap_or_default();
        let entry = direct
            .entry(spec.queue.as_str())
            .or_default()
            .pending
            .entry((model_label(spec), class))
            .or_default();
        entry.0 += jobs;
        entry.1 += gpus;
    }
    let order = tree_order(fleet);
    let quota: BTreeMap<&str, &model::spec::QueueSpec> =
        fleet.queues.iter().map(|q| (q.name(), &q.spec)).collect();
    // Children before parents: each queue's subtree total goes to its parent.
    let mut totals: BTreeMap<&str, Tally<'_>> = BTreeMap::new();
    for (name, parent, _) in order.iter().rev() {
        let mut mine = totals.remove(name).unwrap_or_default();
        if let Some(own) = direct.get(name) {
            mine.add(own);
        }
        if let Some(parent) = parent {
            totals.entry(parent).or_default().add(&mine);
        }
        totals.insert(name, mine);
    }
    order
        .iter()
        .map(|(name, parent, depth)| {
            let Tally { used, pending } = totals.remove(name).unwrap_or_default();
            let spec = quota.get(name);
            QueueView {
                name: name.to_string(),
                parent: parent.map(str::to_string),
                depth: *depth,
                models: models
                    .iter()
                    .map(|model| {
                        let used = used.get(model.as_str()).copied().unwrap_or(0);
                        let guaranteed = spec.map_or(0, |s| u64::from(s.guaranteed(model)));
                        QueueModel {
                            model: model.clone(),
                            used,
                            guaranteed,
                            limit: spec.and_then(|s| s.limit(model)).map(u64::from),
                            borrowed: used.saturating_sub(guaranteed),
                        }
                    })
                    .collect(),
                pending: pending
                    .into_iter()
                    .map(|((model, priority_class), (jobs, gpus))| PendingTally {
                        model,
                        priority_class,
                        jobs,
                        gpus,
                    })
                    .collect(),
            }
        })
        .collect()
}

fn pools<'a>(
    input: &ViewInput<'a>,
    held: &FxHashMap<(&str, u32), &'a str>,
    queue_of: &dyn Fn(&str) -> Option<&'a str>,
) -> Vec<PoolView> {
    let drained_by_plan: BTreeSet<&str> = input
        .plan
        .map(|p| {
            p.actions
                .iter()
                .filter_map(|a| match a {
                    Action::Drain { node, .. } => Some(node.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let mut pools: BTreeMap<String, PoolView> = BTreeMap::new();
    let mut declared_model: BTreeMap<&str, &str> = BTreeMap::new();
    if let Some(fleet) = input.fleet {
        for p in &fleet.pools {
            declared_model.insert(p.name(), p.spec.gpu.model.as_str());
            pools.insert(
                p.name().to_string(),
                PoolView {
                    name: p.name().to_string(),
                    ..PoolView::default()
                },
            );
        }
    }
    let mut racks: BTreeMap<(String, String), Vec<NodeView>> = BTreeMap::new();
    // By (pool, model) borrowed: no copy of either per GPU.
    let mut tallies: BTreeMap<(&str, &str), GpuTally> = BTreeMap::new();
    for (pool, model) in &declared_model {
        tallies.insert(
            (*pool, *model),
            GpuTally {
                model: model.to_string(),
                ..GpuTally::default()
            },
        );
    }
    for node in input.nodes {
        let pool_name = node.pool.clone().unwrap_or_default();
        let drained =
            drained_by_plan.contains(node.name.as_str()) || node.gpus.iter().any(|g| !g.healthy);
        let pool = pools.entry(pool_name.clone()).or_insert_with(|| PoolView {
            name: pool_name.clone(),
            ..PoolView::default()
        });
        pool.nodes += 1;
        pool.healthy_nodes += u64::from(node.gpus.iter().all(|g| g.healthy));
        pool.drained_nodes += u64::from(drained);
        let mut gpus: Vec<GpuView> = node
            .gpus
            .iter()
            .map(|g| {
                let job = held.get(&(node.name.as_str(), g.index)).copied();
                let t = tallies
                    .entry((node.pool.as_deref().unwrap_or_default(), g.model.as_str()))
                    .or_insert_with(|| GpuTally {
                        model: g.model.clone(),
                        ..GpuTally::default()
                    });
                t.total += 1;
                t.healthy += u64::from(g.healthy);
                t.allocated += u64::from(job.is_some());
                t.drained += u64::from(drained);
                GpuView {
                    index: g.index,
                    model: g.model.clone(),
                    healthy: g.healthy,
                    job: job.map(str::to_string),
                    queue: job.and_then(queue_of).map(str::to_string),
                }
            })
            .collect();
        gpus.sort_by_key(|g| g.index);
        pool.allocated_nodes += u64::from(gpus.iter().any(|g| g.job.is_some()));
        let rack = node.labels.get("rack").cloned().unwrap_or_default();
        racks.entry((pool_name, rack)).or_default().push(NodeView {
            name: node.name.clone(),
            drained,
            gpus,
        });
    }
    for ((pool, model), tally) in tallies {
        let _ = model;
        if let Some(view) = pools.get_mut(pool) {
            view.gpus.push(tally);
        }
    }
    for ((pool, rack), mut nodes) in racks {
        nodes.sort_by(|a, b| natural_cmp(&a.name, &b.name));
        if let Some(view) = pools.get_mut(&pool) {
            view.racks.push(RackView { name: rack, nodes });
        }
    }
    for view in pools.values_mut() {
        view.racks.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    }
    pools.into_values().collect()
}

/// Writes the view to `dir/dashboard.json` atomically (write, then rename).
pub fn write(dir: &Path, view: &FleetView) -> std::io::Result<()> {
    crate::recorded::write_pieces(dir, VIEW_FILE, &[&to_json(view)?, "\n"])
}

/// The text of `dashboard.json` (without its final newline).
pub fn to_json(view: &FleetView) -> std::io::Result<String> {
    serde_json::to_string(view).map_err(std::io::Error::other)
}

/// How [`FleetView::time`] reads for `time`.
pub fn view_time(time: Timestamp) -> String {
    rfc3339(time)
}

/// Reads `dir/dashboard.json`.
pub fn read(dir: &Path) -> std::io::Result<FleetView> {
    let text = std::fs::read_to_string(dir.join(VIEW_FILE))?;
    serde_json::from_str(&text).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::JobRecord;
    use model::observed::{NodeGpus, ObservedGpu};
    use model::plan::Pending;

    const FLEET: &str = r#"
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec: {gpu: {model: H100, count: 4}, size: {min: 2, max: 2}}
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: cloud}
spec: {gpu: {model: H100, count: 4}, size: {min: 0, max: 2}}
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: old}
spec: {gpu: {model: A100, count: 4}, size: {min: 1, max: 1}}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, default: true}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: org}
spec: {quota: [{model: H100, guaranteed: 8, limit: 8}, {model: A100, guaranteed: 4, limit: 4}]}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: b}
spec: {parent: org, quota: [{model: H100, guaranteed: 2, limit: 8}]}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: a}
spec: {parent: org, quota: [{model: H100, guaranteed: 6}, {model: A100, guaranteed: 4, limit: 4}]}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: b-run}
spec: {queue: b, gpusPerReplica: 4}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: a-run}
spec: {queue: a, gpusPerReplica: 2, gpu: {models: [H100]}}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: b-wait}
spec: {queue: b, gpusPerReplica: 4, replicas: 2, gpu: {models: [H100, A100]}}
"#;

    fn fleet() -> Fleet {
        let loaded = load::load_fleet(&[load::SourceFile::new("fleet.yaml", FLEET)]);
        assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    fn node(name: &str, pool: &str, rack: &str, model: &str, unhealthy: &[u32]) -> ObservedNode {
        ObservedNode {
            name: name.into(),
            pool: Some(pool.into()),
            labels: [("rack".to_string(), rack.to_string())].into(),
            idle_since: None,
            gpus: (0..4)
                .map(|index| ObservedGpu {
                    index,
                    model: model.into(),
                    memory_mib: None,
                    healthy: !unhealthy.contains(&index),
                    uuid: None,
                    pci_bus_id: None,
                    nvlink_domain: None,
                    health_reason: None,
                    details: None,
                })
                .collect(),
        }
    }

    fn running(job: &str, node: &str, gpus: &[u32]) -> (String, JobRecord) {
        let t = chrono::DateTime::UNIX_EPOCH;
        let mut r = JobRecord::new_pending(job, t);
        r.phase = Phase::Running;
        r.placement = vec![NodeGpus {
            node: node.into(),
            gpus: gpus.to_vec(),
        }];
        (job.to_string(), r)
    }

    fn build(fleet: &Fleet) -> FleetView {
        let nodes = vec![
            node("p-10", "p", "r1", "H100", &[]),
            node("p-2", "p", "r1", "H100", &[3]),
            node("old-0", "old", "r9", "A100", &[]),
        ];
        let records: BTreeMap<String, JobRecord> = [
            running("b-run", "p-10", &[0, 1, 2, 3]),
            running("a-run", "p-2", &[0, 1]),
        ]
        .into();
        let plan = Plan {
            revision: None,
            time: String::new(),
            actions: vec![Action::Drain {
                node: "p-2".into(),
                reason: "GPU 3 unhealthy".into(),
            }],
            pending: vec![Pending {
                job: "b-wait".into(),
                reason: "queue b is at its limit".into(),
                queue: Some("b".into()),
                waiting_for: Some("quota".into()),
            }],
            summary: Default::default(),
            drift: Vec::new(),
        };
        let revisions = Revisions {
            last_applied: Some("abc".into()),
            ..Revisions::default()
        };
        fleet_view(&ViewInput {
            time: chrono::DateTime::UNIX_EPOCH,
            executor: "sim",
            fleet: Some(fleet),
            plan: Some(&plan),
            nodes: &nodes,
            records: &records,
            revisions: &revisions,
            audit: &[],
            starts: &BTreeMap::from([(
                "b-wait".to_string(),
                StartView {
                    status: "unknown".into(),
                    at: None,
                    text: "unknown: a-run runs without a time limit".into(),
                },
            )]),
        })
    }

    fn usage(view: &FleetView, queue: &str, model: &str) -> QueueModel {
        view.queues
            .iter()
            .find(|q| q.name == queue)
            .and_then(|q| q.models.iter().find(|m| m.model == model))
            .cloned()
            .unwrap()
    }

    #[test]
    fn queues_come_in_tree_order_with_subtree_usage_and_borrowing() {
        let fleet = fleet();
        let view = build(&fleet);
        let order: Vec<(&str, u32)> = view
            .queues
            .iter()
            .map(|q| (q.name.as_str(), q.depth))
            .collect();
        assert_eq!(order, [("org", 0), ("a", 1), ("b", 1)]);
        let b = usage(&view, "b", "H100");
        assert_eq!(
            (b.used, b.guaranteed, b.limit, b.borrowed),
            (4, 2, Some(8), 2)
        );
        let a = usage(&view, "a", "H100");
        assert_eq!((a.used, a.guaranteed, a.limit, a.borrowed), (2, 6, None, 0));
        let org = usage(&view, "org", "H100");
        assert_eq!(
            (org.used, org.guaranteed, org.limit, org.borrowed),
            (6, 8, Some(8), 0)
        );
        let a100 = usage(&view, "b", "A100");
        assert_eq!((a100.used, a100.guaranteed, a100.limit), (0, 0, None));
    }

    #[test]
    fn pending_jobs_count_in_their_queue_and_its_ancestors_by_accepted_models() {
        let fleet = fleet();
        let view = build(&fleet);
        let tally = PendingTally {
            model: "A100|H100".into(),
            priority_class: "normal".into(),
            jobs: 1,
            gpus: 8,
        };
        for queue in ["b", "org"] {
            let q = view.queues.iter().find(|q| q.name == queue).unwrap();
            assert_eq!(q.pending, std::slice::from_ref(&tally), "{queue}");
        }
        assert!(
            view.queues
                .iter()
                .find(|q| q.name == "a")
                .unwrap()
                .pending
                .is_empty()
        );
        assert_eq!(view.pending[0].model, "A100|H100");
        assert_eq!(view.pending[0].gpus, 8);
        assert_eq!(view.pending[0].waiting_for, "quota");
        let start = view.pending[0].expected_start.as_ref().unwrap();
        assert_eq!(start.status, "unknown");
    }

    #[test]
    fn pending_jobs_of_kinds_that_read_alike_count_together() {
        // Written differently (class named or by default, models in
        // another order), the same labels: one tally, jobs and GPUs summed.
        let text = format!(
            "{FLEET}---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: b-two}}\nspec: {{queue: b, priorityClass: normal, gpusPerReplica: 2, gpu: {{models: [A100, H100]}}}}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: b-three}}\nspec: {{queue: b, gpusPerReplica: 3}}\n"
        );
        let loaded = load::load_fleet(&[load::SourceFile::new("fleet.yaml", text.as_str())]);
        assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
        let fleet = loaded.fleet;
        let pending = |job: &str| Pending {
            job: job.into(),
            reason: "queue b is at its limit".into(),
            queue: Some("b".into()),
            waiting_for: Some("quota".into()),
        };
        let plan = Plan {
            revision: None,
            time: String::new(),
            actions: Vec::new(),
            pending: vec![pending("b-wait"), pending("b-three"), pending("b-two")],
            summary: Default::default(),
            drift: Vec::new(),
        };
        let view = fleet_view(&ViewInput {
            time: chrono::DateTime::UNIX_EPOCH,
            executor: "sim",
            fleet: Some(&fleet),
            plan: Some(&plan),
            nodes: &[],
            records: &BTreeMap::new(),
            revisions: &Revisions::default(),
            audit: &[],
            starts: &BTreeMap::new(),
        });
        let tally = |model: &str, jobs, gpus| PendingTally {
            model: model.into(),
            priority_class: "normal".into(),
            jobs,
            gpus,
        };
        let expected = [tally("A100|H100", 2, 10), tally("any", 1, 3)];
        for queue in ["b", "org"] {
            let q = view.queues.iter().find(|q| q.name == queue).unwrap();
            assert_eq!(q.pending, expected, "{queue}");
        }
    }

    #[test]
    fn pools_count_nodes_and_gpus_healthy_allocated_drained() {
        let fleet = fleet();
        let view = build(&fleet);
        let names: Vec<&str> = view.pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["cloud", "old", "p"]);
        let p = &view.pools[2];
        assert_eq!(
            (p.nodes, p.healthy_nodes, p.drained_nodes, p.allocated_nodes),
            (2, 1, 1, 2)
        );
        assert_eq!(
            p.gpus,
            [GpuTally {
                model: "H100".into(),
                total: 8,
                healthy: 7,
                allocated: 6,
                drained: 4,
            }]
        );
        // A declared pool without nodes is there, at zero.
        let cloud = &view.pools[0];
        assert_eq!((cloud.nodes, cloud.gpus[0].total), (0, 0));
        // Nodes in natural order, GPUs coloured by their job's queue.
        let nodes: Vec<&str> = p.racks[0].nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(nodes, ["p-2", "p-10"]);
        let p2 = &p.racks[0].nodes[0];
        assert!(p2.drained);
        assert_eq!(p2.gpus[0].queue.as_deref(), Some("a"));
        assert_eq!(p2.gpus[2].job, None);
        assert!(!p2.gpus[3].healthy);
    }

    #[test]
    fn without_a_fleet_there_are_no_queues_but_nodes_still_show() {
        let nodes = vec![node("x-1", "x", "r", "H100", &[])];
        let view = fleet_view(&ViewInput {
            time: chrono::DateTime::UNIX_EPOCH,
            executor: "sim",
            fleet: None,
            plan: None,
            nodes: &nodes,
            records: &BTreeMap::new(),
            revisions: &Revisions::default(),
            audit: &[],
            starts: &BTreeMap::new(),
        });
        assert!(view.queues.is_empty() && view.pending.is_empty());
        assert_eq!(view.pools[0].nodes, 1);
    }
}
