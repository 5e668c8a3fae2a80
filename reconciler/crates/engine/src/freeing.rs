//! GPUs held by stopping jobs (preempted, terminated, cancelled): they are
//! not given out in this plan, but a job that fits on them waits for them.
//! GPUs of a preemption are kept for the job it made room for.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use super::cluster::{Cluster, Gpu, NodeState, Owner};
use super::ids::{JobId, ModelId, NodeId, RunId};
use super::placement::{self, Placement, Request};

/// Where stopping jobs' GPUs are and who may wait for them.
#[derive(Debug, Clone, Default)]
pub struct Freeing {
    /// Per model: nodes with GPUs of stopping jobs (pruned lazily).
    nodes: Vec<BTreeSet<NodeId>>,
    /// Per model: such GPUs any job may wait for.
    general: Vec<u64>,
    /// Such GPUs kept for one pending preemptor.
    dedicated: HashMap<JobId, u64>,
    /// All of `dedicated`: a job may take GPUs kept for another that does
    /// not keep them from it.
    dedicated_total: u64,
}

impl Freeing {
    /// Records the GPUs of stopping run `run` on model `model`; `kept_for` is
    /// the pending job a preemption made room for, if any.
    pub fn add(&mut self, model: ModelId, placement: &Placement, kept_for: Option<JobId>) {
        let m = model as usize;
        if self.nodes.len() <= m {
            self.nodes.resize_with(m + 1, BTreeSet::new);
            self.general.resize(m + 1, 0);
        }
        let gpus: u64 = placement.iter().map(|(_, p)| p.len() as u64).sum();
        for (node, _) in placement {
            self.nodes[m].insert(*node);
        }
        match kept_for {
            Some(j) => {
                *self.dedicated.entry(j).or_default() += gpus;
                self.dedicated_total += gpus;
            }
            None => self.general[m] += gpus,
        }
    }

    /// Places a job on free GPUs plus GPUs of stopping jobs it may wait for,
    /// when that fits; `claimable(run)` says whether it may take a run's GPUs,
    /// `nominated` are the GPUs nominated for it (preferred after stopping
    /// jobs' GPUs). `kept_nodes`: the nodes where runs kept for one job
    /// (their preemptor, or their own when restarting) that `claimable`
    /// allows have GPUs; every other stopping run is open to all (the
    /// cluster's waiting index), or kept from this job (on such a node it
    /// may take what the waiting index counts).
    pub fn place(
        &mut self,
        cluster: &Cluster,
        req: &Request,
        claimable: &dyn Fn(RunId) -> bool,
        nominated: &[(NodeId, usize)],
        kept_nodes: &[NodeId],
    ) -> Option<Placement> {
        let m = req.model as usize;
        let waiting_room = self.general.get(m).copied().unwrap_or(0) + self.dedicated_total;
        let free = cluster.free_total.get(m).copied().unwrap_or(0);
        if waiting_room == 0 || free + waiting_room < req.total() {
            return None;
        }
        let holds_stopping = |id: NodeId| {
            cluster
                .node(id)
                .gpus
                .iter()
                .any(|g| matches!(g.owner, Owner::Freeing(_)))
        };
        let topology = req.required.or(req.preferred).is_some() || req.per_replica == 0;
        let set = self.nodes.get_mut(m)?;
        // Pruned only where the placement walks every such node (with
        // topology; debug builds compare with it): a streamed placement
        // asks about a few nodes, not all of them at every job (thousands
        // when a third of the running jobs are past their time limit).
        if topology || cfg!(debug_assertions) {
            set.retain(|id| holds_stopping(*id));
        }
        let set: &BTreeSet<NodeId> = set;
        let usable = |n: &NodeState, _: usize, g: &Gpu| {
            n.schedulable
                && match g.owner {
                    Owner::Free => true,
                    Owner::Freeing(r) => claimable(r),
                    _ => false,
                }
        };
        // GPUs of stopping jobs first (it keeps as few free GPUs idle as it
        // can), then those nominated for it.
        let prefer = |id: NodeId, pos: usize, g: &Gpu| -> u8 {
            if matches!(g.owner, Owner::Freeing(_)) {
                0
            } else if nominated.contains(&(id, pos)) {
                1
            } else {
                2
            }
        };
        let every = || {
            cluster.free_nodes_and(
                req.model,
                set.iter()
                    .copied()
                    .filter(|id| cluster.node(*id).schedulable),
            )
        };
        if topology {
            return placement::place_preferring(cluster, &every(), req, &usable, &prefer);
        }
        // Without topology, a node with no GPU nominated for the job and none
        // of a kept run it may take offers its free GPUs and those of open stopping runs
        // (preferred): the cluster's waiting index lists such nodes in the
        // order the placement takes them, so they are read only as far as
        // it gets (not looked at GPU by GPU, every stopping job's node every
        // time). The others are listed, as they would be in full.
        let mut special: Vec<NodeId> = kept_nodes
            .iter()
            .copied()
            .chain(nominated.iter().map(|(id, _)| *id))
            .collect();
        special.sort_unstable();
        special.dedup();
        let listed: Vec<NodeId> = special
            .iter()
            .copied()
            .filter(|&id| {
                let node = cluster.node(id);
                node.schedulable
                    && ((set.contains(&id) && holds_stopping(id))
                        || (node.free > 0 && !node.is_virtual && node.model == Some(req.model)))
            })
            .collect();
        let streamed = || -> Box<dyn Iterator<Item = (u32, u32, NodeId)> + '_> {
            Box::new(
                cluster
                    .rooms_open_first(req.model, req.per_replica)
                    .filter(|(_, _, id)| special.binary_search(id).is_err()),
            )
        };
        let found = placement::place_preferring_counted(
            cluster,
            &listed,
            req,
            &usable,
            &prefer,
            &|_| None,
            Some(&streamed as placement::Streamed),
        );
        debug_assert_eq!(
            found,
            placement::place_preferring(cluster, &every(), req, &usable, &prefer),
            "stopping jobs' GPUs streamed placed differently"
        );
        found
    }

    /// Whether some stopping job's GPUs are kept for job `j`.
    pub fn has_dedicated(&self, j: JobId) -> bool {
        self.dedicated.get(&j).is_some_and(|n| *n > 0)
    }

    /// Books a claimed GPU of a stopping run (kept for `kept_for`, if
    /// anyone) against the counters.
    pub fn claimed(&mut self, model: ModelId, kept_for: Option<JobId>) {
        match kept_for {
            Some(p) => {
                if let Some(n) = self.dedicated.get_mut(&p) {
                    *n = n.saturating_sub(1);
                }
                self.dedicated_total = self.dedicated_total.saturating_sub(1);
            }
            None => {
                if let Some(n) = self.general.get_mut(model as usize) {
                    *n = n.saturating_sub(1);
                }
            }
        }
    }
}
