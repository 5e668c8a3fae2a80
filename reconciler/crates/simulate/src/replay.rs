//! The discrete-event loop: the world's ends first, then arrivals, then one
//! plan (strict FIFO: the engine re-run on fewer jobs until no job passes
//! its queue's blocked head), its actions carried out by the world.

use std::collections::{BTreeMap, BTreeSet};

use engine::{PlanInput, plan};
use model::observed::{ObservedState, QueuedJob};
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

/// Rounds of strict FIFO's re-planning at one instant.
const MAX_STRICT_ROUNDS: usize = 16;

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
    /// What the engine is shown (its nodes kept between plans).
    observed: ObservedState,
    /// Whether the world's nodes changed since `observed.nodes` was taken.
    nodes_stale: bool,
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
        // Then one plan.
        if !r.queued.is_empty() || r.elastic || r.over_limit > 0 {
            let plan = if r.policy.strict() {
                r.plan_strict(now)
            } else {
                r.plan(now)
            };
            r.carry_out(&plan, now)?;
            if r.out.plans.is_multiple_of(256) {
                progress(Progress {
                    arrived: next_arrival as u64,
                    total,
                    plans: r.out.plans,
                });
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
        self.pos[i] = self.fleet.jobs.len();
        self.fleet.jobs.push(job.object.clone());
        self.enqueue(i, self.policy.since(job.submit, None, job.duration));
    }

    fn enqueue(&mut self, i: usize, since: Timestamp) {
        if let Some(samples) = &mut self.out.samples {
            samples.queued(i);
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
            let ms = (at - since).num_milliseconds().max(0) as u128;
            let gpu_ms = ms * u128::from(job.gpus);
            run.gpu_ms += gpu_ms;
            if preempted {
                run.lost_gpu_ms += gpu_ms;
            }
            self.allocated = self.allocated.saturating_sub(job.gpus);
            if job.limit().is_some_and(|l| l < job.duration) {
                self.over_limit = self.over_limit.saturating_sub(1);
            }
        }
    }

    fn finish(&mut self, i: usize, at: Timestamp, terminated: bool) {
        self.stop_run(i, at, false);
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
        if self.elastic || self.nodes_stale {
            self.observed.nodes = self.world.ready_nodes();
            self.nodes_stale = false;
        }
        self.observed.time = Some(now);
        self.observed.running = self.world.running_jobs();
        self.observed.queued = std::mem::take(&mut self.queued);
        let plan = plan(&PlanInput {
            fleet: &self.fleet,
            observed: &self.observed,
            now,
            revision: None,
        });
        self.queued = std::mem::take(&mut self.observed.queued);
        plan
    }

    /// Strict FIFO: the engine is re-run without the jobs behind each
    /// queue's first blocked job until no job passes it, and with them again
    /// where every job it was shown started.
    fn plan_strict(&mut self, now: Timestamp) -> Plan {
        let mut hidden: BTreeSet<usize> = BTreeSet::new();
        let mut plan = self.plan(now);
        for _ in 1..MAX_STRICT_ROUNDS {
            let placed: BTreeSet<usize> = placed(&plan).collect();
            // Each queue's pending jobs in FIFO order (index = arrival order).
            let mut by_queue: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
            for q in &self.queued {
                if let Some(i) = index(&q.job) {
                    by_queue.entry(self.jobs[i].queue()).or_default().push(i);
                }
            }
            let mut hide: Vec<usize> = Vec::new();
            let mut show: Vec<usize> = Vec::new();
            for list in by_queue.values_mut() {
                list.sort_unstable();
                let blocked = list
                    .iter()
                    .position(|i| !hidden.contains(i) && !placed.contains(i));
                match blocked {
                    Some(b) => hide.extend(list[b + 1..].iter().filter(|i| placed.contains(i))),
                    None => show.extend(list.iter().filter(|i| hidden.contains(i))),
                }
            }
            if hide.is_empty() && show.is_empty() {
                break;
            }
            // Hide everything behind a head a placed job passed.
            for list in by_queue.values() {
                let blocked = list
                    .iter()
                    .position(|i| !hidden.contains(i) && !placed.contains(i));
                if let Some(b) = blocked
                    && list[b + 1..].iter().any(|i| placed.contains(i))
                {
                    hidden.extend(list[b + 1..].iter().copied());
                }
            }
            for &i in &show {
                hidden.remove(&i);
            }
            self.sync_hidden(&hidden);
            plan = self.plan(now);
        }
        // Whatever the rounds left: no placement passes a blocked head.
        let mut heads: BTreeMap<&str, usize> = BTreeMap::new();
        let placed_now: BTreeSet<usize> = placed(&plan).collect();
        for q in &self.queued {
            if let Some(i) = index(&q.job).filter(|i| !placed_now.contains(i)) {
                let head = heads.entry(self.jobs[i].queue()).or_insert(i);
                *head = (*head).min(i);
            }
        }
        let jobs = self.jobs;
        plan.actions.retain(|a| match a {
            Action::Place { job, .. } => index(job.as_str())
                .is_none_or(|i| heads.get(jobs[i].queue()).is_none_or(|head| i < *head)),
            _ => true,
        });
        self.sync_hidden(&BTreeSet::new());
        plan
    }

    /// Shows the engine every pending job but `hidden`.
    fn sync_hidden(&mut self, hidden: &BTreeSet<usize>) {
        let pending: Vec<usize> = self.queued.iter().filter_map(|q| index(&q.job)).collect();
        for i in pending {
            if hidden.contains(&i) {
                self.hide(i);
            } else {
                self.show(i);
            }
        }
    }

    fn carry_out(&mut self, plan: &Plan, now: Timestamp) -> Result<(), SimulateError> {
        let refused = |error| SimulateError::World { at: now, error };
        let mut rescaled = false;
        for action in &plan.actions {
            let i = action.job().and_then(index);
            match (action, i) {
                (Action::Place { job, placement, .. }, Some(i)) => {
                    let sim = &self.jobs[i];
                    let facts = JobFacts {
                        run_length: Some(sim.duration),
                        exit_code: 0,
                        grace: sim.grace,
                        ..JobFacts::default()
                    };
                    self.world
                        .start(job, placement, &facts, now)
                        .map_err(refused)?;
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
                }
                (Action::Preempt { job, for_job, .. }, Some(i)) => {
                    if self.world.job(job).is_some_and(|j| j.stop.is_none()) {
                        self.out.preemptions += 1;
                        self.out.runs[i].preemptions += 1;
                    }
                    self.world.preempt(job, for_job, self.jobs[i].grace, now);
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

/// The jobs a plan places.
fn placed(plan: &Plan) -> impl Iterator<Item = usize> + '_ {
    plan.actions.iter().filter_map(|a| match a {
        Action::Place { job, .. } => index(job),
        _ => None,
    })
}
