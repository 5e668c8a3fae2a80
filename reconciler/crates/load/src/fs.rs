//! Reading a fleet repository from a directory.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::SourceFile;

/// Why a directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The root does not exist or is not readable.
    #[error("cannot read {path}")]
    Io {
        /// The path that failed.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A symbolic link that would be read points out of the repository.
    #[error("{link}: a symbolic link out of the repository (to {target}) is not read")]
    LinkOutside {
        /// The link, as shown.
        link: String,
        /// Where it points.
        target: String,
    },
    /// A file larger than any fleet file should be ([`MAX_FILE_BYTES`]).
    #[error("{path}: {size} bytes, more than the {limit} a fleet file may have; not read")]
    TooLarge {
        /// The path, as shown.
        path: String,
        /// Its size (at least).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The fleet's files together are larger than [`MAX_FLEET_BYTES`].
    #[error(
        "{path}: the fleet's files up to this one hold {size} bytes, more than the {limit} a fleet may have; not read"
    )]
    FleetTooLarge {
        /// The file at which the total passed the limit.
        path: String,
        /// The total up to it.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A `*.yaml` that is not a regular file (a FIFO, socket or device).
    #[error("{path}: not a regular file, not read")]
    NotAFile {
        /// The path, as shown.
        path: String,
    },
}

/// The largest file read (256 MiB): a fleet of 150,000 jobs is 30 MB of
/// YAML in all; a file beyond this is a mistake or an attack, not a fleet.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The most bytes read for one fleet, all files together (256 MiB as well):
/// many files just under [`MAX_FILE_BYTES`] must not add up without bound.
pub const MAX_FLEET_BYTES: u64 = 256 << 20;

/// Every `*.yaml`/`*.yml` file below `root` (dot-directories and dot-files
/// skipped), sorted by path. A single file may be given as `root`.
/// Symbolic links below `root` are not followed, as Git mode does not follow
/// them either (so both modes read the same files): a link inside the
/// repository is skipped (its target is read under its own path), one out of
/// it that would be read (named `*.yaml`, or to a directory) is an error
/// naming it, and so is a `*.yaml` that is not a regular file.
/// Paths in the result are `root` joined with the relative path, as the user
/// wrote `root` (`.` is left out), so messages point at files they can open.
pub fn read_fleet_dir(root: &Path) -> Result<Vec<SourceFile>, ReadError> {
    let io_err = |path: &Path, source| ReadError::Io {
        path: error_path(path),
        source,
    };
    let meta = std::fs::metadata(root).map_err(|e| io_err(root, e))?;
    let mut paths = Vec::new();
    if meta.is_file() {
        paths.push(root.to_path_buf());
    } else {
        let inside = std::fs::canonicalize(root).map_err(|e| io_err(root, e))?;
        collect(root, &inside, &mut paths)?;
    }
    paths.sort();
    let mut total = 0_u64;
    paths
        .into_iter()
        .map(|path| {
            let bytes = read_bounded(&path).map_err(|e| match e {
                Bounded::Io(e) => io_err(&path, e),
                Bounded::TooLarge(size) => ReadError::TooLarge {
                    path: error_path(&path),
                    size,
                    limit: MAX_FILE_BYTES,
                },
            })?;
            total += bytes.len() as u64;
            if total > MAX_FLEET_BYTES {
                return Err(ReadError::FleetTooLarge {
                    path: error_path(&path),
                    size: total,
                    limit: MAX_FLEET_BYTES,
                });
            }
            let shown = display_path(&path);
            Ok(SourceFile::new(Arc::<str>::from(shown), bytes))
        })
        .collect()
}

fn collect(dir: &Path, inside: &Path, out: &mut Vec<PathBuf>) -> Result<(), ReadError> {
    let io_err = |path: &Path, source| ReadError::Io {
        path: error_path(path),
        source,
    };
    let entries = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let file_type = entry.file_type().map_err(|e| io_err(&path, e))?;
        if file_type.is_symlink() {
            let target = std::fs::canonicalize(&path);
            let would_read = is_yaml(&path) || target.as_ref().is_ok_and(|t| t.is_dir());
            match target {
                Ok(target) if would_read && !target.starts_with(inside) => {
                    return Err(ReadError::LinkOutside {
                        link: error_path(&path),
                        target: error_path(&target),
                    });
                }
                // Inside the repository (read under its own path), dangling,
                // or nothing that would be read: skipped.
                _ => {}
            }
        } else if file_type.is_dir() {
            collect(&path, inside, out)?;
        } else if is_yaml(&path) {
            if !file_type.is_file() {
                return Err(ReadError::NotAFile {
                    path: error_path(&path),
                });
            }
            out.push(path);
        }
    }
    Ok(())
}

enum Bounded {
    Io(io::Error),
    TooLarge(u64),
}

/// The file's bytes, refusing more than [`MAX_FILE_BYTES`] (checked before
/// reading and while reading, for a file that grows meanwhile).
fn read_bounded(path: &Path) -> Result<Vec<u8>, Bounded> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(Bounded::Io)?;
    let size = file.metadata().map_err(Bounded::Io)?.len();
    if size > MAX_FILE_BYTES {
        return Err(Bounded::TooLarge(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(Bounded::Io)?;
    let read = bytes.len() as u64;
    if read > MAX_FILE_BYTES {
        return Err(Bounded::TooLarge(read));
    }
    Ok(bytes)
}

/// Whether `path` names a YAML file by its extension.
pub fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn display_path(path: &Path) -> String {
    let shown = path.strip_prefix(".").unwrap_or(path);
    shown.display().to_string()
}

/// A path for an error message: as [`display_path`], control characters
/// escaped (a file name is the committer's to choose).
fn error_path(path: &Path) -> String {
    model::text::escape_controls(&display_path(path)).into_owned()
}
