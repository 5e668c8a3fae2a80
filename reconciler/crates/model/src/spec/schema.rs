//! JSON Schemas of the document kinds, generated from the Rust types.
//!
//! `gitfleet schema` writes them into `schemas/`; a test fails when the
//! committed files differ. The loader validates every document against them.

use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use super::{
    API_VERSION, JobSpec, Kind, Manifest, NodePoolSpec, PolicySpec, PriorityClassSpec, QueueSpec,
};

const DRAFT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The schema of one kind's documents, with `apiVersion` and `kind` pinned.
pub fn kind_schema(kind: Kind) -> Value {
    let schema = match kind {
        Kind::NodePool => manifest_schema::<NodePoolSpec>(),
        Kind::Queue => manifest_schema::<QueueSpec>(),
        Kind::PriorityClass => manifest_schema::<PriorityClassSpec>(),
        Kind::Job => manifest_schema::<JobSpec>(),
        Kind::Policy => manifest_schema::<PolicySpec>(),
    };
    let mut value = schema.to_value();
    strip_null(&mut value);
    if let Some(obj) = value.as_object_mut() {
        obj.insert("$schema".into(), json!(DRAFT));
        obj.insert("title".into(), json!(format!("gitfleet {kind}")));
        obj.insert(
            "description".into(),
            json!(format!("A gitfleet {kind} document ({API_VERSION}).")),
        );
        if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert(
                "apiVersion".into(),
                json!({"const": API_VERSION, "description": "Always gitfleet/v1."}),
            );
            props.insert(
                "kind".into(),
                json!({"const": kind.as_str(), "description": "The document kind."}),
            );
        }
    }
    value
}

/// An omitted field and `null` are not the same in a spec: optional fields are
/// simply not required. Removing schemars' `null` alternatives keeps schema
/// errors precise ("expected string") instead of "not valid under any of anyOf".
fn strip_null(value: &mut Value) {
    match value {
        Value::Object(obj) => {
            if let Some(Value::Array(types)) = obj.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    obj.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(alternatives)) = obj.get("anyOf") {
                let non_null: Vec<Value> = alternatives
                    .iter()
                    .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                    .cloned()
                    .collect();
                if non_null.len() == 1 && alternatives.len() == 2 {
                    obj.remove("anyOf");
                    if let Value::Object(inner) = &non_null[0] {
                        for (k, v) in inner {
                            obj.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
            }
            obj.values_mut().for_each(strip_null);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null),
        _ => {}
    }
}

fn manifest_schema<S: JsonSchema>() -> Schema {
    schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Manifest<S>>()
}

/// One schema for any gitfleet document: dispatches on `kind` to the kind's schema.
/// Handy for editors on files that mix kinds.
pub fn fleet_schema() -> Value {
    let mut defs = Map::new();
    let mut branches = Vec::new();
    for kind in Kind::ALL {
        let mut schema = kind_schema(kind);
        if let Some(obj) = schema.as_object_mut() {
            obj.remove("$schema");
            if let Some(Value::Object(kind_defs)) = obj.remove("$defs") {
                defs.extend(kind_defs);
            }
        }
        branches.push(json!({
            "if": {"properties": {"kind": {"const": kind.as_str()}}, "required": ["kind"]},
            "then": schema,
        }));
    }
    let kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    json!({
        "$schema": DRAFT,
        "title": "gitfleet document",
        "description": format!("Any {API_VERSION} document: NodePool, Queue, PriorityClass, Job or Policy."),
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"enum": kinds},
        },
        "allOf": branches,
        "$defs": defs,
    })
}

/// The file name of a kind's schema in `schemas/`.
pub fn file_name(kind: Kind) -> String {
    format!("{}.schema.json", kind.as_str().to_lowercase())
}

/// The file name of the any-kind schema in `schemas/`.
pub const FLEET_SCHEMA_FILE: &str = "fleet.schema.json";

/// Every schema file as (file name, pretty JSON with a trailing newline).
pub fn all_schema_files() -> Vec<(String, String)> {
    let pretty = |v: &Value| {
        let mut text = serde_json::to_string_pretty(v).unwrap_or_default();
        text.push('\n');
        text
    };
    let mut files: Vec<(String, String)> = Kind::ALL
        .iter()
        .map(|&k| (file_name(k), pretty(&kind_schema(k))))
        .collect();
    files.push((FLEET_SCHEMA_FILE.to_string(), pretty(&fleet_schema())));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_compiles() {
        for kind in Kind::ALL {
            jsonschema::validator_for(&kind_schema(kind)).unwrap();
        }
        jsonschema::validator_for(&fleet_schema()).unwrap();
    }

    #[test]
    fn optional_fields_are_not_nullable() {
        let text = serde_json::to_string(&kind_schema(Kind::Job)).unwrap();
        assert!(!text.contains("\"null\""), "{text}");
    }

    #[test]
    fn kind_schema_pins_kind_and_api_version() {
        let schema = kind_schema(Kind::Job);
        assert_eq!(schema["properties"]["kind"]["const"], "Job");
        assert_eq!(schema["properties"]["apiVersion"]["const"], API_VERSION);
        let validator = jsonschema::validator_for(&schema).unwrap();
        let good = json!({"apiVersion": API_VERSION, "kind": "Job", "metadata": {"name": "a"},
                          "spec": {"queue": "q", "gpusPerReplica": 1}});
        assert!(validator.is_valid(&good));
        let mut bad = good.clone();
        bad["kind"] = json!("Queue");
        assert!(!validator.is_valid(&bad));
    }
}
