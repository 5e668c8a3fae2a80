//! One module per subcommand: read arguments, call the library, print.

pub mod explain;
pub mod generate;
pub mod git;
pub mod history;
pub mod inventory;
pub mod plan;
pub mod preview;
pub mod reconcile;
pub mod schema;
pub mod validate;

use std::path::Path;

use miette::{IntoDiagnostic, Result};
use reconciler::load::{fs::read_fleet_dir, load_fleet};
use reconciler::spec::Fleet;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people, in a terminal.
    Text,
    /// A pull-request comment.
    Markdown,
    /// For programs; stable field names.
    Json,
}

/// Loads a fleet repository; prints its problems to stderr and returns
/// `None` when it is invalid.
pub fn load_valid_fleet(path: &Path) -> Result<Option<Fleet>> {
    let files = read_fleet_dir(path).into_diagnostic()?;
    let loaded = load_fleet(&files);
    if loaded.is_valid() {
        return Ok(Some(loaded.fleet));
    }
    for d in &loaded.diagnostics {
        eprintln!("{d}");
    }
    eprintln!(
        "invalid fleet: {} error{}; run `gitfleet validate {}`",
        loaded.diagnostics.len(),
        if loaded.diagnostics.len() == 1 {
            ""
        } else {
            "s"
        },
        path.display()
    );
    Ok(None)
}
