//! What would let pending jobs run, in words: `explain JOB` and
//! `plan --suggest`.

use std::fmt::Write;

use whatif::{ExpectedStart, Suggestion, WhatIf};

/// `explain`'s section for a pending job.
pub fn whatif_explain_text(suggestions: &[Suggestion], start: Option<&ExpectedStart>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nWhat would let it run now (each change checked by planning with it):"
    );
    list(&mut out, suggestions, "  - ");
    if let Some(start) = start {
        let _ = writeln!(
            out,
            "\nExpected start (no new jobs, running jobs end at their time limits):"
        );
        let _ = writeln!(out, "  {}", start.text);
    }
    out
}

/// `plan --suggest`'s section: the jobs that got suggestions, in the
/// plan's order (`order`: the pending jobs' names), each with its expected
/// start; then how many other pending jobs have an expected start.
pub fn whatif_plan_text<'a>(
    what: &WhatIf,
    order: impl Iterator<Item = &'a str>,
    markdown: bool,
) -> String {
    let mut out = String::new();
    if what.suggestions.is_empty() {
        return out;
    }
    if markdown {
        let _ = writeln!(out, "\n### What would let pending jobs run\n");
    } else {
        let _ = writeln!(
            out,
            "\nWhat would let pending jobs run (each change checked by planning with it):"
        );
    }
    for job in order {
        let Some(suggestions) = what.suggestions.get(job) else {
            continue;
        };
        let start = what
            .starts
            .get(job)
            .map(|s| format!(" — expected start: {}", s.text))
            .unwrap_or_default();
        if markdown {
            let _ = writeln!(out, "- **{job}**{start}");
            list(&mut out, suggestions, "  - ");
        } else {
            let _ = writeln!(out, "  {job}{start}");
            list(&mut out, suggestions, "    - ");
        }
    }
    let others = what.starts.len().saturating_sub(what.suggestions.len());
    if others > 0 {
        let _ = writeln!(
            out,
            "{}{others} more pending job{} have an expected start in the JSON output (-o json)",
            if markdown { "\n" } else { "  " },
            if others == 1 { "" } else { "s" }
        );
    }
    out
}

fn list(out: &mut String, suggestions: &[Suggestion], bullet: &str) {
    if suggestions.is_empty() {
        let _ = writeln!(out, "{bullet}none found");
    }
    for s in suggestions {
        let _ = writeln!(out, "{bullet}{}", s.text);
    }
}
