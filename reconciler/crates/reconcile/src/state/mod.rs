//! The reconciler's embedded state: one redb database in the state directory
//! (default `.gitfleet/state.redb`).
//!
//! redb is a pure-Rust, ACID, copy-on-write B-tree store: every [`Batch`] is
//! one transaction that is either wholly on disk or not at all, which is what
//! crash safety needs (a plan's actions are recorded as intended in one
//! transaction before the first is carried out, and as done — with their
//! effect on the job records, their audit lines and the executor's values
//! they changed — in later ones, many actions a transaction; see
//! [`Store::record_intents`] and [`Store::hold_executor_writes`]); what
//! may be lost by a crash until the next durable commit is committed
//! deferred, without waiting for the disk ([`Store::commit_deferred`]); a
//! new database is not synced at all until its first synced commit
//! ([`fresh`]). It builds with no C toolchain and no server, and its file
//! is locked by one process at a time, so two reconcilers cannot share a
//! state directory.
//!
//! Tables hold JSON values (serde), so a record can gain fields without a
//! migration; old values read with defaults. Job records without a stop, a
//! nomination or an end (pending and running ones) are written in a compact
//! form instead ([`compact`]); JSON ones still read. Job records are stored
//! many a value ([`job_groups`]); one a value, as older states hold them,
//! still read.

mod compact;
mod fresh;
mod groups;
mod job_groups;
mod records;
mod written;

pub use records::{
    AuditEntry, Intent, IntentRef, JobRecord, LastStop, Loading, Phase, Revisions, StopKind,
    Stopping,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, TableHandle,
    WriteTransaction,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use model::observed::Timestamp;

/// Singletons: revisions, the clock.
const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
/// Job name → [`JobRecord`], as older gitfleets wrote them; records are
/// now written to [`job_groups::JOB_GROUPS`], many a value.
const JOBS: TableDefinition<&str, &str> = TableDefinition::new("jobs");
/// Executor-owned values (the sim executor's virtual nodes), by key.
const EXECUTOR: TableDefinition<&str, &str> = TableDefinition::new("executor");
/// Intents, by group ([`groups`]): a plan's actions are one value, removed
/// when every one of them is done.
const INTENTS: TableDefinition<u64, &str> = TableDefinition::new("intents");
/// Intent group → its length and which of its intents are done
/// ([`groups::Progress`]); only for groups of more than one.
const INTENTS_DONE: TableDefinition<u64, &str> = TableDefinition::new("intents_done");
/// Audit lines, by group ([`groups`]), append-only.
const AUDIT: TableDefinition<u64, &str> = TableDefinition::new("audit");
/// The most audit lines one value of [`AUDIT`] holds: a tail of the log
/// (the dashboard's) reads at most this many more than it shows.
const AUDIT_GROUP: usize = 64;

const REVISIONS_KEY: &str = "revisions";
const CLOCK_KEY: &str = "clock";

/// How long [`Store::open`] waits for a lock held by another process.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// The database file's name inside the state directory.
pub const DB_FILE: &str = "state.redb";

/// A file written beside the database once it exists; its presence without
/// the database means the database was lost.
pub const MARKER_FILE: &str = "gitfleet-state";
const MARKER_TEXT: &str = "This directory holds gitfleet's state (state.redb). Do not delete \
state.redb alone: jobs it recorded as finished would run again.\n";
/// Entries of a state directory that only a used state has.
const STATE_ENTRIES: [&str; 3] = [MARKER_FILE, "local", "repo.git"];

/// What in `dir` shows that a state was kept there, if anything.
fn earlier_state(dir: &Path) -> Option<String> {
    STATE_ENTRIES
        .iter()
        .find(|name| dir.join(name).symlink_metadata().is_ok())
        .map(|name| (*name).to_string())
}

/// Whether a missing database's `evidence` of an earlier state was left by
/// a new state that never reached the disk (its temporary file is there,
/// [`fresh`]): a local executor's records or a mirror made while the
/// database was new. The marker is written only once the database is on
/// disk, so it is never excused.
fn unfinished_creation(dir: &Path, database_len: Option<u64>, evidence: &str) -> bool {
    database_len.is_none()
        && evidence != MARKER_FILE
        && fresh::temps(dir).is_ok_and(|temps| !temps.is_empty())
}

/// An opened database, with its temporary file while it is new.
type Opened = (Database, Option<fresh::Fresh>);

/// Opens the database of a new state in `dir` (`path` missing): under a
/// temporary name, its syncs skipped, until its first synced commit
/// ([`fresh`]); a crashed process's temporary file of this boot is opened
/// again, another boot's removed. Where the system tells no boot id, at
/// `path`, synced as any. `None`: the temporary file was renamed or made
/// anew while this waited for its lock (look again).
fn open_new(dir: &Path, path: &Path) -> Result<Option<Opened>, redb::DatabaseError> {
    use std::os::unix::fs::MetadataExt;
    let Some(boot) = fresh::boot_id() else {
        return Database::create(path).map(|db| Some((db, None)));
    };
    let temp = fresh::temp_path(dir, &boot);
    // Another boot's was never synced: a power loss may have torn it.
    for other in fresh::temps(dir)? {
        if other != temp {
            match std::fs::remove_file(&other) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
    }
    if fresh::unfinished_init(&temp)? {
        // A process died while redb made it, before its first commit:
        // nothing in it. (A process making it at this moment loses its
        // file and fails at its first synced commit, before any action.)
        std::fs::remove_file(&temp)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&temp)?;
    let inode = file.metadata()?.ino();
    let skip = Arc::new(AtomicBool::new(true));
    let db = redb::Builder::new().create_with_backend(fresh::Switch::new(file, skip.clone())?)?;
    let same = std::fs::metadata(&temp).is_ok_and(|m| m.ino() == inode) && !path.exists();
    if !same {
        // Closed as any database, synced: it may be another's by now.
        skip.store(false, Ordering::SeqCst);
        return Ok(None);
    }
    Ok(Some((db, Some(fresh::Fresh { temp, skip }))))
}

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state directory could not be created.
    #[error("cannot create state directory {path}: {source}")]
    Dir {
        /// The directory.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The database is gone or empty where a state was kept.
    #[error(
        "state {path} {how}, but {dir} held gitfleet's state (it has {evidence}): starting from an empty state would run finished jobs again and forget running ones. Restore {path} from a backup, or, to start over on purpose, remove {dir} (or use a new --state directory)"
    )]
    Lost {
        /// The database file.
        path: String,
        /// The state directory.
        dir: String,
        /// "is missing" or "is empty".
        how: &'static str,
        /// The entry that shows a state was kept there.
        evidence: String,
    },
    /// Another process holds the database.
    #[error(
        "state {path} is in use by another gitfleet process (one reconciler per state directory)"
    )]
    Locked {
        /// The database file.
        path: String,
    },
    /// redb failed.
    #[error("state {path}: {message}")]
    Database {
        /// The database file.
        path: String,
        /// redb's message.
        message: String,
    },
    /// A stored value does not parse (written by a newer gitfleet?).
    #[error("state {path}: table {table}, key {key}: {message}")]
    Corrupt {
        /// The database file.
        path: String,
        /// The table.
        table: &'static str,
        /// The key.
        key: String,
        /// serde's message.
        message: String,
    },
}

