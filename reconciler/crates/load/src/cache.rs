//! Loading a new revision of a fleet from what the last load parsed.
//!
//! A content-addressed source (Git) lists a revision's files with an id of
//! their contents (the blob id) before reading any of them. A file whose
//! path and id were in the last load is neither read nor parsed again: its
//! documents (parsed and checked against their schema, which depends on the
//! document alone) are reused, renamed to the new revision's file name. The
//! whole-fleet checks (names, references, the queue tree, policies) run on
//! the assembled documents every time. Whatever is wrong (a file that does
//! not parse, a schema error, a failed fleet check, too many YAML nodes in
//! all) sends the revision through [`load_fleet`] from scratch, so messages
//! are exactly those of a full load (with their lines and columns); the
//! result is always what [`load_fleet`] gives for the same files.
//!
//! Only the files of the last revision loaded are kept.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use model::diag::Origin;
use model::spec::Object;

use crate::validate::check_documents;
use crate::yaml::{MAX_FLEET_NODES, NodeBudget};
use crate::{Document, Documents, Loaded, SourceFile, load_fleet, map_files, parse_file};

/// A file of a revision, listed before it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// The name messages show (for Git, `REV:path`).
    pub name: Arc<str>,
    /// The path in the fleet's tree: with `id`, what identifies the file
    /// from one revision to the next.
    pub path: String,
    /// An id of the contents: equal ids, equal bytes (a Git blob id).
    pub id: Vec<u8>,
}

/// How a load went: what was reused and where the time went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadStats {
    /// Files in the revision.
    pub files: usize,
    /// Files read and parsed (the others were reused).
    pub parsed: usize,
    /// Whether the revision was loaded from scratch by [`load_fleet`]
    /// (something in it was wrong).
    pub full: bool,
    /// Reading the files not reused.
    pub read: Duration,
    /// Parsing them (and checking each document against its schema).
    pub parse: Duration,
    /// Putting the fleet's documents together.
    pub assemble: Duration,
    /// The whole-fleet checks.
    pub validate: Duration,
    /// The load from scratch, when there was one.
    pub fallback: Duration,
}

/// The documents of one file, parsed without their YAML trees.
#[derive(Debug)]
struct Parsed {
    docs: Documents,
    /// YAML nodes in the file (the fleet has a budget of them).
    nodes: usize,
}

/// The parsed files of the last revision loaded, by path and content id.
#[derive(Debug, Default)]
pub struct DocumentCache {
    files: HashMap<(String, Vec<u8>), Arc<Parsed>>,
}

