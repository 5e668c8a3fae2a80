//! NVLink domains of one node, from its link topology.
//!
//! Each GPU reports the PCI bus ids at the far end of its active links: another
//! GPU (a direct bridge, as on A100 pairs) or an NVSwitch (HGX boards). GPUs
//! joined by a link, directly or through the same switch, are in one domain
//! (union-find over GPUs and far ends). A GPU with no active link — or whose
//! links NVML cannot report — is a domain of its own (PCIe only). A domain is
//! named by its lowest GPU index.

use std::collections::BTreeMap;

use crate::observed::ObservedNode;
use crate::spec::NvLink;

/// One GPU's links, as the domain construction needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuLinks {
    /// GPU index on the node.
    pub index: u32,
    /// Its own PCI bus id, when known (links from other GPUs name it).
    pub pci_bus_id: Option<String>,
    /// PCI bus ids at the far end of its active links.
    pub peers: Vec<String>,
}

/// NVLink domains: GPU indices per domain, each sorted, domains sorted by
/// their lowest index.
pub fn domains(gpus: &[GpuLinks]) -> Vec<Vec<u32>> {
    // Union-find over keys: "gpu:<index>" and normalised bus ids.
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    let mut parent: Vec<usize> = Vec::new();
    let mut id_of = |key: String, parent: &mut Vec<usize>| -> usize {
        *ids.entry(key).or_insert_with(|| {
            parent.push(parent.len());
            parent.len() - 1
        })
    };
    let mut gpu_ids = Vec::with_capacity(gpus.len());
    for gpu in gpus {
        let me = id_of(format!("gpu:{}", gpu.index), &mut parent);
        if let Some(bus) = &gpu.pci_bus_id {
            let b = id_of(normalise_bus_id(bus), &mut parent);
            union(&mut parent, me, b);
        }
        gpu_ids.push((gpu.index, me));
    }
    for gpu in gpus {
        let me = id_of(format!("gpu:{}", gpu.index), &mut parent);
        for peer in &gpu.peers {
            let p = id_of(normalise_bus_id(peer), &mut parent);
            union(&mut parent, me, p);
        }
    }
    let mut groups: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (index, id) in gpu_ids {
        let root = find(&mut parent, id);
        groups.entry(root).or_default().push(index);
    }
    let mut out: Vec<Vec<u32>> = groups
        .into_values()
        .map(|mut g| {
            g.sort_unstable();
            g.dedup();
            g
        })
        .collect();
    out.sort();
    out
}

/// GPU index → domain name (the domain's lowest GPU index).
pub fn domain_of(domains: &[Vec<u32>]) -> BTreeMap<u32, u32> {
    domains
        .iter()
        .flat_map(|d| {
            let name = d.first().copied().unwrap_or(0);
            d.iter().map(move |i| (*i, name))
        })
        .collect()
}

/// The domains recorded on an observed node (`nvlinkDomain` of each GPU), or
/// `None` when some GPU does not say.
pub fn observed_domains(node: &ObservedNode) -> Option<Vec<Vec<u32>>> {
    let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for gpu in &node.gpus {
        groups
            .entry(gpu.nvlink_domain?)
            .or_default()
            .push(gpu.index);
    }
    let mut out: Vec<Vec<u32>> = groups
        .into_values()
        .map(|mut g| {
            g.sort_unstable();
            g
        })
        .collect();
    out.sort();
    Some(out)
}

/// Whether domains have the shape a pool's `nvlink` declares: `full` one
/// domain, `pairs` (0,1),(2,3)… by position in index order, `none` every GPU
/// alone. A node with one GPU fits every shape.
pub fn matches(declared: NvLink, domains: &[Vec<u32>]) -> bool {
    let mut all: Vec<u32> = domains.iter().flatten().copied().collect();
    all.sort_unstable();
    if all.len() <= 1 {
        return true;
    }
    match declared {
        NvLink::Full => domains.len() == 1,
        NvLink::None => domains.iter().all(|d| d.len() == 1),
        NvLink::Pairs => {
            let pairs: Vec<Vec<u32>> = all.chunks(2).map(<[u32]>::to_vec).collect();
            let mut have = domains.to_vec();
            have.sort();
            have == pairs
        }
    }
}

/// Describes domains in words: `one domain of 8`, `4 pairs`, `PCIe only`, or
/// the list of domains.
pub fn describe(domains: &[Vec<u32>]) -> String {
    let gpus: usize = domains.iter().map(Vec::len).sum();
    if domains.len() == 1 && gpus > 1 {
        return format!("one NVLink domain of {gpus} GPUs");
    }
    if domains.iter().all(|d| d.len() == 1) {
        return "PCIe only (no NVLink)".to_string();
    }
    if matches(NvLink::Pairs, domains) {
        return format!("NVLink pairs {}", list(domains));
    }
    format!("NVLink domains {}", list(domains))
}