/// Writes that land together or not at all.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// Job records to insert or replace.
    pub jobs: Vec<JobRecord>,
    /// Job records to delete.
    pub remove_jobs: Vec<String>,
    /// Audit lines to append.
    pub audit: Vec<AuditEntry>,
    /// Intents to mark done (delete).
    pub done_intents: Vec<u64>,
    /// New revision bookkeeping.
    pub revisions: Option<Revisions>,
    /// The reconciler's clock.
    pub clock: Option<Timestamp>,
    /// Executor values to insert or replace (JSON).
    pub executor_put: Vec<(String, String)>,
    /// Executor values to delete.
    pub executor_remove: Vec<String>,
}

impl Batch {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
            && self.remove_jobs.is_empty()
            && self.audit.is_empty()
            && self.done_intents.is_empty()
            && self.revisions.is_none()
            && self.clock.is_none()
            && self.executor_put.is_empty()
            && self.executor_remove.is_empty()
    }
}

/// Executor values written while held: key → value (`None`: removed).
type HeldWrites = BTreeMap<String, Option<String>>;

/// The open state database.
pub struct Store {
    db: Database,
    path: PathBuf,
    /// The state directory.
    dir: PathBuf,
    /// A new database not synced yet ([`fresh`]).
    fresh: Mutex<Option<fresh::Fresh>>,
    /// The executor's writes held for the next [`Store::commit`], while
    /// [`Store::hold_executor_writes`] is in force.
    held: Mutex<Option<HeldWrites>>,
    /// A deferred commit ([`Store::commit_deferred`]) is not on disk yet.
    deferred: AtomicBool,
    /// Commits that wrote (or tried to write) job records ([`Store::job_writes`]).
    job_writes: AtomicU64,
    /// Where each job record is stored, once a write needed it (`None`
    /// before, and after a write that failed: read again).
    job_index: Mutex<Option<job_groups::Index>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the state in `dir`.
    ///
    /// A new database is created only where there was no state: a missing or
    /// empty database in a directory that held gitfleet's state (its marker
    /// file, a local executor's records, a mirror) is [`StateError::Lost`],
    /// because starting from nothing would run finished jobs again.
    pub fn open(dir: &Path) -> Result<Store, StateError> {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Dir {
            path: dir.display().to_string(),
            source,
        })?;
        let path = dir.join(DB_FILE);
        let shown = path.display().to_string();
        let database_len = match std::fs::metadata(&path) {
            Ok(meta) => Some(meta.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(StateError::Dir {
                    path: shown,
                    source,
                });
            }
        };
        if database_len.is_none_or(|len| len == 0)
            && let Some(evidence) = earlier_state(dir)
            && !unfinished_creation(dir, database_len, &evidence)
        {
            return Err(StateError::Lost {
                path: shown,
                dir: dir.display().to_string(),
                how: if database_len.is_none() {
                    "is missing"
                } else {
                    "is empty"
                },
                evidence,
            });
        }
        // A process that just died (or a child it forked a moment before,
        // which shares the lock until it execs) may hold the lock for a
        // moment: wait a little before calling it another reconciler.
        let waited_since = std::time::Instant::now();
        let (db, fresh) = loop {
            let opened = if !path.exists() {
                open_new(dir, &path)
            } else {
                Database::create(&path).map(|db| Some((db, None)))
            };
            match opened {
                Ok(Some(opened)) => break opened,
                // The temporary file was renamed (or removed) meanwhile:
                // look again.
                Ok(None) => {}
                Err(redb::DatabaseError::DatabaseAlreadyOpen)
                    if waited_since.elapsed() < LOCK_PATIENCE =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                    return Err(StateError::Locked {
                        path: shown.clone(),
                    });
                }
                Err(other) => {
                    return Err(StateError::Database {
                        path: shown.clone(),
                        message: other.to_string(),
                    });
                }
            }
            if waited_since.elapsed() >= LOCK_PATIENCE {
                return Err(StateError::Locked { path: shown });
            }
        };
        let store = Store {
            db,
            path,
            dir: dir.to_path_buf(),
            fresh: Mutex::new(fresh),
            held: Mutex::new(None),
            deferred: AtomicBool::new(false),
            job_writes: AtomicU64::new(0),
            job_index: Mutex::new(None),
        };
        store.create_tables()?;
        if !store.is_fresh() {
            store.write_marker()?;
        }
        Ok(store)
    }

    /// Written once the database is on disk under its name, and lasts as
    /// long as the directory: from now on a lost database is noticed.
    fn write_marker(&self) -> Result<(), StateError> {
        let marker = self.dir.join(MARKER_FILE);
        if !marker.exists() {
            std::fs::write(&marker, MARKER_TEXT).map_err(|source| StateError::Dir {
                path: marker.display().to_string(),
                source,
            })?;
        }
        Ok(())
    }

    /// Whether the database is new and none of its commits synced yet
    /// ([`fresh`]): it is kept under a temporary name.
    pub fn is_fresh(&self) -> bool {
        self.fresh_state().is_some()
    }

    fn fresh_state(&self) -> MutexGuard<'_, Option<fresh::Fresh>> {
        self.fresh.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: impl std::fmt::Display) -> StateError {
        StateError::Database {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }

    /// Creates the tables a new database lacks, in a deferred commit: a
    /// crash before the first durable commit loses nothing but the empty
    /// tables, which the next open creates again.
    fn create_tables(&self) -> Result<(), StateError> {
        let existing = {
            let txn = self.db.begin_read().map_err(|e| self.err(e))?;
            txn.list_tables()
                .map_err(|e| self.err(e))?
                .map(|t| t.name().to_string())
                .collect::<Vec<_>>()
        };
        let all = [
            META.name(),
            JOBS.name(),
            job_groups::JOB_GROUPS.name(),
            EXECUTOR.name(),
            INTENTS.name(),
            INTENTS_DONE.name(),
            AUDIT.name(),
        ];
        if all.iter().all(|name| existing.iter().any(|e| e == name)) {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            txn.open_table(META).map_err(|e| self.err(e))?;
            txn.open_table(JOBS).map_err(|e| self.err(e))?;
            txn.open_table(job_groups::JOB_GROUPS)
                .map_err(|e| self.err(e))?;
            txn.open_table(EXECUTOR).map_err(|e| self.err(e))?;
            txn.open_table(INTENTS).map_err(|e| self.err(e))?;
            txn.open_table(INTENTS_DONE).map_err(|e| self.err(e))?;
            txn.open_table(AUDIT).map_err(|e| self.err(e))?;
        }
        self.finish(txn, Durability::None)
    }

    /// Commits `txn`: on disk when this returns, with every deferred commit
    /// before it ([`Durability::Immediate`]), or deferred ([`Durability::None`]).
    fn finish(&self, txn: WriteTransaction, durability: Durability) -> Result<(), StateError> {
        self.finish_as(txn, durability, true)
    }

    /// [`Store::finish`]; a durable commit of a new database ([`fresh`])
    /// is synced only with `sync` (and then renamed into place).
    fn finish_as(
        &self,
        mut txn: WriteTransaction,
        durability: Durability,
        sync: bool,
    ) -> Result<(), StateError> {
        let deferred = matches!(durability, Durability::None);
        let mut fresh = (!deferred && sync).then(|| self.fresh_state());
        if let Some(Some(new)) = fresh.as_deref() {
            // This commit's syncs put every write before it on disk.
            new.sync_from_now();
        }
        txn.set_durability(durability).map_err(|e| self.err(e))?;
        txn.commit().map_err(|e| self.err(e))?;
        // A durable commit puts every deferred one before it on disk.
        self.deferred.store(deferred, Ordering::SeqCst);
        if let Some(fresh) = fresh.as_mut()
            && let Some(new) = fresh.as_ref()
        {
            new.settle(&self.dir).map_err(|e| self.err(e))?;
            **fresh = None;
            self.write_marker()?;
        }
        Ok(())
    }

    /// Whether a deferred commit is not on disk yet.
    pub fn has_deferred(&self) -> bool {
        self.deferred.load(Ordering::SeqCst)
    }

    /// Puts the deferred commits ([`Store::commit_deferred`]) on disk now
    /// (one durable, empty transaction); nothing to do without any.
    pub fn persist(&self) -> Result<(), StateError> {
        if !self.has_deferred() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        self.finish(txn, Durability::Immediate)
    }

    fn decode<T: DeserializeOwned>(
        &self,
        table: &'static str,
        key: &str,
        text: &str,
    ) -> Result<T, StateError> {
        serde_json::from_str(text).map_err(|e| StateError::Corrupt {
            path: self.path.display().to_string(),
            table,
            key: key.to_string(),
            message: e.to_string(),
        })
    }

    fn meta<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(META).map_err(|e| self.err(e))?;
        match table.get(key).map_err(|e| self.err(e))? {
            Some(value) => self.decode("meta", key, value.value()).map(Some),
            None => Ok(None),
        }
    }

    /// Revision bookkeeping (empty on a new state).
    pub fn revisions(&self) -> Result<Revisions, StateError> {
        Ok(self.meta(REVISIONS_KEY)?.unwrap_or_default())
    }

    /// The reconciler's clock as last recorded.
    pub fn clock(&self) -> Result<Option<Timestamp>, StateError> {
        self.meta(CLOCK_KEY)
    }

    /// Every job record, by name.
    pub fn jobs(&self) -> Result<BTreeMap<String, JobRecord>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(JOBS).map_err(|e| self.err(e))?;
        let corrupt = |table: &'static str, key: String, message: String| StateError::Corrupt {
            path: self.path.display().to_string(),
            table,
            key,
            message,
        };
        let mut out = BTreeMap::new();
        for entry in table.iter().map_err(|e| self.err(e))? {
            let (key, value) = entry.map_err(|e| self.err(e))?;
            let record = compact::decode(value.value())
                .map_err(|message| corrupt("jobs", key.value().to_string(), message))?;
            out.insert(key.value().to_string(), record);
        }
        let groups = txn
            .open_table(job_groups::JOB_GROUPS)
            .map_err(|e| self.err(e))?;
        let mut records = Vec::new();
        for entry in groups.iter().map_err(|e| self.err(e))? {
            let (key, value) = entry.map_err(|e| self.err(e))?;
            job_groups::decode(value.value(), &mut records)
                .map_err(|message| corrupt("job_groups", key.value().to_string(), message))?;
            out.extend(records.drain(..));
        }
        Ok(out)
    }

    /// How many commits since the store was opened wrote job records (or
    /// tried to: a failed one counts). Equal counts before and after some
    /// work mean that no job record was written in between, so records
    /// read (or kept in memory) before it are still those stored.
    pub fn job_writes(&self) -> u64 {
        self.job_writes.load(Ordering::SeqCst)
    }

    /// Every executor value, by key.
    pub fn executor_values(&self) -> Result<BTreeMap<String, String>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(EXECUTOR).map_err(|e| self.err(e))?;
        let mut out = BTreeMap::new();
        for entry in table.iter().map_err(|e| self.err(e))? {
            let (key, value) = entry.map_err(|e| self.err(e))?;
            out.insert(key.value().to_string(), value.value().to_string());
        }
        Ok(out)
    }

    /// Actions recorded as intended and not yet done, oldest first.
    pub fn pending_intents(&self) -> Result<Vec<(u64, Intent)>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(INTENTS).map_err(|e| self.err(e))?;
        let done = txn.open_table(INTENTS_DONE).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.err(e))? {
            let (key, value) = entry.map_err(|e| self.err(e))?;
            let key = key.value();
            let intents: Vec<Intent> = self.decode_group("intents", key, value.value())?;
            let progress = match done.get(key).map_err(|e| self.err(e))? {
                Some(text) => groups::Progress::decode(text.value())
                    .ok_or_else(|| self.corrupt("intents_done", key, "not a progress mark"))?,
                None => groups::Progress::new(intents.len()),
            };
            let first = groups::first_id(key, intents.len());
            for (index, intent) in intents.into_iter().enumerate() {
                if !progress.is_done(index) {
                    out.push((first + index as u64, intent));
                }
            }
        }
        Ok(out)
    }

    /// Records an action as intended, before it is carried out; returns its id.
    pub fn record_intent(&self, intent: &Intent) -> Result<u64, StateError> {
        let ids = self.record_intents(std::slice::from_ref(intent))?;
        ids.first()
            .copied()
            .ok_or_else(|| self.err("no intent id was given"))
    }

    /// Records actions as intended, all in one transaction (one value),
    /// before the first of them is carried out; returns their ids, in
    /// order (consecutive). Nothing is written for none.
    pub fn record_intents(&self, intents: &[Intent]) -> Result<Vec<u64>, StateError> {
        self.record_intents_as(intents, Durability::Immediate)
    }

    /// Records actions as intended as [`Store::record_intents`] does,
    /// deferred ([`Store::commit_deferred`]): only for actions whose
    /// effects all land in this store with their outcomes (an executor
    /// that acts in the store only), which a crash loses together.
    pub fn record_intents_deferred(&self, intents: &[Intent]) -> Result<Vec<u64>, StateError> {
        self.record_intents_as(intents, Durability::None)
    }

    /// Records a plan's actions as intended as [`Store::record_intents`]
    /// does (`durable`) or [`Store::record_intents_deferred`] does, from
    /// borrowed intents.
    pub fn record_intent_refs(
        &self,
        intents: &[IntentRef<'_>],
        durable: bool,
    ) -> Result<Vec<u64>, StateError> {
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        if intents.is_empty() {
            return Ok(Vec::new());
        }
        // Written by hand: the same value as `groups::encode`'s.
        self.record_intent_value(intents.len(), &written::intents_value(intents), durability)
    }

    fn record_intents_as<T: Serialize>(
        &self,
        intents: &[T],
        durability: Durability,
    ) -> Result<Vec<u64>, StateError> {
        if intents.is_empty() {
            return Ok(Vec::new());
        }
        self.record_intent_value(intents.len(), &groups::encode(intents), durability)
    }

    /// Records `count` intents (at least one) whose group value is `value`.
    fn record_intent_value(
        &self,
        count: usize,
        value: &str,
        durability: Durability,
    ) -> Result<Vec<u64>, StateError> {
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        let first;
        {
            let mut table = txn.open_table(INTENTS).map_err(|e| self.err(e))?;
            first = next_key(&table).map_err(|e| self.err(e))?;
            let last = first + count as u64 - 1;
            table.insert(last, value).map_err(|e| self.err(e))?;
            if count > 1 {
                let mut done = txn.open_table(INTENTS_DONE).map_err(|e| self.err(e))?;
                done.insert(last, groups::Progress::new(count).encode().as_str())
                    .map_err(|e| self.err(e))?;
            }
        }
        self.finish(txn, durability)?;
        Ok((first..first + count as u64).collect())
    }

    /// From now on, the executor's writes ([`exec::KeyValue::write`]) are
    /// held in memory and land with the next [`Store::commit`], in its
    /// transaction: the reconciler commits an action's outcome and the
    /// executor values the action changed together. Reads
    /// ([`exec::KeyValue::entries`]) see held writes. A crash loses them
    /// with the outcomes they belong to, whose intents stay recorded (the
    /// actions are carried out again, which executors make idempotent).
    pub fn hold_executor_writes(&self) {
        let mut held = self.held();
        if held.is_none() {
            *held = Some(HeldWrites::new());
        }
    }

    /// Ends [`Store::hold_executor_writes`]: what is held is committed now.
    pub fn release_executor_writes(&self) -> Result<(), StateError> {
        let held = self.held().take();
        match held {
            Some(writes) if !writes.is_empty() => {
                let mut batch = Batch::default();
                for (key, value) in writes {
                    match value {
                        Some(v) => batch.executor_put.push((key, v)),
                        None => batch.executor_remove.push(key),
                    }
                }
                self.commit(&batch)
            }
            _ => Ok(()),
        }
    }

    /// The held executor writes (a panic while they were locked leaves them
    /// usable: each write is one map operation).
    fn held(&self) -> MutexGuard<'_, Option<HeldWrites>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The audit log from sequence `from` on (all of it with 0).
    pub fn audit(&self, from: u64) -> Result<Vec<(u64, AuditEntry)>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(AUDIT).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        // A group is keyed by its last line: the first group from `from` on
        // may begin before it.
        for entry in table.range(from..).map_err(|e| self.err(e))? {
            let (key, value) = entry.map_err(|e| self.err(e))?;
            let key = key.value();
            let lines: Vec<AuditEntry> = self.decode_group("audit", key, value.value())?;
            let first = groups::first_id(key, lines.len());
            out.extend((first..).zip(lines).filter(|(id, _)| *id >= from));
        }
        Ok(out)
    }

    /// The audit log of the state in `dir`, read without opening the state
    /// for writing (nothing is created or changed). A reconciler running on
    /// `dir` holds the database: [`StateError::Locked`].
    pub fn read_audit(dir: &Path) -> Result<Vec<(u64, AuditEntry)>, StateError> {
        let path = dir.join(DB_FILE);
        let shown = path.display().to_string();
        let failed = |message: String| StateError::Database {
            path: shown.clone(),
            message,
        };
        let db = match redb::ReadOnlyDatabase::open(&path) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(StateError::Locked { path: shown });
            }
            Err(redb::DatabaseError::Storage(redb::StorageError::Io(e)))
                if e.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(failed(
                    "no state here (run `gitfleet reconcile` or `gitfleet apply` with this --state first)"
                        .to_string(),
                ));
            }
            Err(e) => return Err(failed(e.to_string())),
        };
        let txn = db.begin_read().map_err(|e| failed(e.to_string()))?;
        let table = match txn.open_table(AUDIT) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(failed(e.to_string())),
        };
        let mut out = Vec::new();
        for entry in table.range(0..).map_err(|e| failed(e.to_string()))? {
            let (key, value) = entry.map_err(|e| failed(e.to_string()))?;
            let key = key.value();
            let lines: Vec<AuditEntry> =
                groups::decode(value.value()).map_err(|e| StateError::Corrupt {
                    path: shown.clone(),
                    table: "audit",
                    key: key.to_string(),
                    message: e.to_string(),
                })?;
            let first = groups::first_id(key, lines.len());
            out.extend((first..).zip(lines));
        }
        Ok(out)
    }

    /// The newest `n` entries of the audit log, newest first.
    pub fn audit_tail(&self, n: usize) -> Result<Vec<(u64, AuditEntry)>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(AUDIT).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.err(e))?.rev() {
            if out.len() >= n {
                break;
            }
            let (key, value) = entry.map_err(|e| self.err(e))?;
            let key = key.value();
            let lines: Vec<AuditEntry> = self.decode_group("audit", key, value.value())?;
            let first = groups::first_id(key, lines.len());
            let left = n - out.len();
            out.extend(
                lines
                    .into_iter()
                    .enumerate()
                    .rev()
                    .take(left)
                    .map(|(i, line)| (first + i as u64, line)),
            );
        }
        Ok(out)
    }

    /// Writes a batch in one transaction, with the executor's held writes
    /// ([`Store::hold_executor_writes`]), if any: on disk when this
    /// returns, together with every deferred commit before it.
    pub fn commit(&self, batch: &Batch) -> Result<(), StateError> {
        self.commit_as(batch, Durability::Immediate, true)
    }

    /// Writes a batch as [`Store::commit`] does, but on a new state none
    /// of whose commits was synced yet ([`Store::is_fresh`]) without
    /// waiting for the disk: a crash of the process keeps it, a power loss
    /// before the state's first synced commit loses the whole new state
    /// (it starts anew). Only for what no action depends on (a revision's
    /// loading mark).
    pub fn commit_unsynced_if_new(&self, batch: &Batch) -> Result<(), StateError> {
        self.commit_as(batch, Durability::Immediate, false)
    }

    /// Writes a batch as [`Store::commit`] does, deferred: this store reads
    /// it at once, and it reaches the disk with the next durable commit
    /// (any other [`Store::commit`], [`Store::record_intents`],
    /// [`Store::persist`]) or when the store is closed. A crash before
    /// that loses it, with the deferred commits after it, and nothing
    /// else: use it only for what may be lost by a crash until the next
    /// durable commit (docs/semantics.md, "Deferred commits").
    pub fn commit_deferred(&self, batch: &Batch) -> Result<(), StateError> {
        self.commit_as(batch, Durability::None, true)
    }

    fn commit_as(
        &self,
        batch: &Batch,
        durability: Durability,
        sync: bool,
    ) -> Result<(), StateError> {
        let mut held = self.held();
        let held_writes = held.as_ref().filter(|w| !w.is_empty());
        if batch.is_empty() && held_writes.is_none() {
            return Ok(());
        }
        if !batch.jobs.is_empty() || !batch.remove_jobs.is_empty() {
            // Counted before the write: a failed one may have changed
            // nothing, and nothing read before it is trusted after.
            self.job_writes.fetch_add(1, Ordering::SeqCst);
        }
        self.write_batch(batch, held_writes, durability, sync)?;
        // Written: no longer held (kept on a failure, for the next commit).
        if let Some(writes) = held.as_mut() {
            writes.clear();
        }
        Ok(())
    }

    fn write_batch(
        &self,
        batch: &Batch,
        held: Option<&HeldWrites>,
        durability: Durability,
        sync: bool,
    ) -> Result<(), StateError> {
        // Where the job records are: taken while they change, put back once
        // the transaction is committed (a failed write leaves `None`, so the
        // next reads it again).
        let mut job_index = self
            .job_index
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut index = None;
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut meta = txn.open_table(META).map_err(|e| self.err(e))?;
            if let Some(revisions) = &batch.revisions {
                meta.insert(REVISIONS_KEY, to_json(revisions).as_str())
                    .map_err(|e| self.err(e))?;
            }
            if let Some(clock) = &batch.clock {
                meta.insert(CLOCK_KEY, to_json(clock).as_str())
                    .map_err(|e| self.err(e))?;
            }
            if !batch.jobs.is_empty() || !batch.remove_jobs.is_empty() {
                index = Some(self.write_jobs(&txn, batch, job_index.take())?);
            }
            let mut executor = txn.open_table(EXECUTOR).map_err(|e| self.err(e))?;
            for (key, value) in &batch.executor_put {
                executor
                    .insert(key.as_str(), value.as_str())
                    .map_err(|e| self.err(e))?;
            }
            for key in &batch.executor_remove {
                executor.remove(key.as_str()).map_err(|e| self.err(e))?;
            }
            for (key, value) in held.into_iter().flatten() {
                match value {
                    Some(v) => executor.insert(key.as_str(), v.as_str()),
                    None => executor.remove(key.as_str()),
                }
                .map_err(|e| self.err(e))?;
            }
            if !batch.done_intents.is_empty() {
                self.mark_done(&txn, &batch.done_intents)?;
            }
            if !batch.audit.is_empty() {
                let mut audit = txn.open_table(AUDIT).map_err(|e| self.err(e))?;
                let mut next = next_key(&audit).map_err(|e| self.err(e))?;
                for lines in batch.audit.chunks(AUDIT_GROUP) {
                    let last = next + lines.len() as u64 - 1;
                    audit
                        .insert(last, written::audit_value(lines).as_str())
                        .map_err(|e| self.err(e))?;
                    next = last + 1;
                }
            }
        }
        self.finish_as(txn, durability, sync)?;
        if index.is_some() {
            *job_index = index;
        }
        Ok(())
    }

    /// Writes the batch's job records and removals in `txn`
    /// ([`job_groups`]), with `index` (read from the tables when `None`);
    /// returns it, in step with the transaction.
    fn write_jobs(
        &self,
        txn: &WriteTransaction,
        batch: &Batch,
        index: Option<job_groups::Index>,
    ) -> Result<job_groups::Index, StateError> {
        let mut jobs = txn.open_table(JOBS).map_err(|e| self.err(e))?;
        let mut groups = txn
            .open_table(job_groups::JOB_GROUPS)
            .map_err(|e| self.err(e))?;
        let failed = |e: job_groups::GroupError| match e {
            job_groups::GroupError::Storage(message) => self.err(message),
            job_groups::GroupError::Corrupt { key } => {
                self.corrupt("job_groups", key, "not a group of job records")
            }
        };
        let mut index = match index {
            Some(index) => index,
            None => job_groups::Index::build(&jobs, &groups).map_err(failed)?,
        };
        // Sorted by job, one record each: of two records of one job the
        // later wins, and a removal wins over both (it was applied last).
        let removed: std::collections::HashSet<&str> =
            batch.remove_jobs.iter().map(String::as_str).collect();
        let mut records: Vec<&JobRecord> = batch
            .jobs
            .iter()
            .filter(|r| !removed.contains(r.job.as_str()))
            .collect();
        records.sort_by(|a, b| a.job.cmp(&b.job));
        let mut latest: Vec<&JobRecord> = Vec::with_capacity(records.len());
        for record in records {
            match latest.last_mut() {
                Some(last) if last.job == record.job => *last = record,
                _ => latest.push(record),
            }
        }
        // One buffer for every record's text (not an allocation each).
        let mut text = String::new();
        job_groups::write(
            &mut jobs,
            &mut groups,
            &mut index,
            &latest,
            &batch.remove_jobs,
            &mut text,
        )
        .map_err(failed)?;
        Ok(index)
    }

    /// Marks intents done in `txn`: a group all of whose intents are done
    /// is removed, with its progress mark; otherwise the mark records the
    /// ones done. Ids of no intent are ignored.
    fn mark_done(&self, txn: &WriteTransaction, ids: &[u64]) -> Result<(), StateError> {
        let mut intents = txn.open_table(INTENTS).map_err(|e| self.err(e))?;
        let mut done = txn.open_table(INTENTS_DONE).map_err(|e| self.err(e))?;
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let mut rest = ids.as_slice();
        while let Some(&id) = rest.first() {
            // The group holding `id` is the first keyed at or after it.
            let key = match intents.range(id..).map_err(|e| self.err(e))?.next() {
                Some(entry) => entry.map_err(|e| self.err(e))?.0.value(),
                None => break,
            };
            let (mine, after) = rest.split_at(rest.partition_point(|i| *i <= key));
            rest = after;
            let mark = done
                .get(key)
                .map_err(|e| self.err(e))?
                .map(|v| v.value().to_string());
            let Some(mark) = mark else {
                // A group of one (or an intent from before groups).
                if mine.contains(&key) {
                    intents.remove(key).map_err(|e| self.err(e))?;
                }
                continue;
            };
            let mut progress = groups::Progress::decode(&mark)
                .ok_or_else(|| self.corrupt("intents_done", key, "not a progress mark"))?;
            let first = groups::first_id(key, progress.len());
            for id in mine.iter().filter(|i| **i >= first) {
                progress.mark((id - first) as usize);
            }
            if progress.all_done() {
                intents.remove(key).map_err(|e| self.err(e))?;
                done.remove(key).map_err(|e| self.err(e))?;
            } else {
                done.insert(key, progress.encode().as_str())
                    .map_err(|e| self.err(e))?;
            }
        }
        Ok(())
    }

    /// The values of a group ([`groups::decode`]) keyed `key` in `table`.
    fn decode_group<T: DeserializeOwned>(
        &self,
        table: &'static str,
        key: u64,
        text: &str,
    ) -> Result<Vec<T>, StateError> {
        groups::decode(text).map_err(|e| self.corrupt(table, key, e))
    }

    fn corrupt(&self, table: &'static str, key: u64, e: impl std::fmt::Display) -> StateError {
        StateError::Corrupt {
            path: self.path.display().to_string(),
            table,
            key: key.to_string(),
            message: e.to_string(),
        }
    }
}

