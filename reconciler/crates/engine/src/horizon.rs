//! A plan's time horizon: the earliest instant after `now` at which the plan
//! for the same input could differ only because time passed
//! ([`plan_with_horizon`]). A caller that plans again from an unchanged
//! input before then (the reconcile loop) may reuse the plan, its `time`
//! aside. Conservative: an earlier horizon is always safe, never a later one.
//!
//! Time enters a plan in these places, each of which notes when its outcome
//! could change ([`note`]) while the plan is computed:
//! - a running job is terminated once `start + timeLimit <= now`
//!   (`Engine::new`): its limit end;
//! - shortest-first and smallest-first ordering: a queued job's rank jumps
//!   once it has waited [`crate::order::SHORTEST_FIRST_MAX_AGE`] or
//!   [`crate::order::SMALLEST_FIRST_MAX_AGE`]: every queued job's
//!   `since + bound` (from the input, whatever its queue's ordering);
//!   and a job never seen pending ranks as seen `now`, so its rank moves
//!   with `now` past those of jobs seen before in its leaf (every such
//!   crossing: `note_unseen_ranks`, from `Engine::run_keeping`);
//! - backfill (`backfill::reserve`): the events end at `max(end, now)` or,
//!   for jobs placed in this plan, at `now + limit`; a reservation made from
//!   fixed ends only holds until the first of them is reached, one made
//!   with any end that moves with `now` notes `now` itself (re-plan at
//!   once); a job "ends before the reservation" until `now + limit`
//!   passes its start (`backfill::ends_before`);
//! - scale-down waits: an idle node is removable once `idleSince + wait <=
//!   now` (`scaling`);
//! - the pending reasons' clock texts (`reasons::clock_near`): a time is
//!   printed as `HH:MM` when it is today and with its date otherwise, so the
//!   text changes at the next midnight (UTC), and a time that moves with
//!   `now` (`now + limit`, a new grace end) changes its text at the next
//!   minute it reaches.
//!
//! The plan's own `time` changes with every `now`; it is not counted.

use std::cell::Cell;

use model::observed::{ObservedState, Timestamp};
use model::plan::Plan;

use crate::PlanInput;

/// When a plan could next differ because time passed; `None`: never.
pub type Horizon = Option<Timestamp>;

/// The smallest step of time: a horizon of `now + TICK` means "plan again".
const TICK: chrono::TimeDelta = chrono::TimeDelta::nanoseconds(1);

/// What is being collected on this thread: the plan's `now` and the
/// earliest instant noted so far.
#[derive(Debug, Clone, Copy)]
struct Collecting {
    now: Timestamp,
    earliest: Horizon,
}

thread_local! {
    static COLLECTING: Cell<Option<Collecting>> = const { Cell::new(None) };
}

/// Whether a horizon is being collected on this thread (callers skip work
/// that only serves [`note`] otherwise).
pub(crate) fn collecting() -> bool {
    COLLECTING.with(|c| c.get().is_some())
}

/// Notes that the plan may differ from `at` on (ignored unless after the
/// plan's `now`, or at the end of time, which stands for "never").
pub(crate) fn note(at: Timestamp) {
    COLLECTING.with(|c| {
        if let Some(mut state) = c.get()
            && at > state.now
            && at != chrono::DateTime::<chrono::Utc>::MAX_UTC
        {
            state.earliest = Some(state.earliest.map_or(at, |e| e.min(at)));
            c.set(Some(state));
        }
    });
}

/// Notes that the plan may differ at any instant after `now` (an outcome
/// that moves with time continuously).
pub(crate) fn note_now() {
    if let Some(state) = COLLECTING.with(Cell::get) {
        note(state.now + TICK);
    }
}

/// Notes when `now + limit <= start` (true at `now`) stops holding.
pub(crate) fn note_ends_before(start: Timestamp, limit: model::spec::Duration) {
    if let Some(at) = start.checked_sub_signed(limit.to_chrono()) {
        note(at + TICK);
    }
}

/// Notes what a clock text of `t`, printed at `now`, depends on: the next
/// midnight (today's times lose their date), and, for a `t` that may move
/// with `now` (`moves`), the next minute `t` reaches.
pub(crate) fn note_clock(t: Timestamp, now: Timestamp, moves: bool) {
    if !collecting() {
        return;
    }
    if let Some(midnight) = next_midnight(now) {
        note(midnight);
    }
    if moves {
        // `t` reaches its next whole minute `next - t` after `now` does.
        if let Some(next) = next_minute(t) {
            note(now + (next - t));
        }
    }
}

/// The first instant of the next UTC day after `t`.
fn next_midnight(t: Timestamp) -> Option<Timestamp> {
    let day = t.date_naive().succ_opt()?;
    Some(day.and_hms_opt(0, 0, 0)?.and_utc())
}

/// The first whole minute after `t`.
fn next_minute(t: Timestamp) -> Option<Timestamp> {
    let secs = t
        .timestamp()
        .div_euclid(60)
        .checked_add(1)?
        .checked_mul(60)?;
    chrono::DateTime::from_timestamp(secs, 0)
}

