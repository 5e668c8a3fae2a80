//! The `job_groups` table: job records written together, up to [`GROUP`] a
//! value, instead of one `jobs` entry each (a burst notes thousands of
//! pending jobs and records as many placements: one B-tree insert each was
//! most of what writing them cost).
//!
//! A value is `~g` and then, for each record, its job's name and the
//! record's value ([`super::compact`]: compact or JSON), each as its length
//! in bytes, `:` and the text. Every job is stored in one place: its own
//! `jobs` entry (written by an older gitfleet) or one group. Writing a job
//! takes it out of where it was (its `jobs` entry removed, or its group
//! written again without it; a group left less than half full moves the
//! rest of its records into the new groups) and adds it to the new groups
//! of the transaction, keyed by sequence. So reading every job is reading
//! both tables, with no record to skip. Where each job is ([`Index`]) is
//! read from the tables at the first write of a store and kept in step
//! with its writes.

use std::collections::BTreeSet;

use redb::{ReadableTable, Table, TableDefinition};
use rustc_hash::FxHashMap;

use super::compact;
use super::records::JobRecord;

/// Group sequence → the records of a group.
pub(super) const JOB_GROUPS: TableDefinition<u64, &str> = TableDefinition::new("job_groups");
/// The most records one group holds.
pub(super) const GROUP: usize = 64;
/// Opens every group's value.
const MARK: &str = "~g";

/// Why job records could not be read or written.
#[derive(Debug)]
pub(super) enum GroupError {
    /// redb failed (its message).
    Storage(String),
    /// A group's value does not parse.
    Corrupt {
        /// The group's key.
        key: u64,
    },
}

impl From<redb::StorageError> for GroupError {
    fn from(e: redb::StorageError) -> Self {
        GroupError::Storage(e.to_string())
    }
}

/// Where a job's record is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Its own `jobs` entry (an older gitfleet's).
    Own,
    /// The group of this key.
    Group(u64),
}

/// Where every stored job record is.
#[derive(Debug, Default)]
pub(super) struct Index {
    // Fx: a burst adds thousands of names, and the state is ours.
    at: FxHashMap<String, Place>,
}

impl Index {
    /// Reads where every job is from the tables.
    pub(super) fn build(
        jobs: &Table<'_, &str, &str>,
        groups: &Table<'_, u64, &str>,
    ) -> Result<Index, GroupError> {
        let mut at = FxHashMap::default();
        for entry in jobs.iter()? {
            let (name, _) = entry?;
            at.insert(name.value().to_string(), Place::Own);
        }
        for entry in groups.iter()? {
            let (key, value) = entry?;
            let key = key.value();
            for (name, _) in entries(value.value()).ok_or(GroupError::Corrupt { key })? {
                at.insert(name.to_string(), Place::Group(key));
            }
        }
        Ok(Index { at })
    }
}

/// The records of a group's value: (job, value) in order; `None` when it
/// does not parse.
pub(super) fn entries(text: &str) -> Option<Vec<(&str, &str)>> {
    let mut rest = text.strip_prefix(MARK)?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (name, after) = field(rest)?;
        let (value, after) = field(after)?;
        out.push((name, value));
        rest = after;
    }
    Some(out)
}

/// A length-prefixed text at the start of `text`, and what follows it.
fn field(text: &str) -> Option<(&str, &str)> {
    let (len, rest) = text.split_once(':')?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let len: usize = len.parse().ok()?;
    if !rest.is_char_boundary(len) {
        return None;
    }
    Some(rest.split_at(len))
}

fn push_entry(name: &str, value: &str, out: &mut String) {
    for text in [name, value] {
        super::compact::number(text.len() as u64, out);
        out.push(':');
        out.push_str(text);
    }
}

/// The new groups of one transaction, filled in order.
struct Writer {
    key: u64,
    text: String,
    count: usize,
}

impl Writer {
    fn add(
        &mut self,
        name: String,
        value: &str,
        groups: &mut Table<'_, u64, &str>,
        index: &mut Index,
    ) -> Result<(), GroupError> {
        if self.count == 0 {
            self.text.clear();
            self.text.push_str(MARK);
        }
        push_entry(&name, value, &mut self.text);
        index.at.insert(name, Place::Group(self.key));
        self.count += 1;
        if self.count == GROUP {
            self.finish(groups)?;
        }
        Ok(())
    }

    fn finish(&mut self, groups: &mut Table<'_, u64, &str>) -> Result<(), GroupError> {
        if self.count > 0 {
            groups.insert(self.key, self.text.as_str())?;
            self.key += 1;
            self.count = 0;
        }
        Ok(())
    }
}

