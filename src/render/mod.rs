//! Printing results: every command's result implements [`Render`] and is
//! printed by [`emit`], the one place that chooses by [`OutputFormat`].

mod audit;
mod explain;
mod history;
mod plan;
mod simulate;
mod status;
mod validate;
mod whatif;

use std::io::{BufWriter, Write};

use miette::{IntoDiagnostic, Result};

pub use audit::AuditReport;
pub use explain::ExplainReport;
pub use history::HistoryReport;
pub use plan::{PlanReport, SimulatedPreview};
pub use simulate::SimulateReport;
pub use whatif::SuggestedPlanReport;

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

/// A result in each output format.
pub trait Render {
    /// For a terminal.
    fn text(&self) -> String;

    /// A pull-request comment; an error where there is no Markdown form
    /// (such commands also refuse `-o markdown` when parsing arguments:
    /// `args::text_or_json`).
    fn markdown(&self) -> Result<String> {
        Err(miette::miette!(
            "this command prints text or json, not markdown"
        ))
    }

    /// Pretty-printed JSON, streamed to `out` (without the final newline).
    fn json<W: Write>(&self, out: W) -> serde_json::Result<()>;
}

/// Prints `value` to stdout in `format`. JSON is streamed through a buffer
/// (a large fleet's plan is tens of MB of it), statically dispatched.
pub fn emit<R: Render>(value: &R, format: OutputFormat) -> Result<()> {
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match format {
        OutputFormat::Text => out.write_all(value.text().as_bytes()).into_diagnostic()?,
        OutputFormat::Markdown => out
            .write_all(value.markdown()?.as_bytes())
            .into_diagnostic()?,
        OutputFormat::Json => {
            value.json(&mut out).into_diagnostic()?;
            out.write_all(b"\n").into_diagnostic()?;
        }
    }
    out.flush().into_diagnostic()
}
