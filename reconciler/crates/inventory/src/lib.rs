//! Inventory: what the live fleet looks like, as an observed state
//! (DESIGN.md §3).
//!
//! Sources, behind the [`Inventory`] trait:
//! - this host through NVML ([`HostInventory`] over [`nvml::NvmlSource`]);
//!   any [`DeviceSource`] works, so [`StaticSource`] (a fake) drives the tests;
//! - an observed-state file ([`SnapshotFile`]), e.g. one written by
//!   `gitfleet inventory` on a GPU host, or several merged ([`merge`]);
//! - Kubernetes Nodes (later, with the kube executor).
//!
//! Turning raw device facts into a node is pure ([`build_node`]): model names
//! ([`model_map`]), NVLink domains ([`nvlink`]), health verdicts ([`health`]).

pub mod health;
pub mod merge;
pub mod model_map;
pub mod nvml;
pub mod watch;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use load::parse_observed;
use model::nvlink;
use model::observed::{GpuDetails, ObservedGpu, ObservedNode, ObservedState};
use model_map::ModelMap;

/// Why the inventory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// No NVIDIA library on this host (no driver: a laptop, CI).
    #[error(
        "NVML could not be loaded (libnvidia-ml.so.1 not found): this host has no NVIDIA driver; \
         use an observed-state snapshot instead (`gitfleet plan --observed FILE`, \
         with FILE written by `gitfleet inventory` on a GPU host)"
    )]
    NvmlMissing,
    /// The library is there but NVML would not start (driver not loaded, no permission).
    #[error(
        "NVML could not be initialised ({0}); \
         use an observed-state snapshot instead (`gitfleet plan --observed FILE`)"
    )]
    NvmlInit(String),
    /// A query that the whole read depends on failed.
    #[error("NVML: {what}: {message}")]
    Nvml {
        /// What was asked.
        what: &'static str,
        /// NVML's answer.
        message: String,
    },
    /// Critical-event notifications cannot be had on this host.
    #[error("NVML events unavailable: {0}")]
    Events(String),
    /// An observed-state file that cannot be read or is invalid.
    #[error("{0}")]
    Snapshot(String),
}

/// Raw facts about one GPU, as a device source reports them. Anything the
/// GPU or driver could not report is `None` ("unknown").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuFacts {
    /// Index on the host (NVML order, as `CUDA_VISIBLE_DEVICES` counts).
    pub index: u32,
    /// NVML says the GPU is lost (fell off the bus).
    pub lost: bool,
    /// NVML UUID.
    pub uuid: Option<String>,
    /// Product name as NVML reports it.
    pub name: Option<String>,
    /// Total memory, MiB.
    pub memory_mib: Option<u64>,
    /// PCI bus id.
    pub pci_bus_id: Option<String>,
    /// Modes, counters, links, telemetry (`product` is filled from `name`).
    pub details: GpuDetails,
}

impl GpuFacts {
    /// A GPU about which nothing is known but its index.
    pub fn new(index: u32) -> Self {
        GpuFacts {
            index,
            ..Default::default()
        }
    }
}

/// A critical event NVML reported while watching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CriticalEvent {
    /// Index of the GPU it happened on, when NVML could say.
    pub gpu: Option<u32>,
    /// What happened.
    pub kind: EventKind,
}

/// Kinds of critical events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A critical XID error, with its number when known.
    Xid(Option<u64>),
    /// A double-bit (uncorrectable) ECC error.
    DoubleBitEcc,
}

/// Where GPU facts of this host come from: NVML, or a fake in tests.
pub trait DeviceSource {
    /// Reads every GPU. Fails only when nothing can be read at all; a query a
    /// GPU does not support leaves that fact unknown.
    fn read(&self) -> Result<Vec<GpuFacts>, InventoryError>;

    /// Blocks, passing critical events (XID, double-bit ECC) to `sink`, until
    /// `stop` is set. Checks `stop` at least once a second.
    fn watch_events(
        &self,
        stop: &AtomicBool,
        sink: &mut dyn FnMut(CriticalEvent),
    ) -> Result<(), InventoryError>;
}

/// Anything that yields the live fleet as an observed state.
pub trait Inventory {
    /// Reads the live fleet now. The caller stamps `time`.
    fn observe(&self) -> Result<ObservedState, InventoryError>;
}

/// How this host appears as a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostOptions {
    /// Node name (the host name).
    pub node: String,
    /// The NodePool it belongs to.
    pub pool: Option<String>,
    /// Labels (`rack`, `zone`, …).
    pub labels: BTreeMap<String, String>,
    /// NVML name → model name.
    pub model_map: ModelMap,
    /// How many GPUs the node should have; fewer found become unhealthy
    /// placeholders (health rule 6).
    pub expected_gpus: Option<u32>,
}

/// A node built from device facts, with warnings for the person running it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostNode {
    /// The node.
    pub node: ObservedNode,
    /// E.g. a GPU name missing from the model table.
    pub warnings: Vec<String>,
}

