//! Per leaf queue: its GPU-time share under contention and its weight share
//! among its siblings (`--fail-on 'share(q) < 0.9 * weight_share'`;
//! docs/simulate.md defines both).
//!
//! - *Contention* of leaf `Q`: the instants at which some job of `Q` is
//!   pending (arrived and not running: before its first start, between a
//!   preemption and its next start, or never started before the end).
//! - `share(Q)`: the GPU-time `Q`'s jobs hold during its contention ÷ the
//!   GPU-time the jobs of `Q` and of its siblings' subtrees hold during it
//!   (siblings: the queues with `Q`'s parent; top-level queues for a
//!   top-level `Q`); 1 when that is zero (`Q` never waited, or nothing ran
//!   while it did: nothing was taken from it).
//! - `weight_share(Q)`: `Q`'s weight ÷ the weights of `Q` and its siblings.

use std::collections::BTreeMap;

use model::spec::Fleet;
use model::time::Timestamp;

use crate::jobs::Prepared;
use crate::replay::Outcome;

/// `(share, weight_share)` per leaf queue that has jobs, four decimals.
pub(crate) fn shares<'a>(
    fleet: &'a Fleet,
    prepared: &'a Prepared,
    out: &Outcome,
) -> BTreeMap<String, (f64, f64)> {
    let Some(end) = out.end else {
        return BTreeMap::new();
    };
    let ms = |t: Timestamp| t.timestamp_millis();
    // The queue tree: parent and weight by name (first document wins, as
    // the engine's).
    let mut tree: Tree<'a> = BTreeMap::new();
    for q in &fleet.queues {
        tree.entry(q.name())
            .or_insert((q.spec.parent.as_deref(), u64::from(q.spec.weight.max(1))));
    }
    // Per job: its leaf, GPUs, runs (end: the replay's end while running)
    // and pending intervals.
    let mut leaves: BTreeMap<&'a str, Vec<usize>> = BTreeMap::new();
    let mut runs: Vec<Vec<(i64, i64)>> = Vec::with_capacity(prepared.jobs.len());
    for (i, (job, run)) in prepared.jobs.iter().zip(&out.runs).enumerate() {
        let spans: Vec<(i64, i64)> = run
            .runs
            .iter()
            .map(|(s, e)| (ms(*s), ms(e.unwrap_or(end))))
            .collect();
        runs.push(spans);
        if run.arrived {
            leaves.entry(job.queue()).or_default().push(i);
        }
    }
    let mut result = BTreeMap::new();
    for (&leaf, members) in &leaves {
        let mut waiting: Vec<(i64, i64)> = Vec::new();
        for &i in members {
            let (job, run) = (&prepared.jobs[i], &out.runs[i]);
            let mut from = Some(ms(job.submit));
            for &(s, e) in &runs[i] {
                if let Some(f) = from.take().filter(|f| *f < s) {
                    waiting.push((f, s));
                }
                from = Some(e);
            }
            // Not ended: pending from its submit or last run's end on.
            if let Some(f) = from.filter(|f| run.end.is_none() && *f < ms(end)) {
                waiting.push((f, ms(end)));
            }
        }
        let contention = Union::new(waiting);
        let level = parent(&tree, leaf);
        let leaf_branch = branch(&tree, level, leaf);
        let (mut own, mut all) = (0u128, 0u128);
        for (&other, members) in &leaves {
            let Some(b) = branch(&tree, level, other) else {
                continue;
            };
            for &i in members {
                let gpus = u128::from(prepared.jobs[i].gpus);
                let held: u128 = runs[i]
                    .iter()
                    .map(|&(s, e)| contention.overlap(s, e) as u128)
                    .sum();
                all += gpus * held;
                if Some(b) == leaf_branch {
                    own += gpus * held;
                }
            }
        }
        let share = if all == 0 {
            1.0
        } else {
            own as f64 / all as f64
        };
        let weights: u64 = tree
            .values()
            .filter(|(p, _)| *p == level)
            .map(|(_, w)| *w)
            .sum();
        let weight = tree.get(leaf).map_or(1, |(_, w)| *w);
        let weight_share = weight as f64 / weights.max(1) as f64;
        result.insert(leaf.to_string(), (round4(share), round4(weight_share)));
    }
    result
}

/// Parent and weight per queue name.
type Tree<'a> = BTreeMap<&'a str, (Option<&'a str>, u64)>;

fn parent<'a>(tree: &Tree<'a>, q: &str) -> Option<&'a str> {
    tree.get(q).and_then(|(p, _)| *p)
}

/// The child of `level` (`None`: the top level) on `q`'s path to the
/// root; `None` when `q` is outside `level`'s subtree.
fn branch<'a>(tree: &Tree<'a>, level: Option<&'a str>, mut q: &'a str) -> Option<&'a str> {
    for _ in 0..=tree.len() {
        let p = parent(tree, q);
        if p == level {
            return Some(q);
        }
        q = p?;
    }
    None
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// A union of intervals, merged and sorted, with prefix sums of lengths.
struct Union {
    spans: Vec<(i64, i64)>,
    /// Length of the spans before each.
    before: Vec<i64>,
}

impl Union {
    fn new(mut spans: Vec<(i64, i64)>) -> Self {
        spans.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let mut before = Vec::with_capacity(merged.len());
        let mut sum = 0;
        for (s, e) in &merged {
            before.push(sum);
            sum += e - s;
        }
        Union {
            spans: merged,
            before,
        }
    }

    /// Length of the union before `t`.
    fn covered(&self, t: i64) -> i64 {
        // Spans starting before t.
        let k = self.spans.partition_point(|(s, _)| *s < t);
        if k == 0 {
            return 0;
        }
        let (s, e) = self.spans[k - 1];
        self.before[k - 1] + (t.min(e) - s)
    }

    /// Length of `[s, e)` inside the union.
    fn overlap(&self, s: i64, e: i64) -> i64 {
        if e <= s {
            return 0;
        }
        self.covered(e) - self.covered(s)
    }
}

#[cfg(test)]
mod tests {
    use super::Union;

    #[test]
    fn union_overlaps() {
        let u = Union::new(vec![(10, 20), (15, 30), (40, 50)]);
        assert_eq!(u.overlap(0, 100), 30);
        assert_eq!(u.overlap(25, 45), 10);
        assert_eq!(u.overlap(30, 40), 0);
        assert_eq!(u.overlap(12, 12), 0);
        assert_eq!(Union::new(Vec::new()).overlap(0, 10), 0);
    }
}
