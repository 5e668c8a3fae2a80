//! JSON-Schema validation of one document, with errors mapped to YAML positions.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use jsonschema::Validator;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use serde_json::Value as Json;

use super::yaml::{Node, PathSegment, Pos};
use crate::spec::{DNS_LABEL_PATTERN, DURATION_PATTERN, Kind, schema::kind_schema};
use crate::validate::closest;

/// One schema violation: where, and what in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// Position of the offending node (or of its closest existing parent).
    pub pos: Pos,
    /// The field path, e.g. `spec.gpu.models[0]` (empty for the document itself).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// A kind's schema and its compiled validator.
struct KindSchema {
    schema: Json,
    validator: Validator,
}

static SCHEMAS: LazyLock<BTreeMap<Kind, KindSchema>> = LazyLock::new(|| {
    Kind::ALL
        .into_iter()
        .filter_map(|kind| {
            let schema = kind_schema(kind);
            let validator = jsonschema::validator_for(&schema).ok()?;
            Some((kind, KindSchema { schema, validator }))
        })
        .collect()
});

/// Validates `json` (the document `node` converted) against the schema of `kind`.
pub fn check(kind: Kind, node: &Node, json: &Json) -> Vec<SchemaViolation> {
    let Some(KindSchema { schema, validator }) = SCHEMAS.get(&kind) else {
        // Unreachable while the schema tests pass; never panic on user input.
        return Vec::new();
    };
    let mut out = Vec::new();
    for error in validator.iter_errors(json) {
        let path: Vec<PathSegment<String>> = error
            .instance_path()
            .iter()
            .map(|seg| match seg {
                LocationSegment::Property(p) => PathSegment::Key(p.to_string()),
                LocationSegment::Index(i) => PathSegment::Index(i),
            })
            .collect();
        let target = node.locate(path.iter().cloned());
        let field = render_path(&path);
        match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let known = known_properties(schema, &error.schema_path().to_string());
                for key in unexpected {
                    let pos = target.entry(key).map_or(target.pos, |(k, _)| k.pos);
                    let field = join(&field, key);
                    let message = match closest(key, known.iter().map(String::as_str)) {
                        Some(near) => format!("unknown field (did you mean {near:?}?)"),
                        None if known.is_empty() => "unknown field".to_string(),
                        None => format!("unknown field (expected one of {})", known.join(", ")),
                    };
                    out.push(SchemaViolation {
                        pos,
                        field,
                        message,
                    });
                }
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                out.push(SchemaViolation {
                    pos: target.pos,
                    field: field.clone(),
                    message: format!("missing required field \"{name}\""),
                });
            }
            kind => out.push(SchemaViolation {
                pos: target.pos,
                field,
                message: describe(kind, error.instance()),
            }),
        }
    }
    out
}

/// The property names allowed next to an `additionalProperties` keyword at
/// `schema_path` (a JSON pointer into `schema`), sorted.
fn known_properties(schema: &Json, schema_path: &str) -> Vec<String> {
    let parent = schema_path
        .strip_suffix("/additionalProperties")
        .unwrap_or(schema_path);
    let mut keys: Vec<String> = schema
        .pointer(&format!("{parent}/properties"))
        .and_then(Json::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

fn describe(kind: &ValidationErrorKind, instance: &Json) -> String {
    match kind {
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            format!("expected {expected}, found {}", show(instance))
        }
        ValidationErrorKind::Pattern { pattern } if pattern == DURATION_PATTERN => format!(
            "invalid duration {}: expected a number with a unit (ms, s, m, h, d), e.g. 90s, 5m, 72h, 1h30m",
            show_plain(instance)
        ),
        ValidationErrorKind::Pattern { pattern } if pattern == DNS_LABEL_PATTERN => format!(
            "{} is not a DNS-1123 label: use lowercase letters, digits and '-', starting and ending with a letter or digit",
            show_plain(instance)
        ),
        ValidationErrorKind::MaxLength { limit } => {
            format!("{} is longer than {limit} characters", show_plain(instance))
        }
        ValidationErrorKind::MinLength { .. } => "must not be empty".to_string(),
        ValidationErrorKind::MinItems { limit } => {
            format!(
                "needs at least {limit} item{}",
                if *limit == 1 { "" } else { "s" }
            )
        }
        ValidationErrorKind::Minimum { limit } => {
            format!("must be at least {limit}, found {}", show_plain(instance))
        }
        ValidationErrorKind::Maximum { limit } => {
            format!("must be at most {limit}, found {}", show_plain(instance))
        }
        ValidationErrorKind::Enum { options } => {
            let choices = options
                .as_array()
                .map(|a| a.iter().map(show_plain).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            format!("expected one of {choices}, found {}", show_plain(instance))
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!(
                "expected {}, found {}",
                show_plain(expected_value),
                show_plain(instance)
            )
        }
        other => format!("{other:?}"),
    }
}

fn show(value: &Json) -> String {
    let kind = match value {
        Json::Null => return "null".to_string(),
        Json::Bool(_) => "boolean",
        Json::Number(n) if n.is_f64() => "number",
        Json::Number(_) => "integer",
        Json::String(_) => "string",
        Json::Array(_) => return "a sequence".to_string(),
        Json::Object(_) => return "a mapping".to_string(),
    };
    format!("{kind} {}", show_plain(value))
}

fn show_plain(value: &Json) -> String {
    match value {
        Json::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn join(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

/// `spec.gpu.models[0]`-style rendering of a path.
pub fn render_path(path: &[PathSegment<String>]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            PathSegment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSegment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}
