//! Preemption: free GPUs (and quota) for a job that cannot run otherwise.
//!
//! Victims are preemptible running jobs that are (a) in the same leaf queue
//! with lower priority, or (d) in a `least-attained` leaf, of the same
//! priority and a higher attained-service tier ([`least_attained`]), (b) in a borrowing queue when the preemptor's queue
//! stays within its guarantee (reclaim), or (c) in a borrowing queue with
//! lower priority. A job of another queue is a victim while its queue, and
//! every ancestor below the common ancestor with the preemptor's queue, is
//! still borrowing before it is removed (Kueue's rule: one large job that
//! straddles a guarantee does not shield a borrower). Victims are preferred
//! in tiers — borrowed usage whose removal leaves its queues at or above
//! their guarantees, then borrowed usage that straddles one, then guaranteed
//! usage of the own leaf — then lower priority, most recently started, name;
//! no more are taken than needed, the least preferred dropped first. The
//! preemptor may also count GPUs of stopping jobs it may wait for, and sits
//! on what its victims and stopping jobs free before free GPUs.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use model::plan::Action;
use model::time::after;

use super::cluster::{Cluster, Gpu, NodeState, Owner, UsableGpus};
use super::ids::{JobId, NodeId, QueueId, RunId};
use super::placement::{self, Placement, Request};
use super::{Engine, Stopping, reasons};

mod by_node;
mod candidates;
mod could_fit;
mod domains;
mod least_attained;

use by_node::ByNode;
use candidates::{
    Within, all_of, candidates_cached, cross_queue_sources, eligible_bound, max_candidates,
    on_path, upper_bound, within_guarantees,
};
#[cfg(debug_assertions)]
use candidates::{candidates, release_on_path};
use could_fit::replicas_could_fit;

/// Stopping runs whose GPUs the preemptor may wait for beside its
/// victims': every open run (the cluster counts their GPUs per node,
/// [`Cluster::index_waiting`]) and the kept runs it may claim, with their
/// GPUs per schedulable node.
#[derive(Debug, Default, PartialEq)]
struct Waitable {
    open: std::rc::Rc<[bool]>,
    kept: rustc_hash::FxHashSet<RunId>,
    kept_on_node: HashMap<NodeId, u32>,
    /// GPUs of the kept runs it may claim, on schedulable nodes.
    kept_gpus: u64,
}

impl Waitable {
    fn contains(&self, r: &RunId) -> bool {
        self.open.get(*r as usize).copied().unwrap_or(false) || self.kept.contains(r)
    }

    /// GPUs of these runs on node `id` (still stopping there), when it is
    /// schedulable.
    fn gpus_on(&self, c: &Cluster, id: NodeId) -> u32 {
        let kept = match self.kept_on_node.get(&id) {
            Some(n) if c.node(id).schedulable => *n,
            _ => 0,
        };
        c.waiting_on(id) + kept
    }

    /// Every GPU of these runs on schedulable nodes of model `m`.
    fn total(&self, c: &Cluster, m: u16) -> u64 {
        c.waiting_total(m) + self.kept_gpus
    }

    /// Schedulable nodes of model `m` where free GPUs and these runs' add up
    /// to `min_room` or more, each once (unsorted).
    fn nodes_with_room<'c>(
        &'c self,
        c: &'c Cluster,
        m: u16,
        min_room: u32,
    ) -> impl Iterator<Item = NodeId> + 'c {
        let min_room = min_room.max(1);
        // Nodes where kept runs' GPUs make the difference (the others the
        // cluster lists).
        let kept = self.kept_on_node.keys().copied().filter(move |&id| {
            let node = c.node(id);
            node.schedulable
                && node.model == Some(m)
                && node.free + c.waiting_on(id) < min_room
                && node.free + self.gpus_on(c, id) >= min_room
        });
        c.nodes_with_room(m, min_room).chain(kept)
    }
}

/// The stopping runs of model `m` whose GPUs job `j` may wait for: those
/// it may claim ([`Engine::freeing_claims`]) still stopping on a
/// schedulable node of the model.
fn waitable(e: &mut Engine, j: JobId, m: u16) -> Waitable {
    let claims = e.freeing_claims(j, m);
    let mut out = Waitable {
        open: e.cluster.open_runs(),
        ..Waitable::default()
    };
    for &(r, may) in &claims.runs {
        if !may {
            continue;
        }
        for (id, positions) in &e.runs[r as usize].placement {
            let n = stopping_on(e, r, m, *id, positions);
            if n > 0 {
                out.kept.insert(r);
                *out.kept_on_node.entry(*id).or_default() += n;
                out.kept_gpus += u64::from(n);
            }
        }
    }
    debug_assert!(out == waitable_plain(e, j, m), "waitable runs differ");
    out
}

/// GPUs of stopping run `r` still stopping at `positions` of node `id`,
/// when it is a schedulable node of model `m`.
fn stopping_on(e: &Engine, r: RunId, m: u16, id: NodeId, positions: &[usize]) -> u32 {
    let node = e.cluster.node(id);
    if !node.schedulable || node.model != Some(m) {
        return 0;
    }
    positions
        .iter()
        .filter(|&&pos| node.gpus[pos].owner == Owner::Freeing(r))
        .count() as u32
}

/// [`waitable`] run by run, asking [`Engine::claimable`] of each (what
/// debug builds check it against).
fn waitable_plain(e: &Engine, j: JobId, m: u16) -> Waitable {
    let mut out = Waitable {
        open: e.cluster.open_runs(),
        ..Waitable::default()
    };
    for &r in e
        .kept_runs
        .get(m as usize)
        .map_or(&[][..], |v| v.as_slice())
    {
        let run = &e.runs[r as usize];
        let held: Vec<(NodeId, u32)> = run
            .placement
            .iter()
            .map(|(id, positions)| (*id, stopping_on(e, r, m, *id, positions)))
            .filter(|(_, n)| *n > 0)
            .collect();
        if held.is_empty() || !e.claimable(r, j) {
            continue;
        }
        out.kept.insert(r);
        for (id, n) in held {
            *out.kept_on_node.entry(id).or_default() += n;
            out.kept_gpus += u64::from(n);
        }
    }
    out
}

/// A running job that may be preempted for the current preemptor.
#[derive(Debug, Clone)]
struct Candidate {
    run: RunId,
    queue: QueueId,
    gpus: u64,
    /// Queues whose borrowed usage the victim is taken from (empty for the
    /// preemptor's own queue): its leaf up to below the common ancestor.
    borrowed_from: std::rc::Rc<[QueueId]>,
    /// Where its queue's path meets the preemptor's (the place on the
    /// preemptor's path, leaf first, where its usage leaves: 0 for its own
    /// leaf), if they meet: what [`release_on_path`] and
    /// [`frees_quota_on`] walk the paths for, found once per source.
    meet: Option<u32>,
    rule: Rule,
    /// Its place in the victim order (tier, priority, most recent start,
    /// run): one order across the preemptor's models.
    key: VictimKey,
}

/// What orders victims: tier (borrowed and safe, borrowed and straddling,
/// own leaf's guaranteed usage), priority, most recently started, run.
type VictimKey = (
    u8,
    i32,
    std::cmp::Reverse<model::observed::Timestamp>,
    RunId,
);

/// A preemption found for one model, not carried out yet.
#[derive(Debug)]
pub struct Found {
    req: Request,
    victims: Vec<Candidate>,
    placement: Placement,
    stopping: Waitable,
    /// The victims' keys, least preferred first: of two preemptions the one
    /// whose least preferred victim is more preferred wins, and so on down
    /// (fewer victims win a tie), across models alike.
    cost: Vec<VictimKey>,
}

impl Found {
    /// Whether this preemption takes more preferred victims than `other`.
    pub fn better_than(&self, other: &Found) -> bool {
        self.cost < other.cost
    }
}

/// Which rule allows a victim (the words are made only for chosen ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// (a) same leaf queue, lower priority.
    Priority,
    /// (d) same `least-attained` leaf and priority, a higher tier.
    LeastAttained,
    /// (b) reclaim: the preemptor's queue stays within its guarantee.
    Reclaim { usage: u64, guaranteed: u64 },
    /// (c) a lower-priority job of a borrowing queue.
    LowerPriorityBorrower { usage: u64, guaranteed: u64 },
}

/// The memo key of a failed search: nothing about it changes until the
/// engine admits another job. The preemptor's first-seen time matters only
/// through the victims rule 5c lets it take: it counts as
/// [`Engine::started_before`].
pub type MemoKey = (QueueId, i32, usize, u16, u32, u32, u8, u8, u8);

/// What a candidate list depends on besides the running jobs: the
/// preemptor's queue, priority and first-seen time (as
/// [`Engine::started_before`]: the lower-priority jobs that started before
/// it), where it reclaims (its queues within their guarantees), the model,
/// the length.
pub type CandidateKey = (QueueId, i32, usize, u64, u16, usize, u8);

/// A candidate list, and whether there are more candidates past it. Valid
/// until the next preemption: only choosing victims changes which running
/// jobs are candidates (their state, their queues' borrowing).
#[derive(Debug)]
pub struct CandidateList {
    cands: Vec<Candidate>,
    more: bool,
}

/// What [`find`] works out before searching: the memo key, the stopping
/// runs it may wait for, the victim sources and the first candidate list.
struct Prepared {
    key: MemoKey,
    memo: bool,
    gpus: u64,
    q: QueueId,
    reclaim: Within,
    own_path: Vec<bool>,
    others: std::rc::Rc<[QueueId]>,
    stopping: Waitable,
    /// Free GPUs of the model plus the stopping ones it may wait for.
    free: u64,
    /// The first prefix searched, and the widest.
    first: usize,
    last: usize,
    list: std::rc::Rc<CandidateList>,
}

/// Victims that would let job `j` run on the model of `req`, if any; the
/// engine is left unchanged ([`carry_out`] commits them). With `to_beat`
/// (a preemption found on another model), `None` also when no preemption
/// on this model could be better than it.
pub fn find(e: &mut Engine, j: JobId, req: &Request, to_beat: Option<&Found>) -> Option<Found> {
    // No victims at all: nothing is better.
    if let Some(best) = to_beat
        && best.cost.is_empty()
    {
        debug_assert!(no_better(e, j, req, best));
        return None;
    }
    let prepared = prepare(e, j, req)?;
    find_prepared(e, j, req, prepared, to_beat)
}

/// The best preemption for job `j` over its acceptable models' requests
/// `reqs` (in order of preference): the one whose victims are most
/// preferred ([`Found::better_than`]), the earlier request on a tie. The
/// same as [`find`] on each in turn, each given the best so far to beat;
/// but the requests whose candidates promise the most preferred victims
/// ([`Prepared::hint`]) are searched first, so that the others are mostly
/// turned down by [`cannot_beat`] instead of searched in full (debug
/// builds compare with the searches in turn).
pub fn find_best(e: &mut Engine, j: JobId, reqs: &[Request]) -> Option<Found> {
    if reqs.len() < 2 {
        return reqs.first().and_then(|req| find(e, j, req, None));
    }
    let mut order: Vec<(Hint, usize, Prepared)> = Vec::with_capacity(reqs.len());
    for (i, req) in reqs.iter().enumerate() {
        if let Some(p) = prepare(e, j, req) {
            order.push((p.hint(), i, p));
        }
    }
    order.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));

    let mut best: Option<(usize, Found)> = None;
    for (_, i, p) in order {
        let req = &reqs[i];
        let found = match &best {
            // Nothing beats no victims; an earlier request ties with it.
            Some((at, b)) if b.cost.is_empty() => {
                if *at < i {
                    continue;
                }
                find_prepared(e, j, req, p, None).filter(|f| f.cost.is_empty())
            }
            Some((at, b)) => find_prepared(e, j, req, p, Some(b))
                .filter(|f| f.cost < b.cost || (f.cost == b.cost && i < *at)),
            None => find_prepared(e, j, req, p, None),
        };
        if let Some(found) = found {
            best = Some((i, found));
        }
    }
    #[cfg(debug_assertions)]
    {
        let mut in_turn: Option<Found> = None;
        for req in reqs {
            if let Some(found) = find(e, j, req, in_turn.as_ref())
                && in_turn.as_ref().is_none_or(|b| found.better_than(b))
            {
                in_turn = Some(found);
            }
        }
        let summary = |f: Option<&Found>| f.map(|f| (f.req.model, f.cost.clone()));
        debug_assert_eq!(
            summary(best.as_ref().map(|(_, f)| f)),
            summary(in_turn.as_ref()),
            "the best preemption depends on the order models are searched in"
        );
    }
    best.map(|(_, found)| found)
}

/// What orders the requests [`find_best`] searches (a guess: the outcome
/// does not depend on it): by the candidate whose GPUs, with those of the
/// candidates before it, first reach the job's — the least preferred
/// victim the preemption would need if free GPUs were too scattered to
/// help —, those whose first candidates do not reach it after the others.
type Hint = (u8, Option<VictimKey>);

impl Prepared {
    fn hint(&self) -> Hint {
        let need = self.gpus;
        let mut sum = 0;
        for c in &self.list.cands {
            sum += c.gpus;
            if sum >= need {
                return (1, Some(c.key));
            }
        }
        (2, self.list.cands.last().map(|c| c.key))
    }
}

