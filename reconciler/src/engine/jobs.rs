//! The job table: every Job in Git with its resolved queue, priority class
//! and acceptable models.

use rustc_hash::FxHashMap as HashMap;

use crate::observed::Timestamp;
use crate::spec::{Duration, Fleet, JobSpec, TopologyLevel};

use super::ids::{JobId, ModelId, Models, QueueId};
use super::quota::QueueTree;

/// A Job with everything the engine needs resolved.
#[derive(Debug, Clone)]
pub struct JobInfo<'a> {
    /// Job name.
    pub name: &'a str,
    /// The spec.
    pub spec: &'a JobSpec,
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
    /// Required topology level.
    pub required: Option<TopologyLevel>,
    /// Preferred topology level.
    pub preferred: Option<TopologyLevel>,
}

/// Builds the job table (in document order) and a name index.
pub fn job_table<'a>(
    fleet: &'a Fleet,
    tree: &QueueTree,
    models: &mut Models,
    first_seen: &HashMap<&str, Timestamp>,
) -> (Vec<JobInfo<'a>>, HashMap<&'a str, JobId>) {
    let default_class = fleet.priority_classes.iter().find(|c| c.spec.default);
    let classes: HashMap<&str, &crate::spec::PriorityClassSpec> = fleet
        .priority_classes
        .iter()
        .map(|c| (c.name(), &c.spec))
        .collect();
    // Models without a selector: every pool model, by name.
    let mut any_models: Vec<&str> = fleet.pool_models();
    any_models.sort_unstable();
    let any: std::rc::Rc<[ModelId]> = any_models.iter().map(|m| models.intern(m)).collect();

    // Document order: nothing downstream depends on the table's order (fair
    // share sorts by priority, age and name), and a duplicate name — which
    // validation rejects — keeps its first document.
    let mut seen_names: rustc_hash::FxHashSet<&str> = rustc_hash::FxHashSet::default();
    let unique: Vec<&crate::spec::Object<JobSpec>> = fleet
        .jobs
        .iter()
        .filter(|j| seen_names.insert(j.name()))
        .collect();
    let jobs: Vec<JobInfo> = unique
        .into_iter()
        .map(|job| {
            let spec = &job.spec;
            let class_name = spec
                .priority_class
                .as_deref()
                .or(default_class.map(|c| c.name()));
            let class = class_name.and_then(|c| classes.get(c));
            let queue = tree.id(&spec.queue).filter(|q| tree.is_leaf(*q));
            let models_ok: std::rc::Rc<[ModelId]> = match &spec.gpu {
                Some(sel) if !sel.models.is_empty() => {
                    let mut seen = Vec::new();
                    for m in &sel.models {
                        let id = models.intern(m);
                        if !seen.contains(&id) {
                            seen.push(id);
                        }
                    }
                    seen.into()
                }
                _ => any.clone(),
            };
            let topology = spec.topology.unwrap_or_default();
            JobInfo {
                name: job.name(),
                spec,
                queue,
                priority: class.map_or(0, |c| c.value),
                class: class_name.filter(|_| class.is_some()),
                preemptible: class.is_none_or(|c| c.preemptible),
                grace: class.map_or(Duration::default(), |c| c.grace_period),
                models: models_ok,
                first_seen: first_seen.get(job.name()).copied(),
                gpus: spec.total_gpus(),
                required: topology.required.filter(|l| *l != TopologyLevel::None),
                preferred: topology.preferred.filter(|l| *l != TopologyLevel::None),
            }
        })
        .collect();
    let index = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.name, i as JobId))
        .collect();
    (jobs, index)
}
