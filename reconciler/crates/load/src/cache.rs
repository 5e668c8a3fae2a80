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
//! Only the files of the last revision loaded are kept, and those of the
//! fleet the last clean load gave.
//!
//! The fleet the last clean load gave may be handed back to the next load
//! ([`DocumentCache::load_reusing`]): the documents of its files that did
//! not change are then moved out of it into the new fleet rather than
//! copied (the new fleet is the same, only cheaper to make), and those of
//! the files that changed are kept until the load after, to tell what the
//! revision removed ([`DocumentCache::retired_jobs`]) and to put the old
//! fleet together again if it is not adopted ([`DocumentCache::restore_previous`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use model::diag::Origin;
use model::spec::{Fleet, JobSpec, Object};

use crate::validate::check_fleet;
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
    /// Whether the fleet lent to the load was changed in place (the same
    /// files, only contents changed; [`DocumentCache::load_reusing`]).
    pub in_place: bool,
    /// Whether the whole-fleet checks ran on the changed documents alone (a
    /// change in place, each job keeping its name, of jobs only or of
    /// documents that the other jobs read the same of; found clean).
    pub checked_alone: bool,
}

/// The documents of one file, parsed without their YAML trees.
#[derive(Debug)]
struct Parsed {
    docs: Documents,
    /// YAML nodes in the file (the fleet has a budget of them).
    nodes: usize,
}

/// What identifies a file from one revision to the next: path, content id.
type Key = (String, Vec<u8>);

/// Parsed files by what identifies them.
type Held = HashMap<Key, Arc<Parsed>>;

/// A file of a fleet the cache gave, and where its documents are in it.
#[derive(Debug, Clone)]
struct Given {
    key: Key,
    /// The name its documents carry in that fleet (one shared string, so the
    /// fleet is recognised by pointer).
    name: Arc<str>,
    /// Its documents of each kind: pools, queues, priority classes, jobs,
    /// policies.
    counts: [usize; 5],
}

/// The parsed files of the last revision loaded, by path and content id.
#[derive(Debug, Default)]
pub struct DocumentCache {
    /// Every file of `given` and of the last revision loaded that parsed
    /// cleanly.
    files: Held,
    /// The files of the fleet the last clean load gave, in its order.
    given: Vec<Given>,
    /// When the last load moved documents out of the fleet given before: its
    /// files, and those of them the new fleet does not have.
    previous: Option<(Vec<Given>, Held)>,
    /// Whether the last load changed the fleet given in place (the same
    /// files in the same order: `previous` and `given` pair up).
    in_place: bool,
    /// When each job kept its name: the positions in the new fleet of the
    /// jobs of the files that changed.
    jobs_changed: Option<Vec<usize>>,
    /// Where the lists of the fleet given are (a fleet moved keeps them).
    lists: Option<Lists>,
}

/// Where a fleet's five lists of documents are and how long each is: a
/// fleet moved (or taken out of an `Arc`) keeps them, one cloned or made
/// again does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lists([(usize, usize); 5]);

impl Lists {
    fn of(fleet: &Fleet) -> Self {
        fn list<S>(objects: &[Object<S>]) -> (usize, usize) {
            (objects.as_ptr() as usize, objects.len())
        }
        Self([
            list(&fleet.pools),
            list(&fleet.queues),
            list(&fleet.priority_classes),
            list(&fleet.jobs),
            list(&fleet.policies),
        ])
    }
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

