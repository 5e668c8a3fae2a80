//! JSON-Schema validation of one document, with errors mapped to YAML positions.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use jsonschema::Validator;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use serde_json::Value as Json;

use super::yaml::{Locator, Node, PathSegment, Pos};
use crate::validate::closest;
use model::spec::{DNS_LABEL_PATTERN, DURATION_PATTERN, Kind, schema::kind_schema};

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
            // Our patterns need no look-around: the `regex` engine (linear
            // time, several times faster here than the default fancy-regex).
            let validator = jsonschema::options()
                .with_pattern_options(jsonschema::PatternOptions::regex())
                .build(&schema)
                .ok()?;
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
    // The common case, valid, short-circuits without building errors.
    if validator.is_valid(json) {
        return Vec::new();
    }
    let mut out = Vec::new();
    // One index per large mapping, however many errors point into it.
    let mut locator = Locator::new(node);
    for error in validator.iter_errors(json) {
        let path: Vec<PathSegment<String>> = error
            .instance_path()
            .iter()
            .map(|seg| match seg {
                LocationSegment::Property(p) => PathSegment::Key(p.to_string()),
                LocationSegment::Index(i) => PathSegment::Index(i),
            })
            .collect();
        let target = locator.locate(path.iter().cloned());
        let field = render_path(&path);
        match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let known = known_properties(schema, &error.schema_path().to_string());
                // An sbatch option gitfleet sets itself: say so, and why.
                let in_slurm = field == "spec.slurm";
                for key in unexpected {
                    let pos = locator
                        .entry(target, key)
                        .map_or(target.pos, |(k, _)| k.pos);
                    let field = join(&field, key);
                    let near = closest(key, known.iter().map(String::as_str))
                        .or_else(|| only_extension(key, &known));
                    let owned = in_slurm
                        .then(|| model::spec::slurm::owned_option(key))
                        .flatten();
                    let message = match (owned, near) {
                        (Some(why), _) => format!("not settable: {why}"),
                        (None, Some(near)) => format!("unknown field (did you mean {near:?}?)"),
                        (None, None) if known.is_empty() => "unknown field".to_string(),
                        (None, None) => {
                            format!("unknown field (expected one of {})", known.join(", "))
                        }
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
                    // At `spec:`, not at the first field inside it.
                    pos: locator.locate_key(path.iter().cloned()).pos,
                    field: field.clone(),
                    message: format!("missing required field \"{name}\""),
                });
            }
            ValidationErrorKind::Pattern { pattern }
                if pattern == DNS_LABEL_PATTERN && only_too_long(error.instance()) =>
            {
                // The maxLength violation of the same name says it all.
            }
            kind => {
                let schema_path = error.schema_path().to_string();
                let keyword_parent = schema_path
                    .rsplit_once('/')
                    .and_then(|(parent, _)| schema.pointer(parent));
                let mut message = if is_env_value(&path) {
                    // `{value: …, sensitive: true}`: never quoted.
                    "expected a string; the value is not shown (put it in quotes to make it a string)"
                        .to_string()
                } else {
                    describe(kind, error.instance(), keyword_parent)
                        .unwrap_or_else(|| error.to_string())
                };
                // JSON has no NaN or infinity: such a YAML number reaches the
                // schema as null, which is not what the user wrote.
                if let super::yaml::Value::Float(f) = target.value
                    && !f.is_finite()
                {
                    message = message.replace("found null", &format!("found {}", non_finite(f)));
                }
                out.push(SchemaViolation {
                    pos: target.pos,
                    field,
                    message,
                });
            }
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

/// The one known field that starts with `key` (`priority` → `priorityClass`).
fn only_extension<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    let lower = key.to_lowercase();
    let mut matches = known
        .iter()
        .filter(|k| key.len() >= 3 && k.to_lowercase().starts_with(&lower));
    match (matches.next(), matches.next()) {
        (Some(only), None) => Some(only.as_str()),
        _ => None,
    }
}

/// Whether `path` is a Job's `spec.env.NAME.value`, which may be sensitive.
fn is_env_value(path: &[PathSegment<String>]) -> bool {
    matches!(
        path,
        [PathSegment::Key(spec), PathSegment::Key(env), PathSegment::Key(_), PathSegment::Key(value)]
            if spec == "spec" && env == "env" && value == "value"
    )
}

/// Whether `name` breaks the DNS-1123 label rules only by its length.
fn only_too_long(name: &Json) -> bool {
    let Some(name) = name.as_str() else {
        return false;
    };
    let edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.chars().count() > 63
        && name.chars().all(|c| edge(c) || c == '-')
        && name.starts_with(edge)
        && name.ends_with(edge)
}

