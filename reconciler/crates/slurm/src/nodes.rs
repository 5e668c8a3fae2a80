//! Scheduler mode's nodes: `sinfo -N` read into gitfleet's observed nodes.
//! A node belongs to the pool named like its partition, else to the first
//! pool whose GPU model has the node's GRES type; a node Slurm reports
//! down, drained, failed or not responding has all its GPUs unhealthy (so
//! gitfleet places nothing there and plans a drain).

use model::observed::{ObservedGpu, ObservedNode};

use crate::desired::Mapping;

/// The `sinfo -h -N -o` format [`parse_sinfo`] reads (the reason last: it
/// is free text).
pub const SINFO_FORMAT: &str = "%N|%T|%P|%G|%E";

/// A node as `sinfo` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    /// Its name.
    pub name: String,
    /// Slurm's state in long form (`idle`, `mixed`, `drained`, `down*`, …).
    pub state: String,
    /// Its partitions (the default one without its `*`).
    pub partitions: Vec<String>,
    /// Its GPUs: (GRES type, count), from `gpu:<type>:<n>` entries.
    pub gpus: Vec<(String, u32)>,
    /// Why it is down or drained (`none` when not).
    pub reason: String,
}

impl SlurmNode {
    /// Whether Slurm takes it out of service: down, drained or draining,
    /// failed, or not responding (a trailing `*`).
    pub fn out_of_service(&self) -> bool {
        let s = self.state.to_ascii_lowercase();
        s.ends_with('*')
            || ["down", "drain", "fail", "not_responding"]
                .iter()
                .any(|w| s.contains(w))
    }

    /// Whether it is drained or draining, or drained by gitfleet (a down
    /// node that gitfleet drained shows as `down`, with gitfleet's reason).
    pub fn drained(&self) -> bool {
        self.state.to_ascii_lowercase().contains("drain") || self.reason.starts_with("gitfleet:")
    }
}

/// Reads `sinfo -h -N -o '%N|%T|%P|%G|%E'` (one line per node and
/// partition; the lines of one node are merged).
pub fn parse_sinfo(text: &str) -> Result<Vec<SlurmNode>, String> {
    let mut nodes: Vec<SlurmNode> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.splitn(5, '|').collect();
        let [name, state, partition, gres, reason] = fields.as_slice() else {
            return Err(format!("sinfo: unexpected line `{line}`"));
        };
        let partition = partition.trim_end_matches('*').to_string();
        if let Some(node) = nodes.iter_mut().find(|n| n.name == *name) {
            if !node.partitions.contains(&partition) {
                node.partitions.push(partition);
            }
            continue;
        }
        nodes.push(SlurmNode {
            name: (*name).to_string(),
            state: (*state).to_string(),
            partitions: vec![partition],
            gpus: parse_gres(gres),
            reason: (*reason).to_string(),
        });
    }
    Ok(nodes)
}