    /// Files of the fleet the last clean load gave (held with the last
    /// revision's).
    pub fn given_files(&self) -> usize {
        self.given.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Forgets every file.
    pub fn clear(&mut self) {
        self.files.clear();
        self.given.clear();
        self.lists = None;
        self.previous = None;
        self.in_place = false;
        self.jobs_changed = None;
    }

    /// When the last load changed the fleet handed to it in place
    /// ([`LoadStats::in_place`]): each file that changed, as its documents
    /// before and after, in the fleet's order. Every other document of the
    /// new fleet is the old one's.
    pub fn changed_in_place(&self) -> Option<Vec<(&Documents, &Documents)>> {
        let (before, retired) = self.previous.as_ref().filter(|_| self.in_place)?;
        before
            .iter()
            .zip(&self.given)
            .filter(|(old, new)| old.key != new.key)
            .map(|(old, new)| {
                let old = retired.get(&old.key)?;
                let new = self.files.get(&new.key)?;
                Some((&old.docs, &new.docs))
            })
            .collect()
    }

    /// When the last load changed the fleet handed to it in place and every
    /// job kept its name and place: the positions in the new fleet of the
    /// jobs of the files that changed (every other job is the old fleet's at
    /// the same position; documents of other kinds may have changed).
    pub fn jobs_changed_in_place(&self) -> Option<&[usize]> {
        self.jobs_changed.as_deref().filter(|_| self.in_place)
    }

    /// The jobs of the fleet handed back to the last load that the new
    /// fleet does not have from the same file (the files that changed or
    /// went): where a job the revision removes was. Empty when the last load
    /// did not take a fleet.
    pub fn retired_jobs(&self) -> impl Iterator<Item = &Object<JobSpec>> {
        self.previous
            .iter()
            .flat_map(|(_, retired)| retired.values())
            .flat_map(|parsed| parsed.docs.jobs.iter().map(|d| &d.object))
    }

    /// The fleet handed back to the last load, put together again (its
    /// documents copied from those kept), when that load took it; the cache
    /// then holds it as the fleet given, as if the last load had not taken
    /// place. `None` when the last load took no fleet.
    pub fn restore_previous(&mut self) -> Option<Fleet> {
        self.in_place = false;
        self.jobs_changed = None;
        let (given, retired) = self.previous.take()?;
        self.files.extend(retired);
        let fleet = assemble(&given, &self.files)?;
        self.given = given;
        self.lists = Some(Lists::of(&fleet));
        Some(fleet)
    }

    /// Whether `fleet` is the one the last clean load gave: its lists are
    /// where that fleet's were, as long, and the first and last documents
    /// of each file carry that load's name for the file (which debug builds
    /// check of every document). Walking 150,000 documents took about a
    /// millisecond and a half of a re-plan.
    fn is_given(&self, fleet: &Fleet) -> bool {
        let given = !self.given.is_empty()
            && self.lists == Some(Lists::of(fleet))
            && self.ends_named(fleet);
        debug_assert!(
            !given || self.is_given_walked(fleet),
            "a fleet taken for the one given"
        );
        given
    }

    /// Whether the first and last documents of each file in `fleet` (where
    /// the fleet given has them) carry the file's name in the fleet given.
    fn ends_named(&self, fleet: &Fleet) -> bool {
        fn ends<S>(objects: &[Object<S>], given: &[Given], kind: usize) -> bool {
            let mut at = 0;
            for file in given {
                let count = file.counts[kind];
                let Some(part) = objects.get(at..at + count) else {
                    return false;
                };
                let named = |o: &Object<S>| Arc::ptr_eq(&o.origin.file, &file.name);
                if !part.first().is_none_or(named) || !part.last().is_none_or(named) {
                    return false;
                }
                at += count;
            }
            at == objects.len()
        }
        ends(&fleet.pools, &self.given, 0)
            && ends(&fleet.queues, &self.given, 1)
            && ends(&fleet.priority_classes, &self.given, 2)
            && ends(&fleet.jobs, &self.given, 3)
            && ends(&fleet.policies, &self.given, 4)
    }

    /// Whether every document of `fleet` carries the name of its file in
    /// the fleet given, file by file in its order.
    fn is_given_walked(&self, fleet: &Fleet) -> bool {
        fn walk<S>(objects: &[Object<S>], given: &[Given], kind: usize) -> bool {
            let mut at = 0;
            for file in given {
                let count = file.counts[kind];
                let Some(part) = objects.get(at..at + count) else {
                    return false;
                };
                if !part.iter().all(|o| Arc::ptr_eq(&o.origin.file, &file.name)) {
                    return false;
                }
                at += count;
            }
            at == objects.len()
        }
        !self.given.is_empty()
            && walk(&fleet.pools, &self.given, 0)
            && walk(&fleet.queues, &self.given, 1)
            && walk(&fleet.priority_classes, &self.given, 2)
            && walk(&fleet.jobs, &self.given, 3)
            && walk(&fleet.policies, &self.given, 4)
    }

    /// Loads the revision whose files are `listed` (in the order a full
    /// load reads them), calling `read` only for files not held; the result
    /// is what [`load_fleet`] gives for the same files. Afterwards the cache
    /// holds this revision's files that parsed cleanly, and those of the
    /// fleet the last clean load gave.
    pub fn load<E>(
        &mut self,
        listed: &[ListedFile],
        read: impl Fn(&ListedFile) -> Result<Vec<u8>, E>,
    ) -> Result<(Loaded, LoadStats), E> {
        self.load_reusing(listed, read, &mut None)
    }

    /// [`DocumentCache::load`], moving the documents of the files that did
    /// not change out of `previous` when it holds the fleet the last clean
    /// load gave, itself (moved, or taken out of an `Arc`; a clone is only
    /// copied from) (the result is the same). `previous` is taken only when the
    /// revision loads cleanly (its fleet is valid); otherwise, and when
    /// reading fails, it holds the fleet it held.
    pub fn load_reusing<E>(
        &mut self,
        listed: &[ListedFile],
        read: impl Fn(&ListedFile) -> Result<Vec<u8>, E>,
        previous: &mut Option<Fleet>,
    ) -> Result<(Loaded, LoadStats), E> {
        self.previous = None;
        self.in_place = false;
        self.jobs_changed = None;
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
            parse_file(
                file,
                &mut docs,
                &mut diagnostics,
                false,
                &nodes,
                fresh.len() == 1,
            );
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
        let nodes: usize = in_order.iter().map(|(_, e)| e.nodes).sum();
        clean &= nodes <= MAX_FLEET_NODES;

        if clean {
            let reused = previous.take_if(|fleet| self.is_given(fleet));
            let took = reused.is_some();
            // Changed in place with each job keeping its name: the positions
            // of the jobs of the files that changed, and whether nothing
            // but jobs changed.
            let mut jobs_changed = None;
            // What its jobs read of the other documents, when those changed.
            let mut facing_before = None;
            let (fleet, retired) = match reused {
                Some(fleet) if self.same_paths(&in_order) => {
                    stats.in_place = true;
                    jobs_changed = self.jobs_changed(&in_order);
                    if jobs_changed
                        .as_ref()
                        .is_some_and(|(_, only_jobs)| !only_jobs)
                    {
                        facing_before = Some(crate::validate::JobFacing::of(&fleet));
                    }
                    self.spliced(fleet, &in_order)
                }
                Some(fleet) => {
                    let (docs, retired) = self.moved_into(fleet, &in_order);
                    (docs.into_fleet(), retired)
                }
                None => (copied(&in_order).into_fleet(), HashMap::new()),
            };
            stats.assemble = started.elapsed();
            let started = Instant::now();
            let mut diagnostics = Vec::new();
            // The documents have no trees: checked as the fleet's objects.
            // The fleet given had nothing to report: a change of jobs
            // alone is checked alone when that finds nothing; so is a
            // change of other documents (with jobs or not) that leaves
            // what the jobs read of them as it was, with those documents.
            let clean_alone = match &jobs_changed {
                Some((positions, true)) => crate::validate::changed_jobs_clean(&fleet, positions),
                Some((positions, false)) => facing_before.as_ref().is_some_and(|before| {
                    crate::validate::changed_others_clean(&fleet, before, positions)
                }),
                None => false,
            };
            stats.checked_alone = clean_alone;
            if !clean_alone {
                check_fleet(&fleet, &mut diagnostics);
            }
            stats.validate = started.elapsed();
            if diagnostics.is_empty() {
                let given = in_order
                    .iter()
                    .map(|(file, entry)| Given {
                        key: key(file),
                        name: file.name.clone(),
                        counts: counts(&entry.docs),
                    })
                    .collect();
                let before = std::mem::replace(&mut self.given, given);
                if took {
                    self.previous = Some((before, retired));
                    self.in_place = stats.in_place;
                    self.jobs_changed = jobs_changed.map(|(positions, _)| positions);
                }
                self.files = kept;
                self.lists = Some(Lists::of(&fleet));
                let loaded = Loaded { fleet, diagnostics };
                return Ok((loaded, stats));
            }
            if took {
                // Not adopted: the fleet taken is put together again from
                // the files it was made of (still held).
                *previous = assemble(&self.given, &self.files);
                self.lists = previous.as_ref().map(Lists::of);
            }
        }

        // Something is wrong: the full load says what, with positions. The
        // files of the fleet given stay held, with this revision's.
        let started = Instant::now();
        drop(in_order);
        for file in &self.given {
            if let Some(entry) = self.files.get(&file.key) {
                kept.insert(file.key.clone(), entry.clone());
            }
        }
        self.files = kept;
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

    /// Whether the files `in_order` are those of the fleet given, path by
    /// path in the same order (their contents may differ): the fleet given
    /// can then be changed in place ([`DocumentCache::spliced`]).
    fn same_paths(&self, in_order: &[(&ListedFile, Arc<Parsed>)]) -> bool {
        in_order.len() == self.given.len()
            && in_order
                .iter()
                .zip(&self.given)
                .all(|((file, _), given)| file.path == given.key.0)
    }

    /// When every file of `in_order` that changed from the fleet given (the
    /// same paths: [`DocumentCache::same_paths`]) has job documents of the
    /// same names in the same order: the positions of those jobs in the new
    /// fleet, and whether those files changed nothing else (their other
    /// documents equal, where they were read from aside). `None` otherwise.
    fn jobs_changed(&self, in_order: &[(&ListedFile, Arc<Parsed>)]) -> Option<(Vec<usize>, bool)> {
        fn same<S: PartialEq>(a: &[Document<S>], b: &[Document<S>]) -> bool {
            a.len() == b.len()
                && a.iter().zip(b).all(|(a, b)| {
                    a.object.metadata == b.object.metadata && a.object.spec == b.object.spec
                })
        }
        let mut positions = Vec::new();
        let mut only_jobs = true;
        let mut at = 0;
        for ((file, entry), given) in in_order.iter().zip(&self.given) {
            let new = &entry.docs;
            if file.id != given.key.1 {
                let old = &self.files.get(&given.key)?.docs;
                let names_kept = old.jobs.len() == new.jobs.len()
                    && old
                        .jobs
                        .iter()
                        .zip(&new.jobs)
                        .all(|(a, b)| a.object.name() == b.object.name());
                if !names_kept {
                    return None;
                }
                only_jobs = only_jobs
                    && same(&old.pools, &new.pools)
                    && same(&old.queues, &new.queues)
                    && same(&old.priority_classes, &new.priority_classes)
                    && same(&old.policies, &new.policies);
                positions.extend(at..at + new.jobs.len());
            }
            at += new.jobs.len();
        }
        Some((positions, only_jobs))
    }

    /// [`DocumentCache::moved_into`] when [`DocumentCache::same_paths`]
    /// holds, without moving the documents: the fleet given (`fleet`, which
    /// [`DocumentCache::is_given`]) keeps its lists; the documents of the
    /// files that did not change are renamed where they are, those of the
    /// files that changed replaced by copies of the new ones. On a large
    /// fleet with one file changed this touches each document's file name
    /// only, where moving them all into new lists took tens of milliseconds.
    fn spliced(&self, fleet: Fleet, in_order: &[(&ListedFile, Arc<Parsed>)]) -> (Fleet, Held) {
        let changed: Vec<bool> = in_order
            .iter()
            .zip(&self.given)
            .map(|((file, _), given)| file.id != given.key.1)
            .collect();
        let files = Splice {
            given: &self.given,
            in_order,
            changed: &changed,
        };
        let fleet = Fleet {
            pools: files.kind(fleet.pools, 0, |d| &d.pools),
            queues: files.kind(fleet.queues, 1, |d| &d.queues),
            priority_classes: files.kind(fleet.priority_classes, 2, |d| &d.priority_classes),
            jobs: files.kind(fleet.jobs, 3, |d| &d.jobs),
            policies: files.kind(fleet.policies, 4, |d| &d.policies),
        };
        let retired = self
            .given
            .iter()
            .zip(&changed)
            .filter(|(_, changed)| **changed)
            .filter_map(|(g, _)| Some((g.key.clone(), self.files.get(&g.key)?.clone())))
            .collect();
        (fleet, retired)
    }

    /// The documents of the files `in_order`, those of files of the fleet
    /// given (`fleet`, which [`DocumentCache::is_given`]) moved out of it,
    /// the others copied; and the files of the fleet given that were not
    /// moved (they changed or went).
    fn moved_into(
        &self,
        fleet: Fleet,
        in_order: &[(&ListedFile, Arc<Parsed>)],
    ) -> (Documents, Held) {
        let mut docs = with_room(in_order);
        let mut from = Parts {
            pools: fleet.pools.into_iter(),
            queues: fleet.queues.into_iter(),
            priority_classes: fleet.priority_classes.into_iter(),
            jobs: fleet.jobs.into_iter(),
            policies: fleet.policies.into_iter(),
        };
        let at: HashMap<&Key, usize> = self
            .given
            .iter()
            .enumerate()
            .map(|(i, g)| (&g.key, i))
            .collect();
        let mut moved = vec![false; self.given.len()];
        // The fleet is read once, in order: a file found before the last
        // one moved (files listed in another order) is copied.
        let mut next = 0;
        for (file, entry) in in_order {
            let found = at.get(&(file.path.clone(), file.id.clone())).copied();
            match found {
                Some(i) if i >= next => {
                    for skipped in &self.given[next..i] {
                        from.skip(skipped.counts);
                    }
                    from.take(self.given[i].counts, &mut docs, &file.name);
                    moved[i] = true;
                    next = i + 1;
                }
                _ => append_renamed(&mut docs, entry, &file.name),
            }
        }
        let retired = self
            .given
            .iter()
            .zip(moved)
            .filter(|(_, moved)| !moved)
            .filter_map(|(g, _)| Some((g.key.clone(), self.files.get(&g.key)?.clone())))
            .collect();
        (docs, retired)
    }
}

/// The files of the fleet given and those of the new revision, path by path
/// ([`DocumentCache::spliced`]).
struct Splice<'a, 'f> {
    given: &'a [Given],
    in_order: &'a [(&'f ListedFile, Arc<Parsed>)],
    /// Whether each file's contents changed.
    changed: &'a [bool],
}

