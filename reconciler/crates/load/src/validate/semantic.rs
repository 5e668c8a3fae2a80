//! Cross-document checks with precise positions.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap, FxHashSet};

use super::suggest::hint;
use crate::doc_view::{DocRef, DocSlice, DocsView};
use crate::yaml::PathSegment::{Index, Key};
use model::diag::Diagnostic;
use model::spec::limits::{MAX_FLEET_GPUS, MAX_FLEET_NODES};
use model::spec::{JobSpec, Kind, QueueSpec};

pub fn check(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>) {
    duplicates("NodePool", docs.pools, out);
    duplicates("Queue", docs.queues, out);
    duplicates("PriorityClass", docs.priority_classes, out);
    duplicates("Job", docs.jobs, out);
    duplicates("Policy", docs.policies, out);
    pools(docs, out);
    queues(docs, out);
    priority_classes(docs, out);
    jobs(docs, out);
}

/// [`check`] but for the jobs' checks (their duplicate names and their own
/// checks): what it reports about the documents of other kinds.
pub fn check_but_jobs(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>) {
    duplicates("NodePool", docs.pools, out);
    duplicates("Queue", docs.queues, out);
    duplicates("PriorityClass", docs.priority_classes, out);
    duplicates("Policy", docs.policies, out);
    pools(docs, out);
    queues(docs, out);
    priority_classes(docs, out);
}

fn duplicates<S>(kind: &str, docs: DocSlice<'_, S>, out: &mut Vec<Diagnostic>) {
    // Positions are looked up only for duplicates: this runs over every Job.
    let mut first: FxHashMap<&str, usize> = FxHashMap::default();
    first.reserve(docs.len());
    for (i, doc) in docs.iter().enumerate() {
        match first.get(doc.name()) {
            Some(&original) => out.push(Diagnostic::new(
                doc.origin_of(&["metadata", "name"]),
                format!(
                    "{kind} {}: duplicate name (first defined at {})",
                    doc.name(),
                    docs.get(original)
                        .unwrap_or(doc)
                        .origin_of(&["metadata", "name"])
                ),
            )),
            None => {
                first.insert(doc.name(), i);
            }
        }
    }
}

fn pools(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>) {
    let (mut nodes, mut gpus) = (0_u64, 0_u64);
    let mut over_reported = false;
    for pool in docs.pools.iter() {
        let size = pool.object.spec.size;
        nodes += u64::from(size.max);
        gpus += u64::from(size.max) * u64::from(pool.object.spec.gpu.count);
        if !over_reported && (nodes > MAX_FLEET_NODES || gpus > MAX_FLEET_GPUS) {
            over_reported = true;
            out.push(Diagnostic::new(
                pool.origin_of(&["spec", "size", "max"]),
                format!(
                    "NodePool {}: spec.size.max: the pools up to this one reach {nodes} nodes and {gpus} GPUs at their max; a fleet has at most {MAX_FLEET_NODES} nodes and {MAX_FLEET_GPUS} GPUs",
                    pool.name(),
                ),
            ));
        }
        if size.min > size.max {
            out.push(Diagnostic::new(
                pool.origin_of(&["spec", "size", "min"]),
                format!(
                    "NodePool {}: spec.size: min {} is greater than max {}",
                    pool.name(),
                    size.min,
                    size.max
                ),
            ));
        }
    }
}

/// The provided models, for reference checks.
fn pool_models<'a>(docs: &DocsView<'a>) -> BTreeSet<&'a str> {
    docs.pools
        .iter()
        .map(|p| p.object.spec.gpu.model.as_str())
        .collect()
}

