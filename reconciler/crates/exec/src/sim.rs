//! The `sim` executor: an embedded virtual fleet, like KWOK, driven by the
//! simulator's [`World`] (the same rules as the generator and the trace
//! simulator). Nodes come from an observed-state file or from the pools (as
//! the derived inventory); jobs "run" on the reconciler's clock for their
//! `gitfleet/sim-duration` annotation, else their `timeLimit`, else until
//! stopped, and exit with their `gitfleet/sim-exit-code` (default 0);
//! preempted jobs stop when their grace period is over; scaling adds nodes
//! after a provisioning delay. Its nodes are kept through the executor's
//! [`KeyValue`] handle, so a restarted reconciler finds the same fleet; its
//! jobs are the ones the reconciler says run (rebuilt after a restart).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ::sim::{JobFacts, Rules, Stop, World, WorldEvent, WorldJob, WorldNode};
use model::observed::{ObservedNode, Timestamp, derive_inventory};
use model::plan::Action;
use model::spec::{Duration, Fleet};
use model::time::after;

use crate::{
    ActionContext, Capabilities, Event, ExecError, Executor, JobView, KeyValue, Observation,
    Outcome, StopKind,
};

pub use ::sim::SIM_EXIT_CODE_ANNOTATION;

const NODE_PREFIX: &str = "sim/node/";

/// The virtual fleet.
#[derive(Debug)]
pub struct SimExecutor {
    store: Arc<dyn KeyValue>,
    rules: Rules,
    /// The world, made at the first call that knows the time.
    world: Option<World>,
    /// Nodes read back from the store, waiting for the world.
    stored: Vec<WorldNode>,
    /// The fleet's pools (a fleet without its other documents): what it
    /// scales and, on a new state, its first nodes.
    fleet: Option<Fleet>,
    seed: Option<Vec<ObservedNode>>,
    /// Until when the last observation stands: `Some(None)` for ever (the
    /// world has nothing due), `Some(Some(t))` until its next event at `t`;
    /// `None` once anything could have changed it (an action, other pools).
    stands: Option<Option<Timestamp>>,
    /// Nodes that actions changed (or that a new world was seeded with)
    /// and that are not written to the store yet ([`Executor::flush`]): a
    /// node placed on several times is serialized once per outcome batch,
    /// not once per action.
    dirty: BTreeSet<String>,
}

impl SimExecutor {
    /// Opens the virtual fleet kept in `store`. When the store has none yet,
    /// it is made from `seed` (an observed-state file's nodes) or, without
    /// one, from the pools given by [`SimExecutor::adopt_fleet`].
    pub fn open(
        store: Arc<dyn KeyValue>,
        seed: Option<Vec<ObservedNode>>,
        provision_delay: Duration,
    ) -> Result<Self, ExecError> {
        let mut stored = Vec::new();
        for (key, value) in store.entries(NODE_PREFIX)? {
            if let Some(name) = key.strip_prefix(NODE_PREFIX) {
                let node: WorldNode = serde_json::from_str(&value).map_err(|e| {
                    ExecError::Inventory(format!("sim node {name} in the state: {e}"))
                })?;
                stored.push(node);
            }
        }
        Ok(SimExecutor {
            store,
            rules: Rules::executor(provision_delay),
            world: None,
            stored,
            fleet: None,
            seed,
            stands: None,
            dirty: BTreeSet::new(),
        })
    }

    /// Gives the executor the desired fleet: the pools it scales, and (on a
    /// new state without an observed file) the derived inventory as its
    /// first nodes.
    pub fn adopt_fleet(&mut self, fleet: &Fleet) -> Result<(), ExecError> {
        // Compared without their origins: those name the revision, and the
        // world only sees names and specs.
        let same_pools = |kept: &Fleet| {
            kept.pools.len() == fleet.pools.len()
                && kept
                    .pools
                    .iter()
                    .zip(&fleet.pools)
                    .all(|(a, b)| a.metadata == b.metadata && a.spec == b.spec)
        };
        if !self.fleet.as_ref().is_some_and(same_pools) {
            self.stands = None;
        }
        if let Some(world) = &mut self.world {
            world.set_pools(fleet);
        }
        // Only the pools: cloning a fleet's jobs every iteration costs
        // milliseconds for thousands of them.
        self.fleet = Some(Fleet {
            pools: fleet.pools.clone(),
            ..Fleet::default()
        });
        Ok(())
    }

