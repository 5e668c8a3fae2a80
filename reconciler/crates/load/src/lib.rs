//! Reading a fleet repository: files → YAML documents → typed, validated objects.
//!
//! The loader takes `(path, bytes)` pairs, so the same code reads a directory
//! ([`fs::read_fleet_dir`]) or the files of a Git tree. It never stops at the
//! first problem: every file is read and every error is collected.

pub mod cache;
pub mod doc_view;
pub mod fs;
mod halves;
pub mod observed;
mod schema_check;
pub mod validate;
pub mod yaml;
mod yaml_fast;
#[cfg(test)]
mod yaml_fast_tests;
mod yaml_parse;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::validate::closest;
use model::diag::{Diagnostic, Origin, Pos, sort_diagnostics};
use model::spec::{
    API_VERSION, Fleet, JobSpec, Kind, Manifest, NodePoolSpec, Object, PolicySpec,
    PriorityClassSpec, QueueSpec,
};
use yaml::{Node, PathSegment};

pub use observed::parse_observed;
pub use schema_check::render_path;

/// One file of a fleet repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The path shown in messages (e.g. `examples/fleet/queues.yaml`).
    pub path: Arc<str>,
    /// The raw contents.
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// A file named `path` holding `bytes`.
    pub fn new(path: impl Into<Arc<str>>, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            bytes: bytes.into(),
        }
    }
}

/// The outcome of loading: whatever could be read, and every problem found.
/// The fleet is only meaningful when `diagnostics` is empty.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The valid documents.
    pub fleet: Fleet,
    /// Every error, sorted by file, line and column.
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    /// Whether the repository is valid.
    pub fn is_valid(&self) -> bool {
        self.diagnostics.is_empty()
    }
}

/// A typed document together with its YAML tree, for position look-ups
/// during validation.
#[derive(Debug, Clone)]
pub struct Document<S> {
    /// The typed object.
    pub object: Object<S>,
    /// The document's YAML tree, kept only when positions may be needed
    /// (see [`load_fleet`]).
    pub node: Option<Node>,
}

impl<S> Document<S> {
    /// The origin of the field at `path` (e.g. `["spec", "queue"]`), or of its
    /// closest existing parent.
    pub fn origin_of(&self, path: &[&str]) -> Origin {
        match &self.node {
            Some(tree) => {
                let node = tree.locate(path.iter().map(|k| PathSegment::Key(*k)));
                Origin::new(self.object.origin.file.clone(), node.pos)
            }
            None => self.object.origin.clone(),
        }
    }

    /// The origin of the *key* of the field at `path` (or of its closest
    /// existing parent): `spec:` rather than the first field inside it.
    pub fn key_origin_of(&self, path: &[&str]) -> Origin {
        match &self.node {
            Some(tree) => {
                let node = tree.locate_key(path.iter().map(|k| PathSegment::Key(*k)));
                Origin::new(self.object.origin.file.clone(), node.pos)
            }
            None => self.object.origin.clone(),
        }
    }

    /// The origin of a path with sequence indices.
    pub fn origin_at(&self, path: &[PathSegment<&str>]) -> Origin {
        match &self.node {
            Some(tree) => {
                let node = tree.locate(path.iter().cloned());
                Origin::new(self.object.origin.file.clone(), node.pos)
            }
            None => self.object.origin.clone(),
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.object.name()
    }
}

/// All documents of a repository with their trees: the input of validation.
#[derive(Debug, Clone, Default)]
pub struct Documents {
    /// `kind: NodePool`
    pub pools: Vec<Document<NodePoolSpec>>,
    /// `kind: Queue`
    pub queues: Vec<Document<QueueSpec>>,
    /// `kind: PriorityClass`
    pub priority_classes: Vec<Document<PriorityClassSpec>>,
    /// `kind: Job`
    pub jobs: Vec<Document<JobSpec>>,
    /// `kind: Policy`
    pub policies: Vec<Document<PolicySpec>>,
    /// What is known of the documents that failed to load.
    pub rejected: Rejected,
}

/// What is known of documents that could not be loaded (their errors are
/// already reported), so that validation does not report references to them
/// a second time as unknown, nor judge jobs against an incomplete set of pools.
#[derive(Debug, Clone, Default)]
pub struct Rejected {
    /// `metadata.name` of rejected documents of a known kind.
    pub names: BTreeMap<Kind, BTreeSet<String>>,
    /// `metadata.name` of documents whose `kind` is missing or unknown.
    pub names_of_unknown_kind: BTreeSet<String>,
    /// `spec.gpu.model` of rejected NodePools.
    pub models: BTreeSet<String>,
    /// Whether a rejected NodePool has no readable `spec.gpu.model`.
    pub pool_without_model: bool,
    /// Whether a file could not be parsed at all: anything may be defined there.
    pub unreadable_file: bool,
}

impl Rejected {
    /// Adds what `other` rejected.
    pub fn append(&mut self, other: Rejected) {
        for (kind, names) in other.names {
            self.names.entry(kind).or_default().extend(names);
        }
        self.names_of_unknown_kind
            .extend(other.names_of_unknown_kind);
        self.models.extend(other.models);
        self.pool_without_model |= other.pool_without_model;
        self.unreadable_file |= other.unreadable_file;
    }

