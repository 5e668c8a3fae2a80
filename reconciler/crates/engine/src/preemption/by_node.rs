//! Victim candidates by the node they hold GPUs on: sorted node ids and
//! each one's candidates in one flat list (no map nodes or list per node
//! to allocate: the victim search builds one per search and per victim set
//! it tries).

use crate::ids::NodeId;

/// The candidates (indices) each node holds, nodes in id order, and the
/// GPUs they hold there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ByNode {
    nodes: Vec<NodeId>,
    /// `items[starts[k]..starts[k + 1]]`: the candidates on `nodes[k]`.
    starts: Vec<u32>,
    items: Vec<usize>,
    /// `gpus[k]`: the GPUs of the candidates listed on `nodes[k]` there
    /// (each listing counted).
    gpus: Vec<u32>,
}

impl ByNode {
    /// From (node, candidate, its GPUs there) sorted by node (each node's
    /// candidates in the order given, none twice in a row).
    pub(super) fn from_sorted(listed: &[(NodeId, usize, u32)]) -> Self {
        debug_assert!(listed.is_sorted_by_key(|p| p.0));
        let mut out = ByNode {
            nodes: Vec::new(),
            starts: Vec::new(),
            items: Vec::with_capacity(listed.len()),
            gpus: Vec::new(),
        };
        for &(node, i, gpus) in listed {
            if out.nodes.last() != Some(&node) {
                out.nodes.push(node);
                out.starts.push(out.items.len() as u32);
                out.gpus.push(0);
            }
            out.items.push(i);
            if let Some(sum) = out.gpus.last_mut() {
                *sum += gpus;
            }
        }
        out.starts.push(out.items.len() as u32);
        out
    }

    fn at(&self, k: usize) -> &[usize] {
        &self.items[self.starts[k] as usize..self.starts[k + 1] as usize]
    }

    /// The candidates on node `id`, if any.
    pub(super) fn get(&self, id: &NodeId) -> Option<&[usize]> {
        self.nodes.binary_search(id).ok().map(|k| self.at(k))
    }

    /// The GPUs the candidates listed on node `id` hold there.
    pub(super) fn gpus_on(&self, id: NodeId) -> u32 {
        self.nodes.binary_search(&id).map_or(0, |k| self.gpus[k])
    }

    /// Whether some candidate holds GPUs on node `id`.
    pub(super) fn contains_key(&self, id: &NodeId) -> bool {
        self.nodes.binary_search(id).is_ok()
    }

    /// The nodes, in id order.
    pub(super) fn keys(&self) -> std::slice::Iter<'_, NodeId> {
        self.nodes.iter()
    }

    /// How many nodes.
    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Each node with its candidates, in id order.
    pub(super) fn iter(&self) -> Iter<'_> {
        Iter { by: self, k: 0 }
    }
}

/// [`ByNode::iter`].
pub(super) struct Iter<'a> {
    by: &'a ByNode,
    k: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a NodeId, &'a [usize]);

    fn next(&mut self) -> Option<Self::Item> {
        let id = self.by.nodes.get(self.k)?;
        let found = (id, self.by.at(self.k));
        self.k += 1;
        Some(found)
    }
}

impl<'a> IntoIterator for &'a ByNode {
    type Item = (&'a NodeId, &'a [usize]);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_sorted_pairs_by_node() {
        let by_node = ByNode::from_sorted(&[(1, 4, 2), (1, 2, 1), (3, 0, 8), (7, 1, 4), (7, 4, 4)]);
        assert_eq!(by_node.len(), 3);
        assert_eq!(by_node.get(&1), Some(&[4, 2][..]));
        assert_eq!(by_node.get(&3), Some(&[0][..]));
        assert_eq!(by_node.get(&2), None);
        assert!(by_node.contains_key(&7) && !by_node.contains_key(&8));
        assert_eq!(by_node.keys().copied().collect::<Vec<_>>(), vec![1, 3, 7]);
        let all: Vec<(NodeId, Vec<usize>)> =
            by_node.iter().map(|(id, c)| (*id, c.to_vec())).collect();
        assert_eq!(all, vec![(1, vec![4, 2]), (3, vec![0]), (7, vec![1, 4])]);
        assert_eq!(
            (by_node.gpus_on(1), by_node.gpus_on(3), by_node.gpus_on(7)),
            (3, 8, 8)
        );
        assert_eq!(by_node.gpus_on(2), 0);
        assert_eq!(ByNode::from_sorted(&[]).len(), 0);
    }
}