    /// The world at `now`: made (from the stored nodes, else the seed, else
    /// the pools) at the first call.
    fn world(&mut self, now: Timestamp) -> Result<&mut World, ExecError> {
        if self.world.is_none() {
            let mut world = World::new(self.rules, now);
            if let Some(fleet) = &self.fleet {
                world.set_pools(fleet);
            }
            let mut new = Vec::new();
            if self.stored.is_empty() {
                let seed = match (self.seed.take(), &self.fleet) {
                    (Some(nodes), _) => nodes,
                    (None, Some(fleet)) => derive_inventory(fleet).nodes,
                    (None, None) => Vec::new(),
                };
                new = seed.iter().map(|n| n.name.clone()).collect();
                world.seed_nodes(seed);
            }
            for node in self.stored.drain(..) {
                let name = node.node.name.clone();
                world.add_node(node).map_err(|e| {
                    ExecError::Inventory(format!("sim node {name} in the state: {e}"))
                })?;
            }
            // Stored at the next flush ([`Executor::flush`]), as the first
            // actions on them leave them: each serialized once.
            self.dirty.extend(new);
            self.world = Some(world);
        }
        self.world
            .as_mut()
            .ok_or_else(|| ExecError::Inventory("the sim world is not there".to_string()))
    }

    /// Brings the world's jobs in line with the jobs the reconciler says
    /// run; returns events for jobs that cannot be seated (reported gone,
    /// as the local executor reports jobs it has no record of).
    fn sync_jobs(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Vec<Event>, ExecError> {
        let rules = self.rules;
        let world = self.world(now)?;
        let believed: BTreeSet<&str> = running.iter().map(|v| v.job).collect();
        // Only the names of the jobs gone are copied (not every running one's).
        let gone: Vec<String> = world
            .jobs()
            .filter(|j| !believed.contains(j.job.as_str()))
            .map(|j| j.job.clone())
            .collect();
        for job in gone {
            world.forget_job(&job, now);
        }
        let mut events = Vec::new();
        for view in running {
            match world.job(view.job).map(|j| j.stop.is_some()) {
                None => {
                    let facts = JobFacts::undigested(view.spec, view.grace, &rules);
                    let job = WorldJob {
                        job: view.job.to_string(),
                        placement: view.placement.to_vec(),
                        started: view.started.unwrap_or(now),
                        run_length: facts.run_length,
                        exit_code: facts.exit_code,
                        stop: view.stop.map(|s| Stop {
                            kind: world_stop(s.kind),
                            since: s.since,
                            ends: match s.kind {
                                StopKind::Preempt => after(s.since, view.grace),
                                StopKind::Terminate | StopKind::Cancel => s.since,
                            },
                            for_job: None,
                            reason: None,
                        }),
                        restart: facts.restart,
                        spec_digest: facts.spec_digest,
                    };
                    if let Err(e) = world.add_job(job) {
                        tracing::warn!(job = view.job, error = %e, "cannot seat the job in the sim: reported gone");
                        events.push(Event::Exited {
                            job: view.job.to_string(),
                            at: now,
                            exit_code: None,
                        });
                    }
                }
                Some(false) => match view.stop {
                    Some(stop) if stop.kind == StopKind::Preempt => {
                        world.preempt(view.job, "", view.grace, stop.since);
                    }
                    Some(stop) => {
                        let stopped = world.stop(view.job, world_stop(stop.kind), None, stop.since);
                        events.extend(stopped.into_iter().filter_map(event_of));
                    }
                    None => {}
                },
                Some(true) => {}
            }
        }
        Ok(events)
    }

    fn execute_now(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        self.stands = None;
        if matches!(action, Action::Scale { .. }) {
            // Any node may come or go: written at once, compared with
            // before (after the nodes changed earlier, so that what is
            // stored follows the world's order of changes).
            self.flush_nodes()?;
        }
        let rules = self.rules;
        let store = self.store.clone();
        let world = self.world(now)?;
        // Without the spec's digest: the world's jobs show it to nobody
        // here (the reconciler's records keep it).
        let facts = JobFacts::undigested(ctx.spec, ctx.grace, &rules);
        let (name, kind) = (action.target(), action.kind());
        let outcome = match action {
            // Done by the reconciler's records: the world forgets a stopped
            // job at the next observation.
            Action::Terminate { .. } | Action::Cancel { .. } => Outcome::Done,
            Action::Scale { .. } => {
                let before = snapshot(world);
                world
                    .apply(action, &facts, now)
                    .map_err(|e| ExecError::Action {
                        action: kind,
                        subject: name.to_string(),
                        message: e.to_string(),
                    })?;
                save_changed(store.as_ref(), world, &before)?;
                Outcome::Done
            }
            _ => {
                // A placement's nodes are the action's (nothing to copy
                // before the world changes).
                let touched = match action {
                    Action::Place { .. } => Vec::new(),
                    _ => touched_nodes(world, action),
                };
                let applied = world.apply(action, &facts, now);
                // Marked even when it failed: what is stored is the world
                // as it is.
                self.dirty.extend(touched);
                if let Action::Place { placement, .. } = action {
                    // Each name copied once (a node holds several jobs).
                    for part in placement {
                        if !self.dirty.contains(&part.node) {
                            self.dirty.insert(part.node.clone());
                        }
                    }
                }
                applied.map_err(|e| ExecError::Action {
                    action: kind,
                    subject: name.to_string(),
                    message: e.to_string(),
                })?;
                match action {
                    Action::Preempt { .. } => Outcome::Underway,
                    _ => Outcome::Done,
                }
            }
        };
        Ok(outcome)
    }

    /// Writes the nodes that actions changed since the last time, as the
    /// world has them now (a node gone is removed).
    fn flush_nodes(&mut self) -> Result<(), ExecError> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        let Some(world) = &self.world else {
            self.dirty.clear();
            return Ok(());
        };
        let names: Vec<&str> = self.dirty.iter().map(String::as_str).collect();
        save(self.store.as_ref(), world, &names)?;
        self.dirty.clear();
        Ok(())
    }
}

