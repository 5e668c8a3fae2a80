//! Preemption: free GPUs (and quota) for a job that cannot run otherwise.
//!
//! Victims are preemptible running jobs that are (a) in the same leaf queue
//! with lower priority, (b) in a borrowing queue when the preemptor's queue
//! stays within its guarantee (reclaim), or (c) in a borrowing queue with
//! lower priority. Another queue's job is only taken from borrowed usage:
//! its queue, and every ancestor below the common ancestor with the
//! preemptor's queue, stays at or above its guarantee. Victims are ordered
//! borrowing first, lower priority first, most recently started first; no
//! more are taken than needed.

use std::collections::BTreeMap;

use crate::plan::Action;

use super::cluster::{Gpu, NodeState, Owner};
use super::ids::{JobId, NodeId, QueueId, RunId};
use super::placement::{self, Placement, Request};
use super::{Engine, Stopping, reasons};

/// A running job that may be preempted for the current preemptor.
#[derive(Debug, Clone)]
struct Candidate {
    run: RunId,
    queue: QueueId,
    gpus: u64,
    /// Queues whose borrowed usage the victim is taken from (empty for the
    /// preemptor's own queue): its leaf up to below the common ancestor.
    borrowed_from: Vec<QueueId>,
    borrowing: bool,
    priority: i32,
    reason: String,
}

/// Whether the guarantee check applies while searching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Headroom {
    /// Checked on every victim added.
    Enforce,
    /// Checked on the final, minimal set only.
    AtTheEnd,
}

/// The memo key of a failed search: nothing about it changes until the
/// engine admits another job.
pub type MemoKey = (QueueId, i32, u16, u32, u32, u8, u8);

/// Tries to preempt for job `j` on the model of `req`; true when victims
/// were chosen (the job then waits for them).
pub fn preempt_for(e: &mut Engine, j: JobId, req: &Request) -> bool {
    let job = e.jobs[j as usize].clone();
    let Some(q) = job.queue else { return false };
    let key: MemoKey = (
        q,
        job.priority,
        req.model,
        req.replicas,
        req.per_replica,
        req.required.map_or(0, |l| l as u8 + 1),
        req.preferred.map_or(0, |l| l as u8 + 1),
    );
    if e.preempt_memo.get(&key) == Some(&e.generation) {
        return false;
    }
    let m = req.model;
    let reclaim = e.tree.usage(q, m) + job.gpus <= e.tree.guaranteed(q, m);
    let mut cands = candidates(e, j, q, req, reclaim);
    let possible: u64 = e.cluster.free_total.get(m as usize).copied().unwrap_or(0)
        + cands.iter().map(|c| c.gpus).sum::<u64>();
    if cands.is_empty() || possible < job.gpus {
        e.preempt_memo.insert(key, e.generation);
        return false;
    }
    cands.sort_by(|a, b| {
        let (ra, rb) = (&e.runs[a.run as usize], &e.runs[b.run as usize]);
        b.borrowing
            .cmp(&a.borrowing)
            .then(a.priority.cmp(&b.priority))
            .then(rb.started.cmp(&ra.started))
            .then(ra.name.cmp(rb.name))
    });
    // Searching with the guarantee check at the end first finds sets that
    // skip victims which do not help; the strict search is the fallback.
    let found = search(e, j, q, req, &cands, Headroom::AtTheEnd)
        .filter(|(chosen, _)| within_headroom(e, &cands, chosen, m))
        .or_else(|| search(e, j, q, req, &cands, Headroom::Enforce));
    match found {
        Some((chosen, p)) => {
            commit(e, j, req, &cands, &chosen, p);
            true
        }
        None => {
            e.preempt_memo.insert(key, e.generation);
            false
        }
    }
}

