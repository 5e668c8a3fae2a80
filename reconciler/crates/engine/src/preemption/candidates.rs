//! Victim candidates: who a preemptor may take (the rules of
//! [`super`]'s module documentation), in victim order, and the cheap
//! bounds [`super::find`] checks before listing them.

use model::observed::Timestamp;

use super::super::ids::{JobId, QueueId};
use super::super::placement::Request;
use super::super::{Engine, Stopping};
use super::{Candidate, CandidateKey, CandidateList, Rule, least_attained};

/// [`candidates`], remembered until the next preemption (jobs of one queue
/// and priority with other shapes see the same list).
#[allow(clippy::too_many_arguments)]
pub(super) fn candidates_cached(
    e: &mut Engine,
    j: JobId,
    q: QueueId,
    req: &Request,
    reclaim: Within,
    own_path: &[bool],
    others: &[QueueId],
    limit: usize,
) -> std::rc::Rc<CandidateList> {
    let job = &e.jobs[j as usize];
    let key: CandidateKey = (
        q,
        job.priority,
        e.started_before(j),
        reclaim,
        req.model,
        limit,
        least_attained::tier_key(job),
    );
    if let Some((at, list)) = e.candidate_memo.get(&key)
        && *at == e.preemptions
    {
        return list.clone();
    }
    let (cands, more) = candidates(e, j, q, req, reclaim, own_path, others, limit);
    let list = std::rc::Rc::new(CandidateList { cands, more });
    // Lists of an earlier preemption count are never read again: dropped,
    // or a storm keeps tens of thousands of them (all entries share one
    // count, as each insert drops the older ones). A new map, not a
    // cleared one: clearing costs its largest size ever, every time.
    if e.candidate_memo
        .values()
        .next()
        .is_some_and(|(at, _)| *at != e.preemptions)
    {
        e.candidate_memo = Default::default();
    }
    e.candidate_memo.insert(key, (e.preemptions, list.clone()));
    list
}

/// Every index of `cands`.
pub(super) fn all_of(cands: &[Candidate]) -> Vec<usize> {
    (0..cands.len()).collect()
}

/// How many candidates a search may look at, at most.
pub(super) fn max_candidates(gpus: u64) -> usize {
    (1024usize).max(16 * gpus as usize)
}

/// `on_path[x]`: whether queue `x` is `q` or one of its ancestors.
pub(super) fn on_path(e: &Engine, q: QueueId) -> Vec<bool> {
    let mut marks = vec![false; e.tree.queues.len()];
    for a in e.tree.path(q) {
        marks[a as usize] = true;
    }
    marks
}

/// The queues other than leaf `q` with victims of model `m` that a
/// preemptor of `q` may take (every queue from theirs up to below the
/// common ancestor borrows, [`chain_borrows`]), in id order. What a queue
/// runs only falls during a plan (as victims are chosen), so a queue that
/// stops borrowing never borrows again: the list found for a leaf is
/// narrowed after each preemption, not found again among every queue
/// (debug builds compare with a fresh search).
pub(super) fn cross_queue_sources(
    e: &mut Engine,
    q: QueueId,
    m: u16,
    own_path: &[bool],
) -> std::rc::Rc<[QueueId]> {
    let fresh = |e: &Engine, from: &mut dyn Iterator<Item = QueueId>| -> std::rc::Rc<[QueueId]> {
        from.filter(|&vq| {
            vq != q
                && e.victim_lists[vq as usize].iter().any(|l| l.model == m)
                && chain_borrows(e, vq, m, own_path)
        })
        .collect()
    };
    // A list no queue left is kept as it was (the same list: what
    // [`upper_bound`] remembers its share of the other queues by).
    let list = match e.source_memo.get(&(q, m)) {
        Some((at, list)) if *at == e.preemptions => return list.clone(),
        Some((_, list)) => {
            let narrowed = fresh(e, &mut list.iter().copied());
            if narrowed.len() == list.len() {
                list.clone()
            } else {
                narrowed
            }
        }
        None => fresh(e, &mut (0..e.victim_lists.len() as QueueId)),
    };
    debug_assert_eq!(
        list,
        fresh(e, &mut (0..e.victim_lists.len() as QueueId)),
        "a queue borrowed again"
    );
    e.source_memo.insert((q, m), (e.preemptions, list.clone()));
    list
}