/// The only nodes `action` can change in the world (a placement's, a
/// stopped job's, a drained node), so that carrying one action out does not
/// serialize the whole fleet; a scale (any node) is not asked.
fn touched_nodes(world: &World, action: &Action) -> Vec<String> {
    let names = |placement: &[model::observed::NodeGpus]| {
        placement.iter().map(|p| p.node.clone()).collect::<Vec<_>>()
    };
    match action {
        Action::Place { placement, .. } => names(placement),
        Action::Preempt { job, .. }
        | Action::Terminate { job, .. }
        | Action::Cancel { job, .. } => world
            .job(job)
            .map(|j| names(&j.placement))
            .unwrap_or_default(),
        Action::Drain { node, .. } => vec![node.clone()],
        Action::Scale { .. } => Vec::new(),
    }
}

/// The stop kinds are the same in the world and the interface.
fn world_stop(kind: StopKind) -> ::sim::StopKind {
    match kind {
        StopKind::Preempt => ::sim::StopKind::Preempt,
        StopKind::Terminate => ::sim::StopKind::Terminate,
        StopKind::Cancel => ::sim::StopKind::Cancel,
    }
}

/// What the reconciler hears of a world event.
fn event_of(event: WorldEvent) -> Option<Event> {
    match event {
        WorldEvent::Exited { job, at, exit_code } => Some(Event::Exited {
            job,
            at,
            exit_code: Some(exit_code),
        }),
        WorldEvent::Stopped { job, at, .. } => Some(Event::Stopped { job, at }),
        WorldEvent::NodeReady { .. } => None,
    }
}

/// The nodes as they are, by name (compared with the nodes afterwards;
/// only those that changed are serialized).
fn snapshot(world: &World) -> BTreeMap<String, WorldNode> {
    world
        .nodes()
        .map(|n| (n.node.name.clone(), n.clone()))
        .collect()
}

