//! The Alibaba GPU 2023 trace (`openb_pod_list_*.csv`: `name`, `num_gpu`,
//! `gpu_milli`, `gpu_spec`, `qos`, `pod_phase`, `creation_time`,
//! `deletion_time`, `scheduled_time`, …) with its node list
//! (`openb_node_list_gpu_node.csv`: `sn`, `gpu`, `model`, …).
//!
//! Mapped: a pod is a one-replica job of `num_gpu` GPUs; a fractional share
//! (`gpu_milli` < 1000) takes a whole GPU (gitfleet gives out whole GPUs);
//! its leaf queue is `qos-<qos>` (the trace has no user or team column; QoS
//! is the only grouping it has); submit = `creation_time`, duration =
//! `deletion_time` − `scheduled_time` (seconds; at least 1 s; pods still
//! running at the trace's end run until then); `gpu_spec`, when it names
//! one model, is the job's model. Pools: one per (model, GPUs per node) of
//! the node list, fixed size; queues without quota.
//!
//! Dropped (counted): pods with no GPU, pods never scheduled (no
//! `scheduled_time`, so no run length), pods deleted before they were
//! scheduled.

use std::collections::{BTreeMap, BTreeSet};

use model::spec::limits::MAX_GPUS_PER_NODE;

use crate::csv::Table;
use crate::{
    Dropped, FleetShape, PoolShape, QueueShape, Source, Trace, TraceError, TraceJob, run_length,
    seconds,
};

/// The leaf queue of a QoS class.
pub fn queue_name(qos: &str) -> String {
    let clean: String = qos
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(50)
        .collect();
    format!(
        "qos-{}",
        if clean.is_empty() {
            "none".to_string()
        } else {
            clean
        }
    )
}

/// Parses the pods and the node list.
pub fn parse(pods: Source<'_>, nodes: Source<'_>) -> Result<Trace, TraceError> {
    let pools = read_nodes(nodes)?;
    let table = Table::read(
        pods,
        &[
            "num_gpu",
            "qos",
            "creation_time",
            "deletion_time",
            "scheduled_time",
        ],
    )?;
    let mut trace = Trace::default();
    let mut queues = BTreeSet::new();
    for row in table.rows() {
        let gpus = row.count("num_gpu", 0, u64::from(MAX_GPUS_PER_NODE))?;
        let drop = |reason: &str| Dropped {
            line: row.line(),
            reason: reason.to_string(),
        };
        if gpus == 0 {
            trace.dropped.push(drop("no GPU (a CPU-only pod)"));
            continue;
        }
        let Some(_) = row.optional("scheduled_time") else {
            trace.dropped.push(drop("never scheduled: no run length"));
            continue;
        };
        let time = |column: &str| {
            row.number(column)
                .and_then(|v| seconds(v).map_err(|m| row.error(column, m)))
        };
        let submit = time("creation_time")?;
        let scheduled = time("scheduled_time")?;
        let deleted = time("deletion_time")?;
        if deleted < scheduled {
            trace.dropped.push(drop("deleted before it was scheduled"));
            continue;
        }
        let queue = queue_name(row.get("qos"));
        queues.insert(queue.clone());
        trace.jobs.push(TraceJob {
            line: row.line(),
            submit,
            queue,
            replicas: 1,
            // In range: at most MAX_GPUS_PER_NODE.
            gpus_per_replica: gpus as u32,
            model: row
                .optional("gpu_spec")
                .filter(|s| !s.contains('|'))
                .map(str::to_string),
            duration: run_length(model::spec::Duration::from_millis(
                deleted.as_millis() - scheduled.as_millis(),
            )),
            priority_class: None,
            time_limit: None,
        });
    }
    trace.shape = Some(FleetShape {
        pools: pools
            .into_iter()
            .map(|((model, gpus), nodes)| PoolShape {
                name: format!("{}-x{gpus}", pool_model(&model)),
                model,
                gpus_per_node: gpus,
                nodes,
            })
            .collect(),
        queues: queues
            .into_iter()
            .map(|name| QueueShape { name, quota: None })
            .collect(),
    });
    Ok(trace)
}

/// A model as part of a pool name.
fn pool_model(model: &str) -> String {
    model
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(50)
        .collect()
}

/// (model, GPUs per node) → nodes.
fn read_nodes(source: Source<'_>) -> Result<BTreeMap<(String, u32), u32>, TraceError> {
    let table = Table::read(source, &["gpu", "model"])?;
    let mut pools: BTreeMap<(String, u32), u32> = BTreeMap::new();
    for row in table.rows() {
        let gpus = row.count("gpu", 0, u64::from(MAX_GPUS_PER_NODE))?;
        let model = row.get("model");
        if gpus == 0 {
            continue;
        }
        if pool_model(model).is_empty() {
            return Err(row.error("model", format!("`{model}` is not a GPU model")));
        }
        // In range: at most MAX_GPUS_PER_NODE.
        let n = pools.entry((model.to_string(), gpus as u32)).or_default();
        *n = n.saturating_add(1);
    }
    Ok(pools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_pods_and_drops() {
        let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                    p0,1,1,1,460,,LS,Running,10,100,20\n\
                    p1,1,1,0,0,,BE,Running,10,100,20\n\
                    p2,1,1,1,1000,,BE,Pending,10,100,\n\
                    p3,1,1,8,1000,V100M16,BE,Failed,30,40,35\n";
        let nodes =
            "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,8,V100M16\nn1,1,1,8,V100M16\nn2,1,1,2,T4\n";
        let t = parse(
            Source {
                name: "pods.csv",
                text: pods,
            },
            Source {
                name: "nodes.csv",
                text: nodes,
            },
        )
        .unwrap();
        let got: Vec<_> = t
            .jobs
            .iter()
            .map(|j| {
                (
                    j.line,
                    j.queue.as_str(),
                    j.gpus_per_replica,
                    j.submit.as_secs(),
                    j.duration.as_secs(),
                )
            })
            .collect();
        assert_eq!(got, [(2, "qos-ls", 1, 10, 80), (5, "qos-be", 8, 30, 5)]);
        assert_eq!(t.jobs[1].model.as_deref(), Some("V100M16"));
        assert_eq!(t.dropped.len(), 2);
        let shape = t.shape.unwrap();
        let pools: Vec<_> = shape
            .pools
            .iter()
            .map(|p| (p.name.as_str(), p.nodes))
            .collect();
        assert_eq!(pools, [("t4-x2", 1), ("v100m16-x8", 2)]);
    }
}
