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

/// What the job table holds of a job besides its document: everything
/// [`JobInfo`] has but the references into the fleet, so that a
/// [`crate::Planner`] can keep it from one plan to the next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobFacts {
    queue: Option<QueueId>,
    priority: i32,
    class: ClassName,
    preemptible: bool,
    grace: Duration,
    /// Its models: an index into the table's selections.
    models: u32,
    first_seen: Option<Timestamp>,
    gpus: u64,
    replicas: u32,
    per_replica: u32,
    time_limit: Option<Duration>,
    required: Option<TopologyLevel>,
    preferred: Option<TopologyLevel>,
}

/// Where a job's priority class name comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ClassName {
    /// No class (none named and no default, or the one named is unknown).
    None,
    /// The one its spec names.
    Named,
    /// The fleet's default class.
    Default,
}

impl<'a> JobInfo<'a> {
    /// The job `object` with `facts` (from `context`'s [`JobContext::facts`]).
    fn new(object: &'a Object<JobSpec>, facts: &JobFacts, context: &JobContext<'a>) -> Self {
        let spec = &object.spec;
        let JobFacts {
            queue,
            priority,
            class,
            preemptible,
            grace,
            models,
            first_seen,
            gpus,
            replicas,
            per_replica,
            time_limit,
            required,
            preferred,
        } = facts;
        JobInfo {
            name: object.name(),
            spec,
            object,
            queue: *queue,
            priority: *priority,
            class: match class {
                ClassName::None => None,
                ClassName::Named => spec.priority_class.as_deref(),
                ClassName::Default => context.default_class,
            },
            preemptible: *preemptible,
            grace: *grace,
            models: context.selections[*models as usize].clone(),
            first_seen: *first_seen,
            gpus: *gpus,
            replicas: *replicas,
            per_replica: *per_replica,
            time_limit: *time_limit,
            required: *required,
            preferred: *preferred,
            attained: None,
        }
    }
}

/// What resolving a job's facts needs from the rest of the fleet.
struct JobContext<'f> {
    default_class: Option<&'f str>,
    /// Few classes: a scan beats hashing every job's class name.
    classes: Vec<(&'f str, &'f model::spec::PriorityClassSpec)>,
    /// The distinct lists of models jobs accept (few: one allocation
    /// each), the first for jobs without a selector: every pool model, by
    /// name.
    selections: Vec<std::rc::Rc<[ModelId]>>,
}

impl<'f> JobContext<'f> {
    /// Interns the pool models into `models` (as the table always has).
    fn new(fleet: &'f Fleet, models: &mut Models) -> Self {
        let mut any_models: Vec<&str> = fleet.pool_models();
        any_models.sort_unstable();
        JobContext {
            default_class: fleet
                .priority_classes
                .iter()
                .find(|c| c.spec.default)
                .map(|c| c.name()),
            classes: fleet
                .priority_classes
                .iter()
                .map(|c| (c.name(), &c.spec))
                .collect(),
            selections: vec![any_models.iter().map(|m| models.intern(m)).collect()],
        }
    }

