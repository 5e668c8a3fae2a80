//! When pending jobs are expected to start: an upper bound like Slurm's
//! `squeue --start`, from one simulation of the fleet with no new jobs.
//!
//! The simulated [`World`] starts from the observed state; running jobs end
//! at their declared time limits (a job without one runs on for ever);
//! preempted jobs stop when their grace period ends; the engine is re-run at
//! every instant something ends, and its actions are carried out (placed
//! jobs run to their own limits). A job's expected start is the first plan
//! that places it. New nodes are ready at once (the plan does not know a
//! fleet's provisioning time). The bound holds as long as no job with a
//! stronger claim arrives and the specs stay as they are.

use std::collections::{BTreeMap, HashMap, HashSet};

use engine::{PlanInput, plan};
use model::observed::{NodeGpus, ObservedState, QueuedJob};
use model::plan::{Action, Plan};
use model::spec::{Duration, Fleet, JobSpec, Object};
use model::time::{Timestamp, after};
use serde::Serialize;
use sim::{JobFacts, Rules, RunLength, Stop, StopKind, World, WorldEvent, WorldJob};

/// How far the simulation looks ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Horizon {
    /// Virtual time after `now` it stops at.
    pub until: Duration,
    /// Engine runs after which it stops.
    pub max_plans: usize,
}

impl Horizon {
    /// 30 days, 200 plans.
    pub const DEFAULT: Horizon = Horizon {
        until: Duration::from_secs(30 * 24 * 3600),
        max_plans: 200,
    };
}

/// What the simulation says about one pending job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartStatus {
    /// It starts at `at` at the latest.
    Expected,
    /// Not before the simulation's horizon, `at`.
    Later,
    /// Running jobs without a time limit hold what it needs: no bound.
    Unknown,
    /// Nothing that ends lets it run: the fleet as declared never will.
    Never,
}

/// A pending job's expected start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpectedStart {
    /// Expected, later, unknown or never.
    pub status: StartStatus,
    /// RFC 3339: the latest start (`expected`), or the horizon (`later`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// `expected`: the running jobs whose ends let it start; `unknown`: the
    /// running jobs without a time limit it waits behind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits_for: Vec<String>,
    /// In words.
    pub text: String,
}

/// How many jobs a sentence names before "and N more".
const NAMED: usize = 3;

/// The expected start of each pending job of `plan` (the plan of `input`),
/// or only of `jobs` when given (the simulation stops once they are all
/// placed). One simulation, whatever the number of jobs.
pub fn expected_starts(
    input: &PlanInput,
    plan: &Plan,
    jobs: Option<&[&str]>,
    horizon: Horizon,
) -> BTreeMap<String, ExpectedStart> {
    let pending: HashSet<&str> = plan.pending.iter().map(|p| &*p.job).collect();
    let mut open: HashSet<String> = match jobs {
        Some(jobs) => jobs
            .iter()
            .filter(|j| pending.contains(*j))
            .map(|j| j.to_string())
            .collect(),
        None => pending.iter().map(|j| j.to_string()).collect(),
    };
    let mut out = BTreeMap::new();
    if open.is_empty() {
        return out;
    }
    let mut reasons: HashMap<String, String> = plan
        .pending
        .iter()
        .filter(|p| open.contains(&*p.job))
        .map(|p| (p.job.to_string(), p.reason.to_string()))
        .collect();
    let mut sim = Sim::new(input.fleet, input.observed, input.now);
    sim.carry_out(plan, input.now);
    let end = after(input.now, horizon.until);
    let mut plans = 0usize;
    let mut last = input.now;
    let stalled = loop {
        if open.is_empty() {
            break false;
        }
        if plans >= horizon.max_plans {
            break false;
        }
        let Some(t) = sim.world.next_event() else {
            break true;
        };
        if t > end {
            last = end;
            break false;
        }
        last = t;
        let ending = sim.ending_by(t);
        sim.advance(t);
        // New nodes are ready at once: a plan that scales up is followed by
        // another at the same instant (a few at most).
        for _ in 0..3 {
            plans += 1;
            let next = sim.plan(t, input.revision);
            for action in &next.actions {
                if let Action::Place { job, placement, .. } = action
                    && open.remove(job.as_str())
                {
                    out.insert(job.clone(), expected(t, placement, &ending));
                }
            }
            for p in &next.pending {
                if let Some(r) = reasons.get_mut(&*p.job) {
                    *r = p.reason.to_string();
                }
            }
            let rescaled = sim.carry_out(&next, t);
            if !rescaled || open.is_empty() {
                break;
            }
        }
    };
    for job in open {
        let entry = if stalled {
            not_ending(&sim, &job, reasons.get(&job).map_or("", String::as_str))
        } else {
            ExpectedStart {
                status: StartStatus::Later,
                at: Some(timestamp(last)),
                waits_for: Vec::new(),
                text: format!(
                    "not before {} (as far as the simulation looked)",
                    timestamp(last)
                ),
            }
        };
        out.insert(job, entry);
    }
    out
}