impl DocumentCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Files held (those of the last revision loaded that parsed cleanly).
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Forgets every file.
    pub fn clear(&mut self) {
        self.files.clear();
    }

    /// Loads the revision whose files are `listed` (in the order a full
    /// load reads them), calling `read` only for files not held; the result
    /// is what [`load_fleet`] gives for the same files. Afterwards the cache
    /// holds this revision's files that parsed cleanly, and nothing else.
    pub fn load<E>(
        &mut self,
        listed: &[ListedFile],
        read: impl Fn(&ListedFile) -> Result<Vec<u8>, E>,
    ) -> Result<(Loaded, LoadStats), E> {
        let mut stats = LoadStats {
            files: listed.len(),
            ..LoadStats::default()
        };
        let key = |f: &ListedFile| (f.path.clone(), f.id.clone());

        let started = Instant::now();
        let mut fresh = Vec::new();
        for file in listed {
            if !self.files.contains_key(&key(file)) {
                fresh.push(SourceFile::new(file.name.clone(), read(file)?));
            }
        }
        stats.read = started.elapsed();
        stats.parsed = fresh.len();

        let started = Instant::now();
        let parsed = map_files(&fresh, |file| {
            // A budget of the file's own: the fleet's is checked below, on
            // the sum.
            let nodes = NodeBudget::new(MAX_FLEET_NODES);
            let mut docs = Documents::default();
            let mut diagnostics = Vec::new();
            parse_file(file, &mut docs, &mut diagnostics, false, &nodes);
            let parsed = Parsed {
                docs,
                nodes: nodes.used(),
            };
            (parsed, diagnostics.is_empty())
        });
        stats.parse = started.elapsed();

        let started = Instant::now();
        let mut clean = true;
        let mut kept = HashMap::with_capacity(listed.len());
        let mut parsed = parsed.into_iter();
        let mut in_order = Vec::with_capacity(listed.len());
        for file in listed {
            let entry = match self.files.get(&key(file)) {
                Some(entry) => Some(entry.clone()),
                None => match parsed.next() {
                    Some((entry, true)) => Some(Arc::new(entry)),
                    _ => None,
                },
            };
            match entry {
                Some(entry) => {
                    kept.insert(key(file), entry.clone());
                    in_order.push((file, entry));
                }
                None => clean = false,
            }
        }
        self.files = kept;
        let nodes: usize = in_order.iter().map(|(_, e)| e.nodes).sum();
        clean &= nodes <= MAX_FLEET_NODES;

        if clean {
            let mut docs = Documents::default();
            // Room for every document at once: growing by doubling would
            // move the large documents several times over.
            let total = |count: fn(&Documents) -> usize| -> usize {
                in_order.iter().map(|(_, e)| count(&e.docs)).sum()
            };
            docs.pools.reserve_exact(total(|d| d.pools.len()));
            docs.queues.reserve_exact(total(|d| d.queues.len()));
            docs.priority_classes
                .reserve_exact(total(|d| d.priority_classes.len()));
            docs.jobs.reserve_exact(total(|d| d.jobs.len()));
            docs.policies.reserve_exact(total(|d| d.policies.len()));
            for (file, entry) in &in_order {
                append_renamed(&mut docs, entry, &file.name);
            }
            stats.assemble = started.elapsed();
            let started = Instant::now();
            let mut diagnostics = Vec::new();
            check_documents(&docs, &mut diagnostics);
            stats.validate = started.elapsed();
            if diagnostics.is_empty() {
                let loaded = Loaded {
                    fleet: docs.into_fleet(),
                    diagnostics,
                };
                return Ok((loaded, stats));
            }
        }

        // Something is wrong: the full load says what, with positions.
        let started = Instant::now();
        drop(in_order);
        let mut fresh = fresh.into_iter().peekable();
        let mut files = Vec::with_capacity(listed.len());
        for file in listed {
            match fresh.next_if(|f| f.path == file.name) {
                Some(read_before) => files.push(read_before),
                None => files.push(SourceFile::new(file.name.clone(), read(file)?)),
            }
        }
        let loaded = load_fleet(&files);
        stats.full = true;
        stats.fallback = started.elapsed();
        Ok((loaded, stats))
    }
}