    /// The facts of `spec` (no first-seen time), interning the models its
    /// selector names.
    fn facts(&mut self, spec: &JobSpec, tree: &QueueTree, models: &mut Models) -> JobFacts {
        let named = spec.priority_class.as_deref();
        let class_name = named.or(self.default_class);
        let class = class_name.and_then(|c| {
            self.classes
                .iter()
                .find(|(name, _)| *name == c)
                .map(|(_, spec)| *spec)
        });
        let queue = tree.id(&spec.queue).filter(|q| tree.is_leaf(*q));
        let selection = match &spec.gpu {
            Some(sel) if !sel.models.is_empty() => {
                let mut ids = Vec::with_capacity(sel.models.len());
                for m in &sel.models {
                    let id = models.intern(m);
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                // The list without a selector is shared only by jobs
                // without one (as it always was).
                match self.selections[1..].iter().position(|s| s[..] == ids[..]) {
                    Some(k) => k + 1,
                    None => {
                        self.selections.push(ids.into());
                        self.selections.len() - 1
                    }
                }
            }
            _ => 0,
        };
        let topology = spec.topology.unwrap_or_default();
        JobFacts {
            queue,
            priority: class.map_or(0, |c| c.value),
            class: match (class, named) {
                (None, _) => ClassName::None,
                (Some(_), Some(_)) => ClassName::Named,
                (Some(_), None) => ClassName::Default,
            },
            preemptible: class.is_none_or(|c| c.preemptible),
            grace: class.map_or(Duration::default(), |c| c.grace_period),
            models: selection as u32,
            first_seen: None,
            gpus: spec.total_gpus(),
            replicas: spec.replicas,
            per_replica: spec.gpus_per_replica,
            time_limit: spec.time_limit,
            required: topology.required.filter(|l| *l != TopologyLevel::None),
            preferred: topology.preferred.filter(|l| *l != TopologyLevel::None),
        }
    }
}

/// Jobs by name, borrowing nothing: each name's 64-bit hash to its job, the
/// name itself checked against the table at every look-up (so a planner
/// keeps it while the names stay). Names whose hash another name already
/// has (rare, unless names are made to collide: the hash is not keyed) are
/// kept apart, whole, under a keyed hash.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JobIndex {
    by_hash: HashMap<u64, JobId>,
    collided: std::collections::HashMap<Box<str>, JobId>,
}

impl JobIndex {
    fn hash(name: &str) -> u64 {
        use std::hash::BuildHasher;
        rustc_hash::FxBuildHasher.hash_one(name)
    }

    /// Adds `name` as job `id` unless the table has it (`name_of` gives the
    /// names of the jobs added so far); whether it was added.
    fn insert<'n>(&mut self, name: &str, id: JobId, name_of: impl Fn(JobId) -> &'n str) -> bool {
        self.insert_hashed(Self::hash(name), name, id, name_of)
    }

    /// [`JobIndex::insert`] with the name's hash given.
    fn insert_hashed<'n>(
        &mut self,
        hash: u64,
        name: &str,
        id: JobId,
        name_of: impl Fn(JobId) -> &'n str,
    ) -> bool {
        match self.by_hash.entry(hash) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(id);
                true
            }
            std::collections::hash_map::Entry::Occupied(slot) => {
                if name_of(*slot.get()) == name || self.collided.contains_key(name) {
                    return false;
                }
                self.collided.insert(name.into(), id);
                true
            }
        }
    }

    /// The job named `name`; `name_of` gives the table's names.
    pub(crate) fn get<'n>(&self, name: &str, name_of: impl Fn(JobId) -> &'n str) -> Option<JobId> {
        self.get_hashed(Self::hash(name), name, name_of)
    }

    /// [`JobIndex::get`] with the name's hash given.
    fn get_hashed<'n>(
        &self,
        hash: u64,
        name: &str,
        name_of: impl Fn(JobId) -> &'n str,
    ) -> Option<JobId> {
        let id = *self.by_hash.get(&hash)?;
        if name_of(id) == name {
            return Some(id);
        }
        self.collided.get(name).copied()
    }
}

/// Builds the job table (in document order) and a name index. `queued`
/// gives first-seen times (the last entry of a name wins).
pub fn job_table<'a>(
    fleet: &'a Fleet,
    tree: &QueueTree,
    models: &mut Models,
    queued: &[QueuedJob],
) -> (Vec<JobInfo<'a>>, JobIndex) {
    let (jobs, index, _, _) = table_and_facts(fleet, tree, models, queued, false);
    (jobs, index)
}