impl Splice<'_, '_> {
    /// The objects of one kind (`kind`, the index of [`Given::counts`]) of
    /// the fleet given, made those of the new revision in place.
    fn kind<S: Clone>(
        &self,
        mut objects: Vec<Object<S>>,
        kind: usize,
        of: impl Fn(&Documents) -> &Vec<Document<S>>,
    ) -> Vec<Object<S>> {
        let mut at = 0;
        for (((file, entry), given), changed) in
            self.in_order.iter().zip(self.given).zip(self.changed)
        {
            let old = given.counts[kind].min(objects.len().saturating_sub(at));
            if *changed {
                let new = of(&entry.docs);
                objects.splice(
                    at..at + old,
                    new.iter().map(|d| Object {
                        metadata: d.object.metadata.clone(),
                        spec: d.object.spec.clone(),
                        origin: Origin::new(file.name.clone(), d.object.origin.pos),
                    }),
                );
                at += new.len();
            } else {
                for object in &mut objects[at..at + old] {
                    object.origin.file = file.name.clone();
                }
                at += old;
            }
        }
        objects
    }
}

/// The documents of each kind of a fleet being taken apart, in order.
struct Parts {
    pools: std::vec::IntoIter<Object<model::spec::NodePoolSpec>>,
    queues: std::vec::IntoIter<Object<model::spec::QueueSpec>>,
    priority_classes: std::vec::IntoIter<Object<model::spec::PriorityClassSpec>>,
    jobs: std::vec::IntoIter<Object<JobSpec>>,
    policies: std::vec::IntoIter<Object<model::spec::PolicySpec>>,
}

