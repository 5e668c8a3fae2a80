//! Fair-share order: at each level of the queue tree the child with the
//! lowest dominant share ÷ weight goes next; inside a leaf, higher priority
//! first, then older (first seen), then never-seen jobs by name.

use std::cmp::Ordering;
use std::collections::VecDeque;

use super::ids::{JobId, QueueId};
use super::jobs::JobInfo;
use super::quota::QueueTree;

/// A weighted share as an exact fraction (numerator, denominator).
type Share = (u128, u128);

/// Hands out pending jobs one at a time in fair-share order. Shares are
/// recomputed whenever usage changed since the last pick, so each admission
/// moves its queue back.
#[derive(Debug, Clone)]
pub struct FairShare {
    leaf_jobs: Vec<VecDeque<JobId>>,
    remaining: Vec<u64>,
    /// Per queue: the weighted share (an exact fraction) and the queue
    /// tree's epoch it was computed at (capacity is fixed for the life of a
    /// `FairShare`).
    shares: Vec<(u64, Share)>,
}

impl FairShare {
    /// Queues `pending` (jobs whose queue is a known leaf) for picking.
    pub fn new(tree: &QueueTree, jobs: &[JobInfo], pending: &[JobId]) -> Self {
        let mut per_leaf: Vec<Vec<(LeafKey, JobId)>> = vec![Vec::new(); tree.queues.len()];
        for &j in pending {
            let job = &jobs[j as usize];
            if let Some(q) = job.queue {
                per_leaf[q as usize].push((leaf_key(job), j));
            }
        }
        let mut ordered: Vec<(QueueId, JobId)> = Vec::with_capacity(pending.len());
        for (q, mut list) in per_leaf.into_iter().enumerate() {
            // The key settles almost every comparison without leaving the
            // list; names break the remaining ties.
            list.sort_unstable_by(|(ka, a), (kb, b)| {
                ka.cmp(kb)
                    .then_with(|| jobs[*a as usize].name.cmp(jobs[*b as usize].name))
            });
            ordered.extend(list.into_iter().map(|(_, j)| (q as QueueId, j)));
        }
        Self::from_ordered(tree, jobs, &ordered)
    }

    /// Like [`FairShare::new`] for `pending` jobs with their leaf queues,
    /// already in [`within_leaf`] order inside each leaf (as the jobs a
    /// `FairShare` handed out are).
    pub fn from_ordered(tree: &QueueTree, jobs: &[JobInfo], pending: &[(QueueId, JobId)]) -> Self {
        let n = tree.queues.len();
        let mut leaf_jobs: Vec<VecDeque<JobId>> = vec![VecDeque::new(); n];
        for &(q, j) in pending {
            debug_assert_eq!(jobs[j as usize].queue, Some(q));
            debug_assert!(leaf_jobs[q as usize].back().is_none_or(|last| {
                within_leaf(&jobs[*last as usize], &jobs[j as usize]) == Ordering::Less
            }));
            leaf_jobs[q as usize].push_back(j);
        }
        let mut remaining = vec![0u64; n];
        for (q, list) in leaf_jobs.iter().enumerate() {
            if !list.is_empty() {
                for a in tree.path(q as QueueId) {
                    remaining[a as usize] += list.len() as u64;
                }
            }
        }
        FairShare {
            leaf_jobs,
            remaining,
            shares: vec![(u64::MAX, (0, 1)); n],
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

    fn pick(&mut self, tree: &QueueTree, level: &[QueueId], capacity: &[u64]) -> Option<QueueId> {
        let mut best: Option<(Share, QueueId)> = None;
        for &q in level {
            if self.remaining[q as usize] == 0 {
                continue;
            }
            let cached = &mut self.shares[q as usize];
            if cached.0 != tree.epoch {
                *cached = (tree.epoch, tree.weighted_share_exact(q, capacity));
            }
            let share = cached.1;
            // Exact comparison: equal shares tie, and ties go by queue name.
            let lower = |b: Share| (share.0 * b.1).cmp(&(b.0 * share.1));
            if best.is_none_or(|(b, bq)| lower(b).then(q.cmp(&bq)).is_lt()) {
                best = Some((share, q));
            }
        }
        best.map(|(_, q)| q)
    }
}

/// [`within_leaf`] as a key that settles almost every comparison without
/// reading the job table again: priority (high first), first seen
/// (old first, never seen last), the name's first 16 bytes. Equal keys are
/// settled by the whole names.
type LeafKey = (std::cmp::Reverse<i32>, bool, i64, u32, u128);

fn leaf_key(job: &JobInfo) -> LeafKey {
    (
        std::cmp::Reverse(job.priority),
        job.first_seen.is_none(),
        job.first_seen.map_or(0, |t| t.timestamp()),
        job.first_seen.map_or(0, |t| t.timestamp_subsec_nanos()),
        name_prefix(job.name),
    )
}

/// The first 16 bytes of `name`, zero-padded, big-endian: ordered as the
/// names are, up to ties between names that share those bytes.
fn name_prefix(name: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let head = &name.as_bytes()[..name.len().min(16)];
    bytes[..head.len()].copy_from_slice(head);
    u128::from_be_bytes(bytes)
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
