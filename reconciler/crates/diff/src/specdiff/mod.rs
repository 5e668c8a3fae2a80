//! The semantic difference between two versions of a fleet's specs: objects
//! matched by kind and name (never by file), field changes in words, and a
//! unified diff of each changed object's canonical YAML.
//!
//! Documents are compared as written (the raw YAML of every
//! `apiVersion: gitfleet/v1` document), not as validated, so a diff can be
//! shown for a revision that does not validate too.

mod fields;
mod sensitive;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use load::SourceFile;
use load::yaml::{Node, parse_documents};
use model::spec::{API_VERSION, Kind};

pub use fields::{FieldChange, flow};
pub use yaml::{to_yaml, unified};

/// Every gitfleet document of one version of a fleet, by kind and name.
#[derive(Debug, Clone, Default)]
pub struct DocSet {
    docs: BTreeMap<(Kind, String), SpecDoc>,
    /// Files that could not be read (not UTF-8, YAML syntax errors): what
    /// they hold is unknown, so their objects are neither added nor removed.
    unreadable: BTreeSet<String>,
}

/// One document as written.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecDoc {
    /// Its file (for files read from Git, the path inside the repository).
    pub file: String,
    /// The line where the document starts.
    pub line: u32,
    /// The document as JSON, sensitive env values masked.
    pub value: Value,
    /// A hash of each masked value by JSON pointer (compared, never shown).
    sensitive: BTreeMap<String, u64>,
}

impl DocSet {
    /// The documents of `files`. Files that are not UTF-8 or not YAML,
    /// documents of another `apiVersion`, and documents without a known
    /// `kind` or a string `metadata.name` are left out (validation reports
    /// them); of two documents with the same kind and name, the first counts.
    /// With a `label`, file names `LABEL:path` (files read from Git, see
    /// `git::file_label`) are shown as `path`.
    pub fn from_files(files: &[SourceFile], label: Option<&str>) -> Self {
        let mut set = DocSet::default();
        let prefix = label.map(|l| format!("{l}:"));
        for file in files {
            let name = match &prefix {
                Some(prefix) => file
                    .path
                    .strip_prefix(prefix.as_str())
                    .unwrap_or(&file.path),
                None => &file.path,
            };
            let Some(nodes) = std::str::from_utf8(&file.bytes)
                .ok()
                .and_then(|text| parse_documents(text).ok())
            else {
                set.unreadable.insert(name.to_string());
                continue;
            };
            for node in nodes {
                set.insert(name, &node);
            }
        }
        set
    }

    fn insert(&mut self, file: &str, node: &Node) {
        if node.get("apiVersion").and_then(Node::as_str) != Some(API_VERSION) {
            return;
        }
        let Some(kind) = node
            .get("kind")
            .and_then(Node::as_str)
            .and_then(Kind::parse)
        else {
            return;
        };
        let Some(name) = node
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Node::as_str)
        else {
            return;
        };
        self.docs
            .entry((kind, name.to_string()))
            .or_insert_with(|| {
                let mut value = node.to_json();
                let sensitive = sensitive::mask(kind, &mut value);
                SpecDoc {
                    file: file.to_string(),
                    line: node.pos.line,
                    value,
                    sensitive,
                }
            });
    }

    /// The document of `kind` named `name`.
    pub fn get(&self, kind: Kind, name: &str) -> Option<&SpecDoc> {
        self.docs.get(&(kind, name.to_string()))
    }

    /// How many documents the set holds.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Whether `file` could not be read.
    pub fn is_unreadable(&self, file: &str) -> bool {
        self.unreadable.contains(file)
    }

    /// Whether some file could not be read.
    pub fn has_unreadable(&self) -> bool {
        !self.unreadable.is_empty()
    }

    /// Takes the documents of files unreadable here from an older version
    /// where they could be read (history compares a fix with the last good
    /// version of the file, not with the broken one).
    pub fn fill_unreadable_from(&mut self, older: &DocSet) {
        let fillable: Vec<String> = self
            .unreadable
            .iter()
            .filter(|f| !older.unreadable.contains(*f))
            .cloned()
            .collect();
        for file in fillable {
            self.unreadable.remove(&file);
            for (key, doc) in older.docs.iter().filter(|(_, d)| d.file == file) {
                self.docs.entry(key.clone()).or_insert_with(|| doc.clone());
            }
        }
    }
}

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// New in the later version.
    Added,
    /// Gone in the later version.
    Removed,
    /// Present in both, with different fields.
    Changed,
    /// Present in both, unchanged, in another file.
    Moved,
}

