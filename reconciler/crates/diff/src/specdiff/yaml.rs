//! Objects as canonical YAML (keys sorted, block style, lists of scalars in
//! flow style) and unified diffs between two versions.

use std::fmt::Write;

use serde_json::Value;
use similar::TextDiff;

use super::fields::{flow, scalar_str};

/// Lines of context around each change in a unified diff.
const CONTEXT: usize = 3;

/// The document as canonical YAML: the same object always gives the same
/// text, however it was written, so a diff shows only what changed.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        other => {
            let _ = writeln!(out, "{}", flow(other));
        }
    }
    out
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    // `apiVersion`, `kind`, `metadata`, `spec` come first at the top, as written by hand.
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| (rank(k), k.as_str()));
    for key in keys {
        let value = &map[key];
        let _ = write!(out, "{:indent$}{}:", "", scalar_str(key));
        write_value(out, value, indent);
    }
}

fn rank(key: &str) -> u8 {
    match key {
        "apiVersion" => 0,
        "kind" => 1,
        "metadata" => 2,
        "name" | "model" => 3,
        _ => 4,
    }
}

/// Writes a value after `key:` (or `- `), ending the line.
fn write_value(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, indent + 2);
        }
        Value::Array(items) if items.iter().any(|v| v.is_object() || v.is_array()) => {
            out.push('\n');
            for item in items {
                let _ = write!(out, "{:indent$}-", "", indent = indent + 2);
                match item {
                    Value::Object(map) if !map.is_empty() => {
                        // first key on the dash line, as people write lists of maps
                        let mut body = String::new();
                        write_map(&mut body, map, indent + 4);
                        out.push(' ');
                        out.push_str(body.trim_start());
                    }
                    other => write_value(out, other, indent + 2),
                }
            }
        }
        other => {
            let _ = writeln!(out, " {}", flow(other));
        }
    }
}

/// A unified diff of two texts with `a/` and `b/` headers; empty when equal.
pub fn unified(before: &str, after: &str, old_name: &str, new_name: &str) -> String {
    if before == after {
        return String::new();
    }
    TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(CONTEXT)
        .header(old_name, new_name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_yaml() {
        let doc = json!({"spec": {"quota": [{"model": "H100", "guaranteed": 8}],
            "command": ["torchrun", "--x=1"], "parent": "research", "empty": {}},
            "metadata": {"name": "nlp"}, "kind": "Queue", "apiVersion": "gitfleet/v1"});
        assert_eq!(
            to_yaml(&doc),
            "apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: nlp\nspec:\n  \
             command: [torchrun, \"--x=1\"]\n  empty: {}\n  parent: research\n  quota:\n    \
             - model: H100\n      guaranteed: 8\n"
        );
    }

    #[test]
    fn unified_diff_has_headers_and_hunks() {
        let diff = unified("a: 1\nb: 2\n", "a: 1\nb: 3\n", "a/x.yaml", "b/x.yaml");
        assert_eq!(
            diff,
            "--- a/x.yaml\n+++ b/x.yaml\n@@ -1,2 +1,2 @@\n a: 1\n-b: 2\n+b: 3\n"
        );
        assert_eq!(unified("a\n", "a\n", "x", "y"), "");
    }
}
