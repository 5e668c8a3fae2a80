//! The charts of `gitfleet simulate --plot` shown on the dashboard: the
//! state directory's `simulation/` folder, when present. Only the three
//! chart files `simulate` writes are ever read (no path from a request
//! reaches the file system), each at most [`MAX_CHART_BYTES`], and only
//! plain files (a link is not followed).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use dashboard::page::Chart;

/// The folder of the state directory the dashboard shows charts from.
pub const CHARTS_DIR: &str = "simulation";

/// The largest chart file served; a larger one is left out.
pub const MAX_CHART_BYTES: u64 = 8 * 1024 * 1024;

/// The chart files `simulate --plot` writes, with their captions.
pub const CHART_FILES: [(&str, &str); 3] = [
    ("allocation.svg", "Allocated and ready GPUs over time"),
    (
        "queue-depth.svg",
        "Pending jobs per top-level queue over time",
    ),
    ("wait-cdf.svg", "Queueing delay per leaf queue (cumulative)"),
];

/// The folder charts are read from in `state_dir`.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join(CHARTS_DIR)
}

/// The charts present in `state_dir`'s `simulation/` folder, in the order
/// of [`CHART_FILES`]; none when the folder is missing.
pub fn present(state_dir: &Path) -> Vec<Chart> {
    CHART_FILES
        .iter()
        .filter_map(|(file, caption)| {
            let meta = servable(&dir(state_dir).join(file))?;
            Some(Chart {
                file: (*file).to_string(),
                caption: (*caption).to_string(),
                written: meta.modified().ok().map(rfc3339),
            })
        })
        .collect()
}

/// The SVG text of chart `file` in `state_dir`, if `file` is one of
/// [`CHART_FILES`] and is present and servable.
pub fn read(state_dir: &Path, file: &str) -> Option<Vec<u8>> {
    CHART_FILES.iter().find(|(name, _)| *name == file)?;
    let path = dir(state_dir).join(file);
    servable(&path)?;
    std::fs::read(path).ok()
}

/// The metadata of a plain file no larger than [`MAX_CHART_BYTES`].
fn servable(path: &Path) -> Option<std::fs::Metadata> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    (meta.is_file() && meta.len() <= MAX_CHART_BYTES).then_some(meta)
}

fn rfc3339(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_the_known_plain_and_small_chart_files_are_served() {
        let state = tempfile::tempdir().unwrap();
        assert!(present(state.path()).is_empty(), "no folder, no charts");

        let charts = dir(state.path());
        std::fs::create_dir_all(&charts).unwrap();
        std::fs::write(charts.join("wait-cdf.svg"), "<svg/>").unwrap();
        std::fs::write(charts.join("allocation.svg"), "<svg>a</svg>").unwrap();
        std::fs::write(charts.join("other.svg"), "<svg/>").unwrap();
        std::fs::write(state.path().join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(state.path().join("secret"), charts.join("queue-depth.svg"))
            .unwrap();

        let shown: Vec<_> = present(state.path()).into_iter().map(|c| c.file).collect();
        assert_eq!(shown, ["allocation.svg", "wait-cdf.svg"]);
        assert_eq!(
            read(state.path(), "allocation.svg").unwrap(),
            b"<svg>a</svg>"
        );
        for refused in [
            "other.svg",
            "queue-depth.svg",
            "../secret",
            "simulation/../../secret",
        ] {
            assert!(read(state.path(), refused).is_none(), "{refused}");
        }

        let big = std::fs::File::create(charts.join("wait-cdf.svg")).unwrap();
        big.set_len(MAX_CHART_BYTES + 1).unwrap();
        assert!(read(state.path(), "wait-cdf.svg").is_none());
        assert_eq!(present(state.path()).len(), 1);
    }
}