/// [`find`]'s checks before a search: `None` when the failed-search memo
/// or the cheap bounds tell that there is no preemption (memoised).
fn prepare(e: &mut Engine, j: JobId, req: &Request) -> Option<Prepared> {
    let job = &e.jobs[j as usize];
    let q = job.queue?;
    let gpus = job.gpus;
    let key: MemoKey = (
        q,
        job.priority,
        e.started_before(j),
        req.model,
        req.replicas,
        req.per_replica,
        req.required.map_or(0, |l| l as u8 + 1),
        req.preferred.map_or(0, |l| l as u8 + 1),
        least_attained::tier_key(job),
    );
    // Stopping jobs preempted for `j` do not count against its limits: what
    // it finds is its own, not its shape's.
    let memo = !e.held_for.contains_key(&j);
    if memo && e.preempt_memo.get(&key) == Some(&e.generation) {
        return None;
    }
    let m = req.model;
    let reclaim = within_guarantees(e, q, m, gpus);
    let own_path = on_path(e, q);
    let others = cross_queue_sources(e, q, m, &own_path);
    let stopping = waitable(e, j, m);
    let stopping_gpus: u64 = stopping.total(&e.cluster, m);
    let job = &e.jobs[j as usize];
    let (victims_bound, released) = upper_bound(e, job, q, m, reclaim, &own_path, &others);
    let ub = victims_bound + stopping_gpus;
    // The limits with every victim it could take gone (the search checks
    // them with its candidates first): when the job does not fit them, no
    // list of candidates helps.
    let quota_hopeless = !e.tree.fits_releasing(q, m, gpus, &released);
    #[cfg(debug_assertions)]
    if quota_hopeless {
        let (all, _) = candidates(e, j, q, req, reclaim, &own_path, &others, usize::MAX);
        debug_assert!(
            !quota_fits_without(e, q, m, gpus, &all, &all_of(&all)),
            "the quota bound turned down a job its candidates fit"
        );
    }
    if ub < gpus || quota_hopeless {
        if memo {
            e.preempt_memo.insert(key, e.generation);
        }
        return None;
    }
    // The most preferred victims first: search with a prefix of the
    // candidates in victim order and widen it (×4) only when that fails.
    // Bounded: a job that cannot fit with the most preferred thousand or so
    // is left pending rather than searched against every running job.
    let first = 32usize.max(4 * gpus as usize);
    let mut last = first;
    while last < max_candidates(gpus) {
        last *= 4;
    }
    let list = candidates_cached(e, j, q, req, reclaim, &own_path, &others, first);
    let free = e.cluster.free_total.get(m as usize).copied().unwrap_or(0) + stopping_gpus;
    Some(Prepared {
        key,
        memo,
        gpus,
        q,
        reclaim,
        own_path,
        others,
        stopping,
        free,
        first,
        last,
        list,
    })
}

/// [`find`]'s search once [`prepare`] is done.
fn find_prepared(
    e: &mut Engine,
    j: JobId,
    req: &Request,
    p: Prepared,
    to_beat: Option<&Found>,
) -> Option<Found> {
    let Prepared {
        key,
        memo,
        gpus,
        q,
        reclaim,
        own_path,
        others,
        stopping,
        free,
        first,
        last,
        mut list,
    } = p;
    let m = req.model;
    if let Some(best) = to_beat
        && cannot_beat(e, q, req, gpus, &list, free, &stopping, best)
    {
        debug_assert!(no_better(e, j, req, best));
        return None;
    }
    let mut limit = first;
    loop {
        let (cands, more) = (&list.cands, list.more);
        let shown = &cands[..limit.min(cands.len())];
        let possible = free + shown.iter().map(|c| c.gpus).sum::<u64>();
        let found = if !shown.is_empty() && possible >= gpus {
            search(e, j, q, req, shown, &stopping)
        } else {
            None
        };
        if let Some((chosen, placement)) = found {
            let victims: Vec<Candidate> = chosen.iter().map(|i| shown[*i].clone()).collect();
            let mut cost: Vec<VictimKey> = victims.iter().map(|c| c.key).collect();
            cost.sort_unstable_by(|a, b| b.cmp(a));
            return Some(Found {
                req: *req,
                victims,
                placement,
                stopping,
                cost,
            });
        }
        let more_than_shown = more || cands.len() > limit;
        if !more_than_shown || limit >= last {
            break;
        }
        if cands.len() <= limit {
            // What cannot fit with every victim the sources hold fits with
            // no list of them either: told without building the list.
            let (eligible, released) = eligible_bound(e, j, q, m, reclaim, &own_path, &others);
            if free + eligible < gpus || !e.tree.fits_releasing(q, m, gpus, &released) {
                #[cfg(debug_assertions)]
                {
                    let wide = candidates_cached(e, j, q, req, reclaim, &own_path, &others, last);
                    let possible = free + wide.cands.iter().map(|c| c.gpus).sum::<u64>();
                    debug_assert!(
                        possible < gpus
                            || !quota_fits_without(
                                e,
                                q,
                                m,
                                gpus,
                                &wide.cands,
                                &all_of(&wide.cands)
                            ),
                        "the sources' bound turned down candidates that fit"
                    );
                }
                break;
            }
            // Widen once to the most it may grow to; every wider search
            // looks at a prefix of these.
            list = candidates_cached(e, j, q, req, reclaim, &own_path, &others, last);
            // What cannot fit with all of them fits with no prefix either.
            let possible = free + list.cands.iter().map(|c| c.gpus).sum::<u64>();
            if possible < gpus
                || !replicas_could_fit(e, req, &list.cands, &stopping)
                || !quota_fits_without(e, q, m, gpus, &list.cands, &all_of(&list.cands))
            {
                break;
            }
        }
        limit *= 4;
    }
    if memo {
        e.preempt_memo.insert(key, e.generation);
    }
    None
}

/// Whether the whole search finds no preemption better than `best`: what
/// debug builds check the shortcuts of [`find`] against.
fn no_better(e: &mut Engine, j: JobId, req: &Request, best: &Found) -> bool {
    find(e, j, req, None).is_none_or(|found| !found.better_than(best))
}

/// Whether no preemption from the candidates of `list` (the first ones)
/// can be better than `best` (found on another model): one that is takes
/// only victims more preferred than its least preferred victim, and those
/// candidates (a prefix, when the list reaches past it) do not meet what
/// any preemption needs: enough GPUs with the `free` ones (free and
/// waited-for stopping GPUs), replicas that could fit, and the limits.
/// `false` when the list ends before telling.
#[allow(clippy::too_many_arguments)]
fn cannot_beat(
    e: &mut Engine,
    q: QueueId,
    req: &Request,
    gpus: u64,
    list: &CandidateList,
    free: u64,
    stopping: &Waitable,
    best: &Found,
) -> bool {
    let Some(&worst) = best.cost.first() else {
        return true;
    };
    let cands = &list.cands;
    debug_assert!(cands.is_sorted_by_key(|c| c.key));
    let n = cands.partition_point(|c| c.key < worst);
    if n == cands.len() && list.more {
        return false;
    }
    let better = &cands[..n];
    free + better.iter().map(|c| c.gpus).sum::<u64>() < gpus
        || !replicas_could_fit(e, req, better, stopping)
        || !quota_fits_without(e, q, req.model, gpus, better, &all_of(better))
}

/// Carries out a preemption [`find`] found for job `j`.
pub fn carry_out(e: &mut Engine, j: JobId, found: Found) {
    let chosen: Vec<usize> = (0..found.victims.len()).collect();
    commit(
        e,
        j,
        &found.req,
        &found.victims,
        &chosen,
        found.placement,
        &found.stopping,
    );
}

/// The runs of the candidates in `chosen` and `extra`, sorted (for
/// [`free_or_victim`]'s binary search).
fn runs_of(cands: &[Candidate], chosen: &[usize], extra: &[usize]) -> Vec<RunId> {
    let mut runs: Vec<RunId> = chosen.iter().chain(extra).map(|i| cands[*i].run).collect();
    runs.sort_unstable();
    runs
}

/// GPUs a replica may use on a node: free ones and those of `victims`
/// (sorted), but not `mine` (taken by an earlier replica of the same job).
fn free_or_victim<'a>(
    mine: &'a [usize],
    victims: &'a [RunId],
    stopping: &'a Waitable,
) -> impl Fn(usize, &Gpu) -> bool + 'a {
    move |pos, g| {
        !mine.contains(&pos)
            && match g.owner {
                Owner::Free => true,
                Owner::Running(r) => victims.binary_search(&r).is_ok(),
                Owner::Freeing(r) => stopping.contains(&r),
                _ => false,
            }
    }
}

/// Drops victims from `extra` (least preferred first) while one replica of
/// `per_replica` GPUs still fits on `node`; returns the rest, the GPUs and
/// how many GPUs the replica could use there with the rest.
fn trim_on_node(
    node: &NodeState,
    mine: &[usize],
    chosen: &[usize],
    extra: Vec<usize>,
    cands: &[Candidate],
    per_replica: u32,
    stopping: &Waitable,
) -> Option<(Vec<usize>, Vec<usize>, u32)> {
    // On a node whose GPUs fit a bit set, each victim's GPUs there are a
    // mask: a set's usable GPUs are their union with the free ones, so
    // each trial is a few OR's, not a sorted victim list and a scan.
    let victims = runs_of(cands, chosen, &[]);
    let base = (per_replica > 0)
        .then(|| node.usable_mask(&free_or_victim(mine, &victims, stopping)))
        .flatten();
    let Some(base) = base else {
        return trim_on_node_plain(node, mine, chosen, extra, cands, per_replica, stopping);
    };
    let masks: Vec<u64> = extra
        .iter()
        .map(|&i| run_mask(node, cands[i].run, mine))
        .collect();
    let mut kept = vec![true; extra.len()];
    let mut left = extra.len();
    let union = |kept: &[bool], skip: usize| {
        kept.iter()
            .zip(&masks)
            .enumerate()
            .filter(|&(k, (&keep, _))| keep && k != skip)
            .fold(base, |acc, (_, (_, &mask))| acc | mask)
    };
    // Least preferred first: what stays is as preferred as can be.
    for k in (0..extra.len()).rev() {
        if left == 1 {
            break;
        }
        if node
            .pick_in_mask(per_replica as usize, union(&kept, k))
            .is_some()
        {
            kept[k] = false;
            left -= 1;
        }
    }
    let mask = union(&kept, usize::MAX);
    let rest: Vec<usize> = extra
        .iter()
        .zip(&kept)
        .filter(|&(_, &keep)| keep)
        .map(|(&i, _)| i)
        .collect();
    let found = node
        .pick_in_mask(per_replica as usize, mask)
        .map(|positions| (rest, positions, mask.count_ones()));
    debug_assert_eq!(
        found,
        trim_on_node_plain(node, mine, chosen, extra, cands, per_replica, stopping),
        "victims trimmed by masks differently"
    );
    found
}

/// The positions of `node` that run `run` holds, but not `mine`.
fn run_mask(node: &NodeState, run: RunId, mine: &[usize]) -> u64 {
    let mut mask = 0u64;
    for (pos, g) in node.gpus.iter().enumerate() {
        if g.owner == Owner::Running(run) && !mine.contains(&pos) {
            mask |= 1 << pos;
        }
    }
    mask
}

/// [`trim_on_node`] the straightforward way: each trial lists its victims
/// and picks GPUs on the node.
fn trim_on_node_plain(
    node: &NodeState,
    mine: &[usize],
    chosen: &[usize],
    mut extra: Vec<usize>,
    cands: &[Candidate],
    per_replica: u32,
    stopping: &Waitable,
) -> Option<(Vec<usize>, Vec<usize>, u32)> {
    let pick = |extra: &[usize]| {
        let victims = runs_of(cands, chosen, extra);
        node.pick_gpus(per_replica, free_or_victim(mine, &victims, stopping))
    };
    // Least preferred first: what stays is as preferred as can be.
    for k in (0..extra.len()).rev() {
        if extra.len() == 1 {
            break;
        }
        let mut without = extra.clone();
        without.remove(k);
        if pick(&without).is_some() {
            extra = without;
        }
    }
    let positions = pick(&extra)?;
    let victims = runs_of(cands, chosen, &extra);
    let avail = UsableGpus::of(node, free_or_victim(mine, &victims, stopping)).count();
    Some((extra, positions, avail))
}

/// The borrowing rule over a set of victims: taking them in preference
/// order (their index), every queue a victim of another queue is taken
/// from is still borrowing before it goes (Kueue's rule), so a borrower
/// cannot shield itself behind one large job that straddles its guarantee.
///
/// Kept per queue as the victims' GPUs taken from it and the last
/// (least preferred) of them: taking from a queue only lowers what it
/// runs, so its last victim is the one that must still find it borrowing
/// (it still runs more than its guarantee with all the others gone). A set
/// is allowed when no queue breaks that; one candidate more is judged in
/// the length of its chain, not of the set.
struct Headroom<'c> {
    cands: &'c [Candidate],
    m: u16,
    /// Per queue (by id): GPUs of the set's victims taken from it, its last
    /// victim ([`NO_VICTIM`] while it has none).
    taken: Vec<(u64, usize)>,
    /// The set's candidates, one bit each.
    members: Vec<u64>,
    /// Queues the set breaks the rule for.
    broken: usize,
}

