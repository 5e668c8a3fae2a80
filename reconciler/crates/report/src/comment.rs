//! The pull-request comment at scale: the scheduling consequences ordered by
//! severity (preemptions, newly pending, cancellations before moved
//! placements), long runs of similar rows collapsed into `<details>`, a
//! per-queue before/after table and a Mermaid chart GitHub renders; and
//! [`fit`], which keeps a comment under a size limit with its HTML balanced.

use std::collections::BTreeMap;
use std::fmt::Write;

use diff::plan_diff::{JobChange, JobOutcome, PlanDiff, TargetChange};
use diff::queue_totals::QueueChange;
use model::text::natural_cmp;

use crate::preview::{cell, inline};

/// One piece of a comment, kept or left out whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Text.
    Text(String),
    /// Text that opens an element (`<details>`), and the text that closes it.
    Open(String, &'static str),
    /// Closes the element opened last.
    Close,
}

/// Rows a severe group (preemptions, newly pending) shows before the rest
/// goes into `<details>`.
const OPEN_SEVERE: usize = 25;
/// Rows any other group shows before the rest goes into `<details>`.
const OPEN_OTHER: usize = 10;
/// Job names listed per pending reason in a collapsed group.
const NAMES_PER_REASON: usize = 30;
/// Queues in the per-queue table.
const MAX_QUEUE_ROWS: usize = 50;
/// Queues in the chart.
const MAX_CHART_QUEUES: usize = 20;

/// `head`, then as many `pieces` as fit in `limit` bytes (bytes are never
/// fewer than characters). When some are left out, what is open is closed
/// and `note(shown, total)` follows, so the Markdown stays balanced.
pub(crate) fn fit(
    head: String,
    pieces: Vec<Piece>,
    limit: usize,
    note: impl Fn(usize, usize) -> String,
) -> String {
    let total = pieces.iter().filter(|p| !matches!(p, Piece::Close)).count();
    let note_room = note(total, total).len() + 16;
    let mut out = head;
    let mut open: Vec<&'static str> = Vec::new();
    let mut shown = 0;
    for piece in pieces {
        let (text, closer) = match piece {
            Piece::Close => {
                if let Some(closer) = open.pop() {
                    out.push_str(closer);
                }
                continue;
            }
            Piece::Text(text) => (text, ""),
            Piece::Open(text, closer) => (text, closer),
        };
        let closing: usize = open.iter().map(|c| c.len()).sum::<usize>() + closer.len();
        if out.len() + text.len() + closing + note_room > limit {
            for closer in open.iter().rev() {
                out.push_str(closer);
            }
            out.push_str(&note(shown, total));
            return out;
        }
        out.push_str(&text);
        if !closer.is_empty() {
            open.push(closer);
        }
        shown += 1;
    }
    out
}

/// How serious a job's change is: groups are shown in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Severity {
    Preempted,
    NewlyPending,
    Stopped,
    Targets,
    NewlyPlaced,
    Other,
    StillPending,
    Moved,
}

fn severity(job: &JobChange) -> Severity {
    use JobOutcome as O;
    match (&job.before, &job.after) {
        (_, O::Preempted { .. }) => Severity::Preempted,
        (O::Pending { .. }, O::Pending { .. }) => Severity::StillPending,
        (_, O::Pending { .. }) => Severity::NewlyPending,
        (_, O::Cancelled | O::Terminated) | (O::Placed { .. }, O::None) => Severity::Stopped,
        (O::Placed { .. }, O::Placed { .. }) => Severity::Moved,
        (_, O::Placed { .. }) => Severity::NewlyPlaced,
        _ => Severity::Other,
    }
}

