//! `gitfleet history [KIND/NAME] [PATH] [--since DATE] [--rev REV] [-p] [-o text|json]`

use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, NaiveDate, Utc};
use miette::{IntoDiagnostic, Result, miette};
use reconciler::source::history::{HistoryEntry, HistoryQuery, history, parse_object};
use reconciler::source::short_id;

use super::OutputFormat;

/// Arguments of `gitfleet history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
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
    /// Output format (text or json).
    #[arg(short, long, value_enum, default_value = "text")]
    output: OutputFormat,
}

/// Runs `gitfleet history`.
pub fn run(args: &HistoryArgs) -> Result<ExitCode> {
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
    let query = HistoryQuery { object, since };
    let entries = history(&source, &args.rev, &query).into_diagnostic()?;
    match args.output {
        OutputFormat::Json => {
            let doc = serde_json::json!({
                "format_version": 1,
                "path": path.display().to_string(),
                "rev": args.rev,
                "entries": entries,
            });
            let text = serde_json::to_string_pretty(&doc).into_diagnostic()?;
            println!("{text}");
        }
        OutputFormat::Text => {
            if entries.is_empty() {
                let what = match &query.object {
                    Some((kind, name)) => {
                        format!("{} {name}", reconciler::specdiff::kind_words(*kind))
                    }
                    None => "the fleet".to_string(),
                };
                println!("no commit changes {what} in {}", path.display());
            }
            print!("{}", history_text(&entries, args.patch));
        }
        OutputFormat::Markdown => {
            return Err(miette!("history prints text or json, not markdown"));
        }
    }
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

/// The history for a terminal, newest first, in the style of `git log`.
fn history_text(entries: &[HistoryEntry], patch: bool) -> String {
    let mut out = String::new();
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let c = &e.commit;
        let _ = writeln!(
            out,
            "commit {}  {}  {} <{}>",
            short_id(&c.id),
            c.time.format("%Y-%m-%d %H:%M:%S %:z"),
            c.author_name,
            c.author_email
        );
        for line in c.message.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                let _ = writeln!(out, "    {line}");
            }
        }
        out.push('\n');
        for o in &e.objects {
            for line in o.lines() {
                let _ = writeln!(out, "  {} {line}", o.symbol());
            }
        }
        if let Some(invalid) = &e.invalid {
            let n = invalid.error_count;
            let _ = writeln!(
                out,
                "  ! the fleet does not validate at this commit ({n} error{}):",
                if n == 1 { "" } else { "s" }
            );
            for err in &invalid.errors {
                let _ = writeln!(out, "      {err}");
            }
            if n > invalid.errors.len() {
                let _ = writeln!(out, "      … and {} more", n - invalid.errors.len());
            }
        }
        if let Some(err) = &e.error {
            let _ = writeln!(out, "  ! cannot read this commit: {err}");
        }
        if patch {
            for o in e.objects.iter().filter(|o| !o.yaml_diff.is_empty()) {
                out.push('\n');
                out.push_str(&o.yaml_diff);
            }
        }
    }
    out
}