/// A new database not synced yet ([`fresh`]) is synced and takes its name
/// when the store is closed, as deferred commits reach the disk then.
impl Drop for Store {
    fn drop(&mut self) {
        if !self.is_fresh() {
            return;
        }
        let settled = self
            .db
            .begin_write()
            .map_err(|e| self.err(e))
            .and_then(|txn| self.finish(txn, Durability::Immediate));
        if let Err(e) = settled {
            tracing::warn!(error = %e, "cannot put the new state on disk; the next start in this boot goes on with it");
        }
    }
}

/// The key after the table's last one (1 for an empty table).
fn next_key(table: &redb::Table<'_, u64, &str>) -> Result<u64, redb::StorageError> {
    Ok(table.last()?.map(|(k, _)| k.value() + 1).unwrap_or(1))
}

/// Serializes a value that cannot fail to serialize (plain data, string keys).
fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// The executor's values live in the state's `executor` table, so they are
/// written in the same database as the reconciler's records.
impl exec::KeyValue for Store {
    fn entries(&self, prefix: &str) -> Result<BTreeMap<String, String>, exec::KvError> {
        let mut all = self
            .executor_values()
            .map_err(|e| exec::KvError(e.to_string()))?;
        all.retain(|key, _| key.starts_with(prefix));
        if let Some(writes) = self.held().as_ref() {
            for (key, value) in writes.iter().filter(|(k, _)| k.starts_with(prefix)) {
                match value {
                    Some(v) => all.insert(key.clone(), v.clone()),
                    None => all.remove(key),
                };
            }
        }
        Ok(all)
    }

