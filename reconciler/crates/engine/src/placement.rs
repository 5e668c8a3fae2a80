//! Gang placement: every replica on one node, on usable GPUs of one model,
//! inside one NVLink domain where it fits in one; best fit (the node left with
//! the fewest free GPUs, ties by name); topology required/preferred.

use std::collections::BTreeMap;

use model::spec::TopologyLevel;

use super::cluster::{Cluster, Gpu, NodeState, Owner};
use super::ids::{JobId, ModelId, NodeId};

/// GPU positions per replica: one `(node, positions)` entry per replica.
pub type Placement = Vec<(NodeId, Vec<usize>)>;

/// What a gang asks for on one model.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    /// The model every replica uses.
    pub model: ModelId,
    /// Gang size.
    pub replicas: u32,
    /// GPUs per replica.
    pub per_replica: u32,
    /// All replicas inside one domain of this level.
    pub required: Option<TopologyLevel>,
    /// As few domains of this level as possible.
    pub preferred: Option<TopologyLevel>,
}

impl Request {
    /// What job `job` asks for on model `model`.
    pub fn for_job(job: &super::jobs::JobInfo, model: ModelId) -> Self {
        Request {
            model,
            replicas: job.replicas,
            per_replica: job.per_replica,
            required: job.required,
            preferred: job.preferred,
        }
    }

    /// Total GPUs.
    pub fn total(&self) -> u64 {
        u64::from(self.replicas) * u64::from(self.per_replica)
    }
}

/// Places on free GPUs of real nodes and applies the placement as
/// `Owner::Placed(job)`; on failure nothing changes.
pub fn place_free(cluster: &mut Cluster, req: &Request, job: JobId) -> Option<Placement> {
    if cluster
        .free_total
        .get(req.model as usize)
        .copied()
        .unwrap_or(0)
        < req.total()
    {
        return None;
    }
    if let Some(level) = req.required.or(req.preferred) {
        let nodes: Vec<NodeId> = cluster.candidates(req.model, 1).collect();
        let usable = |n: &NodeState, _: usize, g: &Gpu| n.schedulable && g.owner == Owner::Free;
        let found = in_one_domain(cluster, &nodes, req, level, &usable, &|_| 0).or_else(|| {
            req.required
                .is_none()
                .then(|| fewest_domains(cluster, &nodes, req, level, &usable, &|_| 0, None))
                .flatten()
        });
        match (found, req.required) {
            (Some(p), _) => {
                apply(cluster, &p, Owner::Placed(job));
                return Some(p);
            }
            (None, Some(_)) => return None,
            (None, None) => {} // preferred: fall back to best fit anywhere
        }
    }
    best_fit_through_index(cluster, req, job)
}

/// Best fit per replica through the free index, allocating as it goes so each
/// replica sees the previous ones; rolled back on failure.
fn best_fit_through_index(cluster: &mut Cluster, req: &Request, job: JobId) -> Option<Placement> {
    let epoch = cluster.epoch;
    let mut placed: Placement = Vec::with_capacity(req.replicas as usize);
    for _ in 0..req.replicas {
        let found = cluster
            .candidates(req.model, req.per_replica)
            .find_map(|id| {
                cluster
                    .node(id)
                    .pick_gpus(req.per_replica, |_, g| g.owner == Owner::Free)
                    .map(|p| (id, p))
            });
        match found {
            Some((id, positions)) => {
                for &pos in &positions {
                    cluster.set_owner(id, pos, Owner::Placed(job));
                }
                placed.push((id, positions));
            }
            None => {
                // Rolled back: nothing changed, the epoch neither.
                apply(cluster, &placed, Owner::Free);
                cluster.epoch = epoch;
                return None;
            }
        }
    }
    Some(placed)
}

/// Places over an explicit node set with a custom notion of usable GPUs,
/// without changing anything; the caller applies the result.
pub fn place_scan(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
) -> Option<Placement> {
    place_ranked(cluster, nodes, req, usable, &|_| 0)
}

/// How much a usable GPU is preferred: 0 first (GPUs of stopping jobs and
/// victims, which a waiting job should use so that it keeps as few free
/// GPUs idle as it can), then 1 (GPUs nominated for the job), then 2.
pub type Prefer<'a> = &'a dyn Fn(NodeId, usize, &Gpu) -> u8;

/// What a caller already knows of a node's usable GPUs under its predicate
/// and preference, without a look at each GPU: `Some((usable, [of
/// preference 0, of preference 1]))`, or `None` to count them.
pub type Counted<'a> = &'a dyn Fn(NodeId) -> Option<(u32, [u32; 2])>;

