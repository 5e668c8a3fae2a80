//! `audit`'s log: one line per entry for people, an array in JSON.

use std::fmt::Write as _;
use std::io::Write;

use reconciler::text::escape_controls;

use super::Render;
use crate::commands::audit::Line;

/// The filtered audit log.
#[derive(Debug)]
pub struct AuditReport(pub Vec<Line>);

impl Render for AuditReport {
    fn text(&self) -> String {
        let mut out = String::new();
        if self.0.is_empty() {
            out.push_str("no audit entries\n");
            return out;
        }
        for line in &self.0 {
            let e = &line.entry;
            let revision: String = e.revision.chars().take(12).collect();
            let revision = if revision.is_empty() {
                "-".to_string()
            } else {
                revision
            };
            let _ = writeln!(
                out,
                "{:>6}  {}  {:<12}  {:<9}  {}  {}",
                line.seq,
                e.time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                revision,
                escape_controls(&e.what),
                escape_controls(&e.subject),
                escape_controls(&e.detail)
            );
        }
        out
    }

    /// An array of the entries, each with its `seq` first.
    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        let mut lines = Vec::with_capacity(self.0.len());
        for line in &self.0 {
            let mut object = serde_json::Map::new();
            object.insert("seq".to_string(), line.seq.into());
            if let serde_json::Value::Object(entry) = serde_json::to_value(&line.entry)? {
                object.extend(entry);
            }
            lines.push(serde_json::Value::Object(object));
        }
        serde_json::to_writer_pretty(out, &lines)
    }
}
