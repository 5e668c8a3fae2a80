//! A report in words: text for a terminal, Markdown for a pull request.

use crate::Report;
use crate::compare::{Comparison, QueueSide};

/// The report for a terminal.
pub fn text(r: &Report) -> String {
    let m = &r.metrics;
    let t = &r.totals;
    let mut out = format!(
        "policy {}: {} jobs replayed, {} dropped, {} plans\n",
        r.policy, r.jobs, r.dropped, t.plans
    );
    out.push_str(&format!(
        "  wait (first start − submit): avg {}, p50 {}, p95 {}, max {}\n",
        dur(m.avg_wait_s),
        dur(m.p50_wait_s),
        dur(m.p95_wait_s),
        dur(m.max_wait_s)
    ));
    out.push_str(&format!(
        "  time pending, every spell (waits after preemptions too): avg {}\n",
        dur(m.avg_pending_s)
    ));
    out.push_str(&format!(
        "  avg JCT {}, makespan {}\n  GPU allocation {:.1} % ({:.1} % while jobs wait)\n",
        dur(m.avg_jct_s),
        dur(m.makespan_s),
        m.gpu_alloc * 100.0,
        m.gpu_alloc_backlog * 100.0
    ));
    out.push_str(&format!(
        "  preemptions {} ({:.1} GPU-hours lost), terminated at time limit {}\n",
        m.preemptions, t.lost_gpu_hours, t.terminated
    ));
    if t.never_started > 0 || t.unfinished > 0 {
        out.push_str(&format!(
            "  never started {} (their wait counts to the end), unfinished {}\n",
            t.never_started, t.unfinished
        ));
    }
    let width = r.queues.keys().map(String::len).max().unwrap_or(5).max(5);
    out.push_str(&format!(
        "\n  {:<width$}  {:>7}  {:>10}  {:>10}  {:>10}\n",
        "queue", "jobs", "avg wait", "p95 wait", "GPU-hours"
    ));
    for [name, jobs, avg, p95, hours] in queue_rows(r) {
        out.push_str(&format!(
            "  {name:<width$}  {jobs:>7}  {avg:>10}  {p95:>10}  {hours:>10}\n"
        ));
    }
    out
}

/// The report as a pull-request comment.
pub fn markdown(r: &Report) -> String {
    let m = &r.metrics;
    let mut out = format!(
        "### gitfleet simulate: policy `{}`\n\n{} jobs replayed, {} dropped.\n\n",
        r.policy, r.jobs, r.dropped
    );
    out.push_str("| avg wait | p50 wait | p95 wait | max wait | avg JCT | makespan | GPU alloc | alloc while waiting | preemptions |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    out.push_str(&format!(
        "| {} | {} | {} | {} | {} | {} | {:.1} % | {:.1} % | {} |\n\n",
        dur(m.avg_wait_s),
        dur(m.p50_wait_s),
        dur(m.p95_wait_s),
        dur(m.max_wait_s),
        dur(m.avg_jct_s),
        dur(m.makespan_s),
        m.gpu_alloc * 100.0,
        m.gpu_alloc_backlog * 100.0,
        m.preemptions
    ));
    out.push_str(
        "| queue | jobs | avg wait | p95 wait | GPU-hours |\n| --- | ---: | ---: | ---: | ---: |\n",
    );
    for [name, jobs, avg, p95, hours] in queue_rows(r) {
        out.push_str(&format!(
            "| `{name}` | {jobs} | {avg} | {p95} | {hours} |\n"
        ));
    }
    out
}

