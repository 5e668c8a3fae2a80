//! The job table: every Job in Git with its resolved queue, priority class
//! and acceptable models.

use rustc_hash::FxHashMap as HashMap;

use model::observed::{QueuedJob, Timestamp};
use model::spec::{Duration, Fleet, JobSpec, Object, TopologyLevel};

use super::ids::{JobId, ModelId, Models, QueueId};
use super::quota::QueueTree;

/// A Job with everything the engine needs resolved.
#[derive(Debug, Clone)]
pub struct JobInfo<'a> {
    /// Job name.
    pub name: &'a str,
    /// The spec.
    pub spec: &'a JobSpec,
    /// The whole document (annotations: `gitfleet/restart`).
    pub object: &'a Object<JobSpec>,
    /// Its leaf queue (`None`: unknown or not a leaf).
    pub queue: Option<QueueId>,
    /// Priority value (0 without a class).
    pub priority: i32,
    /// Priority class name, when any.
    pub class: Option<&'a str>,
    /// Whether it may be preempted.
    pub preemptible: bool,
    /// Grace period when preempted.
    pub grace: Duration,
    /// Acceptable models in order of preference (shared: most jobs accept any).
    pub models: std::rc::Rc<[ModelId]>,
    /// First seen pending (age).
    pub first_seen: Option<Timestamp>,
    /// Total GPUs of the gang.
    pub gpus: u64,
    /// Replicas (copied from the spec, as the fields below: the engine's
    /// hot loop then reads the table only).
    pub replicas: u32,
    /// GPUs per replica.
    pub per_replica: u32,
    /// Time limit.
    pub time_limit: Option<Duration>,
    /// Required topology level.
    pub required: Option<TopologyLevel>,
    /// Preferred topology level.
    pub preferred: Option<TopologyLevel>,
    /// In a `least-attained` leaf: its attained service and tier
    /// ([`crate::attained`]); `None` elsewhere.
    pub attained: Option<crate::attained::Attained>,
}

/// Builds the job table (in document order) and a name index. `queued`
/// gives first-seen times (the last entry of a name wins).
pub fn job_table<'a>(
    fleet: &'a Fleet,
    tree: &QueueTree,
    models: &mut Models,
    queued: &[QueuedJob],
) -> (Vec<JobInfo<'a>>, HashMap<&'a str, JobId>) {
    let default_class = fleet.priority_classes.iter().find(|c| c.spec.default);
    // Few classes: a scan beats hashing every job's class name.
    let classes: Vec<(&str, &model::spec::PriorityClassSpec)> = fleet
        .priority_classes
        .iter()
        .map(|c| (c.name(), &c.spec))
        .collect();
    // Models without a selector: every pool model, by name.
    let mut any_models: Vec<&str> = fleet.pool_models();
    any_models.sort_unstable();
    let any: std::rc::Rc<[ModelId]> = any_models.iter().map(|m| models.intern(m)).collect();
    // Selector lists are few: share one allocation per distinct list.
    let mut selectors: Vec<std::rc::Rc<[ModelId]>> = Vec::new();

    // Document order: nothing downstream depends on the table's order (fair
    // share sorts by priority, age and name), and a duplicate name — which
    // validation rejects — keeps its first document.
    let mut index: HashMap<&'a str, JobId> = HashMap::default();
    index.reserve(fleet.jobs.len());
    let mut jobs: Vec<JobInfo> = Vec::with_capacity(fleet.jobs.len());
    for job in &fleet.jobs {
        match index.entry(job.name()) {
            std::collections::hash_map::Entry::Occupied(_) => continue,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(jobs.len() as JobId);
            }
        }
        let spec = &job.spec;
        let class_name = spec
            .priority_class
            .as_deref()
            .or(default_class.map(|c| c.name()));
        let class = class_name.and_then(|c| {
            classes
                .iter()
                .find(|(name, _)| *name == c)
                .map(|(_, spec)| *spec)
        });
        let queue = tree.id(&spec.queue).filter(|q| tree.is_leaf(*q));
        let models_ok: std::rc::Rc<[ModelId]> = match &spec.gpu {
            Some(sel) if !sel.models.is_empty() => {
                let mut ids = Vec::with_capacity(sel.models.len());
                for m in &sel.models {
                    let id = models.intern(m);
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                match selectors.iter().find(|s| s[..] == ids[..]) {
                    Some(shared) => shared.clone(),
                    None => {
                        let shared: std::rc::Rc<[ModelId]> = ids.into();
                        selectors.push(shared.clone());
                        shared
                    }
                }
            }
            _ => any.clone(),
        };
        let topology = spec.topology.unwrap_or_default();
        jobs.push(JobInfo {
            name: job.name(),
            spec,
            object: job,
            queue,
            priority: class.map_or(0, |c| c.value),
            class: class_name.filter(|_| class.is_some()),
            preemptible: class.is_none_or(|c| c.preemptible),
            grace: class.map_or(Duration::default(), |c| c.grace_period),
            models: models_ok,
            first_seen: None,
            gpus: spec.total_gpus(),
            replicas: spec.replicas,
            per_replica: spec.gpus_per_replica,
            time_limit: spec.time_limit,
            required: topology.required.filter(|l| *l != TopologyLevel::None),
            preferred: topology.preferred.filter(|l| *l != TopologyLevel::None),
            attained: None,
        });
    }
    for q in queued {
        if let Some(&j) = index.get(q.job.as_str()) {
            jobs[j as usize].first_seen = Some(q.since);
        }
    }
    (jobs, index)
}