/// The table's symbol of a job's new outcome.
pub(crate) fn job_symbol(outcome: &JobOutcome) -> &'static str {
    match outcome {
        JobOutcome::Placed { .. } => "+",
        JobOutcome::Pending { .. } => "!",
        JobOutcome::Preempted { .. } | JobOutcome::Terminated | JobOutcome::Cancelled => "-",
        JobOutcome::None => "~",
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `3 jobs`.
fn jobs(n: usize) -> String {
    format!("{n} job{}", plural(n))
}

const TABLE_HEAD: &str = "| | change |\n|---|---|\n";
const DETAILS_END: &str = "\n</details>\n\n";

/// The scheduling consequences of a change as comment pieces: the verdict,
/// the per-queue table and chart, then the changes by severity.
pub(crate) fn scheduling(plan: &PlanDiff) -> Vec<Piece> {
    let mut pieces = vec![Piece::Text(format!(
        "#### Scheduling consequences\n\n{} ({}).\n\n",
        plan.words(),
        plan.totals_words()
    ))];
    queue_table(&plan.queues, &mut pieces);
    if let Some(chart) = queue_chart(&plan.queues) {
        pieces.push(Piece::Text(chart));
    }
    let mut groups: BTreeMap<Severity, Vec<&JobChange>> = BTreeMap::new();
    for job in &plan.jobs {
        groups.entry(severity(job)).or_default().push(job);
    }
    for list in groups.values_mut() {
        list.sort_by(|a, b| natural_cmp(&a.job, &b.job));
    }
    let rows = |list: &[&JobChange]| -> Vec<String> {
        list.iter()
            .map(|j| format!("| `{}` | {} |\n", job_symbol(&j.after), cell(&j.text)))
            .collect()
    };
    for severity in [
        Severity::Preempted,
        Severity::NewlyPending,
        Severity::Stopped,
        Severity::Targets,
        Severity::NewlyPlaced,
        Severity::Other,
        Severity::StillPending,
        Severity::Moved,
    ] {
        if severity == Severity::Targets {
            targets(&plan.targets, &mut pieces);
            continue;
        }
        let Some(list) = groups.get(&severity) else {
            continue;
        };
        let n = list.len();
        match severity {
            Severity::Preempted => {
                group(&preempted_title(list), rows(list), OPEN_SEVERE, &mut pieces)
            }
            Severity::NewlyPending => group(
                &format!("{} newly pending", jobs(n)),
                rows(list),
                OPEN_SEVERE,
                &mut pieces,
            ),
            Severity::Stopped => group(
                &format!("{} cancelled, terminated or no longer placed", jobs(n)),
                rows(list),
                OPEN_OTHER,
                &mut pieces,
            ),
            Severity::NewlyPlaced => group(
                &format!("{} newly placed", jobs(n)),
                rows(list),
                OPEN_OTHER,
                &mut pieces,
            ),
            Severity::Other => group(
                &format!("{n} other job change{}", plural(n)),
                rows(list),
                OPEN_OTHER,
                &mut pieces,
            ),
            Severity::StillPending => still_pending(list, &rows, &mut pieces),
            Severity::Moved => moved(list, &mut pieces),
            Severity::Targets => {}
        }
    }
    pieces
}

/// `33 jobs newly preempted`, or `52 jobs preempted (33 newly, 19 for
/// another job)` when some were preempted at the base already.
fn preempted_title(list: &[&JobChange]) -> String {
    let n = list.len();
    let newly = list
        .iter()
        .filter(|j| !matches!(j.before, JobOutcome::Preempted { .. }))
        .count();
    if newly == n {
        format!("{} newly preempted", jobs(n))
    } else {
        format!(
            "{} preempted ({newly} newly, {} for another job)",
            jobs(n),
            n - newly
        )
    }
}

/// A titled table of `rows`: the first `open` shown, the rest in
/// `<details>`.
fn group(title: &str, rows: Vec<String>, open: usize, pieces: &mut Vec<Piece>) {
    let n = rows.len();
    pieces.push(Piece::Text(format!(
        "**{}**\n\n{TABLE_HEAD}",
        inline(title)
    )));
    let mut rows = rows.into_iter();
    for row in rows.by_ref().take(open) {
        pieces.push(Piece::Text(row));
    }
    pieces.push(Piece::Text("\n".to_string()));
    if n > open {
        pieces.push(Piece::Open(
            format!(
                "<details><summary>{} more</summary>\n\n{TABLE_HEAD}",
                n - open
            ),
            DETAILS_END,
        ));
        pieces.extend(rows.map(Piece::Text));
        pieces.push(Piece::Close);
    }
}

/// Scaling and drains that change: a group of their own.
fn targets(list: &[TargetChange], pieces: &mut Vec<Piece>) {
    if list.is_empty() {
        return;
    }
    let n = list.len();
    let rows = list
        .iter()
        .map(|t| format!("| `~` | {} |\n", cell(&t.text)))
        .collect();
    group(
        &format!("{n} scaling/drain change{}", plural(n)),
        rows,
        OPEN_OTHER,
        pieces,
    );
}

/// Jobs pending in both plans, for another reason: a table when few, else
/// one line (`455 jobs still pending; reasons changed: 3 kinds`) and a
/// `<details>` list of the new reasons, most frequent first, with their jobs.
fn still_pending(
    list: &[&JobChange],
    rows: &dyn Fn(&[&JobChange]) -> Vec<String>,
    pieces: &mut Vec<Piece>,
) {
    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for job in list {
        if let JobOutcome::Pending { reason } = &job.after {
            by_reason.entry(reason).or_default().push(&job.job);
        }
    }
    let kinds = by_reason.len();
    let title = format!(
        "{} still pending; reasons changed: {kinds} kind{}",
        jobs(list.len()),
        plural(kinds)
    );
    if list.len() <= OPEN_OTHER {
        group(&title, rows(list), OPEN_OTHER, pieces);
        return;
    }
    let mut reasons: Vec<(&str, Vec<&str>)> = by_reason.into_iter().collect();
    reasons.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    pieces.push(Piece::Open(
        format!("<details><summary>{}</summary>\n\n", inline(&title)),
        DETAILS_END,
    ));
    for (reason, names) in reasons {
        pieces.push(Piece::Text(format!(
            "- {} now: {} — {}\n",
            jobs(names.len()),
            inline(reason),
            name_list(&names, NAMES_PER_REASON)
        )));
    }
    pieces.push(Piece::Close);
}

/// Jobs placed in both plans on other GPUs (best fit's side effect): their
/// names, on one row when few, else in `<details>`.
fn moved(list: &[&JobChange], pieces: &mut Vec<Piece>) {
    let names: Vec<&str> = list.iter().map(|j| j.job.as_str()).collect();
    let title = format!("{} placed either way, on other GPUs", jobs(names.len()));
    if names.len() <= OPEN_OTHER {
        pieces.push(Piece::Text(format!(
            "**{}**: {}\n\n",
            inline(&title),
            name_list(&names, OPEN_OTHER)
        )));
        return;
    }
    pieces.push(Piece::Open(
        format!("<details><summary>{}</summary>\n\n", inline(&title)),
        DETAILS_END,
    ));
    for chunk in names.chunks(100) {
        pieces.push(Piece::Text(format!("{}\n", name_list(chunk, chunk.len()))));
    }
    pieces.push(Piece::Close);
}

/// `` `a`, `b`, `c` and 12 more ``.
fn name_list(names: &[&str], max: usize) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(max)
        .map(|n| format!("`{}`", crate::preview::html(n)))
        .collect();
    let mut out = shown.join(", ");
    if names.len() > max {
        let _ = write!(out, " and {} more", names.len() - max);
    }
    out
}

