//! `gitfleet explain JOB [PATH] [--observed F] [--now T] [-o text|json]`

use std::path::Path;
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result};
use reconciler::engine::{PlanInput, explain};
use reconciler::observed::derive_inventory;
use reconciler::report::explanation_text;

use super::plan::{read_observed, resolve_now};
use super::{OutputFormat, load_valid_fleet};

pub fn run(
    job: &str,
    path: &Path,
    observed: Option<&Path>,
    now: Option<&str>,
    output: OutputFormat,
) -> Result<ExitCode> {
    let Some(fleet) = load_valid_fleet(path)? else {
        return Ok(ExitCode::FAILURE);
    };
    let observed = match observed {
        Some(file) => match read_observed(file)? {
            Some(state) => state,
            None => return Ok(ExitCode::FAILURE),
        },
        None => derive_inventory(&fleet),
    };
    let now = resolve_now(now, &observed)?;
    let (_, explanation) = explain(
        &PlanInput {
            fleet: &fleet,
            observed: &observed,
            now,
            revision: None,
        },
        job,
    );
    match output {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&explanation).into_diagnostic()?
        ),
        OutputFormat::Text | OutputFormat::Markdown => print!("{}", explanation_text(&explanation)),
    }
    Ok(if explanation.status == "unknown" {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