/// A queue no victim of a [`Headroom`]'s set is taken from.
const NO_VICTIM: usize = usize::MAX;

impl<'c> Headroom<'c> {
    fn new(e: &impl QueueRoom, cands: &'c [Candidate], m: u16) -> Self {
        Headroom {
            cands,
            m,
            taken: vec![(0, NO_VICTIM); e.queue_count()],
            members: vec![0; cands.len().div_ceil(64)],
            broken: 0,
        }
    }

    /// The rule over `sets` joined.
    fn of(e: &impl QueueRoom, cands: &'c [Candidate], m: u16, sets: &[&[usize]]) -> Self {
        let mut h = Headroom::new(e, cands, m);
        for set in sets {
            for &i in *set {
                h.add(e, i);
            }
        }
        h
    }

    /// Whether queue `a` is still borrowing before its last victim goes.
    fn holds(&self, e: &impl QueueRoom, a: QueueId, (gpus, last): (u64, usize)) -> bool {
        let before_last = gpus - self.cands[last].gpus;
        e.running(a, self.m).saturating_sub(before_last) > e.guaranteed(a, self.m)
    }

    /// The state of queue `a` with candidate `i` added.
    fn with(&self, a: QueueId, i: usize) -> (u64, usize) {
        let gpus = self.cands[i].gpus;
        match self.taken[a as usize] {
            (_, NO_VICTIM) => (gpus, i),
            (taken, last) => (taken + gpus, last.max(i)),
        }
    }

    /// Whether the set breaks the rule for no queue.
    fn allowed(&self) -> bool {
        self.broken == 0
    }

    /// Whether candidate `i` may be taken beside the set: it needs no
    /// borrowing check, or the set with it breaks the rule for no queue.
    fn allows(&self, e: &impl QueueRoom, i: usize) -> bool {
        let chain = &self.cands[i].borrowed_from;
        if chain.is_empty() {
            return true;
        }
        if self.members[i / 64] >> (i % 64) & 1 != 0 {
            return self.allowed();
        }
        let mut broken = self.broken;
        for &a in chain.iter() {
            let old = self.taken[a as usize];
            if old.1 != NO_VICTIM && !self.holds(e, a, old) {
                broken -= 1;
            }
            if !self.holds(e, a, self.with(a, i)) {
                broken += 1;
            }
        }
        broken == 0
    }

    /// Adds candidate `i` to the set.
    fn add(&mut self, e: &impl QueueRoom, i: usize) {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.members[word] & bit != 0 {
            return;
        }
        self.members[word] |= bit;
        for &a in self.cands[i].borrowed_from.iter() {
            let old = self.taken[a as usize];
            let new = self.with(a, i);
            if old.1 != NO_VICTIM && !self.holds(e, a, old) {
                self.broken -= 1;
            }
            if !self.holds(e, a, new) {
                self.broken += 1;
            }
            self.taken[a as usize] = new;
        }
    }
}

/// What [`Headroom`] reads of a queue: GPUs of a model its jobs run and
/// its guarantee.
trait QueueRoom {
    fn running(&self, q: QueueId, m: u16) -> u64;
    fn guaranteed(&self, q: QueueId, m: u16) -> u64;
    /// How many queues there are (ids below it).
    fn queue_count(&self) -> usize;
}

impl QueueRoom for Engine<'_> {
    fn queue_count(&self) -> usize {
        self.tree.queues.len()
    }

    fn running(&self, q: QueueId, m: u16) -> u64 {
        self.tree.running(q, m)
    }

    fn guaranteed(&self, q: QueueId, m: u16) -> u64 {
        self.tree.guaranteed(q, m)
    }
}

/// Victim search, node by node: each replica goes where it needs the most
/// preferred victims (or none); then victims are added in order until the
/// quota fits; then any victim the job fits without is dropped. Every
/// cross-queue victim respects the guarantee check. Leaves the engine unchanged.
fn search(
    e: &mut Engine,
    j: JobId,
    q: QueueId,
    req: &Request,
    cands: &[Candidate],
    stopping: &Waitable,
) -> Option<(Vec<usize>, Placement)> {
    // The search charges and releases usage tentatively and leaves the tree
    // as it found it: its epoch too.
    let epoch = e.tree.epoch;
    let found = search_inner(e, j, q, req, cands, stopping);
    e.tree.epoch = epoch;
    found
}

fn search_inner(
    e: &mut Engine,
    j: JobId,
    q: QueueId,
    req: &Request,
    cands: &[Candidate],
    stopping: &Waitable,
) -> Option<(Vec<usize>, Placement)> {
    let m = req.model;
    if !replicas_could_fit(e, req, cands, stopping) {
        return None;
    }
    let all: Vec<usize> = (0..cands.len()).collect();
    // The quota loop below takes victims from these candidates only, and
    // limits only loosen as usage is released: when the job does not fit
    // them with every candidate gone, no placement can help.
    let job_gpus = e.jobs[j as usize].gpus;
    if !quota_fits_without(e, q, m, job_gpus, cands, &all) {
        return None;
    }
    let by_node = victims_by_node(e, cands, &all);
    // Without topology a node counts only for its own GPUs: one where free
    // GPUs and waited-for stopping ones do not make a replica and no
    // candidate is holds no replica, so only the others are looked at, and
    // those without candidates or kept runs are read from the cluster's
    // index as they are needed. With topology its free GPUs count towards
    // its domain's leftover.
    let topology = req.required.or(req.preferred);
    let indexed = topology.is_none() && req.per_replica > 0;
    let (mut nodes, mut base, mut domains) = (Vec::new(), Vec::new(), Vec::new());
    if !indexed {
        let min_room = if topology.is_none() {
            req.per_replica
        } else {
            1
        };
        nodes = stopping
            .nodes_with_room(&e.cluster, m, min_room)
            .chain(by_node.keys().copied())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes.retain(|id| {
            let n = e.cluster.node(*id);
            n.schedulable && n.model == Some(m)
        });
        base = could_hold_a_replica(e, &nodes, req, cands, &ByNode::default(), stopping);
        if let Some(level) = topology {
            domains = domains_of(e, &nodes, &base, level);
        }
    }
    let area = if indexed {
        Area::Indexed
    } else {
        Area::Listed {
            nodes: &nodes,
            base: &base,
            domains: &domains,
        }
    };
    let rejected = std::cell::Cell::new(false);
    let found = place_with(e, area, req, cands, &by_node, &rejected, stopping).or_else(|| {
        // The borrowing rule turned down a victim: a less preferred victim
        // alone may do what it and a more preferred one could not.
        if rejected.get() {
            rule_first_sets(e, area, req, cands, stopping)
        } else {
            None
        }
    });
    // The rule-first sets cover one turned-down victim at a time; among few
    // candidates, every set is tried.
    let found = match found {
        None if rejected.get() => {
            let n = cands.len().min(SUBSET_CANDIDATES);
            SubsetSearch::new(area, req, q, job_gpus, cands, stopping).smallest(e, 0, n)
        }
        found => found,
    };
    let (mut chosen, mut placement) = found?;

    // The placement stands; what is left is the quota. Add victims, in
    // order, until the quota fits. When the borrowing rule turned one down
    // (a queue no longer borrowing once more preferred victims are gone),
    // the victims it turned down are tried first in turn, as
    // `rule_first_sets` does for the placement — with the placement's
    // victims, then with a placement found for that victim and those before
    // it the rule allows (the placement's victims may be what keeps it
    // out).
    if !quota_fits_without(e, q, m, job_gpus, cands, &chosen) {
        let top_up =
            |e: &mut Engine, set: &[usize], first: Option<usize>, noted: &mut Vec<usize>| {
                add_for_quota(e, q, m, job_gpus, cands, set, first, noted)
            };
        let mut turned_down = Vec::new();
        let mut found = top_up(e, &chosen, None, &mut turned_down);
        for &first in turned_down.iter().take(64) {
            if found.is_some() {
                break;
            }
            found = top_up(e, &chosen, Some(first), &mut Vec::new());
            if found.is_some() {
                break;
            }
            let unused = std::cell::Cell::new(false);
            let set = rule_first_set(e, cands, req.model, first);
            let by_node = victims_by_node(e, cands, &set);
            if let Some((used, p)) = place_with(e, area, req, cands, &by_node, &unused, stopping) {
                found = top_up(e, &used, Some(first), &mut Vec::new());
                if found.is_some() {
                    placement = p;
                }
            }
        }
        if found.is_none() && !turned_down.is_empty() {
            // In victim order a small victim can take the borrowing room a
            // larger one needs: the largest first, once (the drop below
            // keeps no more than needed).
            let mut by_size: Vec<usize> = (0..cands.len()).collect();
            by_size.sort_by_key(|&i| (std::cmp::Reverse(cands[i].gpus), i));
            found = add_for_quota_in(e, q, m, job_gpus, cands, &chosen, &by_size, &mut Vec::new());
        }
        chosen = found?;
    }
    // No more than needed, and the least preferred as preferred as can be:
    // drop every victim, least preferred first, that the job fits without.
    chosen.sort_unstable();
    // Without topology, the placement found for the current victims stays
    // the one found without a victim that holds no GPU on its nodes: each
    // replica's node keeps its key and every other node's can only worsen
    // (checked against the search in debug builds).
    // Seeded with the placement for exactly these victims when some of them
    // hold no GPU on the nodes of the placement found (the quota's victims,
    // added after it): each of those is then dropped without a search.
    let mut known: Option<Placement> = None;
    if topology.is_none()
        && chosen.len() > 1
        && chosen
            .iter()
            .any(|&i| !runs_on(e, cands[i].run, &placement))
    {
        known = placement_with(e, area, req, cands, &chosen, stopping);
    }
    // Taking fewer victims never breaks the borrowing rule (each queue's
    // last victim finds it running as much or more): when the victims are
    // allowed, every set without some of them is. The victims' usage is
    // released once; the one dropped is charged back for its check.
    let all_allowed = chosen.iter().all(|&i| cands[i].borrowed_from.is_empty())
        || Headroom::of(e, cands, m, &[&chosen]).allowed();
    for &i in &chosen {
        e.tree.charge(cands[i].queue, m, cands[i].gpus, false);
    }
    // With a required topology level the placement is the best of the
    // domains' ([`place_with`]): each domain's result is kept, and only
    // the domains a dropped victim holds GPUs in are searched again.
    let mut by_domain: Option<DomainResults> = None;
    // Whether `placement` is behind `known` (moved there once, after the loop).
    let mut placement_known = false;
    for k in (0..chosen.len()).rev() {
        if chosen.len() == 1 {
            break;
        }
        let mut without = chosen.clone();
        let dropped = without.remove(k);
        let back = &cands[dropped];
        e.tree.charge(back.queue, m, back.gpus, true);
        let allowed = (all_allowed || Headroom::of(e, cands, m, &[&without]).allowed())
            && e.tree.fits(q, m, req.total()).is_ok();
        let same = topology.is_none() && known.as_ref().is_some_and(|p| !runs_on(e, back.run, p));
        let mut changed = Vec::new();
        let found = match (allowed, area) {
            (false, _) => None,
            // The known placement, moved rather than copied (debug builds
            // search and compare).
            (true, _) if same => {
                #[cfg(debug_assertions)]
                {
                    let searched = placement_with(e, area, req, cands, &without, stopping);
                    debug_assert_eq!(searched, known, "victims {without:?}");
                }
                known.take()
            }
            (true, Area::Listed { domains, .. }) if req.required.is_some() => {
                let results = by_domain.get_or_insert_with(|| {
                    DomainResults::new(e, domains, req, cands, &chosen, stopping)
                });
                changed = results.without(e, domains, req, cands, &without, back.run, stopping);
                let p = results.best(&changed);
                #[cfg(debug_assertions)]
                {
                    let searched = placement_with(e, area, req, cands, &without, stopping);
                    debug_assert_eq!(p, searched, "domains kept, victims {without:?}");
                }
                p
            }
            (true, _) => placement_with(e, area, req, cands, &without, stopping),
        };
        match found {
            Some(p) => {
                chosen = without;
                known = Some(p);
                placement_known = true;
                if let Some(results) = by_domain.as_mut() {
                    results.apply(changed);
                }
            }
            None => e.tree.charge(back.queue, m, back.gpus, false),
        }
    }
    if placement_known && let Some(p) = known {
        placement = p;
    }
    for &i in &chosen {
        e.tree.charge(cands[i].queue, m, cands[i].gpus, true);
    }
    // Placement first and quota after can miss a set that serves both with
    // more preferred victims: among few candidates every cheaper set is
    // tried.
    if let Some((set, p)) =
        least_preferred_subset(e, area, req, q, job_gpus, cands, &chosen, stopping)
    {
        chosen = set;
        placement = p;
    }
    // With the victims decided, the job sits where it would on free GPUs,
    // its victims' and those of stopping jobs it may wait for (best fit,
    // topology): the victims decide which GPUs free up, not where it goes.
    let victims = runs_of(cands, &chosen, &[]);
    let usable_gpu = free_or_victim(&[], &victims, stopping);
    let usable = |n: &NodeState, pos: usize, g: &Gpu| n.schedulable && usable_gpu(pos, g);
    // GPUs that free up (victims', stopping jobs') first, so it keeps as
    // few free GPUs idle as it can; then those nominated for it.
    let own = &e.own_nominated;
    let prefer = |id: NodeId, pos: usize, g: &Gpu| -> u8 {
        match g.owner {
            Owner::Running(_) | Owner::Freeing(_) => 0,
            _ if own.contains(&(id, pos)) => 1,
            _ => 2,
        }
    };
    // Without topology a node counts only for its own GPUs: those that
    // cannot hold a replica with every victim are left out unseen.
    let by_node = victims_by_node(e, cands, &chosen);
    let is_own = |id: NodeId| own.iter().any(|(n, _)| *n == id);
    // An indexed area's plain nodes without GPUs nominated for the job are
    // streamed in the placement's order (open stopping GPUs first, then
    // best fit); the others, GPUs nominated for the job among them, listed.
    let (nodes, streaming) = match area {
        Area::Indexed => {
            let held = holders(e, area, req, &by_node, stopping);
            let mut listed = held.listed;
            let own_plain = own.iter().map(|(n, _)| *n).filter(|&id| {
                let node = e.cluster.node(id);
                !is_special(id, &by_node, stopping)
                    && node.schedulable
                    && node.model == Some(m)
                    && !node.is_virtual
                    && node.free + e.cluster.waiting_on(id) >= req.per_replica
            });
            listed.extend(own_plain);
            listed.sort_unstable();
            listed.dedup();
            (listed, true)
        }
        Area::Listed { .. } if topology.is_none() => {
            (holders(e, area, req, &by_node, stopping).listed, false)
        }
        // A gang that needs one domain is placed by domain (below).
        Area::Listed { .. } if req.required.is_some() => (Vec::new(), false),
        Area::Listed { nodes, .. } => (nodes.to_vec(), false),
    };
    let streamed = || -> Box<dyn Iterator<Item = (u32, u32, NodeId)> + '_> {
        Box::new(
            e.cluster
                .rooms_open_first(m, req.per_replica)
                .filter(|&(_, _, id)| !is_special(id, &by_node, stopping) && !is_own(id)),
        )
    };
    // A node without victims, GPUs nominated for the job or kept stopping
    // jobs it may claim offers its free GPUs and those of open stopping
    // jobs (preferred): counted, not looked at GPU by GPU.
    let counted = |id: NodeId| -> Option<(u32, [u32; 2])> {
        let node = e.cluster.node(id);
        if is_special(id, &by_node, stopping) || is_own(id) {
            return None;
        }
        if !node.schedulable {
            return Some((0, [0, 0]));
        }
        let open = e.cluster.waiting_on(id);
        Some((node.free + open, [open, 0]))
    };
    let found = match area {
        // A gang that needs one domain: domains summed from counts (free,
        // waited-for stopping and victims' GPUs per node), searched best
        // first — every node that could take a GPU is in the area, thousands
        // when many jobs stop.
        Area::Listed { domains, .. } if req.required.is_some() => {
            let in_domain = |id: NodeId| -> u32 {
                let node = e.cluster.node(id);
                if !node.schedulable {
                    return 0;
                }
                let victims: u32 = by_node.get(&id).map_or(0, |local| {
                    local
                        .iter()
                        .map(|&i| gpus_of_run_on(e, cands[i].run, id))
                        .sum()
                });
                node.free + stopping.gpus_on(&e.cluster, id) + victims
            };
            let members: Vec<&[NodeId]> = domains.iter().map(|(m, _)| m.as_slice()).collect();
            placement::place_in_domains(&e.cluster, &members, req, &usable, &prefer, &in_domain)
        }
        _ => placement::place_preferring_counted(
            &e.cluster,
            &nodes,
            req,
            &usable,
            &prefer,
            &counted,
            streaming.then_some(&streamed as placement::Streamed),
        ),
    };
    if let Some(p) = found {
        // (`place_in_domains` compares with the plain placement itself.)
        #[cfg(debug_assertions)]
        if !matches!(area, Area::Listed { .. } if req.required.is_some()) {
            let mut every = nodes.clone();
            if streaming {
                every.extend(streamed().map(|(_, _, id)| id));
                every.sort_unstable();
            }
            debug_assert_eq!(
                Some(&p),
                placement::place_preferring(&e.cluster, &every, req, &usable, &prefer).as_ref(),
                "counted nodes placed differently"
            );
        }
        placement = p;
    }
    Some((chosen, placement))
}