fn queues(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>) {
    let by_name: BTreeMap<&str, DocRef<'_, QueueSpec>> =
        docs.queues.iter().map(|q| (q.name(), q)).collect();
    let models = pool_models(docs);

    for queue in docs.queues.iter() {
        let spec = &queue.object.spec;
        if let Some(parent) = &spec.parent
            && !by_name.contains_key(parent.as_str())
            && !docs.rejected.may_define(Kind::Queue, parent)
        {
            out.push(Diagnostic::new(
                queue.origin_of(&["spec", "parent"]),
                format!(
                    "Queue {}: spec.parent: unknown queue {parent:?}{}",
                    queue.name(),
                    hint(parent, by_name.keys().copied())
                ),
            ));
        }
        let mut seen_models = BTreeSet::new();
        for (i, quota) in spec.quota.iter().enumerate() {
            let entry = |field: &'static str| {
                queue.origin_at(&[Key("spec"), Key("quota"), Index(i), Key(field)])
            };
            if !seen_models.insert(quota.model.as_str()) {
                out.push(Diagnostic::new(
                    entry("model"),
                    format!(
                        "Queue {}: spec.quota[{i}].model: {:?} is listed more than once",
                        queue.name(),
                        quota.model
                    ),
                ));
            }
            if !models.contains(quota.model.as_str()) && !docs.rejected.may_provide(&quota.model) {
                out.push(Diagnostic::new(
                    entry("model"),
                    format!(
                        "Queue {}: spec.quota[{i}].model: no NodePool provides GPU model {:?}{}",
                        queue.name(),
                        quota.model,
                        hint(&quota.model, models.iter().copied())
                    ),
                ));
            }
            if let Some(limit) = quota.limit
                && limit < quota.guaranteed
            {
                out.push(Diagnostic::new(
                    entry("limit"),
                    format!(
                        "Queue {}: spec.quota[{i}].limit: limit {limit} is below guaranteed {} for {}",
                        queue.name(),
                        quota.guaranteed,
                        quota.model
                    ),
                ));
            }
        }
    }

    cycles(docs, &by_name, out);
    guaranteed_sums(docs, &by_name, out);
}

/// Reports every queue that sits on a cycle of `parent` links, once per queue,
/// in linear time (each queue has one parent, so every walk up the tree stops
/// at a queue already seen).
fn cycles(
    docs: &DocsView<'_>,
    by_name: &BTreeMap<&str, DocRef<'_, QueueSpec>>,
    out: &mut Vec<Diagnostic>,
) {
    /// Names shown in full before a long cycle is abbreviated.
    const SHOWN: usize = 12;
    // The cycle each queue on one belongs to, as its members in parent order.
    let mut cycle_of: FxHashMap<&str, std::rc::Rc<Vec<&str>>> = FxHashMap::default();
    // 1: on the walk under way; 2: finished.
    let mut state: FxHashMap<&str, u8> = FxHashMap::default();
    for queue in docs.queues.iter() {
        let mut walk: Vec<&str> = Vec::new();
        let mut name = queue.name();
        loop {
            match state.get(name) {
                Some(1) => {
                    if let Some(start) = walk.iter().position(|n| *n == name) {
                        let members = std::rc::Rc::new(walk[start..].to_vec());
                        for member in members.iter() {
                            cycle_of.insert(member, members.clone());
                        }
                    }
                    break;
                }
                Some(_) => break,
                None => {}
            }
            state.insert(name, 1);
            walk.push(name);
            let Some(parent) = by_name
                .get(name)
                .and_then(|q| q.object.spec.parent.as_deref())
            else {
                break;
            };
            if !by_name.contains_key(parent) {
                break;
            }
            name = parent;
        }
        for n in walk {
            state.insert(n, 2);
        }
    }
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for queue in docs.queues.iter() {
        let Some(members) = cycle_of.get(queue.name()) else {
            continue;
        };
        if !reported.insert(queue.name()) {
            continue;
        }
        let at = members.iter().position(|n| *n == queue.name()).unwrap_or(0);
        let len = members.len();
        let mut shown: Vec<&str> = (0..len.min(SHOWN))
            .map(|i| members[(at + i) % len])
            .collect();
        if len > SHOWN {
            shown.push("…");
        }
        shown.push(queue.name());
        let size = if len > SHOWN {
            format!(" ({len} queues)")
        } else {
            String::new()
        };
        out.push(Diagnostic::new(
            queue.origin_of(&["spec", "parent"]),
            format!(
                "Queue {}: spec.parent: cycle in the queue tree: {}{size}",
                queue.name(),
                shown.join(" → ")
            ),
        ));
    }
}

