//! GPUs charged to each queue (and its ancestors) per model: by the jobs
//! that run, and by the jobs a plan places. The starting point of a limit
//! raise; the engine's verification decides whether it suffices.

use std::collections::HashMap;

use model::observed::{NodeGpus, ObservedState};
use model::plan::{Action, Plan};
use model::spec::Fleet;

/// Usage per (queue, model).
#[derive(Debug, Default)]
pub(crate) struct Usage<'a> {
    parents: HashMap<&'a str, &'a str>,
    /// (running, placed by the plan) per (queue, model).
    charged: HashMap<(&'a str, &'a str), (u64, u64)>,
}

impl<'a> Usage<'a> {
    /// Usage as `observed` and `plan` leave it: running jobs (also those
    /// stopping: they count against limits until they stop; not those the
    /// plan terminates or cancels) and the plan's placements.
    pub(crate) fn new(fleet: &'a Fleet, observed: &'a ObservedState, plan: &'a Plan) -> Self {
        let parents = fleet
            .queues
            .iter()
            .filter_map(|q| q.spec.parent.as_deref().map(|p| (q.name(), p)))
            .collect();
        let models: HashMap<&str, &str> = observed
            .nodes
            .iter()
            .filter_map(|n| n.gpus.first().map(|g| (n.name.as_str(), g.model.as_str())))
            .collect();
        let queue_of: HashMap<&str, &str> = fleet
            .jobs
            .iter()
            .map(|j| (j.name(), j.spec.queue.as_str()))
            .collect();
        let stopped: std::collections::HashSet<&str> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Terminate { job, .. } | Action::Cancel { job, .. } => Some(job.as_str()),
                _ => None,
            })
            .collect();
        let mut usage = Usage {
            parents,
            charged: HashMap::new(),
        };
        let mut charge = |job: &str, placement: &'a [NodeGpus], placed: bool| {
            let Some(&queue) = queue_of.get(job) else {
                return;
            };
            for part in placement {
                let Some(&model) = models.get(part.node.as_str()) else {
                    continue;
                };
                usage.charge(queue, model, part.gpus.len() as u64, placed);
            }
        };
        for run in &observed.running {
            if !stopped.contains(run.job.as_str()) {
                charge(&run.job, &run.placement, false);
            }
        }
        for action in &plan.actions {
            if let Action::Place { job, placement, .. } = action {
                charge(job, placement, true);
            }
        }
        usage
    }

    fn charge(&mut self, leaf: &'a str, model: &'a str, gpus: u64, placed: bool) {
        for queue in path(&self.parents, leaf) {
            let entry = self.charged.entry((queue, model)).or_default();
            if placed {
                entry.1 += gpus;
            } else {
                entry.0 += gpus;
            }
        }
    }

    /// (GPUs of running jobs, GPUs the plan places) of `queue` on `model`.
    pub(crate) fn of(&self, queue: &'a str, model: &'a str) -> (u64, u64) {
        self.charged
            .get(&(queue, model))
            .copied()
            .unwrap_or_default()
    }

    /// `leaf` and its ancestors, leaf first (a cycle, which validation
    /// rejects, ends the walk).
    pub(crate) fn path(&self, leaf: &'a str) -> Vec<&'a str> {
        path(&self.parents, leaf)
    }
}

fn path<'a>(parents: &HashMap<&'a str, &'a str>, leaf: &'a str) -> Vec<&'a str> {
    let mut out = vec![leaf];
    let mut at = leaf;
    while let Some(&p) = parents.get(at) {
        if out.contains(&p) {
            break;
        }
        out.push(p);
        at = p;
    }
    out
}