/// The nodes each of the candidates `which` holds GPUs on.
fn victims_by_node(e: &Engine, cands: &[Candidate], which: &[usize]) -> ByNode {
    // (candidate, its GPUs there) for each node a candidate holds GPUs on
    // (a run may have several replicas, entries, on one node), in the order
    // of `which`; keyed by node and that place as one number, grouped by
    // node keeping that order.
    let mut entries: Vec<(usize, u32)> = Vec::with_capacity(2 * which.len());
    let mut keys: Vec<u64> = Vec::with_capacity(2 * which.len());
    for &i in which {
        let placement = &e.runs[cands[i].run as usize].placement;
        for (k, (node, positions)) in placement.iter().enumerate() {
            let gpus = if placement.len() == 1 {
                positions.len()
            } else if placement[..k].iter().any(|(n, _)| n == node) {
                continue;
            } else {
                placement
                    .iter()
                    .filter(|(n, _)| n == node)
                    .map(|(_, positions)| positions.len())
                    .sum()
            };
            keys.push(u64::from(*node) << 32 | entries.len() as u64);
            entries.push((i, gpus as u32));
        }
    }
    let by_node = ByNode::from_keys(keys, &entries);
    #[cfg(debug_assertions)]
    {
        let plain = victims_by_node_plain(e, cands, which);
        let ours: BTreeMap<NodeId, Vec<usize>> =
            by_node.iter().map(|(id, c)| (*id, c.to_vec())).collect();
        debug_assert_eq!(ours, plain);
        for (id, local) in &plain {
            let gpus: u32 = local
                .iter()
                .map(|&i| gpus_of_run_on(e, cands[i].run, *id))
                .sum();
            debug_assert_eq!(by_node.gpus_on(*id), gpus);
        }
    }
    by_node
}

/// [`victims_by_node`] the straightforward way (debug builds compare).
#[cfg(debug_assertions)]
fn victims_by_node_plain(
    e: &Engine,
    cands: &[Candidate],
    which: &[usize],
) -> BTreeMap<NodeId, Vec<usize>> {
    let mut by_node: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
    for &i in which {
        for (node, _) in &e.runs[cands[i].run as usize].placement {
            let on_node = by_node.entry(*node).or_default();
            if on_node.last() != Some(&i) {
                on_node.push(i);
            }
        }
    }
    by_node
}

/// Where the job would sit with victims from `by_node`, honouring its
/// topology: the victims and the placement.
fn place_with(
    e: &Engine,
    area: Area,
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
) -> Option<(Vec<usize>, Placement)> {
    if req.required.or(req.preferred).is_none() {
        let (_, chosen, p) = node_by_node(e, area, req, cands, by_node, rejected, stopping)?;
        return Some((chosen, p));
    }
    let domains = match area {
        Area::Listed { domains, .. } => domains,
        Area::Indexed => &[],
    };
    let best = domains::best_in_domains(e, domains, req, cands, by_node, rejected, stopping);
    if req.required.is_some() {
        let (_, chosen, p) = best?;
        return Some((chosen, p));
    }
    // `preferred`: one domain only where it costs no less preferred victims
    // than anywhere — the victim order comes first, the topology after it.
    let anywhere = node_by_node(e, area, req, cands, by_node, rejected, stopping);
    let (_, chosen, p) = match (best, anywhere) {
        (Some(one), Some(any)) if any.0 < one.0 => any,
        (Some(one), _) => one,
        (None, any) => any?,
    };
    Some((chosen, p))
}

/// The nodes of `nodes` grouped by their domain at `level`, in the
/// domains' key order: each domain's nodes and those of them in `base`
/// (both sorted, as `nodes` and `base` are). Nodes outside every domain of
/// the level are left out.
fn domains_of(
    e: &Engine,
    nodes: &[NodeId],
    base: &[NodeId],
    level: model::spec::TopologyLevel,
) -> Vec<(Vec<NodeId>, Vec<NodeId>)> {
    let mut domains: BTreeMap<&str, (Vec<NodeId>, Vec<NodeId>)> = BTreeMap::new();
    for (list, which) in [(nodes, 0), (base, 1)] {
        for &id in list {
            if let Some(key) = e.cluster.node(id).domain_key(level) {
                let (members, base) = domains.entry(key).or_default();
                if which == 0 { members } else { base }.push(id);
            }
        }
    }
    domains.into_values().collect()
}

/// After the borrowing rule turned down a victim: for each candidate in
/// order (the first 64), it with every more preferred candidate the rule
/// allows beside it; the first such set the job fits with.
fn rule_first_sets(
    e: &Engine,
    area: Area,
    req: &Request,
    cands: &[Candidate],
    stopping: &Waitable,
) -> Option<(Vec<usize>, Placement)> {
    let unused = std::cell::Cell::new(false);
    for last in 0..cands.len().min(64) {
        let set = rule_first_set(e, cands, req.model, last);
        let by_node = victims_by_node(e, cands, &set);
        if let Some(found) = place_with(e, area, req, cands, &by_node, &unused, stopping) {
            return Some(found);
        }
    }
    None
}

/// The victims `chosen` plus those added in order (after `first`, when
/// given) until a job of `gpus` GPUs fits the limits of `q`, each one the
/// borrowing rule allows with those before it and whose queue shares a
/// queue with `q`'s path; `None` when the limits are never met. Candidates
/// the rule turned down are noted in `turned_down`. The tree is left as it
/// was.
#[allow(clippy::too_many_arguments)]
fn add_for_quota(
    e: &mut Engine,
    q: QueueId,
    m: u16,
    gpus: u64,
    cands: &[Candidate],
    chosen: &[usize],
    first: Option<usize>,
    turned_down: &mut Vec<usize>,
) -> Option<Vec<usize>> {
    let order: Vec<usize> = first.into_iter().chain(0..cands.len()).collect();
    add_for_quota_in(e, q, m, gpus, cands, chosen, &order, turned_down)
}

/// [`add_for_quota`] adding candidates in `order` (each once).
#[allow(clippy::too_many_arguments)]
fn add_for_quota_in(
    e: &mut Engine,
    q: QueueId,
    m: u16,
    gpus: u64,
    cands: &[Candidate],
    chosen: &[usize],
    order: &[usize],
    turned_down: &mut Vec<usize>,
) -> Option<Vec<usize>> {
    let mut set = chosen.to_vec();
    let mut headroom = Headroom::of(e, cands, m, &[chosen]);
    let mut member = vec![false; cands.len()];
    // Each victim's usage leaves the path of `q` where its queue meets it
    // ([`quota_fits_without`]): summed per place as victims are added, the
    // tree left alone.
    let mut released = vec![0u64; e.tree.path(q).count()];
    for &i in chosen {
        member[i] = true;
        if let Some(k) = cands[i].meet {
            released[k as usize] += cands[i].gpus;
        }
    }
    // The victims given may be enough already.
    let mut fits = e.tree.fits_releasing(q, m, gpus, &released);
    debug_assert_eq!(fits, quota_fits_without(e, q, m, gpus, cands, &set));
    #[cfg(debug_assertions)]
    let own_path: Vec<QueueId> = e.tree.path(q).collect();
    for &i in order {
        if fits {
            break;
        }
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            cands[i].meet.is_some(),
            frees_quota_on(e, &own_path, cands[i].queue)
        );
        if member[i] || cands[i].meet.is_none() {
            continue;
        }
        if !headroom.allows(e, i) {
            turned_down.push(i);
            continue;
        }
        set.push(i);
        member[i] = true;
        headroom.add(e, i);
        if let Some(k) = cands[i].meet {
            released[k as usize] += cands[i].gpus;
        }
        fits = e.tree.fits_releasing(q, m, gpus, &released);
        debug_assert_eq!(fits, quota_fits_without(e, q, m, gpus, cands, &set));
    }
    fits.then_some(set)
}

/// Candidate `first` and those before it in order that the borrowing rule
/// allows beside it (sorted): the set where `first` goes before more
/// preferred victims of its queue.
fn rule_first_set(e: &Engine, cands: &[Candidate], m: u16, first: usize) -> Vec<usize> {
    let mut set = vec![first];
    let mut headroom = Headroom::of(e, cands, m, &[&set]);
    for i in 0..first {
        if headroom.allows(e, i) {
            set.push(i);
            headroom.add(e, i);
        }
    }
    set.sort_unstable();
    set
}