/// [`job_table`], and when `keep` the facts of each job (in table order)
/// and the lists of models they accept.
fn table_and_facts<'a>(
    fleet: &'a Fleet,
    tree: &QueueTree,
    models: &mut Models,
    queued: &[QueuedJob],
    keep: bool,
) -> (Vec<JobInfo<'a>>, JobIndex, Vec<JobFacts>, Vec<Vec<ModelId>>) {
    let mut context = JobContext::new(fleet, models);
    // Document order: nothing downstream depends on the table's order (fair
    // share sorts by priority, age and name), and a duplicate name — which
    // validation rejects — keeps its first document.
    let mut index = JobIndex::default();
    index.by_hash.reserve(fleet.jobs.len());
    let mut jobs: Vec<JobInfo> = Vec::with_capacity(fleet.jobs.len());
    let mut kept = Vec::with_capacity(if keep { fleet.jobs.len() } else { 0 });
    for job in &fleet.jobs {
        if !index.insert(job.name(), jobs.len() as JobId, |id| jobs[id as usize].name) {
            continue;
        }
        let facts = context.facts(&job.spec, tree, models);
        jobs.push(JobInfo::new(job, &facts, &context));
        if keep {
            kept.push(facts);
        }
    }
    set_first_seen(&mut jobs, &index, queued);
    if keep {
        for (facts, job) in kept.iter_mut().zip(&jobs) {
            facts.first_seen = job.first_seen;
        }
    }
    let selections = context.selections.iter().map(|s| s.to_vec()).collect();
    (jobs, index, kept, selections)
}

/// First-seen times from `queued` (the last entry of a name wins).
fn set_first_seen(jobs: &mut [JobInfo], index: &JobIndex, queued: &[QueuedJob]) {
    for q in queued {
        if let Some(j) = index.get(&q.job, |id| jobs[id as usize].name) {
            jobs[j as usize].first_seen = Some(q.since);
        }
    }
}

/// The job table a [`crate::Planner`] keeps between plans: each job's facts,
/// the name index, the models the table interned, and what the rest of the
/// fleet was (its priority classes and queue tree: the facts depend on
/// them).
#[derive(Debug, Default)]
pub(crate) struct KeptJobs {
    facts: Vec<JobFacts>,
    /// The lists of models the facts point into.
    selections: Vec<Vec<ModelId>>,
    /// Lent to the engine for a plan (`None` meanwhile).
    index: Option<JobIndex>,
    /// The models known before the table was made, and those it added, in
    /// order.
    models_before: Vec<String>,
    interned: Vec<String>,
    /// What the facts depend on besides the jobs and models.
    rest: Option<FleetRest>,
    /// Per job: its spec's runtime hash once drift needed it.
    pub(crate) runtime: Vec<Option<u64>>,
    /// Where the last plan's observed records led (job ids are the
    /// table's): `None` once the table is made anew.
    pub(crate) resolved: Option<crate::records::Resolved>,
    /// Per job: its name, shared, once a plan listed it pending (lent to
    /// the engine for a plan: names stay at their places while kept).
    pub(crate) names: Vec<Option<std::sync::Arc<str>>>,
    /// The last plan's pending jobs in fair share's leaf order (the next
    /// plan's guess: [`crate::order::FairShare::new`]).
    pub(crate) fair_order: Vec<JobId>,
}

/// What a plan gives back to its planner's job table for the next plan.
pub(crate) struct Returned {
    pub(crate) index: JobIndex,
    pub(crate) resolved: crate::records::Resolved,
    pub(crate) names: Vec<Option<std::sync::Arc<str>>>,
    pub(crate) fair_order: Vec<JobId>,
}

/// What a job's facts depend on besides the job and the models: the
/// priority classes (metadata and specs) and the queue tree's shape (each
/// queue's name and parent, in id order).
#[derive(Debug, PartialEq)]
struct FleetRest {
    classes: Vec<(model::spec::Metadata, model::spec::PriorityClassSpec)>,
    queues: Vec<(std::sync::Arc<str>, Option<QueueId>)>,
}

impl FleetRest {
    fn of(fleet: &Fleet, tree: &QueueTree) -> Self {
        FleetRest {
            classes: fleet
                .priority_classes
                .iter()
                .map(|c| (c.metadata.clone(), c.spec.clone()))
                .collect(),
            queues: tree
                .queues
                .iter()
                .map(|q| (q.name.clone(), q.parent))
                .collect(),
        }
    }