/// Stores the nodes that changed since `before` (added, changed, removed).
fn save_changed(
    store: &dyn KeyValue,
    world: &World,
    before: &BTreeMap<String, WorldNode>,
) -> Result<(), ExecError> {
    let now: Vec<&WorldNode> = world.nodes().collect();
    let mut changes: Vec<(String, Option<String>)> = Vec::new();
    for node in &now {
        let name = &node.node.name;
        if before.get(name) != Some(*node) {
            let value = crate::json::world_node(node);
            changes.push((format!("{NODE_PREFIX}{name}"), Some(value)));
        }
    }
    let present: BTreeSet<&str> = now.iter().map(|n| n.node.name.as_str()).collect();
    for name in before.keys().filter(|n| !present.contains(n.as_str())) {
        changes.push((format!("{NODE_PREFIX}{name}"), None));
    }
    if !changes.is_empty() {
        store.write(&changes)?;
    }
    Ok(())
}

/// Stores the named nodes as the world has them.
fn save(store: &dyn KeyValue, world: &World, names: &[&str]) -> Result<(), ExecError> {
    let changes: Vec<(String, Option<String>)> = names
        .iter()
        .map(|name| {
            let value = world.node(name).map(crate::json::world_node);
            (format!("{NODE_PREFIX}{name}"), value)
        })
        .collect();
    if !changes.is_empty() {
        store.write(&changes)?;
    }
    Ok(())
}

