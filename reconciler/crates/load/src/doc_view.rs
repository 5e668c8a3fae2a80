//! The documents as the fleet checks read them: parsed documents (with
//! their YAML trees when kept) or a fleet's objects (no trees), so that a
//! fleet put together without document wrappers can be checked as it is
//! ([`crate::validate::check_fleet`]).

use model::diag::Origin;
use model::spec::{Fleet, JobSpec, NodePoolSpec, Object, PolicySpec, PriorityClassSpec, QueueSpec};

use crate::yaml::{Node, PathSegment};
use crate::{Document, Documents, Rejected};

/// One document: its object, and its YAML tree when kept.
#[derive(Debug)]
pub struct DocRef<'a, S> {
    /// The typed object.
    pub object: &'a Object<S>,
    /// The document's YAML tree, when kept.
    pub node: Option<&'a Node>,
}

impl<S> Clone for DocRef<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for DocRef<'_, S> {}

impl<'a, S> DocRef<'a, S> {
    /// The origin of the field at `path` (e.g. `["spec", "queue"]`), or of its
    /// closest existing parent.
    pub fn origin_of(&self, path: &[&str]) -> Origin {
        match self.node {
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
        match self.node {
            Some(tree) => {
                let node = tree.locate_key(path.iter().map(|k| PathSegment::Key(*k)));
                Origin::new(self.object.origin.file.clone(), node.pos)
            }
            None => self.object.origin.clone(),
        }
    }

    /// The origin of a path with sequence indices.
    pub fn origin_at(&self, path: &[PathSegment<&str>]) -> Origin {
        match self.node {
            Some(tree) => {
                let node = tree.locate(path.iter().cloned());
                Origin::new(self.object.origin.file.clone(), node.pos)
            }
            None => self.object.origin.clone(),
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &'a str {
        self.object.name()
    }
}

/// The documents of one kind, in order.
#[derive(Debug)]
pub enum DocSlice<'a, S> {
    /// Parsed documents.
    Docs(&'a [Document<S>]),
    /// A fleet's objects (no trees).
    Objects(&'a [Object<S>]),
}

impl<S> Clone for DocSlice<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for DocSlice<'_, S> {}

impl<'a, S> DocSlice<'a, S> {
    /// How many documents.
    pub fn len(&self) -> usize {
        match self {
            DocSlice::Docs(d) => d.len(),
            DocSlice::Objects(o) => o.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`th document (`None` past the end).
    pub fn get(&self, i: usize) -> Option<DocRef<'a, S>> {
        match *self {
            DocSlice::Docs(d) => d.get(i).map(|d| DocRef {
                object: &d.object,
                node: d.node.as_ref(),
            }),
            DocSlice::Objects(o) => o.get(i).map(|object| DocRef { object, node: None }),
        }
    }

    /// The documents in order.
    pub fn iter(self) -> impl Iterator<Item = DocRef<'a, S>> + 'a
    where
        S: 'a,
    {
        (0..self.len()).filter_map(move |i| self.get(i))
    }
}

/// What the fleet checks read: the documents of each kind and what is
/// known of those that failed to load.
#[derive(Debug, Clone, Copy)]
pub struct DocsView<'a> {
    /// `kind: NodePool`
    pub pools: DocSlice<'a, NodePoolSpec>,
    /// `kind: Queue`
    pub queues: DocSlice<'a, QueueSpec>,
    /// `kind: PriorityClass`
    pub priority_classes: DocSlice<'a, PriorityClassSpec>,
    /// `kind: Job`
    pub jobs: DocSlice<'a, JobSpec>,
    /// `kind: Policy`
    pub policies: DocSlice<'a, PolicySpec>,
    /// What is known of the documents that failed to load.
    pub rejected: &'a Rejected,
}

impl<'a> DocsView<'a> {
    /// The view of parsed documents.
    pub fn of_documents(docs: &'a Documents) -> DocsView<'a> {
        DocsView {
            pools: DocSlice::Docs(&docs.pools),
            queues: DocSlice::Docs(&docs.queues),
            priority_classes: DocSlice::Docs(&docs.priority_classes),
            jobs: DocSlice::Docs(&docs.jobs),
            policies: DocSlice::Docs(&docs.policies),
            rejected: &docs.rejected,
        }
    }

    /// The view of a fleet's objects (every document loaded: `rejected`
    /// is empty).
    pub fn of_fleet(fleet: &'a Fleet, rejected: &'a Rejected) -> DocsView<'a> {
        DocsView {
            pools: DocSlice::Objects(&fleet.pools),
            queues: DocSlice::Objects(&fleet.queues),
            priority_classes: DocSlice::Objects(&fleet.priority_classes),
            jobs: DocSlice::Objects(&fleet.jobs),
            policies: DocSlice::Objects(&fleet.policies),
            rejected,
        }
    }
}
