//! Backfill: the first blocked job that fits its quota reserves the GPUs
//! that jobs with time limits free first; a later job may use reserved GPUs
//! only if its own time limit ends before the reservation starts.

use model::observed::Timestamp;
use model::time::after;

use super::Engine;
use super::cluster::{Gpu, NodeState, Owner};
use super::ids::{JobId, ModelId, NodeId, RunId};
use super::jobs::JobInfo;
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
    events.sort();
    // Rank of each holder in end order: a GPU is usable for a prefix of the
    // events when its holder's rank is below the prefix.
    let mut run_rank: Vec<usize> = vec![usize::MAX; e.runs.len()];
    let mut placed_rank: Vec<usize> = vec![usize::MAX; e.jobs.len()];
    let mut event_nodes: Vec<Vec<NodeId>> = Vec::with_capacity(events.len());
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
        event_nodes.push(placement.iter().map(|(n, _)| *n).collect());
    }
    let free_nodes: Vec<NodeId> = e.cluster.candidates(req.model, 1).collect();
    let feasible = |prefix: usize| -> Option<Placement> {
        let mut nodes = free_nodes.clone();
        for list in event_nodes.iter().take(prefix) {
            nodes.extend(list.iter().copied());
        }
        nodes.sort_unstable();
        nodes.dedup();
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
    if !ends_before(e.now, job, res.start) {
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
