//! `validate`'s verdict (the words and the document are the library's).

use std::io::Write;

use reconciler::report::validation::{Validation, validation_text};

use super::Render;

impl Render for Validation {
    fn text(&self) -> String {
        validation_text(self)
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }
}
