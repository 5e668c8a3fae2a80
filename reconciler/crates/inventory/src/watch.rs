//! What changed on a node between two reads, for `gitfleet inventory --watch`.
//!
//! Only facts that matter to scheduling or repair are compared: GPUs that
//! appear or vanish, health, model, MIG and ECC modes, uncorrectable error
//! counts, pending retirements and remaps, NVLink domains. Temperature, power
//! and utilization move all the time and are not reported as changes.

use std::collections::BTreeMap;

use model::observed::{GpuDetails, ObservedGpu, ObservedNode};

/// One change on one GPU (or the node), in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The GPU index, or `None` for the node.
    pub gpu: Option<u32>,
    /// What changed.
    pub what: String,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.gpu {
            Some(i) => write!(f, "GPU {i}: {}", self.what),
            None => write!(f, "{}", self.what),
        }
    }
}

/// The changes from `old` to `new`, by GPU index.
pub fn changes(old: &ObservedNode, new: &ObservedNode) -> Vec<Change> {
    let before: BTreeMap<u32, &ObservedGpu> = old.gpus.iter().map(|g| (g.index, g)).collect();
    let after: BTreeMap<u32, &ObservedGpu> = new.gpus.iter().map(|g| (g.index, g)).collect();
    let mut out = Vec::new();
    let mut indices: Vec<u32> = before.keys().chain(after.keys()).copied().collect();
    indices.sort_unstable();
    indices.dedup();
    for i in indices {
        let change = |what: String| Change { gpu: Some(i), what };
        match (before.get(&i), after.get(&i)) {
            (Some(_), None) => out.push(change("gone".to_string())),
            (None, Some(g)) => out.push(change(format!("appeared ({})", g.model))),
            (Some(a), Some(b)) => out.extend(gpu_changes(a, b).into_iter().map(change)),
            (None, None) => {}
        }
    }
    out
}

fn gpu_changes(a: &ObservedGpu, b: &ObservedGpu) -> Vec<String> {
    let mut out = Vec::new();
    if a.healthy != b.healthy || (!b.healthy && a.health_reason != b.health_reason) {
        out.push(if b.healthy {
            "healthy again".to_string()
        } else {
            format!(
                "unhealthy: {}",
                b.health_reason.as_deref().unwrap_or("no reason given")
            )
        });
    }
    if a.uuid != b.uuid {
        out.push(format!(
            "UUID {} → {}",
            a.uuid.as_deref().unwrap_or("unknown"),
            b.uuid.as_deref().unwrap_or("unknown")
        ));
    }
    if a.model != b.model {
        out.push(format!("model {} → {}", a.model, b.model));
    }
    if a.nvlink_domain != b.nvlink_domain {
        out.push(format!(
            "NVLink domain {} → {}",
            opt(a.nvlink_domain),
            opt(b.nvlink_domain)
        ));
    }
    let none = GpuDetails::default();
    let da = a.details.as_deref().unwrap_or(&none);
    let db = b.details.as_deref().unwrap_or(&none);
    if da.mig != db.mig {
        out.push(format!("MIG mode {} → {}", mode(da.mig), mode(db.mig)));
    }
    if da.ecc != db.ecc {
        out.push(format!("ECC mode {} → {}", mode(da.ecc), mode(db.ecc)));
    }
    if da.ecc_uncorrectable_volatile != db.ecc_uncorrectable_volatile {
        out.push(format!(
            "uncorrectable ECC errors (since driver load) {} → {}",
            opt(da.ecc_uncorrectable_volatile),
            opt(db.ecc_uncorrectable_volatile)
        ));
    }
    if da.retired_pages_pending != db.retired_pages_pending {
        out.push(format!(
            "pages pending retirement {} → {}",
            opt(da.retired_pages_pending),
            opt(db.retired_pages_pending)
        ));
    }
    if da.remapped_rows != db.remapped_rows {
        let show = |r: Option<model::observed::RemappedRows>| match r {
            None => "unknown".to_string(),
            Some(r) => format!(
                "{} correctable, {} uncorrectable{}{}",
                r.correctable,
                r.uncorrectable,
                if r.pending { ", pending" } else { "" },
                if r.failed { ", FAILED" } else { "" }
            ),
        };
        out.push(format!(
            "remapped rows {} → {}",
            show(da.remapped_rows),
            show(db.remapped_rows)
        ));
    }
    out
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "unknown".to_string(), |v| v.to_string())
}

fn mode(m: Option<model::observed::ModeState>) -> String {
    match m {
        None => "unknown".to_string(),
        Some(m) if m.current == m.pending => on_off(m.current).to_string(),
        Some(m) => format!(
            "{} (→ {} after reset)",
            on_off(m.current),
            on_off(m.pending)
        ),
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::observed::ModeState;

    fn node(gpus: Vec<ObservedGpu>) -> ObservedNode {
        ObservedNode {
            name: "n".into(),
            pool: None,
            labels: Default::default(),
            idle_since: None,
            gpus,
        }
    }

    #[test]
    fn no_change_no_output() {
        let a = node(vec![ObservedGpu::new(0, "A")]);
        assert!(changes(&a, &a).is_empty());
    }

    #[test]
    fn health_presence_and_modes_are_reported() {
        let mut g1 = ObservedGpu::new(1, "A");
        g1.details = Some(Box::new(GpuDetails {
            mig: Some(ModeState {
                current: false,
                pending: false,
            }),
            temperature_c: Some(40),
            ..Default::default()
        }));
        let a = node(vec![ObservedGpu::new(0, "A"), g1.clone()]);
        let mut g1b = g1.clone();
        g1b.healthy = false;
        g1b.health_reason = Some("XID 79 (GPU has fallen off the bus)".into());
        if let Some(d) = g1b.details.as_mut() {
            d.mig = Some(ModeState {
                current: false,
                pending: true,
            });
            d.temperature_c = Some(80);
        }
        let b = node(vec![g1b, ObservedGpu::new(2, "A")]);
        let text: Vec<String> = changes(&a, &b).iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "GPU 0: gone",
                "GPU 1: unhealthy: XID 79 (GPU has fallen off the bus)",
                "GPU 1: MIG mode off → off (→ on after reset)",
                "GPU 2: appeared (A)",
            ]
        );
        let back: Vec<String> = changes(&b, &a).iter().map(ToString::to_string).collect();
        assert!(
            back.contains(&"GPU 1: healthy again".to_string()),
            "{back:?}"
        );
    }
}
