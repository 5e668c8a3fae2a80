//! Expected starts of the dashboard's pending jobs, computed after an
//! iteration from its plan and the observed state it was made from.
//!
//! [`whatif::expected_starts`] re-runs the engine at every instant a running
//! job ends, so it costs up to [`HORIZON`]`.max_plans` plans. The loop pays
//! that only when something it depends on changed: the answer is cached
//! under the revision and the observed state's digest without its time
//! ([`crate::live::digest`]); while jobs run on and nothing is placed,
//! preempted or ends, an iteration reuses it. It is computed for the first
//! [`MAX_STARTS`] pending jobs of the plan only (the simulation stops once
//! they are all placed), the ones the page lists first. An iteration that
//! re-used the last plan hands over the very observed state and nodes of
//! the last call ([`StartsCache::starts_of`]): then not even the digest is
//! computed (it serialises every job of the observed state).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use dashboard::view::{MAX_STARTS, StartView};
use engine::PlanInput;
use model::observed::{ObservedNode, ObservedState, Timestamp};
use model::plan::Plan;
use model::spec::{Duration, Fleet};
use whatif::{ExpectedStart, Horizon, StartStatus};

/// How far the loop's simulation looks: 30 days or 50 plans.
pub const HORIZON: Horizon = Horizon {
    until: Duration::from_secs(30 * 24 * 3600),
    max_plans: 50,
};

/// About how much engine time the loop spends on expected starts after an
/// iteration that changed something: a second of plans.
pub const BUDGET_SECONDS: f64 = 1.0;

/// [`HORIZON`] with no more plans than fit [`BUDGET_SECONDS`] when one plan
/// takes `plan_seconds` (none when one plan takes longer than that): on a
/// large fleet the loop's iterations stay bounded.
pub fn horizon_for(plan_seconds: Option<f64>) -> Horizon {
    let fit = match plan_seconds {
        Some(seconds) if seconds > 0.0 => (BUDGET_SECONDS / seconds).floor() as usize,
        _ => HORIZON.max_plans,
    };
    Horizon {
        max_plans: fit.min(HORIZON.max_plans),
        ..HORIZON
    }
}

/// Engine time up to which [`StartsCache::starts_or_later`] computes the
/// expected starts in the loop: longer, they are computed by a thread of
/// their own.
pub const INLINE_SECONDS: f64 = 0.1;

/// The last answer and what it was computed from.
type Last = Mutex<Option<(String, BTreeMap<String, StartView>)>>;

/// The last answer and what it was computed from.
#[derive(Debug, Default)]
pub struct StartsCache {
    last: Arc<Last>,
    /// The revision, observed state (less its nodes) and nodes of the last
    /// [`StartsCache::starts_of`] call, held: while they are the very same
    /// (shared, so unchanged), so is the digest of `last`'s key.
    shared: Arc<Mutex<Option<SharedKey>>>,
    /// What a thread computes the starts of now ([`StartsCache::starts_or_later`]).
    asked: Arc<Mutex<Option<SharedKey>>>,
    /// How many answers threads have given.
    ready: Arc<std::sync::atomic::AtomicU64>,
    /// Every answer computed in the loop ([`StartsCache::compute_inline`]).
    inline: std::sync::atomic::AtomicBool,
    /// The engine's time for the last plan it made: a re-used plan has
    /// none of its own, and costs as much to look ahead from.
    plan_seconds_seen: Mutex<Option<f64>>,
}

/// What [`StartsCache::starts_of`] was last called with.
#[derive(Debug, Clone)]
struct SharedKey {
    revision: Option<String>,
    observed: Arc<ObservedState>,
    nodes: Arc<Vec<ObservedNode>>,
}

impl StartsCache {
    /// [`StartsCache::starts`] of `planned_from` with `nodes` (an
    /// iteration's [`crate::Iteration::planned_from`] and
    /// [`crate::Iteration::nodes`]): when both are the very ones of the
    /// last call (a re-used plan's) and so is the revision, the last answer
    /// without building the observed state or its digest.
    #[allow(clippy::too_many_arguments)] // the iteration's parts, as `starts`
    pub fn starts_of(
        &self,
        fleet: &Fleet,
        planned_from: &Arc<ObservedState>,
        nodes: &Arc<Vec<ObservedNode>>,
        plan: &Plan,
        now: Timestamp,
        revision: Option<&str>,
        plan_seconds: Option<f64>,
    ) -> BTreeMap<String, StartView> {
        {
            let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if let (Some(key), Some((_, starts))) = (shared.as_ref(), last.as_ref())
                && key.revision.as_deref() == revision
                && Arc::ptr_eq(&key.observed, planned_from)
                && Arc::ptr_eq(&key.nodes, nodes)
            {
                return starts.clone();
            }
        }
        let observed = ObservedState {
            nodes: nodes.to_vec(),
            ..ObservedState::clone(planned_from)
        };
        starts_in(
            &self.last,
            (
                &self.shared,
                Some(SharedKey {
                    revision: revision.map(str::to_string),
                    observed: planned_from.clone(),
                    nodes: nodes.clone(),
                }),
            ),
            fleet,
            &observed,
            plan,
            now,
            revision,
            plan_seconds,
        )
    }