    fn matches(&self, fleet: &Fleet, tree: &QueueTree) -> bool {
        self.classes.len() == fleet.priority_classes.len()
            && self
                .classes
                .iter()
                .zip(&fleet.priority_classes)
                .all(|((m, s), c)| *m == c.metadata && *s == c.spec)
            && self.queues.len() == tree.queues.len()
            && self
                .queues
                .iter()
                .zip(&tree.queues)
                .all(|((name, parent), q)| *name == q.name && *parent == q.parent)
    }
}

/// What a caller vouches for about a plan's input against the input of its
/// previous call to the same [`crate::Planner`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Unchanged<'c> {
    /// The fleet's jobs are the previous call's, as many and of the same
    /// names at each position, but for the documents at these positions
    /// (changed, their names kept). `None`: nothing vouched. (Documents of
    /// other kinds may have changed: the planner compares what its job
    /// table depends on.)
    pub jobs_but: Option<&'c [usize]>,
    /// The observed state's records (`running`, `completed` and `queued`
    /// entries) are the previous call's.
    pub records: bool,
    /// The nodes, given apart, are the previous call's (`idleSince` aside):
    /// the planner need not compare them with those it kept (debug builds
    /// do, and panic when they differ). `false`: the planner compares them.
    pub nodes: bool,
}

impl KeptJobs {
    /// The job table of `fleet` ([`job_table`]'s, built again from what was
    /// kept where `unchanged` allows) and its name index, lent until
    /// [`KeptJobs::give_back`].
    pub(crate) fn table<'a>(
        &mut self,
        fleet: &'a Fleet,
        tree: &QueueTree,
        models: &mut Models,
        queued: &[QueuedJob],
        unchanged: Unchanged<'_>,
    ) -> (Vec<JobInfo<'a>>, JobIndex) {
        if let Some(table) = self.made_again(fleet, tree, models, queued, unchanged) {
            #[cfg(debug_assertions)]
            {
                let mut fresh_models = Models::default();
                for m in &self.models_before {
                    fresh_models.intern(m);
                }
                let (fresh, fresh_index) = job_table(fleet, tree, &mut fresh_models, queued);
                debug_assert!(
                    fresh_models.names() == models.names()
                        && fresh_index == table.1
                        && fresh.len() == table.0.len()
                        && fresh.iter().zip(&table.0).all(|(a, b)| same_info(a, b)),
                    "a kept job table differs from a new one"
                );
            }
            return table;
        }
        let models_before = models.names().to_vec();
        let (jobs, index, facts, selections) = table_and_facts(fleet, tree, models, queued, true);
        self.selections = selections;
        self.interned = models.names()[models_before.len()..].to_vec();
        self.models_before = models_before;
        self.facts = facts;
        self.rest = Some(FleetRest::of(fleet, tree));
        self.runtime = vec![None; jobs.len()];
        self.index = None;
        self.resolved = None;
        self.names = vec![None; jobs.len()];
        self.fair_order = Vec::new();
        (jobs, index)
    }

    /// The table made from what was kept, but for the jobs `unchanged`
    /// names, when it vouches for the jobs and the rest of the fleet is
    /// the one kept; `None` otherwise (`models` as they were).
    fn made_again<'a>(
        &mut self,
        fleet: &'a Fleet,
        tree: &QueueTree,
        models: &mut Models,
        queued: &[QueuedJob],
        unchanged: Unchanged<'_>,
    ) -> Option<(Vec<JobInfo<'a>>, JobIndex)> {
        let changed = unchanged.jobs_but?;
        // No duplicate names (the table's positions are the fleet's), the
        // same classes and queue tree, the same models known before (the
        // pools' and the queues' quotas'; the pools' list is compared
        // below).
        if self.index.is_none()
            || self.facts.len() != fleet.jobs.len()
            || changed.iter().any(|&k| k >= fleet.jobs.len())
            || models.names() != self.models_before
            || !self
                .rest
                .as_ref()
                .is_some_and(|rest| rest.matches(fleet, tree))
        {
            return None;
        }
        let before = models.clone();
        let mut context = JobContext::new(fleet, models);
        for m in &self.interned {
            models.intern(m);
        }
        if context.selections[0][..] != self.selections.first()?[..] {
            *models = before;
            return None;
        }
        context.selections = self.selections.iter().map(|s| s[..].into()).collect();
        let known = models.len();
        let mut facts: Vec<(usize, JobFacts)> = Vec::with_capacity(changed.len());
        for &k in changed {
            let mut new = context.facts(&fleet.jobs[k].spec, tree, models);
            new.first_seen = self.facts[k].first_seen;
            facts.push((k, new));
        }
        if models.len() != known {
            // A model first named by a changed job: ids would follow
            // another order.
            *models = before;
            return None;
        }
        let index = self.index.take()?;
        self.selections = context.selections.iter().map(|s| s.to_vec()).collect();
        for (k, new) in facts {
            self.facts[k] = new;
            self.runtime[k] = None;
        }
        let mut jobs: Vec<JobInfo<'a>> = fleet
            .jobs
            .iter()
            .zip(&self.facts)
            .map(|(object, facts)| JobInfo::new(object, facts, &context))
            .collect();
        if !unchanged.records {
            for job in &mut jobs {
                job.first_seen = None;
            }
            set_first_seen(&mut jobs, &index, queued);
            for (facts, job) in self.facts.iter_mut().zip(&jobs) {
                facts.first_seen = job.first_seen;
            }
        }
        Some((jobs, index))
    }

    /// The name index lent by [`KeptJobs::table`], and what else the plan
    /// gives back ([`Returned`]), for the next plan.
    pub(crate) fn give_back(&mut self, returned: Returned) {
        let Returned {
            index,
            resolved,
            names,
            fair_order,
        } = returned;
        self.index = Some(index);
        self.resolved = Some(resolved);
        self.names = names;
        self.fair_order = fair_order;
    }
}

