//! `explain`'s explanation of one job (its Markdown is its text).

use std::io::Write;

use reconciler::engine::Explanation;
use reconciler::report::explanation_text;

use super::Render;

impl Render for Explanation {
    fn text(&self) -> String {
        explanation_text(self)
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }
}
