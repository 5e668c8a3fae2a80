//! `gitfleet simulate`: a job trace replayed in virtual time through the
//! engine ([`engine::plan`]) and the `sim` executor's world ([`sim::World`])
//! — no scheduling rule of its own. At each event instant: the world's
//! completions (and ends of grace periods) first, then the arrivals, then
//! one plan, whose actions the world carries out (placed jobs run for their
//! trace duration). Baselines ([`Policy`]) change only what the engine is
//! shown: the order of pending jobs, their declared limits and classes, and
//! for strict FIFO which jobs it may see.
//!
//! docs/simulate.md defines every metric of the [`Report`].

mod compare;
pub mod gate;
mod jobs;
pub mod limits;
mod metrics;
pub mod plot;
mod policy;
mod replay;
mod report;
mod samples;
mod shares;

use std::borrow::Cow;

use model::spec::{Duration, Fleet, QueueOrdering};
use model::time::Timestamp;

pub use compare::{Comparison, Delta, QueueSide, Side};
pub use gate::{Gate, GateError};
pub use limits::Limits;
pub use metrics::{Metrics, QueueMetrics, Report, Totals};
pub use plot::{PlotError, write_charts};
pub use policy::Policy;
pub use report::{comparison_markdown, comparison_text, markdown, text};
pub use samples::Series;

/// How the replay runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Inter-arrival times are divided by this (> 0): 4 is four times the load.
    pub arrival_scale: f64,
    /// Declared time limits.
    pub limits: Limits,
    /// The ordering policy.
    pub policy: Policy,
    /// Seed of `--limits noisy`.
    pub seed: u64,
    /// Stop at this time from the trace's origin (after scaling).
    pub until: Option<Duration>,
    /// `--ordering`: every queue's `ordering` for the replay under
    /// [`Policy::Gitfleet`] (`None`: the fleet's own). Baselines always
    /// replay with every queue's ordering removed (fifo): their order is
    /// their own.
    pub ordering: Option<QueueOrdering>,
    /// `--checkpoint`: a preempted job resumes with the rest of its
    /// duration (checkpointed when it stops); otherwise it runs its whole
    /// duration again.
    pub checkpoint: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            arrival_scale: 1.0,
            limits: Limits::Trace,
            policy: Policy::Gitfleet,
            seed: 1,
            until: None,
            ordering: None,
            checkpoint: false,
        }
    }
}

/// The most arrival scale the replay accepts.
pub const MAX_ARRIVAL_SCALE: f64 = 1e6;

/// The least arrival scale the replay accepts (a trace stretched 1000×:
/// 100 years of submits stay within `chrono`'s range).
pub const MIN_ARRIVAL_SCALE: f64 = 1e-3;

/// Why a replay cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimulateError {
    /// `--arrival-scale` is not within [`MIN_ARRIVAL_SCALE`]..=[`MAX_ARRIVAL_SCALE`].
    #[error("--arrival-scale {0}: must be a number from 0.001 to 1000000")]
    ArrivalScale(String),
    /// A trace job names a queue the fleet lacks, or one that is not a leaf.
    #[error("trace line {line}: queue `{queue}` {why}")]
    Queue {
        /// The trace line.
        line: u64,
        /// The queue.
        queue: String,
        /// "is not in the fleet" or "is not a leaf queue".
        why: &'static str,
    },
    /// A trace job names a priority class the fleet lacks.
    #[error("trace line {line}: priority class `{class}` is not in the fleet")]
    PriorityClass {
        /// The trace line.
        line: u64,
        /// The class.
        class: String,
    },
    /// The replay kept planning at one instant without time moving on.
    #[error("at {at}: the replay made no progress in 10000 plans at one instant")]
    Livelock {
        /// When.
        at: Timestamp,
    },
    /// The world refused an action of the engine's plan: a bug, not an
    /// input problem.
    #[error("at {at}: the simulated world refused the engine's action: {error}")]
    World {
        /// When.
        at: Timestamp,
        /// The world's refusal.
        error: sim::WorldError,
    },
}

/// Where the replay stands, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Jobs arrived so far.
    pub arrived: u64,
    /// Jobs in the trace (replayed ones).
    pub total: u64,
    /// Plans computed so far.
    pub plans: u64,
}

