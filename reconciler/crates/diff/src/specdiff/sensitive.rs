//! Sensitive environment values (`env: {X: {value: …, sensitive: true}}`)
//! are masked as a document is read, so spec diffs, previews, pull-request
//! comments and history never hold them; a value that changed shows as
//! changed, still masked (Terraform's "(sensitive value)").

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use super::SpecDoc;
use model::spec::{Kind, MASK};

/// What a sensitive value that changed shows.
pub(super) const CHANGED: &str = "(sensitive, changed)";

/// Masks the sensitive values of a Job document in place; returns a hash of
/// each (never shown, only compared) by JSON pointer.
pub(super) fn mask(kind: Kind, doc: &mut Value) -> BTreeMap<String, u64> {
    let mut hashes = BTreeMap::new();
    if kind != Kind::Job {
        return hashes;
    }
    let Some(env) = doc.pointer_mut("/spec/env").and_then(Value::as_object_mut) else {
        return hashes;
    };
    for (name, entry) in env.iter_mut() {
        let Some(entry) = entry.as_object_mut() else {
            continue;
        };
        if entry.get("sensitive") != Some(&Value::Bool(true)) {
            continue;
        }
        if let Some(value) = entry.get_mut("value") {
            let mut hasher = DefaultHasher::new();
            value.to_string().hash(&mut hasher);
            hashes.insert(pointer(name), hasher.finish());
            *value = Value::String(MASK.to_string());
        }
    }
    hashes
}

/// `after` with every masked value that differs from `before`'s shown as
/// changed; `None` when none differs.
pub(super) fn mark_changed(before: &SpecDoc, after: &SpecDoc) -> Option<SpecDoc> {
    let changed: Vec<&String> = after
        .sensitive
        .iter()
        .filter(|(path, hash)| before.sensitive.get(*path).is_some_and(|b| b != *hash))
        .map(|(path, _)| path)
        .collect();
    if changed.is_empty() {
        return None;
    }
    let mut marked = after.clone();
    for path in changed {
        if let Some(value) = marked.value.pointer_mut(path) {
            *value = Value::String(CHANGED.to_string());
        }
    }
    Some(marked)
}

/// The JSON pointer of env entry `name`'s value.
fn pointer(name: &str) -> String {
    format!(
        "/spec/env/{}/value",
        name.replace('~', "~0").replace('/', "~1")
    )
}
