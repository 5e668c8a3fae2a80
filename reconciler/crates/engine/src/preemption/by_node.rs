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
    #[cfg(test)]
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

    /// From entries (candidate, its GPUs on the node) listed in the order
    /// of the victim set and `keys`, one per entry: its node in the upper
    /// half, its place among `entries` in the lower (so each node's
    /// candidates keep the entries' order); a candidate listed twice in a
    /// row on a node counts once. Grouped by node without comparing
    /// entries: a stable radix sort on the node half.
    pub(super) fn from_keys(mut keys: Vec<u64>, entries: &[(usize, u32)]) -> Self {
        sort_by_node(&mut keys);
        let n = keys.len();
        let mut out = ByNode {
            nodes: Vec::with_capacity(n),
            starts: Vec::with_capacity(n + 1),
            items: Vec::with_capacity(n),
            gpus: Vec::with_capacity(n),
        };
        for key in keys {
            let node = (key >> 32) as NodeId;
            let (i, gpus) = entries[key as u32 as usize];
            if out.nodes.last() != Some(&node) {
                out.nodes.push(node);
                out.starts.push(out.items.len() as u32);
                out.gpus.push(0);
            } else if out.items.last() == Some(&i) {
                continue;
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

/// Sorts `keys` (node in the upper half, a number rising with the key's
/// place in the lower) by node, keeping the order within a node: the same
/// order as sorting the whole keys. Few keys are sorted by comparison, more
/// by bytes of the node, least significant first, as many as the largest
/// node needs.
fn sort_by_node(keys: &mut Vec<u64>) {
    #[cfg(debug_assertions)]
    let expected = {
        debug_assert!(keys.windows(2).all(|w| w[0] as u32 <= w[1] as u32));
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted
    };
    if keys.len() < 64 {
        keys.sort_unstable();
    } else {
        let top = keys.iter().map(|k| k >> 32).max().unwrap_or(0);
        let mut spare = vec![0u64; keys.len()];
        let mut shift = 32;
        while shift < 64 && (shift == 32 || top >> (shift - 32) != 0) {
            let mut starts = [0usize; 257];
            for k in keys.iter() {
                starts[((k >> shift) & 0xff) as usize + 1] += 1;
            }
            for b in 0..256 {
                starts[b + 1] += starts[b];
            }
            for &k in keys.iter() {
                let b = ((k >> shift) & 0xff) as usize;
                spare[starts[b]] = k;
                starts[b] += 1;
            }
            std::mem::swap(keys, &mut spare);
            shift += 8;
        }
    }
    #[cfg(debug_assertions)]
    debug_assert_eq!(*keys, expected, "radix sort by node");
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

    #[test]
    fn keyed_entries_group_as_sorted_pairs() {
        // Entries in set order: (candidate, GPUs), and each one's node.
        let entries = [(4, 2), (2, 1), (0, 8), (1, 4), (4, 4), (4, 1)];
        let nodes: [NodeId; 6] = [1, 1, 3, 7, 7, 7];
        let keys = |order: &[usize]| -> Vec<u64> {
            order
                .iter()
                .map(|&k| u64::from(nodes[k]) << 32 | k as u64)
                .collect()
        };
        let by_node = ByNode::from_keys(keys(&[0, 1, 2, 3, 4, 5]), &entries);
        // Candidate 4 twice in a row on node 7 counts once.
        let sorted = ByNode::from_sorted(&[(1, 4, 2), (1, 2, 1), (3, 0, 8), (7, 1, 4), (7, 4, 4)]);
        assert_eq!(by_node, sorted);
        // Many keys, nodes past one byte: the radix sort's passes.
        let many: Vec<(NodeId, usize)> = (0..500).map(|k| ((k * 7919) % 300, k as usize)).collect();
        let entries: Vec<(usize, u32)> = many.iter().map(|&(_, i)| (i, 1)).collect();
        let keys: Vec<u64> = (0..many.len())
            .map(|k| u64::from(many[k].0) << 32 | k as u64)
            .collect();
        let mut pairs: Vec<(NodeId, usize, u32)> = many.iter().map(|&(n, i)| (n, i, 1)).collect();
        pairs.sort_by_key(|p| (p.0, p.1));
        assert_eq!(
            ByNode::from_keys(keys, &entries),
            ByNode::from_sorted(&pairs)
        );
    }
}
