//! The Philly trace as Pollux published it (`philly.csv`: `timestamp`,
//! `duration`, `num_gpus`, `gpu_time`, `cluster`) with the node count of
//! each virtual cluster (`philly_vc_nodes.csv`: `vc`, `node num`).
//!
//! Mapped: each virtual cluster (VC) is a leaf queue `vc-<hash>`; its pool
//! `vc-<hash>` has its nodes of 8 GPUs (model [`MODEL`]), and its quota is
//! guaranteed = limit = nodes × 8 (no borrowing). Submit times are seconds
//! from the earliest `timestamp` (UTC); durations are rounded to the second
//! (at least 1 s). A job of up to 8 GPUs is one replica; a larger one is a
//! gang of 8-GPU replicas (a total that 8 does not divide, 12 or 24, is
//! split into the largest replica size up to 8 that divides it: 2 × 6).
//! No priority classes, no time limits (the trace has neither).
//!
//! Dropped (counted): jobs of a VC without a node count (the trace's 15
//! VCs against 11 counted ones), and jobs asking for no GPU.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use model::spec::limits::MAX_REPLICAS;

use crate::csv::Table;
use crate::{
    Dropped, FleetShape, PoolShape, QueueShape, Source, Trace, TraceError, TraceJob, run_length,
    seconds,
};

/// The GPU model of the pools a Philly fleet has (the trace does not say).
pub const MODEL: &str = "philly-gpu";

/// GPUs per node.
pub const GPUS_PER_NODE: u32 = 8;

/// The leaf queue (and pool) of a virtual cluster.
pub fn queue_name(vc: &str) -> String {
    format!("vc-{}", vc.to_ascii_lowercase())
}

/// Parses the jobs and the VC node counts.
pub fn parse(jobs: Source<'_>, nodes: Source<'_>) -> Result<Trace, TraceError> {
    let vcs = read_nodes(nodes)?;
    let table = Table::read(jobs, &["timestamp", "duration", "num_gpus", "cluster"])?;
    let mut trace = Trace::default();
    let mut rows = Vec::new();
    for row in table.rows() {
        let text = row.get("timestamp");
        let submit = NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .map_err(|_| row.error("timestamp", format!("`{text}` is not YYYY-MM-DD HH:MM:SS")))?;
        let duration = seconds(row.number("duration")?).map_err(|m| row.error("duration", m))?;
        let gpus = row.count(
            "num_gpus",
            0,
            u64::from(MAX_REPLICAS) * u64::from(GPUS_PER_NODE),
        )?;
        let vc = row.get("cluster");
        if gpus == 0 {
            trace.dropped.push(Dropped {
                line: row.line(),
                reason: "asks for no GPU".to_string(),
            });
            continue;
        }
        if !vcs.contains_key(vc) {
            trace.dropped.push(Dropped {
                line: row.line(),
                reason: format!("virtual cluster `{vc}` has no node count"),
            });
            continue;
        }
        rows.push((row.line(), submit, duration, gpus, queue_name(vc)));
    }
    let origin = rows.iter().map(|r| r.1).min();
    for (line, submit, duration, gpus, queue) in rows {
        let offset = origin.map_or(0, |o| (submit - o).num_seconds().max(0));
        let (replicas, per) = gang(gpus);
        trace.jobs.push(TraceJob {
            line,
            submit: model::spec::Duration::from_secs(offset.unsigned_abs()),
            queue,
            replicas,
            gpus_per_replica: per,
            model: None,
            duration: run_length(duration),
            priority_class: None,
            time_limit: None,
        });
    }
    trace.shape = Some(FleetShape {
        pools: vcs
            .iter()
            .map(|(vc, n)| PoolShape {
                name: queue_name(vc),
                model: MODEL.to_string(),
                gpus_per_node: GPUS_PER_NODE,
                nodes: *n,
            })
            .collect(),
        queues: vcs
            .iter()
            .map(|(vc, n)| QueueShape {
                name: queue_name(vc),
                quota: Some((MODEL.to_string(), u64::from(*n) * u64::from(GPUS_PER_NODE))),
            })
            .collect(),
    });
    Ok(trace)
}

/// `gpus` as (replicas, GPUs per replica).
fn gang(gpus: u64) -> (u32, u32) {
    let per = (1..=u64::from(GPUS_PER_NODE))
        .rev()
        .find(|p| gpus.is_multiple_of(*p))
        .unwrap_or(1)
        .min(gpus);
    // In range: gpus ≤ MAX_REPLICAS × 8 and per ≤ 8.
    ((gpus / per) as u32, per as u32)
}

/// VC → node count.
fn read_nodes(source: Source<'_>) -> Result<BTreeMap<String, u32>, TraceError> {
    let table = Table::read(source, &["vc", "node num"])?;
    let mut vcs = BTreeMap::new();
    for row in table.rows() {
        let vc = row.get("vc");
        if vc.is_empty() || !vc.chars().all(|c| c.is_ascii_alphanumeric()) || vc.len() > 60 {
            return Err(row.error("vc", format!("`{vc}` is not a virtual cluster id")));
        }
        let n = row.count(
            "node num",
            0,
            u64::from(model::spec::limits::MAX_POOL_NODES),
        )?;
        if n > 0 {
            // In range: at most MAX_POOL_NODES.
            vcs.insert(vc.to_string(), n as u32);
        }
    }
    Ok(vcs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "vc,node num\nabc,2\n";

    fn parse_text(jobs: &str) -> Result<Trace, TraceError> {
        parse(
            Source {
                name: "p.csv",
                text: jobs,
            },
            Source {
                name: "n.csv",
                text: NODES,
            },
        )
    }

    #[test]
    fn maps_vcs_gangs_and_drops() {
        let jobs = "timestamp,duration,num_gpus,gpu_time,cluster\n\
                    2017-10-09 07:01:55,66.4,1,66,abc\n\
                    2017-10-09 07:00:00,0.2,16,3,abc\n\
                    2017-10-09 07:00:10,5,12,60,abc\n\
                    2017-10-09 07:00:10,5,1,5,zzz\n\
                    2017-10-09 07:00:10,5,0,0,abc\n";
        let t = parse_text(jobs).unwrap();
        let got: Vec<_> = t
            .jobs
            .iter()
            .map(|j| {
                (
                    j.line,
                    j.submit.as_secs(),
                    j.replicas,
                    j.gpus_per_replica,
                    j.duration.as_millis(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (2, 115, 1, 1, 66_400),
                (3, 0, 2, 8, 1000),
                (4, 10, 2, 6, 5000)
            ]
        );
        assert_eq!(t.jobs[0].queue, "vc-abc");
        assert_eq!(t.dropped.iter().map(|d| d.line).collect::<Vec<_>>(), [5, 6]);
        let shape = t.shape.unwrap();
        assert_eq!(shape.pools[0].nodes, 2);
        assert_eq!(shape.queues[0].quota, Some((MODEL.to_string(), 16)));
    }

    #[test]
    fn bad_rows_are_named() {
        let e = parse_text("timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,1,1,1,abc\n")
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "p.csv:2: field `timestamp`: `yesterday` is not YYYY-MM-DD HH:MM:SS"
        );
    }
}
