//! `gitfleet simulate`: replay a job trace through the engine in virtual
//! time (DESIGN.md §6a, docs/simulate.md); `--make-fleet` writes the fleet
//! a trace implies.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::simulate::{
    Gate, Limits, Options, Policy, Progress, Report, plot, simulate, simulate_series, write_charts,
};
use reconciler::spec::{Duration, QueueOrdering};
use reconciler::trace::{Source, Trace, TraceFormat, parse};

use super::args::{OutputArgs, SpecArgs};
use crate::render::{SimulateReport, emit};

/// The largest trace file read (the Philly trace is 3.4 MB).
const MAX_TRACE_BYTES: u64 = 512 << 20;

/// Arguments of `gitfleet simulate`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("path", |a| a.help("The fleet repository the trace is replayed on (a directory or a single YAML file)")))]
pub struct Args {
    /// The job trace (CSV).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// The trace's format.
    #[arg(long, value_enum, default_value = "gitfleet")]
    pub trace_format: FormatArg,
    /// The trace's node file (philly: the VC node counts, default
    /// philly_vc_nodes.csv beside the trace; alibaba: the node list, default
    /// alibaba_gpu_v2023_openb_node_list_gpu_node.csv beside it).
    #[arg(long, value_name = "FILE")]
    pub trace_nodes: Option<PathBuf>,
    /// Write the fleet the trace implies into DIR (pools, queues, a default
    /// priority class) and stop.
    #[arg(long, value_name = "DIR")]
    pub make_fleet: Option<PathBuf>,
    /// Divide inter-arrival times by F (4: four times the load).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub arrival_scale: f64,
    /// Declared time limits: the true duration (exact), rounded up to
    /// 15m/1h/4h/12h/24h/72h/168h/720h/2160h (ladder), × a seeded factor in
    /// [1, 20] then the ladder (noisy), or none; default: the trace's own.
    #[arg(long, value_enum)]
    pub limits: Option<LimitsArg>,
    /// Who goes first: gitfleet's engine, or a baseline in the same simulator.
    #[arg(long, value_enum, default_value = "gitfleet")]
    pub policy: PolicyArg,
    /// Seed of --limits noisy.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Under --policy gitfleet: replay with every queue's `ordering` set to
    /// this (default: the fleet's own); e.g. shortest-first with --limits
    /// ladder orders each leaf by declared limits with aging, smallest-first
    /// by declared GPU-time (limit × GPUs) with aging.
    #[arg(long, value_enum)]
    pub ordering: Option<OrderingArg>,
    /// A preempted job resumes with the rest of its duration (as if
    /// checkpointed when it stopped); without it, a preempted job runs its
    /// whole duration again.
    #[arg(long)]
    pub checkpoint: bool,
    /// Stop the replay at this time from the trace's origin (after
    /// --arrival-scale), e.g. 72h.
    #[arg(long, value_name = "DURATION")]
    pub until: Option<Duration>,
    /// Exit 3 when this holds on the report: METRIC OP NUMBER, e.g.
    /// `p95_wait_s > 3600`, `queues.nlp.avg_wait_s >= 600` or
    /// `p95_wait(queue=nlp) > 600` (repeatable; METRIC as in the JSON,
    /// docs/simulate.md).
    #[arg(long, value_name = "EXPR")]
    pub fail_on: Vec<Gate>,
    /// Also write SVG charts into DIR (created if missing): allocation.svg
    /// (allocated GPUs over time), queue-depth.svg (pending jobs per
    /// top-level queue over time), wait-cdf.svg (waits per queue).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub specs: SpecArgs,
}

/// `--trace-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// gitfleet's CSV schema (docs/simulate.md).
    Gitfleet,
    /// The Philly trace (Pollux's philly.csv).
    Philly,
    /// The Alibaba GPU 2023 trace (openb_pod_list_*.csv).
    Alibaba,
}

/// `--limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LimitsArg {
    /// The true duration.
    Exact,
    /// The true duration rounded up to the ladder.
    Ladder,
    /// The true duration × a log-uniform factor in [1, 20], then the ladder.
    Noisy,
    /// No time limits.
    None,
}

/// `--ordering`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OrderingArg {
    /// Priority, then age (first seen), then name.
    Fifo,
    /// Priority, then declared timeLimit minus age (docs/semantics.md).
    ShortestFirst,
    /// Priority, then declared timeLimit × GPUs minus age (docs/semantics.md).
    SmallestFirst,
    /// Priority, then attained-service tier (preempting higher tiers), then
    /// as smallest-first (docs/semantics.md).
    LeastAttained,
}

/// `--policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyArg {
    /// The engine: fair share, priority then the queue ordering, backfill, preemption.
    Gitfleet,
    /// Strict FIFO per queue (head-of-line blocking).
    Fifo,
    /// Greedy FIFO, skipping what does not fit.
    FifoSkip,
    /// Greedy shortest true duration first (an oracle bound).
    SjfOracle,
}