/// Whether every queue a cross-queue victim of `vq` would be taken from
/// (its leaf up to below the common ancestor with the preemptor) borrows.
fn chain_borrows(e: &Engine, vq: QueueId, m: u16, own_path: &[bool]) -> bool {
    e.tree
        .path(vq)
        .take_while(|a| !own_path[*a as usize])
        .all(|a| e.tree.running(a, m) > e.tree.guaranteed(a, m))
}

/// Queues a cross-queue victim of `vq` would be taken from (its leaf up to
/// below the common ancestor with the preemptor in leaf `q`), and the
/// preemptor's queues ([`Within`]'s bits) that must stay within their
/// guarantees for it to reclaim from `vq` ([`reclaims`]): the tree's shape
/// only, found once per pair of queues in a plan.
fn chain_of(
    e: &Engine,
    q: QueueId,
    vq: QueueId,
    own_path: &[bool],
) -> (std::rc::Rc<[QueueId]>, Within) {
    let mut memo = e.chain_memo.borrow_mut();
    let found = memo.entry((q, vq)).or_insert_with(|| {
        let chain: std::rc::Rc<[QueueId]> = e
            .tree
            .path(vq)
            .take_while(|a| !own_path[*a as usize])
            .collect();
        (chain, below_common(e, q, vq, own_path))
    });
    found.clone()
}

/// Per queue on the preemptor's path (bit 0: its leaf, then up): whether it
/// stays within its guarantee with the preemptor's GPUs added.
pub(super) type Within = u64;

/// [`Within`] for a job of `gpus` GPUs of model `m` in leaf `q`.
pub(super) fn within_guarantees(e: &Engine, q: QueueId, m: u16, gpus: u64) -> Within {
    e.tree
        .path(q)
        .take(64)
        .enumerate()
        .filter(|(_, a)| e.tree.usage(*a, m) + gpus <= e.tree.guaranteed(*a, m))
        .fold(0, |mask, (i, _)| mask | (1 << i))
}

/// Whether the preemptor in leaf `q` reclaims from queue `vq` (rule 5b):
/// each of its queues below the common ancestor with `vq` stays within its
/// guarantee — the whole subtree, not only the leaf.
fn reclaims(e: &Engine, q: QueueId, vq: QueueId, within: Within, own_path: &[bool]) -> bool {
    let needed = below_common(e, q, vq, own_path);
    within & needed == needed
}

/// The bits of [`Within`] for the preemptor's queues (leaf `q` and up)
/// below its common ancestor with queue `vq` (all of them when there is
/// none); `own_path` marks the preemptor's path.
fn below_common(e: &Engine, q: QueueId, vq: QueueId, own_path: &[bool]) -> Within {
    let common = e.tree.path(vq).find(|a| own_path[*a as usize]);
    let below = match common {
        Some(c) => e.tree.path(q).position(|a| a == c).unwrap_or(0),
        None => e.tree.path(q).count(),
    }
    .min(64);
    if below >= 64 {
        u64::MAX
    } else {
        (1u64 << below) - 1
    }
}