/// Nodes a placement reads from an index, in order, instead of from a
/// list: each call starts the stream again, yielding (GPUs of preference
/// 0, usable GPUs, node) in the order of (missing preference-0 GPUs for a
/// replica, usable GPUs, node); none of preference 1. See
/// [`crate::cluster::Cluster::rooms_open_first`].
pub type Streamed<'a> = &'a dyn Fn() -> Box<dyn Iterator<Item = (u32, u32, NodeId)> + 'a>;

/// [`place_preferring`] where `counted` knows the usable GPUs of some nodes
/// (it must agree with `usable` and `prefer`): those are not looked at GPU
/// by GPU until one may win; and, without topology, `streamed` nodes
/// (sorted `nodes` hold none of them; they must agree with `usable` and
/// `prefer` too) are read only as far as the search gets. The same
/// placement as on `nodes` and the streamed ones together.
pub fn place_preferring_counted(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    prefer: Prefer,
    counted: Counted,
    streamed: Option<Streamed>,
) -> Option<Placement> {
    if req.required.or(req.preferred).is_some() {
        debug_assert!(streamed.is_none(), "streamed nodes with topology");
        return place_preferring(cluster, nodes, req, usable, prefer);
    }
    greedy_preferring(
        cluster,
        nodes,
        req,
        usable,
        &|_| 0,
        prefer,
        counted,
        streamed,
    )
}

/// Like [`place_scan`], preferring GPUs by `prefer`: the node whose pick
/// holds the most GPUs of preference 0, then of 1, then best fit.
pub fn place_preferring(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    prefer: Prefer,
) -> Option<Placement> {
    if let Some(level) = req.required.or(req.preferred) {
        let found = domain_search(cluster, nodes, req, level, usable, &|_| 0, Some(prefer));
        if found.is_some() || req.required.is_some() {
            return found;
        }
        if let Some(p) = fewest_domains(cluster, nodes, req, level, usable, &|_| 0, Some(prefer)) {
            return Some(p);
        }
    }
    greedy_with(cluster, nodes, req, usable, &|_| 0, Some(prefer))
}

/// [`place_preferring`] for a gang with `required` topology whose nodes
/// come grouped by domain (in domain-name order, each domain's nodes in
/// `nodes` order) with their usable GPUs counted by `count` (it must agree
/// with `usable`): a domain's capacity is a sum of counts, not a look at
/// every GPU, and domains are searched best first (least capacity left,
/// then name) until one holds the gang, not all of them. The same
/// placement as [`place_preferring`] on every domain's nodes.
pub fn place_in_domains(
    cluster: &Cluster,
    domains: &[&[NodeId]],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    prefer: Prefer,
    count: &dyn Fn(NodeId) -> u32,
) -> Option<Placement> {
    debug_assert!(
        req.required.is_some(),
        "a domain search without required topology"
    );
    let total = req.total();
    let mut fitting: Vec<(u64, usize)> = domains
        .iter()
        .enumerate()
        .filter_map(|(k, members)| {
            let capacity: u64 = members.iter().map(|id| u64::from(count(*id))).sum();
            (capacity >= total).then(|| (capacity - total, k))
        })
        .collect();
    fitting.sort_unstable();
    let found = fitting.iter().find_map(|&(_, k)| {
        let members: Vec<NodeId> = domains[k]
            .iter()
            .copied()
            .filter(|id| count(*id) > 0)
            .collect();
        greedy_with(cluster, &members, req, usable, &|_| 0, Some(prefer))
    });
    #[cfg(debug_assertions)]
    {
        for id in domains.iter().flat_map(|d| d.iter()) {
            let node = cluster.node(*id);
            debug_assert_eq!(
                count(*id),
                usable_count(node, usable),
                "a node counted wrong"
            );
        }
        let mut every: Vec<NodeId> = domains.iter().flat_map(|d| d.iter().copied()).collect();
        every.sort_unstable();
        debug_assert_eq!(
            found,
            place_preferring(cluster, &every, req, usable, prefer),
            "a gang placed differently by domain"
        );
    }
    found
}

/// Like [`place_scan`], but nodes of a lower `rank` are preferred over any
/// of a higher rank before best fit applies (scale-up: existing nodes, then
/// nodes already being added, then new ones).
pub fn place_ranked(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    rank: &dyn Fn(&NodeState) -> u8,
) -> Option<Placement> {
    if let Some(level) = req.required.or(req.preferred) {
        let found = in_one_domain(cluster, nodes, req, level, usable, rank);
        if found.is_some() || req.required.is_some() {
            return found;
        }
        if let Some(p) = fewest_domains(cluster, nodes, req, level, usable, rank, None) {
            return Some(p);
        }
    }
    greedy(cluster, nodes, req, usable, rank)
}

