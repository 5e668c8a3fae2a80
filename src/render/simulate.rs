//! `simulate`: a replay's report (the words are the library's).

use std::io::Write;

use miette::Result;
use reconciler::simulate::{Report, markdown, text};

use super::Render;

/// A replay's report.
pub struct SimulateReport(pub Report);

impl Render for SimulateReport {
    fn text(&self) -> String {
        text(&self.0)
    }

    fn markdown(&self) -> Result<String> {
        Ok(markdown(&self.0))
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, &self.0)
    }
}
