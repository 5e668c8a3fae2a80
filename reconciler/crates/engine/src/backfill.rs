//! Backfill: the first blocked job that fits its quota reserves the GPUs
//! that jobs with time limits free first; a later job may use reserved GPUs
//! only if its own time limit ends before the reservation starts.

use model::observed::Timestamp;
use model::time::after;

use super::Engine;
use super::cluster::{Gpu, NodeState, Owner};
use super::ids::{JobId, ModelId, NodeId, RunId};
use super::jobs::JobInfo;
use super::order::{name_prefix, time_key};
use super::placement::{self, Placement, Request};

/// GPUs kept free for the first blocked job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The job it is for.
    pub job: JobId,
    /// The model reserved.
    pub model: ModelId,
    /// When the job is expected to start.
    pub start: Timestamp,
    /// Nodes of the expected placement.
    pub nodes: Vec<NodeId>,
}

/// Something that holds GPUs and ends at a known time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Holder {
    Run(RunId),
    Placed(JobId),
}

/// Finds when and where job `j` could start as time-limited jobs end, and
/// reserves the currently free GPUs of that placement.
pub fn reserve(e: &mut Engine, j: JobId, req: &Request) -> Option<Reservation> {
    let mut events: Vec<(Timestamp, &str, Holder)> = Vec::new();
    for (r, run) in e.runs.iter().enumerate() {
        if run.model != Some(req.model) {
            continue;
        }
        let promised_elsewhere = run
            .preempted_for
            .is_some_and(|name| name != e.jobs[j as usize].name);
        if let Some(end) = run.ends_at
            && !promised_elsewhere
        {
            events.push((end.max(e.now), run.name, Holder::Run(r as RunId)));
        }
    }
    for (k, m, _) in &e.placed {
        if *m != req.model {
            continue;
        }
        let job = &e.jobs[*k as usize];
        if let Some(limit) = job.time_limit {
            events.push((after(e.now, limit), job.name, Holder::Placed(*k)));
        }
    }
    if events.is_empty() {
        return None;
    }
    if super::horizon::collecting() {
        note_event_horizon(e, &events);
    }
    let events = sorted(e, req.model, events);
    // Rank of each holder in end order: a GPU is usable for a prefix of the
    // events when its holder's rank is below the prefix.
    let mut run_rank: Vec<usize> = vec![usize::MAX; e.runs.len()];
    let mut placed_rank: Vec<usize> = vec![usize::MAX; e.jobs.len()];
    // The nodes of the events, event after event (event `k`'s:
    // `event_nodes[event_ends[k]..event_ends[k + 1]]`).
    let mut event_nodes: Vec<NodeId> = Vec::new();
    let mut event_ends: Vec<usize> = Vec::with_capacity(events.len() + 1);
    event_ends.push(0);
    for (rank, (_, _, holder)) in events.iter().enumerate() {
        let placement: &[(NodeId, Vec<usize>)] = match holder {
            Holder::Run(r) => {
                run_rank[*r as usize] = rank;
                &e.runs[*r as usize].placement
            }
            Holder::Placed(k) => {
                placed_rank[*k as usize] = rank;
                e.placed
                    .iter()
                    .find(|(j, _, _)| j == k)
                    .map_or(&[], |(_, _, p)| p.as_slice())
            }
        };
        event_nodes.extend(placement.iter().map(|(n, _)| *n));
        event_ends.push(event_nodes.len());
    }
    // Per node: the shortest prefix whose nodes hold it (the free nodes: 0;
    // none: `usize::MAX`); the nodes a prefix holds are those listed with a
    // prefix up to its own, in node order (sorted, each once).
    let mut first_prefix: Vec<usize> = vec![usize::MAX; e.cluster.nodes.len()];
    for n in e.cluster.candidates(req.model, 1) {
        first_prefix[n as usize] = 0;
    }
    for k in 0..events.len() {
        for &n in &event_nodes[event_ends[k]..event_ends[k + 1]] {
            let first = &mut first_prefix[n as usize];
            *first = (*first).min(k + 1);
        }
    }
    let listed: Vec<(NodeId, usize)> = first_prefix
        .iter()
        .enumerate()
        .filter(|(_, first)| **first != usize::MAX)
        .map(|(n, first)| (n as NodeId, *first))
        .collect();
    let feasible = |prefix: usize| -> Option<Placement> {
        let nodes: Vec<NodeId> = listed
            .iter()
            .filter(|(_, first)| *first <= prefix)
            .map(|(n, _)| *n)
            .collect();
        let usable = |n: &NodeState, _: usize, g: &Gpu| {
            n.schedulable
                && match g.owner {
                    Owner::Free => true,
                    Owner::Running(r) | Owner::Freeing(r) => run_rank[r as usize] < prefix,
                    Owner::Placed(k) => placed_rank[k as usize] < prefix,
                    _ => false,
                }
        };
        placement::place_scan(&e.cluster, &nodes, req, &usable)
    };
    feasible(events.len())?;
    // Feasibility only grows with the prefix: binary search the shortest one.
    let (mut lo, mut hi) = (0usize, events.len());
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if feasible(mid).is_some() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let p = feasible(hi)?;
    let start = events[hi - 1].0;
    let mut reserved_nodes = Vec::new();
    for (id, positions) in &p {
        for &pos in positions {
            if e.cluster.node(*id).gpus[pos].owner == Owner::Free {
                e.cluster.set_owner(*id, pos, Owner::Reserved);
            }
        }
        if !reserved_nodes.contains(id) {
            reserved_nodes.push(*id);
        }
    }
    reserved_nodes.sort_unstable();
    Some(Reservation {
        job: j,
        model: req.model,
        start,
        nodes: reserved_nodes,
    })
}

