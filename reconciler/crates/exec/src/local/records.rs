//! What the local executor keeps on disk, and how it is written.
//!
//! Per job, in `<dir>/<job>/`:
//! - `pids.json` ([`JobFile`]): the start under way (attempt, run) and each
//!   replica's intent (rank, node, GPUs), then its supervisor's pid once
//!   known, how it ended, and the stop's deadline;
//! - `<run>/<rank>.claim` ([`Claim`]): created once, atomically, by the
//!   replica's supervisor before it starts the replica (or by the executor
//!   as a tombstone when it gives the replica up), so that a replica of a
//!   run starts at most once however often its start is tried;
//! - `<run>/<rank>.exit` ([`ExitRecord`]): the replica's exit code, written
//!   atomically by its supervisor;
//! - `<rank>.out`, `<rank>.err`: the replica's output, appended.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use model::observed::{NodeGpus, Timestamp};

/// The file in a job's directory that records its processes.
pub const PIDS_FILE: &str = "pids.json";

/// One replica, as recorded: its intent first, its process once known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Replica {
    /// Its index in the placement (`RANK`).
    pub rank: u32,
    /// The node and GPUs it was placed on.
    pub node: String,
    pub gpus: Vec<u32>,
    /// Its supervisor's pid (its process group), once known; `None` while
    /// only the intent is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    /// Set once it is seen gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ReplicaExit>,
}

impl Replica {
    /// The intent to start rank `rank` on `part`.
    pub fn intent(rank: u32, part: &NodeGpus) -> Replica {
        Replica {
            rank,
            node: part.node.clone(),
            gpus: part.gpus.clone(),
            pid: None,
            start_time: None,
            exit: None,
        }
    }

    /// Its process, when known.
    pub fn process(&self) -> Option<(i32, u64)> {
        self.pid.zip(self.start_time)
    }
}

/// How a replica ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReplicaExit {
    /// When it was seen gone (the reconciler's clock).
    pub at: Timestamp,
    /// Its exit code (128 + signal number for a signal); `None` when it
    /// cannot be known (a replica recorded by a gitfleet without
    /// supervisors, or one given up before it started).
    #[serde(default)]
    pub code: Option<i32>,
}

/// A stop under way.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StopState {
    /// When it was asked for.
    pub since: Timestamp,
    /// When SIGKILL follows.
    pub deadline: Timestamp,
    /// SIGTERM was sent.
    #[serde(default)]
    pub signalled: bool,
    /// SIGKILL was sent.
    #[serde(default)]
    pub killed: bool,
}

/// `<dir>/<job>/pids.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JobFile {
    pub job: String,
    /// Which placement of the job this is ([`crate::ActionContext::attempt`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<String>,
    /// This start's directory under the job's (claims and exit files);
    /// `None` in a record written by a gitfleet without supervisors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub master_port: u16,
    pub replicas: Vec<Replica>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopState>,
}

impl JobFile {
    pub fn alive(&self) -> impl Iterator<Item = &Replica> {
        self.replicas.iter().filter(|r| r.exit.is_none())
    }

    /// Whether it records every replica of `placement`, where it is placed.
    pub fn same_placement(&self, placement: &[NodeGpus]) -> bool {
        self.replicas.len() == placement.len()
            && self.replicas.iter().all(|r| {
                placement
                    .get(r.rank as usize)
                    .is_some_and(|p| p.node == r.node && p.gpus == r.gpus)
            })
    }
}

/// Who holds a replica's claim: the supervisor that starts it, or nobody
/// ever (a tombstone: the executor gave the replica up before it started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Claim {
    /// This supervisor starts the replica.
    #[serde(rename_all = "camelCase")]
    Process {
        /// The supervisor's pid (the replica's process group).
        pid: i32,
        /// Field 22 of its `/proc/<pid>/stat`.
        start_time: u64,
    },
    /// Given up: no supervisor may start the replica.
    Abandoned,
}

/// How a replica ended, as its supervisor writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitRecord {
    /// The exit code; 128 + the signal's number when a signal ended it.
    pub code: i32,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// The claim of rank `rank` in a run directory.
pub(super) fn claim_path(run_dir: &Path, rank: u32) -> PathBuf {
    run_dir.join(format!("{rank}.claim"))
}

/// The exit file of rank `rank` in a run directory.
pub(super) fn exit_path(run_dir: &Path, rank: u32) -> PathBuf {
    run_dir.join(format!("{rank}.exit"))
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Writes `bytes` to `path` atomically and durably (temporary file, fsync,
/// rename, fsync of the directory).
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = with_suffix(path, ".tmp");
    write_synced(&tmp, bytes)?;
    fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// Creates `path` with `bytes` unless it exists, atomically (a complete
/// file appears or nothing does) and durably; returns whether it was
/// created. Fails when the directory is gone.
pub(super) fn create_exclusive(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let tmp = with_suffix(path, &format!(".{}.tmp", std::process::id()));
    write_synced(&tmp, bytes)?;
    // link(2) fails if the name exists: of several creators one wins.
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => sync_parent(path).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads a JSON file; `None` when it does not exist.
fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<Option<T>> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads a claim; `None` when nobody claimed the replica yet.
pub(super) fn read_claim(path: &Path) -> io::Result<Option<Claim>> {
    read_json(path)
}

/// Reads an exit file; `None` when none was written.
pub(super) fn read_exit(path: &Path) -> io::Result<Option<ExitRecord>> {
    read_json(path)
}

/// Serializes to JSON.
pub(super) fn to_json<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn one_creator_wins_and_the_file_is_complete() {
        let dir = tempfile::tempdir().unwrap();
        let path = claim_path(dir.path(), 3);
        let first = Claim::Process {
            pid: 42,
            start_time: 7,
        };
        assert!(create_exclusive(&path, &to_json(&first).unwrap()).unwrap());
        assert!(!create_exclusive(&path, &to_json(&Claim::Abandoned).unwrap()).unwrap());
        assert_eq!(read_claim(&path).unwrap(), Some(first));
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        // A removed run directory cannot be claimed in.
        let gone = claim_path(&dir.path().join("gone"), 0);
        assert!(create_exclusive(&gone, b"{}").is_err());
    }

    #[test]
    fn records_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = exit_path(dir.path(), 0);
        assert_eq!(read_exit(&path).unwrap(), None);
        let record = ExitRecord {
            code: 137,
            signal: Some(9),
        };
        write_atomic(&path, &to_json(&record).unwrap()).unwrap();
        assert_eq!(read_exit(&path).unwrap(), Some(record));
        assert_eq!(
            String::from_utf8(to_json(&Claim::Abandoned).unwrap()).unwrap(),
            r#"{"kind":"abandoned"}"#
        );
        assert_eq!(
            String::from_utf8(
                to_json(&Claim::Process {
                    pid: 1,
                    start_time: 2
                })
                .unwrap()
            )
            .unwrap(),
            r#"{"kind":"process","pid":1,"startTime":2}"#
        );
    }
}