    fn write(&self, changes: &[(String, Option<String>)]) -> Result<(), exec::KvError> {
        if let Some(writes) = self.held().as_mut() {
            for (key, value) in changes {
                writes.insert(key.clone(), value.clone());
            }
            return Ok(());
        }
        let mut batch = Batch::default();
        for (key, value) in changes {
            match value {
                Some(v) => batch.executor_put.push((key.clone(), v.clone())),
                None => batch.executor_remove.push(key.clone()),
            }
        }
        self.commit(&batch)
            .map_err(|e| exec::KvError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::plan::Action;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn batches_persist_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            let mut record = JobRecord::new_pending("a", t("2026-11-21T10:00:00Z"));
            record.phase = Phase::Running;
            store
                .commit(&Batch {
                    jobs: vec![record],
                    revisions: Some(Revisions {
                        last_applied: Some("abc".into()),
                        last_attempted: Some("abc".into()),
                        last_error: None,
                        loading: None,
                    }),
                    clock: Some(t("2026-11-21T10:05:00Z")),
                    audit: vec![AuditEntry {
                        time: t("2026-11-21T10:00:00Z"),
                        revision: "abc".into(),
                        what: "place".into(),
                        subject: "a".into(),
                        detail: String::new(),
                    }],
                    ..Batch::default()
                })
                .unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.jobs().unwrap()["a"].phase, Phase::Running);
        assert_eq!(
            store.revisions().unwrap().last_applied.as_deref(),
            Some("abc")
        );
        assert_eq!(store.clock().unwrap(), Some(t("2026-11-21T10:05:00Z")));
        assert_eq!(store.audit(0).unwrap().len(), 1);
    }

