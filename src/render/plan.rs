//! The plan (with the source it was computed for) and the preview of a
//! change (`plan --base`).

use std::io::Write;

use miette::Result;
use reconciler::plan::Plan;
use reconciler::report::preview::{
    COMMENT_LIMIT, Preview, preview_markdown, preview_markdown_with, preview_text,
};
use reconciler::report::{plan_markdown, plan_text};
use reconciler::simulate::{Comparison, comparison_markdown, comparison_text};
use serde::Serialize;

use super::Render;

/// A plan and the label of what it was computed for (the fleet's path).
pub struct PlanReport<'a> {
    /// The plan.
    pub plan: &'a Plan,
    /// Shown in the heading: `gitfleet plan for SOURCE`.
    pub source: &'a str,
}

impl Render for PlanReport<'_> {
    fn text(&self) -> String {
        plan_text(self.plan, self.source)
    }

    fn markdown(&self) -> Result<String> {
        Ok(plan_markdown(self.plan, self.source))
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, &self.plan.document())
    }
}

impl Render for Preview {
    fn text(&self) -> String {
        preview_text(self)
    }

    fn markdown(&self) -> Result<String> {
        Ok(preview_markdown(self))
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }
}

/// The preview of a change with `--simulate`'s what-if (`None`: not
/// replayed, a revision does not validate).
pub struct SimulatedPreview<'a> {
    /// The preview.
    pub preview: &'a Preview,
    /// Both replays and the per-queue deltas.
    pub simulation: Option<&'a Comparison>,
}

/// The preview's JSON with the `simulation` key added (`null` when not
/// replayed).
#[derive(Serialize)]
struct SimulatedJson<'a> {
    #[serde(flatten)]
    preview: &'a Preview,
    simulation: Option<&'a Comparison>,
}

impl Render for SimulatedPreview<'_> {
    fn text(&self) -> String {
        let mut out = preview_text(self.preview);
        match self.simulation {
            Some(c) => out.push_str(&comparison_text(c)),
            None => {
                out.push_str("\nSimulated what-if: not replayed (a revision does not validate)\n")
            }
        }
        out
    }

    fn markdown(&self) -> Result<String> {
        let section = match self.simulation {
            Some(c) => comparison_markdown(c),
            None => "#### Simulated what-if\n\nNot replayed: a revision does not validate.\n\n"
                .to_string(),
        };
        Ok(preview_markdown_with(
            self.preview,
            COMMENT_LIMIT.saturating_sub(section.len()),
            &section,
        ))
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(
            out,
            &SimulatedJson {
                preview: self.preview,
                simulation: self.simulation,
            },
        )
    }
}
