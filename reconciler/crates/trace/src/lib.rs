//! Job traces for `gitfleet simulate`, parsed: gitfleet's own CSV schema
//! ([`gitfleet`]), the Philly trace ([`philly`]) and the Alibaba GPU 2023
//! trace ([`alibaba`]), each into a [`Trace`] of [`TraceJob`]s plus the rows
//! it dropped and why. [`fleet`] writes the fleet a trace implies.
//!
//! Pure: the caller reads the files and hands their text over; every error
//! names the file, the line and the field ([`TraceError`]).

pub mod alibaba;
mod csv;
pub mod fleet;
pub mod gitfleet;
pub mod philly;

use model::spec::Duration;

pub use csv::MAX_ROWS;
pub use fleet::{FleetShape, PoolShape, QueueShape};

/// The largest time (submit offset, duration, time limit) a trace may hold:
/// 100 years, in seconds. Anything larger is refused as out of range.
pub const MAX_SECONDS: f64 = 100.0 * 365.0 * 86_400.0;

/// One job of a trace, in gitfleet's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceJob {
    /// The line of the trace file it came from (1 is the header).
    pub line: u64,
    /// When it was submitted, from the trace's origin.
    pub submit: Duration,
    /// The leaf queue it is submitted to.
    pub queue: String,
    /// Gang size.
    pub replicas: u32,
    /// GPUs per replica (a replica never spans nodes).
    pub gpus_per_replica: u32,
    /// The GPU model it needs; `None`: any.
    pub model: Option<String>,
    /// How long it runs once started (its true duration).
    pub duration: Duration,
    /// Its priority class; `None`: the fleet's default.
    pub priority_class: Option<String>,
    /// The time limit it declares, if any.
    pub time_limit: Option<Duration>,
}

impl TraceJob {
    /// GPUs of the whole gang.
    pub fn gpus(&self) -> u64 {
        u64::from(self.replicas) * u64::from(self.gpus_per_replica)
    }
}

/// A row of the trace that is not replayed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Its line.
    pub line: u64,
    /// Why it is left out.
    pub reason: String,
}

/// A parsed trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// The jobs, in file order.
    pub jobs: Vec<TraceJob>,
    /// The rows left out.
    pub dropped: Vec<Dropped>,
    /// The fleet the trace implies, where the trace says (Philly: its
    /// virtual clusters; Alibaba: its node list).
    pub shape: Option<FleetShape>,
}

/// The trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// gitfleet's CSV schema (docs/simulate.md).
    Gitfleet,
    /// The Philly trace (Pollux's `philly.csv`) with its VC node counts.
    Philly,
    /// The Alibaba GPU 2023 trace (`openb_pod_list_*.csv`) with its node list.
    Alibaba,
}

/// A file's name (as messages show it) and text.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The name messages use.
    pub name: &'a str,
    /// Its contents.
    pub text: &'a str,
}

/// What is wrong with a trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// A field of a row does not parse or is out of range.
    #[error("{file}:{line}: field `{field}`: {message}")]
    Field {
        /// The file.
        file: String,
        /// The line.
        line: u64,
        /// The column.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A row as a whole is wrong (too few or too many fields).
    #[error("{file}:{line}: {message}")]
    Row {
        /// The file.
        file: String,
        /// The line.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// The file as a whole is wrong (no header, no jobs, too many rows).
    #[error("{file}: {message}")]
    File {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

/// Parses `jobs` in `format`; `aux` is the second file the Philly (VC node
/// counts) and Alibaba (node list) formats need, and gitfleet's ignores.
pub fn parse(
    format: TraceFormat,
    jobs: Source<'_>,
    aux: Option<Source<'_>>,
) -> Result<Trace, TraceError> {
    let trace = match format {
        TraceFormat::Gitfleet => gitfleet::parse(jobs)?,
        TraceFormat::Philly => philly::parse(jobs, need(aux, jobs, "philly_vc_nodes.csv")?)?,
        TraceFormat::Alibaba => alibaba::parse(
            jobs,
            need(aux, jobs, "alibaba_gpu_v2023_openb_node_list_gpu_node.csv")?,
        )?,
    };
    if trace.jobs.is_empty() {
        return Err(TraceError::File {
            file: jobs.name.to_string(),
            message: format!("no jobs to replay ({} rows dropped)", trace.dropped.len()),
        });
    }
    Ok(trace)
}

fn need<'a>(
    aux: Option<Source<'a>>,
    jobs: Source<'_>,
    what: &str,
) -> Result<Source<'a>, TraceError> {
    aux.ok_or_else(|| TraceError::File {
        file: jobs.name.to_string(),
        message: format!("this format needs its node file ({what})"),
    })
}

/// Seconds (a decimal number) as a [`Duration`], refusing negative,
/// non-finite and out-of-range values; rounded to the millisecond.
pub(crate) fn seconds(value: f64) -> Result<Duration, String> {
    if !value.is_finite() {
        return Err(format!("{value} is not a number of seconds"));
    }
    if value < 0.0 {
        return Err(format!("{value} is negative"));
    }
    if value > MAX_SECONDS {
        return Err(format!("{value:e} s is out of range (at most 100 years)"));
    }
    // In range: at most 3.2e12 ms, exact in f64 and u64.
    Ok(Duration::from_millis((value * 1000.0).round() as u64))
}

/// A run length of at least one second: a job that takes no time still
/// takes a turn of the simulator.
pub(crate) fn run_length(d: Duration) -> Duration {
    if d.as_millis() < 1000 {
        Duration::from_secs(1)
    } else {
        d
    }
}