    /// [`StartsCache::starts_of`] when it is known or quick to compute
    /// (up to [`INLINE_SECONDS`] of plans); else `None`, and a thread
    /// computes it: [`StartsCache::ready`] counts up when it has, and the
    /// next call with the same inputs gets it.
    #[allow(clippy::too_many_arguments)] // the iteration's parts, as `starts`
    pub fn starts_or_later(
        &self,
        fleet: &Arc<Fleet>,
        planned_from: &Arc<ObservedState>,
        nodes: &Arc<Vec<ObservedNode>>,
        plan: &Arc<Plan>,
        now: Timestamp,
        revision: Option<&str>,
        plan_seconds: Option<f64>,
    ) -> Option<BTreeMap<String, StartView>> {
        let ident = SharedKey {
            revision: revision.map(str::to_string),
            observed: planned_from.clone(),
            nodes: nodes.clone(),
        };
        let same = |key: &SharedKey| {
            key.revision == ident.revision
                && Arc::ptr_eq(&key.observed, &ident.observed)
                && Arc::ptr_eq(&key.nodes, &ident.nodes)
        };
        {
            let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if let (Some(key), Some((_, starts))) = (shared.as_ref(), last.as_ref())
                && same(key)
            {
                return Some(starts.clone());
            }
        }
        let in_the_loop = || {
            self.starts_of(
                fleet,
                planned_from,
                nodes,
                plan,
                now,
                revision,
                plan_seconds,
            )
        };
        let cost = {
            let mut seen = self
                .plan_seconds_seen
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if plan_seconds.is_some() {
                *seen = plan_seconds;
            }
            seen.unwrap_or(0.0)
        };
        let plans = horizon_for(plan_seconds).max_plans as f64;
        if self.inline() || cost * plans <= INLINE_SECONDS {
            return Some(in_the_loop());
        }
        {
            let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
            if asked.as_ref().is_some_and(same) {
                return None;
            }
            *asked = Some(ident.clone());
        }
        let (last, shared, asked, ready) = (
            self.last.clone(),
            self.shared.clone(),
            self.asked.clone(),
            self.ready.clone(),
        );
        let (in_force, planned) = (fleet.clone(), plan.clone());
        let asked_revision = revision.map(str::to_string);
        let spawned = std::thread::Builder::new()
            .name("gitfleet-expected-starts".into())
            .spawn(move || {
                let observed = ObservedState {
                    nodes: ident.nodes.to_vec(),
                    ..ObservedState::clone(&ident.observed)
                };
                starts_in(
                    &last,
                    (&shared, Some(ident.clone())),
                    &in_force,
                    &observed,
                    &planned,
                    now,
                    asked_revision.as_deref(),
                    plan_seconds,
                );
                // Gone before the thread says it is done: the loop lends the
                // fleet in force to the next load only when nothing else
                // holds it.
                drop((in_force, observed, planned));
                let mut asked = asked.lock().unwrap_or_else(|e| e.into_inner());
                if asked.as_ref().is_some_and(|a| {
                    Arc::ptr_eq(&a.observed, &ident.observed)
                        && Arc::ptr_eq(&a.nodes, &ident.nodes)
                        && a.revision == ident.revision
                }) {
                    *asked = None;
                }
                ready.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no thread for the expected starts: computed in the loop");
            *self.asked.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Some(in_the_loop());
        }
        None
    }

    /// How many answers threads of [`StartsCache::starts_or_later`] have
    /// given.
    pub fn ready(&self) -> u64 {
        self.ready.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// From now on [`StartsCache::starts_or_later`] computes every answer
    /// in the loop: for a run of a bounded number of iterations, whose last
    /// files must hold them.
    pub fn compute_inline(&self) {
        self.inline.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether [`StartsCache::compute_inline`] was called.
    fn inline(&self) -> bool {
        self.inline.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether a thread computes expected starts now.
    pub fn computing(&self) -> bool {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The expected starts of the first [`MAX_STARTS`] jobs pending in
    /// `plan`, the plan of `observed` at `now` that took `plan_seconds`
    /// ([`horizon_for`]); from the cache when the revision and the observed
    /// state (less its time) are those of the last call.
    pub fn starts(
        &self,
        fleet: &Fleet,
        observed: &ObservedState,
        plan: &Plan,
        now: Timestamp,
        revision: Option<&str>,
        plan_seconds: Option<f64>,
    ) -> BTreeMap<String, StartView> {
        starts_in(
            &self.last,
            (&self.shared, None),
            fleet,
            observed,
            plan,
            now,
            revision,
            plan_seconds,
        )
    }
}

/// [`StartsCache::starts`] with the answer kept in `last` and the shared
/// inputs it is for (if any) in `shared`, set with it.
#[allow(clippy::too_many_arguments)] // the iteration's parts, as `starts`
fn starts_in(
    last: &Last,
    shared: (&Mutex<Option<SharedKey>>, Option<SharedKey>),
    fleet: &Fleet,
    observed: &ObservedState,
    plan: &Plan,
    now: Timestamp,
    revision: Option<&str>,
    plan_seconds: Option<f64>,
) -> BTreeMap<String, StartView> {
    let key = format!(
        "{}@{}",
        revision.unwrap_or_default(),
        crate::live::digest(observed)
    );
    let known = {
        let last = last.lock().unwrap_or_else(|e| e.into_inner());
        last.as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, starts)| starts.clone())
    };
    let starts = match known {
        Some(starts) => starts,
        None => {
            // Computed with no lock held: the loop reads the last answer
            // meanwhile.
            let input = PlanInput {
                fleet,
                observed,
                now,
                revision,
            };
            let took = std::time::Instant::now();
            let starts = compute(&input, plan, horizon_for(plan_seconds));
            tracing::debug!(
                jobs = starts.len(),
                ms = took.elapsed().as_secs_f64() * 1000.0,
                "expected starts computed"
            );
            starts
        }
    };
    // Both at once (the order of `starts_of`'s reading): never an answer
    // with the inputs of another.
    let (slot, ident) = shared;
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
    *last = Some((key, starts.clone()));
    *slot = ident;
    starts
}

/// One simulation for the plan's first pending jobs.
fn compute(input: &PlanInput<'_>, plan: &Plan, horizon: Horizon) -> BTreeMap<String, StartView> {
    if horizon.max_plans == 0 {
        return BTreeMap::new();
    }
    let first: Vec<&str> = plan
        .pending
        .iter()
        .take(MAX_STARTS)
        .map(|p| &*p.job)
        .collect();
    if first.is_empty() {
        return BTreeMap::new();
    }
    whatif::expected_starts(input, plan, Some(&first), horizon)
        .into_iter()
        .map(|(job, start)| (job, view(start)))
        .collect()
}

/// The dashboard's form of an expected start.
fn view(start: ExpectedStart) -> StartView {
    let status = match start.status {
        StartStatus::Expected => "expected",
        StartStatus::Later => "later",
        StartStatus::Unknown => "unknown",
        StartStatus::Never => "never",
    };
    StartView {
        status: status.to_string(),
        at: start.at,
        text: start.text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One node of 8 GPUs; `run` holds them for 2 hours (its time limit),
    /// `wait` needs them.
    const FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec: {gpu: {model: H100, count: 8}, size: {min: 1, max: 1}}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, default: true}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: q}
spec: {quota: [{model: H100, guaranteed: 8, limit: 8}]}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: run}
spec: {queue: q, gpusPerReplica: 8, timeLimit: 2h}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: wait}
spec: {queue: q, gpusPerReplica: 8, timeLimit: 1h}
"#;

