//! Drift: the declared fleet (NodePools) against the observed one. Pure.
//!
//! Per pool (by name): fewer nodes than `size.min` (`missing-nodes`), more
//! than `size.max` (`excess-nodes`). Per node (by name), in this order:
//! - `unexpected-node`: no `pool`, or a pool not declared (it gets no jobs);
//! - `wrong-pool`: the node's GPU model is not its pool's but another pool's;
//!   or its model fits but its `pool` label, or its name (`Q-<n>`, as pools
//!   name their nodes), says pool `Q`;
//! - `gpu-model`: GPUs of a model no pool of that name declares (all of the
//!   node's, or some GPUs of a mixed node, which are never given out);
//! - `gpu-count`: more or fewer GPUs than the pool's `gpu.count`;
//! - `nvlink`: NVLink domains (recorded by `gitfleet inventory`) that do not
//!   have the shape of the pool's `nvlink`;
//! - `unhealthy-gpu`: unhealthy GPUs, with their reasons.
//!
//! Per running job: `job-spec` when it started with another spec (its
//! recorded runtime digest) than Git's now and no restart is asked for.
//!
//! Each drift says what follows, read off the plan's own actions: `drain`
//! when the plan drains the node, `scale` when it scales the pool, else
//! `report` (a person must fix the fleet or the specs).

use std::collections::BTreeMap;

use model::nvlink;
use model::observed::{ObservedNode, ObservedState, RunningJob};
use model::plan::{Action, Drift, DriftAction, DriftKind};
use model::spec::{Fleet, JobSpec, NodePoolSpec, NvLink, Object, RESTART_ANNOTATION};

/// The drift between `fleet`'s pools and `observed`, given the plan's actions.
pub fn detect(fleet: &Fleet, observed: &ObservedState, actions: &[Action]) -> Vec<Drift> {
    detect_kept(fleet, observed, &observed.nodes, actions, None, None)
}

/// Which observed nodes had no drift of their own (wrong pool, model,
/// count, NVLink, unhealthy GPUs) under which pools: whether a node has any
/// depends on the node and the pools only (the plan's actions say only what
/// follows from it), so an unchanged node of unchanged pools need not be
/// looked at again.
#[derive(Debug, Default)]
pub(crate) struct CleanNodes {
    /// The pools (by name, the first of a name) they were looked at under.
    pools: Vec<(String, NodePoolSpec)>,
    /// Per observed node, in the observed order: no drift of its own.
    clean: Vec<bool>,
}

impl CleanNodes {
    fn holds_for(&self, pools: &BTreeMap<&str, &NodePoolSpec>, nodes: usize) -> bool {
        self.clean.len() == nodes
            && self.pools.len() == pools.len()
            && self
                .pools
                .iter()
                .zip(pools)
                .all(|((n, s), (m, t))| n == m && s == *t)
    }
}