/// How many event orders [`sorted`] keeps per model (plans reserve for a
/// few jobs, whose event lists differ).
const KEPT_ORDERS: usize = 4;

/// `events` (of model `m`) sorted as `(end, name, holder)` tuples are: in
/// an order an earlier call found for as many events when it still sorts
/// them strictly (a permutation then: each place once), else by a packed
/// key of the end and the name's first bytes, names and holders breaking
/// the remaining ties. A total order (each holder listed once): a stable
/// sort's, which debug builds compare.
fn sorted<'n>(
    e: &mut Engine,
    m: ModelId,
    events: Vec<(Timestamp, &'n str, Holder)>,
) -> Vec<(Timestamp, &'n str, Holder)> {
    let kept = &mut e.resolved.event_orders;
    let strictly = |order: &[u32]| {
        order.len() == events.len()
            && order.iter().all(|&k| (k as usize) < events.len())
            && order
                .windows(2)
                .all(|w| events[w[0] as usize] < events[w[1] as usize])
    };
    let order = match kept
        .iter()
        .position(|(model, order)| *model == m && strictly(order))
    {
        Some(at) => {
            // The latest last.
            let found = kept.remove(at);
            kept.push(found);
            &kept[kept.len() - 1].1
        }
        None => {
            let mut keyed: Vec<(u128, u128, u32)> = events
                .iter()
                .enumerate()
                .map(|(k, (at, name, _))| (time_key(*at), name_prefix(name), k as u32))
                .collect();
            keyed.sort_unstable_by(|a, b| {
                (a.0, a.1).cmp(&(b.0, b.1)).then_with(|| {
                    let (x, y) = (&events[a.2 as usize], &events[b.2 as usize]);
                    (x.1, x.2).cmp(&(y.1, y.2))
                })
            });
            if let Some(oldest) = kept
                .iter()
                .position(|(model, _)| *model == m)
                .filter(|_| kept.iter().filter(|(model, _)| *model == m).count() >= KEPT_ORDERS)
            {
                kept.remove(oldest);
            }
            kept.push((m, keyed.iter().map(|(_, _, k)| *k).collect()));
            &kept[kept.len() - 1].1
        }
    };
    let found: Vec<(Timestamp, &str, Holder)> = order.iter().map(|k| events[*k as usize]).collect();
    #[cfg(debug_assertions)]
    {
        let mut plain = events;
        plain.sort();
        debug_assert_eq!(found, plain, "keyed event order differs");
    }
    found
}