    /// Whether a rejected document may be the `kind` named `name`.
    pub fn may_define(&self, kind: Kind, name: &str) -> bool {
        self.unreadable_file
            || self.names_of_unknown_kind.contains(name)
            || self
                .names
                .get(&kind)
                .is_some_and(|names| names.contains(name))
    }

    /// Whether a rejected NodePool may provide GPU model `model`.
    pub fn may_provide(&self, model: &str) -> bool {
        self.may_provide_any(|m| m == model)
    }

    /// Whether a rejected NodePool may provide a model that `accepts` accepts.
    pub fn may_provide_any(&self, accepts: impl Fn(&str) -> bool) -> bool {
        self.unreadable_file || self.pool_without_model || self.models.iter().any(|m| accepts(m))
    }

    fn record(&mut self, kind: Option<Kind>, json: &serde_json::Value) {
        let name = json.pointer("/metadata/name").and_then(|n| n.as_str());
        if let Some(name) = name {
            match kind {
                Some(kind) => self.names.entry(kind).or_default().insert(name.to_string()),
                None => self.names_of_unknown_kind.insert(name.to_string()),
            };
        }
        if kind == Some(Kind::NodePool) {
            match json.pointer("/spec/gpu/model").and_then(|m| m.as_str()) {
                Some(model) => {
                    self.models.insert(model.to_string());
                }
                None => self.pool_without_model = true,
            }
        }
    }
}

impl Documents {
    /// Adds the documents of `other` after these.
    pub fn append(&mut self, other: Documents) {
        self.pools.extend(other.pools);
        self.queues.extend(other.queues);
        self.priority_classes.extend(other.priority_classes);
        self.jobs.extend(other.jobs);
        self.policies.extend(other.policies);
        self.rejected.append(other.rejected);
    }