/// `96 (−24)`, `40 (+37)`, `3`.
fn with_delta(before: u64, after: u64) -> String {
    match after.cmp(&before) {
        std::cmp::Ordering::Equal => after.to_string(),
        std::cmp::Ordering::Greater => format!("{after} (+{})", after - before),
        std::cmp::Ordering::Less => format!("{after} (−{})", before - after),
    }
}

/// The queues whose GPUs or pending jobs change, before and after.
fn queue_table(queues: &[QueueChange], pieces: &mut Vec<Piece>) {
    let changed: Vec<&QueueChange> = queues.iter().filter(|q| !q.is_unchanged()).collect();
    if changed.is_empty() {
        return;
    }
    let mut b = String::from(
        "| queue | GPUs before | GPUs after | pending before | pending after |\n\
         |---|--:|--:|--:|--:|\n",
    );
    for q in changed.iter().take(MAX_QUEUE_ROWS) {
        let _ = writeln!(
            b,
            "| `{}` | {} | {} | {} | {} |",
            crate::preview::html(&q.queue),
            q.gpus_before,
            with_delta(q.gpus_before, q.gpus_after),
            q.pending_before,
            with_delta(q.pending_before, q.pending_after)
        );
    }
    let unchanged = queues.len() - changed.len();
    let hidden = changed.len().saturating_sub(MAX_QUEUE_ROWS);
    b.push('\n');
    let mut notes = Vec::new();
    if hidden > 0 {
        notes.push(format!(
            "{hidden} more queue{} change (see `-o json`)",
            plural(hidden)
        ));
    }
    if unchanged > 0 {
        notes.push(format!(
            "{unchanged} other queue{} unchanged",
            plural(unchanged)
        ));
    }
    if !notes.is_empty() {
        let _ = writeln!(b, "{}.\n", notes.join("; "));
    }
    pieces.push(Piece::Text(b));
}

