//! Accounting mode's pools as partitions (`Mapping::partitions`): each pool
//! becomes a Slurm partition of the same name holding the pool's nodes, so
//! users submit with `sbatch --partition=<pool>` (and scheduler mode reads
//! the pools back from the partitions). Slurm's nodes are those of
//! `slurm.conf`; a pool's nodes are the Slurm nodes with its GPU model's
//! GRES type and its GPU count, in natural order, dealt out to the pools of
//! that model in the order the fleet declares them (files in path order,
//! documents in file order), `size.max` each. Partitions are changed with
//! `scontrol` (`create`, `update … Nodes=`, `delete`); only partitions
//! gitfleet applied (kept in its last-applied state) are ever deleted.

use std::collections::{BTreeMap, BTreeSet};

use model::spec::Fleet;
use model::text::natural_cmp;

use crate::desired::{MapError, Mapping};
use crate::diff::{Change, ChangeKind, Diff, FieldChange, ObjectKind};
use crate::nodes::{SINFO_FORMAT, SlurmNode, parse_sinfo};
use crate::sacctmgr::{RunError, Runner};
use crate::state::Partition;

/// Reads the partitions (`scontrol show partition --oneliner`: every one,
/// also those without nodes) and their nodes (`sinfo -N`, one line per
/// node and partition). Also returns the nodes, for [`desired`].
pub fn read<R: Runner>(
    runner: &R,
) -> Result<(BTreeMap<String, Partition>, Vec<SlurmNode>), RunError> {
    let shown = runner.run(
        "scontrol",
        &["show".into(), "partition".into(), "--oneliner".into()],
    )?;
    let sinfo = runner.run(
        "sinfo",
        &["-h".into(), "-N".into(), "-o".into(), SINFO_FORMAT.into()],
    )?;
    let nodes = parse_sinfo(&sinfo).map_err(|stderr| RunError::Failed {
        command: "sinfo -N".into(),
        status: "unreadable output".into(),
        stderr,
    })?;
    Ok((current(&shown, &nodes), nodes))
}

/// The partitions of `scontrol show partition --oneliner` with the nodes
/// `sinfo -N` puts in them.
pub fn current(shown: &str, nodes: &[SlurmNode]) -> BTreeMap<String, Partition> {
    let mut out: BTreeMap<String, Partition> = shown
        .lines()
        .filter_map(|line| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix("PartitionName="))
        })
        .map(|name| {
            (
                name.to_string(),
                Partition {
                    name: name.to_string(),
                    nodes: Vec::new(),
                },
            )
        })
        .collect();
    for node in nodes {
        for partition in &node.partitions {
            if let Some(p) = out.get_mut(partition) {
                p.nodes.push(node.name.clone());
            }
        }
    }
    for p in out.values_mut() {
        p.nodes.sort_by(|a, b| natural_cmp(a, b));
        p.nodes.dedup();
    }
    out
}

/// The partition of each pool that has Slurm nodes (see the module doc).
pub fn desired(
    fleet: &Fleet,
    mapping: &Mapping,
    nodes: &[SlurmNode],
) -> Result<BTreeMap<String, Partition>, MapError> {
    let mut free: Vec<&SlurmNode> = nodes.iter().collect();
    free.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    let mut out = BTreeMap::new();
    for pool in &fleet.pools {
        crate::desired::check_name("pool", pool.name())?;
        let gres = mapping.gres_type(&pool.spec.gpu.model);
        let count = pool.spec.gpu.count;
        let max = usize::try_from(pool.spec.size.max).unwrap_or(usize::MAX);
        let mut taken = Vec::new();
        free.retain(|n| {
            let fits = taken.len() < max && n.gpus.iter().any(|(t, c)| *t == gres && *c == count);
            if fits {
                taken.push(n.name.clone());
            }
            !fits
        });
        if !taken.is_empty() {
            out.insert(
                pool.name().to_string(),
                Partition {
                    name: pool.name().to_string(),
                    nodes: taken,
                },
            );
        }
    }
    Ok(out)
}

