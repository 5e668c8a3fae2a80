//! The discrete-event loop: the world's ends first, then arrivals, then one
//! plan, its actions carried out by the world (strict FIFO: the engine is
//! shown only each leaf queue's first pending job, and plans again at the
//! same instant while such a head starts).

use std::collections::{BTreeSet, HashMap};

use engine::{PlanInput, Planner};
use model::observed::{ObservedState, QueuedJob, RunningJob};
use model::plan::{Action, Plan};
use model::spec::{Duration, Fleet};
use model::time::{Timestamp, after};
use sim::{JobFacts, Rules, RunLength, StopKind, World, WorldEvent};

use crate::jobs::{Prepared, SimJob, index};
use crate::samples::Samples;
use crate::{Options, Policy, Progress, SimulateError};

/// One job's life in the replay.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobRun {
    /// Whether it arrived (before `--until`).
    pub arrived: bool,
    /// Its first start.
    pub first_start: Option<Timestamp>,
    /// Its end (exit, or termination past its limit).
    pub end: Option<Timestamp>,
    /// How many times it started.
    pub starts: u32,
    /// How many times it was preempted.
    pub preemptions: u32,
    /// GPU-milliseconds held, all runs.
    pub gpu_ms: u128,
    /// GPU-milliseconds of runs cut short by preemption.
    pub lost_gpu_ms: u128,
    /// Terminated at its time limit.
    pub terminated: bool,
    /// Its runs: (start, end); the last one's end is `None` while it runs.
    pub runs: Vec<(Timestamp, Option<Timestamp>)>,
    /// When its current run started.
    running_since: Option<Timestamp>,
    /// Work done in runs cut short by preemption (`--checkpoint` only: what
    /// its next run need not do again).
    done: Duration,
}

/// What the replay observed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// Per job, in the order of [`Prepared::jobs`].
    pub runs: Vec<JobRun>,
    /// The first arrival.
    pub start: Option<Timestamp>,
    /// The last instant.
    pub end: Option<Timestamp>,
    /// ∫ allocated GPUs dt, ∫ GPUs of ready nodes dt (GPU-ms).
    pub alloc: (f64, f64),
    /// The same over the time some job was pending.
    pub alloc_backlog: (f64, f64),
    /// Preempt actions carried out.
    pub preemptions: u64,
    /// Plans computed.
    pub plans: u64,
    /// The time series, when asked for ([`run`]'s `record`).
    pub samples: Option<Samples>,
}

/// How many instants in a row may fall at the same time before the replay
/// gives up (a plan that keeps undoing itself).
const MAX_SAME_INSTANT: u32 = 10_000;

struct Replay<'a> {
    jobs: &'a [SimJob],
    policy: Policy,
    fleet: Fleet,
    /// Where each job sits in `fleet.jobs` (usize::MAX: not there).
    pos: Vec<usize>,
    queued: Vec<QueuedJob>,
    /// Where each job sits in `queued` (usize::MAX: not there).
    qpos: Vec<usize>,
    world: World,
    out: Outcome,
    allocated: u64,
    capacity: u64,
    wakeups: BTreeSet<Timestamp>,
    elastic: bool,
    /// Running jobs whose declared limit ends before their run does.
    over_limit: usize,
    /// What the engine is shown: its nodes kept between plans, its running
    /// jobs kept in step with the world's (in the order they started, as
    /// `World::running_jobs` lists them) rather than rebuilt per plan.
    observed: ObservedState,
    /// Whether the world's nodes changed since `observed.nodes` was taken.
    nodes_stale: bool,
    /// Strict FIFO: each leaf queue's pending jobs (by arrival) and every
    /// job's leaf; `None` under the other policies.
    strict: Option<Strict>,
    /// The engine, keeping its view of the nodes between plans.
    planner: Planner,
    /// `--checkpoint`: a preempted job resumes with the rest of its run.
    checkpoint: bool,
    /// Some queue orders by least attained service: plan again when a
    /// running job reaches its next tier.
    least_attained: bool,
    /// Tests: each plan checked against `engine::plan` on the same input.
    #[cfg(test)]
    checked: bool,
}

/// What strict FIFO keeps: the engine is shown only the first pending job
/// (the head) of each leaf queue.
struct Strict {
    /// Job index → its leaf queue's slot in `pending`.
    leaf: Vec<usize>,
    /// Per leaf queue, its pending jobs (arrival order = index order).
    pending: Vec<BTreeSet<usize>>,
    /// A head started since the last plan and another job took its place.
    new_head: bool,
}