/// [`detect`], skipping the nodes `kept` knows to be clean; `kept`: `None`,
/// or what an earlier call said of the same observed nodes (`idleSince`
/// aside; `Some(None)`: nothing yet), replaced by what this call found when
/// the pools differ or nothing was kept. `names`: the fleet's jobs by name,
/// when the engine has them (made here otherwise), with each job's runtime
/// hash once known (by its place in the engine's table; filled in here).
pub(crate) fn detect_kept<'a>(
    fleet: &'a Fleet,
    observed: &ObservedState,
    nodes: &[ObservedNode],
    actions: &[Action],
    kept: Option<&mut Option<CleanNodes>>,
    names: Option<(&mut crate::JobNames<'a>, &mut [Option<u64>])>,
) -> Vec<Drift> {
    let mut pools: BTreeMap<&str, &NodePoolSpec> = BTreeMap::new();
    for p in &fleet.pools {
        pools.entry(p.name()).or_insert(&p.spec);
    }
    let known: Option<&[bool]> = kept
        .as_deref()
        .and_then(Option::as_ref)
        .filter(|k| k.holds_for(&pools, nodes.len()))
        .map(|k| k.clean.as_slice());
    let mut found_clean: Vec<bool> = match (&kept, known) {
        (Some(_), None) => Vec::with_capacity(nodes.len()),
        _ => Vec::new(),
    };
    // Each node's declared pool, found once (the last one found first:
    // nodes of a pool mostly come together), its count, and its drift;
    // the nodes that have any are listed after the pools' drift.
    let declared: Vec<(&str, &NodePoolSpec)> = pools.iter().map(|(n, s)| (*n, *s)).collect();
    let mut counts = vec![0u32; declared.len()];
    let mut last: Option<(&str, usize)> = None;
    let mut by_node: Vec<(&ObservedNode, Vec<Drift>)> = Vec::new();
    for (k, node) in nodes.iter().enumerate() {
        let pool = match (node.pool.as_deref(), last) {
            (None, _) => None,
            (Some(p), Some((name, i))) if name == p => Some(i),
            (Some(p), _) => {
                let i = declared.binary_search_by(|(n, _)| (*n).cmp(p)).ok();
                last = i.map(|i| (p, i));
                i
            }
        };
        if let Some(i) = pool {
            counts[i] += 1;
        }
        if known.is_some_and(|clean| clean[k]) {
            continue;
        }
        let mut found = Vec::new();
        node_drift(node, pool.map(|i| declared[i]), &pools, actions, &mut found);
        if kept.is_some() && known.is_none() {
            found_clean.push(found.is_empty());
        }
        if !found.is_empty() {
            by_node.push((node, found));
        }
    }
    let fresh = known.is_none();
    if let Some(slot) = kept.filter(|_| fresh) {
        *slot = Some(CleanNodes {
            pools: pools
                .iter()
                .map(|(n, s)| (n.to_string(), (*s).clone()))
                .collect(),
            clean: found_clean,
        });
    }
    let mut out = Vec::new();
    for (&(name, spec), &count) in declared.iter().zip(&counts) {
        let scaled = |grow: bool| {
            actions.iter().any(|a| {
                matches!(a, Action::Scale { pool, from, to, .. }
                    if pool == name && (to > from) == grow)
            })
        };
        let follow = |grow| {
            if scaled(grow) {
                DriftAction::Scale
            } else {
                DriftAction::Report
            }
        };
        if count < spec.size.min {
            out.push(Drift {
                kind: DriftKind::MissingNodes,
                pool: Some(name.to_string()),
                node: None,
                gpus: Vec::new(),
                job: None,
                reason: format!(
                    "pool {name} has {count} node{} of its minimum {}",
                    plural(count),
                    spec.size.min
                ),
                action: follow(true),
            });
        } else if count > spec.size.max {
            out.push(Drift {
                kind: DriftKind::ExcessNodes,
                pool: Some(name.to_string()),
                node: None,
                gpus: Vec::new(),
                job: None,
                reason: format!(
                    "pool {name} has {count} nodes, above its maximum {}",
                    spec.size.max
                ),
                action: follow(false),
            });
        }
    }
    // The nodes with drift in natural order (`n2` before `n10`: drift is
    // listed for people); sorting only those keeps a fleet without drift
    // linear.
    by_node.sort_by(|a, b| model::text::natural_cmp(&a.0.name, &b.0.name));
    out.extend(by_node.into_iter().flat_map(|(_, found)| found));
    job_spec_drift(fleet, observed, names, &mut out);
    out
}

