//! The fleet a trace implies, as gitfleet YAML (`simulate --make-fleet`):
//! its pools (fixed sizes: `min == max`), its leaf queues (top-level) and
//! one default priority class.

/// A pool of identical nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolShape {
    /// Its name (a DNS label).
    pub name: String,
    /// The GPU model.
    pub model: String,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Nodes (min = max).
    pub nodes: u32,
}

/// A queue and its quota of one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueShape {
    /// Its name (a DNS label).
    pub name: String,
    /// Guaranteed = limit GPUs of `model`; `None`: no quota (guaranteed 0,
    /// no limit).
    pub quota: Option<(String, u64)>,
}

/// A trace's fleet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetShape {
    /// The pools, by name.
    pub pools: Vec<PoolShape>,
    /// The queues, by name.
    pub queues: Vec<QueueShape>,
}

/// The name of the default priority class the written fleet holds.
pub const DEFAULT_CLASS: &str = "normal";

const HEADER: &str = "apiVersion: gitfleet/v1\n";

impl FleetShape {
    /// The fleet as `(file name, YAML)` pairs: `pools.yaml`, `queues.yaml`
    /// and `priority-classes.yaml`.
    pub fn files(&self) -> Vec<(String, String)> {
        let mut pools = String::new();
        for p in &self.pools {
            pools.push_str(&format!(
                "---\n{HEADER}kind: NodePool\nmetadata: {{name: {}}}\nspec:\n  gpu: {{model: {}, count: {}}}\n  nvlink: full\n  size: {{min: {n}, max: {n}}}\n",
                p.name, p.model, p.gpus_per_node, n = p.nodes
            ));
        }
        let mut queues = String::new();
        for q in &self.queues {
            queues.push_str(&format!(
                "---\n{HEADER}kind: Queue\nmetadata: {{name: {}}}\nspec:\n  weight: 1\n",
                q.name
            ));
            if let Some((model, gpus)) = &q.quota {
                queues.push_str(&format!(
                    "  quota:\n    - {{model: {model}, guaranteed: {gpus}, limit: {gpus}}}\n"
                ));
            }
        }
        let classes = format!(
            "---\n{HEADER}kind: PriorityClass\nmetadata: {{name: {DEFAULT_CLASS}}}\nspec:\n  value: 0\n  preemptible: true\n  default: true\n"
        );
        vec![
            ("pools.yaml".to_string(), pools),
            ("queues.yaml".to_string(), queues),
            ("priority-classes.yaml".to_string(), classes),
        ]
    }
}
