//! The node agent's per-GPU view of its host, published on the host's Node
//! as the annotation [`AGENT_ANNOTATION`] (versioned JSON), and read back by
//! the executor's Node mapping (docs/kubernetes.md, "Node agent").
//!
//! The agent (`gitfleet inventory --watch --publish-node NODE`, a
//! DaemonSet) reads NVML; an XID or a double-bit ECC error it sees makes
//! that GPU unhealthy in what it publishes, so in the executor's next
//! iteration. The executor ignores, with a logged warning, an annotation
//! that does not parse, has another version, or is older than
//! [`MAX_AGE_SECS`] (the agent stopped): the Node's counts are used then.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde::{Deserialize, Serialize};

use model::observed::{ObservedGpu, ObservedNode, Timestamp};

/// The Node annotation that carries the agent's view.
pub const AGENT_ANNOTATION: &str = "gitfleet.io/gpus";
/// The version of the annotation's format this build writes and reads.
pub const AGENT_VERSION: u32 = 1;
/// The field manager of the agent's patches.
pub const AGENT_FIELD_MANAGER: &str = "gitfleet-agent";
/// The agent publishes at least this often, changed or not.
pub const HEARTBEAT_SECS: i64 = 300;
/// An annotation older than this is stale (three heartbeats missed).
pub const MAX_AGE_SECS: i64 = 3 * HEARTBEAT_SECS;

/// The annotation's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    /// [`AGENT_VERSION`].
    pub version: u32,
    /// When the agent read NVML.
    pub published_at: Timestamp,
    /// Every GPU of the host, NVML's order.
    pub gpus: Vec<AgentGpu>,
}

/// One GPU as the agent sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentGpu {
    /// Index on the host (as `NVIDIA_VISIBLE_DEVICES` counts).
    pub index: u32,
    /// NVML UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Model, normalised to pool names by the agent's model map.
    pub model: String,
    /// Total memory (`memoryMiB`, as observed state spells it; `memoryMib`
    /// is read too).
    #[serde(
        default,
        rename = "memoryMiB",
        alias = "memoryMib",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_mib: Option<u64>,
    /// False after an XID, a double-bit ECC error, a lost GPU.
    pub healthy: bool,
    /// Why it is unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its NVLink domain (the lowest index it has active NVLinks with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_domain: Option<u32>,
}

/// Why a Node's annotation is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// Not the JSON of an [`AgentView`].
    #[error("annotation {AGENT_ANNOTATION} is malformed: {0}")]
    Malformed(String),
    /// Written by an agent of another format version.
    #[error("annotation {AGENT_ANNOTATION} has version {0}, this build reads {AGENT_VERSION}")]
    Version(u32),
    /// Older than [`MAX_AGE_SECS`]: the agent has stopped publishing.
    #[error(
        "annotation {AGENT_ANNOTATION} is stale: published at {0}, more than {MAX_AGE_SECS} s ago"
    )]
    Stale(Timestamp),
}

impl AgentView {
    /// The view of an inventoried host at `at`.
    pub fn of(node: &ObservedNode, at: Timestamp) -> Self {
        AgentView {
            version: AGENT_VERSION,
            published_at: at,
            gpus: node
                .gpus
                .iter()
                .map(|g| AgentGpu {
                    index: g.index,
                    uuid: g.uuid.clone(),
                    model: g.model.clone(),
                    memory_mib: g.memory_mib,
                    healthy: g.healthy,
                    reason: g.health_reason.clone(),
                    nvlink_domain: g.nvlink_domain,
                })
                .collect(),
        }
    }

    /// Whether `other` says the same of the GPUs (the time aside).
    pub fn same_gpus(&self, other: &AgentView) -> bool {
        self.gpus == other.gpus
    }

    /// The merge patch that publishes this view on a Node.
    pub fn patch(&self) -> serde_json::Value {
        let text = serde_json::to_string(self).unwrap_or_default();
        serde_json::json!({"metadata": {"annotations": {AGENT_ANNOTATION: text}}})
    }