/// Sets the owner of every GPU of a placement.
pub fn apply(cluster: &mut Cluster, placement: &Placement, owner: Owner) {
    for (id, positions) in placement {
        cluster.set_owners(*id, positions, owner);
    }
}

/// All replicas inside one domain of `level`: the domain left with the least
/// usable capacity wins, ties by domain name.
fn in_one_domain(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    level: TopologyLevel,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    rank: &dyn Fn(&NodeState) -> u8,
) -> Option<Placement> {
    domain_search(cluster, nodes, req, level, usable, rank, None)
}

/// [`in_one_domain`] with an optional GPU preference.
fn domain_search(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    level: TopologyLevel,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    rank: &dyn Fn(&NodeState) -> u8,
    prefer: Option<Prefer>,
) -> Option<Placement> {
    let domains: Vec<(u64, Vec<NodeId>)> = by_domain(cluster, nodes, req, level, usable, 1)
        .into_values()
        .map(|members| {
            let capacity = members.iter().map(|(_, c)| u64::from(*c)).sum();
            (capacity, members.into_iter().map(|(id, _)| id).collect())
        })
        .collect();
    // Best domain: lowest worst rank used, then least capacity left, then name.
    let mut best: Option<((u8, u64), Placement)> = None;
    for (capacity, members) in &domains {
        if *capacity < req.total() {
            continue;
        }
        let left = capacity - req.total();
        if best
            .as_ref()
            .is_some_and(|((r, l), _)| *r == 0 && *l <= left)
        {
            continue;
        }
        if let Some(p) = greedy_with(cluster, members, req, usable, rank, prefer) {
            let worst = p
                .iter()
                .map(|(id, _)| rank(cluster.node(*id)))
                .max()
                .unwrap_or(0);
            if best.as_ref().is_none_or(|(key, _)| (worst, left) < *key) {
                best = Some(((worst, left), p));
            }
        }
    }
    best.map(|(_, p)| p)
}

/// `preferred` topology when no single domain holds the gang (issue 16
/// item 7): the fewest domains of `level` that hold it, and among those
/// the set that leaves the fewest usable GPUs over (then the first set in
/// domain-name order); inside the chosen domains, best fit. Each domain
/// counts the replicas its nodes hold exactly (per node, NVLink domains
/// included) and all its usable GPUs, so the set is found by a small
/// dynamic programme over the domains instead of trying every
/// combination. `None` when no set works (the caller falls back to best
/// fit anywhere).
fn fewest_domains(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    level: TopologyLevel,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    rank: &dyn Fn(&NodeState) -> u8,
    prefer: Option<Prefer>,
) -> Option<Placement> {
    if req.replicas < 2 || req.per_replica == 0 {
        return None;
    }
    let want = u64::from(req.replicas);
    // Per domain (in name order): replicas it holds (at most `want`),
    // usable GPUs, members.
    let domains: Vec<DomainRoom> = by_domain(cluster, nodes, req, level, usable, 1)
        .into_values()
        .map(|members| {
            let replicas = members
                .iter()
                .map(|(id, _)| replicas_on(cluster.node(*id), req.per_replica, usable))
                .sum::<u64>()
                .min(want);
            let gpus = members.iter().map(|(_, c)| u64::from(*c)).sum();
            DomainRoom {
                replicas,
                gpus,
                members: members.into_iter().map(|(id, _)| id).collect(),
            }
        })
        .collect();
    let chosen = fewest_least_left(&domains, want)?;
    let members: Vec<NodeId> = chosen
        .iter()
        .flat_map(|i| domains[*i].members.iter().copied())
        .collect();
    greedy_with(cluster, &members, req, usable, rank, prefer)
}

/// One topology domain as [`fewest_domains`] sees it.
struct DomainRoom {
    /// Replicas its usable GPUs hold (capped at the gang's size).
    replicas: u64,
    /// Its usable GPUs.
    gpus: u64,
    /// Its nodes.
    members: Vec<NodeId>,
}