fn candidates(e: &Engine, j: JobId, q: QueueId, req: &Request, reclaim: bool) -> Vec<Candidate> {
    let job = &e.jobs[j as usize];
    let m = req.model;
    let own_path: Vec<QueueId> = e.tree.path(q).collect();
    let model = e.models.name(m);
    let mut out = Vec::new();
    for (vq, runs) in e.runs_by_queue.iter().enumerate() {
        let vq = vq as QueueId;
        if runs.is_empty() {
            continue;
        }
        let same = vq == q;
        let usage = e.tree.usage(vq, m);
        let guaranteed = e.tree.guaranteed(vq, m);
        let borrowing = usage > guaranteed;
        // Cross-queue: the victim's queue and its ancestors below the common
        // ancestor must all be borrowing.
        let borrowed_from: Vec<QueueId> = if same {
            Vec::new()
        } else {
            e.tree
                .path(vq)
                .take_while(|a| !own_path.contains(a))
                .collect()
        };
        if !same
            && !borrowed_from
                .iter()
                .all(|a| e.tree.usage(*a, m) > e.tree.guaranteed(*a, m))
        {
            continue;
        }
        for &r in runs {
            let run = &e.runs[r as usize];
            if run.stopping != Stopping::No || run.model != Some(m) {
                continue;
            }
            let Some(vj) = run.job else { continue };
            let victim = &e.jobs[vj as usize];
            if !victim.preemptible {
                continue;
            }
            let reason = if same {
                if victim.priority >= job.priority {
                    continue;
                }
                format!(
                    "priority: {} ({}) outranks {} ({}) in queue {}",
                    job.name,
                    reasons::class(job),
                    victim.name,
                    reasons::class(victim),
                    e.tree.get(q).name
                )
            } else if reclaim {
                format!(
                    "reclaim: queue {} is borrowing {} {model} (uses {usage}, guaranteed {guaranteed}); queue {} stays within its guarantee",
                    e.tree.get(vq).name,
                    usage - guaranteed,
                    e.tree.get(q).name
                )
            } else if victim.priority < job.priority {
                format!(
                    "queue {} is borrowing {} {model} and {} ({}) has lower priority than {} ({})",
                    e.tree.get(vq).name,
                    usage - guaranteed,
                    victim.name,
                    reasons::class(victim),
                    job.name,
                    reasons::class(job)
                )
            } else {
                continue;
            };
            out.push(Candidate {
                run: r,
                queue: vq,
                gpus: run.gpus,
                borrowed_from: borrowed_from.clone(),
                borrowing,
                priority: victim.priority,
                reason,
            });
        }
    }
    out
}

/// Whether taking `chosen` leaves every queue a victim is taken from at or
/// above its guarantee.
fn within_headroom(e: &Engine, cands: &[Candidate], chosen: &[usize], m: u16) -> bool {
    let mut taken: BTreeMap<QueueId, u64> = BTreeMap::new();
    for &i in chosen {
        for &a in &cands[i].borrowed_from {
            *taken.entry(a).or_default() += cands[i].gpus;
        }
    }
    taken
        .iter()
        .all(|(a, t)| e.tree.usage(*a, m).saturating_sub(*t) >= e.tree.guaranteed(*a, m))
}

/// Greedy victim search, then minimisation. Leaves the engine unchanged.
fn search(
    e: &mut Engine,
    j: JobId,
    q: QueueId,
    req: &Request,
    cands: &[Candidate],
    headroom: Headroom,
) -> Option<(Vec<usize>, Placement)> {
    let m = req.model;
    let mut chosen: Vec<usize> = Vec::new();
    let mut fit: Option<Placement> = None;
    for (i, c) in cands.iter().enumerate() {
        if headroom == Headroom::Enforce && !c.borrowed_from.is_empty() {
            let mut with = chosen.clone();
            with.push(i);
            if !within_headroom(e, cands, &with, m) {
                continue;
            }
        }
        e.tree.charge(c.queue, m, c.gpus, false);
        chosen.push(i);
        if let Some(p) = fits(e, j, q, req, cands, &chosen) {
            fit = Some(p);
            break;
        }
    }
    if fit.is_some() {
        // Minimal: drop any victim (latest added first) the job fits without.
        let mut k = chosen.len().saturating_sub(1);
        while k > 0 {
            k -= 1;
            let i = chosen[k];
            let c = &cands[i];
            e.tree.charge(c.queue, m, c.gpus, true);
            let without: Vec<usize> = chosen.iter().copied().filter(|x| *x != i).collect();
            match fits(e, j, q, req, cands, &without) {
                Some(p) => {
                    chosen = without;
                    fit = Some(p);
                }
                None => e.tree.charge(c.queue, m, c.gpus, false),
            }
        }
    }
    for &i in &chosen {
        let c = &cands[i];
        e.tree.charge(c.queue, m, c.gpus, true);
    }
    fit.map(|p| (chosen, p))
}

