//! A Job's environment values: a string committed to Git, a string marked
//! `sensitive` (masked wherever gitfleet shows specs), or a value taken from
//! outside Git when a replica starts (`valueFrom`: a file on the executor's
//! host, or an environment variable of the reconciler), never known to plans.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What gitfleet shows instead of a sensitive value.
pub const MASK: &str = "(sensitive)";

/// One environment variable's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum EnvValue {
    /// The value itself.
    Plain(String),
    /// The value itself, maybe marked sensitive.
    Inline(InlineValue),
    /// A value read when a replica starts.
    From(ValueFrom),
}

/// `{value: "…", sensitive: true}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InlineValue {
    /// The value.
    pub value: String,
    /// Masked in plans, previews, pull-request comments, history and logs.
    #[serde(default)]
    pub sensitive: bool,
}

/// `{valueFrom: {file: PATH}}` or `{valueFrom: {env: NAME}}`; always sensitive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValueFrom {
    /// Where the value is read when a replica starts.
    pub value_from: EnvSource,
}

/// Where a value outside Git is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum EnvSource {
    /// A file on the executor's host (e.g. a mounted secret); its content,
    /// without one trailing newline.
    File(String),
    /// An environment variable of the reconciler's process.
    Env(String),
}

impl EnvValue {
    /// The value committed to Git, when there is one (`None` for `valueFrom`).
    pub fn inline(&self) -> Option<&str> {
        match self {
            EnvValue::Plain(v) | EnvValue::Inline(InlineValue { value: v, .. }) => Some(v),
            EnvValue::From(_) => None,
        }
    }

    /// Whether the value is masked wherever it would be shown.
    pub fn is_sensitive(&self) -> bool {
        match self {
            EnvValue::Plain(_) => false,
            EnvValue::Inline(v) => v.sensitive,
            EnvValue::From(_) => true,
        }
    }
}

impl From<&str> for EnvValue {
    fn from(value: &str) -> Self {
        EnvValue::Plain(value.to_string())
    }
}
