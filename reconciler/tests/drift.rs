//! Drift between the declared pools and the observed nodes (DESIGN.md §3),
//! each with the action the plan takes about it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use reconciler::drift::detect;
use reconciler::load::parse_observed;
use reconciler::load::{SourceFile, load_fleet};
use reconciler::plan::{Action, Drift, DriftAction};
use reconciler::spec::Fleet;

const POOLS: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: h100}\nspec:\n  gpu: {model: H100, count: 4}\n  nvlink: full\n  size: {min: 2, max: 3}\n---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: a100}\nspec:\n  gpu: {model: A100, count: 2}\n  nvlink: pairs\n  size: {min: 0, max: 1}\n";

fn fleet() -> Fleet {
    let loaded = load_fleet(&[SourceFile::new("pools.yaml", POOLS)]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

fn gpus(model: &str, n: u32) -> String {
    let list: Vec<String> = (0..n)
        .map(|i| format!("{{index: {i}, model: {model}}}"))
        .collect();
    format!("[{}]", list.join(", "))
}

fn kinds(d: &[Drift]) -> Vec<(&'static str, Option<&str>, &'static str)> {
    d.iter()
        .map(|d| (d.kind.as_str(), d.node.as_deref(), d.action.as_str()))
        .collect()
}

#[test]
fn a_fleet_that_matches_has_no_drift() {
    let text = format!(
        "nodes:\n  - {{name: h100-0, pool: h100, gpus: {g}}}\n  - {{name: h100-1, pool: h100, gpus: {g}}}\n",
        g = gpus("H100", 4)
    );
    let observed = parse_observed("o.yaml", &text).unwrap();
    assert!(detect(&fleet(), &observed, &[]).is_empty());
}

#[test]
fn every_kind_is_reported_with_what_follows() {
    let text = format!(
        "nodes:\n  - {{name: a100-0, pool: a100, gpus: {a2}}}\n  - {{name: a100-1, pool: a100, gpus: {a2}}}\n  - {{name: h100-0, pool: h100, gpus: {h3}}}\n  - {{name: h100-1, pool: h100, gpus: [{{index: 0, model: H100}}, {{index: 1, model: H100, healthy: false, healthReason: XID 79}}, {{index: 2, model: H100}}, {{index: 3, model: L4}}]}}\n  - {{name: h100-2, pool: h100, gpus: {a2}}}\n  - {{name: stray, gpus: {h3}}}\n  - {{name: ghost, pool: gone, gpus: {a2}}}\n",
        a2 = gpus("A100", 2),
        h3 = gpus("H100", 3),
    );
    let observed = parse_observed("o.yaml", &text).unwrap();
    let actions = vec![
        Action::Scale {
            pool: "a100".into(),
            from: 2,
            to: 1,
            reason: String::new(),
            nodes: vec!["a100-1".into()],
        },
        Action::Drain {
            node: "h100-1".into(),
            reason: String::new(),
        },
    ];
    let d = detect(&fleet(), &observed, &actions);
    assert_eq!(
        kinds(&d),
        vec![
            ("excess-nodes", None, "scale"),
            ("unexpected-node", Some("ghost"), "report"),
            ("gpu-count", Some("h100-0"), "report"),
            ("gpu-model", Some("h100-1"), "report"),
            ("unhealthy-gpu", Some("h100-1"), "drain"),
            ("wrong-pool", Some("h100-2"), "report"),
            ("unexpected-node", Some("stray"), "report"),
        ]
    );
    let reason = |i: usize| d[i].reason.as_str();
    assert_eq!(reason(0), "pool a100 has 2 nodes, above its maximum 1");
    assert_eq!(
        reason(1),
        "node ghost is in pool gone, which is not declared, and gets no jobs; its GPUs match pool a100"
    );
    assert_eq!(reason(2), "node h100-0 has 3 GPUs; pool h100 declares 4");
    assert_eq!(
        reason(3),
        "GPU 3 of node h100-1 is not H100 and is never given out"
    );
    assert_eq!(d[3].gpus, vec![3]);
    assert_eq!(reason(4), "GPU 1: XID 79");
    assert_eq!(
        reason(5),
        "node h100-2 is in pool h100 (H100) but has A100 GPUs, the model of pool a100"
    );
    assert_eq!(
        reason(6),
        "node stray names no pool and gets no jobs; its GPUs match pool h100"
    );
}

#[test]
fn missing_nodes_follow_the_plans_scale_up() {
    let text = format!(
        "nodes:\n  - {{name: h100-0, pool: h100, gpus: {}}}\n",
        gpus("H100", 4)
    );
    let observed = parse_observed("o.yaml", &text).unwrap();
    let d = detect(&fleet(), &observed, &[]);
    assert_eq!(kinds(&d), vec![("missing-nodes", None, "report")]);
    assert_eq!(d[0].reason, "pool h100 has 1 node of its minimum 2");
    let scale = Action::Scale {
        pool: "h100".into(),
        from: 1,
        to: 2,
        reason: String::new(),
        nodes: Vec::new(),
    };
    assert_eq!(
        detect(&fleet(), &observed, &[scale])[0].action,
        DriftAction::Scale
    );
}

#[test]
fn labels_and_names_claim_pools() {
    let text = format!(
        "nodes:\n  - {{name: a100-0, pool: a100, labels: {{pool: h100}}, gpus: {a2}}}\n  - {{name: h100-0, pool: h100, gpus: {h4}}}\n  - {{name: h100-1, pool: h100, gpus: {h4}}}\n  - {{name: a100-7, pool: h100, gpus: {h4}}}\n",
        a2 = gpus("A100", 2),
        h4 = gpus("H100", 4)
    );
    let observed = parse_observed("o.yaml", &text).unwrap();
    let d = detect(&fleet(), &observed, &[]);
    assert_eq!(
        kinds(&d),
        vec![
            ("wrong-pool", Some("a100-0"), "report"),
            ("wrong-pool", Some("a100-7"), "report"),
        ]
    );
    assert_eq!(
        d[0].reason,
        "node a100-0 is in pool a100 but its label pool=h100 names pool h100"
    );
    assert_eq!(
        d[1].reason,
        "node a100-7 is in pool h100 but is named like a node of pool a100"
    );
}

#[test]
fn nvlink_shape_is_checked_when_recorded() {
    let pairs: Vec<String> = (0..4)
        .map(|i| format!("{{index: {i}, model: H100, nvlinkDomain: {}}}", i / 2 * 2))
        .collect();
    let text = format!(
        "nodes:\n  - {{name: h100-0, pool: h100, gpus: [{}]}}\n  - {{name: h100-1, pool: h100, gpus: {}}}\n",
        pairs.join(", "),
        gpus("H100", 4)
    );
    let observed = parse_observed("o.yaml", &text).unwrap();
    let d = detect(&fleet(), &observed, &[]);
    assert_eq!(kinds(&d), vec![("nvlink", Some("h100-0"), "report")]);
    assert_eq!(
        d[0].reason,
        "pool h100 declares nvlink: full; node h100-0 has NVLink pairs (0,1) (2,3)"
    );
}
