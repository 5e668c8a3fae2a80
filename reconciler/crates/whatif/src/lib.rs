//! What would let a pending job run, and when it is expected to start
//! (`gitfleet explain JOB`, `gitfleet plan --suggest`). Pure: the engine
//! and the simulated world, no I/O.
//!
//! - [`suggest`]: the smallest changes to the specs — raise a queue's limit
//!   on a model, accept another model, relax the topology, run under a
//!   higher priority class (and the jobs it would preempt) — each one kept
//!   only if [`engine::plan`] on the changed fleet places the job.
//! - [`expected_starts`]: an upper bound on when pending jobs start, like
//!   Slurm's `squeue --start`: the simulated [`sim::World`] advanced with no
//!   new jobs, running jobs ending at their declared time limits (never
//!   `gitfleet/sim-duration`: that is the simulator's, not the fleet's), the
//!   engine re-run at each event. One simulation serves every pending job.

mod change;
mod start;
mod suggest;
mod usage;

pub use change::Change;
pub use start::{ExpectedStart, Horizon, StartStatus, expected_starts};
pub use suggest::{Suggestion, suggest};

use std::collections::BTreeMap;

use engine::PlanInput;
use model::plan::Plan;

/// What-if answers for a plan's pending jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WhatIf {
    /// Verified suggestions per job (only the jobs that were looked at; an
    /// empty list is "none found").
    pub suggestions: BTreeMap<String, Vec<Suggestion>>,
    /// Expected start per pending job.
    pub starts: BTreeMap<String, ExpectedStart>,
}

/// Suggestions for the first `max_jobs` pending jobs of `plan` (in the
/// plan's fair-share order; each candidate change costs one engine run)
/// and the expected start of every pending job (one simulation for all).
pub fn for_plan(input: &PlanInput, plan: &Plan, max_jobs: usize, horizon: Horizon) -> WhatIf {
    let first: Vec<&str> = plan
        .pending
        .iter()
        .take(max_jobs)
        .map(|p| &*p.job)
        .collect();
    WhatIf {
        suggestions: suggest(input, plan, &first),
        starts: expected_starts(input, plan, None, horizon),
    }
}

/// The same for one job (`explain`): the simulation stops once it starts.
pub fn for_job(input: &PlanInput, plan: &Plan, job: &str, horizon: Horizon) -> WhatIf {
    WhatIf {
        suggestions: suggest(input, plan, &[job]),
        starts: expected_starts(input, plan, Some(&[job]), horizon),
    }
}
