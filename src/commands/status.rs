//! `gitfleet status [--state DIR] [-o text|json]`: what the reconciler last
//! recorded in its state directory.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{Result, miette};
use reconciler::reconcile::status::Status;

use super::args::OutputArgs;
use crate::render::emit;

/// Arguments of `gitfleet status`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("output", |a| a.help("Output format (text or json)")))]
pub struct Args {
    /// The state directory.
    #[arg(long, value_name = "DIR", default_value = ".gitfleet")]
    pub state: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
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
    emit(&status, args.output.output)?;
    Ok(ExitCode::SUCCESS)
}
