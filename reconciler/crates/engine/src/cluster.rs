//! The engine's view of the nodes: who holds each GPU, NVLink domains,
//! topology labels, and an index of free capacity per GPU model.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use model::observed::ObservedNode;
use model::spec::NvLink;

use super::ids::{JobId, ModelId, Models, NodeId, PoolId, RunId};

/// Who holds a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Free to give out.
    Free,
    /// Never given out.
    Unhealthy,
    /// Held by a running job.
    Running(RunId),
    /// Given to a pending job by this plan.
    Placed(JobId),
    /// Held by a job that is stopping (preempted, terminated, cancelled).
    Freeing(RunId),
    /// Held by a stopping job and promised to a pending job that waits for it.
    Claimed(RunId, JobId),
    /// Free, but reserved (backfill) for the first blocked job.
    Reserved,
    /// Free, and promised to a pending job that waits for other GPUs
    /// (scale-up, preemption, stopping jobs).
    Promised(JobId),
}

/// One GPU slot of a node.
#[derive(Debug, Clone)]
pub struct Gpu {
    /// Index on the node.
    pub index: u32,
    /// NVLink domain on the node.
    pub domain: u32,
    /// Who holds it.
    pub owner: Owner,
}

/// One node.
#[derive(Debug, Clone)]
pub struct NodeState {
    /// Node name.
    pub name: String,
    /// Its pool, when declared in Git.
    pub pool: Option<PoolId>,
    /// The model of its GPUs (the most common one on mixed nodes).
    pub model: Option<ModelId>,
    /// `rack` label.
    pub rack: Option<String>,
    /// `zone` label.
    pub zone: Option<String>,
    /// GPUs by position (sorted by index).
    pub gpus: Vec<Gpu>,
    /// Largest NVLink domain (in GPUs).
    pub max_domain: u32,
    /// Each NVLink domain's GPU positions as a bit set, sorted by domain
    /// (empty on nodes of more than 64 GPUs, which take the general path).
    pub domain_masks: Vec<(u32, u64)>,
    /// New placements allowed (false for drained nodes and nodes of no pool).
    pub schedulable: bool,
    /// A node that scale-up would add; it does not exist yet.
    pub is_virtual: bool,
    /// A virtual node the plan adds in any case (to reach the pool's `min`).
    pub planned: bool,
    /// Free GPUs (owner `Free`).
    pub free: u32,
    /// Since when the node has run nothing (observed).
    pub idle_since: Option<model::observed::Timestamp>,
}

impl NodeState {
    /// How many of its GPUs are not unhealthy.
    pub fn healthy_gpus(&self) -> u64 {
        self.gpus
            .iter()
            .filter(|g| g.owner != Owner::Unhealthy)
            .count() as u64
    }

    /// Whether no job runs on, is placed on or waits for the node (for scale-down).
    pub fn is_idle(&self) -> bool {
        self.gpus
            .iter()
            .all(|g| matches!(g.owner, Owner::Free | Owner::Unhealthy))
    }

    /// Picks `count` GPUs among those `usable` says yes to, inside one NVLink
    /// domain when a domain is large enough, else across as few domains as
    /// possible. Returns GPU positions.
    pub fn pick_gpus(
        &self,
        count: u32,
        usable: impl Fn(usize, &Gpu) -> bool,
    ) -> Option<Vec<usize>> {
        if count == 0 {
            return Some(Vec::new());
        }
        if let Some(mask) = self.usable_mask(&usable) {
            return self.pick_in_mask(count as usize, mask);
        }
        // Usable positions per domain; nodes have few domains and GPUs.
        let mut domains: Vec<(u32, Vec<usize>)> = Vec::new();
        for (pos, gpu) in self.gpus.iter().enumerate() {
            if !usable(pos, gpu) {
                continue;
            }
            match domains.iter_mut().find(|(d, _)| *d == gpu.domain) {
                Some((_, v)) => v.push(pos),
                None => domains.push((gpu.domain, vec![pos])),
            }
        }
        let count = count as usize;
        if count <= self.max_domain as usize {
            // Best fit inside one domain: the domain left with the fewest usable GPUs.
            let best = domains
                .iter()
                .filter(|(_, v)| v.len() >= count)
                .min_by_key(|(d, v)| (v.len(), *d))?;
            return Some(best.1[..count].to_vec());
        }
        let total: usize = domains.iter().map(|(_, v)| v.len()).sum();
        if total < count {
            return None;
        }
        domains.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        let mut picked: Vec<usize> = domains
            .into_iter()
            .flat_map(|(_, v)| v)
            .take(count)
            .collect();
        picked.sort_unstable();
        Some(picked)
    }

    /// The positions `usable` says yes to as a bit set, on nodes of at most
    /// 64 GPUs (`None` on larger ones).
    pub(crate) fn usable_mask(&self, usable: &impl Fn(usize, &Gpu) -> bool) -> Option<u64> {
        if self.domain_masks.is_empty() {
            return None;
        }
        let mut mask = 0u64;
        for (pos, gpu) in self.gpus.iter().enumerate() {
            if usable(pos, gpu) {
                mask |= 1 << pos;
            }
        }
        Some(mask)
    }

