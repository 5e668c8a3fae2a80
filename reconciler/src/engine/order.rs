//! Fair-share order: at each level of the queue tree the child with the
//! lowest dominant share ÷ weight goes next; inside a leaf, higher priority
//! first, then older (first seen), then never-seen jobs by name.

use std::cmp::Ordering;
use std::collections::VecDeque;

use super::ids::{JobId, QueueId};
use super::jobs::JobInfo;
use super::quota::QueueTree;

/// Hands out pending jobs one at a time in fair-share order. Shares are
/// recomputed at every pick, so each admission moves its queue back.
#[derive(Debug, Clone)]
pub struct FairShare {
    leaf_jobs: Vec<VecDeque<JobId>>,
    remaining: Vec<u64>,
}

impl FairShare {
    /// Queues `pending` (jobs whose queue is a known leaf) for picking.
    pub fn new(tree: &QueueTree, jobs: &[JobInfo], pending: &[JobId]) -> Self {
        let n = tree.queues.len();
        let mut per_leaf: Vec<Vec<JobId>> = vec![Vec::new(); n];
        let mut remaining = vec![0u64; n];
        for &j in pending {
            let Some(q) = jobs[j as usize].queue else {
                continue;
            };
            per_leaf[q as usize].push(j);
            for a in tree.path(q) {
                remaining[a as usize] += 1;
            }
        }
        let leaf_jobs = per_leaf
            .into_iter()
            .map(|mut list| {
                list.sort_by(|a, b| within_leaf(&jobs[*a as usize], &jobs[*b as usize]));
                VecDeque::from(list)
            })
            .collect();
        FairShare {
            leaf_jobs,
            remaining,
        }
    }

    /// The next job, or `None` when every queue is empty.
    pub fn next(&mut self, tree: &QueueTree, capacity: &[u64]) -> Option<JobId> {
        let mut level: &[QueueId] = &tree.roots;
        loop {
            let q = self.pick(tree, level, capacity)?;
            if tree.is_leaf(q) {
                let job = self.leaf_jobs[q as usize].pop_front()?;
                for a in tree.path(q) {
                    self.remaining[a as usize] -= 1;
                }
                return Some(job);
            }
            level = &tree.get(q).children;
        }
    }

    /// Pending jobs not yet handed out in the subtree of `q`.
    pub fn remaining(&self, q: QueueId) -> u64 {
        self.remaining.get(q as usize).copied().unwrap_or(0)
    }

    fn pick(&self, tree: &QueueTree, level: &[QueueId], capacity: &[u64]) -> Option<QueueId> {
        level
            .iter()
            .copied()
            .filter(|q| self.remaining[*q as usize] > 0)
            .map(|q| (tree.weighted_share(q, capacity), q))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, q)| q)
    }
}

/// Order inside a leaf: priority (high first), first seen (old first, never
/// seen last), name.
pub fn within_leaf(a: &JobInfo, b: &JobInfo) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| match (&a.first_seen, &b.first_seen) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.name.cmp(b.name))
}