/// The fewest domains whose replicas add up to `want`, then the fewest
/// GPUs among them, then the first such set in index order (indices
/// ascending). `None` when all of them together hold fewer.
fn fewest_least_left(domains: &[DomainRoom], want: u64) -> Option<Vec<usize>> {
    // The fewest: the smallest k whose k largest domains hold the gang.
    let mut sizes: Vec<u64> = domains.iter().map(|d| d.replicas).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let mut held = 0;
    let k = sizes.iter().position(|r| {
        held += r;
        held >= want
    })? + 1;
    // best[i][c][r]: the fewest GPUs of exactly `c` domains among
    // `domains[i..]` holding at least `r` replicas (u64::MAX: impossible).
    let n = domains.len();
    let w = want as usize;
    let cells = (n + 1)
        .checked_mul(k + 1)
        .and_then(|x| x.checked_mul(w + 1));
    if cells.is_none_or(|cells| cells > MAX_DP_CELLS) {
        return Some(largest_then_smallest(domains, want, k));
    }
    let width = (k + 1) * (w + 1);
    let at = |c: usize, r: usize| c * (w + 1) + r;
    let mut best = vec![u64::MAX; (n + 1) * width];
    best[n * width + at(0, 0)] = 0;
    for i in (0..n).rev() {
        let (here, next) = best.split_at_mut((i + 1) * width);
        let here = &mut here[i * width..];
        let next = &next[..width];
        let d = &domains[i];
        for c in 0..=k {
            for r in 0..=w {
                let skip = next[at(c, r)];
                let take = if c == 0 {
                    u64::MAX
                } else {
                    let rest = r.saturating_sub(d.replicas as usize);
                    next[at(c - 1, rest)].saturating_add(d.gpus)
                };
                here[at(c, r)] = skip.min(take);
            }
        }
    }
    if best[at(k, w)] == u64::MAX {
        return None;
    }
    // The first set in index order among the best: take a domain whenever
    // a best set goes on from it.
    let mut chosen = Vec::with_capacity(k);
    let (mut c, mut r) = (k, w);
    for (i, d) in domains.iter().enumerate() {
        if c == 0 {
            break;
        }
        let goal = best[i * width + at(c, r)];
        let rest = r.saturating_sub(d.replicas as usize);
        let next = &best[(i + 1) * width..(i + 2) * width];
        if next[at(c - 1, rest)].saturating_add(d.gpus) == goal {
            chosen.push(i);
            c -= 1;
            r = rest;
        }
    }
    Some(chosen)
}

/// The most cells [`fewest_least_left`]'s table may have (16 MiB): a gang
/// of thousands of replicas over thousands of small domains is placed by
/// [`largest_then_smallest`] instead, in bounded time and memory.
const MAX_DP_CELLS: usize = 2 << 20;

/// `k` domains that hold `want` replicas, without the table: the `k − 1`
/// that hold the most (then fewer GPUs, then index) and, as the last, the
/// one with the fewest GPUs (then index) that completes them. Indices
/// ascending.
fn largest_then_smallest(domains: &[DomainRoom], want: u64, k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..domains.len()).collect();
    order.sort_by(|a, b| {
        let (x, y) = (&domains[*a], &domains[*b]);
        y.replicas
            .cmp(&x.replicas)
            .then(x.gpus.cmp(&y.gpus))
            .then(a.cmp(b))
    });
    let (first, rest) = order.split_at(k.saturating_sub(1).min(order.len()));
    let need = want.saturating_sub(first.iter().map(|i| domains[*i].replicas).sum());
    let last = rest
        .iter()
        .filter(|i| domains[**i].replicas >= need)
        .min_by_key(|i| (domains[**i].gpus, **i));
    let mut chosen: Vec<usize> = first.iter().copied().chain(last.copied()).collect();
    chosen.sort_unstable();
    chosen
}

/// How many replicas of `per_replica` GPUs fit on a node's `usable` GPUs
/// (NVLink domains as a replica's pick honours them).
fn replicas_on(
    node: &NodeState,
    per_replica: u32,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
) -> u64 {
    let mut taken: Vec<usize> = Vec::new();
    let mut n = 0;
    while let Some(p) = node.pick_gpus(per_replica, |pos, g| {
        usable(node, pos, g) && !taken.contains(&pos)
    }) {
        taken.extend(p);
        n += 1;
    }
    n
}

/// The nodes of `req`'s model grouped by their domain of `level` (nodes
/// without one are left out), each with its usable GPU count, for nodes
/// with at least `min_usable` of them.
fn by_domain<'c>(
    cluster: &'c Cluster,
    nodes: &[NodeId],
    req: &Request,
    level: TopologyLevel,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    min_usable: u32,
) -> BTreeMap<&'c str, Vec<(NodeId, u32)>> {
    let mut domains: BTreeMap<&str, Vec<(NodeId, u32)>> = BTreeMap::new();
    for &id in nodes {
        let node = cluster.node(id);
        if node.model != Some(req.model) {
            continue;
        }
        let Some(key) = node.domain_key(level) else {
            continue;
        };
        let count = usable_count(node, usable);
        if count < min_usable.max(1) {
            continue;
        }
        domains.entry(key).or_default().push((id, count));
    }
    domains
}

