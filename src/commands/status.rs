//! `gitfleet status [--state DIR] [-o text|json] [--export-observed FILE]`:
//! what the reconciler last recorded in its state directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::reconcile::live::OBSERVED_FILE;
use reconciler::reconcile::status::Status;

use super::input::read_observed;

use super::args::OutputArgs;
use crate::render::emit;

/// Arguments of `gitfleet status`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("output", super::args::text_or_json))]
pub struct Args {
    /// The state directory.
    #[arg(long, value_name = "DIR", default_value = ".gitfleet")]
    pub state: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Also write the live state (job records and nodes as last observed)
    /// to FILE as an observed-state file, for `plan --observed FILE` (CI
    /// previews against the live fleet).
    #[arg(long, value_name = "FILE")]
    pub export_observed: Option<PathBuf>,
}

/// Runs `gitfleet status`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let state = &args.state;
    let status = Status::read(state).map_err(|e| {
        miette!(
            "no status in {}: {e} (run `gitfleet reconcile` or `gitfleet apply` with --state {} first)",
            state.display(),
            state.display()
        )
    })?;
    if let Some(out) = &args.export_observed {
        export_observed(state, out)?;
    }
    emit(&status, args.output.output)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the live state recorded in `state` to `out` (checked: a file that
/// `plan --observed` would refuse is not written).
fn export_observed(state: &Path, out: &Path) -> Result<()> {
    let live = state.join(OBSERVED_FILE);
    let Some(observed) = read_observed(&live)? else {
        return Err(miette!("{}: not a valid observed state", live.display()));
    };
    let text = serde_json::to_string_pretty(&observed).into_diagnostic()? + "\n";
    std::fs::write(out, text)
        .into_diagnostic()
        .wrap_err_with(|| format!("--export-observed {}", out.display()))?;
    eprintln!(
        "Wrote the live state ({} nodes, {} running, {} queued) to {}",
        observed.nodes.len(),
        observed.running.len(),
        observed.queued.len(),
        out.display()
    );
    Ok(())
}
