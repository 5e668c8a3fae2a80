//! Merging per-host observed-state snapshots into one document, so that a
//! fleet without Kubernetes can be assembled from `gitfleet inventory` runs.
//!
//! Nodes are concatenated and sorted by name. A node in two snapshots, or a
//! GPU UUID on two nodes, is a conflict (a copied or stale snapshot), and so is
//! a job running in two snapshots with different placements. Identical running
//! entries collapse. `time` is the latest of the snapshots' times; `queued`
//! keeps the earliest `since` per job; `completed` the latest `finished`.

use std::collections::BTreeMap;

use model::observed::{CompletedJob, ObservedState, QueuedJob, RunningJob};

/// A conflict between snapshots.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeConflict {
    /// The same node in two snapshots.
    #[error("node {node:?} is in both {first} and {second}")]
    Node {
        /// Node name.
        node: String,
        /// The first snapshot that has it.
        first: String,
        /// The other one.
        second: String,
    },
    /// The same GPU UUID on two nodes.
    #[error("GPU {uuid} is on node {first_node} ({first}) and on node {second_node} ({second})")]
    Gpu {
        /// The UUID.
        uuid: String,
        /// Node and snapshot where it was first seen.
        first_node: String,
        /// The first snapshot.
        first: String,
        /// The other node.
        second_node: String,
        /// The other snapshot.
        second: String,
    },
    /// One job running in two snapshots, differently.
    #[error("job {job:?} is running in both {first} and {second}, with different placements")]
    Job {
        /// Job name.
        job: String,
        /// The first snapshot.
        first: String,
        /// The other one.
        second: String,
    },
}

/// Merges snapshots, given as (file name, state) in command-line order.
/// Returns every conflict when there is any.
pub fn merge(inputs: &[(&str, &ObservedState)]) -> Result<ObservedState, Vec<MergeConflict>> {
    let mut conflicts = Vec::new();
    let mut nodes = BTreeMap::new();
    let mut uuids: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    let mut running: BTreeMap<&str, (&str, &RunningJob)> = BTreeMap::new();
    let mut queued: BTreeMap<&str, QueuedJob> = BTreeMap::new();
    let mut completed: BTreeMap<&str, CompletedJob> = BTreeMap::new();
    let mut time = None;
    // Attained service: the most any input says (it only grows).
    let mut attained: BTreeMap<String, u64> = BTreeMap::new();
    for (file, state) in inputs {
        time = time.max(state.time);
        for (job, secs) in &state.attained {
            let entry = attained.entry(job.clone()).or_default();
            *entry = (*entry).max(*secs);
        }
        for node in &state.nodes {
            if let Some((first, _)) = nodes.get(node.name.as_str()) {
                conflicts.push(MergeConflict::Node {
                    node: node.name.clone(),
                    first: (*first as &str).to_string(),
                    second: file.to_string(),
                });
                continue;
            }
            for uuid in node.gpus.iter().filter_map(|g| g.uuid.as_deref()) {
                if let Some((first_node, first)) = uuids.insert(uuid, (&node.name, file)) {
                    conflicts.push(MergeConflict::Gpu {
                        uuid: uuid.to_string(),
                        first_node: first_node.to_string(),
                        first: first.to_string(),
                        second_node: node.name.clone(),
                        second: file.to_string(),
                    });
                }
            }
            nodes.insert(node.name.as_str(), (*file, node.clone()));
        }
        for run in &state.running {
            match running.get(run.job.as_str()) {
                Some((_, seen)) if *seen == run => {}
                Some((first, _)) => conflicts.push(MergeConflict::Job {
                    job: run.job.clone(),
                    first: first.to_string(),
                    second: file.to_string(),
                }),
                None => {
                    running.insert(run.job.as_str(), (file, run));
                }
            }
        }
        for q in &state.queued {
            let entry = queued.entry(q.job.as_str()).or_insert_with(|| q.clone());
            if q.since < entry.since {
                entry.since = q.since;
            }
            for n in &q.nominated {
                if !entry.nominated.contains(n) {
                    entry.nominated.push(n.clone());
                }
            }
            entry.nominated.sort();
        }
        for c in &state.completed {
            let entry = completed.entry(c.job.as_str()).or_insert_with(|| c.clone());
            if c.finished > entry.finished {
                *entry = c.clone();
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }
    Ok(ObservedState {
        time,
        nodes: nodes.into_values().map(|(_, n)| n).collect(),
        running: running.into_values().map(|(_, r)| r.clone()).collect(),
        queued: queued.into_values().collect(),
        completed: completed.into_values().collect(),
        attained,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use load::parse_observed;

    fn state(text: &str) -> ObservedState {
        parse_observed("t.yaml", text).unwrap()
    }

    #[test]
    fn hosts_merge_sorted_by_name_with_the_latest_time() {
        let a = state(
            "time: 2026-11-21T10:00:00Z\nnodes:\n  - {name: n2, pool: p, gpus: [{index: 0, model: A, uuid: GPU-2}]}\n",
        );
        let b = state(
            "time: 2026-11-21T10:05:00Z\nnodes:\n  - {name: n1, pool: p, gpus: [{index: 0, model: A, uuid: GPU-1}]}\nqueued:\n  - {job: j, since: 2026-11-21T09:00:00Z}\n",
        );
        let c = state("queued:\n  - {job: j, since: 2026-11-21T08:00:00Z}\n");
        let merged = merge(&[("a.yaml", &a), ("b.yaml", &b), ("c.yaml", &c)]).unwrap();
        let names: Vec<&str> = merged.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, vec!["n1", "n2"]);
        assert_eq!(merged.time, b.time);
        assert_eq!(merged.queued.len(), 1);
        assert_eq!(merged.queued[0].since, c.queued[0].since);
    }

    #[test]
    fn the_same_node_twice_is_a_conflict() {
        let a = state("nodes:\n  - {name: n1, gpus: [{index: 0, model: A}]}\n");
        let err = merge(&[("a.yaml", &a), ("b.yaml", &a)]).unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(
            err[0].to_string(),
            "node \"n1\" is in both a.yaml and b.yaml"
        );
    }

    #[test]
    fn the_same_gpu_on_two_nodes_is_a_conflict() {
        let a = state("nodes:\n  - {name: n1, gpus: [{index: 0, model: A, uuid: GPU-x}]}\n");
        let b = state("nodes:\n  - {name: n2, gpus: [{index: 0, model: A, uuid: GPU-x}]}\n");
        let err = merge(&[("a.yaml", &a), ("b.yaml", &b)]).unwrap_err();
        assert_eq!(
            err[0].to_string(),
            "GPU GPU-x is on node n1 (a.yaml) and on node n2 (b.yaml)"
        );
    }

    #[test]
    fn running_jobs_collapse_when_equal_and_conflict_otherwise() {
        let nodes = "nodes:\n  - {name: n1, gpus: [{index: 0, model: A}, {index: 1, model: A}]}\n";
        let a = state(&format!(
            "{nodes}running:\n  - {{job: j, started: 2026-11-21T08:00:00Z, placement: [{{node: n1, gpus: [0]}}]}}\n"
        ));
        let mut b = a.clone();
        b.nodes.clear();
        assert_eq!(merge(&[("a", &a), ("b", &b)]).unwrap().running.len(), 1);
        b.running[0].placement[0].gpus = vec![1];
        let err = merge(&[("a", &a), ("b", &b)]).unwrap_err();
        assert!(matches!(&err[0], MergeConflict::Job { job, .. } if job == "j"));
    }
}