    /// Drops the trees.
    pub fn into_fleet(self) -> Fleet {
        fn objects<S>(docs: Vec<Document<S>>) -> Vec<Object<S>> {
            docs.into_iter().map(|d| d.object).collect()
        }
        Fleet {
            pools: objects(self.pools),
            queues: objects(self.queues),
            priority_classes: objects(self.priority_classes),
            jobs: objects(self.jobs),
            policies: objects(self.policies),
        }
    }
}

/// Loads and validates a fleet: syntax, schema, references, quota arithmetic, policies.
pub fn load_fleet(files: &[SourceFile]) -> Loaded {
    // A valid repository needs no positions: load it without keeping the
    // YAML trees (less memory, trees dropped on the parsing threads). Any
    // problem, and it is loaded again with trees so every message has its
    // line and column.
    let fast = load_with(files, false);
    if fast.is_valid() {
        return fast;
    }
    load_with(files, true)
}

fn load_with(files: &[SourceFile], keep_trees: bool) -> Loaded {
    let mut diagnostics = Vec::new();
    let docs = parse_files_with(files, &mut diagnostics, keep_trees);
    validate::check_documents(&docs, &mut diagnostics);
    sort_diagnostics(&mut diagnostics);
    Loaded {
        fleet: docs.into_fleet(),
        diagnostics,
    }
}

/// Parses and type-checks every file; documents that fail are left out and
/// reported. No cross-document checks happen here.
pub fn parse_files(files: &[SourceFile], diagnostics: &mut Vec<Diagnostic>) -> Documents {
    parse_files_with(files, diagnostics, true)
}

fn parse_files_with(
    files: &[SourceFile],
    diagnostics: &mut Vec<Diagnostic>,
    keep_trees: bool,
) -> Documents {
    let nodes = yaml::NodeBudget::new(yaml::MAX_FLEET_NODES);
    let parts = map_files(files, |file| {
        let mut docs = Documents::default();
        let mut diags = Vec::new();
        parse_file(
            file,
            &mut docs,
            &mut diags,
            keep_trees,
            &nodes,
            files.len() == 1,
        );
        (docs, diags)
    });
    // Sized once: appending 150,000 jobs to a growing vector copies them
    // several times over.
    let mut docs = Documents::default();
    docs.pools
        .reserve(parts.iter().map(|(d, _)| d.pools.len()).sum());
    docs.queues
        .reserve(parts.iter().map(|(d, _)| d.queues.len()).sum());
    docs.priority_classes
        .reserve(parts.iter().map(|(d, _)| d.priority_classes.len()).sum());
    docs.jobs
        .reserve(parts.iter().map(|(d, _)| d.jobs.len()).sum());
    docs.policies
        .reserve(parts.iter().map(|(d, _)| d.policies.len()).sum());
    for (part, diags) in parts {
        docs.append(part);
        diagnostics.extend(diags);
    }
    docs
}

/// `each` of every file, in file order. Files are independent: above a
/// size worth sharing, each of up to 8 threads takes the next file not yet
/// taken (so a thread slowed by other work on its core leaves no core idle),
/// and the results are put back in file order (they do not depend on the
/// number of threads or on who did what).
fn map_files<T: Send>(files: &[SourceFile], each: impl Fn(&SourceFile) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let bytes: usize = files.iter().map(|f| f.bytes.len()).sum();
    if threads < 2 || files.len() < 2 || bytes < 256 * 1024 {
        return files.iter().map(each).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || {
        let mut mine = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(file) = files.get(i) else { break };
            mine.push((i, each(file)));
        }
        mine
    };
    let mut parts: Vec<(usize, T)> = std::thread::scope(|scope| {
        // This thread takes files too: with no other thread to be had
        // (spawning failed), it takes them all.
        let handles: Vec<_> = (1..threads.min(files.len()))
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, take).ok())
            .collect();
        let mut parts = take();
        // A parser panic is a bug: carry it on rather than load a fleet
        // with files missing (which would cancel their running jobs).
        for handle in handles {
            parts.extend(
                handle
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
            );
        }
        parts
    });
    parts.sort_unstable_by_key(|(i, _)| *i);
    parts.into_iter().map(|(_, part)| part).collect()
}

fn parse_file(
    file: &SourceFile,
    docs: &mut Documents,
    diagnostics: &mut Vec<Diagnostic>,
    keep_trees: bool,
    nodes: &yaml::NodeBudget,
    in_halves: bool,
) {
    let at = |pos: Pos| Origin::new(file.path.clone(), pos);
    let text = match std::str::from_utf8(&file.bytes) {
        Ok(text) => text,
        Err(err) => {
            docs.rejected.unreadable_file = true;
            diagnostics.push(not_utf8(file, err));
            return;
        }
    };
    if in_halves
        && let Some((parsed, found)) = halves::parse_in_halves(file, text, keep_trees, nodes)
    {
        docs.append(parsed);
        diagnostics.extend(found);
        return;
    }
    let nodes = match yaml::parse_documents_within(text, nodes) {
        Ok(nodes) => nodes,
        Err(err) => {
            docs.rejected.unreadable_file = true;
            diagnostics.push(Diagnostic::new(
                at(err.pos),
                format!("YAML syntax error: {}", err.message),
            ));
            return;
        }
    };
    push_documents(file, nodes, docs, diagnostics, keep_trees);
}