fn list(domains: &[Vec<u32>]) -> String {
    domains
        .iter()
        .map(|d| {
            let ids: Vec<String> = d.iter().map(u32::to_string).collect();
            format!("({})", ids.join(","))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `00000000:18:00.0`, `0000:18:00.0` and `18:00.0` are one device:
/// `0000:18:00.0` (domain, bus, device.function; lower case).
pub fn normalise_bus_id(id: &str) -> String {
    let lower = id.trim().to_ascii_lowercase();
    let parts: Vec<&str> = lower.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [domain, bus, devfn] => (*domain, *bus, *devfn),
        [bus, devfn] => ("0", *bus, *devfn),
        _ => return format!("bus:{lower}"),
    };
    let domain = u32::from_str_radix(domain, 16).ok();
    let bus = u32::from_str_radix(bus, 16).ok();
    match (domain, bus) {
        (Some(d), Some(b)) => format!("{d:04x}:{b:02x}:{devfn}"),
        _ => format!("bus:{lower}"),
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        parent[hi] = lo;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bus(i: u32) -> String {
        format!("00000000:{:02X}:00.0", 0x18 + i * 0x10)
    }

    fn gpu(index: u32, peers: Vec<String>) -> GpuLinks {
        GpuLinks {
            index,
            pci_bus_id: Some(bus(index)),
            peers,
        }
    }

    #[test]
    fn nvswitch_node_is_one_domain() {
        // HGX H100: every GPU has 18 links to 4 NVSwitches.
        let switches: Vec<String> = (0..4)
            .map(|s| format!("0000:{:02x}:00.0", 0xc0 + s))
            .collect();
        let gpus: Vec<GpuLinks> = (0..8)
            .map(|i| gpu(i, switches.iter().cycle().take(18).cloned().collect()))
            .collect();
        let d = domains(&gpus);
        assert_eq!(d, vec![(0..8).collect::<Vec<u32>>()]);
        assert!(matches(NvLink::Full, &d));
        assert!(!matches(NvLink::Pairs, &d));
        assert_eq!(describe(&d), "one NVLink domain of 8 GPUs");
    }

    #[test]
    fn nvswitch_links_to_different_switches_still_join() {
        // GPU 0 only reaches switch A, GPU 1 A and B, GPU 2 only B.
        let a = "0000:c0:00.0".to_string();
        let b = "0000:c1:00.0".to_string();
        let gpus = vec![
            gpu(0, vec![a.clone()]),
            gpu(1, vec![a, b.clone()]),
            gpu(2, vec![b]),
        ];
        assert_eq!(domains(&gpus), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn bridged_pairs_are_pairs() {
        // A100 PCIe with NVLink bridges: (0,1), (2,3); each side names the other.
        let gpus: Vec<GpuLinks> = (0..4).map(|i| gpu(i, vec![bus(i ^ 1); 4])).collect();
        let d = domains(&gpus);
        assert_eq!(d, vec![vec![0, 1], vec![2, 3]]);
        assert!(matches(NvLink::Pairs, &d));
        assert!(!matches(NvLink::Full, &d));
        assert_eq!(describe(&d), "NVLink pairs (0,1) (2,3)");
        let names = domain_of(&d);
        assert_eq!(names.get(&3), Some(&2));
    }

    #[test]
    fn one_sided_links_and_odd_bus_id_formats_join() {
        // Only GPU 1 reports its link, in the short bus id form.
        let gpus = vec![gpu(0, vec![]), gpu(1, vec![format!("{:02x}:00.0", 0x18)])];
        assert_eq!(domains(&gpus), vec![vec![0, 1]]);
    }

    #[test]
    fn pcie_only_node_has_a_domain_per_gpu() {
        let gpus: Vec<GpuLinks> = (0..4).map(|i| gpu(i, vec![])).collect();
        let d = domains(&gpus);
        assert_eq!(d, vec![vec![0], vec![1], vec![2], vec![3]]);
        assert!(matches(NvLink::None, &d));
        assert!(!matches(NvLink::Pairs, &d));
        assert_eq!(describe(&d), "PCIe only (no NVLink)");
    }

    #[test]
    fn unknown_bus_ids_leave_gpus_alone() {
        let gpus = vec![
            GpuLinks {
                index: 0,
                pci_bus_id: None,
                peers: vec![],
            },
            GpuLinks {
                index: 1,
                pci_bus_id: None,
                peers: vec![],
            },
        ];
        assert_eq!(domains(&gpus), vec![vec![0], vec![1]]);
    }

    #[test]
    fn misdeclared_pairs_are_caught() {
        // (0,2) and (1,3) are pairs, but not the pairs a pool's `pairs` means.
        let d = vec![vec![0, 2], vec![1, 3]];
        assert!(!matches(NvLink::Pairs, &d));
        assert_eq!(describe(&d), "NVLink domains (0,2) (1,3)");
        assert!(matches(NvLink::Full, &[vec![0]]));
    }

    #[test]
    fn bus_ids_normalise() {
        assert_eq!(normalise_bus_id("00000000:1A:00.0"), "0000:1a:00.0");
        assert_eq!(normalise_bus_id("0000:1a:00.0"), "0000:1a:00.0");
        assert_eq!(normalise_bus_id("1a:00.0"), "0000:1a:00.0");
        assert_eq!(normalise_bus_id("junk"), "bus:junk");
    }
}