    #[test]
    fn job_records_of_older_states_read_beside_compact_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut old = JobRecord::new_pending("old", t("2026-11-21T10:00:00Z"));
        old.reason = Some("waiting".into());
        // As an older gitfleet wrote it: JSON.
        {
            let txn = store.db.begin_write().unwrap();
            txn.open_table(JOBS)
                .unwrap()
                .insert("old", to_json(&old).as_str())
                .unwrap();
            txn.commit().unwrap();
        }
        let mut new = JobRecord::new_pending("new", t("2026-11-21T10:00:00Z"));
        new.phase = Phase::Running;
        new.started = Some(t("2026-11-21T10:01:00Z"));
        store
            .commit(&Batch {
                jobs: vec![new.clone()],
                ..Batch::default()
            })
            .unwrap();
        let stored = {
            let txn = store.db.begin_read().unwrap();
            let table = txn.open_table(job_groups::JOB_GROUPS).unwrap();
            let group = table.get(1).unwrap().unwrap().value().to_string();
            let entries = job_groups::entries(&group).unwrap();
            assert_eq!(entries.len(), 1);
            assert_eq!(entries[0].0, "new");
            entries[0].1.to_string()
        };
        assert!(stored.starts_with("~1"), "{stored:?}");
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        let jobs = store.jobs().unwrap();
        assert_eq!(jobs["old"], old);
        assert_eq!(jobs["new"], new);
    }

    #[test]
    fn intents_stay_until_marked_done() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let intent = Intent {
            revision: "r1".into(),
            time: t("2026-11-21T10:00:00Z"),
            action: Action::Cancel {
                job: "x".into(),
                reason: "removed from Git".into(),
            },
        };
        let a = store.record_intent(&intent).unwrap();
        let b = store.record_intent(&intent).unwrap();
        assert!(b > a);
        assert_eq!(store.pending_intents().unwrap().len(), 2);
        store
            .commit(&Batch {
                done_intents: vec![a],
                ..Batch::default()
            })
            .unwrap();
        let left = store.pending_intents().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].0, b);
    }

    #[test]
    fn a_plans_intents_are_recorded_together_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.record_intents(&[]).unwrap().is_empty());
        assert!(store.pending_intents().unwrap().is_empty());
        let intents: Vec<Intent> = ["a", "b", "c"]
            .iter()
            .map(|job| Intent {
                revision: "r1".into(),
                time: t("2026-11-21T10:00:00Z"),
                action: Action::Cancel {
                    job: (*job).into(),
                    reason: "removed from Git".into(),
                },
            })
            .collect();
        let ids = store.record_intents(&intents).unwrap();
        assert_eq!(ids.len(), 3);
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
        let pending = store.pending_intents().unwrap();
        let jobs: Vec<&str> = pending
            .iter()
            .map(|(_, i)| i.action.job().unwrap_or_default())
            .collect();
        assert_eq!(jobs, ["a", "b", "c"]);
        store
            .commit(&Batch {
                done_intents: vec![ids[0], ids[2]],
                ..Batch::default()
            })
            .unwrap();
        let left = store.pending_intents().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].0, ids[1]);
    }

    fn audit_line(what: &str) -> AuditEntry {
        AuditEntry {
            time: t("2026-11-21T10:00:00Z"),
            revision: "r".into(),
            what: what.into(),
            subject: "j".into(),
            detail: String::new(),
        }
    }

    fn cancel(job: &str) -> Intent {
        Intent {
            revision: "r1".into(),
            time: t("2026-11-21T10:00:00Z"),
            action: Action::Cancel {
                job: job.into(),
                reason: "removed from Git".into(),
            },
        }
    }

    /// Jobs of the pending intents.
    fn pending_jobs(store: &Store) -> Vec<(u64, String)> {
        store
            .pending_intents()
            .unwrap()
            .into_iter()
            .map(|(id, i)| (id, i.action.job().unwrap_or_default().to_string()))
            .collect()
    }

    #[test]
    fn a_plans_intents_are_one_value_until_all_are_done_in_batches() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let single = store.record_intent(&cancel("before")).unwrap();
        let intents: Vec<Intent> = (0..10).map(|i| cancel(&format!("j{i}"))).collect();
        let ids = store.record_intents(&intents).unwrap();
        assert_eq!(ids[0], single + 1);
        let count = |table| {
            let txn = store.db.begin_read().unwrap();
            redb::ReadableTableMetadata::len(&txn.open_table(table).unwrap()).unwrap()
        };
        assert_eq!(count(INTENTS), 2, "one value for the plan");
        // Batches in plan order, as the reconciler commits outcomes.
        for batch in ids.chunks(4) {
            store
                .commit(&Batch {
                    done_intents: batch.to_vec(),
                    ..Batch::default()
                })
                .unwrap();
            let left = pending_jobs(&store);
            let done_so_far = ids
                .iter()
                .position(|id| *id == batch[batch.len() - 1])
                .unwrap()
                + 1;
            assert_eq!(left.len(), 1 + 10 - done_so_far, "{left:?}");
            assert_eq!(left[0], (single, "before".to_string()));
        }
        assert_eq!(count(INTENTS), 1, "the plan's value is gone");
        assert_eq!(count(INTENTS_DONE), 0, "and its progress");
        store
            .commit(&Batch {
                done_intents: vec![single, 999],
                ..Batch::default()
            })
            .unwrap();
        assert!(store.pending_intents().unwrap().is_empty());
        // The next plan reads back (ids count again from an empty table, as
        // they always did).
        let next = store.record_intents(&intents[..2]).unwrap();
        assert_eq!(
            pending_jobs(&store),
            [(next[0], "j0".to_string()), (next[1], "j1".to_string())]
        );
    }

    #[test]
    fn intents_and_audit_lines_from_before_groups_read_and_complete() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // As an older gitfleet wrote them: one value a key.
        {
            let txn = store.db.begin_write().unwrap();
            {
                let mut intents = txn.open_table(INTENTS).unwrap();
                let mut audit = txn.open_table(AUDIT).unwrap();
                for id in 1..=3u64 {
                    intents
                        .insert(id, to_json(&cancel(&format!("old{id}"))).as_str())
                        .unwrap();
                    audit
                        .insert(id, to_json(&audit_line(&format!("old{id}"))).as_str())
                        .unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let expected: Vec<(u64, String)> = (1..=3).map(|i| (i, format!("old{i}"))).collect();
        assert_eq!(pending_jobs(&store), expected);
        let ids = store
            .record_intents(&[cancel("new4"), cancel("new5")])
            .unwrap();
        assert_eq!(ids, [4, 5]);
        store
            .commit(&Batch {
                done_intents: vec![1, 2, 4],
                audit: (4..=100).map(|i| audit_line(&format!("new{i}"))).collect(),
                ..Batch::default()
            })
            .unwrap();
        assert_eq!(
            pending_jobs(&store),
            [(3, "old3".to_string()), (5, "new5".to_string())]
        );
        let log = store.audit(0).unwrap();
        assert_eq!(log.len(), 100);
        for (n, (id, entry)) in log.iter().enumerate() {
            let n = n as u64 + 1;
            assert_eq!(*id, n);
            let prefix = if n <= 3 { "old" } else { "new" };
            assert_eq!(entry.what, format!("{prefix}{n}"));
        }
        drop(store);
        assert_eq!(Store::read_audit(dir.path()).unwrap(), log);
    }

    #[test]
    fn audit_reads_from_any_line_and_its_tail_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut n = 0;
        // Groups of every size around the value's limit.
        for size in [
            1,
            3,
            AUDIT_GROUP - 1,
            AUDIT_GROUP,
            AUDIT_GROUP + 1,
            2 * AUDIT_GROUP + 5,
            1,
        ] {
            let lines = (0..size)
                .map(|_| {
                    n += 1;
                    audit_line(&format!("l{n}"))
                })
                .collect();
            store
                .commit(&Batch {
                    audit: lines,
                    ..Batch::default()
                })
                .unwrap();
        }
        let all: Vec<(u64, String)> = (1..=n).map(|i| (i as u64, format!("l{i}"))).collect();
        let whats = |log: Vec<(u64, AuditEntry)>| -> Vec<(u64, String)> {
            log.into_iter().map(|(id, e)| (id, e.what)).collect()
        };
        assert_eq!(whats(store.audit(0).unwrap()), all);
        for from in 0..=(n as u64 + 2) {
            let expected: Vec<_> = all.iter().filter(|(id, _)| *id >= from).cloned().collect();
            assert_eq!(whats(store.audit(from).unwrap()), expected, "from {from}");
        }
        for tail in [0, 1, 2, 5, AUDIT_GROUP, 3 * AUDIT_GROUP, n + 4] {
            let expected: Vec<_> = all.iter().rev().take(tail).cloned().collect();
            assert_eq!(
                whats(store.audit_tail(tail).unwrap()),
                expected,
                "tail {tail}"
            );
        }
    }

    #[test]
    fn held_executor_writes_land_with_the_next_commit_or_not_at_all() {
        use exec::KeyValue;
        let dir = tempfile::tempdir().unwrap();
        let value = |v: &str| Some(v.to_string());
        {
            let store = Store::open(dir.path()).unwrap();
            store.write(&[("k/a".into(), value("1"))]).unwrap();
            assert_eq!(store.executor_values().unwrap().len(), 1, "written at once");

            store.hold_executor_writes();
            store
                .write(&[("k/b".into(), value("2")), ("k/a".into(), None)])
                .unwrap();
            let seen: Vec<String> = store.entries("k/").unwrap().into_keys().collect();
            assert_eq!(seen, ["k/b"], "reads see held writes");
            let stored: Vec<String> = store.executor_values().unwrap().into_keys().collect();
            assert_eq!(stored, ["k/a"], "not on disk yet");

            // An outcome's commit takes them along.
            store
                .commit(&Batch {
                    clock: Some(t("2026-11-21T10:00:00Z")),
                    ..Batch::default()
                })
                .unwrap();
            let stored: Vec<String> = store.executor_values().unwrap().into_keys().collect();
            assert_eq!(stored, ["k/b"]);

            // A crash before the next commit loses what is held.
            store.write(&[("k/c".into(), value("3"))]).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let stored: Vec<String> = store.executor_values().unwrap().into_keys().collect();
        assert_eq!(stored, ["k/b"], "lost with the outcomes it belonged to");

        // Released: what is held is written, and later writes go straight on.
        store.hold_executor_writes();
        store.write(&[("k/c".into(), value("3"))]).unwrap();
        store.release_executor_writes().unwrap();
        store.write(&[("k/d".into(), value("4"))]).unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        let stored: Vec<String> = store.executor_values().unwrap().into_keys().collect();
        assert_eq!(stored, ["k/b", "k/c", "k/d"]);
    }

    /// Set in a child process of the test binary: the state directory
    /// that [`crash_child`] writes to before it aborts.
    const CRASH_DIR: &str = "GITFLEET_TEST_CRASH_DIR";

    /// Not a test of its own: run by [`a_crash_loses_deferred_commits_not_durable_ones`]
    /// in a child process, which writes and then dies without closing the
    /// store (as a kill -9 would).
    #[test]
    fn crash_child() {
        let Some(dir) = std::env::var_os(CRASH_DIR) else {
            return;
        };
        let store = Store::open(Path::new(&dir)).unwrap();
        let pending = |job: &str| Batch {
            jobs: vec![JobRecord::new_pending(job, t("2026-11-21T10:00:00Z"))],
            ..Batch::default()
        };
        store.commit(&pending("durable")).unwrap();
        store
            .commit_deferred(&pending("deferred-then-durable"))
            .unwrap();
        assert!(store.has_deferred());
        store.commit(&pending("durable-after")).unwrap();
        assert!(!store.has_deferred(), "put on disk with the durable commit");
        store
            .commit_deferred(&pending("deferred-then-persisted"))
            .unwrap();
        store.persist().unwrap();
        assert!(!store.has_deferred());
        store.commit_deferred(&pending("deferred-lost")).unwrap();
        assert_eq!(store.jobs().unwrap().len(), 5, "read at once");
        std::process::abort();
    }

    #[test]
    fn a_crash_loses_deferred_commits_not_durable_ones() {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "state::tests::crash_child", "--nocapture"])
            .env(CRASH_DIR, dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "the child died");
        let store = Store::open(dir.path()).unwrap();
        let jobs: Vec<String> = store.jobs().unwrap().into_keys().collect();
        assert_eq!(
            jobs,
            [
                "deferred-then-durable",
                "deferred-then-persisted",
                "durable",
                "durable-after"
            ]
        );
    }

    /// Set in a child process of the test binary: the state directory, new,
    /// that [`fresh_crash_child`] writes to before it aborts.
    const FRESH_CRASH_DIR: &str = "GITFLEET_TEST_FRESH_CRASH_DIR";

    fn loading_mark(revision: &str) -> Batch {
        Batch {
            revisions: Some(Revisions {
                loading: Some(Loading {
                    revision: revision.into(),
                    interrupted: 0,
                }),
                ..Revisions::default()
            }),
            ..Batch::default()
        }
    }

    /// Not a test of its own: run by [`a_crashed_new_state_goes_on_in_the_same_boot`]
    /// in a child process, which writes to a new state (nothing synced)
    /// and then dies without closing it.
    #[test]
    fn fresh_crash_child() {
        let Some(dir) = std::env::var_os(FRESH_CRASH_DIR) else {
            return;
        };
        let store = Store::open(Path::new(&dir)).unwrap();
        assert!(store.is_fresh());
        store.commit_unsynced_if_new(&loading_mark("abc")).unwrap();
        store
            .commit_deferred(&Batch {
                clock: Some(t("2026-11-21T10:00:00Z")),
                ..Batch::default()
            })
            .unwrap();
        assert!(store.is_fresh(), "nothing synced yet");
        std::process::abort();
    }

    #[test]
    fn a_crashed_new_state_goes_on_in_the_same_boot() {
        if fresh::boot_id().is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "state::tests::fresh_crash_child", "--nocapture"])
            .env(FRESH_CRASH_DIR, dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "the child died");
        assert!(!dir.path().join(DB_FILE).exists(), "never synced");
        assert!(!dir.path().join(MARKER_FILE).exists());
        assert_eq!(fresh::temps(dir.path()).unwrap().len(), 1);
        // The process died, the kernel kept its writes: the loading mark
        // is there (the crash counts against the revision), the deferred
        // clock is not.
        let store = Store::open(dir.path()).unwrap();
        assert!(store.is_fresh());
        let loading = store.revisions().unwrap().loading.unwrap();
        assert_eq!(loading.revision, "abc");
        assert_eq!(store.clock().unwrap(), None);
    }

    #[test]
    fn a_new_state_is_synced_and_named_at_its_first_durable_commit() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(DB_FILE);
        let store = Store::open(dir.path()).unwrap();
        if fresh::boot_id().is_none() {
            assert!(!store.is_fresh());
            return;
        }
        assert!(store.is_fresh());
        assert!(!db.exists() && !dir.path().join(MARKER_FILE).exists());
        store.commit_unsynced_if_new(&loading_mark("abc")).unwrap();
        store
            .commit_deferred(&Batch {
                clock: Some(t("2026-11-21T10:00:00Z")),
                ..Batch::default()
            })
            .unwrap();
        assert!(store.is_fresh() && !db.exists());
        let ids = store.record_intents(&[cancel("a")]).unwrap();
        assert!(!store.is_fresh(), "intents are synced");
        assert!(db.exists() && dir.path().join(MARKER_FILE).exists());
        assert!(fresh::temps(dir.path()).unwrap().is_empty());
        // Synced from now on, as any state.
        store.commit_unsynced_if_new(&loading_mark("def")).unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(!store.is_fresh());
        assert_eq!(store.clock().unwrap(), Some(t("2026-11-21T10:00:00Z")));
        assert_eq!(store.revisions().unwrap().loading.unwrap().revision, "def");
        let pending: Vec<u64> = store
            .pending_intents()
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(pending, ids);
    }

    #[test]
    fn a_new_database_left_half_made_in_this_boot_starts_anew() {
        let Some(boot) = fresh::boot_id() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        // A process died while redb made the file: its length set, the
        // header without redb's magic yet.
        let temp = fresh::temp_path(dir.path(), &boot);
        std::fs::write(&temp, vec![0u8; 4096]).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.is_fresh());
        assert_eq!(store.revisions().unwrap(), Revisions::default());
        drop(store);
        assert!(dir.path().join(DB_FILE).exists() && !temp.exists());
        // Its magic there, it is opened as redb made it (not read here
        // otherwise): a file that is no database is an error, not a state.
        let other = tempfile::tempdir().unwrap();
        let temp = fresh::temp_path(other.path(), &boot);
        let mut bytes = REDB_MAGIC_FOR_TESTS.to_vec();
        bytes.resize(4096, 0xff);
        std::fs::write(&temp, bytes).unwrap();
        let err = Store::open(other.path()).unwrap_err();
        assert!(matches!(err, StateError::Database { .. }), "{err}");
    }

    const REDB_MAGIC_FOR_TESTS: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

    #[test]
    fn a_new_state_closed_unsynced_is_synced_and_named_then() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.commit_unsynced_if_new(&loading_mark("abc")).unwrap();
        }
        assert!(dir.path().join(DB_FILE).exists());
        assert!(dir.path().join(MARKER_FILE).exists());
        assert!(fresh::temps(dir.path()).unwrap().is_empty());
        let store = Store::open(dir.path()).unwrap();
        assert!(!store.is_fresh());
        assert_eq!(store.revisions().unwrap().loading.unwrap().revision, "abc");
    }

    #[test]
    fn another_boots_unsynced_state_is_removed_never_read() {
        if fresh::boot_id().is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // Torn by a power loss: not even a redb file. The mirror was made
        // while it was new; without the marker that is no earlier state.
        let torn = fresh::temp_path(dir.path(), "00000000-0000-0000-0000-000000000000");
        std::fs::write(&torn, vec![0u8; 8192]).unwrap();
        std::fs::create_dir(dir.path().join("repo.git")).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.is_fresh());
        assert!(!torn.exists());
        assert_eq!(store.revisions().unwrap(), Revisions::default());
        assert!(store.jobs().unwrap().is_empty());
        drop(store);

        // The marker is written only once a database is on disk: with it,
        // a missing database is lost, whatever temporary file lies there.
        std::fs::remove_file(dir.path().join(DB_FILE)).unwrap();
        std::fs::write(&torn, vec![0u8; 8192]).unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(&err, StateError::Lost { evidence, .. } if evidence == MARKER_FILE),
            "{err}"
        );
        assert!(torn.exists(), "left as found");
    }

    #[test]
    fn deferred_commits_land_when_the_store_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store
                .commit_deferred(&Batch {
                    clock: Some(t("2026-11-21T10:00:00Z")),
                    ..Batch::default()
                })
                .unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.clock().unwrap(), Some(t("2026-11-21T10:00:00Z")));
        assert!(
            !store.has_deferred(),
            "an existing state opens with nothing deferred"
        );
    }

    #[test]
    fn a_lost_or_emptied_database_is_refused_not_recreated() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path()).unwrap());
        assert!(dir.path().join(MARKER_FILE).exists());
        let db = dir.path().join(DB_FILE);

        std::fs::write(&db, b"").unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                StateError::Lost {
                    how: "is empty",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "left as found");

        std::fs::remove_file(&db).unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                StateError::Lost {
                    how: "is missing",
                    ..
                }
            ),
            "{err}"
        );
        assert!(!db.exists(), "nothing created");
        assert!(err.to_string().contains("remove"), "{err}");
    }

    #[test]
    fn a_state_from_before_the_marker_is_recognised_by_its_records() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("local")).unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(&err, StateError::Lost { evidence, .. } if evidence == "local"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_or_new_directory_starts_a_new_state() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path()).unwrap());
        drop(Store::open(&dir.path().join("fresh/nested")).unwrap());
        // A crash while the very first database was being created leaves an
        // empty file and no marker: nothing was recorded yet.
        let first = dir.path().join("first");
        std::fs::create_dir(&first).unwrap();
        std::fs::write(first.join(DB_FILE), b"").unwrap();
        drop(Store::open(&first).unwrap());
        assert!(first.join(MARKER_FILE).exists());
    }

    #[test]
    fn a_second_process_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Store::open(dir.path()).unwrap();
        match Store::open(dir.path()) {
            Err(StateError::Locked { .. }) => {}
            other => panic!("expected Locked, got {other:?}"),
        }
    }

    #[test]
    fn audit_is_append_only_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for what in ["place", "preempt", "cancel"] {
            store
                .commit(&Batch {
                    audit: vec![AuditEntry {
                        time: t("2026-11-21T10:00:00Z"),
                        revision: "r".into(),
                        what: what.into(),
                        subject: "j".into(),
                        detail: String::new(),
                    }],
                    ..Batch::default()
                })
                .unwrap();
        }
        let log = store.audit(0).unwrap();
        let whats: Vec<&str> = log.iter().map(|(_, e)| e.what.as_str()).collect();
        assert_eq!(whats, ["place", "preempt", "cancel"]);
        assert_eq!(store.audit(log[1].0).unwrap().len(), 2);
    }
}