/// Writes `records` (sorted by job, one each) and removes the jobs
/// `removed`, in the tables of one transaction, keeping `index` in step.
/// `buf` is a reused buffer. On an error the transaction must not be
/// committed and `index` is no longer right.
pub(super) fn write(
    jobs: &mut Table<'_, &str, &str>,
    groups: &mut Table<'_, u64, &str>,
    index: &mut Index,
    records: &[&JobRecord],
    removed: &[String],
    buf: &mut String,
) -> Result<(), GroupError> {
    // Every job written or removed leaves where it is; the names of those
    // written are kept for their new place.
    let mut touched = BTreeSet::new();
    let mut names = Vec::with_capacity(records.len());
    index.at.reserve(records.len());
    let changing = records
        .iter()
        .map(|r| (r.job.as_str(), true))
        .chain(removed.iter().map(|n| (n.as_str(), false)));
    for (job, written) in changing {
        let (name, place) = match index.at.remove_entry(job) {
            Some((name, place)) => (name, Some(place)),
            None => (job.to_string(), None),
        };
        match place {
            Some(Place::Own) => {
                jobs.remove(job)?;
            }
            Some(Place::Group(key)) => {
                touched.insert(key);
            }
            None => {}
        }
        if written {
            names.push(name);
        }
    }
    // Groups that lost records: written again without them, or, left less
    // than half full, emptied into the new groups.
    let mut moved: Vec<(String, String)> = Vec::new();
    let mut text = String::new();
    for key in touched {
        let Some(value) = groups.get(key)?.map(|v| v.value().to_string()) else {
            continue;
        };
        let all = entries(&value).ok_or(GroupError::Corrupt { key })?;
        let kept: Vec<(&str, &str)> = all
            .into_iter()
            .filter(|(name, _)| index.at.get(*name) == Some(&Place::Group(key)))
            .collect();
        if kept.len() * 2 < GROUP {
            groups.remove(key)?;
            moved.extend(kept.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        } else {
            text.clear();
            text.push_str(MARK);
            for (name, value) in kept {
                push_entry(name, value, &mut text);
            }
            groups.insert(key, text.as_str())?;
        }
    }
    let mut writer = Writer {
        key: groups.last()?.map_or(1, |(k, _)| k.value() + 1),
        text,
        count: 0,
    };
    for (record, name) in records.iter().zip(names) {
        compact::encode(record, buf);
        writer.add(name, buf, groups, index)?;
    }
    for (name, value) in moved {
        writer.add(name, &value, groups, index)?;
    }
    writer.finish(groups)
}

/// Every record of a group's value, by job (`Err`: the group's value or a
/// record does not parse).
pub(super) fn decode(text: &str, out: &mut Vec<(String, JobRecord)>) -> Result<(), String> {
    let entries = entries(text).ok_or_else(|| "not a group of job records".to_string())?;
    for (name, value) in entries {
        out.push((name.to_string(), compact::decode(value)?));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Batch, JobRecord, Phase, Store, to_json};
    use model::observed::Timestamp;
    use proptest::prelude::*;
    use redb::ReadableDatabase;
    use std::collections::BTreeMap;
    use std::path::Path;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn pending(job: &str) -> JobRecord {
        JobRecord::new_pending(job, t("2026-11-21T10:00:00Z"))
    }

    fn running(job: &str) -> JobRecord {
        let mut record = pending(job);
        record.phase = Phase::Running;
        record.started = Some(t("2026-11-21T10:01:00Z"));
        record
    }

    fn write(store: &Store, jobs: Vec<JobRecord>, remove: &[&str]) {
        store
            .commit(&Batch {
                jobs,
                remove_jobs: remove.iter().map(|s| s.to_string()).collect(),
                ..Batch::default()
            })
            .unwrap();
    }

    /// Every (table, key, job) where a record is stored.
    fn places(store: &Store) -> Vec<(&'static str, u64, String)> {
        let txn = store.db.begin_read().unwrap();
        let mut out = Vec::new();
        for entry in txn.open_table(super::super::JOBS).unwrap().iter().unwrap() {
            out.push(("jobs", 0, entry.unwrap().0.value().to_string()));
        }
        for entry in txn.open_table(JOB_GROUPS).unwrap().iter().unwrap() {
            let (key, value) = entry.unwrap();
            for (name, _) in entries(value.value()).unwrap() {
                out.push(("job_groups", key.value(), name.to_string()));
            }
        }
        out
    }

    /// Writes `record` as an older gitfleet did: its own `jobs` entry, JSON.
    fn write_old(store: &Store, record: &JobRecord) {
        let txn = store.db.begin_write().unwrap();
        txn.open_table(super::super::JOBS)
            .unwrap()
            .insert(record.job.as_str(), to_json(record).as_str())
            .unwrap();
        txn.commit().unwrap();
    }

    #[test]
    fn records_are_written_many_a_group_and_each_is_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let names: Vec<String> = (0..200).map(|i| format!("job-{i:03}")).collect();
        write(&store, names.iter().map(|n| pending(n)).collect(), &[]);
        let keys: BTreeSet<u64> = places(&store).iter().map(|p| p.1).collect();
        assert_eq!(keys.len(), 4, "200 records in groups of 64");
        // One job of the first group changes: that group is written again
        // without it (63 left), the job goes to a new group.
        write(&store, vec![running("job-000")], &[]);
        let at = places(&store);
        assert_eq!(at.len(), 200, "each job stored once: {at:?}");
        let first: Vec<_> = at.iter().filter(|p| p.1 == 1).collect();
        assert_eq!(first.len(), 63);
        assert!(at.contains(&("job_groups", 5, "job-000".to_string())));
        // 40 jobs of the second group leave: the 24 left move to a new group.
        let gone: Vec<&str> = names[64..104].iter().map(String::as_str).collect();
        write(&store, Vec::new(), &gone);
        let at = places(&store);
        assert_eq!(at.len(), 160);
        assert!(at.iter().all(|p| p.1 != 2), "the second group is gone");
        assert!(at.contains(&("job_groups", 6, "job-127".to_string())));
        let jobs = store.jobs().unwrap();
        assert_eq!(jobs.len(), 160);
        assert_eq!(jobs["job-000"], running("job-000"));
        assert_eq!(jobs["job-199"], pending("job-199"));
        assert!(!jobs.contains_key("job-064"));
        // The same after a reopen, where the index is read from the tables.
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        write(&store, vec![running("job-127")], &["job-199"]);
        let jobs = store.jobs().unwrap();
        assert_eq!(jobs.len(), 159);
        assert_eq!(jobs["job-127"], running("job-127"));
        assert_eq!(places(&store).len(), 159);
    }

    #[test]
    fn an_older_states_records_move_into_groups_when_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_old(&store, &pending("old-a"));
        write_old(&store, &pending("old-b"));
        write_old(&store, &pending("old-c"));
        write(&store, vec![running("old-a"), pending("new")], &["old-b"]);
        let at = places(&store);
        assert_eq!(
            at,
            [
                ("jobs", 0, "old-c".to_string()),
                ("job_groups", 1, "new".to_string()),
                ("job_groups", 1, "old-a".to_string()),
            ]
        );
        let jobs = store.jobs().unwrap();
        assert_eq!(jobs.keys().collect::<Vec<_>>(), ["new", "old-a", "old-c"]);
        assert_eq!(jobs["old-a"], running("old-a"));
        assert_eq!(jobs["old-c"], pending("old-c"));
    }

    #[test]
    fn a_batch_writing_and_removing_a_job_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write(&store, vec![pending("a"), pending("b")], &[]);
        write(
            &store,
            vec![running("a"), running("a"), pending("c")],
            &["a", "zz"],
        );
        let jobs = store.jobs().unwrap();
        assert_eq!(jobs.keys().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(places(&store).len(), 2);
    }

    #[test]
    fn a_damaged_group_is_reported_not_guessed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        {
            let txn = store.db.begin_write().unwrap();
            txn.open_table(JOB_GROUPS)
                .unwrap()
                .insert(7, "~g3:abc")
                .unwrap();
            txn.commit().unwrap();
        }
        let e = store.jobs().unwrap_err().to_string();
        assert!(e.contains("job_groups") && e.contains('7'), "{e}");
        let e = store
            .commit(&Batch {
                jobs: vec![pending("a")],
                ..Batch::default()
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("job_groups"), "{e}");
    }

    const CRASH_DIR: &str = "GITFLEET_TEST_GROUPS_CRASH_DIR";

    /// Run by [`a_crash_keeps_the_groups_of_durable_commits`]: durable
    /// commits, then deferred ones that write groups again, then an abort.
    #[test]
    fn crash_child() {
        let Some(dir) = std::env::var_os(CRASH_DIR) else {
            return;
        };
        let store = Store::open(Path::new(&dir)).unwrap();
        write(
            &store,
            (0..150).map(|i| pending(&format!("j{i:03}"))).collect(),
            &[],
        );
        // Durable: the first group loses 40 (moved), one job leaves.
        write(
            &store,
            (0..40).map(|i| running(&format!("j{i:03}"))).collect(),
            &["j149"],
        );
        // Deferred, lost: more of every group, and removals.
        store
            .commit_deferred(&Batch {
                jobs: (0..150)
                    .step_by(2)
                    .map(|i| running(&format!("j{i:03}")))
                    .collect(),
                remove_jobs: (100..140).map(|i| format!("j{i:03}")).collect(),
                ..Batch::default()
            })
            .unwrap();
        assert_eq!(store.jobs().unwrap().len(), 109, "read at once");
        std::process::abort();
    }

    #[test]
    fn a_crash_keeps_the_groups_of_durable_commits() {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "state::job_groups::tests::crash_child",
                "--nocapture",
            ])
            .env(CRASH_DIR, dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "the child died");
        let store = Store::open(dir.path()).unwrap();
        let jobs = store.jobs().unwrap();
        let mut expected = BTreeMap::new();
        for i in 0..149 {
            let name = format!("j{i:03}");
            let record = if i < 40 {
                running(&name)
            } else {
                pending(&name)
            };
            expected.insert(name, record);
        }
        assert_eq!(jobs, expected);
        assert_eq!(places(&store).len(), 149, "each job stored once");
        // And it goes on from there.
        write(&store, vec![running("j100")], &["j000"]);
        assert_eq!(store.jobs().unwrap().len(), 148);
        assert_eq!(places(&store).len(), 148);
    }

    /// A step of [`groups_match_a_map_of_records`].
    #[derive(Debug, Clone)]
    enum Step {
        /// Records for these jobs (running when the flag says so), and
        /// these jobs removed.
        Write(Vec<(u8, bool)>, Vec<u8>),
        /// The store closed and opened again.
        Reopen,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (
                proptest::collection::vec((0u8..160, any::<bool>()), 0..120),
                proptest::collection::vec(0u8..160, 0..30),
            )
                .prop_map(|(w, r)| Step::Write(w, r)),
            1 => Just(Step::Reopen),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Whatever is written and removed, in any batches, with records of
        /// an older state to begin with, the store reads what a map of
        /// records holds, each job stored once.
        #[test]
        fn groups_match_a_map_of_records(
            old in proptest::collection::vec(0u8..160, 0..20),
            steps in proptest::collection::vec(step(), 1..12),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut store = Store::open(dir.path()).unwrap();
            let mut model: BTreeMap<String, JobRecord> = BTreeMap::new();
            for i in old {
                let record = pending(&format!("j{i}"));
                write_old(&store, &record);
                model.insert(record.job.clone(), record);
            }
            for step in steps {
                match step {
                    Step::Reopen => {
                        drop(store);
                        store = Store::open(dir.path()).unwrap();
                    }
                    Step::Write(written, removed) => {
                        let jobs: Vec<JobRecord> = written
                            .iter()
                            .map(|(i, run)| {
                                let name = format!("j{i}");
                                if *run { running(&name) } else { pending(&name) }
                            })
                            .collect();
                        let remove: Vec<String> = removed.iter().map(|i| format!("j{i}")).collect();
                        for record in &jobs {
                            model.insert(record.job.clone(), record.clone());
                        }
                        for name in &remove {
                            model.remove(name);
                        }
                        store
                            .commit(&Batch { jobs, remove_jobs: remove, ..Batch::default() })
                            .unwrap();
                    }
                }
                prop_assert_eq!(&store.jobs().unwrap(), &model);
                let mut stored: Vec<String> = places(&store).into_iter().map(|p| p.2).collect();
                stored.sort();
                prop_assert_eq!(stored, model.keys().cloned().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn entries_round_trip_any_text() {
        let mut text = MARK.to_string();
        let pairs = [("a", "~1\u{1f}a"), ("b:c", "{\"x\":\"1:2\"}"), ("é", "")];
        for (n, v) in pairs {
            push_entry(n, v, &mut text);
        }
        assert_eq!(entries(&text).unwrap(), pairs.to_vec());
        assert_eq!(entries(MARK).unwrap(), Vec::<(&str, &str)>::new());
    }

    #[test]
    fn damaged_groups_do_not_parse() {
        for bad in [
            "",
            "~g1",
            "~g5:a",
            "~g1:a",
            "~g1:a9:b",
            "~gx:a1:b",
            "~g+1:a1:b",
            "~g1:é1:b",
        ] {
            assert!(entries(bad).is_none(), "{bad:?}");
        }
        assert!(entries("~g1:a1:b").is_some());
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 64, 12345, usize::MAX] {
            let mut s = String::new();
            super::compact::number(n as u64, &mut s);
            assert_eq!(s, n.to_string());
        }
    }
}