/// Children's guaranteed per model must sum to at most the parent's.
fn guaranteed_sums(
    docs: &DocsView<'_>,
    by_name: &BTreeMap<&str, DocRef<'_, QueueSpec>>,
    out: &mut Vec<Diagnostic>,
) {
    let mut children: BTreeMap<&str, Vec<DocRef<'_, QueueSpec>>> = BTreeMap::new();
    for queue in docs.queues.iter() {
        if let Some(parent) = queue.object.spec.parent.as_deref() {
            children.entry(parent).or_default().push(queue);
        }
    }
    let provided = pool_models(docs);
    for (parent_name, kids) in &children {
        let Some(parent) = by_name.get(parent_name) else {
            continue;
        };
        // A model no pool provides is already reported on each quota entry.
        let models: BTreeSet<&str> = kids
            .iter()
            .flat_map(|k| k.object.spec.quota.iter().map(|q| q.model.as_str()))
            .filter(|m| provided.contains(m))
            .collect();
        for model in models {
            let sum: u64 = kids
                .iter()
                .map(|k| u64::from(k.object.spec.guaranteed(model)))
                .sum();
            let own = u64::from(parent.object.spec.guaranteed(model));
            if sum > own {
                let parts: Vec<String> = kids
                    .iter()
                    .filter(|k| k.object.spec.guaranteed(model) > 0)
                    .map(|k| format!("{} {}", k.name(), k.object.spec.guaranteed(model)))
                    .collect();
                let origin = match parent
                    .object
                    .spec
                    .quota
                    .iter()
                    .position(|q| q.model == model)
                {
                    Some(i) => {
                        parent.origin_at(&[Key("spec"), Key("quota"), Index(i), Key("guaranteed")])
                    }
                    None => parent.key_origin_of(&["spec", "quota"]),
                };
                out.push(Diagnostic::new(
                    origin,
                    format!(
                        "Queue {parent_name}: children's guaranteed {model} sum to {sum} ({}), above this queue's guaranteed {own}",
                        parts.join(", ")
                    ),
                ));
            }
        }
    }
}

fn priority_classes(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>) {
    let defaults: Vec<&str> = docs
        .priority_classes
        .iter()
        .filter(|p| p.object.spec.default)
        .map(|p| p.name())
        .collect();
    if defaults.len() > 1 {
        for class in docs
            .priority_classes
            .iter()
            .filter(|p| p.object.spec.default)
        {
            let others: Vec<&str> = defaults
                .iter()
                .copied()
                .filter(|n| *n != class.name())
                .collect();
            out.push(Diagnostic::new(
                class.origin_of(&["spec", "default"]),
                format!(
                    "PriorityClass {}: spec.default: more than one default priority class (also {})",
                    class.name(),
                    others.join(", ")
                ),
            ));
        }
    }
}

fn jobs(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>) {
    let mut context = JobContext::of(docs);
    for job in docs.jobs.iter() {
        context.check(docs, job, out);
    }
}

/// The checks of each job alone (queue, priority class, models, replica
/// size, executor sections) on the jobs at `positions`, in that order: what
/// [`check`] reports about them, given the same other documents.
pub fn jobs_at(docs: &DocsView<'_>, positions: &[usize], out: &mut Vec<Diagnostic>) {
    let mut context = JobContext::of(docs);
    for job in positions.iter().filter_map(|&k| docs.jobs.get(k)) {
        context.check(docs, job, out);
    }
}

