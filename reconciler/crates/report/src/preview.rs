//! The pull-request preview (`gitfleet plan --base B --rev R`): what a change
//! does to the specs, object by object, and to the plan. Rendered as text, as
//! a Markdown PR comment (in the style of Atlantis and argocd-diff-preview),
//! or as JSON with a `format_version`.

use std::fmt::Write;

use serde::Serialize;

use diff::plan_diff::PlanDiff;
use diff::specdiff::{ObjectDiff, SpecDiff};

use crate::comment::{Piece, fit, job_symbol, scheduling};

/// The version of the preview's JSON document; bumped only when a field is
/// renamed or removed (fields may be added within a version).
pub const PREVIEW_FORMAT_VERSION: u32 = 1;

/// GitHub's limit for one comment body, in characters.
pub const COMMENT_LIMIT: usize = 65_536;

/// A pull-request preview.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    /// [`PREVIEW_FORMAT_VERSION`].
    pub format_version: u32,
    /// The fleet's path as given on the command line.
    pub path: String,
    /// The base revision (the target branch).
    pub base: Revision,
    /// The new revision (the pull request's head).
    pub head: Revision,
    /// The semantic spec diff.
    pub spec: SpecDiff,
    /// The scheduling consequences; absent when either revision does not validate.
    pub plan: Option<PlanDiff>,
    /// Whether anything changes (what `--detailed-exitcode` reports).
    pub changed: bool,
    /// Why `reconcile` would refuse the head revision by prune protection
    /// (it removes too many running jobs, or a protected one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prune: Option<String>,
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revision {
    /// The revision as given (`main`, `HEAD`).
    pub rev: String,
    /// Its full commit id.
    pub commit: String,
    /// Whether the fleet validates at this revision.
    pub valid: bool,
    /// Its validation errors, `FILE:LINE:COL: message` (at most
    /// [`MAX_ERRORS`] are kept; `error_count` has them all).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// How many validation errors there are.
    pub error_count: usize,
}

/// How many validation errors a preview keeps per revision.
pub const MAX_ERRORS: usize = 50;

impl Revision {
    /// `main (3f2c1a9b7e10)`.
    fn label(&self) -> String {
        format!("{} ({})", self.rev, short(&self.commit))
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

impl Preview {
    /// `1 added, 2 changed; 3 newly pending (vision 3)`: the one-line verdict.
    pub fn headline(&self) -> String {
        let spec = if self.spec.objects.is_empty() {
            "no spec changes".to_string()
        } else {
            format!("specs: {}", self.spec.summary.words())
        };
        let plan = match &self.plan {
            Some(p) => p.words(),
            None => "plan not compared".to_string(),
        };
        format!("{spec}; {plan}")
    }
}

fn invalid_note(rev: &Revision) -> Option<String> {
    (!rev.valid).then(|| {
        format!(
            "{} does not validate ({} error{})",
            rev.label(),
            rev.error_count,
            if rev.error_count == 1 { "" } else { "s" }
        )
    })
}

/// The preview for a terminal.
pub fn preview_text(preview: &Preview) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gitfleet preview of {}: {} → {}",
        preview.path,
        preview.base.label(),
        preview.head.label()
    );
    for rev in [&preview.base, &preview.head] {
        if let Some(note) = invalid_note(rev) {
            let _ = writeln!(out, "\n! {note}:");
            for e in &rev.errors {
                let _ = writeln!(out, "    {e}");
            }
        }
    }
    if let Some(prune) = &preview.prune {
        let _ = writeln!(out, "\n! prune protection: {prune}");
    }
    let _ = writeln!(out, "\nSpec changes: {}", preview.spec.summary.words());
    for object in &preview.spec.objects {
        for line in object.lines() {
            let _ = writeln!(out, "  {} {line}", object.symbol());
        }
    }
    match &preview.plan {
        Some(plan) => {
            let _ = writeln!(
                out,
                "\nScheduling consequences (same observed state): {}",
                plan.words()
            );
            for job in plan.jobs.iter().filter(|j| !j.placed_elsewhere()) {
                let _ = writeln!(out, "  {} {}", job_symbol(&job.after), job.text);
            }
            if let Some(line) = elsewhere_line(plan) {
                let _ = writeln!(out, "  ~ {line}");
            }
            for t in &plan.targets {
                let _ = writeln!(out, "  ~ {}", t.text);
            }
            let _ = writeln!(out, "  {}", plan.totals_words());
        }
        None => {
            let _ = writeln!(
                out,
                "\nScheduling consequences: not computed (a revision does not validate)"
            );
        }
    }
    let diffs: Vec<&ObjectDiff> = preview
        .spec
        .objects
        .iter()
        .filter(|o| !o.yaml_diff.is_empty())
        .collect();
    if !diffs.is_empty() {
        let _ = writeln!(out, "\nYAML diffs:\n");
        for o in diffs {
            let _ = writeln!(out, "{} {}", o.symbol(), o.title());
            out.push_str(&o.yaml_diff);
            out.push('\n');
        }
    }
    out
}

/// The preview as a pull-request comment: a summary line first, the
/// scheduling consequences, then one `<details>` block per changed object
/// with its field changes and YAML diff. Cut before [`COMMENT_LIMIT`]
/// characters, with a note saying what was left out.
pub fn preview_markdown(preview: &Preview) -> String {
    preview_markdown_limited(preview, COMMENT_LIMIT)
}

/// [`preview_markdown`] with another size limit (in bytes, which is never
/// less than characters).
pub fn preview_markdown_limited(preview: &Preview, limit: usize) -> String {
    preview_markdown_with(preview, limit, "")
}