impl Strict {
    fn new(jobs: &[SimJob]) -> Strict {
        let mut slots: HashMap<&str, usize> = HashMap::new();
        let leaf = jobs
            .iter()
            .map(|j| {
                let next = slots.len();
                *slots.entry(j.queue()).or_insert(next)
            })
            .collect();
        Strict {
            leaf,
            pending: vec![BTreeSet::new(); slots.len()],
            new_head: false,
        }
    }
}

/// Replays the prepared jobs on `fleet`; with `record`, keeps the
/// [`Samples`] of every event instant.
pub(crate) fn run(
    fleet: &Fleet,
    prepared: &Prepared,
    options: &Options,
    record: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome, SimulateError> {
    run_with(fleet, prepared, options, record, progress, false)
}

/// [`run`]; `checked` (tests): every plan compared with `engine::plan`'s.
fn run_with(
    fleet: &Fleet,
    prepared: &Prepared,
    options: &Options,
    record: bool,
    progress: &mut dyn FnMut(Progress),
    #[cfg_attr(not(test), allow(unused_variables))] checked: bool,
) -> Result<Outcome, SimulateError> {
    let jobs = &prepared.jobs;
    let origin = crate::origin();
    let rules = Rules {
        provision_delay: Duration::ZERO,
        run_length: RunLength::Annotation,
    };
    let mut base = fleet.clone();
    base.jobs.clear();
    base.policies.clear();
    let world = World::from_fleet(&base, rules, jobs.first().map_or(origin, |j| j.submit));
    let elastic = base.pools.iter().any(|p| p.spec.size.min < p.spec.size.max);
    let least_attained = base.orders_by_attained_service();
    let mut r = Replay {
        jobs,
        policy: options.policy,
        fleet: base,
        pos: vec![usize::MAX; jobs.len()],
        queued: Vec::new(),
        qpos: vec![usize::MAX; jobs.len()],
        world,
        out: Outcome {
            runs: vec![JobRun::default(); jobs.len()],
            samples: record.then(|| Samples::new(fleet, jobs)),
            ..Outcome::default()
        },
        allocated: 0,
        capacity: 0,
        wakeups: BTreeSet::new(),
        elastic,
        over_limit: 0,
        observed: ObservedState::default(),
        nodes_stale: true,
        strict: options.policy.strict().then(|| Strict::new(jobs)),
        planner: Planner::new(),
        checkpoint: options.checkpoint,
        least_attained,
        #[cfg(test)]
        checked,
    };
    r.recount_capacity();
    let until = options.until.map(|u| after(origin, u));
    let total = jobs.len() as u64;
    let mut next_arrival = 0usize;
    let mut last: Option<Timestamp> = None;
    let mut same = 0u32;
    loop {
        let candidates = [
            jobs.get(next_arrival).map(|j| j.submit),
            r.world.next_event(),
            r.wakeups.first().copied(),
        ];
        let Some(now) = candidates.into_iter().flatten().min() else {
            break;
        };
        if let Some(until) = until
            && now > until
        {
            r.integrate(last, until);
            last = Some(until);
            break;
        }
        same = if last == Some(now) { same + 1 } else { 0 };
        if same > MAX_SAME_INSTANT {
            return Err(SimulateError::Livelock { at: now });
        }
        r.integrate(last, now);
        last = Some(now);
        r.wakeups.retain(|w| *w > now);
        // Completions (and the ends of grace periods) first.
        let events = r.world.advance(now);
        r.world.take_completed();
        for event in events {
            r.on_event(event);
        }
        // Then arrivals.
        while let Some(job) = jobs.get(next_arrival).filter(|j| j.submit <= now) {
            r.arrive(next_arrival, job);
            next_arrival += 1;
        }
        // Then one plan (strict FIFO: again while a head started and
        // another job of its queue became the head).
        if !r.queued.is_empty() || r.elastic || r.over_limit > 0 {
            loop {
                let plan = r.plan(now);
                r.carry_out(&plan, now)?;
                if r.out.plans.is_multiple_of(256) {
                    progress(Progress {
                        arrived: next_arrival as u64,
                        total,
                        plans: r.out.plans,
                    });
                }
                if !r
                    .strict
                    .as_mut()
                    .is_some_and(|s| std::mem::take(&mut s.new_head))
                {
                    break;
                }
            }
        }
        if r.elastic {
            r.wake_for_scale_down(now);
        }
        if let Some(samples) = &mut r.out.samples {
            samples.push(now, r.allocated, r.capacity);
        }
    }
    progress(Progress {
        arrived: next_arrival as u64,
        total,
        plans: r.out.plans,
    });
    r.out.start = jobs.first().map(|j| j.submit);
    r.out.end = last;
    Ok(r.out)
}

impl Replay<'_> {
    /// Adds the time from `from` to `to` under the current allocation.
    fn integrate(&mut self, from: Option<Timestamp>, to: Timestamp) {
        let Some(from) = from else { return };
        let dt = (to - from).num_milliseconds().max(0) as f64;
        let (a, c) = (self.allocated as f64 * dt, self.capacity as f64 * dt);
        self.out.alloc.0 += a;
        self.out.alloc.1 += c;
        if !self.queued.is_empty() {
            self.out.alloc_backlog.0 += a;
            self.out.alloc_backlog.1 += c;
        }
    }

    fn recount_capacity(&mut self) {
        self.nodes_stale = true;
        self.capacity = self
            .world
            .nodes()
            .filter(|n| n.ready_at.is_none())
            .map(|n| n.node.gpus.len() as u64)
            .sum();
    }

    fn arrive(&mut self, i: usize, job: &SimJob) {
        self.out.runs[i].arrived = true;
        if self.strict.is_none() {
            self.pos[i] = self.fleet.jobs.len();
            self.fleet.jobs.push(job.object.clone());
        }
        self.enqueue(i, self.policy.since(job.submit, None, job.duration));
    }

    fn enqueue(&mut self, i: usize, since: Timestamp) {
        if let Some(samples) = &mut self.out.samples {
            samples.queued(i);
        }
        if let Some(strict) = &mut self.strict {
            let list = &mut strict.pending[strict.leaf[i]];
            let head = list.first().copied();
            list.insert(i);
            match head {
                // Behind the head: the engine does not see it.
                Some(h) if h < i => self.hide(i),
                // The new head (a job preempted back ahead of it).
                _ => {
                    if let Some(h) = head {
                        self.hide(h);
                    }
                    self.show(i);
                }
            }
        }
        self.qpos[i] = self.queued.len();
        self.queued.push(QueuedJob {
            job: self.jobs[i].object.metadata.name.clone(),
            since,
            nominated: Vec::new(),
        });
    }

    fn dequeue(&mut self, i: usize) {
        let p = std::mem::replace(&mut self.qpos[i], usize::MAX);
        if p == usize::MAX {
            return;
        }
        if let Some(samples) = &mut self.out.samples {
            samples.unqueued(i);
        }
        if let Some(strict) = &mut self.strict {
            let list = &mut strict.pending[strict.leaf[i]];
            let was_head = list.first() == Some(&i);
            list.remove(&i);
            if let Some(next) = list.first().copied().filter(|_| was_head) {
                strict.new_head = true;
                self.show(next);
            }
        }
        self.queued.swap_remove(p);
        if let Some(moved) = self.queued.get(p).and_then(|q| index(&q.job)) {
            self.qpos[moved] = p;
        }
    }

    /// Takes job `i` out of the fleet's documents.
    fn hide(&mut self, i: usize) {
        let p = std::mem::replace(&mut self.pos[i], usize::MAX);
        if p == usize::MAX {
            return;
        }
        self.fleet.jobs.swap_remove(p);
        if let Some(moved) = self.fleet.jobs.get(p).and_then(|j| index(j.name())) {
            self.pos[moved] = p;
        }
    }

    /// Puts job `i` back into the fleet's documents.
    fn show(&mut self, i: usize) {
        if self.pos[i] == usize::MAX {
            self.pos[i] = self.fleet.jobs.len();
            self.fleet.jobs.push(self.jobs[i].object.clone());
        }
    }

    /// Job `i`'s current run ends at `at`.
    fn stop_run(&mut self, i: usize, at: Timestamp, preempted: bool) {
        let job = &self.jobs[i];
        let run = &mut self.out.runs[i];
        if let Some(last) = run.runs.last_mut().filter(|r| r.1.is_none()) {
            last.1 = Some(at);
        }
        if let Some(since) = run.running_since.take() {
            if let Some(p) = running_at(&self.observed.running, &job.object.metadata.name, since) {
                self.observed.running.remove(p);
            }
            let ms = (at - since).num_milliseconds().max(0) as u128;
            let gpu_ms = ms * u128::from(job.gpus);
            run.gpu_ms += gpu_ms;
            if preempted {
                if self.checkpoint {
                    run.done = Duration::from_millis(
                        (run.done.as_millis() as u128 + ms).min(u128::from(u64::MAX)) as u64,
                    );
                } else {
                    run.lost_gpu_ms += gpu_ms;
                }
                // Its attained service while it waits.
                let secs = u64::try_from(run.gpu_ms / 1000).unwrap_or(u64::MAX);
                self.observed
                    .attained
                    .insert(job.object.metadata.name.clone(), secs);
            }
            self.allocated = self.allocated.saturating_sub(job.gpus);
            if job.limit().is_some_and(|l| l < job.duration) {
                self.over_limit = self.over_limit.saturating_sub(1);
            }
        }
    }

    fn finish(&mut self, i: usize, at: Timestamp, terminated: bool) {
        self.stop_run(i, at, false);
        self.observed
            .attained
            .remove(&self.jobs[i].object.metadata.name);
        let run = &mut self.out.runs[i];
        run.end = Some(at);
        run.terminated = terminated;
        self.hide(i);
        self.dequeue(i);
    }

    fn on_event(&mut self, event: WorldEvent) {
        match event {
            WorldEvent::Exited { job, at, .. } => {
                if let Some(i) = index(&job) {
                    self.finish(i, at, false);
                }
            }
            WorldEvent::Stopped {
                job,
                at,
                kind,
                placement,
                preempted_for,
            } => {
                let Some(i) = index(&job) else { return };
                match kind {
                    StopKind::Preempt => {
                        self.stop_run(i, at, true);
                        let job = &self.jobs[i];
                        let since = self.policy.since(job.submit, Some(at), job.duration);
                        self.enqueue(i, since);
                        let target = preempted_for.as_deref().and_then(index);
                        if let Some(p) = target.map(|t| self.qpos[t]).filter(|p| *p != usize::MAX) {
                            self.queued[p].nominated.extend(placement);
                        }
                    }
                    StopKind::Terminate | StopKind::Cancel => self.finish(i, at, true),
                }
            }
            WorldEvent::NodeReady { .. } => self.recount_capacity(),
        }
    }

    /// The engine's plan on the current state.
    fn plan(&mut self, now: Timestamp) -> Plan {
        self.out.plans += 1;
        // The nodes as observed: kept between plans while the node set
        // stands still, unless a pool is elastic (then `idleSince`, which
        // scale-down reads, must be fresh). Fixed pools never scale down,
        // and nothing else in a plan reads `idleSince`.
        let same_nodes = !self.nodes_stale;
        if self.elastic || self.nodes_stale {
            self.observed.nodes = self.world.ready_nodes();
            // By name (the world's names are unique): the engine orders
            // nodes by name and need not sort them again at every plan.
            // Nothing in a plan depends on the observed order otherwise.
            self.observed
                .nodes
                .sort_unstable_by(|a, b| a.name.cmp(&b.name));
            self.nodes_stale = false;
        }
        self.observed.time = Some(now);
        debug_assert!(self.observed.running == self.world.running_jobs());
        self.observed.queued = std::mem::take(&mut self.queued);
        let input = PlanInput {
            fleet: &self.fleet,
            observed: &self.observed,
            now,
            revision: None,
        };
        // The node set stands still (`idleSince` aside) unless marked
        // stale: the engine need not compare it with the one it keeps.
        let plan = if same_nodes {
            self.planner.plan_same_nodes(&input)
        } else {
            self.planner.plan(&input)
        };
        #[cfg(test)]
        if self.checked {
            assert_eq!(
                plan,
                engine::plan(&input),
                "plan {} at {now}",
                self.out.plans
            );
        }
        self.queued = std::mem::take(&mut self.observed.queued);
        plan
    }

    fn carry_out(&mut self, plan: &Plan, now: Timestamp) -> Result<(), SimulateError> {
        let refused = |error| SimulateError::World { at: now, error };
        let mut rescaled = false;
        for action in &plan.actions {
            let i = action.job().and_then(index);
            match (action, i) {
                (Action::Place { job, placement, .. }, Some(i)) => {
                    let sim = &self.jobs[i];
                    let rest = Duration::from_millis(
                        sim.duration
                            .as_millis()
                            .saturating_sub(self.out.runs[i].done.as_millis()),
                    );
                    let facts = JobFacts {
                        run_length: Some(rest),
                        exit_code: 0,
                        grace: sim.grace,
                        ..JobFacts::default()
                    };
                    self.world
                        .start(job, placement, &facts, now)
                        .map_err(refused)?;
                    if let Some(started) = self.world.job(job) {
                        self.observed.running.push(started.to_running());
                    }
                    self.dequeue(i);
                    let run = &mut self.out.runs[i];
                    run.first_start.get_or_insert(now);
                    run.starts += 1;
                    run.running_since = Some(now);
                    run.runs.push((now, None));
                    self.allocated += sim.gpus;
                    if let Some(limit) = sim.limit().filter(|l| *l < sim.duration) {
                        self.over_limit += 1;
                        self.wakeups.insert(after(now, limit));
                    }
                    if self.least_attained {
                        // Plan again when it reaches its next tiers.
                        let before = u64::try_from(run.gpu_ms / 1000).unwrap_or(u64::MAX);
                        let gpus = sim.gpus.max(1);
                        for bound in engine::ATTAINED_TIER_BOUNDS {
                            if let Some(need) = bound.checked_sub(before).filter(|n| *n > 0) {
                                let at = Duration::from_secs(need.div_ceil(gpus));
                                if at < rest {
                                    self.wakeups.insert(after(now, at));
                                }
                            }
                        }
                    }
                }
                (Action::Preempt { job, for_job, .. }, Some(i)) => {
                    if self.world.job(job).is_some_and(|j| j.stop.is_none()) {
                        self.out.preemptions += 1;
                        self.out.runs[i].preemptions += 1;
                    }
                    self.world.preempt(job, for_job, self.jobs[i].grace, now);
                    let since = self.out.runs[i].running_since;
                    let at = since.and_then(|t| running_at(&self.observed.running, job, t));
                    if let (Some(p), Some(stopping)) = (at, self.world.job(job)) {
                        self.observed.running[p] = stopping.to_running();
                    }
                }
                (Action::Terminate { job, reason }, Some(_)) => {
                    for event in self.world.stop(job, StopKind::Terminate, Some(reason), now) {
                        self.on_event(event);
                    }
                }
                (Action::Cancel { job, reason }, Some(_)) => {
                    for event in self.world.stop(job, StopKind::Cancel, Some(reason), now) {
                        self.on_event(event);
                    }
                }
                (Action::Scale { pool, to, .. }, _)
                    if (*to as usize) > self.world.pool_nodes(pool).count() =>
                {
                    let facts = JobFacts::default();
                    self.world.apply(action, &facts, now).map_err(refused)?;
                    rescaled = true;
                    // New nodes: plan again at once (the loop's next turn).
                    self.wakeups.insert(now);
                }
                (Action::Scale { .. } | Action::Drain { .. }, _) => {
                    let facts = JobFacts::default();
                    self.world.apply(action, &facts, now).map_err(refused)?;
                    rescaled = true;
                }
                _ => {}
            }
        }
        sim::drop_lent_nominations(&mut self.queued, plan);
        self.world.take_completed();
        if rescaled {
            self.recount_capacity();
            // Nominations on nodes a scale-down removed are void.
            let world = &self.world;
            for q in &mut self.queued {
                q.nominated.retain(|held| world.node(&held.node).is_some());
            }
        }
        Ok(())
    }

    /// An idle node of an elastic pool above its minimum is looked at
    /// again when it has been idle for its pool's `scaleDownAfter`.
    fn wake_for_scale_down(&mut self, now: Timestamp) {
        for pool in &self.fleet.pools {
            let nodes: Vec<_> = self.world.pool_nodes(pool.name()).collect();
            if nodes.len() as u64 <= u64::from(pool.spec.size.min) {
                continue;
            }
            let wait = pool.spec.scale_down_after();
            let due = nodes
                .iter()
                .filter_map(|n| n.node.idle_since)
                .map(|idle| after(idle, wait))
                .filter(|t| *t > now)
                .min();
            if let Some(due) = due {
                self.wakeups.insert(due);
            }
        }
    }
}

/// Where job `name`, which started at `since`, sits in `running` (in the
/// order jobs started, so sorted by start time).
fn running_at(running: &[RunningJob], name: &str, since: Timestamp) -> Option<usize> {
    let from = running.partition_point(|r| r.started < since);
    running[from..]
        .iter()
        .take_while(|r| r.started == since)
        .position(|r| r.job == name)
        .map(|p| from + p)
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
