//! The trace's jobs as the replay sees them: checked against the fleet,
//! scaled in time, named, given the policy's declared limit and class, and
//! sorted by arrival. Jobs that can never run on the fleet are dropped.

use std::sync::Arc;

use model::diag::{Origin, Pos};
use model::spec::{Duration, Fleet, GpuSelector, JobSpec, Metadata, Object};
use model::time::{Timestamp, after};
use trace::TraceJob;

use crate::{Options, SimulateError};

/// One job of the replay.
#[derive(Debug, Clone)]
pub(crate) struct SimJob {
    /// Its trace line.
    pub line: u64,
    /// When it arrives.
    pub submit: Timestamp,
    /// Its true run length.
    pub duration: Duration,
    /// GPUs of the gang.
    pub gpus: u64,
    /// Its grace period when preempted.
    pub grace: Duration,
    /// The Job document the engine is shown.
    pub object: Object<JobSpec>,
}

impl SimJob {
    /// Its leaf queue.
    pub fn queue(&self) -> &str {
        &self.object.spec.queue
    }

    /// Its declared time limit (as the engine sees it).
    pub fn limit(&self) -> Option<Duration> {
        self.object.spec.time_limit
    }
}

/// The replay's jobs, by arrival (then trace line), and those dropped.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prepared {
    pub jobs: Vec<SimJob>,
    pub dropped: Vec<(u64, String)>,
}

/// Job `i`'s name: `j` and its index, zero-padded so names sort as indices.
pub(crate) fn name(i: usize) -> String {
    format!("j{i:07}")
}

/// Job index from a name made by [`name`].
pub(crate) fn index(name: &str) -> Option<usize> {
    name.strip_prefix('j')?.parse().ok()
}

/// Checks, scales, names and sorts the trace's jobs.
pub(crate) fn prepare(
    fleet: &Fleet,
    trace: &[TraceJob],
    options: &Options,
) -> Result<Prepared, SimulateError> {
    let origin = crate::origin();
    let file: Arc<str> = Arc::from("trace");
    let mut kept: Vec<(&TraceJob, Timestamp)> = Vec::with_capacity(trace.len());
    let mut dropped = Vec::new();
    for job in trace {
        check_names(fleet, job)?;
        if let Some(why) = never_fits(fleet, job) {
            dropped.push((job.line, why));
            continue;
        }
        let ms = job.submit.as_millis() as f64 / options.arrival_scale;
        // Finite and within 100 years of milliseconds.
        kept.push((job, after(origin, Duration::from_millis(ms.round() as u64))));
    }
    kept.sort_by_key(|(j, t)| (*t, j.line));
    let policy = options.policy;
    let jobs = kept
        .into_iter()
        .enumerate()
        .map(|(i, (job, submit))| {
            let declared =
                options
                    .limits
                    .declare(job.duration, job.time_limit, options.seed, job.line);
            let spec = JobSpec {
                queue: job.queue.clone(),
                priority_class: policy.class(job.priority_class.as_deref()),
                replicas: job.replicas,
                gpus_per_replica: job.gpus_per_replica,
                gpu: job.model.as_ref().map(|m| GpuSelector {
                    models: vec![m.clone()],
                }),
                topology: None,
                time_limit: policy.limit(declared),
                command: Vec::new(),
                image: None,
                env: Default::default(),
                kubernetes: None,
                slurm: None,
            };
            let grace = fleet.grace_period_of(Some(&spec));
            SimJob {
                line: job.line,
                submit,
                duration: job.duration,
                gpus: job.gpus(),
                grace,
                object: Object {
                    metadata: Metadata {
                        name: name(i),
                        labels: Default::default(),
                        annotations: Default::default(),
                    },
                    spec,
                    origin: Origin::new(file.clone(), Pos::new(0, 0)),
                },
            }
        })
        .collect();
    Ok(Prepared { jobs, dropped })
}

/// The job's queue must be a leaf of the fleet, its class one of it.
fn check_names(fleet: &Fleet, job: &TraceJob) -> Result<(), SimulateError> {
    let queue_error = |why| SimulateError::Queue {
        line: job.line,
        queue: job.queue.clone(),
        why,
    };
    if !fleet.queues.iter().any(|q| q.name() == job.queue) {
        return Err(queue_error("is not in the fleet"));
    }
    if fleet
        .queues
        .iter()
        .any(|q| q.spec.parent.as_deref() == Some(job.queue.as_str()))
    {
        return Err(queue_error("is not a leaf queue"));
    }
    if let Some(class) = &job.priority_class
        && !fleet.priority_classes.iter().any(|c| c.name() == class)
    {
        return Err(SimulateError::PriorityClass {
            line: job.line,
            class: class.clone(),
        });
    }
    Ok(())
}

/// Why the job can never run on the fleet at its largest, if so: no pool of
/// an acceptable model has nodes large enough for a replica and room for
/// the gang, within every limit on its queue's path.
fn never_fits(fleet: &Fleet, job: &TraceJob) -> Option<String> {
    let per = job.gpus_per_replica;
    let mut models: Vec<&str> = fleet
        .pools
        .iter()
        .map(|p| p.spec.gpu.model.as_str())
        .filter(|m| job.model.as_deref().is_none_or(|want| want == *m))
        .collect();
    models.sort_unstable();
    models.dedup();
    if models.is_empty() {
        return Some("no pool has its GPU model".to_string());
    }
    let mut why = String::new();
    for model in models {
        let replicas: u64 = fleet
            .pools
            .iter()
            .filter(|p| p.spec.gpu.model == model && p.spec.gpu.count >= per)
            .map(|p| u64::from(p.spec.size.max) * u64::from(p.spec.gpu.count / per))
            .sum();
        if replicas < u64::from(job.replicas) {
            why = format!("{} × {per} GPUs never fit the fleet's nodes", job.replicas);
            continue;
        }
        match binding_limit(fleet, &job.queue, model, job.gpus()) {
            Some(queue) => why = format!("{} GPUs are more than queue {queue}'s limit", job.gpus()),
            None => return None,
        }
    }
    Some(why)
}

/// The first queue on the path of `leaf` whose limit of `model` is below `gpus`.
fn binding_limit(fleet: &Fleet, leaf: &str, model: &str, gpus: u64) -> Option<String> {
    let mut queue = Some(leaf);
    let mut depth = 0;
    while let Some(name) = queue {
        let q = fleet.queues.iter().find(|q| q.name() == name)?;
        if q.spec.limit(model).is_some_and(|l| u64::from(l) < gpus) {
            return Some(name.to_string());
        }
        queue = q.spec.parent.as_deref();
        depth += 1;
        if depth > fleet.queues.len() {
            return None;
        }
    }
    None
}
