//! The observed records' jobs and nodes, as the job table's name index and
//! the cluster find them: looked up once per plan, or kept by a
//! [`crate::Planner`] while the records, the table's names and the nodes
//! stand still (the reconcile loop's commit on a settled fleet).

use model::observed::ObservedState;

use super::ids::{JobId, NodeId};

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
