//! Expected starts of the dashboard's pending jobs, computed after an
//! iteration from the state the next one would plan from.
//!
//! [`whatif::expected_starts`] re-runs the engine at every instant a running
//! job ends, so it costs up to [`HORIZON`]`.max_plans` plans. The loop pays
//! that only when something it depends on changed: the answer is cached
//! under the revision and the observed state's digest without its time
//! ([`crate::live::digest`]); while jobs run on and nothing is placed,
//! preempted or ends, an iteration reuses it. It is computed for the first
//! [`MAX_STARTS`] pending jobs of the plan only (the simulation stops once
//! they are all placed), the ones the page lists first.

use std::collections::BTreeMap;
use std::sync::Mutex;

use dashboard::view::{MAX_STARTS, StartView};
use engine::PlanInput;
use model::observed::{ObservedState, Timestamp};
use model::spec::{Duration, Fleet};
use whatif::{ExpectedStart, Horizon, StartStatus};

/// How far the loop's simulation looks: 30 days or 50 plans.
pub const HORIZON: Horizon = Horizon {
    until: Duration::from_secs(30 * 24 * 3600),
    max_plans: 50,
};

/// The last answer and what it was computed from.
#[derive(Debug, Default)]
pub struct StartsCache {
    last: Mutex<Option<(String, BTreeMap<String, StartView>)>>,
}

impl StartsCache {
    /// The expected starts of the first [`MAX_STARTS`] jobs pending in the
    /// plan of `observed` at `now`, from the cache when the revision and the
    /// observed state (less its time) are those of the last call.
    pub fn starts(
        &self,
        fleet: &Fleet,
        observed: &ObservedState,
        now: Timestamp,
        revision: Option<&str>,
    ) -> BTreeMap<String, StartView> {
        let key = format!(
            "{}@{}",
            revision.unwrap_or_default(),
            crate::live::digest(observed)
        );
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, starts)) = last.as_ref()
            && *k == key
        {
            return starts.clone();
        }
        let starts = compute(fleet, observed, now, revision);
        *last = Some((key, starts.clone()));
        starts
    }
}

/// One plan, then one simulation for its first pending jobs.
fn compute(
    fleet: &Fleet,
    observed: &ObservedState,
    now: Timestamp,
    revision: Option<&str>,
) -> BTreeMap<String, StartView> {
    let input = PlanInput {
        fleet,
        observed,
        now,
        revision,
    };
    let plan = engine::plan(&input);
    let first: Vec<&str> = plan
        .pending
        .iter()
        .take(MAX_STARTS)
        .map(|p| p.job.as_str())
        .collect();
    if first.is_empty() {
        return BTreeMap::new();
    }
    whatif::expected_starts(&input, &plan, Some(&first), HORIZON)
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
