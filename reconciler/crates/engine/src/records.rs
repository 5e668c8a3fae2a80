//! The observed records' jobs and nodes, as the job table's name index and
//! the cluster find them: looked up once per plan, or kept by a
//! [`crate::Planner`] while the records, the table's names and the nodes
//! stand still (the reconcile loop's commit on a settled fleet).

use model::observed::ObservedState;

use super::ids::{JobId, ModelId, NodeId};

/// Where each observed record's names lead.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolved {
    /// Per running record (the observed order): its job.
    pub(crate) running: Vec<Option<JobId>>,
    /// Per part of every running record's placement, record after record:
    /// its node (`None`: not observed).
    pub(crate) part_nodes: Vec<Option<NodeId>>,
    /// Per completed record: its job.
    pub(crate) completed: Vec<Option<JobId>>,
    /// Per queued record: its job.
    pub(crate) queued: Vec<Option<JobId>>,
    /// Per running record: what its job's document says of it, once asked
    /// (kept with the look-ups, but for the records of jobs that changed).
    pub(crate) said: Vec<Said>,
    /// The running records in run order (by job name, a name's records
    /// in file order), with their names' first bytes; and in order of
    /// their start (stable): found by the first plan that reads them
    /// (empty until then) and kept with the look-ups.
    pub(crate) by_name: Vec<(u128, u32)>,
    pub(crate) by_start: Vec<u32>,
    /// The last plan's victims in victim order (`Engine::index_victims`):
    /// the next plan's guess, taken when it still sorts them.
    pub(crate) victim_order: Vec<u32>,
    /// The last plans' backfill events of each model in end order, as
    /// places in the list `backfill::reserve` makes (a few per model): the
    /// next's guess, taken when it still sorts them strictly.
    pub(crate) event_orders: Vec<(ModelId, Vec<u32>)>,
}

/// What a job's document says of a running record of it (a pure function
/// of the two): `None` until asked.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Said {
    /// Whether its restart annotation asks for a restart.
    pub(crate) restart: Option<bool>,
    /// Whether it is listed as running an older spec (drift).
    pub(crate) older: Option<bool>,
}

impl Resolved {
    /// Looks every name of `observed`'s records up: jobs with `job_named`,
    /// nodes with `node_named`.
    pub(crate) fn of(
        observed: &ObservedState,
        job_named: impl Fn(&str) -> Option<JobId>,
        node_named: impl Fn(&str) -> Option<NodeId>,
    ) -> Self {
        let parts = observed.running.iter().map(|r| r.placement.len()).sum();
        let mut part_nodes = Vec::with_capacity(parts);
        // The last node found: jobs that started one after the other often
        // sit on one node, and a name compared is cheaper than one looked up.
        let mut last: Option<(&str, NodeId)> = None;
        for r in &observed.running {
            for part in &r.placement {
                let node = match last {
                    Some((name, id)) if name == part.node => Some(id),
                    _ => node_named(&part.node),
                };
                if let Some(id) = node {
                    last = Some((&part.node, id));
                }
                part_nodes.push(node);
            }
        }
        Resolved {
            running: observed.running.iter().map(|r| job_named(&r.job)).collect(),
            part_nodes,
            completed: observed
                .completed
                .iter()
                .map(|c| job_named(&c.job))
                .collect(),
            queued: observed.queued.iter().map(|q| job_named(&q.job)).collect(),
            said: vec![Said::default(); observed.running.len()],
            by_name: Vec::new(),
            by_start: Vec::new(),
            victim_order: Vec::new(),
            event_orders: Vec::new(),
        }
    }

    /// Whether the look-ups are `other`'s (what each record says aside).
    pub(crate) fn same_look_ups(&self, other: &Resolved) -> bool {
        self.running == other.running
            && self.part_nodes == other.part_nodes
            && self.completed == other.completed
            && self.queued == other.queued
            && self.said.len() == other.said.len()
    }

    /// The running records (`running`, the observed ones these look-ups
    /// are of) in run order and in order of start
    /// ([`Resolved::by_name`], [`Resolved::by_start`]): those found
    /// before, or found now and kept (debug builds find them again and
    /// compare).
    pub(crate) fn orders(&mut self, running: &[model::observed::RunningJob]) {
        if self.by_name.len() != running.len() || self.by_start.len() != running.len() {
            self.by_name = by_name(running);
            self.by_start = by_start(running);
            return;
        }
        debug_assert!(
            self.by_name == by_name(running) && self.by_start == by_start(running),
            "kept running records' orders differ"
        );
    }

    /// Forgets what the documents of the jobs `changed` (by job id) said.
    pub(crate) fn forget_said(&mut self, changed: &[bool]) {
        for (said, job) in self.said.iter_mut().zip(&self.running) {
            if job.is_some_and(|j| changed.get(j as usize).copied().unwrap_or(true)) {
                *said = Said::default();
            }
        }
    }

    /// Whether job document `object` asks running record `k` (`r`) to
    /// restart, and why: asked once while kept (debug builds ask again).
    pub(crate) fn restart_requested(
        &mut self,
        k: usize,
        object: &model::spec::Object<model::spec::JobSpec>,
        r: &model::observed::RunningJob,
    ) -> Option<String> {
        if let Some(said) = self.said.get(k)
            && said.restart == Some(false)
        {
            debug_assert!(
                object.restart_requested(r).is_none(),
                "a kept restart verdict is stale"
            );
            return None;
        }
        let reason = object.restart_requested(r);
        if let Some(said) = self.said.get_mut(k) {
            said.restart = Some(reason.is_some());
        }
        reason
    }
}

/// The running records by job name, a name's records in file order (as a
/// stable sort by name puts them), with their names' first bytes: those
/// settle almost every comparison.
fn by_name(running: &[model::observed::RunningJob]) -> Vec<(u128, u32)> {
    let mut by_name: Vec<(u128, u32)> = running
        .iter()
        .enumerate()
        .map(|(i, r)| (crate::order::name_prefix(&r.job), i as u32))
        .collect();
    by_name.sort_unstable();
    // Names that share their first bytes (rare) by the whole names.
    for same in by_name.chunk_by_mut(|a, b| a.0 == b.0) {
        if same.len() > 1 {
            same.sort_by(|(_, a), (_, b)| {
                running[*a as usize]
                    .job
                    .cmp(&running[*b as usize].job)
                    .then(a.cmp(b))
            });
        }
    }
    by_name
}

/// The running records by start, those that started together in file
/// order.
fn by_start(running: &[model::observed::RunningJob]) -> Vec<u32> {
    let mut by_start: Vec<u32> = (0..running.len() as u32).collect();
    by_start.sort_by_key(|k| running[*k as usize].started);
    by_start
}
