//! How a job stands, read from its Pods: running, ended (with an exit
//! code), or failing (a replica ended badly while others still run). A
//! pure function of the Pods and the nodes that exist.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use model::observed::Timestamp;

use crate::names::{ATTEMPT_LABEL, REPLICA_LABEL};

/// One replica's Pod, as far as the loop cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replica {
    /// Pending or running: it holds (or is about to hold) its GPUs.
    Live,
    /// Ended with this exit code (`None`: not known, e.g. never started
    /// or its node is gone).
    Ended {
        /// When, if the Pod says.
        at: Option<Timestamp>,
        /// The main container's exit code.
        code: Option<i32>,
    },
}

/// A job, from all its replicas' Pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Every replica is live.
    Running,
    /// Some replica ended with a failure while these (Pod names) are still
    /// live: the gang has failed, they are to be stopped.
    Failing(Vec<String>),
    /// Every replica ended (or its Pod is gone).
    Ended {
        /// When the last one ended, if known.
        at: Option<Timestamp>,
        /// The first failure's code by rank, else 0; `None` when a code is
        /// not known and none failed.
        code: Option<i32>,
    },
}

fn to_timestamp(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Option<Timestamp> {
    chrono::DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().try_into().ok()?)
}

/// How the Pod's replica stands; a Pod on a node that no longer exists
/// has ended, with no code.
pub fn replica(pod: &Pod, nodes: &BTreeSet<&str>) -> Replica {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let terminated = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    match phase {
        "Succeeded" | "Failed" => Replica::Ended {
            at: terminated.and_then(|t| t.finished_at.as_ref().and_then(to_timestamp)),
            code: terminated
                .map(|t| t.exit_code)
                .or((phase == "Succeeded").then_some(0)),
        },
        _ => {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
            match node {
                Some(node) if !nodes.contains(node) => Replica::Ended {
                    at: None,
                    code: None,
                },
                _ => Replica::Live,
            }
        }
    }
}

fn rank(pod: &Pod) -> u32 {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REPLICA_LABEL))
        .and_then(|r| r.parse().ok())
        .unwrap_or(u32::MAX)
}

fn created(pod: &Pod) -> Option<i64> {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
}

/// The Pods of the job's newest attempt (by creation time): a job placed
/// again after a preemption is judged by its new Pods only.
pub fn newest_attempt<'a>(pods: &[&'a Pod]) -> Vec<&'a Pod> {
    let attempt = |p: &Pod| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ATTEMPT_LABEL).cloned())
    };
    let newest = pods
        .iter()
        .max_by_key(|p| created(p))
        .and_then(|p| attempt(p));
    pods.iter()
        .copied()
        .filter(|p| attempt(p) == newest)
        .collect()
}

/// How the job stands from its Pods (those of one attempt); `None` when
/// it has none.
pub fn job_state(pods: &[&Pod], nodes: &BTreeSet<&str>) -> Option<JobState> {
    if pods.is_empty() {
        return None;
    }
    let mut replicas: Vec<(u32, &Pod, Replica)> = pods
        .iter()
        .map(|p| (rank(p), *p, replica(p, nodes)))
        .collect();
    replicas.sort_by_key(|(r, _, _)| *r);
    let live: Vec<String> = replicas
        .iter()
        .filter(|(_, _, r)| *r == Replica::Live)
        .filter_map(|(_, p, _)| p.metadata.name.clone())
        .collect();
    let codes: Vec<Option<i32>> = replicas
        .iter()
        .filter_map(|(_, _, r)| match r {
            Replica::Ended { code, .. } => Some(*code),
            Replica::Live => None,
        })
        .collect();
    let failed = codes.iter().find_map(|c| c.filter(|c| *c != 0));
    let lost = codes.iter().any(Option::is_none);
    if !live.is_empty() {
        return Some(if failed.is_some() || lost {
            JobState::Failing(live)
        } else {
            JobState::Running
        });
    }
    let at = replicas
        .iter()
        .filter_map(|(_, _, r)| match r {
            Replica::Ended { at, .. } => *at,
            Replica::Live => None,
        })
        .max();
    let code = match (failed, lost) {
        (Some(code), _) => Some(code),
        (None, true) => None,
        (None, false) => Some(0),
    };
    Some(JobState::Ended { at, code })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, rank: u32, node: &str, phase: &str, code: Option<i32>) -> Pod {
        let mut status = json!({"phase": phase});
        if let Some(code) = code {
            status["containerStatuses"] = json!([{
                "name": "main", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code,
                    "finishedAt": "2026-11-21T10:05:00Z"}}
            }]);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": "2026-11-21T10:00:00Z",
                "labels": {"gitfleet.io/replica": rank.to_string(), "gitfleet.io/attempt": "a1"}},
            "spec": {"nodeName": node, "containers": [{"name": "main"}]},
            "status": status
        }))
        .unwrap()
    }

    fn nodes() -> BTreeSet<&'static str> {
        BTreeSet::from(["n1", "n2"])
    }

    #[test]
    fn running_succeeded_failed() {
        let (a, b) = (
            pod("p0", 0, "n1", "Running", None),
            pod("p1", 1, "n2", "Pending", None),
        );
        assert_eq!(job_state(&[&a, &b], &nodes()), Some(JobState::Running));
        let (a, b) = (
            pod("p0", 0, "n1", "Succeeded", Some(0)),
            pod("p1", 1, "n2", "Succeeded", Some(0)),
        );
        let at = "2026-11-21T10:05:00Z".parse().ok();
        assert_eq!(
            job_state(&[&a, &b], &nodes()),
            Some(JobState::Ended { at, code: Some(0) })
        );
        let (a, b) = (
            pod("p0", 0, "n1", "Succeeded", Some(0)),
            pod("p1", 1, "n2", "Failed", Some(3)),
        );
        assert_eq!(
            job_state(&[&b, &a], &nodes()),
            Some(JobState::Ended { at, code: Some(3) })
        );
        assert_eq!(job_state(&[], &nodes()), None);
    }

    #[test]
    fn a_failed_replica_fails_the_gang() {
        let (a, b) = (
            pod("p0", 0, "n1", "Failed", Some(1)),
            pod("p1", 1, "n2", "Running", None),
        );
        assert_eq!(
            job_state(&[&a, &b], &nodes()),
            Some(JobState::Failing(vec!["p1".to_string()]))
        );
    }

    #[test]
    fn pods_of_a_lost_node_have_ended_without_a_code() {
        let (a, b) = (
            pod("p0", 0, "gone", "Running", None),
            pod("p1", 1, "n2", "Running", None),
        );
        assert_eq!(
            job_state(&[&a, &b], &nodes()),
            Some(JobState::Failing(vec!["p1".to_string()]))
        );
        assert_eq!(
            job_state(&[&a], &nodes()),
            Some(JobState::Ended {
                at: None,
                code: None
            })
        );
    }

    #[test]
    fn only_the_newest_attempt_counts() {
        let old = pod("old", 0, "n1", "Failed", Some(137));
        let mut new = pod("new", 0, "n1", "Running", None);
        new.metadata.creation_timestamp =
            serde_json::from_value(json!("2026-11-21T11:00:00Z")).unwrap();
        new.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(ATTEMPT_LABEL.to_string(), "a2".to_string());
        let pods = newest_attempt(&[&old, &new]);
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name.as_deref(), Some("new"));
    }
}
