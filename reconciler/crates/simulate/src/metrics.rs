//! The replay's metrics (docs/simulate.md defines each), overall and per
//! leaf queue, as `simulate -o json` prints them (DESIGN.md §6a).

use std::collections::BTreeMap;

use serde::Serialize;

use model::spec::Fleet;

use crate::Policy;
use crate::jobs::Prepared;
use crate::replay::Outcome;

/// `simulate -o json`: stable (`format_version`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// 1.
    pub format_version: u32,
    /// The policy's name.
    pub policy: String,
    /// Jobs replayed (arrived before `--until`).
    pub jobs: u64,
    /// Trace rows left out (by the adapter, or never able to run on the fleet).
    pub dropped: u64,
    /// Overall metrics.
    pub metrics: Metrics,
    /// Per leaf queue, by name.
    pub queues: BTreeMap<String, QueueMetrics>,
    /// More figures for the text and Markdown forms (not in the JSON).
    #[serde(skip)]
    pub totals: Totals,
}

/// Overall metrics; times in whole seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Mean queueing delay (first start − submit).
    pub avg_wait_s: u64,
    /// Median queueing delay.
    pub p50_wait_s: u64,
    /// 95th percentile of the queueing delay.
    pub p95_wait_s: u64,
    /// Largest queueing delay.
    pub max_wait_s: u64,
    /// Mean time pending, every spell (submit to end, or to the last
    /// instant, less the time running): unlike the queueing delay, it
    /// counts the waits after a preemption.
    pub avg_pending_s: u64,
    /// Mean job completion time (end − submit) of jobs that ended.
    pub avg_jct_s: u64,
    /// First submit to the last instant replayed.
    pub makespan_s: u64,
    /// Allocated GPU-time ÷ ready GPU-time.
    pub gpu_alloc: f64,
    /// The same over the time some job was pending.
    pub gpu_alloc_backlog: f64,
    /// Preemptions carried out.
    pub preemptions: u64,
}

/// One leaf queue's metrics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueMetrics {
    /// Jobs replayed.
    pub jobs: u64,
    /// Mean queueing delay.
    pub avg_wait_s: u64,
    /// 95th percentile of the queueing delay.
    pub p95_wait_s: u64,
    /// GPU-hours its jobs held (preempted runs included).
    pub gpu_hours: f64,
    /// Median queueing delay (not in `simulate -o json`; in `plan
    /// --simulate`'s comparison and `--fail-on`).
    #[serde(skip)]
    pub p50_wait_s: u64,
    /// Times its jobs were preempted (as `p50_wait_s`).
    #[serde(skip)]
    pub preemptions: u64,
    /// Its share of GPU-time among its siblings while it had jobs pending
    /// (as `p50_wait_s`; docs/simulate.md).
    #[serde(skip)]
    pub share: f64,
    /// Its weight ÷ its and its siblings' weights (as `p50_wait_s`).
    #[serde(skip)]
    pub weight_share: f64,
}

/// Figures beside the JSON's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Jobs that arrived but never started (their wait counts up to the end).
    pub never_started: u64,
    /// Jobs that arrived and have not ended.
    pub unfinished: u64,
    /// Jobs terminated at their time limit.
    pub terminated: u64,
    /// GPU-hours of runs cut short by preemption.
    pub lost_gpu_hours: f64,
    /// Plans computed.
    pub plans: u64,
}

