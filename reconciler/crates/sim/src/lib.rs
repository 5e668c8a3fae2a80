//! The virtual fleet's physics, pure: what the observed state becomes when a
//! plan is carried out, and when time passes. The `sim` executor and the
//! stability tests are built on it.

pub mod generate;

use std::collections::{BTreeMap, BTreeSet};

use model::observed::{
    CompletedJob, NodeGpus, ObservedState, QueuedJob, RunningJob, Timestamp, pool_node,
};
use model::plan::{Action, Plan};
use model::spec::{Duration, Fleet};
use model::time::after;

/// The annotation that says how long a job runs in the simulator.
pub const SIM_DURATION_ANNOTATION: &str = "gitfleet/sim-duration";

/// Carries out `plan` at `now`: placements start, preemptions begin their
/// grace period, terminated and cancelled jobs stop, pools scale (new nodes
/// appear at once), and pending jobs are recorded as first seen.
pub fn apply_plan(
    fleet: &Fleet,
    observed: &ObservedState,
    plan: &Plan,
    now: Timestamp,
) -> ObservedState {
    let mut next = observed.clone();
    next.time = Some(now);
    let mut stopped: BTreeSet<&str> = BTreeSet::new();
    for action in &plan.actions {
        match action {
            Action::Place { job, placement, .. } => {
                next.queued.retain(|q| &q.job != job);
                next.running.push(RunningJob {
                    job: job.clone(),
                    started: now,
                    placement: placement.clone(),
                    preempting_since: None,
                    preempted_for: None,
                });
            }
            Action::Preempt { job, for_job, .. } => {
                if let Some(run) = next.running.iter_mut().find(|r| &r.job == job) {
                    run.preempting_since.get_or_insert(now);
                    run.preempted_for = Some(for_job.clone());
                }
            }
            Action::Terminate { job, reason } => {
                stopped.insert(job);
                next.completed.push(CompletedJob {
                    job: job.clone(),
                    finished: now,
                    exit_code: None,
                    reason: Some(reason.clone()),
                });
            }
            Action::Cancel { job, .. } => {
                stopped.insert(job);
            }
            Action::Scale {
                pool,
                from,
                to,
                nodes,
                ..
            } => scale(fleet, &mut next, pool, *from, *to, nodes),
            Action::Drain { .. } => {}
        }
    }
    next.running.retain(|r| !stopped.contains(r.job.as_str()));
    let known: BTreeSet<String> = next.queued.iter().map(|q| q.job.clone()).collect();
    for p in &plan.pending {
        if !known.contains(&p.job) {
            next.queued.push(QueuedJob {
                job: p.job.clone(),
                since: now,
                nominated: Vec::new(),
            });
        }
    }
    refresh_idle(&mut next, now);
    next
}

fn scale(
    fleet: &Fleet,
    next: &mut ObservedState,
    pool: &str,
    from: u32,
    to: u32,
    remove: &[String],
) {
    if to < from {
        let gone: BTreeSet<&String> = remove.iter().collect();
        next.nodes.retain(|n| !gone.contains(&n.name));
        return;
    }
    let Some(spec) = fleet.pools.iter().find(|p| p.name() == pool) else {
        return;
    };
    let mut k = 0;
    let mut added = 0;
    while added < to - from {
        let node = pool_node(pool, &spec.spec, k);
        k += 1;
        if next.nodes.iter().any(|n| n.name == node.name) {
            continue;
        }
        next.nodes.push(node);
        added += 1;
    }
}

/// Moves the clock to `to`: preempted jobs whose grace period is over stop
/// and go back to pending (keeping their first-seen time); jobs whose
/// simulated duration (annotation `gitfleet/sim-duration`, else never)
/// has passed complete.
pub fn advance(fleet: &Fleet, observed: &ObservedState, to: Timestamp) -> ObservedState {
    let mut next = observed.clone();
    next.time = Some(to);
    let specs: BTreeMap<&str, &model::spec::Object<model::spec::JobSpec>> =
        fleet.jobs.iter().map(|j| (j.name(), j)).collect();
    let grace_of = |job: &str| fleet.grace_period_of(specs.get(job).map(|j| &j.spec));
    let mut finished = Vec::new();
    let mut freed_for: Vec<(String, Vec<NodeGpus>)> = Vec::new();
    next.running.retain(|run| {
        if let Some(since) = run.preempting_since
            && after(since, grace_of(&run.job)) <= to
        {
            // Its grace period is over: it stops and is pending again (and
            // gets a new first-seen time when the next plan lists it); its
            // GPUs are kept for the job it was preempted for.
            if let Some(for_job) = &run.preempted_for {
                freed_for.push((for_job.clone(), run.placement.clone()));
            }
            return false;
        }
        let duration = specs
            .get(run.job.as_str())
            .and_then(|j| j.metadata.annotations.get(SIM_DURATION_ANNOTATION))
            .and_then(|d| d.parse::<Duration>().ok());
        if let Some(d) = duration
            && after(run.started, d) <= to
        {
            finished.push((run.job.clone(), after(run.started, d)));
            return false;
        }
        true
    });
    for (job, gpus) in freed_for {
        match next.queued.iter_mut().find(|q| q.job == job) {
            Some(q) => q.nominated.extend(gpus),
            None => next.queued.push(QueuedJob {
                job,
                since: to,
                nominated: gpus,
            }),
        }
    }
    for (job, at) in finished {
        next.completed.push(CompletedJob {
            job,
            finished: at,
            exit_code: Some(0),
            reason: Some("succeeded".to_string()),
        });
    }
    refresh_idle(&mut next, to);
    next
}

/// `idleSince` for nodes without jobs, cleared on nodes with jobs.
fn refresh_idle(state: &mut ObservedState, now: Timestamp) {
    let busy: BTreeSet<&str> = state
        .running
        .iter()
        .flat_map(|r| r.placement.iter().map(|p: &NodeGpus| p.node.as_str()))
        .collect();
    let busy: BTreeSet<String> = busy.into_iter().map(str::to_string).collect();
    for node in &mut state.nodes {
        if busy.contains(&node.name) {
            node.idle_since = None;
        } else if node.idle_since.is_none() {
            node.idle_since = Some(now);
        }
    }
}