/// The `gpu:<type>:<n>` entries of a GRES list (`gpu:h100:8(S:0-1),shard:4`).
pub(crate) fn parse_gres(text: &str) -> Vec<(String, u32)> {
    // Socket lists in parentheses may hold commas: drop them first.
    let mut plain = String::new();
    let mut depth = 0u32;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    plain
        .split(',')
        .filter_map(|entry| {
            let parts: Vec<&str> = entry.trim().split(':').collect();
            match parts.as_slice() {
                ["gpu", kind, count] => Some(((*kind).to_string(), count.parse().ok()?)),
                ["gpu", count] => Some((String::new(), count.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// A pool as scheduler mode needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInfo {
    /// The pool's name.
    pub name: String,
    /// Its GPU model.
    pub model: String,
    /// The model's GRES type.
    pub gres_type: String,
}

/// The pools of a fleet, with their GRES types.
pub fn pools(fleet: &model::spec::Fleet, mapping: &Mapping) -> Vec<PoolInfo> {
    fleet
        .pools
        .iter()
        .map(|p| PoolInfo {
            name: p.name().to_string(),
            model: p.spec.gpu.model.clone(),
            gres_type: mapping.gres_type(&p.spec.gpu.model),
        })
        .collect()
}

/// The pool of a node: the one named like one of its partitions, else the
/// first whose GRES type the node's GPUs have.
pub fn pool_of<'a>(node: &SlurmNode, pools: &'a [PoolInfo]) -> Option<&'a PoolInfo> {
    pools
        .iter()
        .find(|p| node.partitions.contains(&p.name))
        .or_else(|| {
            pools
                .iter()
                .find(|p| node.gpus.iter().any(|(t, _)| *t == p.gres_type))
        })
}

/// The node as gitfleet observes it.
pub fn observed(node: &SlurmNode, pools: &[PoolInfo]) -> ObservedNode {
    let pool = pool_of(node, pools);
    let healthy = !node.out_of_service();
    let mut gpus = Vec::new();
    for (kind, count) in &node.gpus {
        let model = match pool {
            Some(p) if p.gres_type == *kind || kind.is_empty() => p.model.clone(),
            _ => kind.clone(),
        };
        for _ in 0..*count {
            let index = u32::try_from(gpus.len()).unwrap_or(u32::MAX);
            gpus.push(ObservedGpu {
                healthy,
                ..ObservedGpu::new(index, model.clone())
            });
        }
    }
    ObservedNode {
        name: node.name.clone(),
        pool: pool.map(|p| p.name.clone()),
        labels: Default::default(),
        idle_since: None,
        gpus,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // sinfo -h -N -o '%N|%T|%P|%G|%E' of Slurm 22.05.8 (tests/slurm/start-cluster.sh),
    // with gpu-3 drained by gitfleet and gpu-2 in a second partition.
    const SINFO: &str = "gpu-1|idle|gpu*|gpu:h100-sxm-80gb:8|none\n\
gpu-2|mixed|gpu*|gpu:h100-sxm-80gb:8(S:0,1)|none\n\
gpu-2|mixed|big|gpu:h100-sxm-80gb:8(S:0,1)|none\n\
gpu-3|drained|gpu*|gpu:a100-sxm4-80gb:8,shard:16|gitfleet: GPU 0 unhealthy | really\n";

    fn pools() -> Vec<PoolInfo> {
        let pool = |name: &str, model: &str| PoolInfo {
            name: name.into(),
            model: model.into(),
            gres_type: Mapping::default().gres_type(model),
        };
        vec![
            pool("h100", "H100-SXM-80GB"),
            pool("big", "H100-SXM-80GB"),
            pool("a100", "A100-SXM4-80GB"),
        ]
    }

    #[test]
    fn reads_sinfo_and_maps_nodes_to_pools() {
        let nodes = parse_sinfo(SINFO).unwrap();
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[1].partitions, ["gpu", "big"]);
        assert_eq!(nodes[1].gpus, [("h100-sxm-80gb".to_string(), 8)]);
        assert_eq!(nodes[2].gpus, [("a100-sxm4-80gb".to_string(), 8)]);
        assert_eq!(nodes[2].reason, "gitfleet: GPU 0 unhealthy | really");
        assert!(!nodes[0].out_of_service() && !nodes[1].out_of_service());
        assert!(nodes[2].out_of_service() && nodes[2].drained());

        let pools = pools();
        let seen: Vec<ObservedNode> = nodes.iter().map(|n| observed(n, &pools)).collect();
        assert_eq!(seen[0].pool.as_deref(), Some("h100"), "by GRES type");
        assert_eq!(seen[1].pool.as_deref(), Some("big"), "by partition");
        assert_eq!(seen[2].pool.as_deref(), Some("a100"));
        assert_eq!(seen[0].gpus.len(), 8);
        assert_eq!(seen[0].gpus[7].index, 7);
        assert_eq!(seen[0].gpus[0].model, "H100-SXM-80GB");
        assert!(seen[0].gpus.iter().all(|g| g.healthy));
        assert!(
            seen[2].gpus.iter().all(|g| !g.healthy),
            "drained: unhealthy"
        );

        assert!(parse_sinfo("gpu-1|idle\n").is_err());
        let down = SlurmNode {
            state: "idle*".into(),
            ..nodes[0].clone()
        };
        assert!(down.out_of_service(), "not responding");
        assert!(!down.drained());
        let drained_down = SlurmNode {
            state: "down".into(),
            reason: "gitfleet: GPU 0 unhealthy".into(),
            ..nodes[0].clone()
        };
        assert!(drained_down.drained(), "down, drained by gitfleet");
    }
}
