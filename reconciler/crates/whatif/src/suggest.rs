//! The smallest changes that would let a pending job run now, each one
//! verified by planning the changed fleet.

use std::collections::BTreeMap;

use engine::{PlanInput, plan};
use model::plan::{Action, Plan};
use model::spec::{Fleet, JobSpec, Object, Topology, TopologyLevel};
use serde::Serialize;

use crate::change::Change;
use crate::usage::Usage;

/// A change to the specs that lets a pending job run, verified: the engine,
/// run on the changed fleet against the same observed state and time,
/// places the job (or preempts running jobs for it, which it starts on
/// when their grace period ends).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    /// What to change (several parts when one change is not enough, e.g.
    /// the same limit binds at the team and at the department).
    pub changes: Vec<Change>,
    /// The running jobs the changed plan preempts for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempts: Vec<String>,
    /// The suggestion in words.
    pub text: String,
}

/// For each of `jobs` that `plan` leaves pending, the verified suggestions,
/// smallest of each kind first: raise the binding limits on one model,
/// accept another model, relax the topology (a wider required domain, else
/// required → preferred), run under the lowest higher priority class that
/// works. Jobs `plan` does not leave pending get no entry; an empty list is
/// "none found". Each candidate costs one engine run.
pub fn suggest(input: &PlanInput, plan: &Plan, jobs: &[&str]) -> BTreeMap<String, Vec<Suggestion>> {
    let mut out = BTreeMap::new();
    let pending: Vec<&str> = jobs
        .iter()
        .copied()
        .filter(|j| plan.pending.iter().any(|p| *p.job == **j))
        .collect();
    if pending.is_empty() {
        return out;
    }
    let usage = Usage::new(input.fleet, input.observed, plan);
    let mut fleet = input.fleet.clone();
    for job in pending {
        let Some(spec) = input.fleet.jobs.iter().find(|j| j.name() == job) else {
            continue;
        };
        // A job the plan already preempts for runs when the victims have
        // stopped: only a change that places it at once does better.
        let preempting = plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::Preempt { for_job, .. } if for_job == job));
        let mut found = Vec::new();
        let mut check = |changes: Vec<Change>| -> bool {
            match verify(input, &mut fleet, job, &changes, preempting) {
                Some(preempts) => {
                    found.push(Suggestion {
                        text: words(&changes, &preempts),
                        changes,
                        preempts,
                    });
                    true
                }
                None => false,
            }
        };
        for candidates in limit_candidates(input.fleet, &usage, spec) {
            // Smallest amount first; the first that works is the suggestion.
            for changes in candidates {
                if check(changes) {
                    break;
                }
            }
        }
        for changes in model_candidates(input.fleet, spec) {
            check(changes);
        }
        for changes in topology_candidates(spec) {
            if check(changes) {
                break;
            }
        }
        for changes in priority_candidates(input.fleet, spec) {
            if check(changes) {
                break;
            }
        }
        out.insert(job.to_string(), found);
    }
    out
}

/// Plans `fleet` with `changes` applied (and takes them back): the jobs
/// preempted for `job` when the changed plan places it or preempts for it
/// (`must_place`: only when it places it), `None` when it leaves it
/// pending all the same.
fn verify(
    input: &PlanInput,
    fleet: &mut Fleet,
    job: &str,
    changes: &[Change],
    must_place: bool,
) -> Option<Vec<String>> {
    for c in changes {
        c.apply(fleet, false);
    }
    let changed = plan(&PlanInput {
        fleet,
        observed: input.observed,
        now: input.now,
        revision: input.revision,
    });
    for c in changes.iter().rev() {
        c.apply(fleet, true);
    }
    let mut placed = false;
    let mut preempts = Vec::new();
    for action in &changed.actions {
        match action {
            Action::Place { job: j, .. } if j == job => placed = true,
            Action::Preempt {
                job: victim,
                for_job,
                ..
            } if for_job == job => {
                preempts.push(victim.clone());
            }
            _ => {}
        }
    }
    (placed || (!must_place && !preempts.is_empty())).then_some(preempts)
}

fn words(changes: &[Change], preempts: &[String]) -> String {
    let what: Vec<String> = changes.iter().map(Change::words).collect();
    let mut text = what.join(" and ");
    if !preempts.is_empty() {
        text.push_str(&format!(
            "; it would preempt {} (and start when {} stopped)",
            preempts.join(", "),
            if preempts.len() == 1 {
                "that job has"
            } else {
                "they have"
            }
        ));
    }
    text
}

