//! Cluster Nodes as the model's observed nodes: GPUs from the device
//! plugin's `nvidia.com/gpu` and GPU Feature Discovery's labels, topology
//! from the zone label and a configured rack label, the pool from a
//! configured label. A pure mapping.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use model::observed::{ObservedGpu, ObservedNode};

use crate::pods::GPU_RESOURCE;

/// GPU Feature Discovery's product label (e.g. `NVIDIA-H100-80GB-HBM3`).
pub const GFD_PRODUCT: &str = "nvidia.com/gpu.product";
/// GPU Feature Discovery's memory label, MiB per GPU.
pub const GFD_MEMORY: &str = "nvidia.com/gpu.memory";
/// GPU Feature Discovery's GPU count label.
pub const GFD_COUNT: &str = "nvidia.com/gpu.count";
/// The well-known zone label.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The default label naming a node's NodePool.
pub const DEFAULT_POOL_LABEL: &str = "gitfleet.io/pool";
/// The default label naming a node's rack.
pub const DEFAULT_RACK_LABEL: &str = "gitfleet.io/rack";

/// Which Node labels mean what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLabels {
    /// The label whose value is the node's NodePool.
    pub pool: String,
    /// The label whose value is the node's rack.
    pub rack: String,
}

impl Default for NodeLabels {
    fn default() -> Self {
        NodeLabels {
            pool: DEFAULT_POOL_LABEL.to_string(),
            rack: DEFAULT_RACK_LABEL.to_string(),
        }
    }
}

/// The pool model name of a GPU Feature Discovery product label: the
/// NVML name it was made from (spaces became `-`) looked up in the
/// inventory's table, else the same mechanical form `gitfleet inventory`
/// falls back to.
pub fn gfd_model(product: &str) -> String {
    let known = inventory::model_map::BUILTIN
        .iter()
        .find(|(nvml, _)| nvml.replace(' ', "-") == product);
    match known {
        Some((_, model)) => (*model).to_string(),
        None => product
            .trim_start_matches("NVIDIA-")
            .trim_start_matches("Tesla-")
            .to_uppercase(),
    }
}

fn quantity(node: &Node, from_status: bool) -> Option<u32> {
    let status = node.status.as_ref()?;
    let map = if from_status {
        status.allocatable.as_ref()?
    } else {
        status.capacity.as_ref()?
    };
    map.get(GPU_RESOURCE)?.0.parse().ok()
}

/// The GPUs the device plugin reports allocatable (`status.allocatable`).
pub fn allocatable(node: &Node) -> Option<u32> {
    quantity(node, true)
}

/// Why the node takes no new jobs: cordoned, or not Ready.
pub fn unschedulable(node: &Node) -> Option<&'static str> {
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some("node cordoned");
    }
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    (!ready).then_some("node not Ready")
}

/// Whether the node is cordoned (`spec.unschedulable`).
pub fn cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// The taint a drain puts on a node with an unhealthy GPU (effect
/// `NoSchedule`: nothing new lands there, nothing running is evicted).
pub const UNHEALTHY_TAINT: &str = "gitfleet.io/unhealthy-gpu";

fn has_unhealthy_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == UNHEALTHY_TAINT && t.effect == "NoSchedule")
        })
}

/// Whether the node is drained: cordoned and tainted [`UNHEALTHY_TAINT`].
pub fn drained(node: &Node) -> bool {
    cordoned(node) && has_unhealthy_taint(node)
}

