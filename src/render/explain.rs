//! `explain`'s explanation of one job (text or JSON), with what would let
//! a pending job run.

use std::io::Write;

use reconciler::engine::Explanation;
use reconciler::report::{explanation_text, whatif_explain_text};
use reconciler::whatif::{ExpectedStart, Suggestion};
use serde::Serialize;

use super::Render;

/// `explain`'s result: the engine's explanation and, for a pending job, the
/// verified suggestions and its expected start (JSON: two more fields).
#[derive(Debug, Serialize)]
pub struct ExplainReport {
    /// What the engine says.
    #[serde(flatten)]
    pub explanation: Explanation,
    /// Changes that would let it run now (pending jobs only; empty: none found).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestions: Option<Vec<Suggestion>>,
    /// When it is expected to start (pending jobs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_start: Option<ExpectedStart>,
}

impl Render for ExplainReport {
    fn text(&self) -> String {
        let mut out = explanation_text(&self.explanation);
        if let Some(suggestions) = &self.suggestions {
            out.push_str(&whatif_explain_text(
                suggestions,
                self.expected_start.as_ref(),
            ));
        }
        out
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }
}
