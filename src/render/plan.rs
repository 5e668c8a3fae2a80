//! The plan (with the source it was computed for) and the preview of a
//! change (`plan --base`).

use std::io::Write;

use miette::Result;
use reconciler::plan::Plan;
use reconciler::report::preview::{Preview, preview_markdown, preview_text};
use reconciler::report::{plan_markdown, plan_text};

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
