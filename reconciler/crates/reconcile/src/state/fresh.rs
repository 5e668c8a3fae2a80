//! A new state database before its first synced commit ("fresh").
//!
//! Nothing in a new database needs the disk until its first commit that
//! must survive a power loss (the first durable commit but the loading
//! mark's, [`super::Store::commit_unsynced_if_new`]): until then it lives
//! under a temporary name that carries the machine's boot id
//! (`state.redb.new-<boot id>`), and redb's syncs are skipped ([`Switch`]).
//! Its writes still reach the file one by one, so a crash of the process
//! keeps them as redb wrote them, and the next open in the same boot goes
//! on with it. A power loss may leave it torn, but also changes the boot
//! id: a temporary file of another boot is removed, never read, and the
//! state starts anew (it held nothing an action depends on). The first
//! synced commit puts everything on disk; then the file is renamed to
//! `state.redb`, the directory synced and the marker written.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::StorageBackend;
use redb::backends::FileBackend;

use super::DB_FILE;

/// The name of a new database's file before its first synced commit.
const TEMP_PREFIX: &str = "state.redb.new-";

/// Where the kernel tells this boot's id (Linux).
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// This boot's id, or `None` where the system tells none (then no new
/// database is kept unsynced).
pub(super) fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string(BOOT_ID).ok()?;
    let id = id.trim();
    let plain =
        !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    plain.then(|| id.to_string())
}

/// The temporary file of a new database made in boot `boot`.
pub(super) fn temp_path(dir: &Path, boot: &str) -> PathBuf {
    dir.join(format!("{TEMP_PREFIX}{boot}"))
}

/// The temporary files of new databases in `dir` (any boot's).
pub(super) fn temps(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(TEMP_PREFIX))
        {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// The first bytes of every redb file, written once redb has made it
/// (before its first commit).
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// Whether `temp` is a file that redb began to make and never finished:
/// not empty, without redb's magic bytes.
pub(super) fn unfinished_init(temp: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let mut file = match std::fs::File::open(temp) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut head = Vec::with_capacity(REDB_MAGIC.len());
    file.by_ref()
        .take(REDB_MAGIC.len() as u64)
        .read_to_end(&mut head)?;
    Ok(!head.is_empty() && head != REDB_MAGIC)
}

/// A new database's file, kept unsynced until [`Fresh::settle`].
#[derive(Debug)]
pub(super) struct Fresh {
    /// Its temporary name.
    pub(super) temp: PathBuf,
    /// On: redb's syncs are skipped.
    pub(super) skip: Arc<AtomicBool>,
}

impl Fresh {
    /// From now on redb's syncs reach the disk (the next one takes every
    /// write before it along).
    pub(super) fn sync_from_now(&self) {
        self.skip.store(false, Ordering::SeqCst);
    }

    /// After a synced commit: the file takes its name in `dir`, and the
    /// directory is synced so that the name lasts.
    pub(super) fn settle(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::rename(&self.temp, dir.join(DB_FILE))?;
        std::fs::File::open(dir)?.sync_all()
    }
}

/// A file backend whose syncs can be skipped (while [`Fresh`]).
#[derive(Debug)]
pub(super) struct Switch {
    inner: FileBackend,
    skip: Arc<AtomicBool>,
}

impl Switch {
    /// `file`, its syncs skipped while `skip` is on.
    pub(super) fn new(
        file: std::fs::File,
        skip: Arc<AtomicBool>,
    ) -> Result<Self, redb::DatabaseError> {
        Ok(Switch {
            inner: FileBackend::new(file)?,
            skip,
        })
    }
}

impl StorageBackend for Switch {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        if self.skip.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }

    fn try_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.query_lock_range(start, end)
    }
}