/// Appends `entry`'s documents to `docs`, their origins in the file `name`.
fn append_renamed(docs: &mut Documents, entry: &Parsed, name: &Arc<str>) {
    fn renamed<S: Clone>(out: &mut Vec<Document<S>>, from: &[Document<S>], name: &Arc<str>) {
        out.extend(from.iter().map(|d| Document {
            object: Object {
                metadata: d.object.metadata.clone(),
                spec: d.object.spec.clone(),
                origin: Origin::new(name.clone(), d.object.origin.pos),
            },
            node: None,
        }));
    }
    let from = &entry.docs;
    renamed(&mut docs.pools, &from.pools, name);
    renamed(&mut docs.queues, &from.queues, name);
    renamed(&mut docs.priority_classes, &from.priority_classes, name);
    renamed(&mut docs.jobs, &from.jobs, name);
    renamed(&mut docs.policies, &from.policies, name);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const QUEUE: &str = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec:\n  quota: [{model: H100, guaranteed: 8}]\n";
    const POOL: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  gpu: {model: H100, count: 8}\n  size: {min: 1, max: 1}\n";

    fn job(name: &str, gpus: &str) -> String {
        format!(
            "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec: {{queue: q, gpusPerReplica: {gpus}}}\n"
        )
    }

    /// A revision `rev` of `files` (path, text), ids from the text.
    fn revision(rev: &str, files: &[(&str, &str)]) -> (Vec<ListedFile>, Vec<SourceFile>) {
        files
            .iter()
            .map(|(path, text)| {
                let name: Arc<str> = format!("{rev}:{path}").into();
                (
                    ListedFile {
                        name: name.clone(),
                        path: path.to_string(),
                        id: text.as_bytes().to_vec(),
                    },
                    SourceFile::new(name, text.as_bytes()),
                )
            })
            .unzip()
    }

    /// Loads through `cache`; returns the result and the files read.
    fn load(cache: &mut DocumentCache, rev: &str, files: &[(&str, &str)]) -> (Loaded, usize) {
        let (listed, sources) = revision(rev, files);
        let reads = Cell::new(0);
        let (loaded, stats) = cache
            .load(&listed, |f| {
                reads.set(reads.get() + 1);
                Ok::<_, ()>(f.id.clone())
            })
            .unwrap();
        let full = load_fleet(&sources);
        assert_eq!(loaded.fleet, full.fleet, "{rev}: the fleet");
        assert_eq!(loaded.diagnostics, full.diagnostics, "{rev}: the messages");
        assert_eq!(stats.files, files.len());
        (loaded, reads.get())
    }

    #[test]
    fn unchanged_files_are_neither_read_nor_parsed_and_take_the_new_name() {
        let mut cache = DocumentCache::new();
        let a = job("a", "1");
        let files = [("pools.yaml", POOL), ("queues.yaml", QUEUE), ("a.yaml", &a)];
        let (loaded, reads) = load(&mut cache, "r1", &files);
        assert_eq!(reads, 3);
        assert!(loaded.is_valid());
        let b = job("a", "2");
        let files = [("pools.yaml", POOL), ("queues.yaml", QUEUE), ("a.yaml", &b)];
        let (loaded, reads) = load(&mut cache, "r2", &files);
        assert_eq!(reads, 1, "only the changed file");
        assert_eq!(&*loaded.fleet.queues[0].origin.file, "r2:queues.yaml");
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn errors_are_those_of_a_full_load_and_bad_files_are_not_kept() {
        let mut cache = DocumentCache::new();
        let a = job("a", "1");
        load(
            &mut cache,
            "r1",
            &[("pools.yaml", POOL), ("queues.yaml", QUEUE), ("a.yaml", &a)],
        );
        // A schema error in one file, an unknown queue in another.
        let bad = job("a", "many");
        let stray = a
            .replace("queue: q", "queue: qq")
            .replace("name: a", "name: b");
        let (loaded, reads) = load(
            &mut cache,
            "r2",
            &[
                ("pools.yaml", POOL),
                ("queues.yaml", QUEUE),
                ("a.yaml", &bad),
                ("b.yaml", &stray),
            ],
        );
        assert_eq!(loaded.diagnostics.len(), 2, "{:?}", loaded.diagnostics);
        assert_eq!(reads, 4, "the full load reads the files held too");
        assert_eq!(cache.len(), 3, "the file with the schema error is not kept");
        // Fixed: the unknown queue remains, found by the fleet checks.
        let (loaded, reads) = load(
            &mut cache,
            "r3",
            &[
                ("pools.yaml", POOL),
                ("queues.yaml", QUEUE),
                ("a.yaml", &a),
                ("b.yaml", &stray),
            ],
        );
        assert_eq!(reads, 4, "parsed: a.yaml; then the full load");
        assert_eq!(loaded.diagnostics.len(), 1);
        assert!(
            loaded.diagnostics[0]
                .to_string()
                .starts_with("r3:b.yaml:4:")
        );
        // A file removed.
        let (loaded, reads) = load(
            &mut cache,
            "r4",
            &[("pools.yaml", POOL), ("queues.yaml", QUEUE), ("a.yaml", &a)],
        );
        assert!(loaded.is_valid());
        assert_eq!(reads, 0);
        assert_eq!(cache.len(), 3, "only this revision's files");
    }

    #[test]
    fn a_moved_file_is_parsed_again() {
        let mut cache = DocumentCache::new();
        let a = job("a", "1");
        load(
            &mut cache,
            "r1",
            &[("pools.yaml", POOL), ("queues.yaml", QUEUE), ("a.yaml", &a)],
        );
        let (loaded, reads) = load(
            &mut cache,
            "r2",
            &[
                ("pools.yaml", POOL),
                ("queues.yaml", QUEUE),
                ("jobs/a.yaml", &a),
            ],
        );
        assert_eq!(reads, 1);
        assert_eq!(&*loaded.fleet.jobs[0].origin.file, "r2:jobs/a.yaml");
    }
}