fn usable_count(node: &NodeState, usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool) -> u32 {
    node.gpus
        .iter()
        .enumerate()
        .filter(|(pos, g)| usable(node, *pos, g))
        .count() as u32
}

/// A node chosen for one replica: (rank, preferred GPUs of preference 0 and
/// 1 not used, GPUs left), name, node, positions.
type Choice<'a> = (ChoiceKey, &'a str, NodeId, Vec<usize>);

/// What orders nodes for a replica: (rank, preferred GPUs of preference 0
/// and 1 not used, GPUs left); lower is better.
type ChoiceKey = (u8, u32, u32, u32);

/// Best fit per replica over `nodes`, tracking what earlier replicas took.
fn greedy(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    rank: &dyn Fn(&NodeState) -> u8,
) -> Option<Placement> {
    greedy_with(cluster, nodes, req, usable, rank, None)
}

/// [`greedy`] with an optional GPU preference: the node whose pick holds
/// the most GPUs of preference 0, then of 1, then best fit.
fn greedy_with(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    rank: &dyn Fn(&NodeState) -> u8,
    prefer: Option<Prefer>,
) -> Option<Placement> {
    if let Some(prefer) = prefer {
        return greedy_preferring(cluster, nodes, req, usable, rank, prefer, &|_| None, None);
    }
    let mut taken: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
    let mut placed: Placement = Vec::with_capacity(req.replicas as usize);
    for _ in 0..req.replicas {
        let mut best: Option<Choice> = None;
        for &id in nodes {
            let node = cluster.node(id);
            if node.model != Some(req.model) {
                continue;
            }
            let mine = taken.get(&id);
            let is_usable = |pos: usize, g: &Gpu| {
                usable(node, pos, g) && !mine.is_some_and(|t| t.contains(&pos))
            };
            let avail = node
                .gpus
                .iter()
                .enumerate()
                .filter(|(pos, g)| is_usable(*pos, g))
                .count() as u32;
            if avail < req.per_replica {
                continue;
            }
            let left = (rank(node), 0, 0, avail - req.per_replica);
            if best
                .as_ref()
                .is_some_and(|(l, name, _, _)| (*l, *name) <= (left, node.name.as_str()))
            {
                continue;
            }
            if let Some(p) = node.pick_gpus(req.per_replica, is_usable) {
                best = Some((left, &node.name, id, p));
            }
        }
        let (_, _, id, positions) = best?;
        taken
            .entry(id)
            .or_default()
            .extend(positions.iter().copied());
        placed.push((id, positions));
    }
    Some(placed)
}

