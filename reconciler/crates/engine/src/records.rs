//! The observed records' jobs and nodes, as the job table's name index and
//! the cluster find them: looked up once per plan, or kept by a
//! [`crate::Planner`] while the records, the table's names and the nodes
//! stand still (the reconcile loop's commit on a settled fleet).

use model::observed::ObservedState;

use super::ids::{JobId, NodeId};

/// Where each observed record's names lead.
#[derive(Debug, Clone, Default, PartialEq)]
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
        }
    }
}
