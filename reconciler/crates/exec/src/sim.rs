//! The `sim` executor: an embedded virtual fleet, like KWOK. Nodes come from
//! an observed-state file or from the pools (as the derived inventory); jobs
//! "run" on the reconciler's clock for their `gitfleet/sim-duration`
//! annotation, else their `timeLimit`, else until stopped; scaling adds nodes
//! after a provisioning delay. Its nodes are kept in the state store, so a
//! restarted reconciler finds the same fleet.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{
    ActionContext, Capabilities, Event, ExecError, Executor, JobView, KeyValue, Observation,
    Outcome, StopKind, busy_nodes,
};
use ::sim::SIM_DURATION_ANNOTATION;
use model::observed::{ObservedNode, Timestamp, derive_inventory, pool_node};
use model::plan::Action;
use model::spec::{Duration, Fleet, NodePoolSpec};
use model::time::after;

/// The annotation that sets a simulated job's exit code (default 0).
pub const SIM_EXIT_CODE_ANNOTATION: &str = "gitfleet/sim-exit-code";

const NODE_PREFIX: &str = "sim/node/";

/// A virtual node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SimNode {
    node: ObservedNode,
    /// Provisioning: the node joins at this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ready_at: Option<Timestamp>,
    /// No new placements.
    #[serde(default)]
    drained: bool,
}

/// The virtual fleet.
#[derive(Debug)]
pub struct SimExecutor {
    store: Arc<dyn KeyValue>,
    nodes: BTreeMap<String, SimNode>,
    pools: BTreeMap<String, NodePoolSpec>,
    seed: Option<Vec<ObservedNode>>,
    provision_delay: Duration,
}

impl SimExecutor {
    /// Opens the virtual fleet kept in `store`. When the store has none yet,
    /// it is made from `seed` (an observed-state file's nodes) or, without
    /// one, from the pools on the first [`SimExecutor::adopt_fleet`].
    pub fn open(
        store: Arc<dyn KeyValue>,
        seed: Option<Vec<ObservedNode>>,
        provision_delay: Duration,
    ) -> Result<Self, ExecError> {
        let mut nodes = BTreeMap::new();
        for (key, value) in store.entries(NODE_PREFIX)? {
            if let Some(name) = key.strip_prefix(NODE_PREFIX) {
                let node: SimNode = serde_json::from_str(&value).map_err(|e| {
                    ExecError::Inventory(format!("sim node {name} in the state: {e}"))
                })?;
                nodes.insert(name.to_string(), node);
            }
        }
        Ok(SimExecutor {
            store,
            nodes,
            pools: BTreeMap::new(),
            seed,
            provision_delay,
        })
    }

    fn save(&self, names: &[&str]) -> Result<(), ExecError> {
        let changes: Vec<(String, Option<String>)> = names
            .iter()
            .map(|name| {
                let value = self
                    .nodes
                    .get(*name)
                    .map(|node| serde_json::to_string(node).unwrap_or_default());
                (format!("{NODE_PREFIX}{name}"), value)
            })
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        self.store.write(&changes)?;
        Ok(())
    }

    fn pool_nodes(&self, pool: &str) -> impl DoubleEndedIterator<Item = &SimNode> {
        self.nodes
            .values()
            .filter(move |n| n.node.pool.as_deref() == Some(pool))
    }

    fn scale(
        &mut self,
        pool: &str,
        to: u32,
        remove: &[String],
        now: Timestamp,
    ) -> Result<(), ExecError> {
        let current = self.pool_nodes(pool).count() as u32;
        let mut touched: Vec<String> = Vec::new();
        if to > current {
            let spec = self.pools.get(pool).ok_or_else(|| ExecError::Action {
                action: "scale",
                subject: pool.to_string(),
                message: "no such pool in the fleet".to_string(),
            })?;
            let ready_at =
                (!self.provision_delay.is_zero()).then(|| after(now, self.provision_delay));
            let mut i = 0;
            let mut added = 0;
            while added < to - current {
                let mut node = pool_node(pool, spec, i);
                i += 1;
                if self.nodes.contains_key(&node.name) {
                    continue;
                }
                node.idle_since = Some(ready_at.unwrap_or(now));
                touched.push(node.name.clone());
                self.nodes.insert(
                    node.name.clone(),
                    SimNode {
                        node,
                        ready_at,
                        drained: false,
                    },
                );
                added += 1;
            }
        } else if to < current {
            let mut victims: Vec<String> = remove
                .iter()
                .filter(|n| self.nodes.contains_key(*n))
                .cloned()
                .collect();
            // Without names, the newest nodes go first (highest name).
            let extra: Vec<String> = self
                .pool_nodes(pool)
                .map(|n| n.node.name.clone())
                .rev()
                .filter(|n| !victims.contains(n))
                .collect();
            for name in extra {
                if victims.len() as u32 >= current - to {
                    break;
                }
                victims.push(name);
            }
            victims.truncate((current - to) as usize);
            for name in &victims {
                self.nodes.remove(name);
            }
            touched = victims;
        }
        let refs: Vec<&str> = touched.iter().map(String::as_str).collect();
        self.save(&refs)
    }