/// Builds this host's node from device facts and the critical events seen so
/// far: models, NVLink domains, health. Pure.
pub fn build_node(facts: &[GpuFacts], options: &HostOptions, events: &[CriticalEvent]) -> HostNode {
    let mut facts: Vec<&GpuFacts> = facts.iter().collect();
    facts.sort_by_key(|f| f.index);
    let mut warnings = Vec::new();
    let links: Vec<nvlink::GpuLinks> = facts
        .iter()
        .map(|f| nvlink::GpuLinks {
            index: f.index,
            pci_bus_id: f.pci_bus_id.clone(),
            peers: f.details.nvlink_peers.clone(),
        })
        .collect();
    let domain_of = nvlink::domain_of(&nvlink::domains(&links));
    let mut gpus: Vec<ObservedGpu> = Vec::with_capacity(facts.len());
    for f in facts {
        let model = match f.name.as_deref() {
            Some(name) => {
                let mapped = options.model_map.map(name);
                if !mapped.known {
                    let w = format!(
                        "GPU name {name:?} is not in the model table; using {:?} \
                         (map it with --model-map)",
                        mapped.model
                    );
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
                mapped.model
            }
            None => {
                warnings.push(format!("GPU {}: NVML did not report a name", f.index));
                "UNKNOWN".to_string()
            }
        };
        let verdict = health::assess(f, events);
        let mut details = f.details.clone();
        details.product = f.name.clone();
        gpus.push(ObservedGpu {
            index: f.index,
            model,
            memory_mib: f.memory_mib,
            healthy: verdict.healthy,
            uuid: f.uuid.clone(),
            pci_bus_id: f.pci_bus_id.clone(),
            nvlink_domain: domain_of.get(&f.index).copied(),
            health_reason: verdict.reason,
            details: Some(Box::new(details)),
        });
    }
    if let Some(expected) = options.expected_gpus {
        let model = majority_model(&gpus).unwrap_or_else(|| "UNKNOWN".to_string());
        gpus.extend(health::missing_gpus(&gpus, expected, &model));
        gpus.sort_by_key(|g| g.index);
    }
    HostNode {
        node: ObservedNode {
            name: options.node.clone(),
            pool: options.pool.clone(),
            labels: options.labels.clone(),
            idle_since: None,
            gpus,
        },
        warnings,
    }
}

/// The most common model (ties: the smaller name), as the engine sees a node.
fn majority_model(gpus: &[ObservedGpu]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for g in gpus {
        *counts.entry(g.model.as_str()).or_default() += 1;
    }
    let best = counts.values().copied().max()?;
    counts
        .into_iter()
        .find(|(_, n)| *n == best)
        .map(|(m, _)| m.to_string())
}

/// This host, through a device source.
#[derive(Debug)]
pub struct HostInventory<S> {
    /// Where GPU facts come from.
    pub source: S,
    /// How the host appears as a node.
    pub options: HostOptions,
}

impl<S: DeviceSource> HostInventory<S> {
    /// Reads the devices and builds the node, given the events seen so far.
    pub fn node(&self, events: &[CriticalEvent]) -> Result<HostNode, InventoryError> {
        let facts = self.source.read()?;
        Ok(build_node(&facts, &self.options, events))
    }
}

impl<S: DeviceSource> Inventory for HostInventory<S> {
    fn observe(&self) -> Result<ObservedState, InventoryError> {
        let host = self.node(&[])?;
        Ok(ObservedState {
            nodes: vec![host.node],
            ..Default::default()
        })
    }
}

/// An observed-state file (YAML or JSON).
#[derive(Debug, Clone)]
pub struct SnapshotFile {
    /// Its path.
    pub path: std::path::PathBuf,
}

impl Inventory for SnapshotFile {
    fn observe(&self) -> Result<ObservedState, InventoryError> {
        let name = self.path.display().to_string();
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| InventoryError::Snapshot(format!("{name}: cannot read: {e}")))?;
        parse_observed(&name, &text).map_err(|diags| {
            InventoryError::Snapshot(
                diags
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        })
    }
}

/// A fixed set of GPUs and events: the fake device source of tests, and a
/// way to replay recorded facts.
#[derive(Debug, Clone, Default)]
pub struct StaticSource {
    /// What `read` returns.
    pub gpus: Vec<GpuFacts>,
    /// What `watch_events` passes on, in order, before it returns.
    pub events: Vec<CriticalEvent>,
}

impl DeviceSource for StaticSource {
    fn read(&self) -> Result<Vec<GpuFacts>, InventoryError> {
        Ok(self.gpus.clone())
    }

    fn watch_events(
        &self,
        _stop: &AtomicBool,
        sink: &mut dyn FnMut(CriticalEvent),
    ) -> Result<(), InventoryError> {
        for e in &self.events {
            sink(*e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::observed::RemappedRows;

    fn h100(index: u32) -> GpuFacts {
        let mut f = GpuFacts::new(index);
        f.name = Some("NVIDIA H100 80GB HBM3".into());
        f.uuid = Some(format!("GPU-{index:04}"));
        f.memory_mib = Some(81559);
        f.pci_bus_id = Some(format!("00000000:{:02X}:00.0", 0x18 + index));
        f.details.nvlink_active = Some(18);
        f.details.nvlink_peers = vec!["0000:c0:00.0".into(), "0000:c1:00.0".into()];
        f
    }

    fn options() -> HostOptions {
        HostOptions {
            node: "gpu-host-1".into(),
            pool: Some("h100-zone-a".into()),
            labels: [("rack".to_string(), "r0".to_string())].into(),
            model_map: ModelMap::builtin(),
            expected_gpus: None,
        }
    }

    #[test]
    fn a_healthy_hgx_node() {
        let source = StaticSource {
            gpus: (0..8).rev().map(h100).collect(),
            events: vec![],
        };
        let inv = HostInventory {
            source,
            options: options(),
        };
        let state = inv.observe().unwrap();
        let node = &state.nodes[0];
        assert_eq!(node.name, "gpu-host-1");
        assert_eq!(node.pool.as_deref(), Some("h100-zone-a"));
        assert_eq!(node.gpus.len(), 8);
        assert_eq!(node.gpus[0].index, 0, "sorted by index");
        assert!(
            node.gpus
                .iter()
                .all(|g| g.model == "H100-SXM-80GB" && g.healthy)
        );
        assert!(node.gpus.iter().all(|g| g.nvlink_domain == Some(0)));
        assert_eq!(
            node.gpus[0].details.as_ref().unwrap().product.as_deref(),
            Some("NVIDIA H100 80GB HBM3")
        );
        // The document round-trips through the observed-state parser.
        let yaml = serde_saphyr::to_string(&state).unwrap();
        assert_eq!(parse_observed("inv.yaml", &yaml).unwrap(), state);
    }

    #[test]
    fn watched_events_turn_a_gpu_unhealthy() {
        let inv = HostInventory {
            source: StaticSource {
                gpus: (0..2).map(h100).collect(),
                events: vec![
                    CriticalEvent {
                        gpu: Some(1),
                        kind: EventKind::DoubleBitEcc,
                    },
                    CriticalEvent {
                        gpu: Some(0),
                        kind: EventKind::Xid(Some(43)),
                    },
                ],
            },
            options: options(),
        };
        let before = inv.node(&[]).unwrap().node;
        let mut events = Vec::new();
        inv.source
            .watch_events(&AtomicBool::new(false), &mut |e| events.push(e))
            .unwrap();
        let after = inv.node(&events).unwrap().node;
        let changes: Vec<String> = watch::changes(&before, &after)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            changes,
            vec!["GPU 1: unhealthy: double-bit ECC error event"]
        );
    }

    #[test]
    fn snapshot_files_are_an_inventory() {
        let dir = std::env::temp_dir().join(format!("gitfleet-snapshot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.yaml");
        std::fs::write(
            &good,
            "nodes:\n  - {name: n0, gpus: [{index: 0, model: A}]}\n",
        )
        .unwrap();
        let state = SnapshotFile { path: good }.observe().unwrap();
        assert_eq!(state.nodes[0].name, "n0");
        let bad = dir.join("bad.yaml");
        std::fs::write(
            &bad,
            "nodes:\n  - {name: n0, gpus: [{index: x, model: A}]}\n",
        )
        .unwrap();
        let err = SnapshotFile { path: bad }
            .observe()
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad.yaml:2:"), "{err}");
        let missing = SnapshotFile {
            path: dir.join("none.yaml"),
        };
        assert!(
            missing
                .observe()
                .unwrap_err()
                .to_string()
                .contains("cannot read")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unhealthy_unknown_and_missing_gpus() {
        let mut gpus: Vec<GpuFacts> = (0..3).map(h100).collect();
        gpus[1].details.remapped_rows = Some(RemappedRows {
            failed: true,
            ..Default::default()
        });
        gpus[2].name = Some("NVIDIA Future GPU".into());
        gpus[2].details.nvlink_peers.clear();
        let opts = HostOptions {
            expected_gpus: Some(4),
            ..options()
        };
        let events = [CriticalEvent {
            gpu: Some(0),
            kind: EventKind::Xid(Some(79)),
        }];
        let host = build_node(&gpus, &opts, &events);
        let g = &host.node.gpus;
        assert_eq!(g.len(), 4);
        assert!(!g[0].healthy && g[0].health_reason.as_deref().unwrap().contains("XID 79"));
        assert!(!g[1].healthy);
        assert!(g[2].healthy);
        assert_eq!(g[2].model, "FUTURE-GPU");
        assert_eq!(g[2].nvlink_domain, Some(2), "no links: alone");
        assert!(!g[3].healthy, "placeholder for the missing GPU");
        assert_eq!(g[3].model, "H100-SXM-80GB");
        assert_eq!(host.warnings.len(), 1, "{:?}", host.warnings);
        assert!(host.warnings[0].contains("--model-map"));
    }
}