    /// The view published on `node`: `Ok(None)` when there is none, an
    /// error when it cannot be used (malformed, another version, stale at
    /// `now`).
    pub fn read(node: &Node, now: Timestamp) -> Result<Option<AgentView>, ViewError> {
        let Some(text) = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(AGENT_ANNOTATION))
        else {
            return Ok(None);
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ViewError::Malformed(e.to_string()))?;
        let version = value.get("version").and_then(serde_json::Value::as_u64);
        if let Some(v) = version.filter(|v| *v != u64::from(AGENT_VERSION)) {
            return Err(ViewError::Version(u32::try_from(v).unwrap_or(u32::MAX)));
        }
        let view: AgentView =
            serde_json::from_value(value).map_err(|e| ViewError::Malformed(e.to_string()))?;
        if (now - view.published_at).num_seconds() > MAX_AGE_SECS {
            return Err(ViewError::Stale(view.published_at));
        }
        Ok(Some(view))
    }

    /// Puts this view's GPUs into `node` (as the Node's counts made it):
    /// indices, UUIDs, models, memory, NVLink domains and health come from
    /// the agent; a reason the whole node takes nothing (cordoned, not
    /// Ready) stays on every GPU, and GPUs beyond what the device plugin
    /// reports allocatable stay unhealthy (the highest healthy indices).
    pub fn apply(&self, node: &mut ObservedNode, allocatable: Option<u32>) {
        let down = node
            .gpus
            .iter()
            .find_map(|g| g.health_reason.clone())
            .filter(|r| r.starts_with("node "));
        let old: BTreeMap<u32, ObservedGpu> = node.gpus.drain(..).map(|g| (g.index, g)).collect();
        node.gpus = self
            .gpus
            .iter()
            .map(|g| {
                let memory_mib = g
                    .memory_mib
                    .or_else(|| old.get(&g.index).and_then(|o| o.memory_mib));
                let reason = down.clone().or_else(|| {
                    (!g.healthy).then(|| {
                        g.reason
                            .clone()
                            .unwrap_or_else(|| "unhealthy (node agent)".to_string())
                    })
                });
                ObservedGpu {
                    uuid: g.uuid.clone(),
                    memory_mib,
                    nvlink_domain: g.nvlink_domain,
                    healthy: reason.is_none(),
                    health_reason: reason,
                    ..ObservedGpu::new(g.index, g.model.clone())
                }
            })
            .collect();
        if let Some(allocatable) = allocatable {
            let healthy = node.gpus.iter().filter(|g| g.healthy).count();
            let mut excess = healthy.saturating_sub(allocatable as usize);
            let count = node.gpus.len();
            for g in node.gpus.iter_mut().rev() {
                if excess == 0 {
                    break;
                }
                if g.healthy {
                    g.healthy = false;
                    g.health_reason = Some(format!(
                        "the device plugin reports {allocatable} of {count} GPUs allocatable"
                    ));
                    excess -= 1;
                }
            }
        }
    }
}

