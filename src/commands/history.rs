//! `gitfleet history [KIND/NAME] [PATH] [--since DATE] [--rev REV] [-p] [-o text|json]`

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, NaiveDate, Utc};
use miette::{IntoDiagnostic, Result, miette};
use reconciler::source::history::{HistoryQuery, history, parse_object};

use super::args::OutputArgs;
use crate::render::{HistoryReport, emit};

/// Arguments of `gitfleet history`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("output", super::args::text_or_json))]
pub struct Args {
    /// The object to follow, as KIND/NAME (`queue/nlp`, `job/llama-finetune`,
    /// `priority-class/low`); every object when left out. A single argument
    /// that is not KIND/NAME is taken as PATH.
    #[arg(value_name = "KIND/NAME")]
    object: Option<String>,
    /// The fleet: a directory inside a Git repository (a subdirectory for a
    /// fleet inside a monorepo), a bare repository or a worktree.
    #[arg(value_name = "PATH")]
    path: Option<PathBuf>,
    /// Only commits made at or after this date (`2026-11-01` or RFC 3339),
    /// by committer date as `git log --since`.
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Walk back from this revision.
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    rev: String,
    /// Show the YAML diff of every change too.
    #[arg(short, long)]
    patch: bool,
    #[command(flatten)]
    output: OutputArgs,
}

/// Runs `gitfleet history`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let (object, path) = match (&args.object, &args.path) {
        (Some(text), path) => match parse_object(text) {
            Some(object) => (Some(object), path.clone()),
            None if path.is_none() => (None, Some(PathBuf::from(text))),
            None => {
                return Err(miette!(
                    "{text:?} is not KIND/NAME (e.g. queue/nlp, job/train, priority-class/low)"
                ));
            }
        },
        (None, path) => (None, path.clone()),
    };
    let path = path.unwrap_or_else(|| PathBuf::from("."));
    let since = args.since.as_deref().map(parse_since).transpose()?;
    let source = super::git::open(&path)?;
    let query = HistoryQuery {
        object,
        since,
        limit: None,
    };
    let entries = history(&source, &args.rev, &query).into_diagnostic()?;
    let report = HistoryReport {
        path: path.display().to_string(),
        rev: args.rev.clone(),
        object: query.object,
        entries,
        patch: args.patch,
    };
    emit(&report, args.output.output)?;
    Ok(ExitCode::SUCCESS)
}

/// `2026-11-01` (midnight UTC) or an RFC 3339 time.
fn parse_since(text: &str) -> Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| miette!("--since {text:?}: not a date like 2026-11-01 or an RFC 3339 time"))
}