/// [`greedy_with`] with a GPU preference: per replica, the node whose pick
/// holds the most GPUs of preference 0, then of 1, then best fit, then
/// name. Nodes are tried in the order of a lower bound of that key (from
/// the node's usable GPUs of preference 0 and 1, exact GPUs left), and the
/// search stops at the first whose bound cannot beat the best pick so far:
/// the same choice as trying every node, with few picks.
#[allow(clippy::too_many_arguments)]
fn greedy_preferring(
    cluster: &Cluster,
    nodes: &[NodeId],
    req: &Request,
    usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    rank: &dyn Fn(&NodeState) -> u8,
    prefer: Prefer,
    counted: Counted,
    streamed: Option<Streamed>,
) -> Option<Placement> {
    let per_replica = req.per_replica;
    let mut taken: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
    let mut placed: Placement = Vec::with_capacity(req.replicas as usize);
    let mut order: Vec<(ChoiceKey, &str, NodeId)> = Vec::new();
    let mut streamed_taken: Vec<NodeId> = Vec::new();
    for _ in 0..req.replicas {
        order.clear();
        // A streamed node an earlier replica took is looked at in full.
        for &id in nodes.iter().chain(&streamed_taken) {
            let node = cluster.node(id);
            if node.model != Some(req.model) {
                continue;
            }
            let mine = taken.get(&id);
            let known = if mine.is_none() { counted(id) } else { None };
            let (avail, levels) = known.unwrap_or_else(|| {
                let (mut avail, mut levels) = (0u32, [0u32; 2]);
                for (pos, g) in node.gpus.iter().enumerate() {
                    if usable(node, pos, g) && !mine.is_some_and(|t| t.contains(&pos)) {
                        avail += 1;
                        if let Some(n) = levels.get_mut(usize::from(prefer(id, pos, g))) {
                            *n += 1;
                        }
                    }
                }
                (avail, levels)
            });
            if avail < per_replica {
                continue;
            }
            // A pick holds at most min(replica, usable) GPUs of preference
            // 0 and, with that many, at most the rest of preference 1.
            let of0 = levels[0].min(per_replica);
            let of1 = levels[1].min(per_replica - of0);
            let bound = (
                rank(node),
                per_replica - of0,
                per_replica - of1,
                avail - per_replica,
            );
            order.push((bound, node.name.as_str(), id));
        }
        // In bound order, lazily: the search usually stops after a few.
        let mut heap = std::collections::BinaryHeap::from(
            std::mem::take(&mut order)
                .into_iter()
                .map(std::cmp::Reverse)
                .collect::<Vec<_>>(),
        );
        // Streamed nodes are counted: their bound is their key.
        let mut stream = streamed.map(|start| {
            start()
                .filter(|(_, _, id)| !taken.contains_key(id))
                .map(|(open, room, id)| {
                    let node = cluster.node(id);
                    debug_assert_eq!(rank(node), 0, "a streamed node of a rank");
                    let bound = (
                        0,
                        per_replica - open.min(per_replica),
                        per_replica,
                        room - per_replica,
                    );
                    (bound, node.name.as_str(), id)
                })
                .peekable()
        });
        let mut next = || {
            let from_stream = stream.as_mut().and_then(|s| s.peek().copied());
            let from_heap = heap.peek().map(|std::cmp::Reverse(x)| *x);
            match (from_heap, from_stream) {
                (Some(h), Some(s)) if s < h => stream.as_mut().and_then(|s| s.next()),
                (Some(_), _) => heap.pop().map(|std::cmp::Reverse(x)| x),
                (None, _) => stream.as_mut().and_then(|s| s.next()),
            }
        };
        let mut best: Option<Choice> = None;
        while let Some((bound, name, id)) = next() {
            if best
                .as_ref()
                .is_some_and(|(l, n, _, _)| (bound, name) >= (*l, *n))
            {
                break;
            }
            let (rank, _, _, left) = bound;
            let avail = left + per_replica;
            let node = cluster.node(id);
            let mine = taken.get(&id);
            let is_usable = |pos: usize, g: &Gpu| {
                usable(node, pos, g) && !mine.is_some_and(|t| t.contains(&pos))
            };
            let level = |pos: usize| prefer(id, pos, &node.gpus[pos]);
            let Some(p) = node.pick_gpus_preferring(per_replica, is_usable, level) else {
                continue;
            };
            let of = |r: u8| p.iter().filter(|pos| level(**pos) == r).count() as u32;
            let key = (
                rank,
                per_replica - of(0),
                per_replica - of(1),
                avail - per_replica,
            );
            if best
                .as_ref()
                .is_none_or(|(l, n, _, _)| (key, name) < (*l, *n))
            {
                best = Some((key, &node.name, id, p));
            }
        }
        let (_, _, id, positions) = best?;
        if streamed.is_some() && nodes.binary_search(&id).is_err() && !taken.contains_key(&id) {
            streamed_taken.push(id);
        }
        taken
            .entry(id)
            .or_default()
            .extend(positions.iter().copied());
        placed.push((id, positions));
    }
    Some(placed)
}

/// For messages: how many replicas of `per_replica` GPUs fit into the best
/// single domain of `level` on free GPUs (and that domain's name).
pub fn largest_block(
    cluster: &Cluster,
    model: ModelId,
    per_replica: u32,
    level: Option<TopologyLevel>,
) -> u64 {
    let mut per_domain: BTreeMap<&str, u64> = BTreeMap::new();
    for id in cluster.candidates(model, per_replica) {
        let node = cluster.node(id);
        let key = match level {
            Some(l) => match node.domain_key(l) {
                Some(k) => k,
                None => continue,
            },
            None => node.name.as_str(),
        };
        let fits = replicas_fitting(node, per_replica);
        *per_domain.entry(key).or_default() += fits;
    }
    per_domain.values().copied().max().unwrap_or(0)
}

