//! Field-level differences between two documents, in words:
//! `H100-SXM-80GB guaranteed 200 → 240`, `preemptible true → false`.

use serde::Serialize;
use serde_json::Value;

/// One field that differs between two versions of an object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// The field, in words: `replicas`, `gpu.models`, `H100-SXM-80GB guaranteed`,
    /// `metadata.labels.team`, `rules[0].message` (`spec.` left out).
    pub field: String,
    /// The value before; absent when the field was added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The value after; absent when the field was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    /// What the change means for what runs, e.g. `running; takes effect on
    /// restart` (set by whoever knows the live state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl FieldChange {
    /// `field before → after`, `field added: value`, `field removed (was value)`.
    pub fn words(&self) -> String {
        let words = match (&self.before, &self.after) {
            (Some(b), Some(a)) => format!("{} {} → {}", self.field, flow(b), flow(a)),
            (None, Some(a)) => format!("{} added: {}", self.field, flow(a)),
            (Some(b), None) => format!("{} removed (was {})", self.field, flow(b)),
            (None, None) => self.field.clone(),
        };
        match &self.note {
            Some(note) => format!("{words} ({note})"),
            None => words,
        }
    }

    /// Whether a running job only sees this change of its spec when it is
    /// started again: what it runs and the shape of its gang, not its
    /// queue, priority, time limit or labels (which apply at once).
    pub fn needs_restart(&self) -> bool {
        let field = self.field.as_str();
        // The kube executor's Pod template is read when the Pods are made,
        // the Slurm executor's sbatch options when the job is submitted.
        model::spec::RUNTIME_FIELDS
            .iter()
            .chain(model::spec::EXECUTOR_SECTIONS)
            .any(|f| {
                field == *f
                    || field.starts_with(&format!("{f}."))
                    || field.starts_with(&format!("{f}["))
            })
    }
}

/// The fields that differ between `before` and `after` (whole documents),
/// in key order. `apiVersion`, `kind` and `metadata.name` are the object's
/// identity and not compared.
pub fn field_changes(before: &Value, after: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    let (Value::Object(b), Value::Object(a)) = (before, after) else {
        compare(&mut out, &[], before, after);
        return out;
    };
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        if key == "apiVersion" || key == "kind" {
            continue;
        }
        let path = if key == "spec" {
            vec![]
        } else {
            vec![Seg::Key(key.clone())]
        };
        match (b.get(key), a.get(key)) {
            (Some(bv), Some(av)) if key == "metadata" => {
                let strip = |v: &Value| {
                    let mut v = v.clone();
                    if let Value::Object(m) = &mut v {
                        m.remove("name");
                    }
                    v
                };
                compare(&mut out, &path, &strip(bv), &strip(av));
            }
            (Some(bv), Some(av)) => compare(&mut out, &path, bv, av),
            (bv, av) => push(&mut out, &path, bv, av),
        }
    }
    out
}

/// A step of a field path.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    /// An item of a list of objects, named by its `model` or `name`.
    Item(String),
    Index(usize),
}

fn compare(out: &mut Vec<FieldChange>, path: &[Seg], before: &Value, after: &Value) {
    if before == after {
        return;
    }
    match (before, after) {
        (Value::Object(b), Value::Object(a)) if !path.is_empty() => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let sub = extend(path, Seg::Key(key.clone()));
                match (b.get(key), a.get(key)) {
                    (Some(bv), Some(av)) => compare(out, &sub, bv, av),
                    (bv, av) => push(out, &sub, bv, av),
                }
            }
        }
        (Value::Object(b), Value::Object(a)) => {
            // the top of `spec`: its keys start the path
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let sub = vec![Seg::Key(key.clone())];
                match (b.get(key), a.get(key)) {
                    (Some(bv), Some(av)) => compare(out, &sub, bv, av),
                    (bv, av) => push(out, &sub, bv, av),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if is_object_list(b) && is_object_list(a) => {
            match (item_key(b), item_key(a)) {
                (Some(kb), Some(ka)) if kb == ka => compare_keyed(out, path, kb, b, a),
                _ => compare_indexed(out, path, b, a),
            }
        }
        _ => push(out, path, Some(before), Some(after)),
    }
}

