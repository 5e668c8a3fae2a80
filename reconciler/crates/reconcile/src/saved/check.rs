//! Whether a saved plan still applies: computed against this state and
//! executor, the same specs, the same live state, and the actions the
//! engine gives again at the plan's time.

use std::path::Path;

use super::{ObservedSource, SavedPlan, SpecsOrigin, SpecsSource};
use crate::live::digest as observed_digest;
use crate::{Prepared, Reconciler, Revision};
use engine::{PlanInput, plan};
use exec::Executor;
use model::observed::ObservedState;
use model::plan::{Plan, Wording};

/// Why a saved plan is not applied to the fleet as it is now.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Stale {
    /// It was not computed against a reconciler's state.
    #[error(
        "the plan was computed against {0}, not a reconciler's live state: only a plan made with `gitfleet plan --state DIR --out FILE` can be applied"
    )]
    NotLive(String),
    /// It was computed against another state directory.
    #[error(
        "the plan was computed against the state in {planned}, but apply uses {used} (pass --state {planned})"
    )]
    StateDir {
        /// The plan's.
        planned: String,
        /// Apply's.
        used: String,
    },
    /// It was computed for another executor.
    #[error(
        "the plan was computed for the {planned} executor, but apply uses {used} (pass --executor {planned})"
    )]
    Executor {
        /// The plan's.
        planned: String,
        /// Apply's.
        used: String,
    },
    /// The specs changed.
    #[error("the specs changed since the plan was made: {0}")]
    Specs(String),
    /// The live state changed.
    #[error(
        "the live state changed since the plan was made (jobs started, ended or stopped, or nodes changed): observed-state digest {planned}, now {now}"
    )]
    State {
        /// The plan's digest.
        planned: String,
        /// The digest now.
        now: String,
    },
    /// The engine does not give these actions.
    #[error(
        "the plan's actions are not what the specs and the live state give at its time ({0}): it was edited, or written by another gitfleet version"
    )]
    Actions(String),
}

impl ObservedSource {
    pub(super) fn describe(self, path: Option<&str>) -> String {
        match self {
            ObservedSource::State => format!("the state in {}", path.unwrap_or("?")),
            ObservedSource::File => format!("the observed file {}", path.unwrap_or("?")),
            ObservedSource::Derived => "the inventory derived from the pools".to_string(),
        }
    }
}

impl SavedPlan {
    /// Whether the plan was computed against the live state in `state_dir`
    /// (checked before that state is opened).
    pub fn check_target(&self, state_dir: &Path) -> Result<(), Stale> {
        let origin = &self.observed;
        if origin.source != ObservedSource::State {
            return Err(Stale::NotLive(
                origin.source.describe(origin.path.as_deref()),
            ));
        }
        let planned = origin.path.clone().unwrap_or_default();
        if !same_dir(Path::new(&planned), state_dir) {
            return Err(Stale::StateDir {
                planned,
                used: state_dir.display().to_string(),
            });
        }
        Ok(())
    }
}

impl<E: Executor> Reconciler<E> {
    /// Checks `saved` against the prepared iteration (specs in force, live
    /// state observed now) and this reconciler's state and executor; returns
    /// the plan to carry out: the engine's plan at the saved plan's time,
    /// whose actions are exactly the saved ones.
    pub fn check_saved(&self, prepared: &Prepared, saved: &SavedPlan) -> Result<Plan, Stale> {
        let origin = &saved.observed;
        saved.check_target(self.store().path().parent().unwrap_or(self.store().path()))?;
        let executor = self.executor_name();
        if origin.executor.as_deref() != Some(executor) {
            return Err(Stale::Executor {
                planned: origin.executor.clone().unwrap_or_else(|| "unknown".into()),
                used: executor.to_string(),
            });
        }
        let iteration = &prepared.iteration;
        let (Some(revision), Some(fleet)) = (&iteration.revision, self.fleet()) else {
            return Err(Stale::Specs("no valid revision is in force".to_string()));
        };
        if !same_specs(&saved.specs, revision) {
            return Err(Stale::Specs(specs_change(&saved.specs, revision)));
        }
        let observed = ObservedState {
            nodes: iteration.nodes.to_vec(),
            ..ObservedState::clone(&prepared.observed)
        };
        let now = observed_digest(&observed);
        if now != origin.digest {
            return Err(Stale::State {
                planned: origin.digest.clone(),
                now,
            });
        }
        let time = chrono::DateTime::parse_from_rfc3339(&saved.plan.time)
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|e| Stale::Actions(format!("its time {:?}: {e}", saved.plan.time)))?;
        let replanned = plan(&PlanInput {
            fleet,
            observed: &observed,
            now: time,
            revision: Some(&revision.id),
        });
        if replanned.actions != saved.plan.actions {
            return Err(Stale::Actions(first_difference(&saved.plan, &replanned)));
        }
        Ok(replanned)
    }
}

/// The same specs: the same content, or the same commit.
fn same_specs(saved: &SpecsOrigin, now: &Revision) -> bool {
    saved.revision == now.id || (!saved.content.is_empty() && saved.content == now.content)
}

fn specs_change(saved: &SpecsOrigin, now: &Revision) -> String {
    match (saved.source, &saved.rev) {
        (SpecsSource::Git, Some(rev)) => format!(
            "it was made at {}, {rev} is now {} and its fleet files differ",
            git::short_id(&saved.revision),
            now.short()
        ),
        (SpecsSource::Remote, Some(branch)) => format!(
            "it was made at {}, {branch} of {} is now {} and its fleet files differ",
            git::short_id(&saved.revision),
            saved.url.as_deref().unwrap_or("the remote"),
            now.short()
        ),
        _ => format!(
            "the files under {} differ from what was planned ({} → {})",
            saved.path, saved.revision, now.id
        ),
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The first action that differs, in words.
fn first_difference(saved: &Plan, replanned: &Plan) -> String {
    let describe =
        |a: &model::plan::Action| format!("{} {}", a.kind(), a.describe(Wording::Subject));
    for (i, saved_action) in saved.actions.iter().enumerate() {
        match replanned.actions.get(i) {
            Some(a) if a == saved_action => {}
            Some(a) => {
                return format!(
                    "action {} is `{}`, the engine gives `{}`",
                    i + 1,
                    describe(saved_action),
                    describe(a)
                );
            }
            None => {
                return format!(
                    "action {} `{}` is not in the engine's plan",
                    i + 1,
                    describe(saved_action)
                );
            }
        }
    }
    match replanned.actions.get(saved.actions.len()) {
        Some(a) => format!("the engine also gives `{}`", describe(a)),
        None => "they differ".to_string(),
    }
}
