//! `gitfleet apply FILE` with a saved plan (`plan --state DIR --out FILE`):
//! exactly that plan's actions, or nothing with the reason when the specs
//! or the live state it was computed from changed (Terraform's "Saved plan
//! is stale"). Everything is checked before the first action; no question
//! is asked (the plan was reviewed).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::reconcile::FleetSource;
use reconciler::reconcile::run::{Shared, record};
use reconciler::reconcile::saved::{SavedPlan, SpecsSource};
use reconciler::source::GitSource;

use super::apply::{Args, allow_prune, carry_out, refused};
use super::args::DEFAULT_BRANCH;
use super::reconcile::{MIRROR_DIR, Setup, setup_from};
use crate::executor::runtime;
use crate::render::{PlanReport, emit};

/// The saved plan in `path`, when `path` is a file meant as one (a JSON
/// object naming the saved-plan format, or a plan's JSON); `None` for a
/// fleet path. A file meant as a saved plan but not a valid one is an error.
pub fn read_if_saved(path: &Path) -> Result<Option<(PathBuf, SavedPlan)>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot read {}", path.display()))?;
    if !SavedPlan::sniff(&text) {
        return Ok(None);
    }
    let saved = SavedPlan::parse(&path.display().to_string(), &text).into_diagnostic()?;
    Ok(Some((path.to_path_buf(), saved)))
}

/// Applies a saved plan read from `file`.
pub fn run(args: &Args, (file, saved): (PathBuf, SavedPlan)) -> Result<ExitCode> {
    let source_args = &args.source;
    if source_args.branch.is_some() || source_args.repo.is_some() || source_args.no_git {
        return Err(miette!(
            "{}: a saved plan names its own specs ({}); --branch, --repo and --no-git do not apply to it",
            file.display(),
            saved.specs.path
        ));
    }
    let stale = |e: &dyn std::fmt::Display| {
        miette!(
            "Saved plan {} is stale: {e}; nothing applied. Make a new plan with `gitfleet plan --state DIR --out FILE`",
            file.display()
        )
    };
    // Refused before the state is opened (or a wrong directory created).
    saved
        .check_target(&source_args.state)
        .map_err(|e| stale(&e))?;
    let fleet_path = PathBuf::from(&saved.specs.path);
    let source = match saved.specs.source {
        SpecsSource::Git => FleetSource::Git {
            repo: GitSource::discover(&fleet_path)
                .into_diagnostic()
                .wrap_err_with(|| format!("{}: the plan's specs", file.display()))?,
            rev: saved
                .specs
                .rev
                .clone()
                .unwrap_or_else(|| saved.specs.revision.clone()),
        },
        SpecsSource::Remote => FleetSource::Remote {
            url: saved.specs.url.clone().ok_or_else(|| {
                miette!(
                    "{}: not a valid saved plan: specs.url is missing for remote specs",
                    file.display()
                )
            })?,
            mirror: source_args.state.join(MIRROR_DIR),
            branch: saved
                .specs
                .rev
                .clone()
                .unwrap_or_else(|| DEFAULT_BRANCH.to_string()),
            subdir: saved.specs.path.clone(),
            repo: None,
        },
        SpecsSource::Dir if fleet_path.exists() => FleetSource::Dir { path: fleet_path },
        SpecsSource::Dir => {
            return Err(stale(&format_args!(
                "its specs {} are gone",
                fleet_path.display()
            )));
        }
    };
    let Setup {
        mut reconciler,
        mut clock,
    } = setup_from(source_args, source)?;
    if args.allow_prune {
        reconciler = allow_prune(reconciler);
    }
    let now = clock.now();
    let started = Instant::now();
    let runtime = runtime()?;
    let mut prepared = runtime
        .block_on(reconciler.prepare(now))
        .into_diagnostic()?;
    if let Some((revision, diagnostics)) = &prepared.iteration.refused {
        return Err(refused(&reconciler, revision, diagnostics));
    }
    let plan = match reconciler.check_saved(&prepared, &saved) {
        Ok(plan) => plan,
        Err(e) => {
            // What was observed is recorded, so the next plan starts from it.
            record(
                &reconciler,
                &prepared.iteration,
                started,
                &Shared::default(),
                &source_args.state,
            )
            .into_diagnostic()?;
            return Err(stale(&e));
        }
    };
    emit(
        &PlanReport {
            plan: &plan,
            source: &saved.specs.path,
        },
        args.output.output,
    )?;
    prepared.iteration.plan = Some(std::sync::Arc::new(plan));
    carry_out(
        &mut reconciler,
        &runtime,
        prepared,
        started,
        &source_args.state,
    )
}