/// Adds to `out` the changes and `scontrol` commands (arguments after
/// `scontrol`) that make `current` hold `desired`: new partitions are
/// created, a partition named like a pool gets the pool's nodes (a site's
/// own is adopted), and partitions gitfleet applied (`last`) that no pool
/// wants any more are deleted. Other partitions are left alone.
pub fn diff(
    current: &BTreeMap<String, Partition>,
    desired: &BTreeMap<String, Partition>,
    last: Option<&BTreeMap<String, Partition>>,
    out: &mut Diff,
) {
    for (name, p) in desired {
        let nodes = p.nodes.join(",");
        let Some(c) = current.get(name) else {
            out.changes.push(Change {
                kind: ChangeKind::Add,
                object: ObjectKind::Partition,
                name: name.clone(),
                fields: vec![FieldChange {
                    field: "Nodes",
                    current: String::new(),
                    desired: nodes.clone(),
                }],
                drift: last.is_some_and(|l| l.contains_key(name)),
            });
            out.scontrol.push(vec![
                "create".into(),
                format!("PartitionName={name}"),
                format!("Nodes={nodes}"),
                "State=UP".into(),
                "MaxTime=INFINITE".into(),
            ]);
            continue;
        };
        if c.nodes == p.nodes {
            continue;
        }
        let drift = last
            .and_then(|l| l.get(name))
            .is_some_and(|l| l.nodes == p.nodes);
        out.changes.push(Change {
            kind: ChangeKind::Modify,
            object: ObjectKind::Partition,
            name: name.clone(),
            fields: vec![FieldChange {
                field: "Nodes",
                current: c.nodes.join(","),
                desired: nodes.clone(),
            }],
            drift,
        });
        out.scontrol.push(vec![
            "update".into(),
            format!("PartitionName={name}"),
            format!("Nodes={nodes}"),
        ]);
    }
    let applied: BTreeSet<&String> = last.map(|l| l.keys().collect()).unwrap_or_default();
    for name in applied {
        if current.contains_key(name) && !desired.contains_key(name) {
            out.changes.push(Change {
                kind: ChangeKind::Delete,
                object: ObjectKind::Partition,
                name: name.clone(),
                fields: Vec::new(),
                drift: false,
            });
            out.scontrol
                .push(vec!["delete".into(), format!("PartitionName={name}")]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, partitions: &[&str], gres: &str, count: u32) -> SlurmNode {
        SlurmNode {
            name: name.into(),
            state: "idle".into(),
            partitions: partitions.iter().map(|p| (*p).to_string()).collect(),
            gpus: vec![(gres.into(), count)],
            reason: "none".into(),
        }
    }

    fn fleet() -> Fleet {
        let text = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: h100-b}
spec: {gpu: {model: H100-SXM-80GB, count: 8}, size: {min: 1, max: 1}}
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: h100-a}
spec: {gpu: {model: H100-SXM-80GB, count: 8}, size: {min: 1, max: 1}}
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: a100}
spec: {gpu: {model: A100-SXM4-80GB, count: 8}, size: {min: 2, max: 4}}
---
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: l4}
spec: {gpu: {model: L4, count: 4}, size: {min: 0, max: 4}}
";
        let loaded = load::load_fleet(&[load::SourceFile::new(
            "pools.yaml",
            text.as_bytes().to_vec(),
        )]);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    fn nodes() -> Vec<SlurmNode> {
        vec![
            node("gpu-10", &["gpu"], "h100-sxm-80gb", 8),
            node("gpu-2", &["gpu"], "h100-sxm-80gb", 8),
            node("gpu-3", &["gpu", "h100-a"], "a100-sxm4-80gb", 8),
            node("gpu-4", &["gpu"], "h100-sxm-80gb", 4),
        ]
    }

    #[test]
    fn pools_take_their_models_nodes_in_natural_order_up_to_their_size() {
        let d = desired(&fleet(), &Mapping::default(), &nodes()).unwrap();
        let got: Vec<(&str, Vec<&str>)> = d
            .values()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.nodes.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        // h100-b before h100-a (declared), gpu-2 before gpu-10 (natural);
        // gpu-4 has 4 GPUs, no pool of 4 H100; the L4 pool has no node.
        assert_eq!(
            got,
            [
                ("a100", vec!["gpu-3"]),
                ("h100-a", vec!["gpu-10"]),
                ("h100-b", vec!["gpu-2"])
            ]
        );
    }

    #[test]
    fn partitions_are_created_fixed_as_drift_and_deleted_only_when_applied() {
        let shown = "PartitionName=gpu AllowGroups=ALL Default=YES Nodes=gpu-[2-4,10] State=UP\n\
                     PartitionName=h100-a AllowGroups=ALL Nodes=gpu-3 State=UP\n\
                     PartitionName=old Nodes=(null) State=UP\n\
                     PartitionName=site Nodes=(null) State=UP\n";
        let current = current(shown, &nodes());
        assert_eq!(current["gpu"].nodes, ["gpu-2", "gpu-3", "gpu-4", "gpu-10"]);
        assert!(current["old"].nodes.is_empty());
        let wanted = desired(&fleet(), &Mapping::default(), &nodes()).unwrap();
        let mut last = wanted.clone();
        last.insert(
            "old".into(),
            Partition {
                name: "old".into(),
                nodes: vec!["gpu-9".into()],
            },
        );
        let mut d = Diff::default();
        diff(&current, &wanted, Some(&last), &mut d);
        let shown: Vec<String> = d.changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "+ add partition a100: Nodes=gpu-3 (drift: changed in Slurm, reverted)",
                "~ modify partition h100-a: Nodes gpu-3 → gpu-10 (drift: changed in Slurm, reverted)",
                "+ add partition h100-b: Nodes=gpu-2 (drift: changed in Slurm, reverted)",
                "- delete partition old",
            ]
        );
        assert_eq!(
            d.scontrol,
            [
                vec![
                    "create",
                    "PartitionName=a100",
                    "Nodes=gpu-3",
                    "State=UP",
                    "MaxTime=INFINITE"
                ],
                vec!["update", "PartitionName=h100-a", "Nodes=gpu-10"],
                vec![
                    "create",
                    "PartitionName=h100-b",
                    "Nodes=gpu-2",
                    "State=UP",
                    "MaxTime=INFINITE"
                ],
                vec!["delete", "PartitionName=old"],
            ]
        );
        // Without a last-applied state nothing is drift and nothing deleted
        // (`site` and `gpu` are the site's).
        let mut d = Diff::default();
        diff(&current, &wanted, None, &mut d);
        assert!(d.changes.iter().all(|c| !c.drift));
        assert!(d.changes.iter().all(|c| c.kind != ChangeKind::Delete));
        assert_eq!(d.changes.len(), 3);
    }
}