    /// [`NodeState::pick_gpus`] on a bit set of usable positions: the same
    /// choice, without allocating but for the answer.
    pub(crate) fn pick_in_mask(&self, count: usize, mask: u64) -> Option<Vec<usize>> {
        if (mask.count_ones() as usize) < count {
            return None;
        }
        if count <= self.max_domain as usize {
            // Best fit inside one domain: the fewest usable GPUs, then the
            // lowest domain.
            let mut best: Option<(u32, u32, u64)> = None;
            for &(domain, members) in &self.domain_masks {
                let bits = mask & members;
                let len = bits.count_ones();
                if (len as usize) < count {
                    continue;
                }
                if best.is_none_or(|(l, d, _)| (len, domain) < (l, d)) {
                    best = Some((len, domain, bits));
                }
            }
            let (_, _, bits) = best?;
            return Some(lowest_positions(bits, count));
        }
        // Across domains: the largest usable first (then the lowest domain),
        // each from its lowest position.
        let mut domains: Vec<(u32, u32, u64)> = self
            .domain_masks
            .iter()
            .map(|&(domain, members)| ((mask & members).count_ones(), domain, mask & members))
            .filter(|(len, _, _)| *len > 0)
            .collect();
        domains.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut picked: Vec<usize> = Vec::with_capacity(count);
        for (len, _, bits) in domains {
            let take = (len as usize).min(count - picked.len());
            picked.extend(lowest_positions(bits, take));
            if picked.len() == count {
                break;
            }
        }
        picked.sort_unstable();
        Some(picked)
    }

    /// Like [`NodeState::pick_gpus`], preferring GPUs of a lower `level`:
    /// inside one domain when one is big enough (the domain whose pick holds
    /// the most GPUs of level 0, then of 1, then the fewest usable GPUs,
    /// then the first), else across as few domains as possible; lower levels
    /// first, then lower positions.
    pub fn pick_gpus_preferring(
        &self,
        count: u32,
        usable: impl Fn(usize, &Gpu) -> bool,
        level: impl Fn(usize) -> u8,
    ) -> Option<Vec<usize>> {
        if count == 0 {
            return Some(Vec::new());
        }
        let mask = self.usable_mask(&usable);
        if mask.is_some_and(|m| (m.count_ones() as usize) < count as usize) {
            return None;
        }
        let mut domains: Vec<(u32, Vec<usize>)> = Vec::new();
        for (pos, gpu) in self.gpus.iter().enumerate() {
            let yes = match mask {
                Some(m) => m & (1 << pos) != 0,
                None => usable(pos, gpu),
            };
            if !yes {
                continue;
            }
            match domains.iter_mut().find(|(d, _)| *d == gpu.domain) {
                Some((_, v)) => v.push(pos),
                None => domains.push((gpu.domain, vec![pos])),
            }
        }
        let count = count as usize;
        let pick = |v: &[usize]| {
            let mut v = v.to_vec();
            v.sort_by_key(|pos| (level(*pos), *pos));
            v.truncate(count);
            v.sort_unstable();
            v
        };
        let of = |v: &[usize], r: u8| v.iter().filter(|p| level(**p) == r).count();
        if count <= self.max_domain as usize {
            return domains
                .iter()
                .filter(|(_, v)| v.len() >= count)
                .map(|(d, v)| {
                    let got = pick(v);
                    let key = (
                        std::cmp::Reverse(of(&got, 0)),
                        std::cmp::Reverse(of(&got, 1)),
                        v.len(),
                        *d,
                    );
                    (key, got)
                })
                .min_by(|a, b| a.0.cmp(&b.0))
                .map(|(_, got)| got);
        }
        let total: usize = domains.iter().map(|(_, v)| v.len()).sum();
        if total < count {
            return None;
        }
        domains.sort_by_key(|(d, v)| {
            (
                std::cmp::Reverse(v.len()),
                std::cmp::Reverse(of(v, 0)),
                std::cmp::Reverse(of(v, 1)),
                *d,
            )
        });
        let mut picked: Vec<usize> = Vec::with_capacity(count);
        for (_, v) in &domains {
            let mut v = v.clone();
            v.sort_by_key(|pos| (level(*pos), *pos));
            for pos in v {
                if picked.len() < count {
                    picked.push(pos);
                }
            }
        }
        picked.sort_unstable();
        Some(picked)
    }

    /// The topology domain of this node at a level, if labelled.
    pub fn domain_key(&self, level: model::spec::TopologyLevel) -> Option<&str> {
        use model::spec::TopologyLevel as L;
        match level {
            L::None => Some(""),
            L::Node => Some(&self.name),
            L::Rack => self.rack.as_deref(),
            L::Zone => self.zone.as_deref(),
        }
    }
}

/// Every node plus free-capacity indexes.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Nodes: real ones sorted by name, then virtual ones.
    pub nodes: Vec<NodeState>,
    /// The nodes [`Cluster::unindexed`] built, by the hash of their names (then
    /// id): found by binary search, cheaper to build than a map of names.
    by_hash: Vec<(u64, NodeId)>,
    /// Nodes added later ([`Cluster::push_node`]) by name.
    by_name: HashMap<String, NodeId>,
    /// Whether the free indexes are kept ([`Cluster::build_index`]).
    indexed: bool,
    /// Per model: (free, node) of schedulable real nodes with free GPUs.
    index: Vec<BTreeSet<(u32, NodeId)>>,
    /// Per model: (free, node) of virtual nodes.
    virtual_index: Vec<BTreeSet<(u32, NodeId)>>,
    /// Per model: free GPUs on schedulable real nodes.
    pub free_total: Vec<u64>,
    /// Per model: healthy GPUs on real nodes (fair-share denominators).
    pub healthy_total: Vec<u64>,
    /// Bumped on every change of a GPU's owner or a node's schedulability:
    /// answers computed at the same epoch still hold.
    pub epoch: u64,
    /// GPUs of stopping runs any job may wait for, from
    /// [`Cluster::index_waiting`] on.
    waiting: Option<Box<Waiting>>,
}