/// A job placed at `t` on `placement`, after `ending` (the jobs that left
/// at `t`, with their GPUs).
fn expected(
    t: Timestamp,
    placement: &[NodeGpus],
    ending: &[(String, Vec<NodeGpus>)],
) -> ExpectedStart {
    let overlaps = |held: &[NodeGpus]| {
        held.iter().any(|h| {
            placement
                .iter()
                .any(|p| p.node == h.node && p.gpus.iter().any(|g| h.gpus.contains(g)))
        })
    };
    let mut waits: Vec<String> = ending
        .iter()
        .filter(|(_, held)| overlaps(held))
        .map(|(j, _)| j.clone())
        .collect();
    if waits.is_empty() {
        waits = ending.iter().map(|(j, _)| j.clone()).collect();
    }
    waits.sort();
    let at = timestamp(t);
    let text = if waits.is_empty() {
        format!("by {at}")
    } else {
        format!(
            "by {at}, when {} end{} (time limit or grace period)",
            names(&waits),
            if waits.len() == 1 { "s" } else { "" }
        )
    };
    ExpectedStart {
        status: StartStatus::Expected,
        at: Some(at),
        waits_for: waits,
        text,
    }
}

/// A job still pending when nothing is left to end: unknown when running
/// jobs without a time limit hold GPUs it could use (else any such job),
/// never when there is none.
fn not_ending(sim: &Sim, job: &str, reason: &str) -> ExpectedStart {
    let models: Option<&[String]> = sim
        .specs
        .get(job)
        .and_then(|s| s.spec.gpu.as_ref())
        .map(|g| g.models.as_slice())
        .filter(|m| !m.is_empty());
    let endless: Vec<&WorldJob> = sim.world.jobs().filter(|j| j.ends_at().is_none()).collect();
    let uses = |j: &WorldJob| {
        models.is_none_or(|models| {
            j.placement.iter().any(|p| {
                sim.world
                    .node(&p.node)
                    .and_then(|n| n.node.gpus.first())
                    .is_some_and(|g| models.contains(&g.model))
            })
        })
    };
    let mut blocking: Vec<String> = endless
        .iter()
        .filter(|j| uses(j))
        .map(|j| j.job.clone())
        .collect();
    if blocking.is_empty() {
        blocking = endless.iter().map(|j| j.job.clone()).collect();
    }
    if blocking.is_empty() {
        return ExpectedStart {
            status: StartStatus::Never,
            at: None,
            waits_for: Vec::new(),
            text: format!("never, as the fleet is declared: {reason}"),
        };
    }
    blocking.sort();
    let text = format!(
        "unknown: {} run{} without a time limit",
        names(&blocking),
        if blocking.len() == 1 { "s" } else { "" }
    );
    ExpectedStart {
        status: StartStatus::Unknown,
        at: None,
        waits_for: blocking,
        text,
    }
}

/// `a`, `a and b`, `a, b, c and 4 more`.
fn names(jobs: &[String]) -> String {
    if jobs.len() > NAMED {
        return format!(
            "{} and {} more",
            jobs[..NAMED].join(", "),
            jobs.len() - NAMED
        );
    }
    match jobs.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The simulated fleet.
struct Sim<'a> {
    fleet: &'a Fleet,
    specs: HashMap<&'a str, &'a Object<JobSpec>>,
    world: World,
    queued: Vec<QueuedJob>,
}

/// Run lengths are set per job (time limits), never by the rules.
const RULES: Rules = Rules {
    provision_delay: Duration::ZERO,
    run_length: RunLength::Annotation,
};