/// The documents `nodes` of `file` (parsed, none empty), each typed and
/// added to `docs`, or its problems to `diagnostics`; documents of other
/// tools skipped.
fn push_documents(
    file: &SourceFile,
    nodes: Vec<Node>,
    docs: &mut Documents,
    diagnostics: &mut Vec<Diagnostic>,
    keep_trees: bool,
) {
    let at = |pos: Pos| Origin::new(file.path.clone(), pos);
    for node in nodes {
        if node.get("apiVersion").and_then(Node::as_str) != Some(API_VERSION) {
            // Another tool's document (Kubernetes, CI) is not ours; one of
            // ours with a mistyped or missing apiVersion is an error, never
            // skipped: skipped, it would read as deleted (its job cancelled).
            if let Some((pos, message)) = look_alike(&node) {
                let ours = node
                    .get("kind")
                    .and_then(Node::as_str)
                    .and_then(Kind::parse);
                docs.rejected.record(ours, &node.to_json());
                diagnostics.push(Diagnostic::new(at(pos), message));
            }
            continue;
        }
        let Some(kind_node) = node.get("kind") else {
            docs.rejected.record(None, &node.to_json());
            diagnostics.push(Diagnostic::new(
                at(node.pos),
                "missing required field \"kind\"",
            ));
            continue;
        };
        let Some(kind) = kind_node.as_str().and_then(Kind::parse) else {
            docs.rejected.record(None, &node.to_json());
            diagnostics.push(Diagnostic::new(at(kind_node.pos), unknown_kind(kind_node)));
            continue;
        };
        let origin = at(node.pos);
        let rejected = &mut docs.rejected;
        match kind {
            Kind::NodePool => push_typed(
                kind,
                node,
                keep_trees,
                origin,
                &mut docs.pools,
                rejected,
                diagnostics,
            ),
            Kind::Queue => push_typed(
                kind,
                node,
                keep_trees,
                origin,
                &mut docs.queues,
                rejected,
                diagnostics,
            ),
            Kind::PriorityClass => push_typed(
                kind,
                node,
                keep_trees,
                origin,
                &mut docs.priority_classes,
                rejected,
                diagnostics,
            ),
            Kind::Job => push_typed(
                kind,
                node,
                keep_trees,
                origin,
                &mut docs.jobs,
                rejected,
                diagnostics,
            ),
            Kind::Policy => push_typed(
                kind,
                node,
                keep_trees,
                origin,
                &mut docs.policies,
                rejected,
                diagnostics,
            ),
        }
    }
}

/// Points at the first invalid byte, with the column counted in characters.
fn not_utf8(file: &SourceFile, err: std::str::Utf8Error) -> Diagnostic {
    let valid = &file.bytes[..err.valid_up_to()];
    let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let line = 1 + valid.iter().filter(|b| **b == b'\n').count();
    let column = 1 + String::from_utf8_lossy(&valid[line_start..])
        .chars()
        .count();
    let byte = file
        .bytes
        .get(err.valid_up_to())
        .copied()
        .unwrap_or_default();
    Diagnostic::new(
        Origin::new(file.path.clone(), Pos::new(line as u32, column as u32)),
        format!("file is not valid UTF-8 (byte 0x{byte:02X}); save it as UTF-8"),
    )
}

/// Whether a document that is not `gitfleet/v1` looks like one of ours: a
/// gitfleet kind without an `apiVersion` (or with one that is not a string),
/// or an `apiVersion` whose group is `gitfleet` or a near miss of it
/// (`gitfleet/v1beta1`, `gitfleet/V1`, `gitflet/v1`). Documents of other API
/// groups (`batch/v1` Jobs, `scheduling.k8s.io/v1` PriorityClasses) are not.
/// Returns where and what to say.
fn look_alike(node: &Node) -> Option<(Pos, String)> {
    let kind = node.get("kind").and_then(Node::as_str);
    let ours = kind.and_then(Kind::parse);
    let what = match (
        ours,
        node.get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Node::as_str),
    ) {
        (Some(kind), Some(name)) => format!("{kind} {name}: "),
        (Some(kind), None) => format!("{kind}: "),
        (None, _) => String::new(),
    };
    let Some(version) = node.get("apiVersion") else {
        return ours.map(|_| {
            (
                node.pos,
                format!("{what}missing apiVersion: a gitfleet document needs \"apiVersion: {API_VERSION}\" (without it the document would be ignored)"),
            )
        });
    };
    let Some(text) = version.as_str() else {
        return ours.map(|_| {
            (
                version.pos,
                format!(
                    "{what}apiVersion: expected \"{API_VERSION}\", found {}",
                    version.to_json()
                ),
            )
        });
    };
    let group = text
        .split('/')
        .next()
        .unwrap_or(text)
        .trim()
        .to_ascii_lowercase();
    let near = group.starts_with("gitfleet") || strsim::osa_distance(&group, "gitfleet") <= 2;
    near.then(|| {
        (
            version.pos,
            format!("{what}apiVersion: unknown version {text:?} (did you mean \"{API_VERSION}\"? gitfleet reads only {API_VERSION})"),
        )
    })
}

