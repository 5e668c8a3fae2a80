//! Rule (d), least attained service: in a `least-attained` leaf a pending
//! job may preempt a preemptible running job of its leaf and its priority
//! whose attained-service tier ([`crate::attained`]) is higher than its own
//! (lower priorities stay victims under rule (a)). Tiers only grow by
//! running and a victim keeps its attained service while it waits, so a
//! victim can take its GPUs back only once its preemptor has run into a
//! tier above the victim's: two jobs swap at most once per tier.

use super::super::ids::{ModelId, QueueId};
use super::super::jobs::JobInfo;
use super::super::{Engine, Victim};

/// Whether a preemptor of (priority, tier) may take `v` of its own leaf:
/// lower priority (rule (a)), or its priority and a higher tier.
pub(super) fn may_take((priority, tier): (i32, u8), v: &Victim) -> bool {
    v.priority < priority || (v.priority == priority && v.tier > tier)
}

/// The GPUs of the own leaf's victims that a preemptor of (priority, tier)
/// may take ([`may_take`]), on model `m`: [`super::candidates::upper_bound`]'s share
/// for a `least-attained` leaf.
pub(super) fn bound(e: &Engine, q: QueueId, m: ModelId, priority: i32, tier: u8) -> u64 {
    let Some(list) = e.victim_lists[q as usize].iter().find(|l| l.model == m) else {
        return 0;
    };
    list.victims[list.head..]
        .iter()
        .filter(|v| may_take((priority, tier), v))
        .map(|v| e.runs[v.run as usize].gpus)
        .sum()
}

/// The part of a memo key that rule (d) adds: the job's tier + 1 in a
/// `least-attained` leaf, 0 elsewhere.
pub(super) fn tier_key(job: &JobInfo) -> u8 {
    job.attained.map_or(0, |a| a.tier.saturating_add(1))
}

/// The preempt action's reason under rule (d).
pub(super) fn words(job: &JobInfo, victim: &JobInfo, queue: &str) -> String {
    let (ours, theirs) = (gpu_hours(job), gpu_hours(victim));
    format!(
        "least attained service: {} has held {ours} GPU-hours (tier {}), {} {theirs} (tier {}) in queue {queue}",
        job.name,
        job.attained.map_or(0, |a| a.tier),
        victim.name,
        victim.attained.map_or(0, |a| a.tier),
    )
}

/// Attained GPU-hours to one decimal.
fn gpu_hours(job: &JobInfo) -> String {
    let secs = job.attained.map_or(0, |a| a.gpu_seconds);
    format!("{}.{}", secs / 3600, secs % 3600 * 10 / 3600)
}