/// Whether job `j` fits quota and placement with the `chosen` victims gone
/// (their usage already released by the caller).
fn fits(
    e: &Engine,
    j: JobId,
    q: QueueId,
    req: &Request,
    cands: &[Candidate],
    chosen: &[usize],
) -> Option<Placement> {
    let job = &e.jobs[j as usize];
    e.tree.fits(q, req.model, job.gpus).ok()?;
    let mut victims: Vec<RunId> = chosen.iter().map(|i| cands[*i].run).collect();
    victims.sort_unstable();
    let freed: u64 = chosen.iter().map(|i| cands[*i].gpus).sum();
    let free = e
        .cluster
        .free_total
        .get(req.model as usize)
        .copied()
        .unwrap_or(0);
    if free + freed < job.gpus {
        return None;
    }
    let mut nodes: Vec<NodeId> = e.cluster.candidates(req.model, 1).collect();
    for r in &victims {
        nodes.extend(e.runs[*r as usize].placement.iter().map(|(n, _)| *n));
    }
    nodes.sort_unstable();
    nodes.dedup();
    let usable = |n: &NodeState, _: usize, g: &Gpu| {
        n.schedulable
            && match g.owner {
                Owner::Free => true,
                Owner::Running(r) => victims.binary_search(&r).is_ok(),
                _ => false,
            }
    };
    placement::place_scan(&e.cluster, &nodes, req, &usable)
}

fn commit(
    e: &mut Engine,
    j: JobId,
    req: &Request,
    cands: &[Candidate],
    chosen: &[usize],
    p: Placement,
) {
    let job_name = e.jobs[j as usize].name;
    let mut victims: Vec<RunId> = chosen.iter().map(|i| cands[*i].run).collect();
    victims.sort_by_key(|r| e.runs[*r as usize].name);
    for &i in chosen {
        let c = &cands[i];
        e.tree.charge(c.queue, req.model, c.gpus, false);
        let run = &mut e.runs[c.run as usize];
        run.stopping = Stopping::Preempted;
        run.preempted_for = Some(job_name);
        let grace = run
            .job
            .map(|vj| e.jobs[vj as usize].grace)
            .unwrap_or_default();
        run.ends_at = Some(e.now + chrono::Duration::milliseconds(grace.as_millis() as i64));
        // All of the victim's GPUs are kept for the preemptor in this plan.
        let placement = run.placement.clone();
        placement::apply(&mut e.cluster, &placement, Owner::Claimed(c.run, j));
        e.actions.preempt.push(Action::Preempt {
            job: run.name.to_string(),
            for_job: job_name.to_string(),
            reason: c.reason.clone(),
        });
    }
    for (id, positions) in &p {
        for &pos in positions {
            if e.cluster.node(*id).gpus[pos].owner == Owner::Free {
                e.cluster.set_owner(*id, pos, Owner::Promised(j));
            }
        }
    }
    let job = &e.jobs[j as usize];
    if let Some(q) = job.queue {
        e.tree.charge(q, req.model, job.gpus, true);
    }
    e.generation += 1;
    let reason = reasons::waiting_for_runs(e, &victims);
    e.push_pending(j, reason, "preemption");
}