/// `kind` in words; `keyword_parent` is the schema object holding the failed
/// keyword. `None` for kinds without a wording of their own.
fn describe(
    kind: &ValidationErrorKind,
    instance: &Json,
    keyword_parent: Option<&Json>,
) -> Option<String> {
    let is_duration = keyword_parent
        .and_then(|s| s.get("pattern"))
        .and_then(Json::as_str)
        == Some(DURATION_PATTERN);
    Some(match kind {
        ValidationErrorKind::Type { .. } if is_duration => format!(
            "invalid duration {}: expected a number with a unit (ms, s, m, h, d), e.g. 90s, 5m, 72h, 1h30m",
            show_plain(instance)
        ),
        ValidationErrorKind::Type { kind } => {
            let name = |t: String| match t.as_str() {
                "array" => "a sequence".to_string(),
                "object" => "a mapping".to_string(),
                _ => t,
            };
            let expected = match kind {
                TypeKind::Single(t) => name(t.to_string()),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| name(t.to_string()))
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            // `name: no`, `value: 010`: YAML typed an intended string.
            // (A Job's env value may also be a mapping: still a string meant.)
            let string = |t: &dyn std::fmt::Display| t.to_string() == "string";
            let quote = match kind {
                TypeKind::Single(t) => string(t),
                TypeKind::Multiple(set) => set.iter().any(|t| string(&t)),
            } && matches!(instance, Json::Bool(_) | Json::Number(_));
            let hint = if quote {
                " (put the value in quotes to make it a string)"
            } else {
                ""
            };
            format!("expected {expected}, found {}{hint}", show(instance))
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
            let choices: Vec<&Json> = options
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            one_of(&choices, instance)
        }
        // Enums with documented variants: one `const` per branch.
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            let constants: Option<Vec<&Json>> = context
                .iter()
                .map(|branch| {
                    branch.iter().find_map(|e| match e.kind() {
                        ValidationErrorKind::Constant { expected_value } => Some(&**expected_value),
                        _ => None,
                    })
                })
                .collect();
            match constants {
                Some(choices) if !choices.is_empty() => one_of(&choices, instance),
                _ => return None,
            }
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!(
                "expected {}, found {}",
                show_plain(expected_value),
                show_plain(instance)
            )
        }
        _ => return None,
    })
}

/// `expected one of "a", "b", found "c"`, with a hint for a near miss.
fn one_of(choices: &[&Json], instance: &Json) -> String {
    let listed: Vec<String> = choices.iter().map(|c| show_plain(c)).collect();
    let near = instance
        .as_str()
        .and_then(|text| closest(text, choices.iter().filter_map(|c| c.as_str())));
    let hint = near
        .map(|n| format!(" (did you mean {n:?}?)"))
        .unwrap_or_default();
    format!(
        "expected one of {}, found {}{hint}",
        listed.join(", "),
        show_plain(instance)
    )
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

/// A number JSON cannot hold, in words.
pub(crate) fn non_finite(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN (not a number)"
    } else if f > 0.0 {
        "infinity (or a number too large to hold)"
    } else {
        "-infinity (or a number too large to hold)"
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    fn violations(kind: Kind, text: &str) -> Vec<SchemaViolation> {
        let node = parse_documents(text).unwrap().remove(0);
        check(kind, &node, &node.to_json())
    }

    const POOL: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n";

    #[test]
    fn enum_errors_list_the_choices_and_suggest_a_near_miss() {
        let v = violations(
            Kind::NodePool,
            &format!(
                "{POOL}  gpu: {{model: X, count: 8}}\n  size: {{min: 1, max: 1}}\n  nvlink: ful\n"
            ),
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].pos, Pos::new(7, 11));
        assert_eq!(
            v[0].message,
            "expected one of \"full\", \"pairs\", \"none\", found \"ful\" (did you mean \"full\"?)"
        );
    }

    #[test]
    fn a_duration_without_unit_is_a_duration_error() {
        let v = violations(
            Kind::NodePool,
            &format!(
                "{POOL}  gpu: {{model: X, count: 8}}\n  size: {{min: 1, max: 1}}\n  scaleDownAfter: 10\n"
            ),
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.starts_with("invalid duration 10: "), "{v:?}");
    }

    #[test]
    fn missing_fields_point_at_the_key_of_their_mapping() {
        let v = violations(
            Kind::NodePool,
            &format!("{POOL}  size: {{min: 1, max: 1}}\n"),
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].pos, v[0].field.as_str()), (Pos::new(4, 1), "spec"));
    }

    #[test]
    fn scalars_typed_by_yaml_get_a_quoting_hint() {
        // YAML 1.2: `no` is a string, `true` is a boolean.
        let text = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: true}\nspec: {}\n";
        let v = violations(Kind::Queue, text);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            v[0].message,
            "expected string, found boolean true (put the value in quotes to make it a string)"
        );
    }

    #[test]
    fn a_long_name_is_one_error() {
        let name = "a".repeat(64);
        let text = format!(
            "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {{}}\n"
        );
        let v = violations(Kind::Queue, &text);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            v[0].message,
            format!("\"{name}\" is longer than 63 characters")
        );
    }

    #[test]
    fn unknown_fields_suggest_the_only_longer_field() {
        let text = "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j}\nspec: {queue: q, gpusPerReplica: 1, priority: high}\n";
        let v = violations(Kind::Job, text);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            v[0].message,
            "unknown field (did you mean \"priorityClass\"?)"
        );
    }

    #[test]
    fn sbatch_options_gitfleet_owns_say_why() {
        let text = "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j}\nspec: {queue: q, gpusPerReplica: 1, slurm: {nodelist: gpu-1, cpusPerTask: 4, outptu: /x}}\n";
        let v = violations(Kind::Job, text);
        let seen: Vec<(&str, &str)> = v
            .iter()
            .map(|v| (v.field.as_str(), v.message.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "spec.slurm.nodelist",
                    "not settable: gitfleet places the gang: --nodes, --ntasks, --ntasks-per-node and --nodelist come from its plan (spec.replicas)"
                ),
                (
                    "spec.slurm.outptu",
                    "unknown field (did you mean \"output\"?)"
                ),
            ]
        );
    }
}