/// Candidates (the first in victim order) among which every set is tried
/// ([`SubsetSearch`]): at most 2^10 sets. Tried after a greedy answer of two
/// victims or more ([`least_preferred_subset`]) and when the borrowing rule
/// turned victims down and nothing was found.
const SUBSET_CANDIDATES: usize = 10;

/// A set of victims more preferred than `chosen` (its least preferred
/// victim more preferred, and so on down) that lets job `req` of queue `q`
/// run: the limits, the borrowing rule and a placement. Tried only when
/// `chosen` has two victims or more, all among the first
/// [`SUBSET_CANDIDATES`]. The greedy search decides the placement first and
/// tops up the quota after: a victim the quota needs anyway may free GPUs
/// that make the placement's own victims needless.
///
/// Sets are numbers over the candidates' order (bit `i`: candidate `i`), so
/// the smallest number that works is the most preferred set, and no victim
/// of it can be left out (taking fewer victims never breaks the borrowing
/// rule). They are searched smallest first, a range of sets skipped at once
/// when even all of them together do not meet the limits or find a
/// placement (both only get easier with more victims).
#[allow(clippy::too_many_arguments)]
fn least_preferred_subset(
    e: &mut Engine,
    area: Area,
    req: &Request,
    q: QueueId,
    job_gpus: u64,
    cands: &[Candidate],
    chosen: &[usize],
    stopping: &Waitable,
) -> Option<(Vec<usize>, Placement)> {
    if chosen.len() < 2 || chosen.iter().any(|&i| i >= SUBSET_CANDIDATES) {
        return None;
    }
    let mut search = SubsetSearch::new(area, req, q, job_gpus, cands, stopping);
    // Below `chosen`: sets that share its victims above some victim `c` of
    // it and lack `c`, any of the candidates before `c` beside them — the
    // highest such `c` first.
    let mut above: u32 = 0;
    let mut desc: Vec<usize> = chosen.to_vec();
    desc.sort_unstable_by(|a, b| b.cmp(a));
    for &c in &desc {
        if let Some(found) = search.smallest(e, above, c) {
            return Some(found);
        }
        above |= 1 << c;
    }
    None
}

/// The state of one [`least_preferred_subset`] search.
struct SubsetSearch<'a> {
    area: Area<'a>,
    req: &'a Request,
    q: QueueId,
    job_gpus: u64,
    cands: &'a [Candidate],
    /// The first candidates, none of them held to the borrowing rule.
    ruleless: Vec<Candidate>,
    stopping: &'a Waitable,
    /// Sets looked at: their placement when they meet the limits and find
    /// one.
    could: HashMap<u32, Option<Placement>>,
}

impl<'a> SubsetSearch<'a> {
    fn new(
        area: Area<'a>,
        req: &'a Request,
        q: QueueId,
        job_gpus: u64,
        cands: &'a [Candidate],
        stopping: &'a Waitable,
    ) -> Self {
        // The rule is judged on each set as a whole: the placement may use
        // any of its victims (fewer victims never break the rule), so it is
        // searched with the rule's queues left out.
        let ruleless = cands
            .iter()
            .take(SUBSET_CANDIDATES)
            .map(|c| Candidate {
                borrowed_from: std::rc::Rc::from(Vec::new()),
                ..c.clone()
            })
            .collect();
        SubsetSearch {
            area,
            req,
            q,
            job_gpus,
            cands,
            ruleless,
            stopping,
            could: HashMap::default(),
        }
    }

    fn members(mask: u32) -> Vec<usize> {
        (0..SUBSET_CANDIDATES)
            .filter(|i| mask & (1 << i) != 0)
            .collect()
    }

    /// Whether the set `mask` meets the limits and finds a placement (the
    /// borrowing rule aside): when it does not, no set within it does.
    fn could(&mut self, e: &mut Engine, mask: u32) -> bool {
        if let Some(known) = self.could.get(&mask) {
            return known.is_some();
        }
        let set = Self::members(mask);
        let placement =
            if quota_fits_without(e, self.q, self.req.model, self.job_gpus, self.cands, &set) {
                placement_with(e, self.area, self.req, &self.ruleless, &set, self.stopping)
            } else {
                None
            };
        let could = placement.is_some();
        self.could.insert(mask, placement);
        could
    }

    /// The smallest set `fixed` ∪ s, s any set of the candidates before
    /// `below`, that works (not `fixed` alone when it is empty).
    fn smallest(
        &mut self,
        e: &mut Engine,
        fixed: u32,
        below: usize,
    ) -> Option<(Vec<usize>, Placement)> {
        let everything = fixed | ((1u32 << below) - 1);
        if everything == 0 || !self.could(e, everything) {
            return None;
        }
        if below == 0 {
            let set = Self::members(fixed);
            if !Headroom::of(e, self.cands, self.req.model, &[&set]).allowed() {
                return None;
            }
            let p = self.could.get(&fixed).cloned().flatten()?;
            return Some((set, p));
        }
        // Without candidate `below − 1` first (smaller numbers), then with it.
        self.smallest(e, fixed, below - 1)
            .or_else(|| self.smallest(e, fixed | (1 << (below - 1)), below - 1))
    }
}

/// Whether job of `gpus` fits the limits of `q` with the victims `chosen`
/// gone (the tree is left as it was).
fn quota_fits_without(
    e: &mut Engine,
    q: QueueId,
    m: u16,
    gpus: u64,
    cands: &[Candidate],
    chosen: &[usize],
) -> bool {
    // Limits only loosen as usage is released.
    if e.tree.fits(q, m, gpus).is_ok() {
        return true;
    }
    // Each victim's usage leaves the path where its queue meets it.
    let depth = e.tree.path(q).count();
    let mut released = vec![0u64; depth];
    for &i in chosen {
        if let Some(k) = cands[i].meet {
            released[k as usize] += cands[i].gpus;
        }
    }
    #[cfg(debug_assertions)]
    {
        let path: Vec<QueueId> = e.tree.path(q).collect();
        let mut walked = vec![0u64; path.len()];
        for &i in chosen {
            release_on_path(e, cands[i].queue, &path, &mut walked, cands[i].gpus);
        }
        debug_assert_eq!(released, walked, "candidates' meeting places");
    }
    let fits = e.tree.fits_releasing(q, m, gpus, &released);
    debug_assert_eq!(fits, {
        let epoch = e.tree.epoch;
        for &i in chosen {
            e.tree.charge(cands[i].queue, m, cands[i].gpus, false);
        }
        let fits = e.tree.fits(q, m, gpus).is_ok();
        for &i in chosen {
            e.tree.charge(cands[i].queue, m, cands[i].gpus, true);
        }
        e.tree.epoch = epoch;
        fits
    });
    fits
}

/// The placement the search finds with exactly the victims `set`, if any.
fn placement_with(
    e: &Engine,
    area: Area,
    req: &Request,
    cands: &[Candidate],
    set: &[usize],
    stopping: &Waitable,
) -> Option<Placement> {
    let by_node = victims_by_node(e, cands, set);
    let unused = std::cell::Cell::new(false);
    let (used, p) = place_with(e, area, req, cands, &by_node, &unused, stopping)?;
    debug_assert!(used.iter().all(|i| set.contains(i)));
    Some(p)
}

/// [`place_with`]'s search per domain of a required topology level for
/// one victim set (the victim search's drop loop): a domain's result
/// depends only on the victims on its nodes.
struct DomainResults {
    /// The domain (index into the area's domains) of each node in one.
    domain_of: HashMap<NodeId, usize>,
    /// Per domain: what [`node_by_node`] finds there.
    results: Vec<Option<(Cost, Vec<usize>, Placement)>>,
}

/// Domains searched again, with their new results.
type DomainChanges = Vec<(usize, Option<(Cost, Vec<usize>, Placement)>)>;

impl DomainResults {
    /// The domains' results with the victims `set`.
    fn new(
        e: &Engine,
        domains: &[(Vec<NodeId>, Vec<NodeId>)],
        req: &Request,
        cands: &[Candidate],
        set: &[usize],
        stopping: &Waitable,
    ) -> Self {
        let mut domain_of = HashMap::default();
        for (d, (members, _)) in domains.iter().enumerate() {
            for &id in members {
                domain_of.insert(id, d);
            }
        }
        let by_node = victims_by_node(e, cands, set);
        let results = (0..domains.len())
            .map(|d| Self::search(e, domains, d, req, cands, &by_node, stopping))
            .collect();
        DomainResults { domain_of, results }
    }

    fn search(
        e: &Engine,
        domains: &[(Vec<NodeId>, Vec<NodeId>)],
        d: usize,
        req: &Request,
        cands: &[Candidate],
        by_node: &ByNode,
        stopping: &Waitable,
    ) -> Option<(Cost, Vec<usize>, Placement)> {
        let (members, base) = &domains[d];
        let area = Area::Listed {
            nodes: members,
            base,
            domains: &[],
        };
        let unused = std::cell::Cell::new(false);
        node_by_node(e, area, req, cands, by_node, &unused, stopping)
    }

    /// The domains' results that change when the victims are `set`, one
    /// fewer than those the results are for: those of the domains where
    /// the dropped victim `run` holds GPUs.
    #[allow(clippy::too_many_arguments)]
    fn without(
        &self,
        e: &Engine,
        domains: &[(Vec<NodeId>, Vec<NodeId>)],
        req: &Request,
        cands: &[Candidate],
        set: &[usize],
        run: RunId,
        stopping: &Waitable,
    ) -> DomainChanges {
        let mut touched: Vec<usize> = e.runs[run as usize]
            .placement
            .iter()
            .filter_map(|(id, _)| self.domain_of.get(id).copied())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        if touched.is_empty() {
            return Vec::new();
        }
        let by_node = victims_by_node(e, cands, set);
        touched
            .into_iter()
            .map(|d| {
                (
                    d,
                    Self::search(e, domains, d, req, cands, &by_node, stopping),
                )
            })
            .collect()
    }

    /// The placement of the domain with the least cost (the first of
    /// equals, as [`place_with`] takes), with `changed` in place.
    fn best(&self, changed: &DomainChanges) -> Option<Placement> {
        let mut best: Option<&(Cost, Vec<usize>, Placement)> = None;
        for (d, kept) in self.results.iter().enumerate() {
            let result = match changed.iter().find(|(c, _)| *c == d) {
                Some((_, new)) => new.as_ref(),
                None => kept.as_ref(),
            };
            if let Some(r) = result
                && best.is_none_or(|b| r.0 < b.0)
            {
                best = Some(r);
            }
        }
        best.map(|(_, _, p)| p.clone())
    }

    /// Keeps `changed` (the victim was dropped).
    fn apply(&mut self, changed: DomainChanges) {
        for (d, result) in changed {
            self.results[d] = result;
        }
    }
}

/// Whether run `run` holds GPUs on a node of placement `p`.
fn runs_on(e: &Engine, run: RunId, p: &Placement) -> bool {
    e.runs[run as usize]
        .placement
        .iter()
        .any(|(node, _)| p.iter().any(|(id, _)| id == node))
}

/// Whether taking usage from queue `victim` can make room under the limits
/// on the path of the preemptor's leaf (`own_path`, from the leaf up, found
/// once per search): they share an ancestor with a limit, or are the same.
#[cfg(debug_assertions)]
fn frees_quota_on(e: &Engine, own_path: &[QueueId], victim: QueueId) -> bool {
    let frees = e.tree.path(victim).any(|a| own_path.contains(&a));
    // The straightforward way: the victim's path listed, the leaf's walked.
    #[cfg(debug_assertions)]
    if let Some(&q) = own_path.first() {
        let theirs: Vec<QueueId> = e.tree.path(victim).collect();
        debug_assert_eq!(frees, e.tree.path(q).any(|a| theirs.contains(&a)));
    }
    frees
}

/// A victim set's cost: its candidates' ranks, least preferred first,
/// compared in order — as Σ 2^rank: the set whose least preferred victim is
/// more preferred wins, and so on down (a subset wins over its superset).
type Cost = Vec<usize>;

/// A node for one replica: its key, the node, the extra victims, the GPU
/// positions.
type NodeChoice<'a> = (ReplicaKey<'a>, NodeId, Vec<usize>, Vec<usize>);

/// What orders nodes for one replica, lower is better: the victims it adds
/// as a [`Cost`] (least preferred first, compared in turn: the set whose
/// least preferred victim is most preferred, then the next, …; none is
/// best), GPUs left, name.
type ReplicaKey<'a> = (Cost, u32, &'a str);

/// A lower bound of a node's [`ReplicaKey`], cheap to count: (least
/// preferred victim it needs at the least, plus one, or 0 for none; 0 or
/// 1 victims; GPUs left; name). Ordered as the keys it bounds.
type NodeBound<'a> = (usize, usize, u32, &'a str);

/// Whether no node of bound `b` has a key below `key`: the bound, read as
/// a key (no victim or one), is not below it.
fn bound_reaches(b: &NodeBound, key: &ReplicaKey) -> bool {
    let (worst, _, left, name) = *b;
    let needed = worst.checked_sub(1);
    (needed.as_slice(), left, name) >= (key.0.as_slice(), key.1, key.2)
}