/// What a job's own checks read of the other documents, looked up once.
struct JobContext<'d> {
    queues: BTreeMap<&'d str, DocRef<'d, QueueSpec>>,
    classes: BTreeSet<&'d str>,
    queue_names: FxHashSet<&'d str>,
    parents: FxHashMap<&'d str, Vec<&'d str>>,
    class_names: FxHashSet<&'d str>,
    models: BTreeSet<&'d str>,
    /// Whether a replica fits, per selector and replica size.
    fits: FxHashMap<(Option<&'d [String]>, u32), bool>,
}

impl<'d> JobContext<'d> {
    fn of(docs: &DocsView<'d>) -> Self {
        let queues: BTreeMap<&str, DocRef<'_, QueueSpec>> =
            docs.queues.iter().map(|q| (q.name(), q)).collect();
        let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for queue in docs.queues.iter() {
            if let Some(parent) = queue.object.spec.parent.as_deref() {
                children.entry(parent).or_default().push(queue.name());
            }
        }
        let classes: BTreeSet<&str> = docs.priority_classes.iter().map(|p| p.name()).collect();
        // Hashed copies for the look-ups of every job; the ordered ones name
        // suggestions in a stable order.
        let queue_names: FxHashSet<&str> = queues.keys().copied().collect();
        let parents: FxHashMap<&str, Vec<&str>> = children.into_iter().collect();
        let class_names: FxHashSet<&str> = classes.iter().copied().collect();
        JobContext {
            queues,
            classes,
            queue_names,
            parents,
            class_names,
            models: pool_models(docs),
            // Jobs share few selectors: whether a replica fits is decided
            // once per selector and per replica size.
            fits: FxHashMap::default(),
        }
    }

    fn check(&mut self, docs: &DocsView<'d>, job: DocRef<'d, JobSpec>, out: &mut Vec<Diagnostic>) {
        let JobContext {
            queues,
            classes,
            queue_names,
            parents,
            class_names,
            models,
            fits,
        } = self;
        super::kubernetes::check(job, out);
        super::slurm::check(job, out);
        let spec = &job.object.spec;
        let name = job.name();
        let queue = spec.queue.as_str();
        if !queue_names.contains(queue) {
            if docs.rejected.may_define(Kind::Queue, queue) {
                // The queue's own errors are reported.
            } else {
                out.push(Diagnostic::new(
                    job.origin_of(&["spec", "queue"]),
                    format!(
                        "Job {name}: spec.queue: unknown queue {queue:?}{}",
                        hint(queue, queues.keys().copied())
                    ),
                ));
            }
        } else if let Some(kids) = parents.get(queue) {
            let mut kids = (*kids).clone();
            kids.sort_unstable();
            out.push(Diagnostic::new(
                job.origin_of(&["spec", "queue"]),
                format!(
                    "Job {name}: spec.queue: {queue:?} is not a leaf queue (it has children {}); jobs go to leaf queues",
                    kids.join(", ")
                ),
            ));
        }
        if let Some(class) = spec.priority_class.as_deref()
            && !class_names.contains(class)
            && !docs.rejected.may_define(Kind::PriorityClass, class)
        {
            out.push(Diagnostic::new(
                job.origin_of(&["spec", "priorityClass"]),
                format!(
                    "Job {name}: spec.priorityClass: unknown priority class {class:?}{}",
                    hint(class, classes.iter().copied())
                ),
            ));
        }
        let mut unknown_model = false;
        if let Some(selector) = &spec.gpu {
            for (i, model) in selector.models.iter().enumerate() {
                if !models.contains(model.as_str()) {
                    unknown_model = true;
                    if docs.rejected.may_provide(model) {
                        continue;
                    }
                    out.push(Diagnostic::new(
                        job.origin_at(&[Key("spec"), Key("gpu"), Key("models"), Index(i)]),
                        format!(
                            "Job {name}: spec.gpu.models[{i}]: no NodePool provides GPU model {model:?}{}",
                            hint(model, models.iter().copied())
                        ),
                    ));
                }
            }
        }
        // A pool that failed to load may be the one the replica fits.
        if !unknown_model {
            let selector = spec.gpu.as_ref().map(|g| g.models.as_slice());
            let key = (selector.filter(|m| !m.is_empty()), spec.gpus_per_replica);
            let fine = *fits.entry(key).or_insert_with(|| {
                docs.rejected.may_provide_any(|m| spec.accepts_model(m))
                    || largest_acceptable_pool(docs, spec)
                        .is_some_and(|pool| pool.object.spec.gpu.count >= spec.gpus_per_replica)
            });
            if !fine {
                replica_fits_a_node(docs, job, out);
            }
        }
    }
}