impl<'a> Sim<'a> {
    fn new(fleet: &'a Fleet, observed: &ObservedState, now: Timestamp) -> Self {
        let specs: HashMap<&str, &Object<JobSpec>> =
            fleet.jobs.iter().map(|j| (j.name(), j)).collect();
        let bare = ObservedState {
            time: observed.time,
            nodes: observed.nodes.clone(),
            running: Vec::new(),
            queued: Vec::new(),
            completed: observed.completed.clone(),
            attained: observed.attained.clone(),
        };
        let (mut world, _) = World::from_observed(fleet, &bare, RULES, now);
        for run in &observed.running {
            let spec = specs.get(run.job.as_str()).copied();
            let grace = fleet.grace_period_of(spec.map(|s| &s.spec));
            let job = WorldJob {
                job: run.job.clone(),
                placement: run.placement.clone(),
                started: run.started,
                run_length: spec.and_then(|s| s.spec.time_limit),
                exit_code: 0,
                stop: run.preempting_since.map(|since| Stop {
                    kind: StopKind::Preempt,
                    since,
                    ends: after(since, grace),
                    for_job: run.preempted_for.clone(),
                    reason: None,
                }),
                restart: run.restart.clone(),
                spec_digest: run.spec_digest.clone(),
            };
            // A job the world cannot seat is one `parse_observed` rejects.
            let _ = world.add_job(job);
        }
        Sim {
            fleet,
            specs,
            world,
            queued: observed.queued.clone(),
        }
    }

    /// The jobs that leave the world at `t` and their GPUs.
    fn ending_by(&self, t: Timestamp) -> Vec<(String, Vec<NodeGpus>)> {
        self.world
            .jobs()
            .filter(|j| j.ends_at().is_some_and(|e| e <= t))
            .map(|j| (j.job.clone(), j.placement.clone()))
            .collect()
    }

    /// Moves to `t`: a preempted job's GPUs go to the job it made room for.
    fn advance(&mut self, t: Timestamp) {
        for event in self.world.advance(t) {
            if let WorldEvent::Stopped {
                placement,
                preempted_for: Some(for_job),
                at,
                ..
            } = event
            {
                sim::nominate(&mut self.queued, &for_job, placement, at);
            }
        }
    }

    fn plan(&mut self, t: Timestamp, revision: Option<&str>) -> Plan {
        let mut observed = self.world.to_observed();
        observed.time = Some(t);
        observed.queued = std::mem::take(&mut self.queued);
        let next = plan(&PlanInput {
            fleet: self.fleet,
            observed: &observed,
            now: t,
            revision,
        });
        self.queued = observed.queued;
        next
    }

    /// Carries out `plan` at `t` (a placed job runs to its time limit) and
    /// keeps the queue entries as the reconciler does. Returns whether a
    /// pool grew.
    fn carry_out(&mut self, plan: &Plan, t: Timestamp) -> bool {
        let mut grew = false;
        for action in &plan.actions {
            let spec = action.job().and_then(|j| self.specs.get(j).copied());
            let grace = self.fleet.grace_period_of(spec.map(|s| &s.spec));
            match action {
                Action::Place { job, placement, .. } => {
                    let mut facts = JobFacts::with_grace(spec, grace, &RULES);
                    facts.run_length = spec.and_then(|s| s.spec.time_limit);
                    facts.exit_code = 0;
                    // Refused only for GPUs not free: the plan's own rule.
                    let _ = self.world.start(job, placement, &facts, t);
                }
                Action::Preempt { job, for_job, .. } => {
                    self.world.preempt(job, for_job, grace, t);
                }
                Action::Scale { pool, to, .. } => {
                    grew |= (*to as usize) > self.world.pool_nodes(pool).count();
                    let _ = self.world.apply(action, &JobFacts::default(), t);
                }
                Action::Terminate { .. } | Action::Cancel { .. } | Action::Drain { .. } => {
                    let _ = self.world.apply(action, &JobFacts::default(), t);
                }
            }
        }
        let placed: HashSet<&str> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Place { job, .. } => Some(job.as_str()),
                _ => None,
            })
            .collect();
        self.queued.retain(|q| !placed.contains(q.job.as_str()));
        sim::drop_lent_nominations(&mut self.queued, plan);
        let world = &self.world;
        for q in &mut self.queued {
            q.nominated.retain(|held| world.node(&held.node).is_some());
        }
        let new: Vec<QueuedJob> = {
            let known: HashSet<&str> = self.queued.iter().map(|q| q.job.as_str()).collect();
            plan.pending
                .iter()
                .filter(|p| !known.contains(&*p.job))
                .map(|p| QueuedJob {
                    job: p.job.to_string(),
                    since: t,
                    nominated: Vec::new(),
                })
                .collect()
        };
        self.queued.extend(new);
        grew
    }
}

/// RFC 3339 UTC to the second, as the plan writes its time.
fn timestamp(t: Timestamp) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