/// GPUs of stopping runs that any job may wait for ("open" runs: not kept
/// for one job), counted per node and indexed with the free GPUs, so a
/// preemptor finds the nodes where free and such GPUs add up to a replica
/// without looking at every node that holds a stopping job.
#[derive(Debug, Clone, Default)]
struct Waiting {
    /// By run: whether its GPUs are open to every job.
    open: std::rc::Rc<[bool]>,
    /// By node: GPUs of open runs on it.
    on_node: Vec<u32>,
    /// Per model: (free + open GPUs, node) of schedulable real nodes where
    /// that is above zero.
    by_room: Vec<BTreeSet<(u32, NodeId)>>,
    /// The same nodes as `by_room`, as (open GPUs, free + open, node).
    by_open: Vec<BTreeSet<(u32, u32, NodeId)>>,
    /// Per model: GPUs of open runs on schedulable real nodes.
    total: Vec<u64>,
}

impl Waiting {
    /// Whether a GPU of this owner is one of an open stopping run's.
    fn is_open(&self, owner: Owner) -> bool {
        matches!(owner, Owner::Freeing(r) if self.open.get(r as usize).copied().unwrap_or(false))
    }
}

/// How the NVLink domain of each GPU is derived from the pool's layout.
pub fn domain_of(nvlink: NvLink, position: usize) -> u32 {
    match nvlink {
        NvLink::Full => 0,
        NvLink::Pairs => (position / 2) as u32,
        NvLink::None => position as u32,
    }
}

impl Cluster {
    /// Builds the cluster from observed nodes, indexed (the engine builds it
    /// in two steps instead: [`Cluster::unindexed`], then
    /// [`Cluster::build_index`]).
    #[cfg(test)]
    pub fn new(
        observed: &[ObservedNode],
        models: &mut Models,
        pool_of: impl Fn(&str) -> Option<(PoolId, NvLink)>,
    ) -> Self {
        let mut cluster = Cluster::unindexed(observed, models, pool_of);
        cluster.build_index();
        cluster
    }

