//! The reconciler's status (text or JSON).

use std::io::Write;

use reconciler::reconcile::status::Status;

use super::Render;

impl Render for Status {
    fn text(&self) -> String {
        self.to_text()
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }
}
