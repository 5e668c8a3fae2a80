//! `kind: Policy`: guardrails written as CEL rules over documents.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;

/// Which documents a policy checks and the rules they must satisfy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// The documents the rules apply to.
    #[serde(default, rename = "match")]
    pub matches: PolicyMatch,
    /// CEL rules; each must evaluate to `true` for every matching document.
    #[schemars(length(min = 1))]
    pub rules: Vec<PolicyRule>,
}

/// Selects documents by kind and labels.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyMatch {
    /// Kinds to check (default: every kind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<Kind>,
    /// Only documents whose `metadata.labels` contain all of these.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// One CEL rule. The document is `object`, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRule {
    /// A CEL expression that must be `true`, e.g.
    /// `object.spec.replicas * object.spec.gpusPerReplica <= 64`.
    #[schemars(length(min = 1))]
    pub expression: String,
    /// Shown when the rule is violated (default: the expression).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