/// Victims on `node` for one replica: the node's candidates (`local`, in
/// victim order, not yet `chosen`) are added in order until the replica
/// fits (with `rule`: only those [`Headroom`] allows), then any it
/// fits without is dropped, least preferred first. Returns the victims, the
/// GPUs, and how many GPUs the replica could use there with those victims.
#[allow(clippy::too_many_arguments)]
fn victims_on_node(
    e: &Engine,
    node: &NodeState,
    mine: &[usize],
    local: &[usize],
    chosen: &[usize],
    cands: &[Candidate],
    req: &Request,
    rule: bool,
    stopping: &Waitable,
) -> Option<(Vec<usize>, Vec<usize>, u32)> {
    let mut extra: Vec<usize> = Vec::new();
    let mut headroom = rule.then(|| Headroom::of(e, cands, req.model, &[chosen]));
    let mut next = local.iter().copied().filter(|i| !chosen.contains(i));
    // The GPUs a replica could use so far; each victim added brings the
    // GPUs it holds here.
    let mut usable = {
        let victims = runs_of(cands, chosen, &[]);
        UsableGpus::of(node, free_or_victim(mine, &victims, stopping))
    };
    loop {
        let picked = if usable.count() >= req.per_replica {
            usable.pick(node, req.per_replica)
        } else {
            None
        };
        if let Some(positions) = picked {
            if extra.len() > 1
                && let Some(trimmed) = trim_on_node(
                    node,
                    mine,
                    chosen,
                    extra.clone(),
                    cands,
                    req.per_replica,
                    stopping,
                )
            {
                return Some(trimmed);
            }
            return Some((extra, positions, usable.count()));
        }
        let i = next
            .by_ref()
            .find(|i| headroom.as_ref().is_none_or(|h| h.allows(e, *i)))?;
        if let Some(h) = headroom.as_mut() {
            h.add(e, i);
        }
        let run = cands[i].run;
        for (pos, g) in node.gpus.iter().enumerate() {
            if g.owner == Owner::Running(run) && !mine.contains(&pos) {
                usable.add(pos);
            }
        }
        extra.push(i);
    }
}

/// Places replica after replica in `area`, each on the node that needs the
/// most preferred victims (fewest, then best fit, then name). Returns the
/// cost, the chosen victims and the placement, or `None` when the replicas
/// do not fit even with every allowed victim.
fn node_by_node(
    e: &Engine,
    area: Area,
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
) -> Option<(Cost, Vec<usize>, Placement)> {
    node_by_node_beating(e, area, req, cands, by_node, rejected, stopping, None)
}

/// [`node_by_node`], where only a cost below `beat` (when given) matters:
/// the exact search for small gangs looks only below it, and when it finds
/// nothing there the greedy choice is returned, which then costs no less
/// than `beat` (and may cost more than what `node_by_node` returns).
#[allow(clippy::too_many_arguments)]
fn node_by_node_beating(
    e: &Engine,
    area: Area,
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
    beat: Option<&Cost>,
) -> Option<(Cost, Vec<usize>, Placement)> {
    if too_few_replicas(e, area, req, cands, by_node, rejected, stopping) {
        // Debug builds check the shortcut against the plain search.
        #[cfg(debug_assertions)]
        {
            let nodes = holders(e, area, req, by_node, stopping);
            let nodes = nodes.all(e, req, by_node, stopping);
            let (plain, plain_rejected) = plain_search(e, &nodes, req, cands, by_node, stopping);
            debug_assert!(plain.is_none(), "too few replicas fit, yet one was found");
            debug_assert!(!plain_rejected || rejected.get());
        }
        return None;
    }
    let nodes = holders(e, area, req, by_node, stopping);
    let greedy = node_by_node_pruned(e, &nodes, req, cands, by_node, rejected, stopping);
    let exact = greedy.as_ref().and_then(|(cost, ..)| {
        fewest_victims_exhaustive(e, &nodes, req, cands, by_node, stopping, cost, beat)
    });
    // Debug builds (every test) check the pruned search against the plain
    // one: the same choice, and the same word on the borrowing rule when
    // nothing was found.
    #[cfg(debug_assertions)]
    {
        let nodes = nodes.all(e, req, by_node, stopping);
        let (plain, plain_rejected) = plain_search(e, &nodes, req, cands, by_node, stopping);
        debug_assert_eq!(greedy, plain, "the pruned victim search chose differently");
        debug_assert!(
            greedy.is_some() || !plain_rejected || rejected.get(),
            "the pruned victim search missed a victim the borrowing rule turned down"
        );
    }
    exact.or(greedy)
}

/// [`choose_node_by_node`] without pruning, and whether the borrowing rule
/// turned a victim down: what debug builds check the shortcuts against.
#[cfg(debug_assertions)]
fn plain_search(
    e: &Engine,
    nodes: &[NodeId],
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    stopping: &Waitable,
) -> (Option<(Cost, Vec<usize>, Placement)>, bool) {
    let rejected = std::cell::Cell::new(false);
    let nodes = Holders {
        listed: nodes.to_vec(),
        indexed: false,
    };
    let (found, _) =
        choose_node_by_node(e, &nodes, req, cands, by_node, &rejected, stopping, false);
    (found, rejected.get())
}

/// Whether [`node_by_node`] on `nodes` surely finds nothing and learns
/// nothing: counting GPUs (free, waited-for stopping ones, every
/// candidate's), too few replicas fit, and the borrowing rule has no
/// victim there to turn down (no candidate taken from another queue's
/// borrowing, or a turn-down is known already). Linear in `nodes`: what
/// lets a search over many topology domains skip the hopeless ones.
fn too_few_replicas(
    e: &Engine,
    area: Area,
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
) -> bool {
    if req.per_replica == 0 {
        return false;
    }
    let none: Vec<usize> = Vec::new();
    let needed = u64::from(req.replicas);
    let (mut fit, mut may_reject) = (0u64, false);
    let mut count = |id: NodeId| {
        let local = by_node.get(&id).unwrap_or(&none);
        fit += most_replicas_on(e, id, by_node, req, stopping);
        may_reject = may_reject || any_borrowed(cands, local);
        fit >= needed
    };
    match area {
        Area::Listed { nodes, .. } => {
            if nodes.iter().any(|&id| count(id)) {
                return false;
            }
        }
        Area::Indexed => {
            // The area's nodes with candidates or kept runs, then the plain
            // ones (most room first: the count stops sooner).
            let m = req.model;
            let mut special: Vec<NodeId> = by_node
                .keys()
                .chain(stopping.kept_on_node.keys())
                .copied()
                .filter(|&id| {
                    let node = e.cluster.node(id);
                    node.schedulable && node.model == Some(m)
                })
                .collect();
            special.sort_unstable();
            special.dedup();
            if special.into_iter().any(&mut count) {
                return false;
            }
            if plain_rooms(e, req, by_node, stopping)
                .rev()
                .any(|(_, id)| count(id))
            {
                return false;
            }
        }
    }
    !may_reject || rejected.get()
}

/// Whether a candidate of `local` is taken from another queue's borrowing:
/// only such a victim can the borrowing rule turn down.
fn any_borrowed(cands: &[Candidate], local: &[usize]) -> bool {
    local.iter().any(|&i| !cands[i].borrowed_from.is_empty())
}

/// How many replicas node `id` could hold, counting its free GPUs,
/// waited-for stopping ones and those of every candidate `by_node` lists
/// there.
fn most_replicas_on(
    e: &Engine,
    id: NodeId,
    by_node: &ByNode,
    req: &Request,
    stopping: &Waitable,
) -> u64 {
    u64::from(most_gpus_on(e, id, by_node, stopping) / req.per_replica.max(1))
}

/// [`node_by_node`] on the nodes that could hold a replica, pruned.
fn node_by_node_pruned(
    e: &Engine,
    nodes: &Holders,
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
) -> Option<(Cost, Vec<usize>, Placement)> {
    // Only a victim taken from another queue's borrowing can be turned
    // down by the borrowing rule (plain nodes have none).
    let none: Vec<usize> = Vec::new();
    let may_reject = !rejected.get()
        && nodes
            .listed
            .iter()
            .any(|id| any_borrowed(cands, by_node.get(id).unwrap_or(&none)));
    // Counting GPUs (free, waited-for stopping ones, every candidate's),
    // too few replicas fit: nothing is found, and only whether the rule
    // turned a victim down is left to learn. (Counted only as far as
    // enough fit.)
    let needed = u64::from(req.replicas);
    let mut most_replicas: u64 = 0;
    for &id in &nodes.listed {
        if most_replicas >= needed {
            break;
        }
        most_replicas += most_replicas_on(e, id, by_node, req, stopping);
    }
    if nodes.indexed && req.per_replica > 0 {
        for (room, _) in plain_rooms(e, req, by_node, stopping).rev() {
            if most_replicas >= needed {
                break;
            }
            most_replicas += u64::from(room / req.per_replica);
        }
    }
    if req.per_replica > 0 && most_replicas < needed {
        if may_reject {
            choose_node_by_node(e, nodes, req, cands, by_node, rejected, stopping, false);
        }
        return None;
    }
    let (found, pruned) =
        choose_node_by_node(e, nodes, req, cands, by_node, rejected, stopping, true);
    if found.is_none() && pruned && may_reject && !rejected.get() {
        // Nodes left unseen might have told that the borrowing rule turned
        // down a victim, which matters only when nothing was found.
        choose_node_by_node(e, nodes, req, cands, by_node, rejected, stopping, false);
    }
    found
}

/// The victims one more replica needs on `node` (with `mine` taken there
/// by earlier replicas and `chosen` victims already): the victims in order
/// until the replica fits, the fewest kept; when that set breaks the
/// borrowing rule (noted in `rejected`), the victims the rule allows, in
/// order. With the GPUs and how many it could use there.
#[allow(clippy::too_many_arguments)]
fn replica_on(
    e: &Engine,
    node: &NodeState,
    mine: &[usize],
    local: &[usize],
    chosen: &[usize],
    cands: &[Candidate],
    req: &Request,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
) -> Option<(Vec<usize>, Vec<usize>, u32)> {
    victims_on_node(e, node, mine, local, chosen, cands, req, false, stopping)
        .filter(|(extra, _, _)| {
            let allowed = extra.iter().all(|i| cands[*i].borrowed_from.is_empty())
                || Headroom::of(e, cands, req.model, &[chosen, extra]).allowed();
            if !allowed {
                rejected.set(true);
            }
            allowed
        })
        .or_else(|| victims_on_node(e, node, mine, local, chosen, cands, req, true, stopping))
}

/// Gangs of at most this many replicas get [`fewest_victims_exhaustive`].
const EXHAUSTIVE_REPLICAS: u32 = 4;
/// ... over at most this many nodes.
const EXHAUSTIVE_NODES: usize = 8;
/// ... when there are at most this many node sequences (nodes^replicas):
/// every sequence of a reference fleet (6 nodes, 4 replicas).
const EXHAUSTIVE_SEQUENCES: usize = 1296;