impl Parts {
    /// Drops the next documents, `counts` of each kind.
    fn skip(&mut self, counts: [usize; 5]) {
        self.pools.by_ref().take(counts[0]).for_each(drop);
        self.queues.by_ref().take(counts[1]).for_each(drop);
        self.priority_classes
            .by_ref()
            .take(counts[2])
            .for_each(drop);
        self.jobs.by_ref().take(counts[3]).for_each(drop);
        self.policies.by_ref().take(counts[4]).for_each(drop);
    }

    /// Moves the next documents, `counts` of each kind, to `docs`, their
    /// origins in the file `name`.
    fn take(&mut self, counts: [usize; 5], docs: &mut Documents, name: &Arc<str>) {
        fn moved<S>(
            out: &mut Vec<Document<S>>,
            from: &mut std::vec::IntoIter<Object<S>>,
            n: usize,
            name: &Arc<str>,
        ) {
            out.extend(from.by_ref().take(n).map(|mut object| {
                object.origin.file = name.clone();
                Document { object, node: None }
            }));
        }
        moved(&mut docs.pools, &mut self.pools, counts[0], name);
        moved(&mut docs.queues, &mut self.queues, counts[1], name);
        moved(
            &mut docs.priority_classes,
            &mut self.priority_classes,
            counts[2],
            name,
        );
        moved(&mut docs.jobs, &mut self.jobs, counts[3], name);
        moved(&mut docs.policies, &mut self.policies, counts[4], name);
    }
}