/// Resets the collection when dropped (a panic leaves none behind).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        COLLECTING.with(|c| c.set(None));
    }
}

/// Runs `planning` (a plan of `input`) collecting its horizon.
pub(crate) fn collect(input: &PlanInput, planning: impl FnOnce() -> Plan) -> (Plan, Horizon) {
    COLLECTING.with(|c| {
        c.set(Some(Collecting {
            now: input.now,
            earliest: None,
        }))
    });
    let guard = Guard;
    note_ages(input.observed);
    let plan = planning();
    let earliest = COLLECTING.with(|c| c.get().and_then(|s| s.earliest));
    drop(guard);
    (plan, earliest)
}

/// Ranked orderings' aging: a queued job's rank jumps when its wait reaches
/// a bound (`shortest-first`'s or `smallest-first`'s, in whole
/// milliseconds, as `order` counts; both noted for every queued job).
fn note_ages(observed: &ObservedState) {
    let bounds = [
        crate::order::SHORTEST_FIRST_MAX_AGE.as_millis() as i64,
        crate::order::SMALLEST_FIRST_MAX_AGE.as_millis() as i64,
    ];
    let mut earliest: Option<i64> = None;
    let now = COLLECTING.with(|c| c.get().map(|s| s.now.timestamp_millis()));
    let Some(now) = now else { return };
    for queued in &observed.queued {
        for max_age in bounds {
            let due = queued.since.timestamp_millis().saturating_add(max_age);
            if due > now && earliest.is_none_or(|e| due < e) {
                earliest = Some(due);
            }
        }
    }
    if let Some(at) = earliest.and_then(chrono::DateTime::from_timestamp_millis) {
        note(at);
    }
}

/// In a ranked leaf (`shortest-first`, `smallest-first`) the ranks of jobs
/// never seen pending move with `now` (`now + w`, `w` the job's weighted
/// size) while those of jobs seen do not (`since + w`): their order changes
/// when `now` reaches `rank_a − w_b` for a seen `a` (not aged past the
/// bound: those go first anyway) and an unseen `b`. The ranks are
/// [`crate::order::LeafOrder::rank`]'s own. `pending`: the plan's pending
/// jobs.
pub(crate) fn note_unseen_ranks(
    tree: &crate::quota::QueueTree,
    jobs: &[crate::jobs::JobInfo],
    pending: &[crate::ids::JobId],
    now: Timestamp,
) {
    use model::spec::QueueOrdering;
    if !collecting() {
        return;
    }
    let now_ms = now.timestamp_millis();
    // Per leaf: the seen jobs' ranks and the unseen jobs' weights.
    let mut leaves: rustc_hash::FxHashMap<crate::ids::QueueId, (Vec<i64>, Vec<i64>)> =
        Default::default();
    for &j in pending {
        let job = &jobs[j as usize];
        let Some(q) = job.queue else { continue };
        if tree.get(q).ordering == QueueOrdering::Fifo {
            continue;
        }
        let (ranked, rank) = crate::order::LeafOrder::of(tree, q, now).rank(job);
        if !ranked {
            continue;
        }
        let (seen, unseen) = leaves.entry(q).or_default();
        match job.first_seen {
            Some(_) => seen.push(rank),
            None => unseen.push(rank.saturating_sub(now_ms)),
        }
    }
    // `now + w` reaches `rank_a` at `rank_a − w`: the first still ahead,
    // for each distinct `w` the least rank above `now + w`.
    let mut earliest: Option<i64> = None;
    for (seen, unseen) in leaves.values_mut() {
        if seen.is_empty() || unseen.is_empty() {
            continue;
        }
        seen.sort_unstable();
        unseen.sort_unstable();
        unseen.dedup();
        for w in unseen.iter() {
            let k = seen.partition_point(|r| r.saturating_sub(*w) <= now_ms);
            if let Some(rank) = seen.get(k) {
                let at = rank.saturating_sub(*w);
                if earliest.is_none_or(|e| at < e) {
                    earliest = Some(at);
                }
            }
        }
    }
    if let Some(at) = earliest.and_then(chrono::DateTime::from_timestamp_millis) {
        note(at);
    }
}

/// The plan for `input` ([`crate::plan`]'s, byte for byte) and its
/// horizon: the earliest instant after `input.now` at which the plan for the
/// same input could differ other than in its `time` (`None`: never).
pub fn plan_with_horizon(input: &PlanInput) -> (Plan, Horizon) {
    collect(input, || crate::plan(input))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn minutes_and_midnights() {
        assert_eq!(
            next_minute(t("2026-11-21T10:00:30Z")),
            Some(t("2026-11-21T10:01:00Z"))
        );
        assert_eq!(
            next_minute(t("2026-11-21T10:01:00Z")),
            Some(t("2026-11-21T10:02:00Z"))
        );
        assert_eq!(
            next_midnight(t("2026-11-21T23:59:59Z")),
            Some(t("2026-11-22T00:00:00Z"))
        );
    }

    #[test]
    fn notes_outside_a_collection_are_ignored() {
        note(t("2026-11-21T10:00:30Z"));
        assert!(!collecting());
    }
}
