//! What `--plot` draws: the state after each event instant, recorded by
//! the replay only when asked ([`Samples`]), and the [`Series`] made of it
//! and of the jobs' waits.

use std::collections::BTreeMap;

use model::spec::Fleet;
use model::time::Timestamp;

use crate::jobs::{Prepared, SimJob};
use crate::replay::Outcome;

/// The state after each event instant, for `--plot`: kept to at most
/// [`MAX_SAMPLES`] by merging neighbours (each merged sample keeps the
/// first instant and the largest values).
#[derive(Debug, Clone, Default)]
pub(crate) struct Samples {
    /// Top-level queues, by name (the columns of `depth`).
    pub tops: Vec<String>,
    /// Per job, its top-level queue's column.
    job_top: Vec<usize>,
    /// Pending jobs per top-level queue, now.
    pending: Vec<u32>,
    /// Instants.
    pub at: Vec<Timestamp>,
    /// Allocated GPUs, GPUs of ready nodes.
    pub gpus: Vec<(u64, u64)>,
    /// Pending jobs per top-level queue (`tops.len()` per instant).
    pub depth: Vec<u32>,
    /// Instants per sample now (doubles at each merge).
    stride: usize,
    /// Instants folded into the last sample so far.
    folded: usize,
}

/// The most samples a replay keeps.
pub(crate) const MAX_SAMPLES: usize = 2_000;

impl Samples {
    pub(crate) fn new(fleet: &Fleet, jobs: &[SimJob]) -> Samples {
        let parent: BTreeMap<&str, Option<&str>> = fleet
            .queues
            .iter()
            .map(|q| (q.name(), q.spec.parent.as_deref()))
            .collect();
        let top = |leaf: &str| -> String {
            let mut q = leaf.to_string();
            // A bounded climb: the loader refuses cycles, this refuses to hang.
            for _ in 0..parent.len() {
                match parent.get(q.as_str()).copied().flatten() {
                    Some(p) => q = p.to_string(),
                    None => break,
                }
            }
            q
        };
        let tops: Vec<String> = parent
            .iter()
            .filter(|(_, p)| p.is_none())
            .map(|(q, _)| q.to_string())
            .collect();
        let top_of: BTreeMap<String, usize> = parent
            .keys()
            .map(|q| {
                let t = top(q);
                (
                    q.to_string(),
                    tops.iter().position(|x| *x == t).unwrap_or(0),
                )
            })
            .collect();
        let job_top = jobs
            .iter()
            .map(|j| top_of.get(j.queue()).copied().unwrap_or(0))
            .collect();
        Samples {
            pending: vec![0; tops.len()],
            tops,
            job_top,
            stride: 1,
            ..Samples::default()
        }
    }

    /// The state at `at`.
    pub(crate) fn push(&mut self, at: Timestamp, allocated: u64, capacity: u64) {
        if self.folded > 0 && self.folded < self.stride {
            self.folded += 1;
            let n = self.tops.len();
            if let Some(g) = self.gpus.last_mut() {
                *g = (g.0.max(allocated), g.1.max(capacity));
            }
            let start = self.depth.len() - n;
            for (d, p) in self.depth[start..].iter_mut().zip(&self.pending) {
                *d = (*d).max(*p);
            }
            return;
        }
        self.at.push(at);
        self.gpus.push((allocated, capacity));
        self.depth.extend_from_slice(&self.pending);
        self.folded = 1;
        if self.at.len() >= MAX_SAMPLES {
            self.halve();
        }
    }

    /// Merges neighbouring samples in pairs.
    fn halve(&mut self) {
        let n = self.tops.len();
        let len = self.at.len();
        let mut at = Vec::with_capacity(len / 2 + 1);
        let mut gpus = Vec::with_capacity(len / 2 + 1);
        let mut depth = Vec::with_capacity((len / 2 + 1) * n);
        for i in (0..len).step_by(2) {
            at.push(self.at[i]);
            let (a, b) = (
                self.gpus[i],
                self.gpus.get(i + 1).copied().unwrap_or(self.gpus[i]),
            );
            gpus.push((a.0.max(b.0), a.1.max(b.1)));
            for k in 0..n {
                let x = self.depth[i * n + k];
                let y = self.depth.get((i + 1) * n + k).copied().unwrap_or(x);
                depth.push(x.max(y));
            }
        }
        // The last sample, if merged with its neighbour, goes on folding.
        self.folded = if len.is_multiple_of(2) {
            self.stride + self.folded
        } else {
            self.folded
        };
        self.stride *= 2;
        self.at = at;
        self.gpus = gpus;
        self.depth = depth;
    }

    /// Job `i` joined the pending jobs.
    pub(crate) fn queued(&mut self, i: usize) {
        if let Some(p) = self.job_top.get(i).and_then(|t| self.pending.get_mut(*t)) {
            *p += 1;
        }
    }

    /// Job `i` left the pending jobs.
    pub(crate) fn unqueued(&mut self, i: usize) {
        if let Some(p) = self.job_top.get(i).and_then(|t| self.pending.get_mut(*t)) {
            *p = p.saturating_sub(1);
        }
    }
}

/// A replay's time series, for `--plot`: at most 2,000 samples (the state
/// after an event instant; where instants were merged, the first instant
/// and the largest values).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Per sample, seconds from the first arrival.
    pub at_s: Vec<f64>,
    /// Per sample, allocated GPUs.
    pub allocated: Vec<u64>,
    /// Per sample, GPUs of ready nodes.
    pub capacity: Vec<u64>,
    /// Per top-level queue: pending jobs of its subtree, per sample.
    pub depth: BTreeMap<String, Vec<u32>>,
    /// Per leaf queue: its jobs' queueing delays in seconds, ascending.
    pub waits: BTreeMap<String, Vec<f64>>,
}

/// The [`Series`] of a replay that recorded its [`Samples`].
pub(crate) fn series(prepared: &Prepared, outcome: &mut Outcome) -> Series {
    let samples = outcome.samples.take().unwrap_or_default();
    let start = outcome.start.unwrap_or_else(crate::origin);
    let secs = |a: Timestamp, b: Timestamp| (a - b).num_milliseconds().max(0) as f64 / 1000.0;
    let n = samples.tops.len();
    let mut depth: BTreeMap<String, Vec<u32>> = samples
        .tops
        .iter()
        .map(|t| (t.clone(), Vec::with_capacity(samples.at.len())))
        .collect();
    for row in samples.depth.chunks(n.max(1)) {
        for (top, d) in samples.tops.iter().zip(row) {
            if let Some(v) = depth.get_mut(top) {
                v.push(*d);
            }
        }
    }
    let mut waits: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (job, run) in prepared.jobs.iter().zip(&outcome.runs) {
        if !run.arrived {
            continue;
        }
        let started = run.first_start.or(outcome.end).unwrap_or(job.submit);
        waits
            .entry(job.queue().to_string())
            .or_default()
            .push(secs(started, job.submit));
    }
    for w in waits.values_mut() {
        w.sort_by(f64::total_cmp);
    }
    Series {
        at_s: samples.at.iter().map(|t| secs(*t, start)).collect(),
        allocated: samples.gpus.iter().map(|g| g.0).collect(),
        capacity: samples.gpus.iter().map(|g| g.1).collect(),
        depth,
        waits,
    }
}