/// The pool with the most GPUs per node among those of a model `spec`
/// accepts (ties: the first by name).
fn largest_acceptable_pool<'d>(
    docs: &DocsView<'d>,
    spec: &model::spec::JobSpec,
) -> Option<DocRef<'d, model::spec::NodePoolSpec>> {
    docs.pools
        .iter()
        .filter(|p| spec.accepts_model(&p.object.spec.gpu.model))
        .max_by(|a, b| {
            a.object
                .spec
                .gpu
                .count
                .cmp(&b.object.spec.gpu.count)
                .then_with(|| b.name().cmp(a.name()))
        })
}

/// A replica never spans nodes: it must fit the largest node of an acceptable model.
fn replica_fits_a_node(
    docs: &DocsView<'_>,
    job: DocRef<'_, model::spec::JobSpec>,
    out: &mut Vec<Diagnostic>,
) {
    let spec = &job.object.spec;
    match largest_acceptable_pool(docs, spec) {
        Some(pool) if pool.object.spec.gpu.count < spec.gpus_per_replica => {
            out.push(Diagnostic::new(
                job.origin_of(&["spec", "gpusPerReplica"]),
                format!(
                    "Job {}: spec.gpusPerReplica: {} GPUs per replica, but the largest node of an acceptable model has {} (NodePool {}: {} × {}); a replica never spans nodes",
                    job.name(),
                    spec.gpus_per_replica,
                    pool.object.spec.gpu.count,
                    pool.name(),
                    pool.object.spec.gpu.count,
                    pool.object.spec.gpu.model
                ),
            ));
        }
        Some(_) => {}
        None if !docs.pools.is_empty() => {
            out.push(Diagnostic::new(
                job.key_origin_of(&["spec", "gpu"]),
                format!(
                    "Job {}: no NodePool provides an acceptable GPU model",
                    job.name()
                ),
            ));
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::{SourceFile, load_fleet};

    fn messages(text: &str) -> Vec<String> {
        load_fleet(&[SourceFile::new("a.yaml", text)])
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const POOL: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {gpu: {model: X, count: 8}, size: {min: 1, max: 1}}\n";

    #[test]
    fn a_model_no_pool_provides_is_reported_once_not_as_oversubscription() {
        let text = format!(
            "{POOL}---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: top}}\nspec:\n  quota: [{{model: X, guaranteed: 8}}]\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: kid}}\nspec: {{parent: top, quota: [{{model: Z, guaranteed: 8}}]}}\n"
        );
        let got = messages(&text);
        assert_eq!(
            got,
            ["a.yaml:15:37: Queue kid: spec.quota[0].model: no NodePool provides GPU model \"Z\""]
        );
    }

    #[test]
    fn oversubscription_of_an_unlisted_model_points_at_the_quota_key() {
        let text = format!(
            "{POOL}---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: top}}\nspec:\n  weight: 2\n  quota: []\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: kid}}\nspec: {{parent: top, quota: [{{model: X, guaranteed: 8}}]}}\n"
        );
        let got = messages(&text);
        assert_eq!(
            got,
            [
                "a.yaml:11:3: Queue top: children's guaranteed X sum to 8 (kid 8), above this queue's guaranteed 0"
            ]
        );
    }
}
