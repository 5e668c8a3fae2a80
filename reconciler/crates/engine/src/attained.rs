//! Attained service for `least-attained` leaves (Tiresias' discretised
//! least-attained-service): the GPU-time a job has held so far, all runs,
//! in tiers. A job's tier orders its leaf (lower first) and lets it preempt
//! a running job of its leaf and priority in a higher tier
//! ([`crate::preemption`], rule (d)).
//!
//! Attained service is read from the observed state: the GPU-seconds of
//! earlier runs (`ObservedState::attained`) plus, for a running job, its
//! current run (`now − started`) × its GPUs.

use model::observed::{ObservedState, Timestamp};
use model::spec::QueueOrdering;

use crate::jobs::JobInfo;
use crate::quota::QueueTree;

/// The tiers' upper bounds in GPU-seconds: 1, 10 and 100 GPU-hours (a
/// fourth tier holds the rest). A job moves to a higher tier only by
/// running; a job preempted for a lower tier keeps its attained service
/// (and tier) while it waits, so two jobs swap at most once per tier.
pub const TIER_BOUNDS: [u64; 3] = [3_600, 36_000, 360_000];

/// A job's attained service and its tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attained {
    /// GPU-seconds held so far, all runs (the current one included).
    pub gpu_seconds: u64,
    /// Its tier: how many of [`TIER_BOUNDS`] it has reached.
    pub tier: u8,
}

impl Attained {
    /// `gpu_seconds` with its tier.
    pub fn of(gpu_seconds: u64) -> Self {
        let tier = TIER_BOUNDS.iter().filter(|b| gpu_seconds >= **b).count() as u8;
        Attained { gpu_seconds, tier }
    }
}

/// Sets [`JobInfo::attained`] for every job of a `least-attained` leaf:
/// `runs` are the running jobs (job, start) the engine loaded. Notes for
/// the horizon when a running one reaches its next tier.
pub(crate) fn attain(
    tree: &QueueTree,
    jobs: &mut [JobInfo],
    runs: impl Iterator<Item = (crate::ids::JobId, Timestamp)>,
    observed: &ObservedState,
    now: Timestamp,
) {
    let las = |job: &JobInfo| {
        job.queue
            .is_some_and(|q| tree.get(q).ordering == QueueOrdering::LeastAttained)
    };
    if !tree
        .queues
        .iter()
        .any(|q| q.ordering == QueueOrdering::LeastAttained)
    {
        return;
    }
    for job in jobs.iter_mut().filter(|j| las(j)) {
        let earlier = observed.attained.get(job.name).copied().unwrap_or(0);
        job.attained = Some(Attained::of(earlier));
    }
    for (j, started) in runs {
        let job = &mut jobs[j as usize];
        let Some(before) = job.attained else { continue };
        let secs = u64::try_from((now - started).num_seconds()).unwrap_or(0);
        let gpus = job.gpus.max(1);
        let total = before.gpu_seconds.saturating_add(secs.saturating_mul(gpus));
        let attained = Attained::of(total);
        job.attained = Some(attained);
        // When it reaches its next tier (whole seconds: the next second
        // at which `secs × gpus` passes the bound).
        if let Some(bound) = TIER_BOUNDS.get(attained.tier as usize) {
            let need = bound.saturating_sub(before.gpu_seconds).div_ceil(gpus);
            let at = model::time::after(started, model::spec::Duration::from_secs(need));
            if at > now {
                crate::horizon::note(at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers() {
        assert_eq!(Attained::of(0).tier, 0);
        assert_eq!(Attained::of(3_599).tier, 0);
        assert_eq!(Attained::of(3_600).tier, 1);
        assert_eq!(Attained::of(35_999).tier, 1);
        assert_eq!(Attained::of(36_000).tier, 2);
        assert_eq!(Attained::of(360_000).tier, 3);
        assert_eq!(Attained::of(u64::MAX).tier, 3);
    }
}