/// Lists of objects whose items all have a distinct string `model` (quota
/// entries) or `name` are compared item by item by that key.
fn compare_keyed(out: &mut Vec<FieldChange>, path: &[Seg], key: &str, b: &[Value], a: &[Value]) {
    let id = |v: &Value| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let mut ids: Vec<String> = b.iter().chain(a).map(id).collect();
    ids.sort();
    ids.dedup();
    for item in ids {
        let find = |list: &[Value]| list.iter().find(|v| id(v) == item).cloned();
        let sub = extend(path, Seg::Item(item.clone()));
        match (find(b), find(a)) {
            (Some(mut bv), Some(mut av)) => {
                if let (Value::Object(bm), Value::Object(am)) = (&mut bv, &mut av) {
                    bm.remove(key);
                    am.remove(key);
                }
                compare(out, &sub, &bv, &av);
            }
            (bv, av) => {
                // a whole item added or removed: `quota L4 added: {guaranteed: 4}`
                let strip = |v: Option<Value>| {
                    v.map(|mut v| {
                        if let Value::Object(m) = &mut v {
                            m.remove(key);
                        }
                        v
                    })
                };
                out.push(FieldChange {
                    field: format!("{} {item}", words(path)),
                    before: strip(bv),
                    after: strip(av),
                    note: None,
                });
            }
        }
    }
}

fn compare_indexed(out: &mut Vec<FieldChange>, path: &[Seg], b: &[Value], a: &[Value]) {
    for i in 0..b.len().max(a.len()) {
        let sub = extend(path, Seg::Index(i));
        match (b.get(i), a.get(i)) {
            (Some(bv), Some(av)) => compare(out, &sub, bv, av),
            (bv, av) => push(out, &sub, bv, av),
        }
    }
}

fn is_object_list(list: &[Value]) -> bool {
    !list.is_empty() && list.iter().all(Value::is_object)
}

/// `model` or `name`, when every item has it as a string and no two share it.
fn item_key(list: &[Value]) -> Option<&'static str> {
    ["model", "name"].into_iter().find(|key| {
        let mut ids: Vec<&str> = list
            .iter()
            .filter_map(|v| v.get(*key).and_then(Value::as_str))
            .collect();
        let all = ids.len() == list.len();
        ids.sort_unstable();
        ids.dedup();
        all && ids.len() == list.len()
    })
}

fn extend(path: &[Seg], seg: Seg) -> Vec<Seg> {
    let mut out = path.to_vec();
    out.push(seg);
    out
}

fn push(out: &mut Vec<FieldChange>, path: &[Seg], before: Option<&Value>, after: Option<&Value>) {
    out.push(FieldChange {
        field: words(path),
        before: before.cloned(),
        after: after.cloned(),
        note: None,
    });
}

/// A path in words: keys joined by `.`, an item of a keyed list named by its
/// key instead of the list (`quota` + `H100` + `limit` → `H100 limit`),
/// indices in brackets.
fn words(path: &[Seg]) -> String {
    let mut out = String::new();
    for (i, seg) in path.iter().enumerate() {
        match seg {
            Seg::Key(_) if matches!(path.get(i + 1), Some(Seg::Item(_))) => {}
            Seg::Key(k) => {
                if !out.is_empty() {
                    let after_item = i > 0 && matches!(path[i - 1], Seg::Item(_));
                    out.push(if after_item { ' ' } else { '.' });
                }
                out.push_str(k);
            }
            Seg::Item(id) => {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(id);
            }
            Seg::Index(n) => out.push_str(&format!("[{n}]")),
        }
    }
    if out.is_empty() {
        "value".to_string()
    } else {
        out
    }
}