/// Two table entries alike (debug builds' check of a kept table).
#[cfg(debug_assertions)]
fn same_info(a: &JobInfo, b: &JobInfo) -> bool {
    std::ptr::eq(a.object, b.object)
        && a.queue == b.queue
        && a.priority == b.priority
        && a.class == b.class
        && a.preemptible == b.preemptible
        && a.grace == b.grace
        && a.models == b.models
        && a.first_seen == b.first_seen
        && a.gpus == b.gpus
        && a.replicas == b.replicas
        && a.per_replica == b.per_replica
        && a.time_limit == b.time_limit
        && a.required == b.required
        && a.preferred == b.preferred
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Names inserted under hashes chosen to collide: every name is found
    /// as its own job, a name seen before is not added again, and a name
    /// never inserted is not found even where its hash is taken.
    #[test]
    fn names_whose_hashes_collide_are_each_found() {
        let names = ["a", "b", "c", "a", "d", "b"];
        // "a", "b", "a", "b" share hash 7; "c", "d" share hash 9.
        let hash = |name: &str| if name == "a" || name == "b" { 7 } else { 9 };
        let mut index = JobIndex::default();
        let mut table: Vec<&str> = Vec::new();
        for name in names {
            let id = table.len() as JobId;
            if index.insert_hashed(hash(name), name, id, |j| table[j as usize]) {
                table.push(name);
            }
        }
        assert_eq!(table, ["a", "b", "c", "d"], "duplicates are not added");
        for (id, name) in table.iter().enumerate() {
            let found = index.get_hashed(hash(name), name, |j| table[j as usize]);
            assert_eq!(found, Some(id as JobId), "{name}");
        }
        assert_eq!(index.get_hashed(7, "e", |j| table[j as usize]), None);
        assert_eq!(index.get_hashed(8, "e", |j| table[j as usize]), None);
        // The unkeyed hash agrees with itself for a real look-up.
        let mut plain = JobIndex::default();
        let real = ["x", "y"];
        for (id, name) in real.iter().enumerate() {
            assert!(plain.insert(name, id as JobId, |j| real[j as usize]));
        }
        assert_eq!(plain.get("y", |j| real[j as usize]), Some(1));
        assert_eq!(plain.get("z", |j| real[j as usize]), None);
    }
}
