//! Node-pool scaling: up when quota-fitting jobs need more nodes (the fewest
//! new nodes, shared best-fit by the jobs that wait for them), up to reach
//! `min`, and down for nodes idle longer than `scaleDownAfter`, never below
//! `min` and never a node with jobs.

use model::plan::Action;

use super::cluster::{Gpu, NodeState, Owner};
use super::ids::{JobId, NodeId};
use super::placement::{self, Request};
use super::{Engine, reasons};

/// Job `j` fits when its model's pools grow: promise it the GPUs of the new
/// nodes and let it wait. True when it does.
pub fn wait_for_scale_up(e: &mut Engine, j: JobId, req: &Request) -> bool {
    let mut nodes: Vec<NodeId> = Vec::new();
    for pool in e.pools.iter().filter(|p| p.model == req.model) {
        // Nodes already being added with room left, and enough fresh ones
        // for the whole job (fresh nodes are all alike).
        let mut fresh = 0u64;
        let per_node = u64::from(pool.spec.gpu.count.max(1));
        for &id in &pool.virtual_nodes {
            let node = e.cluster.node(id);
            if node.free == 0 {
                continue;
            }
            if node.is_idle() && !node.planned {
                if fresh * per_node >= req.total() + per_node * u64::from(req.replicas) {
                    continue;
                }
                fresh += 1;
            }
            nodes.push(id);
        }
    }
    if nodes.is_empty() {
        return false;
    }
    nodes.extend(e.cluster.candidates(req.model, 1));
    let usable = |n: &NodeState, _: usize, g: &Gpu| n.schedulable && g.owner == Owner::Free;
    // Existing nodes first, then nodes this plan already adds, then new ones:
    // the fewest new nodes.
    let rank = |n: &NodeState| match (n.is_virtual, n.planned || !n.is_idle()) {
        (false, _) => 0,
        (true, true) => 1,
        (true, false) => 2,
    };
    let Some(p) = placement::place_ranked(&e.cluster, &nodes, req, &usable, &rank) else {
        return false;
    };
    let new_nodes: Vec<NodeId> = {
        let mut v: Vec<NodeId> = p
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| e.cluster.node(*id).is_virtual)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    if new_nodes.is_empty() {
        // Fits on existing nodes after all (a topology fallback): place it.
        placement::apply(&mut e.cluster, &p, Owner::Placed(j));
        e.commit_place(j, req.model, p, None);
        return true;
    }
    placement::apply(&mut e.cluster, &p, Owner::Promised(j));
    let job = &e.jobs[j as usize];
    if let Some(q) = job.queue {
        e.tree.charge(q, req.model, job.gpus, true);
    }
    e.charged_in_place_of_held(j);
    let mut pools: Vec<&str> = Vec::new();
    for id in &new_nodes {
        if let Some(pool) = e.cluster.node(*id).pool {
            let info = &mut e.pools[pool as usize];
            if !info.waiting_jobs.contains(&j) {
                info.waiting_jobs.push(j);
            }
            if !pools.contains(&info.name) {
                pools.push(info.name);
            }
        }
    }
    let reason = format!(
        "waiting for scale-up: needs {} new node{} of pool {}",
        new_nodes.len(),
        if new_nodes.len() == 1 { "" } else { "s" },
        pools.join(", ")
    );
    e.push_pending(j, reason, "scale-up");
    true
}

/// Scale actions for every pool, by pool name.
pub fn scale_actions(e: &mut Engine) -> Vec<Action> {
    let mut out = Vec::new();
    for p in 0..e.pools.len() {
        let pool = &e.pools[p];
        let used = pool
            .virtual_nodes
            .iter()
            .filter(|id| !e.cluster.node(**id).is_idle())
            .count() as u32;
        let deficit = pool.spec.size.min.saturating_sub(pool.observed_nodes);
        let add = used.max(deficit).min(pool.virtual_nodes.len() as u32);
        if add > 0 {
            let mut why = Vec::new();
            if used > 0 {
                let names: Vec<&str> = pool
                    .waiting_jobs
                    .iter()
                    .map(|j| e.jobs[*j as usize].name)
                    .collect();
                why.push(format!(
                    "{} pending job{} fit{} on new nodes: {}",
                    names.len(),
                    if names.len() == 1 { "" } else { "s" },
                    if names.len() == 1 { "s" } else { "" },
                    reasons::list(&names, 5)
                ));
            }
            if deficit > 0 {
                why.push(format!(
                    "below minimum size {} ({} node{} observed)",
                    pool.spec.size.min,
                    pool.observed_nodes,
                    if pool.observed_nodes == 1 { "" } else { "s" }
                ));
            }
            out.push(Action::Scale {
                pool: pool.name.to_string(),
                from: pool.observed_nodes,
                to: pool.observed_nodes + add,
                reason: why.join("; "),
                nodes: Vec::new(),
            });
            continue;
        }
        if let Some(action) = scale_down(e, p) {
            out.push(action);
        }
    }
    out
}

fn scale_down(e: &Engine, p: usize) -> Option<Action> {
    let pool = &e.pools[p];
    let removable = pool.observed_nodes.saturating_sub(pool.spec.size.min);
    if removable == 0 {
        return None;
    }
    let wait = pool.spec.scale_down_after();
    let mut idle: Vec<(&NodeState, model::observed::Timestamp)> = e
        .cluster
        .real_nodes()
        .map(|id| e.cluster.node(id))
        .filter(|n| n.pool == Some(p as u32) && n.is_idle())
        .filter_map(|n| {
            n.idle_since
                .filter(|since| {
                    let due = model::time::after(*since, wait);
                    // Removable from `due` on: the plan's horizon.
                    super::horizon::note(due);
                    due <= e.now
                })
                .map(|s| (n, s))
        })
        .collect();
    if idle.is_empty() {
        return None;
    }
    idle.sort_by(|a, b| a.1.cmp(&b.1).then(b.0.name.cmp(&a.0.name)));
    idle.truncate(removable as usize);
    let mut nodes: Vec<String> = idle.iter().map(|(n, _)| n.name.clone()).collect();
    nodes.sort_by(|a, b| model::text::natural_cmp(a, b));
    Some(Action::Scale {
        pool: pool.name.to_string(),
        from: pool.observed_nodes,
        to: pool.observed_nodes - nodes.len() as u32,
        reason: format!(
            "{} node{} idle for more than {}",
            nodes.len(),
            if nodes.len() == 1 { "" } else { "s" },
            pool.spec.scale_down_after()
        ),
        nodes,
    })
}