/// Replays `trace` on `fleet` (its own jobs are ignored) under `options`;
/// `dropped` is the number of rows the trace adapter left out (added to the
/// report's). `progress` is called now and then.
pub fn simulate(
    fleet: &Fleet,
    trace: &[trace::TraceJob],
    dropped: u64,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, SimulateError> {
    replay(fleet, trace, dropped, options, progress).map(|(report, _)| report)
}

/// One job's life in a replay, times from the origin of virtual time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLife {
    /// Its trace line.
    pub line: u64,
    /// When it arrived (after `--arrival-scale`).
    pub submit: Duration,
    /// GPUs of the gang.
    pub gpus: u64,
    /// Its runs, (start, end); `None`: still running at the end.
    pub runs: Vec<(Duration, Option<Duration>)>,
    /// When it ended (exit or termination).
    pub end: Option<Duration>,
    /// How many times it was preempted.
    pub preemptions: u32,
}

/// [`simulate`], with every replayed job's life (in arrival order).
pub fn replay(
    fleet: &Fleet,
    trace: &[trace::TraceJob],
    dropped: u64,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Report, Vec<JobLife>), SimulateError> {
    let (prepared, outcome, report) = run(fleet, trace, dropped, options, false, progress)?;
    let offset = |t: Timestamp| {
        Duration::from_millis((t - origin()).num_milliseconds().max(0).unsigned_abs())
    };
    let lives = prepared
        .jobs
        .iter()
        .zip(&outcome.runs)
        .filter(|(_, run)| run.arrived)
        .map(|(job, run)| JobLife {
            line: job.line,
            submit: offset(job.submit),
            gpus: job.gpus,
            runs: run
                .runs
                .iter()
                .map(|(s, e)| (offset(*s), e.map(offset)))
                .collect(),
            end: run.end.map(offset),
            preemptions: run.preemptions,
        })
        .collect();
    Ok((report, lives))
}

/// [`simulate`], with the [`Series`] that `--plot` draws (recorded at
/// each event instant; the replay without it records nothing).
pub fn simulate_series(
    fleet: &Fleet,
    trace: &[trace::TraceJob],
    dropped: u64,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Report, Series), SimulateError> {
    let (prepared, mut outcome, report) = run(fleet, trace, dropped, options, true, progress)?;
    Ok((report, samples::series(&prepared, &mut outcome)))
}

/// The replay and its report; `record`: keep the samples of `--plot`.
fn run(
    fleet: &Fleet,
    trace: &[trace::TraceJob],
    dropped: u64,
    options: &Options,
    record: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(jobs::Prepared, replay::Outcome, Report), SimulateError> {
    let scale = options.arrival_scale;
    if !(MIN_ARRIVAL_SCALE..=MAX_ARRIVAL_SCALE).contains(&scale) {
        return Err(SimulateError::ArrivalScale(scale.to_string()));
    }
    let fleet = replayed_fleet(fleet, options);
    let prepared = jobs::prepare(&fleet, trace, options)?;
    let outcome = replay::run(&fleet, &prepared, options, record, progress)?;
    let report = metrics::report(
        &fleet,
        &prepared,
        &outcome,
        options.policy,
        dropped + prepared.dropped.len() as u64,
    );
    Ok((prepared, outcome, report))
}

/// The fleet the replay plans on: under gitfleet with `--ordering`, every
/// queue with that ordering; under a baseline, every queue's ordering
/// removed (fifo); else the fleet as it is.
fn replayed_fleet<'a>(fleet: &'a Fleet, options: &Options) -> Cow<'a, Fleet> {
    let ordering = match options.policy {
        Policy::Gitfleet => match options.ordering {
            Some(o) => Some(o),
            None => return Cow::Borrowed(fleet),
        },
        _ => None,
    };
    if fleet.queues.iter().all(|q| q.spec.ordering == ordering) {
        return Cow::Borrowed(fleet);
    }
    let mut fleet = fleet.clone();
    for q in &mut fleet.queues {
        q.spec.ordering = ordering;
    }
    Cow::Owned(fleet)
}

/// The origin of virtual time (any fixed instant: reports are relative).
pub fn origin() -> Timestamp {
    chrono::DateTime::<chrono::Utc>::from_timestamp(1_767_225_600, 0).unwrap_or_default()
}
