//! A Job's environment values: a string committed to Git, a string marked
//! `sensitive` (masked wherever gitfleet shows specs), or a value taken from
//! outside Git when a replica starts (`valueFrom`: a file on the executor's
//! host, an environment variable of the reconciler, or a Kubernetes
//! Secret's key for the kube executor), never known to plans.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What gitfleet shows instead of a sensitive value.
pub const MASK: &str = "(sensitive)";

/// One environment variable's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, try_from = "RawEnvValue")]
pub enum EnvValue {
    /// The value itself.
    Plain(String),
    /// The value itself, maybe marked sensitive.
    Inline(InlineValue),
    /// A value read when a replica starts.
    From(ValueFrom),
}

/// An env value as written, before its rules are checked.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawEnvValue {
    Plain(String),
    Object(RawObject),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawObject {
    value: Option<String>,
    value_from: Option<EnvSource>,
    #[serde(default)]
    sensitive: bool,
}

impl TryFrom<RawEnvValue> for EnvValue {
    type Error = &'static str;

    fn try_from(raw: RawEnvValue) -> Result<Self, Self::Error> {
        match raw {
            RawEnvValue::Plain(value) => Ok(EnvValue::Plain(value)),
            RawEnvValue::Object(RawObject {
                value: Some(value),
                value_from: None,
                sensitive,
            }) => Ok(EnvValue::Inline(InlineValue { value, sensitive })),
            RawEnvValue::Object(RawObject {
                value: None,
                value_from: Some(value_from),
                ..
            }) => Ok(EnvValue::From(ValueFrom { value_from })),
            RawEnvValue::Object(RawObject {
                value: Some(_),
                value_from: Some(_),
                ..
            }) => Err("give either `value` or `valueFrom`, not both"),
            RawEnvValue::Object(RawObject {
                value: None,
                value_from: None,
                ..
            }) => Err(
                "needs `value` (a string) or `valueFrom` ({file: PATH}, {env: NAME} or {secretKeyRef: {name, key}})",
            ),
        }
    }
}

/// One schema without alternatives, so that a validation message never
/// quotes a whole (maybe sensitive) value; the rules between the members
/// are checked when the document is read.
impl JsonSchema for EnvValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EnvValue".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let source = generator.subschema_for::<EnvSource>();
        schemars::json_schema!({
            "description": "A value, `{value, sensitive: true}` (masked wherever specs are shown), or `{valueFrom: {file: PATH}}` / `{valueFrom: {env: NAME}}` (read when a replica starts; never in Git), or `{valueFrom: {secretKeyRef: {name, key}}}` (a Kubernetes Secret's key, kube executor only).",
            "type": ["string", "object"],
            "properties": {
                "value": {"type": "string", "description": "The value."},
                "sensitive": {"type": "boolean", "description": "Masked in plans, previews, pull-request comments, history and logs."},
                "valueFrom": source,
            },
            "additionalProperties": false,
        })
    }
}

/// `{value: "…", sensitive: true}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineValue {
    /// The value.
    pub value: String,
    /// Masked in plans, previews, pull-request comments, history and logs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
}

/// `{valueFrom: {file: PATH}}` or `{valueFrom: {env: NAME}}`; always sensitive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
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
    /// A key of a Kubernetes Secret in the job's namespace: the kube
    /// executor passes the reference to the Pod
    /// (`env[].valueFrom.secretKeyRef`), so the value is read by the
    /// kubelet and never by gitfleet; other executors refuse it.
    SecretKeyRef(SecretKeyRef),
}

/// `{secretKeyRef: {name, key}}`: a key of a Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// The Secret's name (in the job's namespace).
    #[schemars(regex(pattern = super::kubernetes::DNS_SUBDOMAIN_PATTERN), length(max = 253))]
    pub name: String,
    /// The key in the Secret.
    #[schemars(regex(pattern = "^[-._a-zA-Z0-9]+$"), length(max = 253))]
    pub key: String,
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
