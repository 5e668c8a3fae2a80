//! `gitfleet audit [--state DIR] [--job NAME] [--what KIND] [--revision REV] [--last N] [-o text|json]`:
//! the reconciler's append-only audit log — every action carried out (with
//! its reason and the revision whose plan asked for it) and every event the
//! fleet reported — read without disturbing the state.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{Result, miette};
use reconciler::state::{AuditEntry, Store};

use super::args::OutputArgs;
use crate::render::{AuditReport, emit};

/// Arguments of `gitfleet audit`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("output", super::args::text_or_json))]
pub struct Args {
    /// The state directory.
    #[arg(long, value_name = "DIR", default_value = ".gitfleet")]
    pub state: PathBuf,
    /// Only entries about this job, node or pool.
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,
    /// Only entries of this kind: an action (`place`, `preempt`, `scale`,
    /// `drain`, `terminate`, `cancel`) or an event (`succeeded`, `failed`,
    /// `stopped`, `refused`, …).
    #[arg(long, value_name = "KIND")]
    pub what: Option<String>,
    /// Only entries caused by this revision (a prefix of its id).
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// Only the last N entries (after the filters).
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// One entry as printed: its sequence number and the entry.
#[derive(Debug, Clone)]
pub struct Line {
    /// Position in the log (grows by one per entry).
    pub seq: u64,
    /// The entry.
    pub entry: AuditEntry,
}

/// Runs `gitfleet audit`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let log = Store::read_audit(&args.state).map_err(|e| match e {
        reconciler::state::StateError::Locked { .. } => miette!(
            "{e}: stop it to read the whole audit log; `gitfleet status --state {}` shows each job's last stop meanwhile",
            args.state.display()
        ),
        other => miette!("{other}"),
    })?;
    let mut lines: Vec<Line> = log
        .into_iter()
        .filter(|(_, e)| args.job.as_deref().is_none_or(|j| e.subject == j))
        .filter(|(_, e)| args.what.as_deref().is_none_or(|w| e.what == w))
        .filter(|(_, e)| {
            args.revision
                .as_deref()
                .is_none_or(|r| !r.is_empty() && e.revision.starts_with(r))
        })
        .map(|(seq, entry)| Line { seq, entry })
        .collect();
    if let Some(n) = args.last {
        let skip = lines.len().saturating_sub(n);
        lines.drain(..skip);
    }
    emit(&AuditReport(lines), args.output.output)?;
    Ok(ExitCode::SUCCESS)
}
