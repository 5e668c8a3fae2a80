//! `gitfleet plan --base BASE [--rev REV]`: what a change does to the specs
//! and to the plan (the pull-request preview).

use std::path::Path;
use std::process::ExitCode;

use miette::{Result, miette};
use reconciler::engine::{PlanInput, plan};
use reconciler::load::{Loaded, load_fleet};
use reconciler::observed::derive_inventory;
use reconciler::plan_diff::diff_plans;
use reconciler::queue_totals::queue_totals;
use reconciler::reconcile::prune::{self, PrunePolicy};
use reconciler::report::preview::{MAX_ERRORS, PREVIEW_FORMAT_VERSION, Preview, Revision};
use reconciler::simulate::{Comparison, Options, Report, simulate};
use reconciler::source::rev_label;
use reconciler::spec::Fleet;
use reconciler::specdiff::{DocSet, diff};

use super::git::{SpecsAt, load_reporting, open, read_at};
use super::input;
use super::simulate::tripped;
use crate::render::{SimulatedPreview, emit};

/// Runs the preview of `base` → `--rev` (default `HEAD`).
pub fn run(args: &super::plan::Args, base: &str) -> Result<ExitCode> {
    let specs = &args.input.specs;
    if let Some(url) = &specs.repo {
        return Err(miette!(
            "--base with --repo {url}: a preview compares two revisions of a local clone; clone the repository and run it there"
        ));
    }
    let source = open(&specs.path)?;
    let head_rev = specs.rev.as_deref().unwrap_or("HEAD");
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
    let head_loaded = load_reporting(&head_specs, &specs.path);
    let mut spec = diff(
        &DocSet::from_files(&base_specs.files, Some(&rev_label(&base_specs.rev))),
        &DocSet::from_files(&head_specs.files, Some(&rev_label(&head_specs.rev))),
    );
    let mut prune = None;
    let plan_diff = if base_loaded.is_valid() && head_loaded.is_valid() {
        // the world before the change: the base revision's pools
        let Some(observed) = input::observed_or(&args.input.observed, || {
            derive_inventory(&base_loaded.fleet)
        })?
        else {
            return Ok(ExitCode::FAILURE);
        };
        let now = input::now(&args.input.time, &observed)?;
        // What `reconcile` would say of the head revision, given what runs.
        let running: Vec<&str> = observed.running.iter().map(|r| r.job.as_str()).collect();
        note_restarts(&mut spec, &running);
        prune = prune::check(
            &PrunePolicy::default(),
            Some(&base_loaded.fleet),
            &head_loaded.fleet,
            &running,
        )
        .err()
        .map(|refusal| refusal.to_string());
        let at = |loaded: &Loaded, specs: &SpecsAt| {
            plan(&PlanInput {
                fleet: &loaded.fleet,
                observed: &observed,
                now,
                revision: Some(&specs.commit),
            })
        };
        let (base_plan, head_plan) = (at(&base_loaded, &base_specs), at(&head_loaded, &head_specs));
        Some(diff_plans(&base_plan, &head_plan).with_queues(
            &queue_totals(&base_loaded.fleet, &observed, &base_plan),
            &queue_totals(&head_loaded.fleet, &observed, &head_plan),
        ))
    } else {
        None
    };
    let simulation = match &args.simulate {
        Some(trace) => {
            let fleets = (base_loaded.is_valid() && head_loaded.is_valid())
                .then_some((&base_loaded.fleet, &head_loaded.fleet));
            Some(whatif(args, trace, fleets)?)
        }
        None => None,
    };
    let changed = spec.has_changes() || plan_diff.as_ref().is_some_and(|p| p.has_changes());
    let preview = Preview {
        format_version: PREVIEW_FORMAT_VERSION,
        path: specs.path.display().to_string(),
        base: revision(&base_specs, &base_loaded),
        head: revision(&head_specs, &head_loaded),
        spec,
        plan: plan_diff,
        changed,
        prune,
    };
    let gate = match &simulation {
        Some(Some((comparison, base, head))) => {
            emit(
                &SimulatedPreview {
                    preview: &preview,
                    simulation: Some(comparison),
                },
                args.output.output,
            )?;
            super::simulate::gate_exit("plan", &tripped(&args.fail_on, head, Some(base))?)
        }
        Some(None) => {
            emit(
                &SimulatedPreview {
                    preview: &preview,
                    simulation: None,
                },
                args.output.output,
            )?;
            eprintln!(
                "warning: --simulate: not replayed, a revision does not validate{}",
                if args.fail_on.is_empty() {
                    ""
                } else {
                    " (--fail-on not evaluated)"
                }
            );
            (!args.fail_on.is_empty()).then_some(ExitCode::FAILURE)
        }
        None => {
            emit(&preview, args.output.output)?;
            None
        }
    };
    Ok(if !preview.head.valid {
        ExitCode::FAILURE
    } else if let Some(code) = gate {
        code
    } else if args.detailed_exitcode && preview.changed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// The replays of `--simulate TRACE` under the base and head fleets (None
/// when a revision does not validate): their comparison and both reports.
fn whatif(
    args: &super::plan::Args,
    trace: &Path,
    fleets: Option<(&Fleet, &Fleet)>,
) -> Result<Option<(Comparison, Report, Report)>> {
    let parsed = super::simulate::read_trace_file(trace, args.trace_format, None)?;
    let Some((base_fleet, head_fleet)) = fleets else {
        return Ok(None);
    };
    let options = Options::default();
    let dropped = parsed.dropped.len() as u64;
    let replay = |fleet: &Fleet, side: &str| {
        simulate(fleet, &parsed.jobs, dropped, &options, &mut |_| {}).map_err(|e| {
            miette!(
                "--simulate {}: under the {side} revision: {e}",
                trace.display()
            )
        })
    };
    let base = replay(base_fleet, "base")?;
    let head = replay(head_fleet, "head")?;
    let comparison = Comparison::new(&trace.display().to_string(), &base, &head);
    Ok(Some((comparison, base, head)))
}

/// A revision's line in the preview: its commit and whether it validates.
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

/// Whether `field` changes a job's `gitfleet/restart` annotation (the field
/// itself, or the whole annotations map around it).
fn touches_restart_annotation(field: &reconciler::specdiff::FieldChange) -> bool {
    use reconciler::spec::RESTART_ANNOTATION;
    if field.field == format!("metadata.annotations.{RESTART_ANNOTATION}") {
        return true;
    }
    let value_of =
        |v: &Option<serde_json::Value>| v.as_ref().and_then(|v| v.get(RESTART_ANNOTATION)).cloned();
    field.field == "metadata.annotations" && value_of(&field.before) != value_of(&field.after)
}

/// Marks the changes of running jobs that only a restart would apply, so a
/// reviewer does not take "no scheduling changes" for "nothing happens".
fn note_restarts(spec: &mut reconciler::specdiff::SpecDiff, running: &[&str]) {
    for object in &mut spec.objects {
        if object.kind != reconciler::spec::Kind::Job || !running.contains(&object.name.as_str()) {
            continue;
        }
        for field in &mut object.fields {
            if field.needs_restart() {
                field.note = Some("running; takes effect on restart".to_string());
            } else if touches_restart_annotation(field) {
                field.note = Some("running; restarts it with the current spec".to_string());
            }
        }
    }
}