/// The merge patch that drains `node` (cordon, and its taints plus
/// [`UNHEALTHY_TAINT`]: a merge patch replaces the list, so every taint
/// it has is written back), guarded by its resourceVersion; `None` when
/// it is drained already.
pub fn drain_patch(node: &Node) -> Option<serde_json::Value> {
    if drained(node) {
        return None;
    }
    let mut taints: Vec<serde_json::Value> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| {
            t.iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect()
        })
        .unwrap_or_default();
    if !has_unhealthy_taint(node) {
        taints.push(serde_json::json!({"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}));
    }
    let mut patch = serde_json::json!({"spec": {"unschedulable": true, "taints": taints}});
    if let Some(rv) = &node.metadata.resource_version {
        patch["metadata"] = serde_json::json!({"resourceVersion": rv});
    }
    Some(patch)
}

/// The observed node of a cluster Node; `None` for a node with neither
/// GPUs nor a pool (not gitfleet's).
///
/// GPUs: `capacity` (else GFD's count) of them, indices from 0; those
/// beyond `allocatable` are unhealthy (the device plugin withdrew some,
/// which ones is not known here), and every GPU of a cordoned or NotReady
/// node is unhealthy, so nothing new is placed there. The model is GFD's
/// product mapped to pool names, else `pool_model` (the model the node's
/// pool declares), else `unknown`.
pub fn observed_node(
    node: &Node,
    labels: &NodeLabels,
    pool_model: impl Fn(&str) -> Option<String>,
) -> Option<ObservedNode> {
    let name = node.metadata.name.clone()?;
    let node_labels = node.metadata.labels.clone().unwrap_or_default();
    let pool = node_labels.get(&labels.pool).cloned();
    let count = quantity(node, false)
        .or_else(|| node_labels.get(GFD_COUNT).and_then(|c| c.parse().ok()))
        .unwrap_or(0);
    if count == 0 && pool.is_none() {
        return None;
    }
    let allocatable = quantity(node, true).unwrap_or(count);
    let model = node_labels
        .get(GFD_PRODUCT)
        .map(|p| gfd_model(p))
        .or_else(|| pool.as_deref().and_then(&pool_model))
        .unwrap_or_else(|| "unknown".to_string());
    let memory_mib = node_labels.get(GFD_MEMORY).and_then(|m| m.parse().ok());
    let down = unschedulable(node);
    let gpus = (0..count)
        .map(|index| {
            let reason = down.map(str::to_string).or_else(|| {
                (index >= allocatable).then(|| {
                    format!("the device plugin reports {allocatable} of {count} GPUs allocatable")
                })
            });
            ObservedGpu {
                memory_mib,
                healthy: reason.is_none(),
                health_reason: reason,
                ..ObservedGpu::new(index, model.clone())
            }
        })
        .collect();
    let mut topology = BTreeMap::new();
    if let Some(zone) = node_labels.get(ZONE_LABEL) {
        topology.insert("zone".to_string(), zone.clone());
    }
    if let Some(rack) = node_labels.get(&labels.rack) {
        topology.insert("rack".to_string(), rack.clone());
    }
    Some(ObservedNode {
        name,
        pool,
        labels: topology,
        idle_since: None,
        gpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    fn gpu_node(name: &str, unschedulable: bool, ready: &str) -> Node {
        node(json!({
            "metadata": {"name": name, "labels": {
                "gitfleet.io/pool": "h100-a",
                "gitfleet.io/rack": "r7",
                "topology.kubernetes.io/zone": "eu-1a",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.memory": "81559",
                "nvidia.com/gpu.count": "8",
                "kubernetes.io/hostname": name
            }},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "capacity": {"nvidia.com/gpu": "8", "cpu": "192"},
                "allocatable": {"nvidia.com/gpu": "8", "cpu": "190"},
                "conditions": [{"type": "Ready", "status": ready}]
            }
        }))
    }

    #[test]
    fn gfd_labels_map_to_the_pools_model_and_topology() {
        let n = observed_node(
            &gpu_node("gpu-1", false, "True"),
            &NodeLabels::default(),
            |_| None,
        )
        .unwrap();
        assert_eq!(n.name, "gpu-1");
        assert_eq!(n.pool.as_deref(), Some("h100-a"));
        assert_eq!(n.labels.get("zone").map(String::as_str), Some("eu-1a"));
        assert_eq!(n.labels.get("rack").map(String::as_str), Some("r7"));
        assert_eq!(n.labels.len(), 2, "only topology labels: {:?}", n.labels);
        assert_eq!(n.gpus.len(), 8);
        assert!(
            n.gpus
                .iter()
                .all(|g| g.healthy && g.model == "H100-SXM-80GB")
        );
        assert_eq!(n.gpus[3].index, 3);
        assert_eq!(n.gpus[0].memory_mib, Some(81559));
    }

    #[test]
    fn configured_labels_are_read() {
        let labels = NodeLabels {
            pool: "topology.kubernetes.io/zone".to_string(),
            rack: "kubernetes.io/hostname".to_string(),
        };
        let n = observed_node(&gpu_node("gpu-2", false, "True"), &labels, |_| None).unwrap();
        assert_eq!(n.pool.as_deref(), Some("eu-1a"));
        assert_eq!(n.labels.get("rack").map(String::as_str), Some("gpu-2"));
    }

    #[test]
    fn cordoned_and_not_ready_nodes_take_nothing() {
        for (n, why) in [
            (gpu_node("c", true, "True"), "node cordoned"),
            (gpu_node("d", false, "False"), "node not Ready"),
            (gpu_node("e", false, "Unknown"), "node not Ready"),
        ] {
            let o = observed_node(&n, &NodeLabels::default(), |_| None).unwrap();
            assert!(o.gpus.iter().all(|g| !g.healthy));
            assert_eq!(o.gpus[0].health_reason.as_deref(), Some(why));
        }
        assert!(cordoned(&gpu_node("c", true, "True")));
        assert!(!cordoned(&gpu_node("c", false, "True")));
    }

    #[test]
    fn drain_patch_keeps_other_taints_and_is_none_when_drained() {
        let mut n = gpu_node("t", false, "True");
        n.metadata.resource_version = Some("41".to_string());
        n.spec.as_mut().unwrap().taints = Some(vec![
            serde_json::from_value(
                json!({"key": "dedicated", "value": "ml", "effect": "NoExecute"}),
            )
            .unwrap(),
        ]);
        let patch = drain_patch(&n).unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "41"},
                   "spec": {"unschedulable": true, "taints": [
                       {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
                       {"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}]}})
        );
        // Tainted but not cordoned: cordoned, the taint not doubled.
        n.spec.as_mut().unwrap().taints = Some(vec![
            serde_json::from_value(json!({"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}))
                .unwrap(),
        ]);
        assert!(!drained(&n));
        let patch = drain_patch(&n).unwrap();
        assert_eq!(patch["spec"]["taints"].as_array().unwrap().len(), 1);
        // Cordoned by someone else, not tainted: not drained.
        n.spec.as_mut().unwrap().unschedulable = Some(true);
        assert!(drained(&n));
        assert!(drain_patch(&n).is_none());
        n.spec.as_mut().unwrap().taints = None;
        assert!(!drained(&n));
    }

    #[test]
    fn gpus_the_device_plugin_withdrew_are_unhealthy() {
        let mut n = gpu_node("w", false, "True");
        let status = n.status.as_mut().unwrap();
        status.allocatable.as_mut().unwrap().insert(
            GPU_RESOURCE.to_string(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("6".to_string()),
        );
        let o = observed_node(&n, &NodeLabels::default(), |_| None).unwrap();
        let healthy: Vec<bool> = o.gpus.iter().map(|g| g.healthy).collect();
        assert_eq!(healthy, [true, true, true, true, true, true, false, false]);
    }

    #[test]
    fn without_gfd_the_pools_model_is_used_and_other_nodes_are_skipped() {
        let bare = node(json!({
            "metadata": {"name": "b", "labels": {"gitfleet.io/pool": "a100"}},
            "status": {"capacity": {"nvidia.com/gpu": "4"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        let o = observed_node(&bare, &NodeLabels::default(), |pool| {
            (pool == "a100").then(|| "A100-SXM4-80GB".to_string())
        })
        .unwrap();
        assert_eq!(o.gpus.len(), 4);
        assert!(
            o.gpus
                .iter()
                .all(|g| g.model == "A100-SXM4-80GB" && g.healthy)
        );
        let cpu = node(json!({"metadata": {"name": "cpu-1"},
            "status": {"capacity": {"cpu": "64"}}}));
        assert!(observed_node(&cpu, &NodeLabels::default(), |_| None).is_none());
    }

    #[test]
    fn gfd_products_map_like_nvml_names() {
        assert_eq!(gfd_model("NVIDIA-A100-SXM4-80GB"), "A100-SXM4-80GB");
        assert_eq!(gfd_model("Tesla-T4"), "T4-16GB");
        assert_eq!(gfd_model("NVIDIA-RTX-6000-Ada"), "RTX-6000-ADA");
    }
}