/// The difference of one object, matched by kind and name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectDiff {
    /// The object's kind.
    pub kind: Kind,
    /// `metadata.name`.
    pub name: String,
    /// Added, removed, changed or moved.
    pub change: Change,
    /// Its file before (absent when added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_before: Option<String>,
    /// Its file after (absent when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_after: Option<String>,
    /// The fields that differ (only for `changed`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    /// A unified diff of the object's canonical YAML (whole for added and
    /// removed objects; empty for moved ones).
    pub yaml_diff: String,
}

impl ObjectDiff {
    /// `queue nlp`, `priority class low`.
    pub fn title(&self) -> String {
        let name = model::text::escape_controls(&self.name);
        format!("{} {name}", kind_words(self.kind))
    }

    /// What happened in one line each: `job a added`,
    /// `queue nlp: H100 guaranteed 200 → 240`, `job b moved from x.yaml to y.yaml`.
    pub fn lines(&self) -> Vec<String> {
        let title = self.title();
        let mut out = match self.change {
            Change::Added => vec![format!("{title} added")],
            Change::Removed => vec![format!("{title} removed")],
            Change::Changed => self
                .fields
                .iter()
                .map(|f| format!("{title}: {}", f.words()))
                .collect(),
            Change::Moved => vec![],
        };
        if let (Some(before), Some(after)) = (&self.file_before, &self.file_after)
            && before != after
        {
            out.push(format!("{title} moved from {before} to {after}"));
        }
        // Names, paths and values are the committer's: print them inert.
        out.into_iter()
            .map(|line| model::text::escape_controls(&line).into_owned())
            .collect()
    }

    /// `+`, `-`, `~` or `>` (moved).
    pub fn symbol(&self) -> &'static str {
        match self.change {
            Change::Added => "+",
            Change::Removed => "-",
            Change::Changed => "~",
            Change::Moved => ">",
        }
    }
}

/// The kind in words, as messages say it: `node pool`, `priority class`.
pub fn kind_words(kind: Kind) -> &'static str {
    match kind {
        Kind::NodePool => "node pool",
        Kind::Queue => "queue",
        Kind::PriorityClass => "priority class",
        Kind::Job => "job",
        Kind::Policy => "policy",
    }
}

/// The difference of two fleets' specs, object by object.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SpecDiff {
    /// Counts by change.
    pub summary: SpecSummary,
    /// Objects that differ, by kind (as `Kind::ALL` orders them), then name.
    pub objects: Vec<ObjectDiff>,
}

/// How many objects were added, removed, changed, moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SpecSummary {
    /// New objects.
    pub added: usize,
    /// Objects gone.
    pub removed: usize,
    /// Objects with changed fields.
    pub changed: usize,
    /// Objects only moved to another file.
    pub moved: usize,
}