    /// Builds the cluster from observed nodes, without the free indexes
    /// (`pool_of` maps a node's pool name to the declared pool and its
    /// NVLink layout): owners and schedulability
    /// may be set node by node (no index update each time) until
    /// [`Cluster::build_index`], which must come before any other use.
    ///
    /// Built once per plan, so kept cheap: no sort when the nodes come
    /// sorted, no map of owned names (looked up by name hash).
    pub fn unindexed(
        observed: &[ObservedNode],
        models: &mut Models,
        pool_of: impl Fn(&str) -> Option<(PoolId, NvLink)>,
    ) -> Self {
        let mut sorted: Vec<&ObservedNode> = observed.iter().collect();
        // Stable: equal names keep their observed order (the last one wins
        // a lookup by name, as it would in a map filled in this order).
        if !sorted.is_sorted_by(|a, b| a.name <= b.name) {
            sorted.sort_by(|a, b| a.name.cmp(&b.name));
        }
        let mut cluster = Cluster {
            nodes: Vec::with_capacity(sorted.len()),
            ..Cluster::default()
        };
        let mut last_model: Option<(&str, ModelId)> = None;
        for node in sorted {
            let state = node_state(node, models, &mut last_model, &pool_of);
            cluster.grow(models.len());
            if let Some(m) = state.model {
                cluster.healthy_total[m as usize] += state.healthy_gpus();
            }
            cluster.nodes.push(state);
        }
        let mut by_hash: Vec<(u64, NodeId)> = cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(id, n)| (name_hash(&n.name), id as NodeId))
            .collect();
        by_hash.sort_unstable();
        cluster.by_hash = by_hash;
        cluster
    }

    /// Builds the free indexes and free counts of an [`Cluster::unindexed`]
    /// cluster from its nodes as they stand (in bulk: one sort).
    pub fn build_index(&mut self) {
        let mut free: Vec<(ModelId, u32, NodeId)> = Vec::new();
        for (id, node) in self.nodes.iter().enumerate() {
            if let Some(m) = node.model
                && node.schedulable
                && node.free > 0
            {
                free.push((m, node.free, id as NodeId));
            }
        }
        free.sort_unstable();
        let (mut index, mut virtual_index) = (Vec::new(), Vec::new());
        index.resize_with(self.index.len(), BTreeSet::new);
        virtual_index.resize_with(self.index.len(), BTreeSet::new);
        self.free_total.iter_mut().for_each(|t| *t = 0);
        for chunk in free.chunk_by(|a, b| a.0 == b.0) {
            let m = chunk[0].0 as usize;
            let (real, virt): (Vec<_>, Vec<_>) = chunk
                .iter()
                .partition(|(_, _, id)| !self.nodes[*id as usize].is_virtual);
            self.free_total[m] = real.iter().map(|(_, f, _)| u64::from(*f)).sum();
            index[m] = real.into_iter().map(|(_, f, id)| (f, id)).collect();
            virtual_index[m] = virt.into_iter().map(|(_, f, id)| (f, id)).collect();
        }
        self.index = index;
        self.virtual_index = virtual_index;
        self.indexed = true;
    }

    /// Makes this cluster, a copy of `base` that a plan has changed since,
    /// `base` again, keeping its allocations: GPU owners, free counts,
    /// drains and `idle_since` as in `base`, nodes added since removed,
    /// no index. Nothing else of a node changes after it is built.
    pub fn reset_to(&mut self, base: &Cluster) {
        self.nodes.truncate(base.nodes.len());
        for (node, was) in self.nodes.iter_mut().zip(&base.nodes) {
            node.gpus.clone_from(&was.gpus);
            node.free = was.free;
            node.schedulable = was.schedulable;
            node.planned = was.planned;
            node.idle_since = was.idle_since;
        }
        debug_assert!(self.by_hash == base.by_hash);
        self.by_name.clear();
        self.indexed = base.indexed;
        self.index.clone_from(&base.index);
        self.virtual_index.clone_from(&base.virtual_index);
        self.free_total.clone_from(&base.free_total);
        self.healthy_total.clone_from(&base.healthy_total);
        self.epoch = base.epoch;
        self.waiting.clone_from(&base.waiting);
    }

    /// Adds a node (real or virtual) and indexes it.
    pub fn push_node(&mut self, node: NodeState, model_count: usize) -> NodeId {
        self.grow(model_count);
        let id = self.nodes.len() as NodeId;
        self.by_name.insert(node.name.clone(), id);
        if let Some(m) = node.model
            && !node.is_virtual
        {
            self.healthy_total[m as usize] += node.healthy_gpus();
        }
        self.nodes.push(node);
        if let Some(w) = self.waiting.as_mut() {
            w.on_node.push(0);
        }
        self.reindex(id, None);
        self.rewait(id, None);
        id
    }

    fn grow(&mut self, model_count: usize) {
        if self.index.len() < model_count {
            self.index.resize_with(model_count, BTreeSet::new);
            self.virtual_index.resize_with(model_count, BTreeSet::new);
            self.free_total.resize(model_count, 0);
            self.healthy_total.resize(model_count, 0);
            if let Some(w) = self.waiting.as_mut() {
                w.by_room.resize_with(model_count, BTreeSet::new);
                w.by_open.resize_with(model_count, BTreeSet::new);
                w.total.resize(model_count, 0);
            }
        }
    }

    /// The node called `name` (of several, the last one added).
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        if let Some(id) = self.by_name.get(name) {
            return Some(*id);
        }
        let hash = name_hash(name);
        let from = self.by_hash.partition_point(|(h, _)| *h < hash);
        self.by_hash[from..]
            .iter()
            .take_while(|(h, _)| *h == hash)
            .filter(|(_, id)| self.nodes[*id as usize].name == name)
            .map(|(_, id)| *id)
            .last()
    }

    /// The node with id `id`.
    pub fn node(&self, id: NodeId) -> &NodeState {
        &self.nodes[id as usize]
    }

    /// Changes the owner of one GPU, keeping free counts and indexes right.
    pub fn set_owner(&mut self, node: NodeId, position: usize, owner: Owner) {
        self.set_owners(node, &[position], owner);
    }

    /// Changes the owner of several GPUs of one node (one index update).
    pub fn set_owners(&mut self, node: NodeId, positions: &[usize], owner: Owner) {
        self.epoch += 1;
        let before = self.room_of(node);
        let n = &mut self.nodes[node as usize];
        let old_free = n.free;
        let mut open_change: i64 = 0;
        for &pos in positions {
            let gpu = &mut n.gpus[pos];
            let was = gpu.owner;
            gpu.owner = owner;
            match (was == Owner::Free, owner == Owner::Free) {
                (true, false) => n.free -= 1,
                (false, true) => n.free += 1,
                _ => {}
            }
            if let Some(w) = &self.waiting {
                open_change += i64::from(w.is_open(owner)) - i64::from(w.is_open(was));
            }
        }
        if let Some(w) = self.waiting.as_mut()
            && open_change != 0
        {
            let count = &mut w.on_node[node as usize];
            *count = (i64::from(*count) + open_change) as u32;
        }
        if n.free != old_free {
            self.reindex(node, Some(old_free));
        }
        self.rewait(node, before);
    }

    /// Marks a node unschedulable (drain) and drops it from the index.
    pub fn cordon(&mut self, node: NodeId) {
        self.epoch += 1;
        let before = self.room_of(node);
        let old = self.nodes[node as usize].free;
        self.nodes[node as usize].schedulable = false;
        self.reindex(node, Some(old));
        self.rewait(node, before);
    }

    /// Starts counting the GPUs of stopping runs any job may wait for:
    /// `open[run]` says whether a run's GPUs are open to every job (fixed
    /// from here on; GPUs only leave such runs afterwards).
    pub fn index_waiting(&mut self, open: Vec<bool>) {
        let models = self.index.len();
        let mut w = Waiting {
            open: open.into(),
            on_node: vec![0; self.nodes.len()],
            by_room: vec![BTreeSet::new(); models],
            by_open: vec![BTreeSet::new(); models],
            total: vec![0; models],
        };
        for (id, node) in self.nodes.iter().enumerate() {
            let count = node.gpus.iter().filter(|g| w.is_open(g.owner)).count() as u32;
            w.on_node[id] = count;
        }
        self.waiting = Some(Box::new(w));
        for id in 0..self.nodes.len() as NodeId {
            self.rewait(id, None);
        }
    }

    /// The open-run flags of [`Cluster::index_waiting`] (none before it).
    pub fn open_runs(&self) -> std::rc::Rc<[bool]> {
        self.waiting
            .as_ref()
            .map_or_else(|| std::rc::Rc::from(Vec::new()), |w| w.open.clone())
    }

    /// GPUs of open stopping runs on node `id` when it is schedulable.
    pub fn waiting_on(&self, id: NodeId) -> u32 {
        match &self.waiting {
            Some(w) if self.nodes[id as usize].schedulable => w.on_node[id as usize],
            _ => 0,
        }
    }

    /// GPUs of open stopping runs of `model` on schedulable real nodes.
    pub fn waiting_total(&self, model: ModelId) -> u64 {
        self.waiting
            .as_ref()
            .and_then(|w| w.total.get(model as usize).copied())
            .unwrap_or(0)
    }

    /// Schedulable real nodes of `model` whose free GPUs and those of open
    /// stopping runs add up to `min_room` or more (any order).
    pub fn nodes_with_room(
        &self,
        model: ModelId,
        min_room: u32,
    ) -> impl Iterator<Item = NodeId> + '_ {
        self.waiting
            .as_ref()
            .and_then(|w| w.by_room.get(model as usize))
            .into_iter()
            .flat_map(move |set| set.range((min_room.max(1), 0)..).map(|(_, id)| *id))
    }

    /// [`Cluster::nodes_with_room`] with each node's room (free + open
    /// stopping GPUs), in the order of (room, node): best fit first, ties
    /// by name (real nodes' ids follow their names).
    pub fn rooms(
        &self,
        model: ModelId,
        min_room: u32,
    ) -> impl DoubleEndedIterator<Item = (u32, NodeId)> + '_ {
        self.waiting
            .as_ref()
            .and_then(|w| w.by_room.get(model as usize))
            .into_iter()
            .flat_map(move |set| set.range((min_room.max(1), 0)..).copied())
    }

    /// The nodes of [`Cluster::rooms`] as (open stopping GPUs, room,
    /// node), most open GPUs up to `per_replica` first, then best fit, then
    /// name: the order in which a replica of `per_replica` GPUs that
    /// prefers stopping jobs' GPUs to free ones would take them.
    pub fn rooms_open_first(
        &self,
        model: ModelId,
        per_replica: u32,
    ) -> impl Iterator<Item = (u32, u32, NodeId)> + '_ {
        let set = self
            .waiting
            .as_ref()
            .and_then(|w| w.by_open.get(model as usize));
        let per_replica = per_replica.max(1);
        // Open counts of `per_replica` or more tie: their ranges are merged
        // by (room, node). Below it, each count in turn, most first.
        let mut merged = Vec::new();
        if let Some(set) = set {
            let mut open = per_replica;
            while let Some(&(o, _, _)) = set.range((open, 0, 0)..).next() {
                merged.push(set.range((o, 0, 0)..(o + 1, 0, 0)).copied().peekable());
                open = o + 1;
            }
        }
        let merged = std::iter::from_fn(move || {
            let next = merged
                .iter_mut()
                .enumerate()
                .filter_map(|(k, it)| it.peek().map(|&(_, room, id)| ((room, id), k)))
                .min()?;
            merged[next.1].next()
        });
        let rest = (0..per_replica).rev().flat_map(move |open| {
            set.into_iter()
                .flat_map(move |s| s.range((open, per_replica, 0)..(open + 1, 0, 0)).copied())
        });
        merged.chain(rest)
    }

    /// What [`Cluster::rewait`] needs of a node before a change: its room
    /// and open GPUs while it was indexed.
    fn room_of(&self, id: NodeId) -> Option<(u32, u32)> {
        let w = self.waiting.as_ref()?;
        let node = &self.nodes[id as usize];
        let open = w.on_node[id as usize];
        (node.schedulable && node.model.is_some() && !node.is_virtual)
            .then_some((node.free + open, open))
    }

    /// Brings node `id`'s entry in the waiting index up to date (`before`:
    /// [`Cluster::room_of`] before the change).
    fn rewait(&mut self, id: NodeId, before: Option<(u32, u32)>) {
        let now = self.room_of(id);
        if now == before {
            return;
        }
        let (Some(w), Some(m)) = (self.waiting.as_mut(), self.nodes[id as usize].model) else {
            return;
        };
        let m = m as usize;
        if let Some((room, open)) = before {
            w.by_room[m].remove(&(room, id));
            w.by_open[m].remove(&(open, room, id));
            w.total[m] -= u64::from(open);
        }
        if let Some((room, open)) = now {
            if room > 0 {
                w.by_room[m].insert((room, id));
                w.by_open[m].insert((open, room, id));
            }
            w.total[m] += u64::from(open);
        }
    }

    fn reindex(&mut self, id: NodeId, old_free: Option<u32>) {
        if !self.indexed {
            return;
        }
        let node = &self.nodes[id as usize];
        let Some(model) = node.model else { return };
        let m = model as usize;
        let (index, counts) = if node.is_virtual {
            (&mut self.virtual_index[m], false)
        } else {
            (&mut self.index[m], true)
        };
        if let Some(old) = old_free
            && index.remove(&(old, id))
            && counts
        {
            self.free_total[m] -= u64::from(old);
        }
        if node.schedulable && node.free > 0 {
            index.insert((node.free, id));
            if counts {
                self.free_total[m] += u64::from(node.free);
            }
        }
    }

    /// Schedulable real nodes of `model` with at least `min_free` free GPUs,
    /// fewest free first, ties by name.
    pub fn candidates(&self, model: ModelId, min_free: u32) -> impl Iterator<Item = NodeId> + '_ {
        self.index
            .get(model as usize)
            .into_iter()
            .flat_map(move |set| set.range((min_free, 0)..).map(|(_, id)| *id))
    }

    /// Schedulable real nodes of `model` with free GPUs, plus `extra` nodes:
    /// sorted, without duplicates. The node set of most placement scans.
    pub fn free_nodes_and(
        &self,
        model: ModelId,
        extra: impl IntoIterator<Item = NodeId>,
    ) -> Vec<NodeId> {
        self.nodes_with_free_and(model, 1, extra)
    }

    /// Schedulable real nodes of `model` with at least `min_free` free GPUs,
    /// plus `extra` nodes: sorted, without duplicates. Nodes left out have
    /// fewer free GPUs than `min_free` and are not in `extra`.
    pub fn nodes_with_free_and(
        &self,
        model: ModelId,
        min_free: u32,
        extra: impl IntoIterator<Item = NodeId>,
    ) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = self.candidates(model, min_free.max(1)).collect();
        nodes.extend(extra);
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// Real node ids in name order.
    pub fn real_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len() as NodeId).filter(|id| !self.nodes[*id as usize].is_virtual)
    }
}