/// The models a job accepts: its list, else every pool's.
fn accepted<'a>(fleet: &'a Fleet, spec: &'a JobSpec) -> Vec<&'a str> {
    match &spec.gpu {
        Some(sel) if !sel.models.is_empty() => sel.models.iter().map(String::as_str).collect(),
        _ => fleet.pool_models(),
    }
}

/// Per accepted model, the limit raises to try, smallest first: every
/// queue on the job's path whose limit on that model leaves no room for
/// it, raised to what the running jobs use plus the request, then to that
/// plus what this plan places (when different). Nothing for a model whose
/// limits leave room.
fn limit_candidates<'a>(
    fleet: &'a Fleet,
    usage: &Usage<'a>,
    job: &'a Object<JobSpec>,
) -> Vec<Vec<Vec<Change>>> {
    let request = job.spec.total_gpus();
    let path = usage.path(job.spec.queue.as_str());
    let mut out = Vec::new();
    for model in accepted(fleet, &job.spec) {
        let mut low = Vec::new();
        let mut high = Vec::new();
        for &queue in &path {
            let Some(limit) = fleet
                .queues
                .iter()
                .find(|q| q.name() == queue)
                .and_then(|q| q.spec.limit(model))
            else {
                continue;
            };
            let (running, placed) = usage.of(queue, model);
            let raise = |used: u64| -> Option<Change> {
                let need = u32::try_from(used + request).unwrap_or(u32::MAX);
                (need > limit).then(|| Change::RaiseLimit {
                    queue: queue.to_string(),
                    model: model.to_string(),
                    from: limit,
                    to: need,
                })
            };
            low.extend(raise(running));
            high.extend(raise(running + placed));
        }
        let mut tries = Vec::new();
        if !low.is_empty() {
            tries.push(low);
        }
        if !high.is_empty() && tries.first() != Some(&high) {
            tries.push(high);
        }
        if !tries.is_empty() {
            out.push(tries);
        }
    }
    out
}

/// Each pool model a job that names its models does not accept yet.
fn model_candidates(fleet: &Fleet, job: &Object<JobSpec>) -> Vec<Vec<Change>> {
    let Some(sel) = job.spec.gpu.as_ref().filter(|s| !s.models.is_empty()) else {
        return Vec::new();
    };
    fleet
        .pool_models()
        .into_iter()
        .filter(|m| !sel.models.iter().any(|own| own == m))
        .map(|m| {
            vec![Change::AcceptModel {
                job: job.name().to_string(),
                model: m.to_string(),
            }]
        })
        .collect()
}

/// A required topology relaxed, smallest step first: each wider required
/// domain (node → rack → zone), then the same level preferred only.
fn topology_candidates(job: &Object<JobSpec>) -> Vec<Vec<Change>> {
    let Some(from) = job.spec.topology else {
        return Vec::new();
    };
    let Some(required) = from.required.filter(|l| *l != TopologyLevel::None) else {
        return Vec::new();
    };
    let wider = [
        TopologyLevel::Node,
        TopologyLevel::Rack,
        TopologyLevel::Zone,
    ]
    .into_iter()
    .filter(|l| *l > required)
    .map(|l| Topology {
        required: Some(l),
        preferred: from.preferred,
    });
    let preferred = Topology {
        required: None,
        preferred: Some(required),
    };
    wider
        .chain(std::iter::once(preferred))
        .map(|to| {
            vec![Change::Topology {
                job: job.name().to_string(),
                from,
                to,
            }]
        })
        .collect()
}

/// The priority classes above the job's, lowest first.
fn priority_candidates(fleet: &Fleet, job: &Object<JobSpec>) -> Vec<Vec<Change>> {
    let current = fleet.priority_class_of(&job.spec);
    let value = current.map_or(i32::MIN, |c| c.spec.value);
    let mut higher: Vec<_> = fleet
        .priority_classes
        .iter()
        .filter(|c| c.spec.value > value)
        .collect();
    higher.sort_by_key(|c| (c.spec.value, c.name().to_string()));
    higher
        .into_iter()
        .map(|c| {
            vec![Change::PriorityClass {
                job: job.name().to_string(),
                from: job.spec.priority_class.clone(),
                to: c.name().to_string(),
                value: c.spec.value,
            }]
        })
        .collect()
}
