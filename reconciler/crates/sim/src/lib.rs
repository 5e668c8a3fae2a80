//! The virtual fleet's physics, pure: one simulated [`World`] whose rules the
//! `sim` executor, the generator (through [`apply_plan`] and [`advance`]),
//! the stability tests and the trace simulator share.
//!
//! The world's rules:
//!
//! - **Place** starts a job on ready nodes' GPUs; a GPU is held by one job at
//!   most (a placement on an unknown or provisioning node, an unknown GPU or a
//!   held one is refused with a [`WorldError`]). Placing a job that already
//!   runs changes nothing.
//! - **A job ends by itself** after its run length, with the exit code of its
//!   `gitfleet/sim-exit-code` annotation (default 0), also during a
//!   preemption's grace period if that comes first. The run length
//!   ([`JobFacts`]) is its `gitfleet/sim-duration` annotation, else, under
//!   [`RunLength::AnnotationOrTimeLimit`] (the `sim` executor), its
//!   `timeLimit`; else it runs until stopped ([`RunLength::Annotation`], the
//!   generator's rule). The trace simulator gives each job its own length.
//! - **Preempt** starts the grace period: the job stops at `now + grace`, and
//!   its GPUs go to the job it was preempted for ([`nominate`]). Preempting a
//!   stopping job keeps its deadline and names the newer preemptor.
//! - **Terminate** and **cancel** stop the job at once; a terminated job is
//!   completed with the action's reason, a cancelled one is not recorded.
//! - **Scale up** adds nodes named as the derived inventory names them
//!   (`pool_node`, names not yet taken; never beyond the pool's `max`),
//!   ready `provision_delay` later (at once without a delay). **Scale down**
//!   removes the pool's named nodes first, then the newest (highest index);
//!   a node running jobs is never removed. **Drain** marks a node.
//! - A node is idle since the moment its last job left or it became ready.
//! - [`World::advance`] makes everything due up to a time happen, in time
//!   order then by name; one step or several give the same world.
//! - Times saturate ([`model::time::after`]); a time that saturates at the end
//!   of `chrono`'s range is never reached: nothing is scheduled for it.
//!
//! The world keeps no queue: first-seen times are the caller's.

pub mod generate;
pub mod world;

use std::collections::{BTreeMap, BTreeSet};

use model::observed::{CompletedJob, NodeGpus, ObservedState, QueuedJob, Timestamp};
use model::plan::{Action, Plan};
use model::spec::Fleet;

pub use world::{
    JobFacts, Rules, RunLength, SIM_DURATION_ANNOTATION, SIM_EXIT_CODE_ANNOTATION, Stop, StopKind,
    World, WorldError, WorldEvent, WorldJob, WorldNode, exit_reason, nominate,
};

/// Carries out `plan` at `now` on the observed state, through a [`World`]
/// under [`Rules::GENERATOR`]: placements start, preemptions begin their
/// grace period, terminated and cancelled jobs stop, pools scale (new nodes
/// appear at once), and pending jobs are recorded as first seen. Nothing
/// that falls due by itself happens here (that is [`advance`]); an action
/// the world refuses (a placement on GPUs that are not free) is skipped.
/// `idleSince` keeps the observation rule: a node first seen idle now is
/// idle since now.
pub fn apply_plan(
    fleet: &Fleet,
    observed: &ObservedState,
    plan: &Plan,
    now: Timestamp,
) -> ObservedState {
    let rules = Rules::GENERATOR;
    let specs = world::spec_index(fleet);
    let (mut world, _) = World::from_observed(fleet, observed, rules, now);
    for action in &plan.actions {
        let spec = action.job().and_then(|job| specs.get(job).copied());
        let facts = JobFacts::of(fleet, spec, &rules);
        // Refused: the action changes nothing (documented above).
        let _ = world.apply(action, &facts, now);
    }
    let mut next = world.to_observed();
    next.time = Some(now);
    next.attained = observed.attained.clone();
    let placed: BTreeSet<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Place { job, .. } => Some(job.as_str()),
            _ => None,
        })
        .collect();
    next.queued = observed
        .queued
        .iter()
        .filter(|q| !placed.contains(q.job.as_str()))
        .cloned()
        .collect();
    drop_lent_nominations(&mut next.queued, plan);
    let known: BTreeSet<String> = next.queued.iter().map(|q| q.job.clone()).collect();
    for p in &plan.pending {
        if !known.contains(&*p.job) {
            next.queued.push(QueuedJob {
                job: p.job.to_string(),
                since: now,
                nominated: Vec::new(),
            });
        }
    }
    refresh_idle(&mut next, observed, now);
    next
}