/// At most how many GPUs preemption could free for the job (plus free ones):
/// a cheap bound from the per-queue victim index, without building
/// candidates; and at most how much usage it could take off each queue of
/// the job's path (the leaf is 0: [`super::super::quota::QueueTree::fits_releasing`]),
/// each victim's where its queue meets the path.
pub(super) fn upper_bound(
    e: &Engine,
    job: &super::super::jobs::JobInfo,
    q: QueueId,
    m: u16,
    reclaim: Within,
    own_path: &[bool],
    others: &std::rc::Rc<[QueueId]>,
) -> (u64, Vec<u64>) {
    let path: Vec<QueueId> = e.tree.path(q).collect();
    // The other queues' share depends on the sources (which only
    // [`cross_queue_sources`] changes, into a new list), the preemptor's
    // priority and where it reclaims: the per-queue victim index is fixed
    // for the plan, and every source borrows while its list stands.
    // (Without other sources there is nothing to remember.)
    let key = (q, m, job.priority, reclaim);
    let known = if others.is_empty() {
        Some((0, vec![0u64; path.len()]))
    } else {
        e.bound_memo
            .borrow()
            .get(&key)
            .filter(|(sources, _, _)| std::rc::Rc::ptr_eq(sources, others))
            .map(|(_, bound, released)| (*bound, released.clone()))
    };
    let (mut bound, mut released) = known.unwrap_or_else(|| {
        let mut released = vec![0u64; path.len()];
        let mut bound = 0;
        for &vq in others.iter() {
            bound += released_by(e, job, q, vq, m, reclaim, own_path, &path, &mut released);
        }
        e.bound_memo
            .borrow_mut()
            .insert(key, (others.clone(), bound, released.clone()));
        (bound, released)
    });
    bound += e.cluster.free_total.get(m as usize).copied().unwrap_or(0);
    bound += released_by(e, job, q, q, m, reclaim, own_path, &path, &mut released);
    #[cfg(debug_assertions)]
    {
        let mut plain = vec![0u64; path.len()];
        let mut total = e.cluster.free_total.get(m as usize).copied().unwrap_or(0);
        for vq in std::iter::once(q).chain(others.iter().copied()) {
            total += released_by(e, job, q, vq, m, reclaim, own_path, &path, &mut plain);
        }
        debug_assert_eq!((bound, &released), (total, &plain), "the sources' share");
    }
    (bound, released)
}

/// [`upper_bound`]'s share of queue `vq` (the preemptor's leaf `q`, or
/// another leaf whose victims it may take), added to `released` where its
/// path meets the preemptor's (`path`).
#[allow(clippy::too_many_arguments)]
fn released_by(
    e: &Engine,
    job: &super::super::jobs::JobInfo,
    q: QueueId,
    vq: QueueId,
    m: u16,
    reclaim: Within,
    own_path: &[bool],
    path: &[QueueId],
    released: &mut [u64],
) -> u64 {
    let leaf_reclaims = reclaim & 1 != 0;
    let index = &e.victim_index[vq as usize];
    let Some(by_priority) = index.iter().find(|(model, _)| *model == m).map(|(_, v)| v) else {
        return 0;
    };
    // Another leaf's victims below the job's priority bound it when the
    // job does not reclaim from it ([`skips_below`]): none, nothing to
    // add, told before walking where the paths meet.
    if vq != q
        && !leaf_reclaims
        && by_priority
            .first()
            .is_none_or(|(pr, _)| *pr >= job.priority)
    {
        debug_assert!(skips_below(e, q, vq, reclaim, own_path));
        return 0;
    }
    let below = |p: i32| {
        let k = by_priority.partition_point(|(pr, _)| *pr < p);
        if k == 0 { 0 } else { by_priority[k - 1].1 }
    };
    let meet = meeting(e, vq, m, own_path, path, reclaim);
    let gpus = if vq == q {
        match job.attained {
            Some(a) => least_attained::bound(e, q, m, job.priority, a.tier),
            None => below(job.priority),
        }
    } else if e.tree.running(vq, m) > e.tree.guaranteed(vq, m) && meet.borrows {
        if meet.reclaims {
            by_priority.last().map_or(0, |(_, total)| *total)
        } else {
            below(job.priority)
        }
    } else {
        0
    };
    if let Some(k) = meet.at {
        released[k] += gpus;
    }
    gpus
}

