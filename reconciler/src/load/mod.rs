//! Reading a fleet repository: files → YAML documents → typed, validated objects.
//!
//! The loader takes `(path, bytes)` pairs, so the same code reads a directory
//! ([`fs::read_fleet_dir`]) or the files of a Git tree. It never stops at the
//! first problem: every file is read and every error is collected.

pub mod fs;
mod schema_check;
pub mod yaml;

use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::diag::{Diagnostic, Origin, Pos, sort_diagnostics};
use crate::spec::{
    API_VERSION, Fleet, JobSpec, Kind, Manifest, NodePoolSpec, Object, PolicySpec,
    PriorityClassSpec, QueueSpec,
};
use crate::validate;
use yaml::{Node, PathSegment};

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
    /// The document's YAML tree.
    pub node: Node,
}

impl<S> Document<S> {
    /// The origin of the field at `path` (e.g. `["spec", "queue"]`), or of its
    /// closest existing parent.
    pub fn origin_of(&self, path: &[&str]) -> Origin {
        let node = self.node.locate(path.iter().map(|k| PathSegment::Key(*k)));
        Origin::new(self.object.origin.file.clone(), node.pos)
    }

    /// The origin of a path with sequence indices.
    pub fn origin_at(&self, path: &[PathSegment<&str>]) -> Origin {
        let node = self.node.locate(path.iter().cloned());
        Origin::new(self.object.origin.file.clone(), node.pos)
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
}

impl Documents {
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
    let mut diagnostics = Vec::new();
    let docs = parse_files(files, &mut diagnostics);
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
    let mut docs = Documents::default();
    for file in files {
        parse_file(file, &mut docs, diagnostics);
    }
    docs
}

fn parse_file(file: &SourceFile, docs: &mut Documents, diagnostics: &mut Vec<Diagnostic>) {
    let at = |pos: Pos| Origin::new(file.path.clone(), pos);
    let text = match std::str::from_utf8(&file.bytes) {
        Ok(text) => text,
        Err(err) => {
            let line = 1 + file.bytes[..err.valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count();
            diagnostics.push(Diagnostic::new(
                at(Pos::new(line as u32, 1)),
                "file is not valid UTF-8",
            ));
            return;
        }
    };
    let nodes = match yaml::parse_documents(text) {
        Ok(nodes) => nodes,
        Err(err) => {
            diagnostics.push(Diagnostic::new(
                at(err.pos),
                format!("YAML syntax error: {}", err.message),
            ));
            return;
        }
    };
    for node in nodes {
        if node.get("apiVersion").and_then(Node::as_str) != Some(API_VERSION) {
            continue; // another tool's document (Kubernetes, CI): not ours
        }
        let Some((kind_key, kind_node)) = node.entry("kind") else {
            diagnostics.push(Diagnostic::new(
                at(node.pos),
                "missing required field \"kind\"",
            ));
            continue;
        };
        let _ = kind_key;
        let kind_text = kind_node.as_str().unwrap_or_default();
        let Some(kind) = Kind::parse(kind_text) else {
            diagnostics.push(Diagnostic::new(
                at(kind_node.pos),
                format!(
                    "kind: unknown kind {kind_text:?} (expected NodePool, Queue, PriorityClass, Job or Policy)"
                ),
            ));
            continue;
        };
        let origin = at(node.pos);
        match kind {
            Kind::NodePool => push_typed(kind, node, origin, &mut docs.pools, diagnostics),
            Kind::Queue => push_typed(kind, node, origin, &mut docs.queues, diagnostics),
            Kind::PriorityClass => {
                push_typed(kind, node, origin, &mut docs.priority_classes, diagnostics)
            }
            Kind::Job => push_typed(kind, node, origin, &mut docs.jobs, diagnostics),
            Kind::Policy => push_typed(kind, node, origin, &mut docs.policies, diagnostics),
        }
    }
}

fn push_typed<S: DeserializeOwned>(
    kind: Kind,
    node: Node,
    origin: Origin,
    out: &mut Vec<Document<S>>,
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
        return;
    }
    match serde_path_to_error::deserialize::<_, Manifest<S>>(json) {
        Ok(manifest) => out.push(Document {
            object: Object {
                metadata: manifest.metadata,
                spec: manifest.spec,
                origin,
            },
            node,
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
            diagnostics.push(Diagnostic::new(
                at(pos),
                format!("{subject}: {}: {}", render_path(&path), err.inner()),
            ));
        }
    }
}