/// Running jobs that started with another spec than Git's now, by the digest
/// recorded when they started; a job the plan restarts is not listed (its
/// `preempt` says so), nor one that is stopping anyway.
fn job_spec_drift<'a>(
    fleet: &'a Fleet,
    observed: &ObservedState,
    names: Option<(&mut crate::JobNames<'a>, &mut [Option<u64>])>,
    out: &mut Vec<Drift>,
) {
    let running: Vec<(usize, &RunningJob)> = observed
        .running
        .iter()
        .enumerate()
        .filter(|(_, r)| r.spec_digest.is_some() && r.preempting_since.is_none())
        .collect();
    if running.is_empty() {
        return;
    }
    // By name, the first of a name winning (inserted last); hashed: a
    // fleet's jobs outnumber its running ones, and only look-ups follow.
    // The engine's table when given (the same rule).
    let (mut names_back, mut hashes) = match names {
        Some((names, hashes)) => (Some(names), Some(hashes)),
        None => (None, None),
    };
    // What each record's job said of it before (kept while both stood
    // still): taken for the loop, given back after it.
    let mut said = names_back.as_deref_mut().map(|n| n.take_said());
    let names = names_back.as_deref();
    let made: rustc_hash::FxHashMap<&str, &'a Object<JobSpec>> = match names {
        Some(_) => rustc_hash::FxHashMap::default(),
        None => {
            let mut specs = rustc_hash::FxHashMap::default();
            specs.reserve(fleet.jobs.len());
            for j in fleet.jobs.iter().rev() {
                specs.insert(j.name(), j);
            }
            specs
        }
    };
    // The engine looked the running records' names up already.
    let spec_of = |k: usize, name: &str| match names {
        Some(names) => {
            let found = names.of_running(k);
            debug_assert_eq!(
                found.map(|(j, _)| j),
                names.get(name).map(|(j, _)| j),
                "a running record's job differs from its name's"
            );
            found.map(|(j, spec)| (Some(j), spec))
        }
        None => made.get(name).map(|spec| (None, *spec)),
    };
    // Found in file order, listed by name (a job's records in file order):
    // only the jobs with drift are sorted.
    let mut found: Vec<(&str, Drift)> = Vec::new();
    for (k, r) in running {
        let Some((j, spec)) = spec_of(k, r.job.as_str()) else {
            continue;
        };
        let said = said.as_deref_mut().and_then(|said| said.get_mut(k));
        if let Some(said) = &said
            && said.older == Some(false)
        {
            debug_assert!(
                spec.restart_requested(r).is_some() || !spec.runs_older_spec(r),
                "a kept drift verdict is stale"
            );
            continue;
        }
        let restart = match &said {
            Some(said) if said.restart == Some(false) => false,
            _ => spec.restart_requested(r).is_some(),
        };
        if restart {
            if let Some(said) = said {
                said.older = Some(false);
            }
            continue;
        }
        let known = j.and_then(|j| hashes.as_deref_mut()?.get_mut(j as usize));
        let older = match known {
            Some(slot) => spec.runs_older_spec_with(r, || {
                let hash = *slot.get_or_insert_with(|| spec.spec.runtime_hash());
                debug_assert_eq!(
                    hash,
                    spec.spec.runtime_hash(),
                    "a kept runtime hash is stale"
                );
                hash
            }),
            None => spec.runs_older_spec(r),
        };
        if let Some(said) = said {
            said.older = Some(older);
        }
        if !older {
            continue;
        }
        let drift = Drift {
            kind: DriftKind::JobSpec,
            pool: None,
            node: None,
            gpus: Vec::new(),
            job: Some(r.job.clone()),
            reason: format!(
                "job {} runs an older spec: {} changed in Git since it started; set annotation {RESTART_ANNOTATION} to a new value to restart it",
                r.job,
                spec.spec.runtime_fields_text()
            ),
            action: DriftAction::Report,
        };
        found.push((&r.job, drift));
    }
    found.sort_by(|a, b| a.0.cmp(b.0));
    out.extend(found.into_iter().map(|(_, drift)| drift));
    if let (Some(names), Some(said)) = (names_back, said) {
        names.give_said(said);
    }
}