fn unknown_kind(kind_node: &Node) -> String {
    let Some(text) = kind_node.as_str() else {
        return format!(
            "kind: expected one of NodePool, Queue, PriorityClass, Job, Policy, found {}",
            kind_node.to_json()
        );
    };
    match closest(text, Kind::ALL.iter().map(|k| k.as_str())) {
        Some(near) => format!("kind: unknown kind {text:?} (did you mean {near:?}?)"),
        None => format!(
            "kind: unknown kind {text:?} (expected NodePool, Queue, PriorityClass, Job or Policy)"
        ),
    }
}

fn push_typed<S: DeserializeOwned>(
    kind: Kind,
    node: Node,
    keep_tree: bool,
    origin: Origin,
    out: &mut Vec<Document<S>>,
    rejected: &mut Rejected,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let json = node.to_json();
    let name = json
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .map(str::to_string);
    let subject = match &name {
        Some(name) => format!("{kind} {name}"),
        None => kind.to_string(),
    };
    let at = |pos: Pos| Origin::new(origin.file.clone(), pos);
    let violations = schema_check::check(kind, &node, &json);
    if !violations.is_empty() {
        for v in violations {
            let message = if v.field.is_empty() {
                format!("{subject}: {}", v.message)
            } else {
                format!("{subject}: {}: {}", v.field, v.message)
            };
            diagnostics.push(Diagnostic::new(at(v.pos), message));
        }
        rejected.record(Some(kind), &json);
        return;
    }
    // Fast path: the value is moved into the typed document (no string
    // copies). On failure it is rebuilt and deserialized again, tracking the
    // path, for a positioned message.
    let json = match serde_json::from_value::<Manifest<S>>(json) {
        Ok(manifest) => {
            out.push(Document {
                object: Object {
                    metadata: manifest.metadata,
                    spec: manifest.spec,
                    origin,
                },
                node: keep_tree.then_some(node),
            });
            return;
        }
        Err(_) => node.to_json(),
    };
    match serde_path_to_error::deserialize::<_, Manifest<S>>(&json) {
        Ok(manifest) => out.push(Document {
            object: Object {
                metadata: manifest.metadata,
                spec: manifest.spec,
                origin,
            },
            node: keep_tree.then_some(node),
        }),
        Err(err) => {
            // The schema accepted the document but the types did not (e.g. an
            // integer beyond u32): report at the path serde stopped at.
            let path: Vec<PathSegment<String>> = err
                .path()
                .iter()
                .filter_map(|seg| match seg {
                    serde_path_to_error::Segment::Map { key } => {
                        Some(PathSegment::Key(key.clone()))
                    }
                    serde_path_to_error::Segment::Seq { index } => Some(PathSegment::Index(*index)),
                    _ => None,
                })
                .collect();
            let pos = node.locate(path.iter().cloned()).pos;
            rejected.record(Some(kind), &json);
            let message = err
                .inner()
                .to_string()
                .replace("expected u32", "expected an integer from 0 to 4294967295")
                .replace(
                    "expected i32",
                    "expected an integer from -2147483648 to 2147483647",
                );
            diagnostics.push(Diagnostic::new(
                at(pos),
                format!("{subject}: {}: {message}", render_path(&path)),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(files: &[(&str, &[u8])]) -> Vec<String> {
        let files: Vec<SourceFile> = files
            .iter()
            .map(|(path, bytes)| SourceFile::new(*path, *bytes))
            .collect();
        load_fleet(&files)
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn invalid_utf8_is_located_by_line_and_character() {
        let got = messages(&[("a.yaml", b"a: 1\nb: caf\xc3\xa9 \xe9\n")]);
        assert_eq!(
            got,
            ["a.yaml:2:9: file is not valid UTF-8 (byte 0xE9); save it as UTF-8"]
        );
    }

    #[test]
    fn integers_beyond_32_bits_name_the_range() {
        let got = messages(&[(
            "a.yaml",
            b"apiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: c}\nspec: {value: 3000000000}\n",
        )]);
        assert_eq!(
            got,
            [
                "a.yaml:4:15: PriorityClass c: spec.value: invalid value: integer `3000000000`, expected an integer from -2147483648 to 2147483647"
            ]
        );
    }

    #[test]
    fn look_alike_documents_are_errors_and_other_groups_are_ignored() {
        let got = messages(&[(
            "a.yaml",
            b"apiVersion: gitfleet/v1beta1\nkind: Job\nmetadata: {name: a}\n---\napiVersion: gitfleet/V1\nkind: Queue\nmetadata: {name: b}\n---\nkind: Job\nmetadata: {name: c}\n---\napiVersion: gitflet/v1\nkind: NodePool\nmetadata: {name: d}\n---\napiVersion: 1\nkind: Policy\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: k8s}\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: k8s}\n---\nkind: ConfigMap\n---\napiVersion: github.com/v1\nkind: Workflow\n",
        )]);
        assert_eq!(
            got,
            [
                "a.yaml:1:13: Job a: apiVersion: unknown version \"gitfleet/v1beta1\" (did you mean \"gitfleet/v1\"? gitfleet reads only gitfleet/v1)",
                "a.yaml:5:13: Queue b: apiVersion: unknown version \"gitfleet/V1\" (did you mean \"gitfleet/v1\"? gitfleet reads only gitfleet/v1)",
                "a.yaml:9:1: Job c: missing apiVersion: a gitfleet document needs \"apiVersion: gitfleet/v1\" (without it the document would be ignored)",
                "a.yaml:12:13: NodePool d: apiVersion: unknown version \"gitflet/v1\" (did you mean \"gitfleet/v1\"? gitfleet reads only gitfleet/v1)",
                "a.yaml:16:13: Policy: apiVersion: expected \"gitfleet/v1\", found 1",
            ]
        );
    }

    #[test]
    fn unknown_kinds_get_a_hint() {
        let got = messages(&[(
            "a.yaml",
            b"apiVersion: gitfleet/v1\nkind: Queu\nmetadata: {name: q}\n---\napiVersion: gitfleet/v1\nkind: 3\n",
        )]);
        assert_eq!(
            got,
            [
                "a.yaml:2:7: kind: unknown kind \"Queu\" (did you mean \"Queue\"?)",
                "a.yaml:6:7: kind: expected one of NodePool, Queue, PriorityClass, Job, Policy, found 3",
            ]
        );
    }

    #[test]
    fn references_to_rejected_documents_are_not_reported_again() {
        let fleet = b"apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: X, count: 8.5}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 0, quota: [{model: X, guaranteed: 8}]}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: leaf}\nspec: {parent: q, quota: [{model: X, guaranteed: 8}]}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j}\nspec: {queue: q, gpusPerReplica: 16, gpu: {models: [X]}}\n";
        let got = messages(&[("a.yaml", fleet)]);
        // Only the two schema errors: no "unknown queue", no "no NodePool
        // provides X", no "replica too large" judged without pool p.
        assert_eq!(
            got,
            [
                "a.yaml:5:26: NodePool p: spec.gpu.count: expected integer, found number 8.5",
                "a.yaml:11:16: Queue q: spec.weight: must be at least 1, found 0",
            ]
        );
    }

    #[test]
    fn a_file_that_cannot_be_parsed_hides_unknown_references() {
        let jobs = b"apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j}\nspec: {queue: q, gpusPerReplica: 1, priorityClass: high}\n";
        let got = messages(&[("jobs.yaml", jobs), ("queues.yaml", b"a: [\n")]);
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(
            got[0].starts_with("queues.yaml:1:4: YAML syntax error"),
            "{got:#?}"
        );
    }

    #[test]
    fn files_parsed_on_several_threads_merge_in_file_order() {
        // Above the size where parsing goes parallel; one bad document in a
        // middle file.
        let mut files = Vec::new();
        let mut expected = Vec::new();
        for f in 0..40 {
            let mut text = String::new();
            for k in 0..60 {
                let name = format!("job-{f}-{k}");
                text.push_str(&format!(
                    "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  queue: q\n  gpusPerReplica: 1\n  command: [python, train.py, --a-long-argument-to-make-the-file-larger]\n---\n"
                ));
                expected.push(name);
            }
            if f == 17 {
                text.push_str("apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: bad}\nspec: {queue: q, gpusPerReplica: many}\n");
            }
            files.push(SourceFile::new(
                format!("jobs/{f:02}.yaml"),
                text.into_bytes(),
            ));
        }
        let total: usize = files.iter().map(|f| f.bytes.len()).sum();
        assert!(
            total > 256 * 1024,
            "{total} bytes: too small to go parallel"
        );
        let mut diagnostics = Vec::new();
        let docs = parse_files(&files, &mut diagnostics);
        let names: Vec<&str> = docs.jobs.iter().map(|j| j.name()).collect();
        assert_eq!(names, expected);
        assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
        assert!(
            diagnostics[0].to_string().starts_with("jobs/17.yaml:"),
            "{diagnostics:#?}"
        );
    }
}