/// How many documents of each kind `docs` holds (the order of [`Given::counts`]).
fn counts(docs: &Documents) -> [usize; 5] {
    [
        docs.pools.len(),
        docs.queues.len(),
        docs.priority_classes.len(),
        docs.jobs.len(),
        docs.policies.len(),
    ]
}

/// Empty documents with room for those of the files `in_order` (growing by
/// doubling would move the large documents several times over).
fn with_room(in_order: &[(&ListedFile, Arc<Parsed>)]) -> Documents {
    let mut docs = Documents::default();
    let total =
        |kind: usize| -> usize { in_order.iter().map(|(_, e)| counts(&e.docs)[kind]).sum() };
    docs.pools.reserve_exact(total(0));
    docs.queues.reserve_exact(total(1));
    docs.priority_classes.reserve_exact(total(2));
    docs.jobs.reserve_exact(total(3));
    docs.policies.reserve_exact(total(4));
    docs
}

/// The documents of the files `in_order`, copied, their origins renamed.
fn copied(in_order: &[(&ListedFile, Arc<Parsed>)]) -> Documents {
    let mut docs = with_room(in_order);
    for (file, entry) in in_order {
        append_renamed(&mut docs, entry, &file.name);
    }
    docs
}

/// The fleet of the files `given`, copied from `files` (`None` when one is
/// not held).
fn assemble(given: &[Given], files: &Held) -> Option<Fleet> {
    let mut docs = Documents::default();
    for file in given {
        append_renamed(&mut docs, files.get(&file.key)?, &file.name);
    }
    Some(docs.into_fleet())
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
        assert_eq!(
            cache.len(),
            4,
            "the file with the schema error is not kept; those of the fleet given are"
        );
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
        assert_eq!(reads, 4, "a.yaml held (the fleet given's); the full load");
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

    /// Loads through `cache` handing it `previous`; checks the result as
    /// [`load`] does and returns it with the files read.
    fn load_reusing(
        cache: &mut DocumentCache,
        rev: &str,
        files: &[(&str, &str)],
        previous: &mut Option<Fleet>,
    ) -> (Loaded, usize) {
        let (listed, sources) = revision(rev, files);
        let reads = Cell::new(0);
        let (loaded, _) = cache
            .load_reusing(
                &listed,
                |f| {
                    reads.set(reads.get() + 1);
                    Ok::<_, ()>(f.id.clone())
                },
                previous,
            )
            .unwrap();
        let full = load_fleet(&sources);
        assert_eq!(loaded.fleet, full.fleet, "{rev}: the fleet");
        assert_eq!(loaded.diagnostics, full.diagnostics, "{rev}: the messages");
        (loaded, reads.get())
    }

    #[test]
    fn the_fleet_given_lends_its_unchanged_documents() {
        let mut cache = DocumentCache::new();
        let (a, b, c) = (job("a", "1"), job("b", "1"), job("c", "1"));
        let r1 = [
            ("a.yaml", a.as_str()),
            ("b.yaml", &b),
            ("pools.yaml", POOL),
            ("queues.yaml", QUEUE),
        ];
        let (first, _) = load(&mut cache, "r1", &r1);
        let first = first.fleet;
        // b.yaml changed, c.yaml added, a.yaml removed.
        let b2 = job("b", "2");
        let r2 = [
            ("b.yaml", b2.as_str()),
            ("c.yaml", &c),
            ("pools.yaml", POOL),
            ("queues.yaml", QUEUE),
        ];
        // Lent itself (a clone is not the fleet given: copied, not taken).
        let mut cloned = Some(first.clone());
        let (_, reads) = load_reusing(&mut cache, "r2", &r2, &mut cloned);
        assert_eq!(reads, 2);
        assert!(cloned.is_some(), "a clone is not taken");
        let (first, _) = load(&mut cache, "r1", &r1);
        let first = first.fleet;
        let expected = first.clone();
        let mut previous = Some(first);
        let (second, reads) = load_reusing(&mut cache, "r2", &r2, &mut previous);
        assert_eq!(reads, 2);
        assert!(previous.is_none(), "taken");
        let retired: Vec<&str> = cache.retired_jobs().map(|j| j.name()).collect();
        assert_eq!(retired.len(), 2, "a and the old b: {retired:?}");
        assert!(retired.contains(&"a") && retired.contains(&"b"));
        // Not adopted after all: the first fleet again, and the cache as
        // after r1 (the second fleet is not the one given).
        let restored = cache.restore_previous().unwrap();
        assert_eq!(restored, expected);
        let first = expected;
        assert!(cache.restore_previous().is_none(), "once");
        assert!(!cache.is_given(&second.fleet));
        assert!(cache.is_given(&restored));
        // A fleet the cache did not give (equal, loaded elsewhere) is not
        // taken.
        let elsewhere = load_fleet(&revision("r1", &r1).1).fleet;
        assert_eq!(elsewhere, first);
        let mut other = Some(elsewhere.clone());
        let (_, reads) = load_reusing(&mut cache, "r3", &r2, &mut other);
        assert_eq!(reads, 0, "held since r2");
        assert_eq!(other, Some(elsewhere), "left alone");
    }

    #[test]
    fn the_fleet_given_is_changed_in_place_when_only_contents_change() {
        let mut cache = DocumentCache::new();
        let jobs = |names: &[(&str, &str)]| -> String {
            let texts: Vec<String> = names.iter().map(|(n, g)| job(n, g)).collect();
            texts.join("---\n")
        };
        // The contents of a.yaml, b.yaml and d.yaml, revision by revision
        // (same paths, same order): fewer documents, more, other values,
        // back again, and one revision with nothing changed.
        let revisions = [
            [
                jobs(&[("a", "1")]),
                jobs(&[("b", "1"), ("c", "1")]),
                jobs(&[("d", "1")]),
            ],
            [
                jobs(&[("a", "2")]),
                jobs(&[("b", "1")]),
                jobs(&[("d", "1")]),
            ],
            [
                jobs(&[("a", "2")]),
                jobs(&[("b", "2"), ("c", "1"), ("e", "1")]),
                jobs(&[("d", "3")]),
            ],
            [
                jobs(&[("a", "2")]),
                jobs(&[("b", "2"), ("c", "1"), ("e", "1")]),
                jobs(&[("d", "3")]),
            ],
            [
                jobs(&[("a", "1")]),
                jobs(&[("b", "1"), ("c", "1")]),
                jobs(&[("d", "1")]),
            ],
        ];
        let mut fleet: Option<Fleet> = None;
        for (i, texts) in revisions.iter().enumerate() {
            let files = [
                ("a.yaml", texts[0].as_str()),
                ("b.yaml", texts[1].as_str()),
                ("d.yaml", texts[2].as_str()),
                ("pools.yaml", POOL),
                ("queues.yaml", QUEUE),
            ];
            let rev = format!("r{i}");
            // Every fleet the load gives equals a full load's (checked by
            // `load_reusing`) and is lent to the next load.
            let mut previous = fleet.take();
            let lent = previous.is_some();
            assert_eq!(lent, i > 0);
            let (loaded, _) = load_reusing(&mut cache, &rev, &files, &mut previous);
            assert!(previous.is_none(), "{rev}: taken");
            assert!(cache.is_given(&loaded.fleet), "{rev}: the fleet given");
            // The files that changed, with their documents before and after.
            let changed = cache.changed_in_place();
            if i == 0 {
                assert!(changed.is_none(), "nothing lent to the first load");
            } else {
                let summary = |docs: &Documents| -> Vec<(String, u32)> {
                    docs.jobs
                        .iter()
                        .map(|d| (d.object.name().to_string(), d.object.spec.gpus_per_replica))
                        .collect()
                };
                let got: Vec<_> = changed
                    .expect("in place")
                    .into_iter()
                    .map(|(before, after)| (summary(before), summary(after)))
                    .collect();
                let jobs_of = |text: &str| {
                    let (listed, sources) = revision("x", &[("x.yaml", text)]);
                    drop(listed);
                    load_fleet(&sources)
                        .fleet
                        .jobs
                        .iter()
                        .map(|j| (j.name().to_string(), j.spec.gpus_per_replica))
                        .collect::<Vec<_>>()
                };
                let expected: Vec<_> = revisions[i - 1]
                    .iter()
                    .zip(texts)
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| (jobs_of(a), jobs_of(b)))
                    .collect();
                assert_eq!(got, expected, "{rev}");
            }
            fleet = Some(loaded.fleet);
        }
        assert!(cache.restore_previous().is_some());
        assert!(cache.changed_in_place().is_none(), "restored: no change");
    }

    #[test]
    fn jobs_changed_in_place_are_checked_alone_with_the_same_verdict() {
        let mut cache = DocumentCache::new();
        let two = |a: &str, b: &str| format!("{a}---\n{b}");
        let (a, b, c) = (job("a", "1"), job("b", "1"), job("c", "1"));
        let queue_r = QUEUE.replace("name: q", "name: r");
        // (a.yaml, whether checked alone): each revision lent the last
        // valid fleet; `load_reusing` compares fleet and messages with a
        // full load.
        let revisions = [
            (two(&a, &b), false),
            (two(&job("a", "2"), &b), true),
            // Invalid: an unknown queue, a replica larger than any node.
            (
                two(&job("a", "2").replace("queue: q", "queue: nope"), &b),
                false,
            ),
            (two(&job("a", "2"), &job("b", "16")), false),
            (two(&job("a", "4"), &b), true),
            // Not alone: a job renamed (to a name taken: a duplicate), a
            // document of another kind changed beside a job.
            (two(&job("a", "4"), &job("c", "1")), false),
            (two(&job("a", "4"), &job("bb", "1")), false),
            (
                format!("{}---\n{queue_r}", two(&job("a", "8"), &job("bb", "1"))),
                false,
            ),
        ];
        let mut fleet: Option<Fleet> = None;
        for (i, (text, alone)) in revisions.iter().enumerate() {
            let files = [
                ("a.yaml", text.as_str()),
                ("c.yaml", c.as_str()),
                ("pools.yaml", POOL),
                ("queues.yaml", QUEUE),
            ];
            let rev = format!("r{i}");
            let (listed, sources) = revision(&rev, &files);
            let (loaded, stats) = cache
                .load_reusing(&listed, |f| Ok::<_, ()>(f.id.clone()), &mut fleet)
                .unwrap();
            let full = load_fleet(&sources);
            assert_eq!(loaded.fleet, full.fleet, "{rev}: the fleet");
            assert_eq!(loaded.diagnostics, full.diagnostics, "{rev}: the messages");
            let valid = loaded.is_valid();
            assert_eq!(
                valid,
                i != 2 && i != 3 && i != 5,
                "{rev}: {:?}",
                loaded.diagnostics
            );
            assert_eq!(
                stats.checked_alone, *alone,
                "{rev}: checked alone ({:?})",
                loaded.diagnostics
            );
            if valid {
                // The jobs of a.yaml, at the fleet's first two places (also
                // when a queue changed beside them).
                let changed: Option<&[usize]> = (*alone || i == 7).then_some(&[0, 1]);
                assert_eq!(
                    cache.jobs_changed_in_place(),
                    changed,
                    "{rev}: jobs changed"
                );
                fleet = Some(loaded.fleet);
            } else {
                assert!(fleet.is_some(), "{rev}: the fleet lent comes back");
            }
        }
    }

    /// Documents of other kinds changed in place (with jobs or not) are
    /// checked alone when the jobs read the same of them (their queues'
    /// names and leaves, the classes, the pools' models and sizes), with the
    /// verdict and messages of a full load; otherwise, or when the checks
    /// alone find something, the whole fleet is checked.
    #[test]
    fn other_documents_changed_in_place_are_checked_alone_when_jobs_read_the_same() {
        let mut cache = DocumentCache::new();
        let jobs = |a: &str| format!("{}---\n{}", job("a", a), job("b", "8"));
        let weighted = QUEUE.replace("spec:\n", "spec:\n  weight: 2\n");
        let child = format!(
            "{weighted}---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: q2}}\nspec: {{parent: q}}\n"
        );
        let small = POOL.replace("count: 8", "count: 4");
        let larger = POOL.replace("max: 1", "max: 2");
        let renamed = weighted.replace("name: q", "name: r");
        let unknown_model = weighted.replace("model: H100", "model: Z");
        // (jobs, pools, queues, valid, checked alone)
        let revisions = [
            (jobs("1"), POOL.to_string(), QUEUE.to_string(), true, false),
            // A queue's weight: the jobs read the same.
            (jobs("1"), POOL.to_string(), weighted.clone(), true, true),
            // The queue gets a child: its jobs are not in a leaf.
            (jobs("1"), POOL.to_string(), child, false, false),
            // Smaller nodes: job b's replica no longer fits.
            (jobs("1"), small, weighted.clone(), false, false),
            // More nodes of the same size, beside a job changed.
            (jobs("2"), larger.clone(), weighted.clone(), true, true),
            // The queue renamed: the jobs' queue is unknown.
            (jobs("2"), larger.clone(), renamed, false, false),
            // The queue's own error, the jobs reading the same.
            (jobs("2"), larger, unknown_model, false, false),
        ];
        let mut fleet: Option<Fleet> = None;
        for (i, (a, pools, queues, valid, alone)) in revisions.iter().enumerate() {
            let files = [
                ("a.yaml", a.as_str()),
                ("pools.yaml", pools.as_str()),
                ("queues.yaml", queues.as_str()),
            ];
            let rev = format!("r{i}");
            let (listed, sources) = revision(&rev, &files);
            let (loaded, stats) = cache
                .load_reusing(&listed, |f| Ok::<_, ()>(f.id.clone()), &mut fleet)
                .unwrap();
            let full = load_fleet(&sources);
            assert_eq!(loaded.fleet, full.fleet, "{rev}: the fleet");
            assert_eq!(loaded.diagnostics, full.diagnostics, "{rev}: the messages");
            assert_eq!(loaded.is_valid(), *valid, "{rev}: {:?}", loaded.diagnostics);
            assert_eq!(stats.checked_alone, *alone, "{rev}: checked alone");
            if *valid {
                fleet = Some(loaded.fleet);
            } else {
                assert!(fleet.is_some(), "{rev}: the fleet lent comes back");
            }
        }
    }

    #[test]
    fn a_fleet_lent_to_an_invalid_revision_comes_back() {
        let mut cache = DocumentCache::new();
        let a = job("a", "1");
        let r1 = [
            ("a.yaml", a.as_str()),
            ("pools.yaml", POOL),
            ("queues.yaml", QUEUE),
        ];
        let (first, _) = load(&mut cache, "r1", &r1);
        // Valid documents, a failed fleet check: the fleet was taken apart.
        let stray = job("b", "1").replace("queue: q", "queue: qq");
        let r2 = [
            ("a.yaml", a.as_str()),
            ("b.yaml", &stray),
            ("pools.yaml", POOL),
            ("queues.yaml", QUEUE),
        ];
        let expected = first.fleet.clone();
        let mut previous = Some(first.fleet);
        let (loaded, _) = load_reusing(&mut cache, "r2", &r2, &mut previous);
        assert!(!loaded.is_valid());
        assert_eq!(previous.as_ref(), Some(&expected), "put together again");
        assert!(cache.restore_previous().is_none());
        // Still the fleet given: the next revision takes it.
        let (_, reads) = load_reusing(&mut cache, "r3", &r1, &mut previous);
        assert_eq!(reads, 0);
        assert!(previous.is_none());
        // A schema error: nothing taken.
        let bad = job("a", "many");
        let mut previous = Some(load(&mut cache, "r4", &r1).0.fleet);
        let r5 = [
            ("a.yaml", bad.as_str()),
            ("pools.yaml", POOL),
            ("queues.yaml", QUEUE),
        ];
        let before = previous.clone();
        load_reusing(&mut cache, "r5", &r5, &mut previous);
        assert_eq!(previous, before);
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
