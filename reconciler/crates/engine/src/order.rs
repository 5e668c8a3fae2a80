//! Fair-share order: at each level of the queue tree the child with the
//! lowest dominant share ÷ weight goes next; inside a leaf, higher priority
//! first, then (a `shortest-first` or `smallest-first` leaf) the lower aged
//! time limit or GPU-time ([`LeafOrder`]), then older (first seen), then
//! never-seen jobs by name.

use std::cmp::Ordering;
use std::collections::VecDeque;

use model::observed::Timestamp;
use model::spec::QueueOrdering;

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
    /// Per level (0: the roots; `q + 1`: the children of `q`): the queue
    /// picked there last and the queue tree's epoch it was picked at. At
    /// the same epoch the shares are the same and queues only empty, so
    /// the same queue goes next while it has jobs left.
    picked: Vec<(u64, QueueId)>,
}

impl FairShare {
    /// Queues `pending` (jobs whose queue is a known leaf) for picking;
    /// `now` is the plan's time (the age of `shortest-first` leaves). The
    /// jobs of `guess` that are in `pending` go in their leaves first, in
    /// its order (an earlier plan's leaf order): a leaf already in order is
    /// not sorted again; the order is the same whatever `guess` holds
    /// (debug builds compare with none). Also the leaf order, for the next
    /// guess.
    pub fn new(
        tree: &QueueTree,
        jobs: &[JobInfo],
        pending: &[JobId],
        now: Timestamp,
        guess: &[JobId],
    ) -> (Self, Vec<JobId>) {
        // One list, leaf after leaf (counted first: no list grows).
        let n = tree.queues.len();
        let mut start = vec![0usize; n + 1];
        let mut wanted = vec![false; jobs.len()];
        for &j in pending {
            if let Some(q) = jobs[j as usize].queue
                && !std::mem::replace(&mut wanted[j as usize], true)
            {
                start[q as usize + 1] += 1;
            }
        }
        for q in 0..n {
            start[q + 1] += start[q];
        }
        let orders: Vec<LeafOrder> = (0..n as QueueId)
            .map(|q| LeafOrder::of(tree, q, now))
            .collect();
        let mut next = start.clone();
        let mut keyed: Vec<(LeafKey, JobId)> = vec![((0, 0, 0), 0); start[n]];
        let guessed = guess.iter().filter(|j| (**j as usize) < jobs.len());
        for &j in guessed.chain(pending) {
            if !std::mem::replace(&mut wanted[j as usize], false) {
                continue;
            }
            let job = &jobs[j as usize];
            if let Some(q) = job.queue {
                let at = &mut next[q as usize];
                keyed[*at] = (leaf_key(job, orders[q as usize]), j);
                *at += 1;
            }
        }
        // The key settles almost every comparison without leaving the
        // list; names break the remaining ties.
        let by_key = |(ka, a): &(LeafKey, JobId), (kb, b): &(LeafKey, JobId)| {
            ka.cmp(kb)
                .then_with(|| jobs[*a as usize].name.cmp(jobs[*b as usize].name))
        };
        let mut ordered: Vec<(QueueId, JobId)> = Vec::with_capacity(keyed.len());
        for q in 0..n {
            let list = &mut keyed[start[q]..start[q + 1]];
            if !list.is_sorted_by(|a, b| by_key(a, b).is_lt()) {
                list.sort_unstable_by(by_key);
            }
            ordered.extend(list.iter().map(|(_, j)| (q as QueueId, *j)));
        }
        let found: Vec<JobId> = ordered.iter().map(|(_, j)| *j).collect();
        #[cfg(debug_assertions)]
        if !guess.is_empty() {
            let (_, plain) = Self::new(tree, jobs, pending, now, &[]);
            debug_assert_eq!(found, plain, "a guessed leaf order differs");
        }
        (Self::from_ordered(tree, jobs, &ordered, now), found)
    }

