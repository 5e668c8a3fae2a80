//! The what-if of a pull request (`plan --base B --rev H --simulate
//! TRACE`): one trace replayed under both revisions' fleets, and per leaf
//! queue what the change does to its waits, its share of the GPU-hours and
//! its preemptions. Serialized as the preview's `simulation` key.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::{Metrics, Report};

/// Both replays and the per-queue deltas (head − base).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The trace file as given.
    pub trace: String,
    /// The replay's policy (`gitfleet`).
    pub policy: String,
    /// The replay under the base revision's fleet.
    pub base: Side,
    /// The replay under the head revision's fleet.
    pub head: Side,
    /// Per leaf queue of either side, by name: head − base.
    pub queues: BTreeMap<String, Delta>,
}

/// One revision's replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// Jobs replayed.
    pub jobs: u64,
    /// Trace rows left out.
    pub dropped: u64,
    /// Overall metrics, as `simulate -o json` has them.
    pub metrics: Metrics,
    /// Per leaf queue.
    pub queues: BTreeMap<String, QueueSide>,
}

/// One leaf queue in one revision's replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueSide {
    /// Jobs replayed.
    pub jobs: u64,
    /// Median queueing delay.
    pub p50_wait_s: u64,
    /// 95th percentile of the queueing delay.
    pub p95_wait_s: u64,
    /// GPU-hours its jobs held.
    pub gpu_hours: f64,
    /// Its GPU-hours ÷ all queues' GPU-hours (0 when none ran).
    pub gpu_share: f64,
    /// Times its jobs were preempted.
    pub preemptions: u64,
}

/// What the change does to one queue: head − base (a queue missing on a
/// side counts as zeros there).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Delta {
    /// Change of the median wait, seconds.
    pub p50_wait_s: i64,
    /// Change of the 95th-percentile wait, seconds.
    pub p95_wait_s: i64,
    /// Change of the GPU-hours share (−1 to 1).
    pub gpu_share: f64,
    /// Change of the number of preemptions.
    pub preemptions: i64,
}

impl Side {
    /// One replay's figures.
    pub fn of(report: &Report) -> Side {
        let total: f64 = report.queues.values().map(|q| q.gpu_hours).sum();
        let queues = report
            .queues
            .iter()
            .map(|(name, q)| {
                let side = QueueSide {
                    jobs: q.jobs,
                    p50_wait_s: q.p50_wait_s,
                    p95_wait_s: q.p95_wait_s,
                    gpu_hours: q.gpu_hours,
                    gpu_share: share(q.gpu_hours, total),
                    preemptions: q.preemptions,
                };
                (name.clone(), side)
            })
            .collect();
        Side {
            jobs: report.jobs,
            dropped: report.dropped,
            metrics: report.metrics.clone(),
            queues,
        }
    }
}

impl Comparison {
    /// The comparison of the replays `base` and `head` of `trace`.
    pub fn new(trace: &str, base: &Report, head: &Report) -> Comparison {
        let (base_side, head_side) = (Side::of(base), Side::of(head));
        let names: BTreeSet<&String> = base_side
            .queues
            .keys()
            .chain(head_side.queues.keys())
            .collect();
        let zero = QueueSide::default();
        let queues = names
            .into_iter()
            .map(|name| {
                let b = base_side.queues.get(name).unwrap_or(&zero);
                let h = head_side.queues.get(name).unwrap_or(&zero);
                let delta = Delta {
                    p50_wait_s: signed(h.p50_wait_s) - signed(b.p50_wait_s),
                    p95_wait_s: signed(h.p95_wait_s) - signed(b.p95_wait_s),
                    gpu_share: round4(h.gpu_share - b.gpu_share),
                    preemptions: signed(h.preemptions) - signed(b.preemptions),
                };
                (name.clone(), delta)
            })
            .collect();
        Comparison {
            trace: trace.to_string(),
            policy: head.policy.clone(),
            base: base_side,
            head: head_side,
            queues,
        }
    }
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn share(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        return 0.0;
    }
    round4(part / whole)
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{QueueMetrics, Totals};

    fn report(nlp: (u64, u64, f64, u64), cv_hours: f64) -> Report {
        let (p50, p95, gpu_hours, preemptions) = nlp;
        Report {
            format_version: 1,
            policy: "gitfleet".to_string(),
            jobs: 4,
            dropped: 0,
            metrics: Metrics::default(),
            queues: [
                (
                    "nlp".to_string(),
                    QueueMetrics {
                        p50_wait_s: p50,
                        p95_wait_s: p95,
                        gpu_hours,
                        preemptions,
                        ..QueueMetrics::default()
                    },
                ),
                (
                    "cv".to_string(),
                    QueueMetrics {
                        gpu_hours: cv_hours,
                        ..QueueMetrics::default()
                    },
                ),
            ]
            .into_iter()
            .collect(),
            totals: Totals::default(),
        }
    }

    #[test]
    fn deltas_are_head_minus_base() {
        let base = report((100, 400, 3.0, 2), 1.0);
        let head = report((40, 500, 1.0, 0), 3.0);
        let c = Comparison::new("t.csv", &base, &head);
        assert_eq!(c.base.queues["nlp"].gpu_share, 0.75);
        assert_eq!(c.head.queues["nlp"].gpu_share, 0.25);
        assert_eq!(
            c.queues["nlp"],
            Delta {
                p50_wait_s: -60,
                p95_wait_s: 100,
                gpu_share: -0.5,
                preemptions: -2,
            }
        );
        assert_eq!(c.queues["cv"].gpu_share, 0.5);
    }
}