/// GPUs nominated for a pending job that `plan` gives another job (the
/// nominee could not use them) are no longer nominated for it: no GPU is
/// nominated for two jobs. (The reconciler's rule; [`apply_plan`] and the
/// trace simulator apply it.)
pub fn drop_lent_nominations(queued: &mut [QueuedJob], plan: &Plan) {
    if queued.iter().all(|q| q.nominated.is_empty()) {
        return;
    }
    let taken: BTreeSet<(&str, u32)> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Place { placement, .. } => Some(placement),
            _ => None,
        })
        .flatten()
        .flat_map(|part| part.gpus.iter().map(move |g| (part.node.as_str(), *g)))
        .collect();
    if taken.is_empty() {
        return;
    }
    for q in queued {
        for held in &mut q.nominated {
            held.gpus
                .retain(|g| !taken.contains(&(held.node.as_str(), *g)));
        }
        q.nominated.retain(|held| !held.gpus.is_empty());
    }
}

/// The observed `attained` after `events`: a preempted job's run adds its
/// GPU-seconds (whole seconds × GPUs held); a job that ended (exited,
/// terminated, cancelled) drops out, as the reconcile loop's records do.
fn attained_after(observed: &ObservedState, events: &[WorldEvent]) -> BTreeMap<String, u64> {
    let mut attained = observed.attained.clone();
    for event in events {
        match event {
            WorldEvent::Stopped {
                job,
                at,
                kind: StopKind::Preempt,
                placement,
                ..
            } => {
                let Some(run) = observed.running.iter().find(|r| r.job == *job) else {
                    continue;
                };
                let gpus: u64 = placement.iter().map(|p| p.gpus.len() as u64).sum();
                let secs = u64::try_from((*at - run.started).num_seconds()).unwrap_or(0);
                let entry = attained.entry(job.clone()).or_default();
                *entry = entry.saturating_add(secs.saturating_mul(gpus));
            }
            WorldEvent::Exited { job, .. } | WorldEvent::Stopped { job, .. } => {
                attained.remove(job);
            }
            _ => {}
        }
    }
    attained
}

/// Moves the clock to `to`, through a [`World`] under [`Rules::GENERATOR`]:
/// preempted jobs whose grace period is over stop and go back to pending
/// (their GPUs nominated for the job they were preempted for, in the order of
/// `observed.running`); jobs whose simulated duration (annotation
/// `gitfleet/sim-duration`, else never) has passed complete, with the exit
/// code of `gitfleet/sim-exit-code` (recorded in the order of
/// `observed.running`). `idleSince` keeps the observation rule: a node first
/// seen idle at `to` is idle since `to`.
/// The observed `attained` map is carried on ([`attained_after`]).
pub fn advance(fleet: &Fleet, observed: &ObservedState, to: Timestamp) -> ObservedState {
    let (mut world, _) = World::from_observed(fleet, observed, Rules::GENERATOR, to);
    let mut events = world.advance(to);
    let order: BTreeMap<&str, usize> = observed
        .running
        .iter()
        .enumerate()
        .map(|(i, r)| (r.job.as_str(), i))
        .collect();
    events.sort_by_key(|e| order.get(e.subject()).copied().unwrap_or(usize::MAX));
    let mut next = world.to_observed();
    next.time = Some(to);
    next.queued = observed.queued.clone();
    next.completed = observed.completed.clone();
    next.attained = attained_after(observed, &events);
    for event in &events {
        if let WorldEvent::Stopped {
            placement,
            preempted_for: Some(for_job),
            ..
        } = event
        {
            nominate(&mut next.queued, for_job, placement.clone(), to);
        }
    }
    for event in events {
        if let WorldEvent::Exited { job, at, exit_code } = event {
            next.completed.push(CompletedJob {
                job,
                finished: at,
                exit_code: Some(exit_code),
                reason: Some(exit_reason(exit_code)),
            });
        }
    }
    refresh_idle(&mut next, observed, to);
    next
}

/// `idleSince` as observed at `now`: cleared on nodes with jobs; on the
/// others, what `before` said, else `now`.
fn refresh_idle(state: &mut ObservedState, before: &ObservedState, now: Timestamp) {
    let busy: BTreeSet<&str> = state
        .running
        .iter()
        .flat_map(|r| r.placement.iter().map(|p: &NodeGpus| p.node.as_str()))
        .collect();
    let was: BTreeMap<&str, Option<Timestamp>> = before
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.idle_since))
        .collect();
    let idle: Vec<Option<Timestamp>> = state
        .nodes
        .iter()
        .map(|node| {
            if busy.contains(node.name.as_str()) {
                None
            } else {
                was.get(node.name.as_str()).copied().flatten().or(Some(now))
            }
        })
        .collect();
    for (node, idle_since) in state.nodes.iter_mut().zip(idle) {
        node.idle_since = idle_since;
    }
}