/// A Mermaid `xychart-beta` of GPUs per queue, bars before and a line
/// after (its bars of two series would overlap), for the queues whose GPUs
/// change most; `None` when no queue's GPUs change.
fn queue_chart(queues: &[QueueChange]) -> Option<String> {
    let mut changed: Vec<&QueueChange> = queues
        .iter()
        .filter(|q| q.gpus_before != q.gpus_after)
        .collect();
    if changed.is_empty() {
        return None;
    }
    changed.sort_by_key(|q| std::cmp::Reverse(q.gpus_before.abs_diff(q.gpus_after)));
    changed.truncate(MAX_CHART_QUEUES);
    changed.sort_by(|a, b| natural_cmp(&a.queue, &b.queue));
    let names: Vec<String> = changed
        .iter()
        .map(|q| format!("\"{}\"", q.queue.replace(['"', '\n'], "")))
        .collect();
    let series = |f: fn(&QueueChange) -> u64| -> String {
        changed
            .iter()
            .map(|q| f(q).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut b = String::from("```mermaid\nxychart-beta\n");
    let _ = writeln!(
        b,
        "    title \"GPUs per queue whose GPUs change (bars: base, line: head)\""
    );
    let _ = writeln!(b, "    x-axis [{}]", names.join(", "));
    let _ = writeln!(b, "    y-axis \"GPUs\"");
    let _ = writeln!(b, "    bar [{}]", series(|q| q.gpus_before));
    let _ = writeln!(b, "    line [{}]", series(|q| q.gpus_after));
    b.push_str("```\n\n");
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(shown: usize, total: usize) -> String {
        format!("\n[cut: {shown} of {total}]\n")
    }

    #[test]
    fn a_cut_closes_what_is_open_and_says_so() {
        let pieces = vec![
            Piece::Text("intro\n".into()),
            Piece::Open("<details>\n".into(), "</details>\n"),
            Piece::Text("x".repeat(40)),
            Piece::Text("y".repeat(40)),
            Piece::Close,
            Piece::Text("after\n".into()),
        ];
        let all = fit(String::new(), pieces.clone(), 10_000, note);
        assert_eq!(
            all,
            format!(
                "intro\n<details>\n{}{}</details>\nafter\n",
                "x".repeat(40),
                "y".repeat(40)
            )
        );
        let cut = fit(String::new(), pieces, 100, note);
        assert!(cut.len() <= 100, "{} bytes", cut.len());
        assert_eq!(
            cut,
            format!(
                "intro\n<details>\n{}</details>\n\n[cut: 3 of 5]\n",
                "x".repeat(40)
            )
        );
    }

    #[test]
    fn deltas_and_name_lists() {
        assert_eq!(with_delta(120, 96), "96 (−24)");
        assert_eq!(with_delta(3, 40), "40 (+37)");
        assert_eq!(with_delta(5, 5), "5");
        assert_eq!(name_list(&["a", "b", "c"], 2), "`a`, `b` and 1 more");
    }
}

#[cfg(test)]
mod scenario_tests {
    use super::*;
    use diff::plan_diff::{PlanDiffSummary, TargetChange};
    use model::observed::NodeGpus;
    use model::plan::Summary;

    fn placed(node: &str) -> JobOutcome {
        JobOutcome::Placed {
            placement: vec![NodeGpus {
                node: node.into(),
                gpus: vec![0],
            }],
        }
    }

    fn pending(reason: &str) -> JobOutcome {
        JobOutcome::Pending {
            reason: reason.into(),
        }
    }

    fn change(job: &str, before: JobOutcome, after: JobOutcome) -> JobChange {
        JobChange {
            job: job.into(),
            queue: None,
            text: format!("job {job} changed"),
            before,
            after,
        }
    }

    fn queue(name: &str, gpus: (u64, u64), pending: (u64, u64)) -> QueueChange {
        QueueChange {
            queue: name.into(),
            gpus_before: gpus.0,
            gpus_after: gpus.1,
            pending_before: pending.0,
            pending_after: pending.1,
        }
    }

    fn diff(jobs: Vec<JobChange>, queues: Vec<QueueChange>) -> PlanDiff {
        PlanDiff {
            summary: PlanDiffSummary::default(),
            jobs,
            targets: vec![TargetChange {
                action: "scale".into(),
                target: "p".into(),
                before: None,
                after: Some("2 → 4 nodes".into()),
                text: "pool p scales 2 → 4 nodes (was no scaling)".into(),
            }],
            before: Summary::default(),
            after: Summary::default(),
            queues,
        }
    }

    fn render(plan: &PlanDiff) -> String {
        fit(String::new(), scheduling(plan), 1 << 20, |_, _| {
            String::new()
        })
    }

    #[test]
    fn changes_come_by_severity_and_long_runs_collapse() {
        // by name, the order a plan diff lists them in; severity reorders
        let mut jobs = vec![
            change("a-moved", placed("n1"), placed("n2")),
            change("b-cancelled", placed("n1"), JobOutcome::Cancelled),
            change("c-placed", pending("no GPUs"), placed("n3")),
            change("d-pending", placed("n4"), pending("queue q: 0 left")),
            change(
                "e-preempted",
                JobOutcome::None,
                JobOutcome::Preempted {
                    for_job: "c-placed".into(),
                },
            ),
        ];
        for i in [10, 2, 1, 11, 3, 4, 5, 6, 7, 8, 9, 12] {
            let reason = if i % 3 == 0 { "quota" } else { "no room" };
            jobs.push(change(&format!("s{i}"), pending("before"), pending(reason)));
        }
        let md = render(&diff(jobs, vec![]));
        let order = [
            "**1 job newly preempted**",
            "| `-` | job e-preempted changed |",
            "**1 job newly pending**",
            "| `!` | job d-pending changed |",
            "**1 job cancelled, terminated or no longer placed**",
            "**1 scaling/drain change**",
            "| `~` | pool p scales 2 → 4 nodes (was no scaling) |",
            "**1 job newly placed**",
            "<details><summary>12 jobs still pending; reasons changed: 2 kinds</summary>",
            // most frequent reason first, jobs in natural order
            "- 8 jobs now: no room — `s1`, `s2`, `s4`, `s5`, `s7`, `s8`, `s10`, `s11`",
            "- 4 jobs now: quota — `s3`, `s6`, `s9`, `s12`",
            "**1 job placed either way, on other GPUs**: `a-moved`",
        ];
        let at: Vec<usize> = order
            .iter()
            .map(|n| {
                md.find(n)
                    .unwrap_or_else(|| panic!("missing {n:?} in\n{md}"))
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}\n{md}");
        assert!(
            !md.contains("job s1 changed"),
            "collapsed rows shown:\n{md}"
        );
        assert_eq!(
            md.matches("<details>").count(),
            md.matches("</details>").count()
        );
    }

    #[test]
    fn a_few_still_pending_stay_rows_and_long_groups_open_the_first_rows() {
        let mut jobs: Vec<JobChange> = (0..3)
            .map(|i| change(&format!("s{i}"), pending("a"), pending("b")))
            .collect();
        for i in 0..30 {
            jobs.push(change(&format!("p{i}"), placed("n1"), pending("full")));
        }
        let md = render(&diff(jobs, vec![]));
        assert!(
            md.contains("**3 jobs still pending; reasons changed: 1 kind**"),
            "{md}"
        );
        assert!(md.contains("| `!` | job s2 changed |"), "{md}");
        // 30 newly pending: 25 rows open, 5 in <details>, in natural order
        let open_end = md.find("<details><summary>5 more</summary>").unwrap();
        assert!(md[..open_end].contains("| `!` | job p24 changed |"), "{md}");
        assert!(md[open_end..].contains("| `!` | job p25 changed |"), "{md}");
        assert!(md.find("job p2 changed").unwrap() < md.find("job p10 changed").unwrap());
    }

    #[test]
    fn the_queue_table_and_chart_show_what_changes() {
        let queues = vec![
            queue("q2", (16, 8), (0, 2)),
            queue("q10", (4, 4), (1, 1)),
            queue("q1", (0, 0), (3, 1)),
        ];
        let md = render(&diff(vec![], queues.clone()));
        assert!(
            md.contains(
                "| queue | GPUs before | GPUs after | pending before | pending after |\n\
                 |---|--:|--:|--:|--:|\n\
                 | `q2` | 16 | 8 (−8) | 0 | 2 (+2) |\n\
                 | `q1` | 0 | 0 | 3 | 1 (−2) |\n\n\
                 1 other queue unchanged.\n"
            ),
            "{md}"
        );
        // only q2's GPUs change: the chart has it alone
        assert!(
            md.contains(
                "```mermaid\nxychart-beta\n    title \"GPUs per queue whose GPUs change (bars: base, line: head)\"\n    \
                 x-axis [\"q2\"]\n    y-axis \"GPUs\"\n    bar [16]\n    line [8]\n```\n"
            ),
            "{md}"
        );
        // nothing changes per queue: neither table nor chart
        let same = vec![queue("q", (8, 8), (1, 1))];
        let md = render(&diff(vec![], same));
        assert!(!md.contains("| queue |") && !md.contains("mermaid"), "{md}");
    }
}