impl Executor for SimExecutor {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scales_pools: true,
            grace_periods: true,
            exit_codes: true,
            runs_jobs: true,
        }
    }

    async fn set_fleet(&mut self, fleet: &Fleet) -> Result<(), ExecError> {
        self.adopt_fleet(fleet)
    }

    async fn observe(
        &mut self,
        now: Timestamp,
        running: &[JobView<'_>],
    ) -> Result<Observation, ExecError> {
        self.stands = None;
        // What the actions before changed is stored before the world moves on.
        self.flush_nodes()?;
        let mut events = self.sync_jobs(now, running)?;
        let store = self.store.clone();
        let world = self.world(now)?;
        let before = snapshot(world);
        events.extend(world.advance(now).into_iter().filter_map(event_of));
        world.take_completed();
        // Reported by job name, as the reconciler lists its jobs (the times
        // say when each happened).
        events.sort_by(|a, b| a.job().cmp(b.job()));
        save_changed(store.as_ref(), world, &before)?;
        let nodes = world.ready_nodes();
        // Seated as the reconciler says, the same jobs seat the same way
        // again: nothing changes until the world's next event.
        let next = world.next_event();
        self.stands = Some(next);
        Ok(Observation { events, nodes })
    }

    fn observation_stands(&self, now: Timestamp) -> bool {
        match self.stands {
            Some(next) => self
                .world
                .as_ref()
                .is_some_and(|w| now >= w.now() && next.is_none_or(|at| now < at)),
            None => false,
        }
    }

    fn already_done(&self, action: &Action) -> bool {
        let Some(world) = &self.world else {
            return false;
        };
        match action {
            Action::Scale { pool, to, from, .. } if to > from => {
                world.pool_nodes(pool).count() as u32 >= *to
                    && world.pool_nodes(pool).any(|n| n.ready_at.is_some())
            }
            Action::Drain { node, .. } => world.node(node).is_some_and(|n| n.drained),
            _ => false,
        }
    }

    async fn execute(
        &mut self,
        action: &Action,
        ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        self.execute_now(action, ctx, now)
    }

    fn flush(&mut self) -> Result<(), ExecError> {
        self.flush_nodes()
    }

    fn acts_in_store_only(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryKv;
    use futures_executor::block_on;
    use load::{SourceFile, load_fleet};

    fn nodes(sim: &mut SimExecutor, now: Timestamp) -> Vec<ObservedNode> {
        block_on(sim.observe(now, &[])).unwrap().nodes
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn fleet() -> Fleet {
        let yaml = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100-SXM-80GB, count: 8}\n  size: {min: 2, max: 4}\n";
        let loaded = load_fleet(&[SourceFile::new("f.yaml", yaml)]);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    #[test]
    fn seeds_from_pools_and_persists_nodes() {
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut sim = SimExecutor::open(store.clone(), None, Duration::ZERO).unwrap();
        sim.adopt_fleet(&fleet()).unwrap();
        let now = t("2026-11-21T10:00:00Z");
        let nodes = nodes(&mut sim, now);
        assert_eq!(nodes.len(), 2);
        assert!(
            store.entries(NODE_PREFIX).unwrap().is_empty(),
            "stored at the flush"
        );
        sim.flush().unwrap();
        drop(sim);
        let again = SimExecutor::open(store, None, Duration::ZERO).unwrap();
        assert_eq!(again.stored.len(), 2, "nodes read back from the store");
    }

    /// A KeyValue that counts the values written.
    #[derive(Debug, Default)]
    struct Counting(MemoryKv, std::sync::Mutex<Vec<String>>);

    impl KeyValue for Counting {
        fn entries(&self, prefix: &str) -> Result<BTreeMap<String, String>, crate::KvError> {
            self.0.entries(prefix)
        }

        fn write(&self, changes: &[(String, Option<String>)]) -> Result<(), crate::KvError> {
            self.1
                .lock()
                .unwrap()
                .extend(changes.iter().map(|(k, _)| k.clone()));
            self.0.write(changes)
        }
    }

    #[test]
    fn actions_store_the_nodes_they_changed_once_and_only_those() {
        let store = Arc::new(Counting::default());
        let mut sim = SimExecutor::open(store.clone(), None, Duration::ZERO).unwrap();
        sim.adopt_fleet(&fleet()).unwrap();
        let now = t("2026-11-21T10:00:00Z");
        assert_eq!(nodes(&mut sim, now).len(), 2);
        // The seeded nodes, once.
        sim.flush().unwrap();
        assert_eq!(*store.1.lock().unwrap(), ["sim/node/p-0", "sim/node/p-1"]);
        store.1.lock().unwrap().clear();
        let place = Action::Place {
            job: "a".into(),
            placement: vec![model::observed::NodeGpus {
                node: "p-1".into(),
                gpus: vec![0, 1],
            }],
            reason: String::new(),
        };
        let ctx = ActionContext {
            spec: None,
            attempt: None,
            grace: Duration::ZERO,
            revision: "r",
        };
        block_on(sim.execute(&place, &ctx, now)).unwrap();
        let second = Action::Place {
            job: "b".into(),
            placement: vec![model::observed::NodeGpus {
                node: "p-1".into(),
                gpus: vec![2, 3],
            }],
            reason: String::new(),
        };
        block_on(sim.execute(&second, &ctx, now)).unwrap();
        assert!(store.1.lock().unwrap().is_empty(), "kept until flushed");
        sim.flush().unwrap();
        assert_eq!(
            *store.1.lock().unwrap(),
            ["sim/node/p-1"],
            "once for both actions"
        );
        sim.flush().unwrap();
        assert_eq!(store.1.lock().unwrap().len(), 1, "nothing more to write");
        let stored: WorldNode =
            serde_json::from_str(&store.entries("sim/node/p-1").unwrap()["sim/node/p-1"]).unwrap();
        assert_eq!(stored.node.idle_since, None, "busy, as stored");
        let idle: WorldNode =
            serde_json::from_str(&store.entries("sim/node/p-0").unwrap()["sim/node/p-0"]).unwrap();
        assert!(idle.node.idle_since.is_some(), "the other node is idle");
    }

    #[test]
    fn scale_up_waits_for_provisioning() {
        let store = Arc::new(MemoryKv::default());
        let delay: Duration = "5m".parse().unwrap();
        let mut sim = SimExecutor::open(store, None, delay).unwrap();
        sim.adopt_fleet(&fleet()).unwrap();
        let now = t("2026-11-21T10:00:00Z");
        let action = Action::Scale {
            pool: "p".into(),
            from: 2,
            to: 4,
            reason: String::new(),
            nodes: vec![],
        };
        let ctx = ActionContext {
            spec: None,
            attempt: None,
            grace: Duration::ZERO,
            revision: "r",
        };
        assert!(!sim.already_done(&action));
        block_on(sim.execute(&action, &ctx, now)).unwrap();
        assert!(sim.already_done(&action), "a second scale is not needed");
        assert_eq!(nodes(&mut sim, now).len(), 2);
        let later = t("2026-11-21T10:05:00Z");
        assert_eq!(nodes(&mut sim, later).len(), 4);
        let down = Action::Scale {
            pool: "p".into(),
            from: 4,
            to: 2,
            reason: String::new(),
            nodes: vec!["p-1".into()],
        };
        block_on(sim.execute(&down, &ctx, later)).unwrap();
        let names: Vec<String> = nodes(&mut sim, later).into_iter().map(|n| n.name).collect();
        assert_eq!(names, ["p-0", "p-2"], "named node first, then the newest");
    }

    fn job(name: &str, annotations: &[(&str, &str)]) -> model::spec::Object<model::spec::JobSpec> {
        let spec: model::spec::JobSpec = serde_json::from_value(serde_json::json!({
            "queue": "q",
            "gpusPerReplica": 2,
            "timeLimit": "1h",
        }))
        .unwrap();
        model::spec::Object {
            metadata: model::spec::Metadata {
                name: name.to_string(),
                labels: Default::default(),
                annotations: annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            spec,
            origin: model::diag::Origin::new("jobs.yaml".into(), model::diag::Pos::new(1, 1)),
        }
    }

    fn view<'a>(
        spec: &'a model::spec::Object<model::spec::JobSpec>,
        placement: &'a [model::observed::NodeGpus],
        started: Timestamp,
        stop: Option<crate::StopView>,
        grace: Duration,
    ) -> JobView<'a> {
        JobView {
            job: spec.name(),
            placement,
            started: Some(started),
            stop,
            spec: Some(spec),
            grace,
        }
    }

    /// Placing job `short` (its spec) on `here`: the context and the action.
    fn place_short<'a>(
        short: &'a model::spec::Object<model::spec::JobSpec>,
        here: &[model::observed::NodeGpus],
    ) -> (ActionContext<'a>, Action) {
        let ctx = ActionContext {
            spec: Some(short),
            attempt: None,
            grace: Duration::ZERO,
            revision: "r",
        };
        let place = Action::Place {
            job: "short".into(),
            placement: here.to_vec(),
            reason: String::new(),
        };
        (ctx, place)
    }

    #[test]
    fn jobs_exit_by_the_world_rules_and_survive_a_restart() {
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut sim = SimExecutor::open(store.clone(), None, Duration::ZERO).unwrap();
        sim.adopt_fleet(&fleet()).unwrap();
        let t0 = t("2026-11-21T10:00:00Z");
        let short = job(
            "short",
            &[
                ("gitfleet/sim-duration", "10m"),
                ("gitfleet/sim-exit-code", "3"),
            ],
        );
        let long = job("long", &[]);
        let here = vec![model::observed::NodeGpus {
            node: "p-0".into(),
            gpus: vec![0, 1],
        }];
        let there = vec![model::observed::NodeGpus {
            node: "p-1".into(),
            gpus: vec![0, 1],
        }];
        let (ctx, place) = place_short(&short, &here);
        assert_eq!(
            block_on(sim.execute(&place, &ctx, t0)).unwrap(),
            Outcome::Done
        );
        assert_eq!(
            block_on(sim.execute(&place, &ctx, t0)).unwrap(),
            Outcome::Done,
            "idempotent"
        );
        let running = [
            view(&short, &here, t0, None, Duration::ZERO),
            view(&long, &there, t0, None, Duration::ZERO),
        ];
        let seen = block_on(sim.observe(t("2026-11-21T10:05:00Z"), &running)).unwrap();
        assert!(seen.events.is_empty(), "{:?}", seen.events);
        let busy = seen.nodes.iter().find(|n| n.name == "p-0").unwrap();
        assert_eq!(busy.idle_since, None);

        // A restarted reconciler: the world is rebuilt from the jobs it says run.
        drop(sim);
        let mut sim = SimExecutor::open(store, None, Duration::ZERO).unwrap();
        sim.adopt_fleet(&fleet()).unwrap();
        let seen = block_on(sim.observe(t("2026-11-21T11:30:00Z"), &running)).unwrap();
        assert_eq!(
            seen.events,
            vec![
                Event::Exited {
                    job: "long".into(),
                    at: t("2026-11-21T11:00:00Z"),
                    exit_code: Some(0),
                },
                Event::Exited {
                    job: "short".into(),
                    at: t("2026-11-21T10:10:00Z"),
                    exit_code: Some(3),
                },
            ],
            "sim-duration and exit code, else the time limit"
        );
        let idle = seen.nodes.iter().find(|n| n.name == "p-0").unwrap();
        assert_eq!(idle.idle_since, Some(t("2026-11-21T10:10:00Z")));
    }

    #[test]
    fn an_observation_stands_until_the_world_has_an_event_due() {
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut sim = SimExecutor::open(store, None, Duration::ZERO).unwrap();
        sim.adopt_fleet(&fleet()).unwrap();
        let t0 = t("2026-11-21T10:00:00Z");
        assert!(!sim.observation_stands(t0), "nothing observed yet");
        let short = job("short", &[("gitfleet/sim-duration", "10m")]);
        let here = vec![model::observed::NodeGpus {
            node: "p-0".into(),
            gpus: vec![0, 1],
        }];
        let running = [view(&short, &here, t0, None, Duration::ZERO)];
        let seen = block_on(sim.observe(t0, &running)).unwrap();
        assert!(seen.events.is_empty());
        assert!(sim.observation_stands(t0));
        assert!(sim.observation_stands(t("2026-11-21T10:09:59Z")));
        assert!(
            !sim.observation_stands(t("2026-11-21T10:10:00Z")),
            "the job exits at 10:10"
        );
        assert!(
            !sim.observation_stands(t("2026-11-21T09:59:00Z")),
            "the past"
        );
        // Observed again before then: it still stands; the same pools too.
        let again = block_on(sim.observe(t("2026-11-21T10:05:00Z"), &running)).unwrap();
        assert_eq!(again, seen);
        sim.adopt_fleet(&fleet()).unwrap();
        assert!(sim.observation_stands(t("2026-11-21T10:06:00Z")));
        // At 10:10 the observation reports the exit.
        let ended = block_on(sim.observe(t("2026-11-21T10:10:00Z"), &running)).unwrap();
        assert_eq!(ended.events.len(), 1);
        // Nothing due any more: it stands for ever, until an action.
        let none = block_on(sim.observe(t("2026-11-21T10:11:00Z"), &[])).unwrap();
        assert!(none.events.is_empty());
        assert!(sim.observation_stands(t("2027-11-21T10:11:00Z")));
        let (ctx, place) = place_short(&short, &here);
        block_on(sim.execute(&place, &ctx, t("2026-11-21T10:12:00Z"))).unwrap();
        assert!(
            !sim.observation_stands(t("2026-11-21T10:12:00Z")),
            "an action"
        );
        block_on(sim.observe(t("2026-11-21T10:12:00Z"), &running)).unwrap();
        assert!(sim.observation_stands(t("2026-11-21T10:13:00Z")));
        // Other pools: it may not stand.
        let mut other = fleet();
        other.pools[0].spec.size.max = 5;
        sim.adopt_fleet(&other).unwrap();
        assert!(
            !sim.observation_stands(t("2026-11-21T10:13:00Z")),
            "other pools"
        );
    }

    #[test]
    fn a_preempted_job_stops_when_its_grace_period_ends() {
        let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
        let mut sim = SimExecutor::open(store, None, Duration::ZERO).unwrap();
        sim.adopt_fleet(&fleet()).unwrap();
        let t0 = t("2026-11-21T10:00:00Z");
        let victim = job("victim", &[]);
        let here = vec![model::observed::NodeGpus {
            node: "p-0".into(),
            gpus: vec![0, 1],
        }];
        let grace: Duration = "5m".parse().unwrap();
        let running = [view(&victim, &here, t0, None, grace)];
        assert!(
            block_on(sim.observe(t0, &running))
                .unwrap()
                .events
                .is_empty()
        );
        let preempt = Action::Preempt {
            job: "victim".into(),
            for_job: "other".into(),
            reason: String::new(),
        };
        let ctx = ActionContext {
            spec: Some(&victim),
            attempt: None,
            grace,
            revision: "r",
        };
        let since = t("2026-11-21T10:01:00Z");
        assert_eq!(
            block_on(sim.execute(&preempt, &ctx, since)).unwrap(),
            Outcome::Underway
        );
        let stopping = Some(crate::StopView {
            kind: StopKind::Preempt,
            since,
        });
        let running = [view(&victim, &here, t0, stopping, grace)];
        let early = block_on(sim.observe(t("2026-11-21T10:05:59Z"), &running)).unwrap();
        assert!(early.events.is_empty(), "{:?}", early.events);
        let late = block_on(sim.observe(t("2026-11-21T10:07:00Z"), &running)).unwrap();
        assert_eq!(
            late.events,
            vec![Event::Stopped {
                job: "victim".into(),
                at: t("2026-11-21T10:06:00Z"),
            }]
        );
    }
}
