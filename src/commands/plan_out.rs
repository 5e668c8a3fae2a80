//! `gitfleet plan --out FILE`: the plan saved with what it was computed
//! from (`reconcile::saved`), for `gitfleet apply FILE`.

use std::path::Path;

use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::observed::ObservedState;
use reconciler::plan::Plan;
use reconciler::reconcile::live::digest;
use reconciler::reconcile::saved::{
    ObservedOrigin, ObservedSource, SavedPlan, SpecsOrigin, SpecsSource,
};
use reconciler::reconcile::status::Status;
use reconciler::reconcile::{FleetSource, Revision};
use reconciler::source::GitSource;

use super::args::InputArgs;
use super::git::subdir_of;

/// Writes `plan`, computed from `input` and `observed`, to `out`.
pub fn write(out: &Path, input: &InputArgs, observed: &ObservedState, plan: &Plan) -> Result<()> {
    let saved = SavedPlan::new(
        chrono::Utc::now(),
        specs_origin(input, plan)?,
        observed_origin(input, observed),
        plan.clone(),
    );
    std::fs::write(out, saved.to_json())
        .into_diagnostic()
        .wrap_err_with(|| format!("--out {}", out.display()))?;
    let hint = match &input.observed.state {
        Some(dir) => format!(
            "apply it with `gitfleet apply {} --state {}`",
            out.display(),
            dir.display()
        ),
        None => "it was not computed against a reconciler's live state (--state DIR), so it can be reviewed but not applied".to_string(),
    };
    eprintln!("Saved the plan to {}: {hint}.", out.display());
    Ok(())
}

/// Where the specs came from, as `apply` will read them again; refused
/// when a Git revision moved since the plan was computed from it.
fn specs_origin(input: &InputArgs, plan: &Plan) -> Result<SpecsOrigin> {
    let specs = &input.specs;
    let path = &specs.path;
    let (source, revision) = match (&specs.repo, specs.revision()) {
        (Some(_), Some(branch)) => {
            // Fetched again: the mirror the plan was read from is gone.
            let repo = super::git::open_specs(specs)?;
            let oid = repo.resolve_oid(branch).into_diagnostic()?;
            let content = repo.fleet_id_at(oid).into_diagnostic()?;
            let revision = Revision {
                id: oid.to_string(),
                content: content.map(|t| t.to_string()).unwrap_or_default(),
            };
            (SpecsSource::Remote, revision)
        }
        (_, Some(rev)) => {
            let mut fleet = FleetSource::Git {
                repo: GitSource::discover(path).into_diagnostic()?,
                rev: rev.to_string(),
            };
            (SpecsSource::Git, fleet.current().into_diagnostic()?)
        }
        (_, None) => {
            let mut fleet = FleetSource::Dir {
                path: path.to_path_buf(),
            };
            (SpecsSource::Dir, fleet.current().into_diagnostic()?)
        }
    };
    if source != SpecsSource::Dir && plan.revision.as_deref() != Some(revision.id.as_str()) {
        return Err(miette!(
            "{} moved while the plan was computed; run it again",
            specs.revision().unwrap_or("HEAD")
        ));
    }
    Ok(SpecsOrigin {
        source,
        path: match source {
            SpecsSource::Remote => subdir_of(path),
            _ => path.display().to_string(),
        },
        rev: specs
            .revision()
            .filter(|_| source != SpecsSource::Dir)
            .map(str::to_string),
        url: specs.repo.clone(),
        revision: revision.id,
        content: revision.content,
    })
}

/// What the observed state was: a reconciler's live state, a file, or the
/// inventory derived from the pools.
fn observed_origin(input: &InputArgs, observed: &ObservedState) -> ObservedOrigin {
    let args = &input.observed;
    let (source, path, executor) = match (&args.observed, &args.state) {
        (Some(file), _) => (ObservedSource::File, Some(file.as_path()), None),
        (None, Some(dir)) => (
            ObservedSource::State,
            Some(dir.as_path()),
            Status::read(dir).ok().map(|s| s.executor),
        ),
        (None, None) => (ObservedSource::Derived, None, None),
    };
    ObservedOrigin {
        source,
        path: path.map(|p| p.display().to_string()),
        executor,
        digest: digest(observed),
    }
}