/// For a small gang on few nodes, the node-by-node search's choice made
/// exact: every sequence of nodes for its replicas (each replica taking the
/// victims [`replica_on`] gives it there, in turn), and the victim set of
/// least cost (its least preferred victim as preferred as can be, and so
/// on down: "lower priority first") if it is below `bound` — the greedy
/// search, which places one replica at a time, can miss it (issue 16's
/// reference search) when it needs two victims or more (with fewer, the
/// replica that took the one victim had no node without it). `None` when
/// the gang or the node set is too large to try every sequence, or nothing
/// beats `bound`. Plain nodes of an indexed area count only as far as the
/// replicas could use them (the best `replicas` of them): they need no
/// victim. With `beat`, only a set below it too is looked for (the same
/// set when the least is below both: sets are tried in the same order,
/// and only branches that cannot go below `beat` are cut sooner).
#[allow(clippy::too_many_arguments)]
fn fewest_victims_exhaustive(
    e: &Engine,
    holders: &Holders,
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    stopping: &Waitable,
    bound: &Cost,
    beat: Option<&Cost>,
) -> Option<(Cost, Vec<usize>, Placement)> {
    if req.replicas < 2 || req.replicas > EXHAUSTIVE_REPLICAS || bound.len() < 2 {
        return None;
    }
    // (The greedy choice's cost decides whether to search; `beat` only
    // narrows what is looked for. Nothing costs less than no victim.)
    let bound = match beat {
        Some(beat) if beat.is_empty() => return None,
        Some(beat) if beat < bound => beat,
        _ => bound,
    };
    let mut nodes = holders.listed.clone();
    if nodes.len() > EXHAUSTIVE_NODES {
        return None;
    }
    if holders.indexed {
        let plain = plain_rooms(e, req, by_node, stopping).take(req.replicas as usize);
        nodes.extend(plain.map(|(_, id)| id));
        nodes.sort_unstable();
    }
    let sequences = (0..req.replicas).try_fold(1usize, |n, _| n.checked_mul(nodes.len()));
    if nodes.len() > EXHAUSTIVE_NODES || sequences.is_none_or(|n| n > EXHAUSTIVE_SEQUENCES) {
        return None;
    }
    struct Search<'s, 'f> {
        e: &'s Engine<'f>,
        nodes: &'s [NodeId],
        req: &'s Request,
        cands: &'s [Candidate],
        by_node: &'s ByNode,
        stopping: &'s Waitable,
        best: Option<(Cost, Vec<usize>, Placement)>,
        bound: Option<Cost>,
        /// States reached already (victims, GPUs taken per node): replicas
        /// are alike, so sequences in another order often meet again.
        seen: rustc_hash::FxHashSet<SearchState>,
        /// [`replica_on`] per node, GPUs taken there and victims (as sets:
        /// what it depends on), for states that differ elsewhere.
        on_node: HashMap<OnNodeKey, Option<ReplicaVictims>>,
    }
    /// A node, the GPUs taken there (sorted), and the victims it depends
    /// on ([`on_node_victims`]).
    type OnNodeKey = (NodeId, Vec<usize>, OnNodeVictims);
    /// What [`replica_on`] returns: the victims, the GPUs, how many it
    /// could use there.
    type ReplicaVictims = (Vec<usize>, Vec<usize>, u32);
    /// A state of the search: its victims' cost, the GPUs taken per node.
    type SearchState = (Cost, Vec<(NodeId, Vec<usize>)>);
    fn cost_of(chosen: &[usize]) -> Cost {
        let mut cost = chosen.to_vec();
        cost.sort_unstable_by(|a, b| b.cmp(a));
        cost
    }
    fn go(
        s: &mut Search<'_, '_>,
        chosen: &mut Vec<usize>,
        taken: &mut BTreeMap<NodeId, Vec<usize>>,
        placement: &mut Placement,
    ) {
        // More victims never cost less: a partial set at or above the
        // best so far ends the branch.
        let cost = cost_of(chosen);
        let beaten = |c: &Cost| cost >= *c;
        if s.best.as_ref().is_some_and(|(c, ..)| beaten(c)) || s.bound.as_ref().is_some_and(beaten)
        {
            return;
        }
        if placement.len() == s.req.replicas as usize {
            s.best = Some((cost, chosen.clone(), placement.clone()));
            return;
        }
        let state = (
            cost,
            taken
                .iter()
                .map(|(id, t)| {
                    let mut t = t.clone();
                    t.sort_unstable();
                    (*id, t)
                })
                .collect(),
        );
        let cost = state.0.clone();
        if !s.seen.insert(state) {
            return;
        }
        let none: Vec<usize> = Vec::new();
        let unused = std::cell::Cell::new(false);
        for &id in s.nodes {
            let node = s.e.cluster.node(id);
            let mine = taken.get(&id).unwrap_or(&none);
            let local = s.by_node.get(&id).unwrap_or(&none);
            let mut mine_set = mine.clone();
            mine_set.sort_unstable();
            let key = (id, mine_set, on_node_victims(s.cands, local, chosen, &cost));
            let found = match s.on_node.get(&key) {
                Some(found) => {
                    debug_assert_eq!(
                        *found,
                        replica_on(
                            s.e, node, mine, local, chosen, s.cands, s.req, &unused, s.stopping,
                        ),
                        "a replica's victims depend on more than its sets"
                    );
                    found.clone()
                }
                None => {
                    let found = replica_on(
                        s.e, node, mine, local, chosen, s.cands, s.req, &unused, s.stopping,
                    );
                    s.on_node.insert(key, found.clone());
                    found
                }
            };
            let Some((extra, positions, _)) = found else {
                continue;
            };
            let (had, mine_had) = (chosen.len(), taken.get(&id).map_or(0, Vec::len));
            chosen.extend(extra);
            taken
                .entry(id)
                .or_default()
                .extend(positions.iter().copied());
            placement.push((id, positions));
            go(s, chosen, taken, placement);
            placement.pop();
            chosen.truncate(had);
            if let Some(t) = taken.get_mut(&id) {
                t.truncate(mine_had);
                if t.is_empty() {
                    taken.remove(&id);
                }
            }
        }
    }
    let mut search = Search {
        e,
        nodes: &nodes,
        req,
        cands,
        by_node,
        stopping,
        best: None,
        bound: Some(bound.clone()),
        seen: Default::default(),
        on_node: Default::default(),
    };
    go(
        &mut search,
        &mut Vec::new(),
        &mut BTreeMap::new(),
        &mut Vec::with_capacity(req.replicas as usize),
    );
    search.best
}

/// What [`replica_on`] on a node depends on of the victims chosen so far
/// (beside the GPUs taken there): those among the node's candidates
/// `local` (their GPUs there are usable), when none of these is taken from
/// another queue's borrowing — the borrowing rule, which judges the whole
/// set, is then never asked; else the whole set (`cost`). Sequences of
/// [`fewest_victims_exhaustive`] that differ only on other nodes share one
/// answer for the node (debug builds check each reuse).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OnNodeVictims {
    Local(Vec<usize>),
    All(Cost),
}

fn on_node_victims(
    cands: &[Candidate],
    local: &[usize],
    chosen: &[usize],
    cost: &Cost,
) -> OnNodeVictims {
    if any_borrowed(cands, local) {
        return OnNodeVictims::All(cost.clone());
    }
    let mut here: Vec<usize> = local
        .iter()
        .copied()
        .filter(|i| chosen.contains(i))
        .collect();
    here.sort_unstable();
    OnNodeVictims::Local(here)
}

/// [`node_by_node`] on the nodes that could hold a replica. With `prune`,
/// each replica tries the nodes in the order of a lower bound of the least
/// preferred victim they need, and stops at the first that cannot beat the
/// best node so far (the same choice; returns whether it stopped early).
#[allow(clippy::too_many_arguments)]
fn choose_node_by_node(
    e: &Engine,
    holders: &Holders,
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
    prune: bool,
) -> (Option<(Cost, Vec<usize>, Placement)>, bool) {
    let mut chosen: Vec<usize> = Vec::new();
    let mut taken: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
    let mut placement: Placement = Vec::with_capacity(req.replicas as usize);
    let none: Vec<usize> = Vec::new();
    let mut pruned = false;
    // Pruned, an indexed area's plain nodes are streamed in bound order
    // (no victim on them: their bound is (0, 0, room left, name), the
    // index's order); every node is listed otherwise, in node order.
    let stream_plain = prune && holders.indexed;
    let all;
    let nodes: &[NodeId] = if stream_plain {
        &holders.listed
    } else {
        all = holders.all(e, req, by_node, stopping);
        &all
    };
    let mut streamed_taken: Vec<NodeId> = Vec::new();
    let mut order: Vec<(NodeBound, NodeId)> = Vec::with_capacity(nodes.len());
    for _ in 0..req.replicas {
        // A lower bound of each node's key, counting GPUs (NVLink domains
        // aside): where free GPUs, waited-for stopping ones and chosen
        // victims' (less those earlier replicas took) hold a replica, no
        // victim and exactly those GPUs left; else at least one victim, the
        // candidate left, in order, whose GPUs complete a replica the least
        // preferred. A node where all of them do not never takes the replica.
        order.clear();
        for &id in nodes.iter().chain(&streamed_taken) {
            let node = e.cluster.node(id);
            let local = by_node.get(&id).unwrap_or(&none);
            debug_assert!(local.is_sorted());
            let gpus = |i: usize| gpus_of_run_on(e, cands[i].run, id);
            let mine = taken.get(&id).map_or(0, |t| t.len() as u32);
            let mut have = (node.free
                + stopping.gpus_on(&e.cluster, id)
                + local
                    .iter()
                    .filter(|i| chosen.contains(i))
                    .map(|&i| gpus(i))
                    .sum::<u32>())
            .saturating_sub(mine);
            let bound = if have >= req.per_replica {
                Some((0, 0, have - req.per_replica))
            } else {
                local.iter().filter(|i| !chosen.contains(i)).find_map(|&i| {
                    have += gpus(i);
                    (have >= req.per_replica).then_some((i + 1, 1, 0))
                })
            };
            if let Some(bound) = bound {
                order.push(((bound.0, bound.1, bound.2, node.name.as_str()), id));
            }
        }
        // With `prune`, in bound order, lazily: the search usually stops
        // after a few.
        let mut heap = std::collections::BinaryHeap::new();
        let mut in_order = order.iter().copied();
        if prune {
            heap = order.iter().copied().map(std::cmp::Reverse).collect();
        }
        let per_replica = req.per_replica;
        let mut stream = stream_plain.then(|| {
            plain_rooms(e, req, by_node, stopping)
                .filter(|(_, id)| !taken.contains_key(id))
                .map(|(room, id)| {
                    let bound: NodeBound =
                        (0, 0, room - per_replica, e.cluster.node(id).name.as_str());
                    (bound, id)
                })
                .peekable()
        });
        let mut next = || {
            if !prune {
                return in_order.next();
            }
            let from_stream = stream.as_mut().and_then(|s| s.peek().copied());
            match (heap.peek(), from_stream) {
                (Some(std::cmp::Reverse(h)), Some(s)) if s < *h => stream.as_mut()?.next(),
                (Some(_), _) => heap.pop().map(|std::cmp::Reverse(x)| x),
                (None, _) => stream.as_mut()?.next(),
            }
        };
        let mut best: Option<NodeChoice> = None;
        while let Some((bound, id)) = next() {
            if prune
                && best
                    .as_ref()
                    .is_some_and(|(k, ..)| bound_reaches(&bound, k))
            {
                pruned = true;
                break;
            }
            let node = e.cluster.node(id);
            let mine = taken.get(&id).unwrap_or(&none);
            let local = by_node.get(&id).unwrap_or(&none);
            let Some((extra, positions, avail)) = replica_on(
                e, node, mine, local, &chosen, cands, req, rejected, stopping,
            ) else {
                continue;
            };
            let mut cost = extra.clone();
            cost.sort_unstable_by(|a, b| b.cmp(a));
            let key: ReplicaKey = (cost, avail - req.per_replica, node.name.as_str());
            if best.as_ref().is_none_or(|(k, ..)| key < *k) {
                best = Some((key, id, extra, positions));
            }
        }
        let Some((_, id, extra, positions)) = best else {
            return (None, pruned);
        };
        if stream_plain && nodes.binary_search(&id).is_err() && !taken.contains_key(&id) {
            streamed_taken.push(id);
        }
        chosen.extend(extra);
        taken
            .entry(id)
            .or_default()
            .extend(positions.iter().copied());
        placement.push((id, positions));
    }
    let mut cost = chosen.clone();
    cost.sort_unstable_by(|a, b| b.cmp(a));
    (Some((cost, chosen, placement)), pruned)
}

/// The nodes a victim search looks at.
#[derive(Debug, Clone, Copy)]
enum Area<'a> {
    /// Without topology: every schedulable node of the job's model. A node
    /// without candidates or kept runs on it ("plain") can hold a replica
    /// only on its free GPUs and open stopping ones, which the cluster's
    /// waiting index counts and orders: plain nodes are read from it as
    /// far as a search gets ([`Holders`]), the others looked at one by one.
    Indexed,
    /// The nodes (sorted), and those of them where a replica could fit
    /// without victims (free GPUs and waited-for stopping ones add up to
    /// it).
    Listed {
        nodes: &'a [NodeId],
        base: &'a [NodeId],
        /// With a topology level: the nodes and the base of each domain,
        /// in the domains' key order ([`domains_of`]), found once per
        /// search.
        domains: &'a [(Vec<NodeId>, Vec<NodeId>)],
    },
}

/// The nodes of an area where a replica could fit with every victim of a
/// search ([`holders`]).
#[derive(Debug, Clone, PartialEq)]
struct Holders {
    /// Sorted: every holder of a listed area; of an indexed one, those
    /// with candidates or kept runs on them.
    listed: Vec<NodeId>,
    /// Whether the plain nodes of the waiting index where a replica fits
    /// (free and open stopping GPUs) are holders too ([`Area::Indexed`]).
    indexed: bool,
}

impl Holders {
    /// Every holder, sorted.
    fn all(&self, e: &Engine, req: &Request, by_node: &ByNode, stopping: &Waitable) -> Vec<NodeId> {
        if !self.indexed {
            return self.listed.clone();
        }
        let mut plain: Vec<NodeId> = plain_rooms(e, req, by_node, stopping)
            .map(|(_, id)| id)
            .collect();
        plain.sort_unstable();
        merge_sorted(&self.listed, &plain)
    }
}

/// Whether node `id` has candidates of `by_node` or kept runs on it: not a
/// plain node of an indexed area.
fn is_special(id: NodeId, by_node: &ByNode, stopping: &Waitable) -> bool {
    by_node.contains_key(&id) || stopping.kept_on_node.contains_key(&id)
}

/// The plain nodes of an indexed area where a replica fits on free and
/// open stopping GPUs, with that room, best fit first, ties by name.
fn plain_rooms<'a>(
    e: &'a Engine,
    req: &Request,
    by_node: &'a ByNode,
    stopping: &'a Waitable,
) -> impl DoubleEndedIterator<Item = (u32, NodeId)> + 'a {
    e.cluster
        .rooms(req.model, req.per_replica)
        .filter(move |(_, id)| !is_special(*id, by_node, stopping))
}