/// The what-if of a change for a terminal: per queue, base → head.
pub fn comparison_text(c: &Comparison) -> String {
    let mut out = format!(
        "\nSimulated what-if ({} replayed under both revisions, policy {}): {} → {} jobs\n",
        c.trace, c.policy, c.base.jobs, c.head.jobs
    );
    let (b, h) = (&c.base.metrics, &c.head.metrics);
    out.push_str(&format!(
        "  overall: wait p50 {} → {}, p95 {} → {}, preemptions {} → {}\n",
        dur(b.p50_wait_s),
        dur(h.p50_wait_s),
        dur(b.p95_wait_s),
        dur(h.p95_wait_s),
        b.preemptions,
        h.preemptions
    ));
    let rows = comparison_rows(c);
    let width = rows.iter().map(|r| r[0].len()).max().unwrap_or(5).max(5);
    let cols: [usize; 4] = std::array::from_fn(|i| {
        rows.iter()
            .map(|r| r[i + 1].chars().count())
            .chain([[8, 8, 9, 11][i]])
            .max()
            .unwrap_or(0)
    });
    out.push_str(&format!(
        "  {:<width$}  {:<a$}  {:<b$}  {:<c$}  {}\n",
        "queue",
        "p50 wait",
        "p95 wait",
        "GPU share",
        "preemptions",
        a = cols[0],
        b = cols[1],
        c = cols[2]
    ));
    for [name, p50, p95, share, pre] in rows {
        let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w - s.chars().count().min(w)));
        out.push_str(&format!(
            "  {name:<width$}  {}  {}  {}  {pre}\n",
            pad(&p50, cols[0]),
            pad(&p95, cols[1]),
            pad(&share, cols[2])
        ));
    }
    out
}

/// The what-if of a change as a compact Markdown table for the PR comment.
pub fn comparison_markdown(c: &Comparison) -> String {
    let mut out = format!(
        "#### Simulated what-if\n\n`{}` replayed under both revisions (policy `{}`, {} → {} jobs). Per queue, base → head (change):\n\n",
        c.trace.replace('`', "'"),
        c.policy,
        c.base.jobs,
        c.head.jobs
    );
    out.push_str("| queue | p50 wait | p95 wait | GPU-hours share | preemptions |\n| --- | --- | --- | --- | --- |\n");
    for [name, p50, p95, share, pre] in comparison_rows(c) {
        out.push_str(&format!("| `{name}` | {p50} | {p95} | {share} | {pre} |\n"));
    }
    out.push('\n');
    out
}

/// Per queue: name, p50 wait, p95 wait, GPU share, preemptions, each
/// `base → head (±change)`.
fn comparison_rows(c: &Comparison) -> Vec<[String; 5]> {
    let zero = QueueSide::default();
    c.queues
        .iter()
        .map(|(name, d)| {
            let b = c.base.queues.get(name).unwrap_or(&zero);
            let h = c.head.queues.get(name).unwrap_or(&zero);
            let wait = |b: u64, h: u64, d: i64| {
                let sign = if d < 0 { "−" } else { "+" };
                format!("{} → {} ({sign}{})", dur(b), dur(h), dur(d.unsigned_abs()))
            };
            let sign = |v: f64| if v < 0.0 { "−" } else { "+" };
            [
                name.clone(),
                wait(b.p50_wait_s, h.p50_wait_s, d.p50_wait_s),
                wait(b.p95_wait_s, h.p95_wait_s, d.p95_wait_s),
                format!(
                    "{:.1} % → {:.1} % ({}{:.1} pp)",
                    b.gpu_share * 100.0,
                    h.gpu_share * 100.0,
                    sign(d.gpu_share),
                    (d.gpu_share * 100.0).abs()
                ),
                format!(
                    "{} → {} ({}{})",
                    b.preemptions,
                    h.preemptions,
                    if d.preemptions < 0 { "−" } else { "+" },
                    d.preemptions.unsigned_abs()
                ),
            ]
        })
        .collect()
}

/// Per queue: name, jobs, average and p95 wait in words, GPU-hours.
fn queue_rows(r: &Report) -> impl Iterator<Item = [String; 5]> + '_ {
    r.queues.iter().map(|(name, q)| {
        [
            name.clone(),
            q.jobs.to_string(),
            dur(q.avg_wait_s),
            dur(q.p95_wait_s),
            format!("{:.1}", q.gpu_hours),
        ]
    })
}

/// Seconds in words: `42s`, `3m20s`, `5h07m`, `2d03h`.
fn dur(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}