/// A node name's hash for [`Cluster::node_id`] (fixed: no random state).
fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(name)
}

fn node_state<'o>(
    node: &'o ObservedNode,
    models: &mut Models,
    last_model: &mut Option<(&'o str, ModelId)>,
    pool_of: &impl Fn(&str) -> Option<(PoolId, NvLink)>,
) -> NodeState {
    let declared = node.pool.as_deref().and_then(pool_of);
    let nvlink = declared.map_or(NvLink::None, |(_, l)| l);
    // GPUs by index (stable: the order observed among equal indexes).
    let order: Option<Vec<usize>> = if node.gpus.is_sorted_by_key(|g| g.index) {
        None
    } else {
        let mut order: Vec<usize> = (0..node.gpus.len()).collect();
        order.sort_by_key(|&k| node.gpus[k].index);
        Some(order)
    };
    let gpu = |k: usize| &node.gpus[order.as_ref().map_or(k, |o| o[k])];
    // The node's model: the most common one (ties: by name), so a node with a
    // stray GPU still schedules; GPUs of another model are never given out.
    let model_name: Option<&'o str> = match node.gpus.split_first() {
        None => None,
        Some((first, rest)) if rest.iter().all(|g| g.model == first.model) => {
            Some(first.model.as_str())
        }
        Some(_) => {
            let mut counts: Vec<(&str, usize)> = Vec::new();
            for g in &node.gpus {
                match counts.iter_mut().find(|(m, _)| *m == g.model) {
                    Some((_, c)) => *c += 1,
                    None => counts.push((&g.model, 1)),
                }
            }
            counts
                .iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                .map(|(m, _)| *m)
        }
    };
    let model = model_name.map(|m| match *last_model {
        Some((name, id)) if name == m => id,
        _ => {
            let id = models.intern(m);
            *last_model = Some((m, id));
            id
        }
    });
    let slots: Vec<Gpu> = (0..node.gpus.len())
        .map(|pos| {
            let g = gpu(pos);
            Gpu {
                index: g.index,
                domain: domain_of(nvlink, pos),
                owner: if g.healthy && Some(g.model.as_str()) == model_name {
                    Owner::Free
                } else {
                    Owner::Unhealthy
                },
            }
        })
        .collect();
    let masks = domain_masks(&slots);
    let max_domain = match masks.iter().map(|(_, m)| m.count_ones()).max() {
        Some(largest) => largest,
        None => max_domain_size(&slots),
    };
    let free = slots.iter().filter(|g| g.owner == Owner::Free).count() as u32;
    NodeState {
        name: node.name.clone(),
        pool: declared.map(|(p, _)| p),
        model,
        rack: node.labels.get("rack").cloned(),
        zone: node.labels.get("zone").cloned(),
        gpus: slots,
        max_domain,
        domain_masks: masks,
        schedulable: declared.is_some(),
        is_virtual: false,
        planned: false,
        free,
        idle_since: node.idle_since,
    }
}