/// Publishes `view` on Node `node` (a merge patch of its annotations:
/// nothing else of the Node is written). The agent's ClusterRole grants
/// `patch` on nodes and nothing more.
pub async fn publish(client: &Client, node: &str, view: &AgentView) -> Result<(), kube::Error> {
    let params = PatchParams {
        field_manager: Some(AGENT_FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    Api::<Node>::all(client.clone())
        .patch(node, &params, &Patch::Merge(view.patch()))
        .await
        .map(|_| ())
}

/// Whether the agent publishes `view` now: the GPUs changed since `last`
/// was published, or [`HEARTBEAT_SECS`] have passed.
pub fn due(last: Option<&AgentView>, view: &AgentView) -> bool {
    match last {
        None => true,
        Some(last) => {
            !last.same_gpus(view)
                || (view.published_at - last.published_at).num_seconds() >= HEARTBEAT_SECS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn host() -> ObservedNode {
        let gpus = (0..4)
            .map(|i| ObservedGpu {
                uuid: Some(format!("GPU-{i}")),
                memory_mib: Some(81559),
                nvlink_domain: Some(0),
                ..ObservedGpu::new(i, "H100-SXM-80GB")
            })
            .collect();
        ObservedNode {
            name: "gpu-1".to_string(),
            pool: Some("h100".to_string()),
            labels: BTreeMap::new(),
            idle_since: None,
            gpus,
        }
    }

    fn node_with(annotation: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "gpu-1",
            "annotations": {AGENT_ANNOTATION: annotation}}}))
        .unwrap()
    }

    #[test]
    fn a_view_round_trips_through_the_annotation() {
        let mut h = host();
        h.gpus[2].healthy = false;
        h.gpus[2].health_reason = Some("XID 79: fell off the bus".to_string());
        let view = AgentView::of(&h, at("2026-11-21T12:00:00Z"));
        let patch = view.patch();
        let text = patch["metadata"]["annotations"][AGENT_ANNOTATION]
            .as_str()
            .unwrap();
        let read = AgentView::read(&node_with(text), at("2026-11-21T12:05:00Z"))
            .unwrap()
            .unwrap();
        assert_eq!(read, view);
        assert_eq!(
            read.gpus[2].reason.as_deref(),
            Some("XID 79: fell off the bus")
        );
    }

    #[test]
    fn malformed_other_version_and_stale_annotations_are_refused() {
        let now = at("2026-11-21T12:00:00Z");
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        assert_eq!(AgentView::read(&bare, now), Ok(None));
        assert!(matches!(
            AgentView::read(&node_with("{not json"), now),
            Err(ViewError::Malformed(_))
        ));
        assert!(matches!(
            AgentView::read(&node_with(r#"{"version": 1, "gpus": "x"}"#), now),
            Err(ViewError::Malformed(_))
        ));
        assert_eq!(
            AgentView::read(
                &node_with(r#"{"version": 2, "publishedAt": "2026-11-21T12:00:00Z", "gpus": []}"#),
                now
            ),
            Err(ViewError::Version(2))
        );
        let old = r#"{"version": 1, "publishedAt": "2026-11-21T11:44:59Z", "gpus": []}"#;
        assert_eq!(
            AgentView::read(&node_with(old), now),
            Err(ViewError::Stale(at("2026-11-21T11:44:59Z")))
        );
        let fresh = r#"{"version": 1, "publishedAt": "2026-11-21T11:45:00Z", "gpus": []}"#;
        assert!(AgentView::read(&node_with(fresh), now).unwrap().is_some());
    }

    #[test]
    fn the_agents_gpus_replace_the_counted_ones() {
        let mut counted = host();
        for g in &mut counted.gpus {
            g.uuid = None;
        }
        let mut agent = host();
        agent.gpus.remove(1); // GPU 1 is gone from NVML's list
        agent.gpus[1].healthy = false; // GPU 2
        agent.gpus[1].health_reason = Some("double-bit ECC error".to_string());
        let view = AgentView::of(&agent, at("2026-11-21T12:00:00Z"));
        view.apply(&mut counted, Some(4));
        let summary: Vec<(u32, bool, Option<&str>)> = counted
            .gpus
            .iter()
            .map(|g| (g.index, g.healthy, g.uuid.as_deref()))
            .collect();
        assert_eq!(
            summary,
            [
                (0, true, Some("GPU-0")),
                (2, false, Some("GPU-2")),
                (3, true, Some("GPU-3"))
            ]
        );
        assert_eq!(
            counted.gpus[1].health_reason.as_deref(),
            Some("double-bit ECC error")
        );
        // Fewer allocatable than healthy: the highest healthy one is withdrawn.
        let mut counted = host();
        view.apply(&mut counted, Some(1));
        let healthy: Vec<bool> = counted.gpus.iter().map(|g| g.healthy).collect();
        assert_eq!(healthy, [true, false, false]);
    }

    #[test]
    fn a_node_that_takes_nothing_keeps_its_reason_on_every_gpu() {
        let mut counted = host();
        for g in &mut counted.gpus {
            g.healthy = false;
            g.health_reason = Some("node cordoned".to_string());
        }
        AgentView::of(&host(), at("2026-11-21T12:00:00Z")).apply(&mut counted, None);
        assert!(
            counted
                .gpus
                .iter()
                .all(|g| !g.healthy && g.health_reason.as_deref() == Some("node cordoned"))
        );
    }

    #[test]
    fn the_agent_publishes_on_change_and_on_heartbeat() {
        let first = AgentView::of(&host(), at("2026-11-21T12:00:00Z"));
        assert!(due(None, &first));
        let same = AgentView::of(&host(), at("2026-11-21T12:04:59Z"));
        assert!(!due(Some(&first), &same));
        let beat = AgentView::of(&host(), at("2026-11-21T12:05:00Z"));
        assert!(due(Some(&first), &beat));
        let mut sick = host();
        sick.gpus[0].healthy = false;
        assert!(due(
            Some(&first),
            &AgentView::of(&sick, at("2026-11-21T12:00:10Z"))
        ));
    }
}
