//! Saved plans, as Terraform's `plan -out`: a plan written with what it was
//! computed from (the specs' revision and content, the observed state's
//! digest, the time, the state and executor), so that `gitfleet apply FILE`
//! carries out exactly what was reviewed, or refuses when anything it was
//! computed from changed.
//!
//! Safety rests on two checks, not on trusting the file: its `digest`
//! (SHA-256 of its own JSON without the digest) catches accidental edits
//! with a clear message, and before applying, the engine (deterministic)
//! plans again from the current specs and live state at the plan's time:
//! the actions must be exactly the saved ones, so an edited action (even
//! with a recomputed digest) is never carried out.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::live::{digest as observed_digest, sha256_hex};
use crate::{Prepared, Reconciler, Revision};
use engine::{PlanInput, plan};
use exec::Executor;
use model::observed::{ObservedState, Timestamp};
use model::plan::{Plan, Wording};

/// The `format` member of every saved plan (how `apply` tells one from a
/// fleet path).
pub const FORMAT: &str = "gitfleet-saved-plan";
/// The version of the format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// A saved plan file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedPlan {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`FORMAT_VERSION`].
    pub format_version: u32,
    /// When the file was written (wall clock).
    pub created: Timestamp,
    /// Where the specs came from.
    pub specs: SpecsOrigin,
    /// What the observed state was.
    pub observed: ObservedOrigin,
    /// The plan (the JSON of `plan -o json`).
    pub plan: Plan,
    /// `sha256:` and the hex SHA-256 of the file's compact JSON without
    /// this member (keys sorted).
    pub digest: String,
}

/// Where a saved plan's specs came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecsOrigin {
    /// `git` (a revision) or `dir` (files as they were on disk).
    pub source: SpecsSource,
    /// The fleet path as given to `plan`.
    pub path: String,
    /// The revision as given (`--rev`), for Git.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// The commit id, or `dir:<digest>`.
    pub revision: String,
    /// The fleet's content: its tree id in Git, the files' digest for a directory.
    pub content: String,
}

/// How the specs were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecsSource {
    /// At a Git revision.
    Git,
    /// A directory as it was.
    Dir,
}

/// What a saved plan's observed state was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservedOrigin {
    /// `state` (a reconciler's live state), `file` or `derived`.
    pub source: ObservedSource,
    /// The state directory or the observed file, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The executor the state was kept by (`state` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<String>,
    /// [`crate::live::digest`] of the observed state.
    pub digest: String,
}

/// Where the observed state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservedSource {
    /// A reconciler's state directory (`plan --state DIR`).
    State,
    /// An observed-state file (`plan --observed FILE`).
    File,
    /// Derived from the pools (nothing running).
    Derived,
}

impl ObservedSource {
    fn describe(self, path: Option<&str>) -> String {
        match self {
            ObservedSource::State => format!("the state in {}", path.unwrap_or("?")),
            ObservedSource::File => format!("the observed file {}", path.unwrap_or("?")),
            ObservedSource::Derived => "the inventory derived from the pools".to_string(),
        }
    }
}

/// Why a file is not a saved plan that can be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SavedPlanError {
    /// Not JSON, or not the saved plan's shape.
    #[error("{file}: not a valid saved plan: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong (with line and column, or the field).
        message: String,
    },
    /// Its content does not match its digest.
    #[error(
        "{file}: the saved plan was modified after it was written (digest {stored}, its content gives {computed}); nothing applied: make a new one with `gitfleet plan --out`"
    )]
    Modified {
        /// The file.
        file: String,
        /// The digest it holds.
        stored: String,
        /// The digest of its content.
        computed: String,
    },
}

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

impl SavedPlan {
    /// A saved plan of `plan`, its digest computed.
    pub fn new(
        created: Timestamp,
        specs: SpecsOrigin,
        observed: ObservedOrigin,
        plan: Plan,
    ) -> SavedPlan {
        let mut saved = SavedPlan {
            format: FORMAT.to_string(),
            format_version: FORMAT_VERSION,
            created,
            specs,
            observed,
            plan,
            digest: String::new(),
        };
        let value = serde_json::to_value(&saved).unwrap_or_default();
        saved.digest = content_digest(value);
        saved
    }

    /// The file's text (pretty JSON, a newline at the end).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Whether `text` is meant as a saved plan (a JSON object naming
    /// [`FORMAT`], or one that looks like a plan): a fleet's YAML never is.
    pub fn sniff(text: &str) -> bool {
        let head = text.trim_start();
        head.starts_with('{') && head.contains(&format!("\"{FORMAT}\""))
            || head.starts_with('{') && head.contains("\"actions\"")
    }

    /// Parses and checks `text` read from `file`.
    pub fn parse(file: &str, text: &str) -> Result<SavedPlan, SavedPlanError> {
        let invalid = |message: String| SavedPlanError::Invalid {
            file: file.to_string(),
            message,
        };
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("line {}, column {}: {e}", e.line(), e.column())))?;
        let Some(object) = value.as_object() else {
            return Err(invalid("expected a JSON object".to_string()));
        };
        match object.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(invalid(format!(
                    "`format` is {other:?}, expected {FORMAT:?}"
                )));
            }
            None if object.contains_key("actions") => {
                return Err(invalid(
                    "this is a plan as `plan -o json` prints it, without what it was computed from; write a saved plan with `gitfleet plan --state DIR --out FILE`".to_string(),
                ));
            }
            None => return Err(invalid(format!("no `format: {FORMAT:?}` member"))),
        }
        match object.get("format_version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(invalid(format!(
                    "format_version {v} is not supported (this gitfleet reads {FORMAT_VERSION})"
                )));
            }
            None => return Err(invalid("no numeric `format_version`".to_string())),
        }
        let stored = object
            .get("digest")
            .and_then(|d| d.as_str())
            .map(str::to_string)
            .ok_or_else(|| invalid("no `digest` member".to_string()))?;
        let computed = content_digest(value.clone());
        if computed != stored {
            return Err(SavedPlanError::Modified {
                file: file.to_string(),
                stored,
                computed,
            });
        }
        serde_path_to_error::deserialize(value)
            .map_err(|e| invalid(format!("{}: {}", e.path(), e.inner())))
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

/// The digest of a saved plan's JSON without its `digest` member.
fn content_digest(mut value: serde_json::Value) -> String {
    if let Some(object) = value.as_object_mut() {
        object.remove("digest");
    }
    sha256_hex(&serde_json::to_vec(&value).unwrap_or_default())
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
            nodes: iteration.nodes.clone(),
            ..prepared.observed.clone()
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
