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
}

/// Every `*.yaml`/`*.yml` file below `root` (dot-directories and dot-files
/// skipped), sorted by path. A single file may be given as `root`.
/// Paths in the result are `root` joined with the relative path, as the user
/// wrote `root` (`.` is left out), so messages point at files they can open.
pub fn read_fleet_dir(root: &Path) -> Result<Vec<SourceFile>, ReadError> {
    let io_err = |path: &Path, source| ReadError::Io {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(root).map_err(|e| io_err(root, e))?;
    let mut paths = Vec::new();
    if meta.is_file() {
        paths.push(root.to_path_buf());
    } else {
        collect(root, &mut paths).map_err(|(p, e)| io_err(&p, e))?;
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).map_err(|e| io_err(&path, e))?;
            let shown = display_path(&path);
            Ok(SourceFile::new(Arc::<str>::from(shown), bytes))
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), (PathBuf, io::Error)> {
    let entries = std::fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| (dir.to_path_buf(), e))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let file_type = entry.file_type().map_err(|e| (path.clone(), e))?;
        if file_type.is_dir() {
            collect(&path, out)?;
        } else if is_yaml(&path) {
            out.push(path);
        }
    }
    Ok(())
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
