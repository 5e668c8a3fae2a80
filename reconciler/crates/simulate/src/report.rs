//! A report in words: text for a terminal, Markdown for a pull request.

use crate::Report;

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