impl SpecSummary {
    /// `1 added, 2 changed, 1 removed` (`no changes` when nothing changed;
    /// moves are mentioned but are no change).
    pub fn words(&self) -> String {
        let parts: Vec<String> = [
            (self.added, "added"),
            (self.changed, "changed"),
            (self.removed, "removed"),
            (self.moved, "moved"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
        if parts.is_empty() {
            "no changes".to_string()
        } else {
            parts.join(", ")
        }
    }
}

impl SpecDiff {
    /// Whether any object was added, removed or changed (a move alone is not
    /// a change of the specs).
    pub fn has_changes(&self) -> bool {
        self.summary.added + self.summary.removed + self.summary.changed > 0
    }

    /// The difference of one object, if it differs.
    pub fn object(&self, kind: Kind, name: &str) -> Option<&ObjectDiff> {
        self.objects
            .iter()
            .find(|o| o.kind == kind && o.name == name)
    }
}

/// Compares two versions of a fleet's documents.
pub fn diff(before: &DocSet, after: &DocSet) -> SpecDiff {
    let mut keys: Vec<&(Kind, String)> = before.docs.keys().chain(after.docs.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = SpecDiff::default();
    for key in keys {
        let (kind, name) = key;
        let (b, a) = (before.docs.get(key), after.docs.get(key));
        // an object of a file that cannot be read on the other side is unknown there
        let unknown = match (b, a) {
            (Some(b), None) => after.is_unreadable(&b.file),
            (None, Some(a)) => before.is_unreadable(&a.file),
            _ => false,
        };
        if unknown {
            continue;
        }
        if let Some(object) = diff_object(*kind, name, b, a) {
            match object.change {
                Change::Added => out.summary.added += 1,
                Change::Removed => out.summary.removed += 1,
                Change::Changed => out.summary.changed += 1,
                Change::Moved => out.summary.moved += 1,
            }
            out.objects.push(object);
        }
    }
    out
}

/// The difference of one object, `None` when it is the same in the same file.
pub fn diff_object(
    kind: Kind,
    name: &str,
    before: Option<&SpecDoc>,
    after: Option<&SpecDoc>,
) -> Option<ObjectDiff> {
    let marked = match (before, after) {
        (Some(b), Some(a)) => sensitive::mark_changed(b, a),
        _ => None,
    };
    let after = marked.as_ref().or(after);
    let yaml = |d: Option<&SpecDoc>| d.map(|d| to_yaml(&d.value)).unwrap_or_default();
    let header = |prefix: &str, d: Option<&SpecDoc>| match d {
        Some(d) => format!("{prefix}/{}", d.file),
        None => "/dev/null".to_string(),
    };
    let (change, fields) = match (before, after) {
        (None, None) => return None,
        (None, Some(_)) => (Change::Added, vec![]),
        (Some(_), None) => (Change::Removed, vec![]),
        (Some(b), Some(a)) => {
            let fields = fields::field_changes(&b.value, &a.value);
            if !fields.is_empty() {
                (Change::Changed, fields)
            } else if b.file != a.file {
                (Change::Moved, vec![])
            } else {
                return None;
            }
        }
    };
    let yaml_diff = if change == Change::Moved {
        String::new()
    } else {
        unified(
            &yaml(before),
            &yaml(after),
            &header("a", before),
            &header("b", after),
        )
    };
    Some(ObjectDiff {
        kind,
        name: name.to_string(),
        change,
        file_before: before.map(|d| d.file.clone()),
        file_after: after.map(|d| d.file.clone()),
        fields,
        yaml_diff,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(files: &[(&str, &str)]) -> DocSet {
        let files: Vec<SourceFile> = files
            .iter()
            .map(|(p, t)| SourceFile::new(*p, t.as_bytes()))
            .collect();
        DocSet::from_files(&files, None)
    }

    const QUEUE: &str = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: nlp}\n\
        spec:\n  quota:\n    - {model: H100-SXM-80GB, guaranteed: 200}\n";
    const JOB: &str = "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: train}\n\
        spec: {queue: nlp, gpusPerReplica: 8}\n";
    const OTHER: &str = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";

    #[test]
    fn objects_are_matched_by_kind_and_name() {
        let before = set(&[("fleet/a.yaml", &format!("{QUEUE}{JOB}{OTHER}"))]);
        let after = set(&[
            (
                "fleet/a.yaml",
                &QUEUE.replace("guaranteed: 200", "guaranteed: 240"),
            ),
            (
                "fleet/jobs.yaml",
                "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: train}\n\
                 spec: {gpusPerReplica: 8, queue: nlp}\n---\napiVersion: gitfleet/v1\n\
                 kind: PriorityClass\nmetadata: {name: low}\nspec: {value: 1}\n",
            ),
        ]);
        let d = diff(&before, &after);
        let lines: Vec<String> = d.objects.iter().flat_map(|o| o.lines()).collect();
        assert_eq!(
            lines,
            [
                "queue nlp: H100-SXM-80GB guaranteed 200 → 240",
                "priority class low added",
                "job train moved from fleet/a.yaml to fleet/jobs.yaml",
            ]
        );
        assert_eq!(
            d.summary,
            SpecSummary {
                added: 1,
                removed: 0,
                changed: 1,
                moved: 1
            }
        );
        assert_eq!(d.summary.words(), "1 added, 1 changed, 1 moved");
        assert!(d.has_changes());
        assert_eq!(
            d.objects[0].yaml_diff,
            "--- a/fleet/a.yaml\n+++ b/fleet/a.yaml\n@@ -5,4 +5,4 @@\n spec:\n   quota:\n     \
             - model: H100-SXM-80GB\n-      guaranteed: 200\n+      guaranteed: 240\n"
        );
        assert!(
            d.objects[1]
                .yaml_diff
                .starts_with("--- /dev/null\n+++ b/fleet/jobs.yaml\n")
        );
    }

    #[test]
    fn equal_fleets_have_no_diff() {
        let a = set(&[("a.yaml", QUEUE)]);
        let d = diff(&a, &a);
        assert!(d.objects.is_empty());
        assert!(!d.has_changes());
        assert_eq!(d.summary.words(), "no changes");
    }

    #[test]
    fn objects_of_unreadable_files_are_not_removed() {
        let good = set(&[("a.yaml", QUEUE), ("b.yaml", JOB)]);
        let broken = set(&[("a.yaml", "key: [unclosed\n"), ("b.yaml", JOB)]);
        assert_eq!(broken.len(), 1);
        assert!(broken.is_unreadable("a.yaml"));
        assert!(diff(&good, &broken).objects.is_empty());
        assert!(diff(&broken, &good).objects.is_empty());
    }
}