/// Whether a preemptor in leaf `q` whose leaf is not within its guarantee
/// (bit 0 of `within` clear) takes only victims below its priority from
/// another leaf `vq`: it never reclaims from it, since every queue of its
/// path below the common ancestor must stay within its guarantee for that
/// ([`reclaims`]), its leaf among them (jobs sit in leaves: the common
/// ancestor of two leaves is above both). What lets [`candidates`] and
/// [`upper_bound`] leave out, unlooked at, a leaf with no victim below the
/// preemptor's priority.
fn skips_below(e: &Engine, q: QueueId, vq: QueueId, within: Within, own_path: &[bool]) -> bool {
    within & 1 == 0 && q != vq && !reclaims(e, q, vq, within, own_path)
}

/// Where the path of victim queue `vq` meets the path of the preemptor's
/// leaf `q` (`path`, leaf first; `own_path` marks it), found in one walk:
/// what [`chain_borrows`], [`reclaims`] and [`release_on_path`] each walk
/// it for (debug builds compare with them).
struct Meeting {
    /// The place on `path` where the paths meet (the usage leaves there).
    at: Option<usize>,
    /// [`chain_borrows`].
    borrows: bool,
    /// [`reclaims`].
    reclaims: bool,
}

fn meeting(
    e: &Engine,
    vq: QueueId,
    m: u16,
    own_path: &[bool],
    path: &[QueueId],
    within: Within,
) -> Meeting {
    let mut borrows = true;
    let mut at = None;
    for a in e.tree.path(vq) {
        if own_path[a as usize] {
            at = path.iter().position(|p| *p == a);
            break;
        }
        borrows = borrows && e.tree.running(a, m) > e.tree.guaranteed(a, m);
    }
    let below = at.unwrap_or(path.len()).min(64);
    let needed: u64 = if below >= 64 {
        u64::MAX
    } else {
        (1u64 << below) - 1
    };
    let meet = Meeting {
        at,
        borrows,
        reclaims: within & needed == needed,
    };
    #[cfg(debug_assertions)]
    {
        debug_assert_eq!(meet.borrows, chain_borrows(e, vq, m, own_path));
        if let Some(&q) = path.first() {
            debug_assert_eq!(meet.reclaims, reclaims(e, q, vq, within, own_path));
        }
        let mut released = vec![0u64; path.len()];
        release_on_path(e, vq, path, &mut released, 1);
        debug_assert_eq!(released.iter().position(|r| *r > 0), meet.at);
    }
    meet
}

/// At most how many GPUs the candidates of job `j` (leaf `q`, model `m`)
/// hold, all of them, and how much usage they would take off each queue of
/// its path (as [`upper_bound`]): the victims of its sources that are not
/// stopping, below its priority where the rule says so, started before it
/// was first seen for rule 5c — what [`candidates`] lists, its tiers and
/// rule (d)'s filter aside (both only take victims out). Exact sums per
/// priority, not a walk over the victims.
pub(super) fn eligible_bound(
    e: &mut Engine,
    j: JobId,
    q: QueueId,
    m: u16,
    reclaim: Within,
    own_path: &[bool],
    others: &[QueueId],
) -> (u64, Vec<u64>) {
    let path: Vec<QueueId> = e.tree.path(q).collect();
    let mut released = vec![0u64; path.len()];
    let mut total = 0;
    let (priority, first_seen, las) = {
        let job = &e.jobs[j as usize];
        (job.priority, job.first_seen, job.attained.is_some())
    };
    for vq in std::iter::once(q).chain(others.iter().copied()) {
        let meet = meeting(e, vq, m, own_path, &path, reclaim);
        let (below, started_before) = if vq == q {
            (if las { None } else { Some(priority) }, None)
        } else if e.tree.running(vq, m) <= e.tree.guaranteed(vq, m) || !meet.borrows {
            continue;
        } else if meet.reclaims {
            (None, None)
        } else {
            (Some(priority), first_seen)
        };
        let Some(list) = e.victim_lists[vq as usize]
            .iter_mut()
            .find(|list| list.model == m)
        else {
            continue;
        };
        let gpus = eligible_gpus(list, &e.runs, below, started_before);
        total += gpus;
        if let Some(k) = meet.at {
            released[k] += gpus;
        }
    }
    (total, released)
}

