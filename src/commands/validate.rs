//! `gitfleet validate [PATH] [--rev REV] [-o text|json]`

use std::collections::BTreeSet;
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result};
use reconciler::load::{fs::read_fleet_dir, load_fleet};
use reconciler::spec::Kind;

use super::args::{OutputArgs, SpecArgs};
use reconciler::report::validation::{VALIDATION_FORMAT_VERSION, Validation, ValidationError};

use crate::render::emit;

/// Arguments of `gitfleet validate`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("rev", |a| a.help(
    "Read the specs from this Git revision (a branch, tag, commit or `HEAD~1`) \
     instead of the files on disk; PATH may be a subdirectory of the repository, \
     a bare repository or a worktree"
)))]
#[command(mut_arg("output", super::args::text_or_json))]
pub struct Args {
    #[command(flatten)]
    pub specs: SpecArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `gitfleet validate`: every problem as `FILE:LINE:COL: message` and a
/// summary line on stdout (or one JSON document); exits 1 when the fleet is
/// invalid.
pub fn run(args: &Args) -> Result<ExitCode> {
    let specs = &args.specs;
    let path = &specs.path;
    let rev = specs.revision().map(str::to_string);
    let (files, commit) = match &rev {
        Some(rev) => {
            let source = super::git::open_specs(specs)?;
            let specs = super::git::read_at(&source, rev)?;
            (specs.files, Some(specs.commit))
        }
        None => (read_fleet_dir(path).into_diagnostic()?, None),
    };
    let loaded = load_fleet(&files);
    let valid = loaded.is_valid();
    let report = Validation {
        format_version: VALIDATION_FORMAT_VERSION,
        path: path.display().to_string(),
        rev,
        commit,
        valid,
        files: files.len(),
        documents: Kind::ALL
            .iter()
            .map(|&k| (k.as_str(), loaded.fleet.count(k)))
            .collect(),
        files_with_errors: loaded
            .diagnostics
            .iter()
            .map(|d| &*d.origin.file)
            .collect::<BTreeSet<&str>>()
            .len(),
        error_count: loaded.diagnostics.len(),
        errors: loaded
            .diagnostics
            .iter()
            .map(|d| ValidationError {
                file: d.origin.file.to_string(),
                line: (d.origin.pos.line > 0).then_some(d.origin.pos.line),
                column: (d.origin.pos.line > 0).then_some(d.origin.pos.column),
                message: d.message.clone(),
                text: d.to_string(),
            })
            .collect(),
    };
    emit(&report, args.output.output)?;
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