/// A value in one line, YAML flow style: `240`, `H100`, `[a, b]`, `{k: v}`.
pub fn flow(value: &Value) -> String {
    match value {
        Value::String(s) => scalar_str(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(flow).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", scalar_str(k), flow(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// A string as YAML writes it: plain when that reads back as the same
/// string, double-quoted otherwise.
pub fn scalar_str(s: &str) -> String {
    if is_plain(s) {
        s.to_string()
    } else {
        Value::String(s.to_string()).to_string()
    }
}

fn is_plain(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let reserved = matches!(
        s.to_ascii_lowercase().as_str(),
        "true" | "false" | "null" | "~" | "yes" | "no" | "on" | "off" | ".inf" | ".nan"
    );
    let numeric = s.parse::<f64>().is_ok() || s.starts_with("0x") || s.starts_with("0o");
    (first.is_alphanumeric() || matches!(first, '_' | '/' | '.'))
        && !reserved
        && !numeric
        && !s.ends_with(' ')
        && !s.contains(": ")
        && !s.contains(" #")
        && s.chars()
            .all(|c| c.is_alphanumeric() || " _./:@+=-()'".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(before: Value, after: Value) -> Vec<String> {
        field_changes(&before, &after)
            .iter()
            .map(FieldChange::words)
            .collect()
    }

    #[test]
    fn quota_entries_are_matched_by_model() {
        let before = json!({"apiVersion": "gitfleet/v1", "kind": "Queue",
            "metadata": {"name": "nlp"},
            "spec": {"parent": "research", "quota": [
                {"model": "A100", "guaranteed": 8},
                {"model": "H100-SXM-80GB", "guaranteed": 200, "limit": 300}]}});
        let after = json!({"apiVersion": "gitfleet/v1", "kind": "Queue",
            "metadata": {"name": "nlp"},
            "spec": {"parent": "research", "weight": 2, "quota": [
                {"model": "H100-SXM-80GB", "guaranteed": 240, "limit": 300},
                {"model": "L4", "guaranteed": 4}]}});
        assert_eq!(
            lines(before, after),
            [
                "quota A100 removed (was {guaranteed: 8})",
                "H100-SXM-80GB guaranteed 200 → 240",
                "quota L4 added: {guaranteed: 4}",
                "weight added: 2",
            ]
        );
    }

    #[test]
    fn nested_fields_lists_and_metadata() {
        let before = json!({"metadata": {"name": "a", "labels": {"team": "nlp"}},
            "spec": {"preemptible": true, "gpu": {"models": ["H100", "A100"]},
                "rules": [{"expression": "x", "message": "m"}], "command": ["a"]}});
        let after = json!({"metadata": {"name": "a", "labels": {"team": "vision"}},
            "spec": {"preemptible": false, "gpu": {"models": ["H100"]},
                "rules": [{"expression": "y", "message": "m"}, {"expression": "z"}]}});
        assert_eq!(
            lines(before, after),
            [
                "metadata.labels.team nlp → vision",
                "command removed (was [a])",
                "gpu.models [H100, A100] → [H100]",
                "preemptible true → false",
                "rules[0].expression x → y",
                "rules[1] added: {expression: z}",
            ]
        );
    }

    #[test]
    fn image_and_the_pod_template_need_a_restart_labels_do_not() {
        let change = |field: &str| FieldChange {
            field: field.to_string(),
            before: None,
            after: None,
            note: None,
        };
        assert!(change("image").needs_restart());
        assert!(change("kubernetes").needs_restart());
        assert!(change("kubernetes.resources.requests.cpu").needs_restart());
        assert!(change("kubernetes.volumes[0]").needs_restart());
        assert!(!change("kubernetesx").needs_restart());
        assert!(change("slurm").needs_restart());
        assert!(change("slurm.cpusPerTask").needs_restart());
        assert!(!change("slurmx").needs_restart());
        assert!(!change("metadata.labels.team").needs_restart());
        assert!(!change("timeLimit").needs_restart());
    }

    #[test]
    fn scalars_are_quoted_only_when_needed() {
        assert_eq!(scalar_str("H100-SXM-80GB"), "H100-SXM-80GB");
        assert_eq!(
            scalar_str("nvcr.io/nvidia/pytorch:24.03-py3"),
            "nvcr.io/nvidia/pytorch:24.03-py3"
        );
        assert_eq!(scalar_str("true"), "\"true\"");
        assert_eq!(scalar_str("72"), "\"72\"");
        assert_eq!(scalar_str("--x=1"), "\"--x=1\"");
        assert_eq!(scalar_str("a: b"), "\"a: b\"");
        assert_eq!(scalar_str(""), "\"\"");
    }
}