/// [`could_hold_a_replica`] for the area's nodes with the victims
/// `by_node`: its base, and the nodes where victims complete a replica.
fn holders(
    e: &Engine,
    area: Area,
    req: &Request,
    by_node: &ByNode,
    stopping: &Waitable,
) -> Holders {
    let Area::Listed { nodes, base, .. } = area else {
        // Plain nodes aside: those of candidates and kept runs.
        let m = req.model;
        let mut listed: Vec<NodeId> = by_node
            .keys()
            .chain(stopping.kept_on_node.keys())
            .copied()
            .filter(|&id| {
                let node = e.cluster.node(id);
                node.schedulable
                    && node.model == Some(m)
                    && most_gpus_on(e, id, by_node, stopping) >= req.per_replica
            })
            .collect();
        listed.sort_unstable();
        listed.dedup();
        return Holders {
            listed,
            indexed: true,
        };
    };
    Holders {
        listed: listed_holders(e, nodes, base, req, by_node, stopping),
        indexed: false,
    }
}

/// [`holders`] of a listed area.
fn listed_holders(
    e: &Engine,
    nodes: &[NodeId],
    base: &[NodeId],
    req: &Request,
    by_node: &ByNode,
    stopping: &Waitable,
) -> Vec<NodeId> {
    debug_assert!(nodes.is_sorted() && base.is_sorted());
    // Victims' nodes outside the base, in node order like the base.
    let mut extra: Vec<NodeId> = Vec::new();
    let mut hold = |id: NodeId| {
        if base.binary_search(&id).is_err()
            && most_gpus_on(e, id, by_node, stopping) >= req.per_replica
        {
            extra.push(id);
        }
    };
    // Whichever is shorter is walked: the area (one domain of many, say)
    // or the nodes of the victims.
    if nodes.len() < by_node.len() {
        for &id in nodes {
            if by_node.contains_key(&id) {
                hold(id);
            }
        }
    } else {
        for &id in by_node.keys() {
            if nodes.binary_search(&id).is_ok() {
                hold(id);
            }
        }
    }
    merge_sorted(base, &extra)
}

/// Two sorted lists without common elements, merged into one.
fn merge_sorted(a: &[NodeId], b: &[NodeId]) -> Vec<NodeId> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut k) = (0, 0);
    while i < a.len() && k < b.len() {
        if a[i] < b[k] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[k]);
            k += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[k..]);
    debug_assert!(out.is_sorted());
    out
}

/// The most GPUs a replica could use on node `id`: free ones, waited-for
/// stopping ones and those of every candidate `by_node` lists there.
fn most_gpus_on(e: &Engine, id: NodeId, by_node: &ByNode, stopping: &Waitable) -> u32 {
    e.cluster.node(id).free + stopping.gpus_on(&e.cluster, id) + by_node.gpus_on(id)
}

/// How many GPUs run `run` holds on node `id`.
fn gpus_of_run_on(e: &Engine, run: RunId, id: NodeId) -> u32 {
    e.runs[run as usize]
        .placement
        .iter()
        .filter(|(n, _)| *n == id)
        .map(|(_, positions)| positions.len() as u32)
        .sum()
}

/// The nodes of `nodes` where one replica could fit with every victim of
/// the search: free GPUs, GPUs of the stopping jobs it may wait for and of
/// the candidates on the node (`by_node`) add up to a replica. An upper
/// bound, cheap to count: a node below it never takes a replica, whichever
/// victims are chosen.
fn could_hold_a_replica(
    e: &Engine,
    nodes: &[NodeId],
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    stopping: &Waitable,
) -> Vec<NodeId> {
    nodes
        .iter()
        .copied()
        .filter(|&id| {
            let node = e.cluster.node(id);
            let mut most = node.free;
            if most < req.per_replica
                && let Some(local) = by_node.get(&id)
            {
                most += local
                    .iter()
                    .map(|&i| gpus_of_run_on(e, cands[i].run, id))
                    .sum::<u32>();
            }
            if most < req.per_replica {
                most += stopping.gpus_on(&e.cluster, id);
            }
            most >= req.per_replica
        })
        .collect()
}

fn commit(
    e: &mut Engine,
    j: JobId,
    req: &Request,
    cands: &[Candidate],
    chosen: &[usize],
    p: Placement,
    stopping: &Waitable,
) {
    e.preemptions += 1;
    let job_name = e.jobs[j as usize].name;
    let mut victims: Vec<RunId> = chosen.iter().map(|i| cands[*i].run).collect();
    // GPUs of stopping jobs the placement uses are claimed like victims'.
    for (id, positions) in &p {
        for &pos in positions {
            if let Owner::Freeing(r) = e.cluster.node(*id).gpus[pos].owner
                && stopping.contains(&r)
            {
                e.cluster.set_owner(*id, pos, Owner::Claimed(r, j));
                let kept_for = e.runs[r as usize].kept_for;
                e.freeing.claimed(req.model, kept_for);
                if !victims.contains(&r) {
                    victims.push(r);
                }
            }
        }
    }
    victims.sort_by_key(|r| e.runs[*r as usize].name);
    for &i in chosen {
        let c = &cands[i];
        e.tree.charge(c.queue, req.model, c.gpus, false);
        e.tree.charge_running(c.queue, req.model, c.gpus, false);
        let grace = e.runs[c.run as usize]
            .job
            .map(|vj| e.jobs[vj as usize].grace)
            .unwrap_or_default();
        let run = &mut e.runs[c.run as usize];
        run.stopping = Stopping::Preempted;
        run.preempted_for = Some(job_name);
        run.ends_at = Some(after(e.now, grace));
        // All of the victim's GPUs are kept for the preemptor in this plan.
        let placement = run.placement.clone();
        placement::apply(&mut e.cluster, &placement, Owner::Claimed(c.run, j));
        let victim_name = run.name;
        let reason = rule_words(e, j, c);
        e.actions.preempt.push(Action::Preempt {
            job: victim_name.to_string(),
            for_job: job_name.to_string(),
            reason,
        });
    }
    for (id, positions) in &p {
        for &pos in positions {
            if e.cluster.node(*id).gpus[pos].owner == Owner::Free {
                e.cluster.set_owner(*id, pos, Owner::Promised(j));
            }
        }
    }
    // Victim lists skip stopping runs at their front from now on.
    let runs = &e.runs;
    for &i in chosen {
        for list in e.victim_lists[cands[i].queue as usize].iter_mut() {
            if list.model != req.model {
                continue;
            }
            while list.head < list.victims.len()
                && runs[list.victims[list.head].run as usize].stopping != Stopping::No
            {
                list.head += 1;
            }
            // Its GPUs leave the list's sums (once they are kept).
            let c = &cands[i];
            if !list.gpu_sums.is_empty() {
                let (_, priority, started, run) = c.key;
                let pos = list.victims.partition_point(|v| {
                    (v.priority, std::cmp::Reverse(v.started), v.run) < (priority, started, run)
                });
                debug_assert_eq!(list.victims.get(pos).map(|v| v.run), Some(c.run));
                let mut at = pos + 1;
                while at < list.gpu_sums.len() {
                    list.gpu_sums[at] -= c.gpus;
                    at += at & at.wrapping_neg();
                }
            }
            // Victims preempted past the front stay in the list, and every
            // merge of candidates steps over them ([`candidates`]): in a
            // storm they pile up. Once they are a quarter of the list, it
            // is compacted (the same victims in the same order; the sums
            // are counted again when asked).
            list.stale += 1;
            if list.stale > 8 && list.stale * 4 > list.victims.len() - list.head {
                let head = list.head;
                let mut kept: Vec<super::Victim> = list.victims[head..]
                    .iter()
                    .filter(|v| runs[v.run as usize].stopping == Stopping::No)
                    .copied()
                    .collect();
                kept.shrink_to_fit();
                list.victims = kept;
                list.head = 0;
                list.stale = 0;
                list.gpu_sums = Vec::new();
            }
        }
    }
    let job = &e.jobs[j as usize];
    if let Some(q) = job.queue {
        e.tree.charge(q, req.model, job.gpus, true);
    }
    e.charged_in_place_of_held(j);
    let reason = reasons::waiting_for_runs(e, &victims);
    e.push_pending(j, reason, "preemption");
}

/// The preempt action's reason.
fn rule_words(e: &Engine, j: JobId, c: &Candidate) -> String {
    let job = &e.jobs[j as usize];
    let run = &e.runs[c.run as usize];
    let Some(victim) = run.job.map(|vj| &e.jobs[vj as usize]) else {
        return String::new();
    };
    let model = run.model.map_or("", |m| e.models.name(m));
    let own = job.queue.map_or("", |q| &*e.tree.get(q).name);
    let theirs = &e.tree.get(c.queue).name;
    // The common words built in place (a storm words tens of thousands).
    let mut out = String::with_capacity(128);
    match c.rule {
        Rule::Priority => {
            out.push_str("priority: ");
            reasons::push_named(&mut out, job);
            out.push_str(" outranks ");
            reasons::push_named(&mut out, victim);
            out.push_str(" in queue ");
            out.push_str(own);
            out
        }
        Rule::LeastAttained => least_attained::words(job, victim, own),
        Rule::Reclaim { usage, guaranteed } => format!(
            "reclaim: queue {theirs} is borrowing {} {model} (uses {usage}, guaranteed {guaranteed}); queue {own} stays within its guarantee",
            usage - guaranteed
        ),
        Rule::LowerPriorityBorrower { usage, guaranteed } => {
            use std::fmt::Write;
            out.push_str("queue ");
            out.push_str(theirs);
            let _ = write!(out, " is borrowing {} ", usage - guaranteed);
            out.push_str(model);
            out.push_str(" and ");
            reasons::push_named(&mut out, victim);
            out.push_str(" has lower priority than ");
            reasons::push_named(&mut out, job);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::observed::Timestamp;
    use proptest::prelude::*;

    /// Queues' running GPUs and guarantees (one model).
    struct Room(Vec<(u64, u64)>);

    impl QueueRoom for Room {
        fn running(&self, q: QueueId, _: u16) -> u64 {
            self.0[q as usize].0
        }

        fn guaranteed(&self, q: QueueId, _: u16) -> u64 {
            self.0[q as usize].1
        }

        fn queue_count(&self) -> usize {
            self.0.len()
        }
    }

    /// The rule as DESIGN states it, victim by victim: every queue a victim
    /// is taken from still borrows before it goes, the set taken in order.
    fn by_the_letter(room: &Room, cands: &[Candidate], set: &[usize], i: usize) -> bool {
        if cands[i].borrowed_from.is_empty() {
            return true;
        }
        let mut all: Vec<usize> = set.iter().copied().chain([i]).collect();
        all.sort_unstable();
        all.dedup();
        let mut removed: HashMap<QueueId, u64> = HashMap::default();
        for x in all {
            for &a in cands[x].borrowed_from.iter() {
                let taken = removed.get(&a).copied().unwrap_or(0);
                if room.running(a, 0).saturating_sub(taken) <= room.guaranteed(a, 0) {
                    return false;
                }
            }
            for &a in cands[x].borrowed_from.iter() {
                *removed.entry(a).or_default() += cands[x].gpus;
            }
        }
        true
    }

    fn candidate(gpus: u64, chain: Vec<QueueId>) -> Candidate {
        Candidate {
            run: 0,
            queue: chain.first().copied().unwrap_or(0),
            gpus,
            borrowed_from: chain.into(),
            meet: Some(0),
            rule: Rule::Priority,
            key: (0, 0, std::cmp::Reverse(Timestamp::default()), 0),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Kept per queue (victims' GPUs, last victim), the rule judges a
        /// candidate beside a growing set exactly as victim by victim.
        #[test]
        fn headroom_judges_as_victim_by_victim(
            room in prop::collection::vec((0u64..40, 0u64..30), 4),
            cands in prop::collection::vec(
                (0u64..12, prop::collection::btree_set(0u32..4, 0..3)),
                1..14,
            ),
            order in prop::collection::vec(0usize..14, 0..14),
        ) {
            let room = Room(room);
            let cands: Vec<Candidate> = cands
                .into_iter()
                .map(|(gpus, chain)| candidate(gpus, chain.into_iter().collect()))
                .collect();
            let mut set: Vec<usize> = Vec::new();
            let mut headroom = Headroom::new(&room, &cands, 0);
            for k in order {
                let k = k % cands.len();
                for i in 0..cands.len() {
                    prop_assert_eq!(
                        headroom.allows(&room, i),
                        by_the_letter(&room, &cands, &set, i),
                        "candidate {} beside {:?}", i, set
                    );
                }
                let whole = set.iter().all(|i| by_the_letter(&room, &cands, &set, *i));
                prop_assert_eq!(headroom.allowed(), whole);
                if !set.contains(&k) {
                    set.push(k);
                }
                headroom.add(&room, k);
                // Fewer victims never break the rule (the victim search's
                // drop loop relies on it).
                if headroom.allowed() {
                    for drop in 0..set.len() {
                        let mut fewer = set.clone();
                        fewer.remove(drop);
                        prop_assert!(Headroom::of(&room, &cands, 0, &[&fewer]).allowed());
                    }
                }
            }
        }
    }
}