/// `declared`: the node's pool and its spec, when its pool is declared.
fn node_drift(
    node: &ObservedNode,
    declared: Option<(&str, &NodePoolSpec)>,
    pools: &BTreeMap<&str, &NodePoolSpec>,
    actions: &[Action],
    out: &mut Vec<Drift>,
) {
    let push = |out: &mut Vec<Drift>, kind, gpus: Vec<u32>, reason: String, action| {
        out.push(Drift {
            kind,
            pool: node.pool.clone(),
            node: Some(node.name.clone()),
            gpus,
            job: None,
            reason,
            action,
        });
    };
    let model = majority_model(node);
    let fits = |spec: &NodePoolSpec| model == Some(spec.gpu.model.as_str());
    let hint = || {
        let matching: Vec<&str> = pools
            .iter()
            .filter(|(_, s)| fits(s))
            .map(|(n, _)| *n)
            .collect();
        if matching.is_empty() {
            String::new()
        } else {
            format!("; its GPUs match pool {}", matching.join(", "))
        }
    };
    match (&node.pool, declared) {
        (None, _) => push(
            out,
            DriftKind::UnexpectedNode,
            Vec::new(),
            format!(
                "node {} names no pool and gets no jobs{}",
                node.name,
                hint()
            ),
            DriftAction::Report,
        ),
        (Some(p), None) => push(
            out,
            DriftKind::UnexpectedNode,
            Vec::new(),
            format!(
                "node {} is in pool {p}, which is not declared, and gets no jobs{}",
                node.name,
                hint()
            ),
            DriftAction::Report,
        ),
        (Some(_), Some((pool, spec))) => declared_pool_drift(node, pool, spec, pools, model, out),
    }
    let bad: Vec<_> = node.gpus.iter().filter(|g| !g.healthy).collect();
    if !bad.is_empty() {
        let mut gpus: Vec<u32> = bad.iter().map(|g| g.index).collect();
        gpus.sort_unstable();
        let mut reasons: Vec<String> = bad
            .iter()
            .map(|g| match &g.health_reason {
                Some(r) => format!("GPU {}: {r}", g.index),
                None => format!("GPU {} unhealthy", g.index),
            })
            .collect();
        reasons.sort();
        let drained = actions
            .iter()
            .any(|a| matches!(a, Action::Drain { node: n, .. } if *n == node.name));
        push(
            out,
            DriftKind::UnhealthyGpu,
            gpus,
            reasons.join("; "),
            if drained {
                DriftAction::Drain
            } else {
                DriftAction::Report
            },
        );
    }
}

/// Drift of a node in a declared pool: wrong pool, model, count, NVLink.
fn declared_pool_drift(
    node: &ObservedNode,
    pool: &str,
    spec: &NodePoolSpec,
    pools: &BTreeMap<&str, &NodePoolSpec>,
    model: Option<&str>,
    out: &mut Vec<Drift>,
) {
    let mut push = |kind, gpus: Vec<u32>, reason: String| {
        out.push(Drift {
            kind,
            pool: Some(pool.to_string()),
            node: Some(node.name.clone()),
            gpus,
            job: None,
            reason,
            action: DriftAction::Report,
        });
    };
    let want = spec.gpu.model.as_str();
    if let Some(have) = model.filter(|m| *m != want) {
        let other: Vec<&str> = pools
            .iter()
            .filter(|(n, s)| **n != pool && s.gpu.model == have)
            .map(|(n, _)| *n)
            .collect();
        if other.is_empty() {
            push(
                DriftKind::GpuModel,
                Vec::new(),
                format!(
                    "node {} has {have} GPUs; pool {pool} declares {want}",
                    node.name
                ),
            );
        } else {
            push(
                DriftKind::WrongPool,
                Vec::new(),
                format!(
                    "node {} is in pool {pool} ({want}) but has {have} GPUs, the model of pool {}",
                    node.name,
                    other.join(", ")
                ),
            );
        }
        return;
    }
    if let Some(other) = claimed_pool(node, pool, pools) {
        push(DriftKind::WrongPool, Vec::new(), other);
        return;
    }
    let mut odd: Vec<u32> = node
        .gpus
        .iter()
        .filter(|g| g.model != want)
        .map(|g| g.index)
        .collect();
    odd.sort_unstable();
    if !odd.is_empty() {
        push(
            DriftKind::GpuModel,
            odd.clone(),
            format!(
                "{} of node {} {} not {want} and {} never given out",
                gpu_list(&odd),
                node.name,
                if odd.len() == 1 { "is" } else { "are" },
                if odd.len() == 1 { "is" } else { "are" },
            ),
        );
    }
    let have = node.gpus.len() as u32;
    if have != spec.gpu.count {
        push(
            DriftKind::GpuCount,
            Vec::new(),
            format!(
                "node {} has {have} GPU{}; pool {pool} declares {}",
                node.name,
                plural(have),
                spec.gpu.count
            ),
        );
    }
    if let Some(domains) = nvlink::observed_domains(node)
        && !nvlink::matches(spec.nvlink, &domains)
    {
        push(
            DriftKind::Nvlink,
            Vec::new(),
            format!(
                "pool {pool} declares nvlink: {}; node {} has {}",
                nvlink_name(spec.nvlink),
                node.name,
                nvlink::describe(&domains)
            ),
        );
    }
}