/// Runs `gitfleet simulate`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let trace = read_trace(args)?;
    if let Some(dir) = &args.make_fleet {
        return make_fleet(&trace, dir);
    }
    let Some((fleet, _)) = super::input::load_specs(&args.specs)? else {
        return Ok(ExitCode::FAILURE);
    };
    if args.ordering.is_some() && args.policy != PolicyArg::Gitfleet {
        return Err(miette!(
            "--ordering applies to --policy gitfleet (a baseline's order is its own)"
        ));
    }
    if let Some(dir) = &args.plot {
        plot::create_dir(dir).map_err(|e| miette!("{e}"))?;
    }
    let options = Options {
        arrival_scale: args.arrival_scale,
        limits: match args.limits {
            None => Limits::Trace,
            Some(LimitsArg::Exact) => Limits::Exact,
            Some(LimitsArg::Ladder) => Limits::Ladder,
            Some(LimitsArg::Noisy) => Limits::Noisy,
            Some(LimitsArg::None) => Limits::None,
        },
        policy: match args.policy {
            PolicyArg::Gitfleet => Policy::Gitfleet,
            PolicyArg::Fifo => Policy::Fifo,
            PolicyArg::FifoSkip => Policy::FifoSkip,
            PolicyArg::SjfOracle => Policy::SjfOracle,
        },
        seed: args.seed,
        ordering: args.ordering.map(|o| match o {
            OrderingArg::Fifo => QueueOrdering::Fifo,
            OrderingArg::ShortestFirst => QueueOrdering::ShortestFirst,
            OrderingArg::SmallestFirst => QueueOrdering::SmallestFirst,
            OrderingArg::LeastAttained => QueueOrdering::LeastAttained,
        }),
        checkpoint: args.checkpoint,
        until: args.until,
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(trace.jobs.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} jobs arrived, {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let mut progress = |p: Progress| {
        if let Some(bar) = &bar {
            bar.set_length(p.total);
            bar.set_position(p.arrived);
            bar.set_message(format!("{} plans", p.plans));
        }
    };
    let dropped = trace.dropped.len() as u64;
    let (report, series) = match &args.plot {
        None => (
            simulate(&fleet, &trace.jobs, dropped, &options, &mut progress),
            None,
        ),
        Some(_) => match simulate_series(&fleet, &trace.jobs, dropped, &options, &mut progress) {
            Ok((report, series)) => (Ok(report), Some(series)),
            Err(e) => (Err(e), None),
        },
    };
    let report = report.map_err(|e| miette!("{e}"))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let (Some(dir), Some(series)) = (&args.plot, &series) {
        let files = write_charts(dir, series).map_err(|e| miette!("{e}"))?;
        eprintln!("wrote {} charts to {}", files.len(), dir.display());
    }
    let tripped = tripped(&args.fail_on, &report, None)?;
    emit(&SimulateReport(report), args.output.output)?;
    Ok(gate_exit("simulate", &tripped).unwrap_or(ExitCode::SUCCESS))
}

/// The `--fail-on` expressions that hold on `report` (`base`: the base
/// revision's replay, for `plan --simulate`).
pub fn tripped(gates: &[Gate], report: &Report, base: Option<&Report>) -> Result<Vec<String>> {
    let mut tripped = Vec::new();
    for gate in gates {
        if gate
            .trips_against(report, base)
            .map_err(|e| miette!("{e}"))?
        {
            tripped.push(gate.text().to_string());
        }
    }
    Ok(tripped)
}

/// Exit 3 naming each expression that holds, if any does.
pub fn gate_exit(command: &str, tripped: &[String]) -> Option<ExitCode> {
    for gate in tripped {
        eprintln!("{command}: --fail-on `{gate}` holds");
    }
    (!tripped.is_empty()).then(|| ExitCode::from(3))
}

/// Reads and parses the trace (and its node file).
fn read_trace(args: &Args) -> Result<Trace> {
    read_trace_file(&args.trace, args.trace_format, args.trace_nodes.as_deref())
}

/// Reads and parses the trace `path` in `format`, with its node file
/// (`nodes`, default the format's file beside the trace).
pub fn read_trace_file(path: &Path, format: FormatArg, nodes: Option<&Path>) -> Result<Trace> {
    let (format, sibling) = match format {
        FormatArg::Gitfleet => (TraceFormat::Gitfleet, None),
        FormatArg::Philly => (TraceFormat::Philly, Some("philly_vc_nodes.csv")),
        FormatArg::Alibaba => (
            TraceFormat::Alibaba,
            Some("alibaba_gpu_v2023_openb_node_list_gpu_node.csv"),
        ),
    };
    let jobs_name = path.display().to_string();
    let jobs_text = read(path)?;
    let nodes_path = nodes
        .map(Path::to_path_buf)
        .or_else(|| sibling.map(|name| path.parent().unwrap_or_else(|| Path::new(".")).join(name)));
    let nodes = match &nodes_path {
        Some(path) if format != TraceFormat::Gitfleet => {
            Some((path.display().to_string(), read(path)?))
        }
        _ => None,
    };
    parse(
        format,
        Source {
            name: &jobs_name,
            text: &jobs_text,
        },
        nodes.as_ref().map(|(name, text)| Source { name, text }),
    )
    .map_err(|e| miette!("{e}"))
}

/// A file's text, refusing files over [`MAX_TRACE_BYTES`].
fn read(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot read {}", path.display()))?;
    if meta.len() > MAX_TRACE_BYTES {
        return Err(miette!(
            "{}: {} bytes, more than the {} a trace may have",
            path.display(),
            meta.len(),
            MAX_TRACE_BYTES
        ));
    }
    std::fs::read_to_string(path)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot read {}", path.display()))
}

/// Writes the fleet the trace implies into `dir`.
fn make_fleet(trace: &Trace, dir: &Path) -> Result<ExitCode> {
    let Some(shape) = &trace.shape else {
        return Err(miette!(
            "a gitfleet-format trace does not say what fleet it ran on: --make-fleet needs --trace-format philly or alibaba"
        ));
    };
    std::fs::create_dir_all(dir)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in shape.files() {
        let file = dir.join(name);
        std::fs::write(&file, text)
            .into_diagnostic()
            .wrap_err_with(|| format!("cannot write {}", file.display()))?;
    }
    eprintln!(
        "wrote {} pools and {} queues to {} ({} jobs in the trace, {} rows dropped)",
        shape.pools.len(),
        shape.queues.len(),
        dir.display(),
        trace.jobs.len(),
        trace.dropped.len()
    );
    Ok(ExitCode::SUCCESS)
}
