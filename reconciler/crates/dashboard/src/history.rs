//! The dashboard's history page: the fleet's commits as semantic changes
//! (what `gitfleet history` prints), newest first, from a revision the
//! action log links to. Like the main page: no script, style embedded,
//! every string escaped.

use crate::html::Html;

/// The style sheet, shared with the main page.
const STYLE: &str = include_str!("style.css");

/// The commits shown, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryView {
    /// The revision the walk started from.
    pub rev: String,
    /// The commits that changed the fleet.
    pub commits: Vec<CommitView>,
    /// How many commits were asked for at most (the page says when more
    /// may exist).
    pub limit: usize,
}

/// One commit that changed the fleet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitView {
    /// Its full id (the anchor of its entry is `c-` and the id).
    pub id: String,
    /// Committed at, as `YYYY-MM-DD HH:MM:SS ±HH:MM`.
    pub time: String,
    /// `Name <email>`.
    pub author: String,
    /// The commit message.
    pub message: String,
    /// Its semantic changes, one per line: a symbol (`+`, `-`, `~`, `→`)
    /// and the words.
    pub changes: Vec<(String, String)>,
    /// Validation problems or a read error at this commit.
    pub problems: Vec<String>,
}

/// The history page.
pub fn render_history(view: &HistoryView) -> String {
    let mut h = Html::new();
    h.raw("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .raw("<link rel=\"icon\" href=\"data:,\">")
        .raw("<title>gitfleet history</title><style>")
        .raw(STYLE)
        .raw("</style></head><body>")
        .raw("<a class=\"skip\" href=\"#main\">Skip to content</a>")
        .raw("<header><h1>gitfleet</h1><nav aria-label=\"Pages\"><ul>")
        .raw("<li><a href=\"./\">Dashboard</a></li></ul></nav><p class=\"meta\">")
        .raw("semantic history from ")
        .element("code", &view.rev)
        .raw("</p></header><main id=\"main\" tabindex=\"-1\">")
        .raw("<h2 id=\"history-h\">History</h2>");
    if view.commits.is_empty() {
        h.raw("<p>No commit changes the fleet up to this revision.</p>");
    }
    for c in &view.commits {
        let short: String = c.id.chars().take(12).collect();
        h.raw("<article class=\"commit\"")
            .attr("id", &format!("c-{}", c.id))
            .raw("><h3><code")
            .attr("title", &c.id)
            .raw(">")
            .text(&short)
            .raw("</code> ")
            .text(c.message.lines().next().unwrap_or(""))
            .raw("</h3><p class=\"meta\">")
            .text(&c.author)
            .raw(" · ")
            .text(&c.time)
            .raw("</p>");
        let body: Vec<&str> = c.message.lines().skip(1).collect();
        let body = body.join("\n");
        if !body.trim().is_empty() {
            h.element("pre", body.trim());
        }
        if !c.changes.is_empty() {
            h.raw("<ul class=\"changes\">");
            for (symbol, line) in &c.changes {
                h.raw("<li><code>")
                    .text(symbol)
                    .raw("</code> ")
                    .text(line)
                    .raw("</li>");
            }
            h.raw("</ul>");
        }
        for problem in &c.problems {
            h.element("pre", problem);
        }
        h.raw("</article>");
    }
    if view.commits.len() >= view.limit {
        h.raw("<p class=\"note\">The newest ")
            .text(&view.limit.to_string())
            .raw(" changes; <code>gitfleet history</code> shows them all.</p>");
    }
    h.raw("</main></body></html>\n");
    h.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn commits_show_their_changes_escaped_with_anchors() {
        let view = HistoryView {
            rev: "abc".into(),
            commits: vec![CommitView {
                id: "0123456789abcdef".into(),
                time: "2026-11-24 01:00:00 +00:00".into(),
                author: "Ada <ada@example.com>".into(),
                message: "raise nlp <limit>\n\nbecause".into(),
                changes: vec![("~".into(), "queue nlp: H100 limit 8 → 16".into())],
                problems: vec![],
            }],
            limit: 20,
        };
        let page = render_history(&view);
        assert!(page.contains("<article class=\"commit\" id=\"c-0123456789abcdef\">"));
        assert!(page.contains("raise nlp &lt;limit&gt;"));
        assert!(page.contains("Ada &lt;ada@example.com&gt;"));
        assert!(page.contains("<li><code>~</code> queue nlp: H100 limit 8 → 16</li>"));
        assert!(page.contains("<pre>because</pre>"));
        assert!(!page.contains("shows them all"));
        assert!(!page.contains("<script"));
    }
}
