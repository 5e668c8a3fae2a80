//! `gitfleet explain JOB [PATH] [--rev REV] [--observed F] [--now T] [-o text|json]`

use std::process::ExitCode;

use miette::Result;
use reconciler::engine::{PlanInput, explain};
use reconciler::whatif::{self, Horizon};

use super::args::{InputArgs, OutputArgs};
use super::input::{self, Input};
use crate::render::{ExplainReport, emit};

/// Arguments of `gitfleet explain`.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("path", |a| a.help("The fleet repository")),
    mut_arg("observed", |a| a.help("Observed state (YAML or JSON)")),
    mut_arg("now", |a| a.help("Decision time (RFC 3339)")),
    mut_arg("output", super::args::text_or_json),
)]
pub struct Args {
    /// The job's name.
    pub job: String,
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What the reconciler keeping `state` recorded of `job`'s past: its last
/// stop and its preemptions (from the status it writes every iteration, so
/// this works while it runs). Nothing when there is no status.
fn history(state: &std::path::Path, job: &str) -> Vec<String> {
    let Ok(status) = reconciler::reconcile::status::Status::read(state) else {
        return Vec::new();
    };
    let Some(line) = status.job_list.iter().find(|j| j.job == job) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(stop) = &line.last_stop {
        out.push(format!("last {}", stop.words()));
    }
    if line.preemptions > 0 {
        out.push(format!(
            "preempted {} time{} in all (`gitfleet audit --job {job}` lists them)",
            line.preemptions,
            if line.preemptions == 1 { "" } else { "s" }
        ));
    }
    out
}

/// Runs `gitfleet explain`; exits 1 for a job the fleet does not have.
pub fn run(args: &Args) -> Result<ExitCode> {
    let Some(Input {
        fleet,
        observed,
        now,
        revision,
    }) = input::load(&args.input)?
    else {
        return Ok(ExitCode::FAILURE);
    };
    let input = PlanInput {
        fleet: &fleet,
        observed: &observed,
        now,
        revision: revision.as_deref(),
    };
    let (plan, mut explanation) = explain(&input, &args.job);
    if let Some(state) = &args.input.observed.state {
        explanation.history = history(state, &args.job);
    }
    // What would let a pending job run, and when it is expected to start.
    let (suggestions, expected_start) = if explanation.status == "pending" {
        let mut what = whatif::for_job(&input, &plan, &args.job, Horizon::DEFAULT);
        (
            what.suggestions.remove(&args.job),
            what.starts.remove(&args.job),
        )
    } else {
        (None, None)
    };
    let status = explanation.status.clone();
    emit(
        &ExplainReport {
            explanation,
            suggestions,
            expected_start,
        },
        args.output.output,
    )?;
    Ok(if status == "unknown" {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
