//! `gitfleet plan [PATH] [--rev R [--base B]] [--observed F | --state DIR] [--now T] [-o text|markdown|json] [--detailed-exitcode] [--out FILE] [--suggest [--suggest-jobs N]]`

use std::process::ExitCode;

use miette::Result;
use reconciler::engine::{PlanInput, plan};
use reconciler::whatif::{self, Horizon};

use super::args::{AFTER_REV, InputArgs, OutputArgs};
use super::input::{self, Input};
use crate::render::{PlanReport, SuggestedPlanReport, emit};

/// Arguments of `gitfleet plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Exit 2 when the plan has actions, 0 when it has none (with
    /// --base: 2 when the change changes specs or plan).
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Preview a change: the spec diff BASE → REV (default HEAD), object
    /// by object, and how the plan changes against the same observed state.
    #[arg(long, value_name = "BASE", display_order = AFTER_REV)]
    pub base: Option<String>,
    /// Also save the plan with what it was computed from (specs' revision,
    /// observed-state digest, time, state and executor) to FILE, for
    /// `gitfleet apply FILE` (with --state DIR).
    #[arg(long, value_name = "FILE", conflicts_with = "base")]
    pub out: Option<std::path::PathBuf>,
    /// For pending jobs: what would let them run now (changes to the specs,
    /// each checked by planning with it) and when they are expected to
    /// start (running jobs ending at their time limits, no new jobs). JSON:
    /// `suggestions` and `expected_start` on pending entries.
    #[arg(long, conflicts_with = "base")]
    pub suggest: bool,
    /// How many pending jobs, in fair-share order, get suggestions with
    /// --suggest (each costs a few plans); every pending job gets an
    /// expected start.
    #[arg(long, value_name = "N", default_value_t = 10, requires = "suggest")]
    pub suggest_jobs: usize,
    /// With --base: replay this job trace (CSV) under both revisions' fleets,
    /// as `gitfleet simulate` does by default, and add per queue what the
    /// change does to waits, GPU-hours share and preemptions. JSON:
    /// `simulation`.
    #[arg(long, value_name = "TRACE", display_order = AFTER_REV)]
    pub simulate: Option<std::path::PathBuf>,
    /// The --simulate trace's format.
    #[arg(
        long,
        value_enum,
        default_value = "gitfleet",
        requires = "simulate",
        display_order = AFTER_REV
    )]
    pub trace_format: super::simulate::FormatArg,
    /// With --simulate: exit 3 when this holds on the head revision's
    /// replay, e.g. `p95_wait(queue=nlp) > 1.2 * base` (`base`: the same
    /// metric in the base revision's replay; repeatable).
    #[arg(long, value_name = "EXPR", display_order = AFTER_REV)]
    pub fail_on: Vec<reconciler::simulate::Gate>,
}

/// Runs `gitfleet plan` (with `--base`, the preview of a change).
pub fn run(args: &Args) -> Result<ExitCode> {
    if args.base.is_none() && args.simulate.is_some() {
        return Err(miette::miette!(
            "--simulate TRACE replays the trace under two revisions: it needs --base B (and --rev H, default HEAD); to replay one fleet, run `gitfleet simulate FLEET --trace TRACE`"
        ));
    }
    if args.simulate.is_none() && !args.fail_on.is_empty() {
        return Err(miette::miette!(
            "--fail-on bounds the replay of --simulate TRACE: add --base B --simulate TRACE"
        ));
    }
    if let Some(base) = &args.base {
        return super::preview::run(args, base);
    }
    let Some(Input {
        fleet,
        observed,
        now,
        revision,
    }) = input::load(&args.input)?
    else {
        return Ok(ExitCode::FAILURE);
    };
    let plan = plan(&PlanInput {
        fleet: &fleet,
        observed: &observed,
        now,
        revision: revision.as_deref(),
    });
    if let Some(out) = &args.out {
        super::plan_out::write(out, &args.input, &observed, &plan)?;
    }
    let source = args.input.specs.path.display().to_string();
    let report = PlanReport {
        plan: &plan,
        source: &source,
    };
    if args.suggest {
        let input = PlanInput {
            fleet: &fleet,
            observed: &observed,
            now,
            revision: revision.as_deref(),
        };
        let whatif = whatif::for_plan(&input, &plan, args.suggest_jobs, Horizon::DEFAULT);
        emit(
            &SuggestedPlanReport {
                report,
                whatif: &whatif,
            },
            args.output.output,
        )?;
    } else {
        emit(&report, args.output.output)?;
    }
    let code = if args.detailed_exitcode && !plan.actions.is_empty() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    };
    // The process ends next: handing a large fleet's allocations back one by
    // one would only add time (~40 ms at 150k jobs).
    std::mem::forget(plan);
    std::mem::forget(fleet);
    std::mem::forget(observed);
    Ok(code)
}
