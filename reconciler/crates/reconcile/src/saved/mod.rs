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

mod check;

use serde::{Deserialize, Serialize};

use crate::live::sha256_hex;
use model::observed::Timestamp;
use model::plan::Plan;

pub use check::Stale;

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
    /// `git` (a revision), `remote` (a branch of a remote repository) or
    /// `dir` (files as they were on disk).
    pub source: SpecsSource,
    /// The fleet path as given to `plan` (for `remote`: the fleet's
    /// directory inside the repository).
    pub path: String,
    /// The revision as given (`--rev`), for Git; the branch, for `remote`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// The remote repository's URL (`remote` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
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
    /// At a branch of a remote repository (`plan --repo URL`), which
    /// `apply` fetches into the state's mirror as `reconcile --repo` does.
    Remote,
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
        head.starts_with('{')
            && (head.contains(&format!("\"{FORMAT}\"")) || head.contains("\"actions\""))
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

/// The digest of a saved plan's JSON without its `digest` member.
fn content_digest(mut value: serde_json::Value) -> String {
    if let Some(object) = value.as_object_mut() {
        object.remove("digest");
    }
    sha256_hex(&serde_json::to_vec(&value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved() -> SavedPlan {
        SavedPlan::new(
            Timestamp::default(),
            SpecsOrigin {
                source: SpecsSource::Dir,
                path: "fleet".into(),
                rev: None,
                url: None,
                revision: "dir:1".into(),
                content: "dir:1".into(),
            },
            ObservedOrigin {
                source: ObservedSource::State,
                path: Some("st".into()),
                executor: Some("sim".into()),
                digest: "sha256:0".into(),
            },
            Plan {
                revision: None,
                time: "2026-11-21T10:00:00Z".into(),
                actions: Vec::new(),
                pending: Vec::new(),
                summary: Default::default(),
                drift: Vec::new(),
            },
        )
    }

    #[test]
    fn a_saved_plan_reads_back_as_written() {
        let plan = saved();
        let text = plan.to_json();
        assert!(SavedPlan::sniff(&text));
        assert_eq!(SavedPlan::parse("p.json", &text), Ok(plan));
    }

    #[test]
    fn fleet_yaml_is_never_taken_for_a_saved_plan() {
        assert!(!SavedPlan::sniff("apiVersion: gitfleet/v1\nkind: Job\n"));
        assert!(!SavedPlan::sniff("{apiVersion: gitfleet/v1, kind: Job}"));
    }

    #[test]
    fn an_edit_is_caught_by_the_digest() {
        let text = saved().to_json().replace("\"fleet\"", "\"other\"");
        assert!(matches!(
            SavedPlan::parse("p.json", &text),
            Err(SavedPlanError::Modified { .. })
        ));
    }
}