/// The report of a replay.
pub(crate) fn report(
    fleet: &Fleet,
    prepared: &Prepared,
    out: &Outcome,
    policy: Policy,
    dropped: u64,
) -> Report {
    let end = out.end;
    let mut waits: Vec<i64> = Vec::new();
    let mut per_queue: BTreeMap<&str, (Vec<i64>, u128, u64)> = BTreeMap::new();
    let mut jct_sum: i128 = 0;
    let mut jct_n: i128 = 0;
    let mut totals = Totals {
        plans: out.plans,
        ..Totals::default()
    };
    let mut lost: u128 = 0;
    let mut pending: Vec<i64> = Vec::new();
    for (job, run) in prepared.jobs.iter().zip(&out.runs) {
        if !run.arrived {
            continue;
        }
        if let Some(last) = run.end.or(end) {
            let ran: i64 = run
                .runs
                .iter()
                .map(|(s, e)| (e.unwrap_or(last) - *s).num_milliseconds().max(0))
                .sum();
            pending.push(((last - job.submit).num_milliseconds() - ran).max(0));
        }
        let started = run.first_start.or(end);
        let wait = started.map_or(0, |s| (s - job.submit).num_milliseconds().max(0));
        waits.push(wait);
        let q = per_queue.entry(job.queue()).or_default();
        q.0.push(wait);
        q.1 += run.gpu_ms;
        q.2 += u64::from(run.preemptions);
        lost += run.lost_gpu_ms;
        if run.first_start.is_none() {
            totals.never_started += 1;
        }
        match run.end {
            Some(e) => {
                jct_sum += i128::from((e - job.submit).num_milliseconds().max(0));
                jct_n += 1;
            }
            None => totals.unfinished += 1,
        }
        if run.terminated {
            totals.terminated += 1;
        }
    }
    totals.lost_gpu_hours = hours(lost);
    let makespan = match (out.start, end) {
        (Some(s), Some(e)) => secs((e - s).num_milliseconds().max(0)),
        _ => 0,
    };
    let metrics = Metrics {
        avg_wait_s: mean(&waits),
        p50_wait_s: percentile(&mut waits, 0.50),
        p95_wait_s: percentile(&mut waits, 0.95),
        max_wait_s: secs(waits.iter().copied().max().unwrap_or(0)),
        avg_pending_s: mean(&pending),
        avg_jct_s: if jct_n == 0 {
            0
        } else {
            // A mean of non-negative i64s fits an i64.
            secs((jct_sum / jct_n) as i64)
        },
        makespan_s: makespan,
        gpu_alloc: ratio(out.alloc),
        gpu_alloc_backlog: ratio(out.alloc_backlog),
        preemptions: out.preemptions,
    };
    let shares = crate::shares::shares(fleet, prepared, out);
    let queues = per_queue
        .into_iter()
        .map(|(name, (mut w, gpu_ms, preemptions))| {
            let (share, weight_share) = shares.get(name).copied().unwrap_or((1.0, 1.0));
            let m = QueueMetrics {
                share,
                weight_share,
                jobs: w.len() as u64,
                avg_wait_s: mean(&w),
                p95_wait_s: percentile(&mut w, 0.95),
                gpu_hours: hours(gpu_ms),
                p50_wait_s: percentile(&mut w, 0.50),
                preemptions,
            };
            (name.to_string(), m)
        })
        .collect();
    Report {
        format_version: 1,
        policy: policy.name().to_string(),
        jobs: waits.len() as u64,
        dropped,
        metrics,
        queues,
        totals,
    }
}

/// Milliseconds as whole seconds, rounded.
fn secs(ms: i64) -> u64 {
    (ms.max(0) as u64).saturating_add(500) / 1000
}

fn mean(ms: &[i64]) -> u64 {
    if ms.is_empty() {
        return 0;
    }
    let sum: i128 = ms.iter().map(|&m| i128::from(m)).sum();
    // A mean of i64s fits an i64.
    secs((sum / ms.len() as i128) as i64)
}

/// Nearest-rank percentile: the smallest value with at least `p` of the
/// values at or below it.
fn percentile(ms: &mut [i64], p: f64) -> u64 {
    if ms.is_empty() {
        return 0;
    }
    ms.sort_unstable();
    let rank = (p * ms.len() as f64).ceil() as usize;
    secs(ms[rank.clamp(1, ms.len()) - 1])
}

fn ratio((part, whole): (f64, f64)) -> f64 {
    if whole <= 0.0 {
        return 0.0;
    }
    ((part / whole) * 10_000.0).round() / 10_000.0
}

fn hours(gpu_ms: u128) -> f64 {
    ((gpu_ms as f64 / 3_600_000.0) * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_and_means() {
        let mut v: Vec<i64> = (1..=100).map(|s| s * 1000).collect();
        assert_eq!(percentile(&mut v, 0.5), 50);
        assert_eq!(percentile(&mut v, 0.95), 95);
        assert_eq!(mean(&v), 51);
        assert_eq!(percentile(&mut [], 0.5), 0);
        assert_eq!(percentile(&mut [7000], 0.95), 7);
        assert_eq!(ratio((1.0, 3.0)), 0.3333);
    }
}
