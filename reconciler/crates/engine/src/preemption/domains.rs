//! The victim search over the domains of a topology level: the domain
//! whose victims cost least (the first of equals, in the domains' key
//! order), each domain searched node by node.
//!
//! A domain's search makes the greedy choice exact for small gangs by
//! trying every sequence of nodes ([`super::fewest_victims_exhaustive`]),
//! bounded by the greedy choice's cost. A domain can replace the best of
//! the domains before it only with a cost below that best's, so its
//! exhaustive search is bounded by that cost too: it finds the same set
//! when that set is below both bounds, and nothing otherwise (the greedy
//! choice then stands, which costs no less than the best so far and is
//! not taken). Storms search hundreds of racks this way per gang; the
//! tighter bound prunes most of their sequences early. The greedy choice
//! itself is made in every domain as before: it is what notes that the
//! borrowing rule turned a victim down.

use super::super::ids::NodeId;
use super::super::placement::{Placement, Request};
use super::by_node::ByNode;
use super::{Area, Candidate, Cost, Waitable, node_by_node_beating};

/// What a node-by-node search finds: the cost, the victims, the placement.
pub(super) type Found = (Cost, Vec<usize>, Placement);

/// The least cost [`super::node_by_node`] finds over `domains` (each one's
/// nodes and base, [`super::domains_of`]), the first of equals; the same
/// as searching each domain in full and taking the least (debug builds
/// compare).
#[allow(clippy::too_many_arguments)]
pub(super) fn best_in_domains(
    e: &super::Engine,
    domains: &[(Vec<NodeId>, Vec<NodeId>)],
    req: &Request,
    cands: &[Candidate],
    by_node: &ByNode,
    rejected: &std::cell::Cell<bool>,
    stopping: &Waitable,
) -> Option<Found> {
    let mut best: Option<Found> = None;
    for (members, base) in domains {
        let area = Area::Listed {
            nodes: members,
            base,
            domains: &[],
        };
        let beat = best.as_ref().map(|(cost, ..)| cost);
        if let Some(found) =
            node_by_node_beating(e, area, req, cands, by_node, rejected, stopping, beat)
            && best.as_ref().is_none_or(|(cost, ..)| found.0 < *cost)
        {
            best = Some(found);
        }
    }
    #[cfg(debug_assertions)]
    {
        let unused = std::cell::Cell::new(rejected.get());
        let plain = domains
            .iter()
            .filter_map(|(members, base)| {
                let area = Area::Listed {
                    nodes: members,
                    base,
                    domains: &[],
                };
                node_by_node_beating(e, area, req, cands, by_node, &unused, stopping, None)
            })
            .min_by(|a, b| a.0.cmp(&b.0));
        debug_assert_eq!(
            best, plain,
            "the domains' bounded searches chose differently"
        );
    }
    best
}