    /// Gives the executor the desired fleet: the pools it scales, and (on a
    /// new state without an observed file) the derived inventory as its
    /// first nodes.
    pub fn adopt_fleet(&mut self, fleet: &Fleet) -> Result<(), ExecError> {
        self.pools = fleet
            .pools
            .iter()
            .map(|p| (p.name().to_string(), p.spec.clone()))
            .collect();
        if !self.nodes.is_empty() {
            return Ok(());
        }
        let seed = match self.seed.take() {
            Some(nodes) => nodes,
            None => derive_inventory(fleet).nodes,
        };
        let names: Vec<String> = seed.iter().map(|n| n.name.clone()).collect();
        for node in seed {
            self.nodes.insert(
                node.name.clone(),
                SimNode {
                    node,
                    ready_at: None,
                    drained: false,
                },
            );
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        self.save(&refs)
    }
}

impl SimExecutor {
    /// Nodes ready at `now`, with `idleSince` kept for the nodes not in `busy`.
    fn ready_nodes(
        &mut self,
        now: Timestamp,
        busy: &[&str],
    ) -> Result<Vec<ObservedNode>, ExecError> {
        let mut changed = Vec::new();
        for (name, sim) in &mut self.nodes {
            if sim.ready_at.is_some_and(|t| t <= now) {
                sim.ready_at = None;
                changed.push(name.clone());
            }
            let idle = !busy.contains(&name.as_str());
            if !idle && sim.node.idle_since.is_some() {
                sim.node.idle_since = None;
                changed.push(name.clone());
            } else if idle && sim.node.idle_since.is_none() {
                sim.node.idle_since = Some(now);
                changed.push(name.clone());
            }
        }
        changed.dedup();
        let refs: Vec<&str> = changed.iter().map(String::as_str).collect();
        self.save(&refs)?;
        Ok(self
            .nodes
            .values()
            .filter(|n| n.ready_at.is_none())
            .map(|n| n.node.clone())
            .collect())
    }

    /// What the running jobs did by `now`.
    fn events(now: Timestamp, running: &[JobView<'_>]) -> Vec<Event> {
        let mut events = Vec::new();
        for view in running {
            if let Some(stop) = &view.stop {
                let ends = match stop.kind {
                    StopKind::Preempt => after(stop.since, view.grace),
                    StopKind::Terminate | StopKind::Cancel => stop.since,
                };
                if ends <= now {
                    events.push(Event::Stopped {
                        job: view.job.to_string(),
                        at: ends,
                    });
                    continue;
                }
            }
            let Some(started) = view.started else {
                continue;
            };
            let Some(spec) = view.spec else { continue };
            let duration = spec
                .metadata
                .annotations
                .get(SIM_DURATION_ANNOTATION)
                .and_then(|d| d.parse::<Duration>().ok())
                .or(spec.spec.time_limit);
            if let Some(d) = duration
                && after(started, d) <= now
                && view.stop.is_none()
            {
                let exit_code = spec
                    .metadata
                    .annotations
                    .get(SIM_EXIT_CODE_ANNOTATION)
                    .and_then(|c| c.parse::<i32>().ok())
                    .unwrap_or(0);
                events.push(Event::Exited {
                    job: view.job.to_string(),
                    at: after(started, d),
                    exit_code: Some(exit_code),
                });
            }
        }
        events
    }

    fn execute_now(&mut self, action: &Action, now: Timestamp) -> Result<Outcome, ExecError> {
        match action {
            Action::Place { placement, job, .. } => {
                for p in placement {
                    if !self.nodes.contains_key(&p.node) {
                        return Err(ExecError::Action {
                            action: "place",
                            subject: job.clone(),
                            message: format!("node {} does not exist", p.node),
                        });
                    }
                }
                Ok(Outcome::Done)
            }
            Action::Preempt { .. } => Ok(Outcome::Underway),
            Action::Terminate { .. } | Action::Cancel { .. } => Ok(Outcome::Done),
            Action::Scale {
                pool, to, nodes, ..
            } => {
                self.scale(pool, *to, nodes, now)?;
                Ok(Outcome::Done)
            }
            Action::Drain { node, .. } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.drained = true;
                    self.save(&[node.as_str()])?;
                }
                Ok(Outcome::Done)
            }
        }
    }
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
        let events = Self::events(now, running);
        let nodes = self.ready_nodes(now, &busy_nodes(running, &events))?;
        Ok(Observation { events, nodes })
    }

    fn already_done(&self, action: &Action) -> bool {
        match action {
            Action::Scale { pool, to, from, .. } if to > from => {
                self.pool_nodes(pool).count() as u32 >= *to
                    && self.pool_nodes(pool).any(|n| n.ready_at.is_some())
            }
            Action::Drain { node, .. } => self.nodes.get(node).is_some_and(|n| n.drained),
            _ => false,
        }
    }

    async fn execute(
        &mut self,
        action: &Action,
        _ctx: &ActionContext<'_>,
        now: Timestamp,
    ) -> Result<Outcome, ExecError> {
        self.execute_now(action, now)
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
        drop(sim);
        let again = SimExecutor::open(store, None, Duration::ZERO).unwrap();
        assert_eq!(again.nodes.len(), 2);
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
}