/// [`preview_markdown_limited`] with `section` (Markdown, e.g. `plan
/// --simulate`'s what-if) right after the heading, never cut.
pub fn preview_markdown_with(preview: &Preview, limit: usize, section: &str) -> String {
    let mut head = String::new();
    let verdict = if !preview.head.valid {
        "❌ does not validate"
    } else if preview.changed {
        "changes"
    } else {
        "no changes"
    };
    let _ = writeln!(
        head,
        "### gitfleet preview: {verdict} — {}\n",
        preview.headline()
    );
    let _ = writeln!(
        head,
        "`{}`: base `{}` (`{}`) → `{}` (`{}`)\n",
        preview.path,
        preview.base.rev,
        short(&preview.base.commit),
        preview.head.rev,
        short(&preview.head.commit)
    );
    head.push_str(section);
    let mut blocks: Vec<Piece> = Vec::new();
    for rev in [&preview.base, &preview.head] {
        if let Some(note) = invalid_note(rev) {
            let mut b = format!("> [!CAUTION]\n> `{}` {}\n\n", rev.rev, rest_of(&note));
            let fence = fence_for(&rev.errors.concat());
            let _ = writeln!(b, "{fence}");
            for e in &rev.errors {
                let _ = writeln!(b, "{e}");
            }
            let _ = writeln!(b, "{fence}\n");
            blocks.push(Piece::Text(b));
        }
    }
    if let Some(prune) = &preview.prune {
        blocks.push(Piece::Text(format!(
            "> [!WARNING]\n> **Prune protection**: {prune}\n\n"
        )));
    }
    if let Some(plan) = &preview.plan {
        blocks.extend(scheduling(plan));
    }
    if !preview.spec.objects.is_empty() {
        blocks.push(Piece::Text(format!(
            "#### Spec changes ({})\n\n",
            preview.spec.summary.words()
        )));
        let (moved, changed): (Vec<&ObjectDiff>, Vec<&ObjectDiff>) = preview
            .spec
            .objects
            .iter()
            .partition(|o| o.change == diff::specdiff::Change::Moved);
        for object in changed {
            blocks.push(Piece::Text(object_block(object)));
        }
        if !moved.is_empty() {
            let mut b = format!(
                "<details><summary>{} object{} moved to another file, unchanged</summary>\n\n",
                moved.len(),
                if moved.len() == 1 { "" } else { "s" }
            );
            for o in moved {
                let _ = writeln!(
                    b,
                    "- {}: `{}` → `{}`",
                    inline(&o.title()),
                    o.file_before.as_deref().unwrap_or(""),
                    o.file_after.as_deref().unwrap_or("")
                );
            }
            b.push_str("\n</details>\n\n");
            blocks.push(Piece::Text(b));
        }
    }
    fit(head, blocks, limit, |shown, total| {
        format!(
            "\n> [!WARNING]\n> Output cut to fit a comment of {limit} characters: \
             {shown} of {total} parts shown. Run `gitfleet plan --base {} --rev {} {}` \
             for the whole preview.\n",
            preview.base.rev, preview.head.rev, preview.path
        )
    })
}

/// `3 jobs placed on other GPUs: a, b, c` (best fit moves jobs that are
/// placed either way when the set of jobs changes; their GPUs are in the JSON).
fn elsewhere_line(plan: &PlanDiff) -> Option<String> {
    let names: Vec<&str> = plan
        .jobs
        .iter()
        .filter(|j| j.placed_elsewhere())
        .map(|j| j.job.as_str())
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "{} job{} placed either way, on other GPUs: {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        )
    })
}

/// `main (…) does not validate (2 errors)` without the revision label.
fn rest_of(note: &str) -> &str {
    note.split_once(") ").map_or(note, |(_, rest)| rest)
}

fn object_block(object: &ObjectDiff) -> String {
    let lines = object.lines();
    let first = match object.change {
        diff::specdiff::Change::Changed if lines.len() > 1 => {
            format!("{} (+{} more)", field_of(&lines[0]), lines.len() - 1)
        }
        diff::specdiff::Change::Changed => field_of(&lines[0]).to_string(),
        _ => lines
            .first()
            .map(|l| {
                l.strip_prefix(&object.title())
                    .unwrap_or(l)
                    .trim()
                    .to_string()
            })
            .unwrap_or_default(),
    };
    let mut b = format!(
        "<details><summary><code>{} {}</code> {}</summary>\n\n",
        object.symbol(),
        html(&object.title()),
        html(&first)
    );
    if object.change == diff::specdiff::Change::Changed {
        for line in &lines {
            let _ = writeln!(b, "- {}", inline(field_of(line)));
        }
        b.push('\n');
    }
    if !object.yaml_diff.is_empty() {
        let fence = fence_for(&object.yaml_diff);
        let _ = write!(b, "{fence}diff\n{}{fence}\n\n", object.yaml_diff);
    }
    b.push_str("</details>\n\n");
    b
}

/// A code fence longer than any run of backticks in `content`, so that no
/// committed text (a file name, a value) can close the block early and
/// write Markdown of its own into the comment.
fn fence_for(content: &str) -> String {
    let longest = content.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// `queue nlp: H100 guaranteed 200 → 240` → `H100 guaranteed 200 → 240`.
fn field_of(line: &str) -> &str {
    line.split_once(": ").map_or(line, |(_, rest)| rest)
}

pub(crate) fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub(crate) fn inline(text: &str) -> String {
    html(text).replace('*', "\\*").replace('_', "\\_")
}

pub(crate) fn cell(text: &str) -> String {
    inline(text).replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod fence_tests {
    #[test]
    fn fences_outgrow_the_backticks_inside() {
        assert_eq!(super::fence_for("plain"), "```");
        assert_eq!(super::fence_for("a ``` b"), "````");
        assert_eq!(super::fence_for("`````x"), "``````");
    }
}
