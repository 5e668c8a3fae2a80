//! `history`: the fleet's commits as semantic diffs, newest first, in the
//! style of `git log` (no Markdown form).

use std::fmt::Write as _;
use std::io::Write;

use miette::{Result, miette};
use reconciler::source::history::HistoryEntry;
use reconciler::source::short_id;
use reconciler::spec::Kind;
use reconciler::text::escape_controls;

use super::Render;

/// The result of a history walk, with what was asked for.
pub struct HistoryReport {
    /// The fleet's path as given.
    pub path: String,
    /// The revision the walk started from.
    pub rev: String,
    /// The object followed; every object when `None`.
    pub object: Option<(Kind, String)>,
    /// The commits that changed it, newest first.
    pub entries: Vec<HistoryEntry>,
    /// Whether the text shows the YAML diff of every change.
    pub patch: bool,
}

impl Render for HistoryReport {
    fn text(&self) -> String {
        let mut out = String::new();
        if self.entries.is_empty() {
            let what = match &self.object {
                Some((kind, name)) => {
                    format!("{} {name}", reconciler::specdiff::kind_words(*kind))
                }
                None => "the fleet".to_string(),
            };
            let _ = writeln!(out, "no commit changes {what} in {}", self.path);
        }
        out.push_str(&history_text(&self.entries, self.patch));
        out
    }

    fn markdown(&self) -> Result<String> {
        Err(miette!("history prints text or json, not markdown"))
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        let doc = serde_json::json!({
            "format_version": 1,
            "path": self.path,
            "rev": self.rev,
            "entries": self.entries,
        });
        serde_json::to_writer_pretty(out, &doc)
    }
}

/// The entries for a terminal.
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
            escape_controls(&c.author_name),
            escape_controls(&c.author_email)
        );
        for line in c.message.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                let _ = writeln!(out, "    {}", escape_controls(line));
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