/// Whether a request would fit on free plus reserved GPUs of the reservation's
/// model: then the reservation is what keeps the job out.
pub fn blocked_by_reservation(e: &Engine, req: &Request) -> bool {
    e.reservation
        .as_ref()
        .filter(|r| r.model == req.model)
        .and_then(|res| place_with_reserved(e, res, req))
        .is_some()
}

/// Places a job with a time limit that ends before the reservation starts on
/// free or reserved GPUs.
pub fn place_on_reserved(e: &Engine, req: &Request, job: &JobInfo) -> Option<Placement> {
    let res = e.reservation.as_ref().filter(|r| r.model == req.model)?;
    if !ends_before_kept(e, job, res.start) {
        return None;
    }
    place_with_reserved(e, res, req)
}

/// Whether `job`, started at `now`, reaches its time limit by `start`.
pub fn ends_before(now: Timestamp, job: &JobInfo, start: Timestamp) -> bool {
    job.time_limit.is_some_and(|limit| {
        let before = after(now, limit) <= start;
        if before {
            // Until `now + limit` passes the start (a start that moves with
            // `now` has noted `now` already: [`note_event_horizon`]).
            super::horizon::note_ends_before(start, limit);
        }
        before
    })
}

/// [`ends_before`] at the engine's `now`, found once per time limit while
/// the start stays the same (which asks it of many jobs with few distinct limits;
/// the horizon noted the first time holds for the others). Debug builds
/// compare with [`ends_before`].
pub(crate) fn ends_before_kept(e: &Engine, job: &JobInfo, start: Timestamp) -> bool {
    let Some(limit) = job.time_limit else {
        return false;
    };
    let mut memo = e.ends_before_memo.borrow_mut();
    let (at, known) = &mut *memo;
    if *at != Some(start) {
        *at = Some(start);
        known.clear();
    }
    if let Some(&before) = known.get(&limit) {
        debug_assert_eq!(
            before,
            ends_before(e.now, job, start),
            "a kept ends_before differs"
        );
        return before;
    }
    let before = ends_before(e.now, job, start);
    known.insert(limit, before);
    before
}

/// Notes when the reservation made from `events` could change as time
/// passes (the plan's horizon): when the first end still ahead is reached
/// (it then counts as `now`), and at once when any end moves with `now`
/// (a job placed in this plan, a stop whose end has passed or that starts
/// in this plan), since the order of the events may then change.
fn note_event_horizon(e: &Engine, events: &[(Timestamp, &str, Holder)]) {
    for &(at, _, holder) in events {
        let moves = match holder {
            Holder::Placed(_) => true,
            Holder::Run(r) => {
                let run = &e.runs[r as usize];
                let grace = run.job.map(|j| e.jobs[j as usize].grace);
                at <= e.now
                    || (run.stopping != super::Stopping::No
                        && grace.is_some_and(|g| at == after(e.now, g)))
            }
        };
        if moves {
            super::horizon::note_now();
            return;
        }
        super::horizon::note(at);
    }
}

/// A placement on free GPUs and the reservation's GPUs.
fn place_with_reserved(e: &Engine, res: &Reservation, req: &Request) -> Option<Placement> {
    let nodes = e
        .cluster
        .free_nodes_and(req.model, res.nodes.iter().copied());
    let usable = |n: &NodeState, _: usize, g: &Gpu| {
        n.schedulable && matches!(g.owner, Owner::Free | Owner::Reserved)
    };
    placement::place_scan(&e.cluster, &nodes, req, &usable)
}