/// Adds `gpus` of queue `vq`'s usage to `released` where `vq`'s path meets
/// `path` (the preemptor's, leaf first): where the usage leaves it.
#[cfg(debug_assertions)]
pub(super) fn release_on_path(
    e: &Engine,
    vq: QueueId,
    path: &[QueueId],
    released: &mut [u64],
    gpus: u64,
) {
    if let Some(k) = e
        .tree
        .path(vq)
        .find_map(|a| path.iter().position(|p| *p == a))
    {
        released[k] += gpus;
    }
}

/// GPUs of the victims of `list` not stopping, of priority below `below`
/// and started before `started_before` (each when given): per priority,
/// those started before it are the last ones (most recent first).
fn eligible_gpus(
    list: &mut super::super::VictimList,
    runs: &[super::super::Run],
    below: Option<i32>,
    started_before: Option<Timestamp>,
) -> u64 {
    if list.gpu_sums.is_empty() {
        let n = list.victims.len();
        let tree = &mut list.gpu_sums;
        tree.resize(n + 1, 0);
        for (k, v) in list.victims.iter().enumerate() {
            let run = &runs[v.run as usize];
            let i = k + 1;
            if run.stopping == Stopping::No {
                tree[i] += run.gpus;
            }
            let parent = i + (i & i.wrapping_neg());
            if parent <= n {
                tree[parent] += tree[i];
            }
        }
    }
    let (victims, tree) = (&list.victims, &list.gpu_sums);
    let before = |k: usize| -> u64 {
        let (mut sum, mut i) = (0, k);
        while i > 0 {
            sum += tree[i];
            i &= i - 1;
        }
        sum
    };
    let end = below.map_or(victims.len(), |b| {
        victims.partition_point(|v| v.priority < b)
    });
    let gpus = match started_before {
        None => before(end),
        Some(t) => {
            let (mut gpus, mut pos) = (0, 0);
            while pos < end {
                let p = victims[pos].priority;
                let block_end = pos + victims[pos..end].partition_point(|v| v.priority == p);
                let cut = pos + victims[pos..block_end].partition_point(|v| v.started >= t);
                gpus += before(block_end) - before(cut);
                pos = block_end;
            }
            gpus
        }
    };
    #[cfg(debug_assertions)]
    {
        let walked: u64 = victims[..end]
            .iter()
            .filter(|v| started_before.is_none_or(|t| v.started < t))
            .map(|v| &runs[v.run as usize])
            .filter(|r| r.stopping == Stopping::No)
            .map(|r| r.gpus)
            .sum();
        debug_assert_eq!(gpus, walked, "sums per priority");
    }
    gpus
}

