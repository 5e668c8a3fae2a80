//! `gitfleet plan --base BASE [--rev REV]`: what a change does to the specs
//! and to the plan (the pull-request preview).

use std::process::ExitCode;

use miette::{IntoDiagnostic, Result};
use reconciler::engine::{PlanInput, plan};
use reconciler::load::{Loaded, load_fleet};
use reconciler::observed::derive_inventory;
use reconciler::plan_diff::diff_plans;
use reconciler::report::preview::{
    MAX_ERRORS, PREVIEW_FORMAT_VERSION, Preview, Revision, preview_markdown, preview_text,
};
use reconciler::source::rev_label;
use reconciler::specdiff::{DocSet, diff};

use super::OutputFormat;
use super::git::{SpecsAt, load_reporting, open, read_at};
use super::plan::{PlanArgs, read_observed, resolve_now};

/// Runs the preview of `args.base` → `args.rev` (default `HEAD`).
pub fn run(args: &PlanArgs, base: &str) -> Result<ExitCode> {
    let source = open(args.path)?;
    let head_rev = args.rev.unwrap_or("HEAD");
    let base_specs = read_at(&source, base)?;
    let head_specs = read_at(&source, head_rev)?;
    let base_loaded = load_fleet(&base_specs.files);
    if !base_loaded.is_valid() {
        eprintln!(
            "warning: the base revision {base} does not validate ({} errors): \
             the plan is not compared",
            base_loaded.diagnostics.len()
        );
    }
    let head_loaded = load_reporting(&head_specs, args.path);
    let spec = diff(
        &DocSet::from_files(&base_specs.files, Some(&rev_label(&base_specs.rev))),
        &DocSet::from_files(&head_specs.files, Some(&rev_label(&head_specs.rev))),
    );
    let plan_diff = if base_loaded.is_valid() && head_loaded.is_valid() {
        let observed = match args.observed {
            Some(file) => match read_observed(file)? {
                Some(state) => state,
                None => return Ok(ExitCode::FAILURE),
            },
            // the world before the change: the base revision's pools
            None => derive_inventory(&base_loaded.fleet),
        };
        let now = resolve_now(args.now, &observed)?;
        let at = |loaded: &Loaded, specs: &SpecsAt| {
            plan(&PlanInput {
                fleet: &loaded.fleet,
                observed: &observed,
                now,
                revision: Some(&specs.commit),
            })
        };
        Some(diff_plans(
            &at(&base_loaded, &base_specs),
            &at(&head_loaded, &head_specs),
        ))
    } else {
        None
    };
    let changed = spec.has_changes() || plan_diff.as_ref().is_some_and(|p| p.has_changes());
    let preview = Preview {
        format_version: PREVIEW_FORMAT_VERSION,
        path: args.path.display().to_string(),
        base: revision(&base_specs, &base_loaded),
        head: revision(&head_specs, &head_loaded),
        spec,
        plan: plan_diff,
        changed,
    };
    match args.output {
        OutputFormat::Text => print!("{}", preview_text(&preview)),
        OutputFormat::Markdown => print!("{}", preview_markdown(&preview)),
        OutputFormat::Json => {
            let text = serde_json::to_string_pretty(&preview).into_diagnostic()?;
            println!("{text}");
        }
    }
    Ok(if !preview.head.valid {
        ExitCode::FAILURE
    } else if args.detailed_exitcode && preview.changed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn revision(specs: &SpecsAt, loaded: &Loaded) -> Revision {
    Revision {
        rev: specs.rev.clone(),
        commit: specs.commit.clone(),
        valid: loaded.is_valid(),
        errors: loaded
            .diagnostics
            .iter()
            .take(MAX_ERRORS)
            .map(ToString::to_string)
            .collect(),
        error_count: loaded.diagnostics.len(),
    }
}
