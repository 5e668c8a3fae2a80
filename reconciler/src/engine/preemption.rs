//! Preemption: free GPUs (and quota) for a job that cannot run otherwise.
//!
//! Victims are preemptible running jobs that are (a) in the same leaf queue
//! with lower priority, (b) in a borrowing queue when the preemptor's queue
//! stays within its guarantee (reclaim), or (c) in a borrowing queue with
//! lower priority. Another queue's job is only taken from the borrowed part
//! of its queue's usage: the queue stays at or above its guarantee.
//! Victims are ordered borrowing first, lower priority first, most recently
//! started first; no more are taken than needed.

use std::collections::BTreeSet;

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
    same_queue: bool,
    borrowing: bool,
    priority: i32,
    reason: String,
}

/// Tries to preempt for job `j` on the model of `req`; true when victims
/// were chosen (the job then waits for them).
pub fn preempt_for(e: &mut Engine, j: JobId, req: &Request) -> bool {
    let job = e.jobs[j as usize].clone();
    let Some(q) = job.queue else { return false };
    let m = req.model;
    let reclaim = e.tree.usage(q, m) + job.gpus <= e.tree.guaranteed(q, m);
    let mut cands = candidates(e, j, q, req, reclaim);
    if cands.is_empty() {
        return false;
    }
    let possible: u64 = e.cluster.free_total.get(m as usize).copied().unwrap_or(0)
        + cands
            .iter()
            .map(|c| e.runs[c.run as usize].gpus)
            .sum::<u64>();
    if possible < job.gpus {
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

    // Greedy: add victims until the job fits.
    let mut chosen: Vec<usize> = Vec::new();
    let mut fit: Option<Placement> = None;
    for (i, c) in cands.iter().enumerate() {
        let gpus = e.runs[c.run as usize].gpus;
        if !c.same_queue
            && e.tree.usage(c.queue, m).saturating_sub(gpus) < e.tree.guaranteed(c.queue, m)
        {
            continue; // would dig into that queue's guarantee
        }
        e.tree.charge(c.queue, m, gpus, false);
        chosen.push(i);
        if let Some(p) = fits(e, j, q, req, &cands, &chosen) {
            fit = Some(p);
            break;
        }
    }
    if fit.is_none() {
        for &i in &chosen {
            let c = &cands[i];
            e.tree.charge(c.queue, m, e.runs[c.run as usize].gpus, true);
        }
        return false;
    }
    // Minimal: drop any victim (latest added first) the job fits without.
    let mut k = chosen.len().saturating_sub(1);
    while k > 0 {
        k -= 1;
        let i = chosen[k];
        let c = &cands[i];
        let gpus = e.runs[c.run as usize].gpus;
        e.tree.charge(c.queue, m, gpus, true);
        let without: Vec<usize> = chosen.iter().copied().filter(|x| *x != i).collect();
        match fits(e, j, q, req, &cands, &without) {
            Some(p) => {
                chosen = without;
                fit = Some(p);
            }
            None => e.tree.charge(c.queue, m, gpus, false),
        }
    }
    let Some(p) = fit else { return false };
    commit(e, j, req, &cands, &chosen, p);
    true
}

fn candidates(e: &Engine, j: JobId, q: QueueId, req: &Request, reclaim: bool) -> Vec<Candidate> {
    let job = &e.jobs[j as usize];
    let m = req.model;
    let mut out = Vec::new();
    for (r, run) in e.runs.iter().enumerate() {
        if run.stopping != Stopping::No || run.model != Some(m) {
            continue;
        }
        let Some(vj) = run.job else { continue };
        let victim = &e.jobs[vj as usize];
        let Some(vq) = victim.queue else { continue };
        if !victim.preemptible {
            continue;
        }
        let usage = e.tree.usage(vq, m);
        let guaranteed = e.tree.guaranteed(vq, m);
        let borrowing = usage > guaranteed;
        let model = e.models.name(m);
        let reason = if vq == q {
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
        } else if !borrowing {
            continue;
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
            run: r as RunId,
            queue: vq,
            same_queue: vq == q,
            borrowing,
            priority: victim.priority,
            reason,
        });
    }
    out
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
    let victims: BTreeSet<RunId> = chosen.iter().map(|i| cands[*i].run).collect();
    let freed: u64 = victims.iter().map(|r| e.runs[*r as usize].gpus).sum();
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
                Owner::Running(r) => victims.contains(&r),
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
        let run = &mut e.runs[c.run as usize];
        run.stopping = Stopping::Preempted;
        run.preempted_for = Some(job_name);
        let grace = run
            .job
            .map(|vj| e.jobs[vj as usize].grace)
            .unwrap_or_default();
        run.ends_at = Some(e.now + chrono::Duration::milliseconds(grace.as_millis() as i64));
        let placement = run.placement.clone();
        placement::apply(&mut e.cluster, &placement, Owner::Freeing(c.run));
        e.actions.preempt.push(Action::Preempt {
            job: run.name.to_string(),
            for_job: job_name.to_string(),
            reason: c.reason.clone(),
        });
    }
    for (id, positions) in &p {
        for &pos in positions {
            let new = match e.cluster.node(*id).gpus[pos].owner {
                Owner::Freeing(r) => Owner::Claimed(r, j),
                _ => Owner::Promised(j),
            };
            e.cluster.set_owner(*id, pos, new);
        }
    }
    let job = &e.jobs[j as usize];
    if let Some(q) = job.queue {
        e.tree.charge(q, req.model, job.gpus, true);
    }
    let reason = reasons::waiting_for_runs(e, &victims);
    e.push_pending(j, reason, "preemption");
}