/// The first `limit` candidates in victim order — borrowing queues first,
/// then lower priority, most recently started, name — and whether there are
/// more. Merges the per-queue victim lists, which are already in that order.
#[allow(clippy::too_many_arguments)]
pub(super) fn candidates(
    e: &Engine,
    j: JobId,
    q: QueueId,
    req: &Request,
    reclaim: Within,
    own_path: &[bool],
    others: &[QueueId],
    limit: usize,
) -> (Vec<Candidate>, bool) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let job = &e.jobs[j as usize];
    let m = req.model;
    // Eligible queues, each split by tier: borrowed usage whose removal
    // leaves its queues at or above their guarantees (0), borrowed usage
    // that straddles a guarantee (1), guaranteed usage of the own leaf (2).
    struct Source<'l> {
        queue: QueueId,
        chain: std::rc::Rc<[QueueId]>,
        tier: u8,
        /// Tier 0 takes victims of at most this many GPUs, tier 1 the rest.
        headroom: Option<u64>,
        rule: Rule,
        below: Option<i32>,
        /// Rule 5c takes only jobs that started before the preemptor was
        /// first seen: one placed while it waited was placed by fair share
        /// ahead of it, and preempting it for priority alone would thrash.
        started_before: Option<Timestamp>,
        /// Rule (d): the preemptor's (priority, tier) in a `least-attained`
        /// leaf (its own leaf's source only).
        las: Option<(i32, u8)>,
        meet: Option<u32>,
        list: &'l [super::super::Victim],
    }
    // The preemptor's path, leaf first: where each source's path meets it.
    let path: Vec<QueueId> = e.tree.path(q).collect();
    let meet_of = |vq: QueueId| -> Option<u32> {
        e.tree
            .path(vq)
            .find_map(|a| path.iter().position(|p| *p == a))
            .map(|k| k as u32)
    };
    let mut sources: Vec<Source> = Vec::with_capacity(2 * (others.len() + 1));
    let no_chain: std::rc::Rc<[QueueId]> = std::rc::Rc::new([]);
    let leaf_reclaims = reclaim & 1 != 0;
    // The own leaf and the queues whose victims it may take across queues
    // (the order of the sources does not matter: victims are merged by
    // tier and rank, unique per victim).
    for vq in std::iter::once(q).chain(others.iter().copied()) {
        let lists = &e.victim_lists[vq as usize];
        let Some(victims) = lists.iter().find(|list| list.model == m) else {
            continue;
        };
        let list = &victims.victims[victims.head..];
        // Another leaf's list gives only victims below the job's priority
        // when the job does not reclaim from it ([`skips_below`]): one whose
        // first victim is not below it is left out before its chain is
        // looked at (as the priority bound below would).
        if vq != q && !leaf_reclaims && list.first().is_none_or(|v| v.priority >= job.priority) {
            debug_assert!(skips_below(e, q, vq, reclaim, own_path));
            continue;
        }
        let usage = e.tree.running(vq, m);
        let guaranteed = e.tree.guaranteed(vq, m);
        let borrowing = usage > guaranteed;
        let las = job
            .attained
            .filter(|_| vq == q)
            .map(|a| (job.priority, a.tier));
        // How much the queues a victim is taken from borrow (for the own
        // leaf: the leaf itself), when they do.
        let (chain, rule, below, started_before, headroom, meet) = if vq == q {
            // Rule (d) takes victims of its priority too (filtered below).
            let below = if las.is_some() {
                None
            } else {
                Some(job.priority)
            };
            let headroom = borrowing.then(|| usage - guaranteed);
            (
                no_chain.clone(),
                Rule::Priority,
                below,
                None,
                headroom,
                Some(0),
            )
        } else if !borrowing {
            continue;
        } else {
            // Every queue of the chain borrows, or no victim of `vq` is
            // taken ([`chain_borrows`]); tier 0's headroom is the least any
            // of them borrows. One walk for both.
            let (chain, needed) = chain_of(e, q, vq, own_path);
            let mut headroom = u64::MAX;
            let mut borrows = true;
            for &a in chain.iter() {
                let (running, guaranteed) = (e.tree.running(a, m), e.tree.guaranteed(a, m));
                if running <= guaranteed {
                    borrows = false;
                    break;
                }
                headroom = headroom.min(running - guaranteed);
            }
            debug_assert_eq!(borrows, chain_borrows(e, vq, m, own_path));
            if !borrows {
                continue;
            }
            debug_assert!(!chain.is_empty());
            let reclaimed = reclaim & needed == needed;
            debug_assert_eq!(reclaimed, reclaims(e, q, vq, reclaim, own_path));
            // The mask's width is where the paths meet (the path's length
            // when they do not), up to 64: walked beyond.
            let meet = if needed == u64::MAX {
                meet_of(vq)
            } else {
                Some(needed.trailing_ones()).filter(|&k| (k as usize) < path.len())
            };
            if reclaimed {
                (
                    chain,
                    Rule::Reclaim { usage, guaranteed },
                    None,
                    None,
                    Some(headroom),
                    meet,
                )
            } else {
                (
                    chain,
                    Rule::LowerPriorityBorrower { usage, guaranteed },
                    Some(job.priority),
                    job.first_seen,
                    Some(headroom),
                    meet,
                )
            }
        };
        // A list whose first victim is at or above the priority bound has
        // none to give (lists are in priority order): left out unmerged.
        if list
            .first()
            .is_none_or(|v| below.is_some_and(|b| v.priority >= b))
        {
            continue;
        }
        debug_assert_eq!(meet, meet_of(vq), "where the paths meet");
        let Some(headroom) = headroom else {
            sources.push(Source {
                queue: vq,
                chain,
                tier: 2,
                headroom: None,
                rule,
                below,
                started_before,
                las,
                meet,
                list,
            });
            continue;
        };
        // Tier 0 takes runs of at most `headroom` GPUs, tier 1 the others: a
        // tier no run of the list falls in is left out.
        let (fewest, most) = victims.gpus_range;
        for tier in [0, 1] {
            if (tier == 0 && fewest > headroom) || (tier == 1 && most <= headroom) {
                continue;
            }
            sources.push(Source {
                queue: vq,
                chain: chain.clone(),
                tier,
                headroom: Some(headroom),
                rule,
                below,
                started_before,
                las,
                meet,
                list,
            });
        }
    }
    // The tier, then the victim's rank ([`super::super::Victim::rank`]: priority,
    // most recent start, run) in one number, unique per victim; then where
    // it is (source, position), all in one number to compare.
    type Key = u128;
    let key = |src: usize, pos: usize| -> Key {
        let v = &sources[src].list[pos];
        u128::from(sources[src].tier) << 96
            | u128::from(v.rank) << 64
            | (src as u128) << 32
            | pos as u128
    };
    // The next victim of a source at or after `from`: lists are in priority
    // order, so the first one at or above the priority bound ends it.
    // Victims preempted earlier in this plan are stepped over here, not
    // merged and dropped: a storm leaves many in the lists.
    let next = |src: usize, from: usize| -> Option<usize> {
        let s = &sources[src];
        (from..s.list.len())
            .take_while(|pos| s.below.is_none_or(|b| s.list[*pos].priority < b))
            .filter(|pos| s.started_before.is_none_or(|t| s.list[*pos].started < t))
            .filter(|pos| {
                s.las
                    .is_none_or(|las| least_attained::may_take(las, &s.list[*pos]))
            })
            .find(|pos| {
                let run = &e.runs[s.list[*pos].run as usize];
                run.stopping == Stopping::No
                    && match s.headroom {
                        None => true,
                        Some(h) => (run.gpus <= h) == (s.tier == 0),
                    }
            })
    };
    // Built in one go (keys are unique: the order of pops is the same).
    let mut heap: BinaryHeap<Reverse<Key>> = (0..sources.len())
        .filter_map(|src| next(src, 0).map(|pos| Reverse(key(src, pos))))
        .collect::<Vec<_>>()
        .into();
    // (A widened list reaches 2,048: room for it at once, not a copy.)
    let mut out = Vec::with_capacity(limit.min(1 << 12));
    while let Some(mut top) = heap.peek_mut() {
        let Reverse(at) = *top;
        let (src, pos) = ((at >> 32) as u32 as usize, at as u32 as usize);
        // The source's next victim takes its place (one sift), or the
        // source leaves the heap.
        match next(src, pos + 1) {
            Some(pos) => *top = Reverse(key(src, pos)),
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        let r = sources[src].list[pos].run;
        let run = &e.runs[r as usize];
        debug_assert_eq!(run.stopping, Stopping::No);
        if out.len() == limit {
            return (out, true);
        }
        let s = &sources[src];
        let v = &s.list[pos];
        out.push(Candidate {
            run: r,
            queue: s.queue,
            gpus: run.gpus,
            borrowed_from: s.chain.clone(),
            meet: s.meet,
            rule: match s.las {
                Some((priority, _)) if v.priority == priority => Rule::LeastAttained,
                _ => s.rule,
            },
            key: (s.tier, v.priority, Reverse(v.started), r),
        });
    }
    (out, false)
}