    fn fleet() -> Fleet {
        let loaded = load::load_fleet(&[load::SourceFile::new("fleet.yaml", FLEET)]);
        assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    fn at(text: &str) -> Timestamp {
        chrono::DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    /// `run` placed at 10:00 on the derived node, as the next iteration
    /// observes it at `now`.
    fn observed(fleet: &Fleet, now: Timestamp) -> (ObservedState, Plan) {
        let start = at("2026-11-21T10:00:00Z");
        let empty = model::observed::derive_inventory(fleet);
        let first = engine::plan(&PlanInput {
            fleet,
            observed: &empty,
            now: start,
            revision: Some("r1"),
        });
        let observed = sim::apply_plan(fleet, &empty, &first, start);
        let plan = engine::plan(&PlanInput {
            fleet,
            observed: &observed,
            now,
            revision: Some("r1"),
        });
        (observed, plan)
    }

    #[test]
    fn a_pending_job_starts_when_the_running_one_reaches_its_limit() {
        let fleet = fleet();
        let now = at("2026-11-21T10:30:00Z");
        let (observed, plan) = observed(&fleet, now);
        assert_eq!(&*plan.pending[0].job, "wait");
        let starts = StartsCache::default().starts(&fleet, &observed, &plan, now, Some("r1"), None);
        let wait = &starts["wait"];
        assert_eq!(wait.status, "expected");
        assert_eq!(wait.at.as_deref(), Some("2026-11-21T12:00:00Z"));
        assert!(wait.text.contains("when run ends"), "{}", wait.text);
    }

    #[test]
    fn the_answer_is_kept_while_revision_and_observed_state_stay() {
        let fleet = fleet();
        let now = at("2026-11-21T10:30:00Z");
        let (observed, plan) = observed(&fleet, now);
        let cache = StartsCache::default();
        let first = cache.starts(&fleet, &observed, &plan, now, Some("r1"), None);
        // A later time, the same state: the cached answer (a plan without
        // pending jobs would otherwise give none).
        let later = at("2026-11-21T11:00:00Z");
        let mut emptied = plan.clone();
        emptied.pending.clear();
        assert_eq!(
            cache.starts(&fleet, &observed, &emptied, later, Some("r1"), None),
            first
        );
        // Another revision: computed again.
        assert!(
            cache
                .starts(&fleet, &observed, &emptied, later, Some("r2"), None)
                .is_empty()
        );
    }

    #[test]
    fn the_very_same_observed_state_is_not_digested_again() {
        let fleet = fleet();
        let now = at("2026-11-21T10:30:00Z");
        let (mut observed, plan) = observed(&fleet, now);
        let nodes = Arc::new(std::mem::take(&mut observed.nodes));
        let from = Arc::new(observed);
        let cache = StartsCache::default();
        let first = cache.starts_of(&fleet, &from, &nodes, &plan, now, Some("r1"), None);
        assert!(!first.is_empty());
        let later = at("2026-11-21T11:00:00Z");
        let mut emptied = plan.clone();
        emptied.pending.clear();
        // The same state shared (a re-used plan's): the answer kept.
        assert_eq!(
            cache.starts_of(&fleet, &from, &nodes, &emptied, later, Some("r1"), None),
            first
        );
        // Another revision: computed again.
        assert!(
            cache
                .starts_of(&fleet, &from, &nodes, &emptied, later, Some("r2"), None)
                .is_empty()
        );
        // Back to the first revision, with a copy of the state: the digest
        // finds it the same (computed for `emptied` at r2 last, so again).
        let copy = Arc::new(ObservedState::clone(&from));
        let _ = cache.starts_of(&fleet, &copy, &nodes, &plan, now, Some("r1"), None);
        assert_eq!(
            cache.starts_of(&fleet, &copy, &nodes, &emptied, later, Some("r1"), None),
            first
        );
        // Another state (the running job gone) in a new `Arc`: computed
        // again, never the answer kept for the shared one.
        let changed = Arc::new(ObservedState {
            running: Vec::new(),
            ..ObservedState::clone(&from)
        });
        assert!(
            cache
                .starts_of(&fleet, &changed, &nodes, &emptied, later, Some("r1"), None)
                .is_empty()
        );
    }

    /// Waits until `cache` has given `n` answers computed off the loop.
    fn ready(cache: &StartsCache, n: u64) {
        let waited = std::time::Instant::now();
        while cache.ready() < n {
            assert!(waited.elapsed().as_secs() < 60, "no answer");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The shared inputs of one iteration at 10:30 and their starts
    /// computed in the loop.
    struct Shared {
        fleet: Arc<Fleet>,
        now: Timestamp,
        from: Arc<ObservedState>,
        nodes: Arc<Vec<ObservedNode>>,
        plan: Arc<Plan>,
        inline: BTreeMap<String, StartView>,
    }

    fn shared_inputs() -> Shared {
        let fleet = Arc::new(fleet());
        let now = at("2026-11-21T10:30:00Z");
        let (mut observed, plan) = observed(&fleet, now);
        let nodes = Arc::new(std::mem::take(&mut observed.nodes));
        let from = Arc::new(observed);
        let plan = Arc::new(plan);
        let inline =
            StartsCache::default().starts_of(&fleet, &from, &nodes, &plan, now, Some("r1"), None);
        Shared {
            fleet,
            now,
            from,
            nodes,
            plan,
            inline,
        }
    }

    #[test]
    fn slow_starts_are_computed_off_the_loop_and_given_for_their_inputs_only() {
        let Shared {
            fleet,
            now,
            from,
            nodes,
            plan,
            inline,
        } = shared_inputs();
        assert!(!inline.is_empty());
        // Quick plans: computed at once.
        let cache = StartsCache::default();
        let quick = Some(0.001);
        assert_eq!(
            cache.starts_or_later(&fleet, &from, &nodes, &plan, now, Some("r1"), quick),
            Some(inline.clone())
        );
        assert_eq!(cache.ready(), 0);
        // 0.05 s a plan, 20 plans: a second, by a thread.
        let cache = StartsCache::default();
        let slow = Some(0.05);
        let ask = |revision: &str, from: &Arc<ObservedState>| {
            cache.starts_or_later(&fleet, from, &nodes, &plan, now, Some(revision), slow)
        };
        assert_eq!(ask("r1", &from), None);
        ready(&cache, 1);
        assert!(!cache.computing());
        assert_eq!(ask("r1", &from), Some(inline.clone()));
        // Another revision: never the answer of the first, until computed.
        assert_eq!(ask("r2", &from), None);
        ready(&cache, 2);
        assert_eq!(ask("r2", &from), Some(inline.clone()));
        // Another observed state (the running job gone): computed again.
        let changed = Arc::new(ObservedState {
            running: Vec::new(),
            ..ObservedState::clone(&from)
        });
        assert_eq!(ask("r2", &changed), None);
        ready(&cache, 3);
        let after = ask("r2", &changed).unwrap();
        assert_ne!(after, inline);
    }

    #[test]
    fn a_reused_plan_looks_ahead_off_the_loop_when_its_plan_was_slow() {
        let Shared {
            fleet,
            now,
            from,
            nodes,
            plan,
            ..
        } = shared_inputs();
        // A slow plan (0.05 s), then the same plan re-used (no time of its
        // own) for another observed state: still a thread's work, not the
        // loop's (which once computed it in the loop, for seconds).
        let cache = StartsCache::default();
        let slow = Some(0.05);
        assert_eq!(
            cache.starts_or_later(&fleet, &from, &nodes, &plan, now, Some("r1"), slow),
            None
        );
        ready(&cache, 1);
        let changed = Arc::new(ObservedState {
            running: Vec::new(),
            ..ObservedState::clone(&from)
        });
        assert_eq!(
            cache.starts_or_later(&fleet, &changed, &nodes, &plan, now, Some("r1"), None),
            None
        );
        ready(&cache, 2);
        // Never a slow plan seen: computed at once, as before.
        let fresh = StartsCache::default();
        assert!(
            fresh
                .starts_or_later(&fleet, &changed, &nodes, &plan, now, Some("r1"), None)
                .is_some()
        );
    }

    #[test]
    fn a_bounded_run_computes_slow_starts_in_the_loop() {
        let Shared {
            fleet,
            now,
            from,
            nodes,
            plan,
            inline,
        } = shared_inputs();
        let cache = StartsCache::default();
        cache.compute_inline();
        let slow = Some(0.05);
        assert_eq!(
            cache.starts_or_later(&fleet, &from, &nodes, &plan, now, Some("r1"), slow),
            Some(inline)
        );
        assert_eq!(cache.ready(), 0);
        assert!(!cache.computing());
    }

    #[test]
    fn the_horizon_holds_no_more_plans_than_a_second_of_them() {
        assert_eq!(horizon_for(None).max_plans, HORIZON.max_plans);
        assert_eq!(horizon_for(Some(0.002)).max_plans, HORIZON.max_plans);
        assert_eq!(horizon_for(Some(0.1)).max_plans, 10);
        assert_eq!(horizon_for(Some(0.4)).max_plans, 2);
        assert_eq!(horizon_for(Some(1.7)).max_plans, 0);
        assert_eq!(horizon_for(Some(1.7)).until, HORIZON.until);
    }

    #[test]
    fn a_plan_slower_than_the_budget_computes_no_starts() {
        let fleet = fleet();
        let now = at("2026-11-21T10:30:00Z");
        let (observed, plan) = observed(&fleet, now);
        assert!(!plan.pending.is_empty());
        let cache = StartsCache::default();
        assert!(
            cache
                .starts(&fleet, &observed, &plan, now, Some("r1"), Some(2.0))
                .is_empty()
        );
        // A fast plan gets its answer.
        assert!(
            !StartsCache::default()
                .starts(&fleet, &observed, &plan, now, Some("r1"), Some(0.01))
                .is_empty()
        );
    }
}
