//! `gitfleet plan [PATH] [--rev R [--base B]] [--observed F] [--now T] [-o text|markdown|json] [--detailed-exitcode]`

use std::path::Path;
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::diag::Diagnostic;
use reconciler::engine::{PlanInput, plan};
use reconciler::load::parse_observed;
use reconciler::observed::{ObservedState, Timestamp, derive_inventory};
use reconciler::plan::Plan;
use reconciler::report::{plan_markdown, plan_text};
use reconciler::spec::Fleet;

use super::{OutputFormat, load_valid_fleet};

/// Options of `gitfleet plan`.
pub struct PlanArgs<'a> {
    pub path: &'a Path,
    pub observed: Option<&'a Path>,
    pub now: Option<&'a str>,
    pub output: OutputFormat,
    pub detailed_exitcode: bool,
    /// Read the specs from this Git revision instead of the directory.
    pub rev: Option<&'a str>,
    /// Preview the change from this revision to `rev` (default `HEAD`).
    pub base: Option<&'a str>,
}

pub fn run(args: &PlanArgs) -> Result<ExitCode> {
    if let Some(base) = args.base {
        return super::preview::run(args, base);
    }
    // The observed file is parsed on its own thread while the fleet loads:
    // the load's single-threaded stretches leave a core free for it.
    std::thread::scope(|scope| {
        let observed_job = args
            .observed
            .map(|file| scope.spawn(move || parse_observed_file(file)));
        let loaded = load_specs(args)?;
        let observed = match observed_job {
            Some(job) => job
                .join()
                .map_err(|_| miette!("reading the observed state failed"))?,
            None => Ok(None),
        };
        let Some((fleet, revision)) = loaded else {
            return Ok(ExitCode::FAILURE);
        };
        let observed = match observed? {
            Some(Ok(state)) => state,
            Some(Err(diags)) => {
                for d in &diags {
                    eprintln!("{d}");
                }
                return Ok(ExitCode::FAILURE);
            }
            None => derive_inventory(&fleet),
        };
        let code = plan_and_print(args, &fleet, &observed, revision.as_deref());
        // The process ends next: handing a large fleet's allocations back one
        // by one would only add time (~40 ms at 150k jobs).
        std::mem::forget(fleet);
        std::mem::forget(observed);
        code
    })
}

/// The valid fleet (and its commit with `--rev`); `None` when invalid (its
/// problems are printed).
fn load_specs(args: &PlanArgs) -> Result<Option<(Fleet, Option<String>)>> {
    Ok(match args.rev {
        Some(rev) => {
            let source = super::git::open(args.path)?;
            let specs = super::git::read_at(&source, rev)?;
            let loaded = super::git::load_reporting(&specs, args.path);
            if !loaded.is_valid() {
                return Ok(None);
            }
            Some((loaded.fleet, Some(specs.commit)))
        }
        None => load_valid_fleet(args.path)?.map(|fleet| (fleet, None)),
    })
}

fn plan_and_print(
    args: &PlanArgs,
    fleet: &Fleet,
    observed: &ObservedState,
    revision: Option<&str>,
) -> Result<ExitCode> {
    let now = resolve_now(args.now, observed)?;
    let plan = plan(&PlanInput {
        fleet,
        observed,
        now,
        revision,
    });
    print_plan(&plan, args.output, &args.path.display().to_string())?;
    let code = if args.detailed_exitcode && !plan.actions.is_empty() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    };
    // As the fleet's: the process ends next.
    std::mem::forget(plan);
    Ok(code)
}

/// Reads and parses an observed-state file without printing: `Some(Err)`
/// holds its problems.
fn parse_observed_file(file: &Path) -> Result<Option<Result<ObservedState, Vec<Diagnostic>>>> {
    let text = std::fs::read_to_string(file)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot read {}", file.display()))?;
    Ok(Some(parse_observed(&file.display().to_string(), &text)))
}

/// Reads an observed-state file; prints its problems and returns `None` when invalid.
pub fn read_observed(file: &Path) -> Result<Option<ObservedState>> {
    let text = std::fs::read_to_string(file)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot read {}", file.display()))?;
    match parse_observed(&file.display().to_string(), &text) {
        Ok(state) => Ok(Some(state)),
        Err(diags) => {
            for d in &diags {
                eprintln!("{d}");
            }
            Ok(None)
        }
    }
}

/// `--now`, else the observed state's time, else the clock (whole seconds).
pub fn resolve_now(now: Option<&str>, observed: &ObservedState) -> Result<Timestamp> {
    if let Some(text) = now {
        return chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|e| {
                miette!("--now {text:?}: not an RFC 3339 time like 2026-11-21T10:00:00Z ({e})")
            });
    }
    if let Some(t) = observed.time {
        return Ok(t);
    }
    let now = chrono::Utc::now();
    Ok(chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now))
}

fn print_plan(plan: &Plan, output: OutputFormat, source: &str) -> Result<()> {
    match output {
        OutputFormat::Json => {
            // Streamed: a large fleet's plan is tens of MB of JSON.
            use std::io::Write;
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            serde_json::to_writer_pretty(&mut out, plan).into_diagnostic()?;
            writeln!(out).into_diagnostic()?;
            out.flush().into_diagnostic()?;
        }
        OutputFormat::Text => print!("{}", plan_text(plan, source)),
        OutputFormat::Markdown => print!("{}", plan_markdown(plan, source)),
    }
    Ok(())
}
