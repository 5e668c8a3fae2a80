//! Whether enough replicas could fit with a candidate list: a necessary
//! condition the victim search checks before it searches.
//!
//! The candidates' GPUs are counted per node in a dense table kept by the
//! plan's engine (by node id, cleared after each check), not a map built
//! per check:
//! the check runs once per search and per widened list, over up to 2,048
//! candidates, and hashing was most of its cost in storms. Without a
//! topology level the replicas are counted as the candidates are added,
//! and the check stops once enough fit.

use super::super::Engine;
use super::super::ids::NodeId;
use super::super::placement::Request;
use super::{Candidate, Waitable};

/// A necessary condition for a victim search with `cands`, cheap to check:
/// counting each node's free GPUs and those of every candidate on it
/// (ignoring NVLink domains and guarantees), enough replicas fit — inside
/// one domain of the required topology level, when there is one. More
/// candidates never make it false.
pub(super) fn replicas_could_fit(
    e: &Engine,
    req: &Request,
    cands: &[Candidate],
    stopping: &Waitable,
) -> bool {
    if req.per_replica == 0 {
        return true;
    }
    let mut scratch = e.victim_gpus.borrow_mut();
    let table = &mut *scratch;
    let fits = match req.required {
        None => enough_anywhere(e, req, cands, stopping, table),
        Some(_) => {
            // The nodes the candidates hold GPUs on, each once.
            let mut held: Vec<NodeId> = Vec::with_capacity(cands.len());
            for c in cands {
                for (node, positions) in &e.runs[c.run as usize].placement {
                    let k = *node as usize;
                    if k >= table.len() {
                        table.resize(k + 1, 0);
                    }
                    if table[k] == 0 {
                        held.push(*node);
                        table[k] = 1;
                    }
                    table[k] += positions.len() as u32;
                }
            }
            let fits = enough_replicas(
                e,
                req,
                stopping,
                &held,
                |id| table.get(id as usize).is_some_and(|&n| n > 0),
                |id| table.get(id as usize).map_or(0, |n| n.saturating_sub(1)),
            );
            clear(table, &held);
            fits
        }
    };
    drop(scratch);
    #[cfg(debug_assertions)]
    debug_assert_eq!(fits, replicas_could_fit_plain(e, req, cands, stopping));
    fits
}

/// [`replicas_could_fit`] without a topology level: replicas counted as
/// they are found, first on the nodes with room (free and waited-for
/// stopping GPUs), then as each candidate's GPUs are added to its node
/// (`table`: 0, 1 + the node's usable GPUs so far, or [`NOT_USABLE`]), so
/// that the candidates are looked at only until enough fit. The count only
/// grows and ends at the sum over all nodes: the same answer as summing
/// after counting every candidate.
fn enough_anywhere(
    e: &Engine,
    req: &Request,
    cands: &[Candidate],
    stopping: &Waitable,
    table: &mut Vec<u32>,
) -> bool {
    let per = req.per_replica;
    let needed = u64::from(req.replicas);
    let usable_alone = |id: NodeId| {
        let node = e.cluster.node(id);
        (node.schedulable && node.model == Some(req.model))
            .then(|| node.free + stopping.gpus_on(&e.cluster, id))
    };
    let mut fit = 0;
    // Each node counted in full when first seen (noted in the table).
    let mut seen: Vec<NodeId> = Vec::with_capacity(cands.len());
    let mut first_seen = |table: &mut Vec<u32>, id: NodeId, fit: &mut u64| {
        let k = id as usize;
        if k >= table.len() {
            table.resize(k + 1, 0);
        }
        if table[k] == 0 {
            seen.push(id);
            table[k] = match usable_alone(id) {
                Some(n) => {
                    *fit += u64::from(n / per);
                    n + 1
                }
                None => NOT_USABLE,
            };
        }
    };
    let mut fits = false;
    for id in stopping.nodes_with_room(&e.cluster, req.model, per) {
        first_seen(table, id, &mut fit);
        if fit >= needed {
            fits = true;
            break;
        }
    }
    'cands: for c in cands {
        if fits {
            break;
        }
        for (node, positions) in &e.runs[c.run as usize].placement {
            first_seen(table, *node, &mut fit);
            let k = *node as usize;
            if table[k] != NOT_USABLE {
                let before = table[k] - 1;
                let after = before + positions.len() as u32;
                table[k] = after + 1;
                fit += u64::from(after / per - before / per);
            }
            // (Checked for unusable nodes too: as the sum over the nodes
            // seen, which asks for no replica when none is needed.)
            if fit >= needed {
                fits = true;
                break 'cands;
            }
        }
    }
    clear(table, &seen);
    fits
}

/// In the table of [`enough_anywhere`]: a node that holds no replica
/// (not schedulable, or of another model).
const NOT_USABLE: u32 = u32::MAX;

/// Sets the table's entries for `nodes` back to 0.
fn clear(table: &mut [u32], nodes: &[NodeId]) {
    for &id in nodes {
        table[id as usize] = 0;
    }
}

/// [`replicas_could_fit`] with a map of the candidates' GPUs per node built
/// for the check: what the table is compared with in debug builds.
#[cfg(debug_assertions)]
fn replicas_could_fit_plain(
    e: &Engine,
    req: &Request,
    cands: &[Candidate],
    stopping: &Waitable,
) -> bool {
    let mut victim_gpus: rustc_hash::FxHashMap<NodeId, u32> = Default::default();
    for c in cands {
        for (node, positions) in &e.runs[c.run as usize].placement {
            *victim_gpus.entry(*node).or_default() += positions.len() as u32;
        }
    }
    let held: Vec<NodeId> = victim_gpus.keys().copied().collect();
    enough_replicas(
        e,
        req,
        stopping,
        &held,
        |id| victim_gpus.contains_key(&id),
        |id| victim_gpus.get(&id).copied().unwrap_or(0),
    )
}

/// Whether `req.replicas` fit counting the nodes in `held` (where
/// `victim_gpus` are the candidates' GPUs; `is_held` tells them apart)
/// and those where free GPUs and waited-for stopping ones make a replica,
/// each once. The answer does not depend on the order of `held`.
fn enough_replicas(
    e: &Engine,
    req: &Request,
    stopping: &Waitable,
    held: &[NodeId],
    is_held: impl Fn(NodeId) -> bool,
    victim_gpus: impl Fn(NodeId) -> u32,
) -> bool {
    // A node where free GPUs and waited-for stopping ones make no replica
    // and no candidate is holds no replica: only the others are counted,
    // each once.
    let nodes = held.iter().copied().chain(
        stopping
            .nodes_with_room(&e.cluster, req.model, req.per_replica)
            .filter(|&id| !is_held(id)),
    );
    let replicas_on = |id: NodeId| {
        let node = e.cluster.node(id);
        if !node.schedulable || node.model != Some(req.model) {
            return 0;
        }
        let usable = node.free + victim_gpus(id) + stopping.gpus_on(&e.cluster, id);
        u64::from(usable / req.per_replica)
    };
    let needed = u64::from(req.replicas);
    match req.required {
        None => {
            let mut fit = 0;
            for id in nodes {
                fit += replicas_on(id);
                if fit >= needed {
                    return true;
                }
            }
            false
        }
        Some(level) => {
            let mut per_domain: rustc_hash::FxHashMap<&str, u64> = Default::default();
            for id in nodes {
                if let Some(key) = e.cluster.node(id).domain_key(level) {
                    let fit = per_domain.entry(key).or_default();
                    *fit += replicas_on(id);
                    if *fit >= needed {
                        return true;
                    }
                }
            }
            false
        }
    }
}