    /// Like [`FairShare::new`] for `pending` jobs with their leaf queues,
    /// already in [`within_leaf`] order inside each leaf (as the jobs a
    /// `FairShare` handed out are, at the same `now`).
    pub fn from_ordered(
        tree: &QueueTree,
        jobs: &[JobInfo],
        pending: &[(QueueId, JobId)],
        now: Timestamp,
    ) -> Self {
        let n = tree.queues.len();
        let mut leaf_jobs: Vec<VecDeque<JobId>> = vec![VecDeque::new(); n];
        for &(q, j) in pending {
            debug_assert_eq!(jobs[j as usize].queue, Some(q));
            debug_assert!(leaf_jobs[q as usize].back().is_none_or(|last| {
                let order = LeafOrder::of(tree, q, now);
                within_leaf(&jobs[*last as usize], &jobs[j as usize], order) == Ordering::Less
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
            picked: vec![(u64::MAX, 0); n + 1],
        }
    }

    /// The next job, or `None` when every queue is empty.
    pub fn next(&mut self, tree: &QueueTree, capacity: &[u64]) -> Option<JobId> {
        let mut level: &[QueueId] = &tree.roots;
        let mut slot = 0;
        loop {
            let q = self.pick(tree, level, slot, capacity)?;
            if tree.is_leaf(q) {
                let job = self.leaf_jobs[q as usize].pop_front()?;
                for a in tree.path(q) {
                    self.remaining[a as usize] -= 1;
                }
                return Some(job);
            }
            level = &tree.get(q).children;
            slot = q as usize + 1;
        }
    }

    /// Pending jobs not yet handed out in the subtree of `q`.
    pub fn remaining(&self, q: QueueId) -> u64 {
        self.remaining.get(q as usize).copied().unwrap_or(0)
    }

    /// The queue of `level` (the level's `picked` slot: `slot`) that goes
    /// next: the lowest weighted share among those with jobs left.
    fn pick(
        &mut self,
        tree: &QueueTree,
        level: &[QueueId],
        slot: usize,
        capacity: &[u64],
    ) -> Option<QueueId> {
        let (epoch, last) = self.picked[slot];
        if epoch == tree.epoch && self.remaining[last as usize] > 0 {
            debug_assert_eq!(self.pick_fresh(tree, level, capacity), Some(last));
            return Some(last);
        }
        let best = self.pick_fresh(tree, level, capacity);
        if let Some(q) = best {
            self.picked[slot] = (tree.epoch, q);
        }
        best
    }

    /// [`FairShare::pick`] without the last pick.
    fn pick_fresh(
        &mut self,
        tree: &QueueTree,
        level: &[QueueId],
        capacity: &[u64],
    ) -> Option<QueueId> {
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

/// `shortest-first`'s bound, 7 days (Slurm's default
/// `PriorityMaxAge`): the most a declared limit counts (no `timeLimit`
/// counts as this much), and the wait after which a job goes before every
/// later arrival of its priority.
pub const SHORTEST_FIRST_MAX_AGE: model::spec::Duration =
    model::spec::Duration::from_secs(7 * 24 * 3600);

/// `shortest-first`'s aging: waiting this many seconds counts as one second
/// less of declared limit (rank `L − age / k`, ordered as `k·L + since`);
/// `smallest-first`'s as well, one GPU-second less of declared GPU-time.
pub const SHORTEST_FIRST_AGING: i64 = 24;

/// `smallest-first`'s bound, 30 days: the wait after which a job goes
/// before every later arrival of its priority (a declared limit still
/// counts at most [`SHORTEST_FIRST_MAX_AGE`]).
pub const SMALLEST_FIRST_MAX_AGE: model::spec::Duration =
    model::spec::Duration::from_secs(30 * 24 * 3600);

/// `least-attained`'s ranks: the tier times 2^56 plus the rank inside the
/// tier (clamped to below 2^56 ms, 2.2 million years).
const TIER_SHIFT: u32 = 56;

/// A job's rank under its leaf's ordering, lower first: under fifo always
/// `(false, 0)`; under `shortest-first` `(false, since)` once it has waited
/// [`SHORTEST_FIRST_MAX_AGE`] (ahead), else `(true, k·L + since)` (k:
/// [`SHORTEST_FIRST_AGING`]); under `smallest-first` the same with
/// [`SMALLEST_FIRST_MAX_AGE`] and `k·L·G + since` (G: the job's GPUs);
/// under `least-attained` as `smallest-first` below the same bound, with
/// the job's attained-service tier ([`crate::attained`]) before `k·L·G +
/// since`.
type Rank = (bool, i64);

/// What a ranked leaf weighs a job's declared limit by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    /// `shortest-first`: the limit alone.
    Limit,
    /// `smallest-first`: the limit × the job's GPUs (its declared GPU-time).
    GpuTime,
    /// `least-attained`: the attained-service tier, then as `GpuTime`.
    Attained,
}

/// How one leaf orders its pending jobs of equal priority, at the plan's
/// time.
///
/// `smallest-first` is `shortest-first` with `L` × the job's GPUs (all
/// replicas; at least 1) in place of `L` and a bound of
/// [`SMALLEST_FIRST_MAX_AGE`].
///
/// `shortest-first` ranks a job by `L − age / k`, lower first, then older,
/// then by name, where `L` is its declared `timeLimit` capped at
/// [`SHORTEST_FIRST_MAX_AGE`] (none: the cap), `age = now − first seen`
/// (never seen: 0) and `k` is [`SHORTEST_FIRST_AGING`]; since `k·(L − age /
/// k) + now = k·L + first seen`, two waiting jobs keep their order as time
/// passes. A job that has waited
/// [`SHORTEST_FIRST_MAX_AGE`] or longer goes before every job that has not
/// (oldest first among such jobs), so it is never behind a later arrival of
/// its priority: no starvation. `fifo` ranks all jobs alike (today's rule:
/// priority, age, name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafOrder {
    /// `Some((now in ms, size))` under `shortest-first` or
    /// `smallest-first`; `None` under fifo.
    ranked: Option<(i64, Size)>,
}

impl LeafOrder {
    /// The order of leaf `q` at `now`.
    pub fn of(tree: &QueueTree, q: QueueId, now: Timestamp) -> Self {
        let size = match tree.get(q).ordering {
            QueueOrdering::Fifo => None,
            QueueOrdering::ShortestFirst => Some(Size::Limit),
            QueueOrdering::SmallestFirst => Some(Size::GpuTime),
            QueueOrdering::LeastAttained => Some(Size::Attained),
        };
        LeafOrder {
            ranked: size.map(|s| (now.timestamp_millis(), s)),
        }
    }

    /// The job's rank (lower first; see [`Rank`]), in milliseconds.
    pub fn rank(self, job: &JobInfo) -> Rank {
        let Some((now, size)) = self.ranked else {
            return (false, 0);
        };
        let bound = match size {
            Size::Limit => SHORTEST_FIRST_MAX_AGE,
            Size::GpuTime | Size::Attained => SMALLEST_FIRST_MAX_AGE,
        };
        let max_age = bound.as_millis() as i64;
        let since = job.first_seen.map_or(now, |t| t.timestamp_millis());
        if now.saturating_sub(since) >= max_age {
            // Waited long enough: ahead of every job that has not, by age.
            return (false, since);
        }
        let limit = job
            .time_limit
            .map_or(SHORTEST_FIRST_MAX_AGE, |l| l.min(SHORTEST_FIRST_MAX_AGE));
        let mut weighted = (limit.as_millis() as i64).saturating_mul(SHORTEST_FIRST_AGING);
        if size != Size::Limit {
            let gpus = i64::try_from(job.gpus.max(1)).unwrap_or(i64::MAX);
            weighted = weighted.saturating_mul(gpus);
        }
        let rank = since.saturating_add(weighted);
        if size == Size::Attained {
            // The tier first: each tier's ranks below the next tier's.
            let tier = i64::from(job.attained.map_or(0, |a| a.tier));
            return (
                true,
                (tier << TIER_SHIFT) + rank.clamp(0, (1 << TIER_SHIFT) - 1),
            );
        }
        (true, rank)
    }
}

/// [`within_leaf`] as a key that settles almost every comparison without
/// reading the job table again, packed in three words compared in order:
/// priority (high first), rank ([`LeafOrder::rank`]), whether never seen;
/// first seen (old first); the name's first 16 bytes. Equal keys are
/// settled by the whole names.
type LeafKey = (u128, u128, u128);

fn leaf_key(job: &JobInfo, order: LeafOrder) -> LeafKey {
    let (head, seen) = leaf_words(job.priority, order.rank(job), job.first_seen);
    (head, seen, name_prefix(job.name))
}

/// [`LeafKey`]'s first two words: ordered as `(Reverse(priority), rank,
/// never seen, first seen)` are.
fn leaf_words(priority: i32, (ranked, rank): Rank, first_seen: Option<Timestamp>) -> (u128, u128) {
    // Signed numbers as unsigned ones of the same order.
    let flip32 = |v: i32| u128::from((v as u32) ^ (1 << 31));
    let flip64 = |v: i64| u128::from((v as u64) ^ (1 << 63));
    // Bits 96..128: the priority reversed (high first); 95: ranked; 31..95:
    // the rank; 30: never seen.
    let head = (!flip32(priority) & 0xffff_ffff) << 96
        | u128::from(ranked) << 95
        | flip64(rank) << 31
        | u128::from(first_seen.is_none()) << 30;
    let seen = first_seen.map_or(0, time_key);
    (head, seen)
}

/// `t` as a number ordered as the times are (seconds, then nanoseconds):
/// equal only for equal times.
pub(crate) fn time_key(t: Timestamp) -> u128 {
    let flip64 = |v: i64| u128::from((v as u64) ^ (1 << 63));
    flip64(t.timestamp()) << 32 | u128::from(t.timestamp_subsec_nanos())
}

/// The first 16 bytes of `name`, zero-padded, big-endian: ordered as the
/// names are, up to ties between names that share those bytes.
pub(crate) fn name_prefix(name: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let head = &name.as_bytes()[..name.len().min(16)];
    bytes[..head.len()].copy_from_slice(head);
    u128::from_be_bytes(bytes)
}

/// Order inside a leaf: priority (high first), rank under `order`
/// ([`LeafOrder::rank`]: lower first), first seen (old first, never seen
/// last), name.
pub fn within_leaf(a: &JobInfo, b: &JobInfo, order: LeafOrder) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| order.rank(a).cmp(&order.rank(b)))
        .then_with(|| match (&a.first_seen, &b.first_seen) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.name.cmp(b.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64, nanos: u32) -> Option<Timestamp> {
        chrono::DateTime::from_timestamp(secs, nanos)
    }

    proptest::proptest! {
        /// The packed words order jobs as the fields they pack do.
        #[test]
        fn leaf_words_order_as_the_fields(
            a in (-3i32..3, proptest::bool::ANY, -3i64..3, proptest::option::of((-3i64..3, 0u32..3))),
            b in (-3i32..3, proptest::bool::ANY, -3i64..3, proptest::option::of((-3i64..3, 0u32..3))),
            big in proptest::bool::ANY,
        ) {
            let scale = |(p, ranked, rank, seen): (i32, bool, i64, Option<(i64, u32)>)| {
                let (p, rank) = if big { (p.saturating_mul(i32::MAX / 3), rank.saturating_mul(i64::MAX / 3)) } else { (p, rank) };
                let seen = seen.and_then(|(s, n)| at(s * 1_000_000_000, n * 400_000_000));
                (p, (ranked, rank), seen)
            };
            let (a, b) = (scale(a), scale(b));
            let fields = |(p, rank, seen): (i32, Rank, Option<Timestamp>)| {
                (std::cmp::Reverse(p), rank, seen.is_none(), seen)
            };
            proptest::prop_assert_eq!(
                leaf_words(a.0, a.1, a.2).cmp(&leaf_words(b.0, b.1, b.2)),
                fields(a).cmp(&fields(b))
            );
        }

        /// Names order as their prefixes do, where the prefixes differ.
        #[test]
        fn name_prefixes_order_as_names(a in "[a-c\\x00]{0,20}", b in "[a-c\\x00]{0,20}") {
            let (pa, pb) = (name_prefix(&a), name_prefix(&b));
            if pa != pb {
                proptest::prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
            }
        }
    }
}