/// The other pool a node's `pool` label or name claims, in words.
fn claimed_pool(
    node: &ObservedNode,
    pool: &str,
    pools: &BTreeMap<&str, &NodePoolSpec>,
) -> Option<String> {
    if let Some(label) = node.labels.get("pool")
        && label != pool
        && pools.contains_key(label.as_str())
    {
        return Some(format!(
            "node {} is in pool {pool} but its label pool={label} names pool {label}",
            node.name
        ));
    }
    let named = |p: &str| {
        node.name
            .strip_prefix(p)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if named(pool) {
        return None;
    }
    let other = pools
        .keys()
        .copied()
        .filter(|p| named(p))
        .max_by_key(|p| p.len())?;
    Some(format!(
        "node {} is in pool {pool} but is named like a node of pool {other}",
        node.name
    ))
}

/// The node's most common GPU model (ties: the smaller name), as the engine sees it.
fn majority_model(node: &ObservedNode) -> Option<&str> {
    let first = node.gpus.first()?.model.as_str();
    // The common node: every GPU of one model.
    if node.gpus.iter().all(|g| g.model == first) {
        return Some(first);
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &node.gpus {
        *counts.entry(g.model.as_str()).or_default() += 1;
    }
    let best = counts.values().copied().max()?;
    counts.into_iter().find(|(_, n)| *n == best).map(|(m, _)| m)
}

fn gpu_list(gpus: &[u32]) -> String {
    let ids: Vec<String> = gpus.iter().map(u32::to_string).collect();
    format!(
        "GPU{} {}",
        if gpus.len() == 1 { "" } else { "s" },
        ids.join(", ")
    )
}

fn nvlink_name(n: NvLink) -> &'static str {
    match n {
        NvLink::Full => "full",
        NvLink::Pairs => "pairs",
        NvLink::None => "none",
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use model::observed::ObservedGpu;

    fn node(name: &str, pool: Option<&str>, models: &[&str]) -> ObservedNode {
        ObservedNode {
            name: name.to_string(),
            pool: pool.map(str::to_string),
            labels: BTreeMap::new(),
            idle_since: None,
            gpus: models
                .iter()
                .enumerate()
                .map(|(i, m)| ObservedGpu::new(i as u32, (*m).to_string()))
                .collect(),
        }
    }

    #[test]
    fn nodes_with_drift_are_listed_in_natural_order_and_others_not_at_all() {
        let observed = ObservedState {
            nodes: vec![
                node("n10", None, &["H100"]),
                node("n3", Some("nowhere"), &["H100", "A100", "A100"]),
                node("n2", None, &["A100"]),
            ],
            ..ObservedState::default()
        };
        let drift = detect(&Fleet::default(), &observed, &[]);
        let nodes: Vec<&str> = drift.iter().filter_map(|d| d.node.as_deref()).collect();
        assert_eq!(nodes, ["n2", "n3", "n10"]);
        assert!(drift.iter().all(|d| d.kind == DriftKind::UnexpectedNode));
        // A mixed node's model is its majority's.
        assert_eq!(majority_model(&observed.nodes[1]), Some("A100"));
        assert_eq!(majority_model(&node("e", None, &[])), None);
    }
}