/// A set of GPU positions of one node a replica may use: a bit set on
/// nodes of up to 64 GPUs, flags on larger ones.
#[derive(Debug, Clone)]
pub enum UsableGpus {
    /// Bit `pos` set: usable.
    Bits(u64),
    /// `flags[pos]`: usable.
    Flags(Vec<bool>),
}

impl UsableGpus {
    /// The positions of `node` that `usable` says yes to.
    pub fn of(node: &NodeState, usable: impl Fn(usize, &Gpu) -> bool) -> Self {
        match node.usable_mask(&usable) {
            Some(bits) => UsableGpus::Bits(bits),
            None => UsableGpus::Flags(
                node.gpus
                    .iter()
                    .enumerate()
                    .map(|(pos, g)| usable(pos, g))
                    .collect(),
            ),
        }
    }

    /// Adds position `pos`.
    pub fn add(&mut self, pos: usize) {
        match self {
            UsableGpus::Bits(bits) => *bits |= 1 << pos,
            UsableGpus::Flags(flags) => {
                if let Some(f) = flags.get_mut(pos) {
                    *f = true;
                }
            }
        }
    }

    /// How many positions are in the set.
    pub fn count(&self) -> u32 {
        match self {
            UsableGpus::Bits(bits) => bits.count_ones(),
            UsableGpus::Flags(flags) => flags.iter().filter(|f| **f).count() as u32,
        }
    }

    /// [`NodeState::pick_gpus`] among these positions of `node`.
    pub fn pick(&self, node: &NodeState, count: u32) -> Option<Vec<usize>> {
        if count == 0 {
            return Some(Vec::new());
        }
        match self {
            UsableGpus::Bits(bits) => node.pick_in_mask(count as usize, *bits),
            UsableGpus::Flags(flags) => node.pick_gpus(count, |pos, _| flags[pos]),
        }
    }
}

/// The positions of the lowest `count` bits set in `bits`.
fn lowest_positions(mut bits: u64, count: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count && bits != 0 {
        out.push(bits.trailing_zeros() as usize);
        bits &= bits - 1;
    }
    out
}

/// Each NVLink domain's positions among `gpus` as a bit set, sorted by
/// domain; empty for more than 64 GPUs.
pub fn domain_masks(gpus: &[Gpu]) -> Vec<(u32, u64)> {
    if gpus.len() > 64 {
        return Vec::new();
    }
    let mut masks: Vec<(u32, u64)> = Vec::new();
    for (pos, g) in gpus.iter().enumerate() {
        match masks.iter_mut().find(|(d, _)| *d == g.domain) {
            Some((_, m)) => *m |= 1 << pos,
            None => masks.push((g.domain, 1 << pos)),
        }
    }
    masks.sort_unstable();
    masks
}