/// How many replicas of `per_replica` GPUs fit on a node's free GPUs.
fn replicas_fitting(node: &NodeState, per_replica: u32) -> u64 {
    replicas_on(node, per_replica, &|_, _, g| g.owner == Owner::Free)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Owner;
    use crate::ids::Models;
    use model::spec::NvLink;
    use proptest::prelude::*;

    /// An 8-GPU H100 node of pool `p`, in `rack` if given.
    fn h100_node(name: String, rack: Option<String>) -> model::observed::ObservedNode {
        model::observed::ObservedNode {
            name,
            pool: Some("p".into()),
            labels: rack.map(|r| ("rack".to_string(), r)).into_iter().collect(),
            idle_since: None,
            gpus: (0..8)
                .map(|i| model::observed::ObservedGpu::new(i, "H100"))
                .collect(),
        }
    }

    /// The plain search [`greedy_preferring`] must agree with: every node's
    /// pick compared.
    fn greedy_preferring_every_node(
        cluster: &Cluster,
        nodes: &[NodeId],
        req: &Request,
        usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
        prefer: Prefer,
    ) -> Option<Placement> {
        let mut taken: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        let mut placed: Placement = Vec::new();
        for _ in 0..req.replicas {
            let mut best: Option<Choice> = None;
            for &id in nodes {
                let node = cluster.node(id);
                if node.model != Some(req.model) {
                    continue;
                }
                let mine = taken.get(&id);
                let is_usable = |pos: usize, g: &Gpu| {
                    usable(node, pos, g) && !mine.is_some_and(|t| t.contains(&pos))
                };
                let avail = node
                    .gpus
                    .iter()
                    .enumerate()
                    .filter(|(pos, g)| is_usable(*pos, g))
                    .count() as u32;
                if avail < req.per_replica {
                    continue;
                }
                let level = |pos: usize| prefer(id, pos, &node.gpus[pos]);
                let Some(p) = node.pick_gpus_preferring(req.per_replica, is_usable, level) else {
                    continue;
                };
                let of = |r: u8| p.iter().filter(|pos| level(**pos) == r).count() as u32;
                let key = (
                    0,
                    req.per_replica - of(0),
                    req.per_replica - of(1),
                    avail - req.per_replica,
                );
                if best
                    .as_ref()
                    .is_none_or(|(l, name, _, _)| (key, node.name.as_str()) < (*l, *name))
                {
                    best = Some((key, &node.name, id, p));
                }
            }
            let (_, _, id, positions) = best?;
            taken
                .entry(id)
                .or_default()
                .extend(positions.iter().copied());
            placed.push((id, positions));
        }
        Some(placed)
    }

    /// Every combination of `k` indices below `n`, in index order.
    fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
        if k == 0 {
            return vec![Vec::new()];
        }
        (k - 1..n)
            .flat_map(|last| {
                combinations(last, k - 1).into_iter().map(move |mut c| {
                    c.push(last);
                    c
                })
            })
            .collect::<Vec<_>>()
    }

    /// `preferred` topology by trying every combination of domains: the
    /// fewest that hold the gang, then the fewest usable GPUs left over,
    /// then the first combination in domain-name order; best fit anywhere
    /// when none holds it.
    fn preferred_by_every_combination(
        cluster: &Cluster,
        nodes: &[NodeId],
        req: &Request,
        usable: &dyn Fn(&NodeState, usize, &Gpu) -> bool,
    ) -> Option<Placement> {
        let domains: Vec<Vec<(NodeId, u32)>> =
            by_domain(cluster, nodes, req, TopologyLevel::Rack, usable, 1)
                .into_values()
                .collect();
        let mut all = combinations(domains.len(), 1);
        all.sort();
        for k in 1..=domains.len() {
            let mut best: Option<(u64, Placement)> = None;
            let mut combos = combinations(domains.len(), k);
            combos.sort();
            for combo in combos {
                let members: Vec<NodeId> = combo
                    .iter()
                    .flat_map(|i| domains[*i].iter().map(|(id, _)| *id))
                    .collect();
                let gpus: u64 = combo
                    .iter()
                    .flat_map(|i| domains[*i].iter().map(|(_, c)| u64::from(*c)))
                    .sum();
                let Some(p) = greedy(cluster, &members, req, usable, &|_| 0) else {
                    continue;
                };
                let left = gpus - req.total();
                if best.as_ref().is_none_or(|(l, _)| left < *l) {
                    best = Some((left, p));
                }
            }
            if let Some((_, p)) = best {
                return Some(p);
            }
        }
        greedy(cluster, nodes, req, usable, &|_| 0)
    }

    /// A gang of hundreds of replicas over hundreds of one-node racks: too
    /// large for the table, placed anyway (bounded memory), on the fewest
    /// racks.
    #[test]
    fn preferred_topology_of_a_huge_gang_stays_bounded() {
        let observed: Vec<model::observed::ObservedNode> = (0..400)
            .map(|n| h100_node(format!("n{n:03}"), Some(format!("r{n:03}"))))
            .collect();
        let mut models = Models::default();
        let cluster = Cluster::new(&observed, &mut models, |_| Some((0, NvLink::Full)));
        let model = models.get("H100").unwrap();
        let req = Request {
            model,
            replicas: 300,
            per_replica: 8,
            required: None,
            preferred: Some(TopologyLevel::Rack),
        };
        let rooms: Vec<DomainRoom> = (0..400)
            .map(|n| DomainRoom {
                replicas: 1,
                gpus: 8,
                members: vec![n],
            })
            .collect();
        const { assert!(401 * 301 * 301 > MAX_DP_CELLS) };
        assert_eq!(fewest_least_left(&rooms, 300), Some((0..300).collect()));
        let ids: Vec<NodeId> = (0..400).collect();
        let usable = |_: &NodeState, _: usize, g: &Gpu| g.owner == Owner::Free;
        let placed = place_scan(&cluster, &ids, &req, &usable).unwrap();
        assert_eq!(placed.len(), 300);
    }

    proptest! {
        #[test]
        fn preferring_search_picks_what_trying_every_node_picks(
            owners in proptest::collection::vec(0u8..5, 8..96),
            nvlink in 0u8..3,
            replicas in 1u32..4,
            per_replica in 1u32..9,
        ) {
            let nvlink = [NvLink::Full, NvLink::Pairs, NvLink::None][nvlink as usize];
            let nodes = owners.len().div_ceil(8);
            let observed: Vec<model::observed::ObservedNode> = (0..nodes)
                .map(|n| h100_node(format!("n{n}"), None))
                .collect();
            let mut models = Models::default();
            let mut cluster = Cluster::new(&observed, &mut models, |_| Some((0, nvlink)));
            let model = models.get("H100").unwrap();
            // 0 free, 1 a victim's, 2 a stopping job's, 3 another job's, 4 placed.
            for (i, o) in owners.iter().enumerate() {
                let owner = match o {
                    0 => Owner::Free,
                    1 => Owner::Running(1),
                    2 => Owner::Freeing(2),
                    3 => Owner::Running(3),
                    _ => Owner::Placed(4),
                };
                cluster.set_owner((i / 8) as NodeId, i % 8, owner);
            }
            let usable = |_: &NodeState, _: usize, g: &Gpu| {
                matches!(g.owner, Owner::Free | Owner::Running(1) | Owner::Freeing(2))
            };
            let prefer = |_: NodeId, pos: usize, g: &Gpu| match g.owner {
                Owner::Running(_) | Owner::Freeing(_) => 0,
                _ if pos.is_multiple_of(4) => 1,
                _ => 2,
            };
            let req = Request { model, replicas, per_replica, required: None, preferred: None };
            let ids: Vec<NodeId> = (0..nodes as NodeId).collect();
            prop_assert_eq!(
                greedy_preferring(&cluster, &ids, &req, &usable, &|_| 0, &prefer, &|_| None, None),
                greedy_preferring_every_node(&cluster, &ids, &req, &usable, &prefer)
            );
        }

        /// Issue 16 item 7: `preferred` takes the fewest domains, then the
        /// least left over, as trying every combination does.
        #[test]
        fn preferred_topology_is_fewest_domains_then_least_left(
            nodes in proptest::collection::vec((0u8..5, 0u8..=8), 2..12),
            nvlink in 0u8..3,
            replicas in 2u32..7,
            per_replica in 1u32..9,
        ) {
            let nvlink = [NvLink::Full, NvLink::Pairs, NvLink::None][nvlink as usize];
            let observed: Vec<model::observed::ObservedNode> = nodes
                .iter()
                .enumerate()
                .map(|(n, (rack, _))| h100_node(format!("n{n:02}"), Some(format!("r{rack}"))))
                .collect();
            let mut models = Models::default();
            let mut cluster = Cluster::new(&observed, &mut models, |_| Some((0, nvlink)));
            let model = models.get("H100").unwrap();
            // Node n keeps its first `free` GPUs free; the rest run a job.
            for (n, (_, free)) in nodes.iter().enumerate() {
                for pos in usize::from(*free)..8 {
                    cluster.set_owner(n as NodeId, pos, Owner::Running(1));
                }
            }
            let usable = |_: &NodeState, _: usize, g: &Gpu| g.owner == Owner::Free;
            let req = Request {
                model,
                replicas,
                per_replica,
                required: None,
                preferred: Some(TopologyLevel::Rack),
            };
            let ids: Vec<NodeId> = (0..nodes.len() as NodeId).collect();
            prop_assert_eq!(
                place_scan(&cluster, &ids, &req, &usable),
                preferred_by_every_combination(&cluster, &ids, &req, &usable)
            );
        }
    }
}