/// The size of the largest NVLink domain among `gpus`.
pub fn max_domain_size(gpus: &[Gpu]) -> u32 {
    let mut sizes: Vec<(u32, u32)> = Vec::new();
    for g in gpus {
        match sizes.iter_mut().find(|(d, _)| *d == g.domain) {
            Some((_, n)) => *n += 1,
            None => sizes.push((g.domain, 1)),
        }
    }
    sizes.iter().map(|(_, n)| *n).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(nvlink: NvLink, free: &[bool]) -> NodeState {
        let gpus: Vec<Gpu> = free
            .iter()
            .enumerate()
            .map(|(i, f)| Gpu {
                index: i as u32,
                domain: domain_of(nvlink, i),
                owner: if *f { Owner::Free } else { Owner::Running(0) },
            })
            .collect();
        NodeState {
            name: "n".into(),
            pool: None,
            model: Some(0),
            rack: None,
            zone: None,
            max_domain: max_domain_size(&gpus),
            domain_masks: domain_masks(&gpus),
            free: free.iter().filter(|f| **f).count() as u32,
            gpus,
            schedulable: true,
            is_virtual: false,
            planned: false,
            idle_since: None,
        }
    }

    fn free(_: usize, g: &Gpu) -> bool {
        g.owner == Owner::Free
    }

    #[test]
    fn pairs_keep_a_two_gpu_replica_inside_one_pair() {
        // GPUs 0 and 3 free: two free GPUs, but in different pairs.
        let n = node(NvLink::Pairs, &[true, false, false, true]);
        assert_eq!(n.pick_gpus(2, free), None);
        let n = node(NvLink::Pairs, &[true, false, true, true]);
        assert_eq!(n.pick_gpus(2, free), Some(vec![2, 3]));
    }

    #[test]
    fn best_fit_domain_is_the_fullest_that_fits() {
        let n = node(NvLink::Pairs, &[true, true, true, false]);
        // Pair (2,3) has one free GPU: a 1-GPU replica goes there.
        assert_eq!(n.pick_gpus(1, free), Some(vec![2]));
    }

    #[test]
    fn large_replicas_span_as_few_domains_as_possible() {
        let n = node(NvLink::Pairs, &[true, false, true, true, true, true]);
        assert_eq!(n.pick_gpus(4, free), Some(vec![2, 3, 4, 5]));
        assert_eq!(n.pick_gpus(6, free), None);
    }

    fn observed_node(name: &str, indexes: &[u32], unhealthy: &[u32]) -> ObservedNode {
        ObservedNode {
            name: name.into(),
            pool: Some("p".into()),
            labels: Default::default(),
            idle_since: None,
            gpus: indexes
                .iter()
                .map(|&i| model::observed::ObservedGpu {
                    healthy: !unhealthy.contains(&i),
                    ..model::observed::ObservedGpu::new(i, "H100")
                })
                .collect(),
        }
    }

    #[test]
    fn nodes_are_found_by_name_in_any_order_the_last_of_a_name_winning() {
        let mut models = Models::default();
        let observed = vec![
            observed_node("n2", &[0], &[]),
            observed_node("a", &[0], &[]),
            observed_node("n10", &[3, 1, 2, 0], &[]),
            observed_node("a", &[0, 1], &[]),
        ];
        let mut c = Cluster::new(&observed, &mut models, |_| Some((0, NvLink::Full)));
        let names: Vec<&str> = c.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "a", "n10", "n2"]);
        // Two nodes called `a`: the one observed last, as a map filled in
        // name order would keep.
        assert_eq!(c.node_id("a"), Some(1));
        assert_eq!(c.node(1).gpus.len(), 2);
        assert_eq!(c.node_id("n10"), Some(2));
        assert_eq!(c.node_id("n2"), Some(3));
        assert_eq!(c.node_id("n3"), None);
        // GPUs by index, whatever order they were observed in.
        let indexes: Vec<u32> = c.node(2).gpus.iter().map(|g| g.index).collect();
        assert_eq!(indexes, [0, 1, 2, 3]);
        // A node added later is found too.
        let mut extra = c.node(3).clone();
        extra.name = "v-0".into();
        extra.is_virtual = true;
        let id = c.push_node(extra, models.len());
        assert_eq!(c.node_id("v-0"), Some(id));
    }

    #[test]
    fn the_bulk_index_is_the_one_kept_up_to_date_change_by_change() {
        let observed = vec![
            observed_node("b", &[0, 1, 2, 3], &[]),
            observed_node("a", &[0, 1, 2, 3], &[2]),
            observed_node("c", &[0, 1], &[]),
            observed_node("d", &[0, 1, 2, 3, 4, 5, 6, 7], &[]),
        ];
        let pool = |_: &str| Some((0, NvLink::Pairs));
        let change = |c: &mut Cluster| {
            c.set_owners(0, &[0, 1], Owner::Running(0));
            c.set_owner(2, 0, Owner::Freeing(1));
            c.set_owners(2, &[1], Owner::Running(2));
            c.cordon(1);
            c.set_owners(3, &[0, 1, 2], Owner::Running(3));
            c.set_owners(3, &[1], Owner::Free);
        };
        let mut models = Models::default();
        let mut kept = Cluster::new(&observed, &mut models, pool);
        change(&mut kept);
        let mut models = Models::default();
        let mut bulk = Cluster::unindexed(&observed, &mut models, pool);
        change(&mut bulk);
        bulk.build_index();
        assert_eq!(bulk.index, kept.index);
        assert_eq!(bulk.virtual_index, kept.virtual_index);
        assert_eq!(bulk.free_total, kept.free_total);
        assert_eq!(bulk.healthy_total, kept.healthy_total);
        assert_eq!(bulk.epoch, kept.epoch);
        assert_eq!(bulk.free_total, vec![1 + 6]);
        // Indexed from then on, change by change.
        bulk.set_owners(0, &[2, 3], Owner::Running(4));
        kept.set_owners(0, &[2, 3], Owner::Running(4));
        assert_eq!(bulk.index, kept.index);
        assert_eq!(bulk.free_total, kept.free_total);
    }

    #[test]
    fn index_tracks_free_counts() {
        let mut models = Models::default();
        let observed = vec![model::observed::ObservedNode {
            name: "b".into(),
            pool: Some("p".into()),
            labels: Default::default(),
            idle_since: None,
            gpus: (0..4)
                .map(|i| model::observed::ObservedGpu {
                    healthy: i != 3,
                    ..model::observed::ObservedGpu::new(i, "H100")
                })
                .collect(),
        }];
        let mut c = Cluster::new(&observed, &mut models, |_| Some((0, NvLink::Full)));
        let m = models.get("H100").unwrap();
        assert_eq!(c.free_total[m as usize], 3);
        assert_eq!(c.healthy_total[m as usize], 3);
        c.set_owner(0, 0, Owner::Placed(7));
        assert_eq!(c.free_total[m as usize], 2);
        assert_eq!(c.candidates(m, 3).count(), 0);
        assert_eq!(c.candidates(m, 2).collect::<Vec<_>>(), vec![0]);
        c.cordon(0);
        assert_eq!(c.free_total[m as usize], 0);
    }

    #[test]
    fn bit_set_picks_match_the_general_path_for_every_free_set() {
        // Exhaustive over 8 GPUs: every layout, free set and count picks
        // the same GPUs with the bit sets as without them (the path nodes
        // of more than 64 GPUs take).
        for nvlink in [NvLink::Full, NvLink::Pairs, NvLink::None] {
            for free_bits in 0u32..256 {
                let free_set: Vec<bool> = (0..8).map(|i| free_bits & (1 << i) != 0).collect();
                let fast = node(nvlink, &free_set);
                assert!(!fast.domain_masks.is_empty());
                let general = NodeState {
                    domain_masks: Vec::new(),
                    ..fast.clone()
                };
                for count in 0..=9 {
                    assert_eq!(
                        fast.pick_gpus(count, free),
                        general.pick_gpus(count, free),
                        "{nvlink:?} free {free_bits:08b} count {count}"
                    );
                    let level = |pos: usize| (pos % 3) as u8;
                    assert_eq!(
                        fast.pick_gpus_preferring(count, free, level),
                        general.pick_gpus_preferring(count, free, level),
                        "{nvlink:?} free {free_bits:08b} count {count} preferring"
                    );
                }
            }
        }
    }

    /// The waiting index recounted from the owners as they stand.
    fn recount(c: &Cluster) -> Waiting {
        let mut fresh = c.clone();
        fresh.index_waiting(c.open_runs().to_vec());
        *fresh.waiting.expect("indexed")
    }

    proptest::proptest! {
        /// Kept change by change, the waiting index (open stopping GPUs per
        /// node, nodes by free + open GPUs, totals) is the one recounted
        /// from scratch, whatever owners change and nodes are drained.
        #[test]
        fn the_waiting_index_is_kept_as_a_recount_would_find_it(
            owners in proptest::collection::vec(0u8..6, 32),
            open in proptest::collection::vec(proptest::bool::ANY, 4),
            changes in proptest::collection::vec((0u32..4, 0usize..8, 0u8..6, 0u8..10), 1..40),
        ) {
            let observed: Vec<ObservedNode> = (0..4)
                .map(|n| observed_node(&format!("n{n}"), &[0, 1, 2, 3, 4, 5, 6, 7], &[]))
                .collect();
            let mut models = Models::default();
            let mut c = Cluster::new(&observed, &mut models, |_| Some((0, NvLink::Full)));
            let owner = |k: u8| match k {
                0 | 1 => Owner::Free,
                2 => Owner::Running(0),
                3 => Owner::Placed(1),
                k => Owner::Freeing(u32::from(k) - 3 + u32::from(k % 2)),
            };
            for (i, &k) in owners.iter().enumerate() {
                c.set_owner((i / 8) as NodeId, i % 8, owner(k));
            }
            c.index_waiting(open.clone());
            for (node, pos, k, action) in changes {
                if action == 0 {
                    c.cordon(node);
                } else if action < 4 {
                    c.set_owners(node, &[pos, (pos + 3) % 8], owner(k));
                } else {
                    c.set_owner(node, pos, owner(k));
                }
                let kept = c.waiting.as_deref().expect("indexed");
                let fresh = recount(&c);
                proptest::prop_assert_eq!(&kept.on_node, &fresh.on_node);
                proptest::prop_assert_eq!(&kept.by_room, &fresh.by_room);
                proptest::prop_assert_eq!(&kept.by_open, &fresh.by_open);
                proptest::prop_assert_eq!(&kept.total, &fresh.total);
            }
            // The orders the victim search streams nodes in: every node
            // with the room, sorted by the key a search would give it.
            for per_replica in 1..=8u32 {
                let mut expected: Vec<(u32, u32, NodeId)> = (0..4)
                    .filter(|&id| c.node(id).schedulable)
                    .map(|id| (c.waiting_on(id), c.node(id).free + c.waiting_on(id), id))
                    .filter(|&(_, room, _)| room >= per_replica)
                    .collect();
                expected.sort_by_key(|&(open, room, id)| (per_replica - open.min(per_replica), room, id));
                let streamed: Vec<_> = c.rooms_open_first(0, per_replica).collect();
                proptest::prop_assert_eq!(&streamed, &expected);
                expected.sort_by_key(|&(_, room, id)| (room, id));
                let by_room: Vec<(u32, NodeId)> = expected.iter().map(|&(_, room, id)| (room, id)).collect();
                let streamed: Vec<_> = c.rooms(0, per_replica).collect();
                proptest::prop_assert_eq!(streamed, by_room);
            }
            // What the search reads agrees with the owners.
            for id in 0..4 {
                let node = c.node(id);
                let open_gpus = node
                    .gpus
                    .iter()
                    .filter(|g| matches!(g.owner, Owner::Freeing(r) if open[r as usize]))
                    .count() as u32;
                let expected = if node.schedulable { open_gpus } else { 0 };
                proptest::prop_assert_eq!(c.waiting_on(id), expected);
            }
        }
    }
}
